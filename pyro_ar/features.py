r"""Feature matrices (dense arrays or scipy.sparse) for the linear models: as tensors for training
(:func:`training_features`: one tensor, or :class:`SparseRows`, densified or kept sparse
minibatch by minibatch) and for prediction (:func:`feature_rows`: rows fetched chunk by chunk,
in float64); their standardisation (:func:`fit_scaler`, :func:`apply_scaler`); and the checks
of a matrix's structure that must run before anything reads it (:func:`check_feature_matrix`)."""

import math

import numpy as np
import torch

try:  # scipy is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

from .training_path import SPARSE_MAX_DENSITY, SPARSE_MIN_FEATURES

__all__ = ["DENSIFY_MAX_ELEMENTS", "MAX_ACTIVE_Z", "MAX_FEATURES", "SparseRows", "apply_scaler", "check_feature_matrix",
           "feature_rows", "fit_scaler", "training_features"]

#: A nearly constant feature's active rows lie at most this many scales from its majority value
#: in root mean square (:func:`fit_scaler`): the range of a standardised Gaussian feature.
MAX_ACTIVE_Z = 3.0

#: Sparse training matrices with at most this many entries (rows x features) are
#: densified once; larger ones are densified minibatch by minibatch.
DENSIFY_MAX_ELEMENTS = 1 << 24


class SparseRows:
    """A CSR matrix seen by :class:`~pyro_ar.models.LinearClassifier` as an (N, D) tensor.

    ``rows[idx]`` densifies only the rows ``idx`` (the data plate's subsample), so a large
    sparse design matrix is never densified as a whole; with ``sparse=True`` it returns
    them as a torch sparse COO batch instead (never densified: the sparse path); with
    ``sparse="auto"`` a batch stays sparse when it is as sparse and wide as the sparse path's
    inputs (:func:`~pyro_ar.training_path.choose_path`), else it is densified.

    Example:

    >>> import scipy.sparse as sp, torch
    >>> from pyro_ar.features import SparseRows
    >>> rows = SparseRows(sp.eye(5, format="csr"), torch.float32, "cpu", sparse=True)
    >>> rows[torch.tensor([3, 0])].to_dense().tolist()[0]
    [0.0, 0.0, 0.0, 1.0, 0.0]
    """

    def __init__(self, X, dtype, device, sparse=False):
        self.X = X.tocsr()
        self.shape = torch.Size(self.X.shape)
        self.dtype, self.device, self.sparse = dtype, device, sparse
        self.layout = torch.sparse_coo if sparse is True else torch.strided

    def dim(self):
        return 2

    def __len__(self):
        return self.shape[0]

    def _keeps_sparse(self, batch) -> bool:
        if self.sparse != "auto":
            return bool(self.sparse)
        n, d = batch.shape
        return d >= SPARSE_MIN_FEATURES and batch.nnz <= SPARSE_MAX_DENSITY * n * d

    def __getitem__(self, idx):
        rows = idx.detach().cpu().numpy() if torch.is_tensor(idx) else idx
        batch = self.X[rows]
        if not self._keeps_sparse(batch):
            return torch.tensor(batch.toarray(), dtype=self.dtype, device=self.device)
        nz = np.stack([np.repeat(np.arange(batch.shape[0]), np.diff(batch.indptr)), batch.indices])
        return torch.sparse_coo_tensor(torch.as_tensor(nz, dtype=torch.long), torch.as_tensor(batch.data),
                                       batch.shape, is_coalesced=bool(batch.has_canonical_format),
                                       check_invariants=False).to(device=self.device, dtype=self.dtype)


def training_features(X, dtype, device, sparse_inputs: bool = False):
    """The training features as the model takes them: a tensor, or :class:`SparseRows`
    (densified minibatch by minibatch, or sparse batches with ``sparse_inputs``).

    Example:

    >>> import numpy as np, torch
    >>> from pyro_ar.features import training_features
    >>> training_features(np.eye(3), torch.float32, "cpu").dtype
    torch.float32
    """
    if sp.issparse(X):
        if sparse_inputs:
            return SparseRows(X, dtype, device, sparse=True)
        if X.shape[0] * X.shape[1] > DENSIFY_MAX_ELEMENTS:
            return SparseRows(X, dtype, device)
        X = X.toarray()
    return torch.tensor(np.asarray(X), dtype=dtype, device=device)


def feature_rows(X, device):
    """The rows of ``X`` for :func:`~pyro_ar.evaluation.linear_source`, fetched chunk by chunk:
    a dense array as a CPU tensor sharing its memory, a scipy.sparse matrix as
    :class:`SparseRows` (float64 on ``device``; a chunk stays sparse when it is as sparse and
    wide as the sparse path's inputs, else it is densified).

    Example:

    >>> import scipy.sparse as sp
    >>> from pyro_ar.features import feature_rows
    >>> feature_rows(sp.eye(4, format="csr"), "cpu")[[1]].tolist()
    [[0.0, 1.0, 0.0, 0.0]]
    """
    if sp is not None and sp.issparse(X):
        return SparseRows(X, torch.float64, device, sparse="auto")
    return torch.as_tensor(np.asarray(X))



def fit_scaler(X, sparse_inputs: bool = False, idf: bool = False):
    r"""Per-feature ``(mean, scale)`` for standardising ``X``: dense -- mean and standard
    deviation; sparse -- no centring (mean 0, the sparsity is kept) and the root mean square.

    A feature that one value :math:`m_j` holds on more than half the rows (*nearly constant*:
    a border pixel that is almost always 0, a rare binary word) is one that its standard
    deviation would blow up: a 0/1 feature active on a fraction p of the rows has
    :math:`\sigma_j = \sqrt{p(1 - p)}` and becomes :math:`\sqrt{(1-p)/p}` where it is active
    (245 for one MNIST training image in 60,000), and a fit with a fixed step size diverges on
    such inputs. Its scale is floored so that the rows where it is active lie at most
    :data:`MAX_ACTIVE_Z` (3) scales from :math:`m_j` in root mean square, the range of a
    Gaussian feature's values:

    .. math::

        s_j = \max\Bigl(\sigma_j, \frac{a_j}{3}\Bigr), \qquad
        a_j = \sqrt{\frac{1}{|A_j|}\sum_{i \in A_j} (x_{ij} - m_j)^2}, \quad
        A_j = \{i : x_{ij} \ne m_j\}

    (sparse: :math:`m_j = 0`, :math:`A_j` its non-zeros; a 0/1 feature keeps its
    :math:`\sigma_j` down to p = 0.1). Every other feature keeps its own standard deviation
    (sparse: root mean square), whatever the other features' scales, and a constant feature
    gets scale 1. Every scale is therefore equivariant, :math:`s_j(c\,x_{:j} + b) = |c|\,
    s_j(x_{:j})` (sparse: b = 0), so the standardised features, hence the fit, do not depend on
    the units of each column.

    With ``sparse_inputs`` (the sparse path: bags of words and the like, where most features
    are rare and per-feature scaling would blow each rare word up) every feature gets one
    scale, the root mean square row norm, so that rows have unit mean squared norm.

    With ``idf`` (sparse X; the weight-pattern path, few rows per class) feature j is weighted
    by its inverse document frequency, scale :math:`1/\mathrm{idf}_j` with
    :math:`\mathrm{idf}_j = \log\frac{1 + N}{1 + \mathrm{df}_j}`, df the rows where it is
    non-zero (rows are then L2-normalised by :func:`apply_scaler`): with three rows per class a
    class's weights cannot learn that a word found in every other gloss says little, and
    binary features let such words dominate (WordNet's reverse dictionary: the centroid
    scorer's top-1 goes from 3.4% to 7.3%).

    Example:

    >>> import scipy.sparse as sp
    >>> from pyro_ar.features import fit_scaler
    >>> X = sp.csr_matrix([[3.0, 0.0, 0.0], [0.0, 4.0, 0.0]])
    >>> fit_scaler(X, sparse_inputs=True)[1].tolist()    # sqrt((9 + 16) / 2)
    [3.5355339059327378, 3.5355339059327378, 3.5355339059327378]
    """
    if sp is not None and sp.issparse(X):  # (in float64: a float32 value near 3e38 squares to inf)
        X = X.astype(np.float64)
    if idf:
        df = np.bincount(X.indices[X.data != 0], minlength=X.shape[1])
        weight = np.log((1.0 + X.shape[0]) / (1.0 + df))
        return np.zeros(X.shape[1]), 1.0 / np.maximum(weight, 1e-12)
    if sp is not None and sp.issparse(X):
        if sparse_inputs:
            rms = math.sqrt(X.multiply(X).sum() / max(X.shape[0], 1)) or 1.0
            return np.zeros(X.shape[1]), np.full(X.shape[1], rms)
        X = X.tocsr()
        X.sum_duplicates()
        return np.zeros(X.shape[1]), _sparse_scale(X)
    X = np.asarray(X)  # (float64 sums: float32 ones overflow for features near 3e38)
    if sparse_inputs:
        rms = math.sqrt(np.square(X, dtype=np.float64).sum() / max(X.shape[0], 1)) or 1.0
        return np.zeros(X.shape[1]), np.full(X.shape[1], rms)
    return X.mean(axis=0, dtype=np.float64), _dense_scale(X)


def _with_nearly_constant(std, active_ms, n_active, n_rows):
    """Each feature's scale (:func:`fit_scaler`): ``std``, floored where one value holds more
    than half the ``n_rows`` rows at the root of ``active_ms`` (the mean square deviation from
    that value over its ``n_active`` other rows) over :data:`MAX_ACTIVE_Z`; 1 for a constant
    feature."""
    nearly_constant = 2 * n_active < n_rows
    scale = np.where(nearly_constant, np.maximum(std, np.sqrt(active_ms) / MAX_ACTIVE_Z), std)
    return np.where((scale > 0) & (n_active > 0), scale, 1.0)  # (a constant's std may round to 1e-17)


def _dense_scale(X, chunk_elements: int = 1 << 22):
    """:func:`fit_scaler`'s scales of a dense ``X``, a block of columns at a time (the copy
    that finds each column's majority value, the value at its middle rank, stays small)."""
    N, D = X.shape
    scale = np.ones(D)
    step = max(1, chunk_elements // max(N, 1))
    for lo in range(0, D if N else 0, step):
        block = np.asarray(X[:, lo:lo + step], dtype=np.float64)
        mode = np.partition(block, N // 2, axis=0)[N // 2]  # (a value on > N/2 rows holds rank N//2)
        dev = block - mode
        n_active = np.count_nonzero(dev, axis=0)
        active_ms = np.square(dev).sum(axis=0) / np.maximum(n_active, 1)
        scale[lo:lo + step] = _with_nearly_constant(block.std(axis=0), active_ms, n_active, N)
    return scale


def _sparse_scale(X):
    """:func:`fit_scaler`'s scales of a CSR ``X`` (float64; the majority value of a feature
    that is zero on more than half the rows is 0)."""
    N, D = X.shape
    nonzero = X.data != 0
    n_active = np.bincount(X.indices[nonzero], minlength=D)
    sums = np.bincount(X.indices[nonzero], weights=np.square(X.data[nonzero]), minlength=D)
    return _with_nearly_constant(np.sqrt(sums / max(N, 1)), sums / np.maximum(n_active, 1), n_active, N)


def apply_scaler(X, mean, scale, normalize_rows: bool = False):
    """``(X - mean) / scale`` (sparse: ``X / scale``, then each row divided by its L2 norm
    with ``normalize_rows``); ``X`` itself when ``mean`` is None.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.features import apply_scaler
    >>> apply_scaler(np.array([[1.0, 4.0]]), np.array([1.0, 2.0]), np.array([1.0, 2.0])).tolist()
    [[0.0, 1.0]]
    """
    if mean is None:
        return X
    if sp is not None and sp.issparse(X):
        X = sp.csr_matrix(X.multiply(1.0 / scale).astype(X.dtype))
        if normalize_rows:
            norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).reshape(-1)
            X = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X, dtype=X.dtype)
        return X
    return ((X - mean) / scale).astype(X.dtype, copy=False)  # (float64 arithmetic: mean is)


#: The most features ``X`` may have: each feature costs at least 24 bytes in the estimator (its
#: scale and mean in float64, a float32 weight for each of at least 2 classes), so 2^31 - 1
#: features already need 48 GiB; beyond, the first per-feature array fails to allocate.
MAX_FEATURES = 2**31 - 1


def check_feature_matrix(X, name: str = "X") -> None:
    r"""Refuse, by name, a feature matrix that scikit-learn's checks would pass on to code that
    crashes or fails obscurely: a torch sparse tensor, more than :data:`MAX_FEATURES`
    columns, or a scipy.sparse matrix whose structure is broken (run before anything reads it).

    A compressed matrix (CSR, CSC, BSR) must have an integer ``indptr`` of ``n_major + 1``
    non-decreasing entries from 0 to at most ``len(indices) == len(data)``, and integer
    ``indices`` in ``[0, n_minor)``; a COO matrix coordinates inside its shape. scipy checks
    only the lengths and dtypes when a matrix is built or its arrays are assigned, and its
    compiled routines (slicing, products, conversions) read out of bounds on such a matrix:
    the process dies (SIGSEGV / SIGABRT) or the fit trains silently on garbage. The check is
    a few vectorised reductions over ``indptr`` and ``indices`` (O(nnz)), far below a fit.

    Example:

    >>> import scipy.sparse as sp
    >>> from pyro_ar.features import check_feature_matrix
    >>> X = sp.eye(3, format="csr")
    >>> X.indices[0] = 7
    >>> check_feature_matrix(X)
    Traceback (most recent call last):
    ...
    ValueError: X is not a valid scipy.sparse csr matrix: its column indices must lie in [0, 3) (the matrix has 3 columns), got [7] (the first at X.indices[0]); rebuild it (e.g. scipy.sparse.csr_matrix((data, (rows, cols)), shape=...))
    """
    if isinstance(X, torch.Tensor) and X.layout != torch.strided:
        raise ValueError(f"{name} must be a numpy array or a scipy.sparse matrix, got a torch sparse "
                         f"tensor ({X.layout}, shape {tuple(X.shape)}); convert it with "
                         f"pyro_ar.datasets.to_scipy_csr({name}) (or {name}.to_dense() if it is small)")
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover
        return
    shape = getattr(X, "shape", None)
    if shape is not None and len(shape) == 2 and int(shape[1]) > MAX_FEATURES:
        raise ValueError(f"{name} has {int(shape[1])} features (columns), more than ARClassifier supports, "
                         f"{MAX_FEATURES} (each feature holds at least 24 bytes: a model on {int(shape[1])} "
                         f"would need {24 * int(shape[1]) / 2**30:.3g} GiB); drop the unused columns")
    if sp.issparse(X):
        _check_sparse_structure(X, name)


def _sparse_problem(what: str, values, first: int, where: str, name: str, fmt: str) -> ValueError:
    return ValueError(f"{name} is not a valid scipy.sparse {fmt} matrix: {what}, got {values[:5].tolist()} "
                      f"(the first at {name}.{where}[{first}]); rebuild it (e.g. "
                      f"scipy.sparse.csr_matrix((data, (rows, cols)), shape=...))")


def _check_sparse_structure(X, name: str) -> None:
    """The structure checks of :func:`check_feature_matrix` on a scipy.sparse matrix."""
    fmt, (rows, cols) = X.format, X.shape
    if fmt == "coo":
        for coord, size, what in ((X.row, rows, "row"), (X.col, cols, "col")):
            if coord.size and (coord.min() < 0 or coord.max() >= size):
                bad = np.flatnonzero((coord < 0) | (coord >= size))
                raise _sparse_problem(f"its {what} coordinates must lie in [0, {size})", coord[bad], int(bad[0]),
                                      what, name, fmt)
        return
    if fmt not in ("csr", "csc", "bsr"):
        return  # (lil, dok, dia: converted by numpy code, which checks its indices)
    blocks = X.blocksize if fmt == "bsr" else (1, 1)
    major, minor = (rows // blocks[0], cols // blocks[1]) if fmt != "csc" else (cols, rows)
    axis = "column" if fmt != "csc" else "row"
    indptr, indices, data = X.indptr, X.indices, X.data
    for arr, where in ((indptr, "indptr"), (indices, "indices")):
        if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
            raise ValueError(f"{name} is not a valid scipy.sparse {fmt} matrix: {name}.{where} must be a 1-D "
                             f"integer array, got dtype {arr.dtype} and shape {arr.shape}")
    if len(indptr) != major + 1:
        raise ValueError(f"{name} is not a valid scipy.sparse {fmt} matrix: {name}.indptr must have "
                         f"{major + 1} entries (one more than its {major} {'rows' if fmt != 'csc' else 'columns'}), "
                         f"got {len(indptr)}")
    if len(indices) != len(data):
        raise ValueError(f"{name} is not a valid scipy.sparse {fmt} matrix: {name}.indices and {name}.data "
                         f"must have the same length, got {len(indices)} and {len(data)}")
    if indptr[0] != 0 or indptr[-1] > len(indices):
        raise ValueError(f"{name} is not a valid scipy.sparse {fmt} matrix: {name}.indptr must run from 0 "
                         f"to at most len({name}.indices) = {len(indices)}, got {int(indptr[0])} .. {int(indptr[-1])}")
    steps = np.diff(indptr)
    if steps.size and steps.min() < 0:
        bad = np.flatnonzero(steps < 0)
        raise _sparse_problem(f"{name}.indptr must be non-decreasing", indptr[bad + 1], int(bad[0]) + 1,
                              "indptr", name, fmt)
    used = indices[:int(indptr[-1])]
    if used.size and (used.min() < 0 or used.max() >= minor):
        bad = np.flatnonzero((used < 0) | (used >= minor))
        raise _sparse_problem(f"its {axis} indices must lie in [0, {minor}) (the matrix has {minor} "
                              f"{axis}s{' of blocks' if fmt == 'bsr' else ''})", used[bad], int(bad[0]),
                              "indices", name, fmt)

"""The estimator's plumbing: argument checks, seeding, data conversion, labels, state."""

import math
import numbers
import random
import warnings
from contextlib import contextmanager
from typing import NamedTuple, Optional

import numpy as np
import torch

import pyro
from pyro.distributions import constraints as pyro_constraints


try:  # scikit-learn / scipy are optional dependencies of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

#: Sparse training matrices with at most this many entries (rows x features) are
#: densified once; larger ones are densified minibatch by minibatch.
DENSIFY_MAX_ELEMENTS = 1 << 24
#: A full-rank W is kept while its training memory -- W, the two Adam moments and the
#: per-entry step counts, 16 bytes per entry -- stays below this; above, the low rank W = V E^T.
FULL_RANK_MAX_BYTES = 1 << 31
#: The rank chosen when ``rank="auto"`` goes low rank (dense inputs).
AUTO_RANK = 128
#: Sparse inputs whose full-rank W does not fit: W on the training class-feature pattern,
#: started at (and shrunk towards) the class centroids of the tf-idf rows times this
#: temperature, with this prior scale around them when ``prior_scale="auto"`` (measured on
#: the WordNet reverse dictionary, ``benchmarks/peers.py``; see ``docs/choosing.rst``).
PATTERN_INIT_TEMPERATURE = 15.0
PATTERN_PRIOR_SCALE = 0.3
PATTERN_MAX_EPOCHS = 8
#: Sparse input takes the sparse path when at most this fraction of its entries are non-zero
#: (and it has at least ``SPARSE_MIN_FEATURES`` features); denser input is densified.
SPARSE_MAX_DENSITY = 0.1
SPARSE_MIN_FEATURES = 128
#: ``strategy="auto"`` uses per-datapoint negatives unless a step would then gather more than
#: this many numbers (batch x (1 + s) x the width of a class's gathered weights): shared ones.
GATHER_MAX_ELEMENTS = 1 << 24
#: ``strategy="auto"`` draws importance negatives (training class frequencies^0.75) when the
#: labels are skewed: their effective number of classes, exp(entropy of the class
#: frequencies), is below this fraction of K (uniform negatives then rarely hit the classes
#: that carry the normaliser; measured on the Brown bag of words, ``benchmarks/sparse.py``).
SKEWED_LABELS_FRACTION = 0.5

_NOISES = ("gumbel", "normal", "logistic")
_STRATEGIES = ("auto", "per_datapoint", "shared", "importance")
_WEIGHTS = ("mle", "map", "bayes")
_LIKELIHOODS = ("auto", "ar", "exact")
_SITE = "y"  # the label site of LinearClassifier; its noise site is "y_eps"
_FORMAT = "pyro_ar.ARClassifier"
_FORMAT_VERSION = 3  # 3: checksum, training path, partial fits, prior scale; 2: standardisation
# and likelihood_; 1 and 2 are still read
_MAX_SEED = 2**31 - 1


def check_int(name, value, low, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        what = f"an integer >= {low}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def check_float(name, value, low=None, high=None, low_open=True, high_open=True):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        lo = "" if low is None else ("(" if low_open else "[") + f"{low}, "
        hi = "" if high is None else f"{high}" + (")" if high_open else "]")
        rng = f"in {lo}{hi}" if low is not None and high is not None else (
            f"{'>' if low_open else '>='} {low}" if low is not None else f"< {high}")
        raise ValueError(f"{name} must be a finite number {rng}, got {value!r}")
    return float(value)


def check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def cuda_devices(device):
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


@contextmanager
def seeded(seed, device):
    """Seed torch / numpy / random (``pyro.set_rng_seed``) and restore their states after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=cuda_devices(device)):
        pyro.set_rng_seed(seed)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


@contextmanager
def torch_seeded(seed, device):
    """Seed only torch's RNG (for posterior draws), restoring it after."""
    with torch.random.fork_rng(devices=cuda_devices(device)):
        torch.manual_seed(seed)
        yield


def copy_state(state, device=None):
    """Detached copy of a param store state ``{"params": ..., "constraints": ...}``."""
    params = {n: p.detach().clone() if device is None else p.detach().to(device, copy=True)
              for n, p in state["params"].items()}
    return {"params": params, "constraints": dict(state["constraints"])}


def constraint_name(c):
    """Name of a constraint in ``pyro.distributions.constraints`` (for weights-only files)."""
    for name in dir(pyro_constraints):
        if not name.startswith("_") and getattr(pyro_constraints, name) is c:
            return name
    for name in dir(pyro_constraints):  # e.g. an unpickled copy of a singleton
        obj = getattr(pyro_constraints, name)
        if not name.startswith("_") and type(obj) is type(c):
            try:
                if vars(obj) == vars(c):
                    return name
            except Exception:  # noqa: BLE001  (uncomparable attributes)
                pass
    return c  # stored as an object: loading then needs weights_only=False


def plain(v):
    """numpy scalars -> Python scalars (for weights-only torch files)."""
    return v.item() if isinstance(v, np.generic) else v


class TrainingPath(NamedTuple):
    """How the estimator trains (chosen by :func:`choose_path`): ``sparse_inputs`` (utilities
    from the non-zeros of a scipy.sparse X), ``rank`` (None: full-rank W) and ``strategy``
    (of the negatives).

    Example:

    >>> from pyro_ar.estimator._support import TrainingPath
    >>> TrainingPath(True, 128, "per_datapoint").describe()
    'sparse inputs, low rank 128, per_datapoint negatives'
    """

    sparse_inputs: bool
    rank: Optional[int]
    strategy: str
    weight_pattern: bool = False

    def describe(self) -> str:
        weights = ("full rank on the training class-feature pattern" if self.weight_pattern else
                   "full rank" if self.rank is None else f"low rank {self.rank}")
        return (f"{'sparse' if self.sparse_inputs else 'dense'} inputs, {weights}, "
                f"{self.strategy} negatives")


def choose_path(num_rows: int, num_features: int, num_classes: int, nnz: Optional[int] = None,
                strategy: str = "auto", rank="auto", batch_size: int = 256,
                num_negatives: Optional[int] = 20, class_counts=None) -> TrainingPath:
    r"""The training path for N x D inputs with ``nnz`` non-zeros (None: a dense array) and
    K classes: the rule ``ARClassifier.fit`` applies.

    * sparse inputs: sparse X with at least :data:`SPARSE_MIN_FEATURES` features and a
      density of at most :data:`SPARSE_MAX_DENSITY` (a step then costs O(nnz x (1 + s)),
      not O(B (1 + s) D)); otherwise dense rows;
    * ``rank="auto"``: full rank while :math:`16 K D` bytes (W, two Adam moments, the step
      counts) stay below :data:`FULL_RANK_MAX_BYTES`; above, sparse inputs whose labels are
      not skewed (a few rows for every class, the extreme-classification regime) get W on the
      training class-feature pattern (``weight_pattern``: full rank, nnz entries, at most the
      data's non-zeros), the others :data:`AUTO_RANK` (at most min(K, D)): with Zipfian
      labels (Brown's next word from a bag of the previous words) the low rank shares what it
      learns from the frequent classes and wins (test log-lik -5.47 against -6.06,
      ``python benchmarks/sparse.py --part estimator``); an int or None is kept;
    * ``strategy="auto"``: importance negatives (shared draws from the class
      frequencies^0.75) when the labels are skewed -- ``class_counts`` given and
      :math:`\exp H(\hat p) <` :data:`SKEWED_LABELS_FRACTION` K, :math:`\hat p` the class
      frequencies --; otherwise per-datapoint negatives unless a step would gather
      :math:`B (1 + s) w` > :data:`GATHER_MAX_ELEMENTS` numbers, w the width of a class's
      gathered weights (r with a rank, the non-zeros per row on the sparse path, D
      otherwise): then shared negatives (B + s rows).

    Example:

    >>> from pyro_ar.estimator._support import choose_path
    >>> choose_path(75_000, 27_000, 27_000, nnz=750_000).describe()   # WordNet's reverse dictionary
    'sparse inputs, full rank on the training class-feature pattern, per_datapoint negatives'
    >>> choose_path(10_000, 27_000, 20).describe()                    # dense and wide
    'dense inputs, full rank, shared negatives'
    """
    N, D, K = num_rows, num_features, num_classes
    sparse_inputs = nnz is not None and D >= SPARSE_MIN_FEATURES and nnz <= SPARSE_MAX_DENSITY * N * D
    skewed = class_counts is not None and effective_classes(class_counts) < SKEWED_LABELS_FRACTION * K
    pattern = rank == "auto" and sparse_inputs and 16 * K * D > FULL_RANK_MAX_BYTES and not skewed
    if rank == "auto":
        rank = None if pattern or 16 * K * D <= FULL_RANK_MAX_BYTES else min(AUTO_RANK, K, D)
    if strategy == "auto":
        s = K - 1 if num_negatives is None else min(num_negatives, K - 1)
        width = rank if rank is not None else (nnz / max(N, 1) if sparse_inputs else D)
        strategy = "shared" if min(batch_size, N) * (1 + s) * width > GATHER_MAX_ELEMENTS \
            else "per_datapoint"
        if s < K - 1 and skewed:
            strategy = "importance"
    return TrainingPath(bool(sparse_inputs), rank, strategy, bool(pattern))


def effective_classes(class_counts) -> float:
    """exp(entropy) of the class frequencies: K for balanced labels, 1 for a single class.

    Example:

    >>> from pyro_ar.estimator._support import effective_classes
    >>> round(effective_classes([5, 5, 5, 5]), 6), round(effective_classes([1, 0, 0]), 6)
    (4.0, 1.0)
    """
    p = np.asarray(class_counts, dtype=np.float64)
    p = p[p > 0] / p.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


class SparseRows:
    """A CSR matrix seen by :class:`~pyro_ar.models.LinearClassifier` as an (N, D) tensor.

    ``rows[idx]`` densifies only the rows ``idx`` (the data plate's subsample), so a large
    sparse design matrix is never densified as a whole; with ``sparse=True`` it returns
    them as a torch sparse COO batch instead (never densified: the sparse path).

    Example:

    >>> import scipy.sparse as sp, torch
    >>> from pyro_ar.estimator._support import SparseRows
    >>> rows = SparseRows(sp.eye(5, format="csr"), torch.float32, "cpu", sparse=True)
    >>> rows[torch.tensor([3, 0])].to_dense().tolist()[0]
    [0.0, 0.0, 0.0, 1.0, 0.0]
    """

    def __init__(self, X, dtype, device, sparse: bool = False):
        self.X = X.tocsr()
        self.shape = torch.Size(self.X.shape)
        self.dtype, self.device, self.sparse = dtype, device, sparse
        self.layout = torch.sparse_coo if sparse else torch.strided

    def dim(self):
        return 2

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, idx):
        rows = idx.detach().cpu().numpy() if torch.is_tensor(idx) else idx
        if not self.sparse:
            return torch.tensor(self.X[rows].toarray(), dtype=self.dtype, device=self.device)
        batch = self.X[rows]
        nz = np.stack([np.repeat(np.arange(batch.shape[0]), np.diff(batch.indptr)), batch.indices])
        return torch.sparse_coo_tensor(torch.as_tensor(nz, dtype=torch.long), torch.as_tensor(batch.data),
                                       batch.shape, is_coalesced=bool(batch.has_canonical_format),
                                       check_invariants=False).to(device=self.device, dtype=self.dtype)


def fit_scaler(X, sparse_inputs: bool = False, idf: bool = False):
    r"""Per-feature ``(mean, scale)`` for standardising ``X``: dense -- mean and standard
    deviation; sparse -- no centring (mean 0, the sparsity is kept) and the root mean square.

    Each scale is floored at the median of the features' (nonzero) scales, so that a nearly
    constant feature (e.g. a border pixel that is almost always 0) is not blown up into huge
    values at the few points where it is not; constant features get that floor too.

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
    >>> from pyro_ar.estimator._support import fit_scaler
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
        mean = np.zeros(X.shape[1])
        scale = np.sqrt(np.asarray(X.multiply(X).mean(axis=0)).reshape(-1))
    else:  # float64 sums: float32 ones overflow for features near 3e38
        X = np.asarray(X)
        if sparse_inputs:
            rms = math.sqrt(np.square(X, dtype=np.float64).sum() / max(X.shape[0], 1)) or 1.0
            return np.zeros(X.shape[1]), np.full(X.shape[1], rms)
        mean, scale = X.mean(axis=0, dtype=np.float64), X.std(axis=0, dtype=np.float64)
    positive = scale[scale > 0]
    floor = np.median(positive) if positive.size else 1.0
    return mean, np.maximum(scale, floor)


def apply_scaler(X, mean, scale, normalize_rows: bool = False):
    """``(X - mean) / scale`` (sparse: ``X / scale``, then each row divided by its L2 norm
    with ``normalize_rows``); ``X`` itself when ``mean`` is None."""
    if mean is None:
        return X
    if sp is not None and sp.issparse(X):
        X = sp.csr_matrix(X.multiply(1.0 / scale).astype(X.dtype))
        if normalize_rows:
            norms = np.sqrt(np.asarray(X.multiply(X).sum(axis=1))).reshape(-1)
            X = sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ X, dtype=X.dtype)
        return X
    return ((X - mean) / scale).astype(X.dtype, copy=False)  # (float64 arithmetic: mean is)


def training_features(X, dtype, device, sparse_inputs: bool = False):
    """The training features as the model takes them: a tensor, or :class:`SparseRows`
    (densified minibatch by minibatch, or sparse batches with ``sparse_inputs``)."""
    if sp.issparse(X):
        if sparse_inputs:
            return SparseRows(X, dtype, device, sparse=True)
        if X.shape[0] * X.shape[1] > DENSIFY_MAX_ELEMENTS:
            return SparseRows(X, dtype, device)
        X = X.toarray()
    return torch.tensor(np.asarray(X), dtype=dtype, device=device)


def pattern_and_centroids(X, codes, K: int, temperature: float = PATTERN_INIT_TEMPERATURE):
    r"""The training class-feature pattern of a sparse ``X`` with labels ``codes``
    (:class:`~pyro_ar.weight_pattern.WeightPattern`) and, on it, the scaled class centroids
    :math:`T\, c_k / \lVert c_k\rVert`, :math:`c_k = \sum_{n: y_n = k} x_n` (float32, in
    the pattern's order): the nearest-centroid (cosine) scorer as a starting point and prior
    mean for W. O(nnz(X)).

    Example:

    >>> import numpy as np, scipy.sparse as sp
    >>> from pyro_ar.estimator._support import pattern_and_centroids
    >>> X = sp.csr_matrix(np.array([[3.0, 0, 4], [0, 1, 0]]))
    >>> pattern, loc = pattern_and_centroids(X, np.array([1, 0]), 2, temperature=10.0)
    >>> pattern.keys.tolist(), loc.tolist()     # class 0: feature 1; class 1: features 0 and 2
    ([1, 3, 5], [10.0, 6.0, 8.0])
    """
    from ..weight_pattern import WeightPattern

    N, D = X.shape
    Y = sp.csr_matrix((np.ones(N), (codes, np.arange(N))), shape=(K, N))
    C = sp.csr_matrix(Y @ X)
    C.sum_duplicates()
    C.eliminate_zeros()
    C.sort_indices()
    rows = np.repeat(np.arange(K), np.diff(C.indptr))
    norms = np.sqrt(np.asarray(C.multiply(C).sum(axis=1))).reshape(-1)
    keys = torch.as_tensor(rows.astype(np.int64) * D + C.indices.astype(np.int64))
    loc = torch.as_tensor(temperature * C.data / norms[rows], dtype=torch.float32)
    return WeightPattern(keys, K, D), loc


def rows_source(X, K: int, weights, device):
    r"""The :class:`~pyro_ar.evaluation.UtilitySource` of the rows of ``X`` (a dense array,
    or scipy.sparse: a sparse-dense product per chunk when its density and width are those
    of the sparse path, see :func:`choose_path`, else densified chunk by chunk) in float64:
    :math:`\psi^{(s)} = X W_s^\top + b_s` for ``weights`` = (W (S, K, D), b (S, K)), or
    :math:`(X E_s) V_s^\top + b_s` for (V (S, K, r), b (S, K), E (S, D, r)) (a rank).

    Example:

    >>> import numpy as np, scipy.sparse as sp, torch
    >>> from pyro_ar.estimator._support import rows_source
    >>> W, b = torch.randn(1, 4, 3, dtype=torch.float64), torch.zeros(1, 4, dtype=torch.float64)
    >>> X = sp.random(5, 3, density=0.5, format="csr", random_state=0)
    >>> src = rows_source(X, 4, (W, b), "cpu")
    >>> torch.allclose(src(torch.arange(5)), torch.as_tensor(X.toarray()) @ W[0].T)
    True
    """
    from ..evaluation import UtilitySource

    W, b, *E = (t.to(device) for t in weights)
    if W.is_sparse:  # W on a pattern, (K, D) sparse: x W^T per chunk, never a dense K x D
        WT = W.t().coalesce()

    def utilities(ids):
        rows = X[ids.cpu().numpy()]
        n = rows.shape[0] * rows.shape[1]
        if sp is not None and sp.issparse(rows) and not (  # sparse enough for choose_path: kept sparse
                rows.shape[1] >= SPARSE_MIN_FEATURES and rows.nnz <= SPARSE_MAX_DENSITY * n):
            rows = rows.toarray()
        if sp is not None and sp.issparse(rows):
            coo = rows.tocoo()
            xb = torch.sparse_coo_tensor(np.stack([coo.row, coo.col]), coo.data, coo.shape,
                                         dtype=torch.float64, device=device, check_invariants=False)
        else:
            xb = torch.as_tensor(np.asarray(rows), dtype=torch.float64, device=device)
        if W.is_sparse:
            xs = xb if xb.is_sparse else xb.to_sparse()
            with warnings.catch_warnings():  # torch's note that its sparse CSR support is beta
                warnings.simplefilter("ignore", UserWarning)
                return torch.sparse.mm(xs, WT).to_dense() + b[0]
        psi = torch.stack([(xb @ E[0][s] if E else xb) @ W[s].T for s in range(len(W))]) + b.unsqueeze(1)
        return psi[0] if psi.shape[0] == 1 else psi
    return UtilitySource(utilities, num_rows=X.shape[0], num_classes=K)


def dummy_datapoint(D, device):
    """One labelled datapoint, to set up a guide's prototype trace or draw q(W, b)."""
    return torch.zeros(1, D, device=device), torch.zeros(1, dtype=torch.long, device=device)


def global_state(model, guide):
    """Copy of the param store state of the global parameters (not the per-datapoint local
    ones): W, b for point weights, the AutoNormal part of the guide for ``"bayes"``."""
    store = pyro.get_param_store()
    if model.weights == "bayes":
        names = [store.param_name(t) for t in guide[0].parameters()]
    else:
        names = [model.prefix + n for n in model.parameter_shapes()]
    state = store.get_state()
    return copy_state({"params": {n: state["params"][n] for n in names if n},
                        "constraints": {n: state["constraints"][n] for n in names if n}})


def label_array(y):
    """A 1-D array of labels; a list of tuples stays a 1-D object array of tuples."""
    if isinstance(y, np.ndarray):
        return y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    out = np.empty(len(y), dtype=object)
    for i, v in enumerate(y):
        out[i] = v
    return out


def encode_labels(y):
    """(classes, codes): sorted unique labels when orderable, else by first appearance."""
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:  # hashable but unorderable labels (e.g. a mix of types)
        index = {}
        codes = np.empty(len(y), dtype=np.int64)
        for i, v in enumerate(y):
            codes[i] = index.setdefault(v, len(index))
        classes = np.empty(len(index), dtype=object)
        for v, k in index.items():
            classes[k] = v
    return classes, np.asarray(codes, dtype=np.int64).reshape(-1)


def encode_targets(y, classes, fitted_classes, partial: bool, first: bool):
    """``(classes, codes)``: the labels ``y`` as positions in the classes (``fit``: the sorted
    labels of ``y``; ``partial_fit``: ``classes=`` on the first call, the fitted ones after)."""
    if not partial:
        return encode_labels(y)
    if first:
        if classes is None:
            raise ValueError("partial_fit needs classes= (all labels) on its first call")
        classes = encode_labels(label_array(np.asarray(classes, dtype=object)
                                            if not isinstance(classes, np.ndarray) else classes))[0]
    else:
        classes = fitted_classes
    index = {c: k for k, c in enumerate(classes.tolist())}
    try:
        codes = np.fromiter((index[v] for v in label_array(y).tolist()), dtype=np.int64, count=len(y))
    except KeyError as e:
        raise ValueError(f"y contains a label not in classes: {e.args[0]!r}") from None
    return classes, codes


def combine_sample_weights(codes, classes, sample_weight, class_weight):
    """Per-datapoint weights, ``sample_weight`` times the ``class_weight`` of each label
    (None when both are None: every datapoint weighs 1)."""
    if sample_weight is None and class_weight is None:
        return None
    from sklearn.utils.class_weight import compute_sample_weight
    from sklearn.utils.validation import _check_sample_weight

    w = _check_sample_weight(sample_weight, np.empty((len(codes), 0)), dtype=np.float64)
    if np.any(w < 0):
        raise ValueError(f"sample_weight must be >= 0, got {w[w < 0][:5].tolist()}")
    if class_weight is not None:
        if isinstance(class_weight, dict):
            missing = set(class_weight) - set(classes.tolist())
            if missing:
                raise ValueError(f"class_weight names labels not in y: {sorted(map(repr, missing))}")
            class_weight = dict(enumerate(class_weight.get(c, 1.0) for c in classes.tolist()))
        w = w * compute_sample_weight(class_weight, codes)
    return w

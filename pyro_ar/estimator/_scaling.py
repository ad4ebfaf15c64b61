r"""The estimator's standardisation of the features (``standardize=True``): fitted on the
training data (:func:`fit_scaler`), applied at fit and at prediction (:func:`apply_scaler`)."""

import math

import numpy as np

try:  # scipy is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

__all__ = ["fit_scaler", "apply_scaler"]


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
    >>> from pyro_ar.estimator._scaling import fit_scaler
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
    with ``normalize_rows``); ``X`` itself when ``mean`` is None.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.estimator._scaling import apply_scaler
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

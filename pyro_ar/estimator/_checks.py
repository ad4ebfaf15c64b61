"""The estimator's checks of numbers and choices (integers: :func:`pyro_ar.numerics.check_int`), and
of the data it is given (:func:`checked_data`)."""

import math
import numbers

import numpy as np

from ._labels import check_missing_labels


def check_float(name, value, low=None, high=None, low_open=True, high_open=True):
    """``value`` as a float if it is a finite real number in the given (open or closed)
    bounds, else a ``ValueError`` naming ``name``."""
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
    """``value`` if it is one of ``choices``, else a ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


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
    >>> from pyro_ar.estimator._checks import check_feature_matrix
    >>> X = sp.eye(3, format="csr")
    >>> X.indices[0] = 7
    >>> check_feature_matrix(X)
    Traceback (most recent call last):
    ...
    ValueError: X is not a valid scipy.sparse csr matrix: its column indices must lie in [0, 3) (the matrix has 3 columns), got [7] (the first at X.indices[0]); rebuild it (e.g. scipy.sparse.csr_matrix((data, (rows, cols)), shape=...))
    """
    import torch

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


def _validate_data(estimator, *args, **kwargs):
    """scikit-learn's ``validate_data`` (a method of the estimator before scikit-learn 1.6)."""
    try:
        from sklearn.utils.validation import validate_data
    except ImportError:  # scikit-learn < 1.6
        return estimator._validate_data(*args, **kwargs)
    return validate_data(estimator, *args, **kwargs)


def checked_data(estimator, *args, **kwargs):
    """scikit-learn's ``validate_data``, its errors naming X (numpy's "could not convert
    string to float" names nothing), after the checks that must come first: X's structure
    (a broken scipy.sparse matrix crashes scikit-learn's and scipy's compiled code) and y's
    missing labels (scikit-learn's message for a NaN among object labels names neither)."""
    check_feature_matrix(args[0])
    if len(args) > 1:
        check_missing_labels(args[1])
    try:
        return _validate_data(estimator, *args, **kwargs)
    except ValueError as e:
        if "inconsistent numbers of samples" in str(e):  # (names neither X nor y)
            raise ValueError(f"X and y must have one sample each per row of X and label in y: {e}") from e
        if any(name in str(e) for name in ("X", "y", "feature", "sample")):
            raise
        raise ValueError(f"X must be a numeric array or sparse matrix of shape (n_samples, "
                         f"n_features): {e}") from e

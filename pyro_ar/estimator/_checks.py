"""The estimator's data checks: scikit-learn's ``validate_data`` after the checks that must come
first (:func:`checked_data`), and the targets of a fit encoded as class positions (:func:`fit_targets`)."""

import numpy as np

from ..features import check_feature_matrix
from ..label_sets import encode_multilabel, is_multilabel
from ..labels import check_labels, check_missing_labels, encode_targets


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


def fit_targets(est, X, y, classes, partial, first, checked_data):
    """``(X, classes, codes, label sets)`` of a ``fit`` / ``partial_fit`` of ``est``: the
    features checked by ``checked_data`` (scikit-learn's ``validate_data``) and the targets as
    class positions, one per row, or for label sets one per (row, label) pair, with the
    :class:`~pyro_ar.label_sets.MultilabelTargets` (None for one label per row)."""
    multilabel = is_multilabel(y)
    if not first and multilabel != est.multilabel_:
        kinds = ("label sets", "one label per row")
        raise ValueError(f"partial_fit continues a fit on {kinds[not est.multilabel_]}, got "
                         f"{kinds[not multilabel]} in y")
    fitted = getattr(est, "classes_", None)
    if not multilabel:
        X, y = checked_data(est, X, y, accept_sparse="csr", dtype=(np.float64, np.float32), reset=first)
        check_labels(y)
        return (X, *encode_targets(y, classes, fitted, partial, first), None)
    X = checked_data(est, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=first)
    targets = encode_multilabel(y, classes, fitted, partial, first)
    if targets.num_rows != X.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {targets.num_rows} label sets")
    return X, targets.classes, targets.codes, targets

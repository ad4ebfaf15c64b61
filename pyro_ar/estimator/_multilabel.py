r"""The estimator's multi-label targets: label sets as (row, label) pairs, the pick-all-labels
objective of :mod:`pyro_ar.label_sets`, and predictions in the form the targets came in.

``fit(X, Y)`` with ``Y`` an ``(n, K)`` 0/1 indicator (``classes_ = arange(K)``) or a list of
label collections of any hashable labels (``classes_`` = their sorted union) trains the
categorical on every pair :math:`(x_{r_i}, l_i)`: the objective
:math:`\sum_n \sum_{l \in Y_n} \log p(l \mid x_n)`.
"""

from typing import NamedTuple, Optional

import numpy as np

from ..label_sets import is_indicator, is_label_sets, label_pairs, pairs_to_indicator
from ._labels import check_labels, encode_labels, encode_targets, label_array, label_codes

#: the forms of multi-label targets, which ``predict`` gives back: a dense indicator, a
#: ``scipy.sparse`` CSR indicator, or a list of label lists
FORMS = ("dense", "sparse", "sets")


class MultilabelTargets(NamedTuple):
    """Encoded multi-label targets: the classes, and for each (row, label) pair its row and
    its class position; the number of rows; the form the targets came in (:data:`FORMS`)."""

    classes: np.ndarray
    rows: np.ndarray
    codes: np.ndarray
    num_rows: int
    form: str

    @property
    def labels_per_row(self) -> float:
        """The mean number of labels of the rows that have any."""
        return len(self.codes) / max(1, len(np.unique(self.rows)))


def is_multilabel(y) -> bool:
    """Whether ``y`` holds label sets (:func:`~pyro_ar.label_sets.is_indicator` or
    :func:`~pyro_ar.label_sets.is_label_sets`) rather than one label per row."""
    return is_indicator(y) or is_label_sets(y)


def fit_targets(est, X, y, classes, partial, first, checked_data):
    """``(X, classes, codes, label sets)`` of a ``fit`` / ``partial_fit`` of ``est``: the
    features checked by ``checked_data`` (scikit-learn's ``validate_data``) and the targets as
    class positions, one per row, or for label sets one per (row, label) pair, with the
    :class:`MultilabelTargets` (None for one label per row)."""
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


def _label_values(flat):
    """The labels of all sets as one 1-D array: int64 or str when they all are, else objects."""
    if flat and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in flat):
        return np.asarray(flat, dtype=np.int64)
    if flat and all(isinstance(v, str) for v in flat):
        return np.asarray(flat, dtype=str)
    return label_array(flat)


def encode_multilabel(y, classes=None, fitted=None, partial=False, first=True,
                      drop_unknown=False) -> MultilabelTargets:
    """Encode label sets ``y`` as pairs: on classes of their own (``fit``), on ``classes`` (a
    first ``partial_fit``), or on the ``fitted`` classes (later calls, scoring). A label outside
    given classes raises ``ValueError`` naming it, or is dropped with ``drop_unknown``."""
    known = fitted if (partial and not first) else classes
    if is_indicator(y):
        p = label_pairs(y, "y")
        form = "sparse" if hasattr(y, "tocsr") else "dense"
        if known is not None and len(known) != p.num_classes:
            raise ValueError(f"y is a label indicator with {p.num_classes} columns, but the classifier "
                             f"has {len(known)} classes")
        cls = np.arange(p.num_classes) if known is None else np.asarray(known)
        return MultilabelTargets(cls, p.rows, p.labels, p.num_rows, form)
    if not is_label_sets(y):
        raise ValueError("y must be one label per row, an (n, K) 0/1 indicator, or a list of label "
                         f"collections (lists or sets), got {type(y).__name__}")
    if partial and first and classes is None:
        raise ValueError("partial_fit needs classes= (all labels) on its first call")
    sizes = np.fromiter((len(v) for v in y), dtype=np.int64, count=len(y))
    flat = [v for s in y for v in (s.tolist() if isinstance(s, np.ndarray) else s)]
    if not flat:
        raise ValueError(f"y holds {len(y)} label sets, all empty: there is nothing to fit")
    if any(v is None or (isinstance(v, float) and v != v) for v in flat):
        raise ValueError("y: label sets hold None or NaN, which is no label")
    values = _label_values(flat)
    if values.dtype == object:
        check_labels(values)
    rows = np.repeat(np.arange(len(y), dtype=np.int64), sizes)
    if known is None:
        cls, codes = encode_labels(values)
    else:
        cls = encode_labels(label_array(np.asarray(known, dtype=object)))[0] if partial and first \
            else np.asarray(known)
        codes = _codes(values, cls, drop_unknown)
        rows, codes = rows[codes >= 0], codes[codes >= 0]
    key = np.unique(rows * len(cls) + codes)
    return MultilabelTargets(cls, key // len(cls), key % len(cls), len(y), "sets")


def _codes(values, classes, drop_unknown):
    """Class positions of ``values`` (-1 for a label outside ``classes`` with ``drop_unknown``)."""
    if not drop_unknown:
        return label_codes(values, classes, "y contains a label not seen during fit")
    index = {c: k for k, c in enumerate(classes.tolist())}
    return np.fromiter((index.get(v, -1) for v in values.tolist()), dtype=np.int64, count=len(values))


def expand_sample_weight(sample_weight, targets: MultilabelTargets) -> Optional[np.ndarray]:
    """Per-row ``sample_weight`` given to each of the row's pairs (None stays None)."""
    if sample_weight is None:
        return None
    w = np.asarray(sample_weight, dtype=np.float64)
    if w.ndim == 0:
        return np.full(len(targets.codes), float(w))
    if w.shape != (targets.num_rows,):
        raise ValueError(f"sample_weight must have one weight per row of X ({targets.num_rows}), got "
                         f"shape {w.shape}")
    return w[targets.rows]


def format_label_sets(positions: np.ndarray, classes: np.ndarray, form: str):
    """Predicted label sets (the class ``positions`` of each row, shape (n, k)) in ``form``:
    an int64 indicator (``"dense"``), a CSR indicator (``"sparse"``) or label lists."""
    n, k = positions.shape
    if form == "sets":
        return [classes[row].tolist() for row in positions]
    out = pairs_to_indicator(np.repeat(np.arange(n), k), positions.reshape(-1), n, len(classes)).astype(np.int64)
    return out if form == "sparse" else out.toarray()


def precision_at_1(top1: np.ndarray, targets: MultilabelTargets, sample_weight=None) -> float:
    """The (weighted) fraction of rows whose top class is one of their labels: P@1."""
    K = len(targets.classes)
    hits = np.isin(np.arange(targets.num_rows) * K + top1, targets.rows * K + targets.codes)
    return float(np.average(hits, weights=sample_weight))


"""Class labels of any hashable values: checked, as a 1-D array, encoded as class positions (a
classifier's ``classes_``); the per-datapoint weights from ``sample_weight``;
the held-out split of a fit (stratified by class, or by row for label sets)."""

import numpy as np

try:  # scikit-learn is an optional dependency of pyro_ar (extras "data" / "test")
    from sklearn.utils.multiclass import type_of_target
except ImportError:  # pragma: no cover
    type_of_target = None


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)  # (np.float64 is a float)


_missing = np.frompyfunc(_is_missing, 1, 1)


def check_missing_labels(y, name: str = "y") -> None:
    """Refuse, by name, missing labels -- ``None`` or NaN among object labels -- in ``y`` (any
    array-like of labels; numeric arrays are scikit-learn's to check): a ``None`` would be
    fitted as a class of its own, saved and predicted, a NaN blamed on ``X``.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.labels import check_missing_labels
    >>> check_missing_labels(np.array(["a", None, "b"], dtype=object))
    Traceback (most recent call last):
    ...
    ValueError: y must hold a class label for every sample, got 1 missing (None or NaN): y[1] = None; drop those samples or label them
    """
    if (isinstance(y, np.ndarray) and y.dtype != object) or not hasattr(y, "__len__"):
        return
    arr = y.reshape(-1) if isinstance(y, np.ndarray) else label_array(y)
    if arr.dtype != object or not arr.size:
        return
    bad = np.flatnonzero(_missing(arr).astype(bool))
    if bad.size:
        raise ValueError(f"{name} must hold a class label for every sample, got {bad.size} missing (None or "
                         f"NaN): {name}[{bad[0]}] = {arr[bad[0]]!r}; drop those samples or label them")


def check_labels(y):
    """Class labels: binary/multiclass targets, or a 1-D object array of any hashables
    (no missing ones: :func:`check_missing_labels`)."""
    check_missing_labels(y)
    if y.ndim == 1 and y.dtype == object:  # e.g. enum members, tuples, mixed types
        try:
            for v in y:
                hash(v)
            return
        except TypeError:
            raise ValueError("Unknown label type: y holds unhashable objects; class labels "
                             "must be hashable") from None
    y_type = type_of_target(y, input_name="y")
    if y_type not in ("binary", "multiclass"):
        raise ValueError(f"Unknown label type: {y_type!r}. ARClassifier needs class labels "
                         "(binary or multiclass, one per sample), not continuous or "
                         "multi-output targets")


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
    return classes, label_codes(label_array(y), classes, "y contains a label not in classes")


def label_codes(y, classes, unknown: str):
    """The positions of the labels ``y`` (a 1-D array) in ``classes``; a label not among them
    raises ``ValueError`` starting with ``unknown`` and naming the label."""
    index = {c: k for k, c in enumerate(classes.tolist())}
    try:
        return np.fromiter((index[v] for v in y.tolist()), dtype=np.int64, count=len(y))
    except KeyError as e:
        raise ValueError(f"{unknown}: {e.args[0]!r}") from None


def weighted_samples(codes, sample_weight):
    """Per-datapoint weights of the labels ``codes``: ``sample_weight`` checked (scikit-learn's
    ``_check_sample_weight``: a scalar or one weight per datapoint, all >= 0); None stays None
    (every datapoint weighs 1)."""
    if sample_weight is None:
        return None
    from sklearn.utils.validation import _check_sample_weight

    w = _check_sample_weight(sample_weight, np.empty((len(codes), 0)), dtype=np.float64)
    if np.any(w < 0):
        raise ValueError(f"sample_weight must be >= 0, got {w[w < 0][:5].tolist()}")
    return w


def held_out_split(codes, groups, fraction, rng, given=None):
    """``(train, validation)`` sorted indices of the datapoints (labels ``codes``): a held-out
    ``fraction`` stratified by class when every class allows it, else uniform; with ``groups``
    (label sets: the row of each (row, label) pair) a fraction of the *rows*, all pairs of a
    row on one side. ``given`` is the value named in the error (``validation_fraction``)."""
    N = len(codes)
    rows = None if groups is None else np.unique(groups)
    units = N if rows is None else len(rows)
    n_val = max(1, int(round(fraction * units)))
    if units - n_val < 1:
        raise ValueError(f"validation_fraction={fraction if given is None else given!r} leaves no training "
                         f"data out of {units} {'samples' if rows is None else 'labelled rows'}")
    if rows is not None:
        held_out = np.isin(groups, rng.choice(rows, n_val, replace=False))
        return np.flatnonzero(~held_out), np.flatnonzero(held_out)
    from sklearn.model_selection import train_test_split
    try:
        train_idx, val_idx = train_test_split(np.arange(N), test_size=n_val, stratify=codes, random_state=rng)
    except ValueError:  # a class too small to stratify
        perm = rng.permutation(N)
        train_idx, val_idx = perm[n_val:], perm[:n_val]
    return np.sort(train_idx), np.sort(val_idx)

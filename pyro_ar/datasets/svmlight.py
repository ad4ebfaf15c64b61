r"""Multi-label data in the extreme-classification text format: :func:`load_svmlight`.

The format of the Extreme Classification Repository (Bhatia et al.; e.g. Eurlex-4K,
Wiki10-31K, AmazonCat-13K) is scikit-learn's multi-label svmlight format with an optional
header line ``N D L`` (points, features, labels)::

    3 5 4
    0,2 0:1.5 3:0.5
    1 1:2.0
    2,3 4:1.0

Each row is ``l_1,l_2,... j:v j:v ...`` with 0-based label and feature indices. Rows are
read by :func:`sklearn.datasets.load_svmlight_files` (so scikit-learn is needed), the label
set of row :math:`n` is reduced to one class (:func:`~pyro_ar.datasets.reduce_multilabel`,
by default the lowest label, as for Bibtex) and unseen test classes are handled as by
:func:`~pyro_ar.datasets.load_bibtex`; ``reduction=None`` keeps every label (a multi-label
:class:`~pyro_ar.datasets.Dataset`, :mod:`~pyro_ar.datasets.multilabel`). :func:`read_svmlight`
gives one file's rows as they are: scipy CSR features and the CSR indicator of every label
(what ``python -m pyro_ar`` reads).
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ..numerics import check_int
from ._common import Dataset, PathLike
from .arff import _multilabel_dataset
from .multilabel import label_indicator, labelled_rows

__all__ = ["load_svmlight", "read_svmlight"]


def _read(p: Path) -> Tuple[Optional[Tuple[int, int, int]], io.BytesIO]:
    """The ``(N, D, L)`` header (or None) and the rows of one file."""
    if not p.is_file():
        raise FileNotFoundError(f"load_svmlight: file {p} not found")
    raw = p.read_bytes()
    first, _, rest = raw.partition(b"\n")
    parts = first.split()
    if len(parts) == 3 and all(t.isdigit() for t in parts):
        n, d, k = (int(t) for t in parts)
        if d == 0 or k == 0:
            raise ValueError(f"load_svmlight: {p}: its header line 'N D L' = {first.decode()!r} says "
                             f"{'D = 0 features' if d == 0 else 'L = 0 labels'}; a data set needs at least one")
        return (n, d, k), io.BytesIO(rest)
    return None, io.BytesIO(raw)


def _check_rows(p: Path, header, x, label_sets) -> None:
    """What scikit-learn's reader lets through: non-finite values, labels that are not
    integers >= 0, a row count other than the header's, no rows at all (ValueError naming
    the file and the first bad row)."""
    if header is not None and header[0] != x.shape[0]:
        raise ValueError(f"load_svmlight: {p}: the header says {header[0]} rows, the file has "
                         f"{x.shape[0]}")
    if x.shape[0] == 0:
        raise ValueError(f"load_svmlight: {p} holds no rows")
    bad = np.flatnonzero(~np.isfinite(x.data))
    if bad.size:
        row = int(np.searchsorted(x.indptr, bad[0], side="right") - 1)
        raise ValueError(f"load_svmlight: {p}: row {row} holds the non-finite value "
                         f"{x.data[bad[0]]} (feature {x.indices[bad[0]]}); values must be finite")
    for n, labels in enumerate(label_sets):  # loading, not a hot path
        wrong = [v for v in labels if not (np.isfinite(v) and v >= 0 and v == int(v))]
        if wrong:
            raise ValueError(f"load_svmlight: {p}: row {n} has the label {wrong[0]!r}; labels must "
                             "be integers >= 0")


def _read_files(files: Dict[str, Path], num_features: Optional[int], num_labels: Optional[int]):
    """The rows of the ``files`` (name -> path) read together: ``(xs, label sets, L)``, each
    ``x`` a float32 CSR ``(N, D)`` with D shared, each label set a tuple of labels (checked by
    :func:`_check_rows`), L the label space (``num_labels``, else the header's, else the
    largest label + 1)."""
    try:
        from sklearn.datasets import load_svmlight_files
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("load_svmlight needs scikit-learn: pip install scikit-learn "
                          "(or pip install 'pyro-ar[data]')") from None
    num_features = check_int("num_features", num_features, low=1, allow_none=True)
    num_labels = check_int("num_labels", num_labels, low=1, allow_none=True)
    read = {s: _read(p) for s, p in files.items()}
    headers = [h for h, _ in read.values() if h is not None]
    if num_features is None and headers:
        num_features = headers[0][1]
    if num_labels is None and headers:
        num_labels = headers[0][2]
    try:
        loaded = load_svmlight_files([b for _, b in read.values()], n_features=num_features,
                                     multilabel=True, zero_based=True, dtype=np.float32)
    except (ValueError, OverflowError) as e:  # (a feature index >= 2^31: OverflowError)
        raise ValueError(f"load_svmlight: cannot read {', '.join(map(str, files.values()))}: {e}") from None
    xs, ys = loaded[0::2], loaded[1::2]
    for s, x, label_sets in zip(files, xs, ys):
        _check_rows(files[s], read[s][0], x, label_sets)
    L = int(max((max(ls) for y in ys for ls in y if ls), default=-1)) + 1  # every label, not only those kept
    if num_labels is not None:
        if L > num_labels:
            raise ValueError(f"load_svmlight: {', '.join(map(str, files.values()))}: label {L - 1} found, "
                             f"but num_labels is {num_labels}")
        L = int(num_labels)
    return xs, ys, L


def read_svmlight(path: PathLike, num_features: Optional[int] = None,
                  num_labels: Optional[int] = None) -> Tuple[Any, Any]:
    r"""The features and **all** the labels of one file in the extreme-classification
    (svmlight) format, as scipy CSR matrices: what :func:`load_svmlight` reads, before it
    picks one label per row, densifies and splits.

    Args:
        path: the file (header ``N D L`` optional).
        num_features: D (default: the header's, else the largest feature index + 1).
        num_labels: L (default: the header's, else the largest label + 1).

    Returns:
        ``(X, Y)``: ``X`` float32 CSR ``(N, D)`` as in the file, ``Y`` the float32 CSR 0/1
        indicator ``(N, L)`` of the rows' label sets (:func:`pyro_ar.label_sets.pairs_to_indicator`;
        a row without labels is an empty row).

    Raises:
        FileNotFoundError: no such file. ValueError: as :func:`load_svmlight`, naming the file.

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.datasets import read_svmlight
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write("2 3 4\n3,0 0:1.5\n 2:2.0\n")
    >>> X, Y = read_svmlight(f.name); os.remove(f.name)
    >>> X.shape, Y.toarray().tolist()
    ((2, 3), [[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    """
    from ..label_sets import pairs_to_indicator

    p = Path(path)
    (x,), (label_sets,), L = _read_files({"file": p}, num_features, num_labels)
    sizes = np.fromiter((len(ls) for ls in label_sets), dtype=np.int64, count=len(label_sets))
    labels = np.fromiter((v for ls in label_sets for v in ls), dtype=np.float64, count=int(sizes.sum()))
    rows = np.repeat(np.arange(len(label_sets), dtype=np.int64), sizes)
    x = x.tocsr()
    x.sort_indices()
    return x, pairs_to_indicator(rows, labels.astype(np.int64), len(label_sets), L)


def _first_labels(label_sets, reduction: str, seed: int) -> np.ndarray:
    """One class per row from scikit-learn's tuples of labels (``-1`` for an empty set)."""
    rng = np.random.default_rng(seed)
    out = np.full(len(label_sets), -1, dtype=np.int64)
    for n, labels in enumerate(label_sets):  # loading, not a hot path
        if labels:
            ls = sorted(int(v) for v in labels)
            out[n] = ls[0] if reduction == "first" else ls[-1] if reduction == "last" else rng.choice(ls)
    return out


def load_svmlight(
    train: PathLike,
    test: Optional[PathLike] = None,
    num_features: Optional[int] = None,
    num_labels: Optional[int] = None,
    reduction: Optional[str] = "first",
    drop_unseen_test: bool = True,
    remap_classes: bool = False,
    seed: int = 0,
) -> Dataset:
    r"""A multi-label data set in the extreme-classification (svmlight) format, one label per
    row (or all of them: ``reduction=None``).

    Args:
        train: the training file.
        test: the test file, or ``None`` (test fields ``None``).
        num_features: D (default: the header's, else the largest feature index + 1).
        num_labels: the size of the label space L (default: the header's, else the largest
            label + 1).
        reduction: ``"first"`` (the lowest label of a row, default), ``"last"``, ``"random"``
            or ``None``: every label, ``y_*`` the float32 CSR indicator ``(N, L)``, rows and
            classes handled as by :func:`~pyro_ar.datasets.load_arff_multilabel` with
            ``reduction=None``.
        drop_unseen_test: drop test rows whose class never occurs in train (default True).
        remap_classes: relabel to the classes occurring in train or test.
        seed: seed of ``reduction="random"``.

    Returns:
        :class:`Dataset` with ``x_*`` float32 ``(N, D)`` (dense), ``y_*`` int64 ``(N,)`` (or
        the indicator),
        ``num_classes`` L; ``info`` as :func:`~pyro_ar.datasets.load_arff_multilabel`.

    Raises:
        ImportError: scikit-learn is not installed (``pip install scikit-learn``).
        ValueError: a file that cannot be read, holds no (labelled) rows, another number of
            rows than its header says, non-finite values, or labels that are not integers
            >= 0 (naming the file and the first bad row). Rows with no label are dropped
            and counted in ``info["num_unlabeled_dropped"]``.

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.datasets import load_svmlight
    >>> rows = "3 5 4\n2,0 0:1.5 3:0.5\n1 1:2.0\n3,2 4:1.0\n"   # header N D L, then the rows
    >>> with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
    ...     _ = f.write(rows)
    >>> d = load_svmlight(f.name); os.remove(f.name)
    >>> d.y_train.tolist(), d.num_classes, d.x_train.shape
    ([0, 1, 2], 4, torch.Size([3, 5]))
    """
    if reduction not in ("first", "last", "random", None):
        raise ValueError(f"load_svmlight: reduction must be 'first', 'last', 'random' or None (every label), "
                         f"got {reduction!r}")
    files = {"train": Path(train)} if test is None else {"train": Path(train), "test": Path(test)}
    xs, ys, L = _read_files(files, num_features, num_labels)
    parts: Dict[str, Any] = {}
    for s, x, label_sets in zip(files, xs, ys):
        y = (label_indicator(label_sets, L, where=str(files[s])) if reduction is None
             else _first_labels(label_sets, reduction, seed))
        rows = labelled_rows(y)
        if s == "train" and not rows.size:
            raise ValueError(f"load_svmlight: {files[s]}: none of its {len(label_sets)} rows has a label")
        parts[s] = (np.asarray(x[rows].todense(), dtype=np.float32), y[rows], rows, int(len(label_sets) - len(rows)))
    extra = {"preprocessing": f"features as in the file; label = {reduction or 'every'} label of the row"}
    return _multilabel_dataset(files, parts, [str(k) for k in range(L)], reduction, extra,
                               drop_unseen_test, remap_classes)

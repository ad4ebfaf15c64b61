r"""Multi-label targets: every label of a row, as a scipy CSR indicator.

A *multi-label* :class:`~pyro_ar.datasets.Dataset` (``info["multilabel"] = True``) holds
``y_train`` / ``y_test`` as ``scipy.sparse.csr_matrix`` of shape ``(N, K)``, float32, with
:math:`y_{nk} = 1` for the labels of row :math:`n` and no other stored entry, indices sorted --
the indicator of scikit-learn's ``MultiLabelBinarizer(sparse_output=True)``, in float32.
``num_train`` / ``num_test`` count rows as for single-label data. The loaders build it with
``reduction=None`` (:func:`~pyro_ar.datasets.load_arff_multilabel`,
:func:`~pyro_ar.datasets.load_bibtex`, :func:`~pyro_ar.datasets.load_svmlight`) or always
(:func:`~pyro_ar.datasets.load_wordnet_synsets`); :func:`label_indicator` builds one from label
sets or a dense 0/1 matrix, and :func:`pyro_ar.evaluation.ranking_metrics` scores rankings
against it.

The class bookkeeping that the loaders share (classes seen in training, test rows of unseen
classes, remapping to the classes that occur) takes either form of targets through the helpers
below: int64 class ids ``(N,)`` (``-1``: no label) or an indicator. For an indicator, a row
is *labelled* when it has at least one label, the classes of a split are the labels occurring
in it, and a test row is *unseen* when none of its labels occurs in training. scipy is needed
(``pip install scipy``, or the ``data`` extra).
"""

from __future__ import annotations

import itertools
from typing import Optional

import numpy as np
import torch

from ..label_sets import pairs_to_indicator

__all__ = ["label_indicator"]


def _sparse():
    try:
        import scipy.sparse as sp
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("multi-label targets need scipy: pip install scipy (or pip install 'pyro-ar[data]')") from None
    return sp


def is_indicator(y) -> bool:
    """Whether ``y`` is a scipy sparse matrix (a multi-label target), not class ids."""
    return hasattr(y, "tocsr") and hasattr(y, "indptr")


def check_zero_one(labels: np.ndarray, where: str = "labels") -> None:
    """``ValueError`` naming ``where``, the row and the label unless ``labels`` (N, L) is 0/1."""
    bad = (labels != 0) & (labels != 1)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"{where}: label {j} of data row {i} is {labels[i, j]}, expected 0 or 1")


def label_indicator(labels, num_labels: Optional[int] = None, where: str = "labels"):
    r"""The ``(N, L)`` float32 CSR indicator of ``labels``: a dense 0/1 array ``(N, L)``, or a
    sequence of N collections of class indices (a label listed twice counts once).

    Args:
        labels: the label matrix or the label sets.
        num_labels: L for label sets (default: the largest label + 1; it must exceed every
            label); a matrix's L is its number of columns.
        where: what to name in an error (e.g. the file).

    Returns:
        ``scipy.sparse.csr_matrix`` float32 ``(N, L)``, sorted indices, ones only.

    Example:

    >>> from pyro_ar.datasets import label_indicator
    >>> label_indicator([[2, 0], [], [1, 1]], num_labels=4).toarray().tolist()
    [[1.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]
    """
    sp = _sparse()
    if isinstance(labels, (np.ndarray, torch.Tensor)):
        labels = np.asarray(labels)
        if labels.ndim != 2:
            raise ValueError(f"{where}: a label matrix must be 2-D (N, L), got shape {labels.shape}")
        check_zero_one(labels, where)
        y = sp.csr_matrix(labels != 0, dtype=np.float32)
    else:
        labels = list(labels)
        counts = np.fromiter((len(s) for s in labels), dtype=np.int64, count=len(labels))
        flat = np.asarray(list(itertools.chain.from_iterable(labels)), dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(flat) | (flat < 0) | (flat != np.round(flat)))
        if bad.size:
            row = int(np.searchsorted(np.cumsum(counts), bad[0], side="right"))
            raise ValueError(f"{where}: row {row} has the label {float(flat[bad[0]])!r}; labels must be integers >= 0")
        flat = flat.astype(np.int64)
        width = int(flat.max()) + 1 if flat.size else 0
        if num_labels is not None and num_labels < width:
            raise ValueError(f"{where}: label {width - 1} found, but num_labels is {num_labels}")
        L = width if num_labels is None else int(num_labels)
        return pairs_to_indicator(np.repeat(np.arange(len(labels)), counts), flat, len(labels), L)
    y.sort_indices()
    return y


def labelled_rows(y) -> np.ndarray:
    """Indices of the rows with a label."""
    return np.flatnonzero(np.diff(y.indptr) > 0) if is_indicator(y) else np.flatnonzero(y >= 0)


def classes_of(y) -> np.ndarray:
    """The sorted classes occurring in ``y`` (ids, or the labels of an indicator)."""
    return np.unique(y.indices if is_indicator(y) else y).astype(np.int64)


def unseen_rows(y, train_classes: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows with no class (label) among ``train_classes``."""
    if not is_indicator(y):
        return ~np.isin(y, train_classes)
    rows = np.repeat(np.arange(y.shape[0]), np.diff(y.indptr))
    return np.bincount(rows[np.isin(y.indices, train_classes)], minlength=y.shape[0]) == 0


def relabel(y, old: np.ndarray, lookup: np.ndarray):
    """``y`` on the classes ``old`` only (new id ``lookup[old id]``, ``-1`` for the others)."""
    return y[:, old].tocsr() if is_indicator(y) else lookup[y]


def labels_per_row(y) -> float:
    """The mean number of labels per row of an indicator ``(N, K)``: ``nnz / max(1, N)``."""
    return float(y.nnz / max(1, y.shape[0]))


def as_targets(y):
    """The ``y_*`` field of a :class:`Dataset`: int64 tensor, or the float32 CSR indicator."""
    if is_indicator(y):
        y = y.tocsr().astype(np.float32)
        y.sort_indices()
        return y
    return torch.from_numpy(np.asarray(y).astype(np.int64))

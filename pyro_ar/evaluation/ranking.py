r"""Ranking metrics of extreme (multi-label) classification: P@k, nDCG@k, PSP@k.

Row :math:`i` of ``targets`` is a label set :math:`y_i \subseteq \{0,\dots,K-1\}` (an
indicator :math:`y_{ij} \in \{0, 1\}`), row :math:`i` of ``ranked`` the classes
:math:`r_1, r_2, \dots` a model ranks first, best first. Each metric is the mean over the
:math:`n` rows of

.. math::

    \mathrm{P@}k = \frac1k \sum_{l=1}^{k} y_{r_l}, \qquad
    \mathrm{nDCG@}k = \frac{\sum_{l=1}^{k} y_{r_l} / \log_2(l+1)}
                          {\sum_{l=1}^{\min(k, |y|)} 1 / \log_2(l+1)}, \qquad
    \mathrm{PSP@}k = \frac1k \sum_{l=1}^{k} \frac{y_{r_l}}{p_{r_l}}

(Jain, Prabhu & Varma, KDD 2016, for PSP@k: :math:`p_j` is the propensity of label
:math:`j`, the chance that a relevant label is observed, e.g. :func:`label_propensities`).

**Normalised PSP@k.** :func:`psp_at_k` returns by default the mean PSP@k divided by the
mean over rows of the best PSP@k each row can reach -- :math:`\frac1k` times the sum of the
:math:`\min(k, |y_i|)` largest :math:`1/p_j` over :math:`j \in y_i` -- a *ratio of means*
(not the mean of per-row ratios), as the Extreme Classification Repository's tools compute
it (its Matlab ``psprecision_k`` and ``pyxclib``'s ``psprecision``); a perfect ranking
(positives first, by decreasing :math:`1/p`) scores 1. ``normalize=False`` gives the raw mean.

**Empty label sets** count, as in those tools: such a row scores 0 for P@k, nDCG@k and
PSP@k (its ideal DCG is 0; 0/0 is taken as 0) and adds 0 to the PSP normaliser, so it
lowers every mean. Drop the rows first to leave them out.

**Inputs.** ``ranked``: an integer ``(n, m)`` array, ``m >= k`` (numpy or torch), with no
class repeated within a row's first ``k``. ``targets``: an ``(n, K)`` 0/1 indicator -- a
scipy sparse matrix (any format), a dense numpy array or torch tensor (dense or sparse) --
or a list of ``n`` collections of class indices (a set per row; repeats count once). All
forms give the same values. Everything is vectorised over rows and ranks: the positives
become sorted keys ``row * K + class`` and the ``n x k`` ranked entries are looked up by
binary search, O((nnz + n k) log nnz) time and O(nnz + n k) memory -- K = 10^5 classes and
n = 10^4 rows with a scipy indicator take milliseconds and no ``n x K`` array. Bad input
raises ``ValueError`` naming the argument, the value and what was expected.
"""

from __future__ import annotations

import itertools
import math
from typing import Dict, NamedTuple, Optional, Sequence

import numpy as np
import torch

from ..numerics import check_int, check_positive, check_positive_number

__all__ = ["precision_at_k", "ndcg_at_k", "psp_at_k", "label_propensities", "ranking_metrics"]


class _Positives(NamedTuple):
    """The positives of ``targets``: row ids and classes sorted by ``row * width + class``
    without repeats, the number of rows, and K (``None`` for a list of label collections)."""

    rows: np.ndarray
    cols: np.ndarray
    num_rows: int
    num_classes: Optional[int]


def _check_indicator_values(values: np.ndarray, name: str) -> None:
    bad = np.flatnonzero((values != 0) & (values != 1))
    if bad.size:
        raise ValueError(f"{name} must be a 0/1 indicator, got the value {values[bad[0]]!r}")


def _from_coordinates(rows, cols, values, shape, name) -> _Positives:
    """Positives of a matrix given in coordinate form (repeats summed, as scipy does)."""
    n, K = (int(s) for s in shape)
    keys = rows.astype(np.int64) * max(K, 1) + cols.astype(np.int64)
    if keys.size and np.any(np.diff(keys) <= 0):  # not canonical: sort and sum repeated entries
        keys, inverse = np.unique(keys, return_inverse=True)
        values = np.bincount(inverse.ravel(), weights=values, minlength=keys.size)
    _check_indicator_values(values, name)
    keys = keys[values != 0]
    return _Positives(keys // max(K, 1), keys % max(K, 1), n, K)


def _positives(targets, name: str = "targets") -> _Positives:
    """``targets`` in any accepted form (see the module's text) as :class:`_Positives`."""
    if isinstance(targets, (list, tuple)):
        return _from_collections(targets, name)
    if hasattr(targets, "tocoo") and hasattr(targets, "shape"):  # scipy sparse (not imported here)
        if len(targets.shape) != 2:
            raise ValueError(f"{name} must be 2-D (n, K), got shape {targets.shape}")
        coo = targets.tocsr().tocoo()  # (row-major order)
        return _from_coordinates(coo.row, coo.col, np.asarray(coo.data, dtype=np.float64), coo.shape, name)
    if isinstance(targets, torch.Tensor) and targets.layout != torch.strided:
        if targets.dim() != 2:
            raise ValueError(f"{name} must be 2-D (n, K), got shape {tuple(targets.shape)}")
        coo = targets.to_sparse_coo().coalesce().cpu()
        index = coo.indices().numpy()
        return _from_coordinates(index[0], index[1], coo.values().double().numpy(), coo.shape, name)
    if isinstance(targets, torch.Tensor):
        targets = targets.detach().cpu().numpy()
    if not isinstance(targets, np.ndarray):
        raise ValueError(f"{name} must be an (n, K) 0/1 indicator (scipy sparse, numpy or torch) or a list of "
                         f"label collections, got {type(targets).__name__}")
    if targets.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n, K), got shape {targets.shape}")
    if not (targets.dtype == bool or np.issubdtype(targets.dtype, np.number)):
        raise ValueError(f"{name} must hold 0/1 numbers, got dtype {targets.dtype}")
    _check_indicator_values(targets.ravel(), name)
    rows, cols = np.nonzero(targets)  # (row-major order, no repeats)
    return _Positives(rows.astype(np.int64), cols.astype(np.int64), targets.shape[0], targets.shape[1])


def _from_collections(targets, name: str) -> _Positives:
    """Positives of a list of label collections (each a set: repeats count once)."""
    try:
        counts = np.fromiter(map(len, targets), dtype=np.int64, count=len(targets))
    except TypeError:
        bad = next(t for t in targets if not hasattr(t, "__len__"))
        raise ValueError(f"{name}: a list must hold one collection of class indices per row, got "
                         f"{bad!r}") from None
    flat = np.asarray(list(itertools.chain.from_iterable(targets)))
    if flat.size == 0:
        flat = flat.astype(np.int64)
    if flat.ndim != 1 or not np.issubdtype(flat.dtype, np.integer):
        raise ValueError(f"{name}: the label collections must hold integer class indices, got dtype {flat.dtype}")
    if flat.size and flat.min() < 0:
        raise ValueError(f"{name}: class indices must be >= 0, got {int(flat.min())}")
    width = int(flat.max()) + 1 if flat.size else 1
    keys = np.unique(np.repeat(np.arange(len(targets), dtype=np.int64), counts) * width + flat)
    return _Positives(keys // width, keys % width, len(targets), None)


def _ranked(ranked, name: str = "ranked") -> np.ndarray:
    """``ranked`` as an int64 numpy ``(n, m)`` array of class indices >= 0."""
    if isinstance(ranked, torch.Tensor):
        ranked = ranked.detach().cpu().numpy()
    ranked = np.asarray(ranked)
    if ranked.ndim != 2 or ranked.shape[0] == 0:
        raise ValueError(f"{name} must be an (n, m) array of class indices with n >= 1, got shape {ranked.shape}")
    if not np.issubdtype(ranked.dtype, np.integer):
        raise ValueError(f"{name} must hold integer class indices, got dtype {ranked.dtype}")
    if ranked.size and ranked.min() < 0:
        raise ValueError(f"{name} must hold class indices >= 0, got {int(ranked.min())}")
    return ranked.astype(np.int64, copy=False)


class _Hits(NamedTuple):
    """``hits[i, l]``: whether row i's (l+1)-th ranked class is a positive."""

    ranked: np.ndarray  # (n, k)
    hits: np.ndarray  # (n, k) bool
    pos: _Positives
    width: int  # > every class index seen (K when known)


def _hits(ranked, targets, k_max: int, ks_name: str = "k") -> _Hits:
    """Check the inputs and look up the first ``k_max`` ranked classes of every row."""
    ranked = _ranked(ranked)
    check_int(ks_name, k_max, low=1, high=ranked.shape[1], what=f" (ranked has {ranked.shape[1]} columns)")
    top = ranked[:, :k_max]
    pos = _positives(targets)
    if pos.num_rows != top.shape[0]:
        raise ValueError(f"targets has {pos.num_rows} rows but ranked has {top.shape[0]}; they must match")
    if pos.num_classes is not None and top.size and top.max() >= pos.num_classes:
        raise ValueError(f"ranked holds the class {int(top.max())}, but targets has K = {pos.num_classes} columns")
    if k_max > 1:
        s = np.sort(top, axis=1)
        repeated = np.flatnonzero((s[:, 1:] == s[:, :-1]).any(1))
        if repeated.size:
            raise ValueError(f"ranked repeats a class within the first {k_max} of row {int(repeated[0])}: "
                             f"{top[repeated[0]].tolist()}; a ranking lists each class once")
    width = max(pos.num_classes or 0, int(top.max()) + 1, int(pos.cols.max()) + 1 if pos.cols.size else 0)
    keys = pos.rows * width + pos.cols  # sorted (row-major), no repeats
    query = np.arange(top.shape[0], dtype=np.int64)[:, None] * width + top
    where = np.minimum(np.searchsorted(keys, query), max(keys.size - 1, 0))
    hits = keys[where] == query if keys.size else np.zeros(query.shape, bool)
    return _Hits(top, hits, pos, width)


def _row_counts(pos: _Positives) -> np.ndarray:
    return np.bincount(pos.rows, minlength=pos.num_rows)


def _precision(h: _Hits, k: int) -> float:
    return float(h.hits[:, :k].sum(1).mean() / k)


def _ndcg(h: _Hits, k: int) -> float:
    discount = 1.0 / np.log2(np.arange(2, k + 2))
    dcg = h.hits[:, :k] @ discount
    ideal = np.concatenate([[0.0], np.cumsum(discount)])[np.minimum(_row_counts(h.pos), k)]
    return float(np.divide(dcg, ideal, out=np.zeros_like(dcg), where=ideal > 0).mean())


def _inverse_propensities(propensities, width: int) -> np.ndarray:
    """``1 / propensities`` (float64), after checking that every class seen has one > 0."""
    if isinstance(propensities, torch.Tensor):
        propensities = propensities.detach().cpu()
    p = torch.as_tensor(np.asarray(propensities, dtype=np.float64))
    if p.dim() != 1 or p.shape[0] < width:
        raise ValueError(f"propensities must be 1-D with one value per class ({width} or more), "
                         f"got shape {tuple(p.shape)}")
    check_positive(p, "propensities")
    return 1.0 / p.numpy()


def _psp(h: _Hits, k: int, inverse: np.ndarray, normalize: bool) -> float:
    score = (h.hits[:, :k] * inverse[h.ranked[:, :k]]).sum(1).mean() / k
    if not normalize:
        return float(score)
    rows, w = h.pos.rows, inverse[h.pos.cols]
    order = np.lexsort((-w, rows))  # within each row, the largest 1 / p first
    starts = np.concatenate([[0], np.cumsum(_row_counts(h.pos))])
    rank = np.arange(order.size) - starts[rows[order]]
    best = w[order][rank < k].sum() / (k * h.pos.num_rows)
    return float(score / best) if best > 0 else 0.0


def precision_at_k(ranked, targets, k: int) -> float:
    r"""P@k, the mean over rows of the fraction of the first ``k`` ranked classes that are
    positives (see the module's text; a row with no label scores 0).

    Example (row 0: 1 of its first 2 is a positive; row 1: 2 of 2; (1/2 + 2/2) / 2):

    >>> import numpy as np
    >>> from pyro_ar.evaluation import precision_at_k
    >>> precision_at_k(np.array([[3, 0, 1], [2, 1, 0]]), [{0, 4}, {1, 2}], k=2)
    0.75
    """
    return _precision(_hits(ranked, targets, k), k)


def ndcg_at_k(ranked, targets, k: int) -> float:
    r"""nDCG@k: the DCG of the first ``k`` ranked classes over the DCG of a perfect ranking of
    the row's :math:`\min(k, |y|)` labels, averaged over rows (a row with no label scores 0).

    Example (row 0 hits at rank 2 of its 2 labels: (1/log2 3) / (1 + 1/log2 3)):

    >>> import math
    >>> from pyro_ar.evaluation import ndcg_at_k
    >>> v = ndcg_at_k([[3, 0]], [{0, 4}], k=2)
    >>> round(v, 6), round((1 / math.log2(3)) / (1 + 1 / math.log2(3)), 6)
    (0.386853, 0.386853)
    """
    return _ndcg(_hits(ranked, targets, k), k)


def psp_at_k(ranked, targets, k: int, propensities, *, normalize: bool = True) -> float:
    r"""Propensity-scored precision PSP@k (Jain, Prabhu & Varma, 2016), normalised by default
    by the best PSP@k the rows can reach (a ratio of means, as the XMC repository's tools do:
    see the module's text); ``normalize=False`` returns the raw mean of
    :math:`\frac1k\sum_{l\le k} y_{r_l}/p_{r_l}`.

    Args:
        ranked, targets, k: as :func:`precision_at_k`.
        propensities: ``(K,)`` positive propensities :math:`p_j` (e.g.
            :func:`label_propensities` of the training targets).
        normalize: divide by the best achievable mean PSP@k (default True).

    Example (propensities 0.5 and 0.25: a hit on class 1 weighs 4, the best is 4 + 2):

    >>> from pyro_ar.evaluation import psp_at_k
    >>> psp_at_k([[0, 2]], [{0, 1}], k=2, propensities=[0.5, 0.25, 1.0], normalize=False)  # (2 + 0) / 2
    1.0
    >>> psp_at_k([[0, 2]], [{0, 1}], k=2, propensities=[0.5, 0.25, 1.0])  # 1.0 / ((4 + 2) / 2)
    0.3333333333333333
    """
    h = _hits(ranked, targets, k)
    return _psp(h, k, _inverse_propensities(propensities, h.width), normalize)


def label_propensities(train_targets, A: float = 0.55, B: float = 1.5, *,
                       num_classes: Optional[int] = None) -> np.ndarray:
    r"""The empirical label propensities of Jain, Prabhu & Varma (KDD 2016),

    .. math::

        p_l = \frac{1}{1 + C e^{-A \log(N_l + B)}}, \qquad C = (\log N - 1)(B + 1)^A,

    with :math:`N` the number of training rows and :math:`N_l` the number of them having label
    :math:`l`. ``A = 0.55, B = 1.5`` are the paper's defaults (Wikipedia-LSHTC: 0.5, 0.4;
    Amazon: 0.6, 2.6). A label never seen gets the smallest propensity
    :math:`1 / (1 + C B^{-A})`.

    Args:
        train_targets: the training label sets, in any form ``targets`` takes (module text).
        A, B: the parameters (> 0).
        num_classes: K for a list of label collections (default: the largest label + 1);
            an indicator's K is its number of columns.

    Returns:
        ``numpy.ndarray`` float64 ``(K,)`` in (0, 1).

    Example (N = 4 rows, class 0 in 3 of them; C = (log 4 - 1) 2.5^0.55):

    >>> import math
    >>> from pyro_ar.evaluation import label_propensities
    >>> p = label_propensities([[0], [0, 1], [0], []])
    >>> C = (math.log(4) - 1) * 2.5 ** 0.55
    >>> round(float(p[0]), 6), round(1 / (1 + C * (3 + 1.5) ** -0.55), 6)
    (0.781502, 0.781502)
    """
    A = check_positive_number("A", A)
    B = check_positive_number("B", B)
    pos = _positives(train_targets, "train_targets")
    K = pos.num_classes
    if K is not None and num_classes is not None and num_classes != K:
        raise ValueError(f"num_classes={num_classes!r} differs from the {K} columns of train_targets")
    if K is None:
        seen = int(pos.cols.max()) + 1 if pos.cols.size else 0
        K = seen if num_classes is None else check_int("num_classes", num_classes, low=max(seen, 1),
                                                       what=" (more than the largest label of train_targets)")
    N = pos.num_rows
    if N < 3:
        raise ValueError(f"train_targets must have at least 3 rows (C = (log N - 1)(B + 1)^A must be > 0), got N={N}")
    counts = np.bincount(pos.cols, minlength=K).astype(np.float64)
    C = (math.log(N) - 1.0) * (B + 1.0) ** A
    return 1.0 / (1.0 + C * np.exp(-A * np.log(counts + B)))


def ranking_metrics(ranked, targets, ks: Sequence[int] = (1, 3, 5), propensities=None,
                    *, normalize: bool = True) -> Dict[str, float]:
    r"""P@k, nDCG@k (and PSP@k when ``propensities`` are given) for every ``k`` of ``ks``,
    from one look-up of the ranked classes (the functions above, at the cost of one).

    Returns:
        ``{"P@1": ..., "nDCG@1": ..., "PSP@1": ..., "P@3": ...}`` (Python floats), in the
        order of ``ks``; PSP@k normalised as :func:`psp_at_k` (``normalize``).

    Example (the example of :func:`precision_at_k`):

    >>> from pyro_ar.evaluation import ranking_metrics
    >>> m = ranking_metrics([[3, 0, 1], [2, 1, 0]], [{0, 4}, {1, 2}], ks=(1, 2))
    >>> m["P@1"], m["P@2"], sorted(m)
    (0.5, 0.75, ['P@1', 'P@2', 'nDCG@1', 'nDCG@2'])
    """
    ks = list(ks) if isinstance(ks, (list, tuple, range, np.ndarray)) else [ks]
    if not ks:
        raise ValueError(f"ks must list at least one k, got ks={ks!r}")
    for k in ks:
        check_int("ks", k, low=1)
    h = _hits(ranked, targets, max(ks), ks_name="max(ks)")
    inverse = None if propensities is None else _inverse_propensities(propensities, h.width)
    out: Dict[str, float] = {}
    for k in ks:
        out[f"P@{k}"] = _precision(h, k)
        out[f"nDCG@{k}"] = _ndcg(h, k)
        if inverse is not None:
            out[f"PSP@{k}"] = _psp(h, k, inverse, normalize)
    return out

r"""Multi-label targets as (row, label) pairs: the *pick-all-labels* reduction.

A multi-label data set gives row :math:`n` a set :math:`Y_n \subseteq \{0..K-1\}` of
labels. The pick-all-labels (PAL) objective of the extreme-classification literature
(Menon, Rawat, Reddi & Kumar, NeurIPS 2019, "Multilabel reductions") counts every positive
label of a row as one observation of the row's categorical:

.. math::  \mathcal{L}(\theta) = \sum_n \sum_{l \in Y_n} \log p(l \mid x_n, \theta),

so every categorical model of ``pyro_ar`` fits it unchanged on the pairs
:math:`(x_{r_i}, l_i)` that :func:`label_pairs` lists: row :math:`r_i` once per label
:math:`l_i` of its set (rows with an empty set give no pair). With the softmax, the
normaliser of :math:`p(l \mid x_n)` runs over all K classes, the row's other positives
included, so A&R's subsample of the class sum treats them like any other class and its
bound is unbiased for :math:`\mathcal{L}`. At the population optimum
:math:`p(l \mid x) = P(l \in Y \mid x) / \mathbb{E}[|Y| \mid x]`: the model ranks labels by
their marginal probability of being relevant, which is what precision at k rewards -- when
the model can represent it.

A linear model cannot, and there the co-positives in the normaliser cost ranking: pair
(n, l) pushes each other positive j of the row down with weight :math:`p(j \mid x_n)`, so the
fit drives a row's positives towards the flat :math:`1/|Y_n|` rather than above the
negatives. :class:`ChoiceSets` takes them out: pair (n, l) is the choice of l among
:math:`\{l\} \cup \bar Y_n`, the softmax over that set (Gumbel noise),

.. math::  \mathcal{L}_{\mathrm{cs}}(\theta) = \sum_n \sum_{l \in Y_n} \log
           \frac{e^{\psi_{nl}}}{e^{\psi_{nl}} + \sum_{j \notin Y_n} e^{\psi_{nj}}},

the same as :math:`\mathcal{L}` for rows with one label. ``ARClassifier`` fits
:math:`\mathcal{L}_{\mathrm{cs}}` where it trains with the exact softmax (the small label
spaces, :func:`~pyro_ar.infer.selection.resolve_likelihood`) and scores its held-out pairs
by it; with A&R (large K: its negatives are drawn from all K classes, the weight pattern) it
fits :math:`\mathcal{L}`. On Bibtex with its 159 labels, at each objective's exact optimum
with the prior scale chosen on held-out rows, :math:`\mathcal{L}_{\mathrm{cs}}` has test P@1
0.6378 against 0.6314 and P@3 0.3991 against 0.3946 (paired standard errors 0.0042 and
0.0017; ``python -m benchmarks.multilabel_objectives --select objective``,
[claim multilabel-objectives]). Which reduction ranks best depends on how the label sets
arise: on scikit-learn's ``make_multilabel_classification``, whose rows draw their words from
a uniform mixture of their labels' topics, choice sets are level on P@1 (-0.0040, s.e. 0.0054)
and slightly behind on P@3 (-0.0040, s.e. 0.0023), and PAL-N, weighting each pair
:math:`1/|Y_n|`, is ahead of both (P@1 +0.0385, s.e. 0.0071). The choice-set softmax over all
K, ``predict_proba``, ranks the labels; it no longer estimates
:math:`P(l \in Y \mid x) / \mathbb{E}[|Y| \mid x]` (on Bibtex the test PAL log-likelihood is
lower: -3.61 against -3.08 nats per pair).

Targets are accepted in the forms scikit-learn users have:

* an indicator matrix of shape ``(n, K)`` with 0/1 entries: dense (numpy, torch) or
  ``scipy.sparse`` (``MultiLabelBinarizer().fit_transform(...)``, with or without
  ``sparse_output=True``); its column j is class j;
* a Python sequence of label collections (lists, sets, frozensets or 1-D numpy arrays), one
  per row, e.g. ``[[3, 17], [5], []]``. A sequence of *tuples* is not read as label sets:
  a tuple is one hashable label (a class named ``("a", "b")``), as in scikit-learn.
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional, Sequence

import numpy as np
import torch

from .labels import check_labels, encode_labels, label_array, label_codes
from .numerics import weighted_mean

__all__ = ["ChoiceSets", "LabelPairs", "MultilabelTargets", "choice_set_log_likelihood", "encode_multilabel",
           "expand_sample_weight", "format_label_sets", "is_indicator", "is_label_sets", "is_multilabel", "label_pairs",
           "pairs_to_indicator", "precision_at_1"]

#: the forms of multi-label targets, which a classifier's ``predict`` gives back: a dense
#: indicator, a ``scipy.sparse`` CSR indicator, or a list of label lists
FORMS = ("dense", "sparse", "sets")

#: the containers read as one row's label set (a tuple is a single hashable label)
SET_TYPES = (list, set, frozenset, np.ndarray)


class LabelPairs(NamedTuple):
    """The (row, label) pairs of multi-label targets, ordered by row then label.

    ``rows`` and ``labels`` are int64 numpy arrays of one length P (the number of positive
    labels in all); ``num_rows`` is the number of rows of the targets (rows without a label
    included); ``num_classes`` is K (the indicator's width, or 1 + the largest label).

    Example:

    >>> import numpy as np
    >>> from pyro_ar.label_sets import label_pairs
    >>> label_pairs(np.array([[0, 1, 1], [1, 0, 0]])).labels.tolist()
    [1, 2, 0]
    """

    rows: np.ndarray
    labels: np.ndarray
    num_rows: int
    num_classes: int


def is_indicator(y) -> bool:
    """Whether ``y`` is a 2-D indicator: ``scipy.sparse``, or an array with ``ndim == 2`` and
    more than one column (an ``(n, 1)`` column is a 1-D target, as in scikit-learn).

    Example:

    >>> import numpy as np
    >>> from pyro_ar.label_sets import is_indicator
    >>> is_indicator(np.zeros((4, 3))), is_indicator(np.zeros((4, 1))), is_indicator([[0, 1]])
    (True, False, False)
    """
    if hasattr(y, "tocsr") and getattr(y, "ndim", 2) == 2:  # scipy.sparse matrix or array
        return True
    shape = getattr(y, "shape", None)
    return shape is not None and len(shape) == 2 and shape[1] > 1 and not isinstance(y, (list, tuple))


def is_label_sets(y) -> bool:
    """Whether ``y`` is a non-empty Python sequence whose every item is a label collection
    (``list``, ``set``, ``frozenset`` or a 1-D numpy array).

    Example:

    >>> from pyro_ar.label_sets import is_label_sets
    >>> is_label_sets([[0, 3], {1}, []]), is_label_sets([(0, 3), (1,)])
    (True, False)
    """
    if not isinstance(y, (list, tuple)) or len(y) == 0:
        return False
    return all(isinstance(v, SET_TYPES) and (not isinstance(v, np.ndarray) or v.ndim == 1) for v in y)


def _indicator_pairs(Y, name: str) -> LabelPairs:
    """The pairs of a dense or sparse 0/1 indicator (checked: finite, every entry 0 or 1)."""
    if hasattr(Y, "tocsr"):
        csr = Y.tocsr()
        csr.sum_duplicates()
        values, (n, K) = np.asarray(csr.data), csr.shape
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(csr.indptr))
        cols = np.asarray(csr.indices, dtype=np.int64)
    else:
        dense = Y.detach().cpu().numpy() if hasattr(Y, "detach") else np.asarray(Y)
        if dense.dtype == object:
            raise ValueError(f"{name} must be a 0/1 indicator of numbers, got an array of dtype object")
        (n, K) = dense.shape
        rows, cols = (a.astype(np.int64) for a in np.nonzero(dense))
        values = dense[rows, cols]
    bad = ~((values == 0) | (values == 1))
    if bad.any():
        raise ValueError(f"{name} is read as a label indicator of shape ({n}, {K}), so its entries must be "
                         f"0 or 1, got {values[bad][:3].tolist()}")
    keep = values == 1  # (explicit zeros of a sparse matrix are no label)
    order = np.lexsort((cols[keep], rows[keep]))
    return LabelPairs(rows[keep][order], cols[keep][order], int(n), int(K))


def label_pairs(y, name: str = "y") -> LabelPairs:
    """The (row, label) pairs of multi-label targets ``y`` (see the module's text), with each
    row's duplicate labels counted once.

    :param y: an ``(n, K)`` 0/1 indicator (dense or ``scipy.sparse``) or a sequence of
        collections of integer class indices >= 0 (:func:`is_label_sets`).
    :param name: the argument's name in error messages.
    :raises ValueError: naming ``name``: entries of an indicator other than 0/1, labels that are
        not integers >= 0, or targets in neither form.

    Example:

    >>> from pyro_ar.label_sets import label_pairs
    >>> p = label_pairs([[2, 0], [], [1, 1]])
    >>> p.rows.tolist(), p.labels.tolist(), p.num_rows, p.num_classes
    ([0, 0, 2], [0, 2, 1], 3, 3)
    """
    if is_indicator(y):
        return _indicator_pairs(y, name)
    if not is_label_sets(y):
        raise ValueError(f"{name} must be an (n, K) 0/1 indicator or a sequence of label collections "
                         f"(lists or sets of class indices), got {type(y).__name__}")
    sizes = np.fromiter((len(v) for v in y), dtype=np.int64, count=len(y))
    flat = [v for s in y for v in (s.tolist() if isinstance(s, np.ndarray) else s)]
    labels = np.asarray(flat, dtype=object)
    ok = np.fromiter((isinstance(v, (int, np.integer)) and not isinstance(v, bool) and v >= 0 for v in flat),
                     dtype=bool, count=len(flat))
    if not ok.all():
        raise ValueError(f"{name}: label sets must hold class indices (integers >= 0), got {labels[~ok][:3].tolist()}")
    rows = np.repeat(np.arange(len(y), dtype=np.int64), sizes)
    labels = labels.astype(np.int64)
    K = int(labels.max()) + 1 if len(labels) else 0
    return _unique_pairs(rows, labels, len(y), K)


def _unique_pairs(rows: np.ndarray, labels: np.ndarray, num_rows: int, K: int) -> LabelPairs:
    """Sorted (row, label) pairs, duplicates dropped."""
    key = np.unique(rows * max(K, 1) + labels)
    return LabelPairs(key // max(K, 1), key % max(K, 1), int(num_rows), int(K))


def pairs_to_indicator(rows: Sequence[int], labels: Sequence[int], num_rows: int, num_classes: int):
    """The ``scipy.sparse.csr_matrix`` (num_rows, num_classes) 0/1 indicator of the pairs
    (float32, sorted indices; duplicates counted once).

    Example:

    >>> from pyro_ar.label_sets import pairs_to_indicator
    >>> pairs_to_indicator([0, 0, 2], [0, 2, 1], 3, 3).toarray().tolist()
    [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 0.0]]
    """
    import scipy.sparse as sp

    p = _unique_pairs(np.asarray(rows, dtype=np.int64), np.asarray(labels, dtype=np.int64), num_rows, num_classes)
    out = sp.csr_matrix((np.ones(len(p.rows), dtype=np.float32), (p.rows, p.labels)),
                        shape=(int(num_rows), int(num_classes)))
    out.sort_indices()
    return out


class MultilabelTargets(NamedTuple):
    """Encoded multi-label targets: the classes, and for each (row, label) pair its row and
    its class position; the number of rows; the form the targets came in (``FORMS``).

    Example:

    >>> from pyro_ar.label_sets import encode_multilabel
    >>> t = encode_multilabel([["a", "b"], ["b"]])
    >>> t.classes.tolist(), t.rows.tolist(), t.codes.tolist(), t.labels_per_row
    (['a', 'b'], [0, 0, 1], [0, 1, 1], 1.5)
    """

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
    :func:`~pyro_ar.label_sets.is_label_sets`) rather than one label per row.

    Example:

    >>> from pyro_ar.label_sets import is_multilabel
    >>> is_multilabel([[1, 2], [0]]), is_multilabel([1, 0])
    (True, False)
    """
    return is_indicator(y) or is_label_sets(y)


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
    given classes raises ``ValueError`` naming it, or is dropped with ``drop_unknown``.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.label_sets import encode_multilabel
    >>> t = encode_multilabel(np.array([[0, 1, 1], [1, 0, 0]]))
    >>> t.rows.tolist(), t.codes.tolist(), t.form
    ([0, 0, 1], [1, 2, 0], 'dense')
    """
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
    """Per-row ``sample_weight`` given to each of the row's pairs (None stays None).

    Example:

    >>> from pyro_ar.label_sets import encode_multilabel, expand_sample_weight
    >>> expand_sample_weight([2.0, 3.0], encode_multilabel([[0, 1], [1]])).tolist()
    [2.0, 2.0, 3.0]
    """
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
    an int64 indicator (``"dense"``), a CSR indicator (``"sparse"``) or label lists.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.label_sets import format_label_sets
    >>> format_label_sets(np.array([[1], [0]]), np.array(["a", "b"]), "sets")
    [['b'], ['a']]
    """
    n, k = positions.shape
    if form == "sets":
        return [classes[row].tolist() for row in positions]
    out = pairs_to_indicator(np.repeat(np.arange(n), k), positions.reshape(-1), n, len(classes)).astype(np.int64)
    return out if form == "sparse" else out.toarray()


def precision_at_1(top1: np.ndarray, targets: MultilabelTargets, sample_weight=None) -> float:
    """The (weighted) fraction of rows whose top class is one of their labels: P@1.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.label_sets import encode_multilabel, precision_at_1
    >>> precision_at_1(np.array([1, 0]), encode_multilabel([[0, 1], [1]]))
    0.5
    """
    K = len(targets.classes)
    hits = np.isin(np.arange(targets.num_rows) * K + top1, targets.rows * K + targets.codes)
    return float(np.average(hits, weights=sample_weight))


class ChoiceSets:
    r"""The choice set of every (row, label) pair: the label and the classes that are **not**
    labels of its row.

    Pair :math:`i = (n, l)` is read as the choice of :math:`l` among :math:`\{l\} \cup \bar Y_n`
    (:math:`\bar Y_n` the classes outside the row's set): under the random-utility model with
    Gumbel noise its likelihood is the softmax over that set,

    .. math::  p_{\mathrm{cs}}(l \mid x_n, Y_n) = \frac{e^{\psi_{nl}}}{e^{\psi_{nl}}
               + \sum_{j \notin Y_n} e^{\psi_{nj}}},

    the pick-all-labels softmax with the row's other positives :math:`Y_n \setminus \{l\}`
    taken out of the normaliser (their utilities set to :math:`-\infty`). The plain softmax's
    pair (n, l) pushes each co-positive j down with weight :math:`p(j \mid x_n)`, driving a
    row's positives towards the flat :math:`1/|Y_n|`; here each positive has only to beat the
    negatives, which is what precision at k rewards (``benchmarks/multilabel_objectives.py``).
    A row with one label is unchanged.

    :param groups: the row of each pair, int array (P,) (any order; rows need not be 0..R-1).
    :param codes: the class position of each pair, int array (P,).
    :param num_classes: K.
    :param device: where :meth:`excluded` builds its masks.

    Example:

    >>> import torch
    >>> from pyro_ar.label_sets import ChoiceSets
    >>> cs = ChoiceSets([0, 0, 1], [2, 0, 1], num_classes=3)
    >>> cs.excluded(torch.tensor([0, 1, 2])).int().tolist()   # pair 0 = (row 0, class 2): class 0 out
    [[1, 0, 0], [0, 0, 1], [0, 0, 0]]
    """

    def __init__(self, groups, codes, num_classes: int, device="cpu"):
        groups, codes = np.asarray(groups, dtype=np.int64), np.asarray(codes, dtype=np.int64)
        if groups.shape != codes.shape or groups.ndim != 1:
            raise ValueError(f"ChoiceSets: groups and codes must be 1-D of one length, got shapes "
                             f"{groups.shape} and {codes.shape}")
        _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
        order = np.argsort(inverse, kind="stable")  # the pairs of each row, together
        as_t = lambda a: torch.as_tensor(a, dtype=torch.long, device=device)  # noqa: E731
        self.num_classes, self.device = int(num_classes), torch.device(device)
        self._row, self._codes, self._order = as_t(inverse.reshape(-1)), as_t(codes), as_t(order)
        self._count, self._start = as_t(counts), as_t(np.cumsum(counts) - counts)

    def excluded(self, index: torch.Tensor) -> torch.Tensor:
        r"""The (B, K) bool mask of the classes outside the choice sets of the pairs ``index``
        (B,): pair (n, l)'s row's labels other than l. O(B + the labels of the B rows)."""
        index = torch.as_tensor(index, dtype=torch.long, device=self.device).reshape(-1)
        rows = self._row[index]
        count = self._count[rows]
        slot = torch.repeat_interleave(torch.arange(len(index), device=self.device), count)
        first = torch.repeat_interleave(self._start[rows] - (torch.cumsum(count, 0) - count), count)
        mates = self._codes[self._order[first + torch.arange(len(slot), device=self.device)]]
        mask = torch.zeros(len(index), self.num_classes, dtype=torch.bool, device=self.device)
        mask[slot, mates] = True
        mask[torch.arange(len(index), device=self.device), self._codes[index]] = False
        return mask

    def masked(self, utility, index: torch.Tensor) -> torch.Tensor:
        """The (B, K) utilities of the pairs ``index`` (a tensor or a lazy
        :class:`~pyro_ar.utility.Utility`, materialised) with the classes outside their choice
        sets at the dtype's lowest value: its exponential underflows to 0, as :math:`-\\infty`'s
        does, while finiteness checks still catch a NaN or an infinite utility."""
        from .utility import as_utility

        full = as_utility(utility).full()
        return full.masked_fill(self.excluded(index).to(full.device), torch.finfo(full.dtype).min)

    def log_prob(self, utility: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
        r""":math:`\log p_{\mathrm{cs}}(l_i \mid x_{n_i}, Y_{n_i})` of the pairs ``index`` (B,)
        from their rows' utilities ``utility`` (B, K): the log-softmax over each choice set."""
        index = torch.as_tensor(index, dtype=torch.long, device=self.device).reshape(-1)
        masked = self.masked(utility, index)
        labels = self._codes[index].to(masked.device)
        return masked.gather(-1, labels[:, None])[:, 0] - torch.logsumexp(masked, -1)

    def __len__(self):
        return len(self._codes)

    def __repr__(self):
        return f"ChoiceSets({len(self)} pairs, num_classes={self.num_classes})"


def choice_set_log_likelihood(source, choice_sets: ChoiceSets, rows, weights=None, chunk_size: int = 4096) -> float:
    r"""The mean over the pairs i of ``choice_sets`` of :math:`\log p_{\mathrm{cs}}(l_i \mid
    x_{n_i}, Y_{n_i})` (:class:`ChoiceSets`), weighted by ``weights`` (P,) when given: the
    held-out score of a fit on choice sets. Pair i's utilities are row ``rows[i]`` of
    ``source`` (posterior draws (S, B, K): the log of the mean over draws of the choice-set
    probability). Chunks of ``chunk_size`` pairs.

    Example (row 0 has labels 2 and 0, row 1 label 1; pair i's row is ``rows[i]``):

    >>> import torch
    >>> from pyro_ar.label_sets import ChoiceSets, choice_set_log_likelihood
    >>> cs = ChoiceSets([0, 0, 1], [2, 0, 1], num_classes=3)
    >>> U = torch.tensor([[1.0, 0.0, 2.0], [0.5, 0.5, 0.0]])
    >>> rows = torch.tensor([0, 0, 1])
    >>> lp = cs.log_prob(U[rows], torch.arange(3))  # pair (0, 2) over {1, 2}: log(e^2 / (e^0 + e^2))
    >>> round(float(lp[0]), 4), round(choice_set_log_likelihood(lambda r: U[r], cs, rows), 4)
    (-0.1269, -0.4661)
    """
    out = []
    for lo in range(0, len(choice_sets), chunk_size):
        idx = torch.arange(lo, min(len(choice_sets), lo + chunk_size))
        u = source(rows[idx].to(rows.device))
        if u.dim() == 3:
            lp = torch.stack([choice_sets.log_prob(s, idx) for s in u]).logsumexp(0) - math.log(u.shape[0])
        else:
            lp = choice_sets.log_prob(u, idx)
        out.append(lp.double())
    return weighted_mean(torch.cat(out), weights)

r"""Sparse bag-of-words features: next-word prediction from the bag of the previous words.

For a token stream :math:`w_1, w_2, \dots` (word ids in a vocabulary of size V) the
features of position t are the (weighted) counts of the previous ``window`` = L words,

.. math::  x_{t j} = \sum_{i=1}^{L} a_i\, [w_{t+1-i} = j], \qquad j = 0..V-1,

with position weights :math:`a_i` (``position_weights``): 1 (plain counts, the default) or
:math:`a_i = 1/i` (``"inverse"``: the i-th previous word weighs 1/i, so the previous word
dominates as it does in language, while the row is still a bag -- a linear model of plain
counts cannot tell the previous word from the tenth). A sparse row with at most L non-zeros,
and the label is the next word :math:`w_{t+1}`:
a categorical problem with D = K = V (about 26,000 for Brown) and about L non-zeros per
row -- the shape sparse inputs at large K are made for
(:class:`~pyro_ar.utility.LinearUtility` with a sparse x, the low-rank
:class:`~pyro_ar.models.LinearClassifier`, :class:`~pyro_ar.ARClassifier`).

* :func:`make_bag_of_words` -- the sparse matrix of a token stream;
* :func:`load_brown_bag_of_words` -- the Brown corpus of :func:`~pyro_ar.datasets.load_brown`
  (shipped with the package) as such a problem;
* :func:`to_scipy_csr` -- a torch sparse matrix as ``scipy.sparse.csr_matrix`` (the
  estimator's sparse input).
"""

from __future__ import annotations

from typing import Optional

import torch

from ._common import Dataset
from .text import load_brown

__all__ = ["make_bag_of_words", "load_brown_bag_of_words", "to_scipy_csr"]


def _position_weights(position_weights, window: int) -> torch.Tensor:
    """The (window,) weights a_1..a_L of the previous words (ValueError naming the argument)."""
    if position_weights is None:
        return torch.ones(window, dtype=torch.float64)
    if isinstance(position_weights, str):
        if position_weights != "inverse":
            raise ValueError(f"position_weights must be None, 'inverse' or {window} positive numbers, "
                             f"got {position_weights!r}")
        return 1.0 / torch.arange(1, window + 1, dtype=torch.float64)
    a = torch.as_tensor(position_weights, dtype=torch.float64).reshape(-1)
    if a.shape != (window,) or not bool(torch.isfinite(a).all() & (a > 0).all()):
        raise ValueError(f"position_weights must be None, 'inverse' or {window} positive numbers, "
                         f"got {position_weights!r}")
    return a


def make_bag_of_words(tokens: torch.Tensor, num_features: int, window: int = 10,
                      boundary_id: Optional[int] = None, dtype: torch.dtype = torch.float32,
                      position_weights=None) -> torch.Tensor:
    """Row t: the counts of ``tokens[t - window + 1 .. t]`` (a coalesced sparse COO (N, D)),
    each occurrence weighted by its position's weight.

    :param tokens: int64 (N,) word ids in ``[0, num_features)``, in stream order.
    :param num_features: D (the vocabulary size).
    :param window: L, the number of previous words in each bag.
    :param boundary_id: if given, bags stop at the most recent occurrence of this token
        (the sentence boundary), which they include: no context crosses a sentence.
    :param dtype: floating dtype of the counts.
    :param position_weights: None (every previous word counts 1), ``"inverse"`` (the i-th
        previous word counts 1/i; ``tokens[t]`` is the first) or ``window`` positive numbers.

    Example:

    >>> import torch
    >>> from pyro_ar.datasets import make_bag_of_words
    >>> x = make_bag_of_words(torch.tensor([1, 4, 4, 2]), num_features=5, window=3)
    >>> x.to_dense().tolist()[2:]
    [[0.0, 1.0, 0.0, 0.0, 2.0], [0.0, 0.0, 1.0, 0.0, 2.0]]
    >>> w = make_bag_of_words(torch.tensor([1, 4, 4, 2]), 5, window=3, position_weights="inverse")
    >>> w.to_dense()[3].double().round(decimals=4).tolist()      # 2: 1, 4: 1/2 + 1/3
    [0.0, 0.0, 1.0, 0.0, 0.8333]
    """
    if not isinstance(tokens, torch.Tensor) or tokens.dim() != 1 or tokens.is_floating_point():
        raise ValueError(f"tokens must be a 1-D integer tensor, got {getattr(tokens, 'shape', tokens)!r}")
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise ValueError(f"window must be an integer >= 1, got window={window!r}")
    if tokens.numel() and (int(tokens.min()) < 0 or int(tokens.max()) >= num_features):
        raise ValueError(f"tokens must lie in [0, num_features={num_features}), got values in "
                         f"[{int(tokens.min())}, {int(tokens.max())}]")
    a = _position_weights(position_weights, window)
    N = tokens.shape[0]
    t = torch.arange(N)
    pos = t.unsqueeze(-1) - torch.arange(window)  # (N, L) positions in each bag
    valid = pos >= 0
    if boundary_id is not None:  # sentence index of every position; bags stay in theirs
        sentence = torch.cumsum((tokens == boundary_id).long(), 0)
        valid &= sentence[pos.clamp(min=0)] == sentence.unsqueeze(-1)
    rows, cols = t.unsqueeze(-1).expand_as(pos)[valid], tokens[pos[valid]]
    values = a.expand(N, window)[valid].to(dtype)  # coalesce sums repeated words
    return torch.sparse_coo_tensor(torch.stack([rows, cols]), values, (N, num_features),
                                   check_invariants=False).coalesce()


def _subsample(x: torch.Tensor, y: torch.Tensor, max_rows: Optional[int], g: torch.Generator):
    """At most ``max_rows`` rows of (x, y), uniformly without replacement (sorted)."""
    if max_rows is None or max_rows >= len(y):
        return x, y
    keep = torch.randperm(len(y), generator=g)[:max_rows].sort().values
    return x.index_select(0, keep).coalesce(), y[keep]


def load_brown_bag_of_words(window: int = 10, max_train: Optional[int] = None,
                            max_test: Optional[int] = None, within_sentence: bool = False,
                            seed: int = 0, position_weights=None, **brown_kwargs) -> Dataset:
    """Brown next-word prediction from the bag of the previous ``window`` words (D = K = V).

    The bigram pairs of :func:`~pyro_ar.datasets.load_brown` (``brown_kwargs`` go there)
    are in corpus order, so their previous-word ids are the token stream; the features of
    a pair are :func:`make_bag_of_words` of that stream (training and test streams
    separately), its label the next word. With ``within_sentence`` bags stop at the
    sentence boundary ``<s>``. ``max_train`` / ``max_test`` keep a uniform subsample of the
    rows (seeded by ``seed``). ``position_weights`` as in :func:`make_bag_of_words`
    (``"inverse"``: the i-th previous word weighs 1/i).

    :returns: a :class:`~pyro_ar.datasets.Dataset` whose ``x_*`` are coalesced torch sparse
        COO (N, V) float32 count matrices and ``y_*`` int64 (N,) word ids; ``info`` is that of
        ``load_brown`` plus ``window``, ``within_sentence``, ``num_features`` and
        ``mean_nnz_train`` (non-zeros per training row).

    Example:

    >>> from pyro_ar.datasets import load_brown_bag_of_words
    >>> d = load_brown_bag_of_words(window=10, max_train=75_000)   # doctest: +SKIP
    >>> d.x_train.shape, d.num_classes                           # doctest: +SKIP
    (torch.Size([75000, 26101]), 26101)
    """
    brown = load_brown(**brown_kwargs)
    V = brown.num_classes
    boundary = brown.info["boundary_id"] if within_sentence else None
    g = torch.Generator().manual_seed(int(seed))
    x_train, y_train = _subsample(make_bag_of_words(brown.x_train, V, window, boundary,
                                                    position_weights=position_weights),
                                  brown.y_train, max_train, g)
    x_test, y_test = _subsample(make_bag_of_words(brown.x_test, V, window, boundary,
                                                  position_weights=position_weights),
                                brown.y_test, max_test, g)
    info = dict(brown.info, name="brown-bag-of-words", window=window, within_sentence=within_sentence,
                position_weights=position_weights if isinstance(position_weights, (str, type(None)))
                else [float(v) for v in position_weights],
                num_features=V, mean_nnz_train=x_train._nnz() / max(1, len(y_train)))
    return Dataset(x_train, y_train, x_test, y_test, V, brown.class_names, info)


def to_scipy_csr(x: torch.Tensor):
    """A 2-D torch tensor (sparse COO / CSR, or dense) as a ``scipy.sparse.csr_matrix``.

    Example:

    >>> import torch
    >>> from pyro_ar.datasets import to_scipy_csr
    >>> to_scipy_csr(torch.eye(3).to_sparse()).nnz
    3
    """
    import scipy.sparse as sp

    if x.layout == torch.sparse_csr:
        x = x.to_sparse_coo()
    if x.layout != torch.sparse_coo:
        return sp.csr_matrix(x.detach().cpu().numpy())
    x = x.coalesce()
    rows, cols = x.indices().cpu().numpy()
    return sp.csr_matrix((x.values().detach().cpu().numpy(), (rows, cols)), shape=tuple(x.shape))

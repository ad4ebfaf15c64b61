r"""Class subsampling ("reduce"): unbiased estimates of a sum over the other classes.

The augmented log-likelihood of a datapoint with label :math:`y` is a sum over classes,

.. math::  S_y = \sum_{k' \ne y} g(k').

A :class:`NegativeSampler` draws class indices and weights :math:`(k'_j, a_j)` such that
:math:`\hat S_y = \sum_j a_j\, g(k'_j)` has :math:`\mathbb{E}[\hat S_y] = S_y`:

* :class:`PerDatapointNegatives` -- for each datapoint, :math:`s` classes uniform without
  replacement from :math:`\{0..K-1\}\setminus\{y\}`; :math:`a_j = (K-1)/s` (the paper's).
* :class:`SharedNegatives` -- one set of :math:`s` classes uniform without replacement
  from :math:`\{0..K-1\}` for the whole minibatch (so a linear utility is one matrix
  product); :math:`a_j = K/s\cdot 1[k'_j \ne y]`.
* :class:`ImportanceNegatives` -- :math:`s` shared draws with replacement from a proposal
  :math:`q`; :math:`a_j = 1[k'_j \ne y] / (s\, q(k'_j))` (the draws equal to :math:`y` are
  dropped, which keeps the estimate unbiased for the sum over :math:`k'\ne y`).
* :class:`LabelHeadNegatives` -- stratified: the minibatch's own distinct labels (the
  *head*, weight :math:`1[k' \ne y]`, summed exactly) plus another sampler's draw restricted to
  the other classes (the *tail*). Frequent classes, which dominate a peaked class sum, are
  the ones a minibatch's labels contain; a local guide uses it for its own estimate of the
  class sum (issue 27).
* :class:`ScreenedNegatives` -- per datapoint, :math:`M = 4s` uniform candidates ranked by
  their current utilities (no gradient): the :math:`s/2` highest summed with weight
  :math:`(K-1)/M`, :math:`s/2` of the others subsampled; the variance of a uniform draw of
  :math:`M` at the cost of :math:`s` terms (probit's few dominant classes, issue 27). Its draw
  needs the utilities (``uses_utility``), which :class:`~pyro_ar.distributions.ClassSumLikelihood`
  passes.

With ``num_negatives=None`` (or :math:`s \ge K-1`) every sampler returns all classes
with weight :math:`1[k' \ne y]`, i.e. the exact sum. No sampler does O(K) work per call,
except the importance sampler's O(log K) binary search per draw.

* :class:`FixedNegatives` -- a draw made beforehand (a :class:`Negatives`), returned as it is.

**Where negatives are given.** Every likelihood object (``AR(noise, negatives=...)``) and
every class-sum distribution (:class:`~pyro_ar.distributions.AugmentedCategorical`, the
baselines, :func:`~pyro_ar.distributions.sample_categorical`) takes one argument,
``negatives``, read once by :func:`as_negative_sampler`: None (every class, exact), an int s
(``PerDatapointNegatives(s)``), a :class:`NegativeSampler`, or a fixed :class:`Negatives`
draw. The former keywords ``num_negatives``, ``strategy`` and ``proposal`` raise a
``TypeError`` that names the replacement (:data:`MOVED_KEYWORDS`). Strategy *names* are for
scripts and command lines only: :func:`get_negative_sampler`.

The package has two modules, both re-exported here: :mod:`pyro_ar.negatives.samplers` (the
record of a draw, the base class and the plain draws) and :mod:`pyro_ar.negatives.stratified`
(the stratified draws built on them); the names of the strategies
(``STRATEGIES``, :func:`get_negative_sampler`) and the reading of a ``negatives`` argument
(:func:`as_negative_sampler`) are here.
"""

import numbers
from typing import Optional

import torch

from .samplers import (DEFAULT_NUM_NEGATIVES, FixedNegatives, ImportanceNegatives, NegativeSampler, Negatives,
                       PerDatapointNegatives, SharedNegatives, _cached_importance_sampler)
from .stratified import LabelHeadNegatives, ScreenedNegatives

__all__ = [
    "Negatives",
    "NegativeSampler",
    "PerDatapointNegatives",
    "SharedNegatives",
    "ImportanceNegatives",
    "LabelHeadNegatives",
    "ScreenedNegatives",
    "FixedNegatives",
    "as_negative_sampler",
    "MOVED_KEYWORDS",
    "get_negative_sampler",
    "STRATEGIES",
    "DEFAULT_NUM_NEGATIVES",
]

STRATEGIES = {
    "per_datapoint": PerDatapointNegatives,
    "shared": SharedNegatives,
    "importance": ImportanceNegatives,
    "screened": ScreenedNegatives,
}


def get_negative_sampler(strategy: str = "per_datapoint", num_negatives: Optional[int] = None,
                         proposal: Optional[torch.Tensor] = None) -> NegativeSampler:
    """Build a sampler from a strategy name: the name map for scripts and command lines (a
    sampler object is not a name: give it as ``negatives=`` itself, :func:`as_negative_sampler`).

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import get_negative_sampler
    >>> sampler = get_negative_sampler("shared", 5)
    >>> neg = sampler(torch.tensor([0, 3, 3]), 100)   # labels of a minibatch, K = 100
    >>> neg.index.shape, neg.shared
    (torch.Size([5]), True)
    """
    if isinstance(strategy, NegativeSampler):
        raise ValueError(f"strategy must be a name of {list(STRATEGIES)}, got the sampler {strategy!r}: give a "
                         "sampler itself as negatives=")
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy={strategy!r}; expected one of {list(STRATEGIES)}")
    if strategy == "importance":
        if proposal is None:
            raise ValueError("strategy='importance' needs a proposal (class weights over K)")
        return _cached_importance_sampler(num_negatives, proposal)
    if proposal is not None:
        raise ValueError(f"proposal is only used with strategy='importance', got strategy={strategy!r}")
    return STRATEGIES[strategy](num_negatives)


def as_negative_sampler(negatives=None) -> NegativeSampler:
    """The one reading of a ``negatives`` argument (likelihood objects and distributions alike).

    None: every class, the exact class sum (``PerDatapointNegatives(None)``); an int s:
    ``PerDatapointNegatives(s)``, s classes per datapoint, uniform; a :class:`NegativeSampler`:
    itself; a :class:`Negatives` draw: :class:`FixedNegatives` of it.

    Example:

    >>> from pyro_ar.negatives import SharedNegatives, as_negative_sampler
    >>> as_negative_sampler(20)
    PerDatapointNegatives(num_negatives=20)
    >>> as_negative_sampler(SharedNegatives(64))
    SharedNegatives(num_negatives=64)
    """
    if negatives is None or isinstance(negatives, NegativeSampler):
        return PerDatapointNegatives(None) if negatives is None else negatives
    if isinstance(negatives, Negatives):
        return FixedNegatives(negatives)
    if isinstance(negatives, numbers.Integral) and not isinstance(negatives, bool) and negatives >= 1:
        return PerDatapointNegatives(negatives)
    raise ValueError(f"negatives must be None, a positive int or a pyro_ar.negatives.NegativeSampler (or a fixed "
                     f"pyro_ar.negatives.Negatives draw), got negatives={negatives!r}")


MOVED_KEYWORDS = {
    "num_negatives": "give the negatives as one argument, negatives=s (an int: s classes per datapoint, "
                     "uniform) or a sampler of pyro_ar.negatives",
    "strategy": "give the sampler as negatives=..., e.g. negatives=SharedNegatives(s), ImportanceNegatives(s, "
                "proposal) or ScreenedNegatives(s) (pyro_ar.negatives)",
    "proposal": "give the proposal to its sampler, negatives=ImportanceNegatives(s, proposal)",
}
"""Where each negatives keyword of the former distributions went (their ``TypeError`` quotes it,
:func:`pyro_ar.numerics.reject_moved_keywords`)."""


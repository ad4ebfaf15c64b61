r"""The unbiased class samplers: the record of a draw (:class:`Negatives`), the base class
(:class:`NegativeSampler`) and the three plain draws -- uniform per datapoint, uniform shared
by the minibatch, importance draws from a proposal (see :mod:`pyro_ar.negatives`)."""

import math
import weakref
from typing import Optional, Sequence

import torch

from ..numerics import check_int
from ..subsets import sample_without_replacement

__all__ = ["Negatives", "NegativeSampler", "PerDatapointNegatives", "SharedNegatives", "ImportanceNegatives",
           "FixedNegatives", "DEFAULT_NUM_NEGATIVES"]


#: The number of negatives of a model's default likelihood (``num_negatives="auto"``) and of
#: the estimator: enough for a low-variance estimate, small enough that a step's cost does
#: not depend on K.
DEFAULT_NUM_NEGATIVES = 20


class Negatives:
    """Sampled classes and their estimator weights.

    :ivar index: class indices, ``(s,)`` when ``shared`` else ``labels.shape + (s,)``.
    :ivar weight: weights :math:`a_j`, broadcastable to ``labels.shape + (s,)``; zero
        for a class equal to the datapoint's label. May be given as a function of no
        arguments that returns them: it is then called on first use (a sampler whose
        ``log_weight`` serves the closed-form softmax bound, which never reads ``weight``,
        saves a pass over the batch x s entries).
    :ivar bool shared: whether one index set serves the whole batch.
    :ivar log_weight: :math:`\\log a_j` (``-inf`` where :math:`a_j = 0`), shaped as ``weight``,
        when the sampler has it for less than ``weight.log()`` costs (a comparison and a
        ``torch.where`` instead of a logarithm per entry); None: take it from ``weight``
        (:meth:`log_weights`).
    :ivar bool nonempty: every datapoint's row holds a class other than its label (a weight
        :math:`a_j > 0`), e.g. s >= 2 distinct shared classes; False: not known (a row may
        be all zero, and :math:`\\log\\hat S_y = -\\infty` there needs a guard).

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import PerDatapointNegatives
    >>> neg = PerDatapointNegatives(2)(torch.tensor([1]), 5)
    >>> neg.shared, neg.index.shape
    (False, torch.Size([1, 2]))
    """

    __slots__ = ("index", "_weight", "shared", "log_weight", "nonempty")

    def __init__(self, index: torch.Tensor, weight, shared: bool, log_weight: Optional[torch.Tensor] = None,
                 nonempty: bool = False):
        self.index, self._weight, self.shared, self.log_weight = index, weight, shared, log_weight
        self.nonempty = nonempty

    @property
    def weight(self) -> torch.Tensor:
        """The weights :math:`a_j` (computed on first use when given as a function)."""
        if callable(self._weight) and not isinstance(self._weight, torch.Tensor):
            self._weight = self._weight()
        return self._weight

    def __repr__(self):
        return f"Negatives(index={self.index!r}, weight={self.weight!r}, shared={self.shared})"

    def log_weights(self, dtype: torch.dtype) -> torch.Tensor:
        """:math:`\\log a_j` in ``dtype``, ``-inf`` where :math:`a_j = 0` (``log_weight`` when the
        sampler gave it, else from ``weight``).

        Example:

        >>> import torch
        >>> from pyro_ar.negatives import Negatives
        >>> Negatives(torch.tensor([1, 2]), torch.tensor([2.0, 0.0]), True).log_weights(torch.float32)
        tensor([0.6931,   -inf])
        """
        if self.log_weight is not None:
            return self.log_weight.to(dtype)
        w = self.weight.to(dtype)
        return torch.where(w > 0, w.log(), -math.inf)

    def check(self, num_classes: int, batch_shape: Sequence[int] = (), name: str = "negatives") -> None:
        """Raise ``ValueError`` naming ``name`` unless these are valid negatives over K classes.

        ``index`` must be an integer tensor in ``[0, num_classes)``, 1-D when ``shared``
        (else ``batch_shape``-broadcastable leading dims); ``weight`` a finite tensor
        ``>= 0`` broadcastable to the indices (a negative weight would turn the estimate of a
        sum of log-CDFs positive). Used for user-supplied ``negatives=`` of the distributions.

        Example:

        >>> import torch
        >>> from pyro_ar.negatives import Negatives
        >>> Negatives(torch.tensor([1, 2]), torch.tensor(-1.0), True).check(5)
        Traceback (most recent call last):
        ...
        ValueError: negatives.weight must be >= 0 (estimator weights a_j), got [-1.0]
        """
        index, weight = self.index, self.weight
        if not isinstance(index, torch.Tensor) or index.is_floating_point() or index.is_complex() \
                or index.dtype == torch.bool:
            raise ValueError(f"{name}.index must be an integer tensor of class indices, got "
                             f"{getattr(index, 'dtype', type(index).__name__)}")
        if self.shared and index.dim() != 1:
            raise ValueError(f"{name}.index must be 1-D when shared=True, got shape {tuple(index.shape)}")
        if not self.shared:
            try:
                torch.broadcast_shapes(index.shape[:-1], torch.Size(batch_shape))
            except RuntimeError:
                raise ValueError(f"{name}.index of shape {tuple(index.shape)} does not broadcast with "
                                 f"the batch shape {tuple(batch_shape)} (+ (s,))") from None
        outside = (index < 0) | (index >= num_classes)
        if outside.any():
            raise ValueError(f"{name}.index must lie in [0, {num_classes}), got {index[outside][:5].tolist()}")
        if not isinstance(weight, torch.Tensor):
            raise ValueError(f"{name}.weight must be a tensor, got {weight!r}")
        try:
            torch.broadcast_shapes(weight.shape, index.shape if not self.shared
                                   else weight.shape[:-1] + index.shape)
        except RuntimeError:
            raise ValueError(f"{name}.weight of shape {tuple(weight.shape)} does not broadcast with "
                             f"{name}.index of shape {tuple(index.shape)}") from None
        w = weight.detach()
        if not w.is_floating_point():
            w = w.double()
        bad = ~torch.isfinite(w) | (w < 0)
        if bad.any():
            raise ValueError(f"{name}.weight must be >= 0 (estimator weights a_j), got {w[bad][:5].tolist()}")


def _check_num_negatives(num_negatives):
    return check_int("num_negatives", num_negatives, low=1, allow_none=True)


class NegativeSampler:
    """Base class: draws :class:`Negatives` for a batch of labels over ``num_classes``.

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import get_negative_sampler
    >>> sampler = get_negative_sampler("per_datapoint", 4)   # a NegativeSampler subclass
    >>> sampler(torch.tensor([0, 1, 2]), 10).index.shape
    torch.Size([3, 4])
    """

    strategy = None

    def __init__(self, num_negatives: Optional[int] = None) -> None:
        self.num_negatives = _check_num_negatives(num_negatives)

    def is_exact(self, num_classes: int) -> bool:
        return self.num_negatives is None or self.num_negatives >= num_classes - 1

    def __call__(self, labels: torch.Tensor, num_classes: int) -> Negatives:
        num_classes = check_int("num_classes", num_classes, low=1)
        if self.is_exact(num_classes):
            index = torch.arange(num_classes, device=labels.device)
            weight = (index != labels.unsqueeze(-1))
            return Negatives(index, weight, True)
        return self._sample(labels, num_classes)

    def _sample(self, labels, num_classes):
        raise NotImplementedError

    def check(self, num_classes: int, batch_shape: Sequence[int] = ()) -> None:
        """Raise ``ValueError`` unless this sampler can draw for labels of ``batch_shape`` over
        ``num_classes`` classes (a distribution calls it when validation is on). Here: a sampler
        built over a fixed number of classes (a proposal's) must have ``num_classes``."""
        K = getattr(self, "num_classes", num_classes)
        if K != num_classes:
            raise ValueError(f"proposal is over {K} classes but the utility has num_classes={num_classes}")

    def __repr__(self):
        return f"{type(self).__name__}(num_negatives={self.num_negatives})"


class FixedNegatives(NegativeSampler):
    """A draw made beforehand, returned at every call: the negatives of a factor whose model
    already drew them (e.g. to compute the utilities of those classes only).

    :param negatives: the :class:`Negatives` (checked by :meth:`Negatives.check` when the
        distribution validates).

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import FixedNegatives, Negatives
    >>> draw = Negatives(torch.tensor([1, 2]), torch.tensor(2.0), True)
    >>> FixedNegatives(draw)(torch.tensor([0, 3]), 5) is draw
    True
    """

    strategy = "fixed"

    def __init__(self, negatives: Negatives) -> None:
        if not isinstance(negatives, Negatives):
            raise ValueError(f"negatives must be a pyro_ar.negatives.Negatives, got negatives={negatives!r}")
        self.negatives = negatives
        self.num_negatives = negatives.index.shape[-1] if isinstance(negatives.index, torch.Tensor) \
            and negatives.index.dim() else None

    def is_exact(self, num_classes: int) -> bool:
        return False

    def __call__(self, labels: torch.Tensor, num_classes: int, utility=None) -> Negatives:
        return self.negatives

    def check(self, num_classes: int, batch_shape: Sequence[int] = ()) -> None:
        self.negatives.check(num_classes, batch_shape)

    def __repr__(self):
        return f"FixedNegatives(num_negatives={self.num_negatives}, shared={self.negatives.shared})"


class PerDatapointNegatives(NegativeSampler):
    """s classes per datapoint, uniform without replacement among those != label; weight (K-1)/s.

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import PerDatapointNegatives
    >>> neg = PerDatapointNegatives(3)(torch.tensor([0, 5]), 10)   # 3 classes for each datapoint
    >>> neg.index.shape, bool((neg.index != torch.tensor([[0], [5]])).all())
    (torch.Size([2, 3]), True)
    """

    strategy = "per_datapoint"

    def _sample(self, labels, num_classes):
        s = self.num_negatives
        index = sample_without_replacement(num_classes - 1, s, labels.shape, device=labels.device)
        index = index + (index >= labels.unsqueeze(-1)).long()  # skip the label itself
        weight = torch.full((), (num_classes - 1) / s, device=labels.device)
        return Negatives(index, weight, False)


class SharedNegatives(NegativeSampler):
    """s classes shared by the batch, uniform without replacement; weight K/s, label dropped.

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import SharedNegatives
    >>> neg = SharedNegatives(4)(torch.tensor([0, 5, 5]), 1000)   # one set for the minibatch
    >>> neg.index.shape, neg.weight.shape
    (torch.Size([4]), torch.Size([3, 4]))
    """

    strategy = "shared"

    def _sample(self, labels, num_classes):
        s = self.num_negatives
        index = sample_without_replacement(num_classes, s, device=labels.device)
        other = index != labels.unsqueeze(-1)
        a = num_classes / s
        # the log-weights with a comparison's mask, no logarithm per entry (log S_hat's input);
        # the weights themselves only when read (the closed-form bound reads log_weight only)
        # (s >= 2 distinct classes: at most one is a row's label, so every row keeps another)
        return Negatives(index, lambda: other * a, True, torch.where(other, math.log(a), -math.inf), s >= 2)


class ImportanceNegatives(NegativeSampler):
    r"""s shared draws with replacement from a proposal q; weight 1[k' != y] / (s q(k')).

    :param proposal: positive weights over the K classes (a 1-D tensor, normalised
        internally) or a ``Categorical`` with ``batch_shape == ()``; e.g. class
        frequencies to the power 0.75. Every class needs q(k) > 0 for unbiasedness.
    :param float uniform_mix: the fraction :math:`\alpha \in [0, 1]` of the uniform distribution in a
        *defensive mixture* (Hesterberg 1995): the draws come from
        :math:`q_\alpha(k) = (1-\alpha)\,q(k) + \alpha/K` and are weighted by
        :math:`1/(s\,q_\alpha(k))`, so the estimate stays unbiased for any :math:`\alpha` and every
        weight is at most :math:`K/(\alpha s)` (at most :math:`1/\alpha` times a uniform draw's
        :math:`K/s`), whatever the proposal's smallest :math:`q(k)`. Default 0: the proposal as given.

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import ImportanceNegatives
    >>> counts = torch.tensor([1000.0, 100.0, 10.0, 1.0])
    >>> sampler = ImportanceNegatives(8, counts ** 0.75)   # word2vec-style proposal
    >>> neg = sampler(torch.tensor([0, 1]), 4)
    >>> neg.shared, neg.index.shape
    (True, torch.Size([8]))
    """

    strategy = "importance"

    def __init__(self, num_negatives: Optional[int], proposal: torch.Tensor, uniform_mix: float = 0.0) -> None:
        super().__init__(num_negatives)
        probs = _proposal_probs(proposal)
        self.uniform_mix = _check_mix(uniform_mix)
        if self.uniform_mix > 0:  # q_a = (1 - a) q + a / K (normalised first: proposal weights need not sum to 1)
            probs = (1 - self.uniform_mix) * probs / probs.sum() + self.uniform_mix / probs.shape[0]
        self.num_classes = probs.shape[0]
        # float64 cumulative sum once (O(K) at construction); each draw is a binary search
        self._cdf = probs.double().cumsum(0)
        self._cdf = self._cdf / self._cdf[-1]
        self.probs = probs / probs.sum()
        self._on_device = {}  # device -> (cdf, probs): copied once per device, not per call

    def _tables(self, device):
        tables = self._on_device.get(device)
        if tables is None:
            tables = self._on_device[device] = (self._cdf.to(device), self.probs.to(device))
        return tables

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_on_device"] = {}  # the per-device copies are a cache
        return state

    def _sample(self, labels, num_classes):
        if num_classes != self.num_classes:
            raise ValueError(
                f"proposal is over {self.num_classes} classes but the utility has "
                f"num_classes={num_classes}"
            )
        s = self.num_negatives
        cdf, probs = self._tables(labels.device)
        u = torch.rand(s, dtype=cdf.dtype, device=labels.device)
        index = torch.searchsorted(cdf, u, right=True).clamp(max=num_classes - 1)
        inv_q = (s * probs.index_select(0, index)).reciprocal_()          # 1 / (s q(k'_j))
        return Negatives(index, _drop_labels(index, labels, inv_q, num_classes), True)

    def is_exact(self, num_classes: int) -> bool:
        return self.num_negatives is None  # draws with replacement never cover K exactly

    def max_weight(self) -> float:
        r"""The largest estimator weight :math:`\max_k 1/(s\,q(k))` of a draw (``inf`` when exact)."""
        if self.num_negatives is None:
            return math.inf
        return float(1.0 / (self.num_negatives * self.probs.double().min()))

    def __repr__(self):
        mix = f", uniform_mix={self.uniform_mix:g}" if self.uniform_mix else ""
        return f"{type(self).__name__}(num_negatives={self.num_negatives}{mix})"


def _drop_labels(index: torch.Tensor, labels: torch.Tensor, weight: torch.Tensor,
                 num_classes: int) -> torch.Tensor:
    r"""``weight`` (s,) broadcast to ``labels.shape + (s,)``, 0 where ``index[j] == labels[n]``:
    the same values as ``(index != labels[..., None]) * weight``, with the mask as arithmetic
    on the class numbers in ``weight``'s floating dtype, :math:`\min(|k_j - y_n|, 1)` (on CPU a
    comparison's boolean output and its promotion cost about twice as much); exact while the
    dtype holds every class number (below 2^24 in float32, 2^53 in float64), else the
    comparison."""
    dtype = weight.dtype
    if num_classes > 2.0 / torch.finfo(dtype).eps:  # (2^24 in float32)
        return (index != labels.unsqueeze(-1)) * weight
    diff = index.to(dtype) - labels.to(dtype).unsqueeze(-1)
    return diff.abs_().clamp_(max=1.0).mul_(weight)


def _check_mix(uniform_mix) -> float:
    if isinstance(uniform_mix, bool) or not isinstance(uniform_mix, (int, float)) \
            or not 0.0 <= float(uniform_mix) <= 1.0:
        raise ValueError(f"uniform_mix must be a number in [0, 1] (the uniform share of the proposal), "
                         f"got uniform_mix={uniform_mix!r}")
    return float(uniform_mix)


def _proposal_probs(proposal) -> torch.Tensor:
    from torch.distributions import Categorical

    if isinstance(proposal, Categorical):
        if proposal.batch_shape != torch.Size():
            raise ValueError(
                "proposal must be a distribution over the K classes with batch_shape (), got "
                f"batch_shape={tuple(proposal.batch_shape)}"
            )
        probs = proposal.probs
    elif isinstance(proposal, torch.Tensor):
        probs = proposal
    else:
        raise ValueError(
            "proposal must be a 1-D tensor of positive class weights or a Categorical over "
            f"the K classes, got {proposal!r}"
        )
    probs = probs.detach()
    if probs.dim() != 1 or probs.numel() < 2:
        raise ValueError(f"proposal must be 1-D over K >= 2 classes, got shape {tuple(probs.shape)}")
    if not probs.is_floating_point():
        probs = probs.double()
    if not torch.isfinite(probs).all() or (probs <= 0).any():
        bad = probs[~(torch.isfinite(probs) & (probs > 0))][:5].tolist()
        raise ValueError(
            "proposal must be finite and > 0 for every class (q(k) = 0 would bias the "
            f"estimate); got values {bad}"
        )
    return probs


_IMPORTANCE_CACHE = {}  # id(proposal) -> (weakref to it, its _version, num_negatives, sampler)
_IMPORTANCE_CACHE_SIZE = 8


def _cached_importance_sampler(num_negatives, proposal) -> "ImportanceNegatives":
    """An :class:`ImportanceNegatives` for this proposal object, built once.

    Building one normalises the proposal and takes its cumulative sum, O(K); a model that
    passes ``strategy="importance", proposal=q`` at every call would pay that at every
    step. The sampler is reused while the same proposal object (unchanged in place: its
    ``_version``) comes back with the same ``num_negatives``.
    """
    tensor = proposal.probs if not isinstance(proposal, torch.Tensor) and hasattr(proposal, "probs") \
        else proposal
    try:
        ref = weakref.ref(proposal)
        version = getattr(tensor, "_version", None)
    except TypeError:
        return ImportanceNegatives(num_negatives, proposal)
    hit = _IMPORTANCE_CACHE.get(id(proposal))
    if hit is not None and hit[0]() is proposal and hit[1] == version and hit[2] == num_negatives:
        return hit[3]
    sampler = ImportanceNegatives(num_negatives, proposal)
    if len(_IMPORTANCE_CACHE) >= _IMPORTANCE_CACHE_SIZE:
        _IMPORTANCE_CACHE.pop(next(iter(_IMPORTANCE_CACHE)))
    _IMPORTANCE_CACHE[id(proposal)] = (ref, version, num_negatives, sampler)
    return sampler

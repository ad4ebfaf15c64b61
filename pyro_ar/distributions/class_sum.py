r"""The base class of every likelihood factor whose log-probability is a sum over classes.

A *class-sum likelihood* has mean utilities :math:`\psi` over K classes (a tensor
``batch_shape + (K,)`` or a lazy :class:`~pyro_ar.utility.Utility`), and a ``log_prob`` of
the form

.. math::  \texttt{log\_prob}(y) = f(\psi_y) + \sum_{k \ne y} g(\psi_y, \psi_k)
           \;\approx\; f(\psi_y) + \sum_j a_j\, g(\psi_y, \psi_{k_j}),

where the class sum is estimated without bias from a class subsample :math:`(k_j, a_j)`
drawn by a :class:`~pyro_ar.negatives.NegativeSampler`
(:math:`\mathbb{E}[\sum_j a_j h(k_j)] = \sum_{k\ne y} h(k)`, :math:`a_j = 0` when
:math:`k_j = y`), given as the one argument ``negatives`` (read by
:func:`~pyro_ar.negatives.as_negative_sampler`: None, an int, a sampler or a fixed draw).
:class:`ClassSumLikelihood` holds the
shared plumbing: the utility, the sampler, the support :math:`\{0,\dots,K-1\}`, ``expand``,
validation, and :meth:`ClassSumLikelihood.gather_utilities`, which returns
:math:`\psi_y` and :math:`\psi_{k_j}` (for shared negatives both with one gather --
a single matrix product for a :class:`~pyro_ar.utility.LinearUtility`, see
:meth:`~pyro_ar.utility.Utility.gather_label_and_shared`). These are likelihood factors for
observed labels: ``sample`` raises (draw labels from :class:`~pyro_ar.UtilityCategorical`).
"""

from typing import Optional, Sequence, Union

import torch
from torch.distributions import constraints

from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from ..negatives import MOVED_KEYWORDS, Negatives, as_negative_sampler
from ..numerics import check_finite, keyword_names, reject_moved_keywords
from ..utility import DenseUtility, Utility, as_utility
from .._params import ParamsMixin
from .categorical import check_labels

__all__ = ["ClassSumLikelihood", "GatheredUtilities"]


class GatheredUtilities:
    """What :meth:`ClassSumLikelihood.gather_utilities` returns (unpacks as
    ``label, negatives, weight, sample``).

    :ivar label: :math:`\\psi_y`, shape ``broadcast(value, batch_shape) + (1,)``.
    :ivar negatives: :math:`\\psi_{k_j}`, broadcastable to ``label.shape[:-1] + (s,)``.
    :ivar weight: :math:`a_j`, broadcastable likewise (zero where :math:`k_j = y`), in the
        utilities' dtype; taken from ``sample`` on first use.
    :ivar sample: the :class:`~pyro_ar.negatives.Negatives` used.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import OVECategorical
    >>> g = OVECategorical(torch.randn(4, 10), negatives=3).gather_utilities(torch.zeros(4, dtype=torch.long))
    >>> g.label.shape, g.negatives.shape
    (torch.Size([4, 1]), torch.Size([4, 3]))
    """

    __slots__ = ("label", "negatives", "sample")

    def __init__(self, label: torch.Tensor, negatives: torch.Tensor, sample: Negatives):
        self.label, self.negatives, self.sample = label, negatives, sample

    @property
    def weight(self) -> torch.Tensor:
        return self.sample.weight.to(self.label.dtype)

    def __iter__(self):
        return iter((self.label, self.negatives, self.weight, self.sample))


def masked_weighted_sum(fn, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    r""":math:`\sum_j a_j\, \mathrm{fn}(x_j)` over the last dim, the :math:`a_j = 0` terms dropped.

    The dropped terms' *arguments* are replaced by 0 before ``fn`` is applied: masking only
    the result is not enough, since e.g. the label's own column of a Gumbel factor,
    :math:`-e^{-x}` at :math:`x = -90`, overflows and its backward pass
    (:math:`0\cdot\infty`) would turn every gradient into NaN (issue 12).

    The replacement is arithmetic, :math:`x_j\,|\mathrm{sign}(a_j)|` (on CPU a comparison and
    ``torch.where`` cost several times a product), and the sum one dot product, the dropped terms
    being :math:`\mathrm{fn}(0)`, finite for every noise, times 0. Where the result is not
    finite (an infinite argument of a dropped term makes its product NaN, or a kept term is not
    finite) the sum is redone from ``x`` by :func:`_masked_weighted_sum`, the same value with
    the masks as comparisons, and nothing of the first attempt enters the result or its gradient.
    """
    x, weight = torch.broadcast_tensors(x, weight)
    weight = weight.to(x.dtype)
    keep = weight.detach().abs().sign_()                 # 1 where a_j != 0, else 0 (NaN stays NaN)
    terms = fn(x * keep)
    out = torch.linalg.vecdot(terms, weight.to(terms.dtype))
    if out.numel() and not bool(torch.isfinite(out.sum())):
        out = _masked_weighted_sum(fn, x, weight)
    return out


def _masked_weighted_sum(fn, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """:func:`masked_weighted_sum` with the masks as comparisons: ``torch.where`` on the
    arguments and on the products (its fallback where a term or an argument is not finite)."""
    keep = weight != 0
    terms = fn(torch.where(keep, x, torch.zeros_like(x)))
    return torch.where(keep, weight.to(terms.dtype) * terms, torch.zeros_like(terms)).sum(-1)


def weighted_sum(weight: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
    """:math:`\\sum_j a_j t_j` with the :math:`a_j = 0` terms dropped (so inf*0 never occurs)."""
    weight, terms = torch.broadcast_tensors(weight, terms)
    return torch.where(weight != 0, weight * terms, torch.zeros_like(terms)).sum(-1)


class ClassSumLikelihood(ParamsMixin, TorchDistribution):
    r"""Base class of the likelihood factors that sum over classes, with a subsampled class sum.

    Subclasses implement ``log_prob`` from :meth:`gather_utilities`; they may add
    parameters (declare them in ``arg_constraints`` and, when batch-shaped, in
    ``_expand_attrs``).

    :param utility: mean utilities, tensor ``batch_shape + (K,)`` or a
        :class:`~pyro_ar.utility.Utility` (validated on the rows gathered, not at construction).
    :param negatives: how the class sum is subsampled, read once by
        :func:`~pyro_ar.negatives.as_negative_sampler`: None (every class, exact), an int s
        (s classes per datapoint, uniform), a :class:`~pyro_ar.negatives.NegativeSampler`
        (e.g. ``SharedNegatives(s)``, ``ImportanceNegatives(s, proposal)``), or a fixed
        :class:`~pyro_ar.negatives.Negatives` draw used instead of sampling (checked by
        :meth:`~pyro_ar.negatives.Negatives.check` when validation is on). The sampler is
        ``sampler``, carried by ``expand``. The former keywords ``num_negatives``,
        ``strategy``, ``proposal`` raise a ``TypeError`` naming the replacement.

    ``infer_shapes(utility=shape)`` gives ``(shape[:-1], ())`` (the utility has one event
    dim, the classes); for a :class:`~pyro_ar.utility.Utility` object pass
    ``utility.batch_shape + (utility.num_classes,)``.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import ClassSumLikelihood
    >>> class Hinge(ClassSumLikelihood):     # sum_{k != y} -max(0, 1 - psi_y + psi_k)
    ...     def log_prob(self, value):
    ...         g = self.gather_utilities(value)
    ...         return -(g.weight * (1 - g.label + g.negatives).clamp(min=0)).sum(-1)
    >>> Hinge(torch.tensor([[3.0, 0.0, 2.5]])).log_prob(torch.tensor([0])).tolist()
    [-0.5]
    >>> Hinge.infer_shapes(utility=(7, 3))
    (torch.Size([7]), torch.Size([]))
    """

    arg_constraints = {"utility": constraints.real_vector}
    _expand_attrs = {"psi": 1}

    def __new__(cls, *args, **kwargs):
        """Name where a former negatives keyword went (before ``__init__`` would reject it
        with Python's bare "unexpected keyword")."""
        if kwargs:
            reject_moved_keywords(cls.__name__, kwargs, MOVED_KEYWORDS, keyword_names(cls.__init__))
        return super().__new__(cls)

    def __init__(self, utility: Union[torch.Tensor, Utility], negatives=None, *,
                 validate_args: Optional[bool] = None) -> None:
        self._setup(utility, negatives)
        self._init_shape(self.psi.batch_shape, validate_args)

    def _setup(self, utility: Union[torch.Tensor, Utility], negatives):
        self.psi = as_utility(utility)
        self.sampler = as_negative_sampler(negatives)
        K = self.psi.num_classes
        if K < 2:
            raise ValueError(f"utility needs at least 2 classes, got num_classes={K}")
        if getattr(self.sampler, "num_classes", K) != K:
            raise ValueError(
                f"proposal is over {self.sampler.num_classes} classes but the utility has "
                f"num_classes={K}"
            )

    def _validate_params(self):
        super()._validate_params()
        # (a fixed draw: indices in range, weights >= 0)
        self.sampler.check(self.num_classes, self.batch_shape)

    @property
    def utility(self) -> Union[torch.Tensor, Utility]:
        """The utility, as the logits tensor when dense, else the :class:`~pyro_ar.utility.Utility`."""
        return self.psi.logits if isinstance(self.psi, DenseUtility) else self.psi

    @property
    def num_classes(self) -> int:
        return self.psi.num_classes

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.num_classes - 1)

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        raise NotImplementedError(
            f"{type(self).__name__} is a likelihood factor for observed labels; sample labels "
            "from pyro_ar.UtilityCategorical (pyro_ar.sample_categorical does so when obs is None)"
        )

    def labels(self, value: torch.Tensor) -> torch.Tensor:
        """``value`` validated (when validation is on) and broadcast to the batch shape, int64."""
        if self._validate_args:
            value = check_labels(value, self.num_classes, self.batch_shape)
        if value.shape == self.batch_shape:  # (the usual case: no broadcast to work out)
            return value.long()
        return value.long().expand(broadcast_shape(value.shape, self.batch_shape))

    def draw_negatives(self, labels: torch.Tensor) -> Negatives:
        """The sampler's draw for ``labels``: a fresh class subsample (the fixed draw of a
        :class:`~pyro_ar.negatives.FixedNegatives`)."""
        if getattr(self.sampler, "uses_utility", False):  # screened by the current utilities
            return self.sampler(labels, self.num_classes, utility=self.psi)
        return self.sampler(labels, self.num_classes)

    def gather_utilities(self, value: torch.Tensor) -> GatheredUtilities:
        """Utilities of the labels and of a class subsample (see :class:`GatheredUtilities`).

        Shared negatives are gathered together with the labels in one call of
        :meth:`~pyro_ar.utility.Utility.gather_label_and_shared`. A lazy utility is checked
        for finiteness here (on the gathered rows only) when validation is on.
        """
        return self._gather(self.labels(value))

    def _gather(self, labels) -> GatheredUtilities:
        """:meth:`gather_utilities` for labels already checked and broadcast by :meth:`labels`."""
        neg = self.draw_negatives(labels)
        if neg.shared:
            psi_y, psi_neg = self.psi.gather_label_and_shared(labels, neg.index)
        else:
            psi_y = self.psi.gather(labels.unsqueeze(-1))
            psi_neg = self.psi.gather(neg.index)
        if self._validate_args and not isinstance(self.psi, DenseUtility):
            check_finite(psi_y.detach(), "utility")
            check_finite(psi_neg.detach(), "utility")
        return GatheredUtilities(psi_y, psi_neg, neg)

    def __repr__(self):
        return (f"{type(self).__name__}(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, sampler={self.sampler!r})")


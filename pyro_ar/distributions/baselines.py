r"""Baselines to compare Augment & Reduce against, as Pyro likelihood factors.

Every class here has the shape of :class:`pyro_ar.AugmentedCategorical`: it takes the
mean utilities :math:`\psi` (a tensor ``batch_shape + (K,)`` or a
:class:`~pyro_ar.utility.Utility`) and ``negatives`` (None: every class, exact; an int s; a
:class:`~pyro_ar.negatives.NegativeSampler`; a fixed draw -- see
:class:`~pyro_ar.distributions.ClassSumLikelihood`), and is used as ``pyro.sample("y", Likelihood(psi, ...), obs=y)``. Only
``log_prob`` is defined (``sample`` raises: draw labels from
:class:`pyro_ar.UtilityCategorical`). What ``log_prob(y)`` returns:

=======================================  =========================================================  =======================================
class (likelihood name)                  ``log_prob(y)``                                            status
=======================================  =========================================================  =======================================
:class:`OVECategorical` (``"ove"``)      :math:`\sum_{k\ne y}\log\sigma(\psi_y-\psi_k)`             unbiased estimate of a lower bound
:class:`SampledSoftmax` (``"sampled"``)  :math:`\psi_y-\log(e^{\psi_y}+\sum_j a_j e^{\psi_{k_j}})`  **biased** (neither bound nor unbiased)
:class:`BouchardBound` (``"bouchard"``)  :math:`\psi_y-a-\sum_k\log(1+e^{\psi_k-a})`                unbiased estimate of a lower bound
=======================================  =========================================================  =======================================

(:math:`\sigma` is the logistic sigmoid, :math:`(k_j, a_j)` the sampled classes and
their weights.) The exact softmax :math:`\log\mathrm{softmax}(\psi)_y` is
:class:`pyro_ar.UtilityCategorical` with Gumbel noise (likelihood ``"exact"``). The classes
here are :class:`~pyro_ar.distributions.ClassSumLikelihood` subclasses,
interchangeable with the y-given-eps factor :class:`pyro_ar.AugmentedCategorical` (which
additionally takes the noise ``eps``); :class:`~pyro_ar.distributions.JaakkolaJordanBernoulli`
(binary labels) lives in :mod:`pyro_ar.distributions.analytic_bounds`.

The class sums are subsampled exactly as A&R's: a :class:`~pyro_ar.negatives.NegativeSampler`
returns :math:`(k_j, a_j)` with :math:`\mathbb{E}[\sum_j a_j g(k_j)] = \sum_{k\ne y} g(k)`
(:math:`a_j = 0` when :math:`k_j = y`), so any sum that is *linear* in per-class terms
(OVE, Bouchard) is estimated without bias; with ``negatives=None`` the estimate is
the exact sum. The sampled softmax puts the estimate inside a logarithm, hence its bias.

Gaussian utilities (seeds/002, the Bayesian path): when the utilities are Gaussian,
:math:`\psi_k\sim N(m_k, v_k)` independently (e.g. a linear layer with mean-field
Gaussian weights: :math:`m = Mx + \mu_b`, :math:`v = S x^2 + s_b`, which is again a
:class:`~pyro_ar.utility.LinearUtility`), :class:`BouchardBound` with ``utility_var=v``
bounds each :math:`\mathbb{E}\log(1+e^{\psi_k-a})` by the Jaakkola--Jordan quadratic
(:func:`~pyro_ar.distributions.jaakkola_jordan_softplus_bound`), giving an analytic lower bound on
:math:`\mathbb{E}_q \log p(y\mid\psi)` with no Monte Carlo.
"""

import math
from typing import Optional, Union

import torch
from torch.distributions import constraints

from pyro.distributions.util import broadcast_shape

from ..numerics import as_tensor, log_sigmoid
from ..utility import DenseUtility, Utility, as_utility
from .analytic_bounds import _softplus_bound_terms, optimal_bouchard_a
from .class_sum import ClassSumLikelihood, masked_weighted_sum, weighted_sum

__all__ = ["OVECategorical", "SampledSoftmax", "BouchardBound"]


class OVECategorical(ClassSumLikelihood):
    r"""One-vs-each bound on the softmax (Titsias 2016), class sum subsampled.

    .. math::  \log p(y\mid\psi) = \log\mathrm{softmax}(\psi)_y
               \;\ge\; \sum_{k\ne y}\log\sigma(\psi_y - \psi_k)

    (the softmax probability is at least the product of the K-1 pairwise binary
    probabilities). ``log_prob`` returns :math:`\sum_j a_j\log\sigma(\psi_y-\psi_{k_j})`,
    an **unbiased estimate of this lower bound** from a fresh class subsample at every
    call (the bound itself when ``negatives`` is None). Parameters as in
    :class:`pyro_ar.AugmentedCategorical` (without ``eps``/``noise``).

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import OVECategorical
    >>> psi, y = torch.randn(5, 30, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> bool((OVECategorical(psi).log_prob(y) <= psi.log_softmax(-1)[:, 0]).all())   # a lower bound
    True
    """

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        psi_y, psi_neg, weight, _ = self.gather_utilities(value)
        return masked_weighted_sum(log_sigmoid, psi_y - psi_neg, weight)


class SampledSoftmax(ClassSumLikelihood):
    r"""Sampled softmax as Botev et al. (2017) / the A&R authors ran it. **Biased.**

    .. math::  \texttt{log\_prob}(y) = \psi_y - \log\Big(e^{\psi_y} + \sum_j a_j e^{\psi_{k_j}}\Big)
               = \log\mathrm{softmax}\big([\psi_y,\; \psi_{k_j} + \log a_j]_j\big)_0,

    i.e. the log-softmax over :math:`[\psi_y, \psi_S + \log((K-1)/s)]` for per-datapoint
    uniform negatives (:math:`a_j = (K-1)/s`); for shared or importance-sampled negatives
    the matching log-weights :math:`\log a_j` (:math:`\log(K/s)`, :math:`-\log(s\,q(k_j))`)
    are used and the classes with :math:`a_j = 0` (equal to :math:`y`) are dropped. With
    ``negatives=None`` it is the exact log-softmax.

    It is **neither a bound nor an unbiased estimate**: :math:`\sum_j a_j e^{\psi_{k_j}}` is
    unbiased for :math:`\sum_{k\ne y}e^{\psi_k}`, but it sits inside a logarithm; by
    Jensen's inequality :math:`\mathbb{E}[\texttt{log\_prob}(y)] \ge \log\mathrm{softmax}(\psi)_y`
    (it over-estimates the log-likelihood on average, strictly unless the estimate has
    no variance), while a single draw may fall on either side. Maximising it does not
    maximise a bound on the likelihood.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import SampledSoftmax
    >>> psi, y = torch.randn(5, 30, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> torch.allclose(SampledSoftmax(psi).log_prob(y), psi.log_softmax(-1)[:, 0])   # all classes: exact
    True
    >>> SampledSoftmax(psi, negatives=3).log_prob(y).shape                            # biased estimate
    torch.Size([5])
    """

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        psi_y, psi_neg, weight, _ = self.gather_utilities(value)
        shape = broadcast_shape(psi_y.shape[:-1], psi_neg.shape[:-1], weight.shape[:-1])
        log_w = torch.where(weight > 0, weight.clamp(min=torch.finfo(weight.dtype).tiny).log(),
                            torch.full_like(weight, -math.inf))
        logits = (psi_neg + log_w).expand(shape + psi_neg.shape[-1:])
        logits = torch.cat([psi_y.expand(shape + (1,)), logits], dim=-1)
        return psi_y.squeeze(-1) - logits.logsumexp(-1)


class BouchardBound(ClassSumLikelihood):
    r"""Bouchard's (2007) bound on the softmax, class sum subsampled; Gaussian utilities optional.

    For every real :math:`a`, :math:`\log\sum_k e^{\psi_k}\le a+\sum_k\log(1+e^{\psi_k-a})`, so

    .. math::  \log p(y\mid\psi) \;\ge\; \psi_y - a - \sum_{k=1}^{K}\log(1 + e^{\psi_k - a}).

    The sum runs over **all** K classes, the label included. ``log_prob`` returns
    :math:`\psi_y - a - \log(1+e^{\psi_y-a}) - \sum_j a_j\log(1+e^{\psi_{k_j}-a})`: the
    :math:`k=y` term explicitly and the sum over :math:`k\ne y` estimated from the
    subsample (every sampler's draws exclude or zero-weight :math:`y`). It is an
    **unbiased estimate of a lower bound** for any :math:`a`, the bound itself when
    ``negatives`` is None; the bound is tightest at :func:`~pyro_ar.distributions.optimal_bouchard_a`.

    **Gaussian utilities** (``utility_var`` given; seeds/002): with
    :math:`\psi_k\sim N(m_k, v_k)` independent (``utility`` = the means :math:`m`), each
    :math:`\mathbb{E}\log(1+e^{\psi_k-a})` is replaced by its Jaakkola--Jordan bound
    (:func:`~pyro_ar.distributions.jaakkola_jordan_softplus_bound`, :math:`\xi_k = \sqrt{(m_k-a)^2+v_k}`, its
    optimum), giving the analytic (no Monte Carlo) lower bound

    .. math::  \mathbb{E}_q\log p(y\mid\psi) \;\ge\; m_y - a - \sum_{k=1}^K\Big[
               \lambda(\xi_k)\big((m_k-a)^2+v_k-\xi_k^2\big) + \frac{m_k-a-\xi_k}{2}
               + \log(1+e^{\xi_k})\Big],

    again estimated without bias from the class subsample.

    :param utility: mean utilities, tensor ``batch_shape + (K,)`` or a :class:`Utility`.
    :param a: the free parameter (a tensor broadcastable to the batch shape, e.g. a
        per-datapoint ``pyro.param`` or the output of an amortisation network; it may
        extend the batch shape). None: :func:`~pyro_ar.distributions.optimal_bouchard_a` of the full utilities
        at every ``log_prob`` (O(K): for evaluation, or to get the tightest bound).
    :param utility_var: variances :math:`v` of Gaussian utilities (tensor or
        :class:`Utility` over the same K classes, >= 0), or None for point utilities.
    :param negatives: as in :class:`pyro_ar.AugmentedCategorical` (None: every class).

    ``infer_shapes(utility=..., a=..., utility_var=...)`` broadcasts ``utility[:-1]``,
    ``a`` and ``utility_var[:-1]``.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import BouchardBound
    >>> psi, y = torch.randn(5, 30, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> bool((BouchardBound(psi).log_prob(y) <= psi.log_softmax(-1)[:, 0] + 1e-12).all())
    True
    """

    arg_constraints = {"utility": constraints.real_vector, "a": constraints.real,
                       "utility_var": constraints.independent(constraints.nonnegative, 1)}
    _expand_attrs = {"psi": 1, "a": 0, "var": 1}

    def __init__(self, utility: Union[torch.Tensor, Utility], a: Optional[torch.Tensor] = None,
                 negatives=None, *, utility_var: Optional[Union[torch.Tensor, Utility]] = None,
                 validate_args: Optional[bool] = None) -> None:
        self._setup(utility, negatives)
        shapes = [self.psi.batch_shape]
        self.var = None
        if utility_var is not None:
            self.var = as_utility(utility_var)
            if self.var.num_classes != self.num_classes:
                raise ValueError(
                    f"utility_var is over {self.var.num_classes} classes but the utility has "
                    f"num_classes={self.num_classes}"
                )
            shapes.append(self.var.batch_shape)
        self.a = None
        if a is not None:
            like = torch.zeros((), dtype=self.psi.dtype, device=self.psi.device)
            self.a = as_tensor(a, like, "a")
            shapes.append(self.a.shape)
        try:
            batch_shape = broadcast_shape(*shapes)
        except ValueError:
            raise ValueError(
                f"utility batch shape {tuple(self.psi.batch_shape)}, a of shape "
                f"{None if self.a is None else tuple(self.a.shape)} and utility_var batch shape "
                f"{None if self.var is None else tuple(self.var.batch_shape)} do not broadcast"
            ) from None
        self._init_shape(batch_shape, validate_args)

    @property
    def utility_var(self) -> Optional[Union[torch.Tensor, Utility]]:
        """The variances, a tensor when dense, else the :class:`~pyro_ar.utility.Utility` (or None)."""
        return self.var.logits if isinstance(self.var, DenseUtility) else self.var

    def optimal_a(self) -> torch.Tensor:
        """:func:`optimal_bouchard_a` of this distribution's utilities, shape ``batch_shape`` (O(K))."""
        with torch.no_grad():
            a = optimal_bouchard_a(self.psi.full(), None if self.var is None else self.var.full())
        return a.expand(self.batch_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        labels = self.labels(value)
        a = self.optimal_a() if self.a is None else self.a
        psi_y, psi_neg, weight, neg = self._gather(labels)
        var_y = var_neg = None
        if self.var is not None:
            var_y = self.var.gather(labels.unsqueeze(-1))
            var_neg = self.var.gather_shared(neg.index) if neg.shared else self.var.gather(neg.index)
        a = a.unsqueeze(-1)
        term_y = _softplus_bound_terms(psi_y - a, var_y).squeeze(-1)
        terms = _softplus_bound_terms(psi_neg - a, var_neg)
        return psi_y.squeeze(-1) - a.squeeze(-1) - term_y - weighted_sum(weight, terms)

    def __repr__(self):
        return (f"BouchardBound(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, a={'optimal' if self.a is None else 'given'}, "
                f"gaussian={self.var is not None}, sampler={self.sampler!r})")

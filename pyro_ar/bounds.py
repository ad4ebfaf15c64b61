r"""Baselines to compare Augment & Reduce against, as Pyro likelihood factors.

Every class here has the shape of :class:`pyro_ar.AugmentedCategorical`: it takes the
mean utilities :math:`\psi` (a tensor ``batch_shape + (K,)`` or a
:class:`~pyro_ar.utility.Utility`), ``num_negatives`` (None: every class, exact),
``strategy`` / ``proposal`` (see :func:`pyro_ar.negatives.get_negative_sampler`) and fixed
``negatives``, and is used as ``pyro.sample("y", Likelihood(psi, ...), obs=y)``. Only
``log_prob`` is defined (``sample`` raises: draw labels from
:class:`pyro_ar.UtilityCategorical`). What ``log_prob(y)`` returns:

=======================================  =========================================================  =======================================
class (registry name)                    ``log_prob(y)``                                            status
=======================================  =========================================================  =======================================
:class:`ExactSoftmax` (``"exact"``)      :math:`\psi_y - \log\sum_k e^{\psi_k}`                     exact (O(K) per datapoint)
:class:`OVECategorical` (``"ove"``)      :math:`\sum_{k\ne y}\log\sigma(\psi_y-\psi_k)`             unbiased estimate of a lower bound
:class:`SampledSoftmax` (``"botev"``)    :math:`\psi_y-\log(e^{\psi_y}+\sum_j a_j e^{\psi_{k_j}})`  **biased** (neither bound nor unbiased)
:class:`BouchardBound` (``"bouchard"``)  :math:`\psi_y-a-\sum_k\log(1+e^{\psi_k-a})`                unbiased estimate of a lower bound
:class:`JaakkolaJordanBernoulli`         :math:`\mathbb{E}\log\sigma(s t)` (binary)                 lower bound (deterministic)
=======================================  =========================================================  =======================================

(:math:`\sigma` is the logistic sigmoid, :math:`(k_j, a_j)` the sampled classes and
their weights.) :func:`get_likelihood` maps the names ``"ar"``, ``"exact"``, ``"ove"``,
``"botev"``, ``"bouchard"`` to the classes so that one switch compares them (``"ar"`` is
the y-given-eps factor :class:`pyro_ar.AugmentedCategorical`, which additionally takes
the noise ``eps``).

The class sums are subsampled exactly as A&R's: a :class:`~pyro_ar.negatives.NegativeSampler`
returns :math:`(k_j, a_j)` with :math:`\mathbb{E}[\sum_j a_j g(k_j)] = \sum_{k\ne y} g(k)`
(:math:`a_j = 0` when :math:`k_j = y`), so any sum that is *linear* in per-class terms
(OVE, Bouchard) is estimated without bias; with ``num_negatives=None`` the estimate is
the exact sum. The sampled softmax puts the estimate inside a logarithm, hence its bias.

Gaussian utilities (seeds/002, the Bayesian path): when the utilities are Gaussian,
:math:`\psi_k\sim N(m_k, v_k)` independently (e.g. a linear layer with mean-field
Gaussian weights: :math:`m = Mx + \mu_b`, :math:`v = S x^2 + s_b`, which is again a
:class:`~pyro_ar.utility.LinearUtility`), :class:`BouchardBound` with ``utility_var=v``
bounds each :math:`\mathbb{E}\log(1+e^{\psi_k-a})` by the Jaakkola--Jordan quadratic
(:func:`jaakkola_jordan_softplus_bound`), giving an analytic lower bound on
:math:`\mathbb{E}_q \log p(y\mid\psi)` with no Monte Carlo.
"""

import math
from typing import Optional

import torch
from torch.distributions import constraints

from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from .distributions import AugmentedCategorical, check_labels
from .negatives import Negatives, get_negative_sampler
from .utility import DenseUtility, Utility, as_utility

__all__ = [
    "ExactSoftmax",
    "SoftmaxCategorical",
    "OVECategorical",
    "SampledSoftmax",
    "BouchardBound",
    "JaakkolaJordanBernoulli",
    "jaakkola_jordan_lambda",
    "jaakkola_jordan_softplus_bound",
    "jaakkola_jordan_log_sigmoid_bound",
    "bouchard_log_normalizer_bound",
    "optimal_bouchard_a",
    "LIKELIHOODS",
    "get_likelihood",
]


def _softplus(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\log(1+e^x)` to full precision (``F.softplus`` returns x itself above its
    threshold 20, an absolute error up to 2e-9), with gradient sigmoid(x) everywhere."""
    return torch.logaddexp(torch.zeros((), dtype=x.dtype, device=x.device), x)


def _log_sigmoid(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\log\sigma(x) = -\log(1+e^{-x})`. (Not ``F.logsigmoid``: in torch 2.13 on
    CPU it opens a thread pool at every call, ~12 ms even for a handful of elements on a
    loaded 2-core machine.)"""
    return -_softplus(-x)


def _show(t: torch.Tensor, n=5):
    return t.detach().reshape(-1)[:n].tolist()


def _check_finite(t: torch.Tensor, name: str):
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite, got non-finite values {_show(t[~torch.isfinite(t)])}")


def _as_tensor(x, like: torch.Tensor, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        if not x.is_floating_point():
            x = x.to(like.dtype)
        return x
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return torch.tensor(float(x), dtype=like.dtype, device=like.device)
    raise ValueError(f"{name} must be a tensor or a number, got {x!r}")


# ------------------------------------------------------------------------------------------
# Jaakkola-Jordan quadratic bounds
# ------------------------------------------------------------------------------------------


def jaakkola_jordan_lambda(xi: torch.Tensor) -> torch.Tensor:
    r""":math:`\lambda(\xi) = \tanh(\xi/2)/(4\xi) = (\sigma(\xi) - 1/2)/(2\xi)`, even in
    :math:`\xi`, with its limit :math:`1/8` at :math:`\xi = 0` (series
    :math:`1/8 - \xi^2/96` for small :math:`|\xi|`, so values and gradients stay finite).

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import jaakkola_jordan_lambda
    >>> jaakkola_jordan_lambda(torch.tensor([0.0, 2.0])).tolist() == [0.125, (torch.tanh(torch.tensor(1.0)) / 8).item()]
    True
    """
    small = xi.abs() < 1e-3
    safe = torch.where(small, torch.ones_like(xi), xi)
    series = 0.125 - xi * xi / 96.0
    return torch.where(small, series, torch.tanh(safe / 2) / (4 * safe))


def _optimal_xi(m: torch.Tensor, v) -> torch.Tensor:
    r""":math:`\xi^* = \sqrt{m^2 + v}` (the EM update), detached: at :math:`\xi^*` the bound
    is stationary in :math:`\xi`, so gradients with :math:`\xi` held fixed are the exact
    gradients of the optimised bound (and :math:`\sqrt{\cdot}` at 0 causes no NaN)."""
    with torch.no_grad():
        return (m * m + v).sqrt()


def jaakkola_jordan_softplus_bound(m: torch.Tensor, v=0.0, xi: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Upper bound on :math:`\mathbb{E}\log(1+e^t)` for :math:`t\sim N(m, v)` (analytic).

    The Jaakkola--Jordan quadratic bound, valid for every :math:`t` and every :math:`\xi`,

    .. math::  \log(1+e^t) \le \lambda(\xi)(t^2-\xi^2) + \frac{t-\xi}{2} + \log(1+e^{\xi}),
               \qquad \lambda(\xi) = \frac{\tanh(\xi/2)}{4\xi},

    is quadratic in :math:`t`, so its Gaussian expectation is exact:

    .. math::  \mathbb{E}\log(1+e^t) \le \lambda(\xi)(m^2+v-\xi^2) + \frac{m-\xi}{2}
               + \log(1+e^{\xi}).

    It is tight (for :math:`v=0`) at :math:`t=\pm\xi`; for given :math:`(m, v)` the best
    :math:`\xi` is :math:`\sqrt{m^2+v}` (used when ``xi`` is None; held fixed in the
    gradient, see :func:`_optimal_xi`), where the bound reduces to
    :math:`m/2 + \log(2\cosh(\xi/2))`. This is an **upper bound** (so ``-`` it is a lower
    bound on :math:`-\mathbb{E}\,\mathrm{softplus}`).

    :param m: mean of :math:`t`.
    :param v: variance of :math:`t` (tensor or number, >= 0; 0 bounds :math:`\log(1+e^m)`).
    :param xi: variational parameter (broadcastable), or None for the optimum.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import jaakkola_jordan_softplus_bound
    >>> m = torch.tensor([0.3], dtype=torch.float64)
    >>> bool(jaakkola_jordan_softplus_bound(m, 0.5) >= torch.nn.functional.softplus(m))   # >= softplus(E t)
    True
    """
    if xi is None:
        xi = _optimal_xi(m, v)
    lam = jaakkola_jordan_lambda(xi)
    return lam * (m * m + v - xi * xi) + (m - xi) / 2 + _softplus(xi)


def jaakkola_jordan_log_sigmoid_bound(m: torch.Tensor, v=0.0, xi: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Lower bound on :math:`\mathbb{E}\log\sigma(t)` for :math:`t\sim N(m, v)` (analytic).

    .. math::  \log\sigma(t) \ge \log\sigma(\xi) + \frac{t-\xi}{2} - \lambda(\xi)(t^2-\xi^2)
               \;\Rightarrow\;
               \mathbb{E}\log\sigma(t) \ge \log\sigma(\xi) + \frac{m-\xi}{2}
               - \lambda(\xi)(m^2+v-\xi^2),

    the same inequality as :func:`jaakkola_jordan_softplus_bound` applied to
    :math:`\log\sigma(t) = -\log(1+e^{-t})`. A **lower bound** for every :math:`\xi`;
    ``xi=None`` uses the optimum :math:`\sqrt{m^2+v}`.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import jaakkola_jordan_log_sigmoid_bound
    >>> m = torch.tensor([0.3], dtype=torch.float64)
    >>> torch.allclose(jaakkola_jordan_log_sigmoid_bound(m), torch.nn.functional.logsigmoid(m))   # v = 0
    True
    """
    if xi is None:
        xi = _optimal_xi(m, v)
    lam = jaakkola_jordan_lambda(xi)
    return _log_sigmoid(xi) + (m - xi) / 2 - lam * (m * m + v - xi * xi)


def _softplus_bound_terms(mu: torch.Tensor, var: Optional[torch.Tensor]) -> torch.Tensor:
    """softplus(mu) for point utilities, its JJ upper bound (optimal xi) for Gaussian ones."""
    if var is None:
        return _softplus(mu)
    return jaakkola_jordan_softplus_bound(mu, var)


# ------------------------------------------------------------------------------------------
# Bouchard's bound and its optimal a
# ------------------------------------------------------------------------------------------


def bouchard_log_normalizer_bound(psi: torch.Tensor, a, utility_var: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Bouchard's (2007) upper bound on the log normaliser, summed over all K classes.

    .. math::  \log\sum_k e^{\psi_k} \le a + \sum_k \log(1 + e^{\psi_k - a})
               \qquad\text{for every } a\in\mathbb{R}

    (because :math:`\prod_k(1+e^{\psi_k-a}) \ge 1 + \sum_k e^{\psi_k-a}`). With
    ``utility_var`` (:math:`\psi_k\sim N(m_k, v_k)`, ``psi`` the means) each softplus is
    replaced by its Jaakkola--Jordan bound at the optimal :math:`\xi`, an upper bound on
    :math:`\mathbb{E}\log\sum_k e^{\psi_k}`. O(K); shape ``batch_shape``.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import bouchard_log_normalizer_bound
    >>> psi = torch.randn(3, 10, dtype=torch.float64)
    >>> bool((bouchard_log_normalizer_bound(psi, 0.0) >= psi.logsumexp(-1)).all())
    True
    """
    a = _as_tensor(a, psi, "a")
    mu = psi - a.unsqueeze(-1)
    return a + _softplus_bound_terms(mu, utility_var).sum(-1)


def _bouchard_slope(mu: torch.Tensor, var: Optional[torch.Tensor]):
    r"""Per-class :math:`D = dG/d\mu` and :math:`H = d^2G/d\mu^2` of the bounded softplus
    :math:`G(\mu)` (softplus, or its JJ bound at the optimal :math:`\xi`), stably."""
    if var is None:
        d = torch.sigmoid(mu)
        return d, d * torch.sigmoid(-mu)
    # G = mu/2 + log(2 cosh(xi/2)), xi = sqrt(mu^2 + v)
    # D = 1/2 + (mu/xi)(sigmoid(xi) - 1/2); for mu < 0 written without cancellation as
    # D = v / (2 xi (xi - mu)) + (-mu/xi) sigmoid(-xi)
    # H = 2 lambda(xi) v/xi^2 + (mu^2/xi^2) sigmoid(xi) sigmoid(-xi)
    xi2 = mu * mu + var
    tiny = xi2 <= torch.finfo(mu.dtype).tiny
    xi = torch.where(tiny, torch.ones_like(xi2), xi2).sqrt()
    r = torch.where(tiny, torch.zeros_like(mu), mu / xi)
    pos = 0.5 + r * (torch.sigmoid(xi) - 0.5)
    neg = var / (2 * xi * (xi - mu).clamp(min=torch.finfo(mu.dtype).tiny)) - r * torch.sigmoid(-xi)
    d = torch.where(mu >= 0, pos, neg)
    w_v = torch.where(tiny, torch.zeros_like(mu), var / torch.where(tiny, torch.ones_like(xi2), xi2))
    w_m = 1 - w_v
    h = 2 * jaakkola_jordan_lambda(xi) * w_v + w_m * torch.sigmoid(xi) * torch.sigmoid(-xi)
    d = torch.where(tiny, torch.full_like(mu, 0.5), d)
    h = torch.where(tiny, torch.full_like(mu, 0.25), h)
    return d, h


def optimal_bouchard_a(psi, utility_var=None, max_steps: int = 100, tol: Optional[float] = None) -> torch.Tensor:
    r"""The :math:`a` that minimises Bouchard's bound :math:`F(a) = a + \sum_k G(\psi_k - a)`.

    :math:`G` is softplus (point utilities) or, with ``utility_var``, its Jaakkola--Jordan
    bound at the optimal :math:`\xi`, :math:`G(\mu) = \mu/2 + \log(2\cosh(\sqrt{\mu^2+v}/2))`.
    Both are convex in :math:`a`, with :math:`F'(a) = 1 - \sum_k G'(\psi_k - a)` increasing
    from :math:`1-K` to 1. The root is bracketed by :math:`[\psi_{(2)}, h]`
    (:math:`\psi_{(2)}` the second largest utility, where the two largest terms already
    give :math:`\sum_k G' \ge 1`; :math:`h` = ``logsumexp`` for point utilities) and found
    by Newton steps, falling back to bisection whenever a step leaves the bracket
    (vectorised over the batch; converges in a handful of steps).

    The result is detached: at the optimum :math:`\partial F/\partial a = 0`, so holding
    :math:`a` fixed gives the exact gradient of the optimised bound (envelope theorem).
    O(K) per datapoint (it needs every class); for a subsampled model learn :math:`a` per
    datapoint or amortise it instead.

    :param psi: utilities (means), tensor ``batch_shape + (K,)`` or a :class:`Utility` (``full()`` is used).
    :param utility_var: variances of Gaussian utilities, same forms, or None.
    :returns: tensor of shape ``broadcast(batch shapes)``.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import optimal_bouchard_a
    >>> psi = torch.tensor([[2.0, 0.0, -1.0]], dtype=torch.float64)
    >>> a = optimal_bouchard_a(psi)
    >>> abs((torch.sigmoid(psi - a[..., None]).sum() - 1).item()) < 1e-9   # F'(a) = 0
    True
    """
    if isinstance(psi, Utility):
        psi = psi.full()
    if isinstance(utility_var, Utility):
        utility_var = utility_var.full()
    with torch.no_grad():
        psi = psi.detach()
        K = psi.shape[-1]
        if K < 2:
            raise ValueError(f"need at least 2 classes, got utility shape {tuple(psi.shape)}")
        if utility_var is not None:
            utility_var = utility_var.detach().to(psi.dtype)
            shape = broadcast_shape(psi.shape, utility_var.shape)
            psi, utility_var = psi.expand(shape), utility_var.expand(shape)
        lo = psi.topk(2, dim=-1).values[..., 1]
        if utility_var is None:
            hi = psi.logsumexp(-1)
            a = (hi + math.log1p(-1.0 / K)).clamp(min=lo)  # the optimum when all psi are equal
        else:
            vmax = utility_var.max(-1).values.clamp(min=0)
            hi = psi.max(-1).values + math.log(2 * K) + (K * vmax / 2).sqrt() + 1.0
            a = optimal_bouchard_a(psi, None, max_steps, tol).clamp(min=lo, max=hi)
        eps = tol if tol is not None else 64 * torch.finfo(psi.dtype).eps
        for _ in range(max_steps):
            d, h = _bouchard_slope(psi - a.unsqueeze(-1), utility_var)
            g = 1 - d.sum(-1)
            hess = h.sum(-1)
            lo = torch.where(g <= 0, a, lo)  # g == 0: lo = hi = a, the root
            hi = torch.where(g >= 0, a, hi)
            new = a - g / hess
            bad = ~torch.isfinite(new) | (new < lo) | (new > hi)
            new = torch.where(bad, (lo + hi) / 2, new)
            scale = eps * (1 + a.abs())
            done = (((new - a).abs() <= scale) | (hi - lo <= scale)).all()
            a = new
            if done:
                break
        return a


# ------------------------------------------------------------------------------------------
# The likelihood factors
# ------------------------------------------------------------------------------------------


class _ClassSumLikelihood(TorchDistribution):
    """Shared plumbing: utility, class sampler, support, expand, validation, no sampling."""

    arg_constraints = {}

    def __init__(self, utility, num_negatives: Optional[int] = None, strategy="per_datapoint",
                 proposal=None, negatives: Optional[Negatives] = None, validate_args=None):
        self._setup(utility, num_negatives, strategy, proposal, negatives)
        super().__init__(self.psi.batch_shape, validate_args=validate_args)
        if self._validate_args:
            self._validate_utility()

    def _setup(self, utility, num_negatives, strategy, proposal, negatives):
        self.psi = as_utility(utility)
        self.sampler = get_negative_sampler(strategy, num_negatives, proposal)
        if negatives is not None and not isinstance(negatives, Negatives):
            raise ValueError(f"negatives must be a pyro_ar.negatives.Negatives, got {negatives!r}")
        self.negatives = negatives
        K = self.psi.num_classes
        if K < 2:
            raise ValueError(f"utility needs at least 2 classes, got num_classes={K}")
        if getattr(self.sampler, "num_classes", K) != K:
            raise ValueError(
                f"proposal is over {self.sampler.num_classes} classes but the utility has "
                f"num_classes={K}"
            )

    def _validate_utility(self):
        if isinstance(self.psi, DenseUtility):
            _check_finite(self.psi.logits, "utility")

    @property
    def num_classes(self):
        return self.psi.num_classes

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.num_classes - 1)

    def _expand_extra(self, new, batch_shape):
        pass

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(type(self), _instance)
        batch_shape = torch.Size(batch_shape)
        new.psi = self.psi.expand(batch_shape)
        new.sampler, new.negatives = self.sampler, self.negatives
        self._expand_extra(new, batch_shape)
        TorchDistribution.__init__(new, batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=torch.Size()):
        raise NotImplementedError(
            f"{type(self).__name__} is a likelihood factor for observed labels; sample labels "
            "from pyro_ar.UtilityCategorical (pyro_ar.sample_categorical does so when obs is None)"
        )

    def _labels(self, value):
        if self._validate_args:
            value = check_labels(value, self.num_classes, self.batch_shape)
        return value.long().expand(broadcast_shape(value.shape, self.batch_shape))

    def _gather(self, labels):
        """``(psi_y, psi_neg, weight, neg)``: psi_y ``shape + (1,)``, psi_neg and weight
        broadcastable to ``shape + (s,)`` (weight zero where the class is the label)."""
        psi = self.psi
        neg = self.negatives if self.negatives is not None else self.sampler(labels, self.num_classes)
        psi_y = psi.gather(labels.unsqueeze(-1))
        psi_neg = psi.gather_shared(neg.index) if neg.shared else psi.gather(neg.index)
        if self._validate_args and not isinstance(psi, DenseUtility):
            _check_finite(psi_y.detach(), "utility")
            _check_finite(psi_neg.detach(), "utility")
        return psi_y, psi_neg, neg.weight.to(psi_y.dtype), neg

    def __repr__(self):
        return (f"{type(self).__name__}(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, sampler={self.sampler!r})")


def _weighted_sum(weight, terms):
    """:math:`\\sum_j a_j t_j` with the :math:`a_j = 0` terms dropped (so inf*0 never occurs)."""
    weight, terms = torch.broadcast_tensors(weight, terms)
    return torch.where(weight != 0, weight * terms, torch.zeros_like(terms)).sum(-1)


class ExactSoftmax(_ClassSumLikelihood):
    r"""Exact softmax likelihood, the O(K) baseline.

    .. math::  \texttt{log\_prob}(y) = \log\mathrm{softmax}(\psi)_y = \psi_y - \log\sum_{k=1}^K e^{\psi_k}.

    Exact (no bound, no estimate); uses ``utility.full()`` so its cost and its gradients
    (dense, even for a sparse :class:`~pyro_ar.utility.LinearUtility`) are O(K).
    ``num_negatives``, ``strategy``, ``proposal`` and ``negatives`` are accepted (and
    checked) so that the classes of this module are interchangeable, but not used.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import ExactSoftmax
    >>> psi = torch.randn(2, 7)
    >>> torch.allclose(ExactSoftmax(psi).log_prob(torch.tensor([3, 4])),
    ...                psi.log_softmax(-1)[[0, 1], [3, 4]])
    True
    """

    @property
    def logits(self):
        """Normalised log-probabilities, ``batch_shape + (K,)``."""
        return self.psi.full().log_softmax(-1)

    def log_prob(self, value):
        labels = self._labels(value)
        logp = self.logits.expand(labels.shape + (self.num_classes,))
        return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


SoftmaxCategorical = ExactSoftmax


class OVECategorical(_ClassSumLikelihood):
    r"""One-vs-each bound on the softmax (Titsias 2016), class sum subsampled.

    .. math::  \log p(y\mid\psi) = \log\mathrm{softmax}(\psi)_y
               \;\ge\; \sum_{k\ne y}\log\sigma(\psi_y - \psi_k)

    (the softmax probability is at least the product of the K-1 pairwise binary
    probabilities). ``log_prob`` returns :math:`\sum_j a_j\log\sigma(\psi_y-\psi_{k_j})`,
    an **unbiased estimate of this lower bound** from a fresh class subsample at every
    call (the bound itself when ``num_negatives`` is None). Parameters as in
    :class:`pyro_ar.AugmentedCategorical` (without ``eps``/``noise``).

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import OVECategorical
    >>> psi, y = torch.randn(5, 30, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> bool((OVECategorical(psi).log_prob(y) <= psi.log_softmax(-1)[:, 0]).all())   # a lower bound
    True
    """

    def log_prob(self, value):
        psi_y, psi_neg, weight, _ = self._gather(self._labels(value))
        return _weighted_sum(weight, _log_sigmoid(psi_y - psi_neg))


class SampledSoftmax(_ClassSumLikelihood):
    r"""Sampled softmax as Botev et al. (2017) / the A&R authors ran it. **Biased.**

    .. math::  \texttt{log\_prob}(y) = \psi_y - \log\Big(e^{\psi_y} + \sum_j a_j e^{\psi_{k_j}}\Big)
               = \log\mathrm{softmax}\big([\psi_y,\; \psi_{k_j} + \log a_j]_j\big)_0,

    i.e. the log-softmax over :math:`[\psi_y, \psi_S + \log((K-1)/s)]` for per-datapoint
    uniform negatives (:math:`a_j = (K-1)/s`); for shared or importance-sampled negatives
    the matching log-weights :math:`\log a_j` (:math:`\log(K/s)`, :math:`-\log(s\,q(k_j))`)
    are used and the classes with :math:`a_j = 0` (equal to :math:`y`) are dropped. With
    ``num_negatives=None`` it is the exact log-softmax.

    It is **neither a bound nor an unbiased estimate**: :math:`\sum_j a_j e^{\psi_{k_j}}` is
    unbiased for :math:`\sum_{k\ne y}e^{\psi_k}`, but it sits inside a logarithm; by
    Jensen's inequality :math:`\mathbb{E}[\texttt{log\_prob}(y)] \ge \log\mathrm{softmax}(\psi)_y`
    (it over-estimates the log-likelihood on average, strictly unless the estimate has
    no variance), while a single draw may fall on either side. Maximising it does not
    maximise a bound on the likelihood.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import SampledSoftmax
    >>> psi, y = torch.randn(5, 30, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> torch.allclose(SampledSoftmax(psi).log_prob(y), psi.log_softmax(-1)[:, 0])   # all classes: exact
    True
    >>> SampledSoftmax(psi, num_negatives=3).log_prob(y).shape                        # biased estimate
    torch.Size([5])
    """

    def log_prob(self, value):
        psi_y, psi_neg, weight, _ = self._gather(self._labels(value))
        shape = broadcast_shape(psi_y.shape[:-1], psi_neg.shape[:-1], weight.shape[:-1])
        log_w = torch.where(weight > 0, weight.clamp(min=torch.finfo(weight.dtype).tiny).log(),
                            torch.full_like(weight, -math.inf))
        logits = (psi_neg + log_w).expand(shape + psi_neg.shape[-1:])
        logits = torch.cat([psi_y.expand(shape + (1,)), logits], dim=-1)
        return psi_y.squeeze(-1) - logits.logsumexp(-1)


class BouchardBound(_ClassSumLikelihood):
    r"""Bouchard's (2007) bound on the softmax, class sum subsampled; Gaussian utilities optional.

    For every real :math:`a`, :math:`\log\sum_k e^{\psi_k}\le a+\sum_k\log(1+e^{\psi_k-a})`, so

    .. math::  \log p(y\mid\psi) \;\ge\; \psi_y - a - \sum_{k=1}^{K}\log(1 + e^{\psi_k - a}).

    The sum runs over **all** K classes, the label included. ``log_prob`` returns
    :math:`\psi_y - a - \log(1+e^{\psi_y-a}) - \sum_j a_j\log(1+e^{\psi_{k_j}-a})`: the
    :math:`k=y` term explicitly and the sum over :math:`k\ne y` estimated from the
    subsample (every sampler's draws exclude or zero-weight :math:`y`). It is an
    **unbiased estimate of a lower bound** for any :math:`a`, the bound itself when
    ``num_negatives`` is None; the bound is tightest at :func:`optimal_bouchard_a`.

    **Gaussian utilities** (``utility_var`` given; seeds/002): with
    :math:`\psi_k\sim N(m_k, v_k)` independent (``utility`` = the means :math:`m`), each
    :math:`\mathbb{E}\log(1+e^{\psi_k-a})` is replaced by its Jaakkola--Jordan bound
    (:func:`jaakkola_jordan_softplus_bound`, :math:`\xi_k = \sqrt{(m_k-a)^2+v_k}`, its
    optimum), giving the analytic (no Monte Carlo) lower bound

    .. math::  \mathbb{E}_q\log p(y\mid\psi) \;\ge\; m_y - a - \sum_{k=1}^K\Big[
               \lambda(\xi_k)\big((m_k-a)^2+v_k-\xi_k^2\big) + \frac{m_k-a-\xi_k}{2}
               + \log(1+e^{\xi_k})\Big],

    again estimated without bias from the class subsample.

    :param utility: mean utilities, tensor ``batch_shape + (K,)`` or a :class:`Utility`.
    :param a: the free parameter (a tensor broadcastable to the batch shape, e.g. a
        per-datapoint ``pyro.param`` or the output of an amortisation network; it may
        extend the batch shape). None: :func:`optimal_bouchard_a` of the full utilities
        at every ``log_prob`` (O(K): for evaluation, or to get the tightest bound).
    :param utility_var: variances :math:`v` of Gaussian utilities (tensor or
        :class:`Utility` over the same K classes, >= 0), or None for point utilities.
    :param num_negatives, strategy, proposal, negatives: as in :class:`pyro_ar.AugmentedCategorical`.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import BouchardBound
    >>> psi, y = torch.randn(5, 30, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> bool((BouchardBound(psi).log_prob(y) <= psi.log_softmax(-1)[:, 0] + 1e-12).all())
    True
    """

    def __init__(self, utility, a=None, num_negatives: Optional[int] = None, strategy="per_datapoint",
                 proposal=None, negatives: Optional[Negatives] = None, utility_var=None,
                 validate_args=None):
        self._setup(utility, num_negatives, strategy, proposal, negatives)
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
            self.a = _as_tensor(a, like, "a")
            shapes.append(self.a.shape)
        try:
            batch_shape = broadcast_shape(*shapes)
        except ValueError:
            raise ValueError(
                f"utility batch shape {tuple(self.psi.batch_shape)}, a of shape "
                f"{None if self.a is None else tuple(self.a.shape)} and utility_var batch shape "
                f"{None if self.var is None else tuple(self.var.batch_shape)} do not broadcast"
            ) from None
        TorchDistribution.__init__(self, batch_shape, validate_args=validate_args)
        if self._validate_args:
            self._validate_utility()
            if self.a is not None:
                _check_finite(self.a, "a")
            if isinstance(self.var, DenseUtility):
                _check_finite(self.var.logits, "utility_var")
                if (self.var.logits < 0).any():
                    raise ValueError(f"utility_var must be >= 0, got {_show(self.var.logits[self.var.logits < 0])}")

    def _expand_extra(self, new, batch_shape):
        new.a = None if self.a is None else self.a.expand(batch_shape)
        new.var = None if self.var is None else self.var.expand(batch_shape)

    def optimal_a(self):
        """:func:`optimal_bouchard_a` of this distribution's utilities, shape ``batch_shape`` (O(K))."""
        with torch.no_grad():
            a = optimal_bouchard_a(self.psi.full(), None if self.var is None else self.var.full())
        return a.expand(self.batch_shape)

    def log_prob(self, value):
        labels = self._labels(value)
        a = self.optimal_a() if self.a is None else self.a
        psi_y, psi_neg, weight, neg = self._gather(labels)
        var_y = var_neg = None
        if self.var is not None:
            var_y = self.var.gather(labels.unsqueeze(-1))
            var_neg = self.var.gather_shared(neg.index) if neg.shared else self.var.gather(neg.index)
        a = a.unsqueeze(-1)
        term_y = _softplus_bound_terms(psi_y - a, var_y).squeeze(-1)
        terms = _softplus_bound_terms(psi_neg - a, var_neg)
        return psi_y.squeeze(-1) - a.squeeze(-1) - term_y - _weighted_sum(weight, terms)

    def __repr__(self):
        return (f"BouchardBound(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, a={'optimal' if self.a is None else 'given'}, "
                f"gaussian={self.var is not None}, sampler={self.sampler!r})")


class JaakkolaJordanBernoulli(TorchDistribution):
    r"""Jaakkola--Jordan (1997) bound for (Bayesian) logistic regression (seeds/002 §2).

    For a label :math:`y\in\{0, 1\}`, :math:`s = 2y-1`, and a logit :math:`t`,

    .. math::  \log p(y\mid t) = \log\sigma(s t) \;\ge\; \log\sigma(\xi) + \frac{s t - \xi}{2}
               - \lambda(\xi)(t^2 - \xi^2), \qquad \lambda(\xi) = \frac{\tanh(\xi/2)}{4\xi},

    for every :math:`\xi` (tight at :math:`t = \pm\xi`). Quadratic in :math:`t`, so under
    a Gaussian logit :math:`t\sim N(m, v)` (e.g. :math:`t = x^\top\beta`,
    :math:`\beta\sim N(\mu_q, \Sigma_q)`: :math:`m = x^\top\mu_q`, :math:`v = x^\top\Sigma_q x`)

    .. math::  \mathbb{E}\log\sigma(s t) \;\ge\; \log\sigma(\xi) + \frac{s m - \xi}{2}
               - \lambda(\xi)(m^2 + v - \xi^2).

    ``log_prob(y)`` returns this **deterministic lower bound** on
    :math:`\mathbb{E}_q\log p(y\mid t)` (on :math:`\log p(y\mid m)` when ``logits_var`` is
    0). ``xi=None`` uses the EM optimum :math:`\xi=\sqrt{m^2+v}` (held fixed in the
    gradient, which is exact there).

    :param logits: mean :math:`m` of the logit.
    :param logits_var: its variance :math:`v \ge 0` (default 0).
    :param xi: variational parameter, broadcastable, or None.

    Example:

    >>> import torch
    >>> from pyro_ar.bounds import JaakkolaJordanBernoulli
    >>> t, y = torch.tensor([1.5, -0.5], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)
    >>> exact = -torch.nn.functional.softplus(-(2 * y - 1) * t)
    >>> torch.allclose(JaakkolaJordanBernoulli(t).log_prob(y), exact)   # tight at the optimal xi
    True
    """

    arg_constraints = {}
    support = constraints.boolean

    def __init__(self, logits, logits_var=0.0, xi=None, validate_args=None):
        if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
            raise ValueError(f"logits must be a floating point tensor, got {logits!r}")
        self.logits = logits
        self.logits_var = _as_tensor(logits_var, logits, "logits_var")
        self.xi = None if xi is None else _as_tensor(xi, logits, "xi")
        shapes = [logits.shape, self.logits_var.shape] + ([] if self.xi is None else [self.xi.shape])
        try:
            batch_shape = broadcast_shape(*shapes)
        except ValueError:
            raise ValueError(f"logits, logits_var and xi shapes {[tuple(s) for s in shapes]} do not broadcast") from None
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args:
            _check_finite(self.logits, "logits")
            _check_finite(self.logits_var, "logits_var")
            if (self.logits_var < 0).any():
                raise ValueError(f"logits_var must be >= 0, got {_show(self.logits_var[self.logits_var < 0])}")
            if self.xi is not None:
                _check_finite(self.xi, "xi")

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(JaakkolaJordanBernoulli, _instance)
        batch_shape = torch.Size(batch_shape)
        new.logits = self.logits.expand(batch_shape)
        new.logits_var = self.logits_var.expand(batch_shape)
        new.xi = None if self.xi is None else self.xi.expand(batch_shape)
        super(JaakkolaJordanBernoulli, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=torch.Size()):
        raise NotImplementedError(
            "JaakkolaJordanBernoulli is a likelihood factor (a lower bound) for observed labels; "
            "sample labels from pyro.distributions.Bernoulli(logits=...)"
        )

    def log_prob(self, value):
        if self._validate_args:
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"value must be a tensor of 0/1 labels, got {value!r}")
            bad = value[(value != 0) & (value != 1)]
            if bad.numel():
                raise ValueError(f"value must hold binary labels 0/1, got {_show(bad)}")
            try:
                broadcast_shape(value.shape, self.batch_shape)
            except ValueError:
                raise ValueError(f"value of shape {tuple(value.shape)} does not broadcast with "
                                 f"batch_shape {tuple(self.batch_shape)}") from None
        sign = 2 * value.to(self.logits.dtype) - 1
        m = self.logits
        xi = self.xi if self.xi is not None else _optimal_xi(m, self.logits_var)
        return _log_sigmoid(xi) + (sign * m - xi) / 2 - jaakkola_jordan_lambda(xi) * (m * m + self.logits_var - xi * xi)

    def __repr__(self):
        return f"JaakkolaJordanBernoulli(batch_shape={tuple(self.batch_shape)})"


#: Names of the likelihood factors, for a one-switch comparison (``"ar"`` also needs ``eps``).
LIKELIHOODS = {
    "ar": AugmentedCategorical,
    "exact": ExactSoftmax,
    "ove": OVECategorical,
    "botev": SampledSoftmax,
    "bouchard": BouchardBound,
}


def get_likelihood(name):
    """The likelihood class registered under ``name`` (see :data:`LIKELIHOODS`); a class passes through.

    Example:

    >>> from pyro_ar.bounds import get_likelihood
    >>> get_likelihood("ove").__name__
    'OVECategorical'
    """
    if isinstance(name, type) and issubclass(name, TorchDistribution):
        return name
    if name not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {name!r}; expected one of {list(LIKELIHOODS)}")
    return LIKELIHOODS[name]

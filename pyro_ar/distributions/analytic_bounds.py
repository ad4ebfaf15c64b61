r"""Analytic (deterministic) bounds: Jaakkola--Jordan and Bouchard.

* Jaakkola--Jordan (1997): for every :math:`\xi`, with :math:`\lambda(\xi) = \tanh(\xi/2)/(4\xi)`,

  .. math::  \log(1+e^t) \le \lambda(\xi)(t^2-\xi^2) + \frac{t-\xi}{2} + \log(1+e^{\xi}),

  quadratic in :math:`t`, so exact in expectation under a Gaussian :math:`t\sim N(m, v)`
  (:func:`jaakkola_jordan_softplus_bound`, :func:`jaakkola_jordan_log_sigmoid_bound`,
  :class:`JaakkolaJordanBernoulli` for Bayesian logistic regression).
* Bouchard (2007): for every real :math:`a`,

  .. math::  \log\sum_k e^{\psi_k} \le a + \sum_k \log(1 + e^{\psi_k - a})

  (:func:`bouchard_log_normalizer_bound`; its minimiser :func:`optimal_bouchard_a`), used by
  :class:`~pyro_ar.distributions.BouchardBound`.
"""

import math
from typing import Optional, Sequence, Union

import torch
from torch.distributions import constraints

from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from ..numerics import as_tensor, log_sigmoid, show, softplus
from ..utility import Utility
from .._params import ParamsMixin

__all__ = [
    "JaakkolaJordanBernoulli",
    "jaakkola_jordan_lambda",
    "jaakkola_jordan_softplus_bound",
    "jaakkola_jordan_log_sigmoid_bound",
    "bouchard_log_normalizer_bound",
    "optimal_bouchard_a",
]


def jaakkola_jordan_lambda(xi: torch.Tensor) -> torch.Tensor:
    r""":math:`\lambda(\xi) = \tanh(\xi/2)/(4\xi) = (\sigma(\xi) - 1/2)/(2\xi)`, even in
    :math:`\xi`, with its limit :math:`1/8` at :math:`\xi = 0` (series
    :math:`1/8 - \xi^2/96` for small :math:`|\xi|`, so values and gradients stay finite).

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import jaakkola_jordan_lambda
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


def jaakkola_jordan_softplus_bound(m: torch.Tensor, v: Union[float, torch.Tensor] = 0.0,
                                   xi: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Upper bound on :math:`\mathbb{E}\log(1+e^t)` for :math:`t\sim N(m, v)` (analytic).

    The Jaakkola--Jordan quadratic bound, valid for every :math:`t` and every :math:`\xi`,

    .. math::  \log(1+e^t) \le \lambda(\xi)(t^2-\xi^2) + \frac{t-\xi}{2} + \log(1+e^{\xi}),
               \qquad \lambda(\xi) = \frac{\tanh(\xi/2)}{4\xi},

    is quadratic in :math:`t`, so its Gaussian expectation is exact:

    .. math::  \mathbb{E}\log(1+e^t) \le \lambda(\xi)(m^2+v-\xi^2) + \frac{m-\xi}{2}
               + \log(1+e^{\xi}).

    It is tight (for :math:`v=0`) at :math:`t=\pm\xi`; for given :math:`(m, v)` the best
    :math:`\xi` is :math:`\sqrt{m^2+v}` (used when ``xi`` is None; held fixed in the
    gradient, see ``_optimal_xi``), where the bound reduces to
    :math:`m/2 + \log(2\cosh(\xi/2))`. This is an **upper bound** (so ``-`` it is a lower
    bound on :math:`-\mathbb{E}\,\mathrm{softplus}`).

    :param m: mean of :math:`t`.
    :param v: variance of :math:`t` (tensor or number, >= 0; 0 bounds :math:`\log(1+e^m)`).
    :param xi: variational parameter (broadcastable), or None for the optimum.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import jaakkola_jordan_softplus_bound
    >>> m = torch.tensor([0.3], dtype=torch.float64)
    >>> bool(jaakkola_jordan_softplus_bound(m, 0.5) >= torch.nn.functional.softplus(m))   # >= softplus(E t)
    True
    """
    if xi is None:
        xi = _optimal_xi(m, v)
    lam = jaakkola_jordan_lambda(xi)
    return lam * (m * m + v - xi * xi) + (m - xi) / 2 + softplus(xi)


def jaakkola_jordan_log_sigmoid_bound(m: torch.Tensor, v: Union[float, torch.Tensor] = 0.0,
                                      xi: Optional[torch.Tensor] = None) -> torch.Tensor:
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
    >>> from pyro_ar.distributions import jaakkola_jordan_log_sigmoid_bound
    >>> m = torch.tensor([0.3], dtype=torch.float64)
    >>> torch.allclose(jaakkola_jordan_log_sigmoid_bound(m), torch.nn.functional.logsigmoid(m))   # v = 0
    True
    """
    if xi is None:
        xi = _optimal_xi(m, v)
    lam = jaakkola_jordan_lambda(xi)
    return log_sigmoid(xi) + (m - xi) / 2 - lam * (m * m + v - xi * xi)


def _softplus_bound_terms(mu: torch.Tensor, var: Optional[torch.Tensor]) -> torch.Tensor:
    """softplus(mu) for point utilities, its JJ upper bound (optimal xi) for Gaussian ones."""
    if var is None:
        return softplus(mu)
    return jaakkola_jordan_softplus_bound(mu, var)


# ------------------------------------------------------------------------------------------
# Bouchard's bound and its optimal a
# ------------------------------------------------------------------------------------------


def bouchard_log_normalizer_bound(psi: torch.Tensor, a: torch.Tensor,
                                  utility_var: Optional[torch.Tensor] = None) -> torch.Tensor:
    r"""Bouchard's (2007) upper bound on the log normaliser, summed over all K classes.

    .. math::  \log\sum_k e^{\psi_k} \le a + \sum_k \log(1 + e^{\psi_k - a})
               \qquad\text{for every } a\in\mathbb{R}

    (because :math:`\prod_k(1+e^{\psi_k-a}) \ge 1 + \sum_k e^{\psi_k-a}`). With
    ``utility_var`` (:math:`\psi_k\sim N(m_k, v_k)`, ``psi`` the means) each softplus is
    replaced by its Jaakkola--Jordan bound at the optimal :math:`\xi`, an upper bound on
    :math:`\mathbb{E}\log\sum_k e^{\psi_k}`. O(K); shape ``batch_shape``.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import bouchard_log_normalizer_bound
    >>> psi = torch.randn(3, 10, dtype=torch.float64)
    >>> bool((bouchard_log_normalizer_bound(psi, 0.0) >= psi.logsumexp(-1)).all())
    True
    """
    a = as_tensor(a, psi, "a")
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


def optimal_bouchard_a(psi: torch.Tensor, utility_var: Optional[torch.Tensor] = None, max_steps: int = 100,
                       tol: Optional[float] = None) -> torch.Tensor:
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
    >>> from pyro_ar.distributions import optimal_bouchard_a
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


class JaakkolaJordanBernoulli(ParamsMixin, TorchDistribution):
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

    ``infer_shapes(logits=..., logits_var=..., xi=...)`` broadcasts the three shapes (all
    scalar per datapoint).

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import JaakkolaJordanBernoulli
    >>> t, y = torch.tensor([1.5, -0.5], dtype=torch.float64), torch.tensor([1.0, 0.0], dtype=torch.float64)
    >>> exact = -torch.nn.functional.softplus(-(2 * y - 1) * t)
    >>> torch.allclose(JaakkolaJordanBernoulli(t).log_prob(y), exact)   # tight at the optimal xi
    True
    """

    arg_constraints = {"logits": constraints.real, "logits_var": constraints.nonnegative,
                       "xi": constraints.real}
    support = constraints.boolean
    _expand_attrs = {"logits": 0, "logits_var": 0, "xi": 0}

    def __init__(self, logits: torch.Tensor, logits_var: Union[float, torch.Tensor] = 0.0,
                 xi: Optional[torch.Tensor] = None, validate_args: Optional[bool] = None) -> None:
        if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
            raise ValueError(f"logits must be a floating point tensor, got {logits!r}")
        self.logits = logits
        self.logits_var = as_tensor(logits_var, logits, "logits_var")
        self.xi = None if xi is None else as_tensor(xi, logits, "xi")
        shapes = [logits.shape, self.logits_var.shape] + ([] if self.xi is None else [self.xi.shape])
        try:
            batch_shape = broadcast_shape(*shapes)
        except ValueError:
            raise ValueError(f"logits, logits_var and xi shapes {[tuple(s) for s in shapes]} do not broadcast") from None
        self._init_shape(batch_shape, validate_args)

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        raise NotImplementedError(
            "JaakkolaJordanBernoulli is a likelihood factor (a lower bound) for observed labels; "
            "sample labels from pyro.distributions.Bernoulli(logits=...)"
        )

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            if not isinstance(value, torch.Tensor):
                raise ValueError(f"value must be a tensor of 0/1 labels, got {value!r}")
            bad = value[(value != 0) & (value != 1)]
            if bad.numel():
                raise ValueError(f"value must hold binary labels 0/1, got {show(bad)}")
            try:
                broadcast_shape(value.shape, self.batch_shape)
            except ValueError:
                raise ValueError(f"value of shape {tuple(value.shape)} does not broadcast with "
                                 f"batch_shape {tuple(self.batch_shape)}") from None
        sign = 2 * value.to(self.logits.dtype) - 1
        m = self.logits
        xi = self.xi if self.xi is not None else _optimal_xi(m, self.logits_var)
        return log_sigmoid(xi) + (sign * m - xi) / 2 - jaakkola_jordan_lambda(xi) * (m * m + self.logits_var - xi * xi)

    def __repr__(self):
        return f"JaakkolaJordanBernoulli(batch_shape={tuple(self.batch_shape)})"

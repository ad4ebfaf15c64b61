r"""Noise families of the utility (random-utility) view of a categorical.

A categorical over K classes with mean utilities :math:`\psi \in \mathbb{R}^K` is

.. math::

    y = \arg\max_k (\psi_k + \varepsilon_k), \qquad \varepsilon_k \overset{iid}{\sim} \phi,

where :math:`\phi` is a univariate density with CDF :math:`\Phi`. The choice of
:math:`\phi` selects the model:

========  ================================  =================================  =========================
noise     :math:`\log\phi(e)`               :math:`\log\Phi(x)` (stable)       model
========  ================================  =================================  =========================
Gumbel    :math:`-e - e^{-e}`               :math:`-e^{-x}`                    softmax
Normal    :math:`-e^2/2 - \log\sqrt{2\pi}`  ``log_ndtr(x)``                    multinomial probit
Logistic  :math:`-s(-e) - s(e)`             :math:`-s(-x)`                     multinomial logistic
Laplace   :math:`-|e| - \log 2`             piecewise, ``log1p``               heavier tails
Student   :math:`\log t_\nu(e)`             incomplete beta (cont. fraction)   robust (polynomial tails)
========  ================================  =================================  =========================

(:math:`s` is softplus; Student-t: :class:`StudentTNoise` with :math:`\nu` = ``df``,
:math:`\Phi(-t) = \tfrac12 I_{\nu/(\nu+t^2)}(\nu/2, 1/2)`.) Any other density with a CDF
gives a valid model too: build it with :class:`Noise` directly
(``Noise(log_density=..., log_cdf=..., sample=...)``) or from a distribution with
:meth:`Noise.from_distribution`, and check it with :func:`pyro_ar.testing.check_noise`;
everything in ``pyro_ar`` takes a :class:`Noise` or one of the names ``"gumbel"``,
``"normal"``, ``"logistic"``, ``"laplace"``, ``"student_t<df>"`` (see :func:`get_noise`).

Every :meth:`Noise.sample` takes a ``torch.Generator`` (``generator=``).

**The noise owns its math.** What depends on the noise family is a method of :class:`Noise`
with a generic default, overridden by the families that have a closed form (as GPyTorch's
likelihoods default to Monte Carlo / quadrature and override it):

* :meth:`~Noise.log_marginal`, :meth:`~Noise.log_marginal_all` -- generic: quadrature
  (:mod:`pyro_ar.quadrature`); Gumbel: the log-softmax;
* :meth:`~Noise.icdf` -- generic: bisection on ``log_cdf``; Gumbel, normal, logistic,
  Laplace: closed forms;
* :meth:`~Noise.log_density_derivatives`, :meth:`~Noise.log_cdf_derivatives` -- generic:
  autograd (second order); normal, logistic: closed forms;
* :meth:`~Noise.relaxed_log_prob` -- generic: none (``NotImplementedError``); Gumbel: the
  Concrete density;
* :attr:`~Noise.closed_form` -- False; Gumbel: True.

:attr:`Noise.closed_form` tells the layers above that the marginal is the softmax and the
optimal local posterior of the A&R bound is :math:`\mathrm{Gumbel}(\log\eta, 1)`, so they can take
their closed-form paths (exact softmax step, ``GumbelLocalGuide``, ``ClosedFormELBO``). No
module outside this one asks which family a noise is (``tests/test_noise_switches.py``).
"""

import inspect
import math
import re
from typing import Callable, Hashable, Optional, Sequence, Union

import torch
from torch.distributions import constraints

import pyro.distributions as dist
from pyro.distributions.util import broadcast_shape

from ._params import ParamsMixin
from .numerics import (_student_t_log_density, _StudentTLogCDF, as_tensors, log_ndtr, normal_mills_ratio,
                       softmax_log_prob, softplus, uniform_open)
from .quadrature import DEFAULT_NUM_NODES, log_marginal, log_marginal_all

__all__ = [
    "Noise",
    "NoiseDistribution",
    "GumbelNoise",
    "NormalNoise",
    "LogisticNoise",
    "LaplaceNoise",
    "StudentTNoise",
    "get_noise",
    "NOISE_NAMES",
]


#: bisection steps of the generic :meth:`Noise.icdf` (from a bracket of width <= 2^64: 2^-64
#: relative to the bracket, below float64 resolution for the quantiles of u in [1e-12, 1 - 1e-12])
_ICDF_STEPS = 128
Shape = Union[Sequence[int], torch.Size]  # (type aliases of the signatures)
Device = Optional[Union[str, torch.device]]
Number = Union[float, torch.Tensor]
TorchDistribution = dist.TorchDistribution
_LOG2 = math.log(2.0)


def _accepts_generator(f) -> bool:
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "generator" or p.kind == p.VAR_KEYWORD for p in params)


def _autograd_derivatives(fn, x: torch.Tensor):
    """Elementwise first and second derivatives of the elementwise ``fn`` at ``x`` by autograd
    (constants for differentiation; ``0 * x`` is added so that the results keep ``x``'s graph
    with a zero derivative along this path)."""
    with torch.enable_grad():
        xd = x.detach().requires_grad_(True)
        g, = torch.autograd.grad(fn(xd).sum(), xd, create_graph=True)
        h, = torch.autograd.grad(g.sum(), xd)
    zero = 0 * x
    return g.detach() + zero, h + zero


def _call_with_generator(f, shape, dtype, device, generator):
    """``f(shape, dtype, device)`` made reproducible by ``generator`` when ``f`` takes none:
    the global RNG is forked, seeded from ``generator``, and restored afterwards."""
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    dev = torch.device(device) if device is not None else torch.device("cpu")
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        return f(shape, dtype, device)


class Noise:
    r"""A standard (location 0, scale 1) univariate noise :math:`\phi` with CDF :math:`\Phi`.

    Subclasses (or users, through the constructor) provide three functions:

    * ``log_density(e)`` -- :math:`\log\phi(e)`, elementwise;
    * ``log_cdf(x)`` -- :math:`\log\Phi(x)`, elementwise and numerically stable in both
      tails (this is the function the augmented likelihood sums over classes);
    * ``sample(shape, dtype, device[, generator])`` -- iid standard draws. If it is
      differentiable in nothing (as all standard draws are), :meth:`rsample_like` gives
      reparameterised location-scale draws ``loc + scale * sample(...)``.

    A user ``sample`` function may accept a ``generator`` keyword (a ``torch.Generator``);
    when it does not and :meth:`sample` is given one, the function runs under a forked
    global RNG seeded from that generator (reproducible for a given generator state, and the
    global RNG is left untouched). Check a noise you wrote with
    :func:`pyro_ar.testing.check_noise`.

    Example -- a Cauchy noise in three lines::

        cauchy = Noise(
            log_density=lambda e: -math.log(math.pi) - torch.log1p(e * e),
            log_cdf=lambda x: torch.log(0.5 + torch.atan(x) / math.pi),   # (lower tail ~1e-8 only)
            sample=lambda shape, dtype, device, generator=None: torch.tan(
                math.pi * (torch.rand(shape, dtype=dtype, device=device, generator=generator) - 0.5)),
            name="cauchy")

    :param callable log_density: :math:`e \mapsto \log\phi(e)`.
    :param callable log_cdf: :math:`x \mapsto \log\Phi(x)`.
    :param callable sample: ``(shape, dtype, device) -> Tensor`` of standard draws,
        optionally with a ``generator=None`` keyword.
    :param str name: a label used in reprs and error messages.

    Example:

    >>> import math, torch, pyro_ar as ar
    >>> wide_normal = ar.Noise(                        # N(0, 2^2) noise, from its two primitives
    ...     log_density=lambda e: -e * e / 8 - math.log(2 * math.sqrt(2 * math.pi)),
    ...     log_cdf=lambda x: torch.special.log_ndtr(x / 2), name="wide_normal")
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> p = ar.UtilityCategorical(psi, wide_normal).probs                # quadrature marginals
    >>> torch.allclose(p, ar.UtilityCategorical(psi / 2, "normal").probs)  # = probit at psi / 2
    True
    """

    name = "custom"

    def __init__(
        self,
        log_density: Optional[Callable] = None,
        log_cdf: Optional[Callable] = None,
        sample: Optional[Callable] = None,
        name: Optional[str] = None,
    ) -> None:
        if type(self) is Noise:
            missing = [
                n for n, f in (("log_density", log_density), ("log_cdf", log_cdf)) if f is None
            ]
            if missing:
                raise ValueError(
                    f"a custom Noise needs callables for {missing}; got log_density="
                    f"{log_density!r}, log_cdf={log_cdf!r}"
                )
            for argname, f in (("log_density", log_density), ("log_cdf", log_cdf),
                               ("sample", sample)):
                if f is not None and not callable(f):
                    raise ValueError(f"Noise argument {argname} must be callable, got {f!r}")
        self._log_density = log_density
        self._log_cdf = log_cdf
        self._sample = sample
        self._sample_takes_generator = sample is not None and _accepts_generator(sample)
        if name is not None:
            self.name = name

    # ---- the three primitives -------------------------------------------------------
    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\phi(e)` of the standard noise, elementwise."""
        return self._log_density(e)

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\Phi(x)` of the standard noise, elementwise, stable in both tails."""
        return self._log_cdf(x)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """``shape`` iid standard draws (no gradient), from ``generator`` when given.

        See the class docstring for user ``sample`` functions without a ``generator``.
        """
        if self._sample is None:
            raise NotImplementedError(
                f"noise {self.name!r} was built without a `sample` function; pass "
                "sample=(shape, dtype, device) -> Tensor to Noise(...) to draw from it"
            )
        shape = torch.Size(shape)
        if generator is None:
            return self._sample(shape, dtype, device)
        if self._sample_takes_generator:
            return self._sample(shape, dtype, device, generator=generator)
        return _call_with_generator(self._sample, shape, dtype, device, generator)

    @property
    def cache_key(self) -> Optional[Hashable]:
        """A hashable identity of the noise family for caches (``None`` to compare by identity).

        Library noises return their class name and parameters; user-built noises None.
        """
        if type(self) is Noise:
            return None
        return (type(self).__name__,)

    # ---- derived -----------------------------------------------------------------------
    @property
    def has_sample(self) -> bool:
        return type(self) is not Noise or self._sample is not None

    def rsample_like(self, loc: torch.Tensor, scale: torch.Tensor, sample_shape: Shape = ()) -> torch.Tensor:
        r"""Reparameterised draws :math:`loc + scale \cdot \varepsilon`, :math:`\varepsilon\sim\phi`."""
        shape = torch.Size(sample_shape) + broadcast_shape(loc.shape, scale.shape)
        return loc + scale * self.sample(shape, dtype=loc.dtype, device=loc.device)

    def distribution(self, loc: Number = 0.0, scale: Number = 1.0) -> TorchDistribution:
        r"""The location-scale Pyro distribution :math:`\phi((x - loc)/scale)/scale`.

        Library noises return Pyro's own distributions where they exist (so registered KL
        divergences apply under ``TraceMeanField_ELBO``); other noises return a
        :class:`NoiseDistribution`.
        """
        loc, scale = as_tensors(loc, scale)
        return NoiseDistribution(self, loc, scale)

    def mode_hint(self, x: torch.Tensor) -> torch.Tensor:
        """A cheap starting point for the quadrature's mode search (see quadrature.py).

        ``x`` holds, per integrand, ``logsumexp_k'(psi_k' - psi_y)``; the default is the
        Gumbel integrand's exact mode ``log(1 + exp(x))``.
        """
        return softplus(x)

    # ---- closed forms, with generic defaults (families override) ------------------------
    #: True when :math:`p(y\mid\psi) = \mathrm{softmax}(\psi)_y` and the optimal local posterior
    #: :math:`q^*(\varepsilon_n\mid\psi_n)` of the A&R bound is :math:`\mathrm{Gumbel}(\log(1 + \sum_{k\ne y}
    #: e^{\psi_k-\psi_y}), 1)` (the Gumbel family): the layers above take their closed-form
    #: paths (exact softmax step, ``GumbelLocalGuide``, ``ClosedFormELBO``, softmax baselines).
    closed_form = False

    def log_marginal(self, utility: torch.Tensor, labels: torch.Tensor,
                     num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        r""":math:`\log p(y\mid\psi) = \log\int\phi(e)\prod_{k\ne y}\Phi(e+\psi_y-\psi_k)\,de` of
        ``labels`` (broadcastable to ``utility.shape[:-1]``).

        Generic default: quadrature (:func:`pyro_ar.quadrature.log_marginal`, ``num_nodes``
        initial nodes); Gumbel overrides it with the log-softmax.
        """
        return log_marginal(utility, labels, self, num_nodes)

    def log_marginal_all(self, utility: torch.Tensor, num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        """:meth:`log_marginal` of every class, shape ``utility.shape`` (quadrature: O(K^2) per row)."""
        return log_marginal_all(utility, self, num_nodes)

    def log_density_derivatives(self, e: torch.Tensor):
        r"""``(d/de, d^2/de^2)`` of :math:`\log\phi(e)`, elementwise (generic: autograd)."""
        return _autograd_derivatives(self.log_density, e)

    def log_cdf_derivatives(self, x: torch.Tensor):
        r"""``(d/dx, d^2/dx^2)`` of :math:`\log\Phi(x)`, elementwise (generic: autograd)."""
        return _autograd_derivatives(self.log_cdf, x)

    def icdf(self, u: torch.Tensor) -> torch.Tensor:
        r"""The quantile :math:`\Phi^{-1}(u)`, elementwise, for ``u`` in (0, 1) (inversion draws).

        Generic default: bisection on :math:`\log\Phi` in float64, from the bracket [-1, 1]
        doubled until it holds the root, then 128 halvings (to float64 resolution);
        families with a closed form override it.
        """
        with torch.no_grad():
            target = u.double().log()
            lo, hi = -torch.ones_like(target), torch.ones_like(target)
            for _ in range(64):  # widen to [-2^64, 2^64] at most
                low, high = self.log_cdf(lo) > target, self.log_cdf(hi) < target
                if not (low.any() or high.any()):
                    break
                lo, hi = torch.where(low, 2 * lo, lo), torch.where(high, 2 * hi, hi)
            for _ in range(_ICDF_STEPS):
                mid = 0.5 * (lo + hi)
                left = self.log_cdf(mid) < target
                lo, hi = torch.where(left, mid, lo), torch.where(left, hi, mid)
            return (0.5 * (lo + hi)).to(u.dtype)

    def relaxed_log_prob(self, utility: torch.Tensor, temperature: torch.Tensor,
                         value: torch.Tensor) -> torch.Tensor:
        r"""Log-density of :math:`\mathrm{softmax}((\psi + \varepsilon)/\tau)` on the simplex.

        It has a closed form only for Gumbel noise (the Concrete density); the generic
        default raises ``NotImplementedError`` (draw with ``rsample`` only).
        """
        raise NotImplementedError(
            f"the relaxed density has a closed form only for Gumbel noise (the Concrete "
            f"density); noise={self.name!r} has none: use rsample only")

    @classmethod
    def from_distribution(cls, d: TorchDistribution, name: Optional[str] = None) -> "Noise":
        """A :class:`Noise` from a scalar torch/Pyro distribution with ``log_prob`` and ``cdf``.

        ``log Phi`` is ``log(cdf(x))`` clamped away from ``log 0``; provide a dedicated
        ``log_cdf`` through the constructor when the lower tail matters.
        """
        if d.batch_shape != torch.Size() or d.event_shape != torch.Size():
            raise ValueError(
                "Noise.from_distribution needs a scalar distribution (batch_shape == "
                f"event_shape == ()), got batch_shape={tuple(d.batch_shape)}, "
                f"event_shape={tuple(d.event_shape)}"
            )

        def log_cdf(x):
            tiny = torch.finfo(x.dtype).tiny
            return torch.log(d.cdf(x).clamp(min=tiny))

        def sample(shape, dtype, device):  # (a generator is honoured through a forked RNG)
            return d.sample(shape).to(dtype=dtype, device=device)

        return cls(d.log_prob, log_cdf, sample, name=name or type(d).__name__.lower())

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"


class GumbelNoise(Noise):
    r"""Standard Gumbel noise: :math:`\log\phi(e) = -e - e^{-e}`, :math:`\log\Phi(x) = -e^{-x}`.

    With this noise the marginal of :math:`\arg\max_k(\psi_k + \varepsilon_k)` is exactly
    :math:`\mathrm{softmax}(\psi)`.

    Example:

    >>> import torch, pyro_ar as ar
    >>> g = ar.GumbelNoise()
    >>> x = torch.tensor([0.0, 1.0])
    >>> torch.allclose(g.log_cdf(x), -torch.exp(-x))
    True
    """

    name = "gumbel"
    closed_form = True

    def __init__(self) -> None:
        super().__init__()

    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        return -e - torch.exp(-e)

    def log_marginal(self, utility: torch.Tensor, labels: torch.Tensor,
                     num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        r""":math:`\log\mathrm{softmax}(\psi)_y` (``num_nodes`` unused; the memory-lean gradient of
        :func:`~pyro_ar.numerics.softmax_log_prob` when the labels match the batch)."""
        if labels.shape == utility.shape[:-1]:
            return softmax_log_prob(utility, labels)
        shape = broadcast_shape(labels.shape, utility.shape[:-1])
        logp = utility.log_softmax(-1).expand(shape + utility.shape[-1:])
        return logp.gather(-1, labels.expand(shape).unsqueeze(-1)).squeeze(-1)

    def log_marginal_all(self, utility: torch.Tensor, num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        return utility.log_softmax(-1)

    def icdf(self, u: torch.Tensor) -> torch.Tensor:
        return -torch.log(-torch.log(u))

    def relaxed_log_prob(self, utility: torch.Tensor, temperature: torch.Tensor,
                         value: torch.Tensor) -> torch.Tensor:
        r"""The Concrete density (Maddison et al. 2017) of :math:`x = \mathrm{softmax}((\psi+\varepsilon)/\tau)`:
        :math:`\log\Gamma(K) + (K-1)\log\tau + \sum_k s_k - K\,\mathrm{logsumexp}_k s_k - \sum_k\log x_k`,
        :math:`s_k = \psi_k - \tau\log x_k`."""
        tau, K = temperature, utility.shape[-1]
        log_x = value.clamp(min=torch.finfo(value.dtype).tiny).log()
        score = utility - tau.unsqueeze(-1) * log_x
        log_scale = math.lgamma(K) + (K - 1) * tau.log()
        return log_scale + score.sum(-1) - K * score.logsumexp(-1) - log_x.sum(-1)

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        return -torch.exp(-x)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        return self.icdf(uniform_open(shape, dtype=dtype, device=device, generator=generator))

    def distribution(self, loc: Number = 0.0, scale: Number = 1.0) -> TorchDistribution:
        loc, scale = as_tensors(loc, scale)
        return dist.Gumbel(loc, scale)


class NormalNoise(Noise):
    r"""Standard normal noise: :math:`\log\Phi(x) = \log \mathrm{ndtr}(x)` (multinomial probit).

    Example:

    >>> import torch, pyro_ar as ar
    >>> ar.NormalNoise().log_cdf(torch.tensor([-40.0])).item() < -800  # stable far in the tail
    True
    """

    name = "normal"
    _HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

    def __init__(self) -> None:
        super().__init__()

    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        return -0.5 * e * e - self._HALF_LOG_2PI

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        # numerics.log_ndtr: stable in both tails in any dtype, its gradient exact far in the
        # lower tail (torch's float32 log_ndtr backward loses it to cancellation: 956 instead
        # of 1000 at x = -1000), and several times faster on CPU than torch's
        return log_ndtr(x)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        return torch.randn(shape, dtype=dtype, device=device, generator=generator)

    def distribution(self, loc: Number = 0.0, scale: Number = 1.0) -> TorchDistribution:
        loc, scale = as_tensors(loc, scale)
        return dist.Normal(loc, scale)

    def icdf(self, u: torch.Tensor) -> torch.Tensor:
        return torch.special.ndtri(u)

    def log_density_derivatives(self, e: torch.Tensor):
        return -e, -torch.ones_like(e)

    def log_cdf_derivatives(self, x: torch.Tensor):
        # (log Phi)' = r = phi/Phi (the inverse Mills ratio), (log Phi)'' = -r (x + r), both from
        # numerics.normal_mills_ratio (x + r without cancellation in the lower tail, r -> -x)
        r, x_plus_r = normal_mills_ratio(x)
        return r, -r * x_plus_r

    def mode_hint(self, x: torch.Tensor) -> torch.Tensor:
        # The normal tail quantile of the Gumbel mode L = log(1 + e^x): the label's noise must beat
        # about e^L others, and Phi^{-1}(1 - e^{-L}) ~ sqrt(2L - log(4 pi L)). On Brown it starts
        # the Newton steps within about 1.3 of the mode (the Gumbel mode itself: 6 above it).
        # Bounded so that a huge x does not start the search far in the tail.
        big = softplus(x)
        return (2.0 * big - torch.log1p(4.0 * math.pi * big)).clamp(min=0.0).sqrt().clamp(max=40.0)


class LogisticNoise(Noise):
    r"""Standard logistic noise: :math:`\log\phi(e) = -s(-e) - s(e)`, :math:`\log\Phi(x) = -s(-x)`,
    with :math:`s` the softplus (multinomial logistic model).

    Example:

    >>> import torch, pyro_ar as ar
    >>> x = torch.tensor([0.0])
    >>> ar.LogisticNoise().log_cdf(x).exp().item()
    0.5
    """

    name = "logistic"

    def __init__(self) -> None:
        super().__init__()

    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        return -softplus(-e) - softplus(e)

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        return -softplus(-x)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        return self.icdf(uniform_open(shape, dtype=dtype, device=device, generator=generator))

    def icdf(self, u: torch.Tensor) -> torch.Tensor:
        return torch.log(u) - torch.log1p(-u)

    def log_density_derivatives(self, e: torch.Tensor):
        return -torch.tanh(0.5 * e), -0.5 / torch.cosh(0.5 * e) ** 2

    def log_cdf_derivatives(self, x: torch.Tensor):
        s = torch.sigmoid(-x)  # (log Phi)' = sigmoid(-x), (log Phi)'' = -sigmoid(x) sigmoid(-x)
        return s, -s * (1 - s)

    # distribution(): the generic NoiseDistribution, not pyro's Logistic, whose log_prob uses
    # F.logsigmoid: with autograd on, torch 2.13's CPU logsigmoid costs ~12 ms even for a
    # 4-element tensor, against ~20 us for softplus.


class LaplaceNoise(Noise):
    r"""Standard Laplace noise: :math:`\log\phi(e) = -|e| - \log 2`.

    .. math::  \log\Phi(x) = \begin{cases} x - \log 2 & x < 0 \\
               \log(1 - e^{-x}/2) & x \ge 0 \end{cases}

    (exact in both tails; the density has a kink at 0, the CDF is :math:`C^1`).

    Example:

    >>> import torch, pyro_ar as ar
    >>> ar.LaplaceNoise().log_cdf(torch.tensor([-1000.0, 0.0])).tolist()
    [-1000.6931762695312, -0.6931471824645996]
    """

    name = "laplace"

    def __init__(self) -> None:
        super().__init__()

    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        return -e.abs() - _LOG2

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        upper = torch.log1p(-0.5 * torch.exp(-x.clamp(min=0)))
        return torch.where(x < 0, x - _LOG2, upper)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        return self.icdf(uniform_open(shape, dtype=dtype, device=device, generator=generator))

    def icdf(self, u: torch.Tensor) -> torch.Tensor:
        return torch.where(u < 0.5, torch.log(2 * u), -torch.log(2 * (1 - u)))

    def distribution(self, loc: Number = 0.0, scale: Number = 1.0) -> TorchDistribution:
        loc, scale = as_tensors(loc, scale)
        return dist.Laplace(loc, scale)


class StudentTNoise(Noise):
    r"""Standard Student-t noise with :math:`\nu` = ``df`` degrees of freedom (polynomial tails).

    .. math::  \log\phi(e) = \log\frac{\Gamma(\frac{\nu+1}{2})}{\Gamma(\frac{\nu}{2})\sqrt{\nu\pi}}
               - \frac{\nu+1}{2}\log\Big(1 + \frac{e^2}{\nu}\Big), \qquad
               \Phi(-t) = \tfrac12 I_{\nu/(\nu+t^2)}\big(\tfrac{\nu}{2}, \tfrac12\big)\ (t \ge 0),

    with the regularised incomplete beta :math:`I` evaluated by its continued fraction in
    float64 (the lower tail in log space, so :math:`\log\Phi` is accurate and finite far in
    both tails); :math:`d\log\Phi/dx = \phi/\Phi` is supplied analytically (and is itself
    differentiable). Draws: :math:`Z/\sqrt{V/\nu}`, :math:`Z\sim N(0,1)`,
    :math:`V\sim\chi^2_\nu`.

    :param float df: degrees of freedom, > 0 (a Python number: a fixed parameter of the family).

    Example:

    >>> import torch, pyro_ar as ar
    >>> t3 = ar.StudentTNoise(3.0)
    >>> x = torch.tensor([-1.0], dtype=torch.float64)
    >>> z = x / 3 ** 0.5   # closed form for 3 d.o.f.
    >>> exact = 0.5 + (z / (1 + z * z) + torch.atan(z)) / torch.pi
    >>> torch.allclose(t3.log_cdf(x).exp(), exact)
    True
    """

    def __init__(self, df: float) -> None:
        super().__init__()
        if isinstance(df, torch.Tensor) and df.numel() == 1:
            df = df.item()
        if isinstance(df, bool) or not isinstance(df, (int, float)) or not (0 < df < math.inf):
            raise ValueError(f"df must be a positive finite number, got df={df!r}")
        self.df = float(df)
        self.name = f"student_t{self.df:g}"

    @property
    def cache_key(self) -> Optional[Hashable]:
        return ("StudentTNoise", self.df)

    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        return _student_t_log_density(e, self.df)

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        return _StudentTLogCDF.apply(x, self.df)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        z = torch.randn(shape, dtype=dtype, device=device, generator=generator)
        alpha = torch.full(shape, self.df / 2, dtype=dtype, device=device)
        v = 2 * torch._standard_gamma(alpha, generator=generator)
        return z / torch.sqrt(v.clamp(min=torch.finfo(dtype).tiny) / self.df)

    def distribution(self, loc: Number = 0.0, scale: Number = 1.0) -> TorchDistribution:
        loc, scale = as_tensors(loc, scale)
        return dist.StudentT(torch.tensor(self.df, dtype=loc.dtype, device=loc.device), loc, scale)

    def __repr__(self):
        return f"StudentTNoise(df={self.df:g})"

_BUILTIN = {"gumbel": GumbelNoise, "normal": NormalNoise, "logistic": LogisticNoise,
            "laplace": LaplaceNoise, "student_t": StudentTNoise}
NOISE_NAMES = tuple(_BUILTIN)
#: aliases accepted by :func:`get_noise`
_ALIASES = {"softmax": "gumbel", "probit": "normal", "gaussian": "normal", "studentt": "student_t"}
_STUDENT_T = re.compile(r"^student_?t(\d+(?:\.\d*)?)$")


def get_noise(noise: Union[str, Noise], **kwargs) -> Noise:
    """Resolve a noise argument: a :class:`Noise` is returned as is; a name gives the library family.

    Names: ``"gumbel"``, ``"normal"``, ``"logistic"``, ``"laplace"``, ``"student_t"``
    (with ``df=`` as a keyword, or written ``"student_t3"``, ``"student_t2.5"``), and the
    model names ``"softmax"``, ``"probit"``. Keyword arguments go to the family's constructor.

    :raises ValueError: for an unknown name, a missing ``df``, or an object that is not a Noise.

    Example:

    >>> import pyro_ar as ar
    >>> ar.get_noise("probit").name
    'normal'
    >>> ar.get_noise("student_t3"), ar.get_noise("student_t", df=5)
    (StudentTNoise(df=3), StudentTNoise(df=5))
    """
    if isinstance(noise, Noise):
        return noise
    if isinstance(noise, str):
        key = _ALIASES.get(noise.lower(), noise.lower())
        match = _STUDENT_T.match(key)
        if match:
            return StudentTNoise(float(match.group(1)), **kwargs)
        if key == "student_t" and "df" not in kwargs:
            raise ValueError(f"noise={noise!r} needs its degrees of freedom: get_noise('student_t', "
                             "df=3) or the name 'student_t3'")
        if key in _BUILTIN:
            return _BUILTIN[key](**kwargs)
        raise ValueError(
            f"unknown noise={noise!r}; expected one of {list(NOISE_NAMES)} "
            f"(or aliases {list(_ALIASES)}) or a pyro_ar.Noise instance"
        )
    raise ValueError(
        f"noise must be a name in {list(NOISE_NAMES)} or a pyro_ar.Noise, got {noise!r}"
    )


class NoiseDistribution(ParamsMixin, TorchDistribution):
    r"""Location-scale distribution :math:`p(x) = \phi((x - loc)/scale) / scale` of any :class:`Noise`.

    Used for the prior and the local guide of the noise site when the noise is
    user-defined (library noises map to Pyro's own Gumbel / Normal / Laplace / StudentT).

    :param noise: a :class:`Noise`.
    :param loc: location (tensor or number).
    :param scale: scale, ``> 0`` (tensor or number).

    Example:

    >>> import torch, pyro_ar as ar
    >>> d = ar.NoiseDistribution(ar.get_noise("logistic"), torch.zeros(3), torch.ones(3))
    >>> d.rsample((2,)).shape
    torch.Size([2, 3])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    _expand_attrs = {"loc": 0, "scale": 0}

    def __init__(self, noise: Noise, loc: Union[float, torch.Tensor], scale: Union[float, torch.Tensor],
                 validate_args: Optional[bool] = None) -> None:
        self.noise = noise
        self.loc, self.scale = torch.broadcast_tensors(*as_tensors(loc, scale))
        self._init_shape(self.loc.shape, validate_args)

    @property
    def has_rsample(self) -> bool:
        return self.noise.has_sample

    def rsample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        return self.noise.rsample_like(self.loc, self.scale, sample_shape)

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.noise.log_density((value - self.loc) / self.scale) - torch.log(self.scale)

    def cdf(self, value: torch.Tensor) -> torch.Tensor:
        return self.noise.log_cdf((value - self.loc) / self.scale).exp()

    def __repr__(self):
        return f"NoiseDistribution(noise={self.noise!r}, batch_shape={tuple(self.batch_shape)})"

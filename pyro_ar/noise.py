r"""Noise families of the utility (random-utility) view of a categorical.

A categorical over K classes with mean utilities :math:`\psi \in \mathbb{R}^K` is

.. math::

    y = \arg\max_k (\psi_k + \varepsilon_k), \qquad \varepsilon_k \overset{iid}{\sim} \phi,

where :math:`\phi` is a univariate density with CDF :math:`\Phi`. The choice of
:math:`\phi` selects the model:

========  ================================  ============================  ====================
noise     :math:`\log\phi(e)`               :math:`\log\Phi(x)` (stable)  model
========  ================================  ============================  ====================
Gumbel    :math:`-e - e^{-e}`               :math:`-e^{-x}`               softmax
Normal    :math:`-e^2/2 - \log\sqrt{2\pi}`  ``log_ndtr(x)``               multinomial probit
Logistic  :math:`-s(-e) - s(e)`             :math:`-s(-x)`                multinomial logistic
========  ================================  ============================  ====================

(:math:`s` is softplus.) Any other density with a CDF gives a valid model too: build it
with :class:`Noise` directly (``Noise(log_density=..., log_cdf=..., sample=...)``) or
from a distribution with :meth:`Noise.from_distribution`; everything in ``pyro_ar``
takes a :class:`Noise` or one of the names ``"gumbel"``, ``"normal"``, ``"logistic"``.
"""

import math
from typing import Callable, Optional, Union

import torch
import torch.nn.functional as F
from torch.distributions import constraints

import pyro.distributions as dist
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

__all__ = [
    "Noise",
    "GumbelNoise",
    "NormalNoise",
    "LogisticNoise",
    "NoiseDistribution",
    "get_noise",
    "NOISE_NAMES",
]


_SQRT_HALF = math.sqrt(0.5)


def _tiny_uniform(shape, *, dtype, device, generator=None):
    """Uniform(0, 1) draws bounded away from 0 and 1 so that logs stay finite."""
    u = torch.rand(shape, dtype=dtype, device=device, generator=generator)
    tiny = torch.finfo(dtype).tiny
    return u.clamp(min=tiny, max=1.0 - torch.finfo(dtype).eps)


def _softplus(x):
    """log(1 + e^x); F.softplus's default threshold (x > 20 -> x) errs by up to 2e-9."""
    return F.softplus(x, threshold=40.0 if x.dtype == torch.float64 else 20.0)


class Noise:
    r"""A standard (location 0, scale 1) univariate noise :math:`\phi` with CDF :math:`\Phi`.

    Subclasses (or users, through the constructor) provide three functions:

    * ``log_density(e)`` -- :math:`\log\phi(e)`, elementwise;
    * ``log_cdf(x)`` -- :math:`\log\Phi(x)`, elementwise and numerically stable in both
      tails (this is the function the augmented likelihood sums over classes);
    * ``sample(shape, dtype, device)`` -- iid standard draws. If it is differentiable in
      nothing (as all standard draws are), :meth:`rsample_like` gives reparameterised
      location-scale draws ``loc + scale * sample(...)``.

    Example -- a Laplace noise in three lines::

        laplace = Noise(
            log_density=lambda e: -e.abs() - math.log(2.0),
            log_cdf=lambda x: torch.where(x < 0, x - math.log(2.0),
                                          torch.log1p(-0.5 * torch.exp(-x.clamp(min=0)))),
            sample=lambda shape, dtype, device: torch.distributions.Laplace(
                torch.zeros((), dtype=dtype, device=device), 1.0).sample(shape),
            name="laplace")

    :param callable log_density: :math:`e \mapsto \log\phi(e)`.
    :param callable log_cdf: :math:`x \mapsto \log\Phi(x)`.
    :param callable sample: ``(shape, dtype, device) -> Tensor`` of standard draws.
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
    ):
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
        if name is not None:
            self.name = name

    # ---- the three primitives -------------------------------------------------------
    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\phi(e)` of the standard noise, elementwise."""
        return self._log_density(e)

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\Phi(x)` of the standard noise, elementwise, stable in both tails."""
        return self._log_cdf(x)

    def sample(self, shape, dtype=torch.float32, device=None) -> torch.Tensor:
        """``shape`` iid standard draws (no gradient)."""
        if self._sample is None:
            raise NotImplementedError(
                f"noise {self.name!r} was built without a `sample` function; pass "
                "sample=(shape, dtype, device) -> Tensor to Noise(...) to draw from it"
            )
        return self._sample(torch.Size(shape), dtype, device)

    # ---- derived -----------------------------------------------------------------------
    @property
    def has_sample(self) -> bool:
        return type(self) is not Noise or self._sample is not None

    def rsample_like(self, loc: torch.Tensor, scale: torch.Tensor, sample_shape=()):
        r"""Reparameterised draws :math:`loc + scale \cdot \varepsilon`, :math:`\varepsilon\sim\phi`."""
        shape = torch.Size(sample_shape) + broadcast_shape(loc.shape, scale.shape)
        return loc + scale * self.sample(shape, dtype=loc.dtype, device=loc.device)

    def distribution(self, loc=0.0, scale=1.0) -> TorchDistribution:
        r"""The location-scale Pyro distribution :math:`\phi((x - loc)/scale)/scale`.

        Built-in noises return Pyro's own distributions (so registered KL divergences
        apply under ``TraceMeanField_ELBO``); custom noises return a
        :class:`NoiseDistribution`.
        """
        loc, scale = _as_tensors(loc, scale)
        return NoiseDistribution(self, loc, scale)

    def mode_hint(self, x: torch.Tensor) -> torch.Tensor:
        """A cheap starting point for the quadrature's mode search (see quadrature.py).

        ``x`` holds, per integrand, ``logsumexp_k'(psi_k' - psi_y)``; the default is the
        Gumbel integrand's exact mode ``log(1 + exp(x))``.
        """
        return F.softplus(x)

    @classmethod
    def from_distribution(cls, d, name: Optional[str] = None) -> "Noise":
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

        def sample(shape, dtype, device):
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

    def __init__(self):
        super().__init__()

    def log_density(self, e):
        return -e - torch.exp(-e)

    def log_cdf(self, x):
        return -torch.exp(-x)

    def sample(self, shape, dtype=torch.float32, device=None):
        u = _tiny_uniform(shape, dtype=dtype, device=device)
        return -torch.log(-torch.log(u))

    def distribution(self, loc=0.0, scale=1.0):
        loc, scale = _as_tensors(loc, scale)
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

    def __init__(self):
        super().__init__()

    def log_density(self, e):
        return -0.5 * e * e - self._HALF_LOG_2PI

    def log_cdf(self, x):
        if x.dtype == torch.float64:
            return torch.special.log_ndtr(x)
        # In lower precision, torch's log_ndtr backward, exp(log phi - log Phi), loses the
        # derivative to cancellation far in the lower tail (float32: 956 instead of 1000 at
        # x = -1000), so evaluate in float64 (also faster than float32 log_ndtr on CPU) ...
        if x.device.type != "mps":
            return torch.special.log_ndtr(x.double()).to(x.dtype)
        # ... or, without float64, as log(erfcx(-x/sqrt 2) / 2) - x^2/2 for x < 0.
        xn = x.clamp(max=0.0)
        lower = torch.log(0.5 * torch.special.erfcx(-_SQRT_HALF * xn)) - 0.5 * xn * xn
        return torch.where(x < 0, lower, torch.special.log_ndtr(x.clamp(min=0.0)))

    def sample(self, shape, dtype=torch.float32, device=None):
        return torch.randn(shape, dtype=dtype, device=device)

    def distribution(self, loc=0.0, scale=1.0):
        loc, scale = _as_tensors(loc, scale)
        return dist.Normal(loc, scale)

    def mode_hint(self, x):
        # The probit integrand peaks a little above the Gumbel one's mode; Newton fixes
        # the rest. Bounded so that a huge x does not start the search far in the tail.
        return F.softplus(x).clamp(max=40.0)


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

    def __init__(self):
        super().__init__()

    def log_density(self, e):
        return -_softplus(-e) - _softplus(e)

    def log_cdf(self, x):
        return -_softplus(-x)

    def sample(self, shape, dtype=torch.float32, device=None):
        u = _tiny_uniform(shape, dtype=dtype, device=device)
        return torch.log(u) - torch.log1p(-u)

    # distribution(): the generic NoiseDistribution, not pyro's Logistic, whose log_prob uses
    # F.logsigmoid: with autograd on, torch 2.13's CPU logsigmoid costs ~12 ms even for a
    # 4-element tensor, against ~20 us for softplus.


class NoiseDistribution(TorchDistribution):
    r"""Location-scale distribution :math:`p(x) = \phi((x - loc)/scale) / scale` of any :class:`Noise`.

    Used for the prior and the local guide of the noise site when the noise is
    user-defined (built-in noises map to Pyro's own Gumbel / Normal / Logistic).

    Example:

    >>> import torch, pyro_ar as ar
    >>> d = ar.NoiseDistribution(ar.get_noise("logistic"), torch.zeros(3), torch.ones(3))
    >>> d.rsample((2,)).shape
    torch.Size([2, 3])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real

    def __init__(self, noise: Noise, loc, scale, validate_args=None):
        self.noise = noise
        self.loc, self.scale = torch.broadcast_tensors(*_as_tensors(loc, scale))
        super().__init__(self.loc.shape, validate_args=validate_args)

    @property
    def has_rsample(self):
        return self.noise.has_sample

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(NoiseDistribution, _instance)
        batch_shape = torch.Size(batch_shape)
        new.noise = self.noise
        new.loc = self.loc.expand(batch_shape)
        new.scale = self.scale.expand(batch_shape)
        super(NoiseDistribution, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=torch.Size()):
        return self.noise.rsample_like(self.loc, self.scale, sample_shape)

    def sample(self, sample_shape=torch.Size()):
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return self.noise.log_density((value - self.loc) / self.scale) - torch.log(self.scale)


def _as_tensors(loc, scale):
    if not isinstance(loc, torch.Tensor) and not isinstance(scale, torch.Tensor):
        loc = torch.as_tensor(loc, dtype=torch.get_default_dtype())
    if not isinstance(loc, torch.Tensor):
        loc = torch.as_tensor(loc, dtype=scale.dtype, device=scale.device)
    if not isinstance(scale, torch.Tensor):
        scale = torch.as_tensor(scale, dtype=loc.dtype, device=loc.device)
    return loc, scale


_BUILTIN = {"gumbel": GumbelNoise, "normal": NormalNoise, "logistic": LogisticNoise}
NOISE_NAMES = tuple(_BUILTIN)
#: aliases accepted by :func:`get_noise`
_ALIASES = {"softmax": "gumbel", "probit": "normal", "gaussian": "normal"}


def get_noise(noise: Union[str, Noise]) -> Noise:
    """Resolve a noise argument: a :class:`Noise` is returned as is; a name
    (``"gumbel"``, ``"normal"``, ``"logistic"``, or the model names ``"softmax"``,
    ``"probit"``) gives the built-in family.

    :raises ValueError: for an unknown name or an object that is not a Noise.

    Example:

    >>> import pyro_ar as ar
    >>> ar.get_noise("probit").name
    'normal'
    """
    if isinstance(noise, Noise):
        return noise
    if isinstance(noise, str):
        key = _ALIASES.get(noise.lower(), noise.lower())
        if key in _BUILTIN:
            return _BUILTIN[key]()
        raise ValueError(
            f"unknown noise={noise!r}; expected one of {list(NOISE_NAMES)} "
            f"(or aliases {list(_ALIASES)}) or a pyro_ar.Noise instance"
        )
    raise ValueError(
        f"noise must be a name in {list(NOISE_NAMES)} or a pyro_ar.Noise, got {noise!r}"
    )

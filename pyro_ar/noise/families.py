r"""The library's noise families, each overriding the generic defaults of
:class:`~pyro_ar.noise.base.Noise` with the closed forms it has (see the table of
:mod:`pyro_ar.noise`), and :func:`get_noise`, which resolves a noise argument (a
:class:`~pyro_ar.noise.base.Noise` or one of the names of :data:`NOISE_NAMES` and their
aliases).
"""

import math
import re
from typing import Hashable, Optional, Union

import torch

import pyro.distributions as dist
from pyro.distributions.util import broadcast_shape

from ..numerics import as_tensors, check_int, softplus, uniform_open
from ..max_quadrature import check_log_probs
from ..quadrature import DEFAULT_NUM_NODES, MAX_NUM_NODES
from .base import Device, Noise, Number, Shape, TorchDistribution
from .special import _student_t_log_density, _StudentTLogCDF, log_ndtr, normal_mills_ratio, softmax_log_prob

__all__ = ["GumbelNoise", "NormalNoise", "LogisticNoise", "LaplaceNoise", "StudentTNoise", "get_noise", "NOISE_NAMES", "NOISE_ALIASES"]

_LOG2 = math.log(2.0)


class GumbelNoise(Noise):
    r"""Standard Gumbel noise: :math:`\log\phi(e) = -e - e^{-e}`, :math:`\log\Phi(x) = -e^{-x}`.

    With this noise the marginal of :math:`\arg\max_k(\psi_k + \varepsilon_k)` is exactly
    :math:`\mathrm{softmax}(\psi)`.

    Example:

    >>> import torch, pyro_ar as ar
    >>> g = ar.noise.GumbelNoise()
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
        :func:`~pyro_ar.noise.special.softmax_log_prob` when the labels match the batch)."""
        if labels.shape == utility.shape[:-1]:
            return softmax_log_prob(utility, labels)
        shape = broadcast_shape(labels.shape, utility.shape[:-1])
        logp = utility.log_softmax(-1).expand(shape + utility.shape[-1:])
        return logp.gather(-1, labels.expand(shape).unsqueeze(-1)).squeeze(-1)

    def log_marginal_all(self, utility: torch.Tensor, num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        return utility.log_softmax(-1)

    def log_marginal_rows(self, utility: torch.Tensor, rows: torch.Tensor, labels: torch.Tensor,
                          num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        """One log-softmax per row of ``utility``, read at ``(rows, labels)``: O(R K), not O(B K)."""
        return self.log_marginal_all(utility)[..., rows, labels]

    def log_normalizer(self, utility: torch.Tensor) -> torch.Tensor:
        """:math:`\\log\\sum_k e^{\\psi_k}`: the softmax's log-normaliser."""
        return utility.logsumexp(-1)

    def check_num_nodes(self, utility: torch.Tensor, num_nodes: int) -> int:
        """An integer in ``[5, MAX_NUM_NODES]`` (unused by the log-softmax, checked as for any noise)."""
        return check_int("num_nodes", num_nodes, low=5, high=MAX_NUM_NODES)

    def marginal_offsets(self, log_probs: torch.Tensor, tol: float = 1e-6) -> torch.Tensor:
        """``log_probs`` itself: the softmax of log-probabilities is the probabilities."""
        return check_log_probs(log_probs).clone()

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
    >>> ar.noise.NormalNoise().log_cdf(torch.tensor([-40.0])).item() < -800  # stable far in the tail
    True
    """

    name = "normal"
    _HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)

    def __init__(self) -> None:
        super().__init__()

    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        return -0.5 * e * e - self._HALF_LOG_2PI

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        # special.log_ndtr: stable in both tails in any dtype, its gradient exact far in the
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
        return -e, torch.full_like(e, -1.0)

    def log_cdf_derivatives(self, x: torch.Tensor):
        # (log Phi)' = r = phi/Phi (the inverse Mills ratio), (log Phi)'' = -r (x + r), both from
        # special.normal_mills_ratio (x + r without cancellation in the lower tail, r -> -x)
        r, x_plus_r = normal_mills_ratio(x)
        return r, torch.mul(r, x_plus_r).neg_()

    def weighted_log_cdf_derivatives(self, x: torch.Tensor, w: torch.Tensor):
        # sum_j w_j r_j and -sum_j (w_j r_j)(x_j + r_j): one product w r, reused (in place
        # when no graph is built), instead of (log Phi)'' and two dot products
        r, x_plus_r = normal_mills_ratio(x)
        w = w.to(r.dtype)
        graph = torch.is_grad_enabled() and (r.requires_grad or w.requires_grad)
        if graph or broadcast_shape(r.shape, w.shape) != r.shape:
            wr = r * w
            return wr.sum(-1), -(wr * x_plus_r).sum(-1)
        wr = r.mul_(w)
        return wr.sum(-1), wr.mul_(x_plus_r).sum(-1).neg_()

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
    >>> ar.noise.LogisticNoise().log_cdf(x).exp().item()
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
#: The one table of noise names (the library families), read by :func:`get_noise`, through
#: which every public argument ``noise=`` resolves a name (the distributions, the likelihoods,
#: the models, the evaluation functions, the estimator); ``"student_t"`` takes its degrees of
#: freedom as ``df=`` or in the name (``"student_t3"``).
NOISE_NAMES = tuple(_BUILTIN)
#: the other names :func:`get_noise` takes, alias -> name in :data:`NOISE_NAMES` (the model's
#: name: ``"softmax"`` for Gumbel noise, ``"probit"`` for normal noise)
NOISE_ALIASES = {"softmax": "gumbel", "probit": "normal", "gaussian": "normal", "studentt": "student_t"}
_ALIASES = NOISE_ALIASES
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

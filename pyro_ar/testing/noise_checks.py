r"""The contract every :class:`~pyro_ar.noise.Noise` must satisfy, runnable on a noise you wrote.

:func:`check_noise` (no pytest needed) asserts, for a standard noise :math:`\phi` with CDF
:math:`\Phi`:

1. the density integrates to one, :math:`\int\phi = 1` (trapezoid rule on a fine grid plus
   the tail masses :math:`\Phi(lo) + 1 - \Phi(hi)` taken from ``log_cdf``);
2. ``log_cdf`` is the integral of the density, :math:`\Phi(x) = \Phi(lo) + \int_{lo}^x\phi`,
   and its autograd derivative is the density, :math:`d\Phi/dx = \phi`;
3. ``sample`` follows :math:`\Phi`: the Kolmogorov--Smirnov statistic
   :math:`D_n = \sup_x|F_n(x) - \Phi(x)|` of ``num_samples`` draws stays below the
   asymptotic critical value :math:`\sqrt{-\log(\alpha/2)/2}/\sqrt n` (level :math:`\alpha`
   = ``ks_alpha``, :math:`10^{-3}` by default; the draws come from a seeded generator, so
   the check is deterministic), and draws have the requested shape, dtype and device and
   are reproducible with ``generator=`` without touching the global RNG;
4. ``log_cdf`` is stable in the tails: finite, :math:`\le 0`, non-decreasing on
   ``tail_range``, and its gradient is finite there;
5. ``distribution(loc, scale)`` is the location-scale family:
   :math:`\log p(x) = \log\phi((x-loc)/scale) - \log scale`, with the broadcast batch shape;
6. every method the noise overrides with a closed form (``log_marginal``,
   ``log_marginal_all``, ``icdf``, ``log_density_derivatives``, ``log_cdf_derivatives``,
   ``weighted_log_cdf_derivatives``)
   agrees with the generic default of :class:`~pyro_ar.noise.Noise` (quadrature, bisection,
   autograd) built from the same ``log_density`` and ``log_cdf`` (float64; tolerances from the
   generic methods' errors: 1e-8 for the quadrature of a smooth density, 1e-9 for the rest).

:func:`check_closed_forms` runs check 6 alone; :class:`NoiseContract` runs the same checks as
pytest tests: subclass it in a test module with a class attribute ``noise``.
"""

import math
from typing import Tuple, Union

import torch

from ..noise import Noise

#: a device or its name
Device = Union[str, torch.device]

__all__ = ["check_noise", "check_closed_forms", "NoiseContract"]


def _grid(lo, hi, n, dtype, device):
    return torch.linspace(lo, hi, n, dtype=dtype, device=device)


def check_density_integrates_to_one(noise: Noise, lo: float = -60.0, hi: float = 60.0, num_points: int = 240001,
                                    tol: float = 1e-6) -> None:
    """Check 1 (float64): trapezoid mass on [lo, hi] plus the tail masses from ``log_cdf``."""
    x = _grid(lo, hi, num_points, torch.float64, "cpu")
    mass = torch.trapezoid(noise.log_density(x).exp(), x).item()
    ends = noise.log_cdf(torch.tensor([lo, hi], dtype=torch.float64)).exp()
    total = mass + ends[0].item() + (1.0 - ends[1].item())
    assert abs(total - 1.0) < tol, f"{noise!r}: the density integrates to {total!r}, not 1 (tol {tol})"


def check_log_cdf_is_integral_of_density(noise: Noise, lo: float = -30.0, hi: float = 30.0,
                                         num_points: int = 120001, tol: float = 1e-6) -> None:
    """Check 2 (float64): cumulative trapezoid of the density vs ``exp(log_cdf)``, and d Phi/dx = phi."""
    x = _grid(lo, hi, num_points, torch.float64, "cpu")
    pdf = noise.log_density(x).exp()
    cum = torch.cat([x.new_zeros(1), torch.cumsum((pdf[1:] + pdf[:-1]) / 2 * x.diff(), 0)])
    cdf = noise.log_cdf(x).exp()
    err = (cdf[0] + cum - cdf).abs().max().item()
    assert err < tol, f"{noise!r}: log_cdf differs from the integral of the density by {err:.3g} (tol {tol})"
    xs = torch.linspace(-8.0, 8.0, 161, dtype=torch.float64).requires_grad_()
    (grad,) = torch.autograd.grad(noise.log_cdf(xs).exp().sum(), xs)
    dens = noise.log_density(xs.detach()).exp()
    keep = xs.detach() != 0  # a density may have a kink at 0 (Laplace)
    err = (grad - dens)[keep].abs().max().item()
    assert err < 1e-8, f"{noise!r}: d/dx exp(log_cdf) differs from the density by {err:.3g}"


def check_sample(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu", num_samples: int = 20000,
                 ks_alpha: float = 1e-3, seed: int = 0) -> None:
    """Check 3: shape/dtype/device, generator reproducibility, and a KS test against ``log_cdf``."""
    if not noise.has_sample:
        return
    g = torch.Generator(device=device).manual_seed(seed)
    state = torch.get_rng_state()
    x = noise.sample((num_samples,), dtype=dtype, device=device, generator=g)
    assert torch.equal(torch.get_rng_state(), state), f"{noise!r}: sample(generator=...) used the global RNG"
    assert x.shape == (num_samples,) and x.dtype == dtype and x.device.type == torch.device(device).type, \
        f"{noise!r}: sample returned shape {tuple(x.shape)}, dtype {x.dtype}, device {x.device}"
    assert torch.isfinite(x).all(), f"{noise!r}: sample returned non-finite draws"
    again = noise.sample((num_samples,), dtype=dtype, device=device,
                         generator=torch.Generator(device=device).manual_seed(seed))
    assert torch.equal(x, again), f"{noise!r}: sample is not reproducible with the same generator seed"
    xs = x.double().cpu().sort().values
    cdf = noise.log_cdf(xs).exp()
    n = num_samples
    i = torch.arange(1, n + 1, dtype=torch.float64)
    stat = torch.maximum(i / n - cdf, cdf - (i - 1) / n).max().item()
    crit = math.sqrt(-math.log(ks_alpha / 2) / 2) / math.sqrt(n)
    assert stat < crit, f"{noise!r}: KS statistic {stat:.4g} >= {crit:.4g} (level {ks_alpha}, n={n})"


def check_tails(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu",
                tail_range: Tuple[float, float] = (-30.0, 1000.0), num_points: int = 4001) -> None:
    """Check 4: log_cdf finite, <= 0, non-decreasing on ``tail_range``; gradients finite."""
    x = _grid(tail_range[0], tail_range[1], num_points, dtype, device).requires_grad_()
    lp = noise.log_cdf(x)
    (grad,) = torch.autograd.grad(lp.sum(), x)
    assert torch.isfinite(lp).all(), f"{noise!r}: log_cdf is not finite at {x[~torch.isfinite(lp)][:5].tolist()}"
    assert torch.isfinite(grad).all(), f"{noise!r}: log_cdf has non-finite gradients at {x[~torch.isfinite(grad)][:5].tolist()}"
    lp = lp.detach()
    assert (lp <= 0).all(), f"{noise!r}: log_cdf > 0 at {x[lp > 0][:5].tolist()}"
    assert (lp.diff() >= 0).all(), f"{noise!r}: log_cdf decreases at {x[1:][lp.diff() < 0][:5].tolist()}"


def check_distribution(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu") -> None:
    """Check 5: ``distribution(loc, scale)`` is the location-scale family of the noise."""
    loc = torch.tensor([[0.0], [1.5]], dtype=dtype, device=device)
    scale = torch.tensor([1.0, 0.3, 4.0], dtype=dtype, device=device)
    d = noise.distribution(loc, scale)
    assert d.batch_shape == (2, 3) and d.event_shape == (), \
        f"{noise!r}: distribution batch_shape {tuple(d.batch_shape)} != (2, 3)"
    x = torch.linspace(-3, 3, 7, dtype=dtype, device=device).reshape(7, 1, 1)
    expected = noise.log_density((x - loc) / scale) - scale.log()
    err = (d.log_prob(x) - expected).abs().max().item()
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    assert err < tol, f"{noise!r}: distribution(loc, scale).log_prob is off by {err:.3g}"
    if noise.has_sample:
        assert d.sample((5,)).shape == (5, 2, 3)
        assert d.expand((4, 2, 3)).batch_shape == (4, 2, 3)


def check_noise(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu",
                tail_range: Tuple[float, float] = (-30.0, 1000.0), num_samples: int = 20000,
                ks_alpha: float = 1e-3, seed: int = 0) -> None:
    """Run the whole noise contract (module docstring) on ``noise``; raise ``AssertionError`` on failure.

    The integral checks run in float64 on the CPU; the sampling, tail and distribution
    checks in ``dtype`` on ``device``.

    Example:

    >>> import math, torch, pyro_ar as ar
    >>> from pyro_ar.testing import check_noise
    >>> wide = ar.Noise(log_density=lambda e: -e * e / 8 - math.log(2 * math.sqrt(2 * math.pi)),
    ...                 log_cdf=lambda x: torch.special.log_ndtr(x / 2),
    ...                 sample=lambda shape, dtype, device: 2 * torch.randn(shape, dtype=dtype, device=device))
    >>> check_noise(wide)        # passes silently
    >>> check_noise(ar.Noise(log_density=lambda e: -e * e / 2, log_cdf=lambda x: torch.special.log_ndtr(x)))
    Traceback (most recent call last):
    ...
    AssertionError: Noise(name='custom'): the density integrates to 2.5066..., not 1 (tol 1e-06)
    """
    check_density_integrates_to_one(noise)
    check_log_cdf_is_integral_of_density(noise)
    check_sample(noise, dtype, device, num_samples, ks_alpha, seed)
    check_tails(noise, dtype, device, tail_range)
    check_distribution(noise, dtype, device)
    check_closed_forms(noise, seed)


def _overrides(noise: Noise, method: str) -> bool:
    return getattr(noise, method).__func__ is not getattr(Noise, method)  # (a closed form)


def check_closed_forms(noise: Noise, seed: int = 0) -> None:
    """Check 6: each closed form the noise overrides agrees with :class:`Noise`'s generic default.

    Example:

    >>> import pyro_ar as ar
    >>> from pyro_ar.testing import check_closed_forms
    >>> check_closed_forms(ar.noise.GumbelNoise())      # log-softmax = quadrature, ... : passes
    """
    generic = Noise(log_density=noise.log_density, log_cdf=noise.log_cdf, name=f"generic {noise.name}")
    g = torch.Generator().manual_seed(seed)
    psi = 3.0 * torch.randn(5, 7, generator=g, dtype=torch.float64)
    y = torch.randint(7, (5,), generator=g)
    u = torch.rand(64, generator=g, dtype=torch.float64).clamp(1e-9, 1 - 1e-9)
    x = torch.linspace(-8.05, 8.05, 47, dtype=torch.float64)  # (no node at a kink at 0)
    checks = [("log_marginal", (psi, y), 1e-8), ("log_marginal_all", (psi,), 1e-8), ("icdf", (u,), 1e-9),
              ("log_density_derivatives", (x,), 1e-9), ("log_cdf_derivatives", (x,), 1e-9),
              ("weighted_log_cdf_derivatives", (x[:45].reshape(5, 9), u[:45].reshape(5, 9)), 1e-9)]
    for method, args, tol in checks:
        if not _overrides(noise, method):
            continue
        got, ref = getattr(noise, method)(*args), getattr(generic, method)(*args)
        for a, b in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            err = ((a - b).abs() / (1 + b.abs())).max().item()
            assert err < tol, f"{noise!r}: {method} is off its generic default by {err:.3g} (tol {tol:g})"


class NoiseContract:
    """The noise contract as pytest tests: subclass with a class attribute ``noise``.

    Class attributes ``dtype``, ``device``, ``tail_range``, ``num_samples`` and ``ks_alpha``
    adjust the checks (see :func:`check_noise`).

    Example:

    >>> import pyro_ar as ar
    >>> from pyro_ar.testing import NoiseContract
    >>> class TestLaplace(NoiseContract):      # in a test module: pytest collects six tests
    ...     noise = ar.LaplaceNoise()
    >>> TestLaplace().test_density_integrates_to_one()
    """

    noise = None
    dtype = torch.float64
    device = "cpu"
    tail_range = (-30.0, 1000.0)
    num_samples = 20000
    ks_alpha = 1e-3

    def _noise(self):
        if self.noise is None:
            raise AssertionError(f"{type(self).__name__} needs a class attribute `noise`")
        return self.noise

    def test_density_integrates_to_one(self):
        check_density_integrates_to_one(self._noise())

    def test_log_cdf_is_integral_of_density(self):
        check_log_cdf_is_integral_of_density(self._noise())

    def test_sample_matches_cdf(self):
        check_sample(self._noise(), self.dtype, self.device, self.num_samples, self.ks_alpha)

    def test_log_cdf_tails(self):
        check_tails(self._noise(), self.dtype, self.device, self.tail_range)

    def test_distribution(self):
        check_distribution(self._noise(), self.dtype, self.device)

    def test_closed_forms_match_generic_defaults(self):
        check_closed_forms(self._noise())

"""pyro_ar.noise.special: the special functions behind the Normal and Student-t noises (the
normal log CDF's parts; log_ndtr and normal_mills_ratio themselves are checked against torch and
mpmath in tests/test_noise.py)."""

import math

import pytest
import torch

from pyro_ar.noise.special import _ndtr_parts


def test_ndtr_parts_share_one_erfc_with_the_same_ratio():
    """With log Phi (one erfc for both: Phi(x) = 1 - Phi(-x) above 0) the inverse Mills ratio
    r is that of the Mills-ratio-only path (relative 1e-6 in float32, 1e-13 in float64),
    across both tails; x + r comes from the Mills-ratio path only (the log path's callers
    do not use it)."""
    for dtype, rtol in ((torch.float32, 1e-6), (torch.float64, 1e-13)):
        x = torch.linspace(-30.0, 12.0, 4001, dtype=dtype)
        log_cdf, r1, xr1 = _ndtr_parts(x, True)
        no_log, r0, xr0 = _ndtr_parts(x, False)
        torch.testing.assert_close(r1, r0, rtol=rtol, atol=0.0)
        assert xr1 is None and no_log is None and log_cdf.shape == xr0.shape == x.shape


def _ndtr_parts_before(x, with_log):
    """noise.special._ndtr_parts as it was before its arithmetic forms (the reference of the next
    test): the mask 1[x > 0] by a comparison, Phi = erfc(-x/sqrt 2)/2 in the Mills-ratio path,
    the lower tail through the indices of x < -5 always."""
    a = 5.0
    xc = x.clamp(min=-a)
    log_cdf = None
    if with_log:
        upper = (x > 0).to(x.dtype)
        u = torch.erfc(xc.abs() * math.sqrt(0.5)) * 0.5
        cdf = (upper - u).abs()
        log_cdf = torch.lerp(u.clamp(min=torch.finfo(x.dtype).tiny).log(), (-u).log1p(), upper)
    else:
        cdf = torch.erfc(xc * -math.sqrt(0.5)) * 0.5
    r = torch.exp(-0.5 * xc.square()) / math.sqrt(2.0 * math.pi) / cdf
    x_plus_r = xc + r
    tail = x < -a
    t = -x[tail]
    acc = t.clone()
    for k in range(24 if x.dtype == torch.float64 else 8, 1, -1):
        acc = k / acc + t
    s_t = 1.0 / acc
    x_plus_r[tail], r[tail] = s_t, t + s_t
    if with_log:
        log_cdf[tail] = -0.5 * t * t - 0.5 * math.log(2.0 * math.pi) - (t + s_t).log()
    return log_cdf, r, x_plus_r


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("with_log", [True, False])
def test_ndtr_parts_match_the_formulas_they_replaced(with_log, dtype):
    """The arithmetic forms (the 0/1 mask sign(x)^+ for 1[x > 0], Phi's 1/2 folded into r's
    constant, the lower tail looked for through min(x)) give the values of the formulas before
    them up to rounding (relative 1e-6 in float32, 1e-14 in float64; x + r, which cancels
    near -5, to 10 times that in absolute terms), on inputs with and
    without a lower tail and at the mask's edge (+-0), with a NaN and infinities passed through
    as before."""
    g = torch.Generator().manual_seed(0)
    rtol = 1e-6 if dtype == torch.float32 else 1e-14
    for x in (3.0 * torch.randn(64, 33, generator=g),                    # some below -5
              torch.rand(64, 33, generator=g) * 9.0 - 4.0,               # none below -5
              torch.tensor([0.0, -0.0, -5.0, 1e-30, -1e-30, math.nan, math.inf, -math.inf])):
        x = x.to(dtype)
        new, old = _ndtr_parts(x, with_log), _ndtr_parts_before(x, with_log)
        torch.testing.assert_close(new[1], old[1], rtol=rtol, atol=1e-300, equal_nan=True)
        if with_log:
            torch.testing.assert_close(new[0], old[0], rtol=rtol, atol=1e-300, equal_nan=True)
        else:  # (x + r cancels near -5: r's rounding, relative to r)
            torch.testing.assert_close(new[2], old[2], rtol=rtol, atol=10 * rtol, equal_nan=True)

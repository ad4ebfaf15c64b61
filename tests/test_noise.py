"""Noise families: log density, stable log CDF, sampling, reparameterisation, user noises.

Every library noise (and the user-defined one of tests/helpers.py) runs the shipped noise
contract :class:`pyro_ar.testing.NoiseContract` (density integrates to one, log_cdf is the
integral of the density and its derivative, KS test of the draws at level 1e-3 with a seeded
generator, stable tails, location-scale distribution), in float64 and float32.
"""

import math
import pickle

import numpy as np
import pytest
import scipy.stats
import torch

import pyro.distributions as dist

import pyro_ar
from pyro_ar.noise import NOISE_NAMES, NoiseDistribution, get_noise
from pyro_ar.testing import NoiseContract, check_noise

from tests.helpers import DEVICES, DTYPES, LIBRARY_NOISES, USER_NOISES, make_noise

pytestmark = pytest.mark.usefixtures("seeded")

ALL_NOISES = LIBRARY_NOISES + USER_NOISES


# ---- the shipped contract, for every noise, in float64 and float32 ----------------------
# (the user-defined t3 only in float64: in float32 its CDF cancels in the upper tail, which
# the contract detects, see test_check_noise_catches_a_wrong_noise)
for _name in ALL_NOISES:
    for _dtype in DTYPES if _name in LIBRARY_NOISES else [torch.float64]:
        _cls = f"TestContract_{_name}_{str(_dtype).split('.')[-1]}"
        globals()[_cls] = type(_cls, (NoiseContract,), {"noise": make_noise(_name), "dtype": _dtype})

#: the same standard noises in scipy, as independent references
SCIPY = {
    "gumbel": scipy.stats.gumbel_r(),
    "normal": scipy.stats.norm(),
    "logistic": scipy.stats.logistic(),
    "student_t3": scipy.stats.t(3),
    "user_t3": scipy.stats.t(3),
    "laplace": scipy.stats.laplace(),
}


@pytest.mark.parametrize("name", ALL_NOISES)
def test_log_density_and_log_cdf_match_scipy(name):
    noise = make_noise(name)
    # both tails, far enough that a naive log(cdf) would underflow for the light tails
    x = torch.cat([torch.linspace(-30, 40, 701, dtype=torch.float64),
                   torch.tensor([-3.0e2, -1.0e2, 1.0e2, 3.0e2], dtype=torch.float64)])
    ref_pdf = SCIPY[name].logpdf(x.numpy())
    ref_cdf = SCIPY[name].logcdf(x.numpy())
    if name == "gumbel":  # scipy's gumbel_r.logcdf underflows to -inf; -exp(-x) is exact
        ref_cdf = -np.exp(-x.numpy())
    ok = np.isfinite(ref_cdf)
    # full precision (pyro_ar.numerics.softplus, not F.softplus and its threshold)
    np.testing.assert_allclose(noise.log_density(x).numpy(), ref_pdf, rtol=1e-12, atol=1e-13)
    # the user-defined Student-t log CDF loses a few digits to cancellation in its far tail
    rtol = 1e-8 if name == "user_t3" else 1e-10
    np.testing.assert_allclose(noise.log_cdf(x).numpy()[ok], ref_cdf[ok], rtol=rtol, atol=1e-14)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ALL_NOISES)
def test_sample_dtype_device_shape(name, dtype, device):
    x = make_noise(name).sample((3, 4), dtype=dtype, device=device)
    assert x.shape == (3, 4) and x.dtype == dtype and x.device.type == device
    assert torch.isfinite(x).all()
    g = torch.Generator(device=device).manual_seed(5)
    y = make_noise(name).sample((3, 4), dtype=dtype, device=device, generator=g)
    assert y.shape == (3, 4) and y.dtype == dtype and y.device.type == device


@pytest.mark.parametrize("name", ALL_NOISES)
def test_rsample_like_is_reparameterised(name):
    noise = make_noise(name)
    loc = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    scale = torch.tensor([2.0, 0.5], dtype=torch.float64, requires_grad=True)
    x = noise.rsample_like(loc, scale, sample_shape=(1000,))
    assert x.shape == (1000, 2)
    grad_loc, grad_scale = torch.autograd.grad(x.sum(), (loc, scale))
    torch.testing.assert_close(grad_loc, torch.full_like(loc, 1000.0))
    standard = (x.detach() - loc.detach()) / scale.detach()  # the draws themselves
    torch.testing.assert_close(grad_scale, standard.sum(0))


def test_builtin_distributions_are_pyros_own():
    # TraceMeanField_ELBO then uses torch's registered KL divergences
    assert isinstance(get_noise("gumbel").distribution(), dist.Gumbel)
    assert isinstance(get_noise("normal").distribution(), dist.Normal)
    assert isinstance(get_noise("laplace").distribution(), dist.Laplace)
    assert isinstance(get_noise("student_t3").distribution(), dist.StudentT)
    assert isinstance(make_noise("user_t3").distribution(0.0, 1.0), NoiseDistribution)


def test_noise_distribution_expand_and_validation():
    d = NoiseDistribution(make_noise("laplace"), torch.zeros(3), torch.ones(3))
    assert d.has_rsample
    e = d.expand((2, 3))
    assert e.batch_shape == (2, 3) and e.sample().shape == (2, 3)
    with pytest.raises(ValueError):
        NoiseDistribution(make_noise("laplace"), torch.zeros(3), -torch.ones(3), validate_args=True)
    no_sampler = pyro_ar.Noise(log_density=lambda e: -e.abs(), log_cdf=lambda x: x)
    assert not NoiseDistribution(no_sampler, 0.0, 1.0).has_rsample


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", LIBRARY_NOISES + ["user_t3"])
def test_log_cdf_finite_values_and_gradients(name, dtype):
    # |x| up to 2e3 (utility gaps of |psi| = 1e3); finite wherever the float64 value is
    # representable in dtype. Gumbel's -exp(-x) legitimately overflows for x < -log(max).
    noise = make_noise(name)
    x = torch.linspace(-2e3, 2e3, 4001, dtype=dtype)
    ref = noise.log_cdf(x.double())
    representable = ref.abs() < torch.finfo(dtype).max / 10
    x = x.requires_grad_()
    lp = noise.log_cdf(x)
    (grad,) = torch.autograd.grad(lp.sum(), x)
    assert torch.isfinite(lp[representable]).all() and torch.isfinite(grad[representable]).all()
    if name != "gumbel":
        assert representable.all()
    if name == "user_t3":
        return  # the user-defined t3 log CDF is not accurate in the float32 tail (cancellation)
    torch.testing.assert_close(lp[representable].double(), ref[representable],
                               rtol=10 * torch.finfo(dtype).eps, atol=10 * torch.finfo(dtype).eps)


@pytest.mark.parametrize("dtype", DTYPES)
def test_normal_log_cdf_gradient_accurate_in_far_lower_tail(dtype):
    # d/dx log Phi(x) = phi(x)/Phi(x) ~ -x - 1/x for x -> -inf (Mills ratio); torch's own
    # log_ndtr backward loses this in float32 (956 instead of 1000 at x = -1000)
    x = torch.tensor([-2000.0, -1000.0, -100.0, -30.0], dtype=dtype, requires_grad=True)
    (grad,) = torch.autograd.grad(get_noise("normal").log_cdf(x).sum(), x)
    xd = x.detach().double()
    expected = -xd - 1 / xd + 2 / xd**3
    torch.testing.assert_close(grad.double(), expected, rtol=1e-5, atol=0.0)


def test_get_noise_names_aliases_and_errors():
    assert set(NOISE_NAMES) == {"gumbel", "normal", "logistic", "laplace", "student_t"}
    assert isinstance(get_noise("softmax"), pyro_ar.noise.GumbelNoise)
    assert isinstance(get_noise("Probit"), pyro_ar.noise.NormalNoise)
    assert isinstance(get_noise("logistic"), pyro_ar.noise.LogisticNoise)
    assert isinstance(get_noise("laplace"), pyro_ar.LaplaceNoise)
    assert get_noise("student_t3").df == 3.0 and get_noise("StudentT2.5").df == 2.5
    assert get_noise("student_t", df=7).df == 7.0
    with pytest.raises(ValueError, match=r"needs its degrees of freedom"):
        get_noise("student_t")
    custom = make_noise("user_t3")
    assert get_noise(custom) is custom
    with pytest.raises(ValueError, match=r"unknown noise='cauchy'"):
        get_noise("cauchy")
    with pytest.raises(ValueError, match=r"noise must be a name .* got 3"):
        get_noise(3)


def test_custom_noise_argument_errors():
    with pytest.raises(ValueError, match=r"\['log_cdf'\].*log_cdf=None"):
        pyro_ar.Noise(log_density=lambda e: -e * e)
    with pytest.raises(ValueError, match=r"log_cdf must be callable, got 1\.0"):
        pyro_ar.Noise(log_density=lambda e: -e * e, log_cdf=1.0)
    with pytest.raises(NotImplementedError, match="without a `sample` function"):
        pyro_ar.Noise(log_density=lambda e: -e * e, log_cdf=lambda x: x).sample((2,))


def test_from_distribution():
    cauchy = pyro_ar.Noise.from_distribution(torch.distributions.Cauchy(0.0, 1.0))
    assert cauchy.name == "cauchy"
    x = torch.linspace(-20, 20, 41)
    torch.testing.assert_close(cauchy.log_cdf(x), torch.tensor(scipy.stats.cauchy.logcdf(x.numpy()),
                                                               dtype=torch.float32))
    assert cauchy.sample((5,), dtype=torch.float64).dtype == torch.float64
    with pytest.raises(ValueError, match=r"batch_shape=\(2,\)"):
        pyro_ar.Noise.from_distribution(torch.distributions.Cauchy(torch.zeros(2), 1.0))


def test_mode_hint_is_gumbel_mode():
    # the quadrature starts its mode search at the Gumbel integrand's exact mode log(1 + e^x)
    x = torch.tensor([-30.0, 0.0, 30.0], dtype=torch.float64)
    torch.testing.assert_close(get_noise("gumbel").mode_hint(x), torch.log1p(torch.exp(x)))
    assert math.isfinite(get_noise("normal").mode_hint(torch.tensor(1e6)).item())


# ---- generators ---------------------------------------------------------------------------

def _same_draws(noise, **kw):
    a = noise.sample((50,), dtype=torch.float64, generator=torch.Generator().manual_seed(3), **kw)
    b = noise.sample((50,), dtype=torch.float64, generator=torch.Generator().manual_seed(3), **kw)
    return torch.equal(a, b)


@pytest.mark.parametrize("name", ALL_NOISES)
def test_generator_reproducible_and_global_rng_untouched(name):
    noise = make_noise(name)
    state = torch.get_rng_state()
    assert _same_draws(noise)
    assert torch.equal(torch.get_rng_state(), state)
    a = noise.sample((50,), dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    b = noise.sample((50,), dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    assert not torch.equal(a, b)


def test_user_sample_with_and_without_generator_keyword():
    seen = {}

    def sample(shape, dtype, device, generator=None):
        seen["generator"] = generator
        return torch.randn(shape, dtype=dtype, device=device, generator=generator)

    noise = pyro_ar.Noise(log_density=lambda e: -e * e / 2 - 0.5 * math.log(2 * math.pi),
                          log_cdf=torch.special.log_ndtr, sample=sample)
    g = torch.Generator().manual_seed(0)
    noise.sample((3,), generator=g)
    assert seen["generator"] is g  # passed through
    # a sample function without the keyword: the global RNG is forked and seeded from g
    legacy = make_noise("user_t3")
    assert _same_draws(legacy)
    assert noise.sample((2,)).shape == (2,)  # no generator: the global RNG


# ---- Student-t and Laplace ----------------------------------------------------------------

@pytest.mark.parametrize("df", [0.5, 1.0, 2.5, 3.0, 30.0, 300.0])
def test_student_t_log_cdf_matches_scipy_far_in_both_tails(df):
    x = torch.cat([torch.linspace(-300, 300, 3001, dtype=torch.float64),
                   torch.tensor([-1e12, -1e6, 1e6, 1e12], dtype=torch.float64)])
    ref = scipy.stats.t(df).logcdf(x.numpy())
    ok = np.isfinite(ref)
    np.testing.assert_allclose(get_noise("student_t", df=df).log_cdf(x).numpy()[ok], ref[ok],
                               rtol=1e-11, atol=1e-300)


@pytest.mark.parametrize("dtype", DTYPES)
def test_student_t_gradients_and_second_derivatives(dtype):
    # d log Phi / dx = phi / Phi (analytic backward), itself differentiable (quadrature Newton)
    noise = get_noise("student_t3")
    x = torch.tensor([-1e4, -30.0, -1.0, 0.0, 2.0, 50.0], dtype=dtype, requires_grad=True)
    (g,) = torch.autograd.grad(noise.log_cdf(x).sum(), x, create_graph=True)
    xd = x.detach().double().numpy()
    ref = np.exp(scipy.stats.t(3).logpdf(xd) - scipy.stats.t(3).logcdf(xd))
    np.testing.assert_allclose(g.detach().double().numpy(), ref, rtol=10 * torch.finfo(dtype).eps ** 0.5)
    (h,) = torch.autograd.grad(g.sum(), x)
    assert torch.isfinite(h).all()
    # h = d/dx (phi/Phi) = (phi/Phi) (dlog phi/dx - phi/Phi), by finite differences in float64
    if dtype == torch.float64:
        xs = torch.tensor([-1.0, 2.0], dtype=dtype, requires_grad=True)
        gfun = lambda v: torch.autograd.grad(noise.log_cdf(v).sum(), v, create_graph=True)[0]
        (hs,) = torch.autograd.grad(gfun(xs).sum(), xs)
        eps = 1e-6
        fd = (gfun((xs.detach() + eps).requires_grad_()) - gfun((xs.detach() - eps).requires_grad_())) / (2 * eps)
        torch.testing.assert_close(hs, fd.detach(), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), float("nan"), "3", True])
def test_student_t_bad_df(bad):
    with pytest.raises(ValueError, match=r"df must be a positive finite number"):
        pyro_ar.StudentTNoise(bad)


def test_laplace_log_cdf_exact_in_both_tails():
    x = torch.tensor([-1e4, -5.0, 0.0, 5.0, 40.0], dtype=torch.float64)
    expected = torch.tensor([-1e4 - math.log(2), -5 - math.log(2), -math.log(2),
                             math.log1p(-0.5 * math.exp(-5)), math.log1p(-0.5 * math.exp(-40))],
                            dtype=torch.float64)
    torch.testing.assert_close(get_noise("laplace").log_cdf(x), expected, rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", LIBRARY_NOISES)
def test_library_noises_pickle(name):
    noise = make_noise(name)
    back = pickle.loads(pickle.dumps(noise))
    x = torch.linspace(-5, 5, 11, dtype=torch.float64)
    assert type(back) is type(noise) and back.name == noise.name
    torch.testing.assert_close(back.log_cdf(x), noise.log_cdf(x))


def test_check_noise_catches_a_wrong_noise():
    # a log_cdf that is not the integral of the density (a shifted normal) fails the contract
    wrong = pyro_ar.Noise(log_density=lambda e: -e * e / 2 - 0.5 * math.log(2 * math.pi),
                          log_cdf=lambda x: torch.special.log_ndtr(x - 0.1),
                          sample=lambda shape, dtype, device: torch.randn(shape, dtype=dtype, device=device))
    with pytest.raises(AssertionError, match="integral of the density"):
        check_noise(wrong)
    # draws from the wrong law fail the KS test
    biased = pyro_ar.Noise(log_density=lambda e: -e * e / 2 - 0.5 * math.log(2 * math.pi),
                           log_cdf=torch.special.log_ndtr,
                           sample=lambda shape, dtype, device: 1.1 * torch.randn(shape, dtype=dtype, device=device))
    with pytest.raises(AssertionError, match="KS statistic"):
        check_noise(biased)
    # 1 - F computed as log1p(-lower) in float32 rounds non-monotonically in the upper tail
    with pytest.raises(AssertionError, match="log_cdf decreases"):
        check_noise(make_noise("user_t3"), dtype=torch.float32)


# ---- the normal log CDF and inverse Mills ratio (noise.special.log_ndtr, normal_mills_ratio) ----
def _mills_reference(x):
    """r = phi/Phi and x + r in float64: from erfcx above -20 (x + r loses |x|^2 ulps there, below
    1e-12), and from the asymptotic series x + r = 1/t - 2/t^3 + 10/t^5 - 74/t^7 + 706/t^9, t = -x,
    below -100 (next term below 1e-19 relative)."""
    r = math.sqrt(2 / math.pi) / torch.special.erfcx(-x / math.sqrt(2))
    t = -x
    series = 1 / t - 2 / t**3 + 10 / t**5 - 74 / t**7 + 706 / t**9
    return torch.where(x < -100, t + series, r), torch.where(x < -100, series, x + r)


def test_log_ndtr_and_mills_ratio_match_float64_references():
    """log Phi against torch's float64 log_ndtr, r and x + r against erfcx / the asymptotic
    series, across the centre, both sides of the continued-fraction switch at -5, and both
    tails (relative error 1e-12; the numbers of numerics' docstring are below 1e-13)."""
    from pyro_ar.noise.special import _ndtr_parts, normal_mills_ratio

    x = torch.cat([torch.linspace(-20.0, 37.0, 5701, dtype=torch.float64),
                   torch.tensor([-5.0 - 1e-9, -5.0 + 1e-9, -150.0, -1e3, -1e6], dtype=torch.float64)])
    ref = torch.special.log_ndtr(x)
    normal = ref.abs() > 1e-290  # relative error is meaningless among denormals
    # (log_ndtr itself hands float64 to torch: the formulas, as float32 runs them, here)
    torch.testing.assert_close(_ndtr_parts(x, True)[0][normal], ref[normal], rtol=1e-12, atol=0.0)
    r, x_plus_r = normal_mills_ratio(x)
    r_ref, xr_ref = _mills_reference(x)
    keep = (x > -20.0) | (x < -100.0)
    torch.testing.assert_close(r[keep], r_ref[keep], rtol=1e-12, atol=1e-300)
    torch.testing.assert_close(x_plus_r[keep], xr_ref[keep], rtol=1e-11, atol=1e-300)


def test_normal_weighted_log_cdf_derivatives_equal_the_two_dot_products():
    """NormalNoise.weighted_log_cdf_derivatives (one product w r reused, in place without a
    graph) equals the generic two dot products of log_cdf_derivatives (relative 1e-12, float64):
    x and w of one shape (in place), w broadcast over a nodes dim (in place), w of a larger
    shape than x (not in place), and with a graph, whose gradients in x and w match too."""
    import pyro_ar as ar

    noise = ar.noise.NormalNoise()
    g = torch.Generator().manual_seed(0)
    x = 3.0 * torch.randn(6, 3, 9, generator=g, dtype=torch.float64) - 1.0  # some below -5
    w = torch.rand(6, 1, 9, generator=g, dtype=torch.float64)

    def generic(x, w):
        d1, d2 = noise.log_cdf_derivatives(x)
        return torch.linalg.vecdot(d1, w), torch.linalg.vecdot(d2, w)

    for xa, wa in ((x[:, 0], w[:, 0]), (x, w), (x[:, :1], w.expand(6, 3, 9))):
        for got, want in zip(noise.weighted_log_cdf_derivatives(xa.clone(), wa), generic(xa, wa)):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-300)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    got = noise.weighted_log_cdf_derivatives(xg, wg)
    grads = torch.autograd.grad(sum(t.sum() for t in got), (xg, wg))
    want = generic(xg, wg)
    grads0 = torch.autograd.grad(sum(t.sum() for t in want), (xg, wg))
    for a, b in zip(got + grads, want + grads0):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-300)


def test_log_ndtr_float32_matches_float64_and_handles_infinities():
    from pyro_ar.noise.special import log_ndtr, normal_mills_ratio

    x = torch.linspace(-60.0, 12.0, 2001, dtype=torch.float64)
    lp32, lp64 = log_ndtr(x.float()).double(), log_ndtr(x)
    ok = lp64.abs() > 1e-30  # float32 denormals
    torch.testing.assert_close(lp32[ok], lp64[ok], rtol=2e-5, atol=0.0)
    torch.testing.assert_close(normal_mills_ratio(x.float())[0].double(), normal_mills_ratio(x)[0],
                               rtol=2e-5, atol=1e-30)
    for dtype in DTYPES:
        edge = torch.tensor([-math.inf, math.inf, math.nan], dtype=dtype)
        assert log_ndtr(edge)[:2].tolist() == [-math.inf, 0.0] and math.isnan(log_ndtr(edge)[2])
        r, x_plus_r = normal_mills_ratio(edge)
        assert r[:2].tolist() == [math.inf, 0.0] and x_plus_r[0].item() == 0.0 and r[2].isnan()


def test_log_ndtr_first_and_second_derivatives():
    """gradcheck and gradgradcheck at float64 of the autograd Function that float32 runs (the
    quadrature's mode search differentiates log Phi twice), and of the Mills ratio's own
    derivative r' = -r (x + r)."""
    from pyro_ar.noise.special import _LogNdtr, normal_mills_ratio

    x = torch.tensor([-40.0, -6.0, -5.0 + 1e-3, -1.0, 0.0, 2.5, 9.0], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(_LogNdtr.apply, (x,))
    assert torch.autograd.gradgradcheck(_LogNdtr.apply, (x,))
    assert torch.autograd.gradcheck(lambda v: normal_mills_ratio(v), (x,))

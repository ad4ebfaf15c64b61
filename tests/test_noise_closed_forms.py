"""The noise owns its math: each closed form agrees with the generic default of ``Noise``.

The generic defaults are reached by rebuilding a library noise from its two primitives,
``Noise(log_density, log_cdf, sample)``: a user-built noise has no closed form, so every
method falls back to the base class (quadrature, bisection, autograd, Monte Carlo).
Tolerances come from each generic method's own error, stated per test.
"""

import math

import pytest
import torch

from pyro_ar import metrics
from pyro_ar.distributions import RelaxedUtilityCategorical, UtilityCategorical
from pyro_ar.noise import Noise, get_noise

FAMILIES = ["gumbel", "normal", "logistic", "laplace", "student_t3"]


def _generic(noise):
    """The same family with no closed forms: every method is the base class's default."""
    return Noise(log_density=noise.log_density, log_cdf=noise.log_cdf, sample=noise.sample,
                 name=f"generic_{noise.name}")


def _overrides(noise, method):
    return getattr(type(noise), method) is not getattr(Noise, method)


def test_only_gumbel_claims_closed_form():
    assert [n for n in FAMILIES if get_noise(n).closed_form] == ["gumbel"]
    assert not _generic(get_noise("gumbel")).closed_form


@pytest.mark.parametrize("name", [n for n in FAMILIES if _overrides(get_noise(n), "log_marginal")])
def test_log_marginal_closed_form_matches_quadrature(name):
    # The generic default is the sinh-sinh quadrature, within 1e-14 of log-softmax in
    # float64 (quadrature.py's docstring): 1e-10 absolute leaves room for K and scale.
    noise = get_noise(name)
    g = torch.Generator().manual_seed(0)
    psi = 3.0 * torch.randn(6, 9, generator=g, dtype=torch.float64)
    y = torch.randint(9, (6,), generator=g)
    generic = _generic(noise)
    torch.testing.assert_close(noise.log_marginal(psi, y), generic.log_marginal(psi, y),
                               rtol=0, atol=1e-10)
    torch.testing.assert_close(noise.log_marginal_all(psi), generic.log_marginal_all(psi),
                               rtol=0, atol=1e-10)
    # broadcast labels (2, 1) against the batch (6,) take the same closed form
    yy = torch.tensor([[0], [8]])
    torch.testing.assert_close(noise.log_marginal(psi, yy), generic.log_marginal(psi, yy),
                               rtol=0, atol=1e-10)


@pytest.mark.parametrize("name", FAMILIES)
def test_icdf_closed_form_matches_bisection(name):
    # The generic icdf bisects log Phi to float64 resolution (128 halvings of a bracket of
    # width <= 2^64); the closed forms are exact up to rounding: 1e-9 absolute covers both
    # at |quantile| <= 30 (u in [1e-12, 1 - 1e-12]).
    noise = get_noise(name)
    u = torch.cat([torch.tensor([1e-12, 1e-6, 0.5, 1 - 1e-6, 1 - 1e-12], dtype=torch.float64),
                   torch.rand(200, generator=torch.Generator().manual_seed(1), dtype=torch.float64)])
    u = u.clamp(1e-12, 1 - 1e-12)
    x = _generic(noise).icdf(u)
    torch.testing.assert_close(noise.log_cdf(x).exp(), u, rtol=1e-9, atol=0)  # the root itself
    if _overrides(noise, "icdf"):
        torch.testing.assert_close(noise.icdf(u), x, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("name", FAMILIES)
def test_derivatives_closed_form_match_autograd(name):
    # autograd is exact up to rounding: float64 agreement to 1e-9 relative
    noise = get_noise(name)
    x = torch.linspace(-8, 8, 41, dtype=torch.float64)
    x = x[x != 0]  # (Laplace's kink)
    generic = _generic(noise)
    for method in ("log_density_derivatives", "log_cdf_derivatives"):
        got, ref = getattr(noise, method)(x), getattr(generic, method)(x)
        for a, b in zip(got, ref):
            torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


def test_relaxed_density_has_no_generic_default():
    psi, tau = torch.zeros(2, 3), torch.tensor(0.5)
    d = RelaxedUtilityCategorical(psi, _generic(get_noise("gumbel")), tau)
    with pytest.raises(NotImplementedError, match="closed form only for Gumbel"):
        d.log_prob(d.rsample())
    # the Gumbel closed form is the Concrete density: it integrates to one over the
    # 2-simplex (x, 1 - x); trapezoid on 20001 points, error ~1e-6 at tau = 1
    two = RelaxedUtilityCategorical(torch.tensor([0.3, -0.2], dtype=torch.float64), "gumbel",
                                    torch.tensor(1.0, dtype=torch.float64))
    t = torch.linspace(1e-9, 1 - 1e-9, 20001, dtype=torch.float64)
    dens = two.log_prob(torch.stack([t, 1 - t], -1)).exp()
    # (a density on the simplex w.r.t. the first coordinate)
    assert abs(torch.trapezoid(dens, t).item() - 1.0) < 1e-4


def test_utility_categorical_and_evaluation_use_the_noise():
    g = torch.Generator().manual_seed(2)
    psi = torch.randn(4, 6, generator=g, dtype=torch.float64)
    y = torch.randint(6, (4,), generator=g)
    gumbel = get_noise("gumbel")
    closed = UtilityCategorical(psi, gumbel).log_prob(y)
    generic = UtilityCategorical(psi, _generic(gumbel)).log_prob(y)
    torch.testing.assert_close(closed, generic, rtol=0, atol=1e-10)
    from pyro_ar.evaluation import log_likelihood

    torch.testing.assert_close(log_likelihood(psi, y, gumbel, reduce="none"),
                               log_likelihood(psi, y, _generic(gumbel), reduce="none"), rtol=0, atol=1e-10)


def test_closed_form_ar_bound_matches_monte_carlo():
    # metrics.bound("ar"): closed form for Gumbel at q = Gumbel(log eta, 1); the generic
    # path estimates the same ELBO by Monte Carlo and returns its standard error: the two
    # agree within 4 standard errors (fixed seed).
    g = torch.Generator().manual_seed(3)
    psi = torch.randn(50, 8, generator=g, dtype=torch.float64)
    y = torch.randint(8, (50,), generator=g)
    log_eta = torch.randn(50, generator=g, dtype=torch.float64) + 1.0
    closed = metrics.bound(psi, y, "ar", "gumbel", log_eta=log_eta)["mean"]
    mc = metrics.bound(psi, y, "ar", _generic(get_noise("gumbel")), loc=log_eta,
                       scale=torch.ones(50, dtype=torch.float64), num_samples=400, seed=0)
    assert mc["se"] > 0
    assert abs(mc["mean"] - closed) < 4 * mc["se"], (closed, mc)
    assert math.isfinite(closed)

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
from pyro_ar.noise import GumbelNoise, Noise, NormalNoise, get_noise
from pyro_ar.testing import check_closed_forms

FAMILIES = ["gumbel", "normal", "logistic", "laplace", "student_t3"]


def _generic(noise):
    """The same family with no closed forms: every method is the base class's default."""
    return Noise(log_density=noise.log_density, log_cdf=noise.log_cdf, sample=noise.sample,
                 name=f"generic_{noise.name}")


def test_only_gumbel_claims_closed_form():
    assert [n for n in FAMILIES if get_noise(n).closed_form] == ["gumbel"]
    assert not _generic(get_noise("gumbel")).closed_form


@pytest.mark.parametrize("name", FAMILIES)
def test_closed_forms_match_the_generic_defaults(name):
    # pyro_ar.testing.check_closed_forms: every overridden method against the base class's
    # default (quadrature to 1e-8, bisection and autograd to 1e-9; see its docstring)
    check_closed_forms(get_noise(name))


def test_a_wrong_closed_form_is_caught():
    class BadNormal(NormalNoise):
        def icdf(self, u):
            return super().icdf(u) * 1.001

    class BadGumbel(GumbelNoise):
        def log_marginal_all(self, utility, num_nodes=257):
            return (utility / 1.01).log_softmax(-1)

    for bad, method in ((BadNormal(), "icdf"), (BadGumbel(), "log_marginal_all")):
        with pytest.raises(AssertionError, match=method):
            check_closed_forms(bad)


@pytest.mark.parametrize("name", FAMILIES)
def test_generic_icdf_inverts_the_cdf(name):
    # bisection to float64 resolution: Phi(icdf(u)) = u to 1e-9 relative
    noise = get_noise(name)
    u = torch.tensor([1e-12, 1e-6, 0.3, 0.5, 1 - 1e-6, 1 - 1e-12], dtype=torch.float64)
    x = _generic(noise).icdf(u)
    torch.testing.assert_close(noise.log_cdf(x).exp(), u, rtol=1e-9, atol=0)


def test_broadcast_labels_take_the_closed_form():
    psi = torch.randn(6, 9, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    yy = torch.tensor([[0], [8]])
    gumbel = get_noise("gumbel")
    torch.testing.assert_close(gumbel.log_marginal(psi, yy), _generic(gumbel).log_marginal(psi, yy),
                               rtol=0, atol=1e-10)


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

"""Analytic bounds (pyro_ar.distributions.analytic_bounds): Jaakkola-Jordan quadratic bounds,
JaakkolaJordanBernoulli, Bouchard's normaliser bound and its optimal a.

Expectations under Gaussians are computed by 120-node Gauss-Hermite quadrature (error far
below the tolerances used); Monte Carlo comparisons accept within 4 standard errors.
"""

import math

import pytest
import torch
from scipy.optimize import minimize_scalar

import pyro
import pyro.distributions as dist
from pyro.infer import SVI, Trace_ELBO
from pyro.optim import Adam

from pyro_ar.distributions import (
    JaakkolaJordanBernoulli,
    bouchard_log_normalizer_bound,
    jaakkola_jordan_lambda,
    jaakkola_jordan_log_sigmoid_bound,
    jaakkola_jordan_softplus_bound,
    optimal_bouchard_a,
)

from tests.distributions.test_baselines import D64, gauss_expect, log_sigmoid, softplus


def test_optimal_bouchard_a_matches_scipy_and_is_stationary():
    g = torch.Generator().manual_seed(3)
    psi = torch.randn(20, 40, dtype=D64, generator=g) * torch.linspace(0.1, 15, 20, dtype=D64).unsqueeze(-1)
    var = torch.rand(20, 40, dtype=D64, generator=g) * 3
    for v in (None, var):
        a = optimal_bouchard_a(psi, v)
        assert a.shape == (20,) and not a.requires_grad
        for i in range(20):
            f = lambda t: bouchard_log_normalizer_bound(psi[i], torch.tensor(t, dtype=D64),
                                                        None if v is None else v[i]).item()
            c = psi[i].max().item()
            res = minimize_scalar(f, bounds=(c - 50, c + 100), method="bounded",
                                  options={"xatol": 1e-10})
            assert f(a[i].item()) <= res.fun + 1e-12
            assert abs(a[i].item() - res.x) < 1e-4
        # F'(a) = 0 at the optimum (autograd derivative of the bound)
        at = a.clone().requires_grad_()
        bouchard_log_normalizer_bound(psi, at, v).sum().backward()
        assert at.grad.abs().max() < 1e-10


def test_optimal_bouchard_a_edge_cases():
    psi = torch.tensor([[0.0, 0.0], [100.0, -100.0], [0.0, -1e3], [5.0, 5.0], [-700.0, 700.0]], dtype=D64)
    for v in (None, torch.zeros_like(psi), torch.full_like(psi, 1e4)):
        a = optimal_bouchard_a(psi, v)
        assert torch.isfinite(a).all()
        at = a.clone().requires_grad_()
        bouchard_log_normalizer_bound(psi, at, v).sum().backward()
        assert at.grad.abs().max() < 1e-10
    # all classes equal: a* = c + log(K - 1)
    psi = torch.full((3, 10), 2.0, dtype=D64)
    assert torch.allclose(optimal_bouchard_a(psi), torch.full((3,), 2 + math.log(9), dtype=D64))
    # float32 works too
    a32 = optimal_bouchard_a(torch.randn(5, 30) * 5)
    assert a32.dtype == torch.float32 and torch.isfinite(a32).all()


def test_jaakkola_jordan_softplus_bound_holds_and_is_tight_at_plus_minus_xi():
    t = torch.linspace(-30, 30, 601, dtype=D64).unsqueeze(-1)
    xi = torch.cat([torch.linspace(-20, 20, 201, dtype=D64), torch.tensor([0.0, 1e-5, -1e-5], dtype=D64)])
    bound = jaakkola_jordan_softplus_bound(t, 0.0, xi)
    assert (softplus(t) <= bound + 1e-12).all()
    for x in xi:
        for s in (1.0, -1.0):
            tt = (s * x).reshape(1)
            assert torch.allclose(jaakkola_jordan_softplus_bound(tt, 0.0, x), softplus(tt), rtol=0, atol=1e-12)
    # lambda(xi) = tanh(xi/2)/(4 xi), even, 1/8 at 0
    lam = jaakkola_jordan_lambda(xi)
    assert torch.allclose(lam, jaakkola_jordan_lambda(-xi))
    nz = xi.abs() > 1e-3
    assert torch.allclose(lam[nz], torch.tanh(xi[nz] / 2) / (4 * xi[nz]), rtol=1e-14)
    assert abs(jaakkola_jordan_lambda(torch.tensor(0.0, dtype=D64)).item() - 0.125) < 1e-15


def test_jaakkola_jordan_softplus_bound_gaussian_any_xi():
    g = torch.Generator().manual_seed(4)
    m = torch.randn(300, dtype=D64, generator=g) * 6
    v = torch.rand(300, dtype=D64, generator=g) * 9
    expected = gauss_expect(softplus, m, v)  # GH error <= 3e-11 here (vs adaptive quadrature)
    best = jaakkola_jordan_softplus_bound(m, v)
    assert (expected <= best + 1e-9).all()
    for _ in range(20):
        xi = torch.randn(300, dtype=D64, generator=g) * 8
        at_xi = jaakkola_jordan_softplus_bound(m, v, xi)
        assert (expected <= at_xi + 1e-9).all()
        assert (best <= at_xi + 1e-12).all()  # xi* = sqrt(m^2 + v) is optimal
    # v = 0 at the optimum: exactly softplus(m)
    assert torch.allclose(jaakkola_jordan_softplus_bound(m, 0.0), softplus(m), rtol=0, atol=1e-12)


def test_jaakkola_jordan_bernoulli_lower_bound():
    g = torch.Generator().manual_seed(5)
    m = torch.randn(300, dtype=D64, generator=g) * 6
    v = torch.rand(300, dtype=D64, generator=g) * 9
    y = torch.randint(0, 2, (300,), generator=g).to(D64)
    s = 2 * y - 1
    expected = gauss_expect(lambda t: log_sigmoid(s.unsqueeze(-1) * t), m, v)
    best = JaakkolaJordanBernoulli(m, v).log_prob(y)
    assert (best <= expected + 1e-9).all()
    for _ in range(20):
        xi = torch.randn(300, dtype=D64, generator=g) * 8
        at_xi = JaakkolaJordanBernoulli(m, v, xi).log_prob(y)
        assert (at_xi <= expected + 1e-9).all()
        assert (at_xi <= best + 1e-12).all()
        # the formula: log sigma(xi) + (s m - xi)/2 - lambda(xi)(m^2 + v - xi^2)
        ref = log_sigmoid(xi) + (s * m - xi) / 2 - torch.tanh(xi / 2) / (4 * xi) * (m ** 2 + v - xi ** 2)
        assert torch.allclose(at_xi, ref, rtol=1e-12, atol=1e-12)
    # point logits: tight at xi = +-t, so the default (xi = |m|) is exact
    exact = log_sigmoid(s * m)
    assert torch.allclose(JaakkolaJordanBernoulli(m).log_prob(y), exact, rtol=0, atol=1e-12)
    assert torch.allclose(JaakkolaJordanBernoulli(m, 0.0, -m).log_prob(y), exact, rtol=0, atol=1e-12)
    assert torch.allclose(jaakkola_jordan_log_sigmoid_bound(s * m, v), best, rtol=0, atol=1e-12)


def test_jaakkola_jordan_bernoulli_contract():
    d = JaakkolaJordanBernoulli(torch.randn(2, 1), torch.rand(3))
    assert d.batch_shape == (2, 3)
    y = torch.tensor([0.0, 1.0, 1.0])
    assert d.log_prob(y).shape == (2, 3)
    assert (d.log_prob(y) <= 0).all()
    assert d.expand((4, 2, 3)).log_prob(y).shape == (4, 2, 3)
    with pytest.raises(ValueError, match="binary"):
        d.log_prob(torch.tensor([0.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match=">= 0"):
        JaakkolaJordanBernoulli(torch.zeros(3), -torch.ones(3))
    with pytest.raises(NotImplementedError, match="Bernoulli"):
        d.sample()


def test_pyro_bayesian_logistic_regression_jj():
    """JJ-bound ELBO of Bayesian logistic regression (seeds/002 §2) under stock SVI."""
    pyro.clear_param_store()
    torch.manual_seed(18)
    N, D = 100, 3
    x = torch.randn(N, D)
    y = torch.bernoulli(torch.sigmoid(x @ torch.tensor([2.0, -1.0, 0.5])))

    def model(x, y):
        loc = pyro.param("loc", torch.zeros(D))
        scale = pyro.param("scale", 0.5 * torch.ones(D), constraint=dist.constraints.positive)
        with pyro.plate("data", N):
            pyro.sample("y", JaakkolaJordanBernoulli(x @ loc, (x ** 2) @ scale ** 2), obs=y)

    def guide(x, y):
        pass

    with pyro.validation_enabled(True):
        svi = SVI(model, guide, Adam({"lr": 0.05}), Trace_ELBO())
        for _ in range(200):
            svi.step(x, y)
    loc = pyro.param("loc").detach()
    assert loc[0] > 0.5 and loc[1] < -0.2  # recovers the signs of the teacher

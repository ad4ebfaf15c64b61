"""GaussianExpectedFactor / GumbelQExpectedFactor: the A&R factor's expectation under a Gaussian
(Gumbel) q by its Gauss rule (issue 27: the Monte Carlo draw of eps it replaces doubled the probit gradient's
variance). Statistical checks use fixed seeds, tolerances of 4 standard errors."""

import math

import pytest
import torch

import pyro_ar as ar
from pyro_ar.distributions import GaussianExpectedFactor, GumbelQExpectedFactor
from pyro_ar.distributions.expected_factor import DEFAULT_GAUSSIAN_NODES
from pyro_ar.negatives import Negatives, get_negative_sampler
from pyro_ar.quadrature import gauss_hermite

D64 = torch.float64


#: q's family: (the factor under it, a reparameterised draw of q from standard normals / uniforms)
Q_FAMILIES = {
    "gaussian": (GaussianExpectedFactor, lambda m, s, shape, g: m + s * torch.randn(shape, dtype=D64, generator=g)),
    "gumbel": (GumbelQExpectedFactor,
               lambda m, s, shape, g: m - s * torch.log(-torch.log(torch.rand(shape, dtype=D64, generator=g)))),
}


@pytest.mark.parametrize("family", sorted(Q_FAMILIES))
@pytest.mark.parametrize("noise", ["normal", "logistic", "student_t3"])
def test_matches_the_monte_carlo_mean_of_the_factor(noise, family):
    """E_q[sum_j a_j log Phi(eps + d_j)] with eps ~ N(m, s^2) or Gumbel(m, s), the same fixed
    negatives: the quadrature agrees with the mean of 200,000 draws within 4 standard errors
    (20,000 for Student-t: its log CDF is a continued fraction iterated until the slowest of all
    the draws converges, 25x the cost of 20,000 at 10x the draws; the standard error derived
    from those draws, 0.14 nats at most here against 0.04 with 200,000, sets the tolerance)."""
    factor, draw = Q_FAMILIES[family]
    g = torch.Generator().manual_seed(1)
    B, K = 5, 40
    psi = 2 * torch.randn(B, K, dtype=D64, generator=g)
    y = torch.randint(0, K, (B,), generator=g)
    idx = torch.randint(0, K, (B, 7), generator=g)
    neg = Negatives(idx, (idx != y.unsqueeze(-1)).to(D64) * (K - 1) / 7, shared=False)
    m, s = torch.randn(B, dtype=D64, generator=g), 0.2 + torch.rand(B, dtype=D64, generator=g)
    exact = factor(ar.AugmentedCategorical(psi, torch.zeros(B, dtype=D64), noise, negatives=neg), m, s).log_prob(y)
    eps = draw(m, s, (20_000 if noise.startswith("student_t") else 200_000, B), g)
    draws = ar.AugmentedCategorical(psi, eps, noise, negatives=neg).log_prob(y)
    se = draws.std(0) / math.sqrt(draws.shape[0])
    assert ((exact - draws.mean(0)).abs() <= 4 * se + 1e-9).all(), (exact, draws.mean(0), se)


@pytest.mark.parametrize("noise, tol", [("normal", 2e-6), ("logistic", 1e-6)])
def test_default_rule_error_per_term(noise, tol):
    """The documented accuracy of DEFAULT_GAUSSIAN_NODES against a 128-node rule."""
    g = torch.Generator().manual_seed(0)
    n = 5000
    m, s = 3 * torch.randn(n, dtype=D64, generator=g), 0.05 + 1.5 * torch.rand(n, dtype=D64, generator=g)
    d = 6 * torch.randn(n, dtype=D64, generator=g)
    nz = ar.noise.get_noise(noise)

    def expect(nodes):
        z, w = gauss_hermite(nodes, m)
        return (nz.log_cdf(m[:, None] + s[:, None] * z + d[:, None]) * w).sum(-1)
    assert (expect(DEFAULT_GAUSSIAN_NODES) - expect(128)).abs().max() < tol


def test_dropped_terms_give_finite_gradients():
    """The label's own column (weight 0) at an extreme difference must not turn gradients NaN."""
    psi = torch.tensor([[60.0, 0.0, -60.0]], dtype=D64, requires_grad=True)
    neg = Negatives(torch.tensor([[0, 1, 2]]), torch.tensor([[0.0, 1.0, 1.0]], dtype=D64), shared=False)
    loc, scale = torch.zeros(1, dtype=D64, requires_grad=True), torch.ones(1, dtype=D64, requires_grad=True)
    base = ar.AugmentedCategorical(psi, torch.zeros(1, dtype=D64), "normal", negatives=neg)
    lp = GaussianExpectedFactor(base, loc, scale).log_prob(torch.tensor([2]))
    grads = torch.autograd.grad(lp.sum(), [psi, loc, scale])
    assert torch.isfinite(lp).all() and all(torch.isfinite(gr).all() for gr in grads)


def test_named_errors():
    base = ar.AugmentedCategorical(torch.zeros(2, 3), torch.zeros(2), "normal")
    with pytest.raises(ValueError, match="base must be an AugmentedCategorical"):
        GaussianExpectedFactor(torch.zeros(2, 3), torch.zeros(2), torch.ones(2))
    with pytest.raises(ValueError, match="num_nodes"):
        GaussianExpectedFactor(base, torch.zeros(2), torch.ones(2), num_nodes=0)
    with pytest.raises(ValueError, match="num_nodes"):
        gauss_hermite(0, torch.zeros(()))
    with pytest.raises(ValueError, match="num_nodes must be at most 20"):  # at construction, not at the first step
        GumbelQExpectedFactor(base, torch.zeros(2), torch.ones(2), num_nodes=24)


@pytest.mark.parametrize("strategy", ["shared", "importance", "per_datapoint"])
def test_local_first_bound_at_a_first_visit_is_the_sampled_softmax(strategy):
    """The A&R softmax bound with the natural step first at rho = 1 (a datapoint's first
    visit: eta = 1 + S_hat, from the same class subsample) is -log(1 + S_hat): the sampled
    softmax's log_prob, value and gradient (eta is held fixed in the gradient, the envelope
    theorem makes that the full one). So on data visited about once (a neural LM's contexts
    in its first epoch) the two methods take the same step (issue 37's diagnosis)."""
    from pyro_ar.distributions import AugmentedCategorical, GumbelExpectedFactor, SampledSoftmax
    from pyro_ar.distributions.expected_factor import optimal_log_eta

    K, B = 40, 7
    g = torch.Generator().manual_seed(3)
    psi = (2 * torch.randn(B, K, dtype=D64, generator=g)).requires_grad_()
    y = torch.randint(K, (B,), generator=g)
    proposal = torch.rand(K, dtype=D64, generator=g) + 0.1
    kwargs = dict(negatives=get_negative_sampler(strategy, 6, proposal if strategy == "importance" else None))
    torch.manual_seed(1)  # the same class subsample for both
    base = AugmentedCategorical(psi, torch.zeros(B, dtype=D64), "gumbel", **kwargs)
    factor = GumbelExpectedFactor(base, torch.zeros(B, dtype=D64), local_step=lambda target: target)
    log_factor = factor.log_prob(y)
    log_eta = factor.updated_log_eta
    bound = 1 - log_eta - torch.exp(-log_eta) + log_factor  # -KL(Gumbel(log eta, 1) || Gumbel(0, 1)) + factor
    (grad_ar,) = torch.autograd.grad(bound.sum(), psi)
    torch.manual_seed(1)
    sampled = SampledSoftmax(psi, **kwargs).log_prob(y)
    (grad_sampled,) = torch.autograd.grad(sampled.sum(), psi)
    torch.testing.assert_close(log_eta, optimal_log_eta(factor.last_log_s))
    # (to float32 rounding: the samplers keep the weights a_j in float32 and the two paths take
    # log a_j at different precisions)
    torch.testing.assert_close(bound, sampled, rtol=1e-6, atol=1e-12)
    torch.testing.assert_close(grad_ar, grad_sampled, rtol=1e-6, atol=1e-12)
    assert grad_ar.abs().sum() > 0

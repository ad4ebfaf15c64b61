"""Tests of the Bayesian output layers with analytic bounds (seeds/002 section 2):
GaussianUtility, JaakkolaJordan, GaussianBouchard, LocalReparameterization and
NeuralClassifier(weights="gaussian")."""

import math

import numpy as np
import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.likelihoods import (DataSubsample, GaussianBouchard, GaussianUtility, JaakkolaJordan,
                                 LocalReparameterization)
from pyro_ar.models import GaussianWeights, NeuralClassifier
from pyro_ar.optim import lazy_adam

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")

D64 = torch.float64


def _factor(likelihood, utility, y, size=None):
    """The per-datapoint log factor a likelihood emits for labels y."""
    tr = poutine.trace(likelihood.sample).get_trace("y", utility, y, DataSubsample(None, size or len(y)))
    tr.compute_log_prob()
    return tr.nodes["y"]["log_prob"]


def _gaussian(B, K, seed):
    g = torch.Generator().manual_seed(seed)
    m = 2 * torch.randn(B, K, generator=g, dtype=D64)
    v = torch.rand(B, K, generator=g, dtype=D64) * 3
    return m, v


def test_jaakkola_jordan_is_below_the_exact_expected_log_likelihood():
    """E_q log sigma(+-t), t ~ N(m1 - m0, v0 + v1), by 80-node Gauss-Hermite (exact to ~1e-12
    for this smooth integrand): the analytic bound is below it, and equal for v = 0."""
    m, v = _gaussian(200, 2, 0)
    y = torch.randint(0, 2, (200,))
    bound = _factor(JaakkolaJordan(), GaussianUtility(m, v), y)
    t_mean, t_var = m[:, 1] - m[:, 0], v.sum(-1)
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    t = t_mean[:, None] + t_var.sqrt()[:, None] * torch.tensor(nodes)
    sign = (2 * y - 1).to(D64)[:, None]
    exact = (torch.nn.functional.logsigmoid(sign * t) * torch.tensor(weights)).sum(-1) / math.sqrt(2 * math.pi)
    assert (bound <= exact + 1e-10).all() and (exact - bound).max() > 1e-3
    point = _factor(JaakkolaJordan(), m, y)  # point utilities: the exact logistic likelihood
    assert torch.allclose(point, torch.nn.functional.logsigmoid((2 * y - 1) * t_mean))


@pytest.mark.parametrize("a", ["local", "optimal"])
def test_gaussian_bouchard_is_below_the_exact_expected_log_softmax(a):
    """With all classes the bound is deterministic; E_q log softmax(psi)_y is estimated with
    10000 Monte Carlo draws, and the bound lies below it by more than 4 standard errors."""
    B, K, n = 20, 6, 10000
    m, v = _gaussian(B, K, 1)
    y = torch.randint(0, K, (B,))
    bound = _factor(GaussianBouchard(a=a), GaussianUtility(m, v), y)
    psi = m + v.sqrt() * torch.randn(n, B, K, dtype=D64)
    lp = psi.log_softmax(-1).gather(-1, y.expand(n, B).unsqueeze(-1)).squeeze(-1)
    mc, se = lp.mean(0), lp.std(0) / math.sqrt(n)
    assert (bound < mc - 4 * se).all()
    point = _factor(GaussianBouchard(a=a), m, y)  # point utilities: Bouchard's bound on log softmax
    assert (point <= m.log_softmax(-1).gather(-1, y[:, None]).squeeze(-1) + 1e-10).all()


def test_local_reparameterization_is_unbiased_for_the_expected_log_likelihood():
    """The mean of 1000 LRT factors matches E_q log p(y | t) (Gauss-Hermite) within 4.5 SE."""
    m, v = _gaussian(5, 2, 2)
    y = torch.tensor([0, 1, 1, 0, 1])
    lik = LocalReparameterization()
    draws = torch.stack([_factor(lik, GaussianUtility(m, v), y) for _ in range(1000)])
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    t = (m[:, 1] - m[:, 0])[:, None] + v.sum(-1).sqrt()[:, None] * torch.tensor(nodes)
    exact = (torch.nn.functional.logsigmoid((2 * y - 1).to(D64)[:, None] * t)
             * torch.tensor(weights)).sum(-1) / math.sqrt(2 * math.pi)
    assert ((draws.mean(0) - exact).abs() < 4.5 * draws.std(0) / math.sqrt(1000)).all()


def _model(likelihood, K, prior_scale=None, **kw):
    return NeuralClassifier(torch.nn.Identity(), 4, K, likelihood=likelihood,
                            weights=GaussianWeights(prior_scale=prior_scale), **kw)


def test_the_analytic_elbo_is_below_the_monte_carlo_elbo_of_the_same_posterior():
    """Same q (the initial one: posterior sds 1 under a prior of sd 10; full batch, all
    classes): -loss of JJ / Bouchard (analytic) is below the exact ELBO, estimated by the
    mean of 100 LRT losses (margin 4 standard errors)."""
    for K, analytic in ((2, JaakkolaJordan()), (5, GaussianBouchard(a="optimal"))):
        pyro.clear_param_store()
        d = make_linear_teacher(100, 4, K, seed=0)

        def lik_elbo(lik):
            trace = poutine.trace(_model(lik, K, prior_scale=10.0)).get_trace(d.x, d.y)
            return trace.log_prob_sum().item()
        bound = lik_elbo(analytic)
        mc = np.array([lik_elbo(LocalReparameterization()) for _ in range(100)])
        assert bound < mc.mean() - 4 * mc.std() / 10


def test_kl_factor_is_the_closed_form_kl_and_its_class_subsample_is_unbiased():
    K = 30
    model = _model(GaussianBouchard(negatives=5), K, prior_scale=0.7)
    d = make_linear_teacher(50, 4, K, seed=0)
    poutine.trace(model).get_trace(d.x, d.y)
    params = {n: pyro.param(n).detach() for n in model.parameter_shapes()}
    params["weight"] = params["weight"] + torch.randn(K, 4)  # rows that differ
    sd_w = torch.nn.functional.softplus(params["weight_scale_unconstrained"])
    sd_b = torch.nn.functional.softplus(params["bias_scale_unconstrained"])
    prior = torch.distributions.Normal(0.0, 0.7)
    exact = (torch.distributions.kl_divergence(torch.distributions.Normal(params["weight"], sd_w), prior).sum()
             + torch.distributions.kl_divergence(torch.distributions.Normal(params["bias"], sd_b), prior).sum())
    model.num_prior_classes = K
    assert torch.allclose(model.kl_estimate(params), exact, rtol=1e-5)
    model.num_prior_classes = 5  # unbiased over subsamples: 1000 draws, 4.5 standard errors
    draws = torch.stack([model.kl_estimate(params) for _ in range(1000)])
    assert (draws.mean() - exact).abs() < 4.5 * draws.std() / math.sqrt(1000)


def test_gaussian_output_layer_is_lazy_and_trains_like_lrt():
    """JJ-SGD and LRT reach the same held-in log-likelihood (within 0.02 nats) from the
    same start; the Bouchard layer's scale gradient touches only the rows of one step."""
    d = make_linear_teacher(400, 4, 2, seed=0)
    results = []
    for lik in (JaakkolaJordan(), LocalReparameterization()):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = _model(lik, 2, subsample_size=100)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.1}), default_elbo())
        losses = [svi.step(d.x, d.y) for _ in range(60)]
        assert all(map(math.isfinite, losses))
        results.append(model.evaluate(d.x, d.y, metrics=("log_lik",))["log_lik"])
    assert abs(results[0] - results[1]) < 0.02
    pyro.clear_param_store()
    K = 200
    model = _model(GaussianBouchard(negatives=5), K, subsample_size=8, sparse=True)
    d = make_linear_teacher(100, 4, K, seed=0)
    (-poutine.trace(model).get_trace(d.x, d.y).log_prob_sum()).backward()
    grad = pyro.param("weight_scale_unconstrained").grad
    assert grad.is_sparse and torch.unique(grad.coalesce().indices()[0]).numel() <= 8 + 8 * 5 + 5


def test_bad_configurations_are_named():
    with pytest.raises(ValueError, match="needs num_classes=2"):
        _model(JaakkolaJordan(), 3)
    with pytest.raises(ValueError, match="weights='gaussian' needs a likelihood of Gaussian utilities"):
        _model("exact", 3)
    with pytest.raises(ValueError, match="base must be a Likelihood"):
        LocalReparameterization("exact")
    with pytest.raises(ValueError, match="var is over 3 classes"):
        GaussianUtility(torch.zeros(2, 4), torch.zeros(2, 3))

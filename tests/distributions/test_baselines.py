"""Property tests of pyro_ar.distributions.baselines: the baselines A&R is compared against
(the Jaakkola-Jordan / Bouchard functions are in test_analytic_bounds.py).

* every bound computed without subsampling lies below the exact log-likelihood;
* the subsampled OVE / Bouchard estimates are unbiased for their full sums;
* the sampled softmax (Botev) is exact without subsampling and biased with it;
* shapes, expand, validation, LinearUtility (sparse gradients), dtypes, devices, Pyro.

Statistical tests use fixed seeds; a mean of R independent draws is compared with its
target within 4 standard errors (SE = sample sd / sqrt(R)), a two-sided 6e-5 false
alarm rate per comparison.
"""

import math

import numpy as np
import pytest
import torch

import pyro
from pyro.infer import SVI, Trace_ELBO
from pyro.optim import Adam

import pyro_ar
from pyro_ar.distributions import (
    BouchardBound,
    JaakkolaJordanBernoulli,
    OVECategorical,
    SampledSoftmax,
    UtilityCategorical,
    jaakkola_jordan_lambda,
    jaakkola_jordan_softplus_bound,
    optimal_bouchard_a,
)
from pyro_ar.negatives import Negatives, get_negative_sampler
from pyro_ar.utility import LinearUtility

D64 = torch.float64
#: the class-sum baselines by their likelihood name (pyro_ar.likelihoods.get_likelihood)
BY_NAME = {"ove": OVECategorical, "sampled": SampledSoftmax, "bouchard": BouchardBound}
STRATEGIES = ["per_datapoint", "shared", "importance"]
DEVICES = [
    "cpu",
    pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")),
]
SUBSAMPLED = [OVECategorical, SampledSoftmax, BouchardBound]
ALL = [OVECategorical, SampledSoftmax, BouchardBound]

# Gauss-Hermite (probabilists') nodes: E f(t), t ~ N(m, v)  =  sum_i w_i f(m + sqrt(v) z_i) / sqrt(2 pi)
_GH_Z, _GH_W = np.polynomial.hermite_e.hermegauss(120)
GH_Z = torch.tensor(_GH_Z, dtype=D64)
GH_W = torch.tensor(_GH_W / math.sqrt(2 * math.pi), dtype=D64)


def gauss_expect(f, m, v):
    """E f(t) for t ~ N(m, v), elementwise, by 120-node Gauss-Hermite quadrature."""
    t = m.unsqueeze(-1) + v.sqrt().unsqueeze(-1) * GH_Z
    return (f(t) * GH_W).sum(-1)


def softplus(t):
    """log(1 + e^t) to full float64 precision (F.softplus switches to t above 20, an
    error up to 2e-9, too coarse for the 1e-12 comparisons here)."""
    return torch.logaddexp(torch.zeros_like(t), t)


def log_sigmoid(t):
    return -softplus(-t)


def exact_log_lik(psi, y):
    return psi.log_softmax(-1).gather(-1, y.unsqueeze(-1)).squeeze(-1)


def proposal_for(K, generator_seed=0):
    g = torch.Generator().manual_seed(generator_seed)
    return torch.rand(K, generator=g, dtype=D64) ** 2 + 0.05  # skewed, every q(k) > 0


def make(cls, psi, num_negatives=None, strategy="per_datapoint", a=None, **kw):
    proposal = proposal_for(psi.shape[-1]) if strategy == "importance" else None
    if cls is BouchardBound:
        kw["a"] = a
    return cls(psi, num_negatives=num_negatives, strategy=strategy, proposal=proposal, **kw)


def random_cases(seed, num_cases=400):
    """(psi, y) over many K and utility scales, float64."""
    g = torch.Generator().manual_seed(seed)
    for K in (2, 3, 7, 50, 1000):
        scale = torch.exp(torch.empty(num_cases, 1, dtype=D64).uniform_(math.log(0.05), math.log(20.0), generator=g))
        psi = torch.randn(num_cases, K, dtype=D64, generator=g) * scale
        psi = psi + torch.randn(num_cases, 1, dtype=D64, generator=g) * 10  # arbitrary offsets
        y = torch.randint(0, K, (num_cases,), generator=g)
        yield psi, y


# ------------------------------------------------------------------------------------------
# Bounds without subsampling lie below the exact log-likelihood
# ------------------------------------------------------------------------------------------


def test_exact_softmax_is_log_softmax():
    for psi, y in random_cases(0):
        assert torch.allclose(UtilityCategorical(psi).log_prob(y), exact_log_lik(psi, y), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------
# LinearUtility (sparse gradients), dtypes, devices, Pyro
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cls", SUBSAMPLED)
def test_linear_utility_sparse_gradients_and_same_values(cls, strategy):
    torch.manual_seed(14)
    B, D, K = 5, 4, 30
    x = torch.randn(B, D, dtype=D64)
    W = torch.randn(K, D, dtype=D64, requires_grad=True)
    b = torch.randn(K, dtype=D64, requires_grad=True)
    y = torch.randint(0, K, (B,))
    a = torch.zeros(B, dtype=D64)
    sampler = get_negative_sampler(strategy, 6, proposal_for(K) if strategy == "importance" else None)
    neg = sampler(y, K)
    lazy = cls(LinearUtility(x, W, b, sparse=True), negatives=neg, **({"a": a} if cls is BouchardBound else {}))
    dense = cls(x @ W.detach().T + b.detach(), negatives=neg, **({"a": a} if cls is BouchardBound else {}))
    lp = lazy.log_prob(y)
    assert torch.allclose(lp, dense.log_prob(y), rtol=1e-12, atol=1e-12)
    lp.sum().backward()
    assert W.grad.is_sparse and b.grad.is_sparse
    touched = W.grad.coalesce().indices().unique()
    assert touched.numel() <= B + neg.index.numel()
    # a fresh subsample through the lazy utility also runs (sampler inside)
    lazy2 = make(cls, LinearUtility(x, W, b, sparse=True), 6, strategy, a=a) if strategy != "importance" \
        else cls(LinearUtility(x, W, b, sparse=True), num_negatives=6, strategy=strategy,
                 proposal=proposal_for(K), **({"a": a} if cls is BouchardBound else {}))
    assert torch.isfinite(lazy2.log_prob(y)).all()


def test_linear_utility_exact_and_gaussian_bouchard():
    torch.manual_seed(15)
    B, D, K = 5, 4, 30
    x = torch.randn(B, D, dtype=D64)
    W, b = torch.randn(K, D, dtype=D64), torch.randn(K, dtype=D64)
    Wv, bv = torch.rand(K, D, dtype=D64), torch.rand(K, dtype=D64)  # mean-field Gaussian weights
    y = torch.randint(0, K, (B,))
    lin, dense = LinearUtility(x, W, b), x @ W.T + b
    assert torch.allclose(UtilityCategorical(lin).log_prob(y), exact_log_lik(dense, y), rtol=0, atol=1e-12)
    # variance of x.w + b under independent Gaussian rows: (x^2) . var_w + var_b, a LinearUtility
    var_lin, var_dense = LinearUtility(x ** 2, Wv, bv), x ** 2 @ Wv.T + bv
    neg = get_negative_sampler("shared", 7)(y, K)
    a = torch.randn(B, dtype=D64)
    lp_lin = BouchardBound(lin, a, utility_var=var_lin, negatives=neg).log_prob(y)
    lp_dense = BouchardBound(dense, a, utility_var=var_dense, negatives=neg).log_prob(y)
    assert torch.allclose(lp_lin, lp_dense, rtol=1e-12, atol=1e-12)
    assert torch.allclose(BouchardBound(lin, utility_var=var_lin).log_prob(y),
                          BouchardBound(dense, utility_var=var_dense).log_prob(y), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cls", ALL)
def test_dtypes_and_devices(cls, strategy, dtype, device):
    torch.manual_seed(16)
    K = 20
    psi64 = torch.randn(6, K, dtype=D64) * 3
    y = torch.randint(0, K, (6,))
    psi = psi64.to(dtype=dtype, device=device).requires_grad_()
    proposal = proposal_for(K).to(device) if strategy == "importance" else None
    kw = {"a": optimal_bouchard_a(psi64).to(dtype=dtype, device=device)} if cls is BouchardBound else {}
    d = cls(psi, num_negatives=5, strategy=strategy, proposal=proposal, **kw)
    lp = d.log_prob(y.to(device))
    assert lp.dtype == dtype and lp.device.type == device and lp.shape == (6,)
    lp.sum().backward()
    assert torch.isfinite(psi.grad).all()
    # full sums agree across precisions (float32 rounding)
    full = cls(psi.detach(), **kw).log_prob(y.to(device)).double().cpu()
    kw64 = {"a": kw["a"].double().cpu()} if kw else {}
    assert torch.allclose(full, cls(psi64, **kw64).log_prob(y), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_gaussian_and_bernoulli_on_device(device):
    m = torch.randn(4, 7, device=device)
    v = torch.rand(4, 7, device=device)
    y = torch.tensor([0, 3, 6, 1], device=device)
    lp = BouchardBound(m, utility_var=v, num_negatives=3).log_prob(y)
    assert lp.device.type == device and torch.isfinite(lp).all()
    assert optimal_bouchard_a(m, v).device.type == device
    jj = JaakkolaJordanBernoulli(m[:, 0], v[:, 0]).log_prob((y % 2).float())
    assert jj.device.type == device and jj.shape == (4,)


def test_gradients_finite_at_degenerate_points():
    """sqrt at 0 (xi* = |m| with v = 0, m = 0) must not give NaN gradients."""
    m = torch.zeros(3, 4, dtype=D64, requires_grad=True)
    v = torch.zeros(3, 4, dtype=D64, requires_grad=True)
    a = torch.zeros(3, dtype=D64, requires_grad=True)
    BouchardBound(m, a, utility_var=v).log_prob(torch.tensor([0, 1, 2])).sum().backward()
    assert torch.isfinite(m.grad).all() and torch.isfinite(v.grad).all() and torch.isfinite(a.grad).all()
    t = torch.zeros(3, dtype=D64, requires_grad=True)
    JaakkolaJordanBernoulli(t).log_prob(torch.tensor([0.0, 1.0, 1.0])).sum().backward()
    # d/dt log sigmoid(s t) at 0 = s/2
    assert torch.allclose(t.grad, torch.tensor([-0.5, 0.5, 0.5], dtype=D64))
    # the optimal-xi JJ bound has the gradient of the optimised bound (envelope theorem)
    mm = torch.randn(10, dtype=D64, requires_grad=True)
    vv = torch.rand(10, dtype=D64, requires_grad=True)
    jaakkola_jordan_softplus_bound(mm, vv).sum().backward()
    xi = (mm ** 2 + vv).sqrt().detach()
    assert torch.allclose(mm.grad, 0.5 + 2 * jaakkola_jordan_lambda(xi) * mm.detach())
    assert torch.allclose(vv.grad, jaakkola_jordan_lambda(xi))


@pytest.mark.parametrize("name", ["ove", "sampled", "bouchard"])
def test_pyro_svi_step(name):
    pyro.clear_param_store()
    torch.manual_seed(17)
    N, D, K = 40, 3, 15
    x, y = torch.randn(N, D), torch.randint(0, K, (N,))

    def model(x, y):
        W = pyro.param("W", torch.zeros(K, D))
        b = pyro.param("b", torch.zeros(K))
        with pyro.plate("data", N, subsample_size=10) as idx:
            kw = {}
            if name == "bouchard":
                kw["a"] = pyro.param("a", torch.zeros(N))[idx]  # per-datapoint free parameter
            d = BY_NAME[name](LinearUtility(x[idx], W, b), num_negatives=4, strategy="shared", **kw)
            pyro.sample("y", d, obs=y[idx])

    def guide(x, y):
        pass

    with pyro.validation_enabled(True):
        svi = SVI(model, guide, Adam({"lr": 0.05}), Trace_ELBO())
        losses = [svi.step(x, y) for _ in range(30)]
    assert all(math.isfinite(l) for l in losses)
    assert pyro.param("W").abs().sum() > 0



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
from pyro_ar.negatives import ImportanceNegatives, Negatives, SharedNegatives, get_negative_sampler
from pyro_ar.utility import LinearUtility, as_utility

D64 = torch.float64
#: the class-sum baselines by their likelihood name (pyro_ar.likelihoods.get_likelihood)
BY_NAME = {"ove": OVECategorical, "sampled": SampledSoftmax, "bouchard": BouchardBound}
STRATEGIES = ["per_datapoint", "shared", "importance", "screened"]
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
    proposal = proposal_for(as_utility(psi).num_classes) if strategy == "importance" else None
    if cls is BouchardBound:
        kw["a"] = a
    return cls(psi, negatives=get_negative_sampler(strategy, num_negatives, proposal), **kw)


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


def test_ove_below_exact():
    for psi, y in random_cases(1):
        ove = OVECategorical(psi).log_prob(y)
        exact = exact_log_lik(psi, y)
        assert (ove <= exact + 1e-12).all()
        # the direct formula, summed over k' != y
        d = psi.gather(-1, y.unsqueeze(-1)) - psi
        ref = torch.where(torch.arange(psi.shape[-1]) != y.unsqueeze(-1), log_sigmoid(d), 0.).sum(-1)
        assert torch.allclose(ove, ref, rtol=1e-12, atol=1e-12)
        if psi.shape[-1] == 2:  # K = 2: OVE is exact
            assert torch.allclose(ove, exact, rtol=0, atol=1e-12)


def test_bouchard_below_exact_any_a_and_optimal_a_is_tightest():
    g = torch.Generator().manual_seed(2)
    for psi, y in random_cases(2):
        exact = exact_log_lik(psi, y)
        a_opt = optimal_bouchard_a(psi)
        at_opt = BouchardBound(psi, a_opt).log_prob(y)
        assert torch.equal(BouchardBound(psi).log_prob(y), at_opt)  # a=None uses the optimum
        assert (at_opt <= exact + 1e-12).all()
        for _ in range(5):
            a = psi.logsumexp(-1) + 5 * torch.randn(psi.shape[:-1], dtype=D64, generator=g)
            at_a = BouchardBound(psi, a).log_prob(y)
            assert (at_a <= exact + 1e-12).all()
            assert (at_a <= at_opt + 1e-12 * (1 + at_opt.abs())).all()
        # the direct formula: psi_y - a - sum_k softplus(psi_k - a), over all k
        ref = exact + psi.logsumexp(-1) - a - softplus(psi - a.unsqueeze(-1)).sum(-1)
        assert torch.allclose(at_a, ref, rtol=1e-10, atol=1e-10)


def test_gaussian_bouchard_below_expected_exact_log_lik():
    """E_q log softmax(psi)_y >= E_q Bouchard(a) >= JJ-Bouchard(a), psi_k ~ N(m_k, v_k)."""
    g = torch.Generator().manual_seed(6)
    B, K, R = 6, 8, 20000
    m = torch.randn(B, K, dtype=D64, generator=g) * 2
    v = torch.rand(B, K, dtype=D64, generator=g) * 2
    y = torch.randint(0, K, (B,), generator=g)
    a_opt = optimal_bouchard_a(m, v)
    jj_opt = BouchardBound(m, a_opt, utility_var=v).log_prob(y)
    assert torch.equal(BouchardBound(m, utility_var=v).log_prob(y), jj_opt)
    # Monte Carlo E_q log softmax(psi)_y: R draws, SE from their sd
    psi = m + v.sqrt() * torch.randn(R, B, K, dtype=D64, generator=g)
    ll = exact_log_lik(psi, y.expand(R, B))
    mc, se = ll.mean(0), ll.std(0) / math.sqrt(R)
    assert (jj_opt <= mc + 4 * se).all()
    for _ in range(5):
        a = m.logsumexp(-1) + 3 * torch.randn(B, dtype=D64, generator=g)
        jj = BouchardBound(m, a, utility_var=v).log_prob(y)
        assert (jj <= jj_opt + 1e-12).all()
        # quadrature E_q of the (point) Bouchard bound, which holds for every psi
        e_softplus = gauss_expect(softplus, m - a.unsqueeze(-1), v).sum(-1)
        e_bouchard = m.gather(-1, y.unsqueeze(-1)).squeeze(-1) - a - e_softplus
        assert (jj <= e_bouchard + 1e-9).all()
        assert (e_bouchard <= mc + 4 * se).all()
    # zero variance: the point Bouchard bound
    zero = BouchardBound(m, a_opt, utility_var=torch.zeros_like(v)).log_prob(y)
    assert torch.allclose(zero, BouchardBound(m, a_opt).log_prob(y), rtol=0, atol=1e-12)


# ------------------------------------------------------------------------------------------
# Subsampled OVE / Bouchard are unbiased; Botev is exact without subsampling, biased with it
# ------------------------------------------------------------------------------------------


def _draws(d, y, R):
    """R independent log_prob draws, shape (R,) + y.shape."""
    return torch.stack([d.log_prob(y) for _ in range(R)])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("cls", [OVECategorical, BouchardBound], ids=["ove", "bouchard"])
def test_subsampled_estimates_are_unbiased(cls, strategy):
    torch.manual_seed(7)
    B, K, s, R = 4, 25, 4, 3000
    psi = torch.randn(B, K, dtype=D64) * 2
    y = torch.randint(0, K, (B,))
    a = optimal_bouchard_a(psi) + torch.randn(B, dtype=D64)
    full = make(cls, psi, a=a).log_prob(y)
    draws = _draws(make(cls, psi, s, strategy, a=a), y, R)
    mean, se = draws.mean(0), draws.std(0) / math.sqrt(R)
    assert (se > 0).all()  # the subsample is really random
    assert ((mean - full).abs() <= 4 * se).all(), ((mean - full) / se)


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_subsampled_gaussian_bouchard_is_unbiased(strategy):
    torch.manual_seed(8)
    B, K, s, R = 3, 20, 5, 3000
    m = torch.randn(B, K, dtype=D64) * 2
    v = torch.rand(B, K, dtype=D64) * 2
    y = torch.randint(0, K, (B,))
    full = make(BouchardBound, m, utility_var=v).log_prob(y)
    a = optimal_bouchard_a(m, v)
    draws = _draws(make(BouchardBound, m, s, strategy, a=a, utility_var=v), y, R)
    mean, se = draws.mean(0), draws.std(0) / math.sqrt(R)
    assert ((mean - full).abs() <= 4 * se).all(), ((mean - full) / se)


@pytest.mark.parametrize("cls", SUBSAMPLED)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_subsampling_is_the_full_value(cls, strategy):
    torch.manual_seed(9)
    psi = torch.randn(5, 12, dtype=D64) * 3
    y = torch.randint(0, 12, (5,))
    a = optimal_bouchard_a(psi)
    full = make(cls, psi, None, strategy, a=a).log_prob(y)
    if strategy != "importance":  # s >= K - 1 is exact too (importance draws never are)
        assert torch.allclose(make(cls, psi, 11, strategy, a=a).log_prob(y), full, rtol=0, atol=1e-12)
    if cls is SampledSoftmax:
        assert torch.allclose(full, exact_log_lik(psi, y), rtol=0, atol=1e-12)


def test_botev_without_subsampling_is_exact():
    for psi, y in random_cases(10, num_cases=100):
        assert torch.allclose(SampledSoftmax(psi).log_prob(y), exact_log_lik(psi, y), rtol=0, atol=1e-12)


def test_botev_with_subsampling_is_biased():
    """The sampled softmax is biased: E[log_prob] > exact (Jensen), here by ~80 SE.

    K = 100, psi_y = 0, one negative at 4, the rest at 0, s = 5 per-datapoint negatives:
    exact = -log(e^4 + 99) = -5.034; the estimate is -log(1 + 19.8 (e^4 + 4)) w.p. 5/99
    (the big class drawn) and -log(1 + 19.8 * 5) otherwise: mean -4.729, a bias of +0.305,
    sd 0.54 per draw, so SE = 0.0038 with R = 20000 draws.
    """
    torch.manual_seed(11)
    K, s, R = 100, 5, 20000
    psi = torch.zeros(K, dtype=D64)
    psi[1] = 4.0
    y = torch.zeros(R, dtype=torch.long)  # R independent per-datapoint subsamples at once
    draws = SampledSoftmax(psi.expand(R, K), negatives=s).log_prob(y)
    exact = exact_log_lik(psi, torch.tensor(0)).item()
    mean, se = draws.mean().item(), draws.std().item() / math.sqrt(R)
    assert mean - exact > 4 * se  # significantly biased, upwards (not a lower bound)
    p = s / (K - 1)
    expected = -p * math.log1p((K - 1) / s * (math.exp(4) + s - 1)) - (1 - p) * math.log1p(K - 1)
    assert abs(mean - expected) < 4 * se  # and the mean is the analytic biased value
    # every strategy is biased upwards on average here (the log of an unbiased sum)
    for strategy in ("shared", "importance"):
        d = make(SampledSoftmax, psi.expand(1, K), s, strategy)
        draws = _draws(d, torch.zeros(1, dtype=torch.long), 3000)[:, 0]
        assert draws.mean().item() - exact > 4 * draws.std().item() / math.sqrt(3000)


def test_botev_importance_uses_log_weights():
    """With fixed negatives: log-softmax over [psi_y, psi_S + log a_S], weight-0 classes dropped."""
    psi = torch.tensor([[0.5, -1.0, 2.0, 0.0, 1.0]], dtype=D64)
    y = torch.tensor([2])
    index = torch.tensor([2, 0, 4, 0])
    weight = torch.tensor([[0.0, 1.5, 0.25, 1.5]], dtype=D64)
    d = SampledSoftmax(psi, negatives=Negatives(index, weight, True))
    ref = 2.0 - torch.logsumexp(torch.tensor([2.0, 0.5 + math.log(1.5), 1.0 + math.log(0.25),
                                             0.5 + math.log(1.5)], dtype=D64), 0)
    assert torch.allclose(d.log_prob(y), ref.reshape(1), rtol=0, atol=1e-14)


def test_fixed_negatives_match_manual_formulas():
    torch.manual_seed(12)
    B, K = 3, 9
    psi = torch.randn(B, K, dtype=D64)
    y = torch.tensor([0, 4, 8])
    a = torch.randn(B, dtype=D64)
    neg = get_negative_sampler("per_datapoint", 3)(y, K)
    py = psi.gather(-1, y.unsqueeze(-1))
    pn = psi.gather(-1, neg.index)
    w = neg.weight
    assert torch.allclose(OVECategorical(psi, negatives=neg).log_prob(y), (w * log_sigmoid(py - pn)).sum(-1))
    bouchard = py.squeeze(-1) - a - softplus(py.squeeze(-1) - a) - (w * softplus(pn - a.unsqueeze(-1))).sum(-1)
    assert torch.allclose(BouchardBound(psi, a, negatives=neg).log_prob(y), bouchard)
    botev = py.squeeze(-1) - torch.cat([py, pn + w.log()], -1).logsumexp(-1)
    assert torch.allclose(SampledSoftmax(psi, negatives=neg).log_prob(y), botev)


# ------------------------------------------------------------------------------------------
# Shapes, expand, validation, registry
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cls", ALL)
def test_shapes_and_expand(cls):
    torch.manual_seed(13)
    K = 6
    psi = torch.randn(2, 3, K)
    d = make(cls, psi, a=torch.zeros(2, 3))
    assert d.batch_shape == (2, 3) and d.event_shape == ()
    assert d.support.lower_bound == 0 and d.support.upper_bound == K - 1 and d.support.is_discrete
    y = torch.randint(0, K, (2, 3))
    assert d.log_prob(y).shape == (2, 3)
    assert d.log_prob(torch.randint(0, K, (5, 1, 1))).shape == (5, 2, 3)
    assert d.log_prob(torch.tensor(2)).shape == (2, 3)
    e = d.expand((4, 2, 3))
    assert type(e) is cls and e.batch_shape == (4, 2, 3)
    assert torch.allclose(e.log_prob(y), d.log_prob(y).expand(4, 2, 3))  # exact sums: deterministic
    assert e.log_prob(y).shape == (4, 2, 3)
    sub = make(cls, psi, 2, "shared", a=torch.zeros(2, 3))
    assert sub.expand((4, 2, 3)).log_prob(y).shape == (4, 2, 3)
    assert sub.log_prob(y).shape == (2, 3)
    with pytest.raises(NotImplementedError, match="UtilityCategorical"):
        d.sample()


def test_bouchard_a_and_var_broadcast_the_batch_shape():
    psi = torch.randn(3, 5)
    d = BouchardBound(psi, a=torch.zeros(2, 1))
    assert d.batch_shape == (2, 3)
    assert d.log_prob(torch.tensor([0, 1, 2])).shape == (2, 3)
    assert d.expand((4, 2, 3)).log_prob(torch.tensor([0, 1, 2])).shape == (4, 2, 3)
    d = BouchardBound(torch.randn(5), a=0.5, utility_var=torch.rand(3, 5), negatives=2)
    assert d.batch_shape == (3,) and d.log_prob(torch.tensor(1)).shape == (3,)
    assert BouchardBound(psi).optimal_a().shape == (3,)
    with pytest.raises(ValueError, match="broadcast"):
        BouchardBound(psi, a=torch.zeros(4))
    with pytest.raises(ValueError, match=">= 0"):
        BouchardBound(psi, utility_var=-torch.ones(3, 5))
    with pytest.raises(ValueError, match="classes"):
        BouchardBound(psi, utility_var=torch.ones(3, 4))


@pytest.mark.parametrize("cls", ALL)
def test_bad_labels_raise(cls):
    d = make(cls, torch.randn(3, 5), 2, a=torch.zeros(3))
    for bad in (torch.tensor([0, 1, 5]), torch.tensor([-1, 0, 0]), torch.tensor([0.5, 1.0, 2.0]),
                torch.tensor([True, False, True]), torch.zeros(4, dtype=torch.long)):
        with pytest.raises(ValueError):
            d.log_prob(bad)
    with pytest.raises(ValueError):
        make(cls, torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(ValueError, match="strategy"):
        make(cls, torch.randn(3, 5), 2, strategy="nope")
    with pytest.raises(ValueError, match="classes"):
        cls(torch.randn(3, 5), negatives=ImportanceNegatives(2, torch.ones(4)))
    with pytest.raises(ValueError, match="at least 2"):
        make(cls, torch.randn(3, 1))
    # validation off: no check (like every torch distribution)
    d = make(cls, torch.randn(3, 5), 2, a=torch.zeros(3), validate_args=False)
    assert d.log_prob(torch.tensor([0, 1, 4])).shape == (3,)


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
    # a screened draw ranks its candidates by the utilities (a ClassSumLikelihood passes them)
    screen = {"utility": x @ W.detach().T + b.detach()} if getattr(sampler, "uses_utility", False) else {}
    neg = sampler(y, K, **screen)
    lazy = cls(LinearUtility(x, W, b, sparse=True), negatives=neg, **({"a": a} if cls is BouchardBound else {}))
    dense = cls(x @ W.detach().T + b.detach(), negatives=neg, **({"a": a} if cls is BouchardBound else {}))
    lp = lazy.log_prob(y)
    assert torch.allclose(lp, dense.log_prob(y), rtol=1e-12, atol=1e-12)
    lp.sum().backward()
    assert W.grad.is_sparse and b.grad.is_sparse
    touched = W.grad.coalesce().indices().unique()
    assert touched.numel() <= B + neg.index.numel()
    # a fresh subsample through the lazy utility also runs (sampler inside)
    lazy2 = make(cls, LinearUtility(x, W, b, sparse=True), 6, strategy, a=a)
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
    d = cls(psi, negatives=get_negative_sampler(strategy, 5, proposal), **kw)
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
    lp = BouchardBound(m, utility_var=v, negatives=3).log_prob(y)
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
            d = BY_NAME[name](LinearUtility(x[idx], W, b), negatives=SharedNegatives(4), **kw)
            pyro.sample("y", d, obs=y[idx])

    def guide(x, y):
        pass

    with pyro.validation_enabled(True):
        svi = SVI(model, guide, Adam({"lr": 0.05}), Trace_ELBO())
        losses = [svi.step(x, y) for _ in range(30)]
    assert all(math.isfinite(l) for l in losses)
    assert pyro.param("W").abs().sum() > 0



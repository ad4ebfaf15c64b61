"""AugmentedCategorical (the subsampled augmented likelihood) and sample_categorical (the
two Pyro sites).

Unbiasedness tests compare a Monte Carlo mean with the exact value and accept within 4
standard errors, the standard error being the sample standard deviation of the
independent replicates over sqrt(#replicates).
"""

import math

import numpy as np
import pytest
import scipy.stats
import torch

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine

from pyro_ar import AugmentedCategorical, LinearUtility, UtilityCategorical, sample_categorical
from pyro_ar.utility import as_utility
from pyro_ar.negatives import Negatives, SharedNegatives, get_negative_sampler

from tests.helpers import BUILTIN_NOISES, DEVICES, DTYPES, make_noise

pytestmark = pytest.mark.usefixtures("seeded")

Z_MAX = 4.0
STRATEGIES = ["per_datapoint", "shared", "importance", "screened"]


def _proposal(K):
    # a frequency^0.75-like proposal, far from uniform
    return torch.arange(1, K + 1, dtype=torch.float64).flip(0) ** 0.75


def _augmented(psi, eps, noise, strategy, num_negatives, **kw):
    proposal = _proposal(as_utility(psi).num_classes) if strategy == "importance" else None
    return AugmentedCategorical(psi, eps, noise, get_negative_sampler(strategy, num_negatives, proposal), **kw)


def _explicit_sum(psi, eps, y, name):
    """sum_{k' != y} log Phi(eps + psi_y - psi_k'), one datapoint at a time, in numpy/scipy."""
    logcdf = {"gumbel": lambda x: -np.exp(-x), "normal": scipy.stats.norm.logcdf,
              "logistic": scipy.stats.logistic.logcdf}.get(name)
    if logcdf is None:
        noise = make_noise(name)
        logcdf = lambda x: noise.log_cdf(torch.as_tensor(x)).numpy()
    out = np.empty(len(y))
    for n in range(len(y)):
        x = eps[n] + psi[n, y[n]] - np.delete(psi[n], y[n])
        out[n] = logcdf(x).sum()
    return out


# ---------------------------------------------------------------------------------------
# AugmentedCategorical: exactness, unbiasedness, the augmented joint
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3", "user_t3"])
@pytest.mark.parametrize("strategy,num_negatives", [
    ("per_datapoint", None), ("per_datapoint", 9), ("per_datapoint", 50),
    ("shared", None), ("shared", 9), ("shared", 10), ("importance", None),
])
def test_exact_without_subsampling(name, strategy, num_negatives):
    K, B = 10, 6
    psi = 3.0 * torch.randn(B, K, dtype=torch.float64)
    eps = make_noise(name).sample((B,), dtype=torch.float64)
    y = torch.randint(K, (B,))
    lp = _augmented(psi, eps, make_noise(name), strategy, num_negatives).log_prob(y)
    expected = _explicit_sum(psi.numpy(), eps.numpy(), y.numpy(), name)
    np.testing.assert_allclose(lp.numpy(), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("name", BUILTIN_NOISES + [pytest.param("student_t3", marks=pytest.mark.slow),  # 3 CPU s each
                                                   "user_t3"])
def test_unbiased_subsampled_log_prob(name, strategy, record_property):
    K, B, s = 30, 4, 5
    noise = make_noise(name)
    psi = 2.0 * torch.randn(B, K, dtype=torch.float64)
    eps = noise.sample((B,), dtype=torch.float64)
    y = torch.tensor([0, 7, 29, int(psi[3].argmin())])
    exact = _augmented(psi, eps, noise, strategy, None).log_prob(y)
    if strategy == "per_datapoint":
        # independent subsamples for R replicas of the B datapoints, in one call
        R = 20000
        d = _augmented(psi.expand(R, B, K), eps.expand(R, B), noise, strategy, s)
        est = d.log_prob(y.expand(R, B))
    else:
        # one shared subsample per call: independent replicates need separate calls
        R = 1500
        d = _augmented(psi, eps, noise, strategy, s)
        est = torch.stack([d.log_prob(y) for _ in range(R)])
    assert est.shape == (R, B)
    se = est.std(0) / math.sqrt(R)
    z = (est.mean(0) - exact) / se
    record_property("z", z.tolist())
    assert (se > 0).all()
    assert z.abs().max().item() < Z_MAX, z


@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_augmented_joint_integrates_to_marginal(name):
    # int phi(eps) exp(sum_{k' != y} log Phi(eps + psi_y - psi_k')) d eps = p(y | psi); the
    # integrand is smooth and negligible (< 1e-17) outside [-40, 60], where the trapezoid
    # rule on a fine grid is accurate far beyond 1e-8
    K = 5
    psi = torch.tensor([0.3, -1.2, 2.0, 0.0, 1.1], dtype=torch.float64)
    noise = make_noise(name)
    grid = torch.linspace(-40.0, 60.0, 200001, dtype=torch.float64)
    d = AugmentedCategorical(psi, grid, noise)
    assert d.batch_shape == grid.shape
    log_joint = noise.log_density(grid) + d.log_prob(torch.arange(K).reshape(K, 1))  # (K, G)
    integral = torch.trapezoid(log_joint.exp(), grid, dim=-1)
    marginal = UtilityCategorical(psi, noise).log_prob(torch.arange(K)).exp()
    assert (integral - marginal).abs().max().item() < 1e-8
    assert abs(integral.sum().item() - 1.0) < 1e-8


@pytest.mark.parametrize("strategy", ["per_datapoint", "shared"])
@pytest.mark.parametrize("sparse", [False, True])
def test_linear_utility_same_as_dense_logits(sparse, strategy):
    K, B, D = 12, 5, 3
    x = torch.randn(B, D, dtype=torch.float64)
    w = torch.randn(K, D, dtype=torch.float64, requires_grad=True)
    b = torch.randn(K, dtype=torch.float64, requires_grad=True)
    eps = torch.randn(B, dtype=torch.float64)
    y = torch.randint(K, (B,))
    lin = LinearUtility(x, w, b, sparse=sparse)
    dense = x @ w.T + b
    for s in (None, 4):
        torch.manual_seed(1)  # the same subsample for both
        lp_lin = AugmentedCategorical(lin, eps, "normal", get_negative_sampler(strategy, s)).log_prob(y)
        torch.manual_seed(1)
        lp_dense = AugmentedCategorical(dense, eps, "normal", get_negative_sampler(strategy, s)).log_prob(y)
        torch.testing.assert_close(lp_lin, lp_dense, rtol=1e-12, atol=1e-12)
    # fixed negatives are used as given
    neg = Negatives(torch.tensor([[1, 2], [3, 4], [5, 6], [7, 8], [9, 10]]), torch.tensor(2.5), False)
    lp_lin = AugmentedCategorical(lin, eps, "normal", negatives=neg).log_prob(y)
    lp_dense = AugmentedCategorical(dense, eps, "normal", negatives=neg).log_prob(y)
    torch.testing.assert_close(lp_lin, lp_dense, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sparse_gradients_through_log_prob(strategy):
    K, B, D, s = 50, 4, 3, 5
    x, eps = torch.randn(B, D), torch.randn(B)
    y = torch.tensor([0, 1, 2, 3])
    grads = {}
    for sparse in (True, False):
        w = torch.randn(K, D, generator=torch.Generator().manual_seed(0)).requires_grad_()
        b = torch.randn(K, generator=torch.Generator().manual_seed(1)).requires_grad_()
        torch.manual_seed(3)  # the same negatives for both
        d = _augmented(LinearUtility(x, w, b, sparse=sparse), eps, "gumbel", strategy, s)
        d.log_prob(y).sum().backward()
        grads[sparse] = (w.grad, b.grad)
    (ws, bs), (wd, bd) = grads[True], grads[False]
    assert ws.is_sparse and bs.is_sparse and not wd.is_sparse
    torch.testing.assert_close(ws.to_dense(), wd)
    torch.testing.assert_close(bs.to_dense(), bd)
    touched = set(ws.coalesce().indices()[0].tolist())
    assert set(y.tolist()) <= touched and len(touched) <= B + B * s < K


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_augmented_large_utilities_finite(name, dtype):
    # |psi| up to 1e3, moderate eps. For Gumbel, -exp(-x) overflows legitimately when
    # x < -log(max float): check wherever the float64 value is representable in dtype.
    K, B = 20, 16
    psi = 1e3 * (2.0 * torch.rand(B, K, dtype=torch.float64) - 1.0)
    psi[:, 0], psi[:, 1] = 1e3, -1e3
    eps = torch.linspace(-3.0, 3.0, B, dtype=torch.float64)
    y = torch.randint(K, (B,))
    y[:4] = 0  # the top class: every term representable, even for Gumbel in float32
    psi, eps = psi.to(dtype).double(), eps.to(dtype).double()  # representable in dtype
    x = psi.to(dtype).requires_grad_()
    lp = AugmentedCategorical(x, eps.to(dtype), name).log_prob(y)
    (grad,) = torch.autograd.grad(lp.sum(), x)
    ref = AugmentedCategorical(psi, eps, name).log_prob(y)
    if name == "gumbel":
        # log|sum_k' -exp(-x_k')| in float64 without overflow
        xs = eps[:, None] + psi.gather(-1, y[:, None]) - psi
        log_abs = torch.where(torch.arange(K) != y[:, None], -xs, torch.full_like(xs, -math.inf)).logsumexp(-1)
        ok = log_abs < math.log(torch.finfo(dtype).max) - 5.0
        assert ok[:4].all() and not ok.all()
    else:
        ok = torch.ones(B, dtype=torch.bool)
    assert torch.isfinite(lp[ok]).all() and torch.isfinite(grad[ok]).all()
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    torch.testing.assert_close(lp[ok].double(), ref[ok], rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["gumbel", "normal", "logistic"])
def test_log_prob_adds_the_noise_on_the_label_side(name):
    """log_prob's arguments (eps + psi_y) - psi_k (the noise added to the (batch, 1) label
    utilities, then one (batch, s) difference) give the values and gradients of the former
    eps + (psi_y - psi_k) up to rounding (relative 1e-12, float64), fixed negatives with a
    dropped term, shared and per datapoint."""
    from pyro_ar.distributions.class_sum import masked_weighted_sum

    g = torch.Generator().manual_seed(0)
    psi = (2.0 * torch.randn(4, 30, generator=g, dtype=torch.float64)).requires_grad_()
    eps = torch.randn(4, generator=g, dtype=torch.float64).requires_grad_()
    y = torch.tensor([0, 5, 7, 29])
    shared = Negatives(torch.tensor([5, 3, 17, 29]), torch.rand(4, 4, generator=g, dtype=torch.float64), True)
    per_row = Negatives(torch.randint(0, 30, (4, 6), generator=g), torch.rand(4, 6, generator=g, dtype=torch.float64),
                        False)
    shared.weight[1, 0] = shared.weight[3, 3] = 0.0  # (classes 5 and 29: rows 1 and 3's labels)
    for neg in (shared, per_row):
        d = AugmentedCategorical(psi, eps, name, negatives=neg)
        new = d.log_prob(y)
        diff, w = d.utility_differences(y)
        old = masked_weighted_sum(d.noise.log_cdf, eps.unsqueeze(-1) + diff, w)
        torch.testing.assert_close(new, old, rtol=1e-12, atol=1e-12)
        for a, b in zip(torch.autograd.grad(new.sum(), (psi, eps)), torch.autograd.grad(old.sum(), (psi, eps))):
            torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_augmented_shapes():
    K = 6
    psi = torch.randn(3, K)
    d = AugmentedCategorical(psi, torch.zeros(2, 3), "logistic", negatives=2)
    assert d.batch_shape == (2, 3) and d.event_shape == () and d.num_classes == K
    assert d.support.upper_bound == K - 1
    assert d.log_prob(torch.tensor([0, 1, 2])).shape == (2, 3)
    assert d.log_prob(torch.zeros(4, 1, 1, dtype=torch.long)).shape == (4, 2, 3)
    e = d.expand((5, 2, 3))
    assert e.batch_shape == (5, 2, 3) and e.log_prob(torch.tensor(1)).shape == (5, 2, 3)
    assert AugmentedCategorical(torch.randn(K), torch.tensor(0.3)).log_prob(torch.tensor(2)).shape == ()
    with pytest.raises(NotImplementedError, match="UtilityCategorical"):
        d.sample()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_augmented_dtype_device(strategy, dtype, device):
    K, B = 9, 4
    psi = torch.randn(B, K, dtype=dtype, device=device)
    eps = torch.randn(B, dtype=dtype, device=device)
    y = torch.randint(K, (B,), device=device)
    lp = _augmented(psi, eps, "normal", strategy, 3).log_prob(y)
    assert lp.dtype == dtype and lp.device.type == device and torch.isfinite(lp).all()
    exact = _augmented(psi, eps, "normal", strategy, None).log_prob(y)
    expected = _explicit_sum(psi.cpu().double().numpy(), eps.cpu().double().numpy(), y.cpu().numpy(), "normal")
    tol = 1e-5 if dtype == torch.float32 else 1e-12
    np.testing.assert_allclose(exact.cpu().double().numpy(), expected, rtol=tol, atol=tol)


# ---------------------------------------------------------------------------------------
# sample_categorical inside Pyro
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUILTIN_NOISES)
@pytest.mark.parametrize("observed", [True, False])
def test_sample_categorical_in_subsampled_plate(name, observed):
    N, B, K, D = 100, 16, 30, 4
    x, y = torch.randn(N, D), torch.randint(K, (N,))
    w, b = torch.randn(K, D), torch.randn(K)

    def model():
        with pyro.plate("data", N, subsample_size=B) as idx:
            psi = LinearUtility(x[idx], w, b)
            return sample_categorical("y", psi, obs=y[idx] if observed else None, noise=name,
                                      negatives=5)

    tr = poutine.trace(model).get_trace()
    eps_site, y_site = tr.nodes["y_eps"], tr.nodes["y"]
    assert eps_site["value"].shape == (B,) and eps_site["fn"].batch_shape == (B,)
    assert not eps_site["is_observed"]
    assert y_site["value"].shape == (B,) and y_site["fn"].batch_shape == (B,)
    assert [f.name for f in y_site["cond_indep_stack"]] == ["data"]
    assert y_site["is_observed"] == observed
    idx = tr.nodes["data"]["value"]
    if observed:
        assert isinstance(y_site["fn"], AugmentedCategorical)
        assert torch.equal(y_site["value"], y[idx])
    else:
        assert isinstance(y_site["fn"], UtilityCategorical)
        assert y_site["value"].dtype == torch.long
        assert 0 <= y_site["value"].min() and y_site["value"].max() < K
    tr.compute_log_prob()
    assert tr.nodes["y"]["log_prob"].shape == (B,)
    # the plate scales each datapoint's terms by N / B
    assert y_site["scale"] == pytest.approx(N / B)
    assert torch.isfinite(tr.log_prob_sum())


def test_sample_categorical_dense_logits_and_predictive():
    K, B = 5, 8

    def model(obs=None):
        psi = pyro.param("psi", torch.zeros(B, K))
        with pyro.plate("data", B):
            return sample_categorical("y", psi, obs=obs, noise="gumbel")

    tr = poutine.trace(model).get_trace(torch.zeros(B, dtype=torch.long))
    # exact augmented log-likelihood: sum_{k'!=y} log Phi(eps) = -(K-1) exp(-eps)
    eps = tr.nodes["y_eps"]["value"]
    torch.testing.assert_close(tr.nodes["y"]["fn"].log_prob(tr.nodes["y"]["value"]),
                               -(K - 1) * torch.exp(-eps))
    samples = pyro.infer.Predictive(model, num_samples=3)()
    assert samples["y"].shape == (3, B) and samples["y_eps"].shape == (3, B)


def test_eps_prior_is_the_noise():
    def model():
        with pyro.plate("data", 4):
            sample_categorical("y", torch.randn(4, 6, dtype=torch.float64), obs=torch.zeros(4, dtype=torch.long),
                               noise=make_noise("student_t3"))

    tr = poutine.trace(model).get_trace()
    prior = tr.nodes["y_eps"]["fn"]
    v = tr.nodes["y_eps"]["value"]
    assert v.dtype == torch.float64
    torch.testing.assert_close(prior.log_prob(v), make_noise("student_t3").log_density(v))
    gumbel = poutine.trace(lambda: sample_categorical(
        "z", torch.randn(2, 3), obs=torch.zeros(2, dtype=torch.long), noise="gumbel")).get_trace()
    assert isinstance(gumbel.nodes["z_eps"]["fn"], dist.Gumbel)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_sum_exp_negatives_from_log_weights_equals_from_weights(dtype):
    # the shared sampler's log-weights (a comparison) give log S_hat as its weights do (the
    # fallback for negatives without log-weights), label hits (weight 0) included
    g = torch.Generator().manual_seed(3)
    K, B, D = 40, 64, 5
    x, W, b = (torch.randn(B, D, generator=g, dtype=dtype), torch.randn(K, D, generator=g, dtype=dtype),
               torch.randn(K, generator=g, dtype=dtype))
    y = torch.randint(0, K, (B,), generator=g)
    neg = SharedNegatives(8)(y, K)
    assert neg.log_weight is not None and bool((neg.weight == 0).any())  # some labels drawn
    plain = Negatives(neg.index, neg.weight, True)
    psi, eps = LinearUtility(x, W, b), torch.zeros(B, dtype=dtype)
    fast = AugmentedCategorical(psi, eps, negatives=neg).log_sum_exp_negatives(y)
    slow = AugmentedCategorical(psi, eps, negatives=plain).log_sum_exp_negatives(y)
    torch.testing.assert_close(fast, slow)


def test_negatives_known_nonempty_skip_the_guard_with_the_same_values_and_gradients():
    """Shared negatives of s >= 2 distinct classes keep a class other than the label in every
    row (``nonempty``): log S_hat skips its -inf guard, with the guarded value and gradients;
    with s = 1 a row can be all label (not nonempty: -inf there, zero gradients, no NaN)."""
    g = torch.Generator().manual_seed(4)
    K, B, D = 30, 50, 4
    x, y = torch.randn(B, D, generator=g, dtype=torch.float64), torch.randint(0, K, (B,), generator=g)
    neg = SharedNegatives(6)(y, K)
    assert neg.nonempty and not SharedNegatives(1)(y, K).nonempty
    guarded = Negatives(neg.index, neg.weight, True, neg.log_weight, nonempty=False)
    values, grads = [], []
    for n in (neg, guarded):
        W = torch.randn(K, D, generator=torch.Generator().manual_seed(5), dtype=torch.float64).requires_grad_()
        log_s = AugmentedCategorical(LinearUtility(x, W), torch.zeros(B, dtype=torch.float64),
                                     negatives=n).log_sum_exp_negatives(y)
        log_s.exp().sum().backward()
        values.append(log_s.detach())
        grads.append(W.grad)
    torch.testing.assert_close(values[0], values[1], rtol=0, atol=0)
    torch.testing.assert_close(grads[0], grads[1], rtol=0, atol=0)
    one = SharedNegatives(1)
    W = torch.randn(K, D, dtype=torch.float64, requires_grad=True)
    hit = one(y[:1], K)
    hit = Negatives(y[:1].clone(), hit.weight * 0, True)  # the label itself: an all-zero row
    log_s = AugmentedCategorical(LinearUtility(x[:1], W), torch.zeros(1, dtype=torch.float64),
                                 negatives=hit).log_sum_exp_negatives(y[:1])
    log_s.exp().sum().backward()
    assert log_s.item() == -math.inf and not W.grad.isnan().any()


def test_same_shape_expand_is_the_distribution_itself():
    d = AugmentedCategorical(torch.randn(4, 10), torch.zeros(4), negatives=3)
    assert d.expand((4,)) is d
    e = d.expand((2, 4))
    assert e is not d and e.batch_shape == (2, 4)

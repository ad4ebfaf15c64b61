"""UtilityCategorical (the marginal), AugmentedCategorical (the subsampled augmented
likelihood) and sample_categorical (the two Pyro sites).

Statistical tests run under fixed seeds (the ``seeded`` fixture). Goodness-of-fit tests are
Pearson chi-square tests at significance level 1e-3 (cells with expected count < 5 pooled);
unbiasedness tests compare a Monte Carlo mean with the exact value and accept within 4
standard errors, the standard error being the sample standard deviation of the
independent replicates over sqrt(#replicates).
"""

import math
import warnings

import numpy as np
import pytest
import scipy.stats
import torch

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine

from pyro_ar import AugmentedCategorical, LinearUtility, UtilityCategorical, as_utility, sample_categorical
from pyro_ar.negatives import Negatives

from tests.helpers import BUILTIN_NOISES, DEVICES, DTYPES, make_noise

pytestmark = pytest.mark.usefixtures("seeded")

ALPHA = 1e-3
Z_MAX = 4.0
STRATEGIES = ["per_datapoint", "shared", "importance"]


def _proposal(K):
    # a frequency^0.75-like proposal, far from uniform
    return torch.arange(1, K + 1, dtype=torch.float64).flip(0) ** 0.75


def _augmented(psi, eps, noise, strategy, num_negatives, **kw):
    proposal = _proposal(as_utility(psi).num_classes) if strategy == "importance" else None
    return AugmentedCategorical(psi, eps, noise, num_negatives=num_negatives, strategy=strategy,
                                proposal=proposal, **kw)


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
# UtilityCategorical
# ---------------------------------------------------------------------------------------

def test_gumbel_marginal_is_log_softmax():
    psi = 5.0 * torch.randn(6, 40, dtype=torch.float64)
    d = UtilityCategorical(psi, "gumbel")
    y = torch.arange(40).reshape(40, 1)
    assert (d.log_prob(y) - psi.log_softmax(-1).T).abs().max().item() < 1e-12
    assert (d.logits - psi.log_softmax(-1)).abs().max().item() < 1e-12


def _pooled_chisquare(counts, probs, min_expected=5.0):
    """Pearson chi-square p-value, pooling cells whose expected count is below min_expected."""
    expected = probs * counts.sum()
    order = np.argsort(expected)
    counts, expected = counts[order], expected[order]
    small = np.cumsum(expected) < min_expected  # the smallest cells, pooled together
    if small.any():
        cut = small.sum() + 1
        counts = np.concatenate([[counts[:cut].sum()], counts[cut:]])
        expected = np.concatenate([[expected[:cut].sum()], expected[cut:]])
    return scipy.stats.chisquare(counts, expected).pvalue


@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3", "laplace"])
def test_sample_frequencies_match_log_prob(name):
    K, N = 8, 40000
    psi = torch.tensor([1.0, 0.5, 0.0, -0.5, 2.0, -1.0, -4.0, 0.2], dtype=torch.float64)
    d = UtilityCategorical(psi, make_noise(name))
    y = d.sample((N,))
    assert y.shape == (N,) and y.dtype == torch.long
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Laplace: quadrature ~1e-5 accurate
        probs = d.log_prob(torch.arange(K)).exp().numpy()
    assert abs(probs.sum() - 1) < 1e-4
    counts = np.bincount(y.numpy(), minlength=K)
    assert _pooled_chisquare(counts, probs / probs.sum()) > ALPHA


def test_utility_categorical_shapes():
    psi = torch.randn(2, 1, 5)
    d = UtilityCategorical(psi, "normal")
    assert d.batch_shape == (2, 1) and d.event_shape == () and d.num_classes == 5
    assert d.support.lower_bound == 0 and d.support.upper_bound == 4
    assert d.sample().shape == (2, 1)
    assert d.sample((7, 3)).shape == (7, 3, 2, 1)
    e = d.expand((4, 2, 3))
    assert e.batch_shape == (4, 2, 3) and e.sample().shape == (4, 2, 3)
    assert e.log_prob(torch.tensor(1)).shape == (4, 2, 3)
    # value vs batch shape broadcasting
    assert d.log_prob(torch.tensor([[0, 1, 2]])).shape == (2, 3)
    assert d.log_prob(torch.zeros(6, 1, 1, dtype=torch.long)).shape == (6, 2, 1)
    # enumerate_support, and the probabilities of the support sum to one
    support = d.enumerate_support()
    assert support.shape == (5, 2, 1)
    assert d.enumerate_support(expand=False).shape == (5, 1, 1)
    torch.testing.assert_close(d.log_prob(support).logsumexp(0), torch.zeros(2, 1), atol=1e-5, rtol=0)
    assert UtilityCategorical(torch.randn(5)).log_prob(torch.tensor(3)).shape == ()


def test_utility_categorical_accepts_linear_utility():
    x, w, b = torch.randn(3, 4), torch.randn(6, 4), torch.randn(6)
    d = UtilityCategorical(LinearUtility(x, w, b), "gumbel")
    torch.testing.assert_close(d.logits, (x @ w.T + b).log_softmax(-1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_utility_categorical_dtype_device(name, dtype, device):
    psi = torch.randn(3, 4, dtype=dtype, device=device)
    d = UtilityCategorical(psi, name)
    y = d.sample((2,))
    assert y.dtype == torch.long and y.device.type == device and y.shape == (2, 3)
    lp = d.log_prob(y)
    assert lp.dtype == dtype and lp.device.type == device and lp.shape == (2, 3)
    assert torch.isfinite(lp).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_utility_categorical_large_utilities_finite(name, dtype):
    # |psi| up to 1e3: every log p (down to ~-1e6 for probit) is representable
    psi = 1e3 * (2.0 * torch.rand(2, 6, dtype=torch.float64) - 1.0)
    psi[:, 0], psi[:, 1] = 1e3, -1e3
    psi = psi.to(dtype).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lp = UtilityCategorical(psi, name).log_prob(torch.arange(6).reshape(6, 1))
        (grad,) = torch.autograd.grad(lp.sum(), psi)
    assert torch.isfinite(lp).all() and torch.isfinite(grad).all()


# ---------------------------------------------------------------------------------------
# AugmentedCategorical: exactness, unbiasedness, the augmented joint
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3"])
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
@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3"])
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
        lp_lin = AugmentedCategorical(lin, eps, "normal", num_negatives=s, strategy=strategy).log_prob(y)
        torch.manual_seed(1)
        lp_dense = AugmentedCategorical(dense, eps, "normal", num_negatives=s, strategy=strategy).log_prob(y)
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


def test_augmented_shapes():
    K = 6
    psi = torch.randn(3, K)
    d = AugmentedCategorical(psi, torch.zeros(2, 3), "logistic", num_negatives=2)
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
# validation
# ---------------------------------------------------------------------------------------

def _both(psi, **kw):
    """The marginal and the augmented distribution over the same utilities."""
    eps = torch.zeros(psi.shape[:-1])
    return [UtilityCategorical(psi, **kw), AugmentedCategorical(psi, eps, **kw)]


@pytest.mark.parametrize("value,match", [
    (torch.tensor([0, 5, 1]), r"value must lie in \[0, 5\), got \[5\]"),
    (torch.tensor([0, -1, 7]), r"value must lie in \[0, 5\), got \[-1, 7\]"),
    (torch.tensor([0.0, 1.5, 2.0]), r"value must hold integer class labels, got non-integers \[1\.5\]"),
    (torch.tensor([0.0, float("nan"), 2.0]), r"non-integers \[nan\]"),
    (torch.tensor([True, False, True]), r"value must hold integer class labels, got dtype=torch\.bool"),
    ([0, 1, 2], r"value must be a tensor of class labels, got \[0, 1, 2\]"),
    (torch.tensor([0, 1]), r"value of shape \(2,\) does not broadcast with batch_shape \(3,\)"),
])
def test_bad_labels(validation_on, value, match):
    for d in _both(torch.randn(3, 5)):
        with pytest.raises(ValueError, match=match):
            d.log_prob(value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_utilities(validation_on, bad):
    psi = torch.randn(3, 5)
    psi[1, 2] = bad
    with pytest.raises(ValueError, match=rf"utility must be finite, got non-finite values \[{bad}\]"):
        UtilityCategorical(psi, "normal")
    with pytest.raises(ValueError, match=rf"utility must be finite, got non-finite values \[{bad}\]"):
        AugmentedCategorical(psi, torch.zeros(3))
    # a lazy linear utility is checked on the rows actually gathered
    w = torch.randn(5, 2)
    w[2, 0] = bad
    d = AugmentedCategorical(LinearUtility(torch.randn(3, 2), w), torch.zeros(3))
    with pytest.raises(ValueError, match=r"utility must be finite"):
        d.log_prob(torch.tensor([0, 1, 3]))


def test_non_finite_eps(validation_on):
    with pytest.raises(ValueError, match=r"eps must be finite, got non-finite values \[nan\]"):
        AugmentedCategorical(torch.randn(3, 5), torch.tensor([0.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match=r"eps must be a tensor, got 0\.5"):
        AugmentedCategorical(torch.randn(3, 5), 0.5)


def test_shape_mismatch_between_utility_and_eps():
    with pytest.raises(ValueError, match=r"eps of shape \(4,\) does not broadcast with the utility's batch shape \(3,\)"):
        AugmentedCategorical(torch.randn(3, 5), torch.zeros(4))
    with pytest.raises(ValueError, match=r"eps of shape \(2, 4\)"):
        AugmentedCategorical(LinearUtility(torch.randn(3, 2), torch.randn(5, 2)), torch.zeros(2, 4))


@pytest.mark.parametrize("bad", [0, -3, 2.5])
def test_bad_num_negatives(bad):
    with pytest.raises(ValueError, match=rf"num_negatives must be a positive integer or None, got {bad}"):
        AugmentedCategorical(torch.randn(3, 5), torch.zeros(3), num_negatives=bad)
    with pytest.raises(ValueError, match=rf"got {bad}"):
        with poutine.trace():
            sample_categorical("y", torch.randn(3, 5), obs=torch.zeros(3, dtype=torch.long),
                               num_negatives=bad)


def test_unknown_noise_and_method():
    with pytest.raises(ValueError, match=r"unknown noise='cauchy'"):
        UtilityCategorical(torch.randn(5), "cauchy")
    with pytest.raises(ValueError, match=r"unknown noise='probitt'"):
        AugmentedCategorical(torch.randn(5), torch.tensor(0.0), "probitt")
    with pytest.raises(ValueError, match=r"method must be 'auto' or 'quadrature', got 'exact'"):
        UtilityCategorical(torch.randn(5), method="exact")
    with pytest.raises(ValueError, match=r"at least 2 classes, got shape \(3, 1\)"):
        UtilityCategorical(torch.randn(3, 1))


@pytest.mark.parametrize("proposal,match", [
    (torch.ones(4), r"proposal is over 4 classes but the utility has num_classes=5"),
    (torch.tensor([0.2, 0.2, -0.1, 0.4, 0.3]), r"proposal must be finite and > 0 .* got values \[-0\.1"),
    (torch.ones(2, 5), r"proposal must be 1-D .* got shape \(2, 5\)"),
    ([0.2] * 5, r"proposal must be a 1-D tensor .* got \[0\.2, 0\.2, 0\.2, 0\.2, 0\.2\]"),
    (np.ones(5), r"proposal must be a 1-D tensor .* got array"),
])
def test_bad_proposal(proposal, match):
    with pytest.raises(ValueError, match=match):
        AugmentedCategorical(torch.randn(3, 5), torch.zeros(3), num_negatives=2,
                             strategy="importance", proposal=proposal)


def test_validation_follows_pyros_global_switch(validation_off):
    psi = torch.randn(3, 5)
    for d in _both(psi):
        # a non-integer label is not checked: it is truncated to an integer
        torch.testing.assert_close(d.log_prob(torch.tensor([0.0, 1.5, 2.0])),
                                   d.log_prob(torch.tensor([0, 1, 2])))
        # an out-of-range label is not checked by us (torch's own indexing may still fail)
        try:
            d.log_prob(torch.tensor([0, 7, 1]))
        except ValueError as e:  # pragma: no cover - the failure this test guards against
            pytest.fail(f"validation ran although it is disabled: {e}")
        except (RuntimeError, IndexError):
            pass
    psi[0, 0] = float("nan")
    lp = UtilityCategorical(psi).log_prob(torch.tensor([0, 1, 2]))
    assert torch.isnan(lp[0]) and torch.isfinite(lp[1:]).all()
    lp = AugmentedCategorical(psi, torch.tensor([0.0, float("nan"), 0.0])).log_prob(torch.tensor([0, 1, 2]))
    assert torch.isnan(lp[:2]).all() and torch.isfinite(lp[2])


def test_validation_on_by_default_and_per_instance(validation_on):
    with pytest.raises(ValueError):
        UtilityCategorical(torch.randn(5)).log_prob(torch.tensor(9))
    # validate_args=False on the instance wins over the global switch
    d = UtilityCategorical(torch.tensor([0.0, float("nan")]), validate_args=False)
    assert torch.isnan(d.log_prob(torch.tensor(1)))


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
                                      num_negatives=5)

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

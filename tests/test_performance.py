"""Tests of the O(subsample) fast paths: the vectorised negative sampler (uniformity by
chi-square tests), cached proposal tables and samplers, the fused label + negatives gather,
the local-first natural step, and device handling (CUDA tests skip without a GPU)."""

import itertools
import math

import pytest
import torch
from scipy import stats

import pyro
from pyro.infer import SVI

import pyro_ar as ar
from pyro_ar.distributions import FastGumbel, _noise_prior
from pyro_ar.infer import ClosedFormELBO, GumbelLocalGuide
from pyro_ar.negatives import ImportanceNegatives, PerDatapointNegatives, SharedNegatives, get_negative_sampler
from pyro_ar.subsets import sample_without_replacement
from pyro_ar.optim import lazy_adam
from pyro_ar.utility import DenseUtility, LinearUtility
from pyro_ar.likelihoods import AR, get_likelihood

LEVEL = 1e-3  # significance level of every chi-square test below
CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA")


pytestmark = pytest.mark.usefixtures("seeded")


def _chi2_pvalue(counts):
    counts = torch.as_tensor(counts, dtype=torch.float64)
    expected = counts.sum() / counts.numel()
    stat = ((counts - expected) ** 2 / expected).sum().item()
    return stats.chi2.sf(stat, counts.numel() - 1)


# ------------------------------------------------------------------ sample_without_replacement
@pytest.mark.parametrize("n,k,shape", [(10**6, 64, ()), (1000, 64, ()), (1000, 249, ()),
                                       (10**5, 20, (512,)), (50, 5, (3, 4)), (100, 24, (2000,)),
                                       (7, 1, (5,)), (5, 5, (2,)), (9, 0, (3,))])
def test_sample_without_replacement_shape_range_distinct(n, k, shape):
    out = sample_without_replacement(n, k, shape)
    assert out.shape == torch.Size(shape) + (k,) and out.dtype == torch.long
    if k:
        rows = out.reshape(-1, k)
        assert int(rows.min()) >= 0 and int(rows.max()) < n
        assert (rows.sort(-1).values.diff(dim=-1) > 0).all()  # distinct within a row


def test_sample_without_replacement_rejects_bad_k():
    with pytest.raises(ValueError, match="distinct"):
        sample_without_replacement(5, 6)


def test_sample_without_replacement_is_uniform_over_ordered_subsets():
    """n = 13, k = 3 takes the iid-draws path (4k < n): every ordered triple (1,716 cells)
    equally likely. Chi-square goodness of fit at level 1e-3; and the unordered subsets."""
    torch.manual_seed(0)
    n, k, R = 13, 3, 60_000
    out = sample_without_replacement(n, k, (R,))
    code = (out[:, 0] * n + out[:, 1]) * n + out[:, 2]
    counts = torch.bincount(code, minlength=n ** 3)
    cells = [(a * n + b) * n + c for a, b, c in itertools.permutations(range(n), 3)]
    assert counts.sum() == counts[cells].sum()  # no repeats
    assert _chi2_pvalue(counts[cells]) > LEVEL
    sets = out.sort(-1).values
    scode = (sets[:, 0] * n + sets[:, 1]) * n + sets[:, 2]
    scounts = torch.bincount(scode, minlength=n ** 3)
    subset_cells = [(a * n + b) * n + c for a, b, c in itertools.combinations(range(n), 3)]
    assert _chi2_pvalue(scounts[subset_cells]) > LEVEL


def test_sample_without_replacement_shared_draws_are_uniform():
    """One shared subset per call (shape ()), many calls: every element has inclusion
    probability k/n (chi-square over the n inclusion counts, level 1e-3)."""
    torch.manual_seed(1)
    n, k, calls = 40, 7, 6000
    counts = torch.zeros(n)
    for _ in range(calls):
        counts += torch.bincount(sample_without_replacement(n, k), minlength=n)
    assert counts.sum() == k * calls
    assert _chi2_pvalue(counts) > LEVEL


def test_sample_without_replacement_redraw_path_stays_uniform():
    """n = 100, k = 24: the draws leave little margin, so some rows are redrawn with more
    draws; inclusion counts are still uniform (chi-square, level 1e-3)."""
    torch.manual_seed(2)
    out = sample_without_replacement(100, 24, (20_000,))
    assert (out.sort(-1).values.diff(dim=-1) > 0).all()
    assert _chi2_pvalue(torch.bincount(out.reshape(-1), minlength=100)) > LEVEL


def test_per_datapoint_negatives_uniform_over_other_classes():
    """PerDatapointNegatives (built on the sampler) skips the label and is uniform over
    the other K - 1 classes (chi-square, level 1e-3)."""
    torch.manual_seed(3)
    K, s = 30, 4
    labels = torch.full((40_000,), 11)
    neg = PerDatapointNegatives(s)(labels, K)
    assert not (neg.index == 11).any()
    counts = torch.bincount(neg.index.reshape(-1), minlength=K)
    others = torch.cat([counts[:11], counts[12:]])
    assert _chi2_pvalue(others) > LEVEL


def test_shared_negatives_estimator_unbiased():
    """E[sum_j a_j g(k_j)] = sum_{k != y} g(k) for the shared sampler (within 5 s.e.)."""
    torch.manual_seed(4)
    K, s, y = 200, 16, torch.tensor([3, 150])
    g = torch.randn(K, dtype=torch.float64).exp()
    exact = g.sum() - g[y]
    sampler = SharedNegatives(s)
    draws = []
    for _ in range(20_000):
        neg = sampler(y, K)
        draws.append((neg.weight.double() * g[neg.index]).sum(-1))
    draws = torch.stack(draws)
    se = draws.std(0) / math.sqrt(len(draws))
    assert ((draws.mean(0) - exact).abs() < 5 * se).all(), (draws.mean(0), exact, se)


# ------------------------------------------------------------------ importance sampler caches
def test_importance_sampler_is_cached_per_proposal_and_refreshed_on_change():
    q = torch.rand(1000, dtype=torch.float64) + 0.1
    a = get_negative_sampler("importance", 32, q)
    assert get_negative_sampler("importance", 32, q) is a  # no O(K) rebuild per call
    assert get_negative_sampler("importance", 16, q) is not a
    q2 = q.clone()
    assert get_negative_sampler("importance", 32, q2) is not a
    q.mul_(2.0)  # in-place change: a new sampler
    assert get_negative_sampler("importance", 32, q) is not a


def test_importance_sampler_device_tables_are_cached():
    s = ImportanceNegatives(8, torch.arange(1, 101, dtype=torch.float64))
    labels = torch.tensor([0, 5])
    s(labels, 100)
    t1 = s._tables(labels.device)
    s(labels, 100)
    assert s._tables(labels.device)[0] is t1[0]
    import pickle

    s2 = pickle.loads(pickle.dumps(s))
    assert s2._on_device == {} and torch.equal(s2._cdf, s._cdf)


def test_importance_sampler_unbiased():
    torch.manual_seed(5)
    K = 50
    q = torch.arange(1, K + 1, dtype=torch.float64) ** 0.75
    g = torch.randn(K, dtype=torch.float64).exp()
    y = torch.tensor([0, 49])
    sampler = ImportanceNegatives(10, q)
    draws = []
    for _ in range(20_000):
        neg = sampler(y, K)
        draws.append((neg.weight * g[neg.index]).sum(-1))
    draws = torch.stack(draws)
    se = draws.std(0) / math.sqrt(len(draws))
    assert ((draws.mean(0) - (g.sum() - g[y])).abs() < 5 * se).all()


# ------------------------------------------------------------------ fused gather
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("label_shape", [(6,), (2, 6)])
def test_gather_label_and_shared_matches_separate_gathers(with_bias, label_shape):
    g = torch.Generator().manual_seed(0)
    K, D, B = 20, 5, 6
    x = torch.randn(B, D, generator=g, dtype=torch.float64)
    W = torch.randn(K, D, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(K, generator=g, dtype=torch.float64, requires_grad=True) if with_bias else None
    labels = torch.randint(0, K, label_shape, generator=g)
    index = torch.tensor([3, 7, 11, 19])
    fused = LinearUtility(x, W, b, sparse=True)
    y1, n1 = fused.gather_label_and_shared(labels, index)
    y2, n2 = fused.gather(labels.unsqueeze(-1)), fused.gather_shared(index)
    assert y1.shape == y2.shape and n1.shape == n2.shape
    assert torch.allclose(y1, y2) and torch.allclose(n1, n2)
    (y1.sum() + (n1 ** 2).sum()).backward()
    gw1 = W.grad.to_dense().clone()
    gb1 = None if b is None else b.grad.to_dense().clone()
    W.grad = None
    if b is not None:
        b.grad = None
    (y2.sum() + (n2 ** 2).sum()).backward()
    assert torch.allclose(gw1, W.grad.to_dense())
    if b is not None:
        assert torch.allclose(gb1, b.grad.to_dense())
    # the generic base-class version (DenseUtility)
    dense = DenseUtility(x.detach() @ W.detach().T)
    yd, nd = dense.gather_label_and_shared(labels, index)
    assert torch.allclose(yd, y2.detach() - (0 if b is None else b.detach()[labels].unsqueeze(-1)))


def test_noise_prior_is_cached_and_respects_validation_flag():
    p1 = _noise_prior(ar.get_noise("gumbel"), torch.float32, torch.device("cpu"), torch.Size([7]))
    p2 = _noise_prior(ar.get_noise("gumbel"), torch.float32, torch.device("cpu"), torch.Size([7]))
    assert p1 is p2 and p1.batch_shape == (7,)
    assert _noise_prior(ar.get_noise("normal"), torch.float32, torch.device("cpu"), torch.Size([7])) is not p1
    old = torch.distributions.Distribution._validate_args
    try:
        pyro.enable_validation(not old)
        p3 = _noise_prior(ar.get_noise("gumbel"), torch.float32, torch.device("cpu"), torch.Size([7]))
        assert p3 is not p1 and p3._validate_args == (not old)
    finally:
        pyro.enable_validation(old)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gumbel_noise_prior_is_the_fast_gumbel_of_torchs_unit_gumbel(dtype):
    """The Gumbel prior is built without torch's Gumbel (a TransformedDistribution whose first
    construction imports sympy): the same FastGumbel(loc, 1.0) the conversion of torch's
    Gumbel(0, 1) gives -- loc, scale, unit scale, log-densities and the expanded shape."""
    shape = torch.Size([3, 4])
    fast = _noise_prior(ar.get_noise("gumbel"), dtype, torch.device("cpu"), shape)
    torch_prior = ar.get_noise("gumbel").distribution(torch.zeros((), dtype=dtype), torch.ones((), dtype=dtype))
    expected = FastGumbel(torch_prior.loc, 1.0).expand(shape)
    x = torch.randn(shape, dtype=dtype)
    assert type(fast) is FastGumbel and fast.unit_scale and fast.batch_shape == shape
    assert torch.equal(fast.loc, expected.loc) and torch.equal(fast.scale, expected.scale)
    assert fast.loc.dtype == dtype and torch.equal(fast.log_prob(x), expected.log_prob(x))


# ------------------------------------------------------------------ local-first eta step
def _dense_model(psi, y, num_negatives=None):
    def model():
        with pyro.plate("data", len(y)):
            ar.sample_categorical("y", psi, obs=y, negatives=SharedNegatives(num_negatives))
    return model


def test_local_first_first_step_is_exact_softmax():
    """With all classes (exact sums) and rho = 1 at the first visit, the local-first step
    sets eta = 1/p(y): the loss is the exact negative log-likelihood and the gradient the
    softmax gradient; the default order uses eta = K instead."""
    g = torch.Generator().manual_seed(0)
    psi = (2 * torch.randn(6, 10, generator=g, dtype=torch.float64)).requires_grad_()
    y = torch.randint(0, 10, (6,), generator=g)
    model = _dense_model(psi, y)
    nll = -psi.log_softmax(-1).gather(-1, y[:, None]).sum()
    ref = torch.autograd.grad(nll, psi)[0]
    guide = GumbelLocalGuide(model, local_first=True)
    loss = ClosedFormELBO().loss_and_grads(model, guide)
    assert loss == pytest.approx(nll.item(), rel=1e-12)
    assert torch.allclose(psi.grad, ref, atol=1e-12)
    assert torch.allclose(guide.log_eta("y_eps").detach(), -psi.log_softmax(-1).gather(-1, y[:, None]).squeeze(-1).detach())
    psi.grad = None
    pyro.clear_param_store()
    guide2 = GumbelLocalGuide(model)  # default: gradient at the initial eta = K
    loss2 = ClosedFormELBO().loss_and_grads(model, guide2)
    assert loss2 > nll.item() + 1.0
    assert torch.allclose(guide2.log_eta("y_eps").detach(), guide.log_eta("y_eps").detach())


def test_local_first_loss_is_a_bound_and_loss_does_not_update():
    g = torch.Generator().manual_seed(1)
    psi = 2 * torch.randn(8, 30, generator=g, dtype=torch.float64)
    y = torch.randint(0, 30, (8,), generator=g)
    model = _dense_model(psi, y, num_negatives=None)
    guide = GumbelLocalGuide(model, local_first=True)
    nll = -psi.log_softmax(-1).gather(-1, y[:, None]).sum().item()
    elbo = ClosedFormELBO()
    guide()
    before = guide.log_eta("y_eps").detach().clone()
    elbo.loss(model, guide)  # evaluation never updates eta
    assert torch.equal(before, guide.log_eta("y_eps").detach())
    for _ in range(3):
        assert elbo.loss_and_grads(model, guide) >= nll - 1e-9  # -bound >= -log p


# ------------------------------------------------------------------ the Pyro step is O(subsample)
def test_linear_classifier_shared_step_touches_only_used_rows():
    from pyro_ar.models import LinearClassifier

    torch.manual_seed(0)
    K, D, N = 5000, 8, 300
    x, y = torch.randn(N, D), torch.randint(0, K, (N,))
    model = LinearClassifier(D, K, likelihood=AR(negatives=SharedNegatives(16)), subsample_size=32,
                             sparse=True)
    guide = GumbelLocalGuide(model, local_first=True)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    svi.step(x, y)
    W0 = pyro.param("weight").detach().clone()
    svi.step(x, y)
    changed = (pyro.param("weight").detach() != W0).any(-1).sum().item()
    assert 0 < changed <= 32 + 16
    opt = svi.optim.optim_objs[pyro.param("weight").unconstrained()]
    assert int(opt.state[pyro.param("weight").unconstrained()]["row_step"].sum()) <= 2 * (32 + 16)


@CUDA
def test_cuda_shared_and_importance_steps():
    from pyro_ar.models import LinearClassifier

    dev = torch.device("cuda")
    K, D, N = 1000, 8, 200
    x, y = torch.randn(N, D, device=dev), torch.randint(0, K, (N,), device=dev)
    for strategy, proposal in (("shared", None), ("importance", torch.rand(K, device=dev) + 0.1)):
        pyro.clear_param_store()
        model = LinearClassifier(D, K, likelihood=get_likelihood("ar", num_negatives=16, strategy=strategy,
                                                                 proposal=proposal), subsample_size=32, sparse=True)
        svi = SVI(model, GumbelLocalGuide(model, local_first=True), lazy_adam({"lr": 0.05}), ClosedFormELBO())
        assert math.isfinite(svi.step(x, y))
        assert pyro.param("weight").device.type == "cuda"
    out = sample_without_replacement(10**6, 64, (4,), device=dev)
    assert out.device.type == "cuda" and (out.sort(-1).values.diff(dim=-1) > 0).all()

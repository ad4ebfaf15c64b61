"""Tests of pyro_ar.models.BayesianLinearClassifier and pyro_ar.infer.posterior: class-subsampled mean-field posteriors over the weights.

Statistical tests use fixed seeds; their tolerances are 4 standard errors of the Monte
Carlo mean (a two-sided 4-sigma band: a false alarm has probability ~6e-5 per test).
"""

import math

import pytest
import torch

import pyro
import pyro.distributions as dist
from torch.distributions import kl_divergence
import pyro.poutine as poutine
from pyro.infer import SVI, Predictive, Trace_ELBO, TraceMeanField_ELBO
from pyro.infer.autoguide import AutoGuideList

import pyro_ar as ar
from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import (
    ClassSubsampledNormal,
    ClosedFormELBO,
    GumbelLocalGuide,
    IterateAverage,
    NoiseLocalGuide,
    default_guide,
    posterior_summary,
    predictive_log_likelihood,
    predictive_probs,
    predictive_top_k,
    train,
)
from pyro_ar.models import BayesianLinearClassifier, LinearClassifier
from pyro_ar.optim import LazyAdam, lazy_adam
from pyro_ar.likelihoods import AR


pytestmark = pytest.mark.usefixtures("seeded", "one_thread", "validation_on")


# ------------------------------------------------------------------ common random numbers
class _FixedNormal(dist.Normal):
    """Normal whose rsample is loc + scale * z for a fixed z (common random numbers)."""

    def __init__(self, loc, scale, z):
        super().__init__(loc, scale)
        self.z = z

    def rsample(self, sample_shape=torch.Size()):
        return self.loc + self.scale * self.z

    def expand(self, batch_shape, _instance=None):
        assert torch.Size(batch_shape) == self.batch_shape  # the plates never broadcast these
        return self


class _FixedGumbel(dist.Gumbel):
    def __init__(self, loc, z):
        super().__init__(loc, torch.ones_like(loc))
        self.z = z

    def rsample(self, sample_shape=torch.Size()):
        return self.loc + self.z

    def expand(self, batch_shape, _instance=None):
        assert torch.Size(batch_shape) == self.batch_shape
        return self


class _CRNGuide(ClassSubsampledNormal):
    """The guide with fixed standard draws per class row and per datapoint: every ELBO
    evaluation uses the same W and eps, only the class subsample changes."""

    def __init__(self, model, zw, zb, ze, **kw):
        super().__init__(model, name="ClassSubsampledNormal", **kw)
        self.zw, self.zb, self.ze = zw, zb, ze

    def _row_distribution(self, loc, scale, classes):
        z = self.zw[classes] if loc.dim() == 2 else self.zb[classes]
        return _FixedNormal(loc, scale, z)

    def _local_distribution(self, q):
        if isinstance(q, torch.distributions.Gumbel):
            return _FixedGumbel(q.loc, self.ze_gumbel)
        return _FixedNormal(q.loc, q.scale, self.ze)

    @property
    def ze_gumbel(self):
        return -torch.log(-torch.log(torch.special.ndtr(self.ze)))  # Gumbel via the normal CDF


def _randomise_guide(guide, K, D, seed=1):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        pyro.param("ClassSubsampledNormal.weight_loc").copy_(torch.randn(K, D, generator=g, dtype=torch.float64))
        pyro.param("ClassSubsampledNormal.weight_scale_unconstrained").copy_(
            torch.randn(K, D, generator=g, dtype=torch.float64) - 1)
        pyro.param("ClassSubsampledNormal.bias_loc").copy_(torch.randn(K, generator=g, dtype=torch.float64))
        pyro.param("ClassSubsampledNormal.bias_scale_unconstrained").copy_(
            torch.randn(K, generator=g, dtype=torch.float64) - 1)


@pytest.mark.parametrize("noise,elbo_cls,stratify", [
    pytest.param("gumbel", ClosedFormELBO, True, marks=pytest.mark.slow),  # closed-form bound, analytic KL
    ("gumbel", ClosedFormELBO, False),      # the paper's shared-negatives estimator (default tier)
    pytest.param("gumbel", Trace_ELBO, True, marks=pytest.mark.slow),  # Monte Carlo KL and Monte Carlo eps
    pytest.param("normal", TraceMeanField_ELBO, True, marks=pytest.mark.slow),  # probit, Laplace local guide, MC eps
])
@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
def test_large_k_elbo_estimator_is_unbiased(noise, elbo_cls, stratify):
    """K = 30: the class-subsampled ELBO (4 negatives, KL on 6 classes) averaged over many
    class subsamples equals the full ELBO (all classes) with the same W and eps draws,
    within 4 standard errors of the mean of the subsampled estimates."""
    K, D, N = 30, 3, 8  # 8 datapoints: their labels cover only some of the 30 classes
    g = torch.Generator().manual_seed(0)
    x = torch.randn(N, D, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (N,), generator=g)
    zw = torch.randn(K, D, generator=g, dtype=torch.float64)
    zb = torch.randn(K, generator=g, dtype=torch.float64)
    ze = torch.randn(N, generator=g, dtype=torch.float64)
    common = dict(stratify=stratify, num_eta_classes=0)
    sub = BayesianLinearClassifier(D, K, likelihood=AR(noise, negatives=4), num_kl_classes=6, **common)
    full = BayesianLinearClassifier(D, K, likelihood=AR(noise, negatives=K), num_kl_classes=K, **common)  # exact sums
    guide_sub, guide_full = _CRNGuide(sub, zw, zb, ze), _CRNGuide(full, zw, zb, ze)
    guide_full(x, y)
    _randomise_guide(guide_full, K, D)  # the two guides share the parameters (same names)
    elbo = elbo_cls()
    exact = elbo.loss(full, guide_full, x, y)
    assert elbo.loss(full, guide_full, x, y) == pytest.approx(exact, rel=1e-10)  # deterministic
    with pyro.validation_enabled(False):  # (speed; the same code path)
        draws = torch.tensor([elbo.loss(sub, guide_sub, x, y) for _ in range(1000)])
    se = draws.std() / math.sqrt(len(draws))
    assert draws.std() > 1e-3 * abs(exact)  # the subsampling is not trivial
    assert abs(draws.mean() - exact) < 4 * se, (draws.mean().item(), exact, se.item())


def test_kl_row_weights_through_plate_scale_and_mask():
    """Per-row KL weight = plate scale K/|C| x poutine.scale |C|/|U| on U, masked elsewhere."""
    K, D = 50, 2
    data = make_linear_teacher(40, D, K, seed=0)
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=5), num_kl_classes=7, num_eta_classes=3,
                                     subsample_size=10)
    guide = ClassSubsampledNormal(model)
    tr = poutine.trace(guide).get_trace(data.x, data.y)
    site = tr.nodes["weight"]
    m = site["value"].shape[0]
    assert site["cond_indep_stack"][0].name == "classes"
    total = site["scale"] * torch.ones(m)
    assert torch.allclose(total[:7], torch.full((7,), K / 7))
    assert site["mask"].tolist() == [True] * 7 + [False] * (m - 7)
    C = tr.nodes["classes"]["value"]
    assert len(set(C.tolist())) == m  # distinct rows
    # the model sees the same class subsample (Pyro replay of the plate's subsample site)
    mtr = poutine.trace(poutine.replay(model, trace=tr)).get_trace(data.x, data.y)
    assert torch.equal(mtr.nodes["classes"]["value"], C)
    assert torch.equal(mtr.nodes["weight"]["mask"], site["mask"])


def test_closed_form_conditional_bound_is_tight_without_subsampling():
    """With all classes, q(eps | W) = Gumbel(log(1 + S(W)), 1) makes the closed-form bound equal
    to the exact log-likelihood at the sampled W: loss = -sum log softmax(W) + KL."""
    K, D, N = 12, 3, 20
    data = make_linear_teacher(N, D, K, seed=3, dtype=torch.float64)
    model = BayesianLinearClassifier(D, K)
    zw = torch.randn(K, D, dtype=torch.float64)
    zb = torch.randn(K, dtype=torch.float64)
    guide = _CRNGuide(model, zw, zb, torch.zeros(N, dtype=torch.float64))
    guide(data.x, data.y)
    _randomise_guide(guide, K, D)
    loc, scale, bloc, bscale = guide.loc_and_scale()
    W, b = loc + scale * zw, bloc + bscale * zb
    nll = -(data.x @ W.T + b).log_softmax(-1).gather(-1, data.y[:, None]).sum()
    prior = dist.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0)
    kl = (kl_divergence(dist.Normal(loc, scale), prior).sum()
          + kl_divergence(dist.Normal(bloc, bscale), prior).sum())
    assert ClosedFormELBO().loss(model, guide, data.x, data.y) == pytest.approx((nll + kl).item(), rel=1e-9)


def test_laplace_local_guide_is_nearly_tight_for_probit():
    """Probit, all classes, W nearly fixed: the A&R ELBO with the Laplace q(eps | W) is below the
    exact (quadrature) log-likelihood and within 0.05 nats per datapoint of it (measured:
    0.024; the Laplace approximation of the skewed p(eps | y, W) is not exact, unlike the
    Gumbel closed form, which is tight)."""
    K, D, N = 6, 3, 30
    data = make_linear_teacher(N, D, K, "normal", weight_scale=2.0, seed=5, dtype=torch.float64)
    model = BayesianLinearClassifier(D, K, likelihood=AR("normal"), prior_scale=100.0)
    guide = ClassSubsampledNormal(model, init_scale=1e-8)
    guide(data.x, data.y)
    with torch.no_grad():
        pyro.param("ClassSubsampledNormal.weight_loc").copy_(data.W.double())
        pyro.param("ClassSubsampledNormal.bias_loc").copy_(data.b.double())
    kl = kl_divergence(dist.Normal(torch.zeros(K * (D + 1), dtype=torch.float64) + 0.0,
                                        torch.full((K * (D + 1),), 1e-8, dtype=torch.float64)),
                            dist.Normal(torch.tensor(0.0, dtype=torch.float64), 100.0))
    kl = kl + 0.5 * torch.cat([data.W.reshape(-1), data.b]).double() ** 2 / 100.0 ** 2
    exact = ar.UtilityCategorical(data.x @ data.W.T + data.b, "normal").log_prob(data.y).sum().item()
    draws = torch.tensor([-TraceMeanField_ELBO().loss(model, guide, data.x, data.y) for _ in range(300)])
    ll = draws + kl.sum()
    se = ll.std() / math.sqrt(len(ll))
    assert ll.mean() - 4 * se <= exact
    assert (exact - ll.mean()) / N < 0.05


def test_step_touches_only_the_rows_of_the_class_subsample():
    """Sparse gradients with nnz rows = |C|, lazy optimizer: rows outside C, and their
    optimizer state, do not change; parameters are stored unconstrained (no whole-tensor
    transform on access)."""
    K, D = 2000, 4
    data = make_linear_teacher(500, D, K, seed=1)
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=8), subsample_size=16)
    guide = ClassSubsampledNormal(model)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    svi.step(data.x, data.y)
    store = pyro.get_param_store()
    names = [n for n in store.keys() if n.startswith("ClassSubsampledNormal")]
    assert len(names) == 4
    for n in names:
        assert store._constraints[n] is torch.distributions.constraints.real
    before = {n: pyro.param(n).detach().clone() for n in names}
    state = {n: {k: v.clone() for k, v in svi.optim.optim_objs[store._params[n]].state[store._params[n]].items()
                 if torch.is_tensor(v)} for n in names}
    svi.step(data.x, data.y)
    C = guide.last_classes
    changed = torch.zeros(K, dtype=torch.bool)
    for n in names:
        diff = pyro.param(n).detach() != before[n]
        changed |= diff.reshape(K, -1).any(-1)
    touched = torch.zeros(K, dtype=torch.bool)
    touched[C] = True
    assert changed.sum() > 0
    assert not (changed & ~touched).any()
    # the optimizer state (Adam moments, per-row step counts) moved only on the rows of C
    for n in names:
        p = store._params[n]
        for k, v in svi.optim.optim_objs[p].state[p].items():
            if torch.is_tensor(v) and v.dim() >= 1:
                moved = (v != state[n][k]).reshape(K, -1).any(-1)
                assert not (moved & ~touched).any(), (n, k)
    # the gradients of a step are sparse, on exactly the rows of C
    ClosedFormELBO(local_updates=False).loss_and_grads(model, guide, data.x, data.y)
    C = guide.last_classes
    for n in names:
        grad = store._params[n].grad
        assert grad.is_sparse
        rows = grad.coalesce().indices()[0]
        assert set(rows.tolist()) == set(C.tolist())


def test_small_k_stock_autonormal_path_for_every_noise():
    """LinearClassifier(weights="bayes") + AutoGuideList([AutoNormal, NoiseLocalGuide]) runs
    under SVI for the three noises, and Predictive serves posterior draws of the weights."""
    for noise in ("gumbel", "normal", "logistic"):
        pyro.clear_param_store()
        data = make_linear_teacher(120, 3, 5, noise, seed=2)
        model = LinearClassifier(3, 5, likelihood=AR(noise, negatives=2), weights="bayes", subsample_size=40)
        guide = default_guide(model, local="noise", sparse=False)  # AutoNormal + NoiseLocalGuide
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), TraceMeanField_ELBO())
        for _ in range(5):
            assert math.isfinite(svi.step(data.x, data.y))
        samples = Predictive(model, guide=guide[0], num_samples=6, return_sites=["weight", "bias"])(data.x)
        assert samples["weight"].shape[-2:] == (5, 3)
        ll = predictive_log_likelihood(samples, data.x, data.y, noise)["log_lik"]
        assert math.isfinite(ll) and ll < 0


@pytest.mark.parametrize("noise", ["gumbel", "normal", "logistic"])
@pytest.mark.parametrize("local", ["conditional", None])
def test_large_k_path_runs_for_every_noise(noise, local):
    K, D = 200, 3
    data = make_linear_teacher(300, D, K, noise, seed=4)
    model = BayesianLinearClassifier(D, K, likelihood=AR(noise, negatives=10), subsample_size=32)
    if local == "conditional":
        guide = ClassSubsampledNormal(model)
    else:
        guide = AutoGuideList(model, create_plates=model.create_plates)
        guide.append(ClassSubsampledNormal(model, local=None))
        guide.append(GumbelLocalGuide(model) if noise == "gumbel" else NoiseLocalGuide(model))
    elbo = ClosedFormELBO() if noise == "gumbel" else TraceMeanField_ELBO()
    svi = SVI(model, guide, lazy_adam({"lr": 0.02}), elbo)
    for _ in range(4):
        assert math.isfinite(svi.step(data.x, data.y))


def test_posterior_predictive_credible_intervals_and_top_k():
    K, D = 40, 3
    data = make_linear_teacher(400, D, K, seed=6)
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=5), subsample_size=50)
    guide = ClassSubsampledNormal(model)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    for _ in range(30):
        svi.step(data.x, data.y)
    # stock Predictive over the fitted guide: full class plate, all K rows
    pred = Predictive(model, guide=guide, num_samples=7, return_sites=["weight", "bias", "y"])(data.x[:5])
    assert pred["weight"].shape == (7, K, D) and pred["bias"].shape == (7, K) and pred["y"].shape == (7, 5)
    ll_samples = predictive_log_likelihood(pred, data.x, data.y)["log_lik"]
    ll_guide = predictive_log_likelihood(guide, data.x, data.y, num_samples=200)["log_lik"]
    assert math.isfinite(ll_samples) and math.isfinite(ll_guide)
    mean, sd = predictive_probs(guide, data.x[:4], num_samples=20)
    assert torch.allclose(mean.sum(-1), torch.ones(4, dtype=mean.dtype), atol=1e-5)
    lo, hi = guide.credible_interval([0, 3], [1, 2], level=0.9)
    loc, scale, _, _ = guide.loc_and_scale(torch.tensor([0, 3]))
    assert lo.shape == (2, 2) and (lo < loc[:, 1:3]).all() and (hi > loc[:, 1:3]).all()
    assert torch.allclose((hi - lo) / 2, 1.6448536 * scale[:, 1:3], rtol=1e-4)
    lo_b, hi_b = guide.credible_interval([5], "bias")
    assert lo_b.shape == (1,) and (lo_b < hi_b).all()
    top = predictive_top_k(guide, data.x[:3], k=4, num_samples=30)
    assert top["classes"].shape == (3, 4)
    assert (top["mean"][:, :-1] >= top["mean"][:, 1:]).all()
    assert (top["lower"] <= top["mean"] + 1e-6).all() and (top["upper"] >= top["lower"]).all()
    top_s = predictive_top_k(pred, data.x[:3], k=4)
    assert top_s["classes"].shape == (3, 4)
    q = guide.quantiles([0.05, 0.5, 0.95])
    assert q["weight"].shape == (3, K, D)


def test_bad_hyper_parameters_and_plate_mismatch_give_clear_errors():
    with pytest.raises(ValueError, match=r"prior_scale.*-1"):
        BayesianLinearClassifier(3, 10, prior_scale=-1.0)
    with pytest.raises(ValueError, match=r"prior_scale.*0"):
        BayesianLinearClassifier(3, 10, prior_scale=0.0)
    with pytest.raises(ValueError, match=r"num_negatives=11"):
        BayesianLinearClassifier(3, 10, likelihood=AR(negatives=11))
    with pytest.raises(ValueError, match=r"num_kl_classes=20"):
        BayesianLinearClassifier(3, 10, likelihood=AR(negatives=2), num_kl_classes=20)
    with pytest.raises(ValueError, match=r"num_eta_classes=-1"):
        BayesianLinearClassifier(3, 10, likelihood=AR(negatives=2), num_eta_classes=-1)
    with pytest.raises(ValueError, match=r"likelihood='softmax'"):
        BayesianLinearClassifier(3, 10, likelihood="softmax")
    model = BayesianLinearClassifier(3, 10, likelihood=AR(negatives=2), subsample_size=8)
    with pytest.raises(ValueError, match=r"init_scale=0"):
        ClassSubsampledNormal(model, init_scale=0.0)
    with pytest.raises(ValueError, match=r"local='mean'"):
        ClassSubsampledNormal(model, local="mean")
    with pytest.raises(ValueError, match="BayesianLinearClassifier"):
        ClassSubsampledNormal(LinearClassifier(3, 10, weights="bayes"))
    data = make_linear_teacher(50, 3, 10, seed=0)
    # guide list without create_plates: its class plate would be a random, unrelated subsample
    guide = AutoGuideList(model)
    guide.append(ClassSubsampledNormal(model, local=None))
    guide.append(GumbelLocalGuide(model))
    with pytest.raises(ValueError, match="create_plates=model.create_plates"):
        SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO()).step(data.x, data.y)
    # a guide built for another model (different K): the replayed class subsample does not fit
    pyro.clear_param_store()
    other = BayesianLinearClassifier(3, 10, likelihood=AR(negatives=2), subsample_size=8)
    small = BayesianLinearClassifier(3, 6, likelihood=AR(negatives=2), subsample_size=8)
    g = ClassSubsampledNormal(other)
    with pytest.raises(ValueError, match="plate mismatch"):
        SVI(small, g, lazy_adam({"lr": 0.01}), ClosedFormELBO()).step(data.x, data.y.clamp(max=5))


# ------------------------------------------------------------------ real data (fast version)
def _digits_fit(kind, x, y, steps, seed=0):
    """Fit the mean-field posterior on digits; returns the iterate-averaged summary."""
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    if kind == "exact":
        model = BayesianLinearClassifier(x.shape[1], 10, likelihood="exact", subsample_size=200)
        elbo = TraceMeanField_ELBO()
    else:
        model = BayesianLinearClassifier(x.shape[1], 10, likelihood=AR(negatives=3), subsample_size=200,
                                         stratify=False)
        elbo = ClosedFormELBO()
    guide = ClassSubsampledNormal(model)
    sched = pyro.optim.LambdaLR({"optimizer": LazyAdam, "optim_args": {"lr": 0.03},
                                 "lr_lambda": lambda t: (1.0 + t / (steps / 10)) ** -0.7})
    svi = SVI(model, guide, sched, elbo)
    average = IterateAverage(lambda: posterior_summary(guide), start_fraction=0.5)
    train(svi, x, y, num_steps=steps, scheduler=sched, callbacks=[average], log_every=1,
          eval_at_start=False, divergence=False)
    return average.average


@pytest.mark.slow
def test_digits_ar_posterior_agrees_with_exact_likelihood_mean_field():
    """Fast version of benchmarks/bayes_digits.py (part 1): digits (K=10, D=64, standardised,
    1400 train), prior N(0,1), softmax; the A&R posterior (3 shared negatives per step, the
    paper's estimator, q(eps | W) conditional) vs the same mean-field family fitted with the
    exact likelihood (same optimizer, minibatches of 200, 1200 steps, iterate averaging).
    Targets of issue 4: posterior means within 0.2 sds on average, sds within 20% on average
    (mean |sd/sd_ref - 1|), test log-likelihood within 0.03 nats."""
    d = ar.datasets.load_digits()
    x, y = d.x_train, d.y_train
    with pyro.validation_enabled(False):  # speed (validation is exercised by the other tests)
        ref = _digits_fit("exact", x, y, 1200)
        arp = _digits_fit("ar", x, y, 1200)
    dz = ((arp["weight_mean"] - ref["weight_mean"]).abs() / ref["weight_sd"]).mean().item()
    sd_rel = ((arp["weight_sd"] / ref["weight_sd"]) - 1).abs().mean().item()
    draws = lambda sm: {  # noqa: E731
        "weight": sm["weight_mean"] + sm["weight_sd"] * torch.randn((300,) + sm["weight_mean"].shape,
                                                                  generator=torch.Generator().manual_seed(1)),
        "bias": sm["bias_mean"] + sm["bias_sd"] * torch.randn((300, 10), generator=torch.Generator().manual_seed(2))}
    ll_ref = predictive_log_likelihood(draws(ref), d.x_test, d.y_test)["log_lik"]
    ll_ar = predictive_log_likelihood(draws(arp), d.x_test, d.y_test)["log_lik"]
    print(f"digits fast: mean|dmu|/sd={dz:.3f} mean|sd ratio-1|={sd_rel:.3f} ll_ar={ll_ar:.4f} ll_ref={ll_ref:.4f}")
    assert dz <= 0.2, dz
    assert sd_rel <= 0.2, sd_rel
    assert abs(ll_ar - ll_ref) <= 0.03, (ll_ar, ll_ref)

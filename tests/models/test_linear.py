"""Tests of LinearClassifier's likelihood switch (Bouchard a_n, dense utilities, default
guide/ELBO), metrics.bound (the exact training bounds) and train()'s records."""

import math

import numpy as np
import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI

import pyro_ar as ar
from pyro_ar import metrics
from pyro_ar.distributions import BouchardBound, optimal_bouchard_a
from pyro_ar.datasets import make_linear_teacher, make_sparse_teacher
from pyro_ar.infer import ConditionalLocalGuide, GumbelLocalGuide, default_elbo, default_guide, train
from pyro_ar.models import LinearClassifier
from pyro_ar.likelihoods import AR, get_likelihood
from pyro_ar.negatives import SharedNegatives
from pyro_ar.optim import advi_step_size, lazy_adam
from pyro_ar.likelihoods import Bouchard, OVE
from pyro_ar.models import Bayes, Init, MAP


pytestmark = pytest.mark.usefixtures("seeded")


def _data(N=300, D=4, K=9, seed=0, noise="gumbel"):
    return make_linear_teacher(N, D, K, noise, weight_scale=2.0, seed=seed)


# ---------------------------------------------------------------- one switch
@pytest.mark.parametrize("likelihood,noise", [
    ("exact", "gumbel"), ("ove", "gumbel"), ("sampled", "gumbel"), ("bouchard", "gumbel"),
    ("ar", "gumbel"), ("ar", "normal"), ("ar", "logistic"),
])
@pytest.mark.parametrize("utility", ["lazy", "dense"])
def test_one_switch_runs_every_likelihood(likelihood, noise, utility):
    data = _data(noise=noise)
    lik = get_likelihood(likelihood, noise, None if likelihood == "exact" else 3)
    model = LinearClassifier(4, 9, likelihood=lik, subsample_size=50, sparse=True, utility=utility)
    guide = default_guide(model)
    if likelihood == "ar":
        assert isinstance(guide, GumbelLocalGuide if noise == "gumbel" else ConditionalLocalGuide)
    svi = SVI(model, guide, lazy_adam({"lr": 0.01}), default_elbo())
    assert all(math.isfinite(svi.step(data.x, data.y)) for _ in range(3))


def test_dense_and_lazy_utilities_give_the_same_objective():
    """Without class subsampling the objective is deterministic given the parameters, so
    both utility modes must give the same loss and the same gradients."""
    data = _data(N=60)
    results = []
    for utility in ("lazy", "dense"):
        pyro.clear_param_store()
        pyro.set_rng_seed(3)
        model = LinearClassifier(4, 9, likelihood="ove", utility=utility, sparse=False)
        tr = poutine.trace(model).get_trace(data.x, data.y)
        loss = -tr.log_prob_sum()
        loss.backward()
        W = pyro.param("weight")
        results.append((loss.item(), W.grad.clone()))
    assert results[0][0] == pytest.approx(results[1][0], rel=1e-6)
    assert torch.allclose(results[0][1], results[1][1], atol=1e-5)


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="utility"):
        LinearClassifier(3, 4, utility="sparse")
    with pytest.raises(ValueError, match="a must be 'local' or 'optimal', got a='amortised'"):
        LinearClassifier(3, 4, likelihood=Bouchard(a="amortised"))


# ---------------------------------------------------------------- Bouchard a_n
def test_bouchard_local_a_is_per_datapoint_and_only_minibatch_rows_move():
    N, B, K = 200, 25, 9
    data = _data(N=N, K=K)
    model = LinearClassifier(4, K, likelihood=Bouchard(negatives=3, sparse=True), subsample_size=B,
                             sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    svi.step(data.x, data.y)
    a = pyro.param("y_bouchard_a")
    assert a.shape == (N,)
    before = a.detach().clone()
    changed = before != math.log(K - 1)
    assert changed.sum().item() == B  # the first minibatch's rows moved from the init
    svi.step(data.x, data.y)
    moved = (pyro.param("y_bouchard_a").detach() != before).sum().item()
    assert moved == B  # exactly one minibatch's rows moved again


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
def test_bouchard_local_a_converges_to_the_optimal_a():
    """With the weights frozen (lr 0 for them), maximising the bound over a_n reaches the
    optimal a of optimal_bouchard_a, and the bound approaches its optimised value."""
    N, K = 100, 6
    data = _data(N=N, K=K)
    model = LinearClassifier(4, K, likelihood="bouchard", subsample_size=None)
    optim = lazy_adam(lambda name: {"lr": 0.05 if name == "y_bouchard_a" else 1e-12})
    svi = SVI(model, default_guide(model), optim, default_elbo())
    for _ in range(1500):
        svi.step(data.x, data.y)
    u = model.utility(data.x)
    a_star = optimal_bouchard_a(u.full())
    a = pyro.param("y_bouchard_a").detach()
    assert torch.allclose(a, a_star, atol=2e-2)
    fitted = metrics.bound(u, data.y, "bouchard", a=a)["mean"]
    best = metrics.bound(u, data.y, "bouchard")["mean"]
    assert fitted <= best + 1e-6 and fitted == pytest.approx(best, abs=1e-3)
    assert best <= ar.evaluation.log_likelihood(u, data.y)


def test_bouchard_optimal_mode_still_available():
    data = _data(N=50)
    model = LinearClassifier(4, 9, likelihood=Bouchard(a="optimal"), subsample_size=10)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    assert math.isfinite(svi.step(data.x, data.y))
    assert "y_bouchard_a" not in pyro.get_param_store()


def test_bouchard_a_shape_mismatch_is_explained():
    data = _data(N=50)
    model = LinearClassifier(4, 9, likelihood="bouchard", subsample_size=10)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    svi.step(data.x, data.y)
    with pytest.raises(ValueError, match="one a_n per training datapoint"):
        svi.step(data.x[:20], data.y[:20])


# ---------------------------------------------------------------- metrics.bound
def _psi(B=40, K=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return 2.0 * torch.randn(B, K, generator=g, dtype=torch.float64), torch.randint(0, K, (B,), generator=g)


def test_ar_softmax_bound_is_tight_at_optimal_eta_and_below_elsewhere():
    psi, y = _psi()
    ll = psi.log_softmax(-1).gather(-1, y[:, None]).squeeze(-1)
    assert metrics.bound(psi, y, "ar")["mean"] == pytest.approx(ll.mean().item(), abs=1e-12)
    at_opt = metrics.bound(psi, y, "ar", log_eta=-ll)["mean"]
    assert at_opt == pytest.approx(ll.mean().item(), abs=1e-12)
    for shift in (-1.0, 0.5):
        b = metrics.bound(psi, y, "ar", log_eta=-ll + shift, return_pointwise=True)
        assert (b["pointwise"] < ll).all()
        # the explicit formula 1 - log eta - (1 + S_y)/eta
        eta = torch.exp(-ll + shift)
        one_plus_s = torch.exp(psi - psi.gather(-1, y[:, None])).sum(-1)
        assert torch.allclose(b["pointwise"], 1 - eta.log() - one_plus_s / eta, atol=1e-10)


def test_ove_and_bouchard_bounds_match_their_definitions():
    psi, y = _psi()
    ll = psi.log_softmax(-1).gather(-1, y[:, None]).squeeze(-1)
    ove = metrics.bound(psi, y, "ove", return_pointwise=True)["pointwise"]
    d = psi.gather(-1, y[:, None]) - psi
    mask = torch.arange(psi.shape[-1]) != y[:, None]
    assert torch.allclose(ove, torch.where(mask, torch.nn.functional.logsigmoid(d), 0.0).sum(-1))
    assert (ove <= ll).all()
    a = torch.randn(len(y), dtype=torch.float64)
    bou = metrics.bound(psi, y, "bouchard", a=a, return_pointwise=True)["pointwise"]
    assert torch.allclose(bou, BouchardBound(psi, a=a).log_prob(y))
    assert (bou <= ll).all()
    assert torch.allclose(metrics.bound(psi, y, "ove", chunk_size=7, return_pointwise=True)["pointwise"], ove)


@pytest.mark.parametrize("noise", ["normal", "logistic"])
def test_noise_ar_bound_below_quadrature_loglik_and_reproducible(noise):
    psi, y = _psi(B=30, K=6, seed=1)
    exact = ar.UtilityCategorical(psi, noise).log_prob(y)
    loc = torch.randn(30, dtype=torch.float64)
    scale = torch.full((30,), 0.7, dtype=torch.float64)
    b1 = metrics.bound(psi, y, "ar", noise=noise, loc=loc, scale=scale, num_samples=4000)
    b2 = metrics.bound(psi, y, "ar", noise=noise, loc=loc, scale=scale, num_samples=4000)
    assert b1 == b2  # fixed seed
    assert b1["se"] > 0
    assert b1["mean"] - 4 * b1["se"] <= exact.mean().item()


def test_noise_ar_bound_nearly_tight_at_a_good_q():
    """For a single datapoint, q fitted to the posterior of eps (moment matching on a
    grid) makes the bound close to the quadrature log-likelihood."""
    psi = torch.tensor([[1.0, 0.0, -0.5, 0.3]], dtype=torch.float64)
    y = torch.tensor([0])
    noise = ar.get_noise("normal")
    e = torch.linspace(-8, 8, 20001, dtype=torch.float64)
    d = psi[0, 0] - psi[0, 1:]
    logpost = noise.log_density(e) + noise.log_cdf(e[:, None] + d).sum(-1)
    w = torch.softmax(logpost, 0)
    m = (w * e).sum()
    s = ((w * (e - m) ** 2).sum()).sqrt()
    b = metrics.bound(psi, y, "ar", noise="normal", loc=m.reshape(1), scale=s.reshape(1), num_samples=20000)
    exact = ar.UtilityCategorical(psi, "normal").log_prob(y).item()
    assert exact - 0.02 < b["mean"] <= exact + 4 * b["se"]


def test_bound_errors():
    psi, y = _psi()
    with pytest.raises(ValueError, match="not a bound"):
        metrics.bound(psi, y, "sampled")
    with pytest.raises(ValueError, match="loc and scale"):
        metrics.bound(psi, y, "ar", noise="normal")


# ---------------------------------------------------------------- train() records
def test_train_records_losses_evaluations_and_step_times():
    data = _data(N=100)
    model = LinearClassifier(4, 9, likelihood=OVE(negatives=3), subsample_size=20)
    svi = SVI(model, default_guide(model), advi_step_size({"lr": 0.02}), default_elbo())
    calls = []

    def eval_fn():
        calls.append(1)
        return {"ev": len(calls)}
    times = []
    hist = train(svi, data.x, data.y, num_steps=20, eval_every=10, log_every=2, eval_fn=eval_fn,
                 step_times=times)
    assert [h["step"] for h in hist] == list(range(0, 21, 2))
    assert [h["step"] for h in hist if "ev" in h] == [0, 10, 20]
    assert len(times) == 20 and all(t > 0 for t in times)
    assert all(h["step_time"] > 0 for h in hist[1:])
    assert all(math.isfinite(h["loss"]) for h in hist[1:])


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_default_guide_plate_is_o_of_b_and_shared_with_the_model(noise, monkeypatch):
    """The data plate's subsample comes from create_plates (no randperm(N)); the guide draws
    it and Pyro's replay hands the same indices to the model; only those local rows move."""
    N, B = 5000, 64
    data = make_linear_teacher(N, 3, 7, noise, seed=0)
    model = LinearClassifier(3, 7, likelihood=AR(noise, negatives=3), subsample_size=B, sparse=True)
    guide = default_guide(model, local="noise")  # a guide with per-datapoint rows, for the check
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), default_elbo())
    svi.step(data.x, data.y)  # create the parameters

    def no_randperm(*args, **kwargs):
        raise AssertionError("torch.randperm called: O(N) work per step")

    monkeypatch.setattr(torch, "randperm", no_randperm)
    guide_tr = poutine.trace(guide).get_trace(data.x, data.y)
    model_tr = poutine.trace(poutine.replay(model, trace=guide_tr)).get_trace(data.x, data.y)
    idx_g, idx_m = guide_tr.nodes["data"]["value"], model_tr.nodes["data"]["value"]
    assert idx_g.shape == (B,) and torch.equal(idx_g, idx_m) and idx_g.unique().numel() == B

    store = pyro.get_param_store()
    local = [n for n in store.keys() if n.startswith(type(guide).__name__)]
    before = {n: store[n].detach().clone() for n in local}
    svi.step(data.x, data.y)
    moved = set()
    for n in local:
        changed = (store[n].detach() != before[n]).nonzero().flatten()
        moved.update(changed.tolist())
    assert 0 < len(moved) <= B  # at most the minibatch's rows (a row may not change by chance)


# ---- issue 12: argument checks name the argument --------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(subsample_size=0), r"subsample_size must be an integer >= 1 or None, got subsample_size=0"),
    (dict(subsample_size=-5), r"subsample_size must be an integer >= 1 or None, got subsample_size=-5"),
    (dict(subsample_size=2.0), r"subsample_size must be an integer >= 1 or None, got subsample_size=2.0"),
    (dict(num_classes=4.0), r"num_classes must be an integer >= 2, got num_classes=4.0"),
    (dict(num_classes=1), r"num_classes must be an integer >= 2, got num_classes=1"),
    (dict(num_features=2.5), r"num_features must be an integer >= 1, got num_features=2.5"),
    (dict(num_features=True), r"num_features must be an integer >= 1, got num_features=True"),
    (lambda: dict(likelihood=AR(negatives=0)), r"negatives must be None, a positive int .* got negatives=0"),
    (lambda: dict(weights=MAP(prior_scale=float("inf"))), r"prior_scale must be a finite number > 0, got prior_scale=inf"),
    (lambda: dict(weights=MAP(prior_scale=float("nan"))), r"prior_scale must be a finite number > 0, got prior_scale=nan"),
    (lambda: dict(weights=MAP(prior_scale=0.0)), r"prior_scale must be a finite number > 0"),
])
def test_bad_constructor_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):  # (the objects check their own arguments)
        kwargs = kwargs() if callable(kwargs) else kwargs
        args = dict(num_features=3, num_classes=4) | kwargs
        LinearClassifier(args.pop("num_features"), args.pop("num_classes"), **args)


def test_numpy_integers_are_accepted_everywhere():
    """The estimator accepts numpy integers; the models (and their samplers) must too."""
    model = LinearClassifier(np.int64(3), np.int32(6), likelihood=AR(negatives=np.int64(2)),
                             weights=MAP(prior_scale=np.float32(2.0)), subsample_size=np.int64(4))
    assert (model.num_features, model.num_classes, model.num_negatives, model.subsample_size) == (3, 6, 2, 4)
    assert all(type(v) is int for v in (model.num_features, model.num_classes, model.subsample_size))
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    assert math.isfinite(svi.step(torch.randn(10, 3), torch.randint(0, 6, (10,))))


def test_zero_row_inputs_are_named():
    """Issue 12: a 0-row x gave ZeroDivisionError from inside Pyro's plate."""
    model = LinearClassifier(3, 4, subsample_size=2)
    svi = SVI(model, default_guide(model), pyro.optim.Adam({"lr": 0.01}), default_elbo())
    with pytest.raises(ValueError, match=r"x has 0 rows: a model needs at least one datapoint"):
        svi.step(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))
    with pytest.raises(ValueError, match=r"x has 0 rows"):
        model.log_likelihood(torch.zeros(0, 3), torch.zeros(0, dtype=torch.long))


# ------------------------------------------------------------------ sparse inputs, low rank
def _sparse_data(N=40, D=30, K=25, nnz=3, seed=0):
    data = ar.datasets.make_sparse_teacher(N, D, K, nnz_per_row=nnz, rank=2, seed=seed)
    return data.x, data.y


def _one_step(model, x, y):
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.1}), default_elbo())
    svi.step(x, y)  # creates the parameters (and moves them)
    before = {n: pyro.param(n).detach().clone() for n in model.parameter_shapes()}
    svi.step(x, y)
    return {n: pyro.param(n).detach() != before[n] for n in before}


def test_sparse_x_step_changes_only_entries_of_batch_features():
    """Full rank, sparse x: a step moves only W's entries at the minibatch's non-zero
    features (and, per row, at most the classes gathered: labels + negatives)."""
    x, y = _sparse_data()
    model = LinearClassifier(30, 25, likelihood=AR(negatives=SharedNegatives(3)), sparse=True)
    changed = _one_step(model, x, y)["weight"]
    features = torch.zeros(30, dtype=torch.bool)
    features[x.coalesce().indices()[1]] = True
    assert changed.any() and not changed[:, ~features].any()
    assert changed.any(-1).sum() <= len(set(y.tolist())) + 3


def test_low_rank_shapes_parameter_counts_and_touched_rows():
    N, D, K, r = 40, 30, 25, 4
    x, y = _sparse_data(N, D, K)
    model = LinearClassifier(D, K, rank=r, likelihood=AR(negatives=SharedNegatives(3)), sparse=True,
                             subsample_size=8)
    shapes = model.parameter_shapes()
    assert shapes == {"weight": (K, r), "bias": (K,), "embedding": (D, r)}
    assert sum(math.prod(s) for s in shapes.values()) == (D + K) * r + K
    changed = _one_step(model, x, y)
    assert changed["embedding"].any(-1).sum() <= 8 * 3  # rows of the batch's features only
    assert changed["weight"].any(-1).sum() <= 8 + 3     # labels + shared negatives
    W, b = model.weight_and_bias(torch.zeros(()))
    assert W.shape == (K, D)
    u = model.utility(x[:5] if not x.is_sparse else x.index_select(0, torch.arange(5)))
    assert torch.allclose(u.full(), x.to_dense()[:5] @ W.detach().T + b.detach(), atol=1e-5)
    with pytest.raises(ValueError, match="rank must be"):
        LinearClassifier(D, K, rank=0)


# ---------------------------------------------------------------- priors (issue 18)
def test_low_rank_prior_gives_w_entries_the_full_rank_prior_variance():
    """prior_scale s is the prior sd of an entry of W whatever the rank: V, E ~ N(0, s_f^2),
    s_f = sqrt(s) r^(-1/4), so Var(W_kj) = r s_f^4 = s^2 (the old factor scale s gave
    sqrt(r) s^2: 8x too large here). Sample variance of the K x D entries of W = V E^T from
    the "bayes" prior: relative standard error about sqrt(2/(K r) + 2/(D r)) = 3.5 %; 4 SE."""
    K, D, r, s = 150, 200, 16, 2.0
    model = LinearClassifier(D, K, rank=r, weights=Bayes(prior_scale=s))
    assert model.prior_scales() == pytest.approx({"weight": s ** 0.5 / 2, "bias": s, "embedding": s ** 0.5 / 2})
    tr = poutine.trace(model).get_trace(torch.zeros(1, D), None)
    W = tr.nodes["weight"]["value"] @ tr.nodes["embedding"]["value"].T
    assert W.var().item() == pytest.approx(s ** 2, rel=4 * math.sqrt(2 / (K * r) + 2 / (D * r)))


def test_map_prior_is_exact_without_negatives_and_centres_the_bias_at_bias_init():
    """With every class in the estimate the MAP log-prior is the closed form: N(0, s_f^2) on V
    and E, N(bias_init, s^2) on b (a model started at the unigram is shrunk towards it)."""
    D, K, r, s = 6, 5, 4, 0.3
    b0 = torch.linspace(-1.0, 1.0, K)
    model = LinearClassifier(D, K, rank=r, likelihood="exact", weights=MAP(prior_scale=s), init=Init(bias=b0))
    params = {"weight": torch.randn(K, r), "bias": b0 + 0.1, "embedding": torch.randn(D, r)}
    sf = s ** 0.5 * r ** -0.25
    expected = (torch.distributions.Normal(0.0, sf).log_prob(torch.cat([params["weight"].reshape(-1),
                                                                        params["embedding"].reshape(-1)])).sum()
                + torch.distributions.Normal(b0, s).log_prob(params["bias"]).sum())
    assert torch.allclose(model.log_prior_estimate(params), expected)


def test_subsampled_low_rank_prior_is_unbiased():
    """(K/|U|) and (D/|F|) weights: the mean of 1,000 subsampled estimates matches the exact
    log-prior within 4 standard errors (SE from the estimates' own spread)."""
    D, K, r = 12, 10, 3
    exact = LinearClassifier(D, K, rank=r, likelihood="exact", weights=MAP(prior_scale=0.5))
    sub = LinearClassifier(D, K, rank=r, likelihood=AR(negatives=3), weights=MAP(prior_scale=0.5))
    params = {"weight": torch.randn(K, r), "bias": torch.randn(K), "embedding": torch.randn(D, r)}
    draws = torch.stack([sub.log_prior_estimate(params) for _ in range(1000)])
    se = draws.std() / math.sqrt(len(draws))
    assert abs(draws.mean() - exact.log_prior_estimate(params)) < 4 * se


def test_low_rank_map_prior_regularises_under_adam():
    """Regression (issue 18, Brown bag of words): with a rank the MAP prior is estimated on
    max(B, s) rows per step. On s rows (the old default: each E row's prior gradient once
    in ~40 steps here, a rare kick that Adam normalises to a step of about lr) the prior
    barely acts: E grows almost as under maximum likelihood. Same seed, data and steps; the
    default shrinks E to under half of the s-row fit's norm (measured: a quarter)."""
    data = make_sparse_teacher(1000, 200, 150, nnz_per_row=5, rank=4, seed=0)

    def embedding_norm(num_prior_classes):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = LinearClassifier(200, 150, likelihood=AR(negatives=SharedNegatives(5)), rank=8,
                                 weights=MAP(prior_scale=0.01, num_prior_classes=num_prior_classes),
                                 subsample_size=64, sparse=True)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.1}), default_elbo())
        for _ in range(30):
            svi.step(data.x, data.y)
        return model.fitted_parameters()["embedding"].norm().item()

    assert LinearClassifier(200, 150, rank=8, likelihood=AR(negatives=5), subsample_size=64).num_prior_classes == 64
    assert embedding_norm(None) < 0.5 * embedding_norm(5)


def test_penalize_bias_false_leaves_the_bias_out_of_the_map_prior():
    """penalize_bias=False (the estimator's setting): the MAP log-prior does not depend on b;
    the default does (exact prior: no negatives, so no subsampling)."""
    W = torch.zeros(4, 3)
    off = LinearClassifier(3, 4, weights=MAP(prior_scale=0.1, penalize_bias=False))
    on = LinearClassifier(3, 4, weights=MAP(prior_scale=0.1))
    for model, same in ((off, True), (on, False)):
        zero = model.log_prior_estimate({"weight": W, "bias": torch.zeros(4)})
        ten = model.log_prior_estimate({"weight": W, "bias": 10 * torch.ones(4)})
        assert bool(zero == ten) is same


# ------------------------------------------------------------------ issue 25: the default model
def test_default_model_has_a_k_independent_step():
    """``LinearClassifier(D, K)`` with its constructor defaults: a step gathers the rows of
    the labels and 20 negatives and their gradient is row-sparse (before issue 25: every
    class in every step, and dense K x D gradients -- 20x to 200x dearer at K = 10^5 than at
    10^3; benchmarks/default_model.py measures the step times)."""
    N, D, K = 16, 4, 100_000
    model = LinearClassifier(D, K)
    assert model.num_negatives == 20 and model.sparse
    x, y = torch.randn(N, D), torch.randint(0, K, (N,))
    loss = default_elbo().differentiable_loss(model, default_guide(model), x, y)
    loss.backward()
    grad = pyro.param("weight").grad
    assert grad.is_sparse
    rows = torch.unique(grad.coalesce().indices()[0])
    assert len(rows) <= N * (20 + 1)


@pytest.mark.parametrize("K,likelihood,weights,expected", [
    (21, "ar", "mle", (None, False)),         # K - 1 <= 20: every class, dense (any optimizer)
    (22, "ar", "mle", (20, True)),
    (10**4, "exact", "mle", (None, False)),   # exact: every row has a gradient anyway
    (10**4, "ar", "bayes", (20, False)),      # sample sites: dense
    (10**4, AR(negatives=SharedNegatives(8)), "map", (8, True)),
])
def test_default_negatives_and_sparsity(K, likelihood, weights, expected):
    model = LinearClassifier(3, K, likelihood=likelihood, weights=weights)
    assert (model.num_negatives, model.sparse) == expected


def test_explicit_negatives_and_sparsity_are_kept():
    model = LinearClassifier(3, 1000, likelihood=AR(), sparse=False)
    assert (model.num_negatives, model.sparse) == (None, False)
    with pytest.raises(ValueError, match="negatives must be None, a positive int or a .*NegativeSampler .*, got negatives='many'"):
        LinearClassifier(3, 1000, likelihood=AR(negatives="many"))


def test_train_names_a_dense_only_optimizer_for_a_sparse_model():
    data = make_linear_teacher(50, 3, 100, seed=0)
    model = LinearClassifier(3, 100)
    svi = SVI(model, default_guide(model), pyro.optim.Adam({"lr": 0.01}), default_elbo())
    with pytest.raises(ValueError, match="sparse=True .* optimizer is Adam.*lazy_adam"):
        train(svi, data.x, data.y, num_steps=2)

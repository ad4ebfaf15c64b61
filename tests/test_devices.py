"""Every model, guide, estimator and evaluation path on each device (cpu; cuda where present).

Data on the device is all a user puts there: parameters, modules, samplers and evaluations
must follow it. Where a computation draws from an explicit CPU generator (bounds, posterior
draws), the result on the device must equal the CPU's within float tolerance. On a machine
without CUDA the cuda cases skip; ``scripts/gpu_check.sh`` runs them (``-k cuda``) on a GPU.
"""

import math

import numpy as np
import pytest
import scipy.sparse as sp
import torch

import pyro
from pyro.infer import SVI

from pyro_ar.estimator import Weights
from pyro_ar import ARClassifier, metrics
from pyro_ar.datasets import make_linear_teacher, make_sparse_teacher
from pyro_ar.evaluation import evaluate
from pyro_ar.infer import (
    ClassSubsampledNormal,
    ClosedFormELBO,
    default_elbo,
    default_guide,
    predictive_log_likelihood,
    predictive_top_k,
    train,
)
from pyro_ar.likelihoods import AR, Exact
from pyro_ar.models import (BayesianLinearClassifier, CategoricalLatentGP, CategoricalLatentModel,
                            LinearClassifier, NeuralClassifier)
from pyro_ar.models import LocalPosterior, SessionEncoder, SparseGPMap
from pyro_ar.models.latent import session_metrics
from pyro_ar.models.latent_gp import frequency_log_predictive, marginal_log_probs
from pyro_ar.negatives import ImportanceNegatives, SharedNegatives
from pyro_ar.optim import lazy_adam
from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("seeded")

N, D, K = 300, 5, 30


def _on(device, *tensors):
    return [t.to(device) for t in tensors]


def _assert_params_on(device):
    where = {n: p.device.type for n, p in pyro.get_param_store().named_parameters()}
    assert where and set(where.values()) == {torch.device(device).type}, where


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("likelihood,sparse,utility", [
    ("per_datapoint", True, "lazy"), ("shared", True, "lazy"), ("importance", True, "lazy"),
    ("shared", False, "dense"), ("exact", False, "lazy"),
])
def test_linear_classifier_trains_and_evaluates_on_the_data_device(device, likelihood, sparse, utility):
    d = make_linear_teacher(N, D, K, seed=0)
    x, y = _on(device, d.x, d.y)
    if likelihood == "exact":
        lik = Exact()
    elif likelihood == "importance":  # the proposal on the CPU, the data on the device
        lik = AR(negatives=ImportanceNegatives(8, torch.bincount(d.y, minlength=K).double() + 1))
    else:
        lik = AR(negatives=SharedNegatives(8)) if likelihood == "shared" else AR(negatives=8)
    model = LinearClassifier(D, K, likelihood=lik, weights="map", subsample_size=64, sparse=sparse,
                             utility=utility)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    losses = [svi.step(x, y) for _ in range(30)]
    assert all(math.isfinite(v) for v in losses)
    _assert_params_on(device)
    out = evaluate(model.utility(x), y, ("log_lik", "accuracy", "top5"))
    assert -math.log(K) - 1.0 < out["log_lik"] < 0 and 0 <= out["accuracy"] <= 1


@pytest.mark.parametrize("device", DEVICES)
def test_sparse_inputs_and_low_rank_on_the_data_device(device):
    s = make_sparse_teacher(400, 200, K, nnz_per_row=5, seed=0)
    x, y = _on(device, s.x, s.y)
    model = LinearClassifier(200, K, likelihood=AR(negatives=SharedNegatives(8)), subsample_size=64,
                             sparse=True, rank=4)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    assert all(math.isfinite(svi.step(x, y)) for _ in range(10))
    _assert_params_on(device)
    assert math.isfinite(model.log_likelihood(x, y))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("inputs", ["dense", "sparse"])
def test_estimator_fits_and_predicts_on_the_device(device, inputs, tmp_path):
    if inputs == "dense":
        d = make_linear_teacher(N, D, K, seed=1)
        X, y = d.x.numpy(), d.y.numpy()
    else:
        s = make_sparse_teacher(N, 2_000, K, nnz_per_row=5, seed=1)
        i = s.x.coalesce().indices().numpy()
        X, y = sp.csr_matrix((s.x.coalesce().values().numpy(), (i[0], i[1])), shape=tuple(s.x.shape)), s.y.numpy()
    clf = ARClassifier(weights=Weights('map', prior_scale=1.0), device=device, max_epochs=2, min_steps=10, random_state=0)
    clf.fit(X, y)
    proba = clf.predict_proba(X[:20])
    assert isinstance(proba, np.ndarray) and np.allclose(proba.sum(1), 1, atol=1e-5)
    assert 0 <= clf.score(X, y) <= 1
    path = str(tmp_path / "clf.pt")
    clf.save(path)
    again = ARClassifier.load(path)  # onto the CPU by default
    assert np.allclose(again.predict_proba(X[:20]), proba, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_bayes_estimator_on_the_device(device):
    d = make_linear_teacher(N, D, K, seed=2)
    clf = ARClassifier(device=device, weights=Weights("bayes", prior_scale=1.0, num_posterior_samples=4), max_epochs=1, min_steps=5, random_state=0)
    proba = clf.fit(d.x.numpy(), d.y.numpy()).predict_proba(d.x[:10].numpy())
    assert np.allclose(proba.sum(1), 1, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_non_gumbel_bound_on_the_device_equals_the_cpu_one(device):
    """``metrics.bound`` draws its Monte Carlo noise from a CPU generator (seeded): the same
    draws, so the same bound, whatever the utilities' device."""
    g = torch.Generator().manual_seed(0)
    psi, y = torch.randn(50, 7, generator=g), torch.randint(7, (50,), generator=g)
    loc, scale = torch.randn(50, generator=g), torch.rand(50, generator=g) + 0.5
    ref = metrics.bound(psi, y, "ar", noise="normal", loc=loc, scale=scale, num_samples=8, seed=3)
    got = metrics.bound(*_on(device, psi, y), "ar", noise="normal", loc=loc.to(device), scale=scale.to(device),
                        num_samples=8, seed=3)
    assert math.isclose(got["mean"], ref["mean"], rel_tol=1e-5) and math.isclose(got["se"], ref["se"], rel_tol=1e-4)


def _sessions(U=40, P=30, T=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    items = torch.randint(0, P, (U, T), generator=g)
    items[: U // 2, T // 2:] = -1
    return items


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("posterior,utility", [("amortised", "linear"), ("local", "neural")])
def test_latent_model_follows_the_data_device(device, posterior, utility):
    items = _sessions().to(device)
    posterior = LocalPosterior(40, 2, 30) if posterior == "local" else posterior
    model = CategoricalLatentModel(30, 2, AR(negatives=SharedNegatives(5)), subsample_size=16, hidden_dim=8,
                                   posterior=posterior, utility=utility)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.03}), default_elbo())
    assert all(math.isfinite(svi.step(items)) for _ in range(5))
    _assert_params_on(device)
    s = model.scores(items, num_samples=4)
    assert s.device.type == torch.device(device).type
    assert torch.allclose(s.logsumexp(-1), torch.zeros(len(items), device=device, dtype=s.dtype), atol=1e-4)
    held = items.flip(-1)
    m = model.evaluate_sessions(items, held, k=3)
    assert 0 <= m["recall"] <= 1 and m["log_lik"] < 0


@pytest.mark.parametrize("device", DEVICES)
def test_session_metrics_on_the_device_equal_the_cpu_ones(device):
    g = torch.Generator().manual_seed(1)
    scores = torch.randn(12, 20, generator=g)
    observed, held = _sessions(12, 20, 4, seed=1), _sessions(12, 20, 3, seed=2)
    ref = session_metrics(lambda obs: scores[: len(obs)], observed, held, k=3, chunk_size=5)
    dev_scores = scores.to(device)
    got = session_metrics(lambda obs: dev_scores[: len(obs)], observed.to(device), held.to(device), k=3,
                          chunk_size=5)
    assert got == pytest.approx(ref, rel=1e-6)


CARDS = [6, 6, 3]


def _categorical_table(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.stack([torch.randint(0, k, (n,), generator=g) for k in CARDS], 1)
    x[::5, 1] = -1
    return x


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("utility", ["gp", "linear"])
def test_latent_gp_trains_and_imputes_on_the_data_device(device, utility):
    x = _categorical_table().to(device)
    model = CategoricalLatentGP(CARDS, 2, AR(negatives=SharedNegatives(2)),
                                posterior=SessionEncoder(sum(CARDS), 2, hidden_dim=8),
                                utility=SparseGPMap(2, 4) if utility == "gp" else utility, subsample_size=16)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.03}), default_elbo())
    assert all(math.isfinite(svi.step(x)) for _ in range(5))
    _assert_params_on(device)
    target = torch.full_like(x, -1)
    target[:, 2] = x[:, 2]
    observed = x.masked_fill(target >= 0, -1)
    logp = model.log_predictive(observed, target, num_samples=3)
    assert logp.shape == (40,) and (logp <= 0).all()
    assert math.isfinite(model.evaluate_imputation(observed, target, num_samples=2)["log_lik"])


@pytest.mark.parametrize("device", DEVICES)
def test_frequency_baselines_on_the_device_equal_the_cpu_ones(device):
    x = _categorical_table()
    target = torch.full_like(x, -1)
    target[:, 0] = x[:, 0]
    ref = marginal_log_probs(x, CARDS), frequency_log_predictive(x, target, CARDS)
    got = marginal_log_probs(x.to(device), CARDS), frequency_log_predictive(x.to(device), target.to(device), CARDS)
    for a, b in zip(got, ref):
        assert a.device.type == torch.device(device).type and torch.allclose(a.cpu(), b)


@pytest.mark.parametrize("device", DEVICES)
def test_class_subsampled_posterior_and_its_predictive_on_the_device(device):
    d = make_linear_teacher(N, D, K, seed=3)
    x, y = _on(device, d.x, d.y)
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=5), subsample_size=50)
    guide = ClassSubsampledNormal(model)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    assert all(math.isfinite(svi.step(x, y)) for _ in range(10))
    _assert_params_on(device)
    ll = predictive_log_likelihood(guide, x, y, num_samples=10)["log_lik"]
    assert math.isfinite(ll)
    top = predictive_top_k(guide, x[:3], k=4, num_samples=10)
    assert top["classes"].shape == (3, 4) and (top["lower"] <= top["upper"]).all()
    lo, hi = guide.credible_interval([0, 3], [1, 2])
    assert (lo < hi).all() and lo.device.type == torch.device(device).type
    g = torch.Generator().manual_seed(0)  # draws from a CPU generator: the same on every device
    W, b = guide.sample_weights(3, generator=g)
    assert W.device.type == torch.device(device).type and W.shape == (3, K, D)


@pytest.mark.parametrize("device", DEVICES)
def test_neural_classifier_body_on_the_device(device):
    d = make_linear_teacher(N, D, K, seed=4)
    x, y = _on(device, d.x, d.y)
    body = torch.nn.Sequential(torch.nn.Linear(D, 16), torch.nn.Tanh()).to(device)
    model = NeuralClassifier(body, 16, K, likelihood=AR(negatives=SharedNegatives(8)), subsample_size=64,
                             sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    assert all(math.isfinite(svi.step(x, y)) for _ in range(5))
    _assert_params_on(device)
    assert math.isfinite(model.log_likelihood(x, y))


@pytest.mark.parametrize("device", DEVICES)
def test_checkpoint_resumes_a_run_on_the_device(device, tmp_path):
    """Interrupted after 6 steps and resumed, a run takes the same steps as an uninterrupted
    one (the device's RNG state is in the checkpoint); within float tolerance, since CUDA's
    scatter-adds may sum in another order."""
    d = make_linear_teacher(N, D, K, seed=5)
    x, y = _on(device, d.x, d.y)

    def run(num_steps, path=None):
        pyro.clear_param_store()
        model = LinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=32, sparse=True)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
        hist = train(svi, x, y, num_steps=num_steps, checkpoint=path, log_every=1)
        return [h["loss"] for h in hist if h["step"] > 0], pyro.param("weight").detach().clone()

    pyro.set_rng_seed(0)
    ref_losses, ref_w = run(12)
    path = str(tmp_path / "run.pt")
    pyro.set_rng_seed(0)
    first, _ = run(6, path)
    pyro.set_rng_seed(123)  # scrambled: the checkpoint restores the RNGs
    second, w = run(12, path)
    assert len(first) == 6 and len(second) == 12  # the resumed history holds the first 6 steps too
    assert np.allclose(second, ref_losses, rtol=1e-4)
    assert w.device.type == torch.device(device).type and torch.allclose(w, ref_w, atol=1e-5)

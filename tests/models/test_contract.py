"""The contract every model of pyro_ar.models meets, run over one table of models.

Each row builds a model and data for it; every test below runs on every row: the sites a
step emits, the O(B) data plate shared with the default guide, one SVI step with the default
guide and ELBO, prediction without labels, exact evaluation, repr, bad input.
"""

import math
from typing import Callable, NamedTuple

import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import default_elbo, default_guide, train
from pyro_ar.likelihoods import OVE, Bouchard
from pyro_ar.models import BayesianLinearClassifier, BigramLanguageModel, CategoricalModel, LinearClassifier
from pyro_ar.negatives import SharedNegatives
from pyro_ar.optim import lazy_adam

N, D, K, B = 400, 3, 12, 32


def _linear_data():
    d = make_linear_teacher(N, D, K, seed=0)
    return d.x, d.y


def _bigram_data():
    g = torch.Generator().manual_seed(0)
    prev = torch.randint(0, K, (N,), generator=g)
    return prev, (prev * 3 + torch.randint(0, 2, (N,), generator=g)) % K


MODELS = {
    "linear-ar-gumbel": (lambda: LinearClassifier(D, K, num_negatives=3, subsample_size=B, sparse=True),
                         _linear_data),
    "linear-ar-normal-map": (lambda: LinearClassifier(D, K, noise="normal", num_negatives=3, weights="map",
                                                      subsample_size=B, sparse=True), _linear_data),
    "linear-ove-shared": (lambda: LinearClassifier(D, K, likelihood=OVE(SharedNegatives(4)),
                                                   subsample_size=B, sparse=True), _linear_data),
    "linear-bouchard": (lambda: LinearClassifier(D, K, likelihood=Bouchard(negatives=3),
                                                 subsample_size=B, sparse=True), _linear_data),
    "linear-bayes": (lambda: LinearClassifier(D, K, noise="logistic", num_negatives=3, weights="bayes",
                                              subsample_size=B), _linear_data),
    "bigram-ar": (lambda: BigramLanguageModel(K, 4, num_negatives=3, strategy="shared", subsample_size=B),
                  _bigram_data),
    "bayesian-linear": (lambda: BayesianLinearClassifier(D, K, num_negatives=3, subsample_size=B),
                        _linear_data),
}


class Case(NamedTuple):
    model: CategoricalModel
    x: torch.Tensor
    y: torch.Tensor
    rebuild: Callable[[], CategoricalModel]  # a fresh model of the same configuration


@pytest.fixture(params=sorted(MODELS))
def case(request):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    make_model, make_data = MODELS[request.param]
    yield Case(make_model(), *make_data(), make_model)
    pyro.clear_param_store()


def test_is_a_categorical_model(case):
    model = case.model
    assert isinstance(model, CategoricalModel)
    assert type(model).__name__ in repr(model)


def test_sites_of_a_training_step(case):
    model, x, y, _ = case
    tr = poutine.trace(model).get_trace(x, y)
    sites = {n: s for n, s in tr.nodes.items() if s["type"] == "sample"}
    assert sites[model.site]["is_observed"]
    assert sites[model.site]["fn"].batch_shape == (B,)
    has_eps = f"{model.site}_eps" in sites
    assert has_eps == model.likelihood.has_local_latent
    assert tr.nodes["data"]["value"].shape == (B,)


def test_data_plate_is_o_of_b_and_shared_with_the_default_guide(case, monkeypatch):
    model, x, y, _ = case
    guide = default_guide(model)
    SVI(model, guide, lazy_adam({"lr": 0.01}), default_elbo(model)).step(x, y)  # set up
    randperm = torch.randperm

    def small_randperm(n, *args, **kwargs):
        assert n < N, f"torch.randperm({n}) called: O(N) work per step"
        return randperm(n, *args, **kwargs)

    monkeypatch.setattr(torch, "randperm", small_randperm)
    guide_tr = poutine.trace(guide).get_trace(x, y)
    model_tr = poutine.trace(poutine.replay(model, trace=guide_tr)).get_trace(x, y)
    idx = model_tr.nodes["data"]["value"]
    assert idx.shape == (B,) and idx.unique().numel() == B
    if "data" in guide_tr.nodes:  # guides with latent variables open the model's plate
        assert torch.equal(guide_tr.nodes["data"]["value"], idx)


def test_one_svi_step_with_the_default_guide_and_elbo(case):
    model, x, y, _ = case
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo(model))
    svi.step(x, y)
    store = pyro.get_param_store()
    before = {n: store[n].detach().clone() for n in store.keys()}
    losses = [svi.step(x, y) for _ in range(3)]
    assert all(math.isfinite(v) for v in losses)
    assert any(not torch.equal(store[n].detach(), before[n]) for n in before)


def test_prediction_without_labels_draws_labels(case):
    model, x = case.model, case.x
    labels = model(x[:7])
    assert labels.shape == (7,) and labels.dtype == torch.long
    assert int(labels.min()) >= 0 and int(labels.max()) < K


def test_exact_evaluation_under_the_fitted_parameters(case):
    model, x, y, _ = case
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo(model))
    svi.step(x, y)
    if model.weights == "bayes":
        with pytest.raises(ValueError, match="bayes"):
            model.log_likelihood(x, y)
        return
    full = model.utility(x).full().double()
    if model.noise.name == "gumbel":
        expected = full.log_softmax(-1).gather(-1, y[:, None]).mean().item()
        assert model.log_likelihood(x, y) == pytest.approx(expected, abs=1e-9)
    out = model.evaluate(x, y, metrics=("log_lik", "accuracy"))
    assert out["accuracy"] == pytest.approx((full.argmax(-1) == y).double().mean().item())


def test_bad_labels_are_named(case):
    model, x, y, _ = case
    with pytest.raises(ValueError, match="shape"):
        model(x, y[:-1])


def test_checkpoint_round_trip_continues_the_same_trajectory(case, tmp_path):
    """train() interrupted after 3 steps and resumed from its checkpoint with fresh objects
    gives bit for bit the losses and parameters of 6 uninterrupted steps."""
    def run(num_steps, path=None):
        fresh = case.rebuild()
        svi = SVI(fresh, default_guide(fresh), lazy_adam({"lr": 0.05}), default_elbo(fresh))
        kw = {} if path is None else dict(checkpoint=path, checkpoint_every=1)
        history = train(svi, case.x, case.y, num_steps=num_steps, log_every=1, **kw)
        params = {n: v.detach().clone() for n, v in pyro.get_param_store().items()}
        return [r["loss"] for r in history if r["step"] > 0], params

    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    losses, params = run(6)
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    path = tmp_path / "run.pt"
    first, _ = run(3, path)
    pyro.clear_param_store()
    pyro.set_rng_seed(123)  # scrambled: the checkpoint restores the RNG
    rest, resumed = run(6, path)
    assert first == losses[:3] and rest == losses  # the resumed history holds the first part
    assert resumed.keys() == params.keys()
    assert all(torch.equal(resumed[n], params[n]) for n in params)



@pytest.mark.parametrize("name", ["linear-ar-gumbel", "linear-ove-shared", "bigram-ar"])
def test_sample_weight_counts_a_datapoint_as_copies(name):
    """Full batch, every class: the loss with weight 2 on datapoint 0 and 0 on datapoint 1
    equals the loss on the data set where datapoint 0 appears twice and 1 not at all
    (deterministic: exact class sums, closed-form bound at the initial eta)."""
    make_model, make_data = MODELS[name]
    x, y = (t[:40] for t in make_data())
    w = torch.ones(40)
    w[0], w[1] = 2.0, 0.0
    keep = torch.cat([torch.tensor([0, 0]), torch.arange(2, 40)])
    losses = []
    for args in ((x, y, w), (x[keep], y[keep])):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = make_model()
        model.subsample_size = None
        if model.likelihood.sampler.num_negatives is not None:
            model.likelihood.sampler.num_negatives = None
        guide = default_guide(model)
        losses.append(default_elbo(model, local_updates=False).loss(model, guide, *args))
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)

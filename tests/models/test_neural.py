"""Tests of NeuralClassifier: a network body with the lazy output layer, trained by one SVI step."""

import math

import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI
from pyro.nn import PyroModule

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import default_elbo, default_guide, train
from pyro_ar.likelihoods import AR, OVE, Bouchard, Exact, Sampled
from pyro_ar.models import NeuralClassifier
from pyro_ar.negatives import SharedNegatives
from pyro_ar.optim import lazy_adam

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")

N, D, F, K, B = 300, 6, 16, 40, 32


def _data():
    d = make_linear_teacher(N, D, K, weight_scale=2.0, seed=0)
    return d.x, d.y


def _body():
    return torch.nn.Sequential(torch.nn.Linear(D, F), torch.nn.Tanh())


def _body_params(body):
    return [p.detach().clone() for p in body.parameters()]


@pytest.mark.parametrize("likelihood", [
    AR("gumbel", negatives=SharedNegatives(5)), AR("normal", negatives=5), AR("logistic", negatives=5),
    Exact(), OVE(negatives=5), Sampled(negatives=5), Bouchard(negatives=5),
], ids=lambda lik: repr(lik).split("(")[0] + "-" + getattr(lik.noise, "name", ""))
def test_every_likelihood_trains_body_and_output_layer_in_one_step(likelihood):
    x, y = _data()
    body = _body()
    model = NeuralClassifier(body, F, K, likelihood=likelihood, subsample_size=B, sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    before = _body_params(body)
    history = train(svi, x, y, num_steps=3, eval_every=3)
    assert math.isfinite(history[-1]["loss"])
    assert all((p != q).any() for p, q in zip(body.parameters(), before))
    assert set(pyro.get_param_store()) >= {"weight", "bias", "body$$$0.weight", "body$$$0.bias"}


def test_utilities_equal_a_dense_linear_head_on_the_body():
    x, _ = _data()
    body, head = _body(), torch.nn.Linear(F, K)
    model = NeuralClassifier(body, F, K, likelihood="exact")
    psi = model.utility(x, {"weight": head.weight, "bias": head.bias})
    assert psi.full().shape == (N, K)
    assert torch.allclose(psi.full(), head(body(x)).detach(), atol=1e-5)
    idx = torch.tensor([3, 0, K - 1])
    assert torch.allclose(psi.gather_shared(idx), head(body(x))[:, idx].detach(), atol=1e-5)


def test_gradient_reaches_the_body_and_the_output_gradient_is_row_sparse():
    """One A&R log-joint's backward: every body parameter gets a gradient; W's gradient is a
    sparse tensor touching only the minibatch labels' and the shared negatives' rows."""
    x, y = _data()
    body = _body()
    model = NeuralClassifier(body, F, K, likelihood=AR(negatives=SharedNegatives(5)),
                             subsample_size=B, sparse=True)
    guide = default_guide(model)
    tr = poutine.trace(poutine.replay(model, trace=poutine.trace(guide).get_trace(x, y))).get_trace(x, y)
    (-tr.log_prob_sum()).backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in body.parameters())
    grad = pyro.param("weight").grad
    assert grad.is_sparse
    rows = torch.unique(grad.coalesce().indices()[0])
    labels = y[tr.nodes["data"]["value"]]
    assert rows.numel() <= torch.unique(labels).numel() + 5 < K


@pytest.mark.parametrize("weights", ["map", "bayes"])
def test_map_and_bayesian_output_layers_train(weights):
    x, y = _data()
    body = _body()
    model = NeuralClassifier(body, F, K, likelihood=AR("logistic", negatives=5), weights=weights,
                             subsample_size=B)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    before = _body_params(body)
    assert all(math.isfinite(svi.step(x, y)) for _ in range(2))
    assert all((p != q).any() for p, q in zip(body.parameters(), before))


def test_training_fits_the_data_and_evaluates():
    """80 A&R steps raise the exact training log-likelihood far above chance (log 1/K = -3.7)."""
    x, y = _data()
    model = NeuralClassifier(_body(), F, K, likelihood=AR(negatives=5), subsample_size=64, sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    start = model.evaluate(x, y)["log_lik"]
    train(svi, x, y, num_steps=80, eval_every=80)
    end = model.evaluate(x, y)
    assert start < -3.0 and end["log_lik"] > -2.0 and end["accuracy"] > 0.4


def test_a_pyro_module_body_registers_its_own_parameters():
    x, y = _data()
    body = PyroModule[torch.nn.Linear](D, F)
    model = NeuralClassifier(body, F, K, likelihood=AR(negatives=5), subsample_size=B)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    svi.step(x, y)
    names = set(pyro.get_param_store())
    assert {"weight", "bias", "body.weight", "body.bias"} <= names  # output layer and body
    assert pyro.param("weight").shape == (K, F) and pyro.param("body.weight").shape == (F, D)
    assert not any("$$$" in name for name in names)


def test_parameters_in_the_store_are_loaded_into_the_body():
    """A param store restored from a checkpoint holds new tensors: the next model call uses them."""
    x, y = _data()
    body = _body()
    model = NeuralClassifier(body, F, K, likelihood="exact")
    poutine.trace(model).get_trace(x, y)
    state = pyro.get_param_store().get_state()
    state["params"]["body$$$0.bias"] = torch.full((F,), 0.5)
    pyro.get_param_store().set_state(state)
    poutine.trace(model).get_trace(x, y)
    assert torch.equal(body[0].bias.detach(), torch.full((F,), 0.5))


def test_bad_inputs_are_named():
    x, y = _data()
    with pytest.raises(ValueError, match="body must be a torch.nn.Module"):
        NeuralClassifier(lambda x: x, F, K)
    model = NeuralClassifier(_body(), F + 1, K, likelihood="exact")
    with pytest.raises(ValueError, match=r"features of shape \(300, 17\)"):
        poutine.trace(model).get_trace(x, y)
    with pytest.raises(ValueError, match="y must have shape"):
        NeuralClassifier(_body(), F, K)(x, y[:5])
    with pytest.raises(ValueError, match="eval_batch_size"):
        NeuralClassifier(_body(), F, K, eval_batch_size=0)

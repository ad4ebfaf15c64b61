"""Fuzz: model constructors and one training step on fuzzed inputs; the evaluation functions.

A model either refuses its arguments/inputs with a named error or takes a step whose loss is
finite; evaluation returns finite numbers in range (accuracies in [0, 1], log-likelihoods
<= 0, probabilities summing to 1) or a named error.
"""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import pyro
from pyro.infer import SVI

from pyro_ar import evaluation
from pyro_ar.infer import default_elbo, default_guide, train
from pyro_ar.models import (BayesianLinearClassifier, BigramLanguageModel, CategoricalLatentGP,
                            CategoricalLatentModel, LinearClassifier, NeuralClassifier)
from pyro_ar.optim import lazy_adam

from tests.fuzz import _harness as H
from tests.fuzz import strategies as S
from pyro_ar.likelihoods import AR, get_likelihood
from pyro_ar.models import SparseGPMap
from pyro_ar.models.weights import WEIGHTS
from pyro_ar.negatives import SharedNegatives

pytestmark = [pytest.mark.usefixtures("seeded", "validation_on"), pytest.mark.slow]  # a fuzz battery

MODEL_NAMES = ("num_features", "num_classes", "num_words", "embedding_dim", "noise", "likelihood", "negatives",
               "num_negatives", "strategy", "proposal", "weights", "prior_scale", "subsample_size",
               "utility", "x", "y", "prev", "next", "value", "labels")


LINEAR_GOOD = dict(D=[3, np.int64(3)], K=[4, 7, np.int64(5)], noise=["gumbel", "gumbel", "normal", "logistic"],
                   likelihood=["ar", "ar", "exact", "ove", "sampled", "bouchard"],
                   k=[None, 1, 2, np.int64(2)], strategy=["per_datapoint", "shared"],
                   weights=["mle", "map", "bayes"], prior_scale=[1.0, 0.5, np.float32(2.0)],
                   B=[None, 4, np.int64(3)], N=[6, 6, 1], x_kind=["ok"], y_kind=["ok"])
LINEAR_BAD = dict(D=[0, 2.5], K=[1, 4.0], noise=["bogus"], likelihood=["nope"], k=[0, -5, 2.5, True],
                  strategy=["uniform"], weights=["flat"], prior_scale=[0.0, math.inf, math.nan, True],
                  B=[0, -5, 2.5], N=[0], x_kind=["nan", "wrong_d"], y_kind=["out_of_range", "float"])


@settings(H.FUZZ, max_examples=50)
@given(a=S.arguments(LINEAR_GOOD, LINEAR_BAD), st_data=st.data())
def test_linear_classifier_step(a, st_data):
    N = a["N"]
    x = st_data.draw(S.tensors((N, 2 if a["x_kind"] == "wrong_d" else 3), (torch.float32,), scale=1.0,
                               bad_values=False))
    if a["x_kind"] == "nan" and N:
        x[0, 0] = math.nan
    K = a["K"]
    Ki = int(K) if isinstance(K, (int, np.integer)) and K >= 2 else 4
    y = torch.tensor(st_data.draw(st.lists(st.integers(0, Ki - 1), min_size=N, max_size=N)), dtype=torch.long)
    if a["y_kind"] == "out_of_range" and N:
        y[0] = Ki + 3
    elif a["y_kind"] == "float":
        y = y.float() + 0.5

    def run():
        pyro.clear_param_store()
        kw = {} if a["likelihood"] == "exact" else dict(num_negatives=a["k"], strategy=a["strategy"])
        likelihood = get_likelihood(a["likelihood"], a["noise"], **kw)
        weights = WEIGHTS[a["weights"]](prior_scale=a["prior_scale"]) \
            if a["weights"] in ("map", "bayes") else a["weights"]
        model = LinearClassifier(a["D"], K, likelihood=likelihood, weights=weights, subsample_size=a["B"])
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
        return svi.step(x, y)

    ok, loss = H.call(run, MODEL_NAMES, kind="models")
    if ok and H.all_finite(x):
        H.finite("SVI loss", loss)


@settings(H.FUZZ, max_examples=25)
@given(K=st.sampled_from([20, 20, np.int64(12), 1]), D=st.sampled_from([4, 4, 0]),
       k=st.sampled_from([None, 3, 5, np.int64(2), 0]), strategy=st.sampled_from(["shared", "per_datapoint", "importance"]),
       N=st.sampled_from([8, 8, 1, 0]), bad=st.integers(0, 6), st_data=st.data())
def test_bigram_step_and_log_likelihood(K, D, k, strategy, N, bad, st_data):
    Ki = int(K) if K >= 2 else 5
    ids = st_data.draw(st.lists(st.integers(0, Ki - 1), min_size=2 * N, max_size=2 * N))
    prev, nxt = torch.tensor(ids[:N], dtype=torch.long), torch.tensor(ids[N:], dtype=torch.long)
    proposal = torch.ones(Ki) if strategy == "importance" else None
    if bad == 1 and N:
        nxt = nxt[:-1]
    elif bad == 2:
        prev = prev.float()

    def run():
        pyro.clear_param_store()
        lik = get_likelihood("ar", num_negatives=k, strategy=strategy, proposal=proposal)
        model = BigramLanguageModel(K, D, likelihood=lik, subsample_size=4)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
        return svi.step(prev, nxt), model.log_likelihood(prev, nxt)

    ok, out = H.call(run, MODEL_NAMES, kind="models")
    if ok:
        H.finite("SVI loss", out[0])
        H.finite("log_likelihood", out[1])
        assert out[1] <= 0


@settings(H.FUZZ, max_examples=150)
@given(data=S.utility_and_labels(max_b=5, min_k=1, batch_dims=False), fn=st.sampled_from(["log_likelihood", "accuracy", "top_k", "proba", "evaluate"]),
       a=S.arguments(dict(k=[1, 2, np.int64(2)], chunk=[None, 1, 2, np.int64(3)], noise=["gumbel", "gumbel", "normal"],
                          reduce=["mean", "sum", "none"]),
                     dict(k=[0, -1, 2.5, True, 99], chunk=[0, 1.5], noise=["bogus"], reduce=["max"])))
def test_evaluation(data, fn, a):
    utility, labels = data
    k, chunk, noise, reduce = a["k"], a["chunk"], a["noise"], a["reduce"]
    calls = {
        "log_likelihood": lambda: evaluation.log_likelihood(utility, labels, noise, chunk_size=chunk, reduce=reduce),
        "accuracy": lambda: evaluation.accuracy(utility, labels, noise, chunk_size=chunk),
        "top_k": lambda: evaluation.top_k_accuracy(utility, labels, k, noise, chunk_size=chunk),
        "proba": lambda: evaluation.predict_proba(utility, noise, chunk_size=chunk),
        "evaluate": lambda: evaluation.evaluate(utility, labels, ("log_lik", "accuracy"), noise, chunk_size=chunk),
    }
    names = ("utility", "labels", "k", "chunk_size", "noise", "reduce", "rows", "metrics")
    ok, out = H.call(calls[fn], names, kind="evaluation")
    if not ok or not H.all_finite(utility):
        return
    if fn == "proba":
        H.finite("predict_proba", out)
        assert torch.allclose(out.sum(-1), torch.ones((), dtype=out.dtype), atol=1e-6)
    elif fn == "evaluate":
        assert 0.0 <= out["accuracy"] <= 1.0 and out["log_lik"] <= 1e-9
        H.finite("evaluate log_lik", out["log_lik"])
    elif fn == "log_likelihood":
        t = torch.as_tensor(out)
        H.finite("log_likelihood", t)
        assert (t <= 1e-9).all()
    else:
        H.finite(fn, out)
        assert 0.0 <= out <= 1.0


def _model_and_inputs(kind, N):
    """A small model of ``kind`` and good training inputs with N rows (K = 6 classes)."""
    g = torch.Generator().manual_seed(N)
    if kind == "latent":
        return CategoricalLatentModel(6, 2, likelihood=AR(negatives=SharedNegatives(2)), subsample_size=3), [torch.randint(-1, 6, (N, 3), generator=g)]
    if kind == "clgp":
        return (CategoricalLatentGP([3, 6], likelihood=AR(negatives=SharedNegatives(2)),
                                    utility=SparseGPMap(2, 3), subsample_size=3),
                [torch.stack([torch.randint(0, 3, (N,), generator=g), torch.randint(0, 6, (N,), generator=g)], -1)])
    if kind == "bigram":
        return (BigramLanguageModel(6, 3, likelihood=AR(negatives=SharedNegatives(2)), subsample_size=3),
                [torch.randint(0, 6, (N,), generator=g), torch.randint(0, 6, (N,), generator=g)])
    x, y = torch.randn(N, 3, generator=g), torch.randint(0, 6, (N,), generator=g)
    if kind == "neural":
        return NeuralClassifier(torch.nn.Linear(3, 4), 4, 6, likelihood=AR(negatives=2), subsample_size=3), [x, y]
    if kind == "bayes":
        return BayesianLinearClassifier(3, 6, likelihood=AR(negatives=2), subsample_size=3), [x, y]
    return LinearClassifier(3, 6, likelihood=AR(negatives=2), subsample_size=3), [x, y]


def _defect(inputs, defect, row):
    """Apply one defect to the inputs (the labels: the last tensor; x: the first)."""
    x, lab = inputs[0], inputs[-1]
    if defect == "label_high":
        lab[row] = lab.max() + 100 if lab.dim() == 1 else 100
    elif defect == "label_low":
        lab.view(-1)[row] = -5
    elif defect == "float_labels":
        inputs[-1] = lab.double() + 0.5
    elif defect == "zero_rows":
        inputs[:] = [t[:0] for t in inputs]
    elif defect == "list":
        inputs[0] = x.tolist()
    elif defect == "nan_x" and x.is_floating_point():
        x[row, 0] = math.nan
    elif defect == "wide_x":
        inputs[0] = torch.cat([x, x[:, :1]], -1) if x.dim() == 2 else x[:, None]
    elif defect == "float64_x":
        inputs[0] = x.double()
    elif defect == "short_labels" and len(inputs) > 1:
        inputs[-1] = lab[:-1]
    return inputs


@settings(H.FUZZ, max_examples=120)
@given(kind=st.sampled_from(["linear", "neural", "bayes", "latent", "clgp", "bigram"]),
       defect=st.sampled_from(["none", "none", "label_high", "label_low", "float_labels", "zero_rows", "list",
                               "nan_x", "wide_x", "float64_x", "short_labels"]),
       via=st.sampled_from(["step", "train"]), row=st.integers(0, 7), validate=st.booleans())
def test_model_inputs_meet_named_errors_before_the_guide(kind, defect, via, row, validate):
    """Issue 25: for every model, one SVI step (the guide runs first) or ``train`` (which
    checks the whole data first) on inputs with one defect: a named error or a finite loss,
    with Pyro's validation on or off."""
    pyro.clear_param_store()
    model, inputs = _model_and_inputs(kind, 8)
    inputs = _defect(inputs, defect, row)
    finite_inputs = H.all_finite(*[t for t in inputs if isinstance(t, torch.Tensor)])
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())

    def run():
        with pyro.validation_enabled(validate):
            if via == "step":
                return svi.step(*inputs)
            return train(svi, *inputs, num_steps=2)[-1]["loss"]

    ok, loss = H.call(run, MODEL_NAMES + ("items", "body"), kind="models")
    if ok and finite_inputs:
        H.finite("loss", loss)

"""Tests of pyro_ar.infer.compiled: the trace-free SVI step equals the traced one, and every
pairing it does not cover (user models and guides, handlers, validation) stays traced."""

import pytest
import torch

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
from pyro.infer import SVI
from pyro.nn import PyroModule

import pyro_ar.infer.compiled as compiled
from pyro_ar.datasets import make_linear_teacher
from pyro_ar.distributions import FastGumbel
from pyro_ar.infer import ClosedFormELBO, GumbelLocalGuide, default_guide
from pyro_ar.likelihoods import AR, get_likelihood
from pyro_ar.models import BigramLanguageModel, LinearClassifier, NeuralClassifier, NGramBody
from pyro_ar.negatives import ImportanceNegatives
from pyro_ar.optim import lazy_adam


@pytest.fixture
def no_validation():
    with pyro.validation_enabled(False):
        yield


@pytest.fixture
def count_compiled(monkeypatch):
    """A list that records, per ``loss_and_grads`` call, whether the compiled step ran."""
    calls, site = [], compiled._site
    monkeypatch.setattr(compiled, "_site", lambda *a: (lambda r: calls.append(r is not None) or r)(site(*a)))
    return calls


@pytest.fixture
def no_noise_draw(monkeypatch):
    """The traced step's draw of the noise eps ~ q without random numbers (its location): the
    closed-form bound never reads eps, and the compiled step draws none, so with this both
    steps consume the same random numbers (data and class subsamples)."""
    monkeypatch.setattr(FastGumbel, "rsample", lambda self, sample_shape=torch.Size(): self.loc.expand(
        torch.Size(sample_shape) + self.batch_shape).clone())


def _linear(local_first, strategy="shared", subsample_size=32):
    model = LinearClassifier(4, 40, likelihood=get_likelihood("ar", num_negatives=5, strategy=strategy), subsample_size=subsample_size,
                             sparse=True)
    return model, GumbelLocalGuide(model, create_plates=model.create_plates, local_first=local_first)


def _bigram(local_first):
    counts = torch.arange(1, 31, dtype=torch.float64)
    like = AR("gumbel", negatives=ImportanceNegatives(6, counts ** 0.75))
    model = BigramLanguageModel(30, 3, likelihood=like, subsample_size=16)
    return model, default_guide(model, local_first=local_first)


def _neural(local_first, body=None):
    body = body if body is not None else torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh())
    like = AR("gumbel", negatives=ImportanceNegatives(6, torch.arange(1, 41, dtype=torch.float64) ** 0.75))
    model = NeuralClassifier(body, 8, 40, likelihood=like, subsample_size=32, sparse=True)
    return model, default_guide(model, local_first=local_first)


def _ngram(local_first):  # the neural LM's body: sparse input embeddings of integer contexts
    return _neural(local_first, NGramBody(40, 1, 3, 8))


def _run(build, compiled_step, steps=8, seed=0, between=None):
    """(losses, params, guide visits) of ``steps`` SVI steps from a fresh param store."""
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    data = make_linear_teacher(300, 4, 40, seed=0)
    model, guide = build()
    x, y = (data.x, data.y) if isinstance(model, LinearClassifier) else (data.y % 30, (data.y * 7) % 30)
    if isinstance(getattr(model, "body", None), NGramBody):  # one previous word per row
        x = ((data.y * 7) % 40).unsqueeze(-1)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO(compiled=compiled_step))
    losses = []
    for i in range(steps):
        losses.append(svi.step(x, y))
        if between is not None:
            between(i)
    store = pyro.get_param_store()
    params = {n: store[n].detach().clone() for n in store.keys()}
    visits = {n: b.clone() for n, b in guide.named_buffers()}
    pyro.clear_param_store()
    return losses, params, visits


def _assert_same(a, b):
    (la, pa, va), (lb, pb, vb) = a, b
    assert la == lb
    assert pa.keys() == pb.keys() and all(torch.equal(pa[n], pb[n]) for n in pa)
    assert va.keys() == vb.keys() and all(torch.equal(va[n], vb[n]) for n in va)


@pytest.mark.parametrize("local_first", [False, True])
@pytest.mark.parametrize("build", ["linear", "linear_per_datapoint", "linear_full_batch", "bigram", "neural",
                                   "neural_lm"])
def test_compiled_step_equals_the_traced_step(build, local_first, no_validation, no_noise_draw, count_compiled):
    """Losses, parameters (W, b, eta; a network body's weights) and the guide's visit counts
    are bit-identical to the traced step's over several steps (the natural eta step
    included), and the compiled step
    ran at every step after the guide's first (traced) call."""
    make = {"linear": lambda: _linear(local_first),
            "linear_per_datapoint": lambda: _linear(local_first, strategy="per_datapoint"),
            "linear_full_batch": lambda: _linear(local_first, subsample_size=None),
            "bigram": lambda: _bigram(local_first), "neural": lambda: _neural(local_first),
            "neural_lm": lambda: _ngram(local_first)}[build]
    fast = _run(make, True)
    assert count_compiled == [False] + [True] * 7
    count_compiled.clear()
    _assert_same(fast, _run(make, False))
    assert count_compiled == []  # compiled=False never asks
    assert len(set(fast[0])) > 1  # the losses move


def test_compiled_step_reads_the_param_store_every_step(no_validation, no_noise_draw):
    """A parameter changed in the param store between steps (here the bias, set anew), or
    the store cleared and refilled, is what the next compiled step uses: the same
    trajectory as the traced step with the same edits."""
    def edit(i):
        if i == 2:
            store = pyro.get_param_store()
            store["bias"] = torch.full_like(store["bias"], 0.5)
        if i == 4:
            weight = pyro.param("weight").detach().clone()
            pyro.clear_param_store()
            pyro.param("weight", weight * 2)

    def make():
        return _linear(False)

    _assert_same(_run(make, True, between=edit), _run(make, False, between=edit))


def test_param_capture_gives_the_optimizer_the_same_parameters(no_validation, count_compiled):
    """Under SVI's parameter capture the compiled step registers the model's parameters and
    the guide's eta, so the optimizer holds a state for W and b (eta: no gradient)."""
    pyro.clear_param_store()
    data = make_linear_teacher(200, 4, 40, seed=1)
    model, guide = _linear(False)
    optim = lazy_adam({"lr": 0.05})
    svi = SVI(model, guide, optim, ClosedFormELBO())
    for _ in range(3):
        svi.step(data.x, data.y)
    assert count_compiled[1:] == [True, True]
    store = pyro.get_param_store()
    assert {store.param_name(p) for p in optim.optim_objs} == {"weight", "bias"}
    pyro.clear_param_store()


def test_other_pairings_and_handlers_take_the_traced_path(no_validation, count_compiled):
    """A user's model and guide, a subclass, a PyroModule body (it may hold sample sites), a
    handler around the step, validation on, a gradient eta step, or sample weights: traced
    (and they still train)."""
    data = make_linear_teacher(200, 4, 40, seed=2)

    target = data.x @ torch.tensor([1.0, -2.0, 0.5, 3.0])

    def user_model(x, y):  # a regression on the same inputs, its own sites
        w = pyro.param("w", torch.zeros(4))
        with pyro.plate("data", len(x)):
            pyro.sample("obs", dist.Normal(x @ w, 1.0), obs=target)

    def user_guide(x, y):
        pass

    class MyClassifier(LinearClassifier):
        pass

    pyro.clear_param_store()
    svi = SVI(user_model, user_guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    losses = [svi.step(data.x, data.y) for _ in range(100)]
    assert losses[-1] < 0.5 * losses[0]
    assert not any(count_compiled)

    cases = {
        "subclass": lambda: (lambda m: (m, GumbelLocalGuide(m, create_plates=m.create_plates)))(
            MyClassifier(4, 40, likelihood=AR(negatives=5), subsample_size=32, sparse=True)),
        "gradient eta": lambda: (lambda m: (m, GumbelLocalGuide(m, create_plates=m.create_plates,
                                                                local_step="gradient")))(
            LinearClassifier(4, 40, likelihood=AR(negatives=5), subsample_size=32, sparse=True)),
        "PyroModule body": lambda: _neural(False, body=PyroModule[torch.nn.Linear](4, 8)),
    }
    for name, make in cases.items():
        count_compiled.clear()
        pyro.clear_param_store()
        model, guide = make()
        svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
        losses = [svi.step(data.x, data.y) for _ in range(3)]
        assert count_compiled and not any(count_compiled), name

    model, guide = _linear(False)
    pyro.clear_param_store()
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    svi.step(data.x, data.y)
    count_compiled.clear()
    with poutine.scale(scale=2.0):
        svi.step(data.x, data.y)
    with pyro.validation_enabled(True):
        svi.step(data.x, data.y)
    svi.step(data.x, data.y, torch.ones(len(data.x)))  # sample_weight
    assert count_compiled == [False, False, False]
    svi.step(data.x, data.y)
    assert count_compiled[-1] is True
    pyro.clear_param_store()

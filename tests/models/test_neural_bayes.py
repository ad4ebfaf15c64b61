"""Tests of the class-subsampled Bayesian output layer on a network body
(BayesianNeuralClassifier + NeuralClassSubsampledNormal) and of the n-gram LM body."""

import pytest
import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import ClosedFormELBO, default_elbo, default_guide, predictive_log_likelihood
from pyro_ar.models import BayesianNeuralClassifier, NeuralClassifier, NGramBody, context_windows
from pyro_ar.optim import lazy_adam
from pyro_ar.likelihoods import AR

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")

N, D, F, K, B, S = 200, 6, 8, 2000, 16, 10


class CountingBody(torch.nn.Module):
    """An MLP body that counts its forward calls."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(D, F), torch.nn.Tanh())
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.net(x)


def _fit(num_steps=1, noise="gumbel"):
    data = make_linear_teacher(N, D, K, seed=0)
    body = CountingBody()
    model = BayesianNeuralClassifier(body, F, K, likelihood=AR(noise, negatives=S), subsample_size=B)
    guide = default_guide(model)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    svi.step(data.x, data.y)  # creates the parameters
    return data, body, model, guide, svi


def test_a_step_changes_only_the_rows_it_touched_and_the_body():
    data, body, model, guide, svi = _fit()
    store = pyro.get_param_store()
    names = [n for n in store.keys() if n.startswith("ClassSubsampledNormal.")]
    before = {n: store[n].detach().clone() for n in names}
    body_before = [p.detach().clone() for p in body.parameters()]
    svi.step(data.x, data.y)
    C = guide.last_classes
    untouched = torch.ones(K, dtype=torch.bool)
    untouched[C] = False
    assert len(names) == 4
    for n in names:
        changed = (store[n].detach() != before[n]).reshape(K, -1).any(-1)
        assert not changed[untouched].any(), n                     # rows outside C: unchanged
        assert changed[C].float().mean() > 0.9, n                   # rows of C: updated
    assert all((p != q).any() for p, q in zip(body.parameters(), body_before))
    assert C.numel() <= S + S + B < K                            # R, T, labels (padded)


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_shapes_and_one_body_call_per_step(noise):
    data, body, model, guide, svi = _fit(noise=noise)
    calls = body.calls
    tr = poutine.trace(guide).get_trace(data.x, data.y)
    m = tr.nodes["weight"]["value"].shape[0]
    assert tr.nodes["weight"]["value"].shape == (m, F) and tr.nodes["bias"]["value"].shape == (m,)
    assert tr.nodes["y_eps"]["value"].shape == (B,)
    mtr = poutine.trace(poutine.replay(model, trace=tr)).get_trace(data.x, data.y)
    assert body.calls == calls + 1                  # the model took the guide's features
    assert mtr.nodes["y"]["value"].shape == (B,)
    pred = model(data.x[:5])                        # prediction: all K rows, the body runs itself
    assert pred.shape == (5,) and int(pred.max()) < K
    if noise == "gumbel":  # (other noises: by quadrature, slow)
        h = model.eval_features(data.x[:20])
        assert predictive_log_likelihood(guide, h, data.y[:20], num_samples=3)["log_lik"] < 0


def test_token_inputs_and_bad_inputs():
    body = NGramBody(50, 2, 4, F)
    model = BayesianNeuralClassifier(body, F, 50, likelihood=AR(negatives=5), subsample_size=4)
    x = torch.randint(0, 50, (30, 2))
    y = torch.randint(0, 50, (30,))
    SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), ClosedFormELBO()).step(x, y)
    with pytest.raises(ValueError, match="body must be a torch.nn.Module"):
        BayesianNeuralClassifier("mlp", F, K)
    with pytest.raises(ValueError, match=r"y must have shape \(30,\)"):
        model(x, y[:3])


def test_context_windows_rebuild_the_stream_and_reject_other_pairs():
    stream = torch.tensor([1, 5, 6, 1, 7, 8, 9, 1])
    w = context_windows(stream[:-1], stream[1:], 3)
    assert w.shape == (7, 3)
    assert torch.equal(w[:, -1], stream[:-1])                    # the last column is x
    assert w[4].tolist() == [6, 1, 7] and w[0].tolist() == [1, 1, 1]
    with pytest.raises(ValueError, match="consecutive pairs"):
        context_windows(torch.tensor([1, 2, 3]), torch.tensor([2, 4, 5]), 2)


def test_ngram_body_trains_with_a_lazy_output_layer_touching_few_rows():
    V = 300
    body = NGramBody(V, 3, 4, F)
    x, y = torch.randint(0, V, (100, 3)), torch.randint(0, V, (100,))
    model = NeuralClassifier(body, F, V, likelihood=AR(negatives=5), subsample_size=8, sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    svi.step(x, y)
    emb = body.embedding.weight.detach().clone()
    svi.step(x, y)
    changed = (body.embedding.weight.detach() != emb).any(-1)
    assert 0 < int(changed.sum()) <= 8 * 3                       # only the minibatch's context words
    with pytest.raises(ValueError, match="3 word ids per row"):
        body(torch.zeros(2, 4, dtype=torch.long))


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_an_identity_body_gives_the_bayesian_linear_classifier(noise):
    """Same seeds, same plates, same guide: the ELBO of BayesianNeuralClassifier(Identity)
    equals BayesianLinearClassifier's to float precision."""
    from pyro_ar.models import BayesianLinearClassifier

    data = make_linear_teacher(N, D, K, seed=1)
    losses = []
    for model in (BayesianLinearClassifier(D, K, likelihood=AR(noise, negatives=S), subsample_size=B),
                  BayesianNeuralClassifier(torch.nn.Identity(), D, K, likelihood=AR(noise, negatives=S),
                                           subsample_size=B)):
        pyro.clear_param_store()
        pyro.set_rng_seed(3)
        guide = default_guide(model, init_loc_scale=0.1)
        losses.append(ClosedFormELBO().loss(model, guide, data.x, data.y))
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)

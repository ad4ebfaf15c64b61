"""The data plates (pyro_ar.models.plates): an O(B) subsample, drawn only where nothing replays
one, and the models' use of it (the model under SVI draws no subsample and does not re-check
the labels its guide checked)."""

import pytest
import torch

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
from pyro.infer import SVI

from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.models import LinearClassifier
from pyro_ar.models.plates import SubsamplePlate, WeightedPlate
from pyro_ar.optim import lazy_adam

from tests.helpers import DEVICES
from pyro_ar.likelihoods import AR
from pyro_ar.negatives import SharedNegatives

pytestmark = pytest.mark.usefixtures("one_thread")


def _plate_indices(N, B, plate=SubsamplePlate, **kw):
    def fn():
        with plate("data", N, subsample_size=B, **kw) as idx:
            pyro.sample("z", dist.Normal(0.0, 1.0))
            return idx
    return fn


def test_draws_b_distinct_rows_without_o_of_n_work(monkeypatch):
    def no_randperm(n, *a, **kw):
        raise AssertionError(f"torch.randperm({n}): O(N) work")
    monkeypatch.setattr(torch, "randperm", no_randperm)
    tr = poutine.trace(_plate_indices(10**9, 64)).get_trace()
    idx = tr.nodes["data"]["value"]
    assert idx.shape == (64,) and idx.unique().numel() == 64 and 0 <= idx.min() and idx.max() < 10**9
    assert tr.nodes["z"]["scale"] == pytest.approx(10**9 / 64)  # pyro.plate's N / B


def test_each_row_is_drawn_with_probability_b_over_n():
    # 4000 plates of B = 3 out of N = 10: each row's count is Binomial(4000, 0.3), sd ~29;
    # the tolerance is 5 sd (seeded)
    torch.manual_seed(0)
    n, N, B = 4000, 10, 3
    counts = torch.zeros(N)
    for _ in range(n):
        counts += torch.bincount(poutine.trace(_plate_indices(N, B)).get_trace().nodes["data"]["value"],
                                 minlength=N)
    sd = (n * (B / N) * (1 - B / N)) ** 0.5
    assert (counts - n * B / N).abs().max() < 5 * sd


def test_replayed_plate_takes_the_guides_rows_and_draws_nothing():
    guide_tr = poutine.trace(_plate_indices(1000, 16)).get_trace()
    state = torch.get_rng_state()
    # z is replayed too: the replayed function draws no random number at all
    model_tr = poutine.trace(poutine.replay(_plate_indices(1000, 16), trace=guide_tr)).get_trace()
    assert model_tr.nodes["data"]["value"] is guide_tr.nodes["data"]["value"]
    assert torch.equal(torch.get_rng_state(), state)


def test_a_replayed_subsample_of_another_size_is_an_error():
    guide_tr = poutine.trace(_plate_indices(1000, 16)).get_trace()
    with pytest.raises(ValueError, match="subsample_size does not match"):
        poutine.replay(_plate_indices(1000, 8), trace=guide_tr)()


@pytest.mark.parametrize("B", [None, 10])
def test_full_batch_is_pyro_plate(B):
    tr = poutine.trace(_plate_indices(10, B)).get_trace()
    assert tr.nodes["data"]["value"].tolist() == list(range(10))
    assert tr.nodes["z"]["scale"] == 1.0


def test_weighted_plate_weights_the_drawn_rows():
    w = torch.arange(1.0, 101.0)
    tr = poutine.trace(_plate_indices(100, 5, WeightedPlate, weight=w)).get_trace()
    idx = tr.nodes["data"]["value"]
    assert torch.allclose(tr.nodes["z"]["scale"], (100 / 5) * w[idx])


def _svi(N=300, K=40, B=32):
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(N, 3, generator=g), torch.randint(0, K, (N,), generator=g)
    model = LinearClassifier(3, K, likelihood=AR(negatives=SharedNegatives(5)), subsample_size=B, sparse=True)
    guide = default_guide(model)
    return SVI(model, guide, lazy_adam({"lr": 0.01}), default_elbo()), model, guide, x, y


def test_model_under_svi_checks_the_minibatch_labels_once(monkeypatch):
    svi, model, guide, x, y = _svi()
    svi.step(x, y)  # (the first step also traces the model for the guide's prototype)
    checked = []
    check = type(model).check_batch
    monkeypatch.setattr(type(model), "check_batch", lambda self, *a: checked.append(1) or check(self, *a))
    svi.step(x, y)
    assert len(checked) == 1  # the guide's plate; the replayed model's is the same batch
    # the model alone (another subsample) checks its own
    poutine.trace(model).get_trace(x, y)
    assert len(checked) == 2


def test_a_label_written_in_place_is_still_caught():
    svi, model, guide, x, y = _svi()
    svi.step(x, y)
    y[:] = 40  # out of range, written in place: the cached check no longer matches
    with pytest.raises(ValueError, match="y must lie in"):
        svi.step(x, y)


@pytest.mark.parametrize("device", DEVICES)
def test_the_models_subsample_lives_on_the_datas_device(device):
    # (no host-to-device copy of the indices at every step)
    model = LinearClassifier(3, 10, subsample_size=4)
    x, y = torch.randn(50, 3, device=device), torch.randint(0, 10, (50,), device=device)
    with model.data_plate(x, y) as idx:
        assert idx.device == x.device and idx.shape == (4,)

"""Checkpoints under faults (issue 25): a resume with another configuration, flipped bytes,
hand-made but well-formed files, and a resume that says so.

Each test trains a tiny model for a few steps (D = 4, K = 12, 300 rows): seconds in all.
"""

import warnings

import pytest
import torch

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.files import atomic_save
from pyro_ar.infer import (
    CheckpointError,
    NoiseLocalGuide,
    ResumeWarning,
    default_elbo,
    default_guide,
    load_checkpoint,
    save_checkpoint,
    train,
)
from pyro_ar.infer.checkpoint import agree_on_checkpoint, previous_path, run_config
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import lazy_adam
from pyro_ar.likelihoods import AR

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")

D, K, N = 4, 12, 300


def _svi(K=K, lr=0.05, guide=None, optim=None, num_negatives=4):
    model = LinearClassifier(D, K, likelihood=AR(negatives=num_negatives), subsample_size=32, sparse=True)
    guide = default_guide(model) if guide is None else guide(model)
    return SVI(model, guide, optim or lazy_adam({"lr": lr}), default_elbo())


@pytest.fixture
def data():
    return make_linear_teacher(N, D, K, seed=0)


@pytest.fixture
def trained(tmp_path, data):
    """A checkpoint of 6 steps (the README's run, small)."""
    path = str(tmp_path / "run.pt")
    train(_svi(), data.x, data.y, num_steps=6, checkpoint=path)
    pyro.clear_param_store()
    return path


# ---- item 5: another configuration is not resumed; a resume says so -----------------------
@pytest.mark.parametrize("change, names", [
    (dict(lr=0.1), "optim.pt_optim_args.lr: checkpoint 0.05, this run 0.1"),
    (dict(K=13), "model.num_classes: checkpoint 12, this run 13"),
    (dict(guide=NoiseLocalGuide), "guide.class: checkpoint 'pyro_ar.infer.local_guides.GumbelLocalGuide'"),
    (dict(num_negatives=5), "model.likelihood.sampler.num_negatives: checkpoint 4, this run 5"),
    (dict(optim=pyro.optim.SGD({"lr": 0.05})), "optim.class"),  # (SGD takes sparse gradients)
    (dict(optim=lazy_adam(lambda name: {"lr": 0.05 if name == "weight" else 0.1})), "optim.pt_optim_args"),
    (dict(rows=200), "data.args[0].shape: checkpoint [300, 4], this run [200, 4]"),
])
def test_a_checkpoint_of_another_configuration_is_not_resumed(trained, data, change, names):
    """The README's example re-run with another learning rate printed the old result."""
    rows = change.pop("rows", N)
    data_k = make_linear_teacher(N, D, change["K"], seed=0) if "K" in change else data
    svi = _svi(**change)
    with pytest.raises(CheckpointError, match="another configuration") as info:
        train(svi, data_k.x[:rows], data_k.y[:rows], num_steps=10, checkpoint=trained)
    assert names in str(info.value) and "run.pt" in str(info.value)
    assert len(pyro.get_param_store()) == 0       # refused before anything was restored


def test_a_resume_with_the_same_configuration_says_so_and_continues(trained, data):
    with pytest.warns(ResumeWarning, match=r"resumed from the checkpoint .*run\.pt.* at step 6"):
        history = train(_svi(), data.x, data.y, num_steps=10, checkpoint=trained, eval_every=2)
    assert history[-1]["step"] == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # a fresh start says nothing
        pyro.clear_param_store()
        train(_svi(), data.x, data.y, num_steps=2, checkpoint=trained + ".new")


def test_run_config_tells_per_parameter_learning_rates_apart(data):
    a = run_config(_svi(optim=lazy_adam(lambda name: {"lr": 0.1})), data.x, data.y)
    b = run_config(_svi(optim=lazy_adam(lambda name: {"lr": 0.2})), data.x, data.y)
    c = run_config(_svi(optim=lazy_adam(lambda name: {"lr": 0.1})), data.x, data.y)
    assert a != b and a == c


# ---- item 6: flipped bytes ----------------------------------------------------------------
def test_flipped_bytes_in_a_checkpoint_are_an_error_naming_it(trained, data):
    from tests.estimator.test_files import _flip_tensor_bytes
    import pathlib
    _flip_tensor_bytes(pathlib.Path(trained))
    with pytest.raises(CheckpointError, match=r"run\.pt.* is damaged.*checksum"):
        train(_svi(), data.x, data.y, num_steps=10, checkpoint=trained)


# ---- item 15: hand-made but well-formed files ---------------------------------------------
def _weight_state(d):
    return d["optim"]["weight"]


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(step=-5), "step=-5"),
    (lambda d: d.update(step=2.5), "step=2.5"),
    (lambda d: d["optim"].update(weight={}), "optimizer state of parameter 'weight'"),
    (lambda d: d["optim"].update(weight={"state": {}, "param_groups": []}), "parameter 'weight'"),
    (lambda d: _weight_state(d)["state"][0].update(exp_avg=torch.zeros(5, D)), "'exp_avg' of parameter 'weight'"),
    (lambda d: d["optim"].update(ghost=_weight_state(d)), "'ghost', which is not in"),
    (lambda d: d["param_store"]["constraints"].update(weight={"__constraint__": "nope"}), "unknown constraint 'nope'"),
    (lambda d: d.pop("checksum"), "no checksum"),
])
def test_hand_made_checkpoints_are_refused_when_loaded(trained, data, edit, message):
    """A bad optimizer state raised KeyError at the first step; step=-5 was accepted."""
    d = torch.load(trained, weights_only=True)
    had_checksum = "checksum" in d
    edit(d)
    if had_checksum and "checksum" in d:
        atomic_save(d, trained)                 # recomputes the checksum: well-formed
    else:
        torch.save(d, trained)
    with pytest.raises(CheckpointError, match=message) as info:
        load_checkpoint(trained, _svi(), data.x, data.y)
    assert "run.pt" in str(info.value)


def test_saving_a_checkpoint_to_a_folder_names_the_folder(tmp_path, data):
    svi = _svi()
    svi.step(data.x, data.y)
    with pytest.raises(IsADirectoryError, match="it is a folder") as info:
        save_checkpoint(tmp_path, svi, step=1)
    assert ".tmp" not in str(info.value)


# ---- item 4 (one process): the agreement's file handling ----------------------------------
def test_one_process_agreement_resumes_from_its_previous_file(tmp_path, data):
    path = str(tmp_path / "run.pt")
    svi = _svi()
    train(svi, data.x, data.y, num_steps=4, checkpoint=path, checkpoint_group=None)
    atomic_save(torch.load(path, weights_only=True), previous_path(path))
    with open(path, "wb") as f:                 # the newest file is damaged: the previous one is used
        f.write(b"garbage")
    assert agree_on_checkpoint(path) == path
    assert load_checkpoint(path, _svi(), data.x, data.y)["step"] == 4

"""Tests of pyro_ar.infer.train (the training loop) and pyro_ar.infer.checkpoint.

The central property: a run interrupted at step n and resumed from its checkpoint with
brand-new objects (param store cleared, new model / guide / optimizer / SVI, RNG scrambled)
follows bit for bit (``==`` on the losses, ``torch.equal`` on the parameters and buffers)
the trajectory of the uninterrupted run.
"""

import math
import os
import sys
import warnings

import numpy as np
import pytest
import torch

import pyro
from pyro.distributions import constraints
from pyro.infer import SVI
from pyro.infer.autoguide import AutoGuideList, AutoNormal

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import (
    Callback,
    CheckpointError,
    ClassSubsampledNormal,
    ClosedFormELBO,
    DivergenceCheck,
    EarlyStopping,
    GumbelLocalGuide,
    IterateAverage,
    NoiseLocalGuide,
    ResumeWarning,
    TrainingDiverged,
    default_elbo,
    default_guide,
    hide_noise_sites,
    load_checkpoint,
    posterior_summary,
    save_checkpoint,
    train,
)
from pyro_ar.models import BayesianLinearClassifier, LinearClassifier
from pyro_ar.optim import LazyAdam, lazy_adam
from pyro_ar.likelihoods import AR, get_likelihood

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")

D, K, N = 4, 12, 300


# ------------------------------------------------------------------ the runs
def _mle(noise_data):
    model = LinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=32, sparse=True)
    guide = default_guide(model)
    assert isinstance(guide, GumbelLocalGuide)  # natural eta step and visit counters
    return SVI(model, guide, lazy_adam({"lr": 0.05}), default_elbo()), {}


def _map(noise_data):
    model = LinearClassifier(D, K, likelihood=AR("normal", negatives=4), weights="map", subsample_size=32,
                             sparse=True)
    guide = default_guide(model, local="noise")
    assert isinstance(guide, NoiseLocalGuide)  # sparse per-datapoint params
    optim = lazy_adam(lambda name: {"lr": 0.1 if "_eps_" in name else 0.05})
    return SVI(model, guide, optim, default_elbo()), {}


def _bayes(noise_data):
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=32)
    guide = ClassSubsampledNormal(model)
    sched = pyro.optim.LambdaLR({"optimizer": LazyAdam, "optim_args": {"lr": 0.05},
                                 "lr_lambda": lambda t: (1 + t / 10) ** -0.5})
    return SVI(model, guide, sched, ClosedFormELBO()), {
        "scheduler": sched, "average": IterateAverage(lambda: posterior_summary(guide), 0.5)}


def _bayes_autoguide(noise_data):
    """Lazily set-up AutoNormal (weights) + NoiseLocalGuide in an AutoGuideList."""
    model = LinearClassifier(D, K, likelihood=AR("normal", negatives=4), weights="bayes", subsample_size=32,
                             sparse=True)
    guide = AutoGuideList(model, create_plates=model.create_plates)
    guide.append(AutoNormal(hide_noise_sites(model)))
    guide.append(NoiseLocalGuide(model))
    return SVI(model, guide, lazy_adam({"lr": 0.05}), default_elbo()), {}


CASES = {"mle_gumbel": (_mle, "gumbel"), "map_normal": (_map, "normal"),
         "bayes_class_subsampled": (_bayes, "gumbel"), "bayes_autoguide": (_bayes_autoguide, "normal")}


class _Collect(Callback):
    def __init__(self, losses):
        self.losses = losses

    def on_step(self, state):
        self.losses.append(state.loss)


class _Crash(Callback):
    def __init__(self, at):
        self.at = at

    def on_step(self, state):
        if state.step == self.at:
            raise KeyboardInterrupt("simulated crash")


def _eval_fn():
    torch.rand(3)          # evaluations that use the RNGs must not change training
    np.random.rand()
    score = -sum(float(p.detach().abs().sum()) for _, p in pyro.get_param_store().named_parameters())
    return {"score": score}


def _run(case, data, num_steps, path=None, every=None, crash_at=None, average=True):
    make, _ = CASES[case]
    svi, extra = make(data)
    losses = []
    callbacks = [_Collect(losses), _Crash(crash_at)]
    if average and "average" in extra:
        callbacks.append(extra["average"])
    es = EarlyStopping("score", patience=10_000)  # never stops; restores the best at the end
    try:
        train(svi, data.x, data.y, num_steps=num_steps, eval_fn=_eval_fn, callbacks=callbacks,
              early_stopping=es, scheduler=extra.get("scheduler"), checkpoint=path,
              checkpoint_every=every)
    except KeyboardInterrupt:
        pass
    params = {n: p.detach().clone() for n, p in pyro.get_param_store().named_parameters()}
    buffers = {n: b.clone() for n, b in svi.guide.named_buffers()}
    avg = extra["average"].average if average and "average" in extra else None
    return losses, params, buffers, avg, es


def _assert_same_state(a, b):
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("interruption", ["end_of_run", "crash"])
def test_resumed_run_is_bit_identical_to_uninterrupted(case, interruption, tmp_path):
    n = 10
    data = make_linear_teacher(N, D, K, CASES[case][1], seed=0)
    average = interruption == "crash"  # the averaging window depends on num_steps
    ref_losses, ref_params, ref_buffers, ref_avg, ref_es = _run(case, data, 2 * n, average=average)
    assert len(ref_losses) == 2 * n

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    path = str(tmp_path / "run.pt")
    if interruption == "end_of_run":
        first, *_ = _run(case, data, n, path=path, average=average)
        kept = n
    else:  # checkpoints at 7 and 14, crash at 17: steps 15-17 are lost
        first, *_ = _run(case, data, 2 * n, path=path, every=7, crash_at=17)
        assert len(first) == 17
        kept = 14
    torch.load(path, weights_only=True)  # plain data only

    pyro.clear_param_store()  # throw everything away, scramble the RNGs
    pyro.set_rng_seed(12345)
    second, params, buffers, avg, es = _run(case, data, 2 * n, path=path, average=average)
    assert first[:kept] + second == ref_losses
    _assert_same_state(params, ref_params)
    _assert_same_state(buffers, ref_buffers)
    if case == "mle_gumbel":
        assert int(buffers["y_eps_visits"].sum()) == 2 * n * 32  # the counters were restored
    if ref_avg is not None:
        _assert_same_state(avg, ref_avg)
    assert (es.best, es.best_step) == (ref_es.best, ref_es.best_step)


def test_resuming_a_finished_run_takes_no_step(tmp_path):
    data = make_linear_teacher(N, D, K, seed=0)
    path = str(tmp_path / "run.pt")
    svi, _ = _mle(data)
    hist = train(svi, data.x, data.y, num_steps=6, eval_every=3, checkpoint=path)
    steps = []
    svi, _ = _mle(data)
    again = train(svi, data.x, data.y, num_steps=6, eval_every=3, checkpoint=path,
                  callbacks=[lambda rec: steps.append(rec["step"])])
    assert steps == [] and [h["step"] for h in again] == [h["step"] for h in hist] == [0, 3, 6]


# ------------------------------------------------------------------ early stopping
def test_early_stopping_stops_and_restores_the_best_parameters():
    data = make_linear_teacher(N, D, K, seed=0)
    svi, _ = _mle(data)
    scores, snapshots = iter([0.0, 1.0, 3.0, 2.0, 2.5, 9.0]), {}

    def eval_fn():
        store = pyro.get_param_store()
        w = store["weight"].detach().clone() if "weight" in store else None
        snapshots[len(snapshots) * 5] = w
        return {"val": next(scores)}
    es = EarlyStopping("val", patience=2)
    hist = train(svi, data.x, data.y, num_steps=100, eval_every=5, eval_fn=eval_fn, early_stopping=es)
    assert [h["step"] for h in hist] == [0, 5, 10, 15, 20]  # 15 and 20 do not beat 3.0
    assert (es.best, es.best_step, es.stopped) == (3.0, 10, True)
    assert not torch.equal(snapshots[20], snapshots[10])
    assert torch.equal(pyro.param("weight").detach(), snapshots[10])


@pytest.mark.parametrize("mode,min_delta,scores,stop_at", [
    ("max", 0.0, [1, 2, 2, 1, 1], 4),      # ties count as progress, two misses stop
    ("max", 0.5, [1, 1.2, 1.4, 1.6], 2),   # improvements smaller than min_delta are misses
    ("min", 0.0, [5, 4, 6, 3, 7, 8], 5),
    ("max", 0.0, [1, float("nan"), float("nan")], 2),
])
def test_early_stopping_patience_table(mode, min_delta, scores, stop_at):
    es = EarlyStopping("m", mode=mode, patience=2, min_delta=min_delta, restore_best=False)
    stops = [bool(es.on_record({"step": i, "m": s}, None)) for i, s in enumerate(scores)]
    assert stops.index(True) == stop_at and not any(stops[:stop_at])


def test_early_stopping_argument_errors():
    with pytest.raises(ValueError, match="mode"):
        EarlyStopping("m", mode="up")
    with pytest.raises(ValueError, match="patience"):
        EarlyStopping("m", patience=0)
    with pytest.raises(ValueError, match="start_fraction"):
        IterateAverage(dict, start_fraction=1.5)


# ------------------------------------------------------------------ stopping rules
class _ScriptedSVI:
    """Stands in for SVI: returns scripted losses (1.0 when none are given)."""

    def __init__(self, losses=None):
        self.losses, self.calls = losses, 0

    def step(self):
        self.calls += 1
        return 1.0 if self.losses is None else self.losses[self.calls - 1]


@pytest.mark.parametrize("losses,step", [
    ([3.0, 2.0, float("nan")], 3),
    ([1.0, float("-inf")], 2),
    ([10.0] * 10 + [5e6, 1e8], 12),   # 1e8 > 1e6 x median(|L_1..L_10|) = 1e7 > 5e6
])
def test_divergence_raises_with_step_loss_and_advice(losses, step):
    with pytest.raises(TrainingDiverged, match=f"step {step}: the loss became") as err:
        train(_ScriptedSVI(losses), num_steps=len(losses))
    assert "smaller learning rate" in str(err.value) and "standardise the features" in str(err.value)
    assert isinstance(err.value, RuntimeError)
    hist = train(_ScriptedSVI(losses), num_steps=len(losses), divergence=False)
    assert hist[-1]["step"] == len(losses)


def test_divergence_on_a_real_model_with_a_huge_learning_rate(validation_off):
    """lr = 1e4: the first step's loss is finite, the second's inf (NaN after)."""
    data = make_linear_teacher(N, D, K, seed=0)
    model = LinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=32, sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 1e4}), default_elbo())
    with pytest.raises(TrainingDiverged, match="step 2: the loss became inf"):
        train(svi, data.x, data.y, num_steps=5)


def test_a_step_out_of_a_distributions_support_is_a_divergence(validation_on):
    """lr = 1e6 on a Bayesian model: the guide's scale underflows to 0 at step 2 and torch's
    parameter validation raised its constraint ValueError (issue 38); now TrainingDiverged,
    saying which parameter, with the parameters restored."""

    torch.manual_seed(0)
    x, y = torch.randn(8, 3), torch.randint(0, 7, (8,))
    model = BayesianLinearClassifier(3, 7, likelihood=AR(negatives=2), subsample_size=4)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 1e6}), default_elbo())
    with pytest.raises(TrainingDiverged, match=r"step 2: .*learning rate.*the step left the support: parameter scale"):
        train(svi, x, y, num_steps=20)
    model = BayesianLinearClassifier(3, 7, likelihood=AR(negatives=2), subsample_size=4)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 1e6}), default_elbo())
    with pytest.raises(ValueError, match="Expected parameter scale"):  # without the check: torch's own error
        train(svi, x, y, num_steps=20, divergence=False)


def test_divergence_check_arguments():
    with pytest.raises(ValueError, match="factor"):
        DivergenceCheck(factor=0.5)
    with pytest.raises(ValueError, match="warmup"):
        DivergenceCheck(warmup=0)


class _TickingClock:
    """A fake clock for ``train(clock=...)``: each reading advances it by ``tick`` seconds,
    so a step (two readings) takes exactly ``tick`` -- no sleeping, no real time asserted."""

    def __init__(self, tick):
        self.tick, self.now = tick, 0.0

    def __call__(self):
        self.now += self.tick
        return self.now


@pytest.mark.parametrize("clock", ["wall", "process"])
def test_time_is_read_from_the_chosen_real_clock(clock):
    hist = train(_ScriptedSVI(), num_steps=5, clock=clock, eval_every=1)
    last = hist[-1]
    assert last["time"] == (last["wall_time"] if clock == "wall" else last["cpu_time"]) > 0


def test_time_budget_stops_on_the_injected_clock_excluding_evaluation():
    """Steps take 0.25 s on the injected clock (exact in binary); evaluation at every step reads
    the clock as well but is not training time: the 1 s budget stops the run after 4 steps."""
    clock = _TickingClock(0.25)
    svi = _ScriptedSVI()
    hist = train(svi, num_steps=10**9, time_budget=1.0, clock=clock, eval_every=1,
                 eval_fn=lambda: {"now": clock()})
    assert svi.calls == 4 and [h["step"] for h in hist] == [0, 1, 2, 3, 4]
    assert [h["time"] for h in hist] == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert all(h["step_time"] == 0.25 for h in hist[1:])


def test_eval_times_evaluate_at_training_times():
    hist = train(_ScriptedSVI(), num_steps=40, eval_every=1000, eval_times=[0.75, 1.5],
                 eval_fn=lambda: {"ev": 1}, clock=_TickingClock(0.25))
    ev = [h for h in hist if "ev" in h]
    assert [h["step"] for h in ev] == [0, 3, 6, 40]  # step 0, the two times, the end
    assert [h["time"] for h in ev] == [0.0, 0.75, 1.5, 10.0]


def test_clock_must_be_a_name_or_a_function():
    with pytest.raises(ValueError, match=r"clock must be 'wall', 'process' or a function.*clock=3"):
        train(_ScriptedSVI(), num_steps=1, clock=3)


def test_callbacks_can_stop_the_run():
    hist = train(_ScriptedSVI(), num_steps=100, log_every=2, callbacks=[lambda r: r["step"] >= 6])
    assert hist[-1]["step"] == 6

    class StopAt(Callback):
        def on_step(self, state):
            state.stop = state.step == 7
    hist = train(_ScriptedSVI(), num_steps=100, log_every=2, callbacks=[StopAt()])
    assert [h["step"] for h in hist][-2:] == [6, 7]


def test_records_keep_the_old_keys_and_step_times():
    times = []
    hist = train(_ScriptedSVI(), num_steps=10, eval_every=5, step_times=times)
    assert {"step", "time", "loss", "step_time"} <= set(hist[1])
    assert len(times) == 10 and [h["step"] for h in hist] == [0, 5, 10]
    assert math.isnan(hist[0]["loss"]) and hist[1]["loss"] == 1.0


@pytest.mark.parametrize("kwargs,match", [
    ({"num_steps": -1}, "num_steps"), ({"clock": "gpu"}, "clock"), ({"eval_every": 0}, "eval_every"),
    ({"checkpoint_every": 1.5}, "checkpoint_every"), ({"time_budget": -1.0}, "time_budget"),
])
def test_train_argument_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        train(_ScriptedSVI(), **kwargs)


# ------------------------------------------------------------------ checkpoint files
def _trained_svi(data, steps=3):
    svi, _ = _mle(data)
    for _ in range(steps):
        svi.step(data.x, data.y)
    return svi


def test_failing_save_leaves_the_previous_checkpoint_intact(tmp_path, monkeypatch):
    data = make_linear_teacher(N, D, K, seed=0)
    svi = _trained_svi(data)
    path = tmp_path / "run.pt"
    save_checkpoint(path, svi, step=3)
    before = path.read_bytes()
    svi.step(data.x, data.y)
    real_save = torch.save

    def failing_save(obj, f):
        real_save(obj, f)
        f.write(b"half")
        raise OSError("disk full")
    monkeypatch.setattr(torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, svi, step=4)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["run.pt"]  # the temporary file is gone


def test_missing_corrupt_and_foreign_checkpoints_name_the_path(tmp_path):
    data = make_linear_teacher(N, D, K, seed=0)
    svi = _trained_svi(data)
    missing = str(tmp_path / "nope.pt")
    with pytest.raises(CheckpointError, match="no pyro_ar checkpoint file at .*nope.pt"):
        load_checkpoint(missing, svi, data.x, data.y)
    corrupt = tmp_path / "corrupt.pt"
    save_checkpoint(corrupt, svi, step=3)
    corrupt.write_bytes(corrupt.read_bytes()[:100])
    with pytest.raises(CheckpointError, match="cannot read the file .*corrupt.pt"):
        load_checkpoint(corrupt, svi, data.x, data.y)
    foreign = tmp_path / "foreign.pt"
    torch.save({"weights": torch.zeros(2)}, foreign)
    with pytest.raises(CheckpointError, match="foreign.pt.* is not a pyro_ar checkpoint"):
        load_checkpoint(foreign, svi, data.x, data.y)


def test_incompatible_checkpoint_is_a_clear_error(tmp_path):
    data = make_linear_teacher(N, D, K, seed=0)
    path = tmp_path / "gumbel.pt"
    save_checkpoint(path, _trained_svi(data), step=3)  # GumbelLocalGuide: visit counters
    pyro.clear_param_store()
    svi, _ = _map(make_linear_teacher(N, D, K, "normal", seed=0))
    with pytest.raises(CheckpointError, match="gumbel.pt.* into this run.*buffers"):
        load_checkpoint(path, svi, data.x, data.y)
    svi, _ = _mle(data)
    with pytest.raises(CheckpointError, match="not written by train"):
        train(svi, data.x, data.y, num_steps=5, checkpoint=str(path))
    pyro.clear_param_store()
    svi, _ = _mle(data)
    path = str(tmp_path / "es.pt")
    train(svi, data.x, data.y, num_steps=3, checkpoint=path, early_stopping=EarlyStopping("m"))
    svi, _ = _mle(data)
    with pytest.raises(CheckpointError, match="es.pt.*EarlyStopping"):  # its state would be lost
        train(svi, data.x, data.y, num_steps=5, checkpoint=path)


def test_unsaveable_values_are_named(tmp_path):
    data = make_linear_teacher(N, D, K, seed=0)
    svi = _trained_svi(data)
    with pytest.raises(TypeError, match=r"history\[0\]\['model'\]"):
        save_checkpoint(tmp_path / "x.pt", svi, step=3, history=[{"model": object()}])
    assert not (tmp_path / "x.pt").exists()


def test_constraints_round_trip(tmp_path):
    pyro.param("a", torch.tensor([0.5, 2.0]), constraint=constraints.positive)
    pyro.param("b", torch.tensor([0.2, 0.7]), constraint=constraints.interval(0.0, 1.0))
    pyro.param("c", torch.eye(2), constraint=constraints.independent(constraints.greater_than(-1.0), 2))
    pyro.param("d", torch.tensor([0.3, 0.7]), constraint=constraints.simplex)
    before = {n: pyro.param(n).detach().clone() for n in "abcd"}

    class NoOptim:
        pass
    svi = SVI(lambda: None, lambda: None, lazy_adam({"lr": 0.1}), ClosedFormELBO())
    svi.optim = NoOptim()  # no optimizer state to save
    save_checkpoint(tmp_path / "c.pt", svi, step=0)
    pyro.clear_param_store()
    load_checkpoint(tmp_path / "c.pt", svi)
    store = pyro.get_param_store()
    for n in "abcd":
        assert torch.equal(pyro.param(n).detach(), before[n]), n
    assert store._constraints["a"] is constraints.positive
    b = store._constraints["b"]
    assert (type(b).__name__, b.lower_bound, b.upper_bound) == ("_Interval", 0.0, 1.0)
    c = store._constraints["c"]
    assert c.reinterpreted_batch_ndims == 2 and c.base_constraint.lower_bound == -1.0
    assert all(store._params[n].requires_grad for n in "abcd")


def test_load_into_the_same_objects_rewinds_the_run(tmp_path):
    """load_checkpoint also works on the live objects (the optimizer forgets its old state)."""
    data = make_linear_teacher(N, D, K, seed=0)
    svi = _trained_svi(data)
    save_checkpoint(tmp_path / "r.pt", svi, step=3)
    after = [svi.step(data.x, data.y) for _ in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert load_checkpoint(tmp_path / "r.pt", svi, data.x, data.y)["step"] == 3
    assert [svi.step(data.x, data.y) for _ in range(3)] == after


def test_progress_bar_shows_the_running_loss_and_evaluations():
    import io

    out = io.StringIO()
    train(_ScriptedSVI([2.0, 4.0, 6.0, 8.0]), num_steps=4, eval_every=2,
          eval_fn=lambda: {"acc": 0.5, "refresh": 1},  # (a key that is also a tqdm argument)
          progress={"file": out, "mininterval": 0, "desc": "fit"})
    text = out.getvalue()
    assert "fit" in text and "4/4" in text and "acc=0.5" in text and "loss=" in text


def test_progress_lines_print_step_time_loss_and_evaluations():
    """progress="lines": one line per record with the step, the time on the loop's clock (CPU
    seconds for clock="process"), the mean loss since the last record and the evaluation."""
    import io

    out = io.StringIO()
    train(_ScriptedSVI([2.0, 4.0, 6.0, 8.0]), num_steps=4, eval_every=2, clock="process",
          eval_fn=lambda: {"valid_ll": -1.25}, eval_at_start=False,
          progress={"style": "lines", "desc": "A&R", "file": out})
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines  # steps 2, 4 (step 0, not evaluated, has nothing to say)
    assert lines[0].startswith("A&R: step 2, ") and lines[0].endswith("CPU s, loss 3, valid_ll -1.25")
    assert lines[1].startswith("A&R: step 4, ") and "loss 7, valid_ll -1.25" in lines[1]
    out = io.StringIO()
    train(_ScriptedSVI([2.0, 4.0]), num_steps=2, eval_fn=lambda: {"v": 1.0}, progress={"style": "lines",
                                                                                       "file": out})
    assert out.getvalue().startswith("step 0, 0.0 s, v 1\nstep 1, 0.0 s, loss 2, v 1\n"), out.getvalue()  # wall clock
    with pytest.raises(ValueError, match="progress"):
        train(_ScriptedSVI([1.0]), num_steps=1, progress="loud")
    with pytest.raises(ValueError, match="'desc' and 'file'"):
        train(_ScriptedSVI([1.0]), num_steps=1, progress={"style": "lines", "ncols": 80})


def test_progress_updates_a_bar_of_the_caller_and_leaves_it_open():
    """One bar for two runs (the estimator's phases): each run adds its steps, none closes it."""
    import io

    from pyro_ar.infer.loop import progress_bar

    out = io.StringIO()
    bar = progress_bar(7, desc="two runs", file=out, mininterval=0)
    train(_ScriptedSVI([1.0, 2.0, 3.0]), num_steps=3, progress=bar)
    train(_ScriptedSVI([1.0, 2.0, 3.0, 4.0]), num_steps=4, progress=bar)
    assert bar.n == 7 and not bar.disable and "7/7" in out.getvalue()
    bar.update(0)  # still open: a closed tqdm bar would not refresh
    bar.close()


def test_time_budget_counts_the_time_before_a_resume(tmp_path):
    """A run that used its budget and is resumed with the same budget takes no step."""
    data = make_linear_teacher(N, D, K, seed=0)
    path = str(tmp_path / "budget.pt")
    svi, _ = _mle(data)
    hist = train(svi, data.x, data.y, num_steps=10**6, time_budget=1.0, checkpoint=path,
                 clock=_TickingClock(0.25))
    assert hist[-1]["step"] == 4 and hist[-1]["time"] == 1.0
    svi, _ = _mle(data)
    with pytest.warns(ResumeWarning):
        again = train(svi, data.x, data.y, num_steps=10**6, time_budget=1.0, checkpoint=path,
                      clock=_TickingClock(0.25))
    assert again[-1]["step"] == 4 and again[-1]["time"] == 1.0
    svi, _ = _mle(data)
    with pytest.warns(ResumeWarning):
        more = train(svi, data.x, data.y, num_steps=10**6, time_budget=2.0, checkpoint=path,
                     clock=_TickingClock(0.25))
    assert more[-1]["step"] == 8 and more[-1]["time"] == 2.0


# ------------------------------------------------------------------ issue 25: divergence within the window
@pytest.mark.parametrize("losses,step", [
    ([1.9e4, 2.0e4, 3.8e34], 3),         # exploded within the first 10 steps (warmup)
    ([5.0, 7.0, 6.0, 6e6 + 1], 4),       # > 1e6 x max(1, |L_1|) = 5e6
    ([0.01, 2e6], 2),                    # the reference is max(1, |L_1|): 2e6 > 1e6 x 1
])
def test_divergence_is_caught_within_the_calibration_window(losses, step):
    """Before issue 25 only non-finite losses counted in the first 10 steps."""
    with pytest.raises(TrainingDiverged, match=f"step {step}: .*of the first loss"):
        train(_ScriptedSVI(losses), num_steps=len(losses))


@pytest.mark.parametrize("losses", [
    [1.0] + [5e5] * 12,                  # grows, but by less than the factor
    [1e4, 3e3, 1e3, 50.0, 7.0, 1.0, 0.5, 0.1, 0.01, 1e-3, 1e-4, 1e-5],
    [-3.0, -8.0, -2e5, -5e5],            # negative losses (densities): |L| counts
])
def test_divergence_check_has_no_false_alarm_within_the_window(losses):
    hist = train(_ScriptedSVI(losses), num_steps=len(losses))
    assert hist[-1]["step"] == len(losses)


@pytest.mark.parametrize("noise,likelihood,lr", [("normal", "ar", 1e6), ("gumbel", "exact", 1e8)])
def test_divergence_of_a_real_model_exploding_within_the_window(noise, likelihood, lr):
    """The issue's reproductions: finite but exploding losses from step 2 (before: no error)."""
    data = make_linear_teacher(N, D, K, seed=0)
    model = LinearClassifier(D, K, likelihood=get_likelihood(likelihood, noise), subsample_size=64)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    with pytest.raises(TrainingDiverged, match="exceeds 1e\\+06 x the scale"):
        train(svi, data.x, data.y, num_steps=10)


def test_divergence_state_survives_a_checkpoint_without_the_reference(tmp_path):
    """Checkpoints written before the reference existed load (the first loss stands in)."""
    check = DivergenceCheck()
    check.load_state_dict({"scale": None, "first": [40.0, 30.0]})
    assert check.reference == 40.0
    with pytest.raises(TrainingDiverged):
        check(3, 4e7 + 1)


# ------------------------------------------------------------------ issue 25: restore on divergence
class _ParamSVI:
    """Stands in for SVI over one real param ``w``: step t returns ``losses[t-1]`` (the loss
    at the current value, as SVI does), then sets ``w = t`` (NaN once the loss is not finite)."""

    def __init__(self, losses):
        self.losses, self.calls = losses, 0

    def step(self):
        self.calls += 1
        loss = self.losses[self.calls - 1]
        w = pyro.param("w", torch.tensor(0.0))
        if self.calls == 3:
            pyro.param("late", torch.tensor(3.0))  # created during training
        with torch.no_grad():
            w.copy_(torch.tensor(float(self.calls) if math.isfinite(loss) and loss < 1e9 else math.nan))
        return loss


@pytest.mark.parametrize("bad_step,restored", [(6, 4), (5, 2), (3, 0), (12, 10)])
def test_divergence_restores_the_last_confirmed_parameters(bad_step, restored):
    """Records every 2 steps; the record of step s is good once the loss of step s + 1
    (computed at its parameters) passes: on divergence at step t the parameters are those of
    the last record s <= t - 2 (before issue 25 they were left non-finite)."""
    pyro.param("w", torch.tensor(0.0))
    losses = [1.0] * (bad_step - 1) + [float("nan")]
    with pytest.raises(TrainingDiverged, match=f"restored to those after step {restored}"):
        train(_ParamSVI(losses), num_steps=20, log_every=2, eval_every=2)
    store = pyro.get_param_store()
    assert float(store["w"]) == restored
    assert ("late" in store) == (restored >= 3)  # created after the snapshot: removed
    assert all(bool(torch.isfinite(v).all()) for v in store.values())


def test_divergence_restores_early_stoppings_best_when_its_next_loss_passed():
    pyro.param("w", torch.tensor(0.0))
    scores = iter([1.0, 2.0, 1.5, 1.0, 0.5, 0.1, 0.0, 0.0])  # the best at step 2
    es = EarlyStopping("score", patience=10)
    with pytest.raises(TrainingDiverged, match="early stopping's best \\(step 2\\)"):
        train(_ParamSVI([1.0] * 6 + [1e12]), num_steps=20, eval_every=1, early_stopping=es,
              eval_fn=lambda: {"score": next(scores)}, eval_at_start=False)
    assert float(pyro.param("w")) == 2.0


def test_divergence_without_restore_leaves_the_parameters():
    pyro.param("w", torch.tensor(0.0))
    with pytest.raises(TrainingDiverged) as err:
        train(_ParamSVI([1.0, 1.0, math.nan]), num_steps=5, divergence=DivergenceCheck(restore=False))
    assert "restored" not in str(err.value) and math.isnan(float(pyro.param("w")))


def test_parameters_are_finite_after_a_real_divergence():
    """A model trained a little, then driven to divergence: its parameters are those it had
    when the diverging run started (before issue 25: NaN/inf)."""
    data = make_linear_teacher(N, D, K, seed=0)
    model = LinearClassifier(D, K, likelihood=AR("normal", negatives=4), subsample_size=64, sparse=True)
    guide, elbo = default_guide(model), default_elbo()
    train(SVI(model, guide, lazy_adam({"lr": 0.05}), elbo), data.x, data.y, num_steps=5)
    before = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
    with pytest.raises(TrainingDiverged):
        train(SVI(model, guide, lazy_adam({"lr": 1e6}), elbo), data.x, data.y, num_steps=10)
    after = dict(pyro.get_param_store().items())
    assert set(after) == set(before)
    for name, value in before.items():
        assert torch.equal(after[name].detach(), value), name


# ------------------------------------------------------------------ issue 25: the data checked at the start
class _CountingSVI(SVI):
    steps = 0

    def step(self, *args, **kwargs):
        type(self).steps += 1
        return super().step(*args, **kwargs)


@pytest.mark.parametrize("field,row,value,match", [
    ("y", 287, K, "y must lie in \\[0, 12\\).*the first at y\\[287\\]"),
    ("y", 5, -1, "y must lie in \\[0, 12\\).*the first at y\\[5\\]"),
    ("x", 123, math.nan, "x must be finite.*the first at x\\[123, 2\\]"),
    ("x", 0, math.inf, "x must be finite.*the first at x\\[0, 2\\]"),
])
def test_train_checks_the_whole_data_before_the_first_step(field, row, value, match):
    """A bad row is named at once, before any step (before issue 25: when a minibatch drew
    it -- with B = 8 of N = 300, typically after dozens of steps -- or never)."""
    data = make_linear_teacher(N, D, K, seed=0)
    x, y = data.x.clone(), data.y.clone()
    if field == "y":
        y[row] = value
    else:
        x[row, 2] = value
    model = LinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=8, sparse=True)
    svi = _CountingSVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    _CountingSVI.steps = 0
    with pytest.raises(ValueError, match=match):
        train(svi, x, y, num_steps=1000)
    assert _CountingSVI.steps == 0 and not list(pyro.get_param_store().keys())


def test_train_checks_sample_weight_before_the_first_step():
    data = make_linear_teacher(N, D, K, seed=0)
    model = LinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=8, sparse=True)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    w = torch.ones(N)
    w[7] = -1.0
    with pytest.raises(ValueError, match="sample_weight"):
        train(svi, data.x, data.y, w, num_steps=10)


def test_divergence_copies_are_spaced_whatever_log_every(monkeypatch):
    """A copy of the parameters costs O(parameters): at most about 20 per run even when
    every step is recorded (the step itself stays independent of the parameters' size)."""
    import pyro_ar.infer.loop as loop

    calls = []
    real = loop.snapshot_params
    monkeypatch.setattr(loop, "snapshot_params", lambda *a: calls.append(1) or real(*a))
    pyro.param("w", torch.tensor(0.0))
    train(_ParamSVI([1.0] * 200), num_steps=200, log_every=1, eval_every=1)
    assert 15 <= len(calls) <= 22


def test_validation_first_checks_the_first_step_only_and_computes_the_same():
    """``validation="first"``: the run's first step under Pyro's validation, the others
    without (each check would synchronise a GPU with the host); the same parameters."""
    import pyro.distributions as dist
    from pyro.infer import SVI, Trace_ELBO
    from pyro.infer.util import is_validation_enabled

    from pyro_ar.infer import train

    seen = []

    def model(x):
        seen.append(is_validation_enabled())
        loc = pyro.param("loc", torch.tensor(0.0))
        with pyro.plate("data", len(x)):
            pyro.sample("x", dist.Normal(loc, 1.0), obs=x)

    x = torch.linspace(0.0, 4.0, 10)
    finals = {}
    for mode in ("all", "first"):
        pyro.clear_param_store()
        seen.clear()
        with pyro.validation_enabled(True):
            svi = SVI(model, lambda x: None, pyro.optim.Adam({"lr": 0.1}), Trace_ELBO())
            train(svi, x, num_steps=5, eval_every=5, validation=mode)
        finals[mode] = pyro.param("loc").item()
        assert seen == ([True] * 5 if mode == "all" else [True] + [False] * 4), (mode, seen)
        assert is_validation_enabled()  # restored after the run
    assert finals["all"] == finals["first"]
    with pytest.raises(ValueError, match=r"validation must be 'all' or 'first', got validation='some'"):
        train(svi, x, num_steps=1, validation="some")

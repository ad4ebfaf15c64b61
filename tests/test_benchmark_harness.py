"""benchmarks/harness.py: the one copy of the benchmarks' shared pieces (seconds)."""

import json
import math

import pytest

from benchmarks import harness


def test_time_to_reach_interpolates_between_evaluations():
    h = [dict(time=0.0, test_ll=-7.0), dict(time=5.0, test_ll=None), dict(time=10.0, test_ll=-5.0)]
    # -6 is half-way from -7 (0 s) to -5 (10 s); the point without a value is skipped
    assert harness.time_to_reach(h, -6.0) == pytest.approx(5.0)
    assert harness.time_to_reach(h, -7.5) == 0.0          # met at the first evaluation
    assert harness.time_to_reach(h, -4.0) is None          # never reached
    cpu = [dict(cpu_time=1.0, test_ll=-6.0), dict(cpu_time=3.0, test_ll=-5.0)]
    assert harness.time_to_reach(cpu, -5.5, "cpu_time") == pytest.approx(2.0)


def test_median_and_paired_step_times():
    assert harness.median([3.0, 1.0, 2.0]) == 2.0 and math.isnan(harness.median([]))
    calls = {"a": 0, "b": 0}

    def step(name):
        def f():
            calls[name] += 1
        return f

    t = harness.paired_step_times({"a": step("a"), "b": step("b")}, rounds=3, block=2, warmup=1)
    assert {k: len(v) for k, v in t.items()} == {"a": 3, "b": 3} and calls == {"a": 7, "b": 7}
    assert all(x >= 0 for v in t.values() for x in v)


def test_parser_save_and_environment(tmp_path, monkeypatch):
    """The shared options; a result file carries the command, the commit and the machine."""
    args = harness.parser("A benchmark.\n\nMore.", seed=3).parse_args(["--quick", "--out", str(tmp_path)])
    assert args.quick and args.seed == 3 and args.out == str(tmp_path)
    assert harness.parser("x").parse_args([]).out == str(harness.DEFAULT_OUT)
    path = harness.save(args, "demo", {"rows": [{"ms": 1.5}]})
    assert path == tmp_path / "demo_quick.json"
    record = json.loads(path.read_text())
    assert record["rows"] == [{"ms": 1.5}] and record["args"]["seed"] == 3
    env = record["environment"]
    assert env["command"].startswith("python") and env["git_commit"] and env["machine"]["cpus"] >= 1


def test_make_optim_gives_local_parameters_their_own_step():
    from types import SimpleNamespace

    args = SimpleNamespace(optim="adam", lr=0.01, local_lr=0.2)
    optim = harness.make_optim(args, local=lambda name: name.startswith("local."))
    assert optim.pt_optim_args("local.q")["lr"] == 0.2 and optim.pt_optim_args("weight")["lr"] == 0.01
    authors = harness.make_optim(SimpleNamespace(optim="authors", lr=0.02, local_lr=0.02))
    assert authors.pt_optim_args("b")["decay_every"] == 2000


def _tiny_svi(explode_after=None):
    """SVI on a one-parameter model; with ``explode_after``: its loss jumps by 1e12 from that step on."""
    import pyro
    import pyro.distributions as dist
    import torch
    from pyro.infer import SVI, Trace_ELBO

    pyro.clear_param_store()
    calls = [0]

    def model(x):
        calls[0] += 1
        loc = pyro.param("loc", torch.tensor(0.0))
        with pyro.plate("data", len(x)):
            pyro.sample("x", dist.Normal(loc, 1.0), obs=x)
        if explode_after is not None and calls[0] > explode_after:
            pyro.factor("broken", loc * 0.0 - 1e12)

    return SVI(model, lambda x: None, pyro.optim.Adam({"lr": 0.1}), Trace_ELBO())


def test_watched_train_flags_a_drift_below_the_best_and_the_floor():
    """A held-out metric that falls 0.3 and then 0.5 below its best (margin 0.2, patience 2)
    stops the run at the second worse evaluation; values under the floor are listed."""
    import torch

    values = iter([-5.0, -4.0, -4.3, -4.5, -4.6, -4.7])
    hist, flags = harness.watched_train(
        _tiny_svi(), torch.zeros(8), monitor="ll", drift_margin=0.2, floor=-4.4, num_steps=60,
        eval_every=10, eval_at_start=False, eval_fn=lambda: {"ll": next(values)})
    assert [h["ll"] for h in hist if "ll" in h] == [-5.0, -4.0, -4.3, -4.5]
    assert flags["drifted"] == 40 and not flags["diverged"]
    assert (flags["best"], flags["best_step"]) == (-4.0, 20)
    assert flags["below_floor"] == [10, 40] and "step 40" in flags["message"]
    # the same metric without the fall: no flag, the run goes to its end
    hist, flags = harness.watched_train(
        _tiny_svi(), torch.zeros(8), monitor="ll", num_steps=30, eval_every=10, eval_at_start=False,
        eval_fn=lambda: {"ll": -1.0})
    assert hist[-1]["step"] == 30 and flags["drifted"] is None and flags["message"] is None


def test_watched_train_reports_trains_loss_check():
    """A loss that explodes is train's divergence: flagged, with the records made before it."""
    import torch

    hist, flags = harness.watched_train(_tiny_svi(explode_after=25), torch.zeros(8), monitor="ll", num_steps=60,
                                        eval_every=10, eval_at_start=False, eval_fn=lambda: {"ll": -1.0})
    assert flags["diverged"] and flags["drifted"] is None and "diverged at step" in flags["message"]
    assert [h["step"] for h in hist if "ll" in h] == [10, 20]


def test_recorded_command_can_be_pasted_into_a_shell(monkeypatch):
    """An argument holding a space or JSON (``--pyro-ar-variants '{"strategy": "screened"}'``)
    is recorded quoted, so the command re-parses to the same arguments."""
    import shlex
    import sys

    argv = ["benchmarks/peers.py", "--pyro-ar-variants", '{"strategy": "screened"}', "--quick"]
    monkeypatch.setattr(sys, "argv", argv)
    monkeypatch.setattr(sys.modules["__main__"], "__spec__", None, raising=False)
    assert shlex.split(harness.command())[2:] == argv[1:]


def _busy(seconds):
    """Burn about ``seconds`` of CPU time (the clocks' tests need time to pass on both)."""
    import time

    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_timer_sums_its_blocks_on_both_clocks():
    t = harness.timer()
    assert (t.cpu, t.wall) == (0.0, 0.0)
    with t:
        _busy(0.02)
        inside = t.cpu
    first = t.cpu
    # CPU time on one thread is <= wall up to the two clocks' resolutions (a 2e-5 s excess seen)
    assert 0.02 <= inside <= first and t.wall >= 0.02 - 1e-3
    _busy(0.02)                                        # outside any block: not counted
    assert t.cpu == first
    with t:
        _busy(0.02)
    assert t.cpu >= first + 0.02
    running = harness.timer().start()
    _busy(0.01)
    assert running.cpu >= 0.01 and running.wall >= 0.01 - 1e-3


def test_step_times_counts_warmup_steps_and_stops_at_the_budget():
    calls, syncs = [], []
    out = harness.step_times(lambda: calls.append(1), 5, warmup=2, sync=lambda: syncs.append(1))
    assert len(calls) == 7 and len(syncs) == 6  # after the warm-up, then after each timed call
    assert len(out["cpu"]) == len(out["wall"]) == 5 and all(v >= 0 for v in out["cpu"] + out["wall"])
    slow = harness.step_times(lambda: _busy(0.01), 1000, budget=0.05, min_steps=3)
    assert 3 <= len(slow["wall"]) < 1000 and all(v >= 0.01 for v in slow["cpu"])
    assert len(harness.step_times(lambda: None, 4, budget=0.0, min_steps=2)["cpu"]) == 2


def test_paired_times_per_block_or_per_call_and_run_for():
    order = []
    steps = {"a": lambda: order.append("a"), "b": lambda: order.append("b")}
    blocks = harness.paired_times(steps, rounds=2, block=3, warmup=1)
    assert order == ["a", "b"] + (["a"] * 3 + ["b"] * 3) * 2  # warm-up, then alternating blocks
    assert {k: (len(v["cpu"]), len(v["wall"])) for k, v in blocks.items()} == {"a": (2, 2), "b": (2, 2)}
    per_call = harness.paired_times(steps, rounds=2, block=3, warmup=0, per_call=True)
    assert {k: len(v["cpu"]) for k, v in per_call.items()} == {"a": 6, "b": 6}
    n, cpu = harness.run_for(lambda: _busy(0.005), 0.03)
    assert n >= 1 and cpu >= 0.03 and n <= 0.03 / 0.005 + 1
    assert harness.run_for(lambda: None, 0.0)[0] == 1  # at least one call


def test_workers_start_as_modules_with_the_root_on_the_path():
    import os
    import sys

    assert harness.module_command("benchmarks.scaling", "--K", 10) == [sys.executable, "-m", "benchmarks.scaling",
                                                                      "--K", "10"]
    env = harness.worker_env("/old/checkout", env={"PYTHONPATH": "/a", "X": "1"}, OMP_NUM_THREADS="1")
    assert env["PYTHONPATH"].split(os.pathsep) == ["/old/checkout", "/a", str(harness.ROOT)]
    assert env["X"] == "1" and env["OMP_NUM_THREADS"] == "1"
    assert harness.worker_env(env={})["PYTHONPATH"] == str(harness.ROOT)

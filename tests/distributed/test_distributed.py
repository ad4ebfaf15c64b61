"""Distributed A&R on localhost: 2 and 4 gloo processes against one-process references.

Each process count is spawned once (torch.multiprocessing.spawn, a free port) and runs
several scenarios of ``_workers.py``; the references run in the test process. Tolerances:

* trajectories (float64, 100 steps data-parallel, 20 class-sharded): the distributed and
  the one-process runs make the same random draws and differ only in the order of the
  floating-point sums of the gradients / class sums (a few ulps per step); 100 Adam steps
  amplify that to ~1e-15 measured, so 1e-8 relative leaves a wide margin and is far inside
  the issue's target of 1e-5;
* unbiasedness: mean of 400 independent estimates within 4 standard errors of the exact sum;
* crash + resume: bit for bit (checkpoints restore every random stream).
"""

import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import pyro

from pyro_ar.distributed import (
    ShardedDataPlate,
    class_shard,
    data_parallel,
    free_port,
    rank_path,
    shard_range,
)
from pyro_ar.optim import lazy_adam

from . import _workers as W

pytestmark = pytest.mark.skipif(not (dist.is_available() and dist.is_gloo_available()),
                                reason="torch.distributed with gloo is not available")

TWO = ("dp", "dp_resume", "cs", "cs_resume", "cs_shared", "cs_per_datapoint")
FOUR = ("dp", "cs")


def _spawn(world, names):
    tmp = tempfile.mkdtemp()
    try:
        mp.spawn(W.worker, args=(world, free_port(), tmp, names), nprocs=world, join=True)
    except Exception as e:  # report the rank's traceback, not only spawn's summary
        errors = [open(f"{tmp}/rank{r}.err").read() for r in range(world)
                  if __import__("os").path.exists(f"{tmp}/rank{r}.err")]
        raise AssertionError("\n".join(errors) or str(e)) from e
    return [torch.load(f"{tmp}/rank{r}.pt", weights_only=False) for r in range(world)]


@pytest.fixture(scope="module")
def two():
    return _spawn(2, TWO)


@pytest.fixture(scope="module")
def four():
    return _spawn(4, FOUR)


def _rel(a, b):
    return float((a - b).abs().max() / b.abs().max())


@pytest.fixture
def one_process():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
    pyro.clear_param_store()


@pytest.mark.slow  # spawns the ranks
@pytest.mark.parametrize("world", [2, 4])
def test_data_parallel_trajectory_matches_one_process(world, two, four, one_process):
    results = {2: two, 4: four}[world]
    ref = W.dp_run("all", world)
    for r, res in enumerate(results):
        for name in ("weight", "bias"):                 # replicated: every rank holds all of them
            assert _rel(res["dp"][name], ref[name]) < 1e-8, (world, r, name)
    # the local parameters stay on their rank: rank r holds exactly its shard's eta
    for r, res in enumerate(results):
        start, stop = shard_range(W.N, r, world)
        assert res["dp"]["eta"].shape == (stop - start,)
        assert _rel(res["dp"]["eta"], ref["eta"][start:stop]) < 1e-8


@pytest.mark.slow  # spawns the ranks
@pytest.mark.parametrize("world", [2, 4])
def test_class_sharded_exact_trajectory_and_evaluation_match_one_process(world, two, four, one_process):
    results = {2: two, 4: four}[world]
    ref = W.cs_reference(world)
    for name in ("weight", "bias"):
        assert _rel(torch.cat([res["cs"][name] for res in results]), ref[name]) < 1e-8
    for res in results:
        assert _rel(res["cs"]["eta"], ref["eta"]) < 1e-8     # the same eta on every rank
        assert res["cs"]["eval"]["log_lik"] == pytest.approx(ref["eval"]["log_lik"], rel=1e-10)
        assert res["cs"]["eval"]["accuracy"] == ref["eval"]["accuracy"]


@pytest.mark.slow  # spawns the ranks
def test_class_sharded_rank_holds_only_its_shard(two):
    total = 0
    for r, res in enumerate(two):
        K_r = class_shard(W.K, r, 2).size
        assert res["cs"]["param_numel"] == K_r * (W.D + 1)
        # LazyAdam: two moments per entry and a step count per row, for this shard's rows only
        assert res["cs"]["optim_numel"] == 2 * K_r * (W.D + 1) + 2 * K_r
        total += res["cs"]["param_numel"]
    assert total == W.K * (W.D + 1)


@pytest.mark.slow  # spawns the ranks
@pytest.mark.parametrize("strategy", ["shared", "per_datapoint"])
def test_class_sharded_estimator_is_unbiased(strategy, two):
    res = [r[f"cs_{strategy}"] for r in two]
    assert torch.equal(res[0]["estimates"], res[1]["estimates"])   # all-reduced: the same everywhere
    est, x, Wt, b, y = (res[0][k] for k in ("estimates", "x", "W", "b", "y"))
    psi = x @ Wt.T + b
    exact = (psi - psi.gather(-1, y.unsqueeze(-1))).exp().sum(-1) - 1.0   # sum over k != y
    mean, se = est.mean(0), est.std(0) / est.shape[0] ** 0.5
    assert (se > 0).all()                                 # a subsample, not the exact sum
    assert ((mean - exact).abs() < 4 * se).all(), (mean, exact, se)


@pytest.mark.slow  # spawns the ranks
@pytest.mark.parametrize("scenario", ["dp_resume", "cs_resume"])
def test_crash_and_resume_reproduce_the_run(scenario, two):
    for res in two:
        out = res[scenario]
        assert out["crashed"] is False
        for name in ("weight", "bias", "eta"):
            assert torch.equal(out["resumed"][name], out["full"][name]), name


# ---- in-process checks (no process group, or a process group of one rank) ---------------
def test_a_one_rank_process_group_runs_both_paths_as_one_process(one_process):
    """The default tier's run of the distributed code (the spawned 2- and 4-rank tests are
    slow-tier): in a gloo group of one rank (in this process), the data-parallel optimizer
    and the class-sharded model make the one-process runs' trajectories (1e-12 relative:
    the same sums, in the same order up to the all-reduce of a single tensor)."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        dp, ref = W.dp_run(0, 1, steps=30), W.dp_run("all", 1, steps=30)
        for name in ("weight", "bias", "eta"):
            assert _rel(dp[name], ref[name]) < 1e-12, name
        cs, ref = W.cs_run(0, 1, steps=10), W.cs_reference(1, steps=10)
        for name in ("weight", "bias", "eta"):
            assert _rel(cs[name], ref[name]) < 1e-12, name
        assert cs["eval"]["log_lik"] == pytest.approx(ref["eval"]["log_lik"], rel=1e-12)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("kwargs, match", [
    (dict(num_data=10, subsample_size=3, num_shards=2, shard=0), "multiple of num_shards"),
    (dict(num_data=10, subsample_size=4, num_shards=2, shard=2), "shard must lie"),
    (dict(num_data=1, subsample_size=2, num_shards=2, shard=0), "non-empty shards"),
    (dict(num_data=10, subsample_size=2, num_shards=2, shard="some"), "'all'"),
])
def test_sharded_data_plate_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ShardedDataPlate(**kwargs)


def test_sharded_data_plate_needs_its_shard_rows():
    plate = ShardedDataPlate(10, 4, shard=1, num_shards=2)
    with pytest.raises(ValueError, match="shard_rows"):
        plate(torch.zeros(10, 2), torch.zeros(10))


def test_data_parallel_needs_a_pyro_optimizer():
    with pytest.raises(ValueError, match="PyroOptim"):
        data_parallel(torch.optim.SGD)
    twice = data_parallel(data_parallel(lazy_adam({"lr": 0.1})))
    assert type(twice).__mro__[2].__name__ == "_LazyPyroOptim"   # not wrapped twice


def test_rank_path_names_rank_and_world():
    assert rank_path("a/b.pt", 3, 4) == "a/b.rank3-of-4.pt"

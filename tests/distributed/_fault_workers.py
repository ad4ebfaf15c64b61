"""Ranks of tests/distributed/test_faults.py: each scenario runs on every rank of a process
group started by pyro_ar's init_process_group from torchrun-like environment variables."""

import datetime
import os
import shutil
import signal
import time
import traceback

import torch
import torch.distributed as dist

from pyro_ar.distributed import ShardedLinearUtility, class_shard, init_process_group, rank_path
from pyro_ar.distributed.collectives import all_reduce_sum
from pyro_ar.distributed.process_group import _heartbeat, _start_heartbeat
from pyro_ar.distributed.sharded_evaluation import sharded_evaluate
from pyro_ar.infer import Callback, CheckpointError
from pyro_ar.infer.checkpoint import previous_path

from . import _workers as W

UNEVEN_K, UNEVEN_D, UNEVEN_N = 5003, 24, 2000   # the case: K odd over 2 ranks, 2 chunks


def uneven_problem():
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(UNEVEN_N, UNEVEN_D, generator=gen)
    W_ = torch.randn(UNEVEN_K, UNEVEN_D, generator=gen) / UNEVEN_D ** 0.5
    b = torch.randn(UNEVEN_K, generator=gen)
    y = torch.randint(UNEVEN_K, (UNEVEN_N,), generator=gen)
    return x, W_, b, y


def cs_eval_uneven(rank, world, tmp):
    x, W_, b, y = uneven_problem()
    shard = class_shard(UNEVEN_K, rank, world)
    psi = ShardedLinearUtility(x, W_[shard.start:shard.stop], b[shard.start:shard.stop], shard)
    return sharded_evaluate(psi, y, reduce="none")


def _lost_newest(run, rank, world, tmp):
    """Both ranks checkpoint every 4 steps up to 12, but rank 1 keeps only its step-8 file
    (as if killed between the others' save at step 12 and its own); the re-run must resume
    both ranks from step 8 and end where the uninterrupted run ends."""
    path = rank_path(os.path.join(tmp, f"{run.__name__}.pt"), rank, world)
    full = run(rank, world, steps=16)
    run(rank, world, steps=8, checkpoint=path)
    shutil.copy(path, path + ".step8")
    run(rank, world, steps=12, checkpoint=path)
    if rank == 1:
        os.replace(path + ".step8", path)
        if os.path.exists(previous_path(path)):
            os.remove(previous_path(path))
    else:
        os.remove(path + ".step8")
    steps = [torch.load(f, weights_only=True)["step"] for f in (path, previous_path(path)) if os.path.exists(f)]
    dist.barrier()
    resumed = run(rank, world, steps=16, checkpoint=path)
    return {"full": full, "resumed": resumed, "steps_before": steps}


def no_common_step(rank, world, tmp):
    """Rank 1 has no checkpoint, rank 0 has two: every rank fails, naming them."""
    path = rank_path(os.path.join(tmp, "alone.pt"), rank, world)
    W.dp_run(rank, world, steps=8, checkpoint=path)
    if rank == 1:
        os.remove(path), os.remove(previous_path(path))
    dist.barrier()
    try:
        W.dp_run(rank, world, steps=12, checkpoint=path)
    except CheckpointError as e:
        return str(e)
    return None


SCENARIOS = {
    "cs_eval_uneven": cs_eval_uneven,
    "dp_lost_newest": lambda r, R, tmp: _lost_newest(W.dp_run, r, R, tmp),
    "cs_lost_newest": lambda r, R, tmp: _lost_newest(
        lambda *a, **k: W.cs_run(*a, num_negatives=W.S, **k), r, R, tmp),
    "no_common_step": no_common_step,
}


class KillAt(Callback):
    """SIGKILL this process after step ``at`` (before that step's checkpoint)."""

    def __init__(self, at):
        self.at = at

    def on_step(self, state):
        if state.step == self.at:
            os.kill(os.getpid(), signal.SIGKILL)


def _start(rank, world, port, timeout):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    init_process_group("gloo", timeout=timeout)


_finish = W.finish  # (one rank's run: its result or its traceback saved)


def worker(rank, world, port, tmp, names):
    """Run the scenarios ``names`` (see SCENARIOS) and save their results."""
    _start(rank, world, port, timeout=30)
    _finish(tmp, rank, lambda: {name: SCENARIOS[name](rank, world, tmp) for name in names})


def kill_worker(rank, world, port, tmp, phase):
    """``phase="kill"``: the uninterrupted run, then a run whose rank 1 is SIGKILLed after
    step 10 (checkpoints every 4 steps); rank 0 records the error it gets.
    ``phase="resume"``: the re-run from the checkpoints left behind."""
    _start(rank, world, port, timeout=10)  # (a loaded machine: generous for the training collectives)
    path = rank_path(os.path.join(tmp, "killed.pt"), rank, world)

    def body():
        if phase == "resume":
            return {"resumed": W.dp_run(rank, world, steps=16, checkpoint=path)}
        out = {"full": W.dp_run(rank, world, steps=16)}
        torch.save(out, os.path.join(tmp, f"rank{rank}.full.pt"))
        t0 = time.perf_counter()
        try:
            W.dp_run(rank, world, steps=16, checkpoint=path, callbacks=[KillAt(10)] if rank == 1 else [])
        except RuntimeError as e:
            out["error"], out["seconds"] = str(e), time.perf_counter() - t0
        return out
    _finish(tmp, rank, body)


def frozen_worker(rank, world, port, tmp):
    """A group with a 2-second timeout (the world's is generous, so that slow starts on a
    loaded machine do not time out) and a 0.5 s heartbeat; rank 1 freezes (its heartbeat
    stops, it never reaches the collective); rank 0's all-reduce fails and names it."""
    _start(rank, world, port, timeout=60)
    group = dist.new_group(timeout=datetime.timedelta(seconds=2))
    _start_heartbeat(datetime.timedelta(seconds=2))
    dist.barrier()

    def body():
        if rank == 1:
            _heartbeat["stop"].set()
            time.sleep(4)
            return None
        t0 = time.perf_counter()
        try:
            all_reduce_sum(torch.ones(3), group)
        except RuntimeError as e:
            return {"error": str(e), "seconds": time.perf_counter() - t0}
        return {"error": None}
    _finish(tmp, rank, body)

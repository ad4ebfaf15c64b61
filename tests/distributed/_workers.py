"""Scenarios run by the spawned ranks of tests/distributed (and, with shard="all" or the
full class set, by the test process itself as the one-process reference)."""

import os
import traceback

import torch
import torch.distributed as dist

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.distributed import (
    ClassShardedLinearClassifier,
    RandomStream,
    ShardedAugmentedCategorical,
    ShardedDataPlate,
    ShardedLinearUtility,
    class_shard,
    data_parallel,
)
from pyro_ar.infer import Callback, default_elbo, default_guide, train
from pyro_ar.likelihoods import AR
from pyro_ar.models import LinearClassifier
from pyro_ar.negatives import SharedNegatives, get_negative_sampler
from pyro_ar.optim import lazy_adam

N, D, K, B, S = 240, 4, 30, 24, 6
STEPS = 100


def data():
    d = make_linear_teacher(N, D, K, seed=3)
    return d.x.double(), d.y


class Crash(Callback):
    """Raises after step ``at`` (a simulated crash)."""

    def __init__(self, at):
        self.at = at

    def on_step(self, state):
        if state.step == self.at:
            raise KeyboardInterrupt(f"crash at step {self.at}")


def _train(svi, x, y, steps, modules, checkpoint, crash_at, callbacks=()):
    callbacks = list(callbacks) + ([] if crash_at is None else [Crash(crash_at)])
    try:
        train(svi, x, y, num_steps=steps, modules=modules, checkpoint=checkpoint,
              checkpoint_every=None if checkpoint is None else 4, callbacks=callbacks,
              eval_at_start=False)
    except KeyboardInterrupt:
        return False
    return True


def dp_run(shard, num_shards, steps=STEPS, checkpoint=None, crash_at=None, callbacks=()):
    """Data-parallel A&R (shared negatives) on shard ``shard`` (or "all"): W, b and eta."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x, y = data()
    plate = ShardedDataPlate(N, B, shard=shard, num_shards=num_shards, seed=1)
    model = plate.attach(LinearClassifier(D, K, likelihood=AR(negatives=SharedNegatives(S)), sparse=True))
    guide = default_guide(model)
    optim = lazy_adam({"lr": 0.05})
    optim = optim if shard == "all" else data_parallel(optim, local=guide)
    svi = SVI(model, guide, optim, default_elbo())
    done = _train(svi, plate.shard_rows(x), plate.shard_rows(y), steps, [plate], checkpoint, crash_at,
                  callbacks)
    store = pyro.get_param_store()
    return {"done": done, "weight": store["weight"].detach().clone(), "bias": store["bias"].detach().clone(),
            "eta": guide.log_eta("y_eps").detach().clone()}


def cs_run(shard, num_shards, num_negatives=None, steps=20, checkpoint=None, crash_at=None):
    """Class-sharded A&R on its shard: W_r, b_r, eta, parameter numel and evaluation."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x, y = data()
    model = ClassShardedLinearClassifier(D, K, likelihood=AR(negatives=SharedNegatives(num_negatives)),
                                         shard=shard, num_shards=num_shards, subsample_size=B, seed=5)
    guide = default_guide(model)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), default_elbo())
    done = _train(svi, x, y, steps, [model.stream], checkpoint, crash_at)
    store = pyro.get_param_store()
    optim_numel = sum(t.numel() for o in svi.optim.optim_objs.values() for s in o.state.values()
                      for t in s.values() if torch.is_tensor(t))
    return {"done": done, "weight": store["weight"].detach().clone(), "bias": store["bias"].detach().clone(),
            "eta": guide.log_eta("y_eps").detach().clone(), "eval": model.evaluate(x, y),
            "param_numel": store["weight"].numel() + store["bias"].numel(), "optim_numel": optim_numel}


def cs_reference(num_shards, steps=20):
    """One process, all K rows, exact AR, starting from the shards' initial rows: W, b, eta."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    x, y = data()
    rows = []
    for r in range(num_shards):
        shard, stream = class_shard(K, r, num_shards), RandomStream(5 + 104729 * (r + 1))
        with stream:
            rows.append((0.1 * torch.randn(shard.size, D, dtype=torch.float64),
                         1e-3 * torch.randn(shard.size, dtype=torch.float64)))
    pyro.param("weight", torch.cat([w for w, _ in rows]))
    pyro.param("bias", torch.cat([b for _, b in rows]))
    model = LinearClassifier(D, K, likelihood=AR(), subsample_size=B, sparse=True)
    guide = default_guide(model)
    svi = SVI(model, guide, lazy_adam({"lr": 0.05}), default_elbo())
    train(svi, x, y, num_steps=steps, eval_at_start=False)
    store = pyro.get_param_store()
    return {"weight": store["weight"].detach(), "bias": store["bias"].detach(),
            "eta": guide.log_eta("y_eps").detach(), "eval": model.evaluate(x, y, metrics=("log_lik", "accuracy"))}


def cs_estimates(shard, num_shards, strategy, reps=400):
    """exp(log S_hat) of fixed utilities, ``reps`` independent estimates per datapoint."""
    gen = torch.Generator().manual_seed(11)
    x = torch.randn(3, D, generator=gen, dtype=torch.float64)
    W = torch.randn(K, D, generator=gen, dtype=torch.float64)
    b = torch.randn(K, generator=gen, dtype=torch.float64)
    y = torch.tensor([0, 13, K - 1])
    sh = class_shard(K, shard, num_shards)
    stream = RandomStream(100 + shard)
    out = []
    calls = 1 if strategy == "per_datapoint" else reps
    xs = x.repeat(reps // calls, 1)
    for _ in range(calls):
        psi = ShardedLinearUtility(xs, W[sh.start:sh.stop], b[sh.start:sh.stop], sh)
        d = ShardedAugmentedCategorical(psi, torch.zeros(len(xs), dtype=torch.float64),
                                        negatives=get_negative_sampler(strategy, S), stream=stream)
        out.append(d.log_sum_exp_negatives(y.repeat(reps // calls)).exp().reshape(-1, 3))
    return {"estimates": torch.cat(out), "x": x, "W": W, "b": b, "y": y}


SCENARIOS = {
    "dp": lambda r, R, tmp: dp_run(r, R),
    "dp_resume": lambda r, R, tmp: _resume(dp_run, r, R, tmp),
    "cs": lambda r, R, tmp: cs_run(r, R),
    "cs_sampled": lambda r, R, tmp: cs_run(r, R, num_negatives=S),
    "cs_resume": lambda r, R, tmp: _resume(lambda *a, **k: cs_run(*a, num_negatives=S, **k), r, R, tmp),
    "cs_shared": lambda r, R, tmp: cs_estimates(r, R, "shared"),
    "cs_per_datapoint": lambda r, R, tmp: cs_estimates(r, R, "per_datapoint"),
}


def _resume(run, rank, world, tmp):
    """The same run uninterrupted, and crashed at step 10 (last checkpoint: step 8) + resumed."""
    path = os.path.join(tmp, f"{run.__name__}.rank{rank}.pt")
    full = run(rank, world, steps=16)
    crashed = run(rank, world, steps=16, checkpoint=path, crash_at=10)
    resumed = run(rank, world, steps=16, checkpoint=path)
    return {"full": full, "crashed": crashed["done"], "resumed": resumed}


def worker(rank, world, port, tmp, names):
    """The body of one spawned rank: run the scenarios ``names``, save their results."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)

    def body():
        dist.init_process_group("gloo", rank=rank, world_size=world)
        return {name: SCENARIOS[name](rank, world, tmp) for name in names}

    finish(tmp, rank, body)


def finish(tmp, rank, body):
    """Run one rank's ``body()`` and save its result as ``tmp/rank<r>.pt``, or its traceback as
    ``tmp/rank<r>.err``; the process group is destroyed either way."""
    try:
        result = body()
        torch.save(result, os.path.join(tmp, f"rank{rank}.pt"))
    except BaseException:
        with open(os.path.join(tmp, f"rank{rank}.err"), "w") as f:
            f.write(traceback.format_exc())
        raise
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()

r"""Distributed A&R: one vs two processes, data-parallel and class-sharded, and a scaling model.

Two roles in one file:

* the **worker** (also the runnable example of docs/distributed.rst), started by ``torchrun``::

      torchrun --standalone --nproc_per_node=2 benchmarks/distributed.py --worker --mode dp \
          --num-classes 100000 --steps 50 --checkpoint /tmp/dp.pt --eval

  trains a linear softmax classifier with A&R (shared negatives, lazy Adam) data-parallel
  (``--mode dp``: each rank its data shard and a B/R minibatch, gradients averaged) or
  class-sharded (``--mode cs``: each rank K/R classes, the whole minibatch), with per-rank
  checkpoints (re-run the command to resume) and optionally the test log-likelihood over
  all K (``--eval``). Multi-node: ``torchrun --nnodes=2 --node_rank=<0|1>
  --nproc_per_node=8 --rdzv_backend=c10d --rdzv_endpoint=<host of node 0>:29400 ...``.

* the **benchmark** (no ``--worker``): launches the worker with ``torchrun`` for
  R in {1, 2} processes, both modes, K in {10^5, 10^6}, and prints per-step wall and CPU
  time, datapoints per second, model-state bytes and peak RSS per rank, and collective
  bytes per step (payload per rank, counted by :data:`pyro_ar.distributed.COMM`); then the
  scaling model below fitted to the one-process points and checked against the others.

Scaling model, per step and rank (B the global minibatch, s shared negatives, D features,
R ranks, 4-byte floats, 8-byte row indices; each collective of small messages costs a
latency ``alpha * ceil(log2 R)`` (tree / recursive doubling); a ring all-reduce of n numbers
moves ``2 (R-1)/R * 4n`` bytes per rank, an all-gather of n numbers per rank ``(R-1) * 4n``):

* data-parallel: compute ``t0 + c * (B/R) * s * D`` (the B/R x s utilities dominate; the
  gathers, scatters and lazy Adam rows are O((B/R + s) D)); 3 collectives (all-gathers of
  the counts, the rows of W and b, their values) with a payload of
  ``m (4D + 20) + 16`` bytes per rank, ``m <= B/R + s`` distinct rows, and
  ``(R-1)`` times that on the wire; memory ``K (12 (D+1) + 16)`` bytes per rank (W, b, two
  Adam moments, two int64 row counts; replicated: independent of R -- 10^8 x 128 needs class sharding).
* class-sharded: compute ``t0 + o + c * B * (s/R) * D`` (``o`` the sharded path's O(B) extra work); 3 all-reduces of B numbers (psi_y,
  the max-shift, the partial sums): payload ``12 B`` bytes, ``2 (R-1)/R`` times that on
  the wire; memory ``(K/R) (12 (D+1) + 16)`` bytes per rank.

Neither depends on K except the memory. ``c`` is calibrated (the utilities' matrix product,
forward and backward), ``t0`` (the rest of a step: Pyro's traces, the ELBO, the optimizer)
taken from the one-process points of each mode, the extra fixed cost of the sharded path
(O(B) gathers and scatters) from the class-sharded two-process points, and ``alpha`` is
measured in the two-process runs (a loop of 200 all-reduces of B floats, wall time). The
check compares, for every measured point, the predicted compute time with the CPU time
outside the collectives, the predicted collective time with the measured wall time inside
them (on a loaded machine mostly waiting for the other rank), and the bytes and the state
exactly. Quote every number with the command that produced it::

    python -m benchmarks.distributed            # ~6 min on a loaded 2-core machine
    python -m benchmarks.distributed --quick    # K = 10^5 only, fewer steps
"""

import json
import math
import os
import subprocess
import sys
import tempfile

from benchmarks import harness
from pyro_ar.likelihoods import AR
from pyro_ar.negatives import SharedNegatives


# ============================================================================ the worker
def _state_bytes(svi, tensors=()):
    """Bytes of this rank's parameters (Pyro's param store), optimizer state and ``tensors``."""
    import pyro

    params = [p for _, p in pyro.get_param_store().named_parameters()]
    return harness.tensor_bytes(params + list(tensors)) + harness.optimizer_state_bytes(svi.optim)


def _build(args, rank, world, x, y):
    """(svi, training x, training y, modules, test function) of one rank."""
    from pyro.infer import SVI

    from pyro_ar.distributed import ClassShardedLinearClassifier, ShardedDataPlate, data_parallel, mean_across
    from pyro_ar.infer import default_elbo, default_guide
    from pyro_ar.likelihoods import AR
    from pyro_ar.models import LinearClassifier
    from pyro_ar.negatives import SharedNegatives
    from pyro_ar.optim import lazy_adam

    K, D, B, s = args.num_classes, args.num_features, args.batch, args.num_negatives
    if args.mode == "dp":  # B is per rank: weak scaling (the global minibatch is R B)
        plate = ShardedDataPlate(len(x), B * world, seed=1)
        model = plate.attach(LinearClassifier(D, K, likelihood=AR(negatives=SharedNegatives(s)), sparse=True))
        guide = default_guide(model)
        svi = SVI(model, guide, data_parallel(lazy_adam({"lr": args.lr}), local=guide), default_elbo())
        xs, ys = plate.shard_rows(x), plate.shard_rows(y)

        def test(xt, yt):
            start = rank * len(xt) // world
            stop = (rank + 1) * len(xt) // world
            out = model.evaluate(xt[start:stop], yt[start:stop], metrics=("log_lik", "accuracy"))
            return mean_across(out, stop - start)

        return svi, xs, ys, [plate], test
    model = ClassShardedLinearClassifier(D, K, likelihood=AR(negatives=SharedNegatives(s)), subsample_size=B,
                                         seed=1)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": args.lr}), default_elbo())
    return svi, x, y, [model.stream], lambda xt, yt: model.evaluate(xt, yt)


def worker(args):
    import torch
    import torch.distributed as dist

    import pyro

    from pyro_ar.distributed import COMM, init_process_group, rank_path
    from pyro_ar.infer import train

    rank, world = init_process_group()
    torch.set_num_threads(1)
    rss0 = harness.peak_bytes() // 1024
    pyro.set_rng_seed(0)  # the same seed on every rank
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.num_data + args.num_test, args.num_features, generator=g)
    y = torch.randint(args.num_classes, (len(x),), generator=g)
    xt, yt, x, y = x[args.num_data:], y[args.num_data:], x[:args.num_data], y[:args.num_data]
    svi, xs, ys, modules, test = _build(args, rank, world, x, y)
    kw = dict(modules=modules, eval_at_start=False)
    if args.checkpoint is None:  # (a resumed example run does not warm up again)
        train(svi, xs, ys, num_steps=args.warmup, **kw)
    COMM.reset()
    if dist.is_initialized():
        dist.barrier()
    w0 = c0 = harness.timer().start()
    ck = None if args.checkpoint is None else rank_path(args.checkpoint)
    history = train(svi, xs, ys, num_steps=args.steps, checkpoint=ck, checkpoint_every=args.steps // 2 or None, **kw)
    wall, cpu = w0.wall / args.steps, c0.cpu / args.steps
    out = {"rank": rank, "world": world, "mode": args.mode, "K": args.num_classes, "wall_step": wall,
           "cpu_step": cpu, "comm_bytes_step": COMM.bytes / args.steps, "comm_calls_step": COMM.calls / args.steps,
           "comm_wall_step": COMM.wall / args.steps, "comm_cpu_step": COMM.cpu / args.steps,
           "state_bytes": _state_bytes(svi, (xs, ys)),
           "rss_growth_kb": harness.peak_bytes() // 1024 - rss0, "rows_per_step": args.batch,
           "steps": history[-1]["step"],
           "loss": history[-1]["loss"]}
    if world > 1:  # the latency of one small collective (B floats), wall and CPU time
        buf = torch.zeros(args.batch)
        dist.barrier()
        w0 = c0 = harness.timer().start()
        for _ in range(200):
            dist.all_reduce(buf)
        out.update(alpha_wall=w0.wall / 200, alpha_cpu=c0.cpu / 200)
    if args.eval:
        out.update(test(xt, yt))
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        with open(os.path.join(args.out, f"{args.mode}-K{args.num_classes}-R{world}-rank{rank}.json"), "w") as f:
            json.dump(out, f)
    if rank == 0:
        print(json.dumps(out))
    if dist.is_initialized():
        dist.destroy_process_group()


# ============================================================================ the benchmark
def _launch(mode, K, R, args, out):
    cmd = harness.module_command("torch.distributed.run", "--standalone", f"--nproc_per_node={R}",
                                 "-m", __spec__.name, "--worker", "--mode", mode, "--num-classes", K,
                                 "--steps", args.steps, "--warmup", args.warmup, "--out", out, "--batch", args.batch)
    env = harness.worker_env(OMP_NUM_THREADS="1")
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return [json.load(open(os.path.join(out, f"{mode}-K{K}-R{R}-rank{r}.json"))) for r in range(R)]


def _calibrate_c(B=512, s=64, D=16, reps=300):
    """CPU seconds per multiply-add of the utilities x W_neg^T, forward and backward (one thread)."""
    import torch

    torch.set_num_threads(1)
    x = torch.randn(B, D)
    w = torch.randn(s, D, requires_grad=True)
    c0 = harness.timer().start()
    for _ in range(reps):
        (x @ w.T).exp().sum().backward()
    return c0.cpu / reps / (B * s * D)


def _fit(rows):
    """The model's constants: ``c`` (calibrated), the fixed per-step CPU time of each mode
    (one-process points), the extra fixed CPU time of the sharded path (class-sharded at
    R = 2, outside the collectives) and ``alpha`` (measured loop of small all-reduces)."""
    c = _calibrate_c()
    fixed = {}
    for mode in ("dp", "cs"):
        one = [r for r in rows if r["world"] == 1 and r["mode"] == mode]
        fixed[mode] = sum(r["cpu_step"] - c * _work(mode, r["global_batch"], 1, 64, 16) for r in one) / len(one)
    two = [r for r in rows if r["world"] == 2 and r["mode"] == "cs"]
    shard_overhead = sum(r["cpu_step"] - r["comm_cpu_step"] - fixed["cs"]
                         - c * _work("cs", r["global_batch"], 2, 64, 16) for r in two) / max(1, len(two))
    alphas = [r["alpha_wall"] for r in rows if r.get("alpha_wall")]
    return {"c": c, "fixed": fixed, "shard_overhead": max(0.0, shard_overhead),
            "alpha": sum(alphas) / max(1, len(alphas))}


def _work(mode, B, R, s, D):
    """Multiply-adds of the dominant utilities of one rank's step."""
    return (B / R) * s * D if mode == "dp" else B * (s / R) * D


def predict(mode, K, R, B, s, D, consts, alpha=None, bandwidth=None):
    """Per-step compute seconds (CPU outside the collectives), collective latency seconds,
    payload bytes per rank (what COMM counts), wire bytes per rank and state bytes per rank
    of the scaling model (module docstring); ``B`` is the global minibatch. Without
    ``bandwidth`` (bytes/s) the wire time is left out (on localhost it is inside ``alpha``)."""
    alpha = consts["alpha"] if alpha is None else alpha
    compute = consts["fixed"][mode] + consts["c"] * _work(mode, B, R, s, D)
    if mode == "dp":
        m = B / R + s                                  # rows of W (and b) in the sparse gradient
        payload = (m * (4 * D + 20) + 16) if R > 1 else 0.0   # counts, rows (int64), values
        wire = (R - 1) * payload                       # all-gather: every other rank's rows arrive
        mem = K * (12 * (D + 1) + 16)                  # replicated W, b, 2 Adam moments, 2 row counts
    else:
        compute += consts["shard_overhead"] if R > 1 else 0.0
        payload = 3 * B * 4 if R > 1 else 0.0          # psi_y, max-shift, partial sums
        wire = 2 * (R - 1) / R * payload               # ring all-reduce
        mem = (K / R) * (12 * (D + 1) + 16)
    latency = 3 * alpha * math.ceil(math.log2(R)) + (wire / bandwidth if bandwidth else 0.0) if R > 1 else 0.0
    return {"compute": compute, "latency": latency, "seconds": compute + latency, "payload": payload,
            "wire": wire, "memory": mem}


def _model_report(rows, args):
    consts = _fit(rows)
    print(f"\nscaling model: c={consts['c'] * 1e9:.2f} ns per multiply-add (calibrated), fixed CPU per step "
          f"dp {consts['fixed']['dp'] * 1e3:.2f} ms, cs {consts['fixed']['cs'] * 1e3:.2f} ms (one process), "
          f"sharded-path overhead {consts['shard_overhead'] * 1e3:.2f} ms (cs, R=2), alpha="
          f"{consts['alpha'] * 1e6:.0f} us per collective (measured, localhost gloo)")
    print(f"{'mode':4} {'K':>8} {'R':>2} {'compute ms':>10} {'(meas)':>7} {'comm ms':>8} {'(meas)':>7} "
          f"{'bytes':>7} {'(meas)':>7} {'state MB':>8} {'(meas)':>7}")
    for r in rows:
        p = r["predicted"] = predict(r["mode"], r["K"], r["world"], r["global_batch"], 64, 16, consts)
        print(f"{r['mode']:4} {r['K']:>8} {r['world']:>2} {p['compute'] * 1e3:10.2f} "
              f"{(r['cpu_step'] - r['comm_cpu_step']) * 1e3:7.2f} {p['latency'] * 1e3:8.2f} "
              f"{r['comm_wall_step'] * 1e3:7.2f} {p['payload']:7.0f} {r['comm_bytes_step']:7.0f} "
              f"{p['memory'] / 2**20:8.1f} {r['state_bytes'] / 2**20:7.1f}")
    consts["predictions"] = []
    for mode, B in (("dp", args.batch * 16), ("cs", args.batch)):
        for D in (16, 128):
            p = predict(mode, 10 ** 8, 16, B, 64, D, consts, alpha=50e-6, bandwidth=10e9)
            consts["predictions"].append(dict(p, mode=mode, K=10 ** 8, R=16, D=D, B=B, ms=1e3 * p["seconds"],
                                              collectives_ms=1e3 * p["latency"], wire_kb=p["wire"] / 1e3,
                                              state_gib=p["memory"] / 2 ** 30))
            print(f"prediction K=10^8, R=16, D={D}, {mode}, B={B}: {p['seconds'] * 1e3:.2f} ms/step "
                  f"({p['compute'] * 1e3:.2f} compute + {p['latency'] * 1e3:.2f} collectives at 50 us, 10 GB/s), "
                  f"payload {p['payload'] / 1e3:.1f} kB, wire {p['wire'] / 1e3:.1f} kB per rank, "
                  f"state {p['memory'] / 2**30:.1f} GiB/rank")
    return consts


def benchmark(args):
    out = tempfile.mkdtemp(prefix="pyro_ar_distributed_")
    Ks = [10 ** 5] if args.quick else [10 ** 5, 10 ** 6]
    rows = []
    for K in Ks:
        for mode in ("dp", "cs"):
            for R in (1, 2):  # interleaved: each configuration right after its pair
                t = harness.timer().start()
                ranks = _launch(mode, K, R, args, out)
                r0 = dict(ranks[0])
                for key in ("cpu_step", "wall_step", "comm_wall_step", "comm_cpu_step"):
                    r0[key] = max(r[key] for r in ranks)
                r0["state_bytes"] = max(r["state_bytes"] for r in ranks)
                r0["rss_growth_kb"] = max(r["rss_growth_kb"] for r in ranks)
                r0["global_batch"] = r0["rows_per_step"] * (R if mode == "dp" else 1)
                r0["alpha_wall"] = max(r.get("alpha_wall", 0.0) for r in ranks)
                r0["cpu_ms"], r0["wall_ms"] = 1e3 * r0["cpu_step"], 1e3 * r0["wall_step"]
                r0["state_mb"] = r0["state_bytes"] / 2 ** 20
                rows.append(r0)
                print(f"  launched {mode} K={K} R={R} in {t.wall:.0f}s", file=sys.stderr)
    header = (f"{'mode':4} {'K':>8} {'R':>2} {'B':>5} {'wall ms':>8} {'cpu ms':>7} {'comm wall':>9} "
              f"{'comm cpu':>8} {'pts/s wall':>10} {'pts/s cpu':>10} {'state MB':>9} {'RSS+ MB':>8} "
              f"{'comm B/step':>11} {'calls':>5}")
    print(header)
    for r in rows:
        print(f"{r['mode']:4} {r['K']:>8} {r['world']:>2} {r['global_batch']:>5} {1e3 * r['wall_step']:8.2f} "
              f"{1e3 * r['cpu_step']:7.2f} {1e3 * r['comm_wall_step']:9.2f} {1e3 * r['comm_cpu_step']:8.2f} "
              f"{r['global_batch'] / r['wall_step']:10.0f} {r['global_batch'] / r['cpu_step']:10.0f} "
              f"{r['state_bytes'] / 2**20:9.1f} {r['rss_growth_kb'] / 1024:8.1f} {r['comm_bytes_step']:11.0f} "
              f"{r['comm_calls_step']:5.0f}")
    summary = _summary(rows)
    consts = _model_report(rows, args)
    print(json.dumps(summary, indent=1))
    harness.save(args, "distributed", {"rows": rows, "summary": summary, "constants": consts})
    return summary


def _summary(rows):
    def get(mode, K, R):
        return next((r for r in rows if (r["mode"], r["K"], r["world"]) == (mode, K, R)), None)

    out = {}
    for K in sorted({r["K"] for r in rows}):
        dp1, dp2, cs1, cs2 = get("dp", K, 1), get("dp", K, 2), get("cs", K, 1), get("cs", K, 2)
        out[f"K={K}"] = {
            "dp_throughput_ratio_wall": (dp2["global_batch"] / dp2["wall_step"]) / (dp1["global_batch"] / dp1["wall_step"]),
            "dp_throughput_ratio_cpu": (dp2["global_batch"] / dp2["cpu_step"]) / (dp1["global_batch"] / dp1["cpu_step"]),
            # CPU time outside the collectives (what each process computes), plus the
            # measured latency alpha of the step's 3 collectives on an idle pair of cores
            "dp_throughput_ratio_compute_cpu": (dp2["global_batch"] / (dp2["cpu_step"] - dp2["comm_cpu_step"]))
            / (dp1["global_batch"] / dp1["cpu_step"]),
            "cs_state_memory_ratio": cs2["state_bytes"] / cs1["state_bytes"],
            "cs_rss_growth_ratio": cs2["rss_growth_kb"] / max(1, cs1["rss_growth_kb"]),
            "cs_comm_bytes_step": cs2["comm_bytes_step"], "dp_comm_bytes_step": dp2["comm_bytes_step"]}
    return out


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K = 10^5 only, fewer steps",
                       out_help="folder of distributed[_quick].json (the workers': of their per-rank JSON)")
    p.add_argument("--worker", action="store_true", help="run as a torchrun worker (the example)")
    p.add_argument("--mode", choices=("dp", "cs"), default="dp")
    p.add_argument("--num-classes", type=int, default=10 ** 5)
    p.add_argument("--num-features", type=int, default=16)
    p.add_argument("--num-data", type=int, default=20000)
    p.add_argument("--num-test", type=int, default=200)
    p.add_argument("--batch", type=int, default=512, help="dp: per rank; cs: the minibatch")
    p.add_argument("--num-negatives", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--checkpoint", default=None, help="per-rank checkpoints <name>.rank<r>-of-<R>.pt")
    p.add_argument("--eval", action="store_true", help="test log-likelihood over all K at the end")
    args = p.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.quick:
        args.steps, args.warmup = 20, 3
    harness.start(args)
    return benchmark(args)


if __name__ == "__main__":
    main()

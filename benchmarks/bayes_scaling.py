"""Per-step cost of the large-K Bayesian path against K (fixed D, B, negatives).

BayesianLinearClassifier + ClassSubsampledNormal (softmax, W-conditioned closed-form local
guide, ClosedFormELBO, LazyAdam on sparse row gradients) at K = 10^3, 10^4, 10^5, 10^6
with D = 32, B = 256, 64 shared negatives (= the KL subsample), 64 eta classes. All four
problems live in one process and are timed side by side
(:func:`benchmarks.harness.paired_step_times`: in each round every K runs a few steps, CPU
time, one thread); the table gives medians of the per-step times and the median over rounds
of the ratio to K = 10^3.
For contrast, the stock dense path (LinearClassifier(weights="bayes") + AutoNormal +
NoiseLocalGuide, O(K D) per step) is timed at the smaller K.

Memory: each K is also run in a fresh subprocess, which reports its peak resident set
(VmHWM) minus the resident set before the model was built, next to the unavoidable
parameter + optimizer state size (4 parameters of K x D or K floats, Adam's two moments
of each, per-row step counts).

Labels are uniform random (the step cost does not depend on their values).

Usage::

    python -m benchmarks.bayes_scaling           # ~5 min
    python -m benchmarks.bayes_scaling --quick   # K up to 10^5, under a minute

Writes bayes_scaling[_quick].json and .png to ``--out``.
"""

import argparse
import json
import subprocess
import sys

import torch

from pyro.infer import SVI, TraceMeanField_ELBO
from pyro.infer.autoguide import AutoGuideList, AutoNormal

from pyro_ar.infer import (
    ClassSubsampledNormal,
    ClosedFormELBO,
    NoiseLocalGuide,
    hide_noise_sites,
)
from pyro_ar.models import BayesianLinearClassifier, LinearClassifier
from pyro_ar.optim import lazy_adam

from benchmarks import harness
from pyro_ar.likelihoods import AR

D, B, S, N = 32, 256, 64, 20_000


def data(K, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(N, D, generator=g) / D ** 0.5, torch.randint(0, K, (N,), generator=g)


def build_sparse(K):
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=S), subsample_size=B)
    guide = ClassSubsampledNormal(model, name=f"bayesK{K}")
    return SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO())


def build_dense(K):
    model = LinearClassifier(D, K, weights="bayes", likelihood=AR(negatives=S), subsample_size=B,
                             prefix=f"denseK{K}_")
    guide = AutoGuideList(model)
    guide.append(AutoNormal(hide_noise_sites(model)))
    guide.append(NoiseLocalGuide(model))
    return SVI(model, guide, lazy_adam({"lr": 0.01}), TraceMeanField_ELBO())


def state_bytes(svi):
    """Bytes of the parameters this SVI's optimizer steps and of its state."""
    return harness.tensor_bytes(list(svi.optim.optim_objs)) + harness.optimizer_state_bytes(svi.optim)


def memory_child(K, steps):
    """Run in a subprocess: peak RSS increase of building + stepping the model at K."""
    torch.set_num_threads(1)
    x, y = data(K)
    base = harness.rss_bytes()
    svi = build_sparse(K)
    for _ in range(steps):
        svi.step(x, y)
    peak = harness.peak_bytes()
    print(json.dumps({"K": K, "peak_minus_base": peak - base, "state_bytes": state_bytes(svi),
                      "rss_after": harness.rss_bytes() - base}))


def measure_memory(Ks, steps):
    rows = []
    for K in Ks:
        out = subprocess.run(harness.module_command(__spec__.name, "--memory-child", K, "--child-steps", steps),
                             capture_output=True, text=True, check=True, env=harness.worker_env())
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return rows


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K up to 10^5, fewer rounds (under a minute)")
    p.add_argument("--memory-child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-steps", type=int, default=20, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.memory_child is not None:
        memory_child(args.memory_child, args.child_steps)
        return 0
    harness.start(args)
    Ks = [10 ** 3, 10 ** 4, 10 ** 5] if args.quick else [10 ** 3, 10 ** 4, 10 ** 5, 10 ** 6]
    dense_Ks = [10 ** 3] if args.quick else [10 ** 3, 10 ** 4, 10 ** 5]
    rounds, inner, warmup = (4, 3, 2) if args.quick else (25, 10, 5)
    t_start = harness.timer().start()

    builders = {}
    for K in Ks:
        x, y = data(K)
        builders[f"sparse K={K}"] = (K, build_sparse(K), x, y)
    for K in dense_Ks:
        x, y = data(K)
        builders[f"dense K={K}"] = (K, build_dense(K), x, y)
    # bare svi.step calls, interleaved across the models (a timing harness, not a training loop)
    steps = {label: (lambda svi=svi, x=x, y=y: svi.step(x, y)) for label, (K, svi, x, y) in builders.items()}
    times = harness.paired_step_times(steps, rounds, block=inner, warmup=warmup)
    rows = []
    print(f"{'path':<8s} {'K':>9s} {'median ms/step':>15s} {'ratio to K=1e3 (median over rounds)':>38s}")
    for label, (K, svi, x, y) in builders.items():
        kind = label.split()[0]
        ref = times[f"{kind} K={Ks[0]}"]
        ratios = [a / b for a, b in zip(times[label], ref)]
        med = harness.median
        row = {"path": kind, "K": K, "median_ms": 1000 * med(times[label]),
               "ratio_to_K1e3": med(ratios), "ratio_of_medians": med(times[label]) / med(ref),
               "state_MB": state_bytes(svi) / 2 ** 20}
        rows.append(row)
        print(f"{kind:<8s} {K:>9d} {row['median_ms']:>15.2f} {row['ratio_to_K1e3']:>38.2f}")
    largest = [r for r in rows if r["path"] == "sparse" and r["K"] == Ks[-1]][0]
    met = largest["ratio_to_K1e3"] <= 1.5
    print(f"target: sparse K={Ks[-1]:.0e} step within 1.5x of K=1e3: ratio {largest['ratio_to_K1e3']:.2f} -> "
          f"{'MET' if met else 'MISSED'}")
    del builders
    print("memory (fresh subprocess per K):")
    mem = measure_memory(Ks, 10 if args.quick else 30)
    for m in mem:
        m["peak_MB"] = m["peak_minus_base"] / 2 ** 20
        m["state_MB"] = m["state_bytes"] / 2 ** 20
        m["ratio"] = m["peak_minus_base"] / m["state_bytes"]
        print(f"  K={m['K']:>8d}: peak RSS increase {m['peak_MB']:9.1f} MB, parameters + optimizer state "
              f"{m['state_MB']:9.1f} MB (ratio {m['ratio']:.2f})")
    result = {"config": {"D": D, "B": B, "num_negatives": S, "num_kl_classes": S, "num_eta_classes": S,
                         "N": N, "rounds": rounds, "steps_per_round": inner, "threads": 1},
              "timing": rows, "memory": mem, "target_ratio": 1.5, "target_met": met,
              "seconds_total": t_start.wall}
    path = harness.save(args, "bayes_scaling", result)
    plot(rows, mem, path.with_suffix(".png"))
    print(f"total {t_start.wall:.0f}s")
    return 0


def plot(rows, mem, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for kind, mk in (("sparse", "o-"), ("dense", "s--")):
        r = [x for x in rows if x["path"] == kind]
        axes[0].loglog([x["K"] for x in r], [x["median_ms"] for x in r], mk,
                       label={"sparse": "class-subsampled (this issue)", "dense": "AutoNormal, dense"}[kind])
    axes[0].set_xlabel("K")
    axes[0].set_ylabel("ms per SVI step (median)")
    axes[0].set_title(f"step time, D={D}, B={B}, {S} negatives")
    axes[0].legend()
    axes[1].loglog([m["K"] for m in mem], [m["peak_MB"] for m in mem], "o-", label="peak RSS increase")
    axes[1].loglog([m["K"] for m in mem], [m["state_MB"] for m in mem], "k--", label="parameters + optimizer state")
    axes[1].set_xlabel("K")
    axes[1].set_ylabel("MB")
    axes[1].legend()
    axes[1].set_title("memory")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())

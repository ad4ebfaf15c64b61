"""Demo (README's main job): a 1,000-class softmax fitted with A&R against exact softmax.

Synthetic data from a linear softmax teacher (K = 1,000 classes, D = 32, 20,000 training
and 5,000 test points). Each method runs stock ``pyro.infer.SVI`` for the same wall-time
budget; the demo prints the test log-likelihood (exact), accuracy, steps per second and
the teacher's own test log-likelihood (the ceiling).

    python -m pyro_ar.demo [--budget SECONDS]
"""

import argparse
import time

import torch

import pyro
from pyro.infer import SVI, Trace_ELBO

from pyro_ar import metrics
from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import ClosedFormELBO, GumbelLocalGuide, train
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import lazy_adam


def _empty_guide(*args, **kwargs):
    pass


def run(budget: float = 15.0, seed: int = 0):
    K, D, n_train, n_test = 1000, 32, 20_000, 5_000
    data = make_linear_teacher(n_train + n_test, D, K, "gumbel", weight_scale=4.0, seed=seed)
    x, y = data.x[:n_train], data.y[:n_train]
    xt, yt = data.x[n_train:], data.y[n_train:]
    teacher = metrics.log_likelihood(torch.nn.functional.linear(xt, data.W, data.b), yt)["raw"]
    print(f"Synthetic softmax teacher: K={K}, D={D}, N_train={n_train}, N_test={n_test}")
    print(f"  teacher's own test log-likelihood (ceiling): {teacher:.4f}\n")

    setups = {
        "A&R softmax (closed form, 20 negatives/pt)": dict(
            model=dict(likelihood="ar", num_negatives=20, sparse=True),
            guide=GumbelLocalGuide, elbo=ClosedFormELBO()),
        "exact softmax (O(K) per step)": dict(
            model=dict(likelihood="exact"), guide=None, elbo=Trace_ELBO()),
    }
    rows = []
    for name, s in setups.items():
        pyro.clear_param_store()
        pyro.set_rng_seed(seed)
        model = LinearClassifier(D, K, subsample_size=500, **s["model"])
        guide = s["guide"](model) if s["guide"] else _empty_guide
        svi = SVI(model, guide, lazy_adam({"lr": 0.02}), s["elbo"])
        t0 = time.perf_counter()
        hist = train(svi, x, y, num_steps=10**9, time_budget=budget, eval_every=10**9)
        wall = time.perf_counter() - t0
        u = model.utility(xt)
        ll = metrics.log_likelihood(u, yt)
        rows.append((name, hist[-1]["step"], hist[-1]["step"] / wall, ll["raw"],
                     metrics.accuracy(u, yt), metrics.top_k_accuracy(u, yt, 5)))
    print(f"{'method':46s} {'steps':>6s} {'steps/s':>8s} {'test ll':>8s} {'acc':>6s} {'top5':>6s}")
    for r in rows:
        print(f"{r[0]:46s} {r[1]:6d} {r[2]:8.1f} {r[3]:8.4f} {r[4]:6.3f} {r[5]:6.3f}")
    print(f"\nSame wall-time budget ({budget:.0f} s each); A&R's per-step cost does not grow with K.")
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=15.0, help="seconds of training per method")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    run(a.budget, a.seed)


if __name__ == "__main__":
    main()

"""When is an exact-softmax step cheaper than an A&R step? A measured cost model.

One SVI step of :class:`~pyro_ar.models.LinearClassifier` with MAP weights, lazy
row-sparse Adam and the library's default guide / ELBO -- as ``ARClassifier`` builds it --
is timed (median CPU time per step, one thread, the two likelihoods interleaved in one
process) over a grid of K classes, D features, B datapoints per step and s negatives:

* exact softmax: all K utilities of the minibatch, one (B, D) x (D, K) matmul;
* softmax A&R (Gumbel noise, s negatives per datapoint, ``GumbelLocalGuide`` with its
  natural eta step): the B (s + 1) rows of W gathered, O(B s D).

and each is fitted by least squares (relative errors) to the cost model

.. math::  t_\\text{exact} = a_0 + a_1 B K D + a_2 B K, \\qquad
           t_\\text{A\\&R} = c_0 + c_1 B (s + 1) D + c_2 B (s + 1).

The rule ``pyro_ar.estimator.classifier.exact_step_is_cheaper`` (used by
``ARClassifier(likelihood="auto")``) compares the two fitted costs; its constants are this
benchmark's fit (``--quick`` measures a smaller grid). The table reports, per
configuration, the measured times, the fitted ones, and whether the rule picks the cheaper
likelihood. Results (JSON) go to ``--out``, outside the repository by default.

    python -m benchmarks.exact_vs_ar_cost [--quick] [--out DIR]
"""

import itertools
import statistics

import numpy as np
import torch

import pyro
from pyro.infer import SVI

from benchmarks import harness

from pyro_ar.infer import ClosedFormELBO, default_guide
from pyro_ar.likelihoods import AR
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import lazy_adam


def step_time(likelihood, K, D, B, s, steps, warmup=3, seed=0):
    """Median CPU seconds of one SVI step (after ``warmup`` steps)."""
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    N = max(4 * B, 2048)
    x, y = torch.randn(N, D), torch.randint(K, (N,))
    lik = AR(negatives=min(s, K - 1)) if likelihood == "ar" else likelihood
    model = LinearClassifier(D, K, likelihood=lik,
                             weights="map", subsample_size=B, sparse=True, site="y")
    svi = SVI(model, default_guide(model, local_first=True), lazy_adam({"lr": 0.01}), ClosedFormELBO())
    return statistics.median(harness.step_times(lambda: svi.step(x, y), steps, warmup=warmup)["cpu"])


def features(kind, K, D, B, s):
    if kind == "exact":
        return [1.0, B * K * D, B * K]
    return [1.0, B * (s + 1) * D, B * (s + 1)]


def fit(kind, rows):
    """Non-negative least squares on relative errors: constants of the cost model (seconds)."""
    from scipy.optimize import nnls

    A = np.array([features(kind, r["K"], r["D"], r["B"], r["s"]) for r in rows])
    t = np.array([r[kind] for r in rows])
    coef, _ = nnls(A / t[:, None], np.ones(len(t)))
    return coef.tolist()


def main(argv=None):
    p = harness.parser(__doc__)
    p.add_argument("--steps", type=int, default=None)
    a = p.parse_args(argv)
    harness.start(a)
    if a.quick:
        grid = dict(K=[10, 100, 1000], D=[64, 784], B=[256, 1024], s=[5, 20])
    else:
        grid = dict(K=[10, 30, 100, 300, 1000, 3000], D=[64, 784], B=[256, 1024], s=[1, 5, 20])
    steps = a.steps or (6 if a.quick else 12)
    rows = []
    for K, D, B, s in itertools.product(grid["K"], grid["D"], grid["B"], grid["s"]):
        if s >= K - 1:
            continue
        r = {"K": K, "D": D, "B": B, "s": s}
        r["exact"], r["ar"] = step_time("exact", K, D, B, s, steps), step_time("ar", K, D, B, s, steps)
        rows.append(r)
        print(r, flush=True)
    coef = {kind: fit(kind, rows) for kind in ("exact", "ar")}
    print(f"\nfitted constants (seconds): exact {coef['exact']}, ar {coef['ar']}\n")
    print(f"{'K':>6s} {'D':>5s} {'B':>5s} {'s':>3s} {'exact ms':>9s} {'A&R ms':>8s} "
          f"{'fit exact':>9s} {'fit A&R':>8s} {'cheaper':>8s} {'rule':>6s}")
    hits = 0
    for r in rows:
        pred = {k: float(np.dot(coef[k], features(k, r["K"], r["D"], r["B"], r["s"]))) for k in coef}
        cheaper = "exact" if r["exact"] <= r["ar"] else "ar"
        rule = "exact" if pred["exact"] <= pred["ar"] else "ar"
        hits += cheaper == rule
        r.update(fit_exact=pred["exact"], fit_ar=pred["ar"], cheaper=cheaper, rule=rule)
        print(f"{r['K']:6d} {r['D']:5d} {r['B']:5d} {r['s']:3d} {1e3 * r['exact']:9.2f} {1e3 * r['ar']:8.2f} "
              f"{1e3 * pred['exact']:9.2f} {1e3 * pred['ar']:8.2f} {cheaper:>8s} {rule:>6s}")
    print(f"\nthe rule picks the cheaper likelihood in {hits} of {len(rows)} configurations")
    harness.save(a, "exact_vs_ar_cost", {"coefficients": coef, "rows": rows})
    return rows


if __name__ == "__main__":
    main()

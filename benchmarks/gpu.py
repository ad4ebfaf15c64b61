"""The numbers only a GPU gives: A&R against exact softmax on one device, in wall time.

On one device (``--device cuda`` by default when CUDA is present; ``cpu`` otherwise) this
measures, each step timed by the wall clock after ``torch.cuda.synchronize()`` (on the CPU:
the process CPU time, one torch thread):

(a) ``ar_step``: one SVI step of :class:`~pyro_ar.models.LinearClassifier` with softmax A&R
    (Gumbel noise, ``s`` shared negatives, lazy utilities with sparse gradients, MAP weights,
    ``lazy_adam``, the default guide and ELBO, as ``ARClassifier`` builds it) against K = 10^3
    ... 10^7 classes at D features and B datapoints per step. The step is O(B D + s D)
    whatever K, so its time should be flat in K (target: within 1.5x over 10^3 .. 10^7);
(b) ``exact_step``: the same model with the exact softmax (all K utilities of the minibatch,
    one (B, D) x (D, K) product, dense gradients) at the largest K of the grid that fits
    the device (tried from the largest down; a K that runs out of memory is recorded and
    skipped), against the A&R step at that K (target: exact >= 100x the A&R step);
(c) ``time_to_quality``: tutorial 05's comparison on the device, by wall time: the Brown
    bigram language model (K = 25,275, D = 64, B = 512) trained by A&R softmax (the
    tutorial's likelihood: 256 shared negatives from q(k) ~ (count + 1)^0.75, lazy Adam
    0.01), by the plain exact-softmax loop (``F.cross_entropy`` + Adam 0.003,
    ``benchmarks/plain_loop.py``) and by ``torch.nn.AdaptiveLogSoftmaxWithLoss`` (classes
    ranked by training frequency, cutoffs 2,000 / 10,000, Adam 0.003), each in turn (one
    process, one device) with the library's loop ``pyro_ar.infer.train`` on the wall clock:
    evaluations on ``--eval-pairs`` validation and test pairs, early stopping on validation
    (patience 4), a cap of ``--budget`` seconds per method. Reported: each method's best
    validation point, and the time at which its test log-likelihood first reaches exact's
    best (target: A&R >= 10x sooner than exact);
(d) ``classifier``: ``ARClassifier(device=...).fit`` with its defaults on MNIST (from
    ``--mnist``; skipped with a message when the files are not there) and on a synthetic
    sparse extreme-classification set (``make_sparse_teacher``: ``--sparse-n`` rows,
    ``--sparse-d`` features, ``--sparse-k`` classes), fit time and test log-loss / accuracy;
(e) ``memory``: for every step of (a) and (b), the device's peak allocated memory during the
    timed steps against the bytes of the parameters and of the optimizer state (CUDA only).

It prints one table per part and writes ``gpu[_quick].json`` to ``--out`` (a folder; by
default the system's temporary folder), rewritten after every part so that a run cut short
keeps what it measured. ``--quick``: tiny sizes for the test suite's slow tier (seconds on
a CPU). ``--skip c,d`` leaves parts out.

    python -m benchmarks.gpu [--quick] [--device cuda] [--out DIR] [--skip c,d] [--budget 40]
"""

import os
import statistics
import sys
import time
import traceback

import torch

import pyro

from benchmarks import harness

PARTS = ("a", "b", "c", "d")


# --------------------------------------------------------------------------- clock and memory
class Clock:
    """Seconds of one call on ``device``: wall time between two ``torch.cuda.synchronize()``
    on CUDA (kernels are asynchronous), process CPU time on the CPU."""

    def __init__(self, device):
        self.cuda = torch.device(device).type == "cuda"
        self.name = "wall (cuda synchronized)" if self.cuda else "process CPU"

    def now(self):
        if self.cuda:
            torch.cuda.synchronize()
            return time.perf_counter()
        return time.process_time()

    def time(self, fn, repeats, warmup):
        """Per-call seconds of ``fn()`` for ``repeats`` calls after ``warmup`` untimed ones."""
        for _ in range(warmup):
            fn()
        out = []
        for _ in range(repeats):
            t = self.now()
            fn()
            out.append(self.now() - t)
        return out


def sync_points(fn, device, calls=3):
    """Where a call of ``fn`` makes the host wait for the device (CUDA only; None elsewhere):
    torch's sync debug mode warns at each synchronising operation, and the warnings are
    counted by the Python line that made them. Returns the mean count per call and the
    lines with their counts per call (most frequent first)."""
    import collections
    import warnings

    if torch.device(device).type != "cuda":
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            for _ in range(calls):
                fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    where = collections.Counter(f"{_short_path(w.filename)}:{w.lineno}" for w in caught
                                if "synchroniz" in str(w.message).lower())
    return dict(per_call=sum(where.values()) / calls,
                where={k: v / calls for k, v in where.most_common(25)})


def _short_path(path):
    """``pyro_ar/...``, ``pyro/...``, ``torch/...`` or ``benchmarks/...`` of a source file's path."""
    parts = path.replace(os.sep, "/").split("/")
    for i in range(len(parts) - 1, -1, -1):
        if parts[i] in ("pyro_ar", "pyro", "torch", "benchmarks"):
            return "/".join(parts[i:])
    return path


def state_bytes(svi):
    """(parameter bytes in Pyro's param store, optimizer-state bytes of ``svi.optim``)."""
    params = harness.tensor_bytes([v.unconstrained() for _, v in pyro.get_param_store().items()])
    return params, harness.optimizer_state_bytes(svi.optim)


def peak_reset(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def peak_bytes(device):
    return torch.cuda.max_memory_allocated() if torch.device(device).type == "cuda" else None


def free_device(device):
    import gc

    pyro.clear_param_store()
    gc.collect()
    if torch.device(device).type == "cuda":
        torch.cuda.empty_cache()


# --------------------------------------------------------------------------- (a), (b), (e)
def linear_step(likelihood, K, D, B, s, device, steps, warmup, seed=0, validate=True):
    """Per-step seconds of one SVI step of ``LinearClassifier(D, K)`` with ``likelihood``
    ("ar": softmax A&R with ``s`` shared negatives; "exact") on ``device``, and its memory.
    ``validate``: Pyro's validation (``pyro.validation_enabled``) during the timed steps; its
    checks (distribution arguments, plate sizes, the minibatch's labels) each synchronise the
    device with the host.

    The model, guide, ELBO and optimizer are those ``ARClassifier`` uses
    (``benchmarks/exact_vs_ar_cost.py`` times the same step on the CPU)."""
    from pyro.infer import SVI

    from pyro_ar.infer import ClosedFormELBO, default_guide
    from pyro_ar.models import LinearClassifier
    from pyro_ar.optim import lazy_adam

    free_device(device)
    pyro.set_rng_seed(seed)
    clock = Clock(device)
    N = 16 * B
    x = torch.randn(N, D, device=device)
    y = torch.randint(K, (N,), device=device)
    from pyro_ar.likelihoods import AR
    from pyro_ar.negatives import SharedNegatives

    lik = AR(negatives=SharedNegatives(min(s, K - 1))) if likelihood == "ar" else likelihood
    model = LinearClassifier(D, K, likelihood=lik, weights="map", subsample_size=B,
                             sparse=True, site="y")
    svi = SVI(model, default_guide(model, local_first=True), lazy_adam({"lr": 0.01}), ClosedFormELBO())
    model.check_data(x, y)  # the whole data once, as pyro_ar.infer.train does (steps then skip it)
    svi.step(x, y)  # creates the parameters and the optimizer state (validated)
    peak_reset(device)
    with pyro.validation_enabled(validate):
        times = clock.time(lambda: svi.step(x, y), steps, warmup)
        syncs = sync_points(lambda: svi.step(x, y), device)
    params, optim = state_bytes(svi)
    out = dict(likelihood=likelihood, K=K, D=D, B=B, s=s if likelihood == "ar" else None, validation=validate,
               median_s=statistics.median(times), p10_s=_quantile(times, 0.1), p90_s=_quantile(times, 0.9),
               steps=steps, param_bytes=params, optim_state_bytes=optim, peak_bytes=peak_bytes(device),
               sync_points=syncs)
    del svi, model, x, y
    free_device(device)
    return out


def _quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _is_oom(err):
    return isinstance(err, torch.OutOfMemoryError) or "out of memory" in str(err).lower()


def try_step(likelihood, K, a, steps, warmup, validate=True):
    """:func:`linear_step`, or None when the device runs out of memory (its memory freed
    after the exception, whose traceback holds the step's tensors, is gone)."""
    try:
        return linear_step(likelihood, K, a.D, a.B, a.s, a.device, steps, warmup, validate=validate)
    except RuntimeError as err:
        if not _is_oom(err):
            raise
    free_device(a.device)
    return None


def part_a(a, report):
    """(a) the A&R step against K; (e) its memory."""
    rows = report["ar_step"] = []
    for K in a.ks:
        for validate in a.validation:
            row = try_step("ar", K, a, a.steps, a.warmup, validate)
            rows.append(row or dict(likelihood="ar", K=K, validation=validate, error="out of memory"))
            a.save(report)
        if row is None:  # the larger K are skipped
            break
    flat = report["ar_step_flatness"] = {}
    for validate in a.validation:
        ok = [r for r in rows if "median_s" in r and r["validation"] == validate]
        if len(ok) >= 2:
            ts = [r["median_s"] for r in ok]
            flat["on" if validate else "off"] = dict(
                K_min=ok[0]["K"], K_max=ok[-1]["K"], max_over_min=max(ts) / min(ts),
                largest_over_smallest_K=ts[-1] / ts[0], target=1.5)


def part_b(a, report):
    """(b) the exact step at the largest K of the grid that fits, against the A&R step there
    (both with the same validation setting, the last of ``--validation``)."""
    tried = report["exact_step_tried"] = []
    validate = a.validation[-1]
    for K in sorted(a.ks, reverse=True):
        ex = try_step("exact", K, a, a.exact_steps, 2, validate)
        if ex is None:
            tried.append(dict(likelihood="exact", K=K, validation=validate, error="out of memory"))
            continue
        ar = next((r for r in report.get("ar_step", []) if r.get("K") == K and "median_s" in r
                   and r["validation"] == validate), None)
        if ar is None:
            ar = linear_step("ar", K, a.D, a.B, a.s, a.device, a.steps, a.warmup, validate=validate)
        report["exact_step"] = dict(exact=ex, ar=ar, exact_over_ar=ex["median_s"] / ar["median_s"], target=100.0)
        return
    report["exact_step"] = dict(error="no K of the grid fits the device")


# --------------------------------------------------------------------------- (c)
class AdaptiveBigram:
    """The bigram model with ``torch.nn.AdaptiveLogSoftmaxWithLoss`` (Grave et al. 2017) as
    its output layer: context embeddings E ~ N(0, 0.1^2), classes renumbered by decreasing
    training frequency (the adaptive softmax's head holds the frequent ones), dense Adam. Its
    layers start from PyTorch's default initialisation (the adaptive softmax has no per-class
    bias to start at the unigram, as the other two methods do)."""

    def __init__(self, K, D, x, y, B, lr, counts, device, cutoffs=(2000, 10000)):
        order = counts.argsort(descending=True)
        rank = torch.empty_like(order)
        rank[order] = torch.arange(K)
        self.rank, self.x, self.y, self.B = rank.to(device), x, y, B
        self.E = torch.nn.Embedding(K, D).to(device)
        torch.nn.init.normal_(self.E.weight, std=0.1)
        self.asm = torch.nn.AdaptiveLogSoftmaxWithLoss(D, K, cutoffs=[c for c in cutoffs if c < K - 1],
                                                       div_value=4.0).to(device)
        self.opt = torch.optim.Adam(list(self.E.parameters()) + list(self.asm.parameters()), lr=lr)

    def step(self):
        idx = torch.randint(0, self.x.shape[0], (self.B,), device=self.x.device)
        loss = self.asm(self.E(self.x[idx]), self.rank[self.y[idx]]).loss
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    @torch.no_grad()
    def evaluate(self, prev, nxt, chunk=8192):
        """Exact mean log p(next | prev) (the adaptive softmax's own normalised model)."""
        total = sum(self.asm(self.E(prev[i:i + chunk]), self.rank[nxt[i:i + chunk]]).output.sum()
                    for i in range(0, prev.shape[0], chunk))
        return float(total) / prev.shape[0]


def _brown_methods(a, d, x, y, dev):
    """{name: constructor} of the three methods of (c), each built when called."""
    from benchmarks import brown
    from benchmarks.plain_loop import PlainExactBigram

    from pyro_ar.models import unigram_log_probs

    K, counts = d.num_classes, d.info["class_counts"]
    init_bias = unigram_log_probs(counts).float().to(dev)
    return {
        "ar_softmax": lambda: brown.PyroBigram("ar_softmax", K, a.lm_D, x, y, 512, 1e-2, init_bias, counts, 256,
                                           "importance", dev),
        "exact": lambda: PlainExactBigram(K, a.lm_D, x, y, 512, 3e-3, init_bias, dev),
        "adaptive": lambda: AdaptiveBigram(K, a.lm_D, x, y, 512, 3e-3, counts, dev),
    }


def _train_lm(m, a, xv, yv, xt, yt, clock):
    """Train one method of (c) with ``pyro_ar.infer.train``; its history and best point."""
    from benchmarks import brown

    from pyro_ar.infer import EarlyStopping, train

    sync = torch.cuda.synchronize if clock.cuda else (lambda: None)

    class Stepper:  # what train drives; synchronized so that the wall clock sees the kernels
        def step(self):
            loss = m.step()
            sync()
            return loss

    stop = EarlyStopping("valid_ll", patience=4)
    hist = train(Stepper(), num_steps=10**12, time_budget=a.budget, eval_every=10**12,
                 eval_times=brown._checkpoints(a.budget, a.checkpoints), early_stopping=stop,
                 clock="wall" if clock.cuda else "process",
                 eval_fn=lambda: dict(valid_ll=m.evaluate(xv, yv), test_ll=m.evaluate(xt, yt)))
    hist = [dict(step=h["step"], time=h["time"], valid_ll=h["valid_ll"], test_ll=h["test_ll"])
            for h in hist if "test_ll" in h]
    best = max(hist, key=lambda h: h["valid_ll"])
    steps = hist[-1]["step"]
    return dict(history=hist, best=best, steps=steps, time=hist[-1]["time"], stopped_early=stop.stopped,
                s_per_step=hist[-1]["time"] / max(steps, 1))


def _subset(x, y, n, seed, device):
    """A fixed random subset of n pairs (all when n is 0 or larger than the set), on ``device``."""
    if n and n < x.shape[0]:
        keep = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:n]
        x, y = x[keep], y[keep]
    return x.to(device), y.to(device)


def part_c(a, report):
    """(c) tutorial 05 on the device: time to exact softmax's best test log-likelihood."""
    from benchmarks import brown

    from pyro_ar.datasets import load_brown

    dev, clock = a.device, Clock(a.device)
    d = load_brown(num_valid_docs=25)
    x, y = d.x_train.to(dev), d.y_train.to(dev)
    xv, yv = _subset(d.info["x_valid"], d.info["y_valid"], a.eval_pairs, 98, dev)
    xt, yt = _subset(d.x_test, d.y_test, a.eval_pairs, 99, dev)
    res = report["time_to_quality"] = dict(K=d.num_classes, budget_s=a.budget, clock=clock.name,
                                           eval_pairs=a.eval_pairs, methods={})
    res["validation"] = a.validation[-1]
    for name, make in _brown_methods(a, d, x, y, dev).items():
        free_device(dev)
        pyro.set_rng_seed(0)
        with pyro.validation_enabled(a.validation[-1]):
            res["methods"][name] = _train_lm(make(), a, xv, yv, xt, yt, clock)
        a.save(report)
        print(f"  (c) {name}: {res['methods'][name]['steps']} steps, best test LL "
              f"{res['methods'][name]['best']['test_ll']:.4f}", flush=True)
    target = res["methods"]["exact"]["best"]["test_ll"]
    res["exact_best_test_ll"] = target
    t_exact = harness.time_to_reach(res["methods"]["exact"]["history"], target)
    for name, r in res["methods"].items():
        r["time_to_exact_best"] = t = harness.time_to_reach(r["history"], target)
        r["exact_time_over_this"] = t_exact / t if t and t_exact else None
    res["target_ar_speedup"] = 10.0


# --------------------------------------------------------------------------- (d)
def _fit_classifier(name, X, y, X_test, y_test, device, **kw):
    """``ARClassifier(device=device, random_state=0, **kw).fit`` timed on the wall clock (the
    fit synchronises: it ends on host values), with the test log-loss and accuracy."""
    import numpy as np

    from pyro_ar import ARClassifier
    from pyro_ar.estimator import params_from_plain

    free_device(device)
    peak_reset(device)
    clf = ARClassifier(**params_from_plain(dict(device=device, random_state=0, **kw)))
    t, c = time.perf_counter(), time.process_time()
    clf.fit(X, y)
    wall, cpu = time.perf_counter() - t, time.process_time() - c
    proba = clf.predict_proba(X_test)
    cls = {c: i for i, c in enumerate(clf.classes_.tolist())}
    idx = np.array([cls.get(v, -1) for v in np.asarray(y_test).tolist()])
    p = np.where(idx >= 0, proba[np.arange(len(idx)), np.maximum(idx, 0)], 0.0)
    return dict(dataset=name, n_train=int(X.shape[0]), n_features=int(X.shape[1]),
                n_classes=int(len(clf.classes_)), fit_wall_s=wall, fit_cpu_s=cpu,
                steps=int(getattr(clf, "n_steps_", 0) or 0), epochs=int(getattr(clf, "n_iter_", 0) or 0),
                path=str(getattr(clf, "training_path_", "")),
                test_log_loss=float(-np.log(np.clip(p, 1e-15, 1.0)).mean()),
                test_accuracy=float((proba.argmax(1) == np.maximum(idx, 0)).mean()),
                peak_bytes=peak_bytes(device), options=kw)


def part_d(a, report):
    """(d) ``ARClassifier().fit`` on the device: a sparse extreme-classification set, MNIST."""
    from pyro_ar.datasets import make_sparse_teacher

    rows = report["classifier"] = []
    n, n_test = a.sparse_n, max(1, a.sparse_n // 5)
    s = make_sparse_teacher(n + n_test, a.sparse_d, a.sparse_k, nnz_per_row=10, seed=0)
    X = _to_scipy(s.x)
    y = s.y.numpy()
    rows.append(_fit_classifier(f"sparse teacher (K={a.sparse_k:,}, D={a.sparse_d:,})", X[:n], y[:n],
                                X[n:], y[n:], a.device, **a.fit_kw))
    print(f"  (d) {rows[-1]['dataset']}: {rows[-1]['fit_wall_s']:.1f} s", flush=True)
    a.save(report)
    if a.mnist is None or not os.path.isdir(a.mnist):
        rows.append(dict(dataset="mnist", skipped=f"no MNIST files in {a.mnist!r} (--mnist)"))
        return
    from pyro_ar.datasets import load_mnist

    m = load_mnist(a.mnist)
    k = a.mnist_n or m.x_train.shape[0]
    rows.append(_fit_classifier("mnist", m.x_train[:k].numpy(), m.y_train[:k].numpy(), m.x_test.numpy(),
                                m.y_test.numpy(), a.device, **a.fit_kw))


def _to_scipy(x):
    import scipy.sparse as sp

    x = x.coalesce()
    i, v = x.indices().numpy(), x.values().numpy()
    return sp.csr_matrix((v, (i[0], i[1])), shape=tuple(x.shape))


# --------------------------------------------------------------------------- report
def _mib(b):
    return "-" if b is None else f"{b / 2**20:9.1f}"


def _onoff(row):
    return {True: "on", False: "off"}.get(row.get("validation"), "-")


def print_report(r):
    if r.get("ar_step") or r.get("exact_step"):
        print(f"\n(a, b, e) one SVI step, LinearClassifier, {r['clock']} per step; memory in MiB")
        print(f"{'likelihood':10s} {'valid.':>6s} {'K':>10s} {'median ms':>10s} {'p10':>8s} {'p90':>8s} {'params':>9s} "
              f"{'optim':>9s} {'peak':>9s} {'peak/(p+o)':>10s}")
        ex = r.get("exact_step", {})
        for row in r.get("ar_step", []) + r.get("exact_step_tried", []) + [ex.get("exact")] * ("exact" in ex):
            if "median_s" not in row:
                print(f"{row['likelihood']:10s} {_onoff(row):>6s} {row['K']:10,d}  {row['error']}")
                continue
            ratio = row["peak_bytes"] / (row["param_bytes"] + row["optim_state_bytes"]) if row["peak_bytes"] else None
            print(f"{row['likelihood']:10s} {_onoff(row):>6s} {row['K']:10,d} {1e3 * row['median_s']:10.3f} {1e3 * row['p10_s']:8.3f} "
                  f"{1e3 * row['p90_s']:8.3f} {_mib(row['param_bytes'])} {_mib(row['optim_state_bytes'])} "
                  f"{_mib(row['peak_bytes'])} {'-' if ratio is None else f'{ratio:10.2f}'}")
    last = [row for row in r.get("ar_step", []) if row.get("K") == max(x.get("K", 0) for x in r["ar_step"])] \
        if r.get("ar_step") else []
    for row in last + ([r["exact_step"]["exact"]] if "exact" in r.get("exact_step", {}) else []):
        sp = row.get("sync_points")
        if sp:
            print(f"host-device synchronisations per {row['likelihood']} step at K = {row['K']:,} "
                  f"(validation {_onoff(row)}): "
                  f"{sp['per_call']:.1f}; " + ", ".join(f"{k} ({v:g})" for k, v in list(sp["where"].items())[:8]))
    for v, f in r.get("ar_step_flatness", {}).items():
        print(f"A&R step (validation {v}), K = {f['K_min']:,} .. {f['K_max']:,}: slowest / fastest "
              f"{f['max_over_min']:.2f}x, largest K / smallest K {f['largest_over_smallest_K']:.2f}x "
              f"(target <= {f['target']})")
    if "exact_over_ar" in r.get("exact_step", {}):
        e = r["exact_step"]
        print(f"exact step / A&R step at K = {e['exact']['K']:,} (validation {_onoff(e['exact'])}): "
              f"{e['exact_over_ar']:.1f}x (target >= {e['target']:.0f}x)")
    if "time_to_quality" in r:
        c = r["time_to_quality"]
        print(f"\n(c) tutorial 05 (Brown, K = {c['K']:,}), {c['clock']} seconds, cap {c['budget_s']:g} s per method, "
              f"validation {_onoff(c)};"
              f" exact's best test LL {c['exact_best_test_ll']:.4f}")
        print(f"{'method':12s} {'steps':>7s} {'ms/step':>8s} {'best valid':>11s} {'test there':>11s} {'at s':>7s} "
              f"{'s to exact best':>16s} {'exact / this':>13s}")
        for name, m in c["methods"].items():
            t, sp = m["time_to_exact_best"], m["exact_time_over_this"]
            print(f"{name:12s} {m['steps']:7d} {1e3 * m['s_per_step']:8.2f} {m['best']['valid_ll']:11.4f} "
                  f"{m['best']['test_ll']:11.4f} {m['best']['time']:7.1f} {'-' if t is None else f'{t:16.1f}'} "
                  f"{'-' if sp is None else f'{sp:13.1f}'}")
    if r.get("classifier"):
        print("\n(d) ARClassifier(device=...).fit")
        for row in r["classifier"]:
            if "skipped" in row:
                print(f"{row['dataset']:32s} skipped: {row['skipped']}")
                continue
            print(f"{row['dataset']:32s} N={row['n_train']:,} fit {row['fit_wall_s']:7.1f} s wall "
                  f"({row['steps']} steps), test log-loss {row['test_log_loss']:.4f}, accuracy "
                  f"{row['test_accuracy']:.4f}, peak {_mib(row['peak_bytes']).strip()} MiB; {row['path']}")
    for part, err in r.get("errors", {}).items():
        print(f"\npart ({part}) failed: {err.splitlines()[-1]}")
    sys.stdout.flush()


def parse_args(argv=None):
    p = harness.parser(__doc__, quick_help="tiny sizes (the test suite's slow tier)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--skip", default="", help="parts to leave out, e.g. c,d")
    p.add_argument("--ks", default=None, help="K grid of (a), comma-separated (default 1e3..1e7)")
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--B", type=int, default=512)
    p.add_argument("--s", type=int, default=64, help="shared negatives of the A&R step")
    p.add_argument("--steps", type=int, default=None, help="timed steps per K")
    p.add_argument("--validation", default="on,off",
                   help="Pyro's validation during the timed steps of (a), in turn; (b) and (c) use the last")
    p.add_argument("--budget", type=float, default=None, help="(c): seconds per method")
    p.add_argument("--eval-pairs", type=int, default=None)
    p.add_argument("--mnist", default=os.environ.get("PYRO_AR_MNIST"), help="folder of the MNIST files")
    p.add_argument("--sparse-n", type=int, default=None)
    p.add_argument("--sparse-d", type=int, default=None)
    p.add_argument("--sparse-k", type=int, default=None)
    a = p.parse_args(argv)
    a.skip = {s.strip() for s in a.skip.split(",") if s.strip()}
    if a.skip - set(PARTS):
        p.error(f"--skip takes parts among {PARTS}, got {sorted(a.skip)}")
    q = a.quick
    a.ks = [int(float(k)) for k in a.ks.split(",")] if a.ks else \
        ([100, 1_000, 10_000] if q else [10**3, 10**4, 10**5, 10**6, 10**7, 2 * 10**7])
    flags = {"on": True, "off": False}
    if not a.validation or set(a.validation.split(",")) - set(flags):
        p.error(f"--validation takes on, off or on,off; got {a.validation!r}")
    a.validation = [flags[v] for v in a.validation.split(",")]
    a.steps = a.steps or (5 if q else 50)
    a.exact_steps = 3 if q else 10
    a.warmup = 2 if q else 10
    a.budget = a.budget or (1.5 if q else 40.0)
    a.eval_pairs = a.eval_pairs or (500 if q else 10_000)
    a.checkpoints = 3 if q else 20
    a.lm_D = 16 if q else 64
    a.sparse_n = a.sparse_n or (600 if q else 50_000)
    a.sparse_d = a.sparse_d or (500 if q else 50_000)
    a.sparse_k = a.sparse_k or (50 if q else 20_000)
    a.mnist_n = 1_000 if q else None
    a.fit_kw = dict(max_epochs=1, min_steps=1, prior_scale=1.0) if q else {}
    if a.quick:
        torch.set_num_threads(1)
    return a


def main(argv=None):
    a = parse_args(argv)  # (one torch thread with --quick; a device run keeps torch's default)
    report = dict(environment=harness.environment(), device=str(a.device), clock=Clock(a.device).name,
                  args={k: v for k, v in vars(a).items() if k not in ("skip",)}, skipped=sorted(a.skip), errors={})
    if torch.device(a.device).type == "cuda":
        report["device_name"] = torch.cuda.get_device_name()
        report["device_total_bytes"] = torch.cuda.get_device_properties(0).total_memory
    name = "gpu_quick.json" if a.quick else "gpu.json"
    a.save = lambda rep: harness.write_json(name, rep, a.out)  # after each result: a run cut short keeps them
    path = a.save(report)
    for part, fn in zip(PARTS, (part_a, part_b, part_c, part_d)):
        if part in a.skip:
            continue
        t = time.perf_counter()
        print(f"part ({part}) ...", flush=True)
        try:
            fn(a, report)
        except Exception:  # one part's failure is recorded, the others still run
            report["errors"][part] = traceback.format_exc()
            print(report["errors"][part], file=sys.stderr, flush=True)
            free_device(a.device)
        report.setdefault("part_seconds", {})[part] = time.perf_counter() - t
        path = a.save(report)
    print_report(report)
    print(f"\nwrote {path}")
    return report


if __name__ == "__main__":
    main()

"""A neural language model on Brown or GCIDE: A&R vs exact, sampled and adaptive softmax at equal CPU time (issues 14, 37).

The model (Bengio et al. 2003, :class:`pyro_ar.models.NGramBody` + the lazy output layer of
:class:`pyro_ar.models.NeuralClassifier`): the ``--context`` previous words' embeddings
(``--embedding`` each, concatenated), one tanh hidden layer of ``--features`` units, a
K-class output layer over the vocabulary of ``--corpus``: ``brown`` (``load_brown(num_valid_docs=25)``:
425 / 25 / 50 documents, K = 25,275) or ``gcide`` (``load_gcide_corpus``, ``--gcide-path`` or
``$PYRO_AR_DATA/gcide``: K = 95,659); contexts from :func:`pyro_ar.models.context_windows`,
across sentence boundaries. Output biases start at the log unigram frequencies.

Methods (same body, minibatch ``--batch``, step size ``--lr``):

* ``ar``       A&R softmax: ``AR(negatives=ImportanceNegatives(s, (count + 1)^0.75))``,
  Gumbel local guide with its closed-form step, ``sparse=True``, ``lazy_adam`` (sparse input
  embeddings and output rows);
* ``sampled``  sampled softmax (``Sampled`` with the same negatives), same optimiser;
* ``exact``    the exact softmax as a user writes it: ``F.cross_entropy(head(body(x)), y)``
  with ``torch.optim.Adam`` over a dense body and head (issue 16: exact speed claims are made
  against the plain loop);
* ``adaptive`` PyTorch's ``nn.AdaptiveLogSoftmaxWithLoss`` on the same body (cutoffs by
  frequency, ``benchmarks.plain_loop.adaptive_output_layer``), ``SparseAdam`` for the input
  embeddings and ``Adam`` for the rest, as a user tuning for speed writes it.

``--lrs ar=0.01,adaptive=0.003`` gives a method its own step size (default ``--lr``).
``--lr-grid 0.003,0.01,0.03`` trains each method of ``--grid-methods`` (default: all) at every
step size and keeps its run with the best validation log-likelihood (chosen on validation,
like the early-stopping point; nothing is tuned on the test contexts); every run of the grid
is printed and saved (``grid``). ``--max-procs N`` makes the runs in N forked worker
processes at a time (one torch thread each, each on its own CPU clock). Each run is also
saved on its own as it ends; ``--from-runs DIR1,DIR2`` tabulates the saved runs of earlier
invocations as one grid (nothing is trained). The
per-pair test log-likelihoods at each method's best validation point give the paired
standard error of A&R's advantage over each other method (the same test contexts).

Each method trains with ``pyro_ar.infer.train`` (the library's one loop) for ``--budget``
CPU seconds (``time.process_time``, one torch thread, evaluation excluded), evaluated at
fixed CPU times on 5,000 validation and 5,000 test contexts (exact log-likelihood over all
K classes, one evaluation path: :mod:`pyro_ar.evaluation`), with ``EarlyStopping`` on the
validation log-likelihood (patience 4). The runs go one after the other in one process
(``--max-procs``: side by side).
Reported: each method's best validation point and its test log-likelihood / perplexity
there, steps and CPU ms per step, and the CPU time at which A&R's test log-likelihood first
reaches exact's best.

    python -m benchmarks.neural_lm [--quick] [--corpus brown|gcide] [--methods ar,sampled,adaptive,exact]
        [--budget 120] [--context 4] [--lrs ar=0.01] [--lr-grid 0.003,0.01] [--grid-methods ar,adaptive]
        [--max-procs 3] [--out DIR]

Writes ``neural_lm[_gcide].json`` (and the ``.png``) to ``--out`` (default: the temp directory).
"""

import copy
import math

import torch
import torch.nn.functional as F

import pyro

from benchmarks import harness
from benchmarks.harness import table

from pyro_ar import evaluation
from benchmarks.plain_loop import adaptive_output_layer, optimizer_step
from pyro_ar.datasets import load_brown, load_gcide_corpus
from pyro_ar.infer import EarlyStopping, default_elbo, default_guide, train
from pyro_ar.likelihoods import AR, Sampled
from pyro_ar.models import NeuralClassifier, NGramBody, context_windows, unigram_log_probs
from pyro_ar.negatives import ImportanceNegatives
from pyro_ar.optim import lazy_adam
from pyro_ar.models import Init

METHODS = ("ar", "sampled", "exact", "adaptive")
LABELS = {"ar": "A&R softmax", "sampled": "sampled softmax", "exact": "exact softmax (plain torch loop)",
          "adaptive": "adaptive softmax (torch AdaptiveLogSoftmax)"}


def load(args):
    """The corpus as n-word contexts: ``dict(split -> (contexts, targets))``, K and the target counts."""
    d = load_brown(num_valid_docs=25) if args.corpus == "brown" else load_gcide_corpus(args.gcide_path)[0]
    n = args.context
    splits = {"train": (d.x_train, d.y_train), "valid": (d.info["x_valid"], d.info["y_valid"]),
              "test": (d.x_test, d.y_test)}
    out = {}
    for i, (name, (x, y)) in enumerate(splits.items()):
        c = context_windows(x, y, n)
        if name != "train" and args.eval_pairs < len(y):  # a fixed random subset keeps evaluation quick
            keep = torch.randperm(len(y), generator=torch.Generator().manual_seed(97 + i))[:args.eval_pairs]
            c, y = c[keep], y[keep]
        out[name] = (c, y)
    return out, d.num_classes, d.info["class_counts"]


class PlainExact:
    """The exact-softmax neural LM in plain PyTorch: dense body and head, ``torch.optim.Adam``."""

    def __init__(self, K, args, x, y, init_bias):
        self.body = NGramBody(K, args.context, args.embedding, args.features, sparse=False)
        self.head = torch.nn.Linear(args.features, K)
        with torch.no_grad():
            self.head.weight.normal_(0.0, args.features ** -0.5)
            self.head.bias.copy_(init_bias)
        params = list(self.body.parameters()) + list(self.head.parameters())
        self.opt = torch.optim.Adam(params, lr=args.lr)
        self.x, self.y, self.B = x, y, args.batch

    def step(self):
        idx = torch.randint(0, len(self.y), (self.B,))
        loss = F.cross_entropy(self.head(self.body(self.x[idx])), self.y[idx])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    @torch.no_grad()
    def log_likelihood(self, x, y, reduce="mean"):
        h = torch.cat([self.body(x[i:i + 4096]) for i in range(0, len(x), 4096)])
        return evaluation.log_likelihood(evaluation.linear_source(h, self.head.weight, self.head.bias), y,
                                         reduce=reduce)


class PlainAdaptive:
    """The same body with PyTorch's adaptive softmax as the output layer: ``SparseAdam`` for
    the input embeddings, ``Adam`` for the hidden layer and the adaptive softmax."""

    def __init__(self, K, args, x, y, init_bias, counts):
        self.body = NGramBody(K, args.context, args.embedding, args.features, sparse=True)
        self.asm, self.rank, self.cutoffs = adaptive_output_layer(args.features, K, counts, init_bias)
        dense = list(self.body.hidden.parameters()) + list(self.asm.parameters())
        self.opts = [torch.optim.SparseAdam(list(self.body.embedding.parameters()), lr=args.lr),
                     torch.optim.Adam(dense, lr=args.lr)]
        self.x, self.y, self.B = x, y, args.batch

    def step(self):
        idx = torch.randint(0, len(self.y), (self.B,))
        return optimizer_step(self.opts, self.asm(self.body(self.x[idx]), self.rank[self.y[idx]]).loss)

    @torch.no_grad()
    def log_likelihood(self, x, y, reduce="mean"):
        h = torch.cat([self.body(x[i:i + 4096]) for i in range(0, len(x), 4096)])
        return evaluation.log_likelihood(lambda rows: self.asm.log_prob(h[rows]).index_select(1, self.rank), y,
                                         rows=torch.arange(len(y)), chunk_size=256, reduce=reduce)


class PyroNeuralLM(harness.SVIMethod):
    """NeuralClassifier + SVI with a subsampled likelihood (A&R or sampled softmax)."""

    def __init__(self, method, K, args, x, y, init_bias, counts, compiled=True):
        negatives = ImportanceNegatives(args.negatives, (counts.double() + 1) ** args.power)
        likelihood = AR(negatives=negatives) if method == "ar" else Sampled(negatives)
        body = NGramBody(K, args.context, args.embedding, args.features, sparse=True)
        model = NeuralClassifier(body, args.features, K, likelihood=likelihood, subsample_size=args.batch,
                                 sparse=True, init=Init(bias_scale=0.0, bias=init_bias))
        # local_first: the closed-form eta step before the gradient step (each context is seen
        # about once per epoch, so a stale eta would leave the bound loose)
        guide = default_guide(model, local_first=True) if method == "ar" else default_guide(model)
        super().__init__(model, guide, lazy_adam({"lr": args.lr}), default_elbo(compiled=compiled), x, y)

    def log_likelihood(self, x, y, reduce="mean"):
        return self.model.log_likelihood(x, y, reduce=reduce)


def run_method(method, data, K, counts, args, lr=None):
    """Train ``method`` for ``args.budget`` CPU s at step size ``lr`` (default: its ``--lrs``
    entry, else ``--lr``); its curve, best validation point and per-context test LLs there."""
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    (x, y), (xv, yv), (xt, yt) = data["train"], data["valid"], data["test"]
    init_bias = unigram_log_probs(counts).float()
    args = copy.copy(args)
    args.lr = lr if lr is not None else parse_lrs(args.lrs).get(method, args.lr)
    if method == "exact":
        m = PlainExact(K, args, x, y, init_bias)
    elif method == "adaptive":
        m = PlainAdaptive(K, args, x, y, init_bias, counts)
    else:
        m = PyroNeuralLM(method, K, args, x, y, init_bias, counts)
    m.step()  # one untimed warm-up step (lazy imports, allocations)
    best = {"valid_ll": -math.inf, "test_lls": None}  # per test context, at the best validation point

    def evaluate():
        lls = m.log_likelihood(xt, yt, reduce="none")
        ll, vll = lls.mean().item(), m.log_likelihood(xv, yv)
        if vll > best["valid_ll"]:
            best.update(valid_ll=vll, test_lls=lls)
        return dict(valid_ll=vll, test_ll=ll, perplexity=math.exp(-ll))

    def progress(r):
        if "test_ll" in r:
            print(f"  {method:8s} step {r['step']:6d}  CPU {r['time']:6.1f} s  valid {r['valid_ll']:.4f}  "
                  f"test {r['test_ll']:.4f}", flush=True)

    stop = EarlyStopping("valid_ll", patience=args.patience)
    marks = [t for t in (2, 5, 10) if t < args.budget / 3]
    marks += [args.budget * i / args.evals for i in range(1, args.evals)]
    t0 = harness.timer().start()
    history = train(m, num_steps=10**12, time_budget=args.budget, clock="process", eval_fn=evaluate,
                    eval_times=sorted(marks), eval_every=10**12, callbacks=[progress], early_stopping=stop)
    evals = [dict(step=h["step"], time=h["time"], valid_ll=h["valid_ll"], test_ll=h["test_ll"])
             for h in history if "test_ll" in h]
    last = history[-1]
    return dict(method=method, label=LABELS[method], curve=evals, best=max(evals, key=lambda h: h["valid_ll"]),
                steps=last["step"], cpu_s=last["time"], ms_per_step=1e3 * last["time"] / max(1, last["step"]),
                stopped_early=stop.stopped, wall_s=t0.wall, lr=args.lr, best_test_lls=best["test_lls"])


def grid_jobs(args):
    """``[(method, step size)]``: every run to make, in order -- each method of ``--grid-methods``
    (default: all) at every step size of ``--lr-grid``, the others at their own step size
    (None: the ``--lrs`` entry, else ``--lr``)."""
    grid = [float(v) for v in args.lr_grid.split(",")] if args.lr_grid else []
    gridded = (args.grid_methods or args.methods).split(",")
    return [(m, lr) for m in args.methods.split(",") for lr in (grid if grid and m in gridded else [None])]


_SHARED = {}  # the data of the forked workers (inherited, not pickled)


def _worker_init():
    """A forked worker: one torch thread, and its own session, so that the machine's
    scheduler shares the CPU between the runs as between separate commands."""
    import os

    torch.set_num_threads(1)
    os.setsid()


def _run_job(job):
    method, lr = job
    return run_method(method, *_SHARED["data"], lr=lr)


def save_run(run, args):
    """Each finished run as ``neural_lm_<corpus>_<method>_lr<lr>.json`` in ``--out`` (per-context
    test log-likelihoods included): what a run that is stopped early keeps."""
    import json
    from pathlib import Path

    if not getattr(args, "out", None):
        return
    rec = {k: (v.tolist() if isinstance(v, torch.Tensor) else v) for k, v in run.items()}
    path = Path(args.out) / f"neural_lm_{args.corpus}_{run['method']}_lr{run['lr']:g}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec))


def load_runs(folders, corpus):
    """The runs :func:`save_run` wrote to ``folders`` (comma-separated) for ``corpus``, per-context
    test log-likelihoods back as tensors: ``--from-runs`` tabulates runs of several invocations
    (e.g. a grid point added later) as one grid, chosen on validation as usual."""
    import json
    from pathlib import Path

    runs = []
    for folder in folders.split(","):
        for path in sorted(Path(folder).glob(f"neural_lm_{corpus}_*_lr*.json")):
            run = json.loads(path.read_text())
            if run.get("best_test_lls") is not None:
                run["best_test_lls"] = torch.tensor(run["best_test_lls"], dtype=torch.float64)
            runs.append(run)
    if not runs:
        raise ValueError(f"--from-runs: no neural_lm_{corpus}_<method>_lr<lr>.json in {folders!r}")
    return runs


def run_jobs(jobs, data, K, counts, args):
    """The runs of ``jobs`` (:func:`grid_jobs`), in order: one after another in this process,
    or with ``--max-procs N > 1`` in N forked worker processes at a time (one torch thread
    each, each run on its own process's CPU clock). Each run is saved as it ends (:func:`save_run`)."""
    n = min(getattr(args, "max_procs", None) or 1, len(jobs))
    if n <= 1:
        runs = []
        for m, lr in jobs:
            runs.append(run_method(m, data, K, counts, args, lr=lr))
            save_run(runs[-1], args)
        return runs
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    _SHARED["data"] = (data, K, counts, args)
    try:
        with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("fork"),
                                 initializer=_worker_init) as pool:
            futures = [pool.submit(_run_job, job) for job in jobs]
            for f in as_completed(futures):
                save_run(f.result(), args)
            return [f.result() for f in futures]
    finally:
        _SHARED.clear()


def pick_by_validation(runs):
    """The run with the best validation log-likelihood at its best validation point."""
    return max(runs, key=lambda r: r["best"]["valid_ll"])


def parse_lrs(text):
    """``{method: step size}`` from a ``--lrs`` option (:func:`benchmarks.harness.parse_lrs`)."""
    return harness.parse_lrs(text, METHODS)


def paired(results, reference="ar"):
    """A&R's best test log-likelihood minus each other method's, with the paired standard
    error over the test contexts (``std(d) / sqrt(n)`` of the per-context differences)."""
    out = {}
    ref = results.get(reference, {}).get("best_test_lls")
    for m, r in results.items():
        if m != reference and ref is not None and r.get("best_test_lls") is not None:
            d = (ref - r["best_test_lls"]).double()
            out[f"{reference}_minus_{m}"] = dict(mean=d.mean().item(), se=(d.std() / d.numel() ** 0.5).item(),
                                                 pairs=d.numel())
    return out


def summarise(results):
    rows = []
    exact = results.get("exact")
    for r in results.values():
        b = r["best"]
        row = dict(method=r["label"], lr=r["lr"], steps=r["steps"], ms_per_step=r["ms_per_step"], best_time=b["time"],
                   valid_ll=b["valid_ll"], test_ll=b["test_ll"], perplexity=math.exp(-b["test_ll"]),
                   stopped="early" if r["stopped_early"] else "budget")
        if exact is not None:
            row["step_cost_vs_exact"] = exact["ms_per_step"] / r["ms_per_step"]
            t = harness.time_to_reach(r["curve"], exact["best"]["test_ll"])
            row["time_to_exact_best"] = t
            row["speedup_to_exact_best"] = exact["best"]["time"] / t if t else None
        rows.append(row)
    return rows


def plot(results, K, args, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4))
    for r in results.values():
        ax.plot([h["time"] for h in r["curve"]], [h["test_ll"] for h in r["curve"]], "o-", ms=3, label=r["label"])
    ax.set(xlabel="training CPU time (s, one thread)", ylabel="test log-likelihood per word",
           title=f"{args.corpus} neural LM, {args.context}-word context, K = {K:,}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def step_profile(data, K, counts, args):
    """CPU ms per training step of each method, measured interleaved in this process:
    ``--step-profile N`` steps of each in turn, 5 rounds, the median round per method (A&R
    also on the traced path, ``ClosedFormELBO(compiled=False)``: what the compiled step saves)."""
    x, y = data["train"]
    init_bias = unigram_log_probs(counts).float()
    makers = {"ar": lambda: PyroNeuralLM("ar", K, args, x, y, init_bias, counts),
              "ar_traced": lambda: PyroNeuralLM("ar", K, args, x, y, init_bias, counts, compiled=False),
              "sampled": lambda: PyroNeuralLM("sampled", K, args, x, y, init_bias, counts),
              "adaptive": lambda: PlainAdaptive(K, args, x, y, init_bias, counts),
              "exact": lambda: PlainExact(K, args, x, y, init_bias)}
    names = [m for m in ("ar", "ar_traced", "sampled", "adaptive", "exact")
             if m.split("_")[0] in args.methods.split(",")]
    methods, times = {}, {m: [] for m in names}
    for m in names:
        pyro.clear_param_store()  # each its own store: built one after another, stepped in turn
        methods[m] = (makers[m](), dict(pyro.get_param_store().items()))
    for _ in range(5):
        for m in names:
            method, store = methods[m]
            pyro.get_param_store().clear()
            for name, value in store.items():  # its own parameters (the same tensors) back in the store
                pyro.get_param_store()[name] = value
            method.step()  # re-entry (one untimed step)
            with harness.timer() as t:
                for _ in range(args.step_profile):
                    method.step()
            times[m].append(1e3 * t.cpu / args.step_profile)
            store = dict(pyro.get_param_store().items())
            methods[m] = (method, store)
    rows = [dict(method=m, ms_per_step=sorted(v)[len(v) // 2], rounds=v) for m, v in times.items()]
    ref = next((r["ms_per_step"] for r in rows if r["method"] == "sampled"), None)
    for r in rows:
        r["vs_sampled"] = r["ms_per_step"] / ref if ref else None
    print(table(rows, [("method", "method", ""), ("ms / step (median of 5)", "ms_per_step", ".2f"),
                       ("/ sampled", "vs_sampled", ".2f")]))
    return rows


def main(argv=None):
    p = harness.parser(__doc__, quick_help="4 CPU s per method, 1,000 evaluation pairs")
    p.add_argument("--budget", type=float, default=120.0, help="CPU seconds of training per method")
    p.add_argument("--methods", default="ar,sampled,exact", help="comma-separated subset of " + ",".join(METHODS))
    p.add_argument("--corpus", default="brown", choices=["brown", "gcide"])
    p.add_argument("--gcide-path", default=None, help="the extracted dict-gcide folder (default $PYRO_AR_DATA/gcide)")
    p.add_argument("--lrs", default=None, help="per-method step sizes, e.g. ar=0.01,adaptive=0.003")
    p.add_argument("--context", type=int, default=4, help="previous words per input")
    p.add_argument("--embedding", type=int, default=64)
    p.add_argument("--features", type=int, default=128, help="hidden units = the output layer's input")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--negatives", type=int, default=256)
    p.add_argument("--power", type=float, default=0.75, help="proposal (count + 1)^power")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--lr-grid", default=None, help="comma-separated step sizes for --grid-methods")
    p.add_argument("--grid-methods", default=None, help="methods trained at each --lr-grid step (default: all)")
    p.add_argument("--max-procs", type=int, default=None,
                   help="runs at once in forked worker processes, one thread each (default: one after another)")
    p.add_argument("--from-runs", default=None,
                   help="comma-separated --out folders of earlier runs: tabulate their saved runs, train nothing")
    p.add_argument("--step-profile", type=int, default=0,
                   help="only time N steps of each method interleaved (5 rounds) and report ms / step")
    p.add_argument("--evals", type=int, default=6, help="evaluations per budget (plus 2, 5, 10 s)")
    p.add_argument("--patience", type=int, default=4)
    p.add_argument("--eval-pairs", type=int, default=5_000)
    args = p.parse_args(argv)
    if args.quick:
        args.budget, args.eval_pairs, args.evals = 4.0, 1_000, 2
    harness.start(args)
    pyro.enable_validation(False)
    data, K, counts = load(args)
    print(f"{args.corpus}: K = {K:,}, {len(data['train'][1]):,} training contexts of {args.context} words; "
          f"{args.budget:.0f} CPU s per method", flush=True)
    if args.step_profile:
        rows = step_profile(data, K, counts, args)
        harness.save(args, "neural_lm_step" + ("" if args.corpus == "brown" else "_" + args.corpus), {"rows": rows})
        return rows
    if args.from_runs:
        runs = [r for r in load_runs(args.from_runs, args.corpus) if r["method"] in args.methods.split(",")]
    else:
        runs = run_jobs(grid_jobs(args), data, K, counts, args)
    results = {m: pick_by_validation([r for r in runs if r["method"] == m])
               for m in args.methods.split(",") if any(r["method"] == m for r in runs)}
    grid = [dict(method=r["method"], lr=r["lr"], steps=r["steps"], best_time=r["best"]["time"],
                 valid_ll=r["best"]["valid_ll"], test_ll=r["best"]["test_ll"], chosen=r is results[r["method"]])
            for r in runs]
    rows = summarise(results)
    pairs = paired(results)
    for r in results.values():
        r.pop("best_test_lls", None)
    if len(grid) > len(results):
        print("\nevery run of the step-size grid (chosen: the best validation LL of its method):")
        print(table(grid, [("method", "method", ""), ("lr", "lr", "g"), ("steps", "steps", "d"),
                           ("best at s", "best_time", ".1f"), ("valid LL", "valid_ll", ".4f"),
                           ("test LL", "test_ll", ".4f"), ("chosen", "chosen", "")]))
    cols = [("method", "method", ""), ("lr", "lr", "g"), ("steps", "steps", "d"), ("ms/step", "ms_per_step", ".2f"),
            ("exact step / step", "step_cost_vs_exact", ".1f"), ("best at s", "best_time", ".1f"),
            ("valid LL", "valid_ll", ".4f"), ("test LL", "test_ll", ".4f"), ("test ppl", "perplexity", ".1f"),
            ("s to exact's best", "time_to_exact_best", ".1f"), ("x sooner", "speedup_to_exact_best", ".1f"),
            ("stopped", "stopped", "")]
    print(f"\n{args.corpus} neural LM: {args.context}-word context, E = {args.embedding}, F = {args.features}, "
          f"K = {K:,}, B = {args.batch}, {args.negatives} negatives ~ (count+1)^{args.power}, "
          f"{args.budget:.0f} CPU s per method (one thread), early stopping on validation")
    print(table(rows, cols))
    for key, d in pairs.items():
        print(f"{key.replace('_minus_', ' - ')}: {d['mean']:+.4f} nats (paired s.e. {d['se']:.4f}, {d['pairs']:,} "
              f"test contexts)")
    name = "neural_lm" + ("" if args.corpus == "brown" else "_" + args.corpus)
    path = harness.save(args, name, {"rows": rows, "results": results, "paired": pairs, "grid": grid})
    plot(results, K, args, path.with_suffix(".png"))
    return rows


if __name__ == "__main__":
    main()

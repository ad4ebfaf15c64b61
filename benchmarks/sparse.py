"""Sparse, high-dimensional inputs at large K (issue 18): step time against D, memory, and
time-to-quality on next-word prediction from a bag of previous words.

Parts (``--part``, default all):

* ``scaling`` -- CPU time per SVI step at fixed non-zeros per row (10) against
  D in {10^3, 10^4, 10^5}, paired in ONE process (blocks of steps interleaved across the
  configurations, so that load changes hit all alike): the low-rank model (r = 64) at
  K = 10^5, A&R with per-datapoint and with shared negatives, and the full-rank sparse path
  (entry-sparse gradients, per-entry lazy Adam) at K = 10^3 (where a full K x D W plus its
  optimizer state fits: 1.6 GB at D = 10^5; at K = 10^5 it would be 160 GB). B = 256,
  s = 20, ``weights="mle"``. Peak memory of each configuration in its own subprocess (run
  first; ``VmHWM``): the peak resident set minus the resident set before the model
  was built, against the bytes of the parameters and the optimizer state, and against the
  B (1 + s) D floats a row-gathering step would hold.
* ``brown`` / ``synthetic`` -- time to quality: the low-rank model (r = 128, sparse x, MAP
  prior scale ``--prior-scale``, minibatch ``--batch`` = 1,024 as the estimator's, the
  features divided by the rms row norm as the estimator does, biases at the centred log
  frequencies) trained by A&R, the sampled softmax and OVE (SVI, lazy Adam, constant step
  size, the same s = 20 importance negatives drawn from the class counts^0.75; A&R with the
  estimator's local-first Gumbel guide) and the exact softmax (a plain ``F.cross_entropy`` +
  ``torch.optim.Adam`` loop over all K classes of the same model and prior), round-robin in
  one process with equal CPU slices; test log-likelihood, top-1 and top-10 after every
  slice against the unigram baseline; peak memory of each method alone in a subprocess.
  ``brown``: the estimator's problem below; ``synthetic``:
  :func:`pyro_ar.datasets.make_sparse_teacher` at ``--D``, ``--K``, ``--nnz``.
* ``estimator`` -- ``ARClassifier()`` with default settings (or ``--estimator-kwargs``) on
  the Brown next-word problem: 75,000 training rows, the bag of the previous 10 words with
  the i-th previous word weighted 1/i (:func:`pyro_ar.datasets.load_brown_bag_of_words`,
  ``position_weights="inverse"``; D = 26,101, about 9.5 non-zeros per row): the path it
  chooses, CPU time per epoch and in total, peak memory, test log-likelihood / top-1 /
  top-10 against the unigram baseline (test labels among the training classes).

All timings are process CPU time (``time.process_time``) with ``torch.set_num_threads(1)``.

    python -m benchmarks.sparse [--quick] [--part scaling|brown|synthetic|estimator|all] [--out DIR]
        [--D 50000 --K 20000 --nnz 10] [--rank 128 --prior-scale 0.1 --lr 0.01 --batch 1024 --rounds 8 --slice 10]
        [--window 10 --position-weights inverse|none] [--estimator-kwargs '{"prior_scale": 0.1}']

Writes ``sparse_<part>[_quick].json`` to ``--out``.
"""

import argparse
import functools
import json
import math
import os
import statistics
import subprocess

import numpy as np
import torch

import pyro
from pyro.infer import SVI

from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.likelihoods import AR, OVE, Exact, Sampled
from pyro_ar.models import LinearClassifier
from pyro_ar.negatives import SharedNegatives
from pyro_ar.optim import lazy_adam

from benchmarks import harness
from benchmarks.harness import peak_bytes, reset_peak, rss_bytes
from pyro_ar.models import Init, MAP

B, S, NNZ = 256, 20, 10
#: The Brown problem: bags of the previous WINDOW words, the i-th previous word weighing 1/i
#: (a plain count bag hides which word came last from a linear model: RESULTS.md, issue 18)
WINDOW, POSITION_WEIGHTS = 10, "inverse"
METHODS = ("ar", "sampled", "ove", "exact")


# ------------------------------------------------------------------ scaling in D
def scaling_configs(quick):
    Ds = [1_000, 10_000] if quick else [1_000, 10_000, 100_000]
    low = [dict(name=f"low_rank_{strat}", K=100_000, D=D, rank=64, strategy=strat)
           for strat in ("per_datapoint", "shared") for D in Ds]
    full = [dict(name="full_rank_per_datapoint", K=1_000, D=D, rank=None, strategy="per_datapoint")
            for D in Ds]
    return low + full


def build(cfg, tag, N=20_000, seed=0):
    """A model, SVI and sparse data (uniform features, NNZ per row, random labels)."""
    g = torch.Generator().manual_seed(seed)
    rows = torch.arange(N).repeat_interleave(NNZ)
    cols = torch.randint(cfg["D"], (N * NNZ,), generator=g)
    x = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(N * NNZ), (N, cfg["D"]),
                                check_invariants=False).coalesce()
    y = torch.randint(cfg["K"], (N,), generator=g)
    negatives = SharedNegatives(S) if cfg["strategy"] == "shared" else S
    model = LinearClassifier(cfg["D"], cfg["K"], likelihood=AR(negatives=negatives), subsample_size=B,
                             sparse=True, rank=cfg["rank"], prefix=f"{tag}.", site=f"{tag}_y")
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    return model, svi, x, y


def param_state_bytes(cfg):
    """Parameters + lazy Adam state: two moments + step counts (int32 per entry on the
    full-rank sparse path, int64 per row otherwise)."""
    K, D, r = cfg["K"], cfg["D"], cfg["rank"]
    if r is None:
        return 4 * (K * D * 4 + K * 3) + 8 * K
    n = (K + D) * r + K
    return 4 * 3 * n + 8 * (2 * K + D)


def scaling_worker(cfg, steps):
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    before = rss_bytes()
    model, svi, x, y = build(cfg, "w")
    data_bytes = rss_bytes() - before
    for _ in range(steps):
        svi.step(x, y)
    return dict(cfg, rss_before=before, data_bytes=data_bytes, peak=peak_bytes(),
                param_state_bytes=param_state_bytes(cfg), row_gather_bytes=4 * B * (1 + S) * cfg["D"])


def run_scaling(quick, args):
    torch.set_num_threads(1)
    cfgs = scaling_configs(quick)
    rounds, block, warm = (3, 4, 3) if quick else (8, 5, 5)
    mems = [json.loads(subprocess.run(  # each configuration alone, before this process grows
        harness.module_command(__spec__.name, "--worker", json.dumps(cfg), "--steps", warm + 3),
        capture_output=True, text=True, check=True,
        env=harness.worker_env()).stdout.strip().splitlines()[-1]) for cfg in cfgs]
    built = []
    for i, cfg in enumerate(cfgs):
        pyro.set_rng_seed(i)
        built.append(build(cfg, f"c{i}", seed=i))
    # interleaved blocks: load changes hit every configuration
    times = list(harness.paired_step_times({i: functools.partial(svi.step, x, y) for i, (_, svi, x, y)
                                            in enumerate(built)}, rounds, block, warmup=warm).values())
    del built
    rows = []
    for cfg, ts, mem in zip(cfgs, times, mems):
        rows.append(dict(cfg, step_ms=1e3 * statistics.median(ts), step_ms_rounds=[1e3 * t for t in ts],
                         peak_minus_start_mb=(mem["peak"] - mem["rss_before"]) / 2**20,
                         data_mb=mem["data_bytes"] / 2**20,
                         param_state_mb=mem["param_state_bytes"] / 2**20,
                         row_gather_mb=mem["row_gather_bytes"] / 2**20))
    for name in sorted({r["name"] for r in rows}):
        group = [r for r in rows if r["name"] == name]
        small, large = min(group, key=lambda r: r["D"]), max(group, key=lambda r: r["D"])
        ratios = [b / a for a, b in zip(small["step_ms_rounds"], large["step_ms_rounds"])]
        for r in group:
            r["ratio_D_max_over_D_min"] = large["step_ms"] / small["step_ms"]
            r["ratio_median_of_rounds"] = statistics.median(ratios)
    print(f"{'config':<26}{'K':>8}{'D':>8}{'ms/step':>9}{'ratio':>7}{'peak-start MB':>15}"
          f"{'data MB':>9}{'params+state MB':>17}{'B(1+s)D MB':>12}")
    for r in rows:
        print(f"{r['name']:<26}{r['K']:>8}{r['D']:>8}{r['step_ms']:>9.2f}{r['ratio_D_max_over_D_min']:>7.2f}"
              f"{r['peak_minus_start_mb']:>15.0f}{r['data_mb']:>9.0f}{r['param_state_mb']:>17.0f}"
              f"{r['row_gather_mb']:>12.0f}")
    return rows


# ------------------------------------------------------------------ time to quality
def brown_data(quick, args, max_test=None):
    """The Brown problem of the estimator target (75,000 training rows, ``--quick`` 20,000;
    position-weighted bags; ``--window``, ``--position-weights``)."""
    from pyro_ar.datasets import load_brown_bag_of_words

    weights = None if args.position_weights == "none" else args.position_weights
    return load_brown_bag_of_words(window=args.window, position_weights=weights,
                                   max_train=20_000 if quick else 75_000,
                                   max_test=max_test or (2_000 if quick else 5_000))


def synthetic_data(quick, D, K, nnz):
    """:func:`~pyro_ar.datasets.make_sparse_teacher` at the given D, K and non-zeros per row
    (Zipf features and classes, teacher rank 16); 80 % training rows."""
    from pyro_ar.datasets import make_sparse_teacher
    from pyro_ar.datasets._common import Dataset

    N = 20_000 if quick else 120_000
    t = make_sparse_teacher(N, D, K, nnz_per_row=nnz, rank=16, seed=0)
    n = int(0.8 * N)
    train, test = torch.arange(n), torch.arange(n, N)
    return Dataset(t.x.index_select(0, train).coalesce(), t.y[:n], t.x.index_select(0, test).coalesce(),
                   t.y[n:], K, None, dict(name=f"sparse-teacher D={D} K={K} nnz={nnz}"))


def sparse_rows(x, scale=1.0):
    """Row access to a sparse training matrix at O(B) per minibatch (the estimator's), the
    features divided by ``scale`` (the estimator's sparse standardisation)."""
    from pyro_ar.datasets import to_scipy_csr
    from pyro_ar.features import SparseRows

    return SparseRows(to_scipy_csr(x) / scale, torch.float32, "cpu", sparse=True)


class ExactLoop:
    r"""The exact softmax on the same low-rank model in plain torch: ``F.cross_entropy`` over
    all K classes of :math:`\psi = V (E^\top x) + b` and ``torch.optim.Adam`` (dense), the
    same MAP objective (:meth:`LinearClassifier.log_prior_estimate` with every row, exact)."""

    def __init__(self, model, lr, batch_size):
        self.model, self.batch_size = model, batch_size
        like = torch.zeros(())
        self.params = {n: model.init_parameter(n, shape, like).requires_grad_()
                       for n, shape in model.parameter_shapes().items()}
        self.opt = torch.optim.Adam(list(self.params.values()), lr=lr)

    def step(self, x, y):
        from pyro_ar.subsets import sample_without_replacement
        from pyro_ar.utility import embed_inputs

        N, m = len(y), self.model
        idx = sample_without_replacement(N, self.batch_size)
        p = self.params
        psi = embed_inputs(x[idx], p["embedding"], sparse=False) @ p["weight"].T + p["bias"]
        loss = torch.nn.functional.cross_entropy(psi, y[idx], reduction="sum") * (N / self.batch_size)
        if m.weights == "map":
            loss = loss - sum(m._prior(n, t).log_prob(t).sum() for n, t in p.items())
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()

    def fitted(self):
        return {n: t.detach() for n, t in self.params.items()}


def ttq_methods(K, D, rank, counts, prior_scale, lr, batch_size, names=None):
    """A&R, the sampled softmax and OVE (importance negatives, q ~ count^0.75, s = S, through
    SVI and lazy Adam) and the exact loop: the same low-rank model, initialisation (biases
    at the centred log frequencies) and MAP prior."""
    from pyro_ar.negatives import ImportanceNegatives

    log_freq = (counts + 1.0).log()
    bias_init = (log_freq - log_freq.mean()).float()
    negatives = ImportanceNegatives(S, counts.clamp(min=1.0) ** 0.75)
    likelihoods = {"ar": AR(negatives=negatives), "sampled": Sampled(negatives=negatives),
                   "ove": OVE(negatives=negatives), "exact": Exact()}
    out = {}
    for name, lik in likelihoods.items():
        if names is not None and name not in names:
            continue
        model = LinearClassifier(D, K, likelihood=lik, subsample_size=batch_size, sparse=True, rank=rank,
                                 weights=MAP(prior_scale=prior_scale), init=Init(bias=bias_init),
                                 prefix=f"{name}.", site=f"{name}_y")
        if name == "exact":
            out[name] = ExactLoop(model, lr, batch_size)
            continue
        guide = default_guide(model, local_first=True) if name == "ar" else default_guide(model)  # (the estimator's)
        svi = SVI(model, guide, lazy_adam({"lr": lr}), default_elbo())
        out[name] = svi
    return out


def fitted(method):
    if isinstance(method, ExactLoop):
        return method.fitted()
    model = method.model
    return model.fitted_parameters()


@torch.no_grad()
def test_metrics(params, x_test, y_test):
    from pyro_ar.evaluation import evaluate
    from pyro_ar.utility import embed_inputs

    psi = embed_inputs(x_test, params["embedding"], sparse=False) @ params["weight"].T + params["bias"]
    return evaluate(psi.double(), y_test, ("log_lik", "accuracy", "top10"))


def problem(name, quick, args):
    if name == "brown":  # as the estimator sees it: the classes seen in training, test rows of those
        from pyro_ar.datasets._common import Dataset

        d = brown_data(quick, args)
        seen = torch.bincount(d.y_train, minlength=d.num_classes) > 0
        code = torch.cumsum(seen.long(), 0) - 1
        keep = torch.nonzero(seen[d.y_test]).squeeze(-1)
        d = Dataset(d.x_train, code[d.y_train], d.x_test.index_select(0, keep).coalesce(), code[d.y_test[keep]],
                    int(seen.sum()), None, d.info)
        return d, f"Brown bag of the previous {args.window} words (weights {args.position_weights}), seen classes"
    d = synthetic_data(quick, args.D, args.K, args.nnz)
    return d, d.info["name"]


def run_ttq(part, quick, args):
    """Time to quality: the four methods round-robin in one process, equal CPU slices."""
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()  # --part all: the previous part's parameters have the same names
    d, title = problem(part, quick, args)
    K, D = d.num_classes, d.x_train.shape[1]
    scale = math.sqrt(float((d.x_train.coalesce().values() ** 2).sum()) / len(d.y_train))  # rms row norm
    x, y = sparse_rows(d.x_train, scale), d.y_train
    x_test = (d.x_test.coalesce() * (1.0 / scale)).coalesce()
    counts = torch.bincount(y, minlength=K).double()
    unigram = float(((counts + 1) / (counts + 1).sum()).log()[d.y_test].mean())
    mems = [json.loads(subprocess.run(  # each method alone: peak resident set of a few steps
        harness.module_command(__spec__.name, "--worker", json.dumps(dict(
            kind="ttq", part=part, method=m, D=args.D, K=args.K, nnz=args.nnz, quick=quick, rank=args.rank,
            prior_scale=args.prior_scale, lr=args.lr, batch=args.batch, window=args.window,
            position_weights=args.position_weights)),
         "--steps", "5"), capture_output=True, text=True, check=True,
        env=harness.worker_env()).stdout.strip().splitlines()[-1])
        for m in METHODS]
    methods = ttq_methods(K, D, args.rank, counts, args.prior_scale, args.lr, args.batch)
    rounds, slice_s = (2, 1.5) if quick else (args.rounds, args.slice)
    curves = {name: [] for name in methods}
    cpu = {name: 0.0 for name in methods}
    steps = {name: 0 for name in methods}
    for _ in range(rounds):
        for name, method in methods.items():
            calls, seconds = harness.run_for(functools.partial(method.step, x, y), slice_s)
            steps[name] += calls
            cpu[name] += seconds
            m = test_metrics(fitted(method), x_test, d.y_test)
            curves[name].append(dict(cpu_s=cpu[name], steps=steps[name], epochs=steps[name] * args.batch / len(y), **m))
            print(f"{name:<8} cpu {cpu[name]:7.1f} s  steps {steps[name]:6d}  test LL {m['log_lik']:8.3f}  "
                  f"top1 {m['accuracy']:.3f}  top10 {m['top10']:.3f}", flush=True)
    print(f"{title}: unigram test LL {unigram:.3f}; N_train = {len(y)}, N_test = {len(d.y_test)}, K = {K}, "
          f"D = {D}, nnz/row = {d.x_train._nnz() / len(y):.2f}, rank {args.rank}, B = {args.batch}, s = {S}, "
          f"MAP prior scale {args.prior_scale}, lr {args.lr}")
    print(f"{'method':<8}{'steps/s':>9}{'best LL':>9}{'at CPU s':>9}{'final LL':>9}{'top1':>7}{'top10':>7}"
          f"{'peak-start MB':>15}")
    for (name, c), mem in zip(curves.items(), mems):
        best = max(c, key=lambda r: r["log_lik"])
        print(f"{name:<8}{c[-1]['steps'] / c[-1]['cpu_s']:>9.1f}{best['log_lik']:>9.3f}{best['cpu_s']:>9.0f}"
              f"{c[-1]['log_lik']:>9.3f}{c[-1]['accuracy']:>7.3f}{c[-1]['top10']:>7.3f}"
              f"{(mem['peak'] - mem['rss_before']) / 2**20:>15.0f}")
    return dict(title=title, unigram=unigram, curves=curves, memory=mems, n_train=len(y), n_test=len(d.y_test),
                K=K, D=D, nnz_per_row=d.x_train._nnz() / len(y), rank=args.rank, prior_scale=args.prior_scale,
                lr=args.lr)


def ttq_worker(cfg, steps):
    """Peak memory of one method alone (``--worker``): ``VmHWM`` after a few steps."""
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    args = argparse.Namespace(D=cfg["D"], K=cfg["K"], nnz=cfg["nnz"], window=cfg["window"],
                              position_weights=cfg["position_weights"])
    d, _ = problem(cfg["part"], cfg["quick"], args)
    K, D = d.num_classes, d.x_train.shape[1]
    x, y = sparse_rows(d.x_train), d.y_train
    counts = torch.bincount(y, minlength=K).double()
    reset_peak()  # the data loading's temporaries are not the method's
    before = rss_bytes()
    method = ttq_methods(K, D, cfg["rank"], counts, cfg["prior_scale"], cfg["lr"], cfg["batch"],
                         [cfg["method"]])[cfg["method"]]
    for _ in range(steps):
        method.step(x, y)
    return dict(cfg, rss_before=before, peak=peak_bytes())


# ------------------------------------------------------------------ the estimator target
def run_estimator(quick, args):
    from pyro_ar import ARClassifier
    from pyro_ar.estimator import params_from_plain
    from pyro_ar.datasets import to_scipy_csr
    from pyro_ar.evaluation import evaluate

    torch.set_num_threads(1)
    d = brown_data(quick, args, max_test=5_000 if quick else 20_000)
    X, y = to_scipy_csr(d.x_train), d.y_train.numpy()
    Xt, yt = to_scipy_csr(d.x_test), d.y_test.numpy()
    kw = dict(max_epochs=1, min_steps=1) if quick else {}  # (min_steps: else at least 2,000 steps)
    kw.update(json.loads(args.estimator_kwargs))
    start_rss = rss_bytes()
    with harness.timer() as t:
        clf = ARClassifier(**params_from_plain(dict(random_state=0, **kw))).fit(X, y)
    fit_cpu = t.cpu
    classes = clf.classes_
    known = np.isin(yt, classes)
    codes = torch.as_tensor(np.searchsorted(classes, yt[known]))
    _, noise, _, source = clf._prepare(Xt[known])  # (the fitted model's noise and utility source)
    K = len(classes)
    m = evaluate(source, codes, ("log_lik", "accuracy", "top10"), noise)
    counts = np.bincount(np.searchsorted(classes, y), minlength=K) + 1.0
    unigram = float(np.log(counts / counts.sum())[codes.numpy()].mean())
    res = dict(path=clf.training_path_.describe(), n_train=len(y), K=K, D=X.shape[1],
               nnz_per_row=X.nnz / X.shape[0], epochs=clf.n_iter_, steps=clf.n_steps_, fit_cpu_s=fit_cpu,
               epoch_cpu_s=fit_cpu / clf.n_iter_,  # upper bound: the grid adds steps
               test_known_fraction=float(known.mean()),
               unigram_log_lik=unigram, peak_mb=peak_bytes() / 2**20, start_rss_mb=start_rss / 2**20, **m)
    for k, v in res.items():
        print(f"{k:>22}: {v}")
    return res


def main(argv=None):
    ap = harness.parser(__doc__)
    ap.add_argument("--part", default="all", choices=["all", "scaling", "brown", "synthetic", "estimator"])
    ap.add_argument("--D", type=int, default=50_000, help="synthetic: features")
    ap.add_argument("--K", type=int, default=20_000, help="synthetic: classes")
    ap.add_argument("--nnz", type=int, default=10, help="synthetic: feature draws per row")
    ap.add_argument("--rank", type=int, default=128, help="time to quality: rank of the model")
    ap.add_argument("--prior-scale", type=float, default=0.1, help="time to quality: MAP prior scale")
    ap.add_argument("--lr", type=float, default=0.01, help="time to quality: Adam step size")
    ap.add_argument("--batch", type=int, default=1024, help="time to quality: minibatch size (the estimator's)")
    ap.add_argument("--rounds", type=int, default=8, help="time to quality: rounds")
    ap.add_argument("--slice", type=float, default=10.0, help="time to quality: CPU s per method per round")
    ap.add_argument("--window", type=int, default=WINDOW, help="Brown: previous words per bag")
    ap.add_argument("--position-weights", default=POSITION_WEIGHTS, choices=["inverse", "none"],
                    help="Brown: the i-th previous word weighs 1/i, or 1 (plain counts)")
    ap.add_argument("--estimator-kwargs", default="{}", help="estimator: ARClassifier arguments (JSON)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        cfg = json.loads(args.worker)
        worker = ttq_worker if cfg.get("kind") == "ttq" else scaling_worker
        print(json.dumps(worker(cfg, args.steps)))
        return
    parts = ["scaling", "brown", "synthetic", "estimator"] if args.part == "all" else [args.part]
    runners = dict(scaling=run_scaling, estimator=run_estimator,
                   brown=lambda quick, a: run_ttq("brown", quick, a),
                   synthetic=lambda quick, a: run_ttq("synthetic", quick, a))
    harness.start(args)
    results = {}
    for part in parts:
        print(f"== {part} ==", flush=True)
        results[part] = runners[part](args.quick, args)
        harness.save(args, f"sparse_{part}", dict(load_average=os.getloadavg(), result=results[part]))
    return results


if __name__ == "__main__":
    main()

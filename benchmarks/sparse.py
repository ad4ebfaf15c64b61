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
* ``brown`` -- next-word prediction on the shipped Brown corpus from the bag of the
  previous 10 words (:func:`pyro_ar.datasets.load_brown_bag_of_words`, D = K = 26,101),
  low-rank linear model (r = 128, sparse x) trained by SVI with A&R (per-datapoint
  negatives, s = 20), the sampled softmax, OVE (same negatives) and the exact softmax
  (O(B K r) per step: fits at low rank), round-robin in one process with equal CPU time
  per round; test log-likelihood, top-1 and top-10 accuracy after every round
  (time-to-quality), against the unigram baseline.
* ``estimator`` -- ``ARClassifier()`` with default settings on the Brown bag of words
  (75,000 training rows, about 9.5 non-zeros per row): the path it chooses, CPU time per
  epoch and in total, peak memory, test log-likelihood / top-1 / top-10 against the
  unigram baseline (test labels among the training classes).

All timings are process CPU time (``time.process_time``) with ``torch.set_num_threads(1)``.

    python benchmarks/sparse.py [--quick] [--part scaling|brown|estimator|all] [--out DIR]

Writes ``<out>/sparse_<part>.json`` (default out: the system temp directory).
"""

import argparse
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import pyro  # noqa: E402
from pyro.infer import SVI  # noqa: E402

from pyro_ar.likelihoods import AR, OVE, Exact, Sampled  # noqa: E402
from pyro_ar.models import LinearClassifier  # noqa: E402
from pyro_ar.negatives import SharedNegatives  # noqa: E402
from pyro_ar.optim import lazy_adam  # noqa: E402

B, S, NNZ = 256, 20, 10


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_bytes() -> int:
    """Peak resident set of this process: ``VmHWM`` (``getrusage``'s ru_maxrss survives the
    fork + exec of a worker, so a worker would report its parent's peak), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


# ------------------------------------------------------------------ scaling in D
def scaling_configs(quick):
    Ds = [1_000, 10_000, 100_000]
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
    svi = SVI(model, model.default_guide(), lazy_adam({"lr": 0.01}), model.default_elbo())
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


def run_scaling(quick, out):
    torch.set_num_threads(1)
    cfgs = scaling_configs(quick)
    rounds, block, warm = (3, 4, 3) if quick else (8, 5, 5)
    mems = [json.loads(subprocess.run(  # each configuration alone, before this process grows
        [sys.executable, __file__, "--worker", json.dumps(cfg), "--steps", str(warm + 3)],
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]) for cfg in cfgs]
    built = []
    for i, cfg in enumerate(cfgs):
        pyro.set_rng_seed(i)
        built.append(build(cfg, f"c{i}", seed=i))
    for model, svi, x, y in built:
        for _ in range(warm):
            svi.step(x, y)
    times = [[] for _ in cfgs]
    for _ in range(rounds):  # interleaved blocks: load changes hit every configuration
        for i, (model, svi, x, y) in enumerate(built):
            t = time.process_time()
            for _ in range(block):
                svi.step(x, y)
            times[i].append((time.process_time() - t) / block)
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


# ------------------------------------------------------------------ Brown: time to quality
def brown_data(quick):
    from pyro_ar.datasets import load_brown_bag_of_words

    d = load_brown_bag_of_words(window=10, max_train=75_000 if quick else 200_000,
                                max_test=2_000 if quick else 3_000)
    counts = torch.bincount(d.y_train, minlength=d.num_classes).double() + 1.0
    unigram = float((counts / counts.sum()).log()[d.y_test].mean())
    return d, unigram


def sparse_rows(x):
    """Row access to a sparse training matrix at O(B) per minibatch (the estimator's)."""
    from pyro_ar.datasets import to_scipy_csr
    from pyro_ar.estimator._support import SparseRows

    return SparseRows(to_scipy_csr(x), torch.float32, "cpu", sparse=True)


def brown_methods(K, D, rank):
    likelihoods = {"ar": AR(negatives=S), "sampled": Sampled(negatives=S), "ove": OVE(negatives=S),
                   "exact": Exact()}
    out = {}
    for name, lik in likelihoods.items():
        model = LinearClassifier(D, K, likelihood=lik, subsample_size=B, sparse=True, rank=rank,
                                 prefix=f"{name}.", site=f"{name}_y")
        svi = SVI(model, model.default_guide(), lazy_adam({"lr": 0.01}), model.default_elbo())
        out[name] = (model, svi)
    return out


def run_brown(quick, out):
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    d, unigram = brown_data(quick)
    x, y = sparse_rows(d.x_train), d.y_train
    methods = brown_methods(d.num_classes, d.num_classes, rank=128)
    rounds, slice_s = (3, 10.0) if quick else (6, 15.0)
    curves = {name: [] for name in methods}
    cpu = {name: 0.0 for name in methods}
    steps = {name: 0 for name in methods}
    for _ in range(rounds):
        for name, (model, svi) in methods.items():
            t = time.process_time()
            while time.process_time() - t < slice_s:
                svi.step(x, y)
                steps[name] += 1
            cpu[name] += time.process_time() - t
            with torch.no_grad():
                m = model.evaluate(d.x_test, d.y_test, metrics=("log_lik", "accuracy", "top10"))
            curves[name].append(dict(cpu_s=cpu[name], steps=steps[name], **m))
            print(f"{name:<8} cpu {cpu[name]:7.1f} s  steps {steps[name]:6d}  test LL {m['log_lik']:8.3f}  "
                  f"top1 {m['accuracy']:.3f}  top10 {m['top10']:.3f}", flush=True)
    print(f"unigram test LL {unigram:.3f}; N_train = {len(y)}, N_test = {len(d.y_test)}, K = D = "
          f"{d.num_classes}, mean nnz/row = {d.info['mean_nnz_train']:.2f}, rank 128, B = {B}, s = {S}")
    return dict(unigram=unigram, curves=curves, n_train=len(y), n_test=len(d.y_test), K=d.num_classes,
                mean_nnz=d.info["mean_nnz_train"], peak_mb=peak_bytes() / 2**20)


# ------------------------------------------------------------------ the estimator target
def run_estimator(quick, out):
    from pyro_ar import ARClassifier
    from pyro_ar.datasets import load_brown_bag_of_words, to_scipy_csr
    from pyro_ar.evaluation import evaluate

    torch.set_num_threads(1)
    d = load_brown_bag_of_words(window=10, max_train=75_000, max_test=5_000 if quick else 20_000)
    X, y = to_scipy_csr(d.x_train), d.y_train.numpy()
    Xt, yt = to_scipy_csr(d.x_test), d.y_test.numpy()
    kw = dict(max_epochs=2) if quick else {}
    start_rss, t = rss_bytes(), time.process_time()
    clf = ARClassifier(random_state=0, **kw).fit(X, y)
    fit_cpu = time.process_time() - t
    classes = clf.classes_
    known = np.isin(yt, classes)
    codes = torch.as_tensor(np.searchsorted(classes, yt[known]))
    Xk, p, K = clf._prepare(Xt[known])
    m = evaluate(clf._fitted_source(Xk, p, K), codes, ("log_lik", "accuracy", "top10"), p["noise"])
    counts = np.bincount(np.searchsorted(classes, y), minlength=K) + 1.0
    unigram = float(np.log(counts / counts.sum())[codes.numpy()].mean())
    res = dict(path=clf.training_path_.describe(), n_train=len(y), K=K, D=X.shape[1],
               nnz_per_row=X.nnz / X.shape[0], epochs=clf.n_iter_, steps=clf.n_steps_, fit_cpu_s=fit_cpu,
               epoch_cpu_s=fit_cpu / clf.n_iter_, test_known_fraction=float(known.mean()),
               unigram_log_lik=unigram, peak_mb=peak_bytes() / 2**20, start_rss_mb=start_rss / 2**20, **m)
    for k, v in res.items():
        print(f"{k:>22}: {v}")
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--part", default="all", choices=["all", "scaling", "brown", "estimator"])
    ap.add_argument("--out", default=tempfile.gettempdir())
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--steps", type=int, default=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(scaling_worker(json.loads(args.worker), args.steps)))
        return
    parts = ["scaling", "brown", "estimator"] if args.part == "all" else [args.part]
    runners = dict(scaling=run_scaling, brown=run_brown, estimator=run_estimator)
    for part in parts:
        print(f"== {part} ==", flush=True)
        res = runners[part](args.quick, args.out)
        path = os.path.join(args.out, f"sparse_{part}.json")
        with open(path, "w") as f:
            json.dump(dict(command=" ".join([os.path.basename(sys.executable)] + sys.argv), quick=args.quick,
                           load_average=os.getloadavg(), result=res), f, indent=1,
                      default=lambda o: o if not isinstance(o, float) or math.isfinite(o) else str(o))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()

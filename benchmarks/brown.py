"""Next-word prediction on the Brown corpus: test log-likelihood against wall time.

Data: ``pyro_ar.datasets.load_brown()`` -- bigram pairs (previous word, next word) from the
POS-tagged Brown corpus, 450 training / 50 test documents (seed 0), vocabulary K = 26,101
(words seen twice in training + ``<unk>`` + the sentence boundary); 1,096,283 training
and 122,249 test pairs.

Model: log-bilinear bigram, psi_k(u) = e_u . w_k + b_k, D = 64, learned context and output
embeddings (``pyro_ar.models.BigramLanguageModel``); all methods start from the same
initialisation (embeddings N(0, 0.1^2); softmax-family biases at the smoothed log unigram
frequencies, probit/logistic biases at 0), minibatch B = 512.

Methods (same training-time budget each; the softmax-family ones run concurrently, one
torch thread each, so that they share the machine alike):

* ``ar_softmax``  -- A&R softmax through stock ``pyro.infer.SVI``: ``GumbelLocalGuide``
  (eta_n per bigram, natural step rho = (1 + visits)^-0.9) + ``ClosedFormELBO``, shared
  negatives drawn from q(k) proportional to (train count)^0.75 with weights 1/(s q), the
  label's draws dropped (``strategy="importance"``), ``lazy_adam``;
* ``exact``       -- exact softmax as a user writes it: ``F.cross_entropy`` over all K
  logits, ``torch.optim.Adam`` (dense), pure torch;
* ``ove``         -- OVE bound (Titsias 2016), the same negatives and optimizer;
* ``botev``       -- sampled softmax (Botev et al. 2017; the importance weights make it the
  usual log-q-corrected sampled softmax), the same negatives and optimizer;
* ``ar_probit`` / ``ar_logistic`` -- A&R with Normal / Logistic noise,
  ``NoiseLocalGuide``; their test log-likelihood is the model's own marginal by quadrature
  (O(K) nodes per test pair), so it is computed at the end only, on a fixed random subset of
  test pairs (``--quad-pairs``), next to the softmax-family models' exact log-likelihood on
  the same subset.

Ablations (``--methods``): ``ar_softmax_uniform`` (uniform shared negatives instead of the
count^0.75 proposal) and ``ar_softmax_global`` (the gradient step at the current eta, then
the eta step -- ``GumbelLocalGuide``'s default order -- instead of Algorithm 1's eta first).

Evaluation: exact test log-likelihood per pair (log-softmax over all K classes; the
normaliser is computed once per distinct previous word) at checkpoints spread over the
budget; evaluation time is excluded from the training time. Perplexity = exp(-LL).
Reported: each method's curve (wall and CPU seconds), exact softmax's best value L*, the
time each method first reaches L* - 0.05 (linear interpolation between checkpoints), the
ratio of exact's time to A&R's, and the values at the end of the common budget.

    python benchmarks/brown.py [--quick] [--budget SECONDS] [--device cpu|cuda]

``--quick`` (under 2 minutes): 20 s budgets, 20 quadrature pairs. Writes
``benchmarks/results/brown[_quick].json`` and ``.png``.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOFTMAX_FAMILY = ["ar_softmax", "exact", "ove", "botev"]
OTHER_NOISE = ["ar_probit", "ar_logistic"]
LABELS = {
    "ar_softmax": "A&R softmax (Pyro, closed form)",
    "ar_softmax_uniform": "A&R softmax, uniform shared negatives",
    "ar_softmax_global": "A&R softmax, gradient step before the eta step",
    "exact": "exact softmax (F.cross_entropy + Adam)",
    "ove": "OVE (Pyro)",
    "botev": "sampled softmax / Botev (Pyro)",
    "ar_probit": "A&R probit (Pyro)",
    "ar_logistic": "A&R logistic (Pyro)",
}


# --------------------------------------------------------------------------- evaluation
def grouped_log_softmax_ll(E, W, b, prev, nxt, chunk=256):
    """Exact mean log p(next | prev) for psi = E[prev] W^T + b: the library's evaluation with
    ``rows=prev``, which computes the normaliser once per distinct previous word."""
    from pyro_ar.evaluation import linear_source, log_likelihood

    return log_likelihood(linear_source(E, W, b), nxt, rows=prev, chunk_size=chunk)


# --------------------------------------------------------------------------- methods
class ExactTorch:
    """Exact softmax bigram model, the usual user loop (dense Adam, F.cross_entropy)."""

    def __init__(self, K, D, x, y, B, lr, init_bias, device):
        import torch

        self.x, self.y, self.B = x, y, B
        self.E = (0.1 * torch.randn(K, D, device=device)).requires_grad_()
        self.W = (0.1 * torch.randn(K, D, device=device)).requires_grad_()
        self.b = init_bias.float().to(device).clone().requires_grad_()
        self.opt = torch.optim.Adam([self.E, self.W, self.b], lr=lr)

    def step(self):
        import torch
        import torch.nn.functional as F

        idx = torch.randint(0, self.x.shape[0], (self.B,), device=self.x.device)
        logits = F.linear(F.embedding(self.x[idx], self.E), self.W, self.b)
        loss = F.cross_entropy(logits, self.y[idx])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()

    def evaluate(self, prev, nxt):
        return grouped_log_softmax_ll(self.E.detach(), self.W.detach(), self.b.detach(), prev, nxt)

    def log_likelihood_pairs(self, prev, nxt):
        return self.evaluate(prev, nxt)


class PyroLM:
    """BigramLanguageModel + SVI for A&R (any noise) and the subsampled baselines."""

    def __init__(self, method, K, D, x, y, B, lr, init_bias, counts, negatives, strategy, device,
                 local_first=True, local_lr=0.05):
        import pyro
        import torch
        from pyro.infer import SVI, Trace_ELBO

        from pyro_ar.likelihoods import AR, OVE, Sampled
        from pyro_ar.models import BigramLanguageModel
        from pyro_ar.negatives import ImportanceNegatives, SharedNegatives
        from pyro_ar.optim import lazy_adam

        noise = {"ar_probit": "normal", "ar_logistic": "logistic"}.get(method, "gumbel")
        proposal = counts.double().to(device) ** 0.75 if strategy == "importance" else None
        negs = ImportanceNegatives(negatives, proposal) if strategy == "importance" else SharedNegatives(negatives)
        likelihood = {"ove": OVE, "botev": Sampled}.get(method, lambda negatives: AR(noise, negatives))(
            negatives=negs)
        pyro.clear_param_store()
        # biases start at the unigram fit of each noise: log frequencies for softmax and
        # logistic, 0.25 x log frequencies for probit (its unigram log-likelihood, by
        # quadrature on 60 test pairs: -7.16 at 0.25 vs -7.09 for the exact unigram)
        bias_scale = {"gumbel": 1.0, "logistic": 1.0, "normal": 0.25}[noise]
        self.model = BigramLanguageModel(K, D, likelihood=likelihood, subsample_size=B,
                                         init_bias=bias_scale * init_bias)
        elbo = self.model.default_elbo() if isinstance(likelihood, AR) else Trace_ELBO()
        if noise == "gumbel":
            guide = self.model.default_guide(local_first=local_first)
            optim = lazy_adam({"lr": lr})
        else:
            # q(eps_n) starts near the noise's (1 - 1/K) quantile (the observed class's noise
            # must beat K - 1 others), and the local parameters get their own step size
            from scipy.stats import norm

            init_loc = float(norm.isf(1.0 / K)) if noise == "normal" else math.log(K - 1)
            guide = self.model.default_guide(local="noise", init_loc=init_loc)
            optim = lazy_adam(lambda name: {"lr": local_lr if "y_eps" in name else lr})
        self.svi = SVI(self.model, guide, optim, elbo)
        self.x, self.y = x, y
        self.model(x[:2], y[:2])  # create the parameters (so evaluation works at step 0)

    def step(self):
        return self.svi.step(self.x, self.y)

    def evaluate(self, prev, nxt):
        from pyro_ar.noise import GumbelNoise

        if not isinstance(self.model.noise, GumbelNoise):
            return None  # quadrature: at the end only, on a subset
        return self.model.log_likelihood(prev, nxt)

    def log_likelihood_pairs(self, prev, nxt, num_nodes=33):
        from pyro_ar.noise import GumbelNoise
        from pyro_ar.quadrature import log_marginal

        if isinstance(self.model.noise, GumbelNoise):
            return self.model.log_likelihood(prev, nxt)
        vals = [log_marginal(self.model.utility(prev[i:i + 8]).full(), nxt[i:i + 8], self.model.noise,
                             num_nodes=num_nodes) for i in range(0, prev.shape[0], 8)]
        import torch

        return torch.cat(vals).mean().item()


def _checkpoints(budget, n):
    """Training-time checkpoints (s): a few early ones, then every budget/n."""
    pts = [t for t in (2, 5, 10, 20, 40, 80) if t < budget / 4] if n >= 10 else []
    pts += [budget * i / n for i in range(1, n + 1)]
    return sorted(set(round(p, 3) for p in pts if p > 0))


def worker(a):
    import torch

    torch.set_num_threads(1)
    import pyro

    pyro.set_rng_seed(a.seed)
    data = torch.load(a.data)
    dev = torch.device(a.device)
    x, y = data["x_train"].to(dev), data["y_train"].to(dev)
    xt, yt = data["x_test"].to(dev), data["y_test"].to(dev)
    if a.eval_pairs and a.eval_pairs < xt.shape[0]:  # (--quick) a fixed random subset
        keep = torch.randperm(xt.shape[0], generator=torch.Generator().manual_seed(99))[: a.eval_pairs]
        xt, yt = xt[keep], yt[keep]
    counts = data["counts"]
    K = int(counts.shape[0])
    from pyro_ar.infer import train
    from pyro_ar.models import unigram_log_probs

    init_bias = unigram_log_probs(counts).float().to(dev)
    lr = a.lr
    if a.method == "exact":
        m = ExactTorch(K, a.D, x, y, a.B, lr, init_bias, dev)
    else:
        strategy = "shared" if a.method == "ar_softmax_uniform" else a.strategy
        method = "ar_softmax" if a.method in ("ar_softmax_uniform", "ar_softmax_global") else a.method
        m = PyroLM(method, K, a.D, x, y, a.B, lr, init_bias, counts, a.negatives, strategy, dev,
                   local_first=not (a.global_first or a.method == "ar_softmax_global"),
                   local_lr=a.local_lr)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)

    class Stepper:  # what pyro_ar.infer.train drives: .step() -> loss (SVI or the plain torch loop)
        def step(self):
            loss = m.step()
            sync()
            return loss

    def evaluate():
        t0 = time.perf_counter()
        ll = m.evaluate(xt, yt)
        return dict(test_ll=ll, perplexity=None if ll is None else math.exp(-ll),
                    eval_seconds=time.perf_counter() - t0)

    def progress(r):
        ll = r["test_ll"]
        print(f"PROGRESS {a.method} step {r['step']} t {r['time']:.1f}s cpu {r['cpu_time']:.1f}s test_ll "
              f"{'-' if ll is None else f'{ll:.4f}'}", flush=True)

    # the library's training loop: a wall-clock budget, evaluations at the training times of
    # the checkpoints (evaluation time excluded), the loss averaged between evaluations
    step_times = []
    history = train(Stepper(), num_steps=10**12, time_budget=a.budget, eval_fn=evaluate,
                    eval_times=_checkpoints(a.budget, a.checkpoints), eval_every=10**12,
                    step_times=step_times, callbacks=[progress])
    hist = [dict(step=r["step"], time=r["time"], cpu_time=r["cpu_time"], test_ll=r["test_ll"],
                 perplexity=r["perplexity"], loss=None if r["step"] == 0 else r["loss"],
                 eval_seconds=r["eval_seconds"]) for r in history]
    step = hist[-1]["step"]
    # fixed subset of test pairs for the quadrature log-likelihoods (and the same pairs exactly)
    g = torch.Generator().manual_seed(1234)
    sub = torch.randperm(xt.shape[0], generator=g)[: a.quad_pairs].to(dev)
    t0 = time.perf_counter()
    sub_ll = m.log_likelihood_pairs(xt[sub], yt[sub]) if a.quad_pairs else None
    out = dict(method=a.method, history=hist, steps=step,
               step_time_median=statistics.median(step_times[len(step_times) // 10:]) if step_times else None,
               final_test_ll=hist[-1]["test_ll"], subset_test_ll=sub_ll, subset_pairs=a.quad_pairs,
               subset_eval_seconds=time.perf_counter() - t0, lr=lr, negatives=a.negatives,
               strategy=a.strategy if a.method not in ("exact", "ar_softmax_uniform") else
               ("shared" if a.method == "ar_softmax_uniform" else None), budget=a.budget)
    print("RESULT " + json.dumps(out), flush=True)


# --------------------------------------------------------------------------- driver
def _launch(method, a, data_path, lr):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, "--data", data_path,
           "--budget", str(a.budget if method not in OTHER_NOISE else a.other_budget),
           "--device", a.device, "--D", str(a.D), "--B", str(a.B), "--negatives", str(a.negatives),
           "--strategy", a.strategy, "--lr", str(lr), "--seed", str(a.seed),
           "--quad-pairs", str(a.quad_pairs), "--checkpoints", str(a.checkpoints),
           "--eval-pairs", str(a.eval_pairs), "--local-lr", str(a.local_lr)] + (["--global-first"] if a.global_first else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _collect(procs):
    results = {}
    for method, p in procs.items():
        out, err = p.communicate()
        res = None
        for line in out.splitlines():
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
        if res is None:
            sys.stderr.write(f"{method} failed:\n{err[-3000:]}\n")
            res = dict(method=method, error=(err.strip().splitlines() or ["?"])[-1])
        results[method] = res
    return results


def time_to_reach(history, target, key="time"):
    """First (linearly interpolated) training time at which test_ll >= target, or None."""
    prev = None
    for h in history:
        if h["test_ll"] is None:
            continue
        if h["test_ll"] >= target:
            if prev is None:
                return h[key]
            t0, l0 = prev[key], prev["test_ll"]
            t1, l1 = h[key], h["test_ll"]
            return t0 + (target - l0) * (t1 - t0) / (l1 - l0) if l1 > l0 else t1
        prev = h
    return None


def value_at(history, t, key="time"):
    """test_ll at training time t (linear interpolation; the last value past the end)."""
    pts = [(h[key], h["test_ll"]) for h in history if h["test_ll"] is not None]
    if not pts:
        return None
    for (t0, l0), (t1, l1) in zip(pts, pts[1:]):
        if t0 <= t <= t1:
            return l0 + (l1 - l0) * (t - t0) / (t1 - t0) if t1 > t0 else l1
    return pts[-1][1] if t >= pts[-1][0] else pts[0][1]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--budget", type=float, default=None, help="training seconds per softmax-family method")
    p.add_argument("--other-budget", type=float, default=None, help="training seconds for probit/logistic")
    p.add_argument("--methods", default=",".join(SOFTMAX_FAMILY + OTHER_NOISE))
    p.add_argument("--device", default="cpu")
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--B", type=int, default=512)
    p.add_argument("--negatives", type=int, default=256)
    p.add_argument("--strategy", default="importance", choices=["importance", "shared"])
    p.add_argument("--lr", type=float, default=None, help="lr of the Pyro methods (lazy Adam)")
    p.add_argument("--exact-lr", type=float, default=3e-3)
    p.add_argument("--ar-lr", type=float, default=None, help="lr of the A&R methods (default --lr)")
    p.add_argument("--quad-pairs", type=int, default=None)
    p.add_argument("--local-lr", type=float, default=0.05,
                   help="lazy-Adam lr of the probit/logistic local parameters (mu_n, sigma_n)")
    p.add_argument("--checkpoints", type=int, default=None, help="evaluations over the budget")
    p.add_argument("--eval-pairs", type=int, default=None, help="test pairs per evaluation (0: all)")
    p.add_argument("--global-first", action="store_true",
                   help="A&R softmax: gradient step before the eta step (default: Algorithm 1, eta first)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None)
    p.add_argument("--worker", default=None)
    p.add_argument("--data", default=None)
    a = p.parse_args(argv)
    if a.worker:
        a.method = a.worker
        return worker(a)
    a.budget = a.budget or (20.0 if a.quick else 900.0)
    a.other_budget = a.other_budget or (10.0 if a.quick else 300.0)
    a.quad_pairs = a.quad_pairs if a.quad_pairs is not None else (10 if a.quick else 200)
    a.checkpoints = a.checkpoints or (4 if a.quick else 20)
    a.eval_pairs = a.eval_pairs if a.eval_pairs is not None else (10_000 if a.quick else 0)
    a.lr = a.lr or 3e-3
    a.ar_lr = a.ar_lr or a.lr
    out = a.out or os.path.join(HERE, "results", "brown_quick" if a.quick else "brown")
    methods = a.methods.split(",")

    import torch

    from pyro_ar.datasets import load_brown

    t_start = time.time()
    d = load_brown()
    tmp = tempfile.NamedTemporaryFile(suffix=".pt", delete=False)
    torch.save(dict(x_train=d.x_train, y_train=d.y_train, x_test=d.x_test, y_test=d.y_test,
                    counts=d.info["class_counts"]), tmp.name)
    load = {"start": os.getloadavg()}
    print(f"Brown: K={d.num_classes}, {d.num_train} train / {d.num_test} test pairs; D={a.D} B={a.B} "
          f"negatives={a.negatives} ({a.strategy}); budget {a.budget:.0f} s (probit/logistic "
          f"{a.other_budget:.0f} s); load average {load['start']}", flush=True)
    results = {}
    try:
        for group in ([m for m in methods if m not in OTHER_NOISE], [m for m in methods if m in OTHER_NOISE]):
            if not group:
                continue
            procs = {}
            for m in group:
                lr = a.exact_lr if m == "exact" else (a.ar_lr if m.startswith("ar_") else a.lr)
                procs[m] = _launch(m, a, tmp.name, lr)
            results.update(_collect(procs))
            load[f"after_{group[0]}"] = os.getloadavg()
    finally:
        os.unlink(tmp.name)
    elapsed = time.time() - t_start

    summary = {}
    ok = {m: r for m, r in results.items() if "history" in r}
    print("\nmethod                                   steps  ms/step  final test LL  perplexity  "
          f"subset LL ({a.quad_pairs} pairs)")
    for m, r in ok.items():
        ll = r["final_test_ll"]
        print(f"{LABELS.get(m, m):40s} {r['steps']:6d} {1e3 * r['step_time_median']:8.2f} "
              f"{'' if ll is None else f'{ll:13.4f}'} {'' if ll is None else f'{math.exp(-ll):11.1f}'}"
              f"  {r['subset_test_ll'] if r['subset_test_ll'] is None else round(r['subset_test_ll'], 4)}")
    if "exact" in ok:
        best = max(h["test_ll"] for h in ok["exact"]["history"])
        target = best - 0.05
        summary.update(exact_best=best, target=target)
        for key in ("time", "cpu_time"):
            t_ex = time_to_reach(ok["exact"]["history"], target, key)
            summary[f"exact_time_to_target_{key}"] = t_ex
            for m in ok:
                if m == "exact" or m in OTHER_NOISE:
                    continue
                t_m = time_to_reach(ok[m]["history"], target, key)
                summary[f"{m}_time_to_target_{key}"] = t_m
                if t_m and t_ex:
                    summary[f"exact_over_{m}_time_to_target_{key}"] = t_ex / t_m
        print(f"\nexact softmax best test LL {best:.4f}; target {target:.4f}")
        for k, v in summary.items():
            if "time_to_target" in k:
                print(f"  {k:50s} {v if v is None else round(v, 2)}")
    ends = [r["history"][-1]["time"] for m, r in ok.items() if m in SOFTMAX_FAMILY]
    T = min(ends) if ends else None
    if T:
        summary["common_time"] = T
        for m, r in ok.items():
            if m in SOFTMAX_FAMILY or m.startswith("ar_softmax"):
                summary[f"{m}_ll_at_common_time"] = value_at(r["history"], T)
        print(f"test LL at the common training time {T:.0f} s: " + ", ".join(
            f"{m} {summary[f'{m}_ll_at_common_time']:.4f}" for m in ok if f"{m}_ll_at_common_time" in summary))
    load["end"] = os.getloadavg()
    print(f"load average {load}; elapsed {elapsed:.0f} s")
    meta = dict(torch=torch.__version__, cpus=os.cpu_count(), threads_per_worker=1, load_average=load,
                elapsed=elapsed, args=vars(a), command=" ".join(["python"] + sys.argv),
                K=d.num_classes, num_train=d.num_train, num_test=d.num_test)
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".json", "w") as f:
        json.dump(dict(meta=meta, results=results, summary=summary), f, indent=1)
    _plot(ok, summary, out + ".png", a)
    print(f"wrote {out}.json and {out}.png")


def _plot(ok, summary, path, a):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, xlabel in ((axes[0], "time", "training wall time (s)"),
                            (axes[1], "cpu_time", "training CPU time (s)")):
        for m, r in ok.items():
            hs = [h for h in r["history"] if h["test_ll"] is not None]
            if not hs:
                continue
            ax.plot([max(h[key], 0.5) for h in hs], [h["test_ll"] for h in hs], marker=".",
                    label=LABELS.get(m, m))
        if "target" in summary:
            ax.axhline(summary["target"], color="k", ls=":", lw=1,
                       label=f"exact best - 0.05 = {summary['target']:.3f}")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("test log-likelihood per pair (exact)")
        ax.grid(True, which="both", alpha=0.3)
        lows = [h["test_ll"] for r in ok.values() for h in r["history"] if h["test_ll"] is not None]
        if lows:
            top = max(lows)
            ax.set_ylim(max(min(lows), top - 1.5), top + 0.05)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Brown bigram LM, K=26,101, D={a.D}, B={a.B}, {a.negatives} negatives ({a.strategy}); "
                 "concurrent runs, 1 thread each")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

"""The toy of the A&R paper (section 4.1; after Titsias 2016): biases only, K = 10,000.

Data: u_k ~ U(0, 1), p_k = u_k / sum u, N = 200,000 labels y_n ~ Categorical(p)
(``pyro_ar.datasets.make_toy``). Model: softmax with biases only, psi = b, fitted by
maximum likelihood with stock ``pyro.infer.SVI``:

* A&R softmax -- ``likelihood="ar"`` (Gumbel noise), ``GumbelLocalGuide`` (eta_n per
  datapoint, natural step rho = (1 + epoch)^-0.9) + ``ClosedFormELBO``;
* OVE -- ``likelihood="ove"``, no guide.

Both use the same minibatch (B = 500 datapoints, s = 100 negative classes per datapoint,
uniform without replacement, weight (K-1)/s), the same initialisation b ~ N(0, 0.001^2)
and the same optimizer (default: the authors' ``ADVIStepSize`` schedule, lr 0.02,
x0.9 every 2,000 steps). The model is ``LinearClassifier`` with one constant feature
x_n = 0 (D = 1): psi_nk = 0 * w_k + b_k = b_k exactly, the weight column gets an exactly
zero gradient and never moves; this keeps the toy on the very code path of the real data
sets (lazy ``LinearUtility`` gathering only the label's and the negatives' rows, so a step
costs O(B s) whatever K, the same likelihood switch, the same guides).

Reported (every checkpoint and at the end), all computed EXACTLY (every class, every
datapoint, no subsampling) at the fitted parameters:

* the bound per datapoint: for A&R the closed-form bound at the fitted eta_n,
  (1/N) sum_n [1 - log eta_n - (1 + S_n)/eta_n] (the bound actually reached), and at the
  optimal eta (where it equals the log-likelihood); for OVE
  (1/N) sum_n sum_{k != y_n} log sigmoid(b_{y_n} - b_k);
* the exact log-likelihood per datapoint of each fit;
* the mean absolute error (1/K) sum_k |softmax(b)_k - p_k|, with two references: the
  MLE itself (empirical frequencies; the best any maximum-likelihood fit can do) and
  the uniform distribution (the starting point);
* the median wall time of a step (one torch thread) and time per epoch = 400 steps.

    python -m benchmarks.toy [--quick] [--steps N] [--optim authors|adam]
"""

import math
from pathlib import Path

import torch

import pyro
from pyro.infer import SVI

from pyro_ar import metrics  # metrics.bound: a training bound at fitted parameters (not deprecated)
from pyro_ar.datasets import make_toy
from pyro_ar.infer import GumbelLocalGuide, default_elbo, default_guide, train
from pyro_ar.likelihoods import AR, OVE
from pyro_ar.models import LinearClassifier

from benchmarks import harness
from pyro_ar.models import Init

METHODS = {"ar_softmax": "A&R softmax", "ove": "OVE"}


@torch.no_grad()
def exact_quantities(b, y, counts, p, log_eta=None):
    """Bounds / log-likelihood per datapoint and MAE, by class-level formulas (exact).

    A REFERENCE implementation, kept on purpose: with psi = b for every datapoint the bounds
    depend on a datapoint only through its class, so they cost O(K) (O(K^2) for OVE) instead
    of the O(N K) of ``pyro_ar.metrics.bound`` on all N = 200,000 rows. Every run checks it
    against the library (``check_against_metrics``, recorded as ``check_vs_metrics_bound``).
    """
    b = b.double()
    K = b.numel()
    logp = b.log_softmax(0)
    out = {"loglik": (counts * logp).sum().item() / y.numel(),
           "mae": (logp.exp() - p).abs().mean().item()}
    if log_eta is not None:  # A&R bound at the fitted eta_n: 1 - log eta - (1 + S_y)/eta
        le = log_eta.double()
        neg_logp_y = -logp[y]
        out["bound"] = (1.0 - le - torch.exp(neg_logp_y - le)).mean().item()
        out["bound_optimal_eta"] = out["loglik"]
    else:  # OVE: sum_{k != y} log sigmoid(b_y - b_k), per class y, chunked over y
        per_class = torch.empty(K, dtype=torch.float64)
        for start in range(0, K, 500):
            d = b[start:start + 500, None] - b[None, :]
            per_class[start:start + 500] = -torch.logaddexp(torch.zeros((), dtype=d.dtype), -d).sum(1) + math.log(2.0)
        out["bound"] = (counts * per_class).sum().item() / y.numel()
    return out


def check_against_metrics(b, y, log_eta, n=2000):
    """Cross-check the class-level formulas with pyro_ar.metrics.bound on n datapoints."""
    idx = torch.arange(n)
    psi = b.detach().double().expand(n, -1)
    ar = metrics.bound(psi, y[idx], "ar", log_eta=log_eta[idx].double())["mean"]
    ove = metrics.bound(psi, y[idx], "ove")["mean"]
    counts = torch.bincount(y[idx], minlength=b.numel()).double()
    mine_ar = exact_quantities(b, y[idx], counts, torch.zeros_like(b, dtype=torch.float64), log_eta[idx])["bound"]
    mine_ove = exact_quantities(b, y[idx], counts, torch.zeros_like(b, dtype=torch.float64))["bound"]
    return max(abs(ar - mine_ar), abs(ove - mine_ove))


def run(method, args, y, counts, p):
    N, K = y.numel(), p.numel()
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    x = torch.zeros(N, 1)
    likelihood = AR("gumbel", negatives=args.negatives) if method == "ar_softmax" else OVE(negatives=args.negatives)
    model = LinearClassifier(1, K, likelihood=likelihood, subsample_size=args.batch, sparse=True,
                             init=Init(scale=0.1, bias_scale=1e-3), utility="lazy")
    guide = default_guide(model)
    if method == "ar_softmax" and (args.rho_power != 0.9 or args.rho_min > 0 or args.estep_first):
        guide = GumbelLocalGuide(model, rho=harness.rho_schedule(args.rho_power, args.rho_min),
                                 local_first=args.estep_first)
    elbo = default_elbo()
    svi = SVI(model, guide, harness.make_optim(args), elbo)

    def evaluate():
        if "bias" not in pyro.get_param_store():
            return {}
        log_eta = guide.log_eta("y_eps").detach() if method == "ar_softmax" else None
        return exact_quantities(pyro.param("bias").detach(), y, counts, p, log_eta)

    step_times = []
    history = train(svi, x, y, num_steps=args.steps, eval_fn=evaluate,
                    eval_every=max(1, args.steps // args.num_evals), log_every=max(1, args.steps // 200),
                    step_times=step_times)
    final = history[-1]
    med = harness.median(step_times)
    row = {"method": method, "label": METHODS[method], "steps": final["step"],
           "epochs": final["step"] * args.batch / N,
           "bound": final["bound"], "bound_optimal_eta": final.get("bound_optimal_eta"),
           "loglik": final["loglik"], "mae": final["mae"],
           "median_step_ms": 1000 * med, "epoch_seconds": med * N / args.batch,
           "train_seconds": final["time"],
           "elbo_stochastic_end": -sum(h["loss"] for h in history[-10:]) / 10 / N}
    if method == "ar_softmax":  # the OVE bound at the A&R fit: both bounds at identical parameters
        row["ove_bound_at_this_fit"] = exact_quantities(pyro.param("bias").detach(), y, counts, p)["bound"]
        row["check_vs_metrics_bound"] = check_against_metrics(pyro.param("bias"), y, guide.log_eta("y_eps").detach())
    trace = [{k: h[k] for k in ("step", "time", "loss", "bound", "loglik", "mae") if k in h} for h in history]
    row["_probs"] = pyro.param("bias").detach().double().softmax(0)
    return row, trace


def plot(results, refs, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for r in results:
        ev = [t for t in r["trace"] if "bound" in t]
        lab = r["row"]["label"]
        axes[0].plot([t["time"] for t in ev], [-t["bound"] for t in ev], marker="o", ms=3, label=f"{lab}: bound")
        axes[0].plot([t["time"] for t in ev], [-t["loglik"] for t in ev], ls="--", label=f"{lab}: log-lik of the fit")
        axes[1].plot([t["time"] for t in ev], [t["mae"] for t in ev], marker="o", ms=3, label=lab)
    axes[0].axhline(-refs["mle_loglik"], color="k", ls=":", lw=1, label="MLE (empirical freq.) log-lik")
    axes[1].axhline(refs["mle_mae"], color="k", ls=":", lw=1, label="MLE (empirical freq.)")
    axes[0].set_yscale("log")
    axes[0].set_title("toy: -(exact bound / N) at the fit (log scale; lower = tighter)")
    axes[1].set_title("toy: mean |softmax(b) - p|")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("training wall time (s, 1 thread, evaluation excluded)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


COLUMNS = [("method", "label", "s"), ("steps", "steps", "d"), ("epochs", "epochs", ".1f"),
           ("bound/N (fitted)", "bound", ".4f"), ("bound/N (opt. eta)", "bound_optimal_eta", ".4f"),
           ("log-lik/N", "loglik", ".4f"), ("OVE bound at this fit", "ove_bound_at_this_fit", ".2f"), ("MAE", "mae", ".3e"), ("ms/step", "median_step_ms", ".2f"),
           ("s/epoch", "epoch_seconds", ".2f"), ("train s", "train_seconds", ".0f")]


def main(argv=None):
    p = harness.parser(__doc__, quick_help="800 steps, 2 evaluations")
    p.add_argument("--steps", type=int, default=None, help="iterations per method (default 20,000 = 50 epochs; quick 800)")
    p.add_argument("--num-classes", type=int, default=10_000)
    p.add_argument("--num-samples", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=500)
    p.add_argument("--negatives", type=int, default=100)
    p.add_argument("--optim", choices=["authors", "adam"], default="authors")
    p.add_argument("--lr", type=float, default=None, help="authors: 0.02; adam: 0.01")
    p.add_argument("--num-evals", type=int, default=None)
    p.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=["ar_softmax", "ove"])
    p.add_argument("--rho-power", type=float, default=0.9,
                   help="A&R softmax local step rho = max((1 + visits)^-power, rho_min) (default 0.9)")
    p.add_argument("--rho-min", type=float, default=0.0)
    p.add_argument("--estep-first", action="store_true",
                   help="A&R softmax: natural eta step before the global gradient (the authors' order)")
    p.add_argument("--tag", default="")
    p.add_argument("--plot-only", default=None, help="redraw the PNG of a saved JSON and exit")
    args = p.parse_args(argv)
    if args.plot_only:
        import json
        saved = json.load(open(args.plot_only))
        results = [{"row": r, "trace": saved["traces"][r["method"]]} for r in saved["rows"]]
        plot(results, saved["references"], Path(args.plot_only).with_suffix(".png"))
        return saved
    args.steps = args.steps or (800 if args.quick else 20_000)
    args.num_evals = args.num_evals or (2 if args.quick else 20)
    args.lr = args.lr or (0.02 if args.optim == "authors" else 0.01)
    env = harness.start(args)
    data = make_toy(args.num_classes, args.num_samples, seed=args.seed, dtype=torch.float64)
    y, ptrue = data.y, data.probs
    K, N = args.num_classes, args.num_samples
    counts = torch.bincount(y, minlength=K).double()
    freq = counts / N
    refs = {
        "mle_loglik": (counts[counts > 0] * freq[counts > 0].log()).sum().item() / N,
        "true_p_loglik": (counts * ptrue.log()).sum().item() / N,
        "uniform_loglik": -math.log(K),
        "mle_mae": (freq - ptrue).abs().mean().item(),
        "uniform_mae": (1.0 / K - ptrue).abs().mean().item(),
        "classes_never_observed": int((counts == 0).sum()),
    }
    print(f"toy: K={K}, N={N}, batch {args.batch}, {args.negatives} negatives/datapoint, {args.steps} steps, "
          f"optim={args.optim} (lr {args.lr}), torch threads=1", flush=True)
    print(f"  references: MLE (empirical frequencies) log-lik/N {refs['mle_loglik']:.4f}, MAE {refs['mle_mae']:.3e}; "
          f"true p log-lik/N {refs['true_p_loglik']:.4f}; uniform MAE {refs['uniform_mae']:.3e}; "
          f"{refs['classes_never_observed']} classes never observed", flush=True)
    results = []
    for m in args.methods:
        t0 = harness.timer().start()
        row, trace = run(m, args, y, counts, ptrue)
        results.append({"row": row, "trace": trace})
        print(f"  {row['label']:12s} bound/N {row['bound']:.4f}  log-lik/N {row['loglik']:.4f}  MAE {row['mae']:.3e}  "
              f"{row['median_step_ms']:.2f} ms/step  [{t0.wall:.0f} s]", flush=True)
    probs = {r["row"]["method"]: r["row"].pop("_probs") for r in results}
    torch.save(probs, Path(args.out) / f"toy_{args.optim}{'_quick' if args.quick else ''}{args.tag}_probs.pt")
    if len(probs) == 2:
        # paired comparison over classes of the absolute errors: mean difference and its SE
        d = (probs["ar_softmax"] - ptrue).abs() - (probs["ove"] - ptrue).abs()
        refs["mae_difference_ar_minus_ove"] = d.mean().item()
        refs["mae_difference_se"] = (d.std() / math.sqrt(K)).item()
        print(f"  MAE(A&R) - MAE(OVE) = {d.mean().item():.3e} +- {refs['mae_difference_se']:.1e} (paired over classes, 1 SE)")
    rows = [r["row"] for r in results]
    print()
    print(harness.table(rows, COLUMNS))
    name = f"toy_{args.optim}{'_quick' if args.quick else ''}{args.tag}"
    out = {"benchmark": "toy", "settings": vars(args), "environment": env, "references": refs,
           "rows": rows, "traces": {r["row"]["method"]: r["trace"] for r in results}}
    path = harness.write_json(name + ".json", out, args.out)
    plot(results, refs, path.with_suffix(".png"))
    print(f"\nwrote {path} and {path.with_suffix('.png')}")
    return out


if __name__ == "__main__":
    main()

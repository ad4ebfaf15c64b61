"""Table 3 (and Figure 2) of Ruiz et al. (2018) on MNIST or Bibtex, with stock Pyro SVI.

Linear classifiers psi = W x + b fitted by maximum likelihood (no prior), each through
``pyro.infer.SVI`` with the ``pyro_ar`` pieces:

=============  ======================================================  =====================
method         model (``LinearClassifier``)                            guide / ELBO
=============  ======================================================  =====================
exact          ``likelihood="exact"`` (all K classes)                  none / ClosedFormELBO*
ove            ``likelihood="ove"``, s negatives per datapoint         none / ClosedFormELBO*
ar_softmax     ``likelihood="ar"``, Gumbel noise, s negatives          GumbelLocalGuide (natural
                                                                       eta step) / ClosedFormELBO
ar_probit      ``likelihood="ar"``, Normal noise, s negatives          ConditionalLocalGuide (q_n
                                                                       refitted at each step)
                                                                       / ClosedFormELBO*
ar_logistic    ``likelihood="ar"``, Logistic noise, s negatives        ConditionalLocalGuide
                                                                       / ClosedFormELBO*
botev          ``likelihood="sampled"`` (sampled softmax, biased)      none / ClosedFormELBO*
bouchard       ``likelihood="bouchard"``, per-datapoint a_n            none / ClosedFormELBO*
=============  ======================================================  =====================

(* ClosedFormELBO is TraceMeanField_ELBO wherever the closed form does not apply: the
Normal-Normal KL of the probit noise site is analytic, the rest is the usual Monte Carlo.)

The authors' settings (their code): MNIST minibatch 500, 1 negative per datapoint,
35,000 iterations; Bibtex minibatch 488, 20 negatives, 5,000 iterations; W ~ N(0, 0.1^2),
b ~ N(0, 0.001^2); the step-size sequence of Kucukelbir et al. (``ADVIStepSize``, lr 0.02,
x0.9 every 2,000 iterations); softmax local step rho = (1 + epoch)^-0.9.
``--optim authors`` uses that schedule for every parameter (the per-datapoint parameters
included, with ``--local-lr``, default ``--lr``: Bouchard's a_n, and the probit/logistic q_n of
``--local noise``, :class:`~pyro_ar.infer.NoiseLocalGuide`; the default probit/logistic guide,
``ConditionalLocalGuide``, keeps none); ``--optim adam`` uses
``LazyAdam`` (``--lr``, ``--local-lr``) instead; ``--lr-decay`` decays either linearly to
5 % over the run (``LearningRateDecay``, as ``ARClassifier`` does). ``--estep-first`` applies the softmax
natural eta step before the global gradient, the authors' order
(``GumbelLocalGuide(local_first=True)``; the package default applies it after the
gradient); ``--rho-power`` / ``--rho-min`` change
the eta step size.

Reported per method: test log-likelihood per datapoint (raw and floored at -26 as the
authors did), exact for softmax models and by quadrature for probit/logistic; accuracy;
the training bound per datapoint evaluated exactly at the fitted parameters (all K
classes; Monte Carlo over q_n only for probit/logistic); the smoothed stochastic ELBO at
the end of training; the median CPU time of a step (``time.process_time``, one torch thread:
wall-clock time on a shared machine measures the waiting for a core) and per epoch. Traces
of the ELBO and of the test log-likelihood against training CPU time go to a PNG (the
paper's Figure 2).

    python -m benchmarks.table3 --dataset mnist [--quick] [--optim authors|adam] [--methods ...]
    python -m benchmarks.table3 --arff-train Corel5k-train.arff --arff-test Corel5k-test.arff [--out DIR]
    python -m benchmarks.table3 --svmlight train.txt test.txt [--out DIR]

Results (JSON and a figure) go to --out (created), by default a new temporary folder;
nothing is written inside the repository. A method whose training diverges
(:class:`~pyro_ar.infer.TrainingDiverged`, raised by ``train``'s loss check) is recorded with
the message in its row's ``diverged``, and the other methods still run.

Bibtex is loaded with ``load_bibtex(remap_classes=True)``: K = 148 classes (those that are
a first label in train or test, the authors' K), and the 3 test rows whose first label
never occurs in train are dropped (the default ``drop_unseen_test=True``, as the authors
did), leaving 2,512 test rows.
"""

from pathlib import Path
import math

import torch
import torch.nn.functional as F

import pyro
from pyro.infer import SVI

from pyro_ar import evaluation, metrics  # metrics.bound: a training bound at fitted parameters
from pyro_ar.datasets import load_arff_multilabel, load_bibtex, load_mnist, load_svmlight
from pyro_ar.infer import (
    EarlyStopping,
    GumbelLocalGuide,
    LearningRateDecay,
    TrainingDiverged,
    default_elbo,
    default_guide,
    train,
)
from pyro_ar.infer.local_guides import ConditionalLocalGuide
from pyro_ar.likelihoods import AR, OVE, Bouchard, Exact, Sampled
from pyro_ar.models import MAP, Init, LinearClassifier

from benchmarks import harness

#: the paper's Table 3 (test log-likelihood / accuracy)
PAPER = {
    "mnist": {"exact": (-0.261, 0.927), "ove": (-0.276, 0.919), "ar_softmax": (-0.271, 0.924),
              "ar_probit": (-0.302, 0.918), "ar_logistic": (-0.287, 0.917)},
    "bibtex": {"exact": (-3.188, 0.361), "ove": (-3.300, 0.352), "ar_softmax": (-3.036, 0.361),
               "ar_probit": (-4.184, 0.346), "ar_logistic": (-3.151, 0.353)},
}
#: the paper's Table 2 / slides: time per epoch (s), their MATLAB+C code, one core
PAPER_EPOCH_TIME = {
    "mnist": {"ove": 0.336, "ar_softmax": 0.337, "ar_probit": 0.431, "ar_logistic": 0.511},
    "bibtex": {"ove": 0.181, "ar_softmax": 0.188, "ar_probit": 0.244, "ar_logistic": 0.246},
}
SETTINGS = {
    # batch, negatives, iterations (the authors'); quick: iterations, evaluations
    "mnist": dict(batch=500, negatives=1, steps=35_000, quick_steps=1_500, utility="lazy"),
    "bibtex": dict(batch=488, negatives=20, steps=5_000, quick_steps=300, utility="dense"),
    # any other data set given by path (--arff-train / --svmlight): Bibtex's settings
    "custom": dict(batch=488, negatives=20, steps=5_000, quick_steps=300, utility="dense"),
}
METHODS = {  # "likelihood" names the bound for metrics.bound; "make" builds the likelihood object
    "exact": dict(likelihood="exact", noise="gumbel", make=lambda s: Exact()),
    "ove": dict(likelihood="ove", noise="gumbel", make=lambda s: OVE(negatives=s)),
    "ar_softmax": dict(likelihood="ar", noise="gumbel", make=lambda s: AR("gumbel", negatives=s)),
    "ar_probit": dict(likelihood="ar", noise="normal", make=lambda s: AR("normal", negatives=s)),
    "ar_logistic": dict(likelihood="ar", noise="logistic", make=lambda s: AR("logistic", negatives=s)),
    "botev": dict(likelihood="sampled", noise="gumbel", make=lambda s: Sampled(negatives=s)),
    "bouchard": dict(likelihood="bouchard", noise="gumbel", make=lambda s: Bouchard("local", negatives=s)),
}
DEFAULT_METHODS = ["exact", "ove", "ar_softmax", "ar_probit", "ar_logistic"]
LABELS = {"exact": "exact softmax", "ove": "OVE", "ar_softmax": "A&R softmax",
          "ar_probit": "A&R probit", "ar_logistic": "A&R logistic", "botev": "Botev (sampled)",
          "bouchard": "Bouchard (a_n)"}


def load(name, args=None):
    """``(x_train, y_train, x_test, y_test, K)`` of a named data set or of the files in ``args``."""
    if name == "custom":
        if args.svmlight:
            d = load_svmlight(*args.svmlight, remap_classes=True)
        else:
            d = load_arff_multilabel(args.arff_train, args.arff_test, num_labels=args.num_labels,
                                     remap_classes=True)  # first label; unseen test classes dropped
        return d.x_train, d.y_train, d.x_test, d.y_test, d.num_classes
    if name == "mnist":
        d = load_mnist()  # pixels / 255, as the authors
        K = 10
    else:
        d = load_bibtex(remap_classes=True)  # K = 148; drops the 3 unseen test rows
        K = len(d.info["original_class_index"])
    return d.x_train, d.y_train, d.x_test, d.y_test, K


def is_local(name):
    """Per-datapoint (local) variational parameters, which may get their own step size."""
    return name.startswith("NoiseLocalGuide.") or name.endswith("bouchard_a")


def _q_rule(q, num_nodes=32):
    r"""Nodes ``e`` (n, nodes), weights (nodes,) and entropies (n,) of the location-scale local
    q: :math:`\mathbb{E}_q[g(e)] \approx \sum_i w_i\, g(\mu + \sigma z_i)` with the Gauss rule
    of q's standard law (Gauss-Hermite for a Normal q, the Gumbel rule, at most 20 nodes, for
    the Gumbel q that is the conditional guide's default fit)."""
    from torch.distributions import Gumbel
    from pyro_ar.quadrature import gauss_gumbel, gauss_hermite

    m, sd = q.loc.double(), q.scale.double()
    z, w = gauss_gumbel(min(num_nodes, 20), m) if isinstance(q, Gumbel) else gauss_hermite(num_nodes, m)
    return m[:, None] + sd[:, None] * z, w, q.entropy().double()


def conditional_bound(model, guide, x, y, noise, num_nodes=32, chunk=500):
    r"""The A&R bound with :class:`ConditionalLocalGuide`'s q at the fitted parameters, per
    datapoint: :math:`E_q[\log\phi(e) + \sum_{k\ne y}\log\Phi(e + \psi_y - \psi_k)] + H(q)`
    with the class sum over ALL classes and the expectation by the Gauss rule of q's family
    (:func:`_q_rule`); q is the guide's own fit (on its class subsample T: one draw of T per
    datapoint, so the mean is an unbiased estimate of E_T[L(q_T)], the bound the training
    maximises)."""
    from pyro_ar.noise import get_noise

    noise = get_noise(noise)
    name, info = next(iter(guide._sites.items()))
    out = []
    with torch.no_grad():
        for i in range(0, len(y), chunk):
            idx = torch.arange(i, min(i + chunk, len(y)))
            q, _ = guide._site_distribution(name, info, idx, x, y)
            e, w, entropy = _q_rule(q, num_nodes)                       # (n, nodes), (nodes,), (n,)
            psi = model.utility(x[idx]).full().double()
            d = psi.gather(1, y[idx, None]) - psi                       # (n, K), 0 at the label
            terms = noise.log_cdf(e[:, :, None] + d[:, None, :])        # (n, nodes, K)
            terms = terms.masked_fill(F.one_hot(y[idx], psi.shape[1]).bool()[:, None, :], 0.0)
            f = noise.log_density(e) + terms.sum(-1)
            out.append((f * w).sum(-1) + entropy)
    pointwise = torch.cat(out)
    return {"mean": pointwise.mean().item(), "se": (pointwise.std() / math.sqrt(len(pointwise))).item(),
            "pointwise": pointwise}


def fitted_bound(method, model, guide, x, y, K):
    """The training objective evaluated exactly (all classes) at the fitted parameters."""
    spec = METHODS[method]
    if isinstance(guide, ConditionalLocalGuide):
        return conditional_bound(model, guide, x, y, spec["noise"])
    u = model.utility(x)
    if spec["likelihood"] == "sampled":
        return {"mean": None, "se": None, "note": "not a bound"}
    if spec["likelihood"] in ("exact", "ove"):
        return metrics.bound(u, y, spec["likelihood"], return_pointwise=True)
    if spec["likelihood"] == "bouchard":
        return metrics.bound(u, y, "bouchard", a=pyro.param("y_bouchard_a").detach(), return_pointwise=True)
    if spec["noise"] == "gumbel":
        return metrics.bound(u, y, "ar", log_eta=guide.log_eta("y_eps").detach(), return_pointwise=True)
    loc = getattr(guide, "y_eps_loc").detach()
    scale = F.softplus(getattr(guide, "y_eps_scale_unconstrained").detach())
    return metrics.bound(u, y, "ar", noise=spec["noise"], loc=loc, scale=scale, num_samples=64,
                         return_pointwise=True)


def run_method(method, args, data, K):
    x, y, xt, yt = data
    xv = yv = None
    if args.validation:  # a fixed held-out part of the training data
        perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(12345))
        n_val = int(round(args.validation * len(y)))
        x, y, xv, yv = x[perm[n_val:]], y[perm[n_val:]], x[perm[:n_val]], y[perm[:n_val]]
    spec = METHODS[method]
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    N, D = x.shape
    model = LinearClassifier(
        D, K, likelihood=spec["make"](args.negatives),
        subsample_size=args.batch, sparse=True, init=Init(scale=0.1, bias_scale=1e-3),
        utility=args.utility, weights="mle" if args.prior_scale is None else MAP(prior_scale=args.prior_scale))
    local_kw = {}
    if spec["noise"] != "gumbel" and spec["likelihood"] == "ar":  # probit / logistic
        local_kw = {"local": args.local, **({"oversample": args.oversample} if args.oversample else {})}
    guide = default_guide(model, **local_kw)
    if method == "ar_softmax" and (args.rho_power != 0.9 or args.rho_min > 0 or args.estep_first):
        guide = GumbelLocalGuide(model, rho=harness.rho_schedule(args.rho_power, args.rho_min),
                                 local_first=args.estep_first)
    elbo = default_elbo()
    svi = SVI(model, guide, harness.make_optim(args, local=is_local), elbo)
    noise = spec["noise"] if spec["likelihood"] == "ar" else "gumbel"

    def evaluate():
        if "weight" not in pyro.get_param_store():  # step 0: parameters not created yet
            return {}
        u = model.utility(xt)
        t0 = harness.timer().start()
        out = evaluation.evaluate(u, yt, ("log_lik", "log_lik_floored", "accuracy"), noise)
        res = {"test_ll": out["log_lik"], "test_ll_floored": out["log_lik_floored"],
               "test_acc": out["accuracy"]}
        if xv is not None:
            res["val_ll"] = evaluation.log_likelihood(model.utility(xv), yv, noise)
        return {**res, "eval_seconds": t0.wall}

    steps = args.steps
    step_times = []
    t_start = harness.timer().start()
    early = None if xv is None or not args.early_stopping else \
        EarlyStopping("val_ll", patience=args.early_stopping)
    history = train(svi, x, y, num_steps=steps, eval_fn=evaluate, clock="process",  # CPU time
                    eval_every=max(1, steps // args.num_evals), log_every=args.log_every,
                    step_times=step_times, early_stopping=early,
                    callbacks=[LearningRateDecay()] if args.lr_decay else [])
    if early is not None and early.best_step is not None:  # the restored best evaluation
        final = next(h for h in history if h["step"] == early.best_step and "test_ll" in h)
        history = history + [dict(final, step=history[-1]["step"], restored=early.best_step)]
    wall = t_start.wall
    final = history[-1]
    b = fitted_bound(method, model, guide, x, y, K)
    # training log-likelihood: all rows for softmax (cheap); a fixed random subset of
    # args.train_eval rows for probit/logistic (quadrature is ~100x dearer than log-softmax)
    rows_ll = torch.arange(N)
    if noise != "gumbel" and N > args.train_eval:
        rows_ll = torch.randperm(N, generator=torch.Generator().manual_seed(1))[:args.train_eval]
    train_ll = evaluation.log_likelihood(model.utility(x[rows_ll]), y[rows_ll], noise)
    # the OVE bound at this fit's parameters: compares the bounds at identical parameters
    ove_here = metrics.bound(model.utility(x), y, "ove")["mean"] if noise == "gumbel" else None
    if args.save_params:
        state = {k: v.detach().clone() for k, v in pyro.get_param_store().items()}
        torch.save(state, Path(args.out) / f"params_{args.dataset}_{args.optim}{args.tag}_{method}.pt")
    # gap between the bound and the log-likelihood of the same fit, on the same rows
    gap = None if b["mean"] is None else b["pointwise"][rows_ll].mean().item() - train_ll
    gap_all = None
    if isinstance(guide, ConditionalLocalGuide):  # q fitted on all classes: the best q
        best_q = ConditionalLocalGuide(model, negatives=None, create_plates=model.create_plates)
        best_q._setup_prototype(x[:2], y[:2])
        gap_all = conditional_bound(model, best_q, x[rows_ll], y[rows_ll], spec["noise"])["mean"] - train_ll
    losses = [h["loss"] for h in history[1:]]
    tail = losses[-max(1, len(losses) // 20):]  # last 5% of the loss records
    med = harness.median(step_times)
    paper = PAPER.get(args.dataset, {}).get(method)
    row = {
        "method": method, "label": LABELS[method], "steps": final["step"],
        "train_cpu_seconds": final["time"], "wall_seconds_incl_eval": wall,
        "median_step_cpu_ms": 1000 * med, "epoch_cpu_seconds": med * N / args.batch,
        "test_ll": final["test_ll"], "test_ll_floored": final["test_ll_floored"],
        "test_acc": final["test_acc"],
        "bound": b["mean"], "bound_se": b["se"], "bound_minus_train_ll": gap,
        "bound_minus_train_ll_q_all_classes": gap_all,
        "val_ll": final.get("val_ll"), "restored_step": final.get("restored"),
        "curve": [(h["step"], h.get("val_ll"), h["test_ll"]) for h in history
                  if "test_ll" in h and "restored" not in h],
        "ove_bound_at_this_fit": ove_here,
        "elbo_stochastic_end": -sum(tail) / len(tail) / N,
        "train_ll": train_ll,
        "paper_test_ll": paper[0] if paper else None, "paper_test_acc": paper[1] if paper else None,
        "paper_epoch_seconds": PAPER_EPOCH_TIME.get(args.dataset, {}).get(method),
    }
    trace = [{"step": h["step"], "time": h["time"],
              "elbo": (-h["loss"] / N) if h["step"] else None,
              **{k: h[k] for k in ("test_ll", "test_ll_floored", "test_acc") if k in h}}
             for h in history]
    return row, trace


def plot(results, args, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    exact_ll = next((r["row"].get("train_ll") for r in results if r["row"]["method"] == "exact"), None)
    for r in results:
        tr, m = r["trace"], r["row"]["method"]
        pts = [(t["time"], t["elbo"]) for t in tr if t["elbo"] is not None and math.isfinite(t["elbo"])]
        if pts and m != "botev":
            window = max(1, len(pts) // 50)
            axes[0].plot([p[0] for p in pts], harness.moving_average([p[1] for p in pts], window),
                         label=LABELS[m])
        ev = [(t["time"], t["test_ll"]) for t in tr if "test_ll" in t]
        axes[1].plot([p[0] for p in ev], [p[1] for p in ev], marker="o", ms=3, label=LABELS[m])
    if exact_ll is not None:
        axes[0].axhline(exact_ll, color="k", ls=":", lw=1, label="exact softmax MLE: train log-lik")
    for m, (ll, _) in PAPER.get(args.dataset, {}).items():
        if m in ("exact", "ar_softmax"):
            axes[1].axhline(ll, ls=":", lw=1, color="k" if m == "exact" else "tab:green")
    axes[0].set_title(f"{args.dataset}: stochastic ELBO / N (moving average) vs training time")
    axes[1].set_title(f"{args.dataset}: test log-lik / N vs training time\n(dotted: paper's exact & A&R softmax)")
    for ax in axes:
        ax.set_xlabel("training CPU time (s, 1 thread, evaluation excluded)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    finals = [r["row"]["test_ll"] for r in results if "test_ll" in r["row"]] or [0.0]
    spread = max(finals) - min(finals) + 0.05
    axes[1].set_ylim(min(finals) - 0.5 * spread, max(finals) + 0.3 * spread)
    elbos = [r["row"]["elbo_stochastic_end"] for r in results
             if r["row"]["method"] != "botev" and "elbo_stochastic_end" in r["row"]]
    if elbos:
        spread = max(elbos) - min(elbos) + 0.05
        axes[0].set_ylim(min(elbos) - 0.6 * spread, max(elbos) + 0.3 * spread)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


COLUMNS = [
    ("method", "label", "s"), ("steps", "steps", "d"),
    ("test ll", "test_ll", ".4f"), ("floored", "test_ll_floored", ".4f"),
    ("acc", "test_acc", ".4f"), ("paper ll", "paper_test_ll", ".3f"), ("paper acc", "paper_test_acc", ".3f"),
    ("bound/N (exact)", "bound", ".4f"), ("ELBO/N (SVI, end)", "elbo_stochastic_end", ".4f"),
    ("train ll*", "train_ll", ".4f"), ("bound - ll", "bound_minus_train_ll", ".4f"),
    ("bound - ll, q on all", "bound_minus_train_ll_q_all_classes", ".4f"), ("val ll", "val_ll", ".4f"),
    ("OVE bound here", "ove_bound_at_this_fit", ".4f"), ("CPU ms/step", "median_step_cpu_ms", ".2f"),
    ("CPU s/epoch", "epoch_cpu_seconds", ".3f"), ("paper s/epoch", "paper_epoch_seconds", ".3f"),
    ("train CPU s", "train_cpu_seconds", ".0f"),
]


def main(argv=None):
    p = harness.parser(__doc__, quick_help="a short run (under 2 minutes) of every method")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--dataset", choices=["mnist", "bibtex"], help="a data set of the paper")
    which.add_argument("--arff-train", help="any multi-label ARFF training file (Mulan / MEKA)")
    which.add_argument("--svmlight", nargs=2, metavar=("TRAIN", "TEST"),
                       help="extreme-classification (svmlight) train and test files")
    p.add_argument("--arff-test", help="the ARFF test file (with --arff-train)")
    p.add_argument("--num-labels", type=int, default=None,
                   help="labels = the last L attributes (default: from the Mulan XML / MEKA header)")
    p.add_argument("--methods", nargs="+", choices=sorted(METHODS), default=DEFAULT_METHODS)
    p.add_argument("--optim", choices=["authors", "adam"], default="authors")
    p.add_argument("--lr", type=float, default=None, help="global step size (authors: 0.02; adam: 0.001)")
    p.add_argument("--local-lr", type=float, default=None,
                   help="step size of per-datapoint parameters (probit/logistic q_n, Bouchard a_n); default --lr")
    p.add_argument("--steps", type=int, default=None, help="iterations (default: the authors')")
    p.add_argument("--lr-decay", action="store_true",
                   help="decay every step size linearly to 5%% of it over --steps (LearningRateDecay)")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--negatives", type=int, default=None)
    p.add_argument("--train-eval", type=int, default=10_000,
                   help="training rows for the probit/logistic training log-likelihood (quadrature)")
    p.add_argument("--utility", choices=["dense", "lazy"], default=None,
                   help="dense: all K utilities per step by one matmul; lazy: only the rows used "
                        "(default: lazy for mnist, dense for bibtex, where gathering B*s rows of "
                        "D=1836 costs ~20x the matmul)")
    p.add_argument("--num-evals", type=int, default=None, help="test evaluations during training")
    p.add_argument("--log-every", type=int, default=None, help="steps between ELBO records")
    p.add_argument("--rho-power", type=float, default=0.9,
                   help="A&R softmax local step rho = max((1 + visits)^-power, rho_min) (default 0.9)")
    p.add_argument("--rho-min", type=float, default=0.0)
    p.add_argument("--estep-first", action="store_true",
                   help="A&R softmax: natural eta step before the global gradient (the authors' order)")
    p.add_argument("--save-params", action="store_true", help="save the fitted param store to out/*.pt")
    p.add_argument("--validation", type=float, default=0.0,
                   help="hold out this fraction of the training data; its log-likelihood is "
                        "evaluated beside the test one (the curve is printed)")
    p.add_argument("--early-stopping", type=int, default=0, metavar="PATIENCE",
                   help="with --validation: stop after PATIENCE evaluations without a better "
                        "validation log-likelihood and report the best evaluation")
    p.add_argument("--prior-scale", type=float, default=None,
                   help="MAP weights with the prior N(0, s^2) (default: the paper's maximum likelihood)")
    p.add_argument("--local", choices=["conditional", "noise"], default="conditional",
                   help="probit/logistic local guide: ConditionalLocalGuide (q refitted at every "
                        "step, no per-datapoint state; the default) or NoiseLocalGuide "
                        "(per-datapoint parameters, stepped with --local-lr)")
    p.add_argument("--oversample", type=int, default=None,
                   help="probit/logistic: ConditionalLocalGuide's class subsample = this many "
                        "times the negatives (default: the guide's default)")
    p.add_argument("--tag", default="", help="suffix of the output file names")
    args = p.parse_args(argv)
    if args.arff_train and not args.arff_test:
        p.error("--arff-train needs --arff-test")
    if args.local == "noise" and args.oversample:
        p.error("--oversample is an option of the conditional local guide, not of --local noise")
    if args.dataset is None:
        args.dataset = "custom"
    st = SETTINGS[args.dataset]
    args.utility = args.utility or st["utility"]
    args.batch = args.batch or st["batch"]
    args.negatives = args.negatives or st["negatives"]
    args.steps = args.steps or (st["quick_steps"] if args.quick else st["steps"])
    args.num_evals = args.num_evals or (1 if args.quick else 10)
    if args.quick and args.train_eval == 10_000:
        args.train_eval = 2_000
    args.log_every = args.log_every or max(1, args.steps // 300)
    if args.lr is None:
        args.lr = 0.02 if args.optim == "authors" else 1e-3
    if args.local_lr is None:
        args.local_lr = args.lr
    env = harness.setup(args.seed, out_dir=args.out)
    data = load(args.dataset, args)
    K = data[4]
    data = data[:4]
    if args.negatives > K - 1:  # a small custom data set
        print(f"{args.negatives} negatives > K - 1 = {K - 1}: using {K - 1}")
        args.negatives = K - 1
    print(f"{args.dataset}: N={data[0].shape[0]} train, {data[2].shape[0]} test, D={data[0].shape[1]}, K={K}; "
          f"batch {args.batch}, {args.negatives} negatives/datapoint, {args.steps} steps, optim={args.optim} "
          f"(lr {args.lr}, local lr {args.local_lr}), utility={args.utility}, torch threads=1", flush=True)
    results = []
    for m in args.methods:
        t0 = harness.timer().start()
        try:
            row, trace = run_method(m, args, data, K)
        except TrainingDiverged as err:  # recorded, not fatal: the other methods still run
            print(f"  {LABELS[m]:16s} {err}", flush=True)
            results.append({"row": {"method": m, "label": LABELS[m], "diverged": str(err)}, "trace": []})
            continue
        results.append({"row": row, "trace": trace})
        print(f"  {LABELS[m]:16s} test ll {row['test_ll']:.4f} (floored {row['test_ll_floored']:.4f}) "
              f"acc {row['test_acc']:.4f}  bound/N {harness.fmt(row['bound'])}  "
              f"gap {harness.fmt(row['bound_minus_train_ll'])} (q on all {harness.fmt(row['bound_minus_train_ll_q_all_classes'])})  "
              f"{row['median_step_cpu_ms']:.2f} CPU ms/step  [{t0.wall:.0f} s wall]", flush=True)
        print("    curve (step, val ll, test ll): " + ", ".join(
            f"({st}, {harness.fmt(v, '.4f')}, {t:.4f})" for st, v, t in row["curve"]), flush=True)
    rows = [r["row"] for r in results]
    print()
    print(harness.table(rows, COLUMNS))
    name = f"table3_{args.dataset}_{args.optim}{'_quick' if args.quick else ''}{args.tag}"
    out = {"benchmark": "table3", "dataset": args.dataset, "settings": vars(args), "environment": env,
           "rows": rows, "traces": {r["row"]["method"]: r["trace"] for r in results}}
    path = harness.write_json(name + ".json", out, args.out)
    plot(results, args, Path(args.out) / (name + ".png"))
    print(f"\nwrote {path} and {Path(args.out) / (name + '.png')}")
    return out


if __name__ == "__main__":
    main()

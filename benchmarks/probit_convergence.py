"""Do probit and logistic A&R approach their exact-likelihood optimum like softmax A&R does?

Synthetic linear teachers (``make_linear_teacher``) with K classes, one per noise: Normal
(probit), Logistic, Gumbel (softmax). Each is fitted by SVI (lazy Adam, fixed step size,
minibatches of B, s uniform negatives per datapoint) with the local guides compared here:

* ``noise``        ``NoiseLocalGuide``: per-datapoint (mu_n, sigma_n), the weights' step size
  (the state of the library before issue 17);
* ``noise_lr10``   the same with a separate, 10x larger local step size (the authors' fix);
* ``conditional``  ``ConditionalLocalGuide`` (the new default): q(eps_n | psi_n) refitted at
  every step, the ELBO-optimal Gaussian on an independent class subsample;
* ``conditional_xM`` the same with ``oversample=M``: the local fit's class subsample T has
  M times the model's negatives (``--oversample M ...``);
* ``conditional_nohead`` the same without the minibatch's labels in T (``label_head=False``,
  the guide before issue 27: a uniform T only);
* ``laplace``      ``ConditionalLocalGuide(fit="laplace")``: its Laplace approximation only;
* ``gumbel``       softmax A&R: ``GumbelLocalGuide(local_first=True)`` + ``ClosedFormELBO``.

At each evaluation step it reports, per datapoint: the bound on the training set (one Monte
Carlo draw of the ELBO over all N training points, s negatives), the exact training
log-likelihood at the same weights (quadrature for probit/logistic, log-softmax for softmax),
their gap (for the conditional guides also the gap of the same guide with T = all classes,
its best q), and the exact test log-likelihood; and, as the reference, the exact-likelihood fit
(full-batch L-BFGS on the exact training log-likelihood): its training and test
log-likelihoods.

    python -m benchmarks.probit_convergence --quick [--out DIR]

``--strategy screened``: the model's s negatives per datapoint from
:class:`~pyro_ar.negatives.ScreenedNegatives` (4s uniform candidates ranked by their current
utilities, the s/2 highest summed, s/2 of the rest subsampled) for every noise, softmax included.

``--quick``: K = 50, D = 5, N = 1000, 200 steps (about a minute on one shared core; the
exact quadrature fit dominates); the default K = 300, D = 10, N = 20000, 4000 steps. Writes
``probit_convergence[_quick].json`` and ``.md`` (the table) to ``--out``.
"""


import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI, TraceMeanField_ELBO

import pyro_ar as ar
from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import ClosedFormELBO, GumbelLocalGuide, NoiseLocalGuide
from pyro_ar.infer.local_guides import ConditionalLocalGuide
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import lazy_adam

from benchmarks import harness
from pyro_ar.likelihoods import Exact, get_likelihood
from pyro_ar.models import Init

GUIDES = {"normal": ["noise", "noise_lr10", "conditional", "laplace"],
          "logistic": ["noise", "noise_lr10", "conditional", "laplace"],
          "gumbel": ["gumbel"]}


def exact_fit(x, y, K, noise, iters):
    """The library's exact-likelihood model (``likelihood="exact"``: log-softmax or
    quadrature), maximised by full-batch L-BFGS: the reference optimum."""
    pyro.clear_param_store()
    model = LinearClassifier(x.shape[1], K, likelihood=Exact(noise), init=Init(scale=0.0, bias_scale=0.0))
    model(x[:1], y[:1])  # creates weight and bias
    params = [pyro.param(n).unconstrained() for n in ("weight", "bias")]
    opt = torch.optim.LBFGS(params, max_iter=iters, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = -poutine.trace(model).get_trace(x, y).log_prob_sum() / len(y)
        loss.backward()
        return loss
    opt.step(closure)
    return pyro.param("weight").detach(), pyro.param("bias").detach()


def exact_ll(x, y, W, b, noise):
    with torch.no_grad():
        return ar.UtilityCategorical(x @ W.T + b, noise).log_prob(y).mean().item()


def build(kind, noise, D, K, s, B, lr, gaussian_nodes=16, strategy="per_datapoint"):
    model = LinearClassifier(D, K, likelihood=get_likelihood("ar", noise, s, strategy), subsample_size=B, sparse=True)
    plates = model.create_plates
    if kind == "gumbel":
        return model, GumbelLocalGuide(model, local_first=True, create_plates=plates), \
            lazy_adam({"lr": lr}), ClosedFormELBO()
    if kind.startswith("noise"):
        local_lr = 10 * lr if kind == "noise_lr10" else lr
        optim = lazy_adam(lambda name: {"lr": local_lr if name.startswith("NoiseLocalGuide") else lr})
        return model, NoiseLocalGuide(model, create_plates=plates), optim, TraceMeanField_ELBO()
    fit = "laplace" if kind == "laplace" else "gaussian"
    oversample = int(kind.split("_x")[1]) if "_x" in kind else 1
    guide = ConditionalLocalGuide(model, fit=fit, oversample=oversample, create_plates=plates,
                                  label_head="nohead" not in kind)
    # ClosedFormELBO(gaussian_nodes=16): the factor's expectation under the Gaussian q by
    # quadrature (gaussian_nodes=None, the library's default: one Monte Carlo draw of eps)
    return model, guide, lazy_adam({"lr": lr}), ClosedFormELBO(gaussian_nodes=gaussian_nodes)


def evaluate(model, guide, elbo, x, y, xt, yt, noise):
    """(bound, bound with T = all classes (conditional guides), exact train log-lik, exact
    test log-lik), per datapoint."""
    W, b = pyro.param("weight").detach(), pyro.param("bias").detach()
    B = model.subsample_size
    model.subsample_size = None  # the full training set in one plate (model and guide)
    if isinstance(elbo, ClosedFormELBO):
        elbo = ClosedFormELBO(local_updates=False, gaussian_nodes=elbo.gaussian_nodes)
    try:
        with torch.no_grad():
            bound = -elbo.loss(model, guide, x, y) / len(y)
            best = None
            if isinstance(guide, ConditionalLocalGuide):
                exact_q = ConditionalLocalGuide(model, negatives=None, fit=guide.fit,
                                                create_plates=model.create_plates)
                best = -elbo.loss(model, exact_q, x, y) / len(y)
    finally:
        model.subsample_size = B
    return bound, best, exact_ll(x, y, W, b, noise), exact_ll(xt, yt, W, b, noise)


def run_noise(noise, args):
    data = make_linear_teacher(args.n + args.n_test, args.d, args.k, noise, weight_scale=2.0, seed=args.seed)
    x, y, xt, yt = data.x[:args.n], data.y[:args.n], data.x[args.n:], data.y[args.n:]
    t = harness.timer().start()
    if args.teacher_reference:  # the hidden teacher's own parameters (no exact fit: cheaper)
        W, b, name, iters = data.W, data.b, "teacher", 0
    else:
        (W, b), name, iters = exact_fit(x, y, args.k, noise, args.lbfgs_iters), "exact fit", args.lbfgs_iters
    rows = [dict(noise=noise, guide=name, step=iters, bound=None, bound_all=None,
                 train_ll=exact_ll(x, y, W, b, noise), test_ll=exact_ll(xt, yt, W, b, noise),
                 seconds=t.cpu)]
    print(rows[-1], flush=True)
    for kind in GUIDES[noise]:
        pyro.clear_param_store()
        pyro.set_rng_seed(args.train_seed)
        model, guide, optim, elbo = build(kind, noise, args.d, args.k, args.s, args.b, args.lr,
                                          args.gaussian_nodes or None, args.strategy)
        svi = SVI(model, guide, optim, elbo)
        training = harness.timer()  # CPU time of the steps (evaluations excluded)
        for step in range(1, args.steps + 1):
            with training:
                svi.step(x, y)
            if step in args.eval_at:
                bound, best, train_ll, test_ll = evaluate(model, guide, elbo, x, y, xt, yt, noise)
                rows.append(dict(noise=noise, guide=kind, step=step, bound=bound, bound_all=best,
                                 train_ll=train_ll,
                                 test_ll=test_ll, seconds=training.cpu))
                print(rows[-1], flush=True)
    return rows


def table(rows, ref):
    lines = ["| noise | guide | step | bound | gap | gap, q on all classes | exact train ll | test ll "
             "| test ll - reference's | CPU s (train) |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    fmt = lambda v: "" if v is None else f"{v:.3f}"  # noqa: E731
    for r in rows:
        gap = None if r["bound"] is None else r["train_ll"] - r["bound"]
        gap_all = None if r["bound_all"] is None else r["train_ll"] - r["bound_all"]
        lines.append(f"| {r['noise']} | {r['guide']} | {r['step']} | {fmt(r['bound'])} | {fmt(gap)} | "
                     f"{fmt(gap_all)} | {r['train_ll']:.3f} | "
                     f"{r['test_ll']:.3f} | {r['test_ll'] - ref[r['noise']]:+.3f} | {r['seconds']:.1f} |")
    return "\n".join(lines)


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K = 50, D = 5, N = 1000, 200 steps")
    p.add_argument("--noises", default="normal,logistic,gumbel")
    p.add_argument("--guides", default=None,
                   help="comma-separated guide kinds for the non-Gumbel noises (default: all)")
    p.add_argument("--oversample", type=int, nargs="*", default=[],
                   help="also run conditional_xM for each M (T = M x the model's negatives)")
    p.add_argument("--k", type=int, default=None, help="override the preset's K")
    p.add_argument("--n", type=int, default=None, help="override the preset's N (training points)")
    p.add_argument("--steps", type=int, default=None, help="override the preset's steps (evaluated at the end)")
    p.add_argument("--gaussian-nodes", type=int, default=16,
                   help="conditional guides: Gauss-Hermite nodes of the factor's expectation under q "
                        "(ClosedFormELBO(gaussian_nodes=)); 0: one Monte Carlo draw of eps (the library's default)")
    p.add_argument("--strategy", default="per_datapoint", choices=["per_datapoint", "screened"],
                   help="the model's negatives, every noise: s uniform per datapoint, or "
                        "ScreenedNegatives(s) (4s uniform candidates ranked by utility, the top s/2 summed)")
    p.add_argument("--train-seed", type=int, default=1,
                   help="the seed of each fit's draws (minibatches, negatives); --seed picks the teacher")
    p.add_argument("--teacher-reference", action="store_true",
                   help="compare with the teacher's own parameters instead of the exact fit")
    args = p.parse_args(argv)
    for noise in ("normal", "logistic"):
        kinds = args.guides.split(",") if args.guides else GUIDES[noise]
        GUIDES[noise] = kinds + [f"conditional_x{m}" for m in args.oversample]
    harness.start(args)
    if args.quick:
        args.k, args.d, args.n, args.n_test, args.steps, args.eval_at, args.lbfgs_iters = \
            50, 5, 1000, 500, 200, (100, 200), 10
    else:
        args.k, args.d, args.n, args.n_test, args.steps, args.eval_at, args.lbfgs_iters = \
            300, 10, 20000, 3000, 4000, (200, 1000, 4000), 40
    for name in ("k", "n", "steps"):
        if getattr(p.parse_args(argv), name) is not None:
            setattr(args, name, getattr(p.parse_args(argv), name))
    if p.parse_args(argv).steps is not None:
        args.eval_at = (args.steps,)
    args.s, args.b, args.lr = 10, 256, 0.03
    rows = [r for noise in args.noises.split(",") for r in run_noise(noise, args)]
    ref = {r["noise"]: r["test_ll"] for r in rows if r["guide"] in ("exact fit", "teacher")}
    md = (f"K = {args.k}, D = {args.d}, N = {args.n} (test {args.n_test}), B = {args.b}, "
          f"s = {args.s} negatives ({args.strategy}), Adam lr {args.lr}, one thread\n\n" + table(rows, ref))
    print(md)
    path = harness.save(args, "probit_convergence", dict(rows=rows))
    path.with_suffix(".md").write_text(md + "\n")
    return rows


if __name__ == "__main__":
    main()

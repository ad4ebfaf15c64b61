"""Where the probit A&R gradient's noise and bias come from (issue 27), at fixed weights.

One minibatch of B = 256 rows of the linear teacher of ``benchmarks/probit_convergence.py``
(K = 200, D = 10, weight scale 2, ``--seed``), the weights at the teacher's own values. The
gradient of the ELBO estimate per datapoint with respect to (W, b) is drawn ``--reps`` times
(fresh class subsamples and eps draws; the rows fixed) for each source of randomness switched
on or off:

* ``S``   the model's class subsample (10 negatives per datapoint, uniform or ``--strategy
  screened``: :class:`~pyro_ar.negatives.ScreenedNegatives`) or the exact class sum;
* ``T``   the conditional local guide's own subsample (its default: 3 x 10 + the minibatch's
  labels) or q fitted on all classes;
* ``eps`` one Monte Carlo draw of eps (``ClosedFormELBO(gaussian_nodes=None)``, before issue
  27) or the factor's expectation under q by quadrature (``ClosedFormELBO()``).

Reported, relative to the norm of the exact log-likelihood gradient of the same rows
(quadrature): ``noise`` = sqrt(trace of the gradient's covariance), ``bias`` = |mean - exact|
(with its standard error), and the cosine between the mean and the exact gradient. Softmax
(Gumbel noise, ``--noise gumbel``) has its factor in closed form: no eps row.

    python -m benchmarks.probit_gradient_noise [--noise normal] [--reps 200] [--seed 1] [--out DIR]

It prints the table and writes ``probit_gradient_noise[_NOISE][_screened][_quick].json`` to ``--out``
(``--quick``: 5 draws, for the test suite's slow tier).
"""

import itertools

import torch

import pyro

import pyro_ar as ar
from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import ClosedFormELBO
from pyro_ar.infer.local_guides import ConditionalLocalGuide
from pyro_ar.models import LinearClassifier

from benchmarks import harness
from pyro_ar.likelihoods import get_likelihood


def exact_gradient(x, y, W, b, noise):
    W, b = W.clone().requires_grad_(True), b.clone().requires_grad_(True)
    ll = ar.UtilityCategorical(x @ W.T + b, noise).log_prob(y).mean()
    return torch.cat([g.flatten() for g in torch.autograd.grad(ll, [W, b])])


def draws(x, y, W, b, noise, subsample_s, subsample_t, mc_eps, reps, strategy="per_datapoint"):
    """``reps`` gradients of the per-datapoint ELBO estimate, (reps, K * (D + 1))."""
    K, D = W.shape
    pyro.clear_param_store()
    pyro.set_rng_seed(2)
    model = LinearClassifier(D, K,
                             likelihood=get_likelihood("ar", noise, 10 if subsample_s else None,
                                                       strategy if subsample_s else "per_datapoint"),
                             sparse=False)
    model(x[:2], y[:2])
    with torch.no_grad():
        pyro.param("weight").copy_(W)
        pyro.param("bias").copy_(b)
    negatives = ("model" if subsample_s else 10) if subsample_t else None
    guide = ConditionalLocalGuide(model, negatives=negatives, create_plates=model.create_plates)
    elbo = ClosedFormELBO(local_updates=False, gaussian_nodes=None if mc_eps else 16)
    params = [pyro.param(n).unconstrained() for n in ("weight", "bias")]
    out = []
    for _ in range(reps):
        loss = elbo.differentiable_loss(model, guide, x, y) / len(y)
        out.append(torch.cat([g.flatten() for g in torch.autograd.grad(-loss, params)]))
    return torch.stack(out)


def main(argv=None):
    p = harness.parser(__doc__, quick_help="5 draws per row of the table", seed=1)
    p.add_argument("--noise", default="normal")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--strategy", default="per_datapoint", choices=["per_datapoint", "screened"],
                   help="the model's class subsample S: 10 uniform per datapoint, or ScreenedNegatives(10)")
    args = p.parse_args(argv)
    env = harness.start(args)
    if args.quick:
        args.reps = 5
    rows_out = []
    K, D, N, B = 200, 10, 20000, 256
    data = make_linear_teacher(N, D, K, args.noise, weight_scale=2.0, seed=args.seed)
    rows = torch.randperm(N, generator=torch.Generator().manual_seed(0))[:B]
    x, y = data.x[rows], data.y[rows]
    exact = exact_gradient(x, y, data.W, data.b, args.noise)
    scale = exact.norm()
    print(f"{args.noise}, K = {K}, B = {B}, {args.reps} draws; relative to |exact gradient| = {scale:.4f}\n")
    print("| S random | T random | eps drawn | noise | bias (SE) | cosine |\n|---|---|---|---:|---:|---:|")
    eps_options = (True, False) if args.noise != "gumbel" else (False,)
    for s_on, t_on, mc in itertools.product((True, False), (True, False), eps_options):
        g = draws(x, y, data.W, data.b, args.noise, s_on, t_on, mc, args.reps, args.strategy)
        mean = g.mean(0)
        noise = g.var(0).sum().sqrt() / scale
        bias, se = (mean - exact).norm() / scale, (g.var(0).sum() / args.reps).sqrt() / scale
        cos = torch.nn.functional.cosine_similarity(mean, exact, 0)
        yes = lambda v: "yes" if v else "no"  # noqa: E731
        print(f"| {yes(s_on)} | {yes(t_on)} | {yes(mc) if args.noise != 'gumbel' else '-'} | {noise:.3f} | "
              f"{bias:.3f} ({se:.3f}) | {cos:.3f} |", flush=True)
        rows_out.append(dict(model_subsample=s_on, guide_subsample=t_on, eps_drawn=mc if args.noise != "gumbel" else None,
                             noise=float(noise), bias=float(bias), bias_se=float(se), cosine=float(cos)))
    name = "probit_gradient_noise" + ("" if args.noise == "normal" else "_" + args.noise) \
        + ("" if args.strategy == "per_datapoint" else "_" + args.strategy) + ("_quick.json" if args.quick else ".json")
    path = harness.write_json(name, dict(environment=env, settings=dict(noise=args.noise, reps=args.reps, K=K, B=B,
                                                                      strategy=args.strategy),
                                         rows=rows_out), args.out)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

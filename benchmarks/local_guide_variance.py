"""Why the session model drifted at few negatives (issue 27): the softmax A&R gradient over training.

The setting of issue 27 (``make_recogym_sessions(num_products=1500, num_train=300,
num_test=300, seed=3)``, ``CategoricalLatentModel(1500, 8, AR(SharedNegatives(60)),
subsample_size=50, hidden_dim=32)``, lazy Adam lr 0.02) is trained with the guide before
issue 27 (``label_head=False``: the guide's own uniform draw T); at the steps ``--at`` one
minibatch's utilities are frozen and, over ``--draws`` draws of the model's negatives S (and
of T), the script reports for every observed item

* the exact class sum S and how much of it the largest other item holds;
* the per-draw ratio (1 + S_hat_S) / (1 + S_hat_T) of the bound's term -(1 + S_hat)/eta,
  eta = 1 + S_hat_T, and c_n = (1 + S) E[1/(1 + S_hat_T)] (the factor on the datapoint's
  exact gradient in expectation, >= 1 by Jensen);
* the gradient with respect to the item offsets rho (P numbers) of the closed-form bound,
  for eta from: ``indep`` (a uniform T, the old guide), ``head`` (the guide's T now:
  :func:`pyro_ar.infer.local_fit.local_sampler`), ``exact`` (eta = 1 + S, O(P)),
  ``crn`` (eta from S itself, common random numbers): its relative bias
  ||E g - g*|| / ||g*|| (with a Monte Carlo standard error), its relative standard deviation
  per draw and cos(E g, g*), g* = the exact gradient of the log-likelihood.

    python -m benchmarks.local_guide_variance [--at 0,100,300] [--draws 50] [--quick] [--out DIR]

Prints the table (one minibatch, fixed seeds) and writes it as local_guide_variance[_quick].json
to ``--out``. ``--quick``: steps 0 and 20, 10 draws.
"""

import math

import torch

import pyro
from pyro.infer import SVI

from benchmarks import harness
from pyro_ar.datasets import make_recogym_sessions
from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.infer.local_fit import local_sampler
from pyro_ar.likelihoods import AR
from pyro_ar.models import CategoricalLatentModel
from pyro_ar.negatives import SharedNegatives
from pyro_ar.optim import lazy_adam


def class_terms(model, data, seed=123):
    """exp(psi_k - psi_y) of one minibatch (B, T, P), label columns zeroed; labels; mask."""
    g = torch.Generator().manual_seed(seed)
    sub = torch.randperm(len(data.train), generator=g)[:50]
    v = data.train[sub]
    loc, scale, _ = model.posterior_params(sub, v)
    omega = loc + scale * torch.randn(loc.shape, generator=g)
    psi = model.minibatch_utility(omega.unsqueeze(-2), model.fitted_parameters(loc)).full().squeeze(-2)
    y = v.clamp(min=0)
    e = (psi.unsqueeze(1) - psi.gather(1, y).unsqueeze(-1)).exp()
    return e.scatter(-1, y.unsqueeze(-1), 0.0), y, v >= 0


def offset_gradient(w_e, eta, y, mask):
    """Gradient wrt rho of sum_n -(1 + S_hat_n)/eta_n, S_hat_n = sum_k w_e[n, k] (the bound at fixed eta)."""
    g = -w_e / eta.unsqueeze(-1)
    g = g.scatter_add(-1, y.unsqueeze(-1), (w_e.sum(-1) / eta).unsqueeze(-1))
    return (g * mask.unsqueeze(-1)).sum((0, 1))


def estimate_weights(sampler, y, mask, P):
    """(B, T, P) estimator weights of one draw of ``sampler`` for the labels ``y``."""
    neg = sampler(y[mask], P)
    w = torch.zeros(mask.shape + (P,), dtype=torch.float64)
    wm = torch.zeros(int(mask.sum()), P, dtype=torch.float64)
    index = neg.index.expand(neg.weight.shape) if neg.shared else neg.index
    wm.scatter_add_(-1, index, neg.weight.double().expand(index.shape))
    w[mask] = wm
    return w


@torch.no_grad()
def report(step, model, data, s, draws):
    e, y, mask = class_terms(model, data)
    e = e.double()
    P = e.shape[-1]
    S = e.sum(-1)
    uniform, head = SharedNegatives(s), local_sampler(SharedNegatives(s))
    g_true = offset_gradient(e, 1 + S, y, mask)
    grads = {k: [] for k in ("indep", "head", "exact", "crn")}
    ratios, inv_t = [], []
    for _ in range(draws):
        w_s = e * estimate_weights(uniform, y, mask, P)
        S_s = w_s.sum(-1)
        S_t = (e * estimate_weights(uniform, y, mask, P)).sum(-1)
        S_h = (e * estimate_weights(head, y, mask, P)).sum(-1)
        for k, eta in (("indep", 1 + S_t), ("head", 1 + S_h), ("exact", 1 + S), ("crn", 1 + S_s)):
            grads[k].append(offset_gradient(w_s, eta, y, mask))
        ratios.append(((1 + S_s) / (1 + S_t))[mask])
        inv_t.append((1 / (1 + S_t))[mask])
    R = torch.stack(ratios).flatten()
    c = (1 + S)[mask] * torch.stack(inv_t).mean(0)
    share = (e.max(-1).values / S)[mask]
    q = torch.tensor([0.5, 0.9, 0.99, 0.999], dtype=torch.float64)
    print(f"\nstep {step}: {int(mask.sum())} items, median S {S[mask].median():.3g}, largest item's share "
          f"of S: median {share.median():.2f}, > 0.5 for {float((share > 0.5).double().mean()):.0%}")
    print(f"  (1+S_hat)/(1+S_hat_T), uniform T: quantiles 50/90/99/99.9% "
          f"{', '.join(f'{float(v):.3g}' for v in R.quantile(q))}, max {R.max():.3g}")
    print(f"  c_n = (1+S) E[1/(1+S_hat_T)]: median {c.median():.2f}, 90% {c.quantile(0.9):.2f}, max {c.max():.3g}")
    print(f"  {'eta from':<8} {'rel. bias':>9} {'(MC SE)':>8} {'rel. sd/draw':>13} {'cos':>6}")
    norm = g_true.norm()
    row = dict(step=step, items=int(mask.sum()), median_S=float(S[mask].median()),
               median_c=float(c.median()), eta={})
    for k, gs in grads.items():
        G = torch.stack(gs)
        mean = G.mean(0)
        sd = (G - mean).pow(2).sum(1).mean().sqrt() / norm
        cos = torch.nn.functional.cosine_similarity(mean, g_true, 0)
        bias = (mean - g_true).norm() / norm
        print(f"  {k:<8} {bias:9.3f} {sd / math.sqrt(draws):8.3f} {sd:13.2f} {cos:6.3f}")
        row["eta"][k] = dict(relative_bias=float(bias), bias_se=float(sd / math.sqrt(draws)),
                             relative_sd=float(sd), cos=float(cos))
    return row


def main(argv=None):
    p = harness.parser(__doc__, quick_help="steps 0 and 20, 10 draws", seed=3)
    p.add_argument("--at", default="0,100,300", help="steps at which to report (comma-separated)")
    p.add_argument("--draws", type=int, default=50)
    p.add_argument("--negatives", type=int, default=60)
    args = p.parse_args(argv)
    if args.quick:
        args.at, args.draws = "0,20", 10
    harness.start(args)
    pyro.enable_validation(False)
    data = make_recogym_sessions(num_products=1500, num_train=300, num_test=300, seed=args.seed)
    pyro.clear_param_store()
    torch.manual_seed(0)
    model = CategoricalLatentModel(1500, 8, AR(negatives=SharedNegatives(args.negatives)), subsample_size=50,
                                   hidden_dim=32)
    svi = SVI(model, default_guide(model, label_head=False), lazy_adam({"lr": 0.02}), default_elbo())
    at = sorted(int(a) for a in args.at.split(","))
    rows = []
    for step in range(at[-1] + 1):
        if step in at:
            torch.manual_seed(1000 + step)
            rows.append(report(step, model, data, args.negatives, args.draws))
            torch.manual_seed(step)
        if step < at[-1]:
            svi.step(data.train)
    harness.save(args, "local_guide_variance", {"rows": rows})
    return rows


if __name__ == "__main__":
    main()

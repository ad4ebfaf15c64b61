"""How loose the probit A&R bound is on Brown, by the family of the local q: Gaussian or Gumbel.

For a datapoint with label y and utilities psi, the A&R bound with a local q(eps) is
L(q) = E_q[log phi(eps) + sum_{k != y} log Phi(eps + psi_y - psi_k)] + H(q) <= log p(y | psi),
and its gap log p(y | psi) - L(q) = KL(q || the local posterior). This script trains the Brown
probit bigram model of ``benchmarks/brown.py`` (``PyroBigram``, K = 25,275, D = 64, B = 512,
256 importance-drawn negatives, the library's ``ConditionalLocalGuide`` with its default fit)
for ``--train-seconds`` CPU seconds, then on ``--rows`` random training pairs measures, against
the exact log p(y | psi) (``NormalNoise.log_marginal``, quadrature over all K classes):

* ``<family>, converged, all K``: the best q of the family, fitted on every class;
* ``<family>, one step, all K``: the guide's default fit (one Newton step from the Laplace
  point), on every class;
* ``<family>, one step, T``: what the guide really uses, q fitted on its own class subsample T
  (the minibatch's labels + 32 importance draws), averaged over ``--draws`` draws of T.

Each bound is evaluated with the exact class sum by quadrature under q (48 Gauss-Hermite nodes
for a Gaussian q, 20 nodes of the Gumbel's Gauss rule for a Gumbel q). Reported: the mean gap
and its standard error over the rows.

    python -m benchmarks.local_family [--train-seconds 40] [--rows 512] [--draws 4] [--quick] [--out DIR]

``--quick``: 3 s of training, 64 rows, 1 draw.
"""

import math

from benchmarks import harness

FAMILIES = ("gaussian", "gumbel")


def _bound(noise, family, loc, scale, d_full):
    """L(q) with the exact class sum, by quadrature on q's Gauss rule (``d_full``: psi_y - psi_k,
    the label's own column set far positive so that its log Phi is 0)."""
    import torch

    from pyro_ar.quadrature import gauss_gumbel, gauss_hermite

    z, wz = gauss_gumbel(20, loc) if family == "gumbel" else gauss_hermite(48, loc)
    entropy = 1.0 + 0.5772156649015329 if family == "gumbel" else 0.5 * math.log(2 * math.pi * math.e)
    e = loc[:, None] + scale[:, None] * z
    total = noise.log_density(e)
    for i in range(0, d_full.shape[1], 2048):  # (the class sum in chunks: rows x nodes x 2048)
        total = total + noise.log_cdf(e[:, :, None] + d_full[:, None, i:i + 2048]).sum(-1)
    return total @ wz + entropy + torch.log(scale)


def measure(model, noise, x, y, proposal, draws):
    """``{label: per-row gap}`` of the bounds listed in the module docstring."""
    import torch

    from pyro_ar.infer.local_fit import conditional_local_q, local_sampler
    from pyro_ar.negatives import ImportanceNegatives

    with torch.no_grad():
        utility = model.utility(x)
        full = utility.full().double()
        exact = torch.cat([noise.log_marginal(full[i:i + 16], y[i:i + 16], num_nodes=33)
                           for i in range(0, len(y), 16)])
        d = full.gather(-1, y[:, None]) - full
        w = torch.ones_like(d).scatter_(-1, y[:, None], 0.0)
        d_far = d.scatter(-1, y[:, None], 80.0)
        sampler = local_sampler(ImportanceNegatives(32, proposal), 1, True)
        gaps = {}
        for fam in FAMILIES:
            for label, refine_steps in (("converged, all K", 40), ("one step, all K", 1)):
                loc, scale = _fit(fam, noise, d, w, refine_steps)
                gaps[f"{fam}, {label}"] = exact - _bound(noise, fam, loc, scale, d_far)
            bounds = []
            for _ in range(draws):
                q, _ = conditional_local_q(noise, utility, y, sampler, fit=fam)
                bounds.append(_bound(noise, fam, q.loc.double(), q.scale.double(), d_far))
            gaps[f"{fam}, one step, T"] = exact - torch.stack(bounds).mean(0)
    return gaps


def _fit(family, noise, d, w, refine_steps):
    from pyro_ar.infer.local_fit import gaussian_local, gumbel_local

    fit = gumbel_local if family == "gumbel" else gaussian_local
    if refine_steps == 1:
        return fit(noise, d, w, refine_steps=1)
    return fit(noise, d, w, steps=30, refine_steps=refine_steps, num_nodes=16, tol=1e-9)


def main(argv=None):
    p = harness.parser(__doc__, quick_help="3 s of training, 64 rows, 1 draw")
    p.add_argument("--train-seconds", type=float, default=40.0)
    p.add_argument("--rows", type=int, default=512)
    p.add_argument("--draws", type=int, default=4)
    a = p.parse_args(argv)
    if a.quick:
        a.train_seconds, a.rows, a.draws = 3.0, 64, 1
    harness.start(a)

    import torch

    from benchmarks.brown import PyroBigram
    from pyro_ar.datasets import load_brown
    from pyro_ar.models import unigram_log_probs

    d = load_brown(num_valid_docs=25)
    counts = d.info["class_counts"]
    K = d.num_classes
    m = PyroBigram("ar_probit", K, 64, d.x_train, d.y_train, 512, 3e-3, unigram_log_probs(counts).float(), counts,
                   256, "importance", torch.device("cpu"), local_negatives=32)
    from pyro_ar.infer import train

    steps = train(m, num_steps=10**12, time_budget=a.train_seconds, eval_every=10**12, clock="process")[-1]["step"]
    rows = torch.randperm(d.x_train.shape[0], generator=torch.Generator().manual_seed(a.seed + 5))[: a.rows]
    gaps = measure(m.model, m.model.noise, d.x_train[rows], d.y_train[rows], (counts.double() + 1) ** 0.75, a.draws)
    results = [dict(bound=k, gap=v.mean().item(), se=v.std().item() / math.sqrt(len(v)), max=v.max().item())
               for k, v in gaps.items()]
    print(f"Brown probit after {steps:,} steps ({a.train_seconds:g} CPU s), {a.rows} training pairs:")
    print(harness.table(results, [("bound", "bound", ""), ("gap (nats)", "gap", ".4f"), ("SE", "se", ".4f"),
                                  ("max", "max", ".4f")]))
    harness.save(a, "local_family", {"results": results, "steps": steps, "K": K})
    return results


if __name__ == "__main__":
    main()

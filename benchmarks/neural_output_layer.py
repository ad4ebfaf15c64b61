"""Per-step cost of a K = 10^5 output layer on an MLP body: A&R vs exact softmax, and a
class-subsampled Bayesian output layer at K = 10^3 vs 10^5 (issue 14).

One process, one torch thread, CPU time (``time.process_time``); the variants alternate in
rounds of ``--steps`` steps each so that load changes on the shared machine hit them alike:

* ``body``      the body's own step: forward, backward of a stand-in loss on its features,
  Adam step on its parameters (pure torch: the cost of the network without any output layer);
* ``ar``        one stock ``SVI.step`` of :class:`pyro_ar.models.NeuralClassifier` with
  ``AR(negatives=SharedNegatives(s))`` (Gumbel noise, ``GumbelLocalGuide`` + ``ClosedFormELBO``),
  ``sparse=True`` and ``lazy_adam`` -- body and output layer trained jointly;
* ``sampled``   the same with the sampled softmax (``Sampled(SharedNegatives(s))``);
* ``exact``     the same model with ``Exact()`` and dense utilities (all K logits, dense Adam);
* ``exact_torch`` the exact softmax as a user writes it: ``F.cross_entropy(head(body(x)), y)``
  with ``torch.optim.Adam`` over body and head.

The output layer's share of a step is ``step - body`` (Pyro's per-step overhead is charged
to the output layer). Targets: ``ar`` layer <= 1.2 x body; exact layer >= 50 x the ``ar``
layer. Ratios are given as ratios of the medians and as medians of the per-round ratios.

``--part bayes``: the Bayesian output layer
(:class:`pyro_ar.models.BayesianNeuralClassifier`: Gaussian mean-field rows, A&R likelihood
with ``--negatives`` shared uniform negatives, its W-conditioned closed-form local guide
``NeuralClassSubsampledNormal``, ``ClosedFormELBO``, ``lazy_adam``) on the same body at
K = 10^3 and K = ``--num-classes``, interleaved with ``body`` in the same rounds; a step
samples and updates only the rows of its class subsample, so its cost should not depend on
K (reported: the K = 10^5 step over the K = 10^3 step, and each layer's share over the body).

    python -m benchmarks.neural_output_layer [--part layer|bayes] [--quick] [--num-classes 100000] [--out DIR]

Writes ``neural_output_layer[_bayes].json`` to ``--out`` (default: the system temp directory).
"""

import statistics

import torch
import torch.nn.functional as F

import pyro
from pyro.infer import SVI

from benchmarks import harness
from benchmarks.harness import table

from pyro_ar.infer import ClosedFormELBO, default_elbo, default_guide
from pyro_ar.likelihoods import AR, Exact, Sampled
from pyro_ar.models import BayesianNeuralClassifier, NeuralClassifier
from pyro_ar.negatives import SharedNegatives
from pyro_ar.optim import lazy_adam


def mlp(d_in, hidden, features):
    return torch.nn.Sequential(torch.nn.Linear(d_in, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, features), torch.nn.ReLU())


def body_step(args, x):
    """One step of the body alone: forward, a stand-in loss on its features, backward, Adam."""
    body = mlp(x.shape[1], args.hidden, args.features)
    opt = torch.optim.Adam(body.parameters(), lr=1e-3)

    def step():
        idx = torch.randint(0, len(x), (args.batch,))
        loss = body(x[idx]).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return step


def make_bayes_steps(args, x):
    """body, and the Bayesian output layer's SVI step at K = 10^3 and K = --num-classes."""
    steps = {"body": body_step(args, x)}
    for K in (1_000, args.num_classes):
        y = torch.randint(0, K, (len(x),), generator=torch.Generator().manual_seed(K))
        model = BayesianNeuralClassifier(mlp(x.shape[1], args.hidden, args.features), args.features, K,
                                         likelihood=AR(negatives=args.negatives), subsample_size=args.batch)
        guide = default_guide(model, name=f"bayes_{K}")
        svi = SVI(model, guide, lazy_adam({"lr": 1e-3}), ClosedFormELBO())
        steps[f"bayes_K{K}"] = lambda svi=svi, y=y: svi.step(x, y)
    return steps


def make_steps(args, x, y):
    """name -> a function doing one training step (each variant has its own body and params)."""
    K, Fdim, s = args.num_classes, args.features, args.negatives
    steps = {"body": body_step(args, x)}

    def svi_step(name, likelihood, **kw):
        model = NeuralClassifier(mlp(x.shape[1], args.hidden, Fdim), Fdim, K, likelihood=likelihood,
                                 subsample_size=args.batch, prefix=name + "_", site=name, **kw)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 1e-3}), default_elbo())
        steps[name] = lambda: svi.step(x, y)

    svi_step("ar", AR(negatives=SharedNegatives(s)), sparse=True)
    svi_step("sampled", Sampled(SharedNegatives(s)), sparse=True)
    svi_step("exact", Exact(), utility="dense")

    tbody, head = mlp(x.shape[1], args.hidden, Fdim), torch.nn.Linear(Fdim, K)
    topt = torch.optim.Adam(list(tbody.parameters()) + list(head.parameters()), lr=1e-3)

    def exact_torch():
        idx = torch.randint(0, len(x), (args.batch,))
        loss = F.cross_entropy(head(tbody(x[idx])), y[idx])
        topt.zero_grad()
        loss.backward()
        topt.step()
    steps["exact_torch"] = exact_torch
    return steps


def run(args):
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    pyro.enable_validation(False)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.num_data, args.input_dim, generator=g)
    y = torch.randint(0, args.num_classes, (args.num_data,), generator=g)
    steps = make_bayes_steps(args, x) if args.part == "bayes" else make_steps(args, x, y)
    slow = {"exact", "exact_torch"}
    for name, f in steps.items():  # warm-up (parameter creation, allocator)
        for _ in range(2):
            f()
    times = {name: [] for name in steps}
    rounds = []
    for r in range(args.rounds):
        med = {}
        for name, f in steps.items():
            n = max(1, args.steps // 4) if name in slow else args.steps
            ts = harness.step_times(f, n)["cpu"]
            times[name] += ts
            med[name] = statistics.median(ts)
        rounds.append(med)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(f"{k} {v * 1e3:.1f} ms" for k, v in med.items()),
              flush=True)
    return times, rounds


def summarise(times, rounds):
    med = {k: statistics.median(v) for k, v in times.items()}
    layer = {k: med[k] - med["body"] for k in ("ar", "sampled", "exact")}
    per_round = lambda f: statistics.median(f(r) for r in rounds)  # noqa: E731
    rows = []
    for k in ("body", "ar", "sampled", "exact", "exact_torch"):
        row = {"method": k, "step_ms": 1e3 * med[k], "steps": len(times[k])}
        if k in layer:
            row["layer_ms"] = 1e3 * layer[k]
            row["layer_over_body"] = layer[k] / med["body"]
            row["layer_over_body_rounds"] = per_round(lambda r: (r[k] - r["body"]) / r["body"])
            row["exact_layer_over_this"] = layer["exact"] / layer[k]
            row["exact_step_over_this"] = med["exact"] / med[k]
        rows.append(row)
    return rows


def summarise_bayes(times, rounds, num_classes):
    med = {k: statistics.median(v) for k, v in times.items()}
    small, large = "bayes_K1000", f"bayes_K{num_classes}"
    rows = [{"method": "body", "step_ms": 1e3 * med["body"], "steps": len(times["body"])}]
    for k in (small, large):
        rows.append({"method": k, "step_ms": 1e3 * med[k], "layer_ms": 1e3 * (med[k] - med["body"]),
                     "layer_over_body": (med[k] - med["body"]) / med["body"],
                     "large_over_small": med[k] / med[small],
                     "large_over_small_rounds": statistics.median(r[k] / r[small] for r in rounds),
                     "steps": len(times[k])})
    return rows


def main(argv=None):
    p = harness.parser(__doc__)
    p.add_argument("--part", choices=("layer", "bayes"), default="layer",
                   help="layer: A&R / sampled / exact at K; bayes: the Bayesian layer at 10^3 vs K")
    p.add_argument("--num-classes", type=int, default=100_000)
    p.add_argument("--input-dim", type=int, default=784)
    p.add_argument("--hidden", type=int, default=512)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--negatives", type=int, default=64)
    p.add_argument("--num-data", type=int, default=10_000)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=12, help="steps per round (exact: a quarter)")
    args = p.parse_args(argv)
    if args.quick:
        args.num_classes, args.rounds, args.steps = 10_000, 2, 8
    harness.start(args)
    times, rounds = run(args)
    if args.part == "bayes":
        return report_bayes(args, times, rounds)
    rows = summarise(times, rounds)
    cols = [("method", "method", ""), ("step ms", "step_ms", ".1f"), ("layer ms", "layer_ms", ".1f"),
            ("layer/body", "layer_over_body", ".2f"), ("(per round)", "layer_over_body_rounds", ".2f"),
            ("exact layer / layer", "exact_layer_over_this", ".1f"),
            ("exact step / step", "exact_step_over_this", ".1f"), ("steps", "steps", "d")]
    return report(args, times, rows, cols, f"K={args.num_classes}", "neural_output_layer")


def report(args, times, rows, cols, title, name):
    """Print the table under ``title`` + the body's shape, write ``name`` (JSON) to ``--out``."""
    print(f"\n{title}; MLP {args.input_dim}-{args.hidden}-{args.hidden}-{args.features}, "
          f"B={args.batch}, {args.negatives} shared negatives, CPU time, 1 thread")
    print(table(rows, cols))
    harness.save(args, name, {"rows": rows, "times": times})
    return rows


def report_bayes(args, times, rounds):
    rows = summarise_bayes(times, rounds, args.num_classes)
    cols = [("method", "method", ""), ("step ms", "step_ms", ".1f"), ("layer ms", "layer_ms", ".1f"),
            ("layer/body", "layer_over_body", ".2f"), ("step / K=1000 step", "large_over_small", ".2f"),
            ("(per round)", "large_over_small_rounds", ".2f"), ("steps", "steps", "d")]
    return report(args, times, rows, cols, f"Bayesian output layer (A&R, W-conditioned local guide) at "
                  f"K = 1000 vs {args.num_classes}", "neural_output_layer_bayes")


if __name__ == "__main__":
    main()

# %% [markdown]
# # Softmax at large K
#
# Maximum likelihood for a softmax over many classes, three ways, all through the same
# model (`LinearClassifier`) and stock `pyro.infer.SVI` — one switch, the likelihood object
# (`pyro_ar.likelihoods`):
#
# * `Exact()` — the exact softmax, $O(K)$ per datapoint;
# * `OVE(negatives=s)` — the one-vs-each bound (Titsias 2016),
#   $\log p(y) \ge \sum_{k\ne y}\log\sigma(\psi_y - \psi_k)$, subsampled;
# * `AR(negatives=s)` — Augment & Reduce: the Gumbel-augmented model with a local
#   $q(\varepsilon_n) = \mathrm{Gumbel}(\log\eta_n, 1)$, whose bound
#   $1 - \log\eta_n - (1 + S_n)/\eta_n$ (with $S_n = \sum_{k\ne y_n} e^{\psi_k - \psi_{y_n}}$
#   estimated from a few classes) is evaluated in closed form by `ClosedFormELBO`, while
#   `GumbelLocalGuide` takes the natural-gradient step
#   $\eta_n \leftarrow (1-\rho)\eta_n + \rho(1 + \hat S_n)$ — Algorithm 1 of the paper.
#
# Two problems from the paper: its toy (a categorical without covariates, $K = 10{,}000$)
# and Bibtex (1,836 binary word features, $K = 148$ tags). The point to watch: both A&R
# and OVE are lower bounds of the log-likelihood, but **A&R's is far tighter** — the bound
# is what SVI maximises, so its tightness is what makes the fit trustworthy.
#
# Run it:
#
#     python tutorials/02_softmax_at_large_k.py            # ~7 min on 2 busy CPU cores
#     python tutorials/02_softmax_at_large_k.py --quick    # CI size, < 1 min
#
# The full-size reproductions (Table 3 of the paper, Figure 2) are
# `benchmarks/toy.py` and `benchmarks/table3.py`; results in `benchmarks/RESULTS.md`.

# %%
import os

import torch

import pyro
from pyro.infer import SVI

from pyro_ar import evaluation, metrics  # metrics.bound: a training bound at a fit
from pyro_ar.datasets import fetch_bibtex, load_bibtex, make_toy
from pyro_ar import AR, Exact, LinearClassifier, OVE, default_elbo, default_guide, train
from pyro_ar.optim import advi_step_size

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt
from pyro_ar.models import MAP, Init

FIGURES = ("02_toy.png", "02_bibtex.png")
PRIOR_SCALE = 0.3  # the regularised Bibtex fit's prior N(0, s^2) (benchmarks/table3.py --prior-scale)
args = _tutorial.parse_args("Tutorial 2: softmax at large K")
torch.set_num_threads(1)
# each method is a likelihood object, built for a number of negative classes per datapoint
METHODS = {"A&R softmax": lambda s: AR("gumbel", negatives=s),
           "OVE": lambda s: OVE(negatives=s),
           "exact softmax": lambda s: Exact()}


def save(fig, name):
    _tutorial.save(fig, os.path.join(args.out, name))


def authors_optim():
    # the step-size sequence of Kucukelbir et al. (2017) that the A&R authors used, x0.9
    # every 2,000 steps; it updates only the rows a step touched (sparse gradients)
    return advi_step_size({"lr": 0.02, "alpha": 0.1, "decay": 0.9, "decay_every": 2000})


def fit(likelihood, x, y, batch, steps, eval_fn=None, evals=10, **model_kwargs):
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    model = LinearClassifier(x.shape[1], K, likelihood=likelihood, subsample_size=batch, sparse=True,
                             init=Init(scale=0.1, bias_scale=1e-3), **model_kwargs)
    guide = default_guide(model)
    svi = SVI(model, guide, authors_optim(), default_elbo())
    pyro.poutine.block(model)(x, y)  # create the parameters, so the step-0 evaluation can run
    history = train(svi, x, y, num_steps=steps, eval_fn=eval_fn and (lambda: eval_fn(model)),
                    eval_every=max(1, steps // evals), log_every=max(1, steps // 50))
    return model, guide, history


# %% [markdown]
# ## The toy: $K = 10{,}000$ classes, no covariates
#
# $p_k \propto u_k$ with $u_k \sim U(0, 1)$, $N = 200{,}000$ draws; the model is a softmax
# over free biases $b$ (a `LinearClassifier` with one constant zero feature, so
# $\psi = b$). Minibatches of 500 datapoints with 100 negatives each. We evaluate the bound
# each method maximised — over **all** classes, at the fitted parameters — on a random
# subset of datapoints, and the mean absolute error of the fitted probabilities.

# %%
K, N = (2_000, 20_000) if args.quick else (10_000, 200_000)
steps = 200 if args.quick else 2_000
toy = make_toy(K, N, seed=args.seed)
x0 = torch.zeros(N, 1)
g = torch.Generator().manual_seed(args.seed)
check = torch.randperm(N, generator=g)[:1000]
rows = {}
for name in ("A&R softmax", "OVE"):
    model, guide, history = fit(METHODS[name](100), x0, toy.y, 500, steps, utility="lazy")
    b = pyro.param("bias").detach().double()
    psi = b.expand(len(check), K)
    if name == "A&R softmax":
        log_eta = guide.log_eta("y_eps").detach().double()[check]
        bnd = metrics.bound(psi, toy.y[check], "ar", log_eta=log_eta)["mean"]
    else:
        bnd = metrics.bound(psi, toy.y[check], "ove")["mean"]
    ll = evaluation.log_likelihood(psi, toy.y[check])
    mae = (b.softmax(-1) - toy.probs.double()).abs().mean().item()
    rows[name] = dict(bound=bnd, ll=ll, mae=mae, history=history, p=b.softmax(-1))
    print(f"{name:12s} bound/N {bnd:10.3f}   log-lik/N {ll:8.4f}   MAE of p {mae:.3e}   "
          f"{1e3 * history[-1]['time'] / steps:.1f} ms/step")
print(f"{'truth':12s} {'':18s} log-lik/N {(toy.probs.double().log()[toy.y[check]]).mean().item():8.4f}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
names = list(rows)
axes[0].bar(names, [-rows[n]["bound"] for n in names], color=["C0", "C1"])
axes[0].bar(names, [-rows[n]["ll"] for n in names], color="none", edgecolor="k", ls="--",
            label="-log-likelihood of the same fit")
axes[0].set(yscale="log", ylabel="- bound per datapoint (log scale; lower is tighter)",
            title=f"toy, K = {K:,}: the bound at the fit")
axes[0].legend(fontsize=8)
order = toy.probs.argsort(descending=True)
for n, c in zip(names, ("C0", "C1")):
    axes[1].plot(torch.arange(K), rows[n]["p"][order], c, lw=0.5, alpha=0.7,
                 label=f"{n}: MAE {rows[n]['mae']:.2e}")
axes[1].plot(torch.arange(K), toy.probs[order], "k", lw=1, label="true p")
axes[1].set(xlabel="class (sorted by true p)", ylabel="probability", title="fitted class probabilities")
axes[1].legend(fontsize=8)
save(fig, FIGURES[0])

# %% [markdown]
# ## Bibtex: a linear classifier, $K = 148$
#
# The paper's setting: the first tag of each document as its class, minibatches of 488
# documents, 20 negative classes per datapoint, the authors' step sizes. Bibtex carries no
# explicit licence, so it is not shipped with the package: `fetch_bibtex()` downloads it once
# (3.5 MB, Mulan's files, checked against pinned SHA-256 digests) into the data home
# (`$PYRO_AR_DATA`, else `~/.cache/pyro_ar`) and reuses it after; offline and without it a
# script skips this part (the documentation build requires it). At this small $K$ the dense utility
# (one matrix product) is faster than gathering rows, so `utility="dense"`.
#
# We record the stochastic ELBO per datapoint during training and the exact test
# log-likelihood (all classes; raw, and floored at $-26$ per datapoint as the authors did)
# at checkpoints, against training wall time — the paper's Figure 2. The paper's fits are
# unregularised maximum likelihood, which overfits Bibtex (the test log-likelihood peaks and
# then falls); the last row is the regularised fit beside them: MAP weights under a Gaussian
# prior $N(0, s^2)$ (`weights=MAP(prior_scale=s)`).

# %%
bib = _tutorial.load_external(lambda: load_bibtex(fetch_bibtex(), remap_classes=True), "Bibtex", "skipping this part")

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
if bib is not None:
    x, y, xt, yt = bib.x_train, bib.y_train, bib.x_test, bib.y_test
    K, Ntr = bib.num_classes, x.shape[0]
    steps = 110 if args.quick else 2_000  # (quick: four fits of 110 steps, as fast as three of 150)

    def evaluate(model):  # one chunked pass over the test set, all K classes
        out = evaluation.evaluate(model.utility(xt), yt, ("log_lik", "log_lik_floored", "accuracy"))
        return {"test_ll": out["log_lik"], "test_ll_floored": out["log_lik_floored"],
                "accuracy": out["accuracy"]}

    print(f"\nBibtex: K = {K}, {Ntr} training / {xt.shape[0]} test documents, D = {x.shape[1]}")
    print(f"{'method':17s} {'test ll':>9s} {'floored':>9s} {'accuracy':>9s} {'ms/step':>8s}")
    # the paper's fits are maximum likelihood (no prior), which overfits Bibtex; beside them,
    # the regularised fit: MAP weights under the prior N(0, s^2) (scikit-learn's L2 penalty
    # with C = s^2; ARClassifier(weights=MAP()) chooses s on a held-out split)
    runs = [(name, likelihood, {}) for name, likelihood in METHODS.items()]
    runs.append(("A&R softmax, MAP", METHODS["A&R softmax"], dict(weights=MAP(prior_scale=PRIOR_SCALE))))
    for name, likelihood, kw in runs:
        model, guide, history = fit(likelihood(20), x, y, 488, steps, eval_fn=evaluate, utility="dense", **kw)
        logged = [h for h in history if h["step"] > 0]
        evals = [h for h in history if "test_ll" in h]
        axes[0].plot([h["time"] for h in logged], [-h["loss"] / Ntr for h in logged], label=name)
        axes[1].plot([h["time"] for h in evals], [h["test_ll"] for h in evals], "o-", ms=3, label=name)
        last = evals[-1]
        print(f"{name:17s} {last['test_ll']:9.4f} {last['test_ll_floored']:9.4f} {last['accuracy']:9.4f} "
              f"{1e3 * last['time'] / steps:8.2f}")
    axes[0].set(xlabel="training time (s)", ylabel="ELBO per datapoint (stochastic)",
                title="Bibtex: the objective each method maximises", ylim=(-2.5, 0))
    axes[1].set(xlabel="training time (s)", ylabel="test log-likelihood per datapoint (exact)",
                title="Bibtex: test log-likelihood", ylim=(-6, -2.5))
    axes[0].legend(fontsize=8)
    axes[1].legend(fontsize=8)
else:
    for ax in axes:
        ax.text(0.5, 0.5, "Bibtex data not found:\nsee the printed message", ha="center", va="center")
        ax.set_axis_off()
save(fig, FIGURES[1])

# %% [markdown]
# # A&R inside a neural network
#
# Any `torch.nn.Module` that maps inputs to a feature vector $h_n = g_\phi(x_n)\in\mathbb{R}^F$
# becomes the body of a categorical model with `NeuralClassifier(body, F, K, likelihood=...)`:
#
# $$\psi_{nk} = w_k\cdot h_n + b_k, \qquad y_n \sim \text{likelihood}(\psi_n).$$
#
# The output layer is lazy (`LinearUtility`): an A&R or sampled-softmax step computes the
# body on the minibatch and only the rows of $W$ of the labels and the negative classes,
# with row-sparse gradients; the body's parameters are registered in Pyro's param store
# (`pyro.module`) so that **one** `SVI.step` trains body and output layer together. The
# likelihood is the same one switch as for the linear models (`pyro_ar.likelihoods`):
#
# * `Exact()` — the softmax over all K classes, $O(K F)$ per datapoint;
# * `Sampled(SharedNegatives(s))` — the sampled softmax (biased);
# * `AR(negatives=SharedNegatives(s))` — Augment & Reduce (Gumbel noise, closed-form
#   bound and natural step for the local $\eta_n$).
#
# Below: a multilayer perceptron on MNIST (K = 10), then a neural language model on the
# Brown corpus (K = 25,275), each output layer trained for the **same CPU time**, test
# log-likelihood against time. At K = 10 the exact
# softmax costs little, so the three curves mostly show that the body learns the same with
# any output layer; the saving is at large K: `benchmarks/neural_output_layer.py` measures,
# for an MLP body at K = 100,000, the A&R layer at about 0.7x the body's own
# forward+backward time and about 80x cheaper than the exact softmax layer per step
# ([claim neural-output-layer] in `benchmarks/RESULTS.md`).
#
# Run it:
#
#     python tutorials/06_neural_output_layer.py            # ~8 min of CPU (60 s per method and part)
#     python tutorials/06_neural_output_layer.py --quick    # CI size, a few seconds
#
# MNIST is downloaded once by `fetch_mnist()` (11 MB, the original IDX files, checked against
# pinned SHA-256 digests) into the data home (`$PYRO_AR_DATA`, else `~/.cache/pyro_ar`); offline
# and without it the script uses scikit-learn's 8 x 8 digits (the documentation build requires MNIST).

# %%
import math
import os

import torch

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import fetch_mnist, load_brown, load_digits, load_mnist
from pyro_ar import AR, Exact, SharedNegatives, default_elbo, default_guide, lazy_adam, train
from pyro_ar.likelihoods import Sampled
from pyro_ar.models import NeuralClassifier, NGramBody, context_windows, unigram_log_probs
from pyro_ar.negatives import ImportanceNegatives

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt
from pyro_ar.models import Init

FIGURES = ("06_mnist_equal_time.png", "06_brown_neural_lm.png")
args = _tutorial.parse_args("Tutorial 6: A&R inside a neural network")
torch.set_num_threads(1)

data = _tutorial.load_external(lambda: load_mnist(fetch_mnist()), "MNIST",
                               "using scikit-learn's 8 x 8 digits instead") or load_digits()
n_train = 3_000 if args.quick else len(data.x_train)
n_test = 1_000 if args.quick else len(data.x_test)
x, y = data.x_train[:n_train], data.y_train[:n_train]
xt, yt = data.x_test[:n_test], data.y_test[:n_test]
K, D = data.num_classes, x.shape[1]
print(f"{data.info.get('name', 'digits')}: {len(x)} training / {len(xt)} test images, D = {D}, K = {K}")

# %% [markdown]
# ## The network and the three output layers
#
# A two-layer perceptron body with 64 output features; the output layer's $W$ (K x 64)
# and $b$ are the model's parameters. The same minibatch size (128), optimiser
# (`lazy_adam`: lazy rows for the sparse output gradients, plain Adam for the body) and
# CPU-time budget for every method; A&R and the sampled softmax use 3 shared negative
# classes per step.

# %%
F, hidden, batch = 64, (64 if args.quick else 256), 128
budget = 0.8 if args.quick else 60.0  # CPU seconds per method
LIKELIHOODS = {"A&R (3 negatives)": AR("gumbel", negatives=SharedNegatives(3)),
               "sampled softmax (3 negatives)": Sampled(SharedNegatives(3)),
               "exact softmax": Exact()}


def body():
    return torch.nn.Sequential(torch.nn.Linear(D, hidden), torch.nn.ReLU(),
                               torch.nn.Linear(hidden, F), torch.nn.ReLU())


def fit(make_model, x, y, xt, yt, budget, metrics=("log_lik", "accuracy"), **guide_options):
    """Train ``make_model()`` for ``budget`` CPU seconds with the library's loop; evaluate
    on the test set at eight training times."""
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    model = make_model()
    svi = SVI(model, default_guide(model, **guide_options), lazy_adam({"lr": 3e-3}), default_elbo())
    pyro.poutine.block(model)(x[:2], y[:2])  # create the parameters, so the step-0 evaluation can run
    svi.step(x, y)  # one untimed warm-up step: a process's first step imports torch's lazy modules (~1 s)
    history = train(svi, x, y, num_steps=10**9, time_budget=budget, clock="process",
                    eval_fn=lambda: model.evaluate(xt, yt, metrics=metrics),
                    eval_times=[budget * i / 8 for i in range(1, 8)], eval_every=10**9)
    return model, history


def mlp_model(likelihood):
    sparse = not isinstance(likelihood, Exact)
    return lambda: NeuralClassifier(body(), F, K, likelihood=likelihood, subsample_size=batch, sparse=sparse)


results = {name: fit(mlp_model(lik), x, y, xt, yt, budget) for name, lik in LIKELIHOODS.items()}
print(f"{'method':30s} {'steps':>6s} {'ms/step':>8s} {'test ll':>8s} {'accuracy':>8s}")
for name, (model, history) in results.items():
    last = history[-1]
    print(f"{name:30s} {last['step']:6d} {1e3 * last['time'] / last['step']:8.2f} "
          f"{last['log_lik']:8.4f} {last['accuracy']:8.4f}")

# %% [markdown]
# ## Equal-time curves
#
# Test log-likelihood (exact, all classes) and accuracy at the evaluation points, against
# the CPU time spent training (evaluation excluded).

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for name, (model, history) in results.items():
    evals = [h for h in history if "log_lik" in h]
    axes[0].plot([h["time"] for h in evals], [h["log_lik"] for h in evals], "o-", ms=3, label=name)
    axes[1].plot([h["time"] for h in evals], [h["accuracy"] for h in evals], "o-", ms=3, label=name)
axes[0].set(xlabel="training CPU time (s)", ylabel="test log-likelihood per image",
            title=f"MLP body + K = {K} output layer")
axes[1].set(xlabel="training CPU time (s)", ylabel="test accuracy", title="same runs")
axes[0].legend(fontsize=8)
_tutorial.save(fig, os.path.join(args.out, FIGURES[0]))

# %% [markdown]
# ## A neural language model on Brown
#
# The same three output layers at large K: the next word of the Brown corpus from the
# $n = 3$ previous ones (Bengio et al. 2003). The body `NGramBody` embeds each context word
# (a $K\times E$ table), concatenates the $n$ embeddings and applies one tanh layer of $F$
# units; the output layer has one row per vocabulary word, K = 25,275.
# `context_windows` turns the bigram pairs of `load_brown` into the $n$-word contexts.
#
# An A&R step touches the minibatch's context embeddings and the output rows of its labels
# and of $s = 256$ shared negatives drawn from $q(k)\propto(\mathrm{count}_k+1)^{0.75}$
# (`ImportanceNegatives`, weighted by $1/(s\,q(k))$: unbiased); every gradient is
# row-sparse. The exact softmax computes all K utilities of every context. Output biases
# start at the log unigram frequencies; A&R takes its closed-form $\eta$ step before the
# gradient step (`local_first=True`: each context is seen about once per epoch, so its
# $\eta$ would otherwise be stale). `benchmarks/neural_lm.py` is the full study (4-word
# contexts, against the plain PyTorch exact loop, early stopping on validation).

# %%
brown = load_brown(num_valid_docs=25)
Kw, n_ctx = brown.num_classes, 3
E, H, lm_batch = (16, 32, 128) if args.quick else (64, 128, 256)
lm_budget = 1.5 if args.quick else 60.0  # CPU seconds per method
wx, wy = context_windows(brown.x_train, brown.y_train, n_ctx), brown.y_train
keep = torch.randperm(len(brown.y_test), generator=torch.Generator().manual_seed(0))[:1_000 if args.quick else 5_000]
wxt, wyt = context_windows(brown.x_test, brown.y_test, n_ctx)[keep], brown.y_test[keep]
counts = brown.info["class_counts"]
proposal = (counts.double() + 1) ** 0.75
print(f"Brown: K = {Kw:,} words, {len(wy):,} training contexts of {n_ctx} words, {len(wyt):,} test contexts")

LM_LIKELIHOODS = {"A&R (256 negatives)": AR("gumbel", negatives=ImportanceNegatives(256, proposal)),
                  "sampled softmax (256 negatives)": Sampled(ImportanceNegatives(256, proposal)),
                  "exact softmax": Exact()}


def lm_model(likelihood):
    exact = isinstance(likelihood, Exact)
    return lambda: NeuralClassifier(NGramBody(Kw, n_ctx, E, H, sparse=not exact), H, Kw,
                                    likelihood=likelihood, subsample_size=lm_batch, sparse=not exact,
                                    utility="dense" if exact else "lazy",
                                    init=Init(bias_scale=0.0, bias=unigram_log_probs(counts).float()))


lm_results = {name: fit(lm_model(lik), wx, wy, wxt, wyt, lm_budget, metrics=("log_lik",),
                        **({"local_first": True} if isinstance(lik, AR) else {}))
              for name, lik in LM_LIKELIHOODS.items()}
print(f"{'method':32s} {'steps':>6s} {'ms/step':>8s} {'test ll':>8s} {'perplexity':>10s}")
for name, (model, history) in lm_results.items():
    last = history[-1]
    print(f"{name:32s} {last['step']:6d} {1e3 * last['time'] / last['step']:8.2f} {last['log_lik']:8.4f} "
          f"{math.exp(-last['log_lik']):10.1f}")

fig, ax = plt.subplots(figsize=(6.5, 4))
for name, (model, history) in lm_results.items():
    evals = [h for h in history if "log_lik" in h]
    ax.plot([h["time"] for h in evals], [h["log_lik"] for h in evals], "o-", ms=3, label=name)
ax.set(xlabel="training CPU time (s)", ylabel="test log-likelihood per word",
       title=f"Brown, {n_ctx}-word context, K = {Kw:,}")
ax.legend(fontsize=8)
_tutorial.save(fig, os.path.join(args.out, FIGURES[1]))

# %% [markdown]
# In the same CPU time the exact softmax takes a few hundred steps, A&R and the sampled
# softmax ten thousand or more. In `benchmarks/neural_lm.py` (60 CPU s per method, 4-word
# contexts, E = 64, F = 128) A&R ends at a test log-likelihood of -5.219 nats/word
# (perplexity 185), ahead of the sampled softmax (-5.313, perplexity 203: it is biased and
# levels off) and of the exact softmax's plain PyTorch loop (-5.636, perplexity 280: a
# step costs 21x A&R's), which A&R's curve passes after 4.1 CPU s ([claim neural-lm] in
# `benchmarks/RESULTS.md`).

# %% [markdown]
# ## Where to go from here
#
# * A Bayesian output layer without Monte Carlo: `weights="gaussian"` with
#   `likelihood=GaussianBouchard(negatives=s)` (multiclass) or `JaakkolaJordan()`
#   (binary) — the analytic bounds of seeds/002, compared with NUTS in
#   `benchmarks/bayes_output_layer.py`.
# * A Bayesian output layer at large K with A&R: `BayesianNeuralClassifier(body, F, K,
#   likelihood=AR(negatives=s))` with `default_guide(model)` and `ClosedFormELBO()` -- a mean-field
#   Gaussian over the output rows, each step sampling and updating only the rows of the
#   labels, the negatives and the local guide's classes (per-step cost flat in K:
#   `python -m benchmarks.neural_output_layer --part bayes`).
# * Relaxed samples of a large categorical for any noise:
#   `pyro_ar.distributions.RelaxedUtilityCategorical(psi, noise, temperature)`.

# %% [markdown]
# # A language model with 26,000 classes
#
# Next-word prediction on the Brown corpus is a categorical over the whole vocabulary:
# after the previous word $u$, the next word $y$ is one of $K \approx 26{,}000$ classes.
# This tutorial fits a log-bilinear bigram model
#
# $$\psi_k(u) = e_u \cdot w_k + b_k,\qquad p(y = k \mid u) = \mathrm{softmax}_k(\psi(u)),$$
#
# with learned context embeddings $e_u$ and output embeddings $w_k$, two ways, each for the
# same wall-clock budget:
#
# * **exact softmax** — every step computes all $K$ utilities of every datapoint in the
#   minibatch to get the normaliser $\sum_k e^{\psi_k}$: $O(BKD)$ work and a dense gradient
#   on the $K \times D$ output embedding;
# * **A&R softmax** — the same model written as $y = \arg\max_k(\psi_k + \varepsilon_k)$ with
#   Gumbel noise, augmented with the observed class's noise $\varepsilon_y$, whose log-joint
#   is a sum over classes that SVI subsamples: each step touches the minibatch's labels and
#   $s = 256$ shared negative classes, $O(B D + s D)$ whatever $K$.
#
# Both are the same `BigramLanguageModel` with a different likelihood object
# (`pyro_ar.likelihoods.AR` / `Exact`), trained with stock `pyro.infer.SVI` through
# `pyro_ar.infer.train` (a time budget, evaluations at fixed training times). We compare their exact test log-likelihood (all $K$ classes)
# against training time, then look at what the model learned.
#
# Run it:
#
#     python tutorials/05_language_model.py            # README's main job: ~3 min on 2 CPU cores
#     python tutorials/05_language_model.py --quick    # CI size: < 1 min
#     python tutorials/05_language_model.py --full     # 10 min per method (benchmarks/brown.py is the full study)
#
# The data ships with `pyro_ar` (the Brown corpus, 2.8 MB), so nothing is downloaded.

# %%
import math
import os
import time

import torch

import pyro
import pyro.optim
from pyro.infer import SVI, Trace_ELBO

from pyro_ar.datasets import load_brown
from pyro_ar.infer import train as train_svi
from pyro_ar.likelihoods import AR, Exact
from pyro_ar.models import BigramLanguageModel, unigram_log_probs
from pyro_ar.negatives import ImportanceNegatives
from pyro_ar.optim import lazy_adam

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt

FIGURES = ("05_test_loglik_vs_time.png", "05_next_word_predictions.png")


def options(parser):
    parser.add_argument("--full", action="store_true", help="10 minutes of training per method")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")


args = _tutorial.parse_args("Tutorial 5: a language model with 26,101 classes", options)
if args.quick and args.full:
    raise SystemExit("choose one of --quick (or PYRO_AR_QUICK=1) and --full")

# budget: training seconds per method; D: embedding size; checkpoints: evaluations per method
if args.quick:
    budget, D, checkpoints, num_test = 6.0, 32, 3, 5_000
elif args.full:
    budget, D, checkpoints, num_test = 600.0, 64, 12, None
else:
    budget, D, checkpoints, num_test = 75.0, 64, 6, 20_000
device = torch.device(args.device)
pyro.set_rng_seed(args.seed)
t_start = time.perf_counter()

# %% [markdown]
# ## The data
#
# `load_brown()` builds the bigram pairs (previous word, next word) of the 500 documents,
# split by document (450 train / 50 test). The vocabulary is every lowercased word seen at
# least twice in the training documents, plus `<unk>` and a sentence-boundary token `<s>`.

# %%
data = load_brown(seed=args.seed)
K = len(data.class_names)
vocab = data.class_names
prev, nxt = data.x_train.to(device), data.y_train.to(device)
test_prev, test_next = data.x_test.to(device), data.y_test.to(device)
if num_test is not None:  # a fixed random subset of the test pairs keeps evaluation quick
    g = torch.Generator().manual_seed(args.seed)
    keep = torch.randperm(test_prev.shape[0], generator=g)[:num_test].to(device)
    test_prev, test_next = test_prev[keep], test_next[keep]
counts = data.info["class_counts"].to(device)
print(f"Brown corpus: K = {K:,} classes, {prev.shape[0]:,} training pairs, "
      f"{test_prev.shape[0]:,} test pairs used (of {data.x_test.shape[0]:,})")
unigram_ll = unigram_log_probs(counts)[test_next].mean().item()
print(f"unigram model (no context) test log-likelihood: {unigram_ll:.3f}")

# %% [markdown]
# ## Two likelihoods, one model
#
# A&R needs negative classes. Uniform negatives would mostly be rare words whose utilities
# are far below the label's, so the estimate of $\sum_{k\neq y} e^{\psi_k - \psi_y}$ would be
# noisy; as in word2vec we draw $s = 256$ classes shared by the minibatch from
# $q(k) \propto \mathrm{count}_k^{0.75}$ and weight them by $1/(s\,q(k))$
# (`AR(negatives=ImportanceNegatives(256, proposal))`), which keeps the estimate unbiased. The local guide holds one
# $\eta_n$ per training pair (the Gumbel posterior of $\varepsilon_{n,y_n}$, updated by its
# closed-form natural-gradient step) and `ClosedFormELBO` evaluates the bound's expectation
# analytically. All gradients are sparse and `lazy_adam` updates only the rows a step touched.
#
# The exact softmax is the same model with `likelihood=Exact()`: dense gradients, Pyro's
# `Adam`. Both start from the same initialisation (biases at the log unigram frequencies).

# %%
init_bias = unigram_log_probs(counts).float()


def make(likelihood):
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    if isinstance(likelihood, AR):
        model = BigramLanguageModel(K, D, likelihood=likelihood, subsample_size=512, init_bias=init_bias)
        svi = SVI(model, model.default_guide(), lazy_adam({"lr": 1e-2}), model.default_elbo())
    else:
        model = BigramLanguageModel(K, D, likelihood=likelihood, subsample_size=512,
                                    init_bias=init_bias, sparse=False)
        svi = SVI(model, lambda *a: None, pyro.optim.Adam({"lr": 1e-2}), Trace_ELBO())
    return model, svi


def train(likelihood):
    """Train for ``budget`` seconds; evaluate the exact test log-likelihood at checkpoints
    (evaluation time excluded from the clock)."""
    model, svi = make(likelihood)
    pyro.poutine.block(model)(prev[:2], nxt[:2])  # create the parameters (the step-0 evaluation needs them)
    marks = [budget * (i + 1) / checkpoints for i in range(checkpoints)]
    history = train_svi(svi, prev, nxt, num_steps=10**9, time_budget=budget, eval_times=marks[:-1],
                        eval_every=10**9, eval_fn=lambda: {"test_ll": model.log_likelihood(test_prev, test_next)})
    curve = [(h["time"], h["test_ll"]) for h in history if "test_ll" in h]
    return model, curve, history[-1]["step"]


likelihoods = (("A&R softmax", AR("gumbel", negatives=ImportanceNegatives(256, counts.double() ** 0.75))),
               ("exact softmax", Exact()))
results = {}
for name, likelihood in likelihoods:
    model, curve, steps = train(likelihood)
    results[name] = dict(model=model, curve=curve, steps=steps)
    print(f"{name:14s} {steps:6d} steps in {curve[-1][0]:5.1f} s ({1e3 * curve[-1][0] / steps:7.1f} ms/step): "
          f"test log-lik {curve[-1][1]:.3f}, perplexity {math.exp(-curve[-1][1]):.0f}")

ar_final = results["A&R softmax"]["curve"][-1][1]
exact_final = results["exact softmax"]["curve"][-1][1]
speed = (results["exact softmax"]["curve"][-1][0] / results["exact softmax"]["steps"]) / (
    results["A&R softmax"]["curve"][-1][0] / results["A&R softmax"]["steps"])
print(f"\nA&R steps are {speed:.1f}x cheaper; at equal time A&R is "
      f"{ar_final - exact_final:+.3f} nats/word ahead of exact softmax.")
if args.quick:
    print(f"NOTE: quick size ({budget:.0f} s per method) only checks that everything runs. So few steps are "
          "dominated by start-up costs (the first steps allocate the per-pair and per-class state), so the "
          "step-cost ratio above is not meaningful, and the model has barely moved from its unigram "
          "initialisation. Run without --quick / PYRO_AR_QUICK (75 s per method) for the real comparison: "
          "about 19 ms vs 525 ms per step.")

# %% [markdown]
# ## Test log-likelihood against training time
#
# Each A&R step is cheap, so in the same time it sees far more data than exact softmax; the
# subsampling noise costs little. (The full study, `benchmarks/brown.py`, also runs OVE,
# sampled softmax and A&R probit/logistic for 12 minutes each; see `benchmarks/RESULTS.md`.)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for name, r in results.items():
    t, ll = zip(*r["curve"])
    axes[0].plot(t, ll, marker="o", label=f"{name} ({r['steps']:,} steps)")
    axes[1].plot(t, [math.exp(-v) for v in ll], marker="o", label=name)
axes[0].axhline(unigram_ll, color="gray", ls=":", label="unigram (no context)")
axes[0].set(xlabel="training time (s)", ylabel="test log-likelihood per word (exact)",
            title=f"Brown next-word prediction, K = {K:,}")
axes[1].set(xlabel="training time (s)", ylabel="test perplexity", yscale="log", title="perplexity")
axes[0].legend()
axes[1].legend()
_tutorial.save(fig, os.path.join(args.out, FIGURES[0]))

# %% [markdown]
# ## What the model learned
#
# The fitted model predicts the next word: the five most probable words after a few
# contexts (exact softmax over all $K$ classes of the A&R-trained model). After a minute of
# training it already knows that "united" is followed by "states" and "would" by "be".

# %%
model = results["A&R softmax"]["model"]
contexts = [w for w in ("<s>", "the", "of", "he", "would", "united") if w in vocab]
index = {w: i for i, w in enumerate(vocab)}
ids = torch.tensor([index[w] for w in contexts], device=device)
with torch.no_grad():
    probs = model.utility(ids).full().softmax(-1)
    top_p, top_k = probs.topk(5, dim=-1)
fig, axes = plt.subplots(1, len(contexts), figsize=(2.3 * len(contexts), 3.2))
for ax, w, p, k in zip(axes, contexts, top_p.cpu(), top_k.cpu()):
    ax.barh(range(5)[::-1], p.numpy())
    ax.set_yticks(range(5)[::-1], [vocab[i] for i in k.tolist()])
    ax.set_title(f"after '{w}'")
    ax.set_xlabel("p(next word)")
    print(f"after {w!r:10s}: " + ", ".join(f"{vocab[i]} {q:.2f}" for i, q in zip(k.tolist(), p.tolist())))
fig.suptitle("Top-5 next words (A&R-trained model)" + (
    f" -- quick size: {results['A&R softmax']['steps']} steps, still close to the unigram ranking"
    if args.quick else ""))
if args.quick:
    print("(quick size: after so few steps the predictions are nearly the unigram ranking for every context)")
_tutorial.save(fig, os.path.join(args.out, FIGURES[1]))

print(f"\nfigures in {os.path.abspath(args.out)}; total time {time.perf_counter() - t_start:.0f} s")

# %% [markdown]
# # A language model with 26,000 classes
#
# Next-word prediction on the Brown corpus is a categorical over the whole vocabulary:
# after the previous word $u$, the next word $y$ is one of $K \approx 26{,}000$ classes.
# This tutorial fits a log-bilinear bigram model
#
# $$\psi_k(u) = e_u \cdot w_k + b_k,\qquad p(y = k \mid u) = \mathrm{softmax}_k(\psi(u)),$$
#
# with learned context embeddings $e_u$ and output embeddings $w_k$, two ways, each with
# early stopping on a held-out validation split and the same cap on training CPU time:
#
# * **exact softmax** — every step computes all $K$ utilities of every datapoint in the
#   minibatch to get the normaliser $\sum_k e^{\psi_k}$: $O(BKD)$ work and a dense gradient
#   on the $K \times D$ output embedding. The library's exact path is measured against the
#   loop a user writes in plain PyTorch (`F.cross_entropy` + `torch.optim.Adam`,
#   `benchmarks/plain_loop.py`): its step is no slower (0.75x the plain loop's CPU time,
#   paired in one process; [claim plain-loop] in `benchmarks/RESULTS.md`), so it is a fair
#   baseline;
# * **A&R softmax** — the same model written as $y = \arg\max_k(\psi_k + \varepsilon_k)$ with
#   Gumbel noise, augmented with the observed class's noise $\varepsilon_y$, whose log-joint
#   is a sum over classes that SVI subsamples: each step touches the minibatch's labels and
#   $s = 256$ shared negative classes, $O(B D + s D)$ whatever $K$.
#
# Both are the same `BigramLanguageModel` with a different likelihood object
# (`pyro_ar.likelihoods.AR` / `Exact`), trained with stock `pyro.infer.SVI` through
# `pyro_ar.infer.train`, the library's one training loop: evaluations at fixed training
# times, `EarlyStopping` on the validation log-likelihood (the parameters of the best
# evaluation are restored), a cap on the training CPU time. What is measured: CPU time of
# the training steps (`time.process_time`, one torch thread, evaluation excluded), exact
# log-likelihoods over all $K$ classes. We report each method's best validation point, its
# test log-likelihood there, and the CPU time to reach it, then look at what the model
# learned.
#
# Run it:
#
#     python tutorials/05_language_model.py            # README's main job: about 190 CPU s, one thread
#     python tutorials/05_language_model.py --quick    # CI size: a few seconds of training
#     python tutorials/05_language_model.py --full     # up to 10 CPU minutes per method (benchmarks/brown.py is the full study)
#
# The data ships with `pyro_ar` (the Brown corpus, 2.9 MB), so nothing is downloaded. Besides
# its figures the run writes its numbers to `05_language_model.json` in the same folder
# (`--out`): the README's main-job paragraph is read from such a file.

# %%
import math
import os
import time

import torch

import pyro
import pyro.optim
from pyro.infer import SVI, Trace_ELBO

from pyro_ar.datasets import load_brown
from pyro_ar import AR, EarlyStopping, Exact, default_elbo, default_guide, lazy_adam, train as train_svi
from pyro_ar.models import BigramLanguageModel, unigram_log_probs
from pyro_ar.negatives import ImportanceNegatives

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt
from pyro_ar.models import Init

FIGURES = ("05_test_loglik_vs_time.png", "05_next_word_predictions.png")
RESULTS = "05_language_model.json"  # the run's numbers, beside the figures


def options(parser):
    parser.add_argument("--full", action="store_true", help="up to 10 CPU minutes of training per method")
    parser.add_argument("--device", default="cpu", help="torch device, e.g. cuda")


args = _tutorial.parse_args("Tutorial 5: a language model with 26,101 classes", options)
if args.quick and args.full:
    raise SystemExit("choose one of --quick (or PYRO_AR_QUICK=1) and --full")

# budget: cap on the training CPU seconds per method; D: embedding size; checkpoints:
# evaluations per budget; patience: evaluations without progress before early stopping
if args.quick:
    budget, D, checkpoints, num_eval = 3.0, 32, 3, 2_000
elif args.full:
    budget, D, checkpoints, num_eval = 600.0, 64, 30, None
else:
    budget, D, checkpoints, num_eval = 70.0, 64, 10, 10_000
patience = 3
torch.set_num_threads(1)  # CPU time of one thread: the clock of every speed claim below
device = torch.device(args.device)
pyro.set_rng_seed(args.seed)
t_start = time.perf_counter()
run_environment = _tutorial.environment()  # the command, the commit and the load at the start

# %% [markdown]
# ## The data
#
# `load_brown()` builds the bigram pairs (previous word, next word) of the 500 documents,
# split by document: 425 training, 25 validation (held out of the 450 training documents,
# `num_valid_docs=25`, for early stopping) and 50 test documents. The vocabulary is every
# lowercased word seen at least twice in the training documents, plus `<unk>` and a
# sentence-boundary token `<s>`.

# %%
data = load_brown(seed=args.seed, num_valid_docs=25)
K = len(data.class_names)
vocab = data.class_names
prev, nxt = data.x_train.to(device), data.y_train.to(device)


def subset(x, y, n, seed):
    """A fixed random subset of n pairs (all if n is None): keeps evaluation quick."""
    if n is None or n >= x.shape[0]:
        return x.to(device), y.to(device)
    keep = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:n]
    return x[keep].to(device), y[keep].to(device)


valid_prev, valid_next = subset(data.info["x_valid"], data.info["y_valid"], num_eval, args.seed)
test_prev, test_next = subset(data.x_test, data.y_test, num_eval, args.seed + 1)
counts = data.info["class_counts"].to(device)
print(f"Brown corpus: K = {K:,} classes, {prev.shape[0]:,} training pairs, "
      f"{valid_prev.shape[0]:,} validation and {test_prev.shape[0]:,} test pairs used "
      f"(of {data.info['x_valid'].shape[0]:,} and {data.x_test.shape[0]:,})")
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
# `Adam` (its step is as cheap as the plain PyTorch loop's, see above). Both start from the
# same initialisation (biases at the log unigram frequencies); step sizes: lazy Adam 0.01
# for A&R, Adam 0.003 for exact (the plain loop's step size in `benchmarks/brown.py`).
# While a model trains, `train(..., progress={"style": "lines"})` prints a line at each
# evaluation: the step, the training CPU seconds, the mean loss since the previous line and
# the validation and test log-likelihood per word.

# %%
init_bias = unigram_log_probs(counts).float()


def make(likelihood):
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    if isinstance(likelihood, AR):
        model = BigramLanguageModel(K, D, likelihood=likelihood, subsample_size=512, init=Init(bias=init_bias))
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 1e-2}), default_elbo())
    else:
        model = BigramLanguageModel(K, D, likelihood=likelihood, subsample_size=512, init=Init(bias=init_bias))
        svi = SVI(model, default_guide(model), pyro.optim.Adam({"lr": 3e-3}), Trace_ELBO())
    return model, svi


def train(name, likelihood):
    """Train until the validation log-likelihood stops improving (``patience`` evaluations)
    or ``budget`` CPU seconds; restore the best evaluation's parameters. Prints a line per
    evaluation: step, training CPU seconds, mean loss since the last line, validation and
    test log-likelihood per word."""
    model, svi = make(likelihood)
    pyro.poutine.block(model)(prev[:2], nxt[:2])  # create the parameters (the step-0 evaluation needs them)
    marks = [budget * (i + 1) / checkpoints for i in range(checkpoints)]
    stop = EarlyStopping("valid_ll", patience=patience)
    history = train_svi(svi, prev, nxt, num_steps=10**9, time_budget=budget, clock="process",
                        eval_times=marks[:-1], eval_every=10**9, early_stopping=stop,
                        progress={"style": "lines", "desc": f"  {name}"},  # a line per evaluation
                        eval_fn=lambda: {"valid_ll": model.log_likelihood(valid_prev, valid_next),
                                         "test_ll": model.log_likelihood(test_prev, test_next)})
    curve = [(h["time"], h["valid_ll"], h["test_ll"]) for h in history if "test_ll" in h]
    best = next(h for h in history if h["step"] == stop.best_step)
    return dict(model=model, curve=curve, steps=history[-1]["step"], time=history[-1]["time"],
                best=best, stopped=stop.stopped)


def time_to_reach(curve, target):
    """First CPU time at which the test log-likelihood reaches ``target`` (linear
    interpolation between evaluations), or None."""
    for (t0, _, l0), (t1, _, l1) in zip(curve, curve[1:]):
        if l1 >= target:
            return t1 if l0 >= target or l1 == l0 else t0 + (target - l0) * (t1 - t0) / (l1 - l0)
    return None


likelihoods = (("A&R softmax", AR("gumbel", negatives=ImportanceNegatives(256, counts.double() ** 0.75))),
               ("exact softmax", Exact()))
results = {}
for name, likelihood in likelihoods:
    print(f"training with {name} (up to {budget:.0f} CPU s):")
    r = results[name] = train(name, likelihood)
    b = r["best"]
    print(f"{name:14s} {r['steps']:6d} steps, {1e3 * r['time'] / r['steps']:6.1f} ms CPU/step, "
          f"{'early-stopped' if r['stopped'] else 'CPU cap reached'} at {r['time']:5.1f} s; best validation "
          f"at {b['time']:5.1f} s (step {b['step']}): test log-lik {b['test_ll']:.3f}, perplexity "
          f"{math.exp(-b['test_ll']):.0f}")

ar, ex = results["A&R softmax"], results["exact softmax"]
speed = (ex["time"] / ex["steps"]) / (ar["time"] / ar["steps"])
t_ar = time_to_reach(ar["curve"], ex["best"]["test_ll"])
print(f"\nA&R steps cost {1 / speed:.3f}x the exact softmax's ({speed:.1f}x cheaper; CPU time, one thread). "
      f"At their best validation points A&R is {ar['best']['test_ll'] - ex['best']['test_ll']:+.3f} nats/word "
      "ahead on the test pairs; " + (
          f"A&R reached exact softmax's best test log-likelihood after {t_ar:.1f} CPU s, "
          f"{ex['best']['time'] / t_ar:.0f}x sooner than exact softmax ({ex['best']['time']:.1f} s)."
          if t_ar else "A&R did not reach exact softmax's best test log-likelihood."))
if args.quick:
    print(f"NOTE: quick size ({budget:.0f} CPU s per method) only checks that everything runs. So few steps "
          "are dominated by start-up costs (the first steps allocate the per-pair and per-class state), so "
          "the ratios above are not meaningful, and the model has barely moved from its unigram "
          "initialisation. Run without --quick / PYRO_AR_QUICK for the real comparison.")

# %% [markdown]
# ## Test log-likelihood against training time
#
# Each A&R step is cheap, so in the same CPU time it sees far more data than exact softmax;
# the subsampling noise costs little. The stars mark the best validation evaluations,
# whose parameters early stopping keeps. (`benchmarks/time_to_quality.py` is the full study
# on two corpora against exact, sampled softmax and OVE; see `benchmarks/RESULTS.md`.)

# %%
fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for name, r in results.items():
    t, vll, ll = zip(*r["curve"])
    line, = axes[0].plot(t, ll, marker="o", label=f"{name} ({r['steps']:,} steps)")
    axes[0].plot([r["best"]["time"]], [r["best"]["test_ll"]], marker="*", ms=14, color=line.get_color())
    axes[1].plot(t, vll, marker="o", label=name)
axes[0].axhline(unigram_ll, color="gray", ls=":", label="unigram (no context)")
axes[0].set(xlabel="training CPU time (s, one thread)", ylabel="test log-likelihood per word (exact)",
            title=f"Brown next-word prediction, K = {K:,}")
axes[1].set(xlabel="training CPU time (s, one thread)", ylabel="validation log-likelihood per word",
            title="early stopping monitors this")
axes[0].legend()
axes[1].legend()
_tutorial.save(fig, os.path.join(args.out, FIGURES[0]))

# %% [markdown]
# ## What the model learned
#
# The fitted model predicts the next word: the five most probable words after a few
# contexts (exact softmax over all $K$ classes of the A&R-trained model, at its best
# validation point). After a minute of training it already knows that "united" is followed by "states" and "would" by "be".

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

wall, cpu = time.perf_counter() - t_start, time.process_time()
_tutorial.save_results(os.path.join(args.out, RESULTS), {
    "size": "quick" if args.quick else "full" if args.full else "default", "budget_cpu_s": budget,
    "K": K, "methods": [{"method": name, "steps": r["steps"], "train_cpu_s": r["time"],
                         "ms_per_step": 1e3 * r["time"] / r["steps"], "early_stopped": r["stopped"],
                         "best_step": r["best"]["step"], "best_cpu_s": r["best"]["time"],
                         "best_test_ll": r["best"]["test_ll"], "test_perplexity": math.exp(-r["best"]["test_ll"]),
                         "curve": r["curve"]} for name, r in results.items()],
    "step_cost_ratio": speed, "ar_passes_exact_best_cpu_s": t_ar, "unigram_test_ll": unigram_ll,
    "total_wall_s": wall, "total_cpu_s": cpu}, run_environment)
print(f"\nfigures in {os.path.abspath(args.out)}; total time {wall:.0f} s ({cpu:.0f} CPU s)")

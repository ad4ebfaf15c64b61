# %% [markdown]
# # A vocabulary of 100,000 words
#
# Tutorial 05 fits a next-word model over Brown's 25,000 words, where the exact softmax is
# slow but affordable. Here the vocabulary is four times larger: the text of GCIDE, the GNU
# Collaborative International Dictionary of English (Webster's 1913 dictionary with later
# additions; 4,669,402 words of definitions, etymologies and quotations), whose words seen
# twice in training make $K = 95{,}659$ classes. At that size one exact-softmax step of a
# bigram model costs about half a CPU second; A&R's step costs what it cost at $K = 1{,}000$.
#
# The model is tutorial 05's log-bilinear bigram, $\psi_k(u) = e_u\cdot w_k + b_k$, trained
# three ways on the same CPU clock:
#
# * **A&R softmax** (`AR(negatives=ImportanceNegatives(256, q))` through stock `pyro.infer.SVI`):
#   each step touches the minibatch's words and 256 shared negative classes;
# * **adaptive softmax** (Grave et al. 2017, PyTorch's `nn.AdaptiveLogSoftmaxWithLoss`): the
#   tool PyTorch users pick for large vocabularies -- a softmax over the frequent words and a
#   few clusters, the rare words in smaller tail softmaxes;
# * **exact softmax** (`Exact()`): all $K$ utilities of every datapoint at every step.
#
# We measure the step cost against $K$ (the same corpus with its vocabulary cut to the most
# frequent words), train the three for the same CPU time, and sample from the A&R model.
#
# The corpus is Debian's `dict-gcide` package (GPL, 40 MB, not shipped with `pyro_ar`):
#
#     apt-get download dict-gcide && dpkg-deb -x dict-gcide_*.deb gcide
#     PYRO_AR_DATA=$PWD python tutorials/09_large_vocabulary.py     # reads ./gcide; ~8 min on a laptop
#     python tutorials/09_large_vocabulary.py --quick                 # CI size, about a minute
#
# Without it the tutorial says so and runs on Brown (shipped, $K = 25{,}275$) instead. The
# measured study with every method, a step-size grid and paired standard errors is
# `python -m benchmarks.time_to_quality --corpora gcide` ([claim gcide-time-to-quality] in
# `benchmarks/RESULTS.md`).

# %%
import os
import time

import torch

import pyro
import pyro.optim
from pyro.infer import SVI, Trace_ELBO

from pyro_ar import evaluation
from pyro_ar.datasets import load_brown, load_gcide_corpus
from pyro_ar import AR, EarlyStopping, Exact, default_elbo, default_guide, lazy_adam, train
from pyro_ar.models import BigramLanguageModel, unigram_log_probs
from pyro_ar.negatives import ImportanceNegatives

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt
from pyro_ar.models import Init

FIGURES = ("09_step_cost_vs_k.png", "09_test_loglik_vs_time.png")


def options(parser):
    parser.add_argument("--full", action="store_true", help="5 CPU minutes of training per method")


args = _tutorial.parse_args("Tutorial 9: a vocabulary of 100,000 words", options)
# budget: training CPU seconds per method; timed: steps timed per vocabulary size (A&R, exact)
if args.quick:
    budget, D, num_eval, timed = 4.0, 32, 1_000, (10, 2)
elif args.full:
    budget, D, num_eval, timed = 300.0, 64, 10_000, (200, 10)
else:
    budget, D, num_eval, timed = 60.0, 64, 5_000, (100, 5)
torch.set_num_threads(1)  # CPU time of one thread: the clock of every number below
t_start = time.perf_counter()

# %% [markdown]
# ## The corpus
#
# `load_gcide_corpus()` reads the dictionary's articles in alphabetical order, strips its
# markup (the headwords' spelling and pronunciation, source tags such as `[1913 Webster]`,
# accent codes), takes each paragraph as a sentence of lowercase words
# (`[a-z]+('[a-z]+)?`) and splits the text in order: 90 % of the words for training, 5 % for
# validation, the last 5 % (*Ulula* to *Z*) for test. The vocabulary is `<unk>`, the
# sentence boundary `<s>` and the words seen at least twice in training, by decreasing count.

# %%
loaded = _tutorial.load_external(lambda: load_gcide_corpus(), "GCIDE (Debian's dict-gcide)",
                                 "using the Brown corpus (shipped with pyro_ar) instead", optional=True)
if loaded is not None:
    data, corpus = loaded[0], "GCIDE"
else:
    data, corpus = load_brown(num_valid_docs=25), "Brown"
K, words = data.num_classes, data.class_names
counts = data.info["class_counts"]


def subset(x, y, n, seed):
    """A fixed random subset of n pairs: keeps the exact evaluation (all K classes) quick."""
    keep = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:n]
    return x[keep], y[keep]


valid = subset(data.info["x_valid"], data.info["y_valid"], num_eval, 1)
test = subset(data.x_test, data.y_test, num_eval, 2)
unigram_ll = unigram_log_probs(counts)[data.y_test].mean().item()
print(f"{corpus}: K = {K:,} classes, {data.num_train:,} training pairs; {num_eval:,} validation and "
      f"{num_eval:,} test pairs per evaluation; unigram test log-likelihood {unigram_ll:.3f}")

# %% [markdown]
# ## The step cost against K
#
# The same corpus with its vocabulary cut to the $K'$ most frequent words (the others become
# `<unk>`; the class ids are ordered by frequency, so this is `where(id < K', id, 0)`).
# For each $K'$ we build both models and time their SVI steps on the CPU clock. A&R's step
# touches $B + s$ output rows whatever $K'$; the exact step multiplies the minibatch by all
# $K'$ output embeddings and updates them all.

# %%
def cut(ids, k):
    return torch.where(ids < k, ids, torch.zeros_like(ids))


def bigram(likelihood, k, cnt, lr):
    """The bigram model over k classes and its SVI (lazy Adam for A&R, Adam for exact)."""
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    model = BigramLanguageModel(k, D, likelihood=likelihood, subsample_size=512,
                                init=Init(bias=unigram_log_probs(cnt).float()))
    if isinstance(likelihood, AR):
        return model, SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    return model, SVI(model, default_guide(model), pyro.optim.Adam({"lr": lr}), Trace_ELBO())


def ar_likelihood(cnt):
    # 256 negatives shared by the minibatch, drawn from q(k) ~ (count + 1)^(3/4), weighted 1 / (s q)
    return AR("gumbel", negatives=ImportanceNegatives(256, (cnt.double() + 1) ** 0.75))


def step_ms(svi, x, y, n):
    for _ in range(2):  # untimed: first-step allocations
        svi.step(x, y)
    t = time.process_time()
    for _ in range(n):
        svi.step(x, y)
    return 1e3 * (time.process_time() - t) / n


sizes = sorted({k for k in (1_000, 10_000, K) if k <= K})
cost = {"A&R softmax": [], "exact softmax": []}
for k in sizes:
    x, y = cut(data.x_train, k), cut(data.y_train, k)
    cnt = torch.bincount(y, minlength=k)
    cost["A&R softmax"].append(step_ms(bigram(ar_likelihood(cnt), k, cnt, 1e-2)[1], x, y, timed[0]))
    cost["exact softmax"].append(step_ms(bigram(Exact(), k, cnt, 3e-3)[1], x, y, timed[1]))
    print(f"K' = {k:6,}: A&R {cost['A&R softmax'][-1]:7.2f} ms/step, exact {cost['exact softmax'][-1]:8.1f} ms/step")
print(f"A&R's step at K = {sizes[-1]:,} costs {cost['A&R softmax'][-1] / cost['A&R softmax'][0]:.2f}x its "
      f"step at K = {sizes[0]:,}; exact's {cost['exact softmax'][-1] / cost['exact softmax'][0]:.0f}x")

fig, ax = plt.subplots(figsize=(5.5, 3.8))
for name, ms in cost.items():
    ax.plot(sizes, ms, "o-", label=name)
ax.set(xscale="log", yscale="log", xlabel="vocabulary size K'", ylabel="CPU ms per SVI step (B = 512)",
       title=f"{corpus}: step cost against K")
ax.legend()
_tutorial.save(fig, os.path.join(args.out, FIGURES[0]))

# %% [markdown]
# ## Three output layers, the same CPU time
#
# Each method trains with `pyro_ar.infer.train` for `budget` CPU seconds, evaluated at fixed
# training times on the validation and test pairs (exact log-likelihoods over all $K$ words;
# the evaluation is not counted), with early stopping on validation. The adaptive softmax is
# written as a PyTorch user writes it: the same context embedding, cutoffs at the words
# covering 80 % and 95 % of the training text, `SparseAdam` for the embedding rows and `Adam`
# for the rest; its head biases start at the unigram frequencies, as the other two
# models' output biases do. All three take Adam steps of size `lr=1e-2` (lazy Adam for A&R):
# the step size that each of the three picks on validation from 0.003, 0.01 and 0.03 at 30
# CPU s in `benchmarks/time_to_quality.py --corpora gcide` ([claim gcide-time-to-quality] in
# `benchmarks/RESULTS.md`).

# %%
class AdaptiveBigram:
    """psi = adaptive softmax of e_u (PyTorch's AdaptiveLogSoftmaxWithLoss); classes by frequency."""

    def __init__(self, lr):
        torch.manual_seed(args.seed)
        order = counts.argsort(descending=True, stable=True)  # frequency rank -> class id
        p = (counts.double() + 0.5)[order] / (counts.sum() + 0.5 * K)
        cutoffs = [int((p.cumsum(0) < q).sum()) + 1 for q in (0.8, 0.95)]
        self.rank = torch.empty(K, dtype=torch.long)
        self.rank[order] = torch.arange(K)
        self.E = torch.nn.Embedding(K, D, sparse=True)
        torch.nn.init.normal_(self.E.weight, std=0.1)
        self.asm = torch.nn.AdaptiveLogSoftmaxWithLoss(D, K, cutoffs, div_value=4.0, head_bias=True)
        with torch.no_grad():  # start at the unigram distribution, as the other two: head words and clusters
            edges = [0] + cutoffs + [K]
            head = torch.cat([p[:cutoffs[0]], torch.stack([p[a:b].sum() for a, b in zip(edges[1:], edges[2:])])])
            self.asm.head.bias.copy_(head.log().float())
        self.opts = [torch.optim.SparseAdam(self.E.parameters(), lr=lr), torch.optim.Adam(self.asm.parameters(), lr=lr)]

    def step(self, x, y):
        i = torch.randint(0, x.shape[0], (512,))
        loss = self.asm(self.E(x[i]), self.rank[y[i]]).loss
        for opt in self.opts:
            opt.zero_grad()
        loss.backward()
        for opt in self.opts:
            opt.step()
        return loss.item()

    @torch.no_grad()
    def log_likelihood(self, x, y):  # all K classes, the distribution once per distinct previous word
        return evaluation.log_likelihood(lambda rows: self.asm.log_prob(self.E.weight[rows])[:, self.rank],
                                         y, rows=x, chunk_size=256)


def fit(name):
    if name == "adaptive softmax":
        pyro.clear_param_store()
        model = stepper = AdaptiveBigram(1e-2)
    else:
        model, stepper = bigram(ar_likelihood(counts) if name == "A&R softmax" else Exact(), K, counts, 1e-2)
        pyro.poutine.block(model)(data.x_train[:2], data.y_train[:2])  # create the parameters for step 0
    stop = EarlyStopping("valid_ll", patience=3, restore_best=name != "adaptive softmax")
    marks = [t for t in (1, 3, 10, 30, 100, 200) if t < budget] + [budget]
    history = train(stepper, data.x_train, data.y_train, num_steps=10**9, time_budget=budget, clock="process",
                    eval_times=marks, eval_every=10**9, early_stopping=stop,
                    progress={"style": "lines", "desc": f"  {name}"},
                    eval_fn=lambda: {"valid_ll": model.log_likelihood(*valid), "test_ll": model.log_likelihood(*test)})
    curve = [(h["time"], h["test_ll"], h["valid_ll"]) for h in history if "test_ll" in h]
    best = max(curve, key=lambda c: c[2])
    print(f"{name:17s} {history[-1]['step']:7,} steps, {1e3 * history[-1]['time'] / history[-1]['step']:7.1f} "
          f"ms/step; best validation at {best[0]:5.1f} CPU s: test log-lik {best[1]:.4f}")
    return dict(model=model, curve=curve, best=best, steps=history[-1]["step"])


results = {name: fit(name) for name in ("A&R softmax", "adaptive softmax", "exact softmax")}

# %% [markdown]
# The curves: at this size A&R takes thousands of steps in the time exact softmax takes a
# few hundred; adaptive softmax's steps cost several A&R steps (its head softmax spans the
# thousands of words that make up 80 % of the text).

# %%
fig, ax = plt.subplots(figsize=(6.5, 4))
for name, r in results.items():
    t, ll, _ = zip(*r["curve"])
    line, = ax.plot([max(v, 0.3) for v in t], ll, "o-", ms=3, label=f"{name} ({r['steps']:,} steps)")
    ax.plot([max(r["best"][0], 0.3)], [r["best"][1]], "*", ms=12, color=line.get_color())
ax.axhline(unigram_ll, color="gray", ls=":", label="unigram (no context)")
ax.set(xscale="log", xlabel="training CPU time (s, one thread)", ylabel="test log-likelihood per word",
       title=f"{corpus}, K = {K:,}: stars at the best validation points")
ax.legend(fontsize=8)
_tutorial.save(fig, os.path.join(args.out, FIGURES[1]))
ar, ex = results["A&R softmax"], results["exact softmax"]
reach = next((t for t, ll, _ in ar["curve"] if ll >= ex["best"][1]), None)
print(f"A&R - adaptive at their best validation points: {ar['best'][1] - results['adaptive softmax']['best'][1]:+.4f} "
      f"nats; A&R - exact: {ar['best'][1] - ex['best'][1]:+.4f}" + (
          f"; A&R was past exact's best ({ex['best'][1]:.4f} at {ex['best'][0]:.0f} s) by its evaluation at "
          f"{reach:.1f} CPU s" if reach is not None else ""))
if args.quick:
    print("NOTE: quick size: a few CPU seconds per method only checks that everything runs; the numbers "
          "are not a comparison. Run without --quick for one.")

# %% [markdown]
# ## What the model says
#
# The A&R-trained model (at its best validation point) as a predictor: the most probable
# words after a few contexts, and sentences sampled word by word from $p(w_t \mid w_{t-1})$
# starting at the boundary `<s>` (a bigram model: local sense, no global one).

# %%
model = ar["model"]
index = {w: i for i, w in enumerate(words)}
with torch.no_grad():
    for w in [w for w in ("<s>", "the", "of", "a", "water", "to") if w in index]:
        p, k = model.utility(torch.tensor([index[w]])).full().softmax(-1)[0].topk(5)
        print(f"after {w!r:8s}: " + ", ".join(f"{words[i]} {q:.3f}" for i, q in zip(k.tolist(), p.tolist())))
    g = torch.Generator().manual_seed(args.seed)
    for _ in range(4):
        sentence, prev = [], index["<s>"]
        while len(sentence) < 20:
            prev = int(torch.multinomial(model.utility(torch.tensor([prev])).full().softmax(-1)[0], 1, generator=g))
            if prev == index["<s>"]:
                break
            sentence.append(words[prev])
        print("  sampled: " + " ".join(sentence))
print(f"\ntotal time {time.perf_counter() - t_start:.0f} s")

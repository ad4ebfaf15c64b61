# %% [markdown]
# # A categorical latent Gaussian process
#
# Multivariate categorical data -- a patient's test results, a window of words -- are
# vectors $y_n = (y_{n1}, \dots, y_{nD})$ of categorical variables, variable $d$ over $K_d$
# categories. The categorical latent Gaussian process (CLGP) of Gal, Chen & Ghahramani
# (2015; seeds/003) embeds each datapoint in a continuous latent space and maps the latent
# point to every variable's categories through Gaussian processes:
#
# $$x_n \sim N(0, I_Q), \qquad f_{d,k} \sim \mathcal{GP}(b_{d,k}, k_\mathrm{RBF}), \qquad
#   y_{nd} \sim \mathrm{softmax}_k\big(f_{d,k}(x_n)\big).$$
#
# Each GP is sparse: M inducing points $Z$, shared by all $\sum_d K_d$ functions, carry
# variational inducing outputs $q(u_{d,k})$. Its linear counterpart, the latent Gaussian
# model (LGM), has $f_{d,k}(x) = w_{d,k}\cdot x + b_{d,k}$.
#
# `pyro_ar.models.CategoricalLatentGP` is this model as a subclass of the session model's
# `CategoricalLatentModel`: the same amortised $q(x_n)$ (an encoder of the datapoint's
# observed entries), the same guide, the same likelihood objects and the one training loop.
# With A&R, a step touches only the observed and a few negative categories of every
# variable -- the rows of $q(u)$ are gathered lazily -- so $K_d$ can be in the hundreds of
# thousands. The test is the paper's: hide one variable of every test datapoint, infer
# $q(x_n)$ from the others, and score the hidden value (perplexity
# $= \exp(-\text{mean log-likelihood})$).
#
#     python tutorials/08_latent_gp.py            # ~1 min
#     python tutorials/08_latent_gp.py --quick    # CI size: a few seconds

# %%
import time

import torch

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import load_breast_cancer_wisconsin
from pyro_ar import AR, Exact, SharedNegatives, default_elbo, default_guide, lazy_adam, train
from pyro_ar.infer import LatentKLWarmup
from pyro_ar.models import CategoricalLatentGP, Init, SessionEncoder, SparseGPMap
from pyro_ar.models.latent_gp import frequency_log_predictive, marginal_log_probs

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt

FIGURES = ("08_training_curves.png", "08_latent_space.png")

args = _tutorial.parse_args("Tutorial 8: the categorical latent Gaussian process")
steps = 150 if args.quick else 1500
torch.set_num_threads(1)
pyro.set_rng_seed(args.seed)

# %% [markdown]
# ## The data
#
# The paper's own small medical set (its table 2): the Wisconsin breast cancer data, 683
# biopsies with 9 cytological attributes scored 1-10 (10 categories each) and the diagnosis
# (2 categories), shipped with pyro_ar. Three quarters of the patients train the model;
# every test patient has one random variable hidden. Missing entries are $-1$.

# %%
data = load_breast_cancer_wisconsin(seed=args.seed)
print("train", tuple(data.train.shape), "| test", tuple(data.test_observed.shape),
      "| categories per variable", sorted(set(data.cardinalities)))
print("a test patient:", data.test_observed[0].tolist())
print("its hidden entry:", {data.variable_names[d]: int(data.test_target[0, d])
                            for d in (data.test_target[0] >= 0).nonzero().flatten().tolist()})

# %% [markdown]
# ## Three models, one loop
#
# The CLGP with A&R softmax (5 shared negative categories per variable; the 2-category
# diagnosis gets the exact class sum), the CLGP with the exact softmax, and the linear LGM
# with A&R. The per-category means $b_{d,k}$ start at the training log-frequencies.
# `default_guide(model)` samples $x_n$ from the encoder's Gaussian and gives each observed
# entry's noise its closed-form optimum; with 10 categories its sum runs over all of them
# (a site of at most 64 classes gets the exact sum in the guide), while the model's bound still
# subsamples 5.
#
# A CLGP starts with nearly flat utilities, so at first the latent explains nothing, and the
# KL term of $q(x_n)$ can pull the posterior onto the prior for good (posterior collapse).
# `LatentKLWarmup` scales that KL term by $\beta$, rising from 0 to 1 over the first steps
# (KL annealing). From then on the loss is the ELBO again.

# %%
bias = marginal_log_probs(data.train, data.cardinalities).float()
configs = {
    "CLGP, A&R": dict(utility="gp", likelihood=AR(negatives=SharedNegatives(5))),
    "CLGP, exact softmax": dict(utility="gp", likelihood=Exact()),
    "LGM (linear), A&R": dict(utility="linear", likelihood=AR(negatives=SharedNegatives(5))),
}
models, curves, results = {}, {}, {}
for name, cfg in configs.items():
    pyro.clear_param_store()
    model = CategoricalLatentGP(data.cardinalities, 2, cfg["likelihood"],
                                utility=SparseGPMap(2, 16) if cfg["utility"] == "gp" else cfg["utility"],
                                posterior=SessionEncoder(sum(data.cardinalities), 2, hidden_dim=32),
                                subsample_size=64, init=Init(bias=bias))
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    warmup = LatentKLWarmup(model, steps // 3) if cfg["utility"] == "gp" else None
    t = time.process_time()
    history = train(svi, data.train, num_steps=steps, eval_at_start=False, log_every=max(steps // 30, 1),
                    scheduler=warmup)
    curves[name] = [(h["step"], h["loss"]) for h in history if h.get("loss") is not None]
    results[name] = model.evaluate_imputation(data.test_observed, data.test_target, num_samples=16)
    models[name] = (model, pyro.get_param_store().get_state())
    print(f"{name:<22} test perplexity {results[name]['perplexity']:6.2f}  "
          f"({time.process_time() - t:.1f} CPU s)")
freq = frequency_log_predictive(data.train, data.test_target, data.cardinalities).mean()
print(f"{'frequency baseline':<22} test perplexity {float(freq.neg().exp()):6.2f}")

# %% [markdown]
# On a single split the three models are close; all three are far below the frequency
# baseline. One split cannot rank them: `python -m benchmarks.latent_gp --part small` fits
# them on 10 random splits at 4,000 steps and prints the differences of the test
# log-likelihood per entry (CLGP against the linear model, A&R against the exact softmax),
# paired by split, with their standard errors.

# %%
_tutorial.plot_training_curves(curves, f"{args.out}/08_training_curves.png")

# %% [markdown]
# ## The latent space
#
# The encoder's posterior means of the training patients in the CLGP's 2-D latent space,
# coloured by the diagnosis (which the model sees as just another variable). The kernel's
# lengthscales are learned per dimension (ARD); a dimension the data do not need gets a long
# lengthscale, and its posterior means stay near 0:

# %%
model, state = models["CLGP, A&R"]
pyro.get_param_store().set_state(state)
with torch.no_grad():
    loc, _, _ = model.posterior(torch.arange(len(data.train)), model.global_rows(data.train))
fig, ax = plt.subplots(figsize=(4.5, 4))
for value, label in enumerate(data.category_names[-1]):
    sel = data.train[:, -1] == value
    ax.scatter(loc[sel, 0], loc[sel, 1], s=8, label=label)
ax.set(xlabel="$x_1$", ylabel="$x_2$", title="q(x) means (CLGP, A&R)")
ax.legend()
_tutorial.save(fig, f"{args.out}/08_latent_space.png")

# %% [markdown]
# ## Many categories
#
# A&R's step costs the same whatever the number of categories: the model gathers the rows
# of the observed and the sampled categories only. One step on three variables of 1,000 and
# of 100,000 categories (`benchmarks/latent_gp.py` runs the CLGP on windows of the Brown
# corpus, 26,101 words per position):

# %%
for K in (1_000, 100_000):
    pyro.clear_param_store()
    x = torch.randint(0, K, (256, 3))
    model = CategoricalLatentGP([K] * 3, 2, AR(negatives=SharedNegatives(50)), utility=SparseGPMap(2, 16),
                                posterior=SessionEncoder(3 * K, 2, hidden_dim=32), subsample_size=64)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    svi.step(x)
    t = time.process_time()
    for _ in range(5):
        svi.step(x)
    print(f"K = {K:>7,}: {1e3 * (time.process_time() - t) / 5:.1f} ms per step")

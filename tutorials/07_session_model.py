# %% [markdown]
# # A latent-variable model of sessions over many items
#
# A user session is a bag of items viewed: $v_{u,1}, \dots, v_{u,T_u}$ out of $P$ products.
# The session model of Rohde et al. (seeds/002, section 3) gives every session its own
# latent taste vector and makes every view a categorical draw over all products,
#
# $$\omega_u \sim N(0, I_Q), \qquad v_{u,t} \sim \mathrm{softmax}(\Psi\,\omega_u + \rho),$$
#
# with item embeddings $\Psi$ ($P \times Q$) and popularity offsets $\rho$. The posterior
# $q(\omega_u) = N(\mu_u, \mathrm{diag}\,\sigma_u^2)$ is **amortised**: an encoder reads the
# session's items (mean of learned item embeddings, then an MLP), so the guide has a fixed
# size however many sessions there are, and it serves new sessions too.
#
# `pyro_ar.models.CategoricalLatentModel` is this model with any likelihood of the library:
#
# * **exact softmax** with the reparameterisation trick: all $P$ utilities per session, $O(BPQ)$;
# * **Bouchard's bound** (the seed's method) with $a_u$ amortised and the Jaakkola–Jordan
#   $\xi$ in closed form, analytic in $q(\omega_u)$ (no Monte Carlo), its class sum full or
#   subsampled (negative sampling);
# * **A&R**: each view's Gumbel noise is made explicit and the class sum is subsampled
#   without bias, $O(B(T+s)Q)$ per step whatever $P$.
#
# We simulate RecoGym-style organic sessions (`pyro_ar.datasets.make_recogym_sessions`),
# fit the three (A&R at many and at few negatives), and rank products for held-out sessions
# (Recall@5, TDCG@5) against the popularity baseline. `benchmarks/session_model.py` is the full study (the real RecoGym
# simulator, Brown sentences as sessions over 26,101 words, per-step time vs $P$).
#
#     python tutorials/07_session_model.py            # ~5 min (the Bouchard baseline ~3.5 of them)
#     python tutorials/07_session_model.py --quick    # CI size: a few seconds

# %%
import time

import torch

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import make_recogym_sessions
from pyro_ar import AR, Exact, SharedNegatives, default_elbo, default_guide, lazy_adam, train
from pyro_ar.likelihoods import Bouchard
from pyro_ar.models import CategoricalLatentModel
from pyro_ar.models.latent import session_metrics
from pyro_ar.negatives import LabelHeadNegatives

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt

FIGURES = ("07_training_curves.png", "07_item_embeddings.png")

args = _tutorial.parse_args("Tutorial 7: a latent-variable session model")
if args.quick:
    P, num_train, num_test, steps, Q = 100, 60, 50, 40, 4
else:
    P, num_train, num_test, steps, Q = 1000, 200, 1000, 800, 10
torch.set_num_threads(1)
pyro.set_rng_seed(args.seed)

# %% [markdown]
# ## The data
#
# Sessions are ragged, so they are stored as one integer tensor padded with $-1$; the model
# masks the padding. Each test session is split at random: 20% of its views are held out,
# the rest are what the encoder sees.

# %%
data = make_recogym_sessions(num_products=P, num_train=num_train, num_test=num_test, seed=args.seed)
print("training sessions", tuple(data.train.shape), "| views", int((data.train >= 0).sum()))
print("first session:", data.train[0][data.train[0] >= 0][:12].tolist())

# %% [markdown]
# ## Three likelihoods, one model
#
# The likelihood is an object; the guide (`default_guide(model)`) samples $\omega_u$ from the
# encoder's Gaussian and, for A&R, gives each view's noise its conditional optimum
# $q(\varepsilon\mid\psi) = \mathrm{Gumbel}(\log(1+\hat S), 1)$. Training is stock SVI through
# `pyro_ar.infer.train`.
#
# The item embeddings $\Psi$ are MAP estimates under the prior $\Psi_{pq} \sim N(0, 1/Q)$ by
# default (`weights="map"`; the offsets $\rho$ have no prior): with $\omega_u \sim N(0, I_Q)$ the
# latent part of every utility then has unit prior variance. Maximum-likelihood embeddings
# (`weights="mle"`) overfit when most items are rare: on Brown sentences their held-out
# log-likelihood falls below the popularity baseline's with training, the exact softmax's as
# well as A&R's [claim session-longrun].
#
# A&R runs at *many* negatives (20% of the items) and at *few* (5%). With few uniform negatives
# the estimate of the class sum is heavy-tailed: a handful of popular items dominate it, and a
# draw of 5% of the items misses them most of the time. Two things help. The guide's own
# estimate $\hat S$ always includes the minibatch's items exactly (the default; without it a fit
# at few negatives can drift away with training, issue 27), and the model's estimate can do
# the same with `LabelHeadNegatives(SharedNegatives(s))`: the items viewed in the minibatch's
# sessions -- the popular ones among them -- are summed exactly, the other items sampled.

# %%
many, few = P // 5, max(2, P // 20)     # 20% and 5% of the items
likelihoods = {
    "exact softmax (RT)": Exact(),
    "Bouchard + encoder": Bouchard("local"),
    f"A&R ({many} negatives)": AR(negatives=SharedNegatives(many)),
    f"A&R ({few} negatives)": AR(negatives=SharedNegatives(few)),
    f"A&R ({few} + batch items)": AR(negatives=LabelHeadNegatives(SharedNegatives(few))),
}
models, curves = {}, {}
for name, likelihood in likelihoods.items():
    pyro.clear_param_store()
    model = CategoricalLatentModel(P, Q, likelihood, subsample_size=50, hidden_dim=32)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.02}), default_elbo())
    t = time.process_time()
    history = train(svi, data.train, num_steps=steps, eval_at_start=False, log_every=max(steps // 20, 1))
    curves[name] = [(h["step"], h["loss"]) for h in history if h.get("loss") is not None]
    metrics = model.evaluate_sessions(data.test_observed, data.test_heldout, num_samples=8)
    models[name] = (model, pyro.get_param_store().get_state(), metrics)
    print(f"{name:<26} Recall@5 {metrics['recall']:.3f}  TDCG@5 {metrics['tdcg']:.3f}  "
          f"held-out log-lik {metrics['log_lik']:.3f}  ({time.process_time() - t:.1f} CPU s)")

pop = (data.item_counts.double() + 0.5).log()
m = session_metrics(lambda obs: pop.expand(len(obs), -1), data.test_observed, data.test_heldout)
print(f"{'popularity':<26} Recall@5 {m['recall']:.3f}  TDCG@5 {m['tdcg']:.3f}  held-out log-lik {m['log_lik']:.3f}")

# %%
_tutorial.plot_training_curves(curves, f"{args.out}/07_training_curves.png", ylabel="-ELBO estimate (50 sessions)")

# %% [markdown]
# ## What the model learned
#
# Items viewed in the same sessions get nearby rows of $\Psi$. The first two coordinates of
# the A&R model's item embeddings, coloured by the simulator's true popularity offsets:

# %%
model, state, _ = models[f"A&R ({few} + batch items)"]
pyro.get_param_store().set_state(state)
Psi = model.fitted_parameters()["weight"]
fig, ax = plt.subplots(figsize=(4.5, 4))
sc = ax.scatter(Psi[:, 0], Psi[:, 1], c=(data.item_counts.double() + 1).log(), s=8, cmap="viridis")
fig.colorbar(sc, label="log(1 + training views)")
ax.set(xlabel=r"$\Psi_{\cdot,1}$", ylabel=r"$\Psi_{\cdot,2}$", title="Item embeddings (A&R)")
_tutorial.save(fig, f"{args.out}/07_item_embeddings.png")

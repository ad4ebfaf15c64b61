# %% [markdown]
# # Beyond softmax
#
# The softmax is one choice of noise in $y = \arg\max_k(\psi_k + \varepsilon_k)$: Gumbel.
# A&R works for any noise density $\phi$ with a CDF $\Phi$, because the augmented
# log-joint is always
#
# $$\log p(y, \varepsilon) = \log\phi(\varepsilon) + \sum_{k\neq y}\log\Phi(\varepsilon + \psi_y - \psi_k),$$
#
# a sum over classes that SVI can subsample. This tutorial fits
#
# 1. the **multinomial probit** (Normal noise) and the **multinomial logistic** (Logistic
#    noise) with A&R, a reparameterised local guide for $\varepsilon$ and stock Pyro SVI;
# 2. a **user-defined noise** — Student-t with 3 degrees of freedom, heavy-tailed — written
#    in a dozen lines with `pyro_ar.Noise` and checked with `pyro_ar.testing.check_noise`
#    (the library ships this family as `pyro_ar.StudentTNoise(df)`, and `pyro_ar.LaplaceNoise()`;
#    writing one yourself is for the families it does not ship).
#
# None of these models has a closed-form normaliser; `pyro_ar` evaluates their exact
# likelihood $p(y \mid \psi) = \int p(y, \varepsilon)\, d\varepsilon$ by quadrature, which
# is how the test log-likelihoods below are computed.
#
# Run it:
#
#     python tutorials/03_beyond_softmax.py            # ~4 min
#     python tutorials/03_beyond_softmax.py --quick    # CI size, ~30 s

# %%
import math
import os
import time

import torch

import pyro
from pyro.infer import SVI, TraceMeanField_ELBO

import pyro_ar as ar
from pyro_ar import AR, LinearClassifier, lazy_adam, log_likelihood, make_linear_teacher, train
from pyro_ar.infer import NoiseLocalGuide
from pyro_ar.testing import check_noise

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt

FIGURES = ("03_noise_densities.png", "03_fits.png")
args = _tutorial.parse_args("Tutorial 3: beyond softmax")
pyro.set_rng_seed(args.seed)
K, D = 20, 5
N = 1_500 if args.quick else 5_000
steps = 400 if args.quick else 2_000


def save(fig, name):
    _tutorial.save(fig, os.path.join(args.out, name))


# %% [markdown]
# ## A user-defined noise in a dozen lines
#
# A `Noise` needs its log density, its log CDF (computed stably in the lower tail, where
# the $K-1$ factors $\Phi(\cdot)$ live) and, to simulate data, a sampler. For Student-t
# with 3 degrees of freedom the CDF has a closed form,
# $\Phi(x) = \tfrac12 + \big(z/(1+z^2) + \arctan z\big)/\pi$ with $z = x/\sqrt3$.

# %%
T3_LOG_NORM = math.lgamma(2.0) - math.lgamma(1.5) - 0.5 * math.log(3.0 * math.pi)


def t3_log_density(e):
    return T3_LOG_NORM - 2.0 * torch.log1p(e * e / 3.0)


def t3_log_cdf(x):
    z = -x.abs() / math.sqrt(3.0)  # evaluate the lower tail (no cancellation), then reflect
    lower = (0.5 + (z / (1 + z * z) + torch.atan(z)) / math.pi).clamp(min=torch.finfo(x.dtype).tiny)
    return torch.where(x < 0, lower.log(), torch.log1p(-lower))


def t3_sample(shape, dtype=torch.float32, device=None, generator=None):
    # t = Z / sqrt(V / 3), V ~ chi-square(3): four standard normals per draw
    g = torch.randn(tuple(shape) + (4,), dtype=dtype, device=device, generator=generator)
    return g[..., 0] / (g[..., 1:].pow(2).sum(-1) / 3.0).sqrt()


student_t3 = ar.Noise(log_density=t3_log_density, log_cdf=t3_log_cdf, sample=t3_sample, name="student_t3")

# The noise contract a user-defined noise must meet (the density integrates to one, the log
# CDF is its integral, stable tails, samples that follow the density): check_noise raises an
# AssertionError saying what fails. Run it on every noise you write.
check_noise(student_t3)
print("student_t3 passes pyro_ar.testing.check_noise")

# The library's own Student-t noise agrees (for any df > 0, through the incomplete beta):
library_t3 = ar.StudentTNoise(3.0)
x_check = torch.linspace(-50.0, 50.0, 101, dtype=torch.float64)
print(f"largest |log CDF difference| to ar.StudentTNoise(3.0): "
      f"{(library_t3.log_cdf(x_check) - t3_log_cdf(x_check)).abs().max().item():.1e}")

# Laplace noise ships too (any torch distribution with a cdf also works, through
# ar.Noise.from_distribution, but without a stable lower tail):
laplace = ar.LaplaceNoise()

# check: the quadrature marginals of a 50-class model sum to one
psi = 2.0 * torch.randn(4, 50, dtype=torch.float64)
for noise in ("gumbel", "normal", "logistic", student_t3):
    total = ar.UtilityCategorical(psi, noise).probs.sum(-1)
    name = noise if isinstance(noise, str) else noise.name
    print(f"{name:10s}: class probabilities sum to 1 within {(total - 1).abs().max().item():.1e}")

e = torch.linspace(-6, 6, 601)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
for noise in ("gumbel", "normal", "logistic", student_t3, laplace):
    nz = ar.get_noise(noise) if isinstance(noise, str) else noise
    axes[0].plot(e, nz.log_density(e).exp(), label=nz.name)
    axes[1].plot(e, nz.log_density(e), label=nz.name)
axes[0].set(title="noise densities phi", xlabel="eps")
axes[1].set(title="log densities: the tails differ", xlabel="eps", ylim=(-20, 0))
axes[0].legend(fontsize=8)
save(fig, FIGURES[0])

# %% [markdown]
# ## Fitting probit, logistic and Student-t models with A&R
#
# For each noise, data come from a linear "teacher" $\psi = x W^\top + b$ with that noise
# ($K = 20$ classes). The model is `LinearClassifier(likelihood=AR(noise, negatives=5))`
# (maximum likelihood, 5 negative classes per datapoint); the guide is
# `NoiseLocalGuide`, a reparameterised $q(\varepsilon_n) = $ (noise located at $\mu_n$,
# scaled by $\sigma_n$) per datapoint, living in the data plate. The local parameters get
# a larger step size than the weights (a callable `optim_args`): each is updated only when
# its datapoint is in the minibatch.
#
# Training runs through `pyro_ar.infer.train` (one loss record per step here). We report
# the exact held-out log-likelihood of the fit (`pyro_ar.evaluation`, by quadrature) against the
# teacher's own, and, as a check of the noise choice, the fit of the same data by an A&R
# *softmax* model (the wrong noise).

# %%
def teacher_data(noise, seed):
    if noise is student_t3:
        sampler = lambda shape, generator=None, dtype=torch.float32: t3_sample(shape, dtype, generator=generator)  # noqa: E731
        return make_linear_teacher(2 * N, D, K, sampler, weight_scale=2.0, seed=seed)
    return make_linear_teacher(2 * N, D, K, noise, weight_scale=2.0, seed=seed)


def fit(noise, x, y):
    pyro.clear_param_store()
    pyro.set_rng_seed(args.seed)
    model = LinearClassifier(D, K, likelihood=AR(noise, negatives=5), subsample_size=500, sparse=True)
    guide = NoiseLocalGuide(model)
    optim = lazy_adam(lambda name: {"lr": 0.1 if name.startswith("NoiseLocalGuide") else 0.03})
    svi = SVI(model, guide, optim, TraceMeanField_ELBO())
    history = train(svi, x, y, num_steps=steps, log_every=1, eval_at_start=False)
    elbo = [-h["loss"] / len(x) for h in history if h["step"] > 0]
    return model, elbo


results = {}
print(f"\n{'data noise':10s} {'model noise':12s} {'test ll (fit)':>14s} {'test ll (teacher)':>18s} {'seconds':>8s}")
for noise in ("normal", "logistic", student_t3):
    name = noise if isinstance(noise, str) else noise.name
    data = teacher_data(noise, seed=args.seed + 1)
    x, y, xt, yt = data.x[:N], data.y[:N], data.x[N:], data.y[N:]
    teacher = log_likelihood(xt @ data.W.T + data.b, yt, noise)
    for model_noise in (noise, "gumbel"):
        mname = model_noise if isinstance(model_noise, str) else model_noise.name
        t0 = time.perf_counter()
        model, elbo = fit(model_noise, x, y)
        secs = time.perf_counter() - t0
        ll = log_likelihood(model.utility(xt), yt, model_noise)
        results[(name, mname)] = dict(elbo=elbo, ll=ll, teacher=teacher)
        print(f"{name:10s} {mname:12s} {ll:14.4f} {teacher:18.4f} {secs:8.1f}")

fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
for ax, name in zip(axes, ("normal", "logistic", "student_t3")):
    for (dname, mname), r in results.items():
        if dname != name:
            continue
        avg = torch.tensor(r["elbo"]).unfold(0, 25, 1).mean(-1)  # moving average of 25 steps
        ax.plot(avg, label=f"A&R, {mname} model: test ll {r['ll']:.3f}")
    ax.axhline(results[(name, name)]["teacher"], color="k", ls="--", lw=1,
               label=f"teacher's test ll {results[(name, name)]['teacher']:.3f}")
    ax.set(title=f"data from a {name} teacher", xlabel="SVI step", ylabel="ELBO per datapoint")
    ax.set_ylim(results[(name, name)]["teacher"] - 1.5, results[(name, name)]["teacher"] + 0.5)
    ax.legend(fontsize=7)
save(fig, FIGURES[1])

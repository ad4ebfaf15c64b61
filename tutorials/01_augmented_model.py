# %% [markdown]
# # The augmented model
#
# Why Augment & Reduce works, in four pictures.
#
# 1. **The utility view.** A categorical over $K$ classes is the argmax of noisy utilities,
#    $y = \arg\max_k(\psi_k + \varepsilon_k)$ with $\varepsilon_k$ iid from a density
#    $\phi$ with CDF $\Phi$. Gumbel noise gives the softmax, Normal noise the multinomial
#    probit.
# 2. **The augmented integrand.** Class $y$ wins when every other class falls below
#    $\psi_y + \varepsilon$, so with $\varepsilon = \varepsilon_y$
#    $$p(y \mid \psi) = \int \underbrace{\phi(\varepsilon)\prod_{k\ne y}\Phi(\varepsilon + \psi_y - \psi_k)}_{p(y,\ \varepsilon)}\, d\varepsilon .$$
#    The log of the integrand is a **sum over classes**: that is what we can subsample.
# 3. **The bound.** With a variational $q(\varepsilon)$, $\log p(y) \ge
#    \mathbb{E}_q[\log p(y, \varepsilon)] + H[q]$. For Gumbel noise and
#    $q = \mathrm{Gumbel}(\log\eta, 1)$ the bound has a closed form,
#    $L(\eta) = 1 - \log\eta - (1 + S)/\eta$ with $S = \sum_{k\ne y} e^{\psi_k - \psi_y}$,
#    maximised at $\eta^* = 1 + S$ where it equals $\log \mathrm{softmax}(\psi)_y$.
# 4. **Subsampling.** $\sum_{k \ne y}$ is replaced by an unbiased estimate from $s$
#    sampled classes; the estimate's noise shrinks with $s$ and with a good proposal.
#
# Run it:
#
#     python tutorials/01_augmented_model.py            # ~30 s
#     python tutorials/01_augmented_model.py --quick    # CI size, ~15 s

# %%
import math
import os

import torch

import pyro
import pyro.distributions as dist
from pyro.infer import Trace_ELBO

import pyro_ar as ar
from pyro_ar import ClosedFormELBO
from pyro_ar.negatives import get_negative_sampler

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt

FIGURES = ("01_utility_view.png", "01_augmented_integrand.png", "01_bound_vs_eta.png",
           "01_subsampling_noise.png")
args = _tutorial.parse_args("Tutorial 1: the augmented model")
torch.set_default_dtype(torch.float64)  # this tutorial compares numbers to many digits
pyro.set_rng_seed(args.seed)


def save(fig, name):
    _tutorial.save(fig, os.path.join(args.out, name))


# %% [markdown]
# ## 1. The utility view
#
# Draw the noise many times, take the argmax, and count: the class frequencies match
# softmax($\psi$) for Gumbel noise and the probit probabilities (computed by
# `UtilityCategorical` with quadrature) for Normal noise.

# %%
psi = torch.tensor([1.0, 0.5, 0.0, -0.5, 2.0, -1.0])
K = psi.shape[0]
draws = 20_000 if args.quick else 200_000
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
print(f"{'noise':8s} {'max |frequency - p|':>20s} {'3 standard errors':>18s}")
for ax, noise in zip(axes, ("gumbel", "normal")):
    eps = ar.get_noise(noise).sample((draws, K))
    freq = torch.bincount((psi + eps).argmax(-1), minlength=K).double() / draws
    p = ar.UtilityCategorical(psi, noise).probs
    se = (p * (1 - p) / draws).sqrt()
    print(f"{noise:8s} {(freq - p).abs().max().item():20.4f} {3 * se.max().item():18.4f}")
    ax.bar(torch.arange(K) - 0.2, freq, width=0.4, label=f"argmax of psi + eps ({draws:,} draws)")
    ax.bar(torch.arange(K) + 0.2, p, width=0.4, label="p(y = k | psi)")
    ax.set(title=f"{noise} noise", xlabel="class k", ylabel="probability")
    ax.legend(fontsize=8)
save(fig, FIGURES[0])

# %% [markdown]
# ## 2. The augmented integrand
#
# For $y = 0$ we plot $\varepsilon \mapsto p(y, \varepsilon)$ from the noise's log density
# and log CDF, and integrate it numerically on a fine grid. Its area is the marginal
# probability $p(y)$: log-softmax for Gumbel, quadrature for Normal.

# %%
y = 0
grid = torch.linspace(-8, 40, 100_001)  # Gumbel's right tail decays only like e^-eps
fig, axes = plt.subplots(1, 2, figsize=(10, 3.5))
print(f"\n{'noise':8s} {'area under p(y, eps)':>22s} {'p(y) (library)':>16s} {'difference':>12s}")
for ax, noise in zip(axes, ("gumbel", "normal")):
    nz = ar.get_noise(noise)
    others = torch.cat([psi[:y], psi[y + 1:]])
    log_joint = nz.log_density(grid) + nz.log_cdf(grid[:, None] + psi[y] - others).sum(-1)
    joint = log_joint.exp()
    area = torch.trapezoid(joint, grid).item()
    p_y = ar.UtilityCategorical(psi, noise).log_prob(torch.tensor(y)).exp().item()
    print(f"{noise:8s} {area:22.12f} {p_y:16.12f} {area - p_y:12.1e}")
    ax.plot(grid, nz.log_density(grid).exp(), "k:", label="prior density phi(eps)")
    ax.fill_between(grid, joint, alpha=0.4, label=f"p(y={y}, eps): area {area:.6f}")
    ax.set(title=f"{noise}: p(y={y}) = {p_y:.6f}", xlabel="eps (noise of the observed class)",
           xlim=(-4, 8))
    ax.legend(fontsize=8)
save(fig, FIGURES[1])

# %% [markdown]
# ## 3. The bound as a function of $\eta$
#
# The model below is the augmented model as Pyro sees it: `sample_categorical` emits the
# noise site `y_eps` (prior $\phi$) and the observed label with its factor
# $\sum_{k\ne y}\log\Phi(\varepsilon + \psi_y - \psi_k)$. The guide is
# $q(\varepsilon) = \mathrm{Gumbel}(\log\eta, 1)$. `ClosedFormELBO` evaluates the bound
# exactly; Pyro's stock `Trace_ELBO` estimates the same quantity by Monte Carlo.

# %%
def model():
    ar.sample_categorical("y", psi, obs=torch.tensor(y), noise="gumbel")


def guide(log_eta):
    pyro.sample("y_eps", dist.Gumbel(log_eta, torch.tensor(1.0)))


def bound(log_eta, elbo):
    return -elbo.loss(model, lambda: guide(torch.tensor(log_eta)))


exact = torch.log_softmax(psi, -1)[y].item()
S = (psi - psi[y]).exp().sum().item() - 1.0
closed = ClosedFormELBO(local_updates=False, max_plate_nesting=0)
mc = Trace_ELBO(num_particles=2_000 if args.quick else 20_000, vectorize_particles=True,
                max_plate_nesting=0)
log_etas = torch.linspace(-1.0, 4.0, 41 if args.quick else 101)
L = [bound(v.item(), closed) for v in log_etas]
mc_points = log_etas[:: 8 if args.quick else 20]
L_mc = [bound(v.item(), mc) for v in mc_points]
L_star = bound(math.log1p(S), closed)
formula = [1 - v - (1 + S) / math.exp(v) for v in log_etas.tolist()]
print(f"\nlog softmax(psi)_y             = {exact:.15f}")
print(f"bound at eta* = 1 + S          = {L_star:.15f}   (difference {L_star - exact:.1e})")
print(f"max |ClosedFormELBO - formula| = {max(abs(a - b) for a, b in zip(L, formula)):.1e}")
print(f"max bound - log softmax        = {max(L) - exact:.1e}   (never above)")
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(log_etas, L, label="ClosedFormELBO: 1 - log eta - (1 + S)/eta")
ax.plot(mc_points, L_mc, "o", label="Trace_ELBO (Monte Carlo)")
ax.axhline(exact, color="k", ls="--", lw=1, label="log softmax(psi)_y")
ax.axvline(math.log1p(S), color="gray", ls=":", lw=1, label="log eta* = log(1 + S)")
ax.set(xlabel="log eta", ylabel="bound on log p(y)", title="The A&R softmax bound is tight at eta*",
       ylim=(exact - 3, exact + 0.5))
ax.legend(fontsize=8)
save(fig, FIGURES[2])

# %% [markdown]
# ## 4. Subsampling noise against the number of negatives
#
# With $K = 10{,}000$ classes whose utilities are skewed (a few frequent classes), we
# estimate the factor $\sum_{k\ne y}\log\Phi(\varepsilon + \psi_y - \psi_k)$ from $s$
# classes, for the three strategies of `pyro_ar.negatives`:
#
# * `per_datapoint` — $s$ uniform classes for each datapoint, weight $(K-1)/s$;
# * `shared` — one uniform set for the whole minibatch, weight $K/s$ (label dropped);
# * `importance` — shared classes drawn from a proposal $q$ (here $q_k \propto e^{\psi_k}$,
#   what class frequencies give), weight $1/(s\, q_k)$.
#
# Every estimate is unbiased: its *expectation* is the exact sum. The left panel shows the
# mean of many draws against the exact sum, with $\pm 2$ sample standard errors. How well
# a finite mean shows that depends on the tails. With skewed utilities the sum is
# dominated by a few classes, which a uniform sample of $s \ll K$ classes mostly misses
# (each of their terms $\log\Phi$ is very negative, so the estimate lies above the exact
# sum) and occasionally hits with weight $K/s$ (far below it): a heavy-tailed estimate. Over a few hundred draws its sample
# standard error understates the real one, so the uniform strategies' means can sit
# several "standard errors" above the exact sum without any bias -- the printed
# $|\text{mean} - \text{exact}|/\text{SE}$ is a valid test only for the light-tailed
# importance estimates. The spread (right) is the practical point: the uniform
# strategies' standard deviation falls slowly and erratically with $s$, while the
# importance proposal puts the samples where the terms are large: its spread (the table
# printed below) is orders of magnitude smaller and falls like $1/\sqrt{s}$. This is why the
# language model of tutorial 5 draws its negatives from the class frequencies.

# %%
K = 10_000
g = torch.Generator().manual_seed(args.seed)
psi = 3.0 * torch.randn(K, generator=g).sort(descending=True).values.clamp(min=-3)  # skewed utilities
y = 50
eps = torch.tensor(1.0)  # a fixed value of the observed class's noise
repeats = 100 if args.quick else 400
sizes = [1, 4, 16, 64, 256, 1024] if args.quick else [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
exact = ar.AugmentedCategorical(psi, eps, "gumbel").log_prob(torch.tensor(y)).item()
proposal = psi.exp()
stats = {}
for strategy in ("per_datapoint", "shared", "importance"):
    stats[strategy] = []
    for s in sizes:
        sampler = get_negative_sampler(strategy, s, proposal if strategy == "importance" else None)
        d = ar.AugmentedCategorical(psi, eps, "gumbel", negatives=sampler)
        est = torch.stack([d.log_prob(torch.tensor(y)) for _ in range(repeats)])
        above = (est > exact).double().mean().item()
        stats[strategy].append((est.mean().item(), est.std().item(), above))
print(f"\nexact factor: {exact:.4f}; {repeats} draws per point")
print(f"{'s':>6s} " + " ".join(f"{n + ' sd':>18s}" for n in stats))
for i, s in enumerate(sizes):
    print(f"{s:6d} " + " ".join(f"{stats[n][i][1]:18.4f}" for n in stats))
print(f"\n|mean - exact| / sample standard error (largest over s), fraction of draws above exact (at s = {sizes[1]}):")
for n, v in stats.items():
    z = max(abs(m - exact) / (sd / math.sqrt(repeats)) for m, sd, _ in v if sd > 0)
    frac = v[1][2]
    kind = ("light-tailed (bounded weights): a valid check, unbiased means below ~3.5" if n == "importance" else
            "heavy-tailed: most draws miss the dominant classes and lie above; the sample SE "
            "understates the error, so this is not a test of bias")
    print(f"  {n:14s} {z:6.2f}   {frac:5.0%}   ({kind})")

fig, axes = plt.subplots(1, 2, figsize=(11, 4))
for i, (name, v) in enumerate(stats.items()):
    m = torch.tensor([a for a, _, _ in v])
    se = torch.tensor([b for _, b, _ in v]) / math.sqrt(repeats)
    x = torch.tensor(sizes, dtype=torch.float64) * (1 + 0.06 * (i - 1))
    axes[0].errorbar(x, m, yerr=2 * se, fmt="o-", ms=3, capsize=2, label=name)
    axes[1].loglog(sizes, [b for _, b, _ in v], "o-", ms=3, label=name)
axes[0].axhline(exact, color="k", ls="--", lw=1, label="exact sum over all K classes")
axes[0].set(xscale="log", xlabel="negatives s", ylabel=f"mean of {repeats} estimates +- 2 sample SE",
            title="unbiased in expectation; uniform draws are heavy-tailed")
axes[1].loglog(sizes, [stats["importance"][0][1] / math.sqrt(s) for s in sizes], "k:", lw=1,
               label="1 / sqrt(s)")
axes[1].set(xlabel="negatives s", ylabel="standard deviation of one estimate", title="subsampling noise")
for ax in axes:
    ax.legend(fontsize=8)
save(fig, FIGURES[3])

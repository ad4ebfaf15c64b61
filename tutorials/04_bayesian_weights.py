# %% [markdown]
# # Bayesian weights for categoricals with many classes
#
# A linear classifier psi_n = W x_n + b with a Gaussian prior on every weight,
# y_n = argmax_k (psi_nk + eps_nk), and a posterior over (W, b) fitted by SVI with the
# Augment & Reduce likelihood. Four parts:
#
# A. Small K: stock Pyro just works. ``LinearClassifier(weights="bayes")`` has ``weight`` and
#    ``bias`` sample sites; ``AutoNormal`` guides them, ``NoiseLocalGuide`` the per-datapoint
#    noise of the augmented likelihood, combined with ``AutoGuideList``; ``Predictive`` gives
#    posterior draws. O(K D) per step: fine for K in the hundreds.
#
# B. Large K: ``BayesianLinearClassifier`` + ``ClassSubsampledNormal``. The same model as in
#    part A (same prior, likelihood and sites) with the class-subsampled weight strategy:
#    Bayesian weights are one concept, and only the rows a step samples change. Each step samples rows
#    of W only for the classes it needs (labels of the minibatch + shared negatives + a few
#    more), estimates the KL term on a uniform class subsample through a class plate with
#    explicit ``subsample=`` and per-row scale/mask, and updates only those rows (sparse
#    gradients + LazyAdam). Posterior predictive log-likelihood, credible intervals of chosen
#    weights, and top-k classes with uncertainty.
#
# C. Why the local guide is conditioned on W (digits, K = 10): with q(eps) independent of W
#    (the textbook recipe) the bound penalises the posterior variance of the utilities and
#    shrinks the posterior; with q(eps | W) = Gumbel(log eta(W), 1) the A&R posterior matches
#    the exact-likelihood mean-field posterior.
#
# D. Against NUTS (digits 0-3, 300 points, 8 PCA features + bias): Pyro's NUTS with the exact
#    likelihood is the reference; the exact-likelihood mean-field posterior and the A&R
#    mean-field posterior (2 negatives, q(eps | W)) are compared with it weight by weight.
#    Mean field is too narrow against NUTS whatever the likelihood; A&R adds little to that.
#
# Run::
#
#     python tutorials/04_bayesian_weights.py            # full size, ~9 min on 2 busy CPU cores
#     python tutorials/04_bayesian_weights.py --quick    # CI size, < 1 min; its numbers are not converged
#
# Figures go to tutorials/figures/04_*.png (or --out DIR).

# %%
import os
import time

import torch

import pyro
from pyro.infer import MCMC, NUTS, SVI, Predictive, TraceMeanField_ELBO
from pyro.infer.autoguide import AutoGuideList, AutoNormal

import pyro_ar as ar
from pyro_ar import AR, Exact, LinearClassifier, lazy_adam, log_likelihood, make_linear_teacher
from pyro_ar.infer import (
    ClassSubsampledNormal,
    ClosedFormELBO,
    GumbelLocalGuide,
    IterateAverage,
    NoiseLocalGuide,
    hide_noise_sites,
    posterior_summary,
    predictive_log_likelihood,
    predictive_probs,
    predictive_top_k,
    train,
)
from pyro_ar.models import BayesianLinearClassifier
from pyro_ar.optim import LazyAdam

import _tutorial  # tutorials/_tutorial.py: size (--quick or PYRO_AR_QUICK=1), figures inline in notebooks
from _tutorial import plt
from pyro_ar.models import Bayes

FIGURES = ("04_a_small_k.png", "04_b_large_k.png", "04_c_digits.png", "04_d_nuts.png")
FIG = _tutorial.DEFAULT_OUT  # set by main() from --out


def savefig(fig, name):
    _tutorial.save(fig, os.path.join(FIG, f"04_{name}.png"))


def fit(svi, x, y, steps, scheduler, summary_fn=None, divergence=True):
    """``pyro_ar.infer.train`` with the learning-rate schedule; with ``summary_fn``, the
    posterior summary averaged over the second half of the steps (Polyak averaging, which
    reduces the noise of the final estimate). Returns that average (or None)."""
    average = IterateAverage(summary_fn, start_fraction=0.5) if summary_fn is not None else None
    train(svi, x, y, num_steps=steps, scheduler=scheduler, callbacks=[average] if average else [],
          eval_at_start=False, divergence=divergence)
    return None if average is None else average.average


# %%
# ============================================================================ part A
def part_a(small):
    print("A. small K, stock Pyro: LinearClassifier(weights='bayes') + AutoNormal + NoiseLocalGuide")
    pyro.clear_param_store()
    K, D, N = 4, 2, 300 if small else 1000
    data = make_linear_teacher(N, D, K, "normal", weight_scale=4.0, seed=0)
    model = LinearClassifier(D, K, likelihood=AR("normal", negatives=2), weights=Bayes(prior_scale=4.0),
                             subsample_size=100)  # prior N(0, 4^2), as the teacher's weights
    guide = AutoGuideList(model)
    guide.append(AutoNormal(hide_noise_sites(model)))  # W, b
    guide.append(NoiseLocalGuide(model))                 # per-datapoint eps (probit)
    svi = SVI(model, guide, lazy_adam(lambda name: {"lr": 0.1 if "Local" in name else 0.03}),
              TraceMeanField_ELBO())
    train(svi, data.x, data.y, num_steps=150 if small else 2000)
    # posterior draws of the weights with stock Predictive over the global part of the guide
    post = Predictive(model, guide=guide[0], num_samples=20 if small else 50,
                      return_sites=["weight", "bias"])(data.x)
    sm = posterior_summary(post)
    print(f"  posterior of w_0: mean {[round(v, 3) for v in sm['weight_mean'][0].tolist()]}, "
          f"sd {[round(v, 3) for v in sm['weight_sd'][0].tolist()]} (W is identified only up to a "
          "common shift of its rows)")
    # predictive probability of class 0 and its posterior sd over the input plane
    n = 25 if small else 40  # probit class probabilities by quadrature: O(n^2 K) per draw
    g = torch.linspace(-2.2, 2.2, n)
    grid = torch.stack(torch.meshgrid(g, g, indexing="xy"), -1).reshape(-1, 2)
    mean, sd = predictive_probs(post, grid, noise="normal")
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.3))
    panels = ((axes[0], mean[:, 0], "predictive p(y = 0 | x)", "posterior mean of p(y = 0 | x, W)"),
              (axes[1], sd[:, 0], "posterior sd of p(y = 0 | x, W)", "posterior sd of p(y = 0 | x, W)"))
    cmap = plt.get_cmap("tab10")
    for ax, z, title, bar_label in panels:
        im = ax.imshow(z.reshape(n, n), origin="lower", extent=(-2.2, 2.2, -2.2, 2.2), cmap="viridis")
        for k in range(K):  # the first 200 training points, coloured by their class
            pts = data.x[:200][data.y[:200] == k]
            ax.scatter(pts[:, 0], pts[:, 1], color=cmap(k), s=8, edgecolors="white", linewidths=0.3,
                       label=f"class {k}")
        ax.set(title=title, xlabel="feature x_1", ylabel="feature x_2", xlim=(-2.2, 2.2), ylim=(-2.2, 2.2))
        fig.colorbar(im, ax=ax, label=bar_label)
    axes[0].legend(fontsize=7, loc="upper left", title="training points", title_fontsize=7)
    savefig(fig, "a_small_k")


# %%
# ============================================================================ part B
def part_b(small):
    print("B. large K: BayesianLinearClassifier + ClassSubsampledNormal (class-subsampled mean field)")
    pyro.clear_param_store()
    pyro.set_rng_seed(1)
    K, D, N, steps = (1000, 8, 4000, 200) if small else (5000, 16, 40000, 6000)
    data = make_linear_teacher(N + 2000, D, K, weight_scale=2.0, seed=1)  # prior N(0, 1) on W, b
    x, y, xt, yt = data.x[:N], data.y[:N], data.x[N:], data.y[N:]
    model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=64), subsample_size=256, prior_scale=2.0)
    # q(W) mean field + q(eps | W) closed form. Rows of rare classes are updated only when they
    # fall in a step's class subsample, so the initial scale matters: a tenth of this one
    # leaves data-poor rows far too narrow (their 90% intervals miss many teacher weights), the
    # prior's own scale leaves data-rich rows too wide after the full size's 6,000 steps (a much
    # worse test log-likelihood); this one is a compromise between the two.
    guide = ClassSubsampledNormal(model, init_scale=1.0)
    sched = pyro.optim.LambdaLR({"optimizer": LazyAdam, "optim_args": {"lr": 0.05},
                                 "lr_lambda": lambda t: (1 + t / 500) ** -0.5})
    svi = SVI(model, guide, sched, ClosedFormELBO())
    t0 = time.perf_counter()
    fit(svi, x, y, steps, sched)
    print(f"  {steps} steps in {time.perf_counter() - t0:.0f}s (each touches at most {64 * 2 + 256} of "
          f"the {K} rows)")
    ll = predictive_log_likelihood(guide, xt, yt, num_samples=100)["log_lik"]
    loc, scale, bloc, bscale = guide.loc_and_scale()
    plug_in = log_likelihood(ar.LinearUtility(xt, loc, bloc), yt)
    truth = log_likelihood(ar.LinearUtility(xt, data.W, data.b), yt)
    print(f"  test log-lik: posterior predictive {ll:.4f}, plug-in posterior mean {plug_in:.4f}, "
          f"true teacher {truth:.4f}")
    # posterior sd against the number of training examples of the class
    counts = torch.bincount(y, minlength=K).float()
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    axes[0].scatter(counts + 0.5, scale.mean(-1), s=4, alpha=0.5)
    axes[0].set_xscale("log")
    axes[0].set_xlabel("training examples of class k (+0.5)")
    axes[0].set_ylabel("mean posterior sd of w_k")
    axes[0].axhline(2.0, color="k", ls="--", lw=1)
    axes[0].set_title("posterior sd vs data (dashed: prior sd)")
    # 90% credible intervals for chosen weights vs the teacher's
    chosen = counts.argsort(descending=True)[torch.tensor([0, K // 10, K // 2])]
    lo, hi = guide.credible_interval(chosen, features=torch.arange(min(D, 8)), level=0.9)
    lo_all, hi_all = guide.credible_interval(torch.arange(K), level=0.9)
    cover = ((data.W >= lo_all) & (data.W <= hi_all)).float().mean().item()
    print(f"  90% credible intervals cover {100 * cover:.1f}% of the teacher's weights "
          "(mean field tends to under-cover)")
    for i, k in enumerate(chosen.tolist()):
        f = torch.arange(lo.shape[1]) + 0.25 * (i - 1)
        axes[1].errorbar(f, (lo[i] + hi[i]) / 2, yerr=(hi[i] - lo[i]) / 2, fmt="o", ms=3, capsize=2,
                         label=f"class {k} ({int(counts[k])} ex.)")
        axes[1].scatter(f, data.W[k, :lo.shape[1]], marker="x", color="k", s=15)
    axes[1].set_xlabel("feature")
    axes[1].set_ylabel("w_k,d: 90% interval (bars), teacher (x)")
    axes[1].legend(fontsize=7)
    axes[1].set_title(f"credible intervals; coverage over all weights {100 * cover:.0f}%")
    # top-k with uncertainty for one test point
    top = predictive_top_k(guide, xt[:1], k=8, num_samples=200)
    cls = top["classes"][0]
    axes[2].bar(range(8), top["mean"][0],
                yerr=torch.stack([top["mean"][0] - top["lower"][0], top["upper"][0] - top["mean"][0]]),
                capsize=3)
    axes[2].set_xticks(range(8), [str(c) for c in cls.tolist()], fontsize=7)
    axes[2].set_xlabel(f"class (true label {yt[0].item()})")
    axes[2].set_ylabel("predictive probability (90% band over W)")
    axes[2].set_title("top-8 classes of a test point")
    print("  top-5 for a test point:", [(c, round(m, 3), round(s, 3)) for c, m, s in
                                       zip(cls.tolist()[:5], top["mean"][0].tolist()[:5], top["sd"][0].tolist()[:5])])
    savefig(fig, "b_large_k")


# %%
# ============================================================================ part C
def part_c(small):
    print("C. digits (K=10, D=64): why q(eps) must depend on W")
    d = ar.datasets.load_digits()
    x, y, xt, yt = d.x_train, d.y_train, d.x_test, d.y_test
    steps = 150 if small else 4000
    fits = {}
    for name in ("exact likelihood", "A&R, q(eps | W)", "A&R, q(eps) indep. of W (textbook)"):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        if name == "exact likelihood":
            model = BayesianLinearClassifier(64, 10, likelihood="exact", subsample_size=200)
            guide, elbo = ClassSubsampledNormal(model), TraceMeanField_ELBO()
            weights = guide
        else:
            model = BayesianLinearClassifier(64, 10, likelihood=AR(negatives=3), subsample_size=200,
                                             stratify=False)
            elbo = ClosedFormELBO()
            if "indep" in name:
                guide = AutoGuideList(model, create_plates=model.create_plates)
                guide.append(ClassSubsampledNormal(model, local=None))
                guide.append(GumbelLocalGuide(model))  # natural-gradient eta step, no W
                weights = guide[0]
            else:
                guide = weights = ClassSubsampledNormal(model)
        sched = pyro.optim.LambdaLR({"optimizer": LazyAdam, "optim_args": {"lr": 0.03},
                                     "lr_lambda": lambda t: (1 + t / (steps / 10)) ** -0.7})
        # the textbook bound's loss has huge spikes (a q(eps) blind to W: the point of this
        # part), which train()'s divergence guard would stop; its parameters stay finite
        sm = fit(SVI(model, guide, sched, elbo), x, y, steps, sched,
                 summary_fn=lambda: posterior_summary(weights), divergence="indep" not in name)
        g = torch.Generator().manual_seed(0)
        draws = {"weight": sm["weight_mean"] + sm["weight_sd"] * torch.randn((300, 10, 64), generator=g),
                 "bias": sm["bias_mean"] + sm["bias_sd"] * torch.randn((300, 10), generator=g)}
        sm["ll"] = predictive_log_likelihood(draws, xt, yt)["log_lik"]
        fits[name] = sm
    ref = fits["exact likelihood"]
    fig, ax = plt.subplots(figsize=(5, 5))
    for name, sm in fits.items():
        if name == "exact likelihood":
            continue
        r = sm["weight_sd"] / ref["weight_sd"]
        dz = ((sm["weight_mean"] - ref["weight_mean"]).abs() / ref["weight_sd"]).mean()
        print(f"  {name:<38s} test ll {sm['ll']:.4f} (exact {ref['ll']:.4f}); mean |dmu|/sd {dz:.3f}; "
              f"median sd ratio {r.median():.3f}")
        ax.scatter(ref["weight_sd"].reshape(-1), sm["weight_sd"].reshape(-1), s=4, alpha=0.5, label=name)
    m = float(ref["weight_sd"].max())
    ax.plot([0, m], [0, m], "k--", lw=1)
    ax.set_xlabel("posterior sd, exact-likelihood mean field")
    ax.set_ylabel("posterior sd, A&R (3 negatives)")
    ax.legend(fontsize=7)
    ax.set_title("digits: posterior sds of W")
    savefig(fig, "c_digits")


# %%
# ============================================================================ part D
def nuts_subset(n_train=300, n_features=8, classes=(0, 1, 2, 3)):
    """Digits 0-3: the first 300 training images, projected on their 8 leading principal
    components (standardised); the test images of the same classes, same projection."""
    d = ar.datasets.load_digits(standardize=True)
    keep, keep_t = torch.isin(d.y_train, torch.tensor(classes)), torch.isin(d.y_test, torch.tensor(classes))
    x, y = d.x_train[keep][:n_train].double(), d.y_train[keep][:n_train]
    xt, yt = d.x_test[keep_t].double(), d.y_test[keep_t]
    mu = x.mean(0)
    P = torch.linalg.svd(x - mu, full_matrices=False).Vh[:n_features].T
    z, zt = (x - mu) @ P, (xt - mu) @ P
    sd = z.std(0)
    return z / sd, y, zt / sd, yt, len(classes)


def part_d(small, seed):
    print("D. against NUTS (digits 0-3, 300 points, 8 PCA features + bias, prior N(0, 1))")
    x, y, xt, yt, K = nuts_subset()
    D = x.shape[1]
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    num, warm = (50, 50) if small else (1000, 500)
    t0 = time.perf_counter()
    mcmc = MCMC(NUTS(LinearClassifier(D, K, likelihood=Exact(), weights="bayes")),
                num_samples=num, warmup_steps=warm, disable_progbar=True)
    mcmc.run(x, y)
    samples = mcmc.get_samples()
    ref = posterior_summary({"weight": samples["weight"], "bias": samples["bias"]})
    nuts_ll = predictive_log_likelihood(samples, xt, yt)["log_lik"]
    print(f"  NUTS: {num} draws after {warm} warm-up steps in {time.perf_counter() - t0:.0f}s; "
          f"test ll {nuts_ll:.4f}")
    steps = 150 if small else 4000
    fits = {}
    for name in ("mean field, exact likelihood", "mean field, A&R (2 negatives, q(eps | W))"):
        pyro.clear_param_store()
        pyro.set_rng_seed(seed)
        if "exact" in name:
            model = BayesianLinearClassifier(D, K, likelihood="exact")
            guide, elbo = ClassSubsampledNormal(model), TraceMeanField_ELBO()
        else:
            model = BayesianLinearClassifier(D, K, likelihood=AR(negatives=2))
            guide, elbo = ClassSubsampledNormal(model), ClosedFormELBO()
        sched = pyro.optim.LambdaLR({"optimizer": LazyAdam, "optim_args": {"lr": 0.03},
                                     "lr_lambda": lambda t: (1 + t / (steps / 10)) ** -0.7})
        sm = fit(SVI(model, guide, sched, elbo), x, y, steps, sched,
                 summary_fn=lambda: posterior_summary(guide))
        g = torch.Generator().manual_seed(seed)
        draws = {"weight": sm["weight_mean"] + sm["weight_sd"] * torch.randn((400, K, D), generator=g, dtype=sm["weight_mean"].dtype),
                 "bias": sm["bias_mean"] + sm["bias_sd"] * torch.randn((400, K), generator=g, dtype=sm["bias_mean"].dtype)}
        ll = predictive_log_likelihood(draws, xt, yt)["log_lik"]
        dz = ((sm["weight_mean"] - ref["weight_mean"]).abs() / ref["weight_sd"]).mean().item()
        ratio = (sm["weight_sd"] / ref["weight_sd"]).median().item()
        print(f"  {name:<44s} test ll {ll:.4f} (NUTS {nuts_ll:.4f}); mean |mu - mu_NUTS| / sd_NUTS "
              f"{dz:.3f}; median sd / sd_NUTS {ratio:.3f}")
        fits[name] = sm
    print("  per weight, class 0: posterior mean (sd)")
    print("  " + f"{'d':>3s} {'NUTS':>18s} " + " ".join(f"{n.split(', ')[1][:18]:>18s}" for n in fits))
    for j in range(D):
        cells = [f"{ref['weight_mean'][0, j]:+.3f} ({ref['weight_sd'][0, j]:.3f})"]
        cells += [f"{sm['weight_mean'][0, j]:+.3f} ({sm['weight_sd'][0, j]:.3f})" for sm in fits.values()]
        print(f"  {j:>3d} " + " ".join(f"{c:>18s}" for c in cells))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5))
    for name, sm in fits.items():
        axes[0].scatter(ref["weight_mean"].reshape(-1), sm["weight_mean"].reshape(-1), s=10, alpha=0.7, label=name)
        axes[1].scatter(ref["weight_sd"].reshape(-1), sm["weight_sd"].reshape(-1), s=10, alpha=0.7, label=name)
    for ax, what in zip(axes, ("mean", "sd")):
        lim = [min(ax.get_xlim()[0], ax.get_ylim()[0]), max(ax.get_xlim()[1], ax.get_ylim()[1])]
        ax.plot(lim, lim, "k--", lw=1)
        ax.set_xlabel(f"posterior {what} of W, NUTS")
        ax.set_ylabel(f"posterior {what} of W, variational")
        ax.set_title(f"per-weight posterior {what}")
    axes[1].legend(fontsize=7)
    savefig(fig, "d_nuts")


# %%
def main(argv=None):
    global FIG
    args = _tutorial.parse_args(
        "Tutorial 4: Bayesian weights for categoricals with many classes", argv=argv,
        add_arguments=lambda p: p.add_argument("--small", dest="quick", action="store_true",
                                               help="same as --quick"))
    FIG = args.out
    torch.set_num_threads(1)
    pyro.set_rng_seed(args.seed)
    t0 = time.perf_counter()
    part_a(args.quick)
    part_b(args.quick)
    part_c(args.quick)
    part_d(args.quick, args.seed)
    print(f"done in {time.perf_counter() - t0:.0f}s; figures in {os.path.abspath(FIG)}")


if __name__ == "__main__":
    main()

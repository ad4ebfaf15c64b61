"""Bayesian logistic output layers with analytic bounds vs NUTS (seeds/002 section 4.1; issue 14).

**Accuracy** (``--part accuracy``): 900 simulated logistic-regression records with 50
features, :math:`x_{nd}\\sim N(0,1)`, :math:`\\beta\\sim N(0, 0.3^2 I)`, no intercept; 800 for
training, 100 held out. The library's binary output layer is the 2-class softmax layer of
:class:`pyro_ar.models.NeuralClassifier` (identity body) with :math:`w_0, w_1, b` ~
:math:`N(0, \\tfrac12)`, so that :math:`\\beta = w_1 - w_0` and the intercept
:math:`b_1 - b_0` have the prior :math:`N(0, 1)`; every method's posterior of
:math:`\\beta` (50 coefficients + intercept) is compared with NUTS (Pyro's, the gold
standard; run on the direct :math:`\\beta` model, whose posterior is the same):

* ``jj_sgd``      ``weights="gaussian"``, ``JaakkolaJordan()`` likelihood: analytic bound,
  closed-form :math:`\\xi`, Adam on the deterministic full-batch objective (no Monte Carlo);
  :math:`q(\\beta) = N(\\mu_1-\\mu_0, \\sigma_0^2+\\sigma_1^2)`;
* ``jj_sgd_beta`` the same bound in the direct :math:`\\beta` parameterisation (mean-field
  :math:`q(\\beta)`, :class:`~pyro_ar.distributions.JaakkolaJordanBernoulli` + closed-form KL,
  Adam): the seed's JJ-SGD;
* ``vb_em``       the variational EM of Jaakkola & Jordan (full-covariance :math:`q(\\beta)`,
  closed-form updates), the bound's original use;
* ``lrt``         ``weights="gaussian"``, ``LocalReparameterization()`` (one draw per step),
  iterate-averaged over the last half;
* ``ar``          A&R with a Bayesian last layer: ``weights="bayes"``, ``AR()`` (Gumbel),
  default guide (AutoNormal + GumbelLocalGuide), ``ClosedFormELBO``.

Reported per method: max and median over coefficients of
:math:`|\\text{mean} - \\text{mean}_{NUTS}|/\\text{sd}_{NUTS}` (target for JJ-SGD: max <= 0.1),
the median ratio sd / sd_NUTS, held-out log-likelihood of the posterior-mean logit.

**Speed** (``--part speed``): 9,000 records x 2,000 features; JJ-SGD vs LRT (library
layers, minibatch 1,000, Adam 0.01), alternating blocks of steps in one process; the loss
(each method's own training objective per record) and the held-out log-likelihood against
CPU time (one thread).

    python -m benchmarks.bayes_output_layer [--quick] [--part accuracy|speed|both] [--out DIR]

Writes ``bayes_output_layer.json`` to ``--out`` (default: the system temp directory).
"""

import math

import torch

import pyro
import pyro.distributions as dist
from pyro.infer import MCMC, NUTS, SVI

from benchmarks import harness
from benchmarks.harness import table

from pyro_ar.distributions import JaakkolaJordanBernoulli
from pyro_ar.infer import IterateAverage, default_elbo, default_guide, train
from pyro_ar.likelihoods import AR, JaakkolaJordan, LocalReparameterization
from pyro_ar.models import NeuralClassifier
from pyro_ar.models.weights import WEIGHTS
from pyro_ar.optim import lazy_adam

PRIOR = math.sqrt(0.5)  # per-row prior sd: beta = w1 - w0 ~ N(0, 1)


def simulate(n, d, seed, beta_scale=0.3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g)
    beta = beta_scale * torch.randn(d, generator=g)
    y = torch.bernoulli(torch.sigmoid(x @ beta), generator=g).long()
    return x, y, beta


def layer(likelihood, d, weights="gaussian", **kw):
    return NeuralClassifier(torch.nn.Identity(), d, 2, likelihood=likelihood,
                            weights=WEIGHTS[weights](prior_scale=PRIOR), **kw)


def beta_of_gaussian_layer():
    """(mean, sd) of (beta, intercept) under the library's Gaussian layer."""
    sp = torch.nn.functional.softplus
    W, b = pyro.param("weight").detach(), pyro.param("bias").detach()
    sW, sb = sp(pyro.param("weight_scale_unconstrained")).detach(), sp(pyro.param("bias_scale_unconstrained")).detach()
    mean = torch.cat([W[1] - W[0], (b[1] - b[0]).reshape(1)])
    sd = torch.cat([(sW ** 2).sum(0), (sb ** 2).sum().reshape(1)]).sqrt()
    return mean, sd


def heldout(mean, x, y):
    t = x @ mean[:-1] + mean[-1]
    return torch.nn.functional.logsigmoid((2 * y - 1) * t).mean().item()


# ---------------------------------------------------------------------------- methods
def run_nuts(x, y, warmup, samples):
    """NUTS on the direct model beta ~ N(0, I) (50 coefficients + intercept), y ~ Bernoulli(
    sigmoid(x beta + beta_0)): the posterior of beta = w1 - w0 under the 2-row layer is exactly
    this one (beta and w0 + w1 are independent a priori and the likelihood sees only beta)."""
    X = _with_intercept(x)

    def model(X, y):
        beta = pyro.sample("beta", dist.Normal(torch.zeros(X.shape[1]), 1.0).to_event(1))
        pyro.sample("y", dist.Bernoulli(logits=X @ beta).to_event(1), obs=y.float())

    mcmc = MCMC(NUTS(model, jit_compile=True, ignore_jit_warnings=True), num_samples=samples,
                warmup_steps=warmup, disable_progbar=True)
    mcmc.run(X, y)
    beta = mcmc.get_samples()["beta"]
    return beta.mean(0), beta.std(0)


def run_svi(likelihood, x, y, steps, lr, average=False, **kw):
    pyro.clear_param_store()
    model = layer(likelihood, x.shape[1], **kw)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    if not average:
        train(svi, x, y, num_steps=steps, eval_every=steps)
        return beta_of_gaussian_layer()
    avg = IterateAverage(lambda: dict(zip(("mean", "sd"), beta_of_gaussian_layer())), 0.5)
    train(svi, x, y, num_steps=steps, eval_every=steps, callbacks=[avg])
    return avg.average["mean"], avg.average["sd"]


def run_ar(x, y, steps, lr):
    pyro.clear_param_store()
    model = layer(AR(), x.shape[1], weights="bayes")
    guide = default_guide(model)
    svi = SVI(model, guide, lazy_adam({"lr": lr}), default_elbo())
    train(svi, x, y, num_steps=steps, eval_every=steps)
    auto = guide[0]
    loc = {n: getattr(auto.locs, n).detach() for n in ("weight", "bias")}
    scale = {n: getattr(auto.scales, n).detach() for n in ("weight", "bias")}
    mean = torch.cat([loc["weight"][1] - loc["weight"][0], (loc["bias"][1] - loc["bias"][0]).reshape(1)])
    sd = torch.cat([(scale["weight"] ** 2).sum(0), (scale["bias"] ** 2).sum().reshape(1)]).sqrt()
    return mean, sd


def _with_intercept(x):
    return torch.cat([x, torch.ones(len(x), 1, dtype=x.dtype)], -1)


def run_jj_beta(x, y, steps, lr):
    """The seed's JJ-SGD: q(beta) = N(m, diag s^2), prior N(0, I), Adam on the analytic bound."""
    X = _with_intercept(x)
    m = torch.zeros(X.shape[1], requires_grad=True)
    rho = torch.full((X.shape[1],), -2.0, requires_grad=True)
    opt = torch.optim.Adam([m, rho], lr=lr)
    for _ in range(steps):
        s2 = torch.nn.functional.softplus(rho) ** 2
        bound = JaakkolaJordanBernoulli(X @ m, (X * X) @ s2).log_prob(y.float()).sum()
        kl = 0.5 * (s2 + m * m - 1 - s2.log()).sum()
        opt.zero_grad()
        (kl - bound).backward()
        opt.step()
    return m.detach(), torch.nn.functional.softplus(rho).detach()


def run_vb_em(x, y, iters=200):
    """Jaakkola-Jordan variational EM: Sigma^-1 = I + 2 X^T diag(lambda(xi)) X,
    mu = Sigma X^T (y - 1/2), xi_n^2 = x_n^T (Sigma + mu mu^T) x_n."""
    from pyro_ar.distributions import jaakkola_jordan_lambda

    X = _with_intercept(x).double()
    t = (y.double() - 0.5)
    xi = torch.ones(len(X), dtype=torch.float64)
    for _ in range(iters):
        prec = torch.eye(X.shape[1], dtype=torch.float64) + 2 * (X.T * jaakkola_jordan_lambda(xi)) @ X
        cov = torch.linalg.inv(prec)
        mu = cov @ (X.T @ t)
        xi = ((X @ (cov + torch.outer(mu, mu))) * X).sum(-1).sqrt()
    return mu.float(), cov.diagonal().sqrt().float()


def accuracy(args):
    x, y, _ = simulate(900, 50, args.seed)
    xtr, ytr, xte, yte = x[:800], y[:800], x[800:], y[800:]
    times, post = {}, {}

    def timed(name, f):
        t0 = harness.timer().start()
        post[name] = f()
        times[name] = t0.cpu
        print(f"{name}: {times[name]:.1f} s CPU", flush=True)

    steps = args.steps
    timed("nuts", lambda: run_nuts(xtr, ytr, args.warmup, args.samples))
    timed("jj_sgd", lambda: run_svi(JaakkolaJordan(), xtr, ytr, steps, 0.01))
    timed("jj_sgd_beta", lambda: run_jj_beta(xtr, ytr, steps, 0.01))
    timed("vb_em", lambda: run_vb_em(xtr, ytr))
    timed("lrt", lambda: run_svi(LocalReparameterization(), xtr, ytr, steps, 0.01, average=True))
    timed("ar", lambda: run_ar(xtr, ytr, steps, 0.01))
    ref_mean, ref_sd = post["nuts"]
    rows = []
    for name, (mean, sd) in post.items():
        z = (mean - ref_mean).abs() / ref_sd
        rows.append({"method": name, "max_z": z.max().item(), "median_z": z.median().item(),
                     "median_sd_ratio": (sd / ref_sd).median().item(), "heldout_ll": heldout(mean, xte, yte),
                     "cpu_s": times[name]})
    cols = [("method", "method", ""), ("max |dmean|/sd", "max_z", ".3f"), ("median", "median_z", ".3f"),
            ("median sd/sd_NUTS", "median_sd_ratio", ".3f"), ("held-out ll", "heldout_ll", ".4f"),
            ("CPU s", "cpu_s", ".1f")]
    print("\n900 records (800 train / 100 held out), 50 features + intercept; NUTS "
          f"{args.warmup}+{args.samples}; SVI {steps} full-batch steps")
    print(table(rows, cols))
    return {"rows": rows, "posteriors": {k: {"mean": v[0].tolist(), "sd": v[1].tolist()} for k, v in post.items()}}


# ---------------------------------------------------------------------------- speed
def speed(args):
    x, y, _ = simulate(args.speed_records + 1000, args.speed_features, args.seed + 1, beta_scale=0.05)
    xtr, ytr, xte, yte = x[:-1000], y[:-1000], x[-1000:], y[-1000:]
    runs = {}
    for name, lik in (("jj_sgd", JaakkolaJordan()), ("lrt", LocalReparameterization())):
        store = pyro.get_param_store()
        store.clear()
        model = layer(lik, xtr.shape[1], subsample_size=1000, prefix=name + "_", site=name)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
        runs[name] = {"svi": svi, "model": model, "timer": harness.timer(), "cpu": 0.0, "trace": [], "state": None}
    block = 10
    while min(r["cpu"] for r in runs.values()) < args.speed_budget:
        for name, r in runs.items():
            with r["timer"]:  # the steps' CPU time (evaluation excluded)
                losses = [r["svi"].step(xtr, ytr) / len(xtr) for _ in range(block)]
            r["cpu"] = r["timer"].cpu
            with torch.no_grad():
                ll = r["model"].evaluate(xte, yte, metrics=("log_lik",))["log_lik"]
            r["trace"].append({"cpu_s": r["cpu"], "loss_per_record": sum(losses) / block, "heldout_ll": ll})
    rows = []
    for name, r in runs.items():
        tr = r["trace"]
        rows.append({"method": name, "steps": block * len(tr), "s_per_step": r["cpu"] / (block * len(tr)),
                     "final_loss": tr[-1]["loss_per_record"], "final_heldout_ll": tr[-1]["heldout_ll"],
                     "loss_sd_last10": torch.tensor([t["loss_per_record"] for t in tr[-10:]]).std().item()})
    cols = [("method", "method", ""), ("steps", "steps", "d"), ("CPU s/step", "s_per_step", ".4f"),
            ("loss/record", "final_loss", ".4f"), ("sd of last 10 losses", "loss_sd_last10", ".4f"),
            ("held-out ll", "final_heldout_ll", ".4f")]
    print(f"\n{args.speed_records} records x {args.speed_features} features, minibatch 1000, "
          f"{args.speed_budget:.0f} s CPU each")
    print(table(rows, cols))
    return {"rows": rows, "traces": {k: r["trace"] for k, r in runs.items()}}


def main(argv=None):
    p = harness.parser(__doc__)
    p.add_argument("--part", choices=("accuracy", "speed", "both"), default="both")
    p.add_argument("--steps", type=int, default=4000)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--speed-records", type=int, default=9000)
    p.add_argument("--speed-features", type=int, default=2000)
    p.add_argument("--speed-budget", type=float, default=60.0)
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.warmup, args.samples, args.speed_budget = 500, 100, 200, 5.0
        args.speed_records, args.speed_features = 3000, 500
    harness.start(args)
    pyro.enable_validation(False)
    out = {}
    if args.part in ("accuracy", "both"):
        out["accuracy"] = accuracy(args)
    if args.part in ("speed", "both"):
        out["speed"] = speed(args)
    harness.save(args, "bayes_output_layer", out)
    return out


if __name__ == "__main__":
    main()

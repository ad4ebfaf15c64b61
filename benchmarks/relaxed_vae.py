"""A discrete-latent VAE trained with relaxed samples of every noise vs exact enumeration (issue 14).

Model: :math:`z\\sim\\mathrm{Cat}(1/K)` (K = 10), :math:`x\\mid z\\sim\\mathrm{Bernoulli}(
\\mathrm{dec}(e_z))` on binarised MNIST (pixels > 0.5), decoder K-200-784, encoder 784-200-K
giving utilities :math:`\\psi(x)`; the posterior :math:`q(z\\mid x)` is the categorical of
:math:`\\arg\\max_k(\\psi_k+\\varepsilon_k)` for a noise :math:`\\varepsilon` (Gumbel: softmax;
Normal: probit; Logistic), its probabilities from
:class:`pyro_ar.distributions.UtilityCategorical` (closed form or quadrature).

* ``exact``: the enumerated ELBO :math:`\\sum_k q(k\\mid x)[\\log p(x\\mid k) + \\log p(k) -
  \\log q(k\\mid x)]` (what ``TraceEnum_ELBO`` computes; checked against it at the start);
* ``pyro_gumbel``: Pyro's ``RelaxedOneHotCategorical`` sample fed to the decoder, and the
  analytic discrete KL (the objective (22) of Maddison et al.);
* ``gumbel`` / ``normal`` / ``logistic``: the same with
  :class:`~pyro_ar.distributions.RelaxedUtilityCategorical` for that noise (temperature
  0.5 for Gumbel, scaled by the noise's sd relative to Gumbel's, see its docstring).

Every method takes the same number of steps (one thread, Adam 1e-3, minibatch 100; the
CPU time is reported: the probit and logistic posteriors' probabilities need quadrature).

**One yardstick.** Every fitted model -- whatever objective trained it -- is scored with
the same *discrete* ELBO, computed by exact enumeration over the K categories of its
trained encoder and decoder (:meth:`VAE.exact_elbo`, checked against ``TraceEnum_ELBO`` on
200 test images for every model): the relaxed objectives (a decoder fed continuous
samples, the analytic discrete KL) are only how the models were trained; their values on
the test set are reported beside it for reference, not compared. Reported per method: the
discrete test ELBO per image every ``--eval-every`` steps (the curve) and at the end, its
ratio to ``exact``'s and whether it lies within 2% (the target), and how much the latent is
used: the mutual information :math:`I(x; z) = H(\\bar q) - \\overline{H(q(z\\mid x))}` (nats,
at most log K) and the number of categories that are some test image's most probable one.

``--refine N``: each relaxed model then continues for N steps on the enumerated ELBO (a
copy); the relative gap between its discrete ELBO and the refined one measures how far the
relaxation's solution is from the nearest optimum of the exact objective -- a like-for-like
reading of the 2% target that does not depend on which local optimum training by
enumeration from scratch reaches. Training by enumeration from scratch starts in a state
where every image picks the same category (I = 0, ELBO about -202) and leaves it only after
about 2,500 steps, hence the default of 5,000 steps (at 2,000 steps it had not yet left it,
and the relaxations looked 15% better).

    python -m benchmarks.relaxed_vae [--quick] [--steps 5000] [--eval-every 1000] [--refine 1000]
        [--methods exact,pyro_gumbel,gumbel,normal,logistic] [--out DIR]
"""

import copy
import math

import torch
import torch.nn.functional as F

import pyro
import pyro.distributions as dist
from pyro.infer import TraceEnum_ELBO, config_enumerate

from benchmarks import harness
from benchmarks.harness import table

from pyro_ar.datasets import load_mnist
from pyro_ar.distributions import RelaxedUtilityCategorical, UtilityCategorical

K, H = 10, 200
GUMBEL_SD = math.pi / math.sqrt(6)
NOISE_SD = {"gumbel": GUMBEL_SD, "normal": 1.0, "logistic": math.pi / math.sqrt(3)}


class VAE(torch.nn.Module):
    def __init__(self, noise):
        super().__init__()
        self.noise = noise
        self.enc = torch.nn.Sequential(torch.nn.Linear(784, H), torch.nn.Tanh(), torch.nn.Linear(H, K))
        self.dec = torch.nn.Sequential(torch.nn.Linear(K, H), torch.nn.Tanh(), torch.nn.Linear(H, 784))

    def log_q(self, x):
        return UtilityCategorical(self.enc(x), self.noise).logits  # log q(k | x), (B, K)

    def latent_use(self, x):
        """``(I(x; z) in nats, number of categories that are some image's most probable)``."""
        q = self.log_q(x).exp()
        entropy = lambda p: -(p * p.clamp(min=1e-30).log()).sum(-1)  # noqa: E731
        mi = entropy(q.mean(0)) - entropy(q).mean()
        return mi.item(), int(q.argmax(-1).unique().numel())

    def exact_elbo(self, x):
        log_q = self.log_q(x)
        log_px = -F.binary_cross_entropy_with_logits(
            self.dec(torch.eye(K)).expand(len(x), K, 784), x[:, None].expand(-1, K, -1), reduction="none").sum(-1)
        return (log_q.exp() * (log_px - math.log(K) - log_q)).sum(-1)

    def relaxed_elbo(self, x, temperature, pyro_relaxed=False):
        psi = self.enc(x)
        if pyro_relaxed:
            z = dist.RelaxedOneHotCategorical(torch.tensor(temperature), logits=psi).rsample()
        else:
            z = RelaxedUtilityCategorical(psi, self.noise, temperature).rsample()
        log_px = -F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="none").sum(-1)
        log_q = UtilityCategorical(psi, self.noise).logits
        kl = (log_q.exp() * (log_q + math.log(K))).sum(-1)
        return log_px - kl


def check_against_trace_enum(vae, x):
    """Our enumerated ELBO equals Pyro's TraceEnum_ELBO on the same model and guide."""
    def model(x):
        with pyro.plate("data", len(x)):
            z = pyro.sample("z", dist.Categorical(logits=torch.zeros(K)))
            pyro.sample("x", dist.Bernoulli(logits=vae.dec(F.one_hot(z, K).float())).to_event(1), obs=x)

    @config_enumerate
    def guide(x):
        with pyro.plate("data", len(x)):
            pyro.sample("z", dist.Categorical(logits=vae.log_q(x)))

    with torch.no_grad():
        ours = vae.exact_elbo(x).sum().item()
        pyro_elbo = -TraceEnum_ELBO(max_plate_nesting=1).loss(model, guide, x)
    return ours, pyro_elbo


def discrete_test_elbo(vae, xt):
    """The yardstick: the enumerated discrete ELBO per test image."""
    with torch.no_grad():
        return torch.cat([vae.exact_elbo(xt[i:i + 500]) for i in range(0, len(xt), 500)]).mean().item()


def train_steps(vae, objective, x, num_steps, lr=1e-3, on_step=None):
    """``num_steps`` Adam steps (minibatch 100) maximising ``objective``; returns the CPU seconds."""
    opt = torch.optim.Adam(vae.parameters(), lr=lr)
    cpu = 0.0
    for step in range(1, num_steps + 1):
        t0 = harness.timer().start()
        elbo = objective(x[torch.randint(0, len(x), (100,))])
        opt.zero_grad()
        (-elbo.mean()).backward()
        opt.step()
        cpu += t0.cpu
        if on_step is not None:
            on_step(step)
    return cpu


def run(name, x, xt, num_steps, seed, eval_every, refine):
    torch.manual_seed(seed)
    noise = "gumbel" if name in ("exact", "pyro_gumbel") else name
    vae = VAE(noise)
    temperature = 0.5 * NOISE_SD[noise] / GUMBEL_SD
    objective = (lambda xb: vae.exact_elbo(xb)) if name == "exact" else \
        (lambda xb: vae.relaxed_elbo(xb, temperature, name == "pyro_gumbel"))
    curve = []

    def evaluate(step):
        if step % eval_every == 0 or step == num_steps:
            curve.append((step, discrete_test_elbo(vae, xt)))
            print(f"  {name:12s} step {step:5d}  discrete test ELBO {curve[-1][1]:8.2f}", flush=True)
    cpu = train_steps(vae, objective, x, num_steps, on_step=evaluate)
    with torch.no_grad():
        trained_objective = torch.cat([objective(xt[i:i + 500]) for i in range(0, len(xt), 500)]).mean().item()
        mi, used = vae.latent_use(xt)
    row = {"method": name, "steps": num_steps, "cpu_s": cpu, "temperature": temperature if name != "exact" else None,
           "test_elbo": curve[-1][1], "curve": curve, "training_objective": trained_objective,
           "mutual_info": mi, "categories_used": used}
    if refine and name != "exact":
        # the exact ELBO's optimum nearest to this solution: continue by enumeration
        refined = copy.deepcopy(vae)
        train_steps(refined, refined.exact_elbo, x, refine)
        row["refined_elbo"] = discrete_test_elbo(refined, xt)
        row["gap_to_refined"] = (row["refined_elbo"] - row["test_elbo"]) / abs(row["refined_elbo"])
    return vae, row


def main(argv=None):
    p = harness.parser(__doc__)
    p.add_argument("--steps", type=int, default=5000, help="training steps per method")
    p.add_argument("--eval-every", type=int, default=1000, help="steps between discrete test ELBOs")
    p.add_argument("--refine", type=int, default=1000,
                   help="enumeration steps continuing each relaxed model (0: none)")
    p.add_argument("--num-train", type=int, default=20000)
    p.add_argument("--methods", default="exact,pyro_gumbel,gumbel,normal,logistic",
                   help="comma-separated subset (the ratio column needs 'exact' first)")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.num_train, args.eval_every, args.refine = 50, 2000, 25, 10
    harness.start(args)
    data = load_mnist()
    x = (data.x_train[:args.num_train] > 0.5).float()
    xt = (data.x_test[:2000] > 0.5).float()
    rows = []
    for name in args.methods.split(","):
        vae, row = run(name, x, xt, args.steps, args.seed, args.eval_every, args.refine)
        ours, ref = check_against_trace_enum(vae, xt[:200])  # the yardstick is Pyro's enumerated ELBO
        row["trace_enum_check"] = abs(ours - ref) / abs(ref)
        print(f"{name}: enumerated ELBO {ours:.3f} vs TraceEnum_ELBO {ref:.3f} (200 test images)", flush=True)
        rows.append(row)
    exact = next((r for r in rows if r["method"] == "exact"), None)
    for r in rows:
        r["ratio_to_exact"] = r["test_elbo"] / exact["test_elbo"] if exact else None
        r["within_2pct"] = None if exact is None else ("yes" if abs(r["ratio_to_exact"] - 1) <= 0.02 else "no")
    cols = [("method", "method", ""), ("temperature", "temperature", ".3f"), ("CPU s", "cpu_s", ".1f"),
            ("discrete test ELBO", "test_elbo", ".2f"), ("ratio to exact", "ratio_to_exact", ".4f"),
            ("within 2%", "within_2pct", ""), ("I(x;z) nats", "mutual_info", ".3f"),
            ("categories", "categories_used", "d"), ("training objective (test)", "training_objective", ".2f"),
            (f"after {args.refine} enum. steps", "refined_elbo", ".2f"), ("gap to that", "gap_to_refined", ".4f")]
    print(f"\nK = {K}, {len(x)} binarised MNIST training images, {args.steps} steps per method; every model "
          "scored by the same discrete ELBO (exact enumeration over its K categories)")
    print(table(rows, cols))
    print("discrete test ELBO during training: " + "; ".join(
        f"{r['method']} " + " ".join(f"{v:.1f}" for _, v in r["curve"]) for r in rows))
    harness.save(args, "relaxed_vae", {"rows": rows})
    return rows


if __name__ == "__main__":
    main()

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
CPU time is reported: the probit and logistic posteriors' probabilities need quadrature);
reported: the exact discrete test ELBO per image of each fitted model and its ratio to
``exact``'s (target: within 2%).

    python benchmarks/relaxed_vae.py [--quick] [--steps 2000] [--out DIR]
"""

import argparse
import json
import math
import os
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import pyro
import pyro.distributions as dist
from pyro.infer import TraceEnum_ELBO, config_enumerate

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from paper_common import environment, table  # noqa: E402

from pyro_ar.datasets import load_mnist  # noqa: E402
from pyro_ar.distributions import RelaxedUtilityCategorical, UtilityCategorical  # noqa: E402

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


def run(name, x, xt, num_steps, seed):
    torch.manual_seed(seed)
    noise = "gumbel" if name in ("exact", "pyro_gumbel") else name
    vae = VAE(noise)
    opt = torch.optim.Adam(vae.parameters(), lr=1e-3)
    temperature = 0.5 * NOISE_SD[noise] / GUMBEL_SD
    cpu, steps = 0.0, 0
    while steps < num_steps:
        t0 = time.process_time()
        idx = torch.randint(0, len(x), (100,))
        xb = x[idx]
        elbo = vae.exact_elbo(xb) if name == "exact" else vae.relaxed_elbo(xb, temperature, name == "pyro_gumbel")
        opt.zero_grad()
        (-elbo.mean()).backward()
        opt.step()
        cpu += time.process_time() - t0
        steps += 1
    with torch.no_grad():
        test = torch.cat([vae.exact_elbo(xt[i:i + 500]) for i in range(0, len(xt), 500)]).mean().item()
    return vae, {"method": name, "steps": steps, "cpu_s": cpu, "temperature": temperature if name != "exact" else None,
                 "test_elbo": test}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--steps", type=int, default=2000, help="training steps per method")
    p.add_argument("--num-train", type=int, default=20000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--methods", default="exact,pyro_gumbel,gumbel,normal,logistic",
                   help="comma-separated subset (the ratio column needs 'exact' first)")
    p.add_argument("--out", default=tempfile.gettempdir())
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.num_train = 100, 5000
    torch.set_num_threads(1)
    data = load_mnist()
    x = (data.x_train[:args.num_train] > 0.5).float()
    xt = (data.x_test[:2000] > 0.5).float()
    rows = []
    for name in args.methods.split(","):
        vae, row = run(name, x, xt, args.steps, args.seed)
        if name == "exact":
            ours, ref = check_against_trace_enum(vae, xt[:200])
            print(f"enumerated ELBO {ours:.3f} vs TraceEnum_ELBO {ref:.3f} (200 test images)")
        rows.append(row)
        print(row, flush=True)
    for r in rows:
        r["ratio_to_exact"] = r["test_elbo"] / rows[0]["test_elbo"] if rows[0]["method"] == "exact" else None
    cols = [("method", "method", ""), ("temperature", "temperature", ".3f"), ("CPU s", "cpu_s", ".1f"),
            ("test ELBO/image", "test_elbo", ".2f"), ("ratio to exact", "ratio_to_exact", ".4f")]
    print(f"\nK = {K}, {len(x)} binarised MNIST training images, {args.steps} steps per method")
    print(table(rows, cols))
    path = os.path.join(args.out, "relaxed_vae.json")
    with open(path, "w") as f:
        json.dump({"environment": environment(), "args": vars(args), "rows": rows}, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

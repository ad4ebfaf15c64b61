"""Accuracy report for the core of pyro_ar (the numbers the core test suite asserts).

    python -m benchmarks.accuracy_report [--quick] [--out DIR]

prints a table and writes accuracy_report[_quick].json to ``--out``:

* max |quadrature log p - log_softmax| with the quadrature forced on Gumbel noise, logits of
  scale 5, every class of K = 10 / 100 / 1000 (float64);
* probit K = 2: max |p - Phi((psi_1 - psi_2)/sqrt 2)| over 1000 random pairs (scale 3);
* K = 50: max |sum_k p(k) - 1| per noise (logits of scale 1 and 5);
* unbiasedness of the subsampled AugmentedCategorical.log_prob: z = (MC mean - exact) / SE
  per noise x strategy (K = 30, s = 5, 4 datapoints; 20,000 replicas for per-datapoint
  negatives, 1,500 calls for the shared ones; SE = sample sd / sqrt(replicas));
* K = 5: max |int phi(eps) exp(exact augmented log_prob) d eps - p(y)| per noise (trapezoid
  on [-40, 60], 200,001 points, float64).

``--quick``: a tenth of the replicas and of the trapezoid's points.
"""

import math
import warnings

import torch


import pyro_ar
from pyro_ar import AugmentedCategorical, UtilityCategorical
from pyro_ar.negatives import get_negative_sampler
from pyro_ar.noise import get_noise
from pyro_ar.quadrature import log_marginal, log_marginal_all

from benchmarks import harness

# the library's noises (Student-t with 3 degrees of freedom and Laplace included)
NOISES = {"gumbel": "gumbel", "normal": "normal", "logistic": "logistic",
          "student_t3": pyro_ar.StudentTNoise(3.0), "laplace": pyro_ar.LaplaceNoise()}


def gumbel_quadrature_errors():
    out = {}
    for K, rows in [(10, 4), (100, 4), (1000, 1)]:
        psi = 5.0 * torch.randn(rows, K, dtype=torch.float64)
        err = (log_marginal_all(psi, get_noise("gumbel")) - psi.log_softmax(-1)).abs().max().item()
        out[K] = err
    return out


def probit_error():
    psi = 3.0 * torch.randn(1000, 2, dtype=torch.float64)
    lp = log_marginal(psi, torch.zeros(1000, dtype=torch.long), get_noise("normal"))
    return (lp.exp() - torch.special.ndtr((psi[:, 0] - psi[:, 1]) / math.sqrt(2.0))).abs().max().item()


def sum_to_one_errors():
    out = {}
    psi = torch.cat([torch.randn(2, 50), 5.0 * torch.randn(2, 50)]).double()
    for name, noise in NOISES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # Laplace: not smooth at 0
            p = log_marginal_all(psi, get_noise(noise)).exp()
        out[name] = (p.sum(-1) - 1.0).abs().max().item()
    return out


def unbiasedness_z(scale=1):
    K, B, s = 30, 4, 5
    out = {}
    proposal = torch.arange(1, K + 1, dtype=torch.float64).flip(0) ** 0.75
    for name in ["gumbel", "normal", "logistic", "student_t3"]:
        noise = pyro_ar.get_noise(NOISES[name])
        psi = 2.0 * torch.randn(B, K, dtype=torch.float64)
        eps = noise.sample((B,), dtype=torch.float64)
        y = torch.tensor([0, 7, 29, int(psi[3].argmin())])
        for strategy in ["per_datapoint", "shared", "importance"]:
            sampler = get_negative_sampler(strategy, s, proposal if strategy == "importance" else None)
            exact = AugmentedCategorical(psi, eps, noise).log_prob(y)
            if strategy == "per_datapoint":
                R = 20000 // scale
                d = AugmentedCategorical(psi.expand(R, B, K), eps.expand(R, B), noise, sampler)
                est = d.log_prob(y.expand(R, B))
            else:
                R = 1500 // scale
                d = AugmentedCategorical(psi, eps, noise, sampler)
                est = torch.stack([d.log_prob(y) for _ in range(R)])
            se = est.std(0) / math.sqrt(R)
            z = ((est.mean(0) - exact) / se).tolist()
            out[f"{name}/{strategy}"] = {"z": z, "max_abs_z": max(abs(v) for v in z),
                                         "relative_se": (se / exact.abs()).max().item()}
    return out


def augmented_integration_errors(scale=1):
    K = 5
    psi = torch.tensor([0.3, -1.2, 2.0, 0.0, 1.1], dtype=torch.float64)
    grid = torch.linspace(-40.0, 60.0, 200000 // scale + 1, dtype=torch.float64)
    out = {}
    for name in ["gumbel", "normal", "logistic"]:
        noise = pyro_ar.get_noise(name)
        log_joint = noise.log_density(grid) + AugmentedCategorical(psi, grid, noise).log_prob(
            torch.arange(K).reshape(K, 1))
        integral = torch.trapezoid(log_joint.exp(), grid, dim=-1)
        marginal = UtilityCategorical(psi, noise).log_prob(torch.arange(K)).exp()
        out[name] = (integral - marginal).abs().max().item()
    return out


def main(argv=None):
    args = harness.parser(__doc__, quick_help="a tenth of the replicas and quadrature points").parse_args(argv)
    harness.start(args)
    scale = 10 if args.quick else 1
    t0 = harness.timer().start()
    report = {
        "gumbel_quadrature_max_abs_error_vs_log_softmax": gumbel_quadrature_errors(),
        "probit_K2_max_abs_error": probit_error(),
        "sum_to_one_max_abs_error_K50": sum_to_one_errors(),
        "unbiasedness_z": unbiasedness_z(scale),
        "augmented_joint_integration_max_abs_error_K5": augmented_integration_errors(scale),
    }
    report["cpu_seconds"] = t0.cpu

    print("Quadrature forced on Gumbel noise, max |log p - log_softmax| (logits of scale 5, float64)")
    for K, e in report["gumbel_quadrature_max_abs_error_vs_log_softmax"].items():
        print(f"  K = {K:<5d} {e:.2e}")
    print(f"Probit K = 2, max |p - Phi(d / sqrt 2)|: {report['probit_K2_max_abs_error']:.2e}")
    print("K = 50, max |sum_k p(k) - 1|")
    for name, e in report["sum_to_one_max_abs_error_K50"].items():
        print(f"  {name:<11s} {e:.2e}")
    print("Unbiasedness of the subsampled augmented log_prob: z = (mean - exact) / SE, 4 datapoints")
    print(f"  {'noise/strategy':<26s} {'max |z|':>8s}   z per datapoint")
    for key, v in report["unbiasedness_z"].items():
        print(f"  {key:<26s} {v['max_abs_z']:8.2f}   " + " ".join(f"{z:+.2f}" for z in v["z"]))
    print("K = 5, max |int phi(eps) p(y | eps) d eps - p(y)|")
    for name, e in report["augmented_joint_integration_max_abs_error_K5"].items():
        print(f"  {name:<11s} {e:.2e}")
    print(f"({report['cpu_seconds']:.1f} CPU s)")
    harness.save(args, "accuracy_report", {"report": report})
    return report


if __name__ == "__main__":
    main()

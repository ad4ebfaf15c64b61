"""Gradients are finite wherever the log-probability is (issue 12), at the extremes.

A table over every noise, every likelihood (the augmented factor, its closed-form Gumbel
expectation, the exact marginal, the four baselines), float32 and float64, utilities of
scale up to |psi| = 1e4 and observed-class noise up to |eps| = 1e4, every label. Where the
log-probability is finite its gradient with respect to the utilities (and eps) must be too.
The only non-finite log-probability allowed is the Gumbel factor's -inf when the sum it
stands for exceeds the dtype's range (see test_distributions.py).
"""

import itertools
import math
import warnings

import pytest
import torch

import pyro_ar as ar
from pyro_ar.distributions import (BouchardBound, GumbelExpectedFactor, OVECategorical,
                                   SampledSoftmax)

from tests.fuzz import _harness as H
from tests.helpers import DTYPES, LIBRARY_NOISES

pytestmark = pytest.mark.slow  # a fuzz battery

SCALES = [0.0, 1.0, 100.0, 1e4]
PATTERNS = [[1.0, 0.0, -1.0], [-1.0, 1.0, 0.5], [1.0, 1.0, -1.0]]
EPS = [0.0, -90.0, 800.0, -1e4, 1e4]
#: noises whose marginal needs the refined (slow, ~0.1 s) quadrature: a corner of the table
SLOW_MARGINAL = {"laplace", "student_t3"}


def _check(lp, leaves, where, overflow_ok=False):
    """Gradients finite where ``lp`` is; ``overflow_ok``: the Gumbel factor, whose -inf is
    the correctly rounded value of a sum beyond the dtype's range (checked against the
    float64 recomputation in test_distributions.py)."""
    H.STATS["inputs"] += 1
    H.STATS["inputs:gradients"] += 1
    if not torch.isfinite(lp).all():
        if not (overflow_ok and (lp == -math.inf).all()):
            H.STATS["non_finite"] += 1
            raise AssertionError(f"log_prob {lp} at {where}")
        H.STATS["values"] += 1
        return False
    grads = torch.autograd.grad(lp.sum(), leaves, allow_unused=True)
    for g in grads:
        if g is not None and not torch.isfinite(g).all():
            H.STATS["non_finite"] += 1
            raise AssertionError(f"non-finite gradient {g} with finite log_prob {lp} at {where}")
    H.STATS["values"] += 1
    return True


def _leaves(dtype, scale, pattern, eps):
    u = (torch.tensor([pattern], dtype=torch.float64) * scale).to(dtype).requires_grad_(True)
    e = torch.tensor([eps], dtype=dtype, requires_grad=True)
    return u, e


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("noise", LIBRARY_NOISES)
def test_augmented_and_marginal_gradients(noise, dtype):
    finite = 0
    for scale, pattern, eps, y in itertools.product(SCALES, PATTERNS, EPS, range(3)):
        label = torch.tensor([y])
        for k in (None, 1):
            u, e = _leaves(dtype, scale, pattern, eps)
            lp = ar.AugmentedCategorical(u, e, noise, negatives=k).log_prob(label)
            finite += _check(lp, [u, e], (noise, dtype, scale, pattern, eps, y, k), noise == "gumbel")
        if noise == "gumbel":
            u, e = _leaves(dtype, scale, pattern, eps)  # eps as log eta of q = Gumbel(log eta, 1)
            lp = GumbelExpectedFactor(ar.AugmentedCategorical(u, torch.zeros(1, dtype=dtype)), e).log_prob(label)
            finite += _check(lp, [u, e], ("expected factor", dtype, scale, pattern, eps, y), True)
        if eps == 0.0 and (noise not in SLOW_MARGINAL or (pattern is PATTERNS[0] and scale in (1.0, 1e4))):
            u, _ = _leaves(dtype, scale, pattern, eps)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)
                lp = ar.UtilityCategorical(u, noise).log_prob(label)
            assert torch.isfinite(lp).all(), (noise, dtype, scale, pattern, y)
            finite += _check(lp, [u], ("marginal", noise, dtype, scale, pattern, y))
    assert finite > 0


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("cls", [OVECategorical, SampledSoftmax, BouchardBound, "gaussian_bouchard"],
                         ids=lambda c: c if isinstance(c, str) else c.__name__)
def test_baseline_gradients(cls, dtype):
    for scale, pattern, y, k in itertools.product(SCALES, PATTERNS, range(3), (None, 1)):
        u, _ = _leaves(dtype, scale, pattern, 0.0)
        if cls == "gaussian_bouchard":
            var = (u.detach().abs() + 1.0).requires_grad_(True)
            lp = BouchardBound(u, negatives=k, utility_var=var).log_prob(torch.tensor([y]))
            leaves = [u, var]
        else:
            lp = cls(u, negatives=k).log_prob(torch.tensor([y]))
            leaves = [u]
        assert torch.isfinite(lp).all(), (cls, dtype, scale, pattern, y, k, lp)
        assert _check(lp, leaves, (cls, dtype, scale, pattern, y, k))

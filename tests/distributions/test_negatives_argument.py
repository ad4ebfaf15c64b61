"""How the class-sum distributions take their negatives: the same log_prob, bit for bit, from
the sampler's own draw under a fixed seed (the draw made by the distribution equals the draw made
by hand and passed in fixed)."""

import pytest
import torch
import pyro.poutine as poutine

from pyro_ar.utility import as_utility
from pyro_ar.distributions import (AugmentedCategorical, BouchardBound, OVECategorical, SampledSoftmax,
                                   sample_categorical)
from pyro_ar.negatives import get_negative_sampler

K, B = 23, 6
CASES = [("per_datapoint", 4), ("shared", 5), ("importance", 7), ("screened", 6), ("per_datapoint", None)]
FACTORS = {
    "augmented": lambda psi, **kw: AugmentedCategorical(psi, torch.linspace(-1, 1, B, dtype=psi.dtype), "normal", **kw),
    "ove": lambda psi, **kw: OVECategorical(psi, **kw),
    "sampled": lambda psi, **kw: SampledSoftmax(psi, **kw),
    "bouchard": lambda psi, **kw: BouchardBound(psi, torch.full((B,), 2.0, dtype=psi.dtype), **kw),
}


def _data(seed):
    g = torch.Generator().manual_seed(seed)
    psi = torch.randn(B, K, generator=g, dtype=torch.float64)
    y = torch.randint(K, (B,), generator=g)
    proposal = torch.rand(K, generator=g, dtype=torch.float64) + 0.1
    return psi, y, proposal


def _drawn_by_hand(name, s, proposal, psi, y, seed):
    sampler = get_negative_sampler(name, s, proposal if name == "importance" else None)
    torch.manual_seed(seed)
    if getattr(sampler, "uses_utility", False):
        return sampler(y, K, utility=as_utility(psi))
    return sampler(y, K)


@pytest.mark.parametrize("factor", sorted(FACTORS))
@pytest.mark.parametrize("name,s", CASES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_old_spelling_equals_the_sampler_draw_passed_fixed(factor, name, s, seed):
    psi, y, proposal = _data(seed)
    kw = {"num_negatives": s, "strategy": name, "proposal": proposal if name == "importance" else None}
    torch.manual_seed(100 + seed)
    old = FACTORS[factor](psi, **kw).log_prob(y)
    fixed = _drawn_by_hand(name, s, proposal, psi, y, 100 + seed)
    assert torch.equal(FACTORS[factor](psi, negatives=fixed).log_prob(y), old)


@pytest.mark.parametrize("name,s", CASES)
def test_sample_categorical_old_spelling_equals_the_fixed_draw(name, s):
    psi, y, proposal = _data(7)
    eps = torch.linspace(-1, 1, B, dtype=psi.dtype)
    kw = {"num_negatives": s, "strategy": name, "proposal": proposal if name == "importance" else None}

    def log_joint(**kwargs):
        model = poutine.condition(lambda: sample_categorical("y", psi, obs=y, noise="normal", **kwargs),
                                  data={"y_eps": eps})
        return poutine.trace(model).get_trace().nodes["y"]["fn"].log_prob(y)

    torch.manual_seed(5)
    old = log_joint(**kw)
    fixed = _drawn_by_hand(name, s, proposal, psi, y, 5)
    assert torch.equal(log_joint(negatives=fixed), old)

"""How the class-sum distributions take their negatives: one argument, ``negatives`` (issue 40).

The log_prob from ``negatives=sampler`` equals, bit for bit under a fixed seed, the log_prob of
the sampler's own draw made by hand and passed as a fixed draw. Before the redesign (commit
694f2b9) the same test held for the former spelling ``num_negatives=s, strategy=name,
proposal=q``; the fixed-draw path is unchanged, so the new spelling draws and computes exactly
what the old one did. The former keywords are TypeErrors naming the replacement."""

import numpy as np
import pytest
import torch
import pyro.poutine as poutine

from pyro_ar.utility import as_utility
from pyro_ar.distributions import (AugmentedCategorical, BouchardBound, OVECategorical, SampledSoftmax,
                                   sample_categorical)
from pyro_ar.negatives import (MOVED_KEYWORDS, FixedNegatives, PerDatapointNegatives, SharedNegatives,
                               as_negative_sampler, get_negative_sampler)

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
def test_the_sampler_gives_the_log_prob_of_its_own_draw_passed_fixed(factor, name, s, seed):
    psi, y, proposal = _data(seed)
    sampler = get_negative_sampler(name, s, proposal if name == "importance" else None)
    torch.manual_seed(100 + seed)
    new = FACTORS[factor](psi, negatives=sampler).log_prob(y)
    fixed = _drawn_by_hand(name, s, proposal, psi, y, 100 + seed)
    assert torch.equal(FACTORS[factor](psi, negatives=fixed).log_prob(y), new)


@pytest.mark.parametrize("name,s", CASES)
def test_sample_categorical_sampler_equals_the_fixed_draw(name, s):
    psi, y, proposal = _data(7)
    eps = torch.linspace(-1, 1, B, dtype=psi.dtype)
    kw = {"negatives": get_negative_sampler(name, s, proposal if name == "importance" else None)}

    def log_joint(**kwargs):
        model = poutine.condition(lambda: sample_categorical("y", psi, obs=y, noise="normal", **kwargs),
                                  data={"y_eps": eps})
        return poutine.trace(model).get_trace().nodes["y"]["fn"].log_prob(y)

    torch.manual_seed(5)
    new = log_joint(**kw)
    fixed = _drawn_by_hand(name, s, proposal, psi, y, 5)
    assert torch.equal(log_joint(negatives=fixed), new)


@pytest.mark.parametrize("s", [None, 1, 4, np.int64(3)])
def test_an_int_is_per_datapoint_negatives_as_the_likelihood_objects_read_it(s):
    """The int shorthand: the same sampler, and the same draws, as PerDatapointNegatives(s)."""
    from pyro_ar.likelihoods import AR

    sampler = as_negative_sampler(s)
    assert type(sampler) is PerDatapointNegatives and sampler.num_negatives == s
    assert repr(AR(negatives=s).sampler) == repr(sampler)
    psi, y, _ = _data(3)
    torch.manual_seed(0)
    short = FACTORS["ove"](psi, negatives=s).log_prob(y)
    torch.manual_seed(0)
    assert torch.equal(FACTORS["ove"](psi, negatives=PerDatapointNegatives(s)).log_prob(y), short)


def test_a_sampler_passes_through_and_a_draw_is_fixed():
    sampler = SharedNegatives(3)
    assert as_negative_sampler(sampler) is sampler
    draw = sampler(torch.tensor([0, 1]), K)
    fixed = as_negative_sampler(draw)
    assert isinstance(fixed, FixedNegatives) and fixed(torch.tensor([4, 5]), K) is draw
    for bad in (True, "shared", 2.5, torch.tensor(3)):
        with pytest.raises(ValueError, match="negatives must be None, a positive int"):
            as_negative_sampler(bad)


@pytest.mark.parametrize("factor", sorted(FACTORS) + ["sample_categorical", "sharded"])
@pytest.mark.parametrize("keyword", sorted(MOVED_KEYWORDS))
def test_a_former_keyword_is_a_type_error_naming_the_replacement(factor, keyword):
    psi, y, _ = _data(0)
    if factor == "sample_categorical":
        call = lambda **kw: sample_categorical("y", psi, obs=y, **kw)  # noqa: E731
    elif factor == "sharded":
        from pyro_ar.distributed import ShardedAugmentedCategorical, ShardedLinearUtility, class_shard

        util = ShardedLinearUtility(torch.randn(B, 2), torch.randn(K, 2), torch.zeros(K), class_shard(K, 0, 1))
        call = lambda **kw: ShardedAugmentedCategorical(util, torch.zeros(B), **kw)  # noqa: E731
    else:
        call = lambda **kw: FACTORS[factor](psi, **kw)  # noqa: E731
    with pytest.raises(TypeError, match=f"got {keyword}=3: .*negatives="):
        call(**{keyword: 3})


def test_expand_carries_the_sampler():
    psi, y, _ = _data(0)
    sampler = SharedNegatives(4)
    for factor in FACTORS.values():
        d = factor(psi, negatives=sampler)
        e = d.expand((2, B))
        assert e.sampler is sampler and e.batch_shape == (2, B)
        torch.manual_seed(1)
        lp = e.log_prob(y)
        torch.manual_seed(1)
        assert torch.equal(lp, factor(psi.expand(2, B, K), negatives=sampler).log_prob(y.expand(2, B)))

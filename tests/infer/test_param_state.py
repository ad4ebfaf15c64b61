"""pyro_ar.infer.param_state: mean-field draws from a fitted AutoNormal's param state."""

import math

import pytest
import torch
from torch.distributions import transform_to

from pyro.distributions import constraints

from pyro_ar.infer.param_state import mean_field_draws


def _state(loc, scale):
    unconstrained = transform_to(constraints.softplus_positive).inv(scale)
    return {"params": {"g.locs.w": loc, "g.scales.w": unconstrained},
            "constraints": {"g.locs.w": constraints.real, "g.scales.w": constraints.softplus_positive}}


def test_draws_have_the_posterior_moments_and_repeat_under_a_seed():
    """S draws of N(loc, scale^2): their mean is within 5 standard errors (scale / sqrt(S)) of loc,
    their standard deviation within 5 of its standard errors (about scale / sqrt(2 S)) of scale;
    the same seed gives the same draws, another seed others."""
    loc, scale, S = torch.tensor([-1.0, 0.0, 2.5]), torch.tensor([0.1, 1.0, 3.0]), 20_000
    draws = mean_field_draws(_state(loc, scale), {"w": (3,)}, S, seed=0)["w"]
    assert draws.shape == (S, 3) and draws.dtype == torch.float64
    assert torch.all((draws.mean(0) - loc.double()).abs() < 5 * scale.double() / math.sqrt(S))
    assert torch.all((draws.std(0) - scale.double()).abs() < 5 * scale.double() / math.sqrt(2 * S))
    again = mean_field_draws(_state(loc, scale), {"w": (3,)}, S, seed=0)["w"]
    assert torch.equal(draws, again)
    assert not torch.equal(draws, mean_field_draws(_state(loc, scale), {"w": (3,)}, S, seed=1)["w"])


def test_a_missing_or_misshapen_site_is_named():
    state = _state(torch.zeros(3), torch.ones(3))
    with pytest.raises(ValueError, match="no posterior location of 'b'"):
        mean_field_draws(state, {"b": (3,)}, 2, seed=0)
    with pytest.raises(ValueError, match=r"'w' of shape \(3,\), expected \(4,\)"):
        mean_field_draws(state, {"w": (4,)}, 2, seed=0)

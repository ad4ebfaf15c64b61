"""Checks of a checkpoint's optimizer state before torch reads it (pyro_ar.infer.optim_state)."""

import pytest
import torch

from pyro_ar.infer.optim_state import check_optim_values


def _state(group=None, entry=None):
    group = {"lr": 0.1, "betas": (0.9, 0.999), "eps": 1e-8, "params": [0], **(group or {})}
    return {"state": {0: {"step": 3, "exp_avg": torch.zeros(2), **(entry or {})}}, "param_groups": [group]}


def test_a_valid_state_passes():
    check_optim_values("w", _state())


@pytest.mark.parametrize("group,entry,named", [
    ({"eps": 2 ** 70}, None, "eps"),                 # torch cannot take it as a scalar: it overflowed inside the step
    ({"lr": -(2 ** 64)}, None, "lr"),
    ({"lr": float("inf")}, None, "lr"),
    ({"betas": (0.9, 2.0)}, None, "betas"),
    (None, {"step": 2 ** 63}, "step"),
    (None, {"step": -1}, "step"),
    (None, {"max_exp_avg": 10 ** 30}, "max_exp_avg"),
])
def test_out_of_range_settings_are_named(group, entry, named):
    with pytest.raises(ValueError, match=named):
        check_optim_values("w", _state(group, entry))

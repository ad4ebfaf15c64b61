"""Tests of pyro_ar.numerics' validation helpers."""

import math

import pytest
import torch

from pyro_ar.numerics import check_finite


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_check_finite_names_a_bad_value_of_a_large_tensor(bad, dtype):
    """A NaN or an infinity among many finite values (the fast path, a sum, sees it): the
    error names the argument and the first bad position."""
    t = torch.randn(300, 50, dtype=dtype)
    t[123, 7] = bad
    t[200, 1] = bad
    with pytest.raises(ValueError, match=r"utility must be finite.*utility\[123, 7\]"):
        check_finite(t, "utility")


def test_check_finite_accepts_finite_values_whose_sum_overflows():
    """The sum of large finite float32 values overflows to inf: the exact check decides."""
    t = torch.full((1000,), 3e38, dtype=torch.float32)
    assert not torch.isfinite(t.sum())
    check_finite(t, "x")
    check_finite(torch.cat([t, -t]), "x")  # (inf - inf: a NaN sum)
    check_finite(torch.arange(1000), "x")  # integers are finite

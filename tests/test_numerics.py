"""Tests of pyro_ar.numerics' validation helpers and the normal CDF's shared pieces."""

import math

import pytest
import torch

from pyro_ar.numerics import _ndtr_parts, check_finite


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


def test_ndtr_parts_share_one_erfc_with_the_same_ratio():
    """With log Phi (one erfc for both: Phi(x) = 1 - Phi(-x) above 0) the inverse Mills ratio
    r and x + r are those of the Mills-ratio-only path (relative 1e-6 in float32, 1e-13 in
    float64), across both tails."""
    for dtype, rtol in ((torch.float32, 1e-6), (torch.float64, 1e-13)):
        x = torch.linspace(-30.0, 12.0, 4001, dtype=dtype)
        _, r1, xr1 = _ndtr_parts(x, True)
        _, r0, xr0 = _ndtr_parts(x, False)
        torch.testing.assert_close(r1, r0, rtol=rtol, atol=0.0)
        torch.testing.assert_close(xr1, xr0, rtol=rtol, atol=1e-30)

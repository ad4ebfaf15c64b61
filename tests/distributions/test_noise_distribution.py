"""FastGumbel (pyro_ar.distributions.noise_distribution): the closed-form KL divergence of two
unit-scale Gumbels equals torch's general Gumbel--Gumbel formula, value and gradient."""

import pytest
import torch
from torch.distributions import Gumbel, kl_divergence

from pyro_ar.distributions import FastGumbel


@pytest.mark.parametrize("unit", [True, False])
def test_kl_equals_torchs_gumbel_kl(unit):
    g = torch.Generator().manual_seed(0)
    a = (3 * torch.randn(50, generator=g, dtype=torch.float64)).requires_grad_()
    b = torch.randn(50, generator=g, dtype=torch.float64)
    scale = 1.0 if unit else torch.rand(50, generator=g, dtype=torch.float64) + 0.5
    p, q = FastGumbel(a, scale), FastGumbel(b, 1.0).expand((50,))
    assert p.unit_scale == unit and q.unit_scale
    ours = kl_divergence(p, q)
    ref = kl_divergence(Gumbel(a, torch.as_tensor(scale, dtype=torch.float64).expand(50)),
                        Gumbel(b, torch.ones(50, dtype=torch.float64)))
    torch.testing.assert_close(ours, ref)
    grad, = torch.autograd.grad(ours.sum(), a)
    ref_grad, = torch.autograd.grad(ref.sum(), a)
    torch.testing.assert_close(grad, ref_grad)


def test_a_tensor_scale_of_ones_is_not_taken_for_the_number():
    # the flag needs the number 1 (a tensor would have to be read, a device sync per step)
    assert not FastGumbel(torch.zeros(3), torch.ones(3)).unit_scale

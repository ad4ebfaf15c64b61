"""Tests of RelaxedUtilityCategorical: the Concrete density, rounding, the zero-temperature
limit for several noises, shapes, expand, validation, the straight-through variant."""

import math

import pytest
import torch

import pyro.distributions as dist

from pyro_ar.distributions import (RelaxedUtilityCategorical, RelaxedUtilityCategoricalStraightThrough,
                                   UtilityCategorical)
from pyro_ar.utility import LinearUtility

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")

PSI = torch.tensor([[1.0, 0.0, -0.5, 0.3], [-1.0, 2.0, 0.0, 0.5]], dtype=torch.float64)
NOISES = ["gumbel", "normal", "logistic"]


@pytest.mark.parametrize("temperature", [0.1, 0.5, 2.0])
def test_gumbel_density_equals_pyros_relaxed_one_hot_categorical(temperature):
    d = RelaxedUtilityCategorical(PSI, "gumbel", temperature)
    ref = dist.RelaxedOneHotCategorical(torch.tensor(temperature, dtype=torch.float64), logits=PSI)
    x = ref.sample(torch.Size([50]))
    assert torch.allclose(d.log_prob(x), ref.log_prob(x), atol=1e-6, rtol=0)
    ours = d.rsample(torch.Size([50]))
    assert torch.allclose(d.log_prob(ours), ref.log_prob(ours), atol=1e-6, rtol=0)


def test_gumbel_samples_follow_the_concrete_law():
    """The mean of the relaxed samples equals Pyro's sampler's mean (both 20000 draws; the
    tolerance is 5 standard errors of the difference of the two means)."""
    n, tau = 20000, 0.7
    ours = RelaxedUtilityCategorical(PSI, "gumbel", tau).rsample(torch.Size([n]))
    ref = dist.RelaxedOneHotCategorical(torch.tensor(tau, dtype=torch.float64), logits=PSI).sample(torch.Size([n]))
    se = ((ours.var(0) + ref.var(0)) / n).sqrt()
    assert ((ours.mean(0) - ref.mean(0)).abs() < 5 * se).all()


@pytest.mark.parametrize("noise", NOISES)
def test_rounding_is_exact_at_any_temperature(noise):
    """P(argmax x = k) = p(y = k | psi) for every temperature (here tau = 1): frequencies of
    20000 draws within 4.5 binomial standard errors of the marginal (softmax / quadrature)."""
    n = 20000
    x = RelaxedUtilityCategorical(PSI, noise, 1.0).rsample(torch.Size([n]))
    freq = torch.nn.functional.one_hot(x.argmax(-1), 4).double().mean(0)
    p = UtilityCategorical(PSI, noise).probs
    assert ((freq - p).abs() < 4.5 * (p * (1 - p) / n).sqrt() + 1e-12).all()


@pytest.mark.parametrize("noise", NOISES)
def test_samples_converge_to_the_categorical_as_the_temperature_goes_to_zero(noise):
    """E x -> p(. | psi) and x -> one-hot as tau -> 0. At tau = 0.01 the mean of 20000 draws
    lies within 4.5 binomial standard errors (+ 0.005 of relaxation bias) of the marginal, and
    the distance of the samples to the simplex's vertices shrinks with tau."""
    n = 20000
    p = UtilityCategorical(PSI, noise).probs
    gaps = []
    for tau in (1.0, 0.1, 0.01):
        x = RelaxedUtilityCategorical(PSI, noise, tau).rsample(torch.Size([n]))
        gaps.append((1 - x.max(-1).values).mean().item())
    assert gaps[0] > gaps[1] > gaps[2] and gaps[2] < 0.01
    assert ((x.mean(0) - p).abs() < 4.5 * (p * (1 - p) / n).sqrt() + 0.005).all()


def test_shapes_expand_and_lazy_utilities():
    d = RelaxedUtilityCategorical(PSI, "normal", torch.tensor([0.5, 1.0], dtype=torch.float64))
    assert d.batch_shape == (2,) and d.event_shape == (4,)
    assert d.rsample(torch.Size([3, 5])).shape == (3, 5, 2, 4)
    e = d.expand(torch.Size([6, 2]))
    assert e.batch_shape == (6, 2) and e.temperature.shape == (6, 2) and e.noise is d.noise
    assert e.rsample().shape == (6, 2, 4)
    g = RelaxedUtilityCategorical(PSI, "gumbel", 0.5).expand(torch.Size([3, 2]))
    assert g.log_prob(g.rsample()).shape == (3, 2)
    u = LinearUtility(torch.randn(3, 2), torch.randn(7, 2))
    assert RelaxedUtilityCategorical(u, "logistic").rsample().shape == (3, 7)


def test_straight_through_is_one_hot_with_the_relaxed_gradient():
    psi = PSI.clone().requires_grad_()
    d = RelaxedUtilityCategoricalStraightThrough(psi, "normal", 0.5)
    x = d.rsample(torch.Size([10]))
    assert set(x.detach().flatten().tolist()) == {0.0, 1.0} and torch.all(x.sum(-1) == 1)
    (x * torch.arange(4.0, dtype=torch.float64)).sum().backward()
    assert psi.grad.abs().sum() > 0
    g = RelaxedUtilityCategoricalStraightThrough(PSI, "gumbel", 0.5)
    hard = g.rsample()
    assert torch.allclose(g.log_prob(hard), RelaxedUtilityCategorical(PSI, "gumbel", 0.5).log_prob(hard._unquantize))


def test_bad_arguments_and_values_are_named(validation_on):
    with pytest.raises(ValueError, match="temperature"):
        RelaxedUtilityCategorical(PSI, "gumbel", 0.0)
    with pytest.raises(ValueError, match="temperature"):
        RelaxedUtilityCategorical(PSI, "gumbel", torch.ones(3))
    with pytest.raises(ValueError, match="at least 2 classes"):
        RelaxedUtilityCategorical(torch.zeros(3, 1))
    with pytest.raises(ValueError, match="utility must be finite"):
        RelaxedUtilityCategorical(torch.tensor([0.0, math.nan]))
    d = RelaxedUtilityCategorical(PSI, "gumbel", 0.5)
    with pytest.raises(ValueError, match="simplex"):
        d.log_prob(torch.full((2, 4), 0.5, dtype=torch.float64))
    with pytest.raises(ValueError, match="shape"):
        d.log_prob(torch.full((2, 3), 1 / 3, dtype=torch.float64))
    with pytest.raises(NotImplementedError, match="closed form only for Gumbel"):
        RelaxedUtilityCategorical(PSI, "normal").log_prob(d.rsample())


def test_infer_shapes_gives_the_simplex_event():
    """Issue 25, item 14: the event shape is the K classes (was ())."""
    batch, event = RelaxedUtilityCategorical.infer_shapes(utility=(5, 7))
    assert (batch, event) == ((5,), (7,))
    assert RelaxedUtilityCategorical.infer_shapes(utility=(3, 1, 7), temperature=(4,)) == ((3, 4), (7,))
    d = RelaxedUtilityCategorical(torch.zeros(5, 7), "gumbel", 0.5)
    assert (d.batch_shape, d.event_shape) == (batch, event)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_a_subnormal_temperature_is_named(validation_on, dtype):
    """Issue 25, item 14: 1e-40 (float32: subnormal) passed the positivity check and rsample
    gave NaN."""
    t = torch.tensor(torch.finfo(dtype).tiny / 4, dtype=dtype)
    with pytest.raises(ValueError, match="temperature must be >= .* smallest normal number"):
        RelaxedUtilityCategorical(PSI.to(dtype), "gumbel", t)


@pytest.mark.parametrize("noise", NOISES)
@pytest.mark.parametrize("scale,temperature", [(1e30, 1e-37), (3e38, 1e-3), (1.0, 1.2e-38)])
def test_samples_stay_finite_at_extreme_utilities_and_temperatures(noise, scale, temperature):
    """Finite utilities and a normal temperature give a finite sample on the simplex (the
    softmax's input is shifted by its maximum before the division)."""
    psi = torch.tensor([[1.0, -1.0, 0.0], [-1.0, 0.5, 1.0]]) * scale
    x = RelaxedUtilityCategorical(psi, noise, temperature).rsample(torch.Size([3]))
    assert torch.isfinite(x).all() and torch.allclose(x.sum(-1), torch.ones(()), atol=1e-5)


@pytest.mark.parametrize("shape", [(-2,), (2, -1), ("2",), (1.5,), 3])
def test_a_bad_sample_shape_is_named(shape):
    """``rsample((-2,))`` failed with torch's 'negative dimension' message (issue 38); the
    categorical's ``sample`` shares the check (:func:`pyro_ar.numerics.check_sample_shape`)."""
    from pyro_ar.distributions import UtilityCategorical

    psi = torch.randn(3, 5)
    with pytest.raises(ValueError, match=r"sample_shape must be a sequence of integers >= 0"):
        RelaxedUtilityCategorical(psi, "gumbel", 0.5).rsample(shape)
    with pytest.raises(ValueError, match=r"sample_shape must be a sequence of integers >= 0"):
        UtilityCategorical(psi).sample(shape)

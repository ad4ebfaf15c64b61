"""pyro_ar.infer.elbo: argument checks of ClosedFormELBO (its closed form is tested with the
local guides, tests/infer/test_local_guides.py)."""

import math

import pytest
import torch

import pyro
from pyro.infer import SVI

from pyro_ar.infer import ClosedFormELBO, default_guide
from pyro_ar.models import LinearClassifier
from pyro_ar.likelihoods import AR

pytestmark = pytest.mark.usefixtures("seeded")


def test_vectorized_particles_are_refused_at_construction():
    """Issue 12: was an IndexError inside ``index_copy_`` at the first step."""
    with pytest.raises(ValueError, match=r"vectorize_particles=True with num_particles=4"):
        ClosedFormELBO(num_particles=4, vectorize_particles=True)


@pytest.mark.parametrize("num_particles, vectorize", [(1, True), (4, False)])
def test_supported_particle_settings_step(num_particles, vectorize):
    model = LinearClassifier(3, 4)
    elbo = ClosedFormELBO(num_particles=num_particles, vectorize_particles=vectorize, max_plate_nesting=1)
    svi = SVI(model, default_guide(model), pyro.optim.Adam({"lr": 0.1}), elbo)
    assert math.isfinite(svi.step(torch.randn(6, 3), torch.randint(0, 4, (6,))))


# ---------------------------------------------------------------- Gumbel or Gaussian q: the factor by quadrature
def _probit_setup(num_negatives, fit):
    from pyro_ar.datasets import make_linear_teacher
    from pyro_ar.infer.local_guides import ConditionalLocalGuide

    data = make_linear_teacher(64, 3, 12, "normal", seed=0)
    model = LinearClassifier(3, 12, likelihood=AR("normal", negatives=num_negatives), sparse=False)
    guide = ConditionalLocalGuide(model, negatives=None, create_plates=model.create_plates, fit=fit)
    return model, guide, data.x, data.y


def _weight_grads(elbo, model, guide, x, y, reps):
    out = []
    for _ in range(reps):
        loss = elbo.differentiable_loss(model, guide, x, y)
        w = pyro.param("weight").unconstrained()
        out.append(torch.autograd.grad(loss, [w])[0].flatten())
    return torch.stack(out)


@pytest.mark.parametrize("fit", ["gumbel", "gaussian"])
def test_local_q_factor_in_expectation_removes_the_draw_of_eps(fit):
    """Issue 27: with a Gumbel or Gaussian local q (probit's conditional guide) the factor's
    expectation replaces the single draw of eps. With the class sum exact, the gradient no longer
    varies from call to call; with gaussian_nodes=None (one Monte Carlo draw, the default) it does."""
    model, guide, x, y = _probit_setup(None, fit)
    quad = _weight_grads(ClosedFormELBO(local_updates=False, gaussian_nodes=16), model, guide, x, y, 5)
    mc = _weight_grads(ClosedFormELBO(local_updates=False, gaussian_nodes=None), model, guide, x, y, 5)
    assert quad.std(0).max() < 1e-10 * (1 + quad.abs().max())
    assert mc.std(0).max() > 1e-3 * mc.abs().max()


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
@pytest.mark.parametrize("fit", ["gumbel", "gaussian"])
def test_local_q_expectation_is_the_monte_carlo_mean(fit):
    """The quadrature bound equals the mean of the Monte Carlo bound (one eps draw per call,
    400 calls) within 4 standard errors, with a subsampled class sum."""
    model, guide, x, y = _probit_setup(4, fit)
    quad = torch.tensor([ClosedFormELBO(local_updates=False, gaussian_nodes=16).loss(model, guide, x, y) for _ in range(400)])
    mc = torch.tensor([ClosedFormELBO(local_updates=False, gaussian_nodes=None).loss(model, guide, x, y)
                       for _ in range(400)])
    se = (quad.var() / 400 + mc.var() / 400).sqrt()
    assert (quad.mean() - mc.mean()).abs() < 4 * se
    assert quad.var() < mc.var()  # (the class subsample's variance remains in both)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_gaussian_nodes_named_error(bad):
    with pytest.raises(ValueError, match="gaussian_nodes"):
        ClosedFormELBO(gaussian_nodes=bad)

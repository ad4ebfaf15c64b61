"""pyro_ar.infer.elbo: argument checks of ClosedFormELBO (its closed form is tested with the
local guides, tests/infer/test_local_guides.py)."""

import math

import pytest
import torch

import pyro
from pyro.infer import SVI

from pyro_ar.infer import ClosedFormELBO, default_guide
from pyro_ar.models import LinearClassifier

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

"""pyro_ar.infer.default_guide: the one choice of guide, by the model's class (issue 28)."""

import pytest
import torch

from pyro_ar.infer import ClassSubsampledNormal, GumbelLocalGuide, LatentGuide, default_guide, empty_guide
from pyro_ar.infer.local_guides import ConditionalLocalGuide
from pyro_ar.models import (
    BayesianLinearClassifier,
    BayesianNeuralClassifier,
    CategoricalLatentGP,
    CategoricalLatentModel,
    LinearClassifier,
)
from pyro_ar.likelihoods import AR


@pytest.mark.parametrize("make, guide", [
    (lambda: LinearClassifier(3, 10), GumbelLocalGuide),
    (lambda: LinearClassifier(3, 10, likelihood=AR("normal")), ConditionalLocalGuide),
    (lambda: BayesianLinearClassifier(3, 10), ClassSubsampledNormal),
    (lambda: BayesianNeuralClassifier(torch.nn.Identity(), 3, 10), ClassSubsampledNormal),
    # regression: before, pyro_ar.infer.default_guide gave a latent model the local guide of its
    # noise sites (no q(omega)); only the model's own default_guide() method knew LatentGuide
    (lambda: CategoricalLatentModel(50, 2), LatentGuide),
    (lambda: CategoricalLatentGP([20, 30], 2), LatentGuide),
])
def test_the_guide_follows_the_model_class(make, guide):
    assert type(default_guide(make())) is guide


def test_a_model_without_local_latent_gets_the_empty_guide():
    assert default_guide(LinearClassifier(3, 10, likelihood="exact")) is empty_guide


def test_a_model_class_registers_its_own_guide():
    class MyModel(LinearClassifier):
        pass

    def my_guide(*args, **kwargs):
        return None

    @default_guide.register
    def _(model: MyModel, **kwargs):
        return my_guide

    assert default_guide(MyModel(3, 10)) is my_guide  # (a class of this test only)
    assert type(default_guide(LinearClassifier(3, 10))) is GumbelLocalGuide  # the others unchanged


def test_no_guide_for_an_object_that_is_no_model():
    with pytest.raises(TypeError, match=r"default_guide: no guide is registered for model='psi' \(a str\)"):
        default_guide("psi")

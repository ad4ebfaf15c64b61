"""Every model of pyro_ar.models passes the shipped contract, pyro_ar.testing.ModelContract.

One subclass per configuration (a model class may have several: likelihoods, noises, weights);
each defines only ``make_model()`` and ``make_data()``. ``test_every_model_has_a_contract``
fails when a model is added to ``pyro_ar.models.__all__`` without a contract subclass here.
"""

import inspect
import sys

import pytest
import torch

import pyro

import pyro_ar.models as models
from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.likelihoods import OVE, Bouchard
from pyro_ar.models import (BayesianLinearClassifier, BayesianNeuralClassifier, BigramLanguageModel,
                            CategoricalLatentGP, CategoricalLatentModel, CategoricalModel, LatentCategoricalModel,
                            LinearClassifier, NeuralClassifier)
from pyro_ar.negatives import SharedNegatives
from pyro_ar.testing import ModelContract
from pyro_ar.likelihoods import AR
from pyro_ar.models import SessionEncoder, SparseGPMap

pytestmark = pytest.mark.usefixtures("one_thread")

N, D, K, B = 40, 3, 12, 8
CARDS = [6, 6, 3]


def _body():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(D, 4), torch.nn.Tanh())


class LinearData:
    def make_data(self):
        d = make_linear_teacher(N, D, K, seed=0)
        return d.x, d.y


class TestLinearARGumbel(LinearData, ModelContract):
    def make_model(self):
        return LinearClassifier(D, K, likelihood=AR(negatives=3), subsample_size=B, sparse=True)


class TestLinearARNormalMAP(LinearData, ModelContract):
    def make_model(self):
        return LinearClassifier(D, K, likelihood=AR("normal", negatives=3), weights="map", subsample_size=B,
                                sparse=True)


class TestLinearOVEShared(LinearData, ModelContract):
    def make_model(self):
        return LinearClassifier(D, K, likelihood=OVE(SharedNegatives(4)), subsample_size=B, sparse=True)


class TestLinearBouchard(LinearData, ModelContract):
    def make_model(self):
        return LinearClassifier(D, K, likelihood=Bouchard(negatives=3), subsample_size=B, sparse=True)


class TestLinearBayes(LinearData, ModelContract):
    def make_model(self):
        return LinearClassifier(D, K, likelihood=AR("logistic", negatives=3), weights="bayes",
                                subsample_size=B)


class TestBigram(ModelContract):
    def make_model(self):
        return BigramLanguageModel(K, 4, likelihood=AR(negatives=SharedNegatives(3)), subsample_size=B)

    def make_data(self):
        g = torch.Generator().manual_seed(0)
        prev = torch.randint(0, K, (N,), generator=g)
        return prev, (prev * 3 + torch.randint(0, 2, (N,), generator=g)) % K


class TestBayesianLinear(LinearData, ModelContract):
    def make_model(self):
        return BayesianLinearClassifier(D, K, likelihood=AR(negatives=3), subsample_size=B)


class TestNeural(LinearData, ModelContract):
    def make_model(self):
        return NeuralClassifier(_body(), 4, K, likelihood=AR(negatives=3), subsample_size=B)


class TestBayesianNeural(LinearData, ModelContract):
    def make_model(self):
        return BayesianNeuralClassifier(_body(), 4, K, likelihood=AR(negatives=3), subsample_size=B)


class TestCategoricalLatentModel(ModelContract):
    def make_model(self):
        torch.manual_seed(0)
        return CategoricalLatentModel(K, 2, likelihood=AR(negatives=SharedNegatives(3)), subsample_size=B,
                                      hidden_dim=8)

    def make_data(self):
        g = torch.Generator().manual_seed(0)
        items = torch.randint(0, K, (N, 4), generator=g)
        items[::3, 3] = -1                                     # ragged sessions
        return items, torch.randint(0, K, (N, 2), generator=g)  # held-out items


class TestCategoricalLatentGP(ModelContract):
    def make_model(self):
        torch.manual_seed(0)
        return CategoricalLatentGP(CARDS, 2, likelihood=AR(negatives=SharedNegatives(2)),
                                   utility=SparseGPMap(2, 4), subsample_size=B,
                                   posterior=SessionEncoder(sum(CARDS), 2, hidden_dim=8))

    def make_data(self):
        g = torch.Generator().manual_seed(0)
        x = torch.stack([torch.randint(0, k, (N,), generator=g) for k in CARDS], 1)
        target = torch.full_like(x, -1)
        target[:, 2], target[::2, 0] = x[:, 2], x[::2, 0]       # impute variable 2 and half of 0
        return x.masked_fill(target >= 0, -1), target


class TestClassShardedLinear(LinearData, ModelContract):
    """One process: the only shard holds every class (the sharded paths with one rank)."""

    def make_model(self):
        from pyro_ar.distributed import ClassShardedLinearClassifier

        return ClassShardedLinearClassifier(D, K, likelihood=AR(negatives=SharedNegatives(3)),
                                            subsample_size=B)


CONTRACTS = [obj for obj in vars(sys.modules[__name__]).values()
             if inspect.isclass(obj) and issubclass(obj, ModelContract) and obj is not ModelContract]


def test_every_model_has_a_contract():
    """Each concrete model class of pyro_ar.models.__all__ and pyro_ar.distributed.__all__ is
    built by some contract's make_model()."""
    import pyro_ar.distributed as distributed

    abstract = {CategoricalModel, LatentCategoricalModel}
    exported = {obj for module in (models, distributed) for obj in (getattr(module, n) for n in module.__all__)
                if inspect.isclass(obj) and issubclass(obj, CategoricalModel) and obj not in abstract}
    covered = set()
    for contract in CONTRACTS:
        pyro.clear_param_store()
        covered.add(type(contract().make_model()))
    pyro.clear_param_store()
    assert exported - covered == set(), f"models without a ModelContract subclass: {exported - covered}"


@pytest.mark.parametrize("contract", [TestLinearARGumbel, TestLinearOVEShared, TestBigram], ids=lambda c: c.__name__)
def test_sample_weight_counts_a_datapoint_as_copies(contract):
    """Full batch, every class: the loss with weight 2 on datapoint 0 and 0 on datapoint 1
    equals the loss on the data set where datapoint 0 appears twice and 1 not at all
    (deterministic: exact class sums, closed-form bound at the initial eta)."""
    x, y = contract().make_data()
    w = torch.ones(N)
    w[0], w[1] = 2.0, 0.0
    keep = torch.cat([torch.tensor([0, 0]), torch.arange(2, N)])
    losses = []
    for args in ((x, y, w), (x[keep], y[keep])):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = contract().make_model()
        model.subsample_size = None
        if model.likelihood.sampler.num_negatives is not None:
            model.likelihood.sampler.num_negatives = None
        losses.append(default_elbo(local_updates=False).loss(model, default_guide(model), *args))
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)


def test_class_subsampled_weights_reject_sample_weight():
    x, y = LinearData().make_data()
    with pytest.raises(ValueError, match="sample_weight"):
        BayesianLinearClassifier(D, K, likelihood=AR(negatives=3), subsample_size=B)(x, y, torch.ones(N))

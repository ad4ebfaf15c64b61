"""Every likelihood object of pyro_ar.likelihoods passes the shipped contract,
pyro_ar.testing.LikelihoodContract (one subclass per configuration, each defining only
``make_likelihood()``); ``test_every_likelihood_has_a_contract`` fails when a Likelihood
class is added to ``pyro_ar.likelihoods.__all__`` without a contract subclass here."""

import inspect
import sys

import pytest
import torch

import pyro

import pyro_ar.likelihoods as likelihoods
from pyro_ar.likelihoods import (AR, OVE, Bouchard, Exact, GaussianBouchard, JaakkolaJordan, Likelihood,
                                 LocalReparameterization, Sampled)
from pyro_ar.negatives import SharedNegatives
from pyro_ar.testing import LikelihoodContract

pytestmark = pytest.mark.usefixtures("one_thread")


class TestARGumbel(LikelihoodContract):
    def make_likelihood(self):
        return AR(negatives=SharedNegatives(3))


class TestARNormalAllClasses(LikelihoodContract):
    def make_likelihood(self):
        return AR("normal")


class TestExact(LikelihoodContract):
    def make_likelihood(self):
        return Exact()


class TestExactLogistic(LikelihoodContract):
    def make_likelihood(self):
        return Exact("logistic")


class TestOVE(LikelihoodContract):
    def make_likelihood(self):
        return OVE(negatives=3)


class TestSampled(LikelihoodContract):
    is_lower_bound = False  # the sampled softmax is biased, neither a bound nor unbiased

    def make_likelihood(self):
        return Sampled(negatives=SharedNegatives(3))


class TestBouchardLocal(LikelihoodContract):
    def make_likelihood(self):
        return Bouchard("local", negatives=3)


class TestBouchardOptimal(LikelihoodContract):
    def make_likelihood(self):
        return Bouchard("optimal")


class TestJaakkolaJordan(LikelihoodContract):
    num_classes = 2

    def make_likelihood(self):
        return JaakkolaJordan()


class TestGaussianBouchard(LikelihoodContract):
    def make_likelihood(self):
        return GaussianBouchard("local", negatives=3)


class TestLocalReparameterization(LikelihoodContract):
    def make_likelihood(self):
        return LocalReparameterization()


class TestShardedAR(LikelihoodContract):
    def make_likelihood(self):
        from pyro_ar.distributed import ShardedAR

        return ShardedAR("gumbel", negatives=SharedNegatives(3))


CONTRACTS = [obj for obj in vars(sys.modules[__name__]).values()
             if inspect.isclass(obj) and issubclass(obj, LikelihoodContract) and obj is not LikelihoodContract]


def test_every_likelihood_has_a_contract():
    """Each Likelihood class of pyro_ar.likelihoods.__all__ and pyro_ar.distributed.__all__ is
    built by some contract's make_likelihood()."""
    import pyro_ar.distributed as distributed

    exported = {obj for module in (likelihoods, distributed) for obj in (getattr(module, n) for n in module.__all__)
                if inspect.isclass(obj) and issubclass(obj, Likelihood) and obj is not Likelihood}
    covered = {type(contract().make_likelihood()) for contract in CONTRACTS}
    assert exported - covered == set(), f"likelihoods without a LikelihoodContract subclass: {exported - covered}"


class _Overstated(Exact):
    """Exact plus 0.05 nats per datapoint: no longer a bound (the contract must notice)."""

    def sample(self, site, utility, obs, data):
        labels = super().sample(site, utility, obs, data)
        if obs is not None:
            pyro.factor(f"{site}_overstated", torch.full(obs.shape, 0.05))
        return labels


class _OverstatedContract(LikelihoodContract):
    def make_likelihood(self):
        return _Overstated()


def test_the_bound_check_catches_a_likelihood_above_the_exact_one():
    with pytest.raises(AssertionError, match="above the exact log-likelihood"):
        _OverstatedContract().test_elbo_is_below_the_exact_log_likelihood()



@pytest.mark.parametrize("make", [AR, OVE, Sampled, Bouchard, GaussianBouchard], ids=lambda c: c.__name__)
@pytest.mark.parametrize("keyword", ["num_negatives", "strategy", "proposal"])
def test_a_former_negatives_keyword_is_a_type_error_naming_negatives(make, keyword):
    """``AR(num_negatives=5)`` and the like name where the keyword went (``negatives=``), as
    the models and distributions do, instead of Python's bare "unexpected keyword"."""
    with pytest.raises(TypeError, match=f"^{make.__name__} got {keyword}=5: .*negatives="):
        make(**{keyword: 5})


def test_an_unknown_keyword_keeps_pythons_error_and_exact_is_not_sent_to_negatives():
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        AR(foo=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'num_negatives'"):
        Exact(num_negatives=5)  # (Exact takes no negatives: no advice to give them)
    assert AR(negatives=5).num_negatives == 5

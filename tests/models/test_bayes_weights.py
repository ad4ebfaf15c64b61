"""Bayesian weights are one concept with two weight strategies (issue 28).

``LinearClassifier(weights="bayes")`` (every row of W, b a sample site, O(K) per step, any
Pyro inference) and ``BayesianLinearClassifier`` (the class-subsampled strategy, O(|C|) per
step) are the same probabilistic model: at the same W, b and noise their log joint is the
same, with the same sites; the strategies differ only in which rows a step traces (all K
rows as one event, or the rows of a ``"classes"`` plate). The guide follows the strategy.
Exact comparisons (no Monte Carlo): the log joints are sums of the same terms.
"""

import pytest
import torch

import pyro.poutine as poutine

from pyro_ar.infer import ClassSubsampledNormal, default_guide
from pyro_ar.models import BayesianLinearClassifier, BayesianNeuralClassifier, LinearClassifier, NeuralClassifier
from pyro_ar.likelihoods import Exact
from pyro_ar.models import Bayes
from pyro_ar.models.base import CategoricalModel, PerClassWeights
from pyro_ar.models.bayesian_linear import ClassSubsampledWeights
from pyro_ar.likelihoods import AR

pytestmark = pytest.mark.usefixtures("seeded", "one_thread", "validation_on")

D, K, N = 3, 6, 20


def _sites(trace):
    """name -> (value shape, batch shape + event shape) of the sample sites (no plates)."""
    return {n: (s["value"].shape, s["fn"].batch_shape + s["fn"].event_shape)
            for n, s in trace.nodes.items() if s["type"] == "sample" and hasattr(s["fn"], "event_shape")}


@pytest.mark.parametrize("likelihood", ["exact", "ar"])
@pytest.mark.parametrize("noise", ["gumbel", "normal"])
@pytest.mark.parametrize("body", [False, True])
def test_both_spellings_of_bayesian_weights_are_one_model(likelihood, noise, body):
    x, y = torch.randn(N, D), torch.randint(0, K, (N,))
    # (AR: every class, so the class-subsampled strategy's plate is full)
    lik = AR(noise) if likelihood == "ar" else Exact(noise)
    if body:
        per_class = NeuralClassifier(torch.nn.Identity(), D, K, lik, weights=Bayes(prior_scale=2.0))
        subsampled = BayesianNeuralClassifier(torch.nn.Identity(), D, K, lik, prior_scale=2.0)
    else:
        per_class = LinearClassifier(D, K, lik, weights=Bayes(prior_scale=2.0))
        subsampled = BayesianLinearClassifier(D, K, lik, prior_scale=2.0)
    assert isinstance(per_class.weight_strategy, PerClassWeights)
    assert isinstance(subsampled.weight_strategy, ClassSubsampledWeights)
    assert per_class.weights == subsampled.weights == "bayes"
    data = {"weight": torch.randn(K, D), "bias": torch.randn(K), "y_eps": torch.randn(N)}
    traces = [poutine.trace(poutine.condition(m, data)).get_trace(x, y) for m in (per_class, subsampled)]
    assert _sites(traces[0]) == _sites(traces[1])
    torch.testing.assert_close(traces[0].log_prob_sum(), traces[1].log_prob_sum())
    # the strategies differ in how the rows are traced: one (K, D) event, or K rows in a plate
    assert traces[0].nodes["weight"]["fn"].event_shape == (K, D)
    assert traces[1].nodes["weight"]["fn"].batch_shape == (K,)


def test_the_guide_follows_the_weight_strategy():
    """A model with the class-subsampled strategy gets ClassSubsampledNormal, whatever its
    class; the per-class strategy an AutoNormal (in an AutoGuideList with the local guide)."""
    class Subsampled(CategoricalModel):  # not a BayesianLinearClassifier: only its strategy
        weight_strategy = ClassSubsampledWeights()

        def __init__(self, inner):
            self._inner = inner

        def __getattr__(self, name):
            return getattr(self.__dict__["_inner"], name)

    model = Subsampled(BayesianLinearClassifier(D, K, likelihood=AR(negatives=2)))
    assert not isinstance(model, BayesianLinearClassifier)
    assert type(default_guide(model)) is ClassSubsampledNormal  # (before: an AutoNormal list)
    guide = default_guide(LinearClassifier(D, K, weights="bayes", likelihood=AR(negatives=2)))
    assert type(guide).__name__ == "AutoGuideList" and type(guide[0]).__name__ == "AutoNormal"
    with pytest.raises(ValueError, match="class-subsampled weight strategy"):
        ClassSubsampledNormal(LinearClassifier(D, K, weights="bayes"))  # the per-class strategy

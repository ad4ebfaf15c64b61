"""The weight strategies are scikit-learn parameters (issue 40): get_params gives back what the
constructor took, set_params checks as the constructor does, clone copies them."""

import pytest

from pyro_ar.models.weights import MAP, MLE, Bayes, GaussianWeights

STRATEGIES = [MLE(), MAP(), MAP(0.5, num_prior_classes=3, penalize_bias=True, num_prior_entries=7),
              Bayes(2.0), GaussianWeights(0.1)]


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
def test_get_params_rebuilds_an_equal_strategy(strategy):
    params = strategy.get_params()
    assert set(params) == set(type(strategy)._fields)
    again = type(strategy)(**params)
    assert again == strategy and again is not strategy
    assert all(again.get_params()[k] is v for k, v in params.items())  # (scikit-learn's clone checks this)


@pytest.mark.parametrize("strategy", STRATEGIES, ids=repr)
def test_sklearn_clone_copies_a_strategy(strategy):
    clone = pytest.importorskip("sklearn.base").clone
    copy = clone(strategy)
    assert copy == strategy and copy is not strategy


def test_set_params_checks_as_the_constructor_does():
    strategy = MAP(0.5)
    assert strategy.set_params(prior_scale=2.0, penalize_bias=False) is strategy
    assert strategy == MAP(2.0, penalize_bias=False)
    for bad, message in (({"prior_scale": -1.0}, "prior_scale"), ({"penalize_bias": 1}, "penalize_bias"),
                         ({"num_prior_classes": 0}, "num_prior_classes"), ({"rank": 3}, "no parameter 'rank'")):
        with pytest.raises(ValueError, match=message):
            strategy.set_params(**bad)
    assert strategy == MAP(2.0, penalize_bias=False)  # (a refused value changes nothing)
    with pytest.raises(ValueError, match="no parameter 'prior_scale'"):
        MLE().set_params(prior_scale=1.0)

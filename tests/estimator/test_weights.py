"""One weight concept (issue 40): ARClassifier takes the models' weight strategies (MLE(),
MAP(...), Bayes(...)) as ``weights=``, alone or inside ``Weights`` (the estimator's options
around one); both are nested scikit-learn parameters, save as plain data, and a wrong value
names ``weights`` and the accepted forms."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

sklearn = pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402

from pyro_ar import ARClassifier  # noqa: E402
from pyro_ar.estimator import Weights  # noqa: E402
from pyro_ar.estimator._model import linear_model  # noqa: E402
from pyro_ar.files import atomic_save  # noqa: E402
from pyro_ar.likelihoods import Exact  # noqa: E402
from pyro_ar.models import MAP, MLE, Bayes, GaussianWeights, LinearClassifier  # noqa: E402

FAST = dict(min_steps=0, max_epochs=2, random_state=0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(120, 4)
    return X, X[:, :3].argmax(1)


@pytest.mark.parametrize("strategy,same", [
    (MAP(0.5), Weights("map", prior_scale=0.5)),
    (MLE(), "mle"),
    (Bayes(1.0), Weights("bayes", prior_scale=1.0)),
])
def test_a_model_strategy_fits_as_the_weights_it_stands_for(data, strategy, same):
    """``weights=MAP(0.5)`` is ``Weights("map", prior_scale=0.5)``: same seed, same fit."""
    X, y = data
    a = ARClassifier(weights=strategy, **FAST).fit(X, y)
    b = ARClassifier(weights=same, **FAST).fit(X, y)
    assert a.prior_scale_ == b.prior_scale_
    np.testing.assert_array_equal(a.predict_proba(X), b.predict_proba(X))


def test_a_strategy_without_a_prior_scale_takes_the_search(data):
    """``MAP()`` leaves s to the estimator: the held-out search over the grid, as ``"map"``."""
    X, y = data
    a = ARClassifier(weights=MAP(), **FAST).fit(X, y)
    b = ARClassifier(weights="map", **FAST).fit(X, y)
    assert a.prior_scale_scores_ is not None and a.prior_scale_scores_ == b.prior_scale_scores_


def test_a_strategy_is_a_nested_sklearn_parameter():
    """get_params(deep=True) lists a strategy's fields, set_params checks and sets them, clone
    copies them (scikit-learn's clone also checks that get_params returns what __init__ got)."""
    clf = ARClassifier(weights=MAP(0.1, penalize_bias=True))
    params = clf.get_params(deep=True)
    assert params["weights__prior_scale"] == 0.1 and params["weights__penalize_bias"] is True
    clf.set_params(weights__prior_scale=0.3)
    copy = clone(clf)
    assert copy.weights is not clf.weights and copy.weights == MAP(0.3, penalize_bias=True)
    with pytest.raises(ValueError, match="prior_scale"):
        clf.set_params(weights__prior_scale=-1.0)
    with pytest.raises(ValueError, match="no parameter 'rank'"):
        clf.set_params(weights__rank=3)
    assert clf.weights == MAP(0.3, penalize_bias=True)  # (a refused value changes nothing)


def test_weights_around_a_strategy_nests_both():
    """``Weights(MAP(...), rank=...)``: its own parameters and the strategy's under ``kind__``."""
    clf = ARClassifier(weights=Weights(MAP(penalize_bias=True), rank=4))
    params = clf.get_params(deep=True)
    assert params["weights__rank"] == 4 and params["weights__kind__penalize_bias"] is True
    clf.set_params(weights__kind__num_prior_classes=5, weights__prior_scale=[0.5, 2.0])
    copy = clone(clf)
    assert copy.weights == Weights(MAP(penalize_bias=True, num_prior_classes=5), prior_scale=[0.5, 2.0], rank=4)
    assert copy.weights.kind is not clf.weights.kind
    with pytest.raises(ValueError, match="nested"):
        Weights("map").set_params(kind__prior_scale=1.0)


def test_the_strategy_options_reach_the_model():
    """The strategy's own options (``penalize_bias``, ``num_prior_classes``) reach the model
    the estimator builds; the estimator's default leaves the bias unpenalised."""
    est = SimpleNamespace()
    for given, penalized in ((MAP(penalize_bias=True, num_prior_classes=2), True), ("map", False)):
        weights = ARClassifier(weights=given)._checked_params()[0]
        model = linear_model(est, weights, 3, 4, Exact("gumbel"), prior_scale=0.5)
        assert model.penalize_bias is penalized and model.prior_scale == 0.5
        assert model.num_prior_classes == (2 if penalized else None)


@pytest.mark.parametrize("bad,message", [
    (3, "got 3"), ("laplace", "got 'laplace'"), (GaussianWeights(), "got GaussianWeights"), (MAP, "got <class"),
    (Weights(kind="nope"), "got 'nope'"), (Weights(MAP(0.1), prior_scale=0.2), "prior scale is given twice"),
])
def test_a_wrong_weights_names_weights_and_the_accepted_forms(bad, message):
    with pytest.raises(ValueError, match=message) as info:
        ARClassifier(weights=bad)._checked_params()
    text = str(info.value)
    assert "weights" in text and ("MAP(" in text or "prior_scale" in text), text


def test_a_model_given_the_estimators_weights_says_what_to_pass():
    with pytest.raises(ValueError, match="pass its kind"):
        LinearClassifier(3, 4, weights=Weights("map", prior_scale=0.1))


@pytest.mark.parametrize("weights", [MAP(0.5, penalize_bias=True), Weights(Bayes(1.0), num_posterior_samples=3), MLE()])
def test_strategies_save_as_plain_data(tmp_path, data, weights):
    """Format version 6 stores a strategy (alone or as a Weights' kind) as plain data: the file
    loads with weights_only=True and gives an equal strategy and the same predictions."""
    X, y = data
    clf = ARClassifier(weights=weights, **FAST).fit(X, y)
    clf.save(tmp_path / "m.pt")
    assert torch.load(tmp_path / "m.pt", weights_only=True)["version"] == 6
    loaded = ARClassifier.load(tmp_path / "m.pt")
    assert loaded.weights == clf.weights and type(loaded.weights) is type(clf.weights)
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


@pytest.mark.parametrize("old,now", [
    ({"__weights__": {"kind": "bayes", "prior_scale": 1.0, "rank": "auto", "num_posterior_samples": 3}},
     Weights("bayes", prior_scale=1.0, num_posterior_samples=3)),
    ("mle", "mle"),
])
def test_version_5_files_still_load(tmp_path, data, old, now):
    """A version 5 file: the payload of this version with ``weights`` written as version 5
    wrote it (a name, or a Weights of a named kind as plain data) loads to the same fit."""
    X, y = data
    clf = ARClassifier(weights=now, **FAST).fit(X, y)
    clf.save(tmp_path / "m.pt")
    d = torch.load(tmp_path / "m.pt", weights_only=True)
    d["version"], d["hyperparameters"]["weights"] = 5, old
    atomic_save(d, tmp_path / "m.pt")
    loaded = ARClassifier.load(tmp_path / "m.pt")
    assert loaded.weights == now
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))

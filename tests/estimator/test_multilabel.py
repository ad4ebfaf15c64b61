"""ARClassifier on label sets: the pick-all-labels objective with choice sets (pyro_ar.label_sets) end to end."""

import inspect
import os
from contextlib import nullcontext

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from pyro_ar.estimator import Weights
from pyro_ar import ARClassifier
from pyro_ar.label_sets import label_pairs

FAST = dict(min_steps=200, max_epochs=5, batch_size=256, random_state=0)


def _teacher(n=500, D=12, K=8, labels=2, seed=0):
    """Each row's ``labels`` largest teacher utilities (Gumbel noise) are its label set."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, D)
    S = X @ rng.randn(K, D).T + rng.gumbel(size=(n, K))
    return X, (S >= np.sort(S, 1)[:, [-labels]]).astype(np.int64)


def test_every_form_of_the_targets_gives_the_same_fit_and_answers_in_its_form():
    X, Y = _teacher()
    sets = [np.flatnonzero(r).tolist() for r in Y]
    fits = {form: ARClassifier(**FAST).fit(X, y) for form, y in
            [("dense", Y), ("sparse", sp.csr_matrix(Y)), ("sets", sets)]}
    top = fits["dense"].predict_top_k(X, 3)
    for form, clf in fits.items():
        assert clf.multilabel_ and clf.labels_per_row_ == 2.0
        assert np.array_equal(clf.classes_, np.arange(8))
        assert np.array_equal(clf.predict_top_k(X, 3), top)
    assert isinstance(fits["dense"].predict(X[:4]), np.ndarray) and fits["dense"].predict(X[:4]).shape == (4, 8)
    assert sp.issparse(fits["sparse"].predict(X[:4]))
    assert fits["sets"].predict(X[:4]) == [sorted(r) and list(r) for r in top[:4, :2].tolist()]
    assert (fits["dense"].predict(X).sum(1) == 2).all()  # k = the mean training label-set size


def test_label_sets_of_one_label_each_are_a_one_label_fit():
    """Rows with one label each: the choice set of every pair is every class, so the fit is the
    same SVI run as a one-label fit (no standardisation, which is fitted on rows for label
    sets, and no prior-scale search, whose held-out split keeps a row's pairs together)."""
    X, Y = _teacher(n=200, labels=1)
    y = Y.argmax(1)
    a = ARClassifier(weights=Weights('map', prior_scale=1.0), standardize=False, **FAST).fit(X, Y)
    b = ARClassifier(weights=Weights('map', prior_scale=1.0), standardize=False, **FAST).fit(X, y)
    for name, t in a.param_state_["params"].items():
        np.testing.assert_array_equal(t.detach().numpy(), b.param_state_["params"][name].detach().numpy())
    assert a.log_likelihood(X, Y) == pytest.approx(b.log_likelihood(X, y), rel=1e-12)


@pytest.mark.parametrize("likelihood", ["auto", "ar"])
def test_the_exact_fit_of_label_sets_trains_on_each_pairs_choice_set(monkeypatch, likelihood):
    """The exact softmax trains every (row, label) pair on its choice set (the row's other labels
    out of the normaliser, pyro_ar.label_sets.ChoiceSets) -- the pairs it trains on, no
    held-out ones --; A&R, whose negatives come from all K classes, on the plain softmax."""
    import pyro_ar.estimator.classifier as module

    seen, original = [], module.training_svi

    def spy(*args, **kwargs):
        seen.append(inspect.signature(original).bind(*args, **kwargs).arguments.get("choice_sets"))
        return original(*args, **kwargs)
    monkeypatch.setattr(module, "training_svi", spy)
    X, Y = _teacher(n=200, labels=3)
    with pytest.warns(UserWarning) if likelihood == "ar" else nullcontext():  # (AR with an exact class sum)
        clf = ARClassifier(likelihood=likelihood, weights=Weights('map', prior_scale=1.0), early_stopping=True,
                           **FAST).fit(X, Y)
    (choice_sets,) = seen
    if likelihood == "ar":
        assert clf.likelihood_ == "ar" and choice_sets is None
        return
    assert clf.likelihood_ == "exact"
    p = label_pairs(Y)
    assert 0 < len(choice_sets) < len(p.rows)  # (the training rows' pairs: early stopping held some out)
    mask = choice_sets.excluded(torch.arange(len(choice_sets)))
    assert (mask.sum(1) == 2).all()  # every row has 3 labels: each pair leaves out the other two
    assert np.isfinite(clf.best_validation_score_) and clf.best_validation_score_ < 0


def test_label_sets_of_any_hashable_labels_and_the_scores():
    X, Y = _teacher()
    names = np.array(["w%d" % k for k in range(8)])
    sets = [set(names[np.flatnonzero(r)]) for r in Y]
    clf = ARClassifier(**FAST).fit(X, sets)
    assert clf.classes_.tolist() == sorted(names.tolist())
    top1 = clf.predict_top_k(X, 1)[:, 0]
    assert clf.score(X, sets) == np.mean([t in s for t, s in zip(top1, sets)])  # P@1
    assert clf.score(X, sets) > 0.8  # chance is 2/8
    proba = clf.predict_proba(X)
    rows, cols = np.nonzero(Y)
    assert clf.log_likelihood(X, sets) == pytest.approx(np.log(proba[rows, cols]).mean(), rel=1e-9)
    unseen = [s | {"never"} for s in sets]  # a label outside classes_ is never predicted: same P@1
    assert clf.score(X, unseen) == clf.score(X, sets)
    with pytest.raises(ValueError, match="label not seen during fit: 'never'"):
        clf.log_likelihood(X, unseen)


def test_validation_split_keeps_each_row_on_one_side():
    X, Y = _teacher(n=300, labels=3)
    clf = ARClassifier(early_stopping={'validation_fraction': 0.2}, **FAST)
    clf.fit(X, Y)
    rows = label_pairs(Y).rows
    data = type("D", (), {"codes": label_pairs(Y).labels, "groups": rows})
    train, val = clf._split(data, np.random.RandomState(0))
    assert not set(rows[train]) & set(rows[val])
    assert len(set(rows[val])) == 60 and len(train) + len(val) == len(rows)
    assert clf.validation_scores_ and np.isfinite(clf.best_validation_score_)


def test_save_and_load_keep_the_label_sets(tmp_path):
    X, Y = _teacher(n=200)
    sets = [np.flatnonzero(r).tolist() for r in Y]
    clf = ARClassifier(**FAST).fit(X, sets)
    path = os.path.join(tmp_path, "m.pt")
    clf.save(path)
    back = ARClassifier.load(path)
    assert back.multilabel_ and back.predict(X[:5]) == clf.predict(X[:5])
    single = ARClassifier(**FAST).fit(X, Y.argmax(1))
    single.save(path)
    assert not ARClassifier.load(path).multilabel_


def test_partial_fit_on_label_sets():
    X, Y = _teacher(n=400)
    sets = [np.flatnonzero(r).tolist() for r in Y]
    clf = ARClassifier(max_epochs=5, random_state=0)
    with pytest.raises(ValueError, match="classes="):
        clf.partial_fit(X[:200], sets[:200])
    clf.partial_fit(X[:200], sets[:200], classes=list(range(8))).partial_fit(X[200:], sets[200:])
    assert clf.multilabel_ and clf.n_partial_fits_ == 2 and clf.score(X, sets) > 0.5
    with pytest.raises(ValueError, match="continues a fit on label sets, got one label per row"):
        clf.partial_fit(X, Y.argmax(1))
    with pytest.raises(ValueError, match="label indicator with 9 columns, but the classifier has 8 classes"):
        clf.partial_fit(X, np.hstack([Y, Y[:, :1]]))


@pytest.mark.parametrize("y, match", [
    ([[]] * 20, "all empty: there is nothing to fit"),
    ([[0, None]] * 20, "None or NaN, which is no label"),
    ([[0, float("nan")]] * 20, "None or NaN, which is no label"),
    (np.eye(19, 4), "X has 20 rows but y has 19 label sets"),
    (np.full((20, 3), 2), "entries must be 0 or 1"),
])
def test_bad_label_sets_are_named(y, match):
    with pytest.raises(ValueError, match=match):
        ARClassifier(**FAST).fit(np.random.RandomState(0).randn(20, 3), y)


def test_predict_top_k_checks_k():
    X, Y = _teacher(n=100)
    clf = ARClassifier(**FAST).fit(X, Y.argmax(1))  # also after a one-label fit
    assert clf.predict_top_k(X[:3], 2).shape == (3, 2)
    assert np.array_equal(clf.predict_top_k(X, 1)[:, 0], clf.predict(X))
    labels, probs = clf.predict_top_k(X, 3, return_proba=True)
    full = clf.predict_proba(X)
    positions = np.searchsorted(clf.classes_, labels)
    assert np.array_equal(labels, clf.predict_top_k(X, 3)) and probs.dtype == np.float64
    assert np.allclose(probs, np.take_along_axis(full, positions, 1), rtol=1e-5)  # float32 predict_proba
    assert (np.diff(probs, axis=1) <= 0).all() and np.allclose(probs[:, 0], full.max(1), rtol=1e-5)
    for k in (0, len(clf.classes_) + 1, 1.5, True):
        with pytest.raises(ValueError, match=r"k must be an integer in \[1, "):
            clf.predict_top_k(X, k)

"""The estimator's automatic choices (``pyro_ar.infer.selection``): the held-out split of the
prior-scale search."""

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import pyro_ar.estimator.classifier as classifier_module
from pyro_ar import ARClassifier
from pyro_ar.infer.selection import SEARCH_HOLDOUT, SEARCH_MIN_ROWS, search_holdout


@settings(max_examples=200, deadline=None)
@given(n=st.integers(2, 10**6), fraction=st.floats(0.01, 0.9))
def test_search_holdout_is_the_validation_fraction_raised_to_enough_rows(n, fraction):
    """Never below ``validation_fraction``; holds out SEARCH_MIN_ROWS rows, or SEARCH_HOLDOUT of
    them where that is fewer; raises the fraction only where ``validation_fraction`` falls short
    of that, and then to exactly that."""
    f = search_holdout(fraction, SimpleNamespace(codes=np.zeros(n), groups=None))
    target = min(SEARCH_HOLDOUT * n, SEARCH_MIN_ROWS)
    assert f >= fraction
    assert f * n >= target * (1 - 1e-12)
    if fraction * n < target:
        assert f == pytest.approx(target / n)
    else:
        assert f == fraction


def test_search_holdout_counts_labelled_rows_of_label_sets():
    """With label sets the held-out units are the rows (all pairs of a row on one side)."""
    groups = np.repeat(np.arange(2_000), 5)  # 2,000 rows of 5 labels: 10,000 pairs
    data = SimpleNamespace(codes=np.zeros(10_000), groups=groups)
    assert search_holdout(0.1, data) == pytest.approx(SEARCH_MIN_ROWS / 2_000)  # (10 % of the pairs would do)


def test_the_search_scores_the_scales_on_the_raised_split(monkeypatch):
    """A fit with ``prior_scale="auto"`` on 200 rows holds out 30 % of them (60 rows, not
    ``validation_fraction``'s 20) for the search, and the refit trains on all 200."""
    rng = np.random.RandomState(0)
    X = rng.randn(200, 3)
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    seen = []
    real = classifier_module.held_out_split

    def spy(codes, groups, fraction, rng, given=None):
        train_idx, val_idx = real(codes, groups, fraction, rng, given)
        seen.append((len(train_idx), len(val_idx)))
        return train_idx, val_idx

    monkeypatch.setattr(classifier_module, "held_out_split", spy)
    clf = ARClassifier(min_steps=0, max_epochs=5, batch_size=50, random_state=0).fit(X, y)
    assert seen == [(140, 60)]
    assert clf.n_steps_by_phase_["final_fit"] == round(0.7 * 5 * 4)  # _REFIT_BUDGET of 5 epochs of 200 rows


def _digits_excess(split):
    """``ARClassifier()``'s test log-loss over LogisticRegression's at its best C (standardised
    features, C on 10^-3 .. 10^2 in half-decades), minus 1, on the stratified 70/30 digits split
    of seed ``split``: the protocol of ``benchmarks/estimator_vs_sklearn.py --splits``."""
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=split, stratify=y)
    ours = log_loss(yte, ARClassifier(random_state=0).fit(Xtr, ytr).predict_proba(Xte))
    lr = min(log_loss(yte, make_pipeline(StandardScaler(), LogisticRegression(C=c)).fit(Xtr, ytr).predict_proba(Xte))
             for c in 10.0 ** np.arange(-3.0, 2.01, 0.5))
    return ours / lr - 1


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
def test_raw_digits_split_4_within_10_percent_of_the_best_logistic_regression():
    """The split where the search on 126 held-out rows chose a weak prior (+31.5 % over LR at
    its best C before ``search_holdout``; measured +0.2 % after it): issue 39's bound for the
    worst split, 10 %."""
    assert _digits_excess(4) < 0.10


@pytest.mark.slow
def test_raw_digits_over_five_splits_within_5_percent_of_the_best_logistic_regression():
    """Issue 39's targets on seeds 0-4 (claim estimator-vs-lr-splits-summary: mean -2.4 %,
    worst +5.7 %): the mean excess test log-loss over LR at its best C below 5 %, every split
    below 10 %."""
    excess = [_digits_excess(split) for split in range(5)]
    assert np.mean(excess) < 0.05 and max(excess) < 0.10, excess

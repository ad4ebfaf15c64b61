"""The estimator's path for sparse inputs whose full-rank W does not fit: W on the training
class-feature pattern, tf-idf rows, started at the class centroids (issue 24)."""

import numpy as np
import pytest
import scipy.sparse as sp

from pyro_ar.estimator import Weights
import pyro_ar.training_path as training_path
from pyro_ar import ARClassifier
from pyro_ar.features import apply_scaler, fit_scaler
from pyro_ar.training_path import choose_path, pattern_and_centroids


def _few_rows_per_class(seed=0, K=400, D=3000, N=1600, words=6):
    """Sparse bags of words, 4 rows per class: each class has 8 own words, each row draws
    `words` of them, plus 3 common words found in most rows and 2 random ones."""
    rng = np.random.RandomState(seed)
    own = rng.randint(10, D, size=(K, 8))
    y = np.repeat(np.arange(K), N // K)
    cols = np.concatenate([np.stack([rng.choice(own[k], words, replace=False) for k in y]),
                           rng.randint(10, size=(N, 3)), rng.randint(10, D, size=(N, 2))], 1)
    X = sp.csr_matrix((np.ones(cols.size), (np.repeat(np.arange(N), cols.shape[1]), cols.ravel())), shape=(N, D))
    X.sum_duplicates()
    X.data[:] = 1.0
    return X, y


def test_choose_path_takes_the_pattern_where_full_rank_does_not_fit():
    path = choose_path(75_000, 27_000, 27_000, nnz=900_000)
    assert path.weight_pattern and path.rank is None and path.sparse_inputs
    assert not choose_path(5_000, 1_800, 160, nnz=300_000).weight_pattern        # full rank fits
    assert choose_path(75_000, 27_000, 27_000).rank == 128                     # dense: low rank
    assert choose_path(75_000, 27_000, 27_000, nnz=900_000, rank=64).rank == 64  # an explicit rank is kept


def test_idf_scaler_weights_rare_features_and_rows_get_unit_norm():
    X = sp.csr_matrix(np.array([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))
    mean, scale = fit_scaler(X, sparse_inputs=True, idf=True)
    idf = np.log(5.0 / (1.0 + np.array([3.0, 1.0, 1.0])))
    assert np.allclose(1.0 / scale, idf) and not mean.any()
    Z = apply_scaler(X, mean, scale, normalize_rows=True).toarray()
    assert np.allclose(np.linalg.norm(Z[:3], axis=1), 1.0) and not Z[3].any()
    assert np.allclose(Z[0], idf * [1, 1, 0] / np.linalg.norm(idf * [1, 1, 0]))


@pytest.mark.parametrize("power, root", [(1.0, 1.0), (0.6, 1.0), (0.8, 0.5), (0.5, 0.25)])
def test_centroids_are_the_normalised_class_sums_on_the_pattern(power, root):
    """T s_k^q / ||s_k^q||^gamma, entry by entry, against a dense computation."""
    X, y = _few_rows_per_class(K=30, D=200, N=120)
    pattern, loc = pattern_and_centroids(X, y, 30, temperature=7.0, power=power, root=root)
    C = np.zeros((30, 200))
    np.add.at(C, y, X.toarray())
    C = C ** root
    C = 7.0 * C / np.linalg.norm(C, axis=1, keepdims=True) ** power
    assert np.allclose(pattern.dense(loc.double()).numpy(), C, atol=1e-5)
    assert len(pattern) == np.count_nonzero(C)


@pytest.fixture
def small_pattern_limit(monkeypatch):
    """Take the pattern path at test size (the real rule: 16 K D bytes above 2 GiB)."""
    monkeypatch.setattr(training_path, "FULL_RANK_MAX_BYTES", 1 << 16)


@pytest.mark.slow
def test_pattern_path_beats_the_low_rank_path_and_the_frequencies(small_pattern_limit):
    """Few rows per class (the WordNet regime at test size): held-out top-1 of the defaults
    on the pattern path against the low rank path the estimator took before (rank 128)."""
    X, y = _few_rows_per_class()
    test = np.arange(len(y)) % 4 == 0
    clf = ARClassifier(random_state=0).fit(X[~test], y[~test])
    assert clf.training_path_.weight_pattern
    low = ARClassifier(weights=Weights('map', rank=128), random_state=0).fit(X[~test], y[~test])
    acc, acc_low = clf.score(X[test], y[test]), low.score(X[test], y[test])
    ll = clf.log_likelihood(X[test], y[test])
    assert acc > 0.5 and acc > acc_low + 0.2, (acc, acc_low)
    assert ll > -np.log(400) + 2.0, ll


def test_pattern_path_saves_and_loads(small_pattern_limit, tmp_path):
    X, y = _few_rows_per_class(K=100, D=1000, N=400)
    clf = ARClassifier(random_state=0, max_epochs=2).fit(X, y)
    path = tmp_path / "m.pt"
    clf.save(path)
    loaded = ARClassifier.load(path)
    assert loaded.training_path_ == clf.training_path_ and loaded.row_normalize_
    assert clf.centroid_start_ is not None and loaded.centroid_start_ is None  # (not saved: only a fresh fit uses it)
    assert np.allclose(loaded.predict_proba(X[:50]), clf.predict_proba(X[:50]))
    loaded.partial_fit(X[:100], y[:100])  # continues on the stored pattern
    assert loaded.weight_pattern_.keys.equal(clf.weight_pattern_.keys)

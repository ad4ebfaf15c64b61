"""ARClassifier on scipy.sparse input: the path choice (sparse inputs, rank, negatives),
training and prediction on the sparse / low-rank path, save / load, verbose, bad input."""

import numpy as np
import pytest
import torch

from pyro_ar.estimator import Weights
from pyro_ar import ARClassifier
from pyro_ar.datasets import make_sparse_teacher, to_scipy_csr
from pyro_ar import features as _features, training_path as _training_path
from pyro_ar.training_path import TrainingPath, choose_path

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: threads only add contention


@pytest.mark.parametrize("N,D,nnz_row,K,kw,expected", [
    # sparse, small W: sparse inputs, full rank, per-datapoint negatives
    (75_000, 27_000, 10, 500, {}, TrainingPath(True, None, "per_datapoint")),
    # WordNet's reverse dictionary: 16 K D bytes = 11.7 GB > 2 GiB, labels not skewed -> W on
    # the training class-feature pattern (issue 24)
    (75_000, 27_000, 10, 27_000, {}, TrainingPath(True, None, "per_datapoint", True)),
    # the same with Zipfian labels (Brown's bag of words) -> low rank, importance negatives
    (75_000, 27_000, 10, 27_000, dict(class_counts=1 + (1e5 / np.arange(1, 27_001)).astype(int)),
     TrainingPath(True, 128, "importance")),
    # dense, wide: per-datapoint rows would gather 256 x 21 x 27,000 numbers -> shared
    (10_000, 27_000, None, 20, {}, TrainingPath(False, None, "shared")),
    # dense and small: today's path
    (1_000, 50, None, 10, {}, TrainingPath(False, None, "per_datapoint")),
    # sparse but dense enough (half the entries): densified
    (1_000, 500, 250, 10, {}, TrainingPath(False, None, "per_datapoint")),
    # sparse with few features: densified
    (1_000, 64, 1, 10, {}, TrainingPath(False, None, "per_datapoint")),
    # explicit choices are kept
    (75_000, 27_000, 10, 27_000, dict(rank=None, strategy="importance"), TrainingPath(True, None, "importance")),
    (1_000, 50, None, 10, dict(rank=3), TrainingPath(False, 3, "per_datapoint")),
    # a rank larger than min(K, D) is not chosen automatically
    (1_000, 100, None, 50_000_000, {}, TrainingPath(False, 100, "per_datapoint")),
])
def test_choose_path_rule(N, D, nnz_row, K, kw, expected):
    nnz = None if nnz_row is None else N * nnz_row
    assert choose_path(N, D, K, nnz, **kw) == expected
    if K <= 10 ** 6 and "class_counts" not in kw:  # balanced labels do not change the choice
        assert choose_path(N, D, K, nnz, class_counts=np.full(K, 3), **kw) == expected


@pytest.mark.parametrize("power, expected", [(0.0, "per_datapoint"), (0.5, "per_datapoint"),
                                             (1.2, "importance")])
def test_skewed_labels_take_importance_negatives(power, expected):
    """Zipf-like class counts k^-power over K = 1,000: exp(entropy) is 1,000 (power 0),
    about 787 (0.5) and about 69 (1.2); below K / 2 the rule draws importance negatives,
    unless all classes are used anyway."""
    K = 1_000
    counts = 1e6 * np.arange(1, K + 1) ** -power
    assert choose_path(50_000, 100, K, class_counts=counts).strategy == expected
    assert choose_path(50_000, 100, K, class_counts=counts, num_negatives=None).strategy != "importance"


def _sparse_problem(N=600, D=300, K=30, seed=0):
    data = make_sparse_teacher(N, D, K, nnz_per_row=5, rank=4, feature_power=0.5, class_power=0.5, seed=seed)
    return to_scipy_csr(data.x), data.y.numpy()


@pytest.mark.parametrize("rank", ["auto", 6])
def test_fit_on_sparse_input_takes_the_sparse_path_and_learns(rank, tmp_path):
    X, y = _sparse_problem()
    clf = ARClassifier(weights=Weights('map', rank=rank), max_epochs=5, min_steps=0, batch_size=64, learning_rate=0.05, random_state=0).fit(X, y)
    assert clf.training_path_ == TrainingPath(True, None if rank == "auto" else 6, "per_datapoint")
    names = set(clf.param_state_["params"])
    assert ("embedding" in names) == (rank != "auto")
    K = len(clf.classes_)
    counts = np.bincount(np.searchsorted(clf.classes_, y), minlength=K) + 1.0
    unigram = float(np.log(counts / counts.sum())[np.searchsorted(clf.classes_, y)].mean())
    assert clf.log_likelihood(X, y) > unigram + 0.1  # learnt something beyond the frequencies
    proba = clf.predict_proba(X[:7])
    assert proba.shape == (7, K) and np.allclose(proba.sum(1), 1.0)
    assert np.allclose(proba, clf.predict_proba(X[:7].toarray()), rtol=0, atol=1e-12)  # dense alike
    path = tmp_path / "m.pt"
    clf.save(path)
    assert np.array_equal(ARClassifier.load(path).predict_proba(X[:7]), proba)
    # the scaling: one scale for every feature under a low rank, one per feature at full rank
    if rank == "auto":  # the root mean square; zero on most rows: at least that of the non-zeros over 3
        dense = X.toarray()
        n_active, squares = (dense != 0).sum(0), np.square(dense).sum(0)
        rms, active_rms = np.sqrt(squares / len(dense)), np.sqrt(squares / np.maximum(n_active, 1))
        expected = np.where(2 * n_active < len(dense), np.maximum(rms, active_rms / 3), rms)
        expected[n_active == 0] = 1.0
    else:
        expected = np.full(X.shape[1], np.sqrt(X.multiply(X).sum() / X.shape[0]))
    np.testing.assert_allclose(clf.feature_scale_, expected, rtol=1e-6)


def test_low_rank_memory_rule_switches_the_estimator(monkeypatch):
    """With the memory limit lowered, the same data go onto the weight pattern (sparse X,
    labels not skewed) or low rank (dense X; AUTO_RANK patched small)."""
    X, y = _sparse_problem(N=200)
    monkeypatch.setattr(_training_path, "FULL_RANK_MAX_BYTES", 1000)
    monkeypatch.setattr(_training_path, "AUTO_RANK", 5)
    clf = ARClassifier(max_epochs=None, min_steps=3, random_state=0).fit(X, y)
    assert clf.training_path_.weight_pattern and clf.training_path_.rank is None
    assert clf.param_state_["params"]["weight"].shape == (len(clf.weight_pattern_),)
    dense = ARClassifier(max_epochs=None, min_steps=3, random_state=0).fit(X.toarray(), y)
    assert dense.training_path_.rank == 5
    assert dense.param_state_["params"]["embedding"].shape == (300, 5)


def test_verbose_prints_the_path_and_the_step_rate(capsys):
    X, y = _sparse_problem(N=200)
    ARClassifier(weights=Weights('map', prior_scale=1.0), max_epochs=None, min_steps=25, batch_size=16, verbose=True, random_state=0).fit(X, y)
    err = capsys.readouterr().err
    assert "sparse inputs, full rank, per_datapoint negatives" in err and "16 rows per SVI step" in err
    assert "ARClassifier fit: 100%" in err and "25/25" in err and "step/s" in err  # the bar's rate


@pytest.mark.parametrize("value", ["low", 0, -2, 2.5, True])
def test_bad_rank_is_named(value):
    X, y = _sparse_problem(N=50)
    with pytest.raises(ValueError, match=r"rank must be 'auto', None or an integer >= 1, got"):
        ARClassifier(weights=Weights('map', rank=value)).fit(X, y)


def test_sparse_rows_batches_are_torch_sparse():
    X, _ = _sparse_problem(N=50)
    rows = _features.SparseRows(X, torch.float32, "cpu", sparse=True)
    batch = rows[torch.tensor([4, 1])]
    assert batch.layout == torch.sparse_coo and batch.shape == (2, 300)
    assert np.array_equal(batch.to_dense().numpy(), X[[4, 1]].toarray())


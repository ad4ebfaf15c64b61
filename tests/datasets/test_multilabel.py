"""pyro_ar.datasets.multilabel: the CSR indicator convention of multi-label targets and the
class bookkeeping the loaders share (labelled rows, classes, unseen test rows, remapping)."""

import numpy as np
import pytest
import torch

from pyro_ar.datasets import label_indicator
from pyro_ar.datasets.multilabel import as_targets, classes_of, labelled_rows, relabel, unseen_rows

pytest.importorskip("scipy")


def test_label_indicator_from_sets_and_matrices_agree_with_scikit_learn():
    sklearn = pytest.importorskip("sklearn.preprocessing")
    sets = [[3, 0, 3], [], [1], [4, 2, 0]]
    y = label_indicator(sets, num_labels=6)
    assert y.shape == (4, 6) and y.dtype == np.float32 and y.format == "csr" and y.has_sorted_indices
    assert y.data.tolist() == [1.0] * 6  # (3 listed twice in row 0 counts once)
    binarizer = sklearn.MultiLabelBinarizer(classes=list(range(6)), sparse_output=True)
    assert (y != binarizer.fit_transform(sets)).nnz == 0
    dense = y.toarray()
    for form in (dense, dense.astype(bool), torch.from_numpy(dense)):
        assert (label_indicator(form) != y).nnz == 0
    assert label_indicator(sets).shape == (4, 5)  # L = the largest label + 1
    assert label_indicator([[], []]).shape == (2, 0)


@pytest.mark.parametrize("labels, kwargs, match", [
    ([[0], [1.5]], {}, r"where: row 1 has the label 1.5; labels must be integers >= 0"),
    ([[0, -1]], {}, r"row 0 has the label -1.0"),
    ([[0, 7]], {"num_labels": 5}, r"label 7 found, but num_labels is 5"),
    (np.array([[0, 2]]), {}, r"where: label 1 of data row 0 is 2, expected 0 or 1"),
    (np.array([0, 1]), {}, r"a label matrix must be 2-D"),
])
def test_label_indicator_errors_name_the_source(labels, kwargs, match):
    with pytest.raises(ValueError, match=match):
        label_indicator(labels, where="where", **kwargs)


def test_bookkeeping_on_ids_and_indicators_agrees_with_a_loop():
    rng = np.random.default_rng(0)
    sets = [sorted(set(rng.integers(0, 9, rng.integers(0, 4)).tolist())) for _ in range(200)]
    y = label_indicator(sets, num_labels=9)
    assert labelled_rows(y).tolist() == [i for i, s in enumerate(sets) if s]
    assert classes_of(y).tolist() == sorted({c for s in sets for c in s})
    train = np.array([1, 4, 7])
    assert unseen_rows(y, train).tolist() == [not set(s) & {1, 4, 7} for s in sets]  # (empty rows: unseen)
    old = np.array([2, 4, 5])
    lookup = np.full(9, -1)
    lookup[old] = np.arange(3)
    assert (relabel(y, old, lookup) != label_indicator([[lookup[c] for c in s if c in old] for s in sets], 3)).nnz == 0
    ids = np.array([3, -1, 0, 3])
    assert labelled_rows(ids).tolist() == [0, 2, 3] and classes_of(ids[ids >= 0]).tolist() == [0, 3]
    assert unseen_rows(ids, np.array([3])).tolist() == [False, True, True, False]
    assert relabel(ids, old, lookup).tolist() == [-1, -1, -1, -1] and as_targets(ids).dtype == torch.int64
    assert as_targets(y.astype(np.float64)).dtype == np.float32

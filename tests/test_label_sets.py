"""pyro_ar.label_sets: multi-label targets as (row, label) pairs, in every accepted form."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from pyro_ar.label_sets import is_indicator, is_label_sets, label_pairs, pairs_to_indicator


def _random_sets(seed, n=40, K=9):
    rng = np.random.RandomState(seed)
    return [sorted(rng.choice(K, rng.randint(0, 4), replace=False).tolist()) for _ in range(n)], K


@pytest.mark.parametrize("seed", range(5))
def test_every_form_gives_the_same_pairs(seed):
    sets, K = _random_sets(seed)
    Y = pairs_to_indicator(np.repeat(np.arange(len(sets)), [len(s) for s in sets]),
                           [l for s in sets for l in s], len(sets), K)
    expected = [(n, l) for n, s in enumerate(sets) for l in sorted(s)]
    forms = [sets, [set(s) for s in sets], [np.array(s, dtype=np.int64) for s in sets], Y, Y.tocsc(),
             Y.toarray(), Y.toarray().astype(bool), torch.as_tensor(Y.toarray())]
    for y in forms:
        p = label_pairs(y)
        assert list(zip(p.rows.tolist(), p.labels.tolist())) == expected
        assert p.num_rows == len(sets)
    assert label_pairs(Y).num_classes == K  # the indicator's width, even if its last columns are empty


def test_duplicates_and_explicit_zeros_count_once_or_not_at_all():
    p = label_pairs([[3, 3, 1], [], [0]])
    assert p.rows.tolist() == [0, 0, 2] and p.labels.tolist() == [1, 3, 0]
    Y = sp.csr_matrix((np.array([1.0, 0.0, 1.0]), np.array([0, 1, 2]), np.array([0, 2, 3])), shape=(2, 3))
    assert label_pairs(Y).labels.tolist() == [0, 2]  # the stored 0 is no label


def test_round_trip_through_the_indicator():
    sets, K = _random_sets(7)
    p = label_pairs(sets)
    Y = pairs_to_indicator(p.rows, p.labels, p.num_rows, K)
    assert Y.has_sorted_indices and Y.dtype == np.float32
    q = label_pairs(Y)
    assert np.array_equal(p.rows, q.rows) and np.array_equal(p.labels, q.labels)


def test_forms_are_told_apart():
    assert is_indicator(np.zeros((3, 2))) and is_indicator(sp.csr_matrix((3, 1)))
    assert not is_indicator(np.zeros((3, 1))) and not is_indicator(np.zeros(3)) and not is_indicator([[0, 1]])
    assert is_label_sets([[0, 1], {2}, []]) and is_label_sets([np.array([1])])
    assert not is_label_sets([(0, 1), (2,)])  # tuples are single hashable labels
    assert not is_label_sets([]) and not is_label_sets([1, 2]) and not is_label_sets([np.zeros((1, 2))])


@pytest.mark.parametrize("y, match", [
    (np.array([[0, 2], [1, 0]]), r"entries must be 0 or 1, got \[2\]"),
    (np.array([[0.5, 1.0], [1.0, 0.0]]), r"must be 0 or 1, got \[0.5\]"),
    (np.array([[np.nan, 1.0], [1.0, 0.0]]), r"must be 0 or 1, got \[nan\]"),
    (sp.csr_matrix(np.array([[-1.0, 0.0], [1.0, 0.0]])), r"must be 0 or 1, got \[-1.0\]"),
    ([[0, -1], [1]], r"class indices \(integers >= 0\), got \[-1\]"),
    ([[0, 1.5]], r"got \[1.5\]"),
    ([[True]], r"got \[True\]"),
    ([["a"]], r"got \['a'\]"),
    (np.array([1, 2]), "must be an \\(n, K\\) 0/1 indicator or a sequence of label collections"),
])
def test_bad_targets_are_named(y, match):
    with pytest.raises(ValueError, match="my_y"):
        label_pairs(y, name="my_y")
    with pytest.raises(ValueError, match=match):
        label_pairs(y)

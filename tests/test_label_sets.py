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


# ------------------------------------------------------------------ choice sets
def _brute_choice_log_prob(psi, sets, rows, labels):
    """log softmax of pair (row, label)'s utilities over {label} and the classes outside its row's set."""
    out = []
    for r, l in zip(rows, labels):
        allowed = [k for k in range(psi.shape[1]) if k == l or k not in sets[r]]
        out.append(psi[r, l] - np.logaddexp.reduce(psi[r, allowed]))
    return np.array(out)


@pytest.mark.parametrize("seed", range(5))
def test_choice_sets_exclude_exactly_each_pairs_co_positives(seed):
    """Property: for random label sets and a random order of the pairs (rows not 0..R-1), pair
    (n, l)'s excluded classes are Y_n minus l, and its log-probability is the log-softmax over
    the rest, computed by brute force."""
    from pyro_ar.label_sets import ChoiceSets

    sets, K = _random_sets(seed)
    p = label_pairs(sets)
    rng = np.random.RandomState(seed)
    perm = rng.permutation(len(p.rows))
    groups, codes = 7 * p.rows[perm] + 3, p.labels[perm]  # (any row ids, any pair order)
    cs = ChoiceSets(groups, codes, K)
    index = torch.as_tensor(rng.choice(len(codes), 25))  # (repeats allowed: a minibatch)
    mask = cs.excluded(index).numpy()
    for b, i in enumerate(index.tolist()):
        r, l = p.rows[perm][i], codes[i]
        assert set(np.flatnonzero(mask[b]).tolist()) == set(sets[r]) - {l}
    psi = rng.randn(len(sets), K)
    got = cs.log_prob(torch.as_tensor(psi[p.rows[perm][index.numpy()]]), index).numpy()
    want = _brute_choice_log_prob(psi, sets, p.rows[perm][index.numpy()], codes[index.numpy()])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_choice_sets_of_one_label_rows_are_every_class():
    from pyro_ar.label_sets import ChoiceSets

    cs = ChoiceSets([0, 1, 2], [2, 0, 2], 4)
    assert not cs.excluded(torch.arange(3)).any()
    psi = torch.randn(3, 4, dtype=torch.float64)
    torch.testing.assert_close(cs.log_prob(psi, torch.arange(3)), psi.log_softmax(-1)[torch.arange(3), [2, 0, 2]])
    with pytest.raises(ValueError, match="groups and codes"):
        ChoiceSets([0, 1], [0], 3)


@pytest.mark.parametrize("seed", range(3))
def test_exact_likelihood_with_choice_sets_is_the_choice_set_softmax(seed):
    """Exact(choice_sets=...)'s factor on a minibatch of pairs is their choice-set log-softmax
    (brute force), the full plate too; a noise without a closed-form softmax is refused."""
    from pyro_ar.label_sets import ChoiceSets
    from pyro_ar.likelihoods import DataSubsample, Exact

    sets, K = _random_sets(seed)
    p = label_pairs(sets)
    cs = ChoiceSets(p.rows, p.labels, K)
    rng = np.random.RandomState(seed)
    psi = rng.randn(len(sets), K)
    index = torch.as_tensor(rng.choice(len(p.rows), 16, replace=False))
    u = torch.as_tensor(psi[p.rows[index.numpy()]])
    got = Exact(choice_sets=cs).distribution(u, DataSubsample(index, len(p.rows))).log_prob(
        torch.as_tensor(p.labels[index.numpy()]))
    want = _brute_choice_log_prob(psi, sets, p.rows[index.numpy()], p.labels[index.numpy()])
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    full = Exact(choice_sets=cs).distribution(torch.as_tensor(psi[p.rows]), DataSubsample(None, len(p.rows)))
    np.testing.assert_allclose(full.log_prob(torch.as_tensor(p.labels)).numpy(),
                               _brute_choice_log_prob(psi, sets, p.rows, p.labels), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="choice_sets.*Gumbel"):
        Exact("normal", choice_sets=cs)


def test_the_likelihood_spec_builds_exact_with_choice_sets_and_refuses_them_for_ar():
    """The estimator's likelihood spec hands choice sets to the exact likelihood it builds, and
    refuses them for A&R (whose negatives are drawn from all K classes)."""
    from pyro_ar.infer.selection import likelihood_spec
    from pyro_ar.label_sets import ChoiceSets

    cs, counts = ChoiceSets([0, 0, 1], [1, 2, 0], 4), torch.ones(4, dtype=torch.float64)
    spec = likelihood_spec("auto")
    assert spec.likelihood("exact", "per_datapoint", counts, cs).choice_sets is cs
    assert spec.likelihood("exact", "per_datapoint", counts).choice_sets is None
    with pytest.raises(ValueError, match="choice_sets need the exact likelihood, got mode='ar'"):
        spec.likelihood("ar", "per_datapoint", counts, cs)

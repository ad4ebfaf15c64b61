"""pyro_ar.evaluation.ranking: P@k, nDCG@k, PSP@k and the propensities against hand-computed
cases and a per-row reference loop; properties (ranges, perfect rankings, invariance to the
order of labels and rows, the target forms agree); named errors for bad input."""

import math
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import HealthCheck, given, settings, strategies as st

from pyro_ar.evaluation import label_propensities, ndcg_at_k, precision_at_k, psp_at_k, ranking_metrics

PROPERTY = settings(derandomize=True, database=None, deadline=None, max_examples=60,
                    suppress_health_check=[HealthCheck.too_slow])


# ---------------------------------------------------------------- a hand-computed case
RANKED = np.array([[0, 2, 1, 5], [3, 4, 1, 0], [0, 1, 2, 3]])
SETS = [{0, 1}, {4}, set()]  # row 2 has no label: it counts, scoring 0
P = np.array([0.5, 0.25, 1.0, 1.0, 0.8, 1.0])  # 1 / p = [2, 4, 1, 1, 1.25, 1]


def test_hand_computed_precision_and_ndcg():
    # P@1: row 0 ranks 0 first (a label), row 1 ranks 3 (not), row 2 has none -> (1 + 0 + 0) / 3
    assert precision_at_k(RANKED, SETS, 1) == pytest.approx(1 / 3, abs=1e-15)
    # P@3: row 0 hits 0 and 1 (2/3), row 1 hits 4 (1/3), row 2 nothing -> (2/3 + 1/3 + 0) / 3
    assert precision_at_k(RANKED, SETS, 3) == pytest.approx(1 / 3, abs=1e-15)
    # nDCG@3: row 0 hits at ranks 1 and 3: DCG = 1/log2(2) + 1/log2(4) = 1.5, ideal (2 labels)
    # 1 + 1/log2(3); row 1 hits at rank 2: DCG = 1/log2(3), ideal (1 label) 1; row 2: 0
    expected = (1.5 / (1 + 1 / math.log2(3)) + 1 / math.log2(3) + 0) / 3
    assert ndcg_at_k(RANKED, SETS, 3) == pytest.approx(expected, abs=1e-15)


def test_hand_computed_psp():
    # PSP@1 raw: row 0 ranks class 0 first (1/p = 2), rows 1 and 2 miss -> (2 + 0 + 0) / 3;
    # best: row 0 its label of largest 1/p (class 1: 4), row 1 class 4 (1.25), row 2 none
    assert psp_at_k(RANKED, SETS, 1, P, normalize=False) == pytest.approx(2 / 3, abs=1e-15)
    assert psp_at_k(RANKED, SETS, 1, P) == pytest.approx((2 / 3) / ((4 + 1.25 + 0) / 3), abs=1e-15)
    # PSP@3: row 0 (2 + 4) / 3, row 1 1.25 / 3, row 2 0: also the best each row can do -> 1
    assert psp_at_k(RANKED, SETS, 3, P, normalize=False) == pytest.approx((6 / 3 + 1.25 / 3) / 3, abs=1e-15)
    assert psp_at_k(RANKED, SETS, 3, P) == pytest.approx(1.0, abs=1e-15)


def test_ranking_metrics_gathers_the_three():
    m = ranking_metrics(RANKED, SETS, ks=np.array([1, 3]), propensities=P)
    assert list(m) == ["P@1", "nDCG@1", "PSP@1", "P@3", "nDCG@3", "PSP@3"]
    assert all(isinstance(v, float) for v in m.values())
    for k in (1, 3):
        assert m[f"P@{k}"] == precision_at_k(RANKED, SETS, k)
        assert m[f"nDCG@{k}"] == ndcg_at_k(RANKED, SETS, k)
        assert m[f"PSP@{k}"] == psp_at_k(RANKED, SETS, k, P)
    assert "PSP@1" not in ranking_metrics(RANKED, SETS, ks=(1,))


def test_hand_computed_propensities():
    # N = 5 rows; class 0 in 4, class 1 in 1, class 2 in none; C = (log 5 - 1)(1.5 + 1)^0.55
    sets = [[0], [0, 1], [0], [0], []]
    C = (math.log(5) - 1) * 2.5 ** 0.55
    expected = [1 / (1 + C * (n + 1.5) ** -0.55) for n in (4, 1, 0)]
    p = label_propensities(sets, num_classes=3)
    assert p.dtype == np.float64 and p.shape == (3,)
    np.testing.assert_allclose(p, expected, rtol=1e-14)
    # other A, B: C = (log 5 - 1)(2.6 + 1)^0.6
    C = (math.log(5) - 1) * 3.6 ** 0.6
    np.testing.assert_allclose(label_propensities(sets, 0.6, 2.6, num_classes=3),
                               [1 / (1 + C * (n + 2.6) ** -0.6) for n in (4, 1, 0)], rtol=1e-14)
    np.testing.assert_allclose(label_propensities(_dense(sets, 3)), expected, rtol=1e-14)


# ---------------------------------------------------------------- against a reference loop
def _dense(sets, K):
    y = np.zeros((len(sets), K), dtype=np.float32)
    for i, s in enumerate(sets):
        y[i, list(s)] = 1
    return y


def _reference(ranked, sets, k, p):
    """Row by row, straight from the definitions (the XMC tools' ratio of means for PSP)."""
    prec, ndcg, psp, best = [], [], [], []
    for r, s in zip(ranked, sets):
        hits = [int(c) in s for c in r[:k]]
        prec.append(sum(hits) / k)
        ideal = sum(1 / math.log2(l + 2) for l in range(min(k, len(s))))
        dcg = sum(h / math.log2(l + 2) for l, h in enumerate(hits))
        ndcg.append(dcg / ideal if ideal else 0.0)
        psp.append(sum(h / p[c] for h, c in zip(hits, r[:k])) / k)
        best.append(sum(sorted((1 / p[c] for c in s), reverse=True)[:k]) / k)
    return np.mean(prec), np.mean(ndcg), np.mean(psp) / np.mean(best) if np.mean(best) else 0.0


@st.composite
def problems(draw):
    n, K = draw(st.integers(1, 12)), draw(st.integers(1, 15))
    k = draw(st.integers(1, K))
    sets = [set(draw(st.lists(st.integers(0, K - 1), max_size=K))) for _ in range(n)]
    rng = np.random.default_rng(draw(st.integers(0, 2 ** 31)))
    ranked = np.argsort(rng.random((n, K)), axis=1)[:, :draw(st.integers(k, K))]
    p = rng.uniform(0.05, 1.0, K)
    return ranked, sets, k, K, p


@PROPERTY
@given(problems())
def test_matches_the_reference_loop_and_the_forms_agree(problem):
    ranked, sets, k, K, p = problem
    expected = _reference(ranked, sets, k, p)
    y = _dense(sets, K)
    forms = [sets, [sorted(s, reverse=True) + sorted(s) for s in sets],  # label order and repeats
             y, sp.csr_matrix(y), sp.csc_matrix(y), sp.coo_matrix(y), torch.from_numpy(y),
             torch.from_numpy(y).to_sparse(), y.astype(bool)]
    for targets in forms:
        got = (precision_at_k(ranked, targets, k), ndcg_at_k(ranked, targets, k), psp_at_k(ranked, targets, k, p))
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15, err_msg=type(targets).__name__)
    assert precision_at_k(torch.from_numpy(ranked), y, k) == pytest.approx(expected[0], abs=1e-15)
    assert psp_at_k(ranked, y, k, torch.from_numpy(p)) == pytest.approx(expected[2], rel=1e-12, abs=1e-15)


@PROPERTY
@given(problems())
def test_ranges_perfect_rankings_and_row_order(problem):
    ranked, sets, k, K, p = problem
    for value in (precision_at_k(ranked, sets, k), ndcg_at_k(ranked, sets, k), psp_at_k(ranked, sets, k, p)):
        assert 0.0 <= value <= 1.0 + 1e-12
    # perfect: every row's labels first, by decreasing 1/p, then the other classes
    perfect = np.array([sorted(s, key=lambda c: p[c]) + [c for c in range(K) if c not in s] for s in sets])
    sizes = np.array([len(s) for s in sets])
    assert precision_at_k(perfect, sets, k) == pytest.approx(np.mean(np.minimum(sizes, k) / k), abs=1e-15)
    labelled = [i for i, s in enumerate(sets) if s]
    if labelled:
        assert ndcg_at_k(perfect[labelled], [sets[i] for i in labelled], k) == pytest.approx(1.0, abs=1e-12)
        assert psp_at_k(perfect, sets, k, p) == pytest.approx(1.0, abs=1e-12)  # (empty rows: 0 / 0 each)
    order = np.random.default_rng(0).permutation(len(sets))
    for metric in (precision_at_k, ndcg_at_k):
        assert metric(ranked[order], [sets[i] for i in order], k) == pytest.approx(metric(ranked, sets, k), abs=1e-12)


def test_no_label_anywhere_scores_zero():
    ranked = np.array([[0, 1], [1, 0]])
    assert ranking_metrics(ranked, [[], []], ks=(1, 2), propensities=[0.5, 0.5]) == {
        "P@1": 0.0, "nDCG@1": 0.0, "PSP@1": 0.0, "P@2": 0.0, "nDCG@2": 0.0, "PSP@2": 0.0}


def test_extreme_scale_without_a_dense_matrix():
    """K = 10^5 classes, n = 10^4 rows, scipy targets: no n x K array is ever built (the traced
    peak stays far below the 10^9 bytes of one dense boolean n x K matrix), and a sample of
    rows agrees with the reference loop."""
    rng = np.random.default_rng(0)
    n, K, k = 10_000, 100_000, 5
    nnz = rng.integers(0, 8, n)
    rows = np.repeat(np.arange(n), nnz)
    y = sp.csr_matrix((np.ones(rows.size, np.float32), (rows, rng.integers(0, K, rows.size))), shape=(n, K))
    y.data[:] = 1  # (a class drawn twice in a row was summed)
    first = np.where(nnz > 0, y.indices[np.minimum(y.indptr[:-1], y.nnz - 1)], rng.integers(0, K, n))
    ranked = (first[:, None] + 7919 * np.arange(2 * k)) % K  # distinct in a row; a label first where one is
    p = label_propensities(y)
    tracemalloc.start()
    m = ranking_metrics(ranked, y, ks=(1, 3, 5), propensities=p)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 10 ** 8, peak
    sample = np.arange(0, n, 97)
    sets = [set(y.indices[y.indptr[i]:y.indptr[i + 1]].tolist()) for i in sample]
    sub = ranked[sample]
    assert precision_at_k(sub, y[sample], k) == pytest.approx(_reference(sub, sets, k, p)[0], abs=1e-12)
    assert 0.1 < m["P@1"] < 1  # row 0 puts a label first on the rows that have one


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("call, match", [
    (lambda: precision_at_k(RANKED, SETS, 5), r"k must be an integer in \[1, 4\].*k=5"),
    (lambda: precision_at_k(RANKED, SETS, 0), r"k must be an integer in \[1, 4\].*k=0"),
    (lambda: precision_at_k(RANKED, SETS, 1.0), r"k must be"),
    (lambda: precision_at_k(RANKED.astype(float), SETS, 1), r"ranked must hold integer class indices"),
    (lambda: precision_at_k(RANKED - 1, SETS, 1), r"ranked must hold class indices >= 0"),
    (lambda: precision_at_k(RANKED[0], SETS, 1), r"ranked must be an \(n, m\) array"),
    (lambda: precision_at_k(RANKED[:2], SETS, 1), r"targets has 3 rows but ranked has 2"),
    (lambda: precision_at_k([[0, 0]], [{0}], 2), r"ranked repeats a class .* row 0"),
    (lambda: precision_at_k(RANKED, _dense(SETS, 6)[:, :5], 4), r"ranked holds the class 5.*K = 5"),
    (lambda: precision_at_k(RANKED, 2 * _dense(SETS, 6), 1), r"targets must be a 0/1 indicator.*2\.0"),
    (lambda: precision_at_k(RANKED, sp.csr_matrix(-_dense(SETS, 6)), 1), r"targets must be a 0/1 indicator"),
    (lambda: precision_at_k(RANKED, _dense(SETS, 6)[0], 1), r"targets must be 2-D"),
    (lambda: precision_at_k(RANKED, [{0.5}, {1}, set()], 1), r"targets: .*integer class indices"),
    (lambda: precision_at_k(RANKED, [{-1}, {1}, set()], 1), r"targets: class indices must be >= 0"),
    (lambda: precision_at_k(RANKED, [0, 1, 2], 1), r"targets: a list must hold one collection"),
    (lambda: precision_at_k(RANKED, "abc", 1), r"targets must be an \(n, K\) 0/1 indicator"),
    (lambda: psp_at_k(RANKED, _dense(SETS, 6), 1, P[:5]), r"propensities must be 1-D with one value per class \(6"),
    (lambda: psp_at_k(RANKED, SETS, 1, P[:4]), r"propensities must be 1-D with one value per class \(5 or more\)"),
    (lambda: psp_at_k(RANKED, SETS, 1, np.where(P == 1, 0.0, P)), r"propensities must be > 0"),
    (lambda: ranking_metrics(RANKED, SETS, ks=()), r"ks must list at least one k"),
    (lambda: ranking_metrics(RANKED, SETS, ks=(1, 9)), r"max\(ks\) must be an integer in \[1, 4\]"),
    (lambda: label_propensities(SETS, A=0), r"A must be a finite number > 0"),
    (lambda: label_propensities(SETS, B=-1.0), r"B must be a finite number > 0"),
    (lambda: label_propensities([[0], [1]]), r"train_targets must have at least 3 rows.*N=2"),
    (lambda: label_propensities(SETS, num_classes=3), r"num_classes must be an integer >= 5"),
    (lambda: label_propensities(_dense(SETS, 6), num_classes=7), r"num_classes=7 differs from the 6 columns"),
])
def test_bad_input_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()

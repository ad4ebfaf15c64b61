"""The weight-pattern path's schedule (issue 36, item 4): the starting scorer's shape chosen on
held-out rows, a step count set by them, never a model worse on them than its start, and the
fit moved back onto the centroids of all the rows."""

import numpy as np
import pytest
import scipy.sparse as sp
import torch
from hypothesis import given, settings, strategies as st

import pyro_ar.training_path as training_path
from pyro_ar import ARClassifier
from pyro_ar.infer.pattern_fit import (BIAS_WEIGHTS, CENTROID_POWERS, CENTROID_ROOTS, IDF_POWERS, _heldout_hits, calibrate_temperature,
                                      choose_bias, choose_centroid_scorer, recentre, reweight_rows)
from pyro_ar.features import apply_scaler, fit_scaler
from pyro_ar.training_path import pattern_and_centroids
from pyro_ar.weight_pattern import WeightPattern

from .test_pattern_path import _few_rows_per_class


@pytest.fixture
def small_pattern_limit(monkeypatch):
    """Take the pattern path at test size (the real rule: 16 K D bytes above 2 GiB)."""
    monkeypatch.setattr(training_path, "FULL_RANK_MAX_BYTES", 1 << 16)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(2, 6), st.integers(0, 2**31 - 1))
def test_recentre_adds_the_learned_residual_to_the_new_centroids(K, D, seed):
    rng = np.random.RandomState(seed)
    full = rng.rand(K * D) < 0.7
    full[0] = True
    small = full & (rng.rand(K * D) < 0.6)
    small[0] = True
    big_p = WeightPattern(torch.as_tensor(np.flatnonzero(full)), K, D)
    small_p = WeightPattern(torch.as_tensor(np.flatnonzero(small)), K, D)
    g = torch.Generator().manual_seed(seed)
    W, loc_tr, loc = (torch.randn(n, generator=g) for n in (len(small_p), len(small_p), len(big_p)))
    out = recentre({"params": {"weight": W}, "constraints": {}}, "weight", small_p, loc_tr, big_p, loc)
    expected = big_p.dense(loc) + small_p.dense(W - loc_tr)  # the residual where it was learned
    assert torch.allclose(big_p.dense(out["params"]["weight"]), expected, atol=1e-6)
    if len(small_p) < len(big_p):  # the other way round, an entry has nowhere to go
        with pytest.raises(ValueError, match="pattern must contain"):
            recentre({"params": {"weight": loc}, "constraints": {}}, "weight", big_p, loc, small_p, loc_tr)


def test_reweighted_rows_are_the_rows_of_the_idf_power():
    """x_binary * idf^p, normalised, from the tf-idf rows (idf^1): the scaling the estimator keeps."""
    X, _ = _few_rows_per_class(K=20, D=100, N=80)
    mean, scale = fit_scaler(X, sparse_inputs=True, idf=True)
    Z = apply_scaler(X, mean, scale, normalize_rows=True)
    Z2 = reweight_rows(Z, scale ** (1.0 - 1.5))
    assert np.allclose(Z2.toarray(), apply_scaler(X, mean, scale ** 1.5, normalize_rows=True).toarray())


def test_the_chosen_scorer_is_the_best_of_the_grid_on_the_held_out_rows():
    """Every (p, gamma) of the grid scored at q = 1, then every (q, gamma) at the best p; the
    best of all taken, and its rows and scale returned."""
    X, y = _few_rows_per_class(K=50, D=400, N=200)
    mean, scale = fit_scaler(X, sparse_inputs=True, idf=True)
    Z = apply_scaler(X, mean, scale, normalize_rows=True)
    val = np.arange(len(y)) % 4 == 0
    tr_idx, val_idx = np.flatnonzero(~val), np.flatnonzero(val)
    Zp, p, power, root, T, beta, scores, bias_scores = choose_centroid_scorer(Z, y, 50, tr_idx, val_idx, scale)
    assert beta == max(bias_scores, key=bias_scores.get) and T > 0
    assert len(scores) == (len(IDF_POWERS) + len(CENTROID_ROOTS) - 1) * len(CENTROID_POWERS) and max(scores.values()) == scores[(max(scores, key=scores.get))]
    best = [k for k, v in scores.items() if v == max(scores.values())][0]  # the first of the ties
    assert p == best[0] and root == best[1] and power == best[2]
    first_round = {k: v for k, v in scores.items() if k[1] == CENTROID_ROOTS[0]}
    assert {k[0] for k in scores if k[1] != CENTROID_ROOTS[0]} == {max(first_round, key=first_round.get)[0]}
    assert np.allclose(Zp.toarray(), apply_scaler(X, mean, scale ** p, normalize_rows=True).toarray(), atol=1e-6)


@settings(max_examples=25, deadline=None)
@given(st.integers(12, 40), st.integers(0, 2**31 - 1), st.sampled_from((1.0, 0.5, 0.25)))
def test_heldout_hits_equal_the_dense_ranks(K, seed, root):
    """The held-out hits counted on the sparse product's entries equal those of the dense
    rows x K scores (ranks: classes scoring strictly above the label; empty classes score 0),
    label sets (a row's pairs sharing its product, ``groups``) and the root q of the class sums
    (:math:`s_{kj}^q`) included."""
    rng = np.random.RandomState(seed)
    groups = np.repeat(np.arange(70), rng.randint(1, 4, size=70))  # 1-3 labels per row
    X = sp.random(70, 30, density=0.15, format="csr", random_state=rng)[groups]
    y = rng.randint(K, size=len(groups))
    tr, val = np.flatnonzero(groups < 45), np.flatnonzero(groups >= 45)
    S = np.zeros((K, 30))
    np.add.at(S, y[tr], X[tr].toarray())
    S = S ** root
    norms = np.linalg.norm(S, axis=1)
    powers = (1.0, 0.6, 0.3)
    expected = []
    for power in powers:
        sc = X[val].toarray() @ S.T / np.where(norms > 0, norms, 1.0) ** power
        rank = (sc > sc[np.arange(len(val)), y[val]][:, None]).sum(1)
        expected.append(0.5 * ((rank < 1).mean() + (rank < 10).mean()))
    assert np.allclose(_heldout_hits(X, y, K, tr, val, powers, chunk=7, root=root), expected)
    assert np.allclose(_heldout_hits(X, y, K, tr, val, powers, groups=groups, chunk=7, root=root), expected)


@settings(max_examples=20, deadline=None)
@given(st.integers(3, 40), st.integers(0, 2**31 - 1))
def test_the_bias_is_the_grid_point_with_the_most_held_out_hits(K, seed):
    """choose_bias against a direct count: for every beta of the grid its temperature from the
    default start (the warm start of choose_bias reaches the same optimum: within 1 %, ten times
    the 0.1 % step that stops Newton's method), the (top-1 + top-10) hits / 2 of T U + beta
    log(1 + n_k), and the first best beta kept."""
    g = torch.Generator().manual_seed(seed)
    U, y = torch.rand(30, K, generator=g), torch.randint(0, K, (30,), generator=g)
    log_counts = torch.log1p(torch.randint(0, 50, (K,), generator=g).float())
    beta, T, scores = choose_bias(U, y, log_counts)
    expected, temperatures = {}, {}
    for b in BIAS_WEIGHTS:
        temperatures[b] = calibrate_temperature(U, y, bias=b * log_counts)
        sc = (temperatures[b] * U + b * log_counts).numpy()
        rank = (sc > sc[np.arange(30), y.numpy()][:, None]).sum(1)
        expected[b] = 0.5 * (np.mean(rank < 1) + np.mean(rank < 10))
    assert T == pytest.approx(temperatures[beta], rel=1e-2)
    close = [b for b in BIAS_WEIGHTS if abs(expected[b] - scores[b]) > 1e-12]  # a rank flipped by T's tolerance
    assert len(close) <= 1, (scores, expected)
    if not close:
        assert beta == next(b for b in BIAS_WEIGHTS if expected[b] == max(expected.values()))


@settings(max_examples=25, deadline=None)
@given(st.integers(3, 20), st.integers(0, 2**31 - 1), st.sampled_from((1.0, 0.5)), st.sampled_from((1.0, 0.6)))
def test_a_weight_counts_as_that_many_copies_in_the_start(K, seed, root, power):
    """Property (fit's contract: a sample weight of 2 counts as two copies): with integer
    weights (0 included: the row is absent), the start's pieces equal those of the rows repeated
    that many times -- the centroids and their pattern, the held-out hits, the bias and its
    temperature. In exact arithmetic they are the same sums, so the tolerances are float
    round-off (the temperature: both runs make the same Newton steps)."""
    rng = np.random.RandomState(seed)
    N = 60
    X = sp.random(N, 25, density=0.2, format="csr", random_state=rng)
    y, w = rng.randint(K, size=N), rng.randint(0, 4, size=N).astype(float)
    tr, val = np.arange(40), np.arange(40, N)
    w[val[0]] = max(w[val[0]], 1.0)
    rep = np.repeat(np.arange(N), w.astype(int))
    tr_rep, val_rep = np.flatnonzero(rep < 40), np.flatnonzero(rep >= 40)
    pattern, loc = pattern_and_centroids(X[tr], y[tr], K, root=root, power=power, weights=w[tr])
    pattern_rep, loc_rep = pattern_and_centroids(X[rep[tr_rep]], y[rep[tr_rep]], K, root=root, power=power)
    assert torch.equal(pattern.keys, pattern_rep.keys)
    torch.testing.assert_close(loc, loc_rep)
    hits = _heldout_hits(X, y, K, tr, val, (1.0, 0.5), root=root, weights=w)
    hits_rep = _heldout_hits(X[rep], y[rep], K, tr_rep, val_rep, (1.0, 0.5), root=root)
    assert np.allclose(hits, hits_rep, rtol=1e-12, atol=1e-12)
    g = torch.Generator().manual_seed(seed)
    U, log_counts = torch.rand(N, K, generator=g, dtype=torch.float64), torch.rand(K, generator=g, dtype=torch.float64)
    yt, wt, rt = torch.as_tensor(y), torch.as_tensor(w), torch.as_tensor(rep)
    assert calibrate_temperature(U, yt, bias=log_counts, weights=wt) == pytest.approx(
        calibrate_temperature(U[rt], yt[rt], bias=log_counts), rel=1e-9)
    beta, T, scores = choose_bias(U, yt, log_counts, weights=wt)
    beta_rep, T_rep, scores_rep = choose_bias(U[rt], yt[rt], log_counts)
    assert beta == beta_rep and T == pytest.approx(T_rep, rel=1e-9)
    assert scores == pytest.approx(scores_rep, rel=1e-12)


def test_rows_of_weight_zero_are_out_of_the_start(small_pattern_limit):
    """A fit's rows of sample weight 0 are not in the start: a class and a feature seen only in
    them get no weights on the pattern (before, their rows entered the centroids)."""
    X, y = _few_rows_per_class(K=100, D=1000, N=400)
    extra = sp.csr_matrix((np.ones(20), (np.arange(20), np.full(20, 999))), shape=(20, 1000))
    X2, y2 = sp.vstack([X[:, :999], sp.csr_matrix((0, 999))]), y  # feature 999 only in the extra rows
    X2 = sp.hstack([X2, sp.csr_matrix((400, 1))]).tocsr()
    Xa, ya = sp.vstack([X2, extra + X2[:20]]).tocsr(), np.concatenate([y2, np.full(20, 100)])
    weights = np.concatenate([np.ones(400), np.zeros(20)])
    clf = ARClassifier(random_state=0, max_epochs=1).fit(Xa, ya, sample_weight=weights)
    assert clf.training_path_.weight_pattern
    k, j = clf.weight_pattern_.coordinates()
    assert not bool((k == 100).any()) and not bool((j == 999).any())


def _mean_log_lik(U, y, T, bias=None):
    """The mean log softmax(T U + b)_y in float64, the function calibrate_temperature maximises."""
    z = T * U.double() + (0.0 if bias is None else bias.double())
    return float(z.log_softmax(1)[torch.arange(len(y)), y].mean())


def _assert_maximises(U, y, bias=None, start=15.0):
    """calibrate_temperature's T against a brute-force search: no T of a log grid over [1, 1000]
    (400 points, refined around the best) scores more than 1e-4 nats above it (its stop is a
    Newton step under 0.1 % of T: near the maximum of this concave function that leaves
    f''(T) (0.001 T)^2 / 2, and where f is flat -- rows the largest score already labels right,
    whose f rises towards 0 as T grows -- a gain of a few 1e-6)."""
    T = calibrate_temperature(U, y, start=start, bias=bias)
    grid = np.geomspace(1.0, 1000.0, 400)
    best = grid[np.argmax([_mean_log_lik(U, y, t, bias) for t in grid])]
    fine = np.linspace(best / 1.02, best * 1.02, 101)
    top = max(_mean_log_lik(U, y, t, bias) for t in np.concatenate([grid, fine]) if 1.0 <= t <= 1000.0)
    assert 1.0 <= T <= 1000.0 and _mean_log_lik(U, y, T, bias) >= top - 1e-4, (T, best)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 60), st.integers(1, 50), st.booleans(), st.sampled_from([torch.float32, torch.float64]),
       st.integers(0, 2**31 - 1))
def test_calibrate_temperature_maximises_the_held_out_log_likelihood(K, n, with_bias, dtype, seed):
    """The temperature is the maximum of the mean log-likelihood over [1, 1000] (brute force),
    from any start, with or without a bias, in either dtype."""
    g = torch.Generator().manual_seed(seed)
    U, y = torch.rand(n, K, generator=g, dtype=dtype), torch.randint(0, K, (n,), generator=g)
    bias = torch.randn(K, generator=g, dtype=dtype) if with_bias else None
    _assert_maximises(U, y, bias, start=float(torch.rand(1, generator=g)) * 50 + 1)


@pytest.mark.parametrize("start", [15.0, 47.7, 300.0])
def test_calibrate_temperature_moves_where_the_curvature_rounds_to_zero(start):
    """Rows whose label scores below another class, at a start where float32's softmax is one-hot
    (Var_p[u] rounds to 0, no Newton step exists): the maximum is at T = 1 (found by the property
    test above, which the first safeguarded version failed: it stopped at its start)."""
    U, y = torch.tensor([[0.7219, 0.3854], [0.7279, 0.1047]]), torch.tensor([1, 1])
    _assert_maximises(U, y, start=start)


def test_calibrate_temperature_does_not_overshoot_where_the_softmax_is_peaked():
    """Sparse scores like a reverse dictionary's (most classes 0, a wrong class well above the
    label on most rows): at the default start the softmax is nearly one-hot, f'' is nearly 0,
    and a plain Newton step jumps past the maximum (on WordNet's held-out rows it ended at
    T = 202, a held-out log-likelihood of -132 against -9.3 at T = 5); the safeguarded steps
    stay at the maximum."""
    g = torch.Generator().manual_seed(0)
    n, K = 200, 1000
    U, y = torch.zeros(n, K), torch.randint(0, K, (n,), generator=g)
    wrong = torch.randint(0, K, (n,), generator=g)
    U[torch.arange(n), wrong] = 1.0 + torch.rand(n, generator=g)
    hit = torch.rand(n, generator=g) < 0.3
    U[torch.arange(n), y] = torch.where(hit, 3.0, 0.2)
    _assert_maximises(U, y)


def test_centroid_power_scales_the_centroids():
    X, y = _few_rows_per_class(K=30, D=200, N=120)
    pattern, loc = pattern_and_centroids(X, y, 30, temperature=1.0, power=0.5)
    C = np.zeros((30, 200))
    np.add.at(C, y, X.toarray())
    assert np.allclose(pattern.dense(loc.double()).numpy(), C / np.linalg.norm(C, axis=1, keepdims=True) ** 0.5, atol=1e-5)


def test_a_fit_that_only_gets_worse_returns_its_start(small_pattern_limit):
    """A step size that wrecks W: every held-out score after the start is worse, so the fit
    keeps the start -- W at the centroids of all the rows (the held-out ones included), the
    bias at its start (the chosen weight of the classes' log counts) -- and stops after the patience."""
    X, y = _few_rows_per_class(K=100, D=1000, N=400)
    clf = ARClassifier(random_state=0, learning_rate=50.0).fit(X, y)
    assert clf.training_path_.weight_pattern
    scores = clf.validation_scores_
    assert scores[0] == clf.best_validation_score_ and max(scores[1:]) < scores[0], scores
    assert clf.n_steps_ < 8 * 4  # stopped by the held-out rows, before the 8 epochs
    Xs = apply_scaler(X, clf.feature_mean_, clf.feature_scale_, True)
    start = clf.centroid_start_
    pattern, loc = pattern_and_centroids(Xs, y, 100, power=start.power, temperature=start.temperature, root=start.root)
    assert torch.equal(clf.weight_pattern_.keys, pattern.keys)
    assert torch.allclose(clf.param_state_["params"]["weight"], loc, atol=1e-5)
    # the bias at its start, beta log(1 + n_k) of all the rows' counts (up to a constant), beta chosen
    extra = clf.param_state_["params"]["bias"].numpy() - start.bias * np.log1p(np.bincount(y, minlength=100))
    assert start.bias in (0.0, 0.25, 0.5, 1.0) and np.ptp(extra) < 0.01


@pytest.mark.slow
def test_the_pattern_path_beats_its_start(small_pattern_limit):
    """The default fit against the centroid scorer it starts from, on held-out rows (the
    regime of the reverse dictionaries at test size): at least as good a top-1."""
    X, y = _few_rows_per_class(K=400, D=3000, N=1600)
    test = np.arange(len(y)) % 4 == 0
    clf = ARClassifier(random_state=0).fit(X[~test], y[~test])
    mean, scale = fit_scaler(X[~test], sparse_inputs=True, idf=True)
    Z = apply_scaler(X, mean, scale, normalize_rows=True)
    pattern, loc = pattern_and_centroids(Z[~test], y[~test], 400)
    centroid = (pattern.sparse(loc.double()).to_dense().numpy() @ Z[test].toarray().T).argmax(0)
    assert clf.score(X[test], y[test]) >= np.mean(centroid == y[test])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.integers(1, 12), st.booleans(), st.floats(0.0, 40.0), st.sampled_from([0.0, 0.2, 2.0]),
       st.integers(0, 2**31 - 1))
def test_pattern_heldout_log_lik_equals_the_dense_log_softmax(K, R, label_sets, spread, dense_share, seed):
    # the sparse log-normaliser against log_likelihood of the dense utilities b + X W^T (float64:
    # agreement to 1e-10, the rounding of a sum of ~K terms; rows with no feature of any class
    # included, the weights of any sign, biases up to `spread` apart; every feature in the dense
    # block, some, or none)
    from pyro_ar.evaluation import linear_source, log_likelihood
    from pyro_ar.infer.pattern_fit import pattern_heldout_log_lik

    rng = np.random.RandomState(seed)
    D = 7
    keys = np.flatnonzero(rng.rand(K * D) < 0.3)
    pattern = WeightPattern(torch.as_tensor(keys, dtype=torch.int64), K, D)
    X = sp.random(R, D, density=0.4, random_state=rng, format="csr")
    rows = np.sort(rng.randint(0, R, size=R + 3)) if label_sets else None
    labels = rng.randint(0, K, size=R + 3 if label_sets else R)
    w = torch.as_tensor(rng.randn(len(keys)) * 3)
    b = torch.as_tensor(rng.rand(K) * spread - spread / 2)
    got = pattern_heldout_log_lik(X, pattern, labels, rows, dense_share)(w, b)
    x = torch.as_tensor(X.toarray())
    want = log_likelihood(linear_source(x, pattern.sparse(w), b), torch.as_tensor(labels), "gumbel",
                          reduce="none", rows=None if rows is None else torch.as_tensor(rows))
    np.testing.assert_allclose(got, want.numpy(), rtol=0, atol=1e-10)

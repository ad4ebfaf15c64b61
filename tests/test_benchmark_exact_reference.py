"""benchmarks/exact_reference.py: the exact softmax on the same model as ``ARClassifier()``
(the weight-pattern path) against A&R, as time-to-quality curves -- on a tiny synthetic
problem (seconds), and the comparison on hand-made curves."""

import numpy as np
import pytest

pytest.importorskip("scipy")
pytest.importorskip("sklearn")


def dictionary_like(K=40, per_class=12, D=150, seed=0):
    """A tiny reverse-dictionary-like problem: each class owns 6 of the D binary features; a
    row holds 2 of its class's and 4 random ones. ``(X, y, Xt, yt)``, scipy CSR, balanced labels."""
    import scipy.sparse as sp

    rng = np.random.RandomState(seed)
    own = rng.randint(0, D, size=(K, 6))

    def rows(n):
        y = np.repeat(np.arange(K), n)
        cols = np.concatenate([np.stack([rng.choice(own[k], 2, replace=False) for k in y]),
                               rng.randint(0, D, size=(len(y), 4))], axis=1)
        X = sp.csr_matrix((np.ones(cols.size), (np.repeat(np.arange(len(y)), 6), cols.ravel())), shape=(len(y), D))
        X.data[:] = 1.0  # (a repeated feature counts once)
        return X, y
    return rows(per_class) + rows(3)


@pytest.fixture(scope="module")
def fits():
    """A&R and exact fit_curve results on 480 training rows (K = 40) on the weight-pattern path."""
    from types import SimpleNamespace

    from benchmarks import exact_reference as er
    from pyro_ar import training_path as _training_path

    d = SimpleNamespace(**dict(zip(("X", "y", "Xt", "yt"), dictionary_like())))
    old, _training_path.FULL_RANK_MAX_BYTES = _training_path.FULL_RANK_MAX_BYTES, 1 << 12
    try:
        ar = er.fit_curve({"likelihood": "ar"}, d.X, d.y, d.Xt, d.yt, curve_rows=60)
        with er.pattern_patience(50):
            exact = er.fit_curve({"likelihood": "exact", "num_steps": 12}, d.X, d.y, d.Xt, d.yt, curve_rows=60)
    finally:
        _training_path.FULL_RANK_MAX_BYTES = old
    return d, ar, exact


def test_both_fits_are_the_same_model_from_the_same_start(fits):
    """Same path, same start: the two curves' first points (the centroid scorer, before any
    step) score the same held-out and test rows identically; only the likelihood differs."""
    _, ar, exact = fits
    assert ar["likelihood"] == "ar" and exact["likelihood"] == "exact"
    assert "training class-feature pattern" in ar["path"] and ar["path"] == exact["path"]
    a0, e0 = ar["curve"][0], exact["curve"][0]
    assert a0["test_ll"] == pytest.approx(e0["test_ll"], abs=1e-9)
    assert a0["val_ll"] == pytest.approx(e0["val_ll"], abs=1e-9)


def test_curves_are_timed_and_end_at_the_fitted_model(fits):
    d, ar, exact = fits
    for r in (ar, exact):
        t = [h["cpu_s"] for h in r["curve"]]
        assert len(t) >= 3 and all(b >= a for a, b in zip(t, t[1:])) and t[0] >= 0
        assert r["curve"][-1]["final"] and r["curve"][-1]["cpu_s"] == r["fit_cpu_s"]
        assert r["test_ll"] == pytest.approx(r["row_ll"].mean()) and len(r["row_ll"]) == len(d.yt)
        assert np.all(r["row_ll"] <= 0) and 0 <= r["top1"] <= r["top5"] <= r["top10"] <= 1
        # the fitted model is the curve's point of its best held-out score (the curve scores
        # the model the fit would return there: the live weights moved onto all the rows)
        best = max(r["curve"][:-1], key=lambda h: h["val_ll"])
        assert any(h["test_ll"] == pytest.approx(r["curve"][-1]["test_ll"], abs=1e-6) for h in r["curve"][:-1]
                   if h["val_ll"] >= best["val_ll"] - 1e-4)
    # the exact fit ran its 12 steps (patience 50 never stops it)
    assert exact["steps"] == 12 and exact["stopped_early"] is False
    assert len(exact["curve"]) >= 4                # the start, scores along the way, the end, the fitted model


def test_training_moves_the_exact_fit_off_its_start(fits):
    """The exact likelihood is the one trained: 12 full-softmax steps change the test score."""
    _, _, exact = fits
    assert exact["curve"][-2]["test_ll"] != pytest.approx(exact["curve"][0]["test_ll"], abs=1e-6)


def test_summarize_on_hand_made_curves():
    from benchmarks.exact_reference import summarize

    def fit(points, row_ll):
        return {"curve": [{"cpu_s": t, "test_ll": v} for t, v in points], "test_ll": float(np.mean(row_ll)),
                "row_ll": np.asarray(row_ll, dtype=float), "fit_cpu_s": points[-1][0]}
    ar = fit([(1.0, -5.0), (2.0, -4.0), (3.0, -3.99)], [-3.98, -4.0])    # L_ar = -3.99
    exact = fit([(1.0, -5.0), (20.0, -4.0), (40.0, -3.98)], [-3.97, -3.99])  # L_ex = -3.98
    s = summarize(ar, exact, margin=0.02, speedup=10)
    assert s["gap"] == pytest.approx(0.01) and s["quality_met"]
    assert s["gap_se"] == pytest.approx(0.0)                    # the same difference on both rows
    assert s["level"] == pytest.approx(-4.0)
    assert s["ar_cpu_to_level"] == pytest.approx(2.0) and s["exact_cpu_to_level"] == pytest.approx(20.0)
    assert s["speedup"] == pytest.approx(10.0) and s["speedup_met"]
    assert s["fit_cpu_ratio"] == pytest.approx(40.0 / 3.0)
    # to L_ex itself (-3.98): A&R never (its best is -3.99); exact at 40 s, 39 s after its start
    assert s["ar_cpu_to_exact"] is None and s["speedup_to_exact"] is None
    assert s["exact_cpu_to_exact"] == pytest.approx(40.0) and s["exact_cpu_to_exact_after_start"] == pytest.approx(39.0)
    s = summarize(exact, ar)                              # the other way round: L = -3.99 reached by both
    assert s["ar_cpu_to_exact"] == pytest.approx(20.0 + 20.0 * 0.5) and s["exact_cpu_to_exact"] == pytest.approx(3.0)
    assert s["speedup_to_exact_after_start"] == pytest.approx(2.0 / 29.0)
    # A&R never reaches the level: no speed-up, target missing rather than met
    slow = fit([(1.0, -5.0), (2.0, -4.5)], [-4.5, -4.5])
    s = summarize(slow, exact, margin=0.02)
    assert s["ar_cpu_to_level"] is None and s["speedup"] is None and s["speedup_met"] is None
    assert not s["quality_met"]


def test_pattern_patience_is_restored():
    from benchmarks.exact_reference import pattern_patience
    from pyro_ar.infer import pattern_fit as _pattern_fit

    before = _pattern_fit.PATTERN_PATIENCE
    with pattern_patience(7):
        assert _pattern_fit.PATTERN_PATIENCE == 7
    assert _pattern_fit.PATTERN_PATIENCE == before

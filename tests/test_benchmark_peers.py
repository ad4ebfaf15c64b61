"""benchmarks/peers.py: the scoring rules, and one --quick run of every method on synthetic data."""

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("scipy")
pytest.importorskip("sklearn")

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "peers.py"


@pytest.fixture(scope="module")
def peers():
    from benchmarks import peers

    return peers


def test_top_k_rule_spreads_the_rest_evenly(peers):
    labels, K = [[3, 1]], 10
    got = peers.topk_rule_log_lik(labels, [[0.5, 0.2]], np.array([1]), K)
    assert got[0] == pytest.approx(math.log(0.2))
    got = peers.topk_rule_log_lik(labels, [[0.5, 0.2]], np.array([7]), K)
    assert got[0] == pytest.approx(math.log(0.3 / 8))
    # scores summing past 1 are scaled down to leave MIN_REST for the other labels
    over = [[0.9, 0.6]]
    assert peers.topk_rule_log_lik(labels, over, np.array([1]), K)[0] == pytest.approx(
        math.log(0.6 * (1 - peers.MIN_REST) / 1.5))
    assert peers.topk_rule_log_lik(labels, over, np.array([0]), K)[0] == pytest.approx(math.log(peers.MIN_REST / 8))


def test_metrics_and_top_of_scores(peers):
    scores = np.array([[0.1, 0.9, 0.5, 0.3], [0.8, 0.1, 0.2, 0.7]])
    top = peers.top_of_scores(scores, 3)
    assert top.tolist() == [[1, 2, 3], [0, 3, 2]]
    m = peers.metrics(top, np.log([0.5, 0.25]), np.array([2, 0]), [[2, 1], [3]])
    assert m["top1"] == 0.5 and m["top5"] == 1.0 and m["p@1"] == 0.5
    assert m["log_lik"] == pytest.approx(np.log([0.5, 0.25]).mean())


def test_frequency_cutoffs_split_the_training_rows(peers):
    counts = np.array([1, 8, 4, 2, 1])  # sorted 8 4 2 1 1: half at rank 1, three quarters at rank 2
    assert peers.frequency_cutoffs(counts) == [1, 2]


def test_a_missing_package_is_reported_not_raised(peers, monkeypatch):
    monkeypatch.setitem(peers.PACKAGE, "omikuji", "no_such_package_for_pyro_ar_tests")
    assert peers.run("omikuji", {}, None) == {"status": "missing", "package": "no_such_package_for_pyro_ar_tests"}


@pytest.mark.slow
def test_quick_run_of_every_method(peers, tmp_path):
    """All methods on a small synthetic problem (about 30 CPU s: one process per method)."""
    out = subprocess.run([sys.executable, str(SCRIPT), "--dataset", "synthetic", "--quick", "--out", str(tmp_path),
                          "--pyro-ar-variants", '{"strategy": "shared"}'],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    res = json.loads((tmp_path / "peers_synthetic_quick.json").read_text())
    rows = {r["method"]: r for r in res["results"]}
    assert list(rows) == list(peers.METHODS) + ['pyro_ar {"strategy": "shared"}']
    for name, r in rows.items():
        assert r["status"] in ("ok", "missing"), (name, r)
        if r["status"] == "ok":
            assert 0 <= r["top1"] <= r["top5"] <= r["top10"] <= 1 and r["train_cpu_s"] >= 0
            assert r["log_lik"] is None or r["log_lik"] <= 0
    for always in ("centroid", "frequency", "adaptive", "pyro_ar", 'pyro_ar {"strategy": "shared"}'):
        assert rows[always]["status"] == "ok"
    assert rows["centroid"]["log_lik"] is None and rows["pyro_ar"]["log_lik"] > res["data"]["uniform_log_lik"]
    assert "centroid" in out.stdout and "top-100 rule" in out.stdout


def test_xmc_file_writes_empty_rows_as_the_label_alone(peers, tmp_path):
    """omikuji refuses 'label ' (a trailing space) -- WordNet has 8 training glosses without a feature."""
    import scipy.sparse as sp

    X = sp.csr_matrix(np.array([[1.0, 0.0, 0.5], [0.0, 0.0, 0.0]], dtype=np.float32))
    peers.xmc_file(tmp_path / "train.txt", X, np.array([1, 0]))
    assert (tmp_path / "train.txt").read_text() == "2 3 2\n1 0:1 2:0.5\n0\n"
    omikuji = pytest.importorskip("omikuji")
    omikuji.Model.train_on_data(str(tmp_path / "train.txt"), omikuji.Model.default_hyper_param(), n_threads=1)

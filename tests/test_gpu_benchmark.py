"""benchmarks/gpu.py at its --quick size (on the CPU here, on CUDA where present): every part
runs, and the JSON holds what the GPU check reads."""

import json
import os
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.slow
def test_gpu_benchmark_quick_runs_every_part(tmp_path):
    mnist = os.path.join(os.path.dirname(ROOT), "shared", "data", "mnist")
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "gpu.py"), "--quick", "--device", "cpu",
           "--out", str(tmp_path), "--budget", "0.5", "--eval-pairs", "200", "--mnist", mnist]
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), OMP_NUM_THREADS="1")
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    r = json.loads((tmp_path / "gpu_quick.json").read_text())
    assert r["errors"] == {} and set(r["part_seconds"]) == {"a", "b", "c", "d"}
    assert [(row["K"], row["validation"]) for row in r["ar_step"]] == \
        [(K, v) for K in (100, 1_000, 10_000) for v in (True, False)]
    for row in r["ar_step"]:  # (a) and (e): times and the state's bytes
        assert 0 < row["p10_s"] <= row["median_s"] <= row["p90_s"]
        K, D = row["K"], row["D"]
        assert row["param_bytes"] >= 4 * (K * D + K)           # W and b in float32 (and the guide's eta)
        assert row["optim_state_bytes"] >= 2 * 4 * K * D        # Adam's two moments of W
    assert set(r["ar_step_flatness"]) == {"on", "off"}
    assert all(f["max_over_min"] >= 1.0 for f in r["ar_step_flatness"].values())
    ex = r["exact_step"]
    assert ex["exact"]["K"] == 10_000 and ex["exact_over_ar"] == ex["exact"]["median_s"] / ex["ar"]["median_s"]
    c = r["time_to_quality"]
    assert set(c["methods"]) == {"ar_softmax", "exact", "adaptive"} and c["K"] == 25_275
    for m in c["methods"].values():  # exact log-likelihoods of a normalised model are < 0
        assert m["steps"] > 0 and m["best"]["test_ll"] < 0
    assert c["methods"]["exact"]["exact_time_over_this"] == 1.0
    rows = {row["dataset"].split(" ")[0]: row for row in r["classifier"]}
    assert rows["sparse"]["n_classes"] <= 50 and 0 <= rows["sparse"]["test_accuracy"] <= 1
    assert "mnist" in rows  # fitted, or skipped with the reason when the files are not there
    assert "(a, b, e) one SVI step" in run.stdout and "(c) tutorial 05" in run.stdout


def test_out_of_memory_skips_the_larger_k_and_the_exact_step_tries_a_smaller_one(monkeypatch):
    """Part (a) records an out-of-memory K and stops; part (b) goes down the grid to a K that fits."""
    from benchmarks import gpu

    fits = {"ar": 10**6, "exact": 10**4}

    def fake_step(likelihood, K, D, B, s, device, steps, warmup, seed=0, validate=True):
        if K > fits[likelihood]:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        return dict(likelihood=likelihood, K=K, validation=validate, median_s=1e-3 * (1 + (likelihood == "exact") * K / 100),
                    p10_s=1e-3, p90_s=1e-3, param_bytes=0, optim_state_bytes=0, peak_bytes=None)

    monkeypatch.setattr(gpu, "linear_step", fake_step)
    a = gpu.parse_args(["--device", "cpu", "--ks", "1e3,1e4,1e5,1e6,1e7"])
    a.save = lambda report: None
    report = {}
    gpu.part_a(a, report)
    assert [r["K"] for r in report["ar_step"]] == [K for K in (10**3, 10**4, 10**5, 10**6, 10**7) for _ in "ab"]
    assert report["ar_step"][-1]["error"] == "out of memory"
    assert {f["K_max"] for f in report["ar_step_flatness"].values()} == {10**6}
    gpu.part_b(a, report)
    assert [t["K"] for t in report["exact_step_tried"]] == [10**7, 10**6, 10**5]
    assert report["exact_step"]["exact"]["K"] == 10**4 and report["exact_step"]["exact_over_ar"] == 101.0

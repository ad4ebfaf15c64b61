"""The generated battery of ``scripts/surface_battery.py`` (issue 38) in the slow tier: every
bad input to the entry points added or changed since 0.1 is refused naming its argument, no
input crashes the process (each case runs in a forked child), none gives NaN from finite
inputs, and the good controls return finite values."""

import json
import os
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not hasattr(os, "fork"), reason="the battery forks a child per case")]

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_surface_battery_has_no_obscure_crashing_silent_or_nan_case(tmp_path):
    out = tmp_path / "battery.json"
    run = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "surface_battery.py"), "--quiet",
                          "--json", str(out)], cwd=REPO, capture_output=True, text=True, timeout=3600,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    counts = json.loads(out.read_text())["counts"] if out.exists() else {}
    bad = [c for c in json.loads(out.read_text())["cases"] if c["outcome"] not in ("named", "ok")] if counts else []
    assert run.returncode == 0 and not bad, (run.stdout[-3000:], run.stderr[-3000:], bad[:20])
    assert sum(counts.values()) >= 300 and counts.get("ok", 0) >= 20, counts

"""Reports the fuzz counts (tests/fuzz/_harness.py) at the end of the run."""

import json
import os

from tests.fuzz import _harness


def pytest_terminal_summary(terminalreporter):
    if not _harness.STATS["inputs"]:
        return
    terminalreporter.write_sep("=", "pyro_ar fuzz suite (issue 12)")
    terminalreporter.write_line(_harness.summary())
    per_kind = {k[7:]: v for k, v in sorted(_harness.STATS.items()) if k.startswith("inputs:")}
    terminalreporter.write_line("inputs per area: " + ", ".join(f"{k} {v}" for k, v in per_kind.items()))
    out = os.environ.get("PYRO_AR_FUZZ_STATS")
    if out:
        with open(out, "w") as f:
            json.dump(dict(_harness.STATS), f, indent=1, sort_keys=True)

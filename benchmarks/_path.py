"""``python benchmarks/NAME.py``: put the repository root on ``sys.path`` so that the script's
``benchmarks.*`` imports work as under ``python -m benchmarks.NAME`` (the one place that edits
the path; a script imports this only when it has no package)."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

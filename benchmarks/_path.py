"""``python benchmarks/NAME.py``: make the repository root importable so that the script's
``benchmarks.*`` imports work as under ``python -m benchmarks.NAME`` (the one place that edits
the path; a script imports this only when it has no package). The root goes last, so that
the ``pyro_ar`` found is still the one of ``PYTHONPATH`` or the installed package (as
``benchmarks/before_after.py`` needs, which puts an old checkout first)."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.append(ROOT)

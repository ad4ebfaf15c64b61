"""Every tutorial runs end to end at its CI size (``--quick``) and writes its figures.

A tutorial is a script ``tutorials/NN_slug.py`` that declares the files it writes in a
module-level ``FIGURES`` tuple. Each one is run in a fresh interpreter (as a user would run
it) with ``--quick --out <tmp dir>``; the test then checks that every declared figure exists,
is a non-empty PNG, and that the script wrote no figure it did not declare.
"""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

TUTORIALS_DIR = Path(__file__).resolve().parent.parent / "tutorials"
TUTORIALS = sorted(TUTORIALS_DIR.glob("[0-9][0-9]_*.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def declared_figures(script: Path) -> tuple:
    """The literal value of the script's module-level ``FIGURES`` assignment."""
    tree = ast.parse(script.read_text(), filename=str(script))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "FIGURES" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError(f"{script.name} declares no module-level FIGURES tuple")


def test_tutorials_exist():
    names = [p.name[:2] for p in TUTORIALS]
    assert names == ["01", "02", "03", "04", "05"], [p.name for p in TUTORIALS]


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_quick_run_writes_its_figures(script, tmp_path):
    figures = declared_figures(script)
    assert figures, f"{script.name}: FIGURES is empty"
    prefix = script.name[:2] + "_"
    assert all(f.startswith(prefix) and f.endswith(".png") for f in figures), figures

    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0")
    out = tmp_path / "figures"
    proc = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(out)],
        cwd=tmp_path,  # the script must not depend on the working directory
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"

    for name in figures:
        path = out / name
        assert path.is_file(), f"{script.name} did not write {name}"
        with open(path, "rb") as f:
            head = f.read(8)
        assert head == PNG_SIGNATURE and path.stat().st_size > 1000, f"{name} is not a PNG with content"
    written = {p.name for p in out.glob("*.png")}
    assert written == set(figures), f"undeclared figures: {sorted(written - set(figures))}"

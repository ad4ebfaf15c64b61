"""Every tutorial runs end to end at its CI size as a script and writes its figures.

A tutorial is a script ``tutorials/NN_slug.py`` in jupytext "percent" format (``# %%`` cells)
that declares the files it writes in a module-level ``FIGURES`` tuple. Here it runs in a
fresh interpreter (as a user would run it) with ``--quick --out <tmp dir>``; the test checks
that every declared figure exists, is a non-empty PNG, and that the tutorial wrote no figure
it did not declare.

The notebook side is tested by the documentation build (``tests/test_docs.py``): myst-nb
reads each tutorial through jupytext and executes it in a real Jupyter kernel (no
``__file__``, a kernel's ``sys.argv``, ``PYRO_AR_QUICK=1``, the inline backend), and the
rendered page must show every declared figure inline. So each tutorial executes once as a
script and once as a notebook.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import data_required

TUTORIALS_DIR = Path(__file__).resolve().parent.parent / "tutorials"
TUTORIALS = sorted(TUTORIALS_DIR.glob("[0-9][0-9]_*.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: tutorials with a long training phase -> what they must print while it runs (each
#: method's progress lines from ``train(progress={"style": "lines"})``: step, CPU s, losses,
#: validation log-likelihood), so that the main job is never silent
PROGRESS_LINES = {
    "05_language_model": [r"A&R softmax: step [\d,]+, \d+\.\d CPU s, loss \S+, valid_ll -?\d",
                          r"exact softmax: step [\d,]+, \d+\.\d CPU s, loss \S+, valid_ll -?\d"],
}


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
    """01-05 exist and the numbering has no gaps or duplicates (06+ are picked up as added)."""
    names = [p.name[:2] for p in TUTORIALS]
    assert len(names) >= 5 and names == [f"{i:02d}" for i in range(1, len(names) + 1)], \
        [p.name for p in TUTORIALS]


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_quick_run_writes_its_figures(script, tmp_path):
    figures = declared_figures(script)
    assert figures, f"{script.name}: FIGURES is empty"
    prefix = script.name[:2] + "_"
    assert all(f.startswith(prefix) and f.endswith(".png") for f in figures), figures

    # external data (Bibtex, MNIST) missing: an error where they are expected (CI), else the
    # script's stated fallback
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONHASHSEED="0",
               PYRO_AR_REQUIRE_DATA="1" if data_required() else "0")
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
    for pattern in PROGRESS_LINES.get(script.stem, ()):
        assert re.search(pattern, proc.stdout), f"{script.name} printed no progress /{pattern}/:\n{proc.stdout}"

    check_figures(out, figures, script.name)


def check_figures(out: Path, figures: tuple, name: str) -> None:
    """Every declared figure is a non-empty PNG in ``out``, and ``out`` has no other PNG."""
    for fig in figures:
        path = out / fig
        assert path.is_file(), f"{name} did not write {fig}"
        with open(path, "rb") as f:
            head = f.read(8)
        assert head == PNG_SIGNATURE and path.stat().st_size > 1000, f"{fig} is not a PNG with content"
    written = {p.name for p in out.glob("*.png")}
    assert written == set(figures), f"undeclared figures: {sorted(written - set(figures))}"


def test_missing_external_data_is_an_error_where_required(monkeypatch, capsys):
    """_tutorial.load_external: with PYRO_AR_REQUIRE_DATA=1 (the docs build, CI) a missing data
    set raises, naming the variable and the loader's message; without it the script says what
    it does instead and carries on."""
    sys.path.insert(0, str(TUTORIALS_DIR))
    try:
        import _tutorial
    finally:
        sys.path.remove(str(TUTORIALS_DIR))

    def loader():
        raise FileNotFoundError("load_bibtex: file 'bibtex-train.arff' not found (looked for /x)")

    monkeypatch.setenv("PYRO_AR_REQUIRE_DATA", "1")
    with pytest.raises(FileNotFoundError, match=r"Bibtex is required here \(PYRO_AR_REQUIRE_DATA is set.*looked for /x"):
        _tutorial.load_external(loader, "Bibtex", "skipping this part")
    monkeypatch.setenv("PYRO_AR_REQUIRE_DATA", "0")
    assert _tutorial.load_external(loader, "Bibtex", "skipping this part") is None
    assert "Bibtex not found, skipping this part: load_bibtex" in capsys.readouterr().out
    assert _tutorial.load_external(lambda: 42, "Bibtex", "skipping this part") == 42


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_external_data_go_through_load_external(script):
    """Tutorials load data the package does not ship (02: Bibtex, 06: MNIST) only through
    _tutorial.load_external: no private try/except FileNotFoundError fallback that the docs
    build's PYRO_AR_REQUIRE_DATA could not see."""
    text = script.read_text()
    assert "except FileNotFoundError" not in text
    for loader in ("load_bibtex", "load_mnist"):
        if f"{loader}(" in text or f"{loader})" in text or f"{loader}," in text:
            assert "_tutorial.load_external(" in text, f"{script.name} calls {loader} without load_external"

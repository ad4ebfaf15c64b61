"""Every tutorial runs end to end at its CI size, as a script and as a notebook, and writes its figures.

A tutorial is a script ``tutorials/NN_slug.py`` in jupytext "percent" format (``# %%`` cells)
that declares the files it writes in a module-level ``FIGURES`` tuple.

* As a script: run in a fresh interpreter (as a user would run it) with
  ``--quick --out <tmp dir>``.
* As a notebook: jupytext and nbclient are not dependencies, so :func:`notebook_cells`
  splits the ``# %%`` code cells and a fresh interpreter executes them one after the other
  in one namespace, as a Jupyter kernel does: ``__file__`` undefined, ``sys.argv`` a
  kernel's (``ipykernel_launcher -f kernel.json``), the size chosen by ``PYRO_AR_QUICK=1``
  (a notebook has no command line), an IPython shell present (a stand-in module), and the
  working directory the notebook's folder (a copy of ``tutorials/``). Every figure must be
  shown inline (``plt.show()`` once per declared figure) and saved to the default folder.

Either way the test checks that every declared figure exists, is a non-empty PNG, and that
the tutorial wrote no figure it did not declare.
"""

import ast
import os
import shutil
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
    assert names == ["01", "02", "03", "04", "05", "07"], [p.name for p in TUTORIALS]


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

    check_figures(out, figures, script.name)

def notebook_cells(script: Path) -> list:
    """The code cells of a jupytext percent script, in order (markdown cells dropped)."""
    cells, current, is_code = [], [], True
    for line in script.read_text().splitlines(keepends=True):
        if line.startswith("# %%"):
            if is_code and "".join(current).strip():
                cells.append("".join(current))
            current, is_code = [], "[markdown]" not in line
        else:
            current.append(line)
    if is_code and "".join(current).strip():
        cells.append("".join(current))
    return cells


#: executes the cells of a notebook (JSON list of sources, argv[1]) as a Jupyter kernel would
KERNEL = r"""
import json, sys, types
cells = json.load(open(sys.argv[1]))
sys.argv = ["ipykernel_launcher", "-f", "kernel.json"]   # what a Jupyter kernel's argv looks like
sys.path.insert(0, "")                                     # the kernel imports from its folder
import matplotlib.pyplot as plt
plt.switch_backend("Agg")    # the kernel's inline backend (its figures are PNGs too), resolved
shell = types.ModuleType("IPython")                        # an IPython shell is running
shell.version_info = (9, 0)
kernel = types.SimpleNamespace(events=types.SimpleNamespace(register=lambda *a: None))
shell.get_ipython = lambda: kernel                         # (matplotlib registers a hook on it)
sys.modules["IPython"] = shell
shown = []
plt.show = lambda *a, **k: shown.append(len(plt.get_fignums()))
namespace = {"__name__": "__main__"}                       # no __file__ in a notebook
for i, source in enumerate(cells):
    exec(compile(source, f"<cell {i + 1}>", "exec"), namespace)
print("SHOWN", len(shown))
"""


def check_figures(out: Path, figures: tuple, name: str) -> None:
    for fig in figures:
        path = out / fig
        assert path.is_file(), f"{name} did not write {fig}"
        with open(path, "rb") as f:
            head = f.read(8)
        assert head == PNG_SIGNATURE and path.stat().st_size > 1000, f"{fig} is not a PNG with content"
    written = {p.name for p in out.glob("*.png")}
    assert written == set(figures), f"undeclared figures: {sorted(written - set(figures))}"


def test_notebook_cells_split():
    """The splitter keeps code cells in order and drops markdown cells."""
    script = TUTORIALS_DIR / "01_augmented_model.py"
    cells = notebook_cells(script)
    code_markers = [ln for ln in script.read_text().splitlines() if ln.startswith("# %%") and "markdown" not in ln]
    assert len(cells) == len(code_markers) >= 4
    assert all("# %%" not in c.splitlines()[0] for c in cells) and "import _tutorial" in cells[0]


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_runs_as_a_notebook(script, tmp_path):
    import json

    figures = declared_figures(script)
    folder = tmp_path / "tutorials"  # the notebook's folder: a copy, so figures/ lands in tmp
    folder.mkdir()
    shutil.copy(script, folder)
    shutil.copy(TUTORIALS_DIR / "_tutorial.py", folder)
    cells_file = tmp_path / "cells.json"
    cells_file.write_text(json.dumps(notebook_cells(script)))
    env = {k: v for k, v in os.environ.items() if k not in ("PYRO_AR_FIGURES",)}
    env.update(PYRO_AR_QUICK="1", MPLBACKEND="Agg", PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, "-c", KERNEL, str(cells_file)], cwd=folder, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"{script.name} failed as a notebook:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert f"SHOWN {len(figures)}" in proc.stdout, proc.stdout[-2000:]
    check_figures(folder / "figures", figures, script.name)

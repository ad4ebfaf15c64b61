"""The tutorials' script form: complete, the same cells as the notebook, and the script
mechanics (``--quick``, ``--out``, figures as PNG files) work.

A tutorial is a script ``tutorials/NN_slug.py`` in jupytext "percent" format (``# %%`` cells)
that declares the files it writes in a module-level ``FIGURES`` tuple.

Each tutorial is **executed once**, as a notebook, by the documentation build
(``tests/test_docs.py``, slow tier): myst-nb reads the script through jupytext and runs it
in a Jupyter kernel at its quick size; the rendered page must show every declared figure
inline, the figures must be written as PNGs, and tutorial 05's page must show its progress
lines. Here (fast, default tier) the script form is checked without running it again:
it compiles, the notebook the docs build executes has exactly the script's code
(the jupytext round trip gives the script back), it takes its size and output folder from
:func:`_tutorial.parse_args`, and a small script built the same way runs from another
working directory with ``--quick --out`` and writes its declared figure.
"""

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest


TUTORIALS_DIR = Path(__file__).resolve().parent.parent / "tutorials"
TUTORIALS = sorted(TUTORIALS_DIR.glob("[0-9][0-9]_*.py"))
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: tutorials with a long training phase -> what they must print while it runs (each
#: method's progress lines from ``train(progress={"style": "lines"})``: step, CPU s, losses,
#: validation log-likelihood), so that the main job is never silent (checked on the page the
#: docs build renders from the executed notebook, tests/test_docs.py)
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
def test_tutorial_script_is_complete_and_is_the_notebook(script):
    """The script compiles, declares its figures (``NN_*.png``), reads its options through
    ``_tutorial.parse_args``, and the notebook that the docs build executes (the same
    jupytext reader, ``docs/_ext/percent_reader.py``) holds exactly the script's text."""
    text = script.read_text()
    compile(text, str(script), "exec")
    figures = declared_figures(script)
    assert figures, f"{script.name}: FIGURES is empty"
    prefix = script.name[:2] + "_"
    assert all(f.startswith(prefix) and f.endswith(".png") for f in figures), figures
    assert "_tutorial.parse_args(" in text, f"{script.name} does not take --quick / --out"
    jupytext = pytest.importorskip("jupytext")
    nb = jupytext.reads(text, fmt="py:percent")
    assert jupytext.writes(nb, fmt="py:percent") == text, \
        f"{script.name}: the notebook is not the script (the jupytext round trip changes it)"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    compile(code, f"{script.name} (notebook)", "exec")


def test_parse_args_takes_the_command_line_or_the_environment(monkeypatch, tmp_path):
    """--quick / --out from a script's command line; $PYRO_AR_QUICK / $PYRO_AR_FIGURES in a
    notebook, whose kernel arguments (-f kernel.json) are ignored; the folder is created."""
    _tutorial = _import_tutorial_helper()
    monkeypatch.delenv("PYRO_AR_QUICK", raising=False)
    monkeypatch.delenv("PYRO_AR_FIGURES", raising=False)
    args = _tutorial.parse_args("t", argv=["--quick", "--out", str(tmp_path / "a"), "--seed", "3"])
    assert args.quick and args.out == str(tmp_path / "a") and args.seed == 3 and (tmp_path / "a").is_dir()
    args = _tutorial.parse_args("t", argv=["-f", "/run/kernel.json"])
    assert not args.quick and args.out == _tutorial.DEFAULT_OUT
    monkeypatch.setenv("PYRO_AR_QUICK", "1")
    monkeypatch.setenv("PYRO_AR_FIGURES", str(tmp_path / "b"))
    args = _tutorial.parse_args("t", argv=["-f", "/run/kernel.json"],
                                add_arguments=lambda p: p.add_argument("--full", action="store_true"))
    assert args.quick and args.out == str(tmp_path / "b") and args.full is False and (tmp_path / "b").is_dir()


def test_a_tutorial_shaped_script_runs_from_another_folder_and_writes_its_figure(tmp_path):
    """The script mechanics every tutorial relies on, in a fresh interpreter as a user runs
    one (``python NN_x.py --quick --out DIR`` from another working directory): ``import
    _tutorial`` from the script's folder, the Agg backend, the PNG written to ``--out`` and
    nothing else. (The tutorials themselves run once, as notebooks, in the docs build.)"""
    folder, cwd, out = tmp_path / "tutorials", tmp_path / "elsewhere", tmp_path / "figures"
    folder.mkdir(), cwd.mkdir()
    (folder / "_tutorial.py").write_text((TUTORIALS_DIR / "_tutorial.py").read_text())
    script = folder / "99_shape.py"
    script.write_text(
        "# %%\nimport os\nimport _tutorial\nfrom _tutorial import plt\n"
        "FIGURES = ('99_line.png',)\nargs = _tutorial.parse_args('shape')\n"
        "assert args.quick and plt.get_backend().lower() == 'agg'\n"
        "fig, ax = plt.subplots()\nax.plot([0, 1], [1, 0])\n"
        "_tutorial.save(fig, os.path.join(args.out, FIGURES[0]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLBACKEND", "PYRO_AR_QUICK", "PYRO_AR_FIGURES")}
    proc = subprocess.run([sys.executable, str(script), "--quick", "--out", str(out)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_figures(out, declared_figures(script), script.name)


def _import_tutorial_helper():
    """``tutorials/_tutorial.py`` as a module (the tutorials import it from their folder)."""
    sys.path.insert(0, str(TUTORIALS_DIR))
    try:
        import _tutorial
    finally:
        sys.path.remove(str(TUTORIALS_DIR))
    return _tutorial


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
    _tutorial = _import_tutorial_helper()

    def loader():
        raise FileNotFoundError("load_bibtex: file 'bibtex-train.arff' not found (looked for /x)")

    monkeypatch.setenv("PYRO_AR_REQUIRE_DATA", "1")
    with pytest.raises(FileNotFoundError, match=r"Bibtex is required here \(PYRO_AR_REQUIRE_DATA is set.*looked for /x"):
        _tutorial.load_external(loader, "Bibtex", "skipping this part")
    monkeypatch.setenv("PYRO_AR_REQUIRE_DATA", "0")
    assert _tutorial.load_external(loader, "Bibtex", "skipping this part") is None
    assert "Bibtex not found, skipping this part: load_bibtex" in capsys.readouterr().out
    assert _tutorial.load_external(lambda: 42, "Bibtex", "skipping this part") == 42
    monkeypatch.setenv("PYRO_AR_REQUIRE_DATA", "1")  # optional data (GCIDE): a printed fallback even here
    assert _tutorial.load_external(loader, "GCIDE", "using Brown instead", optional=True) is None
    assert "GCIDE not found, using Brown instead: load_bibtex" in capsys.readouterr().out


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_external_data_go_through_load_external(script):
    """Tutorials load data the package does not ship (02: Bibtex, 06: MNIST) only through
    _tutorial.load_external: no private try/except FileNotFoundError fallback that the docs
    build's PYRO_AR_REQUIRE_DATA could not see."""
    text = script.read_text()
    assert "except FileNotFoundError" not in text
    for loader in ("load_bibtex", "load_mnist", "load_gcide_corpus"):
        if f"{loader}(" in text or f"{loader})" in text or f"{loader}," in text:
            assert "_tutorial.load_external(" in text, f"{script.name} calls {loader} without load_external"

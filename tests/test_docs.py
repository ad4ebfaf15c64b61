"""The documentation builds offline in nitpicky mode with warnings as errors.

One Sphinx build (``sphinx -n -W``, module fixture; slow tier: ``pytest -m slow``) serves
every check that needs it: no broken cross-reference, MathJax served from the build's
``_static`` folder, intersphinx links to Python / torch / Pyro / NumPy / scikit-learn from
the committed inventories, and every tutorial executed as a Jupyter notebook (myst-nb,
quick size) with each declared figure shown inline on its page and written as a PNG, and
the progress lines of the long-training tutorials shown on their pages. This build is the
one execution of each tutorial; ``tests/test_tutorials.py`` checks the script form
without running it again. The checks that need no build run in the default tier.
"""

import importlib
import inspect
import os
import re
import subprocess
import sys
import warnings
from html import unescape
from pathlib import Path

import pytest

from tests.helpers import data_required
from tests.test_docstrings import _find_modules
from tests.test_tutorials import PROGRESS_LINES, TUTORIALS, check_figures, declared_figures

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: every public module (found by walking the package, private modules skipped): each must be
#: in the API reference
PUBLIC_MODULES = [m for m in _find_modules() if not any(p.startswith("_") for p in m.split("."))]

#: intersphinx project -> its documentation root (as in docs/conf.py)
DOC_ROOTS = {
    "python": "https://docs.python.org/3/",
    "torch": "https://pytorch.org/docs/stable/",
    "pyro": "https://docs.pyro.ai/en/stable/",
    "numpy": "https://numpy.org/doc/stable/",
    "sklearn": "https://scikit-learn.org/stable/",
}


@pytest.fixture(scope="module")
def built_docs(tmp_path_factory):
    """The HTML build (tutorials executed) and the folder the tutorials wrote their figures to."""
    for module in ("sphinx", "myst_nb", "jupytext", "ipykernel"):
        pytest.importorskip(module)
    tmp = tmp_path_factory.mktemp("docs")
    # the build requires the external data (docs/conf.py); a clone without any data root
    # builds the pages with the tutorials' fallbacks, and says so
    required = data_required()
    if not required:
        warnings.warn("no data root: the docs are built with the tutorials' fallbacks for the "
                      "missing Bibtex / MNIST data (a real build fails without them)")
    env = dict(os.environ, PYRO_AR_FIGURES=str(tmp / "figures"), PYTHONHASHSEED="0",
               PYRO_AR_REQUIRE_DATA="1" if required else "0")
    env.pop("PYRO_AR_DOCS_EXECUTE", None)  # always execute the notebooks here
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-q", "-b", "html",
         str(DOCS), str(tmp / "html")],
        capture_output=True, text=True, timeout=600 * (len(TUTORIALS) + 1), env=env,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-6000:]
    return tmp / "html", tmp / "figures"


@pytest.mark.slow
def test_sphinx_build_is_nitpick_clean(built_docs):
    html, _ = built_docs
    assert (html / "api.html").is_file() and (html / "tutorials.html").is_file()


@pytest.mark.slow
def test_math_is_served_from_static_not_a_cdn(built_docs):
    html, _ = built_docs
    page = (html / "math.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]*mathjax[^"]*)"', page, flags=re.I)
    assert scripts and all(s.startswith("_static/mathjax/") for s in scripts), scripts
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()


@pytest.mark.slow
def test_intersphinx_links_every_project(built_docs):
    """Each project's objects are linked (resolved offline from docs/_inventories/)."""
    html, _ = built_docs
    text = "".join(p.read_text() for p in html.glob("*.html"))
    for project, root in DOC_ROOTS.items():
        assert f'href="{root}' in text, f"no link to the {project} docs"
    assert f'href="{DOC_ROOTS["torch"]}tensors.html#torch.Tensor"' in text


def test_inventories_are_small_and_readable():
    from sphinx.util.inventory import InventoryFile

    files = sorted((DOCS / "_inventories").glob("*.inv"))
    assert {f.stem for f in files} == set(DOC_ROOTS)
    assert sum(f.stat().st_size for f in files) < 200_000
    for f in files:
        with open(f, "rb") as stream:
            inventory = InventoryFile.load(stream, DOC_ROOTS[f.stem], lambda base, uri: base + uri)
        assert len(inventory) > 0, f.name


@pytest.mark.slow
@pytest.mark.parametrize("script", TUTORIALS, ids=[p.stem for p in TUTORIALS])
def test_tutorial_page_shows_its_figures(built_docs, script):
    """The notebook ran in a kernel and every declared figure is shown inline, once."""
    html, _ = built_docs
    page = html / "tutorials" / f"{script.stem}.html"
    assert page.is_file(), f"{script.name} has no page"
    images = re.findall(r'<img[^>]*src="([^"]+\.png)"', page.read_text())
    assert len(images) == len(declared_figures(script)), images
    assert all((page.parent / src).is_file() for src in images), images
    text = page.read_text()
    for warning in ("TqdmWarning", "IProgress not found"):  # ipywidgets missing from the extras
        assert warning not in text, f"{script.name}'s page shows {warning!r}"
    shown = unescape(re.sub(r"<[^>]+>", "", text))  # the cells' printed output, as text
    for pattern in PROGRESS_LINES.get(script.stem, ()):
        assert re.search(pattern, shown), f"{script.name}'s page shows no progress line /{pattern}/"


@pytest.mark.slow
def test_tutorial_notebooks_write_their_figures(built_docs):
    _, figures = built_docs
    declared = tuple(f for script in TUTORIALS for f in declared_figures(script))
    check_figures(figures, declared, "the tutorial notebooks")


def test_every_public_module_is_in_the_api_reference():
    api = (DOCS / "api.rst").read_text()
    for name in PUBLIC_MODULES[1:]:
        assert f".. automodule:: {name}" in api, name


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_every_public_object_has_a_docstring(module):
    mod = importlib.import_module(module)
    assert inspect.getdoc(mod), f"{module} has no module docstring"
    missing = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if not inspect.getdoc(obj):
                missing.append(name)
    assert not missing, f"{module}: public objects without a docstring: {missing}"


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
def test_docs_build_requires_the_external_data_by_default(tmp_path):
    """docs/conf.py makes the tutorials' kernels require Bibtex / MNIST (PYRO_AR_REQUIRE_DATA=1
    unless set), so that a build without them fails instead of publishing placeholders."""
    code = ("import os, runpy; os.environ.pop('PYRO_AR_REQUIRE_DATA', None); "
            f"runpy.run_path({str(DOCS / 'conf.py')!r}); print(os.environ['PYRO_AR_REQUIRE_DATA'])")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "1"


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
def test_docs_build_without_the_data_stops_saying_why_and_how_to_build_without(tmp_path):
    """Issue 39: with Bibtex and MNIST neither on the machine nor downloadable, docs/conf.py's
    check (run when the builder starts, before any tutorial) exits with status 2 and a first
    line on screen saying what the build needs and the command that builds without it, then
    one line per data set naming its files' URLs and where to put them; with
    PYRO_AR_REQUIRE_DATA=0 it lets the build go on."""
    root = DOCS.parent
    code = ("import runpy; from pyro_ar.datasets import _common; _common.REPOSITORY_DATA_DIR = None; "
            f"runpy.run_path({str(DOCS / 'conf.py')!r})['_check_tutorial_data']()")
    env = dict(os.environ, PYRO_AR_DATA=str(tmp_path / "home"), PYRO_AR_OFFLINE="1",
               PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name in ("PYRO_AR_REQUIRE_DATA", "PYRO_AR_DOCS_EXECUTE"):
        env.pop(name, None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 2, proc.stderr[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith(("pyro_ar docs:", "* "))]
    assert lines[0].startswith("pyro_ar docs: stopped: tutorials 02 and 06 need Bibtex and MNIST")
    assert "PYRO_AR_REQUIRE_DATA=0 python -m sphinx -b html docs docs/_build/html" in lines[0]
    bibtex, mnist = lines[1:3]
    assert "raw.githubusercontent.com/tsoumakas/mulan" in bibtex and str(tmp_path / "home" / "bibtex") in bibtex
    assert "train-images-idx3-ubyte.gz" in mnist and str(tmp_path / "home" / "mnist") in mnist
    assert not (tmp_path / "home").exists()  # nothing written
    env["PYRO_AR_REQUIRE_DATA"] = "0"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]

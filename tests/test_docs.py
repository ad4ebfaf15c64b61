"""The documentation builds from the docstrings with Sphinx, warnings treated as errors."""

import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_docstrings import _find_modules

DOCS = Path(__file__).resolve().parent.parent / "docs"

#: every public module (found by walking the package, deprecated shims and private modules
#: skipped): each must be in the API reference
PUBLIC_MODULES = [m for m in _find_modules() if not any(p.startswith("_") for p in m.split("."))]


def test_sphinx_build_has_no_warnings(tmp_path):
    pytest.importorskip("sphinx")
    proc = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(DOCS),
         str(tmp_path / "html")],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert (tmp_path / "html" / "api.html").is_file()


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

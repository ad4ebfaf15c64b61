"""The package as distributed: one version, PEP 561 marker, licence, optional-dependency errors."""

import functools
import os
import re
import subprocess
import sys
from pathlib import Path


import pyro_ar

ROOT = Path(__file__).resolve().parent.parent


def test_version_is_written_in_one_place():
    """pyproject reads pyro_ar.__version__; no other file of the package states it."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'attr = "pyro_ar.__version__"' in pyproject
    assert not re.search(r'^version\s*=\s*"', pyproject, flags=re.M)
    assert re.fullmatch(r"\d+\.\d+\.\d+(\.dev\d+|rc\d+)?", pyro_ar.__version__)
    assert "__version__" in (ROOT / "docs" / "conf.py").read_text()
    assert pyro_ar.__version__ not in (ROOT / "docs" / "conf.py").read_text()


def test_typed_and_licensed():
    assert (ROOT / "pyro_ar" / "py.typed").is_file()
    assert '"pyro_ar" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


#: imports pyro_ar with scikit-learn made unimportable (a None entry in sys.modules makes
#: "import sklearn" raise ImportError, as on a machine without it)
NO_SKLEARN = r"""
import sys
for name in ("sklearn", "sklearn.base", "sklearn.utils", "sklearn.utils.multiclass",
             "sklearn.utils.validation"):
    sys.modules[name] = None
import pyro_ar                                   # must work without scikit-learn
print("PYRO_AR IMPORTED", flush=True)
try:
    from pyro_ar import ARClassifier
except ImportError as e:
    print("IMPORTERROR", e)
else:
    print("IMPORTED")
"""


@functools.lru_cache(maxsize=None)
def _run_without_sklearn():
    """One child interpreter that cannot import scikit-learn (its output read by both tests below)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", NO_SKLEARN], capture_output=True, text=True,
                          env=env, timeout=300)


def test_import_pyro_ar_does_not_need_sklearn():
    assert "PYRO_AR IMPORTED" in _run_without_sklearn().stdout


def test_estimator_without_sklearn_raises_the_install_hint():
    proc = _run_without_sklearn()
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "IMPORTERROR" in proc.stdout and "pip install" in proc.stdout, proc.stdout

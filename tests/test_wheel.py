"""The installed wheel away from the repository: what a user who ``pip install``s pyro_ar gets.

The wheel is built from this checkout and unpacked into a fresh folder (``pip install
--no-deps --target``: the dependencies are this environment's); a child process with that
folder first on its path, started in an empty directory, with an empty data home
(``$PYRO_AR_DATA``) and downloads allowed, runs tutorial 02 as a script (``--quick``) with
``PYRO_AR_REQUIRE_DATA=1``. Its Bibtex comes from :func:`pyro_ar.datasets.fetch_bibtex`,
whose registry entry the child points at an HTTP server on 127.0.0.1 serving this machine's
copy of the Mulan files under their pinned SHA-256: so the test fails if the wheel misses a
module or a data file, if a loader still needs the repository's ``../shared/data``, or if the
fetch path does not deliver what the tutorial reads.
"""

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.datasets.helpers import fetched_data_folder

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

# Run in the child: serve the local Bibtex copy on loopback, point the registry at it, run the
# tutorial as __main__ with --quick.
CHILD = r"""
import http.server, runpy, sys, threading
from pathlib import Path
import pyro_ar
from pyro_ar.datasets import fetch as F

source, tutorial = Path(sys.argv[1]), sys.argv[2]
assert "site" in Path(pyro_ar.__file__).parts, pyro_ar.__file__     # the unpacked wheel, not the checkout

class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=str(source), **k)
    def log_message(self, *a):
        pass

httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
threading.Thread(target=httpd.serve_forever, daemon=True).start()
url = f"http://127.0.0.1:{httpd.server_address[1]}"
real = F.REMOTE_DATASETS["bibtex"]
F.REMOTE_DATASETS["bibtex"] = F.RemoteDataset(
    "bibtex", tuple(F.RemoteFile(f.name, f.size, f.sha256, (f"{url}/{f.name}",)) for f in real.files),
    real.provides, source=real.source)
sys.argv = [tutorial, "--quick"]
runpy.run_path(tutorial, run_name="__main__")
print("WHEEL-TUTORIAL-DONE")
"""


def _build_wheel(out: Path) -> Path:
    """The wheel of a copy of the checkout (no stale ``build/`` of the checkout's can leak in)."""
    src = out / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", "_build",
                                                             "__pycache__", ".pytest_cache"))
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(out), str(src)], check=True, cwd=out, timeout=600)
    wheels = list(out.glob("pyro_ar-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_the_wheel_runs_a_tutorial_on_data_fetched_into_an_empty_data_home(tmp_path):
    bibtex = fetched_data_folder("bibtex", "bibtex-train.arff", "bibtex-test.arff", "bibtex.xml")
    wheel = _build_wheel(tmp_path)
    names = zipfile.ZipFile(wheel).namelist()
    assert not any(n.startswith(("tests/", "benchmarks/", "tutorials/")) for n in names), "the wheel ships the repo"
    site, home, work = tmp_path / "site", tmp_path / "data-home", tmp_path / "work"
    work.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(site), str(wheel)],
                   check=True, timeout=600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYRO_AR_", "PYTHONPATH"))}
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(ROOT / "tutorials")]), PYRO_AR_DATA=str(home), PYRO_AR_REQUIRE_DATA="1", MPLBACKEND="Agg",
               PYRO_AR_FIGURES=str(tmp_path / "figures"))
    tutorial = str(ROOT / "tutorials" / "02_softmax_at_large_k.py")
    proc = subprocess.run([sys.executable, "-c", CHILD, str(bibtex), tutorial], cwd=work, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "WHEEL-TUTORIAL-DONE" in proc.stdout
    fetched = {p.name for p in (home / "bibtex").iterdir()}
    assert {"bibtex-test.arff", "bibtex-train.arff", "bibtex.xml"} <= fetched, fetched

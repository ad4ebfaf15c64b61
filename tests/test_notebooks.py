"""A notebook user's tools work: ``jupyter nbconvert --execute`` runs a notebook that uses the
library's progress bars (``train(progress=True)``, ``ARClassifier(verbose=True)``), and no
cell prints a warning -- in particular not tqdm's "IProgress not found" (ipywidgets missing).

The tools come from the ``notebook`` / ``test`` extras (nbconvert, ipywidgets, ipykernel);
the tutorials themselves run as notebooks in the documentation build (``tests/test_docs.py``).
"""

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

pytestmark = pytest.mark.slow  # starts a Jupyter kernel and fits an estimator in it

ROOT = Path(__file__).resolve().parent.parent

CELLS = [
    "import warnings\nwarnings.simplefilter('always')\nimport numpy as np, torch, pyro, pyro_ar",
    # train's own bar (tqdm.auto: a widget in a kernel)
    "import pyro.distributions as dist\nfrom pyro.infer import SVI, Trace_ELBO\nfrom pyro_ar.infer import train\n"
    "def model(x):\n    loc = pyro.param('loc', torch.tensor(0.0))\n"
    "    with pyro.plate('data', len(x)):\n        pyro.sample('x', dist.Normal(loc, 1.0), obs=x)\n"
    "svi = SVI(model, lambda x: None, pyro.optim.Adam({'lr': 0.1}), Trace_ELBO())\n"
    "history = train(svi, torch.full((10,), 3.0), num_steps=20, progress=True)\nprint('steps', history[-1]['step'])",
    # the estimator's phase bars
    "from pyro_ar import ARClassifier\nrng = np.random.RandomState(0)\nX = rng.randn(60, 3)\ny = X.argmax(1)\n"
    "clf = ARClassifier(min_steps=0, max_epochs=100, verbose=True, random_state=0).fit(X, y)\n"
    "assert clf.n_steps_by_phase_['prior_scale_search'] < 130  # planned 40 + 6 x 15: some fit stopped early\n"
    "print('accuracy', clf.score(X, y))",
]


def test_nbconvert_executes_a_notebook_without_warnings(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    path = tmp_path / "progress.ipynb"
    nbformat.write(nb, path)
    jupyter = Path(sys.executable).with_name("jupyter")  # the command a user types
    command = [str(jupyter)] if jupyter.exists() else [sys.executable, "-m", "jupyter"]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(command + ["nbconvert", "--to", "notebook", "--execute", str(path),
                                     "--output", "executed.ipynb"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    executed = nbformat.read(tmp_path / "executed.ipynb", as_version=4)
    streams = {"stdout": "", "stderr": ""}
    for cell in executed.cells:
        for out in cell.outputs:
            assert out.output_type != "error", out
            if out.output_type == "stream":
                streams[out.name] += out.text
    assert "steps 20" in streams["stdout"] and "accuracy" in streams["stdout"], streams
    for text in ("TqdmWarning", "IProgress not found", "Warning"):
        assert text not in streams["stderr"], streams["stderr"]
    widgets = [o for c in executed.cells for o in c.outputs
               if o.output_type == "display_data" and "application/vnd.jupyter.widget-view+json" in o.data]
    assert len(widgets) >= 3, "the progress bars are not widgets"  # train's + the estimator's phases
    # every bar ends full (the estimator's search bar loses the steps of fits stopped early:
    # its widget's maximum must follow), none is marked failed
    state = executed.metadata["widgets"]["application/vnd.jupyter.widget-state+json"]["state"]
    bars = [m["state"] for m in state.values() if m["model_name"] in ("FloatProgressModel", "IntProgressModel")]
    assert len(bars) >= 3 and all(b["value"] == b["max"] and b.get("bar_style") != "danger" for b in bars), bars

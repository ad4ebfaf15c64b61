"""What every tutorial shares: its size and output folder, and how it shows a figure.

The tutorials run unchanged as scripts (``python tutorials/01_augmented_model.py --quick``)
and as notebooks (jupytext opens the ``# %%`` cells; the notebook's folder is
``tutorials/``, from where ``import _tutorial`` finds this file):

* the size: ``--quick`` on the command line, or ``PYRO_AR_QUICK=1`` in the environment
  (a notebook has no command line); ``parse_known_args`` ignores the arguments a Jupyter
  kernel is started with (``-f kernel.json``);
* the figures: always saved as PNG files in ``--out`` (default ``tutorials/figures/``,
  or ``$PYRO_AR_FIGURES``); inside IPython / Jupyter the saved PNG is also shown inline
  (in a script the non-interactive Agg backend is used unless ``MPLBACKEND`` says otherwise);
* data not shipped with the package (Bibtex, MNIST: :func:`load_external`), fetched into the
  data home by ``pyro_ar.datasets.fetch_*`` on first use: a script run without them (offline,
  or ``PYRO_AR_OFFLINE=1``) says so and carries on with what it can show; with ``PYRO_AR_REQUIRE_DATA=1``
  (the documentation build sets it, and the tests where the data root exists) their absence
  is an error, so that no published page silently shows a placeholder -- except for data
  marked ``optional`` (GCIDE), which a shipped corpus replaces, saying so;
* the numbers a tutorial reports (the README quotes tutorial 05's): :func:`save_results`
  writes them as ``NN_slug.json`` beside the figures, with the command and the machine, so
  that a claim in ``benchmarks/results/`` is read from a run and not transcribed.
"""

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time

import matplotlib

#: environment variable selecting the quick (CI) size, e.g. ``PYRO_AR_QUICK=1``
QUICK_ENV_VAR = "PYRO_AR_QUICK"
#: environment variable naming the folder for the figures
FIGURES_ENV_VAR = "PYRO_AR_FIGURES"
#: environment variable that makes missing external data an error (:func:`load_external`)
REQUIRE_DATA_ENV_VAR = "PYRO_AR_REQUIRE_DATA"
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures")


def in_notebook() -> bool:
    """True inside IPython / Jupyter (an IPython shell is running), without importing IPython."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get is not None and get() is not None


if not in_notebook() and "MPLBACKEND" not in os.environ:
    matplotlib.use("Agg")  # a script writes PNG files; it does not open windows

import matplotlib.pyplot as plt  # noqa: E402


def env_flag(name: str) -> bool:
    """``True`` when the environment variable is set to 1 / true / yes / on."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


def parse_args(description: str, add_arguments=None, argv=None) -> argparse.Namespace:
    """The tutorial's options: ``--quick`` (or ``$PYRO_AR_QUICK``), ``--out``, ``--seed``.

    ``add_arguments(parser)`` adds a tutorial's own options. Unknown arguments (a Jupyter
    kernel's ``-f kernel.json``) are ignored. The output folder is created.
    """
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true",
                        help=f"CI size (also selected by {QUICK_ENV_VAR}=1, e.g. in a notebook)")
    parser.add_argument("--out", default=os.environ.get(FIGURES_ENV_VAR, DEFAULT_OUT),
                        help="folder for the figures")
    parser.add_argument("--seed", type=int, default=0)
    if add_arguments is not None:
        add_arguments(parser)
    args, _ = parser.parse_known_args(argv)
    args.quick = args.quick or env_flag(QUICK_ENV_VAR)
    os.makedirs(args.out, exist_ok=True)
    return args


def load_external(loader, what: str, without: str, optional: bool = False):
    """``loader()``, a data set that is not shipped with the package (it raises
    ``FileNotFoundError`` naming the folder it looked in, ``$PYRO_AR_DATA``; a fetcher's
    ``DownloadError`` is one, naming the file, its URL and where to put it by hand).

    If the data are missing: with ``$PYRO_AR_REQUIRE_DATA`` set (the docs build, the tests
    where the data root exists) re-raise, naming the variable; otherwise print what is
    missing and ``without`` (what the tutorial does instead) and return None. ``optional``:
    data that the CI data root does not hold and that the tutorial can replace by a shipped
    data set doing the same job (GCIDE in tutorial 09, replaced by Brown): never an error,
    the message is always printed.
    """
    try:
        return loader()
    except FileNotFoundError as err:
        if env_flag(REQUIRE_DATA_ENV_VAR) and not optional:
            raise FileNotFoundError(f"{what} is required here ({REQUIRE_DATA_ENV_VAR} is set, as in "
                                    f"the documentation build; {REQUIRE_DATA_ENV_VAR}=0 allows running "
                                    f"without it): {err}") from err
        print(f"{what} not found, {without}: {err}")
        return None


def save(fig, path: str) -> None:
    """Save ``fig`` as a PNG at ``path`` and close it; in a notebook, show that PNG inline.

    The notebook displays the file just written (``IPython.display.Image``) rather than
    letting the inline backend render the figure a second time.
    """
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    print(f"saved {path}")
    plt.close(fig)
    if in_notebook():
        from IPython.display import Image, display

        display(Image(filename=path))


def plot_training_curves(curves, path: str, ylabel: str = "-ELBO estimate") -> None:
    """Plot ``{name: [(step, loss), ...]}`` on a log scale, one line per name, and :func:`save` it."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, curve in curves.items():
        steps, losses = zip(*curve)
        ax.plot(steps, losses, label=name)
    ax.set(xlabel="SVI step", ylabel=ylabel, yscale="log", title="Training")
    ax.legend()
    save(fig, path)


def environment() -> dict:
    """What a run's numbers need to be traced: the command as typed, the git commit of the
    checkout (when there is one), versions, torch's thread count, the machine and its load."""
    import torch
    import pyro

    here = os.path.dirname(os.path.abspath(__file__))
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True,
                                text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        commit = "unknown"
    script = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    root = os.path.dirname(here)
    shown = os.path.relpath(script, root) if script.startswith(root + os.sep) else (sys.argv[0] if sys.argv else "")
    return {"command": shlex.join(["python", shown] + sys.argv[1:]) if not in_notebook() else "notebook",
            "git_commit": commit, "torch": torch.__version__, "pyro": pyro.__version__,
            "python": platform.python_version(), "torch_threads": torch.get_num_threads(),
            "cpus": os.cpu_count(), "load_average_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def save_results(path: str, results: dict, environment_at_start: dict = None) -> None:
    """Write ``results`` (JSON-serialisable numbers) with ``environment`` (:func:`environment`,
    or the one taken at the start of the run, plus the load average at the end: the load it ran
    under) as a JSON file at ``path``."""
    record = {"environment": environment_at_start or environment(), **results}
    if hasattr(os, "getloadavg"):  # the load it ran under: at the start (environment) and now
        record["environment"] = dict(record["environment"], load_average_at_end=list(os.getloadavg()))
    with open(path, "w") as f:
        json.dump(record, f, indent=1)
    print(f"saved {path}")

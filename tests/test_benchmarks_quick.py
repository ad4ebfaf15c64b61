"""Every benchmark runs: its ``--quick`` mode, from the table :data:`QUICK` (slow tier), and the
shape every script shares (fast): it is in the table, builds its command line with
``benchmarks.harness.parser`` (``--quick``, ``--out``, ``--seed``), leaves ``sys.path`` alone and
starts its workers as modules (``python -m benchmarks.NAME``, :func:`benchmarks.harness.module_command`).

A quick run writes its JSON to ``tmp_path`` (``--out``), with the command, commit and machine
(``benchmarks.harness.environment``) in it.
"""

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.datasets.helpers import fetched_data_folder
from tests.helpers import require_data

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "benchmarks"
#: modules of the package that are not benchmarks
NOT_BENCHMARKS = {"__init__", "harness", "report", "peers_data"}
#: script -> (extra arguments of its --quick run, the JSON files it writes)
#: script -> (data folder, files) its --quick run reads from the data root (the others make
#: their data or use what ships with their packages): skipped without the data root, as the
#: other data-backed tests (tests/helpers.py, require_data)
NEEDS_DATA = {name: ("mnist", ["train-images.idx3-ubyte.gz", "train-labels.idx1-ubyte.gz",
                               "t10k-images.idx3-ubyte.gz", "t10k-labels.idx1-ubyte.gz"])
              for name in ("relaxed_vae", "table3")}
for _name in ("dictionary_training", "dictionary_start_ceiling", "cli_wordnet", "exact_reference"):
    NEEDS_DATA[_name] = ("wordnet", ["usr/share/wordnet/data.noun"])
#: data sets a user fetches (pyro_ar.datasets.fetch_*), not in the project's data root: absent, the run skips
FETCHED_ONLY = ("wordnet", "gcide")
QUICK = {
    "accuracy_report": ([], ["accuracy_report_quick.json"]),
    "bayes_digits": (["--skip-nuts"], ["bayes_digits_quick.json"]),
    "bayes_output_layer": ([], ["bayes_output_layer_quick.json"]),
    "bayes_scaling": ([], ["bayes_scaling_quick.json"]),
    "before_after": ([], ["before_after_quick.json"]),
    "brown": (["--methods", "ar_softmax,exact,adaptive,ar_probit"], ["brown_quick.json"]),
    "cli_wordnet": ([], ["cli_wordnet_quick.json"]),
    "default_model": ([], ["default_model_quick.json"]),
    "dictionary_start_ceiling": (["--rank", "20", "--heldout-draws", "1"], ["dictionary_start_ceiling_wordnet_quick.json"]),
    "dictionary_training": ([], ["dictionary_training_wordnet_300_quick.json"]),
    "distributed": ([], ["distributed_quick.json"]),
    "estimator_vs_sklearn": (["--datasets", "digits"], ["estimator_vs_sklearn_quick.json"]),
    "exact_reference": ([], ["exact_reference_quick.json"]),
    "exact_vs_ar_cost": ([], ["exact_vs_ar_cost_quick.json"]),
    "latent_gp": ([], ["latent_gp_quick.json"]),
    "local_family": ([], ["local_family_quick.json"]),
    "local_guide_variance": ([], ["local_guide_variance_quick.json"]),
    "multilabel_objectives": (["--dataset", "synthetic_ml"], ["multilabel_objectives_synthetic_ml_p1_quick.json"]),
    "neural_lm": ([], ["neural_lm_quick.json"]),
    "neural_output_layer": ([], ["neural_output_layer_quick.json"]),
    "plain_loop": ([], ["plain_loop_quick.json"]),
    "probit_convergence": ([], ["probit_convergence_quick.json"]),
    "probit_gradient_noise": ([], ["probit_gradient_noise_quick.json"]),
    "probit_step": ([], ["probit_step_quick.json"]),
    "profile_step": ([], ["profile_step_quick.json"]),
    "relaxed_vae": ([], ["relaxed_vae_quick.json"]),
    "scaling": ([], ["scaling_quick.json"]),
    "session_model": (["--long-swap"], ["session_model_quick.json"]),
    "sparse": ([], ["sparse_scaling_quick.json", "sparse_estimator_quick.json"]),
    "table3": (["--dataset", "mnist", "--methods", "ar_softmax", "ove"], ["table3_mnist_authors_quick.json"]),
    "time_to_quality": (["--methods", "ar_softmax,exact,adaptive"], ["time_to_quality_quick.json"]),
    "test_tiers": ([], ["test_tiers_default_quick.json"]),
    "toy": ([], ["toy_authors_quick.json"]),
    "tutorial_times": (["01"], ["tutorial_times_01_quick.json"]),
}
#: scripts whose --quick run has a test of its own, which checks its output in detail
OWN_TEST = {"gpu": "tests/test_gpu_benchmark.py", "peers": "tests/test_benchmark_peers.py"}


def scripts():
    return sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.stem not in NOT_BENCHMARKS)


def test_every_benchmark_has_a_quick_run_in_the_table():
    assert set(scripts()) == set(QUICK) | set(OWN_TEST)
    assert not set(QUICK) & set(OWN_TEST)
    for name, test in OWN_TEST.items():
        assert f"benchmarks/{name}.py" in (ROOT / test).read_text() or f"benchmarks.{name}" in (ROOT / test).read_text()


@pytest.mark.parametrize("name", scripts())
def test_a_benchmark_uses_the_harness_and_leaves_sys_path_alone(name):
    """One harness: the options come from ``harness.parser``; the script runs as a module of the
    ``benchmarks`` package (``python -m benchmarks.NAME``), so nothing edits ``sys.path`` and a
    worker process is started as a module too, never by the script's file name."""
    source = (BENCHMARKS / f"{name}.py").read_text()
    tree = ast.parse(source)
    calls = {ast.unparse(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "harness.parser" in calls, f"{name}: build the command line with benchmarks.harness.parser"
    assert "sys.path" not in source, f"{name}: edits sys.path (run it as python -m benchmarks.{name})"
    assert "__package__" not in source and "_path" not in {a.name for n in ast.walk(tree)
                                                           if isinstance(n, ast.Import) for a in n.names}
    assert "abspath(__file__)" not in source and not re.search(
        r"sys\.executable,\s*(os\.path\.abspath\()?(__file__|str\(harness\.HERE)", source), \
        f"{name}: starts a worker by file name: use harness.module_command(__spec__.name, ...)"


#: scripts that read a clock themselves instead of through benchmarks.harness (Timer, step_times,
#: paired_times, run_for): gpu (its clock is the device's: wall time with CUDA synchronisation,
#: CPU time without) and profile_step (CPU-time counters wrapped around the parts of a step)
OWN_CLOCK = {"gpu", "profile_step"}


def test_the_clocks_are_read_by_the_harness():
    """At most 3 scripts time themselves; the others time through the harness."""
    readers = {name for name in scripts() if re.search(r"\btime\.(process_time|perf_counter|time|monotonic)\(",
                                                        (BENCHMARKS / f"{name}.py").read_text())}
    assert readers == OWN_CLOCK and len(OWN_CLOCK) <= 3


def test_no_path_helper_is_left():
    assert not (BENCHMARKS / "_path.py").exists()


def _run(cmd, timeout, extra_env=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", **(extra_env or {}))
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=ROOT)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(QUICK))
def test_quick_run(name, tmp_path):
    """``python -m benchmarks.NAME --quick --out tmp_path`` exits 0 and writes its JSON, which
    names the command, the commit and the machine."""
    extra, outputs = QUICK[name]
    if name in NEEDS_DATA:
        data, files = NEEDS_DATA[name]
        env = {"PYRO_AR_DATA": str(fetched_data_folder(data, *files).parent)} if data in FETCHED_ONLY else {}
        if data not in FETCHED_ONLY:
            require_data(data, files)
    else:
        env = {}
    run = _run([sys.executable, "-m", f"benchmarks.{name}", "--quick", "--out", str(tmp_path)] + extra, 900, env)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    for out in outputs:
        record = json.loads((tmp_path / out).read_text())
        env = record["environment"]
        assert f"benchmarks.{name}" in env["command"] and "--quick" in env["command"]
        assert env["git_commit"] and env["machine"]["cpus"] >= 1


#: every script's ``--help``, in one interpreter (the imports are shared): a JSON list of the failures
HELP_ALL = """
import contextlib, io, json, runpy, sys, warnings
warnings.simplefilter("ignore")  # runpy's note that a module ran before as an import of another
bad = []
for name in sys.argv[1:]:
    sys.argv = [name, "--help"]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_module(name, run_name="__main__", alter_sys=True)
        bad.append([name, "no exit"])
    except SystemExit as e:
        if e.code not in (0, None) or "usage:" not in out.getvalue():
            bad.append([name, str(e.code), out.getvalue()[-300:]])
    except Exception as e:
        bad.append([name, repr(e)])
print("HELP " + json.dumps(bad))
"""


@pytest.mark.slow
def test_every_script_answers_help_as_a_module():
    """``python -m benchmarks.NAME --help`` prints the usage and exits 0, for every script
    (``report`` included)."""
    names = [f"benchmarks.{n}" for n in scripts() + ["report"]]
    run = _run([sys.executable, "-c", HELP_ALL, *names], 300)
    lines = [line for line in run.stdout.splitlines() if line.startswith("HELP ")]
    assert run.returncode == 0 and lines, run.stderr[-3000:]
    assert json.loads(lines[-1][5:]) == []

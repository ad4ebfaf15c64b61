"""Cost of the test tiers: README's test command's pytest part, run under resource accounting.

    python -m benchmarks.test_tiers --out DIR                 # the default tier: python -m pytest -q tests
    python -m benchmarks.test_tiers --tier slow --out DIR     # the slow tier:    python -m pytest -q -m slow tests
    python -m benchmarks.test_tiers --quick --out DIR         # one small test file (a check of this script)

README's test command is ``bash scripts/bootstrap.sh && .venv/bin/python -m pytest -q tests``;
after the set-up its cost is that of the pytest part, which this script runs **as written**: in
a child process started from the repository root with this interpreter and this process's
environment unchanged (no thread variable is set here: ``tests/conftest.py`` sets one torch
thread itself, and the claim is about the command a user types). Measured: the CPU time of
the child and of every process it waited for, user + sys (the growth of
``resource.getrusage(RUSAGE_CHILDREN)`` across the run, what ``/usr/bin/time`` reports), the
wall time (``harness.timer``), the 1-minute load average before and after (on a shared
machine wall time is CPU time stretched by the load; CPU time grows with it too, less), the
counts of pytest's summary line (passed, failed, skipped, deselected, xfailed, errors ...),
the ids of the tests that failed, the environment variables that change what runs
(:data:`ENV_SEEN`), and the git commit with a ``clean`` flag (no change to any
tracked file and no untracked file that git does not ignore: the tree measured is the commit).
Writes ``test_tiers_<tier>[_quick].json`` to ``--out`` and pytest's output beside it
(``test_tiers_<tier>[_quick].log``); a claim reads the JSON's ``rows``.
"""

import os
import re
import resource
import shlex
import subprocess
import sys
from pathlib import Path

from benchmarks import harness

#: the tiers as README writes them: the pytest arguments after ``python -m pytest``
TIERS = {"default": ["-q", "tests"], "slow": ["-q", "-m", "slow", "tests"], "all": ["-q", "-m", "", "tests"]}
#: the ``--quick`` run: one small file of the default tier (the mechanics, in seconds)
QUICK_PATHS = ["tests/test_label_sets.py"]
#: environment variables recorded with a run: the thread counts, pytest's extra options, the
#: import path and the data home (README's command sets none of them)
ENV_SEEN = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTEST_ADDOPTS", "PYTHONPATH", "PYRO_AR_DATA")
#: ``3071 passed, 1 failed, 12 skipped, 46 deselected, 4 xfailed in 324.00s (0:05:24)``
SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|errors?|warnings?)\b")


def pytest_command(tier: str, quick: bool) -> list:
    """``python -m pytest ARGS`` of a tier (the quick run keeps its options, on one file)."""
    args = list(TIERS[tier])
    if quick:
        args = args[:-1] + QUICK_PATHS
    return [sys.executable, "-m", "pytest", *args]


def parse_summary(output: str) -> dict:
    """``{"passed": n, "failed": n, ...}`` from pytest's last summary line (``error`` and
    ``warning`` counted under their plural), with ``summary``: that line."""
    lines = [line for line in output.splitlines() if SUMMARY.search(line) and re.search(r" in [\d.]+s", line)]
    if not lines:
        return {"summary": None}
    line = lines[-1].strip("= ")
    counts = {("errors" if k.startswith("error") else "warnings" if k.startswith("warning") else k): int(n)
              for n, k in SUMMARY.findall(line)}
    return dict(counts, summary=line)


def failed_ids(output: str) -> list:
    """The ids of pytest's ``FAILED`` / ``ERROR`` lines (its ``-ra`` short summary)."""
    return [m.group(1) + " " + m.group(2) for m in re.finditer(r"^(FAILED|ERROR) (\S+)", output, re.M)]


def git_state() -> dict:
    """The commit and whether the tree is exactly it (``clean``: no tracked change, no untracked
    file git does not ignore); ``changes``: ``git status --porcelain`` otherwise."""
    changes = harness._git("status", "--porcelain", "--untracked-files=normal").splitlines()
    return {"commit": harness._git("rev-parse", "--short", "HEAD"), "clean": not changes, "changes": changes}


def run_tier(cmd: list, log: Path) -> dict:
    """Run ``cmd`` from the repository root, its output to ``log``; CPU (children, user + sys),
    wall, load averages, exit code and pytest's counts."""
    load_start = os.getloadavg()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(log, "w") as out, harness.timer() as clock:
        code = subprocess.run(cmd, cwd=harness.ROOT, stdout=out, stderr=subprocess.STDOUT).returncode
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    output = log.read_text(errors="replace")
    return {"exit_code": code, "cpu_s": user + system, "user_s": user, "sys_s": system, "wall_s": clock.wall,
            "load_1min_start": load_start[0], "load_1min_end": os.getloadavg()[0],
            **parse_summary(output), "failures": failed_ids(output)}


def main(argv=None):
    p = harness.parser(__doc__, quick_help=f"run the tier's options on {' '.join(QUICK_PATHS)} only")
    p.add_argument("--tier", choices=sorted(TIERS), default="default",
                   help="default: README's test command (python -m pytest -q tests); slow: -m slow; all: -m ''")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    name = f"test_tiers_{args.tier}"
    cmd = pytest_command(args.tier, args.quick)
    state = git_state()
    log = Path(args.out) / harness.result_name(name, args).replace(".json", ".log")
    row = {"tier": args.tier, "command": shlex.join(["python", *cmd[1:]]), **state, **run_tier(cmd, log)}
    # what of the environment changes the command's cost or its tests (all unset: as README writes it)
    env = {k: os.environ.get(k) for k in ENV_SEEN}
    counts = ", ".join(f"{row[k]} {k}" for k in ("passed", "failed", "errors", "skipped", "deselected") if row.get(k))
    print(f"{row['command']}: exit {row['exit_code']}, {counts}; CPU {row['cpu_s']:.1f} s (user {row['user_s']:.1f} "
          f"+ sys {row['sys_s']:.1f}), wall {row['wall_s']:.1f} s; load {row['load_1min_start']:.2f} -> "
          f"{row['load_1min_end']:.2f}; commit {row['commit']}{'' if row['clean'] else ' (tree not clean)'}")
    for failure in row["failures"]:
        print("  " + failure)
    harness.save(args, name, {"log": log.name, "child_environment": env, "rows": [row]})
    return 1 if row["exit_code"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Run time of the tutorials as README writes their commands: ``python tutorials/NN_*.py`` and
``... --quick``, one tutorial per child process.

    python -m benchmarks.tutorial_times 01 03            # default runs of tutorials 01 and 03
    python -m benchmarks.tutorial_times --quick 01 02    # their ``--quick`` runs
    python -m benchmarks.tutorial_times --quick --out DIR 04

Each tutorial runs as ``python tutorials/NN_NAME.py [--quick]`` from the repository root, in
this process's environment with ``OMP_NUM_THREADS=1`` and ``MKL_NUM_THREADS=1`` set (torch's
thread count otherwise follows the cores, and the CPU time with it) and this checkout first on
``PYTHONPATH`` (the ``pyro_ar`` measured is this checkout's, at the recorded commit); its figures go where the
tutorial puts them by default (``tutorials/figures/``, ignored by git). Measured per tutorial:
the child's CPU time, user + sys from ``os.wait4`` (the same rusage ``/usr/bin/time`` reads;
children that it waited for included), its wall time (``harness.Timer``) and the 1-minute
load average just before and just after, since on a shared machine the wall time is the CPU
time stretched by the load. Writes ``tutorial_times[_quick]_NN[_NN...].json`` to ``--out``.
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import harness

TUTORIALS = harness.ROOT / "tutorials"


def tutorial_script(number: str) -> Path:
    """The one ``tutorials/NN_*.py`` for a two-digit ``number``."""
    found = sorted(TUTORIALS.glob(f"{int(number):02d}_*.py"))
    if len(found) != 1:
        raise SystemExit(f"tutorial {number!r}: expected one tutorials/{int(number):02d}_*.py, found {found}")
    return found[0]


def child_env() -> dict:
    """This process's environment with one OpenMP/MKL thread and this checkout first on
    ``PYTHONPATH``, so that the tutorial imports this checkout's ``pyro_ar`` (as it would in a
    clone installed with ``pip install -e .``), not another copy the interpreter has installed."""
    return harness.worker_env(first=str(harness.ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def run_one(script: Path, quick: bool) -> dict:
    """Run ``python tutorials/SCRIPT [--quick]`` in a child; return its command, exit status,
    CPU seconds (user + sys), wall seconds and load averages before and after."""
    argv = ["tutorials/" + script.name] + (["--quick"] if quick else [])
    env = child_env()
    load_start = os.getloadavg()
    with tempfile.TemporaryFile() as err, harness.timer() as clock:
        child = subprocess.Popen([sys.executable, *argv], cwd=harness.ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
        wall = clock.wall
        load_end = os.getloadavg()
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read().decode(errors="replace")[-2000:] if child.returncode else ""
    return {"name": script.stem[:2], "command": "python " + " ".join(argv),
            "exit_code": child.returncode, "cpu_s": usage.ru_utime + usage.ru_stime,
            "user_s": usage.ru_utime, "sys_s": usage.ru_stime, "wall_s": wall,
            "wall_over_cpu": wall / max(usage.ru_utime + usage.ru_stime, 1e-9),
            "load_1min_start": load_start[0], "load_1min_end": load_end[0],
            "load_averages_start": load_start, "load_averages_end": load_end, "stderr_tail": tail}


def main(argv=None):
    p = harness.parser(__doc__, quick_help="run the tutorials with --quick")
    p.add_argument("tutorials", nargs="+", help="two-digit tutorial numbers, e.g. 01 03")
    args = p.parse_args(argv)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rows = []
    for number in args.tutorials:
        row = run_one(tutorial_script(number), args.quick)
        rows.append(row)
        print(f"{row['command']:<45} exit {row['exit_code']}  CPU {row['cpu_s']:7.1f} s  "
              f"wall {row['wall_s']:7.1f} s  load {row['load_1min_start']:.2f} -> {row['load_1min_end']:.2f}",
              flush=True)
        if row["exit_code"]:
            print(row["stderr_tail"], file=sys.stderr)
    env = {k: child_env().get(k) for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYRO_AR_DATA", "PYTHONPATH")}
    harness.save(args, "tutorial_times" + "".join("_" + n for n in args.tutorials),
                 {"child_environment": env, "rows": rows})
    return 1 if any(r["exit_code"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

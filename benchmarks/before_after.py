"""Per-step CPU time of the Pyro-path steps before and after the issue-5 performance work.

Runs ``benchmarks/scaling.py --worker`` (fresh process per point) once with the package as
it was before (a checkout of the given commit, put first on PYTHONPATH) and once with the
working tree, alternating per point so that both see the same machine load.

    python -m benchmarks.before_after --old-commit 54f26cf [--Ks 1e3,1e5,1e6] [--methods ...] [--out DIR]

``--quick``: K = 10^3, A&R softmax, a few steps, against ``--old-commit HEAD`` unless one is
given (a smoke run of the comparison). Writes before_after[_quick].json to ``--out``.
"""

import json
import os
import subprocess
import sys
import tempfile

from benchmarks import harness


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K = 1e3, A&R softmax, a few steps, against HEAD by default")
    p.add_argument("--old-commit", default=None, help="the commit to compare with (default 54f26cf; --quick: HEAD)")
    p.add_argument("--Ks", default="1e3,1e5,1e6")
    p.add_argument("--methods", default="ar_softmax,ar_probit,ove,botev")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--budget", type=float, default=4.0)
    a = p.parse_args(argv)
    a.old_commit = a.old_commit or ("HEAD" if a.quick else "54f26cf")
    if a.quick:
        a.Ks, a.methods, a.steps, a.budget = "1e3", "ar_softmax", 10, 1.0
    harness.start(a)
    old = tempfile.mkdtemp(prefix="pyro_ar_old_")
    archive = subprocess.run(["git", "-C", str(harness.ROOT), "archive", a.old_commit, "pyro_ar"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
    rows = []
    for K in [int(float(k)) for k in a.Ks.split(",")]:
        for m in a.methods.split(","):
            row = dict(K=K, method=m)
            for tag, path in (("before", old), ("after", None)):
                cmd = harness.module_command("benchmarks.scaling", "--worker", m, "--K", K, "--steps", a.steps,
                                             "--warmup", 10, "--budget", a.budget)
                # cwd elsewhere, so that the old checkout (first on the path) is the pyro_ar imported
                out = subprocess.run(cmd, capture_output=True, text=True, env=harness.worker_env(path),
                                     cwd=tempfile.gettempdir())
                res = [json.loads(l[7:]) for l in out.stdout.splitlines() if l.startswith("RESULT ")]
                if not res:
                    row[tag] = None
                    sys.stderr.write(out.stderr[-2000:])
                    continue
                row[tag] = dict(cpu=res[0]["cpu_median"], wall=res[0]["wall_median"])
            rows.append(row)
            b, f = row.get("before"), row.get("after")
            if b and f:
                print(f"K={K:>8d} {m:12s} before {1e3 * b['cpu']:7.2f} ms  after {1e3 * f['cpu']:7.2f} ms "
                      f"(CPU medians; x{b['cpu'] / f['cpu']:.2f})", flush=True)
    harness.save(a, "before_after", dict(old_commit=a.old_commit, rows=rows, loadavg=os.getloadavg()))
    return rows


if __name__ == "__main__":
    main()

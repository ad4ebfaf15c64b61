"""Per-step CPU time of the Pyro-path steps before and after the issue-5 performance work.

Runs ``benchmarks/scaling.py --worker`` (fresh process per point) once with the package as
it was before (a checkout of the given commit, put first on PYTHONPATH) and once with the
working tree, alternating per point so that both see the same machine load.

    python benchmarks/before_after.py --old-commit 54f26cf [--Ks 1e3,1e5,1e6] [--methods ...]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old-commit", default="54f26cf")
    p.add_argument("--Ks", default="1e3,1e5,1e6")
    p.add_argument("--methods", default="ar_softmax,ar_probit,ove,botev")
    p.add_argument("--steps", type=int, default=60)
    p.add_argument("--budget", type=float, default=4.0)
    p.add_argument("--out", default=os.path.join(HERE, "results", "before_after.json"))
    a = p.parse_args(argv)
    old = tempfile.mkdtemp(prefix="pyro_ar_old_")
    archive = subprocess.run(["git", "-C", ROOT, "archive", a.old_commit, "pyro_ar"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", old], input=archive, check=True)
    rows = []
    for K in [int(float(k)) for k in a.Ks.split(",")]:
        for m in a.methods.split(","):
            row = dict(K=K, method=m)
            for tag, path in (("before", old), ("after", None)):
                env = dict(os.environ)
                if path:
                    env["PYTHONPATH"] = path + os.pathsep + env.get("PYTHONPATH", "")
                cmd = [sys.executable, os.path.join(HERE, "scaling.py"), "--worker", m, "--K", str(K),
                       "--steps", str(a.steps), "--warmup", "10", "--budget", str(a.budget)]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd="/tmp")
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
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(dict(old_commit=a.old_commit, rows=rows, loadavg=os.getloadavg()), fh, indent=1)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

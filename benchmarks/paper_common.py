"""Shared helpers of the paper-reproduction benchmarks (``toy.py``, ``table3.py``).

Not a test module: plain functions for running stock ``pyro.infer.SVI`` with the
``pyro_ar`` pieces, timing, and writing tables / JSON / PNG (to ``--out``, or ``benchmarks/out/``
for the runners without one).
Every benchmark runs torch on ONE thread (``torch.set_num_threads(1)``): the machine
is shared, so per-step times are reported as medians.
"""

import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
RESULTS = HERE / "results"


def setup(seed: int = 0, out_dir=None):
    """One torch thread, fixed seeds; creates ``out_dir`` if given (only the folder the run
    writes to: a run with ``--out`` elsewhere leaves ``benchmarks/out`` alone); returns an
    environment record for the JSON."""
    import pyro

    torch.set_num_threads(1)
    pyro.set_rng_seed(seed)
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    return environment()


def environment():
    import numpy
    import pyro

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=HERE, capture_output=True,
                                text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "pyro_ar"], cwd=HERE.parent,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # pragma: no cover - git missing
        commit, dirty = "unknown", ""
    return {
        "command": " ".join([Path(sys.executable).name] + sys.argv),
        "git_commit": commit,
        "pyro_ar_uncommitted_changes": dirty.splitlines(),
        "torch": torch.__version__,
        "pyro": pyro.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def rss_bytes() -> int:
    """Resident set of this process now (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def reset_peak():
    """Reset the peak resident set (``VmHWM``) to the current one (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def peak_bytes() -> int:
    """Peak resident set of this process: ``VmHWM`` (``getrusage``'s ru_maxrss survives the
    fork + exec of a worker, so a worker would report its parent's peak), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def paired_step_times(steps, rounds: int, block: int = 1, warmup: int = 3):
    """CPU seconds per call of each ``steps[name]()`` (e.g. an SVI step), timed in blocks of
    ``block`` calls that alternate between the names ``rounds`` times in this process (so that
    load changes hit them alike), after ``warmup`` untimed calls each.

    :returns: ``{name: [seconds per call in each round]}``.
    """
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    out = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            c = time.process_time()
            for _ in range(block):
                fn()
            out[name].append((time.process_time() - c) / block)
    return out


def cost_ratio_table(steps_by_method, repeats: int, size_name: str = "K"):
    """Per-step CPU time of each method at a small and a large size, stepped alternately
    (:func:`paired_step_times`): ``steps_by_method[method] = {small: step_fn, large: step_fn}``.
    Prints and returns ``{method: {"<size_name>=<size>_ms": median ms, ..., "ratio": large / small}}``."""
    res = {}
    for method, steps in steps_by_method.items():
        (small, large) = sorted(steps)
        med = {k: median(v) for k, v in paired_step_times(steps, repeats).items()}
        res[method] = {f"{size_name}={small}_ms": 1e3 * med[small], f"{size_name}={large}_ms": 1e3 * med[large],
                       "ratio": med[large] / med[small]}
    print(f"{'method':<12} {f'{size_name}={small:.0e} ms':>12} {f'{size_name}={large:.0e} ms':>12} {'ratio':>6}")
    for method, r in res.items():
        print(f"{method:<12} {r[f'{size_name}={small}_ms']:12.2f} {r[f'{size_name}={large}_ms']:12.2f} "
              f"{r['ratio']:6.2f}")
    return res


def write_json(name: str, obj, out_dir=None) -> Path:
    """Write ``obj`` as ``out_dir/name`` (default ``benchmarks/out``; the folder is created);
    tensors become lists and other numbers floats."""
    folder = Path(OUT if out_dir is None else out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with open(path, "w") as f:
        json.dump(obj, f, indent=1, default=_json_default)
    return path


def _json_default(o):
    if isinstance(o, torch.Tensor):
        return o.tolist()
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    if hasattr(o, "__float__"):          # numpy scalars
        return float(o)
    raise TypeError(f"not JSON serialisable: {type(o)}")


def fmt(v, spec=".4f"):
    if v is None:
        return "n/a"
    if isinstance(v, str):
        return v
    if isinstance(v, float) and not math.isfinite(v):
        return "nan"
    return format(v, spec)


def table(rows, columns):
    """Plain-text table: ``columns`` is a list of (header, key, format spec)."""
    cells = [[h for h, _, _ in columns]]
    for r in rows:
        cells.append([fmt(r.get(k), spec) for _, k, spec in columns])
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    lines = []
    for j, c in enumerate(cells):
        lines.append("  ".join(s.rjust(w) if i else s.ljust(w) for i, (s, w) in enumerate(zip(c, widths))))
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_table(rows, columns):
    head = "| " + " | ".join(h for h, _, _ in columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(fmt(r.get(k), spec) for _, k, spec in columns) + " |" for r in rows]
    return "\n".join([head, sep] + body)


def moving_average(xs, window):
    """Trailing moving average (the paper smooths its ELBO traces this way)."""
    out, acc = [], 0.0
    for i, v in enumerate(xs):
        acc += v
        if i >= window:
            acc -= xs[i - window]
        out.append(acc / min(i + 1, window))
    return out


def rho_schedule(power=0.9, rho_min=0.0):
    """Local step of the softmax eta_n: rho = max((1 + visits)^-power, rho_min).

    The default (power 0.9, no floor) is GumbelLocalGuide's and the authors'; a floor
    makes eta_n forget stale utilities (an exponential moving average in the end)."""
    def rho(visits):
        r = (1.0 + visits.to(torch.get_default_dtype())) ** -power
        return r.clamp(min=rho_min) if rho_min > 0 else r
    return rho


def publish(json_path):
    """Copy a run's PNG and a compact JSON (everything but the traces) to ``results/``."""
    import shutil

    json_path = Path(json_path)
    data = json.load(open(json_path))
    data.pop("traces", None)
    RESULTS.mkdir(exist_ok=True)
    with open(RESULTS / json_path.name, "w") as f:
        json.dump(data, f, indent=1)
    png = json_path.with_suffix(".png")
    if png.exists():
        shutil.copy(png, RESULTS / png.name)
    return RESULTS / json_path.name


if __name__ == "__main__":
    # python benchmarks/paper_common.py publish benchmarks/out/<run>.json [...]
    if len(sys.argv) > 2 and sys.argv[1] == "publish":
        for p in sys.argv[2:]:
            print(publish(p))

"""The benchmarks' one harness: argument parsing, timing, memory, results JSON.

Every script in ``benchmarks/`` builds its command line with :func:`parser` (``--quick``,
``--out DIR``, ``--seed``), calls :func:`start` (one torch thread, seeds, the output folder)
and writes its results with :func:`save` (the command, git commit and machine ride along:
:func:`environment`). Scripts run as ``python -m benchmarks.NAME`` from the repository root (the
package is never put on ``sys.path`` by hand); a script's worker processes start the same way
(:func:`module_command`, :func:`worker_env`).

Timing: CPU seconds (``time.process_time``) on one thread, medians over repeats; the clocks
are read here only (:class:`Timer` for a block, :func:`step_times` for the calls of one step,
:func:`paired_times` / :func:`paired_step_times` for steps timed alternately, :func:`median`);
memory: the resident set (:func:`rss_bytes`, :func:`peak_bytes`). Outputs go to ``--out`` (default: a folder under the system's temporary
directory, never the repository).
"""

import argparse
import json
import math
import os
import platform
import statistics
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import torch

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = Path(tempfile.gettempdir()) / "pyro_ar_benchmarks"


# ------------------------------------------------------------------------------ command line
def parser(doc, quick_help="a short run (seconds to a minute on one CPU)", out_help=None, seed=0):
    """An ``ArgumentParser`` with the options every benchmark shares: ``--quick``, ``--out DIR``
    (the folder of the results JSON; default :data:`DEFAULT_OUT`) and ``--seed`` (default
    ``seed``). ``doc`` is the script's docstring (its first line is the description)."""
    p = argparse.ArgumentParser(description=(doc or "").strip().split("\n")[0])
    p.add_argument("--quick", action="store_true", help=quick_help)
    p.add_argument("--out", default=str(DEFAULT_OUT),
                   help=out_help or f"folder of the results JSON (default {DEFAULT_OUT})")
    p.add_argument("--seed", type=int, default=seed, help=f"random seed (default {seed})")
    return p


def start(args=None, seed=None):
    """One torch thread and fixed seeds (``args.seed``, or ``seed``); creates ``args.out``.
    Returns the run's :func:`environment`."""
    import pyro

    torch.set_num_threads(1)
    seed = getattr(args, "seed", 0) if seed is None else seed
    pyro.set_rng_seed(seed)
    out = getattr(args, "out", None)
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
    return environment()


def setup(seed: int = 0, out_dir=None):
    """:func:`start` with a seed and a folder given directly."""
    from types import SimpleNamespace

    return start(SimpleNamespace(seed=seed, out=out_dir))


def result_name(name, args):
    """``name.json``, or ``name_quick.json`` for a ``--quick`` run."""
    return f"{name}{'_quick' if getattr(args, 'quick', False) else ''}.json"


def save(args, name, obj):
    """Write ``obj`` (a dict) with ``environment`` (command, commit, machine) and ``args`` added,
    as ``args.out / result_name(name, args)``; print and return the path."""
    record = {"environment": environment(), "args": {k: v for k, v in vars(args).items() if not callable(v)}}
    record.update(obj)
    path = write_json(result_name(name, args), record, args.out)
    print(f"wrote {path}")
    return path


def module_command(module: str, *args) -> list:
    """``python -m MODULE ARGS...`` as an argument list, for a worker process (``module`` is a
    dotted name: a script passes ``__spec__.name``, e.g. ``benchmarks.scaling``)."""
    return [sys.executable, "-m", module, *map(str, args)]


def worker_env(first: Optional[str] = None, env=None, **extra) -> dict:
    """The environment of a worker process: ``env`` (default ``os.environ``) with ``extra`` set
    and the repository root on ``PYTHONPATH``, so that ``benchmarks`` imports from any working
    directory; ``first`` (e.g. an old checkout of ``pyro_ar``) goes before everything, the root
    last, so that the ``pyro_ar`` found is ``first``'s, else that of ``PYTHONPATH`` or the
    installed package."""
    env = dict(os.environ if env is None else env, **extra)
    parts = [first] + env.get("PYTHONPATH", "").split(os.pathsep) + [str(ROOT)]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in parts if p))
    return env


# ------------------------------------------------------------------------------ environment
def _git(*cmd):
    return subprocess.run(["git", *cmd], cwd=ROOT, capture_output=True, text=True, timeout=10).stdout.strip()


def machine():
    """The machine in words: CPU model, cores, memory, OS, and the GPU where torch sees one."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        cpu = names[0] if names else cpu
    except OSError:
        pass
    info = {"cpu": cpu, "cpus": os.cpu_count(), "os": platform.platform()}
    try:
        info["memory_gib"] = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (ValueError, OSError, AttributeError):
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def command():
    """The command line of this run as it was typed, relative to the repository:
    ``python -m benchmarks.NAME ...``, each argument quoted where the shell needs it (a JSON
    option, a space), so the line can be pasted."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        head = ["-m", spec.name]
    else:
        script = Path(sys.argv[0]).resolve()
        head = [str(script.relative_to(ROOT)) if script.is_relative_to(ROOT) else sys.argv[0]]
    return shlex.join(["python"] + head + sys.argv[1:])


def environment():
    """What a result needs to be traced: the command, the git commit (and uncommitted changes
    of ``pyro_ar/``), the package versions, the machine and its load."""
    import numpy
    import pyro

    try:
        commit, dirty = _git("rev-parse", "--short", "HEAD"), _git("status", "--porcelain", "--", "pyro_ar")
    except Exception:  # pragma: no cover - git missing
        commit, dirty = "unknown", ""
    return {
        "command": command(),
        "git_commit": commit,
        "pyro_ar_uncommitted_changes": dirty.splitlines(),
        "torch": torch.__version__,
        "pyro": pyro.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "torch_threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "machine": machine(),
        "load_average_at_start": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


# ------------------------------------------------------------------------------ memory and time
def rss_bytes() -> int:
    """Resident set of this process now (``/proc/self/statm``; elsewhere the peak so far)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return peak_bytes()


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

    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r if sys.platform == "darwin" else r * 1024


def tensor_bytes(obj) -> int:
    """Bytes of the tensors in ``obj`` (a tensor, or dicts / lists / tuples of them)."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(tensor_bytes(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(tensor_bytes(v) for v in obj)
    return 0


def optimizer_state_bytes(optim) -> int:
    """Bytes of the state (moments, step counts) of a ``PyroOptim``'s per-parameter optimizers."""
    return sum(tensor_bytes(list(state.values())) for opt in getattr(optim, "optim_objs", {}).values()
               for state in opt.state.values())


def median(xs):
    """The median of ``xs``; nan for none."""
    return statistics.median(xs) if len(xs) else float("nan")


def parse_lrs(text, methods):
    """``{method: step size}`` from ``"a=0.01,b=0.003"`` (a ``--lrs`` option); each method must be
    one of ``methods``."""
    out = {}
    for item in (text or "").split(","):
        if item.strip():
            m, _, v = item.partition("=")
            if m.strip() not in methods or not v:
                raise SystemExit(f"--lrs: expected method=step size with a method of {list(methods)}, got {item!r}")
            out[m.strip()] = float(v)
    return out


def time_to_reach(history, target, key="time", value="test_ll"):
    """First ``history[i][key]`` (a CPU time) at which ``history[i][value] >= target``, linearly
    interpolated from the point before; None if never reached. Points without a value
    (``None``, or missing) are skipped."""
    prev = None
    for h in history:
        if h.get(value) is None:
            continue
        if h[value] >= target:
            if prev is None:
                return h[key]
            t0, l0, t1, l1 = prev[key], prev[value], h[key], h[value]
            return t0 + (target - l0) * (t1 - t0) / (l1 - l0) if l1 > l0 else t1
        prev = h
    return None


class Timer:
    """CPU seconds (``time.process_time``) and wall seconds (``time.perf_counter``) of the blocks
    run under it, summed: ``with timer() as t: ...`` then ``t.cpu``, ``t.wall``; entering it again
    adds the next block (e.g. the training part of a loop that also evaluates). While a block
    runs, ``t.cpu`` / ``t.wall`` include it so far. The one place the benchmarks read a clock."""

    def __init__(self):
        self._cpu = self._wall = 0.0
        self._start = None

    def __enter__(self):
        self._start = (time.process_time(), time.perf_counter())
        return self

    def start(self) -> "Timer":
        """Start a block without a ``with`` (e.g. a whole run: ``total = timer().start()``);
        ``cpu`` / ``wall`` then read the time so far."""
        return self.__enter__()

    def __exit__(self, *exc):
        c0, w0 = self._start
        self._cpu += time.process_time() - c0
        self._wall += time.perf_counter() - w0
        self._start = None

    @property
    def cpu(self) -> float:
        return self._cpu + (time.process_time() - self._start[0] if self._start else 0.0)

    @property
    def wall(self) -> float:
        return self._wall + (time.perf_counter() - self._start[1] if self._start else 0.0)


def timer() -> Timer:
    """A new :class:`Timer` (``with harness.timer() as t: ...``)."""
    return Timer()


def step_times(step, num_steps: int, warmup: int = 0, budget: Optional[float] = None, min_steps: int = 3,
               sync=None):
    """Seconds of each call of ``step()`` (e.g. an SVI step) on both clocks, after ``warmup``
    untimed calls: ``num_steps`` calls, or fewer once ``budget`` wall seconds have passed (at
    least ``min_steps``). ``sync`` (e.g. ``torch.cuda.synchronize``) runs after the warm-up and
    after each call, inside its time.

    :returns: ``{"cpu": [seconds per call], "wall": [seconds per call]}``.
    """
    for _ in range(warmup):
        step()
    if sync is not None:
        sync()
    out, total = {"cpu": [], "wall": []}, timer()
    with total:
        while len(out["cpu"]) < num_steps and (budget is None or len(out["cpu"]) < min_steps
                                                or total.wall < budget):
            with timer() as t:
                step()
                if sync is not None:
                    sync()
            out["cpu"].append(t.cpu)
            out["wall"].append(t.wall)
    return out


def run_for(step, cpu_seconds: float):
    """Call ``step()`` until ``cpu_seconds`` of CPU time have passed (at least once; a time
    slice of a method trained alternately with others). Returns ``(calls, CPU seconds)``."""
    calls = 0
    with timer() as t:
        while calls == 0 or t.cpu < cpu_seconds:
            step()
            calls += 1
    return calls, t.cpu


def paired_times(steps, rounds: int, block: int = 1, warmup: int = 3, sync=None, per_call: bool = False):
    """Seconds of the calls of each ``steps[name]()`` on both clocks, timed in blocks of
    ``block`` calls that alternate between the names ``rounds`` times in this process (so that
    load changes hit them alike), after ``warmup`` untimed calls each; ``sync`` runs after each
    call, inside its time.

    :returns: ``{name: {"cpu": [...], "wall": [...]}}``: per block, the mean seconds of a call
        (``rounds`` values), or with ``per_call`` every call's seconds (``rounds * block``).
    """
    for fn in steps.values():
        for _ in range(warmup):
            fn()
    def call(fn):
        fn()
        if sync is not None:
            sync()

    out = {name: {"cpu": [], "wall": []} for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            if per_call:
                for _ in range(block):
                    with timer() as t:
                        call(fn)
                    out[name]["cpu"].append(t.cpu)
                    out[name]["wall"].append(t.wall)
            else:
                with timer() as t:
                    for _ in range(block):
                        call(fn)
                out[name]["cpu"].append(t.cpu / block)
                out[name]["wall"].append(t.wall / block)
    return out


def paired_step_times(steps, rounds: int, block: int = 1, warmup: int = 3):
    """CPU seconds per call of each ``steps[name]()`` (e.g. an SVI step), per block of
    :func:`paired_times`.

    :returns: ``{name: [seconds per call in each round]}``.
    """
    return {name: v["cpu"] for name, v in paired_times(steps, rounds, block, warmup).items()}


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
    """Write ``obj`` as ``out_dir/name`` (default :data:`DEFAULT_OUT`; the folder is created);
    tensors become lists and other numbers floats."""
    folder = Path(DEFAULT_OUT if out_dir is None else out_dir)
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


# ------------------------------------------------------------------------------ training pieces
def make_optim(args, local=None):
    """The optimizer of the paper benchmarks (``toy``, ``table3``): ``args.optim == "authors"``
    is the authors' ADVI step-size schedule (lr ``args.lr``, x0.9 every 2,000 steps), else
    LazyAdam. Parameters for which ``local(name)`` is true (per-datapoint variational
    parameters) get ``args.local_lr`` instead."""
    from pyro_ar.optim import advi_step_size, lazy_adam

    def opts(name):
        lr = args.local_lr if local is not None and local(name) else args.lr
        if args.optim == "authors":
            return {"lr": lr, "alpha": 0.1, "decay": 0.9, "decay_every": 2000}
        return {"lr": lr}
    return advi_step_size(opts) if args.optim == "authors" else lazy_adam(opts)


class SVIMethod:
    """A method that ``pyro_ar.infer.train`` steps: stock ``SVI`` on fixed training data
    ``(x, y)``, its parameters created at construction (so step 0 can be evaluated)."""

    def __init__(self, model, guide, optim, elbo, x, y):
        import pyro
        from pyro.infer import SVI

        self.model, self.x, self.y = model, x, y
        self.svi = SVI(model, guide, optim, elbo)
        check = getattr(model, "check_data", None)
        if check is not None:  # the whole data once, as pyro_ar.infer.train does (steps then skip it)
            check(x, y)
        pyro.poutine.block(model)(x[:2], y[:2])

    def step(self):
        return self.svi.step(self.x, self.y)


def watched_train(svi, *args, monitor: str, drift_margin: float = 0.1, drift_patience: int = 2,
                  floor: Optional[float] = None, **train_kwargs):
    """:func:`pyro_ar.infer.train` with both of its checks on, for long runs (issue 27): the
    loss check (``divergence=True``, :class:`~pyro_ar.infer.DivergenceCheck`) and a
    :class:`~pyro_ar.infer.DriftCheck` on the evaluated metric ``monitor`` (higher is better,
    e.g. a held-out log-likelihood): the run is flagged once it is below its best by more than
    ``drift_margin`` at ``drift_patience`` consecutive evaluations, and stops there. ``floor``
    (e.g. the uniform distribution's log-likelihood, :math:`-\\log K`): an evaluation below it
    is flagged as well.

    Returns ``(history, flags)``: the records up to the end or the stop, and ``flags`` with
    ``diverged`` (a :class:`~pyro_ar.infer.TrainingDiverged` was raised: the loss check),
    ``drifted`` (the step the drift check flagged, or None), ``below_floor`` (the steps whose
    ``monitor`` fell below ``floor``), ``best`` / ``best_step`` of ``monitor`` and ``message``
    (the check's words, or None). ``train_kwargs`` go to ``train`` (``divergence`` and
    ``callbacks`` are set here)."""
    from pyro_ar.infer import DriftCheck, TrainingDiverged, train

    drift = DriftCheck(monitor, mode="max", margin=drift_margin, patience=drift_patience, action="stop")
    history, message, diverged = [], None, False
    try:
        history = train(svi, *args, divergence=True, callbacks=[history.append, drift], **train_kwargs)
    except TrainingDiverged as e:  # the records made before it are in `history` (appended above)
        message, diverged = str(e), True
    if drift.drifted is not None:
        message = (f"{monitor} below its best {drift.best:.4g} (step {drift.best_step}) by more than "
                   f"{drift_margin:g} at {drift_patience} consecutive evaluations, up to step {drift.drifted}")
    evals = [(h["step"], h[monitor]) for h in history if monitor in h]
    below = [s for s, v in evals if floor is not None and not v >= floor]
    flags = {"diverged": diverged, "drifted": drift.drifted, "below_floor": below, "floor": floor,
             "best": drift.best, "best_step": drift.best_step, "drift_margin": drift_margin,
             "drift_patience": drift_patience, "message": message}
    return history, flags

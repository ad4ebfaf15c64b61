"""What the bad-input batteries share: the case registry, the outcome of one case, the counts.

Every case is a call and what it must do:

* a bad input must raise a *named* error -- ``ValueError``, ``TypeError``, ``OSError``
  (``FileNotFoundError`` among them) or :class:`~pyro_ar.infer.TrainingDiverged` whose
  message contains one of the names given with the case (the argument, or the file);
* a good input (the controls) must return finite numbers.

Each outcome is counted as ``named`` (a bad input refused by name), ``ok`` (a good input
with finite output), ``obscure`` (any other exception, or a named type naming none of the
names), ``silent`` (a bad input accepted), ``nan`` (a non-finite output from finite inputs)
or, with ``isolate=True`` (each case in a forked child), ``crash`` (the child died of a
signal: SIGSEGV, SIGABRT, ...).
"""

import collections
import json
import math
import os
import pickle
import signal
import warnings

import numpy as np
import torch

from pyro_ar.infer import TrainingDiverged

NAMED = (ValueError, TypeError, OSError, TrainingDiverged)


class Registry:
    """The cases of one battery, in registration order: ``(area, description, fn, names, bad)``."""

    def __init__(self):
        self.cases = []

    def case(self, area, description, names, bad=True):
        """Register ``fn`` as a case (decorator)."""
        def register(fn):
            self.cases.append((area, description, fn, tuple(names), bad))
            return fn
        return register

    def add(self, area, description, fn, names, bad=True):
        self.cases.append((area, description, fn, tuple(names), bad))


def finite(value) -> bool:
    """Whether every number in ``value`` (tensor, array, number, dict/list/tuple of them) is finite."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            value = value.coalesce().values() if value.layout == torch.sparse_coo else value.values()
        return not value.is_floating_point() or bool(torch.isfinite(value).all())
    if isinstance(value, np.ndarray):
        return value.dtype.kind not in "fc" or bool(np.isfinite(value).all())
    if isinstance(value, (float, int)):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return all(finite(v) for v in value)
    return True


def run_case(fn, names, bad):
    """``(outcome, detail)`` of one case, run in this process."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            value = fn()
    except NAMED as e:
        msg = str(e)
        if not bad:
            return "obscure", f"{type(e).__name__} on a good input: {msg[:200]}"
        if any(n in msg for n in names):
            return "named", ""
        return "obscure", f"{type(e).__name__} naming none of {list(names)}: {msg[:200]}"
    except Exception as e:  # noqa: BLE001
        return "obscure", f"{type(e).__name__}: {str(e)[:200]}"
    if not finite(value):
        return "nan", "a non-finite output"
    return ("silent", "accepted") if bad else ("ok", "")


def run_isolated(fn, names, bad, timeout=300):
    """:func:`run_case` in a forked child: ``("crash", ...)`` when the child dies of a signal
    (the process a user's script would lose), else the child's outcome."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, leave without cleanup
        os.close(read)
        try:
            out = pickle.dumps(run_case(fn, names, bad))
        except BaseException as e:  # noqa: BLE001
            out = pickle.dumps(("obscure", f"{type(e).__name__}: {e}"[:200]))
        os.write(write, out)
        os._exit(0)
    os.close(write)
    chunks = []
    while True:
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return "crash", f"the process died of {signal.Signals(os.WTERMSIG(status)).name}"
    if not chunks:
        return "crash", f"the process exited with status {os.WEXITSTATUS(status)} without an outcome"
    return pickle.loads(b"".join(chunks))


def run_all(registry, isolate=False, quiet=False, json_path=None, title=""):
    """Run every case of ``registry``, print the counts (and the cases that are not
    ``named``/``ok`` unless ``quiet``); returns the exit status (0: none obscure, crashed,
    silent or NaN)."""
    counts, per_area, rows = collections.Counter(), collections.defaultdict(collections.Counter), []
    for area, description, fn, names, bad in registry.cases:
        outcome, detail = (run_isolated if isolate else run_case)(fn, names, bad)
        counts[outcome] += 1
        per_area[area][outcome] += 1
        rows.append({"area": area, "case": description, "bad": bad, "outcome": outcome, "detail": detail})
    n_bad = sum(r["bad"] for r in rows)
    print(f"{title}{len(rows)} inputs ({n_bad} bad, {len(rows) - n_bad} good controls): {counts['named']} named errors, "
          f"{counts['obscure']} obscure errors, {counts['crash']} crashes, {counts['silent']} silently accepted, "
          f"{counts['nan']} NaN, {counts['ok']} good inputs with finite outputs")
    for area, c in per_area.items():
        print(f"  {area:<13} " + ", ".join(f"{k} {v}" for k, v in sorted(c.items())))
    if not quiet:
        for r in rows:
            if r["outcome"] not in ("named", "ok"):
                print(f"  [{r['outcome']}] {r['area']}: {r['case']}: {r['detail']}")
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"counts": dict(counts), "cases": rows}, f, indent=1)
    return 0 if counts["obscure"] + counts["silent"] + counts["nan"] + counts["crash"] == 0 else 1

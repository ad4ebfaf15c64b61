"""A generated battery of bad (and good) inputs over the public entry points added or changed
since 0.1 (issue 38): weight patterns, screened negatives, the local fits and their Gauss
rules, the conditional local guide, the dictionary loaders and the loaders changed with
them, the estimator's sparse path and labels, draws, the training loop's divergence, saves.

Each surface is a call with argument *slots*, each slot some good values and some bad ones
(each bad value must be refused naming its argument, or a file); the generator takes every
bad value of every slot in ``--contexts`` contexts of good values for the other slots, drawn
with a seeded ``numpy.random.RandomState`` (``--seed``), plus all-good controls. Every case
runs in a forked child, so a crash of the process is counted, not suffered (outcomes:
``scripts/_battery.py``).

    OMP_NUM_THREADS=1 python scripts/surface_battery.py [--seed 0] [--contexts 2] [--json PATH] [--quiet]
"""

import argparse
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from scripts._battery import Registry, run_all  # noqa: E402
from scripts._surfaces import SURFACES  # noqa: E402


def _short(v) -> str:
    if isinstance(v, torch.Tensor):
        return f"tensor{tuple(v.shape)}:{str(v.dtype).replace('torch.', '')}" + (
            "" if v.layout == torch.strided else f":{str(v.layout).replace('torch.', '')}")
    if isinstance(v, np.ndarray):
        return f"ndarray{v.shape}"
    r = repr(v)
    return r if len(r) <= 30 else r[:27] + "..."


def generate(rng: np.random.RandomState, contexts: int) -> Registry:
    """The battery: for each surface ``(area, name, call, slots, extra names, controls)`` every
    bad value of every slot in ``contexts`` random contexts, and ``controls`` good calls."""
    reg, seen = Registry(), set()
    for area, name, call, slots, extra, controls in SURFACES:
        def draw_good():
            return {a: goods[rng.randint(len(goods))] for a, (goods, _) in slots.items()}
        for arg, (_, bads) in slots.items():
            for label, value in bads:
                for _ in range(contexts):
                    kwargs = draw_good()
                    kwargs[arg] = value
                    desc = f"{name}({', '.join(f'{a}={label if a == arg else _short(v)}' for a, v in kwargs.items())})"
                    if desc in seen:
                        continue
                    seen.add(desc)
                    reg.add(area, desc, lambda call=call, kwargs=kwargs: call(**kwargs), (arg,) + tuple(extra))
        for _ in range(controls):
            kwargs = draw_good()
            desc = f"{name}({', '.join(f'{a}={_short(v)}' for a, v in kwargs.items())}) [good]"
            if desc not in seen:
                seen.add(desc)
                reg.add(area, desc, lambda call=call, kwargs=kwargs: call(**kwargs), (), bad=False)
    return reg


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seed", type=int, default=0, help="seed of the generator (the contexts drawn)")
    p.add_argument("--contexts", type=int, default=2, help="contexts of good values per bad value")
    p.add_argument("--json", default=None, help="write the per-case outcomes here")
    p.add_argument("--quiet", action="store_true", help="print the counts only")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    reg = generate(np.random.RandomState(a.seed), a.contexts)
    return run_all(reg, isolate=True, quiet=a.quiet, json_path=a.json,
                   title=f"surface battery (seed {a.seed}, {a.contexts} contexts): ")


if __name__ == "__main__":
    sys.exit(main())

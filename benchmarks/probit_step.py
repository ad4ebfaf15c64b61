"""Where the CPU time of one Brown A&R step goes: probit against softmax, side by side.

The setting of ``benchmarks/brown.py`` (its ``PyroBigram``: K = 25,275 words, D = 64, B = 512,
256 importance-drawn shared negatives; probit with the default ``ConditionalLocalGuide`` on
its own 32 classes, ``--local-negatives``, plus the minibatch's labels). Each method trains
``--train-steps`` steps first (the local fits get harder as the utilities spread), then the
methods run in interleaved rounds of 10 steps (load changes hit all alike) for ``--steps``
steps each. Reported per method: CPU milliseconds per step (``time.process_time``, one thread)
and the inclusive time per step of the parts of the step (nested: a line includes the lines
indented under it; a part that a method does not call is left out).

    python -m benchmarks.probit_step [--methods ar_softmax,ar_probit] [--steps 200] [--train-steps 300] [--quick] [--out DIR]

``--quick``: 20 steps after 5. Writes probit_step[_quick].json to ``--out``. Run it against an
older checkout with ``PYTHONPATH=OLD python -m benchmarks.probit_step`` (parts that the old
code lacks are left out).
"""

import collections
import functools

from benchmarks import harness

#: (module, owner attribute path, label): the parts timed, in the order printed
PARTS = [
    ("pyro.infer.svi", "SVI.step", "SVI.step (everything)"),
    ("pyro_ar.infer.local_guides", "_LocalGuide.forward", "  guide (q for the minibatch)"),
    ("pyro_ar.infer.local_fit", "gaussian_local", "    local fit (gaussian_local)"),
    ("pyro_ar.infer.local_fit", "_location_scale_local", "    local fit (gumbel_local or gaussian_local)"),
    ("pyro_ar.infer.local_fit", "laplace_local", "      Laplace start (laplace_local)"),
    ("pyro_ar.infer.local_fit", "_mode_search", "      Laplace start (its mode search)"),
    ("pyro_ar.infer.local_fit", "_gaussian_step", "      Gaussian Newton steps"),
    ("pyro_ar.infer.local_fit", "_location_scale_step", "      Newton steps on the local bound"),
    ("pyro_ar.noise", "NormalNoise.log_cdf_derivatives", "        (log Phi)', (log Phi)'' (all local-fit calls)"),
    ("pyro_ar.noise", "NormalNoise.weighted_log_cdf_derivatives",
     "        their weighted class sums (all local-fit calls)"),
    ("pyro_ar.infer.local_guides", "GumbelLocalGuide._natural_step", "    natural eta step"),
    ("pyro_ar.distributions.class_sum", "ClassSumLikelihood.gather_utilities", "  class gathers (model's S, guide's T)"),
    ("pyro_ar.distributions.augmented", "AugmentedCategorical.log_prob", "  model factor (log_prob)"),
    ("pyro_ar.noise", "NormalNoise.log_cdf", "    log Phi"),
    ("torch", "Tensor.backward", "  backward"),
    ("pyro_ar.optim", "_LazyPyroOptim.__call__", "  optimizer (lazy Adam)"),
]


def _wrap(acc, cnt):
    """Wrap each part's function with a CPU-time counter (the parts the code lacks are skipped)."""
    import importlib

    for module, path, label in PARTS:
        owner = importlib.import_module(module)
        *head, name = path.split(".")
        for attr in head:
            owner = getattr(owner, attr, None)
        f = getattr(owner, name, None) if owner is not None else None
        if f is None:
            continue

        def timed(*args, _f=f, _label=label, **kwargs):
            c = harness.timer().start()
            try:
                return _f(*args, **kwargs)
            finally:
                acc[_label] += c.cpu
                cnt[_label] += 1

        setattr(owner, name, functools.wraps(f)(timed))


def main(argv=None):
    p = harness.parser(__doc__, quick_help="20 steps after 5")
    p.add_argument("--methods", default="ar_softmax,ar_probit")
    p.add_argument("--steps", type=int, default=200, help="timed steps per method")
    p.add_argument("--train-steps", type=int, default=300, help="steps per method before the timing")
    p.add_argument("--negatives", type=int, default=256)
    p.add_argument("--local-negatives", type=int, default=32)
    p.add_argument("--refine-steps", type=int, default=0,
                   help="probit: ConditionalLocalGuide(refine_steps=) (0: the guide's default)")
    a = p.parse_args(argv)
    if a.quick:
        a.steps, a.train_steps = 20, 5
    harness.start(a)

    import torch

    from benchmarks.brown import PyroBigram
    from pyro_ar.datasets import load_brown
    from pyro_ar.models import unigram_log_probs

    d = load_brown(num_valid_docs=25)
    counts = d.info["class_counts"]
    K, methods = d.num_classes, a.methods.split(",")
    init_bias = unigram_log_probs(counts).float()
    steppers = {m: PyroBigram(m, K, 64, d.x_train, d.y_train, 512, 3e-3, init_bias, counts, a.negatives,
                              "importance", torch.device("cpu"), local_negatives=a.local_negatives,
                              refine_steps=a.refine_steps)
                for m in methods}  # (PyroBigram clears the param store: one model per prefix)
    for m in methods:
        for _ in range(a.train_steps):
            steppers[m].step()
    acc, cnt = collections.Counter(), collections.Counter()
    _wrap(acc, cnt)
    per = {m: dict(cpu=0.0, parts=collections.Counter(), calls=collections.Counter()) for m in methods}
    for _ in range(max(1, a.steps // 10)):
        for m in methods:
            acc.clear()
            cnt.clear()
            c0 = harness.timer().start()
            for _ in range(10):
                steppers[m].step()
            per[m]["cpu"] += c0.cpu
            per[m]["parts"].update(acc)
            per[m]["calls"].update(cnt)
    n = max(1, a.steps // 10) * 10
    summary = {}
    for m in methods:
        ms = 1e3 * per[m]["cpu"] / n
        rows = [dict(part=label.strip(), ms=1e3 * per[m]["parts"][label] / n, calls=per[m]["calls"][label] / n)
                for _, _, label in PARTS if per[m]["calls"][label]]
        summary[m] = dict(ms_per_step=ms, parts=rows)
        print(f"\n{m}: {ms:.2f} ms CPU per step (mean of {n}, after {a.train_steps} training steps)")
        for (_, _, label), r in zip([t for t in PARTS if per[m]["calls"][t[2]]], rows):
            print(f"{r['ms']:8.2f} ms  {r['calls']:5.1f}x  {label}")
    if len(methods) > 1:
        base = summary[methods[0]]["ms_per_step"]
        for m in methods[1:]:
            summary[m]["ratio_to_" + methods[0]] = summary[m]["ms_per_step"] / base
            print(f"{m} / {methods[0]}: {summary[m]['ms_per_step'] / base:.2f}")
    import pyro_ar

    # the package timed (PYTHONPATH may point at an older checkout than the script's commit)
    harness.save(a, "probit_step", {"summary": summary, "K": K, "pyro_ar_file": pyro_ar.__file__})
    return summary


if __name__ == "__main__":
    main()

"""Where the CPU time of one Pyro-path A&R step goes (K = 10^5, D = 128, B = 512, 64 shared
negatives), next to the hand-written torch step of benchmarks/scaling.py.

Wraps the main functions of the step (SVI, the ELBO, the traces, the guide, the model, the
likelihood, the optimizer, backward) with CPU-time counters (``time.process_time``, so that
other jobs on the machine do not count), runs ``--steps`` steps and prints the inclusive
time per step of each (nested: a line includes the lines it calls). The Pyro and the
hand-written steps run in interleaved rounds of 10 steps (load changes hit both alike);
the ratio is given overall and as the median of the per-round ratios.

    python -m benchmarks.profile_step [--K 100000] [--method ar_softmax] [--validate] [--quick] [--out DIR]

``--quick``: K = 10^4, 20 steps. Writes profile_step[_quick].json to ``--out``.
"""

import collections
import functools
import statistics
import time

if not __package__:  # python benchmarks/NAME.py (python -m benchmarks.NAME needs nothing)
    import _path  # noqa: F401
from benchmarks import harness  # noqa: E402


LABELS = [
    'SVI.step (everything)',
    '  ELBO.loss_and_grads',
    '    ELBO._get_trace (traces + log-probs + eta step)',
    '      poutine.trace(...).get_trace (guide + model)',
    '        guide forward (GumbelLocalGuide)',
    '          guide: create plates (data subsample)',
    '          guide: q(eps) for the minibatch',
    '        model (LinearClassifier.__call__)',
    '          model: sample_categorical',
    '      trace.compute_log_prob',
    '        likelihood: log S_hat',
    '          negatives: sampler',
    '          utilities: one gather + one matmul',
    '      natural eta step',
    '    ELBO: loss (KL + factors)',
    '    backward',
    '  PyroOptim (lazy_adam: one LazyAdam per parameter)',
    '    LazyAdam update',
]


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K = 10^4, 20 steps")
    p.add_argument("--K", type=int, default=100_000)
    p.add_argument("--method", default="ar_softmax")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--validate", action="store_true", help="Pyro validation on (its default)")
    a = p.parse_args(argv)
    if a.quick:
        a.K, a.steps = 10_000, 20
    harness.start(a)

    import torch

    import pyro
    import pyro.infer.svi as svi_mod
    import pyro.infer.trace_mean_field_elbo as tmf
    import pyro.poutine.trace_messenger as tm
    import pyro.poutine.trace_struct as ts

    import pyro_ar.distributions as ard
    import pyro_ar.infer.elbo as are
    import pyro_ar.infer.local_guides as arl
    import pyro_ar.models as arm
    import pyro_ar.negatives as arn
    import pyro_ar.optim as aro
    import pyro_ar.utility as aru
    from benchmarks import scaling

    pyro.enable_validation(a.validate)
    acc, cnt = collections.Counter(), collections.Counter()

    def wrap(owner, name, label):
        f = getattr(owner, name)

        @functools.wraps(f)
        def g(*args, **kwargs):
            c = time.process_time()
            try:
                return f(*args, **kwargs)
            finally:
                acc[label] += time.process_time() - c
                cnt[label] += 1

        setattr(owner, name, g)

    wrap(svi_mod.SVI, "step", "SVI.step (everything)")
    wrap(are.ClosedFormELBO, "loss_and_grads", "  ELBO.loss_and_grads")
    wrap(are.ClosedFormELBO, "_get_trace", "    ELBO._get_trace (traces + log-probs + eta step)")
    wrap(tm.TraceHandler, "get_trace", "      poutine.trace(...).get_trace (guide + model)")
    wrap(arl._LocalGuide, "forward", "        guide forward (GumbelLocalGuide)")
    wrap(arl._LocalGuide, "_create_plates", "          guide: create plates (data subsample)")
    wrap(arl.GumbelLocalGuide, "_site_distribution", "          guide: q(eps) for the minibatch")
    wrap(arm.LinearClassifier, "__call__", "        model (LinearClassifier.__call__)")
    wrap(ard, "sample_categorical", "          model: sample_categorical")
    arm.sample_categorical = ard.sample_categorical
    wrap(ts.Trace, "compute_log_prob", "      trace.compute_log_prob")
    wrap(ard.AugmentedCategorical, "log_sum_exp_negatives", "        likelihood: log S_hat")
    wrap(arn.NegativeSampler, "__call__", "          negatives: sampler")
    wrap(aru.LinearUtility, "gather_label_and_shared", "          utilities: one gather + one matmul")
    wrap(arl.GumbelLocalGuide, "_natural_step", "      natural eta step")
    wrap(tmf.TraceMeanField_ELBO, "_differentiable_loss_particle", "    ELBO: loss (KL + factors)")
    wrap(torch.Tensor, "backward", "    backward")
    wrap(aro._LazyPyroOptim, "__call__", "  PyroOptim (lazy_adam: one LazyAdam per parameter)")
    wrap(aro._LazyOptimizer, "_update", "    LazyAdam update")

    x, y = scaling._data(20_000, 128, a.K, "cpu")
    step = scaling._build(a.method, x, y, a.K, 512, 64)[0]
    hand = scaling._build("ar_torch_lazy", x, y, a.K, 512, 64)[0]
    for _ in range(20):
        step()
        hand()
    acc.clear()
    cnt.clear()
    # interleaved rounds of 10 steps each, so that load changes hit both steps alike; the
    # counters keep the Pyro steps only (the hand-written step is not itemised)
    block, rounds, ratios = 10, max(1, a.steps // 10), []
    total = total_hand = 0.0
    for _ in range(rounds):
        c0 = time.process_time()
        for _ in range(block):
            step()
        t_pyro = time.process_time() - c0
        saved = (collections.Counter(acc), collections.Counter(cnt))
        c0 = time.process_time()
        for _ in range(block):
            hand()
        t_hand = time.process_time() - c0
        acc, cnt = saved
        total, total_hand = total + t_pyro, total_hand + t_hand
        ratios.append(t_pyro / t_hand)
    n = rounds * block
    pyro_acc, pyro_cnt = dict(acc), dict(cnt)
    print(f"{a.method} K={a.K} validation={'on' if a.validate else 'off'}: {1e3 * total / n:.3f} ms "
          f"CPU per step (mean of {n}); hand-written torch step (LazyAdam) "
          f"{1e3 * total_hand / n:.3f} ms; ratio {total / total_hand:.2f} (median of the "
          f"per-round ratios {statistics.median(ratios):.2f}, {rounds} interleaved rounds)")
    rows = [dict(part=label.strip(), ms=1e3 * pyro_acc[label] / n, calls=pyro_cnt[label] / n)
            for label in LABELS if label in pyro_acc]
    for label, r in zip([k for k in LABELS if k in pyro_acc], rows):
        print(f"{r['ms']:8.3f} ms  {r['calls']:4.1f}x  {label}")
    summary = dict(pyro_ms=1e3 * total / n, hand_ms=1e3 * total_hand / n, ratio=total / total_hand,
                   median_round_ratio=statistics.median(ratios))
    harness.save(a, "profile_step", {"summary": summary, "rows": rows})
    return summary


if __name__ == "__main__":
    main()

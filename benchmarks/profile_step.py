"""Where the CPU time of one Pyro-path A&R step goes (K = 10^5, D = 128, B = 512, 64 shared
negatives), next to the hand-written torch step of benchmarks/scaling.py.

Wraps the main functions of the step (SVI, the ELBO, the traces, the guide, the model, the
likelihood, the optimizer, backward) with CPU-time counters (``time.process_time``, so that
other jobs on the machine do not count), runs ``--steps`` steps and prints the inclusive
time per step of each (nested: a line includes the lines it calls). The Pyro and the
hand-written steps run in interleaved rounds of 10 steps (load changes hit both alike);
the ratio is given overall and as the median of the per-round ratios. ``--plain``: no
counters (the ratio without the wrappers' own cost). Since issue 37 the library's model and
guide step without traces (:mod:`pyro_ar.infer.compiled`): the counters of the traced parts
then stay empty, and ``compiled step`` holds the ELBO's work.

Further steps in the same interleaved rounds (each its own ratio to the hand-written step):

* ``--old-commit REV``: the same Pyro step of the package as it was at commit ``REV``
  (``git archive``, imported under another name), so that before and after are measured in
  one process under the same load;
* ``--floor``: stock ``SVI`` + ``TraceMeanField_ELBO`` + ``lazy_adam`` on a null model and
  guide with the sites of the A&R step (two params, the subsampled data plate, a unit Gumbel
  noise site with its q gathered for the B rows, an observed site) on tensors of B numbers:
  what Pyro's machinery costs per step whatever the model computes (``TraceMeanField_ELBO``
  also evaluates every site's density, which ``ClosedFormELBO`` skips where the KL is used).

``--flat``: instead, the A&R softmax step of the bigram language model (D = 64, B = 512, 256
importance negatives from count^0.75, local-first Gumbel guide, ``lazy_adam``: the defaults
of ``benchmarks/brown.py``) at ``--K-lo`` (10^3) and ``--K`` words, interleaved in one
process, on ``--N`` synthetic Zipf-distributed tokens; prints the ratio of the step times and
the process's peak resident set (both models and their data).

    python -m benchmarks.profile_step [--K 100000] [--method ar_softmax] [--validate] [--plain]
        [--old-commit REV] [--floor] [--flat [--K-lo 1000] [--N 4860000]] [--quick] [--out DIR]

``--quick``: K = 10^4, 20 steps (``--flat``: N = 10^5). Writes profile_step[_flat][_quick].json
to ``--out``.
"""

import collections
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import time

from benchmarks import harness
from pyro_ar.likelihoods import AR
from pyro_ar.models import Init
from pyro_ar.negatives import SharedNegatives


LABELS = [
    'SVI.step (everything)',
    '  ELBO.loss_and_grads',
    '    compiled step (no traces: pyro_ar.infer.compiled)',
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
    '  PyroOptim (lazy_adam: one pass over its per-parameter LazyAdams)',
    '    LazyAdam update',
]


def _instrument(acc, cnt):
    """Wrap the step's main functions with CPU-time counters (``acc``, ``cnt``: label -> total)."""
    import torch

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

    for owner, name, i in [
            (svi_mod.SVI, "step", 0), (are.ClosedFormELBO, "loss_and_grads", 1),
            (are.ClosedFormELBO, "_get_trace", 3), (tm.TraceHandler, "get_trace", 4),
            (arl._LocalGuide, "forward", 5), (arl._LocalGuide, "_create_plates", 6),
            (arl.GumbelLocalGuide, "_site_distribution", 7), (arm.LinearClassifier, "__call__", 8),
            (ard, "sample_categorical", 9), (ts.Trace, "compute_log_prob", 10),
            (ard.AugmentedCategorical, "log_sum_exp_negatives", 11), (arn.NegativeSampler, "__call__", 12),
            (aru.LinearUtility, "gather_label_and_shared", 13), (arl.GumbelLocalGuide, "_natural_step", 14),
            (tmf.TraceMeanField_ELBO, "_differentiable_loss_particle", 15), (torch.Tensor, "backward", 16),
            (aro._LazyPyroOptim, "__call__", 17), (aro._LazyOptimizer, "_update", 18),
            (are, "compiled_loss_and_grads", 2)]:
        wrap(owner, name, LABELS[i])
    arm.sample_categorical = ard.sample_categorical


def _old_package(rev):
    """The package at commit ``rev``, imported as ``pyro_ar_old`` (its imports are relative)."""
    import importlib.util

    root = tempfile.mkdtemp(prefix="pyro_ar_old_")
    archive = subprocess.run(["git", "-C", str(harness.ROOT), "archive", rev, "pyro_ar"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", root], input=archive, check=True)
    package = f"{root}/pyro_ar"
    spec = importlib.util.spec_from_file_location("pyro_ar_old", f"{package}/__init__.py",
                                                  submodule_search_locations=[package])
    module = importlib.util.module_from_spec(spec)
    sys.modules["pyro_ar_old"] = module
    spec.loader.exec_module(module)
    return module


def _svi_step(pkg, x, y, K, tag, B=512, S=64, lr=1e-3):
    """The A&R softmax step of benchmarks/scaling.py (``ar_softmax``) built from package ``pkg``,
    its parameters prefixed by ``tag`` (several models in one param store)."""
    from pyro.infer import SVI

    model = pkg.models.LinearClassifier(x.shape[1], K, likelihood=AR("gumbel", negatives=SharedNegatives(S)),
                                        subsample_size=B, sparse=True, prefix=f"{tag}_", site=f"y_{tag}")
    svi = SVI(model, pkg.infer.default_guide(model), pkg.optim.lazy_adam({"lr": lr}), pkg.infer.default_elbo())
    return lambda: svi.step(x, y)


def _floor_step(N, B=512):
    """Stock SVI on a null model and guide with the A&R step's sites, tensors of B numbers."""
    import torch

    import pyro
    import pyro.distributions as dist
    from pyro.infer import SVI, TraceMeanField_ELBO

    from pyro_ar.distributions import FastGumbel
    from pyro_ar.models.plates import SubsamplePlate
    from pyro_ar.optim import lazy_adam

    zero, obs = torch.zeros(()), torch.zeros(N)
    prior = FastGumbel(zero, 1.0).expand([B])

    def model(x):
        w, b = pyro.param("floor_w", torch.zeros(())), pyro.param("floor_b", torch.zeros(()))
        with SubsamplePlate("floor_data", N, subsample_size=B) as idx:
            pyro.sample("floor_eps", prior)
            pyro.sample("floor_y", dist.Normal(w + b, 1.0), obs=x.index_select(0, idx))

    def guide(x):
        loc = pyro.param("floor_loc", torch.zeros(N))
        with SubsamplePlate("floor_data", N, subsample_size=B) as idx:
            q = torch.gather(loc, 0, idx, sparse_grad=True)  # (a lazy update of B rows, as A&R's)
            pyro.sample("floor_eps", FastGumbel(q, 1.0))

    svi = SVI(model, guide, lazy_adam({"lr": 1e-3}), TraceMeanField_ELBO())
    return lambda: svi.step(obs)


def _interleave(steps, rounds, block, counted, acc, cnt):
    """CPU seconds per step of each of ``steps`` (name -> step), in ``rounds`` rounds of
    ``block`` steps each, the steps back to back in every round; the counters keep only the
    steps of ``counted``. Returns name -> per-round times."""
    times = {k: [] for k in steps}
    for _ in range(rounds):
        for name, step in steps.items():
            saved = (collections.Counter(acc), collections.Counter(cnt))
            c0 = time.process_time()
            for _ in range(block):
                step()
            times[name].append((time.process_time() - c0) / block)
            if name != counted:
                acc.clear(), cnt.clear()
                acc.update(saved[0]), cnt.update(saved[1])
    return times


def _ratios(times, reference):
    """name -> (mean ms, ratio of means to ``reference``, median of the per-round ratios)."""
    ref = times[reference]
    return {k: dict(ms=1e3 * statistics.mean(v), ratio=sum(v) / sum(ref),
                    median_round_ratio=statistics.median(a / b for a, b in zip(v, ref)))
            for k, v in times.items()}


def profile(a):
    import torch  # noqa: F401

    import pyro

    from benchmarks import scaling

    pyro.enable_validation(a.validate)
    acc, cnt = collections.Counter(), collections.Counter()
    if not a.plain:
        _instrument(acc, cnt)
    x, y = scaling._data(20_000, 128, a.K, "cpu")
    steps = {"pyro": scaling._build(a.method, x, y, a.K, 512, 64)[0],
             "hand": scaling._build("ar_torch_lazy", x, y, a.K, 512, 64)[0]}
    if a.old_commit:
        steps["old"] = _svi_step(_old_package(a.old_commit), x, y, a.K, "old")
    if a.floor:
        steps["floor"] = _floor_step(len(x))
    for _ in range(20):
        for step in steps.values():
            step()
    acc.clear()
    cnt.clear()
    rounds, block = max(1, a.steps // 10), 10
    times = _interleave(steps, rounds, block, "pyro", acc, cnt)
    n = rounds * block
    per_step = _ratios(times, "hand")
    names = {"pyro": f"Pyro step ({a.method})", "hand": "hand-written torch step (LazyAdam)",
             "old": f"Pyro step at {a.old_commit}", "floor": "stock SVI, null model (floor)"}
    for k, r in per_step.items():
        r["name"] = names[k]
    s = per_step["pyro"]
    summary = dict(pyro_ms=s["ms"], hand_ms=per_step["hand"]["ms"], ratio=s["ratio"],
                   median_round_ratio=s["median_round_ratio"], load_average=_load())
    if "old" in times:
        summary["pyro_over_old_median_round"] = statistics.median(p / o for p, o in zip(times["pyro"], times["old"]))
    print(f"{a.method} K={a.K} validation={'on' if a.validate else 'off'}: {s['ms']:.3f} ms CPU per step "
          f"(mean of {n}); hand-written torch step (LazyAdam) {summary['hand_ms']:.3f} ms; ratio "
          f"{s['ratio']:.2f} (median of the per-round ratios {s['median_round_ratio']:.2f}, {rounds} "
          f"interleaved rounds{'' if a.plain else '; itemised counters on'}; load average {summary['load_average']})")
    for k in ("old", "floor"):
        if k in per_step:
            r = per_step[k]
            print(f"  {r['name']}: {r['ms']:.3f} ms, ratio to hand {r['ratio']:.2f} (median per round "
                  f"{r['median_round_ratio']:.2f})")
    if "old" in times:
        print(f"  this step / the step at {a.old_commit}: median per round {summary['pyro_over_old_median_round']:.3f}")
    rows = [dict(part=label.strip(), ms=1e3 * acc[label] / n, calls=cnt[label] / n)
            for label in LABELS if label in acc]
    for label, r in zip([k for k in LABELS if k in acc], rows):
        print(f"{r['ms']:8.3f} ms  {r['calls']:4.1f}x  {label}")
    harness.save(a, "profile_step", {"summary": summary, "steps": per_step, "rows": rows})
    return summary


def _load():
    try:
        return [round(v, 1) for v in os.getloadavg()]
    except OSError:
        return None


def _bigram_step(K, N, tag, seed):
    """The A&R softmax bigram step of benchmarks/brown.py's defaults on N Zipf tokens."""
    import torch

    from pyro.infer import SVI

    from pyro_ar.infer import default_elbo, default_guide
    from pyro_ar.likelihoods import AR
    from pyro_ar.models import BigramLanguageModel, unigram_log_probs
    from pyro_ar.negatives import ImportanceNegatives
    from pyro_ar.optim import lazy_adam

    g = torch.Generator().manual_seed(seed)
    zipf = 1.0 / torch.arange(1, K + 1, dtype=torch.float64)
    tokens = torch.multinomial(zipf / zipf.sum(), N + 1, replacement=True, generator=g)
    x, y = tokens[:-1], tokens[1:]
    counts = torch.bincount(y, minlength=K)
    likelihood = AR("gumbel", negatives=ImportanceNegatives(256, (counts.double() + 1) ** 0.75))
    model = BigramLanguageModel(K, 64, likelihood=likelihood, subsample_size=512, prefix=f"{tag}_",
                                site=f"y_{tag}", init=Init(bias=unigram_log_probs(counts).float()))
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 3e-3}), default_elbo())
    return lambda: svi.step(x, y)


def flat(a):
    import pyro

    pyro.enable_validation(a.validate)
    pyro.clear_param_store()
    steps = {f"K={K}": _bigram_step(K, a.N, f"k{K}", a.seed) for K in (a.K_lo, a.K)}
    for _ in range(20):
        for step in steps.values():
            step()
    times = _interleave(steps, max(1, a.steps // 10), 10, None, collections.Counter(), collections.Counter())
    per_step = _ratios(times, f"K={a.K_lo}")
    for k, r in per_step.items():
        r["name"] = f"A&R softmax bigram step, {k}"
    peak = harness.peak_bytes()
    r = per_step[f"K={a.K}"]
    summary = dict(ratio=r["ratio"], median_round_ratio=r["median_round_ratio"], peak_rss_bytes=peak,
                   peak_rss_gib=peak / 2**30, load_average=_load())
    print(f"A&R softmax bigram step (D=64, B=512, 256 importance negatives, N={a.N}): K={a.K_lo} "
          f"{per_step[f'K={a.K_lo}']['ms']:.3f} ms, K={a.K} {r['ms']:.3f} ms; ratio {r['ratio']:.3f} "
          f"(median per round {r['median_round_ratio']:.3f}); peak RSS {peak / 2**30:.3f} GiB (both models); "
          f"load average {summary['load_average']}")
    harness.save(a, "profile_step_flat", {"summary": summary, "steps": per_step})
    return summary


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K = 10^4, 20 steps (--flat: N = 10^5)")
    p.add_argument("--K", type=int, default=100_000)
    p.add_argument("--method", default="ar_softmax")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--validate", action="store_true", help="Pyro validation on (its default)")
    p.add_argument("--plain", action="store_true", help="no itemised counters")
    p.add_argument("--old-commit", default=None, help="also time the step of the package at this commit")
    p.add_argument("--floor", action="store_true", help="also time stock SVI on a null model")
    p.add_argument("--flat", action="store_true", help="the bigram step at --K-lo and --K instead")
    p.add_argument("--K-lo", type=int, default=1000)
    p.add_argument("--N", type=int, default=4_860_000, help="--flat: training tokens")
    a = p.parse_args(argv)
    if a.quick:
        a.steps = 20
        a.K, a.N = (a.K, 100_000) if a.flat else (10_000, a.N)
    harness.start(a)
    return flat(a) if a.flat else profile(a)


if __name__ == "__main__":
    main()

"""Per-step time and peak memory against the number of classes K (fixed D, B, negatives).

For K in {10^3, 10^4, 10^5, 10^6}, D = 128, B = 512, 64 shared negatives, it measures
side by side (interleaved by K, one run):

* ``ar_softmax``       A&R softmax through Pyro: ``LinearClassifier(likelihood="ar",
  strategy="shared", sparse=True)`` + ``GumbelLocalGuide`` + ``ClosedFormELBO`` (closed-form
  bound, natural eta step), ``lazy_adam`` -- the stock ``SVI.step``;
* ``ar_softmax_map``   the same with ``weights="map"`` (Gaussian prior, class-subsampled);
* ``ar_probit``        A&R probit (Normal noise) + its default guide (``default_guide``: the
  ``ConditionalLocalGuide``, which refits q at every step);
* ``ar_logistic``      A&R logistic (Logistic noise) + its default guide, likewise;
* ``ove``              OVE bound (Titsias 2016), same negatives, no guide;
* ``botev``            sampled softmax (Botev et al. 2017), same negatives;
* ``exact_torch``      exact softmax as a user writes it: ``F.cross_entropy(x W^T + b, y)``
  + ``torch.optim.Adam`` (dense, O(K D) per step);
* ``ar_torch``         hand-written pure-torch A&R softmax step (no Pyro; same math: shared
  negatives, closed-form bound, natural eta step) with ``torch.optim.SparseAdam``;
* ``ar_torch_lazy``    the same hand-written step with ``pyro_ar.optim.LazyAdam`` (the
  optimizer the Pyro path uses), to isolate Pyro's own overhead.

Every (method, K) runs in a fresh subprocess (``--worker``), so that its peak resident set
(:func:`benchmarks.harness.peak_bytes`; ``torch.cuda.max_memory_allocated`` on
CUDA) belongs to that configuration alone; it is compared with the bytes of the
parameters plus the optimizer state, and with the process's resident set before the model
was built (interpreter + torch + pyro + data). Step time: median over the timed steps after
warm-up, both wall clock (``perf_counter``) and process CPU time (``process_time``, more
robust on a shared machine). ``torch.set_num_threads(1)`` in every worker.

Two paired measurements, each in ONE process alternating blocks of 10 steps so that load
changes hit all variants alike (separate processes measured minutes apart differ by up to
1.7x on this shared machine): the Pyro-overhead ratio (``--paired``, K = 10^5: the Pyro A&R
step with validation on and off, and the hand-written steps; reported as the ratio of the
medians and as the median over rounds of the per-round ratio), and the flatness ratio
(``--paired-flat``: the Pyro A&R step and the hand-written one at the smallest and the
largest K).

    python -m benchmarks.scaling [--quick] [--device cpu|cuda] [--out DIR]

``--quick``: K = 10^3 and 10^4, fewer steps, all methods of one K in one process (under a
minute). Writes ``scaling[_quick].json`` and ``.png`` (time per step and peak memory against
K) to ``--out``.
"""

import json
import math
import os
import statistics
import subprocess
import sys

from benchmarks import harness
from pyro_ar.likelihoods import AR, get_likelihood
from pyro_ar.negatives import SharedNegatives

PYRO_METHODS = ["ar_softmax", "ar_softmax_map", "ar_probit", "ar_logistic", "ove", "botev"]
TORCH_METHODS = ["exact_torch", "ar_torch", "ar_torch_lazy"]
METHODS = PYRO_METHODS + TORCH_METHODS

LABELS = {
    "ar_softmax": "A&R softmax (Pyro, closed form)",
    "ar_softmax_map": "A&R softmax MAP (Pyro)",
    "ar_probit": "A&R probit (Pyro)",
    "ar_logistic": "A&R logistic (Pyro)",
    "ove": "OVE (Pyro)",
    "botev": "sampled softmax / Botev (Pyro)",
    "exact_torch": "exact softmax (F.cross_entropy + Adam)",
    "ar_torch": "A&R softmax, hand-written torch (SparseAdam)",
    "ar_torch_lazy": "A&R softmax, hand-written torch (LazyAdam)",
}


# ------------------------------------------------------------------------------ workers
class TorchAR:
    """Hand-written A&R softmax step: shared negatives, closed-form bound, eta step.

    The reference the Pyro path is compared with (same samplers as the library, so that
    only the machinery around the arithmetic differs)."""

    def __init__(self, x, y, K, B, S, optimizer="sparse_adam", lr=1e-3):
        import torch

        self.x, self.y, self.K, self.B, self.S = x, y, K, B, S
        N, D = x.shape
        dev, dt = x.device, x.dtype
        self.W = (0.1 * torch.randn(K, D, device=dev, dtype=dt)).requires_grad_()
        self.b = (1e-3 * torch.randn(K, device=dev, dtype=dt)).requires_grad_()
        self.log_eta = torch.full((N,), math.log(K), device=dev, dtype=dt)
        self.visits = torch.zeros(N, device=dev, dtype=dt)
        if optimizer == "sparse_adam":
            self.opt = torch.optim.SparseAdam([self.W, self.b], lr=lr)
        else:
            from pyro_ar.optim import LazyAdam

            self.opt = LazyAdam([self.W, self.b], lr=lr)

    def params(self):
        return [self.W, self.b, self.log_eta, self.visits]

    def step(self):
        import torch
        import torch.nn.functional as F

        N, B, S, K = self.x.shape[0], self.B, self.S, self.K
        # the minibatch: B of N without replacement in O(B), as LinearClassifier.create_plates
        from pyro_ar.subsets import sample_without_replacement

        idx = sample_without_replacement(N, B, device=self.x.device)
        xb, yb = self.x.index_select(0, idx), self.y.index_select(0, idx)
        neg = sample_without_replacement(K, S, device=self.x.device)  # the library's sampler
        rows = torch.cat([yb, neg])
        w = F.embedding(rows, self.W, sparse=True)
        b = torch.gather(self.b, 0, rows, sparse_grad=True)
        psi_y = (xb * w[:B]).sum(-1) + b[:B]
        psi_neg = xb @ w[B:].T + b[B:]
        log_w = torch.where(neg != yb.unsqueeze(-1), math.log(K / S), -math.inf)
        log_s = torch.logsumexp(log_w + psi_neg - psi_y.unsqueeze(-1), -1)  # log S_hat_y
        log_eta = self.log_eta.index_select(0, idx)
        # minus the closed-form bound 1 - log eta - (1 + S_hat) / eta, scaled to N
        loss = (N / B) * (log_eta - 1 + torch.exp(-log_eta) + torch.exp(log_s - log_eta)).sum()
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        with torch.no_grad():  # natural step eta <- (1 - rho) eta + rho (1 + S_hat)
            rho = (1 + self.visits.index_select(0, idx)) ** -0.9
            target = torch.logaddexp(torch.zeros_like(log_s), log_s)
            new = torch.logaddexp(torch.log1p(-rho) + log_eta, rho.log() + target)
            self.log_eta.index_copy_(0, idx, new)
            self.visits.index_add_(0, idx, torch.ones_like(rho))
        return loss.item()


class TorchExact:
    """Exact softmax as a user writes it: F.cross_entropy on all K logits, dense Adam."""

    def __init__(self, x, y, K, B, lr=1e-3):
        import torch

        self.x, self.y, self.B = x, y, B
        D, dev, dt = x.shape[1], x.device, x.dtype
        self.W = (0.1 * torch.randn(K, D, device=dev, dtype=dt)).requires_grad_()
        self.b = (1e-3 * torch.randn(K, device=dev, dtype=dt)).requires_grad_()
        self.opt = torch.optim.Adam([self.W, self.b], lr=lr)

    def params(self):
        return [self.W, self.b]

    def step(self):
        import torch
        import torch.nn.functional as F

        idx = torch.randperm(self.x.shape[0], device=self.x.device)[: self.B]
        loss = F.cross_entropy(F.linear(self.x[idx], self.W, self.b), self.y[idx])
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return loss.item()


def _build(method, x, y, K, B, S, lr=1e-3, tag=None):
    """(step function, parameter tensors, optimizer state getter)."""
    import pyro
    from pyro.infer import SVI, Trace_ELBO

    from pyro_ar.infer import default_elbo, default_guide
    from pyro_ar.models import LinearClassifier
    from pyro_ar.optim import lazy_adam

    if method == "exact_torch":
        m = TorchExact(x, y, K, B, lr)
        return m.step, m.params, lambda: [m.opt.state]
    if method in ("ar_torch", "ar_torch_lazy"):
        m = TorchAR(x, y, K, B, S, "sparse_adam" if method == "ar_torch" else "lazy_adam", lr)
        return m.step, m.params, lambda: [m.opt.state]
    if tag is None:
        pyro.clear_param_store()
    D = x.shape[1]
    kw = dict(subsample_size=B, sparse=True)
    if tag is not None:  # several models in one param store (paired measurements)
        kw.update(prefix=f"{tag}_", site=f"y_{tag}")
    if method.startswith("ar_"):
        noise = {"ar_softmax": "gumbel", "ar_softmax_map": "gumbel", "ar_probit": "normal",
                 "ar_logistic": "logistic"}[method]
        model = LinearClassifier(D, K, likelihood=AR(noise, negatives=SharedNegatives(S)),
                                 weights="map" if method == "ar_softmax_map" else "mle", **kw)
        elbo = default_elbo()
    else:
        model = LinearClassifier(D, K, likelihood=get_likelihood({"botev": "sampled"}.get(method, method), num_negatives=S, strategy="shared"), **kw)
        elbo = Trace_ELBO()
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), elbo)

    def params():
        store = pyro.get_param_store()
        return [store[name].unconstrained() for name in store.keys()]

    def states():
        return [o.state for o in svi.optim.optim_objs.values()]

    return (lambda: svi.step(x, y)), params, states


def _data(N, D, K, device, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(N, D, generator=g) / math.sqrt(D)).to(device)
    y = torch.randint(0, K, (N,), generator=g).to(device)
    return x, y


def worker(methods, K, D, B, S, N, device, warmup, max_steps, budget):
    """Time each of ``methods`` (comma-separated) in this process, one after the other
    (the peak memory is then per process, not per method: use one method per worker for
    memory)."""
    methods = methods.split(",")
    for method in methods:
        _worker_one(method, K, D, B, S, N, device, warmup, max_steps, budget, len(methods) > 1)


def _worker_one(method, K, D, B, S, N, device, warmup, max_steps, budget, shared):
    import torch

    torch.set_num_threads(1)
    import pyro

    pyro.set_rng_seed(0)
    x, y = _data(N, D, K, device)
    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    rss_before = harness.rss_bytes()
    dev_before = torch.cuda.memory_allocated() if cuda else 0
    with harness.timer() as t_build:
        step, params, states = _build(method, x, y, K, B, S)
    if method == "exact_torch" and K >= 10**6:
        warmup = min(warmup, 1)
    times = harness.step_times(step, max_steps, warmup=warmup, budget=budget, sync=sync)
    wall, cpu = times["wall"], times["cpu"]
    param_bytes = sum(harness.tensor_bytes(p) for p in params())
    state_bytes = sum(harness.tensor_bytes(s) for s in states())
    out = dict(method=method, K=K, D=D, B=B, S=S, N=N, device=device, steps=len(wall),
               warmup=warmup, build_seconds=t_build.wall,
               wall_median=statistics.median(wall), cpu_median=statistics.median(cpu),
               wall_all=wall, cpu_all=cpu, param_bytes=param_bytes, state_bytes=state_bytes,
               rss_before=rss_before, peak_rss=harness.peak_bytes(), shared_process=shared)
    out.update(cpu_ms=1e3 * out["cpu_median"], wall_ms=1e3 * out["wall_median"], peak_rss_mib=out["peak_rss"] / 2**20,
               params_state_mib=(param_bytes + state_bytes) / 2**20,
               peak_over_params_state=out["peak_rss"] / max(1, param_bytes + state_bytes))
    if cuda:
        out.update(peak_device=torch.cuda.max_memory_allocated(), device_before=dev_before)
    print("RESULT " + json.dumps(out), flush=True)


def paired(K, D, B, S, N, device, blocks, block):
    """Pyro A&R step (validation on / off) and the hand-written steps, alternating."""
    import torch

    torch.set_num_threads(1)
    import pyro

    pyro.set_rng_seed(0)
    x, y = _data(N, D, K, device)
    cuda = torch.device(device).type == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    steps = {}
    for m in ("ar_softmax", "ar_torch", "ar_torch_lazy"):
        steps[m] = _build(m, x, y, K, B, S)[0]
    # the Pyro one keeps its own param store: rebuild last so the store is the Pyro one
    runs = {"pyro_validate": "ar_softmax", "pyro_novalidate": "ar_softmax",
            "ar_torch": "ar_torch", "ar_torch_lazy": "ar_torch_lazy"}

    def under_validation(step, on):
        def run():
            pyro.enable_validation(on)
            step()
        return run
    times = harness.paired_times({k: under_validation(steps[m], k != "pyro_novalidate") for k, m in runs.items()},
                                 blocks, block, warmup=5, sync=sync, per_call=True)
    wall, cpu = ({k: v[clock] for k, v in times.items()} for clock in ("wall", "cpu"))
    pyro.enable_validation(True)
    out = dict(K=K, D=D, B=B, S=S, N=N, device=device, blocks=blocks, block=block,
               wall_median={k: statistics.median(v) for k, v in wall.items()},
               cpu_median={k: statistics.median(v) for k, v in cpu.items()},
               cpu_round_ratio=_round_ratios(cpu, block, "ar_torch_lazy"))
    print("RESULT " + json.dumps(out), flush=True)


def _round_ratios(times, block, reference):
    """Median over rounds of (a variant's median step / the reference's median step in the
    same round): each round runs every variant for one block, back to back, so a load change
    between rounds cancels (steadier than the ratio of overall medians on a busy machine)."""
    med = {k: [statistics.median(v[i:i + block]) for i in range(0, len(v), block)] for k, v in times.items()}
    return {k: statistics.median(a / b for a, b in zip(v, med[reference])) for k, v in med.items()}


def paired_flat(K_lo, K_hi, D, B, S, N, device, blocks, block):
    """The A&R softmax Pyro step (and the hand-written one) at K_lo and K_hi in ONE process,
    alternating blocks of steps: the flatness ratio without run-to-run machine noise."""
    import torch

    torch.set_num_threads(1)
    import pyro

    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    steps = {}
    for K in (K_lo, K_hi):
        x, y = _data(N, D, K, device)
        steps[f"ar_softmax_K{K}"] = _build("ar_softmax", x, y, K, B, S, tag=f"k{K}")[0]
        steps[f"ar_torch_lazy_K{K}"] = _build("ar_torch_lazy", x, y, K, B, S)[0]
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    times = harness.paired_times(steps, blocks, block, warmup=5, sync=sync, per_call=True)
    wall, cpu = ({k: v[clock] for k, v in times.items()} for clock in ("wall", "cpu"))
    out = dict(K_lo=K_lo, K_hi=K_hi, blocks=blocks, block=block,
               wall_median={k: statistics.median(v) for k, v in wall.items()},
               cpu_median={k: statistics.median(v) for k, v in cpu.items()})
    print("RESULT " + json.dumps(out), flush=True)


# ------------------------------------------------------------------------------ driver
def _run_worker(args_list, many=False):
    p = subprocess.run(harness.module_command(__spec__.name, *args_list), capture_output=True, text=True,
                       env=harness.worker_env())
    found = [json.loads(line[7:]) for line in p.stdout.splitlines() if line.startswith("RESULT ")]
    if not found or p.returncode != 0:
        sys.stderr.write(p.stdout[-2000:] + p.stderr[-4000:])
    if many:
        return found, (None if p.returncode == 0 else (p.stderr.strip().splitlines() or ["?"])[-1])
    return found[0] if found else {"error": (p.stderr.strip().splitlines() or ["?"])[-1]}


def _print_row(r):
    tot = r["param_bytes"] + r["state_bytes"]
    mem = (f"peak RSS {_fmt_bytes(r['peak_rss'])} MiB  params+state {_fmt_bytes(tot)} MiB  "
           f"RSS before model {_fmt_bytes(r['rss_before'])} MiB") if not r.get("shared_process") else \
        f"params+state {_fmt_bytes(tot)} MiB (peak memory not per method in --quick)"
    print(f"  K={r['K']:>8d} {r['method']:15s} wall {1e3 * r['wall_median']:9.2f} ms  cpu "
          f"{1e3 * r['cpu_median']:9.2f} ms  ({r['steps']} steps)  {mem}", flush=True)


def _loadavg():
    try:
        return os.getloadavg()
    except OSError:
        return None


def _fmt_bytes(n):
    return f"{n / 2**20:8.1f}"


def main(argv=None):
    p = harness.parser(__doc__, quick_help="K = 1e3 and 1e4, fewer steps (under a minute)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--Ks", default=None, help="comma-separated K values (default 1e3,1e4,1e5,1e6)")
    p.add_argument("--methods", default=",".join(METHODS))
    p.add_argument("--D", type=int, default=128)
    p.add_argument("--B", type=int, default=512)
    p.add_argument("--S", type=int, default=64, help="shared negatives per step")
    p.add_argument("--N", type=int, default=20_000, help="training points (synthetic)")
    p.add_argument("--steps", type=int, default=None, help="max timed steps per config")
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--budget", type=float, default=None, help="seconds of timed steps per config")
    p.add_argument("--paired-K", type=int, default=100_000)
    p.add_argument("--no-paired", action="store_true")
    # internal
    p.add_argument("--worker", default=None)
    p.add_argument("--paired", action="store_true")
    p.add_argument("--paired-flat", action="store_true")
    p.add_argument("--K-lo", type=int, default=1000)
    p.add_argument("--K", type=int, default=None)
    p.add_argument("--blocks", type=int, default=None)
    a = p.parse_args(argv)
    steps = a.steps or (25 if a.quick else 100)
    warmup = a.warmup if a.warmup is not None else (3 if a.quick else 10)
    budget = a.budget or (0.7 if a.quick else 6.0)
    blocks = a.blocks or (4 if a.quick else 20)

    if a.worker:
        return worker(a.worker, a.K, a.D, a.B, a.S, a.N, a.device, warmup, steps, budget)
    if a.paired:
        return paired(a.K, a.D, a.B, a.S, a.N, a.device, blocks, 10)
    if a.paired_flat:
        return paired_flat(a.K_lo, a.K, a.D, a.B, a.S, a.N, a.device, blocks, 10)

    harness.start(a)
    Ks = [int(float(k)) for k in (a.Ks or ("1e3,1e4" if a.quick else "1e3,1e4,1e5,1e6")).split(",")]
    methods = a.methods.split(",")
    if a.quick:
        a.paired_K = min(a.paired_K, max(Ks))
    total = harness.timer().start()
    common = ["--D", str(a.D), "--B", str(a.B), "--S", str(a.S), "--N", str(a.N), "--device", a.device,
              "--steps", str(steps), "--warmup", str(warmup), "--budget", str(budget)]
    load = {"start": _loadavg()}
    print(f"scaling: D={a.D} B={a.B} negatives={a.S} N={a.N} device={a.device}, one torch thread "
          f"per worker; load average at start {load['start']}", flush=True)
    results = []
    for K in Ks:
        if a.quick:  # one process per K (start-up dominates otherwise); no per-method memory
            found, err = _run_worker(["--worker", ",".join(methods), "--K", str(K)] + common, many=True)
            for r in found:
                results.append(r)
                _print_row(r)
            if err:
                print(f"  K={K:>8d} ERROR {err}", flush=True)
            continue
        for m in methods:
            r = _run_worker(["--worker", m, "--K", str(K)] + common)
            r.setdefault("method", m)
            r.setdefault("K", K)
            results.append(r)
            if "error" in r:
                print(f"  K={K:>8d} {m:15s} ERROR {r['error']}", flush=True)
                continue
            _print_row(r)
    pair = flat = None
    if not a.no_paired:
        pair = _run_worker(["--paired", "--K", str(a.paired_K), "--blocks", str(blocks)] + common)
        flat = _run_worker(["--paired-flat", "--K-lo", str(min(Ks)), "--K", str(max(Ks)),
                            "--blocks", str(blocks)] + common)
    load["end"] = _loadavg()
    elapsed = total.wall

    # ---------------------------------------------------------------- summary and ratios
    def get(m, K, key="wall_median"):
        for r in results:
            if r.get("method") == m and r.get("K") == K and key in r:
                return r[key]
        return None

    ratios = {}
    print("\nRatios (wall-clock medians; CPU-time medians in brackets):")
    k_lo, k_hi = min(Ks), max(Ks)
    for key in ("wall_median", "cpu_median"):
        tag = "wall" if key == "wall_median" else "cpu"
        lo, hi = get("ar_softmax", k_lo, key), get("ar_softmax", k_hi, key)
        if lo and hi:
            ratios[f"ar_softmax_K{k_hi}_over_K{k_lo}_{tag}"] = hi / lo
        ex = get("exact_torch", k_hi, key)
        if ex and hi:
            ratios[f"exact_over_ar_softmax_K{k_hi}_{tag}"] = ex / hi
        for K in Ks:
            ar, hand = get("ar_softmax", K, key), get("ar_torch_lazy", K, key)
            hand2 = get("ar_torch", K, key)
            if ar and hand:
                ratios[f"pyro_over_torch_lazy_K{K}_{tag}"] = ar / hand
            if ar and hand2:
                ratios[f"pyro_over_torch_sparseadam_K{K}_{tag}"] = ar / hand2
    if pair and "wall_median" in pair:
        for key in ("wall_median", "cpu_median"):
            tag = "wall" if key == "wall_median" else "cpu"
            med = pair[key]
            ratios[f"paired_pyro_over_torch_lazy_K{pair['K']}_{tag}"] = med["pyro_validate"] / med["ar_torch_lazy"]
            ratios[f"paired_pyro_novalidate_over_torch_lazy_K{pair['K']}_{tag}"] = (
                med["pyro_novalidate"] / med["ar_torch_lazy"])
            ratios[f"paired_pyro_over_torch_sparseadam_K{pair['K']}_{tag}"] = med["pyro_validate"] / med["ar_torch"]
        for k, r in pair.get("cpu_round_ratio", {}).items():
            if k != "ar_torch_lazy":
                ratios[f"paired_{k}_over_torch_lazy_K{pair['K']}_cpu_per_round"] = r
        print(f"  paired at K={pair['K']} (ms, wall / cpu): " + ", ".join(
            f"{k} {1e3 * pair['wall_median'][k]:.2f} / {1e3 * pair['cpu_median'][k]:.2f}"
            for k in pair["wall_median"]))
    if flat and "cpu_median" in flat:
        lo, hi = flat["K_lo"], flat["K_hi"]
        for key in ("wall_median", "cpu_median"):
            tag = "wall" if key == "wall_median" else "cpu"
            med = flat[key]
            ratios[f"paired_ar_softmax_K{hi}_over_K{lo}_{tag}"] = med[f"ar_softmax_K{hi}"] / med[f"ar_softmax_K{lo}"]
            ratios[f"paired_ar_torch_lazy_K{hi}_over_K{lo}_{tag}"] = (
                med[f"ar_torch_lazy_K{hi}"] / med[f"ar_torch_lazy_K{lo}"])
        print(f"  paired K={lo} vs K={hi} in one process (ms, wall / cpu): " + ", ".join(
            f"{k} {1e3 * flat['wall_median'][k]:.2f} / {1e3 * flat['cpu_median'][k]:.2f}"
            for k in flat["wall_median"]))
    memory = {}
    for r in results:
        if "peak_rss" not in r or r.get("shared_process"):
            continue
        tot = r["param_bytes"] + r["state_bytes"]
        memory[f"{r['method']}_K{r['K']}"] = dict(
            peak_over_params_state=r["peak_rss"] / tot,
            peak_minus_baseline_over_params_state=(r["peak_rss"] - r["rss_before"]) / tot)
    for k, v in ratios.items():
        print(f"  {k:55s} {v:9.3f}")
    print("Peak memory / (parameters + optimizer state) at the largest K "
          "(whole process; in brackets without the pre-model baseline):")
    for r in results:
        if r.get("K") == k_hi and f"{r.get('method')}_K{r.get('K')}" in memory:
            mm = memory[f"{r['method']}_K{r['K']}"]
            print(f"  {r['method']:15s} {mm['peak_over_params_state']:7.3f}  "
                  f"({mm['peak_minus_baseline_over_params_state']:.3f})")
    print(f"load average at end {load['end']}; elapsed {elapsed:.0f} s")
    meta = dict(torch_threads_per_worker=1, load_average=load, elapsed=elapsed)
    path = harness.save(a, "scaling", dict(meta=meta, results=results, paired=pair, paired_flat=flat,
                                           ratios=ratios, memory=memory))
    _plot(results, path.with_suffix(".png"), a)
    return ratios


def _plot(results, path, a):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for m in METHODS:
        rs = sorted((r for r in results if r.get("method") == m and "wall_median" in r), key=lambda r: r["K"])
        if not rs:
            continue
        Ks = [r["K"] for r in rs]
        style = "--" if m in TORCH_METHODS else "-"
        ax1.plot(Ks, [1e3 * r["wall_median"] for r in rs], style, marker="o", label=LABELS[m])
        if not any(r.get("shared_process") for r in rs):
            ax2.plot(Ks, [r["peak_rss"] / 2**20 for r in rs], style, marker="o", label=LABELS[m])
    rs = sorted((r for r in results if r.get("method") == "ar_softmax" and "param_bytes" in r),
                key=lambda r: r["K"])
    if rs:
        ax2.plot([r["K"] for r in rs], [(r["param_bytes"] + r["state_bytes"]) / 2**20 for r in rs],
                 ":", color="k", label="A&R params + optimizer state")
    for ax in (ax1, ax2):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of classes K")
        ax.grid(True, which="both", alpha=0.3)
    ax1.set_ylabel("seconds per step x 1000 (median, wall clock)")
    ax2.set_ylabel("peak resident set (MiB)")
    ax1.set_title(f"Step time, D={a.D}, B={a.B}, {a.S} shared negatives, 1 thread")
    ax2.set_title("Peak memory (fresh process per point)")
    ax1.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

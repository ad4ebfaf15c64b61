"""Next-word prediction on the Brown corpus: early stopping on validation, best test
log-likelihood and the CPU time to reach it.

Data: ``pyro_ar.datasets.load_brown(num_valid_docs=25)`` -- bigram pairs (previous word,
next word) from the POS-tagged Brown corpus, 425 training / 25 validation / 50 test
documents (seed 0; the test documents are those of the default 450 / 50 split), vocabulary
K = 25,275 (words seen twice in the 425 training documents + ``<unk>`` + the sentence
boundary); 1,035,609 training, 60,674 validation and 122,249 test pairs.

Model: log-bilinear bigram, psi_k(u) = e_u . w_k + b_k, D = 64, learned context and output
embeddings (``pyro_ar.models.BigramLanguageModel``); all methods start from the same
initialisation (embeddings N(0, 0.1^2); biases at the unigram fit of each noise,
``pyro_ar.models.unigram_biases``: the smoothed log unigram frequencies for the softmax family,
their ``Noise.marginal_offsets`` for probit / logistic), minibatch B = 512.

Methods (each in its own process, one torch thread, run concurrently):

* ``ar_softmax``  -- A&R softmax through stock ``pyro.infer.SVI``: ``GumbelLocalGuide``
  (eta_n per bigram, natural step rho = (1 + visits)^-0.9) + ``ClosedFormELBO``, shared
  negatives drawn from q(k) proportional to (train count + 1)^0.75 (``--power``) with
  weights 1/(s q), the label's draws dropped (``strategy="importance"``), ``lazy_adam``;
* ``exact``       -- exact softmax as a user writes it in plain PyTorch
  (``benchmarks/plain_loop.py``: ``F.cross_entropy`` over all K logits, dense
  ``torch.optim.Adam``); the library's exact path is no slower per step (same file);
* ``adaptive``    -- PyTorch's adaptive softmax (Grave et al. 2017), the tool PyTorch users
  pick for large vocabularies: the same context embedding, ``nn.AdaptiveLogSoftmaxWithLoss``
  as the output layer (``benchmarks/plain_loop.py``: ``AdaptiveSoftmaxBigram``; cutoffs
  ``--cutoffs``, by default the ranks covering 80 % and 95 % of the training tokens,
  ``plain_loop.frequency_cutoffs``; ``--div-value`` 4), SparseAdam for the context rows and
  Adam for the output layer at ``--adaptive-lr``; evaluated exactly over all K classes (its
  ``log_prob``: a normalised distribution);
* ``ove``         -- OVE bound (Titsias 2016), the same negatives and optimizer;
* ``botev``       -- sampled softmax (Botev et al. 2017; the importance weights make it the
  usual log-q-corrected sampled softmax), the same negatives and optimizer;
* ``ar_probit`` / ``ar_logistic`` -- A&R with Normal / Logistic noise, the library's default
  local guide ``ConditionalLocalGuide`` (q(eps_n | psi_n) refitted at every step on its own
  class subsample, ``--oversample`` times the negatives or ``--local-negatives`` classes;
  ``--local-fit gaussian``: a Gaussian q instead of the default Gumbel; ``--local-guide noise``: the
  per-datapoint ``NoiseLocalGuide`` with its own step size ``--local-lr``); their test log-likelihood is the model's own marginal by quadrature
  (O(K) nodes per test pair), so it is computed at the end only, on a fixed random subset of
  test pairs (``--quad-pairs``); they run without early stopping (no validation LL).
  ``--curve-pairs N``: every method's log-likelihood on the first N of those pairs at every
  evaluation too (the learning curves of probit / logistic; evaluation time is excluded).

Ablations (``--methods``): ``ar_softmax_uniform`` (uniform shared negatives) and
``ar_softmax_global`` (the gradient step at the current eta, then the eta step).

Training: ``pyro_ar.infer.train`` (the library's one loop) on the CPU clock of the worker
(``time.process_time``, one thread: robust to the machine's load), evaluations at fixed
CPU times (evaluation excluded), ``EarlyStopping`` on the validation log-likelihood
(``--patience`` evaluations; the best evaluation's parameters are restored), a cap of
``--budget`` CPU seconds. Evaluation: exact log-likelihood per pair (log-softmax over all K
classes, the normaliser once per distinct previous word) on the validation and test pairs.
Reported per method: its best validation point, the test log-likelihood there (its honest
best: chosen on validation) and the CPU time; exact softmax's best test LL L* (at its best
validation point), the CPU time each method's test LL first reaches L* (linear
interpolation between evaluations) and exact's time over it.

    python -m benchmarks.brown [--quick] [--budget SECONDS] [--patience 4] [--device cpu|cuda] [--out DIR]

``--quick`` (about a minute): 5 s caps (probit / logistic 3 s), 2,000 evaluation pairs. Writes
``brown[_quick].json`` and ``.png`` to ``--out``.
"""

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile

from benchmarks import harness

SOFTMAX_FAMILY = ["ar_softmax", "exact", "ove", "botev", "adaptive"]
OTHER_NOISE = ["ar_probit", "ar_logistic"]
LABELS = {
    "ar_softmax": "A&R softmax (Pyro, closed form)",
    "ar_softmax_uniform": "A&R softmax, uniform shared negatives",
    "ar_softmax_global": "A&R softmax, gradient step before the eta step",
    "exact": "exact softmax (F.cross_entropy + Adam)",
    "adaptive": "adaptive softmax (torch AdaptiveLogSoftmax)",
    "ove": "OVE (Pyro)",
    "botev": "sampled softmax / Botev (Pyro)",
    "ar_probit": "A&R probit (Pyro)",
    "ar_logistic": "A&R logistic (Pyro)",
}


# --------------------------------------------------------------------------- evaluation
def grouped_log_softmax_ll(E, W, b, prev, nxt, chunk=256):
    """Exact mean log p(next | prev) for psi = E[prev] W^T + b: the library's evaluation with
    ``rows=prev``, which computes the normaliser once per distinct previous word."""
    from pyro_ar.evaluation import linear_source, log_likelihood

    return log_likelihood(linear_source(E, W, b), nxt, rows=prev, chunk_size=chunk)


# --------------------------------------------------------------------------- methods
from benchmarks.plain_loop import AdaptiveSoftmaxBigram  # noqa: E402  (PyTorch's adaptive softmax)
from benchmarks.plain_loop import PlainExactBigram as ExactTorch  # noqa: E402  (the plain user loop)
from pyro_ar.models import Init


class PyroBigram(harness.SVIMethod):
    """BigramLanguageModel + SVI for A&R (any noise) and the subsampled baselines."""

    def __init__(self, method, K, D, x, y, B, lr, init_bias, counts, negatives, strategy, device,
                 local_first=True, local_lr=0.05, power=0.75, local_step="natural",
                 local_guide="conditional", oversample=None, local_negatives=None, refine_steps=None,
                 local_fit=None):
        import pyro
        from pyro.infer import Trace_ELBO

        from pyro_ar.infer import default_elbo, default_guide
        from pyro_ar.likelihoods import AR, OVE, Sampled
        from pyro_ar.models import BigramLanguageModel, unigram_biases
        from pyro_ar.negatives import ImportanceNegatives, SharedNegatives
        from pyro_ar.optim import lazy_adam

        noise = {"ar_probit": "normal", "ar_logistic": "logistic"}.get(method, "gumbel")
        # count^power, smoothed by 1 so that no class has probability 0 (Vocabulary.proposal)
        proposal = (counts.double().to(device) + 1) ** power if strategy == "importance" else None
        negs = ImportanceNegatives(negatives, proposal) if strategy == "importance" else SharedNegatives(negatives)
        # the method's likelihood object, its negatives the sampler (the baselines are softmax models)
        likelihood = {"botev": Sampled, "ove": OVE}[method](negs) if method in ("botev", "ove") else AR(noise, negs)
        pyro.clear_param_store()
        # biases start at the unigram fit of each noise (pyro_ar.models.unigram_biases): the
        # log frequencies for softmax, Noise.marginal_offsets of them for the others (probit:
        # about 0.25 x the log frequencies; that scaling itself starts 0.18 nats lower on test,
        # [claim brown-probit])
        c = harness.timer().start()
        bias = init_bias if noise == "gumbel" else unigram_biases(counts, noise).float().to(device)
        self.init_seconds = c.cpu
        self.model = BigramLanguageModel(K, D, likelihood=likelihood, subsample_size=B, init=Init(bias=bias))
        elbo = default_elbo() if isinstance(likelihood, AR) else Trace_ELBO()
        if likelihood.noise.closed_form:
            guide = default_guide(self.model, local_first=local_first, local_step=local_step)
            optim = lazy_adam({"lr": lr})
        elif local_guide == "conditional":  # no local parameters: q refitted at every step
            fit = dict({"refine_steps": refine_steps} if refine_steps else {}, **({"fit": local_fit} if local_fit else {}))
            kw = dict({"oversample": oversample} if oversample else {}, **fit)
            if local_negatives:  # the local fit's own class subsample T, drawn like S
                kw = {"negatives": ImportanceNegatives(local_negatives, proposal) if strategy == "importance"
                      else SharedNegatives(local_negatives), "oversample": 1, **fit}
            guide = default_guide(self.model, **kw)
            optim = lazy_adam({"lr": lr})
        else:
            # q(eps_n) starts near the noise's (1 - 1/K) quantile (the observed class's noise
            # must beat K - 1 others), and the local parameters get their own step size
            from scipy.stats import norm

            init_loc = float(norm.isf(1.0 / K)) if noise == "normal" else math.log(K - 1)
            guide = default_guide(self.model, local="noise", init_loc=init_loc)
            optim = lazy_adam(lambda name: {"lr": local_lr if "y_eps" in name else lr})
        super().__init__(self.model, guide, optim, elbo, x, y)

    def evaluate(self, prev, nxt, reduce="mean"):
        if not self.model.noise.closed_form:
            return None  # quadrature: at the end only, on a subset
        return self.model.log_likelihood(prev, nxt, reduce=reduce)

    def log_likelihood_pairs(self, prev, nxt, num_nodes=33):
        if self.model.noise.closed_form:
            return self.model.log_likelihood(prev, nxt)
        vals = [self.model.noise.log_marginal(self.model.utility(prev[i:i + 8]).full(), nxt[i:i + 8],
                                              num_nodes=num_nodes) for i in range(0, prev.shape[0], 8)]
        import torch

        return torch.cat(vals).mean().item()


def _checkpoints(budget, n, every=None):
    """Training-time checkpoints (s): a few early ones, then every budget/n (or ``every`` s)."""
    pts = [t for t in (1, 2, 5, 10, 20, 40, 80) if t < budget / 4] if n >= 10 or every else []
    step = every or budget / n
    pts += [step * i for i in range(1, int(budget / step) + 1)]
    return sorted(set(round(p, 3) for p in pts if p > 0))


def worker(a):
    import torch

    torch.set_num_threads(1)
    import pyro

    pyro.set_rng_seed(a.seed)
    data = torch.load(a.data)
    dev = torch.device(a.device)
    x, y = data["x_train"].to(dev), data["y_train"].to(dev)
    xt, yt = data["x_test"].to(dev), data["y_test"].to(dev)
    xv, yv = data["x_valid"].to(dev), data["y_valid"].to(dev)
    if a.eval_pairs and a.eval_pairs < xt.shape[0]:  # a fixed random subset
        keep = torch.randperm(xt.shape[0], generator=torch.Generator().manual_seed(99))[: a.eval_pairs]
        xt, yt = xt[keep], yt[keep]
    if a.eval_pairs and a.eval_pairs < xv.shape[0]:
        keep = torch.randperm(xv.shape[0], generator=torch.Generator().manual_seed(98))[: a.eval_pairs]
        xv, yv = xv[keep], yv[keep]
    counts = data["counts"]
    K = int(counts.shape[0])
    from pyro_ar.infer import train
    from pyro_ar.models import unigram_log_probs

    init_bias = unigram_log_probs(counts).float().to(dev)
    lr = a.lr
    if a.method == "exact":
        m = ExactTorch(K, a.D, x, y, a.B, lr, init_bias, dev)
    elif a.method == "adaptive":
        cutoffs = [int(c) for c in a.cutoffs.split(",")] if a.cutoffs else None
        m = AdaptiveSoftmaxBigram(K, a.D, x, y, a.B, lr, init_bias, counts, cutoffs=cutoffs,
                                  div_value=a.div_value, sparse=not a.adaptive_dense, device=dev)
    else:
        strategy = "shared" if a.method == "ar_softmax_uniform" else a.strategy
        method = "ar_softmax" if a.method in ("ar_softmax_uniform", "ar_softmax_global") else a.method
        m = PyroBigram(method, K, a.D, x, y, a.B, lr, init_bias, counts, a.negatives, strategy, dev,
                   local_first=not (a.global_first or a.method == "ar_softmax_global"),
                   local_lr=a.local_lr, power=a.power, local_step=a.local_step,
                   local_guide=a.local_guide, oversample=a.oversample, local_negatives=a.local_negatives,
                   refine_steps=a.refine_steps, local_fit=a.local_fit)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    # fixed subset of test pairs for the quadrature log-likelihoods (and the same pairs exactly)
    sub = torch.randperm(xt.shape[0], generator=torch.Generator().manual_seed(1234))[: a.quad_pairs].to(dev)
    curve = sub[: a.curve_pairs] if a.curve_pairs else None

    class Stepper:  # what pyro_ar.infer.train drives: .step() -> loss (SVI or the plain torch loop)
        def step(self):
            loss = m.step()
            sync()
            return loss

    best_pairs = {"valid_ll": -math.inf, "test_lls": None}  # per test pair, at the best validation point

    def evaluate():
        t0 = harness.timer().start()
        lls = m.evaluate(xt, yt, reduce="none")
        ll = None if lls is None else lls.mean().item()
        vll = m.evaluate(xv, yv)
        if vll is not None and vll > best_pairs["valid_ll"]:
            best_pairs.update(valid_ll=vll, test_lls=lls)
        extra = {} if curve is None else dict(curve_ll=m.log_likelihood_pairs(xt[curve], yt[curve]))
        return dict(extra, test_ll=ll, valid_ll=float("nan") if vll is None else vll,
                    perplexity=None if ll is None else math.exp(-ll), eval_seconds=t0.wall)

    # the library's training loop: a wall-clock budget, evaluations at the training times of
    # the checkpoints (evaluation time excluded), the loss averaged between evaluations
    step_times = []
    # (CPU clock of this process, one thread: robust to the load of the machine) and early
    # stopping on the validation log-likelihood (the best evaluation's parameters restored)
    from pyro_ar.infer import EarlyStopping

    # (probit/logistic have no validation log-likelihood during training: no early stopping)
    stop = EarlyStopping("valid_ll", patience=a.patience) if a.patience and a.method not in OTHER_NOISE else None
    history = train(Stepper(), num_steps=10**12, time_budget=a.budget, eval_fn=evaluate,
                    eval_times=_checkpoints(a.budget, a.checkpoints, a.eval_every), eval_every=10**12,
                    step_times=step_times, clock="process", early_stopping=stop,
                    progress="lines")  # a line per evaluation; the driver relays it (_collect)
    hist = [dict(step=r["step"], time=r["time"], wall_time=r["wall_time"], cpu_time=r["cpu_time"],
                 test_ll=r["test_ll"], valid_ll=r["valid_ll"],
                 perplexity=r["perplexity"], loss=None if r["step"] == 0 else r["loss"],
                 eval_seconds=r["eval_seconds"], **({"curve_ll": r["curve_ll"]} if curve is not None else {}))
            for r in history]
    valid = [h for h in hist if h["valid_ll"] == h["valid_ll"]]  # not NaN
    best = max(valid, key=lambda h: h["valid_ll"]) if valid else None
    step = hist[-1]["step"]
    t0 = harness.timer().start()
    sub_ll = m.log_likelihood_pairs(xt[sub], yt[sub]) if a.quad_pairs else None
    out = dict(method=a.method, history=hist, steps=step, best=best,
               stopped_early=bool(stop and stop.stopped),
               step_time_median=statistics.median(step_times[len(step_times) // 10:]) if step_times else None,
               final_test_ll=hist[-1]["test_ll"], subset_test_ll=sub_ll, subset_pairs=a.quad_pairs,
               subset_eval_seconds=t0.wall, lr=lr, negatives=a.negatives,
               init_seconds=getattr(m, "init_seconds", None), curve_pairs=a.curve_pairs,
               strategy=a.strategy if a.method not in ("exact", "adaptive", "ar_softmax_uniform") else
               ("shared" if a.method == "ar_softmax_uniform" else None), budget=a.budget)
    if a.method == "adaptive":
        out.update(negatives=None, cutoffs=m.cutoffs, div_value=a.div_value, sparse=m.sparse)
    if best_pairs["test_lls"] is not None:  # for paired standard errors between methods (same pairs)
        out["best_test_lls"] = [round(v, 5) for v in best_pairs["test_lls"].tolist()]
    print("RESULT " + json.dumps(out), flush=True)


# --------------------------------------------------------------------------- driver
def _launch(method, a, data_path, lr):
    cmd = harness.module_command(__spec__.name) + ["--worker", method, "--data", data_path,
           "--budget", str(a.other_budget if method in OTHER_NOISE else
                           getattr(a, "exact_budget", None) or a.budget if method == "exact" else a.budget),
           "--device", a.device, "--D", str(a.D), "--B", str(a.B), "--negatives", str(a.negatives),
           "--strategy", a.strategy, "--lr", str(lr), "--seed", str(a.seed),
           "--quad-pairs", str(a.quad_pairs), "--checkpoints", str(a.checkpoints),
           "--eval-pairs", str(a.eval_pairs), "--local-lr", str(a.local_lr), "--power", str(a.power),
           "--patience", str(a.patience), "--eval-every", str(a.eval_every or 0),
           "--local-step", a.local_step, "--local-guide", a.local_guide, "--oversample", str(a.oversample or 0),
           "--local-negatives", str(a.local_negatives or 0), "--curve-pairs", str(a.curve_pairs or 0),
           "--refine-steps", str(a.refine_steps or 0)] + (["--local-fit", a.local_fit] if a.local_fit else []) \
        + (["--global-first"] if a.global_first else [])
    cmd += ["--adaptive-lr", str(a.adaptive_lr), "--div-value", str(a.div_value)] \
        + (["--cutoffs", a.cutoffs] if a.cutoffs else []) + (["--adaptive-dense"] if a.adaptive_dense else [])
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=harness.worker_env())


def _collect(procs, file=None):
    """``{label: result}`` of the running workers ``{label: Popen}``. While they run, each
    worker's progress lines (``train(progress="lines")``: step, CPU s, loss, validation and
    test log-likelihood) are relayed to ``file`` (default stdout) as they come, prefixed with
    its label; its ``RESULT`` line is its result, and a worker without one failed (the
    error is its last stderr line)."""
    import threading

    file = file or sys.stdout
    lock, outputs, errors = threading.Lock(), {m: [] for m in procs}, {m: [] for m in procs}

    def read(label, stream, lines, relay):
        for line in stream:
            lines.append(line)
            if relay and not line.startswith("RESULT "):
                with lock:
                    print(f"  [{label}] {line.rstrip()}", file=file, flush=True)

    threads = [threading.Thread(target=read, args=(m, p.stdout, outputs[m], True), daemon=True)
               for m, p in procs.items()]
    threads += [threading.Thread(target=read, args=(m, p.stderr, errors[m], False), daemon=True)
                for m, p in procs.items()]
    for t in threads:
        t.start()
    for p in procs.values():
        p.wait()
    for t in threads:
        t.join()
    results = {}
    for method in procs:
        res = None
        for line in outputs[method]:
            if line.startswith("RESULT "):
                res = json.loads(line[7:])
        if res is None:
            err = "".join(errors[method])
            sys.stderr.write(f"{method} failed:\n{err[-3000:]}\n")
            res = dict(method=method, error=(err.strip().splitlines() or ["?"])[-1])
        results[method] = res
    return results


def add_common_arguments(p):
    """The options shared by the driver, its workers and benchmarks/time_to_quality.py (``p`` is a
    :func:`benchmarks.harness.parser`: ``--quick``, ``--out``, ``--seed`` are there)."""
    p.add_argument("--device", default="cpu")
    p.add_argument("--D", type=int, default=64)
    p.add_argument("--B", type=int, default=512)
    p.add_argument("--negatives", type=int, default=256)
    p.add_argument("--strategy", default="importance", choices=["importance", "shared"])
    p.add_argument("--lr", type=float, default=None, help="lr of the Pyro methods (lazy Adam)")
    p.add_argument("--exact-lr", type=float, default=3e-3)
    p.add_argument("--ar-lr", type=float, default=None, help="lr of the A&R methods (default --lr)")
    p.add_argument("--adaptive-lr", type=float, default=3e-3, help="lr of adaptive softmax (Adam / SparseAdam)")
    p.add_argument("--cutoffs", default=None,
                   help="adaptive softmax cutoffs, e.g. 2000,10000 (default: the frequency ranks covering "
                        "80%% and 95%% of the training tokens)")
    p.add_argument("--div-value", type=float, default=4.0, help="adaptive softmax: tail dimension divisor")
    p.add_argument("--adaptive-dense", action="store_true",
                   help="adaptive softmax: one dense Adam (default: SparseAdam for the context rows)")
    p.add_argument("--local-lr", type=float, default=0.05,
                   help="lazy-Adam lr of the probit/logistic local parameters (mu_n, sigma_n)")
    p.add_argument("--global-first", action="store_true",
                   help="A&R softmax: gradient step before the eta step (default: Algorithm 1, eta first)")
    p.add_argument("--local-guide", default="conditional", choices=["conditional", "noise"],
                   help="probit/logistic: ConditionalLocalGuide (default) or NoiseLocalGuide")
    p.add_argument("--oversample", type=int, default=0,
                   help="probit/logistic, conditional guide: its class subsample = this many times "
                        "the negatives (0: the guide's default)")
    p.add_argument("--local-negatives", type=int, default=32,
                   help="probit/logistic, conditional guide: its class subsample T has this many "
                        "classes, drawn like the model's negatives (default 32: 41 ms per probit "
                        "step against 186 ms with T = the 256 negatives; 0: --oversample x the negatives)")
    p.add_argument("--refine-steps", type=int, default=0,
                   help="probit/logistic, conditional guide: at most this many Gaussian Newton steps "
                        "of its local fit from the Laplace point (ConditionalLocalGuide(refine_steps=); "
                        "0: the guide's default, one step; 10: converged)")
    p.add_argument("--local-fit", default=None, choices=["gumbel", "gaussian", "laplace"],
                   help="probit/logistic, conditional guide: the family of its q (ConditionalLocalGuide(fit=); "
                        "default the guide's, a Gumbel)")
    p.add_argument("--local-step", default="natural", choices=["natural", "gradient"],
                   help="A&R softmax: eta_n by its closed-form natural step or by the optimizer")
    p.add_argument("--power", type=float, default=0.75, help="proposal exponent: (count + 1)^power")
    p.add_argument("--patience", type=int, default=4,
                   help="early stopping: evaluations without a better validation LL (0: off)")
    p.add_argument("--eval-every", type=float, default=None, help="CPU seconds between evaluations")
    p.add_argument("--curve-pairs", type=int, default=0,
                   help="log-likelihood on the first N of the --quad-pairs pairs at every evaluation "
                        "(quadrature for probit / logistic: their learning curves; 0: off)")
    p.add_argument("--worker", default=None)
    p.add_argument("--data", default=None)


def lr_option(method):
    """The name of the option that holds ``method``'s step size (``exact_lr``, ``adaptive_lr``,
    ``ar_lr`` for the A&R methods, ``lr`` for the other Pyro methods)."""
    return {"exact": "exact_lr", "adaptive": "adaptive_lr"}.get(method, "ar_lr" if method.startswith("ar_") else "lr")


def run_methods(a, methods, data):
    """Train ``methods`` in concurrent worker processes (one thread each) on ``data`` (a dict
    of tensors: x/y_train, x/y_valid, x/y_test, counts); ``{method: result}``. A method may
    be a ``(label, method, args)`` triple (a variant with its own options). ``a.max_procs``
    (when set and positive) caps the workers running at once: the runs go in batches of that
    many, in order (a shared machine)."""
    import torch

    tmp = tempfile.NamedTemporaryFile(suffix=".pt", delete=False)
    torch.save(data, tmp.name)
    runs = [m if isinstance(m, tuple) else (m, m, a) for m in methods]
    results = {}
    try:
        for group in ([r for r in runs if r[1] not in OTHER_NOISE], [r for r in runs if r[1] in OTHER_NOISE]):
            n = getattr(a, "max_procs", None) or len(group) or 1
            for i in range(0, len(group), n):
                procs = {label: _launch(m, args, tmp.name, getattr(args, lr_option(m)))
                         for label, m, args in group[i:i + n]}
                results.update(_collect(procs))
    finally:
        os.unlink(tmp.name)
    return results


def paired_differences(ok, reference="ar_softmax"):
    """``{"<reference>_minus_<m>": {mean, se, pairs}}``: the difference of the best test
    log-likelihoods (each method at its best validation point) of ``reference`` and each other
    method, with its paired standard error over the test pairs (the same pairs for every
    method: ``std(d) / sqrt(n)`` of the per-pair differences d)."""
    import torch

    ref = ok.get(reference, {}).get("best_test_lls")
    out = {}
    for m, r in ok.items():
        if m == reference or ref is None or r.get("best_test_lls") is None:
            continue
        d = torch.tensor(ref, dtype=torch.float64) - torch.tensor(r["best_test_lls"], dtype=torch.float64)
        out[f"{reference}_minus_{m}"] = dict(mean=d.mean().item(), se=(d.std() / d.numel() ** 0.5).item(),
                                             pairs=d.numel())
    return out


def drop_pair_values(results):
    """Remove the per-pair test log-likelihoods from ``results`` (runs and chosen copies) before saving."""
    for r in results.values():
        r.pop("best_test_lls", None)


def summarize(ok, skip=OTHER_NOISE):
    """Each method's best validation point (its test LL there: the honest best) and the CPU
    time at which its test LL first reaches exact softmax's best (at exact's best validation
    point), with exact's time over it."""
    summary = {}
    for m, r in ok.items():
        if r.get("best"):
            summary[f"{m}_best"] = {k: r["best"][k] for k in ("step", "cpu_time", "valid_ll", "test_ll")}
    if "exact" in ok and ok["exact"].get("best"):
        target = ok["exact"]["best"]["test_ll"]
        t_ex = harness.time_to_reach(ok["exact"]["history"], target, "cpu_time")
        summary.update(exact_best_test_ll=target, exact_cpu_time_to_best=t_ex,
                       exact_stopped_early=ok["exact"].get("stopped_early"))
        for m in ok:
            if m == "exact" or m in skip:
                continue
            t_m = harness.time_to_reach(ok[m]["history"], target, "cpu_time")
            summary[f"{m}_cpu_time_to_exact_best"] = t_m
            summary[f"exact_over_{m}"] = t_ex / t_m if t_m and t_ex else None
    return summary


def print_table(ok, summary):
    print("\nmethod                                        steps  ms CPU/step  stop   best valid LL  "
          "test LL there  CPU s there  CPU s to exact's best  speed-up")
    for m, r in ok.items():
        b = r.get("best") or {}
        t = summary.get(f"{m}_cpu_time_to_exact_best", summary.get("exact_cpu_time_to_best") if m == "exact" else None)
        ratio = summary.get(f"exact_over_{m}", 1.0 if m == "exact" else None)
        fmt = lambda v, f: "-" if v is None or v != v else format(v, f)  # noqa: E731
        print(f"{LABELS.get(m, m):45s} {r['steps']:6d} {fmt(1e3 * (r['step_time_median'] or 0), '11.2f')} "
              f"{'early' if r.get('stopped_early') else 'cap':5s} {fmt(b.get('valid_ll'), '14.4f')} "
              f"{fmt(b.get('test_ll'), '14.4f')} {fmt(b.get('cpu_time'), '12.1f')} {fmt(t, '22.1f')} "
              f"{fmt(ratio, '8.1f')}")


def main(argv=None):
    p = harness.parser(__doc__, quick_help="5 s caps (probit / logistic 3 s), 2,000 evaluation pairs")
    p.add_argument("--budget", type=float, default=None, help="cap on the training CPU seconds per softmax-family method")
    p.add_argument("--other-budget", type=float, default=None, help="training CPU seconds for probit/logistic")
    p.add_argument("--methods", default=",".join(SOFTMAX_FAMILY + OTHER_NOISE))
    p.add_argument("--quad-pairs", type=int, default=None)
    p.add_argument("--checkpoints", type=int, default=None, help="evaluations over the budget")
    p.add_argument("--eval-pairs", type=int, default=None, help="test / validation pairs per evaluation (0: all)")
    add_common_arguments(p)
    a = p.parse_args(argv)
    if a.worker:
        a.method = a.worker
        return worker(a)
    a.budget = a.budget or (5.0 if a.quick else 900.0)
    a.other_budget = a.other_budget or (3.0 if a.quick else 300.0)
    a.quad_pairs = a.quad_pairs if a.quad_pairs is not None else (10 if a.quick else 200)
    a.checkpoints = a.checkpoints or (3 if a.quick else 20)
    a.eval_pairs = a.eval_pairs if a.eval_pairs is not None else (2_000 if a.quick else 0)
    a.lr = a.lr or 3e-3
    a.ar_lr = a.ar_lr or a.lr
    methods = a.methods.split(",")
    harness.start(a)

    from pyro_ar.datasets import load_brown

    t_start = harness.timer().start()
    d = load_brown(num_valid_docs=25)
    load = {"start": os.getloadavg()}
    print(f"Brown: K={d.num_classes}, {d.num_train} train / {d.info['x_valid'].shape[0]} validation / "
          f"{d.num_test} test pairs; D={a.D} B={a.B} negatives={a.negatives} ({a.strategy}); CPU cap "
          f"{a.budget:.0f} s (probit/logistic {a.other_budget:.0f} s), early stopping patience "
          f"{a.patience}; load average {load['start']}", flush=True)
    results = run_methods(a, methods, dict(x_train=d.x_train, y_train=d.y_train, x_valid=d.info["x_valid"],
                                           y_valid=d.info["y_valid"], x_test=d.x_test, y_test=d.y_test,
                                           counts=d.info["class_counts"]))
    elapsed = t_start.wall
    ok = {m: r for m, r in results.items() if "history" in r}
    summary = summarize(ok)
    summary["paired"] = paired_differences(ok)
    drop_pair_values(results)
    print_table(ok, summary)
    for m, r in ok.items():
        if r.get("subset_test_ll") is not None:
            print(f"  {m}: test LL on {a.quad_pairs} fixed pairs (quadrature for probit/logistic) "
                  f"{r['subset_test_ll']:.4f}")
    load["end"] = os.getloadavg()
    print(f"load average {load}; elapsed {elapsed:.0f} s")
    meta = dict(threads_per_worker=1, load_average=load, elapsed=elapsed,
                K=d.num_classes, num_train=d.num_train, num_test=d.num_test)
    path = harness.save(a, "brown", dict(meta=meta, results=results, summary=summary))
    _plot(ok, summary, path.with_suffix(".png"), a)
    return summary


def _plot(ok, summary, path, a, title="Brown bigram LM"):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    for ax, key, ylabel in ((axes[0], "test_ll", "test log-likelihood per pair (exact)"),
                            (axes[1], "valid_ll", "validation log-likelihood per pair (early stopping)")):
        for m, r in ok.items():
            hs = [h for h in r["history"] if h[key] is not None and h[key] == h[key]]
            if not hs:
                continue
            line, = ax.plot([max(h["cpu_time"], 0.5) for h in hs], [h[key] for h in hs], marker=".",
                            label=LABELS.get(m, m))
            if r.get("best"):
                ax.plot([max(r["best"]["cpu_time"], 0.5)], [r["best"][key]], marker="*", ms=12,
                        color=line.get_color())
        if key == "test_ll" and summary.get("exact_best_test_ll") is not None:
            ax.axhline(summary["exact_best_test_ll"], color="k", ls=":", lw=1,
                       label=f"exact's best = {summary['exact_best_test_ll']:.3f}")
        ax.set_xscale("log")
        ax.set_xlabel("training CPU time (s, one thread)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        lows = [h[key] for r in ok.values() for h in r["history"] if h[key] is not None and h[key] == h[key]]
        if lows:
            top = max(lows)
            ax.set_ylim(max(min(lows), top - 1.5), top + 0.05)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{title}, D={a.D}, B={a.B}, {a.negatives} negatives ({a.strategy}); stars: best "
                 "validation points")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()

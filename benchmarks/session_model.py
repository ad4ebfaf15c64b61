"""Session model (seeds/002 section 3, issue 13): RecoGym table, Brown sessions, per-step time.

(a) ``--part recogym``: the seed's setting. Organic sessions of the RecoGym simulator
    (``recogym`` 0.1.3.0, ``RecoEnv1`` with ``env_1_args``, 1,000 products, 200 training and
    1,000 test users; ``import recogym`` needs the shim ``scipy.rand = numpy.random.rand``
    and the env class instantiated directly, see :func:`recogym_sessions`); without the
    package, the re-implementation :func:`pyro_ar.datasets.make_recogym_sessions`. Each test
    session's views are split at random, 20% held out. Metrics: Recall@5, TDCG@5
    (:func:`pyro_ar.models.latent.session_metrics`), held-out log-likelihood (the MC
    predictive over q). Methods: Pop, ItemKNN (correlation with the last observed item),
    exact softmax with the reparameterisation trick (RT exact), Bouchard + encoder with the
    analytic bound (Bouch/AE) and with 200 sampled negatives (Bouch/AE/NS), A&R softmax; then
    at few negatives (``--few-negatives``, default 5% of the items, issue 27): Bouch/AE/NS and
    A&R with uniform shared negatives, and A&R with the minibatch's items added exactly
    (``ar-head``: :class:`pyro_ar.negatives.LabelHeadNegatives`).
(b) ``--part brown``: Brown sentences as sessions over the 26,101-word vocabulary, half of
    each held-out sentence's words held out; A&R vs Bouchard vs exact softmax at equal CPU time.
(c) ``--part timing``: per-step CPU time at P = 1,000 vs 100,000, paired in one process.
(e) ``--part longrun``: issue 27's long run: the Brown sessions of (b) (26,101 words, 20,000 /
    1,000 sentences), one A&R fit (``--long-method``, ``--long-negatives`` <= 100 drawn from the
    unigram^0.75 proposal) for ``--long-steps`` (25,000) steps of 64 sessions, held-out
    log-likelihood and Recall@5 every ``--long-eval-every`` (2,500) steps, with ``train``'s
    loss check and a drift check on the held-out log-likelihood
    (:func:`benchmarks.harness.watched_train`; the uniform distribution, :math:`-\\log P`, as
    its floor); ``--long-weights`` / ``--long-prior-scale`` (default: the model's MAP item
    embeddings), ``--long-method rt-exact`` (the exact-softmax control), ``--seed`` (the fit's),
    ``--long-swap`` (which parameters lose the held-out LL after its best evaluation).
(d) ``--part drift``: issue 27's setting (P = 1,500, 300 / 300 simulated sessions, ``--drift-seed``,
    Q = 8): held-out Recall@5 and log-likelihood every 600 steps up to 2,400, exact softmax vs
    A&R at 60 uniform negatives, at 60 + the minibatch's items, and at 200.

Usage::

    python -m benchmarks.session_model [--quick] [--part recogym|brown|timing|drift|longrun|all] [--out DIR]

``--quick``: 30 (recogym) and 100 (drift) steps per fit, 3 CPU s per method on 1,000 Brown
sentences, timing at P = 1,000 vs 10,000 with 5 repeats, 200 long-run steps on 1,000 sentences. Prints tables; writes
session_model[_quick].json to ``--out``.
"""

import copy
import functools
import os
import pickle
import tempfile

import numpy as np
import torch

import pyro
from pyro.infer import SVI

from benchmarks import harness
from pyro_ar.datasets import (SessionData, load_brown_sessions, make_recogym_sessions,
                              pad_sessions, split_sessions)
from pyro_ar.infer import default_elbo, default_guide, train
from pyro_ar.likelihoods import AR, Bouchard, Exact
from pyro_ar.models import CategoricalLatentModel, unigram_log_probs
from pyro_ar.models.latent import session_metrics
from pyro_ar.negatives import ImportanceNegatives, LabelHeadNegatives, SharedNegatives
from pyro_ar.optim import lazy_adam
from pyro_ar.models import Init


def recogym_sessions(num_products=1000, num_train=200, num_test=1000, seed=0, cache=None) -> SessionData:
    """Organic sessions of the real RecoGym simulator, or None (with the error printed)."""
    if cache and os.path.exists(cache):
        with open(cache, "rb") as f:
            return pickle.load(f)
    try:
        import scipy
        scipy.rand = np.random.rand  # recogym.agents imports scipy.rand (removed from SciPy)
        from recogym import env_1_args
        from recogym.envs.reco_env_v1 import RecoEnv1
    except Exception as e:  # noqa: BLE001 -- report whatever stops the import
        print(f"RecoGym unavailable ({type(e).__name__}: {e}); using make_recogym_sessions")
        return None
    args = dict(env_1_args, num_products=num_products, random_seed=seed)
    env = RecoEnv1()
    env.init_gym(args)
    logs = env.generate_logs(num_train + 3 * num_test)
    organic = logs[logs["z"] == "organic"]
    users = [g["v"].astype(int).tolist() for _, g in organic.groupby("u", sort=True)]
    train_s = users[:num_train]
    test_s = [s for s in users[num_train:] if len(s) >= 2][:num_test]
    train = pad_sessions(train_s)
    observed, heldout = split_sessions(pad_sessions(test_s), 0.2, seed)
    data = SessionData(train, observed, heldout, num_products,
                       torch.bincount(train[train >= 0], minlength=num_products), None,
                       {"name": "recogym-0.1.3.0", "seed": seed})
    if cache:
        with open(cache, "wb") as f:
            pickle.dump(data, f)
    return data


# ------------------------------------------------------------------------------ baselines
def pop_scores(data):
    logp = (data.item_counts.double() + 0.5).log()
    return lambda obs: logp.expand(len(obs), -1)


def itemknn_scores(data):
    """Correlation of item occurrence across training sessions, row of the last observed item."""
    P, U = data.num_items, len(data.train)
    X = torch.zeros(U, P, dtype=torch.float64)
    rows = torch.arange(U).unsqueeze(-1).expand_as(data.train)[data.train >= 0]
    X.index_put_((rows, data.train[data.train >= 0]), torch.ones(len(rows), dtype=torch.float64), accumulate=True)
    X = X - X.mean(0)
    cov = X.T @ X
    sd = cov.diagonal().clamp(min=1e-12).sqrt()
    corr = cov / sd / sd.unsqueeze(-1)

    def scores(obs):
        last = obs.gather(1, ((obs >= 0).sum(1, keepdim=True) - 1).clamp(min=0)).squeeze(1)
        return corr[last]
    return scores


# ------------------------------------------------------------------------------ latent models
def make_model(method, P, Q, subsample, negatives, hidden=64, prefix="", counts=None, weights=None,
               prior_scale=None):
    """The latent model of ``method``; with item ``counts``: unigram-initialised offsets and
    importance-sampled negatives (proposal counts^0.75) for the subsampled likelihoods;
    ``weights`` (``"mle"`` or ``"map"``) and ``prior_scale`` of the item embeddings: None for
    the model's defaults."""
    sampler = SharedNegatives(negatives) if counts is None else \
        ImportanceNegatives(negatives, (counts.double() + 1) ** 0.75)
    lik = {"rt-exact": lambda: Exact(),
           "bouch-ae": lambda: Bouchard("local", SharedNegatives(None)),
           "bouch-ae-ns": lambda: Bouchard("local", sampler),
           "ar": lambda: AR(negatives=sampler),
           "ar-head": lambda: AR(negatives=LabelHeadNegatives(sampler))}[method]()
    bias = None if counts is None else unigram_log_probs(counts).float()
    prior = {k: v for k, v in (("weights", weights), ("prior_scale", prior_scale)) if v is not None}
    return CategoricalLatentModel(P, Q, lik, subsample_size=subsample, hidden_dim=hidden, prefix=prefix,
                                  site=prefix + "v", init=Init(bias=bias), **prior)


def fit(method, data, Q, steps, subsample, negatives, lr, time_budget=None, seed=0, counts=None):
    pyro.clear_param_store()
    torch.manual_seed(seed)
    model = make_model(method, data.num_items, Q, subsample, negatives, counts=counts)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    hist = train(svi, data.train, num_steps=steps, time_budget=time_budget, clock="process",
                 eval_at_start=False, eval_every=max(steps, 1), divergence=False)
    return model, hist[-1]


def part_recogym(args, out):
    cache = os.path.join(tempfile.gettempdir(), "recogym_sessions_seed0.pkl")
    t0 = harness.timer().start()
    data = recogym_sessions(cache=cache) or make_recogym_sessions(seed=0)
    print(f"data: {data.info['name']}: {len(data.train)} train / {len(data.test_observed)} test sessions, "
          f"P = {data.num_items}, {int((data.train >= 0).sum())} training views ({t0.wall:.0f} s)")
    rows = {"pop": session_metrics(pop_scores(data), data.test_observed, data.test_heldout),
            "itemknn": session_metrics(itemknn_scores(data), data.test_observed, data.test_heldout)}
    rows["itemknn"]["log_lik"] = float("nan")
    steps = 30 if args.quick else args.steps
    few = args.few_negatives or max(1, data.num_items // 20)  # <= 5% of the items (issue 27)
    runs = [("rt-exact", 200), ("bouch-ae", 200), ("bouch-ae-ns", 200), ("ar", 200),
            ("bouch-ae-ns", few), ("ar", few), ("ar-head", few)]
    for method, negatives in runs:
        model, last = fit(method, data, args.latent_dim, steps, 50, negatives, args.lr)
        m = model.evaluate_sessions(data.test_observed, data.test_heldout, num_samples=16)
        m.update(train_cpu_s=last["cpu_time"], steps=last["step"], negatives=negatives)
        rows[method if negatives == 200 or method == "ar-head" else f"{method}-{negatives}"] = m
    print(f"\n(a) {data.info['name']}, Q = {args.latent_dim}, {steps} steps of 50 sessions")
    print(f"{'method':<12} {'Recall@5':>9} {'TDCG@5':>8} {'held-out LL':>12} {'CPU s':>7}")
    for k, m in rows.items():
        print(f"{k:<15} {m['recall']:9.3f} {m['tdcg']:8.3f} {m['log_lik']:12.3f} {m.get('train_cpu_s', 0):7.1f}")
    out["recogym"] = {"data": data.info, "rows": rows, "latent_dim": args.latent_dim, "steps": steps}


def part_drift(args, out):
    """Issue 27's setting: P = 1,500, 300 / 300 sessions, Q = 8, lr 0.02, held-out metrics at
    600 and 2,400 steps (evaluated every 600), exact softmax vs A&R at 60 uniform negatives, at
    60 + the minibatch's items, and at 200; the popularity baseline."""
    data = make_recogym_sessions(num_products=1500, num_train=300, num_test=300, seed=args.drift_seed)
    rows = {"pop": session_metrics(pop_scores(data), data.test_observed, data.test_heldout)}
    steps = 100 if args.quick else 2400
    for method, negatives in (("rt-exact", 60), ("ar", 60), ("ar-head", 60), ("ar", 200)):
        pyro.clear_param_store()
        torch.manual_seed(0)
        model = make_model(method, 1500, 8, 50, negatives, hidden=32)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.02}), default_elbo())
        hist = train(svi, data.train, num_steps=steps, eval_every=min(600, steps), eval_at_start=False, clock="process",
                     divergence=False, eval_fn=lambda: model.evaluate_sessions(
                         data.test_observed, data.test_heldout, num_samples=16))
        key = method if method == "rt-exact" else f"{method}-{negatives}"
        rows[key] = [{k: h[k] for k in ("step", "recall", "log_lik", "cpu_time")} for h in hist if "recall" in h]
    print(f"\n(d) issue 27: P = 1500, seed {args.drift_seed}; pop Recall@5 {rows['pop']['recall']:.3f}, "
          f"held-out LL {rows['pop']['log_lik']:.3f}")
    print(f"{'method':<12} {'step':>5} {'Recall@5':>9} {'held-out LL':>12} {'CPU s':>7}")
    for k, hist in rows.items():
        for h in hist if isinstance(hist, list) else []:
            print(f"{k:<12} {h['step']:5d} {h['recall']:9.3f} {h['log_lik']:12.3f} {h['cpu_time']:7.1f}")
    out["drift"] = {"rows": rows, "seed": args.drift_seed, "steps": steps}


def part_brown(args, out):
    n_train, n_test = (1000, 100) if args.quick else (20000, 1000)
    data = load_brown_sessions(num_train=n_train, num_test=n_test, max_items=30)
    budget = 3.0 if args.quick else args.brown_budget
    print(f"\n(b) Brown sentences: {len(data.train)} train / {len(data.test_observed)} test, P = {data.num_items}, "
          f"{budget:.0f} CPU s each")
    rows = {}
    for method in ("ar", "ar-head", "bouch-ae-ns", "rt-exact"):
        model, last = fit(method, data, args.latent_dim, 10 ** 6, 64, 500, args.lr, time_budget=budget,
                          counts=data.item_counts)
        m = model.evaluate_sessions(data.test_observed, data.test_heldout, num_samples=8, chunk_size=64)
        m.update(steps=last["step"], train_cpu_s=last["cpu_time"])
        rows[method] = m
        print(f"{method:<12} steps {m['steps']:6d}  held-out LL {m['log_lik']:8.3f}  Recall@5 {m['recall']:.3f}")
    out["brown"] = {"rows": rows, "budget": budget, "num_train": n_train, "num_test": n_test}


def part_longrun(args, out):
    """(e): one fit on the Brown sessions for ``--long-steps`` steps at ``--long-negatives``,
    watched by :func:`benchmarks.harness.watched_train` (loss check, drift of the held-out LL);
    with ``--long-swap``, :func:`swap_attribution` at the end."""
    n_train, n_test = (1000, 100) if args.quick else (20000, 1000)
    steps, every = (200, 100) if args.quick else (args.long_steps, args.long_eval_every)
    data = load_brown_sessions(num_train=n_train, num_test=n_test, max_items=30)
    uniform = -float(np.log(data.num_items))
    pop = session_metrics(pop_scores(data), data.test_observed, data.test_heldout)
    pyro.clear_param_store()
    torch.manual_seed(args.seed)
    model = make_model(args.long_method, data.num_items, args.latent_dim, 64, args.long_negatives,
                       counts=data.item_counts, weights=args.long_weights, prior_scale=args.long_prior_scale)
    # training sessions split as the test ones: their held-out LL rising while the test's falls
    # is overfitting, both falling is the fit moving away from the likelihood's optimum
    n_fit = min(args.long_train_eval, len(data.train))
    fit_obs, fit_held = split_sessions(data.train[:n_fit], 0.5, args.seed) if n_fit else (None, None)
    best = {"log_lik": -float("inf"), "state": None, "step": None}

    def evaluate():
        rec = model.evaluate_sessions(data.test_observed, data.test_heldout, num_samples=8, chunk_size=64)
        if n_fit:
            rec["train_log_lik"] = model.evaluate_sessions(fit_obs, fit_held, num_samples=8, chunk_size=64)["log_lik"]
        if args.long_swap and rec["log_lik"] > best["log_lik"]:
            best.update(log_lik=rec["log_lik"], state=copy.deepcopy(pyro.get_param_store().get_state()))
        return rec
    svi = SVI(model, default_guide(model), lazy_adam({"lr": args.lr}), default_elbo())
    prior_scale = model.prior_scale if model.weights == "map" else None
    print(f"\n(e) Brown sessions, {len(data.train)} train / {len(data.test_observed)} test, P = {data.num_items}, "
          f"{args.long_method} at {args.long_negatives} negatives, {model.weights} weights"
          f"{f' (prior scale {prior_scale:g})' if prior_scale else ''}, {steps} steps of 64, lr {args.lr}, seed {args.seed} "
          f"(uniform: held-out LL {uniform:.3f}; popularity: {pop['log_lik']:.3f}, Recall@5 {pop['recall']:.3f})",
          flush=True)
    hist, flags = harness.watched_train(
        svi, data.train, monitor="log_lik", floor=uniform, drift_margin=args.drift_margin, num_steps=steps,
        eval_every=every, eval_at_start=False, clock="process", progress={"style": "lines", "desc": "longrun"},
        eval_fn=evaluate)
    keys = ("step", "recall", "log_lik", "train_log_lik", "loss", "cpu_time")
    curve = [{k: h[k] for k in keys if k in h} for h in hist if "recall" in h]
    print(f"{'step':>6} {'Recall@5':>9} {'held-out LL':>12} {'train-split LL':>15} {'CPU s':>8}")
    for h in curve:
        print(f"{h['step']:6d} {h['recall']:9.3f} {h['log_lik']:12.3f} {h.get('train_log_lik', float('nan')):15.3f} "
              f"{h['cpu_time']:8.1f}")
    print(f"diverged (loss check): {flags['diverged']}; drifted: {flags['drifted']}; below uniform at: "
          f"{flags['below_floor']}; best held-out LL {flags['best']:.3f} at step {flags['best_step']}")
    swap = None
    if args.long_swap and best["state"] is not None:
        swap = swap_attribution(model, data, best["state"], flags["best_step"])
    out["longrun"] = {"curve": curve, "flags": flags, "uniform_log_lik": uniform, "pop": pop,
                      "method": args.long_method, "weights": model.weights, "prior_scale": prior_scale,
                      "negatives": args.long_negatives, "seed": args.seed, "swap": swap,
                      "steps": steps, "eval_every": every, "lr": args.lr, "num_train": n_train, "num_test": n_test,
                      "num_items": data.num_items, "train_cpu_s": hist[-1]["cpu_time"] if hist else None}


def swap_attribution(model, data, best_state, best_step):
    """Which parameters lose the held-out LL after its best evaluation: the held-out LL and
    Recall@5 of the final fit with the item parameters (embeddings and offsets) or the
    encoder's put back to those of the best evaluation, the rest final."""
    store = pyro.get_param_store()
    final = copy.deepcopy(store.get_state())
    groups = {"items": lambda n: not n.startswith("posterior"), "encoder": lambda n: n.startswith("posterior")}
    rows = {}
    for name, members in (("final", lambda n: False), ("best items, final encoder", groups["items"]),
                          ("final items, best encoder", groups["encoder"]),
                          ("best", lambda n: True)):
        state = copy.deepcopy(final)
        for n in state["params"]:
            if members(n):
                state["params"][n] = best_state["params"][n]
        store.set_state(state)
        m = model.evaluate_sessions(data.test_observed, data.test_heldout, num_samples=8, chunk_size=64)
        rows[name] = {"log_lik": m["log_lik"], "recall": m["recall"]}
        print(f"swap: {name:<28} held-out LL {m['log_lik']:.3f}  Recall@5 {m['recall']:.3f}")
    store.set_state(final)
    return {"best_step": best_step, "rows": rows}


def part_timing(args, out):
    """Median CPU time of one step at P = 1e3 and 1e5 (``--quick``: 1e4), stepped alternately."""
    repeats = 5 if args.quick else 100
    large = 10_000 if args.quick else 100_000
    builders = {}
    # the full-sum Bouchard bound broadcasts a (B, T, P) term: 0.5 GB at P = 1e5, left out
    for method in ("ar", "bouch-ae-ns", "rt-exact"):
        steps = {}
        for P in (1000, large):
            items = torch.randint(0, P, (1000, 20), generator=torch.Generator().manual_seed(0))
            model = make_model(method, P, 20, 64, 100, prefix=f"P{P}_")
            svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
            steps[P] = functools.partial(svi.step, items)
        builders[method] = steps
    print(f"\n(c) per-step CPU time, B = 64 sessions x 20 items, Q = 20, 100 shared negatives, {repeats} "
          "interleaved repeats")
    res = harness.cost_ratio_table(builders, repeats, "P")
    out["timing"] = res


def main(argv=None):
    p = harness.parser(__doc__)
    p.add_argument("--part", default="all", choices=["recogym", "brown", "timing", "drift", "longrun", "all"])
    p.add_argument("--drift-seed", type=int, default=3, help="seed of the sessions of --part drift")
    p.add_argument("--latent-dim", type=int, default=20)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--few-negatives", type=int, default=None,
                   help="negatives of the few-negatives rows (default: 5%% of the items)")
    p.add_argument("--brown-budget", type=float, default=60.0)
    p.add_argument("--long-method", default="ar", choices=["ar", "ar-head", "rt-exact"],
                   help="--part longrun: A&R (its model sampler) or the exact softmax (the control)")
    p.add_argument("--long-negatives", type=int, default=100)
    p.add_argument("--long-steps", type=int, default=25000)
    p.add_argument("--long-weights", default=None, choices=["mle", "map"],
                   help="item weights of --part longrun (default: the model's)")
    p.add_argument("--long-prior-scale", type=float, default=None,
                   help="--part longrun: prior scale of the MAP item embeddings (default: the model's)")
    p.add_argument("--long-swap", action="store_true",
                   help="--part longrun: the held-out LL with the item parameters or the encoder of the best "
                        "evaluation put back (which part loses it)")
    p.add_argument("--long-train-eval", type=int, default=0,
                   help="--part longrun: also the held-out LL of this many training sessions (split as the test ones)")
    p.add_argument("--long-eval-every", type=int, default=2500)
    p.add_argument("--drift-margin", type=float, default=0.1,
                   help="nats below its best at which the long run's held-out LL counts as drifting")
    args = p.parse_args(argv)
    harness.start(args)
    pyro.enable_validation(False)
    out = {}
    for part, fn in (("recogym", part_recogym), ("timing", part_timing), ("brown", part_brown),
                     ("drift", part_drift), ("longrun", part_longrun)):
        if args.part in (part, "all"):
            fn(args, out)
    harness.save(args, "session_model", out)
    return out


if __name__ == "__main__":
    main()

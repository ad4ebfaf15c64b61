"""The step of ``LinearClassifier(D, K)`` with its constructor defaults, at K = 10^3 and 10^5
(issue 25, item 11: the default model must have a step that does not grow with K).

Two configurations, each stepped at both sizes by stock ``pyro.infer.SVI`` with the model's
``pyro_ar.infer.default_guide(model)`` / ``default_elbo()`` and :func:`pyro_ar.optim.lazy_adam`:

* ``old defaults`` -- the constructor defaults before issue 25, ``num_negatives=None``
  (every class in every step) and ``sparse=False`` (dense K x D gradients and Adam state);
* ``defaults`` -- ``LinearClassifier(D, K)`` as it is now (``num_negatives="auto"``: 20
  uniform negatives above K = 21; ``sparse=None``: row-sparse gradients when subsampled).

Steps alternate between the sizes in rounds (:func:`benchmarks.harness.paired_step_times`, one
torch thread, ``time.process_time``), so load changes hit both alike. Prints the median
milliseconds per step and the ratio K = 10^5 / K = 10^3 (target: about 1); the JSON goes to
``--out``. ``--quick``: 3 rounds, K = 10^3 and 10^4.

    python -m benchmarks.default_model [--rounds 10] [--N 64] [--D 32] [--out DIR] [--quick]
"""

from benchmarks import harness


def step_fn(K, D, N, seed, **model_kwargs):
    """One SVI step of ``LinearClassifier(D, K, **model_kwargs)`` on fixed random data (its
    own parameter names, so that several models share Pyro's param store)."""
    import torch
    from pyro.infer import SVI

    from pyro_ar.infer import default_elbo, default_guide
    from pyro_ar.models import LinearClassifier
    from pyro_ar.optim import lazy_adam

    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(N, D, generator=g), torch.randint(0, K, (N,), generator=g)
    tag = f"{'old' if model_kwargs else 'new'}{K}_"
    model = LinearClassifier(D, K, prefix=tag, site=tag + "y", **model_kwargs)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    return lambda: svi.step(x, y)


def main(argv=None):
    p = harness.parser(__doc__, quick_help="3 rounds, K = 10^3 and 10^4")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--N", type=int, default=64, help="rows (the full batch: no subsample_size)")
    p.add_argument("--D", type=int, default=32)
    p.add_argument("--small", type=int, default=1000)
    p.add_argument("--large", type=int, default=100_000)
    a = p.parse_args(argv)
    if a.quick:
        a.rounds, a.large = 3, 10_000
    harness.start(a)
    from pyro_ar.likelihoods import AR

    old = dict(likelihood=AR(), sparse=False)  # every class (num_negatives=None then)
    methods = {"old defaults": {K: step_fn(K, a.D, a.N, K, **old) for K in (a.small, a.large)},
               "defaults": {K: step_fn(K, a.D, a.N, K) for K in (a.small, a.large)}}
    res = harness.cost_ratio_table(methods, a.rounds)
    harness.save(a, "default_model", {"results": res})
    return res


if __name__ == "__main__":
    main()

"""pyro_ar's benchmarks: scripts run as ``python -m benchmarks.NAME`` from the repository root,
sharing one harness (:mod:`benchmarks.harness`); their claims and ``RESULTS.md`` are built by
``python -m benchmarks.report`` from ``benchmarks/results/``."""

"""The large-vocabulary additions to the language-model benchmarks (issue 37): per-method step
sizes, paired standard errors of A&R's advantage, exact softmax's extrapolated curve, the
targets, and the neural LM's adaptive-softmax output layer. Seconds in all."""

import argparse
import math

import pytest
import torch

from benchmarks import brown, neural_lm, time_to_quality

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")


def test_lrs_give_each_method_its_step_size():
    a = argparse.Namespace(lr_grid="0.01,0.03", grid_methods="ar_softmax", lrs="ove=0.02,exact=0.005",
                           ar_lr=None, exact_lr=3e-3, lr=3e-3)
    runs = time_to_quality.expand_grid(a, ["ar_softmax", "ove", "exact", "botev"])
    assert [r[0] for r in runs] == ["ar_softmax lr=0.01", "ar_softmax lr=0.03", "ove", "exact", "botev"]
    assert runs[2][2].lr == 0.02 and runs[3][2].exact_lr == 0.005 and runs[4][2] is a
    with pytest.raises(SystemExit, match="--lrs: expected method=step size"):
        time_to_quality.parse_lrs("sgd=0.1")
    assert neural_lm.parse_lrs("ar=0.01, adaptive=0.003") == {"ar": 0.01, "adaptive": 0.003}


def test_paired_differences_are_the_mean_and_standard_error_of_per_pair_differences():
    """Against the textbook formula on random per-pair values; runs without the values
    (failed, or probit) are left out, and drop_pair_values removes the values before saving."""
    g = torch.Generator().manual_seed(0)
    a, b = -5 + torch.randn(400, generator=g, dtype=torch.float64), -5.1 + torch.randn(400, generator=g, dtype=torch.float64)
    ok = {"ar_softmax": {"best_test_lls": a.tolist()}, "adaptive": {"best_test_lls": b.tolist()}, "exact": {}}
    out = brown.paired_differences(ok)
    d = a - b
    assert set(out) == {"ar_softmax_minus_adaptive"}
    assert out["ar_softmax_minus_adaptive"]["mean"] == pytest.approx(d.mean().item())
    assert out["ar_softmax_minus_adaptive"]["se"] == pytest.approx(math.sqrt(d.var().item() / 400))
    brown.drop_pair_values(ok)
    assert all("best_test_lls" not in r for r in ok.values())
    t = time_to_quality.large_vocabulary_targets(
        {"exact_over_ar_softmax": 60.0, "paired": {"ar_softmax_minus_adaptive": {"mean": 0.01}}})
    assert t == {"speedup_50_met": True, "ar_minus_adaptive_0.02_met": False, "ar_minus_botev_0.02_met": None}


def test_exact_extrapolation_recovers_a_power_law_curve():
    """On noiseless evaluations of L(t) = -5 - 2 t^-0.5 the fit returns L_inf = -5 and the time
    at which the curve reaches A&R's best -5.2, (2 / 0.2)^2 = 100 s; A&R's best above L_inf: never."""
    hist = [dict(cpu_time=0, test_ll=-7.0)] + [dict(cpu_time=t, test_ll=-5 - 2 * t ** -0.5) for t in (5, 10, 20, 40, 60, 80)]
    ok = {"exact": {"history": hist}, "ar_softmax": {"best": {"test_ll": -5.2}}}
    x = time_to_quality.exact_extrapolation(ok)
    assert x["points"] == 5 and x["l_inf"] == pytest.approx(-5, abs=1e-3) and x["alpha"] == pytest.approx(0.5, abs=1e-3)
    assert x["cpu_time_to_ar_best"] == pytest.approx(100, rel=1e-2)
    ok["ar_softmax"]["best"]["test_ll"] = -4.9
    assert time_to_quality.exact_extrapolation(ok)["cpu_time_to_ar_best"] is None
    assert time_to_quality.exact_extrapolation({**ok, "exact": {"history": hist[:4]}}) == {}


def test_neural_adaptive_softmax_is_normalised_and_trains():
    """The neural LM's adaptive output layer gives every context a distribution over all K
    words (float32: sums within 1e-5), its log-likelihood is that distribution's at the labels
    (class ids mapped to frequency ranks), and its steps are finite."""
    K, n = 1000, 3
    args = argparse.Namespace(context=n, embedding=8, features=16, lr=1e-2, batch=32)
    g = torch.Generator().manual_seed(1)
    counts = (10_000 / torch.arange(1, K + 1)).long()[torch.randperm(K, generator=g)] + 1  # Zipf, ids shuffled
    x, y = torch.randint(0, K, (400, n), generator=g), torch.multinomial(counts.double(), 400, True, generator=g)
    m = neural_lm.PlainAdaptive(K, args, x, y, torch.log(counts.float() / counts.sum()), counts)
    assert m.cutoffs[0] < m.cutoffs[1] < K
    for _ in range(5):
        assert math.isfinite(m.step())
    with torch.no_grad():
        lp = m.asm.log_prob(m.body(x[:20])).double()
    assert torch.allclose(lp.exp().sum(-1), torch.ones(20, dtype=torch.double), atol=1e-5)
    per_pair = m.log_likelihood(x[:20], y[:20], reduce="none")
    assert torch.allclose(per_pair, lp[torch.arange(20), m.rank[y[:20]]], atol=1e-5)
    assert m.log_likelihood(x[:20], y[:20]) == pytest.approx(per_pair.mean().item())


def test_neural_lm_grid_picks_each_method_on_validation(monkeypatch):
    """With ``--lr-grid`` every step size is trained and the run with the best validation LL
    is kept, even where another run's test LL is higher (nothing is chosen on test); a method
    outside ``--grid-methods`` runs once at its own step size."""
    valid = {0.003: -6.0, 0.01: -5.8, 0.03: -5.9}
    test = {0.003: -5.5, 0.01: -5.9, 0.03: -5.7}  # the best test LL is not the chosen run's

    def fake(method, data, K, counts, args, lr=None):
        lr = lr if lr is not None else neural_lm.parse_lrs(args.lrs).get(method, args.lr)
        return dict(method=method, lr=lr, best=dict(valid_ll=valid.get(lr, -7.0), test_ll=test.get(lr, -7.0)))

    monkeypatch.setattr(neural_lm, "run_method", fake)
    args = argparse.Namespace(lr_grid="0.003,0.01,0.03", grid_methods="ar", methods="ar,adaptive",
                              lrs="adaptive=0.02", lr=3e-3, max_procs=None)
    jobs = neural_lm.grid_jobs(args)
    assert jobs == [("ar", 0.003), ("ar", 0.01), ("ar", 0.03), ("adaptive", None)]
    runs = neural_lm.run_jobs(jobs, None, 10, None, args)
    assert [r["lr"] for r in runs] == [0.003, 0.01, 0.03, 0.02]
    assert neural_lm.pick_by_validation(runs[:3])["lr"] == 0.01
    args.max_procs = 2  # forked workers (they inherit the patched run_method): the same runs, in order
    assert neural_lm.run_jobs(jobs, None, 10, None, args) == runs


def test_run_methods_caps_the_workers_running_at_once(monkeypatch, tmp_path):
    """``max_procs`` launches the runs in order, in batches of that many, each batch collected
    before the next starts; without it every run starts at once."""
    batches, launched = [], []
    monkeypatch.setattr(brown, "_launch", lambda m, a, path, lr: launched.append(m) or m)
    monkeypatch.setattr(brown, "_collect", lambda procs: batches.append(list(procs)) or {k: {} for k in procs})
    monkeypatch.setattr(brown.tempfile, "tempdir", str(tmp_path))
    runs = [(f"r{i}", "ar_softmax", argparse.Namespace(ar_lr=0.01)) for i in range(5)]
    out = brown.run_methods(argparse.Namespace(max_procs=2), runs, {"x": torch.zeros(1)})
    assert batches == [["r0", "r1"], ["r2", "r3"], ["r4"]] and sorted(out) == [f"r{i}" for i in range(5)]
    batches.clear()
    brown.run_methods(argparse.Namespace(), runs, {"x": torch.zeros(1)})
    assert batches == [[f"r{i}" for i in range(5)]]


def test_neural_lm_saved_runs_come_back_as_one_grid(tmp_path):
    """A run saved as it ends (``save_run``) is read back by ``--from-runs`` (``load_runs``) with
    its per-context test log-likelihoods, from several folders, for its corpus only."""
    args = argparse.Namespace(out=str(tmp_path / "a"), corpus="gcide")
    lls = torch.tensor([-5.0, -6.5], dtype=torch.float64)
    neural_lm.save_run(dict(method="ar", lr=0.003, best=dict(valid_ll=-5.5), best_test_lls=lls), args)
    args.out = str(tmp_path / "b")
    neural_lm.save_run(dict(method="sampled", lr=0.001, best=dict(valid_ll=-5.6), best_test_lls=lls - 1), args)
    runs = neural_lm.load_runs(f"{tmp_path / 'a'},{tmp_path / 'b'}", "gcide")
    assert [(r["method"], r["lr"]) for r in runs] == [("ar", 0.003), ("sampled", 0.001)]
    assert torch.equal(runs[0]["best_test_lls"], lls) and torch.equal(runs[1]["best_test_lls"], lls - 1)
    assert neural_lm.paired({r["method"]: r for r in runs})["ar_minus_sampled"]["mean"] == pytest.approx(1.0)
    with pytest.raises(ValueError, match="from-runs"):
        neural_lm.load_runs(str(tmp_path / "a"), "brown")

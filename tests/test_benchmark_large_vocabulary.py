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

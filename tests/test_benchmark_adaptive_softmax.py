"""The adaptive-softmax peer of the language-model benchmarks (issue 24):
``benchmarks/plain_loop.py``'s ``AdaptiveSoftmaxBigram`` run through ``benchmarks/brown.py``'s
worker, and the comparison helpers of ``benchmarks/time_to_quality.py``. Seconds in all."""

import argparse
import json
import math

import pytest
import torch

from benchmarks import brown, time_to_quality
from benchmarks.plain_loop import AdaptiveSoftmaxBigram, frequency_cutoffs
from pyro_ar.models import unigram_log_probs

pytestmark = pytest.mark.usefixtures("seeded", "one_thread")


def _corpus(K=60, N=3000, seed=0):
    """A token stream with Zipfian word frequencies whose ids are *not* in frequency order
    (a random permutation), as bigram pairs; the counts of the training targets."""
    g = torch.Generator().manual_seed(seed)
    zipf = 1.0 / torch.arange(1, K + 1, dtype=torch.double)
    perm = torch.randperm(K, generator=g)
    stream = perm[torch.multinomial(zipf, N + 1, replacement=True, generator=g)]
    x, y = stream[:-1], stream[1:]
    return x, y, torch.bincount(y, minlength=K)


def test_frequency_cutoffs_follow_token_coverage():
    counts = torch.tensor([50, 30, 10, 5, 3, 2] + [0] * 4)
    # 80 % of the 100 tokens: the 2 most frequent words; 95 %: 4 words (round_to=1: exact ranks)
    assert frequency_cutoffs(counts, (0.8, 0.95), round_to=1) == [2, 4]
    assert frequency_cutoffs(counts[torch.randperm(10)], (0.8, 0.95), round_to=1) == [2, 4]
    with pytest.raises(ValueError, match="coverage"):
        frequency_cutoffs(counts, (0.95, 0.8))
    with pytest.raises(ValueError, match="cutoffs"):
        frequency_cutoffs(counts, (0.2, 0.4), round_to=1)   # both 1 word: they collide


def test_adaptive_softmax_is_a_normalised_distribution_over_all_classes():
    """Every context's distribution sums to one over all K classes (float32 log-probs: within
    1e-5), before and after training, and the benchmark's evaluation is the mean log-prob of
    the labels under it."""
    K = 60
    x, y, counts = _corpus(K)
    m = AdaptiveSoftmaxBigram(K, 16, x, y, 64, 1e-2, unigram_log_probs(counts).float(), counts,
                              cutoffs=[5, 20])
    words = torch.arange(K)
    for _ in range(2):
        lp = m.log_prob_all(words)
        assert lp.shape == (K, K)
        assert torch.allclose(lp.double().exp().sum(-1), torch.ones(K, dtype=torch.double), atol=1e-5)
        assert m.evaluate(x[:500], y[:500]) == pytest.approx(
            lp[x[:500], y[:500]].double().mean().item(), abs=1e-5)
        for _ in range(30):
            assert math.isfinite(m.step())


def test_adaptive_softmax_maps_class_ids_by_frequency():
    """The module wants classes in frequency order; ids are ranked by ``counts`` and mapped
    back. At initialisation the head biases are the log unigram frequencies (weights
    N(0, 0.1^2)), so a head word's log-probability is its log frequency to within the
    embedding's small contribution (|e_u . w_k| < 0.2 here); an unmapped id would be off by
    the gap between different words' log frequencies (> 0.5 nats here)."""
    K = 60
    x, y, counts = _corpus(K)
    bias = unigram_log_probs(counts).float()
    m = AdaptiveSoftmaxBigram(K, 16, x, y, 64, 1e-2, bias, counts, cutoffs=[5, 20])
    head = counts.sort(descending=True).indices[:5]
    lp = m.log_prob_all(torch.arange(K))
    assert (lp[:, head] - bias[head]).abs().max() < 0.2
    assert (bias[head[:-1]] - bias[head[1:]]).abs().min() > 0.05  # distinct words, distinct targets


def test_brown_worker_runs_adaptive_softmax(tmp_path, capsys):
    """The benchmark's worker (the library's train loop, early stopping, exact evaluation) runs
    the ``adaptive`` method for a CPU second and reports its best validation point."""
    x, y, counts = _corpus(60, 4000)
    data = dict(x_train=x[:3000], y_train=y[:3000], x_valid=x[3000:3500], y_valid=y[3000:3500],
                x_test=x[3500:], y_test=y[3500:], counts=counts)
    path = str(tmp_path / "data.pt")
    torch.save(data, path)
    brown.main(["--worker", "adaptive", "--data", path, "--budget", "1", "--D", "16", "--B", "32",
                "--quad-pairs", "0", "--checkpoints", "2", "--eval-pairs", "0", "--eval-every", "0.5",
                "--patience", "4", "--lr", "0.01", "--cutoffs", "5,20"])
    line = [s for s in capsys.readouterr().out.splitlines() if s.startswith("RESULT ")][-1]
    res = json.loads(line[len("RESULT "):])
    assert res["method"] == "adaptive" and res["cutoffs"] == [5, 20] and res["steps"] > 0
    lls = [h["test_ll"] for h in res["history"]]
    assert all(math.isfinite(v) and v < 0 for v in lls) and len(lls) >= 2
    assert res["best"]["valid_ll"] == max(h["valid_ll"] for h in res["history"])


def _run(curve, lr=None):
    """A result as the workers return it: history of (CPU s, valid LL, test LL)."""
    hist = [dict(cpu_time=t, valid_ll=v, test_ll=ll) for t, v, ll in curve]
    return dict(history=hist, best=max(hist, key=lambda h: h["valid_ll"]), lr=lr)


def test_grid_is_chosen_on_validation_and_targets_compare_with_adaptive(capsys):
    a = argparse.Namespace(
        lr_grid="0.003,0.01", grid_methods="ar_softmax,adaptive", ar_lr=None, adaptive_lr=3e-3, lr=3e-3)
    runs = time_to_quality.expand_grid(a, ["ar_softmax", "exact", "adaptive"])
    assert [r[0] for r in runs] == ["ar_softmax lr=0.003", "ar_softmax lr=0.01", "exact",
                                    "adaptive lr=0.003", "adaptive lr=0.01"]
    assert runs[1][2].ar_lr == 0.01 and runs[4][2].adaptive_lr == 0.01 and runs[2][2] is a
    results = {
        "ar_softmax lr=0.003": _run([(0, -7, -7), (10, -6, -6)]),
        # better on validation, worse on test: chosen all the same (nothing is tuned on test)
        "ar_softmax lr=0.01": _run([(0, -7, -7), (5, -5.5, -5.6), (10, -5.7, -5.8)]),
        "adaptive lr=0.003": _run([(0, -7, -7), (10, -5.65, -5.65)]),
        "adaptive lr=0.01": dict(error="failed"),
    }
    chosen = time_to_quality.pick_by_validation(results, runs)
    assert chosen["ar_softmax"]["run"] == "ar_softmax lr=0.01" and chosen["adaptive"]["run"] == "adaptive lr=0.003"
    t = time_to_quality.adaptive_targets(chosen)
    assert t["ar_minus_adaptive"] == pytest.approx(0.05)
    # A&R's test LL reaches adaptive's best -5.65 between (0 s, -7) and (5 s, -5.6): linearly at 5 * 1.35 / 1.4
    assert t["ar_cpu_time_to_adaptive_best"] == pytest.approx(5 * 1.35 / 1.4)
    assert t["adaptive_cpu_time_to_its_best"] == 10
    assert t["vs_adaptive_quality_met"] and t["vs_adaptive_time_met"]
    time_to_quality.print_adaptive_targets(t)
    assert "A&R best - adaptive best = +0.0500 nats (>= 0: True)" in capsys.readouterr().out


def test_targets_of_a_grid_run_name_the_method_not_run():
    """In a grid run the results are keyed by "method lr=..." labels: the targets resolve them
    to methods, so a missing sampled softmax is reported as such (not as A&R not run)."""
    a = argparse.Namespace(lr_grid="0.003,0.01", grid_methods="ar_softmax", ar_lr=None, lr=3e-3, lrs=None)
    runs = time_to_quality.expand_grid(a, ["ar_softmax", "exact"])
    results = {"ar_softmax lr=0.003": _run([(0, -7, -7), (10, -6, -6)]),
               "ar_softmax lr=0.01": _run([(0, -7, -7), (10, -5.9, -5.9)]), "exact": dict(error="boom")}
    chosen = time_to_quality.pick_by_validation(results, runs)
    t = time_to_quality.targets({}, time_to_quality.by_method(results, runs, chosen))
    assert t["gap_missing"] == "botev not run (--methods)"
    assert t["speedup_missing"] == "exact failed: boom"

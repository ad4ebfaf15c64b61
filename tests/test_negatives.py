"""Class subsampling: uniform subsets, per-datapoint / shared / importance negatives.

Statistical tests use fixed seeds (the ``seeded`` fixture) and Pearson chi-square
goodness-of-fit tests at significance level 1e-3 (every expected cell count >= 500).
"""

import itertools
import re
import math

import numpy as np
import pytest
import scipy.stats
import torch

from pyro_ar.negatives import (ImportanceNegatives, LabelHeadNegatives, PerDatapointNegatives, ScreenedNegatives,
                               SharedNegatives, get_negative_sampler)
from pyro_ar.subsets import sample_without_replacement

from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("seeded")

ALPHA = 1e-3


def _chisquare_uniform(counts):
    counts = torch.as_tensor(counts, dtype=torch.float64)
    expected = torch.full_like(counts, counts.sum().item() / counts.numel())
    assert expected.min() >= 5
    return scipy.stats.chisquare(counts.numpy(), expected.numpy()).pvalue


def _is_small_branch(n, k):
    return 4 * k < n  # otherwise sample_without_replacement takes a random permutation


@pytest.mark.parametrize("n,k", [(9, 2), (6, 2), (7, 3)])
def test_sample_without_replacement_uniform_over_subsets(n, k):
    # every k-subset of range(n) equally likely, for both branches
    rows = 500 * math.comb(n, k)
    out = sample_without_replacement(n, k, (rows,))
    assert out.shape == (rows, k) and out.dtype == torch.long
    s, _ = out.sort(-1)
    assert (s[:, 1:] != s[:, :-1]).all() and s.min() >= 0 and s.max() < n
    code = {c: i for i, c in enumerate(itertools.combinations(range(n), k))}
    counts = torch.bincount(torch.tensor([code[tuple(r)] for r in s.tolist()]), minlength=len(code))
    assert _chisquare_uniform(counts) > ALPHA


@pytest.mark.parametrize("n,k", [(20_000, 512), (100_000, 64), (41, 10), (9, 2)])
def test_single_row_fast_path_equals_the_batched_path(n, k):
    """One row (shape ()) takes a flat path: on the same draws it returns exactly what the
    batched path returns for a batch of one row (the first k distinct draws, in order)."""
    for seed in range(30):
        torch.manual_seed(seed)
        one = sample_without_replacement(n, k)
        torch.manual_seed(seed)
        batched = sample_without_replacement(n, k, (1,))[0]
        assert torch.equal(one, batched), (n, k, seed)


def test_single_row_path_is_uniform_ordered():
    """n = 41, k = 10 one row at a time: each position of the ordered subset is uniform
    over range(n) (chi-square at level ALPHA / 10 per position)."""
    out = torch.stack([sample_without_replacement(41, 10) for _ in range(4000)])
    s, _ = out.sort(-1)
    assert (s[:, 1:] != s[:, :-1]).all()
    for j in range(10):
        assert _chisquare_uniform(torch.bincount(out[:, j], minlength=41)) > ALPHA / 10


def test_single_row_path_redraws_when_too_few_distinct(monkeypatch):
    """If a single row's draws hold fewer than k distinct values (rare: forced here), the
    row is redrawn by the general path and the result is still k distinct values."""
    import pyro_ar.subsets as subsets

    calls, first_distinct = [], subsets._first_distinct

    def too_few(draws):
        calls.append(1)
        return first_distinct(draws)[:3]

    monkeypatch.setattr(subsets, "_first_distinct", too_few)
    out = sample_without_replacement(1000, 20)
    assert calls and out.shape == (20,) and out.unique().numel() == 20
    assert out.min() >= 0 and out.max() < 1000


@pytest.mark.parametrize("n,k", [(50, 5), (41, 10), (12, 5), (30, 30)])
def test_sample_without_replacement_uniform_marginals(n, k):
    # (41, 10) draws enough repeats that some rows take the redraw path
    rows = 20000
    out = sample_without_replacement(n, k, (4, rows // 4))
    assert out.shape == (4, rows // 4, k)
    s, _ = out.reshape(rows, k).sort(-1)
    assert (s[:, 1:] != s[:, :-1]).all()
    counts = torch.bincount(out.reshape(-1), minlength=n)
    assert counts.numel() == n
    if k < n:
        assert _chisquare_uniform(counts) > ALPHA
    else:
        assert (counts == rows).all()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("n,k", [(100000, 64), (1000, 5), (10, 9)])
def test_sample_without_replacement_distinct_large(n, k, device):
    out = sample_without_replacement(n, k, (300,), device=device)
    assert out.device.type == device
    s, _ = out.sort(-1)
    assert (s[:, 1:] != s[:, :-1]).all() and s.min() >= 0 and s.max() < n


def test_sample_without_replacement_edge_cases():
    assert sample_without_replacement(5, 0, (3,)).shape == (3, 0)
    assert sorted(sample_without_replacement(5, 5).tolist()) == [0, 1, 2, 3, 4]
    assert sample_without_replacement(5, 2, (0,)).shape == (0, 2)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(sample_without_replacement(100, 7, (5,), generator=g1),
                       sample_without_replacement(100, 7, (5,), generator=g2))
    with pytest.raises(ValueError, match=r"k=6 distinct classes out of n=5"):
        sample_without_replacement(5, 6)
    with pytest.raises(ValueError, match=r"k=-1"):
        sample_without_replacement(5, -1)


@pytest.mark.parametrize("s", [2, 4])  # 4 s < K - 1 (incremental draws) and 4 s >= K - 1 (permutation)
def test_per_datapoint_never_contains_label_and_is_uniform(s):
    K, rows = 10, 20000
    labels = torch.randint(K, (rows,))
    labels[: rows // 2] = 3
    neg = PerDatapointNegatives(s)(labels, K)
    assert not neg.shared and neg.index.shape == (rows, s)
    assert (neg.index != labels.unsqueeze(-1)).all()
    srt, _ = neg.index.sort(-1)
    assert (srt[:, 1:] != srt[:, :-1]).all()
    assert neg.weight.item() == pytest.approx((K - 1) / s)
    # for the datapoints with label 3: uniform over the other nine classes
    counts = torch.bincount(neg.index[: rows // 2].reshape(-1), minlength=K)
    assert counts[3] == 0
    assert _chisquare_uniform(torch.cat([counts[:3], counts[4:]])) > ALPHA


def test_shared_negatives():
    K, s = 20, 5
    labels = torch.tensor([[0, 3], [7, 19]])
    neg = SharedNegatives(s)(labels, K)
    assert neg.shared and neg.index.shape == (s,)
    assert len(set(neg.index.tolist())) == s
    assert neg.weight.shape == (2, 2, s)
    expected = (neg.index != labels.unsqueeze(-1)).double() * K / s
    torch.testing.assert_close(neg.weight.double(), expected)
    # uniform marginal over all K classes (label included: its term gets weight 0)
    counts = torch.zeros(K, dtype=torch.long)
    for _ in range(2000):
        counts += torch.bincount(SharedNegatives(s)(labels, K).index, minlength=K)
    assert _chisquare_uniform(counts) > ALPHA


def test_importance_negatives_follow_proposal():
    K, s = 6, 30000
    proposal = torch.tensor([1.0, 2.0, 3.0, 4.0, 0.5, 0.5])
    q = proposal / proposal.sum()
    labels = torch.tensor([2, 5])
    neg = ImportanceNegatives(s, proposal)(labels, K)
    assert neg.shared and neg.index.shape == (s,) and neg.weight.shape == (2, s)
    expected_w = (neg.index != labels.unsqueeze(-1)).double() / (s * q.double()[neg.index])
    torch.testing.assert_close(neg.weight.double(), expected_w, rtol=1e-6, atol=0)
    counts = torch.bincount(neg.index, minlength=K).double()
    assert scipy.stats.chisquare(counts.numpy(), (s * q).double().numpy()).pvalue > ALPHA


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_importance_weights_equal_the_boolean_mask_formula(dtype):
    """ImportanceNegatives' weights, the label mask as arithmetic on the class numbers
    (negatives._drop_labels), are bit for bit those of 1[k_j != y_n] / (s q(k_j)) (the formula
    before), in the proposal's dtype, with labels among the draws (weight 0) and batched labels;
    beyond the class numbers the dtype holds exactly the boolean mask is used, the same values."""
    from pyro_ar.negatives.samplers import _drop_labels

    K, s = 50, 40
    proposal = torch.arange(1.0, K + 1, dtype=dtype)
    sampler = ImportanceNegatives(s, proposal)
    torch.manual_seed(0)
    labels = torch.randint(0, K, (3, 7))
    neg = sampler(labels, K)
    q = sampler.probs.index_select(0, neg.index)
    before = (neg.index != labels.unsqueeze(-1)) / (s * q)
    assert neg.weight.dtype == before.dtype == dtype and torch.equal(neg.weight, before)
    assert (neg.weight == 0).any()  # (some labels drawn)
    big = 2 ** 24 + 5  # float32 holds no longer every class number: the comparison
    index, lab = torch.tensor([2 ** 24, 2 ** 24 + 1, 3]), torch.tensor([2 ** 24 + 1, 3])
    w = torch.tensor([0.5, 0.25, 2.0], dtype=dtype)
    torch.testing.assert_close(_drop_labels(index, lab, w, big), (index != lab.unsqueeze(-1)) * w,
                               rtol=0.0, atol=0.0)


@pytest.mark.parametrize("base", ["importance", "shared", "per_datapoint"])
def test_label_head_weights_equal_the_comparison_formula(base):
    """LabelHeadNegatives' weights (the head's label mask as arithmetic, a shared tail's
    head classes found by one (s, |H|) comparison) are bit for bit those of the comparisons
    before: 1[h != y] for the head, a_j * ~isin(k_j, H) for the tail, for shared and
    per-datapoint bases, with tail draws inside the head."""
    K, s = 12, 30  # (few classes: the tail draws head classes)
    samplers = {"importance": ImportanceNegatives(s, torch.arange(1.0, K + 1)), "shared": SharedNegatives(8),
                "per_datapoint": PerDatapointNegatives(5)}
    sampler = LabelHeadNegatives(samplers[base], max_head=3)
    labels = torch.tensor([[1, 4, 4, 7], [7, 7, 2, 9]])
    torch.manual_seed(1)
    neg = sampler(labels, K)
    torch.manual_seed(1)
    head, tail = sampler.head(labels), samplers[base](labels, K)
    dtype = tail.weight.dtype if tail.weight.is_floating_point() else torch.get_default_dtype()
    tail_weight = tail.weight.to(dtype) * ~torch.isin(tail.index, head)
    before = torch.cat([(head != labels.unsqueeze(-1)).to(dtype),
                        tail_weight.expand(torch.broadcast_shapes(tail_weight.shape, labels.shape + (1,)))], -1)
    assert neg.weight.dtype == before.dtype and torch.equal(neg.weight, before)
    assert bool(torch.isin(tail.index, head).any())  # (the case of a tail draw in the head)


def test_importance_accepts_categorical_and_unnormalised_weights():
    from pyro.distributions import Categorical

    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    a = ImportanceNegatives(5, Categorical(probs=probs))
    b = ImportanceNegatives(5, 10 * probs)
    torch.testing.assert_close(a.probs, probs)
    torch.testing.assert_close(b.probs, probs)
    assert a.num_classes == 4


@pytest.mark.parametrize("strategy", ["per_datapoint", "shared"])
@pytest.mark.parametrize("s", [None, 4, 5, 100])
def test_exact_when_not_subsampling(strategy, s):
    K = 5
    labels = torch.tensor([0, 4, 2])
    sampler = get_negative_sampler(strategy, s)
    assert sampler.is_exact(K) == (s is None or s >= K - 1)
    neg = sampler(labels, K)
    assert neg.shared and torch.equal(neg.index, torch.arange(K))
    assert torch.equal(neg.weight.long(), (torch.arange(K) != labels.unsqueeze(-1)).long())


def test_importance_exact_only_without_subsampling():
    proposal = torch.ones(5)
    assert get_negative_sampler("importance", None, proposal).is_exact(5)
    # draws with replacement never enumerate the classes, whatever s
    assert not get_negative_sampler("importance", 100, proposal).is_exact(5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("strategy", ["per_datapoint", "shared", "importance"])
def test_samplers_follow_labels_device(strategy, device):
    proposal = torch.ones(8) if strategy == "importance" else None
    sampler = get_negative_sampler(strategy, 3, proposal)
    neg = sampler(torch.tensor([1, 5], device=device), 8)
    assert neg.index.device.type == device and neg.weight.device.type == device


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "4"])
@pytest.mark.parametrize("strategy", ["per_datapoint", "shared", "importance"])
def test_num_negatives_validation(strategy, bad):
    proposal = torch.ones(4) if strategy == "importance" else None
    with pytest.raises(ValueError, match=r"num_negatives must be an integer >= 1 or None, got "
                                         rf"num_negatives={re.escape(repr(bad))}"):
        get_negative_sampler(strategy, bad, proposal)


@pytest.mark.parametrize("strategy", ["per_datapoint", "shared", "importance"])
def test_numpy_integer_num_negatives_accepted(strategy):
    """Issue 12: the estimator accepts numpy integers, so the samplers must too."""
    proposal = torch.ones(6) if strategy == "importance" else None
    sampler = get_negative_sampler(strategy, np.int64(2), proposal)
    assert sampler.num_negatives == 2 and type(sampler.num_negatives) is int
    neg = sampler(torch.tensor([0, 3]), 6)
    assert neg.index.shape[-1] == 2


def test_strategy_and_proposal_errors():
    with pytest.raises(ValueError, match=r"unknown strategy='uniform'"):
        get_negative_sampler("uniform", 3)
    with pytest.raises(ValueError, match=r"strategy='importance' needs a proposal"):
        get_negative_sampler("importance", 3)
    with pytest.raises(ValueError, match=r"proposal is only used with strategy='importance', got strategy='shared'"):
        get_negative_sampler("shared", 3, torch.ones(4))
    with pytest.raises(ValueError, match=r"strategy must be a name of .* got the sampler PerDatapointNegatives"
                                         r"\(num_negatives=3\): give a sampler itself as negatives="):
        get_negative_sampler(PerDatapointNegatives(3))


@pytest.mark.parametrize("proposal,match", [
    (torch.tensor([0.5, -0.1, 0.6]), r"got values \[-0\.1"),
    (torch.tensor([0.5, 0.0, 0.5]), r"got values \[0\.0\]"),
    (torch.tensor([0.5, float("nan"), 0.5]), r"got values \[nan\]"),
    (torch.ones(2, 3), r"1-D over K >= 2 classes, got shape \(2, 3\)"),
    (torch.ones(1), r"got shape \(1,\)"),
    ([0.2, 0.3, 0.5], r"proposal must be a 1-D tensor .* got \[0\.2, 0\.3, 0\.5\]"),
    (torch.distributions.Categorical(torch.ones(2, 3)), r"batch_shape=\(2,\)"),
])
def test_proposal_validation(proposal, match):
    with pytest.raises(ValueError, match=match):
        get_negative_sampler("importance", 3, proposal)


def test_proposal_wrong_length_at_sampling():
    sampler = ImportanceNegatives(3, torch.ones(4))
    with pytest.raises(ValueError, match=r"proposal is over 4 classes but the utility has num_classes=5"):
        sampler(torch.tensor([0]), 5)


@pytest.mark.parametrize("strategy", ["per_datapoint", "shared", "importance"])
def test_weights_unbiased_for_every_class(strategy):
    # sum_j a_j 1[k'_j = k] has expectation 1[k != y] for every class k: by linearity the
    # estimate of any sum over k' != y is unbiased. Monte Carlo mean within 4 standard
    # errors (sample sd / sqrt(R)) of the target, per class.
    K, s, y = 10, 3, 4
    proposal = torch.tensor([3.0, 1.0, 1.0, 2.0, 5.0, 1.0, 0.5, 1.0, 4.0, 1.0])
    sampler = get_negative_sampler(strategy, s, proposal if strategy == "importance" else None)
    if strategy == "per_datapoint":
        R = 30000
        labels = torch.full((R,), y)
        negs = [sampler(labels, K)]
    else:
        R = 6000  # one shared draw per call
        labels = torch.tensor([y])
        negs = [sampler(labels, K) for _ in range(R)]
    totals = []
    for neg in negs:
        shape = labels.shape + (s,)
        index = neg.index.expand(shape)
        weight = neg.weight.to(torch.float64).expand(shape)
        totals.append(torch.zeros(labels.shape + (K,), dtype=torch.float64).scatter_add_(-1, index, weight))
    totals = torch.cat(totals)
    assert totals.shape == (R, K)
    assert (totals[:, y] == 0).all()
    mean, se = totals.mean(0), totals.std(0) / math.sqrt(R)
    others = torch.arange(K) != y
    z = (mean[others] - 1.0) / se[others]
    assert z.abs().max().item() < 4.0, z


@pytest.mark.parametrize("strategy", ["per_datapoint", "shared", "importance"])
def test_label_head_unbiased_for_every_class_and_every_label(strategy):
    # LabelHeadNegatives: the batch's labels {1, 4, 7} with weight 1[k != y] (no randomness),
    # the base draw masked off them. For each datapoint, sum_j a_j 1[k'_j = k] has expectation
    # 1[k != y_n]: Monte Carlo mean within 4 standard errors (sample sd / sqrt(R)) per class.
    K, s, R = 10, 3, 6000
    proposal = torch.tensor([3.0, 1.0, 1.0, 2.0, 5.0, 1.0, 0.5, 1.0, 4.0, 1.0])
    base = get_negative_sampler(strategy, s, proposal if strategy == "importance" else None)
    sampler = LabelHeadNegatives(base)
    labels = torch.tensor([4, 1, 4, 7])
    totals = torch.zeros(R, len(labels), K, dtype=torch.float64)
    for r in range(R):
        neg = sampler(labels, K)
        shape = labels.shape + (neg.index.shape[-1],)
        totals[r].scatter_add_(-1, neg.index.expand(shape), neg.weight.to(torch.float64).expand(shape))
    target = (torch.arange(K) != labels.unsqueeze(-1)).double()
    head = torch.tensor([1, 4, 7])
    assert (totals[:, :, head] == target[:, head]).all()            # the head is summed exactly
    mean, se = totals.mean(0), totals.std(0) / math.sqrt(R)
    tail = se > 0
    z = (mean[tail] - target[tail]) / se[tail]
    assert (se[~tail] == 0).all() and (mean[~tail] == target[~tail]).all()
    assert z.abs().max().item() < 4.0, z


def test_label_head_removes_the_heavy_tail_of_a_peaked_sum():
    # A class sum dominated by 3 frequent classes that are also the frequent labels: a uniform
    # draw of 5 of 500 misses them in most draws; with the head the estimate is exact on them.
    # Variances from 2,000 draws: the stratified one is far below the uniform one (ratio < 0.01;
    # the uniform variance is ~(K/s) g_max^2 = 100 e^10, the stratified one ~100 * 500).
    K, s = 500, 5
    g = torch.ones(K, dtype=torch.float64)
    g[:3] = math.exp(5.0)
    labels = torch.tensor([0, 0, 1, 2, 1, 0, 250])
    estimates = {}
    for name, sampler in (("uniform", SharedNegatives(s)), ("head", LabelHeadNegatives(SharedNegatives(s)))):
        draws = []
        for _ in range(2000):
            neg = sampler(labels, K)
            draws.append((neg.weight.double() * g[neg.index]).sum(-1)[-1])   # the label-250 datapoint
        estimates[name] = torch.stack(draws)
    assert estimates["head"].var() < 0.01 * estimates["uniform"].var()
    se = estimates["head"].std() / math.sqrt(2000)
    assert abs(estimates["head"].mean() - (g.sum() - 1.0)) < 4 * se


def test_label_head_options_and_errors():
    labels = torch.tensor([5, 5, 5, 2, 2, 9])
    sampler = LabelHeadNegatives(SharedNegatives(4), max_head=2)
    assert sampler.head(labels).tolist() == [5, 2]                     # the most frequent labels
    neg = sampler(labels, 100)
    assert neg.shared and neg.index.shape == (6,) and neg.weight.shape == (6, 6)
    assert LabelHeadNegatives(SharedNegatives(None))(labels, 100).index.tolist() == list(range(100))
    assert LabelHeadNegatives(SharedNegatives(4)).is_exact(5) and not sampler.is_exact(100)
    with pytest.raises(ValueError, match="base must be a NegativeSampler"):
        LabelHeadNegatives("shared")
    with pytest.raises(ValueError, match="max_head"):
        LabelHeadNegatives(SharedNegatives(4), max_head=0)


@pytest.fixture
def deferred_check(monkeypatch):
    """The path CUDA takes (a device-side assertion instead of a host check), here on the CPU."""
    import pyro_ar.subsets as subsets

    monkeypatch.setattr(subsets, "_defer_check", lambda device: True)
    return subsets


@pytest.mark.parametrize("n,k", [(9, 2), (41, 10)])
def test_deferred_check_path_is_uniform_over_ordered_positions(deferred_check, n, k):
    """The GPU path (no host-device synchronisation): distinct values, each position of the
    ordered subset uniform over range(n) (chi-square at level ALPHA / k per position)."""
    out = torch.cat([sample_without_replacement(n, k, (2000,)), torch.stack(
        [sample_without_replacement(n, k) for _ in range(500)])])
    s, _ = out.sort(-1)
    assert (s[:, 1:] != s[:, :-1]).all() and s.min() >= 0 and s.max() < n
    for j in range(k):
        assert _chisquare_uniform(torch.bincount(out[:, j], minlength=n)) > ALPHA / k


def test_deferred_check_stops_on_a_shortfall(deferred_check, monkeypatch):
    """A row with fewer than k distinct draws (forced here) is not returned silently: the
    device-side assertion fires (on the CPU at once, as a RuntimeError)."""
    real = deferred_check._first_k_distinct
    monkeypatch.setattr(deferred_check, "_first_k_distinct",
                        lambda draws, n, k: (real(draws, n, k)[0], torch.zeros(draws.shape[0], dtype=torch.bool)))
    with pytest.raises(RuntimeError, match="fewer than k distinct draws"):
        sample_without_replacement(1000, 20)


# ------------------------------------------------------------------ screened negatives (issue 27)
def _screened_totals(sampler, labels, psi, K, R):
    """(R, B, K): sum_j a_j 1[k_j = k] of R independent draws for each datapoint (the rows
    repeated R times in one call: each row draws its own candidates)."""
    B = len(labels)
    neg = sampler(labels.repeat(R), K, utility=psi.expand(B, K).repeat(R, 1))
    assert not neg.shared and neg.index.shape == (R * B, sampler.num_negatives)
    totals = torch.zeros(R * B, K, dtype=torch.float64)
    totals.scatter_add_(-1, neg.index, neg.weight.double().expand(neg.index.shape))
    return totals.reshape(R, B, K)


def test_screened_weights_unbiased_for_every_class_and_label():
    # E[sum_j a_j 1[k_j = k]] = 1[k != y] for every class k, whatever the utilities: then the
    # estimate of sum_{k != y} g(k) is unbiased for every g (its gradient too). Utilities with
    # distinct values, so the top of the candidates is a real ranking. Monte Carlo mean within
    # 4 standard errors (sample sd / sqrt(R)) of the target, per class and datapoint (fixed seed).
    K, R = 12, 6000
    psi = torch.randn(3, K, generator=torch.Generator().manual_seed(0)) * 3
    labels = torch.tensor([0, 5, 11])
    totals = _screened_totals(ScreenedNegatives(4, screen=2, exact=2), labels, psi, K, R)
    target = (torch.arange(K) != labels.unsqueeze(-1)).double()
    assert (totals[:, torch.arange(3), labels] == 0).all()            # never the label
    mean, se = totals.mean(0), totals.std(0) / math.sqrt(R)
    z = (mean[target > 0] - 1.0) / se[target > 0]
    assert z.abs().max().item() < 4.0, z


def test_screened_keeps_the_top_candidates_and_beats_a_uniform_draw():
    # A probit-like sum dominated by the 3 classes of highest utility out of 400 (terms
    # g(k) = Phi(psi_k - psi_y), the label's utility 0, the other 396 at -6: Phi(-6) ~ 1e-9):
    # the screened draw (40 candidates, 5 on top of 10) against 10 uniform negatives. Unbiased
    # (mean within 4 standard errors of the exact sum) and its variance about
    # (399/40 - 1) / (399/10 - 1) = 0.23 of the uniform draw's (a big term is a candidate with
    # probability 40/399 and then on top); bound 0.35, about 4 standard errors of the ratio's
    # estimate above it at R = 4,000; fixed seed.
    K, s, R = 400, 10, 4000
    psi = torch.full((1, K), -6.0, dtype=torch.float64)
    psi[0, :3] = torch.tensor([0.5, 0.0, -0.5], dtype=torch.float64)
    labels = torch.tensor([200])
    psi[0, 200] = 0.0
    g = torch.distributions.Normal(0.0, 1.0).cdf(psi[0] - psi[0, 200]).double()
    exact = g.sum() - g[200]
    neg = PerDatapointNegatives(s)(labels.repeat(R), K)
    draws = {"uniform": (neg.weight.double() * g[neg.index]).sum(-1),
             "screened": _screened_totals(ScreenedNegatives(s), labels, psi, K, R)[:, 0] @ g}
    se = draws["screened"].std() / math.sqrt(R)
    assert abs(draws["screened"].mean() - exact) < 4 * se
    assert draws["screened"].var() < 0.35 * draws["uniform"].var()
    neg = ScreenedNegatives(s)(labels.expand(50), K, utility=psi.expand(50, K))
    top, rest = psi[0][neg.index[:, :5]], psi[0][neg.index[:, 5:]]
    assert (top.min(-1).values >= rest.max(-1).values).all()          # the top of each row's candidates


def test_screened_options_and_errors():
    sampler = get_negative_sampler("screened", 6)
    assert isinstance(sampler, ScreenedNegatives) and (sampler.screen, sampler.exact) == (4, 3)
    assert sampler.uses_utility and not PerDatapointNegatives(6).__dict__.get("uses_utility")
    with pytest.raises(ValueError, match=r"call it with utility="):
        sampler(torch.tensor([0]), 100)
    with pytest.raises(ValueError, match=r"exact must be below num_negatives=4 .* got exact=4"):
        ScreenedNegatives(4, exact=4)
    with pytest.raises(ValueError, match=r"screen must be an integer >= 1"):
        ScreenedNegatives(4, screen=0)
    neg = ScreenedNegatives(5)(torch.tensor([2]), 6)                   # s >= K - 1: every class
    assert neg.shared and neg.index.tolist() == list(range(6))
    # M capped at K - 1: every other class is a candidate
    neg = ScreenedNegatives(4, screen=10)(torch.tensor([1, 3]), 9, utility=torch.randn(2, 9))
    assert torch.allclose(neg.weight[:2], torch.full((2,), 8 / 8)) and (neg.index != torch.tensor([[1], [3]])).all()


def test_screened_augmented_log_prob_and_gradient_unbiased():
    # Through the likelihood (ClassSumLikelihood passes its utility to the sampler): the probit
    # factor sum_{k != y} log Phi(eps + psi_y - psi_k) of 3 datapoints, K = 40, and its gradient
    # in psi, from 6,000 independent screened draws (the rows repeated, each copy its own draw)
    # against the exact sum; every mean within 4.5 standard errors (sample sd / sqrt(R); 363
    # gradient entries, so 4.5 rather than 4); fixed seed.
    from pyro_ar import AugmentedCategorical

    K, R = 40, 6000
    psi0 = torch.randn(3, K, dtype=torch.float64, generator=torch.Generator().manual_seed(1)) * 2
    eps, y = torch.tensor([0.3, -1.0, 1.5], dtype=torch.float64), torch.tensor([4, 0, 39])
    psi = psi0.clone().requires_grad_(True)
    exact = AugmentedCategorical(psi, eps, "normal").log_prob(y)
    exact_grad, = torch.autograd.grad(exact.sum(), psi)
    rows = psi0.repeat(R, 1, 1).requires_grad_(True)
    est = AugmentedCategorical(rows, eps, "normal", negatives=ScreenedNegatives(6)).log_prob(y.expand(R, 3))
    grad, = torch.autograd.grad(est.sum(), rows)                       # (R, 3, K): one gradient per draw
    est = est.detach()
    assert ((est.mean(0) - exact.detach()).abs() < 4 * est.std(0) / math.sqrt(R)).all()
    se = grad.std(0) / math.sqrt(R)
    z = (grad.mean(0) - exact_grad)[se > 0] / se[se > 0]
    assert z.abs().max().item() < 4.5, z.abs().max()
def test_importance_uniform_mix_unbiased_for_every_class():
    # Defensive mixture q_a = (1 - a) q + a / K: sum_j a_j 1[k'_j = k] has expectation 1[k != y]
    # for every class k (so any class sum is estimated without bias). A proposal with a class of
    # tiny q(k); Monte Carlo mean within 4 standard errors (sample sd / sqrt(R)) per class, seed 0.
    torch.manual_seed(0)
    K, s, y, R, a = 10, 3, 4, 6000, 0.3
    proposal = torch.tensor([3.0, 1.0, 1.0, 2.0, 5.0, 1e-4, 0.5, 1.0, 4.0, 1.0])
    sampler = ImportanceNegatives(s, proposal, uniform_mix=a)
    labels = torch.tensor([y])
    totals = torch.zeros(R, K, dtype=torch.float64)
    for r in range(R):
        neg = sampler(labels, K)
        totals[r].scatter_add_(0, neg.index, neg.weight[0].double())
    assert (totals[:, y] == 0).all()
    mean, se = totals.mean(0), totals.std(0) / math.sqrt(R)
    others = torch.arange(K) != y
    z = (mean[others] - 1.0) / se[others]
    assert z.abs().max().item() < 4.0, z


def test_importance_uniform_mix_bounds_the_weights():
    # Without the mixture the weight 1/(s q(k)) of a class with q(k) ~ 1e-6 is ~1e6 / s; with it
    # every weight is at most K / (a s) (the uniform share alone draws k with probability a / K).
    K, s, a = 1000, 20, 0.25
    proposal = torch.ones(K)
    proposal[0] = 1e-6
    plain = ImportanceNegatives(s, proposal)
    mixed = ImportanceNegatives(s, proposal, uniform_mix=a)
    assert plain.max_weight() > 1e4 * K / s
    assert mixed.max_weight() <= K / (a * s) * (1 + 1e-6)
    q = (1 - a) * proposal / proposal.sum() + a / K
    torch.testing.assert_close(mixed.probs.double(), q.double(), rtol=1e-6, atol=0)
    torch.manual_seed(0)
    neg = mixed(torch.tensor([3]), K)
    expected = (neg.index != 3).double() / (s * q.double()[neg.index])
    torch.testing.assert_close(neg.weight.double()[0], expected, rtol=1e-5, atol=0)
    assert neg.weight.max().item() <= K / (a * s) * (1 + 1e-5)
    # a = 1 is the uniform distribution: weight K / s for every class but the label
    uni = ImportanceNegatives(s, proposal, uniform_mix=1.0)(torch.tensor([3]), K)
    torch.testing.assert_close(uni.weight[0][uni.index != 3].double(),
                               torch.full_like(uni.weight[0][uni.index != 3].double(), K / s), rtol=1e-5, atol=0)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.2", True])
def test_importance_uniform_mix_validation(bad):
    with pytest.raises(ValueError, match=r"uniform_mix must be a number in \[0, 1\]"):
        ImportanceNegatives(3, torch.ones(4), uniform_mix=bad)


@pytest.mark.parametrize("labels,match", [
    (torch.tensor([0, 50, 2]), r"labels must lie in \[0, 50\), got values in \[0, 50\]"),
    (torch.tensor([0, -1, 2]), r"labels must lie in \[0, 50\), got values in \[-1, 2\]"),
    (torch.tensor([0.0, 1.5, 2.0]), r"labels must be an integer tensor of class indices, got torch.float32"),
])
def test_screened_refuses_bad_labels(labels, match):
    """They were drawn for (issue 38): label K's candidates skip no class, -1 shifts them all."""
    with pytest.raises(ValueError, match=match):
        ScreenedNegatives(4, screen=3)(labels, 50, utility=torch.randn(3, 50))


@pytest.mark.parametrize("utility,match", [
    (torch.full((3, 50), math.nan), r"utility must be finite, got non-finite values \[nan"),
    (torch.randn(2, 50), r"utility must have a batch shape that broadcasts to the labels' \(3,\), got .* \(2,\)"),
    (torch.randn(3, 40), r"utility must have num_classes=50 classes .* got 40"),
])
def test_screened_refuses_bad_utilities(utility, match):
    with pytest.raises(ValueError, match=match):
        ScreenedNegatives(4, screen=3)(torch.tensor([0, 1, 2]), 50, utility=utility)


@pytest.mark.parametrize("strategy", ["per_datapoint", "shared", "importance", "label_head"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_log_weights_are_the_log_of_the_weights(strategy, dtype):
    # a sampler's own log_weight (the shared one's: a comparison, no logarithm) and the
    # fallback from weight agree: log a_j where a_j > 0, -inf where a_j = 0 (a label drawn)
    K, s = 30, 6
    labels = torch.randint(0, K, (50,))
    sampler = (LabelHeadNegatives(SharedNegatives(s)) if strategy == "label_head"
               else get_negative_sampler(strategy, s, torch.arange(1.0, K + 1) if strategy == "importance" else None))
    neg = sampler(labels, K)
    w = neg.weight.to(dtype)
    expected = torch.where(w > 0, w.log(), torch.full_like(w, -math.inf))
    torch.testing.assert_close(neg.log_weights(dtype), expected)
    assert neg.log_weights(dtype).dtype == dtype
    if strategy == "shared":  # the sampler's own (no logarithm per entry)
        assert neg.log_weight is not None

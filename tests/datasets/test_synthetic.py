"""pyro_ar.datasets.synthetic: the toy problem and the linear teacher."""

import math

import pytest
import torch

from pyro_ar.datasets import make_linear_teacher, make_toy
from pyro_ar.noise import get_noise


def test_make_toy_reproducible():
    a, b, c = make_toy(seed=1), make_toy(seed=1), make_toy(seed=2)
    assert a.y.shape == (200_000,) and a.probs.shape == (10_000,)
    assert a.y.dtype == torch.int64 and 0 <= a.y.min() and a.y.max() < 10_000
    assert torch.equal(a.y, b.y) and torch.equal(a.probs, b.probs)
    assert not torch.equal(a.probs, c.probs)
    assert abs(a.probs.double().sum().item() - 1.0) < 1e-5
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(make_toy(100, 50, generator=g1).y, make_toy(100, 50, generator=g2).y)


def test_make_toy_frequencies_chi_square():
    scipy_stats = pytest.importorskip("scipy.stats")
    # Pearson chi-square of the counts against the true p: under the model it is
    # approximately chi2(K - 1) (expected counts N p_k are mostly >> 5 here; K = 1000,
    # N = 400,000 gives a mean expected count of 400). Fail only below p-value 1e-4.
    K, N = 1000, 400_000
    y, p = make_toy(K, N, seed=0)
    expected = N * p.double()
    counts = torch.bincount(y, minlength=K).double()
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    pval = scipy_stats.chi2.sf(chi2, K - 1)
    assert pval > 1e-4, (chi2, pval)
    # z-scores from the binomial standard error sqrt(N p (1 - p)); with K = 1000 classes
    # max |z| > 5 has probability about 1000 * 5.7e-7 < 1e-3 (union bound)
    z = (counts - expected) / (expected * (1 - p.double())).sqrt()
    assert z.abs().max() < 5.0


def test_make_toy_default_mae():
    # The paper's setting (K = 10,000, N = 200,000): the mean absolute error of the
    # empirical frequencies is close to its normal-approximation expectation
    # mean_k sqrt(2 / pi) * sqrt(p_k (1 - p_k) / N) (binomial standard error).
    y, p = make_toy(seed=0)
    N, K = y.shape[0], p.shape[0]
    p = p.double()
    freq = torch.bincount(y, minlength=K).double() / N
    mae = (freq - p).abs().mean().item()
    expected = (math.sqrt(2 / math.pi) * (p * (1 - p) / N).sqrt()).mean().item()
    assert 0.85 < mae / expected < 1.15, (mae, expected)


def test_make_linear_teacher_shapes_and_reproducibility():
    for noise in ("gumbel", "normal", "logistic"):
        a = make_linear_teacher(300, 7, 50, noise=noise, seed=3)
        b = make_linear_teacher(300, 7, 50, noise=noise, seed=3)
        x, y, W, b_ = a
        assert x.shape == (300, 7) and y.shape == (300,) and W.shape == (50, 7) and b_.shape == (50,)
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert 0 <= y.min() and y.max() < 50
        for u, v in zip(a, b):
            assert torch.equal(u, v)
    c = make_linear_teacher(300, 7, 50, seed=4)
    assert not torch.equal(c.y, a.y)
    with pytest.raises(ValueError, match="unknown noise"):
        make_linear_teacher(10, 2, 3, noise="cauchy")


def test_make_linear_teacher_scales():
    # x ~ N(0, I/D): E|x|^2 = 1; W ~ N(0, weight_scale^2); b ~ N(0, 1)
    x, _, W, b = make_linear_teacher(4000, 50, 2000, weight_scale=0.5, seed=0, noise="normal")
    assert abs((x**2).sum(1).mean().item() - 1.0) < 0.02
    assert abs(W.std().item() - 0.5) < 0.01
    assert abs(b.std().item() - 1.0) < 0.05


def test_make_linear_teacher_chunks_are_exact():
    # zero noise: labels are the argmax of the utilities, whatever the chunk size
    def zero(shape, generator=None, dtype=torch.float32):
        return torch.zeros(shape, dtype=dtype)

    x, y, W, b = make_linear_teacher(103, 5, 1000, noise=zero, seed=0, max_chunk_elements=7000)
    assert torch.equal(y, (x @ W.T + b).argmax(-1))
    big = make_linear_teacher(16, 4, 1_000_000, noise="gumbel", seed=0)
    assert big.W.shape == (1_000_000, 4) and big.y.shape == (16,)


@pytest.mark.parametrize("noise", ["gumbel", "normal", "logistic"])
def test_make_linear_teacher_argmax_matches_direct(noise):
    # labels equal argmax(x W^T + b + eps) with eps redrawn from the same stream
    g = torch.Generator().manual_seed(11)
    x, y, W, b = make_linear_teacher(64, 3, 20, noise=noise, generator=g)
    g2 = torch.Generator().manual_seed(11)
    torch.randn(64, 3, generator=g2), torch.randn(20, 3, generator=g2), torch.randn(20, generator=g2)
    eps = get_noise(noise).sample((64, 20), dtype=torch.float32, generator=g2)
    assert torch.equal(y, (x @ W.T + b + eps).argmax(-1))


def test_make_linear_teacher_gumbel_is_softmax():
    # With Gumbel noise the labels are Categorical(softmax(x W^T + b)). Per class k the
    # count n_k has mean sum_n p_nk and variance sum_n p_nk (1 - p_nk) (a sum of
    # independent Bernoullis); require |n_k - mean| < 4 standard errors for every class.
    N, D, K = 20_000, 10, 20
    x, y, W, b = make_linear_teacher(N, D, K, noise="gumbel", weight_scale=2.0, seed=0)
    probs = torch.softmax((x @ W.T + b).double(), -1)
    mean = probs.sum(0)
    se = (probs * (1 - probs)).sum(0).sqrt()
    counts = torch.bincount(y, minlength=K).double()
    z = (counts - mean) / se
    assert z.abs().max() < 4.0, z
    # and the probit teacher is a different law (sanity check that the test has power)
    _, y_probit, _, _ = make_linear_teacher(N, D, K, noise="normal", weight_scale=2.0, seed=0)
    z_probit = (torch.bincount(y_probit, minlength=K).double() - mean) / se
    assert z_probit.abs().max() > 4.0


@pytest.mark.parametrize("make,args,match", [
    (make_linear_teacher, (-1, 2, 3), r"num_samples must be an integer >= 0, got num_samples=-1"),
    (make_linear_teacher, (10, 0, 3), r"num_features must be an integer >= 1, got num_features=0"),
    (make_linear_teacher, (10, 2, 3.0), r"num_classes must be an integer >= 1, got num_classes=3.0"),
    (make_toy, (0, 5), r"num_classes must be an integer >= 1, got num_classes=0"),
])
def test_bad_sizes_are_named_with_their_value(make, args, match):
    """The teachers and the toy problem share one size check (numerics.check_int), which names
    the argument and its value (make_linear_teacher's check named neither)."""
    with pytest.raises(ValueError, match=match):
        make(*args)

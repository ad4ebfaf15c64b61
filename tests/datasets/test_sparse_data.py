"""pyro_ar.datasets: the sparse teacher (make_sparse_teacher) and bags of previous words."""

import math

import pytest
import torch

from pyro_ar.datasets import make_bag_of_words, make_sparse_teacher, to_scipy_csr


def test_sparse_teacher_shapes_nonzeros_and_reproducibility():
    a = make_sparse_teacher(300, 1000, 50, nnz_per_row=7, rank=3, seed=1)
    b = make_sparse_teacher(300, 1000, 50, nnz_per_row=7, rank=3, seed=1)
    assert a.x.layout == torch.sparse_coo and a.x.is_coalesced() and a.x.shape == (300, 1000)
    per_row = torch.bincount(a.x.indices()[0], minlength=300)
    assert per_row.max() <= 7 and per_row.min() >= 1
    assert torch.allclose(torch.sparse.sum(a.x, 1).to_dense(), torch.full((300,), 7.0))  # counts sum to m
    assert torch.equal(a.y, b.y) and torch.equal(a.x.to_dense(), b.x.to_dense())
    assert a.embedding.shape == (1000, 3) and a.weight.shape == (50, 3) and a.b.shape == (50,)


def test_sparse_teacher_labels_follow_the_teacher_softmax():
    """The teacher's own mean log-likelihood beats the label frequencies' by a margin far
    beyond its standard error (N = 4000: se of a mean of O(1) terms is about 0.03)."""
    d = make_sparse_teacher(4000, 200, 40, nnz_per_row=5, rank=4, seed=0)
    h = torch.sparse.mm(d.x, d.embedding) / math.sqrt(5)
    teacher = (h @ d.weight.T + d.b).log_softmax(-1)[torch.arange(4000), d.y].mean()
    freq = torch.bincount(d.y, minlength=40).double() / 4000
    unigram = freq.log()[d.y].mean()
    assert teacher > unigram + 0.5


@pytest.mark.parametrize("kwargs,match", [
    (dict(nnz_per_row=0), "nnz_per_row must be an integer >= 1"),
    (dict(rank=1.5), "rank must be an integer >= 1"),
    (dict(feature_power=-1.0), "must be >= 0"),
])
def test_sparse_teacher_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_sparse_teacher(10, 20, 5, **kwargs)


def test_bag_of_words_counts_the_previous_words():
    tokens = torch.tensor([1, 3, 3, 2, 1, 4])
    x = make_bag_of_words(tokens, num_features=5, window=3).to_dense()
    expected = torch.zeros(6, 5)
    for t in range(6):
        for i in range(max(0, t - 2), t + 1):
            expected[t, tokens[i]] += 1
    assert torch.equal(x, expected)
    # bags stop at the boundary token 1 (which they include)
    xs = make_bag_of_words(tokens, num_features=5, window=3, boundary_id=1).to_dense()
    assert xs[4].tolist() == [0.0, 1.0, 0.0, 0.0, 0.0] and xs[5].tolist() == [0.0, 1.0, 0.0, 0.0, 1.0]
    assert to_scipy_csr(make_bag_of_words(tokens, 5, 3)).toarray().tolist() == x.tolist()


def test_position_weighted_bag_weights_the_i_th_previous_word_by_a_i():
    tokens = torch.tensor([1, 3, 3, 2, 1, 4])
    a = torch.tensor([1.0, 0.5, 0.25])
    x = make_bag_of_words(tokens, 5, window=3, position_weights=a.tolist()).to_dense()
    expected = torch.zeros(6, 5)
    for t in range(6):
        for i in range(max(0, t - 2), t + 1):
            expected[t, tokens[i]] += a[t - i]  # tokens[t] is the first previous word
    assert torch.equal(x, expected)
    inverse = make_bag_of_words(tokens, 5, window=3, position_weights="inverse").to_dense()
    assert torch.allclose(inverse, make_bag_of_words(tokens, 5, 3, position_weights=[1, 1 / 2, 1 / 3]).to_dense())


@pytest.mark.parametrize("tokens,kw,match", [
    (torch.tensor([0.5]), {}, "tokens must be a 1-D integer tensor"),
    (torch.tensor([0, 9]), {}, r"tokens must lie in \[0, num_features=5\)"),
    (torch.tensor([0, 1]), dict(window=0), "window must be an integer >= 1"),
    (torch.tensor([0, 1]), dict(window=2, position_weights="harmonic"), "position_weights must be"),
    (torch.tensor([0, 1]), dict(window=2, position_weights=[1.0]), "position_weights must be None, 'inverse' or 2"),
    (torch.tensor([0, 1]), dict(window=2, position_weights=[1.0, -1.0]), "position_weights must be"),
])
def test_bag_of_words_bad_input_is_named(tokens, kw, match):
    with pytest.raises(ValueError, match=match):
        make_bag_of_words(tokens, 5, **kw)

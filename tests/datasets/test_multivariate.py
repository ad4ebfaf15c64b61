"""Multivariate categorical data: hiding entries, windows of sentences, the breast cancer and XOR sets."""

import pytest
import torch

from pyro_ar.datasets import (hide_entries, load_breast_cancer_categorical, load_breast_cancer_wisconsin,
                              make_xor_relations)
from pyro_ar.datasets.multivariate import sentence_windows


def test_hide_entries_partitions_each_row():
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 9, (50, 5), generator=g)
    x[::4, 1:4] = -1                                      # 13 rows with 2 observed entries
    x[0, :] = -1                                          # a row with nothing observed
    obs, tgt = hide_entries(x, num_hidden=2, seed=1)
    keep = (x >= 0).sum(1) > 2
    assert len(obs) == int(keep.sum())                    # rows with <= 2 observed entries dropped
    assert torch.equal(torch.where(obs >= 0, obs, tgt), x[keep])   # nothing lost, nothing added
    assert not ((obs >= 0) & (tgt >= 0)).any() and ((tgt >= 0).sum(1) == 2).all()
    o2, t2 = hide_entries(x, columns=[4], seed=1)
    assert ((t2 >= 0).nonzero()[:, 1] == 4).all()        # only the allowed column is hidden
    assert torch.equal(hide_entries(x, seed=3)[1], hide_entries(x, seed=3)[1])


@pytest.mark.parametrize("kwargs,match", [
    ({"num_hidden": 0}, "num_hidden"),
    ({"x": torch.zeros(3, 2)}, "x must be a 2-D integer tensor"),
])
def test_hide_entries_errors(kwargs, match):
    kwargs.setdefault("x", torch.zeros(3, 2, dtype=torch.long))
    with pytest.raises(ValueError, match=match):
        hide_entries(**kwargs)


def test_sentence_windows():
    w = sentence_windows([[3, 4, 5], [6], []], 3, boundary=1)
    assert w.tolist() == [[1, 3, 4], [3, 4, 5], [4, 5, 1], [1, 6, 1]]
    assert sentence_windows([[2]], 4, 1).shape == (0, 4)      # too short for a window


def test_breast_cancer_categorical():
    d = load_breast_cancer_categorical(num_bins=5, seed=2)
    assert d.train.shape == (427, 31) and d.test_observed.shape == d.test_target.shape == (142, 31)
    assert d.cardinalities == [5] * 30 + [2] and d.variable_names[-1] == "diagnosis"
    assert (d.train >= 0).all() and (d.train < torch.tensor(d.cardinalities)).all()
    assert ((d.test_target >= 0).sum(1) == 1).all()
    counts = torch.bincount(d.train[:, 0], minlength=5)   # quantile bins: about equal counts
    assert counts.min() > 0.6 * counts.max()
    with pytest.raises(ValueError, match="num_bins"):
        load_breast_cancer_categorical(num_bins=1)


def test_xor_relations():
    d = make_xor_relations(num_copies=3)
    assert d.train.shape == (12, 3) and torch.equal(d.train[:, 2], d.train[:, 0] ^ d.train[:, 1])
    assert (d.test_observed[:, 2] == -1).all() and (d.test_observed[:, :2] >= 0).all()
    with pytest.raises(ValueError, match="num_copies"):
        make_xor_relations(num_copies=0)


def test_breast_cancer_wisconsin_is_the_papers_683_biopsies():
    d = load_breast_cancer_wisconsin(seed=1)
    assert len(d.train) + len(d.test_observed) == 683 and d.test_observed.shape == (171, 10)
    assert d.cardinalities == [10] * 9 + [2] and d.variable_names[-1] == "diagnosis"
    full = torch.cat([d.train, d.test_observed.max(d.test_target)])
    assert (full >= 0).all() and (full < torch.tensor(d.cardinalities)).all()
    assert int(full[:, 9].sum()) == 239                      # malignant among the complete cases
    assert ((d.test_target >= 0).sum(1) == 1).all()
    assert not torch.equal(d.train, load_breast_cancer_wisconsin(seed=2).train)
    with pytest.raises(ValueError, match="test_fraction"):
        load_breast_cancer_wisconsin(test_fraction=1.0)

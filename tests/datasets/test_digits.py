"""pyro_ar.datasets.digits: scikit-learn's 8x8 digits."""

import pytest
import torch

from pyro_ar.datasets import load_digits


def test_digits():
    pytest.importorskip("sklearn")
    d = load_digits()
    assert d.x_train.shape == (1400, 64) and d.x_test.shape == (397, 64)
    assert d.x_train.dtype == torch.float32 and d.y_train.dtype == torch.int64
    assert d.num_classes == 10
    assert torch.allclose(d.x_train.mean(0), torch.zeros(64), atol=1e-5)
    std = d.x_train.std(0, unbiased=False)
    const = d.info["std"] == 1.0
    assert torch.allclose(std[~const], torch.ones(int((~const).sum())), atol=1e-4)
    assert torch.isfinite(d.x_test).all()
    again = load_digits()
    assert torch.equal(again.x_train, d.x_train) and torch.equal(again.y_test, d.y_test)
    other = load_digits(test_size=0.5, seed=3, standardize=False)
    assert other.num_test == 898 and other.x_train.max() == 16.0
    assert not torch.equal(other.info["test_index"][:10], d.info["test_index"][:10])

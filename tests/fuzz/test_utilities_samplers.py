"""Fuzz: utilities (dense and lazy linear) and the class samplers.

Utilities: a named error, or gathers that agree with ``full()``. Samplers: a named error,
or indices in ``[0, K)``, weights finite and >= 0, zero exactly where a shared class equals
the label, per-datapoint classes distinct and different from the label.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from pyro_ar import LinearUtility
from pyro_ar.utility import DenseUtility
from pyro_ar.negatives import get_negative_sampler
from pyro_ar.subsets import sample_without_replacement

from tests.fuzz import _harness as H
from tests.fuzz import strategies as S

pytestmark = [pytest.mark.usefixtures("seeded", "validation_on"), pytest.mark.slow]  # a fuzz battery


@settings(H.FUZZ, max_examples=150)
@given(B=st.integers(0, 3), K=st.integers(1, 6), D=st.integers(1, 4), st_data=st.data(),
       x_dtype=st.sampled_from([torch.float32] * 4 + [torch.float64, torch.int64]),
       has_bias=st.booleans(), bias_dtype=st.sampled_from([torch.float32] * 5 + [torch.float64]),
       d_off=st.sampled_from([0] * 8 + [1]), sparse=st.booleans(),
       index=st.lists(st.integers(-1, 7), min_size=0, max_size=4),
       index_kind=st.sampled_from(["long"] * 6 + ["float", "bool"]))
def test_linear_and_dense_utilities(B, K, D, st_data, x_dtype, has_bias, bias_dtype, d_off, sparse,
                                    index, index_kind):
    x = st_data.draw(S.tensors((B, D + d_off), (x_dtype,), bad_values=False))
    W = st_data.draw(S.tensors((K, D), (torch.float32,), bad_values=False))
    b = st_data.draw(S.tensors((K,), (bias_dtype,), bad_values=False)) if has_bias else None
    idx = torch.tensor(index, dtype=torch.long)
    idx = idx.float() if index_kind == "float" else idx.bool() if index_kind == "bool" else idx
    names = ("x", "weight", "bias", "index")

    def run():
        u = LinearUtility(x, W, b, sparse=sparse)
        return u, u.full(), u.gather_shared(idx), DenseUtility(u.full()).gather_shared(idx)

    ok, out = H.call(run, names, kind="utilities")
    if not ok:
        return
    u, full, shared, dense = out
    H.finite("LinearUtility.full", full)
    assert full.shape == (B, K)
    assert torch.allclose(shared, full[:, idx], rtol=1e-4, atol=1e-3) and torch.equal(dense, full[:, idx])
    if B and len(index):
        per = idx.expand(B, len(index))
        assert torch.allclose(u.gather(per), full.gather(-1, per), rtol=1e-4, atol=1e-3)


@settings(H.FUZZ, max_examples=200)
@given(strategy=S.strategies_(), k=S.num_negatives(), K=st.sampled_from([2, 3, 5, 10, 1000, np.int64(7), 1, 0, 2.5]),
       labels=st.lists(st.integers(0, 999), min_size=0, max_size=5), st_data=st.data())
def test_samplers(strategy, k, K, labels, st_data):
    Kp = K if isinstance(K, (int, np.integer)) and K >= 2 else 4
    proposal = st_data.draw(S.proposals(int(Kp), strategy))
    y = torch.tensor(labels, dtype=torch.long) % max(int(Kp), 1)
    names = ("num_negatives", "strategy", "proposal", "num_classes")
    ok, neg = H.call(lambda: get_negative_sampler(strategy, k, proposal)(y, K), names, kind="samplers")
    if not ok:
        return
    K = int(K)
    index, weight = neg.index, neg.weight.double()
    assert not index.is_floating_point() and ((index >= 0) & (index < K)).all()
    H.finite("negative weights", weight)
    assert (weight >= 0).all()
    full_index = index.expand(y.shape + index.shape[-1:]) if neg.shared else index
    w = weight.expand(full_index.shape)
    assert (w[full_index == y.unsqueeze(-1)] == 0).all()
    if not neg.shared and index.numel():
        assert (index != y.unsqueeze(-1)).all()
        assert all(len(set(row)) == len(row) for row in index.reshape(-1, index.shape[-1]).tolist())


@settings(H.FUZZ, max_examples=100)
@given(n=st.sampled_from([0, 1, 5, 100, 10 ** 6, np.int64(9), -1, 2.5]),
       k=st.sampled_from([0, 1, 3, 5, 50, np.int32(2), -2, 1.5]),
       shape=st.sampled_from([(), (3,), (2, 2), (0,)]))
def test_sample_without_replacement(n, k, shape):
    ok, out = H.call(lambda: sample_without_replacement(n, k, shape), ("n", "k"), kind="samplers")
    if ok:
        assert out.shape == torch.Size(shape) + (int(k),)
        assert ((out >= 0) & (out < int(n))).all()
        if int(k):
            assert all(len(set(r)) == len(r) for r in out.reshape(-1, int(k)).tolist())

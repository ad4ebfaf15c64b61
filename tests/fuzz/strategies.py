"""Hypothesis strategies for the fuzz suite: utilities, labels, options (good and bad)."""

import math

import numpy as np
import torch
from hypothesis import strategies as st

FLOAT_DTYPES = [torch.float32, torch.float64]
SCALES = [0.0, 1.0, 5.0, 30.0, 1e3, 1e4]


@st.composite
def tensors(draw, shape, dtypes=(torch.float32, torch.float64), scale=None, bad_values=True):
    """A tensor of ``shape``: mostly finite values up to |1e4|, sometimes NaN/inf or another dtype."""
    n = int(np.prod(shape)) if len(shape) else 1
    dtype = draw(st.sampled_from(list(dtypes)))
    if dtype not in (torch.float32, torch.float64) and draw(st.integers(0, 4)):
        dtype = draw(st.sampled_from([torch.float32, torch.float64]))  # other dtypes: rarely
    s = draw(st.sampled_from(SCALES)) if scale is None else scale
    vals = draw(st.lists(st.floats(-1.0, 1.0, width=32), min_size=n, max_size=n))
    t = torch.tensor(vals, dtype=torch.float64).reshape(shape) * s
    if bad_values and n and draw(st.integers(0, 19)) == 0:
        i = draw(st.integers(0, n - 1))
        t.view(-1)[i] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
    if dtype.is_floating_point:
        return t.to(dtype)
    return t.nan_to_num(0.0).round().to(dtype)


@st.composite
def utility_and_labels(draw, max_b=3, max_k=6, min_k=0, dtypes=(torch.float32, torch.float64),
                       batch_dims=True):
    """``(utility, labels)``: usually a valid (B, K) pair, sometimes off in shape, range or dtype."""
    B = draw(st.integers(0 if draw(st.integers(0, 9)) == 0 else 1, max_b))
    K = draw(st.integers(min_k, max_k)) if draw(st.integers(0, 9)) == 0 else draw(st.integers(2, max_k))
    shape = (B, K)
    if batch_dims and draw(st.integers(0, 4)) == 0:
        shape = draw(st.sampled_from([(K,), (B, 1, K)]))
    utility = draw(tensors(shape, dtypes))
    labels = draw(labels_for(B, K))
    return utility, labels


@st.composite
def labels_for(draw, B, K):
    kind = draw(st.integers(0, 29))
    lo, hi = (-1, K) if kind == 0 else (0, max(K - 1, 0))
    n = B if kind != 1 else B + 1
    vals = draw(st.lists(st.integers(lo, hi), min_size=n, max_size=n))
    t = torch.tensor(vals, dtype=torch.long).reshape(n)
    if kind == 2:
        return t.double() + draw(st.sampled_from([0.0, 0.5]))
    if kind == 3:
        return t.bool()
    if kind == 4:
        return vals  # a list, not a tensor
    return t


NOISES = ["gumbel", "normal", "logistic", "laplace", "student_t3"]
BAD_NOISES = ["cauchy", 3, None]


def noises():
    return st.sampled_from(NOISES * 4 + BAD_NOISES)


def num_negatives():
    return st.sampled_from([None, None, 1, 2, 3, 5, 8, np.int64(2), np.int32(1),
                            None, 1, 2, 4, 0, -5, 2.5, True, "3"])


def strategies_():
    return st.sampled_from(["per_datapoint", "shared", "importance"] * 3 + ["uniform"])


@st.composite
def proposals(draw, K, strategy):
    kind = draw(st.integers(0, 19))
    if strategy != "importance" and kind:
        return None
    kind = kind if kind < 3 else 3
    if kind == 0:
        return None
    if kind == 1:
        return torch.ones(K + 1)  # wrong size
    if kind == 2:
        return -torch.ones(max(K, 1))
    vals = draw(st.lists(st.floats(0.01, 100.0), min_size=K, max_size=K))
    return torch.tensor(vals, dtype=torch.float64)


@st.composite
def arguments(draw, good, bad):
    """Keyword arguments: each from its ``good`` values, except at most one (half of the
    time) taken from its ``bad`` values -- so that half the inputs exercise a valid call."""
    out = {name: draw(st.sampled_from(values)) for name, values in good.items()}
    names = sorted(bad)
    which = draw(st.integers(0, 2 * len(names) - 1))
    if which < len(names):
        out[names[which]] = draw(st.sampled_from(bad[names[which]]))
    return out

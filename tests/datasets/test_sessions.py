"""Session data sets: padding, the held-out split, the RecoGym-style simulator."""

import pytest
import torch

from pyro_ar.datasets import make_recogym_sessions, pad_sessions, split_sessions


def test_pad_sessions_and_errors():
    out = pad_sessions([[1, 2, 3], [], [4]])
    assert out.tolist() == [[1, 2, 3], [-1, -1, -1], [4, -1, -1]] and out.dtype == torch.int64
    with pytest.raises(ValueError, match="max_items"):
        pad_sessions([[1]], max_items=0)


def test_split_sessions_partitions_each_session():
    items = torch.randint(0, 50, (30, 9))
    items[::3, 5:] = -1
    obs, held = split_sessions(items, 0.3, seed=1)
    for row, o, h in zip(items, obs, held):
        both = sorted(o[o >= 0].tolist() + h[h >= 0].tolist())
        assert both == sorted(row[row >= 0].tolist())        # nothing lost, nothing added
        assert len(h[h >= 0]) == max(1, round(0.3 * len(row[row >= 0])))
    with pytest.raises(ValueError, match="heldout_fraction"):
        split_sessions(items, 1.0)


def test_recogym_sessions_shapes_and_determinism():
    a = make_recogym_sessions(num_products=80, num_train=30, num_test=20, seed=3)
    b = make_recogym_sessions(num_products=80, num_train=30, num_test=20, seed=3)
    assert torch.equal(a.train, b.train) and torch.equal(a.test_heldout, b.test_heldout)
    assert a.train.shape[0] == 30 and a.test_observed.shape[0] == 20
    assert int(a.train.max()) < 80 and int(a.train.min()) >= -1
    assert ((a.train >= 0).sum(1) >= 1).all()
    assert int(a.item_counts.sum()) == int((a.train >= 0).sum())
    # the organic model concentrates views: the top 10% of products get most of them
    top = a.item_counts.sort(descending=True).values[:8].sum() / a.item_counts.sum()
    assert top > 0.3

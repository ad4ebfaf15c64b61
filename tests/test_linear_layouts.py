"""The one linear-utility computation: every weight layout (dense W, dense or sparse x, low
rank, pattern, transformed rows, class shard) and every reader (training gathers,
evaluation's sources, the sharded evaluation, the Bayesian local guide) give
psi = x W^T + b of the naive dense product, at float64 (tolerance: a few ulps, the fused
product's rounding), and the gathers never do O(K) work."""

import pytest
import torch

import pyro_ar as ar
from pyro_ar.distributed import ShardedLinearUtility, class_shard
from pyro_ar.distributed.sharded_evaluation import sharded_evaluate
from pyro_ar.evaluation import iter_chunks, linear_source, log_likelihood, predict_log_proba
from pyro_ar.models import LinearClassifier
from pyro_ar.utility import LinearUtility, LinearWeights
from pyro_ar.weight_pattern import PatternLinearUtility, PatternWeights, WeightPattern
from pyro_ar.likelihoods import AR

B, D, K, R, S = 9, 7, 23, 3, 4
TOL = dict(rtol=1e-13, atol=1e-13)


def _problem(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, D, generator=g, dtype=torch.float64) * (torch.rand(B, D, generator=g) < 0.4)
    W, b = torch.randn(K, D, generator=g, dtype=torch.float64), torch.randn(K, generator=g, dtype=torch.float64)
    y = torch.randint(K, (B,), generator=g)
    return x, W, b, y, g


def _pattern(x, y, g):
    rows, cols = x.nonzero(as_tuple=True)
    pattern = WeightPattern.from_cooccurrence(rows, cols, y, K, D)
    return pattern, torch.randn(len(pattern), generator=g, dtype=torch.float64)


def _layouts():
    """name -> (utility of x (dense or sparse), dense reference W (K, D), b)."""
    x, W, b, y, g = _problem()
    pattern, w = _pattern(x, y, g)
    V, E = torch.randn(K, R, generator=g, dtype=torch.float64), torch.randn(D, R, generator=g, dtype=torch.float64)
    square = LinearWeights(W, None, transform=torch.square)
    return x, y, {
        "dense": (lambda xx: LinearUtility(xx, W, b), W, b),
        "dense_sparse_grad": (lambda xx: LinearUtility(xx, W, b, sparse=True), W, b),
        "no_bias": (lambda xx: LinearUtility(xx, W), W, None),
        "low_rank": (lambda xx: LinearUtility.low_rank(xx, V, E, b), V @ E.T, b),
        "pattern": (lambda xx: PatternLinearUtility(xx, pattern, w, b), pattern.dense(w), b),
        "squared_rows": (lambda xx: LinearUtility.of(xx, square), W * W, None),
    }


@pytest.mark.parametrize("sparse_x", [False, True])
@pytest.mark.parametrize("layout", ["dense", "dense_sparse_grad", "no_bias", "low_rank", "pattern", "squared_rows"])
def test_every_layout_reads_the_dense_product(layout, sparse_x):
    x, y, layouts = _layouts()
    make, Wd, b = layouts[layout]
    exact = x @ Wd.T + (0 if b is None else b)
    u = make(x.to_sparse() if sparse_x else x)
    g = torch.Generator().manual_seed(1)
    idx, shared = torch.randint(K, (B, 5), generator=g), torch.randint(K, (6,), generator=g)
    torch.testing.assert_close(u.full(), exact, **TOL)
    torch.testing.assert_close(u.gather(idx), exact.gather(1, idx), **TOL)
    torch.testing.assert_close(u.gather_shared(shared), exact[:, shared], **TOL)
    psi_y, psi_neg = u.gather_label_and_shared(y, shared)
    torch.testing.assert_close(psi_y[:, 0], exact[torch.arange(B), y], **TOL)
    torch.testing.assert_close(psi_neg, exact[:, shared], **TOL)
    # evaluation reads the same utility chunk by chunk, in float64
    lp = predict_log_proba(u, chunk_size=4)
    torch.testing.assert_close(lp, torch.log_softmax(exact, -1), **TOL)


@pytest.mark.parametrize("layout", ["dense", "pattern", "low_rank", "squared_rows"])
def test_gathers_do_no_o_k_work(layout, monkeypatch):
    """The gathers of a training step never multiply by all K classes (no product) and, with
    sparse gradients, touch only the classes asked for."""
    x, y, layouts = _layouts()
    u = layouts[layout][0](x.to_sparse() if layout == "pattern" else x)

    def no_product(self, x):
        raise AssertionError("a gather computed all K utilities")

    monkeypatch.setattr(LinearWeights, "product", no_product)
    monkeypatch.setattr(PatternWeights, "product", no_product)
    shared = torch.tensor([3, 17])
    u.gather_label_and_shared(y, shared)
    u.gather(shared.expand(B, 2))
    u.gather_shared(shared)
    W = torch.randn(K, D, dtype=torch.float64, requires_grad=True)
    lw = LinearWeights(W, None, sparse=True, transform=u.weights.transform)
    LinearUtility.of(x, lw).gather_label_and_shared(y, shared)[1].sum().backward()
    touched = set(W.grad.coalesce().indices()[0].tolist())
    assert touched <= {3, 17} | set(y.tolist())


def test_transformed_rows_of_a_sparse_x():
    """Regression: the sparse-x path transforms the entries it gathers too (the variance
    utilities squared the dense path's rows only)."""
    x, W, _, _, _ = _problem(2)
    lw = LinearWeights(W, None, transform=torch.square)
    idx = torch.randint(K, (B, 3))
    torch.testing.assert_close(LinearUtility.of(x.to_sparse(), lw).gather(idx),
                               LinearUtility.of(x, lw).gather(idx), **TOL)


@pytest.mark.parametrize("sparse_x", [False, True])
def test_linear_source_layouts_match_the_dense_product(sparse_x):
    x, W, b, y, g = _problem(3)
    xx = x.to_sparse() if sparse_x else x
    ids = torch.tensor([0, 4, 8, 2])
    pattern, w = _pattern(x, y, g)
    Ws, bs = torch.randn(S, K, D, generator=g, dtype=torch.float64), torch.randn(S, K, generator=g, dtype=torch.float64)
    V, E = torch.randn(S, K, R, generator=g, dtype=torch.float64), torch.randn(S, D, R, generator=g, dtype=torch.float64)
    xs = x[ids]
    torch.testing.assert_close(linear_source(xx, W, b)(ids), xs @ W.T + b, **TOL)
    torch.testing.assert_close(linear_source(xx, Ws, bs)(ids), xs @ Ws.transpose(1, 2) + bs[:, None], **TOL)
    torch.testing.assert_close(linear_source(xx, pattern.sparse(w), b)(ids), xs @ pattern.dense(w).T + b, **TOL)
    torch.testing.assert_close(linear_source(xx, V[0], b, embedding=E[0])(ids), xs @ (V[0] @ E[0].T).T + b, **TOL)
    torch.testing.assert_close(linear_source(xx, V, bs, embedding=E)(ids),
                               xs @ (V @ E.transpose(1, 2)).transpose(1, 2) + bs[:, None], **TOL)


def test_pattern_utility_is_evaluated_chunk_by_chunk(monkeypatch):
    """A PatternLinearUtility is evaluated chunk by chunk (it was computed for all rows at once)."""
    x, _, b, y, g = _problem(4)
    pattern, w = _pattern(x, y, g)
    seen, product = [], PatternWeights.product

    def spy(self, xb):
        seen.append(xb.shape[0])
        return product(self, xb)

    monkeypatch.setattr(PatternWeights, "product", spy)
    u = PatternLinearUtility(x.to_sparse(), pattern, w, b)
    assert [c.ids.numel() for c in iter_chunks(u, chunk_size=4)] == [4, 4, 1] and seen == [4, 4, 1]


@pytest.mark.parametrize("kw", [{}, {"rank": R}, {"utility": "dense"}, "pattern"])
def test_model_training_and_evaluation_utilities_agree(kw):
    """LinearClassifier: the training utilities (minibatch_utility) and the evaluation ones
    (utility) are the same computation of the same layout."""
    x, _, _, y, g = _problem(5)
    kw = {"weight_pattern": _pattern(x, y, g)[0]} if kw == "pattern" else kw
    model = LinearClassifier(D, K, likelihood=AR(negatives=5), **kw)
    params = {n: torch.randn(s, generator=g, dtype=torch.float64) for n, s in model.parameter_shapes().items()}
    for xx in (x, x.to_sparse()):
        full = model.minibatch_utility(xx, params).full()
        torch.testing.assert_close(model.utility(xx, params).full(), full, **TOL)
        torch.testing.assert_close(log_likelihood(model.utility(xx, params), y, reduce="none"),
                                   torch.log_softmax(full, -1)[torch.arange(B), y], **TOL)


def test_sharded_utility_and_evaluation_read_the_shard_layout():
    x, W, b, y, _ = _problem(6)
    exact = x @ W.T + b
    u = ShardedLinearUtility(x, W, b, class_shard(K, 0, 1))
    torch.testing.assert_close(u.label_utility(y), exact[torch.arange(B), y], **TOL)
    out = sharded_evaluate(u, y, reduce="none", chunk_size=4)
    torch.testing.assert_close(out["log_lik"], torch.log_softmax(exact, -1)[torch.arange(B), y], **TOL)
    # a shard's own classes: the shard's rows under local indices
    shard = class_shard(K, 1, 2)
    part = ShardedLinearUtility(x, W[shard.start:shard.stop], b[shard.start:shard.stop], shard)
    torch.testing.assert_close(part.local.full(), exact[:, shard.start:shard.stop], **TOL)


def test_layout_errors_are_named():
    x, W, b, y, g = _problem(7)
    pattern, w = _pattern(x, y, g)
    with pytest.raises(ValueError, match="weights must be a LinearWeights layout"):
        LinearUtility.of(x, W)
    with pytest.raises(ValueError, match=r"x of PatternWeights\(.*\) must be 2-D"):
        PatternLinearUtility(x.expand(2, B, D), pattern, w, b)
    with pytest.raises(ValueError, match="cannot be expanded"):
        PatternLinearUtility(x, pattern, w, b).expand((2, B))
    with pytest.raises(NotImplementedError, match="no dense rows"):
        PatternWeights(pattern, w).rows(torch.tensor([0]))
    assert repr(LinearUtility.of(x, PatternWeights.from_sparse(pattern.sparse(w), b))).startswith("LinearUtility(")
    assert ar.utility.LinearWeights is LinearWeights


def test_sparse_gp_moments_are_linear_utilities():
    """SparseGPUtility's mean a.m_r + b_r and variance a^2.s_r^2 + resid: the linear family's."""
    from pyro_ar.models.latent_gp import SparseGPUtility

    g = torch.Generator().manual_seed(8)
    M = 5
    a, resid = torch.randn(B, 1, M, generator=g, dtype=torch.float64), torch.rand(B, 1, generator=g, dtype=torch.float64)
    loc, log_scale = torch.randn(K, M, generator=g, dtype=torch.float64), torch.randn(K, M, generator=g, dtype=torch.float64)
    bias = torch.randn(K, generator=g, dtype=torch.float64)
    u = SparseGPUtility(a, resid, loc, log_scale, bias)
    mean, var = a @ loc.T + bias, (a * a) @ log_scale.mul(2).exp().T + resid.unsqueeze(-1)   # (B, 1, K)
    idx = torch.randint(K, (B, 3, 4), generator=g)
    m, v = u.moments(idx)
    torch.testing.assert_close(m, mean.expand(B, 3, K).gather(-1, idx), **TOL)
    torch.testing.assert_close(v, var.expand(B, 3, K).gather(-1, idx), **TOL)
    shared = torch.tensor([4, 0, 22])
    m, v = u.moments(shared)
    torch.testing.assert_close(m, mean[..., shared], **TOL)
    torch.testing.assert_close(v, var[..., shared], **TOL)

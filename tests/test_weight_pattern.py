"""W on a (class, feature) pattern: WeightPattern, PatternLinearUtility, LinearClassifier(weight_pattern=)."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

import pyro
from pyro.infer import SVI

from pyro_ar.infer import ClosedFormELBO, default_guide
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import LazyAdam, lazy_adam
from pyro_ar.weight_pattern import PatternLinearUtility, PatternWeights, WeightPattern
from pyro_ar.likelihoods import AR
from pyro_ar.models import Init, MAP


def _problem(seed=0, N=60, D=15, K=9):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(N, D, generator=g) < 0.25) * torch.rand(N, D, generator=g)
    y = torch.randint(K, (N,), generator=g)
    rows, cols = x.nonzero(as_tuple=True)
    return x, y, WeightPattern.from_cooccurrence(rows, cols, y, K, D)


def test_pattern_is_the_training_cooccurrence():
    x, y, pattern = _problem()
    k, j = pattern.coordinates()
    expected = {(int(y[n]), int(f)) for n, f in zip(*x.nonzero(as_tuple=True))}
    assert set(zip(k.tolist(), j.tolist())) == expected and len(pattern) == len(expected)


@pytest.mark.parametrize("sparse_x", [True, False])
def test_utilities_equal_the_dense_product(sparse_x):
    x, y, pattern = _problem(1)
    w, b = torch.randn(len(pattern), dtype=torch.float64), torch.randn(9, dtype=torch.float64)
    x = x.double()
    exact = x @ pattern.dense(w).T + b
    psi = PatternLinearUtility(x.to_sparse() if sparse_x else x, pattern, w, b)
    idx = torch.randint(9, (60, 4))
    assert torch.allclose(psi.full(), exact)
    assert torch.allclose(psi.gather(idx), exact.gather(1, idx))
    shared = torch.tensor([0, 5, 8])
    assert torch.allclose(psi.gather_shared(shared), exact[:, shared])
    psi_y, psi_neg = psi.gather_label_and_shared(y, shared)
    assert torch.allclose(psi_y[:, 0], exact.gather(1, y[:, None])[:, 0]) and torch.allclose(psi_neg, exact[:, shared])


def test_gradient_is_sparse_and_touches_only_the_entries_used():
    x, y, pattern = _problem(2)
    w = torch.randn(len(pattern), requires_grad=True)
    psi = PatternLinearUtility(x.to_sparse(), pattern, w, torch.zeros(9), sparse=True)
    psi.gather(y[:, None]).sum().backward()
    g = w.grad.coalesce()
    assert g.is_sparse
    dense_grad = torch.autograd.functional.jacobian(
        lambda v: (x @ pattern.dense(v).T).gather(1, y[:, None]).sum(), w.detach())
    assert torch.allclose(g.to_dense(), dense_grad, atol=1e-6)
    assert set(g.indices()[0].tolist()) == set(dense_grad.nonzero()[:, 0].tolist())


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(1, 3000), st.floats(0.0, 1.0), st.integers(1, 300), st.integers(0, 2**31 - 1))
def test_lookup_finds_exactly_the_keys_binary_search_finds(K, D, fill, m, seed):
    """The hash table's lookup against a binary search of the sorted keys: the same hits, and
    at each hit the key's own position (sparse and dense patterns, the first and last keys)."""
    g = torch.Generator().manual_seed(seed)
    n = max(1, int(fill * min(K * D, 5000)))
    keys = torch.unique(torch.cat([torch.randint(0, K * D, (n,), generator=g), torch.tensor([0, K * D - 1])]))
    pattern = WeightPattern(keys, K, D)
    found = keys[torch.randint(0, len(keys), (m,), generator=g)]
    key = torch.cat([found, torch.randint(0, K * D, (m,), generator=g)])
    classes, cols = key // D, key % D
    pos, hit = pattern.lookup(classes.reshape(2, m), cols.reshape(2, m))
    ref = torch.searchsorted(keys, key).clamp(max=len(keys) - 1)
    assert pos.shape == hit.shape == (2, m)
    assert torch.equal(hit.reshape(-1), keys[ref] == key)
    assert torch.equal(pos.reshape(-1)[hit.reshape(-1)], ref[keys[ref] == key])


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(1, 30), st.integers(1, 40), st.integers(0, 2**31 - 1))
def test_entries_gradient_holds_only_the_pairs_found(K, D, m, seed):
    """Pairs off the pattern read 0 and put nothing into the sparse gradient (no zero-valued
    entry at the position their search ends on), so a LazyAdam step moves, and counts a step
    for, exactly the entries found; the values and the dense gradient are the dense W's."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.unique(torch.randint(0, K * D, (K * D // 3 + 1,), generator=g))
    pattern = WeightPattern(keys, K, D)
    classes, cols = torch.randint(0, K, (m, 3), generator=g), torch.randint(0, D, (m, 3), generator=g)
    w = torch.randn(len(keys), dtype=torch.float64, generator=g, requires_grad=True)
    dense = pattern.dense(w.detach())
    pos, hit = pattern.lookup(classes, cols)
    for sparse in (True, False):
        out = PatternWeights(pattern, w, sparse=sparse).entries(classes, cols)
        assert torch.equal(out.detach(), dense[classes, cols])
        grad, = torch.autograd.grad((out * torch.arange(1.0, out.numel() + 1).reshape(out.shape)).sum(), w)
        grad = grad.coalesce() if sparse else grad
        if sparse:
            assert set(grad.indices()[0].tolist()) == set(pos[hit].tolist())
            grad = grad.to_dense()
        jac = torch.zeros(len(keys), dtype=torch.float64).index_add_(
            0, pos[hit], torch.arange(1.0, out.numel() + 1, dtype=torch.float64).reshape(out.shape)[hit])
        assert torch.equal(grad, jac)
    opt = LazyAdam([w], lr=0.1)
    PatternWeights(pattern, w, sparse=True).entries(classes, cols).sum().backward()
    before = w.detach().clone()
    opt.step()
    moved = set((w.detach() != before).nonzero()[:, 0].tolist())
    assert moved <= set(pos[hit].tolist())
    assert set(opt.state[w]["row_step"].nonzero()[:, 0].tolist()) == set(pos[hit].tolist())


@pytest.mark.parametrize("bad, match", [
    (dict(keys=torch.tensor([1.0])), "int64"),
    (dict(keys=torch.tensor([1, 1])), "distinct"),
    (dict(keys=torch.tensor([100])), r"\[0, 6\)"),
])
def test_pattern_rejects_bad_keys(bad, match):
    with pytest.raises(ValueError, match=match):
        WeightPattern(bad["keys"], 2, 3)


def test_model_rejects_a_pattern_it_cannot_use():
    _, _, pattern = _problem()
    with pytest.raises(ValueError, match="over \\(9, 16\\)"):
        LinearClassifier(16, 9, weight_pattern=pattern)
    with pytest.raises(ValueError, match="rank=None"):
        LinearClassifier(15, 9, weight_pattern=pattern, rank=2)
    with pytest.raises(ValueError, match="init.weight must be a tensor of shape"):
        LinearClassifier(15, 9, weight_pattern=pattern, init=Init(weight=torch.zeros(3)))
    with pytest.raises(ValueError, match="needs a weight_pattern"):
        LinearClassifier(15, 9, init=Init(weight=torch.zeros(3)))


def test_map_log_prior_estimate_is_unbiased_around_weight_loc():
    """The entry-subsampled log-prior averages to the exact sum over all entries (mean of
    2,000 draws; tolerance 4 standard errors of that mean)."""
    _, _, pattern = _problem(3)
    loc = torch.randn(len(pattern), dtype=torch.float64)
    model = LinearClassifier(15, 9, weights=MAP(prior_scale=0.5, penalize_bias=False, num_prior_entries=5),
                             init=Init(weight=loc), weight_pattern=pattern)
    w = loc + torch.randn(len(pattern), dtype=torch.float64)
    params = {"weight": w, "bias": torch.zeros(9, dtype=torch.float64)}
    exact = torch.distributions.Normal(loc, 0.5).log_prob(w).sum()
    torch.manual_seed(0)
    draws = torch.stack([model.log_prior_estimate(params) for _ in range(2000)])
    assert abs(draws.mean() - exact) < 4 * draws.std() / 2000 ** 0.5


def test_svi_on_the_pattern_fits_the_training_data():
    x, y, pattern = _problem(4, N=300, D=40, K=12)
    pyro.clear_param_store()
    torch.manual_seed(0)
    model = LinearClassifier(40, 12, likelihood=AR(negatives=4), subsample_size=64, sparse=True,
                             weight_pattern=pattern)
    svi = SVI(model, default_guide(model, local_first=True), lazy_adam({"lr": 0.05}), ClosedFormELBO())
    xs = x.to_sparse()
    for _ in range(300):
        svi.step(xs, y)
    ll = model.log_likelihood(xs, y)
    assert ll > -torch.log(torch.tensor(12.0)).item() + 0.5, ll  # well above uniform
    assert pyro.param("weight").shape == (len(pattern),)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_pattern_utility_and_estimator_path(monkeypatch):
    """The pattern path on a CUDA device: utilities against the dense product, one SVI step
    with lazy Adam, and the estimator's fit and prediction (its pattern path forced small)."""
    import numpy as np
    import scipy.sparse as sp

    import pyro_ar.training_path as training_path
    from pyro_ar import ARClassifier

    dev = torch.device("cuda")
    x, y, pattern = _problem(5)
    x, y, pattern = x.to(dev), y.to(dev), pattern.to(dev)
    w, b = torch.randn(len(pattern), device=dev), torch.randn(9, device=dev)
    psi = PatternLinearUtility(x.to_sparse(), pattern, w, b)
    assert torch.allclose(psi.full(), x @ pattern.dense(w).T + b, atol=1e-5)
    pyro.clear_param_store()
    model = LinearClassifier(15, 9, likelihood=AR(negatives=3), subsample_size=16, sparse=True,
                             weight_pattern=pattern)
    svi = SVI(model, default_guide(model, local_first=True), lazy_adam({"lr": 0.05}), ClosedFormELBO())
    assert torch.isfinite(torch.tensor(svi.step(x.to_sparse(), y)))
    assert pyro.param("weight").device.type == "cuda"
    monkeypatch.setattr(training_path, "FULL_RANK_MAX_BYTES", 1 << 10)
    rng = np.random.RandomState(0)
    X = sp.random(300, 200, density=0.05, format="csr", random_state=rng)
    labels = rng.randint(40, size=300)
    clf = ARClassifier(device="cuda", random_state=0, max_epochs=2).fit(X, labels)
    assert clf.training_path_.weight_pattern
    assert np.allclose(clf.predict_proba(X[:20]).sum(1), 1.0)


@pytest.mark.parametrize("K, D, B, seed", [(7, 5, 3, 0), (50, 40, 9, 1), (1, 1, 1, 2), (300, 20, 17, 3)])
def test_product_of_every_input_layout_equals_the_dense_product(K, D, B, seed):
    """PatternWeights.product (sparse x read through the pattern's columns, dense x through
    torch.sparse.mm) against x W^T + b with the dense W, rows with no non-zero included; and the
    gradient of the entries equals the dense one's at the pattern."""
    g = torch.Generator().manual_seed(seed)
    keys = torch.unique(torch.randint(0, K * D, (K * D // 3 + 1,), generator=g))
    weight = torch.randn(len(keys), dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(K, dtype=torch.float64, generator=g)
    pw = PatternWeights(WeightPattern(keys, K, D), weight, bias)
    x = torch.randn(B, D, dtype=torch.float64, generator=g) * (torch.rand(B, D, generator=g) < 0.3)
    x[0] = 0.0
    expected = x @ pw.pattern.dense(weight).T + bias
    for layout in (x, x.to_sparse(), x.to_sparse_csr()):
        torch.testing.assert_close(pw.product(layout), expected)
    with torch.no_grad():  # no gradient asked: the compiled (scipy) product, same sums
        assert pw._compiled_product_applies(x.to_sparse()) and not pw._compiled_product_applies(x.T.to_sparse()[None])
        for layout in (x.to_sparse(), x.to_sparse_csr()):
            torch.testing.assert_close(pw.product(layout), expected)
        weight.mul_(-2.0)  # an in-place update: W^T is rebuilt, not read from the last call
        torch.testing.assert_close(pw.product(x.to_sparse()), x @ pw.pattern.dense(weight).T + bias)
        weight.div_(-2.0)
        pw32 = PatternWeights(pw.pattern, weight.float(), bias.float())
        torch.testing.assert_close(pw32.product(x.float().to_sparse()), expected.float(), rtol=1e-5, atol=1e-5)
    cotangent = torch.randn(B, K, dtype=torch.float64, generator=g)
    grad_sparse, = torch.autograd.grad((pw.product(x.to_sparse()) * cotangent).sum(), weight)
    grad_dense, = torch.autograd.grad((expected * cotangent).sum(), weight)
    torch.testing.assert_close(grad_sparse, grad_dense)


# ------------------------------------------------------------------ bad inputs (issue 38)
@pytest.mark.parametrize("K,D,match", [
    (0, 3, "num_classes must be an integer >= 1"), (-2, 3, "num_classes must be an integer >= 1"),
    (2.5, 3, r"num_classes must be an integer >= 1, got num_classes=2.5"), ("2", 3, "num_classes"),
    (None, 3, "num_classes"), (2, 0, "num_features must be an integer >= 1"), (2, None, "num_features"),
    (2**40, 2**40, r"num_classes \* num_features must be below 2\*\*63"),
])
def test_pattern_rejects_bad_sizes(K, D, match):
    with pytest.raises(ValueError, match=match):
        WeightPattern(torch.tensor([0]), K, D)


def test_lookup_refuses_out_of_range_and_mismatched_entries():
    """A col >= D made the flat key k D + j alias entry (k + 1, j - D): hit=True for an entry
    not in the pattern."""
    pattern = WeightPattern(torch.tensor([0, 4, 5]), num_classes=2, num_features=3)
    with pytest.raises(ValueError, match=r"cols must lie in \[0, 3\), got values in \[3, 3\]"):
        pattern.lookup(torch.tensor([0]), torch.tensor([3]))    # (0, 3) would alias (1, 0)
    with pytest.raises(ValueError, match=r"classes must lie in \[0, 2\)"):
        pattern.lookup(torch.tensor([-1]), torch.tensor([2]))
    with pytest.raises(ValueError, match=r"classes and cols must have shapes that broadcast, got \(3,\) and \(2,\)"):
        pattern.lookup(torch.tensor([0, 1, 1]), torch.tensor([0, 1]))
    with pytest.raises(ValueError, match=r"values must be a tensor of shape \(3,\)"):
        pattern.dense(torch.ones(4))
    with pytest.raises(ValueError, match=r"values must be a tensor of shape \(3,\)"):
        pattern.sparse(torch.ones(2, 3))


@pytest.mark.parametrize("W", [torch.ones(2, 3), torch.ones(2, 3, 2).to_sparse(), "W"])
def test_from_sparse_needs_a_2d_sparse_matrix(W):
    from pyro_ar.weight_pattern import PatternWeights

    with pytest.raises(ValueError, match=r"W must be a 2-D torch sparse COO tensor"):
        PatternWeights.from_sparse(W)


def _steps(model, x, y, num_steps=2):
    from pyro_ar.infer import default_elbo, train

    pyro.clear_param_store()
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    return train(svi, x, y, num_steps=num_steps)[-1]["loss"]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_weight_loc_must_be_finite(value):
    """It failed with torch's constraint message from inside an SVI step."""
    x, y, pattern = _problem()
    loc = torch.zeros(len(pattern)).index_fill(0, torch.tensor([3]), value)
    with pytest.raises(ValueError, match=r"init.weight must be finite, got non-finite values .* init.weight\[3\]"):
        LinearClassifier(15, 9, weight_pattern=pattern, init=Init(weight=loc))


def test_an_empty_pattern_fits_the_bias_only():
    """W = 0: the MAP prior of no entries is 0 (was a ZeroDivisionError), the utilities the bias."""
    x, y, _ = _problem()
    empty = WeightPattern(torch.zeros(0, dtype=torch.long), 9, 15)
    assert empty.lookup(torch.tensor([1, 2]), torch.tensor([0, 14]))[1].tolist() == [False, False]
    model = LinearClassifier(15, 9, weight_pattern=empty, weights="map", subsample_size=20)
    assert torch.isfinite(torch.tensor(_steps(model, x, y)))
    psi = PatternLinearUtility(x.to_sparse(), empty, torch.zeros(0), torch.arange(9.0))
    assert torch.equal(psi.full(), torch.arange(9.0).expand(60, 9))


def test_from_cooccurrence_names_its_bad_coordinates():
    """A col >= D gave 'keys must be distinct flat indices', naming no argument of the call."""
    rows, cols, labels = torch.tensor([0, 1]), torch.tensor([2, 0]), torch.tensor([1, 0])
    assert len(WeightPattern.from_cooccurrence(rows, cols, labels, 2, 3)) == 2
    for args, match in [((rows, torch.tensor([3, 0]), labels), r"cols must lie in \[0, 3\)"),
                        ((torch.tensor([0, 2]), cols, labels), r"rows must lie in \[0, 2\)"),
                        ((rows, cols, torch.tensor([1, 2])), r"labels must lie in \[0, 2\)"),
                        ((rows[:1], cols, labels), r"rows and cols must be 1-D of one length")]:
        with pytest.raises(ValueError, match=match):
            WeightPattern.from_cooccurrence(*args, 2, 3)

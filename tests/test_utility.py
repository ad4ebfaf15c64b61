"""Mean utilities: dense logits and the lazy (optionally sparse-gradient) linear utility."""

import pytest
import torch

from pyro_ar.utility import DenseUtility, LinearUtility, as_utility

from tests.helpers import DEVICES, DTYPES

pytestmark = pytest.mark.usefixtures("seeded")

K, D = 7, 4


def _linear(batch_shape=(3,), dtype=torch.float64, device="cpu", bias=True, sparse=False):
    x = torch.randn(batch_shape + (D,), dtype=dtype, device=device)
    weight = torch.randn(K, D, dtype=dtype, device=device, requires_grad=True)
    b = torch.randn(K, dtype=dtype, device=device, requires_grad=True) if bias else None
    return LinearUtility(x, weight, b, sparse=sparse)


def _dense_logits(u):
    logits = u.x @ u.weight.T
    return logits if u.bias is None else logits + u.bias


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_dense_gather_shapes_and_values(dtype, device):
    logits = torch.randn(2, 3, K, dtype=dtype, device=device)
    u = DenseUtility(logits)
    assert u.num_classes == K and u.batch_shape == (2, 3)
    assert u.dtype == dtype and u.device.type == device
    idx = torch.randint(K, (2, 3, 5), device=device)
    torch.testing.assert_close(u.gather(idx), torch.gather(logits, -1, idx))
    # an index with fewer batch dims broadcasts against the batch shape
    idx1 = torch.randint(K, (3, 5), device=device)
    torch.testing.assert_close(u.gather(idx1), torch.gather(logits, -1, idx1.expand(2, 3, 5)))
    # ... and one with more (e.g. enumerated labels in front) too
    idx2 = torch.randint(K, (4, 1, 1, 1), device=device)
    assert u.gather(idx2).shape == (4, 2, 3, 1)
    shared = torch.tensor([6, 0, 2], device=device)
    torch.testing.assert_close(u.gather_shared(shared), logits[..., shared])
    assert u.full() is logits
    assert u.expand((5, 2, 3)).batch_shape == (5, 2, 3)
    assert as_utility(logits).logits is logits and as_utility(u) is u


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("sparse", [False, True])
def test_linear_matches_dense_logits(sparse, bias, dtype, device):
    u = _linear((2, 3), dtype=dtype, device=device, bias=bias, sparse=sparse)
    logits = _dense_logits(u)
    assert u.batch_shape == (2, 3) and u.num_classes == K
    assert u.dtype == dtype and u.device.type == device
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(u.full(), logits, **tol)
    idx = torch.randint(K, (2, 3, 5), device=device)
    torch.testing.assert_close(u.gather(idx), torch.gather(logits, -1, idx), **tol)
    idx1 = torch.randint(K, (3, 5), device=device)  # fewer batch dims: broadcast
    torch.testing.assert_close(u.gather(idx1), torch.gather(logits, -1, idx1.expand(2, 3, 5)), **tol)
    shared = torch.tensor([6, 0, 2, 2], device=device)
    torch.testing.assert_close(u.gather_shared(shared), logits[..., shared], **tol)
    e = u.expand((4, 2, 3))
    assert e.batch_shape == (4, 2, 3) and e.full().shape == (4, 2, 3, K)


@pytest.mark.parametrize("shared", [False, True])
def test_linear_sparse_gradients_touch_only_gathered_rows(shared):
    dense = _linear(sparse=False)
    sparse = LinearUtility(dense.x, dense.weight.detach().clone().requires_grad_(),
                           dense.bias.detach().clone().requires_grad_(), sparse=True)
    rows = torch.tensor([1, 4, 4]) if shared else torch.tensor([[1, 4], [4, 1], [1, 1]])
    for u in (dense, sparse):
        psi = u.gather_shared(rows) if shared else u.gather(rows)
        (psi * torch.arange(1.0, psi.numel() + 1, dtype=psi.dtype).reshape(psi.shape)).sum().backward()
    assert sparse.weight.grad.is_sparse and sparse.bias.grad.is_sparse
    assert not dense.weight.grad.is_sparse
    torch.testing.assert_close(sparse.weight.grad.to_dense(), dense.weight.grad)
    torch.testing.assert_close(sparse.bias.grad.to_dense(), dense.bias.grad)
    touched = set(sparse.weight.grad.coalesce().indices()[0].tolist())
    assert touched == {1, 4}
    untouched = [k for k in range(K) if k not in (1, 4)]
    assert (dense.weight.grad[untouched] == 0).all()


def test_dense_utility_errors():
    with pytest.raises(ValueError, match=r"utility must be a tensor .* got \[1\.0, 2\.0\]"):
        DenseUtility([1.0, 2.0])
    with pytest.raises(ValueError, match=r"got \(\)"):
        DenseUtility(torch.tensor(1.0))
    with pytest.raises(ValueError, match=r"floating point tensor, got dtype=torch\.int64"):
        DenseUtility(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"got 'logits'"):
        as_utility("logits")


def test_linear_utility_errors():
    w = torch.randn(K, D)
    with pytest.raises(ValueError, match=r"weight must have shape \(num_classes, D\), got \(7,\)"):
        LinearUtility(torch.randn(3, D), torch.randn(K))
    with pytest.raises(ValueError, match=r"D=4 .* x\.shape=\(3, 5\)"):
        LinearUtility(torch.randn(3, 5), w)
    with pytest.raises(ValueError, match=r"bias must have shape \(num_classes,\)=\(7,\), got \(6,\)"):
        LinearUtility(torch.randn(3, D), w, torch.randn(6))


# ---- issue 12: mismatched dtypes are a named error, not a matmul RuntimeError ---------------
def test_linear_utility_refuses_mismatched_dtypes():
    W = torch.randn(5, 3)
    with pytest.raises(ValueError, match=r"x must have the dtype of weight \(torch.float32\), got x.dtype=torch.float64"):
        LinearUtility(torch.randn(2, 3, dtype=torch.float64), W)
    with pytest.raises(ValueError, match=r"bias must have the dtype of weight .* bias.dtype=torch.float64"):
        LinearUtility(torch.randn(2, 3), W, torch.zeros(5, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"x must have the dtype of weight .* x.dtype=torch.int64"):
        LinearUtility(torch.ones(2, 3, dtype=torch.long), W)
    with pytest.raises(ValueError, match=r"weight must be a floating point tensor"):
        LinearUtility(torch.ones(2, 3, dtype=torch.long), torch.ones(5, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"weight must be a tensor"):
        LinearUtility(torch.randn(2, 3), [[1.0, 2.0, 3.0]])


# ------------------------------------------------------------------ sparse inputs
def _sparse_problem(B=5, density=0.4, dtype=torch.float64):
    x = torch.randn(B, D, dtype=dtype)
    x[torch.rand(B, D) > density] = 0.0
    x[0] = 0.0  # an all-zero row: utilities are the biases
    W = torch.randn(K, D, dtype=dtype, requires_grad=True)
    b = torch.randn(K, dtype=dtype, requires_grad=True)
    return x, W, b


def _objective(u, labels, shared, per_datapoint):
    """A non-linear function of every gather, so that the gradients differ per entry."""
    psi_y, psi_neg = u.gather_label_and_shared(labels, shared)
    return (psi_y.sin().sum() + psi_neg.pow(2).sum() + u.gather(per_datapoint).exp().sum()
            + u.gather_shared(shared).cos().sum())


@pytest.mark.parametrize("layout", ["coo", "csr"])
@pytest.mark.parametrize("sparse_grad", [True, False])
def test_sparse_x_gives_the_dense_utilities_and_gradients(layout, sparse_grad):
    """A sparse x gives the utilities and gradients of its dense copy (float64, to 1e-10)."""
    x, W, b = _sparse_problem()
    xs = x.to_sparse() if layout == "coo" else x.to_sparse_csr()
    labels, shared, per_dp = torch.randint(K, (5,)), torch.randint(K, (3,)), torch.randint(K, (5, 4))
    results = []
    for xx in (x, xs):
        u = LinearUtility(xx, W, b, sparse=sparse_grad)
        values = (*u.gather_label_and_shared(labels, shared), u.gather(per_dp), u.gather_shared(shared), u.full())
        grads = torch.autograd.grad(_objective(u, labels, shared, per_dp), [W, b])
        results.append([*values, *(g.to_dense() for g in grads)])
    for dense_value, sparse_value in zip(*results):
        assert dense_value.shape == sparse_value.shape
        assert torch.allclose(dense_value, sparse_value, atol=1e-10, rtol=0)


def test_sparse_x_gradient_is_sparse_in_classes_and_features():
    """Only the (class, feature) entries of the gathered classes at non-zero features."""
    x, W, b = _sparse_problem()
    u = LinearUtility(x.to_sparse(), W, b, sparse=True)
    shared = torch.tensor([2, 5])
    u.gather_shared(shared).sum().backward()
    g = W.grad.coalesce()
    assert g.sparse_dim() == 2
    used_features = set(x.nonzero()[:, 1].tolist())
    entries = set(map(tuple, g.indices().T.tolist()))
    assert entries == {(k, j) for k in (2, 5) for j in used_features}


def test_sparse_x_errors_are_named():
    x, W, b = _sparse_problem()
    with pytest.raises(ValueError, match="sparse x must be 2-D"):
        LinearUtility(torch.zeros(2, 3, D).to_sparse(), W, b)
    u = LinearUtility(x.to_sparse(), W, b)
    with pytest.raises(ValueError, match="index must broadcast"):
        u.gather(torch.zeros(2, 5, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="cannot be expanded"):
        u.expand((2, 5))
    with pytest.raises(ValueError, match=r"x must have the dtype of weight"):
        LinearUtility(x.float().to_sparse(), W, b)

"""ClassSumLikelihood, the shared base of the class-sum factors: gathers (the shared-negatives
single gather), masking, finite gradients at extreme utilities (issue 12), subclassing."""

import math

import pytest
import torch

from pyro_ar import LinearUtility
from pyro_ar.distributions import (
    AugmentedCategorical,
    BouchardBound,
    ClassSumLikelihood,
    GumbelExpectedFactor,
    OVECategorical,
    SampledSoftmax,
)
from pyro_ar.negatives import Negatives, get_negative_sampler

from tests.helpers import DTYPES, LIBRARY_NOISES

pytestmark = pytest.mark.usefixtures("seeded")

CLASS_SUM = [OVECategorical, SampledSoftmax, BouchardBound]


def test_every_class_sum_likelihood_subclasses_the_base():
    for cls in CLASS_SUM + [AugmentedCategorical]:
        assert issubclass(cls, ClassSumLikelihood)


def test_issue_12_reported_case_has_finite_gradients():
    psi = torch.tensor([[200.0, 0.0, 0.0]], requires_grad=True)
    eps = torch.tensor([-90.0], requires_grad=True)
    lp = AugmentedCategorical(psi, eps, "gumbel").log_prob(torch.tensor([0]))
    assert lp.item() == 0.0
    lp.sum().backward()
    assert torch.isfinite(psi.grad).all() and torch.isfinite(eps.grad).all()


def _masked_weighted_sum_before(fn, x, weight):
    """class_sum.masked_weighted_sum before its arithmetic mask: the arguments masked by
    torch.where, one dot product, the masked sum where that is not finite."""
    x, weight = torch.broadcast_tensors(x, weight)
    keep = weight != 0
    terms = fn(torch.where(keep, x, torch.zeros_like(x)))
    out = torch.linalg.vecdot(terms, weight.to(terms.dtype))
    if out.numel() and not bool(torch.isfinite(out).all()):
        out = torch.where(keep, weight * terms, torch.zeros_like(terms)).sum(-1)
    return out


@pytest.mark.parametrize("noise", ["gumbel", "normal"])
def test_masked_weighted_sum_gives_the_values_and_gradients_of_the_where_masks(noise):
    """The arithmetic mask x |sign(a)| of masked_weighted_sum gives the values and gradients of
    the torch.where masks before it, bit for bit, on shared (broadcast) and per-row weights with
    zeros, on a dropped term that overflows (Gumbel's -exp(-x) at x = -200, issue 12), and on
    the fallback's cases: an infinite argument of a dropped term, a NaN weight, and bool
    weights (the exact sampler's)."""
    from pyro_ar.distributions.class_sum import masked_weighted_sum
    from pyro_ar.noise import get_noise

    fn = get_noise(noise).log_cdf
    g = torch.Generator().manual_seed(3)
    x0 = 3.0 * torch.randn(6, 9, generator=g, dtype=torch.float64)
    w_row = torch.rand(6, 9, generator=g, dtype=torch.float64) * (torch.rand(6, 9, generator=g) > 0.3)
    cases = [(x0, w_row), (x0, w_row[0]), (x0, (w_row > 0))]
    x1 = x0.clone()
    x1[0, 2], x1[1, 4], x1[2, 0] = -200.0, -math.inf, math.inf
    w1 = w_row.clone()
    w1[0, 2] = w1[1, 4] = w1[2, 0] = 0.0
    cases += [(x1, w1), (x0, torch.where(w_row > 0.5, math.nan, w_row))]
    for x, w in cases:
        xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
        new, old = masked_weighted_sum(fn, xa, w), _masked_weighted_sum_before(fn, xb, w)
        torch.testing.assert_close(new, old, rtol=0.0, atol=0.0, equal_nan=True)
        keep = ~old.isnan()
        (ga,), (gb,) = (torch.autograd.grad(v[keep].sum(), t) for v, t in ((new, xa), (old, xb)))
        torch.testing.assert_close(ga, gb, rtol=0.0, atol=0.0, equal_nan=True)
        assert torch.isfinite(ga).all() or bool(w.isnan().any())  # (NaN gradients: NaN weights only)


def _extreme_psi(dtype):
    return torch.tensor([[200.0, 0.0, 0.0, -200.0], [0.0, 300.0, -300.0, 1.0]], dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("strategy,num_negatives", [("per_datapoint", None), ("shared", 2), ("per_datapoint", 2)])
@pytest.mark.parametrize("noise", LIBRARY_NOISES)
def test_augmented_gradients_finite_at_extremes(noise, strategy, num_negatives, dtype):
    # the label's own (masked) column must not poison the backward pass; labels = top class,
    # so every kept term is representable (eps + psi_y - psi_k >= eps)
    psi = _extreme_psi(dtype).requires_grad_()
    eps = torch.tensor([-90.0, -60.0], dtype=dtype, requires_grad=True)
    d = AugmentedCategorical(psi, eps, noise, get_negative_sampler(strategy, num_negatives))
    lp = d.log_prob(torch.tensor([0, 1]))
    assert torch.isfinite(lp).all()
    grads = torch.autograd.grad(lp.sum(), (psi, eps))
    assert all(torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("label", [0, 1, 2, 3])
@pytest.mark.parametrize("cls", CLASS_SUM)
def test_baseline_gradients_finite_at_extremes(cls, label, dtype):
    psi = _extreme_psi(dtype).requires_grad_()
    kw = {"a": torch.tensor([5.0, -5.0], dtype=dtype, requires_grad=True)} if cls is BouchardBound else {}
    lp = cls(psi, **kw).log_prob(torch.tensor([label, label]))
    assert torch.isfinite(lp).all()
    params = [psi] + list(kw.values())
    assert all(torch.isfinite(g).all() for g in torch.autograd.grad(lp.sum(), params))


@pytest.mark.parametrize("dtype", DTYPES)
def test_expected_factor_gradients_finite_when_subsample_is_only_the_label(dtype):
    # shared negatives that are all the label: S_hat = 0, log S_hat = -inf, factor 0, no NaN
    psi = torch.randn(2, 5, dtype=dtype, requires_grad=True)
    neg = Negatives(torch.tensor([1, 1]), torch.tensor([[0.0, 0.0], [2.5, 2.5]], dtype=dtype), True)
    base = AugmentedCategorical(psi, torch.zeros(2, dtype=dtype), negatives=neg)
    log_s = base.log_sum_exp_negatives(torch.tensor([1, 0]))
    assert log_s[0] == -float("inf") and torch.isfinite(log_s[1])
    f = GumbelExpectedFactor(base, torch.zeros(2, dtype=dtype)).log_prob(torch.tensor([1, 0]))
    (g,) = torch.autograd.grad(f.sum(), psi)
    assert torch.isfinite(g).all()


@pytest.mark.parametrize("sparse", [False, True])
def test_shared_negatives_use_one_gather(sparse, monkeypatch):
    B, D, K = 4, 3, 20
    x, W, b = torch.randn(B, D), torch.randn(K, D), torch.randn(K)
    lin = LinearUtility(x, W, b, sparse=sparse)
    calls = []
    original = LinearUtility.rows
    monkeypatch.setattr(LinearUtility, "rows", lambda self, idx: calls.append(idx.numel()) or original(self, idx))
    y = torch.tensor([0, 5, 7, 19])
    neg = Negatives(torch.tensor([1, 2, 3]), torch.tensor(1.0), True)
    g = OVECategorical(lin, negatives=neg).gather_utilities(y)
    assert calls == [B + 3]  # labels and negatives in one gather (one matrix product)
    dense = x @ W.T + b
    torch.testing.assert_close(g.label, dense.gather(-1, y[:, None]))
    torch.testing.assert_close(g.negatives, dense[:, [1, 2, 3]])


def test_gather_utilities_shapes_and_weights():
    psi = torch.randn(3, 10)
    d = OVECategorical(psi, negatives=4)
    g = d.gather_utilities(torch.tensor([0, 1, 2]))
    assert g.label.shape == (3, 1) and g.negatives.shape == (3, 4) and not g.sample.shared
    torch.testing.assert_close(g.weight, torch.tensor(9 / 4))
    # with the labels broadcast against a larger value shape
    g = d.gather_utilities(torch.zeros(5, 1, dtype=torch.long))
    assert g.label.shape == (5, 3, 1)


def test_a_user_subclass_gets_the_plumbing(validation_on):
    class Hinge(ClassSumLikelihood):
        def log_prob(self, value):
            g = self.gather_utilities(value)
            return -(g.weight * (1 - g.label + g.negatives).clamp(min=0)).sum(-1)

    d = Hinge(torch.tensor([[3.0, 0.0, 2.5]]))
    assert d.log_prob(torch.tensor([0])).tolist() == [-0.5]
    assert d.expand((2, 1)).log_prob(torch.tensor([0])).shape == (2, 1)
    assert d.support.upper_bound == 2
    with pytest.raises(ValueError, match=r"value must lie in \[0, 3\)"):
        d.log_prob(torch.tensor([3]))
    with pytest.raises(ValueError, match="utility must be finite"):
        Hinge(torch.tensor([[0.0, float("nan")]]))
    with pytest.raises(NotImplementedError, match="Hinge is a likelihood factor"):
        d.sample()


# ---- issue 12: user-supplied negatives are checked ------------------------------------------
@pytest.mark.parametrize("index, weight, shared, match", [
    (torch.tensor([[1, 2]]), torch.tensor(-2.0), False, r"negatives.weight must be >= 0 .* \[-2.0\]"),
    (torch.tensor([[1, 2]]), torch.tensor(float("nan")), False, r"negatives.weight must be >= 0"),
    (torch.tensor([[1, 9]]), torch.tensor(1.0), False, r"negatives.index must lie in \[0, 5\), got \[9\]"),
    (torch.tensor([[-1, 2]]), torch.tensor(1.0), False, r"negatives.index must lie in \[0, 5\)"),
    (torch.tensor([[1.0, 2.0]]), torch.tensor(1.0), False, r"negatives.index must be an integer tensor"),
    (torch.tensor([[1, 2]]), torch.tensor(1.0), True, r"negatives.index must be 1-D when shared=True"),
    (torch.tensor([[1, 2], [3, 4], [1, 3]]), torch.tensor(1.0), False, r"negatives.index of shape \(3, 2\)"),
    (torch.tensor([1, 2]), torch.ones(3), True, r"negatives.weight of shape \(3,\)"),
])
@pytest.mark.parametrize("cls", [AugmentedCategorical, OVECategorical, BouchardBound])
def test_user_negatives_are_validated(cls, index, weight, shared, match):
    psi = torch.randn(2, 5)
    extra = (torch.zeros(2),) if cls is AugmentedCategorical else ()
    with pytest.raises(ValueError, match=match):
        cls(psi, *extra, negatives=Negatives(index, weight, shared), validate_args=True)


def test_valid_user_negatives_pass_and_give_a_nonpositive_log_prob():
    neg = Negatives(torch.tensor([[1, 2], [3, 4]]), torch.tensor(2.0), False)
    lp = AugmentedCategorical(torch.randn(2, 5), torch.zeros(2), "normal", negatives=neg,
                              validate_args=True).log_prob(torch.tensor([0, 0]))
    assert (lp <= 0).all()

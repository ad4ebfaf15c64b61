"""UtilityCategorical (the marginal), and the label/parameter validation shared with
AugmentedCategorical (whose own tests are in test_augmented.py).

Statistical tests run under fixed seeds (the ``seeded`` fixture). Goodness-of-fit tests are
Pearson chi-square tests at significance level 1e-3 (cells with expected count < 5 pooled);
unbiasedness tests compare a Monte Carlo mean with the exact value and accept within 4
standard errors, the standard error being the sample standard deviation of the
independent replicates over sqrt(#replicates).
"""

import warnings

import numpy as np
import pytest
import scipy.stats
import torch

import pyro.poutine as poutine

from pyro_ar import AugmentedCategorical, LinearUtility, UtilityCategorical, sample_categorical
from pyro_ar.negatives import ImportanceNegatives

from tests.helpers import BUILTIN_NOISES, DEVICES, DTYPES, make_noise

pytestmark = pytest.mark.usefixtures("seeded")

ALPHA = 1e-3
Z_MAX = 4.0


# ---------------------------------------------------------------------------------------
# UtilityCategorical
# ---------------------------------------------------------------------------------------

def test_gumbel_marginal_is_log_softmax():
    psi = 5.0 * torch.randn(6, 40, dtype=torch.float64)
    d = UtilityCategorical(psi, "gumbel")
    y = torch.arange(40).reshape(40, 1)
    assert (d.log_prob(y) - psi.log_softmax(-1).T).abs().max().item() < 1e-12
    assert (d.logits - psi.log_softmax(-1)).abs().max().item() < 1e-12


def _pooled_chisquare(counts, probs, min_expected=5.0):
    """Pearson chi-square p-value, pooling cells whose expected count is below min_expected."""
    expected = probs * counts.sum()
    order = np.argsort(expected)
    counts, expected = counts[order], expected[order]
    small = np.cumsum(expected) < min_expected  # the smallest cells, pooled together
    if small.any():
        cut = small.sum() + 1
        counts = np.concatenate([[counts[:cut].sum()], counts[cut:]])
        expected = np.concatenate([[expected[:cut].sum()], expected[cut:]])
    return scipy.stats.chisquare(counts, expected).pvalue


@pytest.mark.parametrize("name", BUILTIN_NOISES + ["student_t3", "laplace", "user_t3"])
def test_sample_frequencies_match_log_prob(name):
    K, N = 8, 40000
    psi = torch.tensor([1.0, 0.5, 0.0, -0.5, 2.0, -1.0, -4.0, 0.2], dtype=torch.float64)
    d = UtilityCategorical(psi, make_noise(name))
    y = d.sample((N,))
    assert y.shape == (N,) and y.dtype == torch.long
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Laplace: quadrature ~1e-5 accurate
        probs = d.log_prob(torch.arange(K)).exp().numpy()
    assert abs(probs.sum() - 1) < 1e-4
    counts = np.bincount(y.numpy(), minlength=K)
    assert _pooled_chisquare(counts, probs / probs.sum()) > ALPHA


def test_utility_categorical_shapes():
    psi = torch.randn(2, 1, 5)
    d = UtilityCategorical(psi, "normal")
    assert d.batch_shape == (2, 1) and d.event_shape == () and d.num_classes == 5
    assert d.support.lower_bound == 0 and d.support.upper_bound == 4
    assert d.sample().shape == (2, 1)
    assert d.sample((7, 3)).shape == (7, 3, 2, 1)
    e = d.expand((4, 2, 3))
    assert e.batch_shape == (4, 2, 3) and e.sample().shape == (4, 2, 3)
    assert e.log_prob(torch.tensor(1)).shape == (4, 2, 3)
    # value vs batch shape broadcasting
    assert d.log_prob(torch.tensor([[0, 1, 2]])).shape == (2, 3)
    assert d.log_prob(torch.zeros(6, 1, 1, dtype=torch.long)).shape == (6, 2, 1)
    # enumerate_support, and the probabilities of the support sum to one
    support = d.enumerate_support()
    assert support.shape == (5, 2, 1)
    assert d.enumerate_support(expand=False).shape == (5, 1, 1)
    torch.testing.assert_close(d.log_prob(support).logsumexp(0), torch.zeros(2, 1), atol=1e-5, rtol=0)
    assert UtilityCategorical(torch.randn(5)).log_prob(torch.tensor(3)).shape == ()


def test_utility_categorical_accepts_linear_utility():
    x, w, b = torch.randn(3, 4), torch.randn(6, 4), torch.randn(6)
    d = UtilityCategorical(LinearUtility(x, w, b), "gumbel")
    torch.testing.assert_close(d.logits, (x @ w.T + b).log_softmax(-1))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_utility_categorical_dtype_device(name, dtype, device):
    psi = torch.randn(3, 4, dtype=dtype, device=device)
    d = UtilityCategorical(psi, name)
    y = d.sample((2,))
    assert y.dtype == torch.long and y.device.type == device and y.shape == (2, 3)
    lp = d.log_prob(y)
    assert lp.dtype == dtype and lp.device.type == device and lp.shape == (2, 3)
    assert torch.isfinite(lp).all()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", BUILTIN_NOISES)
def test_utility_categorical_large_utilities_finite(name, dtype):
    # |psi| up to 1e3: every log p (down to ~-1e6 for probit) is representable
    psi = 1e3 * (2.0 * torch.rand(2, 6, dtype=torch.float64) - 1.0)
    psi[:, 0], psi[:, 1] = 1e3, -1e3
    psi = psi.to(dtype).requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lp = UtilityCategorical(psi, name).log_prob(torch.arange(6).reshape(6, 1))
        (grad,) = torch.autograd.grad(lp.sum(), psi)
    assert torch.isfinite(lp).all() and torch.isfinite(grad).all()


# ---------------------------------------------------------------------------------------
# validation
# ---------------------------------------------------------------------------------------

def _both(psi, **kw):
    """The marginal and the augmented distribution over the same utilities."""
    eps = torch.zeros(psi.shape[:-1])
    return [UtilityCategorical(psi, **kw), AugmentedCategorical(psi, eps, **kw)]


@pytest.mark.parametrize("value,match", [
    (torch.tensor([0, 5, 1]), r"value must lie in \[0, 5\), got \[5\]"),
    (torch.tensor([0, -1, 7]), r"value must lie in \[0, 5\), got \[-1, 7\]"),
    (torch.tensor([0.0, 1.5, 2.0]), r"value must hold integer class labels, got non-integers \[1\.5\]"),
    (torch.tensor([0.0, float("nan"), 2.0]), r"non-integers \[nan\]"),
    (torch.tensor([True, False, True]), r"value must hold integer class labels, got dtype=torch\.bool"),
    ([0, 1, 2], r"value must be a tensor of class labels, got \[0, 1, 2\]"),
    (torch.tensor([0, 1]), r"value of shape \(2,\) does not broadcast with batch_shape \(3,\)"),
])
def test_bad_labels(validation_on, value, match):
    for d in _both(torch.randn(3, 5)):
        with pytest.raises(ValueError, match=match):
            d.log_prob(value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_utilities(validation_on, bad):
    psi = torch.randn(3, 5)
    psi[1, 2] = bad
    with pytest.raises(ValueError, match=rf"utility must be finite, got non-finite values \[{bad}\]"):
        UtilityCategorical(psi, "normal")
    with pytest.raises(ValueError, match=rf"utility must be finite, got non-finite values \[{bad}\]"):
        AugmentedCategorical(psi, torch.zeros(3))
    # a lazy linear utility is checked on the rows actually gathered
    w = torch.randn(5, 2)
    w[2, 0] = bad
    d = AugmentedCategorical(LinearUtility(torch.randn(3, 2), w), torch.zeros(3))
    with pytest.raises(ValueError, match=r"utility must be finite"):
        d.log_prob(torch.tensor([0, 1, 3]))


def test_non_finite_eps(validation_on):
    with pytest.raises(ValueError, match=r"eps must be finite, got non-finite values \[nan\]"):
        AugmentedCategorical(torch.randn(3, 5), torch.tensor([0.0, float("nan"), 1.0]))
    with pytest.raises(ValueError, match=r"eps must be a tensor, got 0\.5"):
        AugmentedCategorical(torch.randn(3, 5), 0.5)


def test_shape_mismatch_between_utility_and_eps():
    with pytest.raises(ValueError, match=r"eps of shape \(4,\) does not broadcast with the utility's batch shape \(3,\)"):
        AugmentedCategorical(torch.randn(3, 5), torch.zeros(4))
    with pytest.raises(ValueError, match=r"eps of shape \(2, 4\)"):
        AugmentedCategorical(LinearUtility(torch.randn(3, 2), torch.randn(5, 2)), torch.zeros(2, 4))


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "shared"])
def test_bad_negatives(bad):
    with pytest.raises(ValueError, match=rf"negatives must be None, a positive int .* got negatives={bad!r}"):
        AugmentedCategorical(torch.randn(3, 5), torch.zeros(3), negatives=bad)
    with pytest.raises(ValueError, match=rf"got negatives={bad!r}"):
        with poutine.trace():
            sample_categorical("y", torch.randn(3, 5), obs=torch.zeros(3, dtype=torch.long),
                               negatives=bad)


def test_unknown_noise_and_method():
    with pytest.raises(ValueError, match=r"unknown noise='cauchy'"):
        UtilityCategorical(torch.randn(5), "cauchy")
    with pytest.raises(ValueError, match=r"unknown noise='probitt'"):
        AugmentedCategorical(torch.randn(5), torch.tensor(0.0), "probitt")
    with pytest.raises(ValueError, match=r"method must be 'auto' or 'quadrature', got 'exact'"):
        UtilityCategorical(torch.randn(5), method="exact")
    with pytest.raises(ValueError, match=r"at least 2 classes, got shape \(3, 1\)"):
        UtilityCategorical(torch.randn(3, 1))


@pytest.mark.parametrize("proposal,match", [
    (torch.ones(4), r"proposal is over 4 classes but the utility has num_classes=5"),
    (torch.tensor([0.2, 0.2, -0.1, 0.4, 0.3]), r"proposal must be finite and > 0 .* got values \[-0\.1"),
    (torch.ones(2, 5), r"proposal must be 1-D .* got shape \(2, 5\)"),
    ([0.2] * 5, r"proposal must be a 1-D tensor .* got \[0\.2, 0\.2, 0\.2, 0\.2, 0\.2\]"),
    (np.ones(5), r"proposal must be a 1-D tensor .* got array"),
])
def test_bad_proposal(proposal, match):
    with pytest.raises(ValueError, match=match):
        AugmentedCategorical(torch.randn(3, 5), torch.zeros(3), negatives=ImportanceNegatives(2, proposal))


def test_validation_follows_pyros_global_switch(validation_off):
    psi = torch.randn(3, 5)
    for d in _both(psi):
        # a non-integer label is not checked: it is truncated to an integer
        torch.testing.assert_close(d.log_prob(torch.tensor([0.0, 1.5, 2.0])),
                                   d.log_prob(torch.tensor([0, 1, 2])))
        # an out-of-range label is not checked by us (torch's own indexing may still fail)
        try:
            d.log_prob(torch.tensor([0, 7, 1]))
        except ValueError as e:  # pragma: no cover - the failure this test guards against
            pytest.fail(f"validation ran although it is disabled: {e}")
        except (RuntimeError, IndexError):
            pass
    psi[0, 0] = float("nan")
    lp = UtilityCategorical(psi).log_prob(torch.tensor([0, 1, 2]))
    assert torch.isnan(lp[0]) and torch.isfinite(lp[1:]).all()
    lp = AugmentedCategorical(psi, torch.tensor([0.0, float("nan"), 0.0])).log_prob(torch.tensor([0, 1, 2]))
    assert torch.isnan(lp[:2]).all() and torch.isfinite(lp[2])


def test_validation_on_by_default_and_per_instance(validation_on):
    with pytest.raises(ValueError):
        UtilityCategorical(torch.randn(5)).log_prob(torch.tensor(9))
    # validate_args=False on the instance wins over the global switch
    d = UtilityCategorical(torch.tensor([0.0, float("nan")]), validate_args=False)
    assert torch.isnan(d.log_prob(torch.tensor(1)))



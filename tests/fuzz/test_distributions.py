"""Fuzz: the distributions (marginal, augmented factor, baselines) on good and bad inputs.

For every input: a named error, or a log-probability that is finite (from finite inputs),
at most 0 where it is a log-probability or a bound on one, matching ``log_softmax`` where
it is exact, and with finite gradients wherever it is finite. The one -inf allowed is the
Gumbel factor's :math:`-\\sum_j a_j e^{-(\\varepsilon + d_j)}` when that sum exceeds the
dtype's range (then -inf is its correctly rounded value).
"""

import math
import warnings

import pytest
import torch
from hypothesis import given, settings, strategies as st

import pyro_ar as ar
from pyro_ar.negatives import get_negative_sampler
from pyro_ar.distributions import (BouchardBound, OVECategorical,
                                   RelaxedUtilityCategorical, SampledSoftmax)

from tests.fuzz import _harness as H
from tests.fuzz import strategies as S

pytestmark = [pytest.mark.usefixtures("seeded", "validation_on"), pytest.mark.slow]  # a fuzz battery


def _grads_finite(lp, *leaves):
    leaves = [t for t in leaves if isinstance(t, torch.Tensor) and t.requires_grad]
    if not leaves or not lp.requires_grad or not lp.numel():
        return
    grads = torch.autograd.grad(lp.sum(), leaves, allow_unused=True)
    for g in grads:
        if g is not None:
            H.finite("gradient", g)


def _leaf(t):
    return t.detach().requires_grad_(True) if isinstance(t, torch.Tensor) and t.is_floating_point() else t


@settings(H.FUZZ, max_examples=120)
@given(data=S.utility_and_labels(dtypes=(torch.float32, torch.float64, torch.float16, torch.int64)),
       noise=S.noises(), method=st.sampled_from(["auto"] * 6 + ["quadrature"] * 3 + ["exact"]),
       num_nodes=st.sampled_from([257] * 12 + [33, 5, 0, None, 2.5, 10 ** 6]))
def test_utility_categorical(data, noise, method, num_nodes):
    utility, labels = data
    utility = _leaf(utility)
    names = ("utility", "noise", "method", "num_nodes", "value", "class")

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            d = ar.UtilityCategorical(utility, noise, method=method, num_nodes=num_nodes)
            return d, d.log_prob(labels)

    ok, out = H.call(run, names, kind="distributions")
    if not ok or not H.all_finite(utility):
        return
    d, lp = out
    H.finite("UtilityCategorical.log_prob", lp)
    tol = 1e-3 if utility.dtype != torch.float64 else 1e-9
    assert (lp <= tol).all(), lp
    if d.noise.name == "gumbel" and method == "auto":
        exact = utility.detach().log_softmax(-1).expand(lp.shape + utility.shape[-1:])
        assert torch.allclose(lp.detach(), exact.gather(-1, torch.as_tensor(labels).long().expand(lp.shape).unsqueeze(-1)).squeeze(-1))
    _grads_finite(lp, utility)


def _gumbel_overflow(utility, eps, labels, s):
    """Rows whose Gumbel factor magnitude is beyond the dtype's range (float64 recomputation)."""
    psi = utility.detach().double()
    y = torch.as_tensor(labels).long()
    shape = torch.broadcast_shapes(psi.shape[:-1], eps.shape, y.shape)
    psi = psi.expand(shape + psi.shape[-1:])
    psi_y = psi.gather(-1, y.expand(shape).unsqueeze(-1))
    m = (psi - psi_y - eps.detach().double().expand(shape).unsqueeze(-1)).amax(-1)
    return m > math.log(torch.finfo(utility.dtype).max) - math.log(max(s, 1)) - 2.0


@settings(H.FUZZ, max_examples=150)
@given(data=S.utility_and_labels(), noise=S.noises(), k=S.num_negatives(), strategy=S.strategies_(),
       eps_kind=st.integers(0, 9), eps_scale=st.sampled_from([0.0, 1.0, 90.0, 1e4]), st_data=st.data())
def test_augmented_categorical(data, noise, k, strategy, eps_kind, eps_scale, st_data):
    utility, labels = data
    B = utility.shape[0] if utility.dim() > 1 else 0
    K = utility.shape[-1]
    proposal = st_data.draw(S.proposals(K, strategy))
    eps_shape = (B,) if eps_kind else (B + 2,)
    eps = st_data.draw(S.tensors(eps_shape, (utility.dtype,), scale=eps_scale, bad_values=eps_kind != 1))
    utility, eps = _leaf(utility), _leaf(eps)
    names = ("utility", "eps", "noise", "num_negatives", "strategy", "proposal", "value")

    def run():
        d = ar.AugmentedCategorical(utility, eps, noise, get_negative_sampler(strategy, k, proposal))
        return d.log_prob(labels)

    ok, lp = H.call(run, names, kind="distributions")
    if not ok or not H.all_finite(utility, eps):
        return
    allow = None
    if (noise == "gumbel") and not torch.isfinite(lp).all():
        allow = _gumbel_overflow(utility, eps, labels, k if isinstance(k, int) else 1)
    H.finite("AugmentedCategorical.log_prob", lp, allow)
    assert (lp <= 0).all(), lp
    if torch.isfinite(lp).all():
        _grads_finite(lp, utility, eps)


BASELINES = [OVECategorical, SampledSoftmax, BouchardBound]


@settings(H.FUZZ, max_examples=150)
@given(data=S.utility_and_labels(), cls=st.sampled_from(BASELINES), k=S.num_negatives(),
       strategy=S.strategies_(), a_kind=st.integers(0, 9), var_kind=st.integers(0, 9), st_data=st.data())
def test_baselines(data, cls, k, strategy, a_kind, var_kind, st_data):
    utility, labels = data
    K = utility.shape[-1]
    proposal = st_data.draw(S.proposals(K, strategy))
    kwargs = {}
    if cls is BouchardBound:
        if a_kind == 1:
            kwargs["a"] = st_data.draw(S.tensors(utility.shape[:-1], (utility.dtype,)))
        elif a_kind == 2:
            kwargs["a"] = "zero"  # not a tensor
        if var_kind == 1:
            kwargs["utility_var"] = st_data.draw(S.tensors(utility.shape, (utility.dtype,))).abs()
        elif var_kind == 2:
            kwargs["utility_var"] = -torch.ones_like(utility)
    utility = _leaf(utility)
    names = ("utility", "num_negatives", "strategy", "proposal", "value", " a ", "a must", "a of",
             "utility_var")

    ok, lp = H.call(lambda: cls(utility, negatives=get_negative_sampler(strategy, k, proposal), **kwargs)
                    .log_prob(labels), names, kind="distributions")
    if not ok or not H.all_finite(utility, *kwargs.values()):
        return
    H.finite(f"{cls.__name__}.log_prob", lp)
    exact = utility.detach().log_softmax(-1)
    y = torch.as_tensor(labels).long().expand(lp.shape).unsqueeze(-1)
    exact_y = exact.expand(lp.shape + exact.shape[-1:]).gather(-1, y).squeeze(-1)
    tol = 1e-3 * (1 + exact_y.abs()) if utility.dtype == torch.float32 else 1e-9 * (1 + exact_y.abs())
    assert (lp.detach() <= tol).all(), lp
    if k is None and cls is SampledSoftmax:
        assert torch.allclose(lp.detach(), exact_y, atol=float(tol.max()) if tol.numel() else 0.0)
    if k is None and cls in (OVECategorical, BouchardBound) and "utility_var" not in kwargs:
        assert (lp.detach() <= exact_y + tol).all()  # a lower bound
    _grads_finite(lp, utility)


TEMPERATURES = [0.5, 1.0, 2.0, 1e-3, 1e-30, 1.2e-38, 1e-40, 1e30, 0.0, -1.0, math.nan, math.inf, True, "1"]


@settings(H.FUZZ, max_examples=120)
@given(data=S.utility_and_labels(min_k=1), noise=S.noises(), temperature=st.sampled_from(TEMPERATURES),
       scale=st.sampled_from([1.0, 1e10, 1e30, 3e38]))
def test_relaxed_utility_categorical(data, noise, temperature, scale):
    """Issue 25: a finite sample on the simplex (from finite utilities) or a named error; the
    event shape is the K classes."""
    utility, _ = data
    if isinstance(utility, torch.Tensor) and utility.is_floating_point():
        utility = (utility * scale).clamp(-torch.finfo(utility.dtype).max, torch.finfo(utility.dtype).max) \
            if torch.isfinite(utility).all() else utility * scale

    def run():
        d = RelaxedUtilityCategorical(utility, noise, temperature)
        assert d.event_shape == utility.shape[-1:]
        assert RelaxedUtilityCategorical.infer_shapes(utility=tuple(utility.shape))[1] == d.event_shape
        return d.rsample(torch.Size([2]))

    ok, x = H.call(run, ("utility", "noise", "temperature"), kind="distributions")
    if ok and H.all_finite(utility):
        H.finite("relaxed sample", x)
        assert torch.allclose(x.sum(-1), torch.ones((), dtype=x.dtype), atol=1e-3)

"""Each likelihood object owns its bound (``Likelihood.bound``), and ``metrics.bound`` resolves
its string through the one map, :func:`pyro_ar.likelihoods.get_likelihood`."""

import pytest
import torch

from pyro_ar import metrics
from pyro_ar.likelihoods import AR, OVE, Bouchard, Exact, Sampled, get_likelihood


def _case(seed=0, B=7, K=12):
    g = torch.Generator().manual_seed(seed)
    return (2 * torch.randn(B, K, generator=g, dtype=torch.float64),
            torch.randint(K, (B,), generator=g))


def test_bounds_lie_below_the_exact_log_likelihood():
    psi, y = _case()
    exact, var = Exact().bound(psi, y)
    assert var is None
    torch.testing.assert_close(exact, psi.log_softmax(-1)[torch.arange(7), y], rtol=0, atol=1e-12)
    # A&R with Gumbel noise at the optimal eta is tight; at any other eta it is below
    torch.testing.assert_close(AR().bound(psi, y)[0], exact, rtol=0, atol=1e-12)
    assert (AR().bound(psi, y, log_eta=torch.zeros(7, dtype=torch.float64))[0] <= exact + 1e-12).all()
    for lik in (OVE(), Bouchard(), Bouchard("optimal")):
        assert (lik.bound(psi, y)[0] <= exact + 1e-12).all(), lik
    with pytest.raises(ValueError, match="not a bound"):
        Sampled().bound(psi, y)


def test_metrics_bound_takes_names_or_objects():
    psi, y = _case(1)
    for name in ("exact", "ar", "ove", "bouchard"):
        assert metrics.bound(psi, y, name)["mean"] == metrics.bound(psi, y, get_likelihood(name))["mean"]
    with pytest.raises(ValueError, match="unknown likelihood"):
        metrics.bound(psi, y, "softmax-ish")
    with pytest.raises(ValueError, match="not a bound"):
        metrics.bound(psi, y, "sampled")

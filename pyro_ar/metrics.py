r"""The exact training bounds at fitted parameters (:func:`bound`).

:func:`bound` evaluates a *training objective* (A&R, OVE, Bouchard bounds) at fitted
parameters, not a predictive metric (those live in :mod:`pyro_ar.evaluation`); it uses the
same chunked pass (:func:`pyro_ar.evaluation.iter_chunks`).
"""

from typing import Dict

import torch

from . import evaluation
from .likelihoods import DEFAULT, Likelihood, get_likelihood

__all__ = ["bound"]


def _utility_chunks(utility, chunk_size):
    """``(start, stop, psi)`` with ``psi`` the float64 utilities of rows ``start:stop``."""
    for chunk in evaluation.iter_chunks(utility, chunk_size=chunk_size):
        yield int(chunk.index[0]), int(chunk.index[-1]) + 1, chunk.utility[0]


# ------------------------------------------------------------------------------------------
# The bound itself, computed exactly (no class subsampling) at fitted parameters
# ------------------------------------------------------------------------------------------

def _chunk(t, start, stop):
    return None if t is None else t[start:stop]


@torch.no_grad()
def bound(utility, labels: torch.Tensor, likelihood="ar", noise=DEFAULT,
          log_eta: torch.Tensor = None, loc: torch.Tensor = None, scale: torch.Tensor = None,
          a: torch.Tensor = None, num_samples: int = 64, seed: int = 0, chunk_size: int = 1024,
          return_pointwise: bool = False) -> Dict[str, float]:
    r"""Per-datapoint value of a training objective at fitted parameters, over ALL classes.

    The stochastic objectives of SVI estimate a bound from a class subsample; this
    evaluates the bound itself (the sum over every class), datapoint by datapoint, so that
    the tightness of A&R and of the baselines can be compared on equal terms:

    * ``"exact"`` -- :math:`\log p(y\mid\psi)` (the exact softmax / quadrature objective);
    * ``"ar"`` with Gumbel noise -- the closed-form softmax A&R bound at the fitted
      :math:`\eta_n` (``log_eta``, shape (N,)): :math:`1 - \log\eta - (1 + S_y)/\eta`,
      :math:`S_y = \sum_{k\ne y} e^{\psi_k-\psi_y}`; with ``log_eta=None`` the optimal
      :math:`\eta^* = 1 + S_y`, where the bound equals :math:`\log p(y\mid\psi)`;
    * ``"ar"`` with another noise -- the A&R ELBO
      :math:`\mathbb{E}_{q}[\log\phi(\varepsilon) + \sum_{k\ne y}\log\Phi(\varepsilon+\psi_y-\psi_k)
      - \log q(\varepsilon)]` for :math:`q_n = \text{noise}(\mu_n, \sigma_n)` (``loc``,
      ``scale``), a Monte Carlo average over ``num_samples`` draws per datapoint (the class
      sum itself is exact); ``"se"`` is its standard error;
    * ``"ove"`` -- :math:`\sum_{k\ne y}\log\sigma(\psi_y-\psi_k)`;
    * ``"bouchard"`` -- :math:`\psi_y - a_n - \sum_k\log(1+e^{\psi_k-a_n})` at the fitted
      ``a`` (shape (N,)), or at the optimal :math:`a` if ``a`` is None.

    ``likelihood`` is a :class:`~pyro_ar.likelihoods.Likelihood` or its name
    (:func:`~pyro_ar.likelihoods.get_likelihood`, with ``noise``, default ``"gumbel"``; an
    object carries its own noise, so ``noise`` beside one is a ``ValueError``); each likelihood evaluates
    its own bound (:meth:`~pyro_ar.likelihoods.Likelihood.bound`); the sampled softmax has
    none (``ValueError``).

    :returns: dict with ``"mean"`` (per datapoint), ``"se"`` (0 for the deterministic
        ones) and ``"pointwise"`` if asked.

    Example:

    >>> import torch
    >>> from pyro_ar import metrics
    >>> psi, y = torch.randn(5, 20, dtype=torch.float64), torch.zeros(5, dtype=torch.long)
    >>> exact = metrics.bound(psi, y, "exact")["mean"]
    >>> abs(metrics.bound(psi, y, "ar")["mean"] - exact) < 1e-12   # tight at the optimal eta
    True
    >>> metrics.bound(psi, y, "ove")["mean"] <= exact
    True
    """
    if isinstance(likelihood, Likelihood) and noise is not DEFAULT:
        raise ValueError(f"noise={noise!r} is ignored with a Likelihood object (likelihood="
                         f"{likelihood!r}), which carries its own noise; leave noise out")
    lik = get_likelihood(likelihood, "gumbel" if noise is DEFAULT else noise)  # the one string map
    _, labels, _, _ = evaluation.predictive._prepare(utility, labels, None, None)  # count, dtype, range
    g = torch.Generator().manual_seed(seed)
    parts, ses = [], []
    for start, stop, psi in _utility_chunks(utility, chunk_size):
        lp, var = lik.bound(psi, labels[start:stop].long(), log_eta=_chunk(log_eta, start, stop),
                            loc=_chunk(loc, start, stop), scale=_chunk(scale, start, stop),
                            a=_chunk(a, start, stop), num_samples=num_samples, generator=g)
        parts.append(lp)
        if var is not None:
            ses.append(var)                                                 # per-point MC variance
    lp = torch.cat(parts)
    n = lp.numel()
    out = {"mean": lp.mean().item(),
           "se": (torch.cat(ses).sum().sqrt() / n).item() if ses else 0.0}
    if return_pointwise:
        out["pointwise"] = lp
    return out

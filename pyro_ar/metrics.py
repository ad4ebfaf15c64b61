r"""Evaluation: test log-likelihood, accuracy and top-k accuracy, computed in chunks.

The predictive log-likelihood is exact for softmax (log-softmax) and by quadrature for
any other noise (:func:`pyro_ar.quadrature.log_marginal`). Following the A&R authors'
evaluation, :func:`log_likelihood` also reports the mean with each datapoint's value
floored at ``floor`` (-26 by default), which limits the influence of a few hopeless test
points; both numbers are returned.
"""

from typing import Dict

import torch

from .distributions import UtilityCategorical
from .utility import DenseUtility, LinearUtility, as_utility

__all__ = ["log_likelihood", "accuracy", "top_k_accuracy", "iter_utility_chunks", "bound"]


def iter_utility_chunks(utility, chunk_size: int = 1024):
    """Yield ``(start, stop, psi)`` with ``psi`` the full utilities of rows ``start:stop``.

    Never holds more than ``chunk_size x K`` utilities (a :class:`LinearUtility` is
    evaluated chunk by chunk).

    Example:

    >>> import torch
    >>> from pyro_ar.metrics import iter_utility_chunks
    >>> [(start, stop, psi.shape) for start, stop, psi in iter_utility_chunks(torch.zeros(5, 3), chunk_size=2)]
    [(0, 2, torch.Size([2, 3])), (2, 4, torch.Size([2, 3])), (4, 5, torch.Size([1, 3]))]
    """
    u = as_utility(utility)
    if len(u.batch_shape) != 1:
        raise ValueError(f"evaluation needs a 1-D batch of datapoints, got batch_shape {tuple(u.batch_shape)}")
    n = u.batch_shape[0]
    for start in range(0, n, chunk_size):
        stop = min(n, start + chunk_size)
        if isinstance(u, DenseUtility):
            psi = u.logits[start:stop]
        elif isinstance(u, LinearUtility):
            psi = LinearUtility(u.x[start:stop], u.weight, u.bias).full()
        else:
            psi = u.full()[start:stop]
        yield start, stop, psi


@torch.no_grad()
def log_likelihood(utility, labels: torch.Tensor, noise="gumbel", floor: float = -26.0,
                   chunk_size: int = 1024, return_pointwise: bool = False) -> Dict[str, float]:
    r"""Mean predictive log-likelihood :math:`\frac1N\sum_n \log p(y_n\mid\psi_n)`.

    :returns: dict with ``"raw"`` (plain mean), ``"floored"`` (mean of
        :math:`\max(\log p, \text{floor})`), and ``"pointwise"`` (tensor) if asked.

    Example:

    >>> import torch
    >>> from pyro_ar import metrics
    >>> psi = torch.zeros(4, 10)
    >>> round(metrics.log_likelihood(psi, torch.tensor([0, 1, 2, 3]))["raw"], 4)   # log(1/10)
    -2.3026
    """
    parts = []
    for start, stop, psi in iter_utility_chunks(utility, chunk_size):
        parts.append(UtilityCategorical(psi, noise).log_prob(labels[start:stop]))
    lp = torch.cat(parts)
    out = {"raw": lp.mean().item(), "floored": lp.clamp(min=floor).mean().item()}
    if return_pointwise:
        out["pointwise"] = lp
    return out


@torch.no_grad()
def top_k_accuracy(utility, labels: torch.Tensor, k: int = 1, chunk_size: int = 1024) -> float:
    """Fraction of datapoints whose label is among the k largest mean utilities.

    (With iid noise, p(y=k | psi) increases with psi_k, so ranking by mean utility is
    ranking by predictive probability, for every noise.)

    Example:

    >>> import torch
    >>> from pyro_ar import metrics
    >>> metrics.top_k_accuracy(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([1]), k=2)
    1.0
    """
    hits = 0
    for start, stop, psi in iter_utility_chunks(utility, chunk_size):
        top = psi.topk(min(k, psi.shape[-1]), dim=-1).indices
        hits += (top == labels[start:stop].unsqueeze(-1)).any(-1).sum().item()
    return hits / labels.shape[0]


def accuracy(utility, labels: torch.Tensor, chunk_size: int = 1024) -> float:
    """Top-1 accuracy (argmax of the mean utilities).

    Example:

    >>> import torch
    >>> from pyro_ar import metrics
    >>> metrics.accuracy(torch.eye(3), torch.tensor([0, 1, 0]))
    0.6666666666666666
    """
    return top_k_accuracy(utility, labels, 1, chunk_size)


# ------------------------------------------------------------------------------------------
# The bound itself, computed exactly (no class subsampling) at fitted parameters
# ------------------------------------------------------------------------------------------

_BOUNDS = ("exact", "ar", "ove", "bouchard")


def _chunk(t, start, stop):
    return None if t is None else t[start:stop]


@torch.no_grad()
def bound(utility, labels: torch.Tensor, likelihood: str = "ar", noise="gumbel",
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
    from .bounds import BouchardBound, OVECategorical
    from .distributions import AugmentedCategorical
    from .noise import GumbelNoise, get_noise

    if likelihood not in _BOUNDS:
        raise ValueError(f"bound: likelihood must be one of {_BOUNDS} (the sampled softmax "
                         f"'botev' is not a bound), got {likelihood!r}")
    nz = get_noise(noise)
    gumbel = isinstance(nz, GumbelNoise)
    if likelihood == "ar" and not gumbel and (loc is None or scale is None):
        raise ValueError("bound: the A&R bound of a non-Gumbel noise needs the local q's loc and scale")
    g = torch.Generator().manual_seed(seed)
    parts, ses = [], []
    for start, stop, psi in iter_utility_chunks(utility, chunk_size):
        yy = labels[start:stop].long()
        if likelihood == "exact":
            lp = UtilityCategorical(psi, nz).log_prob(yy)
        elif likelihood == "ove":
            lp = OVECategorical(psi, validate_args=False).log_prob(yy)
        elif likelihood == "bouchard":
            lp = BouchardBound(psi, a=_chunk(a, start, stop), validate_args=False).log_prob(yy)
        elif gumbel:
            # 1 + S_y = exp(-log p(y)); (1 + S_y)/eta = exp(-log p(y) - log eta)
            neg_logp = -psi.log_softmax(-1).gather(-1, yy.unsqueeze(-1)).squeeze(-1)
            if log_eta is None:
                lp = -neg_logp
            else:
                le = log_eta[start:stop].to(psi.dtype)
                lp = 1.0 - le - torch.exp(neg_logp - le)
        else:
            q = nz.distribution(loc[start:stop].to(psi.dtype), scale[start:stop].to(psi.dtype))
            eps = _draw(q, nz, num_samples, g, psi.dtype)
            factor = AugmentedCategorical(psi, eps, nz, validate_args=False).log_prob(yy)
            draws = nz.log_density(eps) + factor - q.log_prob(eps)         # (S, B)
            lp = draws.mean(0)
            ses.append(draws.var(0) / num_samples)                          # per-point MC variance
        parts.append(lp)
    lp = torch.cat(parts)
    n = lp.numel()
    out = {"mean": lp.mean().item(),
           "se": (torch.cat(ses).sum().sqrt() / n).item() if ses else 0.0}
    if return_pointwise:
        out["pointwise"] = lp
    return out


def _draw(q, noise, num_samples, generator, dtype):
    """Draws of q = noise(loc, scale) from an explicit generator (reproducible)."""
    u = torch.rand((num_samples,) + q.batch_shape, generator=generator, dtype=torch.float64)
    u = u.clamp(1e-12, 1 - 1e-12)
    name = getattr(noise, "name", "")
    if name == "normal":
        std = torch.special.ndtri(u)
    elif name == "logistic":
        std = torch.log(u) - torch.log1p(-u)
    elif name == "gumbel":
        std = -torch.log(-torch.log(u))
    else:
        return q.sample((num_samples,))
    return q.loc + q.scale * std.to(dtype)

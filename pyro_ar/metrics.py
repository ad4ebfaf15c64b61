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

__all__ = ["log_likelihood", "accuracy", "top_k_accuracy", "iter_utility_chunks"]


def iter_utility_chunks(utility, chunk_size: int = 1024):
    """Yield ``(start, stop, psi)`` with ``psi`` the full utilities of rows ``start:stop``.

    Never holds more than ``chunk_size x K`` utilities (a :class:`LinearUtility` is
    evaluated chunk by chunk).
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
    """
    hits = 0
    for start, stop, psi in iter_utility_chunks(utility, chunk_size):
        top = psi.topk(min(k, psi.shape[-1]), dim=-1).indices
        hits += (top == labels[start:stop].unsqueeze(-1)).any(-1).sum().item()
    return hits / labels.shape[0]


def accuracy(utility, labels: torch.Tensor, chunk_size: int = 1024) -> float:
    """Top-1 accuracy (argmax of the mean utilities)."""
    return top_k_accuracy(utility, labels, 1, chunk_size)

r"""Evaluation over all K classes when each rank holds one block of them.

For softmax (Gumbel noise) :math:`\log p(y\mid\psi) = \psi_y - \log\sum_k e^{\psi_k}`. Rank r
computes, chunk by chunk of datapoints, its shard's :math:`\ell_r = \log\sum_{k\in C_r}
e^{\psi_k}` and :math:`\max_{k\in C_r}\psi_k`, and :math:`\psi_y` where it owns y; two
all-reduces per chunk combine them with a max-shift,

.. math::  \log\sum_k e^{\psi_k} = M + \log\sum_r e^{\ell_r - M}, \qquad M = \max_r \ell_r,

and the prediction is correct when :math:`\psi_y \ge \max_r\max_{k\in C_r}\psi_k` (ties
count as correct). Work per rank :math:`O(N K_r D)`, communication :math:`O(N)` numbers,
independent of K. Results are accumulated in float64.

Every rank must run the same chunks (the all-reduces pair them up): the default chunk,
:math:`\lfloor 2^{22} / K_r\rfloor` rows, differs between ranks whose shards differ in size
(K not a multiple of R), so the ranks first agree on the smallest one -- one all-reduce
that also checks that they all hold the same number of rows.
"""

from typing import Dict, Optional

import torch

from ..noise import get_noise
from .collectives import all_reduce_sum, max_across

__all__ = ["sharded_evaluate"]


def sharded_evaluate(utility, labels: torch.Tensor, noise="gumbel", *, chunk_size: Optional[int] = None,
                     reduce: str = "mean", group=None) -> Dict[str, object]:
    r"""``{"log_lik", "accuracy"}`` of ``labels`` under a
    :class:`~pyro_ar.distributed.ShardedLinearUtility` with batch shape (N,), over all K
    classes (see the module docstring). ``reduce``: ``"mean"`` (floats), ``"sum"`` or
    ``"none"`` (per-datapoint float64 tensors). Every rank must call it with the same data.

    Example:

    >>> import torch
    >>> from pyro_ar.distributed import ShardedLinearUtility, class_shard
    >>> from pyro_ar.distributed.sharded_evaluation import sharded_evaluate
    >>> x, W, b = torch.randn(6, 3), torch.randn(40, 3), torch.randn(40)
    >>> y = torch.tensor([0, 1, 2, 3, 4, 39])
    >>> out = sharded_evaluate(ShardedLinearUtility(x, W, b, class_shard(40, 0, 1)), y, reduce="none")
    >>> torch.allclose(out["log_lik"], torch.log_softmax((x @ W.T + b).double(), -1)[range(6), y])
    True
    """
    noise = get_noise(noise)
    noise.log_normalizer(torch.zeros(0, 2, dtype=torch.float64))  # NotImplementedError before any collective
    if reduce not in ("mean", "sum", "none"):
        raise ValueError(f"reduce must be 'mean', 'sum' or 'none', got reduce={reduce!r}")
    x, n = utility.x, len(labels)
    if tuple(labels.shape) != (x.shape[0],) or x.dim() != 2:
        raise ValueError(f"labels must have shape ({x.shape[0]},), got {tuple(labels.shape)}")
    if not bool(torch.isfinite(x).all()):
        raise ValueError("x holds non-finite values (NaN or inf): the log-likelihoods would be NaN")
    if labels.dtype.is_floating_point or labels.dtype.is_complex or labels.dtype == torch.bool:
        raise ValueError(f"labels must be integer class indices, got dtype {labels.dtype}")
    if n and not bool(((labels >= 0) & (labels < utility.shard.num_classes)).all()):
        bad = labels[(labels < 0) | (labels >= utility.shard.num_classes)]
        raise ValueError(f"labels must lie in [0, {utility.shard.num_classes}), got {bad[:3].tolist()}")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int)
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be an int >= 1 or None, got chunk_size={chunk_size!r}")
    shard = utility.shard
    chunk = _agreed_chunk(n, chunk_size or max(1, (1 << 22) // max(1, shard.size)), x.device, group)
    if n == 0 and reduce == "mean":
        raise ValueError("no rows to evaluate: the mean of 0 log-likelihoods is undefined (reduce='sum' "
                         "or 'none' accept 0 rows)")
    log_lik, correct = [], []
    for lo in range(0, n, chunk):
        xs, ys = x[lo:lo + chunk], labels[lo:lo + chunk]
        psi = utility.local.with_inputs(xs).full().double()  # this shard's K_r utilities of the chunk
        log_norm = noise.log_normalizer(psi)  # the shards' log-normalisers combine by a log-sum-exp
        stats = max_across(torch.stack([log_norm, psi.amax(-1)]), group)  # (2, c)
        local = ys - shard.start
        own = (local >= 0) & (local < shard.size)
        psi_y = torch.where(own, psi.gather(-1, local.clamp(0, shard.size - 1).unsqueeze(-1)).squeeze(-1),
                            torch.zeros_like(psi[:, 0]))
        mass = torch.exp(log_norm - stats[0])
        summed = all_reduce_sum(torch.stack([mass, psi_y]), group)
        log_lik.append(summed[1] - stats[0] - summed[0].log())
        correct.append((summed[1] >= stats[1]).double())
    if not log_lik:  # no rows
        empty = torch.zeros(0, dtype=torch.float64, device=x.device)
        log_lik, correct = [empty], [empty]
    ll, acc = torch.cat(log_lik), torch.cat(correct)
    if reduce == "none":
        return {"log_lik": ll, "accuracy": acc}
    if reduce == "sum":
        return {"log_lik": ll.sum(), "accuracy": acc.sum()}
    return {"log_lik": float(ll.mean()), "accuracy": float(acc.mean())}


def _agreed_chunk(n: int, chunk: int, device, group) -> int:
    """The smallest of the ranks' chunk sizes (so that they run the same collectives), after
    checking that every rank evaluates ``n`` rows."""
    agreed = max_across(torch.tensor([float(n), -float(n), -float(chunk)], dtype=torch.float64,
                                     device=device), group).tolist()
    if agreed[0] != -agreed[1]:
        raise ValueError(f"every rank must evaluate the same rows, but the ranks hold between "
                         f"{int(-agreed[1])} and {int(agreed[0])} (this rank: {n})")
    return int(-agreed[2])

r"""The collectives of distributed A&R, counted: sums across shards, max-shifts, sparse rows.

* :func:`sum_across` -- :math:`\sum_r t_r` over the ranks, differentiable with the
  *identity* as backward pass. It is meant for model-parallel partial sums that every rank
  then feeds into the *same* downstream computation (the class-sharded A&R bound): the
  loss :math:`L(\sum_r t_r)` is then the same function on every rank, and
  :math:`\partial L/\partial t_r = \partial L/\partial(\sum_s t_s)` is already known
  locally -- no communication in the backward pass, and a shard's rows get their gradient
  on their own rank only. (``torch.distributed.nn.functional.all_reduce`` would all-reduce
  the gradients too and return :math:`R` times this gradient, the gradient of
  :math:`\sum_r L`.)
* :func:`max_across` -- the elementwise max over the ranks, not differentiable: used as a
  detached shift for log-sum-exps split over shards,
  :math:`\log\sum_r\sum_{k\in r} e^{z_k} = m + \log\sum_r\sum_{k\in r} e^{z_k - m}`,
  :math:`m = \max_r \max_{k\in r} z_k` (the shift cancels, so it needs no gradient).
* :func:`all_gather_rows` -- the (row indices, row values) of a sparse gradient from every
  rank, padded to the largest count for ``all_gather`` and trimmed back.

Every call adds its payload (bytes this rank contributes, ``numel * element_size``) to
:data:`COMM`, a :class:`CommCounter`; a ring all-reduce moves about :math:`2(R-1)/R` times the
payload per rank over the wire. Without a process group every collective is the identity
(one rank) and counts nothing.
"""

from typing import List, Tuple

import torch
import torch.distributed as dist

from .process_group import get_world_size, is_distributed

__all__ = ["CommCounter", "COMM", "sum_across", "max_across", "all_gather_rows", "all_reduce_sum"]


class CommCounter:
    """Bytes and calls of the collectives of this process (payload this rank contributes).

    Example:

    >>> from pyro_ar.distributed.collectives import CommCounter
    >>> c = CommCounter()
    >>> c.add(3, 8)
    >>> c.bytes, c.calls
    (24, 1)
    """

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.bytes, self.calls = 0, 0

    def add(self, numel: int, element_size: int) -> None:
        self.bytes += int(numel) * int(element_size)
        self.calls += 1


#: the process-wide counter of :mod:`pyro_ar.distributed`'s collectives
COMM = CommCounter()


def _active(group) -> bool:
    return is_distributed() and get_world_size(group) > 1


def all_reduce_sum(t: torch.Tensor, group=None) -> torch.Tensor:
    """The sum of ``t`` over the ranks (a new tensor; no gradient).

    Example:

    >>> import torch
    >>> from pyro_ar.distributed.collectives import all_reduce_sum
    >>> all_reduce_sum(torch.tensor([1.0, 2.0]))       # one process: the identity
    tensor([1., 2.])
    """
    out = t.detach().clone()
    if _active(group):
        COMM.add(out.numel(), out.element_size())
        dist.all_reduce(out, op=dist.ReduceOp.SUM, group=group)
    return out


class _SumAcross(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, group):
        return all_reduce_sum(t, group)

    @staticmethod
    def backward(ctx, grad):
        return grad, None


def sum_across(t: torch.Tensor, group=None) -> torch.Tensor:
    r""":math:`\sum_r t_r` over the ranks, with the identity as its backward pass (see the
    module docstring: every rank must use the result in the same downstream computation).

    Example:

    >>> import torch
    >>> from pyro_ar.distributed import sum_across
    >>> t = torch.tensor([1.0, 2.0], requires_grad=True)
    >>> (3 * sum_across(t)).sum().backward()
    >>> t.grad                                     # dL/dt_r = dL/d(sum), locally
    tensor([3., 3.])
    """
    if not _active(group):
        return t
    return _SumAcross.apply(t, group)


def max_across(t: torch.Tensor, group=None) -> torch.Tensor:
    """The elementwise max of ``t`` over the ranks, detached (a shift, not a value to
    differentiate).

    Example:

    >>> import torch
    >>> from pyro_ar.distributed import max_across
    >>> max_across(torch.tensor([1.0, -2.0]))
    tensor([ 1., -2.])
    """
    out = t.detach().clone()
    if _active(group):
        COMM.add(out.numel(), out.element_size())
        dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
    return out


def all_gather_rows(rows: torch.Tensor, values: torch.Tensor, group=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """Concatenate the ``(rows (n_r,), values (n_r, ...))`` of every rank, in rank order.

    Two collectives: the counts :math:`n_r`, then the rows and values padded to
    :math:`\\max_r n_r` (the padding is dropped again, so no spurious row appears).

    Example:

    >>> import torch
    >>> from pyro_ar.distributed.collectives import all_gather_rows
    >>> rows, values = all_gather_rows(torch.tensor([3, 5]), torch.ones(2, 4))
    >>> rows.tolist(), tuple(values.shape)
    ([3, 5], (2, 4))
    """
    if not _active(group):
        return rows, values
    world = get_world_size(group)
    n = torch.tensor([rows.numel()], dtype=torch.long, device=rows.device)
    counts = [torch.zeros_like(n) for _ in range(world)]
    COMM.add(1, n.element_size())
    dist.all_gather(counts, n, group=group)
    counts = [int(c) for c in counts]
    m = max(counts)
    pad_rows = rows.new_zeros((m,))
    pad_rows[: rows.numel()] = rows
    pad_values = values.new_zeros((m,) + values.shape[1:])
    pad_values[: rows.numel()] = values
    all_rows: List[torch.Tensor] = [torch.empty_like(pad_rows) for _ in range(world)]
    all_values: List[torch.Tensor] = [torch.empty_like(pad_values) for _ in range(world)]
    COMM.add(pad_rows.numel(), pad_rows.element_size())
    dist.all_gather(all_rows, pad_rows, group=group)
    COMM.add(pad_values.numel(), pad_values.element_size())
    dist.all_gather(all_values, pad_values, group=group)
    return (torch.cat([r[:c] for r, c in zip(all_rows, counts)]),
            torch.cat([v[:c] for v, c in zip(all_values, counts)]))

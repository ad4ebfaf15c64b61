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

import contextlib
import time
from typing import List, Sequence, Tuple

import torch
import torch.distributed as dist

from ..infer.checkpoint import CollectiveError
from .process_group import describe_failure, get_rank, get_world_size, is_distributed

__all__ = ["CommCounter", "COMM", "sum_across", "max_across", "all_gather_rows", "all_reduce_sum"]


class CommCounter:
    """Bytes, calls and time (wall and CPU seconds of this process) of the collectives.

    ``bytes`` is the payload this rank contributes. The times include waiting for the other
    ranks (on a loaded machine, mostly that).

    Example:

    >>> from pyro_ar.distributed.collectives import CommCounter
    >>> c = CommCounter()
    >>> with c.count(3, 8):
    ...     pass                       # a collective of 3 eight-byte numbers
    >>> c.bytes, c.calls
    (24, 1)
    """

    def __init__(self):
        self.reset()

    def reset(self) -> None:
        self.bytes, self.calls, self.wall, self.cpu = 0, 0, 0.0, 0.0

    @contextlib.contextmanager
    def count(self, numel: int, element_size: int):
        self.bytes += int(numel) * int(element_size)
        self.calls += 1
        w0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - w0
            self.cpu += time.process_time() - c0


#: the process-wide counter of :mod:`pyro_ar.distributed`'s collectives
COMM = CommCounter()


def _active(group) -> bool:
    return is_distributed() and get_world_size(group) > 1


@contextlib.contextmanager
def _collective(what: str, group, t: torch.Tensor):
    """Count a collective's payload (:data:`COMM`); if it fails, raise a
    :class:`~pyro_ar.infer.checkpoint.CollectiveError` (a ``RuntimeError``) naming the ranks that
    did not reach it (:func:`~pyro_ar.distributed.process_group.describe_failure`)."""
    with COMM.count(t.numel(), t.element_size()):
        try:
            yield
        except RuntimeError as e:
            report = describe_failure(what, group)
            raise CollectiveError(f"{what} across the ranks failed on rank {get_rank()} of "
                               f"{get_world_size(group)}: {e}" + (f"; {report}" if report else "")) from e


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
        with _collective("all_reduce(sum)", group, out):
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
        with _collective("all_reduce(max)", group, out):
            dist.all_reduce(out, op=dist.ReduceOp.MAX, group=group)
    return out


def all_gather_rows(pairs: Sequence[Tuple[torch.Tensor, torch.Tensor]], group=None) -> List[Tuple[torch.Tensor, torch.Tensor]]:
    """For each ``(rows (n,), values (n, ...))`` of ``pairs`` (e.g. the sparse gradients of
    several parameters), the concatenation of every rank's, in rank order.

    Three collectives whatever the number of pairs: the counts, then all rows (int64) and
    all values (one buffer per dtype), each pair padded to its largest count over the
    ranks; the padding is dropped again, so no spurious row appears.

    Example:

    >>> import torch
    >>> from pyro_ar.distributed.collectives import all_gather_rows
    >>> [(rows, values)] = all_gather_rows([(torch.tensor([3, 5]), torch.ones(2, 4))])
    >>> rows.tolist(), tuple(values.shape)
    ([3, 5], (2, 4))
    """
    pairs = list(pairs)
    if not _active(group) or not pairs:
        return pairs
    world = get_world_size(group)
    device = pairs[0][0].device
    n = torch.tensor([r.numel() for r, _ in pairs], dtype=torch.long, device=device)
    counts = [torch.empty_like(n) for _ in range(world)]
    with _collective("all_gather(counts)", group, n):
        dist.all_gather(counts, n, group=group)
    counts = torch.stack(counts).tolist()              # [rank][pair]
    m = [max(c[i] for c in counts) for i in range(len(pairs))]
    rows = torch.cat([torch.cat([r, r.new_zeros(mi - r.numel())]) for (r, _), mi in zip(pairs, m)])
    gathered_rows = _gather_flat(rows, world, group)
    by_dtype = {}
    for i, (_, v) in enumerate(pairs):
        by_dtype.setdefault(v.dtype, []).append(i)
    gathered_values = {}
    for dtype, ids in by_dtype.items():
        flat = torch.cat([torch.cat([pairs[i][1].reshape(-1),
                                     pairs[i][1].new_zeros((m[i] - pairs[i][0].numel()) * _row_numel(pairs[i][1]))])
                          for i in ids])
        gathered_values[dtype] = (ids, _gather_flat(flat, world, group))
    out_rows = _split(gathered_rows, m, [1] * len(pairs), counts)
    out_values = [None] * len(pairs)
    for dtype, (ids, chunks) in gathered_values.items():
        sizes = [_row_numel(pairs[i][1]) for i in ids]
        parts = _split(chunks, [m[i] for i in ids], sizes, [[c[i] for i in ids] for c in counts])
        for i, part in zip(ids, parts):
            out_values[i] = part.reshape((-1,) + pairs[i][1].shape[1:])
    return list(zip(out_rows, out_values))


def _row_numel(values: torch.Tensor) -> int:
    return int(torch.Size(values.shape[1:]).numel())


def _gather_flat(flat: torch.Tensor, world: int, group) -> List[torch.Tensor]:
    out = [torch.empty_like(flat) for _ in range(world)]
    with _collective("all_gather(rows)", group, flat):
        dist.all_gather(out, flat, group=group)
    return out


def _split(chunks, padded, row_sizes, counts) -> List[torch.Tensor]:
    """From each rank's flat chunk (pairs padded to ``padded`` rows of ``row_sizes``), the
    concatenation over ranks of each pair's first ``counts[rank][pair]`` rows (flat)."""
    out = [[] for _ in padded]
    for chunk, rank_counts in zip(chunks, counts):
        offset = 0
        for i, (mi, size) in enumerate(zip(padded, row_sizes)):
            out[i].append(chunk[offset: offset + rank_counts[i] * size])
            offset += mi * size
    return [torch.cat(parts) for parts in out]

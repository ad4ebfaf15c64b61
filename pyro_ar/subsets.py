r"""Uniform random k-subsets of ``range(n)`` without O(n) work: the class subsamples of the
plates, the negatives and the priors' estimates (:func:`sample_without_replacement`).

For k small relative to n, iid uniform draws keep each row's first k distinct values in draw
order, so every row is a uniformly random ordered k-subset at O(k) cost; otherwise a random
permutation. The first-distinct selection is one stable sort with fixed-size operations, so
on a GPU it needs no host-device synchronisation.
"""

import math
from typing import Optional, Sequence, Union

import torch

from .numerics import check_int

__all__ = ["sample_without_replacement"]


def sample_without_replacement(n: int, k: int, shape: Sequence[int] = (),
                               device: Optional[Union[str, torch.device]] = None,
                               generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """``shape + (k,)`` integers, each row a uniform random k-subset of ``range(n)``.

    When k is small relative to n: iid uniform draws, keeping the first k distinct
    values of each row in draw order (the first distinct value is uniform, each next one
    uniform among the values not seen yet, so every row is a uniformly random ordered
    k-subset). Vectorised over rows, O(k) work per row and no O(n) work; a row that got
    fewer than k distinct values in its draws (rare: the number of draws leaves a margin
    for the expected ~k^2/(2n) repeats) is redrawn, which conditions on an event that
    does not depend on the labels and so keeps the result uniform. Otherwise (4k >= n) a
    random permutation. On a GPU the check for a redraw would stop the host until the
    device catches up at every call; there the draws leave a margin of 12 standard
    deviations of the repeats (a shortfall has probability below 1e-20) and a shortfall
    stops the program with a device-side assertion instead of a redraw.

    Example:

    >>> from pyro_ar.subsets import sample_without_replacement
    >>> idx = sample_without_replacement(1_000_000, 512)   # O(512), not O(10^6)
    >>> idx.shape, idx.unique().numel()
    (torch.Size([512]), 512)
    """
    shape = torch.Size(shape)
    n = check_int("n", n, low=0)
    k = check_int("k", k, low=0)
    if not k <= n:
        raise ValueError(f"cannot draw k={k} distinct classes out of n={n}")
    if 4 * k >= n:
        keys = torch.rand(shape + (n,), device=device, generator=generator)
        return keys.argsort(dim=-1)[..., :k]
    rows = shape.numel()
    out = torch.empty((rows, k), dtype=torch.long, device=device)
    if rows == 0 or k == 0:
        return out.reshape(shape + (k,))
    # draws per row: k plus ~6 standard deviations above the expected number of repeats
    # (about k^2/(2n) for k << n), so that a redraw is rare
    repeats = k * k / (2.0 * n)
    deferred = _defer_check(out.device)
    sds, spare = (12.0, 24.0) if deferred else (6.0, 2.0)
    m = k + int(math.ceil(repeats + sds * math.sqrt(repeats) + spare))
    if deferred:
        draws = torch.randint(0, n, (rows, m), device=device, generator=generator)
        filled, ok = _first_k_distinct(draws, n, k)
        torch._assert_async(ok.all(), "sample_without_replacement: fewer than k distinct draws")
        return filled.reshape(shape + (k,))
    if rows == 1:  # one row (a plate's subsample, shared negatives): fewer, flat ops
        draws = torch.randint(0, n, (m,), device=device, generator=generator)
        filled = _first_distinct(draws)
        if filled.numel() >= k:
            return filled[:k].reshape(shape + (k,))
        m = 2 * m  # rare: redraw, as below
    todo = None  # rows still to fill (None: all)
    while True:
        r = rows if todo is None else todo.numel()
        draws = torch.randint(0, n, (r, m), device=device, generator=generator)
        filled, ok = _first_k_distinct(draws, n, k)
        if todo is None:
            if bool(ok.all()):
                return filled.reshape(shape + (k,))
            out.copy_(filled)
            todo = (~ok).nonzero().squeeze(-1)
        else:
            out.index_copy_(0, todo[ok], filled[ok])
            todo = todo[~ok]
            if todo.numel() == 0:
                return out.reshape(shape + (k,))
        m = 2 * m


def _defer_check(device: torch.device) -> bool:
    """Whether :func:`sample_without_replacement` asserts on the device rather than checks on
    the host (where a host check would wait for the device: CUDA)."""
    return device.type == "cuda"


def _first_k_distinct(draws: torch.Tensor, n: int, k: int):
    """For each row of ``draws`` (r, m) of values in [0, n): its first k distinct values in
    draw order (r, k), and whether the row had k (r,). Fixed-size ops only (no host-device
    synchronisation)."""
    r, m = draws.shape
    # one flat stable sort of (row, value) keys: a draw repeats a value of its row when it
    # equals its predecessor in sorted order (stability puts the first one first)
    keys = draws + torch.arange(r, device=draws.device).unsqueeze(-1) * n
    sorted_keys, perm = keys.reshape(-1).sort(stable=True)
    first_sorted = torch.ones_like(sorted_keys, dtype=torch.bool)
    first_sorted[1:] = sorted_keys[1:] != sorted_keys[:-1]
    keep = torch.empty_like(first_sorted).scatter_(0, perm, first_sorted).reshape(r, m)
    rank = keep.cumsum(-1)
    # the j-th distinct value of a row goes to column j - 1; the rest to a spare column k
    col = torch.where(keep & (rank <= k), rank - 1, torch.full_like(rank, k))
    filled = draws.new_empty((r, k + 1)).scatter_(-1, col, draws)[:, :k]
    return filled, rank[:, -1] >= k


def _first_distinct(draws: torch.Tensor) -> torch.Tensor:
    """The distinct values of a 1-D tensor, each at its first occurrence, in draw order."""
    sorted_draws, perm = draws.sort(stable=True)
    first_sorted = torch.ones_like(sorted_draws, dtype=torch.bool)
    torch.ne(sorted_draws[1:], sorted_draws[:-1], out=first_sorted[1:])
    return draws[torch.empty_like(first_sorted).scatter_(0, perm, first_sorted)]

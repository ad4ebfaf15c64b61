r"""The process group: start it from ``torchrun``'s environment, ranks, shards of a range.

``torchrun --nproc_per_node=R script.py`` starts R processes with the environment variables
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
:func:`init_process_group` reads them and starts ``torch.distributed`` with gloo on CPU or
NCCL on CUDA. Without them (a plain ``python script.py``) nothing is started and every
helper answers as for one process (rank 0 of 1), so one script serves both.

Contiguous shards: ``n`` items split over ``R`` shards give shard ``r`` the items
:math:`[\lfloor rn/R\rfloor, \lfloor (r+1)n/R\rfloor)` (sizes differ by at most one) --
the rows of the data in :mod:`pyro_ar.distributed.data_parallel`, the classes in
:mod:`pyro_ar.distributed.class_sharded`.
"""

import os
import socket
from typing import Optional, Tuple

import torch
import torch.distributed as dist

__all__ = ["init_process_group", "is_distributed", "get_rank", "get_world_size", "shard_range",
           "rank_path", "free_port", "default_backend"]


def is_distributed() -> bool:
    """Whether a ``torch.distributed`` process group is running.

    Example:

    >>> from pyro_ar.distributed import is_distributed
    >>> is_distributed()          # a plain python process
    False
    """
    return dist.is_available() and dist.is_initialized()


def get_rank(group=None) -> int:
    """This process's rank in ``group`` (0 without a process group).

    Example:

    >>> from pyro_ar.distributed import get_rank
    >>> get_rank()
    0
    """
    return dist.get_rank(group) if is_distributed() else 0


def get_world_size(group=None) -> int:
    """The number of processes in ``group`` (1 without a process group).

    Example:

    >>> from pyro_ar.distributed import get_world_size
    >>> get_world_size()
    1
    """
    return dist.get_world_size(group) if is_distributed() else 1


def default_backend(device=None) -> str:
    """``"nccl"`` for a CUDA device (when NCCL is built in), else ``"gloo"``.

    Example:

    >>> from pyro_ar.distributed import default_backend
    >>> default_backend("cpu")
    'gloo'
    """
    device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    return "nccl" if device.type == "cuda" and dist.is_nccl_available() else "gloo"


def init_process_group(backend: Optional[str] = None, device=None, **kwargs) -> Tuple[int, int]:
    """Start ``torch.distributed`` from ``torchrun``'s environment; return ``(rank, world_size)``.

    Without ``RANK`` / ``WORLD_SIZE`` in the environment (not launched by ``torchrun``)
    nothing is started and ``(0, 1)`` is returned. ``backend`` defaults to
    :func:`default_backend`; with NCCL the CUDA device ``LOCAL_RANK`` is selected.
    ``kwargs`` go to ``torch.distributed.init_process_group`` (e.g. ``timeout``).

    Example:

    >>> from pyro_ar.distributed import init_process_group
    >>> init_process_group()        # no torchrun environment here: one process
    (0, 1)
    """
    if is_distributed():
        return get_rank(), get_world_size()
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0, 1
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build")
    backend = backend or default_backend(device)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    dist.init_process_group(backend, **kwargs)
    return get_rank(), get_world_size()


def shard_range(n: int, shard: int, num_shards: int) -> Tuple[int, int]:
    r"""``(start, stop)`` of shard ``shard`` of ``n`` items split into ``num_shards``
    contiguous shards, :math:`[\lfloor sn/R\rfloor, \lfloor (s+1)n/R\rfloor)`.

    Example:

    >>> from pyro_ar.distributed import shard_range
    >>> [shard_range(10, r, 3) for r in range(3)]
    [(0, 3), (3, 6), (6, 10)]
    """
    for name, value in (("n", n), ("num_shards", num_shards), ("shard", shard)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {name}={value!r}")
    if num_shards < 1 or n < num_shards:
        raise ValueError(f"cannot split n={n} items into num_shards={num_shards} non-empty shards")
    if not 0 <= shard < num_shards:
        raise ValueError(f"shard must lie in [0, {num_shards}), got shard={shard}")
    return shard * n // num_shards, (shard + 1) * n // num_shards


def rank_path(path, rank: Optional[int] = None, world_size: Optional[int] = None) -> str:
    """A per-rank file name: ``run.pt`` -> ``run.rank1-of-2.pt`` (the rank and world size
    default to this process's), so that each rank checkpoints its own state and a resumed
    run with another world size does not pick up files of a different layout.

    Example:

    >>> from pyro_ar.distributed import rank_path
    >>> rank_path("ckpt/run.pt", 1, 2)
    'ckpt/run.rank1-of-2.pt'
    """
    rank = get_rank() if rank is None else rank
    world_size = get_world_size() if world_size is None else world_size
    root, ext = os.path.splitext(os.fspath(path))
    return f"{root}.rank{rank}-of-{world_size}{ext}"


def free_port() -> int:
    """A TCP port free on localhost right now (for ``MASTER_PORT`` of local test runs).

    Example:

    >>> from pyro_ar.distributed import free_port
    >>> 0 < free_port() < 65536
    True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]

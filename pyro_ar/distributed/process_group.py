r"""The process group: start it from ``torchrun``'s environment, ranks, shards of a range.

``torchrun --nproc_per_node=R script.py`` starts R processes with the environment variables
``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR`` and ``MASTER_PORT``;
:func:`init_process_group` reads them and starts ``torch.distributed`` with gloo on CPU or
NCCL on CUDA. Without them (a plain ``python script.py``) nothing is started and every
helper answers as for one process (rank 0 of 1), so one script serves both.

Timeouts: :func:`init_process_group` gives the rendezvous and every collective a timeout,
:data:`DEFAULT_TIMEOUT` (5 minutes) unless told otherwise, instead of torch's 30 minutes,
and starts a heartbeat (a daemon thread writing the time to the process group's store
every ``min(5 s, timeout / 4)``). When a collective of :mod:`pyro_ar.distributed` fails
(a timeout, a closed connection), the rank reports its failure to the store, waits two
heartbeat periods and names the ranks that did not reach the collective, each as frozen
or dead (no recent heartbeat) or alive but elsewhere (:func:`describe_failure`).

Contiguous shards: ``n`` items split over ``R`` shards give shard ``r`` the items
:math:`[\lfloor rn/R\rfloor, \lfloor (r+1)n/R\rfloor)` (sizes differ by at most one) --
the rows of the data in :mod:`pyro_ar.distributed.data_parallel`, the classes in
:mod:`pyro_ar.distributed.class_sharded`.
"""

import atexit
import datetime
import os
import socket
import threading
import time
from typing import Optional, Tuple, Union

import torch
import torch.distributed as dist

__all__ = ["init_process_group", "shutdown_process_group", "is_distributed", "get_rank", "get_world_size", "shard_range",
           "rank_path", "free_port", "default_backend", "DEFAULT_TIMEOUT", "describe_failure"]

#: The default timeout of :func:`init_process_group`: for the ranks to meet at the start and
#: for every collective (a frozen or dead rank is reported after it, not after torch's 30 min).
DEFAULT_TIMEOUT = datetime.timedelta(minutes=5)
_HEARTBEAT, _FAILED = "pyro_ar/heartbeat/{}", "pyro_ar/failed/{}"
_heartbeat = {"period": None, "stop": None, "thread": None}
#: whether :func:`init_process_group` started the running group (then it is ours to destroy at exit)
_started = {"group": False, "hook": False}


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


def init_process_group(backend: Optional[str] = None, device=None,
                       timeout: Union[float, datetime.timedelta] = DEFAULT_TIMEOUT, **kwargs) -> Tuple[int, int]:
    """Start ``torch.distributed`` from ``torchrun``'s environment; return ``(rank, world_size)``.

    Without ``RANK`` / ``WORLD_SIZE`` in the environment (not launched by ``torchrun``)
    nothing is started and ``(0, 1)`` is returned. ``backend`` defaults to
    :func:`default_backend`; with NCCL the CUDA device ``LOCAL_RANK`` is selected.
    ``timeout`` (seconds or a ``timedelta``; default :data:`DEFAULT_TIMEOUT`, 5 minutes)
    bounds the wait for the other ranks at the start and in every collective; a heartbeat
    lets a failed collective name the missing ranks (see the module docstring). Other
    ``kwargs`` go to ``torch.distributed.init_process_group``.

    Example:

    >>> from pyro_ar.distributed import init_process_group
    >>> init_process_group()        # no torchrun environment here: one process
    (0, 1)
    """
    if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < 1e8:
        timeout = datetime.timedelta(seconds=timeout)
    if not (isinstance(timeout, datetime.timedelta) and timeout.total_seconds() > 0):
        raise ValueError(f"timeout must be a positive number of seconds (below 1e8) or a timedelta, got "
                         f"timeout={timeout!r}")
    if backend is not None and backend not in ("gloo", "nccl", "mpi", "ucc"):
        raise ValueError(f"backend must be None, 'gloo', 'nccl', 'mpi' or 'ucc', got backend={backend!r}")
    if is_distributed():
        return get_rank(), get_world_size()
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        return 0, 1
    if not dist.is_available():
        raise RuntimeError("torch.distributed is not available in this torch build")
    backend = backend or default_backend(device)
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    try:
        dist.init_process_group(backend, timeout=timeout, **kwargs)
    except Exception as e:  # noqa: BLE001  (torch raises several types: say who waited for whom)
        raise RuntimeError(
            f"rank {os.environ['RANK']} of {os.environ['WORLD_SIZE']} could not start the process group at "
            f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')} within {timeout}: not every "
            f"rank joined (check that all of them were started, with the same MASTER_ADDR and "
            f"MASTER_PORT): {type(e).__name__}: {e}") from e
    _start_heartbeat(timeout)
    _started["group"] = True
    if backend == "gloo" and not _started["hook"]:  # (see shutdown_process_group)
        atexit.register(_shutdown_at_exit)
        _started["hook"] = True
    return get_rank(), get_world_size()


def shutdown_process_group() -> None:
    """Stop the heartbeat and destroy the process group (``torch.distributed.destroy_process_group``),
    if one is running; call it on every rank once the collectives are done (nothing to do
    without a process group).

    A script whose ranks exit without destroying a gloo group can abort at exit (``terminate
    called without an active exception``, SIGABRT: about 1 launch in 11 of a 2-rank run, issue
    38): gloo's C++ threads still hold work whose tensors are freed while the interpreter is
    being torn down. A group started by :func:`init_process_group` with gloo is therefore
    destroyed by an exit hook (``atexit``, which runs while the interpreter is still whole)
    unless the script has done so; an NCCL group is not (its destruction may wait for the
    other ranks: a hook could hang an exit) and a group started by ``torch.distributed``
    itself is the script's own: call this (or ``destroy_process_group``) at the end.

    Example:

    >>> from pyro_ar.distributed import shutdown_process_group
    >>> shutdown_process_group()      # no process group here: nothing to do
    """
    if _heartbeat["stop"] is not None:
        _heartbeat["stop"].set()
        thread = _heartbeat["thread"]
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=1.0)  # (it is waiting on the event, or in one store.set)
        _heartbeat.update(period=None, stop=None, thread=None)
    if is_distributed():
        dist.destroy_process_group()
    _started["group"] = False


def _shutdown_at_exit() -> None:
    """The exit hook: destroy the group :func:`init_process_group` started, if still running."""
    if _started["group"] and is_distributed():
        try:
            shutdown_process_group()
        except Exception:  # noqa: BLE001  (at exit: a failure here must not mask the script's own)
            pass


def _store():
    """The process group's key-value store (None if there is none)."""
    try:
        from torch.distributed.distributed_c10d import _get_default_store
        return _get_default_store()
    except Exception:  # noqa: BLE001  (no default group, or another torch)
        return None


def _start_heartbeat(timeout: datetime.timedelta) -> None:
    store = _store()
    if store is None:
        return
    if _heartbeat["stop"] is not None:
        _heartbeat["stop"].set()
    period = max(0.05, min(5.0, timeout.total_seconds() / 4))
    stop, key = threading.Event(), _HEARTBEAT.format(get_rank())

    def beat():
        while not stop.is_set():
            try:
                store.set(key, repr(time.time()))
            except Exception:  # noqa: BLE001  (the group was destroyed, or rank 0 is gone)
                return
            stop.wait(period)
    thread = threading.Thread(target=beat, name="pyro_ar-heartbeat", daemon=True)
    thread.start()
    _heartbeat.update(period=period, stop=stop, thread=thread)


def describe_failure(what: str, group=None) -> str:
    """Which ranks of ``group`` did not reach the failed collective ``what`` (call it on the
    rank where the collective raised): this rank reports its failure to the store, waits two
    heartbeat periods, then reads the other ranks' reports and heartbeats. Returns a
    sentence (empty without a process group or store).

    Example:

    >>> from pyro_ar.distributed.process_group import describe_failure
    >>> describe_failure("all_reduce")          # no process group here
    ''
    """
    store = _store() if is_distributed() else None
    if store is None:
        return ""
    rank, period = dist.get_rank(), _heartbeat["period"]
    ranks = dist.get_process_group_ranks(group) if group is not None else range(dist.get_world_size())
    try:
        store.set(_FAILED.format(rank), what)
        time.sleep(2 * (period or 0.5))
        now, missing, waited = time.time(), [], []
        for r in ranks:
            if r == rank:
                continue
            if store.check([_FAILED.format(r)]):
                waited.append(r)
                continue
            beat = float(store.get(_HEARTBEAT.format(r))) if store.check([_HEARTBEAT.format(r)]) else None
            if period is None or beat is None:
                missing.append(f"rank {r}")
            elif now - beat > 1.5 * period:
                missing.append(f"rank {r} (no heartbeat for {now - beat:.1f} s: frozen or dead)")
            else:
                missing.append(f"rank {r} (alive, heartbeat {now - beat:.1f} s ago: busy or stuck elsewhere)")
    except Exception:  # noqa: BLE001  (the store lives on rank 0)
        return "the store on rank 0 does not answer: rank 0 is probably dead"
    if not missing:
        return (f"every rank reached a collective and failed ({', '.join(map(str, waited))} too): they "
                f"disagree on its size or order (e.g. ranks with different data or settings)")
    return (f"did not reach it: {', '.join(missing)}"
            + (f"; ranks {', '.join(map(str, waited))} waited as well" if waited else ""))


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
    for name, value in (("world_size", world_size), ("rank", rank)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{name} must be an int, got {name}={value!r}")
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"rank must lie in [0, world_size) with world_size >= 1, got rank={rank}, "
                         f"world_size={world_size}")
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

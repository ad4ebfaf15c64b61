r"""Data-parallel SVI: the data plate split over the ranks, global gradients averaged.

The N datapoints are split into R contiguous shards (:func:`~pyro_ar.distributed.shard_range`);
rank r holds only its :math:`N_r` rows and the per-datapoint local parameters of those rows
(e.g. :math:`\eta_n` of :class:`~pyro_ar.infer.GumbelLocalGuide`), which never travel. At
every step rank r draws :math:`B_r = B/R` of its rows (:class:`ShardedDataPlate`, from its
own :class:`~pyro_ar.distributed.RandomStream`) and its ELBO estimate is scaled by R:

.. math::  \hat L_r = R\,\frac{N_r}{B_r}\sum_{n\in\text{batch}_r} \mathrm{ELBO}_n
           + (\text{terms outside the data plate}),

an estimate of the *full* objective :math:`\sum_{n=1}^N \mathrm{ELBO}_n` (unbiased when
the shards are exchangeable, e.g. the data shuffled once). The average over the ranks,

.. math::  \frac1R\sum_r \hat L_r = \sum_r \frac{N_r}{B_r}\sum_{n\in\text{batch}_r}\mathrm{ELBO}_n + (\dots),

is the stratified estimator of the full objective, unbiased for any shard sizes, with the
terms outside the plate (the MAP prior, global latents) counted once: **averaging the
gradients is the correct reduction**. :func:`data_parallel` wraps any Pyro optimizer of
the library so that before its step the gradients of the global (replicated) parameters
are averaged over the ranks -- dense ones by ``all_reduce``, row-sparse ones (lazy
utilities, ``sparse=True``) by gathering every rank's (rows, values) and coalescing, so
a step moves :math:`O(R\,(B + s)\,D)` numbers, not :math:`O(KD)` -- and the local
parameters are left alone. Every rank then takes the same step from the same gradient:
the replicas stay identical (same seed everywhere, so the same initial values).

Randomness: each rank draws its minibatch rows and the latent values of its datapoints
(e.g. the guide's noise draws) from its shard's :class:`~pyro_ar.distributed.RandomStream`;
torch's global generator, seeded alike on every rank, draws what is drawn once for the
whole step -- e.g. :class:`~pyro_ar.negatives.SharedNegatives` -- alike on every rank, so with ``shard="all"`` one process reproduces an R-rank run
exactly (up to the order of floating-point sums): the reference of the tests.
"""

import math
from typing import Callable, Dict, Optional

import torch

import pyro
from pyro.optim import PyroOptim

from ..infer.local_guides import local_parameter_names
from ..models.base import WeightedPlate
from ..subsets import sample_without_replacement
from .collectives import all_gather_rows, all_reduce_sum
from .process_group import get_rank, get_world_size, shard_range
from .random_stream import RandomStream

__all__ = ["ShardedDataPlate", "data_parallel", "reduce_gradients",
           "mean_across"]


class _ShardPlate(WeightedPlate):
    """A (weighted) data plate whose sites are further scaled by a constant and whose latent
    draws (e.g. the guide's noise values) come from a shard's random stream."""

    def __init__(self, name, size, subsample=None, weight=None, scale=1.0, stream=None):
        super().__init__(name, size, subsample=subsample, weight=weight)
        self.extra_scale, self.stream, self._entered = float(scale), stream, []

    def _process_message(self, msg):
        super()._process_message(msg)
        if self.extra_scale != 1.0:
            msg["scale"] = msg["scale"] * self.extra_scale
        drawn = msg["type"] == "sample" and not msg["is_observed"] and msg["value"] is None
        if self.stream is not None and drawn:
            self.stream.__enter__()
            self._entered.append(msg["name"])

    def _postprocess_message(self, msg):
        if self._entered and self._entered[-1] == msg["name"]:
            self._entered.pop()
            self.stream.__exit__(None, None, None)
        super()._postprocess_message(msg)


class ShardedDataPlate(torch.nn.Module):
    r"""The data plate of one rank's shard (or, with ``shard="all"``, of all shards in one process).

    :param int num_data: N, the size of the whole data set.
    :param subsample_size: B, the minibatch of all ranks together (each draws
        :math:`B/R`; None: every rank uses its whole shard).
    :param shard: this rank's shard (default: the rank), or ``"all"``: one process that
        draws every shard's minibatch as the R ranks would and concatenates them.
    :param num_shards: R (default: the world size).
    :param int seed: shard r draws its rows from ``RandomStream(seed + 7919 * (r + 1))`` and the
        latent values of its datapoints from ``RandomStream(seed + 7919 * (r + 1) + 1)``.
    :param str name: the plate's name (the models' is ``"data"``).

    Use it as the model's ``create_plates`` (:meth:`attach`) before building the guide,
    give the model and guide this shard's rows (:meth:`shard_rows`) and pass the plate in
    ``modules=`` of :func:`~pyro_ar.infer.train` so checkpoints carry its random streams.

    Example:

    >>> import torch
    >>> from pyro_ar.distributed import ShardedDataPlate
    >>> plate = ShardedDataPlate(10, 4, shard=1, num_shards=2)    # rank 1 of 2: rows 5..9
    >>> plate.shard_rows(torch.arange(10)).tolist()
    [5, 6, 7, 8, 9]
    >>> with plate(torch.zeros(5, 3), torch.zeros(5)) as idx:   # 2 of its 5 rows
    ...     idx.shape
    torch.Size([2])
    """

    def __init__(self, num_data: int, subsample_size: Optional[int] = None, *, shard=None,
                 num_shards: Optional[int] = None, seed: int = 0, name: str = "data"):
        super().__init__()
        self.num_shards = get_world_size() if num_shards is None else num_shards
        self.shard = get_rank() if shard is None else shard
        all_shards = isinstance(self.shard, str)
        if all_shards and self.shard != "all":
            raise ValueError(f"shard must be an int or 'all', got shard={self.shard!r}")
        shard_range(num_data, 0 if all_shards else self.shard, self.num_shards)  # checks the arguments
        # the rows of the shards this process draws (all of them only for shard="all")
        self.ranges = {r: shard_range(num_data, r, self.num_shards)
                       for r in (range(self.num_shards) if all_shards else [self.shard])}
        if subsample_size is not None and (isinstance(subsample_size, bool) or not isinstance(
                subsample_size, int) or subsample_size < 1 or subsample_size % self.num_shards):
            raise ValueError(f"subsample_size must be a positive multiple of num_shards="
                             f"{self.num_shards} (B/R rows per shard), got subsample_size={subsample_size!r}")
        self.num_data, self.name = num_data, name
        self.shard_size = None if subsample_size is None else subsample_size // self.num_shards
        own = range(self.num_shards) if all_shards else [self.shard]
        self.shards = list(own)
        self.streams = torch.nn.ModuleList([RandomStream(seed + 7919 * (r + 1)) for r in own])
        # the latent draws of the shard's datapoints: a stream of their own, so that the
        # rows drawn do not depend on how many latent values were drawn
        self.latent_stream = RandomStream(seed + 7919 * (0 if all_shards else self.shard + 1) + 1)

    def shard_rows(self, t):
        """The rows of ``t`` (N rows) that belong to this shard (all of them for ``"all"``)."""
        if len(t) != self.num_data:
            raise ValueError(f"expected {self.num_data} rows (num_data), got {len(t)}")
        if self.shard == "all":
            return t
        start, stop = self.ranges[self.shard]
        return t[start:stop]

    def attach(self, model):
        """Make this plate ``model``'s data plate (``model.create_plates``); returns the model.
        Build the guide afterwards: it takes the model's ``create_plates``."""
        model.create_plates = self
        return model

    def _draw(self, i, device):
        start, stop = self.ranges[self.shards[i]]
        n, b = stop - start, self.shard_size
        if b is None or b >= n:
            return torch.arange(n, device=device)
        with self.streams[i]:
            return sample_without_replacement(n, b).to(device)

    def forward(self, x, y: Optional[torch.Tensor] = None, sample_weight: Optional[torch.Tensor] = None):
        n = len(x)
        if y is None:  # prediction: every row, no scale
            return pyro.plate(self.name, n)
        if self.shard != "all":
            start, stop = self.ranges[self.shard]
            if n != stop - start:
                raise ValueError(f"shard {self.shard} holds {stop - start} rows, got data with {n} "
                                 "rows: pass plate.shard_rows(x)")
            sub = self._draw(0, x.device)
            sub = None if len(sub) == n else sub
            return _ShardPlate(self.name, n, subsample=sub, weight=sample_weight, scale=self.num_shards,
                               stream=self.latent_stream)
        if n != self.num_data:
            raise ValueError(f"shard='all' needs the whole data ({self.num_data} rows), got {n}")
        sub = torch.cat([self._draw(i, x.device) + self.ranges[r][0] for i, r in enumerate(self.shards)])
        weight = self._stratum_weights(x, len(sub))
        if sample_weight is not None:
            weight = sample_weight if weight is None else weight * sample_weight
        return _ShardPlate(self.name, n, subsample=None if len(sub) == n else sub, weight=weight,
                           stream=self.latent_stream)

    def _stratum_weights(self, x, batch):
        """Per-datapoint weights (N_r/B_r)/(N/B) when the shards' sampling ratios differ."""
        ratios = [(stop - start) / min(self.shard_size or (stop - start), stop - start)
                  for start, stop in self.ranges.values()]
        if max(ratios) - min(ratios) <= 1e-12 * max(ratios):
            return None
        overall = self.num_data / batch
        return torch.cat([torch.full((stop - start,), r / overall, dtype=x.dtype, device=x.device)
                          for (start, stop), r in zip(self.ranges.values(), ratios)])


def _as_predicate(local) -> Callable[[str], bool]:
    if local is None:
        return lambda name: False
    if isinstance(local, torch.nn.Module):
        return local_parameter_names(local)
    if callable(local):
        return local
    names = set(local)
    return names.__contains__


def reduce_gradients(params, is_local: Callable[[str], bool] = lambda name: False, group=None) -> None:
    """Average the gradients of the global parameters in ``params`` over the ranks, in place.

    Parameters are visited in the order of their names (the same on every rank); those for
    which ``is_local(name)`` is true, or without a gradient, are skipped (every rank must
    skip the same ones). Sparse gradients travel as (rows, values), all of them in three
    collectives (:func:`~pyro_ar.distributed.collectives.all_gather_rows`), and are
    coalesced; dense ones in one all-reduce per dtype.

    Example:

    >>> import torch, pyro
    >>> from pyro_ar.distributed import reduce_gradients
    >>> w = pyro.param("w", torch.zeros(3)).unconstrained()
    >>> w.grad = torch.ones(3)
    >>> reduce_gradients([w])          # one process: the average of one gradient
    >>> w.grad
    tensor([1., 1., 1.])
    """
    world = get_world_size(group)
    if world == 1:
        return
    store = pyro.get_param_store()
    named = sorted(((store.param_name(p), p) for p in params), key=lambda t: t[0])
    named = [p for name, p in named if p.grad is not None and not is_local(name)]
    sparse = [p for p in named if p.grad.is_sparse]
    dense = [p for p in named if not p.grad.is_sparse]
    grads = [p.grad.coalesce() for p in sparse]
    gathered = all_gather_rows([(g.indices()[0], g.values()) for g in grads], group)
    for p, g, (rows, values) in zip(sparse, grads, gathered):
        p.grad = torch.sparse_coo_tensor(rows.unsqueeze(0), values / world, g.shape,
                                         check_invariants=False).coalesce()
    for dtype in {p.grad.dtype for p in dense}:  # one all-reduce per dtype
        ps = [p for p in dense if p.grad.dtype == dtype]
        flat = all_reduce_sum(torch.cat([p.grad.reshape(-1) for p in ps]), group) / world
        for p, part in zip(ps, flat.split([p.grad.numel() for p in ps])):
            p.grad = part.reshape(p.grad.shape)


class _DataParallelMixin:
    """Reduces the global gradients before the wrapped optimizer's step."""

    def __call__(self, params, *args, **kwargs):
        params = list(params)
        reduce_gradients(params, self._dp_is_local, self._dp_group)
        return super().__call__(params, *args, **kwargs)


_CLASSES: Dict[type, type] = {}


def data_parallel(optim: PyroOptim, local=None, group=None) -> PyroOptim:
    """``optim`` (any :class:`~pyro.optim.PyroOptim`, e.g. :func:`pyro_ar.optim.lazy_adam`)
    with the gradients of the global parameters averaged over the ranks before each step.

    The result is an instance of a subclass of ``type(optim)`` with ``optim``'s state
    (so checkpoints, ``get_state`` / ``set_state`` and :class:`~pyro_ar.infer.LearningRateDecay`
    work as before); use it in place of ``optim``.

    :param local: which parameters stay on their rank: the guide (its per-datapoint local
        guides' parameters, :func:`local_parameter_names`), a collection of names, a
        predicate ``name -> bool``, or None (none).
    :param group: the process group (default: the world).

    Example:

    >>> from pyro_ar.distributed import data_parallel
    >>> from pyro_ar.optim import lazy_adam
    >>> optim = data_parallel(lazy_adam({"lr": 0.01}))
    >>> type(optim).__name__
    'DataParallel_LazyPyroOptim'
    """
    if not isinstance(optim, PyroOptim):
        raise ValueError(f"optim must be a pyro.optim.PyroOptim (e.g. pyro_ar.optim.lazy_adam(...)), "
                         f"got {type(optim).__name__}")
    base = type(optim)
    if isinstance(optim, _DataParallelMixin):
        base = base.__mro__[2]
    cls = _CLASSES.get(base)
    if cls is None:
        cls = _CLASSES[base] = type(f"DataParallel{base.__name__}", (_DataParallelMixin, base), {})
    new = cls.__new__(cls)
    new.__dict__.update(optim.__dict__)
    new._dp_is_local, new._dp_group = _as_predicate(local), group
    return new


def mean_across(metrics: Dict[str, float], count: int, group=None) -> Dict[str, float]:
    """Combine per-rank means over ``count`` datapoints into the means over all ranks' data
    (e.g. each rank evaluates its shard of the test set).

    Example:

    >>> from pyro_ar.distributed import mean_across
    >>> mean_across({"log_lik": -2.5}, count=10)      # one process: unchanged
    {'log_lik': -2.5}
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"count must be an int >= 0 (this rank's datapoints), got count={count!r}")
    if not isinstance(metrics, dict):
        raise ValueError(f"metrics must be a dict of numbers, got {type(metrics).__name__}")
    bad = {k: v for k, v in metrics.items()
           if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v)}
    if bad:
        raise ValueError(f"metrics must be numbers (not NaN), got {bad!r}")
    keys = sorted(metrics)
    t = torch.tensor([float(metrics[k]) * count if count else 0.0 for k in keys] + [float(count)],
                     dtype=torch.float64)
    t = all_reduce_sum(t, group)
    if t[-1] <= 0:
        raise ValueError("count is 0 on every rank: no datapoints to average the metrics over")
    return {k: float(t[i] / t[-1]) for i, k in enumerate(keys)}

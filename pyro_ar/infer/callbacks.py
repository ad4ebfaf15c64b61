r"""What :func:`~pyro_ar.infer.train` calls back: the :class:`Callback` protocol and its
state (:class:`TrainState`), and the callbacks shipped -- :class:`EarlyStopping`,
:class:`IterateAverage` (Polyak averaging), :class:`LearningRateDecay` -- with the copies of
Pyro's param store they and the divergence restore take (:func:`snapshot_params`,
:func:`restore_params`).
"""

import math
import warnings
from typing import Callable, Dict, List, Optional, Sequence

import torch

import pyro
from pyro.infer import SVI

__all__ = ["TrainState", "Callback", "EarlyStopping", "IterateAverage", "LearningRateDecay",
           "snapshot_params", "restore_params"]


def snapshot_params(names=None) -> Dict[str, torch.Tensor]:
    """Copies of the unconstrained tensors of Pyro's param store (all, or ``names``), as
    :class:`EarlyStopping` and the divergence restore take them.

    Example:

    >>> import torch, pyro
    >>> from pyro_ar.infer.callbacks import restore_params, snapshot_params
    >>> w = pyro.param("w", torch.zeros(2))
    >>> saved = snapshot_params(["w"])
    >>> with torch.no_grad():
    ...     _ = dict(pyro.get_param_store().named_parameters())["w"].add_(1.0)
    >>> restore_params(saved); pyro.param("w").tolist()
    []
    [0.0, 0.0]
    """
    store = dict(pyro.get_param_store().named_parameters())
    names = list(store) if names is None else list(names)
    missing = [n for n in names if n not in store]
    if missing:
        raise KeyError(f"params={missing} are not in the param store")
    return {n: store[n].detach().clone() for n in names}


def restore_params(snapshot: Dict[str, torch.Tensor], drop_others: bool = False) -> List[str]:
    """Copy a :func:`snapshot_params` back in place (optimizers keep their tensors); with
    ``drop_others``, params created after the snapshot are removed from the store (their
    names are returned).

    Example:

    >>> import torch, pyro
    >>> from pyro_ar.infer.callbacks import restore_params, snapshot_params
    >>> saved = snapshot_params(); _ = pyro.param("late", torch.ones(1))
    >>> restore_params(saved, drop_others=True)
    ['late']
    """
    ps = pyro.get_param_store()
    store = dict(ps.named_parameters())
    with torch.no_grad():
        for name, value in snapshot.items():
            if name in store:
                store[name].copy_(value)
    dropped = [n for n in store if n not in snapshot] if drop_others else []
    for name in dropped:
        del ps[name]
    return dropped


class TrainState:
    """What callbacks see: ``svi``, ``step`` (steps done), ``num_steps``, ``loss`` (the last
    step's), ``time`` (training seconds on the loop's clock), ``history`` and ``stop`` (set
    it to True to stop after the current step).

    Example:

    >>> from pyro_ar.infer.callbacks import TrainState
    >>> TrainState(None, num_steps=10).step
    0
    """

    def __init__(self, svi: SVI, num_steps: int) -> None:
        self.svi, self.num_steps = svi, num_steps
        self.step, self.loss, self.time, self.history, self.stop = 0, None, 0.0, [], False


class Callback:
    """Base class of :func:`~pyro_ar.infer.train` callbacks; override what you need.

    ``on_step(state)`` runs after every step (keep it O(1)); ``on_record(record, state)``
    after every record; returning True from either stops the run (as does
    ``state.stop = True``). ``state_dict`` / ``load_state_dict`` carry the callback's state
    through checkpoints (numbers, strings, tensors, lists, tuples, dicts). A plain
    function passed to ``train(callbacks=...)`` is called as ``on_record`` with the record.

    Example:

    >>> from pyro_ar.infer.callbacks import Callback
    >>> class StopAt(Callback):
    ...     def __init__(self, step):
    ...         self.at = step
    ...     def on_step(self, state):
    ...         return state.step >= self.at
    """

    def on_train_begin(self, state: TrainState) -> None:
        pass

    def on_step(self, state: TrainState) -> Optional[bool]:
        pass

    def on_record(self, record: Dict, state: TrainState) -> Optional[bool]:
        pass

    def on_train_end(self, state: TrainState) -> None:
        pass

    def state_dict(self) -> Dict:
        return {}

    def load_state_dict(self, state: Dict) -> None:
        pass


class _FunctionCallback(Callback):
    def __init__(self, fn):
        self.fn = fn

    def on_record(self, record: Dict, state: TrainState) -> Optional[bool]:
        return self.fn(record)


class EarlyStopping(Callback):
    r"""Stop when the evaluation ``record[monitor]`` has not improved for ``patience`` evaluations.

    An evaluation counts as progress if it beats the best so far by at least ``min_delta``
    (``score >= best + min_delta`` for ``mode="max"``, ``score <= best - min_delta`` for
    ``"min"``); any strict improvement snapshots the parameters (the unconstrained tensors
    of Pyro's param store, all or the names ``params`` gives: an iterable, or a function
    returning one), and with ``restore_best`` they are copied back in place at the end of
    training. NaN scores never improve. Attributes ``best``, ``best_step``, ``stopped``.

    Example:

    >>> from pyro_ar.infer.callbacks import EarlyStopping
    >>> es = EarlyStopping("val_ll", patience=2)
    >>> es.on_train_begin(None)
    >>> [bool(es.on_record({"step": s, "val_ll": v}, None)) for s, v in enumerate([-3., -2., -2.5, -2.1])]
    [False, False, False, True]
    >>> es.best, es.best_step
    (-2.0, 1)
    """

    def __init__(self, monitor: str, mode: str = "max", patience: int = 5, min_delta: float = 0.0,
                 restore_best: bool = True, params: Optional[Sequence[str]] = None) -> None:
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got mode={mode!r}")
        if not (isinstance(patience, int) and patience >= 1):
            raise ValueError(f"patience must be an int >= 1, got patience={patience!r}")
        if not min_delta >= 0:
            raise ValueError(f"min_delta must be >= 0, got min_delta={min_delta!r}")
        self.monitor, self.mode, self.patience, self.min_delta = monitor, mode, patience, min_delta
        self.restore_best, self.params = restore_best, params
        self.on_train_begin(None)

    def on_train_begin(self, state: TrainState) -> None:
        self.best = -math.inf if self.mode == "max" else math.inf
        self.best_step, self.wait, self.stopped, self._snapshot = None, 0, False, None

    def on_record(self, record: Dict, state: TrainState) -> Optional[bool]:
        if self.monitor not in record:
            return False
        score = float(record[self.monitor])
        sign = 1.0 if self.mode == "max" else -1.0
        if sign * score > sign * self.best:
            if self.restore_best:
                self._snapshot = self._take_snapshot()
            self.best_step = record["step"]
        progress = sign * score >= sign * self.best + self.min_delta
        self.best = score if sign * score > sign * self.best else self.best
        self.wait = 0 if progress else self.wait + 1
        self.stopped = self.wait >= self.patience
        return self.stopped

    def _take_snapshot(self):
        names = self.params() if callable(self.params) else self.params
        try:
            return snapshot_params(names)
        except KeyError as e:
            raise KeyError(f"EarlyStopping(params=...): {e.args[0]}") from None

    def on_train_end(self, state: TrainState) -> None:
        if self.restore_best and self._snapshot:
            restore_params(self._snapshot)

    def state_dict(self) -> Dict:
        return {"best": self.best, "best_step": self.best_step, "wait": self.wait,
                "stopped": self.stopped, "snapshot": self._snapshot}

    def load_state_dict(self, state: Dict) -> None:
        self.best, self.best_step, self.wait = state["best"], state["best_step"], state["wait"]
        self.stopped, self._snapshot = state["stopped"], state["snapshot"]


class IterateAverage(Callback):
    r"""Polyak averaging: :math:`\bar s = \frac{1}{|S|}\sum_{t\in S} s_t` of a summary
    ``summary_fn()`` (a dict of tensors or None) over the steps
    :math:`S = \{t > T - \mathrm{round}(f T)\}`, the last fraction :math:`f` =
    ``start_fraction`` of ``num_steps`` T. The summary is computed at every averaged step:
    keep it cheap. The result is :attr:`average` (None before the first averaged step).

    Example:

    >>> import torch
    >>> from pyro_ar.infer.callbacks import IterateAverage, TrainState
    >>> state = TrainState(None, num_steps=4)
    >>> avg = IterateAverage(lambda: {"x": torch.tensor(float(state.step))}, start_fraction=0.5)
    >>> avg.on_train_begin(state)
    >>> for state.step in range(1, 5):
    ...     avg.on_step(state)
    >>> avg.average["x"]           # mean of the steps 3 and 4
    tensor(3.5000)
    """

    def __init__(self, summary_fn: Callable[[], Dict], start_fraction: float = 0.5) -> None:
        if not 0.0 <= start_fraction <= 1.0:
            raise ValueError(f"start_fraction must lie in [0, 1], got start_fraction={start_fraction!r}")
        self.summary_fn, self.start_fraction = summary_fn, float(start_fraction)
        self.start, self._sum, self.count = None, None, 0

    def on_train_begin(self, state: TrainState) -> None:
        T = state.num_steps
        self.start, self._sum, self.count = T - int(round(self.start_fraction * T)), None, 0

    @torch.no_grad()
    def on_step(self, state: TrainState) -> None:
        if state.step <= self.start:
            return
        snap = self.summary_fn()
        if self._sum is None:
            self._sum = {k: None if v is None else v.detach().clone() for k, v in snap.items()}
        else:
            for k, v in snap.items():
                if v is not None:
                    self._sum[k] += v.detach()
        self.count += 1

    @property
    def average(self) -> Optional[Dict]:
        """The averaged summary (a dict like ``summary_fn()``'s), or None before the first averaged step."""
        if self._sum is None:
            return None
        return {k: None if v is None else v / self.count for k, v in self._sum.items()}

    def state_dict(self) -> Dict:
        return {"sum": self._sum, "count": self.count, "start": self.start}

    def load_state_dict(self, state: Dict) -> None:
        if state["start"] != self.start:
            warnings.warn(f"IterateAverage: the averaging window now starts after step {self.start}, "
                          f"the checkpoint's after step {state['start']} (num_steps changed); the "
                          "average keeps the steps already summed", RuntimeWarning)
        self._sum, self.count = state["sum"], state["count"]


class LearningRateDecay(Callback):
    r"""Linear step-size decay of every optimizer of ``svi``:
    :math:`\mathrm{lr}_t = \mathrm{lr}_0\,(1 - (1 - f)\,t/T)`, from the optimizers' own
    step sizes :math:`\mathrm{lr}_0` at :math:`t = 0` to :math:`f\,\mathrm{lr}_0` at
    :math:`T` = ``num_steps`` (Robbins-Monro-like convergence of the stochastic steps,
    instead of a noise floor). Works with Pyro's per-parameter optimizers (those created
    later start from their own step size); the step sizes are part of the optimizer state,
    so checkpoints keep them.

    Example:

    >>> import torch
    >>> from types import SimpleNamespace
    >>> from pyro_ar.infer.callbacks import LearningRateDecay, TrainState
    >>> opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
    >>> state = TrainState(SimpleNamespace(optim=SimpleNamespace(optim_objs={"w": opt})), num_steps=10)
    >>> state.step = 5
    >>> LearningRateDecay(final_fraction=0.0).on_step(state)
    >>> round(opt.param_groups[0]["lr"], 6)
    0.05
    """

    def __init__(self, final_fraction: float = 0.05) -> None:
        if not 0.0 <= final_fraction <= 1.0:
            raise ValueError(f"final_fraction must lie in [0, 1], got final_fraction={final_fraction!r}")
        self.final_fraction = float(final_fraction)

    def on_step(self, state: TrainState) -> None:
        factor = 1.0 - (1.0 - self.final_fraction) * min(1.0, state.step / max(1, state.num_steps))
        for opt in getattr(state.svi.optim, "optim_objs", {}).values():
            for group in opt.param_groups:
                group.setdefault("initial_lr", group["lr"])
                group["lr"] = group["initial_lr"] * factor

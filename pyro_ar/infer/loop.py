r"""One SVI training loop: records, evaluation, callbacks, early stopping, checkpoint/resume.

:func:`train` repeats ``loss_t = svi.step(*args, **kwargs)`` (then ``scheduler.step()``)
for :math:`t = 1, \dots, T` and returns a history of records. It stops at
:math:`T` = ``num_steps``, once the training time reaches ``time_budget`` (on the wall or
the process CPU clock; evaluation and checkpoint time excluded), or when a callback asks.

* Records every ``log_every`` steps: the mean loss and median step time since the previous
  record; at evaluation points (every ``eval_every`` steps, at the training times
  ``eval_times``, at step 0 and at the end) also what ``eval_fn()`` returns. Evaluation
  runs with the RNG states saved and restored, so it never changes the training trajectory.
* Divergence (:class:`DivergenceCheck`): a step whose loss is not finite, or whose
  :math:`|L_t| > c \cdot \max(1, |L_1|)` during the first :math:`w` steps and
  :math:`|L_t| > c \cdot \max(1, \mathrm{median}(|L_1|, \dots, |L_w|))` after them (default
  :math:`c = 10^6`, :math:`w = 10`: the loss exploded relative to the scale of the first
  losses), raises :class:`TrainingDiverged` -- after restoring the parameters of the last
  record whose next loss passed the check (or early stopping's best, if the loss after it
  passed), so that no non-finite parameters are left behind.
* Data (:meth:`~pyro_ar.models.base.CategoricalModel.check_data`): when ``svi.model`` has a
  ``check_data`` method, it is called once with the training data before the first step
  (labels in range, finite inputs, naming the first bad row: O(N) once, not per step).
* Callbacks (:class:`Callback`, or plain functions of each record) may stop the run;
  :class:`EarlyStopping` stops when a monitored evaluation stops improving and restores the
  parameters of the best evaluation; :class:`IterateAverage` is Polyak averaging of a
  summary over the last steps.
* Progress (``progress``): a tqdm bar of the steps with the running loss and the last
  evaluation (:func:`progress_bar`; a bar the caller opened, e.g. one bar for several runs,
  is updated and left open), or ``"lines"``: one printed line per record -- step, training
  time on the loop's clock, loss, evaluations -- for scripts and logs.
* Checkpoints (:func:`save_checkpoint` / :func:`load_checkpoint`) hold everything the run
  needs -- Pyro's param store (per-datapoint local parameters included), the buffers of
  the guide / model / ``modules`` (e.g. :class:`~pyro_ar.infer.GumbelLocalGuide`'s visit
  counts), the optimizer (and scheduler) state, the RNG states of torch (CPU, CUDA),
  numpy and ``random``, the step, the history and the loop's and callbacks' state -- so a
  run interrupted at step N and resumed gives bit for bit the trajectory of an
  uninterrupted one. Files are written atomically and load with
  ``torch.load(path, weights_only=True)``.
"""

import inspect
import math
import os
import statistics
import sys
import time
import warnings
from typing import Callable, Dict, List, Optional, Sequence, Union

import torch

import pyro
from pyro.infer import SVI

from .checkpoint import (
    CheckpointError,
    agree_on_checkpoint,
    load_checkpoint,
    preserved_rng,
    rotate_checkpoint,
    run_config,
    save_checkpoint,
)

__all__ = [
    "train", "TrainState", "Callback", "EarlyStopping", "IterateAverage", "LearningRateDecay",
    "DivergenceCheck", "progress_bar", "set_progress_total",
    "TrainingDiverged", "CheckpointError", "ResumeWarning", "save_checkpoint", "load_checkpoint",
]


class ResumeWarning(UserWarning):
    """Issued by :func:`train` when it resumes from a checkpoint (naming the file and the
    step), so that a re-run never silently continues an old run; filter it with
    ``warnings.filterwarnings("ignore", category=ResumeWarning)``.

    Example:

    >>> from pyro_ar.infer.loop import ResumeWarning
    >>> issubclass(ResumeWarning, UserWarning)
    True
    """

class TrainingDiverged(RuntimeError):
    """Raised by :func:`train` when the loss is not finite or explodes (:class:`DivergenceCheck`).

    Example:

    >>> from pyro_ar.infer.loop import DivergenceCheck, TrainingDiverged
    >>> try:
    ...     DivergenceCheck()(7, float("nan"))
    ... except TrainingDiverged as e:
    ...     print(str(e)[:46])
    training diverged at step 7: the loss became n
    """


class DivergenceCheck:
    r"""Declares step t divergent if :math:`L_t` is not finite or
    :math:`|L_t| > \text{factor}\cdot r`, with the reference scale :math:`r = \max(1, |L_1|)`
    (the first loss of the run, computed at the initial parameters) during the first
    ``warmup`` steps and :math:`r = \max(1, \mathrm{median}(|L_1|..|L_w|))`, w = ``warmup``,
    after them.

    A loss that explodes within the calibration window is caught too (its growth is measured
    against the first loss). Calling it with ``(step, loss)`` raises
    :class:`TrainingDiverged` naming the step, the loss and what to change. With
    ``restore`` (default), :func:`train` keeps a copy of the parameters taken at its
    records (at most two at a time, at records at least ``num_steps / 20`` steps apart)
    and, on divergence, puts back the last one whose next loss passed this check before
    raising.

    Example:

    >>> from pyro_ar.infer.loop import DivergenceCheck
    >>> check = DivergenceCheck(factor=100.0, warmup=2)
    >>> for t, loss in enumerate([50.0, 30.0, 20.0], 1):
    ...     check(t, loss)
    >>> check.scale           # median of |50|, |30|
    40.0
    >>> check = DivergenceCheck(factor=100.0)
    >>> check(1, 50.0)
    >>> try:                  # within the window: 1e4 > 100 x |L_1|
    ...     check(2, 1e4)
    ... except Exception as e:
    ...     print(type(e).__name__)
    TrainingDiverged
    """

    def __init__(self, factor: float = 1e6, warmup: int = 10, restore: bool = True) -> None:
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 < factor < math.inf:
            raise ValueError(f"factor must be a finite number > 1, got factor={factor!r}")
        if isinstance(warmup, bool) or not (isinstance(warmup, int) and warmup >= 1):
            raise ValueError(f"warmup must be an int >= 1, got warmup={warmup!r}")
        self.factor, self.warmup, self.restore = float(factor), warmup, bool(restore)
        self.scale, self.reference, self._first = None, None, []

    def __call__(self, step: int, loss: float) -> None:
        if not math.isfinite(loss):
            reason = "is not finite"
        elif self.scale is not None:
            if abs(loss) <= self.factor * self.scale:
                return
            reason = (f"exceeds {self.factor:g} x the scale {self.scale:.4g} of the first "
                      f"{self.warmup} losses")
        else:
            if self.reference is None:
                self.reference = max(1.0, abs(loss))
            if abs(loss) <= self.factor * self.reference:
                self._first.append(abs(loss))
                if len(self._first) >= self.warmup:
                    self.scale, self._first = max(1.0, statistics.median(self._first)), []
                return
            reason = f"exceeds {self.factor:g} x the scale {self.reference:.4g} of the first loss"
        raise TrainingDiverged(
            f"training diverged at step {step}: the loss became {loss!r}, which {reason}; try a "
            "smaller learning rate, standardise the features, or check the data for "
            "non-finite or extreme values")

    def state_dict(self) -> Dict:
        return {"scale": self.scale, "first": list(self._first), "reference": self.reference}

    def load_state_dict(self, state: Dict) -> None:
        self.scale, self._first = state["scale"], list(state["first"])
        self.reference = state.get("reference")  # (absent from checkpoints before it)
        if self.reference is None and self._first:
            self.reference = max(1.0, self._first[0])


def snapshot_params(names=None) -> Dict[str, torch.Tensor]:
    """Copies of the unconstrained tensors of Pyro's param store (all, or ``names``), as
    :class:`EarlyStopping` and the divergence restore take them."""
    store = dict(pyro.get_param_store().named_parameters())
    names = list(store) if names is None else list(names)
    missing = [n for n in names if n not in store]
    if missing:
        raise KeyError(f"params={missing} are not in the param store")
    return {n: store[n].detach().clone() for n in names}


def restore_params(snapshot: Dict[str, torch.Tensor], drop_others: bool = False) -> List[str]:
    """Copy a :func:`snapshot_params` back in place (optimizers keep their tensors); with
    ``drop_others``, params created after the snapshot are removed from the store (their
    names are returned)."""
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

    >>> from pyro_ar.infer.loop import TrainState
    >>> TrainState(None, num_steps=10).step
    0
    """

    def __init__(self, svi: SVI, num_steps: int) -> None:
        self.svi, self.num_steps = svi, num_steps
        self.step, self.loss, self.time, self.history, self.stop = 0, None, 0.0, [], False


class Callback:
    """Base class of :func:`train` callbacks; override what you need.

    ``on_step(state)`` runs after every step (keep it O(1)); ``on_record(record, state)``
    after every record; returning True from either stops the run (as does
    ``state.stop = True``). ``state_dict`` / ``load_state_dict`` carry the callback's state
    through checkpoints (numbers, strings, tensors, lists, tuples, dicts). A plain
    function passed to ``train(callbacks=...)`` is called as ``on_record`` with the record.

    Example:

    >>> from pyro_ar.infer.loop import Callback
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

    >>> from pyro_ar.infer.loop import EarlyStopping
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
    >>> from pyro_ar.infer.loop import IterateAverage, TrainState
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


# ------------------------------------------------------------------ the loop
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
    >>> from pyro_ar.infer.loop import LearningRateDecay, TrainState
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


def progress_bar(total: Optional[int] = None, **options):
    """A tqdm progress bar (``tqdm.auto``: a widget in Jupyter, text on stderr elsewhere) of
    ``total`` SVI steps: the bar :func:`train` opens for ``progress=True``, and the one to
    open for a bar that spans several :func:`train` calls (pass it as ``progress=bar``;
    ``train`` updates it and leaves it open). ``options`` go to ``tqdm`` (``desc``, ``file``,
    ``disable``, ...); the unit is ``"step"`` unless given.

    Example:

    >>> import io
    >>> from pyro_ar.infer.loop import progress_bar
    >>> bar = progress_bar(3, desc="phase 1", file=io.StringIO())
    >>> bar.update(3); bar.close()
    >>> bar.n, bar.total
    (3, 3)
    """
    from tqdm.auto import tqdm

    options.setdefault("unit", "step")
    return tqdm(total=total, **options)


def set_progress_total(bar, total: int) -> None:
    """Change the ``total`` of a :func:`progress_bar` while it runs (e.g. when a run it counts
    stopped early and its remaining steps will never come), in a terminal and in a Jupyter
    widget alike, and redraw it.

    Example:

    >>> import io
    >>> from pyro_ar.infer.loop import progress_bar, set_progress_total
    >>> bar = progress_bar(10, file=io.StringIO())
    >>> bar.update(4); set_progress_total(bar, 4); bar.close()
    >>> bar.n == bar.total == 4
    True
    """
    bar.total = total
    container = getattr(bar, "container", None)  # tqdm.notebook: the widget's maximum as well
    if container is not None:
        container.children[1].max = total
    bar.refresh()


class _Progress:
    """What :func:`train` shows while it runs, from its ``progress`` argument (see there):
    nothing, its own bar, a caller's bar, or printed lines."""

    def __init__(self, progress, clock: str) -> None:
        self.bar, self.own_bar, self.lines, self.postfix = None, False, None, {}
        self.options, self.clock = {}, "CPU s" if clock == "process" else "s"
        style = progress.get("style", "bar") if isinstance(progress, dict) else progress
        if isinstance(progress, dict):
            self.options = {k: v for k, v in progress.items() if k != "style"}
        if progress is None or progress is False:
            return
        if hasattr(progress, "update") and hasattr(progress, "set_postfix"):
            self.bar = progress  # the caller's bar
        elif style == "lines":
            unknown = set(self.options) - {"desc", "file"}
            if unknown:
                raise ValueError(f"progress style 'lines' takes the options 'desc' and 'file', got "
                                 f"{sorted(unknown)} in progress={progress!r}")
            self.lines = self.options
        elif style is True or style == "bar":
            self.own_bar = True
        else:
            raise ValueError("progress must be False, True, 'lines', a dict of options with "
                             "'style' 'bar' or 'lines', or a tqdm bar, got "
                             f"progress={progress!r}")

    def start(self, state: "TrainState") -> None:
        if self.own_bar:
            self.bar = progress_bar(total=state.num_steps, initial=state.step, **self.options)

    def step(self, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix({"loss": f"{loss:.4g}", **self.postfix}, refresh=False)

    def record(self, rec: Dict, evaluation: Dict) -> None:
        numbers = {k: f"{v:.4g}" for k, v in evaluation.items() if isinstance(v, (int, float))}
        self.postfix = numbers or self.postfix  # the bar keeps showing the last evaluation
        if self.lines is None or (rec["step"] == 0 and not numbers):  # (nothing to say yet)
            return
        desc = self.lines.get("desc")
        parts = [f"step {rec['step']:,}", f"{rec['time']:.1f} {self.clock}"]
        if math.isfinite(rec["loss"]):
            parts.append(f"loss {rec['loss']:.4g}")
        parts += [f"{k} {v}" for k, v in numbers.items()]
        print((f"{desc}: " if desc else "") + ", ".join(parts), file=self.lines.get("file") or sys.stdout,
              flush=True)

    def close(self) -> None:
        if self.own_bar and self.bar is not None:
            self.bar.close()


def _accepts(fn, args, kwargs) -> bool:
    """Whether ``fn(*args, **kwargs)`` matches ``fn``'s signature."""
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return False
    return True


def _dense_only_optimizers():
    from pyro.optim.clipped_adam import ClippedAdam

    names = ("Adam", "AdamW", "Adamax", "NAdam", "RAdam", "RMSprop", "Rprop", "Adadelta", "ASGD", "LBFGS")
    return tuple(getattr(torch.optim, n) for n in names if hasattr(torch.optim, n)) + (ClippedAdam,)


#: torch optimizers (as Pyro wraps them) that refuse sparse gradients
_DENSE_ONLY_OPTIMIZERS = _dense_only_optimizers()


class _Loop:
    """The state and steps of one :func:`train` call (see there)."""

    def __init__(self, svi, args, kwargs, opts):
        self.svi, self.args, self.kwargs, self.o = svi, args, kwargs, opts
        self.state = TrainState(svi, opts["num_steps"])
        self.elapsed = {"time": 0.0, "wall": 0.0, "cpu": 0.0}
        self.losses, self.times, self.loss_sum = [], [], 0.0
        self.next_eval_time = 0
        self.progress = _Progress(opts["progress"], opts["clock"])
        self.config, self.group = None, None
        div = opts["divergence"]
        self.divergence = DivergenceCheck() if div is True else (div or None)
        # (step, parameters) of the last record whose next loss passed the check, and of the
        # newest record (not yet confirmed): the state restored on divergence. Copies are
        # taken at records at least num_steps / 20 steps apart (about 20 per run, whatever
        # log_every: a copy costs O(parameters), which a step need not touch)
        self.good = self.pending = None
        self.snapshot_every = max(1, opts["num_steps"] // 20)
        self.keep_good = self.divergence is not None and getattr(self.divergence, "restore", False)
        cbs = [c if isinstance(c, Callback) else _FunctionCallback(c) for c in opts["callbacks"]]
        if opts["early_stopping"] is not None:
            cbs.append(opts["early_stopping"])
        self.callbacks = cbs
        self.step_callbacks = [c for c in cbs if type(c).on_step is not Callback.on_step]

    # ---- records
    def record(self, evaluate: bool) -> None:
        st, o = self.state, self.o
        rec = {"step": st.step, "time": self.elapsed["time"], "wall_time": self.elapsed["wall"],
               "cpu_time": self.elapsed["cpu"],
               "loss": self.loss_sum / len(self.losses) if self.losses else float("nan"),
               "step_time": statistics.median(self.times) if self.times else float("nan")}
        if evaluate and o["eval_fn"] is not None:
            with preserved_rng():  # evaluation never changes the training trajectory
                out = o["eval_fn"]()
            rec.update(out)
        st.history.append(rec)
        self.progress.record(rec, out if evaluate and o["eval_fn"] is not None else {})
        self.losses, self.times, self.loss_sum = [], [], 0.0
        newest = max(s for s, _ in (self.good, self.pending or self.good)) if self.good else None
        if self.keep_good and not self.finished() and newest is not None \
                and st.step - newest >= self.snapshot_every:
            self.pending = (st.step, snapshot_params())
        for cb in self.callbacks:
            if cb.on_record(rec, st):
                st.stop = True

    def finished(self) -> bool:
        st, budget = self.state, self.o["time_budget"]
        return st.stop or st.step >= st.num_steps or (budget is not None and self.elapsed["time"] >= budget)

    def due_for_eval(self) -> bool:
        times, st = self.o["eval_times"], self.state
        due = st.step % self.o["eval_every"] == 0
        while self.next_eval_time < len(times) and self.elapsed["time"] >= times[self.next_eval_time]:
            self.next_eval_time, due = self.next_eval_time + 1, True
        return due

    # ---- one step
    def step(self) -> None:
        st, o = self.state, self.o
        clock = o["clock"] if callable(o["clock"]) else None  # an injected clock (tests)
        w0, c0, t0 = time.perf_counter(), time.process_time(), clock() if clock else 0.0
        loss = self.svi.step(*self.args, **self.kwargs)
        if o["scheduler"] is not None:
            o["scheduler"].step()
        dw, dc = time.perf_counter() - w0, time.process_time() - c0
        dt = clock() - t0 if clock else dw if o["clock"] == "wall" else dc
        st.step, st.loss = st.step + 1, loss
        self.elapsed["wall"] += dw
        self.elapsed["cpu"] += dc
        self.elapsed["time"] += dt
        st.time = self.elapsed["time"]
        self.losses.append(loss)
        self.loss_sum += loss
        self.times.append(dt)
        if o["step_times"] is not None:
            o["step_times"].append(dt)
        if self.divergence is not None:
            self.check_divergence(st.step, loss)
        self.progress.step(self.loss_sum / len(self.losses))
        for cb in self.step_callbacks:
            if cb.on_step(st):
                st.stop = True

    def check_divergence(self, step: int, loss: float) -> None:
        """Run the divergence check; on divergence restore the last good parameters (then
        early stopping's best, if it has one) and raise, saying which were restored."""
        try:
            self.divergence(step, loss)
        except TrainingDiverged as err:
            if not self.keep_good:
                raise
            good_step, params = self.good
            dropped = restore_params(params, drop_others=True)
            msg = f"the parameters are restored to those after step {good_step}"
            if dropped:
                msg += f" (the {len(dropped)} created since are removed from the param store)"
            es = self.o["early_stopping"]  # its best counts if the loss after it passed
            if isinstance(es, EarlyStopping) and es.restore_best and es._snapshot \
                    and es.best_step is not None and es.best_step < step - 1:
                es.on_train_end(self.state)
                msg = f"the parameters are restored to early stopping's best (step {es.best_step})"
            raise TrainingDiverged(f"{err}; {msg}") from None
        if self.pending is not None and self.pending[0] == step - 1:  # its loss passed
            self.good, self.pending = self.pending, None

    # ---- checkpoints
    def save(self) -> None:
        o, sched = self.o, self.o["scheduler"]
        loop = {"elapsed": dict(self.elapsed), "losses": list(self.losses), "times": list(self.times),
                "loss_sum": self.loss_sum, "next_eval_time": self.next_eval_time,
                "stop": self.state.stop,
                "divergence": None if self.divergence is None else self.divergence.state_dict(),
                "callbacks": {k: cb.state_dict() for k, cb in self.keyed_callbacks().items()},
                "scheduler": sched.get_state() if sched is not None and sched is not self.svi.optim
                and hasattr(sched, "get_state") else None}
        if self.group is not None:  # the ranks' agreement on a step needs the previous file
            rotate_checkpoint(o["checkpoint"])
        save_checkpoint(o["checkpoint"], self.svi, step=self.state.step, modules=o["modules"],
                        history=self.state.history, extra={"pyro_ar.train": loop}, config=self.config)

    def restore(self) -> bool:
        o, path = self.o, self.o["checkpoint"]
        if path is None:
            return False
        self.config = run_config(self.svi, *self.args, modules=o["modules"], **self.kwargs)
        self.group = _checkpoint_group(o["checkpoint_group"])
        if not o["resume"]:
            return False
        if self.group is not None:  # ranks resume from the newest step they all have
            path = agree_on_checkpoint(path, self.group)
        if path is None or not os.path.exists(path):
            return False
        ck = load_checkpoint(path, self.svi, *self.args, modules=o["modules"], config=self.config,
                             **self.kwargs)
        loop = (ck["extra"] or {}).get("pyro_ar.train") if isinstance(ck["extra"], (dict, type(None))) else None
        if loop is None:
            raise CheckpointError(f"the checkpoint {os.fspath(path)!r} was not written by train()")
        problem = _loop_state_problem(loop, o["scheduler"] is not None)
        if not ck["history"] or not all(_is_int(r.get("step")) for r in ck["history"]):
            problem = "its history has no records, or records without a step"
        elif not problem and ck["step"] != ck["history"][-1]["step"] + len(loop["losses"]):
            problem = (f"step {ck['step']} is not the last record's step {ck['history'][-1]['step']} plus "
                       f"the {len(loop['losses'])} losses since")
        if problem:
            raise CheckpointError(f"the checkpoint {os.fspath(path)!r} holds an invalid loop state: {problem}")
        keyed = self.keyed_callbacks()
        lost = [k for k, v in loop["callbacks"].items() if v and k not in keyed]
        if lost:
            raise CheckpointError(f"the checkpoint {os.fspath(path)!r} holds the state of the "
                                  f"callbacks {lost}, which this run does not have")
        st = self.state
        st.step, st.history, st.stop = ck["step"], ck["history"], loop["stop"]
        self.elapsed, self.losses, self.times = loop["elapsed"], loop["losses"], loop["times"]
        self.loss_sum, self.next_eval_time = loop["loss_sum"], loop["next_eval_time"]
        st.time = self.elapsed["time"]
        try:  # the states of the divergence check, the callbacks and the scheduler
            if self.divergence is not None and loop["divergence"] is not None:
                self.divergence.load_state_dict(loop["divergence"])
            for key, cb in keyed.items():
                if key in loop["callbacks"]:
                    cb.load_state_dict(loop["callbacks"][key])
            if loop["scheduler"] is not None:
                o["scheduler"].set_state(loop["scheduler"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"the checkpoint {os.fspath(path)!r} holds a state that does not fit "
                                  f"this run: {type(e).__name__}: {e}") from e
        warnings.warn(f"train: resumed from the checkpoint {os.fspath(path)!r} at step {st.step} (of "
                      f"num_steps={st.num_steps}); pass resume=False or another checkpoint path to "
                      f"start afresh", ResumeWarning, stacklevel=4)
        return True

    def first_step_after_resume(self) -> None:
        """The first step after a restore: a failure of the step's own code (not of the
        collectives or the divergence check) names the checkpoint, whose parameters may not
        fit this run (e.g. a guide's parameter of another shape in a hand-made file)."""
        try:
            self.step()
        except (RuntimeError, ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
            text = str(e)
            if isinstance(e, (TrainingDiverged, CheckpointError)) or "across the ranks" in text \
                    or "gloo" in text or "NCCL" in text:
                raise
            raise CheckpointError(f"the first step after resuming from the checkpoint "
                                  f"{os.fspath(self.o['checkpoint'])!r} failed, so its state does not "
                                  f"fit this run: {type(e).__name__}: {text[:300]}") from e

    def keyed_callbacks(self) -> Dict[str, Callback]:
        """Callbacks by ``<class name>.<index among that class>`` (their checkpoint keys)."""
        keyed, seen = {}, {}
        for cb in self.callbacks:
            name = type(cb).__name__
            keyed[f"{name}.{seen.get(name, 0)}"] = cb
            seen[name] = seen.get(name, 0) + 1
        return keyed

    # ---- the run
    def check_data(self) -> None:
        """The model's O(N) check of the whole training data, once (``svi.model.check_data``),
        and that an optimizer of Pyro's can take the gradients of a ``sparse=True`` model."""
        model = getattr(self.svi, "model", None)
        check = getattr(model, "check_data", None)
        if callable(check) and _accepts(check, self.args, self.kwargs):  # (a model of other arguments: skipped)
            check(*self.args, **self.kwargs)
        ctor = getattr(getattr(self.svi, "optim", None), "pt_optim_constructor", None)
        if getattr(model, "sparse", False) is True and ctor in _DENSE_ONLY_OPTIMIZERS:
            raise ValueError(f"the model has sparse=True (row-sparse gradients, the default when a "
                             f"step subsamples classes) but the optimizer is {ctor.__name__}, which "
                             "takes dense gradients only: use pyro_ar.optim.lazy_adam, or build the "
                             "model with sparse=False (then a step costs O(K))")

    def run(self) -> List[Dict]:
        o, st = self.o, self.state
        self.check_data()
        for cb in self.callbacks:
            cb.on_train_begin(st)
        resumed = self.restore()
        if self.keep_good:  # the state training starts from counts as good
            self.good = (st.step, snapshot_params())
        if not resumed:
            self.record(o["eval_at_start"])
        self.progress.start(st)
        try:
            while not self.finished():
                if resumed:
                    resumed = False
                    self.first_step_after_resume()
                else:
                    self.step()
                done = self.finished()
                evaluate = self.due_for_eval() or done
                if evaluate or st.step % o["log_every"] == 0:
                    self.record(evaluate)
                every = o["checkpoint_every"]
                if o["checkpoint"] is not None and every and st.step % every == 0 and not done:
                    self.save()
            if st.history[-1]["step"] != st.step:
                self.record(True)
            if o["checkpoint"] is not None:
                self.save()
        finally:
            self.progress.close()
        for cb in self.callbacks:
            cb.on_train_end(st)
        return st.history


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _loop_state_problem(loop, has_scheduler: bool) -> Optional[str]:
    """What is wrong with the loop's part of a checkpoint (None: nothing)."""
    def number(v):
        return isinstance(v, (int, float)) and not isinstance(v, bool) and not math.isnan(v)
    if not isinstance(loop, dict):
        return f"a {type(loop).__name__}, not a dict"
    try:
        checks = [
            ("elapsed", isinstance(loop["elapsed"], dict) and all(
                number(loop["elapsed"].get(k)) and loop["elapsed"][k] >= 0 for k in ("time", "wall", "cpu"))),
            ("losses", isinstance(loop["losses"], list) and all(number(v) for v in loop["losses"])),
            ("times", isinstance(loop["times"], list) and all(number(v) for v in loop["times"])),
            ("loss_sum", number(loop["loss_sum"])),
            ("next_eval_time", isinstance(loop["next_eval_time"], int) and not isinstance(
                loop["next_eval_time"], bool) and loop["next_eval_time"] >= 0),
            ("stop", isinstance(loop["stop"], bool)),
            ("divergence", loop["divergence"] is None or isinstance(loop["divergence"], dict) and (
                loop["divergence"].get("scale") is None or number(loop["divergence"]["scale"])
                and math.isfinite(loop["divergence"]["scale"]) and loop["divergence"]["scale"] >= 1)
                and isinstance(loop["divergence"].get("first"), list) and all(
                    number(v) and math.isfinite(v) and v >= 0 for v in loop["divergence"]["first"])),
            ("callbacks", isinstance(loop["callbacks"], dict)),
            ("scheduler", loop["scheduler"] is None or isinstance(loop["scheduler"], dict) and has_scheduler),
        ]
    except KeyError as e:
        return f"{e.args[0]!r} is missing"
    bad = [name for name, ok in checks if not ok]
    return f"{', '.join(bad)} of the wrong type or value" if bad else None


def _checkpoint_group(group):
    """The process group whose ranks checkpoint together (see ``train(checkpoint_group=)``)."""
    if group != "auto":
        return group
    import torch.distributed as dist
    running = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    return dist.group.WORLD if running else None


def train(svi: SVI, *args, num_steps: int = 1000, time_budget: Optional[float] = None,
          eval_fn: Optional[Callable[[], Dict]] = None, eval_every: Optional[int] = None,
          eval_times: Sequence[float] = (), eval_at_start: bool = True, log_every: Optional[int] = None,
          callbacks: Sequence[Union[Callback, Callable]] = (), early_stopping: Optional[EarlyStopping] = None,
          scheduler: Optional[object] = None, checkpoint: Optional[Union[str, os.PathLike]] = None,
          checkpoint_every: Optional[int] = None, resume: bool = True, checkpoint_group="auto",
          modules: Sequence[torch.nn.Module] = (), progress: Union[bool, Dict] = False,
          clock: Union[str, Callable[[], float]] = "wall", step_times: Optional[List[float]] = None,
          divergence: Union[bool, DivergenceCheck] = True, **kwargs) -> List[Dict]:
    """Run ``svi.step(*args, **kwargs)`` and return a history of records (see the module doc).

    Each record has ``step``, ``time`` (training seconds so far on ``clock``; evaluation and
    checkpoint time excluded), ``wall_time`` and ``cpu_time`` (both clocks), ``loss`` (mean
    of the step losses since the previous record), ``step_time`` (median seconds of one
    step since the previous record, on ``clock``) and, at evaluation points, what
    ``eval_fn()`` returns. The first record (step 0) and the last are always made; step 0
    is evaluated if ``eval_at_start``, the last always.

    :param num_steps: total number of steps (a resumed run continues up to it).
    :param time_budget: stop once ``time`` reaches it (seconds; resumed runs count the time
        before the interruption).
    :param eval_every: steps between evaluations (default ``num_steps // 20``).
    :param eval_times: training times (seconds on ``clock``) at which to evaluate as well.
    :param log_every: steps between loss records (default ``eval_every``).
    :param callbacks: :class:`Callback` objects, or functions called with every record
        (a true return value stops the run).
    :param early_stopping: an :class:`EarlyStopping` (a callback run after the others).
    :param scheduler: an object whose ``step()`` is called after every SVI step (e.g. the
        :class:`~pyro.optim.PyroLRScheduler` given to ``svi``).
    :param checkpoint: a file path: save there every ``checkpoint_every`` steps and at the
        end; with ``resume`` and an existing file, restore it and continue from its step
        (pass the same ``modules``; callback states are matched by class name and order, a
        saved non-empty state without its callback is an error). A run stopped by a
        callback stays stopped; one stopped by ``num_steps`` or ``time_budget`` continues
        if they grew. A resume issues a :class:`ResumeWarning`; the checkpoint records the
        run's configuration (:func:`~pyro_ar.infer.checkpoint.run_config`: model, guide,
        ELBO, optimizer settings, data shapes) and a run with another configuration
        raises :class:`CheckpointError` naming the differences instead of resuming.
    :param checkpoint_group: the ranks that checkpoint together (each to its own file,
        e.g. :func:`~pyro_ar.distributed.rank_path`): ``"auto"`` (default) is every rank
        when a ``torch.distributed`` process group of more than one process runs (every
        rank must then call ``train``), a process group, or None (each process on its
        own). They keep their previous checkpoint as well (``<name>.prev<ext>``) and
        resume from the newest step that all of them have
        (:func:`~pyro_ar.infer.checkpoint.agree_on_checkpoint`), or all fail naming the
        ranks' steps.
    :param modules: extra ``nn.Module``\\ s whose buffers belong to the run (the guide's and
        model's are saved anyway).
    :param progress: False (nothing shown); True or a dict of tqdm options (``desc``, ``file``,
        ...): a bar of the steps with the running loss and the last evaluation, closed at the
        end (:func:`progress_bar`); a bar the caller opened (e.g. one for several runs):
        updated, left open; ``"lines"`` or ``{"style": "lines", "desc": ..., "file": ...}``:
        a line per record (``desc: step N, T s (CPU s for clock="process"), loss L, <eval_fn's
        numbers>``) to ``file`` (default stdout), for scripts and logs.
    :param clock: ``"wall"`` (``time.perf_counter``), ``"process"`` (CPU time of this
        process, ``time.process_time``) or a function returning seconds (e.g. a fake clock
        in tests) for ``time``, ``time_budget``, ``eval_times`` and ``step_time``
        (``wall_time`` and ``cpu_time`` are always read from the real clocks).
    :param step_times: a list to which the time of every step is appended.
    :param divergence: True (a :class:`DivergenceCheck`), a :class:`DivergenceCheck`, or
        False (no check). On divergence the parameters are restored (module docstring)
        before :class:`TrainingDiverged` is raised.

    Example:

    >>> import torch, pyro, pyro.distributions as dist
    >>> from pyro.infer import SVI, Trace_ELBO
    >>> from pyro_ar.infer import train
    >>> def model(x):                                   # any Pyro model and guide
    ...     loc = pyro.param("loc", torch.tensor(0.0))
    ...     with pyro.plate("data", len(x)):
    ...         pyro.sample("x", dist.Normal(loc, 1.0), obs=x)
    >>> svi = SVI(model, lambda x: None, pyro.optim.Adam({"lr": 0.1}), Trace_ELBO())
    >>> history = train(svi, torch.full((10,), 3.0), num_steps=30, eval_every=10)
    >>> [h["step"] for h in history]
    [0, 10, 20, 30]
    """
    if not (isinstance(num_steps, int) and num_steps >= 0):
        raise ValueError(f"num_steps must be an int >= 0, got num_steps={num_steps!r}")
    if not (callable(clock) or clock in ("wall", "process")):
        raise ValueError(f"clock must be 'wall', 'process' or a function returning seconds, got clock={clock!r}")
    for name, value in (("eval_every", eval_every), ("log_every", log_every),
                        ("checkpoint_every", checkpoint_every)):
        if value is not None and not (isinstance(value, int) and value >= 1):
            raise ValueError(f"{name} must be an int >= 1 or None, got {name}={value!r}")
    if time_budget is not None and not time_budget >= 0:
        raise ValueError(f"time_budget must be >= 0 seconds, got time_budget={time_budget!r}")
    eval_every = eval_every or max(1, num_steps // 20)
    opts = dict(num_steps=num_steps, time_budget=time_budget, eval_fn=eval_fn, eval_every=eval_every,
                eval_times=sorted(eval_times), eval_at_start=eval_at_start,
                log_every=log_every or eval_every, callbacks=callbacks,
                early_stopping=early_stopping, scheduler=scheduler, checkpoint=checkpoint,
                checkpoint_every=checkpoint_every, resume=resume, checkpoint_group=checkpoint_group,
                modules=tuple(modules),
                progress=progress, clock=clock, step_times=step_times, divergence=divergence)
    return _Loop(svi, args, kwargs, opts).run()

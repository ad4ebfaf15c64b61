r"""One SVI training loop: records, evaluation, callbacks, early stopping, checkpoint/resume.

The loop is this module; its parts have their own: the callbacks
(:mod:`pyro_ar.infer.callbacks`), the divergence check (:mod:`pyro_ar.infer.divergence`),
the progress display (:mod:`pyro_ar.infer.progress`) and checkpoints
(:mod:`pyro_ar.infer.checkpoint`). Their public names are importable from here as well.

:func:`train` repeats ``loss_t = svi.step(*args, **model_kwargs)`` (then ``scheduler.step()``)
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
  passed), so that no non-finite parameters are left behind. A guide with a
  ``divergence_advice()`` method (:class:`~pyro_ar.infer.GumbelLocalGuide` in its default
  order) adds the remedy it knows to the message.
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

import contextlib
import inspect
import math
import os
import statistics
import time
import warnings
from typing import Any, Dict, List, Mapping, Optional

import torch

import pyro
from pyro.infer import SVI

from ..files import preserved_rng
from .callbacks import (Callback, EarlyStopping, IterateAverage, LearningRateDecay, TrainState,
                        _FunctionCallback, restore_params, snapshot_params)
from .checkpoint import (CheckpointError, CollectiveError, agree_on_checkpoint, load_checkpoint, rotate_checkpoint,
                         save_checkpoint)
from .divergence import DivergenceCheck, TrainingDiverged
from .options import TrainOptions
from .progress import _Progress, progress_bar, set_progress_total
from .run_config import run_config

__all__ = [
    "train", "TrainOptions", "TrainState", "Callback", "EarlyStopping", "IterateAverage", "LearningRateDecay",
    "DivergenceCheck", "progress_bar", "set_progress_total",
    "TrainingDiverged", "CheckpointError", "ResumeWarning", "save_checkpoint", "load_checkpoint",
]



def _left_support(error: ValueError) -> bool:
    """Whether ``error`` is torch's validation of a distribution's parameters ("Expected
    parameter scale ... to satisfy the constraint"): after a first step that passed, the
    optimizer moved a parameter out of its support (e.g. a guide scale whose softplus
    underflowed to 0 at a huge learning rate), a divergence rather than a bad input."""
    return str(error).startswith("Expected parameter ")

class ResumeWarning(UserWarning):
    """Issued by :func:`train` when it resumes from a checkpoint (naming the file and the
    step), so that a re-run never silently continues an old run; filter it with
    ``warnings.filterwarnings("ignore", category=ResumeWarning)``.

    Example:

    >>> from pyro_ar.infer.loop import ResumeWarning
    >>> issubclass(ResumeWarning, UserWarning)
    True
    """


def _guide_advice(svi) -> str:
    """The text ``"; <advice>"`` for each part of ``svi.guide`` (an AutoGuideList's parts too)
    whose ``divergence_advice()`` names a remedy of its own for a divergence ("" if none)."""
    guide = getattr(svi, "guide", None)
    parts = list(guide) if isinstance(guide, torch.nn.ModuleList) else [guide]
    advice = [part.divergence_advice() for part in parts if callable(getattr(part, "divergence_advice", None))]
    return "".join(f"; {a}" for a in advice if a)


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


def _not_the_checkpoints() -> tuple:
    """The failures of a step that are not the restored checkpoint's fault: the ranks'
    collectives (pyro_ar's :class:`CollectiveError`, torch.distributed's ``DistError``), the
    divergence check, a checkpoint error."""
    import torch.distributed as dist

    return (TrainingDiverged, CheckpointError, CollectiveError) + tuple(
        getattr(dist, n) for n in ("DistError",) if hasattr(dist, n))


class _Loop:
    """The state and steps of one :func:`train` call (see there)."""

    def __init__(self, svi, args, kwargs, options: TrainOptions):
        self.svi, self.args, self.kwargs, self.options = svi, args, kwargs, options
        self.state = TrainState(svi, options.num_steps)
        self.elapsed = {"time": 0.0, "wall": 0.0, "cpu": 0.0}
        self.losses, self.times, self.loss_sum = [], [], 0.0
        self.next_eval_time, self.stepped, self.left_support = 0, False, None
        self.progress = _Progress(options.progress, options.clock)
        self.config, self.group = None, None
        div = options.divergence
        self.divergence = DivergenceCheck() if div is True else (div or None)
        # (step, parameters) of the last record whose next loss passed the check, and of the
        # newest record (not yet confirmed): the state restored on divergence. Copies are
        # taken at records at least num_steps / 20 steps apart (about 20 per run, whatever
        # log_every: a copy costs O(parameters), which a step need not touch)
        self.good = self.pending = None
        self.snapshot_every = max(1, options.num_steps // 20)
        self.keep_good = self.divergence is not None and getattr(self.divergence, "restore", False)
        cbs = [c if isinstance(c, Callback) else _FunctionCallback(c) for c in options.callbacks]
        if options.early_stopping is not None:
            cbs.append(options.early_stopping)
        self.callbacks = cbs
        self.step_callbacks = [c for c in cbs if type(c).on_step is not Callback.on_step]

    # ---- records
    def record(self, evaluate: bool) -> None:
        st, o = self.state, self.options
        rec = {"step": st.step, "time": self.elapsed["time"], "wall_time": self.elapsed["wall"],
               "cpu_time": self.elapsed["cpu"],
               "loss": self.loss_sum / len(self.losses) if self.losses else float("nan"),
               "step_time": statistics.median(self.times) if self.times else float("nan")}
        if evaluate and o.eval_fn is not None:
            with preserved_rng():  # evaluation never changes the training trajectory
                out = o.eval_fn()
            rec.update(out)
        st.history.append(rec)
        self.progress.record(rec, out if evaluate and o.eval_fn is not None else {})
        self.losses, self.times, self.loss_sum = [], [], 0.0
        newest = max(s for s, _ in (self.good, self.pending or self.good)) if self.good else None
        if self.keep_good and not self.finished() and newest is not None \
                and st.step - newest >= self.snapshot_every:
            self.pending = (st.step, snapshot_params())
        for cb in self.callbacks:
            if cb.on_record(rec, st):
                st.stop = True

    def finished(self) -> bool:
        st, budget = self.state, self.options.time_budget
        return st.stop or st.step >= st.num_steps or (budget is not None and self.elapsed["time"] >= budget)

    def due_for_eval(self) -> bool:
        times, st = self.options.eval_times, self.state
        due = st.step % self.options.evaluation_period == 0
        while self.next_eval_time < len(times) and self.elapsed["time"] >= times[self.next_eval_time]:
            self.next_eval_time, due = self.next_eval_time + 1, True
        return due

    # ---- one step
    def step(self) -> None:
        st, o = self.state, self.options
        clock = o.clock if callable(o.clock) else None  # an injected clock (tests)
        w0, c0, t0 = time.perf_counter(), time.process_time(), clock() if clock else 0.0
        quiet = o.validation == "first" and self.stepped  # (the run's first step validated)
        with pyro.validation_enabled(False) if quiet else contextlib.nullcontext():
            try:
                loss = self.svi.step(*self.args, **self.kwargs)
            except ValueError as e:  # parameters stepped out of a distribution's support
                if self.divergence is None or not self.stepped or not _left_support(e):
                    raise
                loss = math.nan  # (a diverged step: the divergence check below restores and raises)
                self.left_support = str(e).split(" of distribution ")[0]
        self.stepped = True
        if o.scheduler is not None:
            o.scheduler.step()
        dw, dc = time.perf_counter() - w0, time.process_time() - c0
        dt = clock() - t0 if clock else dw if o.clock == "wall" else dc
        st.step, st.loss = st.step + 1, loss
        self.elapsed["wall"] += dw
        self.elapsed["cpu"] += dc
        self.elapsed["time"] += dt
        st.time = self.elapsed["time"]
        self.losses.append(loss)
        self.loss_sum += loss
        self.times.append(dt)
        if o.step_times is not None:
            o.step_times.append(dt)
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
            if self.left_support:  # the optimizer's step, not the loss, failed
                err = f"{err} ({self.left_support.replace('Expected', 'the step left the support:', 1)})"
            err = f"{err}{_guide_advice(self.svi)}"
            if not self.keep_good:
                raise TrainingDiverged(err) from None
            good_step, params = self.good
            dropped = restore_params(params, drop_others=True)
            msg = f"the parameters are restored to those after step {good_step}"
            if dropped:
                msg += f" (the {len(dropped)} created since are removed from the param store)"
            es = self.options.early_stopping  # its best counts if the loss after it passed
            if isinstance(es, EarlyStopping) and es.restore_best and es._snapshot \
                    and es.best_step is not None and es.best_step < step - 1:
                es.on_train_end(self.state)
                msg = f"the parameters are restored to early stopping's best (step {es.best_step})"
            raise TrainingDiverged(f"{err}; {msg}") from None
        if self.pending is not None and self.pending[0] == step - 1:  # its loss passed
            self.good, self.pending = self.pending, None

    # ---- checkpoints
    def save(self) -> None:
        o, sched = self.options, self.options.scheduler
        loop = {"elapsed": dict(self.elapsed), "losses": list(self.losses), "times": list(self.times),
                "loss_sum": self.loss_sum, "next_eval_time": self.next_eval_time,
                "stop": self.state.stop,
                "divergence": None if self.divergence is None else self.divergence.state_dict(),
                "callbacks": {k: cb.state_dict() for k, cb in self.keyed_callbacks().items()},
                "scheduler": sched.get_state() if sched is not None and sched is not self.svi.optim
                and hasattr(sched, "get_state") else None}
        if self.group is not None:  # the ranks' agreement on a step needs the previous file
            rotate_checkpoint(o.checkpoint)
        save_checkpoint(o.checkpoint, self.svi, step=self.state.step, modules=o.modules,
                        history=self.state.history, extra={"pyro_ar.train": loop}, config=self.config)

    def restore(self) -> bool:
        o, path = self.options, self.options.checkpoint
        if path is None:
            return False
        self.config = run_config(self.svi, *self.args, modules=o.modules, **self.kwargs)
        self.group = _checkpoint_group(o.checkpoint_group)
        if not o.resume:
            return False
        if self.group is not None:  # ranks resume from the newest step they all have
            path = agree_on_checkpoint(path, self.group)
        if path is None or not os.path.exists(path):
            return False
        ck = load_checkpoint(path, self.svi, *self.args, modules=o.modules, config=self.config,
                             **self.kwargs)
        loop = (ck["extra"] or {}).get("pyro_ar.train") if isinstance(ck["extra"], (dict, type(None))) else None
        if loop is None:
            raise CheckpointError(f"the checkpoint {os.fspath(path)!r} was not written by train()")
        problem = _loop_state_problem(loop, o.scheduler is not None)
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
                o.scheduler.set_state(loop["scheduler"])
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise CheckpointError(f"the checkpoint {os.fspath(path)!r} holds a state that does not fit "
                                  f"this run: {type(e).__name__}: {e}") from e
        warnings.warn(f"train: resumed from the checkpoint {os.fspath(path)!r} at step {st.step} (of "
                      f"num_steps={st.num_steps}); pass resume=False or another checkpoint path to "
                      f"start afresh", ResumeWarning, stacklevel=4)
        return True

    def first_step_after_resume(self) -> None:
        """The first step after a restore: a failure of the step's own code (not of the
        collectives -- :class:`CollectiveError`, torch's ``DistError`` -- nor the divergence
        check) names the checkpoint, whose parameters may not fit this run (e.g. a guide's
        parameter of another shape in a hand-made file)."""
        try:
            self.step()
        except _not_the_checkpoints():
            raise
        except (RuntimeError, ValueError, TypeError, IndexError, KeyError, AttributeError) as e:
            text = str(e)
            raise CheckpointError(f"the first step after resuming from the checkpoint "
                                  f"{os.fspath(self.options.checkpoint)!r} failed, so its state does not "
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
        o, st = self.options, self.state
        self.check_data()
        for cb in self.callbacks:
            cb.on_train_begin(st)
        resumed = self.restore()
        if self.keep_good:  # the state training starts from counts as good
            self.good = (st.step, snapshot_params())
        if not resumed:
            self.record(o.eval_at_start)
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
                if evaluate or st.step % o.record_period == 0:
                    self.record(evaluate)
                every = o.checkpoint_every
                if o.checkpoint is not None and every and st.step % every == 0 and not done:
                    self.save()
            if st.history[-1]["step"] != st.step:
                self.record(True)
            if o.checkpoint is not None:
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


def train(svi: SVI, *args, options: Optional[TrainOptions] = None,
          model_kwargs: Optional[Mapping[str, Any]] = None, **option_fields) -> List[Dict]:
    """Run ``svi.step(*args, **model_kwargs)`` under the loop's ``options`` and return a
    history of records (see the module doc).

    Each record has ``step``, ``time`` (training seconds so far on ``clock``; evaluation and
    checkpoint time excluded), ``wall_time`` and ``cpu_time`` (both clocks), ``loss`` (mean
    of the step losses since the previous record), ``step_time`` (median seconds of one
    step since the previous record, on ``clock``) and, at evaluation points, what
    ``eval_fn()`` returns. The first record (step 0) and the last are always made; step 0
    is evaluated if ``eval_at_start``, the last always.

    :param svi: a ``pyro.infer.SVI`` (or any object with ``step``; ``model``, ``guide`` and
        ``optim`` are used where present: the data check, checkpoints).
    :param args: the model's and guide's positional arguments (e.g. ``x, y``).
    :param options: a :class:`~pyro_ar.infer.TrainOptions` (default: its defaults); its fields
        are documented there.
    :param model_kwargs: the model's and guide's keyword arguments (a dict), kept apart from
        the loop's options.
    :param option_fields: fields of :class:`~pyro_ar.infer.TrainOptions` given as keywords
        (``num_steps=400, eval_every=50, ...``), overriding those of ``options``; any other
        keyword is a ``TypeError`` naming it.

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
    options = (options if options is not None else TrainOptions()).replace(**option_fields)
    return _Loop(svi, args, dict(model_kwargs or {}), options).run()

r"""The options of :func:`~pyro_ar.infer.train`: one typed, validated object.

:class:`TrainOptions` holds every setting of the loop (when to stop, evaluate, record,
checkpoint; which clock; callbacks). ``train(svi, *args, num_steps=..., ...)`` builds one from
its keywords, ``train(svi, *args, options=TrainOptions(...))`` takes one ready-made (keywords
then override its fields); the model's own keyword arguments go in ``train``'s
``model_kwargs``, so that they never meet the loop's options.
"""

import dataclasses
import os
from typing import Callable, Dict, List, Optional, Sequence, Union

import torch

from .callbacks import Callback, EarlyStopping
from .divergence import DivergenceCheck

__all__ = ["TrainOptions"]


def _is_count(value, minimum: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= minimum


@dataclasses.dataclass(frozen=True)
class TrainOptions:
    """The settings of one :func:`~pyro_ar.infer.train` run (the loop's behaviour is
    described in :mod:`pyro_ar.infer.loop`). A field of the wrong type or value raises
    ``ValueError`` naming the field and the value.

    :param num_steps: total number of SVI steps :math:`T` (a resumed run continues up to it).
    :param time_budget: stop once the training time on ``clock`` reaches it (seconds; resumed
        runs count the time before the interruption); None: no budget.
    :param eval_fn: a function of no arguments returning a dict of numbers (e.g. a held-out
        log-likelihood), called at the evaluation points; its results join the records.
    :param eval_every: steps between evaluations; None: ``max(1, num_steps // 20)``
        (:attr:`evaluation_period`).
    :param eval_times: training times (seconds on ``clock``) at which to evaluate as well.
    :param eval_at_start: evaluate the record of step 0.
    :param log_every: steps between loss records; None: the evaluation period
        (:attr:`record_period`).
    :param callbacks: :class:`~pyro_ar.infer.Callback` objects, or functions called with every
        record (a true return value stops the run).
    :param early_stopping: an :class:`~pyro_ar.infer.EarlyStopping` (a callback run after the
        others).
    :param scheduler: an object whose ``step()`` is called after every SVI step (e.g. the
        :class:`~pyro.optim.PyroLRScheduler` given to ``svi``).
    :param checkpoint: a file path: save there every ``checkpoint_every`` steps and at the
        end; with ``resume`` and an existing file, restore it and continue from its step
        (pass the same ``modules``; callback states are matched by class name and order, a
        saved non-empty state without its callback is an error). A run stopped by a
        callback stays stopped; one stopped by ``num_steps`` or ``time_budget`` continues
        if they grew. A resume issues a :class:`~pyro_ar.infer.loop.ResumeWarning`; the checkpoint records the
        run's configuration (:func:`~pyro_ar.infer.checkpoint.run_config`: model, guide,
        ELBO, optimizer settings, data shapes) and a run with another configuration
        raises :class:`~pyro_ar.infer.CheckpointError` naming the differences instead of resuming.
    :param checkpoint_every: steps between checkpoints (None: at the end only).
    :param resume: continue from an existing ``checkpoint`` file (False: start afresh).
    :param checkpoint_group: the ranks that checkpoint together (each to its own file,
        e.g. :func:`~pyro_ar.distributed.rank_path`): ``"auto"`` (default) is every rank
        when a ``torch.distributed`` process group of more than one process runs (every
        rank must then call :func:`~pyro_ar.infer.train`), a process group, or None (each process on its
        own). They keep their previous checkpoint as well (``<name>.prev<ext>``) and
        resume from the newest step that all of them have
        (:func:`~pyro_ar.infer.checkpoint.agree_on_checkpoint`), or all fail naming the
        ranks' steps.
    :param modules: extra ``nn.Module``\\ s whose buffers belong to the run (the guide's and
        model's are saved anyway).
    :param progress: False (nothing shown); True or a dict of tqdm options (``desc``, ``file``,
        ...): a bar of the steps with the running loss and the last evaluation, closed at the
        end (:func:`~pyro_ar.infer.progress_bar`); a bar the caller opened (e.g. one for several runs):
        updated, left open; ``"lines"`` or ``{"style": "lines", "desc": ..., "file": ...}``:
        a line per record (``desc: step N, T s (CPU s for clock="process"), loss L, <eval_fn's
        numbers>``) to ``file`` (default stdout), for scripts and logs.
    :param clock: ``"wall"`` (``time.perf_counter``), ``"process"`` (CPU time of this
        process, ``time.process_time``) or a function returning seconds (e.g. a fake clock
        in tests) for ``time``, ``time_budget``, ``eval_times`` and ``step_time``
        (``wall_time`` and ``cpu_time`` are always read from the real clocks).
    :param step_times: a list to which the time of every step is appended.
    :param divergence: True (a :class:`~pyro_ar.infer.DivergenceCheck`), a :class:`~pyro_ar.infer.DivergenceCheck`, or
        False (no check). On divergence the parameters are restored (:mod:`pyro_ar.infer.loop`)
        before :class:`~pyro_ar.infer.TrainingDiverged` is raised.
    :param validation: ``"all"`` (default): every step under Pyro's global validation
        setting (``pyro.enable_validation``); ``"first"``: the run's first step so, the
        others with validation off (``pyro.validation_enabled(False)``), once the model's
        data check has run: the checks of distribution arguments and plates then cost
        nothing per step (on a GPU each is a host-device synchronisation), and the library's
        own softmax model and guide step without traces (:mod:`pyro_ar.infer.compiled`). The
        steps compute the same numbers either way.

    Example:

    >>> from pyro_ar.infer import TrainOptions
    >>> o = TrainOptions(num_steps=100, log_every=5)
    >>> o.evaluation_period, o.record_period
    (5, 5)
    >>> TrainOptions(eval_every=0)
    Traceback (most recent call last):
        ...
    ValueError: TrainOptions: eval_every must be an int >= 1 or None, got eval_every=0
    """

    num_steps: int = 1000
    time_budget: Optional[float] = None
    eval_fn: Optional[Callable[[], Dict]] = None
    eval_every: Optional[int] = None
    eval_times: Sequence[float] = ()
    eval_at_start: bool = True
    log_every: Optional[int] = None
    callbacks: Sequence[Union[Callback, Callable]] = ()
    early_stopping: Optional[EarlyStopping] = None
    scheduler: Optional[object] = None
    checkpoint: Optional[Union[str, os.PathLike]] = None
    checkpoint_every: Optional[int] = None
    resume: bool = True
    checkpoint_group: object = "auto"
    modules: Sequence[torch.nn.Module] = ()
    progress: Union[bool, str, Dict, object] = False
    clock: Union[str, Callable[[], float]] = "wall"
    step_times: Optional[List[float]] = None
    divergence: Union[bool, DivergenceCheck] = True
    validation: str = "all"

    def __post_init__(self):
        def bad(name, expected):
            value = getattr(self, name)
            raise ValueError(f"TrainOptions: {name} must be {expected}, got {name}={value!r}")

        if not _is_count(self.num_steps, 0):
            bad("num_steps", "an int >= 0")
        for name in ("eval_every", "log_every", "checkpoint_every"):
            if getattr(self, name) is not None and not _is_count(getattr(self, name), 1):
                bad(name, "an int >= 1 or None")
        if self.time_budget is not None and not (isinstance(self.time_budget, (int, float))
                                                 and self.time_budget >= 0):
            bad("time_budget", ">= 0 seconds or None")
        if self.validation not in ("all", "first"):
            bad("validation", "'all' or 'first'")
        if not (callable(self.clock) or self.clock in ("wall", "process")):
            bad("clock", "'wall', 'process' or a function returning seconds")
        if self.eval_fn is not None and not callable(self.eval_fn):
            bad("eval_fn", "a function of no arguments returning a dict, or None")
        if self.early_stopping is not None and not isinstance(self.early_stopping, EarlyStopping):
            bad("early_stopping", "an EarlyStopping or None")
        if not (isinstance(self.divergence, (bool, DivergenceCheck))):
            bad("divergence", "True, False or a DivergenceCheck")
        if self.scheduler is not None and not callable(getattr(self.scheduler, "step", None)):
            bad("scheduler", "an object with a step() method, or None")
        for name in ("eval_times", "callbacks", "modules"):
            if isinstance(getattr(self, name), (str, bytes)) or not hasattr(getattr(self, name), "__iter__"):
                bad(name, "a sequence")
        if not all(callable(c) or isinstance(c, Callback) for c in self.callbacks):
            bad("callbacks", "a sequence of Callback objects or functions of a record")
        object.__setattr__(self, "eval_times", tuple(sorted(self.eval_times)))
        object.__setattr__(self, "callbacks", tuple(self.callbacks))
        object.__setattr__(self, "modules", tuple(self.modules))

    @property
    def evaluation_period(self) -> int:
        """The steps between evaluations (``eval_every``, or ``max(1, num_steps // 20)``)."""
        return self.eval_every or max(1, self.num_steps // 20)

    @property
    def record_period(self) -> int:
        """The steps between loss records (``log_every``, or the evaluation period)."""
        return self.log_every or self.evaluation_period

    def replace(self, **changes) -> "TrainOptions":
        """A copy with ``changes`` (field names; an unknown name is a ``TypeError`` naming it
        and the fields).

        Example:

        >>> from pyro_ar.infer import TrainOptions
        >>> TrainOptions().replace(num_steps=10).num_steps
        10
        """
        unknown = sorted(set(changes) - {f.name for f in dataclasses.fields(self)})
        if unknown:
            raise TypeError(f"unknown training option(s) {unknown}: the options are the fields of TrainOptions "
                            f"({', '.join(f.name for f in dataclasses.fields(self))}); the model's keyword "
                            "arguments go in train(..., model_kwargs={...})")
        return dataclasses.replace(self, **changes)

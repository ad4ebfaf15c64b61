r"""A slow drift of a monitored metric away from its best: :class:`DriftCheck` (issue 27).

:class:`~pyro_ar.infer.loop.DivergenceCheck` catches a loss that explodes or is not finite.
A fit can also degrade slowly with training while every loss stays finite and of the same
order: the session model with a heavy-tailed local guide (issue 27) saw its held-out
log-likelihood fall, over a few thousand steps, below the uniform distribution's. This
callback watches one number of the :func:`~pyro_ar.infer.train` records (an evaluation such as
``"val_ll"``, or the training ``"loss"``) and declares the run drifting when it has been worse
than the best value seen so far by more than ``margin`` for ``patience`` consecutive records:

.. math::  \text{drift at record } r \iff
           s\,(m^\ast_{r'} - m_{r'}) > \text{margin} \quad \text{for } r' = r - p + 1, \dots, r,

with :math:`m^\ast` the running best, :math:`s = +1` for ``mode="max"`` (higher is better)
and :math:`-1` for ``"min"``. Unlike :class:`~pyro_ar.infer.loop.EarlyStopping`, which stops
once progress *stalls*, this flags a run that went *backwards* by a margin, and by default
raises :class:`~pyro_ar.infer.loop.TrainingDiverged`.
"""

import math
from typing import Dict, List, Optional

from .loop import Callback, TrainingDiverged, TrainState

__all__ = ["DriftCheck"]


class DriftCheck(Callback):
    r"""Flags a monitored metric that falls below its best by ``margin`` for ``patience`` records.

    :param str monitor: the record key (e.g. ``"val_ll"`` from ``eval_fn``, or ``"loss"``);
        records without it are skipped.
    :param str mode: ``"max"`` (higher is better, e.g. a log-likelihood) or ``"min"`` (a loss).
    :param float margin: how far below the best (in the metric's units) counts as worse, > 0.
    :param int patience: consecutive worse records before the run is flagged (>= 1).
    :param str action: ``"raise"`` (default: :class:`~pyro_ar.infer.loop.TrainingDiverged`
        naming the metric, its best and the steps) or ``"stop"`` (end training quietly; see
        ``drifted``). A NaN value counts as worse.

    Attributes: ``best``, ``best_step``, ``worse`` (the current run of worse records),
    ``drifted`` (the step at which the run was flagged, or None).

    Example:

    >>> from pyro_ar.infer import DriftCheck
    >>> check = DriftCheck("val_ll", margin=0.5, patience=2, action="stop")
    >>> [bool(check.on_record({"step": s, "val_ll": v}, None))
    ...  for s, v in enumerate([-5.0, -4.0, -4.3, -4.6, -4.7, -4.9])]
    [False, False, False, False, True, False]
    >>> check.best, check.best_step, check.drifted
    (-4.0, 1, 4)
    """

    def __init__(self, monitor: str, mode: str = "max", margin: float = 0.1, patience: int = 3,
                 action: str = "raise") -> None:
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"monitor must be a record key (a non-empty str), got monitor={monitor!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got mode={mode!r}")
        if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin > 0):
            raise ValueError(f"margin must be a finite number > 0, got margin={margin!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 1:
            raise ValueError(f"patience must be an int >= 1, got patience={patience!r}")
        if action not in ("raise", "stop"):
            raise ValueError(f"action must be 'raise' or 'stop', got action={action!r}")
        self.monitor, self.mode, self.margin, self.patience = monitor, mode, float(margin), patience
        self.action = action
        self.on_train_begin(None)

    def on_train_begin(self, state: Optional[TrainState]) -> None:
        self.best, self.best_step, self.worse, self.drifted = None, None, [], None

    def on_record(self, record: Dict, state: Optional[TrainState]) -> Optional[bool]:
        if self.drifted is not None or self.monitor not in record:
            return False
        value = float(record[self.monitor])
        sign = 1.0 if self.mode == "max" else -1.0
        if math.isfinite(value) and (self.best is None or sign * value > sign * self.best):
            self.best, self.best_step = value, record.get("step")
        if math.isfinite(value) and sign * (self.best - value) <= self.margin:
            self.worse = []
            return False
        self.worse.append((record.get("step"), value))
        if len(self.worse) < self.patience:
            return False
        self.drifted = record.get("step")
        if self.action == "stop":
            return True
        raise TrainingDiverged(self._message())

    def _message(self) -> str:
        steps: List = [s for s, _ in self.worse]
        values = ", ".join(f"{v:.4g}" for _, v in self.worse)
        return (f"training drifted: {self.monitor} was worse than its best {self.best:.4g} (step "
                f"{self.best_step}) by more than {self.margin:g} at {len(self.worse)} consecutive "
                f"records (steps {steps[0]}..{steps[-1]}: {values}); the estimator may be "
                "heavy-tailed (more or stratified negatives, e.g. pyro_ar.negatives.LabelHeadNegatives) "
                "or the learning rate too large")

    def state_dict(self) -> Dict:
        return {"best": self.best, "best_step": self.best_step, "worse": list(self.worse),
                "drifted": self.drifted}

    def load_state_dict(self, state: Dict) -> None:
        self.best, self.best_step = state["best"], state["best_step"]
        self.worse, self.drifted = [tuple(w) for w in state["worse"]], state["drifted"]

r"""The divergence check of :func:`~pyro_ar.infer.train`: a loss that is not finite, or that
explodes relative to the scale of the first losses, stops the run with
:class:`TrainingDiverged` (see :class:`DivergenceCheck` for the rule).
"""

import math
import statistics
from typing import Dict

__all__ = ["DivergenceCheck", "TrainingDiverged"]


class TrainingDiverged(RuntimeError):
    """Raised by :func:`~pyro_ar.infer.train` when the loss is not finite or explodes (:class:`DivergenceCheck`).

    Example:

    >>> from pyro_ar.infer.divergence import DivergenceCheck, TrainingDiverged
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
    ``restore`` (default), :func:`~pyro_ar.infer.train` keeps a copy of the parameters taken at its
    records (at most two at a time, at records at least ``num_steps / 20`` steps apart)
    and, on divergence, puts back the last one whose next loss passed this check before
    raising.

    Example:

    >>> from pyro_ar.infer.divergence import DivergenceCheck
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

"""Deprecated: the Bayesian linear classifier moved to :mod:`pyro_ar.models.bayesian_linear`
and its guide and posterior predictive to :mod:`pyro_ar.infer.posterior`; ``fit`` is
superseded by :func:`pyro_ar.infer.train`. These aliases will be removed in the next release."""

import warnings

from ..models.bayesian_linear import BayesianLinearClassifier, class_positions
from . import posterior
from .loop import Callback, IterateAverage, train
from .posterior import *  # noqa: F401,F403

__all__ = ["BayesianLinearClassifier", "class_positions", "fit"] + posterior.__all__

warnings.warn("pyro_ar.infer.bayesian is deprecated: import BayesianLinearClassifier from "
              "pyro_ar.models and the rest from pyro_ar.infer", DeprecationWarning, stacklevel=2)


def fit(svi, *args, num_steps: int = 1000, scheduler=None, average_fraction: float = 0.0,
        summary_fn=None, callback=None, **kwargs):
    r"""Deprecated: :func:`pyro_ar.infer.train` with ``scheduler=`` and an
    :class:`~pyro_ar.infer.IterateAverage` callback does this; kept for one release.

    :param scheduler: a ``pyro.optim.PyroLRScheduler`` (e.g. the one inside ``svi``) whose
        ``step()`` is called after every SVI step.
    :param float average_fraction: average the posterior summary (``summary_fn()``, a dict
        of tensors such as :func:`posterior_summary` returns) over the last fraction of
        the steps (Polyak averaging; reduces the noise of the final estimate). The
        summary is O(K D) per step: use it for evaluation-size problems.
    :param callback: ``callback(step, loss)`` after every step.
    :returns: dict with ``losses`` (list) and ``average`` (dict of averaged tensors, or None).
    """
    callbacks = []
    average = None
    if not 0.0 <= average_fraction <= 1.0:
        raise ValueError(f"average_fraction must lie in [0, 1], got average_fraction={average_fraction!r}")
    if average_fraction > 0:
        average = IterateAverage(summary_fn, start_fraction=average_fraction)
        callbacks.append(average)
    if callback is not None:
        callbacks.append(_PerStep(callback))
    history = train(svi, *args, num_steps=num_steps, scheduler=scheduler, callbacks=callbacks,
                    log_every=1, eval_at_start=False, divergence=False, **kwargs)
    return {"losses": [r["loss"] for r in history if r["step"] > 0],
            "average": None if average is None else average.average}


class _PerStep(Callback):
    """``callback(step, loss)`` after every step (the old ``fit`` interface)."""

    def __init__(self, fn):
        self.fn = fn

    def on_record(self, record, state):
        if record["step"] > 0:
            self.fn(record["step"] - 1, record["loss"])

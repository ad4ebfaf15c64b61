r"""The schedule of the weight-pattern path (sparse inputs, many classes, a few rows each): a
step count set by a held-out split, and the fit moved back onto the centroids of all the rows.

The path's W starts at the scaled class centroids :math:`\mathrm{loc}` of the rows it trains
on (:func:`~pyro_ar.estimator._training_path.pattern_and_centroids`): an untrained scorer
that is already good (the tf-idf nearest centroid). Training may only add to it, so:

* the fit holds out ``validation_fraction`` of the rows (:func:`pattern_schedule`: always on
  this path, whatever ``early_stopping``), scores their log-likelihood at the start and
  :data:`PATTERN_EVALS_PER_EPOCH` times per epoch, stops after :data:`PATTERN_PATIENCE`
  scores without an improvement and keeps the best weights -- the starting point included,
  so the model returned is never worse on the held-out rows than the centroids it starts
  from; the number of steps is the validation's, at most ``PATTERN_MAX_EPOCHS`` epochs;
* the centroids of the training split miss the held-out rows, so at the end the fit is
  moved onto the centroids of all the rows (:func:`recentre`): with :math:`W^*` the kept
  weights on the split's pattern :math:`P_{tr}` and :math:`\mathrm{loc}_{tr}` its centroids,

  .. math::  W = \mathrm{loc}_{all} + (W^* - \mathrm{loc}_{tr}) \text{ on } P_{tr},
             \qquad W = \mathrm{loc}_{all} \text{ on } P_{all} \setminus P_{tr}

  (what the training learned is the residual :math:`W^* - \mathrm{loc}_{tr}` and the bias;
  the held-out rows then count in the centroids as in the untrained scorer's).
"""

from typing import NamedTuple

import numpy as np
import torch

__all__ = ["PATTERN_EVALS_PER_EPOCH", "PATTERN_PATIENCE", "PatternSchedule", "pattern_schedule", "recentre"]

#: held-out scores per epoch on the weight-pattern path (and one at the start)
PATTERN_EVALS_PER_EPOCH = 4
#: scores without an improvement before the weight-pattern path stops
PATTERN_PATIENCE = 2


class PatternSchedule(NamedTuple):
    """How a fit evaluates its held-out rows: every ``eval_every`` steps, at the start or not,
    stopping after ``patience`` scores without an improvement."""

    eval_every: int
    eval_at_start: bool
    patience: int


def pattern_schedule(weight_pattern: bool, steps_per_epoch: int, patience: int) -> PatternSchedule:
    """The evaluation schedule of a fit: the weight-pattern path's (:data:`PATTERN_EVALS_PER_EPOCH`
    scores per epoch, the start scored, :data:`PATTERN_PATIENCE`), else once per epoch with
    the estimator's ``patience`` (``n_iter_no_change``).

    Example:

    >>> from pyro_ar.estimator._pattern_fit import pattern_schedule
    >>> pattern_schedule(True, 66, 5), pattern_schedule(False, 66, 5)
    (PatternSchedule(eval_every=16, eval_at_start=True, patience=2), PatternSchedule(eval_every=66, eval_at_start=False, patience=5))
    """
    if not weight_pattern:
        return PatternSchedule(steps_per_epoch, False, patience)
    return PatternSchedule(max(1, steps_per_epoch // PATTERN_EVALS_PER_EPOCH), True, PATTERN_PATIENCE)


def recentre(state: dict, name: str, train_pattern, train_loc: torch.Tensor, pattern, loc: torch.Tensor) -> dict:
    r"""The param state ``state`` with its weights ``state["params"][name]`` (on
    ``train_pattern``, started at ``train_loc``) moved onto ``pattern`` (a superset of the
    entries) around ``loc``: :math:`\mathrm{loc} + (W - \mathrm{loc}_{tr})` on the training
    pattern's entries, ``loc`` on the others (the module docstring). O(nnz log nnz).

    Example:

    >>> import torch
    >>> from pyro_ar.weight_pattern import WeightPattern
    >>> from pyro_ar.estimator._pattern_fit import recentre
    >>> small, big = WeightPattern(torch.tensor([0, 3]), 2, 2), WeightPattern(torch.tensor([0, 1, 3]), 2, 2)
    >>> state = {"params": {"weight": torch.tensor([1.5, 2.0])}, "constraints": {}}
    >>> recentre(state, "weight", small, torch.tensor([1.0, 2.0]), big, torch.tensor([3.0, 4.0, 5.0]))["params"]["weight"].tolist()
    [3.5, 4.0, 5.0]
    """
    W = state["params"][name]
    k, j = train_pattern.coordinates()
    pos, hit = pattern.to(W.device).lookup(k.to(W.device), j.to(W.device))
    if not bool(hit.all()):
        raise ValueError("pattern must contain every entry of train_pattern (the pattern of all the "
                         "rows holds the training split's)")
    new = loc.to(W).clone()
    new[pos] += (W.detach() - train_loc.to(W)).to(new)
    params = dict(state["params"])
    params[name] = new
    return {**state, "params": params}


"""The estimator's hyper-parameters: their checks (:func:`checked`, once per ``fit``) and the
keywords of earlier versions (:data:`REMOVED`: a clear error naming the replacement;
:func:`pyro_ar.estimator.params_from_plain` translates them)."""

import numbers

import numpy as np
import torch

from ..infer.selection import Weights, early_stopping_options, likelihood_spec, weight_strategy
from ..numerics import check_float, check_int

#: keywords of earlier versions -> what replaced them
REMOVED = {
    "noise": "likelihood=pyro_ar.likelihoods.AR(noise, negatives=num_negatives) (or Exact(noise))",
    "num_negatives": "likelihood=pyro_ar.likelihoods.AR(noise, negatives=num_negatives)",
    "strategy": "likelihood=pyro_ar.likelihoods.AR(noise, negatives=pyro_ar.negatives.get_negative_sampler("
                "strategy, num_negatives))",
    "prior_scale": "weights=pyro_ar.models.MAP(prior_scale) (or pyro_ar.estimator.Weights(kind, prior_scale=...) "
                   "for 'auto' or a list)",
    "rank": "weights=pyro_ar.estimator.Weights(kind, rank=...)",
    "num_posterior_samples": "weights=pyro_ar.estimator.Weights('bayes', num_posterior_samples=...)",
    "num_steps": "max_epochs=None, min_steps=num_steps (exactly min_steps SVI steps)",
    "validation_fraction": "early_stopping={'validation_fraction': ...}",
    "n_iter_no_change": "early_stopping={'n_iter_no_change': ...}",
    "tol": "early_stopping={'tol': ...}",
    "local_learning_rate": "nothing: local variational parameters step at the fixed LOCAL_LEARNING_RATE = 0.1",
    "class_weight": "fit(X, y, sample_weight=sklearn.utils.class_weight.compute_sample_weight(class_weight, y))",
}


def refuse_removed(names) -> None:
    """``TypeError`` naming the replacement of each keyword of :data:`REMOVED` in ``names``."""
    old = [n for n in names if n in REMOVED]
    if old:
        raise TypeError("ARClassifier no longer takes " + "; ".join(f"{n}= (use {REMOVED[n]})" for n in old))


def _device(device):
    try:
        out = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"device must be a torch device or its name, got {device!r}") from e
    if out.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available")
    return out


def seed_of(random_state) -> int:
    """The torch seed of a fit from ``random_state`` (an int: itself mod 2^32)."""
    from sklearn.utils import check_random_state

    try:
        rs = check_random_state(random_state)
    except (ValueError, TypeError) as e:
        raise ValueError(f"random_state must be None, an int or a numpy RandomState, got "
                         f"{random_state!r}") from e
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state) % (2**32)
    return int(rs.randint(2**31 - 1))


def weights_of(weights) -> Weights:
    """``weights=`` checked (:meth:`~pyro_ar.infer.selection.Weights.checked`): a name, a model
    weight strategy (``MAP(0.1)``: ``Weights(MAP(0.1))``) or a :class:`~pyro_ar.infer.selection.Weights`."""
    if not isinstance(weights, Weights):
        weight_strategy(weights)  # (ValueError naming weights and the accepted forms)
        weights = Weights(weights)
    return weights.checked()


def checked(est):
    """``(weights, likelihood spec, device)`` of ``est``'s hyper-parameters, every one checked
    (``ValueError`` naming the argument)."""
    check_int("batch_size", est.batch_size, 1)
    check_int("max_epochs", est.max_epochs, 1, allow_none=True)
    check_int("min_steps", est.min_steps, 0 if est.max_epochs is not None else 1,
              what="" if est.max_epochs is not None else " (with max_epochs=None, the number of SVI steps)")
    check_float("learning_rate", est.learning_rate, low=0.0)
    early_stopping_options(est.early_stopping)
    for name in ("verbose", "standardize", "warm_start"):
        v = getattr(est, name)
        if not isinstance(v, (bool, np.bool_, numbers.Integral)):
            raise ValueError(f"{name} must be a bool, got {v!r}")
    return weights_of(est.weights), likelihood_spec(est.likelihood), _device(est.device)

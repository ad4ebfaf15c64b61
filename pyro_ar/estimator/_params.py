"""The estimator's hyper-parameters: their checks (:func:`checked`, once per ``fit``), the
early-stopping options (:func:`stopping`), and the keywords of earlier versions (:data:`REMOVED`:
a clear error naming the replacement; :func:`upgrade` reads the files they wrote)."""

import numbers

import numpy as np
import torch

from ..infer.selection import Weights, likelihood_spec
from ..likelihoods import AR, Exact
from ..negatives import DEFAULT_NUM_NEGATIVES, get_negative_sampler
from ..noise import get_noise
from ..numerics import check_float, check_int

#: ``early_stopping=True`` (or a dict of some of these, the rest at their defaults): hold out
#: ``validation_fraction`` of the rows, stop after ``n_iter_no_change`` epochs without an
#: improvement of ``tol`` nats per held-out datapoint (the fraction also sets the prior-scale
#: search's and the weight-pattern path's held-out rows when early stopping is off)
STOPPING = {"validation_fraction": 0.1, "n_iter_no_change": 5, "tol": 1e-4}

#: keywords of earlier versions -> what replaced them
REMOVED = {
    "noise": "likelihood=pyro_ar.likelihoods.AR(noise, num_negatives) (or Exact(noise))",
    "num_negatives": "likelihood=pyro_ar.likelihoods.AR(noise, num_negatives)",
    "strategy": "likelihood=pyro_ar.likelihoods.AR(noise, pyro_ar.negatives.get_negative_sampler(strategy, "
                "num_negatives))",
    "prior_scale": "weights=pyro_ar.estimator.Weights(kind, prior_scale=...)",
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
    """``weights=`` (a kind or a :class:`~pyro_ar.infer.selection.Weights`) checked."""
    if isinstance(weights, str):
        weights = Weights(weights)
    if not isinstance(weights, Weights):
        raise ValueError(f"weights must be 'mle', 'map', 'bayes' or a pyro_ar.estimator.Weights, got {weights!r}")
    return weights.checked()


def stopping(early_stopping):
    """``(on, validation_fraction, n_iter_no_change, tol)`` of ``early_stopping=`` (a bool, or a
    dict of some of :data:`STOPPING`: on), checked."""
    if isinstance(early_stopping, dict):
        unknown = sorted(set(early_stopping) - set(STOPPING))
        if unknown:
            raise ValueError(f"early_stopping takes the keys {list(STOPPING)}, got {unknown}")
        on, options = True, {**STOPPING, **early_stopping}
    elif isinstance(early_stopping, (bool, np.bool_)):
        on, options = bool(early_stopping), STOPPING
    else:
        raise ValueError(f"early_stopping must be a bool or a dict of {list(STOPPING)}, got {early_stopping!r}")
    return (on, check_float("early_stopping['validation_fraction']", options["validation_fraction"], 0.0, 1.0),
            check_int("early_stopping['n_iter_no_change']", options["n_iter_no_change"], 1),
            check_float("early_stopping['tol']", options["tol"], low=0.0, low_open=False))


def checked(est):
    """``(weights, likelihood spec, device)`` of ``est``'s hyper-parameters, every one checked
    (``ValueError`` naming the argument)."""
    check_int("batch_size", est.batch_size, 1)
    check_int("max_epochs", est.max_epochs, 1, allow_none=True)
    check_int("min_steps", est.min_steps, 0 if est.max_epochs is not None else 1,
              what="" if est.max_epochs is not None else " (with max_epochs=None, the number of SVI steps)")
    check_float("learning_rate", est.learning_rate, low=0.0)
    stopping(est.early_stopping)
    for name in ("verbose", "standardize", "warm_start"):
        v = getattr(est, name)
        if not isinstance(v, (bool, np.bool_, numbers.Integral)):
            raise ValueError(f"{name} must be a bool, got {v!r}")
    return weights_of(est.weights), likelihood_spec(est.likelihood), _device(est.device)


def params_from_plain(params: dict) -> dict:
    """Hyper-parameters from plain data (JSON, a command line, the files of versions 1 to 4):
    the flat keywords of earlier versions (:data:`REMOVED`: ``noise``, ``num_negatives``,
    ``strategy``, ``prior_scale``, ``rank``, ``num_posterior_samples``, ``num_steps``, the early
    stopping options) become this version's ``likelihood``, ``weights``, ``max_epochs`` /
    ``min_steps`` and ``early_stopping``; ``class_weight`` and ``local_learning_rate``, which have
    no replacement here, raise ``TypeError``; the others pass through.

    Example:

    >>> from pyro_ar.estimator import params_from_plain
    >>> params_from_plain({"noise": "normal", "num_negatives": 5, "prior_scale": 1.0, "num_steps": 100})
    {'likelihood': AR(noise='normal', negatives=PerDatapointNegatives(num_negatives=5)), 'weights': Weights(prior_scale=1.0), 'max_epochs': None, 'min_steps': 100}
    """
    refuse_removed(k for k in ("class_weight", "local_learning_rate") if k in params)
    p = dict(params)
    noise, n, strategy = p.pop("noise", "gumbel"), p.pop("num_negatives", DEFAULT_NUM_NEGATIVES), \
        p.pop("strategy", "auto")
    if (get_noise(noise).name, n, strategy) != ("gumbel", DEFAULT_NUM_NEGATIVES, "auto"):
        mode = p.get("likelihood", "auto")
        p["likelihood"] = Exact(noise) if mode == "exact" else AR(noise, n if strategy in (
            "auto", "per_datapoint", "importance") else get_negative_sampler(strategy, n))
    kind, spec = p.pop("weights", "map"), [p.pop(k, d) for k, d in (("prior_scale", "auto"), ("rank", "auto"),
                                                                   ("num_posterior_samples", 32))]
    p["weights"] = kind if spec == ["auto", "auto", 32] else Weights(kind, *spec)
    if p.get("num_steps") is not None:
        p["max_epochs"], p["min_steps"] = None, p["num_steps"]
    p.pop("num_steps", None)
    changed = {k: p.pop(k) for k in STOPPING if k in p}
    changed = {k: v for k, v in changed.items() if v != STOPPING[k]}
    if p.get("early_stopping") and changed:
        p["early_stopping"] = changed
    return p

"""Saving and loading a fitted :class:`~pyro_ar.estimator.ARClassifier` (format version 2;
version 1 files are still read). Writes are atomic and reads are checked
(:mod:`pyro_ar.files`): a damaged, foreign or inconsistent file raises ``ValueError``."""

import numpy as np
import torch

from pyro.distributions import constraints as pyro_constraints

from ..files import atomic_save, load_payload
from ._support import (
    _FORMAT, _FORMAT_VERSION, _LIKELIHOODS, check_choice, constraint_name, copy_state, plain,
)

__all__ = ["save_estimator", "load_estimator"]


def save_estimator(est, path) -> None:
    """Write a fitted estimator to ``path`` atomically (see ``ARClassifier.save``).

    Example:

    >>> import os, tempfile, numpy as np
    >>> from pyro_ar import ARClassifier
    >>> from pyro_ar.estimator._files import load_estimator, save_estimator
    >>> X = np.random.RandomState(0).randn(60, 3)
    >>> clf = ARClassifier(min_steps=0, max_epochs=1).fit(X, X.argmax(1))
    >>> path = os.path.join(tempfile.mkdtemp(), "m.pt")
    >>> save_estimator(clf, path)
    >>> load_estimator(ARClassifier, path).classes_.tolist()
    [0, 1, 2]
    """
    state = copy_state(est.param_state_, "cpu")
    state["constraints"] = {n: constraint_name(c) for n, c in state["constraints"].items()}
    scaling = None if est.feature_mean_ is None else \
        [torch.as_tensor(est.feature_mean_), torch.as_tensor(est.feature_scale_)]
    atomic_save({
        "format": _FORMAT, "version": _FORMAT_VERSION,
        "hyperparameters": {k: plain(v) for k, v in est.get_params(deep=False).items()},
        "classes": [plain(c) for c in est.classes_.tolist()],
        "classes_dtype": est.classes_.dtype.str,
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": (None if not hasattr(est, "feature_names_in_")
                             else [str(f) for f in est.feature_names_in_]),
        "feature_scaling": scaling, "likelihood": est.likelihood_,  # (version 2)
        "param_state": state,
        "fit": {"n_iter_": est.n_iter_, "n_steps_": est.n_steps_,
                "n_steps_by_phase_": {k: int(v) for k, v in est.n_steps_by_phase_.items()},
                "loss_curve_": [float(v) for v in est.loss_curve_],
                "validation_scores_": (None if est.validation_scores_ is None
                                       else [float(v) for v in est.validation_scores_]),
                "best_validation_score_": est.best_validation_score_,
                "predict_seed": est._predict_seed},
    }, path)


def load_estimator(cls, path, map_location="cpu", weights_only=True):
    """Read an estimator of class ``cls`` from ``path`` (see ``ARClassifier.load``).

    Example:

    >>> from pyro_ar import ARClassifier
    >>> from pyro_ar.estimator._files import load_estimator
    >>> load_estimator(ARClassifier, "/nonexistent.pt")
    Traceback (most recent call last):
    ...
    ValueError: no file written by ARClassifier.save file at '/nonexistent.pt'
    """
    d = load_payload(path, _FORMAT, (1, _FORMAT_VERSION), ValueError, map_location,
                     "a file written by ARClassifier.save", weights_only)
    try:
        return _from_payload(cls, d)
    except (KeyError, TypeError, ValueError, IndexError) as e:
        raise ValueError(f"{str(path)!r} is not a valid ARClassifier file: "
                         f"{type(e).__name__}: {e}") from e


def _from_payload(cls, d):
    """An estimator from a checked payload (see :func:`load_estimator`)."""
    est = cls(**d["hyperparameters"])
    p = est._validated_params()
    classes = np.empty(len(d["classes"]), dtype=np.dtype(d["classes_dtype"]))
    for i, c in enumerate(d["classes"]):
        classes[i] = c
    est.classes_, est.n_features_in_ = classes, int(d["n_features_in"])
    if d["feature_names_in"] is not None:
        est.feature_names_in_ = np.asarray(d["feature_names_in"], dtype=object)
    scaling = d.get("feature_scaling")  # version 1 files: no standardisation
    est.feature_mean_, est.feature_scale_ = (None, None) if scaling is None else \
        (scaling[0].numpy(), scaling[1].numpy())
    est.likelihood_ = check_choice("likelihood", d.get("likelihood", "ar"), _LIKELIHOODS[1:])
    state = d["param_state"]
    state["constraints"] = {n: getattr(pyro_constraints, c) if isinstance(c, str) else c
                            for n, c in state["constraints"].items()}
    est.param_state_ = state
    fit = d["fit"]
    est.n_iter_, est.n_steps_ = fit["n_iter_"], fit["n_steps_"]
    # (files written before n_steps_by_phase_ counted the final fit's steps only)
    est.n_steps_by_phase_ = fit.get("n_steps_by_phase_",
                                    {"prior_scale_search": None, "final_fit": fit["n_steps_"]})
    est.loss_curve_, est.validation_scores_ = fit["loss_curve_"], fit["validation_scores_"]
    est.best_validation_score_ = fit["best_validation_score_"]
    est._predict_seed = fit["predict_seed"]
    _check_loaded_shapes(est, p)
    return est


def _check_loaded_shapes(est, p):
    """The stored parameters and scaling must fit the stored classes and features."""
    K, D = len(est.classes_), est.n_features_in_
    if K < 2:
        raise ValueError(f"the file holds {K} class(es); a classifier needs at least 2")
    for t in (est.feature_mean_, est.feature_scale_):
        if t is not None and t.shape != (D,):
            raise ValueError(f"feature scaling of shape {t.shape}, expected ({D},)")
    W, b, *E = (t[0] for t in est._weights(p, K, D))
    width = D if not E else E[0].shape[-1]  # (a rank: W = V E^T, V (K, r), E (D, r))
    if W.shape != (K, width) or b.shape != (K,) or (E and E[0].shape != (D, width)):
        raise ValueError(f"weights of shapes {[tuple(t.shape) for t in (W, b, *E)]}, expected "
                         f"({K}, {D}) and ({K},) for {K} classes and {D} features")

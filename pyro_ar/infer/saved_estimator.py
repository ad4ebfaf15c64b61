"""Saving and loading a fitted :class:`~pyro_ar.estimator.ARClassifier` (format version 6;
versions 1 to 5 are still read).

Writes are atomic and checksummed, reads are checked (:mod:`pyro_ar.files`): a damaged,
foreign or inconsistent file raises ``ValueError``.

Version 6 stores a model weight strategy given as ``weights=`` (``MAP(0.1)``, or the ``kind``
of a :class:`~pyro_ar.infer.selection.Weights`) as plain data; version 5 files, whose
``weights`` was a name or a ``Weights`` of a named kind, read as before.

Version 4 encodes the parameters' constraints with the codec checkpoints use
(:func:`pyro_ar.files.encode_constraint`: ``{"__constraint__": "positive"}``, or a class and
its attributes); versions 1 to 3 stored a bare name (``"positive"``), still read.

Version 3 also keeps what ``partial_fit`` and a ``warm_start`` fit continue from
(``training_path_``, ``n_partial_fits_``, ``prior_scale_``, ``prior_scale_scores_``); for
older files they are inferred from the stored weights and hyper-parameters."""

import io
import math
import numbers
import pickle

import numpy as np
import torch

from ..files import atomic_save, decode_constraint, encode_constraint, load_payload
from ..label_sets import FORMS
from ..likelihoods import AR, Exact
from ..negatives import DEFAULT_NUM_NEGATIVES, STRATEGIES, get_negative_sampler
from ..noise import get_noise
from ..numerics import check_choice
from ..training_path import TrainingPath
from .checkpoint import check_param_state
from .param_state import state_on
from ..models.weights import WEIGHTS, WeightStrategy
from .selection import STOPPING, Weights

__all__ = ["save_estimator", "load_estimator"]

_FORMAT = "pyro_ar.ARClassifier"
# 6: a model weight strategy (MLE(), MAP(...), Bayes(...)) as weights, alone or as a Weights'
# kind, stored as plain data ({"__strategy__": name, **its fields}); 5: the hyper-parameters of
# ARClassifier's 12-keyword constructor (likelihood and weights as plain data: _encode_param);
# 4: constraints by the shared codec; 3: checksum, training path, partial fits, prior scale;
# 2: standardisation and likelihood_; 1 to 5 are still read (the hyper-parameters of 1 to 4
# through params_from_plain)
_FORMAT_VERSION = 6


def _plain(v):
    """numpy scalars -> Python scalars (other values as they are: weights-only files)."""
    return v.item() if isinstance(v, np.generic) else v


def _encode_param(v):
    """A hyper-parameter as plain data: a :class:`~pyro_ar.infer.selection.Weights` as
    ``{"__weights__": its parameters}``, a model weight strategy (``MAP(0.1)``, alone or as a
    ``Weights``' kind) as ``{"__strategy__": "map", **its fields}``, an ``AR`` / ``Exact``
    likelihood of a named noise and negatives as
    ``{"__likelihood__": "ar", "noise": name, "negatives": [strategy, count]}`` (an importance
    sampler or a noise without a name of :func:`~pyro_ar.noise.get_noise` stays an object:
    such a file needs ``weights_only=False``)."""
    if isinstance(v, Weights):
        return {"__weights__": {k: _encode_param(x) if k == "kind" else _plain(x)
                                for k, x in v.get_params(deep=False).items()}}
    if isinstance(v, WeightStrategy) and type(v) is WEIGHTS.get(v.name):
        return {"__strategy__": v.name, **{k: _plain(x) for k, x in v.get_params().items()}}
    if isinstance(v, (AR, Exact)) and type(v) in (AR, Exact):
        name = getattr(v.noise, "name", None)
        named = isinstance(name, str) and repr(get_noise(name)) == repr(v.noise) if name else False
        sampler = v.sampler
        if named and (isinstance(v, Exact) or sampler.strategy in STRATEGIES and sampler.strategy != "importance"):
            out = {"__likelihood__": "exact" if isinstance(v, Exact) else "ar", "noise": name}
            if isinstance(v, AR):
                out["negatives"] = [sampler.strategy, sampler.num_negatives]
            return out
    return _plain(v)


def _decode_param(v):
    """The inverse of :func:`_encode_param`."""
    if isinstance(v, dict) and set(v) == {"__weights__"}:
        return Weights(**{k: _decode_param(x) for k, x in v["__weights__"].items()})
    if isinstance(v, dict) and "__strategy__" in v:
        return WEIGHTS[v["__strategy__"]](**{k: x for k, x in v.items() if k != "__strategy__"})
    if isinstance(v, dict) and "__likelihood__" in v:
        if v["__likelihood__"] == "exact":
            return Exact(v["noise"])
        strategy, count = v["negatives"]
        return AR(v["noise"], get_negative_sampler(strategy, count))
    return v


def _encoded(c, name):
    """A parameter's constraint for the file: :func:`~pyro_ar.files.encode_constraint`'s
    plain data, or the object itself (a constraint class from elsewhere: such a file needs
    ``weights_only=False``)."""
    try:
        return encode_constraint(c, f"parameter {name!r}")
    except TypeError:
        return c


#: the flat keywords without a replacement in the estimator's parameters
PLAIN_REMOVED = {"class_weight": "pass fit(X, y, sample_weight=sklearn.utils.class_weight.compute_sample_weight("
                                 "class_weight, y))",
                 "local_learning_rate": "local variational parameters step at the fixed LOCAL_LEARNING_RATE = 0.1"}


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
    for name in ("class_weight", "local_learning_rate"):
        if name in params:
            raise TypeError(f"ARClassifier no longer takes {name}= ({PLAIN_REMOVED[name]})")
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


def save_estimator(est, path, weights_only: bool = True) -> None:
    """Write a fitted estimator to ``path`` atomically (see ``ARClassifier.save``); with
    ``weights_only`` refuse, before writing, anything ``torch.load(weights_only=True)``
    would not read back (e.g. labels that are arbitrary Python objects), naming it.

    Example:

    >>> import os, tempfile, numpy as np
    >>> from pyro_ar import ARClassifier
    >>> from pyro_ar.infer.saved_estimator import load_estimator, save_estimator
    >>> X = np.random.RandomState(0).randn(60, 3)
    >>> clf = ARClassifier(min_steps=0, max_epochs=1).fit(X, X.argmax(1))
    >>> path = os.path.join(tempfile.mkdtemp(), "m.pt")
    >>> save_estimator(clf, path)
    >>> load_estimator(ARClassifier, path).classes_.tolist()
    [0, 1, 2]
    """
    state = state_on(est.param_state_, "cpu")
    state["constraints"] = {n: _encoded(c, n) for n, c in state["constraints"].items()}
    scaling = None if est.feature_mean_ is None else \
        [torch.as_tensor(est.feature_mean_), torch.as_tensor(est.feature_scale_)]
    payload = {
        "format": _FORMAT, "version": _FORMAT_VERSION,
        "hyperparameters": {k: _encode_param(v) for k, v in est.get_params(deep=False).items()},
        "classes": [_plain(c) for c in est.classes_.tolist()],
        "classes_dtype": est.classes_.dtype.str,
        "n_features_in": int(est.n_features_in_),
        "feature_names_in": (None if not hasattr(est, "feature_names_in_")
                             else [str(f) for f in est.feature_names_in_]),
        "feature_scaling": scaling, "likelihood": est.likelihood_,  # (version 2)
        "row_normalize": bool(getattr(est, "row_normalize_", False)),  # (version 3, the pattern path)
        "multilabel": (None if not getattr(est, "multilabel_", False)  # (label sets: their form, labels per row)
                       else [est._target_form, float(est.labels_per_row_)]),
        "weight_pattern": None if getattr(est, "weight_pattern_", None) is None else
        [est.weight_pattern_.keys.cpu(), est.weight_loc_.cpu()],
        "param_state": state,
        "fit": {"n_iter_": est.n_iter_, "n_steps_": est.n_steps_,
                "n_steps_by_phase_": {k: int(v) for k, v in est.n_steps_by_phase_.items()},
                "loss_curve_": [float(v) for v in est.loss_curve_],
                "validation_scores_": (None if est.validation_scores_ is None
                                       else [float(v) for v in est.validation_scores_]),
                "best_validation_score_": est.best_validation_score_,
                "predict_seed": est._predict_seed,
                "training_path_": list(est.training_path_),  # (version 3)
                "n_partial_fits_": int(est.n_partial_fits_),
                "prior_scale_": getattr(est, "prior_scale_", None),
                "prior_scale_scores_": (None if getattr(est, "prior_scale_scores_", None) is None
                                        else [[float(k), float(v)] for k, v in est.prior_scale_scores_.items()])},
    }
    if weights_only:
        _check_weights_only(payload)
    atomic_save(payload, path)


def _weights_only_loadable(obj) -> bool:
    buffer = io.BytesIO()
    try:
        torch.save(obj, buffer)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    buffer.seek(0)
    try:
        torch.load(buffer, weights_only=True)
    except pickle.UnpicklingError:
        return False
    return True


def _check_weights_only(payload) -> None:
    """Raise ``ValueError`` naming what in ``payload`` (tensors aside) would need
    ``weights_only=False`` to load."""
    skeleton = dict(payload, param_state=dict(payload["param_state"], params={}), feature_scaling=None)
    if _weights_only_loadable(skeleton):
        return
    bad = [c for c in payload["classes"] if not _weights_only_loadable(c)]
    if bad:
        raise ValueError(
            f"cannot save: {len(bad)} of the {len(payload['classes'])} labels (classes_) are Python "
            f"objects that ARClassifier.load(path) could not read back with weights_only=True, e.g. "
            f"{', '.join(repr(c) for c in bad[:3])}; fit with plain labels (numbers or strings), or "
            f"save(path, weights_only=False) and load(path, weights_only=False) for trusted files")
    parts = {**{f"hyper-parameter {k}": v for k, v in payload["hyperparameters"].items()},
             **{f"the constraint of {k}": v for k, v in payload["param_state"]["constraints"].items()}}
    bad = [name for name, value in parts.items() if not _weights_only_loadable(value)] or ["(unknown)"]
    raise ValueError(f"cannot save: {', '.join(bad)} would not load back with weights_only=True; use "
                     f"save(path, weights_only=False) and load(path, weights_only=False) for trusted files")


def load_estimator(cls, path, map_location="cpu", weights_only=True):
    """Read an estimator of class ``cls`` from ``path`` (see ``ARClassifier.load``).

    Example:

    >>> from pyro_ar import ARClassifier
    >>> from pyro_ar.infer.saved_estimator import load_estimator
    >>> load_estimator(ARClassifier, "/nonexistent.pt")
    Traceback (most recent call last):
    ...
    ValueError: no file written by ARClassifier.save file at '/nonexistent.pt'
    """
    d = load_payload(path, _FORMAT, (1, 2, 3, 4, 5, _FORMAT_VERSION), ValueError, map_location,
                     "a file written by ARClassifier.save", weights_only, checksum_since=3)
    try:
        return _from_payload(cls, d)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
        raise ValueError(f"{str(path)!r} is not a valid ARClassifier file: "
                         f"{type(e).__name__}: {e}") from e


def _from_payload(cls, d):
    """An estimator from a checked payload (see :func:`load_estimator`)."""
    if not isinstance(d["hyperparameters"], dict):
        raise ValueError(f"hyperparameters must be a dict, got {type(d['hyperparameters']).__name__}")
    params = {k: _decode_param(v) for k, v in d["hyperparameters"].items()}
    if d["version"] < 5:  # (the keywords of earlier constructors; class_weight and local_learning_rate
        params = params_from_plain(  # acted on the fit that wrote the file)
            {k: v for k, v in params.items() if k not in ("class_weight", "local_learning_rate")})
    missing = set(cls().get_params(deep=False)) - set(params)
    if missing and d["version"] >= 3:
        raise ValueError(f"hyperparameters lacks {sorted(missing)}")
    est = cls(**params)
    weights, spec, _ = est._checked_params()
    for name in ("standardize", "warm_start"):
        if not isinstance(getattr(est, name), (bool, np.bool_)):
            raise ValueError(f"{name} must be a bool, got {getattr(est, name)!r}")
    if not (est.random_state is None or isinstance(est.random_state, (numbers.Integral, np.random.RandomState))
            and not isinstance(est.random_state, bool)):
        raise ValueError(f"random_state must be None, an int or a numpy RandomState, got {est.random_state!r}")
    est.classes_ = _classes(d["classes"], d["classes_dtype"])
    est.n_features_in_ = _count("n_features_in", d["n_features_in"], 1)
    names = d["feature_names_in"]
    if names is not None:
        if not (isinstance(names, list) and len(names) == est.n_features_in_
                and all(isinstance(n, str) for n in names)):
            raise ValueError(f"feature_names_in must be None or {est.n_features_in_} strings, got {names!r}")
        est.feature_names_in_ = np.asarray(names, dtype=object)
    scaling = d.get("feature_scaling")  # version 1 files: no standardisation
    if scaling is None and est.standardize and d["version"] >= 2:
        raise ValueError("feature_scaling is missing, but the estimator standardizes its features")
    if scaling is not None and not (isinstance(scaling, list) and len(scaling) == 2 and all(
            isinstance(t, torch.Tensor) and t.is_floating_point() and bool(torch.isfinite(t).all())
            for t in scaling) and bool((scaling[1] > 0).all())):
        raise ValueError("feature_scaling must be [mean, scale]: finite floating-point tensors, scale > 0")
    est.feature_mean_, est.feature_scale_ = (None, None) if scaling is None else \
        (scaling[0].numpy(), scaling[1].numpy())
    est.likelihood_ = check_choice("likelihood", d.get("likelihood", "ar"), ("ar", "exact"))
    _set_multilabel(est, d.get("multilabel"))
    state = d["param_state"]
    check_param_state(state, "param_state")
    state["constraints"] = {n: decode_constraint(c, f"parameter {n!r}") for n, c in state["constraints"].items()}
    est.param_state_ = state
    fit = d["fit"]
    _check_fit_record(fit)
    est.n_iter_, est.n_steps_ = fit["n_iter_"], fit["n_steps_"]
    # (files written before n_steps_by_phase_ counted the final fit's steps only)
    phases = fit.get("n_steps_by_phase_", {"prior_scale_search": None, "final_fit": fit["n_steps_"]})
    if "n_steps_by_phase_" in fit and not (
            isinstance(phases, dict) and set(phases) == {"prior_scale_search", "final_fit"}
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in phases.values())):
        raise ValueError(f"n_steps_by_phase_ must map 'prior_scale_search' and 'final_fit' to ints >= 0, "
                         f"got {phases!r}")
    est.n_steps_by_phase_ = phases
    est.loss_curve_, est.validation_scores_ = fit["loss_curve_"], fit["validation_scores_"]
    est.best_validation_score_ = fit["best_validation_score_"]
    est._predict_seed = fit["predict_seed"]
    _set_weight_pattern(est, d)
    _check_loaded_shapes(est)
    _set_continuation(est, d, weights, spec)
    return est


def _set_weight_pattern(est, d):
    """``row_normalize_``, ``weight_pattern_`` and ``weight_loc_`` (the weight-pattern path;
    absent from older files: off); ``centroid_start_`` None (the start is not saved: only a
    fresh fit uses it)."""
    from ..weight_pattern import WeightPattern

    est.row_normalize_ = d.get("row_normalize", False)
    if not isinstance(est.row_normalize_, bool):
        raise ValueError(f"row_normalize must be a bool, got {est.row_normalize_!r}")
    stored = d.get("weight_pattern")
    est.weight_pattern_ = est.weight_loc_ = est.centroid_start_ = None
    if stored is None:
        return
    if not (isinstance(stored, list) and len(stored) == 2 and all(isinstance(t, torch.Tensor) for t in stored)
            and stored[0].dtype == torch.int64 and stored[1].shape == stored[0].shape
            and stored[1].is_floating_point() and bool(torch.isfinite(stored[1]).all())):
        raise ValueError("weight_pattern must be [keys (int64), loc (finite floats of the same shape)]")
    est.weight_pattern_ = WeightPattern(stored[0], len(est.classes_), est.n_features_in_)
    est.weight_loc_ = stored[1]


def _count(name, v, low=0):
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{name} must be an int >= {low}, got {v!r}")
    return v


def _number(name, v, allow_none=False):
    if v is None and allow_none:
        return v
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(f"{name} must be a finite number{' or None' if allow_none else ''}, got {v!r}")
    return float(v)


def _classes(values, dtype):
    """The labels as saved (``classes_dtype`` a numpy dtype string; every label representable
    in it exactly, no label twice)."""
    if not isinstance(dtype, str) or not isinstance(values, list):
        raise ValueError(f"classes must be a list and classes_dtype a numpy dtype string, got "
                         f"{type(values).__name__} and {dtype!r}")
    try:
        classes = np.empty(len(values), dtype=np.dtype(dtype))
        for i, c in enumerate(values):
            classes[i] = c
    except (TypeError, ValueError) as e:
        raise ValueError(f"the labels do not fit classes_dtype={dtype!r}: {e}") from e
    bad = [c for c, stored in zip(values, classes.tolist()) if type(c) is not type(stored) or c != stored]
    if bad:
        raise ValueError(f"the labels {bad[:3]!r} do not fit classes_dtype={dtype!r}")
    if len(set(values)) != len(values):
        raise ValueError("classes holds a label twice")
    return classes


def _check_fit_record(fit):
    """The record of the fit: counts, scores and the prediction seed, each of its type."""
    if not isinstance(fit, dict):
        raise ValueError(f"fit must be a dict, got {type(fit).__name__}")
    _count("n_iter_", fit["n_iter_"]), _count("n_steps_", fit["n_steps_"])
    for name in ("loss_curve_", "validation_scores_"):
        v = fit[name]
        if not (isinstance(v, list) or v is None and name == "validation_scores_"):
            raise ValueError(f"{name} must be a list of numbers, got {v!r}")
        for x in v or ():  # (a fit's losses and scores are finite: train() stops on a non-finite loss)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
                raise ValueError(f"{name} must be a list of finite numbers, got an entry {x!r}")
    best = fit["best_validation_score_"]
    if not (best is None or isinstance(best, float) and math.isfinite(best)):
        raise ValueError(f"best_validation_score_ must be a finite number or None, got {best!r}")
    seed = fit["predict_seed"]
    if seed is not None:
        _count("predict_seed", seed)


def _set_multilabel(est, stored) -> None:
    """``multilabel_``, ``labels_per_row_`` and the targets' form: stored as None (one label
    per row; files before label sets) or ``[form, labels per row]``."""
    if stored is None:
        est.multilabel_, est.labels_per_row_, est._target_form = False, None, None
        return
    if not (isinstance(stored, list) and len(stored) == 2 and stored[0] in FORMS
            and isinstance(stored[1], float) and math.isfinite(stored[1]) and stored[1] >= 1):
        raise ValueError(f"multilabel must be None or [form (one of {list(FORMS)}), labels per row (a "
                         f"number >= 1)], got {stored!r}")
    est.multilabel_, est._target_form, est.labels_per_row_ = True, stored[0], stored[1]


def _set_continuation(est, d, weights, spec):
    """``training_path_``, ``n_partial_fits_``, ``prior_scale_(scores_)``: stored (version 3),
    else inferred (the rank from the weights, sparse inputs from the sparse path's one
    shared feature scale, the strategy from the hyper-parameter)."""
    fit = d["fit"]
    if "training_path_" in fit:
        if not (isinstance(fit["training_path_"], list) and len(fit["training_path_"]) in (3, 4)):
            raise ValueError(f"training_path_ must be [bool, rank (int >= 1 or None), strategy, "
                             f"weight pattern (bool)], got {fit['training_path_']!r}")
        sparse_inputs, rank, strategy, *pattern = fit["training_path_"]
        est.n_partial_fits_ = _count("n_partial_fits_", fit["n_partial_fits_"])
        est.prior_scale_ = _number("prior_scale_", fit["prior_scale_"], allow_none=True)
        if (est.prior_scale_ is None) != (weights.kind == "mle") or (est.prior_scale_ or 1.0) <= 0:
            raise ValueError(f"prior_scale_ must be None for weights='mle' and a number > 0 otherwise, got "
                             f"{fit['prior_scale_']!r} with weights={weights.kind!r}")
        scores = fit["prior_scale_scores_"]
        if not (scores is None or isinstance(scores, list) and all(
                isinstance(pair, list) and len(pair) == 2 for pair in scores)):
            raise ValueError(f"prior_scale_scores_ must be None or a list of [scale, score], got {scores!r}")
        est.prior_scale_scores_ = None if scores is None else {
            _number("prior_scale_scores_ scale", k): _number("prior_scale_scores_ score", v) for k, v in scores}
    else:
        W, _, *E = est._fitted_weights()
        rank = E[0].shape[-1] if E else None
        scale = est.feature_scale_
        sparse_inputs = bool(scale is not None and not est.feature_mean_.any() and len(scale) > 1
                             and (scale == scale[0]).all())
        strategy = "per_datapoint" if spec.strategy == "auto" else spec.strategy
        grid = weights.prior_scale
        est.n_partial_fits_, est.prior_scale_scores_ = 0, None
        est.prior_scale_ = None if weights.kind == "mle" else (grid if not isinstance(grid, tuple)
                                                                 else (1.0 if 1.0 in grid else grid[len(grid) // 2]))
    check_choice("training_path_ strategy", strategy, tuple(STRATEGIES))
    if not isinstance(sparse_inputs, bool) or not (rank is None or isinstance(rank, int)
                                                    and not isinstance(rank, bool) and rank >= 1):
        raise ValueError(f"training_path_ must be [bool, rank (int >= 1 or None), strategy], got "
                         f"{[sparse_inputs, rank, strategy]!r}")
    if pattern and not isinstance(pattern[0], bool):
        raise ValueError(f"training_path_'s weight pattern must be a bool, got {pattern[0]!r}")
    pattern = bool(pattern and pattern[0]) if "training_path_" in fit else False
    if pattern != (est.weight_pattern_ is not None):
        raise ValueError("training_path_ says the weights live on a pattern, but weight_pattern "
                         "is missing (or the other way round)")
    est.training_path_ = TrainingPath(sparse_inputs, rank, strategy, pattern)


def _check_loaded_shapes(est):
    """The stored parameters and scaling must fit the stored classes and features."""
    K, D = len(est.classes_), est.n_features_in_
    if K < 2:
        raise ValueError(f"the file holds {K} class(es); a classifier needs at least 2")
    for t in (est.feature_mean_, est.feature_scale_):
        if t is not None and t.shape != (D,):
            raise ValueError(f"feature scaling of shape {t.shape}, expected ({D},)")
    try:
        fitted = est._fitted_weights()
    except ValueError as e:  # a stored parameter of another shape than the model's
        raise ValueError(f"weights that do not fit {K} classes and {D} features (expected "
                         f"({K}, {D}) and ({K},)): {e}") from None
    if est.weight_pattern_ is not None:  # W as a (K, D) sparse matrix on the pattern
        W, b = fitted
        if W.shape != (K, D) or b.shape != (1, K) or W._nnz() != len(est.weight_pattern_):
            raise ValueError(f"weights on the pattern must be {len(est.weight_pattern_)} entries of "
                             f"({K}, {D}) and a bias ({K},)")
        return
    W, b, *E = (t[0] for t in fitted)
    width = D if not E else E[0].shape[-1]  # (a rank: W = V E^T, V (K, r), E (D, r))
    if W.shape != (K, width) or b.shape != (K,) or (E and E[0].shape != (D, width)):
        raise ValueError(f"weights of shapes {[tuple(t.shape) for t in (W, b, *E)]}, expected "
                         f"({K}, {D}) and ({K},) for {K} classes and {D} features")

"""The estimator's Pyro pieces: its :class:`~pyro_ar.models.LinearClassifier`
(:func:`linear_model`) and, for a fit, the model, its guide and ``SVI`` (:func:`training_svi`), and
what a fit trains on and gives (:class:`FitData`, :class:`FitResult`)."""

from typing import NamedTuple, Optional

import numpy as np
import torch

from pyro.infer import SVI

from ..infer import ClosedFormELBO, default_guide, local_parameter_names
from ..likelihoods import DEFAULT, get_likelihood
from ..models import Init, LinearClassifier
from ..models.weights import get_weights
from ..optim import lazy_adam
from ._settings import _SITE


def linear_model(est, s, K, D, *, num_negatives=DEFAULT, strategy=DEFAULT, proposal=DEFAULT,
                 subsample_size=None, likelihood="ar", rank=None, bias_init=None, weight_loc=None):
    """The :class:`~pyro_ar.models.LinearClassifier` of the estimator ``est`` under its
    settings ``s`` (the bias unpenalised, like scikit-learn's intercept; W on
    ``est.weight_pattern_`` when it has one): the one place the estimator builds its model's
    likelihood, weight strategy and initialisation objects."""
    sparse = s.weights != "bayes"
    if likelihood == "exact":
        lik = get_likelihood("exact", s.noise)
    else:
        values = LinearClassifier.likelihood_shortcuts(likelihood, K)  # the model's defaults
        given = {"num_negatives": num_negatives, "strategy": strategy, "proposal": proposal}
        values.update({n: v for n, v in given.items() if v is not DEFAULT}, noise=s.noise)
        lik = get_likelihood(likelihood, **values, **({"sparse": sparse} if likelihood == "bouchard" else {}))
    prior_scale = s.prior_scale if not isinstance(s.prior_scale, tuple) else getattr(est, "prior_scale_", None) or 1.0
    weights = get_weights(s.weights).with_defaults(prior_scale=prior_scale, penalize_bias=False)
    return LinearClassifier(
        D, K, likelihood=lik, weights=weights, subsample_size=subsample_size, sparse=sparse,
        init=Init(bias=bias_init, weight=weight_loc), site=_SITE, rank=rank,
        weight_pattern=getattr(est, "weight_pattern_", None))


def training_svi(est, s, K, D, y, batch_size):
    """The model of a fit on the labels ``y``, its guide and ``SVI`` (lazy Adam; its own step
    size for local params; the training path ``est.training_path_``)."""
    proposal, counts, path = None, torch.bincount(y, minlength=K).double(), est.training_path_
    if s.strategy == "importance":  # training class frequencies ^ 0.75 (the authors')
        proposal = counts.clamp(min=1.0) ** 0.75
    log_freq = (counts + 1).log()  # sparse / low-rank paths (large K): b starts at the unigram
    # (on the pattern path only for skewed labels, where the negatives are importance
    # draws: with a few rows for every class the centroids rank the classes better alone)
    bias_init = (log_freq - log_freq.mean()).float() if (path.sparse_inputs or path.rank) \
        and (not path.weight_pattern or path.strategy == "importance") else None
    beta = getattr(est, "centroid_bias_", None) if path.weight_pattern else None
    if beta:  # the pattern path's start: beta log(1 + n_k) chosen on held-out rows (_pattern_fit.choose_bias)
        bias_init = (beta * (log_freq - log_freq.mean())).float()
    negatives = dict(num_negatives=None if s.num_negatives is None else min(s.num_negatives, K - 1),
                     strategy=s.strategy, proposal=proposal) if est.likelihood_ != "exact" else {}
    model = linear_model(est, s, K, D, **negatives, subsample_size=batch_size, likelihood=est.likelihood_,
                         rank=path.rank, bias_init=bias_init,
                         weight_loc=getattr(est, "weight_loc_", None) if path.weight_pattern else None)
    guide = default_guide(model, local_first=True)  # (ignored without a local latent)
    lr, local_lr = s.learning_rate, s.local_learning_rate
    is_local = local_parameter_names(guide)  # per-datapoint parameters: their own step size
    optim = lazy_adam(lambda name: {"lr": local_lr if is_local(name) else lr})
    return model, guide, SVI(model, guide, optim, ClosedFormELBO())


class FitData(NamedTuple):
    """What a fit trains on: the (scaled) features, the labels as class positions, the
    per-datapoint weights (None: all 1), the number of classes and of features; for label
    sets, the rows are (row, label) pairs and ``groups`` the row of each pair."""

    X: object
    codes: np.ndarray
    weights: Optional[np.ndarray]
    K: int
    D: int
    groups: Optional[np.ndarray] = None


class FitResult(NamedTuple):
    """What one SVI fit gives: the global parameters' state, its epochs and steps, the loss
    per epoch, the validation scores (None without a held-out split) and the best one."""

    state: dict
    n_iter: int
    n_steps: int
    loss_curve: list
    validation_scores: Optional[list]
    best_score: Optional[float]

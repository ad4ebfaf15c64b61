"""The estimator's Pyro pieces: its :class:`~pyro_ar.models.LinearClassifier`, built in one place
(:func:`linear_model`); for a fit, the model, its guide and ``SVI``
(:func:`training_svi`) and what a fit trains on and gives (:class:`FitData`, :class:`FitResult`);
for prediction, the fitted weights (:class:`Predictor`) and their utilities on new rows through
:func:`pyro_ar.evaluation.linear_source`."""

from typing import NamedTuple, Optional

import numpy as np
import torch

import pyro
from pyro.infer import SVI

from ..evaluation import linear_source
from ..features import feature_rows
from ..infer import ClosedFormELBO, default_guide, local_parameter_names
from ..infer.param_state import mean_field_draws, state_on
from ..label_sets import ChoiceSets
from ..likelihoods import Exact
from ..models import Init, LinearClassifier
from ..optim import lazy_adam

#: Adam's step size for per-datapoint variational parameters (local guides that keep some)
LOCAL_LEARNING_RATE = 0.1


def linear_model(est, weights, K, D, likelihood, prior_scale=1.0, *, subsample_size=None, rank=None,
                 bias_init=None, weight_loc=None):
    """The :class:`~pyro_ar.models.LinearClassifier` of the estimator ``est`` with the checked
    ``weights`` (:class:`~pyro_ar.infer.selection.Weights`) and the likelihood object (the bias
    unpenalised, like scikit-learn's intercept, unless the strategy says otherwise; W on
    ``est.weight_pattern_`` when it has one): the one place the estimator builds its model's
    weight strategy and initialisation."""
    strategy = weights.strategy.with_defaults(prior_scale=prior_scale, penalize_bias=False)
    return LinearClassifier(D, K, likelihood=likelihood, weights=strategy, subsample_size=subsample_size,
                            sparse=weights.kind != "bayes", init=Init(bias=bias_init, weight=weight_loc),
                            site="y", rank=rank, weight_pattern=getattr(est, "weight_pattern_", None))


def training_svi(est, weights, spec, K, D, y, batch_size, prior_scale, choice_sets=None, sample_weight=None):
    """The model of a fit on the labels ``y`` (weighted by ``sample_weight`` in the class counts
    of the bias's start and the negatives' proposal), its guide and ``SVI`` (lazy Adam; its own
    step size for local params; the training path ``est.training_path_``); with ``choice_sets``
    (label-set pairs, :func:`choice_sets_of`) the exact likelihood's softmax runs over each
    pair's choice set."""
    w = None if sample_weight is None else torch.as_tensor(sample_weight, dtype=torch.float64, device=y.device)
    counts, path = torch.bincount(y, w, minlength=K).double(), est.training_path_
    # sparse / low-rank paths (large K): b starts at the centred log-frequencies log(1 + n_k) -- the
    # Gumbel unigram fit; for other noises a start only (their exact unigram fit,
    # models.unigram_biases, runs a quadrature per class: minutes at K = 5,000 for Student-t) (on the
    # pattern path only for skewed labels, where the negatives are importance draws: with a few
    # rows for every class the centroids rank the classes better alone; or beta times it, beta
    # chosen on held-out rows, pattern_fit.choose_bias)
    beta = est._centroid_bias() if path.weight_pattern else None
    scale = beta or (1.0 if (path.sparse_inputs or path.rank) and
                     (not path.weight_pattern or path.strategy == "importance") else None)
    bias_init = None
    if scale:
        unigram = (counts + 1.0).log()
        bias_init = (scale * (unigram - unigram.mean())).float()
    likelihood = spec.likelihood(est.likelihood_, path.strategy, counts, choice_sets)
    model = linear_model(est, weights, K, D, likelihood, prior_scale, subsample_size=batch_size, rank=path.rank,
                         bias_init=bias_init, weight_loc=est.weight_loc_ if path.weight_pattern else None)
    guide = default_guide(model, local_first=True)  # (ignored without a local latent)
    lr, is_local = est.learning_rate, local_parameter_names(guide)  # per-datapoint parameters: their own step size
    optim = lazy_adam(lambda name: {"lr": LOCAL_LEARNING_RATE if is_local(name) else lr})
    return model, guide, SVI(model, guide, optim, ClosedFormELBO())


def choice_sets_of(est, data, idx, noise, device):
    r"""The :class:`~pyro_ar.label_sets.ChoiceSets` of the label-set pairs ``idx`` of ``data``
    where the fit of ``est`` trains on them (None otherwise: one label per row; A&R, whose
    negatives are drawn from all K classes, so its bound is the plain pick-all-labels softmax's;
    the weight pattern; a noise without a closed-form softmax)."""
    if data.groups is None or est.likelihood_ != "exact" or est.training_path_.weight_pattern \
            or not noise.closed_form:
        return None
    return ChoiceSets(data.groups[idx], data.codes[idx], data.K, device)


def fitted_weights(model, weights, seed, state=None):
    """(W (S, K, D), b (S, K)) in float64: the point weights of the live param store (S = 1) or
    ``weights.num_posterior_samples`` draws of the posterior q(W, b) that the param ``state``
    holds (:func:`~pyro_ar.infer.param_state.mean_field_draws`, under ``seed``); with a rank,
    (V (S, K, r), b (S, K), E (S, D, r)) (W = V E^T is never formed); on a weight pattern,
    (W (K, D) torch-sparse, b (1, K))."""
    names = list(model.parameter_shapes())
    if weights.kind == "bayes":
        draws = mean_field_draws(state, model.parameter_shapes(), weights.num_posterior_samples, seed)
        return tuple(draws[n] for n in names)
    fitted = model.fitted_parameters()
    if model.weight_pattern is not None:  # W as a (K, D) sparse matrix
        return model.weight_pattern.sparse(fitted["weight"].double()), fitted["bias"].double()[None]
    return tuple(fitted[n].double()[None] for n in names)


def utility_source(X, weights):
    """The :class:`~pyro_ar.evaluation.UtilitySource` of the rows of ``X`` (a dense array or
    scipy.sparse, fetched chunk by chunk by :func:`~pyro_ar.features.feature_rows`) under
    :func:`fitted_weights`' ``weights``: a point estimate (S = 1) as ``(B, K)`` utilities,
    posterior draws as ``(S, B, K)``."""
    W, b, *E = weights
    rows = feature_rows(X, W.device)
    if W.is_sparse:
        return linear_source(rows, W, b[0])
    if W.shape[0] == 1:
        W, b, E = W[0], b[0], [e[0] for e in E]
    return linear_source(rows, W, b, embedding=E[0] if E else None)


class Predictor:
    """The fitted model of an estimator, built once from its ``param_state_`` (the tensors moved
    to the device, not copied, when they are elsewhere), and its weights, reused by every
    prediction until the estimator is refitted or the hyper-parameters they depend on change
    (:attr:`key`)."""

    def __init__(self, est, weights, noise, device, seed):
        self.param_state, self.key = est.param_state_, (device, weights.kind, weights.num_posterior_samples)
        state = state_on(est.param_state_, device)
        rank = next((t.shape[-1] for n, t in state["params"].items()  # (from E's shape)
                     if n.rsplit(".", 1)[-1] == "embedding"), None)
        K, D = len(est.classes_), est.n_features_in_
        with pyro.get_param_store().scope(state_on(state)):
            model = linear_model(est, weights, K, D, Exact(noise), rank=rank)
            self.weights = fitted_weights(model, weights, seed, state)

    def serves(self, est, key) -> bool:
        """Whether this predictor holds ``est``'s current fit under the hyper-parameters ``key``."""
        return self.param_state is est.param_state_ and self.key == key

    def source(self, X):
        """The utilities of the rows of ``X`` (:func:`utility_source`)."""
        return utility_source(X, self.weights)


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

r"""The estimator's prediction path: its fitted model (and guide) built once
(:class:`Predictor`), the weights they hold (:func:`fitted_weights`), and their utilities
on new rows through :func:`pyro_ar.evaluation.linear_source` (:func:`utility_source`)."""

import torch

import pyro

from ..evaluation import linear_source
from ..files import preserved_rng
from ..infer import default_guide
from ..features import feature_rows
from ._model import linear_model
from ..infer.param_state import dummy_datapoint, state_on


def fitted_weights(model, guide, settings, seed):
    """(W (S, K, D), b (S, K)) in float64 from the live param store: the point weights
    (S = 1) or ``num_posterior_samples`` draws of q(W, b) under ``seed``; with a rank,
    (V (S, K, r), b (S, K), E (S, D, r)) (W = V E^T is never formed); on a weight pattern,
    (W (K, D) torch-sparse, b (1, K))."""
    names = list(model.parameter_shapes())
    if model.weight_pattern is not None:  # W as a (K, D) sparse matrix
        fitted = model.fitted_parameters()
        return model.weight_pattern.sparse(fitted["weight"].double()), fitted["bias"].double()[None]
    if settings.weights != "bayes":
        fitted = model.fitted_parameters()
        return tuple(fitted[n].double()[None] for n in names)
    draws, dummy = [], dummy_datapoint(model.num_features, settings.device)
    with torch.no_grad(), preserved_rng():
        torch.manual_seed(seed)
        for _ in range(settings.num_posterior_samples):
            s = guide[0](*dummy)  # the AutoNormal part: q(W, b)
            draws.append([s[n].double() for n in names])
    return tuple(torch.stack(d) for d in zip(*draws))


def utility_source(X, weights):
    """The :class:`~pyro_ar.evaluation.UtilitySource` of the rows of ``X`` (a dense array or
    scipy.sparse, fetched chunk by chunk by :func:`~pyro_ar.features.feature_rows`)
    under :func:`fitted_weights`' ``weights``: a point estimate (S = 1) as ``(B, K)``
    utilities, posterior draws as ``(S, B, K)``."""
    W, b, *E = weights
    rows = feature_rows(X, W.device)
    if W.is_sparse:
        return linear_source(rows, W, b[0])
    if W.shape[0] == 1:
        W, b, E = W[0], b[0], [e[0] for e in E]
    return linear_source(rows, W, b, embedding=E[0] if E else None)


class Predictor:
    """The fitted model and guide of an estimator, built once from its ``param_state_`` (the
    tensors moved to the device, not copied, when they are elsewhere) and reused by every
    prediction until the estimator is refitted or its relevant settings change
    (:meth:`serves`)."""

    def __init__(self, est, settings, num_classes, num_features):
        self.param_state, self.key = est.param_state_, self._key(est, settings)
        self.settings, self.num_classes = settings, num_classes
        self.state = state_on(est.param_state_, settings.device)
        rank = next((t.shape[-1] for n, t in self.state["params"].items()  # (from E's shape)
                     if n.rsplit(".", 1)[-1] == "embedding"), None)
        with pyro.get_param_store().scope(state_on(self.state)):
            self.model = linear_model(est, settings, num_classes, num_features, likelihood="exact", rank=rank)
            self.guide = default_guide(self.model)
            if settings.weights == "bayes":
                with torch.no_grad():  # set up the prototype trace on one dummy datapoint
                    self.guide(*dummy_datapoint(num_features, settings.device))

    @staticmethod
    def _key(est, settings):
        return settings.device, settings.weights, settings.num_posterior_samples

    def serves(self, est, settings) -> bool:
        """Whether this predictor holds ``est``'s current fit under ``settings``."""
        return self.param_state is est.param_state_ and self.key == self._key(est, settings)

    def weights(self, seed):
        """:func:`fitted_weights` of the fit (posterior draws under ``seed``)."""
        with pyro.get_param_store().scope(state_on(self.state)):
            return fitted_weights(self.model, self.guide, self.settings, seed)

    def source(self, X, seed):
        """The utilities of the rows of ``X`` (:func:`utility_source`)."""
        return utility_source(X, self.weights(seed))

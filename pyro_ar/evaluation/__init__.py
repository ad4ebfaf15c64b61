r"""Evaluation of fitted models: the predictive path and the ranking metrics.

Two modules, everything importable from the package (``from pyro_ar.evaluation import ...``):

* :mod:`~pyro_ar.evaluation.predictive` -- the one chunked evaluation path of utilities
  (point estimates or posterior draws): predictive log-likelihood, class probabilities,
  accuracy, top-k (:func:`evaluate`, :func:`log_likelihood`, :func:`predict_proba`,
  :func:`top_k`, ...);
* :mod:`~pyro_ar.evaluation.ranking` -- the extreme-classification metrics of ranked
  predictions against label sets: :func:`precision_at_k`, :func:`ndcg_at_k`,
  :func:`psp_at_k` with :func:`label_propensities`, and :func:`ranking_metrics`.
"""

from .predictive import (Chunk, UtilitySource, accuracy, evaluate, iter_chunks, linear_source, log_likelihood,
                         predict_log_proba, predict_proba, top_k, top_k_accuracy)
from .ranking import label_propensities, ndcg_at_k, precision_at_k, psp_at_k, ranking_metrics

__all__ = ["Chunk", "UtilitySource", "linear_source", "iter_chunks", "log_likelihood", "predict_log_proba",
           "predict_proba", "accuracy", "top_k_accuracy", "top_k", "evaluate",
           "precision_at_k", "ndcg_at_k", "psp_at_k", "label_propensities", "ranking_metrics"]

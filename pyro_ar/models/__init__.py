"""Categorical models: one base class (:class:`CategoricalModel`) owns the plumbing; each
model defines only how its utilities are computed.

====================================  ===========================================================
model                                 utilities
====================================  ===========================================================
:class:`LinearClassifier`             :math:`\\psi_n = W x_n + b`
:class:`BigramLanguageModel`          :math:`\\psi_k(u) = e_u\\cdot w_k + b_k` (previous word u)
:class:`BayesianLinearClassifier`     :math:`W x_n + b`, class-subsampled posterior over W, b
:class:`NeuralClassifier`             :math:`W g_\\phi(x_n) + b`, any network body :math:`g_\\phi`
====================================  ===========================================================
"""

from .base import CategoricalModel
from .bayesian_linear import BayesianLinearClassifier
from .bigram import BigramLanguageModel, unigram_log_probs
from .linear import LinearClassifier
from .neural import NeuralClassifier

__all__ = [
    "CategoricalModel",
    "LinearClassifier",
    "BigramLanguageModel",
    "BayesianLinearClassifier",
    "NeuralClassifier",
    "unigram_log_probs",
]

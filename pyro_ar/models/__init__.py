"""Categorical models: one base class (:class:`CategoricalModel`) owns the plumbing; each
model defines only how its utilities are computed.

====================================  ===========================================================
model                                 utilities
====================================  ===========================================================
:class:`LinearClassifier`             :math:`\\psi_n = W x_n + b`
:class:`BigramLanguageModel`          :math:`\\psi_k(u) = e_u\\cdot w_k + b_k` (previous word u)
:class:`BayesianLinearClassifier`     :math:`W x_n + b`, class-subsampled posterior over W, b
:class:`NeuralClassifier`             :math:`W g_\\phi(x_n) + b`, any network body :math:`g_\\phi`
:class:`CategoricalLatentModel`       :math:`\\Psi\\omega_u + \\rho`, a Gaussian latent per session u
:class:`CategoricalLatentGP`          :math:`f_{d,k}(x_n)`, sparse GPs of a latent per datapoint (CLGP)
====================================  ===========================================================
"""

from .base import CategoricalModel
from .bayesian_linear import BayesianLinearClassifier
from .bigram import BigramLanguageModel, unigram_log_probs
from .latent import CategoricalLatentModel, LatentGuide, LocalPosterior, SessionEncoder
from .latent_gp import CategoricalLatentGP
from .linear import LinearClassifier
from .neural import NeuralClassifier

__all__ = [
    "CategoricalModel",
    "LinearClassifier",
    "BigramLanguageModel",
    "BayesianLinearClassifier",
    "NeuralClassifier",
    "unigram_log_probs",
    "CategoricalLatentModel", "SessionEncoder", "LocalPosterior", "LatentGuide",
    "CategoricalLatentGP",
]

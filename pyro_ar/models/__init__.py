"""Categorical models: one base class (:class:`CategoricalModel`) owns the plumbing; each
model defines only how its utilities are computed. The models with a latent per datapoint
share :class:`LatentCategoricalModel` (the latent step; evaluation of held-out entries
given observed ones, with the same ``log_likelihood`` / ``evaluate``). Every model passes
:class:`pyro_ar.testing.ModelContract`.

====================================  ===========================================================
model                                 utilities
====================================  ===========================================================
:class:`LinearClassifier`             :math:`\\psi_n = W x_n + b`
:class:`BigramLanguageModel`          :math:`\\psi_k(u) = e_u\\cdot w_k + b_k` (previous word u)
:class:`BayesianLinearClassifier`     :math:`W x_n + b`, Bayesian W, b sampled on a class subsample
:class:`NeuralClassifier`             :math:`W g_\\phi(x_n) + b`, any network body :math:`g_\\phi`
:class:`BayesianNeuralClassifier`     :math:`W g_\\phi(x_n) + b`, the same after a network body
:class:`CategoricalLatentModel`       :math:`\\Psi\\omega_u + \\rho`, a Gaussian latent per session u
:class:`CategoricalLatentGP`          :math:`f_{d,k}(x_n)`, sparse GPs of a latent per datapoint (CLGP)
====================================  ===========================================================
"""

from .base import CategoricalModel
from .bayesian_linear import BayesianLinearClassifier
from .bigram import BigramLanguageModel, unigram_biases, unigram_log_probs
from .latent import CategoricalLatentModel, LatentCategoricalModel, LocalPosterior, SessionEncoder
from .latent_gp import CategoricalLatentGP, SparseGPMap
from .linear import LinearClassifier
from .neural import NeuralClassifier
from .neural_lm import NGramBody, context_windows
from .bayesian_neural import BayesianNeuralClassifier
from .weights import MAP, MLE, Bayes, GaussianWeights, Init, WeightStrategy

__all__ = [
    "CategoricalModel",
    "LinearClassifier",
    "BigramLanguageModel",
    "BayesianLinearClassifier",
    "NeuralClassifier", "NGramBody", "context_windows",
    "BayesianNeuralClassifier",
    "unigram_log_probs",
    "unigram_biases",
    "LatentCategoricalModel", "CategoricalLatentModel", "SessionEncoder", "LocalPosterior",
    "CategoricalLatentGP", "SparseGPMap",
    "WeightStrategy", "MLE", "MAP", "Bayes", "GaussianWeights", "Init",
]

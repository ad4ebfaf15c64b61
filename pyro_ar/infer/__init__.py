"""Inference for the augmented model: local guides, the closed-form softmax ELBO."""

from .elbo import ClosedFormELBO, GumbelExpectedFactor
from .local_guides import (
    AmortizedLocalGuide,
    GumbelLocalGuide,
    NoiseLocalGuide,
    hide_noise_sites,
    is_noise_site,
)
from .training import train

__all__ = [
    "ClosedFormELBO",
    "GumbelExpectedFactor",
    "GumbelLocalGuide",
    "NoiseLocalGuide",
    "AmortizedLocalGuide",
    "is_noise_site",
    "hide_noise_sites",
    "train",
]

# Bayesian weights at large K (class-subsampled mean-field posteriors)
from .bayesian import (  # noqa: E402
    BayesianLinearClassifier,
    ClassSubsampledNormal,
    posterior_summary,
    predictive_log_likelihood,
    predictive_probs,
    predictive_top_k,
)

__all__ += [
    "BayesianLinearClassifier",
    "ClassSubsampledNormal",
    "posterior_summary",
    "predictive_log_likelihood",
    "predictive_probs",
    "predictive_top_k",
]

"""Inference for the augmented model: local guides, the closed-form softmax ELBO."""

from .elbo import ClosedFormELBO, GumbelExpectedFactor
from .local_guides import (
    AmortizedLocalGuide,
    GumbelLocalGuide,
    NoiseLocalGuide,
    hide_noise_sites,
    is_noise_site,
)
from .train import (
    Callback,
    CheckpointError,
    DivergenceCheck,
    EarlyStopping,
    IterateAverage,
    TrainingDiverged,
    TrainState,
    load_checkpoint,
    save_checkpoint,
    train,
)

__all__ = [
    "ClosedFormELBO",
    "GumbelExpectedFactor",
    "GumbelLocalGuide",
    "NoiseLocalGuide",
    "AmortizedLocalGuide",
    "is_noise_site",
    "hide_noise_sites",
    "train",
    "TrainState",
    "Callback",
    "EarlyStopping",
    "IterateAverage",
    "DivergenceCheck",
    "TrainingDiverged",
    "CheckpointError",
    "save_checkpoint",
    "load_checkpoint",
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

"""Inference for the augmented model: local guides, ELBOs, the training loop, posteriors.

Inference knows models; models know no guides. :func:`default_guide` / :func:`default_elbo`
choose what goes with a model; :func:`train` is the one training loop (checkpoint/resume).
"""

from .checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from .drift import DriftCheck
from .options import TrainOptions
from .elbo import ClosedFormELBO
from .guides import default_elbo, default_guide, default_local_guide, empty_guide
from .latent import EXACT_COST_RATIO, LatentGuide, LatentKLWarmup
from . import local_guides
from .local_guides import *  # noqa: F401,F403  (its __all__)
from .loop import (
    Callback,
    DivergenceCheck,
    EarlyStopping,
    IterateAverage,
    LearningRateDecay,
    ResumeWarning,
    TrainingDiverged,
    TrainState,
    progress_bar,
    train,
)
from .posterior import (
    ClassSubsampledNormal,
    posterior_summary,
    predictive_log_likelihood,
    predictive_probs,
    predictive_top_k,
)

__all__ = local_guides.__all__ + [
    "ClosedFormELBO",
    "default_guide",
    "default_local_guide",
    "default_elbo",
    "empty_guide",
    "LatentGuide",
    "EXACT_COST_RATIO",
    "LatentKLWarmup",
    "train",
    "TrainOptions",
    "progress_bar",
    "TrainState",
    "Callback",
    "EarlyStopping",
    "IterateAverage",
    "LearningRateDecay",
    "DivergenceCheck",
    "DriftCheck",
    "TrainingDiverged",
    "ResumeWarning",
    "CheckpointError",
    "save_checkpoint",
    "load_checkpoint",
    "ClassSubsampledNormal",
    "posterior_summary",
    "predictive_log_likelihood",
    "predictive_probs",
    "predictive_top_k",
]


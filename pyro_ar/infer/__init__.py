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

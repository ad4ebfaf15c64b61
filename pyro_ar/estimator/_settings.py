"""The estimator's hyper-parameters, checked once and resolved (:func:`settings_of`) into a
frozen :class:`Settings` that fitting and prediction read (a bad value raises ``ValueError``
naming the argument)."""

import dataclasses
import numbers
from typing import Optional, Tuple, Union

import numpy as np
import torch

from ..models.base import WEIGHT_CHOICES
from ..negatives import STRATEGIES
from ..noise import Noise, get_noise
from ..numerics import check_int
from ..numerics import check_choice, check_float
from ..infer.selection import prior_scale_candidates

_STRATEGIES = ("auto",) + tuple(STRATEGIES)  # "auto": chosen from the data (choices.choose_path)
_LIKELIHOODS = ("auto", "ar", "exact")
_SITE = "y"  # the label site of LinearClassifier; its noise site is "y_eps"
_MAX_SEED = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Settings:
    """The checked hyper-parameters of an :class:`~pyro_ar.estimator.ARClassifier` (same
    names; ``noise`` a :class:`~pyro_ar.Noise`, ``device`` a ``torch.device``,
    ``prior_scale`` a number or the sorted candidates of a search, ``seed`` the torch seed
    of a fit, None outside one). Changed with ``dataclasses.replace``."""

    noise: Noise
    num_negatives: Optional[int]
    strategy: str
    weights: str
    prior_scale: Union[float, Tuple[float, ...]]
    batch_size: int
    max_epochs: int
    min_steps: int
    num_steps: Optional[int]
    learning_rate: float
    local_learning_rate: float
    num_posterior_samples: int
    validation_fraction: float
    n_iter_no_change: int
    tol: float
    device: torch.device
    likelihood: str
    rank: Union[str, int, None]
    seed: Optional[int] = None

    def replace(self, **changes) -> "Settings":
        return dataclasses.replace(self, **changes)


def _device(device):
    try:
        out = torch.device(device)
    except (RuntimeError, TypeError, ValueError) as e:
        raise ValueError(f"device must be a torch device or its name, got {device!r}") from e
    if out.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available")
    return out


def _seed(random_state) -> int:
    """The torch seed of a fit from ``random_state`` (an int: itself mod 2^32)."""
    from sklearn.utils import check_random_state

    try:
        rs = check_random_state(random_state)
    except (ValueError, TypeError) as e:
        raise ValueError(f"random_state must be None, an int or a numpy RandomState, got "
                         f"{random_state!r}") from e
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state) % (2**32)
    return int(rs.randint(_MAX_SEED))


def settings_of(est, fitting: bool = False) -> Settings:
    """The hyper-parameters of ``est`` checked (``ValueError`` naming the argument) and
    resolved; with ``fitting``, also the torch seed from ``random_state``."""
    settings = Settings(
        noise=get_noise(est.noise),  # the library's one table of names (NOISE_NAMES, NOISE_ALIASES)
        num_negatives=check_int("num_negatives", est.num_negatives, 1, allow_none=True),
        strategy=check_choice("strategy", est.strategy, _STRATEGIES),
        weights=check_choice("weights", est.weights, WEIGHT_CHOICES),
        prior_scale=prior_scale_candidates(est.prior_scale),
        batch_size=check_int("batch_size", est.batch_size, 1),
        max_epochs=check_int("max_epochs", est.max_epochs, 1),
        min_steps=check_int("min_steps", est.min_steps, 0),
        num_steps=check_int("num_steps", est.num_steps, 1, allow_none=True),
        learning_rate=check_float("learning_rate", est.learning_rate, low=0.0),
        local_learning_rate=check_float("local_learning_rate", est.local_learning_rate, low=0.0),
        num_posterior_samples=check_int("num_posterior_samples", est.num_posterior_samples, 1),
        validation_fraction=check_float("validation_fraction", est.validation_fraction, 0.0, 1.0),
        n_iter_no_change=check_int("n_iter_no_change", est.n_iter_no_change, 1),
        tol=check_float("tol", est.tol, low=0.0, low_open=False),
        device=_device(est.device),
        likelihood=check_choice("likelihood", est.likelihood, _LIKELIHOODS),
        rank=est.rank,
    )
    if not (est.rank is None or est.rank == "auto" or isinstance(est.rank, numbers.Integral)
            and not isinstance(est.rank, bool) and est.rank >= 1):
        raise ValueError(f"rank must be 'auto', None or an integer >= 1, got {est.rank!r}")
    if not (est.class_weight is None or est.class_weight == "balanced" or isinstance(est.class_weight, dict)):
        raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {est.class_weight!r}")
    if isinstance(est.class_weight, dict):
        if not est.class_weight:
            raise ValueError("class_weight={} weighs no class; pass None for equal weights, or a dict label -> weight")
        for label, weight in est.class_weight.items():
            check_float(f"class_weight[{label!r}]", weight, low=0.0, low_open=False)
    for name in ("early_stopping", "verbose", "standardize", "warm_start"):
        v = getattr(est, name)
        if not isinstance(v, (bool, np.bool_, numbers.Integral)):
            raise ValueError(f"{name} must be a bool, got {v!r}")
    return settings.replace(seed=_seed(est.random_state)) if fitting else settings

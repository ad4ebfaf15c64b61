"""pyro_ar: Augment & Reduce for categorical likelihoods with a huge number of classes.

The categorical :math:`y = \\arg\\max_k(\\psi_k + \\varepsilon_k)` is augmented with the
observed class's noise so that its log-joint becomes a sum over classes, which is then
subsampled inside stochastic variational inference (Ruiz, Titsias, Dieng, Blei, ICML 2018).
"""

from .distributions import AugmentedCategorical, NoiseDistribution, UtilityCategorical, sample_categorical
from .negatives import (
    ImportanceNegatives,
    Negatives,
    NegativeSampler,
    PerDatapointNegatives,
    SharedNegatives,
)
from .noise import (
    GumbelNoise,
    LaplaceNoise,
    LogisticNoise,
    Noise,
    NormalNoise,
    StudentTNoise,
    get_noise,
)
from .quadrature import log_marginal, log_marginal_all
from .utility import DenseUtility, LinearUtility, Utility, as_utility

from . import datasets, infer, metrics, models, optim  # noqa: E402  (subpackages)
from .models import LinearClassifier  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "AugmentedCategorical",
    "UtilityCategorical",
    "sample_categorical",
    "Noise",
    "GumbelNoise",
    "NormalNoise",
    "LogisticNoise",
    "LaplaceNoise",
    "StudentTNoise",
    "NoiseDistribution",
    "get_noise",
    "Utility",
    "DenseUtility",
    "LinearUtility",
    "as_utility",
    "Negatives",
    "NegativeSampler",
    "PerDatapointNegatives",
    "SharedNegatives",
    "ImportanceNegatives",
    "log_marginal",
    "log_marginal_all",
    "LinearClassifier",
    "ARClassifier",
]


def __getattr__(name):
    # the scikit-learn estimator is imported on first use, so that ``import pyro_ar`` does
    # not import scikit-learn
    if name == "ARClassifier":
        from .estimator import ARClassifier

        return ARClassifier
    raise AttributeError(f"module 'pyro_ar' has no attribute {name!r}")

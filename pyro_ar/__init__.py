"""pyro_ar: Augment & Reduce for categorical likelihoods with a huge number of classes.

The categorical :math:`y = \\arg\\max_k(\\psi_k + \\varepsilon_k)` is augmented with the
observed class's noise so that its log-joint becomes a sum over classes, which is then
subsampled inside stochastic variational inference (Ruiz, Titsias, Dieng, Blei, ICML 2018).

The package exports what the README and the tutorials use (everything else is imported from
its module, e.g. ``pyro_ar.noise.GumbelNoise``, ``pyro_ar.negatives.ImportanceNegatives``):

* distributions: ``UtilityCategorical``, ``AugmentedCategorical``, ``sample_categorical``;
  mean utilities: ``LinearUtility``;
* noises: ``Noise`` (the base class), ``get_noise``, ``StudentTNoise``, ``LaplaceNoise``;
* models and likelihoods: ``LinearClassifier``, ``AR``, ``Exact``, ``OVE``,
  ``SharedNegatives``; the scikit-learn estimator ``ARClassifier``;
* inference: ``default_guide``, ``default_elbo``, ``ClosedFormELBO``, ``train``,
  ``EarlyStopping``, ``lazy_adam``;
* evaluation and data: ``evaluate``, ``log_likelihood``, ``make_linear_teacher``.
"""

from . import negatives, noise, quadrature, utility
from .distributions import AugmentedCategorical, UtilityCategorical, sample_categorical
from .noise import LaplaceNoise, Noise, StudentTNoise, get_noise
from .utility import LinearUtility

from . import datasets, evaluation, infer, likelihoods, metrics, models, optim  # noqa: E402  (subpackages)
from .datasets import make_linear_teacher  # noqa: E402
from .evaluation import evaluate, log_likelihood  # noqa: E402
from .infer import ClosedFormELBO, EarlyStopping, default_elbo, default_guide, train  # noqa: E402
from .likelihoods import AR, OVE, Exact  # noqa: E402
from .models import LinearClassifier  # noqa: E402
from .negatives import SharedNegatives  # noqa: E402
from .optim import lazy_adam  # noqa: E402

__version__ = "0.2.0.dev0"

#: what ``from pyro_ar import *`` gives: the names the README and the tutorials import
__all__ = [
    "UtilityCategorical", "AugmentedCategorical", "sample_categorical", "LinearUtility",
    "Noise", "get_noise", "StudentTNoise", "LaplaceNoise",
    "LinearClassifier", "AR", "Exact", "OVE", "SharedNegatives", "ARClassifier",
    "default_guide", "default_elbo", "ClosedFormELBO", "train", "EarlyStopping", "lazy_adam",
    "evaluate", "log_likelihood", "make_linear_teacher",
]


def __getattr__(name):
    # the scikit-learn estimator is imported on first use, so that ``import pyro_ar`` does
    # not import scikit-learn
    if name == "ARClassifier":
        from .estimator import ARClassifier

        return ARClassifier
    raise AttributeError(f"module 'pyro_ar' has no attribute {name!r}")

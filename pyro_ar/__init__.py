"""pyro_ar: Augment & Reduce for categorical likelihoods with a huge number of classes.

The categorical :math:`y = \\arg\\max_k(\\psi_k + \\varepsilon_k)` is augmented with the
observed class's noise so that its log-joint becomes a sum over classes, which is then
subsampled inside stochastic variational inference (Ruiz, Titsias, Dieng, Blei, ICML 2018).
"""

from . import negatives, noise, quadrature, utility
from .distributions import AugmentedCategorical, UtilityCategorical, sample_categorical
from .negatives import *  # noqa: F401,F403  (the ground modules' __all__)
from .noise import *  # noqa: F401,F403
from .quadrature import *  # noqa: F401,F403
from .utility import *  # noqa: F401,F403

from . import datasets, infer, metrics, models, optim  # noqa: E402  (subpackages)
from .models import LinearClassifier  # noqa: E402

__version__ = "0.2.0.dev0"

__all__ = (["AugmentedCategorical", "UtilityCategorical", "sample_categorical", "LinearClassifier",
            "ARClassifier"]
           + [n for m in (noise, utility, negatives, quadrature) for n in m.__all__])


def __getattr__(name):
    # the scikit-learn estimator is imported on first use, so that ``import pyro_ar`` does
    # not import scikit-learn
    if name == "ARClassifier":
        from .estimator import ARClassifier

        return ARClassifier
    raise AttributeError(f"module 'pyro_ar' has no attribute {name!r}")

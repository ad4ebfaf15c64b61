"""Deprecated: the baselines and bounds moved to :mod:`pyro_ar.distributions`.

``from pyro_ar.bounds import X`` keeps working for one release (with a
``DeprecationWarning``); import from :mod:`pyro_ar.distributions` instead. The string
registry :data:`LIKELIHOODS` / :func:`get_likelihood` lives here only for this shim: the
likelihood objects of :mod:`pyro_ar.likelihoods` replace it.
"""

import warnings

from pyro.distributions.torch_distribution import TorchDistribution

from . import distributions as _distributions
from .distributions.class_sum import ClassSumLikelihood as _ClassSumLikelihood  # noqa: F401

#: the names this module used to define, now re-exported from pyro_ar.distributions
_MOVED = ("ExactSoftmax", "SoftmaxCategorical", "OVECategorical", "SampledSoftmax", "BouchardBound",
          "JaakkolaJordanBernoulli", "jaakkola_jordan_lambda", "jaakkola_jordan_softplus_bound",
          "jaakkola_jordan_log_sigmoid_bound", "bouchard_log_normalizer_bound", "optimal_bouchard_a")
globals().update({name: getattr(_distributions, name) for name in _MOVED})

warnings.warn(
    "pyro_ar.bounds is deprecated and will be removed in the next release; import the "
    "baselines and bounds from pyro_ar.distributions",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = list(_MOVED) + ["LIKELIHOODS", "get_likelihood"]

#: Names of the likelihood factors, for a one-switch comparison (``"ar"`` also needs ``eps``).
LIKELIHOODS = {
    "ar": _distributions.AugmentedCategorical,
    "exact": _distributions.ExactSoftmax,
    "ove": _distributions.OVECategorical,
    "botev": _distributions.SampledSoftmax,
    "bouchard": _distributions.BouchardBound,
}


def get_likelihood(name):
    """The likelihood class registered under ``name`` (see :data:`LIKELIHOODS`); a class passes through.

    Example:

    >>> from pyro_ar.bounds import get_likelihood
    >>> get_likelihood("ove").__name__
    'OVECategorical'
    """
    if isinstance(name, type) and issubclass(name, TorchDistribution):
        return name
    if name not in LIKELIHOODS:
        raise ValueError(f"unknown likelihood {name!r}; expected one of {list(LIKELIHOODS)}")
    return LIKELIHOODS[name]

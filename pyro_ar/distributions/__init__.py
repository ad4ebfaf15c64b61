r"""Distributions of the augmented model, the baselines it is compared against, and the noise sites.

==================================================  ================================================
module                                              contents
==================================================  ================================================
:mod:`~pyro_ar.distributions.categorical`           :class:`UtilityCategorical` (the marginal
                                                    :math:`p(y\mid\psi)`), :func:`check_labels`
:mod:`~pyro_ar.distributions.class_sum`             :class:`ClassSumLikelihood`, the base of every
                                                    factor :math:`\sum_{k\ne y} g(\psi_y, \psi_k)`
                                                    with a subsampled class sum
:mod:`~pyro_ar.distributions.augmented`             :class:`AugmentedCategorical`
                                                    (:math:`\sum_{k\ne y}\log\Phi(\varepsilon+\psi_y-\psi_k)`),
                                                    :func:`sample_categorical`
:mod:`~pyro_ar.distributions.baselines`             :class:`ExactSoftmax`, :class:`OVECategorical`,
                                                    :class:`SampledSoftmax`, :class:`BouchardBound`
:mod:`~pyro_ar.distributions.analytic_bounds`       Jaakkola--Jordan and Bouchard bounds,
                                                    :class:`JaakkolaJordanBernoulli`
:mod:`~pyro_ar.distributions.noise_distribution`    :class:`NoiseDistribution`, :class:`FastGumbel`
:mod:`~pyro_ar.distributions.expected_factor`       :class:`GumbelExpectedFactor`
==================================================  ================================================

Every distribution declares real ``arg_constraints`` and ``support`` (so Pyro's
validation and ``infer_shapes`` work), keeps every attribute in ``expand``, and raises
``ValueError`` naming the argument for bad parameters or values.
"""

from .analytic_bounds import (
    JaakkolaJordanBernoulli,
    bouchard_log_normalizer_bound,
    jaakkola_jordan_lambda,
    jaakkola_jordan_log_sigmoid_bound,
    jaakkola_jordan_softplus_bound,
    optimal_bouchard_a,
)
from .augmented import AugmentedCategorical, _noise_prior, sample_categorical  # noqa: F401
from .baselines import BouchardBound, ExactSoftmax, OVECategorical, SampledSoftmax, SoftmaxCategorical
from .categorical import UtilityCategorical, check_labels
from .class_sum import ClassSumLikelihood, GatheredUtilities
from .expected_factor import GumbelExpectedFactor
from .noise_distribution import FastGumbel, NoiseDistribution

__all__ = [
    "UtilityCategorical",
    "AugmentedCategorical",
    "sample_categorical",
    "check_labels",
    "ClassSumLikelihood",
    "GatheredUtilities",
    "ExactSoftmax",
    "SoftmaxCategorical",
    "OVECategorical",
    "SampledSoftmax",
    "BouchardBound",
    "JaakkolaJordanBernoulli",
    "jaakkola_jordan_lambda",
    "jaakkola_jordan_softplus_bound",
    "jaakkola_jordan_log_sigmoid_bound",
    "bouchard_log_normalizer_bound",
    "optimal_bouchard_a",
    "NoiseDistribution",
    "FastGumbel",
    "GumbelExpectedFactor",
]

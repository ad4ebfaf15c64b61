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
:mod:`~pyro_ar.distributions.baselines`             :class:`OVECategorical`, :class:`SampledSoftmax`,
                                                    :class:`BouchardBound`
:mod:`~pyro_ar.distributions.analytic_bounds`       Jaakkola--Jordan and Bouchard bounds,
                                                    :class:`JaakkolaJordanBernoulli`
:mod:`~pyro_ar.distributions.noise_distribution`    :class:`FastGumbel` (the location-scale
                                                    distribution of any other noise is
                                                    :class:`pyro_ar.noise.NoiseDistribution`)
:mod:`~pyro_ar.distributions.expected_factor`       :class:`GumbelExpectedFactor`,
                                                    :class:`GaussianExpectedFactor`,
                                                    :class:`GumbelQExpectedFactor`
:mod:`~pyro_ar.distributions.relaxed`               :class:`RelaxedUtilityCategorical` (softmax of
                                                    :math:`(\psi+\varepsilon)/\tau`, any noise)
==================================================  ================================================

Every distribution declares real ``arg_constraints`` and ``support`` (so Pyro's
validation and ``infer_shapes`` work), keeps every attribute in ``expand``, and raises
``ValueError`` naming the argument for bad parameters or values.
"""

from . import analytic_bounds, augmented, baselines, categorical, class_sum, expected_factor
from . import noise_distribution, relaxed
from .analytic_bounds import *  # noqa: F401,F403  (each submodule's __all__)
from .augmented import *  # noqa: F401,F403
from .augmented import _noise_prior  # noqa: F401
from .baselines import *  # noqa: F401,F403
from .categorical import *  # noqa: F401,F403
from .class_sum import *  # noqa: F401,F403
from .expected_factor import *  # noqa: F401,F403
from .noise_distribution import *  # noqa: F401,F403
from .relaxed import *  # noqa: F401,F403

__all__ = [name for module in (categorical, class_sum, augmented, baselines, analytic_bounds,
                               noise_distribution, expected_factor, relaxed) for name in module.__all__]

r"""Noise families of the utility (random-utility) view of a categorical.

A categorical over K classes with mean utilities :math:`\psi \in \mathbb{R}^K` is

.. math::

    y = \arg\max_k (\psi_k + \varepsilon_k), \qquad \varepsilon_k \overset{iid}{\sim} \phi,

where :math:`\phi` is a univariate density with CDF :math:`\Phi`. The choice of
:math:`\phi` selects the model:

========  ================================  =================================  =========================
noise     :math:`\log\phi(e)`               :math:`\log\Phi(x)` (stable)       model
========  ================================  =================================  =========================
Gumbel    :math:`-e - e^{-e}`               :math:`-e^{-x}`                    softmax
Normal    :math:`-e^2/2 - \log\sqrt{2\pi}`  ``log_ndtr(x)``                    multinomial probit
Logistic  :math:`-s(-e) - s(e)`             :math:`-s(-x)`                     multinomial logistic
Laplace   :math:`-|e| - \log 2`             piecewise, ``log1p``               heavier tails
Student   :math:`\log t_\nu(e)`             incomplete beta (cont. fraction)   robust (polynomial tails)
========  ================================  =================================  =========================

(:math:`s` is softplus; Student-t: :class:`StudentTNoise` with :math:`\nu` = ``df``,
:math:`\Phi(-t) = \tfrac12 I_{\nu/(\nu+t^2)}(\nu/2, 1/2)`.) Any other density with a CDF
gives a valid model too: build it with :class:`Noise` directly
(``Noise(log_density=..., log_cdf=..., sample=...)``) or from a distribution with
:meth:`Noise.from_distribution`, and check it with :func:`pyro_ar.testing.check_noise`;
everything in ``pyro_ar`` takes a :class:`Noise` or one of the names ``"gumbel"``,
``"normal"``, ``"logistic"``, ``"laplace"``, ``"student_t<df>"`` (see :func:`get_noise`).

Every :meth:`Noise.sample` takes a ``torch.Generator`` (``generator=``).

**The noise owns its math.** What depends on the noise family is a method of :class:`Noise`
with a generic default, overridden by the families that have a closed form (as GPyTorch's
likelihoods default to Monte Carlo / quadrature and override it):

* :meth:`~Noise.log_marginal`, :meth:`~Noise.log_marginal_all` -- generic: quadrature
  (:mod:`pyro_ar.quadrature`); Gumbel: the log-softmax;
* :meth:`~Noise.icdf` -- generic: bisection on ``log_cdf``; Gumbel, normal, logistic,
  Laplace: closed forms;
* :meth:`~Noise.marginal_offsets` (utilities whose marginals are given probabilities, e.g. biases
  at the unigram fit) -- generic: Newton steps on the marginals through the distribution of the
  maximum (:func:`pyro_ar.max_quadrature.marginal_offsets`); Gumbel: the log-probabilities;
* :meth:`~Noise.log_density_derivatives`, :meth:`~Noise.log_cdf_derivatives` -- generic:
  autograd (second order); normal, logistic: closed forms;
* :meth:`~Noise.weighted_log_cdf_derivatives` (their weighted class sums, for the local fits) --
  generic: :meth:`~Noise.log_cdf_derivatives` and dot products; normal: from the Mills ratio;
* :meth:`~Noise.relaxed_log_prob` -- generic: none (``NotImplementedError``); Gumbel: the
  Concrete density;
* :meth:`~Noise.log_marginal_rows` (labels sharing utility rows: a session's items) -- generic:
  :meth:`~Noise.log_marginal` of the gathered rows; Gumbel: one log-softmax per row;
* :meth:`~Noise.log_normalizer` (:math:`A` with :math:`\log p(y\mid\psi) = \psi_y - A(\psi)`,
  which class shards combine) -- generic: ``NotImplementedError``; Gumbel: the log-sum-exp;
* :meth:`~Noise.check_num_nodes` -- generic: the quadrature's checks; Gumbel: an integer;
* :attr:`~pyro_ar.noise.base.Noise.closed_form` -- False; Gumbel: True.

:attr:`Noise.closed_form <pyro_ar.noise.base.Noise.closed_form>` says that the optimal local
posterior of the A&R bound is :math:`\mathrm{Gumbel}(\log\eta, 1)`; the inference layer reads
it in one place (:func:`pyro_ar.infer.local_fit.unit_gumbel_optimum`, behind ``local_q``,
``GumbelLocalGuide`` and ``ClosedFormELBO``), the likelihood objects for ``AR.bound`` and the
softmax baselines. No module outside this package asks which family a noise is
(``tests/test_noise_switches.py``).

The package has three modules, all re-exported here (``from pyro_ar.noise import GumbelNoise``):

* :mod:`pyro_ar.noise.base` -- :class:`Noise`, the three primitives and the generic defaults;
* :mod:`pyro_ar.noise.families` -- the library families (Gumbel, normal, logistic, Laplace,
  Student-t), each overriding the defaults it has a closed form for, and :func:`get_noise`;
* :mod:`pyro_ar.noise.distribution` -- :class:`NoiseDistribution`, the location-scale
  distribution of any noise.
"""

from .base import Noise
from .distribution import NoiseDistribution
from .families import NOISE_ALIASES, NOISE_NAMES, GumbelNoise, LaplaceNoise, LogisticNoise, NormalNoise, StudentTNoise, get_noise

__all__ = [
    "Noise",
    "NoiseDistribution",
    "GumbelNoise",
    "NormalNoise",
    "LogisticNoise",
    "LaplaceNoise",
    "StudentTNoise",
    "get_noise",
    "NOISE_NAMES",
    "NOISE_ALIASES",
]

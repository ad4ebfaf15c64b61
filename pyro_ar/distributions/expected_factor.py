r"""The A&R factor in expectation under the local guide (used by :class:`~pyro_ar.infer.ClosedFormELBO`).

Softmax: :class:`GumbelExpectedFactor`, in closed form.

For Gumbel noise :math:`\log\Phi(\varepsilon + d) = -e^{-\varepsilon}e^{-d}`, so under
:math:`q(\varepsilon) = \mathrm{Gumbel}(\log\eta, 1)` (:math:`\mathbb{E}_q e^{-\varepsilon} = 1/\eta`)

.. math::  \mathbb{E}_q\Big[\sum_{k'\ne y}\log\Phi(\varepsilon + \psi_y - \psi_{k'})\Big]
           = -\hat S_y/\eta = -\exp(\log\hat S_y - \log\eta),
           \qquad \hat S_y \approx \sum_{k'\ne y} e^{\psi_{k'} - \psi_y},

unbiased when :math:`\hat S_y` is (it is linear in :math:`\hat S_y`).

Any other noise under a Gaussian :math:`q(\varepsilon) = N(m, s^2)` (the conditional local
guide's family): :class:`GaussianExpectedFactor`, by Gauss-Hermite quadrature,

.. math::  \mathbb{E}_q\Big[\sum_j a_j\log\Phi(\varepsilon + d_j)\Big]
           \approx \sum_j a_j \sum_i w_i \log\Phi(m + s z_i + d_j),

which removes the Monte Carlo draw of :math:`\varepsilon` from the estimate (and its gradient)
while keeping the class subsample's weights :math:`a_j`, so it stays unbiased over the class
subsample up to the rule's error (``benchmarks/probit_convergence.py``, issue 27); under a
Gumbel :math:`q(\varepsilon) = \mathrm{Gumbel}(m, s)` (the conditional local guide's default
family for such noise) :class:`GumbelQExpectedFactor`, the same sum on the Gumbel's Gauss rule
(:func:`~pyro_ar.quadrature.gauss_gumbel`).
"""

from typing import Callable, Optional, Sequence

import torch
from torch.distributions import constraints

from pyro.distributions.torch_distribution import TorchDistribution

from .._params import ParamsMixin
from ..numerics import check_int
from ..quadrature import gauss_gumbel, gauss_hermite
from .augmented import AugmentedCategorical
from .class_sum import weighted_sum

__all__ = ["GumbelExpectedFactor", "GaussianExpectedFactor", "GumbelQExpectedFactor", "DEFAULT_GAUSSIAN_NODES"]

#: Gauss-Hermite nodes of :class:`GaussianExpectedFactor`: the largest error of one term
#: :math:`\mathbb{E}_q\log\Phi(\varepsilon + d)` is 1.3e-6 (Normal noise) and 3.6e-7 (Logistic)
#: against a 128-node rule over m in N(0, 3^2), s in [0.05, 1.55], d in N(0, 6^2) (float64;
#: mean errors 2e-8 and 4e-9); 8 nodes give 1.2e-4 and 5.6e-5 (tests/distributions/test_expected_factor.py)
DEFAULT_GAUSSIAN_NODES = 16


class _ExpectedFactor(ParamsMixin, TorchDistribution):
    """What both expected factors share: the labels' support and sampling of the ``base``
    :class:`~pyro_ar.AugmentedCategorical` whose noise they integrate out."""

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return self.base.support

    @property
    def num_classes(self) -> int:
        return self.base.num_classes

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        return self.base.sample(sample_shape)


def optimal_log_eta(log_s: torch.Tensor) -> torch.Tensor:
    r""":math:`\log\eta^* = \log(1 + \hat S_y)` from :math:`\log\hat S_y`: the optimum of the softmax
    local bound :math:`L(\eta) = 1 - \log\eta - (1 + \hat S_y)/\eta` over
    :math:`q = \mathrm{Gumbel}(\log\eta, 1)` (:math:`L'(\eta) = 0`), exact for the class sum
    it is given. The one closed form of the local optimum: the conditional local guides, the
    natural step of :class:`~pyro_ar.infer.GumbelLocalGuide` (through
    :class:`~pyro_ar.infer.ClosedFormELBO` and this factor's local-first step) and the
    W-conditioned guide of :class:`~pyro_ar.infer.ClassSubsampledNormal` take it from here
    (:func:`pyro_ar.infer.local_fit.local_q`). :math:`\log\hat S = -\infty` (no other class)
    gives 0 with a zero gradient.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions.expected_factor import optimal_log_eta
    >>> optimal_log_eta(torch.tensor([0.0, -float("inf")])).tolist()   # log 2, log 1
    [0.6931471824645996, 0.0]
    """
    return torch.logaddexp(torch.zeros_like(log_s), log_s)


def _check_base(base) -> None:
    if not isinstance(base, AugmentedCategorical):
        raise ValueError(f"base must be an AugmentedCategorical, got {base!r}")


class GumbelExpectedFactor(_ExpectedFactor):
    r"""Expectation of an A&R softmax factor under :math:`q(\varepsilon) = \mathrm{Gumbel}(\log\eta, 1)`.

    ``log_prob(y)`` :math:`= -\exp(\log\hat S_y - \log\eta)`, with :math:`\hat S_y` from a
    fresh class subsample of the wrapped :class:`~pyro_ar.AugmentedCategorical`. The last
    :math:`\log\hat S_y` is kept (detached, ``last_log_s``) for the natural-gradient eta step.

    :param base: the :class:`~pyro_ar.AugmentedCategorical` (Gumbel noise).
    :param log_eta: :math:`\log\eta`, broadcastable to the base's batch shape.
    :param local_step: local-first mode (Algorithm 1 of Ruiz et al.: E step, then M step):
        a callable ``log_eta_target -> updated log_eta`` applied before the factor is
        evaluated (the updated value is kept in ``updated_log_eta``).

    ``expand`` keeps ``local_step`` and resets the per-call state (``last_log_s``,
    ``updated_log_eta``). ``infer_shapes(log_eta=shape)`` gives ``(shape, ())``; the base
    distribution is not a tensor and must have a broadcastable batch shape.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.distributions import GumbelExpectedFactor
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> base = ar.AugmentedCategorical(psi, torch.zeros(1, dtype=torch.float64))
    >>> f = GumbelExpectedFactor(base, torch.zeros(1, dtype=torch.float64))   # log eta = 0
    >>> S = (psi[0, 1:] - psi[0, 0]).exp().sum()
    >>> torch.allclose(f.log_prob(torch.tensor([0])), -S)                      # -S / eta
    True
    """

    arg_constraints = {"log_eta": constraints.real}
    _expand_attrs = {"base": 0, "log_eta": 0}
    _state_attrs = ("last_log_s", "updated_log_eta")

    def __init__(self, base: AugmentedCategorical, log_eta: torch.Tensor,
                 local_step: Optional[Callable[[torch.Tensor], torch.Tensor]] = None,
                 validate_args: Optional[bool] = None) -> None:
        _check_base(base)
        self.base, self.log_eta = base, log_eta
        self.last_log_s = None
        self.local_step = local_step
        self.updated_log_eta = None
        self._init_shape(base.batch_shape, validate_args)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        log_s = self.base.log_sum_exp_negatives(value)
        self.last_log_s = log_s.detach()
        log_eta = self.log_eta
        if self.local_step is not None:
            # eta~ = 1 + S_hat (log space), natural step first, then the bound at the new eta
            log_eta = self.local_step(optimal_log_eta(self.last_log_s))
            log_eta = log_eta.to(log_s.dtype).expand(log_s.shape)
            self.updated_log_eta = log_eta
        return -torch.exp(log_s - log_eta)

    def __repr__(self):
        return (f"GumbelExpectedFactor(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, local_first={self.local_step is not None})")


class GaussianExpectedFactor(_ExpectedFactor):
    r"""Expectation of an A&R factor under a Gaussian :math:`q(\varepsilon) = N(m, s^2)`, by quadrature.

    ``log_prob(y)`` :math:`= \sum_j a_j \sum_i w_i \log\Phi(m + s z_i + \psi_y - \psi_{k_j})`,
    with :math:`(z_i, w_i)` the ``num_nodes``-point Gauss-Hermite rule
    (:func:`~pyro_ar.quadrature.gauss_hermite`) and :math:`(k_j, a_j)` a fresh class subsample of
    the wrapped :class:`~pyro_ar.AugmentedCategorical` (any noise :math:`\Phi`). The single
    draw :math:`\varepsilon \sim q` of the Monte Carlo ELBO is replaced by its expectation, so
    the only randomness left is the class subsample's; gradients flow to :math:`\psi` and to
    :math:`(m, s)` (the nodes are constants).

    :param base: the :class:`~pyro_ar.AugmentedCategorical`.
    :param loc: :math:`m`, broadcastable to the base's batch shape.
    :param scale: :math:`s > 0`, likewise.
    :param int num_nodes: nodes of the rule (default :data:`DEFAULT_GAUSSIAN_NODES`).

    ``infer_shapes(loc=shape, scale=shape)`` gives their broadcast shape.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.distributions import GaussianExpectedFactor
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> base = ar.AugmentedCategorical(psi, torch.zeros(1, dtype=torch.float64), "normal")
    >>> zero, one = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    >>> f = GaussianExpectedFactor(base, zero, one)
    >>> eps = torch.randn(200_000, 1, dtype=torch.float64)                 # the Monte Carlo it replaces
    >>> mc = ar.AugmentedCategorical(psi, eps, "normal").log_prob(torch.zeros(1, dtype=torch.long)).mean()
    >>> abs(f.log_prob(torch.tensor([0])).item() - mc.item()) < 0.01
    True
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    _expand_attrs = {"base": 0, "loc": 0, "scale": 0}
    _rule = staticmethod(gauss_hermite)  # (z_i, w_i) of q's standard member

    def __init__(self, base: AugmentedCategorical, loc: torch.Tensor, scale: torch.Tensor,
                 num_nodes: int = DEFAULT_GAUSSIAN_NODES, validate_args: Optional[bool] = None) -> None:
        _check_base(base)
        self.base, self.loc, self.scale = base, loc, scale
        self.num_nodes = check_int("num_nodes", num_nodes, low=1)
        self._rule(self.num_nodes, loc if isinstance(loc, torch.Tensor) else torch.zeros(()))  # (its own limits, now)
        self._init_shape(base.batch_shape, validate_args)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        d, weight = self.base.utility_differences(value)                  # (..., s)
        z, wz = self._rule(self.num_nodes, d)
        loc, scale = self.loc.to(d.dtype).unsqueeze(-1), self.scale.to(d.dtype).unsqueeze(-1)
        d, weight = torch.broadcast_tensors(d, weight)
        keep = (weight != 0).unsqueeze(-1)
        e = (loc + scale * z).unsqueeze(-2) + d.unsqueeze(-1)              # (..., s, nodes)
        # dropped terms' arguments set to 0 (their log Phi may overflow: see masked_weighted_sum)
        terms = self.base.noise.log_cdf(torch.where(keep, e, torch.zeros_like(e)))
        return weighted_sum(weight, terms @ wz)

    def __repr__(self):
        return (f"{type(self).__name__}(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, noise={self.base.noise.name!r}, num_nodes={self.num_nodes})")


class GumbelQExpectedFactor(GaussianExpectedFactor):
    r"""Expectation of an A&R factor under a Gumbel :math:`q(\varepsilon) = \mathrm{Gumbel}(m, s)`
    (location m, scale s), by quadrature: :class:`GaussianExpectedFactor`'s sum with
    :math:`(z_i, w_i)` the Gumbel's own Gauss rule (:func:`~pyro_ar.quadrature.gauss_gumbel`,
    at most 20 nodes). It serves the conditional local guide's default q for a noise without
    a closed form (:func:`~pyro_ar.infer.local_fit.gumbel_local`); the Gumbel *noise* factor
    has its closed form, :class:`GumbelExpectedFactor`.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro.distributions import Gumbel
    >>> from pyro_ar.distributions import GumbelQExpectedFactor
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> base = ar.AugmentedCategorical(psi, torch.zeros(1, dtype=torch.float64), "normal")
    >>> zero, one = torch.zeros(1, dtype=torch.float64), torch.ones(1, dtype=torch.float64)
    >>> f = GumbelQExpectedFactor(base, zero, one)
    >>> eps = Gumbel(zero, one).sample((200_000,))                       # the Monte Carlo it replaces
    >>> mc = ar.AugmentedCategorical(psi, eps, "normal").log_prob(torch.zeros(1, dtype=torch.long)).mean()
    >>> abs(f.log_prob(torch.tensor([0])).item() - mc.item()) < 0.01
    True
    """

    _rule = staticmethod(gauss_gumbel)

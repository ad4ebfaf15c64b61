r"""The A&R softmax factor in expectation under a Gumbel guide (used by :class:`~pyro_ar.infer.ClosedFormELBO`).

For Gumbel noise :math:`\log\Phi(\varepsilon + d) = -e^{-\varepsilon}e^{-d}`, so under
:math:`q(\varepsilon) = \mathrm{Gumbel}(\log\eta, 1)` (:math:`\mathbb{E}_q e^{-\varepsilon} = 1/\eta`)

.. math::  \mathbb{E}_q\Big[\sum_{k'\ne y}\log\Phi(\varepsilon + \psi_y - \psi_{k'})\Big]
           = -\hat S_y/\eta = -\exp(\log\hat S_y - \log\eta),
           \qquad \hat S_y \approx \sum_{k'\ne y} e^{\psi_{k'} - \psi_y},

unbiased when :math:`\hat S_y` is (it is linear in :math:`\hat S_y`).
"""

from typing import Callable, Optional, Sequence

import torch
from torch.distributions import constraints

from pyro.distributions.torch_distribution import TorchDistribution

from .._params import ParamsMixin
from .augmented import AugmentedCategorical

__all__ = ["GumbelExpectedFactor"]


class GumbelExpectedFactor(ParamsMixin, TorchDistribution):
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
        if not isinstance(base, AugmentedCategorical):
            raise ValueError(f"base must be an AugmentedCategorical, got {base!r}")
        self.base, self.log_eta = base, log_eta
        self.last_log_s = None
        self.local_step = local_step
        self.updated_log_eta = None
        self._init_shape(base.batch_shape, validate_args)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return self.base.support

    @property
    def num_classes(self) -> int:
        return self.base.num_classes

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        return self.base.sample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        log_s = self.base.log_sum_exp_negatives(value)
        self.last_log_s = log_s.detach()
        log_eta = self.log_eta
        if self.local_step is not None:
            # eta~ = 1 + S_hat (log space), natural step first, then the bound at the new eta
            log_eta = self.local_step(torch.logaddexp(torch.zeros_like(self.last_log_s), self.last_log_s))
            log_eta = log_eta.to(log_s.dtype).expand(log_s.shape)
            self.updated_log_eta = log_eta
        return -torch.exp(log_s - log_eta)

    def __repr__(self):
        return (f"GumbelExpectedFactor(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, local_first={self.local_step is not None})")

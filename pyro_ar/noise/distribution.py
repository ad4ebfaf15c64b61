r"""The location-scale distribution :math:`\phi((x - loc)/scale)/scale` of any noise.

:class:`NoiseDistribution` is what :meth:`Noise.distribution() <pyro_ar.noise.base.Noise.distribution>`
returns for a noise that Pyro has no distribution of (a user-defined noise, the logistic
family); it needs only the noise's ``log_density``, ``log_cdf`` and ``rsample_like``, so this
module imports no noise class (and :mod:`pyro_ar.noise.base` imports it without a cycle).
"""

from typing import Optional, Sequence, Union

import torch
from torch.distributions import constraints

from pyro.distributions import TorchDistribution

from .._params import ParamsMixin
from ..numerics import as_tensors

__all__ = ["NoiseDistribution"]


class NoiseDistribution(ParamsMixin, TorchDistribution):
    r"""Location-scale distribution :math:`p(x) = \phi((x - loc)/scale) / scale` of any :class:`Noise`.

    Used for the prior and the local guide of the noise site when the noise is
    user-defined (library noises map to Pyro's own Gumbel / Normal / Laplace / StudentT).

    :param noise: a :class:`~pyro_ar.noise.base.Noise`.
    :param loc: location (tensor or number).
    :param scale: scale, ``> 0`` (tensor or number).

    Example:

    >>> import torch, pyro_ar as ar
    >>> d = ar.noise.NoiseDistribution(ar.get_noise("logistic"), torch.zeros(3), torch.ones(3))
    >>> d.rsample((2,)).shape
    torch.Size([2, 3])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    _expand_attrs = {"loc": 0, "scale": 0}

    def __init__(self, noise, loc: Union[float, torch.Tensor], scale: Union[float, torch.Tensor],
                 validate_args: Optional[bool] = None) -> None:
        self.noise = noise
        self.loc, self.scale = torch.broadcast_tensors(*as_tensors(loc, scale))
        self._init_shape(self.loc.shape, validate_args)

    @property
    def has_rsample(self) -> bool:
        return self.noise.has_sample

    def rsample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        return self.noise.rsample_like(self.loc, self.scale, sample_shape)

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            self._validate_sample(value)
        return self.noise.log_density((value - self.loc) / self.scale) - torch.log(self.scale)

    def cdf(self, value: torch.Tensor) -> torch.Tensor:
        return self.noise.log_cdf((value - self.loc) / self.scale).exp()

    def __repr__(self):
        return f"NoiseDistribution(noise={self.noise!r}, batch_shape={tuple(self.batch_shape)})"

r"""The Gumbel distribution of the noise sites, fast to build.

:class:`FastGumbel` -- Pyro's Gumbel built in O(1) Python work, sampled by inversion
:math:`x = \mathrm{loc} - \mathrm{scale}\,\log(-\log u)`, :math:`u\sim U(0,1)` (the local
guides' :math:`q(\varepsilon)` and the A&R Gumbel prior), with the KL divergence of two unit-scale
ones in closed form. The location-scale distribution of
any other noise, :class:`~pyro_ar.noise.NoiseDistribution`, lives next to the noise it wraps.
"""

from typing import Optional, Sequence, Union

import torch
from torch.distributions.kl import _kl_gumbel_gumbel, register_kl
from torch.distributions.utils import broadcast_all, lazy_property

from pyro.distributions import Gumbel
from pyro.distributions.torch_distribution import TorchDistribution

from ..numerics import check_sample_shape, uniform_open

__all__ = ["FastGumbel"]


class FastGumbel(Gumbel):
    r"""``pyro.distributions.Gumbel`` built in O(1) Python work.

    torch's Gumbel is a ``TransformedDistribution``: every construction builds a Uniform
    base and four transforms, which costs more than the rest of a local guide's step. This
    subclass stores ``loc`` and ``scale`` only, samples by inversion
    (:math:`\mathrm{loc} - \mathrm{scale}\,\log(-\log u)`, the same law), and builds the
    base distribution and transforms only if something asks for them (e.g. ``cdf``). It is a
    ``Gumbel`` for ``isinstance`` and for the registered Gumbel--Gumbel KL divergence.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import FastGumbel
    >>> from pyro.distributions import Gumbel
    >>> loc, scale, x = torch.tensor([0.5]), torch.tensor([1.0]), torch.tensor([0.3])
    >>> torch.allclose(FastGumbel(loc, scale).log_prob(x), Gumbel(loc, scale).log_prob(x))
    True
    """

    has_rsample = True
    #: whether the scale was given as the number 1 (known without reading a tensor)
    unit_scale = False

    def __init__(self, loc: Union[float, torch.Tensor], scale: Union[float, torch.Tensor],
                 validate_args: Optional[bool] = None) -> None:
        if isinstance(scale, (int, float)) and scale == 1:
            self.unit_scale = True
        if isinstance(loc, torch.Tensor) and isinstance(scale, (int, float)):
            # (broadcast_all's result without its generic conversions: a local guide builds one per step)
            self.loc, self.scale = loc, loc.new_full((), scale).expand(loc.shape)
        else:
            self.loc, self.scale = broadcast_all(loc, scale)
        TorchDistribution.__init__(self, self.loc.shape, torch.Size(), validate_args=validate_args)

    @lazy_property
    def _transformed(self):
        return Gumbel(self.loc, self.scale, validate_args=False)

    base_dist = property(lambda self: self._transformed.base_dist)
    transforms = property(lambda self: self._transformed.transforms)

    def expand(self, batch_shape: Sequence[int], _instance: Optional["FastGumbel"] = None) -> "FastGumbel":
        batch_shape = torch.Size(batch_shape)
        if _instance is None and batch_shape == self.batch_shape:  # (immutable: itself)
            return self
        new = self._get_checked_instance(FastGumbel, _instance)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        new.unit_scale = self.unit_scale
        TorchDistribution.__init__(new, batch_shape, torch.Size(), validate_args=False)
        new.__dict__.pop("_validate_args", None)
        if "_validate_args" in self.__dict__:
            new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        shape = self._extended_shape(check_sample_shape(sample_shape))
        u = uniform_open(shape, dtype=self.loc.dtype, device=self.loc.device)
        return self.loc - self.scale * torch.log(-torch.log(u))

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        with torch.no_grad():
            return self.rsample(sample_shape)

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_transformed", None)  # rebuilt on demand
        return state


@register_kl(FastGumbel, FastGumbel)
def _kl_fast_gumbel(p: FastGumbel, q: FastGumbel) -> torch.Tensor:
    r"""KL(p || q) of two Gumbels; with both scales the number 1,
    :math:`\mathrm{KL}(\mathrm{Gumbel}(a, 1)\,\|\,\mathrm{Gumbel}(b, 1)) = a - b - 1 + e^{b - a}`
    (three operations instead of torch's general formula, the same value)."""
    if p.unit_scale and q.unit_scale:
        d = p.loc - q.loc
        return d - 1 + torch.exp(-d)
    return _kl_gumbel_gumbel(p, q)

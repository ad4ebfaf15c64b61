r"""Relaxed (continuous) samples of the categorical :math:`y=\arg\max_k(\psi_k+\varepsilon_k)`, any noise.

Replacing the argmax by a softmax at temperature :math:`\tau > 0` gives a reparameterised
sample on the simplex (Maddison et al. 2017, the Concrete distribution; Jang et al. 2017):

.. math::  x = \mathrm{softmax}\big((\psi + \varepsilon)/\tau\big), \qquad
           \varepsilon_k \overset{iid}{\sim}\phi,

for every noise :math:`\phi` of :mod:`pyro_ar.noise` (Gumbel: the Concrete / Gumbel-softmax
relaxation of the softmax categorical; Normal: a relaxed multinomial probit -- a logistic
normal; Logistic, Laplace, Student-t ...). Properties that hold for every noise:

* rounding is exact at every temperature: :math:`\arg\max_k x_k = \arg\max_k(\psi_k +
  \varepsilon_k)`, so :math:`P(\arg\max x = k) = p(y=k\mid\psi)`
  (:class:`~pyro_ar.distributions.UtilityCategorical`);
* :math:`x \to` one-hot(:math:`y`) as :math:`\tau\to 0` (and :math:`\mathbb{E}x\to p(\cdot\mid\psi)`).

The density on the simplex has a closed form for Gumbel noise, the Concrete density

.. math::  p(x) = (K-1)!\,\tau^{K-1}\prod_{k=1}^K\frac{e^{\psi_k}x_k^{-\tau-1}}
           {\sum_i e^{\psi_i}x_i^{-\tau}},

(``log_prob``; equal to Pyro's ``RelaxedOneHotCategorical(temperature, logits=psi)``);
for other noises it is a one-dimensional integral with no closed form and ``log_prob``
raises ``NotImplementedError`` (use the relaxation where only samples are needed, e.g. a
decoder's input, with the discrete KL or a score on the rounded sample).

**Temperatures.** Low :math:`\tau` is closer to the discrete model but gives
high-variance gradients; high :math:`\tau` smooths. For Gumbel noise
:math:`\tau\le 1/(K-1)` guarantees that the density has no mode inside the simplex
(Maddison et al., Prop. 1d); the authors found :math:`\tau = 2/3` (posterior) and
:math:`1/2` (prior) good for small K, and annealing unimportant. For another noise,
scale the temperature by the noise's standard deviation relative to Gumbel's
(:math:`\pi/\sqrt6\approx 1.28`): Normal (sd 1) about :math:`0.8\tau`, Logistic (sd
:math:`\pi/\sqrt3\approx 1.81`) about :math:`1.4\tau`, so the soft samples are equally sharp.
:class:`RelaxedUtilityCategoricalStraightThrough` returns the rounded one-hot sample forward
with the relaxed sample's gradient (biased, often useful at moderate temperatures).
"""


import torch
from torch.distributions import constraints
from torch.distributions.utils import clamp_probs

from pyro.distributions.relaxed_straight_through import QuantizeCategorical
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from ..noise import get_noise
from ..numerics import as_tensor, check_sample_shape, show
from ..utility import DenseUtility, Utility
from .._params import ParamsMixin

__all__ = ["RelaxedUtilityCategorical", "RelaxedUtilityCategoricalStraightThrough"]


class RelaxedUtilityCategorical(ParamsMixin, TorchDistribution):
    r"""Reparameterised relaxed sample :math:`\mathrm{softmax}((\psi+\varepsilon)/\tau)` for any noise.

    :param utility: mean utilities :math:`\psi`, tensor ``batch_shape + (K,)`` (or a
        :class:`~pyro_ar.utility.Utility`, of which all K utilities are used).
    :param noise: a :class:`~pyro_ar.noise.Noise` or a name (``"gumbel"``, ``"normal"``, ...).
    :param temperature: :math:`\tau > 0`, a number or a tensor broadcasting with the batch.

    ``event_shape = (K,)``, support the simplex; ``rsample`` for every noise with a sampler,
    ``log_prob`` the Concrete density for Gumbel noise (see the module docstring).

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import RelaxedUtilityCategorical
    >>> psi = torch.tensor([[2.0, 0.0, -1.0]], requires_grad=True)
    >>> d = RelaxedUtilityCategorical(psi, "normal", temperature=0.5)
    >>> x = d.rsample(torch.Size([4]))
    >>> x.shape, bool(torch.allclose(x.sum(-1), torch.ones(4, 1)))
    (torch.Size([4, 1, 3]), True)
    >>> x[..., 0].sum().backward(); psi.grad is not None      # reparameterised
    True
    >>> g = RelaxedUtilityCategorical(psi.detach(), "gumbel", 0.5)    # Concrete: exact density
    >>> g.log_prob(g.rsample()).shape
    torch.Size([1])
    """

    arg_constraints = {"utility": constraints.real_vector, "temperature": constraints.positive}
    support = constraints.simplex
    has_rsample = True
    _expand_attrs = {"utility": 1, "temperature": 0}

    def __init__(self, utility, noise="gumbel", temperature=1.0, validate_args=None):
        if isinstance(utility, Utility):
            utility = utility.full()
        self.utility = DenseUtility(utility).logits
        if self.utility.shape[-1] < 2:
            raise ValueError(f"utility needs at least 2 classes, got shape {tuple(self.utility.shape)}")
        self.noise = get_noise(noise)
        self.temperature = as_tensor(temperature, self.utility, "temperature")
        try:
            batch_shape = broadcast_shape(self.utility.shape[:-1], self.temperature.shape)
        except ValueError:
            raise ValueError(f"temperature of shape {tuple(self.temperature.shape)} does not broadcast "
                             f"with the utility's batch shape {tuple(self.utility.shape[:-1])}") from None
        TorchDistribution.__init__(self, batch_shape, self.utility.shape[-1:], validate_args=False)
        self._init_shape(batch_shape, validate_args)

    def _init_shape(self, batch_shape, validate_args):
        super()._init_shape(batch_shape, validate_args)
        self._event_shape = self.utility.shape[-1:]

    def _validate_params(self):
        super()._validate_params()
        tiny = torch.finfo(self.temperature.dtype).tiny
        small = self.temperature < tiny
        if small.any():  # subnormal: 1 / temperature overflows, gradients are inf
            raise ValueError(f"temperature must be >= {tiny:.3g} (the smallest normal number of "
                             f"{self.temperature.dtype}), got {show(self.temperature[small])}")

    @classmethod
    def infer_shapes(cls, utility, noise=None, temperature=()):
        """``(batch_shape, event_shape)``: the batch of ``utility[:-1]`` and ``temperature``,
        the event the K classes of the simplex.

        Example:

        >>> from pyro_ar.distributions import RelaxedUtilityCategorical
        >>> RelaxedUtilityCategorical.infer_shapes(utility=(5, 7))
        (torch.Size([5]), torch.Size([7]))
        """
        utility = tuple(utility)
        return torch.Size(broadcast_shape(utility[:-1], tuple(temperature or ()))), torch.Size(utility[-1:])

    @property
    def num_classes(self) -> int:
        return self.utility.shape[-1]

    def _soft(self, sample_shape):
        shape = check_sample_shape(sample_shape) + self.batch_shape + self.event_shape
        eps = self.noise.sample(shape, dtype=self.utility.dtype, device=self.utility.device)
        z = self.utility + eps  # shifted by its max before dividing: (z - max) / tau <= 0
        z = z - z.detach().max(-1, keepdim=True).values  # never overflows to inf - inf = NaN
        return clamp_probs((z / self.temperature.unsqueeze(-1)).softmax(-1))

    def rsample(self, sample_shape=torch.Size()):
        return self._soft(sample_shape)

    def log_prob(self, value):
        if self._validate_args:
            self._check_value(value)
        return self.noise.relaxed_log_prob(self.utility, self.temperature, value)

    def _check_value(self, value):
        if not isinstance(value, torch.Tensor) or value.shape[-1:] != self.event_shape:
            raise ValueError(f"value must be a tensor of shape (..., {self.num_classes}) on the simplex, "
                             f"got {tuple(value.shape) if isinstance(value, torch.Tensor) else value!r}")
        ok = constraints.simplex.check(value)
        if not ok.all():
            raise ValueError(f"value must lie on the simplex (>= 0, summing to 1), got rows "
                             f"{show(value[~ok])}")
        try:
            broadcast_shape(value.shape[:-1], self.batch_shape)
        except ValueError:
            raise ValueError(f"value of shape {tuple(value.shape)} does not broadcast with batch_shape "
                             f"{tuple(self.batch_shape)}") from None

    def __repr__(self):
        return (f"{type(self).__name__}(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, noise={self.noise.name!r})")


class RelaxedUtilityCategoricalStraightThrough(RelaxedUtilityCategorical):
    r"""Straight-through variant: ``rsample`` returns the rounded one-hot sample
    :math:`\text{one-hot}(\arg\max_k(\psi_k+\varepsilon_k))` with the gradient of the
    relaxed sample (Bengio et al. 2013; as Pyro's ``RelaxedOneHotCategoricalStraightThrough``).
    ``log_prob`` of such a sample evaluates the density at the relaxed sample it came from.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import RelaxedUtilityCategoricalStraightThrough
    >>> psi = torch.zeros(2, 5, requires_grad=True)
    >>> x = RelaxedUtilityCategoricalStraightThrough(psi, "logistic", 1.0).rsample()
    >>> x.sum(-1).tolist(), sorted(set(x.flatten().tolist()))
    ([1.0, 1.0], [0.0, 1.0])
    >>> (x * torch.arange(5.0)).sum().backward(); bool(psi.grad.abs().sum() > 0)
    True
    """

    def rsample(self, sample_shape=torch.Size()):
        return QuantizeCategorical.apply(self._soft(sample_shape))

    def log_prob(self, value):
        return super().log_prob(getattr(value, "_unquantize", value))

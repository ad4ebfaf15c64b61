r"""The categorical in utility form, :math:`y = \arg\max_k(\psi_k + \varepsilon_k)`.

:class:`UtilityCategorical` is the marginal (eq. 5 of Ruiz et al. 2018)

.. math::  p(y=k\mid\psi) = \int \phi(e)\prod_{k'\ne k}\Phi(e + \psi_k - \psi_{k'})\,de,

computed by the noise itself (:meth:`pyro_ar.noise.Noise.log_marginal`: quadrature by
default, the log-softmax of :class:`~pyro_ar.noise.GumbelNoise`, through the memory-lean
:func:`pyro_ar.noise.special.softmax_log_prob`). :func:`check_labels` validates class labels for
every distribution of the package.
"""

from typing import Optional, Sequence, Union

import torch
from torch.distributions import constraints

from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from ..noise import Noise, get_noise
from ..numerics import check_sample_shape, first_position, show
from ..quadrature import DEFAULT_NUM_NODES, check_quadrature_args, log_marginal, log_marginal_all
from ..utility import DenseUtility, Utility, as_utility
from .._params import ParamsMixin

__all__ = ["UtilityCategorical", "check_labels"]


def check_labels(value: torch.Tensor, num_classes: int, batch_shape: Sequence[int],
                 name: str = "value", rows: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Validate class labels and return them as int64.

    :raises ValueError: when ``value`` is not integer-valued, lies outside
        ``[0, num_classes)``, or does not broadcast with ``batch_shape``; the message names
        the first bad position (through ``rows`` when the labels are a minibatch's,
        :func:`~pyro_ar.numerics.first_position`).

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import check_labels
    >>> check_labels(torch.tensor([0, 2]), 3, torch.Size([2])).dtype
    torch.int64
    >>> check_labels(torch.tensor([0, 3]), 3, torch.Size([2]))
    Traceback (most recent call last):
    ...
    ValueError: ...
    """
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a tensor of class labels, got {value!r}")
    if value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class labels, got dtype={value.dtype}")
    # (one reduction per check; the offending values are only gathered to report them)
    if value.is_floating_point():
        nonint = value != value.floor()  # NaN and inf are caught here too
        if nonint.any():
            raise ValueError(f"{name} must hold integer class labels, got non-integers {show(value[nonint])} "
                             f"(the first at {first_position(nonint, name, rows)})")
    # (one reduction for the usual, valid case; the offending entries only to report them)
    lo, hi = torch.aminmax(value) if value.numel() else (value.new_zeros(()), value.new_zeros(()))
    if bool((lo < 0) | (hi >= num_classes)):  # (one host sync on a GPU)
        outside = (value < 0) | (value >= num_classes)
        raise ValueError(f"{name} must lie in [0, {num_classes}), got {show(value[outside])} "
                         f"(the first at {first_position(outside, name, rows)})")
    try:
        broadcast_shape(value.shape, batch_shape)
    except ValueError:
        raise ValueError(
            f"{name} of shape {tuple(value.shape)} does not broadcast with batch_shape "
            f"{tuple(batch_shape)}"
        ) from None
    return value.long()


class UtilityCategorical(ParamsMixin, TorchDistribution):
    r"""Marginal categorical of the random-utility model :math:`y = \arg\max_k(\psi_k + \varepsilon_k)`.

    .. math::  p(y=k\mid\psi) = \int \phi(e)\prod_{k'\ne k}\Phi(e + \psi_k - \psi_{k'})\,de,

    which is :math:`\mathrm{softmax}(\psi)_k` for Gumbel noise and is computed by
    quadrature (:func:`pyro_ar.quadrature.log_marginal`) otherwise.

    Example::

        psi = torch.randn(100, 5)
        d = UtilityCategorical(psi, noise="normal")       # multinomial probit
        y = d.sample()                                    # argmax of psi + noise
        d.log_prob(y)                                     # exact (quadrature), shape (100,)

    :param utility: mean utilities, tensor ``batch_shape + (K,)`` (or a
        :class:`~pyro_ar.utility.Utility`, of which all K utilities are used).
    :param noise: ``"gumbel"``, ``"normal"``, ``"logistic"`` or a :class:`~pyro_ar.noise.Noise`.
    :param str method: ``"auto"`` (closed form for Gumbel, quadrature otherwise) or
        ``"quadrature"`` (always).
    :param int num_nodes: initial number of quadrature nodes, in ``[5, 4097]``
        (:data:`~pyro_ar.quadrature.MAX_NUM_NODES`). The quadrature needs float32 or float64
        utilities (``ValueError`` for half precision with a non-Gumbel noise).

    ``infer_shapes(utility=shape)`` gives ``(shape[:-1], ())``; a
    :class:`~pyro_ar.utility.Utility` object is materialised with ``full()`` (O(K)), so pass
    ``utility.batch_shape + (utility.num_classes,)`` for it. As for every distribution of
    the package, lazy utilities (a :class:`~pyro_ar.utility.Utility` other than
    :class:`~pyro_ar.utility.DenseUtility`, e.g. a model's) are not checked at construction
    -- checking all B x K materialised values would cost a quarter of an exact softmax step
    -- but through what they produce: with validation on, ``log_prob`` raises a
    ``ValueError`` naming ``utility`` when a log-probability is not finite (a NaN or
    :math:`+\infty` utility in the row, or :math:`-\infty` at the label).

    Example:

    >>> import torch, pyro_ar as ar
    >>> psi = torch.tensor([2.0, 0.0, -1.0], dtype=torch.float64)
    >>> torch.allclose(ar.UtilityCategorical(psi).probs, psi.softmax(-1))     # Gumbel noise
    True
    >>> p = ar.UtilityCategorical(psi, "normal").probs                          # probit, quadrature
    >>> round(p.sum().item(), 12), p.argmax().item()
    (1.0, 0)
    """

    arg_constraints = {"utility": constraints.real_vector}
    has_enumerate_support = True
    _expand_attrs = {"utility": 1}

    def __init__(self, utility: Union[torch.Tensor, Utility], noise: Union[str, Noise] = "gumbel",
                 method: str = "auto", num_nodes: int = DEFAULT_NUM_NODES,
                 validate_args: Optional[bool] = None) -> None:
        self._lazy = not isinstance(utility, (torch.Tensor, DenseUtility))
        utility = as_utility(utility).full() if not isinstance(utility, torch.Tensor) else utility
        self.noise = get_noise(noise)
        if method not in ("auto", "quadrature"):
            raise ValueError(f"method must be 'auto' or 'quadrature', got {method!r}")
        self.method = method
        self.utility = DenseUtility(utility).logits
        if self.utility.shape[-1] < 2:
            raise ValueError(f"utility needs at least 2 classes, got shape {tuple(utility.shape)}")
        # the marginal's node count (and the quadrature's dtype), checked here rather than at log_prob
        self.num_nodes = (check_quadrature_args(self.utility, num_nodes) if method == "quadrature"
                          else self.noise.check_num_nodes(self.utility, num_nodes))
        self._init_shape(self.utility.shape[:-1], validate_args)

    @property
    def num_classes(self) -> int:
        return self.utility.shape[-1]

    def _validate_params(self):
        if not self._lazy:  # lazy utilities: checked through log_prob's values (O(B))
            super()._validate_params()

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self) -> constraints.Constraint:
        return constraints.integer_interval(0, self.num_classes - 1)

    @property
    def logits(self) -> torch.Tensor:
        """Normalised log-probabilities of every class, ``batch_shape + (K,)``."""
        if self.method == "quadrature":
            return log_marginal_all(self.utility, self.noise, self.num_nodes)
        return self.noise.log_marginal_all(self.utility, self.num_nodes)

    @property
    def probs(self) -> torch.Tensor:
        return self.logits.exp()

    def sample(self, sample_shape: Sequence[int] = torch.Size()) -> torch.Tensor:
        shape = check_sample_shape(sample_shape) + self.utility.shape
        with torch.no_grad():
            eps = self.noise.sample(shape, dtype=self.utility.dtype, device=self.utility.device)
            return (self.utility + eps).argmax(-1)

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        if self._validate_args:
            value = check_labels(value, self.num_classes, self.batch_shape)
        value = value.long()
        if self.method == "quadrature":
            out = log_marginal(self.utility, value, self.noise, self.num_nodes)
        else:
            out = self.noise.log_marginal(self.utility, value, self.num_nodes)
        if self._validate_args and self._lazy:
            bad = ~torch.isfinite(out)
            if bad.any():
                raise ValueError(f"utility must be finite: log_prob got non-finite log-probabilities "
                                 f"{show(out[bad])} (a NaN or +inf utility in their rows, or -inf at "
                                 "their labels)")
        return out

    def enumerate_support(self, expand: bool = True) -> torch.Tensor:
        values = torch.arange(self.num_classes, device=self.utility.device)
        values = values.view((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values

    def __repr__(self):
        return (f"UtilityCategorical(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, noise={self.noise.name!r})")

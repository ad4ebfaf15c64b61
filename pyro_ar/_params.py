r"""Parameter plumbing shared by every distribution of the package (private; a ground module so
that :class:`~pyro_ar.noise.NoiseDistribution`, next to the noise it wraps, uses it too).

:class:`ParamsMixin` gives a ``TorchDistribution``

* validation of the parameters declared in ``arg_constraints`` with errors that name the
  argument (``utility must be finite, got non-finite values [nan]``) instead of torch's
  generic message; a lazily evaluated :class:`~pyro_ar.utility.Utility` (not a tensor) is
  not checked here but on the rows actually gathered;
* ``infer_shapes`` from the declared event dims (keyword arguments that are not declared
  parameters, e.g. ``negatives``, are options and do not shape the batch);
* a generic ``expand`` that keeps every attribute and expands the batch-shaped ones (to the
  same batch shape: the distribution itself, unless it holds per-call state).
"""

import torch
from torch.distributions import Distribution, constraints

from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from .numerics import check_finite, check_nonnegative, check_positive, show
from .utility import DenseUtility, Utility


def _base_constraint(c):
    while isinstance(c, constraints.independent):
        c = c.base_constraint
    return c


def check_param(value, constraint, name: str) -> None:
    """Check one parameter against its constraint, raising ``ValueError`` naming it."""
    if isinstance(value, Utility):
        if not isinstance(value, DenseUtility):
            return  # lazy utilities are checked on the rows gathered by log_prob
        value = value.logits
    if not isinstance(value, torch.Tensor):
        return
    base = _base_constraint(constraint)
    if base is constraints.real:
        check_finite(value, name)
    elif base is constraints.nonnegative:
        check_nonnegative(value, name)
    elif base is constraints.positive:
        check_positive(value, name)
    else:
        ok = constraint.check(value)
        if not ok.all():
            bad = value if ok.dim() != value.dim() else value[~ok]
            raise ValueError(f"{name} must satisfy {constraint}, got {show(bad)}")


def _expand_value(value, batch_shape, event_dim):
    if value is None:
        return None
    if isinstance(value, (Utility, Distribution)):
        return value.expand(batch_shape)
    return value.expand(batch_shape + value.shape[value.dim() - event_dim:])


class ParamsMixin:
    """Named validation, ``infer_shapes`` and ``expand`` from declared parameters (private)."""

    #: batch-shaped attributes that ``expand`` expands: name -> event dims
    _expand_attrs = {}
    #: per-call state that ``expand`` resets to None (it is not part of the distribution)
    _state_attrs = ()

    @classmethod
    def infer_shapes(cls, **arg_shapes):
        """``(batch_shape, event_shape)`` from the shapes of the tensor parameters.

        Only the parameters declared in ``arg_constraints`` shape the batch; other keyword
        arguments (options such as ``negatives``) are ignored. For a
        :class:`~pyro_ar.utility.Utility` object pass ``utility.batch_shape +
        (utility.num_classes,)``.
        """
        batch_shapes = []
        for name, shape in arg_shapes.items():
            constraint = cls.arg_constraints.get(name)
            if constraint is not None and shape is not None:
                shape = tuple(shape)
                batch_shapes.append(shape[: len(shape) - constraint.event_dim])
        return torch.Size(broadcast_shape(*batch_shapes)), torch.Size()

    def _init_shape(self, batch_shape, validate_args):
        """``TorchDistribution.__init__`` with our named parameter validation instead of torch's."""
        TorchDistribution.__init__(self, batch_shape, validate_args=False)
        del self._validate_args  # back to the class default (Pyro's global switch) ...
        if validate_args is not None:
            self._validate_args = validate_args  # ... unless the instance says otherwise
        if self._validate_args:
            self._validate_params()

    def _validate_params(self):
        for name, constraint in self.arg_constraints.items():
            check_param(getattr(self, name, None), constraint, name)

    def expand(self, batch_shape, _instance=None):
        batch_shape = torch.Size(batch_shape)
        # the same shape: this very (immutable) distribution, as long as no per-call state is
        # set (a plate's broadcast expands every site's distribution at every call)
        if _instance is None and batch_shape == self.batch_shape \
                and all(self.__dict__.get(name) is None for name in self._state_attrs):
            return self
        new = self._get_checked_instance(type(self), _instance)
        new.__dict__.update(self.__dict__)
        for name, event_dim in self._expand_attrs.items():
            new.__dict__[name] = _expand_value(self.__dict__[name], batch_shape, event_dim)
        for name in self._state_attrs:
            new.__dict__[name] = None
        TorchDistribution.__init__(new, batch_shape, self.event_shape, validate_args=False)
        new.__dict__.pop("_validate_args", None)
        if "_validate_args" in self.__dict__:
            new._validate_args = self._validate_args
        return new

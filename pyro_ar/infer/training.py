"""Deprecated: the training loop moved to :mod:`pyro_ar.infer.loop` (function ``pyro_ar.infer.train``)."""

import warnings

from .loop import train

__all__ = ["train"]

warnings.warn("pyro_ar.infer.training is deprecated; import train from pyro_ar.infer "
              "(module pyro_ar.infer.loop)", DeprecationWarning, stacklevel=2)

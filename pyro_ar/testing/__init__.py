r"""Contracts to check what a user writes against: a noise, a model, a likelihood.

* :mod:`pyro_ar.testing.noise_checks` -- the contract every :class:`~pyro_ar.noise.Noise`
  must satisfy (:func:`check_noise`, no pytest needed; :func:`check_closed_forms`;
  :class:`NoiseContract`, the same checks as pytest tests);
* :mod:`pyro_ar.testing.contracts` -- :class:`ModelContract` and :class:`LikelihoodContract`,
  the contracts every model of :mod:`pyro_ar.models` and every likelihood object of
  :mod:`pyro_ar.likelihoods` meet, as pytest base classes (as GPyTorch ships its test bases).

Everything is importable from here: ``from pyro_ar.testing import check_noise, ModelContract``.
The contracts are imported on first use, so that without pytest the noise checks still import
(and ``ModelContract`` raises an ``ImportError`` that names pytest).
"""

from .noise_checks import NoiseContract, check_closed_forms, check_noise


def __getattr__(name):
    if name in ("ModelContract", "LikelihoodContract"):
        from . import contracts

        return getattr(contracts, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["check_noise", "check_closed_forms", "NoiseContract", "ModelContract", "LikelihoodContract"]

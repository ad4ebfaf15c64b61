"""Constants and noise factories shared by the tests (fixtures live in conftest.py)."""

import math
import os

import pytest
import torch

import pyro_ar
from pyro_ar.datasets import _common, data_search_path

#: environment variable: 1 makes missing external data fail the tests (the tutorials read it too)
REQUIRE_DATA_ENV_VAR = "PYRO_AR_REQUIRE_DATA"


def _named_data_roots():
    """The data roots someone pointed the tests to: ``$PYRO_AR_DATA`` if set, and a source
    checkout's ``../shared/data`` (CI's); not the per-user cache, which holds whatever its user
    fetched."""
    roots = [_common.default_data_dir()] if os.environ.get(_common.DATA_ENV_VAR) else []
    if _common.REPOSITORY_DATA_DIR is not None:
        roots.append(_common.REPOSITORY_DATA_DIR)
    return roots


def data_required() -> bool:
    """Whether a missing external data set (Bibtex, MNIST) fails the tests instead of
    skipping them: when a named data root exists (``$PYRO_AR_DATA``, or CI's
    ``../shared/data``), or ``$PYRO_AR_REQUIRE_DATA`` is 1 / true; a clone with neither skips
    them (``-ra`` lists the reasons) unless told otherwise."""
    flag = os.environ.get(REQUIRE_DATA_ENV_VAR, "").strip().lower()
    if flag in ("0", "false", "no", "off"):
        return False
    return flag in ("1", "true", "yes", "on") or any(r.is_dir() for r in _named_data_roots())


def require_data(name, required):
    """The folder ``<root>/name`` holding the files ``required``, for the first root of
    :func:`pyro_ar.datasets.data_search_path` that has them: fails the test when none does
    and :func:`data_required`, else skips it."""
    roots = data_search_path()
    for root in roots:
        if all((root / name / f).is_file() for f in required):
            return root / name
    message = (f"{name} data not found in {[str(r / name) for r in roots]} (missing some of {list(required)}); "
               f"fetch it with pyro_ar.datasets.fetch_{name}() or set PYRO_AR_DATA")
    if data_required():
        pytest.fail(message + f" (a data root {[str(r) for r in _named_data_roots()]} exists, or "
                    f"{REQUIRE_DATA_ENV_VAR}=1: the data are expected)")
    pytest.skip(message)

#: ``pytest.mark.skipif`` marker for tests that need a CUDA device
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA is not available")

#: devices to parametrize over: cpu always, cuda when present
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
DTYPES = [torch.float32, torch.float64]



# ---- noises -------------------------------------------------------------------------------
# Student-t (3 d.o.f.) and Laplace are library noises (pyro_ar.StudentTNoise, LaplaceNoise);
# one user-defined noise built with pyro_ar.Noise(...) remains, to test that path: the same
# Student-t (3 d.o.f.) from its closed-form CDF, with a sample function taking no generator.

_SQRT3 = math.sqrt(3.0)
_T3_LOG_NORM = math.lgamma(2.0) - math.lgamma(1.5) - 0.5 * math.log(3.0 * math.pi)


def _t3_log_density(e):
    return _T3_LOG_NORM - 2.0 * torch.log1p(e * e / 3.0)


def _t3_log_cdf(x):
    # Student-t with 3 d.o.f.: F(x) = 1/2 + (z / (1 + z^2) + atan z) / pi, z = x / sqrt 3.
    # Evaluated at -|x| (no cancellation in the lower tail), then reflected.
    z = -x.abs() / _SQRT3
    lower = (0.5 + (z / (1.0 + z * z) + torch.atan(z)) / math.pi).clamp(min=torch.finfo(x.dtype).tiny)
    return torch.where(x < 0, torch.log(lower), torch.log1p(-lower))


def _t3_sample(shape, dtype, device):
    df = torch.tensor(3.0, dtype=dtype, device=device)
    return torch.distributions.StudentT(df).sample(shape)


def user_t3_noise():
    """Student-t noise (3 d.o.f.) written by a user with pyro_ar.Noise(...) (closed-form CDF)."""
    return pyro_ar.Noise(log_density=_t3_log_density, log_cdf=_t3_log_cdf,
                         sample=_t3_sample, name="user_t3")


#: names understood by :func:`make_noise`
BUILTIN_NOISES = ["gumbel", "normal", "logistic"]
#: every library noise (get_noise names)
LIBRARY_NOISES = BUILTIN_NOISES + ["laplace", "student_t3"]
USER_NOISES = ["user_t3"]


def make_noise(name):
    """A :class:`pyro_ar.Noise` from a test name (a library name or a user-defined noise)."""
    if name == "user_t3":
        return user_t3_noise()
    return pyro_ar.get_noise(name)

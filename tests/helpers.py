"""Constants and noise factories shared by the tests (fixtures live in conftest.py)."""

import math

import pytest
import torch

import pyro_ar

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

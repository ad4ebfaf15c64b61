"""Shared fixtures for the pyro_ar test suite.

Nothing here is autouse: a test module opts in with
``pytestmark = pytest.mark.usefixtures("seeded")`` (fresh RNG seed and empty param store
before each test), so other modules' random streams are not disturbed.
"""


import os

import pytest
import torch

import pyro
from pyro.infer.util import is_validation_enabled

from tests.helpers import make_noise

# No test downloads a data set: pyro_ar.datasets.fetch_* refuse to by default (a missing data
# set is then a DownloadError that names it), here and in every subprocess the tests start
# (tutorials, the documentation build). tests/datasets/test_fetch.py downloads from a server
# on 127.0.0.1 with download_if_missing=True.
os.environ["PYRO_AR_OFFLINE"] = "1"

# One thread, whatever the shell says: the tests' tensors are small (threads only add contention
# on the 2-core machines README's CPU-time claim is measured on), and README's test command
# then costs what it says as written; the subprocesses the tests start inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
torch.set_num_threads(1)

@pytest.fixture
def seeded():
    """Reset Pyro's (and torch's, numpy's, random's) seed and clear the param store."""
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    yield
    pyro.clear_param_store()


@pytest.fixture
def one_thread():
    """Run one test on one torch thread (small tensors: threads only add contention, and
    bit-identical comparisons need the same reduction order)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def validation_off():
    """Turn Pyro's global validation switch off for one test, restoring it afterwards."""
    previous = is_validation_enabled()
    pyro.enable_validation(False)
    try:
        yield
    finally:
        pyro.enable_validation(previous)


@pytest.fixture
def validation_on():
    previous = is_validation_enabled()
    pyro.enable_validation(True)
    try:
        yield
    finally:
        pyro.enable_validation(previous)


@pytest.fixture
def noise_factory():
    """The function :func:`make_noise` (for tests parametrized by noise name)."""
    return make_noise


@pytest.fixture
def isolated_data_home(monkeypatch, tmp_path):
    """``$PYRO_AR_DATA`` set to an empty ``tmp_path / "home"`` and no repository data folder:
    the loaders and fetchers then see no data set but the package's own."""
    from pyro_ar.datasets import _common

    home = tmp_path / "home"
    monkeypatch.setenv("PYRO_AR_DATA", str(home))
    monkeypatch.setattr(_common, "REPOSITORY_DATA_DIR", None)
    return home


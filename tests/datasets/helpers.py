"""Shared by the tests of pyro_ar.datasets."""

import pytest

from pyro_ar.datasets import default_data_dir


def data_folder(name, required):
    """The real data set's folder below default_data_dir(), or skip the test if absent."""
    folder = default_data_dir() / name
    missing = [f for f in required if not (folder / f).is_file()]
    if missing:
        pytest.skip(f"{name} data not found in {folder} (missing {missing}); set PYRO_AR_DATA")
    return folder

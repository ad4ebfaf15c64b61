"""Shared by the tests of pyro_ar.datasets: ``data_folder(name, files)``, the real data set's
folder below ``default_data_dir()`` (fails the test if absent where the data are expected, as
in CI; skips it otherwise: :func:`tests.helpers.require_data`)."""

from tests.helpers import require_data as data_folder

__all__ = ["data_folder"]

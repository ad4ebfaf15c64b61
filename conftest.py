"""Root pytest configuration: ``pytest --doctest-modules pyro_ar`` runs every docstring example
as ``tests/test_docstrings.py`` does, each from an empty Pyro param store and seed 0.

Pyro's param store is global, so without this an example's parameters (``weight`` of one
shape) are still there when the next example builds a model of another shape.
"""

import pytest
import torch

import pyro


@pytest.fixture(autouse=True)
def _fresh_pyro_state_for_doctests(request):
    if isinstance(request.node, pytest.DoctestItem):
        pyro.clear_param_store()
        torch.manual_seed(0)
    yield

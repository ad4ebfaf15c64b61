"""pyro_ar.testing.contracts as a library: a clear ImportError without pytest, and the O(B)
plate check's patch of torch.randperm undone when the check fails."""

import subprocess
import sys

import pytest
import torch

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.models import LinearClassifier
from pyro_ar.testing import ModelContract
from pyro_ar.likelihoods import AR


def test_without_pytest_the_contracts_name_it_and_the_noise_checks_still_import():
    code = ("import sys; sys.modules['pytest'] = None\n"
            "from pyro_ar.testing import check_noise\n"
            "try:\n    from pyro_ar.testing import ModelContract\n"
            "except ImportError as e:\n    print('ImportError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "ImportError:" in out.stdout and "pytest" in out.stdout, out.stdout


class _FullRandperm(ModelContract):
    """A model whose plate draws torch.randperm(N): the O(B) check must fail, and leave
    torch.randperm as it was."""

    def make_model(self):
        return LinearClassifier(3, 12, likelihood=AR(negatives=3), subsample_size=8)

    def make_data(self):
        d = make_linear_teacher(40, 3, 12, seed=0)
        return d.x, d.y

    def _fitted(self, model, x, y, steps: int = 1):
        svi = super()._fitted(model, x, y, steps)
        guide = svi.guide

        def wasteful_guide(*args):
            torch.randperm(len(x))  # O(N) work per step
            return guide(*args)

        svi.guide = wasteful_guide
        return svi


def test_the_randperm_patch_is_scoped_to_the_check(monkeypatch):
    original = torch.randperm
    with pytest.raises(AssertionError, match="O\\(N\\) work per step"):
        _FullRandperm().test_data_plate_is_o_of_b_and_shared_with_the_default_guide(monkeypatch)
    assert torch.randperm is original

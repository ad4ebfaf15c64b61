"""The top-level namespace is what a user imports: at most 30 names, each one used by the README
or a tutorial (``from pyro_ar import NAME`` or ``ar.NAME`` after ``import pyro_ar as ar``), and
the library's internal helpers stay in their modules."""

import re
from pathlib import Path

import pytest

import pyro_ar

ROOT = Path(__file__).resolve().parent.parent
USER_TEXTS = [ROOT / "README.md"] + sorted((ROOT / "tutorials").glob("[0-9]*.py"))


def _names_used(text: str) -> set:
    """Names a text takes from the top level: ``from pyro_ar import a, b`` (parenthesised lines
    included) and ``<alias>.name`` for every ``import pyro_ar as <alias>`` (and ``pyro_ar.name``)."""
    used = set()
    for group in re.findall(r"from pyro_ar import (\([^)]*\)|[^\n]*)", text):
        used |= set(re.findall(r"\b[A-Za-z_]\w*\b", re.sub(r"#.*", "", group))) - {"as"}
    code = re.sub(r"^\s*from pyro_ar\.[\w.]+ import.*$", "", text, flags=re.M)  # submodule imports
    for alias in set(re.findall(r"\bpyro_ar as (\w+)", text)) | {"pyro_ar"}:
        used |= set(re.findall(rf"(?<![\w.]){alias}\.([A-Za-z_]\w*)", code))
    return used


def test_all_is_small_and_every_name_is_used_by_the_readme_or_a_tutorial():
    used = set().union(*(_names_used(p.read_text()) for p in USER_TEXTS))
    assert len(pyro_ar.__all__) <= 30, len(pyro_ar.__all__)
    assert len(set(pyro_ar.__all__)) == len(pyro_ar.__all__), "a name is listed twice"
    unused = [n for n in pyro_ar.__all__ if n not in used]
    assert not unused, f"top-level names that neither the README nor a tutorial uses: {unused}"


def test_every_exported_name_resolves():
    for name in pyro_ar.__all__:
        assert getattr(pyro_ar, name) is not None, name


def test_the_readme_imports_its_library_names_from_the_top_level():
    """The README's examples import pyro_ar's objects from ``pyro_ar`` itself (a submodule
    import in them means the name is missing from the top level)."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"^```python\n(.*?)^```", readme, flags=re.S | re.M)
    sub = [line for b in blocks for line in b.splitlines() if re.match(r"from pyro_ar\.\w+ import", line)]
    assert not sub, sub


@pytest.mark.parametrize("name", ["check_index", "check_quadrature_args", "gather_entries", "is_sparse_tensor",
                                  "embed_inputs", "DEFAULT_NUM_NODES", "MAX_NUM_NODES", "DEFAULT_NUM_NEGATIVES",
                                  "STRATEGIES", "NOISE_ALIASES"])
def test_internal_helpers_are_not_at_the_top_level(name):
    assert name not in pyro_ar.__all__
    assert not hasattr(pyro_ar, name), f"pyro_ar.{name} is an internal helper: import it from its module"


def test_a_name_used_by_the_readme_is_detected():
    """The detector itself: it finds a top-level name in each form the texts use."""
    assert {"AR", "train", "UtilityCategorical"} <= _names_used(
        "from pyro_ar import (AR,\n   train)  # x\nimport pyro_ar as ar\nar.UtilityCategorical(psi)")
    assert "models" not in _names_used("from pyro_ar.models import LinearClassifier")

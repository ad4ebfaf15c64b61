"""The layering of the package: every module imports only from its own layer or below.

Layers (bottom to top) are listed in docs/architecture.rst. Imports are read from the
source with ``ast`` (module level and function level alike), so a lazy import that goes
upwards is caught too; the deprecated shims are exempt.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "pyro_ar"

#: layer of each top-level module or subpackage (higher imports lower, never the reverse)
LAYERS = {
    "numerics": 0, "files": 0, "quadrature": 1, "negatives": 1, "utility": 1, "optim": 1,
    "data": 1, "noise": 2, "datasets": 2, "weight_pattern": 2, "distributions": 3, "testing": 3, "evaluation": 4,
    "likelihoods": 4, "models": 5, "infer": 6, "estimator": 7, "distributed": 7,
}
#: deprecated shims that re-export from above (one release)
SHIMS = {"bounds.py", "metrics.py", "language_model.py", "infer/bayesian.py", "infer/training.py"}
#: upward imports that are allowed (all lazy, inside one function): a model's one-line
#: default_guide convenience, and Noise.distribution() building its NoiseDistribution
ALLOWED = {("models", "infer"), ("noise", "distributions")}


def _top(module: str) -> str:
    return module.split(".")[0]


def _imports(path: pathlib.Path):
    rel = path.relative_to(PACKAGE)
    own = rel.parts[0].removesuffix(".py")
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.startswith("pyro_ar."):
                    yield own, _top(node.module[len("pyro_ar."):])
                continue
            if node.level == 1 and len(rel.parts) == 1 or node.level == 2 and len(rel.parts) == 2:
                if node.module:
                    yield own, _top(node.module)
                else:
                    for alias in node.names:
                        yield own, alias.name
            # level 1 inside a subpackage: its own package, same layer


FILES = [p for p in sorted(PACKAGE.rglob("*.py")) if str(p.relative_to(PACKAGE)) not in SHIMS]


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path):
    for own, target in _imports(path):
        if own not in LAYERS or target not in LAYERS or own == target:
            continue
        assert LAYERS[target] <= LAYERS[own] or (own, target) in ALLOWED, (
            f"{path.relative_to(PACKAGE)} (layer {own}) imports {target}, a higher layer")


def test_an_upward_import_is_caught(tmp_path, monkeypatch):
    """The checker itself: a ground module importing the models package is reported."""
    fake = PACKAGE / "negatives.py"
    imports = set(_imports(fake))
    assert all(LAYERS[t] <= LAYERS["negatives"] for o, t in imports if t in LAYERS)
    tree_src = "def f():\n    from .models import LinearClassifier\n"
    monkeypatch.setattr(pathlib.Path, "read_text", lambda self, *a, **k: tree_src)
    assert ("negatives", "models") in set(_imports(fake))


def test_every_module_has_a_layer():
    names = {p.relative_to(PACKAGE).parts[0].removesuffix(".py") for p in PACKAGE.glob("*")
             if (p.suffix == ".py" or p.is_dir()) and not p.name.startswith("__")}
    missing = names - set(LAYERS) - {s.split("/")[0].removesuffix(".py") for s in SHIMS}
    assert not missing, f"modules without a layer in tests/test_architecture.py: {sorted(missing)}"

"""Write the intersphinx inventories ``docs/_inventories/*.inv`` from the installed packages.

The documentation links to Python, torch, Pyro, NumPy and scikit-learn through intersphinx,
but the docs build has no network. Instead of downloading each project's ``objects.inv``,
this script imports the objects the docs refer to, finds what they are (module, class,
exception, function, method, property, data) and under which names they are reachable (the
public name and the defining module's name, e.g. ``pyro.distributions.TorchDistribution`` and
``pyro.distributions.torch_distribution.TorchDistribution``, which autodoc writes for base
classes), and writes a small Sphinx v2 inventory per project whose links follow that
project's documentation URL scheme (e.g.
``https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module``).

Usage (from the repository root)::

    python docs/make_inventories.py           # the names in NEEDED
    python docs/make_inventories.py --scan    # plus every foreign name a docs build leaves unresolved

``--scan`` builds the docs once (notebooks not executed) with ``PYRO_AR_DOCS_RECORD`` set:
``conf.py`` then records the references it could not resolve. Re-run it when a docstring
starts naming a new torch / Pyro / NumPy / scikit-learn / Python object.
"""

from __future__ import annotations

import argparse
import builtins
import importlib
import inspect
import os
import subprocess
import sys
import tempfile
import zlib
from typing import Callable, Dict, Iterable, List, Optional, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "_inventories")

#: project -> names the docs refer to (public spellings); ``--scan`` adds the rest
NEEDED: Dict[str, List[str]] = {
    "python": [
        "str", "int", "float", "bool", "dict", "list", "tuple", "object", "None", "callable",
        "ValueError", "TypeError", "RuntimeError", "ImportError", "FileNotFoundError", "KeyError",
        "collections.abc.Callable", "typing.NamedTuple", "typing.Any", "typing.Optional",
        "tarfile", "os.PathLike", "pathlib.Path",
    ],
    "torch": [
        "torch.Tensor", "torch.Tensor.expand", "torch.Size", "torch.dtype", "torch.device",
        "torch.Generator", "torch.nn.Module", "torch.optim.Optimizer",
        "torch.distributions.Distribution", "torch.distributions.constraints.Constraint",
        "torch.utils.data.DataLoader",
    ],
    "pyro": [
        "pyro.plate", "pyro.nn.PyroModule", "pyro.module", "pyro.param", "pyro.sample", "pyro.infer.SVI", "pyro.infer.Trace_ELBO",
        "pyro.infer.TraceMeanField_ELBO", "pyro.infer.autoguide.AutoGuide",
        "pyro.infer.autoguide.AutoGuideList", "pyro.infer.autoguide.AutoNormal",
        "pyro.infer.autoguide.AutoDelta", "pyro.optim.PyroOptim", "pyro.optim.PyroLRScheduler",
        "pyro.distributions.TorchDistribution", "pyro.distributions.Gumbel",
        "pyro.distributions.Categorical",
    ],
    "numpy": ["numpy.ndarray", "numpy.asarray"],
    "sklearn": [
        "sklearn.base.BaseEstimator", "sklearn.base.ClassifierMixin",
        "sklearn.datasets.load_digits", "sklearn.datasets.load_svmlight_files",
        "sklearn.linear_model.LogisticRegression", "sklearn.preprocessing.StandardScaler",
    ],
}
TOP_LEVEL = {"torch": "torch", "pyro": "pyro", "numpy": "numpy", "sklearn": "sklearn"}


def import_path(path: str):
    """The object named by a dotted path (``builtins`` for bare names)."""
    if "." not in path:
        if path == "None":
            return None
        try:
            return importlib.import_module(path)
        except ImportError:
            return getattr(builtins, path)
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


def role_of(name: str, obj) -> str:
    """The Sphinx object type of ``obj`` (``py:class``, ``py:method``, ...)."""
    if inspect.ismodule(obj):
        return "py:module"
    if inspect.isclass(obj):
        return "py:exception" if issubclass(obj, BaseException) else "py:class"
    if name.count(".") and inspect.isclass(import_path(name.rsplit(".", 1)[0])):
        return "py:property" if isinstance(obj, property) else "py:method"
    if callable(obj):
        return "py:function"
    return "py:data"


def canonical_name(obj) -> Optional[str]:
    """``module.qualname`` where the object is defined, when it has one."""
    module, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if inspect.ismodule(obj) or not module or not qual or "<" in qual:
        return None
    return f"{module}.{qual}"


# ---------------------------------------------------------------- URL schemes per project
def python_url(name: str, obj) -> str:
    if "." not in name and not inspect.ismodule(obj):
        if obj is None:
            return "library/constants.html#None"
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            return f"library/exceptions.html#{name}"
        if name in ("str", "int", "float", "bool", "complex", "list", "tuple", "dict", "set",
                    "frozenset", "bytes", "range"):
            return f"library/stdtypes.html#{name}"
        return f"library/functions.html#{name}"
    if inspect.ismodule(obj):
        return f"library/{name}.html#module-{name}"
    module = name.rsplit(".", 1)[0]
    return f"library/{module}.html#{name}"


def torch_url(name: str, obj) -> str:
    if name == "torch.Tensor":
        return "tensors.html#torch.Tensor"
    if name == "torch.Size":
        return "size.html#torch.Size"
    if name in ("torch.dtype", "torch.device"):
        return f"tensor_attributes.html#{name}"
    if name.startswith("torch.distributions."):
        return f"distributions.html#{canonical_name(obj) or name}"
    if name.startswith("torch.optim."):
        return f"optim.html#{name}"
    if name.startswith("torch.utils.data."):
        return f"data.html#{name}"
    return f"generated/{name}.html#{name}"


#: Pyro's documentation pages, by public prefix (first match wins)
PYRO_PAGES: List[Tuple[str, str]] = [
    ("pyro.distributions.", "distributions.html"),
    ("pyro.infer.autoguide.", "infer.autoguide.html"),
    ("pyro.infer.", "inference_algos.html"),
    ("pyro.optim.", "optimization.html"),
    ("pyro.nn.", "nn.html"),
    ("pyro.", "primitives.html"),
]
#: objects Pyro documents under their defining module's name (``.. automodule:: pyro.infer.svi``)
PYRO_BY_MODULE = ("pyro.infer.", "pyro.nn.", "pyro.optim.optim.", "pyro.optim.clipped_adam.",
                  "pyro.distributions.torch.")


def pyro_url(name: str, obj) -> str:
    canonical = canonical_name(obj) or name
    by_module = canonical.startswith(PYRO_BY_MODULE) and not canonical.startswith("pyro.infer.autoguide.")
    for prefix, page in PYRO_PAGES:
        if name.startswith(prefix):
            return f"{page}#{canonical if by_module else name}"
    raise ValueError(f"no Pyro page for {name}")


def numpy_url(name: str, obj) -> str:
    return f"reference/generated/{name}.html#{name}"


def sklearn_url(name: str, obj) -> str:
    return f"modules/generated/{name}.html#{name}"


URLS: Dict[str, Callable] = {"python": python_url, "torch": torch_url, "pyro": pyro_url,
                             "numpy": numpy_url, "sklearn": sklearn_url}


def project_of(name: str) -> str:
    return TOP_LEVEL.get(name.split(".")[0], "python")


def entries(project: str, names: Iterable[str]) -> List[Tuple[str, str, str]]:
    """``(name, role, uri)`` for each name and the defining module's spelling of it."""
    rows = {}
    for name in sorted(set(names)):
        obj = import_path(name)
        uri = URLS[project](name, obj)
        role = role_of(name, obj)
        for spelling in (name, canonical_name(obj)):
            if spelling and spelling.startswith("builtins."):
                continue  # Sphinx writes builtins by their bare name
            if spelling and project_of(spelling) == project and spelling not in rows:
                rows[spelling] = (spelling, role, uri)
    return sorted(rows.values())


def write_inventory(path: str, project: str, version: str, rows) -> None:
    """A Sphinx v2 ``objects.inv``: a text header, then zlib-compressed lines."""
    body = "".join(f"{name} {role} 1 {uri.replace('#' + name, '#$') if uri.endswith('#' + name) else uri} -\n"
                   for name, role, uri in rows)
    header = ("# Sphinx inventory version 2\n"
              f"# Project: {project}\n# Version: {version}\n"
              "# The remainder of this file is compressed using zlib.\n")
    with open(path, "wb") as f:
        f.write(header.encode() + zlib.compress(body.encode(), 9))


def scan() -> Dict[str, List[str]]:
    """Foreign names a docs build (notebooks not executed) leaves unresolved, by project."""
    with tempfile.TemporaryDirectory() as tmp:
        record = os.path.join(tmp, "refs.txt")
        env = dict(os.environ, PYRO_AR_DOCS_RECORD=record, PYRO_AR_DOCS_EXECUTE="off")
        subprocess.run([sys.executable, "-m", "sphinx", "-E", "-q", "-b", "html", HERE,
                        os.path.join(tmp, "html")], env=env, check=False)
        names = open(record).read().split() if os.path.exists(record) else []
    found: Dict[str, List[str]] = {}
    for name in names:
        try:
            import_path(name)
        except (ImportError, AttributeError):
            continue  # not an importable object (a typo or a plain word)
        found.setdefault(project_of(name), []).append(name)
    return found


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scan", action="store_true", help="add the names a docs build leaves unresolved")
    args = parser.parse_args(argv)
    needed = {k: list(v) for k, v in NEEDED.items()}
    if args.scan:
        for project, names in scan().items():
            needed[project].extend(names)
    os.makedirs(OUT, exist_ok=True)
    for project, names in needed.items():
        module = importlib.import_module(TOP_LEVEL.get(project, "sys"))
        version = getattr(module, "__version__", None) or ".".join(map(str, sys.version_info[:2]))
        rows = entries(project, names)
        path = os.path.join(OUT, f"{project}.inv")
        write_inventory(path, project, str(version).split("+")[0], rows)
        print(f"{path}: {len(rows)} objects, {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()

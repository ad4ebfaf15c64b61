"""Sphinx configuration of the pyro_ar documentation.

Built in CI (tests/test_docs.py) in nitpicky mode with warnings as errors
(``sphinx -n -W``), without network access:

* cross-references to torch, Pyro, NumPy, scikit-learn and Python resolve through
  intersphinx inventories committed under ``_inventories/`` (written from the installed
  packages by ``make_inventories.py``; the links point to each project's online docs);
* MathJax is served from the build's own ``_static`` folder (``sphinx-mathjax-offline``);
* the tutorials (``tutorials/NN_*.py``, jupytext percent scripts) are executed as Jupyter
  notebooks at their quick size by myst-nb and rendered with their figures.
"""

import importlib
import os
import sys
import tempfile

from sphinx.ext import intersphinx
from sphinx.util.nodes import make_refnode

DOCS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(DOCS_DIR))

project = "pyro_ar"
author = "the pyro_ar developers"
copyright = "2026, the pyro_ar developers"
from pyro_ar import __version__ as release  # noqa: E402  (the version lives in pyro_ar/__init__.py only)

version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",  # the dataset loaders use Google-style "Args:" sections
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax from _static/, not from a CDN
    "sphinx.ext.intersphinx",
    "sphinx.ext.viewcode",
    "myst_nb",  # the tutorials, executed as Jupyter notebooks
]
autodoc_member_order = "bysource"
autodoc_typehints = "none"  # signatures show the defaults; types are in the docstrings
autodoc_default_options = {"members": True, "show-inheritance": True}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
nitpicky = True
exclude_patterns = ["_build", "_ext", "_inventories", "conf.py", "make_inventories.py", "tutorials/_*",
                    "tutorials/figures", "**/.ipynb_checkpoints"]
html_theme = "alabaster"
html_static_path = []

# ------------------------------------------------------------------------ the tutorials
#: the repository's tutorials (``NN_slug.py``, jupytext percent format) are copied to
#: ``docs/tutorials/`` (not committed) with their helper ``_tutorial.py``, so that every
#: tutorial, including ones added later, becomes a page; myst-nb reads them through jupytext
#: and executes them in a Jupyter kernel whose working directory is that folder.
TUTORIALS_SRC = os.path.join(os.path.dirname(DOCS_DIR), "tutorials")
TUTORIALS_DST = os.path.join(DOCS_DIR, "tutorials")


def _copy_tutorials():
    os.makedirs(TUTORIALS_DST, exist_ok=True)
    wanted = {n for n in os.listdir(TUTORIALS_SRC)
              if n == "_tutorial.py" or (n[:2].isdigit() and n[2] == "_" and n.endswith(".py"))}
    for name in sorted(set(os.listdir(TUTORIALS_DST)) - wanted):
        if name.endswith(".py"):  # a tutorial renamed or removed since the last build
            os.remove(os.path.join(TUTORIALS_DST, name))
    for name in sorted(wanted):
        src, dst = os.path.join(TUTORIALS_SRC, name), os.path.join(TUTORIALS_DST, name)
        with open(src, "rb") as f:
            text = f.read()
        if os.path.exists(dst):
            with open(dst, "rb") as f:
                if f.read() == text:  # unchanged: keep Sphinx's cache valid
                    continue
        with open(dst, "wb") as f:
            f.write(text)


_copy_tutorials()
sys.path.insert(0, os.path.join(DOCS_DIR, "_ext"))
nb_custom_formats = {".py": "percent_reader.read_percent_script"}
#: ``PYRO_AR_DOCS_EXECUTE=off`` builds without running the tutorials (their pages then have no
#: output); the default runs each one at its quick size
nb_execution_mode = os.environ.get("PYRO_AR_DOCS_EXECUTE", "force")
nb_execution_timeout = 900
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
# the kernel inherits this environment: quick size, inline figures, files outside the tree,
# and the external data (Bibtex for tutorial 02, MNIST for 06) required: before any tutorial
# runs, _check_tutorial_data finds them or fetches them into the data home, and otherwise
# stops the build with a message on screen saying why and how to build without them, instead
# of publishing placeholder pages (PYRO_AR_REQUIRE_DATA=0 builds them anyway, for a local look)
os.environ["PYRO_AR_QUICK"] = "1"
os.environ.setdefault("PYRO_AR_REQUIRE_DATA", "1")
os.environ.pop("MPLBACKEND", None)
os.environ.setdefault("PYRO_AR_FIGURES", os.path.join(tempfile.gettempdir(), "pyro_ar_docs_figures"))

# ---------------------------------------------------------------- intersphinx (offline)
#: project -> (documentation root, local inventory): the links go to the online docs, the
#: inventory is read from the repository (``make_inventories.py`` writes it)
intersphinx_mapping = {
    name: (url, os.path.join(DOCS_DIR, "_inventories", f"{name}.inv"))
    for name, url in {
        "python": "https://docs.python.org/3/",
        "torch": "https://pytorch.org/docs/stable/",
        "pyro": "https://docs.pyro.ai/en/stable/",
        "numpy": "https://numpy.org/doc/stable/",
        "sklearn": "https://scikit-learn.org/stable/",
    }.items()
}
intersphinx_timeout = 1  # never wait for a network (the inventories are local files)

#: short type names written in docstrings (``Args: x (Tensor): ...``) -> their full name
_TYPE_ALIASES = {
    "Tensor": "torch.Tensor",
    "Module": "torch.nn.Module",
    "callable": "collections.abc.Callable",
    "Dataset": "pyro_ar.datasets.Dataset",
}


# ------------------------------------------------------------ re-exported names resolve
def _import_path(path):
    """The object named by a dotted ``path`` (module, then attributes), or None."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:  # noqa: BLE001  (not a module: try a shorter prefix)
            continue
        try:
            for attr in parts[i:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def _documented_by_identity(app, env):
    """``id(object) -> documented full name`` over every Python object in the API reference.

    Computed once per build, when the first reference is resolved (all documents are read
    by then); kept on the application, not on the pickled environment (ids change between
    processes).
    """
    cache = getattr(app, "_pyro_ar_by_identity", None)
    if cache is None:
        cache = {}
        for name, entry in sorted(env.get_domain("py").objects.items()):
            if entry.objtype == "module" or getattr(entry, "aliased", False):
                continue
            obj = _import_path(name)
            if obj is not None and not isinstance(obj, (int, float, str, tuple, bool, type(None))):
                cache.setdefault(id(_unwrap(obj)), name)
        app._pyro_ar_by_identity = cache
    return cache


def _refnode(app, py, node, contnode, name):
    entry = py.objects[name]
    return make_refnode(app.builder, node["refdoc"], entry.docname, entry.node_id, contnode, name)


def _unwrap(obj):
    return getattr(obj, "__func__", obj)


def _resolve_reexports(app, env, node, contnode):
    """Resolve a Python reference to the place the object is documented.

    The package re-exports its main objects (``pyro_ar.AugmentedCategorical`` is
    ``pyro_ar.distributions.augmented.AugmentedCategorical``) and docstrings name objects
    relative to their module (``:class:`Dataset``` inside ``pyro_ar.datasets.arff``); the
    API reference documents each object once, where it is defined. The target is imported
    (as written, then relative to the current class and module) and the reference is made
    to the documented name of the same object.
    """
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"].lstrip("~.")
    target = _TYPE_ALIASES.get(target, target)
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = [target]
    if module and cls:
        candidates.append(f"{module}.{cls}.{target}")
    if module:
        candidates.append(f"{module}.{target}")
    py = env.get_domain("py")
    by_identity = _documented_by_identity(app, env)
    for candidate in candidates:
        if candidate in py.objects:  # (a role of another type: :func: for a class)
            name = candidate
        else:
            obj = _import_path(candidate)
            name = by_identity.get(id(_unwrap(obj))) if obj is not None else None
        if name is not None:
            return _refnode(app, py, node, contnode, name)
    name = _unique_suffix_match(py, target, module) if "." not in target else None
    if name is not None:
        return _refnode(app, py, node, contnode, name)
    if target != node["reftarget"] or node.get("reftype") != "obj":  # a foreign name: intersphinx
        aliased = node.deepcopy()
        aliased["reftarget"] = target
        aliased["reftype"] = "obj"  # any object type (``:class:`torch.Tensor.expand``` is a method)
        found = intersphinx.missing_reference(app, env, aliased, contnode)
        if found is None and os.environ.get("PYRO_AR_DOCS_RECORD"):  # make_inventories.py --scan
            with open(os.environ["PYRO_AR_DOCS_RECORD"], "a") as f:
                f.write(target + "\n")
        return found
    return None


def _unique_suffix_match(py, target, module):
    """The one documented ``pyro_ar`` object named ``target`` (in ``module`` first), or None.

    Lets a docstring name a documented object by its short name (``:meth:`utility``` in a
    module docstring, ``Utility`` as a type) when that name is unambiguous.
    """
    matches = [n for n in py.objects if n.startswith("pyro_ar.") and n.endswith("." + target)]
    local = [n for n in matches if module and n.startswith(module + ".")]
    if local:  # e.g. ``Utility.full`` before its subclasses' ``full``: the first documented
        return local[0]
    return matches[0] if len(matches) == 1 else None


def _public_bases(app, name, obj, options, bases):
    """Show a private base class (``_LocalGuide``) as the public classes it derives from."""
    public = []
    for base in bases:
        stack = [base]
        while stack:
            b = stack.pop(0)
            if _is_private(b):
                stack[:0] = [c for c in b.__bases__ if c is not object]
            elif b not in public:
                public.append(b)
    bases[:] = public or [object]


def _is_private(cls):
    """A pyro_ar class not in the API reference: ``_Name``, or in a private module and not re-exported."""
    module = getattr(cls, "__module__", "") or ""
    if cls is object or not module.startswith("pyro_ar"):
        return False
    if cls.__name__.startswith("_"):
        return True
    parts = module.split(".")
    private = [i for i, p in enumerate(parts) if p.startswith("_")]
    if not private:
        return False
    parent = importlib.import_module(".".join(parts[: private[0]]))
    return getattr(parent, cls.__name__, None) is not cls


def _skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out members generated by scikit-learn on the estimator (metadata routing)."""
    module = getattr(obj, "__module__", None) or ""
    if module.startswith("sklearn"):
        return True
    return None


#: the data sets the tutorials read that the package does not ship: (what, fetcher's name)
TUTORIAL_DATA = (("Bibtex (tutorial 02)", "fetch_bibtex"), ("MNIST (tutorial 06)", "fetch_mnist"))


def _check_tutorial_data(app=None):
    """When the tutorials run and need their data (``PYRO_AR_REQUIRE_DATA=1``, the default),
    find each data set on this machine or download it into the data home
    (``pyro_ar.datasets.fetch_*``), printing where it is; if one is missing and cannot be
    downloaded, stop the build before any tutorial runs (exit status 2) with a message on
    screen: its first line says what the build needs and how to build without it, the next
    ones why each data set could not be had (the file, its URL, where to put it by hand).
    (A plain ``SystemExit``: Sphinx would print a raised error after its version report and
    traceback, far from the reason.)"""
    if nb_execution_mode == "off" or os.environ.get("PYRO_AR_REQUIRE_DATA", "").strip().lower() not in (
            "1", "true", "yes", "on"):
        return
    import pyro_ar.datasets as datasets

    problems = []
    for what, name in TUTORIAL_DATA:
        try:
            print(f"pyro_ar docs: {what} in {getattr(datasets, name)()}", flush=True)
        except (datasets.DownloadError, datasets.ChecksumError) as err:
            problems.append(f"* {what}: {err}")
    if problems:
        print("pyro_ar docs: stopped: tutorials 02 and 06 need Bibtex and MNIST (downloaded into the data home "
              "when online); to build without them: PYRO_AR_REQUIRE_DATA=0 python -m sphinx -b html docs "
              "docs/_build/html (those two tutorials then run with their fallbacks and say so on their pages)\n"
              + "\n".join(problems), file=sys.stderr, flush=True)
        raise SystemExit(2)


def setup(app):
    app.connect("builder-inited", _check_tutorial_data)
    app.connect("autodoc-skip-member", _skip_foreign_members)
    app.connect("autodoc-process-bases", _public_bases)
    app.connect("missing-reference", _resolve_reexports, priority=400)

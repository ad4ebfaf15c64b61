"""The examples in the docstrings run and print what they say (doctest)."""

import doctest
import importlib
import pkgutil

import pytest
import torch

import pyro

import pyro_ar


def _find_modules():
    """Every module of the package (found with pkgutil, not a hand-kept list)."""
    return sorted(["pyro_ar"] + [info.name for info in pkgutil.walk_packages(pyro_ar.__path__, "pyro_ar.")])


MODULES = _find_modules()


@pytest.mark.parametrize("module", MODULES)
def test_docstring_examples_run(module):
    mod = importlib.import_module(module)
    pyro.clear_param_store()
    torch.manual_seed(0)
    finder = doctest.DocTestFinder(exclude_empty=True)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for test in finder.find(mod, module, globs={}):
        if test.examples:
            pyro.clear_param_store()
            runner.run(test)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples failed in {module}"


def test_every_public_object_shows_an_example():
    """Every public class and function (each module's __all__) has a doctest example, which
    test_docstring_examples_run executes."""
    import inspect

    total, missing = 0, []
    for module in MODULES:
        if module == "pyro_ar":  # re-exports only
            continue
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                total += 1
                doc = inspect.getdoc(obj) or ""
                if ">>>" not in doc:
                    missing.append(f"{module}.{name}")
    assert not missing, f"{len(missing)} of {total} public objects have no example: {missing}"

"""The examples in the docstrings run and print what they say (doctest)."""

import doctest
import importlib

import pytest
import torch

import pyro

MODULES = [
    "pyro_ar", "pyro_ar.noise", "pyro_ar.utility", "pyro_ar.quadrature", "pyro_ar.negatives",
    "pyro_ar.distributions", "pyro_ar.bounds", "pyro_ar.optim", "pyro_ar.models",
    "pyro_ar.metrics", "pyro_ar.datasets", "pyro_ar.estimator", "pyro_ar.language_model",
    "pyro_ar.infer.local_guides", "pyro_ar.infer.elbo", "pyro_ar.infer.training",
    "pyro_ar.infer.bayesian",
]


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

    total, with_example = 0, 0
    for module in MODULES[1:]:
        mod = importlib.import_module(module)
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                total += 1
                doc = inspect.getdoc(obj) or ""
                with_example += ">>>" in doc
    assert with_example == total, (with_example, total)

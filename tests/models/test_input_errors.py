"""Issue 25, item 12: bad inputs meet a ValueError naming the argument before any guide
touches them (the guide runs first in an SVI step: before, users met IndexError,
RuntimeError, ZeroDivisionError, AttributeError or "plate mismatch").

Each row: a model, the inputs of one ``SVI.step`` with the model's default guide, and the
message expected. Every model's and guide's call goes through
``CategoricalModel.create_plates``, which checks shapes and dtypes and the minibatch's
labels first; ``check_data`` checks the whole data (``train`` calls it once).
"""

import math

import numpy as np
import pytest
import torch

import pyro
from pyro.infer import SVI

from pyro_ar.estimator import ARClassifier
from pyro_ar.infer import default_elbo, default_guide
from pyro_ar.models import (
    BayesianLinearClassifier,
    BayesianNeuralClassifier,
    BigramLanguageModel,
    CategoricalLatentGP,
    CategoricalLatentModel,
    LinearClassifier,
    NeuralClassifier,
)
from pyro_ar.optim import lazy_adam
from pyro_ar.likelihoods import AR
from pyro_ar.models import Init, LocalPosterior, SparseGPMap
from pyro_ar.negatives import SharedNegatives

pytestmark = pytest.mark.usefixtures("seeded")

L = torch.long


def _latent(**kw):
    return CategoricalLatentModel(50, 2, likelihood=AR(negatives=SharedNegatives(5)), **kw)


def _neural(**kw):
    return NeuralClassifier(torch.nn.Linear(3, 4), 4, 10, **kw)


def _bayes():
    return BayesianLinearClassifier(3, 10, likelihood=AR(negatives=3))


def _clgp():
    return CategoricalLatentGP([3, 4], utility=SparseGPMap(2, 4))


CASES = {
    "latent: items = P": (_latent, lambda: (torch.tensor([[1, 50]]),), r"items must lie in \[0, 50\).*items\[0, 1\]"),
    "latent: items < -1": (_latent, lambda: (torch.tensor([[1, -2]]),), r"items must lie in \[0, 50\)"),
    "latent: float items": (_latent, lambda: (torch.tensor([[1.0, 2.0]]),), r"items must be a 2-D integer tensor"),
    "latent: 0 rows": (_latent, lambda: (torch.zeros(0, 3, dtype=L),), r"items has 0 rows"),
    "latent: no item slots": (_latent, lambda: (torch.zeros(40, 0, dtype=L),),  # was a ZeroDivisionError
                              r"items must have at least one item slot per session \(a column\), got \(40, 0\)"),
    "latent: local, no item slots": (lambda: _latent(posterior=LocalPosterior(40, 2, 50)),
                                     lambda: (torch.zeros(40, 0, dtype=L),), r"items must have at least one item slot"),
    "latent: a list": (_latent, lambda: ([[1, 2]],), r"items must be a 2-D integer tensor.*list"),
    "latent: local, new sessions": (lambda: _latent(posterior=LocalPosterior(2, 2, 50)),
                                    lambda: (torch.tensor([[1, 2], [3, 4], [5, 6]]),),
                                    r"items has 3 rows but posterior='local' holds the 2"),
    "neural: float64 x": (_neural, lambda: (torch.zeros(5, 3, dtype=torch.float64), torch.zeros(5, dtype=L)),
                          r"body could not map x of shape \(5, 3\) and dtype torch.float64"),
    "neural: integer x": (_neural, lambda: (torch.zeros(5, 3, dtype=L), torch.zeros(5, dtype=L)),
                          r"body could not map x .* dtype torch.int64"),
    "neural: wrong width": (_neural, lambda: (torch.zeros(5, 2), torch.zeros(5, dtype=L)),
                            r"body could not map x of shape \(5, 2\)"),
    "neural: y = -1": (_neural, lambda: (torch.zeros(5, 3), torch.full((5,), -1)), r"y must lie in \[0, 10\)"),
    "neural, normal noise: y = K": (lambda: _neural(likelihood=AR("normal")), lambda: (torch.zeros(5, 3), torch.full((5,), 10)),
                                    r"y must lie in \[0, 10\).*y\[0\]"),
    "bayes: y = -1": (_bayes, lambda: (torch.zeros(5, 3), torch.full((5,), -1)), r"y must lie in \[0, 10\)"),
    "bayes: y = K": (_bayes, lambda: (torch.zeros(5, 3), torch.tensor([0, 1, 10, 2, 3])),
                     r"y must lie in \[0, 10\).*the first at y\[2\]"),
    "bayes: float y": (_bayes, lambda: (torch.zeros(5, 3), torch.full((5,), 0.5)), r"y must hold integer class labels"),
    "bayes: 0 rows": (_bayes, lambda: (torch.zeros(0, 3), torch.zeros(0, dtype=L)), r"x has 0 rows"),
    "bayesian neural: y = -1": (lambda: BayesianNeuralClassifier(torch.nn.Linear(3, 4), 4, 10,
                                                                 likelihood=AR(negatives=3)),
                                lambda: (torch.zeros(5, 3), torch.full((5,), -1)), r"y must lie in \[0, 10\)"),
    "clgp: x = K_d": (_clgp, lambda: (torch.tensor([[3, 1], [2, 3]]),), r"x\[:, 0\] must lie in \[0, 3\).*x\[0, 0\]=3"),
    "clgp: float x": (_clgp, lambda: (torch.tensor([[0.0, 1.0]]),), r"x must be a 2-D integer tensor"),
    "clgp: 0 rows": (_clgp, lambda: (torch.zeros(0, 2, dtype=L),), r"x has 0 rows"),
    "bigram: prev = K": (lambda: BigramLanguageModel(10, 4, likelihood=AR(negatives=SharedNegatives(3))),
                         lambda: (torch.tensor([1, 10]), torch.tensor([1, 2])), r"prev must lie in \[0, 10\).*prev\[1\]"),
    "linear: y = -1": (lambda: LinearClassifier(3, 10), lambda: (torch.zeros(5, 3), torch.full((5,), -1)),
                       r"y must lie in \[0, 10\)"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_bad_input_meets_a_named_error_before_the_guide(case, validation_off):
    """With Pyro's validation off too: the checks are the models', not the distributions'."""
    make, inputs, match = CASES[case]
    model = make()
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    with pytest.raises(ValueError, match=match):
        svi.step(*inputs())


@pytest.mark.parametrize("kwargs,match", [
    (lambda: dict(utility=SparseGPMap(2, 32, lengthscale=-1.0)), "lengthscale must be a finite number > 0, got lengthscale=-1.0"),
    (lambda: dict(utility=SparseGPMap(2, 32, lengthscale=math.nan)), "lengthscale must be a finite number > 0, got lengthscale=nan"),
    (lambda: dict(utility=SparseGPMap(2, 32, lengthscale=math.inf)), "lengthscale"),
    (lambda: dict(utility=SparseGPMap(2, 32, variance=0.0)), "variance must be a finite number > 0"),
    (lambda: dict(init=Init(posterior_scale=-0.1)), "init.posterior_scale must be a finite number > 0"),
    (lambda: dict(utility=SparseGPMap(2, 32, lengthscale="1")), "lengthscale must be a finite number > 0"),
])
def test_clgp_kernel_arguments_are_checked(kwargs, match):
    """Before: lengthscale=-1 gave "math domain error", nan failed later in a Cholesky."""
    with pytest.raises(ValueError, match=match):
        CategoricalLatentGP([3, 4], **kwargs())


@pytest.mark.parametrize("model,data,match", [
    (lambda: _latent(), (torch.tensor([[1, 2], [3, 4], [5, 77]]),), r"items\[2, 1\]"),
    (lambda: BigramLanguageModel(10, 4, likelihood=AR(negatives=SharedNegatives(3))),
     (torch.tensor([1, 2, 3, 4]), torch.tensor([1, 2, 3, 12])), r"next must lie in \[0, 10\).*next\[3\]"),
    (lambda: _clgp(), (torch.tensor([[0, 1], [2, 3], [1, 4]]),), r"x\[:, 1\] must lie in \[0, 4\).*x\[2, 1\]=4"),
    (lambda: LinearClassifier(3, 10), (torch.tensor([[0.0, 1.0, 2.0], [1.0, math.nan, 0.0]]), torch.tensor([1, 2])),
     r"x must be finite.*x\[1, 1\]"),
])
def test_check_data_names_the_first_bad_row(model, data, match):
    with pytest.raises(ValueError, match=match):
        model().check_data(*data)


def test_estimator_warm_start_with_another_feature_count_is_named():
    """Before: a numpy broadcast error from the standardisation; the fitted state stays."""
    rng = np.random.RandomState(0)
    X, y = rng.randn(60, 3), rng.randint(0, 3, 60)
    clf = ARClassifier(max_epochs=2, warm_start=True, random_state=0).fit(X, y)
    before = clf.predict_proba(X)
    for width in (2, 6):
        with pytest.raises(ValueError, match=f"warm_start=True continues the fit on 3 features, got X with {width}"):
            clf.fit(rng.randn(60, width), y)
    assert clf.n_features_in_ == 3 and np.array_equal(clf.predict_proba(X), before)


def test_steps_skip_the_label_check_only_for_the_data_check_data_passed(monkeypatch):
    """After ``check_data`` (what ``train`` calls once), a step on those very tensors does not
    check its minibatch's labels again (each check synchronises a GPU with the host); a
    modified, copied or other label tensor is checked at every call."""
    model = LinearClassifier(3, 4)
    x, y = torch.randn(6, 3), torch.tensor([0, 1, 2, 3, 0, 1])
    calls = []
    check = model.check_batch
    monkeypatch.setattr(model, "check_batch", lambda *a: calls.append(1) or check(*a))
    model(x, y)
    assert len(calls) == 1
    model.check_data(x, y)
    model(x, y)
    assert len(calls) == 1  # skipped: the same, unchanged tensors
    model(x, y.clone())
    assert len(calls) == 2  # another tensor with the same values: checked
    y[2] = 7  # written in place after the check: checked again, and refused
    with pytest.raises(ValueError, match=r"y must lie in \[0, 4\), got \[7\] \(the first at y\[2\]\)"):
        model(x, y)


def test_neural_utility_of_no_rows_is_empty():
    """``utility(x[:0])`` failed in ``torch.cat`` of no chunks (issue 38); it is (0, K)."""
    model = _neural()
    assert model.utility(torch.zeros(0, 3)).full().shape == (0, 10)
    assert model.utility(torch.zeros(5, 3)).full().shape == (5, 10)

"""The likelihood of every model is given at one level (pyro_ar.models.base.CategoricalModel).

A model takes a Likelihood object, which carries its noise and negatives, or a name with the
string shortcut's keywords (``noise``, ``num_negatives``, ``strategy``, ``proposal``), each left
at ``DEFAULT`` meaning the model's ``likelihood_defaults``. Over every model class:

(a) an object together with a keyword the caller set is a ValueError naming the keyword (it
    was silently ignored before);
(b) a name with keywords gives the likelihood those keywords describe;
(c) a name without keywords gives the likelihood of the declared defaults, and the declared
    defaults are the ones the constructors had before (``SPEC``), so strings behave as before.
"""

import inspect
import pickle

import pytest
import torch

import pyro

import pyro_ar.models as models
from pyro_ar.distributed import ClassShardedLinearClassifier
from pyro_ar.likelihoods import AR, DEFAULT, Bouchard, Exact, get_likelihood
from pyro_ar.models import (BayesianLinearClassifier, BayesianNeuralClassifier, BigramLanguageModel,
                            CategoricalLatentGP, CategoricalLatentModel, CategoricalModel, LatentCategoricalModel,
                            LinearClassifier, NeuralClassifier)
from pyro_ar.likelihoods import GaussianBouchard
from pyro_ar.models import SparseGPMap
from pyro_ar.negatives import SharedNegatives

pytestmark = pytest.mark.usefixtures("one_thread")

D, K = 3, 12
PROPOSAL = torch.arange(1.0, K + 1)

#: how to build each model class (the keywords under test added), and what its string
#: shortcut's defaults were before they were declared in one place (its constructor's
#: signature then); the Bayesian models take only noise and num_negatives.
BUILD = {
    LinearClassifier: lambda **kw: LinearClassifier(D, K, **kw),
    NeuralClassifier: lambda **kw: NeuralClassifier(torch.nn.Identity(), D, K, **kw),
    BigramLanguageModel: lambda **kw: BigramLanguageModel(K, 4, **kw),
    CategoricalLatentModel: lambda **kw: CategoricalLatentModel(K, 2, hidden_dim=4, **kw),
    CategoricalLatentGP: lambda **kw: CategoricalLatentGP([K, K], 2, utility=SparseGPMap(2, 3), hidden_dim=4,
                                                          **kw),
    BayesianLinearClassifier: lambda **kw: BayesianLinearClassifier(D, K, **kw),
    BayesianNeuralClassifier: lambda **kw: BayesianNeuralClassifier(torch.nn.Identity(), D, K, **kw),
}
SPEC = {
    LinearClassifier: dict(noise="gumbel", num_negatives="auto", strategy="per_datapoint", proposal=None),
    NeuralClassifier: dict(noise="gumbel", num_negatives="auto", strategy="per_datapoint", proposal=None),
    BigramLanguageModel: dict(noise="gumbel", num_negatives=256, strategy="importance", proposal=None),
    CategoricalLatentModel: dict(noise="gumbel", num_negatives=None, strategy="shared", proposal=None),
    CategoricalLatentGP: dict(noise="gumbel", num_negatives=None, strategy="shared", proposal=None),
    BayesianLinearClassifier: dict(noise="gumbel", num_negatives=None),
    BayesianNeuralClassifier: dict(noise="gumbel", num_negatives=None),
}
#: a value the caller sets for each keyword (none of them a default)
SET = dict(noise="normal", num_negatives=3, strategy="importance", proposal=PROPOSAL, bouchard_a="optimal")
BAYESIAN = (BayesianLinearClassifier, BayesianNeuralClassifier)


def _keywords(cls):
    """The shortcut keywords of cls's constructor (bouchard_a too where there is one)."""
    params = inspect.signature(cls.__init__).parameters
    return [n for n in SET if n in params]


CASES = [(cls, name) for cls in BUILD for name in _keywords(cls)]


@pytest.fixture(autouse=True)
def _clear():
    pyro.clear_param_store()
    yield
    pyro.clear_param_store()


def test_the_table_covers_every_model():
    abstract = {CategoricalModel, LatentCategoricalModel}
    exported = {obj for obj in (getattr(models, n) for n in models.__all__)
                if inspect.isclass(obj) and issubclass(obj, CategoricalModel) and obj not in abstract}
    assert exported - set(BUILD) == set()
    for cls in BUILD:  # the keywords of each constructor default to "the model's"
        params = inspect.signature(cls.__init__).parameters
        assert {n: params[n].default for n in _keywords(cls)} == {n: DEFAULT for n in _keywords(cls)}, cls


@pytest.mark.parametrize("cls,name", CASES, ids=lambda v: getattr(v, "__name__", v))
@pytest.mark.parametrize("likelihood", [AR("gumbel"), Exact()], ids=["AR", "Exact"])
def test_a_likelihood_object_with_a_shortcut_keyword_is_an_error(cls, name, likelihood):
    """(a) The keyword would be ignored: the error names it and its value."""
    with pytest.raises(ValueError, match=rf"^{name}=.* is ignored with a Likelihood object"):
        BUILD[cls](likelihood=likelihood, **{name: SET[name]})


@pytest.mark.parametrize("cls", list(BUILD), ids=lambda c: c.__name__)
def test_the_error_names_every_keyword_set(cls):
    names = [n for n in _keywords(cls) if n != "bouchard_a"]
    with pytest.raises(ValueError, match=", ".join(rf"{n}=[^,]*" for n in names[:2]) + " are ignored"):
        BUILD[cls](likelihood=AR(), **{n: SET[n] for n in names[:2]})


@pytest.mark.parametrize("cls", list(BUILD), ids=lambda c: c.__name__)
def test_a_name_with_shortcut_keywords_gives_their_likelihood(cls):
    """(b) A name with every keyword set: the likelihood is the one they describe."""
    given = {n: SET[n] for n in SPEC[cls]}
    model = BUILD[cls](likelihood="ar", **given)
    if cls in BAYESIAN:  # (the negatives are the model step's own: shared, uniform)
        assert (model.likelihood.noise.name, model.num_negatives) == ("normal", 3)
    else:
        assert repr(model.likelihood) == repr(get_likelihood("ar", **given))
        assert repr(model.likelihood.sampler) == "ImportanceNegatives(num_negatives=3)"


@pytest.mark.parametrize("cls", list(BUILD), ids=lambda c: c.__name__)
def test_a_name_alone_gives_the_declared_defaults(cls):
    """(c) The declared defaults are what the constructors used before, and a name with no
    keyword resolves to them (the importance default of the bigram model needs a proposal)."""
    assert cls.likelihood_defaults == SPEC[cls]
    required = {"proposal": PROPOSAL} if cls is BigramLanguageModel else {}
    model = BUILD[cls](likelihood="ar", **required)
    expected = {**SPEC[cls], **required}
    if expected["num_negatives"] == "auto":  # all K - 1 other classes while K - 1 <= 20
        expected["num_negatives"] = None
    if cls in BAYESIAN:
        assert model.num_negatives == expected.pop("num_negatives")
    assert repr(model.likelihood) == repr(get_likelihood("ar", **expected))


def test_auto_negatives_follow_the_number_of_classes():
    model = LinearClassifier(D, 1000)
    assert repr(model.likelihood) == repr(get_likelihood("ar", num_negatives=20))


def test_the_sentinel_reads_as_default_and_survives_pickling():
    assert repr(DEFAULT) == "default"
    assert pickle.loads(pickle.dumps(DEFAULT)) is DEFAULT
    assert "noise=default" in str(inspect.signature(LinearClassifier))


def test_bouchard_a_belongs_to_the_bouchard_name():
    assert LinearClassifier(D, K, likelihood=Bouchard(a="optimal")).likelihood.a == "optimal"
    with pytest.raises(ValueError, match="bouchard_a='optimal' is the a of likelihood='bouchard', got likelihood='ar'"):
        LinearClassifier(D, K, likelihood=AR())
    with pytest.raises(ValueError, match="bouchard_a='optimal' is ignored with a Likelihood object"):
        LinearClassifier(D, K, likelihood=Bouchard(), bouchard_a="optimal")


@pytest.mark.parametrize("sparse", [True, False])
def test_the_bouchard_name_takes_the_models_sparse_gradients(sparse):
    for model in (LinearClassifier(D, K, likelihood="bouchard", sparse=sparse),
                  CategoricalLatentModel(K, 2,
                                         likelihood=GaussianBouchard(negatives=SharedNegatives(3), sparse=sparse),
                                         sparse=sparse)):
        assert model.likelihood.sparse is sparse


def test_bouchard_by_name_is_a_softmax_baseline():
    """The noise of the string shortcut is not dropped for "bouchard" (it was, on the models
    that built the Bouchard object themselves)."""
    with pytest.raises(ValueError, match="softmax baseline; it needs noise='gumbel'"):
        LinearClassifier(D, K, likelihood=Bouchard())


def test_get_likelihood_takes_no_extra_arguments_for_ar_and_exact():
    for name in ("ar", "exact"):
        with pytest.raises(ValueError, match=f"likelihood='{name}' takes no further arguments, got a='optimal'"):
            get_likelihood(name, a="optimal")


def test_the_sharded_model_builds_its_own_likelihood():
    """ClassShardedLinearClassifier hands LinearClassifier its likelihood object and no keyword."""
    model = ClassShardedLinearClassifier(D, K, likelihood=AR("normal", negatives=SharedNegatives(3)))
    assert (model.likelihood.noise.name, model.num_negatives) == ("normal", 3)


NEGATIVES = ("num_negatives", "strategy", "proposal")


@pytest.mark.parametrize("cls,name", [(c, n) for c, n in CASES if n in NEGATIVES],
                         ids=lambda v: getattr(v, "__name__", v))
def test_negatives_with_the_exact_name_are_an_error(cls, name):
    """``likelihood="exact"`` sums every class: negatives set beside it would be ignored
    (they were, silently), so they are a ValueError naming the keyword; num_negatives=None
    (all classes) agrees with it and is allowed."""
    with pytest.raises(ValueError, match=rf"^{name}=.* has no effect with likelihood='exact'"):
        BUILD[cls](likelihood="exact", **{name: SET[name]})
    model = BUILD[cls](likelihood="exact", num_negatives=None)
    assert repr(model.likelihood) == repr(Exact())


def test_metrics_bound_rejects_a_noise_beside_a_likelihood_object():
    """metrics.bound's ``noise`` is the string shortcut's too: beside an object (which carries
    its own noise) it would be ignored, so it is an error; by name it still applies."""
    from pyro_ar import metrics

    psi, y = torch.randn(4, 6, dtype=torch.float64), torch.zeros(4, dtype=torch.long)
    with pytest.raises(ValueError, match=r"^noise='normal' is ignored with a Likelihood object"):
        metrics.bound(psi, y, AR("gumbel"), noise="normal")
    by_object = metrics.bound(psi, y, Exact("normal"))["mean"]
    assert by_object == metrics.bound(psi, y, "exact", noise="normal")["mean"]
    assert by_object != metrics.bound(psi, y, "exact")["mean"]  # (the default noise: Gumbel)


@pytest.mark.parametrize("weights", ["mle", "map"])
def test_a_stale_parameter_of_another_shape_is_named(weights):
    """Pyro's param store is global: a second model whose parameter has the first's name but
    another shape gets a ValueError naming the parameter and both shapes (it used to fail
    deep inside the utility, saying only that x did not match the weights)."""
    pyro.clear_param_store()
    models.LinearClassifier(5, 50, likelihood=AR(negatives=2), weights=weights)(torch.randn(4, 5), torch.randint(0, 50, (4,)))
    model = models.LinearClassifier(3, 10, likelihood=AR(negatives=2), weights=weights)
    with pytest.raises(ValueError, match=r"'weight' of shape \(50, 5\).*needs shape \(10, 3\).*prefix="):
        model(torch.randn(4, 3), torch.randint(0, 10, (4,)))
    with pytest.raises(ValueError, match="clear_param_store"):
        model.fitted_parameters()
    models.LinearClassifier(3, 10, likelihood=AR(negatives=2), weights=weights, prefix="second_")(
        torch.randn(4, 3), torch.randint(0, 10, (4,)))            # its own names: no clash
    pyro.clear_param_store()

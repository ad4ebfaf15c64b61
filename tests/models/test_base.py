"""Every model constructor has one way in (pyro_ar.models.base.CategoricalModel).

A model takes a Likelihood object, which carries its noise and negatives, or a name (the
string shortcut: that likelihood with the model's declared ``likelihood_defaults``, resolved
once at construction); a weight strategy object or its name; an ``Init`` record. Over every
model class of ``pyro_ar.models.__all__`` and ``pyro_ar.distributed.__all__``:

(a) a constructor has at most 12 parameters (the rule of issue 40, checked on the signature);
(b) a keyword of the former constructors is a TypeError naming where it went;
(c) a name gives the likelihood of the declared defaults, an object passes through;
(d) a weight strategy given by name or as an object gives the same model.
"""

import inspect

import pytest
import torch

import pyro

import pyro_ar.distributed as distributed
import pyro_ar.models as models
from pyro_ar.distributed import ClassShardedLinearClassifier
from pyro_ar.likelihoods import AR, Bouchard, Exact, GaussianBouchard, get_likelihood
from pyro_ar.models import (MAP, BayesianLinearClassifier, BayesianNeuralClassifier, BigramLanguageModel, Bayes,
                            CategoricalLatentGP, CategoricalLatentModel, CategoricalModel, Init, LatentCategoricalModel,
                            LinearClassifier, LocalPosterior, NeuralClassifier, SparseGPMap)
from pyro_ar.models.base import MOVED_KEYWORDS
from pyro_ar.negatives import SharedNegatives

pytestmark = pytest.mark.usefixtures("one_thread")

D, K = 3, 12
MAX_PARAMETERS = 12

#: how to build each model class (the keywords under test added)
BUILD = {
    LinearClassifier: lambda **kw: LinearClassifier(D, K, **kw),
    NeuralClassifier: lambda **kw: NeuralClassifier(torch.nn.Identity(), D, K, **kw),
    BigramLanguageModel: lambda **kw: BigramLanguageModel(K, 4, **kw),
    CategoricalLatentModel: lambda **kw: CategoricalLatentModel(K, 2, hidden_dim=4, **kw),
    CategoricalLatentGP: lambda **kw: CategoricalLatentGP([K, K], 2, utility=SparseGPMap(2, 3), **kw),
    BayesianLinearClassifier: lambda **kw: BayesianLinearClassifier(D, K, **kw),
    BayesianNeuralClassifier: lambda **kw: BayesianNeuralClassifier(torch.nn.Identity(), D, K, **kw),
    ClassShardedLinearClassifier: lambda **kw: ClassShardedLinearClassifier(D, K, shard=0, num_shards=1, **kw),
}
BAYESIAN = (BayesianLinearClassifier, BayesianNeuralClassifier)


def _exported_models():
    abstract = {CategoricalModel, LatentCategoricalModel}
    return {obj for module in (models, distributed) for obj in (getattr(module, n) for n in module.__all__)
            if inspect.isclass(obj) and issubclass(obj, CategoricalModel) and obj not in abstract}


def _num_parameters(cls) -> int:
    """The constructor's parameters without ``self`` (``*args`` / ``**kwargs`` count one each)."""
    return len(inspect.signature(cls.__init__).parameters) - 1


@pytest.fixture(autouse=True)
def _clear():
    pyro.clear_param_store()
    yield
    pyro.clear_param_store()


def test_the_table_covers_every_model():
    assert _exported_models() - set(BUILD) == set()


@pytest.mark.parametrize("cls", sorted({c for module in (models, distributed) for c in
                                        (getattr(module, n) for n in module.__all__) if inspect.isclass(c)
                                        and hasattr(c, "__init__") and c.__module__.startswith("pyro_ar.")
                                        and (issubclass(c, CategoricalModel) or module is models)},
                                       key=lambda c: c.__name__), ids=lambda c: c.__name__)
def test_every_constructor_has_at_most_12_parameters(cls):
    """(a) Every class exported by pyro_ar.models (and every model of pyro_ar.distributed)."""
    assert _num_parameters(cls) <= MAX_PARAMETERS, (
        f"{cls.__name__}.__init__ has {_num_parameters(cls)} parameters "
        f"{list(inspect.signature(cls.__init__).parameters)[1:]}: group options into the likelihood, "
        "weight strategy or Init objects")


def test_the_parameter_count_counts_keyword_arguments():
    """The count the rule uses: a 13th keyword (or **kwargs) is seen."""
    class Wide(LinearClassifier):
        def __init__(self, a, b, c, d, e, f, g, h, i, j, k, l, **kwargs):  # noqa: E741
            pass

    assert _num_parameters(Wide) == 13


@pytest.mark.parametrize("cls", list(BUILD), ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", sorted(MOVED_KEYWORDS))
def test_a_moved_keyword_is_a_type_error_naming_where_it_went(cls, name):
    """(b) A keyword that moved into an object is a TypeError quoting its new place (a
    keyword the class still takes, e.g. CategoricalLatentModel's hidden_dim, is not)."""
    if name in inspect.signature(cls.__init__).parameters:
        return
    with pytest.raises(TypeError, match=rf"^{cls.__name__} got {name}=.*: .*"):
        BUILD[cls](**{name: 1})


def test_the_moved_keywords_name_the_object_that_carries_them():
    with pytest.raises(TypeError, match=r"likelihood=AR\(noise=\.\.\.\)"):
        LinearClassifier(D, K, noise="normal")
    with pytest.raises(TypeError, match=r"ImportanceNegatives\(s, proposal\)"):
        BigramLanguageModel(K, 4, proposal=torch.ones(K))
    with pytest.raises(TypeError, match=r"weights=MAP\(prior_scale=\.\.\.\)"):
        LinearClassifier(D, K, prior_scale=2.0)
    with pytest.raises(TypeError, match=r"init=Init\(bias=\.\.\.\)"):
        CategoricalLatentModel(K, 2, init_bias=torch.zeros(K))


@pytest.mark.parametrize("cls", list(BUILD), ids=lambda c: c.__name__)
def test_a_name_gives_the_declared_defaults(cls):
    """(c) The string shortcut resolves to the declared defaults (LinearClassifier's "auto"
    negatives: every class while K - 1 <= 20); nothing else is read."""
    model = BUILD[cls](likelihood="ar")
    expected = dict(cls.likelihood_defaults)
    if expected["num_negatives"] in ("auto", 256):  # every class while K - 1 <= 20 (256)
        expected["num_negatives"] = None
    if cls in BAYESIAN:  # the negatives are the model step's own: shared, uniform
        assert model.num_negatives == expected.pop("num_negatives")
        expected = {"noise": expected["noise"]}
    if cls is ClassShardedLinearClassifier:
        assert (model.likelihood.noise.name, model.num_negatives, model.likelihood.strategy) == ("gumbel", None, "shared")
        return
    assert repr(model.likelihood) == repr(get_likelihood("ar", **expected))


@pytest.mark.parametrize("cls", list(BUILD), ids=lambda c: c.__name__)
def test_a_likelihood_object_carries_noise_and_negatives(cls):
    lik = AR("normal", negatives=SharedNegatives(3))
    model = BUILD[cls](likelihood=lik)
    assert (model.likelihood.noise.name, model.num_negatives) == ("normal", 3)
    if cls not in BAYESIAN + (ClassShardedLinearClassifier,):  # (those rebuild it for their own step)
        assert model.likelihood is lik


def test_auto_negatives_follow_the_number_of_classes():
    model = LinearClassifier(D, 1000)
    assert repr(model.likelihood) == repr(get_likelihood("ar", num_negatives=20))


def test_a_likelihood_that_is_neither_an_object_nor_a_name_is_an_error():
    with pytest.raises(ValueError, match="likelihood must be a pyro_ar.likelihoods.Likelihood or a name, got likelihood=3"):
        LinearClassifier(D, K, likelihood=3)


@pytest.mark.parametrize("sparse", [True, False])
def test_the_bouchard_name_takes_the_models_sparse_gradients(sparse):
    for model in (LinearClassifier(D, K, likelihood="bouchard", sparse=sparse),
                  CategoricalLatentModel(K, 2, likelihood="bouchard", sparse=sparse)):
        assert model.likelihood.sparse is sparse


def test_bouchard_in_the_session_model_is_analytic_by_name_or_gaussian_object():
    """The latent model's ``"bouchard"`` stands for GaussianBouchard (the analytic expectation
    over q(omega)); a plain Bouchard object is the reparameterised draw."""
    assert CategoricalLatentModel(K, 2, likelihood="bouchard").bouchard == "analytic"
    assert type(CategoricalLatentModel(K, 2, likelihood="bouchard").likelihood) is GaussianBouchard
    assert CategoricalLatentModel(K, 2, likelihood=GaussianBouchard()).bouchard == "analytic"
    assert CategoricalLatentModel(K, 2, likelihood=Bouchard()).bouchard == "sampled"
    assert CategoricalLatentModel(K, 2, likelihood=GaussianBouchard(), utility="neural").bouchard == "sampled"


def test_get_likelihood_takes_no_extra_arguments_for_ar_and_exact():
    for name in ("ar", "exact"):
        with pytest.raises(ValueError, match=f"likelihood='{name}' takes no further arguments, got a='optimal'"):
            get_likelihood(name, a="optimal")


def test_the_sharded_model_builds_its_own_likelihood():
    """ClassShardedLinearClassifier reads an AR object's noise and negatives into its ShardedAR."""
    model = ClassShardedLinearClassifier(D, K, likelihood=AR("normal", negatives=SharedNegatives(3)))
    assert (model.likelihood.noise.name, model.num_negatives, model.likelihood.strategy) == ("normal", 3, "shared")
    model = ClassShardedLinearClassifier(D, K, likelihood=AR(negatives=3))
    assert model.likelihood.strategy == "per_datapoint"
    with pytest.raises(ValueError, match="likelihood must be 'ar' or an AR likelihood"):
        ClassShardedLinearClassifier(D, K, likelihood=Exact())


# ---- weight strategies and Init ----------------------------------------------------------
@pytest.mark.parametrize("cls", [LinearClassifier, NeuralClassifier, BigramLanguageModel, CategoricalLatentModel],
                         ids=lambda c: c.__name__)
def test_weights_by_name_and_by_object_are_one_model(cls):
    """(d) ``"map"`` is MAP() with the model's defaults filled in."""
    by_name, by_object = BUILD[cls](weights="map"), BUILD[cls](weights=MAP())
    assert by_name.weight_strategy == by_object.weight_strategy
    assert (by_name.weights, by_name.prior_scale, by_name.penalize_bias) == \
        (by_object.weights, by_object.prior_scale, by_object.penalize_bias)


def test_weight_options_reach_the_model():
    model = LinearClassifier(D, K, weights=MAP(prior_scale=0.5, num_prior_classes=4, penalize_bias=False))
    assert (model.weights, model.prior_scale, model.num_prior_classes, model.penalize_bias) == ("map", 0.5, 4, False)
    assert LinearClassifier(D, K, weights=Bayes(prior_scale=2.0)).prior_scale == 2.0
    # the session model's defaults: s = 1/sqrt(Q), the offsets out of the prior
    latent = CategoricalLatentModel(K, 4, hidden_dim=4)
    assert (latent.weights, latent.prior_scale, latent.penalize_bias) == ("map", 0.5, False)


@pytest.mark.parametrize("weights, match", [("flat", "weights must be a WeightStrategy"),
                                            (Bayes(), "this model takes weights of the kinds")])
def test_a_weight_strategy_the_model_does_not_take_is_an_error(weights, match):
    with pytest.raises(ValueError, match=match):
        CategoricalLatentModel(K, 2, weights=weights)


def test_map_options_are_checked():
    with pytest.raises(ValueError, match="prior_scale must be a finite number > 0, got prior_scale=-1.0"):
        MAP(prior_scale=-1.0)
    with pytest.raises(ValueError, match="num_prior_classes"):
        MAP(num_prior_classes=0)


def test_an_init_field_the_model_does_not_read_is_an_error():
    with pytest.raises(ValueError, match=r"BigramLanguageModel does not read Init.bias_scale"):
        BigramLanguageModel(K, 4, init=Init(bias_scale=0.1))
    with pytest.raises(ValueError, match=r"init.scale must be a finite number >= 0"):
        LinearClassifier(D, K, init=Init(scale=-1.0))
    assert LinearClassifier(D, K, init=Init(scale=0.5, bias=torch.ones(K))).init_scale == 0.5


def test_posterior_and_gp_map_are_objects():
    local = CategoricalLatentModel(K, 2, posterior=LocalPosterior(6, 2, K))
    assert local.posterior_kind == "local"
    with pytest.raises(ValueError, match=r"posterior=LocalPosterior\(num_sessions, latent_dim, num_items\)"):
        CategoricalLatentModel(K, 2, posterior="local")
    with pytest.raises(ValueError, match="posterior has latent_dim=3 but the model has latent_dim=2"):
        CategoricalLatentModel(K, 2, posterior=LocalPosterior(6, 3, K))
    gp = CategoricalLatentGP([K, K], 2, utility=SparseGPMap(2, 5, lengthscale=2.0))
    assert gp.num_inducing == 5 and gp.utility_kind == "gp"
    with pytest.raises(ValueError, match="SparseGPMap over 3 latent dimensions"):
        CategoricalLatentGP([K, K], 2, utility=SparseGPMap(3, 5))


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

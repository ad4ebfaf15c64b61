r"""The guide and the ELBO that go with a model: the one place that chooses them.

* The likelihood has no local latent (exact, OVE, sampled softmax, Bouchard): no local guide.
* A&R with Gumbel noise: :class:`~pyro_ar.infer.GumbelLocalGuide` (closed-form bound and
  natural eta step with :class:`~pyro_ar.infer.ClosedFormELBO`).
* A&R with any other noise: :class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide`, the
  Laplace approximation of the optimal :math:`q(\varepsilon_n\mid\psi_n)` refitted from the
  current utilities at every step (no per-datapoint state; see ``benchmarks/probit_convergence.py``:
  its bound converges where the per-datapoint :class:`~pyro_ar.infer.NoiseLocalGuide`, whose
  parameters move only when their datapoint is visited, stays loose). ``local="noise"``
  keeps the NoiseLocalGuide.
* ``weights="bayes"``: an ``AutoNormal`` over the per-class parameters (the noise sites
  hidden from it) joined with the local guide in an ``AutoGuideList``; the conditional
  local guide then conditions on the posterior mean of the per-class parameters.
* The class-subsampled weight strategy
  (:class:`~pyro_ar.models.bayesian_linear.ClassSubsampledWeights`, the strategy of
  :class:`~pyro_ar.models.BayesianLinearClassifier` and
  :class:`~pyro_ar.models.BayesianNeuralClassifier`): its class-subsampled posterior
  :class:`~pyro_ar.infer.ClassSubsampledNormal`. The guide follows the model's
  :attr:`~pyro_ar.models.base.CategoricalModel.weight_strategy`, not its class: both
  strategies are Bayesian weights (``weights == "bayes"``) of the same model, one
  sampling all K rows per step, the other a class subsample.
* :class:`~pyro_ar.models.CategoricalLatentModel`: :class:`~pyro_ar.infer.LatentGuide`.

Every guide opens the model's data plate with ``create_plates=model.create_plates`` (O(B)
subsample indices, shared with the model through Pyro's replay).

:func:`default_guide` dispatches on the model's class (``functools.singledispatch``): models
know no guides, and a new model class gets its guide with
``@default_guide.register(MyModel)``.
"""

from functools import partial, singledispatch

from pyro.infer.autoguide import AutoGuideList, AutoNormal

from ..models import CategoricalLatentModel, CategoricalModel
from ..models.bayesian_linear import ClassSubsampledWeights
from .elbo import ClosedFormELBO
from .latent import LatentGuide
from .local_fit import unit_gumbel_optimum
from .local_guides import ConditionalLocalGuide, GumbelLocalGuide, NoiseLocalGuide, hide_noise_sites
from .posterior import ClassSubsampledNormal

__all__ = ["default_guide", "default_local_guide", "default_elbo", "empty_guide"]


def empty_guide(*args, **kwargs):
    """The guide of a model without latent variables (maximum likelihood / MAP).

    Example:

    >>> from pyro_ar.infer import empty_guide
    >>> empty_guide() is None
    True
    """


_LOCAL = ("conditional", "noise")


def default_local_guide(model, local_first=None, part_of_list: bool = False, local=None, **kwargs):
    """The local guide of ``model``'s noise sites, or None when its likelihood has none.

    :param local_first: for Gumbel noise, natural step before the gradient step (default:
        the model's ``default_local_first``).
    :param bool part_of_list: the guide will be part of an ``AutoGuideList`` (which opens
        the plates); otherwise it opens the model's O(B) data plate itself.
    :param str local: non-Gumbel noise: ``"conditional"`` (default,
        :class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide`) or ``"noise"``
        (:class:`~pyro_ar.infer.NoiseLocalGuide`, per-datapoint parameters).

    Example:

    >>> from pyro_ar.infer import default_local_guide
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.likelihoods import AR
    >>> type(default_local_guide(LinearClassifier(3, 10, likelihood=AR("normal")))).__name__
    'ConditionalLocalGuide'
    """
    if local is not None and local not in _LOCAL:
        raise ValueError(f"local must be one of {_LOCAL} or None, got local={local!r}")
    if not model.likelihood.has_local_latent:
        return None
    kwargs.setdefault("create_plates", None if part_of_list else model.create_plates)
    if unit_gumbel_optimum(model.noise):  # q* = Gumbel(log eta, 1): the natural eta step
        if local_first is None:
            local_first = getattr(model, "default_local_first", False)
        return GumbelLocalGuide(model, local_first=local_first, **kwargs)
    if local == "noise":
        return NoiseLocalGuide(model, **kwargs)
    return ConditionalLocalGuide(model, **kwargs)


@singledispatch
def default_guide(model, **kwargs):
    """The guide that goes with ``model``, chosen by its class (see the module docstring);
    ``kwargs`` go to the local guide (or to :class:`~pyro_ar.infer.ClassSubsampledNormal`,
    :class:`~pyro_ar.infer.LatentGuide`).

    :raises TypeError: for a model of a class that has no registered guide.

    Example:

    >>> from pyro_ar.infer import default_guide
    >>> from pyro_ar.models import CategoricalLatentModel, LinearClassifier
    >>> type(default_guide(LinearClassifier(3, 10, weights="bayes"))).__name__
    'AutoGuideList'
    >>> type(default_guide(CategoricalLatentModel(50, 2))).__name__
    'LatentGuide'
    """
    raise TypeError(f"default_guide: no guide is registered for model={model!r} (a "
                    f"{type(model).__name__}); pass a pyro_ar.models.CategoricalModel, or register "
                    "one with @pyro_ar.infer.default_guide.register(YourModelClass)")


@default_guide.register
def _(model: CategoricalLatentModel, **kwargs):
    return LatentGuide(model, **kwargs)


@default_guide.register
def _(model: CategoricalModel, **kwargs):
    """The local guide of the noise sites, joined for ``weights="bayes"`` with an
    ``AutoNormal`` over the per-class parameters; :class:`~pyro_ar.infer.ClassSubsampledNormal`
    for the class-subsampled weight strategy."""
    if isinstance(model.weight_strategy, ClassSubsampledWeights):
        return ClassSubsampledNormal(model, **kwargs)
    bayes = getattr(model, "weights", "mle") == "bayes"
    if not bayes:
        local = default_local_guide(model, **kwargs)
        return empty_guide if local is None else local
    guide = AutoGuideList(model, create_plates=model.create_plates)
    weights = AutoNormal(hide_noise_sites(model))
    guide.append(weights)
    if not unit_gumbel_optimum(model.noise) and kwargs.get("local") in (None, "conditional"):
        kwargs.setdefault("parameters", partial(_posterior_mean, model, weights))
    local = default_local_guide(model, part_of_list=True, **kwargs)
    if local is not None:
        guide.append(local)
    return guide


def _posterior_mean(model, weights, like):
    """The per-class parameters at ``weights``' (an AutoNormal's) posterior median, detached."""
    median = weights.median()
    return {n: median[model.prefix + n].detach() for n in model.parameter_shapes()}


def default_elbo(**kwargs):
    """:class:`~pyro_ar.infer.ClosedFormELBO`: the closed-form softmax A&R bound with the
    natural eta step, ``TraceMeanField_ELBO`` everywhere else (analytic KL where registered);
    ``gaussian_nodes=16`` integrates a probit/logistic factor under the local q (Gumbel or Gaussian) by quadrature.
    It serves every model (it finds the closed-form sites in the traces), so it takes no
    model; ``kwargs`` go to :class:`~pyro_ar.infer.ClosedFormELBO`.

    Example:

    >>> from pyro_ar.infer import default_elbo
    >>> type(default_elbo()).__name__
    'ClosedFormELBO'
    """
    return ClosedFormELBO(**kwargs)

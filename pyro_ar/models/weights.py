r"""How a model treats its per-class parameters, and where they start: the weight strategy
objects a model constructor takes as ``weights=`` (the strings ``"mle"``, ``"map"``,
``"bayes"``, ``"gaussian"`` are shortcuts for them, resolved once by :func:`get_weights`)
and the initialisation record :class:`Init` it takes as ``init=``.

A weight strategy says how the K rows :math:`\theta_k` of the per-class parameters enter
one model step:

* :class:`MLE` -- ``pyro.param`` s, point estimates by maximum likelihood;
* :class:`MAP` -- the same plus the Gaussian log-prior
  :math:`\sum_k \log N(\theta_k; 0, s^2 I)`, estimated without bias on a uniform class
  subsample U, :math:`(K/|U|)\sum_{k\in U}\log N(\theta_k; 0, s^2 I)`;
* :class:`Bayes` -- ``pyro.sample`` sites with the prior :math:`N(0, s^2 I)` (for an
  AutoGuide; O(K) per step); :class:`~pyro_ar.models.bayesian_linear.ClassSubsampledWeights`
  samples the same prior on a class subsample only;
* :class:`GaussianWeights` -- a mean-field Gaussian :math:`N(\mu_k, \mathrm{diag}\,\sigma_k^2)`
  over the output layer held as params, for likelihoods of Gaussian utilities
  (:class:`~pyro_ar.models.NeuralClassifier`).

A field left None takes the model's default (e.g. :class:`~pyro_ar.models.CategoricalLatentModel`'s
prior scale :math:`1/\sqrt{Q}`).

The same objects are :class:`~pyro_ar.ARClassifier`'s ``weights=`` (``ARClassifier(weights=MAP(0.1))``;
``MAP()`` leaves s to the estimator's held-out search); the options only the estimator has
(that search over a list of scales, the rank, the posterior draws of its predictions) live in
:class:`pyro_ar.estimator.Weights`, a thin wrapper around one of them. Their fields are
scikit-learn parameters (:meth:`WeightStrategy.get_params` / :meth:`WeightStrategy.set_params`),
so ``clf.set_params(weights__prior_scale=0.3)`` and ``sklearn.base.clone`` work.

Example:

>>> from pyro_ar.models.weights import MAP, get_weights
>>> get_weights("map")
MAP()
>>> MAP(prior_scale=0.5).with_defaults(prior_scale=1.0, penalize_bias=True)
MAP(prior_scale=0.5, penalize_bias=True)
"""

from typing import NamedTuple, Optional

import torch

from ..likelihoods import DataSubsample
from ..numerics import check_int, check_positive_number
from .plates import check_sample_weight, take_rows

__all__ = ["WeightStrategy", "PerClassWeights", "MLE", "MAP", "Bayes", "GaussianWeights", "get_weights",
           "Init", "WEIGHTS"]


def _check_scale(name: str, value, zero: bool = False):
    """``value`` as a float (:func:`~pyro_ar.numerics.check_positive_number`: > 0, >= 0 with
    ``zero``), or None."""
    return None if value is None else check_positive_number(name, value, inclusive=zero)


class WeightStrategy:
    r"""How the per-class parameters of a model enter one model step: the plates the step
    opens (shared with the guides through ``model.create_plates``) and the step itself,
    with the prior's options. A model holds one (``model.weight_strategy``); the base
    class's ``__call__`` runs its :meth:`step`, so no model overrides ``__call__``.

    :param prior_scale: s of the Gaussian prior (None: the model's default).

    ``name`` is the short name a model also exposes as ``model.weights`` (``"mle"``,
    ``"map"``, ``"bayes"``, ``"gaussian"``).

    Example:

    >>> from pyro_ar.models import MAP, WeightStrategy
    >>> isinstance(MAP(), WeightStrategy), MAP().name
    (True, 'map')
    """

    name = "mle"
    _fields = ("prior_scale",)

    def __init__(self, prior_scale: Optional[float] = None):
        self.prior_scale = _check_scale("prior_scale", prior_scale)

    def with_defaults(self, **defaults) -> "WeightStrategy":
        """A copy whose fields left None take ``defaults`` (names this strategy lacks are skipped)."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        for name, value in defaults.items():
            if name in self._fields and getattr(new, name) is None:
                setattr(new, name, value)
        return new

    def get_params(self, deep=True) -> dict:
        """The constructor's arguments, as scikit-learn reads an estimator's (so that
        ``ARClassifier(weights=MAP(0.1)).set_params(weights__prior_scale=0.3)`` and ``clone``
        work)."""
        return {name: getattr(self, name) for name in self._fields}

    def set_params(self, **params) -> "WeightStrategy":
        """Set fields by name, each checked as the constructor checks it (``ValueError`` naming
        an unknown one); returns self."""
        unknown = sorted(set(params) - set(self._fields))
        if unknown:
            raise ValueError(f"{type(self).__name__} has no parameter {unknown[0]!r}; it has {list(self._fields)}")
        self.__dict__.update(type(self)(**{**self.get_params(), **params}).__dict__)
        return self

    def create_plates(self, model, x, y=None, sample_weight=None):
        """The plates of one step (here the O(B) ``"data"`` plate, ``CategoricalModel.data_plate``)."""
        return model.data_plate(x, y, sample_weight)

    def step(self, model, x, y=None, sample_weight=None):
        """One model step: emit the parameter and likelihood sites; return the labels."""
        raise NotImplementedError

    def __eq__(self, other):
        return type(self) is type(other) and self.__dict__ == other.__dict__

    __hash__ = object.__hash__

    def __repr__(self):
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self._fields if getattr(self, n) is not None)
        return f"{type(self).__name__}({fields})"


class PerClassWeights(WeightStrategy):
    r"""Every per-class parameter at once: :math:`\theta = ` :meth:`CategoricalModel.parameters`
    (params, MAP prior factor, or prior sample sites), then the minibatch's utilities
    :math:`\psi = f_\theta(x_{batch})` handed to the likelihood object inside the data plate.
    The base of :class:`MLE`, :class:`MAP`, :class:`Bayes` and :class:`GaussianWeights`.

    Example:

    >>> from pyro_ar.models import LinearClassifier
    >>> LinearClassifier(3, 10).weight_strategy
    MLE()
    """

    def step(self, model, x, y=None, sample_weight=None):
        model.check_call(x, y)
        if sample_weight is not None:
            check_sample_weight(sample_weight, len(x))
        params = model.parameters(model._like(x))
        N = len(x)
        with model.create_plates(x, y, sample_weight) as idx:
            index = None if idx.shape[0] == N else idx
            psi = model.minibatch_utility(take_rows(x, index), params)
            obs = None if y is None else take_rows(y, index)
            return model.likelihood.sample(model.site, psi, obs, DataSubsample(index, N))


class MLE(PerClassWeights):
    """Maximum-likelihood point estimates (``pyro.param`` s, no prior).

    Example:

    >>> from pyro_ar.models.weights import MLE
    >>> MLE().name
    'mle'
    """

    name = "mle"
    _fields = ()

    def __init__(self):
        super().__init__(None)


class MAP(PerClassWeights):
    r"""MAP point estimates under :math:`\theta_k\sim N(0, s^2 I)`, the log-prior estimated
    without bias on a uniform class subsample (module docstring).

    :param prior_scale: s (None: the model's default, 1 for most models).
    :param num_prior_classes: :math:`|U|`, rows of each parameter in one step's log-prior
        estimate (None: the likelihood's number of negatives; None there too: every row).
    :param penalize_bias: whether the biases are in the prior (None: the model's default;
        False leaves them out, as scikit-learn leaves the intercept out of its L2 penalty).
    :param num_prior_entries: with a weight pattern
        (:class:`~pyro_ar.models.LinearClassifier` ``weight_pattern=``), the entries of W in
        one step's log-prior estimate.

    Example:

    >>> from pyro_ar.models.weights import MAP
    >>> MAP(prior_scale=0.1, penalize_bias=False)
    MAP(prior_scale=0.1, penalize_bias=False)
    """

    name = "map"
    _fields = ("prior_scale", "num_prior_classes", "penalize_bias", "num_prior_entries")

    def __init__(self, prior_scale: Optional[float] = None, num_prior_classes: Optional[int] = None,
                 penalize_bias: Optional[bool] = None, num_prior_entries: Optional[int] = None):
        super().__init__(prior_scale)
        self.num_prior_classes = check_int("num_prior_classes", num_prior_classes, low=1, allow_none=True)
        if penalize_bias is not None and not isinstance(penalize_bias, bool):
            raise ValueError(f"penalize_bias must be True, False or None, got penalize_bias={penalize_bias!r}")
        self.penalize_bias = penalize_bias
        self.num_prior_entries = check_int("num_prior_entries", num_prior_entries, low=1, allow_none=True)


class Bayes(PerClassWeights):
    r"""Latent per-class parameters: ``pyro.sample`` sites with the prior
    :math:`N(0, s^2 I)` over every row (O(K) per step; an AutoGuide fits their posterior).

    Example:

    >>> from pyro_ar.models.weights import Bayes
    >>> Bayes(prior_scale=2.0)
    Bayes(prior_scale=2.0)
    """

    name = "bayes"


class GaussianWeights(PerClassWeights):
    r"""A mean-field Gaussian posterior over the output layer held as params (means and
    softplus standard deviations, starting at a tenth of ``prior_scale``), whose Gaussian
    utilities go to a likelihood of Gaussian utilities (``JaakkolaJordan``,
    ``GaussianBouchard``, ``LocalReparameterization``).

    Example:

    >>> from pyro_ar.models.weights import GaussianWeights
    >>> GaussianWeights().name
    'gaussian'
    """

    name = "gaussian"


#: the string shortcuts of ``weights=`` (the one map from names to weight strategies)
WEIGHTS = {"mle": MLE, "map": MAP, "bayes": Bayes, "gaussian": GaussianWeights}


def get_weights(weights, choices=("mle", "map", "bayes")) -> WeightStrategy:
    """The weight strategy ``weights`` (an object passes through) or the one its name stands
    for; ``choices``: the names the model accepts.

    Example:

    >>> from pyro_ar.models.weights import get_weights
    >>> get_weights("bayes"), get_weights("laplace")
    Traceback (most recent call last):
    ...
    ValueError: weights must be a WeightStrategy (MLE(), MAP(...), Bayes(...)) or one of ('mle', 'map', 'bayes'), got weights='laplace'
    """
    if isinstance(weights, WeightStrategy):
        if weights.name not in choices:
            raise ValueError(f"this model takes weights of the kinds {choices}, got weights={weights!r}")
        return weights
    if isinstance(weights, str) and weights in choices:
        return WEIGHTS[weights]()
    hint = "" if not hasattr(weights, "rank") else \
        " (pyro_ar.estimator.Weights holds ARClassifier's options around a strategy: pass its kind)"
    raise ValueError(f"weights must be a WeightStrategy (MLE(), MAP(...), Bayes(...)) or one of "
                     f"{choices}, got weights={weights!r}{hint}")


class Init(NamedTuple):
    r"""Where a model's per-class parameters start; a field left None takes the model's
    default (each model's docstring says which fields it reads; a field it does not read
    is a ValueError naming it).

    :param scale: the weights start at :math:`N(0, \text{scale}^2)`.
    :param bias_scale: the biases start at :math:`N(0, \text{bias\_scale}^2)` (plus ``bias``).
    :param bias: a (K,) tensor: the biases' starting point, e.g. the centred log class
        frequencies (:func:`~pyro_ar.models.unigram_biases`); for
        :class:`~pyro_ar.models.LinearClassifier` also the mean of their prior.
    :param weight: :class:`~pyro_ar.models.LinearClassifier` with a weight pattern: an (nnz,)
        tensor, W's starting point and prior mean.
    :param posterior_scale: :class:`~pyro_ar.models.CategoricalLatentGP`: the initial
        standard deviations :math:`s_r` of :math:`q(v_r)`.

    Example:

    >>> import torch
    >>> from pyro_ar.models.weights import Init
    >>> Init(scale=0.01, bias=torch.zeros(3)).scale
    0.01
    """

    scale: Optional[float] = None
    bias_scale: Optional[float] = None
    bias: Optional[torch.Tensor] = None
    weight: Optional[torch.Tensor] = None
    posterior_scale: Optional[float] = None

    def check(self, model: str, reads=("scale", "bias_scale", "bias")) -> "Init":
        """This record, after checking that it sets only the fields in ``reads`` (``model``:
        the name in the error) and that its scales are numbers > 0."""
        if not isinstance(self, Init):
            raise ValueError(f"init must be a pyro_ar.models.Init, got init={self!r}")
        unread = [n for n in self._fields if n not in reads and getattr(self, n) is not None]
        if unread:
            raise ValueError(f"{model} does not read Init.{unread[0]} (it reads {', '.join(reads)}), "
                             f"got init={self!r}")
        for n in ("scale", "bias_scale"):
            _check_scale(f"init.{n}", getattr(self, n), zero=True)
        _check_scale("init.posterior_scale", self.posterior_scale)
        return self

    def __repr__(self):
        def show(v):
            return f"tensor of shape {tuple(v.shape)}" if isinstance(v, torch.Tensor) else repr(v)
        return "Init(" + ", ".join(f"{n}={show(getattr(self, n))}" for n in self._fields
                                   if getattr(self, n) is not None) + ")"


def check_init(init, model: str, reads) -> Init:
    """``init`` (None: ``Init()``) checked by :meth:`Init.check`."""
    if init is None:
        return Init()
    if not isinstance(init, Init):
        raise ValueError(f"init must be a pyro_ar.models.Init, got init={init!r}")
    return init.check(model, reads)

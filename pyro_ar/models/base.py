r"""The base class of every categorical model: the plumbing all models share.

A model of this library is

.. math::  \psi_n = f_\theta(x_n) \in \mathbb{R}^K, \qquad
           y_n \sim \text{likelihood}(\psi_n), \qquad n = 1, \dots, N,

with the rows of the per-class parameters :math:`\theta` (K rows each) treated as
maximum-likelihood parameters, MAP parameters under a Gaussian prior, or latent variables.
:class:`CategoricalModel` owns everything but :math:`f`:

* argument checks (K, the likelihood object, the minibatch size, the prior scale) and input
  checks: every model or guide call checks shapes and dtypes (O(1)) and the labels of its
  minibatch (O(B)) in :meth:`~CategoricalModel.create_plates` -- the first thing a guide
  calls, so bad inputs meet a named error before any guide touches them -- and
  :meth:`~CategoricalModel.check_data` checks the whole training data once (labels, finite
  inputs, naming the first bad row; :func:`~pyro_ar.infer.train` calls it before the first
  step);
* the per-class parameters: ``pyro.param`` s (``weights="mle"``), the same plus the
  Gaussian log-prior :math:`\sum_k \log N(\theta_k; 0, s^2 I)` estimated without bias on a
  uniform class subsample U as :math:`(K/|U|)\sum_{k\in U}\log N(\theta_k; 0, s^2 I)`
  (``weights="map"``; O(:math:`|U|`) per step), or ``pyro.sample`` sites with that prior
  (``weights="bayes"``, for an AutoGuide; O(K) per step; the class-subsampled weight
  strategy of :class:`~pyro_ar.models.BayesianLinearClassifier` samples the same prior on
  a class subsample only, O(subsample) per step);
* the O(B) data plate (:meth:`create_plates`), shared with the guides through Pyro's replay;
* the likelihood (a :class:`~pyro_ar.likelihoods.Likelihood` object) that emits the sites;
* ``repr`` and evaluation (:meth:`log_likelihood`, :meth:`utility`).

Models know no guides: :func:`pyro_ar.infer.default_guide` (inference, the layer above)
chooses the guide of a model by its class.

A subclass defines only :meth:`parameter_shapes` / :meth:`init_parameter` (its per-class
parameters), :meth:`check_inputs` (what its inputs look like) and :meth:`minibatch_utility`
(how the utilities of a minibatch are computed from its inputs and the parameters).
"""

import weakref
from typing import Dict, Optional, Tuple

import torch

import pyro
import pyro.distributions as dist

from .. import evaluation
from ..likelihoods import Likelihood, get_likelihood
from ..subsets import sample_without_replacement
from ..distributions.categorical import check_labels
from ..numerics import check_finite, check_int, keyword_names, reject_moved_keywords
from .plates import SubsamplePlate, WeightedPlate, check_sample_weight, take_rows  # noqa: F401  (their former home)
from .weights import MLE, PerClassWeights, WeightStrategy, get_weights  # noqa: F401  (their former home)

__all__ = ["CategoricalModel", "check_positive_int", "MOVED_KEYWORDS"]

#: the treatments of the global weights a model takes by default: point estimates (maximum
#: likelihood, MAP) or a posterior (the names of :data:`pyro_ar.models.weights.WEIGHTS`)
WEIGHT_CHOICES = ("mle", "map", "bayes")


def check_positive_int(name: str, value, allow_none: bool = False, low: int = 1):
    """Validate an integer argument >= ``low`` (``bool`` and floats are rejected, numpy
    integers accepted); returns it as a Python ``int`` (:func:`pyro_ar.numerics.check_int`).

    Example:

    >>> from pyro_ar.models.base import check_positive_int
    >>> check_positive_int("subsample_size", 64)
    64
    """
    return check_int(name, value, low=low, allow_none=allow_none)


class CategoricalModel:
    r"""Base class of the categorical models (see the module docstring for what it owns).

    :param int num_classes: K.
    :param likelihood: a :class:`~pyro_ar.likelihoods.Likelihood` (e.g. ``AR("normal",
        negatives=SharedNegatives(64))``), which carries its noise and negatives -- the one
        place they are given -- or a name understood by
        :func:`~pyro_ar.likelihoods.get_likelihood` (the string shortcut: that likelihood
        with this model's :attr:`likelihood_defaults`, resolved once here by
        :meth:`make_likelihood`).
    :param weights: a :class:`~pyro_ar.models.weights.WeightStrategy` (``MLE()``,
        ``MAP(prior_scale, num_prior_classes, ...)``, ``Bayes(prior_scale)``), which carries
        the prior's options, or its name ``"mle"``, ``"map"``, ``"bayes"`` (the shortcut).
    :param subsample_size: minibatch size B of the data plate (None: full batch).
    :param bool sparse: sparse gradients for the per-class parameters.
    :param str prefix: prefix of parameter and site names of the per-class parameters.
    :param str site: name of the label site.

    A keyword of the former constructors (``noise``, ``num_negatives``, ``strategy``,
    ``proposal``, ``prior_scale``, ``init_scale``, ...) is a ``TypeError`` that names where it
    went (:data:`MOVED_KEYWORDS`).

    Example:

    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.models.base import CategoricalModel
    >>> isinstance(LinearClassifier(3, 10), CategoricalModel)
    True
    >>> LinearClassifier(3, 10, noise="normal")
    Traceback (most recent call last):
    ...
    TypeError: LinearClassifier got noise='normal': give the noise to the likelihood object, likelihood=AR(noise=...) (or Exact(noise=...))
    """

    #: whether the default local guide takes the natural step before the gradient step
    default_local_first = False
    #: how the per-class parameters enter a step (an instance's own, from ``weights=``)
    weight_strategy: WeightStrategy = MLE()
    #: the names ``weights=`` accepts for this model (:func:`~pyro_ar.models.weights.get_weights`)
    weight_choices = WEIGHT_CHOICES
    #: the prior options a weight strategy leaves None take these values (a subclass overrides them)
    weight_defaults = {"prior_scale": 1.0, "penalize_bias": True, "num_prior_entries": 4096}
    #: names of the inputs and labels in error messages (a subclass may rename them)
    input_names = ("x", "y")
    #: the string shortcut's likelihood options -- this model's defaults, declared here only (a
    #: subclass overrides the dict)
    likelihood_defaults = {"noise": "gumbel", "num_negatives": None, "strategy": "per_datapoint",
                           "proposal": None}

    def __new__(cls, *args, **kwargs):
        """Name where a keyword of the former constructors went (before ``__init__`` would
        reject it with Python's bare "unexpected keyword")."""
        reject_moved_keywords(cls.__name__, kwargs, MOVED_KEYWORDS, keyword_names(cls.__init__))
        return super().__new__(cls)

    def __init__(self, num_classes: int, likelihood="ar", *, weights="mle",
                 subsample_size: Optional[int] = None, sparse: bool = False, prefix: str = "",
                 site: str = "y"):
        self.num_classes = check_positive_int("num_classes", num_classes, low=2)
        if sparse not in (True, False):
            raise ValueError(f"sparse must be True or False, got sparse={sparse!r}")
        self.likelihood: Likelihood = self.make_likelihood(likelihood, num_classes, sparse=sparse)
        self.likelihood.check(num_classes)
        self.set_weights(weights)
        self.subsample_size = check_positive_int("subsample_size", subsample_size, True)
        self.sparse, self.prefix, self.site = bool(sparse), prefix, site

    def set_weights(self, weights):
        """Resolve ``weights`` (a strategy or its name, :func:`~pyro_ar.models.weights.get_weights`),
        fill the options it leaves None from :attr:`weight_defaults`, and expose them as
        ``weights`` (the name), ``prior_scale``, ``num_prior_classes``, ``penalize_bias`` and
        ``num_prior_entries``."""
        strategy = get_weights(weights, self.weight_choices).with_defaults(**self.weight_defaults)
        self.weight_strategy, self.weights = strategy, strategy.name
        defaults = self.weight_defaults
        self.prior_scale = float(getattr(strategy, "prior_scale", None) or defaults["prior_scale"])
        self.num_prior_classes = getattr(strategy, "num_prior_classes", None)
        self.penalize_bias = _or(getattr(strategy, "penalize_bias", None), defaults["penalize_bias"])
        self.num_prior_entries = _or(getattr(strategy, "num_prior_entries", None), defaults["num_prior_entries"])

    # ---- the likelihood: an object, or the string shortcut ----------------------------------
    @classmethod
    def likelihood_shortcuts(cls, likelihood: str, num_classes: int) -> Dict[str, object]:
        """The options of the string shortcut ``likelihood`` for this model:
        :attr:`likelihood_defaults` read by :meth:`resolve_shortcuts`; ``"exact"`` sums every
        class, so it keeps only the noise.

        Example:

        >>> from pyro_ar.models import LinearClassifier
        >>> LinearClassifier.likelihood_shortcuts("ar", 1000)
        {'noise': 'gumbel', 'num_negatives': 20, 'strategy': 'per_datapoint', 'proposal': None}
        """
        values = cls.resolve_shortcuts(likelihood, num_classes, dict(cls.likelihood_defaults))
        if likelihood == "exact":
            return {"noise": values["noise"]}
        return values

    @classmethod
    def resolve_shortcuts(cls, likelihood: str, num_classes: int, values: Dict[str, object]) -> Dict[str, object]:
        """A model's own reading of the string shortcut's values (e.g. ``num_negatives="auto"``
        of :class:`~pyro_ar.models.LinearClassifier`); here unchanged."""
        return values

    @classmethod
    def make_likelihood(cls, likelihood, num_classes: int, sparse: bool = True) -> Likelihood:
        """The likelihood object of this model: ``likelihood`` itself when it is an object,
        else :func:`~pyro_ar.likelihoods.get_likelihood` of the name with the
        :meth:`likelihood_shortcuts` (and ``sparse`` for ``"bouchard"``, whose
        per-datapoint :math:`a_n` then take the model's sparse gradients).

        Example:

        >>> from pyro_ar.models import CategoricalLatentModel
        >>> CategoricalLatentModel.make_likelihood("ar", 500)
        AR(noise='gumbel', negatives=SharedNegatives(num_negatives=None))
        """
        if isinstance(likelihood, Likelihood):
            return likelihood
        if not isinstance(likelihood, str):
            raise ValueError(f"likelihood must be a pyro_ar.likelihoods.Likelihood or a name, got "
                             f"likelihood={likelihood!r}")
        values = cls.likelihood_shortcuts(likelihood, num_classes)
        if likelihood == "bouchard":
            values["sparse"] = sparse
        return get_likelihood(likelihood, **values)

    # ---- what a subclass defines ---------------------------------------------------------
    def parameter_shapes(self) -> Dict[str, Tuple[int, ...]]:
        """Shapes of the per-class parameters, each with K rows (name -> shape)."""
        raise NotImplementedError

    def init_parameter(self, name: str, shape, like: torch.Tensor) -> torch.Tensor:
        """Initial value of a per-class parameter (``weights="mle"``/``"map"``)."""
        raise NotImplementedError

    def check_inputs(self, x, y: Optional[torch.Tensor]):
        """Raise ValueError naming the argument if ``x`` / ``y`` are malformed (shapes and
        dtypes: O(1), run at every model and guide call)."""
        raise NotImplementedError

    def check_values(self, x, y: Optional[torch.Tensor] = None, rows: Optional[torch.Tensor] = None):
        """Raise ValueError naming the first bad row if the values of ``x`` / ``y`` are not
        valid: here finite floating inputs (a tensor or a torch sparse matrix; other row
        stand-ins are left to their maker) and integer labels in [0, K). ``rows``: the
        rows of the data these are (a minibatch), for the message. A subclass with other
        inputs overrides it."""
        xn, yn = self.input_names
        if isinstance(x, torch.Tensor) and x.is_floating_point():
            check_finite(x, xn, rows)
        if y is not None:
            check_labels(y, self.num_classes, y.shape, name=yn, rows=rows)

    def minibatch_utility(self, x, params: Dict[str, torch.Tensor]):
        """The :class:`~pyro_ar.utility.Utility` of the minibatch inputs ``x``."""
        raise NotImplementedError

    # ---- shared plumbing ----------------------------------------------------------------
    noise = property(lambda self: self.likelihood.noise, doc="The noise of the utility model.")
    num_negatives = property(lambda self: self.likelihood.num_negatives)  # None: all classes

    @staticmethod
    def _like(x) -> torch.Tensor:
        """A tensor with the dtype and device parameters take from the inputs ``x``."""
        if isinstance(x, torch.Tensor) and not x.is_floating_point():
            return torch.zeros((), device=x.device)
        return torch.zeros((), dtype=x.dtype, device=x.device)

    def parameters(self, like: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        """The per-class parameters as the model sees them: params (created on first use),
        or prior samples for ``weights="bayes"``; adds the MAP prior factor."""
        like = torch.zeros(()) if like is None else like
        shapes = self.parameter_shapes()
        if self.weights == "bayes":
            prior = dist.Normal(like.new_zeros(()), self.prior_scale)
            return {n: pyro.sample(self.prefix + n, prior.expand(s).to_event(len(s)))
                    for n, s in shapes.items()}
        params = {n: self.param(n, s, like) for n, s in shapes.items()}
        if self.weights == "map":
            pyro.factor(self.prefix + "weight_prior", self.log_prior_estimate(params))
        return params

    def param(self, name: str, shape, like: torch.Tensor) -> torch.Tensor:
        """The per-class parameter ``prefix + name`` from Pyro's param store, created at
        :meth:`init_parameter` on first use. A stored value of another shape (another model's
        parameter of the same name, left in the global store) raises ValueError naming it,
        instead of failing later inside the utility."""
        value = pyro.param(self.prefix + name, lambda: self.init_parameter(name, shape, like))
        if tuple(value.shape) != tuple(shape):
            raise ValueError(
                f"the param store holds {self.prefix + name!r} of shape {tuple(value.shape)}, but "
                f"this {type(self).__name__} needs shape {tuple(shape)}: a parameter of another "
                "model of the same name? Call pyro.clear_param_store() first, or give each "
                "model its own prefix=")
        return value

    def log_prior_estimate(self, params: Dict[str, torch.Tensor]) -> torch.Tensor:
        r"""Unbiased estimate of :math:`\sum_k\log N(\theta_k; 0, s^2 I)` over all per-class
        parameters, from one uniform class subsample shared by them."""
        K = self.num_classes
        U = self.num_prior_classes or self.num_negatives or K
        like = next(iter(params.values()))
        prior = dist.Normal(like.new_zeros(()), self.prior_scale)
        if U >= K:
            return sum(prior.log_prob(p).sum() for p in params.values())
        rows = sample_without_replacement(K, U, device=like.device)
        total = sum(prior.log_prob(self._gather_rows(p, rows)).sum() for p in params.values())
        return (K / U) * total

    def _gather_rows(self, p: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        if p.dim() == 1:
            return torch.gather(p, 0, rows, sparse_grad=self.sparse)
        return torch.nn.functional.embedding(rows, p, sparse=self.sparse)

    def create_plates(self, x, y: Optional[torch.Tensor] = None,
                      sample_weight: Optional[torch.Tensor] = None):
        """The plates of one step, opened by the model and by its guides (``create_plates=``
        of a guide): those of the model's :attr:`weight_strategy` -- the ``"data"`` plate
        (:meth:`data_plate`), and for class-subsampled Bayesian weights also a
        ``"classes"`` plate."""
        return self.weight_strategy.create_plates(self, x, y, sample_weight)

    def data_plate(self, x, y: Optional[torch.Tensor] = None,
                   sample_weight: Optional[torch.Tensor] = None):
        """The ``"data"`` plate of one step, with O(B) subsample indices.

        ``pyro.plate("data", N, subsample_size=B)`` draws ``torch.randperm(N)``: O(N) work per
        step. Here it is a :class:`~pyro_ar.models.plates.SubsamplePlate`, whose B indices come
        from :func:`~pyro_ar.subsets.sample_without_replacement` (uniform over B-subsets); a
        guide built with ``create_plates=model.create_plates`` draws them and Pyro's replay
        hands them to the model, which then draws none (nor re-checks the labels the guide's
        plate checked). Without labels (prediction) or without ``subsample_size``: all rows.
        With ``sample_weight`` (N,) the plate is a :class:`~pyro_ar.models.plates.WeightedPlate`.
        Checks the call's inputs first (:meth:`check_call`).
        """
        self.check_call(x, y)
        N = len(x)
        B = self.batch_size(x, y)
        if sample_weight is not None:
            plate = WeightedPlate("data", N, subsample_size=B, weight=sample_weight, device=x.device)
        else:
            plate = SubsamplePlate("data", N, subsample_size=B, device=x.device)
        self.check_minibatch(x, y, plate.subsample)  # before a guide gathers at its rows
        return plate

    def batch_size(self, x, y: Optional[torch.Tensor] = None) -> Optional[int]:
        """The data plate's minibatch size B for this call: ``subsample_size`` (at most the
        number of rows), or None (every row: no subsample, or no labels)."""
        return None if y is None or self.subsample_size is None else min(self.subsample_size, len(x))

    def check_minibatch(self, x, y: Optional[torch.Tensor], rows: Optional[torch.Tensor]):
        """The O(B) checks of a training call's minibatch ``rows`` (None: every row): its labels
        (:meth:`check_batch`), unless :meth:`check_data` passed these very tensors or the
        same rows were just checked. Nothing without labels."""
        if y is not None and not self._checked_whole(x, y):
            self._check_batch_once(x, y, rows)

    def _check_batch_once(self, x, y: torch.Tensor, rows: Optional[torch.Tensor]):
        """:meth:`check_batch`, skipped for the labels and rows it last passed (unchanged): the
        model replayed on its guide's trace opens the plate on the guide's very indices."""
        last = self.__dict__.get("_checked_batch")
        if last is not None and rows is not None and last[0].matches(y) and last[1].matches(rows):
            return
        self.check_batch(x, y, rows)
        self._checked_batch = (_Unchanged(y), _Unchanged(rows))

    def check_call(self, x, y: Optional[torch.Tensor] = None):
        """The O(1) checks of one model or guide call, before any input is touched: shapes
        and dtypes (:meth:`check_inputs`) and at least one row."""
        self.check_inputs(x, y)
        self._check_nonempty(x)

    def check_batch(self, x, y: torch.Tensor, rows: Optional[torch.Tensor]):
        """The O(B) value checks of a training call on the minibatch ``rows`` (None: all):
        here its labels (what guides and likelihoods index with). Skipped for the tensors
        that :meth:`check_data` passed, while they are unchanged: its reductions would
        synchronise a GPU with the host at every step."""
        self.check_values(None, take_rows(y, rows), rows)

    def check_data(self, x, y: Optional[torch.Tensor] = None,
                   sample_weight: Optional[torch.Tensor] = None):
        """Check the whole training data once (O(N)): what every call checks, plus the
        values of every row (:meth:`check_values`: finite inputs, labels in range), naming
        the first bad row. :func:`~pyro_ar.infer.train` calls it with its data before the
        first step, so a bad row is found at once, not when a minibatch draws it.

        Example:

        >>> import torch
        >>> from pyro_ar.models import LinearClassifier
        >>> LinearClassifier(2, 3).check_data(torch.zeros(4, 2), torch.tensor([0, 2, 3, 1]))
        Traceback (most recent call last):
        ...
        ValueError: y must lie in [0, 3), got [3] (the first at y[2])
        """
        self.check_call(x, y)
        if sample_weight is not None:
            check_sample_weight(sample_weight, len(x))
        self.check_values(x, y)
        self._checked = tuple(_Unchanged(t) for t in (x, y))

    def _checked_whole(self, x, y) -> bool:
        """Whether ``x`` and ``y`` are the very tensors :meth:`check_data` last passed, not
        modified in place since (their version counters unchanged)."""
        checked = self.__dict__.get("_checked")
        return checked is not None and checked[0].matches(x) and checked[1].matches(y)

    def __getstate__(self):
        state = dict(self.__dict__)
        state.pop("_checked", None)  # (weak references to data do not pickle)
        state.pop("_checked_batch", None)
        return state

    def _check_nonempty(self, x):
        """A data set needs at least one datapoint (a 0-row plate has nothing to scale by)."""
        if len(x) == 0:
            xn, yn = self.input_names
            raise ValueError(f"{xn} has 0 rows: a model needs at least one datapoint, got "
                             f"{xn} of shape {tuple(x.shape)}")

    def __call__(self, x, y: Optional[torch.Tensor] = None,
                 sample_weight: Optional[torch.Tensor] = None):
        """The model: one step of the :attr:`weight_strategy` (training with labels ``y``;
        labels drawn for ``Predictive`` without)."""
        return self.weight_strategy.step(self, x, y, sample_weight)

    # ---- evaluation ---------------------------------------------------------------------
    def fitted_parameters(self, like: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        """The fitted per-class parameters from the param store (detached; created at their
        initial values if the model has not been run yet)."""
        if self.weights == "bayes":
            raise ValueError("weights='bayes' has no point estimate: use the guide's posterior "
                             "(e.g. guide.median()) or Predictive")
        like = torch.zeros(()) if like is None else like
        return {n: self.param(n, s, like).detach() for n, s in self.parameter_shapes().items()}

    def utility(self, x, params: Optional[Dict[str, torch.Tensor]] = None):
        """Utilities of new inputs under the fitted (or given) parameters, for evaluation."""
        params = self.fitted_parameters() if params is None else params
        return self.minibatch_utility(x, {n: p.detach() for n, p in params.items()})

    def evaluation_source(self, x):
        """``(source, rows)`` for :mod:`pyro_ar.evaluation` under the fitted parameters
        (``rows`` None: one row of utilities per datapoint)."""
        return self.utility(x), None

    def log_likelihood(self, x, y: torch.Tensor, **kwargs):
        """Exact predictive log-likelihood over all K classes under the fitted parameters
        (:func:`pyro_ar.evaluation.log_likelihood`; ``kwargs`` go there)."""
        self.check_inputs(x, y if isinstance(y, torch.Tensor) else None)
        self._check_nonempty(x)
        source, rows = self.evaluation_source(x)
        return evaluation.log_likelihood(source, y, self.noise, rows=rows, **kwargs)

    def evaluate(self, x, y: torch.Tensor, metrics=("log_lik", "accuracy", "top5"), **kwargs):
        """Several metrics in one chunked pass (:func:`pyro_ar.evaluation.evaluate`)."""
        self.check_inputs(x, y if isinstance(y, torch.Tensor) else None)
        self._check_nonempty(x)
        source, rows = self.evaluation_source(x)
        return evaluation.evaluate(source, y, metrics, self.noise, rows=rows, **kwargs)

    def _repr_fields(self):
        return {"K": self.num_classes}

    def __repr__(self):
        fields = ", ".join(f"{k}={v}" for k, v in self._repr_fields().items())
        return (f"{type(self).__name__}({fields}, likelihood={self.likelihood!r}, "
                f"weights={self.weights!r}, subsample_size={self.subsample_size})")


_LIKELIHOOD = "give the {} to the likelihood object, likelihood="
MOVED_KEYWORDS = {
    "noise": _LIKELIHOOD.format("noise") + "AR(noise=...) (or Exact(noise=...))",
    "num_negatives": _LIKELIHOOD.format("negatives") + "AR(noise, negatives=s) (an int or a sampler of "
                     "pyro_ar.negatives)",
    "strategy": _LIKELIHOOD.format("negatives") + "AR(noise, negatives=SharedNegatives(s)) (a sampler of "
                "pyro_ar.negatives)",
    "proposal": _LIKELIHOOD.format("negatives") + "AR(noise, negatives=ImportanceNegatives(s, proposal))",
    "bouchard_a": _LIKELIHOOD.format("a") + "Bouchard(a=..., negatives=...)",
    "likelihood_kwargs": _LIKELIHOOD.format("options") + "...",
    "prior_scale": "give the prior scale to the weight strategy, weights=MAP(prior_scale=...) or Bayes(prior_scale=...)",
    "num_prior_classes": "give it to the weight strategy, weights=MAP(num_prior_classes=...)",
    "penalize_bias": "give it to the weight strategy, weights=MAP(penalize_bias=...)",
    "num_prior_entries": "give it to the weight strategy, weights=MAP(num_prior_entries=...)",
    "init_scale": "give it to the initialisation record, init=Init(scale=...)",
    "bias_init_scale": "give it to the initialisation record, init=Init(bias_scale=...)",
    "bias_init": "give it to the initialisation record, init=Init(bias=...)",
    "init_bias": "give it to the initialisation record, init=Init(bias=...)",
    "weight_loc": "give it to the initialisation record, init=Init(weight=...)",
    "init_u_scale": "give it to the initialisation record, init=Init(posterior_scale=...)",
    "num_sessions": "give the per-session posterior as an object, posterior=LocalPosterior(num_sessions, latent_dim, num_items)",
    "num_data": "give the per-datapoint posterior as an object, posterior=LocalPosterior(num_data, latent_dim, sum(cardinalities))",
    "bouchard": "choose through the likelihood object: likelihood=GaussianBouchard(...) (analytic) or Bouchard(...) (sampled)",
    "num_inducing": "give the GP map as an object, utility=SparseGPMap(latent_dim, num_inducing, lengthscale, variance)",
    "lengthscale": "give the GP map as an object, utility=SparseGPMap(latent_dim, num_inducing, lengthscale, variance)",
    "kernel_variance": "give the GP map as an object, utility=SparseGPMap(latent_dim, num_inducing, lengthscale, variance)",
    "hidden_dim": "give the encoder as an object, posterior=SessionEncoder(num_items, latent_dim, hidden_dim)",
}
"""Where each keyword of the former model constructors went (the TypeError of
``CategoricalModel.__new__`` quotes it)."""


def _or(value, default):
    return default if value is None else value


class _Unchanged:
    """A weak reference to a tensor with its version counter then: :meth:`matches` is True
    for that same tensor while nothing has written to it in place."""

    def __init__(self, t):
        self.ref = weakref.ref(t) if isinstance(t, torch.Tensor) else None
        self.version = _version(t)

    def matches(self, t) -> bool:
        return self.ref is not None and self.ref() is t and _version(t) == self.version


def _version(t):
    try:
        return t._version
    except (AttributeError, RuntimeError):  # not a tensor; a tensor kind without a counter
        return None

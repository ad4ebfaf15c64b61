r"""The estimator's hyper-parameter specs and their automatic choices: the weights
(:class:`Weights`: kind, prior scale, rank, posterior draws), the likelihood
(:func:`likelihood_spec`), the prior-scale grid and when exact softmax is cheaper.

* ``Weights(prior_scale="auto")`` chooses the scale s of the Gaussian prior
  :math:`N(0, s^2)` on the weights on a held-out split (:func:`search_holdout`): first from :data:`PRIOR_SCALE_GRID`
  (``s = sqrt(C)`` for scikit-learn's ``LogisticRegression`` grid C in {0.01, 0.1, 1, 10}),
  then from the two half-steps (a factor :math:`10^{1/4}`) on either side of the best
  (:func:`refined_candidates`: on MNIST and Bibtex the best C lies between grid points).
* ``ARClassifier(likelihood="auto")`` takes the exact softmax when
  :func:`exact_step_is_cheaper` says its SVI step costs no more than an A&R step.
"""

import math
import numbers
import warnings
from typing import NamedTuple, Optional

import numpy as np

from ..likelihoods import AR, Exact
from ..models.base import WEIGHT_CHOICES
from ..models.weights import WeightStrategy, get_weights
from ..negatives import DEFAULT_NUM_NEGATIVES, NegativeSampler, PerDatapointNegatives, get_negative_sampler
from ..noise import Noise, get_noise
from ..numerics import check_choice, check_float, check_int

__all__ = ["PRIOR_SCALE_GRID", "SEARCH_HOLDOUT", "SEARCH_MIN_ROWS", "STOPPING", "LikelihoodSpec", "Weights", "early_stopping_options",
           "weight_strategy",
           "exact_step_is_cheaper",
           "likelihood_spec", "prior_scale_candidates", "refined_candidates", "resolve_likelihood", "search_holdout",
           "search_prior_scale", "select_prior_scale"]

#: the estimator's string shortcuts of ``likelihood=`` (Gumbel noise, :data:`DEFAULT_NUM_NEGATIVES`
#: negatives of a strategy chosen from the data): "auto" takes the exact softmax where it is cheaper
LIKELIHOOD_SHORTCUTS = ("auto", "ar", "exact")


class Weights:
    r"""The weights of an :class:`~pyro_ar.ARClassifier` (``weights=``): a model's weight
    strategy plus the options only the estimator has. One concept, one way in: the strategy is
    the models' own object (:mod:`pyro_ar.models.weights`), and ``Weights`` is the thin wrapper
    that adds the estimator's choices around it:

    :param kind: the strategy -- :class:`~pyro_ar.models.MLE`, :class:`~pyro_ar.models.MAP`
        (the prior :math:`w_{kd} \sim N(0, s^2)` on W; the estimator leaves the bias out of it
        unless ``penalize_bias=True``) or :class:`~pyro_ar.models.Bayes` (a mean-field Gaussian
        posterior over W and b with that prior on both) -- or its name ``"mle"``, ``"map"``,
        ``"bayes"``.
    :param prior_scale: s: a number, a list of candidates or ``"auto"`` (chosen on a held-out
        split, :func:`select_prior_scale`). A strategy that sets its own ``prior_scale``
        (``MAP(0.1)``) fixes s; giving a second, different one here is a ``ValueError``.
    :param rank: ``"auto"``, None (full rank) or r: :math:`W = V E^\top`.
    :param num_posterior_samples: the posterior draws that predictions average (``Bayes``).

    ``ARClassifier(weights=MAP(0.1))`` is ``Weights(MAP(0.1))``: a strategy alone takes the
    defaults of the other three. The parameters follow scikit-learn's conventions, so
    ``clf.set_params(weights__prior_scale=0.3)``, ``weights__kind__penalize_bias`` and
    ``clone`` work.

    Example:

    >>> from pyro_ar.infer.selection import Weights
    >>> from pyro_ar.models import MAP
    >>> Weights("bayes", prior_scale=1.0)
    Weights(kind='bayes', prior_scale=1.0)
    >>> Weights(MAP(0.1), rank=16).checked().prior_scale
    0.1
    """

    _DEFAULTS = {"kind": "map", "prior_scale": "auto", "rank": "auto", "num_posterior_samples": 32}

    def __init__(self, kind="map", prior_scale="auto", rank="auto", num_posterior_samples=32):
        self.kind, self.prior_scale, self.rank = kind, prior_scale, rank
        self.num_posterior_samples = num_posterior_samples

    def get_params(self, deep=True):
        params = {name: getattr(self, name) for name in self._DEFAULTS}
        if deep and isinstance(self.kind, WeightStrategy):
            params.update({f"kind__{k}": v for k, v in self.kind.get_params().items()})
        return params

    def set_params(self, **params):
        nested = {k[len("kind__"):]: params.pop(k) for k in list(params) if k.startswith("kind__")}
        for name, value in params.items():
            if name not in self._DEFAULTS:
                raise ValueError(f"Weights has no parameter {name!r}; it has {list(self._DEFAULTS)}")
            setattr(self, name, value)
        if nested:
            if not isinstance(self.kind, WeightStrategy):
                raise ValueError(f"Weights(kind={self.kind!r}) has no nested parameters {sorted(nested)}; "
                                 f"give kind as a strategy object (e.g. pyro_ar.models.MAP())")
            self.kind.set_params(**nested)
        return self

    def checked(self) -> "Weights":
        """A copy with every value checked (``ValueError`` naming it) and resolved: ``kind`` the
        strategy's name, ``strategy`` the strategy object (its ``prior_scale`` left None: the
        fit sets it), ``prior_scale`` a number or the sorted candidates (:func:`prior_scale_candidates`)."""
        rank = self.rank
        if not (rank is None or rank == "auto" or isinstance(rank, numbers.Integral) and not isinstance(rank, bool)
                and rank >= 1):
            raise ValueError(f"rank must be 'auto', None or an integer >= 1, got {rank!r}")
        strategy, scale = weight_strategy(self.kind), self.prior_scale
        own = strategy.prior_scale
        if own is not None:
            if not (_same(scale, "auto") or _same(prior_scale_candidates(scale), own)):
                raise ValueError(f"the prior scale is given twice: weights kind={self.kind!r} and "
                                 f"prior_scale={scale!r}; set one of them")
            scale, strategy = own, strategy.with_defaults()
            strategy.prior_scale = None
        out = Weights(strategy.name, prior_scale_candidates(scale), rank,
                      check_int("num_posterior_samples", self.num_posterior_samples, 1))
        out.strategy = strategy
        return out

    def __eq__(self, other):
        return type(other) is type(self) and self.get_params() == other.get_params()

    def __repr__(self):
        changed = {k: v for k, v in self.get_params(deep=False).items() if not _same(v, self._DEFAULTS[k])}
        return f"Weights({', '.join(f'{k}={v!r}' for k, v in changed.items()) or ''})"


def weight_strategy(kind) -> WeightStrategy:
    """The model strategy of an estimator's ``kind`` (a name of ``WEIGHT_CHOICES`` or an
    ``MLE`` / ``MAP`` / ``Bayes`` object), ``ValueError`` naming ``weights`` and the accepted
    forms otherwise.

    Example:

    >>> from pyro_ar.infer.selection import weight_strategy
    >>> from pyro_ar.models import MAP
    >>> weight_strategy("bayes"), weight_strategy(MAP(0.1))
    (Bayes(), MAP(prior_scale=0.1))
    """
    name = kind.name if isinstance(kind, WeightStrategy) else kind
    if isinstance(name, str) and name in WEIGHT_CHOICES:
        return get_weights(kind, WEIGHT_CHOICES)
    raise ValueError(f"weights must be one of {list(WEIGHT_CHOICES)}, a weight strategy (pyro_ar.models.MLE(), "
                     f"MAP(...), Bayes(...)) or a pyro_ar.estimator.Weights(kind, prior_scale, rank, "
                     f"num_posterior_samples) around one, got {kind!r}")


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


#: ``early_stopping=True`` (or a dict of some of these, the rest at their defaults): hold out
#: ``validation_fraction`` of the rows, stop after ``n_iter_no_change`` epochs without an
#: improvement of ``tol`` nats per held-out datapoint (the fraction also sets the prior-scale
#: search's and the weight-pattern path's held-out rows when early stopping is off)
STOPPING = {"validation_fraction": 0.1, "n_iter_no_change": 5, "tol": 1e-4}


def early_stopping_options(early_stopping):
    """``(on, validation_fraction, n_iter_no_change, tol)`` of the estimator's ``early_stopping=``
    (a bool, or a dict of some of :data:`STOPPING`: on), checked.

    Example:

    >>> from pyro_ar.infer.selection import early_stopping_options
    >>> early_stopping_options(False), early_stopping_options({"tol": 0.01})
    ((False, 0.1, 5, 0.0001), (True, 0.1, 5, 0.01))
    """
    if isinstance(early_stopping, dict):
        unknown = sorted(set(early_stopping) - set(STOPPING))
        if unknown:
            raise ValueError(f"early_stopping takes the keys {list(STOPPING)}, got {unknown}")
        on, options = True, {**STOPPING, **early_stopping}
    elif isinstance(early_stopping, (bool, np.bool_)):
        on, options = bool(early_stopping), STOPPING
    else:
        raise ValueError(f"early_stopping must be a bool or a dict of {list(STOPPING)}, got {early_stopping!r}")
    return (on, check_float("early_stopping['validation_fraction']", options["validation_fraction"], 0.0, 1.0),
            check_int("early_stopping['n_iter_no_change']", options["n_iter_no_change"], 1),
            check_float("early_stopping['tol']", options["tol"], low=0.0, low_open=False))


class LikelihoodSpec(NamedTuple):
    """The estimator's likelihood read from ``likelihood=`` (:func:`likelihood_spec`): ``mode``
    (``"auto"``, ``"ar"`` or ``"exact"``), the noise, the number of negatives (None: all), the
    negatives' ``strategy`` (``"auto"``: chosen from the data) and a sampler given as an object.

    Example:

    >>> from pyro_ar.infer.selection import likelihood_spec
    >>> likelihood_spec("exact").mode
    'exact'
    """

    mode: str
    noise: Noise
    num_negatives: Optional[int]
    strategy: str
    sampler: Optional[NegativeSampler] = None

    def likelihood(self, mode: str, strategy: str, counts, choice_sets=None):
        r"""The likelihood object of a fit: ``Exact(noise, choice_sets=choice_sets)`` for
        ``mode="exact"`` (``choice_sets``: a :class:`~pyro_ar.label_sets.ChoiceSets` of label-set
        pairs, or None), else A&R with
        the sampler given as an object (used as given while its count fits K - 1) or one built
        for the training path's ``strategy`` (importance draws from the training class
        frequencies :math:`\max(n_k, 1)^{0.75}`, the authors'); ``counts`` (K,) float64."""
        if mode == "exact":
            return Exact(self.noise, choice_sets=choice_sets)
        if choice_sets is not None:  # (A&R draws its negatives from all K classes)
            raise ValueError(f"choice_sets need the exact likelihood, got mode={mode!r}")
        K, n = len(counts), self.num_negatives
        clipped = None if n is None else min(n, K - 1)
        if self.sampler is not None and (clipped == n or self.strategy == "importance"):
            return AR(self.noise, self.sampler)
        proposal = counts.clamp(min=1.0) ** 0.75 if strategy == "importance" else None
        return AR(self.noise, get_negative_sampler(strategy, clipped, proposal))


def likelihood_spec(likelihood) -> LikelihoodSpec:
    """``likelihood=`` checked: a shortcut of ``LIKELIHOOD_SHORTCUTS``, or an
    :class:`~pyro_ar.likelihoods.AR` or :class:`~pyro_ar.likelihoods.Exact` object. An AR's
    negatives given as a count (``AR(noise, 5)``, i.e. ``PerDatapointNegatives``) take the
    estimator's strategy rule (:func:`~pyro_ar.training_path.choose_path`: per datapoint unless
    the labels are skewed or a step would gather too much); another sampler is used as given.

    Example:

    >>> from pyro_ar.likelihoods import AR
    >>> from pyro_ar.infer.selection import likelihood_spec
    >>> from pyro_ar.negatives import SharedNegatives
    >>> spec = likelihood_spec(AR("normal", 5))
    >>> spec.mode, spec.noise.name, spec.num_negatives, spec.strategy
    ('ar', 'normal', 5, 'auto')
    >>> likelihood_spec(AR("gumbel", SharedNegatives(5))).strategy
    'shared'
    """
    if isinstance(likelihood, str):
        check_choice("likelihood", likelihood, LIKELIHOOD_SHORTCUTS)
        return LikelihoodSpec(likelihood, get_noise("gumbel"), DEFAULT_NUM_NEGATIVES, "auto")
    if isinstance(likelihood, Exact):
        return LikelihoodSpec("exact", likelihood.noise, None, "auto")
    if isinstance(likelihood, AR):
        sampler = likelihood.sampler
        if type(sampler) is PerDatapointNegatives:  # (a count: the strategy is the estimator's rule)
            return LikelihoodSpec("ar", likelihood.noise, sampler.num_negatives, "auto")
        return LikelihoodSpec("ar", likelihood.noise, sampler.num_negatives, sampler.strategy, sampler)
    raise ValueError(f"likelihood must be one of {list(LIKELIHOOD_SHORTCUTS)} or a pyro_ar.likelihoods.AR / "
                     f"Exact object, got {likelihood!r}")

#: The prior scales ``prior_scale="auto"`` scores first: s = sqrt(C) for scikit-learn's
#: ``LogisticRegression`` grid C in {0.01, 0.1, 1, 10}; then :func:`refined_candidates`.
PRIOR_SCALE_GRID = (0.1, 10 ** -0.5, 1.0, 10 ** 0.5)
#: ``prior_scale="auto"``, in fractions of a plain fit's steps: a warm-up at the weakest prior
#: scale on the training split, a branch per scale from it (scored on the held-out split; 4
#: grid scales + 2 refined), the refit on all the data from the best branch; 2.0 plain fits
#: in total, as before the refinement (the estimator tests' cost). Measured
#: (``benchmarks/estimator_vs_sklearn.py``, test log-loss minus LogisticRegression's best C):
#: MNIST -0.003, Bibtex -0.002, digits -0.003; with (0.5, 0.25, 0.75), 2.75 fits: Bibtex
#: -0.023; a refit from the start instead of the branch: digits +0.002.
_WARMUP_BUDGET, _BRANCH_BUDGET, _REFIT_BUDGET = 0.4, 0.15, 0.7
#: The prior-scale search holds out at least this many rows (:func:`search_holdout`) ...
SEARCH_MIN_ROWS = 400
#: ... or this fraction of them where that is fewer.
SEARCH_HOLDOUT = 0.3


#: CPU seconds of one SVI step, fitted by ``benchmarks/exact_vs_ar_cost.py`` (one thread):
#: exact softmax a0 + a1 B K D + a2 B K, softmax A&R c0 + c1 B (s + 1) D + c2 B (s + 1)
#: (``python -m benchmarks.exact_vs_ar_cost --quick``: right in 20 of 20 configurations)
_EXACT_COST = (2.2e-3, 5.8e-11, 3.4e-9)
_AR_COST = (3.6e-3, 4.9e-9, 2.9e-7)


def exact_step_is_cheaper(num_classes: int, num_features: int, batch_size: int,
                          num_negatives) -> bool:
    r"""Whether an exact-softmax SVI step costs less CPU time than a softmax A&R step.

    The measured cost model of ``benchmarks/exact_vs_ar_cost.py`` (one thread; lazy
    row-sparse Adam, MAP weights, the estimator's guide and ELBO):

    .. math::  t_\text{exact} = a_0 + a_1 B K D + a_2 B K, \qquad
               t_\text{A\&R} = c_0 + c_1 B (s + 1) D + c_2 B (s + 1),

    K classes, D features, B datapoints per step, s negatives. The exact step is one dense
    (B, D) x (D, K) product, at BLAS speed; the A&R step gathers B (s + 1) rows of W (per
    datapoint negatives, with their sparse gradients) and has a larger fixed cost (the local
    step, the sampler): per class touched, a gathered row costs about :math:`c_1/a_1 \approx
    85` times a row of the matmul, so exact wins up to roughly
    :math:`K \approx 85 (s + 1) + (c_0 - a_0)/(a_1 B D)` -- e.g. K ~ 1,900 at s = 20,
    K ~ 630 at s = 5 (D = 784, B = 256): Bibtex (K = 148) and MNIST train exactly.
    With ``num_negatives`` None or at least K - 1 the class sum is exact anyway: True.

    Example:

    >>> from pyro_ar.infer.selection import exact_step_is_cheaper
    >>> exact_step_is_cheaper(10, 784, 1024, 20), exact_step_is_cheaper(100_000, 784, 256, 20)
    (True, False)
    """
    K, D, B = num_classes, num_features, batch_size
    if num_negatives is None or num_negatives >= K - 1:
        return True
    a0, a1, a2 = _EXACT_COST
    c0, c1, c2 = _AR_COST
    s1 = num_negatives + 1
    return a0 + a1 * B * K * D + a2 * B * K <= c0 + c1 * B * s1 * D + c2 * B * s1


def prior_scale_candidates(value):
    """``prior_scale`` checked: a float, or the sorted tuple of candidates of ``"auto"``
    (:data:`PRIOR_SCALE_GRID`) or of a list (ValueError naming ``prior_scale`` otherwise).

    Example:

    >>> from pyro_ar.infer.selection import prior_scale_candidates
    >>> prior_scale_candidates(2.0), prior_scale_candidates([3, 0.5])
    (2.0, (0.5, 3.0))
    """
    if isinstance(value, str) and value == "auto":
        return PRIOR_SCALE_GRID
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) > 0:
        return tuple(sorted(check_float("prior_scale", float(v) if isinstance(v, numbers.Real)
                                        and not isinstance(v, bool) else v, low=0.0) for v in value))
    if isinstance(value, (str, list, tuple, np.ndarray)):
        raise ValueError(f"prior_scale must be a positive number, 'auto' or a non-empty list of "
                         f"positive numbers, got {value!r}")
    return check_float("prior_scale", value, low=0.0)


def refined_candidates(grid, best) -> tuple:
    """The geometric midpoints between ``best`` and its neighbours in the sorted ``grid`` (at
    an end of the grid, the mirror of the inner midpoint: the search may leave the grid by
    half a step); empty for a grid of one scale.

    Example:

    >>> from pyro_ar.infer.selection import refined_candidates
    >>> [round(s, 3) for s in refined_candidates((0.1, 1.0, 10.0), 1.0)]
    [0.316, 3.162]
    >>> [round(s, 3) for s in refined_candidates((0.1, 1.0, 10.0), 0.1)]   # below the grid too
    [0.032, 0.316]
    """
    if len(grid) < 2:
        return ()
    i = grid.index(best)
    below = grid[i - 1] if i > 0 else best * best / grid[i + 1]
    above = grid[i + 1] if i + 1 < len(grid) else best * best / grid[i - 1]
    return (math.sqrt(below * best), math.sqrt(best * above))


def search_holdout(validation_fraction: float, data) -> float:
    r"""The fraction of ``data``'s rows (its labelled rows for label sets) that the prior-scale
    search holds out: ``validation_fraction``, raised on small data sets to
    :data:`SEARCH_MIN_ROWS` rows, but to no more than :data:`SEARCH_HOLDOUT` of them,

    .. math::  f = \max\bigl(f_\text{validation},\ \min(0.3,\ 400 / n)\bigr).

    The refit uses every row, so a larger held-out split costs the final model nothing, while
    the scores' noise falls as :math:`1/\sqrt{n_\text{held out}}`: with 10 % of sklearn's
    digits (126 of 1,257 rows) the scores of neighbouring scales differ by less than their
    standard error, and on 2 of 5 stratified 70/30 splits the search took a weak prior whose
    refit overfits (test log-loss +6 % and +32 % over ``LogisticRegression`` at its best C;
    ``python -m benchmarks.estimator_vs_sklearn --datasets digits --splits 0 1 2 3 4``, the
    splits' table in ``benchmarks/RESULTS.md``). From 4,000 rows on (10 % >= 400 rows: MNIST,
    Bibtex) nothing changes.

    Example:

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> from pyro_ar.infer.selection import search_holdout
    >>> small, large = SimpleNamespace(codes=np.zeros(1_257), groups=None), SimpleNamespace(codes=np.zeros(60_000), groups=None)
    >>> search_holdout(0.1, small), search_holdout(0.1, large)
    (0.3, 0.1)
    """
    groups = getattr(data, "groups", None)
    units = len(data.codes) if groups is None else len(np.unique(groups))
    return max(validation_fraction, min(SEARCH_HOLDOUT, SEARCH_MIN_ROWS / max(units, 1)))


def select_prior_scale(fit, grid, steps: int, init=None, refine: bool = False):
    """``(best scale, {scale: score}, state of the best)`` on a held-out split.

    ``fit(scale, num_steps, state) -> (state, validation score)`` trains from ``state``
    (None: from scratch). A warm-up of ``_WARMUP_BUDGET * steps`` at the weakest prior
    (the largest scale), then a branch of ``_BRANCH_BUDGET * steps`` from it per scale --
    every scale from the same point with the same number of steps, so that none is
    favoured by more training; with ``refine``, then a branch for each of the
    :func:`refined_candidates` around the grid's best. The best score wins (ties: the
    stronger prior).

    Example:

    >>> from pyro_ar.infer.selection import select_prior_scale
    >>> fit = lambda s, n, state: (s, -abs(s - 0.3))     # a score peaking at s = 0.3
    >>> select_prior_scale(fit, (0.1, 0.3, 1.0), steps=100)[0]
    0.3
    >>> round(select_prior_scale(fit, (0.1, 1.0), steps=100, refine=True)[0], 3)   # between
    0.316
    """
    start = fit(grid[-1], max(1, round(_WARMUP_BUDGET * steps)), init)[0]
    scores, states = {}, {}

    def branch(scales):
        for s in scales:
            states[s], scores[s] = fit(s, max(1, round(_BRANCH_BUDGET * steps)), start)
        return max(scores, key=lambda s: (scores[s], -s))

    best = branch(grid)
    if refine:
        best = branch(refined_candidates(grid, best))
    return best, scores, states[best]


def search_prior_scale(fit, grid, steps: int, init=None, refine: bool = False, verbose: bool = False):
    """``(best scale, {scale: score}, state of the best, SVI steps run)``: :func:`select_prior_scale`
    with one progress bar over all its fits (shown with ``verbose``; its total from a dry run of
    the search). ``fit(scale, num_steps, state, bar) -> (state, validation score, steps run)``.

    Example:

    >>> from pyro_ar.infer.selection import search_prior_scale
    >>> fit = lambda s, n, state, bar: (s, -abs(s - 0.3), n)     # a score peaking at s = 0.3
    >>> best, scores, state, steps = search_prior_scale(fit, (0.1, 0.3, 1.0), steps=100)
    >>> best, steps                                           # 40 warm-up + 3 branches of 15
    (0.3, 85)
    """
    from .progress import phase_bar

    planned, done, title = [], [], "ARClassifier phase 1/2: prior-scale search"
    select_prior_scale(lambda scale, n, state: (planned.append(n), 0.0), grid, steps, refine=refine)  # dry run
    with phase_bar(sum(planned), title, verbose) as bar:
        def one(scale, num_steps, state):
            if bar is not None:
                bar.set_description(f"{title} (fit {len(done) + 1} of {len(planned)}: prior scale {scale:.3g})",
                                    refresh=False)
            state, score, n = fit(scale, num_steps, state, bar)
            done.append(n)
            return state, score
        best, scores, state = select_prior_scale(one, grid, steps, init, refine=refine)
    return best, scores, state, sum(done)


def resolve_likelihood(spec: LikelihoodSpec, K: int, D: int, batch_size: int) -> str:
    """``"ar"`` or ``"exact"`` for the likelihood ``spec`` (:func:`likelihood_spec`): ``"auto"``
    takes the exact softmax (Gumbel noise only) when its step is cheaper (:func:`exact_step_is_cheaper`:
    always when the class sum is exact anyway, ``num_negatives >= K - 1``; and it has no bound to
    tighten), A&R otherwise. Forcing ``"ar"`` on an exact class sum warns.

    Example:

    >>> from pyro_ar.infer.selection import likelihood_spec, resolve_likelihood
    >>> spec = likelihood_spec("auto")
    >>> resolve_likelihood(spec, 10, 784, 1024), resolve_likelihood(spec, 100_000, 784, 1024)
    ('exact', 'ar')
    """
    n = spec.num_negatives
    exact_sum = n is None or n >= K - 1
    if spec.mode == "ar" and exact_sum and spec.noise.closed_form:
        warnings.warn(f"likelihood=AR with {n} negatives >= K - 1 = {K - 1}: the class sum is exact, so "
                      "likelihood='exact' (or 'auto') costs no more per step and has no bound to tighten",
                      UserWarning, stacklevel=4)
    if spec.mode != "auto":
        return spec.mode
    cheaper = exact_sum or exact_step_is_cheaper(K, D, batch_size, n)
    return "exact" if cheaper and spec.noise.closed_form else "ar"

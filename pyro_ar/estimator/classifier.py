"""The scikit-learn estimator :class:`ARClassifier` (see :mod:`pyro_ar.estimator`)."""

import math
import numbers
import sys

import numpy as np
import torch

import pyro
from pyro.infer import SVI

from ..evaluation import log_likelihood, predict_log_proba, top_k
from ..infer import (ClosedFormELBO, EarlyStopping, LearningRateDecay, TrainingDiverged, default_guide,
                     progress_bar, train)
from ..infer.loop import set_progress_total
from ..noise import Noise, get_noise
from ..models import LinearClassifier
from ..negatives import DEFAULT_NUM_NEGATIVES
from ..optim import lazy_adam
from .choices import _REFIT_BUDGET, prior_scale_candidates, resolve_likelihood, select_prior_scale
from ._files import load_estimator, save_estimator
from ._support import (PATTERN_MAX_EPOCHS, PATTERN_PRIOR_SCALE, pattern_and_centroids,
    _LIKELIHOODS, _MAX_SEED, _NOISES, _SITE, _STRATEGIES, _WEIGHTS, DENSIFY_MAX_ELEMENTS,
    apply_scaler, check_choice, check_float, check_int, choose_path,
    combine_sample_weights, copy_state, dummy_datapoint, encode_targets, fit_scaler, global_state,
    label_array, rows_source, seeded, torch_seeded, training_features,
)

try:  # scikit-learn is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.utils import check_random_state
    from sklearn.utils.multiclass import type_of_target
    from sklearn.utils.validation import check_is_fitted

    try:
        from sklearn.utils.validation import validate_data as _validate_data
    except ImportError:  # scikit-learn < 1.6
        def _validate_data(estimator, *args, **kwargs):
            return estimator._validate_data(*args, **kwargs)
except ImportError as e:  # pragma: no cover  (tested in a subprocess without scikit-learn)
    raise ImportError("pyro_ar.ARClassifier needs scikit-learn and scipy: pip install "
                      "scikit-learn scipy (or the extra: pip install 'pyro-ar[data]')") from e

__all__ = ["ARClassifier", "DENSIFY_MAX_ELEMENTS"]


def _checked_data(estimator, *args, **kwargs):
    """scikit-learn's ``validate_data``, its errors naming X (numpy's "could not convert
    string to float" names nothing)."""
    try:
        return _validate_data(estimator, *args, **kwargs)
    except ValueError as e:
        if any(name in str(e) for name in ("X", "y", "feature", "sample")):
            raise
        raise ValueError(f"X must be a numeric array or sparse matrix of shape (n_samples, "
                         f"n_features): {e}") from e

class ARClassifier(ClassifierMixin, BaseEstimator):
    r"""Linear classifier over many classes, fitted by Augment & Reduce (Pyro SVI).

    See the module docstring (:mod:`pyro_ar.estimator`) for the model, the bound and the
    costs. All arguments are stored unchanged and validated in :meth:`fit` (a bad value
    raises ``ValueError`` naming the argument).

    :param noise: ``"gumbel"`` (softmax; closed-form bound with natural-gradient local
        steps), ``"normal"`` (multinomial probit), ``"logistic"``, or a
        :class:`pyro_ar.Noise` instance (reparameterised local guide).
    :param num_negatives: classes sampled per likelihood estimate (clipped to K - 1,
        where the estimate is exact); None: all classes.
    :param strategy: ``"auto"`` (default: importance negatives when the labels are skewed,
        else per-datapoint, or shared where per-datapoint negatives would be memory-bound;
        see ``pyro_ar.estimator._support.choose_path``),
        ``"per_datapoint"`` (the paper's), ``"shared"`` (one set per minibatch) or
        ``"importance"`` (shared draws from the training class frequencies^0.75).
    :param weights: ``"map"`` (default: Gaussian prior on W, like scikit-learn's L2 penalty
        with ``C = prior_scale**2``; the bias is not penalised, like its intercept),
        ``"mle"`` or ``"bayes"`` (mean-field Gaussian posterior, ``AutoNormal``).
    :param prior_scale: standard deviation s of the prior N(0, s^2) on every entry of W
        (and of the bias under ``"bayes"``; with a ``rank``, the factors' priors are scaled
        so that the entries of W = V E^T still have variance s^2); ``"auto"`` (default) or a list: chosen from
        :data:`~pyro_ar.estimator.choices.PRIOR_SCALE_GRID` (``s = sqrt(C)`` for
        scikit-learn's C in {0.01, 0.1, 1, 10}) refined by half-steps around its best
        (:func:`~pyro_ar.estimator.choices.select_prior_scale`), or from the list, on a
        held-out ``validation_fraction``, then refitted on all the data (two plain fits'
        steps in all; ``prior_scale_``, ``prior_scale_scores_``); a first ``partial_fit`` takes 1 (or the
        list's middle).
    :param batch_size: datapoints per SVI step (clipped to the training size).
    :param max_epochs: passes over the data (on the weight-pattern path of sparse inputs at
        most ``PATTERN_MAX_EPOCHS`` = 8, without ``min_steps``: that fit starts at the class
        centroids and its held-out metrics level off by then) (one epoch = ceil(n_train / batch_size)
        steps on random minibatches); small data sets get more, up to ``min_steps`` steps.
    :param num_steps: if given, the exact number of SVI steps (overrides ``max_epochs`` and
        ``min_steps``).
    :param learning_rate: initial Adam step size of the global parameters (lazy Adam:
        sparse rows), decayed linearly to 5% of it over the run
        (:class:`~pyro_ar.infer.LearningRateDecay`).
    :param local_learning_rate: Adam step size of per-datapoint variational parameters,
        if the local guide has any (the default ones have none to train: the Gumbel local
        step is a natural-gradient step, and for other noises q is refitted at each step by
        :class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide`).
    :param num_posterior_samples: posterior draws averaged by ``predict_proba`` and the
        validation score (``"bayes"`` only).
    :param early_stopping: hold out ``validation_fraction`` of the data (stratified when
        possible), evaluate its mean log-likelihood after each epoch, stop after
        ``n_iter_no_change`` epochs without an improvement of at least ``tol``, and keep
        the best weights.
    :param validation_fraction: fraction held out for early stopping, in (0, 1).
    :param n_iter_no_change: patience of early stopping, in epochs.
    :param tol: minimal improvement of the validation log-likelihood (nats per datapoint).
    :param random_state: None, an int or a ``numpy.random.RandomState``: seeds torch /
        pyro (and the validation split) during fit; two fits with the same int give
        identical predictions (on CPU).
    :param device: torch device for training and prediction (``"cpu"``, ``"cuda"``, ...).
    :param verbose: print the data's shape and training path and show a labelled progress
        bar per phase of a fit (see below), with the running loss and the validation
        log-likelihood.
    :param standardize: standardise the features inside the estimator (the fitted scaling
        is applied again at prediction): dense -- centred and divided by their standard
        deviation, floored at the median one; sparse -- divided by their root mean square
        (no centring, the sparsity is kept), or, on the sparse path, all by one number, the
        root mean square row norm (rare features are not blown up). Raw, unscaled features
        then work with the default step size.
    :param likelihood: ``"auto"`` (default: the exact softmax for Gumbel noise when its step
        costs no more than an A&R step,
        :func:`~pyro_ar.estimator.choices.exact_step_is_cheaper`; A&R otherwise), ``"ar"``
        or ``"exact"``. The choice made is ``likelihood_``.
    :param min_steps: a plain fit runs at least this many SVI steps (unless ``num_steps`` is
        given); a prior-scale search splits its steps between the search's fits and the final
        fit (``n_steps_by_phase_``).
    :param class_weight: None, ``"balanced"`` (weights inversely proportional to the class
        frequencies) or a dict label -> weight; multiplies ``sample_weight``.
    :param warm_start: start ``fit`` from the current weights (when the classes are the
        same; the standardisation of the first fit is kept).
    :param rank: ``"auto"`` (default: full rank while W and its optimizer state fit in memory
        comfortably, else low rank), None (full rank) or r: :math:`W = V E^\top`, O((D + K) r)
        parameters (:class:`~pyro_ar.models.LinearClassifier`'s ``rank``).

    The training path -- sparse inputs (utilities from the non-zeros of a scipy.sparse X,
    O(nnz x (1 + s)) per step), the rank and the negatives -- is chosen from the data by
    ``pyro_ar.estimator._support.choose_path`` and kept as ``training_path_``.

    ``verbose=True`` prints the data's shape and the training path, then shows one labelled
    progress bar per phase of a fit: with a prior-scale
    search, "phase 1/2: prior-scale search" (all its fits on the training split, in SVI
    steps) then "phase 2/2: fit on all the data"; otherwise "fit" ("partial_fit N" for the
    N-th ``partial_fit``); each with the steps per second, the running loss and the last
    validation log-likelihood.

    Fitted attributes: ``classes_`` (labels, position = class index), ``n_features_in_``
    (and ``feature_names_in_`` for data frames), ``param_state_`` (the Pyro param store
    state of the global parameters: ``{"params": {name: unconstrained tensor},
    "constraints": {name: constraint}}``; ``"weight"``/``"bias"`` for point weights, the
    ``AutoNormal`` locations and scales for ``"bayes"``), ``n_steps_`` (SVI steps run by
    the last ``fit`` / ``partial_fit`` call, all phases together), ``n_steps_by_phase_``
    (``{"prior_scale_search": steps, "final_fit": steps}``: the search's fits on the
    training split, 0 without a search, and the fit that gave the weights), ``n_iter_``
    (epochs of that final fit), ``loss_curve_`` (mean negative ELBO per training datapoint,
    per epoch of the final fit), ``validation_scores_`` and ``best_validation_score_`` (mean validation
    log-likelihood; None without early stopping), ``feature_mean_`` / ``feature_scale_``
    (the standardisation; None with ``standardize=False``), ``likelihood_``.

    Example:

    >>> import numpy as np
    >>> from pyro_ar import ARClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(300, 4)
    >>> y = X[:, :3].argmax(1)
    >>> clf = ARClassifier(num_negatives=2, min_steps=300, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> clf.score(X, y) > 0.8
    True
    """

    def __init__(self, noise="gumbel", num_negatives=DEFAULT_NUM_NEGATIVES, strategy="auto",
                 weights="map", prior_scale="auto", batch_size=1024, max_epochs=20,
                 num_steps=None, learning_rate=0.01, local_learning_rate=0.1,
                 num_posterior_samples=32, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, tol=1e-4, random_state=None, device="cpu",
                 verbose=False, standardize=True, likelihood="auto", min_steps=1000,
                 class_weight=None, warm_start=False, rank="auto"):
        self.noise = noise
        self.num_negatives = num_negatives
        self.strategy = strategy
        self.weights = weights
        self.prior_scale = prior_scale
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.num_steps = num_steps
        self.learning_rate = learning_rate
        self.local_learning_rate = local_learning_rate
        self.num_posterior_samples = num_posterior_samples
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.random_state = random_state
        self.device = device
        self.verbose = verbose
        self.standardize = standardize
        self.likelihood = likelihood
        self.min_steps = min_steps
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.rank = rank

    # ------------------------------------------------------------------ sklearn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"X_types": ["2darray", "sparse"]}

    def __getstate__(self):
        state = super().__getstate__()
        if "param_state_" in state:  # device-independent pickles
            state = dict(state)
            state["param_state_"] = copy_state(state["param_state_"], "cpu")
        return state

    # ------------------------------------------------------------------ validation
    def _noise_object(self):
        noise = self.noise
        if isinstance(noise, Noise):
            return noise
        if isinstance(noise, str) and noise in _NOISES:
            return get_noise(noise)
        raise ValueError(f"noise must be one of {list(_NOISES)} or a pyro_ar.Noise instance, "
                         f"got {noise!r}")

    def _torch_device(self):
        try:
            device = torch.device(self.device)
        except (RuntimeError, TypeError, ValueError) as e:
            raise ValueError(f"device must be a torch device or its name, got {self.device!r}") from e
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device={self.device!r} but CUDA is not available")
        return device

    def _validated_params(self, fitting=False):
        """All hyper-parameters checked (ValueError naming the argument) and resolved;
        with ``fitting``, also the torch seed from ``random_state`` (``p["seed"]``)."""
        p = dict(
            noise=self._noise_object(),
            num_negatives=check_int("num_negatives", self.num_negatives, 1, allow_none=True),
            strategy=check_choice("strategy", self.strategy, _STRATEGIES),
            weights=check_choice("weights", self.weights, _WEIGHTS),
            prior_scale=prior_scale_candidates(self.prior_scale),
            batch_size=check_int("batch_size", self.batch_size, 1),
            max_epochs=check_int("max_epochs", self.max_epochs, 1),
            min_steps=check_int("min_steps", self.min_steps, 0),
            num_steps=check_int("num_steps", self.num_steps, 1, allow_none=True),
            learning_rate=check_float("learning_rate", self.learning_rate, low=0.0),
            local_learning_rate=check_float("local_learning_rate", self.local_learning_rate, low=0.0),
            num_posterior_samples=check_int("num_posterior_samples", self.num_posterior_samples, 1),
            validation_fraction=check_float("validation_fraction", self.validation_fraction, 0.0, 1.0),
            n_iter_no_change=check_int("n_iter_no_change", self.n_iter_no_change, 1),
            tol=check_float("tol", self.tol, low=0.0, low_open=False),
            device=self._torch_device(),
            likelihood=check_choice("likelihood", self.likelihood, _LIKELIHOODS),
        )
        if not (self.rank is None or self.rank == "auto" or isinstance(self.rank, numbers.Integral)
                and not isinstance(self.rank, bool) and self.rank >= 1):
            raise ValueError(f"rank must be 'auto', None or an integer >= 1, got {self.rank!r}")
        p["rank"] = self.rank
        if not (self.class_weight is None or self.class_weight == "balanced"
                or isinstance(self.class_weight, dict)):
            raise ValueError(f"class_weight must be None, 'balanced' or a dict, got {self.class_weight!r}")
        for name in ("early_stopping", "verbose", "standardize", "warm_start"):
            v = getattr(self, name)
            if not isinstance(v, (bool, np.bool_, numbers.Integral)):
                raise ValueError(f"{name} must be a bool, got {v!r}")
        if not fitting:
            return p
        try:
            rs = check_random_state(self.random_state)
        except (ValueError, TypeError) as e:
            raise ValueError(f"random_state must be None, an int or a numpy RandomState, got "
                             f"{self.random_state!r}") from e
        if isinstance(self.random_state, numbers.Integral) and not isinstance(self.random_state, bool):
            p["seed"] = int(self.random_state) % (2**32)
        else:
            p["seed"] = int(rs.randint(_MAX_SEED))
        return p

    @staticmethod
    def _check_labels(y):
        """Class labels: binary/multiclass targets, or a 1-D object array of any hashables."""
        if y.ndim == 1 and y.dtype == object:  # e.g. enum members, tuples, mixed types
            try:
                for v in y:
                    hash(v)
                return
            except TypeError:
                raise ValueError("Unknown label type: y holds unhashable objects; class labels "
                                 "must be hashable") from None
        y_type = type_of_target(y, input_name="y")
        if y_type not in ("binary", "multiclass"):
            raise ValueError(f"Unknown label type: {y_type!r}. ARClassifier needs class labels "
                             "(binary or multiclass, one per sample), not continuous or "
                             "multi-output targets")

    # ------------------------------------------------------------------ building blocks
    def _model(self, p, K, D, *, num_negatives=None, strategy="per_datapoint", proposal=None,
               subsample_size=None, likelihood="ar", rank=None, bias_init=None, weight_loc=None):
        return LinearClassifier(  # the bias unpenalised, like scikit-learn's intercept
            D, K, noise=p["noise"], likelihood=likelihood, num_negatives=num_negatives,
            strategy=strategy, proposal=proposal, weights=p["weights"],
            prior_scale=p["prior_scale"] if not isinstance(p["prior_scale"], tuple) else
            getattr(self, "prior_scale_", None) or 1.0, subsample_size=subsample_size,
            sparse=p["weights"] != "bayes", site=_SITE, rank=rank, bias_init=bias_init, penalize_bias=False,
            weight_pattern=getattr(self, "weight_pattern_", None), weight_loc=weight_loc)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, sample_weight=None):
        """Fit the classifier by SVI (from scratch, or from the current fit with ``warm_start``).

        :param X: array-like or ``scipy.sparse`` matrix, shape (n_samples, n_features).
        :param y: array-like of hashable labels, shape (n_samples,).
        :param sample_weight: non-negative weights, shape (n_samples,): a datapoint of weight
            2 counts as two copies (multiplied by ``class_weight`` when given).
        :returns: self.
        """
        return self._fit(X, y, sample_weight, partial=False)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Train on one chunk (X, y), continuing from the current fit: for data that arrive in
        chunks or do not fit in memory.

        Each call makes ``max_epochs`` passes over its chunk: ``max_epochs x ceil(n / batch)``
        SVI steps on random minibatches of ``batch = min(batch_size, n)`` of its n rows
        (``num_steps`` steps if given; ``n_steps_``), from the current weights. That is
        ``fit``'s schedule without ``min_steps`` (which would fit every small chunk to
        convergence, forgetting the earlier ones), without the prior-scale search (the first
        call takes ``prior_scale`` 1, or the middle of a list, and later calls keep it),
        without early stopping and without step-size decay (the step size stays at
        ``learning_rate``: the length of the stream is unknown). For example, with the
        defaults a chunk of 449 digits (64 features, 10 classes) gets 20 full-chunk steps,
        and three such chunks reach 0.95 test accuracy (scikit-learn's
        ``SGDClassifier(loss="log_loss").partial_fit``: 0.92; ``tests/estimator``). The first
        call needs ``classes`` (every label that will ever occur) and fixes the
        standardisation from its chunk.

        :param X: array-like or ``scipy.sparse`` matrix, shape (n_samples, n_features).
        :param y: array-like of labels, shape (n_samples,), each in ``classes``.
        :param classes: every label of the stream (first call only; later calls may repeat it).
        :param sample_weight: non-negative weights, shape (n_samples,), as in :meth:`fit`.
        :returns: self.
        """
        return self._fit(X, y, sample_weight, partial=True, classes=classes)

    def _fit(self, X, y, sample_weight, partial, classes=None):
        p = self._validated_params(fitting=True)
        first = not (partial and hasattr(self, "classes_"))
        seen = {k: self.__dict__[k] for k in ("n_features_in_", "feature_names_in_") if k in self.__dict__}
        X, y = _checked_data(self, X, y, accept_sparse="csr", dtype=(np.float64, np.float32),
                              reset=first)
        self._check_labels(y)
        classes, codes = encode_targets(y, classes, getattr(self, "classes_", None), partial, first)
        K, (N, D) = len(classes), X.shape
        if K < 2:
            raise ValueError(f"ARClassifier needs samples of at least 2 classes, but the data "
                             f"contains only one class: {classes[0]!r}")
        warm = not first or (self.warm_start and hasattr(self, "param_state_")
                             and np.array_equal(self.classes_, classes))
        if warm and D != seen.get("n_features_in_", D):  # the fitted state stays as it was
            for k in ("n_features_in_", "feature_names_in_"):
                self.__dict__.pop(k, None)
            self.__dict__.update(seen)
            raise ValueError(f"warm_start=True continues the fit on {seen['n_features_in_']} features, "
                             f"got X with {D} features; set warm_start=False to fit anew")
        if not warm:
            self.training_path_ = choose_path(N, D, K, X.nnz if sp.issparse(X) else None, p["strategy"],
                                              p["rank"], p["batch_size"], p["num_negatives"],
                                              np.bincount(codes, minlength=K))
            pattern = self.training_path_.weight_pattern
            self.feature_mean_, self.feature_scale_ = fit_scaler(
                X, self.training_path_.sparse_inputs, idf=pattern) if self.standardize else (None, None)
            self.row_normalize_ = bool(pattern and self.standardize)
            self.weight_pattern_ = None
            self.likelihood_ = resolve_likelihood(p, K, D)
            self._predict_seed, self.n_partial_fits_ = None, 0
        p["strategy"] = self.training_path_.strategy
        X = apply_scaler(X, self.feature_mean_, self.feature_scale_, getattr(self, "row_normalize_", False))
        if self.training_path_.weight_pattern and isinstance(self.prior_scale, str):
            p["prior_scale"] = PATTERN_PRIOR_SCALE  # no search: see PATTERN_PRIOR_SCALE
        weights = combine_sample_weights(codes, classes, sample_weight, self.class_weight)
        if self.verbose:
            print(f"ARClassifier: {N:,} rows, {D:,} features, {K:,} classes; {self.training_path_.describe()}; "
                  f"{'exact softmax' if self.likelihood_ == 'exact' else 'A&R'} likelihood; "
                  f"{min(p['batch_size'], N):,} rows per SVI step", file=sys.stderr)
        with seeded(p["seed"] + (self.n_partial_fits_ if partial else 0), p["device"]):
            rng = np.random.RandomState(p["seed"])
            train_idx, val_idx = (np.arange(N), None) if partial else self._split(codes, p, rng)
            predict_seed = int(rng.randint(_MAX_SEED)) if self._predict_seed is None else self._predict_seed
            init = self.param_state_ if warm else None
            p, init, budget, search_steps = self._choose_prior_scale(X, codes, weights, K, D, p, rng,
                                                                     predict_seed, init, partial)
            phase = (f"partial_fit {self.n_partial_fits_ + 1}" if partial else
                     "phase 2/2: fit on all the data" if search_steps else "fit")
            bar = self._progress_bar(f"{phase} (prior scale {p['prior_scale']:.3g})" if search_steps
                                     else phase, max(1, round(budget * self._num_steps(p, len(train_idx), partial))))
            try:
                result = self._fit_svi(X, codes, weights, train_idx, val_idx, K, D, p, predict_seed,
                                       init, partial, budget, bar)
                if bar is not None and result[2] < bar.total:  # early stopping ended it
                    bar.set_description(f"{bar.desc}, early-stopped", refresh=False)
                    set_progress_total(bar, result[2])
            finally:
                if bar is not None:
                    bar.close()
        self.classes_, self._predict_seed = classes, predict_seed
        (self.param_state_, self.n_iter_, final_steps, self.loss_curve_,
         self.validation_scores_, self.best_validation_score_) = result
        self.n_steps_by_phase_ = {"prior_scale_search": search_steps, "final_fit": final_steps}
        self.n_steps_ = search_steps + final_steps
        self.n_partial_fits_ += int(partial)
        return self

    def _progress_bar(self, phase, total):
        """The progress bar of one phase of a fit (None unless ``verbose``)."""
        return progress_bar(total, desc=f"ARClassifier {phase}") if self.verbose else None

    def _split(self, codes, p, rng, force=False):
        N = len(codes)
        if not (self.early_stopping or force):
            return np.arange(N), None
        n_val = max(1, int(round(p["validation_fraction"] * N)))
        if N - n_val < 1:
            raise ValueError(f"validation_fraction={self.validation_fraction!r} leaves no training "
                             f"data out of {N} samples")
        from sklearn.model_selection import train_test_split
        try:
            train_idx, val_idx = train_test_split(np.arange(N), test_size=n_val, stratify=codes,
                                                  random_state=rng)
        except ValueError:  # a class too small to stratify
            perm = rng.permutation(N)
            train_idx, val_idx = perm[n_val:], perm[:n_val]
        return np.sort(train_idx), np.sort(val_idx)

    def _choose_prior_scale(self, X, codes, weights, K, D, p, rng, predict_seed, init, partial):
        """``(p, init, budget, search steps)`` of the final fit, ``p["prior_scale"]`` a number: a
        grid is scored on a held-out split (:func:`~pyro_ar.estimator.choices.select_prior_scale`;
        SVI steps run: ``search steps``, 0 without a search), the final fit starts from the
        best with ``_REFIT_BUDGET`` of a plain fit's steps. Sets ``prior_scale_`` (None for
        ``"mle"``) and ``prior_scale_scores_``."""
        grid, self.prior_scale_scores_ = p["prior_scale"], None
        grid = grid if isinstance(grid, tuple) else (grid,)
        if p["weights"] == "mle" or len(grid) == 1:
            self.prior_scale_ = None if p["weights"] == "mle" else grid[0]
            return dict(p, prior_scale=grid[0]), init, 1.0, 0
        if partial:  # no held-out split: the previous fit's choice, else the grid's middle
            if getattr(self, "prior_scale_", None) is None:
                self.prior_scale_ = 1.0 if 1.0 in grid else grid[len(grid) // 2]
            return dict(p, prior_scale=self.prior_scale_), init, 1.0, 0
        train_idx, val_idx = self._split(codes, p, rng, force=True)
        steps, refine, planned = self._num_steps(p, len(train_idx)), isinstance(self.prior_scale, str), []
        select_prior_scale(lambda s, n, state: (planned.append(n), 0.0), grid, steps, refine=refine)  # dry run
        bar = self._progress_bar("phase 1/2: prior-scale search", sum(planned))
        done = []

        def fit(scale, num_steps, state):  # on the training split: (state, best validation score)
            if bar is not None:
                bar.set_description(f"ARClassifier phase 1/2: prior-scale search (fit {len(done) + 1} of "
                                    f"{len(planned)}: prior scale {scale:.3g})", refresh=False)
            out = self._fit_svi(X, codes, weights, train_idx, val_idx, K, D,
                                dict(p, prior_scale=scale, num_steps=num_steps), predict_seed, state, False,
                                bar=bar)
            done.append(out[2])
            if bar is not None:  # an early-stopped fit: its remaining steps will not run
                set_progress_total(bar, bar.total - (num_steps - out[2]))
            return out[0], out[5]
        try:
            self.prior_scale_, self.prior_scale_scores_, state = select_prior_scale(
                fit, grid, steps, init, refine=refine)
        finally:
            if bar is not None:
                bar.close()
        return dict(p, prior_scale=self.prior_scale_), state, _REFIT_BUDGET, sum(done)

    def _num_steps(self, p, n_train, partial=False):
        """SVI steps of a plain fit on ``n_train`` datapoints (of a ``partial_fit`` call on a
        chunk of ``n_train``: ``max_epochs`` epochs, no ``min_steps``)."""
        steps_per_epoch = math.ceil(n_train / min(p["batch_size"], n_train))
        if getattr(self, "training_path_", None) is not None and self.training_path_.weight_pattern:
            # it starts at the centroid scorer: at most PATTERN_MAX_EPOCHS epochs, no min_steps
            return p["num_steps"] or min(p["max_epochs"], PATTERN_MAX_EPOCHS) * steps_per_epoch
        return p["num_steps"] or max(p["max_epochs"] * steps_per_epoch, 0 if partial else p["min_steps"])

    def _fit_svi(self, X, codes, weights, train_idx, val_idx, K, D, p, predict_seed, init_state,
                 partial, budget=1.0, bar=None):
        """Train with :func:`pyro_ar.infer.train` in a private param store (started from
        ``init_state`` when warm) for ``budget`` times a plain fit's steps, updating the
        progress ``bar`` (None: none); returns the fit's attributes (global parameter state,
        epochs, steps, loss curve, validation scores, best validation score)."""
        device = p["device"]
        n_train = len(train_idx)
        path = self.training_path_
        x = training_features(X if val_idx is None else X[train_idx], torch.float32, device,
                              path.sparse_inputs)
        y = torch.as_tensor(codes[train_idx], dtype=torch.long, device=device)
        data = (x, y) if weights is None else \
            (x, y, torch.as_tensor(weights[train_idx], dtype=torch.float32, device=device))
        batch_size = min(p["batch_size"], n_train)
        steps_per_epoch = math.ceil(n_train / batch_size)
        if path.weight_pattern and self.weight_pattern_ is None:  # from the rows it trains on
            self.weight_pattern_, self.weight_loc_ = pattern_and_centroids(
                X if val_idx is None else X[train_idx], codes[train_idx], K)
        init = None if init_state is None else copy_state(init_state, device)
        for t in (init or {"params": {}})["params"].values():
            t.requires_grad_(True)  # as pyro.param leaves the tensors it creates
        with pyro.get_param_store().scope(init):  # a private param store for this fit
            model, guide, svi = self._svi(p, K, D, y, batch_size)
            eval_fn = early = None
            if val_idx is not None:
                X_val = X[val_idx]
                y_val = torch.as_tensor(codes[val_idx], dtype=torch.long, device=device)

                w_val = None if weights is None else torch.as_tensor(weights[val_idx], device=device)

                def eval_fn():  # the mean validation log-likelihood, weighted like the data
                    source = self._source(X_val, p, K, self._live_weights(p, model, guide, predict_seed))
                    if w_val is None:
                        return {"val_log_lik": log_likelihood(source, y_val, p["noise"])}
                    lp = log_likelihood(source, y_val, p["noise"], reduce="none")
                    return {"val_log_lik": float((w_val * lp).sum() / w_val.sum().clamp(min=1e-300))}
                early = EarlyStopping("val_log_lik", patience=p["n_iter_no_change"], min_delta=p["tol"])
            num_steps = max(1, round(budget * self._num_steps(p, n_train, partial)))
            try:
                history = train(svi, *data, num_steps=num_steps,
                                eval_fn=eval_fn, eval_every=steps_per_epoch, log_every=steps_per_epoch,
                                eval_at_start=False, early_stopping=early,
                                callbacks=[] if partial else [LearningRateDecay()],
                                progress=bar if bar is not None else False)
            except TrainingDiverged as e:  # (the estimator keeps its previous fit, if any)
                raise TrainingDiverged(f"ARClassifier(learning_rate={p['learning_rate']!r}): {e}") from None
            state = global_state(model, guide)
        loss_curve = [r["loss"] / n_train for r in history if r["step"] > 0]
        scores = [r["val_log_lik"] for r in history if "val_log_lik" in r] if early else None
        return (state, len(loss_curve), history[-1]["step"], loss_curve, scores,
                early.best if early else None)

    def _svi(self, p, K, D, y, batch_size):
        """The model, its guide and ``SVI`` (lazy Adam; its own step size for local params)."""
        proposal, counts, path = None, torch.bincount(y, minlength=K).double(), self.training_path_
        if p["strategy"] == "importance":  # training class frequencies ^ 0.75 (the authors')
            proposal = counts.clamp(min=1.0) ** 0.75
        log_freq = (counts + 1).log()  # sparse / low-rank paths (large K): b starts at the unigram
        # (on the pattern path only for skewed labels, where the negatives are importance
        # draws: with a few rows for every class the centroids rank the classes better alone)
        bias_init = (log_freq - log_freq.mean()).float() if (path.sparse_inputs or path.rank) \
            and (not path.weight_pattern or path.strategy == "importance") else None
        model = self._model(p, K, D, num_negatives=None if p["num_negatives"] is None else
                            min(p["num_negatives"], K - 1), strategy=p["strategy"],
                            proposal=proposal, subsample_size=batch_size, likelihood=self.likelihood_,
                            rank=path.rank, bias_init=bias_init,
                            weight_loc=getattr(self, "weight_loc_", None) if path.weight_pattern else None)
        guide = default_guide(model, local_first=True)  # (ignored without a local latent)
        lr, local_lr = p["learning_rate"], p["local_learning_rate"]
        optim = lazy_adam(lambda name: {"lr": local_lr if name.rsplit(".", 1)[-1].startswith(
            f"{_SITE}_eps_") else lr})
        return model, guide, SVI(model, guide, optim, ClosedFormELBO())

    # ------------------------------------------------------------------ prediction core
    def _live_weights(self, p, model, guide, seed):
        """(W (S, K, D), b (S, K)) in float64 from the live param store: the point weights
        (S = 1) or ``num_posterior_samples`` draws of q(W, b) under ``seed``; with a rank,
        (V (S, K, r), b (S, K), E (S, D, r)) (W = V E^T is never formed)."""
        names = list(model.parameter_shapes())
        if model.weight_pattern is not None:  # W as a (K, D) sparse matrix
            fitted = model.fitted_parameters()
            return model.weight_pattern.sparse(fitted["weight"].double()), fitted["bias"].double()[None]
        if p["weights"] != "bayes":
            fitted = model.fitted_parameters()
            return tuple(fitted[n].double()[None] for n in names)
        draws, dummy = [], dummy_datapoint(model.num_features, p["device"])
        with torch.no_grad(), torch_seeded(seed, p["device"]):
            for _ in range(p["num_posterior_samples"]):
                s = guide[0](*dummy)  # the AutoNormal part: q(W, b)
                draws.append([s[n].double() for n in names])
        return tuple(torch.stack(d) for d in zip(*draws))

    def _weights(self, p, K, D):
        """The fitted weights as :meth:`_live_weights` gives them, from ``param_state_``."""
        with pyro.get_param_store().scope(copy_state(self.param_state_, p["device"])):
            rank = next((t.shape[-1] for n, t in self.param_state_["params"].items()  # (from E's shape)
                         if n.rsplit(".", 1)[-1] == "embedding"), None)
            model = self._model(p, K, D, likelihood="exact", rank=rank)
            guide = default_guide(model)
            if p["weights"] == "bayes":
                with torch.no_grad():  # set up the prototype trace on one dummy datapoint
                    guide(*dummy_datapoint(D, p["device"]))
            return self._live_weights(p, model, guide, self._predict_seed)

    @staticmethod
    def _source(X, p, K, weights):
        """The utilities of the rows of ``X`` under ``weights`` (:func:`rows_source`)."""
        return rows_source(X, K, weights, p["device"])

    def _prepare(self, X):
        check_is_fitted(self)
        p = self._validated_params()
        X = _checked_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False)
        X = apply_scaler(X, getattr(self, "feature_mean_", None), getattr(self, "feature_scale_", None),
                         getattr(self, "row_normalize_", False))
        return X, p, len(self.classes_)

    def _fitted_source(self, X, p, K):
        return self._source(X, p, K, self._weights(p, K, X.shape[1]))

    # ------------------------------------------------------------------ public prediction
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, shape (n_samples, n_classes), columns as ``classes_``."""
        X, p, K = self._prepare(X)
        return predict_log_proba(self._fitted_source(X, p, K), p["noise"]).cpu().numpy()

    def decision_function(self, X):
        """Class scores, shape (n_samples, n_classes) (binary: (n_samples,), the second
        class's score minus the first's): the mean utilities :math:`\\psi = W x + b` for point
        weights (the argmax is :meth:`predict`), the predictive log-probabilities for
        ``weights="bayes"``."""
        X, p, K = self._prepare(X)
        source = self._fitted_source(X, p, K)
        if p["weights"] == "bayes":
            scores = predict_log_proba(source, p["noise"])
        else:
            scores = source(torch.arange(X.shape[0]))
        scores = scores.cpu().numpy()
        return scores[:, 1] - scores[:, 0] if K == 2 else scores

    def predict_proba(self, X):
        """Class probabilities p(y = classes_[k] | x), shape (n_samples, n_classes).

        Exact marginals of the random-utility model (softmax for Gumbel noise, quadrature
        otherwise, O(K^2) per row); for ``weights="bayes"`` the average over
        ``num_posterior_samples`` posterior draws of the weights.
        """
        return np.exp(self.predict_log_proba(X))

    def predict(self, X):
        """Most probable class for each row (labels from ``classes_``)."""
        X, p, K = self._prepare(X)
        classes, _ = top_k(self._fitted_source(X, p, K), 1, p["noise"])
        return self.classes_[classes[:, 0].cpu().numpy()]

    def score(self, X, y, sample_weight=None):
        """Mean accuracy of :meth:`predict` on (X, y) (scikit-learn's default score);
        also for hashable labels that cannot be sorted."""
        try:
            return super().score(X, y, sample_weight=sample_weight)
        except TypeError:  # unorderable labels: sklearn's accuracy_score sorts them
            y_pred, y = self.predict(X), label_array(y)
            hits = np.fromiter((a == b for a, b in zip(y_pred, y)), dtype=float, count=len(y_pred))
            return float(np.average(hits, weights=sample_weight))

    def log_likelihood(self, X, y):
        """Mean predictive log-likelihood (1/N) sum_n log p(y_n | x_n) (nats per datapoint).

        Labels must be among ``classes_``.
        """
        X, p, K = self._prepare(X)
        y = label_array(y)
        if len(y) != X.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {len(y)} labels")
        index = {c: k for k, c in enumerate(self.classes_.tolist())}
        try:
            codes = np.fromiter((index[v] for v in y.tolist()), dtype=np.int64, count=len(y))
        except KeyError as e:
            raise ValueError(f"y contains a label not seen during fit: {e.args[0]!r}") from None
        codes = torch.as_tensor(codes, device=p["device"])
        return log_likelihood(self._fitted_source(X, p, K), codes, p["noise"])

    # ------------------------------------------------------------------ save / load
    def save(self, path, weights_only=True):
        """Save a fitted estimator: hyper-parameters, classes, standardisation, the param
        store state and what ``partial_fit`` / ``warm_start`` continue from, atomically (a
        failed save leaves an existing file untouched) and with a checksum that
        :meth:`load` verifies.

        The file is a ``torch.save`` of plain Python containers and tensors, loadable with
        ``torch.load(..., weights_only=True)``. Labels or hyper-parameters that are other
        Python objects would make a file that :meth:`load` refuses by default, so they
        raise ``ValueError`` (naming them) before anything is written, unless
        ``weights_only=False``: then load with ``ARClassifier.load(path, weights_only=False)``
        (for trusted files only).
        """
        check_is_fitted(self)
        save_estimator(self, path, weights_only)

    @classmethod
    def load(cls, path, map_location="cpu", weights_only=True):
        """Load an estimator written by :meth:`save` (ready to predict).

        Damaged, foreign or inconsistent files (another format or version, parameters whose
        shapes do not match the classes and features the file claims) raise ``ValueError``
        naming the path."""
        return load_estimator(cls, path, map_location, weights_only)

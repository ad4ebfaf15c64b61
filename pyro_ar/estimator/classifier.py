"""The scikit-learn estimator :class:`ARClassifier` (see :mod:`pyro_ar.estimator`)."""

import inspect
import math
import sys

import numpy as np
import torch

import pyro

from ..evaluation import log_likelihood, predict_log_proba, top_k
from ..features import DENSIFY_MAX_ELEMENTS, apply_scaler, fit_scaler, training_features
from ..files import seeded
from ..numerics import weighted_mean
from ..infer import EarlyStopping, LearningRateDecay, TrainingDiverged, train
from ..infer.param_state import global_state, state_on
from ..infer.pattern_fit import centroid_shape, choose_start, pattern_schedule, pattern_validation_score, \
    recentre_fit
from ..infer.progress import phase_bar, set_progress_total
from ..infer.saved_estimator import load_estimator, save_estimator
from ..infer.selection import _REFIT_BUDGET, Weights, early_stopping_options, resolve_likelihood, search_holdout, \
    search_prior_scale, weight_strategy
from ..label_sets import choice_set_log_likelihood, encode_multilabel, expand_sample_weight, format_label_sets, \
    precision_at_1
from ..labels import held_out_split, label_array, label_codes, weighted_samples
from ..training_path import PATTERN_MAX_EPOCHS, PATTERN_PRIOR_SCALE, choose_path, pattern_and_centroids
from ._checks import checked_data as _checked_data, fit_targets
from ._model import FitData as _FitData, FitResult as _FitResult, Predictor, choice_sets_of, fitted_weights, \
    training_svi, utility_source
from ._params import checked, refuse_removed, seed_of

_MAX_SEED = 2**31 - 1

try:  # scikit-learn is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
    from sklearn.base import BaseEstimator, ClassifierMixin
    from sklearn.utils.validation import check_is_fitted
except ImportError as e:  # pragma: no cover  (tested in a subprocess without scikit-learn)
    raise ImportError("pyro_ar.ARClassifier needs scikit-learn and scipy: pip install "
                      "scikit-learn scipy (or the extra: pip install 'pyro-ar[data]')") from e

__all__ = ["ARClassifier", "DENSIFY_MAX_ELEMENTS"]


class ARClassifier(ClassifierMixin, BaseEstimator):
    r"""Linear classifier over many classes, fitted by Augment & Reduce (Pyro SVI).

    See :mod:`pyro_ar.estimator` for the model and the bound. All arguments are stored
    unchanged and checked once per :meth:`fit` (a bad value raises ``ValueError`` naming it).

    :param likelihood: ``"auto"`` (default: the exact softmax where its step costs no more than
        an A&R step, :func:`~pyro_ar.infer.selection.exact_step_is_cheaper`), ``"ar"`` or
        ``"exact"`` -- Gumbel noise, 20 negatives of a strategy chosen from the data
        (:func:`pyro_ar.training_path.choose_path`) --, or a likelihood object carrying its noise
        and negatives: :class:`pyro_ar.likelihoods.AR` (``AR("normal", 5)``: multinomial probit,
        5 negatives of the chosen strategy; a sampler such as ``SharedNegatives(5)`` is used as
        given; a count above K - 1 is clipped) or :class:`~pyro_ar.likelihoods.Exact`. The
        choice made is ``likelihood_``.
    :param weights: the models' weight strategy (:mod:`pyro_ar.models.weights`) or its name:
        ``"map"`` / :class:`~pyro_ar.models.MAP` (default: the prior N(0, s^2) on W, sklearn's L2
        penalty with ``C = s**2``; the bias unpenalised unless ``MAP(penalize_bias=True)``),
        ``"mle"`` / :class:`~pyro_ar.models.MLE`, ``"bayes"`` / :class:`~pyro_ar.models.Bayes`
        (mean-field Gaussian posterior over W and b); or a :class:`~pyro_ar.estimator.Weights`
        around one, with the estimator's own options: the prior scale s (a strategy's own
        ``prior_scale`` fixes it; else ``"auto"``, default, or a list: chosen on a held-out split,
        :func:`~pyro_ar.infer.selection.select_prior_scale`, then refitted on all the data;
        ``prior_scale_``, ``prior_scale_scores_``; a first ``partial_fit`` takes 1 or the list's
        middle), the ``rank`` (``"auto"``: full rank while W and its optimizer state fit in
        memory; r: :math:`W = V E^\top`) and ``num_posterior_samples`` (32).
    :param batch_size: datapoints per SVI step (clipped to the training size).
    :param max_epochs: passes over the data (one epoch = ceil(n_train / batch_size) steps); on
        the weight-pattern path of sparse inputs at most ``PATTERN_MAX_EPOCHS`` = 8, fewer when
        held-out rows stop improving (:mod:`pyro_ar.infer.pattern_fit`). None: exactly
        ``min_steps`` steps.
    :param min_steps: a plain fit runs at least this many SVI steps; a prior-scale search
        splits them between its fits and the final fit (``n_steps_by_phase_``).
    :param learning_rate: initial Adam step size of the global parameters (lazy Adam), decayed
        linearly to 5% of it (:class:`~pyro_ar.infer.LearningRateDecay`).
    :param early_stopping: hold out a fraction of the data, score its mean log-likelihood after
        each epoch, stop after a number of epochs without an improvement of a tolerance (nats
        per datapoint) and keep the best weights: ``True`` (``validation_fraction=0.1``,
        ``n_iter_no_change=5``, ``tol=1e-4``) or a dict of some of them.
    :param standardize: scale the features inside the estimator (:func:`pyro_ar.features.fit_scaler`:
        dense centred and divided by their standard deviation, sparse by their root mean square, a
        nearly constant feature's floored; one scale on the sparse low-rank path, idf weights and
        unit rows on the weight pattern).
    :param warm_start: start ``fit`` from the current weights (same classes; scaling kept).
    :param random_state: None, an int or a ``numpy.random.RandomState`` (seeds torch, pyro, splits).
    :param device: torch device for training and prediction.
    :param verbose: print the data's shape and training path and show a progress bar per phase.

    Keywords of earlier versions (``noise``, ``num_negatives``, ``strategy``, ``prior_scale``,
    ``rank``, ``num_steps``, ...) raise ``TypeError`` naming their replacement
    (``pyro_ar.estimator.params_from_plain`` translates them).

    Fitted attributes: ``classes_``, ``n_features_in_`` (``feature_names_in_``),
    ``param_state_`` (the param store state of the global parameters: W, b, or the
    ``AutoNormal``'s locations and scales), ``training_path_``, ``likelihood_``, ``n_steps_``
    (all phases of the last call) and ``n_steps_by_phase_``, ``n_iter_`` and ``loss_curve_``
    (mean negative ELBO per datapoint and epoch of the final fit), ``validation_scores_`` and
    ``best_validation_score_`` (None without a held-out split), ``feature_mean_`` /
    ``feature_scale_`` (None with ``standardize=False``); on the weight-pattern path,
    ``centroid_start_`` (the starting scorer chosen on the held-out rows, a
    :class:`~pyro_ar.infer.pattern_fit.CentroidStart`; None before any choice or after
    :meth:`load`).

    Example:

    >>> import numpy as np
    >>> from pyro_ar import ARClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(300, 4)
    >>> y = X[:, :3].argmax(1)
    >>> clf = ARClassifier(min_steps=300, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> clf.score(X, y) > 0.8
    True
    """

    def __new__(cls, *args, **kwargs):  # (a keyword of an earlier version: a TypeError naming its replacement)
        refuse_removed(kwargs)
        return super().__new__(cls)

    def __init__(self, likelihood="auto", weights="map", batch_size=1024, max_epochs=20, min_steps=1000,
                 learning_rate=0.01, early_stopping=False, standardize=True, warm_start=False,
                 random_state=None, device="cpu", verbose=False):
        self.likelihood, self.weights, self.batch_size = likelihood, weights, batch_size
        self.max_epochs, self.min_steps, self.learning_rate = max_epochs, min_steps, learning_rate
        self.early_stopping, self.standardize, self.warm_start = early_stopping, standardize, warm_start
        self.random_state, self.device, self.verbose = random_state, device, verbose

    __signature__ = inspect.Signature(list(inspect.signature(__init__).parameters.values())[1:])  # (not __new__'s)

    def set_params(self, **params):
        """Set hyper-parameters as scikit-learn does (nested ones as ``weights__prior_scale``);
        a keyword removed in 0.2.0 raises a TypeError that names its replacement."""
        refuse_removed(params)
        return super().set_params(**params)

    _checked_params = checked  # (every hyper-parameter checked: (weights, likelihood spec, device))

    # ------------------------------------------------------------------ sklearn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _more_tags(self):  # scikit-learn < 1.6
        return {"X_types": ["2darray", "sparse"]}

    def __getstate__(self):
        state = dict(super().__getstate__())
        state.pop("_fitted_predictor", None)  # (rebuilt on the first prediction)
        if "param_state_" in state:  # device-independent pickles
            state["param_state_"] = state_on(state["param_state_"], "cpu")
        return state

    # ------------------------------------------------------------------ fit
    def fit(self, X, y, sample_weight=None):
        """Fit the classifier by SVI (from scratch, or from the current fit with ``warm_start``).

        :param X: array-like or ``scipy.sparse`` matrix, shape (n_samples, n_features).
        :param y: array-like of hashable labels, shape (n_samples,); or label sets (multi-label,
            see the module's text): an (n_samples, K) 0/1 indicator, dense or ``scipy.sparse``,
            or a list of label lists / sets (with the exact softmax, each (row, label) pair is
            fitted on its choice set, :class:`~pyro_ar.label_sets.ChoiceSets`).
        :param sample_weight: non-negative weights, shape (n_samples,): weight 2 counts as two copies.
        :returns: self.
        """
        return self._fit(X, y, sample_weight, partial=False)

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        """Train on one chunk (X, y), continuing from the current fit (data in chunks, or too big).

        Each call makes ``max_epochs`` passes over its chunk (``max_epochs=None``: ``min_steps``
        steps; ``n_steps_``) from the current weights: ``fit``'s schedule without ``min_steps``
        (which would fit every small chunk to convergence, forgetting the earlier ones), without
        the prior-scale search (the first call takes 1, or the middle of a list, and later calls
        keep it), early stopping or step-size decay (the stream's length is unknown). Three
        chunks of 449 digits reach the test accuracy of scikit-learn's
        ``SGDClassifier(loss="log_loss").partial_fit`` (``tests/estimator``: both at least 90 %).
        The first call needs ``classes`` (every label of the stream) and fixes the scaling.

        :param X: array-like or ``scipy.sparse`` matrix, shape (n_samples, n_features).
        :param y: array-like of labels, shape (n_samples,), each in ``classes``.
        :param classes: every label of the stream (first call only; later calls may repeat it).
        :param sample_weight: non-negative weights, shape (n_samples,), as in :meth:`fit`.
        :returns: self.
        """
        return self._fit(X, y, sample_weight, partial=True, classes=classes)

    def _fit(self, X, y, sample_weight, partial, classes=None):
        """:meth:`_fit_once`; on any exception (a diverged fit, Ctrl-C) the estimator is put back as
        it was (a fresh fit's scaling and path must not stay beside the previous fit's weights)."""
        saved = dict(self.__dict__)
        try:
            return self._fit_once(X, y, sample_weight, partial, classes)
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise

    def _fit_once(self, X, y, sample_weight, partial, classes=None):
        weights, spec, device = self._checked_params()  # (every hyper-parameter checked, once)
        seed = seed_of(self.random_state)
        first = not (partial and hasattr(self, "classes_"))
        seen = {k: self.__dict__[k] for k in ("n_features_in_", "feature_names_in_") if k in self.__dict__}
        X, classes, codes, targets = fit_targets(self, X, y, classes, partial, first, _checked_data)
        K, D, N = len(classes), X.shape[1], len(codes)
        if K < 2:  # (a numpy scalar as written: 0.0, not np.float64(0.0))
            only = classes[0].item() if isinstance(classes[0], np.generic) else classes[0]
            raise ValueError(f"ARClassifier needs samples of at least 2 classes, but the data "
                             f"contains only one class: {only!r}")
        warm = not first or (self.warm_start and hasattr(self, "param_state_")
                             and np.array_equal(self.classes_, classes))
        if warm and D != seen.get("n_features_in_", D):  # (_fit restores the fitted state)
            raise ValueError(f"warm_start=True continues the fit on {seen['n_features_in_']} features, "
                             f"got X with {D} features; set warm_start=False to fit anew")
        rows = None if targets is None else targets.rows
        if not warm:
            self._choose_path(X, codes, K, weights, spec, rows)
        X = apply_scaler(X, self.feature_mean_, self.feature_scale_, getattr(self, "row_normalize_", False))
        if rows is not None:  # one training row per (row, label) pair
            X, sample_weight = X[rows], expand_sample_weight(sample_weight, targets)
        grid = weights.prior_scale
        if self.training_path_.weight_pattern and isinstance(self._prior_scale_given(), str):
            grid = PATTERN_PRIOR_SCALE  # no search: see PATTERN_PRIOR_SCALE
        data = _FitData(X, codes, weighted_samples(codes, sample_weight), K, D, rows)
        self._fit_spec = (weights, spec, device)  # (read by the fit's private steps; dropped after it)
        if self.verbose:
            print(f"ARClassifier: {N:,} rows, {D:,} features, {K:,} classes; {self.training_path_.describe()}; "
                  f"{'exact softmax' if self.likelihood_ == 'exact' else 'A&R'} likelihood; "
                  f"{min(self.batch_size, N):,} rows per SVI step", file=sys.stderr)
        try:
            with seeded(seed + (self.n_partial_fits_ if partial else 0)):
                rng = np.random.RandomState(seed)
                train_idx, val_idx = (np.arange(N), None) if partial else \
                    self._split(data, rng, force=self.training_path_.weight_pattern and not warm)  # pattern_fit
                if self.training_path_.weight_pattern and not warm and val_idx is not None:  # pattern_fit
                    train_idx, val_idx, data, start = choose_start(data, train_idx, val_idx, rng,
                                                                   self.feature_scale_, self.standardize)
                    if start is not None:
                        self.feature_scale_ = np.asarray(self.feature_scale_) ** start.idf_power
                        self.centroid_start_ = start
                if self._predict_seed is None:
                    self._predict_seed = int(rng.randint(_MAX_SEED))
                scale, init, budget, search_steps = self._choose_prior_scale(
                    data, grid, rng, self.param_state_ if warm else None, partial)
                phase = (f"partial_fit {self.n_partial_fits_ + 1}" if partial else
                         "phase 2/2: fit on all the data" if search_steps else "fit")
                if search_steps:
                    phase += f" (prior scale {scale:.3g})"
                planned = self._num_steps(len(train_idx), partial, budget)
                with phase_bar(planned, f"ARClassifier {phase}", self.verbose) as bar:
                    result = self._fit_svi(data, train_idx, val_idx, scale, planned, init=init, partial=partial,
                                           bar=bar)
                    if bar is not None and result.n_steps < planned:
                        bar.set_description(f"{bar.desc}, early-stopped", refresh=False)
        finally:
            del self._fit_spec
        self.classes_, self.param_state_ = classes, result.state
        self.multilabel_ = targets is not None
        self.labels_per_row_ = None if targets is None else targets.labels_per_row
        self._target_form = None if targets is None else targets.form
        self.n_iter_, self.loss_curve_ = result.n_iter, result.loss_curve
        self.validation_scores_, self.best_validation_score_ = result.validation_scores, result.best_score
        self.n_steps_by_phase_ = {"prior_scale_search": search_steps, "final_fit": result.n_steps}
        self.n_steps_ = search_steps + result.n_steps
        self.n_partial_fits_ += int(partial)
        self._predictor(weights, spec.noise, device)  # the fitted model, built once for the predictions to come
        return self

    def _choose_path(self, X, codes, K, weights, spec, rows=None):
        """A fresh fit's training path, standardisation (fitted on the rows of X) and
        likelihood, from the data: one datapoint per label of ``codes`` (the row of each in
        ``rows``; None: the rows of X in order)."""
        D = X.shape[1]
        nnz = None if not sp.issparse(X) else int(X.nnz if rows is None else np.diff(X.indptr)[rows].sum())
        self.training_path_ = choose_path(len(codes), D, K, nnz, spec.strategy, weights.rank, self.batch_size,
                                          spec.num_negatives, np.bincount(codes, minlength=K))
        pattern = self.training_path_.weight_pattern
        self.feature_mean_, self.feature_scale_ = fit_scaler(
            X, self.training_path_.one_scale, idf=pattern) if self.standardize else (None, None)
        self.row_normalize_ = bool(pattern and self.standardize)
        self.weight_pattern_ = self.weight_loc_ = None
        self.centroid_start_ = None
        self.likelihood_ = resolve_likelihood(spec, K, D, self.batch_size)
        self._predict_seed, self.n_partial_fits_ = None, 0

    def _split(self, data, rng, force=False):
        """``(train, validation)`` datapoint indices (:func:`~pyro_ar.labels.held_out_split`;
        validation None without early stopping or ``force``)."""
        on, fraction, _, _ = early_stopping_options(self.early_stopping)
        if not (on or force):
            return np.arange(len(data.codes)), None
        return held_out_split(data.codes, data.groups, fraction, rng)

    def _choose_prior_scale(self, data, grid, rng, init, partial):
        """``(prior scale, init, budget, search steps)`` of the final fit: a ``grid`` of candidates
        is scored on a held-out split (:func:`~pyro_ar.infer.selection.search_holdout`,
        :func:`~pyro_ar.infer.selection.select_prior_scale`; SVI steps run: ``search steps``,
        0 without a search), the final fit starts from the best with ``_REFIT_BUDGET`` of a plain
        fit's steps. Sets ``prior_scale_`` (None for ``"mle"``) and ``prior_scale_scores_``."""
        self.prior_scale_scores_, kind = None, self._fit_spec[0].kind
        grid = grid if isinstance(grid, tuple) else (grid,)
        if kind == "mle" or len(grid) == 1:
            self.prior_scale_ = None if kind == "mle" else grid[0]
            return grid[0], init, 1.0, 0
        if partial:  # no held-out split: the previous fit's choice, else the grid's middle
            if getattr(self, "prior_scale_", None) is None:
                self.prior_scale_ = 1.0 if 1.0 in grid else grid[len(grid) // 2]
            return self.prior_scale_, init, 1.0, 0
        fraction = search_holdout(early_stopping_options(self.early_stopping)[1], data)
        train_idx, val_idx = held_out_split(data.codes, data.groups, fraction, rng)

        def fit(scale, num_steps, state, bar):  # on the training split
            out = self._fit_svi(data, train_idx, val_idx, scale, num_steps, init=state, bar=bar)
            return out.state, out.best_score, out.n_steps
        self.prior_scale_, self.prior_scale_scores_, state, steps = search_prior_scale(
            fit, grid, self._num_steps(len(train_idx)), init, isinstance(self._prior_scale_given(), str), self.verbose)
        return self.prior_scale_, state, _REFIT_BUDGET, steps

    def _prior_scale_given(self):
        """``prior_scale`` as given (``"auto"``, a number or a list): the strategy's own, else the
        :class:`~pyro_ar.estimator.Weights`' (``"auto"`` for a name or a strategy alone)."""
        weights = self.weights if isinstance(self.weights, Weights) else Weights(self.weights)
        own = weight_strategy(weights.kind).prior_scale
        return weights.prior_scale if own is None else own

    def _num_steps(self, n_train, partial=False, budget=1.0):
        """SVI steps of a fit on ``n_train`` datapoints: ``budget`` times a plain fit's (of a
        ``partial_fit`` call on a chunk of ``n_train``: ``max_epochs`` epochs, no ``min_steps``)."""
        steps_per_epoch = math.ceil(n_train / min(self.batch_size, n_train))
        if self.max_epochs is None:
            steps = self.min_steps
        elif getattr(self, "training_path_", None) is not None and self.training_path_.weight_pattern:
            # it starts at the centroid scorer: at most PATTERN_MAX_EPOCHS epochs, no min_steps
            steps = min(self.max_epochs, PATTERN_MAX_EPOCHS) * steps_per_epoch
        else:
            steps = max(self.max_epochs * steps_per_epoch, 0 if partial else self.min_steps)
        return max(1, round(budget * steps))

    def _fit_svi(self, data, train_idx, val_idx, prior_scale, num_steps, *, init=None, partial=False, bar=None):
        """Train with :func:`pyro_ar.infer.train` in a private param store (started from a copy
        of ``init`` when warm) on the rows ``train_idx`` of ``data`` for ``num_steps`` steps at
        ``prior_scale``, scoring the rows ``val_idx`` (None: none) after each epoch and
        updating the progress ``bar`` (None: none; its total shrinks when the fit stops early)."""
        weights, spec, device = self._fit_spec
        n_train, path, batch_size = len(train_idx), self.training_path_, min(self.batch_size, len(train_idx))
        X_train = data.X if val_idx is None else data.X[train_idx]
        y = torch.as_tensor(data.codes[train_idx], dtype=torch.long, device=device)
        xs = (training_features(X_train, torch.float32, device, path.sparse_inputs), y)
        w_train = None if data.weights is None else data.weights[train_idx]
        if w_train is not None:
            xs += (torch.as_tensor(w_train, dtype=torch.float32, device=device),)
        steps_per_epoch = math.ceil(n_train / batch_size)
        split_pattern = path.weight_pattern and self.weight_pattern_ is None and val_idx is not None
        if path.weight_pattern and self.weight_pattern_ is None:  # from the rows it trains on
            self.weight_pattern_, self.weight_loc_ = pattern_and_centroids(
                X_train, data.codes[train_idx], data.K, **self._centroid_shape(), weights=w_train)
        _, _, patience, tol = early_stopping_options(self.early_stopping)
        schedule = pattern_schedule(path.weight_pattern, steps_per_epoch, patience, tol)  # pattern_fit
        init = None if init is None else state_on(init, device, copy=True)
        for t in (init or {"params": {}})["params"].values():
            t.requires_grad_(True)  # as pyro.param leaves the tensors it creates
        with pyro.get_param_store().scope(init):  # a private param store for this fit
            model, guide, svi = training_svi(self, weights, spec, data.K, data.D, y, batch_size, prior_scale,
                                             choice_sets_of(self, data, train_idx, spec.noise, device), w_train)
            early = None if val_idx is None else \
                EarlyStopping("val_log_lik", patience=schedule.patience, min_delta=schedule.min_delta)
            try:
                history = train(svi, *xs, num_steps=num_steps, eval_fn=self._scorer(data, val_idx, model),
                                eval_every=schedule.eval_every, log_every=schedule.eval_every,
                                eval_at_start=schedule.eval_at_start, early_stopping=early,
                                callbacks=[] if partial else [LearningRateDecay()],
                                progress=bar if bar is not None else False,
                                validation="first")  # (check_data ran: later steps need no Pyro checks)
            except TrainingDiverged as e:  # (the estimator keeps its previous fit, if any)
                raise TrainingDiverged(f"ARClassifier(learning_rate={self.learning_rate!r}): {e}") from None
            state = global_state(model, guide)
        if split_pattern:  # pattern_fit: onto the centroids of all the rows
            state, self.weight_pattern_, self.weight_loc_ = recentre_fit(
                state, data, model.prefix + "weight", self.weight_pattern_, self.weight_loc_, self._centroid_shape(),
                self._centroid_bias(), data.codes[train_idx], w_train)
        if bar is not None and history[-1]["step"] < num_steps:  # stopped early: its steps will not come
            set_progress_total(bar, bar.total - (num_steps - history[-1]["step"]))
        loss_curve = [r["loss"] / n_train for r in history if r["step"] > 0]
        scores = [r["val_log_lik"] for r in history if "val_log_lik" in r] if early else None
        return _FitResult(state, math.ceil(history[-1]["step"] / steps_per_epoch), history[-1]["step"], loss_curve,
                          scores, early.best if early else None)

    def _centroid_shape(self):
        """The starting scorer's shape (:func:`~pyro_ar.infer.pattern_fit.centroid_shape`) of the fit."""
        return centroid_shape(getattr(self, "centroid_start_", None))

    def _centroid_bias(self):
        """The start's bias weight beta (None: no start chosen, or a loaded estimator)."""
        start = getattr(self, "centroid_start_", None)
        return None if start is None else start.bias

    def _scorer(self, data, val_idx, model):
        """The validation score of a fit (None without a held-out split): the mean
        log-likelihood of the rows ``val_idx``, weighted like the data, under the live weights."""
        if val_idx is None:
            return None
        weights, spec, device = self._fit_spec
        rows = None
        if data.groups is None:
            X_val = data.X[val_idx]
        else:  # label sets: each held-out row's utilities once, for all its pairs
            _, first, inverse = np.unique(data.groups[val_idx], return_index=True, return_inverse=True)
            X_val, rows = data.X[val_idx[first]], torch.as_tensor(inverse.reshape(-1), device=device)
        y_val = torch.as_tensor(data.codes[val_idx], dtype=torch.long, device=device)
        w_val = None if data.weights is None else torch.as_tensor(data.weights[val_idx], device=device)
        if model.weight_pattern is not None and weights.kind != "bayes" and torch.device(device).type == "cpu":
            return pattern_validation_score(X_val, model, y_val.numpy(), None if rows is None else rows.numpy(), w_val,
                                            spec.noise)  # (the pattern's layout built once: not a sparse W per score)

        choice_sets = choice_sets_of(self, data, val_idx, spec.noise, device)

        def score():
            state = pyro.get_param_store().get_state() if weights.kind == "bayes" else None
            source = utility_source(X_val, fitted_weights(model, weights, self._predict_seed, state))
            if choice_sets is not None:  # the objective's own: each pair's choice-set softmax
                return {"val_log_lik": choice_set_log_likelihood(source, choice_sets, rows, w_val)}
            if w_val is None:
                return {"val_log_lik": log_likelihood(source, y_val, spec.noise, rows=rows)}
            return {"val_log_lik": weighted_mean(log_likelihood(source, y_val, spec.noise, reduce="none", rows=rows),
                                                 w_val)}
        return score

    # ------------------------------------------------------------------ prediction core
    def _predictor(self, weights, noise, device):
        """The fitted model's weights (:class:`~pyro_ar.estimator._model.Predictor`), built at the
        end of a fit (while loading, on the first prediction after unpickling) and kept until
        the next fit or a change of the hyper-parameters they depend on."""
        predictor = self.__dict__.get("_fitted_predictor")
        if predictor is None or not predictor.serves(self, (device, weights.kind, weights.num_posterior_samples)):
            predictor = self._fitted_predictor = Predictor(self, weights, noise, device, self._predict_seed)
        return predictor

    def _fitted_weights(self):
        """The fitted weights (:func:`~pyro_ar.estimator._model.fitted_weights`)."""
        weights, spec, device = self._checked_params()
        return self._predictor(weights, spec.noise, device).weights

    def _prepare(self, X, targets=None):
        """``(weights, noise, device, utility source of the rows of X)`` of a fitted estimator
        (with label sets ``targets``: of the row of each of their pairs)."""
        check_is_fitted(self)
        weights, spec, device = self._checked_params()
        X = _checked_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False)
        if targets is not None:
            if targets.num_rows != X.shape[0]:
                raise ValueError(f"X has {X.shape[0]} rows but y has {targets.num_rows} label sets")
            X = X[targets.rows]
        X = apply_scaler(X, getattr(self, "feature_mean_", None), getattr(self, "feature_scale_", None),
                         getattr(self, "row_normalize_", False))
        return weights, spec.noise, device, self._predictor(weights, spec.noise, device).source(X)

    # ------------------------------------------------------------------ public prediction
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, shape (n_samples, n_classes), columns as ``classes_``."""
        _, noise, _, source = self._prepare(X)
        return predict_log_proba(source, noise).cpu().numpy()

    def decision_function(self, X):
        """Class scores, shape (n_samples, n_classes) (binary: (n_samples,), the second
        class's score minus the first's): the mean utilities :math:`\\psi = W x + b` for point
        weights (the argmax is :meth:`predict`), the predictive log-probabilities for
        ``weights="bayes"``."""
        weights, noise, _, source = self._prepare(X)
        if weights.kind == "bayes":
            scores = predict_log_proba(source, noise)
        else:
            scores = source(torch.arange(source.num_rows))
        scores = scores.cpu().numpy()
        return scores[:, 1] - scores[:, 0] if len(self.classes_) == 2 else scores

    def predict_proba(self, X):
        """Class probabilities p(y = classes_[k] | x), shape (n_samples, n_classes).

        Exact marginals of the random-utility model (softmax for Gumbel noise, quadrature
        otherwise, O(K^2) per row); for ``weights="bayes"`` the average over
        ``num_posterior_samples`` posterior draws of the weights.
        """
        return np.exp(self.predict_log_proba(X))

    def _top_positions(self, X, k, num_rows=None, proba=False):
        """The positions in ``classes_`` of the ``k`` most probable classes of each row, (n, k),
        and with ``proba`` their probabilities."""
        _, noise, _, source = self._prepare(X)
        K = len(self.classes_)
        if num_rows is not None and num_rows != source.num_rows:
            raise ValueError(f"X has {source.num_rows} rows but y has {num_rows} label sets")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= K:
            raise ValueError(f"k must be an integer in [1, {K}] (the number of classes), got k={k!r}")
        top, probs = (t.cpu().numpy() for t in top_k(source, int(k), noise))
        return (top, probs) if proba else top

    def predict_top_k(self, X, k=5, return_proba=False):
        """The ``k`` most probable labels of each row, best first: an array of shape
        (n_samples, k) of labels from ``classes_`` (for an indicator ``y``, its column indices);
        with ``return_proba`` also their probabilities, (n_samples, k) float64, in row chunks."""
        top, probs = self._top_positions(X, k, proba=True)
        return (self.classes_[top], probs) if return_proba else self.classes_[top]

    def predict(self, X):
        """Most probable class for each row (labels from ``classes_``). After a multi-label fit,
        label sets in the form ``y`` had (a dense or sparse indicator, or label lists): the
        ``k`` most probable labels of each row, k the mean number of labels of a training row
        rounded (``labels_per_row_``, at least 1); :meth:`predict_top_k` takes any k."""
        if not getattr(self, "multilabel_", False):
            top = self._top_positions(X, 1)  # (before classes_: an unfitted estimator's error)
            return self.classes_[top[:, 0]]
        k = min(len(self.classes_), max(1, int(round(self.labels_per_row_))))
        return format_label_sets(self._top_positions(X, k), self.classes_, self._target_form)

    def score(self, X, y, sample_weight=None):
        """Mean accuracy of :meth:`predict` on (X, y) (scikit-learn's default score);
        also for hashable labels that cannot be sorted. After a multi-label fit: precision at
        1, the fraction of rows whose most probable label is one of theirs (labels not in
        ``classes_`` count as labels never predicted)."""
        if getattr(self, "multilabel_", False):
            targets = encode_multilabel(y, fitted=self.classes_, partial=True, first=False, drop_unknown=True)
            return precision_at_1(self._top_positions(X, 1, targets.num_rows)[:, 0], targets, sample_weight)
        try:
            return super().score(X, y, sample_weight=sample_weight)
        except TypeError:  # unorderable labels: sklearn's accuracy_score sorts them
            y_pred, y = self.predict(X), label_array(y)
            hits = np.fromiter((a == b for a, b in zip(y_pred, y)), dtype=float, count=len(y_pred))
            return float(np.average(hits, weights=sample_weight))

    def log_likelihood(self, X, y):
        """Mean predictive log-likelihood (1/N) sum_n log p(y_n | x_n) (nats per datapoint);
        after a multi-label fit, the mean over the (row, label) pairs of label sets ``y`` of the
        predicted distribution's :math:`\\frac1P \\sum_n \\sum_{l \\in Y_n} \\log p(l \\mid x_n)` (the
        pick-all-labels log-likelihood, normaliser over all K, whichever objective trained it).

        Labels must be among ``classes_``.
        """
        if getattr(self, "multilabel_", False):
            targets = encode_multilabel(y, fitted=self.classes_, partial=True, first=False)
            _, noise, device, source = self._prepare(X, targets)
            return log_likelihood(source, torch.as_tensor(targets.codes, device=device), noise)
        _, noise, device, source = self._prepare(X)
        y = label_array(y)
        if len(y) != source.num_rows:
            raise ValueError(f"X has {source.num_rows} rows but y has {len(y)} labels")
        codes = label_codes(y, self.classes_, "y contains a label not seen during fit")
        return log_likelihood(source, torch.as_tensor(codes, device=device), noise)

    # ------------------------------------------------------------------ save / load
    def save(self, path, weights_only=True):
        """Save a fitted estimator (hyper-parameters, classes, scaling, the param store state and
        what ``partial_fit`` / ``warm_start`` continue from) atomically, with a checksum that
        :meth:`load` verifies: a ``torch.save`` of plain containers and tensors, loadable with
        ``torch.load(..., weights_only=True)``. Labels or hyper-parameters that are other Python
        objects raise ``ValueError`` (naming them) before anything is written, unless
        ``weights_only=False`` (then load with ``weights_only=False``; trusted files only).
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

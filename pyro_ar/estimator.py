r"""A scikit-learn estimator for the common case: a linear classifier fitted by A&R.

:class:`ARClassifier` wraps the Pyro pieces of this package -- :class:`~pyro_ar.models.LinearClassifier`,
the local guides and :class:`~pyro_ar.infer.ClosedFormELBO` of :mod:`pyro_ar.infer`,
:func:`~pyro_ar.optim.lazy_adam` and stock ``pyro.infer.SVI`` -- behind ``fit`` /
``predict`` / ``predict_proba``, following scikit-learn's conventions (``get_params`` /
``set_params``, ``classes_``, ``n_features_in_``, ``clone``, pipelines, pickling).

The model
---------
For features :math:`x_n \in \mathbb{R}^D` and labels :math:`y_n \in \{0..K-1\}` (the
positions of the labels in ``classes_``), the mean utilities are
:math:`\psi_{nk} = w_k \cdot x_n + b_k` and

.. math::  y_n = \arg\max_k (\psi_{nk} + \varepsilon_{nk}),
           \qquad \varepsilon_{nk} \overset{iid}{\sim} \phi,

with :math:`\phi` Gumbel (softmax), Normal (multinomial probit) or Logistic
(``noise=``). Augment & Reduce keeps only the observed class's noise
:math:`\varepsilon_n`:

.. math::  \log p(y_n, \varepsilon_n \mid \psi_n) = \log\phi(\varepsilon_n)
           + \sum_{k' \ne y_n} \log\Phi(\varepsilon_n + \psi_{n y_n} - \psi_{n k'}),

estimates the sum over classes from ``num_negatives`` classes (``strategy=``), and
maximises the evidence lower bound

.. math::  \log p(y_n \mid \psi_n) \ge \mathbb{E}_{q(\varepsilon_n)}
           [\log p(y_n, \varepsilon_n \mid \psi_n) - \log q(\varepsilon_n)]

summed over minibatches of ``batch_size`` datapoints with ``SVI``. For softmax,
:math:`q(\varepsilon_n) = \mathrm{Gumbel}(\log\eta_n, 1)` and the bound is closed-form,
:math:`1 - \log\eta_n - (1 + \hat S_n)/\eta_n` with
:math:`\hat S_n \approx \sum_{k' \ne y_n} e^{\psi_{nk'} - \psi_{ny_n}}`; :math:`\eta_n`
takes natural-gradient steps (:class:`~pyro_ar.infer.GumbelLocalGuide`). For the other
noises :math:`q(\varepsilon_n)` is the noise family with a per-datapoint location and
scale, reparameterised (:class:`~pyro_ar.infer.NoiseLocalGuide`, step size
``local_learning_rate``).

The weights are point estimates (``weights="mle"``), point estimates with the Gaussian
prior :math:`w_{kd}, b_k \sim N(0, s^2)`, ``s = prior_scale`` (``"map"``), or random
with that prior and a mean-field Gaussian posterior :math:`q(W, b)` (``"bayes"``:
``AutoNormal`` over ``W, b`` combined with the local guide in an ``AutoGuideList``).

Prediction
----------
``predict_proba`` returns the exact marginal

.. math::  p(y = k \mid x) = \int \phi(e) \prod_{k' \ne k} \Phi(e + \psi_k - \psi_{k'})\, de

(the softmax of :math:`\psi` for Gumbel noise; Gauss-Hermite quadrature otherwise, which
costs O(K^2) per row), and for ``weights="bayes"`` the posterior predictive average
:math:`\frac1S \sum_s p(y = k \mid x, W_s, b_s)` over ``num_posterior_samples`` draws
from :math:`q(W, b)` (drawn with a seed fixed at fit time, so repeated calls agree).
``predict`` is the class of largest mean utility for point weights (the most probable
class, for every iid noise) and the argmax of the predictive average for ``"bayes"``.

Costs and inputs
----------------
A step costs O(``batch_size`` x ``num_negatives`` x D) for ``"mle"``/``"map"`` (sparse
gradients, lazy Adam: only the rows used move), whatever K and N; ``"bayes"`` costs
O(K D) per step (the Gaussian posterior over all of W), for moderate K. The local
variational parameters are O(N) training state; they are discarded after ``fit``
(``param_state_`` keeps the global parameters only).

``X`` may be a dense array or a ``scipy.sparse`` matrix/array. Sparse ``X`` with at most
:data:`DENSIFY_MAX_ELEMENTS` entries (``n_samples * n_features``, 2^24 by default, i.e.
64 MB in float32) is converted to one dense tensor for training; a larger one stays
sparse (CSR) and only the rows of each minibatch are densified, so the whole matrix is
never densified at once (keep ``batch_size`` moderate). Prediction always densifies row
chunks. Training runs in float32 on ``device``; predictions are computed in float64.
Features are used as given: standardise them (e.g. ``StandardScaler`` in a
``Pipeline``) for well-conditioned steps.

Example::

    >>> from sklearn.datasets import load_iris
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import StandardScaler
    >>> from pyro_ar import ARClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> clf = make_pipeline(StandardScaler(),
    ...                     ARClassifier(num_negatives=1, max_epochs=200, random_state=0))
    >>> clf.fit(X, y).score(X, y) > 0.9
    True
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)

Implementation notes: each ``fit`` runs inside its own Pyro parameter store
(``pyro.get_param_store().scope()``), so estimators never share or clobber parameters
(and the caller's global store is left as it was); the same holds for prediction with
``weights="bayes"``. The global RNG states of torch, numpy and ``random`` are restored
after ``fit`` (``random_state`` seeds them inside). Not thread-safe: the param store is
process-global.
"""

import math
import numbers
import pickle
import random
from contextlib import contextmanager

import numpy as np
import torch

import pyro
from pyro.distributions import constraints as pyro_constraints
from pyro.infer import SVI

from .evaluation import UtilitySource, log_likelihood, predict_log_proba, top_k
from .infer import ClosedFormELBO, EarlyStopping, default_guide, train
from .models import LinearClassifier
from .noise import Noise, get_noise
from .optim import lazy_adam

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
    _SKLEARN_IMPORT_ERROR = None
except ImportError as e:  # pragma: no cover
    BaseEstimator = ClassifierMixin = object
    _SKLEARN_IMPORT_ERROR = e

__all__ = ["ARClassifier", "DENSIFY_MAX_ELEMENTS"]

#: Sparse training matrices with at most this many entries (rows x features) are
#: densified once; larger ones are densified minibatch by minibatch.
DENSIFY_MAX_ELEMENTS = 1 << 24

_NOISES = ("gumbel", "normal", "logistic")
_STRATEGIES = ("per_datapoint", "shared", "importance")
_WEIGHTS = ("mle", "map", "bayes")
_SITE = "y"  # the label site of LinearClassifier; its noise site is "y_eps"
_FORMAT = "pyro_ar.ARClassifier"
_FORMAT_VERSION = 1
_MAX_SEED = 2**31 - 1


# ----------------------------------------------------------------------------- helpers
def _check_int(name, value, low, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        what = f"an integer >= {low}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def _check_float(name, value, low=None, high=None, low_open=True, high_open=True):
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        lo = "" if low is None else ("(" if low_open else "[") + f"{low}, "
        hi = "" if high is None else f"{high}" + (")" if high_open else "]")
        rng = f"in {lo}{hi}" if low is not None and high is not None else (
            f"{'>' if low_open else '>='} {low}" if low is not None else f"< {high}")
        raise ValueError(f"{name} must be a finite number {rng}, got {value!r}")
    return float(value)


def _check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def _cuda_devices(device):
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


@contextmanager
def _seeded(seed, device):
    """Seed torch / numpy / random (``pyro.set_rng_seed``) and restore their states after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=_cuda_devices(device)):
        pyro.set_rng_seed(seed)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


@contextmanager
def _torch_seeded(seed, device):
    """Seed only torch's RNG (for posterior draws), restoring it after."""
    with torch.random.fork_rng(devices=_cuda_devices(device)):
        torch.manual_seed(seed)
        yield


def _copy_state(state, device=None):
    """Detached copy of a param store state ``{"params": ..., "constraints": ...}``."""
    params = {n: p.detach().clone() if device is None else p.detach().to(device, copy=True)
              for n, p in state["params"].items()}
    return {"params": params, "constraints": dict(state["constraints"])}


def _constraint_name(c):
    """Name of a constraint in ``pyro.distributions.constraints`` (for weights-only files)."""
    for name in dir(pyro_constraints):
        if not name.startswith("_") and getattr(pyro_constraints, name) is c:
            return name
    for name in dir(pyro_constraints):  # e.g. an unpickled copy of a singleton
        obj = getattr(pyro_constraints, name)
        if not name.startswith("_") and type(obj) is type(c):
            try:
                if vars(obj) == vars(c):
                    return name
            except Exception:  # noqa: BLE001  (uncomparable attributes)
                pass
    return c  # stored as an object: loading then needs weights_only=False


def _plain(v):
    """numpy scalars -> Python scalars (for weights-only torch files)."""
    return v.item() if isinstance(v, np.generic) else v


class _SparseRows:
    """A CSR matrix seen by :class:`~pyro_ar.models.LinearClassifier` as an (N, D) tensor.

    ``rows[idx]`` densifies only the rows ``idx`` (the data plate's subsample), so a large
    sparse design matrix is never densified as a whole.
    """

    def __init__(self, X, dtype, device):
        self.X = X.tocsr()
        self.shape = torch.Size(self.X.shape)
        self.dtype, self.device = dtype, device

    def dim(self):
        return 2

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, idx):
        rows = idx.detach().cpu().numpy() if torch.is_tensor(idx) else idx
        return torch.tensor(self.X[rows].toarray(), dtype=self.dtype, device=self.device)


def _training_features(X, dtype, device):
    if sp.issparse(X):
        if X.shape[0] * X.shape[1] > DENSIFY_MAX_ELEMENTS:
            return _SparseRows(X, dtype, device)
        X = X.toarray()
    return torch.tensor(np.asarray(X), dtype=dtype, device=device)


def _dummy_datapoint(D, device):
    """One labelled datapoint, to set up a guide's prototype trace or draw q(W, b)."""
    return torch.zeros(1, D, device=device), torch.zeros(1, dtype=torch.long, device=device)


def _global_state(model, guide):
    """Copy of the param store state of the global parameters (not the per-datapoint local
    ones): W, b for point weights, the AutoNormal part of the guide for ``"bayes"``."""
    store = pyro.get_param_store()
    if model.weights == "bayes":
        names = [store.param_name(t) for t in guide[0].parameters()]
    else:
        names = [model.prefix + n for n in model.parameter_shapes()]
    state = store.get_state()
    return _copy_state({"params": {n: state["params"][n] for n in names if n},
                        "constraints": {n: state["constraints"][n] for n in names if n}})


def _label_array(y):
    """A 1-D array of labels; a list of tuples stays a 1-D object array of tuples."""
    if isinstance(y, np.ndarray):
        return y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    out = np.empty(len(y), dtype=object)
    for i, v in enumerate(y):
        out[i] = v
    return out


def _encode_labels(y):
    """(classes, codes): sorted unique labels when orderable, else by first appearance."""
    try:
        classes, codes = np.unique(y, return_inverse=True)
    except TypeError:  # hashable but unorderable labels (e.g. a mix of types)
        index = {}
        codes = np.empty(len(y), dtype=np.int64)
        for i, v in enumerate(y):
            codes[i] = index.setdefault(v, len(index))
        classes = np.empty(len(index), dtype=object)
        for v, k in index.items():
            classes[k] = v
    return classes, np.asarray(codes, dtype=np.int64).reshape(-1)


# ----------------------------------------------------------------------------- estimator
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
    :param strategy: ``"per_datapoint"`` (the paper's), ``"shared"`` (one set per
        minibatch) or ``"importance"`` (shared draws from the training class
        frequencies^0.75).
    :param weights: ``"mle"``, ``"map"`` (Gaussian prior) or ``"bayes"`` (mean-field
        Gaussian posterior, ``AutoNormal``).
    :param prior_scale: standard deviation s of the prior N(0, s^2) on every weight and
        bias (``"map"`` and ``"bayes"``).
    :param batch_size: datapoints per SVI step (clipped to the training size).
    :param max_epochs: passes over the data (one epoch = ceil(n_train / batch_size)
        steps on random minibatches).
    :param num_steps: if given, the exact number of SVI steps (overrides ``max_epochs``).
    :param learning_rate: Adam step size of the global parameters (lazy Adam: sparse rows).
    :param local_learning_rate: Adam step size of the per-datapoint variational
        parameters (non-Gumbel noises; the Gumbel local step is a natural-gradient step).
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
    :param verbose: show a tqdm progress bar with the running ELBO per datapoint (and the
        validation log-likelihood) during fit.

    Fitted attributes: ``classes_`` (labels, position = class index), ``n_features_in_``
    (and ``feature_names_in_`` for data frames), ``param_state_`` (the Pyro param store
    state of the global parameters: ``{"params": {name: unconstrained tensor},
    "constraints": {name: constraint}}``; ``"weight"``/``"bias"`` for point weights, the
    ``AutoNormal`` locations and scales for ``"bayes"``), ``n_iter_`` (epochs run),
    ``n_steps_`` (SVI steps), ``loss_curve_`` (mean negative ELBO per training datapoint,
    per epoch), ``validation_scores_`` and ``best_validation_score_`` (mean validation
    log-likelihood; None without early stopping).

    Example:

    >>> import numpy as np
    >>> from pyro_ar import ARClassifier
    >>> rng = np.random.RandomState(0)
    >>> X = rng.randn(300, 4)
    >>> y = X[:, :3].argmax(1)
    >>> clf = ARClassifier(num_negatives=2, max_epochs=30, random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> clf.score(X, y) > 0.8
    True
    """

    def __init__(self, noise="gumbel", num_negatives=20, strategy="per_datapoint",
                 weights="mle", prior_scale=1.0, batch_size=256, max_epochs=50,
                 num_steps=None, learning_rate=0.05, local_learning_rate=0.1,
                 num_posterior_samples=32, early_stopping=False, validation_fraction=0.1,
                 n_iter_no_change=5, tol=1e-4, random_state=None, device="cpu",
                 verbose=False):
        if _SKLEARN_IMPORT_ERROR is not None:  # pragma: no cover
            raise ImportError("ARClassifier needs scikit-learn and scipy "
                              "(pip install scikit-learn scipy)") from _SKLEARN_IMPORT_ERROR
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
            state["param_state_"] = _copy_state(state["param_state_"], "cpu")
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
            num_negatives=_check_int("num_negatives", self.num_negatives, 1, allow_none=True),
            strategy=_check_choice("strategy", self.strategy, _STRATEGIES),
            weights=_check_choice("weights", self.weights, _WEIGHTS),
            prior_scale=_check_float("prior_scale", self.prior_scale, low=0.0),
            batch_size=_check_int("batch_size", self.batch_size, 1),
            max_epochs=_check_int("max_epochs", self.max_epochs, 1),
            num_steps=_check_int("num_steps", self.num_steps, 1, allow_none=True),
            learning_rate=_check_float("learning_rate", self.learning_rate, low=0.0),
            local_learning_rate=_check_float("local_learning_rate", self.local_learning_rate, low=0.0),
            num_posterior_samples=_check_int("num_posterior_samples", self.num_posterior_samples, 1),
            validation_fraction=_check_float("validation_fraction", self.validation_fraction, 0.0, 1.0),
            n_iter_no_change=_check_int("n_iter_no_change", self.n_iter_no_change, 1),
            tol=_check_float("tol", self.tol, low=0.0, low_open=False),
            device=self._torch_device(),
        )
        for name in ("early_stopping", "verbose"):
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
               subsample_size=None, likelihood="ar"):
        return LinearClassifier(
            D, K, noise=p["noise"], likelihood=likelihood, num_negatives=num_negatives,
            strategy=strategy, proposal=proposal, weights=p["weights"],
            prior_scale=p["prior_scale"], subsample_size=subsample_size,
            sparse=p["weights"] != "bayes", site=_SITE)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y):
        """Fit the classifier by SVI.

        :param X: array-like or ``scipy.sparse`` matrix, shape (n_samples, n_features).
        :param y: array-like of hashable labels, shape (n_samples,).
        :returns: self.
        """
        p = self._validated_params(fitting=True)
        X, y = _validate_data(self, X, y, accept_sparse="csr", dtype=(np.float64, np.float32))
        self._check_labels(y)
        classes, codes = _encode_labels(y)
        K, (N, D) = len(classes), X.shape
        if K < 2:
            raise ValueError(f"ARClassifier needs samples of at least 2 classes, but the data "
                             f"contains only one class: {classes[0]!r}")
        device = p["device"]
        with _seeded(p["seed"], device):
            rng = np.random.RandomState(p["seed"])
            train_idx, val_idx = self._split(codes, p, rng)
            predict_seed = int(rng.randint(_MAX_SEED))
            result = self._fit_svi(X, codes, train_idx, val_idx, K, D, p, predict_seed)
        self.classes_ = classes
        (self.param_state_, self.n_iter_, self.n_steps_, self.loss_curve_,
         self.validation_scores_, self.best_validation_score_) = result
        self._predict_seed = predict_seed
        return self

    def _split(self, codes, p, rng):
        N = len(codes)
        if not self.early_stopping:
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

    def _fit_svi(self, X, codes, train_idx, val_idx, K, D, p, predict_seed):
        """Train with :func:`pyro_ar.infer.train` in a private param store; returns the fit's
        attributes (global parameter state, epochs, steps, loss curve, validation scores)."""
        device = p["device"]
        n_train = len(train_idx)
        x = _training_features(X if val_idx is None else X[train_idx], torch.float32, device)
        y = torch.as_tensor(codes[train_idx], dtype=torch.long, device=device)
        proposal = None
        if p["strategy"] == "importance":  # training class frequencies ^ 0.75 (the authors')
            proposal = torch.bincount(y, minlength=K).double().clamp(min=1.0) ** 0.75
        batch_size = min(p["batch_size"], n_train)
        steps_per_epoch = math.ceil(n_train / batch_size)
        with pyro.get_param_store().scope():  # a fresh, private param store for this fit
            model = self._model(p, K, D, num_negatives=None if p["num_negatives"] is None else
                                min(p["num_negatives"], K - 1), strategy=p["strategy"],
                                proposal=proposal, subsample_size=batch_size)
            guide = default_guide(model)
            lr, local_lr = p["learning_rate"], p["local_learning_rate"]
            optim = lazy_adam(lambda name: {"lr": local_lr if name.rsplit(".", 1)[-1].startswith(
                f"{_SITE}_eps_") else lr})
            svi = SVI(model, guide, optim, ClosedFormELBO())
            eval_fn = early = None
            if val_idx is not None:
                X_val = X[val_idx]
                y_val = torch.as_tensor(codes[val_idx], dtype=torch.long, device=device)

                def eval_fn():
                    source = self._source(X_val, p, K, self._live_weights(p, model, guide, predict_seed))
                    return {"val_log_lik": log_likelihood(source, y_val, p["noise"])}
                early = EarlyStopping("val_log_lik", patience=p["n_iter_no_change"], min_delta=p["tol"])
            history = train(svi, x, y, num_steps=p["num_steps"] or p["max_epochs"] * steps_per_epoch,
                            eval_fn=eval_fn, eval_every=steps_per_epoch, log_every=steps_per_epoch,
                            eval_at_start=False, early_stopping=early,
                            progress={"desc": "ARClassifier", "disable": not self.verbose})
            state = _global_state(model, guide)
        loss_curve = [r["loss"] / n_train for r in history if r["step"] > 0]
        scores = [r["val_log_lik"] for r in history if "val_log_lik" in r] if early else None
        return (state, len(loss_curve), history[-1]["step"], loss_curve, scores,
                early.best if early else None)

    # ------------------------------------------------------------------ prediction core
    def _live_weights(self, p, model, guide, seed):
        """(W (S, K, D), b (S, K)) in float64 from the live param store: the point weights
        (S = 1) or ``num_posterior_samples`` draws of q(W, b) under ``seed``."""
        if p["weights"] != "bayes":
            fitted = model.fitted_parameters()
            return fitted["weight"].double()[None], fitted["bias"].double()[None]
        draws, dummy = [], _dummy_datapoint(model.num_features, p["device"])
        with torch.no_grad(), _torch_seeded(seed, p["device"]):
            for _ in range(p["num_posterior_samples"]):
                s = guide[0](*dummy)  # the AutoNormal part: q(W, b)
                draws.append((s["weight"].double(), s["bias"].double()))
        return torch.stack([w for w, _ in draws]), torch.stack([b for _, b in draws])

    def _weights(self, p, K, D):
        """The fitted weights as :meth:`_live_weights` gives them, from ``param_state_``."""
        with pyro.get_param_store().scope(_copy_state(self.param_state_, p["device"])):
            model = self._model(p, K, D, likelihood="exact")
            guide = default_guide(model)
            if p["weights"] == "bayes":
                with torch.no_grad():  # set up the prototype trace on one dummy datapoint
                    guide(*_dummy_datapoint(D, p["device"]))
            return self._live_weights(p, model, guide, self._predict_seed)

    @staticmethod
    def _source(X, p, K, weights):
        r"""The :class:`~pyro_ar.evaluation.UtilitySource` of the rows of ``X`` (dense or
        sparse, densified chunk by chunk): :math:`\psi^{(s)} = X W_s^\top + b_s` in float64."""
        W, b = (t.to(p["device"]) for t in weights)

        def utilities(ids):
            rows = X[ids.cpu().numpy()]
            rows = rows.toarray() if sp.issparse(rows) else np.asarray(rows)
            xb = torch.as_tensor(rows, dtype=torch.float64, device=p["device"])
            psi = torch.einsum("nd,skd->snk", xb, W) + b.unsqueeze(1)
            return psi[0] if psi.shape[0] == 1 else psi
        return UtilitySource(utilities, num_rows=X.shape[0], num_classes=K)

    def _prepare(self, X):
        check_is_fitted(self)
        p = self._validated_params()
        X = _validate_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False)
        return X, p, len(self.classes_)

    def _fitted_source(self, X, p, K):
        return self._source(X, p, K, self._weights(p, K, X.shape[1]))

    # ------------------------------------------------------------------ public prediction
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, shape (n_samples, n_classes), columns as ``classes_``."""
        X, p, K = self._prepare(X)
        return predict_log_proba(self._fitted_source(X, p, K), p["noise"]).cpu().numpy()

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
            y_pred, y = self.predict(X), _label_array(y)
            hits = np.fromiter((a == b for a, b in zip(y_pred, y)), dtype=float, count=len(y_pred))
            return float(np.average(hits, weights=sample_weight))

    def log_likelihood(self, X, y):
        """Mean predictive log-likelihood (1/N) sum_n log p(y_n | x_n) (nats per datapoint).

        Labels must be among ``classes_``.
        """
        X, p, K = self._prepare(X)
        y = _label_array(y)
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
    def save(self, path):
        """Save a fitted estimator: hyper-parameters, classes and the param store state.

        The file is a ``torch.save`` of plain Python containers and tensors, loadable with
        ``torch.load(..., weights_only=True)`` when the labels and hyper-parameters are
        plain Python values (numbers, strings); otherwise use
        ``ARClassifier.load(path, weights_only=False)`` (for trusted files only).
        """
        check_is_fitted(self)
        state = _copy_state(self.param_state_, "cpu")
        state["constraints"] = {n: _constraint_name(c) for n, c in state["constraints"].items()}
        torch.save({
            "format": _FORMAT, "version": _FORMAT_VERSION,
            "hyperparameters": {k: _plain(v) for k, v in self.get_params(deep=False).items()},
            "classes": [_plain(c) for c in self.classes_.tolist()],
            "classes_dtype": self.classes_.dtype.str,
            "n_features_in": int(self.n_features_in_),
            "feature_names_in": (None if not hasattr(self, "feature_names_in_")
                                 else [str(f) for f in self.feature_names_in_]),
            "param_state": state,
            "fit": {"n_iter_": self.n_iter_, "n_steps_": self.n_steps_,
                    "loss_curve_": [float(v) for v in self.loss_curve_],
                    "validation_scores_": (None if self.validation_scores_ is None
                                           else [float(v) for v in self.validation_scores_]),
                    "best_validation_score_": self.best_validation_score_,
                    "predict_seed": self._predict_seed},
        }, path)

    @classmethod
    def load(cls, path, map_location="cpu", weights_only=True):
        """Load an estimator written by :meth:`save` (ready to predict)."""
        try:
            d = torch.load(path, map_location=map_location, weights_only=weights_only)
        except pickle.UnpicklingError as e:
            raise ValueError(
                f"could not load {path!r} with weights_only=True (it holds Python objects "
                "other than plain numbers/strings, e.g. custom labels or a Noise); if you trust "
                "the file, use ARClassifier.load(path, weights_only=False)") from e
        if not isinstance(d, dict) or d.get("format") != _FORMAT:
            raise ValueError(f"{path!r} is not a file written by ARClassifier.save")
        est = cls(**d["hyperparameters"])
        classes = np.empty(len(d["classes"]), dtype=np.dtype(d["classes_dtype"]))
        for i, c in enumerate(d["classes"]):
            classes[i] = c
        est.classes_ = classes
        est.n_features_in_ = d["n_features_in"]
        if d["feature_names_in"] is not None:
            est.feature_names_in_ = np.asarray(d["feature_names_in"], dtype=object)
        state = d["param_state"]
        state["constraints"] = {n: getattr(pyro_constraints, c) if isinstance(c, str) else c
                                for n, c in state["constraints"].items()}
        est.param_state_ = state
        fit = d["fit"]
        est.n_iter_, est.n_steps_ = fit["n_iter_"], fit["n_steps_"]
        est.loss_curve_, est.validation_scores_ = fit["loss_curve_"], fit["validation_scores_"]
        est.best_validation_score_ = fit["best_validation_score_"]
        est._predict_seed = fit["predict_seed"]
        return est

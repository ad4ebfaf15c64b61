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
from pyro.infer.autoguide import AutoGuideList, AutoNormal

from .distributions import UtilityCategorical
from .infer import ClosedFormELBO, GumbelLocalGuide, NoiseLocalGuide, hide_noise_sites
from .models import LinearClassifier
from .noise import GumbelNoise, Noise, get_noise
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
_CHUNK_ELEMENTS = 1 << 22  # utilities held at once during prediction


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


def _row_chunks(X, chunk, dtype, device):
    """Yield ``(start, stop, dense tensor)`` over row chunks of a dense or sparse X."""
    n = X.shape[0]
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        block = X[start:stop]
        block = block.toarray() if sp.issparse(block) else np.asarray(block)
        yield start, stop, torch.tensor(block, dtype=dtype, device=device)


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
    def _model(self, p, K, D, *, num_negatives, strategy, proposal, subsample_size):
        return LinearClassifier(
            D, K, noise=p["noise"], likelihood="ar", num_negatives=num_negatives,
            strategy=strategy, proposal=proposal, weights=p["weights"],
            prior_scale=p["prior_scale"], subsample_size=subsample_size,
            sparse=p["weights"] != "bayes", site=_SITE)

    @staticmethod
    def _bayes_guide(model, local=None):
        """``AutoGuideList`` [AutoNormal over W, b; the local guide] (same names at fit and
        at prediction, where the local part is left out)."""
        guide = AutoGuideList(model)
        guide.append(AutoNormal(hide_noise_sites(model)))
        if local is not None:
            guide.append(local)
        return guide

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
        device, dtype = p["device"], torch.float32
        n_train = len(train_idx)
        X_train = X if val_idx is None else X[train_idx]
        x = _training_features(X_train, dtype, device)
        y = torch.as_tensor(codes[train_idx], dtype=torch.long, device=device)
        if val_idx is not None:
            X_val, y_val = X[val_idx], torch.as_tensor(codes[val_idx], dtype=torch.long, device=device)

        num_negatives = None if p["num_negatives"] is None else min(p["num_negatives"], K - 1)
        proposal = None
        if p["strategy"] == "importance":  # training class frequencies ^ 0.75 (the authors')
            proposal = torch.bincount(y, minlength=K).double().clamp(min=1.0) ** 0.75
        batch_size = min(p["batch_size"], n_train)
        steps_per_epoch = math.ceil(n_train / batch_size)
        total_steps = p["num_steps"] or p["max_epochs"] * steps_per_epoch

        store = pyro.get_param_store()
        with store.scope():  # a fresh, private param store for this fit
            model = self._model(p, K, D, num_negatives=num_negatives, strategy=p["strategy"],
                                proposal=proposal, subsample_size=batch_size)
            if isinstance(p["noise"], GumbelNoise):
                local = GumbelLocalGuide(model)  # natural-gradient eta step (ClosedFormELBO)
            else:
                local = NoiseLocalGuide(model)
            if p["weights"] == "bayes":
                guide = self._bayes_guide(model, local)
                global_guide = guide[0]
            else:
                guide, global_guide = local, None
            lr, local_lr = p["learning_rate"], p["local_learning_rate"]

            def optim_args(name):
                is_local = name.rsplit(".", 1)[-1].startswith(f"{_SITE}_eps_")
                return {"lr": local_lr if is_local else lr}

            svi = SVI(model, guide, lazy_adam(optim_args), ClosedFormELBO())

            def global_state():
                if global_guide is None:
                    names = [model.prefix + "weight", model.prefix + "bias"]
                else:
                    names = [store.param_name(t) for t in global_guide.parameters()]
                state = store.get_state()
                return _copy_state({"params": {n: state["params"][n] for n in names if n},
                                    "constraints": {n: state["constraints"][n] for n in names if n}})

            def validation_score():
                point, draw = None, None
                if global_guide is None:  # the live point weights
                    point = tuple(pyro.param(model.prefix + n).detach().double()
                                  for n in ("weight", "bias"))
                else:
                    def draw():
                        s = global_guide()
                        return s["weight"], s["bias"]
                return self._mean_log_lik(X_val, y_val, p, K, point, draw, predict_seed)

            from tqdm.auto import tqdm
            bar = tqdm(total=total_steps, disable=not self.verbose, desc="ARClassifier",
                       unit="step", leave=True)
            loss_curve, val_scores = [], []
            epoch_loss, epoch_steps = 0.0, 0
            best, best_state, no_change, step = -math.inf, None, 0, 0
            try:
                while step < total_steps:
                    step += 1
                    loss = svi.step(x, y)
                    if not math.isfinite(loss):
                        raise RuntimeError(
                            f"ARClassifier: the ELBO became {loss} at step {step}; try a smaller "
                            "learning_rate or standardise the features")
                    epoch_loss, epoch_steps = epoch_loss + loss / n_train, epoch_steps + 1
                    if self.verbose:  # running ELBO per datapoint over the current epoch
                        postfix = {"epoch": len(loss_curve) + 1,
                                   "elbo": f"{-epoch_loss / epoch_steps:.4f}"}
                        if val_scores:
                            postfix["val_ll"] = f"{val_scores[-1]:.4f}"
                        bar.set_postfix(postfix, refresh=False)
                        bar.update(1)
                    if step % steps_per_epoch and step < total_steps:
                        continue
                    # end of an epoch
                    loss_curve.append(epoch_loss / epoch_steps)
                    epoch_loss, epoch_steps = 0.0, 0
                    if val_idx is None:
                        continue
                    score = validation_score()
                    val_scores.append(score)
                    if score > best:
                        best_state = global_state()
                    no_change = no_change + 1 if score < best + p["tol"] else 0
                    best = max(best, score)
                    if no_change >= p["n_iter_no_change"]:
                        break
            finally:
                bar.close()
            state = best_state if best_state is not None else global_state()
        return (state, len(loss_curve), step, loss_curve, val_scores if val_idx is not None else None,
                best if val_idx is not None else None)

    # ------------------------------------------------------------------ prediction core
    def _chunk_rows(self, K, all_classes, noise):
        if all_classes and not isinstance(noise, GumbelNoise):
            return max(1, _CHUNK_ELEMENTS // (K * K))  # quadrature over all K classes: O(K^2)
        return max(1, min(4096, _CHUNK_ELEMENTS // K))

    def _point(self, p):
        """The fitted point weights (W, b) in float64 on the device (None for "bayes")."""
        params = self.param_state_["params"]
        if "weight" not in params:
            return None
        return tuple(params[n].detach().to(p["device"], torch.float64) for n in ("weight", "bias"))

    @staticmethod
    def _draws(p, point, draw, seed, fn):
        """Call ``fn(W, b)`` (float64) once for point weights, or for each of
        ``num_posterior_samples`` draws of ``draw()`` under the fixed ``seed``.
        Returns the number of calls S."""
        if draw is None:
            fn(*point)
            return 1
        S = p["num_posterior_samples"]
        with torch.no_grad(), _torch_seeded(seed, p["device"]):
            for _ in range(S):
                W, b = draw()
                fn(W.detach().to(torch.float64), b.detach().to(torch.float64))
        return S

    def _mean_log_lik(self, X, y, p, K, point, draw, seed):
        """Mean over rows of log (1/S) sum_s p(y_n | x_n, W_s) (S = 1 for point weights)."""
        noise, device = p["noise"], p["device"]
        acc = torch.full((X.shape[0],), -math.inf, dtype=torch.float64, device=device)
        chunk = self._chunk_rows(K, False, noise)

        @torch.no_grad()
        def add(W, b):
            for start, stop, xb in _row_chunks(X, chunk, torch.float64, device):
                lp = UtilityCategorical(xb @ W.T + b, noise).log_prob(y[start:stop])
                acc[start:stop] = torch.logaddexp(acc[start:stop], lp)

        S = self._draws(p, point, draw, seed, add)
        return (acc - math.log(S)).mean().item()

    @contextmanager
    def _posterior(self, p, K, D):
        """``draw()`` giving (W, b) from the fitted q(W, b) (None for point weights)."""
        if "weight" in self.param_state_["params"]:
            yield None
            return
        device = p["device"]
        state = _copy_state(self.param_state_, device)
        with pyro.get_param_store().scope(state):
            model = self._model(p, K, D, num_negatives=None, strategy="per_datapoint",
                                proposal=None, subsample_size=None)
            guide = self._bayes_guide(model)
            with torch.no_grad():  # set up the prototype trace on one dummy datapoint
                guide(torch.zeros(1, D, device=device), torch.zeros(1, dtype=torch.long, device=device))

            def draw():
                s = guide()
                return s["weight"], s["bias"]
            yield draw

    def _prepare(self, X):
        check_is_fitted(self)
        p = self._validated_params()
        X = _validate_data(self, X, accept_sparse="csr", dtype=(np.float64, np.float32), reset=False)
        return X, p, len(self.classes_)

    def _log_proba(self, X, p, K):
        noise, device = p["noise"], p["device"]
        acc = torch.full((X.shape[0], K), -math.inf, dtype=torch.float64, device=device)
        chunk = self._chunk_rows(K, True, noise)

        @torch.no_grad()
        def add(W, b):
            for start, stop, xb in _row_chunks(X, chunk, torch.float64, device):
                logits = UtilityCategorical(xb @ W.T + b, noise).logits
                acc[start:stop] = torch.logaddexp(acc[start:stop], logits)

        with self._posterior(p, K, X.shape[1]) as draw:
            self._draws(p, self._point(p), draw, self._predict_seed, add)
        return acc - torch.logsumexp(acc, dim=-1, keepdim=True)  # normalised (also 1/S)

    # ------------------------------------------------------------------ public prediction
    def predict_log_proba(self, X):
        """Log of :meth:`predict_proba`, shape (n_samples, n_classes), columns as ``classes_``."""
        X, p, K = self._prepare(X)
        return self._log_proba(X, p, K).cpu().numpy()

    def predict_proba(self, X):
        """Class probabilities p(y = classes_[k] | x), shape (n_samples, n_classes).

        Exact marginals of the random-utility model (softmax for Gumbel noise, quadrature
        otherwise, O(K^2) per row); for ``weights="bayes"`` the average over
        ``num_posterior_samples`` posterior draws of the weights.
        """
        X, p, K = self._prepare(X)
        return self._log_proba(X, p, K).exp().cpu().numpy()

    def predict(self, X):
        """Most probable class for each row (labels from ``classes_``)."""
        X, p, K = self._prepare(X)
        if "weight" not in self.param_state_["params"]:  # bayes: argmax of the predictive
            return self.classes_[self._log_proba(X, p, K).argmax(-1).cpu().numpy()]
        device = p["device"]
        W, b = self._point(p)
        out = np.empty(X.shape[0], dtype=np.int64)
        for start, stop, xb in _row_chunks(X, self._chunk_rows(K, False, p["noise"]),
                                           torch.float64, device):
            out[start:stop] = (xb @ W.T + b).argmax(-1).cpu().numpy()  # largest mean utility
        return self.classes_[out]

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
        with self._posterior(p, K, X.shape[1]) as draw:
            return self._mean_log_lik(X, codes, p, K, self._point(p), draw, self._predict_seed)

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

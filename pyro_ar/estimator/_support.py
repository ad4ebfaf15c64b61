"""The estimator's plumbing: argument checks, seeding, data conversion, labels, state."""

import math
import numbers
import random
from contextlib import contextmanager

import numpy as np
import torch

import pyro
from pyro.distributions import constraints as pyro_constraints

try:  # scikit-learn / scipy are optional dependencies of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

#: Sparse training matrices with at most this many entries (rows x features) are
#: densified once; larger ones are densified minibatch by minibatch.
DENSIFY_MAX_ELEMENTS = 1 << 24

_NOISES = ("gumbel", "normal", "logistic")
_STRATEGIES = ("per_datapoint", "shared", "importance")
_WEIGHTS = ("mle", "map", "bayes")
_LIKELIHOODS = ("auto", "ar", "exact")
_SITE = "y"  # the label site of LinearClassifier; its noise site is "y_eps"
_FORMAT = "pyro_ar.ARClassifier"
_FORMAT_VERSION = 2  # 2: standardisation and likelihood_; 1 is still read
_MAX_SEED = 2**31 - 1


def check_int(name, value, low, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        what = f"an integer >= {low}" + (" or None" if allow_none else "")
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return int(value)


def check_float(name, value, low=None, high=None, low_open=True, high_open=True):
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


def check_choice(name, value, choices):
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def cuda_devices(device):
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


@contextmanager
def seeded(seed, device):
    """Seed torch / numpy / random (``pyro.set_rng_seed``) and restore their states after."""
    py_state, np_state = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=cuda_devices(device)):
        pyro.set_rng_seed(seed)
        try:
            yield
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)


@contextmanager
def torch_seeded(seed, device):
    """Seed only torch's RNG (for posterior draws), restoring it after."""
    with torch.random.fork_rng(devices=cuda_devices(device)):
        torch.manual_seed(seed)
        yield


def copy_state(state, device=None):
    """Detached copy of a param store state ``{"params": ..., "constraints": ...}``."""
    params = {n: p.detach().clone() if device is None else p.detach().to(device, copy=True)
              for n, p in state["params"].items()}
    return {"params": params, "constraints": dict(state["constraints"])}


def constraint_name(c):
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


def plain(v):
    """numpy scalars -> Python scalars (for weights-only torch files)."""
    return v.item() if isinstance(v, np.generic) else v


class SparseRows:
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


def fit_scaler(X):
    """Per-feature ``(mean, scale)`` for standardising ``X``: dense -- mean and standard
    deviation; sparse -- no centring (mean 0, the sparsity is kept) and the root mean square.

    Each scale is floored at the median of the features' (nonzero) scales, so that a nearly
    constant feature (e.g. a border pixel that is almost always 0) is not blown up into huge
    values at the few points where it is not; constant features get that floor too."""
    if sp is not None and sp.issparse(X):
        mean = np.zeros(X.shape[1])
        scale = np.sqrt(np.asarray(X.multiply(X).mean(axis=0)).reshape(-1))
    else:
        mean, scale = X.mean(axis=0), X.std(axis=0)
    positive = scale[scale > 0]
    floor = np.median(positive) if positive.size else 1.0
    return mean, np.maximum(scale, floor)


def apply_scaler(X, mean, scale):
    """``(X - mean) / scale`` (sparse: ``X / scale``); ``X`` itself when ``mean`` is None."""
    if mean is None:
        return X
    if sp is not None and sp.issparse(X):
        return sp.csr_matrix(X.multiply(1.0 / scale).astype(X.dtype))
    return ((X - mean) / scale).astype(X.dtype, copy=False)


def training_features(X, dtype, device):
    if sp.issparse(X):
        if X.shape[0] * X.shape[1] > DENSIFY_MAX_ELEMENTS:
            return SparseRows(X, dtype, device)
        X = X.toarray()
    return torch.tensor(np.asarray(X), dtype=dtype, device=device)


def dummy_datapoint(D, device):
    """One labelled datapoint, to set up a guide's prototype trace or draw q(W, b)."""
    return torch.zeros(1, D, device=device), torch.zeros(1, dtype=torch.long, device=device)


def global_state(model, guide):
    """Copy of the param store state of the global parameters (not the per-datapoint local
    ones): W, b for point weights, the AutoNormal part of the guide for ``"bayes"``."""
    store = pyro.get_param_store()
    if model.weights == "bayes":
        names = [store.param_name(t) for t in guide[0].parameters()]
    else:
        names = [model.prefix + n for n in model.parameter_shapes()]
    state = store.get_state()
    return copy_state({"params": {n: state["params"][n] for n in names if n},
                        "constraints": {n: state["constraints"][n] for n in names if n}})


def label_array(y):
    """A 1-D array of labels; a list of tuples stays a 1-D object array of tuples."""
    if isinstance(y, np.ndarray):
        return y.reshape(-1) if y.ndim == 2 and y.shape[1] == 1 else y
    out = np.empty(len(y), dtype=object)
    for i, v in enumerate(y):
        out[i] = v
    return out


def encode_labels(y):
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

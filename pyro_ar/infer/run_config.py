r"""The configuration of an SVI run as plain data, and what differs between two of them.

:func:`run_config` fingerprints a run (the model's and guide's classes and shape-defining
attributes, the ELBO, the optimizer and its settings, the data's shapes);
:func:`config_differences` names every entry in which two fingerprints differ. A checkpoint
(:mod:`pyro_ar.infer.checkpoint`) records the first so that a run with another
configuration is not resumed from it.
"""

import hashlib
import types
from typing import Any, Dict, List, Sequence

import numpy as np
import torch

from pyro.infer import SVI

__all__ = ["run_config", "config_differences"]

_PLAIN = (type(None), bool, int, float, str)


def _qualname(obj) -> str:
    return f"{getattr(obj, '__module__', None) or ''}.{getattr(obj, '__qualname__', type(obj).__qualname__)}"


def _code_digest(code: types.CodeType) -> str:
    """A digest of a function's code and constants (nested code objects by their digest)."""
    consts = [_code_digest(c) if isinstance(c, types.CodeType) else repr(c) for c in code.co_consts]
    return hashlib.sha256(code.co_code + repr((consts, code.co_names)).encode()).hexdigest()[:16]


def _describe_callable(f) -> Dict:
    """A function by its name and a digest of its code, constants, defaults and plain
    closure values (so ``lambda name: {"lr": 0.1}`` differs from ``... 0.2``); a class by name."""
    if isinstance(f, type):
        return {"class": _qualname(f)}
    out = {"function": _qualname(f)}
    code = getattr(f, "__code__", None)
    if code is not None:
        cells = [c.cell_contents for c in (f.__closure__ or ()) if _is_plain(_cell(c))]
        out["code"] = _code_digest(code)
        out["values"] = _describe(list(f.__defaults__ or ()) + cells, 0)
    return out


def _cell(c):
    try:
        return c.cell_contents
    except ValueError:  # an empty cell
        return object()


def _is_plain(v) -> bool:
    return isinstance(v, _PLAIN) or (isinstance(v, (list, tuple)) and all(_is_plain(x) for x in v))


def _describe(v, depth: int = 1):
    """Configuration data: plain values as they are, containers recursively, tensors and
    arrays by shape and dtype, callables by :func:`_describe_callable`, other objects by
    their class and (``depth`` levels of) plain public attributes."""
    if isinstance(v, _PLAIN):
        return v
    if isinstance(v, (list, tuple)):
        return [_describe(x, depth) for x in v]
    if isinstance(v, dict):
        return {str(k): _describe(x, depth) for k, x in v.items()}
    if isinstance(v, torch.Tensor) or (isinstance(v, np.ndarray)):
        return {"shape": list(v.shape), "dtype": str(v.dtype)}
    if hasattr(v, "shape") and hasattr(v, "dtype"):  # e.g. scipy.sparse matrices
        return {"class": _qualname(type(v)), "shape": list(v.shape), "dtype": str(v.dtype)}
    if isinstance(v, (types.FunctionType, types.MethodType, type)):
        return _describe_callable(v)
    out = {"class": _qualname(type(v))}
    if depth > 0:
        for name, x in sorted(vars(v).items()) if hasattr(v, "__dict__") else ():
            if name.startswith("_") or name == "training":
                continue
            if _is_plain(x):
                out[name] = _describe(x)
            elif depth > 1 and not isinstance(x, torch.Tensor) and type(x).__module__.startswith(
                    ("pyro_ar.", "pyro.", "torch.")) and not isinstance(x, torch.nn.Module):
                out[name] = _describe(x, depth - 1)
    return out


def _describe_optim(optim) -> Dict:
    out = {"class": _qualname(type(optim))}
    for name in ("pt_optim_constructor", "pt_scheduler_constructor"):
        if hasattr(optim, name):
            out[name] = _describe_callable(getattr(optim, name))
    for name in ("pt_optim_args", "pt_clip_args", "kwargs"):
        if hasattr(optim, name):
            value = getattr(optim, name)
            out[name] = _describe_callable(value) if callable(value) else _describe(value)
    return out


def run_config(svi: SVI, *args, modules: Sequence[torch.nn.Module] = (), **kwargs) -> Dict:
    """A fingerprint of a run's configuration, as plain data: the model's class and its
    plain public attributes (its shape-defining arguments: ``num_features``,
    ``num_classes``, ``rank``, ...; two levels into pyro_ar / Pyro objects such as the
    likelihood and its sampler of negatives), the guide's and the ``modules``' likewise, the ELBO's class and number of
    particles, the optimizer's class, constructor and settings (``optim_args``; a
    per-parameter function by a digest of its code and constants) and the shapes and
    dtypes of the data ``*args, **kwargs`` of ``svi.step``. Compute it on fresh objects
    (before the first step): :func:`~pyro_ar.infer.train` does.

    Example:

    >>> import pyro
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import default_elbo, default_guide
    >>> from pyro_ar.infer.run_config import run_config
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(20, 3, 10, seed=0)
    >>> model = LinearClassifier(3, 10)
    >>> svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
    >>> config = run_config(svi, data.x, data.y)
    >>> config["model"]["num_classes"], config["optim"]["pt_optim_args"], config["data"]["args"][0]
    (10, {'lr': 0.05}, {'shape': [20, 3], 'dtype': 'torch.float32'})
    """
    elbo = getattr(getattr(svi, "loss_and_grads", None), "__self__", None)
    return {
        "model": _describe(svi.model, 3), "guide": _describe(svi.guide, 3),
        "modules": [_describe(m, 3) for m in modules],
        "elbo": {"class": _qualname(type(elbo)), "num_particles": getattr(elbo, "num_particles", None)},
        "optim": _describe_optim(svi.optim),
        "data": {"args": [_describe(a, 0) for a in args],
                 "kwargs": {k: _describe(v, 0) for k, v in sorted(kwargs.items())}},
    }


def _flatten(d, prefix="") -> Dict[str, Any]:
    out = {}
    if isinstance(d, dict) and not d:
        out[prefix] = {}
    elif isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(d, list) and d and any(isinstance(v, (dict, list)) for v in d):
        for i, v in enumerate(d):
            out.update(_flatten(v, f"{prefix}[{i}]"))
        out[f"{prefix}.len"] = len(d)
    else:
        out[prefix] = d
    return out


def config_differences(saved: Dict, current: Dict) -> List[str]:
    """``"<what>: checkpoint <a>, this run <b>"`` for every entry of two :func:`run_config`
    results that differs (an empty list when they match). Attributes present on one side
    only are skipped (e.g. one that an object sets lazily to a non-plain value), except
    classes, list lengths and the data: a different class is reported by its ``class``.

    Example:

    >>> from pyro_ar.infer.run_config import config_differences
    >>> config_differences({"optim": {"lr": 0.05}}, {"optim": {"lr": 0.1}})
    ['optim.lr: checkpoint 0.05, this run 0.1']
    """
    a, b = _flatten(saved), _flatten(current)
    always = [k for k in set(a) | set(b) if k.startswith("data.") or k.endswith((".class", ".len", "function"))]

    def reshaped(k, other):  # a value on one side where the other has entries below it, or above
        return any(o.startswith((k + ".", k + "[")) or k.startswith((o + ".", o + "[")) for o in other)
    always += [k for k in set(a) - set(b) if reshaped(k, b)] + [k for k in set(b) - set(a) if reshaped(k, a)]
    keys = sorted((set(a) & set(b)) | set(always))
    return [f"{k}: checkpoint {a.get(k, 'absent')!r}, this run {b.get(k, 'absent')!r}"
            for k in keys if repr(a.get(k, "absent")) != repr(b.get(k, "absent"))]

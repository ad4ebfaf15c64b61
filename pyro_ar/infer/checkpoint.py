r"""Checkpoints of an SVI run: save and restore everything it needs to continue bit for bit.

A checkpoint is one file (``torch.save`` of plain data, loadable with
``torch.load(path, weights_only=True)``: tensors, numbers, strings, None, lists, tuples,
dicts -- no pickled objects) holding

* Pyro's param store: the unconstrained tensors (per-datapoint local parameters included)
  and their constraints, encoded by name (``constraints.positive``) or by class and
  numeric attributes (``constraints.interval(0, 1)``);
* the buffers (``register_buffer``, not parameters) of ``svi.guide`` and ``svi.model`` when
  they are ``nn.Module``\ s and of the extra ``modules``, e.g. the visit counts of
  :class:`~pyro_ar.infer.GumbelLocalGuide`;
* the optimizer state ``svi.optim.get_state()`` (a :class:`~pyro.optim.PyroLRScheduler`'s
  includes the schedulers'), with the per-parameter states not yet consumed;
* the RNG states of torch (CPU and, if available, CUDA), numpy and ``random``;
* the step, the history and a free ``extra`` dict;
* optionally the run's configuration (:func:`run_config`: the model's class and
  shape-defining arguments, the guide, the ELBO, the optimizer and its settings, the
  data's shapes), which :func:`load_checkpoint` compares with the resuming run's, naming
  what differs;
* a SHA-256 checksum of all of it (:mod:`pyro_ar.files`), verified on load.

Restoring (:func:`load_checkpoint`) sets the param store, then sets up the guide's lazily
built parts (AutoGuides build their prototype on their first call) by running the guide
once, blocked, on the training arguments, then copies the buffers, hands the optimizer
its state (PyroOptim creates per-parameter optimizers lazily and loads the state then),
and restores the RNG states last, so that nothing done while restoring shifts the random
streams. Hand-made but well-formed files are checked first (the step a non-negative int,
every optimizer state loadable into an optimizer of its parameter, with as many rows).
Writing is atomic: a temporary file in the same folder, then ``os.replace``.

Ranks that checkpoint together (:func:`agree_on_checkpoint`) keep their previous checkpoint
as well and resume from the newest step that every rank has.
"""

import contextlib
import hashlib
import importlib
import math
import os
import random
import types
from typing import Any, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np
import torch
from torch.distributions.constraints import Constraint

import pyro
import pyro.distributions.constraints as pyro_constraints
import pyro.poutine as poutine
from pyro.infer import SVI
from pyro.infer.autoguide import AutoGuide
from pyro.optim import PyroOptim
from pyro.optim.optim import _load_state_dict

from ..files import atomic_save, load_payload

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint", "run_config", "config_differences",
           "agree_on_checkpoint", "previous_path", "rotate_checkpoint"]

_FORMAT, _VERSION = "pyro_ar.checkpoint", 2  # 2: checksum and configuration; 1 is still read
_TRUSTED_MODULES = ("torch.distributions.", "pyro.distributions.", "pyro_ar.")


class CheckpointError(RuntimeError):
    """A checkpoint file is missing, corrupt or does not fit the run (the message names the path).

    Example:

    >>> from pyro_ar.infer.checkpoint import CheckpointError, load_checkpoint
    >>> try:
    ...     load_checkpoint("/nonexistent/run.pt", None)
    ... except CheckpointError as e:
    ...     print(e)
    no pyro_ar checkpoint file at '/nonexistent/run.pt'
    """


# ------------------------------------------------------------------ plain data
def _plain(obj, where: str):
    """``obj`` as weights_only-loadable data (numpy -> torch / Python numbers), or an error."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, torch.Tensor):
        return obj.detach()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(obj.copy())
    if isinstance(obj, dict):
        for k in obj:
            if not isinstance(k, (str, int)):
                raise TypeError(f"cannot save {where}: key {k!r} is not a string or an int")
        return {k: _plain(v, f"{where}[{k!r}]") for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v, f"{where}[{i}]") for i, v in enumerate(obj))
    raise TypeError(f"cannot save {where}: a {type(obj).__name__} is not a tensor, number, string, "
                    "None, list, tuple or dict")


def _singletons() -> Dict[int, str]:
    out = {}
    for module in (torch.distributions.constraints, pyro_constraints):
        for name in dir(module):
            value = getattr(module, name)
            if isinstance(value, Constraint):
                out.setdefault(id(value), name)
    return out


def _encode_constraint(c, singletons, where):
    if id(c) in singletons:
        return {"__constraint__": singletons[id(c)]}
    cls = type(c)
    if not cls.__module__.startswith(_TRUSTED_MODULES):
        raise TypeError(f"cannot save the constraint of {where}: {cls.__module__}.{cls.__qualname__} "
                        f"is not from {_TRUSTED_MODULES}")
    attrs = {k: _encode_constraint(v, singletons, where) if isinstance(v, Constraint)
             else _plain(v, f"the constraint of {where}") for k, v in vars(c).items()}
    return {"__constraint__": f"{cls.__module__}:{cls.__qualname__}", "attrs": attrs}


def _decode_constraint(enc):
    spec = enc["__constraint__"]
    if ":" not in spec:
        for module in (pyro_constraints, torch.distributions.constraints):
            value = getattr(module, spec, None)
            if isinstance(value, Constraint):
                return value
        raise ValueError(f"unknown constraint {spec!r}")
    module_name, qualname = spec.split(":")
    if not module_name.startswith(_TRUSTED_MODULES):
        raise ValueError(f"untrusted constraint class {spec!r}")
    cls = getattr(importlib.import_module(module_name), qualname)
    if not (isinstance(cls, type) and issubclass(cls, Constraint)):
        raise ValueError(f"{spec!r} is not a constraint class")
    obj = cls.__new__(cls)
    obj.__dict__.update({k: _decode_constraint(v) if isinstance(v, dict) and "__constraint__" in v
                         else v for k, v in enc["attrs"].items()})
    return obj


# ------------------------------------------------------------------ RNG states
def rng_state() -> Dict:
    """The RNG states of torch (CPU, CUDA if available), numpy and ``random`` as plain data.

    Example:

    >>> from pyro_ar.infer.checkpoint import rng_state, set_rng_state
    >>> import torch
    >>> state = rng_state(); a = torch.rand(2); set_rng_state(state)
    >>> torch.equal(a, torch.rand(2))
    True
    """
    name, keys, pos, has_gauss, cached = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    state = {"torch": torch.get_rng_state(),
             "numpy": {"name": name, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                       "has_gauss": int(has_gauss), "cached_gaussian": float(cached)},
             "random": {"version": version, "state": torch.tensor(internal, dtype=torch.int64),
                        "gauss_next": gauss_next}}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict) -> None:
    """Restore what :func:`rng_state` returned (see its example).

    Example:

    >>> from pyro_ar.infer.checkpoint import rng_state, set_rng_state
    >>> set_rng_state(rng_state())
    """
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    r = state["random"]
    random.setstate((r["version"], tuple(r["state"].tolist()), r["gauss_next"]))


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Run a block (e.g. an evaluation) without changing the RNG states seen after it.

    Example:

    >>> import torch
    >>> from pyro_ar.infer.checkpoint import preserved_rng
    >>> state = torch.get_rng_state()
    >>> with preserved_rng():
    ...     _ = torch.rand(3)
    >>> torch.equal(state, torch.get_rng_state())
    True
    """
    state = rng_state()
    try:
        yield
    finally:
        set_rng_state(state)


# ------------------------------------------------------------------ parts of a run
def _modules(svi, modules):
    named = {}
    for key, m in (("guide", getattr(svi, "guide", None)), ("model", getattr(svi, "model", None))):
        if isinstance(m, torch.nn.Module):
            named[key] = m
    for i, m in enumerate(modules):
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"modules[{i}] must be a torch.nn.Module, got {type(m).__name__}")
        named[f"modules.{i}"] = m
    return named


def _optim_state(optim) -> Optional[Dict]:
    if not hasattr(optim, "get_state"):
        return None
    state = dict(getattr(optim, "_state_waiting_to_be_consumed", {}))  # not stepped since a load
    state.update(optim.get_state())
    return state


def _set_optim_state(optim, state) -> None:
    if state is None:
        return
    if not hasattr(optim, "set_state"):
        raise TypeError(f"svi.optim ({type(optim).__name__}) has no set_state")
    if isinstance(optim, PyroOptim):  # forget optimizers of the parameters before the load
        optim.optim_objs.clear()
        optim.grad_clip.clear()
        optim._state_waiting_to_be_consumed = {}
    optim.set_state(state)


def _check_optim_state(optim, state) -> None:
    """Each per-parameter state of a PyroOptim must name a parameter of the (restored) param
    store and load into an optimizer of that parameter, its row-wise tensors with as many
    rows: otherwise the first step would fail (a KeyError or a shape error) far from the file."""
    if state is None or not isinstance(optim, PyroOptim):
        return
    if not isinstance(state, dict):
        raise ValueError(f"the optimizer state must be a dict of per-parameter states, got a "
                         f"{type(state).__name__}")
    store = pyro.get_param_store()
    for name, part in state.items():
        if name not in store:
            raise ValueError(f"the optimizer state names the parameter {name!r}, which is not in the "
                             f"checkpoint's param store")
        param = store[name].unconstrained()
        try:
            opt = optim._get_optim(param)
            _load_state_dict(opt, part)
        except Exception as e:  # noqa: BLE001  (a hand-made state: report what and where)
            raise ValueError(f"the optimizer state of parameter {name!r} does not load into "
                             f"{type(optim).__name__}'s optimizer: {type(e).__name__}: {e}") from e
        inner = getattr(opt, "optimizer", opt)
        for values in inner.state.values():
            for key, t in values.items():
                if torch.is_tensor(t) and t.dim() >= 1 and param.dim() >= 1 and t.shape[0] != param.shape[0]:
                    raise ValueError(f"the optimizer state {key!r} of parameter {name!r} has shape "
                                     f"{tuple(t.shape)}, the parameter {tuple(param.shape)}")


def _check_optim_values(name, state) -> None:
    """Per-parameter optimizer states hold tensors and finite numbers, and their ``params``
    ids cover the states' keys (else torch drops a state without a word)."""
    if not (isinstance(state, dict) and isinstance(state.get("state"), dict)
            and isinstance(state.get("param_groups"), list)):
        inner = state.get("optimizer") if isinstance(state, dict) else None
        if isinstance(inner, dict) and "scheduler" in state:  # a scheduler's: check its optimizer
            return _check_optim_values(name, inner)
        raise ValueError(f"the optimizer state of parameter {name!r} must be a dict with 'state' and "
                         f"'param_groups'")
    for group in state["param_groups"]:
        problem = _param_group_problem(group)
        if problem:
            raise ValueError(f"the optimizer settings of parameter {name!r}: {problem}")
    ids = [i for g in state["param_groups"] if isinstance(g, dict) for i in g.get("params", [None])]
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids) or not set(state["state"]) <= set(ids):
        raise ValueError(f"the optimizer state of parameter {name!r} has parameter ids {ids!r} that do "
                         f"not cover its states {sorted(map(repr, state['state']))}")
    for values in state["state"].values():
        for key, v in (values.items() if isinstance(values, dict) else [("(entry)", values)]):
            ok = all(x is None or (not x.is_floating_point() or bool(torch.isfinite(x).all()))
                     if isinstance(x, torch.Tensor) else isinstance(x, (int, float)) and not
                     isinstance(x, bool) and math.isfinite(x)
                     for x in (v if isinstance(v, (list, tuple)) else [v]))
            if key == "step" and not isinstance(v, torch.Tensor):
                ok = ok and isinstance(v, int) and v >= 0
            if not ok:
                raise ValueError(f"the optimizer state {key!r} of parameter {name!r} is {v!r}: not a "
                                 f"tensor, a finite number or None")


def _param_group_problem(group) -> Optional[str]:
    """What is wrong with one torch optimizer's param group (the settings torch's
    optimizers share: lr, betas, eps, weight decay, momentum; numbers finite)."""
    if not isinstance(group, dict):
        return f"a param group is a {type(group).__name__}, not a dict"
    for key, v in group.items():
        values = v if isinstance(v, (list, tuple)) and key != "params" else [v]
        for x in values if key != "params" else []:
            if isinstance(x, float) and not math.isfinite(x):
                return f"{key}={v!r} is not finite"
    rules = {"lr": lambda x: x >= 0, "initial_lr": lambda x: x >= 0, "eps": lambda x: x >= 0,
             "weight_decay": lambda x: x >= 0, "momentum": lambda x: 0 <= x <= 1,
             "betas": lambda x: all(isinstance(b, (int, float)) and 0 <= b < 1 for b in x) and len(x) == 2}
    for key, ok in rules.items():
        if key in group:
            v = group[key]
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            try:
                good = ok(v) if key == "betas" else number and ok(v)
            except TypeError:
                good = False
            if not good:
                return f"{key}={v!r} is out of range"
    return None


def check_param_state(state, name: str = "param_state") -> None:
    """A saved param store state (``{"params", "constraints"}``, as the estimator's files and
    the checkpoints hold it): finite floating-point tensors, one constraint per parameter;
    a ``ValueError`` naming ``name`` and the parameter otherwise."""
    if not (isinstance(state, dict) and isinstance(state.get("params"), dict)
            and isinstance(state.get("constraints"), dict)):
        raise ValueError(f"{name} must be a dict with 'params' and 'constraints' dicts")
    for key, t in state["params"].items():
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            raise ValueError(f"parameter {key!r} must be a floating-point tensor, got "
                             f"{t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"parameter {key!r} holds non-finite values")
    if set(state["params"]) != set(state["constraints"]):
        raise ValueError(f"params and constraints name different parameters in {name}: "
                         f"{sorted(set(state['params']) ^ set(state['constraints']))}")


def _check_payload(ck) -> None:
    """The structure of a checkpoint's parts (before anything is restored)."""
    check_param_state(ck["param_store"], "param_store")
    buffers = ck["buffers"]
    if not (isinstance(buffers, dict) and all(isinstance(b, dict) and all(
            isinstance(t, torch.Tensor) for t in b.values()) for b in buffers.values())):
        raise ValueError("buffers must be a dict of dicts of tensors")
    if not (isinstance(ck["history"], list) and all(isinstance(r, dict) for r in ck["history"])):
        raise ValueError("history must be a list of dicts (records)")
    if ck["optim"] is not None:
        if not isinstance(ck["optim"], dict):
            raise ValueError(f"the optimizer state must be a dict, got {type(ck['optim']).__name__}")
        for name, state in ck["optim"].items():
            _check_optim_values(name, state)
    _check_rng_state(ck["rng"])


def _check_rng_state(state) -> None:
    """The RNG states: torch's a uint8 tensor, numpy's Mersenne Twister (624 keys, a
    position in [0, 624]), ``random``'s (625 words)."""
    try:
        n, r = state["numpy"], state["random"]
        ok = (isinstance(state["torch"], torch.Tensor) and state["torch"].dtype == torch.uint8
              and n["name"] == "MT19937" and isinstance(n["keys"], torch.Tensor) and n["keys"].shape == (624,)
              and isinstance(n["pos"], int) and not isinstance(n["pos"], bool) and 0 <= n["pos"] <= 624
              and n["has_gauss"] in (0, 1) and isinstance(n["cached_gaussian"], float)
              and math.isfinite(n["cached_gaussian"])
              and isinstance(r["state"], torch.Tensor) and r["state"].shape == (625,)
              and isinstance(r["version"], int) and (r["gauss_next"] is None or isinstance(r["gauss_next"], float)))
    except Exception:  # noqa: BLE001  (any other structure: not RNG states)
        ok = False
    if not ok:
        raise ValueError("the RNG states (rng) are not those of torch, numpy and random")


def _check_model_shapes(model) -> None:
    """The restored per-class parameters have the shapes the model declares (pyro_ar models)."""
    shapes = getattr(model, "parameter_shapes", None)
    if not callable(shapes):
        return
    try:
        declared = shapes()
    except NotImplementedError:  # a model without per-class parameters of its own
        return
    store, prefix = pyro.get_param_store(), getattr(model, "prefix", "")
    for name, shape in declared.items():
        if prefix + name in store and tuple(store[prefix + name].shape) != tuple(shape):
            raise ValueError(f"parameter {prefix + name!r} has shape {tuple(store[prefix + name].shape)}, "
                             f"the model {tuple(shape)}")


def _set_up_lazy_guide(guide, args, kwargs) -> None:
    """Run the guide once (blocked) if an AutoGuide in it has not built its prototype yet."""
    if not isinstance(guide, torch.nn.Module):
        return
    if any(isinstance(m, AutoGuide) and m.prototype_trace is None for m in guide.modules()):
        with poutine.block():
            guide(*args, **kwargs)


def _set_buffers(named, saved) -> None:
    if set(saved) != set(named):
        raise ValueError(f"the checkpoint has buffers of {sorted(saved)}, the run has modules "
                         f"{sorted(named)} (pass the same modules=)")
    for key, buffers in saved.items():
        current = {n: b for n, b in named[key].named_buffers() if b is not None}
        if set(current) != set(buffers):
            raise ValueError(f"{key} has buffers {sorted(current)}, the checkpoint {sorted(buffers)}")
        for name, value in buffers.items():
            if current[name].shape != value.shape:
                raise ValueError(f"buffer {key}.{name} has shape {tuple(current[name].shape)}, the "
                                 f"checkpoint {tuple(value.shape)}")
            current[name].copy_(value)


# ------------------------------------------------------------------ the run's configuration
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
    >>> from pyro_ar.infer.checkpoint import run_config
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(20, 3, 10, seed=0)
    >>> model = LinearClassifier(3, 10)
    >>> svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo(model))
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

    >>> from pyro_ar.infer.checkpoint import config_differences
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


# ------------------------------------------------------------------ save / load
def save_checkpoint(path: Union[str, os.PathLike], svi: SVI, *, step: int,
                    modules: Sequence[torch.nn.Module] = (), history: Optional[List[Dict]] = None,
                    extra: Optional[Dict] = None, config: Optional[Dict] = None) -> None:
    """Write the state of an SVI run at ``step`` to ``path`` atomically (see the module doc).

    :param svi: the :class:`~pyro.infer.SVI` object (its optimizer, guide, model).
    :param modules: extra ``nn.Module``\\ s whose buffers belong to the run.
    :param history: the run's records (plain data).
    :param extra: any further plain data (dict), returned by :func:`load_checkpoint`.
    :param config: the run's configuration (:func:`run_config`, taken before the first
        step), checked by :func:`load_checkpoint`.

    Example:

    >>> import os, tempfile, torch, pyro
    >>> from pyro.infer import SVI, Trace_ELBO
    >>> from pyro.optim import Adam
    >>> from pyro_ar.infer.checkpoint import save_checkpoint
    >>> def model():
    ...     m = pyro.param("m", torch.zeros(()))
    ...     pyro.sample("x", pyro.distributions.Normal(m, 1.0), obs=torch.ones(()))
    >>> svi = SVI(model, lambda: None, Adam({"lr": 0.1}), Trace_ELBO())
    >>> loss = svi.step()
    >>> path = os.path.join(tempfile.mkdtemp(), "run.pt")
    >>> save_checkpoint(path, svi, step=1, extra={"note": "after one step"})
    >>> ck = torch.load(path, weights_only=True)             # plain data only
    >>> ck["step"], ck["param_store"]["params"]["m"], ck["extra"]
    (1, tensor(0.1000), {'note': 'after one step'})
    """
    store_state = pyro.get_param_store().get_state()
    singletons = _singletons()
    params, constraints = store_state["params"], store_state["constraints"]
    payload = {
        "format": _FORMAT, "version": _VERSION, "step": int(step),
        "param_store": {
            "params": {n: p.detach() for n, p in params.items()},
            "constraints": {n: _encode_constraint(constraints[n], singletons, f"param {n!r}")
                            for n in params}},
        "buffers": {key: {n: b.detach() for n, b in m.named_buffers() if b is not None}
                    for key, m in _modules(svi, modules).items()},
        "optim": _plain(_optim_state(svi.optim), "the optimizer state"),
        "rng": rng_state(),
        "history": _plain(list(history or []), "history"),
        "extra": _plain(extra, "extra"),
        "config": _plain(config, "config"),
    }
    atomic_save(payload, path)


def _read(path) -> Dict:
    ck = load_payload(path, _FORMAT, (1, _VERSION), CheckpointError,
                      map_location="cpu" if not torch.cuda.is_available() else None,
                      what="a pyro_ar checkpoint", checksum_since=2)
    step = ck.get("step")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise CheckpointError(f"the checkpoint {os.fspath(path)!r} has step={step!r}; a step is an int >= 0")
    return ck


def load_checkpoint(path: Union[str, os.PathLike], svi: SVI, *args,
                    modules: Sequence[torch.nn.Module] = (), config: Optional[Dict] = None,
                    **kwargs) -> Dict:
    """Restore a run saved by :func:`save_checkpoint` into ``svi`` (fresh or used objects).

    ``*args, **kwargs`` are the arguments of ``svi.step`` (to set up the guide's lazily
    built parts). With ``config`` (:func:`run_config` of this run) and a checkpoint that
    recorded one, they must match, or :class:`CheckpointError` names every difference
    before anything is changed. The param store is replaced by the file's, and the RNG
    states are restored last. Returns ``{"step", "history", "extra"}``. Raises
    :class:`CheckpointError` (naming the path) for a missing, corrupt, damaged
    (checksum) or incompatible file.

    Example:

    >>> import os, tempfile
    >>> import pyro
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import default_elbo, default_guide
    >>> from pyro_ar.infer.checkpoint import load_checkpoint, save_checkpoint
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(200, 3, 10, seed=0)
    >>> def make_svi():
    ...     model = LinearClassifier(3, 10, num_negatives=3, subsample_size=20, sparse=True)
    ...     return SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo(model))
    >>> svi = make_svi()
    >>> losses = [svi.step(data.x, data.y) for _ in range(3)]
    >>> path = os.path.join(tempfile.mkdtemp(), "run.pt")
    >>> save_checkpoint(path, svi, step=3)
    >>> pyro.clear_param_store()
    >>> svi = make_svi()                                  # new objects, as in a new process
    >>> load_checkpoint(path, svi, data.x, data.y)["step"]
    3
    >>> loss = svi.step(data.x, data.y)                   # continues where the run stopped
    """
    ck = _read(path)
    try:
        _check_payload(ck)
    except (KeyError, TypeError, ValueError) as e:
        raise CheckpointError(f"the checkpoint {os.fspath(path)!r} is not a valid checkpoint: "
                              f"{type(e).__name__}: {e}") from e
    if config is not None and ck.get("config") is not None:
        differences = config_differences(ck["config"], _plain(config, "config"))
        if differences:
            raise CheckpointError(
                f"the checkpoint {os.fspath(path)!r} was written by a run with another configuration, "
                f"so it is not resumed: {'; '.join(differences[:8])}"
                f"{f' (and {len(differences) - 8} more)' if len(differences) > 8 else ''}. Use another "
                f"checkpoint path for the new configuration, or delete the file to start again")
    try:
        store = pyro.get_param_store()
        store.clear()
        params = {n: p.requires_grad_(p.is_floating_point() or p.is_complex())
                  for n, p in ck["param_store"]["params"].items()}
        store.set_state({"params": params, "constraints": {
            n: _decode_constraint(c) for n, c in ck["param_store"]["constraints"].items()}})
        _check_model_shapes(svi.model)
        _set_up_lazy_guide(svi.guide, args, kwargs)
        _set_buffers(_modules(svi, modules), ck["buffers"])
        _check_optim_state(svi.optim, ck["optim"])
        _set_optim_state(svi.optim, ck["optim"])
        set_rng_state(ck["rng"])
    except Exception as e:
        raise CheckpointError(f"cannot restore the checkpoint {os.fspath(path)!r} into this run: "
                              f"{type(e).__name__}: {e}") from e
    return {"step": ck["step"], "history": ck["history"], "extra": ck["extra"]}


# ------------------------------------------------------------------ ranks that checkpoint together
def previous_path(path: Union[str, os.PathLike]) -> str:
    """Where the previous checkpoint of ``path`` is kept when ranks checkpoint together:
    ``run.rank0-of-2.pt`` -> ``run.rank0-of-2.prev.pt``.

    Example:

    >>> from pyro_ar.infer.checkpoint import previous_path
    >>> previous_path("ckpt/run.rank1-of-2.pt")
    'ckpt/run.rank1-of-2.prev.pt'
    """
    root, ext = os.path.splitext(os.fspath(path))
    return f"{root}.prev{ext}"


def _peek_step(path: str) -> int:
    """The step of the checkpoint at ``path`` (-1: none, or unreadable), without reading its
    tensors (memory-mapped)."""
    if not os.path.isfile(path):
        return -1
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        step = ck["step"] if isinstance(ck, dict) and ck.get("format") == _FORMAT else -1
    except Exception:  # noqa: BLE001  (damaged: not a step any rank can resume from)
        return -1
    return step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else -1


def rotate_checkpoint(path: Union[str, os.PathLike]) -> None:
    """Before writing a new checkpoint at ``path``, keep the current one as
    :func:`previous_path` (the ranks' agreement on a common step needs it).

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.infer.checkpoint import rotate_checkpoint
    >>> folder = tempfile.mkdtemp()
    >>> open(os.path.join(folder, "run.pt"), "w").close()
    >>> rotate_checkpoint(os.path.join(folder, "run.pt")); os.listdir(folder)
    ['run.prev.pt']
    """
    path = os.fspath(path)
    if os.path.isfile(path):
        os.replace(path, previous_path(path))


def agree_on_checkpoint(path: Union[str, os.PathLike], group=None) -> Optional[str]:
    """The file from which this rank resumes, agreed by every rank of ``group`` (a
    collective: every rank calls it): the newest step that every rank has, in ``path`` or
    :func:`previous_path` (a rank killed between the others' save and its own keeps one
    checkpoint fewer). None when no rank has a checkpoint (a fresh start everywhere). When
    the chosen step is a rank's previous one, its newer file (from a trajectory the others
    do not have) is dropped. Raises :class:`CheckpointError` on every rank, naming the
    ranks and their steps, when they have none in common.

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.infer.checkpoint import agree_on_checkpoint
    >>> agree_on_checkpoint(os.path.join(tempfile.mkdtemp(), "run.pt")) is None   # one process, no file
    True
    """
    import torch.distributed as dist

    path = os.fspath(path)
    files = [path, previous_path(path)]
    mine = torch.tensor([_peek_step(f) for f in files], dtype=torch.int64)
    if dist.is_available() and dist.is_initialized():
        world, rank = dist.get_world_size(group), dist.get_rank(group)
        device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(group) == "nccl" \
            else torch.device("cpu")
        gathered = [torch.empty_like(mine, device=device) for _ in range(world)]
        dist.all_gather(gathered, mine.to(device), group=group)
        steps = [sorted({int(s) for s in g.cpu() if s >= 0}, reverse=True) for g in gathered]
    else:
        rank, steps = 0, [sorted({int(s) for s in mine if s >= 0}, reverse=True)]
    if not any(steps):
        return None
    common = set(steps[0]).intersection(*steps[1:])
    if not common:
        held = "; ".join(f"rank {r} has {f'steps {s}' if s else 'none'}" for r, s in enumerate(steps))
        raise CheckpointError(
            f"the ranks' checkpoints (this rank's: {path!r} and {files[1]!r}) have no step in common, so "
            f"no rank resumes: {held}. They were stopped at different times (e.g. a rank was killed); "
            f"delete every rank's checkpoint files to start again")
    step = max(common)
    chosen = files[int(mine.tolist().index(step))]
    if chosen != path:  # resume from the previous file: it becomes the current one
        os.replace(chosen, path)
    return path

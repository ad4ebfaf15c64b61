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
* the step, the history and a free ``extra`` dict.

Restoring (:func:`load_checkpoint`) sets the param store, then sets up the guide's lazily
built parts (AutoGuides build their prototype on their first call) by running the guide
once, blocked, on the training arguments, then copies the buffers, hands the optimizer
its state (PyroOptim creates per-parameter optimizers lazily and loads the state then),
and restores the RNG states last, so that nothing done while restoring shifts the random
streams. Writing is atomic: a temporary file in the same folder, then ``os.replace``.
"""

import contextlib
import importlib
import os
import random
from typing import Dict, Iterator, List, Optional, Sequence, Union

import numpy as np
import torch
from torch.distributions.constraints import Constraint

import pyro
import pyro.distributions.constraints as pyro_constraints
import pyro.poutine as poutine
from pyro.infer import SVI
from pyro.infer.autoguide import AutoGuide
from pyro.optim import PyroOptim

from ..files import atomic_save, load_payload

__all__ = ["CheckpointError", "save_checkpoint", "load_checkpoint"]

_FORMAT, _VERSION = "pyro_ar.checkpoint", 1
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


# ------------------------------------------------------------------ save / load
def save_checkpoint(path: Union[str, os.PathLike], svi: SVI, *, step: int,
                    modules: Sequence[torch.nn.Module] = (), history: Optional[List[Dict]] = None,
                    extra: Optional[Dict] = None) -> None:
    """Write the state of an SVI run at ``step`` to ``path`` atomically (see the module doc).

    :param svi: the :class:`~pyro.infer.SVI` object (its optimizer, guide, model).
    :param modules: extra ``nn.Module``\\ s whose buffers belong to the run.
    :param history: the run's records (plain data).
    :param extra: any further plain data (dict), returned by :func:`load_checkpoint`.

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
    }
    atomic_save(payload, path)


def _read(path) -> Dict:
    return load_payload(path, _FORMAT, _VERSION, CheckpointError,
                        map_location="cpu" if not torch.cuda.is_available() else None,
                        what="a pyro_ar checkpoint")


def load_checkpoint(path: Union[str, os.PathLike], svi: SVI, *args,
                    modules: Sequence[torch.nn.Module] = (), **kwargs) -> Dict:
    """Restore a run saved by :func:`save_checkpoint` into ``svi`` (fresh or used objects).

    ``*args, **kwargs`` are the arguments of ``svi.step`` (to set up the guide's lazily
    built parts). The param store is replaced by the file's, and the RNG states are
    restored last. Returns ``{"step", "history", "extra"}``. Raises
    :class:`CheckpointError` (naming the path) for a missing, corrupt or incompatible file.

    Example:

    >>> import os, tempfile
    >>> import pyro
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer.checkpoint import load_checkpoint, save_checkpoint
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(200, 3, 10, seed=0)
    >>> def make_svi():
    ...     model = LinearClassifier(3, 10, num_negatives=3, subsample_size=20, sparse=True)
    ...     return SVI(model, model.default_guide(), lazy_adam({"lr": 0.05}), model.default_elbo())
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
        store = pyro.get_param_store()
        store.clear()
        params = {n: p.requires_grad_(p.is_floating_point() or p.is_complex())
                  for n, p in ck["param_store"]["params"].items()}
        store.set_state({"params": params, "constraints": {
            n: _decode_constraint(c) for n, c in ck["param_store"]["constraints"].items()}})
        _set_up_lazy_guide(svi.guide, args, kwargs)
        _set_buffers(_modules(svi, modules), ck["buffers"])
        _set_optim_state(svi.optim, ck["optim"])
        set_rng_state(ck["rng"])
    except Exception as e:
        raise CheckpointError(f"cannot restore the checkpoint {os.fspath(path)!r} into this run: "
                              f"{type(e).__name__}: {e}") from e
    return {"step": ck["step"], "history": ck["history"], "extra": ck["extra"]}

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

The plain-data, constraint and RNG codecs are :mod:`pyro_ar.files`' (shared with the
estimator's files); the optimizer's part is :mod:`pyro_ar.infer.optim_state`, the
configuration :mod:`pyro_ar.infer.run_config`.

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

import os
from typing import Dict, List, Optional, Sequence, Union

import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI
from pyro.infer.autoguide import AutoGuide

from ..files import (atomic_save, check_rng_state, decode_constraint, encode_constraint, load_payload,
                     preserved_rng, rng_state, set_rng_state, to_plain)
from .optim_state import check_optim_state, check_optim_values, optim_state, set_optim_state
from .run_config import config_differences, run_config

__all__ = ["CheckpointError", "CollectiveError", "save_checkpoint", "load_checkpoint", "run_config", "config_differences",
           "agree_on_checkpoint", "previous_path", "rotate_checkpoint", "check_param_state"]

_FORMAT, _VERSION = "pyro_ar.checkpoint", 2  # 2: checksum and configuration; 1 is still read


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



class CollectiveError(RuntimeError):
    """A collective operation across the ranks (an all-reduce, an all-gather) failed: a rank
    died or did not reach it. Raised by :mod:`pyro_ar.distributed`'s collectives (the message
    names the operation and the ranks), so that :func:`~pyro_ar.infer.train` tells it from a
    failure of the step's own code.

    Example:

    >>> from pyro_ar.infer.checkpoint import CollectiveError
    >>> issubclass(CollectiveError, RuntimeError)
    True
    """

# ------------------------------------------------------------------ parts of a run
def _modules(svi, modules):
    named = {}
    for key, m in (("guide", getattr(svi, "guide", None)), ("model", getattr(svi, "model", None))):
        if isinstance(m, torch.nn.Module):
            named[key] = m
    # a model that is no nn.Module names the modules whose buffers belong to its run (e.g. the
    # class-sharded model's RandomStream of negatives), so that no caller has to pass them
    for name, m in getattr(getattr(svi, "model", None), "run_modules", dict)().items():
        named[f"model.{name}"] = m
    for i, m in enumerate(modules):
        if not isinstance(m, torch.nn.Module):
            raise TypeError(f"modules[{i}] must be a torch.nn.Module, got {type(m).__name__}")
        named[f"modules.{i}"] = m
    return named


def check_param_state(state, name: str = "param_state") -> None:
    """A saved param store state (``{"params", "constraints"}``, as the estimator's files and
    the checkpoints hold it): finite floating-point tensors, one constraint per parameter;
    a ``ValueError`` naming ``name`` and the parameter otherwise.

    Example:

    >>> import torch
    >>> from pyro.distributions import constraints
    >>> from pyro_ar.infer.checkpoint import check_param_state
    >>> check_param_state({"params": {"w": torch.zeros(2)}, "constraints": {"w": constraints.real}})
    >>> check_param_state({"params": {"w": torch.tensor([float("nan")])}, "constraints": {"w": constraints.real}})
    Traceback (most recent call last):
    ...
    ValueError: parameter 'w' holds non-finite values
    """
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
            check_optim_values(name, state)
    check_rng_state(ck["rng"])


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
    params, constraints = store_state["params"], store_state["constraints"]
    payload = {
        "format": _FORMAT, "version": _VERSION, "step": int(step),
        "param_store": {
            "params": {n: p.detach() for n, p in params.items()},
            "constraints": {n: encode_constraint(constraints[n], f"param {n!r}")
                            for n in params}},
        "buffers": {key: {n: b.detach() for n, b in m.named_buffers() if b is not None}
                    for key, m in _modules(svi, modules).items()},
        "optim": to_plain(optim_state(svi.optim), "the optimizer state"),
        "rng": rng_state(),
        "history": to_plain(list(history or []), "history"),
        "extra": to_plain(extra, "extra"),
        "config": to_plain(config, "config"),
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
    >>> from pyro_ar.likelihoods import AR
    >>> def make_svi():
    ...     model = LinearClassifier(3, 10, likelihood=AR(negatives=3), subsample_size=20, sparse=True)
    ...     return SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())
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
        differences = config_differences(ck["config"], to_plain(config, "config"))
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
            n: decode_constraint(c, f"param {n!r}") for n, c in ck["param_store"]["constraints"].items()}})
        _check_model_shapes(svi.model)
        _set_up_lazy_guide(svi.guide, args, kwargs)
        _set_buffers(_modules(svi, modules), ck["buffers"])
        check_optim_state(svi.optim, ck["optim"])
        set_optim_state(svi.optim, ck["optim"])
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

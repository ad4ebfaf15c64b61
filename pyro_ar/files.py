"""Files of plain tensors and containers: written atomically, read with ``weights_only=True``.

Checkpoints (:mod:`pyro_ar.infer.checkpoint`) and saved estimators
(:meth:`pyro_ar.ARClassifier.save`) are ``torch.save`` payloads of tensors, dicts, lists,
tuples, numbers and strings. :func:`atomic_save` writes to a temporary file in the target's
folder and renames it over the target (``os.replace``), so a failed save never destroys the
previous file; the temporary files of saves that were killed (SIGKILL, power loss) are
removed by the next save of the same target. :func:`load_payload` refuses pickled objects
and turns every way a file can be damaged (missing, empty, truncated, not a torch file,
another format, another version, flipped bytes) into one error that names the path and
what is wrong.

Integrity: :func:`atomic_save` stores under ``"checksum"`` the SHA-256 of the rest of the
payload (:func:`payload_digest`: every tensor's dtype, shape and bytes, every number and
string, in a fixed order), and :func:`load_payload` recomputes and compares it, so bytes
flipped on disk or in transit are an error, not a silently different model.

The codecs both kinds of files share (one of each): :func:`to_plain` (numpy values to
torch / Python ones), :func:`encode_constraint` / :func:`decode_constraint` (a parameter's
constraint as plain data: by name, or by class and attributes) and :func:`rng_state` /
:func:`set_rng_state` (the RNG states of torch, numpy and ``random``), with
:func:`preserved_rng` and :func:`seeded` for blocks that must leave those states as they
found them.
"""

import contextlib
import errno
import hashlib
import importlib
import math
import os
import pickle
import random
import re
import shutil
import socket
import tempfile
import zipfile
from typing import Any, Dict, Iterator, Optional, Tuple, Type, Union

import numpy as np
import torch
from torch.distributions.constraints import Constraint

import pyro
import pyro.distributions.constraints as pyro_constraints

__all__ = ["atomic_save", "load_payload", "payload_digest", "remove_stale_temporaries", "to_plain",
           "encode_constraint", "decode_constraint", "rng_state", "set_rng_state", "check_rng_state",
           "preserved_rng", "seeded"]

_CHECKSUM = "checksum"


def payload_digest(payload: Any) -> str:
    """The SHA-256 (hex) of ``payload`` without its top-level ``"checksum"`` entry: every
    tensor's dtype, shape and bytes (sparse: indices and values), every number, string,
    None and container, walked in a fixed order (dict keys sorted). Objects of other types
    (only in files written for ``weights_only=False``) contribute their type name.

    Example:

    >>> import torch
    >>> from pyro_ar.files import payload_digest
    >>> a = payload_digest({"w": torch.zeros(3), "step": 1})
    >>> a == payload_digest({"step": 1, "w": torch.zeros(3)}), a == payload_digest({"w": torch.ones(3), "step": 1})
    (True, False)
    """
    h = hashlib.sha256()
    if isinstance(payload, dict):
        payload = {k: v for k, v in payload.items() if k != _CHECKSUM}
    _feed(h, payload)
    return h.hexdigest()


def _feed(h, obj) -> None:
    """Add ``obj`` to the hash ``h`` (see :func:`payload_digest`)."""
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        if t.layout != torch.strided:
            h.update(f"sparse {t.layout} {tuple(t.shape)};".encode())
            t = t.coalesce() if t.layout == torch.sparse_coo else t.to_dense()
            if t.layout == torch.sparse_coo:
                return _feed(h, [t.indices(), t.values()])
        h.update(f"tensor {t.dtype} {tuple(t.shape)};".encode())
        flat = t.cpu().contiguous().reshape(-1)
        if flat.numel():
            h.update(flat.view(torch.uint8).numpy())
    elif isinstance(obj, dict):
        h.update(f"dict {len(obj)};".encode())
        for k in sorted(obj, key=lambda k: (type(k).__name__, repr(k))):
            _feed(h, k)
            _feed(h, obj[k])
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__} {len(obj)};".encode())
        for v in obj:
            _feed(h, v)
    elif isinstance(obj, str):
        data = obj.encode("utf-8", "surrogatepass")
        h.update(f"str {len(data)};".encode() + data)
    elif obj is None or isinstance(obj, (bool, int, float, complex, bytes)):
        h.update(f"{type(obj).__name__} {obj!r};".encode())
    else:  # a pickled object (trusted files only): its type, not its (possibly unstable) repr
        h.update(f"object {type(obj).__module__}.{type(obj).__qualname__};".encode())


def _host() -> str:
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname()) or "host"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # e.g. PermissionError: it exists, owned by another user
        return True
    return True


def remove_stale_temporaries(path: Union[str, os.PathLike]) -> int:
    """Remove the temporary files that killed saves of ``path`` left in its folder; return
    how many. A temporary file is stale when the process that wrote it (its name holds the
    pid and host) no longer runs on this host, or when it has the older, pid-less form
    ``.NAME.xxxxxxxx.tmp``; temporaries of live processes and of other hosts are kept.

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.files import remove_stale_temporaries
    >>> folder = tempfile.mkdtemp()
    >>> open(os.path.join(folder, ".m.pt.abcd1234.tmp"), "w").close()   # left by a kill
    >>> remove_stale_temporaries(os.path.join(folder, "m.pt")), os.listdir(folder)
    (1, [])
    """
    path = os.fspath(path)
    folder, base = os.path.dirname(os.path.abspath(path)), os.path.basename(path)
    pattern = re.compile(r"\." + re.escape(base) + r"\.(?:(\d+)@([A-Za-z0-9-]+)\.)?[A-Za-z0-9_]+\.tmp")
    host, removed = _host(), 0
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            m = pattern.fullmatch(name)
            if m is None:
                continue
            pid, where = m.group(1), m.group(2)
            if pid is not None and (where != host or int(pid) == os.getpid() or _alive(int(pid))):
                continue
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, name))
                removed += 1
    return removed


def atomic_save(payload: Any, path: Union[str, os.PathLike], checksum: bool = True) -> None:
    """``torch.save(payload, path)``, atomically: the previous file survives any failure.

    A dict payload gets a ``"checksum"`` entry (:func:`payload_digest`) unless
    ``checksum=False``. Stale temporary files of earlier, killed saves of ``path`` are
    removed first (:func:`remove_stale_temporaries`).

    Example:

    >>> import os, tempfile, torch
    >>> from pyro_ar.files import atomic_save
    >>> path = os.path.join(tempfile.mkdtemp(), "x.pt")
    >>> atomic_save({"a": torch.ones(2)}, path)
    >>> torch.load(path, weights_only=True)["a"].tolist()
    [1.0, 1.0]
    """
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise IsADirectoryError(f"cannot save to {path!r}: it is a folder; give a file name, e.g. "
                                f"{os.path.join(path, 'model.pt')!r}")
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"cannot save to {path!r}: the folder {folder!r} does not exist")
    if checksum and isinstance(payload, dict):
        payload = {**payload, _CHECKSUM: payload_digest(payload)}
    remove_stale_temporaries(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.{os.getpid()}@{_host()}.",
                               suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, (RuntimeError, OSError)):
            raise _write_failed(path, folder, e) from e
        raise


def _write_failed(path: str, folder: str, error: BaseException) -> OSError:
    """The error of a save that could not write ``path``: torch's writer reports a short write
    (e.g. the disk filling up) as ``RuntimeError: [enforce fail at inline_container.cc] unexpected
    pos`` with neither the path nor the cause; this names both, with the space left."""
    try:
        free = f"{shutil.disk_usage(folder).free:,} bytes free there"
    except OSError:
        free = "free space unknown"
    code = getattr(error, "errno", None) or errno.EIO
    if isinstance(error, OSError):
        reason = os.strerror(error.errno) if error.errno else (str(error) or os.strerror(code))
    else:
        reason = str(error).strip().splitlines()[0][:160]
    return OSError(code, f"cannot save to {path!r}: writing it failed ({reason}); the disk or a quota may be "
                         f"full ({free}); the previous file, if any, is unchanged")


def load_payload(path: Union[str, os.PathLike], fmt: str, version: Union[int, Tuple[int, ...]],
                 error: Type[Exception] = ValueError, map_location: Any = None, what: Optional[str] = None,
                 weights_only: bool = True, checksum_since: Optional[int] = None) -> Dict:
    """Read a payload written by :func:`atomic_save` whose ``"format"`` is ``fmt`` and
    ``"version"`` is ``version`` (an int, or a tuple of the versions read); any other file
    raises ``error`` naming ``path``. A payload's ``"checksum"`` is verified
    (:func:`payload_digest`); versions from ``checksum_since`` on must have one.
    ``weights_only=False`` unpickles arbitrary objects: only for files you trust.

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.files import atomic_save, load_payload
    >>> path = os.path.join(tempfile.mkdtemp(), "x.pt")
    >>> atomic_save({"format": "demo", "version": 1}, path)
    >>> load_payload(path, "demo", 1)["version"]
    1
    >>> load_payload(path, "demo", 2)
    Traceback (most recent call last):
    ...
    ValueError: ...
    """
    what = what or f"a {fmt} file"
    path_s = os.fspath(path)
    if not os.path.isfile(path_s):
        raise error(f"no {what} file at {path_s!r}" if what.startswith("a ") is False
                    else f"no {what[2:]} file at {path_s!r}")
    if os.path.getsize(path_s) == 0:
        raise error(f"{path_s!r} is empty, not {what}")
    try:
        payload = torch.load(path_s, map_location=map_location, weights_only=weights_only)
    except Exception as e:  # noqa: BLE001  (corrupt, truncated, pickled objects, not torch)
        if weights_only and isinstance(e, pickle.UnpicklingError) and zipfile.is_zipfile(path_s):
            raise error(f"{path_s!r} holds Python objects other than tensors, containers, numbers "
                        f"and strings, so it is not loaded with weights_only=True; if you wrote "
                        f"it yourself and trust it, load it with weights_only=False") from e
        raise error(f"cannot read the file {path_s!r} as {what} (corrupt, truncated, or not a "
                    f"torch file): {type(e).__name__}: {str(e)[:200]}") from e
    if not (isinstance(payload, dict) and payload.get("format") == fmt):
        raise error(f"{path_s!r} is not {what}")
    versions = version if isinstance(version, tuple) else (version,)
    if payload.get("version") not in versions:
        raise error(f"{path_s!r} has format version {payload.get('version')!r}; this pyro_ar "
                    f"reads version{'s' if len(versions) > 1 else ''} "
                    f"{', '.join(map(str, versions))}")
    stored = payload.pop(_CHECKSUM, None)
    if stored is None and checksum_since is not None and payload["version"] >= checksum_since:
        raise error(f"{path_s!r} has no checksum (every version {payload['version']} file has one): "
                    f"it was not written by pyro_ar, or it was edited")
    if stored is not None and stored != payload_digest(payload):
        raise error(f"{path_s!r} is damaged: its content does not match its checksum (bytes were "
                    f"changed after it was written: a disk, copy or transfer error, or an edit)")
    return payload


# ------------------------------------------------------------------ plain data
def to_plain(obj: Any, where: str, strict: bool = True) -> Any:
    """``obj`` as ``weights_only``-loadable data: numpy arrays -> tensors, numpy scalars ->
    Python numbers, tensors detached, containers recursively. Any other object raises
    ``TypeError`` naming ``where``, or with ``strict=False`` is kept as it is (a file then
    needs ``weights_only=False``).

    Example:

    >>> import numpy as np
    >>> from pyro_ar.files import to_plain
    >>> to_plain({"n": np.int64(3), "x": [np.float32(0.5)]}, "extra")
    {'n': 3, 'x': [0.5]}
    >>> to_plain(object(), "extra")
    Traceback (most recent call last):
    ...
    TypeError: cannot save extra: a object is not a tensor, number, string, None, list, tuple or dict
    """
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
            if strict and not isinstance(k, (str, int)):
                raise TypeError(f"cannot save {where}: key {k!r} is not a string or an int")
        return {k: to_plain(v, f"{where}[{k!r}]", strict) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_plain(v, f"{where}[{i}]", strict) for i, v in enumerate(obj))
    if not strict:
        return obj
    raise TypeError(f"cannot save {where}: a {type(obj).__name__} is not a tensor, number, string, "
                    "None, list, tuple or dict")


# ------------------------------------------------------------------ constraints
#: modules whose constraint classes a file may name (decoding imports them)
_TRUSTED_MODULES = ("torch.distributions.", "pyro.distributions.", "pyro_ar.")
_CONSTRAINT_MODULES = (pyro_constraints, torch.distributions.constraints)


def _singleton_name(c) -> Optional[str]:
    """The name of ``c`` in Pyro's / torch's constraints modules: the object itself, or an
    equal copy (e.g. an unpickled one) of a named one; None for other constraints."""
    for module in _CONSTRAINT_MODULES:
        for name in dir(module):
            if not name.startswith("_") and getattr(module, name) is c:
                return name
    for module in _CONSTRAINT_MODULES:
        for name in dir(module):
            obj = getattr(module, name)
            if not name.startswith("_") and isinstance(obj, Constraint) and type(obj) is type(c):
                try:
                    if vars(obj) == vars(c):
                        return name
                except Exception:  # noqa: BLE001  (uncomparable attributes)
                    pass
    return None


def encode_constraint(c: Constraint, where: str) -> Dict:
    """A constraint as plain data: ``{"__constraint__": name}`` for the named constraints of
    ``pyro.distributions.constraints`` (``positive``, ``real``, ...), else
    ``{"__constraint__": "module:Class", "attrs": {...}}`` (e.g. ``interval(0, 1)``;
    classes from torch, Pyro and pyro_ar only: ``TypeError`` naming ``where`` otherwise).
    :func:`decode_constraint` reverses it.

    Example:

    >>> from pyro.distributions import constraints
    >>> from pyro_ar.files import decode_constraint, encode_constraint
    >>> encode_constraint(constraints.positive, "param 'scale'")
    {'__constraint__': 'positive'}
    >>> decode_constraint(encode_constraint(constraints.interval(0.0, 1.0), "p"), "p").upper_bound
    1.0
    """
    name = _singleton_name(c)
    if name is not None:
        return {"__constraint__": name}
    cls = type(c)
    if not cls.__module__.startswith(_TRUSTED_MODULES):
        raise TypeError(f"cannot save the constraint of {where}: {cls.__module__}.{cls.__qualname__} "
                        f"is not from {_TRUSTED_MODULES}")
    attrs = {k: encode_constraint(v, where) if isinstance(v, Constraint)
             else to_plain(v, f"the constraint of {where}") for k, v in vars(c).items()}
    return {"__constraint__": f"{cls.__module__}:{cls.__qualname__}", "attrs": attrs}


def decode_constraint(enc: Any, where: str) -> Constraint:
    """The constraint :func:`encode_constraint` encoded; also a bare name (``"positive"``:
    estimator files of format versions 1 to 3) and a constraint object (a pickled one, from
    a file loaded with ``weights_only=False``). Anything else raises ``ValueError`` naming
    ``where``.

    Example:

    >>> from pyro.distributions import constraints
    >>> from pyro_ar.files import decode_constraint
    >>> decode_constraint("positive", "parameter 'scale'") is constraints.positive
    True
    >>> decode_constraint({"__constraint__": "nope"}, "parameter 'scale'")
    Traceback (most recent call last):
    ...
    ValueError: the constraint of parameter 'scale' is 'nope': an unknown constraint 'nope' ...
    """
    if isinstance(enc, Constraint):
        return enc
    spec = enc.get("__constraint__") if isinstance(enc, dict) else enc
    if not isinstance(spec, str):
        raise ValueError(f"the constraint of {where} must be a constraint's name or encoding, got {enc!r}")
    if ":" not in spec:
        for module in _CONSTRAINT_MODULES:
            value = getattr(module, spec, None) if not spec.startswith("_") else None
            if isinstance(value, Constraint):
                return value
        raise ValueError(f"the constraint of {where} is {spec!r}: an unknown constraint {spec!r} "
                         f"(not one of pyro.distributions.constraints)")
    module_name, _, qualname = spec.partition(":")
    if not module_name.startswith(_TRUSTED_MODULES):
        raise ValueError(f"the constraint of {where}: untrusted constraint class {spec!r}")
    cls = getattr(importlib.import_module(module_name), qualname, None)
    if not (isinstance(cls, type) and issubclass(cls, Constraint)) or not isinstance(enc.get("attrs"), dict):
        raise ValueError(f"the constraint of {where}: {spec!r} is not a constraint class with attrs")
    obj = cls.__new__(cls)
    obj.__dict__.update({k: decode_constraint(v, where) if isinstance(v, dict) and "__constraint__" in v
                         else v for k, v in enc["attrs"].items()})
    return obj


# ------------------------------------------------------------------ RNG states
def rng_state() -> Dict:
    """The RNG states of torch (CPU, CUDA if available), numpy and ``random`` as plain data.

    Example:

    >>> import torch
    >>> from pyro_ar.files import rng_state, set_rng_state
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
    """Restore what :func:`rng_state` returned.

    Example:

    >>> import random
    >>> from pyro_ar.files import rng_state, set_rng_state
    >>> state = rng_state(); a = random.random(); set_rng_state(state)
    >>> a == random.random()
    True
    """
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    n = state["numpy"]
    np.random.set_state((n["name"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"],
                         n["cached_gaussian"]))
    r = state["random"]
    random.setstate((r["version"], tuple(r["state"].tolist()), r["gauss_next"]))


def check_rng_state(state) -> None:
    """``ValueError`` unless ``state`` has the form :func:`rng_state` gives: torch's a uint8
    tensor, numpy's Mersenne Twister (624 keys, a position in [0, 624]), ``random``'s (625
    words).

    Example:

    >>> from pyro_ar.files import check_rng_state, rng_state
    >>> check_rng_state(rng_state())
    >>> check_rng_state({"torch": None})
    Traceback (most recent call last):
    ...
    ValueError: the RNG states (rng) are not those of torch, numpy and random
    """
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


@contextlib.contextmanager
def preserved_rng() -> Iterator[None]:
    """Run a block (e.g. an evaluation) without changing the RNG states seen after it.

    Example:

    >>> import torch
    >>> from pyro_ar.files import preserved_rng
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


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run a block with torch, numpy and ``random`` seeded with ``seed``
    (``pyro.set_rng_seed``), restoring their states after it (:func:`preserved_rng`).

    Example:

    >>> import torch
    >>> from pyro_ar.files import seeded
    >>> with seeded(0):
    ...     a = torch.rand(2)
    >>> with seeded(0):
    ...     torch.equal(a, torch.rand(2))
    True
    """
    with preserved_rng():
        pyro.set_rng_seed(seed)
        yield

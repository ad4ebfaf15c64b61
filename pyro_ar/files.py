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
"""

import contextlib
import hashlib
import os
import pickle
import re
import socket
import tempfile
import zipfile
from typing import Any, Dict, Optional, Tuple, Type, Union

import torch

__all__ = ["atomic_save", "load_payload", "payload_digest", "remove_stale_temporaries"]

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
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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

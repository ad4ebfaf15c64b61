"""Files of plain tensors and containers: written atomically, read with ``weights_only=True``.

Checkpoints (:mod:`pyro_ar.infer.checkpoint`) and saved estimators
(:meth:`pyro_ar.ARClassifier.save`) are ``torch.save`` payloads of tensors, dicts, lists,
tuples, numbers and strings. :func:`atomic_save` writes to a temporary file in the target's
folder and renames it over the target (``os.replace``), so a failed save never destroys the
previous file; :func:`load_payload` refuses pickled objects and turns every way a file can
be damaged (missing, empty, truncated, not a torch file, another format, another version)
into one error that names the path and what is wrong.
"""

import contextlib
import os
import pickle
import tempfile
import zipfile
from typing import Any, Dict, Optional, Tuple, Type, Union

import torch

__all__ = ["atomic_save", "load_payload"]


def atomic_save(payload: Any, path: Union[str, os.PathLike]) -> None:
    """``torch.save(payload, path)``, atomically: the previous file survives any failure.

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
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
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
                 weights_only: bool = True) -> Dict:
    """Read a payload written by :func:`atomic_save` whose ``"format"`` is ``fmt`` and
    ``"version"`` is ``version`` (an int, or a tuple of the versions read); any other file
    raises ``error`` naming ``path``.
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
    return payload

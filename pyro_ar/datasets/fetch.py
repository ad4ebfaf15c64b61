r"""Downloading the public data sets into the data home: :func:`fetch_bibtex`, :func:`fetch_mnist`,
:func:`fetch_wordnet`, :func:`fetch_gcide`.

Each ``fetch_*`` returns the folder holding the data set's files, to pass to its loader
(``load_bibtex(fetch_bibtex())``; the loaders also find it by themselves once fetched). It

1. looks for a copy already there: ``<root>/<data set>/`` for each root of
   :func:`~pyro_ar.datasets.data_search_path` (the data home, then a source checkout's
   ``../shared/data``), or only in ``data_home`` when given; a copy counts when every file
   the loaders read has its pinned SHA-256 (for MNIST's gzip files, the SHA-256 of the
   decompressed images also counts: the same data recompressed);
2. else downloads each file from its original public source (the next URL on a failure),
   streaming into a temporary folder inside the data home while hashing; a file is kept only
   when its size and SHA-256 are the pinned ones; a Debian package is unpacked there
   (:func:`pyro_ar.datasets.deb.extract_deb`) and its files checked; then the files are moved
   into ``<data home>/<data set>/`` (each by an atomic rename) with a ``SHA256SUMS`` listing
   them, and the temporary folder is removed, so a failure leaves nothing half-written;
3. a file put by hand at ``<data home>/<data set>/<file name>`` (the error says where) is
   used instead of a download when its SHA-256 is the pinned one.

Downloads are refused when ``download_if_missing=False``, or by default when the environment
variable ``PYRO_AR_OFFLINE`` is 1 (the test suite sets it): then the error says which file is
missing, its URL, and where to put it by hand. Errors: :class:`DownloadError` (a
``FileNotFoundError``: offline, refused, or a dropped connection) and :class:`ChecksumError`
(a ``ValueError``: the bytes are not the pinned ones).

Sources (:data:`REMOTE_DATASETS`):

* ``bibtex`` -- the Mulan project's ``bibtex-train.arff``, ``bibtex-test.arff``, ``bibtex.xml``
  (GitHub ``tsoumakas/mulan``, ``data/multi-label/bibtex``, at a pinned commit), 3.5 MB;
* ``mnist`` -- the four IDX files of LeCun, Cortes and Burges (``yann.lecun.com/exdb/mnist``,
  then PyTorch's byte-identical mirror), 11 MB, saved under the names the loader reads
  (``train-images.idx3-ubyte.gz``, ...);
* ``wordnet`` -- Debian's ``wordnet-base`` 1:3.0-37 (WordNet 3.0), 6.5 MB, from
  ``deb.debian.org`` (then ``snapshot.debian.org`` by the file's SHA-1), unpacked to
  ``wordnet/usr/share/wordnet/``;
* ``gcide`` -- Debian's ``dict-gcide`` 0.48.5+nmu2, 14.8 MB, unpacked to
  ``gcide/usr/share/dictd/``.

The command line does the same: ``python -m pyro_ar.datasets.fetch bibtex mnist``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import http.client
import os
import shutil
import sys
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from . import _common
from ._common import DATA_ENV_VAR, PathLike, _sha256
from .deb import extract_deb

__all__ = ["ChecksumError", "DownloadError", "RemoteDataset", "RemoteFile", "REMOTE_DATASETS", "OFFLINE_ENV_VAR",
           "fetch_dataset", "fetch_bibtex", "fetch_mnist", "fetch_wordnet", "fetch_gcide"]

#: environment variable that turns downloads off by default (``PYRO_AR_OFFLINE=1``)
OFFLINE_ENV_VAR = "PYRO_AR_OFFLINE"
_TIMEOUT = 60.0
_BLOCK = 1 << 20


class DownloadError(FileNotFoundError):
    """A data set's file is not on this machine and could not be downloaded (downloads off,
    no network, a refused request, a dropped connection). The message names the file, its
    URLs and where to put it by hand.

    Example:

    >>> from pyro_ar.datasets import DownloadError, fetch_wordnet
    >>> try:
    ...     folder = fetch_wordnet(download_if_missing=False)
    ... except DownloadError as err:      # a FileNotFoundError: not here, downloads off
    ...     folder = None
    """


class ChecksumError(ValueError):
    """A downloaded or unpacked file is not the pinned one (its size or SHA-256 differs);
    nothing of it is kept in the data home.

    Example:

    >>> from pyro_ar.datasets import ChecksumError
    >>> issubclass(ChecksumError, ValueError)
    True
    """


@dataclass(frozen=True)
class RemoteFile:
    """One file to download: its ``name`` in the data set folder, ``size`` in bytes, pinned
    ``sha256``, the ``urls`` tried in turn, and other names a copy put by hand may have
    (``aliases``: ``apt-get download`` writes the epoch as ``1%3a``).

    Example:

    >>> from pyro_ar.datasets.fetch import REMOTE_DATASETS
    >>> f = REMOTE_DATASETS["wordnet"].files[0]
    >>> f.name, f.size
    ('wordnet-base_3.0-37_all.deb', 6467132)
    >>> f.urls[0]
    'https://deb.debian.org/debian/pool/main/w/wordnet/wordnet-base_3.0-37_all.deb'
    """

    name: str
    size: int
    sha256: str
    urls: Tuple[str, ...]
    aliases: Tuple[str, ...] = ()


@dataclass(frozen=True)
class RemoteDataset:
    """A data set the ``fetch_*`` functions can download.

    Attributes:
        name: its folder below a data root (``"bibtex"``).
        files: what is downloaded.
        provides: the files the loaders read, relative to ``inner``, with their SHA-256: a
            copy is complete when each has its digest.
        inner: where those files lie inside the data set folder once unpacked
            (``"usr/share/wordnet"`` for a Debian package; ``""``: the folder itself).
        unpack: ``"deb"`` to unpack the downloaded Debian package, ``""`` to keep the files.
        content_sha256: for ``.gz`` files of ``provides``, the SHA-256 of the decompressed
            content, also accepted in a copy found on this machine (the same data recompressed).
        source: what it is and where it comes from (for messages and the docs).

    Example:

    >>> from pyro_ar.datasets.fetch import REMOTE_DATASETS
    >>> spec = REMOTE_DATASETS["gcide"]
    >>> spec.inner, sorted(spec.provides)
    ('usr/share/dictd', ['gcide.dict.dz', 'gcide.index'])
    """

    name: str
    files: Tuple[RemoteFile, ...]
    provides: Dict[str, str]
    inner: str = ""
    unpack: str = ""
    content_sha256: Dict[str, str] = field(default_factory=dict)
    source: str = ""


_MULAN = "https://raw.githubusercontent.com/tsoumakas/mulan/{}/data/multi-label/bibtex/{}"
_MULAN_COMMIT = "43f6389095ad71984264db4387a8074b22bc7d4a"
_BIBTEX = (("bibtex-train.arff", 2292961, "8dcc9de6e0b2cebaec8c1f4fac78431adeeb73cfd3ab879b530a66d366e59174"),
           ("bibtex-test.arff", 1215637, "9b03329cde64d3f994bdf7fbbac3f3b10fe185c311cb9ae725475f59c7f3f922"),
           ("bibtex.xml", 5880, "08fe20013c1e75dcf1888c185f5187c95e76495b8518ce289b4d3afce38d1232"))
#: loader's name, original name, size, SHA-256 of the original gzip file, SHA-256 of its content
_MNIST = (
    ("train-images.idx3-ubyte.gz", "train-images-idx3-ubyte.gz", 9912422,
     "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
     "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"),
    ("train-labels.idx1-ubyte.gz", "train-labels-idx1-ubyte.gz", 28881,
     "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
     "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"),
    ("t10k-images.idx3-ubyte.gz", "t10k-images-idx3-ubyte.gz", 1648877,
     "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
     "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"),
    ("t10k-labels.idx1-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 4542,
     "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
     "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"),
)
_WORDNET_FILES = {
    "adj.exc": "8824cc24bbedd797b9702316b27f07cd4c2b76b629539f0a1276f03926758016",
    "adv.exc": "e7291461b629abfe63301bbe1998cee09fd575ed7107abd7ea9763adb05bf0a8",
    "cntlist.rev": "a198580b8f705fa02797bba8b13e5cbe4a9f9f40cb1697e774c7fc6a5865b035",
    "data.adj": "c89120dfc1f046ddff4a631bf9b7e9fa1a36b5e86565a23bf82dbe14f30b88a7",
    "data.adv": "444a63bf3955080ab7524f5079cfc07ff9bc682cb98bdb1db73b0fb9829f1139",
    "data.noun": "fea17d2f9656611334eac790e5d69e47645fa180c4aa481fb4cd9b3520754ca2",
    "data.verb": "adcf43e35b581e8036d8b5a52d63d9cd3d3b4870b2720d3c03c799df44777bc2",
    "index.adj": "c9865d7b4d1f805bdef82ccdcea5282436e23083e6f6f1b33e716327c4eda810",
    "index.adv": "6f5465ed5758fe9c8a2f7ec17b1300f3aa875756c70ff7cba162f7e71bcf88ea",
    "index.noun": "a490d99d93d017bf4822fe2f0ffa51fd73911ce271dc7535fade21f8814b5a04",
    "index.verb": "e2ac24816c3a8289dcb72aaa9cf8db81fdf25ec34d792bfc96ac5b7a20c8b4ae",
    "noun.exc": "2b5d675c380b39ecf595af9fa9d4e7feb1d58c643b0bff08c40ed5bfe41fab7a",
    "sentidx.vrb": "129e267389fe88ea413b90addda3fcfb2a42b009339298b60711676b2b5d9bf0",
    "sents.vrb": "6fb59507c96c4aeb267e016ce4a654a1791a438815de98c52e7975df20db15c9",
    "verb.exc": "dbbcf9a601b2d77e934e413b91d90e88ec7f933a8b77cfc00602a923b891b42c",
}

#: the data sets the ``fetch_*`` functions download, by folder name
REMOTE_DATASETS: Dict[str, RemoteDataset] = {
    "bibtex": RemoteDataset(
        "bibtex",
        tuple(RemoteFile(n, size, sha, (_MULAN.format(_MULAN_COMMIT, n), _MULAN.format("master", n)))
              for n, size, sha in _BIBTEX),
        {n: sha for n, _, sha in _BIBTEX},
        source="Bibtex (Katakis, Tsoumakas & Vlahavas, ECML/PKDD 2008 discovery challenge), Mulan's copy"),
    "mnist": RemoteDataset(
        "mnist",
        tuple(RemoteFile(n, size, sha, (f"http://yann.lecun.com/exdb/mnist/{orig}",
                                        f"https://ossci-datasets.s3.amazonaws.com/mnist/{orig}"), (orig,))
              for n, orig, size, sha, _ in _MNIST),
        {n: sha for n, _, _, sha, _ in _MNIST},
        content_sha256={n: content for n, _, _, _, content in _MNIST},
        source="MNIST (LeCun, Cortes & Burges), the original IDX files"),
    "wordnet": RemoteDataset(
        "wordnet",
        (RemoteFile("wordnet-base_3.0-37_all.deb", 6467132,
                    "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752",
                    ("https://deb.debian.org/debian/pool/main/w/wordnet/wordnet-base_3.0-37_all.deb",
                     "https://snapshot.debian.org/file/78cc404951819f319f979e9b5d08db8304ce49b9"),
                    ("wordnet-base_1%3a3.0-37_all.deb",)),),
        _WORDNET_FILES, inner="usr/share/wordnet", unpack="deb",
        source="WordNet 3.0 (Princeton University), Debian's wordnet-base 1:3.0-37"),
    "gcide": RemoteDataset(
        "gcide",
        (RemoteFile("dict-gcide_0.48.5+nmu2_all.deb", 14800692,
                    "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f",
                    ("https://deb.debian.org/debian/pool/main/d/dict-gcide/dict-gcide_0.48.5+nmu2_all.deb",
                     "https://snapshot.debian.org/file/a731e5db951f4e5cc16d55bc42736be0768ba8c5")),),
        {"gcide.index": "e78de035e075f16dd686dd87a4dbf5b4525130d0550968a02d929f5ddf63a6a1",
         "gcide.dict.dz": "3e6b2cdcbc1b3664c2f1466e3c8e44012e815c4c67fa83fa61f39777cd6e8517"},
        inner="usr/share/dictd", unpack="deb",
        source="GCIDE 0.48 (Webster's 1913 and additions), Debian's dict-gcide 0.48.5+nmu2"),
}

_common.FETCHABLE.update(REMOTE_DATASETS)


def _gunzip_sha256(path: Path) -> Optional[str]:
    h = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as f:
            for block in iter(lambda: f.read(_BLOCK), b""):
                h.update(block)
    except (OSError, EOFError):
        return None
    return h.hexdigest()


def _complete(folder: Path, spec: RemoteDataset) -> bool:
    """Whether ``folder`` holds every file of ``spec.provides`` with its pinned digest."""
    for name, digest in spec.provides.items():
        p = folder / name
        if not p.is_file():
            return False
        if _sha256(p) != digest and (name not in spec.content_sha256
                                     or _gunzip_sha256(p) != spec.content_sha256[name]):
            return False
    return True


def _find_copy(spec: RemoteDataset, roots: Sequence[Path]) -> Optional[Path]:
    for root in roots:
        base = root / spec.name
        for folder in dict.fromkeys((base / spec.inner, base)):
            if folder.is_dir() and _complete(folder, spec):
                return folder
    return None


class _Failure(Exception):
    def __init__(self, corrupt: bool, reason: str):
        super().__init__(reason)
        self.corrupt, self.reason = corrupt, reason


def _download(url: str, f: RemoteFile, dest: Path, quiet: bool) -> None:
    """Stream ``url`` into ``dest`` (created), checking the size and SHA-256 (``_Failure``)."""
    if not quiet:
        print(f"pyro_ar: downloading {url} ({f.size / 1e6:.1f} MB)", file=sys.stderr, flush=True)
    request = urllib.request.Request(url, headers={"User-Agent": "pyro_ar.datasets.fetch"})
    h, n = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT) as response, open(dest, "wb") as out:
            for block in iter(lambda: response.read(_BLOCK), b""):
                n += len(block)
                if n > f.size:
                    raise _Failure(True, f"more than the {f.size:,} bytes expected")
                h.update(block)
                out.write(block)
    except (OSError, http.client.HTTPException, ValueError) as e:  # URLError, timeouts, IncompleteRead
        raise _Failure(False, f"{type(e).__name__}: {e} after {n:,} of {f.size:,} bytes") from e
    if n != f.size:
        raise _Failure(False, f"the connection ended after {n:,} of {f.size:,} bytes")
    if h.hexdigest() != f.sha256:
        raise _Failure(True, f"SHA-256 {h.hexdigest()}, expected {f.sha256}")


def _by_hand(spec: RemoteDataset, files: Sequence[RemoteFile], home: Path, fetcher: str) -> str:
    """Where to put ``files`` by hand, and what then."""
    unpack = " (it unpacks the package)" if spec.unpack else ""
    each = "; ".join(f"{f.name} from {f.urls[0]} ({f.size:,} bytes, SHA-256 {f.sha256})" for f in files)
    return (f"Download by hand into {home / spec.name}: {each}; then call {fetcher}() again{unpack}, "
            f"or set {DATA_ENV_VAR} to a data home holding '{spec.name}/'.")


def _placed(spec: RemoteDataset, f: RemoteFile, home: Path) -> Optional[Path]:
    """``f`` put by hand in the data set folder (under its name or an alias), if it is the pinned file."""
    for name in (f.name,) + f.aliases:
        placed = home / spec.name / name
        if placed.is_file() and placed.stat().st_size == f.size and _sha256(placed) == f.sha256:
            return placed
    return None


def _where(spec: RemoteDataset, f: RemoteFile) -> str:
    return f"'{f.name}' of {spec.source}"


def _get_file(spec: RemoteDataset, f: RemoteFile, home: Path, stage: Path, fetcher: str, quiet: bool) -> Path:
    """The verified file ``f``: put by hand in the data set folder, else downloaded into ``stage``."""
    placed = _placed(spec, f, home)
    if placed is not None:
        return placed
    where = _where(spec, f)
    dest, failures = stage / f.name, []
    for url in f.urls:
        try:
            _download(url, f, dest, quiet)
            return dest
        except _Failure as e:
            failures.append(e)
            dest.unlink(missing_ok=True)
    tried = "; ".join(f"{u}: {x.reason}" for u, x in zip(f.urls, failures))
    nothing = f"Nothing was written to {home}."
    if any(x.corrupt for x in failures):
        raise ChecksumError(f"{fetcher}: the download of {where} is not the pinned file ({tried}): a corrupted "
                            f"download or a changed file at the source. {nothing} {_by_hand(spec, [f], home, fetcher)}")
    raise DownloadError(f"{fetcher}: could not download {where} ({tried}). {nothing} "
                        f"{_by_hand(spec, [f], home, fetcher)}")


def _install(stage_root: Path, dest: Path, names: Dict[str, str]) -> None:
    """Move every staged file into ``dest`` (atomic renames; a package's documentation and
    copyright file too, as ``dpkg-deb -x`` leaves them), then write ``dest/SHA256SUMS`` (the
    checked files ``names``: relative path -> digest, merged with the one there) by a rename."""
    for path in sorted(p for p in stage_root.rglob("*") if p.is_file()):
        target = dest / path.relative_to(stage_root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    sums = dest / "SHA256SUMS"
    entries: Dict[str, str] = {}
    if sums.is_file():
        for line in sums.read_text().splitlines():
            parts = line.split(None, 1)
            if len(parts) == 2:
                entries[parts[1].lstrip("*")] = parts[0]
    entries.update(names)
    tmp = dest / ".SHA256SUMS.part"
    tmp.write_text("".join(f"{d}  {n}\n" for n, d in entries.items()))
    os.replace(tmp, sums)


def fetch_dataset(name: str, data_home: Optional[PathLike] = None, download_if_missing: Optional[bool] = None,
                  quiet: bool = False) -> Path:
    """The folder holding the files of the data set ``name`` of :data:`REMOTE_DATASETS`,
    downloaded into the data home if needed (the module docstring says how).

    Args:
        name: ``"bibtex"``, ``"mnist"``, ``"wordnet"`` or ``"gcide"``.
        data_home: where to look and download (default: every root of
            :func:`~pyro_ar.datasets.data_search_path`, downloading into
            :func:`~pyro_ar.datasets.default_data_dir`).
        download_if_missing: allow a download (default: unless ``$PYRO_AR_OFFLINE`` is 1).
        quiet: do not print a line per download on stderr.

    Raises:
        DownloadError: a file is missing and could not be downloaded.
        ChecksumError: a download is not the pinned file.

    Example:

    >>> from pyro_ar.datasets.fetch import fetch_dataset
    >>> fetch_dataset("gcide")            # downloads 14.8 MB the first time  # doctest: +SKIP
    PosixPath('/home/me/.cache/pyro_ar/gcide/usr/share/dictd')
    """
    if name not in REMOTE_DATASETS:
        raise ValueError(f"name must be one of {sorted(REMOTE_DATASETS)}, got {name!r}")
    spec, fetcher = REMOTE_DATASETS[name], f"fetch_{name}"
    roots = [Path(data_home).expanduser()] if data_home is not None else _common.data_search_path()
    found = _find_copy(spec, roots)
    if found is not None:
        return found
    home = roots[0] if data_home is not None else _common.default_data_dir()
    if download_if_missing is None:
        download_if_missing = os.environ.get(OFFLINE_ENV_VAR, "").strip().lower() not in ("1", "true", "yes", "on")
    missing = [f for f in spec.files if _placed(spec, f, home) is None]
    if missing and not download_if_missing:
        raise DownloadError(
            f"{fetcher}: {spec.name} is not on this machine (looked in {', '.join(str(r / spec.name) for r in roots)}) "
            f"and downloads are off (download_if_missing=False, or {OFFLINE_ENV_VAR}=1). Missing: "
            + f"{', '.join(f.name for f in missing)} ({spec.source}). {_by_hand(spec, missing, home, fetcher)}")
    created = [p for p in (home, *home.parents) if not p.exists()]
    home.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{spec.name}-partial-", dir=home))
    try:
        got = [_get_file(spec, f, home, stage, fetcher, quiet) for f in spec.files]
        if spec.unpack == "deb":
            tree = stage / "tree"
            for path in got:
                extract_deb(path, tree)
        else:
            tree = stage
            for f, path in zip(spec.files, got):  # a file put by hand, perhaps under an alias
                if path.parent != stage:
                    shutil.copy2(path, stage / f.name)
        provided = {f"{spec.inner}/{n}" if spec.inner else n: d for n, d in spec.provides.items()}
        if not _complete(tree / spec.inner, spec):
            raise ChecksumError(f"{fetcher}: the files unpacked from {[p.name for p in got]} are not the "
                                f"pinned ones ({sorted(provided)}); nothing was written to {home}")
        _install(tree, home / spec.name, provided)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        for p in created:  # folders this call created and left empty (a failed first download)
            try:
                p.rmdir()
            except OSError:
                break
    return home / spec.name / spec.inner


def fetch_bibtex(data_home: Optional[PathLike] = None, download_if_missing: Optional[bool] = None,
                 quiet: bool = False) -> Path:
    """The Bibtex folder (``bibtex-train.arff``, ``bibtex-test.arff``, ``bibtex.xml``: 3.5 MB
    from the Mulan project's GitHub files), downloaded into the data home if needed.

    Arguments and errors: :func:`fetch_dataset`.

    Example:

    >>> from pyro_ar.datasets import fetch_bibtex, load_bibtex
    >>> data = load_bibtex(fetch_bibtex(), remap_classes=True)     # doctest: +SKIP
    """
    return fetch_dataset("bibtex", data_home, download_if_missing, quiet)


def fetch_mnist(data_home: Optional[PathLike] = None, download_if_missing: Optional[bool] = None,
                quiet: bool = False) -> Path:
    """The MNIST folder (the four IDX files, 11 MB, from ``yann.lecun.com/exdb/mnist`` or
    PyTorch's mirror of them), downloaded into the data home if needed.

    Arguments and errors: :func:`fetch_dataset`.

    Example:

    >>> from pyro_ar.datasets import fetch_mnist, load_mnist
    >>> data = load_mnist(fetch_mnist())                           # doctest: +SKIP
    """
    return fetch_dataset("mnist", data_home, download_if_missing, quiet)


def fetch_wordnet(data_home: Optional[PathLike] = None, download_if_missing: Optional[bool] = None,
                  quiet: bool = False) -> Path:
    """The folder holding WordNet 3.0's ``data.noun`` etc., unpacked from Debian's
    ``wordnet-base`` package (6.5 MB) downloaded into the data home if needed.

    Arguments and errors: :func:`fetch_dataset`.

    Example:

    >>> from pyro_ar.datasets import fetch_wordnet, load_wordnet_reverse_dictionary
    >>> data = load_wordnet_reverse_dictionary(fetch_wordnet())    # doctest: +SKIP
    """
    return fetch_dataset("wordnet", data_home, download_if_missing, quiet)


def fetch_gcide(data_home: Optional[PathLike] = None, download_if_missing: Optional[bool] = None,
                quiet: bool = False) -> Path:
    """The folder holding GCIDE's ``gcide.index`` and ``gcide.dict.dz``, unpacked from Debian's
    ``dict-gcide`` package (14.8 MB) downloaded into the data home if needed.

    Arguments and errors: :func:`fetch_dataset`.

    Example:

    >>> from pyro_ar.datasets import fetch_gcide, load_gcide_reverse_dictionary
    >>> data = load_gcide_reverse_dictionary(fetch_gcide())        # doctest: +SKIP
    """
    return fetch_dataset("gcide", data_home, download_if_missing, quiet)


def main(argv: Optional[List[str]] = None) -> int:
    """``python -m pyro_ar.datasets.fetch NAME ...``: fetch data sets, print their folders."""
    parser = argparse.ArgumentParser(
        prog="python -m pyro_ar.datasets.fetch", description="Download public data sets into the data home "
        f"(${DATA_ENV_VAR}, else {_common.user_cache_dir()}), checked against pinned SHA-256 digests.",
        epilog="example: python -m pyro_ar.datasets.fetch bibtex mnist")
    parser.add_argument("names", nargs="+", choices=sorted(REMOTE_DATASETS), metavar="NAME",
                        help=f"one of {sorted(REMOTE_DATASETS)}")
    parser.add_argument("--data-home", default=None, help="folder to download into (default: the data home)")
    args = parser.parse_args(argv)
    for name in args.names:
        try:
            folder = fetch_dataset(name, args.data_home, download_if_missing=True)
        except (DownloadError, ChecksumError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"{name}: {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

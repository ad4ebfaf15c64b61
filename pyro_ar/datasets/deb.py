r"""Unpacking a Debian package (``.deb``) in pure Python, as ``dpkg-deb -x`` does.

A ``.deb`` is an ``ar`` archive: the 8-byte magic ``!<arch>\n``, then members, each a
60-byte header (name 16 bytes, modification time 12, owner 6, group 6, mode 8, size 10
decimal ASCII, the two bytes ``` `\n```) followed by ``size`` bytes and one padding byte
when ``size`` is odd. Its members are ``debian-binary``, ``control.tar.*`` and
``data.tar.*``; the files the package installs are in ``data.tar``, compressed with xz,
gzip, zstd (Python >= 3.14's ``compression.zstd``, or the ``zstandard`` package) or not
at all. :func:`extract_deb` writes the regular files and folders of ``data.tar`` below a
folder (links and device files are skipped; a member whose path leaves the folder is an
error), so that ``<folder>/usr/share/wordnet/data.noun`` is where ``dpkg-deb -x`` puts it.
"""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path, PurePosixPath
from typing import Dict, List, Tuple, Union

__all__ = ["read_ar_members", "extract_deb"]

_AR_MAGIC = b"!<arch>\n"
_HEADER = 60


def read_ar_members(path: Union[str, os.PathLike]) -> Dict[str, Tuple[int, int]]:
    """``{member name: (offset of its data, size)}`` of the ``ar`` archive at ``path``.

    Raises:
        ValueError: not an ``ar`` archive, or a header is malformed or runs past the end.

    Example:

    >>> from pyro_ar.datasets.deb import read_ar_members
    >>> sorted(read_ar_members("wordnet-base_3.0-37_all.deb"))        # doctest: +SKIP
    ['control.tar.xz', 'data.tar.xz', 'debian-binary']
    """
    path = Path(path)
    members: Dict[str, Tuple[int, int]] = {}
    end = path.stat().st_size
    with open(path, "rb") as f:
        if f.read(len(_AR_MAGIC)) != _AR_MAGIC:
            raise ValueError(f"{path}: not a Debian package (no '!<arch>' ar header)")
        pos = len(_AR_MAGIC)
        while pos < end:
            f.seek(pos)
            header = f.read(_HEADER)
            if len(header) < _HEADER or header[58:60] != b"`\n":
                raise ValueError(f"{path}: malformed ar member header at byte {pos}")
            name = header[:16].decode("ascii", "replace").strip().rstrip("/")
            try:
                size = int(header[48:58].decode("ascii").strip())
            except ValueError:
                raise ValueError(f"{path}: malformed size of ar member {name!r} at byte {pos}") from None
            start = pos + _HEADER
            if start + size > end:
                raise ValueError(f"{path}: ar member {name!r} runs past the end of the file (truncated?)")
            members[name] = (start, size)
            pos = start + size + (size % 2)
    return members


def _decompress(name: str, data: bytes) -> bytes:
    """The plain tar bytes of a ``data.tar[.xz|.gz|.zst]`` member."""
    if name.endswith(".xz"):
        import lzma

        return lzma.decompress(data)
    if name.endswith(".gz"):
        import gzip

        return gzip.decompress(data)
    if name.endswith(".zst"):
        try:
            from compression import zstd  # Python >= 3.14

            return zstd.decompress(data)
        except ImportError:
            pass
        try:
            import zstandard
        except ImportError:
            raise ValueError(f"{name}: zstd-compressed; unpacking it needs Python >= 3.14 or "
                             "`pip install zstandard`") from None
        return zstandard.ZstdDecompressor().decompressobj().decompress(data)
    if name.endswith(".tar"):
        return data
    raise ValueError(f"{name}: unknown compression of the package's data archive")


def _safe_relative(name: str, where: str) -> PurePosixPath:
    rel = PurePosixPath(name)
    parts = [p for p in rel.parts if p not in ("", ".")]
    if rel.is_absolute() or ".." in parts:
        raise ValueError(f"{where}: member {name!r} points outside the folder to unpack into")
    return PurePosixPath(*parts) if parts else PurePosixPath(".")


def extract_deb(path: Union[str, os.PathLike], dest: Union[str, os.PathLike]) -> List[str]:
    """Unpack the files of the Debian package at ``path`` below ``dest`` (``dpkg-deb -x``).

    Returns:
        The POSIX relative paths of the regular files written, in archive order.

    Raises:
        ValueError: not a Debian package, no ``data.tar.*`` member, an unknown compression,
            a corrupt archive, or a member whose path leaves ``dest``.

    Example:

    >>> from pyro_ar.datasets.deb import extract_deb
    >>> "usr/share/wordnet/data.noun" in extract_deb("wordnet-base_3.0-37_all.deb", "wordnet")  # doctest: +SKIP
    True
    """
    path, dest = Path(path), Path(dest)
    members = read_ar_members(path)
    data_names = [n for n in members if n.startswith("data.tar")]
    if not data_names:
        raise ValueError(f"{path}: no data.tar member (members: {sorted(members)})")
    name = data_names[0]
    start, size = members[name]
    with open(path, "rb") as f:
        f.seek(start)
        raw = f.read(size)
    import lzma
    import zlib

    try:
        archive = tarfile.open(fileobj=io.BytesIO(_decompress(name, raw)), mode="r:")
    except (OSError, EOFError, lzma.LZMAError, zlib.error, tarfile.TarError) as e:  # a corrupt member
        raise ValueError(f"{path}: its {name} is not a readable archive ({e})") from e
    written = []
    with archive:
        for member in archive:
            rel = _safe_relative(member.name, f"{path}:{name}")
            target = dest.joinpath(*rel.parts)
            if member.isdir():
                target.mkdir(parents=True, exist_ok=True)
            elif member.isreg():
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.extractfile(member) as src, open(target, "wb") as out:
                    out.write(src.read())
                written.append(rel.as_posix())
    return written

r"""Dictionaries in the dictd format; GCIDE's reverse dictionary: :func:`load_gcide_reverse_dictionary`.

A dictd database is two files: ``<name>.dict.dz`` (the articles, concatenated, compressed by
dictzip -- a gzip file, so Python's ``gzip`` reads it) and ``<name>.index``, one line per headword
``headword<TAB>offset<TAB>length`` with the byte offset and length of its article in the
uncompressed text written in base 64 (digits ``A-Za-z0-9+/``, most significant first).
:func:`read_dictd` returns the articles.

**GCIDE** (the GNU Collaborative International Dictionary of English, Debian's
``dict-gcide``; GPL) is Webster's Revised Unabridged Dictionary of 1913 with later additions
and part of WordNet 1.5. Its reverse dictionary (:func:`read_gcide_senses`):

* an article holds one or more *blocks*, each starting at column 0 with the headword and its
  spelling in backslashes (``Bank \Bank\ (b[a^][ng]k), n. [etymology] ...``); the word of a
  block is the text before the first backslash, lower-cased;
* a block's paragraphs are separated by blank lines. A **sense** is a numbered paragraph
  (``   2. A steep acclivity ...``) or, in the block's first paragraph, the text after the
  header (the first line plus the lines that continue it: inside an open ``[`` bracket, or
  not starting with a capital letter, a digit or ``(``) -- the whole definition of a block
  with one sense, or its sense 1;
* other paragraphs are left out: quotations, phrases defined inside the block (``{Bank
  swallow}, a ...``: they define other words), synonyms, notes, and every paragraph whose
  source tag names WordNet (so that this task shares no glosses with
  :func:`~pyro_ar.datasets.load_wordnet_reverse_dictionary`);
* in a sense, the lines of source tags (``[1913 Webster]``) and the citations (``--Shak.``)
  are removed, and GCIDE's accent markup is reduced to plain letters
  (``a["e]roplane`` -> ``aeroplane``, ``[imac]`` -> ``i``).

Getting the files: :func:`pyro_ar.datasets.fetch_gcide` downloads Debian's package into the data
home, checks its pinned SHA-256 and unpacks it there (the loader then finds it with no
``path=``); or by hand, on any machine::

    apt-get download dict-gcide && dpkg-deb -x dict-gcide_*.deb gcide

and pass ``path="gcide"`` (the extracted folder, or its ``usr/share/dictd`` folder).
"""

from __future__ import annotations

import gzip
import re
import zlib
from pathlib import Path
from typing import List, Optional, Tuple

from ._common import DATA_ENV_VAR, Dataset, PathLike, _dataset_dir
from .reverse_dictionary import make_reverse_dictionary

__all__ = ["read_dictd", "read_gcide_senses", "load_gcide_reverse_dictionary"]

_B64 = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}
_ACCENT = re.compile(r"\[[\"'`=~.^,-]?([a-z]{1,2})[\"'`=~.^,-]?\]")
_NAMED = {"[imac]": "i", "[aum]": "a", "[eth]": "th", "[thorn]": "th", "[ng]": "ng", "[asl]": "a"}
_NUMBERED = re.compile(r"^ {3}(\d+)\.\s+")
#: a line starting with a source tag ([1913 Webster], [PJC], [WordNet 1.5 +PJC]); a few carry more text
_TAG = re.compile(r"^\s*\[(?:[^\]]*\b(?:Webster|WordNet|PJC|Century)\b[^\]]*|[A-Z]{2,4}(?: ?\+ ?[A-Z]{2,4})*)\]")
_CITATION = re.compile(r"--\S.*$")


def _b64(s: str, where: str) -> int:
    try:
        value = 0
        for c in s:
            value = value * 64 + _B64[c]
        return value
    except KeyError:
        raise ValueError(f"{where}: {s!r} is not a dictd base-64 number") from None


def _lines(f, path):
    """``enumerate`` from 1 of the lines of a binary file decoded as UTF-8, a line that is not
    UTF-8 raising ``ValueError`` naming the file and the line."""
    for lineno, raw in enumerate(f, 1):
        try:
            yield lineno, raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"read_dictd: {path}:{lineno} is not UTF-8 text ({e.reason} at byte {e.start} of "
                             f"the line): is it a dictd index?") from None


def read_dictd(index: PathLike, data: PathLike) -> List[Tuple[str, str]]:
    """The (headword, article) pairs of a dictd database, in index order.

    Args:
        index: the ``.index`` file.
        data: the ``.dict.dz`` (or uncompressed ``.dict``) file.

    Example:

    >>> from pyro_ar.datasets import read_dictd
    >>> read_dictd("gcide.index", "gcide.dict.dz")[:1]          # doctest: +SKIP
    [('0', '0 \\\\0\\\\ ...')]
    """
    data = Path(data)
    opener = gzip.open if data.suffix == ".dz" else open
    try:
        with opener(data, "rb") as f:
            text = f.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"read_dictd: {data} is not a whole dictzip (gzip) file -- truncated or not "
                         f"compressed ({type(e).__name__}: {e}); download or extract it again") from None
    out = []
    with open(index, "rb") as f:
        for lineno, line in _lines(f, index):
            fields = line.rstrip("\r\n").split("\t")
            where = f"{index}:{lineno}"
            if len(fields) < 3:
                raise ValueError(f"{where}: not a dictd index line 'headword<TAB>offset<TAB>length': {line!r}")
            start, length = _b64(fields[1], where), _b64(fields[2], where)
            if start + length > len(text):
                raise ValueError(f"{where}: article [{start}, {start + length}) beyond the end of {data} "
                                 f"({len(text)} bytes)")
            out.append((fields[0], text[start:start + length].decode("utf-8", errors="replace")))
    return out


def _plain(s: str) -> str:
    """GCIDE's accent markup as plain letters."""
    for k, v in _NAMED.items():
        s = s.replace(k, v)
    return _ACCENT.sub(r"\1", s)


def _header_lines(lines: List[str]) -> int:
    """How many lines of a block's first paragraph are its header (see the module's text)."""
    depth = lines[0].count("[") - lines[0].count("]")
    n = 1
    while n < len(lines):
        s = lines[n].strip()
        if depth <= 0 and (s[:1].isupper() or s[:1].isdigit() or s[:1] == "("):
            break
        depth += s.count("[") - s.count("]")
        n += 1
    return n


def _sense_text(lines: List[str]) -> str:
    """The definition of a sense paragraph: tags, citations and quotations removed."""
    kept = [_CITATION.sub("", ln) for ln in lines if not _TAG.match(ln)]
    text = " ".join(s.strip() for s in kept if s.strip())
    return _plain(_NUMBERED.sub("", "   " + text)).strip()


def _block_senses(block: str) -> List[str]:
    paragraphs = [p.split("\n") for p in re.split(r"\n[ \t]*\n", block) if p.strip()]
    senses = []
    for i, lines in enumerate(paragraphs):
        if any(_TAG.match(ln) and "wordnet" in ln.lower() for ln in lines):
            continue
        if i == 0:
            lines = lines[_header_lines(lines):]
        elif not _NUMBERED.match(lines[0]):
            continue  # quotation, {phrase}, synonyms, note
        text = _sense_text(lines) if lines else ""
        if re.search(r"[A-Za-z]", text):
            senses.append(text)
    return senses


def read_gcide_senses(path: Optional[PathLike] = None) -> List[Tuple[str, str]]:
    """Every (word, sense) pair of GCIDE (see the module's text), in index order.

    Articles listed under several headwords are read once; the ``00-database-*`` entries are
    skipped.

    Example:

    >>> from pyro_ar.datasets import read_gcide_senses
    >>> [s for w, s in read_gcide_senses("gcide") if w == "abacus"][1]      # doctest: +SKIP
    'A calculating table or frame; an instrument for performing arithmetical calculations by ...'
    """
    folder = _gcide_folder(path)
    pairs: List[Tuple[str, str]] = []
    seen = set()
    for head, article in read_dictd(folder / "gcide.index", folder / "gcide.dict.dz"):
        if head.startswith("00-") or article in seen:
            continue
        seen.add(article)
        for block in re.split(r"\n(?=\S[^\n\\]*\\)", "\n" + article):
            block = block.strip("\n")
            if "\\" not in block.split("\n", 1)[0]:
                continue
            word = _plain(block.split("\\", 1)[0]).strip().lower()
            pairs.extend((word, s) for s in _block_senses(block))
    return pairs


def _gcide_folder(path: Optional[PathLike], caller: str = "load_gcide_reverse_dictionary") -> Path:
    """The folder holding ``gcide.index`` and ``gcide.dict.dz`` (``path``, its ``usr/share/dictd``,
    or ``<data root>/gcide``); ``FileNotFoundError`` naming ``caller`` and how to get them."""
    root = _dataset_dir(path, "gcide")
    for folder in (root, root / "usr" / "share" / "dictd"):
        if (folder / "gcide.index").is_file() and (folder / "gcide.dict.dz").is_file():
            return folder
    raise FileNotFoundError(
        f"{caller}: no 'gcide.index' and 'gcide.dict.dz' in {root} or in "
        f"{root / 'usr' / 'share' / 'dictd'}. Call pyro_ar.datasets.fetch_gcide() (downloads and unpacks it into "
        "the data home), or extract Debian's dict-gcide package (apt-get download "
        f"dict-gcide; dpkg-deb -x dict-gcide_*.deb <folder>) and pass path=<folder>, or set {DATA_ENV_VAR} "
        "to a root holding 'gcide/'.")


def load_gcide_reverse_dictionary(path: Optional[PathLike] = None, *, min_glosses: int = 2, holdout_min: int = 3,
                                  min_count: int = 2, seed: int = 0) -> Dataset:
    r"""GCIDE's reverse dictionary: predict a word from one of its senses' definitions.

    The pairs of :func:`read_gcide_senses` through
    :func:`~pyro_ar.datasets.make_reverse_dictionary` with the same rules as WordNet's
    (:func:`~pyro_ar.datasets.load_wordnet_reverse_dictionary`): words with >= 2 senses,
    one random sense of each word with >= 3 held out for test, the binary bag of the
    ``[a-z]+`` tokens found in >= 2 training senses, rows L2-normalised.

    Args:
        path: the extracted ``dict-gcide`` folder (holding ``usr/share/dictd/gcide.index``),
            or the folder holding ``gcide.index`` and ``gcide.dict.dz``; default
            ``<data root>/gcide``.
        min_glosses, holdout_min, min_count, seed: as in
            :func:`~pyro_ar.datasets.make_reverse_dictionary`.

    Returns:
        :class:`Dataset` as :func:`~pyro_ar.datasets.make_reverse_dictionary`'s, with
        ``info["name"] = "gcide-reverse-dictionary"`` and ``info["path"]``.

    Example:

    >>> from pyro_ar.datasets import load_gcide_reverse_dictionary
    >>> d = load_gcide_reverse_dictionary("/work/data/gcide")       # doctest: +SKIP
    """
    folder = _gcide_folder(path)
    return make_reverse_dictionary(read_gcide_senses(folder), min_glosses=min_glosses, holdout_min=holdout_min,
                                   min_count=min_count, seed=seed,
                                   info=dict(name="gcide-reverse-dictionary", path=str(folder)))

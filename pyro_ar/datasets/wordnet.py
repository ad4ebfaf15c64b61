r"""WordNet's data files: :func:`load_wordnet_reverse_dictionary` (gloss -> word).

WordNet 3.0 (Princeton University; the Debian package ``wordnet-base``) lists its synsets in
``data.noun``, ``data.verb``, ``data.adj`` and ``data.adv``. After a license header (lines
starting with two spaces) each line is one synset::

    00002137 03 n 02 abstraction 0 abstract_entity 0 010 @ 00001740 n 0000 ... | a general concept ...

the fields being the byte offset, the lexicographer file, the part of speech, the number of
words (two hex digits), that many ``word lex_id`` pairs, then pointers and (verbs) frames, and
after ``" | "`` the gloss: the definition, often followed by quoted example sentences. Every
word of a synset paired with the synset's gloss gives the reverse-dictionary task of
:func:`~pyro_ar.datasets.make_reverse_dictionary`.

Getting the files: :func:`pyro_ar.datasets.fetch_wordnet` downloads Debian's package into the data
home, checks its pinned SHA-256 and unpacks it there (the loader then finds it with no
``path=``); or by hand, on any machine::

    apt-get download wordnet-base && dpkg-deb -x wordnet-base_*.deb wordnet

and pass ``path="wordnet"`` (the extracted folder, or its ``usr/share/wordnet`` folder).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional, Tuple

from ._common import DATA_ENV_VAR, Dataset, PathLike, _dataset_dir
from .reverse_dictionary import make_reverse_dictionary

__all__ = ["load_wordnet_reverse_dictionary", "read_wordnet_glosses", "WORDNET_FILES"]

#: the synset files, in the order their pairs are read
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")

#: the adjective position markers of data.adj (``galore(ip)``: "immediately postnominal")
_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def _wordnet_folder(path: Optional[PathLike]) -> Path:
    """The folder holding data.noun: ``path`` itself or its ``usr/share/wordnet``."""
    root = _dataset_dir(path, "wordnet")
    for folder in (root, root / "usr" / "share" / "wordnet"):
        if (folder / WORDNET_FILES[0]).is_file():
            return folder
    raise FileNotFoundError(
        f"load_wordnet_reverse_dictionary: no '{WORDNET_FILES[0]}' in {root} or in "
        f"{root / 'usr' / 'share' / 'wordnet'}. Call pyro_ar.datasets.fetch_wordnet() (downloads and unpacks it "
        "into the data home), or extract Debian's wordnet-base package "
        "(apt-get download wordnet-base; dpkg-deb -x wordnet-base_*.deb <folder>) and pass "
        f"path=<folder>, or set {DATA_ENV_VAR} to a root holding 'wordnet/'.")


def _synset(line: str, where: str, clean: bool) -> Tuple[List[str], str]:
    """(words, gloss) of one data line: words lower-cased, underscores as spaces."""
    head, sep, gloss = line.partition(" | ")
    fields = head.split()
    try:
        n = int(fields[3], 16)
        words = [fields[4 + 2 * i] for i in range(n)]
    except (IndexError, ValueError):
        raise ValueError(f"{where}: not a WordNet synset line (offset, lex file, pos, hex word "
                         f"count, words ...): {line[:80]!r}") from None
    if not sep or n == 0:
        raise ValueError(f"{where}: synset line without words or without a ' | ' gloss: {line[:80]!r}")
    words = [w.lower().replace("_", " ") for w in words]
    if clean:
        words = list(dict.fromkeys(_MARKER.sub("", w) for w in words))
    return words, gloss.strip()


def read_wordnet_glosses(path: Optional[PathLike] = None, clean: bool = False) -> List[Tuple[str, str]]:
    """Every (word, gloss) pair of every synset of ``data.{noun,verb,adj,adv}``, in file order.

    Words are lower-cased with underscores as spaces (``physical entity``). With
    ``clean=False`` (the issue's task) a word keeps data.adj's position marker
    (``galore(ip)`` is not ``galore``) and a word listed twice in a synset once lower-cased
    gives two pairs; ``clean=True`` strips the markers and keeps one pair per word and synset.

    Example:

    >>> from pyro_ar.datasets import read_wordnet_glosses
    >>> read_wordnet_glosses("/usr/share/wordnet")[1]                   # doctest: +SKIP
    ('physical entity', 'an entity that has physical existence')
    """
    folder = _wordnet_folder(path)
    pairs: List[Tuple[str, str]] = []
    for name in WORDNET_FILES:
        p = folder / name
        if not p.is_file():
            raise FileNotFoundError(f"read_wordnet_glosses: file '{name}' not found in {folder}")
        with open(p, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if line.startswith("  ") or not line.strip():  # the license header
                    continue
                words, gloss = _synset(line.rstrip("\n"), f"{p}:{lineno}", clean)
                pairs.extend((w, gloss) for w in words)
    return pairs


def load_wordnet_reverse_dictionary(path: Optional[PathLike] = None, *, clean: bool = False, min_glosses: int = 2,
                                    holdout_min: int = 3, min_count: int = 2, seed: int = 0) -> Dataset:
    r"""WordNet 3.0's reverse dictionary: predict a word from the gloss of one of its synsets.

    The pairs of :func:`read_wordnet_glosses` (words lower-cased, underscores as spaces; the
    gloss is everything after ``" | "``, examples included) through
    :func:`~pyro_ar.datasets.make_reverse_dictionary`: words with >= 2 glosses, one random
    gloss of each word with >= 3 held out for test (``seed`` 0), the binary bag of the
    ``[a-z]+`` tokens found in >= 2 training glosses, rows L2-normalised.

    With the defaults on the Debian package ``wordnet-base`` 1:3.0-37: K = 26,793 classes,
    74,868 training and 11,097 test rows, D = 27,000 features (the vocabulary depends on the
    held-out draw: other seeds give 26,984 -- 27,036), 12.3 non-zeros per training row.
    A synset's gloss is shared by its words: 51% of the test rows have more than one
    correct word (``info["test_label_sets"]``), and 47% of the test glosses occur verbatim
    among the training rows, labelled with a synonym -- so top-1 accuracy against the one
    held-out word is capped well below 1 for any method; precision at k over the label
    sets counts the synonyms as correct.

    Args:
        path: the extracted package folder (holding ``usr/share/wordnet/data.noun``), or the
            folder holding ``data.noun``; default ``<data root>/wordnet``.
        clean: strip data.adj's position markers and count a word once per synset
            (:func:`read_wordnet_glosses`); K = 26,873 then. Default False: the issue's task.
        min_glosses, holdout_min, min_count, seed: as in
            :func:`~pyro_ar.datasets.make_reverse_dictionary`.

    Returns:
        :class:`Dataset` as :func:`~pyro_ar.datasets.make_reverse_dictionary`'s, with
        ``info["name"] = "wordnet-reverse-dictionary"``, ``info["path"]`` and ``info["clean"]``.

    Example:

    >>> from pyro_ar.datasets import load_wordnet_reverse_dictionary, to_scipy_csr
    >>> d = load_wordnet_reverse_dictionary("/work/data/wordnet")       # doctest: +SKIP
    >>> d.num_classes, d.num_features, d.num_train, d.num_test          # doctest: +SKIP
    (26793, 27000, 74868, 11097)
    >>> X = to_scipy_csr(d.x_train)          # ARClassifier's sparse input  # doctest: +SKIP
    """
    folder = _wordnet_folder(path)
    return make_reverse_dictionary(read_wordnet_glosses(folder, clean=clean), min_glosses=min_glosses,
                                   holdout_min=holdout_min, min_count=min_count, seed=seed,
                                   info=dict(name="wordnet-reverse-dictionary", path=str(folder), clean=clean))

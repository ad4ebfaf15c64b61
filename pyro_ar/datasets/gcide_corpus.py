r"""GCIDE as a text corpus with a vocabulary of :math:`10^5` words: :func:`load_gcide_corpus`.

The GNU Collaborative International Dictionary of English (Debian's ``dict-gcide``, GPL;
Webster's 1913 dictionary with later additions, read by :func:`~pyro_ar.datasets.read_dictd`
from its dictd files, see :mod:`~pyro_ar.datasets.dictd`) is about 40 MB of English prose --
definitions, etymologies, quotations. As next-word prediction it is a categorical over about
:math:`10^5` words: the regime where the exact softmax is out of reach on a CPU.

Recipe (:func:`read_gcide_paragraphs`, then :func:`~pyro_ar.datasets.text.bigram_corpus`):

* the articles in index order (alphabetical), each read once (an article listed under several
  headwords is not repeated), the ``00-database-*`` entries (the licence text) left out;
* **markup** (``markup="strip"``, the default): the headword's spelling and pronunciation
  (``Bank \Bank\ (b[a^][ng]k), n.`` -> ``Bank, n.``) and the source tags (``[1913 Webster]``,
  ``[WordNet 1.5 +PJC]``, ``[PJC]``) are removed and the accent markup is reduced to plain
  letters (``a["e]roplane`` -> ``aeroplane``); the rest -- the part of speech, etymologies,
  definitions, quotations and their citations, usage labels such as ``[Obs.]`` -- is the
  text. The source tags are the file's bookkeeping, not English: kept (``markup="keep"``,
  the raw article text), ``webster`` is the third most frequent word (after *a* and *the*)
  and the previous word of 78 % of the training paragraph ends, an easy guess that flatters
  every model;
* a **sentence** is a paragraph (text between blank lines: a numbered sense, a quotation, a
  note), cut into lowercase tokens ``[a-z]+('[a-z]+)?`` (punctuation and digits dropped);
  its pairs are :math:`(\langle s\rangle, w_1), \dots, (w_n, \langle s\rangle)`, as for
  Brown (:func:`~pyro_ar.datasets.load_brown`);
* **split**: sequential, by paragraphs in index order -- the first 90 % of the word tokens
  for training (*0* to *Swedish*), the next 5 % for validation (to *Ulula*), the last 5 %
  for test (*Ulula* to *Zythepsary*);
* **vocabulary**: ``<unk>``, ``<s>`` and the words seen at least twice in the *training*
  paragraphs (``min_count``), by decreasing count.

Statistics of Debian's ``dict-gcide`` (GCIDE 0.48), printed by ``python -m
pyro_ar.datasets.gcide_corpus /work/xdata/gcide`` (word tokens, ``<s>`` not counted; K with
``<unk>`` and ``<s>``; test unknowns as a fraction of the test *word* tokens; the unigram
log-likelihood per test pair, boundary targets included, of the smoothed training
frequencies :math:`(c_k + 1/2) / \sum_j (c_j + 1/2)`):

==================  ==========  =========  ===============  =====================  ==========================
markup              tokens      K          test ``<unk>``   unigram test log-lik   train / valid / test pairs
==================  ==========  =========  ===============  =====================  ==========================
``"strip"``          4,669,402    95,659    7.31 %           -6.967                 4,430,639 / 245,585 / 248,941
``"keep"``           5,402,733   100,128    6.92 %           -7.045                 5,088,473 / 282,155 / 284,837
==================  ==========  =========  ===============  =====================  ==========================

The issue that asked for this corpus quoted 5.40M tokens, K = 109,036, 1.9 % unknowns and a
unigram log-likelihood of -7.596: the raw ``.dict`` text in its byte order, split by tokens,
with the vocabulary counted over the *whole* corpus -- test included, which leaks the test
words into the classes (that recipe gives exactly those numbers; with the vocabulary from
its first 90 % of tokens it gives K = 100,594 and 4.8 % unknowns). Here the vocabulary comes
from the training split only, and the test split is the end of the alphabet, whose rare
words are more often unknown.

Getting the files (nothing is downloaded by the library)::

    apt-get download dict-gcide && dpkg-deb -x dict-gcide_*.deb gcide
"""

from __future__ import annotations

import re
import sys
from typing import List, Optional, Tuple

import numpy as np

from ._common import Dataset, PathLike
from .dictd import _TAG, _gcide_folder, _plain, read_dictd
from .text import Vocabulary, bigram_corpus

__all__ = ["load_gcide_corpus", "read_gcide_paragraphs", "MARKUP"]

#: the two treatments of the dictionary's markup (see the module's text)
MARKUP = ("strip", "keep")
_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)?")
#: a headword's spelling in backslashes and the pronunciation in parentheses right after it
_SPELLING = re.compile(r"\\[^\\\n]*\\(?:\s*\([^()\n]*\))?")
_SOURCE_TAG = re.compile(_TAG.pattern.replace(r"^\s*", r"[ \t]*"), re.M)
_PARAGRAPH = re.compile(r"\n[ \t]*\n")


def _strip_markup(article: str) -> str:
    """An article without its headwords' spellings, its source tags and its accent markup."""
    return _plain(_SOURCE_TAG.sub("", _SPELLING.sub("", article)))


def read_gcide_paragraphs(path: Optional[PathLike] = None, markup: str = "strip") -> List[List[str]]:
    """GCIDE's paragraphs as lists of lowercase word tokens, in index order (see the module's text).

    Args:
        path: the extracted ``dict-gcide`` folder or the folder of ``gcide.index`` and
            ``gcide.dict.dz`` (default ``<data root>/gcide``).
        markup: ``"strip"`` (spellings, pronunciations, source tags and accent markup
            removed) or ``"keep"`` (the raw article text).

    Example:

    >>> from pyro_ar.datasets import read_gcide_paragraphs
    >>> read_gcide_paragraphs("gcide")[1]                       # doctest: +SKIP
    ['adj']
    """
    if markup not in MARKUP:
        raise ValueError(f"read_gcide_paragraphs: markup must be one of {MARKUP}, got {markup!r}")
    folder = _gcide_folder(path, "load_gcide_corpus")
    seen = set()
    paragraphs: List[List[str]] = []
    for head, article in read_dictd(folder / "gcide.index", folder / "gcide.dict.dz"):
        if head.startswith("00-") or article in seen:
            continue
        seen.add(article)
        text = (_strip_markup(article) if markup == "strip" else article).lower()
        for paragraph in _PARAGRAPH.split(text):
            tokens = _TOKEN.findall(paragraph)
            if tokens:
                paragraphs.append(tokens)
    return paragraphs


def sequential_split(paragraphs: List[List[str]], valid_fraction: float, test_fraction: float) -> dict:
    """``{"train", "valid", "test"}`` paragraphs in order: the cuts are the first paragraph
    boundaries after ``1 - valid - test`` and ``1 - test`` of the word tokens."""
    if not (valid_fraction >= 0 and test_fraction > 0 and valid_fraction + test_fraction < 1):
        raise ValueError(f"load_gcide_corpus: need valid_fraction >= 0, test_fraction > 0 and their sum < 1, "
                         f"got valid_fraction={valid_fraction}, test_fraction={test_fraction}")
    ends = np.cumsum([len(p) for p in paragraphs])
    total = int(ends[-1]) if len(ends) else 0
    a, b = (int(np.searchsorted(ends, f * total)) + 1 for f in (1 - valid_fraction - test_fraction, 1 - test_fraction))
    if not 0 < a <= b < len(paragraphs):
        raise ValueError(f"load_gcide_corpus: {len(paragraphs)} paragraphs ({total} tokens) are too few for "
                         f"a {valid_fraction:g} / {test_fraction:g} validation / test split")
    splits = {"train": paragraphs[:a], "test": paragraphs[b:]}
    if b > a:
        splits["valid"] = paragraphs[a:b]
    return splits


def load_gcide_corpus(path: Optional[PathLike] = None, *, markup: str = "strip", min_count: int = 2,
                      valid_fraction: float = 0.05, test_fraction: float = 0.05) -> Tuple[Dataset, Vocabulary]:
    r"""GCIDE's text as bigram pairs (previous word, next word), K of about :math:`10^5`.

    The recipe and its statistics are in the module's text: paragraphs as sentences,
    lowercase ``[a-z]+('[a-z]+)?`` tokens, a sequential 90 / 5 / 5 split by tokens, the
    vocabulary from the training split (``min_count``), ``markup`` stripped by default.

    Args:
        path: the extracted ``dict-gcide`` folder (holding ``usr/share/dictd/gcide.index``),
            or the folder holding ``gcide.index`` and ``gcide.dict.dz``; default
            ``<data root>/gcide``.
        markup: ``"strip"`` or ``"keep"`` (:func:`read_gcide_paragraphs`).
        min_count: minimum training count for a word to get its own class.
        valid_fraction, test_fraction: fractions of the word tokens in the validation and
            test splits (the last ones, in that order).

    Returns:
        ``(data, vocab)`` as :func:`~pyro_ar.datasets.load_text_corpus`'s: int64 ids ``x_*``
        (previous word) and ``y_*`` (next word), validation pairs in ``info["x_valid"]`` /
        ``info["y_valid"]``; ``info`` also holds ``num_<split>_tokens`` (word tokens),
        ``test_unk_rate`` (the fraction of test word tokens that are ``<unk>``) and
        ``markup``.

    Example:

    >>> from pyro_ar.datasets import load_gcide_corpus
    >>> data, vocab = load_gcide_corpus("/work/xdata/gcide")     # doctest: +SKIP
    >>> data.num_classes, vocab.words[2:6]                      # doctest: +SKIP
    (95659, ['a', 'the', 'of', 'to'])
    """
    if min_count < 1:
        raise ValueError(f"load_gcide_corpus: min_count must be >= 1, got {min_count}")
    folder = _gcide_folder(path, "load_gcide_corpus")
    splits = sequential_split(read_gcide_paragraphs(folder, markup), valid_fraction, test_fraction)
    data, vocab = bigram_corpus(splits, min_count, {
        "name": "gcide", "source": str(folder), "markup": markup,
        "preprocessing": f"GCIDE articles in index order, markup {markup!r}; paragraphs as sentences; "
                         f"lowercase [a-z]+('[a-z]+)? tokens; sequential split by tokens "
                         f"({1 - valid_fraction - test_fraction:.0%} / {valid_fraction:.0%} / {test_fraction:.0%}); "
                         f"vocab = <unk>, <s>, training words with count >= {min_count}"}, loader="load_gcide_corpus")
    unk_words = int((data.y_test == vocab.unk_id).sum())
    data.info["test_unk_rate"] = unk_words / max(data.info["num_test_tokens"], 1)
    return data, vocab


def _statistics(path: Optional[str]) -> None:
    """Print the table of the module's text (``python -m pyro_ar.datasets.gcide_corpus [PATH]``)."""
    for markup in MARKUP:
        data, vocab = load_gcide_corpus(path, markup=markup)
        c = vocab.counts.double() + 0.5
        unigram = float((c / c.sum()).log()[data.y_test].mean())
        tokens = sum(data.info[f"num_{s}_tokens"] for s in ("train", "valid", "test"))
        print(f"markup={markup!r}: {tokens:,} tokens, K = {data.num_classes:,}, test <unk> "
              f"{data.info['test_unk_rate']:.2%} of the word tokens, unigram test log-lik "
              f"{unigram:.3f} per pair ({data.num_train:,} / {data.info['x_valid'].shape[0]:,} / "
              f"{data.num_test:,} pairs)")


if __name__ == "__main__":
    _statistics(sys.argv[1] if len(sys.argv) > 1 else None)

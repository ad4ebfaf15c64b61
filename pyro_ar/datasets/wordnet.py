r"""WordNet's data files: :func:`load_wordnet_reverse_dictionary` (gloss -> word) and
:func:`load_wordnet_synsets` (gloss -> the synset's words, multi-label).

WordNet 3.0 (Princeton University; the Debian package ``wordnet-base``) lists its synsets in
``data.noun``, ``data.verb``, ``data.adj`` and ``data.adv``. After a license header (lines
starting with two spaces) each line is one synset::

    00002137 03 n 02 abstraction 0 abstract_entity 0 010 @ 00001740 n 0000 ... | a general concept ...

the fields being the byte offset, the lexicographer file, the part of speech, the number of
words (two hex digits), that many ``word lex_id`` pairs, then pointers and (verbs) frames, and
after ``" | "`` the gloss: the definition, often followed by quoted example sentences. Every
word of a synset paired with the synset's gloss gives the reverse-dictionary task of
:func:`~pyro_ar.datasets.make_reverse_dictionary`; every synset with all its words as labels
the multi-label task of :func:`load_wordnet_synsets`.

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

import numpy as np
import torch

from ..numerics import check_int
from ._common import DATA_ENV_VAR, Dataset, PathLike, _dataset_dir
from .multilabel import label_indicator, labels_per_row
from .reverse_dictionary import _gloss_feature_info, gloss_features, make_reverse_dictionary

__all__ = ["load_wordnet_reverse_dictionary", "load_wordnet_synsets", "read_wordnet_glosses", "WORDNET_FILES"]

#: the synset files, in the order their pairs are read
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")

#: the adjective position markers of data.adj (``galore(ip)``: "immediately postnominal")
_MARKER = re.compile(r"\((?:a|p|ip)\)$")


def _wordnet_folder(path: Optional[PathLike], caller: str = "load_wordnet_reverse_dictionary") -> Path:
    """The folder holding data.noun: ``path`` itself or its ``usr/share/wordnet``."""
    root = _dataset_dir(path, "wordnet")
    for folder in (root, root / "usr" / "share" / "wordnet"):
        if (folder / WORDNET_FILES[0]).is_file():
            return folder
    raise FileNotFoundError(
        f"{caller}: no '{WORDNET_FILES[0]}' in {root} or in "
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
    return [(w, gloss) for words, gloss in _read_synsets(_wordnet_folder(path), clean, "read_wordnet_glosses")
            for w in words]


def _read_synsets(folder: Path, clean: bool, caller: str) -> List[Tuple[List[str], str]]:
    """(words, gloss) of every synset of ``data.{noun,verb,adj,adv}`` in ``folder``, in file order."""
    synsets: List[Tuple[List[str], str]] = []
    for name in WORDNET_FILES:
        p = folder / name
        if not p.is_file():
            raise FileNotFoundError(f"{caller}: file '{name}' not found in {folder}")
        with open(p, encoding="utf-8", errors="replace") as f:
            for lineno, line in enumerate(f, 1):
                if line.startswith("  ") or not line.strip():  # the license header
                    continue
                synsets.append(_synset(line.rstrip("\n"), f"{p}:{lineno}", clean))
    return synsets


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


def _split_synsets(num: int, test_fraction: float, seed: int) -> np.ndarray:
    """Boolean test mask: ``round(test_fraction * num)`` synsets drawn without replacement."""
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, (int, float)) or not 0 < test_fraction < 1:
        raise ValueError(f"load_wordnet_synsets: test_fraction must be a number in (0, 1), got "
                         f"test_fraction={test_fraction!r}")
    test = np.zeros(num, dtype=bool)
    test[np.random.default_rng(seed).permutation(num)[: int(round(test_fraction * num))]] = True
    return test


def _synset_labels(train_words: List[List[str]], test_words: List[List[str]]):
    """``(classes, y_train, y_test)``: the sorted training words and both indicators over them
    (a test row keeps its words among the classes)."""
    classes = sorted({w for words in train_words for w in words})
    column = {w: k for k, w in enumerate(classes)}
    y_train = label_indicator([[column[w] for w in words] for words in train_words], len(classes))
    y_test = label_indicator([[column[w] for w in words if w in column] for words in test_words], len(classes))
    return classes, y_train, y_test


def load_wordnet_synsets(path: Optional[PathLike] = None, *, test_fraction: float = 0.2, min_count: int = 2,
                         seed: int = 0, drop_unseen_test: bool = True, clean: bool = False) -> Dataset:
    r"""WordNet 3.0's synsets as a multi-label task: predict a synset's words from its gloss.

    One row per synset of ``data.{noun,verb,adj,adv}`` (in file order within each split); its
    labels are the synset's words (lemmas), normalised as :func:`read_wordnet_glosses` does
    (lower-cased, underscores as spaces; ``clean`` as there), a word listed twice counted
    once. A random ``test_fraction`` of the synsets (``round(test_fraction * N)`` of
    ``numpy.random.default_rng(seed).permutation(N)``) is the test split. The K classes are
    the words of the *training* synsets, sorted; a test row keeps its words among them (the
    others cannot be predicted; ``info["test_labels_unseen"]`` counts them), and a test row
    left with none is dropped unless ``drop_unseen_test=False`` (its label set is then
    empty, which the ranking metrics score 0). The features are the binary bag of the gloss's
    ``[a-z]+`` tokens found in at least ``min_count`` training glosses, rows L2-normalised
    (:func:`~pyro_ar.datasets.gloss_features`, as for
    :func:`~pyro_ar.datasets.make_reverse_dictionary`).

    With the defaults on the Debian package ``wordnet-base`` 1:3.0-37 (checked by
    ``tests/datasets/test_wordnet_synsets.py`` when the data are present): 117,659
    synsets, 94,127 training rows; of the 23,532 test synsets, 11,123 (47.3 %) have a word
    seen in training and are kept. K = 122,929 words, D = 30,045 features (11.1 non-zeros
    per training row; 157 training glosses have none). Labels per row: 1.76 in training (1
    to 28), 1.41 in the kept test rows (of the test synsets' 41,305 words, 15,679 are among
    the K). Rows per label: 1.35 on average, 83.2 % of the labels in one training synset
    only, the most frequent (``"break"``) in 57 -- the tail-heavy regime of extreme
    classification. ``clean=True``: K = 122,549, 11,178 test rows.

    Args:
        path: as :func:`load_wordnet_reverse_dictionary`.
        test_fraction: the share of synsets in the test split, in (0, 1).
        min_count: a token enters the vocabulary if it occurs in at least this many training
            glosses (>= 1).
        seed: seed of the split.
        drop_unseen_test: drop the test rows with no word seen in training (default True).
        clean: as :func:`read_wordnet_glosses` (strip data.adj's position markers).

    Returns:
        A multi-label :class:`Dataset` (:mod:`~pyro_ar.datasets.multilabel`): ``x_*`` coalesced
        torch sparse COO float32 ``(N, D)`` (:func:`~pyro_ar.datasets.to_scipy_csr` for
        :class:`~pyro_ar.ARClassifier`), ``y_*`` scipy CSR float32 0/1 ``(N, K)``,
        ``class_names`` the K words. ``info``: ``name`` (``"wordnet-synsets"``), ``path``,
        ``multilabel`` (True), ``feature_names``, ``num_features``, ``mean_nnz_train``,
        ``train_rows`` / ``test_rows`` (the rows' synset positions in file order),
        ``num_synsets``, ``unseen_test_mask`` (bool tensor over all test synsets),
        ``num_unseen_test``, ``unseen_test_dropped``, ``test_labels_unseen``,
        ``mean_labels_per_row`` (per split), ``rows_per_label`` (training rows per class),
        ``empty_train_rows`` / ``empty_test_rows`` (glosses without a vocabulary token),
        ``test_fraction``, ``min_count``, ``seed``, ``clean`` and ``preprocessing``.

    Example:

    >>> from pyro_ar.datasets import load_wordnet_synsets
    >>> d = load_wordnet_synsets("/work/data/wordnet")                  # doctest: +SKIP
    >>> d.num_classes, d.num_features, d.num_train, d.num_test          # doctest: +SKIP
    (122929, 30045, 94127, 11123)
    """
    min_count = check_int("min_count", min_count, low=1)
    folder = _wordnet_folder(path, "load_wordnet_synsets")
    synsets = _read_synsets(folder, clean, "load_wordnet_synsets")
    test = _split_synsets(len(synsets), test_fraction, seed)
    train_idx, test_idx = np.flatnonzero(~test), np.flatnonzero(test)
    classes, y_train, y_test = _synset_labels([synsets[i][0] for i in train_idx], [synsets[i][0] for i in test_idx])
    unseen = np.diff(y_test.indptr) == 0
    test_labels_unseen = sum(len(set(synsets[i][0])) for i in test_idx) - y_test.nnz
    kept, y_test = (test_idx[~unseen], y_test[~unseen]) if drop_unseen_test else (test_idx, y_test)
    x_train, x_test, vocabulary = gloss_features([synsets[i][1] for i in train_idx],
                                                 [synsets[i][1] for i in kept], min_count)
    info = dict(name="wordnet-synsets", path=str(folder), multilabel=True,
                **_gloss_feature_info(x_train, x_test, vocabulary),
                train_rows=train_idx.tolist(), test_rows=kept.tolist(), num_synsets=len(synsets),
                unseen_test_mask=torch.from_numpy(unseen), num_unseen_test=int(unseen.sum()),
                unseen_test_dropped=drop_unseen_test, test_labels_unseen=test_labels_unseen,
                mean_labels_per_row={"train": labels_per_row(y_train), "test": labels_per_row(y_test)},
                rows_per_label=y_train.nnz / max(1, len(classes)),
                test_fraction=test_fraction, min_count=min_count, seed=seed, clean=clean,
                preprocessing=(f"synsets split {1 - test_fraction:g}/{test_fraction:g} at random (seed {seed}); "
                               "labels: the synset's words seen in training; binary bag of the [a-z]+ tokens of "
                               f"the gloss in >= {min_count} training glosses, rows L2-normalised"))
    return Dataset(x_train, y_train, x_test, y_test, len(classes), classes, info)

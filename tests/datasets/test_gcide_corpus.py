"""pyro_ar.datasets.gcide_corpus: GCIDE's text as bigram pairs, on dictd fixtures written here
(tests/datasets/helpers.py) and on the real folder when present (slow tier)."""

from collections import Counter

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pyro_ar.datasets import default_data_dir, load_gcide_corpus, read_gcide_paragraphs
from pyro_ar.datasets.text import bigram_corpus
from tests.datasets.helpers import write_gcide


def test_paragraphs_with_the_markup_stripped_or_kept(tmp_path):
    """Strip: no spelling, pronunciation, source tag or accent markup, the headword and the
    rest of the text kept; keep: the raw text. Both: the licence entry and the second
    headword of the Bank article are not read, paragraphs are the units."""
    write_gcide(tmp_path)
    stripped = read_gcide_paragraphs(tmp_path)
    assert stripped[:3] == [
        "bank n oe banke akin to e bench and prob of scand origin see bench "
        "a mound pile or ridge of earth as a bank of clouds".split(),
        "they cast up a bank against the city sam xx".split(),
        "the margin of a watercourse the rising ground bordering a lake or river shak".split()]
    assert stripped[3:5] == ["bank swallow a small swallow that nests in a bank".split(),
                             "bank v t to deposit money in a bank".split()]
    assert stripped[-1] == "aerolite n a stone that falls from the sky".split()
    kept = read_gcide_paragraphs(tmp_path, markup="keep")
    assert kept[0][:5] == ["bank", "bank", "b", "a", "ng"] and kept[0][-2:] == ["clouds", "webster"]
    assert kept[-1][:6] == ["a", "e", "rolite", "a", "e", "r"]  # A["e]rolite: the accents left as they are
    flat_strip = [w for p in stripped for w in p]
    flat_keep = [w for p in kept for w in p]
    assert "webster" not in flat_strip and "wordnet" not in flat_strip and "test" not in flat_strip
    assert Counter(flat_keep)["webster"] == 9 and Counter(flat_keep)["wordnet"] == 1
    assert "test" not in flat_keep  # the 00-database entry
    assert len(kept) == len(stripped) == 10 and flat_strip.count("bank") == flat_keep.count("bank") - 2


def test_errors_name_the_argument(tmp_path):
    write_gcide(tmp_path)
    with pytest.raises(ValueError, match=r"markup must be one of \('strip', 'keep'\), got 'raw'"):
        read_gcide_paragraphs(tmp_path, markup="raw")
    with pytest.raises(ValueError, match="min_count must be >= 1, got 0"):
        load_gcide_corpus(tmp_path, min_count=0)
    with pytest.raises(ValueError, match="test_fraction > 0.*got valid_fraction=0.5, test_fraction=0.5"):
        load_gcide_corpus(tmp_path, valid_fraction=0.5, test_fraction=0.5)
    with pytest.raises(ValueError, match="too few for a 0.05 / 0.05 validation / test split"):
        load_gcide_corpus(tmp_path)  # 10 paragraphs: the last 5 % of the tokens is inside the last one
    with pytest.raises(FileNotFoundError, match="load_gcide_corpus: no 'gcide.index'.*dict-gcide"):
        load_gcide_corpus(tmp_path / "nowhere")


def _letters(i):
    return "".join(chr(97 + (i // 26 ** k) % 26) for k in (2, 1, 0))


def _dictionary(words_per_article):
    """Articles 'Hxyz \\Hxyz\\, n.' whose two paragraphs hold the given words (then a tag)."""
    return {f"H{_letters(i)}": f"H{_letters(i)} \\H{_letters(i)}\\, n.\n   {' '.join(ws[:3])}\n   [1913 Webster]\n\n"
                               f"   {' '.join(ws[3:])}\n   [PJC]\n"
            for i, ws in enumerate(words_per_article)}


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), valid=st.sampled_from([0.0, 0.1, 0.2]), test=st.sampled_from([0.1, 0.25]),
       min_count=st.integers(1, 3))
@example(seed=896, valid=0.2, test=0.1, min_count=1)  # a paragraph end at 70 % of the tokens
def test_split_vocabulary_and_pairs(tmp_path_factory, seed, valid, test, min_count):
    """On a random dictionary: the splits are consecutive runs of paragraphs cut at the first
    boundary after each token fraction, the vocabulary is <unk>, <s> and the training words
    seen min_count times, the pairs are those of bigram_corpus on the same splits, and the
    test <unk> rate is the fraction of test words outside the vocabulary."""
    g = torch.Generator().manual_seed(seed)
    lexicon = ["w" + _letters(j) for j in range(40)]
    words = [[lexicon[int(k)] for k in torch.randint(0, 40, (int(torch.randint(4, 9, (1,), generator=g)),),
                                                     generator=g)] for _ in range(30)]
    root = tmp_path_factory.mktemp("gcide")
    write_gcide(root, _dictionary(words))
    paragraphs = read_gcide_paragraphs(root)
    assert paragraphs[:2] == [["haaa", "n"] + words[0][:3], words[0][3:]]
    data, vocab = load_gcide_corpus(root, min_count=min_count, valid_fraction=valid, test_fraction=test)
    n = [len(p) for p in paragraphs]
    cum = torch.tensor(n, dtype=torch.float64).cumsum(0)  # (int64 times a float is float32: off by one)
    a = int((cum < (1 - valid - test) * cum[-1]).sum()) + 1
    b = int((cum < (1 - test) * cum[-1]).sum()) + 1
    splits = {"train": paragraphs[:a], "test": paragraphs[b:], **({"valid": paragraphs[a:b]} if b > a else {})}
    counts = Counter(w for p in splits["train"] for w in p)
    assert set(vocab.words[2:]) == {w for w, c in counts.items() if c >= min_count}
    ref, _ = bigram_corpus(splits, min_count, {})
    assert torch.equal(data.x_train, ref.x_train) and torch.equal(data.y_test, ref.y_test)
    assert data.num_train == sum(len(p) + 1 for p in splits["train"])
    assert ("x_valid" in data.info) == (b > a)
    test_words = [w for p in splits["test"] for w in p]
    assert data.info["test_unk_rate"] == pytest.approx(sum(w not in vocab.index for w in test_words) / len(test_words))
    assert data.info["num_test_tokens"] == len(test_words) and data.info["markup"] == "strip"


@pytest.mark.slow
def test_real_gcide_has_the_documented_statistics():
    """The module's table (markup stripped): tokens, K, pairs and the test <unk> rate."""
    root = default_data_dir() / "gcide"
    if not (root / "usr/share/dictd/gcide.index").is_file():
        pytest.skip(f"gcide not found below {default_data_dir()} (set PYRO_AR_DATA)")
    data, vocab = load_gcide_corpus(root)
    tokens = sum(data.info[f"num_{s}_tokens"] for s in ("train", "valid", "test"))
    assert (tokens, data.num_classes) == (4_669_402, 95_659)
    assert (data.num_train, data.info["x_valid"].shape[0], data.num_test) == (4_430_639, 245_585, 248_941)
    assert round(100 * data.info["test_unk_rate"], 2) == 7.31 and vocab.words[2:6] == ["a", "the", "of", "to"]

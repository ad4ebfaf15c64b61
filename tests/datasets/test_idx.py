"""pyro_ar.datasets.idx: IDX files and the MNIST loader."""

import gzip
import struct

import numpy as np
import pytest
import torch

from pyro_ar import datasets as ds
from pyro_ar.datasets import load_mnist
from tests.datasets.helpers import data_folder


def _idx_bytes(arr, magic):
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", s) for s in arr.shape)
    return header + arr.astype(np.uint8).tobytes()


def _write_mnist(folder, n_train=5, n_test=3, image_magic=0x00000803, truncate=False,
                 shape=(28, 28), test_shape=None):
    rng = np.random.default_rng(0)
    for prefix, n in (("train", n_train), ("t10k", n_test)):
        img = rng.integers(0, 256, size=(n,) + (shape if prefix == "train" else test_shape or shape))
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


def test_image_shape_is_read_from_the_files(tmp_path):
    """Issue 12: 14 x 14 images gave D = 196 while info said 28 x 28."""
    _write_mnist(tmp_path, shape=(14, 14))
    d = load_mnist(path=tmp_path)
    assert d.x_train.shape == (5, 196) and d.x_test.shape == (3, 196)
    assert d.info["image_shape"] == (14, 14) and "196" in d.info["preprocessing"]
    _write_mnist(tmp_path, shape=(14, 14), test_shape=(12, 12))
    with pytest.raises(ValueError, match=r"t10k-images.*\(12, 12\).*\(14, 14\)"):
        load_mnist(path=tmp_path)


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


@pytest.fixture(scope="module")
def mnist():
    data_folder("mnist", list(ds.MNIST_FILES.values()))
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


@pytest.mark.parametrize("n_train,n_test,split", [(0, 0, "train"), (5, 0, "test")])
def test_files_of_zero_images_are_refused(tmp_path, n_train, n_test, split):
    """A file of 0 images failed in ``reshape(0, -1)`` (the fuzz suite), then gave an empty split
    silently (issue 38): now a ValueError naming the file."""
    _write_mnist(tmp_path, n_train=n_train, n_test=n_test)
    name = "train-images" if split == "train" else "t10k-images"
    with pytest.raises(ValueError, match=rf"{name}.*IDX header says 0 images .* an empty {split} split"):
        load_mnist(path=tmp_path)


@pytest.mark.parametrize("shape", [(0, 28), (28, 0), (0, 0)])
def test_images_of_no_pixels_are_refused(tmp_path, shape):
    """Images of 0 rows or columns gave a data set with D = 0 (issue 38)."""
    _write_mnist(tmp_path, shape=shape)
    with pytest.raises(ValueError, match=rf"train-images.*5 images of {shape[0]} x {shape[1]} pixels"):
        load_mnist(path=tmp_path)

r"""IDX files (LeCun's format for MNIST) and :func:`load_mnist`.

An IDX file is a big-endian header -- magic number ``0x0000TTNN`` (type code ``TT``,
``NN`` dimensions), then ``NN`` 32-bit sizes -- followed by the array, row-major; the
file may be gzip-compressed.
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Optional

import numpy as np
import torch

from ._common import Dataset, PathLike, _dataset_dir, _missing, verify_checksums

__all__ = ["load_mnist"]

MNIST_FILES = {
    "train_images": "train-images.idx3-ubyte.gz",
    "train_labels": "train-labels.idx1-ubyte.gz",
    "test_images": "t10k-images.idx3-ubyte.gz",
    "test_labels": "t10k-labels.idx1-ubyte.gz",
}


_IDX_TYPES = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}


def _read_idx(p: Path, expected_ndim: int, expected_type: int = 0x08) -> np.ndarray:
    """Read an IDX file (gzip-compressed or not) into a numpy array.

    The magic number must be ``0x0000TTNN`` with type code ``TT == expected_type``
    (0x08: unsigned bytes, as MNIST uses) and ``NN == expected_ndim``.
    """
    with open(p, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise ValueError(f"{p}: corrupt gzip stream ({e})") from None
    if len(raw) < 4:
        raise ValueError(f"{p}: too short for an IDX header ({len(raw)} bytes)")
    magic = int.from_bytes(raw[:4], "big")
    type_code, ndim = raw[2], raw[3]
    if raw[0] != 0 or raw[1] != 0 or type_code != expected_type or ndim != expected_ndim:
        raise ValueError(
            f"{p}: bad IDX magic number 0x{magic:08X}; expected "
            f"0x{(expected_type << 8) + expected_ndim:08X} (type code 0x{expected_type:02X}, "
            f"{expected_ndim} dimension{'s' if expected_ndim > 1 else ''})"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{p}: truncated IDX header")
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    dtype = _IDX_TYPES[type_code]
    size = int(np.prod(shape)) * dtype.itemsize
    if len(raw) - header != size:
        raise ValueError(
            f"{p}: IDX header says shape {shape} ({size} data bytes) but the file has "
            f"{len(raw) - header} data bytes"
        )
    return np.frombuffer(raw, dtype=dtype, count=int(np.prod(shape)), offset=header).reshape(shape)


def load_mnist(path: Optional[PathLike] = None, verify: bool = False) -> Dataset:
    """MNIST handwritten digits (LeCun, Cortes, Burges) from the raw IDX files.

    Provenance: ``train-images.idx3-ubyte.gz``, ``train-labels.idx1-ubyte.gz``,
    ``t10k-images.idx3-ubyte.gz``, ``t10k-labels.idx1-ubyte.gz`` (gzip; an uncompressed
    file of the same name without ``.gz`` is accepted too). The canonical split:
    60,000 training and 10,000 test images of 28 x 28 uint8 pixels.

    Preprocessing: pixels divided by 255 (as in the A&R paper) and flattened row-major.
    The image shape is read from the files' headers (28 x 28 for MNIST; a file of 14 x 14
    images gives D = 196 and ``info["image_shape"] == (14, 14)``); training and test images
    must agree.

    Args:
        path: folder with the files (default ``default_data_dir() / "mnist"``).
        verify: check the files against ``SHA256SUMS`` first.

    Returns:
        :class:`Dataset` with ``x_train`` float32 ``(60000, 784)`` in [0, 1],
        ``y_train`` int64 ``(60000,)`` in 0..9, ``x_test`` ``(10000, 784)``,
        ``y_test`` ``(10000,)``; ``num_classes == 10``; class names ``"0" .. "9"``.
        ``info`` keys: ``name``, ``source``, ``preprocessing``, ``image_shape``, ``folder``.

    Example:

    >>> from pyro_ar.datasets import load_mnist
    >>> d = load_mnist()                         # from ../shared/data/mnist  # doctest: +SKIP
    >>> d.x_train.shape, d.num_classes           # doctest: +SKIP
    (torch.Size([60000, 784]), 10)
    """
    folder = _dataset_dir(path, "mnist")
    paths = {}
    for key, fname in MNIST_FILES.items():
        p = folder / fname
        if not p.is_file() and (folder / fname[:-3]).is_file():
            p = folder / fname[:-3]
        if not p.is_file():
            raise _missing("load_mnist", fname, folder, "mnist")
        paths[key] = p
    if verify:
        verify_checksums(folder, [p.name for p in paths.values()])
    out, image_shapes = {}, {}
    for s in ("train", "test"):
        img = _read_idx(paths[s + "_images"], 3)
        lab = _read_idx(paths[s + "_labels"], 1)
        if img.shape[0] != lab.shape[0]:
            raise ValueError(
                f"{paths[s + '_labels']}: {lab.shape[0]} labels for {img.shape[0]} images "
                f"in {paths[s + '_images'].name}"
            )
        if lab.size and (lab.min() < 0 or lab.max() > 9):
            raise ValueError(f"{paths[s + '_labels']}: labels outside 0..9")
        if img.shape[0] == 0 or 0 in img.shape[1:]:
            raise ValueError(f"{paths[s + '_images']}: IDX header says {img.shape[0]} images of "
                             f"{img.shape[1]} x {img.shape[2]} pixels: an empty {s} split; expected at least one "
                             f"image of at least 1 x 1 pixels")
        image_shapes[s] = tuple(int(n) for n in img.shape[1:])
        x = torch.from_numpy(img.reshape(img.shape[0], int(np.prod(img.shape[1:]))).astype(np.float32))
        x.div_(255.0)
        out["x_" + s] = x
        out["y_" + s] = torch.from_numpy(lab.astype(np.int64))
    # the image shape is the files' (not assumed 28 x 28): D = height * width
    if image_shapes["train"] != image_shapes["test"]:
        raise ValueError(
            f"{paths['test_images']}: images of shape {image_shapes['test']} but the training "
            f"images in {paths['train_images'].name} are {image_shapes['train']}"
        )
    height, width = image_shapes["train"]
    return Dataset(
        num_classes=10,
        class_names=[str(i) for i in range(10)],
        info={
            "name": "mnist",
            "source": "MNIST (LeCun, Cortes, Burges), raw IDX files",
            "folder": str(folder),
            "preprocessing": f"pixels / 255, flattened to {height * width}",
            "image_shape": (height, width),
        },
        **out,
    )

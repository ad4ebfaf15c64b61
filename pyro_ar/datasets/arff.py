r"""ARFF files (Weka's format, used by the Mulan multi-label collection) and :func:`load_bibtex`.

An ARFF file is a header of ``@relation <name>`` and ``@attribute <name> <type>`` lines,
then ``@data`` and one row per line, dense (``v_1,v_2,...``) or sparse (``{j v_j, ...}``,
0-based attribute indices, absent entries zero). :func:`read_arff` reads any numeric ARFF
file -- e.g. Mulan's Bibtex, Delicious or Corel5k, whose last L attributes are the 0/1
labels -- into an ``(N, A)`` tensor :math:`X` with :math:`X_{nj}` the value of attribute
:math:`j` in row :math:`n`.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np
import torch

from ._common import Dataset, PathLike, _dataset_dir, _require, verify_checksums
from .multilabel import (as_targets, check_zero_one, classes_of, is_indicator, label_indicator, labelled_rows,
                         labels_per_row, relabel, unseen_rows)

__all__ = ["ArffData", "read_arff", "load_bibtex", "load_arff_multilabel", "reduce_multilabel"]

BIBTEX_NUM_FEATURES = 1836
BIBTEX_NUM_LABELS = 159
BIBTEX_FILES = {"train": "bibtex-train.arff", "test": "bibtex-test.arff"}


class ArffData(NamedTuple):
    r"""Output of :func:`read_arff`: ``relation`` name, ``attributes`` (A names), ``data`` (N, A).

    Example:

    >>> import tempfile, pathlib
    >>> from pyro_ar.datasets import read_arff
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.arff"
    >>> _ = p.write_text("@relation tiny\n@attribute a numeric\n@attribute b {0,1}\n@data\n{1 1}\n0.5,0\n")
    >>> read_arff(p).data.tolist()
    [[0.0, 1.0], [0.5, 0.0]]
    """

    relation: str
    attributes: List[str]
    data: torch.Tensor


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


def _number(text: str, where: str, what: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{where}: {what} is not numeric") from None
    if not math.isfinite(v):
        raise ValueError(f"{where}: {what} is not finite ({text})")
    return v


def _sparse_row(line: str, where: str, num_attr: int):
    """Column indices and values of a sparse row ``{j v, ...}``."""
    if not line.endswith("}"):
        raise ValueError(f"{where}: sparse row does not end with '}}': {line[-40:]!r}")
    body = line[1:-1].strip()
    idx: List[int] = []
    val: List[float] = []
    for entry in body.split(",") if body else []:
        parts = entry.split()
        if len(parts) != 2:
            raise ValueError(f"{where}: sparse entry {entry.strip()!r} is not '<index> <value>'")
        try:
            j = int(parts[0])
        except ValueError:
            raise ValueError(f"{where}: sparse entry {entry.strip()!r} is not numeric") from None
        v = _number(parts[1], where, f"sparse entry {entry.strip()!r}")
        if not 0 <= j < num_attr:
            raise ValueError(f"{where}: attribute index {j} out of range 0..{num_attr - 1}")
        idx.append(j)
        val.append(v)
    if len(set(idx)) != len(idx):
        raise ValueError(f"{where}: an attribute index is repeated in the sparse row")
    return idx, val


def _dense_row(line: str, where: str, num_attr: int):
    """Column indices and values of the non-zero entries of a dense row ``v_1,...,v_A``."""
    parts = [s.strip() for s in line.split(",")]
    if len(parts) != num_attr:
        raise ValueError(f"{where}: dense row has {len(parts)} values, expected {num_attr}")
    vals = [_number(s, where, "a dense row value") for s in parts]
    nz = [j for j, v in enumerate(vals) if v != 0.0]
    return nz, [vals[j] for j in nz]


def _parse_arff(p: Path):
    """``(relation, names, rows, cols, values)`` with the non-zeros in coordinate form.

    Raises ``ValueError`` with the file and the line number on malformed input.
    """
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark is allowed
    except UnicodeDecodeError as e:
        raise ValueError(f"{p}: not a UTF-8 text ARFF file ({e})") from None
    relation, names, in_data = "", [], False
    rows: List[int] = []
    cols: List[int] = []
    vals: List[float] = []
    n = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("%"):
            continue
        where = f"{p}, line {lineno}"
        if in_data:
            row = (_sparse_row if line.startswith("{") else _dense_row)(line, where, len(names))
            rows.extend([n] * len(row[0]))
            cols.extend(row[0])
            vals.extend(row[1])
            n += 1
            continue
        low = line.lower()
        if low.startswith("@relation"):
            relation = line[len("@relation"):].strip().strip("'\"")
        elif low.startswith("@attribute"):
            names.append(_parse_attribute_name(line[len("@attribute"):], where))
        elif low.startswith("@data"):
            if not names:
                raise ValueError(f"{where}: @data before any @attribute")
            in_data = True
        else:
            raise ValueError(f"{where}: expected @relation, @attribute or @data, got {line[:60]!r}")
    if not in_data:
        raise ValueError(f"{p}: no @data section (not an ARFF file?)")
    if n == 0:
        raise ValueError(f"{p}: the @data section holds no rows (only blank lines or % comments): an empty data set")
    return relation, names, n, (np.asarray(rows, np.int64), np.asarray(cols, np.int64), np.asarray(vals))


def read_arff(path: PathLike, sparse: bool = False) -> ArffData:
    r"""Read a numeric ARFF file (dense or sparse rows), e.g. any Mulan data set.

    Nominal ``{0,1}`` attributes are read as numbers; missing values (``?``), strings and
    dates are refused, as are non-finite values and repeated sparse indices, each with a
    ``ValueError`` giving the file and line.

    Args:
        path: the ``.arff`` file.
        sparse: return ``data`` as a sparse COO tensor (float32) instead of a dense one.

    Returns:
        :class:`ArffData` ``(relation, attributes, data)`` with ``data`` float32 ``(N, A)``.
        For a Mulan file with L labels, ``data[:, :-L]`` are the features and
        ``data[:, -L:]`` the 0/1 label indicators (L is given in the data set's XML file).

    Example:

    >>> import tempfile, pathlib
    >>> from pyro_ar.datasets import read_arff
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.arff"
    >>> _ = p.write_text("@relation tiny\n@attribute x numeric\n@attribute y {0,1}\n@data\n{0 2.5,1 1}\n{}\n")
    >>> arff = read_arff(p)
    >>> arff.attributes, arff.data.tolist()
    (['x', 'y'], [[2.5, 1.0], [0.0, 0.0]])
    >>> read_arff(p, sparse=True).data.to_dense().equal(arff.data)
    True
    """
    relation, names, n, (rows, cols, vals) = _parse_arff(Path(path))
    if sparse:
        index = torch.from_numpy(np.stack([rows, cols]))
        data = torch.sparse_coo_tensor(index, torch.from_numpy(vals).float(), (n, len(names)),
                                       check_invariants=True)
        return ArffData(relation, names, data.coalesce())
    x = np.zeros((n, len(names)), dtype=np.float32)
    x[rows, cols] = vals
    return ArffData(relation, names, torch.from_numpy(x))


def _bibtex_split(p: Path, reduction: Optional[str] = "first"):
    """Dense features, first labels (or -1; the label indicator for ``reduction=None``) of
    one Bibtex ARFF file, plus attribute names."""
    arff = read_arff(p)
    names = arff.attributes
    expected = BIBTEX_NUM_FEATURES + BIBTEX_NUM_LABELS
    if len(names) != expected:
        raise ValueError(
            f"{p}: {len(names)} attributes, expected {expected} "
            f"({BIBTEX_NUM_FEATURES} word features + {BIBTEX_NUM_LABELS} labels)"
        )
    data = arff.data.numpy()
    labels = data[:, BIBTEX_NUM_FEATURES:]
    bad = (labels != 0) & (labels != 1)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ValueError(f"{p}: label {names[BIBTEX_NUM_FEATURES + j]!r} of data row {i} is "
                         f"{labels[i, j]}, expected 0 or 1")
    first = label_indicator(labels, where=str(p)) if reduction is None else reduce_multilabel(labels, "first")
    return np.ascontiguousarray(data[:, :BIBTEX_NUM_FEATURES]), first, names


def load_bibtex(path: Optional[PathLike] = None, split: str = "both", drop_unseen_test: bool = True,
                remap_classes: bool = False, verify: bool = False, reduction: Optional[str] = "first") -> Dataset:
    """Bibtex (Katakis et al., 2008), reduced to one label per document as in the A&R paper
    (or with all its labels: ``reduction=None``).

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
        reduction: ``"first"`` (default, the paper's) or ``None``: keep every label, a
            multi-label :class:`Dataset` (``y_*`` the float32 CSR indicator ``(N, 159)``;
            :mod:`~pyro_ar.datasets.multilabel`), classes handled as for the first label,
            a class being any label (see :func:`load_arff_multilabel`). On Mulan's files:
            4880 / 2515 rows, K = 159, 2.38 / 2.44 labels per row (train / test; 2.40 over
            both, Mulan's label cardinality), 1 to 28 / 1 to 17 labels per row, every
            label seen in train, no test row dropped.

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
    if reduction not in ("first", None):
        raise ValueError(f"load_bibtex: reduction must be 'first' or None (every label), got {reduction!r}")
    folder = _dataset_dir(path, "bibtex")
    need_train = split in ("both", "train") or drop_unseen_test or remap_classes
    need_test = split in ("both", "test") or remap_classes
    parts, names = _bibtex_read(folder, need_train, need_test, reduction, verify)
    labelled = _labelled(parts)
    kept = {s: v[:3] for s, v in labelled.items()}
    info: Dict[str, Any] = {
        "name": "bibtex",
        "source": "Mulan bibtex (Katakis, Tsoumakas, Vlahavas, ECML/PKDD 2008 discovery challenge)",
        "folder": str(folder),
        "preprocessing": "binary features as is; label = " + ("every positive label" if reduction is None else
                                                              "lowest positive label index (first label)"),
        "feature_names": names[:BIBTEX_NUM_FEATURES], "reduction": reduction,
        "num_unlabeled_dropped": {s: v[3] for s, v in labelled.items()}, **_class_lists(kept),
    }
    kept, class_names = _bibtex_classes(kept, info, names[BIBTEX_NUM_FEATURES:], drop_unseen_test, remap_classes)
    return _bibtex_dataset(kept, split, info, class_names)


def _bibtex_read(folder: Path, need_train: bool, need_test: bool, reduction: Optional[str] = "first",
                 verify: bool = False):
    """``({split: (x, first label or indicator)}, attribute names)`` of the split files needed
    (checked against ``SHA256SUMS`` first with ``verify``)."""
    files = [BIBTEX_FILES[s] for s, need in (("train", need_train), ("test", need_test)) if need]
    for f in files:
        _require("load_bibtex", folder, f, "bibtex")
    if verify:
        verify_checksums(folder, files)
    parts: Dict[str, Any] = {}
    names = None
    for s, need in (("train", need_train), ("test", need_test)):
        if need:
            x, first, attr_names = _bibtex_split(folder / BIBTEX_FILES[s], reduction)
            if names is None:
                names = attr_names
            elif attr_names != names:
                raise ValueError(
                    f"{folder / BIBTEX_FILES[s]}: attributes differ from those of {BIBTEX_FILES['train']}"
                )
            parts[s] = (x, first)
    assert names is not None
    return parts, names


def _labelled(parts):
    """``{split: (x, y, rows kept, number of rows dropped)}``: each split of
    ``parts = {split: (x, y)}`` without its rows that have no label."""
    out = {}
    for s, (x, y) in parts.items():
        rows = labelled_rows(y)
        out[s] = (x[rows], y[rows], rows, int(y.shape[0] - rows.shape[0]))
    return out


def _class_lists(kept) -> Dict[str, List[int]]:
    """``train_classes`` (the sorted classes of the training split, when read) and
    ``all_classes`` (those of train and test, when both are read)."""
    out: Dict[str, List[int]] = {}
    if "train" in kept:
        out["train_classes"] = classes_of(kept["train"][1]).tolist()
        if "test" in kept:
            out["all_classes"] = np.union1d(out["train_classes"], classes_of(kept["test"][1])).tolist()
    return out


def _bibtex_classes(kept, info, label_names, drop_unseen_test, remap_classes):
    """Mark (and drop) the test rows of classes unseen in train (for an indicator: rows
    without a label seen in train); remap to the classes that occur."""
    train_classes = classes_of(kept["train"][1]) if "train" in kept else None
    unseen = None
    if "test" in kept and train_classes is not None:
        unseen = unseen_rows(kept["test"][1], train_classes)
        info["unseen_test_mask"] = torch.from_numpy(unseen.copy())
        info["num_unseen_test"] = int(unseen.sum())
    info["unseen_test_dropped"] = bool(drop_unseen_test and unseen is not None)

    if remap_classes:
        old = np.asarray(info["all_classes"], dtype=np.int64)
        lookup = np.full(len(label_names), -1, dtype=np.int64)
        lookup[old] = np.arange(old.shape[0])
        kept = {s: (x, relabel(y, old, lookup), r) for s, (x, y, r) in kept.items()}
        class_names = [label_names[i] for i in old]
        info["original_class_index"] = torch.from_numpy(old)
        if "train_classes" in info:
            info["train_classes"] = lookup[np.asarray(info["train_classes"])].tolist()
        info["all_classes"] = list(range(old.shape[0]))
    else:
        class_names = list(label_names)
        info["original_class_index"] = torch.arange(len(label_names))

    if info["unseen_test_dropped"]:
        x, y, r = kept["test"]
        keep = ~unseen
        kept["test"] = (x[keep], y[keep], r[keep])
    return kept, class_names


def _bibtex_dataset(kept, split, info, class_names) -> Dataset:
    """The :class:`Dataset` of the splits asked for."""
    out: Dict[str, Optional[torch.Tensor]] = {}
    for s in ("train", "test"):
        if s in kept and split in ("both", s):
            x, y, r = kept[s]
            out["x_" + s] = torch.from_numpy(np.ascontiguousarray(x))
            out["y_" + s] = as_targets(y)
            info[s + "_rows"] = torch.from_numpy(r.astype(np.int64))
            if is_indicator(y):
                info.setdefault("mean_labels_per_row", {})[s] = labels_per_row(y)
        else:
            out["x_" + s] = out["y_" + s] = None
    return Dataset(
        x_train=out["x_train"],
        y_train=out["y_train"],
        x_test=out["x_test"],
        y_test=out["y_test"],
        num_classes=len(class_names),
        class_names=class_names,
        info={**info, "multilabel": info.get("reduction", "first") is None},
    )


# ---------------------------------------------------------------------------
# Any multi-label ARFF (Mulan, MEKA): features, labels, one label per row
# ---------------------------------------------------------------------------

_MEKA_C = re.compile(r"-C\s+(-?\d+)")


def reduce_multilabel(labels: np.ndarray, reduction: str = "first", seed: int = 0,
                      where: str = "labels") -> np.ndarray:
    r"""One class per row of a 0/1 label matrix ``(N, L)``; ``-1`` for rows without a label.

    ``labels`` is anything :func:`numpy.asarray` accepts; the result is an integer
    :class:`numpy.ndarray` of shape ``(N,)``.
    ``"first"``: the lowest positive label index (the A&R paper's reduction of Bibtex);
    ``"last"``: the highest; ``"random"``: a positive label drawn uniformly per row
    (``numpy.random.default_rng(seed)``).

    Example:

    >>> import numpy as np
    >>> from pyro_ar.datasets import reduce_multilabel
    >>> reduce_multilabel(np.array([[0, 1, 1], [0, 0, 0], [1, 0, 1]])).tolist()
    [1, -1, 0]
    >>> reduce_multilabel(np.array([[0, 1, 1], [0, 0, 0], [1, 0, 1]]), "last").tolist()
    [2, -1, 2]
    """
    labels = np.asarray(labels)
    check_zero_one(labels, where)
    positive = labels == 1
    has = positive.any(1)
    if reduction == "first":
        out = positive.argmax(1)
    elif reduction == "last":
        out = labels.shape[1] - 1 - positive[:, ::-1].argmax(1)
    elif reduction == "random":
        u = np.random.default_rng(seed).random(labels.shape) * positive  # argmax of uniforms over positives
        out = u.argmax(1)
    else:
        raise ValueError(f"reduction must be 'first', 'last' or 'random', got {reduction!r}")
    return np.where(has, out, -1).astype(np.int64)


def _label_columns(p: Path, arff: ArffData, num_labels: Optional[int],
                   label_names: Optional[Sequence[str]]) -> Tuple[np.ndarray, str]:
    """Attribute indices of the labels and how they were found (see load_arff_multilabel)."""
    A = len(arff.attributes)
    if label_names is not None:
        pos = {n: j for j, n in enumerate(arff.attributes)}
        missing = [n for n in label_names if n not in pos]
        if missing:
            raise ValueError(f"{p}: label attributes {missing[:5]} not in the file")
        return np.asarray([pos[n] for n in label_names], np.int64), "label_names"
    if num_labels is None:
        xml = p.with_suffix(".xml")
        siblings = sorted(p.parent.glob("*.xml"))
        xml = xml if xml.is_file() else (siblings[0] if len(siblings) == 1 else None)
        if xml is not None:
            names = re.findall(r'<label\s+name="([^"]+)"', xml.read_text(encoding="utf-8"))
            if names:
                return _label_columns(p, arff, None, names)[0], f"Mulan XML {xml.name}"
        m = _MEKA_C.search(arff.relation)
        if m is None:
            raise ValueError(
                f"{p}: cannot tell which attributes are labels: no Mulan XML file next to it and no "
                "MEKA '-C <L>' in @relation; pass num_labels= (the last L attributes) or label_names=")
        c = int(m.group(1))
        if not 0 < abs(c) < A:
            raise ValueError(f"{p}: MEKA header says -C {c}, but the file has {A} attributes")
        cols = np.arange(c) if c > 0 else np.arange(A + c, A)
        return cols, f"MEKA -C {c}"
    if not 0 < int(num_labels) < A:
        raise ValueError(f"load_arff_multilabel: num_labels must be between 1 and {A - 1} "
                         f"(the file {p.name} has {A} attributes), got {num_labels}")
    return np.arange(A - int(num_labels), A), f"last {int(num_labels)} attributes"


def _multilabel_split(p: Path, num_labels, label_names, reduction, seed,
                      like: Optional[Tuple[Path, List[str]]] = None):
    """``(features, reduced labels or indicator, feature names, label names, how, attributes)`` of one ARFF file (whose
    attributes must be those of ``like = (file, attributes)`` when given: a missing or extra
    attribute would shift the label columns and be blamed on a label)."""
    arff = read_arff(p)
    if like is not None and arff.attributes != like[1]:
        j = next((j for j, (a, b) in enumerate(zip(arff.attributes, like[1])) if a != b),
                 min(len(arff.attributes), len(like[1])))
        theirs = like[1][j] if j < len(like[1]) else None
        ours = arff.attributes[j] if j < len(arff.attributes) else None
        raise ValueError(f"{p}: attributes differ from those of {like[0]}: {len(arff.attributes)} against "
                         f"{len(like[1])}, the first difference at attribute {j} ({ours!r} against {theirs!r})")
    cols, how = _label_columns(p, arff, num_labels, label_names)
    data = arff.data.numpy()
    is_label = np.zeros(data.shape[1], bool)
    is_label[cols] = True
    names = [arff.attributes[j] for j in cols]
    y = (label_indicator(data[:, cols], where=str(p)) if reduction is None
         else reduce_multilabel(data[:, cols], reduction, seed, where=str(p)))
    feature_names = [n for n, lab in zip(arff.attributes, is_label) if not lab]
    return np.ascontiguousarray(data[:, ~is_label]), y, feature_names, names, how, arff.attributes


def load_arff_multilabel(
    train: PathLike,
    test: Optional[PathLike] = None,
    num_labels: Optional[int] = None,
    label_names: Optional[Sequence[str]] = None,
    reduction: Optional[str] = "first",
    drop_unseen_test: bool = True,
    remap_classes: bool = False,
    seed: int = 0,
) -> Dataset:
    r"""Any multi-label ARFF data set (Mulan, MEKA) as a single-label :class:`Dataset`, or with
    all its labels (``reduction=None``).

    Which attributes are the L labels: ``label_names`` if given; else the last
    ``num_labels`` attributes (Mulan's convention); else read from the files -- the
    labels named in a Mulan XML file next to ``train`` (same stem, or the folder's only
    ``.xml``), or MEKA's ``-C L`` in ``@relation`` (the first L attributes; ``-C -L`` the
    last L). All other attributes are the D features. Each row's label set is reduced to
    one class by ``reduction`` (:func:`reduce_multilabel`: ``"first"``, the paper's
    choice, ``"last"`` or ``"random"``); rows without a label are dropped. Test rows whose
    class never occurs in train are marked, and dropped unless ``drop_unseen_test=False``,
    and ``remap_classes`` keeps only the classes that occur -- exactly as
    :func:`load_bibtex`, which is this loader with Bibtex's file names and checks.

    ``reduction=None`` keeps every label: a multi-label :class:`Dataset`
    (:mod:`~pyro_ar.datasets.multilabel`: ``y_*`` the float32 CSR indicator ``(N, L)``,
    ``info["multilabel"]`` True, ``info["mean_labels_per_row"]``), the same rules read with a
    class being any label of a row: rows with no label are dropped (and counted), a test row
    is unseen when none of its labels occurs in train (dropped unless
    ``drop_unseen_test=False``), ``remap_classes`` keeps the labels that occur in train or
    test (columns in original order).

    Args:
        train: the training ``.arff`` file.
        test: the test ``.arff`` file (same attributes), or ``None`` (test fields ``None``).
        num_labels: L, the labels being the last L attributes.
        label_names: the label attributes by name (overrides ``num_labels``).
        reduction: ``"first"`` (default), ``"last"``, ``"random"`` or ``None`` (every label).
        drop_unseen_test: drop test rows whose class never occurs in train (default True).
        remap_classes: relabel to the classes occurring in train or test.
        seed: seed of ``reduction="random"``.

    Returns:
        :class:`Dataset` with ``x_*`` float32 ``(N, D)``, ``y_*`` int64 ``(N,)`` (the
        indicator for ``reduction=None``) and
        ``num_classes`` L (or the classes kept by ``remap_classes``); ``class_names`` the
        label attribute names. ``info`` has the keys of :func:`load_bibtex` plus
        ``label_source`` (how the labels were found) and ``reduction``.

    Example (a tiny Mulan-style file; the labels are its last 2 attributes):

    >>> import tempfile, pathlib
    >>> from pyro_ar.datasets import load_arff_multilabel
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "tiny.arff"
    >>> _ = p.write_text("@relation tiny\n@attribute x1 numeric\n@attribute x2 numeric\n"
    ...                  "@attribute a {0,1}\n@attribute b {0,1}\n@data\n1,2,0,1\n3,4,1,1\n{0 5}\n")
    >>> d = load_arff_multilabel(p, num_labels=2)
    >>> d.x_train.tolist(), d.y_train.tolist(), d.class_names, d.info["num_unlabeled_dropped"]
    ([[1.0, 2.0], [3.0, 4.0]], [1, 0], ['a', 'b'], {'train': 1})
    """
    if reduction not in ("first", "last", "random", None):
        raise ValueError(f"load_arff_multilabel: reduction must be 'first', 'last', 'random' or None "
                         f"(every label), got {reduction!r}")
    files = {"train": Path(train)} if test is None else {"train": Path(train), "test": Path(test)}
    for f in files.values():
        if not f.is_file():
            raise FileNotFoundError(f"load_arff_multilabel: file {f} not found")
    parts, (feature_names, names, how) = _multilabel_read(files, num_labels, label_names, reduction, seed)
    extra = {"preprocessing": f"features as in the file; label = {reduction or 'every'} positive label ({how})",
             "label_source": how, "feature_names": feature_names}
    return _multilabel_dataset(files, _labelled(parts), names, reduction, extra, drop_unseen_test, remap_classes)


def _multilabel_read(files: Dict[str, Path], num_labels, label_names, reduction, seed):
    """``({split: (x, y)}, (feature names, label names, how the labels were found))`` of the
    ARFF ``files = {split: path}``, whose attributes must all be the training file's."""
    parts, meta, like = {}, None, None
    for s, f in files.items():
        x, y, feat, labs, how, attributes = _multilabel_split(f, num_labels, label_names, reduction, seed, like)
        like = like or (f, attributes)
        if meta is None:
            meta = (feat, labs, how)
        elif (feat, labs) != meta[:2]:
            raise ValueError(f"{f}: attributes differ from those of {files['train']}")
        parts[s] = (x, y)
    assert meta is not None
    return parts, meta


def _multilabel_dataset(files, parts, label_names, reduction, extra, drop_unseen_test, remap_classes) -> Dataset:
    """The :class:`Dataset` of a reduced multi-label data set, classes handled as for Bibtex.

    ``parts[split] = (x, y, rows kept, number of unlabeled rows dropped)`` (:func:`_labelled`);
    without a test file, every class is a training class.
    """
    kept = {s: v[:3] for s, v in parts.items()}
    classes = _class_lists(kept)
    info: Dict[str, Any] = {
        "name": files["train"].stem, "source": str(files["train"]), "folder": str(files["train"].parent),
        "reduction": reduction, "num_unlabeled_dropped": {s: v[3] for s, v in parts.items()},
        "train_classes": classes["train_classes"], **extra,
        "all_classes": classes.get("all_classes", list(classes["train_classes"])),
    }
    kept, class_names = _bibtex_classes(kept, info, label_names, drop_unseen_test, remap_classes)
    return _bibtex_dataset(kept, "both", info, class_names)

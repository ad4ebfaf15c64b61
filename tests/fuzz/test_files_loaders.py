"""Fuzz: crafted data files (ARFF, IDX, SHA256SUMS) and model files (pyro_ar.files).

Loaders return well-formed data (finite features, labels in range, shapes as the header
says) or raise a ``ValueError``/``FileNotFoundError`` naming the file. Model files: any
damaged file is a ``ValueError`` naming its path; a failed save leaves the previous file
byte for byte (a changed file is counted as lost).
"""

import gzip
import hashlib
import os
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

from pyro_ar.datasets import load_mnist, load_svmlight, read_arff, verify_checksums
from pyro_ar.files import atomic_save, load_payload

from tests.fuzz import _harness as H

pytestmark = pytest.mark.slow  # a fuzz battery

LOADER_ERRORS = (ValueError, TypeError, FileNotFoundError)

ARFF_LINES = ["@relation r", "@attribute a numeric", "@attribute b {0,1}", "@attribute 'c d' real",
              "@data", "1,0,2.5", "{0 1,2 3}", "{}", "1,1", "nan,0,1", "inf,1,1", "?,0,1", "{1 -1}",
              "{0 1,0 2}", "% comment", "", "\ufeff@relation bom", "{5 1}", "1,x,2", "@attribute e string",
              "1e308,0,1e308", "{2 1e-300}", "@attribute", "@data extra"]


@settings(H.FUZZ, max_examples=150)
@given(lines=st.lists(st.sampled_from(ARFF_LINES), min_size=0, max_size=10), prefix=st.booleans(),
       sparse=st.booleans())
def test_read_arff(tmp_path_factory, lines, prefix, sparse):
    if prefix:  # a mostly well-formed header, then fuzzed rows
        lines = ARFF_LINES[:5] + lines
    p = tmp_path_factory.mktemp("arff") / "f.arff"
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    ok, out = H.call(lambda: read_arff(p, sparse=sparse), (str(p), "f.arff"), kind="loaders",
                     allowed=LOADER_ERRORS)
    if ok:
        data = out.data.to_dense() if sparse else out.data
        assert data.shape[1] == len(out.attributes)
        H.finite("ARFF data", data)


def _idx(arr, type_code=0x08, ndim=None, sizes=None):
    ndim = arr.ndim if ndim is None else ndim
    sizes = arr.shape if sizes is None else sizes
    return bytes([0, 0, type_code, ndim]) + b"".join(struct.pack(">I", s) for s in sizes) + arr.astype(np.uint8).tobytes()


@settings(H.FUZZ, max_examples=60)
@given(n=st.sampled_from([0, 1, 3]), h=st.sampled_from([28, 14, 1]), w=st.sampled_from([28, 14, 3]),
       fault=st.sampled_from([None] * 6 + ["type", "ndim", "size", "truncate", "label_range", "count",
                                           "gzip", "plain", "test_shape"]))
def test_load_mnist(tmp_path_factory, n, h, w, fault):
    folder = tmp_path_factory.mktemp("mnist")
    rng = np.random.default_rng(n * 100 + h + w)
    for prefix in ("train", "t10k"):
        hh = h + 1 if (fault == "test_shape" and prefix == "t10k") else h
        img = rng.integers(0, 256, size=(n, hh, w))
        lab = rng.integers(0, 10, size=(n + (fault == "count"),))
        if fault == "label_range" and lab.size:
            lab[0] = 11
        raw = _idx(img, 0x09 if fault == "type" else 0x08, 2 if fault == "ndim" else None,
                   (n, hh, w + 1) if fault == "size" else None)
        raw = raw[:-1] if fault == "truncate" and len(raw) > 16 else raw
        name = f"{prefix}-images.idx3-ubyte"
        if fault == "plain":
            (folder / name).write_bytes(raw)
        else:
            (folder / (name + ".gz")).write_bytes(gzip.compress(raw)[:-4] if fault == "gzip" else gzip.compress(raw))
        (folder / f"{prefix}-labels.idx1-ubyte.gz").write_bytes(gzip.compress(_idx(lab)))
    ok, d = H.call(lambda: load_mnist(path=folder), ("idx", "ubyte"), kind="loaders", allowed=LOADER_ERRORS)
    if ok:
        hh, ww = d.info["image_shape"]
        assert d.x_train.shape == (n, hh * ww) and d.x_test.shape == (n, hh * ww)
        assert fault not in (None, "plain") or (hh, ww) == (h, w)
        assert ((d.y_train >= 0) & (d.y_train < 10)).all()
        H.finite("MNIST pixels", d.x_train)


@settings(H.FUZZ, max_examples=60)
@given(entries=st.lists(st.sampled_from(["a.txt", "sub/b.txt", "../outside.txt", "/etc/hostname",
                                         "missing.txt", "..", "sub/../a.txt", "a.txt "]), max_size=4),
       bad_digest=st.booleans(), malformed=st.booleans())
def test_verify_checksums(tmp_path_factory, entries, bad_digest, malformed):
    root = tmp_path_factory.mktemp("sums")
    folder = root / "data"
    (folder / "sub").mkdir(parents=True)
    for rel, text in (("data/a.txt", "a"), ("data/sub/b.txt", "b"), ("outside.txt", "secret")):
        (root / rel).write_text(text)
    lines = []
    for e in entries:
        digest = hashlib.sha256(b"zz" if bad_digest else (root / "data" / e.strip()).read_bytes()
                                if (root / "data" / e.strip()).is_file() else b"x").hexdigest()
        lines.append(f"{digest}  {e}")
    if malformed:
        lines.append("not a checksum line")
    (folder / "SHA256SUMS").write_text("\n".join(lines) + "\n")
    ok, out = H.call(lambda: verify_checksums(folder), ("SHA256SUMS", "verify"), kind="loaders",
                     allowed=LOADER_ERRORS)
    if ok:
        assert all(".." not in k and not os.path.isabs(k) for k in out)


@settings(H.FUZZ, max_examples=80)
@given(damage=st.sampled_from(["none", "empty", "truncate", "flip", "random", "text", "format", "version",
                               "pickled"]),
       cut=st.floats(0.0, 1.0), seed=st.integers(0, 2 ** 16))
def test_model_files(tmp_path_factory, damage, cut, seed):
    path = tmp_path_factory.mktemp("files") / "m.pt"
    good = {"format": "fuzz", "version": 1, "w": torch.randn(3, 2)}
    atomic_save(good, path)
    before = path.read_bytes()
    # a failed save (an object torch cannot serialise) never changes the file
    H.STATS["inputs"] += 1
    H.STATS["inputs:files"] += 1
    H.STATS["failed_writes"] += 1
    with pytest.raises(Exception):
        atomic_save({"format": "fuzz", "version": 1, "bad": lambda: None}, path)
    if path.read_bytes() != before or [p for p in path.parent.iterdir() if p.name != "m.pt"]:
        H.lost_file()
        raise H.Unnamed("a failed save changed the file or left a temporary file")
    rng = np.random.default_rng(seed)
    data = bytearray(before)
    if damage == "empty":
        data = b""
    elif damage == "truncate":
        data = data[: int(cut * (len(data) - 1))]
    elif damage == "flip":
        i = int(cut * (len(data) - 1))
        data[i] ^= 0xFF
    elif damage == "random":
        data = rng.bytes(max(1, int(cut * 400)))
    elif damage == "text":
        data = b"hello, not a model\n"
    elif damage in ("format", "version"):
        atomic_save({"format": "other" if damage == "format" else "fuzz", "version": 1 if damage == "format" else 99}, path)
        data = path.read_bytes()
    elif damage == "pickled":
        torch.save({"format": "fuzz", "version": 1, "obj": np.dtype("f8")}, path)
        data = path.read_bytes()
    path.write_bytes(bytes(data))
    ok, out = H.call(lambda: load_payload(path, "fuzz", 1), (str(path),), kind="files")
    if ok:
        assert out["format"] == "fuzz" and out["version"] == 1
        if damage == "none":
            assert torch.equal(out["w"], good["w"])


SVMLIGHT_LINES = ["0 0:1.5 3:0.5", "1,2 1:2.0", "2 4:1.0", " 2:1.0", "# comment", "", "1 2:1e-45", "0,0 0:1"] * 4 + [
    "0.5 0:1", "-1 0:1", "3 0:nan", "1 2:inf", "1 1:-inf", "0 3000000000:1", "x 0:1", "1 a:b", "1 0:1e39",
    "2 0:1 0:2"]


@settings(H.FUZZ, max_examples=120)
@given(lines=st.lists(st.sampled_from(SVMLIGHT_LINES), min_size=0, max_size=8),
       header=st.sampled_from([None, "ok", "rows+1", "rows-1"]), num_labels=st.sampled_from([None, 2, 10]))
def test_load_svmlight(tmp_path_factory, lines, header, num_labels):
    """Issue 25: a data set or a named error; never NaN/inf features, float or negative
    labels accepted, or a row count other than the header's."""
    path = tmp_path_factory.mktemp("svm") / "data.txt"
    rows = [ln for ln in lines if ln.strip() and not ln.startswith("#")]
    if header is not None:
        n = len(rows) + {"ok": 0, "rows+1": 1, "rows-1": -1}[header]
        lines = [f"{max(n, 0)} 5 10"] + lines
    path.write_text("\n".join(lines) + "\n")
    ok, d = H.call(lambda: load_svmlight(path, num_labels=num_labels), [str(path), "num_labels"],
                   kind="loaders", allowed=LOADER_ERRORS)
    if not ok:
        return
    H.finite("load_svmlight x_train", d.x_train)
    assert d.num_classes >= 1 and len(d.y_train) >= 1
    assert int(d.y_train.min()) >= 0 and int(d.y_train.max()) < d.num_classes
    if header is not None:
        assert header == "ok"
    assert not any(bad in ln for ln in lines for bad in ("0.5 ", "-1 ", "nan", "inf"))

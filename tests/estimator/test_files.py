"""Model files: atomic saves, and damaged, crafted or inconsistent files give named errors
(issue 12, items 1 and 4), for ARClassifier and for pyro_ar.files itself."""

import os

import numpy as np
import pytest
import torch

from pyro_ar.files import atomic_save, load_payload

sklearn = pytest.importorskip("sklearn")

from pyro_ar import ARClassifier  # noqa: E402


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.RandomState(0)
    X = rng.randn(120, 5)
    y = X[:, :3].argmax(1)
    return ARClassifier(min_steps=0, max_epochs=2, random_state=0).fit(X, y), X


def _damaged(path, kind):
    good = path.read_bytes()
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif kind == "text":
        path.write_text("101 dalmatians\n")
    elif kind == "random":
        path.write_bytes(np.random.RandomState(0).bytes(4096))
    elif kind == "foreign":
        torch.save({"weights": torch.zeros(3)}, path)
    elif kind == "future":
        d = torch.load(path, weights_only=True)
        d["version"] = 99
        torch.save(d, path)


@pytest.mark.parametrize("kind,message", [
    ("empty", "is empty"), ("truncated", "cannot read the file"), ("text", "cannot read the file"),
    ("random", "cannot read the file"), ("foreign", "is not a file written by ARClassifier.save"),
    ("future", "format version 99"),
])
def test_damaged_files_name_the_path_and_the_problem(tmp_path, fitted, kind, message):
    path = tmp_path / "m.pt"
    fitted[0].save(path)
    _damaged(path, kind)
    with pytest.raises(ValueError, match=message) as info:
        ARClassifier.load(path)
    assert "m.pt" in str(info.value)
    assert "weights_only=False" not in str(info.value)  # no advice to unpickle a corrupt file


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["param_state"]["params"].update(weight=torch.zeros(3, 7)), "expected"),
    (lambda d: d.update(classes=d["classes"][:1]), "at least 2"),
    (lambda d: d.update(classes=d["classes"] + [7]), "expected"),
    (lambda d: d.update(n_features_in=9), "expected"),
    (lambda d: d.update(likelihood="softmax"), "likelihood"),
    (lambda d: d["hyperparameters"].update(batch_size=-3), "batch_size"),
    (lambda d: d.pop("param_state"), "param_state"),
])
def test_inconsistent_files_are_refused_at_load_time(tmp_path, fitted, edit, message):
    path = tmp_path / "m.pt"
    fitted[0].save(path)
    d = torch.load(path, weights_only=True)
    edit(d)
    torch.save(d, path)
    with pytest.raises(ValueError, match=message):
        ARClassifier.load(path)


def test_a_failed_save_keeps_the_previous_file(tmp_path, fitted):
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    before = path.read_bytes()
    seed, clf._predict_seed = clf._predict_seed, lambda: 0  # cannot be pickled: the save fails
    try:
        with pytest.raises(Exception):
            clf.save(path)
    finally:
        clf._predict_seed = seed
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]  # no temporary file left
    assert np.array_equal(ARClassifier.load(path).predict(X), clf.predict(X))


def test_version_1_files_still_load(tmp_path, fitted):
    """Files of format version 1 (before standardisation) load as unstandardised A&R fits."""
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    d = torch.load(path, weights_only=True)
    d["version"] = 1
    d.pop("feature_scaling"), d.pop("likelihood")
    torch.save(d, path)
    loaded = ARClassifier.load(path)
    assert loaded.feature_mean_ is None and loaded.likelihood_ == "ar"


def test_load_payload_accepts_several_versions_and_names_them(tmp_path):
    path = tmp_path / "x.pt"
    atomic_save({"format": "f", "version": 3}, path)
    assert load_payload(path, "f", (2, 3))["version"] == 3
    with pytest.raises(ValueError, match="reads versions 1, 2"):
        load_payload(path, "f", (1, 2))
    with pytest.raises(ValueError, match="no .* file at"):
        load_payload(os.path.join(tmp_path, "missing.pt"), "f", 1)

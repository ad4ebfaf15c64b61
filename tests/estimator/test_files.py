"""Model files: atomic saves, and damaged, crafted or inconsistent files give named errors
(issue 12, items 1 and 4), for ARClassifier and for pyro_ar.files itself."""

import os

import numpy as np
import pytest
import torch

from pyro_ar.files import atomic_save, load_payload

sklearn = pytest.importorskip("sklearn")

from pyro_ar import ARClassifier  # noqa: E402
from pyro_ar.estimator import Weights  # noqa: E402
from pyro_ar.likelihoods import AR  # noqa: E402


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
        atomic_save(d, path)


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
    atomic_save(d, path)   # a well-formed file (a valid checksum) with inconsistent content
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
    d.pop("feature_scaling"), d.pop("likelihood"), d.pop("checksum")
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


# ---- issue 25: lost attributes, unloadable labels, flipped bytes, killed saves, hand-made files
def _same_fit(a, b, X):
    for name in ("training_path_", "n_partial_fits_", "prior_scale_", "prior_scale_scores_",
                 "n_iter_", "n_steps_"):
        assert getattr(a, name) == getattr(b, name), name
    assert np.array_equal(a.predict_proba(X), b.predict_proba(X))


def test_a_loaded_estimator_continues_partial_fit_and_warm_start(tmp_path):
    """Item 2: save kept neither training_path_ nor n_partial_fits_ / prior_scale_(scores_):
    partial_fit and warm-start fits of a loaded estimator raised AttributeError."""
    rng = np.random.RandomState(1)
    X = rng.randn(150, 4)
    y = X[:, :3].argmax(1)
    stream = ARClassifier(weights=Weights("map", prior_scale=(0.5, 2.0)), random_state=0)
    stream.partial_fit(X[:75], y[:75], classes=[0, 1, 2])
    stream.save(tmp_path / "s.pt")
    loaded = ARClassifier.load(tmp_path / "s.pt")
    _same_fit(loaded, stream, X)
    _same_fit(loaded.partial_fit(X[75:], y[75:]), stream.partial_fit(X[75:], y[75:]), X)
    assert loaded.n_partial_fits_ == 2

    warm = ARClassifier(weights=Weights("map", prior_scale=(0.5, 2.0)), warm_start=True, min_steps=0, max_epochs=1, random_state=0).fit(X, y)
    assert warm.prior_scale_scores_ is not None
    warm.save(tmp_path / "w.pt")
    loaded = ARClassifier.load(tmp_path / "w.pt")
    _same_fit(loaded, warm, X)
    _same_fit(loaded.fit(X, y), warm.fit(X, y), X)


def test_labels_that_would_not_load_are_refused_before_writing(tmp_path, fitted):
    """Item 3: function labels pickled, but the file then needed weights_only=False."""
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    before = path.read_bytes()
    odd = ARClassifier(min_steps=0, max_epochs=1, random_state=0).fit(
        X, np.array([len, abs, max], dtype=object)[X[:, :3].argmax(1)])
    with pytest.raises(ValueError, match=r"labels .*built-in function len.*weights_only=False"):
        odd.save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["m.pt"]


def _flip_tensor_bytes(path, count=16):
    """Flip ``count`` bytes in the middle of the largest tensor record of a torch zip file."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        info = max((i for i in z.infolist() if "/data/" in i.filename), key=lambda i: i.file_size)
        z.fp.seek(info.header_offset + 26)
        name_len, extra_len = np.frombuffer(z.fp.read(4), dtype="<u2")
    start = info.header_offset + 30 + int(name_len) + int(extra_len) + info.file_size // 2 - count // 2
    data = bytearray(path.read_bytes())
    for i in range(start, start + count):
        data[i] ^= 0xA5
    path.write_bytes(bytes(data))


def test_flipped_bytes_in_a_tensor_are_an_error_naming_the_file(tmp_path, fitted):
    """Item 6: 16 flipped bytes inside a tensor loaded silently and changed predict_proba."""
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    _flip_tensor_bytes(path)
    assert torch.load(path, weights_only=True)  # still a readable torch file
    with pytest.raises(ValueError, match=r"m\.pt.* is damaged.*checksum"):
        ARClassifier.load(path)


def test_a_save_killed_midway_leaves_a_temporary_file_that_the_next_save_removes(tmp_path, fitted):
    """Item 7: SIGKILL during a save left .NAME.xxxx.tmp behind (a model's size each)."""
    import signal
    import subprocess
    import sys
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    before = path.read_bytes()
    script = (
        "import io, os, signal, sys, torch\n"
        "from pyro_ar import ARClassifier\n"
        "clf = ARClassifier.load(sys.argv[1])\n"
        "real = torch.save\n"
        "def dying(obj, f, *a, **k):\n"
        "    if isinstance(f, io.BytesIO):\n"
        "        return real(obj, f, *a, **k)\n"
        "    f.write(b'partial' * 1000); f.flush(); os.kill(os.getpid(), signal.SIGKILL)\n"
        "torch.save = dying\n"
        "clf.save(sys.argv[1])\n")
    import pyro_ar
    root = os.path.dirname(os.path.dirname(pyro_ar.__file__))   # the pyro_ar under test
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-c", script, str(path)], env=env, capture_output=True)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    left = [p.name for p in tmp_path.iterdir() if p.name != "m.pt"]
    assert len(left) == 1 and left[0].startswith(".m.pt.") and left[0].endswith(".tmp")
    assert path.read_bytes() == before          # the target survived
    (tmp_path / ".m.pt.abcd1234.tmp").write_bytes(b"left by an older pyro_ar")
    live = tmp_path / f".m.pt.{os.getppid()}@elsewhere.abcd1234.tmp"   # another host: kept
    live.write_bytes(b"another host")
    clf.save(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["m.pt", live.name])


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["param_state"]["constraints"].update(weight="nope"), "constraint of parameter 'weight' is 'nope'"),
    (lambda d: d["param_state"]["constraints"].update(weight="__class__"), "constraint of parameter"),
    (lambda d: d["fit"].update(n_partial_fits_=-5), "n_partial_fits_"),
    (lambda d: d["fit"].update(training_path_=[True, -2, "shared"]), "training_path_"),
    (lambda d: d["fit"].update(training_path_=[True, None, "sideways"]), "strategy"),
    (lambda d: d["fit"].pop("n_partial_fits_"), "n_partial_fits_"),
    (lambda d: d["fit"]["loss_curve_"].__setitem__(0, float("inf")), "loss_curve_ must be a list of finite"),
    (lambda d: d.pop("checksum"), "no checksum"),
])
def test_hand_made_files_are_refused_with_named_errors(tmp_path, fitted, edit, message):
    """Item 15: well-formed (valid checksum) but hand-made content gave AttributeError."""
    path = tmp_path / "m.pt"
    fitted[0].save(path)
    d = torch.load(path, weights_only=True)
    edit(d)
    atomic_save(d, path, checksum="checksum" in d)
    with pytest.raises(ValueError, match=message):
        ARClassifier.load(path)


def test_saving_to_a_folder_names_the_folder_not_a_temporary_file(tmp_path, fitted):
    with pytest.raises(IsADirectoryError, match="it is a folder") as info:
        fitted[0].save(tmp_path)
    assert ".tmp" not in str(info.value) and str(tmp_path) in str(info.value)
    with pytest.raises(FileNotFoundError, match="does not exist") as info:
        fitted[0].save(tmp_path / "missing" / "m.pt")
    assert ".tmp" not in str(info.value)
    assert not list(tmp_path.iterdir())


def test_version_4_files_with_the_flat_keywords_still_load(tmp_path, fitted):
    """Version 4 files hold the 24 flat keywords of the constructor before issue 40: they load
    through params_from_plain (class_weight and local_learning_rate, which acted on the fit
    only, dropped), to the same predictions."""
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    d = torch.load(path, weights_only=True)
    d["version"] = 4
    d["hyperparameters"] = dict(
        noise="normal", num_negatives=5, strategy="auto", weights="map", prior_scale=1.0, batch_size=1024,
        max_epochs=2, num_steps=None, learning_rate=0.01, local_learning_rate=0.1, num_posterior_samples=32,
        early_stopping=True, validation_fraction=0.2, n_iter_no_change=5, tol=1e-4, random_state=0,
        device="cpu", verbose=False, standardize=True, likelihood="auto", min_steps=0, class_weight=None,
        warm_start=False, rank="auto")
    atomic_save(d, path)
    loaded = ARClassifier.load(path)
    params = loaded.get_params(deep=False)
    assert repr(params["likelihood"]) == repr(AR("normal", 5)) and params["weights"] == Weights(prior_scale=1.0)
    assert params["early_stopping"] == {"validation_fraction": 0.2} and params["max_epochs"] == 2
    np.testing.assert_array_equal(loaded.predict(X), clf.predict(X))


def test_likelihood_and_weights_objects_save_as_plain_data(tmp_path):
    """Format version 5 stores an AR likelihood of a named noise and a Weights as plain data:
    the file loads with weights_only=True and gives the same objects back."""
    rng = np.random.RandomState(0)
    X = rng.randn(60, 4)
    y = X[:, :3].argmax(1)
    clf = ARClassifier(likelihood=AR("logistic", 2), weights=Weights("mle", rank=2), min_steps=0, max_epochs=1,
                       random_state=0).fit(X, y)
    path = tmp_path / "m.pt"
    clf.save(path)
    loaded = ARClassifier.load(path)
    assert repr(loaded.likelihood) == repr(clf.likelihood) and loaded.weights == clf.weights
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


# ---- issue 28: one constraint codec for estimator files and checkpoints
def test_version_3_files_with_constraint_names_still_load(tmp_path, fitted):
    """Version 3 files stored each constraint by its bare name; version 4 files use the codec
    of the checkpoints (pyro_ar.files.encode_constraint). Both load, to the same predictions."""
    from pyro_ar.files import encode_constraint
    clf, X = fitted
    path = tmp_path / "m.pt"
    clf.save(path)
    d = torch.load(path, weights_only=True)
    assert d["version"] == 6
    for n, c in clf.param_state_["constraints"].items():
        assert d["param_state"]["constraints"][n] == encode_constraint(c, n)
    d["version"] = 3
    d["param_state"]["constraints"] = {n: c["__constraint__"] for n, c in d["param_state"]["constraints"].items()}
    atomic_save(d, path)
    loaded = ARClassifier.load(path)
    assert loaded.param_state_["constraints"] == clf.param_state_["constraints"]
    np.testing.assert_array_equal(loaded.predict_proba(X), clf.predict_proba(X))


def test_an_unpickled_estimator_saves_its_constraints_by_name(tmp_path, fitted):
    """Unpickled constraints are copies of the named ones: still encoded by name."""
    import pickle
    clf, X = fitted
    copy = pickle.loads(pickle.dumps(clf))
    copy.save(tmp_path / "m.pt")
    d = torch.load(tmp_path / "m.pt", weights_only=True)
    assert all(set(c) == {"__constraint__"} for c in d["param_state"]["constraints"].values())
    np.testing.assert_array_equal(ARClassifier.load(tmp_path / "m.pt").predict_proba(X), clf.predict_proba(X))


def test_a_save_that_cannot_write_names_the_file_and_the_likely_cause(fitted, tmp_path):
    """A disk filling during a save gave torch's ``RuntimeError: [enforce fail at
    inline_container.cc] unexpected pos`` with no path (issue 38). Emulated by a file-size
    limit (RLIMIT_FSIZE: a write past it fails as on a full disk); the previous file survives."""
    resource = pytest.importorskip("resource")
    import signal

    path, (fitted, _) = tmp_path / "model.pt", fitted
    fitted.save(path)
    before = path.read_bytes()
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1024, hard))
    try:
        with pytest.raises(OSError, match=rf"cannot save to '{path}': writing it failed .* may be full .* unchanged"):
            fitted.save(path)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)
    assert path.read_bytes() == before and os.listdir(tmp_path) == ["model.pt"]

"""pyro_ar.cli: ``python -m pyro_ar fit / predict / evaluate`` on tiny synthetic files (text in
the XMC repository's format, and scipy .npz as PECOS), and its answers against the Python API's
for the same seed.

The console entry runs end to end through a subprocess (``--help``, a multi-label fit, a bad
file's exit status); the other commands call :func:`pyro_ar.cli.main`, the function behind it,
in this process (a subprocess spends 2 CPU s importing torch before it starts). The subprocesses
inherit the environment (the thread count included), so a fit in the command line and the same
fit in this process run the same floating-point operations: the predictions are compared
exactly, the log-likelihood to 1e-9 (relative)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sp = pytest.importorskip("scipy.sparse")
pytest.importorskip("sklearn")

from pyro_ar import ARClassifier  # noqa: E402
from pyro_ar.cli import main, read_scores  # noqa: E402
from pyro_ar.datasets import read_svmlight  # noqa: E402
from pyro_ar.estimator import Weights  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: a small fit: 100 steps at a fixed prior scale (no search)
FIT_FLAGS = ["--max-epochs", "2", "--random-state", "3", "--prior-scale", "1.0", "--param", "min_steps=100",
             "--param", "batch_size=64"]
FIT_PARAMS = dict(weights=Weights('map', prior_scale=1.0), max_epochs=2, random_state=3, min_steps=100, batch_size=64)


def run(*args, ok=True):
    """``python -m pyro_ar *args`` from the repository root (this checkout's package)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "pyro_ar", *map(str, args)], capture_output=True,
                         text=True, cwd=ROOT, env=env, timeout=300)
    assert (out.returncode == 0) == ok, (out.returncode, out.stdout, out.stderr)
    return out


def cli(capsys, *args):
    """``main(args)`` in this process (the commands behind ``python -m pyro_ar``): exits 0; its stdout."""
    capsys.readouterr()
    assert main(list(map(str, args))) == 0
    return capsys.readouterr().out


def _teacher(n, D=8, K=6, labels=2, seed=0):
    """Rows whose ``labels`` largest teacher utilities (Gumbel noise) are their label set."""
    rng = np.random.RandomState(seed)
    X = rng.randn(n, D)
    S = X @ rng.randn(K, D).T + rng.gumbel(size=(n, K))
    return X, (S >= np.sort(S, 1)[:, [-labels]]).astype(np.int64), S.argmax(1)


def _write_text(path, X, Y):
    """The XMC repository's text format: header ``N D L``, rows ``l1,l2 f:v ...``."""
    lines = [f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}"]
    for x, y in zip(X, Y):
        lines.append(",".join(map(str, np.flatnonzero(y))) + " " +
                     " ".join(f"{j}:{v:.17g}" for j, v in enumerate(x)))
    Path(path).write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """Train / test files of a multi-label teacher (text) and a one-label one (.npz)."""
    d = tmp_path_factory.mktemp("cli")
    X, Y, one = _teacher(260)
    _write_text(d / "train.txt", X[:200], Y[:200])
    _write_text(d / "test.txt", X[200:], Y[200:])
    for name, rows in (("train", slice(0, 200)), ("test", slice(200, None))):
        sp.save_npz(d / f"X_{name}.npz", sp.csr_matrix(X[rows].astype(np.float32)))
        y = one[rows]
        sp.save_npz(d / f"Y_{name}.npz", sp.csr_matrix((np.ones(len(y), np.float32), (np.arange(len(y)), y)),
                                                       shape=(len(y), 6)))
    return d


def test_help_shows_an_example_and_the_console_script_is_declared():
    out = run("--help")
    assert "usage: pyro-ar" in out.stdout and "pyro-ar fit -x train.txt -m model.pt" in out.stdout
    tomllib = pytest.importorskip("tomllib")  # (Python >= 3.11)
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, _, name = scripts["pyro-ar"].partition(":")
    assert (module, name) == ("pyro_ar.cli", "main")


@pytest.mark.slow  # long (issue 40: the default tier under 3 CPU minutes); CI runs the slow tier
def test_multilabel_text_files_fit_predict_evaluate_as_the_python_api(files, capsys):
    d = files
    assert "label sets, 2.00 labels per row" in run("fit", "-x", d / "train.txt", "-m", d / "ml.pt", "-q",
                                                    *FIT_FLAGS).stdout
    cli(capsys, "predict", "-x", d / "test.txt", "-m", d / "ml.pt", "-o", d / "P.npz", "-k", 5)
    cli(capsys, "predict", "-x", d / "test.txt", "-m", d / "ml.pt", "-o", d / "P.txt", "-k", 3)
    X, Y = read_svmlight(d / "train.txt")
    Xt, Yt = read_svmlight(d / "test.txt")
    api = ARClassifier(**FIT_PARAMS).fit(X, Y)  # the Python API on the same rows and seed
    top, probs = api.predict_top_k(Xt, 5, return_proba=True)
    ranked, scores = read_scores(d / "P.npz")
    assert np.array_equal(ranked, top) and np.array_equal(scores, probs)
    ranked3, scores3 = read_scores(d / "P.txt")
    assert np.array_equal(ranked3, top[:, :3]) and np.array_equal(scores3, probs[:, :3])  # (17 digits)
    got = json.loads(cli(capsys, "evaluate", "-y", d / "test.txt", "-p", d / "P.npz", "--json"))
    hits = np.take_along_axis(Yt.toarray().astype(np.float64), top, 1)  # P@k from its definition
    for k in (1, 3, 5):
        assert got[f"P@{k}"] == pytest.approx(hits[:, :k].sum(1).mean() / k, rel=1e-12)
    assert got["P@1"] == pytest.approx(api.score(Xt, Yt), rel=1e-12)
    with_model = json.loads(cli(capsys, "evaluate", "-y", d / "test.txt", "-m", d / "ml.pt", "-x", d / "test.txt",
                                "--json", "--train-labels", d / "train.txt"))
    assert with_model["log_lik"] == pytest.approx(api.log_likelihood(Xt, Yt), rel=1e-9)
    assert {k: with_model[k] for k in got} == got and 0 < with_model["PSP@3"] <= 1


def test_one_label_npz_files_as_pecos_match_the_python_api(files, capsys):
    d = files
    cli(capsys, "fit", "-x", d / "X_train.npz", "-y", d / "Y_train.npz", "-m", d / "one.pt", "-q", *FIT_FLAGS)
    got = json.loads(cli(capsys, "evaluate", "-y", d / "Y_test.npz", "-m", d / "one.pt", "-x", d / "X_test.npz",
                         "--json", "-k", 1, 2))
    X, Xt = (sp.load_npz(d / f"X_{s}.npz") for s in ("train", "test"))
    y, yt = (sp.load_npz(d / f"Y_{s}.npz").indices.astype(np.int64) for s in ("train", "test"))
    api = ARClassifier(**FIT_PARAMS).fit(X, y)
    assert not api.multilabel_ and ARClassifier.load(d / "one.pt").n_steps_ == api.n_steps_
    assert got["accuracy"] == pytest.approx(api.score(Xt, yt), rel=1e-12)
    assert got["top2"] == pytest.approx((api.predict_top_k(Xt, 2) == yt[:, None]).any(1).mean(), rel=1e-12)
    assert got["log_lik"] == pytest.approx(api.log_likelihood(Xt, yt), rel=1e-9)


def test_evaluate_hand_computed_metrics(tmp_path, capsys):
    """Rankings written by hand: row 0 ranks 3, 0, 1 against {0, 4}; row 1 ranks 2, 1 (one
    prediction short) against {1, 2}; P@1 = 1/2, P@3 = (1/3 + 2/3) / 2, nDCG@3 of row 0
    (1/log2 3) / (1 + 1/log2 3), of row 1 (1 + 1/log2 3) / (1 + 1/log2 3) = 1."""
    (tmp_path / "P.txt").write_text("3:0.5 0:0.3 1:0.1\n2:0.6 1:0.2\n")
    (tmp_path / "Y.txt").write_text("0,4 0:1\n1,2 0:1\n")
    assert main(["evaluate", "-y", str(tmp_path / "Y.txt"), "-p", str(tmp_path / "P.txt"), "-k", "1", "3",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    g = 1 / np.log2(3)
    assert got["P@1"] == pytest.approx(0.5) and got["P@3"] == pytest.approx(0.5)
    assert got["nDCG@3"] == pytest.approx((g / (1 + g) + 1) / 2)
    (tmp_path / "y1.txt").write_text("1 0:1\n0 0:1\n4 0:1\n")
    (tmp_path / "P1.txt").write_text("1:0.9 0:0.1\n1:0.6 0:0.4\n2:0.7 3:0.2\n")
    assert main(["evaluate", "-y", str(tmp_path / "y1.txt"), "-p", str(tmp_path / "P1.txt"), "-k", "1", "2",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"accuracy": pytest.approx(1 / 3), "top2": pytest.approx(2 / 3)}


def test_a_bad_file_is_named_with_exit_status_2_and_no_traceback(tmp_path):
    out = run("fit", "-x", tmp_path / "missing.txt", "-m", tmp_path / "m.pt", ok=False)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip() == f"pyro-ar: error: {tmp_path / 'missing.txt'}: no such file (expected features X " \
                                 f"(rows x features))"


def _bad_files(d: Path):
    """``(argv, file named, what the message says)`` for one bad input each."""
    (d / "junk.npz").write_text("not a zip")
    np.savez(d / "dense.npz", a=np.ones(3))
    sp.save_npz(d / "X.npz", sp.csr_matrix(np.ones((4, 3), np.float32)))
    sp.save_npz(d / "Y3.npz", sp.csr_matrix(np.eye(3, dtype=np.float32)))
    sp.save_npz(d / "Y2.npz", sp.csr_matrix(2 * np.eye(4, 3, dtype=np.float32)))
    sp.save_npz(d / "Ynan.npz", sp.csr_matrix(np.array([[np.nan, 1.0]])))
    (d / "two.txt").write_text("0,1 0:1\n1 0:2\n")
    (d / "model.pt").write_bytes(b"\x00" * 64)
    (d / "P.txt").write_text("1:0.5 x:0.2\n")
    (d / "text.txt").write_text("hello world\n")
    x, m = ["-x", str(d / "X.npz")], ["-m", str(d / "out.pt")]
    return [
        (["fit", "-x", str(d / "junk.npz"), "-y", str(d / "Y3.npz"), *m], "junk.npz", "not an .npz file"),
        (["fit", "-x", str(d / "dense.npz"), "-y", str(d / "Y3.npz"), *m], "dense.npz", "not a scipy.sparse matrix"),
        (["fit", *x, *m], "X.npz", "give the labels with -y"),
        (["fit", *x, "-y", str(d / "Y3.npz"), *m], "Y3.npz", "3 rows, but"),
        (["fit", *x, "-y", str(d / "Y2.npz"), *m], "Y2.npz", "every entry 0 or 1"),
        (["fit", *x, "-y", str(d / "Ynan.npz"), *m], "Ynan.npz", "non-finite"),
        (["fit", "-x", str(d / "two.txt"), "--labels", "one", *m], "two.txt", "row 0 has 2 labels"),
        (["fit", "-x", str(d / "text.txt"), *m], "text.txt", "XMC text format"),
        (["predict", *x, "-m", str(d / "model.pt"), "-o", str(d / "P.npz")], "model.pt", "not a model file"),
        (["predict", *x, "-m", str(d / "absent.pt"), "-o", str(d / "P.npz")], "absent.pt", "no such file"),
        (["evaluate", "-y", str(d / "two.txt"), "-p", str(d / "P.txt")], "P.txt", "line 1 holds 'x:0.2'"),
        (["evaluate", "-y", str(d / "two.txt"), "-p", str(d / "junk.npz")], "junk.npz", "expected predictions"),
        (["evaluate", "-y", str(d / "two.txt")], "-p P.npz", "needs the predictions"),
        (["fit", "-x", str(d / "two.txt"), *m, "--param", "nonsense=1"], "nonsense", "ARClassifier hyper-parameter"),
    ]


def test_bad_files_and_options_are_named(tmp_path, capsys):
    for argv, named, says in _bad_files(tmp_path):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("pyro-ar") and named in err and says in err, (argv, err)


def test_a_model_of_other_features_is_refused(files, capsys):
    sp.save_npz(files / "X_wide.npz", sp.csr_matrix(np.ones((3, 9), np.float32)))
    if not (files / "one.pt").exists():  # (the test above writes it; alone, fit here)
        ARClassifier(**FIT_PARAMS).fit(np.eye(8)[[0, 1, 2, 3] * 5], [0, 1, 2, 3] * 5).save(files / "one.pt")
    assert main(["predict", "-x", str(files / "X_wide.npz"), "-m", str(files / "one.pt"), "-o",
                 str(files / "o.npz")]) == 2
    err = capsys.readouterr().err
    assert "X_wide.npz: 9 feature columns; expected 8, the number the model was fitted on" in err


def test_verbose_shows_the_fit_and_predict_progress_bars(files, capsys, monkeypatch):
    import pyro_ar.cli as cli

    model = files / "verbose.pt"
    assert main(["fit", "-x", str(files / "train.txt"), "-m", str(model), "--verbose", *FIT_FLAGS]) == 0
    err = capsys.readouterr().err
    assert "ARClassifier: 400 rows" in err  # (row, label) pairs: 200 rows x 2 labels
    assert "ARClassifier fit: 100%" in err and "100/100" in err
    monkeypatch.setattr(cli, "PREDICT_CHUNK", 16)  # 60 rows: 4 chunks, a bar over the rows
    assert main(["predict", "-x", str(files / "test.txt"), "-m", str(model), "-o", str(files / "v.txt"), "-v"]) == 0
    err = capsys.readouterr().err
    assert "pyro-ar predict" in err and "60/60" in err
    assert main(["predict", "-x", str(files / "test.txt"), "-m", str(model), "-o", str(files / "q.txt"), "-q"]) == 0
    assert capsys.readouterr().err == "" and (files / "q.txt").read_text() == (files / "v.txt").read_text()


def test_a_model_of_named_classes_predicts_to_text_only(tmp_path, capsys):
    """Classes that are not column indices (a Python API fit on words) have no .npz column."""
    X = np.random.RandomState(0).randn(40, 3)
    ARClassifier(**FIT_PARAMS).fit(X, np.where(X[:, 0] > 0, "yes", "no")).save(tmp_path / "words.pt")
    sp.save_npz(tmp_path / "X.npz", sp.csr_matrix(X[:5]))
    argv = ["predict", "-x", str(tmp_path / "X.npz"), "-m", str(tmp_path / "words.pt"), "-k", "2", "-o"]
    assert main(argv + [str(tmp_path / "P.npz")]) == 2
    assert "P.npz: the model's classes are not column indices (e.g. 'no')" in capsys.readouterr().err
    assert main(argv + [str(tmp_path / "P.txt")]) == 0
    rows = [line.split() for line in (tmp_path / "P.txt").read_text().splitlines()]
    assert len(rows) == 5 and all(sorted(p.split(":")[0] for p in r) == ["no", "yes"] for r in rows)

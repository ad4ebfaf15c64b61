r"""The command line, ``python -m pyro_ar`` (or ``pyro-ar``): ``fit``, ``predict`` and
``evaluate`` on files, in the conventions of the extreme-classification tools.

Files, told apart by their name:

* ``*.npz`` -- a ``scipy.sparse`` matrix written by ``scipy.sparse.save_npz``, as PECOS
  reads them: features ``X`` (N, D); labels ``Y`` (N, L), a 0/1 indicator; scores ``P``
  (N, L), the top-k probabilities of each row (what ``predict`` writes);
* any other name -- the Extreme Classification Repository's text format (optional header
  ``N D L``, then one row per line, ``l1,l2 f:v f:v ...``; read by
  :func:`pyro_ar.datasets.read_svmlight`), which holds the features *and* the labels; or, for
  ``predict -o`` and ``evaluate -p``, one line per row of ``label:probability`` pairs, best
  first.

**Labels.** A label file whose rows all hold exactly one label is a one-label-per-row problem
(``--labels auto``, the default): ``ARClassifier`` is fitted on the column indices, and
``evaluate`` reports accuracy, top-k accuracy and (with the model) the mean log-likelihood.
Any other file (a row with several labels, or none) is multi-label: the estimator is fitted on
the indicator (the pick-all-labels objective of :mod:`pyro_ar.label_sets`), and ``evaluate``
reports P@k and nDCG@k (:func:`pyro_ar.evaluation.ranking_metrics`), PSP@k when
``--train-labels`` gives the training labels for the propensities, and (with the model) the
mean log-likelihood over the (row, label) pairs. Labels are column indices ``0 .. L-1``.

**Models** are written and read by :meth:`ARClassifier.save <pyro_ar.ARClassifier.save>` /
:meth:`~pyro_ar.ARClassifier.load` (tensors and plain containers with a checksum; nothing is
unpickled).

**Errors.** A bad file (missing, not what its name says, wrong shape, rows that do not match,
not a model) or a bad option stops with a one-line message on stderr naming the file and what
was expected, exit status 2, no traceback.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

__all__ = ["main", "build_parser", "BadInput", "read_features", "read_labels", "read_scores", "write_scores"]

PROG = "pyro-ar"
EXAMPLES = """\
examples (the XMC repository's text format; or scipy .npz files, as PECOS):
  pyro-ar fit -x train.txt -m model.pt --max-epochs 5 --random-state 0
  pyro-ar predict -x test.txt -m model.pt -o scores.npz --top-k 5
  pyro-ar evaluate -y test.txt -p scores.npz --train-labels train.txt
  python -m pyro_ar fit -x X.npz -y Y.npz -m model.pt --param batch_size=256
  python -m pyro_ar evaluate -x X_test.npz -y Y_test.npz -m model.pt
"""
#: rows predicted per call of the estimator (and per step of the progress bar)
PREDICT_CHUNK = 4096
MODEL_FILE = "a model file written by `pyro-ar fit` (ARClassifier.save)"


class BadInput(Exception):
    """A file or option the command cannot use: ``main`` prints ``pyro-ar: error: <message>``
    and exits with status 2 (no traceback).

    Example:

    >>> from pyro_ar.cli import read_labels
    >>> read_labels("/nonexistent/Y.npz")
    Traceback (most recent call last):
    ...
    pyro_ar.cli.BadInput: /nonexistent/Y.npz: no such file (expected labels Y (a 0/1 indicator, rows x labels))
    """


# ------------------------------------------------------------------ reading and writing files
def _is_npz(path: Path) -> bool:
    return path.suffix.lower() == ".npz"


def _exists(path: Path, what: str) -> Path:
    if not path.is_file():
        raise BadInput(f"{path}: no such file (expected {what})")
    return path


def _load_sparse(path: Path, what: str):
    """A scipy CSR matrix from an ``.npz`` written by ``scipy.sparse.save_npz``."""
    import scipy.sparse as sp

    _exists(path, what)
    if not zipfile.is_zipfile(path):
        raise BadInput(f"{path}: not an .npz file (expected {what}, written by scipy.sparse.save_npz)")
    try:
        m = sp.load_npz(path)
    except Exception as e:  # noqa: BLE001  (a numpy .npz of other arrays, a damaged archive)
        raise BadInput(f"{path}: not a scipy.sparse matrix (expected {what}, written by "
                       f"scipy.sparse.save_npz): {type(e).__name__}: {e}") from None
    if m.ndim != 2 or m.shape[0] == 0:
        raise BadInput(f"{path}: a matrix of shape {m.shape}; expected {what} with at least one row")
    m = m.tocsr()
    if m.nnz and not np.isfinite(m.data).all():
        raise BadInput(f"{path}: holds non-finite values; expected {what} of finite numbers")
    m.sort_indices()
    return m


def _read_text(path: Path, what: str, num_features: Optional[int] = None):
    """``(X, Y)`` of a file in the XMC repository's text format."""
    from .datasets import read_svmlight

    _exists(path, what)
    try:
        return read_svmlight(path, num_features=num_features)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadInput(f"{path}: not readable as {what} in the XMC text format "
                       f"(header 'N D L', rows 'l1,l2 f:v ...'): {e}") from None


def read_features(path, num_features: Optional[int] = None):
    """``(X, Y or None)``: features (CSR float32/64, (N, D)) of an ``.npz``, or features and
    labels of a text file (read with ``num_features`` columns when given).

    Example:

    >>> import os, tempfile
    >>> from pyro_ar.cli import read_features
    >>> path = os.path.join(tempfile.mkdtemp(), "train.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("2 3 4\\n0,3 0:1.5 2:1\\n1 1:2\\n")      # header N D L, rows
    >>> X, Y = read_features(path)
    >>> X.toarray().tolist(), Y.toarray().tolist()
    ([[1.5, 0.0, 1.0], [0.0, 2.0, 0.0]], [[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    """
    path = Path(path)
    what = "features X (rows x features)"
    if _is_npz(path):
        X = _load_sparse(path, what)
        if num_features is not None and X.shape[1] != num_features:
            raise BadInput(f"{path}: {X.shape[1]} feature columns; expected {num_features}, the "
                           f"number the model was fitted on")
        return X, None
    return _read_text(path, what, num_features)


def read_labels(path):
    """The 0/1 label indicator (CSR, (N, L)) of an ``.npz`` or of a text file's labels.

    Example:

    >>> import os, tempfile
    >>> import numpy as np, scipy.sparse as sp
    >>> from pyro_ar.cli import read_labels
    >>> path = os.path.join(tempfile.mkdtemp(), "Y.npz")
    >>> sp.save_npz(path, sp.csr_matrix(np.array([[1, 0, 1], [0, 1, 0]])))
    >>> read_labels(path).toarray().tolist()
    [[1, 0, 1], [0, 1, 0]]
    """
    path = Path(path)
    what = "labels Y (a 0/1 indicator, rows x labels)"
    if not _is_npz(path):
        return _read_text(path, what)[1]
    Y = _load_sparse(path, what)
    Y.eliminate_zeros()
    if Y.nnz and not (Y.data == 1).all():
        bad = Y.data[Y.data != 1][0]
        raise BadInput(f"{path}: holds the value {bad}; expected {what}, every entry 0 or 1")
    return Y


def read_scores(path) -> Tuple[np.ndarray, np.ndarray]:
    """``(ranked, scores)`` of predictions, each (N, m): the classes of each row by decreasing
    score (ties: the lower class first) and their scores; a row with fewer than m predictions is
    padded with class ``-1`` and score ``-inf``. From a scores ``.npz`` (N, L) or a text file of
    ``label:score`` pairs, one line per row.

    Example (row 1 has one prediction):

    >>> import os, tempfile
    >>> from pyro_ar.cli import read_scores
    >>> path = os.path.join(tempfile.mkdtemp(), "P.txt")
    >>> with open(path, "w") as f:
    ...     _ = f.write("3:0.7 0:0.2\\n1:0.9\\n")
    >>> ranked, scores = read_scores(path)
    >>> ranked.tolist(), scores.tolist()
    ([[3, 0], [1, -1]], [[0.7, 0.2], [0.9, -inf]])
    """
    path = Path(path)
    what = "predictions (scores rows x labels, as `pyro-ar predict` writes)"
    if _is_npz(path):
        P = _load_sparse(path, what)
        rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
        order = np.lexsort((P.indices, -P.data.astype(np.float64), rows))
        return _padded(rows[order], P.indices[order], P.data[order], P.shape[0])
    _exists(path, what)
    rows, labels, scores = [], [], []
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f):  # reading a file, not a hot path
            for item in line.split():
                label, sep, score = item.partition(":")
                try:
                    pair = int(label), float(score) if sep else np.nan
                except ValueError:
                    raise BadInput(f"{path}: line {n + 1} holds {item!r}; expected {what}: "
                                   f"'label:score' pairs with integer labels") from None
                rows.append(n), labels.append(pair[0]), scores.append(pair[1])
    if not rows:
        raise BadInput(f"{path}: holds no predictions; expected {what}")
    return _padded(np.asarray(rows), np.asarray(labels), np.asarray(scores, dtype=np.float64), n + 1)


def _padded(rows: np.ndarray, labels: np.ndarray, scores: np.ndarray, n: int):
    """(n, m) arrays of the (row-grouped, in-order) predictions, padded by -1 / -inf."""
    counts = np.bincount(rows, minlength=n)
    m = max(int(counts.max()), 1)
    slot = np.arange(len(rows)) - np.repeat(np.cumsum(counts) - counts, counts)
    ranked, out = np.full((n, m), -1, dtype=np.int64), np.full((n, m), -np.inf)
    ranked[rows, slot], out[rows, slot] = labels, scores
    return ranked, out


def write_scores(path, labels: np.ndarray, probs: np.ndarray, num_labels: int) -> None:
    """Write the top-k ``labels`` (N, k) and their ``probs``: a CSR ``.npz`` (N, num_labels)
    of float64 probabilities, or text lines of ``label:probability`` pairs, best first.

    Example (the CSR keeps the scores, :func:`read_scores` recovers the order):

    >>> import os, tempfile
    >>> import numpy as np
    >>> from pyro_ar.cli import read_scores, write_scores
    >>> path = os.path.join(tempfile.mkdtemp(), "P.npz")
    >>> write_scores(path, np.array([[4, 1], [0, 2]]), np.array([[0.6, 0.3], [0.5, 0.4]]), num_labels=5)
    >>> read_scores(path)[0].tolist()
    [[4, 1], [0, 2]]
    """
    path = Path(path)
    if _is_npz(path):
        import scipy.sparse as sp

        n, k = labels.shape
        P = sp.csr_matrix((probs.reshape(-1), labels.reshape(-1).astype(np.int64), np.arange(0, n * k + 1, k)),
                          shape=(n, num_labels))
        P.sort_indices()
        sp.save_npz(path, P)
        return
    with open(path, "w", encoding="utf-8") as f:
        for row, p in zip(labels.tolist(), probs.tolist()):
            f.write(" ".join(f"{c}:{v:.17g}" for c, v in zip(row, p)) + "\n")


def _same_rows(a, b, path_a, path_b) -> None:
    if a.shape[0] != b.shape[0]:
        raise BadInput(f"{path_b}: {b.shape[0]} rows, but {path_a} has {a.shape[0]}; expected one "
                       f"row per row of {path_a}")


def _with_width(Y, width: int):
    """``Y`` with ``width`` columns (extra empty columns, or dropping empty ones)."""
    if Y.shape[1] < width:
        Y = Y.copy()
        Y.resize((Y.shape[0], width))
    return Y


def _one_label_per_row(Y, mode: str, path) -> bool:
    """Whether the labels ``Y`` are one label per row (``--labels``: auto / one / sets)."""
    one = bool((np.diff(Y.indptr) == 1).all())
    if mode == "one" and not one:
        row = int(np.flatnonzero(np.diff(Y.indptr) != 1)[0])
        raise BadInput(f"{path}: row {row} has {Y.indptr[row + 1] - Y.indptr[row]} labels; "
                       f"--labels one expects exactly one label per row")
    return one and mode != "sets"


# ------------------------------------------------------------------ fit
def _param_value(text: str):
    """A ``--param`` value: a Python literal (number, None, True, list, ...) or else a string."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def estimator_params(args) -> Dict:
    """The ``ARClassifier`` keyword arguments of ``fit``'s options (``--param key=value`` last; the
    flat keywords -- ``noise``, ``num_negatives``, ``prior_scale``, ``rank``, ``num_steps``, ... --
    translated by :func:`pyro_ar.estimator.params_from_plain`)."""
    from .estimator import ARClassifier, params_from_plain
    from .estimator._params import REMOVED

    params = {"max_epochs": args.max_epochs, "random_state": args.random_state,
              "verbose": args.verbose if args.verbose is not None else sys.stderr.isatty()}
    if args.noise is not None:
        params["noise"] = args.noise
    for name in ("num_negatives", "num_steps", "batch_size", "learning_rate", "weights", "prior_scale"):
        if getattr(args, name) is not None:
            params[name] = getattr(args, name)
    known = set(ARClassifier().get_params(deep=False)) | set(REMOVED) - {"class_weight", "local_learning_rate"}
    for item in args.param or ():
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or key not in known:
            raise BadInput(f"--param {item!r}: expected key=value with key an ARClassifier "
                           f"hyper-parameter, one of {sorted(known)}")
        params[key] = _param_value(value.strip())
    return params_from_plain(params)


def cmd_fit(args) -> int:
    """``fit``: train ``ARClassifier`` on the files and save it."""
    from .estimator import ARClassifier

    X, Y = read_features(args.x)
    if args.y is not None:
        Y = read_labels(args.y)
    elif Y is None:
        raise BadInput(f"{args.x}: an .npz holds features only; give the labels with -y Y.npz")
    labels_path = args.y or args.x
    _same_rows(X, Y, args.x, labels_path)
    if Y.nnz == 0:
        raise BadInput(f"{labels_path}: no row has a label; expected labels to fit on")
    one = _one_label_per_row(Y, args.labels, labels_path)
    est = ARClassifier(**estimator_params(args))
    est.fit(X, Y.indices.astype(np.int64) if one else Y)
    est.save(args.model)
    kind = "one label per row" if one else f"label sets, {Y.nnz / X.shape[0]:.2f} labels per row"
    print(f"fitted ARClassifier on {X.shape[0]:,} rows, {X.shape[1]:,} features, {len(est.classes_):,} "
          f"classes ({kind}), {est.n_steps_:,} SVI steps; saved {args.model}")
    return 0


# ------------------------------------------------------------------ predict
def load_model(path):
    """An ``ARClassifier`` from a file written by ``fit`` (a named error for any other file)."""
    from .estimator import ARClassifier

    path = _exists(Path(path), MODEL_FILE)
    try:
        return ARClassifier.load(path)
    except ValueError as e:  # (its message names the path: said once here)
        reason = str(e).replace(repr(str(path)), "it").replace(str(path), "it")
        raise BadInput(f"{path}: not {MODEL_FILE}: {reason[:160] + '...' if len(reason) > 160 else reason}") from None


def predict_top(est, X, k: int, verbose: bool) -> Tuple[np.ndarray, np.ndarray]:
    """The top-``k`` labels and probabilities of the rows of ``X``, (N, k) each, in chunks of
    :data:`PREDICT_CHUNK` rows (a progress bar with ``verbose``)."""
    from .infer.progress import phase_bar

    K = len(est.classes_)
    if not 1 <= k <= K:
        raise BadInput(f"--top-k {k}: expected an integer in [1, {K}] (the model's number of classes)")
    n = X.shape[0]
    parts = []
    with phase_bar(n, f"{PROG} predict", verbose and n > PREDICT_CHUNK, unit="row") as bar:
        for start in range(0, n, PREDICT_CHUNK):  # chunks of rows, each predicted at once
            parts.append(est.predict_top_k(X[start:start + PREDICT_CHUNK], k, return_proba=True))
            if bar is not None:
                bar.update(min(PREDICT_CHUNK, n - start))
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _label_width(est, out) -> int:
    """The number of score columns: the largest class + 1 (classes must be column indices)."""
    classes = np.asarray(est.classes_)
    if not (np.issubdtype(classes.dtype, np.integer) and classes.min() >= 0):
        if _is_npz(Path(out)):
            raise BadInput(f"{out}: the model's classes are not column indices (e.g. {classes.tolist()[0]!r}); "
                           f"write text predictions instead (-o scores.txt)")
        return len(classes)
    return int(classes.max()) + 1


def cmd_predict(args) -> int:
    """``predict``: the top-k labels of each row with their probabilities, to a file."""
    est = load_model(args.model)
    X, _ = read_features(args.x, num_features=est.n_features_in_)
    verbose = args.verbose if args.verbose is not None else sys.stderr.isatty()
    width = _label_width(est, args.output)  # (before the predictions: a refusal comes first)
    labels, probs = predict_top(est, X, args.top_k, verbose)
    write_scores(args.output, labels, probs, width)
    print(f"wrote the top {args.top_k} labels of {X.shape[0]:,} rows to {args.output}")
    return 0


# ------------------------------------------------------------------ evaluate
def _ranking_functions():
    """``(ranking_metrics, label_propensities)`` of :mod:`pyro_ar.evaluation`."""
    from .evaluation import label_propensities, ranking_metrics

    return ranking_metrics, label_propensities


def _ranking(ranked: np.ndarray, Y):
    """``(ranked, Y)`` for the metrics: missing predictions (class -1) become distinct empty
    columns ``L + slot``, and ``Y`` is widened to hold every ranked class."""
    L = max(Y.shape[1], int(ranked.max()) + 1)
    missing = ranked < 0
    if missing.any():
        ranked = np.where(missing, L + np.arange(ranked.shape[1]), ranked)
        L += ranked.shape[1]
    return ranked, _with_width(Y, L)


def evaluation_metrics(ranked: np.ndarray, Y, ks: Sequence[int], one: bool,
                       train_labels=None) -> Dict[str, float]:
    """Accuracy and top-k accuracy (one label per row), or P@k, nDCG@k and PSP@k (label sets,
    PSP with the ``train_labels`` indicator) of the rankings ``ranked`` (N, m) against ``Y``."""
    ranked, Y = _ranking(ranked, Y)
    if one:
        hits = ranked == Y.indices[:, None]
        return {("accuracy" if k == 1 else f"top{k}"): float(hits[:, :k].any(1).mean()) for k in ks}
    metrics, propensities = _ranking_functions()
    p = None
    if train_labels is not None:
        width = max(Y.shape[1], train_labels.shape[1])
        p = propensities(_with_width(train_labels, width))
        Y = _with_width(Y, width)
    return metrics(ranked, Y, ks=tuple(ks), propensities=p)


def model_log_likelihood(est, X, Y) -> Tuple[float, int]:
    """``(mean log-likelihood, pairs left out)`` of the model on the (row, label) pairs of ``Y``
    whose label is one of its classes (:meth:`ARClassifier.log_likelihood`)."""
    rows = np.repeat(np.arange(Y.shape[0]), np.diff(Y.indptr))
    known = np.isin(Y.indices, est.classes_)
    left_out = int((~known).sum())
    if not known.any():
        return float("nan"), left_out
    if not getattr(est, "multilabel_", False):  # one label per pair: (1/P) sum log p(l | x)
        return float(est.log_likelihood(X[rows[known]], Y.indices[known])), left_out
    sets: List[list] = [[] for _ in range(Y.shape[0])]
    for r, label in zip(rows[known].tolist(), Y.indices[known].tolist()):  # reading, not a hot path
        sets[r].append(label)
    return float(est.log_likelihood(X, sets)), left_out


def _predictions(args, Y, k_max: int):
    """``(ranked, model, X)``: the rankings from ``-p``, or from the model ``-m`` on ``-x``."""
    if args.predictions is not None:
        ranked, _ = read_scores(args.predictions)
        _same_rows(Y, ranked, args.y, args.predictions)
        return ranked, None, None
    if args.model is None or args.x is None:
        raise BadInput("evaluate needs the predictions (-p P.npz) or the model and features (-m model.pt -x X)")
    est = load_model(args.model)
    X, _ = read_features(args.x, num_features=est.n_features_in_)
    _same_rows(X, Y, args.x, args.y)
    k = min(k_max, len(est.classes_))
    return predict_top(est, X, k, bool(args.verbose))[0], est, X


def cmd_evaluate(args) -> int:
    """``evaluate``: the metrics of predictions (``-p``) or of a model (``-m``, ``-x``) against labels."""
    Y = read_labels(args.y)
    ks = sorted(set(args.k))
    if min(ks) < 1:
        raise BadInput(f"-k {min(ks)}: expected ranks k >= 1")
    ranked, est, X = _predictions(args, Y, max(ks))
    one = _one_label_per_row(Y, args.labels, args.y)
    usable = [k for k in ks if k <= ranked.shape[1]]
    if len(usable) < len(ks):
        print(f"{PROG}: note: {args.predictions or 'the model'} ranks {ranked.shape[1]} labels per row; "
              f"k > {ranked.shape[1]} left out", file=sys.stderr)
    train = read_labels(args.train_labels) if args.train_labels is not None and not one else None
    out = evaluation_metrics(ranked, Y, usable, one, train) if usable else {}
    if est is not None:
        out["log_lik"], left_out = model_log_likelihood(est, X, Y)
        if left_out:
            print(f"{PROG}: note: log_lik over the labels the model knows; {left_out} (row, label) "
                  f"pairs of {args.y} have labels never seen in training", file=sys.stderr)
    if args.json:
        print(json.dumps(out))
    else:
        for name, value in out.items():
            print(f"{name:>9} {value:.6f}")
    return 0


# ------------------------------------------------------------------ the parser
def _add_verbosity(p) -> None:
    g = p.add_mutually_exclusive_group()
    g.add_argument("--verbose", "-v", dest="verbose", action="store_true", default=None,
                   help="show progress bars (default: when stderr is a terminal)")
    g.add_argument("--quiet", "-q", dest="verbose", action="store_false", help="no progress bars")


def _add_labels_mode(p) -> None:
    p.add_argument("--labels", choices=("auto", "one", "sets"), default="auto",
                   help="one label per row or label sets (default auto: one when every row has exactly one)")


def build_parser() -> argparse.ArgumentParser:
    """The ``argparse`` parser of ``pyro-ar`` and its three commands.

    Example:

    >>> from pyro_ar.cli import build_parser
    >>> args = build_parser().parse_args(["predict", "-x", "X.npz", "-m", "model.pt", "-o", "P.npz"])
    >>> args.command, args.top_k
    ('predict', 5)
    """
    fmt = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog=PROG, formatter_class=fmt, epilog=EXAMPLES,
                                     description="Augment & Reduce classifiers on files: fit, predict, evaluate.")
    sub = parser.add_subparsers(dest="command", metavar="{fit,predict,evaluate}", required=True)
    fit = sub.add_parser("fit", help="train a model on features and labels", formatter_class=fmt,
                         epilog=EXAMPLES, description="Train ARClassifier and save it (ARClassifier.save).")
    fit.add_argument("-x", required=True, help="features: X.npz, or a text file with labels and features")
    fit.add_argument("-y", help="labels: Y.npz (0/1 indicator) or a text file (default: the labels of -x)")
    fit.add_argument("-m", "--model", required=True, help="the model file to write")
    fit.add_argument("--noise", help="noise of the random utilities (default gumbel: softmax)")
    fit.add_argument("--max-epochs", type=int, default=20, help="passes over the data (default 20)")
    fit.add_argument("--random-state", type=int, default=0, help="seed (default 0)")
    fit.add_argument("--num-negatives", type=int, help="classes sampled per likelihood estimate")
    fit.add_argument("--num-steps", type=int, help="exact number of SVI steps (overrides --max-epochs)")
    fit.add_argument("--batch-size", type=int, help="rows per SVI step")
    fit.add_argument("--learning-rate", type=float, help="Adam step size")
    fit.add_argument("--weights", choices=("map", "mle", "bayes"), help="point (map, mle) or Bayesian weights")
    fit.add_argument("--prior-scale", type=_param_value, help="prior standard deviation of W, or auto")
    fit.add_argument("--param", action="append", metavar="KEY=VALUE",
                     help="any other ARClassifier hyper-parameter (repeatable), e.g. --param min_steps=200")
    _add_labels_mode(fit)
    _add_verbosity(fit)
    fit.set_defaults(run=cmd_fit)
    pred = sub.add_parser("predict", help="write the top-k labels of each row with their probabilities",
                          formatter_class=fmt, epilog=EXAMPLES)
    pred.add_argument("-x", required=True, help="features: X.npz or a text file")
    pred.add_argument("-m", "--model", required=True, help="a model file written by fit")
    pred.add_argument("-o", "--output", required=True,
                      help="P.npz (CSR rows x labels of probabilities) or a text file (label:probability pairs)")
    pred.add_argument("-k", "--top-k", type=int, default=5, help="labels per row (default 5)")
    _add_verbosity(pred)
    pred.set_defaults(run=cmd_predict)
    ev = sub.add_parser("evaluate", help="P@k / nDCG@k / PSP@k, or accuracy / top-k / log-likelihood",
                        formatter_class=fmt, epilog=EXAMPLES)
    ev.add_argument("-y", required=True, help="true labels: Y.npz or a text file")
    ev.add_argument("-p", "--predictions", help="predictions written by predict (P.npz or text)")
    ev.add_argument("-m", "--model", help="a model (instead of -p; adds the log-likelihood), with -x")
    ev.add_argument("-x", help="features of the rows of -y (with -m)")
    ev.add_argument("-k", type=int, nargs="+", default=[1, 3, 5], help="ranks k (default 1 3 5)")
    ev.add_argument("--train-labels", help="training labels, for the propensities of PSP@k")
    ev.add_argument("--json", action="store_true", help="print the metrics as one JSON object")
    _add_labels_mode(ev)
    _add_verbosity(ev)
    ev.set_defaults(run=cmd_evaluate)
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run ``pyro-ar`` with ``argv`` (default ``sys.argv[1:]``); the exit status.

    Example (row 0 has labels 0 and 2 and ranks 2 first; row 1 has label 1 and ranks it second):

    >>> import os, tempfile
    >>> from pyro_ar.cli import main
    >>> d = tempfile.mkdtemp()
    >>> with open(os.path.join(d, "Y.txt"), "w") as f:
    ...     _ = f.write("0,2 0:1\\n1 0:1\\n")
    >>> with open(os.path.join(d, "P.txt"), "w") as f:
    ...     _ = f.write("2:0.7 1:0.2\\n0:0.6 1:0.3\\n")
    >>> main(["evaluate", "-y", os.path.join(d, "Y.txt"), "-p", os.path.join(d, "P.txt"), "-k", "1", "2"])
          P@1 0.500000
       nDCG@1 0.500000
          P@2 0.500000
       nDCG@2 0.622...
    0
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except BadInput as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
    except ValueError as e:  # a hyper-parameter or a label the estimator refuses, named by it
        print(f"{PROG} {args.command}: error: {e}", file=sys.stderr)
    return 2

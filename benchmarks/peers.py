"""Extreme classification against the field's tools (issues 24, 36): multi-class and
multi-label sets through ``ARClassifier`` and its peers, on the same rows, one thread, CPU
time, peak memory.

Data (``--dataset``; :mod:`benchmarks.peers_data`): multi-class -- ``wordnet``
(:func:`pyro_ar.datasets.load_wordnet_reverse_dictionary`, K = 26,793 words, D = 27,000
tokens, 74,868 / 11,097 rows), ``gcide`` (:func:`pyro_ar.datasets.load_gcide_reverse_dictionary`,
K = 23,875), ``synthetic`` (:func:`pyro_ar.datasets.make_sparse_teacher`); multi-label --
``wordnet_synsets`` (``pyro_ar.datasets.load_wordnet_synsets``: synsets, their glosses' words,
their lemmas as labels), ``bibtex_ml`` (``load_bibtex(reduction=None)``: all 159 tags),
``synthetic_ml`` (teacher rows with 1-3 labels drawn from the teacher's softmax). Real sets
are read from ``<--data-dir>/wordnet``, ``/gcide``, ``/bibtex`` (default: the library's data
root); a loader this copy of pyro_ar lacks is a clear error. ``--quick`` keeps 300 random
classes (labels; synthetic: a small problem) and runs in seconds.

Features (``--features binary|tfidf``, default ``tfidf``): the rows every peer trains and
predicts on -- the loader's rows, or the tf-idf rows ``ARClassifier()`` builds inside (idf
fitted on the training rows, rows L2-normalised: ``fit_scaler(idf=True)``); made before the
timed fit. ``pyro_ar`` always gets the loader's rows (``ARClassifier()`` makes its own
rows inside, in its timed fit); fastText reads tokens (no weights). The tf-idf centroid is
the floor row of every table, whatever ``--features``.

Methods (``--methods``, comma-separated; default all but ``fasttext_softmax``):

* ``centroid`` -- nearest class centroid: the cosine of a row with the sum of each class's
  training rows (multi-label: every (row, label) pair). No training, no probabilities: the
  floor a trained linear model must beat (on the tf-idf rows, ``ARClassifier()``'s start);
* ``frequency`` -- the training label frequencies, the same ranking for every row;
* ``omikuji`` -- omikuji's partitioned label trees (Parabel-like), default hyper-parameters;
* ``napkinxc`` -- napkinXC's probabilistic label tree (``PLT``), defaults;
* ``pecos`` -- PECOS XR-Linear (``libpecos``) with its README's defaults: PIFA label
  embeddings (``LabelEmbeddingFactory.create(Y, X)``), a hierarchical k-means tree
  (``Indexer.gen``), ``XLinearModel.train(X, Y, C=tree)``; ``predict(only_topk=100)``;
* ``fasttext_hs`` / ``fasttext_ns`` -- fastText supervised on the rows' tokens, dim 100,
  hierarchical softmax or 5 negatives, 25 epochs at lr 0.5 (its default 5 epochs at lr 0.1
  learn almost nothing with 3 rows per class); ``fasttext_softmax`` only when named;
* ``adaptive`` -- ``torch.nn.EmbeddingBag(D, 100)`` + ``nn.AdaptiveLogSoftmaxWithLoss``
  (frequency-ranked classes; head: the classes of the first half of the training rows, first
  tail: the next quarter, div_value 4), Adam (lr 0.01, batch 256), early stopping on 10% of
  the training rows (patience 2 epochs, at most 30);
* ``pyro_ar`` -- ``ARClassifier()`` with no arguments (multi-label: ``fit(X, Y)`` with Y the
  CSR indicator, ranked by ``predict_top_k``; a pyro_ar without them reports the row
  ``unavailable``); ``--pyro-ar-variants`` adds ``ARClassifier(**kwargs)`` per JSON object.
  With ``--quick``, ``max_epochs=2`` unless the variant sets it.

omikuji, napkinXC, PECOS and the centroid train on label sets natively; fastText and the
adaptive softmax are multi-class only (``multi-class only`` on multi-label sets).

Metrics on the test rows (:mod:`benchmarks.peers_data`). Multi-class: mean log-likelihood
log p(y | x) (nats), top-1/5/10 accuracy, P@1/5 against the row's label set
(``info["test_label_sets"]``; on WordNet 47% of the test glosses occur verbatim in training
labelled with a synonym, so top-1 is capped and P@1 much higher). omikuji, napkinXC, PECOS
and fastText return their top ``TOP`` = 100 labels with scores; their log-likelihood uses the
**top-k rule**: those scores are the probabilities of those labels (scaled down to sum to
1 - 1e-6 if they sum to more), the remaining mass spread evenly over the other K - 100
labels. The centroid has none. Multi-label: P@1/3/5, nDCG@1/3/5 and PSP@1/3/5 with the
A = 0.55, B = 1.5 propensities of the training labels (``pyro_ar.evaluation.ranking_metrics``).

Each row runs alone in a fresh subprocess (``OMP_NUM_THREADS=1`` etc.,
``torch.set_num_threads(1)``, one thread for every peer): train CPU s = ``time.process_time``
of the fit only (loading, the features and the peers' input files are not counted,
prediction is timed apart); peak RSS = that process's ``VmHWM`` (its data included;
``rss_data_mb``: the resident set once the rows are made). A method whose package is not
installed is reported ``missing`` (``pip install 'pyro-ar[peers]'``).

PECOS: ``libpecos`` 1.2.8 declares numpy < 2 and scipy < 1.14 (and calls APIs they removed).
Where the environment has newer ones, install those two into a folder of their own
(``pip install --no-deps --target DIR 'numpy<2' 'scipy<1.14'``) and give it as
``--pecos-path DIR`` (default ``$PYRO_AR_PECOS_PATH``): only the PECOS process puts it first
on its path (its row's ``details.versions`` says what it ran with).

    python -m benchmarks.peers [--dataset wordnet|gcide|synthetic|wordnet_synsets|bibtex_ml|synthetic_ml]
        [--features binary|tfidf] [--data-dir DIR] [--quick] [--pecos-path DIR]
        [--methods centroid,frequency,omikuji,napkinxc,pecos,fasttext_hs,fasttext_ns,adaptive,pyro_ar]
        [--pyro-ar-variants '{"strategy": "shared"}'] [--out DIR]

Prints one table and writes ``peers_<dataset>_<features>[_quick].json`` to ``--out``.
"""

import argparse
import importlib.machinery
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import tempfile

import numpy as np
import torch

from benchmarks import harness
from benchmarks.harness import peak_bytes, rss_bytes, table
from benchmarks.peers_data import (FEATURES, KS, ML_KS, MULTICLASS_SETS, MULTILABEL_SETS, QUICK_CLASSES,
                                   DatasetUnavailable, featurize, label_lists, load, metrics, pad_top,
                                   ranking_scores, top_of_scores)

#: the environment of every method's process (numpy / torch read it when they are imported)
THREAD_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS")}

METHODS = ("centroid", "frequency", "omikuji", "napkinxc", "pecos", "fasttext_hs", "fasttext_ns", "adaptive", "pyro_ar")
OPTIONAL = ("fasttext_softmax",)  # not in the default list: O(K) per row and epoch (an hour on WordNet)
MULTICLASS_ONLY = ("fasttext_hs", "fasttext_ns", "fasttext_softmax", "adaptive")
PACKAGE = {"omikuji": "omikuji", "napkinxc": "napkinxc", "pecos": "pecos", "fasttext_hs": "fasttext",
           "fasttext_ns": "fasttext", "fasttext_softmax": "fasttext", "pyro_ar": "sklearn"}
DISTRIBUTION = {"omikuji": "omikuji", "napkinxc": "napkinxc", "pecos": "libpecos", "fasttext": "fasttext-wheel",
                "sklearn": "scikit-learn"}
FLOOR = ("centroid", "tfidf")  # the (method, features) row in every table
TOP = 100            # labels returned by the top-k-only methods
MIN_REST = 1e-6      # the top-k rule's least mass left for the other labels


class Unavailable(RuntimeError):
    """The method cannot run on this data with the installed packages (the row says why)."""


def token_lines(X, tokens, labels=None):
    """Each row as text: its tokens (fastText's input), with ``__label__<y>`` first when given."""
    out = []
    for n in range(X.shape[0]):
        words = " ".join(tokens[j] for j in X.indices[X.indptr[n]:X.indptr[n + 1]])
        out.append(words if labels is None else f"__label__{labels[n]} {words}")
    return out


def topk_rule_log_lik(labels, probs, y, K):
    """log p(y) under the top-k rule: p = the listed probability (scaled so that the list sums
    to at most 1 - MIN_REST) if y is listed, else the remaining mass / (K - listed)."""
    out = np.empty(len(y))
    for n, (ls, ps) in enumerate(zip(labels, probs)):
        ps = np.clip(np.asarray(ps, dtype=np.float64), 0.0, None)
        total = ps.sum()
        if total > 1 - MIN_REST:
            ps, total = ps * (1 - MIN_REST) / total, 1 - MIN_REST
        hit = np.flatnonzero(np.asarray(ls) == y[n])
        rest = max(K - len(ls), 1)
        out[n] = np.log(ps[hit[0]]) if len(hit) and ps[hit[0]] > 0 else np.log((1 - total) / rest)
    return out


def listed(labels, probs, d):
    """Ragged top-k labels and scores -> (top (n, TOP), log p(y | x) by the top-k rule, or None
    for a multi-label set)."""
    return pad_top(labels, TOP), None if d.multilabel else topk_rule_log_lik(labels, probs, d.yt, d.K)


# ------------------------------------------------------------------ methods: fit(d, opts) -> model;
# predict(model, d) -> (top (n, TOP) labels, log p(y | x) (n,) or None)
def fit_centroid(d, opts):
    import scipy.sparse as sp

    C = sp.csr_matrix(d.Y.T @ d.X)  # class sums over the (row, label) pairs; the cosine ignores 1 / count
    norms = np.sqrt(C.multiply(C).sum(1).A1)
    return sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ C).T.tocsr()


def predict_centroid(C, d, chunk=512):
    tops = [top_of_scores((d.Xt[i:i + chunk] @ C).toarray(), TOP) for i in range(0, d.Xt.shape[0], chunk)]
    return np.concatenate(tops), None


def fit_frequency(d, opts):
    counts = np.asarray(d.Y.sum(0), dtype=np.float64).ravel()
    return np.log(np.maximum(counts, 1e-300) / counts.sum())


def predict_frequency(logp, d):
    top = np.argsort(-logp, kind="stable")[:TOP]
    return np.tile(top, (d.Xt.shape[0], 1)), None if d.multilabel else logp[d.yt]


def xmc_file(path, X, Y):
    """The extreme-classification repository's text format (header N D L; rows 'l1,l2 j:v ...')."""
    with open(path, "w") as f:
        f.write(f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n")
        for n, labels in enumerate(label_lists(Y)):
            lo, hi = X.indptr[n], X.indptr[n + 1]
            feats = [f"{j}:{v:.6g}" for j, v in zip(X.indices[lo:hi], X.data[lo:hi])]
            f.write(" ".join([",".join(map(str, labels))] + feats) + "\n")
            # (no trailing space after the labels of an empty row: omikuji refuses that line)


def fit_omikuji(d, opts):
    import omikuji

    return omikuji.Model.train_on_data(opts["train_file"], omikuji.Model.default_hyper_param(), n_threads=1)


def predict_omikuji(model, d):
    model.init_prediction_thread_pool(1)
    labels, probs = [], []
    for n in range(d.Xt.shape[0]):
        lo, hi = d.Xt.indptr[n], d.Xt.indptr[n + 1]
        pred = model.predict(list(zip(d.Xt.indices[lo:hi].tolist(), d.Xt.data[lo:hi].tolist())), top_k=TOP)
        labels.append([int(p[0]) for p in pred])
        probs.append([float(p[1]) for p in pred])
    return listed(labels, probs, d)


def fit_napkinxc(d, opts):
    from napkinxc.models import PLT

    model = PLT(opts["model_dir"], threads=1, seed=0)
    model.fit(d.X, opts["label_lists"])
    return model


def predict_napkinxc(model, d):
    pred = model.predict_proba(d.Xt, top_k=TOP)
    return listed([[int(p[0]) for p in row] for row in pred], [[float(p[1]) for p in row] for row in pred], d)


def check_pecos_stack():
    """libpecos 1.2.8 calls ``scipy.sparse.sputils.get_index_dtype`` (gone in scipy 1.14) and
    ``np.array(copy=False)`` (an error in numpy 2): say so rather than fail inside it."""
    import scipy

    old = int(np.__version__.split(".")[0]) < 2 and tuple(int(v) for v in scipy.__version__.split(".")[:2]) < (1, 14)
    if not old:
        raise Unavailable(f"libpecos {importlib.metadata.version('libpecos')} needs numpy < 2 and scipy < 1.14 "
                          f"(its declared pins); this process has numpy {np.__version__}, scipy "
                          f"{scipy.__version__}: pip install --no-deps --target DIR 'numpy<2' 'scipy<1.14' "
                          f"and pass --pecos-path DIR (or set PYRO_AR_PECOS_PATH)")


def fit_pecos(d, opts):
    from pecos.xmc import Indexer, LabelEmbeddingFactory
    from pecos.xmc.xlinear.model import XLinearModel

    tree = Indexer.gen(LabelEmbeddingFactory.create(d.Y, d.X), threads=1)
    return XLinearModel.train(d.X, d.Y, C=tree, threads=1)


def predict_pecos(model, d):
    Xt = d.Xt.sorted_indices()  # (PECOS reads the rows as sorted)
    P = model.predict(Xt, only_topk=TOP, threads=1).tocsr()
    labels, probs = [], []
    for n in range(P.shape[0]):
        lo, hi = P.indptr[n], P.indptr[n + 1]
        order = np.argsort(-P.data[lo:hi], kind="stable")
        labels.append(P.indices[lo:hi][order].tolist())
        probs.append(P.data[lo:hi][order].tolist())
    return listed(labels, probs, d)


def fasttext_fitter(loss):
    def fit(d, opts):
        import fasttext

        return fasttext.train_supervised(input=opts["train_file"], loss=loss, dim=100, epoch=25, lr=0.5,
                                         minCount=1, thread=1, seed=0, verbose=0)
    return fit


def predict_fasttext(model, d):
    pred_labels, pred_probs = model.predict(token_lines(d.Xt, d.tokens), k=TOP)
    return listed([[int(s[len("__label__"):]) for s in ls] for ls in pred_labels], pred_probs, d)


class BagAdaptive(torch.nn.Module):
    """Sum of the row's weighted token embeddings -> adaptive softmax over the frequency-ranked classes."""

    def __init__(self, D, K, cutoffs, dim=100):
        super().__init__()
        self.emb = torch.nn.EmbeddingBag(D, dim, mode="sum")
        self.out = torch.nn.AdaptiveLogSoftmaxWithLoss(dim, K, cutoffs, div_value=4.0)

    def forward(self, X):
        as_long = lambda a: torch.from_numpy(np.asarray(a, dtype=np.int64))  # noqa: E731
        return self.emb(as_long(X.indices), as_long(X.indptr[:-1]), per_sample_weights=torch.from_numpy(X.data))


def frequency_cutoffs(counts):
    """Ranks where the frequency-sorted classes reach 1/2 and 3/4 of the training rows."""
    cum = np.cumsum(np.sort(counts)[::-1]) / counts.sum()
    c1 = int(np.searchsorted(cum, 0.5)) + 1
    c2 = int(np.searchsorted(cum, 0.75)) + 1
    K = len(counts)
    return [min(c1, K - 2), min(max(c2, c1 + 1), K - 1)]


def adaptive_log_lik(model, X, ranks, chunk=1024):
    with torch.no_grad():
        return torch.cat([model.out.log_prob(model(X[i:i + chunk]))[torch.arange(len(ranks[i:i + chunk])),
                                                                      torch.from_numpy(ranks[i:i + chunk])]
                          for i in range(0, X.shape[0], chunk)])


def fit_adaptive(d, opts, batch=256, max_epochs=30, patience=2):
    counts = np.bincount(d.y, minlength=d.K)
    class_of_rank = np.argsort(-counts, kind="stable")
    rank = np.empty(d.K, dtype=np.int64)
    rank[class_of_rank] = np.arange(d.K)
    torch.manual_seed(0)
    model = BagAdaptive(d.X.shape[1], d.K, frequency_cutoffs(counts))
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    perm = np.random.default_rng(0).permutation(len(d.y))
    val, tr = perm[:len(perm) // 10], perm[len(perm) // 10:]
    best, state, bad, history = -np.inf, None, 0, []
    for epoch in range(max_epochs):
        order = tr[np.random.default_rng(epoch + 1).permutation(len(tr))]
        for i in range(0, len(order), batch):
            rows = order[i:i + batch]
            loss = model.out(model(d.X[rows]), torch.from_numpy(rank[d.y[rows]])).loss
            opt.zero_grad()
            loss.backward()
            opt.step()
        v = float(adaptive_log_lik(model, d.X[val], rank[d.y[val]]).mean())
        history.append(v)
        if v > best:
            best, bad = v, 0
            state = {k: t.clone() for k, t in model.state_dict().items()}
        else:
            bad += 1
            if bad >= patience:
                break
    model.load_state_dict(state)
    model.info = dict(epochs=len(history), best_epoch=int(np.argmax(history)) + 1, val_log_lik=history,
                      cutoffs=model.out.cutoffs[:-1])
    return model, class_of_rank, rank


def predict_adaptive(fitted, d, chunk=512):
    model, class_of_rank, rank = fitted
    tops, lls = [], []
    with torch.no_grad():
        for i in range(0, d.Xt.shape[0], chunk):
            lp = model.out.log_prob(model(d.Xt[i:i + chunk])).numpy()
            lls.append(lp[np.arange(lp.shape[0]), rank[d.yt[i:i + chunk]]])
            tops.append(class_of_rank[top_of_scores(lp, TOP)])
    return np.concatenate(tops), np.concatenate(lls)


def fit_pyro_ar(d, opts):
    from pyro_ar import ARClassifier
    from pyro_ar.estimator import params_from_plain

    clf = ARClassifier(**params_from_plain(dict({"max_epochs": 2} if opts["quick"] else {}, **opts["kwargs"])))
    if not d.multilabel:
        return clf.fit(d.X, d.y)
    if not hasattr(clf, "predict_top_k"):
        raise Unavailable("multi-label: this ARClassifier has no predict_top_k (issue 36)")
    try:
        return clf.fit(d.X, d.Y)
    except (ValueError, TypeError) as e:
        raise Unavailable(f"multi-label: this ARClassifier's fit refused the (N, K) indicator Y: {e}") from e


def predict_pyro_ar(clf, d, chunk=256):
    if d.multilabel:
        return pad_top(clf.predict_top_k(d.Xt, min(TOP, len(clf.classes_))), TOP), None
    classes = clf.classes_
    codes = np.searchsorted(classes, d.yt)
    tops, lls = [], []
    for i in range(0, d.Xt.shape[0], chunk):
        lp = clf.predict_log_proba(d.Xt[i:i + chunk])
        lls.append(lp[np.arange(lp.shape[0]), codes[i:i + chunk]])
        tops.append(classes[top_of_scores(lp, TOP)])
    return np.concatenate(tops), np.concatenate(lls)


FITTERS = {
    "centroid": (fit_centroid, predict_centroid),
    "frequency": (fit_frequency, predict_frequency),
    "omikuji": (fit_omikuji, predict_omikuji),
    "napkinxc": (fit_napkinxc, predict_napkinxc),
    "pecos": (fit_pecos, predict_pecos),
    "fasttext_hs": (fasttext_fitter("hs"), predict_fasttext),
    "fasttext_ns": (fasttext_fitter("ns"), predict_fasttext),
    "fasttext_softmax": (fasttext_fitter("softmax"), predict_fasttext),
    "adaptive": (fit_adaptive, predict_adaptive),
    "pyro_ar": (fit_pyro_ar, predict_pyro_ar),
}


def rows_given(method, features):
    """What the method's fit reads: the ``features`` rows, or (pyro_ar) the loader's rows it
    standardises itself, (fastText) the tokens, (frequency) the labels only."""
    return {"pyro_ar": "own", "frequency": "none"}.get(method, "tokens" if method.startswith("fasttext") else features)


def inputs(method, d, folder, kwargs, quick):
    """The method's options and input files (written here, outside the timed fit)."""
    opts = {"kwargs": kwargs, "quick": quick, "model_dir": os.path.join(folder, "model"),
            "train_file": os.path.join(folder, "train")}
    if method == "omikuji":
        xmc_file(opts["train_file"], d.X, d.Y)
    elif method == "napkinxc":
        opts["label_lists"] = label_lists(d.Y)
    elif method == "pecos":
        check_pecos_stack()
    elif method.startswith("fasttext"):
        with open(opts["train_file"], "w") as f:
            f.write("\n".join(token_lines(d.X, d.tokens, d.y)) + "\n")
    return opts


def evaluate(method, d, features, kwargs=None, quick=False):
    """Fit ``method`` on ``d``'s training rows (as ``features`` makes them), rank the test
    rows, score them: a dict with the timings and the metrics (raises :class:`Unavailable`)."""
    fit, predict = FITTERS[method]
    if method in MULTICLASS_ONLY and d.multilabel:
        raise Unavailable(f"{method} is multi-class only")
    if d.multilabel:  # (before the fit: the scores need them)
        import pyro_ar.evaluation as ev

        if not all(hasattr(ev, f) for f in ("ranking_metrics", "label_propensities")):
            raise Unavailable("multi-label scores need pyro_ar.evaluation.ranking_metrics and label_propensities "
                              f"(issue 36), which this copy of pyro_ar ({ev.__file__}) does not have")
    if rows_given(method, features) in FEATURES:
        d = featurize(d, features)
    rss_data = rss_bytes()
    with tempfile.TemporaryDirectory() as folder:
        opts = inputs(method, d, folder, kwargs or {}, quick)
        t = harness.timer().start()
        model = fit(d, opts)
        train_cpu = t.cpu
        t = harness.timer().start()
        top, log_lik = predict(model, d)
        predict_cpu = t.cpu
    scores = ranking_scores(top, d.Yt, d.Y) if d.multilabel else metrics(top, log_lik, d.yt, d.label_sets)
    extra = getattr(model[0] if isinstance(model, tuple) else model, "info", None)
    if method == "pyro_ar":
        extra = dict(path=model.training_path_.describe(), epochs=model.n_iter_, steps=model.n_steps_)
    return dict(train_cpu_s=train_cpu, predict_cpu_s=predict_cpu, peak_rss_mb=peak_bytes() / 2**20,
                rss_data_mb=rss_data / 2**20, **scores, details=dict(info=extra, versions=versions(method)))


def versions(method):
    """The versions this process ran the method with (its package, numpy, scipy)."""
    out = {"numpy": np.__version__}
    for name in ("scipy",) + ((PACKAGE[method],) if method in PACKAGE else ()):
        try:
            out[name] = importlib.metadata.version(DISTRIBUTION.get(name, name))
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def worker(args):
    """One row in this (fresh) process: one JSON line (``status`` ok, or why not)."""
    torch.set_num_threads(1)
    try:
        res = dict(status="ok", **evaluate(args.worker, load(args.dataset, args.data_dir, args.quick),
                                           args.features, json.loads(args.variant), args.quick))
    except Unavailable as e:
        res = dict(status="unavailable", reason=str(e))
    print(json.dumps(res, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def pecos_path(args):
    return getattr(args, "pecos_path", None) or os.environ.get("PYRO_AR_PECOS_PATH") or None


def installed(method, args):
    """Whether the method's package can be imported (PECOS: also from ``--pecos-path``)."""
    if not PACKAGE.get(method):
        return True
    if importlib.util.find_spec(PACKAGE[method]) is not None:
        return True
    extra = pecos_path(args) if method == "pecos" else None
    return bool(extra) and importlib.machinery.PathFinder.find_spec(PACKAGE[method], [extra]) is not None


def run(method, variant, args, features=None):
    """One row in a subprocess; its JSON result, or a status saying why there is none."""
    if not installed(method, args):
        return {"status": "missing", "package": PACKAGE[method]}
    if method in MULTICLASS_ONLY and args.dataset in MULTILABEL_SETS:
        return {"status": "multi-class only"}
    cmd = harness.module_command(__spec__.name, "--worker", method, "--variant", json.dumps(variant),
                                 "--features", features or args.features, "--dataset", args.dataset) \
        + (["--data-dir", args.data_dir] if args.data_dir else []) + (["--quick"] if args.quick else [])
    env = harness.worker_env(pecos_path(args) if method == "pecos" else None, **THREAD_ENV)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {args.timeout} s"}
    if p.returncode != 0:
        return {"status": "failed", "stderr": p.stderr[-2000:]}
    return json.loads(p.stdout.strip().splitlines()[-1])


def plan(methods, args):
    """The rows: (method, features, variant), the tf-idf centroid floor first."""
    runs = [(m, args.features, {}) for m in methods]
    if "pyro_ar" in methods:
        runs += [("pyro_ar", args.features, json.loads(v)) for v in args.pyro_ar_variants]
    return ([] if (FLOOR[0], FLOOR[1], {}) in runs else [(*FLOOR, {})]) + runs


def columns(multilabel):
    head = [("method", "method", ""), ("rows", "features", ""), ("train CPU s", "train_cpu_s", ".1f"),
            ("predict CPU s", "predict_cpu_s", ".1f"), ("peak RSS MB", "peak_rss_mb", ".0f")]
    if multilabel:
        return head + [(f"{m}@{k}", f"{m.lower()}@{k}", ".4f") for m in ("P", "nDCG", "PSP") for k in ML_KS]
    return head + [("log-lik", "log_lik", ".3f")] + [(f"top-{k}", f"top{k}", ".4f") for k in KS] \
        + [("P@1", "p@1", ".4f"), ("P@5", "p@5", ".4f")]


def main(argv=None):
    ap = harness.parser(__doc__, quick_help=f"{QUICK_CLASSES} random classes (seconds)")
    ap.add_argument("--dataset", default="wordnet", choices=list(MULTICLASS_SETS + MULTILABEL_SETS))
    ap.add_argument("--features", default="tfidf", choices=list(FEATURES),
                    help="the rows every peer gets (default tfidf: ARClassifier()'s own)")
    ap.add_argument("--data-dir", default=None,
                    help="folder holding wordnet/, gcide/, bibtex/ (default: the data home, fetched into it if absent)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="comma-separated, from: " + ", ".join(METHODS + OPTIONAL))
    ap.add_argument("--pyro-ar-variants", nargs="*", default=[],
                    help="extra ARClassifier keyword arguments, one JSON object per variant")
    ap.add_argument("--pecos-path", default=None, help="a folder with numpy < 2 and scipy < 1.14 for the PECOS "
                    "process (default $PYRO_AR_PECOS_PATH)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per method")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS + OPTIONAL))
    if unknown:
        ap.error(f"--methods: unknown {unknown}; choose from {', '.join(METHODS + OPTIONAL)} (the former "
                 f"centroid_tfidf / omikuji_tfidf are --features tfidf)")
    harness.start(args)
    try:
        d = load(args.dataset, args.data_dir, args.quick)
    except DatasetUnavailable as e:
        ap.error(str(e))
    info = dict(dataset=args.dataset, features=args.features, quick=args.quick, multilabel=d.multilabel, K=d.K,
                D=d.X.shape[1], n_train=d.X.shape[0], n_test=d.Xt.shape[0], nnz_per_row=d.X.nnz / d.X.shape[0])
    info.update(dict(labels_per_row=d.Y.nnz / d.Y.shape[0], test_labels_per_row=d.Yt.nnz / d.Yt.shape[0])
                if d.multilabel else dict(uniform_log_lik=-float(np.log(d.K))))
    del d
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items()), flush=True)
    rows = []
    for method, features, variant in plan(methods, args):
        name = method + (" " + json.dumps(variant) if variant else "")
        res = dict(method=name, features=rows_given(method, features), floor=(method, features) == FLOOR,
                   **run(method, variant, args, features))
        rows.append(res)
        note = f"{res['train_cpu_s']:.1f} CPU s" if res["status"] == "ok" else res.get("reason", "")
        print(f"{name} [{res['features']}]: {res['status']}" + (f" ({note})" if note else ""), flush=True)
    cols = columns(info["multilabel"])
    shown = [dict(r, **{cols[5][1]: r.get(cols[5][1]) if r["status"] == "ok" else r["status"]}) for r in rows]
    print(table(shown, cols))
    if not info["multilabel"]:
        print(f"(uniform log-lik {info['uniform_log_lik']:.3f}; omikuji / napkinXC / PECOS / fastText: top-{TOP} rule)")
    harness.save(args, f"peers_{args.dataset}_{args.features}", dict(data=info, top_k_rule=TOP, results=rows))
    return rows


if __name__ == "__main__":
    main()

"""Extreme classification against the field's tools (issue 24): the reverse dictionaries through
``ARClassifier`` and its peers, one thread, CPU time, peak memory.

Data (``--dataset``): ``wordnet`` (:func:`pyro_ar.datasets.load_wordnet_reverse_dictionary`,
K = 26,793 words, D = 27,000 tokens, 74,868 / 11,097 rows), ``gcide``
(:func:`pyro_ar.datasets.load_gcide_reverse_dictionary`, K = 23,875) -- read from
``<--data-dir>/wordnet`` and ``<--data-dir>/gcide`` (default: the data home, where
:func:`pyro_ar.datasets.fetch_wordnet` and :func:`~pyro_ar.datasets.fetch_gcide` put them) -- or
``synthetic`` (:func:`pyro_ar.datasets.make_sparse_teacher`, for the tests). ``--quick``
keeps 300 random classes (synthetic: a small problem) and runs in seconds.

Methods (``--methods``, comma-separated; default all):

* ``centroid`` -- nearest class centroid: the cosine of a row with the mean of each class's
  (L2-normalised) training rows. No training, no probabilities: the floor a trained linear
  model must beat;
* ``centroid_tfidf`` -- the same on the rows ``ARClassifier`` trains its weight-pattern
  path on (idf-weighted, L2-normalised: ``fit_scaler(idf=True)``), the floor of its own
  starting point: what the training adds is pyro_ar's row minus this one;
* ``omikuji_tfidf`` (optional, ``--methods omikuji_tfidf``) -- omikuji on those tf-idf rows: the
  label tree given the same representation;
* ``frequency`` -- the training label frequencies, the same ranking for every row;
* ``omikuji`` -- omikuji's partitioned label trees (Parabel-like), default hyper-parameters;
* ``napkinxc`` -- napkinXC's probabilistic label tree (``PLT``), defaults;
* ``fasttext_hs`` / ``fasttext_ns`` -- fastText supervised on the rows' tokens (the
  vocabulary tokens of each row, written as text), dim 100, hierarchical softmax or negative
  sampling (5 negatives), 25 epochs at lr 0.5 (fastText's own advice for small data: its
  default 5 epochs at lr 0.1 learn almost nothing with 3 rows per class);
  ``fasttext_softmax`` (the full softmax, O(K) per row) only when named;
* ``adaptive`` -- ``torch.nn.EmbeddingBag(D, 100)`` (sum of the row's weighted token
  embeddings) + ``nn.AdaptiveLogSoftmaxWithLoss`` (classes ranked by training frequency; the
  head holds the classes of the first half of the training rows, the first tail those of
  the next quarter, div_value 4), Adam (lr 0.01, batch 256), early stopping on 10% of the
  training rows (patience 2 epochs, at most 30; the best epoch's weights);
* ``pyro_ar`` -- ``ARClassifier()`` with no arguments; ``--pyro-ar-variants`` adds
  ``ARClassifier(**kwargs)`` per JSON object (e.g. ``'{"strategy": "shared"}'``). With
  ``--quick``, ``max_epochs=2`` unless the variant sets it.

Metrics on the test rows: mean log-likelihood log p(y | x) (nats), top-1/5/10 accuracy, and
precision at 1 and 5 against the row's *label set* (``info["test_label_sets"]``: every word
defined by the same gloss, e.g. a synset's other words; P@k = |top k in the set| / k; on
WordNet 47% of the test glosses occur verbatim in training labelled with a synonym, so top-1
is capped for every method and P@1 is much higher).
omikuji, napkinXC and fastText return their top ``TOP`` = 100 labels with scores; their
log-likelihood uses the **top-k rule**: the scores s_1..s_100 are the probabilities of those
labels (scaled down to sum to 1 - 1e-6 if they sum to more) and the remaining mass
1 - sum(s) is spread evenly over the other K - 100 labels. The centroid has no
log-likelihood.

Each method runs alone in a fresh subprocess (``OMP_NUM_THREADS=1`` etc.,
``torch.set_num_threads(1)``, one thread for every peer): train CPU s = ``time.process_time``
of the fit only (the data loading and the peers' input files are not counted, prediction is
timed apart); peak RSS = that process's ``VmHWM`` (its data included; ``rss_data_mb`` is the
resident set after loading the data). A method whose package is not installed is reported
as ``missing`` (``pip install 'pyro-ar[peers]'``).

    python -m benchmarks.peers [--dataset wordnet|gcide|synthetic] [--data-dir DIR] [--quick]
        [--methods centroid,frequency,omikuji,napkinxc,fasttext_hs,fasttext_ns,adaptive,pyro_ar]
        [--pyro-ar-variants '{"strategy": "shared", "num_negatives": 256}'] [--out DIR]

Prints one table and writes ``peers_<dataset>[_quick].json`` to ``--out``.
"""

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from types import SimpleNamespace

import numpy as np
import torch

if not __package__:  # python benchmarks/NAME.py (python -m benchmarks.NAME needs nothing)
    import _path  # noqa: F401
from benchmarks import harness  # noqa: E402
from benchmarks.harness import peak_bytes, rss_bytes, table  # noqa: E402

#: the environment of every method's process (numpy / torch read it when they are imported)
THREAD_ENV = {v: "1" for v in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS")}

METHODS = ("centroid", "centroid_tfidf", "frequency", "omikuji", "napkinxc", "fasttext_hs", "fasttext_ns", "adaptive", "pyro_ar")
OPTIONAL = ("fasttext_softmax",  # not in the default list: O(K) per row and epoch (an hour on WordNet)
            "omikuji_tfidf")     # omikuji on the tf-idf rows ARClassifier's pattern path trains on
PACKAGE = {"omikuji": "omikuji", "omikuji_tfidf": "omikuji", "napkinxc": "napkinxc", "fasttext_hs": "fasttext", "fasttext_ns": "fasttext",
           "fasttext_softmax": "fasttext", "pyro_ar": "sklearn"}
TOP = 100            # labels returned by the top-k-only methods
MIN_REST = 1e-6      # the top-k rule's least mass left for the other labels
KS = (1, 5, 10)
QUICK_CLASSES = 300


# ------------------------------------------------------------------ data
def load(args):
    """The split as scipy CSR float32 features, int64 labels, K, the tokens, the label sets."""
    import scipy.sparse as sp

    from pyro_ar.datasets import (load_gcide_reverse_dictionary, load_wordnet_reverse_dictionary, make_sparse_teacher,
                                  to_scipy_csr)
    from pyro_ar.datasets.fetch import fetch_dataset

    if args.dataset == "synthetic":
        n, D, K = (1_500, 500, 60) if args.quick else (60_000, 20_000, 10_000)
        t = make_sparse_teacher(n, D, K, nnz_per_row=10, seed=0)
        X = to_scipy_csr(t.x).astype(np.float32)
        X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.maximum(X.multiply(X).sum(1).A1, 1e-12))) @ X, dtype=np.float32)
        y = t.y.numpy()
        cut = int(0.8 * n)
        seen = np.isin(y[cut:], y[:cut])
        d = SimpleNamespace(X=X[:cut], y=y[:cut], Xt=X[cut:][seen], yt=y[cut:][seen], K=K,
                            tokens=[f"f{j}" for j in range(D)], label_sets=[[int(v)] for v in y[cut:][seen]])
        return d
    loader = load_wordnet_reverse_dictionary if args.dataset == "wordnet" else load_gcide_reverse_dictionary
    # --data-dir as given, else the data home (fetched there, unpacked from Debian's package, if absent)
    ds = loader(os.path.join(args.data_dir, args.dataset) if args.data_dir else fetch_dataset(args.dataset))
    d = SimpleNamespace(X=to_scipy_csr(ds.x_train), y=ds.y_train.numpy(), Xt=to_scipy_csr(ds.x_test),
                        yt=ds.y_test.numpy(), K=ds.num_classes, tokens=ds.info["feature_names"],
                        label_sets=ds.info["test_label_sets"])
    return subset_classes(d, QUICK_CLASSES) if args.quick else d


def subset_classes(d, num_classes, seed=0):
    """The rows of ``num_classes`` random classes, relabelled 0..num_classes - 1."""
    keep = np.sort(np.random.default_rng(seed).choice(d.K, size=num_classes, replace=False))
    new = np.full(d.K, -1)
    new[keep] = np.arange(num_classes)
    tr, te = new[d.y] >= 0, new[d.yt] >= 0
    sets = [[int(new[c]) for c in s if new[c] >= 0] for s, k in zip(d.label_sets, te) if k]
    return SimpleNamespace(X=d.X[tr], y=new[d.y[tr]], Xt=d.Xt[te], yt=new[d.yt[te]], K=num_classes,
                           tokens=d.tokens, label_sets=sets)


def token_lines(X, tokens, labels=None):
    """Each row as text: its tokens (fastText's input), with ``__label__<y>`` first when given."""
    out = []
    for n in range(X.shape[0]):
        words = " ".join(tokens[j] for j in X.indices[X.indptr[n]:X.indptr[n + 1]])
        out.append(words if labels is None else f"__label__{labels[n]} {words}")
    return out


# ------------------------------------------------------------------ scoring rules
def top_of_scores(scores, k):
    """The k highest columns of each row of a dense (n, K) score array, best first."""
    k = min(k, scores.shape[1])
    idx = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, idx, 1), axis=1, kind="stable")
    return np.take_along_axis(idx, order, 1)


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


def pad_top(labels_list, width=TOP):
    """Ragged top-k label lists as an (n, width) array padded with -1."""
    out = np.full((len(labels_list), width), -1, dtype=np.int64)
    for n, ls in enumerate(labels_list):
        ls = list(ls)[:width]
        out[n, :len(ls)] = ls
    return out


def metrics(top, log_lik, y, label_sets):
    """Mean log-likelihood, top-k accuracy and precision at k (label sets) of the test rows."""
    res = {"log_lik": None if log_lik is None else float(np.mean(log_lik))}
    for k in KS:
        res[f"top{k}"] = float((top[:, :k] == y[:, None]).any(1).mean())
    for k in (1, 5):
        res[f"p@{k}"] = float(np.mean([np.isin(top[n, :k], s).sum() / k for n, s in enumerate(label_sets)]))
    return res


# ------------------------------------------------------------------ methods: fit(d, opts) -> model;
# predict(model, d) -> (top (n, TOP) labels, log p(y | x) (n,) or None)
def fit_centroid(d, opts):
    import scipy.sparse as sp

    onehot = sp.csr_matrix((np.ones(len(d.y), dtype=np.float32), (d.y, np.arange(len(d.y)))),
                           shape=(d.K, len(d.y)))
    C = sp.csr_matrix(onehot @ d.X)  # class sums; the cosine ignores the 1 / count
    norms = np.sqrt(C.multiply(C).sum(1).A1)
    return sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ C).T.tocsr()


def predict_centroid(C, d, chunk=512):
    tops = [top_of_scores((d.Xt[i:i + chunk] @ C).toarray(), TOP) for i in range(0, d.Xt.shape[0], chunk)]
    return np.concatenate(tops), None


def _tfidf(X, mean, scale):
    from pyro_ar.estimator._scaling import apply_scaler

    return apply_scaler(X, mean, scale, normalize_rows=True)


def fit_centroid_tfidf(d, opts):
    from pyro_ar.estimator._scaling import fit_scaler

    mean, scale = fit_scaler(d.X, sparse_inputs=True, idf=True)
    return fit_centroid(type("D", (), dict(X=_tfidf(d.X, mean, scale), y=d.y, K=d.K)), opts), mean, scale


def predict_centroid_tfidf(model, d):
    C, mean, scale = model
    return predict_centroid(C, type("D", (), dict(Xt=_tfidf(d.Xt, mean, scale))))


def fit_frequency(d, opts):
    counts = np.bincount(d.y, minlength=d.K).astype(np.float64)
    return np.log(np.maximum(counts, 1e-300) / counts.sum())


def predict_frequency(logp, d):
    top = np.argsort(-logp, kind="stable")[:TOP]
    return np.tile(top, (len(d.yt), 1)), logp[d.yt]


def xmc_file(path, X, y):
    """The extreme-classification repository's text format (header N D L; rows 'l j:v ...')."""
    with open(path, "w") as f:
        f.write(f"{X.shape[0]} {X.shape[1]} {int(y.max()) + 1}\n")
        for n in range(X.shape[0]):
            lo, hi = X.indptr[n], X.indptr[n + 1]
            f.write(" ".join([str(y[n])] + [f"{j}:{v:.6g}" for j, v in zip(X.indices[lo:hi], X.data[lo:hi])]) + "\n")
            # (no trailing space after the label of an empty row: omikuji refuses that line)


def fit_omikuji(d, opts):
    import omikuji

    model = omikuji.Model.train_on_data(opts["train_file"], omikuji.Model.default_hyper_param(), n_threads=1)
    return model


def fit_omikuji_tfidf(d, opts):
    return fit_omikuji(d, opts), opts["scaling"]


def predict_omikuji_tfidf(model, d):
    model, scaling = model
    return predict_omikuji(model, type("D", (), dict(Xt=_tfidf(d.Xt, *scaling), yt=d.yt, K=d.K)))


def predict_omikuji(model, d):
    import omikuji  # noqa: F401

    model.init_prediction_thread_pool(1)
    labels, probs = [], []
    for n in range(d.Xt.shape[0]):
        lo, hi = d.Xt.indptr[n], d.Xt.indptr[n + 1]
        pred = model.predict(list(zip(d.Xt.indices[lo:hi].tolist(), d.Xt.data[lo:hi].tolist())), top_k=TOP)
        labels.append([int(p[0]) for p in pred])
        probs.append([float(p[1]) for p in pred])
    return pad_top(labels), topk_rule_log_lik(labels, probs, d.yt, d.K)


def fit_napkinxc(d, opts):
    from napkinxc.models import PLT

    model = PLT(opts["model_dir"], threads=1, seed=0)
    model.fit(d.X, [[int(v)] for v in d.y])
    return model


def predict_napkinxc(model, d):
    pred = model.predict_proba(d.Xt, top_k=TOP)
    labels = [[int(p[0]) for p in row] for row in pred]
    probs = [[float(p[1]) for p in row] for row in pred]
    return pad_top(labels), topk_rule_log_lik(labels, probs, d.yt, d.K)


def fasttext_fitter(loss):
    def fit(d, opts):
        import fasttext

        return fasttext.train_supervised(input=opts["train_file"], loss=loss, dim=100, epoch=25, lr=0.5,
                                         minCount=1, thread=1, seed=0, verbose=0)
    return fit


def predict_fasttext(model, d):
    pred_labels, pred_probs = model.predict(token_lines(d.Xt, d.tokens), k=TOP)
    labels = [[int(s[len("__label__"):]) for s in ls] for ls in pred_labels]
    return pad_top(labels), topk_rule_log_lik(labels, pred_probs, d.yt, d.K)


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

    kwargs = dict({"max_epochs": 2} if opts["quick"] else {}, **opts["kwargs"])
    return ARClassifier(**kwargs).fit(d.X, d.y)


def predict_pyro_ar(clf, d, chunk=256):
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
    "centroid_tfidf": (fit_centroid_tfidf, predict_centroid_tfidf),
    "frequency": (fit_frequency, predict_frequency),
    "omikuji": (fit_omikuji, predict_omikuji),
    "omikuji_tfidf": (fit_omikuji_tfidf, predict_omikuji_tfidf),
    "napkinxc": (fit_napkinxc, predict_napkinxc),
    "fasttext_hs": (fasttext_fitter("hs"), predict_fasttext),
    "fasttext_ns": (fasttext_fitter("ns"), predict_fasttext),
    "fasttext_softmax": (fasttext_fitter("softmax"), predict_fasttext),
    "adaptive": (fit_adaptive, predict_adaptive),
    "pyro_ar": (fit_pyro_ar, predict_pyro_ar),
}


def inputs(method, d, folder, kwargs, quick):
    """The method's options and input files (written here, outside the timed fit)."""
    opts = {"kwargs": kwargs, "quick": quick, "model_dir": os.path.join(folder, "model"),
            "train_file": os.path.join(folder, "train")}
    if method == "omikuji":
        xmc_file(opts["train_file"], d.X, d.y)
    elif method == "omikuji_tfidf":  # (the scaler is fitted here, outside the timed fit, as the files)
        from pyro_ar.estimator._scaling import fit_scaler

        opts["scaling"] = fit_scaler(d.X, sparse_inputs=True, idf=True)
        xmc_file(opts["train_file"], _tfidf(d.X, *opts["scaling"]), d.y)
    elif method.startswith("fasttext"):
        with open(opts["train_file"], "w") as f:
            f.write("\n".join(token_lines(d.X, d.tokens, d.y)) + "\n")
    return opts


def worker(args):
    """One method in this (fresh) process: fit, predict, metrics, peak memory; one JSON line."""
    torch.set_num_threads(1)
    d = load(args)
    rss_data = rss_bytes()
    kwargs = json.loads(args.variant)
    fit, predict = FITTERS[args.worker]
    with tempfile.TemporaryDirectory() as folder:
        opts = inputs(args.worker, d, folder, kwargs, args.quick)
        t = time.process_time()
        model = fit(d, opts)
        train_cpu = time.process_time() - t
        t = time.process_time()
        top, log_lik = predict(model, d)
        predict_cpu = time.process_time() - t
    extra = getattr(model[0] if isinstance(model, tuple) else model, "info", None)
    if args.worker == "pyro_ar":
        extra = dict(path=model.training_path_.describe(), epochs=model.n_iter_, steps=model.n_steps_)
    res = dict(train_cpu_s=train_cpu, predict_cpu_s=predict_cpu, peak_rss_mb=peak_bytes() / 2**20,
               rss_data_mb=rss_data / 2**20, **metrics(top, log_lik, d.yt, d.label_sets), details=extra)
    print(json.dumps(res, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))


def run(method, variant, args):
    """``method`` in a subprocess; its JSON result, or a status saying why there is none."""
    if PACKAGE.get(method) and importlib.util.find_spec(PACKAGE[method]) is None:
        return {"status": "missing", "package": PACKAGE[method]}
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", method, "--variant", json.dumps(variant),
           "--dataset", args.dataset] + (["--data-dir", args.data_dir] if args.data_dir else []) \
        + (["--quick"] if args.quick else [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env={**os.environ, **THREAD_ENV})
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {args.timeout} s"}
    if p.returncode != 0:
        return {"status": "failed", "stderr": p.stderr[-2000:]}
    return {"status": "ok", **json.loads(p.stdout.strip().splitlines()[-1])}


def main(argv=None):
    ap = harness.parser(__doc__, quick_help=f"{QUICK_CLASSES} random classes (seconds)")
    ap.add_argument("--dataset", default="wordnet", choices=["wordnet", "gcide", "synthetic"])
    ap.add_argument("--data-dir", default=None,
                    help="folder holding wordnet/ and gcide/ (default: the data home, fetched into it if absent)")
    ap.add_argument("--methods", default=",".join(METHODS),
                    help="comma-separated, from: " + ", ".join(METHODS + OPTIONAL))
    ap.add_argument("--pyro-ar-variants", nargs="*", default=[],
                    help="extra ARClassifier keyword arguments, one JSON object per variant")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per method")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--variant", default="{}", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        return worker(args)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS + OPTIONAL))
    if unknown:
        ap.error(f"--methods: unknown {unknown}; choose from {', '.join(METHODS + OPTIONAL)}")
    harness.start(args)
    runs = [(m, {}) for m in methods]
    if "pyro_ar" in methods:
        runs += [("pyro_ar", json.loads(v)) for v in args.pyro_ar_variants]
    d = load(args)
    info = dict(dataset=args.dataset, quick=args.quick, K=d.K, D=d.X.shape[1], n_train=d.X.shape[0],
                n_test=d.Xt.shape[0], nnz_per_row=d.X.nnz / d.X.shape[0], uniform_log_lik=-float(np.log(d.K)))
    del d
    print(" ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items()), flush=True)
    rows = []
    for method, variant in runs:
        name = method + (" " + json.dumps(variant) if variant else "")
        res = dict(method=name, **run(method, variant, args))
        rows.append(res)
        print(f"{name}: {res['status']}" + (f" ({res['train_cpu_s']:.1f} CPU s)" if res["status"] == "ok" else ""),
              flush=True)
    shown = [dict(r, log_lik=r.get("log_lik") if r["status"] == "ok" else r["status"]) for r in rows]
    print(table(shown, [("method", "method", ""), ("train CPU s", "train_cpu_s", ".1f"),
                        ("predict CPU s", "predict_cpu_s", ".1f"), ("peak RSS MB", "peak_rss_mb", ".0f"),
                        ("log-lik", "log_lik", ".3f"), ("top-1", "top1", ".4f"), ("top-5", "top5", ".4f"),
                        ("top-10", "top10", ".4f"), ("P@1", "p@1", ".4f"), ("P@5", "p@5", ".4f")]))
    print(f"(uniform log-lik {info['uniform_log_lik']:.3f}; omikuji / napkinXC / fastText: top-{TOP} rule)")
    harness.save(args, f"peers_{args.dataset}", dict(data=info, top_k_rule=TOP, results=rows))
    return rows


if __name__ == "__main__":
    main()

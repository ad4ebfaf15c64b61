"""What ``benchmarks/peers.py`` gives every method and how it scores their answers: the data
sets (multi-class and multi-label), the ``--features`` rows, and the test metrics.

Every split is a ``SimpleNamespace`` with ``X`` / ``Xt`` (scipy CSR float32, sorted indices),
``Y`` / ``Yt`` (scipy CSR float32 0/1 indicators, (N, K): one label per row for the
multi-class sets), ``K``, ``tokens`` (the feature names: fastText's words), ``multilabel``,
and, for the multi-class sets, ``y`` / ``yt`` (int64 labels) and ``label_sets`` (each test
row's set of acceptable labels, for P@k).

Features (``--features``): ``binary`` -- the loader's rows as they are (the reverse
dictionaries and the WordNet synsets: binary bags of words, L2-normalised; Bibtex: 0/1);
``tfidf`` -- the rows ``ARClassifier()`` builds inside on its weight-pattern path:
feature j scaled by its idf :math:`\\log\\frac{1 + N}{1 + \\mathrm{df}_j}` fitted on the
training rows, each row then L2-normalised (``pyro_ar.features.fit_scaler(idf=True)``
and ``apply_scaler(normalize_rows=True)``, the same functions).
"""

import os
from types import SimpleNamespace

import numpy as np

KS = (1, 5, 10)          # top-k accuracy of the multi-class sets
ML_KS = (1, 3, 5)        # P@k, nDCG@k, PSP@k of the multi-label sets
QUICK_CLASSES = 300      # --quick: the rows of this many random classes (labels)
MULTICLASS_SETS = ("wordnet", "gcide", "synthetic")
MULTILABEL_SETS = ("wordnet_synsets", "bibtex_ml", "synthetic_ml")
FEATURES = ("binary", "tfidf")


class DatasetUnavailable(RuntimeError):
    """A data set whose loader this copy of pyro_ar does not have (or that refuses its options)."""


# ------------------------------------------------------------------ the splits
def load(dataset, data_dir=None, quick=False):
    """The split of ``dataset`` (see the module docstring); ``quick``: a small version."""
    if dataset == "synthetic":
        return synthetic(quick)
    if dataset == "synthetic_ml":
        return synthetic_multilabel(quick)
    root = None if dataset not in MULTICLASS_SETS + MULTILABEL_SETS else _folder(dataset, data_dir)
    if dataset in MULTILABEL_SETS:
        d = multilabel(dataset, root)
        return subset_labels(d, QUICK_CLASSES) if quick else d
    if dataset not in MULTICLASS_SETS:
        raise ValueError(f"dataset: expected one of {MULTICLASS_SETS + MULTILABEL_SETS}, got {dataset!r}")
    from pyro_ar.datasets import load_gcide_reverse_dictionary, load_wordnet_reverse_dictionary, to_scipy_csr

    loader = load_wordnet_reverse_dictionary if dataset == "wordnet" else load_gcide_reverse_dictionary
    ds = loader(root)
    y, yt = ds.y_train.numpy(), ds.y_test.numpy()
    d = multiclass(to_scipy_csr(ds.x_train), y, to_scipy_csr(ds.x_test), yt, ds.num_classes,
                   ds.info["feature_names"], ds.info["test_label_sets"])
    return subset_classes(d, QUICK_CLASSES) if quick else d


def _folder(dataset, data_dir):
    """``<data_dir>/<files' folder>`` as given, else the data home's copy (fetched into it,
    unpacked from the original source, when absent: :func:`pyro_ar.datasets.fetch.fetch_dataset`)."""
    name = {"wordnet_synsets": "wordnet", "bibtex_ml": "bibtex"}.get(dataset, dataset)
    if data_dir:
        return os.path.join(data_dir, name)
    from pyro_ar.datasets.fetch import fetch_dataset

    return str(fetch_dataset(name))


def indicator(y, K):
    """The (N, K) CSR 0/1 indicator of int labels ``y``."""
    import scipy.sparse as sp

    y = np.asarray(y, dtype=np.int64)
    return sp.csr_matrix((np.ones(len(y), dtype=np.float32), (np.arange(len(y)), y)), shape=(len(y), K))


def _csr(X):
    import scipy.sparse as sp

    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()  # (PECOS reads the rows as sorted; sorting is harmless for the others)
    return X


def multiclass(X, y, Xt, yt, K, tokens, label_sets):
    return SimpleNamespace(X=_csr(X), Xt=_csr(Xt), y=y, yt=yt, Y=indicator(y, K), Yt=indicator(yt, K), K=K,
                           tokens=tokens, label_sets=label_sets, multilabel=False)


def multilabel_split(X, Y, Xt, Yt, tokens):
    """A multi-label split; the test labels never seen in training are dropped, then the test
    rows left without a label (no model trained on the split can rank those)."""
    import scipy.sparse as sp

    Y, Yt = sp.csr_matrix(Y, dtype=np.float32), sp.csr_matrix(Yt, dtype=np.float32)
    seen = np.asarray(Y.sum(0)).ravel() > 0
    Yt = _csr(Yt @ sp.diags(seen.astype(np.float32)))
    Yt.eliminate_zeros()
    keep = np.diff(Yt.indptr) > 0
    if np.any(np.diff(Y.indptr) == 0):
        raise ValueError("multilabel_split: every training row needs a label (the peers' files cannot hold none)")
    return SimpleNamespace(X=_csr(X), Xt=_csr(Xt)[keep], Y=_csr(Y), Yt=Yt[keep], K=Y.shape[1], tokens=tokens,
                           multilabel=True)


def multilabel(dataset, root):
    """``wordnet_synsets`` (``load_wordnet_synsets``) or ``bibtex_ml`` (``load_bibtex(reduction=None)``)."""
    import scipy.sparse as sp

    from pyro_ar import datasets

    name = {"wordnet_synsets": "load_wordnet_synsets", "bibtex_ml": "load_bibtex"}[dataset]
    loader = getattr(datasets, name, None)
    if loader is None:
        raise DatasetUnavailable(f"--dataset {dataset}: needs pyro_ar.datasets.{name} (issue 36), "
                                 f"which this copy of pyro_ar ({datasets.__file__}) does not have")
    try:
        ds = loader(root) if dataset == "wordnet_synsets" else loader(root, reduction=None)
    except TypeError as e:  # a load_bibtex without the reduction argument
        raise DatasetUnavailable(f"--dataset {dataset}: pyro_ar.datasets.{name} refused the multi-label "
                                 f"options (issue 36): {e}") from e
    if not (ds.info.get("multilabel") and sp.issparse(ds.y_train)):
        raise DatasetUnavailable(f"--dataset {dataset}: pyro_ar.datasets.{name} returned single labels "
                                 f"(y_train {type(ds.y_train).__name__}), expected a multi-label Dataset")
    from pyro_ar.datasets import to_scipy_csr

    tokens = ds.info.get("feature_names") or [f"f{j}" for j in range(ds.x_train.shape[1])]
    return multilabel_split(to_scipy_csr(ds.x_train), ds.y_train, to_scipy_csr(ds.x_test), ds.y_test, tokens)


def _teacher(n, D, K, utilities=True):
    """``make_sparse_teacher`` rows (L2-normalised counts), its labels, and (``utilities``) the
    teacher's utilities x E v_k / sqrt(m) + b_k, (n, K)."""
    import scipy.sparse as sp

    from pyro_ar.datasets import make_sparse_teacher, to_scipy_csr

    t = make_sparse_teacher(n, D, K, nnz_per_row=10, seed=0)
    X = to_scipy_csr(t.x).astype(np.float32)
    u = (X @ t.embedding.numpy()) / np.sqrt(10.0) @ t.weight.numpy().T + t.b.numpy() if utilities else None
    X = sp.csr_matrix(sp.diags(1.0 / np.sqrt(np.maximum(X.multiply(X).sum(1).A1, 1e-12))) @ X, dtype=np.float32)
    return X, t.y.numpy(), u


def synthetic(quick):
    """``make_sparse_teacher`` rows with the teacher's label; 80/20, test rows of unseen classes dropped."""
    n, D, K = (1_500, 500, 60) if quick else (60_000, 20_000, 10_000)
    X, y, _ = _teacher(n, D, K, utilities=False)
    cut = int(0.8 * n)
    seen = np.isin(y[cut:], y[:cut])
    return multiclass(X[:cut], y[:cut], X[cut:][seen], y[cut:][seen], K, [f"f{j}" for j in range(D)],
                      [[int(v)] for v in y[cut:][seen]])


def synthetic_multilabel(quick, seed=0):
    """``make_sparse_teacher`` rows, each labelled with 1, 2 or 3 classes (uniformly) drawn
    without replacement from the teacher's softmax (the Gumbel top-k trick: the classes of the
    largest utility + Gumbel noise); 80/20 split."""
    import scipy.sparse as sp

    n, D, K = (1_500, 500, 60) if quick else (20_000, 5_000, 2_000)
    X, _, u = _teacher(n, D, K)
    rng = np.random.default_rng(seed)
    order = np.argsort(-(u + rng.gumbel(size=u.shape)), axis=1)[:, :3]
    size = rng.integers(1, 4, size=n)
    rows, slot = np.nonzero(np.arange(3)[None, :] < size[:, None])
    Y = sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, order[rows, slot])), shape=(n, K))
    cut = int(0.8 * n)
    return multilabel_split(X[:cut], Y[:cut], X[cut:], Y[cut:], [f"f{j}" for j in range(D)])


def subset_classes(d, num_classes, seed=0):
    """The rows of ``num_classes`` random classes, relabelled 0..num_classes - 1."""
    keep = np.sort(np.random.default_rng(seed).choice(d.K, size=num_classes, replace=False))
    new = np.full(d.K, -1)
    new[keep] = np.arange(num_classes)
    tr, te = new[d.y] >= 0, new[d.yt] >= 0
    sets = [[int(new[c]) for c in s if new[c] >= 0] for s, k in zip(d.label_sets, te) if k]
    return multiclass(d.X[tr], new[d.y[tr]], d.Xt[te], new[d.yt[te]], num_classes, d.tokens, sets)


def subset_labels(d, num_labels, seed=0):
    """A multi-label split kept to ``num_labels`` random labels (all of them if fewer) and the
    rows that have one of them."""
    keep = np.sort(np.random.default_rng(seed).choice(d.K, size=min(num_labels, d.K), replace=False))
    Y, Yt = d.Y[:, keep].tocsr(), d.Yt[:, keep].tocsr()
    tr, te = np.diff(Y.indptr) > 0, np.diff(Yt.indptr) > 0
    return multilabel_split(d.X[tr], Y[tr], d.Xt[te], Yt[te], d.tokens)


def featurize(d, features):
    """``d`` with its rows as ``features`` gives them (module docstring); a new namespace."""
    if features not in FEATURES:
        raise ValueError(f"features: expected one of {FEATURES}, got {features!r}")
    if features == "binary":
        return d
    from pyro_ar.features import apply_scaler, fit_scaler

    mean, scale = fit_scaler(d.X, sparse_inputs=True, idf=True)
    return SimpleNamespace(**dict(vars(d), X=_csr(apply_scaler(d.X, mean, scale, normalize_rows=True)),
                                  Xt=_csr(apply_scaler(d.Xt, mean, scale, normalize_rows=True))))


def label_lists(Y):
    """The rows of a CSR indicator as lists of column indices."""
    return [Y.indices[Y.indptr[n]:Y.indptr[n + 1]].tolist() for n in range(Y.shape[0])]


# ------------------------------------------------------------------ scoring
def top_of_scores(scores, k):
    """The k highest columns of each row of a dense (n, K) score array, best first."""
    k = min(k, scores.shape[1])
    idx = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, idx, 1), axis=1, kind="stable")
    return np.take_along_axis(idx, order, 1)


def pad_top(labels_list, width):
    """Ragged top-k label lists as an (n, width) array padded with -1."""
    out = np.full((len(labels_list), width), -1, dtype=np.int64)
    for n, ls in enumerate(labels_list):
        ls = list(ls)[:width]
        out[n, :len(ls)] = ls
    return out


def metrics(top, log_lik, y, label_sets):
    """Multi-class: mean log-likelihood, top-k accuracy and precision at k against the label sets."""
    res = {"log_lik": None if log_lik is None else float(np.mean(log_lik))}
    for k in KS:
        res[f"top{k}"] = float((top[:, :k] == y[:, None]).any(1).mean())
    for k in (1, 5):
        res[f"p@{k}"] = float(np.mean([np.isin(top[n, :k], s).sum() / k for n, s in enumerate(label_sets)]))
    return res


def ranking_scores(top, Yt, Y, ks=ML_KS):
    """Multi-label: P@k, nDCG@k and PSP@k (A = 0.55, B = 1.5 propensities of the training
    labels ``Y``) of the ranked labels ``top`` (n, >= max(ks); -1: no prediction) against the
    test indicator ``Yt``, through ``pyro_ar.evaluation``. A missing prediction is scored as a
    miss: the one in rank slot l becomes an extra column K + l, relevant to no row (a ranking
    lists each class once; their propensities 1 are never used)."""
    import scipy.sparse as sp

    from pyro_ar.evaluation import label_propensities, ranking_metrics

    width = max(ks)
    ranked = np.where(top[:, :width] < 0, Yt.shape[1] + np.arange(width)[None, :], top[:, :width])
    targets = sp.hstack([Yt, sp.csr_matrix((Yt.shape[0], width), dtype=Yt.dtype)], format="csr")
    prop = np.append(np.asarray(label_propensities(Y), dtype=np.float64), np.ones(width))
    res = ranking_metrics(ranked, targets, ks=ks, propensities=prop)
    return {key.lower(): float(v) for key, v in res.items()}

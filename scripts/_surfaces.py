"""The surfaces of ``scripts/surface_battery.py``: each ``(area, name, call, slots, extra names,
controls)``, ``slots`` mapping an argument to ``(good values, [(label, bad value), ...])``; a
bad value must be refused naming the argument (or one of the extra names: a file)."""

import gzip
import math
import os
import tempfile

import numpy as np
import scipy.sparse as sp
import torch

import pyro
from pyro.infer import SVI

import pyro_ar as ar
from pyro_ar.datasets import load_mnist, load_svmlight, load_text_corpus, make_reverse_dictionary, read_arff, read_dictd
from pyro_ar.distributions import RelaxedUtilityCategorical, UtilityCategorical
from pyro_ar.estimator import ARClassifier
from pyro_ar.files import atomic_save
from pyro_ar.infer import default_elbo, default_guide, train
from pyro_ar.infer.local_fit import gaussian_local, gumbel_local, laplace_local
from pyro_ar.infer.local_guides import ConditionalLocalGuide
from pyro_ar.likelihoods import AR
from pyro_ar.models import BayesianLinearClassifier, Init, LinearClassifier
from pyro_ar.negatives import ScreenedNegatives
from pyro_ar.optim import lazy_adam
from pyro_ar.quadrature import gauss_gumbel, gauss_hermite
from pyro_ar.weight_pattern import PatternLinearUtility, PatternWeights, WeightPattern

T, NAN, INF = torch.tensor, math.nan, math.inf
G = torch.Generator().manual_seed(0)
TMP = tempfile.mkdtemp(prefix="pyro_ar_surfaces_")
SURFACES = []


def surface(area, name, call, slots, extra=(), controls=2):
    SURFACES.append((area, name, call, slots, tuple(extra), controls))


def bad(*pairs):
    """``[(label, value)]`` from ``label, value, label, value, ...``."""
    return list(zip(pairs[0::2], pairs[1::2]))


# ------------------------------------------------------------------ weight patterns
KEYS = T([0, 4, 5])
surface("pattern", "WeightPattern", lambda keys, K, D: WeightPattern(keys, K, D), {
    "keys": ([KEYS, T([1, 2])], bad("float", T([0.0, 1.0]), "2-D", T([[0, 1]]), "out of range", T([0, 99]),
                                    "repeated", T([1, 1]), "negative", T([-1, 0]), "a list", [0, 1],
                                    "numpy", np.array([0, 1]), "int32", T([0, 1], dtype=torch.int32))),
    "K": ([2, np.int64(2), 3], bad("0", 0, "-1", -1, "2.5", 2.5, "'2'", "2", "None", None, "True", True, "2**62", 2**62)),
    "D": ([3, 4], bad("0", 0, "-3", -3, "1.0", 1.0, "'3'", "3", "None", None, "2**62", 2**62)),
}, extra=("num_classes", "num_features"))
PATTERN = WeightPattern(KEYS, 2, 3)
surface("pattern", "WeightPattern.lookup", lambda classes, cols: PATTERN.lookup(classes, cols), {
    "classes": ([T([0, 1]), T([1, 1])], bad("K", T([2, 0]), "-1", T([-1, 0]), "float", T([0.0, 1.0]),
                                           "bool", T([True, False]), "3 vs 2", T([0, 1, 1]), "a list", [0, 1])),
    "cols": ([T([0, 2]), T([2, 1])], bad("D", T([3, 0]), "-1", T([-1, 0]), "0.5", T([0.5, 0.0]),
                                         "2**40", T([2**40, 0]), "3 vs 2", T([0, 1, 2])))}, controls=2)
surface("pattern", "WeightPattern.dense/sparse", lambda values, how: getattr(PATTERN, how)(values), {
    "values": ([torch.ones(3), torch.zeros(3, dtype=torch.float64)],
               bad("4 values", torch.ones(4), "2 x 3", torch.ones(2, 3), "a string", "w", "None", None, "0-d", T(1.0))),
    "how": (["dense", "sparse"], [])})
SPARSE_W = torch.eye(2, 3).to_sparse()
surface("pattern", "PatternWeights.from_sparse", lambda W, bias: PatternWeights.from_sparse(W, bias), {
    "W": ([SPARSE_W], bad("dense", torch.eye(2, 3), "3-D sparse", torch.ones(2, 3, 2).to_sparse(), "a string", "W",
                          "None", None, "1-D sparse", torch.ones(3).to_sparse(), "hybrid", torch.ones(2, 3, 2).to_sparse(2))),
    "bias": ([None, torch.zeros(2)], bad("3 entries", torch.zeros(3), "2 x 1", torch.zeros(2, 1), "a string", "b"))})
surface("pattern", "PatternLinearUtility", lambda x, weight, bias: PatternLinearUtility(x, PATTERN, weight, bias).full(), {
    "x": ([torch.rand(4, 3, generator=G), torch.rand(4, 3, generator=G).to_sparse()],
          bad("width 5", torch.rand(4, 5, generator=G), "a string", "x", "1-D", torch.rand(3, generator=G))),
    "weight": ([torch.ones(3)], bad("4 entries", torch.ones(4), "3 x 1", torch.ones(3, 1), "a string", "w", "None", None)),
    "bias": ([torch.zeros(2), None], bad("3 entries", torch.zeros(3), "2 x 1", torch.zeros(2, 1)))})
surface("pattern", "WeightPattern.from_cooccurrence", lambda rows, cols, labels: WeightPattern.from_cooccurrence(
    rows, cols, labels, 2, 3), {
    "rows": ([T([0, 1])], bad("row 2", T([0, 2]), "-1", T([-1, 0]), "float", T([0.0, 1.0]), "short", T([0]))),
    "cols": ([T([2, 0])], bad("D", T([3, 0]), "-1", T([-1, 0]), "float", T([0.5, 0.0]))),
    "labels": ([T([1, 0])], bad("K", T([2, 0]), "-1", T([0, -1]), "float", T([1.0, 0.0])))})

X12, Y12 = torch.rand(12, 3, generator=G), torch.randint(0, 2, (12,), generator=G)


def pattern_step(pattern, loc, weights, lr=0.01):
    pyro.clear_param_store()
    model = LinearClassifier(3, 2, weight_pattern=pattern, init=Init(weight=loc), weights=weights,
                             subsample_size=6)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    return train(svi, X12, Y12, num_steps=2)[-1]["loss"]


surface("pattern", "LinearClassifier(weight_pattern) step", pattern_step, {
    "pattern": ([PATTERN, WeightPattern(torch.zeros(0, dtype=torch.long), 2, 3)],
                bad("K = 3", WeightPattern(KEYS, 3, 3), "D = 4", WeightPattern(KEYS, 2, 4), "a string", "p")),
    "loc": ([None], bad("NaN", T([0.0, NAN, 1.0]), "inf", T([INF, 0.0, 1.0]), "4 entries", torch.zeros(4),
                        "a string", "l")),
    "weights": (["map", "mle"], bad("bayes", "bayes", "flat", "flat"))}, extra=("weight_pattern", "init.weight"))

# ------------------------------------------------------------------ screened negatives
surface("negatives", "ScreenedNegatives", lambda num_negatives, screen, exact: ScreenedNegatives(
    num_negatives, screen, exact), {
    "num_negatives": ([4, 6], bad("0", 0, "-1", -1, "2.5", 2.5, "'4'", "4", "True", True)),
    "screen": ([2, 4], bad("0", 0, "-2", -2, "1.5", 1.5, "'3'", "3", "None", None)),
    "exact": ([None, 1, 2], bad("-1", -1, "= s", 6, "10", 10, "1.5", 1.5, "'1'", "1"))})
PSI = torch.randn(3, 50, generator=G)
SCREEN = ScreenedNegatives(4, screen=3)
surface("negatives", "ScreenedNegatives()", lambda labels, num_classes, utility: SCREEN(labels, num_classes, utility), {
    "labels": ([T([0, 1, 2]), T([49, 0, 7])], bad("K", T([0, 50, 2]), "-1", T([0, -1, 2]), "float", T([0.0, 1.5, 2.0]),
                                                  "bool", T([True, False, True]), "a list", [0, 1, 2])),
    "num_classes": ([50], bad("0", 0, "-5", -5, "2.5", 2.5, "'50'", "50", "None", None)),
    "utility": ([PSI, PSI.double(), PSI[:1]], bad("all NaN", torch.full((3, 50), NAN), "an inf", PSI.index_fill(1, T([3]), INF),
                                               "2 rows", PSI[:2], "40 classes", PSI[:, :40], "None", None, "a string", "u"))})

# ------------------------------------------------------------------ local fits and their rules
D43 = torch.randn(4, 3, generator=G, dtype=torch.float64)
W43 = torch.rand(4, 3, generator=G, dtype=torch.float64)
LOCAL_BADS = {
    "noise": ([ar.noise.NormalNoise(), ar.get_noise("logistic")], bad("a name", "normal", "None", None, "3", 3)),
    "d": ([D43, D43.float()], bad("int", D43.long(), "numpy", D43.numpy(), "0-d", T(1.0), "NaN", D43 * NAN,
                                  "+inf", D43 + INF, "-inf", D43 - INF, "a list", D43.tolist())),
    "w": ([W43, torch.ones(3)], bad("negative", -W43, "NaN", W43 * NAN, "inf", W43 + INF, "5 wide", torch.ones(5),
                                    "numpy", W43.numpy(), "a string", "w")),
    "steps": ([8, 3], bad("0", 0, "-1", -1, "2.5", 2.5, "'8'", "8", "None", None)),
    "tol": ([3e-2, 0.0], bad("NaN", NAN, "-1", -1.0, "inf", INF, "'0.1'", "0.1", "None", None)),
}
surface("local fit", "laplace_local", laplace_local, dict(LOCAL_BADS))
for fit, rule_max in ((gumbel_local, 21), (gaussian_local, None)):
    surface("local fit", fit.__name__, fit, {
        **LOCAL_BADS, "refine_steps": ([10, 1, 0], bad("-1", -1, "1.5", 1.5, "'2'", "2")),
        "num_nodes": ([None, 3, 5], bad("0", 0, "2.5", 2.5, "'5'", "5") + ([] if rule_max is None else bad("21", 21)))})
for rule, top in ((gauss_gumbel, 20), (gauss_hermite, 40)):
    surface("local fit", rule.__name__, rule, {
        "num_nodes": ([1, 5, top], bad("0", 0, "-1", -1, "2.5", 2.5, "'5'", "5", "None", None)
                      + (bad("21", 21) if top == 20 else [])),
        "like": ([torch.zeros(()), torch.zeros(2, dtype=torch.float64)],
                 bad("int", torch.zeros(2, dtype=torch.long), "bool", T([True]), "None", None, "0.0", 0.0,
                     "numpy", np.zeros(2)))})
PROBIT = LinearClassifier(3, 5, likelihood=AR("normal", negatives=2), subsample_size=4)
surface("local fit", "ConditionalLocalGuide", lambda fit, refine_steps, negatives, oversample: ConditionalLocalGuide(
    PROBIT, negatives=negatives, fit=fit, refine_steps=refine_steps, oversample=oversample), {
    "fit": (["gumbel", "gaussian", "laplace"], bad("a list", ["gumbel"], "'normal'", "normal", "None", None, "3", 3)),
    "refine_steps": ([1, 3], bad("0", 0, "-1", -1, "1.5", 1.5, "True", True)),
    "negatives": (["model", None, 2], bad("'all'", "all", "0", 0, "-1", -1)),
    "oversample": ([1, 2], bad("0", 0, "2.5", 2.5))})

# ------------------------------------------------------------------ dictionary loaders and loaders changed
PAIRS = [("bank", "a slope of land by a river"), ("bank", "a place that keeps money"), ("bank", "a row of keys"),
         ("river", "a large stream of water"), ("river", "a stream flowing to the sea"), ("sea", "a body of salt water")]
surface("loaders", "make_reverse_dictionary", lambda pairs, min_glosses, holdout_min, min_count, seed: make_reverse_dictionary(
    pairs, min_glosses=min_glosses, holdout_min=holdout_min, min_count=min_count, seed=seed).x_train, {
    "pairs": ([PAIRS], bad("1-tuples", [("a",)], "a number gloss", [("a", 1), ("a", 2)], "a string", "abc",
                           "no pairs", [], "no letters", [("a", "1 2"), ("a", "3"), ("b", "4"), ("b", "5 6")])),
    "min_glosses": ([1, 2], bad("0", 0, "-1", -1, "1.5", 1.5, "'2'", "2", "99", 99)),
    "holdout_min": ([2, 3], bad("1", 1, "0", 0, "2.5", 2.5, "'3'", "3")),
    "min_count": ([1, 2], bad("0", 0, "99 (D = 0)", 99, "1.5", 1.5, "'2'", "2")),
    "seed": ([0, 7, np.int64(3)], bad("-1", -1, "'0'", "0", "1.5", 1.5, "None", None))},
    extra=("min_glosses", "min_count"))


def _file(name, data: bytes) -> str:
    path = os.path.join(TMP, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


ARTICLE = "bank\n   a slope of land by a river\n".encode()
GZ = gzip.compress(ARTICLE)
INDEX = _file("good.index", b"bank\tA\t" + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"[len(ARTICLE)].encode() + b"\n")
DATA = _file("good.dict.dz", GZ)
surface("loaders", "read_dictd", lambda index, data: read_dictd(index, data), {
    "index": ([INDEX], [(n, _file(n, b)) for n, b in [
        ("notutf8.index", b"bank\tA\tB\n\xff\xfe\tA\tB\n"), ("badb64.index", b"bank\tA!\tB\n"),
        ("beyond.index", b"bank\tA\t/////\n"), ("fields.index", b"bank A B\n")]] + [("missing.index", os.path.join(TMP, "no.index"))]),
    "data": ([DATA], [(n, _file(n, b)) for n, b in [
        ("trunc.dict.dz", GZ[: len(GZ) // 2]), ("plain.dict.dz", ARTICLE), ("empty.dict.dz", b""),
        ("noise.dict.dz", bytes(range(256)) * 4)]] + [("missing.dict.dz", os.path.join(TMP, "no.dict.dz"))])},
    extra=("index", "dict.dz", "data"), controls=1)
TEXT = "The cat sat. The cat ran. A dog sat. The dog ran."
surface("loaders", "load_text_corpus", lambda min_count, seed, tokenizer: load_text_corpus(
    TEXT, min_count=min_count, seed=seed, tokenizer=tokenizer, test_fraction=0.25)[0].x_train, {
    "min_count": ([1, 2], bad("99", 99, "0", 0, "'2'", "2", "1.5", 1.5)),
    "seed": ([0, 5], bad("1.5", 1.5, "'0'", "0", "None", None)),
    "tokenizer": ([None, str.split], bad("ints", lambda t: [1, 2, 3], "a string", lambda t: t, "None tokens",
                                         lambda t: [None] * 3))})
SVM = {"header D = 0": "2 0 2\n0 0:1\n1 1:1\n", "header L = 0": "2 2 0\n0 0:1\n1 1:1\n",
       "header N = 5": "5 2 2\n0 0:1\n1 1:1\n", "NaN": "0 0:nan\n1 1:1\n", "empty": "", "label -1": "-1 0:1\n1 1:1\n"}
surface("loaders", "load_svmlight", lambda path, num_features: load_svmlight(path, num_features=num_features).x_train, {
    "path": ([_file("good.svm", b"0 0:1.5 2:0.5\n1 1:2\n")],
             [(n, _file(f"{n.replace(' ', '_').replace('=', '')}.svm", t.encode())) for n, t in SVM.items()]),
    "num_features": ([None, 3], bad("0", 0, "2.5", 2.5, "'3'", "3"))}, extra=("svm",))
ARFF = "@relation r\n@attribute x numeric\n@attribute y {0,1}\n@data\n"
surface("loaders", "read_arff", lambda path, sparse: read_arff(path, sparse=sparse).data, {
    "path": ([_file("good.arff", (ARFF + "1,0\n{0 2.5,1 1}\n").encode())],
             [(n, _file(f"{n.replace(' ', '_')}.arff", t.encode())) for n, t in {
                 "no rows": ARFF, "comments only": ARFF + "% a\n%b\n", "no @data": ARFF[:-6], "NaN": ARFF + "nan,1\n",
                 "short row": ARFF + "1\n", "missing value": ARFF + "?,1\n", "index 5": ARFF + "{5 1}\n"}.items()]),
    "sparse": ([False, True], [])}, extra=("arff",))


def _mnist(folder, n=3, shape=(4, 4)):
    os.makedirs(folder, exist_ok=True)
    for prefix in ("train", "t10k"):
        img = np.zeros((n,) + shape, np.uint8)
        head = b"\x00\x00\x08\x03" + b"".join(int(s).to_bytes(4, "big") for s in (n,) + shape)
        with open(os.path.join(folder, f"{prefix}-images.idx3-ubyte.gz"), "wb") as f:
            f.write(gzip.compress(head + img.tobytes()))
        lab = b"\x00\x00\x08\x01" + n.to_bytes(4, "big") + bytes(n)
        with open(os.path.join(folder, f"{prefix}-labels.idx1-ubyte.gz"), "wb") as f:
            f.write(gzip.compress(lab))
    return folder


surface("loaders", "load_mnist", lambda path: load_mnist(path=path).x_train, {
    "path": ([_mnist(os.path.join(TMP, "mnist_ok"))], [
        ("0 images", _mnist(os.path.join(TMP, "mnist_0"), n=0)), ("0 x 4 images", _mnist(os.path.join(TMP, "m04"), shape=(0, 4))),
        ("4 x 0 images", _mnist(os.path.join(TMP, "m40"), shape=(4, 0))), ("no folder", os.path.join(TMP, "none"))])},
    extra=("images", "mnist", "t10k"), controls=1)

# ------------------------------------------------------------------ the estimator's sparse path and labels
RNG = np.random.RandomState(0)
XS = sp.random(40, 30, density=0.2, format="csr", random_state=0)
XS.indices, XS.indptr = XS.indices.astype(np.int64), XS.indptr.astype(np.int64)
YS = RNG.randint(0, 3, 40)


def broken(fmt="csr", index=None, indptr=None, data=None, cols=30):
    X = XS.copy() if cols == 30 else sp.csr_matrix((XS.data, XS.indices, XS.indptr), shape=(40, cols))
    X = X.asformat(fmt)
    if fmt == "coo":
        X.coords = tuple(c.astype(np.int64) for c in X.coords)
        if index is not None:
            X.col[0] = index
        return X
    X.indices, X.indptr = X.indices.astype(np.int64), X.indptr.astype(np.int64)
    if index is not None:
        X.indices[0] = index
    if indptr == "swap":
        X.indptr[3], X.indptr[4] = X.indptr[4], X.indptr[3] - 1
    elif indptr == "short":
        X.indptr = X.indptr[:-1]
    elif indptr == "over":
        X.indptr[-1] = X.nnz + 5
    if data is not None:
        X.data[0] = data
    return X


X_BAD = bad(*[item for v in (30, 31, 10**5, 2**40, 2**63 - 1, -1) for item in (f"csr index {v}", broken(index=v))],
            "csc index 40", broken("csc", index=40), "coo col 30", broken("coo", index=30),
            "indptr swapped", broken(indptr="swap"), "indptr short", broken(indptr="short"),
            "indptr past nnz", broken(indptr="over"), "data NaN", broken(data=NAN), "data inf", broken(data=INF),
            "torch sparse", torch.tensor(XS.toarray()).to_sparse(), "2**40 columns", broken(cols=2**40))
surface("estimator", "ARClassifier.fit", lambda X, y, sample_weight: ARClassifier(
    max_epochs=None, min_steps=3, random_state=0).fit(X, y, sample_weight=sample_weight).predict_proba(X), {
    "X": ([XS, XS.tocsc(), XS.tocoo()], X_BAD),
    "y": ([YS, np.array(["a", "b", "c"], dtype=object)[YS]],
          bad("None label", np.where(np.arange(40) == 5, None, np.array(["a", "b", "c"], dtype=object)[YS]),
              "NaN object label", np.where(np.arange(40) == 5, NAN, np.array(["a", "b", "c"], dtype=object)[YS]),
              "NaN float label", np.where(np.arange(40) == 5, NAN, YS.astype(float)), "39 labels", YS[:-1])),
    "sample_weight": ([None, np.ones(40)], bad("NaN", np.where(np.arange(40) == 0, NAN, 1.0), "-1", -np.ones(40),
                                                "39 weights", np.ones(39)))},
    extra=("sample_weight",), controls=3)
FITTED = ARClassifier(max_epochs=None, min_steps=3, random_state=0).fit(XS, YS)
surface("estimator", "ARClassifier.predict", lambda X, how: getattr(FITTED, how)(X), {
    "X": ([XS, XS[:5]], X_BAD[:9] + bad("31 columns", broken(cols=31), "dense 29", np.zeros((3, 29)))),
    "how": (["predict", "predict_proba", "decision_function"], [])}, extra=("features",))

# ------------------------------------------------------------------ draws, divergence, saves
surface("draws", "RelaxedUtilityCategorical.rsample", lambda sample_shape, temperature: RelaxedUtilityCategorical(
    PSI[:, :5], "gumbel", temperature).rsample(sample_shape), {
    "sample_shape": ([(), (2,), torch.Size([1, 2])], bad("(-2,)", (-2,), "(2, -1)", (2, -1), "('2',)", ("2",),
                                                         "(1.5,)", (1.5,), "3", 3, "None", None)),
    "temperature": ([0.5, 2.0], bad("0", 0.0, "NaN", NAN, "-1", -1.0))})
surface("draws", "UtilityCategorical.sample", lambda sample_shape: UtilityCategorical(PSI[:, :5]).sample(sample_shape), {
    "sample_shape": ([(), (3,)], bad("(-2,)", (-2,), "('2',)", ("2",), "(True,)", (True,)))})
X8, Y8 = torch.randn(8, 3, generator=G), torch.randint(0, 7, (8,), generator=G)


def bayes_run(lr, num_steps):
    pyro.clear_param_store()
    model = BayesianLinearClassifier(3, 7, likelihood=AR(negatives=2), subsample_size=4)
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    return train(svi, X8, Y8, num_steps=num_steps)[-1]["loss"]


surface("loop", "train(BayesianLinearClassifier)", bayes_run, {
    "lr": ([0.01, 0.05], bad("1e4", 1e4, "1e6", 1e6, "1e8", 1e8)), "num_steps": ([20], [])},
    extra=("learning rate",), controls=1)


def save_full(path):
    import resource
    import signal

    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # (in the battery's forked child only)
    resource.setrlimit(resource.RLIMIT_FSIZE, (512, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
    return atomic_save({"w": torch.ones(10_000)}, path)


surface("files", "atomic_save (a full disk)", lambda path, how: (save_full if how == "full" else
                                                                 lambda p: atomic_save({"w": torch.ones(3)}, p))(path), {
    "path": ([os.path.join(TMP, "ok.pt")], bad("a folder", TMP, "no folder", os.path.join(TMP, "none", "x.pt"))),
    "how": (["plain"], bad("disk full", "full"))}, extra=(TMP,), controls=1)

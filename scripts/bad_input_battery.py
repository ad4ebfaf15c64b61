"""A battery of bad (and a few good) inputs over models, loaders, distributions, the training
loop and the estimator's fit arguments (issue 25's closing count).

What a case must do and how its outcome is counted: ``scripts/_battery.py``. Prints the
counts, then every case that is not ``named``/``ok``.

    OMP_NUM_THREADS=1 python scripts/bad_input_battery.py [--json PATH] [--quiet]
"""

import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch

import pyro
from pyro.infer import SVI

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from pyro_ar.datasets import load_svmlight  # noqa: E402
from pyro_ar.distributions import (AugmentedCategorical, RelaxedUtilityCategorical,  # noqa: E402
                                   UtilityCategorical, check_labels)
from pyro_ar.estimator import ARClassifier, Weights  # noqa: E402
from pyro_ar.likelihoods import OVE  # noqa: E402
from pyro_ar.infer import (  # noqa: E402
    DivergenceCheck,
    EarlyStopping,
    default_elbo,
    default_guide,
    train,
)
from pyro_ar.models import (BayesianLinearClassifier, BayesianNeuralClassifier,  # noqa: E402
                            BigramLanguageModel, CategoricalLatentGP, CategoricalLatentModel,
                            LinearClassifier, NeuralClassifier)
from pyro_ar.optim import lazy_adam  # noqa: E402
from scripts._battery import Registry, run_all  # noqa: E402
from pyro_ar.likelihoods import AR  # noqa: E402
from pyro_ar.models import MAP, Init, LocalPosterior, SparseGPMap  # noqa: E402
from pyro_ar.negatives import SharedNegatives  # noqa: E402

BATTERY = Registry()
case = BATTERY.case


# ------------------------------------------------------------------ models: one SVI step (the guide first)
def step(model, *inputs, validate=False):
    pyro.clear_param_store()
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 0.01}), default_elbo())
    with pyro.validation_enabled(validate):
        return svi.step(*inputs)


def fit(model, *inputs, lr=0.01, num_steps=3):
    pyro.clear_param_store()
    svi = SVI(model, default_guide(model), lazy_adam({"lr": lr}), default_elbo())
    return train(svi, *inputs, num_steps=num_steps)[-1]["loss"]


L = torch.long
torch.manual_seed(0)  # the inputs below are drawn once, the same in every run
X8, Y8 = torch.randn(8, 3), torch.randint(0, 7, (8,))
MODELS = {
    "LinearClassifier": lambda: LinearClassifier(3, 7, subsample_size=4),
    "LinearClassifier(K=1e4)": lambda: LinearClassifier(3, 10_000, subsample_size=4),
    "NeuralClassifier": lambda: NeuralClassifier(torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.Tanh()),
                                                 5, 7, likelihood=AR(negatives=2), subsample_size=4),
    "BayesianLinearClassifier": lambda: BayesianLinearClassifier(3, 7, likelihood=AR(negatives=2),
                                                                 subsample_size=4),
    "BayesianNeuralClassifier": lambda: BayesianNeuralClassifier(torch.nn.Linear(3, 5), 5, 7,
                                                                 likelihood=AR(negatives=2), subsample_size=4),
}
XY_DEFECTS = {  # (a direct step checks its minibatch's labels: every row is bad here)
    "y = K": lambda K: (X8, torch.full((8,), K)),
    "y = -3": lambda K: (X8, torch.full((8,), -3)),
    "y = K + 1e9": lambda K: (X8, torch.full((8,), K + 10**9)),
    "y float 1.5": lambda K: (X8, Y8.double() + 0.5),
    "y bool": lambda K: (X8, Y8 > 2),
    "y a list": lambda K: (X8, Y8.tolist()),
    "y 2-D": lambda K: (X8, Y8[:, None]),
    "y too short": lambda K: (X8, Y8[:5]),
    "x 0 rows": lambda K: (X8[:0], Y8[:0]),
    "x a list": lambda K: (X8.tolist(), Y8),
    "x 1-D": lambda K: (X8[:, 0], Y8),
    "x width 4": lambda K: (torch.randn(8, 4), Y8),
    "x complex": lambda K: (X8.to(torch.complex64), Y8),
    "x int64": lambda K: (X8.long(), Y8),
    "x None": lambda K: (None, Y8),
}
for mname, make in MODELS.items():
    for dname, inputs in XY_DEFECTS.items():
        for validate in (False, True):
            def one_step(make=make, inputs=inputs, validate=validate):
                model = make()
                return step(model, *inputs(model.num_classes), validate=validate)
            case("models", f"{mname}: {dname} (validation {validate})", ("x", "y", "body"))(one_step)
    case("models", f"{mname}: good inputs", (), bad=False)(lambda make=make: step(make(), X8, Y8))
    case("models", f"{mname}: train() with NaN in row 6 of x", ("x",))(
        lambda make=make: fit(make(), torch.where(torch.arange(8)[:, None] == 6, math.nan, X8), Y8))
    def bad_row(make=make):
        model = make()
        return fit(model, X8, torch.where(torch.arange(8) == 3, model.num_classes, Y8))
    case("models", f"{mname}: train() with label K in row 3", ("y",))(bad_row)

ITEMS = torch.randint(-1, 9, (6, 4))
for mname, make in {"CategoricalLatentModel": lambda: CategoricalLatentModel(9, 2,
                                                                             likelihood=AR(negatives=SharedNegatives(3)),
                                                                             subsample_size=3),
                    "CategoricalLatentModel(local)": lambda: CategoricalLatentModel(9, 2,
                                                                                    likelihood=AR(negatives=SharedNegatives(3)),
                                                                                    posterior=LocalPosterior(6, 2, 9))
                    }.items():
    for dname, items in {"items = P": lambda: ITEMS.index_fill(1, torch.tensor([0]), 9), "items = -2": lambda: ITEMS - 10,
                         "float items": lambda: ITEMS.float(), "bool items": lambda: ITEMS > 0,
                         "1-D items": lambda: ITEMS[0], "0 sessions": lambda: ITEMS[:0],
                         "a list": lambda: ITEMS.tolist(), "7 sessions": lambda: torch.cat([ITEMS, ITEMS[:1]])}.items():
        if dname == "7 sessions" and "local" not in mname:
            continue
        case("models", f"{mname}: {dname}", ("items",))(lambda make=make, items=items: step(make(), items()))
    case("models", f"{mname}: good items", (), bad=False)(lambda make=make: step(make(), ITEMS))
    case("models", f"{mname}: train() with item P in session 4", ("items",))(
        lambda make=make: fit(make(), ITEMS.index_put((torch.tensor([4]), torch.tensor([1])), torch.tensor(9))))

XC = torch.stack([torch.randint(-1, 3, (6,)), torch.randint(0, 5, (6,))], -1)
CLGP = lambda **kw: CategoricalLatentGP([3, 5], likelihood=AR(negatives=SharedNegatives(2)),  # noqa: E731
                                        **{"utility": SparseGPMap(2, 3), **kw})
for dname, x in {"x = K_d": lambda: XC.index_fill(1, torch.tensor([0]), 3), "x = -2": lambda: XC - 3, "float x": lambda: XC.float(),
                 "3 columns": lambda: torch.cat([XC, XC[:, :1]], -1), "0 rows": lambda: XC[:0]}.items():
    case("models", f"CategoricalLatentGP: {dname}", ("x",))(lambda x=x: step(CLGP(), x()))
case("models", "CategoricalLatentGP: good x", (), bad=False)(lambda: step(CLGP(), XC))
case("models", "CategoricalLatentGP: train() with x[5, 1] = 5", ("x",))(
    lambda: fit(CLGP(subsample_size=2), XC.index_put((torch.tensor([5]), torch.tensor([1])), torch.tensor(5))))
for arg, build, values in (
        ("lengthscale", lambda v: CLGP(utility=SparseGPMap(2, 3, lengthscale=v)), [-1.0, 0.0, math.nan, math.inf, "2", None]),
        ("variance", lambda v: CLGP(utility=SparseGPMap(2, 3, variance=v)), [-2.0, math.nan]),
        ("posterior_scale", lambda v: CLGP(init=Init(posterior_scale=v)), [0.0, -1.0])):
    for v in values:
        case("models", f"CategoricalLatentGP({arg}={v!r})", (arg,))(lambda build=build, v=v: build(v))

PREV, NEXT = torch.randint(0, 6, (8,)), torch.randint(0, 6, (8,))
BIGRAM = lambda: BigramLanguageModel(6, 3, likelihood=AR(negatives=SharedNegatives(2)), subsample_size=4)  # noqa: E731
for dname, inputs in {"prev = K": lambda: (torch.full((8,), 6), NEXT), "next = -1": lambda: (PREV, NEXT - 6),
                      "float prev": lambda: (PREV.float(), NEXT), "next too long": lambda: (PREV, torch.cat([NEXT, NEXT])),
                      "0 rows": lambda: (PREV[:0], NEXT[:0])}.items():
    case("models", f"BigramLanguageModel: {dname}", ("prev", "next"))(lambda inputs=inputs: step(BIGRAM(), *inputs()))
case("models", "BigramLanguageModel: good", (), bad=False)(lambda: step(BIGRAM(), PREV, NEXT))
case("models", "BigramLanguageModel: train() with prev = K in row 2", ("prev",))(
    lambda: fit(BIGRAM(), torch.where(torch.arange(8) == 2, 6, PREV), NEXT))

for label, names, kw in [
        ("likelihood=AR(negatives='many')", ("negatives",), lambda: dict(likelihood=AR(negatives="many"))),
        ("likelihood=AR(negatives=0)", ("negatives",), lambda: dict(likelihood=AR(negatives=0))),
        ("likelihood=AR(negatives=7)", ("num_negatives",), lambda: dict(likelihood=AR(negatives=7))),
        ("sparse='yes'", ("sparse",), lambda: dict(sparse="yes")),
        ("num_classes=1", ("num_classes",), lambda: dict(num_classes=1)),
        ("num_features=0", ("num_features",), lambda: dict(num_features=0)),
        ("likelihood='softmax'", ("likelihood",), lambda: dict(likelihood="softmax")),
        ("likelihood=AR('cauchy')", ("noise",), lambda: dict(likelihood=AR("cauchy"))),
        ("subsample_size=0", ("subsample_size",), lambda: dict(subsample_size=0)),
        ("weights=MAP(prior_scale=-1.0)", ("prior_scale",), lambda: dict(weights=MAP(prior_scale=-1.0))),
        ("rank=0", ("rank",), lambda: dict(rank=0))]:
    def construct(kw=kw):
        args = dict(num_features=3, num_classes=7, **kw())
        model = LinearClassifier(args.pop("num_features"), args.pop("num_classes"), **args)
        return step(model, X8, Y8)
    case("models", f"LinearClassifier({label})", names)(construct)


# ------------------------------------------------------------------ the training loop
def loop_case(description, names, **kwargs):
    def run():
        model = LinearClassifier(3, 7, subsample_size=4)
        svi = SVI(model, default_guide(model), lazy_adam({"lr": kwargs.pop("lr", 0.01)}), default_elbo())
        return train(svi, X8, Y8, **{"num_steps": 3, **kwargs})[-1]["loss"]
    case("loop", description, names)(run)


for kw in [dict(num_steps=-1), dict(num_steps=2.5), dict(eval_every=0), dict(log_every=-2), dict(clock="gpu"),
           dict(time_budget=-1.0), dict(checkpoint_every=0)]:
    loop_case(f"train({kw})", tuple(kw), **kw)
loop_case("train(lr=1e8): diverges", ("learning rate",), lr=1e8, num_steps=20)
loop_case("train(lr=1e6): diverges", ("learning rate",), lr=1e6, num_steps=20)
for kw in [dict(factor=1.0), dict(factor=math.nan), dict(factor=math.inf), dict(warmup=0), dict(warmup=2.0),
           dict(factor=True)]:
    case("loop", f"DivergenceCheck({kw})", tuple(kw))(lambda kw=kw: DivergenceCheck(**kw))
for kw in [dict(mode="up"), dict(patience=0), dict(min_delta=-1.0)]:
    case("loop", f"EarlyStopping('m', {kw})", tuple(kw))(lambda kw=kw: EarlyStopping("m", **kw))


# ------------------------------------------------------------------ distributions
PSI = torch.randn(3, 5)
for t in [0.0, -1.0, 1e-40, math.nan, math.inf, torch.tensor([1.0, 2.0]), "1"]:
    case("distributions", f"RelaxedUtilityCategorical(temperature={t!r})", ("temperature",))(
        lambda t=t: RelaxedUtilityCategorical(PSI, "gumbel", t, validate_args=True).rsample())
for scale, t in [(1e30, 1e-37), (3e38, 1e-3), (1.0, 1.2e-38), (1.0, 1e30)]:
    case("distributions", f"RelaxedUtilityCategorical(psi x {scale:g}, temperature={t:g}).rsample()", (), bad=False)(
        lambda scale=scale, t=t: RelaxedUtilityCategorical((PSI * scale).clamp(-3e38, 3e38), "normal", t).rsample())
case("distributions", "RelaxedUtilityCategorical.infer_shapes event", (), bad=False)(
    lambda: (_ for _ in ()).throw(AssertionError("wrong event shape"))
    if RelaxedUtilityCategorical.infer_shapes(utility=(5, 7))[1] != (7,) else 0.0)
for value, dname in [(torch.tensor([0, 5, 1]), "label K"), (torch.tensor([0.5, 1, 2]), "float"),
                     (torch.tensor([-1, 0, 1]), "label -1"), ([0, 1, 2], "list"), (torch.tensor([[0, 1], [1, 2]]), "2 x 2"),
                     (torch.tensor([0, 1, 2]).to(torch.complex64), "complex"), (torch.tensor([True, False, True]), "bool")]:
    case("distributions", f"UtilityCategorical.log_prob({dname})", ("value",))(
        lambda value=value: UtilityCategorical(PSI, validate_args=True).log_prob(value))
    case("distributions", f"check_labels({dname}, name='y')", ("y",))(
        lambda value=value: check_labels(value, 5, torch.Size([3]), name="y"))
for eps, dname in [(torch.full((3,), math.nan), "NaN eps"), (torch.zeros(4), "eps of 4"), ("0", "eps a string")]:
    case("distributions", f"AugmentedCategorical({dname})", ("eps", "utility"))(
        lambda eps=eps: AugmentedCategorical(PSI, eps, validate_args=True).log_prob(torch.tensor([0, 1, 2])))


# ------------------------------------------------------------------ loaders
SVM_FILES = {
    "a NaN value": "0 0:nan\n1 1:1\n", "an inf value": "0 0:1\n1 1:inf\n", "label 0.5": "0.5 0:1\n1 1:1\n",
    "label -1": "1 0:1\n-1 1:1\n", "label 2.0e0 and 1e400": "1e400 0:1\n1 1:1\n", "header says 4 rows": "4 2 2\n0 0:1\n1 1:1\n",
    "header says 1 row": "1 2 2\n0 0:1\n1 1:1\n", "empty": "", "only comments": "# nothing\n",
    "no labels": " 0:1\n 1:1\n", "index 2^31": "0 2147483648:1\n1 0:1\n", "index 2^40": "0 1099511627776:1\n",
    "value 1e39": "0 0:1e39\n1 1:1\n", "garbage": "a b c\n", "label over num_labels": "9 0:1\n1 1:1\n",
}
TMP = tempfile.mkdtemp(prefix="pyro_ar_battery_")
for dname, text in SVM_FILES.items():
    def load(dname=dname, text=text):
        path = os.path.join(TMP, f"{dname.replace(' ', '_')}.txt")
        with open(path, "w") as f:
            f.write(text)
        d = load_svmlight(path, num_labels=5 if "num_labels" in dname else None)
        return d.x_train
    case("loaders", f"load_svmlight: {dname}", ("load_svmlight",))(load)
case("loaders", "load_svmlight: missing file", ("missing.txt",))(lambda: load_svmlight(os.path.join(TMP, "missing.txt")))


def good_svmlight():
    path = os.path.join(TMP, "good.txt")
    with open(path, "w") as f:
        f.write("3 3 4\n0,2 0:1.5 2:0.5\n1 1:2\n 0:1\n")
    return load_svmlight(path).x_train
case("loaders", "load_svmlight: good file", (), bad=False)(good_svmlight)


# ------------------------------------------------------------------ the estimator's fit arguments
RNG = np.random.RandomState(0)
XE, YE = RNG.randn(40, 3), RNG.randint(0, 3, 40)


def est(X=XE, y=YE, sample_weight=None, **params):
    clf = ARClassifier(max_epochs=None, min_steps=10, random_state=0, **params)
    clf.fit(X, y, sample_weight=sample_weight)
    return clf.predict_proba(X if not isinstance(X, list) else np.asarray(X))


for params in [dict(learning_rate=-1.0), dict(learning_rate=math.nan), dict(learning_rate=1e8), dict(num_negatives=0),
               dict(batch_size=0), dict(max_epochs=-1), dict(noise="cauchy"), dict(weights="flat"),
               dict(weights=Weights(prior_scale=-1.0)), dict(likelihood="softmax"), dict(likelihood=OVE()),
               dict(early_stopping={"validation_fraction": 1.5}), dict(device="tpu"), dict(weights=Weights(rank=0))]:
    case("estimator", f"ARClassifier({params})", tuple(params) + ("learning_rate",))(lambda params=params: est(**params))
X_NAN = XE.copy()
X_NAN[3, 1] = math.nan
X_BIG = XE.copy()
X_BIG[:, 1] = RNG.uniform(-1, 1, 40) * 3e38
for dname, kw in {"X with NaN": dict(X=X_NAN), "X with inf": dict(X=np.where(XE > 2, math.inf, XE)),
                  "y too short": dict(y=YE[:-1]), "y continuous": dict(y=RNG.randn(40)), "y one class": dict(y=np.zeros(40)),
                  "y 2-D": dict(y=np.stack([YE, YE], 1)), "X 1-D": dict(X=XE[:, 0]), "X 0 rows": dict(X=XE[:0], y=YE[:0]),
                  "X strings": dict(X=np.full((40, 3), "a")), "sample_weight negative": dict(sample_weight=-np.ones(40)),
                  "sample_weight NaN": dict(sample_weight=np.full(40, math.nan)),
                  "sample_weight short": dict(sample_weight=np.ones(3))}.items():
    case("estimator", f"ARClassifier.fit: {dname}", ("X", "y", "sample_weight", "class", "label", "samples"))(
        lambda kw=kw: est(**kw))
case("estimator", "ARClassifier.fit: a column near 3e38 (float32)", (), bad=False)(
    lambda: est(X=X_BIG.astype(np.float32)))
case("estimator", "ARClassifier.fit: good", (), bad=False)(lambda: est())


def warm(width):
    clf = ARClassifier(max_epochs=None, min_steps=10, random_state=0, warm_start=True).fit(XE, YE)
    return clf.fit(RNG.randn(40, width), YE).predict_proba(RNG.randn(40, width))
for width in (2, 5):
    case("estimator", f"ARClassifier(warm_start=True).fit with {width} features after 3", ("warm_start", "features"))(
        lambda width=width: warm(width))


# ------------------------------------------------------------------ the run
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None, help="write the per-case outcomes here")
    p.add_argument("--quiet", action="store_true", help="print the counts only")
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    return run_all(BATTERY, quiet=a.quiet, json_path=a.json)


if __name__ == "__main__":
    sys.exit(main())

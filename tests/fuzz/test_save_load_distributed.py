"""Fuzz (issue 25): hand-made estimator files and checkpoints, and the distributed helpers'
arguments, in one process.

* estimator files and checkpoints: a fitted estimator / a 6-step training run is saved, one
  entry of the file is replaced by a value from a pool of odd ones (another type, NaN, a
  wrong shape or dtype, a negative count, a made-up name) and written back *with a valid
  checksum* (a well-formed hand-made file). Loading (and, for a checkpoint, training 2 more
  steps) must raise a named error (``ValueError`` / ``TypeError`` / ``CheckpointError``
  naming the file) or give finite predictions / parameters; a replacement that is certainly
  invalid (another type, non-finite, another shape or dtype, another name) and is accepted
  anyway counts as *silently accepted*;
* the distributed helpers (``rank_path``, ``shard_range``, ``class_shard``,
  ``ShardedDataPlate``, ``sharded_evaluate``, ``mean_across``, ``init_process_group``,
  ``agree_on_checkpoint``) with arguments drawn from good and bad values, each call
  judged by a validity rule written here.

Counts: ``STATS`` of tests/fuzz/_harness.py (printed at the end of the run), with
``silently_accepted``. ``PYRO_AR_FUZZ_COUNT_ONLY=1`` counts failures instead of stopping
at the first, and ``PYRO_AR_FUZZ_SCALE=k`` draws k times as many examples (for a battery's
report)::

    PYRO_AR_FUZZ_SCALE=4 PYRO_AR_FUZZ_COUNT_ONLY=1 python -m pytest -q -m slow tests/fuzz/test_save_load_distributed.py
"""

import copy
import math
import os

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.distributed import (
    ShardedDataPlate,
    ShardedLinearUtility,
    class_shard,
    init_process_group,
    mean_across,
    rank_path,
    shard_range,
)
from pyro_ar.distributed.sharded_evaluation import sharded_evaluate
from pyro_ar.files import atomic_save
from pyro_ar.infer import CheckpointError, default_elbo, default_guide, train
from pyro_ar.infer.checkpoint import agree_on_checkpoint, previous_path
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import lazy_adam

from tests.fuzz import _harness as H

sklearn = pytest.importorskip("sklearn")
from pyro_ar import ARClassifier  # noqa: E402
from pyro_ar.likelihoods import AR

pytestmark = pytest.mark.slow  # a fuzz battery

COUNT_ONLY = os.environ.get("PYRO_AR_FUZZ_COUNT_ONLY") == "1"
#: ``PYRO_AR_FUZZ_SCALE=k`` draws k times as many examples (a larger battery than the suite's)
SCALE = max(1, int(os.environ.get("PYRO_AR_FUZZ_SCALE", "1")))
FILE_ERRORS = (ValueError, TypeError, CheckpointError)

POOL = [None, -5, 2.5, math.nan, math.inf, "nope", [], {}, True, 10 ** 30, "weight",
        torch.tensor(math.nan), torch.zeros(0), torch.zeros(3, 7), torch.full((2,), math.inf),
        torch.zeros(2, dtype=torch.int64), [1, "a"], {"state": {}}, -1.0]


def _log(message):
    if os.environ.get("PYRO_AR_FUZZ_LOG"):
        with open(os.environ["PYRO_AR_FUZZ_LOG"], "a") as f:
            f.write(message.replace("\n", " ")[:400] + "\n")


def _fail(message):
    if COUNT_ONLY:
        _log(message)
        return
    raise H.Unnamed(message)


def _silently_accepted(what):
    H.STATS["silently_accepted"] += 1
    _fail(f"silently accepted: {what}")


def _guarded(fn, what=""):
    """Run ``fn``; in count-only mode an Unnamed failure is counted (by the harness) and kept going."""
    try:
        fn()
    except H.Unnamed as e:
        if not COUNT_ONLY:
            raise
        _log(f"{e} <- {e.__cause__!r} [{what}]")


# ------------------------------------------------------------------ payload mutation
def _leaves(d, prefix=()):
    """Paths (tuples of keys / indices) of the entries of a nested payload."""
    out = []
    items = d.items() if isinstance(d, dict) else enumerate(d) if isinstance(d, (list, tuple)) else ()
    for k, v in items:
        path = prefix + (k,)
        out.append(path)
        if isinstance(v, (dict, list, tuple)) and len(path) < 6:
            out += _leaves(v, path)
    return out


def _get(d, path):
    for k in path:
        d = d[k]
    return d


def _set(d, path, value):
    parent = _get(d, path[:-1])
    if isinstance(parent, tuple):  # rebuild the tuple in its own parent
        items = list(parent)
        items[path[-1]] = value
        _set(d, path[:-1], tuple(items))
    else:
        parent[path[-1]] = value


OPTIONAL = ("validation_scores_", "best_validation_score_", "prior_scale_scores_", "predict_seed",
            "feature_names_in", "prior_scale_", "divergence", "scheduler", "config")


def _certainly_invalid(old, new, path) -> bool:
    """Whether replacing ``old`` by ``new`` makes the file invalid for sure."""
    if new is None and path[-1] in OPTIONAL:
        return False
    if path[0] == "hyperparameters":  # their own checks decide; only the clearly wrong kinds here
        # (early_stopping takes a dict of its options, ``{}`` meaning the defaults)
        return isinstance(new, (torch.Tensor, list)) or (isinstance(new, dict) and path[-1] != "early_stopping") or (
            isinstance(new, float) and not math.isfinite(new)) or (isinstance(new, str) and new != old)
    if any(isinstance(k, str) and k in ("feature_names_in", "history", "extra", "wall", "cpu")
           for k in path):
        return False  # free text / records: many replacements are legitimate
    if isinstance(old, torch.Tensor):
        return not isinstance(new, torch.Tensor) or new.shape != old.shape or new.dtype != old.dtype or (
            new.is_floating_point() and not bool(torch.isfinite(new).all()))
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is not type(new)
    if isinstance(old, (int, float)) and isinstance(new, (int, float)):
        if isinstance(old, int) and isinstance(new, float):
            return True
        return math.isfinite(old) and not math.isfinite(new)
    if isinstance(old, str) and isinstance(new, str):
        return old != new
    return type(old) is not type(new) and not (old is None or new is None and path[-1] in ("config",))


def _mutation(payload, draw_path, draw_value):
    paths = [p for p in _leaves(payload) if p[0] not in ("checksum", "format", "version")]
    path = paths[draw_path % len(paths)]
    d = copy.deepcopy(payload)
    old = _get(d, path)
    new = POOL[draw_value % len(POOL)]
    if isinstance(new, torch.Tensor):
        new = new.clone()
    _set(d, path, new)
    return d, path, old, new


# ------------------------------------------------------------------ estimator files
@pytest.fixture(scope="module")
def estimator_file(tmp_path_factory):
    rng = np.random.RandomState(0)
    X = rng.randn(90, 4)
    y = np.array(["a", "b", "c"])[X[:, :3].argmax(1)]
    clf = ARClassifier(min_steps=0, max_epochs=2, random_state=0, early_stopping=True).fit(X, y)
    path = tmp_path_factory.mktemp("est") / "model.pt"
    clf.save(path)
    return torch.load(path, weights_only=True), X


@settings(H.FUZZ, max_examples=150 * SCALE)
@given(p=st.integers(0, 10 ** 6), v=st.integers(0, 10 ** 6))
def test_hand_made_estimator_files(tmp_path_factory, estimator_file, p, v):
    payload, X = estimator_file
    d, path, old, new = _mutation(payload, p, v)
    file = tmp_path_factory.mktemp("est") / "model.pt"
    d.pop("checksum", None)
    atomic_save(d, file)

    def check():
        ok, clf = H.call(lambda: ARClassifier.load(file), ("model.pt",), kind="estimator_files")
        if not ok:
            return
        ok, proba = H.call(lambda: torch.as_tensor(clf.predict_proba(X)), ("X",), kind="estimator_files")
        if ok:
            H.finite(f"predict_proba after {path} = {new!r}", proba)
        if _certainly_invalid(old, new, path):
            _silently_accepted(f"estimator file {path}: {old!r} -> {new!r}")
    _guarded(check, f"estimator file {path} = {new!r}")


# ------------------------------------------------------------------ checkpoints
D, K, N = 4, 12, 200


def _svi():
    model = LinearClassifier(D, K, likelihood=AR(negatives=4), subsample_size=32, sparse=True)
    return SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())


@pytest.fixture(scope="module")
def checkpoint_payload(tmp_path_factory):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    data = make_linear_teacher(N, D, K, seed=0)
    path = tmp_path_factory.mktemp("ck") / "run.pt"
    train(_svi(), data.x, data.y, num_steps=6, checkpoint=str(path), eval_every=3)
    pyro.clear_param_store()
    return torch.load(path, weights_only=True), data


@settings(H.FUZZ, max_examples=120 * SCALE)
@given(p=st.integers(0, 10 ** 6), v=st.integers(0, 10 ** 6))
def test_hand_made_checkpoints(tmp_path_factory, checkpoint_payload, p, v):
    payload, data = checkpoint_payload
    d, path, old, new = _mutation(payload, p, v)
    file = tmp_path_factory.mktemp("ck") / "run.pt"
    d.pop("checksum", None)
    atomic_save(d, file)
    pyro.clear_param_store()
    pyro.set_rng_seed(1)

    def run():
        import warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return train(_svi(), data.x, data.y, num_steps=8, checkpoint=str(file), eval_every=3)

    def check():
        ok, history = H.call(run, ("run.pt",), kind="checkpoints", allowed=FILE_ERRORS)
        if not ok:
            return
        for name, value in pyro.get_param_store().items():
            H.finite(f"param {name} after {path} = {new!r}", value.detach())
        if history[-1]["step"] != 8:
            _fail(f"the run ended at step {history[-1]['step']}")
        if _certainly_invalid(old, new, path):
            _silently_accepted(f"checkpoint {path}: {old!r} -> {new!r}")
    _guarded(check, f"checkpoint {path} = {new!r}")
    pyro.clear_param_store()


# ------------------------------------------------------------------ distributed helpers
ARGS = [-1, 0, 1, 2, 3, 7, 2.0, True, None, "1", "all", 10 ** 12]


def _is_int(v, low=None):
    return isinstance(v, int) and not isinstance(v, bool) and (low is None or v >= low)


def _judge(ok, valid, what):
    if ok and not valid:
        _silently_accepted(what)


@settings(H.FUZZ, max_examples=150 * SCALE)
@given(a=st.sampled_from(ARGS), b=st.sampled_from(ARGS), c=st.sampled_from(ARGS),
       which=st.sampled_from(["rank_path", "shard_range", "class_shard", "plate"]))
def test_distributed_arguments(a, b, c, which):
    def check():
        if which == "rank_path":  # None: this process's rank (0) and world size (1)
            rank, world = 0 if a is None else a, 1 if b is None else b
            valid = _is_int(rank, 0) and _is_int(world, 1) and rank < world
            ok, out = H.call(lambda: rank_path("run.pt", a, b), ("rank", "world_size"), kind="distributed")
        elif which == "shard_range":
            valid = _is_int(a, 1) and _is_int(c, 1) and _is_int(b, 0) and b < c and a >= c
            ok, out = H.call(lambda: shard_range(a, b, c), ("n", "shard", "num_shards"), kind="distributed")
        elif which == "class_shard":
            shard, shards = 0 if b is None else b, 1 if c is None else c
            valid = _is_int(a, 1) and _is_int(shards, 1) and _is_int(shard, 0) and shard < shards and a >= shards
            ok, out = H.call(lambda: class_shard(a, b, c), ("num_classes", "shard", "num_shards", "n"),
                             kind="distributed")
        else:
            shards = 1 if c is None else c
            valid = (_is_int(a, 1) and _is_int(shards, 1) and a >= shards
                     and (b is None or _is_int(b, 1) and b % shards == 0))
            ok, out = H.call(lambda: ShardedDataPlate(a, b, shard=0, num_shards=c),
                             ("num_data", "subsample_size", "num_shards", "n"), kind="distributed")
        _judge(ok, valid, f"{which}({a!r}, {b!r}, {c!r})")
    _guarded(check)


@settings(H.FUZZ, max_examples=100 * SCALE)
@given(label=st.sampled_from([0, 5, 9, 10, -1, 10 ** 6]), chunk=st.sampled_from([None, 1, 3, 0, -2, 2.5, True]),
       reduce=st.sampled_from(["mean", "sum", "none", "avg"]), rows=st.sampled_from([0, 1, 4]),
       bad_x=st.booleans())
def test_sharded_evaluation_arguments(label, chunk, reduce, rows, bad_x):
    K_ = 10
    x = torch.randn(rows, 3)
    if bad_x and rows:
        x[0, 0] = math.nan
    W, b = torch.randn(K_, 3), torch.zeros(K_)
    y = torch.full((rows,), label, dtype=torch.long)
    valid = ((0 <= label < K_ or rows == 0) and (chunk is None or _is_int(chunk, 1))
             and reduce in ("mean", "sum", "none") and not (rows == 0 and reduce == "mean")
             and not (bad_x and rows))

    def check():
        ok, out = H.call(lambda: sharded_evaluate(ShardedLinearUtility(x, W, b, class_shard(K_, 0, 1)), y,
                                                  chunk_size=chunk, reduce=reduce),
                         ("labels", "chunk_size", "reduce", "rows", "x"), kind="distributed")
        if ok and not bad_x:
            for k, v in out.items():
                H.finite(f"sharded_evaluate {k}", torch.as_tensor(v))
        _judge(ok, valid, f"sharded_evaluate(label={label}, chunk={chunk!r}, reduce={reduce!r}, rows={rows}, "
                          f"nan_x={bad_x})")
    _guarded(check)


@settings(H.FUZZ, max_examples=40 * SCALE)
@given(value=st.sampled_from([1.5, math.nan, -math.inf, "a", None]), count=st.sampled_from([0, 1, 10, -3, 2.5]))
def test_mean_across_arguments(value, count):
    valid = isinstance(value, float) and not math.isnan(value) and _is_int(count, 1)

    def check():
        ok, out = H.call(lambda: mean_across({"log_lik": value}, count), ("metrics", "count", "log_lik"),
                         kind="distributed")
        if ok and valid and math.isfinite(value):
            H.finite("mean_across", out["log_lik"])
        _judge(ok, valid, f"mean_across({value!r}, count={count!r})")
    _guarded(check)


@settings(H.FUZZ, max_examples=20 * SCALE)
@given(timeout=st.sampled_from([0, -1, math.nan, "5", None, 1e9, 30]))
def test_init_process_group_timeout(timeout):
    valid = isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and 0 < timeout < 1e8

    def check():
        ok, out = H.call(lambda: init_process_group(timeout=timeout), ("timeout",), kind="distributed")
        _judge(ok, valid, f"init_process_group(timeout={timeout!r})")
    _guarded(check)


@settings(H.FUZZ, max_examples=40 * SCALE)
@given(newest=st.sampled_from(["none", "good", "garbage", "empty", "foreign", "negative"]),
       previous=st.sampled_from(["none", "good", "garbage"]))
def test_agree_on_checkpoint_files(tmp_path_factory, checkpoint_payload, newest, previous):
    payload, _ = checkpoint_payload
    folder = tmp_path_factory.mktemp("agree")
    path = str(folder / "run.pt")
    for file, kind in ((path, newest), (previous_path(path), previous)):
        if kind == "good":
            atomic_save({k: v for k, v in payload.items() if k != "checksum"}, file)
        elif kind == "garbage":
            with open(file, "wb") as f:
                f.write(b"\x00garbage" * 10)
        elif kind == "empty":
            open(file, "wb").close()
        elif kind == "foreign":
            torch.save({"weights": torch.zeros(2)}, file)
        elif kind == "negative":
            atomic_save(dict({k: v for k, v in payload.items() if k != "checksum"}, step=-3), file)

    def check():
        ok, out = H.call(lambda: agree_on_checkpoint(path), ("run",), kind="distributed",
                         allowed=FILE_ERRORS)
        if ok and out is not None:
            H.call(lambda: torch.load(out, weights_only=True)["step"] >= 0 or (_ for _ in ()).throw(
                ValueError("run: negative step chosen")), ("run",), kind="distributed")
    _guarded(check)

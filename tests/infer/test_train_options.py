"""``train``'s options object (:class:`pyro_ar.infer.TrainOptions`): validation naming the field
and the value, keywords as fields, the model's keyword arguments kept apart (``model_kwargs``),
and the classification of a failing first step after a resume by exception type."""

import dataclasses

import pytest

import pyro
from pyro.infer import SVI

from pyro_ar.datasets import make_linear_teacher
from pyro_ar.infer import CheckpointError, TrainOptions, default_elbo, default_guide, train
from pyro_ar.infer.checkpoint import CollectiveError
from pyro_ar.models import LinearClassifier
from pyro_ar.optim import lazy_adam
from pyro_ar.likelihoods import AR


class _RecordingSVI:
    """Stands in for SVI: records the arguments of every step, returns 1.0."""

    def __init__(self):
        self.calls = []

    def step(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return 1.0


@pytest.mark.parametrize("field, value", [
    ("num_steps", -1), ("num_steps", 2.0), ("num_steps", True), ("eval_every", 0), ("log_every", 1.5),
    ("checkpoint_every", -3), ("time_budget", -1.0), ("time_budget", "1"), ("validation", "some"),
    ("clock", "gpu"), ("clock", 3), ("eval_fn", 3), ("early_stopping", "val_ll"), ("divergence", "yes"),
    ("scheduler", object()), ("callbacks", "stop"), ("callbacks", [3]), ("eval_times", 1.0), ("modules", None),
])
def test_a_bad_field_names_the_field_and_the_value(field, value):
    with pytest.raises(ValueError, match=f"TrainOptions: {field} must be ") as info:
        TrainOptions(**{field: value})
    assert str(info.value).endswith(f", got {field}={value!r}")
    with pytest.raises(ValueError, match=f"{field}="):  # the same through train's keywords
        train(_RecordingSVI(), **{field: value})


def test_defaults_and_the_derived_periods():
    o = TrainOptions()
    assert (o.num_steps, o.evaluation_period, o.record_period) == (1000, 50, 50)
    assert TrainOptions(num_steps=10).evaluation_period == 1  # at least 1
    assert TrainOptions(num_steps=100, eval_every=7).record_period == 7
    assert TrainOptions(num_steps=100, eval_every=7, log_every=2).record_period == 2
    assert TrainOptions(eval_times=[3.0, 1.0]).eval_times == (1.0, 3.0)  # sorted, immutable
    with pytest.raises(dataclasses.FrozenInstanceError):
        o.num_steps = 3


def test_an_unknown_keyword_is_a_type_error_pointing_at_model_kwargs():
    with pytest.raises(TypeError, match=r"unknown training option\(s\) \['num_step'\].*model_kwargs"):
        train(_RecordingSVI(), num_step=3)


def test_model_kwargs_reach_the_step_apart_from_the_loop_options():
    """A model keyword named like a loop option (``num_steps``) goes to ``svi.step``, and the
    loop's ``num_steps`` stays the loop's."""
    svi = _RecordingSVI()
    hist = train(svi, "x", "y", num_steps=4, model_kwargs={"num_steps": 99, "scale": 2.0})
    assert hist[-1]["step"] == 4 and len(svi.calls) == 4
    assert all(c == (("x", "y"), {"num_steps": 99, "scale": 2.0}) for c in svi.calls)


def test_an_options_object_and_keyword_overrides():
    options = TrainOptions(num_steps=6, eval_every=3, eval_at_start=False)
    assert [h["step"] for h in train(_RecordingSVI(), options=options)] == [0, 3, 6]
    assert [h["step"] for h in train(_RecordingSVI(), options=options, num_steps=9)] == [0, 3, 6, 9]
    assert options.num_steps == 6  # the object itself is unchanged (frozen; overrides copy it)


def _svi():
    model = LinearClassifier(4, 12, likelihood=AR(negatives=4), subsample_size=32, sparse=True)
    return SVI(model, default_guide(model), lazy_adam({"lr": 0.05}), default_elbo())


@pytest.mark.parametrize("error, expected", [
    (CollectiveError("all_reduce(sum) across the ranks failed on rank 0 of 2"), CollectiveError),
    (RuntimeError("a shape mismatch in the step (mentions gloo, but is no collective)"), CheckpointError),
    (ValueError("a parameter of another shape"), CheckpointError),
])
def test_a_failing_first_step_after_resume_is_classified_by_its_type(tmp_path, error, expected):
    """The collectives' failures (by type: :class:`CollectiveError`, torch's ``DistError``)
    pass through; any other failure of the first step after a resume names the checkpoint."""
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    data = make_linear_teacher(64, 4, 12, seed=0)
    path = tmp_path / "run.pt"
    train(_svi(), data.x, data.y, num_steps=2, checkpoint=path, eval_at_start=False)
    svi = _svi()

    def failing_step(*args, **kwargs):
        raise error
    svi.step = failing_step
    with pytest.warns(UserWarning, match="resumed"), pytest.raises(expected) as info:
        train(svi, data.x, data.y, num_steps=4, checkpoint=path, eval_at_start=False)
    if expected is CheckpointError:
        assert str(path) in str(info.value) and "does not fit this run" in str(info.value)
        assert info.value.__cause__ is error
    else:
        assert info.value is error

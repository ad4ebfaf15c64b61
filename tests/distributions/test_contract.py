"""Table-driven contract of every distribution of pyro_ar.distributions (in the style of
Pyro's tests/distributions fixtures): one table of (class, constructor examples, a valid
value, a bad parameter), and generic tests over it -- batch/event shapes, expand (shape,
every attribute kept, log_prob equal), infer_shapes, sample shapes (NotImplementedError for
likelihood factors), Pyro validation of parameters and values (ValueError naming the
argument), enumerate_support, pickling, finite log_prob and gradients.
"""

import pickle
from dataclasses import dataclass, field
from typing import Callable, Optional

import pytest
import torch

import pyro

import pyro_ar.distributions as distributions
from pyro_ar.distributions import (
    AugmentedCategorical,
    BouchardBound,
    ClassSumLikelihood,
    FastGumbel,
    GaussianExpectedFactor,
    GumbelExpectedFactor,
    GumbelQExpectedFactor,
    JaakkolaJordanBernoulli,
    OVECategorical,
    RelaxedUtilityCategorical,
    RelaxedUtilityCategoricalStraightThrough,
    SampledSoftmax,
    UtilityCategorical,
)
from pyro_ar.negatives import Negatives, SharedNegatives
from pyro_ar.noise import NoiseDistribution, get_noise

D64 = torch.float64


@dataclass
class Case:
    """One constructor example: ``make(**params)`` builds it; ``params`` are the tensors
    whose shapes ``infer_shapes`` receives; ``value`` is a valid value; ``bad`` is a
    (param name, bad tensor) pair that validation must reject, naming the parameter."""

    cls: type
    params: dict
    make: Callable
    value: torch.Tensor
    batch_shape: tuple
    bad: Optional[tuple] = None
    sample: bool = False  # has a sample method
    deterministic: bool = True  # log_prob without a random class subsample
    extra: dict = field(default_factory=dict)
    event_shape: tuple = ()


def _psi(*shape):
    return torch.randn(*shape, dtype=D64, generator=torch.Generator().manual_seed(len(shape)))


def _aug(utility, eps, **kw):
    return AugmentedCategorical(utility, eps, **kw)


def _factor(utility, eps, log_eta):
    return GumbelExpectedFactor(AugmentedCategorical(utility, eps), log_eta)


def _gaussian_factor(utility, eps, loc, scale):
    return GaussianExpectedFactor(AugmentedCategorical(utility, eps, "normal"), loc, scale)


def _gumbel_q_factor(utility, eps, loc, scale):
    return GumbelQExpectedFactor(AugmentedCategorical(utility, eps, "logistic"), loc, scale)


NAN = float("nan")
CASES = [
    Case(UtilityCategorical, {"utility": _psi(3, 5)}, lambda utility: UtilityCategorical(utility),
         torch.tensor([0, 4, 2]), (3,), ("utility", torch.full((3, 5), NAN, dtype=D64)), sample=True),
    Case(UtilityCategorical, {"utility": _psi(2, 1, 4)}, lambda utility: UtilityCategorical(utility, "normal"),
         torch.tensor([[1], [3]]), (2, 1), None, sample=True),
    Case(AugmentedCategorical, {"utility": _psi(3, 5), "eps": _psi(3)}, _aug,
         torch.tensor([0, 4, 2]), (3,), ("eps", torch.tensor([0.0, NAN, 1.0], dtype=D64))),
    Case(AugmentedCategorical, {"utility": _psi(4), "eps": _psi(2, 3)},
         lambda utility, eps: _aug(utility, eps, noise="student_t3", negatives=SharedNegatives(2)),
         torch.tensor(1), (2, 3), ("utility", torch.tensor([0.0, NAN, 1.0, 2.0], dtype=D64)), deterministic=False),
    Case(OVECategorical, {"utility": _psi(3, 5)}, lambda utility: OVECategorical(utility),
         torch.tensor([0, 4, 2]), (3,), ("utility", torch.full((3, 5), NAN, dtype=D64))),
    Case(OVECategorical, {"utility": _psi(3, 6)},
         lambda utility: OVECategorical(utility, negatives=2), torch.tensor([0, 4, 2]), (3,), None,
         deterministic=False),
    Case(SampledSoftmax, {"utility": _psi(3, 5)},
         lambda utility: SampledSoftmax(utility, negatives=Negatives(torch.tensor([1, 2]), torch.tensor(2.0, dtype=D64), True)),
         torch.tensor([0, 4, 3]), (3,), ("utility", torch.full((3, 5), NAN, dtype=D64))),
    Case(BouchardBound, {"utility": _psi(3, 5), "a": _psi(2, 1), "utility_var": _psi(3, 5).abs()},
         lambda utility, a, utility_var: BouchardBound(utility, a, utility_var=utility_var),
         torch.tensor([0, 4, 2]), (2, 3), ("utility_var", -torch.ones(3, 5, dtype=D64))),
    Case(JaakkolaJordanBernoulli, {"logits": _psi(3), "logits_var": _psi(2, 1).abs()},
         lambda logits, logits_var: JaakkolaJordanBernoulli(logits, logits_var),
         torch.tensor([0.0, 1.0, 1.0], dtype=D64), (2, 3), ("logits_var", -torch.ones(2, 1, dtype=D64))),
    Case(JaakkolaJordanBernoulli, {"logits": _psi(3), "xi": _psi(3)},
         lambda logits, xi: JaakkolaJordanBernoulli(logits, xi=xi),
         torch.tensor([0.0, 1.0, 1.0], dtype=D64), (3,), ("xi", torch.full((3,), NAN, dtype=D64))),
    Case(GumbelExpectedFactor, {"utility": _psi(3, 5), "eps": _psi(3), "log_eta": _psi(3)}, _factor,
         torch.tensor([0, 4, 2]), (3,), ("log_eta", torch.full((3,), NAN, dtype=D64))),
    Case(GaussianExpectedFactor, {"utility": _psi(3, 5), "eps": _psi(3), "loc": _psi(3), "scale": _psi(3).abs()},
         _gaussian_factor, torch.tensor([0, 4, 2]), (3,), ("scale", -torch.ones(3, dtype=D64))),
    Case(GumbelQExpectedFactor, {"utility": _psi(3, 5), "eps": _psi(3), "loc": _psi(3), "scale": _psi(3).abs()},
         _gumbel_q_factor, torch.tensor([0, 4, 2]), (3,), ("scale", -torch.ones(3, dtype=D64))),
    Case(NoiseDistribution, {"loc": _psi(3), "scale": _psi(2, 1).abs()},
         lambda loc, scale: NoiseDistribution(get_noise("laplace"), loc, scale),
         _psi(3), (2, 3), ("scale", -torch.ones(2, 1, dtype=D64)), sample=True),
    Case(FastGumbel, {"loc": _psi(3), "scale": _psi(3).abs()}, lambda loc, scale: FastGumbel(loc, scale),
         _psi(3), (3,), ("scale", -torch.ones(3, dtype=D64)), sample=True),
    Case(RelaxedUtilityCategorical, {"utility": _psi(3, 5), "temperature": torch.tensor(0.7, dtype=D64)},
         lambda utility, temperature: RelaxedUtilityCategorical(utility, "gumbel", temperature),
         _psi(3, 5).softmax(-1), (3,), ("temperature", torch.tensor(-1.0, dtype=D64)), sample=True,
         event_shape=(5,)),
    Case(RelaxedUtilityCategoricalStraightThrough, {"utility": _psi(2, 4), "temperature": _psi(2).abs()},
         lambda utility, temperature: RelaxedUtilityCategoricalStraightThrough(utility, "gumbel", temperature),
         _psi(2, 4).softmax(-1), (2,), ("utility", torch.full((2, 4), NAN, dtype=D64)), sample=True,
         event_shape=(4,)),
]
#: base classes of __all__ that are not distributions of their own (their subclasses are in CASES)
BASES = {ClassSumLikelihood}
IDS = [f"{c.cls.__name__}-{i}" for i, c in enumerate(CASES)]


def _build(case, **override):
    params = dict(case.params, **override)
    return case.make(**params)


def _infer_params(case):
    """The params of ``infer_shapes``: the factor's own parameter is log_eta only."""
    if case.cls is GumbelExpectedFactor:
        return {"log_eta": case.params["log_eta"]}
    if case.cls in (GaussianExpectedFactor, GumbelQExpectedFactor):
        return {k: case.params[k] for k in ("loc", "scale")}
    return case.params


@pytest.fixture(params=CASES, ids=IDS)
def case(request):
    pyro.set_rng_seed(0)
    with pyro.validation_enabled(True):
        yield request.param


def test_every_distribution_has_a_case():
    """Each distribution class of pyro_ar.distributions.__all__ has a row in CASES (or is a
    base class in BASES): a new distribution without a row fails here."""
    exported = {obj for obj in (getattr(distributions, n) for n in distributions.__all__)
                if isinstance(obj, type) and issubclass(obj, torch.distributions.Distribution)}
    covered = {case.cls for case in CASES} | BASES
    assert exported - covered == set(), f"distributions without a contract row: {exported - covered}"


def test_shapes(case):
    d = _build(case)
    assert d.batch_shape == case.batch_shape and d.event_shape == case.event_shape
    assert d.log_prob(case.value).shape == case.batch_shape


def test_support_and_arg_constraints_declared(case):
    d = _build(case)
    assert isinstance(case.cls.arg_constraints, dict) and case.cls.arg_constraints
    for name in _infer_params(case):
        assert name in case.cls.arg_constraints, name
    assert d.support.check(case.value).all()


def test_infer_shapes(case):
    shapes = {k: v.shape for k, v in _infer_params(case).items()}
    assert case.cls.infer_shapes(**shapes) == (torch.Size(case.batch_shape), torch.Size(case.event_shape))


def test_expand_keeps_every_attribute(case):
    d = _build(case)
    new_shape = (4,) + case.batch_shape
    e = d.expand(new_shape)
    assert type(e) is type(d) and e.batch_shape == new_shape and e.event_shape == d.event_shape
    assert set(vars(d)) - {"_transformed"} <= set(vars(e))
    for k, v in vars(d).items():
        if not isinstance(v, (torch.Tensor, torch.distributions.Distribution)) and k not in ("_batch_shape",) \
                and not hasattr(v, "batch_shape"):
            assert vars(e)[k] is v or vars(e)[k] == v, k
    assert e._validate_args == d._validate_args
    if case.deterministic:
        torch.testing.assert_close(e.log_prob(case.value), d.log_prob(case.value).expand(new_shape))
    else:
        assert e.log_prob(case.value).shape == new_shape


def test_sample_shapes_or_not_implemented(case):
    d = _build(case)
    if case.sample:
        assert d.sample().shape == case.batch_shape + case.event_shape
        assert d.sample((2, 1)).shape == (2, 1) + case.batch_shape + case.event_shape
        assert torch.isfinite(d.log_prob(d.sample((3,)))).all()
    else:
        with pytest.raises(NotImplementedError):
            d.sample()


def test_bad_parameter_raises_naming_it(case):
    if case.bad is None:
        pytest.skip("no bad parameter for this example")
    name, bad = case.bad
    with pytest.raises(ValueError, match=name):
        d = _build(case, **{name: bad})
        d.log_prob(case.value)  # a lazily checked utility is validated on the rows gathered
    # validation off: the instance is built without a check
    with pyro.validation_enabled(False):
        _build(case, **{name: bad})


def test_bad_value_raises_naming_it(case):
    d = _build(case)
    if d.support.is_discrete:
        bad = torch.full(case.batch_shape, 99.0) if case.cls is not JaakkolaJordanBernoulli \
            else torch.full(case.batch_shape, 0.5)
        with pytest.raises(ValueError, match="value"):
            d.log_prob(bad)
    with pytest.raises(ValueError, match="(?i)value"):  # torch's own message says "Value"
        d.log_prob(torch.zeros(7, 5, 11))  # does not broadcast


def test_enumerate_support(case):
    d = _build(case)
    if not d.has_enumerate_support:
        return
    support = d.enumerate_support()
    assert support.shape == (d.num_classes,) + case.batch_shape
    torch.testing.assert_close(d.log_prob(support).logsumexp(0), torch.zeros(case.batch_shape, dtype=D64),
                               atol=1e-6, rtol=0)


def test_pickle_round_trip(case):
    d = _build(case)
    back = pickle.loads(pickle.dumps(d))
    assert type(back) is type(d) and back.batch_shape == d.batch_shape
    if case.deterministic:
        torch.testing.assert_close(back.log_prob(case.value), d.log_prob(case.value))


def test_log_prob_and_gradients_finite(case):
    params = {k: v.clone().requires_grad_() for k, v in case.params.items()}
    lp = case.make(**params).log_prob(case.value)
    assert torch.isfinite(lp).all()
    grads = torch.autograd.grad(lp.sum(), list(params.values()), allow_unused=True)
    for name, g in zip(params, grads):
        assert g is None or torch.isfinite(g).all(), name

r"""The contract every :class:`~pyro_ar.noise.Noise` must satisfy, runnable on a noise you wrote.

:func:`check_noise` (no pytest needed) asserts, for a standard noise :math:`\phi` with CDF
:math:`\Phi`:

1. the density integrates to one, :math:`\int\phi = 1` (trapezoid rule on a fine grid plus
   the tail masses :math:`\Phi(lo) + 1 - \Phi(hi)` taken from ``log_cdf``);
2. ``log_cdf`` is the integral of the density, :math:`\Phi(x) = \Phi(lo) + \int_{lo}^x\phi`,
   and its autograd derivative is the density, :math:`d\Phi/dx = \phi`;
3. ``sample`` follows :math:`\Phi`: the Kolmogorov--Smirnov statistic
   :math:`D_n = \sup_x|F_n(x) - \Phi(x)|` of ``num_samples`` draws stays below the
   asymptotic critical value :math:`\sqrt{-\log(\alpha/2)/2}/\sqrt n` (level :math:`\alpha`
   = ``ks_alpha``, :math:`10^{-3}` by default; the draws come from a seeded generator, so
   the check is deterministic), and draws have the requested shape, dtype and device and
   are reproducible with ``generator=`` without touching the global RNG;
4. ``log_cdf`` is stable in the tails: finite, :math:`\le 0`, non-decreasing on
   ``tail_range``, and its gradient is finite there;
5. ``distribution(loc, scale)`` is the location-scale family:
   :math:`\log p(x) = \log\phi((x-loc)/scale) - \log scale`, with the broadcast batch shape;
6. every method the noise overrides with a closed form (``log_marginal``,
   ``log_marginal_all``, ``icdf``, ``log_density_derivatives``, ``log_cdf_derivatives``)
   agrees with the generic default of :class:`~pyro_ar.noise.Noise` (quadrature, bisection,
   autograd) built from the same ``log_density`` and ``log_cdf`` (float64; tolerances from the
   generic methods' errors: 1e-8 for the quadrature of a smooth density, 1e-9 for the rest).

:class:`NoiseContract` runs the same checks as pytest tests: subclass it in a test module
with a class attribute ``noise``.

:class:`ModelContract` and :class:`LikelihoodContract` are the contracts every model of
:mod:`pyro_ar.models` and every likelihood object of :mod:`pyro_ar.likelihoods` meet, as
pytest base classes (as GPyTorch ships its test bases): a subclass defines only factories
(``make_model()`` / ``make_data()``, ``make_likelihood()``) and pytest collects the checks
-- shapes and sites, the O(B) data plate shared with the guide, finite SVI steps,
``Predictive`` sampling, one evaluation path, the bound below the exact likelihood, named
errors, checkpoint round trips. The library runs them on every model and likelihood
(``tests/models/test_contract.py``, ``tests/test_likelihood_contract.py``); a model or
likelihood of your own passes them the same way.
"""

import inspect
import math
from typing import Tuple, Union

import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI, Predictive

from .noise import Noise

try:  # the contracts are pytest test classes; check_noise needs no pytest
    import pytest
except ImportError:  # pragma: no cover
    pytest = None

#: a device or its name
Device = Union[str, torch.device]

__all__ = ["check_noise", "check_closed_forms", "NoiseContract", "ModelContract", "LikelihoodContract"]


def _grid(lo, hi, n, dtype, device):
    return torch.linspace(lo, hi, n, dtype=dtype, device=device)


def check_density_integrates_to_one(noise: Noise, lo: float = -60.0, hi: float = 60.0, num_points: int = 240001,
                                    tol: float = 1e-6) -> None:
    """Check 1 (float64): trapezoid mass on [lo, hi] plus the tail masses from ``log_cdf``."""
    x = _grid(lo, hi, num_points, torch.float64, "cpu")
    mass = torch.trapezoid(noise.log_density(x).exp(), x).item()
    ends = noise.log_cdf(torch.tensor([lo, hi], dtype=torch.float64)).exp()
    total = mass + ends[0].item() + (1.0 - ends[1].item())
    assert abs(total - 1.0) < tol, f"{noise!r}: the density integrates to {total!r}, not 1 (tol {tol})"


def check_log_cdf_is_integral_of_density(noise: Noise, lo: float = -30.0, hi: float = 30.0,
                                         num_points: int = 120001, tol: float = 1e-6) -> None:
    """Check 2 (float64): cumulative trapezoid of the density vs ``exp(log_cdf)``, and d Phi/dx = phi."""
    x = _grid(lo, hi, num_points, torch.float64, "cpu")
    pdf = noise.log_density(x).exp()
    cum = torch.cat([x.new_zeros(1), torch.cumsum((pdf[1:] + pdf[:-1]) / 2 * x.diff(), 0)])
    cdf = noise.log_cdf(x).exp()
    err = (cdf[0] + cum - cdf).abs().max().item()
    assert err < tol, f"{noise!r}: log_cdf differs from the integral of the density by {err:.3g} (tol {tol})"
    xs = torch.linspace(-8.0, 8.0, 161, dtype=torch.float64).requires_grad_()
    (grad,) = torch.autograd.grad(noise.log_cdf(xs).exp().sum(), xs)
    dens = noise.log_density(xs.detach()).exp()
    keep = xs.detach() != 0  # a density may have a kink at 0 (Laplace)
    err = (grad - dens)[keep].abs().max().item()
    assert err < 1e-8, f"{noise!r}: d/dx exp(log_cdf) differs from the density by {err:.3g}"


def check_sample(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu", num_samples: int = 20000,
                 ks_alpha: float = 1e-3, seed: int = 0) -> None:
    """Check 3: shape/dtype/device, generator reproducibility, and a KS test against ``log_cdf``."""
    if not noise.has_sample:
        return
    g = torch.Generator(device=device).manual_seed(seed)
    state = torch.get_rng_state()
    x = noise.sample((num_samples,), dtype=dtype, device=device, generator=g)
    assert torch.equal(torch.get_rng_state(), state), f"{noise!r}: sample(generator=...) used the global RNG"
    assert x.shape == (num_samples,) and x.dtype == dtype and x.device.type == torch.device(device).type, \
        f"{noise!r}: sample returned shape {tuple(x.shape)}, dtype {x.dtype}, device {x.device}"
    assert torch.isfinite(x).all(), f"{noise!r}: sample returned non-finite draws"
    again = noise.sample((num_samples,), dtype=dtype, device=device,
                         generator=torch.Generator(device=device).manual_seed(seed))
    assert torch.equal(x, again), f"{noise!r}: sample is not reproducible with the same generator seed"
    xs = x.double().cpu().sort().values
    cdf = noise.log_cdf(xs).exp()
    n = num_samples
    i = torch.arange(1, n + 1, dtype=torch.float64)
    stat = torch.maximum(i / n - cdf, cdf - (i - 1) / n).max().item()
    crit = math.sqrt(-math.log(ks_alpha / 2) / 2) / math.sqrt(n)
    assert stat < crit, f"{noise!r}: KS statistic {stat:.4g} >= {crit:.4g} (level {ks_alpha}, n={n})"


def check_tails(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu",
                tail_range: Tuple[float, float] = (-30.0, 1000.0), num_points: int = 4001) -> None:
    """Check 4: log_cdf finite, <= 0, non-decreasing on ``tail_range``; gradients finite."""
    x = _grid(tail_range[0], tail_range[1], num_points, dtype, device).requires_grad_()
    lp = noise.log_cdf(x)
    (grad,) = torch.autograd.grad(lp.sum(), x)
    assert torch.isfinite(lp).all(), f"{noise!r}: log_cdf is not finite at {x[~torch.isfinite(lp)][:5].tolist()}"
    assert torch.isfinite(grad).all(), f"{noise!r}: log_cdf has non-finite gradients at {x[~torch.isfinite(grad)][:5].tolist()}"
    lp = lp.detach()
    assert (lp <= 0).all(), f"{noise!r}: log_cdf > 0 at {x[lp > 0][:5].tolist()}"
    assert (lp.diff() >= 0).all(), f"{noise!r}: log_cdf decreases at {x[1:][lp.diff() < 0][:5].tolist()}"


def check_distribution(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu") -> None:
    """Check 5: ``distribution(loc, scale)`` is the location-scale family of the noise."""
    loc = torch.tensor([[0.0], [1.5]], dtype=dtype, device=device)
    scale = torch.tensor([1.0, 0.3, 4.0], dtype=dtype, device=device)
    d = noise.distribution(loc, scale)
    assert d.batch_shape == (2, 3) and d.event_shape == (), \
        f"{noise!r}: distribution batch_shape {tuple(d.batch_shape)} != (2, 3)"
    x = torch.linspace(-3, 3, 7, dtype=dtype, device=device).reshape(7, 1, 1)
    expected = noise.log_density((x - loc) / scale) - scale.log()
    err = (d.log_prob(x) - expected).abs().max().item()
    tol = 1e-10 if dtype == torch.float64 else 1e-4
    assert err < tol, f"{noise!r}: distribution(loc, scale).log_prob is off by {err:.3g}"
    if noise.has_sample:
        assert d.sample((5,)).shape == (5, 2, 3)
        assert d.expand((4, 2, 3)).batch_shape == (4, 2, 3)


def check_noise(noise: Noise, dtype: torch.dtype = torch.float64, device: Device = "cpu",
                tail_range: Tuple[float, float] = (-30.0, 1000.0), num_samples: int = 20000,
                ks_alpha: float = 1e-3, seed: int = 0) -> None:
    """Run the whole noise contract (module docstring) on ``noise``; raise ``AssertionError`` on failure.

    The integral checks run in float64 on the CPU; the sampling, tail and distribution
    checks in ``dtype`` on ``device``.

    Example:

    >>> import math, torch, pyro_ar as ar
    >>> from pyro_ar.testing import check_noise
    >>> wide = ar.Noise(log_density=lambda e: -e * e / 8 - math.log(2 * math.sqrt(2 * math.pi)),
    ...                 log_cdf=lambda x: torch.special.log_ndtr(x / 2),
    ...                 sample=lambda shape, dtype, device: 2 * torch.randn(shape, dtype=dtype, device=device))
    >>> check_noise(wide)        # passes silently
    >>> check_noise(ar.Noise(log_density=lambda e: -e * e / 2, log_cdf=lambda x: torch.special.log_ndtr(x)))
    Traceback (most recent call last):
    ...
    AssertionError: Noise(name='custom'): the density integrates to 2.5066..., not 1 (tol 1e-06)
    """
    check_density_integrates_to_one(noise)
    check_log_cdf_is_integral_of_density(noise)
    check_sample(noise, dtype, device, num_samples, ks_alpha, seed)
    check_tails(noise, dtype, device, tail_range)
    check_distribution(noise, dtype, device)
    check_closed_forms(noise, seed)


def _overrides(noise: Noise, method: str) -> bool:
    return getattr(noise, method).__func__ is not getattr(Noise, method)  # (a closed form)


def check_closed_forms(noise: Noise, seed: int = 0) -> None:
    """Check 6: each closed form the noise overrides agrees with :class:`Noise`'s generic default.

    Example:

    >>> import pyro_ar as ar
    >>> from pyro_ar.testing import check_closed_forms
    >>> check_closed_forms(ar.GumbelNoise())      # log-softmax = quadrature, ... : passes
    """
    generic = Noise(log_density=noise.log_density, log_cdf=noise.log_cdf, name=f"generic {noise.name}")
    g = torch.Generator().manual_seed(seed)
    psi = 3.0 * torch.randn(5, 7, generator=g, dtype=torch.float64)
    y = torch.randint(7, (5,), generator=g)
    u = torch.rand(64, generator=g, dtype=torch.float64).clamp(1e-9, 1 - 1e-9)
    x = torch.linspace(-8.05, 8.05, 47, dtype=torch.float64)  # (no node at a kink at 0)
    checks = [("log_marginal", (psi, y), 1e-8), ("log_marginal_all", (psi,), 1e-8), ("icdf", (u,), 1e-9),
              ("log_density_derivatives", (x,), 1e-9), ("log_cdf_derivatives", (x,), 1e-9)]
    for method, args, tol in checks:
        if not _overrides(noise, method):
            continue
        got, ref = getattr(noise, method)(*args), getattr(generic, method)(*args)
        for a, b in zip(got if isinstance(got, tuple) else (got,), ref if isinstance(ref, tuple) else (ref,)):
            err = ((a - b).abs() / (1 + b.abs())).max().item()
            assert err < tol, f"{noise!r}: {method} is off its generic default by {err:.3g} (tol {tol:g})"


class NoiseContract:
    """The noise contract as pytest tests: subclass with a class attribute ``noise``.

    Class attributes ``dtype``, ``device``, ``tail_range``, ``num_samples`` and ``ks_alpha``
    adjust the checks (see :func:`check_noise`).

    Example:

    >>> import pyro_ar as ar
    >>> from pyro_ar.testing import NoiseContract
    >>> class TestLaplace(NoiseContract):      # in a test module: pytest collects six tests
    ...     noise = ar.LaplaceNoise()
    >>> TestLaplace().test_density_integrates_to_one()
    """

    noise = None
    dtype = torch.float64
    device = "cpu"
    tail_range = (-30.0, 1000.0)
    num_samples = 20000
    ks_alpha = 1e-3

    def _noise(self):
        if self.noise is None:
            raise AssertionError(f"{type(self).__name__} needs a class attribute `noise`")
        return self.noise

    def test_density_integrates_to_one(self):
        check_density_integrates_to_one(self._noise())

    def test_log_cdf_is_integral_of_density(self):
        check_log_cdf_is_integral_of_density(self._noise())

    def test_sample_matches_cdf(self):
        check_sample(self._noise(), self.dtype, self.device, self.num_samples, self.ks_alpha)

    def test_log_cdf_tails(self):
        check_tails(self._noise(), self.dtype, self.device, self.tail_range)

    def test_distribution(self):
        check_distribution(self._noise(), self.dtype, self.device)

    def test_closed_forms_match_generic_defaults(self):
        check_closed_forms(self._noise())

# ------------------------------------------------------------------------------------------
# The model and likelihood contracts (pytest base classes, as GPyTorch ships its test bases)
# ------------------------------------------------------------------------------------------


def _fresh(seed: int = 0):
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)


def _guide_and_elbo(model):
    """The model's guide and ELBO (:func:`pyro_ar.infer.default_guide`, :func:`~pyro_ar.infer.default_elbo`)."""
    from .infer import default_elbo, default_guide

    return default_guide(model), default_elbo()  # (the one ELBO serves every model)


def _svi(model, lr: float):
    from .optim import lazy_adam

    guide, elbo = _guide_and_elbo(model)
    return SVI(model, guide, lazy_adam({"lr": lr}), elbo)


class ModelContract:
    r"""The contract every model of :mod:`pyro_ar.models` meets, as pytest tests: subclass
    it in a test module (the name starting with ``Test``) and define two factories,

    * ``make_model()`` -- a small model with ``subsample_size`` B below the number of
      datapoints (so that subsampling is exercised);
    * ``make_data()`` -- ``(x, y)``: inputs and labels of a supervised model
      (:class:`~pyro_ar.models.CategoricalModel`); observed entries and held-out entries
      (the same rows, -1 where not held out) of a latent model
      (:class:`~pyro_ar.models.LatentCategoricalModel`, trained on ``x`` alone).

    The tests (each starts from an empty param store and seed :attr:`seed`):

    1. the model is a ``CategoricalModel`` and its ``repr`` names its class; its step is
       the base class's ``__call__`` (run by its :class:`~pyro_ar.models.base.WeightStrategy`;
       a latent model: :class:`~pyro_ar.models.LatentCategoricalModel`'s);
    2. a training step's observed sites lie in the data plate with B rows, with a
       ``"<site>_eps"`` site exactly when the likelihood has a local latent;
    3. the data plate's indices are O(B) work (no ``torch.randperm(N)``), B distinct rows,
       and the default guide opens the same plate (Pyro replay hands its indices to the model);
    4. SVI steps with :func:`pyro_ar.infer.default_guide` and ``default_elbo`` give finite
       losses and move the parameters;
    5. ``pyro.infer.Predictive`` with the guide on the training inputs draws labels (shape,
       range) -- a latent model: its latents -- and the model alone draws labels of new inputs;
    6. evaluation: ``log_likelihood`` is finite and <= 0, its ``reduce="none"`` values
       average to it and sum to ``reduce="sum"``, and ``evaluate(...)["log_lik"]`` equals
       it (one evaluation path); Bayesian weights (``weights="bayes"``) raise a ValueError
       naming ``bayes`` (no point estimate), and their posterior predictive log-likelihood
       over ``Predictive`` draws of the weights is finite and <= 0;
    7. for a point-estimate model, ``log_likelihood`` is the noise's marginal
       (``Noise.log_marginal_all``) of ``utility(x).full()`` at the labels and
       ``evaluate``'s accuracy its argmax's;
    8. ``utility(x, params=None)``: that one signature, and given parameters equal to the
       fitted ones give the same utilities;
    9. malformed inputs raise a ValueError naming them, and ``check_data`` names the first
       bad row;
    10. ``pyro_ar.infer.train`` interrupted and resumed from its checkpoint gives bit for bit
        the losses and parameters of the uninterrupted run.

    Example:

    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.testing import ModelContract
    >>> class TestMyLinear(ModelContract):     # in a test module: pytest collects the tests
    ...     def make_model(self):
    ...         return LinearClassifier(3, 12, num_negatives=3, subsample_size=8)
    ...     def make_data(self):
    ...         d = make_linear_teacher(40, 3, 12, seed=0)
    ...         return d.x, d.y
    >>> TestMyLinear().test_svi_steps_are_finite_and_move_parameters()
    """

    #: rows of the data used by the prediction checks
    num_predict = 7
    #: learning rate of the SVI steps
    lr = 0.05
    #: the seed every test starts from
    seed = 0

    def make_model(self):
        raise NotImplementedError(f"{type(self).__name__} must define make_model()")

    def make_data(self):
        raise NotImplementedError(f"{type(self).__name__} must define make_data() -> (x, y)")

    # ---- helpers ---------------------------------------------------------------------------
    def _case(self):
        from .models import CategoricalModel

        _fresh(self.seed)
        model = self.make_model()
        x, y = self.make_data()
        assert isinstance(model, CategoricalModel), f"make_model() returned {type(model).__name__}"
        assert model.subsample_size is not None and model.subsample_size < len(x), (
            f"the contract needs subsample_size < N (got subsample_size={model.subsample_size}, "
            f"N={len(x)}): the data plate's subsampling is part of it")
        return model, x, y

    @staticmethod
    def _latent(model) -> bool:
        from .models import LatentCategoricalModel

        return isinstance(model, LatentCategoricalModel)

    def _train_args(self, model, x, y):
        return (x,) if self._latent(model) else (x, y)

    @staticmethod
    def _plate(model) -> str:
        return getattr(model, "plate_name", "data")

    def _fitted(self, model, x, y, steps: int = 1):
        svi = _svi(model, self.lr)
        for _ in range(steps):
            svi.step(*self._train_args(model, x, y))
        return svi

    # ---- the contract ------------------------------------------------------------------------
    def test_is_a_categorical_model_with_a_repr(self):
        model, _, _ = self._case()
        assert type(model).__name__ in repr(model)

    def test_the_step_is_the_base_class_one(self):
        """No model overrides ``__call__``: the step is the base class's (its weight strategy's)."""
        from .models import CategoricalModel, LatentCategoricalModel
        from .models.base import WeightStrategy

        model, _, _ = self._case()
        base = LatentCategoricalModel if self._latent(model) else CategoricalModel
        assert type(model).__call__ is base.__call__, \
            f"{type(model).__name__} overrides __call__: give it a WeightStrategy instead"
        assert isinstance(model.weight_strategy, WeightStrategy)

    def test_training_step_sites_lie_in_the_data_plate(self):
        model, x, y = self._case()
        tr = poutine.trace(model).get_trace(*self._train_args(model, x, y))
        plate = self._plate(model)
        sites = {n: s for n, s in tr.nodes.items() if s["type"] == "sample"}
        observed = [n for n, s in sites.items() if s["is_observed"]  # (not the prior / KL factors)
                    and plate in {f.name for f in s["cond_indep_stack"]}]
        B = model.subsample_size
        assert observed, f"a training step has no observed site in the plate {plate!r}"
        assert tr.nodes[plate]["value"].shape == (B,)
        for name in observed:
            fn = sites[name]["fn"]
            assert fn.batch_shape[0] == B, f"site {name!r}: batch_shape {tuple(fn.batch_shape)}, expected B={B} rows"
            if name.endswith("_eps"):
                continue
            has_eps = f"{name}_eps" in sites
            assert has_eps == model.likelihood.has_local_latent, \
                f"site {name!r}: noise site present={has_eps}, likelihood {model.likelihood!r}"

    def test_data_plate_is_o_of_b_and_shared_with_the_default_guide(self):
        model, x, y = self._case()
        args = self._train_args(model, x, y)
        svi = self._fitted(model, x, y)  # set up parameters
        guide = svi.guide
        N, randperm = len(x), torch.randperm

        def small_randperm(n, *a, **kw):
            assert n < N, f"torch.randperm({n}) called: O(N) work per step"
            return randperm(n, *a, **kw)

        torch.randperm = small_randperm
        try:
            guide_tr = poutine.trace(guide).get_trace(*args)
            model_tr = poutine.trace(poutine.replay(model, trace=guide_tr)).get_trace(*args)
        finally:
            torch.randperm = randperm
        plate = self._plate(model)
        idx = model_tr.nodes[plate]["value"]
        assert idx.shape == (model.subsample_size,) and idx.unique().numel() == idx.numel()
        if plate in guide_tr.nodes:  # guides with latent variables open the model's plate
            assert torch.equal(guide_tr.nodes[plate]["value"], idx)

    def test_svi_steps_are_finite_and_move_parameters(self):
        model, x, y = self._case()
        svi = self._fitted(model, x, y)
        store = pyro.get_param_store()
        before = {n: store[n].detach().clone() for n in store.keys()}
        losses = [svi.step(*self._train_args(model, x, y)) for _ in range(3)]
        assert all(math.isfinite(v) for v in losses), f"losses {losses}"
        assert any(not torch.equal(store[n].detach(), before[n]) for n in before), "no parameter moved"

    def test_predictive_draws_with_the_guide(self):
        model, x, y = self._case()
        svi = self._fitted(model, x, y)
        S, N = 2, len(x)
        if self._latent(model):
            site = model.latent_site
            out = Predictive(model, guide=svi.guide, num_samples=S, return_sites=[site])(x)
            # (a latent model's plate subsamples its datapoints at prediction too)
            assert out[site].shape == (S, model.subsample_size, 1, model.latent_dim), \
                f"Predictive drew latents of shape {tuple(out[site].shape)}"
            return
        out = Predictive(model, guide=svi.guide, num_samples=S, return_sites=[model.site])(x)
        labels = out[model.site]
        assert labels.shape == (S, N), f"Predictive drew labels of shape {tuple(labels.shape)}"
        assert labels.dtype == torch.long and 0 <= int(labels.min()) and int(labels.max()) < model.num_classes
        n = self.num_predict
        assert model(x[:n]).shape == (n,)  # the model alone on new inputs, without labels

    def test_log_likelihood_is_finite_and_one_path_with_evaluate(self):
        model, x, y = self._case()
        svi = self._fitted(model, x, y)
        if model.weights == "bayes":
            with pytest.raises(ValueError, match="bayes"):
                model.log_likelihood(x, y)
            self._check_posterior_predictive(model, svi.guide, x, y)
            return
        ll = model.log_likelihood(x, y)
        per = model.log_likelihood(x, y, reduce="none")
        assert math.isfinite(ll) and ll <= 1e-9, f"log_likelihood {ll}"
        assert per.dim() == 1 and torch.isfinite(per).all() and (per <= 1e-9).all()
        assert per.mean().item() == pytest.approx(ll, abs=1e-9)
        assert model.log_likelihood(x, y, reduce="sum") == pytest.approx(per.sum().item(), abs=1e-7)
        out = model.evaluate(x, y, metrics=("log_lik", "accuracy"))
        assert out["log_lik"] == pytest.approx(ll, abs=1e-9) and 0.0 <= out["accuracy"] <= 1.0

    @staticmethod
    def _check_posterior_predictive(model, guide, x, y, num_samples: int = 4):
        """Bayesian weights: the posterior predictive log-likelihood over ``Predictive``
        draws of the weights (:func:`pyro_ar.infer.predictive_log_likelihood`) is finite, <= 0."""
        from .infer import predictive_log_likelihood

        sites = [model.prefix + "weight", model.prefix + "bias"]
        draws = Predictive(model, guide=guide, num_samples=num_samples, return_sites=sites)(x)
        features = model.eval_features(x) if hasattr(model, "eval_features") else x
        ll = predictive_log_likelihood({"weight": draws[sites[0]], "bias": draws[sites[1]]}, features, y,
                                       model.noise, num_samples=num_samples)["log_lik"]
        assert math.isfinite(ll) and ll <= 1e-9, f"posterior predictive log-likelihood {ll}"

    def test_log_likelihood_is_the_noise_marginal_of_the_utilities(self):
        """``log_likelihood`` is the mean of ``log p(y | psi)`` computed from the full utilities
        by the noise's own marginal (``Noise.log_marginal_all``: the log-softmax for Gumbel,
        quadrature otherwise), and the accuracy is that of their argmax."""
        model, x, y = self._case()
        if self._latent(model) or model.weights == "bayes":
            pytest.skip("point-estimate models with inputs and labels")
        self._fitted(model, x, y)
        full = model.utility(x).full().double()
        expected = model.noise.log_marginal_all(full).gather(-1, y[:, None]).mean().item()
        assert model.log_likelihood(x, y) == pytest.approx(expected, abs=1e-6)
        acc = (full.argmax(-1) == y).double().mean().item()
        assert model.evaluate(x, y, metrics=("accuracy",))["accuracy"] == pytest.approx(acc)

    def test_utility_takes_x_and_params(self):
        model, x, y = self._case()
        names = list(inspect.signature(model.utility).parameters)
        assert names == ["x", "params"], f"utility{inspect.signature(model.utility)}: expected utility(x, params=None)"
        if model.weights == "bayes":
            with pytest.raises(ValueError, match="bayes"):
                model.utility(x)
            return
        self._fitted(model, x, y)
        n = self.num_predict
        fitted = model.fitted_parameters()
        u = model.utility(x[:n])
        assert u.batch_shape[0] == n and u.num_classes > 1
        torch.testing.assert_close(model.utility(x[:n], fitted).full(), u.full())

    def test_bad_inputs_are_named(self):
        model, x, y = self._case()
        xn, yn = model.input_names
        if self._latent(model):
            with pytest.raises(ValueError, match=xn):
                model(x.double())
            bad = x.clone()
            bad[3, 0] = model.num_classes + 5
            with pytest.raises(ValueError, match=r"\[3[\],]"):
                model.check_data(bad)
            return
        with pytest.raises(ValueError, match="shape"):
            model(x, y[:-1])
        bad = y.clone()
        bad[3] = model.num_classes
        with pytest.raises(ValueError, match=r"\[3[\],]"):
            model.check_data(x, bad)

    def test_checkpoint_round_trip_continues_the_same_trajectory(self, tmp_path):
        """train() interrupted after 2 steps and resumed from its checkpoint with fresh
        objects gives bit for bit the losses and parameters of 4 uninterrupted steps."""
        from .infer import train

        model, x, y = self._case()
        args = self._train_args(model, x, y)

        def run(num_steps, path=None):
            fresh = self.make_model()
            kw = {} if path is None else dict(checkpoint=path, checkpoint_every=1)
            history = train(_svi(fresh, self.lr), *args, num_steps=num_steps, log_every=1, **kw)
            params = {n: v.detach().clone() for n, v in pyro.get_param_store().items()}
            return [r["loss"] for r in history if r["step"] > 0], params

        _fresh(self.seed + 1)
        losses, params = run(4)
        _fresh(self.seed + 1)
        path = tmp_path / "run.pt"
        first, _ = run(2, path)
        _fresh(self.seed + 123)  # scrambled: the checkpoint restores the RNG
        rest, resumed = run(4, path)
        assert first == losses[:2] and rest == losses
        assert resumed.keys() == params.keys()
        assert all(torch.equal(resumed[n], params[n]) for n in params)


class LikelihoodContract:
    r"""The contract every likelihood object of :mod:`pyro_ar.likelihoods` meets, as pytest
    tests: subclass it with a factory ``make_likelihood()``. Class attributes size the
    problem (``num_classes``, ``num_data``, ``batch_size``, ``num_features``);
    ``make_model(likelihood)`` and ``make_data()`` may be overridden (default: a
    :class:`~pyro_ar.models.LinearClassifier` on :func:`~pyro_ar.datasets.make_linear_teacher`
    data). ``is_lower_bound`` says whether the likelihood's factor is a lower bound
    of (or equal to) :math:`\log p(y\mid\psi)` (False for the sampled softmax, which is biased).

    The tests:

    1. it is a :class:`~pyro_ar.likelihoods.Likelihood` with a noise, a ``repr`` naming
       its class, and ``num_negatives`` None or a positive int; ``check(num_classes)`` accepts
       the model's K;
    2. inside a data plate of B rows, ``sample(site, utility, obs, data)`` emits the
       observed site with batch shape (B,), a ``"<site>_eps"`` site exactly when
       ``has_local_latent``, and a finite log-density; with ``obs=None`` it draws B labels
       in [0, K);
    3. SVI steps of a model with this likelihood and the default guide and ELBO are finite;
    4. the ELBO is below the exact log-likelihood: the mean of R independent estimates of
       :math:`-\mathrm{loss}` on the whole data (each unbiased for the model's bound) stays below
       :math:`\sum_n\log p(y_n\mid\psi_n)` (:meth:`~pyro_ar.models.CategoricalModel.log_likelihood`
       with ``reduce="sum"``) up to 4 standard errors of that mean (R = ``num_repeats``);
    5. a likelihood of Gaussian utilities (``gaussian_utilities``) also trains the
       Bayesian output layer ``NeuralClassifier(..., weights="gaussian")``.

    Example:

    >>> from pyro_ar.likelihoods import OVE
    >>> from pyro_ar.testing import LikelihoodContract
    >>> class TestOVE(LikelihoodContract):      # in a test module: pytest collects the tests
    ...     def make_likelihood(self):
    ...         return OVE(negatives=3)
    >>> TestOVE().test_elbo_is_below_the_exact_log_likelihood()
    """

    num_classes = 6
    num_features = 3
    num_data = 24
    batch_size = 8
    num_repeats = 20
    is_lower_bound = True
    lr = 0.05
    seed = 0

    def make_likelihood(self):
        raise NotImplementedError(f"{type(self).__name__} must define make_likelihood()")

    def make_model(self, likelihood):
        from .models import LinearClassifier

        # (weights of scale 1: utilities spread over several units, where a biased estimate shows)
        return LinearClassifier(self.num_features, self.num_classes, likelihood=likelihood,
                                subsample_size=self.batch_size, sparse=False, init_scale=1.0,
                                bias_init_scale=1.0)

    def make_data(self):
        from .datasets import make_linear_teacher

        d = make_linear_teacher(self.num_data, self.num_features, self.num_classes, seed=self.seed)
        return d.x, d.y

    def _likelihood(self):
        from .likelihoods import Likelihood

        _fresh(self.seed)
        lik = self.make_likelihood()
        assert isinstance(lik, Likelihood), f"make_likelihood() returned {type(lik).__name__}"
        return lik

    def test_is_a_likelihood_with_a_repr(self):
        lik = self._likelihood()
        assert isinstance(lik.noise, Noise) and type(lik).__name__ in repr(lik)
        s = lik.num_negatives
        assert s is None or (isinstance(s, int) and s >= 1), f"num_negatives={s!r}"
        lik.check(self.num_classes)

    def test_sites_inside_the_data_plate(self):
        from .likelihoods import DataSubsample
        from .utility import DenseUtility

        lik = self._likelihood()
        N, B, K = self.num_data, self.batch_size, self.num_classes
        g = torch.Generator().manual_seed(self.seed)
        psi = DenseUtility(torch.randn(B, K, generator=g))
        idx = torch.randperm(N, generator=g)[:B]
        obs = torch.randint(0, K, (B,), generator=g)

        def step(obs):
            with pyro.plate("data", N, subsample=idx):
                return lik.sample("y", psi, obs, DataSubsample(idx, N))

        tr = poutine.trace(step).get_trace(obs)
        site = tr.nodes["y"]
        assert site["is_observed"] and site["fn"].batch_shape == (B,), \
            f"batch_shape {tuple(site['fn'].batch_shape)}, expected ({B},)"
        assert ("y_eps" in tr.nodes) == lik.has_local_latent
        tr.compute_log_prob()
        assert torch.isfinite(site["log_prob"]).all()
        labels = step(None)
        assert labels.shape == (B,) and 0 <= int(labels.min()) and int(labels.max()) < K

    def test_svi_steps_are_finite(self):
        lik = self._likelihood()
        model = self.make_model(lik)
        x, y = self.make_data()
        svi = _svi(model, self.lr)
        losses = [svi.step(x, y) for _ in range(3)]
        assert all(math.isfinite(v) for v in losses), f"losses {losses}"

    def test_elbo_is_below_the_exact_log_likelihood(self):
        if not self.is_lower_bound:
            pytest.skip(f"{type(self).__name__}: not a lower bound (is_lower_bound=False)")
        lik = self._likelihood()
        model = self.make_model(lik)
        model.subsample_size = None  # the whole data: only the likelihood's own noise is left
        x, y = self.make_data()
        guide, elbo = _guide_and_elbo(model)
        elbo.loss(model, guide, x, y)  # create the parameters
        exact = model.log_likelihood(x, y, reduce="sum")
        est = torch.tensor([-elbo.loss(model, guide, x, y) for _ in range(self.num_repeats)], dtype=torch.float64)
        mean, se = est.mean().item(), est.std().item() / math.sqrt(self.num_repeats)
        assert mean <= exact + 4 * se + 1e-6 * abs(exact), \
            f"ELBO estimate {mean:.5g} (se {se:.3g}) above the exact log-likelihood {exact:.5g}"

    def test_gaussian_utilities_train_a_bayesian_output_layer(self):
        lik = self._likelihood()
        if not getattr(lik, "gaussian_utilities", False):
            pytest.skip("a likelihood of point utilities")
        from .models import NeuralClassifier

        model = NeuralClassifier(torch.nn.Identity(), self.num_features, self.num_classes, likelihood=lik,
                                 weights="gaussian", subsample_size=self.batch_size)
        x, y = self.make_data()
        svi = _svi(model, self.lr)
        losses = [svi.step(x, y) for _ in range(3)]
        assert all(math.isfinite(v) for v in losses), f"losses {losses}"

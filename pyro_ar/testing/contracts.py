r"""The contracts every model of :mod:`pyro_ar.models` and every likelihood object of
:mod:`pyro_ar.likelihoods` meet, as pytest base classes (as GPyTorch ships its test bases).

A subclass defines only factories (``make_model()`` / ``make_data()`` for
:class:`ModelContract`, ``make_likelihood()`` for :class:`LikelihoodContract`) and pytest
collects the checks -- shapes and sites, the O(B) data plate shared with the guide, finite
SVI steps, ``Predictive`` sampling, one evaluation path, the bound below the exact
likelihood, named errors, checkpoint round trips. The library runs them on every model and
likelihood (``tests/models/test_contract.py``, ``tests/test_likelihood_contract.py``); a
model or likelihood of your own passes them the same way.
"""

import inspect
import math

import torch

import pyro
import pyro.poutine as poutine
from pyro.infer import SVI, Predictive

from ..noise import Noise
from pyro_ar.models import Init

try:  # the contracts are pytest test classes (pyro_ar.testing.check_noise needs no pytest)
    import pytest
except ImportError as error:  # pragma: no cover
    raise ImportError("pyro_ar.testing.contracts (ModelContract, LikelihoodContract) are pytest test "
                      "classes: install pytest (pip install pytest) to use them; "
                      "pyro_ar.testing.check_noise needs no pytest") from error

__all__ = ["ModelContract", "LikelihoodContract"]


def _fresh(seed: int = 0):
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)


def _guide_and_elbo(model):
    """The model's guide and ELBO (:func:`pyro_ar.infer.default_guide`, :func:`~pyro_ar.infer.default_elbo`)."""
    from ..infer import default_elbo, default_guide

    return default_guide(model), default_elbo()  # (the one ELBO serves every model)


def _svi(model, lr: float):
    from ..optim import lazy_adam

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
    7. ``log_likelihood`` is the noise's marginal (``Noise.log_marginal_all``) of
       ``utility(x).full()`` at the labels and ``evaluate``'s accuracy its argmax's (a latent
       model: at its first observation group's held-out entries; Bayesian weights: the
       posterior predictive over draws is the log-mean of the marginals of ``utility(x, draw)``);
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
    >>> from pyro_ar.likelihoods import AR
    >>> class TestMyLinear(ModelContract):     # in a test module: pytest collects the tests
    ...     def make_model(self):
    ...         return LinearClassifier(3, 12, likelihood=AR(negatives=3), subsample_size=8)
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
        from ..models import CategoricalModel

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
        from ..models import LatentCategoricalModel

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
        from ..models import CategoricalModel, LatentCategoricalModel
        from ..models.base import WeightStrategy

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

    def test_data_plate_is_o_of_b_and_shared_with_the_default_guide(self, monkeypatch):
        model, x, y = self._case()
        args = self._train_args(model, x, y)
        svi = self._fitted(model, x, y)  # set up parameters
        guide = svi.guide
        N, randperm = len(x), torch.randperm

        def small_randperm(n, *a, **kw):
            assert n < N, f"torch.randperm({n}) called: O(N) work per step"
            return randperm(n, *a, **kw)

        with monkeypatch.context() as patch:  # (undone when the block ends, whatever happens)
            patch.setattr(torch, "randperm", small_randperm)
            guide_tr = poutine.trace(guide).get_trace(*args)
            model_tr = poutine.trace(poutine.replay(model, trace=guide_tr)).get_trace(*args)
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
        from ..infer import predictive_log_likelihood

        sites = [model.prefix + "weight", model.prefix + "bias"]
        draws = Predictive(model, guide=guide, num_samples=num_samples, return_sites=sites)(x)
        features = model.eval_features(x) if hasattr(model, "eval_features") else x
        ll = predictive_log_likelihood({"weight": draws[sites[0]], "bias": draws[sites[1]]}, features, y,
                                       model.noise, num_samples=num_samples)["log_lik"]
        assert math.isfinite(ll) and ll <= 1e-9, f"posterior predictive log-likelihood {ll}"

    def test_log_likelihood_is_the_noise_marginal_of_the_utilities(self):
        """``log_likelihood`` is ``log p(y | psi)`` computed from the full utilities by the
        noise's own marginal (``Noise.log_marginal_all``: the log-softmax for Gumbel, quadrature
        otherwise), and the accuracy is that of their argmax; for a latent model, on the held-out
        entries of its first observation group, at the posterior mean of the latents
        (``utility(x)``); for Bayesian weights, the posterior predictive log-likelihood over
        ``Predictive`` draws is the log-mean of the marginals of ``utility(x, draw)``."""
        model, x, y = self._case()
        svi = self._fitted(model, x, y)
        if model.weights == "bayes":
            return self._check_predictive_is_the_noise_marginal(model, svi.guide, x, y)
        if self._latent(model):
            return self._check_latent_is_the_noise_marginal(model, x, y)
        full = model.utility(x).full().double()
        expected = model.noise.log_marginal_all(full).gather(-1, y[:, None]).mean().item()
        assert model.log_likelihood(x, y) == pytest.approx(expected, abs=1e-6)
        acc = (full.argmax(-1) == y).double().mean().item()
        assert model.evaluate(x, y, metrics=("accuracy",))["accuracy"] == pytest.approx(acc)

    @staticmethod
    def _check_latent_is_the_noise_marginal(model, x, y):
        """The held-out entries of the first observation group (the columns it holds)."""
        _, _, columns, group = model.observation_groups(torch.arange(y.shape[-1], device=y.device)[None])[0]
        columns = columns[0]
        yg = y[:, columns]
        assert bool((yg >= 0).any()), "make_data() holds no held-out entry of the first observation group"
        only = torch.full_like(y, -1)
        only[:, columns] = yg
        got = model.log_likelihood(x, only, reduce="none")
        full = model.utility(x).full().double()                       # (N, 1 or T_g, K)
        lp = model.group_likelihood(group).noise.log_marginal_all(full)
        lp = lp.expand(yg.shape + lp.shape[-1:]).gather(-1, yg.clamp(min=0).unsqueeze(-1)).squeeze(-1)
        order = columns.argsort()  # (log_likelihood lists the entries in y's row-major order)
        expected = lp[:, order][yg[:, order] >= 0]
        torch.testing.assert_close(got.double(), expected, atol=1e-6, rtol=0)

    @staticmethod
    def _check_predictive_is_the_noise_marginal(model, guide, x, y, num_samples: int = 3):
        from ..infer import predictive_log_likelihood

        names = list(model.parameter_shapes())
        draws = Predictive(model, guide=guide, num_samples=num_samples,
                           return_sites=[model.prefix + n for n in names])(x)
        marginals = []
        for s in range(num_samples):
            params = {n: draws[model.prefix + n][s].reshape(shape)
                      for n, shape in model.parameter_shapes().items()}
            full = model.utility(x, params).full().double()
            marginals.append(model.noise.log_marginal_all(full).gather(-1, y[:, None]).squeeze(-1))
        expected = (torch.stack(marginals).logsumexp(0) - math.log(num_samples)).mean().item()
        features = model.eval_features(x) if hasattr(model, "eval_features") else x
        got = predictive_log_likelihood({"weight": draws[model.prefix + "weight"], "bias": draws[model.prefix + "bias"]},
                                        features, y, model.noise, num_samples=num_samples)["log_lik"]
        assert got == pytest.approx(expected, abs=1e-5)

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
        from ..infer import train

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
       A likelihood that is no bound (``is_lower_bound = False``) refuses ``bound()`` instead;
    5. closed form against the generic path: ``bound()`` with every class equals the mean of
       ``Trace_ELBO`` Monte Carlo estimates of the likelihood's own sites within 4 standard
       errors (a likelihood that is no bound refuses ``bound()``);
    6. a likelihood of Gaussian utilities (``gaussian_utilities``) also trains the
       Bayesian output layer ``NeuralClassifier(..., weights="gaussian")``, which refuses
       any other likelihood with a ValueError naming it.

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
        from ..models import LinearClassifier

        # (weights of scale 1: utilities spread over several units, where a biased estimate shows)
        return LinearClassifier(self.num_features, self.num_classes, likelihood=likelihood,
                                subsample_size=self.batch_size, sparse=False,
                                init=Init(scale=1.0, bias_scale=1.0))

    def make_data(self):
        from ..datasets import make_linear_teacher

        d = make_linear_teacher(self.num_data, self.num_features, self.num_classes, seed=self.seed)
        return d.x, d.y

    def _likelihood(self):
        from ..likelihoods import Likelihood

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
        from ..likelihoods import DataSubsample
        from ..utility import DenseUtility

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
        lik = self._likelihood()
        if not self.is_lower_bound:  # then it must say so: no bound to evaluate (metrics.bound)
            g = torch.Generator().manual_seed(self.seed)
            with pytest.raises(ValueError, match="not a bound"):
                lik.bound(torch.randn(self.batch_size, self.num_classes, generator=g),
                          torch.zeros(self.batch_size, dtype=torch.long))
            return
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

    def test_bound_is_the_mean_of_the_generic_monte_carlo_elbo(self):
        r"""Closed form against the generic path: :meth:`~pyro_ar.likelihoods.Likelihood.bound`
        with every class (in closed form where the noise or the likelihood has one: the Gumbel
        A&R bound, the log-softmax, the Bouchard and one-vs-each sums) equals the mean of R
        Monte Carlo estimates of ``pyro.infer.Trace_ELBO`` on the likelihood's own sites (class
        sums subsampled, the local latent drawn from a fixed q, the local optimum of
        :func:`~pyro_ar.infer.local_fit.local_q` in the noise's family), within 4 standard
        errors of that mean (and of the bound's own Monte Carlo error where it has one); a
        likelihood that is no bound refuses ``bound()``."""
        from pyro.infer import Trace_ELBO

        from ..infer.local_fit import local_q
        from ..likelihoods import DataSubsample
        from ..utility import DenseUtility

        lik = self._likelihood()
        B, K = self.batch_size, self.num_classes
        g = torch.Generator().manual_seed(self.seed)
        psi = 1.5 * torch.randn(B, K, generator=g, dtype=torch.float64)
        y = torch.randint(0, K, (B,), generator=g)
        if not self.is_lower_bound:
            with pytest.raises(ValueError, match="not a bound"):
                lik.bound(psi, y)
            return
        d = psi.gather(-1, y[:, None]) - psi
        q, _ = local_q(lik.noise, d, torch.ones_like(d).scatter(-1, y[:, None], 0.0))
        loc, scale = q.loc.detach(), q.scale.detach()

        def model():
            with pyro.plate("data", B):
                lik.sample("y", DenseUtility(psi), y, DataSubsample(None, B))

        def guide():
            if lik.has_local_latent:
                with pyro.plate("data", B):
                    pyro.sample("y_eps", lik.noise.distribution(loc, scale))

        elbo = Trace_ELBO()
        est = torch.tensor([-elbo.loss(model, guide) for _ in range(self.num_repeats * 10)], dtype=torch.float64)
        store = pyro.get_param_store()
        a = store["y_bouchard_a"].detach() if "y_bouchard_a" in store else None  # (a local a_n)
        values, var = lik.bound(psi, y, log_eta=loc, loc=loc, scale=scale, a=a, num_samples=4096,
                                generator=torch.Generator().manual_seed(self.seed))
        closed, se_closed = values.sum().item(), 0.0 if var is None else var.sum().sqrt().item()
        mean, se = est.mean().item(), est.std().item() / math.sqrt(len(est))
        assert abs(mean - closed) <= 4 * math.hypot(se, se_closed) + 1e-9 * abs(closed), \
            f"Monte Carlo ELBO {mean:.6g} (se {se:.3g}) against bound() {closed:.6g} (se {se_closed:.3g})"

    def test_gaussian_utilities_train_a_bayesian_output_layer(self):
        """A likelihood of Gaussian utilities trains the Bayesian output layer; one of point
        utilities is refused by it with a ValueError naming the likelihood."""
        from ..models import NeuralClassifier

        lik = self._likelihood()
        build = lambda: NeuralClassifier(torch.nn.Identity(), self.num_features, self.num_classes,  # noqa: E731
                                         likelihood=lik, weights="gaussian", subsample_size=self.batch_size)
        if not getattr(lik, "gaussian_utilities", False):
            with pytest.raises(ValueError, match=type(lik).__name__):
                build()
            return
        model = build()
        x, y = self.make_data()
        svi = _svi(model, self.lr)
        losses = [svi.step(x, y) for _ in range(3)]
        assert all(math.isfinite(v) for v in losses), f"losses {losses}"

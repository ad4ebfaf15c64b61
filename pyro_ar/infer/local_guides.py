r"""Local guides for the noise sites of the augmented model.

:func:`pyro_ar.sample_categorical` emits, inside the data plate, a noise site
``"<name>_eps"`` with prior :math:`\phi`. The guides here give each datapoint n its own
:math:`q(\varepsilon_n)`, indexed by the data plate's subsample:

* :class:`GumbelLocalGuide` -- :math:`q = \mathrm{Gumbel}(\log\eta_n, 1)`, the optimal family
  for softmax. With :class:`~pyro_ar.infer.ClosedFormELBO` the bound is analytic,
  :math:`L(\eta) = 1 - \log\eta - (1 + \hat S_y)/\eta`, and :math:`\eta_n` takes the
  natural-gradient step :math:`\eta_n \leftarrow (1-\rho)\eta_n + \rho(1 + \hat S_{y_n})`,
  :math:`\rho = (1 + t_n)^{-0.9}` with :math:`t_n` the number of earlier visits of n.
* :class:`NoiseLocalGuide` -- :math:`q = \text{noise}(\mu_n, \sigma_n)` reparameterised, for
  any noise (Normal for probit, Logistic, user-defined); gradient local steps.
* :class:`AmortizedLocalGuide` -- the same family with :math:`(\mu_n, \sigma_n)` predicted
  from :math:`(x_n, y_n)` by a small network: no O(N) state, and it serves new data.
* :class:`ConditionalLocalGuide` -- :math:`q(\varepsilon_n \mid \psi_n)` recomputed at every
  step from the current utilities: the optimum of the local bound,

  .. math::  q^*(\varepsilon) \propto \phi(\varepsilon)
             \prod_{j\in T} \Phi(\varepsilon + \psi_{y} - \psi_{k_j})^{a_j},

  exactly :math:`\mathrm{Gumbel}(\log(1 + \hat S_y), 1)` for Gumbel noise, else nearly the best
  :math:`\mathrm{Gumbel}(m, s)` (:func:`~pyro_ar.infer.local_fit.gumbel_local`; a Gaussian with
  ``fit="gaussian"``), on a class subsample T drawn independently of the model's.
  No per-datapoint state, and every visit of a datapoint gets the converged local fit.

All are :class:`~pyro.infer.autoguide.AutoGuide` subclasses that open the model's data
plate with ``self._create_plates`` so they compose with AutoGuides for global latents::

    guide = AutoGuideList(model)
    guide.append(AutoNormal(poutine.block(model, hide_fn=is_noise_site)))
    guide.append(NoiseLocalGuide(model))

Per-datapoint parameters are stored unconstrained (N,) tensors gathered with sparse
gradients (``sparse=True``), so that with a lazy optimizer (:mod:`pyro_ar.optim`) a step
only touches the minibatch's rows.
"""

import contextlib
import math
import warnings
from functools import partial

from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F

import pyro
from pyro.infer.autoguide import AutoGuide
from pyro.nn import PyroParam

from ..distributions import FastGumbel
from ..distributions.augmented import INFER_KEY, LocalStep, NoiseSite, site_record
from ..negatives import as_negative_sampler
from ..models.base import take_rows
from .local_fit import DEFAULT_LOCAL_FIT, check_local_fit, conditional_local_q, local_sampler, unit_gumbel_optimum

__all__ = ["local_parameter_names", "GumbelLocalGuide", "NoiseLocalGuide", "AmortizedLocalGuide",
           "ConditionalLocalGuide", "is_noise_site", "hide_noise_sites"]

_SOFTPLUS_INV_ONE = math.log(math.e - 1.0)
#: :class:`ConditionalLocalGuide`'s class subsample T for the local fit: this many times the
#: model's negatives (benchmarks/probit_convergence.py, ``--oversample``)
DEFAULT_OVERSAMPLE = 3


def is_noise_site(msg) -> bool:
    """True for the noise sites emitted by :func:`pyro_ar.sample_categorical` (usable as
    ``poutine.block(model, hide_fn=is_noise_site)`` to hand the rest to an AutoGuide).

    Example:

    >>> import pyro.poutine as poutine
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import is_noise_site
    >>> from pyro_ar import AR, LinearClassifier
    >>> data = make_linear_teacher(100, 3, 10, seed=0)
    >>> model = LinearClassifier(3, 10, likelihood=AR(negatives=2), subsample_size=20)
    >>> tr = poutine.trace(model).get_trace(data.x, data.y)
    >>> [name for name, site in tr.nodes.items() if site["type"] == "sample" and is_noise_site(site)]
    ['y_eps']
    """
    return msg.get("type") == "sample" and site_record(msg, NoiseSite) is not None


def hide_noise_sites(model):
    """``poutine.block(model, hide_fn=is_noise_site)``: the model as AutoGuides for the
    global latents should see it.

    Example:

    >>> from pyro.infer.autoguide import AutoGuideList, AutoNormal
    >>> from pyro_ar import AR, LinearClassifier
    >>> from pyro_ar.infer import NoiseLocalGuide, hide_noise_sites
    >>> model = LinearClassifier(5, 100, likelihood=AR("normal", negatives=10), weights="bayes", subsample_size=64)
    >>> guide = AutoGuideList(model)
    >>> guide.append(AutoNormal(hide_noise_sites(model)))   # the weights
    >>> guide.append(NoiseLocalGuide(model))                # the per-datapoint noise
    """
    return pyro.poutine.block(model, hide_fn=is_noise_site)


class _LocalGuide(AutoGuide):
    """Finds the noise sites and their data plate; subclasses define the family."""

    #: whether the guide stores parameters per training datapoint (sized at set-up)
    _per_datapoint_state = False

    def __init__(self, model, sites=None, sparse=True, create_plates=None):
        self._requested_sites = sites
        self.sparse = sparse
        super().__init__(model, create_plates=create_plates)

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        self._sites = {}
        trace = self.prototype_trace
        for name, site in trace.iter_stochastic_nodes():
            if not is_noise_site(site):
                continue
            if self._requested_sites is not None and name not in self._requested_sites:
                continue
            frames = [f for f in site["cond_indep_stack"] if f.vectorized]
            batch_shape = site["fn"].batch_shape
            if len(batch_shape) != 1 or len(frames) != 1 or frames[0].dim != -1:
                raise NotImplementedError(
                    f"{type(self).__name__} needs the noise site {name!r} inside exactly one "
                    f"data plate at dim=-1 with batch_shape (B,), got batch_shape="
                    f"{tuple(batch_shape)} and plates {[f.name for f in frames]}"
                )
            frame = frames[0]
            record = site_record(site, NoiseSite)
            self._sites[name] = dict(plate=frame.name, num_data=frame.full_size or frame.size, noise=record.noise,
                                     num_classes=record.num_classes, dtype=site["value"].dtype,
                                     device=site["value"].device)
        if self._requested_sites is not None:
            missing = set(self._requested_sites) - set(self._sites)
            if missing:
                raise ValueError(f"sites {sorted(missing)} are not noise sites of the model")
        if not self._sites:
            raise ValueError(
                f"{type(self).__name__} found no noise site in the model: emit one with "
                "pyro_ar.sample_categorical(..., obs=labels)"
            )
        for name, info in self._sites.items():
            self._init_site(name, info)

    def _init_site(self, name, info):
        raise NotImplementedError

    def _gather(self, param, idx):
        return torch.gather(param, 0, idx, sparse_grad=self.sparse)

    def _site_distribution(self, name, info, idx, *args, **kwargs):
        """(distribution, infer dict) of q for the datapoints ``idx``."""
        raise NotImplementedError

    def _without_labels(self, *args, **kwargs) -> bool:
        """Whether this call has no labels (prediction): the model then emits no noise site."""
        return False

    def forward(self, *args, **kwargs):
        if self._without_labels(*args, **kwargs):
            return {}
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        plates = self._create_plates(*args, **kwargs)
        result = {}
        for name, info in self._sites.items():
            plate = plates[info["plate"]]
            if self._per_datapoint_state and plate.size != info["num_data"]:
                raise ValueError(
                    f"{type(self).__name__} holds one local parameter per training datapoint "
                    f"({info['num_data']} for site {name!r}) but the data now have {plate.size} "
                    f"rows: build a new guide for new data (or use ConditionalLocalGuide, which "
                    f"has no per-datapoint state)")
            with plate as idx:
                # a plate made without the model's create_plates subsamples on the CPU
                idx = idx.to(info["device"])
                fn, infer = self._site_distribution(name, info, idx, *args, **kwargs)
                result[name] = pyro.sample(name, fn, infer=infer)
        return result

    def median(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has only local (per-datapoint) latents")


def _default_rho(visits: torch.Tensor) -> torch.Tensor:
    return (1.0 + visits.to(torch.get_default_dtype())) ** -0.9


class GumbelLocalGuide(_LocalGuide):
    r"""Local guide :math:`q(\varepsilon_n) = \mathrm{Gumbel}(\log\eta_n, 1)` for softmax A&R.

    :param model: the Pyro model (with noise sites from :func:`pyro_ar.sample_categorical`).
    :param str local_step: ``"natural"`` -- :math:`\eta_n` is fixed during the gradient step
        and then updated by the closed-form natural-gradient step (needs
        :class:`~pyro_ar.infer.ClosedFormELBO`, which performs it); ``"gradient"`` --
        :math:`\log\eta_n` is an ordinary parameter trained by the optimizer (works with
        any ELBO).
    :param rho: Robbins-Monro step-size function of the visit count tensor,
        default :math:`(1 + t_n)^{-0.9}` (so the first visit sets :math:`\eta_n` to its target).
    :param init_log_eta: initial :math:`\log\eta` (default :math:`\log K`, i.e. :math:`p(y)=1/K`).
    :param bool local_first: with ``local_step="natural"``, the order of the two steps of an
        ``SVI.step``. False (default): the gradient step uses the current :math:`\eta_n`,
        then :math:`\eta_n` takes its natural step. True: Algorithm 1 of Ruiz et al. (2018)
        -- the natural step (E step) first, with the minibatch's class subsample, then the
        gradient step (M step) on the bound at the updated :math:`\eta_n` (the loss reported
        is that bound). At a datapoint's first visit (:math:`\rho = 1`) the updated
        :math:`\eta_n = 1 + \hat S_{y_n}` makes the gradient that of
        :math:`-\log(1 + \hat S_{y_n})`, whereas the default order uses the initial
        :math:`\eta_n` (:math:`= K`), whose gradients are about :math:`K p(y_n)` times too
        small: on large data sets (few visits per datapoint) local-first learns much faster.

    Example:

    >>> import pyro, pyro_ar as ar
    >>> data = ar.datasets.make_linear_teacher(1000, 5, 50, seed=0)
    >>> model = ar.LinearClassifier(5, 50, likelihood=ar.likelihoods.AR(negatives=5), subsample_size=100, sparse=True)
    >>> guide = ar.infer.GumbelLocalGuide(model, create_plates=model.create_plates, local_first=True)
    >>> svi = pyro.infer.SVI(model, guide, ar.optim.lazy_adam({"lr": 0.05}), ar.infer.ClosedFormELBO())
    >>> losses = [svi.step(data.x, data.y) for _ in range(20)]
    >>> guide.log_eta("y_eps").shape          # one eta_n per datapoint
    torch.Size([1000])
    """

    _per_datapoint_state = True

    def __init__(self, model, local_step="natural", rho=None, init_log_eta=None, sites=None,
                 sparse=True, create_plates=None, local_first=False):
        if local_step not in ("natural", "gradient"):
            raise ValueError(f"local_step must be 'natural' or 'gradient', got {local_step!r}")
        self.local_step = local_step
        self.local_first = bool(local_first)
        self.rho = rho or _default_rho
        self.init_log_eta = init_log_eta
        # forward calls, natural steps, warned (a plain list: a PyroModule attribute
        # assignment per step costs more than the rest of q)
        self._counts = [0, 0, False]
        super().__init__(model, sites=sites, sparse=sparse, create_plates=create_plates)

    def _init_site(self, name, info):
        init = self.init_log_eta
        if init is None:
            init = math.log(info["num_classes"]) if info["num_classes"] else 0.0
        log_eta = torch.full((info["num_data"],), float(init), dtype=info["dtype"], device=info["device"])
        setattr(self, f"{name}_log_eta", PyroParam(log_eta))
        self.register_buffer(f"{name}_visits", torch.zeros(info["num_data"], dtype=torch.long,
                                                          device=info["device"]))

    def log_eta(self, name):
        """The full (N,) tensor of :math:`\\log\\eta` for a noise site."""
        return getattr(self, f"{name}_log_eta")

    def divergence_advice(self) -> str:
        r"""What :func:`~pyro_ar.infer.train` adds to :class:`~pyro_ar.infer.TrainingDiverged`'s
        message ("" if nothing): in the default order the gradient step meets
        :math:`(1 + \hat S_n)/\eta_n` with :math:`\eta_n` from n's previous visit, which grows like
        :math:`e^{\Delta}` for utilities moved by :math:`\Delta` since; ``local_first`` bounds it by
        :math:`1/\rho`, as :math:`\eta_n \ge \rho(1 + \hat S_n)` after the natural step."""
        return "" if self.local_first or self.local_step != "natural" else (
            "GumbelLocalGuide steps the gradient at eta_n from each datapoint's previous visit, where "
            "(1 + S_n)/eta_n grows like exp of how far the utilities moved since: a large step size makes it "
            "explode; local_first=True (the eta step first, which keeps it <= 1/rho) avoids that")

    def _site_distribution(self, name, info, idx, *args, **kwargs):
        log_eta_all = self.log_eta(name)
        if self.local_step == "natural":
            loc = log_eta_all.detach().index_select(0, idx)
            record = LocalStep(True, partial(self._natural_step, name, idx, log_eta_all),
                               self.local_first)
            counts = self._counts
            counts[0] += 1
            if counts[0] > 3 and counts[1] == 0 and not counts[2] and torch.is_grad_enabled():
                counts[2] = True
                warnings.warn(
                    "GumbelLocalGuide(local_step='natural') has not been updated: its eta step is "
                    "performed by pyro_ar.infer.ClosedFormELBO; with other ELBOs use "
                    "local_step='gradient'", RuntimeWarning)
        else:
            loc = self._gather(log_eta_all, idx)
            record = LocalStep(unit_gumbel=True)  # lets ClosedFormELBO skip checking the scale
        return FastGumbel(loc, 1.0), {INFER_KEY: record}

    @torch.no_grad()
    def _natural_step(self, name, idx, log_eta_all, log_eta_target):
        r""":math:`\eta \leftarrow (1-\rho)\eta + \rho\tilde\eta` in log space for the rows ``idx``
        of ``log_eta_all`` (the site's parameter as the guide read it)."""
        log_eta_all = log_eta_all.unconstrained()
        visits = getattr(self, f"{name}_visits")
        rho = self.rho(visits.index_select(0, idx)).to(log_eta_all.dtype)
        old = log_eta_all.index_select(0, idx)
        new = torch.logaddexp(torch.log1p(-rho) + old, torch.log(rho) + log_eta_target.to(old.dtype))
        log_eta_all.index_copy_(0, idx, new)
        visits.index_add_(0, idx, torch.ones_like(idx))
        self._counts[1] += 1
        return new


class NoiseLocalGuide(_LocalGuide):
    r"""Reparameterised local guide :math:`q(\varepsilon_n) = \text{noise}(\mu_n, \sigma_n)` for any noise.

    The family is the model's own noise (Normal for probit, Logistic for logistic, Gumbel,
    or a user-defined :class:`~pyro_ar.Noise`) in location-scale form;
    :math:`\sigma_n = \mathrm{softplus}(u_n)`, both :math:`\mu_n` and :math:`u_n` stored as
    unconstrained (N,) parameters ``<site>_loc`` and ``<site>_scale_unconstrained`` and
    gathered for the minibatch only (sparse gradients when ``sparse=True``: use
    :func:`pyro_ar.optim.lazy_adam`, whose per-parameter options give the local step size).

    :param init_loc: initial :math:`\mu_n` (default 0).
    :param init_scale: initial :math:`\sigma_n` (default 1: the prior's scale).

    Example:

    >>> from pyro.infer import SVI, TraceMeanField_ELBO
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import NoiseLocalGuide
    >>> from pyro_ar import AR, LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(1000, 5, 50, "normal", seed=0)
    >>> model = LinearClassifier(5, 50, likelihood=AR("normal", negatives=5), subsample_size=100, sparse=True)
    >>> svi = SVI(model, NoiseLocalGuide(model), lazy_adam({"lr": 0.05}), TraceMeanField_ELBO())
    >>> loss = svi.step(data.x, data.y)
    """

    _per_datapoint_state = True

    def __init__(self, model, init_loc=0.0, init_scale=1.0, sites=None, sparse=True,
                 create_plates=None):
        if not init_scale > 0:
            raise ValueError(f"init_scale must be > 0, got {init_scale!r}")
        self.init_loc, self.init_scale = float(init_loc), float(init_scale)
        super().__init__(model, sites=sites, sparse=sparse, create_plates=create_plates)

    def _init_site(self, name, info):
        n, kw = info["num_data"], dict(dtype=info["dtype"], device=info["device"])
        u = math.log(math.expm1(self.init_scale)) if self.init_scale < 30 else self.init_scale
        setattr(self, f"{name}_loc", PyroParam(torch.full((n,), self.init_loc, **kw)))
        setattr(self, f"{name}_scale_unconstrained", PyroParam(torch.full((n,), u, **kw)))

    def _site_distribution(self, name, info, idx, *args, **kwargs):
        loc = self._gather(getattr(self, f"{name}_loc"), idx)
        scale = F.softplus(self._gather(getattr(self, f"{name}_scale_unconstrained"), idx))
        return info["noise"].distribution(loc, scale), {}


class AmortizedLocalGuide(_LocalGuide):
    r"""Amortised local guide: :math:`(\mu_n, \sigma_n) = g_\lambda(x_n, y_n)`.

    No per-datapoint state (O(1) memory in N) and it applies to new data. The default
    network is :math:`g(x, y) = \mathrm{MLP}(x) + e_y`, an MLP on the features plus a
    learned per-class offset :math:`e_y \in \mathbb{R}^2` (sparse-gradient embedding),
    since the optimal :math:`q(\varepsilon_n)` depends strongly on the observed class.
    With Gumbel noise the scale is fixed to 1 (the optimal family) and only
    :math:`\mu_n = \log\eta_n` is predicted.

    :param data_fn: ``(*args, **kwargs) -> (x, y)`` giving the FULL feature and label
        tensors from the model's arguments (indexed here by the plate's subsample);
        default: the first two positional arguments.
    :param encoder: optional ``nn.Module`` mapping ``(x_batch, y_batch)`` to a (B, 2)
        tensor of (loc, unconstrained scale).

    Example:

    >>> import pyro, pyro_ar as ar
    >>> data = ar.datasets.make_linear_teacher(1000, 5, 50, "logistic", seed=0)
    >>> model = ar.LinearClassifier(5, 50, likelihood=ar.likelihoods.AR("logistic", negatives=5), subsample_size=100)
    >>> guide = ar.infer.AmortizedLocalGuide(model, hidden_dim=16)   # no per-datapoint state
    >>> elbo = pyro.infer.TraceMeanField_ELBO()
    >>> loss = pyro.infer.SVI(model, guide, ar.optim.lazy_adam({"lr": 0.01}), elbo).step(data.x, data.y)
    """

    def __init__(self, model, num_features=None, hidden_dim=64, data_fn=None, encoder=None,
                 sites=None, sparse=True, create_plates=None):
        self.data_fn = data_fn or (lambda *args, **kwargs: (args[0], args[1]))
        self._num_features, self._hidden_dim, self._encoder = num_features, hidden_dim, encoder
        super().__init__(model, sites=sites, sparse=sparse, create_plates=create_plates)

    def _setup_prototype(self, *args, **kwargs):
        x, _ = self.data_fn(*args, **kwargs)
        if self._num_features is None:
            self._num_features = x.shape[-1]
        super()._setup_prototype(*args, **kwargs)

    def _init_site(self, name, info):
        enc = self._encoder
        if enc is None:
            if info["num_classes"] is None:
                raise ValueError(f"cannot infer the number of classes of site {name!r}; pass encoder=")
            enc = _DefaultEncoder(self._num_features, self._hidden_dim, info["num_classes"],
                                  self.sparse, gumbel=unit_gumbel_optimum(info["noise"]))
            enc = enc.to(device=info["device"], dtype=info["dtype"])
        setattr(self, f"{name}_encoder", enc)

    def _site_distribution(self, name, info, idx, *args, **kwargs):
        x, y = self.data_fn(*args, **kwargs)
        # PyroModule's getattr registers the encoder once, under the guide's name
        out = getattr(self, f"{name}_encoder")(x[idx], y[idx])
        loc = out[..., 0]
        if unit_gumbel_optimum(info["noise"]):  # the optimal family: Gumbel(loc, 1)
            return FastGumbel(loc, 1.0), {}
        return info["noise"].distribution(loc, F.softplus(out[..., 1])), {}


class _DefaultEncoder(nn.Module):
    def __init__(self, num_features, hidden_dim, num_classes, sparse, gumbel):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(num_features, hidden_dim), nn.Tanh(),
                                 nn.Linear(hidden_dim, 2))
        self.class_offset = nn.Embedding(num_classes, 2, sparse=sparse)
        nn.init.zeros_(self.class_offset.weight)
        with torch.no_grad():
            self.net[-1].weight.zero_()
            # start at the prior (loc 0, scale 1), or at log K for Gumbel (p(y) = 1/K)
            self.net[-1].bias.copy_(torch.tensor([math.log(num_classes) if gumbel else 0.0,
                                                  _SOFTPLUS_INV_ONE]))

    def forward(self, x, y):
        return self.net(x) + self.class_offset(y)


# ====================================================================== conditional local guide
class ConditionalLocalGuide(_LocalGuide):
    r"""Local guide :math:`q(\varepsilon_n\mid\psi_n)` recomputed at every step from the current
    utilities: no per-datapoint state, any noise, and it serves new data.

    At each step, for the minibatch's rows, the guide gathers :math:`\psi_{y_n}` and the
    utilities of a class subsample :math:`T` with weights :math:`a_j` (unbiased for the class
    sum), :math:`d_{nj} = \psi_{y_n} - \psi_{k_j}`, and sets :math:`q` to the optimum of the
    local bound :math:`q^*(e)\propto\phi(e)\prod_j\Phi(e + d_{nj})^{a_j}`:

    * Gumbel noise: exactly :math:`\mathrm{Gumbel}(\log(1 + \hat S_{y_n}), 1)`,
      :math:`\hat S_y = \sum_j a_j e^{-d_j}` (the natural step with :math:`\rho = 1`; with
      :class:`~pyro_ar.infer.ClosedFormELBO` the bound is in closed form);
    * any other noise: a reparameterised draw of the local fit ``fit``: ``"gumbel"`` (default),
      the ELBO-optimal Gumbel or nearly (:func:`~pyro_ar.infer.local_fit.gumbel_local`, which says
      why a Gumbel; the Laplace point refined by ``refine_steps`` Newton steps, one by default),
      ``"gaussian"`` the same for a Gaussian (:func:`~pyro_ar.infer.local_fit.gaussian_local`),
      ``"laplace"`` the Laplace approximation (:func:`~pyro_ar.infer.local_fit.laplace_local`; cheaper,
      but its gap depends on the parameters and biases the fit, at a cost in held-out log-likelihood).

    **The factor in expectation.** ``ClosedFormELBO(gaussian_nodes=16)`` replaces the model's
    factor by its expectation under the Gaussian q
    (:class:`~pyro_ar.distributions.GaussianExpectedFactor`, Gauss-Hermite quadrature), as the
    Gumbel case is in closed form: the one Monte Carlo draw of :math:`\varepsilon` was a third
    of the probit weights' gradient variance on a linear teacher (issue 27,
    ``benchmarks/probit_gradient_noise.py``); it costs ``gaussian_nodes`` evaluations per class term.

    **T is drawn independently of the model's class subsample S** (same sampler, fresh
    draw). The ELBO estimate is then unbiased for :math:`\mathbb{E}_T[L(q_T)]`, a mean of
    bounds, hence a bound on :math:`\log p(y)`: the model's estimate is unbiased for the
    class sum given any q that does not depend on S. Fitting q on S itself would tune q to
    S's estimate and bias the bound upwards (it could exceed :math:`\log p(y)`).

    **Gradients.** ``grad="envelope"`` (default): q is computed from detached parameters,
    so the gradient is that of the bound at fixed q -- the variational-EM step. At the local
    optimum (``fit="gumbel"`` or ``"gaussian"``, T = all classes) the bound's derivative with respect to q's
    parameters vanishes (envelope theorem), so this is the full gradient up to the
    subsampling of T, at no extra backward cost and with no gradient into T's rows. ``grad="implicit"``: q is built
    from the live ``pyro.param`` s and differentiated through (implicit-function
    derivative of the mode), so the gradient is exactly that of the ELBO estimate, at the
    price of a second backward through T's gathered rows.

    :param model: a :class:`~pyro_ar.models.base.CategoricalModel` (the guide calls its
        ``minibatch_utility``) or any model when ``utility_fn`` is given.
    :param negatives: the sampler of T: ``"model"`` (default: the model likelihood's own
        sampler), None (every class: the exact local optimum, O(K) per datapoint), an int
        or a :class:`~pyro_ar.negatives.NegativeSampler`.
    :param int oversample: T has this many times the sampler's number of negatives (same
        strategy; all classes once that reaches K - 1): a larger T fits q closer to the
        optimum over all classes, so the bound is tighter, at :math:`O(B |T|)` more work
        per step (default 3: ``python -m benchmarks.probit_convergence --oversample``).
    :param bool label_head: T also holds the minibatch's distinct labels, summed exactly
        (:class:`~pyro_ar.negatives.LabelHeadNegatives`, default True): the frequent classes
        that a small uniform T misses would make the bound's estimate heavy-tailed
        (:func:`~pyro_ar.infer.local_fit.local_sampler`, issue 27).
    :param int newton_steps: at most this many Newton steps (non-Gumbel noise).
    :param int refine_steps: ``fit="gumbel"`` or ``"gaussian"``: at most this many Newton steps on
        the local bound from the Laplace point (:func:`~pyro_ar.infer.local_fit.gumbel_local`).
        The default, one, stops after the first: the Newton step from the Laplace point goes
        most of the way (the Laplace q is off by far more than what is left), the bound is a
        little looser than at the converged q (any q gives a valid bound) and its gradient the
        envelope gradient at a nearly stationary q, and the step is cheaper, early in training
        most of all; ``refine_steps=10`` converges within the fit's ``tol``. Measured on Brown
        and on the hidden linear teacher in [claim brown-probit].
    :param str grad: ``"envelope"`` or ``"implicit"`` (see above).
    :param parameters: ``like -> {name: tensor}``, the per-class parameters to condition on
        (default: the model's ``pyro.param`` s; needed for ``weights="bayes"``, e.g. the
        posterior mean).
    :param utility_fn: ``(idx, *args, **kwargs) -> (Utility, labels)`` of the rows ``idx``
        (default: from a CategoricalModel and its ``(x, y)`` arguments).

    Example:

    >>> from pyro.infer import SVI, TraceMeanField_ELBO
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer.local_guides import ConditionalLocalGuide
    >>> from pyro_ar import AR, LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(1000, 5, 50, "normal", seed=0)
    >>> model = LinearClassifier(5, 50, likelihood=AR("normal", negatives=5), subsample_size=100, sparse=True)
    >>> guide = ConditionalLocalGuide(model, create_plates=model.create_plates)
    >>> loss = SVI(model, guide, lazy_adam({"lr": 0.05}), TraceMeanField_ELBO()).step(data.x, data.y)
    >>> list(guide.parameters())      # no per-datapoint state
    []
    """

    def __init__(self, model, negatives="model", fit: str = DEFAULT_LOCAL_FIT, newton_steps: int = 8,
                 grad: str = "envelope", parameters=None, utility_fn=None, sites=None,
                 create_plates=None, oversample: int = DEFAULT_OVERSAMPLE, label_head: bool = True,
                 refine_steps: int = 1):
        if grad not in ("envelope", "implicit"):
            raise ValueError(f"grad must be 'envelope' or 'implicit', got grad={grad!r}")
        self.fit = check_local_fit(fit)
        if isinstance(newton_steps, bool) or not isinstance(newton_steps, int) or newton_steps < 1:
            raise ValueError(f"newton_steps must be an integer >= 1, got newton_steps={newton_steps!r}")
        if utility_fn is None and not hasattr(model, "minibatch_utility"):
            raise ValueError(f"ConditionalLocalGuide needs a CategoricalModel (with minibatch_utility) "
                             f"or utility_fn=, got model={model!r}")
        if isinstance(oversample, bool) or not isinstance(oversample, int) or oversample < 1:
            raise ValueError(f"oversample must be an integer >= 1, got oversample={oversample!r}")
        if isinstance(refine_steps, bool) or not isinstance(refine_steps, int) or refine_steps < 1:
            raise ValueError(f"refine_steps must be an integer >= 1, got refine_steps={refine_steps!r}")
        self.grad, self.newton_steps, self.oversample = grad, newton_steps, oversample
        self.refine_steps = refine_steps
        self.label_head = bool(label_head)
        self._scaled = None  # (base sampler, its oversampled copy)
        self._negatives = negatives if isinstance(negatives, str) else as_negative_sampler(negatives)
        if isinstance(negatives, str) and negatives != "model":
            raise ValueError(f"negatives must be 'model', None, an int or a NegativeSampler, "
                             f"got negatives={negatives!r}")
        self._params_fn, self._utility_fn = parameters, utility_fn
        self._ar_model = model
        super().__init__(model, sites=sites, sparse=False, create_plates=create_plates)

    def _init_site(self, name, info):
        if len(self._sites) > 1 and self._utility_fn is None:
            raise ValueError("ConditionalLocalGuide serves one noise site per CategoricalModel; "
                             f"got {sorted(self._sites)} (pass sites=[...] or utility_fn=)")

    def _sampler(self):
        base = self._ar_model.likelihood.sampler if self._negatives == "model" else self._negatives
        if self._scaled is None or self._scaled[0] is not base:  # same strategy, more classes
            self._scaled = (base, local_sampler(base, self.oversample, self.label_head))
        return self._scaled[1]

    def _without_labels(self, *args, **kwargs) -> bool:
        """A call ``guide(x)`` without labels (e.g. ``pyro.infer.Predictive``): the model draws
        labels and has no noise site, so the guide emits none (it needs the labels otherwise)."""
        if self._utility_fn is not None:
            return False
        return (args[1] if len(args) > 1 else kwargs.get("y")) is None

    def _utilities(self, idx, *args, **kwargs):
        if self._utility_fn is not None:
            return self._utility_fn(idx, *args, **kwargs)
        model = self._ar_model
        x = args[0] if args else kwargs.get("x")
        y = args[1] if len(args) > 1 else kwargs.get("y")
        if y is None:
            raise ValueError("ConditionalLocalGuide needs the labels: call it as guide(x, y)")
        like = model._like(x)
        if self._params_fn is not None:
            params = self._params_fn(like)
        elif self.grad == "envelope":
            params = model.fitted_parameters(like)
        else:
            params = {n: pyro.param(model.prefix + n) for n in model.parameter_shapes()}
        index = None if idx.shape[0] == len(x) else idx
        return model.minibatch_utility(take_rows(x, index), params), take_rows(y, index)

    def _site_distribution(self, name, info, idx, *args, **kwargs):
        envelope = self.grad == "envelope"
        with torch.no_grad() if envelope else contextlib.nullcontext():
            utility, labels = self._utilities(idx, *args, **kwargs)
        return conditional_local_q(info["noise"], utility, labels, self._sampler(), self.fit, self.newton_steps,
                                   no_grad=envelope, refine_steps=self.refine_steps)


def local_parameter_names(guide) -> Callable[[str], bool]:
    """A predicate on param-store names: True for the per-datapoint parameters of the local
    guides inside ``guide`` (e.g. ``"GumbelLocalGuide.y_eps_log_eta"``) and of the Bouchard
    likelihood (``"<site>_bouchard_a"``): the parameters that stay on their rank in data-parallel
    training and that may get their own step size.

    Example:

    >>> from pyro_ar.infer import local_parameter_names
    >>> from pyro_ar.infer import default_guide
    >>> from pyro_ar.models import LinearClassifier
    >>> is_local = local_parameter_names(default_guide(LinearClassifier(3, 10)))
    >>> is_local("GumbelLocalGuide.y_eps_log_eta"), is_local("weight")
    (True, False)
    """
    prefixes = tuple(m._pyro_name + "." for m in getattr(guide, "modules", lambda: [])()
                     if isinstance(m, _LocalGuide) and m._per_datapoint_state)
    return lambda name: (bool(prefixes) and name.startswith(prefixes)) or name.endswith("_bouchard_a")

r"""A categorical latent-variable model: each datapoint (session) has its own latent vector.

The session model of seeds/002 (section 3): session :math:`u` has a latent
:math:`\omega_u\sim N(0, I_Q)` and its observed items :math:`v_{u,1..T_u}` over P items are

.. math::  \psi_u = g(\omega_u)\,\Psi^\top + \rho, \qquad
           v_{u,t} = \arg\max_p(\psi_{u,p} + \varepsilon_{u,t,p})

(softmax for Gumbel noise, probit / logistic for the other noises of :mod:`pyro_ar.noise`);
:math:`g` is the identity (``utility="linear"``) or a small MLP (``utility="neural"``).
The variational posterior :math:`q(\omega_u) = N(\mu_u, \mathrm{diag}\,\sigma_u^2)` is
amortised by :class:`SessionEncoder` (a bag-of-items embedding and an MLP of the session's
items, so the guide does not grow with the number of sessions U) or held per session by
:class:`LocalPosterior` (for comparison). Any likelihood of :mod:`pyro_ar.likelihoods`:

* :class:`~pyro_ar.likelihoods.AR` -- the noise :math:`\varepsilon_{u,t}` of each observed
  item gets the conditional local guide :math:`q(\varepsilon\mid\psi)` (closed form
  :math:`\mathrm{Gumbel}(\log(1+\hat S), 1)` for softmax, the local fit, a Gumbel, otherwise)
  and the class sum is subsampled: per step O(B T s Q) for B sessions, T items, s negatives;
* :class:`~pyro_ar.likelihoods.Bouchard` -- the seed's bound
  :math:`\log p(v\mid\psi)\ge\psi_v - a_u - \sum_p\log(1+e^{\psi_p-a_u})`, its class sum
  subsampled (negative sampling) or exact, :math:`a_u` amortised by the same encoder
  (``Bouchard(a="local")``) or optimal (``a="optimal"``, O(P)). With
  ``bouchard="analytic"`` (the seed's method, linear utilities) the expectation over
  :math:`q(\omega_u)` is analytic: :math:`\psi_{u,p}\sim N(m_{u,p}, s_{u,p})` with
  :math:`m = \Psi_p\mu_u + \rho_p`, :math:`s = \sum_q\Psi_{pq}^2\sigma_{uq}^2`, each softplus
  bounded by Jaakkola--Jordan at the closed-form :math:`\xi_{u,p}=\sqrt{s+(m-a_u)^2}`; the KL
  term is analytic too (``TraceMeanField_ELBO``), so no Monte Carlo at all;
  ``bouchard="sampled"`` uses the reparameterised draw of :math:`\omega_u`;
* :class:`~pyro_ar.likelihoods.Exact` -- the reparameterisation trick with the exact
  softmax (O(B P Q) per step).

Sessions are ragged: ``items`` is a (U, T) integer tensor padded with -1
(:func:`pyro_ar.datasets.pad_sessions`); the model opens a ``"sessions"`` plate (dim -2,
O(B) subsample) and an ``"items"`` plate (dim -1) under ``poutine.mask(items >= 0)``.
The utilities are lazy (:class:`~pyro_ar.utility.LinearUtility` of batch shape (B, 1)):
only the observed and the negative items' rows of :math:`\Psi` are gathered, so a step costs
O(B (T + s) Q) whatever P. :class:`~pyro_ar.infer.LatentKLWarmup` anneals the KL term of :math:`q(\omega_u)`
from 0 to 1 over the first steps, against posterior collapse.
"""

import math
from typing import Dict, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine

from .. import evaluation
from ..evaluation.predictive import _check_reduce, _reduce  # (the one reduction of evaluation results)
from ..distributions import BouchardBound
from ..likelihoods import Bouchard, DataSubsample, GaussianBouchard
from ..subsets import sample_without_replacement
from ..numerics import check_int, first_position, show
from ..utility import LinearUtility, LinearWeights
from .base import CategoricalModel, check_positive_int, take_rows
from .weights import Init, check_init
from .sessions import session_metrics  # (its home; imported here for the models and old imports)

__all__ = ["LatentCategoricalModel", "CategoricalLatentModel", "SessionEncoder", "LocalPosterior"]


class SessionEncoder(nn.Module):
    r"""Amortised :math:`q(\omega_u) = N(\mu_u, \mathrm{diag}\,\sigma_u^2)` and Bouchard's
    :math:`a_u` from the session's items: the mean of learned item embeddings and
    :math:`\log(1+T_u)` through an MLP (``hidden_dim`` units), softplus scales.

    Example:

    >>> import torch
    >>> from pyro_ar.models import SessionEncoder
    >>> enc = SessionEncoder(100, 4, hidden_dim=8)
    >>> loc, scale, a = enc(torch.tensor([0, 1]), torch.tensor([[3, 5, -1], [7, -1, -1]]))
    >>> loc.shape, scale.shape, a.shape
    (torch.Size([2, 4]), torch.Size([2, 4]), torch.Size([2]))
    """

    def __init__(self, num_items: int, latent_dim: int, hidden_dim: int = 64, sparse: bool = True):
        super().__init__()
        self.latent_dim, self.sparse = latent_dim, sparse
        self.embedding = nn.Parameter(0.1 * torch.randn(num_items, hidden_dim))
        self.mlp = nn.Sequential(nn.Linear(hidden_dim + 1, hidden_dim), nn.Tanh(),
                                 nn.Linear(hidden_dim, 2 * latent_dim + 1))
        with torch.no_grad():  # start near q = N(0, 0.5^2), a = log P
            last = self.mlp[-1]
            last.weight.mul_(0.1)
            last.bias.zero_()
            last.bias[latent_dim:2 * latent_dim].fill_(math.log(math.expm1(0.5)))
            last.bias[-1] = math.log(num_items)

    def forward(self, idx: torch.Tensor, items: torch.Tensor):
        mask = (items >= 0).unsqueeze(-1)
        e = F.embedding(items.clamp(min=0), self.embedding, sparse=self.sparse)
        m = mask.to(e.dtype)
        count = m.sum(-2)
        h = torch.cat([(e * m).sum(-2) / count.clamp(min=1), count.log1p()], -1)
        out = self.mlp(h)
        Q = self.latent_dim
        return out[..., :Q], F.softplus(out[..., Q:2 * Q]) + 1e-4, out[..., -1]


class LocalPosterior(nn.Module):
    r"""Per-session :math:`(\mu_u, \sigma_u, a_u)` (O(U Q) parameters, gathered by the
    plate's indices with sparse gradients): the non-amortised posterior, for comparison.

    Example:

    >>> import torch
    >>> from pyro_ar.models import LocalPosterior
    >>> loc, scale, a = LocalPosterior(10, 3, num_items=50)(torch.tensor([2, 7]), None)
    >>> loc.shape, float(a[0].detach()) == float(torch.tensor(50.0).log())
    (torch.Size([2, 3]), True)
    """

    def __init__(self, num_data: int, latent_dim: int, num_items: int, sparse: bool = True):
        super().__init__()
        self.num_data, self.sparse = num_data, sparse
        self.loc = nn.Parameter(0.01 * torch.randn(num_data, latent_dim))
        self.raw_scale = nn.Parameter(torch.full((num_data, latent_dim), math.log(math.expm1(0.5))))
        self.a = nn.Parameter(torch.full((num_data, 1), math.log(num_items)))

    def forward(self, idx: torch.Tensor, items: Optional[torch.Tensor]):
        if items is not None and int(idx.max()) >= self.num_data:
            raise ValueError(f"LocalPosterior holds {self.num_data} sessions, got session index {int(idx.max())}")
        rows = [F.embedding(idx, p, sparse=self.sparse) for p in (self.loc, self.raw_scale, self.a)]
        return rows[0], F.softplus(rows[1]) + 1e-4, rows[2].squeeze(-1)


class LatentCategoricalModel(CategoricalModel):
    r"""Base class of the models with a Gaussian latent per datapoint,
    :math:`\omega_n\sim N(0, I_Q)`, whose observed entries :math:`v_{n,1..T}` (padded with
    -1) are categorical given :math:`\psi(\omega_n)`:
    :class:`CategoricalLatentModel` (sessions of items) and
    :class:`~pyro_ar.models.CategoricalLatentGP` (D variables, the CLGP).

    It owns the model step (the datapoint plate :attr:`plate_name` at dim -2 with O(B)
    subsample indices, the latent site, one likelihood site per observation group under
    ``poutine.mask(v >= 0)``) and evaluation with the methods of every
    :class:`~pyro_ar.models.base.CategoricalModel`, :meth:`log_likelihood` and
    :meth:`evaluate`, of held-out entries ``y`` given the observed entries ``x`` of the
    same datapoints:

    .. math::  \log p(y_{nt}\mid x_n) \approx \log\frac1S\sum_{s=1}^S p(y_{nt}\mid\psi(\omega_s)),
               \qquad \omega_s\sim q(\omega_n\mid x_n),

    the posterior predictive under the fitted posterior :math:`q` (``num_samples=S``
    seeded draws; ``num_samples=0``: the plug-in :math:`p(y_{nt}\mid\psi(\mathbb{E}_q\omega_n))`,
    deterministic), each :math:`p(y\mid\psi)` exact over all classes
    (:mod:`pyro_ar.evaluation`: log-softmax for Gumbel noise, quadrature otherwise).

    A subclass sets ``posterior`` (a module ``(idx, v) -> (loc, scale, a)``), ``latent_dim``,
    ``latent_site``, ``latent_kl_weight`` and ``bouchard`` (``"analytic"`` or ``"sampled"``)
    and defines the :class:`~pyro_ar.models.base.CategoricalModel` hooks, with
    ``minibatch_utility(omega, params, group=None, sample=True)`` of latent draws.

    Example:

    >>> import torch
    >>> from pyro_ar.models import CategoricalLatentModel, LatentCategoricalModel
    >>> from pyro_ar.likelihoods import AR
    >>> model = CategoricalLatentModel(20, 2, AR(negatives=3), hidden_dim=8)
    >>> observed, heldout = torch.randint(0, 20, (5, 4)), torch.randint(0, 20, (5, 2))
    >>> isinstance(model, LatentCategoricalModel), model.log_likelihood(observed, heldout, reduce="none").shape
    (True, torch.Size([10]))
    """

    #: name of the datapoint plate (dim -2)
    plate_name = "data"

    def check_call(self, items, y=None):
        """The base class's checks; ``posterior="local"`` also needs all the training sessions."""
        super().check_call(items, y)
        if self.posterior_kind == "local" and len(items) != self.posterior.num_data:
            xn = self.input_names[0]
            raise ValueError(f"{xn} has {len(items)} rows but posterior='local' holds the "
                             f"{self.posterior.num_data} training sessions only (num_sessions / num_data): "
                             "it cannot score new sessions")

    def observation_groups(self, v: torch.Tensor):
        """``(site, plate name, entries, group)`` of each likelihood site of the minibatch's
        (padded) entries ``v``: here one site, all of a session's items over one item set."""
        return [(self.site, "items", v, None)]

    def group_likelihood(self, group=None):
        """The likelihood object of the site of ``group`` (here: the model's one likelihood)."""
        return self.likelihood

    def create_plates(self, items, y=None, sample_weight=None):
        """The ``"sessions"`` plate (:attr:`plate_name`, dim -2) with O(B) subsample indices (as
        the base class), after the call's checks (those of the minibatch's rows: O(B T))."""
        self.check_call(items)
        N, B = len(items), self.subsample_size
        sub = None if B is None or B >= N else sample_without_replacement(N, B, device=items.device)
        self.check_values(take_rows(items, sub), rows=sub)
        return pyro.plate(self.plate_name, N, subsample=sub, dim=-2)

    def _torch_modules(self) -> Dict[str, nn.Module]:
        """The model's own torch modules by their Pyro names (without the prefix): the
        posterior (encoder or per-session table) and the neural utility's feature map."""
        out = {"posterior": self.posterior}
        if self.feature_map is not None:
            out["feature_map"] = self.feature_map
        return out

    def _modules(self, device: torch.device):
        """Register :meth:`_torch_modules` with Pyro, each first moved to ``device`` (the data's)
        if it is elsewhere: like the per-class parameters, created on the data's device, the
        modules follow the data (``Module.to`` keeps the Parameter objects, so a move before
        training leaves Pyro's param store consistent). Values already in the store (e.g. from
        a checkpoint) are loaded into the modules: a resumed run continues with the trained
        posterior, not a fresh one."""
        for name, module in self._torch_modules().items():
            p = next(module.parameters(), None)
            if p is not None and p.device != device:
                module.to(device)
            pyro.module(self.prefix + name, module, update_module_params=True)

    def posterior_params(self, idx, items) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(mu, sigma, a)`` of the sessions ``idx`` with (padded) items ``items``."""
        self._modules(items.device)
        return self.posterior(idx, items)

    # ---- the model ------------------------------------------------------------------------
    def __call__(self, items: torch.Tensor):
        self.check_call(items)
        like = torch.zeros((), device=items.device)
        params = self.parameters(like)
        self._modules(items.device)
        N = len(items)
        with self.create_plates(items) as idx:
            index = None if idx.shape[0] == N else idx
            v = take_rows(items, index)
            prior = dist.Normal(like, 1.0).expand([self.latent_dim]).to_event(1)
            with poutine.scale(scale=self.latent_kl_weight):
                omega = pyro.sample(self.latent_site, prior)
            out = []
            for site, plate, vg, group in self.observation_groups(v):
                with pyro.plate(plate, vg.shape[-1], dim=-1), poutine.mask(mask=vg >= 0):
                    obs = vg.clamp(min=0)
                    likelihood = self.group_likelihood(group)
                    if isinstance(likelihood, Bouchard):
                        out.append(self._bouchard(idx, v, omega, params, obs, site, group))
                        continue
                    utility = self.minibatch_utility(omega, params, group)
                    out.append(likelihood.sample(site, utility, obs, DataSubsample(index, N)))
        return out[0] if len(out) == 1 else tuple(out)

    def _bouchard(self, idx, v, omega, params, obs, site, group=None):
        """The seed's bound: a_u amortised (or optimal), Gaussian utilities when analytic."""
        loc, scale, a = self.posterior_params(idx, v)
        likelihood = self.group_likelihood(group)
        a = None if likelihood.a == "optimal" else a.unsqueeze(-1)
        var = None
        if self.bouchard == "analytic":
            utility = self.minibatch_utility(loc.unsqueeze(-2), params)
            # s_{u,p} = sum_q Psi_pq^2 sigma_uq^2: the squares of the gathered rows only
            var = LinearUtility.of((scale * scale).unsqueeze(-2),
                                   LinearWeights(params["weight"], None, self.sparse, transform=torch.square))
        else:
            utility = self.minibatch_utility(omega, params, group)
        d = BouchardBound(utility, a=a, negatives=likelihood.sampler, utility_var=var)
        return pyro.sample(site, d, obs=obs)

    # ---- evaluation -----------------------------------------------------------------------
    def latent_utility(self, omega: torch.Tensor, params, group=None, sample: bool = True):
        """The utility of the entries of ``group`` at latents ``omega`` (n, 1, Q) for
        evaluation (here :meth:`minibatch_utility`; batch shape (n, 1) when every entry of
        a datapoint has the same classes, (n, T_g) otherwise)."""
        return self.minibatch_utility(omega, params, group, sample=sample)

    def utility(self, x, params=None):
        """Utilities of the datapoints ``x`` (their observed entries) at the posterior mean
        of their latents, under the fitted (or given) parameters (first observation group)."""
        self.check_call(x)
        self.check_values(x)
        params = self.fitted_parameters() if params is None else params
        with torch.no_grad():
            loc, _, _ = self.posterior_params(torch.arange(len(x), device=x.device), x)
            return self.latent_utility(loc.unsqueeze(-2), {n: p.detach() for n, p in params.items()},
                                       sample=False)

    def _check_heldout(self, x, y, index):
        self.check_inputs(x)
        self._check_nonempty(x)
        if index is None:  # (a per-datapoint posterior holds the training datapoints only)
            self.check_call(x)
        self.check_inputs(y)
        for t in (x, y):
            self.check_values(t)
        if y.shape[0] != x.shape[0]:
            xn = self.input_names[0]
            raise ValueError(f"y (the held-out entries) must have one row per row of {xn} "
                             f"({x.shape[0]}), got y of shape {tuple(y.shape)}")
        if index is not None and (not isinstance(index, torch.Tensor) or index.shape != (len(x),)):
            raise ValueError(f"index must be a tensor of the {len(x)} datapoints' rows in the posterior, "
                             f"got index={index!r}")
        if not bool((y >= 0).any()):
            raise ValueError("y holds no held-out entry (every entry is -1): nothing to evaluate")

    def _predictive_pass(self, x, y, fn, num_samples: int, index, seed: int):
        """Run ``fn(source, labels, noise, rows)`` (a :mod:`pyro_ar.evaluation` call with
        ``reduce="none"``) on every observation group of the held-out entries ``y`` and
        put the per-entry values back in ``y``'s row-major order of entries ``y >= 0``."""
        num_samples = check_int("num_samples", num_samples, low=0)
        self._check_heldout(x, y, index)
        params = {n: p.detach() for n, p in self.fitted_parameters().items()}
        dev = x.device
        idx = torch.arange(len(x), device=dev) if index is None else index.to(dev)
        out = {}
        with torch.no_grad(), torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
            torch.manual_seed(seed)
            loc, scale, _ = self.posterior_params(idx, x)
            loc, scale = loc.unsqueeze(-2), scale.unsqueeze(-2)            # (N, 1, Q)
            omega = loc if num_samples == 0 else \
                loc + scale * torch.randn((num_samples,) + loc.shape, dtype=loc.dtype, device=dev)
            # the columns of y that each group's entries come from: the groups of the column ids
            columns = [c[0] for _, _, c, _ in self.observation_groups(torch.arange(y.shape[-1], device=dev)[None])]
            for (_, _, yg, group), colg in zip(self.observation_groups(y), columns):
                per_entry = self.latent_utility(loc[:1], params, group, sample=False).batch_shape[-1] > 1
                mask = yg >= 0
                if not bool(mask.any()):  # no held-out entry of this group
                    continue
                n, t = mask.nonzero(as_tuple=True)
                rows = n * yg.shape[-1] + t if per_entry else n
                source = self._entry_source(omega, params, group, yg.shape[-1], per_entry, num_samples)
                values = fn(source, yg[mask], self.group_likelihood(group).noise, rows)
                for name, v in values.items():
                    full = out.setdefault(name, torch.zeros(y.shape, dtype=torch.float64, device=dev))
                    full[n, colg[t]] = v.to(full.device)
        mask = y >= 0
        return {name: v[mask] for name, v in out.items()}

    def _entry_source(self, omega, params, group, width, per_entry, num_samples):
        """A :mod:`pyro_ar.evaluation` source: row ``n * width + t`` (``per_entry``) or ``n``
        is entry t of datapoint n; utilities ``(B, K)`` at the posterior mean or ``(S, B, K)``
        under the S draws ``omega``."""
        def fn(ids):
            n = ids // width if per_entry else ids
            w = omega[n] if num_samples == 0 else omega[:, n]
            full = self.latent_utility(w, params, group, sample=num_samples > 0).full()
            if per_entry:  # (..., B, T, K): entry t of each row
                t = (ids % width).reshape((1,) * (full.dim() - 3) + (-1, 1, 1)).expand(
                    full.shape[:-2] + (1, full.shape[-1]))
                return full.gather(-2, t).squeeze(-2)
            return full.squeeze(-2)

        return evaluation.UtilitySource(fn)

    def log_likelihood(self, x, y, num_samples: int = 0, reduce: str = "mean", chunk_size=None,
                       index=None, seed: int = 0):
        """Predictive log-likelihood of the held-out entries ``y`` (same rows as ``x``, -1
        where not held out) given the observed entries ``x`` (class docstring): the mean
        over held-out entries (``reduce="mean"``), their sum, or per entry (``"none"``, the
        entries ``y >= 0`` in row-major order). ``index``: the datapoints' rows in a
        per-datapoint posterior. ``seed`` seeds the draws (the global RNG is left alone)."""
        _check_reduce(reduce)
        lp = self._predictive_pass(x, y, lambda src, lab, noise, rows: {"log_lik": evaluation.log_likelihood(
            src, lab, noise, rows=rows, reduce="none", chunk_size=chunk_size)}, num_samples, index, seed)["log_lik"]
        return _reduce(lp, reduce)

    def evaluate(self, x, y, metrics=("log_lik", "accuracy", "top5"), num_samples: int = 0,
                 reduce: str = "mean", chunk_size=None, index=None, seed: int = 0):
        """Several metrics (:func:`pyro_ar.evaluation.evaluate`) of the held-out entries ``y``
        given the observed ``x``, as :meth:`log_likelihood`."""
        _check_reduce(reduce)
        values = self._predictive_pass(x, y, lambda src, lab, noise, rows: evaluation.evaluate(
            src, lab, metrics, noise, rows=rows, reduce="none", chunk_size=chunk_size),
            num_samples, index, seed)
        return {n: _reduce(v, reduce) for n, v in values.items()}


class CategoricalLatentModel(LatentCategoricalModel):
    r"""Pyro model of sessions of items with a Gaussian latent per session (module docstring).

    :param int num_items: P, the number of categories.
    :param int latent_dim: Q.
    :param likelihood: a :class:`~pyro_ar.likelihoods.Likelihood` carrying its noise and
        negatives, or a name (``"ar"``, ``"exact"``, ``"bouchard"``, ...): that likelihood with
        the model's :attr:`likelihood_defaults` (Gumbel noise, every class, ``"shared"``
        negatives). With Bouchard's bound, :class:`~pyro_ar.likelihoods.GaussianBouchard`
        (what ``"bouchard"`` stands for here) takes the expectation over
        :math:`q(\omega_u)` analytically (Gaussian utilities, no Monte Carlo; linear utilities
        only), :class:`~pyro_ar.likelihoods.Bouchard` through the reparameterised draw of
        :math:`\omega_u`.
    :param posterior: ``"amortised"`` (a :class:`SessionEncoder` of ``hidden_dim`` units), or
        the posterior module itself: a :class:`SessionEncoder`, or a :class:`LocalPosterior`
        (per-session parameters: ``LocalPosterior(num_sessions, latent_dim, num_items)``).
    :param str utility: ``"linear"`` (:math:`\Psi\omega+\rho`) or ``"neural"``
        (:math:`\Psi\,\mathrm{MLP}(\omega)+\rho`, ``hidden_dim`` units).
    :param int hidden_dim: width of the encoder (and of the neural utility).
    :param init: an :class:`~pyro_ar.models.weights.Init`: ``scale`` (initial :math:`\Psi`
        N(0, scale^2), default 0.1) and ``bias`` (initial :math:`\rho`, a (P,) tensor, e.g.
        :func:`~pyro_ar.models.unigram_log_probs` of the item counts; None: N(0, 0.001^2)).
    :param weights: the item embeddings :math:`\Psi`: ``"map"`` (the default), point
        estimates under the prior :math:`\Psi_{pq}\sim N(0, s^2)`, or ``"mle"``, point
        estimates without a prior; a :class:`~pyro_ar.models.weights.MAP` carries ``prior_scale``
        s (None, the default: :math:`1/\sqrt{D}` with D the width of the features :math:`\Psi`
        multiplies -- Q, or ``hidden_dim`` for ``utility="neural"`` -- so that under the prior
        and :math:`\omega_u\sim N(0, I_Q)` the latent part :math:`\Psi_p\,\omega_u` of each
        utility has unit variance, linear utilities) and ``penalize_bias`` (False, the default,
        leaves the popularity offsets :math:`\rho` out of the MAP prior -- one number per item,
        fitted like an intercept; a prior around 0 would pull the unigram offsets of rare items
        up; True puts :math:`\rho_p\sim N(0, s^2)` on them as well).

    Why MAP embeddings by default: the maximum-likelihood fit overfits the :math:`P\times Q`
    embeddings when most items are rare -- on Brown sentences (26,101 words) its held-out
    log-likelihood peaks early and then falls below the popularity baseline's while the fit to
    the training sentences keeps rising, with the exact softmax as with A&R
    [claim session-longrun]. The prior is the model's own
    regulariser, estimated without bias on a uniform item subsample per step
    (:meth:`~pyro_ar.models.base.CategoricalModel.log_prior_estimate`), so a step's cost
    stays O(B (T + s) Q).

    Example:

    >>> import torch, pyro, pyro_ar as ar
    >>> from pyro_ar.models import CategoricalLatentModel
    >>> items = torch.randint(0, 500, (100, 6))            # 100 sessions of 6 items, P = 500
    >>> model = CategoricalLatentModel(500, 4, ar.likelihoods.AR(negatives=ar.SharedNegatives(20)),
    ...                                subsample_size=32)
    >>> svi = pyro.infer.SVI(model, ar.infer.default_guide(model), ar.optim.lazy_adam({"lr": 0.01}),
    ...                      ar.infer.default_elbo())
    >>> loss = svi.step(items)                             # O(B (T + s) Q), whatever P
    >>> model.scores(items[:3]).shape
    torch.Size([3, 500])
    """

    input_names = ("items", "items")
    plate_name = "sessions"

    #: the string shortcut's defaults (:meth:`~pyro_ar.models.base.CategoricalModel.likelihood_shortcuts`)
    likelihood_defaults = {"noise": "gumbel", "num_negatives": None, "strategy": "shared", "proposal": None}
    weight_choices = ("mle", "map")
    #: the fields of ``init=`` this model reads
    init_fields = ("scale", "bias")

    def __init__(self, num_items: int, latent_dim: int = 8, likelihood="ar", *,
                 posterior="amortised", utility: str = "linear", hidden_dim: int = 64, weights="map",
                 subsample_size: Optional[int] = None, sparse: bool = True, init: Optional[Init] = None,
                 prefix: str = "", site: str = "v"):
        latent_dim = check_positive_int("latent_dim", latent_dim)
        hidden_dim = check_positive_int("hidden_dim", hidden_dim)
        init = check_init(init, type(self).__name__, self.init_fields)
        # the latent part of a utility with unit prior variance; the offsets out of the prior
        self.weight_defaults = {**self.weight_defaults, "penalize_bias": False,
                                "prior_scale": 1.0 / math.sqrt(hidden_dim if utility == "neural" else latent_dim)}
        if likelihood == "bouchard":  # the seed's method: the analytic expectation over q(omega)
            lik = self.make_likelihood(likelihood, num_items, sparse=sparse)
            likelihood = GaussianBouchard(lik.a, lik.sampler, lik.sparse)
        super().__init__(num_items, likelihood, weights=weights, subsample_size=subsample_size,
                         sparse=sparse, prefix=prefix, site=site)
        self.latent_dim, self.hidden_dim = latent_dim, hidden_dim
        for name, value, allowed in (("utility", utility, ("linear", "neural")),):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {name}={value!r}")
        self.posterior = _posterior_module(posterior, num_items, latent_dim, hidden_dim, sparse)
        self.posterior_kind = "local" if isinstance(self.posterior, LocalPosterior) else "amortised"
        self.utility_kind = utility
        self.bouchard = "analytic" if isinstance(self.likelihood, GaussianBouchard) and utility == "linear" \
            else "sampled"
        self.feature_map = nn.Sequential(nn.Linear(latent_dim, hidden_dim), nn.Tanh()) \
            if utility == "neural" else None
        if init.bias is not None and tuple(init.bias.shape) != (num_items,):
            raise ValueError(f"init.bias must have shape ({num_items},), got init.bias of shape "
                             f"{tuple(init.bias.shape)}")
        self.init_scale = 0.1 if init.scale is None else init.scale
        self.init_bias = init.bias
        self.latent_site = prefix + "omega"
        #: The weight of the latent's KL term in the loss, 1 for the ELBO. :class:`~pyro_ar.infer.LatentKLWarmup`
        #: raises it from near 0 to 1, against posterior collapse.
        self.latent_kl_weight = 1.0

    # ---- CategoricalModel hooks ---------------------------------------------------------
    @property
    def num_items(self):
        return self.num_classes

    def parameter_shapes(self):
        D = self.hidden_dim if self.utility_kind == "neural" else self.latent_dim
        return {"weight": (self.num_classes, D), "bias": (self.num_classes,)}

    def init_parameter(self, name, shape, like):
        if name == "bias" and self.init_bias is not None:
            return self.init_bias.to(dtype=like.dtype, device=like.device).clone()
        scale = self.init_scale if name == "weight" else 1e-3
        return scale * torch.randn(shape, dtype=like.dtype, device=like.device)

    def log_prior_estimate(self, params):
        r"""The base class's unbiased estimate of the MAP log-prior
        (:meth:`~pyro_ar.models.base.CategoricalModel.log_prior_estimate`) over the item
        embeddings :math:`\Psi`, and over the offsets :math:`\rho` only with ``penalize_bias``.

        Example:

        >>> import torch
        >>> from pyro_ar.models import CategoricalLatentModel
        >>> model = CategoricalLatentModel(10, 4)                         # s = 1/sqrt(4)
        >>> params = {"weight": torch.zeros(10, 4), "bias": torch.full((10,), -5.0)}
        >>> lp = float(model.log_prior_estimate(params))                  # 40 entries at 0, rho left out
        >>> abs(lp - 40 * float(torch.distributions.Normal(0.0, 0.5).log_prob(torch.tensor(0.0)))) < 1e-4
        True
        """
        if not self.penalize_bias:
            params = {n: p for n, p in params.items() if n != "bias"}
        return super().log_prior_estimate(params)

    def check_inputs(self, items, y=None):
        if not isinstance(items, torch.Tensor) or items.dim() != 2 or items.is_floating_point() \
                or items.dtype == torch.bool or items.is_complex():
            raise ValueError(f"items must be a 2-D integer tensor (sessions, items) padded with -1, got "
                             f"{getattr(items, 'dtype', type(items).__name__)} {tuple(getattr(items, 'shape', ()))}")
        if items.shape[1] == 0:
            raise ValueError(f"items must have at least one item slot per session (a column), got {tuple(items.shape)}")

    def check_values(self, items, y=None, rows=None):
        """Items in [0, P) or -1 (padding), naming the first bad entry."""
        bad = (items < -1) | (items >= self.num_classes)
        if bad.any():
            raise ValueError(f"items must lie in [0, {self.num_classes}) or be -1 (padding), got "
                             f"{show(items[bad])} (the first at {first_position(bad, 'items', rows)})")

    def minibatch_utility(self, omega: torch.Tensor, params, group=None, sample: bool = True):
        """Lazy utilities of latent draws ``omega`` (..., Q): linear in ``omega`` or in its MLP
        features. ``group`` (which likelihood site, see :meth:`observation_groups`) and
        ``sample`` (draw random utilities, or give their mean to the guide) are for subclasses."""
        h = omega if self.feature_map is None else self.feature_map(omega)
        return LinearUtility(h, params["weight"], params["bias"], sparse=self.sparse)

    # ---- session metrics ----------------------------------------------------------------
    @torch.no_grad()
    def scores(self, items: torch.Tensor, num_samples: int = 0) -> torch.Tensor:
        r"""Predictive item scores (U, P) of new sessions from their observed items: the utilities
        at the posterior mean (``num_samples=0``) or the predictive log-probabilities
        :math:`\log\frac1S\sum_s p(\cdot\mid\psi(\omega_s))` over S draws of :math:`q(\omega_u)`,
        each :math:`p` the model noise's marginal (:meth:`~pyro_ar.noise.Noise.log_marginal_all`:
        the softmax for Gumbel noise)."""
        self.check_call(items)
        self.check_values(items)
        params = self.fitted_parameters()
        self._modules(items.device)
        loc, scale, _ = self.posterior(torch.arange(len(items), device=items.device), items)
        if num_samples == 0:
            return self.minibatch_utility(loc, params).full()
        omega = loc + scale * torch.randn((num_samples,) + loc.shape, dtype=loc.dtype, device=loc.device)
        logp = self.noise.log_marginal_all(self.minibatch_utility(omega, params).full())
        return logp.logsumexp(0) - math.log(num_samples)

    def evaluate_sessions(self, observed: torch.Tensor, heldout: torch.Tensor, k: int = 5,
                          num_samples: int = 0, chunk_size: int = 256) -> dict:
        """:func:`~pyro_ar.models.sessions.session_metrics` of :meth:`scores` (``num_samples`` draws of q, 0: its mean),
        the held-out log-likelihood under the model's noise: of the utilities at the mean, or
        of the predictive log-probabilities (normalised, so that any noise's marginal of them
        is not needed: their log-softmax, the Gumbel noise's, is themselves)."""
        noise = self.noise if num_samples == 0 else "gumbel"
        return session_metrics(lambda obs: self.scores(obs, num_samples), observed, heldout, k, chunk_size,
                               noise)

    def _repr_fields(self):
        return {"P": self.num_classes, "Q": self.latent_dim, "posterior": repr(self.posterior_kind)}


def _posterior_module(posterior, num_items: int, latent_dim: int, hidden_dim: int, sparse: bool) -> nn.Module:
    """The posterior module of ``posterior=``: a :class:`SessionEncoder` for ``"amortised"``,
    or the module given (a :class:`SessionEncoder` or :class:`LocalPosterior` of ``latent_dim``)."""
    if posterior == "amortised":
        return SessionEncoder(num_items, latent_dim, hidden_dim, sparse)
    if posterior == "local":
        raise ValueError("posterior='local' needs the number of sessions: pass the module, "
                         "posterior=LocalPosterior(num_sessions, latent_dim, num_items)")
    dim = posterior.latent_dim if isinstance(posterior, SessionEncoder) else \
        posterior.loc.shape[-1] if isinstance(posterior, LocalPosterior) else None
    if dim is None:
        raise ValueError(f"posterior must be 'amortised', a SessionEncoder or a LocalPosterior, got "
                         f"posterior={posterior!r}")
    if dim != latent_dim:
        raise ValueError(f"posterior has latent_dim={dim} but the model has latent_dim={latent_dim}")
    return posterior

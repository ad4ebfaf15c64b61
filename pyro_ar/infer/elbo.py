r"""The closed-form softmax bound of A&R, in Pyro's own ELBO machinery.

For softmax (Gumbel noise) and :math:`q(\varepsilon) = \mathrm{Gumbel}(\log\eta, 1)`, both
parts of the per-datapoint ELBO are analytic:

.. math::

    \mathbb{E}_q[\log\phi(\varepsilon) - \log q(\varepsilon)] = -\mathrm{KL}(q\,\|\,\phi)
        = 1 - \log\eta - 1/\eta,
    \qquad
    \mathbb{E}_q\Big[\sum_{k'\ne y}\log\Phi(\varepsilon + \psi_y - \psi_{k'})\Big]
        = -\mathbb{E}_q[e^{-\varepsilon}] \sum_{k'\ne y} e^{\psi_{k'} - \psi_y} = -S_y/\eta,

giving :math:`L(\eta) = 1 - \log\eta - (1 + S_y)/\eta \le \log p(y\mid\psi)`, tight at
:math:`\eta^* = 1 + S_y`. With :math:`S_y` replaced by its subsampled estimate
:math:`\hat S_y` the bound estimate stays unbiased (it is linear in :math:`\hat S_y`).

:class:`ClosedFormELBO` is :class:`~pyro.infer.TraceMeanField_ELBO` (analytic KL for
every guide site that has one registered, including the Gumbel noise sites) plus one
substitution: at each :class:`~pyro_ar.AugmentedCategorical` site with Gumbel noise whose
noise site's guide is Gumbel with scale 1, the Monte Carlo factor is replaced by its
expectation :math:`-\hat S_y/\eta` (:class:`GumbelExpectedFactor`). Other sites (probit,
logistic, global latents) are handled exactly as ``TraceMeanField_ELBO`` does; with
``gaussian_nodes`` set, an :class:`~pyro_ar.AugmentedCategorical` factor of any other noise
whose noise site's guide is a Gumbel :math:`\mathrm{Gumbel}(m, s)` (the conditional local
guides of probit and logistic models) or a Gaussian :math:`N(m, s^2)` is replaced by its
expectation under q on q's Gauss rule (:class:`GumbelQExpectedFactor`,
:class:`GaussianExpectedFactor`): the Monte Carlo draw of :math:`\varepsilon` no longer adds
to the gradient's variance (issue 27). During
``loss_and_grads`` (i.e. ``SVI.step``), after the gradient is computed with
:math:`\eta` fixed, the guide's natural-gradient step
:math:`\eta_n \leftarrow (1-\rho)\eta_n + \rho(1 + \hat S_{y_n})` is applied with the same
class subsample (see :class:`~pyro_ar.infer.GumbelLocalGuide`).
"""

import torch

import pyro.poutine as poutine
from pyro.distributions import ExpandedDistribution, Gumbel, Independent
from pyro.infer import TraceMeanField_ELBO
from pyro.infer.util import is_validation_enabled
from pyro.poutine.messenger import Messenger
from pyro.poutine.util import site_is_subsample
from pyro.util import check_model_guide_match, check_site_shape

from ..distributions import (AugmentedCategorical, FastGumbel, GaussianExpectedFactor, GumbelExpectedFactor,  # noqa: F401
                             GumbelQExpectedFactor)
from ..distributions.augmented import LocalStep, site_record
from ..distributions.expected_factor import optimal_log_eta
from ..numerics import check_int
from .compiled import compiled_loss_and_grads
from .local_fit import unit_gumbel_optimum

__all__ = ["ClosedFormELBO"]


def _unwrap(fn):
    while isinstance(fn, (Independent, ExpandedDistribution)):
        fn = fn.base_dist
    return fn


def _gumbel_unit_scale(fn):
    fn = _unwrap(fn)
    return isinstance(fn, Gumbel) and bool((fn.scale == 1).all())


#: q's family -> the factor in expectation under it, for a noise without a closed form
_QUADRATURE_FACTORS = {torch.distributions.Normal: GaussianExpectedFactor, torch.distributions.Gumbel: GumbelQExpectedFactor}

_NO_RECORD = LocalStep()  # a guide that says nothing: check the scale, no natural step


class _ExpectedFactorMessenger(Messenger):
    """Replaces A&R factors by their expectation under q: closed form for softmax with a unit
    Gumbel q, Gauss-Hermite quadrature for a Gaussian q (``gaussian_nodes``; None: left alone)."""

    def __init__(self, guide_trace, updating=False, gaussian_nodes=None):
        super().__init__()
        self.guide_trace = guide_trace
        self.updating = updating
        self.gaussian_nodes = gaussian_nodes
        self.noise_sites = set()  # noise sites of the factors replaced in closed form

    def _pyro_sample(self, msg):
        fn = msg["fn"]
        if not (isinstance(fn, AugmentedCategorical) and msg["is_observed"]
                and fn.eps_site in self.guide_trace.nodes):
            return
        node = self.guide_trace.nodes[fn.eps_site]
        guide_fn = node["fn"]
        if not unit_gumbel_optimum(fn.noise):
            q = _unwrap(guide_fn)
            factor = next((f for family, f in _QUADRATURE_FACTORS.items() if isinstance(q, family)), None)
            if self.gaussian_nodes is not None and factor is not None:
                shape = fn.batch_shape
                msg["fn"] = factor(fn, q.loc.expand(shape), q.scale.expand(shape), self.gaussian_nodes)
            return
        record = site_record(node, LocalStep) or _NO_RECORD
        # GumbelLocalGuide marks its sites (no check of the scale tensor: a device sync)
        if record.unit_gumbel or _gumbel_unit_scale(guide_fn):
            local_step = record.natural_step if self.updating and record.local_first else None
            msg["fn"] = GumbelExpectedFactor(fn, _unwrap(guide_fn).loc.expand(fn.batch_shape), local_step)
            self.noise_sites.add(fn.eps_site)


def _prune_subsample_sites(trace):
    """``pyro.poutine.util.prune_subsample_sites`` without the copy of the trace."""
    for name in [name for name, site in trace.nodes.items() if site_is_subsample(site)]:
        trace.remove_node(name)


def _kl_only_sites(names, model_trace, guide_trace):
    """Noise sites whose term ``TraceMeanField_ELBO`` takes from the registered Gumbel--Gumbel
    KL divergence: their log-densities and score parts are never read."""
    return {n for n in names if n in model_trace.nodes and not model_trace.nodes[n]["is_observed"]
            and isinstance(model_trace.nodes[n]["fn"], Gumbel)
            and isinstance(guide_trace.nodes[n]["fn"], Gumbel)}


class ClosedFormELBO(TraceMeanField_ELBO):
    r"""``TraceMeanField_ELBO`` with the A&R softmax bound in closed form and the natural eta step.

    Use it with :class:`~pyro_ar.infer.GumbelLocalGuide` for Algorithm 1 of Ruiz et al.
    (2018) inside ``pyro.infer.SVI``. It accepts every model/guide ``TraceMeanField_ELBO``
    accepts; sites it cannot treat in closed form are estimated as there.

    :param bool local_updates: apply the guides' natural-gradient steps during
        ``loss_and_grads`` (``SVI.step``); ``loss`` / ``evaluate_loss`` never update.
    :param gaussian_nodes: nodes of the expectation of a non-Gumbel factor under a Gumbel or a
        Gaussian q, on q's Gauss rule (:class:`~pyro_ar.distributions.GumbelQExpectedFactor`, at
        most 20 nodes; :class:`~pyro_ar.distributions.GaussianExpectedFactor`, 16 are accurate to
        about 1e-6 per term, fewer less so); None (default) keeps ``TraceMeanField_ELBO``'s single
        Monte Carlo draw of :math:`\varepsilon`. The factor then costs ``gaussian_nodes``
        evaluations of :math:`\log\Phi` per class term: cheap beside the local fit at tens of
        negatives (the probit hidden teacher, s = 10, is fitted with 16 nodes
        [claim probit-gap]), but at Brown's 256 negatives 16 nodes make a probit step several
        times dearer in CPU time, so it is not the default (issue 27).
    :param bool compiled: ``loss_and_grads`` (``SVI.step``) of the library's own A&R softmax
        model with its :class:`~pyro_ar.infer.GumbelLocalGuide` runs without traces, with the
        same loss, gradients and eta step (:mod:`pyro_ar.infer.compiled`, issue 37; user models
        and guides, Pyro handlers around the step and validation take the traced path).
        False: always traced.

    ``vectorize_particles=True`` with ``num_particles > 1`` is refused at construction
    (``ValueError``); ``num_particles > 1`` in a loop works.

    Example:

    >>> import torch, pyro, pyro.distributions as dist
    >>> import pyro_ar as ar
    >>> from pyro_ar.infer import ClosedFormELBO
    >>> psi = torch.tensor([1.0, 0.0, -1.0], dtype=torch.float64)
    >>> model = lambda: ar.sample_categorical("y", psi, obs=torch.tensor(0))
    >>> S = (psi[1:] - psi[0]).exp().sum()               # eta* = 1 + S makes the bound tight
    >>> guide = lambda: pyro.sample("y_eps", dist.Gumbel(torch.log1p(S), torch.tensor(1.0, dtype=torch.float64)))
    >>> bound = -ClosedFormELBO(local_updates=False, max_plate_nesting=0).loss(model, guide)
    >>> abs(bound - torch.log_softmax(psi, -1)[0].item()) < 1e-12
    True
    """

    def __init__(self, *args, local_updates=True, gaussian_nodes=None, compiled=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.compiled = bool(compiled)
        if gaussian_nodes is not None:
            gaussian_nodes = check_int("gaussian_nodes", gaussian_nodes, low=1)
        self.gaussian_nodes = gaussian_nodes
        if self.vectorize_particles and self.num_particles > 1:
            # the natural step updates one eta per datapoint from one class subsample; a
            # particle dimension would give it num_particles candidate updates per row
            raise ValueError(
                f"ClosedFormELBO does not support vectorize_particles=True with num_particles="
                f"{self.num_particles} > 1: its natural eta step needs one draw per datapoint. Use "
                "vectorize_particles=False (particles in a loop), or num_particles=1 (the softmax "
                "factor is already in closed form, so extra particles only average global latents)"
            )
        self.local_updates = local_updates
        self._updating = False

    def _get_trace(self, model, guide, args, kwargs):
        guide_trace = poutine.trace(guide, graph_type="flat").get_trace(*args, **kwargs)
        messenger = _ExpectedFactorMessenger(guide_trace, self._updating, self.gaussian_nodes)
        model_trace = poutine.trace(poutine.replay(messenger(model), trace=guide_trace),
                                    graph_type="flat").get_trace(*args, **kwargs)
        validating = is_validation_enabled()
        if validating:
            check_model_guide_match(model_trace, guide_trace, self.max_plate_nesting)
        _prune_subsample_sites(guide_trace)  # (in place: these traces are this call's own)
        _prune_subsample_sites(model_trace)
        # without validation (which checks every site's log_prob shape), the densities of
        # the KL-only noise sites are not computed: nothing reads them
        skip = set() if validating else _kl_only_sites(messenger.noise_sites, model_trace, guide_trace)
        model_trace.compute_log_prob(site_filter=lambda name, site: name not in skip)
        if self._updating:
            self._local_first_guide_sites(model_trace, guide_trace)
        if not skip or any(site["type"] == "sample" and name not in skip
                           for name, site in guide_trace.nodes.items()):
            guide_trace.compute_score_parts()
        if validating:
            for site in list(model_trace.nodes.values()) + list(guide_trace.nodes.values()):
                if site["type"] == "sample":
                    check_site_shape(site, self.max_plate_nesting)
        if self._updating:
            self._natural_steps(model_trace, guide_trace)
        return model_trace, guide_trace

    @staticmethod
    def _local_first_guide_sites(model_trace, guide_trace):
        """Local-first sites: q(eps) is now Gumbel(updated log eta, 1), for the KL term too."""
        for site in model_trace.nodes.values():
            fn = site.get("fn")
            if site["type"] != "sample" or not isinstance(fn, GumbelExpectedFactor) \
                    or fn.updated_log_eta is None:
                continue
            node = guide_trace.nodes[fn.base.eps_site]
            loc = fn.updated_log_eta.reshape(node["fn"].batch_shape)
            node["fn"] = FastGumbel(loc, 1.0)

    @staticmethod
    def _natural_steps(model_trace, guide_trace):
        for site in model_trace.nodes.values():
            fn = site.get("fn")
            if site["type"] != "sample" or not isinstance(fn, GumbelExpectedFactor) \
                    or fn.local_step is not None:  # local-first: already stepped
                continue
            step = (site_record(guide_trace.nodes[fn.base.eps_site], LocalStep) or _NO_RECORD).natural_step
            if step is not None and fn.last_log_s is not None:
                step(optimal_log_eta(fn.last_log_s))  # eta~ = 1 + S_hat, in log space

    def loss_and_grads(self, model, guide, *args, **kwargs):
        if self.compiled and self.local_updates:
            loss = compiled_loss_and_grads(self, model, guide, args, kwargs)
            if loss is not None:
                return loss
        self._updating = self.local_updates
        try:
            return super().loss_and_grads(model, guide, *args, **kwargs)
        finally:
            self._updating = False

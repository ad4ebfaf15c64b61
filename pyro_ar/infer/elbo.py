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
logistic, global latents) are handled exactly as ``TraceMeanField_ELBO`` does. During
``loss_and_grads`` (i.e. ``SVI.step``), after the gradient is computed with
:math:`\eta` fixed, the guide's natural-gradient step
:math:`\eta_n \leftarrow (1-\rho)\eta_n + \rho(1 + \hat S_{y_n})` is applied with the same
class subsample (see :class:`~pyro_ar.infer.GumbelLocalGuide`).
"""

import torch
from torch.distributions import constraints
from torch.distributions.utils import broadcast_all, lazy_property

import pyro.poutine as poutine
from pyro.distributions import ExpandedDistribution, Gumbel, Independent
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.infer import TraceMeanField_ELBO
from pyro.infer.util import is_validation_enabled
from pyro.poutine.messenger import Messenger
from pyro.poutine.util import prune_subsample_sites
from pyro.util import check_model_guide_match, check_site_shape

from ..distributions import AugmentedCategorical
from ..noise import GumbelNoise

__all__ = ["ClosedFormELBO", "GumbelExpectedFactor", "FastGumbel"]


class FastGumbel(Gumbel):
    r"""``pyro.distributions.Gumbel`` built in O(1) Python work.

    torch's Gumbel is a ``TransformedDistribution``: every construction builds a Uniform
    base and four transforms, which costs more than the rest of a local guide's step. This
    subclass stores ``loc`` and ``scale`` only, samples by inversion
    (:math:`\mathrm{loc} - \mathrm{scale}\,\log(-\log u)`, the same law), and builds the
    base distribution and transforms only if something asks for them (e.g. ``cdf``). It is a
    ``Gumbel`` for ``isinstance`` and for the registered Gumbel--Gumbel KL divergence.

    Example:

    >>> import torch
    >>> from pyro_ar.infer.elbo import FastGumbel
    >>> from pyro.distributions import Gumbel
    >>> loc, scale, x = torch.tensor([0.5]), torch.tensor([1.0]), torch.tensor([0.3])
    >>> torch.allclose(FastGumbel(loc, scale).log_prob(x), Gumbel(loc, scale).log_prob(x))
    True
    """

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        TorchDistribution.__init__(self, self.loc.shape, torch.Size(), validate_args=validate_args)

    @lazy_property
    def _transformed(self):
        return Gumbel(self.loc, self.scale, validate_args=False)

    @property
    def base_dist(self):
        return self._transformed.base_dist

    @property
    def transforms(self):
        return self._transformed.transforms

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(FastGumbel, _instance)
        batch_shape = torch.Size(batch_shape)
        new.loc, new.scale = self.loc.expand(batch_shape), self.scale.expand(batch_shape)
        TorchDistribution.__init__(new, batch_shape, torch.Size(), validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        finfo = torch.finfo(self.loc.dtype)
        u = torch.rand(shape, dtype=self.loc.dtype, device=self.loc.device).clamp_(finfo.tiny, 1 - finfo.eps)
        return self.loc - self.scale * torch.log(-torch.log(u))

    def sample(self, sample_shape=torch.Size()):
        with torch.no_grad():
            return self.rsample(sample_shape)


class GumbelExpectedFactor(TorchDistribution):
    r"""Expectation of an A&R softmax factor under :math:`q(\varepsilon) = \mathrm{Gumbel}(\log\eta, 1)`.

    ``log_prob(y)`` :math:`= -\exp(\log\hat S_y - \log\eta)`, with :math:`\hat S_y` from a
    fresh class subsample of the wrapped :class:`~pyro_ar.AugmentedCategorical`. The last
    :math:`\log\hat S_y` is kept (detached) for the natural-gradient eta step.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.infer import GumbelExpectedFactor
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> base = ar.AugmentedCategorical(psi, torch.zeros(1, dtype=torch.float64))
    >>> f = GumbelExpectedFactor(base, torch.zeros(1, dtype=torch.float64))   # log eta = 0
    >>> S = (psi[0, 1:] - psi[0, 0]).exp().sum()
    >>> torch.allclose(f.log_prob(torch.tensor([0])), -S)                      # -S / eta
    True
    """

    arg_constraints = {}

    def __init__(self, base: AugmentedCategorical, log_eta: torch.Tensor, local_step=None):
        self.base, self.log_eta = base, log_eta
        self.last_log_s = None
        # local-first mode (Algorithm 1 of Ruiz et al.: E step, then M step): a callable
        # log_eta_target -> updated log_eta, applied before the factor is evaluated
        self.local_step = local_step
        self.updated_log_eta = None
        super().__init__(base.batch_shape, validate_args=False)

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return self.base.support

    def expand(self, batch_shape, _instance=None):
        return GumbelExpectedFactor(self.base.expand(batch_shape), self.log_eta.expand(batch_shape))

    def sample(self, sample_shape=torch.Size()):
        return self.base.sample(sample_shape)

    def log_prob(self, value):
        log_s = self.base.log_sum_exp_negatives(value)
        self.last_log_s = log_s.detach()
        log_eta = self.log_eta
        if self.local_step is not None:
            # eta~ = 1 + S_hat (log space), natural step first, then the bound at the new eta
            log_eta = self.local_step(torch.logaddexp(torch.zeros_like(self.last_log_s), self.last_log_s))
            log_eta = log_eta.to(log_s.dtype).expand(log_s.shape)
            self.updated_log_eta = log_eta
        return -torch.exp(log_s - log_eta)


def _unwrap(fn):
    while isinstance(fn, (Independent, ExpandedDistribution)):
        fn = fn.base_dist
    return fn


def _gumbel_unit_scale(fn):
    fn = _unwrap(fn)
    return isinstance(fn, Gumbel) and bool((fn.scale == 1).all())


class _ExpectedFactorMessenger(Messenger):
    """Replaces closed-form-eligible A&R softmax factors by their expectation under q."""

    def __init__(self, guide_trace, updating=False):
        super().__init__()
        self.guide_trace = guide_trace
        self.updating = updating

    def _pyro_sample(self, msg):
        fn = msg["fn"]
        if not (isinstance(fn, AugmentedCategorical) and isinstance(fn.noise, GumbelNoise)
                and msg["is_observed"] and fn.eps_site in self.guide_trace.nodes):
            return
        node = self.guide_trace.nodes[fn.eps_site]
        guide_fn = node["fn"]
        # GumbelLocalGuide marks its sites (no check of the scale tensor: a device sync)
        if node["infer"].get("ar_unit_gumbel") or _gumbel_unit_scale(guide_fn):
            local_step = None
            if self.updating and node["infer"].get("ar_local_first"):
                local_step = node["infer"].get("ar_natural_step")
            msg["fn"] = GumbelExpectedFactor(fn, _unwrap(guide_fn).loc.expand(fn.batch_shape), local_step)


class ClosedFormELBO(TraceMeanField_ELBO):
    r"""``TraceMeanField_ELBO`` with the A&R softmax bound in closed form and the natural eta step.

    Use it with :class:`~pyro_ar.infer.GumbelLocalGuide` for Algorithm 1 of Ruiz et al.
    (2018) inside ``pyro.infer.SVI``. It accepts every model/guide ``TraceMeanField_ELBO``
    accepts; sites it cannot treat in closed form are estimated as there.

    :param bool local_updates: apply the guides' natural-gradient steps during
        ``loss_and_grads`` (``SVI.step``); ``loss`` / ``evaluate_loss`` never update.

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

    def __init__(self, *args, local_updates=True, **kwargs):
        super().__init__(*args, **kwargs)
        self.local_updates = local_updates
        self._updating = False

    def _get_trace(self, model, guide, args, kwargs):
        guide_trace = poutine.trace(guide, graph_type="flat").get_trace(*args, **kwargs)
        model = _ExpectedFactorMessenger(guide_trace, self._updating)(model)
        model_trace = poutine.trace(poutine.replay(model, trace=guide_trace),
                                    graph_type="flat").get_trace(*args, **kwargs)
        if is_validation_enabled():
            check_model_guide_match(model_trace, guide_trace, self.max_plate_nesting)
        guide_trace = prune_subsample_sites(guide_trace)
        model_trace = prune_subsample_sites(model_trace)
        model_trace.compute_log_prob()
        if self._updating:
            self._local_first_guide_sites(model_trace, guide_trace)
        guide_trace.compute_score_parts()
        if is_validation_enabled():
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
            node["fn"] = FastGumbel(loc, torch.ones_like(loc))

    @staticmethod
    def _natural_steps(model_trace, guide_trace):
        for site in model_trace.nodes.values():
            fn = site.get("fn")
            if site["type"] != "sample" or not isinstance(fn, GumbelExpectedFactor) \
                    or fn.local_step is not None:  # local-first: already stepped
                continue
            step = guide_trace.nodes[fn.base.eps_site]["infer"].get("ar_natural_step")
            if step is not None and fn.last_log_s is not None:
                # eta~ = 1 + S_hat, in log space
                step(torch.logaddexp(torch.zeros_like(fn.last_log_s), fn.last_log_s))

    def loss_and_grads(self, model, guide, *args, **kwargs):
        self._updating = self.local_updates
        try:
            return super().loss_and_grads(model, guide, *args, **kwargs)
        finally:
            self._updating = False

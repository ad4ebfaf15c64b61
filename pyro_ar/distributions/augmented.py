r"""The augmented likelihood of A&R, with a subsampled ``log_prob``, and its two Pyro sites.

With the observed class's noise :math:`\varepsilon` made explicit, the categorical
:math:`y = \arg\max_k(\psi_k + \varepsilon_k)` has the augmented joint (eq. 6 of Ruiz et al. 2018)

.. math::

    \log p(y, \varepsilon \mid \psi) = \log\phi(\varepsilon)
        + \underbrace{\sum_{k' \ne y} \log\Phi(\varepsilon + \psi_y - \psi_{k'})}_{
          \texttt{AugmentedCategorical(psi, eps).log\_prob(y)}},

a sum over classes (a :class:`~pyro_ar.distributions.ClassSumLikelihood`) whose ``log_prob``
is an unbiased estimate from a fresh class subsample at every call
(:mod:`pyro_ar.negatives`). The :math:`\log\phi(\varepsilon)` term belongs to the noise
sample site, whose prior is ``noise.distribution()``; :func:`sample_categorical` emits both
sites in one line of a Pyro model.

The components that meet at the noise site talk through typed records under one ``infer``
key, :data:`INFER_KEY`: the model side marks the site with a :class:`NoiseSite` (found by
:func:`pyro_ar.infer.is_noise_site` and the local guides), and a local guide marks its
:math:`q(\varepsilon)` site with a :class:`LocalStep` (read by
:class:`pyro_ar.infer.ClosedFormELBO`). Both are defined here, below the inference layer,
so that models and guides import them alike.
"""

import dataclasses
import functools
import math
from typing import Callable, Dict, Optional, Tuple, Union

import torch
from torch.distributions import constraints

import pyro
from pyro.distributions import Gumbel
from pyro.distributions.util import broadcast_shape

from ..negatives import MOVED_KEYWORDS
from ..numerics import keyword_names, reject_moved_keywords
from ..noise import GumbelNoise, Noise, get_noise
from ..utility import Utility, as_utility
from .categorical import UtilityCategorical
from .class_sum import ClassSumLikelihood, masked_weighted_sum
from .noise_distribution import FastGumbel

__all__ = ["AugmentedCategorical", "sample_categorical", "NoiseSite", "LocalStep", "INFER_KEY",
           "site_record"]

#: The one ``infer`` key of a noise site (model side: a :class:`NoiseSite`; guide side: a
#: :class:`LocalStep`).
INFER_KEY = "pyro_ar"


@dataclasses.dataclass(frozen=True)
class NoiseSite:
    r"""What the model says about a noise site: ``infer={INFER_KEY: NoiseSite(...)}``.

    :param noise: the :class:`~pyro_ar.noise.Noise` of the utility model (prior :math:`\phi`).
    :param str label_site: name of the label site whose factor uses this noise.
    :param num_classes: K (None if unknown).

    Example:

    >>> import torch, pyro.poutine as poutine
    >>> import pyro_ar as ar
    >>> from pyro_ar.distributions.augmented import NoiseSite, site_record
    >>> tr = poutine.trace(lambda: ar.sample_categorical("y", torch.zeros(2, 5), obs=torch.tensor([0, 1]))).get_trace()
    >>> rec = site_record(tr.nodes["y_eps"], NoiseSite)
    >>> rec.noise.name, rec.label_site, rec.num_classes
    ('gumbel', 'y', 5)
    """

    noise: object
    label_site: str
    num_classes: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class LocalStep:
    r"""What a local guide says about its :math:`q(\varepsilon)` site: ``infer={INFER_KEY: LocalStep(...)}``.

    :param bool unit_gumbel: q is :math:`\mathrm{Gumbel}(\cdot, 1)` by construction (so the
        ELBO need not check the scale tensor: a device sync).
    :param natural_step: ``log_eta_target -> updated log_eta`` for the minibatch's rows, the
        closed-form natural-gradient step that :class:`~pyro_ar.infer.ClosedFormELBO` applies
        (None: q's parameters are trained by the optimizer only).
    :param bool local_first: apply ``natural_step`` before the gradient step (Algorithm 1
        of Ruiz et al. 2018) rather than after it.

    Example:

    >>> from pyro_ar.distributions.augmented import INFER_KEY, LocalStep, site_record
    >>> site = {"type": "sample", "infer": {INFER_KEY: LocalStep(unit_gumbel=True)}}
    >>> site_record(site, LocalStep)
    LocalStep(unit_gumbel=True, natural_step=None, local_first=False)
    """

    unit_gumbel: bool = False
    natural_step: Optional[Callable] = None
    local_first: bool = False


def site_record(msg: Dict, kind: type) -> Optional[object]:
    """The record of type ``kind`` (:class:`NoiseSite` or :class:`LocalStep`) a Pyro
    message or trace node carries under :data:`INFER_KEY`, or None.

    Example:

    >>> from pyro_ar.distributions.augmented import LocalStep, NoiseSite, site_record
    >>> site_record({"type": "sample", "infer": {}}, NoiseSite) is None
    True
    """
    rec = (msg.get("infer") or {}).get(INFER_KEY)
    return rec if isinstance(rec, kind) else None


class AugmentedCategorical(ClassSumLikelihood):
    r"""The y-given-eps factor of the augmented model, with a subsampled ``log_prob``.

    .. math::

        \texttt{log\_prob}(y) \approx \sum_{k'\ne y}\log\Phi(\varepsilon + \psi_y - \psi_{k'}),

    an unbiased estimate from a fresh class subsample at every call (exact when
    ``negatives`` is None or at least :math:`K-1` classes). Together with the prior
    :math:`\varepsilon\sim\phi` of the noise site it gives the augmented joint
    :math:`\log p(y, \varepsilon\mid\psi)` whose integral over :math:`\varepsilon` is the
    marginal :class:`~pyro_ar.UtilityCategorical`. It is a likelihood factor for observed
    labels, not a normalised distribution over y given eps: :meth:`sample` is not defined
    (draw from :class:`~pyro_ar.UtilityCategorical`, which :func:`sample_categorical` does
    when ``obs`` is None).

    Example::

        W, b = torch.randn(10_000, 64), torch.zeros(10_000)
        psi = LinearUtility(x, W, b)                          # nothing of size B x K
        eps = pyro.sample("eps", dist.Gumbel(0., 1.).expand([len(x)]))
        pyro.sample("y", AugmentedCategorical(psi, eps, negatives=20), obs=y)

    :param utility: tensor ``batch_shape + (K,)`` or a :class:`~pyro_ar.utility.Utility`.
    :param eps: noise of the observed class, broadcastable to the utility's batch shape.
    :param noise: name or :class:`~pyro_ar.noise.Noise`.
    :param negatives: None (every class, exact), an int s (s classes per datapoint,
        uniform), a :class:`~pyro_ar.negatives.NegativeSampler` (``SharedNegatives(s)``,
        ``ImportanceNegatives(s, proposal)``, ...) or a fixed
        :class:`~pyro_ar.negatives.Negatives` draw (e.g. when the model already drew them to
        sample only those rows); see :class:`~pyro_ar.distributions.ClassSumLikelihood`.
    :param str eps_site: name of the sample site that produced ``eps`` (set by
        :func:`sample_categorical`; lets :class:`pyro_ar.infer.ClosedFormELBO` find the guide).

    ``infer_shapes(utility=..., eps=...)`` broadcasts ``utility[:-1]`` with ``eps``.

    Example:

    >>> import torch, pyro_ar as ar
    >>> psi, eps, y = torch.randn(4, 1000), torch.zeros(4), torch.tensor([0, 1, 2, 3])
    >>> full = ar.AugmentedCategorical(psi, eps).log_prob(y)                    # sum over 999 classes
    >>> est = ar.AugmentedCategorical(psi, eps, negatives=20).log_prob(y)       # unbiased, 20 classes
    >>> full.shape, est.shape
    (torch.Size([4]), torch.Size([4]))
    """

    arg_constraints = {"utility": constraints.real_vector, "eps": constraints.real}
    _expand_attrs = {"psi": 1, "eps": 0}

    def __init__(self, utility: Union[torch.Tensor, Utility], eps: torch.Tensor,
                 noise: Union[str, Noise] = "gumbel", negatives=None, *, eps_site: Optional[str] = None,
                 validate_args: Optional[bool] = None) -> None:
        self._setup(utility, negatives)
        self.eps_site = eps_site
        self.noise = get_noise(noise)
        if not isinstance(eps, torch.Tensor):
            raise ValueError(f"eps must be a tensor, got {eps!r}")
        try:
            batch_shape = broadcast_shape(self.psi.batch_shape, eps.shape)
        except ValueError:
            raise ValueError(
                f"eps of shape {tuple(eps.shape)} does not broadcast with the utility's batch "
                f"shape {tuple(self.psi.batch_shape)}"
            ) from None
        self.eps = eps
        self._init_shape(batch_shape, validate_args)

    def utility_differences(self, value: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        r"""Subsampled differences :math:`d_j = \psi_y - \psi_{k'_j}` and their weights :math:`a_j`.

        Draws a fresh class subsample (unless the negatives are a fixed draw) and returns
        ``(d, a)`` with ``d`` of shape ``broadcast(value, batch_shape) + (s,)`` and ``a``
        broadcastable to it (zero where :math:`k'_j = y`).
        """
        g = self.gather_utilities(value)
        return g.label - g.negatives, g.weight

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        g = self.gather_utilities(value)
        # (eps + psi_y) - psi_k'_j: the noise added on the (batch, 1) side, one (batch, s) difference
        x = (self.eps.unsqueeze(-1) + g.label) - g.negatives
        return masked_weighted_sum(self.noise.log_cdf, x, g.weight)

    def log_sum_exp_negatives(self, value: torch.Tensor) -> torch.Tensor:
        r""":math:`\log \hat S_y`, the log of the subsampled :math:`\sum_{k'\ne y} e^{\psi_{k'} - \psi_y}`.

        For Gumbel noise :math:`\log\Phi(\varepsilon + d) = -e^{-\varepsilon} e^{-d}`, so the
        factor is linear in :math:`e^{-\varepsilon}` and its expectation under
        :math:`q = \mathrm{Gumbel}(\log\eta, 1)` is :math:`-\hat S_y/\eta` (closed form, see
        :class:`pyro_ar.infer.ClosedFormELBO`). Computed in log space, so no overflow; a
        subsample holding only the label gives :math:`-\infty` with zero (not NaN) gradients.
        """
        g = self.gather_utilities(value)
        # log a_j + psi_k'_j - psi_y where a_j > 0; -inf where a_j = 0 (the label itself)
        x = g.sample.log_weights(g.label.dtype) + (g.negatives - g.label)
        if g.sample.nonempty:  # every row has a finite term (the guard below changes nothing)
            return x.logsumexp(-1)
        # a row without any other class is all -inf: clamped to the lowest finite value its
        # gradient is 0 instead of NaN (clamped entries pass none), then log S_hat = -inf
        lowest = torch.finfo(x.dtype).min
        log_s = x.clamp(min=lowest).logsumexp(-1)
        return log_s.masked_fill(log_s <= lowest, -math.inf)  # (no data-dependent branch)

    def __repr__(self):
        return (f"AugmentedCategorical(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, noise={self.noise.name!r}, sampler={self.sampler!r})")


_PRIOR_CACHE = {}
_PRIOR_CACHE_SIZE = 32


def _noise_prior(nz, dtype, device, batch_shape):
    """``nz.distribution(0, 1).expand(batch_shape)``, built once per (noise, dtype, device,
    batch shape, validation flag): distributions are immutable, and building one (a torch
    Gumbel is a TransformedDistribution) costs more than the rest of a small model step.
    A Gumbel prior is a :class:`~pyro_ar.distributions.FastGumbel` (the same distribution):
    ``pyro.plate`` re-expands every site's distribution at every call."""
    ident = nz.cache_key
    key = (type(nz), ident if ident is not None else id(nz), dtype, device, tuple(batch_shape),
           torch.distributions.Distribution._validate_args)
    hit = _PRIOR_CACHE.get(key)
    if hit is not None and (ident is not None or hit[0] is nz):
        return hit[1]
    zero = torch.zeros((), dtype=dtype, device=device)
    if type(nz).distribution is GumbelNoise.distribution:  # what the lines below make of its torch
        # Gumbel(0, 1), without building that TransformedDistribution (its first construction in a
        # process imports torch.fx's symbolic shapes and sympy: about a CPU second)
        prior = FastGumbel(zero, 1.0)
    else:
        prior = nz.distribution(zero, torch.ones_like(zero))
    if type(prior) is Gumbel:  # the same law, with an O(1) expand (each plate expands its sites)
        # (a scale of 1, read once per cache entry, given as the number: the KL to a unit q
        # then takes FastGumbel's closed form)
        prior = FastGumbel(prior.loc, 1.0 if bool((prior.scale == 1).all()) else prior.scale)
    prior = prior.expand(batch_shape)
    if len(_PRIOR_CACHE) >= _PRIOR_CACHE_SIZE:
        _PRIOR_CACHE.pop(next(iter(_PRIOR_CACHE)))
    _PRIOR_CACHE[key] = (nz, prior)
    return prior


def _one_way(fn):
    """``fn`` with a former negatives keyword a ``TypeError`` naming its replacement
    (:data:`~pyro_ar.negatives.MOVED_KEYWORDS`), as the distributions' constructors."""
    accepted = keyword_names(fn)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        reject_moved_keywords(fn.__name__, kwargs, MOVED_KEYWORDS, accepted)
        return fn(*args, **kwargs)
    return wrapper


@_one_way
def sample_categorical(name: str, utility: Union[torch.Tensor, Utility], obs: Optional[torch.Tensor] = None,
                       noise: Union[str, Noise] = "gumbel", negatives=None) -> torch.Tensor:
    r"""Emit the augmented model's two sites in a Pyro model.

    * ``f"{name}_eps"`` -- the observed class's noise, prior :math:`\phi` (``noise.distribution()``),
      to be matched by a local guide (see :mod:`pyro_ar.infer`);
    * ``name`` -- :class:`AugmentedCategorical` observed at ``obs``. With ``obs=None``
      the labels are drawn from the marginal :class:`~pyro_ar.UtilityCategorical` instead, so
      that ``Predictive`` produces labels (this needs all K utilities).

    Call it inside the data plate(s); batch dims come from the utility's batch shape.

    Example::

        with pyro.plate("data", N, subsample_size=256) as idx:
            psi = LinearUtility(x[idx], W, b)
            sample_categorical("y", psi, obs=y[idx], noise="normal", negatives=20)

    :param negatives: as :class:`AugmentedCategorical` takes them (None: every class; an int s;
        a :class:`~pyro_ar.negatives.NegativeSampler`; a fixed draw).
    :returns: the labels (``obs`` when given).

    Example:

    >>> import torch, pyro, pyro.poutine as poutine
    >>> import pyro_ar as ar
    >>> def model(psi, y):
    ...     with pyro.plate("data", len(y)):
    ...         ar.sample_categorical("y", psi, obs=y, negatives=5)
    >>> tr = poutine.trace(model).get_trace(torch.randn(3, 100), torch.tensor([1, 2, 3]))
    >>> [n for n, s in tr.nodes.items() if s["type"] == "sample"]   # plate, noise, label
    ['data', 'y_eps', 'y']
    """
    psi = as_utility(utility)
    nz = get_noise(noise)
    eps_site = f"{name}_eps"
    prior = _noise_prior(nz, psi.dtype, psi.device, psi.batch_shape)
    eps = pyro.sample(eps_site, prior, infer={INFER_KEY: NoiseSite(nz, name, psi.num_classes)})
    if obs is None:
        return pyro.sample(name, UtilityCategorical(psi.full(), nz))
    d = AugmentedCategorical(psi, eps, nz, negatives, eps_site=eps_site)
    return pyro.sample(name, d, obs=obs)

r"""Categorical likelihoods as configured objects that any model plugs in.

A model computes mean utilities :math:`\psi_n` for its minibatch and hands them, with the
observed labels, to its likelihood object, which emits the Pyro sample site(s):

* :class:`AR` -- Augment & Reduce: emits the label's noise :math:`\varepsilon_n` (site
  ``"<site>_eps"``, prior :math:`\phi`, a local latent variable) and the y-given-eps factor
  of the augmented model (eq. 6), :math:`\sum_{k\ne y}\log\Phi(\varepsilon+\psi_y-\psi_k)`,
  its class sum subsampled without bias;
* :class:`Exact` -- :math:`\log p(y\mid\psi)` over all K classes (log-softmax for Gumbel
  noise, quadrature otherwise);
* :class:`OVE` -- :math:`\sum_{k\ne y}\log\sigma(\psi_y-\psi_k)`, subsampled (a lower bound);
* :class:`Sampled` -- the sampled softmax (Botev et al. 2017; biased);
* :class:`Bouchard` -- :math:`\psi_y-a-\sum_k\log(1+e^{\psi_k-a})`, subsampled (a lower
  bound; :math:`a_n` a per-datapoint parameter or its optimum).

``negatives`` is None (every class: the exact class sum), an int s (s classes per datapoint,
uniform) or a :class:`~pyro_ar.negatives.NegativeSampler` such as
``SharedNegatives(64)`` or ``ImportanceNegatives(256, proposal)``, read by
:func:`~pyro_ar.negatives.as_negative_sampler` as the distributions read theirs. Strings remain as a thin
map for scripts: :func:`get_likelihood` (``"ar"``, ``"exact"``, ``"ove"``, ``"sampled"``,
``"bouchard"``).

Example:

>>> from pyro_ar.likelihoods import AR, OVE
>>> from pyro_ar.negatives import SharedNegatives
>>> AR("normal", negatives=SharedNegatives(64))
AR(noise='normal', negatives=SharedNegatives(num_negatives=64))
>>> OVE(negatives=20)
OVE(negatives=PerDatapointNegatives(num_negatives=20))
"""

import math
from typing import NamedTuple, Optional

import torch

import pyro

from .distributions import (
    AugmentedCategorical,
    BouchardBound,
    OVECategorical,
    SampledSoftmax,
    UtilityCategorical,
    sample_categorical,
)
from .negatives import MOVED_KEYWORDS, as_negative_sampler, get_negative_sampler
from .noise import Noise, get_noise
from .numerics import keyword_names, reject_moved_keywords

__all__ = [
    "DataSubsample",
    "Likelihood",
    "AR",
    "Exact",
    "OVE",
    "Sampled",
    "Bouchard",
    "get_likelihood",
    "DEFAULT",
    "GaussianUtility",
    "JaakkolaJordan",
    "GaussianBouchard",
    "LocalReparameterization",
]


class DataSubsample(NamedTuple):
    """The data plate of one step as a likelihood sees it: the subsample ``index`` (B,)
    into the ``size`` training datapoints (``index`` is None when the plate is full).

    Example:

    >>> import torch
    >>> from pyro_ar.likelihoods import DataSubsample
    >>> DataSubsample(torch.tensor([4, 1]), 10).size
    10
    """

    index: Optional[torch.Tensor]
    size: int


class Likelihood:
    """Base class: a categorical likelihood over K classes, configured once, used by any model.

    Subclasses implement :meth:`sample`; the class-sum baselines only name their distribution
    class (:attr:`distribution_class`). ``noise`` is the noise of the utility model whose
    labels are predicted (Gumbel for the softmax baselines).

    Example:

    >>> from pyro_ar.likelihoods import Exact
    >>> Exact().noise.name
    'gumbel'
    """

    #: whether the likelihood has a per-datapoint latent variable (needs a local guide)
    has_local_latent = False
    #: the class-sum distribution of :mod:`pyro_ar.distributions` (baselines)
    distribution_class = None

    def __new__(cls, *args, **kwargs):
        """Name where a former negatives keyword (``num_negatives``, ``strategy``,
        ``proposal``: :data:`pyro_ar.negatives.MOVED_KEYWORDS`) went, for a likelihood that takes
        ``negatives`` (before ``__init__`` would reject it with Python's bare "unexpected keyword")."""
        accepted = keyword_names(cls.__init__)
        if kwargs and "negatives" in accepted:
            reject_moved_keywords(cls.__name__, kwargs, MOVED_KEYWORDS, accepted)
        return super().__new__(cls)

    def __init__(self, noise="gumbel", negatives=None):
        self.noise: Noise = get_noise(noise)
        self.sampler = as_negative_sampler(negatives)

    @property
    def num_negatives(self) -> Optional[int]:
        return self.sampler.num_negatives

    def check(self, num_classes: int):
        """Raise ValueError if this likelihood cannot serve ``num_classes`` classes."""
        s = self.num_negatives
        if s is not None and self.sampler.strategy != "importance" and s > num_classes - 1:
            raise ValueError(f"num_negatives={s} exceeds num_classes - 1 = {num_classes - 1}")
        K = getattr(self.sampler, "num_classes", num_classes)
        if K != num_classes:
            raise ValueError(f"the negatives' proposal is over {K} classes but the model has "
                             f"num_classes={num_classes}")

    def sample(self, site: str, utility, obs: Optional[torch.Tensor], data: DataSubsample):
        """Emit the site(s) of this likelihood inside the data plate; return the labels.

        With ``obs=None`` labels are drawn from the marginal (for ``Predictive``)."""
        if obs is None:
            return pyro.sample(site, UtilityCategorical(utility.full(), self.noise))
        return pyro.sample(site, self.distribution(utility, data), obs=obs)

    def distribution(self, utility, data: DataSubsample):
        """The likelihood factor of the minibatch's labels (class-sum baselines)."""
        return self.distribution_class(utility, self.sampler)

    def bound(self, utility: torch.Tensor, labels: torch.Tensor, **fitted):
        r"""The objective this likelihood trains on, evaluated over **all** K classes (no class
        subsampling) at fitted local parameters, per datapoint: ``(values, variance)``, both of
        shape ``labels.shape``; ``variance`` is the Monte Carlo variance of a stochastic
        evaluation (None when exact). Used by :func:`pyro_ar.metrics.bound`.

        Keyword arguments (the fitted local parameters a likelihood may use, per datapoint):
        ``log_eta``, ``loc``, ``scale`` (:class:`AR`), ``a`` (:class:`Bouchard`),
        ``num_samples`` and ``generator`` (Monte Carlo). Default: the class-sum distribution
        with every class.
        """
        if self.distribution_class is None:
            raise NotImplementedError(f"{self!r} has no bound to evaluate")
        return self.distribution_class(utility, validate_args=False).log_prob(labels), None

    def __repr__(self):
        return f"{type(self).__name__}(negatives={self.sampler!r})"


class AR(Likelihood):
    r"""Augment & Reduce: the augmented model with noise ``noise`` and subsampled class sum.

    Emits ``"<site>_eps"`` (the label's noise, prior :math:`\phi`; guide it with a local
    guide, see :func:`pyro_ar.infer.default_guide`) and ``site``
    (:class:`~pyro_ar.AugmentedCategorical`).

    Example:

    >>> from pyro_ar.likelihoods import AR
    >>> AR().has_local_latent, AR("probit").noise.name
    (True, 'normal')
    """

    has_local_latent = True

    def sample(self, site, utility, obs, data):
        return sample_categorical(site, utility, obs=obs, noise=self.noise, negatives=self.sampler)

    def distribution(self, utility, data):
        raise NotImplementedError("AR's factor needs the noise site: use AR.sample")

    def bound(self, utility, labels, log_eta=None, loc=None, scale=None, num_samples=64,
              generator=None, **fitted):
        r"""The A&R bound with every class, at the fitted local :math:`q(\varepsilon_n)`.

        * closed-form noise (Gumbel): :math:`1 - \log\eta - (1 + S_y)/\eta` at ``log_eta``,
          :math:`S_y = \sum_{k\ne y} e^{\psi_k-\psi_y}`, :math:`1 + S_y = 1/p(y\mid\psi)` (the noise's
          :meth:`~pyro_ar.noise.Noise.log_marginal`); with ``log_eta=None`` the optimal
          :math:`\eta^* = 1 + S_y`, where it equals :math:`\log p(y\mid\psi)`;
        * any other noise: :meth:`monte_carlo_bound` at ``loc``, ``scale`` (the generic path,
          which the closed form overrides; for Gumbel noise it agrees with the closed form at
          ``loc = log_eta``, ``scale = 1`` within its standard error).
        """
        nz = self.noise
        if not nz.closed_form:
            return self.monte_carlo_bound(utility, labels, loc, scale, num_samples, generator)
        log_p = nz.log_marginal(utility, labels)                         # -log(1 + S_y)
        if log_eta is None:
            return log_p, None
        le = log_eta.to(utility.dtype)
        return 1.0 - le - torch.exp(-log_p - le), None

    def monte_carlo_bound(self, utility, labels, loc, scale, num_samples=64, generator=None):
        r""":math:`\mathbb{E}_q[\log\phi(\varepsilon) + \sum_{k\ne y}\log\Phi(\varepsilon+\psi_y-\psi_k)
        - \log q(\varepsilon)]` for :math:`q = \text{noise}(loc, scale)`, any noise, averaged over
        ``num_samples`` inversion draws (:meth:`~pyro_ar.noise.Noise.icdf`) from ``generator``:
        ``(mean, variance of the mean)`` per datapoint."""
        nz = self.noise
        if loc is None or scale is None:
            raise ValueError("bound: the A&R bound of a non-Gumbel noise needs the local q's loc and scale")
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 2:
            raise ValueError(f"bound: num_samples must be an integer >= 2 (the standard error needs two "
                             f"draws), got num_samples={num_samples!r}")
        q = nz.distribution(loc.to(utility.dtype), scale.to(utility.dtype))
        # inversion draws from a CPU generator: the same draws whatever the device of q
        u = torch.rand((num_samples,) + q.batch_shape, generator=generator, dtype=torch.float64)
        std = nz.icdf(u.clamp(1e-12, 1 - 1e-12))
        eps = q.loc + q.scale * std.to(dtype=utility.dtype, device=q.loc.device)
        factor = AugmentedCategorical(utility, eps, nz, validate_args=False).log_prob(labels)
        draws = nz.log_density(eps) + factor - q.log_prob(eps)         # (S, B)
        return draws.mean(0), draws.var(0) / num_samples

    def __repr__(self):
        return f"AR(noise={self.noise.name!r}, negatives={self.sampler!r})"


class Exact(Likelihood):
    r"""The exact categorical :math:`p(y\mid\psi)` over all K classes (O(K) per datapoint).

    With ``choice_sets`` (a :class:`~pyro_ar.label_sets.ChoiceSets` over the training
    datapoints; Gumbel noise) datapoint i is the choice of its label among its choice set: the
    softmax over it (label-set pairs: a row's other positives leave the normaliser).

    Example:

    >>> import math, torch
    >>> from pyro_ar.likelihoods import Exact, DataSubsample
    >>> from pyro_ar.utility import DenseUtility
    >>> d = Exact().distribution(DenseUtility(torch.zeros(2, 4)), DataSubsample(None, 2))
    >>> torch.allclose(d.log_prob(torch.tensor([0, 3])), torch.tensor(-math.log(4)))
    True
    """

    def __init__(self, noise="gumbel", choice_sets=None):
        super().__init__(noise, None)
        if choice_sets is not None and not self.noise.closed_form:
            raise ValueError(f"Exact(choice_sets=...) needs Gumbel noise (the softmax over a choice set), "
                             f"got noise={self.noise.name!r}")
        self.choice_sets = choice_sets

    def distribution(self, utility, data):
        # the model's (lazy) utility: materialised once, checked through the B log-probabilities
        # (O(B)) rather than all B x K values (see UtilityCategorical)
        if self.choice_sets is not None:  # (the classes out of each datapoint's choice set: -inf)
            utility = self.choice_sets.masked(utility, torch.arange(data.size) if data.index is None else data.index)
        return UtilityCategorical(utility, self.noise)

    def bound(self, utility, labels, **fitted):
        r""":math:`\log p(y\mid\psi)` itself (the exact objective)."""
        return UtilityCategorical(utility, self.noise, validate_args=False).log_prob(labels), None

    def __repr__(self):
        sets = "" if self.choice_sets is None else f", choice_sets={self.choice_sets!r}"
        return f"Exact(noise={self.noise.name!r}{sets})"


class _SoftmaxBaseline(Likelihood):
    """A softmax baseline whose factor is a class-sum distribution of :mod:`pyro_ar.distributions`."""

    def __init__(self, negatives=None):
        super().__init__("gumbel", negatives)


class OVE(_SoftmaxBaseline):
    r"""One-vs-each bound on the softmax (Titsias 2016), class sum subsampled.

    Example:

    >>> from pyro_ar.likelihoods import OVE
    >>> OVE(negatives=5).num_negatives
    5
    """

    distribution_class = OVECategorical


class Sampled(_SoftmaxBaseline):
    r"""Sampled softmax (Botev et al. 2017): biased, neither a bound nor unbiased.

    Example:

    >>> from pyro_ar.likelihoods import Sampled
    >>> Sampled().distribution_class.__name__
    'SampledSoftmax'
    """

    distribution_class = SampledSoftmax

    def bound(self, utility, labels, **fitted):
        raise ValueError("bound: the sampled softmax ('sampled') is biased, not a bound")


class Bouchard(_SoftmaxBaseline):
    r"""Bouchard's (2007) bound on the softmax, class sum subsampled.

    :param str a: ``"local"`` -- a per-datapoint parameter :math:`a_n` (``pyro.param``
        ``"<site>_bouchard_a"`` of shape (N,), initialised at :math:`\log(K-1)`, gathered
        for the minibatch with sparse gradients when ``sparse``); ``"optimal"`` -- recomputed
        from all K utilities at every step (O(K), the tightest bound).

    Example:

    >>> from pyro_ar.likelihoods import Bouchard
    >>> Bouchard(a="optimal", negatives=5)
    Bouchard(a='optimal', negatives=PerDatapointNegatives(num_negatives=5))
    """

    def __init__(self, a: str = "local", negatives=None, sparse: bool = True):
        if a not in ("local", "optimal"):
            raise ValueError(f"a must be 'local' or 'optimal', got a={a!r}")
        super().__init__(negatives)
        self.a, self.sparse = a, bool(sparse)

    distribution_class = BouchardBound

    def distribution(self, utility, data, site="y"):
        cls = self.distribution_class
        if self.a == "optimal":
            return cls(utility, negatives=self.sampler)
        K = utility.num_classes
        a = pyro.param(f"{site}_bouchard_a", lambda: torch.full(
            (data.size,), math.log(K - 1), dtype=utility.dtype, device=utility.device))
        if a.shape != (data.size,):
            raise ValueError(f"the Bouchard parameters a_n were created for {a.shape[0]} datapoints, "
                             f"got {data.size} (one a_n per training datapoint)")
        if data.index is not None:
            a = torch.gather(a, 0, data.index, sparse_grad=self.sparse)
        return cls(utility, a=a, negatives=self.sampler)

    def sample(self, site, utility, obs, data):
        if obs is None:
            return super().sample(site, utility, obs, data)
        return pyro.sample(site, self.distribution(utility, data, site), obs=obs)

    def bound(self, utility, labels, a=None, **fitted):
        """The bound at the fitted ``a`` (per datapoint), at the optimal :math:`a` when None."""
        return self.distribution_class(utility, a=a, validate_args=False).log_prob(labels), None

    def __repr__(self):
        return f"Bouchard(a={self.a!r}, negatives={self.sampler!r})"


_NAMES = {"ar": AR, "exact": Exact, "ove": OVE, "sampled": Sampled,
          "bouchard": Bouchard}


class _Default:
    """The type of :data:`DEFAULT` (one instance, kept by pickling and copying)."""

    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self):
        return "default"

    def __reduce__(self):
        return (_Default, ())


#: "The default" -- a keyword left at this value was not set by the caller (e.g. ``noise`` of
#: :func:`pyro_ar.metrics.bound`, which is an error beside a likelihood object). It shows as
#: ``default`` in signatures.
DEFAULT = _Default()


def get_likelihood(likelihood="ar", noise="gumbel", num_negatives: Optional[int] = None,
                   strategy="per_datapoint", proposal=None, **kwargs) -> Likelihood:
    """A :class:`Likelihood` from a name and the classic keyword arguments (a Likelihood
    passes through). The thin map for scripts and for the models' string shortcuts.
    ``kwargs`` go to the softmax baselines' constructors (e.g. ``a``, ``sparse`` of
    :class:`Bouchard`); ``"ar"`` and ``"exact"`` take none. ``"exact"`` sums every class:
    it has no negatives (``num_negatives``, ``strategy``, ``proposal`` are not used).

    Example:

    >>> from pyro_ar.likelihoods import get_likelihood
    >>> get_likelihood("ar", "normal", 20, "shared")
    AR(noise='normal', negatives=SharedNegatives(num_negatives=20))
    """
    if isinstance(likelihood, Likelihood):
        return likelihood
    if likelihood not in _NAMES:
        raise ValueError(f"unknown likelihood={likelihood!r}; expected a pyro_ar.likelihoods."
                         f"Likelihood or one of {sorted(_NAMES)}")
    cls = _NAMES[likelihood]
    if kwargs and cls in (AR, Exact):
        raise ValueError(f"likelihood={likelihood!r} takes no further arguments, got "
                         + ", ".join(f"{k}={v!r}" for k, v in kwargs.items()))
    if cls is Exact:
        return Exact(noise)
    sampler = get_negative_sampler(strategy, num_negatives, proposal)
    if cls is AR:
        return AR(noise, sampler)
    if not get_noise(noise).closed_form:  # the baselines are softmax models
        raise ValueError(f"likelihood={likelihood!r} is a softmax baseline; it needs noise='gumbel', "
                         f"got noise={get_noise(noise).name!r}")
    return cls(negatives=sampler, **kwargs)


# ------------------------------------------------------------------------------------------
# Bayesian output layers: Gaussian utilities and analytic bounds (seeds/002, section 2)
# ------------------------------------------------------------------------------------------


class GaussianUtility:
    r"""Independent Gaussian utilities :math:`\psi_{nk}\sim N(m_{nk}, v_{nk})`: what a
    Bayesian output layer with a mean-field Gaussian posterior
    :math:`w_k\sim N(\mu_k, \mathrm{diag}\,\sigma_k^2)` gives on features :math:`h_n`
    (:math:`m_{nk} = h_n\cdot\mu_k + \mu_{b_k}`, :math:`v_{nk} = h_n^2\cdot\sigma_k^2 + \sigma_{b_k}^2`).

    :param mean: the means, a :class:`~pyro_ar.utility.Utility` (lazy or dense) or a tensor.
    :param var: the variances over the same classes, same forms.

    Example:

    >>> import torch
    >>> from pyro_ar.likelihoods import GaussianUtility
    >>> u = GaussianUtility(torch.zeros(3, 4), torch.ones(3, 4))
    >>> u.num_classes, tuple(u.batch_shape)
    (4, (3,))
    """

    gaussian = True

    def __init__(self, mean, var):
        from .utility import as_utility

        self.mean, self.var = as_utility(mean), as_utility(var)
        if self.var.num_classes != self.mean.num_classes:
            raise ValueError(f"var is over {self.var.num_classes} classes but mean over "
                             f"{self.mean.num_classes}")
        self.num_classes, self.batch_shape = self.mean.num_classes, self.mean.batch_shape
        self.dtype, self.device = self.mean.dtype, self.mean.device

    def __repr__(self):
        return f"GaussianUtility(batch_shape={tuple(self.batch_shape)}, num_classes={self.num_classes})"


def _mean_and_var(utility):
    """(mean, var) of a :class:`GaussianUtility`; (utility, None) for point utilities."""
    from .utility import as_utility

    if isinstance(utility, GaussianUtility):
        return utility.mean, utility.var
    return as_utility(utility), None


class JaakkolaJordan(Likelihood):
    r"""Binary (K = 2) logistic likelihood with the Jaakkola--Jordan bound for Gaussian utilities.

    The logit is :math:`t = \psi_1 - \psi_0` (so the model is the 2-class softmax). With
    point utilities the factor is the exact :math:`\log\sigma(\pm t)`; with a
    :class:`GaussianUtility` (:math:`t\sim N(m_1-m_0, v_0+v_1)`) it is the analytic lower bound
    :class:`~pyro_ar.distributions.JaakkolaJordanBernoulli` on :math:`\mathbb{E}_q\log p(y\mid t)`
    with :math:`\xi_n` at its closed-form (EM) update :math:`\sqrt{m^2+v}`: a deterministic
    objective for plain SGD (seeds/002 section 2; no Monte Carlo).

    Example:

    >>> import torch
    >>> from pyro_ar.likelihoods import DataSubsample, GaussianUtility, JaakkolaJordan
    >>> import pyro.poutine as poutine
    >>> psi = GaussianUtility(torch.tensor([[0.0, 1.0]]), torch.tensor([[0.5, 0.5]]))
    >>> tr = poutine.trace(JaakkolaJordan().sample).get_trace("y", psi, torch.tensor([1]), DataSubsample(None, 1))
    >>> bool(tr.log_prob_sum() < torch.nn.functional.logsigmoid(torch.tensor(1.0)))   # below log sigma(E t)
    True
    """

    gaussian_utilities = True

    def __init__(self):
        super().__init__("gumbel", None)

    def check(self, num_classes: int):
        if num_classes != 2:
            raise ValueError(f"JaakkolaJordan is a binary likelihood: it needs num_classes=2, "
                             f"got num_classes={num_classes}")

    def sample(self, site, utility, obs, data):
        from .distributions import JaakkolaJordanBernoulli

        mean, var = _mean_and_var(utility)
        if obs is None:
            return super().sample(site, mean, obs, data)
        both = torch.arange(2, device=mean.device)
        m = mean.gather_shared(both)
        t = m[..., 1] - m[..., 0]
        v = 0.0 if var is None else var.gather_shared(both).sum(-1)
        return pyro.sample(site, JaakkolaJordanBernoulli(t, v), obs=obs.to(t.dtype))

    def bound(self, utility, labels, **fitted):
        r"""The bound of point utilities ``(..., 2)``: :math:`t = \psi_1 - \psi_0` with no variance,
        at the optimal :math:`\xi = |t|`, where it is exact (:math:`\log\sigma(\pm t)`)."""
        from .distributions import JaakkolaJordanBernoulli

        t = utility[..., 1] - utility[..., 0]
        return JaakkolaJordanBernoulli(t, 0.0).log_prob(labels.to(t.dtype)), None

    def __repr__(self):
        return "JaakkolaJordan()"


class GaussianBouchard(Bouchard):
    r""":class:`Bouchard`'s bound for Gaussian utilities: the multiclass analytic bound of seeds/002.

    With a :class:`GaussianUtility` every :math:`\mathbb{E}\log(1+e^{\psi_k-a})` is bounded by
    Jaakkola--Jordan at :math:`\xi_k=\sqrt{(m_k-a)^2+v_k}` (closed form), so
    :math:`\mathbb{E}_q\log p(y\mid\psi)\ge m_y - a - \sum_k[\dots]` has no Monte Carlo; the
    class sum is subsampled without bias (``negatives``), ``a`` as in :class:`Bouchard`.
    Point utilities give :class:`Bouchard`'s bound.

    Example:

    >>> from pyro_ar.likelihoods import GaussianBouchard
    >>> GaussianBouchard(negatives=10)
    GaussianBouchard(a='local', negatives=PerDatapointNegatives(num_negatives=10))
    """

    gaussian_utilities = True

    def distribution(self, utility, data, site="y"):
        mean, var = _mean_and_var(utility)
        d = super().distribution(mean, data, site)
        if var is None:
            return d
        return self.distribution_class(mean, a=d.a, negatives=self.sampler, utility_var=var)

    def sample(self, site, utility, obs, data):
        if obs is None:
            return Likelihood.sample(self, site, _mean_and_var(utility)[0], obs, data)
        return super().sample(site, utility, obs, data)

    def __repr__(self):
        return "Gaussian" + super().__repr__()


class LocalReparameterization(Likelihood):
    r"""The local reparameterisation trick (Kingma et al. 2015) around any likelihood.

    For a :class:`GaussianUtility` it draws :math:`\psi = m + \sqrt v\odot z`,
    :math:`z\sim N(0, I)` (reparameterised, one draw per step) and hands it to ``base``:
    an unbiased Monte Carlo estimate of :math:`\mathbb{E}_q[\text{base factor}]`. All K
    utilities are drawn (O(K) per datapoint). Point utilities go to ``base`` unchanged.

    :param base: the likelihood of the sampled utilities (default :class:`Exact`).

    Example:

    >>> from pyro_ar.likelihoods import LocalReparameterization
    >>> LocalReparameterization()
    LocalReparameterization(base=Exact(noise='gumbel'))
    """

    gaussian_utilities = True

    def __init__(self, base: Optional[Likelihood] = None):
        self.base = Exact() if base is None else base
        if not isinstance(self.base, Likelihood) or self.base.has_local_latent:
            raise ValueError(f"base must be a Likelihood without local latent variables, got base={base!r}")
        self.noise, self.sampler = self.base.noise, self.base.sampler

    def check(self, num_classes: int):
        self.base.check(num_classes)

    def sample(self, site, utility, obs, data):
        from .utility import DenseUtility

        mean, var = _mean_and_var(utility)
        if var is None or obs is None:
            return self.base.sample(site, mean, obs, data)
        m = mean.full()
        psi = m + var.full().sqrt() * torch.randn_like(m)
        return self.base.sample(site, DenseUtility(psi), obs, data)

    def bound(self, utility, labels, **fitted):
        """The base's bound: point utilities have no variance to draw from."""
        return self.base.bound(utility, labels, **fitted)

    def __repr__(self):
        return f"LocalReparameterization(base={self.base!r})"

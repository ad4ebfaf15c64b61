r"""The categorical in utility form, and the augmented likelihood with a subsampled log_prob.

* :class:`UtilityCategorical` -- the marginal :math:`p(y \mid \psi)` of
  :math:`y = \arg\max_k(\psi_k + \varepsilon_k)` (eq. 5): log-softmax for Gumbel noise,
  quadrature (:mod:`pyro_ar.quadrature`) for any other noise.
* :class:`AugmentedCategorical` -- the y-given-eps factor of the augmented joint (eq. 6),

  .. math::

      \log p(y, \varepsilon \mid \psi) = \log\phi(\varepsilon)
          + \underbrace{\sum_{k' \ne y} \log\Phi(\varepsilon + \psi_y - \psi_{k'})}_{
            \texttt{AugmentedCategorical(psi, eps).log\_prob(y)}},

  whose ``log_prob`` is an unbiased estimate of the sum from a fresh class subsample at
  every call (:mod:`pyro_ar.negatives`). The :math:`\log\phi(\varepsilon)` term belongs
  to the noise sample site, whose prior is ``noise.distribution()``.
* :func:`sample_categorical` -- emits both sites in one line of a Pyro model.
"""

from typing import Optional

import torch
from torch.distributions import constraints

import pyro
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from .negatives import Negatives, get_negative_sampler
from .noise import GumbelNoise, LogisticNoise, NormalNoise, get_noise
from .quadrature import DEFAULT_NUM_NODES, log_marginal, log_marginal_all
from .utility import DenseUtility, as_utility

__all__ = ["UtilityCategorical", "AugmentedCategorical", "sample_categorical", "check_labels"]


def _show(t: torch.Tensor, n=5):
    return t.reshape(-1)[:n].tolist()


def check_labels(value: torch.Tensor, num_classes: int, batch_shape, name="value") -> torch.Tensor:
    """Validate class labels and return them as int64.

    :raises ValueError: when ``value`` is not integer-valued, lies outside
        ``[0, num_classes)``, or does not broadcast with ``batch_shape``.

    Example:

    >>> import torch
    >>> from pyro_ar.distributions import check_labels
    >>> check_labels(torch.tensor([0, 2]), 3, torch.Size([2])).dtype
    torch.int64
    >>> check_labels(torch.tensor([0, 3]), 3, torch.Size([2]))
    Traceback (most recent call last):
    ...
    ValueError: ...
    """
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a tensor of class labels, got {value!r}")
    if value.is_complex() or value.dtype == torch.bool:
        raise ValueError(f"{name} must hold integer class labels, got dtype={value.dtype}")
    # (one reduction per check; the offending values are only gathered to report them)
    if value.is_floating_point():
        nonint = value != value.floor()  # NaN and inf are caught here too
        if nonint.any():
            raise ValueError(f"{name} must hold integer class labels, got non-integers {_show(value[nonint])}")
    outside = (value < 0) | (value >= num_classes)
    if outside.any():
        raise ValueError(f"{name} must lie in [0, {num_classes}), got {_show(value[outside])}")
    try:
        broadcast_shape(value.shape, batch_shape)
    except ValueError:
        raise ValueError(
            f"{name} of shape {tuple(value.shape)} does not broadcast with batch_shape "
            f"{tuple(batch_shape)}"
        ) from None
    return value.long()


def _check_finite(t: torch.Tensor, name: str):
    if not torch.isfinite(t).all():
        raise ValueError(f"{name} must be finite, got non-finite values {_show(t[~torch.isfinite(t)])}")


class UtilityCategorical(TorchDistribution):
    r"""Marginal categorical of the random-utility model :math:`y = \arg\max_k(\psi_k + \varepsilon_k)`.

    .. math::  p(y=k\mid\psi) = \int \phi(e)\prod_{k'\ne k}\Phi(e + \psi_k - \psi_{k'})\,de,

    which is :math:`\mathrm{softmax}(\psi)_k` for Gumbel noise and is computed by
    quadrature (:func:`pyro_ar.quadrature.log_marginal`) otherwise.

    Example::

        psi = torch.randn(100, 5)
        d = UtilityCategorical(psi, noise="normal")       # multinomial probit
        y = d.sample()                                    # argmax of psi + noise
        d.log_prob(y)                                     # exact (quadrature), shape (100,)

    :param utility: mean utilities, tensor ``batch_shape + (K,)`` (or a
        :class:`~pyro_ar.utility.Utility`, of which all K utilities are used).
    :param noise: ``"gumbel"``, ``"normal"``, ``"logistic"`` or a :class:`~pyro_ar.noise.Noise`.
    :param str method: ``"auto"`` (closed form for Gumbel, quadrature otherwise) or
        ``"quadrature"`` (always).
    :param int num_nodes: initial number of quadrature nodes.

    Example:

    >>> import torch, pyro_ar as ar
    >>> psi = torch.tensor([2.0, 0.0, -1.0], dtype=torch.float64)
    >>> torch.allclose(ar.UtilityCategorical(psi).probs, psi.softmax(-1))     # Gumbel noise
    True
    >>> p = ar.UtilityCategorical(psi, "normal").probs                          # probit, quadrature
    >>> round(p.sum().item(), 12), p.argmax().item()
    (1.0, 0)
    """

    arg_constraints = {}
    has_enumerate_support = True

    def __init__(self, utility, noise="gumbel", method="auto", num_nodes=DEFAULT_NUM_NODES,
                 validate_args=None):
        utility = as_utility(utility).full() if not isinstance(utility, torch.Tensor) else utility
        self.noise = get_noise(noise)
        if method not in ("auto", "quadrature"):
            raise ValueError(f"method must be 'auto' or 'quadrature', got {method!r}")
        self.method, self.num_nodes = method, num_nodes
        self.utility = DenseUtility(utility).logits
        if self.utility.shape[-1] < 2:
            raise ValueError(f"utility needs at least 2 classes, got shape {tuple(utility.shape)}")
        super().__init__(self.utility.shape[:-1], validate_args=validate_args)
        if self._validate_args:
            _check_finite(self.utility, "utility")

    @property
    def num_classes(self):
        return self.utility.shape[-1]

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.num_classes - 1)

    @property
    def _closed_form(self):
        return self.method == "auto" and isinstance(self.noise, GumbelNoise)

    @property
    def logits(self):
        """Normalised log-probabilities of every class, ``batch_shape + (K,)``."""
        if self._closed_form:
            return self.utility.log_softmax(-1)
        return log_marginal_all(self.utility, self.noise, self.num_nodes)

    @property
    def probs(self):
        return self.logits.exp()

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(UtilityCategorical, _instance)
        batch_shape = torch.Size(batch_shape)
        new.noise, new.method, new.num_nodes = self.noise, self.method, self.num_nodes
        new.utility = self.utility.expand(batch_shape + (self.num_classes,))
        super(UtilityCategorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=torch.Size()):
        shape = torch.Size(sample_shape) + self.utility.shape
        with torch.no_grad():
            eps = self.noise.sample(shape, dtype=self.utility.dtype, device=self.utility.device)
            return (self.utility + eps).argmax(-1)

    def log_prob(self, value):
        if self._validate_args:
            value = check_labels(value, self.num_classes, self.batch_shape)
        value = value.long()
        if self._closed_form:
            shape = broadcast_shape(value.shape, self.batch_shape)
            logp = self.utility.log_softmax(-1).expand(shape + (self.num_classes,))
            return logp.gather(-1, value.expand(shape).unsqueeze(-1)).squeeze(-1)
        return log_marginal(self.utility, value, self.noise, self.num_nodes)

    def enumerate_support(self, expand=True):
        values = torch.arange(self.num_classes, device=self.utility.device)
        values = values.view((-1,) + (1,) * len(self.batch_shape))
        return values.expand((-1,) + self.batch_shape) if expand else values

    def __repr__(self):
        return (f"UtilityCategorical(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, noise={self.noise.name!r})")


class AugmentedCategorical(TorchDistribution):
    r"""The y-given-eps factor of the augmented model, with a subsampled ``log_prob``.

    .. math::

        \texttt{log\_prob}(y) \approx \sum_{k'\ne y}\log\Phi(\varepsilon + \psi_y - \psi_{k'}),

    an unbiased estimate from a fresh class subsample at every call (exact when
    ``num_negatives`` is None or :math:`\ge K-1`). Together with the prior
    :math:`\varepsilon\sim\phi` of the noise site it gives the augmented joint
    :math:`\log p(y, \varepsilon\mid\psi)` whose integral over :math:`\varepsilon` is the
    marginal :class:`UtilityCategorical`. It is a likelihood factor for observed labels,
    not a normalised distribution over y given eps: :meth:`sample` is not defined (draw
    from :class:`UtilityCategorical`, which :func:`sample_categorical` does when
    ``obs`` is None).

    Example::

        W, b = torch.randn(10_000, 64), torch.zeros(10_000)
        psi = LinearUtility(x, W, b)                          # nothing of size B x K
        eps = pyro.sample("eps", dist.Gumbel(0., 1.).expand([len(x)]))
        pyro.sample("y", AugmentedCategorical(psi, eps, num_negatives=20), obs=y)

    :param utility: tensor ``batch_shape + (K,)`` or a :class:`~pyro_ar.utility.Utility`.
    :param eps: noise of the observed class, broadcastable to the utility's batch shape.
    :param noise: name or :class:`~pyro_ar.noise.Noise`.
    :param num_negatives: classes per estimate (None: all, exact).
    :param strategy: ``"per_datapoint"``, ``"shared"``, ``"importance"`` or a
        :class:`~pyro_ar.negatives.NegativeSampler`.
    :param proposal: class weights for ``strategy="importance"``.
    :param negatives: fixed :class:`~pyro_ar.negatives.Negatives` to use instead of
        sampling (e.g. when the model already drew them to sample only those rows).
    :param str eps_site: name of the sample site that produced ``eps`` (set by
        :func:`sample_categorical`; lets :class:`pyro_ar.infer.ClosedFormELBO` find the guide).

    Example:

    >>> import torch, pyro_ar as ar
    >>> psi, eps, y = torch.randn(4, 1000), torch.zeros(4), torch.tensor([0, 1, 2, 3])
    >>> full = ar.AugmentedCategorical(psi, eps).log_prob(y)                    # sum over 999 classes
    >>> est = ar.AugmentedCategorical(psi, eps, num_negatives=20).log_prob(y)   # unbiased, 20 classes
    >>> full.shape, est.shape
    (torch.Size([4]), torch.Size([4]))
    """

    arg_constraints = {}

    def __init__(self, utility, eps, noise="gumbel", num_negatives: Optional[int] = None,
                 strategy="per_datapoint", proposal=None, negatives: Optional[Negatives] = None,
                 eps_site: Optional[str] = None, validate_args=None):
        self.psi = as_utility(utility)
        self.eps_site = eps_site
        self.noise = get_noise(noise)
        self.sampler = get_negative_sampler(strategy, num_negatives, proposal)
        self.negatives = negatives
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
        K = self.psi.num_classes
        if K < 2:
            raise ValueError(f"utility needs at least 2 classes, got num_classes={K}")
        if getattr(self.sampler, "num_classes", K) != K:
            raise ValueError(
                f"proposal is over {self.sampler.num_classes} classes but the utility has "
                f"num_classes={K}"
            )
        super().__init__(batch_shape, validate_args=validate_args)
        if self._validate_args:
            _check_finite(eps, "eps")
            if isinstance(self.psi, DenseUtility):
                _check_finite(self.psi.logits, "utility")

    @property
    def num_classes(self):
        return self.psi.num_classes

    @constraints.dependent_property(is_discrete=True, event_dim=0)
    def support(self):
        return constraints.integer_interval(0, self.num_classes - 1)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(AugmentedCategorical, _instance)
        batch_shape = torch.Size(batch_shape)
        new.psi = self.psi.expand(batch_shape)
        new.eps = self.eps.expand(batch_shape)
        new.noise, new.sampler, new.negatives = self.noise, self.sampler, self.negatives
        new.eps_site = self.eps_site
        super(AugmentedCategorical, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def sample(self, sample_shape=torch.Size()):
        raise NotImplementedError(
            "AugmentedCategorical is a likelihood factor for observed labels; sample labels "
            "from UtilityCategorical (pyro_ar.sample_categorical does so when obs is None)"
        )

    def utility_differences(self, value):
        r"""Subsampled differences :math:`d_j = \psi_y - \psi_{k'_j}` and their weights :math:`a_j`.

        Draws a fresh class subsample (unless ``negatives`` were fixed) and returns
        ``(d, a)`` with ``d`` of shape ``broadcast(value, batch_shape) + (s,)`` and ``a``
        broadcastable to it (zero where :math:`k'_j = y`).
        """
        if self._validate_args:
            value = check_labels(value, self.num_classes, self.batch_shape)
        labels = value.long().expand(broadcast_shape(value.shape, self.batch_shape))
        neg = self.negatives if self.negatives is not None else self.sampler(labels, self.num_classes)
        if neg.shared:  # one gather of the label and negative rows (one matrix product)
            psi_y, psi_neg = self.psi.gather_label_and_shared(labels, neg.index)
        else:
            psi_y = self.psi.gather(labels.unsqueeze(-1))                    # shape + (1,)
            psi_neg = self.psi.gather(neg.index)
        d = psi_y - psi_neg
        if self._validate_args and not isinstance(self.psi, DenseUtility):
            if not torch.isfinite(d.detach()).all():  # one check; name the culprit if any
                _check_finite(psi_y.detach(), "utility")
                _check_finite(psi_neg.detach(), "utility")
                _check_finite(d.detach(), "utility differences")
        return d, neg.weight.to(d.dtype)

    def log_prob(self, value):
        d, weight = self.utility_differences(value)
        terms = self.noise.log_cdf(self.eps.unsqueeze(-1) + d)
        keep = (weight != 0).expand(terms.shape)
        return torch.where(keep, weight * terms, torch.zeros_like(terms)).sum(-1)

    def log_sum_exp_negatives(self, value):
        r""":math:`\log \hat S_y`, the log of the subsampled :math:`\sum_{k'\ne y} e^{\psi_{k'} - \psi_y}`.

        For Gumbel noise :math:`\log\Phi(\varepsilon + d) = -e^{-\varepsilon} e^{-d}`, so the
        factor is linear in :math:`e^{-\varepsilon}` and its expectation under
        :math:`q = \mathrm{Gumbel}(\log\eta, 1)` is :math:`-\hat S_y/\eta` (closed form, see
        :class:`pyro_ar.infer.ClosedFormELBO`). Computed in log space, so no overflow.
        """
        d, weight = self.utility_differences(value)
        log_w = weight.log()  # weights are >= 0: log 0 = -inf drops the label's draws
        return torch.logsumexp(log_w - d, dim=-1)

    def __repr__(self):
        return (f"AugmentedCategorical(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, noise={self.noise.name!r}, sampler={self.sampler!r})")


_PRIOR_CACHE = {}
_PRIOR_CACHE_SIZE = 32


def _noise_prior(nz, dtype, device, batch_shape):
    """``nz.distribution(0, 1).expand(batch_shape)``, built once per (noise, dtype, device,
    batch shape, validation flag): distributions are immutable, and building one (a torch
    Gumbel is a TransformedDistribution) costs more than the rest of a small model step."""
    builtin = type(nz) in (GumbelNoise, NormalNoise, LogisticNoise)
    key = (type(nz), None if builtin else id(nz), dtype, str(device), tuple(batch_shape),
           torch.distributions.Distribution._validate_args)
    hit = _PRIOR_CACHE.get(key)
    if hit is not None and (builtin or hit[0] is nz):
        return hit[1]
    zero = torch.zeros((), dtype=dtype, device=device)
    prior = nz.distribution(zero, torch.ones_like(zero)).expand(batch_shape)
    if len(_PRIOR_CACHE) >= _PRIOR_CACHE_SIZE:
        _PRIOR_CACHE.pop(next(iter(_PRIOR_CACHE)))
    _PRIOR_CACHE[key] = (nz, prior)
    return prior


def sample_categorical(name: str, utility, obs: Optional[torch.Tensor] = None, noise="gumbel",
                       num_negatives: Optional[int] = None, strategy="per_datapoint",
                       proposal=None, negatives: Optional[Negatives] = None):
    r"""Emit the augmented model's two sites in a Pyro model.

    * ``f"{name}_eps"`` -- the observed class's noise, prior :math:`\phi` (``noise.distribution()``),
      to be matched by a local guide (see :mod:`pyro_ar.infer`);
    * ``name`` -- :class:`AugmentedCategorical` observed at ``obs``. With ``obs=None``
      the labels are drawn from the marginal :class:`UtilityCategorical` instead, so that
      ``Predictive`` produces labels (this needs all K utilities).

    Call it inside the data plate(s); batch dims come from the utility's batch shape.

    Example::

        with pyro.plate("data", N, subsample_size=256) as idx:
            psi = LinearUtility(x[idx], W, b)
            sample_categorical("y", psi, obs=y[idx], noise="normal", num_negatives=20)

    :returns: the labels (``obs`` when given).

    Example:

    >>> import torch, pyro, pyro.poutine as poutine
    >>> import pyro_ar as ar
    >>> def model(psi, y):
    ...     with pyro.plate("data", len(y)):
    ...         ar.sample_categorical("y", psi, obs=y, num_negatives=5)
    >>> tr = poutine.trace(model).get_trace(torch.randn(3, 100), torch.tensor([1, 2, 3]))
    >>> [n for n, s in tr.nodes.items() if s["type"] == "sample"]   # plate, noise, label
    ['data', 'y_eps', 'y']
    """
    psi = as_utility(utility)
    nz = get_noise(noise)
    eps_site = f"{name}_eps"
    prior = _noise_prior(nz, psi.dtype, psi.device, psi.batch_shape)
    eps = pyro.sample(eps_site, prior, infer={"ar_noise": nz, "ar_label_site": name,
                                                "ar_num_classes": psi.num_classes})
    if obs is None:
        return pyro.sample(name, UtilityCategorical(psi.full(), nz))
    d = AugmentedCategorical(psi, eps, nz, num_negatives=num_negatives, strategy=strategy,
                             proposal=proposal, negatives=negatives, eps_site=eps_site)
    return pyro.sample(name, d, obs=obs)

r"""A linear classifier :math:`\psi_n = W x_n + b` with the A&R likelihood or a baseline.

One class gives the three ways of treating the weights, all fitted by stock
``pyro.infer.SVI``:

* ``weights="mle"`` -- :math:`W, b` are ``pyro.param`` s (maximum likelihood);
* ``weights="map"`` -- the same plus the Gaussian log-prior
  :math:`\sum_k \log N(w_k; 0, s^2 I) + \log N(b_k; 0, s^2)` as a ``pyro.factor``; when
  ``num_negatives`` is set the sum over classes is estimated on a uniform class subsample
  U (:math:`|U|` = ``num_negatives``) with weight :math:`K/|U|`, so the step stays
  O(subsample);
* ``weights="bayes"`` -- :math:`W, b` are ``pyro.sample`` sites with that prior, for an
  AutoGuide (e.g. ``AutoNormal(hide_noise_sites(model))``) -- O(K D) per step, for
  moderate K.

The likelihood is chosen by name: ``"ar"`` (:func:`pyro_ar.sample_categorical`, any
noise), ``"exact"`` (:class:`pyro_ar.UtilityCategorical`: exact softmax, or quadrature for
other noises), or a baseline of :mod:`pyro_ar.bounds` (``"ove"``, ``"botev"``,
``"bouchard"``). One switch compares them: :meth:`LinearClassifier.default_guide` and
:meth:`LinearClassifier.default_elbo` give the matching local guide and ELBO (the A&R
noise's local guide; none for the baselines), e.g.::

    for lik in ("exact", "ove", "botev", "bouchard", "ar"):
        model = LinearClassifier(D, K, likelihood=lik, num_negatives=20, subsample_size=500, sparse=True)
        svi = SVI(model, model.default_guide(), lazy_adam({"lr": 0.01}), model.default_elbo())

Bouchard's bound has a free parameter :math:`a` per datapoint. With
``bouchard_a="local"`` (default) it is a per-datapoint parameter :math:`a_n` (``pyro.param``
``"<prefix>bouchard_a"`` of shape (N,), initialised at :math:`\log(K-1)`, the optimum when
all utilities are equal), gathered for the minibatch with sparse gradients and maximised
jointly with the weights, so a step costs O(subsample) like OVE's; ``"optimal"`` recomputes
the optimal :math:`a` from all K utilities at every step (O(K), the tightest bound).
"""

import math

from typing import Optional

import torch

import pyro
import pyro.distributions as dist

from .distributions import UtilityCategorical, sample_categorical
from .negatives import sample_without_replacement
from .noise import get_noise
from .utility import DenseUtility, LinearUtility

__all__ = ["LinearClassifier"]


def _empty_guide(*args, **kwargs):
    """The guide of a model without latent variables (maximum likelihood / MAP)."""

_WEIGHTS = ("mle", "map", "bayes")


class LinearClassifier:
    r"""Pyro model of a linear classifier with a (subsampled) categorical likelihood.

    Example (softmax A&R, closed-form bound, 20 negatives per datapoint)::

        model = LinearClassifier(D, K, num_negatives=20, subsample_size=500, sparse=True)
        guide = GumbelLocalGuide(model)
        svi = SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO())
        for step in range(5000):
            svi.step(x, y)

    :param int num_features: D.
    :param int num_classes: K.
    :param noise: noise of the utility model (``"gumbel"``, ``"normal"``, ``"logistic"``, a Noise).
    :param str likelihood: ``"ar"``, ``"exact"``, ``"ove"``, ``"botev"``, ``"bouchard"``.
    :param num_negatives: classes per likelihood estimate (None: all).
    :param strategy: ``"per_datapoint"``, ``"shared"``, ``"importance"``.
    :param proposal: class weights for ``strategy="importance"``.
    :param str weights: ``"mle"``, ``"map"`` or ``"bayes"``.
    :param float prior_scale: prior standard deviation s of the weights and biases.
    :param subsample_size: minibatch size of the data plate (None: full batch).
    :param bool sparse: sparse gradients for W, b (use an optimizer of :mod:`pyro_ar.optim`).
    :param float init_scale: W initialised N(0, init_scale^2) (the authors: 0.1).
    :param float bias_init_scale: b initialised N(0, bias_init_scale^2) (the authors: 0.001).
    :param str prefix: prefix of the parameter / site names of the weights.
    :param str utility: ``"lazy"`` (default) -- a :class:`~pyro_ar.utility.LinearUtility` that
        computes only the utilities the likelihood asks for (the label's and the negatives'),
        gathering those rows of W (sparse gradients with ``sparse=True``): O(B s D) per step,
        whatever K; ``"dense"`` -- all K utilities of the minibatch by one matrix product,
        :math:`\psi = x W^\top + b` (O(B K D), dense gradients), the cheaper choice when K is
        small relative to the number of negatives times the gather overhead (e.g. Bibtex: K =
        148, D = 1836, 20 negatives per datapoint). The estimators (negatives, weights,
        bounds) are the same either way; only the arithmetic differs.
    :param str bouchard_a: ``"local"`` (a per-datapoint parameter :math:`a_n`) or
        ``"optimal"`` (recomputed from all K utilities, O(K)); for ``likelihood="bouchard"``.

    Example:

    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(2000, 8, 500, seed=0)
    >>> model = LinearClassifier(8, 500, likelihood="ar", num_negatives=16, strategy="shared",
    ...                          subsample_size=128, sparse=True)        # or likelihood="ove", "exact", ...
    >>> svi = SVI(model, model.default_guide(), lazy_adam({"lr": 0.05}), model.default_elbo())
    >>> losses = [svi.step(data.x, data.y) for _ in range(10)]
    >>> model.utility(data.x[:3]).full().shape
    torch.Size([3, 500])
    """

    def __init__(self, num_features: int, num_classes: int, noise="gumbel", likelihood="ar",
                 num_negatives: Optional[int] = None, strategy="per_datapoint", proposal=None,
                 weights="mle", prior_scale: float = 1.0, subsample_size: Optional[int] = None,
                 sparse: bool = False, init_scale: float = 0.1, bias_init_scale: float = 1e-3,
                 prefix: str = "", site: str = "y", utility: str = "lazy",
                 bouchard_a: str = "local"):
        if weights not in _WEIGHTS:
            raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
        if not prior_scale > 0:
            raise ValueError(f"prior_scale must be > 0, got {prior_scale!r}")
        if num_classes < 2 or num_features < 1:
            raise ValueError(f"need num_classes >= 2 and num_features >= 1, got "
                             f"num_classes={num_classes}, num_features={num_features}")
        if num_negatives is not None and num_negatives > num_classes - 1:
            raise ValueError(f"num_negatives={num_negatives} exceeds num_classes - 1 = {num_classes - 1}")
        self.num_features, self.num_classes = num_features, num_classes
        self.noise = get_noise(noise)
        self.likelihood = likelihood
        self._likelihood_cls = None
        if likelihood not in ("ar", "exact"):
            from .bounds import get_likelihood  # the baselines
            self._likelihood_cls = get_likelihood(likelihood)
        self.num_negatives, self.strategy, self.proposal = num_negatives, strategy, proposal
        self.weights, self.prior_scale = weights, float(prior_scale)
        self.subsample_size, self.sparse = subsample_size, sparse
        self.init_scale, self.bias_init_scale = init_scale, bias_init_scale
        self.prefix, self.site = prefix, site
        if bouchard_a not in ("local", "optimal"):
            raise ValueError(f"bouchard_a must be 'local' or 'optimal', got {bouchard_a!r}")
        self.bouchard_a = bouchard_a
        if utility not in ("lazy", "dense"):
            raise ValueError(f"utility must be 'lazy' or 'dense', got {utility!r}")
        self.utility_mode = utility

    # ---- weights ------------------------------------------------------------------------
    def _param(self, name, shape, scale, like):
        return pyro.param(self.prefix + name,
                          lambda: scale * torch.randn(shape, dtype=like.dtype, device=like.device))

    def weight_and_bias(self, like: torch.Tensor):
        """The weights as the model sees them (params, or samples for ``weights="bayes"``)."""
        K, D = self.num_classes, self.num_features
        if self.weights == "bayes":
            zero = torch.zeros((), dtype=like.dtype, device=like.device)
            prior = dist.Normal(zero, self.prior_scale)
            W = pyro.sample(self.prefix + "weight", prior.expand([K, D]).to_event(2))
            b = pyro.sample(self.prefix + "bias", prior.expand([K]).to_event(1))
            return W, b
        W = self._param("weight", (K, D), self.init_scale, like)
        b = self._param("bias", (K,), self.bias_init_scale, like)
        if self.weights == "map":
            pyro.factor(self.prefix + "weight_prior", self._log_prior_estimate(W, b))
        return W, b

    def _log_prior_estimate(self, W, b):
        r"""Unbiased estimate of :math:`\sum_k \log N(w_k;0,s^2)+\log N(b_k;0,s^2)`."""
        K = self.num_classes
        prior = dist.Normal(torch.zeros((), dtype=W.dtype, device=W.device), self.prior_scale)
        if self.num_negatives is None:
            return prior.log_prob(W).sum() + prior.log_prob(b).sum()
        rows = sample_without_replacement(K, self.num_negatives, device=W.device)
        w, bb = LinearUtility(W.new_zeros(1, W.shape[1]), W, b, sparse=self.sparse).rows(rows)
        return (K / self.num_negatives) * (prior.log_prob(w).sum() + prior.log_prob(bb).sum())

    # ---- the model --------------------------------------------------------------------
    def create_plates(self, x: torch.Tensor, y: Optional[torch.Tensor] = None):
        """The ``"data"`` plate of one step, with O(B) subsample indices.

        ``pyro.plate("data", N, subsample_size=B)`` draws ``torch.randperm(N)``: O(N) work per
        step. Here the B indices come from
        :func:`~pyro_ar.negatives.sample_without_replacement` (uniform over B-subsets, as
        the plate's), passed as the plate's explicit ``subsample``; Pyro records them as the
        plate's subsample site, so a guide built with ``create_plates=model.create_plates``
        (as :meth:`default_guide` does) draws them and replay hands them to the model.
        Without labels (prediction) or without ``subsample_size`` the plate covers all rows.
        """
        N = x.shape[0]
        B = None if y is None else self.subsample_size
        if B is None or B >= N:
            return pyro.plate("data", N)
        return pyro.plate("data", N, subsample=sample_without_replacement(N, B, device=x.device))

    def __call__(self, x: torch.Tensor, y: Optional[torch.Tensor] = None):
        if x.dim() != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"x must have shape (N, {self.num_features}), got {tuple(x.shape)}")
        if y is not None and y.shape != x.shape[:1]:
            raise ValueError(f"y must have shape ({x.shape[0]},), got {tuple(y.shape)}")
        W, b = self.weight_and_bias(x)
        a_all = None
        if self.likelihood == "bouchard" and self.bouchard_a == "local" and y is not None:
            a_all = self.bouchard_local_a(x)
        with self.create_plates(x, y) as idx:
            full = idx.shape[0] == x.shape[0]
            # (x may be a row-indexable stand-in for a tensor, e.g. the estimator's sparse rows)
            xb = x if full else (x.index_select(0, idx) if isinstance(x, torch.Tensor) else x[idx])
            if self.utility_mode == "dense":
                psi = DenseUtility(torch.nn.functional.linear(xb, W, b))
            else:
                psi = LinearUtility(xb, W, b, sparse=self.sparse)
            obs = None if y is None else (y if full else y.index_select(0, idx))
            if self.likelihood == "ar":
                return sample_categorical(self.site, psi, obs=obs, noise=self.noise,
                                          num_negatives=self.num_negatives, strategy=self.strategy,
                                          proposal=self.proposal)
            if obs is None or self.likelihood == "exact":
                return pyro.sample(self.site, UtilityCategorical(psi.full(), self.noise), obs=obs)
            kw = {}
            if a_all is not None:
                kw["a"] = torch.gather(a_all, 0, idx, sparse_grad=self.sparse)
            d = self._likelihood_cls(psi, num_negatives=self.num_negatives, strategy=self.strategy,
                                     proposal=self.proposal, **kw)
            return pyro.sample(self.site, d, obs=obs)

    def bouchard_local_a(self, x: torch.Tensor) -> torch.Tensor:
        r"""The per-datapoint Bouchard parameters :math:`a_n`, shape (N,) (created at
        :math:`\log(K-1)` on first use; N is the number of rows of the training ``x``)."""
        N = x.shape[0]
        a = pyro.param(self.prefix + "bouchard_a",
                       lambda: torch.full((N,), math.log(self.num_classes - 1), dtype=x.dtype,
                                          device=x.device))
        if a.shape != (N,):
            raise ValueError(f"the Bouchard parameters a_n were created for {a.shape[0]} datapoints, "
                             f"got x with {N} rows (one a_n per training datapoint)")
        return a

    def default_guide(self):
        """The guide that goes with this model's likelihood: for ``likelihood="ar"`` the
        local guide of the noise (:class:`~pyro_ar.infer.GumbelLocalGuide` for Gumbel,
        :class:`~pyro_ar.infer.NoiseLocalGuide` otherwise), else an empty guide (the
        baselines have no latent variable; with ``weights="bayes"`` add an AutoGuide for
        the weights yourself)."""
        from .infer import GumbelLocalGuide, NoiseLocalGuide
        from .noise import GumbelNoise

        if self.likelihood != "ar":
            return _empty_guide
        if isinstance(self.noise, GumbelNoise):
            return GumbelLocalGuide(self, create_plates=self.create_plates)
        return NoiseLocalGuide(self, create_plates=self.create_plates)

    def default_elbo(self, **kwargs):
        """:class:`~pyro_ar.infer.ClosedFormELBO` (closed-form softmax A&R bound and natural
        eta step; ``TraceMeanField_ELBO`` everywhere else, i.e. analytic KL where registered)."""
        from .infer import ClosedFormELBO

        return ClosedFormELBO(**kwargs)

    def utility(self, x: torch.Tensor, weight=None, bias=None) -> LinearUtility:
        """Lazy utilities of new data under the fitted (or given) weights (for evaluation)."""
        weight = pyro.param(self.prefix + "weight") if weight is None else weight
        bias = pyro.param(self.prefix + "bias") if bias is None else bias
        return LinearUtility(x, weight.detach(), bias.detach())

    def __repr__(self):
        return (f"LinearClassifier(D={self.num_features}, K={self.num_classes}, noise="
                f"{self.noise.name!r}, likelihood={self.likelihood!r}, weights={self.weights!r}, "
                f"num_negatives={self.num_negatives}, strategy={self.strategy!r})")

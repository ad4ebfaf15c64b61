r"""A log-bilinear bigram language model over a large vocabulary, as a Pyro model.

Next-word prediction: given the previous word :math:`u`, the next word :math:`y` follows

.. math::  \psi_k(u) = e_u \cdot w_k + b_k, \qquad y = \arg\max_k(\psi_k(u) + \varepsilon_k),

with a learned context embedding :math:`e_u\in\mathbb{R}^D` per word and an output
embedding :math:`w_k` and bias :math:`b_k` per class; with Gumbel noise it is the softmax
log-bilinear model. Everything a training step touches is gathered by row with sparse
gradients, so a step costs O(B D + s D) whatever the vocabulary size K:

* the context rows :math:`e_{u_n}` of the minibatch (``F.embedding(..., sparse=True)``);
* the output rows of the labels and of the negatives, in one gather and one matrix product
  (:class:`~pyro_ar.utility.LinearUtility` with shared or importance-sampled negatives). The
  output weights and biases are stored together as one ``(K, D + 1)`` parameter
  :math:`[w_k, b_k]` (the features get a constant 1), so one optimizer call updates both;
* the data subsample itself: the plate gets explicit indices from
  :func:`~pyro_ar.negatives.sample_without_replacement` (O(B)); a plain
  ``pyro.plate(..., subsample_size=B)`` draws ``torch.randperm(N)``, O(N) per step, which
  for N = 10^6 bigrams costs more than the rest of the step;
* the MAP prior (``weights="map"``): :math:`\sum_k \log N(e_k; 0, s^2 I) + \log N([w_k, b_k]; 0, s^2 I)`
  estimated on a uniform class subsample U with weight :math:`K/|U|` (unbiased).

Use it with :func:`pyro.infer.SVI` and an optimizer that accepts sparse gradients
(:func:`pyro_ar.optim.lazy_adam`)::

    model = BigramLanguageModel(K, 64, num_negatives=256, strategy="importance",
                                proposal=counts.double() ** 0.75)
    svi = SVI(model, model.default_guide(), lazy_adam({"lr": 3e-3}), model.default_elbo())
    for step in range(10_000):
        svi.step(prev, next)
    model.log_likelihood(prev_test, next_test)   # exact, per datapoint

The likelihood is chosen by name as in :class:`pyro_ar.models.LinearClassifier`: ``"ar"``
(A&R, any noise), ``"exact"`` (all K utilities: softmax, or quadrature for other noise),
``"ove"``, ``"botev"``, ``"bouchard"`` (baselines of :mod:`pyro_ar.bounds`).
"""

import math
from typing import Optional

import torch
import torch.nn.functional as F

import pyro
import pyro.distributions as dist

from .distributions import UtilityCategorical, sample_categorical
from .negatives import sample_without_replacement
from .noise import GumbelNoise, get_noise
from .utility import LinearUtility

__all__ = ["BigramLanguageModel", "unigram_log_probs"]

_WEIGHTS = ("mle", "map")


def _empty_guide(*args, **kwargs):
    """The guide of a model without latent variables (maximum likelihood / MAP baselines)."""


def unigram_log_probs(counts: torch.Tensor, smoothing: float = 0.5) -> torch.Tensor:
    r""":math:`\log((c_k + a) / \sum_j (c_j + a))`, e.g. to initialise the output biases.

    Example:

    >>> import torch
    >>> from pyro_ar.language_model import unigram_log_probs
    >>> unigram_log_probs(torch.tensor([3, 1])).exp().tolist()   # (c_k + 1/2) / (4 + 1)
    [0.7, 0.3]
    """
    c = counts.double() + smoothing
    return (c / c.sum()).log()


class BigramLanguageModel:
    r"""Pyro model of :math:`p(y_n \mid u_n)` with :math:`\psi_k(u) = e_u\cdot w_k + b_k`.

    :param int num_words: K, the vocabulary size (inputs and outputs share the id space).
    :param int embedding_dim: D.
    :param noise: ``"gumbel"`` (softmax), ``"normal"`` (probit), ``"logistic"`` or a Noise.
    :param str likelihood: ``"ar"``, ``"exact"``, ``"ove"``, ``"botev"``, ``"bouchard"``.
    :param num_negatives: classes per likelihood estimate (None: all K, exact).
    :param strategy: ``"importance"`` (shared draws from ``proposal``), ``"shared"``
        (uniform, shared by the minibatch) or ``"per_datapoint"``.
    :param proposal: class weights for ``strategy="importance"`` (e.g. count^0.75).
    :param subsample_size: minibatch size B (None: the whole data set).
    :param str weights: ``"mle"`` or ``"map"`` (Gaussian prior with scale ``prior_scale``,
        class-subsampled).
    :param float init_scale: embeddings initialised N(0, init_scale^2).
    :param init_bias: initial output biases (a (K,) tensor, e.g. :func:`unigram_log_probs`)
        or None for N(0, 0.001^2).
    :param bool sparse: sparse gradients (default True; use :func:`pyro_ar.optim.lazy_adam`).

    Example:

    >>> import torch
    >>> from pyro.infer import SVI
    >>> from pyro_ar.language_model import BigramLanguageModel
    >>> from pyro_ar.optim import lazy_adam
    >>> K = 5000
    >>> prev, nxt = torch.randint(0, K, (10_000,)), torch.randint(0, K, (10_000,))
    >>> model = BigramLanguageModel(K, 16, num_negatives=64, strategy="shared", subsample_size=256)
    >>> svi = SVI(model, model.default_guide(), lazy_adam({"lr": 1e-2}), model.default_elbo())
    >>> loss = svi.step(prev, nxt)                # O(B D + s D), whatever K
    >>> model.log_likelihood(prev[:100], nxt[:100]) < 0
    True
    """

    def __init__(self, num_words: int, embedding_dim: int = 64, noise="gumbel", likelihood="ar",
                 num_negatives: Optional[int] = 256, strategy="importance", proposal=None,
                 subsample_size: Optional[int] = 512, weights="mle", prior_scale: float = 1.0,
                 init_scale: float = 0.1, init_bias: Optional[torch.Tensor] = None,
                 sparse: bool = True, prefix: str = "", site: str = "y"):
        if num_words < 2 or embedding_dim < 1:
            raise ValueError(f"need num_words >= 2 and embedding_dim >= 1, got {num_words}, {embedding_dim}")
        if weights not in _WEIGHTS:
            raise ValueError(f"weights must be one of {_WEIGHTS}, got {weights!r}")
        if not prior_scale > 0:
            raise ValueError(f"prior_scale must be > 0, got {prior_scale!r}")
        if num_negatives is not None and strategy != "importance" and num_negatives > num_words - 1:
            raise ValueError(f"num_negatives={num_negatives} exceeds num_words - 1 = {num_words - 1}")
        if strategy == "importance" and num_negatives is not None and proposal is None:
            raise ValueError("strategy='importance' needs a proposal (class weights over the K words)")
        if init_bias is not None and tuple(init_bias.shape) != (num_words,):
            raise ValueError(f"init_bias must have shape ({num_words},), got {tuple(init_bias.shape)}")
        if subsample_size is not None and subsample_size < 1:
            raise ValueError(f"subsample_size must be a positive integer or None, got {subsample_size!r}")
        self.num_words, self.embedding_dim = num_words, embedding_dim
        self.noise = get_noise(noise)
        self.likelihood = likelihood
        self._likelihood_cls = None
        if likelihood not in ("ar", "exact"):
            from .bounds import get_likelihood

            self._likelihood_cls = get_likelihood(likelihood)
        if num_negatives is None:
            proposal = None if strategy == "importance" else proposal
            strategy = "shared" if strategy == "importance" else strategy
        self.num_negatives, self.strategy, self.proposal = num_negatives, strategy, proposal
        self.subsample_size, self.weights, self.prior_scale = subsample_size, weights, float(prior_scale)
        self.init_scale, self.init_bias, self.sparse = init_scale, init_bias, sparse
        self.prefix, self.site = prefix, site

    # ---- parameters -----------------------------------------------------------------------
    @property
    def num_classes(self):
        return self.num_words

    def _init_context(self, like):
        K, D = self.num_words, self.embedding_dim
        g = torch.randn(K, D, dtype=like.dtype, device=like.device)
        return g.mul_(self.init_scale)

    def _init_output(self, like):
        K, D = self.num_words, self.embedding_dim
        out = torch.empty(K, D + 1, dtype=like.dtype, device=like.device)
        out[:, :D].normal_(0.0, self.init_scale)
        if self.init_bias is None:
            out[:, D].normal_(0.0, 1e-3)
        else:
            out[:, D].copy_(self.init_bias)
        return out

    def parameters(self, like: Optional[torch.Tensor] = None):
        """``(context, output)``: the ``(K, D)`` context embeddings and the ``(K, D + 1)``
        output rows :math:`[w_k, b_k]` (``pyro.param`` s, created on first use)."""
        like = torch.zeros(()) if like is None else like
        E = pyro.param(self.prefix + "context", lambda: self._init_context(like))
        Wb = pyro.param(self.prefix + "output", lambda: self._init_output(like))
        return E, Wb

    def _log_prior_estimate(self, E, Wb):
        K, U = self.num_words, self.num_negatives or self.num_words
        prior = dist.Normal(torch.zeros((), dtype=E.dtype, device=E.device), self.prior_scale)
        if U >= K:
            return prior.log_prob(E).sum() + prior.log_prob(Wb).sum()
        rows = sample_without_replacement(K, U, device=E.device)
        e = F.embedding(rows, E, sparse=self.sparse)
        w = F.embedding(rows, Wb, sparse=self.sparse)
        return (K / U) * (prior.log_prob(e).sum() + prior.log_prob(w).sum())

    # ---- the model ------------------------------------------------------------------------
    def create_plates(self, prev: torch.Tensor, next: Optional[torch.Tensor] = None):
        """The data plate, with O(B) subsample indices (pass to a guide's ``create_plates``)."""
        N = prev.shape[0]
        B = None if next is None else self.subsample_size
        if B is None or B >= N:
            return pyro.plate("data", N)
        idx = sample_without_replacement(N, B, device=prev.device)
        return pyro.plate("data", N, subsample=idx)

    def features(self, prev: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
        """``[e_u, 1]`` for the previous words ``prev`` (sparse-gradient gather)."""
        ctx = F.embedding(prev, E, sparse=self.sparse)
        return torch.cat([ctx, torch.ones(ctx.shape[:-1] + (1,), dtype=ctx.dtype, device=ctx.device)], -1)

    def __call__(self, prev: torch.Tensor, next: Optional[torch.Tensor] = None):
        if prev.dim() != 1 or prev.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"prev must be a 1-D integer tensor of word ids, got {prev.dtype} {tuple(prev.shape)}")
        if next is not None and next.shape != prev.shape:
            raise ValueError(f"next must have shape {tuple(prev.shape)}, got {tuple(next.shape)}")
        E, Wb = self.parameters(like=torch.zeros((), device=prev.device))
        if self.weights == "map":
            pyro.factor(self.prefix + "weight_prior", self._log_prior_estimate(E, Wb))
        with self.create_plates(prev, next) as idx:
            u = prev if idx.shape[0] == prev.shape[0] else prev.index_select(0, idx)
            psi = LinearUtility(self.features(u, E), Wb, None, sparse=self.sparse)
            obs = None
            if next is not None:
                obs = next if idx.shape[0] == next.shape[0] else next.index_select(0, idx)
            if self.likelihood == "ar":
                return sample_categorical(self.site, psi, obs=obs, noise=self.noise,
                                          num_negatives=self.num_negatives, strategy=self.strategy,
                                          proposal=self.proposal)
            if obs is None or self.likelihood == "exact":
                return pyro.sample(self.site, UtilityCategorical(psi.full(), self.noise), obs=obs)
            d = self._likelihood_cls(psi, num_negatives=self.num_negatives, strategy=self.strategy,
                                     proposal=self.proposal)
            return pyro.sample(self.site, d, obs=obs)

    def default_guide(self, local_first: bool = True, **kwargs):
        """:class:`~pyro_ar.infer.GumbelLocalGuide` (Gumbel noise; natural eta step before
        the gradient step when ``local_first``, Algorithm 1 of Ruiz et al.) or
        :class:`~pyro_ar.infer.NoiseLocalGuide` for ``likelihood="ar"``, with this model's
        O(B) plate; an empty guide for the baselines. ``kwargs`` go to the guide."""
        from .infer import GumbelLocalGuide, NoiseLocalGuide

        if self.likelihood != "ar":
            return _empty_guide
        if isinstance(self.noise, GumbelNoise):
            return GumbelLocalGuide(self, create_plates=self.create_plates, local_first=local_first, **kwargs)
        return NoiseLocalGuide(self, create_plates=self.create_plates, **kwargs)

    def default_elbo(self, **kwargs):
        """:class:`~pyro_ar.infer.ClosedFormELBO` (analytic where possible)."""
        from .infer import ClosedFormELBO

        return ClosedFormELBO(**kwargs)

    # ---- evaluation -----------------------------------------------------------------------
    def utility(self, prev: torch.Tensor) -> LinearUtility:
        """Lazy utilities :math:`\\psi(u_n)` under the fitted parameters (no gradients)."""
        E, Wb = (p.detach() for p in self.parameters(like=torch.zeros((), device=prev.device)))
        return LinearUtility(self.features(prev, E), Wb, None)

    @torch.no_grad()
    def log_likelihood(self, prev: torch.Tensor, next: torch.Tensor, chunk_size: int = 256,
                       reduce: bool = True):
        r"""Exact test log-likelihood :math:`\log p(y_n\mid u_n)` (Gumbel noise: log-softmax).

        The normaliser depends only on the previous word, so it is computed once per
        distinct previous word (:math:`U\times K` utilities, in chunks of ``chunk_size``
        words) -- exact, no subsampling. Non-Gumbel noise uses quadrature
        (:func:`pyro_ar.quadrature.log_marginal`, O(K) per datapoint: pass few pairs).

        :returns: the mean (``reduce=True``) or the per-datapoint values.
        """
        E, Wb = (p.detach() for p in self.parameters(like=torch.zeros((), device=prev.device)))
        if not isinstance(self.noise, GumbelNoise):
            from .quadrature import log_marginal

            out = torch.cat([log_marginal(self.utility(prev[i:i + chunk_size]).full(),
                                          next[i:i + chunk_size], self.noise)
                             for i in range(0, prev.shape[0], chunk_size)])
            return out.mean().item() if reduce else out
        words, inverse = torch.unique(prev, return_inverse=True)
        log_z = torch.empty(words.shape[0], dtype=Wb.dtype, device=Wb.device)
        for i in range(0, words.shape[0], chunk_size):
            log_z[i:i + chunk_size] = LinearUtility(self.features(words[i:i + chunk_size], E), Wb).full().logsumexp(-1)
        x = self.features(prev, E)
        psi_y = (x * Wb.index_select(0, next)).sum(-1)
        out = psi_y - log_z[inverse]
        return out.mean().item() if reduce else out

    def __repr__(self):
        return (f"BigramLanguageModel(K={self.num_words}, D={self.embedding_dim}, noise="
                f"{self.noise.name!r}, likelihood={self.likelihood!r}, weights={self.weights!r}, "
                f"num_negatives={self.num_negatives}, strategy={self.strategy!r})")

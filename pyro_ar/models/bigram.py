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
  ``pyro_ar.subsets.sample_without_replacement`` (O(B)); a plain
  ``pyro.plate(..., subsample_size=B)`` draws ``torch.randperm(N)``, O(N) per step, which
  for N = 10^6 bigrams costs more than the rest of the step;
* the MAP prior (``weights="map"``): :math:`\sum_k \log N(e_k; 0, s^2 I) + \log N([w_k, b_k]; 0, s^2 I)`
  estimated on a uniform class subsample U with weight :math:`K/|U|` (unbiased).

Use it with :func:`pyro.infer.SVI` and an optimizer that accepts sparse gradients
(:func:`pyro_ar.optim.lazy_adam`)::

    model = BigramLanguageModel(K, 64, AR(negatives=ImportanceNegatives(256, counts.double() ** 0.75)))
    svi = SVI(model, default_guide(model), lazy_adam({"lr": 3e-3}), default_elbo())
    for step in range(10_000):
        svi.step(prev, next)
    model.log_likelihood(prev_test, next_test)   # exact, per datapoint

The likelihood is any :class:`~pyro_ar.likelihoods.Likelihood` (or its string shortcut), as
for every model built on :class:`~pyro_ar.models.base.CategoricalModel`.
"""

from typing import Optional

import torch
import torch.nn.functional as F

from ..distributions.categorical import check_labels
from ..likelihoods import Exact
from ..utility import LinearUtility
from .base import CategoricalModel, check_positive_int, take_rows
from .weights import Init, check_init

__all__ = ["BigramLanguageModel", "unigram_log_probs", "unigram_biases"]


def unigram_log_probs(counts: torch.Tensor, smoothing: float = 0.5) -> torch.Tensor:
    r""":math:`\log((c_k + a) / \sum_j (c_j + a))`, e.g. to initialise the output biases.

    Example:

    >>> import torch
    >>> from pyro_ar.models import unigram_log_probs
    >>> unigram_log_probs(torch.tensor([3, 1])).exp().tolist()   # (c_k + 1/2) / (4 + 1)
    [0.7, 0.3]
    """
    c = counts.double() + smoothing
    return (c / c.sum()).log()


def unigram_biases(counts: torch.Tensor, noise="gumbel", smoothing: float = 0.5) -> torch.Tensor:
    r"""Output biases at the unigram fit of ``noise``: utilities :math:`b` whose categorical
    marginals are the smoothed frequencies :func:`unigram_log_probs`, so that a model with
    these biases and zero weights predicts the unigram distribution. For Gumbel noise (softmax)
    :math:`b_k = \log p_k`; for any other noise :meth:`pyro_ar.noise.Noise.marginal_offsets`
    (for probit not a multiple of the log frequencies).

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.models import unigram_biases
    >>> b = unigram_biases(torch.tensor([6, 2, 1]), "normal", smoothing=0.0).double()
    >>> [round(3 * p, 5) for p in ar.UtilityCategorical(b, "normal").probs.tolist()]
    [2.0, 0.66667, 0.33333]
    """
    from ..noise import get_noise

    return get_noise(noise).marginal_offsets(unigram_log_probs(counts, smoothing))


class BigramLanguageModel(CategoricalModel):
    r"""Pyro model of :math:`p(y_n \mid u_n)` with :math:`\psi_k(u) = e_u\cdot w_k + b_k`.

    :param int num_words: K, the vocabulary size (inputs and outputs share the id space).
    :param int embedding_dim: D.
    :param likelihood: a :class:`~pyro_ar.likelihoods.Likelihood` object carrying its noise
        and negatives, e.g. ``AR(negatives=ImportanceNegatives(256, counts ** 0.75))`` (shared
        draws from a proposal), or a name (``"ar"``, ``"exact"``, ``"ove"``, ``"sampled"``,
        ``"bouchard"``): that likelihood with Gumbel noise and 256 uniform negatives shared by
        the minibatch (:attr:`likelihood_defaults`; every class when K - 1 <= 256).
    :param subsample_size: minibatch size B (None: the whole data set).
    :param weights: ``"mle"``, ``"map"`` or a :class:`~pyro_ar.models.weights.MAP` (Gaussian
        prior with scale ``prior_scale``, class-subsampled).
    :param init: an :class:`~pyro_ar.models.weights.Init`: ``scale`` (embeddings initialised
        N(0, scale^2), default 0.1) and ``bias`` (initial output biases, a (K,) tensor, e.g.
        :func:`unigram_log_probs`; None: N(0, 0.001^2)).
    :param sparse: sparse gradients (use :func:`pyro_ar.optim.lazy_adam`); default (None):
        sparse for every likelihood but the exact one, whose step touches every output row
        anyway -- ``BigramLanguageModel(K, D, likelihood="exact")`` trains with any Pyro
        optimizer (e.g. ``pyro.optim.Adam``), as fast as a plain ``F.cross_entropy`` loop
        (``benchmarks/plain_loop.py``).

    Example:

    >>> import torch, pyro, pyro_ar as ar
    >>> from pyro_ar.models import BigramLanguageModel
    >>> K = 5000
    >>> prev, nxt = torch.randint(0, K, (10_000,)), torch.randint(0, K, (10_000,))
    >>> model = BigramLanguageModel(K, 16, ar.likelihoods.AR(negatives=ar.SharedNegatives(64)), subsample_size=256)
    >>> svi = pyro.infer.SVI(model, ar.infer.default_guide(model), ar.optim.lazy_adam({"lr": 1e-2}),
    ...                      ar.infer.default_elbo())
    >>> loss = svi.step(prev, nxt)                # O(B D + s D), whatever K
    >>> model.log_likelihood(prev[:100], nxt[:100]) < 0
    True
    """

    default_local_first = True
    input_names = ("prev", "next")

    #: the string shortcut's defaults (:meth:`~pyro_ar.models.base.CategoricalModel.likelihood_shortcuts`)
    likelihood_defaults = {"noise": "gumbel", "num_negatives": 256, "strategy": "shared",
                           "proposal": None}

    def __init__(self, num_words: int, embedding_dim: int = 64, likelihood="ar",
                 subsample_size: Optional[int] = 512, weights="mle", init: Optional[Init] = None,
                 sparse: Optional[bool] = None, prefix: str = "", site: str = "y"):
        init = check_init(init, type(self).__name__, ("scale", "bias"))
        if sparse is None:  # exact: every output row gets a gradient, so dense (any optimizer)
            sparse = not (likelihood == "exact" or isinstance(likelihood, Exact))
        super().__init__(num_words, likelihood, weights=weights, subsample_size=subsample_size,
                         sparse=sparse, prefix=prefix, site=site)
        self.embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        if init.bias is not None and tuple(init.bias.shape) != (num_words,):
            raise ValueError(f"init.bias must have shape ({num_words},), got init.bias of shape "
                             f"{tuple(init.bias.shape)}")
        self.init_scale = 0.1 if init.scale is None else init.scale
        self.init_bias = init.bias

    @classmethod
    def resolve_shortcuts(cls, likelihood, num_classes, values):
        """The default 256 negatives become every class when K - 1 <= 256 (as cheap, exact)."""
        s = values["num_negatives"]
        return {**values, "num_negatives": None if s is not None and s >= num_classes - 1 else s}

    @property
    def num_words(self):
        return self.num_classes

    def parameter_shapes(self):
        K, D = self.num_classes, self.embedding_dim
        return {"context": (K, D), "output": (K, D + 1)}

    def init_parameter(self, name, shape, like):
        out = torch.empty(shape, dtype=like.dtype, device=like.device)
        if name == "context":
            return out.normal_(0.0, self.init_scale)
        D = self.embedding_dim
        out[:, :D].normal_(0.0, self.init_scale)
        if self.init_bias is None:
            out[:, D].normal_(0.0, 1e-3)
        else:
            out[:, D].copy_(self.init_bias)
        return out

    def check_inputs(self, prev, next):
        if not isinstance(prev, torch.Tensor) or prev.dim() != 1 \
                or prev.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"prev must be a 1-D integer tensor of word ids, got "
                             f"{getattr(prev, 'dtype', type(prev))} {tuple(getattr(prev, 'shape', ()))}")
        if next is not None and next.shape != prev.shape:
            raise ValueError(f"next must have shape {tuple(prev.shape)}, got next of shape {tuple(next.shape)}")

    def check_values(self, prev, next=None, rows=None):
        """Word ids in [0, K) in ``prev`` and ``next``, naming the first bad position."""
        if prev is not None:
            check_labels(prev, self.num_classes, prev.shape, name="prev", rows=rows)
        super().check_values(None, next, rows)

    def check_batch(self, prev, next, rows):
        """The minibatch's previous and next words (both index parameter rows)."""
        self.check_values(take_rows(prev, rows), take_rows(next, rows), rows)

    def features(self, prev: torch.Tensor, E: torch.Tensor) -> torch.Tensor:
        """``[e_u, 1]`` for the previous words ``prev`` (sparse-gradient gather)."""
        ctx = F.embedding(prev, E, sparse=self.sparse)
        return torch.cat([ctx, ctx.new_ones(ctx.shape[:-1] + (1,))], -1)

    def minibatch_utility(self, prev, params):
        return LinearUtility(self.features(prev, params["context"]), params["output"], None,
                             sparse=self.sparse)

    def evaluation_source(self, prev: torch.Tensor):
        """``(source, rows)`` for :mod:`pyro_ar.evaluation`: the utilities of the distinct
        previous words, and the row of each datapoint (its previous word's). The utilities
        depend only on the previous word, so :meth:`log_likelihood` and :meth:`evaluate`
        (the base class's) compute them once per distinct previous word -- exact over all K
        classes (quadrature for other noises than Gumbel)."""
        words, inverse = torch.unique(prev, return_inverse=True)
        return self.utility(words), inverse

    def _repr_fields(self):
        return {"K": self.num_classes, "D": self.embedding_dim}

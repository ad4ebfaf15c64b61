r"""Class-sharded A&R (model parallel over K): each rank owns a block of the K classes' rows.

Rank r owns the classes :math:`C_r = [k_r, k_{r+1})` (:func:`class_shard`, contiguous,
:math:`K_r` of them): its rows of W and b and their optimizer state. Every rank sees the
same minibatch (the shared random stream draws it alike everywhere) with its features
(B x D). The class sum of the augmented log-joint splits over the shards,

.. math::  S_y = \sum_{k\ne y} e^{\psi_k-\psi_y} = \sum_r \sum_{k\in C_r, k\ne y} e^{\psi_k - \psi_y}
           \approx \sum_r \underbrace{\frac{K_r}{s_r}\sum_{j=1}^{s_r} 1[k_{rj}\ne y]\,
           e^{\psi_{k_{rj}} - \psi_y}}_{\hat S_{y,r}},

each shard estimating its part from :math:`s_r \approx s K_r/K` of its own classes drawn
uniformly (shared by the minibatch, or per datapoint; all of them when :math:`s_r\ge K_r`),
so that :math:`\mathbb{E}[\hat S_y] = \sum_r \mathbb{E}[\hat S_{y,r}] = S_y`: **unbiased**.
:math:`\psi_y` comes from the rank that owns :math:`y`. Per step and label site three
vectors of B numbers are all-reduced (:math:`\psi_y`; the max-shift
:math:`m = \max_r\max_j(\log a_j + \psi_{k_{rj}})`; the shifted partial sums), so
:math:`\log\hat S_y = m + \log\sum_r\sum_j a_j e^{\psi_{k_{rj}} - m} - \psi_y` is computed
without overflow and the communication is :math:`O(B)`, independent of K (plus the
:math:`B \times D` features, if they are not already on every rank). The sums are taken
with :func:`~pyro_ar.distributed.sum_across` (identity backward: every rank computes the
same bound from them), so the gradients of a shard's rows stay on its rank, and the
closed-form Gumbel bound :math:`-\hat S_y/\eta` and the natural step
:math:`\eta_n \leftarrow (1-\rho)\eta_n + \rho(1+\hat S_{y_n})` of
:class:`~pyro_ar.infer.ClosedFormELBO` see the all-reduced :math:`\hat S_y` (every rank
keeps the same :math:`\eta`). Other noises use the Monte Carlo factor
:math:`\sum_r\sum_j a_j\log\Phi(\varepsilon+\psi_y-\psi_{k_{rj}})`, summed the same way.
"""

import contextlib
from typing import NamedTuple, Optional

import torch

import pyro
import pyro.distributions as dist

from ..distributions import AugmentedCategorical
from ..distributions.augmented import INFER_KEY, NoiseSite, _noise_prior
from ..distributions.class_sum import masked_weighted_sum
from ..likelihoods import AR
from ..models.weights import Init
from ..negatives import PerDatapointNegatives, SharedNegatives, as_negative_sampler
from ..models.linear import LinearClassifier
from ..subsets import sample_without_replacement
from ..utility import LinearUtility, Utility
from .collectives import all_reduce_sum, max_across, sum_across
from .process_group import get_rank, get_world_size, shard_range
from .random_stream import RandomStream

__all__ = ["ClassShard", "class_shard", "ShardedLinearUtility", "ShardedAugmentedCategorical",
           "ShardedAR", "ClassShardedLinearClassifier"]


class ClassShard(NamedTuple):
    """The classes ``[start, stop)`` of ``num_classes`` that one rank owns.

    Example:

    >>> from pyro_ar.distributed import ClassShard
    >>> ClassShard(0, 5, 10).size
    5
    """

    start: int
    stop: int
    num_classes: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    def share(self, count: int) -> int:
        """This shard's part of ``count`` draws over all classes, in [1, size]."""
        return min(self.size, max(1, round(count * self.size / self.num_classes)))


def class_shard(num_classes: int, shard: Optional[int] = None, num_shards: Optional[int] = None) -> ClassShard:
    """The contiguous block of classes of shard ``shard`` (default: this rank) of ``num_shards``.

    Example:

    >>> from pyro_ar.distributed import class_shard
    >>> class_shard(10, 2, 3)
    ClassShard(start=6, stop=10, num_classes=10)
    """
    shard = get_rank() if shard is None else shard
    num_shards = get_world_size() if num_shards is None else num_shards
    return ClassShard(*shard_range(num_classes, shard, num_shards), num_classes)


class ShardedLinearUtility(Utility):
    r"""Linear utilities :math:`\psi_{nk} = x_n\cdot w_k + b_k` of which this rank holds the
    rows of its :class:`ClassShard`: ``weight`` (K_r, D), ``bias`` (K_r,). Over all K classes
    (``num_classes`` is K); ``local`` is the shard's own :class:`~pyro_ar.utility.LinearUtility`
    (local class indices). Gathers of global classes are not defined on one shard: use
    :class:`ShardedAugmentedCategorical` and :mod:`pyro_ar.distributed.sharded_evaluation`.

    Example:

    >>> import torch
    >>> from pyro_ar.distributed import ShardedLinearUtility, class_shard
    >>> shard = class_shard(100, 1, 2)                          # classes 50..99
    >>> psi = ShardedLinearUtility(torch.randn(4, 3), torch.randn(50, 3), torch.zeros(50), shard)
    >>> psi.num_classes, psi.local.num_classes
    (100, 50)
    """

    _reference = "weight"

    def __init__(self, x, weight, bias, shard: ClassShard, sparse: bool = False):
        if weight.dim() != 2 or weight.shape[0] != shard.size:
            raise ValueError(f"weight must have shape ({shard.size}, D) for the shard {tuple(shard)}, "
                             f"got {tuple(weight.shape)}")
        self.local = LinearUtility(x, weight, bias, sparse=sparse)
        self.x, self.weight, self.bias, self.shard, self.sparse = x, weight, bias, shard, sparse
        self.num_classes, self.batch_shape = shard.num_classes, self.local.batch_shape

    def label_utility(self, labels: torch.Tensor, group=None) -> torch.Tensor:
        r""":math:`\psi_{n y_n}` (shape of ``labels``), from the rank owning :math:`y_n`, summed across ranks."""
        D = self.x.shape[-1]
        flat = labels.reshape(-1)
        x = self.x.expand(labels.shape + (D,)).reshape(-1, D)
        local = flat - self.shard.start
        pos = ((local >= 0) & (local < self.shard.size)).nonzero().squeeze(-1)
        own = self.local.with_inputs(x.index_select(0, pos))
        values = own.gather(local.index_select(0, pos).unsqueeze(-1)).squeeze(-1)
        part = x.new_zeros(flat.shape).index_add(0, pos, values)
        return sum_across(part, group).reshape(labels.shape)

    def gather(self, index):
        raise NotImplementedError("a ShardedLinearUtility holds one shard of the classes: gather "
                                  "through .local (local indices) or .label_utility")

    gather_shared = gather

    def full(self):
        """All K utilities ``batch + (K,)`` on every rank, detached: this shard's block in place,
        the others' added by one all-reduce of B x K numbers (for evaluation and checks; a
        training step never calls it, and :func:`~pyro_ar.distributed.sharded_evaluate` needs
        O(B) communication only). Without other ranks the shard is every class."""
        local = self.local.full()
        if self.shard.size == self.num_classes:
            return local
        out = local.detach().new_zeros(local.shape[:-1] + (self.num_classes,))
        out[..., self.shard.start:self.shard.start + self.shard.size] = local.detach()
        return all_reduce_sum(out)

    def expand(self, batch_shape):
        x = self.x.expand(torch.Size(batch_shape) + self.x.shape[-1:])
        return ShardedLinearUtility(x, self.weight, self.bias, self.shard, self.sparse)

    def __repr__(self):
        return (f"ShardedLinearUtility(batch_shape={tuple(self.batch_shape)}, shard={tuple(self.shard)}, "
                f"D={self.weight.shape[-1]})")


class ShardedAugmentedCategorical(AugmentedCategorical):
    r"""The A&R factor of :class:`~pyro_ar.AugmentedCategorical` with its class sum split
    over the class shards (see the module docstring): ``log_prob`` and
    ``log_sum_exp_negatives`` are this shard's unbiased part summed across the ranks.

    :param utility: a :class:`ShardedLinearUtility`.
    :param eps: the label's noise (broadcastable to the batch shape).
    :param negatives: uniform negatives over all shards, s classes in all: ``SharedNegatives(s)``
        (one draw of :math:`s_r` classes per shard for the minibatch), an int s or
        ``PerDatapointNegatives(s)`` (per datapoint); None: every class, exact.
    :param stream: the rank's :class:`~pyro_ar.distributed.RandomStream` for its negatives
        (None: torch's global stream).

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.distributed import ShardedAugmentedCategorical, ShardedLinearUtility, class_shard
    >>> x, W, b = torch.randn(3, 4), torch.randn(20, 4), torch.zeros(20)
    >>> psi = ShardedLinearUtility(x, W, b, class_shard(20, 0, 1))       # one shard: every class
    >>> y, eps = torch.tensor([0, 5, 19]), torch.zeros(3)
    >>> full = ar.AugmentedCategorical(ar.LinearUtility(x, W, b), eps).log_sum_exp_negatives(y)
    >>> torch.allclose(ShardedAugmentedCategorical(psi, eps).log_sum_exp_negatives(y), full)
    True
    """

    def __init__(self, utility: ShardedLinearUtility, eps, noise="gumbel", negatives=None, *, stream=None,
                 group=None, eps_site: Optional[str] = None, validate_args=None):
        if not isinstance(utility, ShardedLinearUtility):
            raise ValueError(f"utility must be a ShardedLinearUtility, got {type(utility).__name__}")
        super().__init__(utility, eps, noise, _uniform_sampler(negatives), eps_site=eps_site,
                         validate_args=validate_args)
        shard, s = utility.shard, self.sampler.num_negatives
        self.shard_negatives = shard.size if s is None else shard.share(s)
        self.strategy, self.stream, self.group = self.sampler.strategy, stream, group

    def _shard_terms(self, value):
        """(psi_y (..., 1) summed across ranks, psi of this shard's negatives, weights a_j)."""
        labels = self.labels(value)
        psi = self.psi
        shard, s = psi.shard, self.shard_negatives
        local = (labels - shard.start).unsqueeze(-1)
        with self.stream if self.stream is not None else contextlib.nullcontext():
            if s >= shard.size:
                index = torch.arange(shard.size, device=labels.device)
            elif self.strategy == "shared":
                index = sample_without_replacement(shard.size, s, device=labels.device)
            else:
                index = sample_without_replacement(shard.size, s, labels.shape, device=labels.device)
        a = 1.0 if s >= shard.size else shard.size / s
        weight = (index != local).to(psi.dtype) * a
        local_psi = psi.local.expand(labels.shape) if psi.batch_shape != labels.shape else psi.local
        psi_neg = local_psi.gather_shared(index) if index.dim() == 1 else local_psi.gather(index)
        return psi.label_utility(labels, self.group).unsqueeze(-1), psi_neg, weight

    def log_prob(self, value):
        psi_y, psi_neg, weight = self._shard_terms(value)
        part = masked_weighted_sum(self.noise.log_cdf, self.eps.unsqueeze(-1) + psi_y - psi_neg, weight)
        return sum_across(part, self.group)

    def log_sum_exp_negatives(self, value):
        psi_y, psi_neg, weight = self._shard_terms(value)
        weight = weight.expand(psi_neg.shape)
        z = torch.where(weight > 0, weight.log() + psi_neg, -torch.inf)
        lowest = torch.finfo(z.dtype).min
        m = max_across(z.detach().amax(-1), self.group)
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        total = sum_across(torch.exp(z.clamp(min=lowest) - m.unsqueeze(-1)).sum(-1), self.group)
        tiny = torch.finfo(total.dtype).tiny
        log_s = torch.log(total.clamp(min=tiny)) + m - psi_y.squeeze(-1)
        return log_s.masked_fill(total <= 0, -torch.inf)

    def __repr__(self):
        return (f"ShardedAugmentedCategorical(batch_shape={tuple(self.batch_shape)}, shard="
                f"{tuple(self.psi.shard)}, shard_negatives={self.shard_negatives}, strategy={self.strategy!r})")


def _uniform_sampler(negatives):
    """``negatives`` read by :func:`~pyro_ar.negatives.as_negative_sampler`, which must be
    uniform (what a shard can draw from its own classes)."""
    sampler = as_negative_sampler(negatives)
    if type(sampler) not in (SharedNegatives, PerDatapointNegatives):
        raise ValueError(f"negatives must be None, an int, SharedNegatives or PerDatapointNegatives "
                         f"(uniform negatives), got negatives={negatives!r}")
    return sampler


@torch.no_grad()
def _sharded_argmax_draw(utility, noise, stream=None, group=None) -> torch.Tensor:
    r"""Labels :math:`y = \arg\max_k(\psi_k + \varepsilon_k)`, :math:`\varepsilon_k \sim \phi` iid, drawn
    over the shards: each rank perturbs its own classes' utilities (a draw from the marginal
    of any noise, the random-utility model itself), the ranks agree on the largest value
    (one all-reduce max) and the owner's class is summed over the ranks (one all-reduce sum;
    ties have probability 0). O(B K_r) work and O(B) communication per rank. The noise comes
    from the rank's ``stream`` (independent across the shards), else the global RNG."""
    psi = utility.local.full()                                          # (B, K_r)
    with stream if stream is not None else contextlib.nullcontext():
        value, index = (psi + noise.sample(psi.shape, psi.dtype, psi.device)).max(-1)
    best = max_across(value, group)
    mine = torch.where(value == best, index + utility.shard.start, torch.zeros_like(index))
    return all_reduce_sum(mine.to(torch.float64), group).round().long()


class ShardedAR(AR):
    r"""The A&R likelihood of a class-sharded model: emits ``"<site>_eps"`` (prior
    :math:`\phi`, as :class:`~pyro_ar.likelihoods.AR`) and ``site`` as a
    :class:`ShardedAugmentedCategorical`.

    :param noise: the noise of the utility model.
    :param negatives: uniform negatives over all shards, as every likelihood takes them:
        ``SharedNegatives(s)`` (shared by the minibatch), an int s or
        ``PerDatapointNegatives(s)`` (per datapoint); None: exact.
    :param stream: the rank's :class:`~pyro_ar.distributed.RandomStream` (its negatives).
    :param group: the process group (default: the world).

    Example:

    >>> from pyro_ar.distributed import ShardedAR
    >>> from pyro_ar.negatives import SharedNegatives
    >>> ShardedAR("gumbel", negatives=SharedNegatives(64))
    ShardedAR(noise='gumbel', num_negatives=64, strategy='shared')
    """

    def __init__(self, noise="gumbel", negatives=None, stream=None, group=None):
        super().__init__(noise, _uniform_sampler(negatives))
        self.strategy, self.stream, self.group = self.sampler.strategy, stream, group

    def sample(self, site, utility, obs, data):
        if not isinstance(utility, ShardedLinearUtility):  # every class on this rank: one shard
            return super().sample(site, utility, obs, data)
        if obs is None:
            return pyro.sample(site, dist.Delta(_sharded_argmax_draw(utility, self.noise, self.stream, self.group)))
        eps_site = f"{site}_eps"
        prior = _noise_prior(self.noise, utility.dtype, utility.device, utility.batch_shape)
        eps = pyro.sample(eps_site, prior, infer={INFER_KEY: NoiseSite(self.noise, site, utility.num_classes)})
        d = ShardedAugmentedCategorical(utility, eps, self.noise, self.sampler, stream=self.stream,
                                        group=self.group, eps_site=eps_site)
        return pyro.sample(site, d, obs=obs)

    def __repr__(self):
        return (f"ShardedAR(noise={self.noise.name!r}, num_negatives={self.num_negatives}, "
                f"strategy={self.strategy!r})")


class ClassShardedLinearClassifier(LinearClassifier):
    r""":class:`~pyro_ar.models.LinearClassifier` whose rank holds only the rows of its class shard.

    The parameters ``weight`` (K_r, D) and ``bias`` (K_r,) are this rank's rows
    (initialised from its own ``stream``); the likelihood is :class:`ShardedAR`. Run
    the same script on every rank with the same seed and the whole training data (every
    rank evaluates the same minibatch); pass ``stream`` in ``modules=`` of
    :func:`~pyro_ar.infer.train` so checkpoints carry it. ``weights="map"`` estimates the
    prior from :math:`U_r \approx U K_r/K` rows per shard, summed across ranks.

    :param likelihood: ``"ar"`` (Gumbel noise, every class) or an
        :class:`~pyro_ar.likelihoods.AR` whose noise and uniform negatives (an int or
        ``SharedNegatives(s)``: shared by the minibatch; ``PerDatapointNegatives(s)``) the
        rank's :class:`ShardedAR` takes.
    :param shard: this rank's shard (default: the rank).
    :param num_shards: the number of shards (default: the world size).
    :param int seed: the shard's stream is ``RandomStream(seed + 104729 * (shard + 1))``.
    :param group: the process group. Other arguments as :class:`~pyro_ar.models.LinearClassifier`
        (the parameters' names have no prefix).

    Example:

    >>> import pyro, pyro_ar as ar
    >>> from pyro_ar.distributed import ClassShardedLinearClassifier
    >>> from pyro_ar.infer import default_elbo, default_guide
    >>> data = ar.datasets.make_linear_teacher(500, 4, 100, seed=0)
    >>> model = ClassShardedLinearClassifier(4, 100, ar.likelihoods.AR(negatives=10), subsample_size=50)
    >>> optim, elbo = ar.optim.lazy_adam({"lr": 0.05}), default_elbo()
    >>> svi = pyro.infer.SVI(model, default_guide(model), optim, elbo)
    >>> history = ar.infer.train(svi, data.x, data.y, num_steps=5, modules=[model.stream])
    >>> pyro.param("weight").shape                 # one process: the only shard holds every row
    torch.Size([100, 4])
    >>> sorted(model.evaluate(data.x, data.y))
    ['accuracy', 'log_lik']
    """

    #: the string shortcut's defaults -- every class (negatives shared by the minibatch when given)
    likelihood_defaults = {"noise": "gumbel", "num_negatives": None, "strategy": "shared", "proposal": None}
    weight_choices = ("mle", "map")
    init_fields = ("scale", "bias_scale")

    def __init__(self, num_features: int, num_classes: int, likelihood="ar", *, shard: Optional[int] = None,
                 num_shards: Optional[int] = None, seed: int = 0, group=None, weights="mle",
                 subsample_size: Optional[int] = None, sparse: bool = True, init: Optional[Init] = None,
                 site: str = "y"):
        lik = self.make_likelihood(likelihood, num_classes)
        if type(lik) is not AR:
            raise ValueError(f"likelihood must be 'ar' or an AR likelihood (its noise and uniform "
                             f"negatives), got likelihood={likelihood!r}")
        shard = get_rank(group) if shard is None else shard
        self.class_shard = class_shard(num_classes, shard, get_world_size(group) if num_shards is None
                                       else num_shards)
        self.stream, self.group = RandomStream(seed + 104729 * (shard + 1)), group
        likelihood = ShardedAR(lik.noise, lik.sampler, self.stream, group)
        super().__init__(num_features, num_classes, likelihood=likelihood, weights=weights,
                         subsample_size=subsample_size, sparse=sparse, init=init, site=site)

    @classmethod
    def resolve_shortcuts(cls, likelihood, num_classes, values):
        """The defaults as they are (no ``"auto"`` negatives here)."""
        return values

    def run_modules(self):
        """The modules whose buffers a checkpoint of this model's run holds: the negatives' stream."""
        return {"stream": self.stream}

    def parameter_shapes(self):
        return {"weight": (self.class_shard.size, self.num_features), "bias": (self.class_shard.size,)}

    def init_parameter(self, name, shape, like):
        with self.stream:
            return super().init_parameter(name, shape, like)

    def minibatch_utility(self, x, params):
        return ShardedLinearUtility(x, params["weight"], params["bias"], self.class_shard, self.sparse)

    def log_prior_estimate(self, params):
        shard = self.class_shard
        U = shard.share(self.num_prior_classes or self.num_negatives or self.num_classes)
        like = next(iter(params.values()))
        prior = dist.Normal(like.new_zeros(()), self.prior_scale)
        if U >= shard.size:
            total = sum(prior.log_prob(p).sum() for p in params.values())
        else:
            with self.stream:
                rows = sample_without_replacement(shard.size, U, device=like.device)
            total = (shard.size / U) * sum(prior.log_prob(self._gather_rows(p, rows)).sum()
                                           for p in params.values())
        return sum_across(total, self.group)

    def utility(self, x, params=None):
        """This shard's utilities of new data under the fitted (or given) ``params``
        (``{"weight", "bias"}`` of this shard; a :class:`ShardedLinearUtility`)."""
        params = self.fitted_parameters() if params is None else params
        return ShardedLinearUtility(x, params["weight"].detach(), params["bias"].detach(), self.class_shard)

    def log_likelihood(self, x, y, reduce: str = "mean", chunk_size: Optional[int] = None):
        """Test log-likelihood over all K classes, computed shard by shard
        (:func:`~pyro_ar.distributed.sharded_evaluation.sharded_evaluate`)."""
        from .sharded_evaluation import sharded_evaluate

        self.check_inputs(x, y)
        return sharded_evaluate(self.utility(x), y, self.noise, chunk_size=chunk_size, reduce=reduce,
                                group=self.group)["log_lik"]

    def evaluate(self, x, y, metrics=("log_lik", "accuracy"), chunk_size: Optional[int] = None):
        """``{"log_lik", "accuracy"}`` over all K classes, computed shard by shard."""
        from .sharded_evaluation import sharded_evaluate

        self.check_inputs(x, y)
        out = sharded_evaluate(self.utility(x), y, self.noise, chunk_size=chunk_size, group=self.group)
        return {k: out[k] for k in metrics}

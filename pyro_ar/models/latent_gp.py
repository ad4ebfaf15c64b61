r"""The categorical latent Gaussian process (CLGP; Gal, Chen & Ghahramani 2015, seeds/003).

Datapoint n has a latent :math:`x_n\sim N(0, I_Q)` and D categorical variables
:math:`y_{n1},\dots,y_{nD}`, variable d over :math:`K_d` categories. Every (variable,
category) pair :math:`r = (d, k)` -- one of :math:`R=\sum_d K_d` *rows* -- has a utility
function :math:`f_r` with a Gaussian-process prior, made sparse by M inducing inputs
:math:`Z` shared by all rows (as is the kernel, RBF with one lengthscale per latent
dimension), in the whitened parameterisation :math:`K_{ZZ} = LL^\top`,
:math:`f_r(Z) = L v_r`, :math:`v_r\sim N(0, I_M)`:

.. math::  f_r(x)\mid v_r \sim N\big(a(x)^\top v_r + b_r,\; k(x,x) - \lVert a(x)\rVert^2\big),
           \quad a(x) = L^{-1}k_Z(x), \qquad
           y_{nd} = \arg\max_k\big(f_{(d,k)}(x_n) + \varepsilon_{ndk}\big)

(softmax for Gumbel noise; :math:`b_r` a per-row mean, e.g. the log-frequencies). The
variational family is :math:`q(x_n) = N(\mu_n, \mathrm{diag}\,\sigma_n^2)` -- amortised by
:class:`~pyro_ar.models.SessionEncoder` of the datapoint's observed (variable, category)
rows, or per datapoint (:class:`~pyro_ar.models.LocalPosterior`) -- and
:math:`q(v_r) = N(m_r, \mathrm{diag}\,s_r^2)`, under which, given :math:`x`,

.. math::  \mathbb{E}f_r(x) = a(x)^\top m_r + b_r, \qquad
           \mathrm{Var}f_r(x) = k(x,x) - \lVert a(x)\rVert^2 + \textstyle\sum_j a_j(x)^2 s_{rj}^2 .

The model draws :math:`f` at the rows the likelihood asks for with the local
reparameterisation trick (one standard normal per (datapoint, row) entry: each datapoint's
factor depends on :math:`f` at its own :math:`x_n` only, so the estimate of
:math:`\mathbb{E}_q\log p(y_n\mid f(x_n))` is unbiased) and hands them to any likelihood
of :mod:`pyro_ar.likelihoods`, as :class:`~pyro_ar.likelihoods.LocalReparameterization`
does, lazily. The ELBO is

.. math::  \sum_n \mathbb{E}_q\log p(y_n\mid f(x_n)) - \sum_n\mathrm{KL}(q(x_n)\Vert p(x_n))
           - \sum_{r=1}^R \mathrm{KL}(q(v_r)\Vert N(0, I)),

the last sum estimated without bias on a uniform row subsample :math:`U` as
:math:`(R/|U|)\sum_{r\in U}` (``num_kl_rows``). With A&R a step costs
:math:`O(B D (1+s) M + |U| M + M^3)` for B datapoints and s negatives, whatever R: the
rows of :math:`(m, \log s, b)` are gathered lazily with sparse gradients.

``utility="linear"`` is the linear counterpart, the latent Gaussian model (Khan et al. 2012;
the paper's LGM): :math:`f_r(x) = w_r\cdot x + b_r` with maximum-likelihood :math:`W`, the
session model's :class:`~pyro_ar.utility.LinearUtility`. Variables with the same number of
categories share one likelihood site (``"y"``; ``"y_<K>"`` per cardinality when they differ);
missing entries are -1 and masked.
"""

import copy
import math
from typing import Dict, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

import pyro
from pyro.distributions.util import broadcast_shape

from ..likelihoods import Exact
from ..negatives import PerDatapointNegatives
from ..subsets import sample_without_replacement
from ..numerics import check_positive_number
from ..utility import LinearUtility, LinearWeights, Utility, _validating, check_index
from .base import check_positive_int
from .latent import CategoricalLatentModel
from .weights import MLE, Init, check_init, get_weights

__all__ = ["RBFKernel", "SparseGPMap", "SparseGPUtility", "VariableUtility", "CategoricalLatentGP",
           "marginal_log_probs", "frequency_log_predictive"]


class RBFKernel(nn.Module):
    r"""Squared-exponential kernel with one lengthscale per input dimension (ARD),
    :math:`k(x, z) = \sigma^2\exp(-\tfrac12\sum_q (x_q - z_q)^2/\ell_q^2)`, log-parameterised.

    (``pyro.contrib.gp`` kernels are ``PyroModule`` s whose parameters also register under
    bare global names such as ``"lengthscale"``, which would collide between two models in one
    param store; this module is registered with ``pyro.module`` under the model's prefix.)

    Example:

    >>> import torch
    >>> from pyro_ar.models.latent_gp import RBFKernel
    >>> k = RBFKernel(2, variance=2.0, lengthscale=1.0)
    >>> [round(v, 4) for v in k(torch.zeros(1, 2), torch.tensor([[0.0, 0.0], [1.0, 1.0]]))[0].tolist()]
    [2.0, 0.7358]
    """

    def __init__(self, input_dim: int, variance: float = 1.0, lengthscale: float = 1.0):
        super().__init__()
        variance = check_positive_number("variance", variance)
        lengthscale = check_positive_number("lengthscale", lengthscale)
        self.log_variance = nn.Parameter(torch.tensor(math.log(variance)))
        self.log_lengthscale = nn.Parameter(torch.full((input_dim,), math.log(lengthscale)))

    @property
    def variance(self) -> torch.Tensor:
        return self.log_variance.exp()

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        """The (n, m) kernel matrix of ``x`` (n, Q) and ``z`` (m, Q)."""
        ell = self.log_lengthscale.exp()
        return self.variance * torch.exp(-0.5 * torch.cdist(x / ell, z / ell).pow(2))

    def diag(self, x: torch.Tensor) -> torch.Tensor:
        """:math:`k(x, x)` for every row of ``x`` (..., Q)."""
        return self.variance.expand(x.shape[:-1])


class SparseGPMap(nn.Module):
    r"""The inducing inputs :math:`Z` (M, Q) and the kernel shared by all rows;
    :meth:`project` gives :math:`a(x) = L^{-1}k_Z(x)` and
    :math:`k(x,x) - \lVert a(x)\rVert^2` (module docstring), O(M^3 + n M^2) for n inputs.

    Example:

    >>> import torch
    >>> from pyro_ar.models.latent_gp import SparseGPMap
    >>> a, resid = SparseGPMap(2, 5).project(torch.randn(3, 1, 2))
    >>> a.shape, resid.shape, bool((resid >= 0).all())
    (torch.Size([3, 1, 5]), torch.Size([3, 1]), True)
    """

    def __init__(self, latent_dim: int, num_inducing: int, lengthscale: float = 1.0,
                 variance: float = 1.0, jitter: float = 1e-4):
        super().__init__()
        self.kernel = RBFKernel(check_positive_int("latent_dim", latent_dim), variance, lengthscale)
        self.inducing = nn.Parameter(torch.randn(check_positive_int("num_inducing", num_inducing), latent_dim))
        self.jitter = jitter

    def cholesky(self) -> torch.Tensor:
        """:math:`L`, the Cholesky factor of :math:`K_{ZZ} + \\text{jitter}\\,\\sigma^2 I`."""
        Z = self.inducing
        Kzz = self.kernel(Z, Z)
        eye = torch.eye(len(Z), dtype=Z.dtype, device=Z.device)
        return torch.linalg.cholesky(Kzz + self.jitter * self.kernel.variance * eye)

    def project(self, x: torch.Tensor):
        """``(a, resid)`` of inputs ``x`` (..., Q): shapes (..., M) and (...)."""
        flat = x.reshape(-1, x.shape[-1])
        A = torch.linalg.solve_triangular(self.cholesky(), self.kernel(self.inducing, flat), upper=False)
        a = A.T.reshape(x.shape[:-1] + (A.shape[0],))
        return a, (self.kernel.diag(x) - (a * a).sum(-1)).clamp(min=0.0)


def _variance(log_scale: torch.Tensor) -> torch.Tensor:
    r""":math:`s^2 = e^{2\log s}`: the variances of gathered rows of ``log_scale``."""
    return log_scale.mul(2).exp()


class SparseGPUtility(Utility):
    r"""Lazy utilities :math:`f_r(x_n)` of a whitened sparse GP (module docstring) over R rows.

    :param a: :math:`a(x_n)`, shape ``batch_shape + (M,)``; ``resid``: :math:`k(x,x)-\lVert a\rVert^2`, ``batch_shape``.
    :param loc: :math:`m_r`, shape (R, M).
    :param log_scale: :math:`\log s_r`, shape (R, M).
    :param bias: :math:`b_r`, shape (R,), or None.
    :param bool sample: draw :math:`f` (reparameterised, a fresh draw for every entry gathered)
        instead of returning :math:`\mathbb{E}f`.
    :param bool sparse: sparse-gradient gathers of the rows.

    Example:

    >>> import torch
    >>> from pyro_ar.models.latent_gp import SparseGPMap, SparseGPUtility
    >>> a, resid = SparseGPMap(2, 4).project(torch.randn(3, 2))
    >>> u = SparseGPUtility(a, resid, torch.zeros(100, 4), torch.zeros(100, 4), torch.zeros(100))
    >>> u.gather_shared(torch.tensor([5, 9])).shape, u.full().shape
    (torch.Size([3, 2]), torch.Size([3, 100]))
    >>> mean, var = u.moments(torch.tensor([5]))      # q(v) = N(0, I): the prior, var = k(x, x) = 1
    >>> torch.allclose(var, torch.ones(3, 1), atol=1e-3)
    True
    """

    _reference = "loc"

    def __init__(self, a: torch.Tensor, resid: torch.Tensor, loc: torch.Tensor, log_scale: torch.Tensor,
                 bias: Optional[torch.Tensor] = None, sparse: bool = False, sample: bool = False):
        if loc.dim() != 2 or log_scale.shape != loc.shape or a.shape[-1] != loc.shape[-1]:
            raise ValueError(f"loc and log_scale must have shape (num_rows, M) with M = a.shape[-1] = "
                             f"{a.shape[-1]}, got loc {tuple(loc.shape)}, log_scale {tuple(log_scale.shape)}")
        if bias is not None and bias.shape != loc.shape[:1]:
            raise ValueError(f"bias must have shape ({loc.shape[0]},), got bias of shape {tuple(bias.shape)}")
        self.a, self.resid, self.loc, self.log_scale, self.bias = a, resid, loc, log_scale, bias
        self.sparse, self.sample = sparse, sample
        self.num_classes, self.batch_shape = loc.shape[0], a.shape[:-1]
        # both moments are linear utilities: a . m_r + b_r and a^2 . s_r^2 (s_r^2 = exp(2 log s_r)
        # of the gathered rows only)
        self._mean = LinearUtility(a, loc, bias, sparse=sparse)
        self._var = LinearUtility.of(a * a, LinearWeights(log_scale, None, sparse, transform=_variance))

    def moments(self, index: torch.Tensor):
        r"""``(mean, var)`` of :math:`f` at classes ``index`` (shape broadcasting as
        ``batch_shape + (m,)``, or (m,) shared): both ``broadcast(batch_shape, index.shape[:-1]) + (m,)``."""
        if index.dim() == 1:                                               # shared rows: two matrix products
            mean, var = self._mean.gather_shared(index), self._var.gather_shared(index)
        else:                                                              # per-entry rows
            mean, var = self._mean.gather(index), self._var.gather(index)
        return mean, var + self.resid.unsqueeze(-1)

    def gather(self, index):
        mean, var = self.moments(index)
        if not self.sample:
            return mean
        return mean + var.clamp(min=1e-12).sqrt() * torch.randn_like(mean)

    def gather_shared(self, index):
        return self.gather(index)   # a 1-D index: batch + (m,)

    def full(self):
        return self.gather(torch.arange(self.num_classes, device=self.loc.device))

    def expand(self, batch_shape):
        batch_shape = torch.Size(batch_shape)
        return SparseGPUtility(self.a.expand(batch_shape + self.a.shape[-1:]), self.resid.expand(batch_shape),
                               self.loc, self.log_scale, self.bias, self.sparse, self.sample)

    def __repr__(self):
        return (f"SparseGPUtility(batch_shape={tuple(self.batch_shape)}, num_rows={self.num_classes}, "
                f"M={self.loc.shape[-1]}, sample={self.sample})")


class VariableUtility(Utility):
    r"""The utilities of D variables of K categories each, from a utility over R rows:
    variable j's category k is row ``offsets[j] + k``. Batch shape
    ``broadcast(base.batch_shape, (D,))``; every gather is one gather of ``base``.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.models.latent_gp import VariableUtility
    >>> base = ar.utility.DenseUtility(torch.arange(10.0).expand(2, 1, 10))      # 2 datapoints, 10 rows
    >>> u = VariableUtility(base, torch.tensor([0, 5]), 5)               # 2 variables of 5 categories
    >>> u.batch_shape, u.gather_shared(torch.tensor([1]))[0].tolist()
    (torch.Size([2, 2]), [[1.0], [6.0]])
    """

    def __init__(self, base: Utility, offsets: torch.Tensor, num_classes: int):
        if offsets.dim() != 1 or int(offsets.max()) + num_classes > base.num_classes:
            raise ValueError(f"offsets must be a 1-D tensor with offsets + num_classes <= {base.num_classes} "
                             f"rows, got offsets={offsets.tolist()}, num_classes={num_classes}")
        self.base, self.offsets, self.num_classes = base, offsets, num_classes
        self.batch_shape = torch.Size(broadcast_shape(base.batch_shape, offsets.shape))

    dtype = property(lambda self: self.base.dtype)
    device = property(lambda self: self.base.device)

    def gather(self, index):
        if _validating():
            check_index(index, self.num_classes)
        return self.base.gather(self.offsets.unsqueeze(-1) + index)

    def gather_shared(self, index):
        """The (D, m) rows ``offsets[j] + index``: one shared gather of ``base`` when its last
        batch dim is 1 (e.g. one latent per datapoint), else a per-element gather."""
        if _validating():
            check_index(index, self.num_classes)
        rows = self.offsets.unsqueeze(-1) + index
        b = self.base.batch_shape
        if len(b) and b[-1] == 1:
            return self.base.gather_shared(rows.reshape(-1)).reshape(b[:-1] + rows.shape)
        return self.base.gather(rows)

    def full(self):
        return self.gather_shared(torch.arange(self.num_classes, device=self.offsets.device))

    def expand(self, batch_shape):
        batch_shape = torch.Size(batch_shape)
        if batch_shape == self.batch_shape:
            return self
        return VariableUtility(self.base.expand(batch_shape[:-1] + self.base.batch_shape[-1:]),
                               self.offsets, self.num_classes)

    def __repr__(self):
        return f"VariableUtility(batch_shape={tuple(self.batch_shape)}, num_classes={self.num_classes}, base={self.base!r})"


def _check_cardinalities(cardinalities) -> list:
    if isinstance(cardinalities, torch.Tensor):
        cardinalities = cardinalities.tolist()
    try:
        ks = [check_positive_int("cardinalities", k, low=2) for k in cardinalities]
    except (TypeError, ValueError):
        raise ValueError(f"cardinalities must be a non-empty sequence of ints >= 2, got "
                         f"cardinalities={cardinalities!r}") from None
    if not ks:
        raise ValueError("cardinalities must be a non-empty sequence of ints >= 2, got cardinalities=[]")
    return ks


def _likelihood_for(likelihood, num_classes: int):
    """``likelihood`` for variables of ``num_classes`` categories: a copy over all classes
    (the exact class sum) when its uniform negatives outnumber the other categories."""
    s = likelihood.num_negatives
    if s is not None and s > num_classes - 1 and likelihood.sampler.strategy in ("shared", "per_datapoint"):
        likelihood = copy.copy(likelihood)
        likelihood.sampler = PerDatapointNegatives(None)
    likelihood.check(num_classes)
    return likelihood


def _offsets(cardinalities) -> torch.Tensor:
    ks = torch.as_tensor(cardinalities, dtype=torch.int64)
    return torch.cumsum(ks, 0) - ks


def marginal_log_probs(x: torch.Tensor, cardinalities: Sequence[int], alpha: float = 0.5) -> torch.Tensor:
    r"""The (R,) per-variable log-frequencies :math:`\log\frac{c_{dk}+\alpha}{N_d+\alpha K_d}`
    of the observed entries of ``x`` (N, D) (-1: missing), rows in (variable, category)
    order: the frequency baseline, and a starting point for the per-row means :math:`b_r`.

    Example:

    >>> import torch
    >>> from pyro_ar.models.latent_gp import marginal_log_probs
    >>> marginal_log_probs(torch.tensor([[0, 2], [0, -1]]), [2, 3], alpha=1.0).exp().tolist()
    [0.75, 0.25, 0.25, 0.25, 0.5]
    """
    ks = _check_cardinalities(cardinalities)
    offsets = _offsets(ks).to(x.device)
    obs = x >= 0
    rows = (x + offsets)[obs]
    counts = torch.bincount(rows, minlength=sum(ks)).double() + alpha
    k = torch.tensor(ks, device=x.device)
    totals = torch.repeat_interleave(obs.sum(0).double() + alpha * k.double(), k)
    return (counts / totals).log()


def frequency_log_predictive(train: torch.Tensor, target: torch.Tensor, cardinalities: Sequence[int],
                             alpha: float = 0.5) -> torch.Tensor:
    """Log-probabilities of the target entries (``target >= 0``, row-major order) under the
    training marginals :func:`marginal_log_probs`: the frequency baseline of imputation.

    Example:

    >>> import torch
    >>> from pyro_ar.models.latent_gp import frequency_log_predictive
    >>> frequency_log_predictive(torch.tensor([[0], [0], [1]]), torch.tensor([[1], [-1]]), [2], 0.0).exp().tolist()
    [0.3333333333333333]
    """
    table = marginal_log_probs(train, cardinalities, alpha)
    rows = (target + _offsets(_check_cardinalities(cardinalities)).to(target.device))[target >= 0]
    return table[rows]


def _gp_map(utility, latent_dim: int) -> Optional["SparseGPMap"]:
    """The GP map of ``utility=``: a default :class:`SparseGPMap` for ``"gp"``, the one given,
    or None for ``"linear"``."""
    if utility == "gp":
        return SparseGPMap(latent_dim, 32)
    if utility == "linear":
        return None
    if not isinstance(utility, SparseGPMap):
        raise ValueError(f"utility must be 'gp', 'linear' or a SparseGPMap, got utility={utility!r}")
    if utility.inducing.shape[-1] != latent_dim:
        raise ValueError(f"utility is a SparseGPMap over {utility.inducing.shape[-1]} latent dimensions "
                         f"but the model has latent_dim={latent_dim}")
    return utility


class CategoricalLatentGP(CategoricalLatentModel):
    r"""The CLGP (module docstring) as a :class:`~pyro_ar.models.CategoricalLatentModel`: the
    same latent plate, posterior modules, guide (:class:`~pyro_ar.infer.LatentGuide`) and
    likelihood objects, with D categorical variables and a sparse-GP (or linear) utility map.

    :param cardinalities: :math:`K_1,\dots,K_D`.
    :param int latent_dim: Q.
    :param likelihood: a :class:`~pyro_ar.likelihoods.Likelihood` carrying its noise and
        negatives, or a name (``"ar"``, ``"exact"``, ``"bouchard"``, ...): that likelihood with
        the defaults of :attr:`~pyro_ar.models.latent.CategoricalLatentModel.likelihood_defaults`.
        Negatives are drawn within a variable's categories: a proposal is over K classes;
        variables with fewer categories than uniform negatives get the exact class sum.
    :param utility: ``"gp"`` (CLGP: a :class:`SparseGPMap` of 32 inducing points, unit
        lengthscale and kernel variance), a :class:`SparseGPMap` ``(latent_dim, num_inducing,
        lengthscale, variance)`` (the CLGP with those initial kernel parameters and M inducing
        points), or ``"linear"`` (the LGM).
    :param posterior: ``"amortised"`` (a :class:`~pyro_ar.models.SessionEncoder` of 64 units)
        or the posterior module itself (a :class:`~pyro_ar.models.SessionEncoder` over
        :math:`R = \sum_d K_d` items, or ``LocalPosterior(num_data, latent_dim, R)``).
    :param num_kl_rows: :math:`|U|`, rows of the KL estimate of :math:`q(v)` (default: the
        likelihood's number of negatives; None there too: all R rows, exact).
    :param init: an :class:`~pyro_ar.models.weights.Init`: ``bias`` (initial :math:`b` (R,),
        e.g. :func:`marginal_log_probs`; None: zeros), ``scale`` (of the initial :math:`m_r`, or
        :math:`w_r`; default 0.1) and ``posterior_scale`` (the initial :math:`s_r`; default 0.1).

    Example:

    >>> import torch, pyro, pyro_ar as ar
    >>> from pyro_ar.models import CategoricalLatentGP
    >>> x = torch.randint(0, 1000, (64, 3))                   # 64 datapoints, 3 variables of K = 1000
    >>> from pyro_ar.models.latent_gp import SparseGPMap
    >>> model = CategoricalLatentGP([1000] * 3, 2, ar.likelihoods.AR(negatives=ar.SharedNegatives(20)),
    ...                             utility=SparseGPMap(2, 8), subsample_size=16)
    >>> svi = pyro.infer.SVI(model, ar.infer.default_guide(model), ar.optim.lazy_adam({"lr": 0.01}),
    ...                      ar.infer.default_elbo())
    >>> loss = svi.step(x)                                     # O(B D (1 + s) M), whatever K
    >>> target = torch.full((4, 3), -1); target[:, 1] = x[:4, 1]
    >>> observed = x[:4].masked_fill(target >= 0, -1)          # impute variable 1 from the others
    >>> model.log_predictive(observed, target, num_samples=4).shape
    torch.Size([4])
    """

    input_names = ("x", "x")
    plate_name = "data"
    weight_choices = ("mle", "map")
    init_fields = ("scale", "bias", "posterior_scale")

    def __init__(self, cardinalities: Sequence[int], latent_dim: int = 2, likelihood="ar", *,
                 utility="gp", posterior="amortised", weights="mle", subsample_size: Optional[int] = None,
                 num_kl_rows: Optional[int] = None, sparse: bool = True, init: Optional[Init] = None,
                 prefix: str = "", site: str = "y"):
        ks = _check_cardinalities(cardinalities)
        init = check_init(init, type(self).__name__, self.init_fields)
        latent_dim = check_positive_int("latent_dim", latent_dim)
        gp_map = _gp_map(utility, latent_dim)
        if gp_map is not None and not isinstance(get_weights(weights, self.weight_choices), MLE):
            raise ValueError(f"utility='gp' has its own prior on the inducing outputs: it needs "
                             f"weights='mle', got weights={weights!r}")
        # the likelihood is over each variable's K_d categories, not over the R rows: checked per cardinality
        lik = self.make_likelihood(likelihood, sum(ks), sparse=sparse)
        super().__init__(sum(ks), latent_dim, Exact(lik.noise), posterior=posterior, weights=weights,
                         subsample_size=subsample_size, sparse=sparse, init=init._replace(posterior_scale=None),
                         prefix=prefix, site=site)
        self.likelihood, self.bouchard = lik, "sampled"
        self.cardinalities, self.utility_kind = ks, "linear" if gp_map is None else "gp"
        self.num_inducing = None if gp_map is None else gp_map.inducing.shape[0]
        self.num_kl_rows = check_positive_int("num_kl_rows", num_kl_rows, True)
        self.init_u_scale = 0.1 if init.posterior_scale is None else init.posterior_scale
        self.latent_site = prefix + "x"
        self.offsets = _offsets(ks)
        groups = {}
        for j, k in enumerate(ks):
            groups.setdefault(k, []).append(j)
        self.groups = [(k, torch.tensor(cols)) for k, cols in groups.items()]
        self._on_device = {}  # device -> _index_tables
        self.likelihoods = [_likelihood_for(lik, k) for k, _ in self.groups]
        self.gp_map = gp_map

    @property
    def num_variables(self) -> int:
        return len(self.cardinalities)

    # ---- CategoricalModel hooks ---------------------------------------------------------
    def parameter_shapes(self) -> Dict[str, tuple]:
        R = self.num_classes
        if self.utility_kind == "linear":
            return {"weight": (R, self.latent_dim), "bias": (R,)}
        return {"weight": (R, self.num_inducing), "log_scale": (R, self.num_inducing), "bias": (R,)}

    def init_parameter(self, name, shape, like):
        if name == "log_scale":
            return torch.full(shape, math.log(self.init_u_scale), dtype=like.dtype, device=like.device)
        if name == "bias" and self.init_bias is None:
            return torch.zeros(shape, dtype=like.dtype, device=like.device)
        return super().init_parameter(name, shape, like)

    def parameters(self, like=None):
        """The per-row parameters; for the GP also the factor :math:`-\\sum_r\\mathrm{KL}(q(v_r)\\Vert N(0,I))`,
        estimated on ``num_kl_rows`` uniform rows."""
        params = super().parameters(like)
        if self.gp_map is not None:
            pyro.factor(self.prefix + "u_kl", -self.inducing_kl(params))
        return params

    def inducing_kl(self, params, rows: Optional[torch.Tensor] = None) -> torch.Tensor:
        r"""Unbiased estimate of :math:`\sum_r\mathrm{KL}(N(m_r,\mathrm{diag}\,s_r^2)\Vert N(0,I))`
        from a uniform row subsample (``rows``; default ``num_kl_rows`` drawn, or all rows)."""
        R = self.num_classes
        U = self.num_kl_rows or self.num_negatives or R
        if rows is None and U < R:
            rows = sample_without_replacement(R, U, device=params["weight"].device)
        m, log_s = params["weight"], params["log_scale"]
        if rows is not None:
            m, log_s = (F.embedding(rows, p, sparse=self.sparse) for p in (m, log_s))
        kl = 0.5 * (torch.expm1(2 * log_s) + m * m) - log_s
        return kl.sum() * (1.0 if rows is None else R / len(rows))

    def check_inputs(self, x, y=None):
        D = self.num_variables
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != D or x.is_floating_point() \
                or x.dtype == torch.bool or x.is_complex():
            raise ValueError(f"x must be a 2-D integer tensor (N, {D}) of categories, -1 for missing, got "
                             f"{getattr(x, 'dtype', type(x).__name__)} {tuple(getattr(x, 'shape', ()))}")

    def check_values(self, x, y=None, rows=None):
        """Column d in [0, K_d) or -1 (missing), naming the first bad entry."""
        bad = (x < -1) | (x >= self._index_tables(x.device)[3])
        if bad.any():
            n, d = (int(i) for i in bad.nonzero()[0])
            row = n if rows is None else int(rows[n])
            raise ValueError(f"x[:, {d}] must lie in [0, {self.cardinalities[d]}) or be -1 (missing), "
                             f"got x[{row}, {d}]={int(x[n, d])}")

    def observation_groups(self, v):
        """One likelihood site per cardinality: ``(site, plate, v[:, columns], group)``."""
        one, cols = len(self.groups) == 1, self._index_tables(v.device)[2]
        return [(self.site if one else f"{self.site}_{k}", "variables" if one else f"variables_{k}",
                 v.index_select(-1, cols[g]), g) for g, (k, _) in enumerate(self.groups)]

    def group_likelihood(self, group=None):
        """The likelihood of the variables of ``group`` (all classes when they have fewer than the negatives)."""
        return self.likelihoods[group or 0]

    def row_utility(self, x: torch.Tensor, params, sample: bool = True) -> Utility:
        """The utility over all R rows at latents ``x`` (..., Q): GP (``sample``: draws) or linear."""
        if self.gp_map is None:
            return LinearUtility(x, params["weight"], params["bias"], sparse=self.sparse)
        a, resid = self.gp_map.project(x)
        return SparseGPUtility(a, resid, params["weight"], params["log_scale"], params["bias"],
                               self.sparse, sample)

    def minibatch_utility(self, omega, params, group=None, sample: bool = True):
        """:class:`VariableUtility` of the variables of ``group`` (all variables: group 0 when they share K)."""
        k = self.groups[group or 0][0]
        offsets = self._index_tables(omega.device)[1][group or 0]
        return VariableUtility(self.row_utility(omega, params, sample), offsets, k)

    def global_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Row ids ``offset_d + x_{nd}`` of the observed entries (-1 kept): the encoder's input."""
        return torch.where(x >= 0, x + self._index_tables(x.device)[0], torch.full_like(x, -1))

    def posterior_params(self, idx, items):
        return super().posterior_params(idx, self.global_rows(items))

    def _torch_modules(self) -> Dict[str, nn.Module]:
        """As the base class, and the GP map (``"gp"``)."""
        out = super()._torch_modules()
        if self.gp_map is not None:
            out["gp"] = self.gp_map
        return out

    def _index_tables(self, device: torch.device):
        """``(offsets, offsets of each group's variables, columns of each group, cardinalities)``
        on ``device``: copied there once, not at every step (a host-to-device copy makes the
        host wait)."""
        tables = self._on_device.get(device)
        if tables is None:
            cols = [c.to(device) for _, c in self.groups]
            offsets = self.offsets.to(device)
            tables = self._on_device[device] = (offsets, [offsets.index_select(0, c) for c in cols], cols,
                                                torch.tensor(self.cardinalities, device=device))
        return tables

    # ---- imputation ---------------------------------------------------------------------
    @torch.no_grad()
    def log_predictive(self, observed: torch.Tensor, target: torch.Tensor, num_samples: int = 16,
                       index: Optional[torch.Tensor] = None, chunk_size: int = 64) -> torch.Tensor:
        r"""Imputation: :math:`\log\frac1S\sum_s p(y_{nd}\mid f_s(x_s))` of every target entry
        (``target >= 0``, row-major order) with :math:`x_s\sim q(x_n)` from the ``observed``
        entries (same shape, -1 where missing) and :math:`f_s` drawn from :math:`q(f\mid x_s)`
        over all :math:`K_d` categories (:meth:`log_likelihood` with ``reduce="none"``, its
        draws seeded from the global RNG). ``index``: the datapoints' rows in the
        per-datapoint posterior (``posterior="local"``; required there)."""
        for t in (observed, target):
            self.check_inputs(t)
            self.check_values(t)
        if target.shape != observed.shape:
            raise ValueError(f"target must have the shape of observed {tuple(observed.shape)}, got "
                             f"{tuple(target.shape)}")
        if self.posterior_kind == "local" and (index is None or len(index) != len(observed)):
            raise ValueError(f"posterior='local' needs index, the {len(observed)} datapoints' rows in the "
                             f"training data, got index={index!r}")
        check_positive_int("num_samples", num_samples)
        return self.log_likelihood(observed, target, num_samples, reduce="none", chunk_size=chunk_size,
                                   index=index, seed=int(torch.randint(2 ** 31, ())))

    def evaluate_imputation(self, observed: torch.Tensor, target: torch.Tensor, num_samples: int = 16,
                            index: Optional[torch.Tensor] = None) -> dict:
        """Mean held-out log-likelihood per entry and perplexity (its exp(-mean)) of :meth:`log_predictive`."""
        logp = self.log_predictive(observed, target, num_samples, index)
        ll = float(logp.mean())
        return {"log_lik": ll, "perplexity": math.exp(-ll), "num_entries": len(logp)}

    def scores(self, *args, **kwargs):
        """Not defined for several variables: use :meth:`log_predictive`."""
        raise NotImplementedError("CategoricalLatentGP: use log_predictive(observed, target) or evaluate_imputation")

    evaluate_sessions = scores

    def _repr_fields(self):
        return {"D": self.num_variables, "R": self.num_classes, "Q": self.latent_dim,
                "utility": repr(self.utility_kind), "posterior": repr(self.posterior_kind)}

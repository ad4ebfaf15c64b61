r"""The base class of every noise: :class:`Noise`.

A noise is given by three primitives -- :math:`\log\phi`, a stable :math:`\log\Phi` and a
sampler -- and everything else that depends on the family is a method with a generic
default (GPyTorch's way: the base class has the generic method, a subclass overrides it
with its closed form):

* :meth:`~Noise.log_marginal`, :meth:`~Noise.log_marginal_all` -- quadrature
  (:mod:`pyro_ar.quadrature`);
* :meth:`~Noise.icdf` -- bisection on :math:`\log\Phi`;
* :meth:`~Noise.log_density_derivatives`, :meth:`~Noise.log_cdf_derivatives` -- autograd;
  :meth:`~Noise.weighted_log_cdf_derivatives` -- from :meth:`~Noise.log_cdf_derivatives`;
* :meth:`~Noise.relaxed_log_prob` -- none (``NotImplementedError``);
* :meth:`~Noise.distribution` -- :class:`~pyro_ar.noise.distribution.NoiseDistribution`.

The library families that override them are in :mod:`pyro_ar.noise.families`.
"""

import inspect
from typing import Callable, Hashable, Optional, Sequence, Union

import torch

import pyro.distributions as dist
from pyro.distributions.util import broadcast_shape

from ..numerics import as_tensors, check_sample_shape, softplus
from ..max_quadrature import marginal_offsets
from ..quadrature import DEFAULT_NUM_NODES, check_quadrature_args, log_marginal, log_marginal_all
from .distribution import NoiseDistribution

__all__ = ["Noise"]


#: bisection steps of the generic :meth:`Noise.icdf` (from a bracket of width <= 2^64: 2^-64
#: relative to the bracket, below float64 resolution for the quantiles of u in [1e-12, 1 - 1e-12])
_ICDF_STEPS = 128
Shape = Union[Sequence[int], torch.Size]  # (type aliases of the signatures)
Device = Optional[Union[str, torch.device]]
Number = Union[float, torch.Tensor]
TorchDistribution = dist.TorchDistribution


def _accepts_generator(f) -> bool:
    try:
        params = inspect.signature(f).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "generator" or p.kind == p.VAR_KEYWORD for p in params)


def _autograd_derivatives(fn, x: torch.Tensor):
    """Elementwise first and second derivatives of the elementwise ``fn`` at ``x`` by autograd
    (constants for differentiation; ``0 * x`` is added so that the results keep ``x``'s graph
    with a zero derivative along this path)."""
    with torch.enable_grad():
        xd = x.detach().requires_grad_(True)
        g, = torch.autograd.grad(fn(xd).sum(), xd, create_graph=True)
        h, = torch.autograd.grad(g.sum(), xd)
    zero = 0 * x
    return g.detach() + zero, h + zero


def _call_with_generator(f, shape, dtype, device, generator):
    """``f(shape, dtype, device)`` made reproducible by ``generator`` when ``f`` takes none:
    the global RNG is forked, seeded from ``generator``, and restored afterwards."""
    seed = int(torch.randint(2**62, (1,), generator=generator, device=generator.device))
    dev = torch.device(device) if device is not None else torch.device("cpu")
    with torch.random.fork_rng(devices=[dev] if dev.type == "cuda" else []):
        torch.manual_seed(seed)
        return f(shape, dtype, device)


class Noise:
    r"""A standard (location 0, scale 1) univariate noise :math:`\phi` with CDF :math:`\Phi`.

    Subclasses (or users, through the constructor) provide three functions:

    * ``log_density(e)`` -- :math:`\log\phi(e)`, elementwise;
    * ``log_cdf(x)`` -- :math:`\log\Phi(x)`, elementwise and numerically stable in both
      tails (this is the function the augmented likelihood sums over classes);
    * ``sample(shape, dtype, device[, generator])`` -- iid standard draws. If it is
      differentiable in nothing (as all standard draws are), :meth:`rsample_like` gives
      reparameterised location-scale draws ``loc + scale * sample(...)``.

    A user ``sample`` function may accept a ``generator`` keyword (a ``torch.Generator``);
    when it does not and :meth:`sample` is given one, the function runs under a forked
    global RNG seeded from that generator (reproducible for a given generator state, and the
    global RNG is left untouched). Check a noise you wrote with
    :func:`pyro_ar.testing.check_noise`.

    Example -- a Cauchy noise in three lines::

        cauchy = Noise(
            log_density=lambda e: -math.log(math.pi) - torch.log1p(e * e),
            log_cdf=lambda x: torch.log(0.5 + torch.atan(x) / math.pi),   # (lower tail ~1e-8 only)
            sample=lambda shape, dtype, device, generator=None: torch.tan(
                math.pi * (torch.rand(shape, dtype=dtype, device=device, generator=generator) - 0.5)),
            name="cauchy")

    :param callable log_density: :math:`e \mapsto \log\phi(e)`.
    :param callable log_cdf: :math:`x \mapsto \log\Phi(x)`.
    :param callable sample: ``(shape, dtype, device) -> Tensor`` of standard draws,
        optionally with a ``generator=None`` keyword.
    :param str name: a label used in reprs and error messages.

    Example:

    >>> import math, torch, pyro_ar as ar
    >>> wide_normal = ar.Noise(                        # N(0, 2^2) noise, from its two primitives
    ...     log_density=lambda e: -e * e / 8 - math.log(2 * math.sqrt(2 * math.pi)),
    ...     log_cdf=lambda x: torch.special.log_ndtr(x / 2), name="wide_normal")
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> p = ar.UtilityCategorical(psi, wide_normal).probs                # quadrature marginals
    >>> torch.allclose(p, ar.UtilityCategorical(psi / 2, "normal").probs)  # = probit at psi / 2
    True
    """

    name = "custom"

    def __init__(
        self,
        log_density: Optional[Callable] = None,
        log_cdf: Optional[Callable] = None,
        sample: Optional[Callable] = None,
        name: Optional[str] = None,
    ) -> None:
        if type(self) is Noise:
            missing = [
                n for n, f in (("log_density", log_density), ("log_cdf", log_cdf)) if f is None
            ]
            if missing:
                raise ValueError(
                    f"a custom Noise needs callables for {missing}; got log_density="
                    f"{log_density!r}, log_cdf={log_cdf!r}"
                )
            for argname, f in (("log_density", log_density), ("log_cdf", log_cdf),
                               ("sample", sample)):
                if f is not None and not callable(f):
                    raise ValueError(f"Noise argument {argname} must be callable, got {f!r}")
        self._log_density = log_density
        self._log_cdf = log_cdf
        self._sample = sample
        self._sample_takes_generator = sample is not None and _accepts_generator(sample)
        if name is not None:
            self.name = name

    # ---- the three primitives -------------------------------------------------------
    def log_density(self, e: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\phi(e)` of the standard noise, elementwise."""
        return self._log_density(e)

    def log_cdf(self, x: torch.Tensor) -> torch.Tensor:
        r""":math:`\log\Phi(x)` of the standard noise, elementwise, stable in both tails."""
        return self._log_cdf(x)

    def sample(self, shape: Shape, dtype: torch.dtype = torch.float32, device: Device = None,
               generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """``shape`` iid standard draws (no gradient), from ``generator`` when given.

        See the class docstring for user ``sample`` functions without a ``generator``.
        """
        if self._sample is None:
            raise NotImplementedError(
                f"noise {self.name!r} was built without a `sample` function; pass "
                "sample=(shape, dtype, device) -> Tensor to Noise(...) to draw from it"
            )
        shape = torch.Size(shape)
        if generator is None:
            return self._sample(shape, dtype, device)
        if self._sample_takes_generator:
            return self._sample(shape, dtype, device, generator=generator)
        return _call_with_generator(self._sample, shape, dtype, device, generator)

    @property
    def cache_key(self) -> Optional[Hashable]:
        """A hashable identity of the noise family for caches (``None`` to compare by identity).

        Library noises return their class name and parameters; user-built noises None.
        """
        if type(self) is Noise:
            return None
        return (type(self).__name__,)

    # ---- derived -----------------------------------------------------------------------
    @property
    def has_sample(self) -> bool:
        return type(self) is not Noise or self._sample is not None

    def rsample_like(self, loc: torch.Tensor, scale: torch.Tensor, sample_shape: Shape = ()) -> torch.Tensor:
        r"""Reparameterised draws :math:`loc + scale \cdot \varepsilon`, :math:`\varepsilon\sim\phi`."""
        shape = check_sample_shape(sample_shape) + broadcast_shape(loc.shape, scale.shape)
        return loc + scale * self.sample(shape, dtype=loc.dtype, device=loc.device)

    def distribution(self, loc: Number = 0.0, scale: Number = 1.0) -> TorchDistribution:
        r"""The location-scale Pyro distribution :math:`\phi((x - loc)/scale)/scale`.

        Library noises return Pyro's own distributions where they exist (so registered KL
        divergences apply under ``TraceMeanField_ELBO``); other noises return a
        :class:`NoiseDistribution`.
        """
        loc, scale = as_tensors(loc, scale)
        return NoiseDistribution(self, loc, scale)

    def mode_hint(self, x: torch.Tensor) -> torch.Tensor:
        """A cheap starting point for the quadrature's mode search (see quadrature.py).

        ``x`` holds, per integrand, ``logsumexp_k'(psi_k' - psi_y)``; the default is the
        Gumbel integrand's exact mode ``log(1 + exp(x))``.
        """
        return softplus(x)

    # ---- closed forms, with generic defaults (families override) ------------------------
    #: True when :math:`p(y\mid\psi) = \mathrm{softmax}(\psi)_y` and the optimal local posterior
    #: :math:`q^*(\varepsilon_n\mid\psi_n)` of the A&R bound is :math:`\mathrm{Gumbel}(\log(1 + \sum_{k\ne y}
    #: e^{\psi_k-\psi_y}), 1)` (the Gumbel family): the layers above take their closed-form
    #: paths (exact softmax step, ``GumbelLocalGuide``, ``ClosedFormELBO``, softmax baselines).
    closed_form = False

    def log_marginal(self, utility: torch.Tensor, labels: torch.Tensor,
                     num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        r""":math:`\log p(y\mid\psi) = \log\int\phi(e)\prod_{k\ne y}\Phi(e+\psi_y-\psi_k)\,de` of
        ``labels`` (broadcastable to ``utility.shape[:-1]``).

        Generic default: quadrature (:func:`pyro_ar.quadrature.log_marginal`, ``num_nodes``
        initial nodes); Gumbel overrides it with the log-softmax.
        """
        return log_marginal(utility, labels, self, num_nodes)

    def log_marginal_all(self, utility: torch.Tensor, num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        """:meth:`log_marginal` of every class, shape ``utility.shape`` (quadrature: O(K^2) per row)."""
        return log_marginal_all(utility, self, num_nodes)

    def log_marginal_rows(self, utility: torch.Tensor, rows: torch.Tensor, labels: torch.Tensor,
                          num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
        r""":math:`\log p(y_i\mid\psi_{r_i})` of ``labels`` (shape ``(B,)``) at the rows ``rows``
        (``(B,)``) of ``utility`` (``batch + (R, K)``), where several labels may share a row (a
        session's items; posterior draws in ``batch``): shape ``batch + (B,)``.

        Generic default: :meth:`log_marginal` of the gathered rows (one quadrature per label);
        Gumbel overrides it with one log-softmax per row, read at the labels.

        Example:

        >>> import torch
        >>> from pyro_ar.noise import NormalNoise
        >>> psi, rows, y = torch.randn(2, 4, dtype=torch.float64), torch.tensor([0, 0, 1]), torch.tensor([1, 3, 2])
        >>> lp = NormalNoise().log_marginal_rows(psi, rows, y)
        >>> torch.allclose(lp, NormalNoise().log_marginal(psi[rows], y))
        True
        """
        psi = utility[..., rows, :]
        return self.log_marginal(psi, labels.expand(psi.shape[:-1]), num_nodes)

    def log_normalizer(self, utility: torch.Tensor) -> torch.Tensor:
        r""":math:`A(\psi)` with :math:`\log p(y\mid\psi) = \psi_y - A(\psi)` for every y, over the last
        dim, where the marginal has that form (Gumbel: :math:`A = \log\sum_k e^{\psi_k}`, whose
        class-shard sums combine by a log-sum-exp: :func:`pyro_ar.distributed.sharded_evaluate`).

        Generic default: ``NotImplementedError`` -- a noise's marginal is an integral over all
        classes at once (:meth:`log_marginal`), with no such normaliser.
        """
        raise NotImplementedError(
            f"noise={self.name!r}: log p(y | psi) of this noise has no log-normaliser A(psi) with log p = "
            "psi_y - A (only the Gumbel noise's, the log-sum-exp; softmax-only paths need noise='gumbel'); "
            "use log_marginal / log_marginal_all")

    def check_num_nodes(self, utility: torch.Tensor, num_nodes: int) -> int:
        """``num_nodes`` of :meth:`log_marginal` checked for ``utility`` (returned as an int;
        ``ValueError`` naming it). Generic default: the quadrature's checks
        (:func:`pyro_ar.quadrature.check_quadrature_args`: float32/64 utilities, an integer in
        ``[5, MAX_NUM_NODES]``); Gumbel checks the integer only (its marginal uses no nodes)."""
        return check_quadrature_args(utility, num_nodes)

    def marginal_offsets(self, log_probs: torch.Tensor, tol: float = 1e-6) -> torch.Tensor:
        r"""Utilities :math:`b` (shape ``(K,)``) whose categorical marginals are ``exp(log_probs)``:
        :math:`p(\arg\max_k(b_k + \varepsilon_k) = k) = p_k`, e.g. output biases at the unigram fit
        of this noise (:func:`pyro_ar.models.unigram_biases`). Unique up to a common constant;
        the solution returned has the mean of ``log_probs``.

        Generic default: Newton steps on the marginals through the distribution of the maximum
        (:func:`pyro_ar.max_quadrature.marginal_offsets`, O(K) work per grid node, each
        :math:`|\log p(k\mid b) - \log p_k|` within ``tol``); Gumbel overrides it with
        ``log_probs`` itself.

        Example:

        >>> import torch, pyro_ar as ar
        >>> log_p = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64).log()
        >>> b = ar.noise.NormalNoise().marginal_offsets(log_p)
        >>> [round(p, 5) for p in ar.UtilityCategorical(b, "normal").probs.tolist()]
        [0.7, 0.2, 0.1]
        """
        return marginal_offsets(log_probs, self, tol=tol)

    def log_density_derivatives(self, e: torch.Tensor):
        r"""``(d/de, d^2/de^2)`` of :math:`\log\phi(e)`, elementwise (generic: autograd)."""
        return _autograd_derivatives(self.log_density, e)

    def log_cdf_derivatives(self, x: torch.Tensor):
        r"""``(d/dx, d^2/dx^2)`` of :math:`\log\Phi(x)`, elementwise (generic: autograd)."""
        return _autograd_derivatives(self.log_cdf, x)

    def weighted_log_cdf_derivatives(self, x: torch.Tensor, w: torch.Tensor):
        r""":math:`(\sum_j w_j (\log\Phi)'(x_j),\ \sum_j w_j (\log\Phi)''(x_j))` over the last
        dim of ``x``, ``w`` broadcastable to it: the class sums of the local fits' derivatives
        (:func:`~pyro_ar.infer.local_fit.local_derivatives`). Plain dot products: a term of weight
        0 whose derivative is infinite makes a sum NaN, and the caller redoes it with the term
        masked. Generic: :meth:`log_cdf_derivatives` and two dot products; normal: from the
        Mills ratio without the second derivative's buffer."""
        g, h = self.log_cdf_derivatives(x)
        w = w.to(g.dtype)
        return torch.linalg.vecdot(g, w), torch.linalg.vecdot(h, w)

    def icdf(self, u: torch.Tensor) -> torch.Tensor:
        r"""The quantile :math:`\Phi^{-1}(u)`, elementwise, for ``u`` in (0, 1) (inversion draws).

        Generic default: bisection on :math:`\log\Phi` in float64, from the bracket [-1, 1]
        doubled until it holds the root, then 128 halvings (to float64 resolution);
        families with a closed form override it.
        """
        with torch.no_grad():
            target = u.double().log()
            lo, hi = -torch.ones_like(target), torch.ones_like(target)
            for _ in range(64):  # widen to [-2^64, 2^64] at most
                low, high = self.log_cdf(lo) > target, self.log_cdf(hi) < target
                if not (low.any() or high.any()):
                    break
                lo, hi = torch.where(low, 2 * lo, lo), torch.where(high, 2 * hi, hi)
            for _ in range(_ICDF_STEPS):
                mid = 0.5 * (lo + hi)
                left = self.log_cdf(mid) < target
                lo, hi = torch.where(left, mid, lo), torch.where(left, hi, mid)
            return (0.5 * (lo + hi)).to(u.dtype)

    def relaxed_log_prob(self, utility: torch.Tensor, temperature: torch.Tensor,
                         value: torch.Tensor) -> torch.Tensor:
        r"""Log-density of :math:`\mathrm{softmax}((\psi + \varepsilon)/\tau)` on the simplex.

        It has a closed form only for Gumbel noise (the Concrete density); the generic
        default raises ``NotImplementedError`` (draw with ``rsample`` only).
        """
        raise NotImplementedError(
            f"the relaxed density has a closed form only for Gumbel noise (the Concrete "
            f"density); noise={self.name!r} has none: use rsample only")

    @classmethod
    def from_distribution(cls, d: TorchDistribution, name: Optional[str] = None) -> "Noise":
        """A :class:`Noise` from a scalar torch/Pyro distribution with ``log_prob`` and ``cdf``.

        ``log Phi`` is ``log(cdf(x))`` clamped away from ``log 0``; provide a dedicated
        ``log_cdf`` through the constructor when the lower tail matters.
        """
        if d.batch_shape != torch.Size() or d.event_shape != torch.Size():
            raise ValueError(
                "Noise.from_distribution needs a scalar distribution (batch_shape == "
                f"event_shape == ()), got batch_shape={tuple(d.batch_shape)}, "
                f"event_shape={tuple(d.event_shape)}"
            )

        def log_cdf(x):
            tiny = torch.finfo(x.dtype).tiny
            return torch.log(d.cdf(x).clamp(min=tiny))

        def sample(shape, dtype, device):  # (a generator is honoured through a forked RNG)
            return d.sample(shape).to(dtype=dtype, device=device)

        return cls(d.log_prob, log_cdf, sample, name=name or type(d).__name__.lower())

    def __repr__(self):
        return f"{type(self).__name__}(name={self.name!r})"

r"""Marginals of every class at once through the distribution of the maximum, and their
inverse: the utilities whose marginals are given probabilities.

With :math:`G(t) = \prod_j \Phi(t - \psi_j)` the CDF of :math:`M = \max_j(\psi_j + \varepsilon_j)`,
:math:`p_k = \int G(t)\,\phi(t-\psi_k)/\Phi(t-\psi_k)\,dt`, so one grid of t serves all K
classes: O(K) per node, against O(K^2) for the K integrals of
:func:`pyro_ar.quadrature.log_marginal_all`. :func:`log_marginal_all_via_max` evaluates it;
:func:`marginal_offsets` inverts it (behind :meth:`pyro_ar.noise.Noise.marginal_offsets`,
e.g. output biases at a model's unigram fit, :func:`pyro_ar.models.unigram_biases`).
Like :mod:`pyro_ar.quadrature` it sits below :mod:`pyro_ar.noise` and takes a noise object.
"""

import math
import warnings

import torch

from .numerics import check_int
from .quadrature import _CHUNK_ELEMENTS, MAX_NUM_NODES, _check_noise, check_quadrature_args

__all__ = ["log_marginal_all_via_max", "marginal_offsets", "check_log_probs"]

#: the maximum's mass left outside the grid of :func:`log_marginal_all_via_max`: below t_lo
#: (log G(t_lo) = -50) and above t_hi (1 - G(t_hi) = 1e-18); it bounds every class's error
_MAX_LOG_LOW, _MAX_LOG_HIGH = -50.0, -1e-18
_MAX_START_NODES = 129


def _log_max_cdf(noise, t, b):
    r""":math:`\log G(t) = \sum_j \log\Phi(t - b_j)`, the log-CDF of :math:`\max_j(b_j + \varepsilon_j)`,
    for ``t`` of shape ``(N,)`` and one row ``b`` of shape ``(K,)`` (class chunks bound memory)."""
    step = max(1, _CHUNK_ELEMENTS // max(1, t.shape[0]))
    return sum(noise.log_cdf(t.unsqueeze(-1) - b[i:i + step]).sum(-1) for i in range(0, b.shape[0], step))


def _max_quantile(noise, b, log_level):
    """The ``t`` where ``log G(t) = log_level`` (bracketed by doubling, then 60 halvings)."""
    lo, hi = b.max() - 1.0, b.max() + 1.0
    for _ in range(64):  # widen until log G(lo) <= level < log G(hi)
        low_ok = bool(_log_max_cdf(noise, lo.view(1), b) <= log_level)
        high_ok = bool(_log_max_cdf(noise, hi.view(1), b) > log_level)
        if low_ok and high_ok:
            break
        width = hi - lo
        lo, hi = (lo if low_ok else lo - width), (hi if high_ok else hi + width)
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if bool(_log_max_cdf(noise, mid.view(1), b) > log_level):
            hi = mid
        else:
            lo = mid
    return hi


def _max_grid(noise, b, num_nodes):
    """The grid ``t`` of :func:`log_marginal_all_via_max` for one row ``b`` and ``log G(t) + log dt``."""
    t_lo, t_hi = _max_quantile(noise, b, _MAX_LOG_LOW), _max_quantile(noise, b, _MAX_LOG_HIGH)
    t = torch.linspace(float(t_lo), float(t_hi), num_nodes, dtype=b.dtype, device=b.device)
    return t, _log_max_cdf(noise, t, b) + math.log(float(t_hi - t_lo) / (num_nodes - 1))


def _max_chunks(noise, b, grid):
    """``(slice, x = t - b_k, log G h_k dt)`` of the class chunks of ``b`` on ``grid``, each ``(N, chunk)``."""
    t, log_g = grid
    step = max(1, _CHUNK_ELEMENTS // t.shape[0])
    for i in range(0, b.shape[0], step):
        x = t.unsqueeze(-1) - b[i:i + step]
        yield slice(i, i + step), x, log_g.unsqueeze(-1) + noise.log_density(x) - noise.log_cdf(x)


def _max_rule(noise, b, grid, slopes=False):
    r"""``(log p, log p on the half grid, slopes or None)`` of every class of one row ``b``
    (float64, ``(K,)``) by the trapezoid rule on ``grid`` (see :func:`log_marginal_all_via_max`);
    ``slopes``: :math:`\partial\log p_k/\partial b_k = \mathbb{E}_k[-(\log\phi)'(t - b_k)]`,
    :math:`\mathbb{E}_k` under the density :math:`G h_k / p_k` of the maximum."""
    full, half, slope = [], [], []
    for _, x, terms in _max_chunks(noise, b, grid):
        lp = terms.logsumexp(0)
        full.append(lp)
        half.append(terms[::2].logsumexp(0) + math.log(2.0))
        if slopes:
            slope.append(((terms - lp).exp() * -noise.log_density_derivatives(x)[0]).sum(0))
    return torch.cat(full), torch.cat(half), (torch.cat(slope) if slopes else None)


def _max_jvp(noise, b, grid, lp, slope, v):
    r"""The Jacobian of the log-marginals in ``b`` times ``v``, in O(K x nodes):
    :math:`\partial\log p_k/\partial b_j = -\mathbb{E}_k[h_j]` for :math:`j \ne k`, so
    :math:`(Jv)_k = \mathrm{slope}_k v_k - \mathbb{E}_k[\sum_j h_j v_j] + \mathbb{E}_k[h_k] v_k`."""
    t, log_g = grid
    total = torch.zeros_like(t)                                  # sum_j h_j(t) v_j
    for sl, _, terms in _max_chunks(noise, b, grid):
        total += ((terms - log_g.unsqueeze(-1)).exp() * v[sl]).sum(-1)
    out = []
    for sl, _, terms in _max_chunks(noise, b, grid):
        w = (terms - lp[sl]).exp()                               # the density G h_k / p_k
        h = (terms - log_g.unsqueeze(-1)).exp()
        out.append(slope[sl] * v[sl] - (w * total.unsqueeze(-1)).sum(0) + (w * h).sum(0) * v[sl])
    return torch.cat(out)


def _max_marginals(noise, b, num_nodes, tol, slopes=False):
    """``(log p, slopes, grid)``: :func:`_max_rule` with the node count doubled until the half
    grid agrees within ``tol`` (a ``RuntimeWarning`` where ``MAX_NUM_NODES`` does not)."""
    n = max(int(num_nodes), 5) | 1
    while True:
        grid = _max_grid(noise, b, n)
        full, half, slope = _max_rule(noise, b, grid, slopes)
        err = (full - half).abs().max().item() if full.numel() else 0.0
        if not err > tol or n >= MAX_NUM_NODES:
            break
        n = 2 * n - 1
    if err > tol or not bool(torch.isfinite(full).all()):
        warnings.warn(f"marginals through the maximum over the {noise.name!r} noise: the grid of {n} "
                      f"nodes still changes log p by {err:.1e} from half as many (tol={tol:g}); are the "
                      "noise's tails light and its log-density smooth?", RuntimeWarning)
    return full, slope, grid


def log_marginal_all_via_max(utility: torch.Tensor, noise, num_nodes: int = _MAX_START_NODES,
                             tol: float = 1e-8) -> torch.Tensor:
    r"""Log-probabilities of every class, as :func:`~pyro_ar.quadrature.log_marginal_all`, in O(K x nodes) per row
    instead of O(K^2 x nodes): through the distribution of the maximum.

    With :math:`G(t) = \prod_j \Phi(t - \psi_j)` the CDF of :math:`M = \max_j(\psi_j + \varepsilon_j)`
    and the reverse hazard :math:`h_k(t) = \phi(t - \psi_k)/\Phi(t - \psi_k)`,

    .. math::  p(y = k\mid\psi) = \int \phi(t - \psi_k)\prod_{j\ne k}\Phi(t - \psi_j)\,dt
               = \int G(t)\, h_k(t)\, dt

    (eq. 5 with :math:`t = e + \psi_k`): one :math:`\log G` on a grid of t serves all K
    classes. The rule is the trapezoid on equal steps over :math:`[t_{lo}, t_{hi}]`,
    :math:`\log G(t_{lo}) = -50` and :math:`1 - G(t_{hi}) = 10^{-18}`; since
    :math:`G h_k \le G' = G\sum_j h_j`, each class's mass outside is at most the maximum's. The
    node count starts at ``num_nodes`` and doubles (up to ``MAX_NUM_NODES``) until the
    half grid gives every log-probability within ``tol``; a ``RuntimeWarning`` says when
    that did not suffice -- the equal steps suit noises whose tails fall exponentially or
    faster (normal, logistic, Gumbel); heavy tails (Student-t) need :func:`~pyro_ar.quadrature.log_marginal_all`.
    Computed in float64 and returned in ``utility``'s dtype; no gradient.

    :param utility: tensor ``batch_shape + (K,)``.
    :param noise: a :class:`~pyro_ar.noise.Noise`.
    :param int num_nodes: the initial number of grid nodes (made odd).
    :param float tol: the largest change of a log-probability from the half grid.

    Example:

    >>> import torch
    >>> from pyro_ar.noise import NormalNoise
    >>> from pyro_ar.max_quadrature import log_marginal_all_via_max
    >>> from pyro_ar.quadrature import log_marginal_all
    >>> psi = torch.randn(2, 10, dtype=torch.float64)
    >>> torch.allclose(log_marginal_all_via_max(psi, NormalNoise()), log_marginal_all(psi, NormalNoise()))
    True
    """
    num_nodes = check_quadrature_args(utility, num_nodes)
    _check_noise(noise)
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise ValueError(f"tol must be a positive number, got tol={tol!r}")
    with torch.no_grad():
        rows = utility.detach().double().reshape(-1, utility.shape[-1])
        out = torch.stack([_max_marginals(noise, b, num_nodes, tol)[0] for b in rows]) if rows.shape[0] \
            else rows.clone()
    return out.reshape(utility.shape).to(utility.dtype)


def check_log_probs(log_probs: torch.Tensor) -> torch.Tensor:
    """``log_probs`` if it is a ``(K,)`` tensor of finite log-probabilities whose exponentials
    sum to one (within 1e-6 in log), else a ValueError naming the argument and what is wrong.

    Example:

    >>> import torch
    >>> from pyro_ar.max_quadrature import check_log_probs
    >>> check_log_probs(torch.tensor([0.5, 0.6]).log())
    Traceback (most recent call last):
    ...
    ValueError: log_probs must be finite log-probabilities whose exponentials sum to one, got log(sum(exp(log_probs))) = 0.0953
    """
    if not isinstance(log_probs, torch.Tensor) or log_probs.dim() != 1 or not log_probs.is_floating_point():
        raise ValueError(f"log_probs must be a float tensor of shape (K,), got "
                         f"{tuple(log_probs.shape) if isinstance(log_probs, torch.Tensor) else log_probs!r}")
    total = log_probs.detach().double().logsumexp(0).item() if log_probs.numel() else -math.inf
    if not bool(torch.isfinite(log_probs).all()) or abs(total) > 1e-6:
        raise ValueError(f"log_probs must be finite log-probabilities whose exponentials sum to one, got "
                         f"log(sum(exp(log_probs))) = {total:.3g}")
    return log_probs


def marginal_offsets(log_probs: torch.Tensor, noise, tol: float = 1e-6, max_steps: int = 50,
                     num_nodes: int = _MAX_START_NODES) -> torch.Tensor:
    r"""Utilities :math:`b` whose categorical marginals under ``noise`` are ``exp(log_probs)``:
    :math:`p(y = k\mid b) = p_k` for every class, e.g. output biases at a model's unigram fit.

    For Gumbel noise :math:`b = \log p` (the softmax); for any other noise, Newton steps on
    the diagonal of the Jacobian,

    .. math::  b_k \leftarrow b_k + \frac{\log p_k - \log p(k\mid b)}{\partial\log p(k\mid b)/\partial b_k},
               \qquad \frac{\partial\log p(k\mid b)}{\partial b_k} = \mathbb{E}_k[-(\log\phi)'(t - b_k)],

    with the marginals and the expectation under :math:`G h_k / p_k` from the grid of
    :func:`log_marginal_all_via_max` (O(K x nodes) per step, no O(K^2) term), each step at
    most 2 in size, from :math:`b = 0`, until every :math:`|\log p(k\mid b) - \log p_k|` is
    below ``tol`` (a ``RuntimeWarning`` otherwise). The marginals do not change when a
    constant is added to every :math:`b_k`; the solution returned has the mean of
    ``log_probs``. On Brown's unigram (K = 25,275, normal noise) it takes 6 steps.

    :param log_probs: ``(K,)`` log-probabilities (their exponentials sum to one).
    :param noise: a :class:`~pyro_ar.noise.Noise`.
    :param float tol: the largest error of a log-probability.
    :param int max_steps: at most this many Newton steps.
    :param int num_nodes: the grid's initial node count (:func:`log_marginal_all_via_max`).
    :returns: ``(K,)`` utilities in ``log_probs``' dtype.

    Example:

    >>> import torch
    >>> from pyro_ar.noise import NormalNoise
    >>> from pyro_ar.max_quadrature import marginal_offsets
    >>> from pyro_ar.quadrature import log_marginal_all
    >>> log_p = torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64).log()
    >>> b = marginal_offsets(log_p, NormalNoise())
    >>> [round(p, 5) for p in log_marginal_all(b, NormalNoise()).exp().tolist()]
    [0.5, 0.3, 0.2]
    """
    _check_noise(noise)
    check_quadrature_args(log_probs, num_nodes)
    max_steps = check_int("max_steps", max_steps, low=1)
    if not (isinstance(tol, (int, float)) and tol > 0):
        raise ValueError(f"tol must be a positive number, got tol={tol!r}")
    target = check_log_probs(log_probs).detach().double()
    b = torch.zeros_like(target)
    with torch.no_grad():
        for _ in range(max_steps):
            lp, slope, grid = _max_marginals(noise, b, num_nodes, tol / 10, slopes=True)
            resid = target - lp
            err = resid.abs().max().item()
            if not err > tol:
                break
            step = (resid / slope.clamp(min=1e-6)).clamp(-2.0, 2.0)
            # the step's length along its direction that best cancels the residual to first
            # order (the other classes move against each step: K = 2 would oscillate)
            change = _max_jvp(noise, b, grid, lp, slope, step)
            scale = ((change * resid).sum() / (change * change).sum().clamp(min=1e-300)).clamp(0.1, 1.0)
            b = b + scale * step
            b = b - b.mean() + target.mean()
    if err > tol:
        warnings.warn(f"marginal_offsets: after {max_steps} steps a marginal is still {err:.1e} off in "
                      f"log (tol={tol:g}) for the {noise.name!r} noise", RuntimeWarning)
    return b.to(log_probs.dtype)

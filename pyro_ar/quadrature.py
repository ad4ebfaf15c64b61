r"""Exact marginals of the utility categorical by one-dimensional quadrature.

For any noise (eq. 5 of Ruiz et al., 2018),

.. math::

    p(y = k \mid \psi) = \int \phi(e) \prod_{k' \ne k} \Phi(e + \psi_k - \psi_{k'})\, de
                       = \int \exp f_k(e)\, de,

with the log-integrand :math:`f_k(e) = \log\phi(e) + \sum_{k'\ne k}\log\Phi(e + d_{kk'})`,
:math:`d_{kk'} = \psi_k - \psi_{k'}`. We locate the mode :math:`e^*` of :math:`f_k` by damped
Newton steps (backtracking on :math:`f_k`, so no step overshoots where :math:`f_k` is flat),
measure the interval around it where :math:`f_k` stays within 1/2 of its maximum (centre
:math:`c`, half-length :math:`\sigma`; for a Gaussian integrand exactly its mean and standard
deviation), and apply the double-exponential (sinh-sinh) rule there, in log space:

.. math::

    \log p(y=k\mid\psi) \approx \log\sigma
        + \operatorname{logsumexp}_i\big(\log w_i + f_k(c + \sigma x_i)\big),
    \qquad x_i = \sinh(\tfrac{\pi}{2}\sinh t_i).

The rule converges exponentially for smooth integrands whatever their tails (Gaussian,
Gumbel, logistic, but also the polynomial tails of a Student-t noise); the node count is
doubled where the nested half rule disagrees (up to 2049 nodes), and a ``RuntimeWarning``
says when that did not suffice (non-smooth densities, e.g. Laplace, converge only
algebraically). Measured in float64 with the default 257 nodes
(``python -m benchmarks.accuracy_report``): within 1.1e-14 of ``log_softmax`` for Gumbel
noise (K up to 1000, logits of scale 5); the K = 2 probit closed form to 7e-16; the K = 50
probabilities of Gumbel, normal, logistic and Student-t (3 d.o.f.) noise sum to one within
1.5e-14, Laplace's within 5.9e-7 [claim quadrature-closed-forms] [claim accuracy-report].

The nodes are treated as constants for differentiation, so gradients with respect to
:math:`\psi` are the quadrature of the integrand's gradient. Derivatives of :math:`f_k` for
Newton come from autograd, so any :class:`~pyro_ar.noise.Noise` works unchanged.

Every class of one row at once, in O(K) per node instead of O(K^2): through the distribution
of the maximum, :mod:`pyro_ar.max_quadrature` (and its inverse, the utilities whose marginals
are given probabilities).

This module is the generic default behind :meth:`pyro_ar.noise.Noise.log_marginal` (which
noises with a closed form, such as Gumbel, override); it sits below :mod:`pyro_ar.noise`
and takes a noise *object* (resolve a name with :func:`pyro_ar.noise.get_noise`).
"""

import functools
import math
import warnings


import numpy as np
import torch

from .numerics import check_float_tensor, check_int

__all__ = ["log_marginal", "log_marginal_all", "check_quadrature_args", "gauss_hermite", "gauss_gumbel",
           "DEFAULT_NUM_NODES", "MAX_NUM_NODES"]

DEFAULT_NUM_NODES = 257
#: upper bound on ``num_nodes``: the rule converges exponentially, so 257 nodes (refined up
#: to 2049) reach float64 precision; each node costs O(K) per datapoint (10^7 nodes took 6 s
#: for one row), so more only spends time
MAX_NUM_NODES = 4097
_MIN_NUM_NODES = 5
_MAX_REFINEMENTS = 3
_MAX_NEWTON_STEPS = 100
_MAX_HALVINGS = 40
#: elements (datapoints x classes x nodes) evaluated at once; bounds peak memory
_CHUNK_ELEMENTS = 1 << 23


_HERMITE = {}


def gauss_hermite(num_nodes: int, like: torch.Tensor):
    r"""Nodes :math:`z_i` and weights :math:`w_i` of the ``num_nodes``-point Gauss-Hermite rule for
    a standard normal, :math:`\mathbb{E}_{z\sim N(0,1)}[g(z)] \approx \sum_i w_i\, g(z_i)`
    (exact for polynomials of degree below ``2 * num_nodes``), in ``like``'s dtype and device
    (cached per size, dtype and device). The expectations under a Gaussian :math:`q(\varepsilon)`
    of the local fit and of :class:`~pyro_ar.distributions.GaussianExpectedFactor` use it.

    Example:

    >>> import torch
    >>> from pyro_ar.quadrature import gauss_hermite
    >>> z, w = gauss_hermite(4, torch.zeros((), dtype=torch.float64))
    >>> round(w.sum().item(), 12), round((w * z ** 2).sum().item(), 12)   # E[1], E[z^2]
    (1.0, 1.0)
    """
    num_nodes = check_int("num_nodes", num_nodes, low=1)
    check_float_tensor("like", like, what=" (its dtype and device are the nodes' and weights')")
    key = (num_nodes, like.dtype, like.device)
    if key not in _HERMITE:
        x, wt = np.polynomial.hermite.hermgauss(num_nodes)
        _HERMITE[key] = (torch.tensor(x * math.sqrt(2.0), dtype=like.dtype, device=like.device),
                         torch.tensor(wt / math.sqrt(math.pi), dtype=like.dtype, device=like.device))
    return _HERMITE[key]


_GUMBEL = {}


def gauss_gumbel(num_nodes: int, like: torch.Tensor):
    r"""Nodes :math:`z_i` and weights :math:`w_i` of the ``num_nodes``-point Gauss rule for the
    standard Gumbel law, :math:`\mathbb{E}_{z\sim\mathrm{Gumbel}(0,1)}[g(z)] \approx \sum_i w_i\, g(z_i)`
    with density :math:`e^{-z - e^{-z}}`, exact for polynomials of degree below
    ``2 * num_nodes``; in ``like``'s dtype and device (cached). The expectations under a Gumbel
    :math:`q(\varepsilon)` of the local fit (:func:`~pyro_ar.infer.local_fit.gumbel_local`) use it.

    The rule is Golub and Welsch's: the eigenvalues of the Jacobi matrix of the orthonormal
    polynomials of the law are the nodes, the squared first components of its eigenvectors the
    weights. The recurrence coefficients come from the Stieltjes procedure (orthonormal, in
    float64) on the trapezoidal discretisation of the density on :math:`[-6, 150]` with step
    :math:`2\cdot 10^{-3}` (smooth, and the mass outside with the polynomials of degree below
    40 negligible), so that the moments of the rule match the Gumbel's, from its cumulants
    :math:`\kappa_1 = \gamma`, :math:`\kappa_n = (n-1)!\,\zeta(n)`, to a relative 1e-12 for
    up to 20 nodes (``tests/test_quadrature.py``).

    Example:

    >>> import math, torch
    >>> from pyro_ar.quadrature import gauss_gumbel
    >>> z, w = gauss_gumbel(4, torch.zeros((), dtype=torch.float64))
    >>> round(w.sum().item(), 12), round((w * z).sum().item(), 12)    # E[1], E[z] = Euler's gamma
    (1.0, 0.577215664902)
    >>> round((w * z ** 2).sum().item() - 0.5772156649015329 ** 2, 12) == round(math.pi ** 2 / 6, 12)
    True
    """
    num_nodes = check_int("num_nodes", num_nodes, low=1)
    if num_nodes > 20:
        raise ValueError(f"num_nodes must be at most 20 (the rule's accuracy is checked up to there), got {num_nodes}")
    check_float_tensor("like", like, what=" (its dtype and device are the nodes' and weights')")
    key = (num_nodes, like.dtype, like.device)
    if key not in _GUMBEL:
        x = np.arange(-6.0, 150.0, 2e-3)
        mass = np.exp(-x - np.exp(-x)) * 2e-3                      # trapezoid (the ends are ~0)
        alpha, beta = np.zeros(num_nodes), np.zeros(num_nodes)
        prev, cur = np.zeros_like(x), np.full_like(x, 1.0 / math.sqrt(mass.sum()))
        for k in range(num_nodes):
            alpha[k] = np.sum(mass * x * cur * cur)
            nxt = (x - alpha[k]) * cur - (beta[k - 1] if k else 0.0) * prev
            beta[k] = math.sqrt(np.sum(mass * nxt * nxt))
            prev, cur = cur, nxt / beta[k]
        nodes, vecs = np.linalg.eigh(np.diag(alpha) + np.diag(beta[:-1], 1) + np.diag(beta[:-1], -1))
        _GUMBEL[key] = (torch.tensor(nodes, dtype=like.dtype, device=like.device),
                        torch.tensor(vecs[0] ** 2, dtype=like.dtype, device=like.device))
    return _GUMBEL[key]


def _log_integrand(noise, e, d, mask):
    """f(e) = log phi(e) + sum_{mask} log Phi(e + d); e: (...,), d, mask: (..., M)."""
    terms = noise.log_cdf(e.unsqueeze(-1) + d)
    return noise.log_density(e) + torch.where(mask, terms, torch.zeros_like(terms)).sum(-1)


def _find_mode(noise, d, mask):
    """Damped Newton on the (detached) log-integrand; returns (mode, curvature scale)."""
    d, mask = d.detach(), mask.detach()
    neg_inf = torch.tensor(-math.inf, dtype=d.dtype, device=d.device)
    lse = torch.logsumexp(torch.where(mask, -d, neg_inf), dim=-1)
    e = noise.mode_hint(lse)
    e = torch.where(torch.isfinite(e), e, torch.zeros_like(e))

    def f_and_derivs(e):
        with torch.enable_grad():
            e = e.detach().requires_grad_(True)
            f = _log_integrand(noise, e, d, mask)
            (g,) = torch.autograd.grad(f.sum(), e, create_graph=True)
            (h,) = torch.autograd.grad(g.sum(), e)
        return f.detach(), g.detach(), h.detach()

    # f may decrease by rounding error near the mode: accept such steps instead of
    # halving them dozens of times.
    slack = 64 * torch.finfo(d.dtype).eps
    width_tol = max(1e-6, 1e3 * torch.finfo(d.dtype).eps)
    f, g, h = f_and_derivs(e)
    active = torch.ones_like(e, dtype=torch.bool)
    trust = torch.ones_like(e)
    for _ in range(_MAX_NEWTON_STEPS):
        # Newton where the integrand is locally concave; elsewhere an ascent step whose
        # length doubles while it keeps being accepted in full (so that a mode far from
        # the starting point is reached in a few steps).
        newton = h < 0
        step = torch.where(newton, -g / h, torch.sign(g) * trust)
        step = torch.where(torch.isfinite(step) & active, step, torch.zeros_like(step))
        full_step = step
        # Backtracking: halve the step of each element until f does not decrease.
        floor = f - slack * (1.0 + f.abs())
        for _ in range(_MAX_HALVINGS):
            f_new = _log_integrand(noise, e + step, d, mask)
            bad = ~(f_new >= floor) & (step != 0)  # also catches NaN
            if not bad.any():
                break
            step = torch.where(bad, 0.5 * step, step)
        step = torch.where(f_new >= floor, step, torch.zeros_like(step))
        trust = torch.where(newton | (step != full_step), torch.ones_like(trust), 2.0 * trust)
        e = e + step
        f, g, h = f_and_derivs(e)
        # The quadrature needs the mode to a small fraction of the integrand's width
        # only: stop an element once its Newton step is below 1e-6 of that width (1e-4
        # in float32, whose rounding noise is about that), or no ascent step was found
        # (e.g. at a kink).
        active = active & (step != 0) & ~((h < 0) & (step * step * -h <= width_tol ** 2))
        if not active.any():
            break
    # inf where f is not concave at the mode: _log_integral then measures the width
    sigma = torch.where(h < 0, (-h).rsqrt(), torch.full_like(h, math.inf))
    return e, sigma


def _half_widths(noise, d, mask, e_star, f_star, sigma):
    """Distances from the mode to where the log-integrand has dropped by 1/2, each side.

    Exactly sigma for a Gaussian, but measured without curvature, so robust where the
    curvature is useless: piecewise linear log-integrands (Laplace noise, f'' = 0 almost
    everywhere) or plateaus (logistic noise with utilities far apart, where the density's
    slope and a CDF's cancel). Bracketed on the grid ``sigma * 2**j`` (j = -30..30), then
    refined by bisection.
    """
    base = torch.where(torch.isfinite(sigma), sigma, torch.ones_like(sigma)).clamp(1e-6, 1e6)
    j = torch.arange(-30, 31, dtype=d.dtype, device=d.device)
    s = base.unsqueeze(-1) * torch.exp2(j)                                  # (..., J)
    widths = []
    for sign in (-1.0, 1.0):
        def dropped(w):
            f = _log_integrand(noise, e_star.unsqueeze(-1) + sign * w, d.unsqueeze(-2),
                               mask.unsqueeze(-2))
            return ~(f_star.unsqueeze(-1) - f < 0.5)  # NaN counts as dropped

        hit = dropped(s)
        first = torch.where(hit.any(-1), hit.to(torch.uint8).argmax(-1),
                            torch.full_like(e_star, j.numel() - 1, dtype=torch.long))
        hi = s.gather(-1, first.unsqueeze(-1))
        lo = torch.where(first.unsqueeze(-1) > 0, 0.5 * hi, torch.zeros_like(hi))
        for _ in range(8):
            mid = 0.5 * (lo + hi)
            hit = dropped(mid)
            lo, hi = torch.where(hit, lo, mid), torch.where(hit, mid, hi)
        widths.append(hi.squeeze(-1))
    return widths


@functools.lru_cache(maxsize=None)
def _sinh_sinh_rule(num_nodes):
    """Nodes x_i and log-weights of the double-exponential (sinh-sinh) rule on the real line.

    :math:`x = \\sinh(\\tfrac{\\pi}{2}\\sinh t)` with the trapezoidal rule in t on [-4, 4]
    (``num_nodes`` odd; the even-indexed nodes form the rule with half as many nodes,
    which gives the error estimate). Exponentially convergent for smooth integrands
    whatever their tails: Gaussian, double exponential, or polynomial (Student-t).
    """
    t_max = 4.0
    h = 2.0 * t_max / (num_nodes - 1)
    t = (np.arange(num_nodes) - (num_nodes - 1) // 2) * h
    u = 0.5 * math.pi * np.sinh(t)
    x = np.sinh(u)
    logw = math.log(h * 0.5 * math.pi) + np.log(np.cosh(t)) + np.log(np.cosh(u))
    return x, logw


_RULES = {}  # (num_nodes, dtype, device) -> (nodes, log-weights): built and copied once


def _rule(num_nodes, like):
    """:func:`_sinh_sinh_rule` as tensors of ``like``'s dtype and device (cached: no host
    computation and host-to-device copy per call)."""
    key = (num_nodes, like.dtype, like.device)
    if key not in _RULES:
        x, logw = _sinh_sinh_rule(num_nodes)
        _RULES[key] = (torch.as_tensor(x, dtype=like.dtype, device=like.device),
                       torch.as_tensor(logw, dtype=like.dtype, device=like.device))
    return _RULES[key]


def _rule_terms(noise, d, mask, e_star, sigma, num_nodes):
    """log w_i + f(e* + sigma x_i), shape (R, Q), evaluated in row chunks (no grad)."""
    x, logw = _rule(num_nodes, d)
    rows = max(1, _CHUNK_ELEMENTS // (d.shape[-1] * num_nodes))
    out = []
    for i in range(0, d.shape[0], rows):
        sl = slice(i, i + rows)
        nodes = e_star[sl].unsqueeze(-1) + sigma[sl].unsqueeze(-1) * x
        out.append(logw + _log_integrand(noise, nodes, d[sl].unsqueeze(-2), mask[sl].unsqueeze(-2)))
    return torch.cat(out)


def _log_integral(noise, d, mask, num_nodes):
    """log of int exp f(e) de for each row of d, mask: (R, M).

    The sinh-sinh rule is centred at the mode and scaled by the integrand's width; its
    node count is doubled (nested, up to ``_MAX_REFINEMENTS`` times) for the rows whose
    estimated error |I_h - I_2h| exceeds the tolerance, e.g. bimodal integrands of
    heavy-tailed noises.
    """
    e_star, sigma = _find_mode(noise, d, mask)
    dd = d.detach()
    eps = torch.finfo(d.dtype).eps
    num_nodes = max(int(num_nodes), 5) | 1
    with torch.no_grad():
        f_star = _log_integrand(noise, e_star, dd, mask)
        # tolerance on |I_h - I_2h| (relative): for exponentially convergent rules the
        # error of I_h is about its square; plus the rounding error of f itself
        tol = max(1e-7, 1e3 * eps) + 16 * eps * f_star.abs()
        w_left, w_right = _half_widths(noise, dd, mask, e_star, f_star, sigma)
        # Centre the rule on the interval where f is within 1/2 of its maximum and scale
        # it by that interval's half-length (sigma itself for a Gaussian integrand).
        e_star = e_star + 0.5 * (w_right - w_left)
        sigma = 0.5 * (w_left + w_right)
        log_sigma = torch.log(sigma)
        groups = []  # (rows, num_nodes, terms)
        pending = torch.arange(d.shape[0], device=d.device)
        n = num_nodes
        for level in range(_MAX_REFINEMENTS + 1):
            terms = _rule_terms(noise, dd[pending], mask[pending], e_star[pending],
                                sigma[pending], n)
            tol_p = tol[pending]
            fine = torch.logsumexp(terms, -1)
            coarse = torch.logsumexp(terms[..., ::2], -1) + math.log(2.0)
            err = (fine - coarse).abs()
            done = ~(err > tol_p)  # NaN (non-finite input) is not refined
            if level == _MAX_REFINEMENTS:
                if not done.all():
                    warnings.warn(
                        f"quadrature over the {noise.name!r} noise: {int((~done).sum())} "
                        f"integral(s) still changed by up to {err[~done].max().item():.1e} "
                        f"(relative) from {n // 2 + 1} to {n} nodes; is the noise's "
                        "log-density smooth?", RuntimeWarning)
                done = torch.ones_like(done)
            groups.append((pending[done], n, terms[done]))
            pending = pending[~done]
            if not pending.numel():
                break
            n = 2 * n - 1
    if not d.requires_grad:
        out = torch.empty_like(e_star)
        for rows, n, terms in groups:
            out[rows] = torch.logsumexp(terms, -1)
        return out + log_sigma
    out = []
    for rows_all, n, terms_all in groups:
        x, logw = _rule(n, d)
        step = max(1, _CHUNK_ELEMENTS // (d.shape[-1] * n))
        for i in range(0, rows_all.shape[0], step):
            rows, terms = rows_all[i:i + step], terms_all[i:i + step]
            # Nodes whose contribution is below exp(-60) of the total are dropped; they
            # are also moved to the mode before the differentiable pass, so that a log Phi
            # overflowing far out in a tail (Gumbel: -exp(-x)) cannot turn 0 * inf into
            # NaN in the gradient. The nodes themselves are constants for differentiation.
            # Only the kept nodes (about 90 of 257 for the built-in noises) are evaluated.
            keep = terms > (torch.logsumexp(terms, -1, keepdim=True) - 60.0)
            width = int(keep.sum(-1).max())
            order = torch.argsort((~keep).to(torch.uint8), dim=-1, stable=True)[:, :width]
            keep = keep.gather(-1, order)
            centre = e_star[rows].unsqueeze(-1)
            nodes = torch.where(keep, centre + sigma[rows].unsqueeze(-1) * x[order], centre)
            f = _log_integrand(noise, nodes, d[rows].unsqueeze(-2), mask[rows].unsqueeze(-2))
            f = torch.where(keep, logw[order] + f, torch.full_like(f, -math.inf))
            lse = torch.logsumexp(f, -1)
            out.append((rows, lse))
    if len(out) == 1:
        return out[0][1] + log_sigma
    index = torch.cat([rows for rows, _ in out])
    values = torch.cat([lse for _, lse in out])
    return values[torch.argsort(index)] + log_sigma


def check_quadrature_args(utility: torch.Tensor, num_nodes: int) -> int:
    """Validate the utility tensor and ``num_nodes`` of a quadrature; returns ``num_nodes`` as an int.

    The utility must be a float32 or float64 tensor with at least one class (half precision
    cannot hold the log-integrand: ``log Phi`` underflows and Newton's curvature overflows);
    ``num_nodes`` an integer in ``[5, MAX_NUM_NODES]`` (numpy integers accepted).

    Example:

    >>> import torch
    >>> from pyro_ar.quadrature import check_quadrature_args
    >>> check_quadrature_args(torch.zeros(2, 3), 257)
    257
    >>> check_quadrature_args(torch.zeros(2, 3, dtype=torch.float16), 257)
    Traceback (most recent call last):
    ...
    ValueError: utility must be float32 or float64 for the quadrature over a non-Gumbel noise, got dtype=torch.float16; cast it with utility.float()
    """
    if not isinstance(utility, torch.Tensor) or utility.dim() < 1:
        raise ValueError("utility must be a tensor of shape batch_shape + (K,), got "
                         f"{tuple(utility.shape) if isinstance(utility, torch.Tensor) else utility!r}")
    if utility.dtype not in (torch.float32, torch.float64):
        raise ValueError("utility must be float32 or float64 for the quadrature over a non-Gumbel "
                         f"noise, got dtype={utility.dtype}; cast it with utility.float()")
    return check_int("num_nodes", num_nodes, low=_MIN_NUM_NODES, high=MAX_NUM_NODES)


def _check_noise(noise):
    if not all(callable(getattr(noise, f, None)) for f in ("log_density", "log_cdf", "mode_hint")):
        raise ValueError(f"noise must be a pyro_ar.Noise (resolve a name with pyro_ar.get_noise), "
                         f"got noise={noise!r}")


def log_marginal(utility: torch.Tensor, value: torch.Tensor, noise,
                 num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
    r""":math:`\log p(y = value \mid \psi)` by quadrature (eq. 5), for any noise.

    :param utility: tensor ``batch_shape + (K,)``.
    :param value: integer labels broadcastable to ``batch_shape``.
    :param noise: a :class:`~pyro_ar.noise.Noise` (not a name: see the module docstring).
    :param int num_nodes: initial number of nodes, in ``[5, MAX_NUM_NODES]`` (made odd;
        doubled where needed).
    :returns: tensor of shape ``broadcast(value.shape, batch_shape)`` (empty for an empty batch).
    :raises ValueError: see :func:`check_quadrature_args`.

    Example:

    >>> import torch
    >>> from pyro_ar.noise import GumbelNoise
    >>> from pyro_ar.quadrature import log_marginal
    >>> psi = torch.tensor([[1.0, 0.0, -1.0]], dtype=torch.float64)
    >>> exact = torch.log_softmax(psi, -1)[:, 0]
    >>> torch.allclose(log_marginal(psi, torch.tensor([0]), GumbelNoise()), exact, atol=1e-12)
    True
    """
    num_nodes = check_quadrature_args(utility, num_nodes)
    _check_noise(noise)
    K = utility.shape[-1]
    shape = torch.broadcast_shapes(utility.shape[:-1], value.shape)
    if shape.numel() == 0 or K == 0:
        # nothing to integrate (an empty batch); K = 0 has no class to be observed
        if K == 0 and shape.numel():
            raise ValueError(f"utility needs at least one class, got shape {tuple(utility.shape)}")
        return (utility.sum(-1) * 0.0).expand(shape)  # (keeps the autograd graph)
    psi = utility.expand(shape + (K,)).reshape(-1, K)
    y = value.expand(shape).reshape(-1)
    chunk = max(1, _CHUNK_ELEMENTS // (K * num_nodes))
    out = []
    classes = torch.arange(K, device=psi.device)
    for start in range(0, psi.shape[0], chunk):  # chunks bound memory; not a hot path
        p, yy = psi[start:start + chunk], y[start:start + chunk]
        psi_y = p.gather(-1, yy.unsqueeze(-1))
        out.append(_log_integral(noise, psi_y - p, classes != yy.unsqueeze(-1), num_nodes))
    # a probability is at most one: the rule's error (about 1e-6 for a kinked density such as
    # the Laplace's, near p = 1) must not push log p above 0
    return torch.cat(out).reshape(shape).clamp(max=0.0)


def log_marginal_all(utility: torch.Tensor, noise,
                     num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
    """Log-probabilities of every class, shape ``batch_shape + (K,)`` (O(K^2) work).

    Example:

    >>> import torch
    >>> from pyro_ar.noise import NormalNoise
    >>> from pyro_ar.quadrature import log_marginal_all
    >>> p = log_marginal_all(torch.randn(2, 10, dtype=torch.float64), NormalNoise()).exp()
    >>> torch.allclose(p.sum(-1), torch.ones(2, dtype=torch.float64), atol=1e-10)
    True
    """
    check_quadrature_args(utility, num_nodes)
    K = utility.shape[-1]
    labels = torch.arange(K, device=utility.device).reshape((K,) + (1,) * (utility.dim() - 1))
    lp = log_marginal(utility.unsqueeze(0), labels, noise, num_nodes)  # (K,) + batch_shape
    return lp.movedim(0, -1)

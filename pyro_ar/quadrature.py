r"""Exact marginals of the utility categorical by one-dimensional quadrature.

For any noise (eq. 5 of Ruiz et al., 2018),

.. math::

    p(y = k \mid \psi) = \int \phi(e) \prod_{k' \ne k} \Phi(e + \psi_k - \psi_{k'})\, de
                       = \int \exp f_k(e)\, de,

with the log-integrand :math:`f_k(e) = \log\phi(e) + \sum_{k'\ne k}\log\Phi(e + d_{kk'})`,
:math:`d_{kk'} = \psi_k - \psi_{k'}`. We locate the mode :math:`e^*` of :math:`f_k` by damped
Newton steps (backtracking on :math:`f_k`, so no step overshoots where :math:`f_k` is flat),
take the curvature scale :math:`\sigma = (-f_k''(e^*))^{-1/2}`, and apply Gauss-Hermite
quadrature centred there, in log space:

.. math::

    \log p(y=k\mid\psi) \approx \log(\sqrt{2}\sigma)
        + \operatorname{logsumexp}_i\big(\log w_i + x_i^2 + f_k(e^* + \sqrt{2}\sigma x_i)\big).

The nodes are treated as constants for differentiation, so gradients with respect to
:math:`\psi` are the quadrature of the integrand's gradient. Derivatives of :math:`f_k` for
Newton come from autograd, so any :class:`~pyro_ar.noise.Noise` works unchanged.
"""

import functools
import math

import numpy as np
import torch

from .noise import Noise, get_noise

__all__ = ["log_marginal", "log_marginal_all", "DEFAULT_NUM_NODES"]

DEFAULT_NUM_NODES = 128
_MAX_NEWTON_STEPS = 100
_MAX_HALVINGS = 40
#: elements (datapoints x classes x nodes) evaluated at once; bounds peak memory
_CHUNK_ELEMENTS = 1 << 23


@functools.lru_cache(maxsize=None)
def _hermgauss_log(num_nodes):
    x, w = np.polynomial.hermite.hermgauss(num_nodes)
    return x, np.log(w) + x * x


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

    f, g, h = f_and_derivs(e)
    for _ in range(_MAX_NEWTON_STEPS):
        # Newton where the integrand is locally concave, a unit ascent step otherwise.
        step = torch.where(h < 0, -g / h, torch.sign(g))
        step = torch.where(torch.isfinite(step), step, torch.zeros_like(step))
        # Backtracking: halve the step of each element until f does not decrease.
        for _ in range(_MAX_HALVINGS):
            f_new = _log_integrand(noise, e + step, d, mask)
            bad = ~(f_new >= f)  # also catches NaN
            if not bad.any():
                break
            step = torch.where(bad, 0.5 * step, step)
        step = torch.where(f_new >= f, step, torch.zeros_like(step))
        e = e + step
        f, g, h = f_and_derivs(e)
        if (step.abs() <= 1e-12 * (1.0 + e.abs())).all():
            break
    sigma = torch.where(h < 0, (-h).clamp(min=1e-30).rsqrt(), torch.ones_like(h))
    sigma = sigma.clamp(min=1e-8, max=1e4)
    return e, sigma


def _log_integral(noise, d, mask, num_nodes):
    """log of int exp f(e) de, batched over the leading dims of d (..., M)."""
    e_star, sigma = _find_mode(noise, d, mask)
    x, logw = _hermgauss_log(num_nodes)
    x = torch.as_tensor(x, dtype=d.dtype, device=d.device)
    logw = torch.as_tensor(logw, dtype=d.dtype, device=d.device)
    nodes = e_star.unsqueeze(-1) + math.sqrt(2.0) * sigma.unsqueeze(-1) * x  # (..., Q)
    f = _log_integrand(noise, nodes, d.unsqueeze(-2), mask.unsqueeze(-2))   # (..., Q)
    return torch.logsumexp(logw + f, dim=-1) + torch.log(math.sqrt(2.0) * sigma)


def log_marginal(utility: torch.Tensor, value: torch.Tensor, noise="normal",
                 num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
    r""":math:`\log p(y = value \mid \psi)` by quadrature (eq. 5), for any noise.

    :param utility: tensor ``batch_shape + (K,)``.
    :param value: integer labels broadcastable to ``batch_shape``.
    :param noise: a :class:`~pyro_ar.noise.Noise` or its name.
    :param int num_nodes: Gauss-Hermite nodes.
    :returns: tensor of shape ``broadcast(value.shape, batch_shape)``.
    """
    noise = get_noise(noise)
    K = utility.shape[-1]
    shape = torch.broadcast_shapes(utility.shape[:-1], value.shape)
    psi = utility.expand(shape + (K,)).reshape(-1, K)
    y = value.expand(shape).reshape(-1)
    chunk = max(1, _CHUNK_ELEMENTS // (K * num_nodes))
    out = []
    classes = torch.arange(K, device=psi.device)
    for start in range(0, psi.shape[0], chunk):  # chunks bound memory; not a hot path
        p, yy = psi[start:start + chunk], y[start:start + chunk]
        psi_y = p.gather(-1, yy.unsqueeze(-1))
        out.append(_log_integral(noise, psi_y - p, classes != yy.unsqueeze(-1), num_nodes))
    return torch.cat(out).reshape(shape)


def log_marginal_all(utility: torch.Tensor, noise="normal",
                     num_nodes: int = DEFAULT_NUM_NODES) -> torch.Tensor:
    """Log-probabilities of every class, shape ``batch_shape + (K,)`` (O(K^2) work)."""
    K = utility.shape[-1]
    labels = torch.arange(K, device=utility.device).reshape((K,) + (1,) * (utility.dim() - 1))
    lp = log_marginal(utility.unsqueeze(0), labels, noise, num_nodes)  # (K,) + batch_shape
    return lp.movedim(0, -1)

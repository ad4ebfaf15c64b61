r"""The local fit of :math:`q(\varepsilon)` given the utilities: one place for the guides.

For a datapoint with label y, class subsample :math:`k_j` with weights :math:`w_j \ge 0` and
:math:`d_j = \psi_y - \psi_{k_j}`, the optimal :math:`q(\varepsilon)` of the A&R bound is the
local posterior

.. math::  q^*(e) \propto \exp f(e), \qquad f(e) = \log\phi(e) + \sum_j w_j \log\Phi(e + d_j).

* :func:`laplace_local` -- its Laplace approximation :math:`N(\hat e, -1/f''(\hat e))` (damped
  Newton steps);
* :func:`gaussian_local` -- the Gaussian maximising the local bound
  :math:`\mathbb{E}_q[f] + H(q)` (damped Newton steps on the Gauss-Hermite bound from the Laplace point);
* :func:`gumbel_local` -- the Gumbel maximising it (the same steps on the Gumbel's Gauss rule):
  the local posterior is that of the largest of many noises, right-skewed, and a Gumbel
  follows it far more closely than a Gaussian (the default of the conditional local guide);
* :func:`local_derivatives` -- :math:`f'`, :math:`f''` from the noise's
  :meth:`~pyro_ar.noise.Noise.log_density_derivatives` and the class sums of
  :meth:`~pyro_ar.noise.Noise.weighted_log_cdf_derivatives` (analytic for Normal and Logistic
  noise, autograd by default).

Used by :class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide` and by
:class:`~pyro_ar.infer.ClassSubsampledNormal` (its W-conditioned local guide).
"""

import math
from typing import Optional

import torch

from ..numerics import check_finite, check_float_tensor, check_int, check_nonnegative, check_positive_number
from ..quadrature import _check_noise, gauss_gumbel, gauss_hermite
from ..utility import _validating

__all__ = ["laplace_local", "gaussian_local", "gumbel_local", "local_derivatives", "local_q", "conditional_local_q",
           "unit_gumbel_optimum", "local_sampler",
           "LOCAL_FITS", "DEFAULT_LOCAL_FIT", "check_local_fit"]


def local_derivatives(noise, e, d, w):
    r""":math:`f'(e)`, :math:`f''(e)` of :math:`f(e) = \log\phi(e) + \sum_j w_j\log\Phi(e + d_j)`
    (analytic for Normal and Logistic noise, autograd otherwise; differentiable in ``d`` and
    ``w`` along the analytic path). ``e`` has shape ``batch``, ``d`` and ``w`` ``batch + (s,)``.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.infer.local_fit import local_derivatives
    >>> g, h = local_derivatives(ar.noise.NormalNoise(), torch.tensor([1.0]), torch.zeros(1, 0), torch.zeros(1, 0))
    >>> g.item(), h.item()      # log phi(e) = -e^2/2 + c: f' = -e, f'' = -1
    (-1.0, -1.0)
    """
    g0, h0, r_sum, r_slope = _local_terms(noise, e, d, w)
    return g0 + r_sum, h0 + r_slope


def _local_terms(noise, e, d, w):
    r"""The parts of :func:`local_derivatives`: :math:`(\log\phi)'(e)`, :math:`(\log\phi)''(e)`,
    :math:`R = \sum_j w_j (\log\Phi)'(e + d_j)` and :math:`R' = \sum_j w_j (\log\Phi)''(e + d_j)`
    (so :math:`f' = (\log\phi)' + R`, :math:`f'' = (\log\phi)'' + R'`), each evaluated once.

    R and R' are the noise's :meth:`~pyro_ar.noise.Noise.weighted_log_cdf_derivatives` (dot
    products, no masked buffers), redone with the :math:`w_j = 0` terms' arguments set to 0
    (as :func:`~pyro_ar.distributions.class_sum.masked_weighted_sum` does) only where a
    non-finite term made them non-finite (:math:`0\cdot\infty`): the same values, by the same
    formula. One finiteness check for both, on the sum of their sums (any NaN or infinity
    makes it non-finite)."""
    g0, h0 = noise.log_density_derivatives(e)
    x = e.unsqueeze(-1) + d
    r_sum, r_slope = noise.weighted_log_cdf_derivatives(x, w)
    if r_sum.numel() and not math.isfinite((r_sum.sum() + r_slope.sum()).item()):
        x = torch.where(w != 0, x, torch.zeros_like(x))
        r_sum, r_slope = noise.weighted_log_cdf_derivatives(x, w)
    return g0, h0, r_sum, r_slope


def _newton_rows(step, state, data, max_steps: int, tol: float):
    r"""Iterate ``state <- step(*state, *data)`` on the rows of flat ``(N,)`` state tensors and
    ``(N, ...)`` data tensors, each row until its own change (``step``'s last output) is below
    ``tol``: an active set, so that the few slow rows do not cost a whole batch each step."""
    state = [t.clone() for t in state]
    rows = None  # None: all rows are still moving
    for _ in range(max_steps):
        if rows is None:
            *new, change = step(*state, *data)
            state = new
        else:
            *new, change = step(*[t[rows] for t in state], *[t[rows] for t in data])
            for t, n in zip(state, new):
                t[rows] = n
        moving = change >= tol
        if change.numel() == 0 or not bool(moving.any()):
            break
        idx = moving.nonzero().squeeze(-1)
        rows = idx if rows is None else rows[idx]
    return state


def _mode_step(noise, e, d, w):
    r"""A Newton step towards the mode of :math:`f = \log\phi(e) + \sum_j w_j\log\Phi(e + d_j)`,
    on the mode equation in log form where it applies; also returns :math:`f''(e)`.

    The mode solves :math:`-(\log\phi)'(e) = R(e)`, :math:`R = \sum_j w_j (\log\Phi)'(e + d_j) > 0`.
    Above the noise's own mode (:math:`-(\log\phi)' > 0`), the step is Newton's on
    :math:`F(e) = \log R(e) - \log(-(\log\phi)'(e))`: R falls like the noise's density
    (for Normal noise :math:`R \approx \sum_j w_j\phi(e + d_j)`), so :math:`\log R` is nearly
    linear where R itself is exponential, and from the start of
    :meth:`~pyro_ar.noise.Noise.mode_hint` the probit mode is found in 2-4 steps instead of
    7-9 (Brown bigrams, 64 classes). Elsewhere, or where :math:`F' \ge 0`, it is Newton's on
    :math:`f' = 0` with the curvature clamped negative. The fixed point is the mode either way."""
    g0, h0, r_sum, r_slope = _local_terms(noise, e, d, w)
    g, h = g0 + r_sum, h0 + r_slope                            # f'(e), f''(e)
    plain = -g / h.clamp(max=-1e-6)
    lhs = -g0
    slope = r_slope / r_sum - h0 / g0                          # F'(e)
    ok = (torch.minimum(r_sum, lhs) > 0) & (slope < 0)
    log_step = (lhs.clamp(min=1e-30) / r_sum.clamp(min=1e-30)).log_() / slope.clamp(max=-1e-30)
    return torch.where(ok, log_step, plain), h


def _check_local_args(noise, d, w, steps, tol):
    r"""The arguments of the local fits, checked (``ValueError`` naming the argument) and ``d``,
    ``w`` broadcast: ``noise`` a :class:`~pyro_ar.noise.Noise`, ``d`` a floating tensor of
    ``batch + (s,)`` (an integer one would make every row's fit one truncated constant), ``w``
    a tensor broadcastable to it, ``steps`` an integer >= 1, ``tol`` a finite number >= 0;
    while Pyro's validation is on, ``d`` finite and ``w`` finite and >= 0 (a NaN or an
    infinity made the fit NaN; a negative weight is no class sum)."""
    _check_noise(noise)
    check_float_tensor("d", d, min_dim=1, what=" (shape batch + (s,): psi_y - psi_k per class term)")
    if not isinstance(w, torch.Tensor) or w.is_complex() or w.dtype == torch.bool:
        raise ValueError(f"w must be a real tensor broadcastable to d's shape {tuple(d.shape)}, got "
                         f"{f'a {w.dtype} tensor' if isinstance(w, torch.Tensor) else type(w).__name__}")
    try:
        d, w = torch.broadcast_tensors(d, w.to(d.dtype))
    except RuntimeError:
        raise ValueError(f"w of shape {tuple(w.shape)} must broadcast to d's shape {tuple(d.shape)}") from None
    steps = check_int("steps", steps, low=1)
    tol = check_positive_number("tol", tol, inclusive=True)
    if _validating() and d.numel():
        check_finite(d.detach(), "d")
        check_nonnegative(w.detach(), "w")
    return d, w, steps, tol


def _flat(d, w):
    """``d``, ``w`` broadcast and flattened to ``(rows, s)``, with the batch shape."""
    d, w = torch.broadcast_tensors(d, w.to(d.dtype))
    batch, rows = d.shape[:-1], math.prod(d.shape[:-1])
    return d.reshape(rows, d.shape[-1]), w.reshape(rows, d.shape[-1]), batch


def laplace_local(noise, d: torch.Tensor, w: torch.Tensor, steps: int = 8, tol: float = 1e-6):
    r"""Laplace approximation :math:`N(\hat e, -1/f''(\hat e))` of the local posterior
    :math:`q^*(e) \propto \exp f(e)`, :math:`f(e) = \log\phi(e) + \sum_j w_j\log\Phi(e + d_j)`.

    :math:`\hat e` comes from damped Newton steps (each at most 2 in size, curvature clamped
    negative; on the log form of the mode equation where it applies, ``_mode_step``) on
    detached inputs, started at ``noise.mode_hint``, each datapoint's stopped once its step is
    below ``tol`` (the steps run on the datapoints still moving only); then one differentiable
    Newton step from the converged point :math:`e_0`, so that when ``d`` carries a graph the mode's derivative is the
    implicit-function derivative :math:`\partial\hat e/\partial d = -\partial_d f'/f''`
    (Normal and Logistic noise; for other noises ``d``'s gradient is zero). Derivatives of
    :math:`f` are analytic for Normal and Logistic noise and from autograd for any other
    :class:`~pyro_ar.noise.Noise`.

    :param noise: the :class:`~pyro_ar.noise.Noise`.
    :param d: :math:`\psi_y - \psi_{k_j}`, shape ``batch + (s,)``.
    :param w: the weights :math:`w_j \ge 0` (0 drops a term), broadcastable to ``d``.
    :returns: ``(mode, sd)``, each of shape ``batch``.

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.infer.local_fit import laplace_local
    >>> mode, sd = laplace_local(ar.noise.NormalNoise(), torch.zeros(1, 0), torch.zeros(1, 0))
    >>> mode.tolist(), sd.tolist()      # no classes to beat: the prior N(0, 1)
    ([0.0], [1.0])
    """
    d, w, steps, tol = _check_local_args(noise, d, w, steps, tol)
    dd, wd, batch = _flat(d.detach(), w.detach())
    e, _ = _mode_search(noise, dd, wd, steps, tol)
    e = e.reshape(batch)
    g, h = local_derivatives(noise, e, d, w)  # e* = e0 - g(e0, d)/h(e0, d)
    h = h.clamp(max=-1e-6)
    return e - g / h, (-h).rsqrt()


def _mode_search(noise, dd, wd, steps: int, tol: float):
    r"""The damped Newton steps of :func:`laplace_local` on flat detached ``(rows, s)``
    problems, from ``noise.mode_hint``: ``(e, h)``, each row's last point and :math:`f''` at
    the point its last step started from (so :math:`(-h)^{-1/2}` is the Laplace scale there,
    without another evaluation of the derivatives)."""
    e = _mode_start(noise, dd, wd)

    def newton(e, h, dd, wd):
        step, h = _mode_step(noise, e, dd, wd)
        step = step.clamp(-2.0, 2.0)
        return e + step, h, step.abs()

    return _newton_rows(newton, (e, torch.full_like(e, -1.0)), (dd, wd), steps, tol)


def _mode_start(noise, dd, wd):
    r"""Where :func:`_mode_search` starts: ``noise.mode_hint`` of :math:`\log\sum_j w_j e^{-d_j}`
    (0 for a row without terms), from :math:`\log w_j - d_j` with :math:`-\infty` for every
    :math:`w_j = 0` (:math:`\log 0`; the NaN of :math:`-\infty - (-\infty)` and of a negative
    weight made :math:`-\infty` too), without the comparison and ``torch.where`` that masked them."""
    log_terms = wd.log().sub_(dd).nan_to_num_(nan=-math.inf, posinf=math.inf, neginf=-math.inf)
    e = noise.mode_hint(log_terms.logsumexp(-1))  # (-inf without terms: the hint at 0)
    return e.nan_to_num(0.0, 0.0, 0.0).detach()


def gaussian_local(noise, d: torch.Tensor, w: torch.Tensor, steps: int = 8, refine_steps: int = 10,
                   num_nodes: Optional[int] = None, tol: float = 3e-2):
    r"""The ELBO-optimal Gaussian :math:`N(m, s^2)` for the local posterior
    :math:`\propto \exp f(e)` of :func:`laplace_local`, refined from the Laplace point.

    The Gaussian maximises :math:`L(m, s) = \mathbb{E}_{z\sim N(0,1)}[f(m + s z)] + \log s`
    (Opper & Archambeau 2009), with the expectation by ``num_nodes``-point Gauss-Hermite
    quadrature. From the Laplace solution, damped Newton steps on :math:`(m, s)`:

    .. math::  \nabla L = \big(\mathbb{E}[f'],\ \mathbb{E}[f' z] + 1/s\big), \qquad
               \nabla^2 L = \begin{pmatrix} \mathbb{E}[f''] & \mathbb{E}[f'' z] \\
               \mathbb{E}[f'' z] & \mathbb{E}[f'' z^2] - 1/s^2 \end{pmatrix},

    from the same :math:`f', f''` at the nodes as a fixed-point step. For log-concave noise
    (Normal, Logistic) L is jointly concave in :math:`(m, s)`, so the steps converge
    quadratically (two or three steps to ``tol``); each step is scaled so that
    :math:`|\Delta m| \le 2` and s at most halves. Where the Hessian is not negative definite
    (heavy tails, e.g. Student-t) the step is the fixed point
    :math:`m \leftarrow m - \mathbb{E}[f']/\mathbb{E}[f'']`,
    :math:`s^2 \leftarrow -1/\mathbb{E}[f'']`. Each datapoint's steps stop when its m and s
    move less than ``tol`` (at most ``refine_steps``; the steps run on the datapoints still
    moving only), and the Laplace start is found to the same ``tol``; when ``d`` or ``w``
    carries a graph, one more step, differentiable, gives the implicit-function derivative at
    the optimum. With quadratic convergence the point after a step of size ``tol`` is about
    ``tol**2`` from the optimum: with the defaults, 5 nodes and ``tol = 3e-2``, the local bound
    stays within the tolerance ``tests/infer/test_laplace_local.py`` asserts of the converged
    optimum (the defaults before were 6 nodes and ``tol = 1e-2``, and before them 8 nodes and
    ``tol = 1e-4``, whose Gaussian Newton steps took most of a Brown probit step's time
    [claim probit-step]). Any q gives a valid bound, so the tolerance
    only trades tightness for time. Unlike the Laplace point, the result is a
    stationary point of the local bound over the Gaussian family, so the bound's gradient
    with q held fixed is its total gradient (envelope theorem).

    ``num_nodes=None`` takes 5 nodes, or 3 for a single step (``refine_steps=1``, the
    conditional local guide's default): what one step from the Laplace point leaves undone
    outweighs the quadrature's error, and 3 nodes cost less, at about the 5 nodes' bound
    [claim probit-step].

    Example:

    >>> import torch, pyro_ar as ar
    >>> from pyro_ar.infer.local_fit import gaussian_local
    >>> m, sd = gaussian_local(ar.noise.NormalNoise(), torch.zeros(1, 0), torch.zeros(1, 0))
    >>> [round(abs(v), 6) for v in m.tolist() + sd.tolist()]   # no classes to beat: the prior
    [0.0, 1.0]
    """
    return _location_scale_local(noise, d, w, gauss_hermite, steps, refine_steps, num_nodes, tol)


def gumbel_local(noise, d: torch.Tensor, w: torch.Tensor, steps: int = 8, refine_steps: int = 10,
                 num_nodes: Optional[int] = None, tol: float = 3e-2):
    r"""The ELBO-optimal Gumbel :math:`q(e) = \mathrm{Gumbel}(m, s)` (location m, scale s) for the
    local posterior :math:`\propto \exp f(e)` of :func:`laplace_local`, refined from the Laplace point.

    It maximises :math:`L(m, s) = \mathbb{E}_{z\sim\mathrm{Gumbel}(0,1)}[f(m + s z)] + \log s`
    (+ the constant :math:`1 + \gamma` of the entropy), the expectation by the Gumbel's own
    ``num_nodes``-point Gauss rule (:func:`~pyro_ar.quadrature.gauss_gumbel`), by the damped
    Newton steps of :func:`gaussian_local` (the same gradient and Hessian: both are
    location-scale families, :math:`H(q) = \log s + c`). The start maps the Laplace point as
    the Gaussian's does: a Gumbel's mode is m and its log-density's curvature there
    :math:`-1/s^2`. (Where the Hessian is not negative definite the fallback is the Gaussian's
    fixed-point step, a heuristic for this family.)

    Why a Gumbel. The observed class's noise must beat every other class's: given the
    utilities its posterior is :math:`\phi(e)\prod_j\Phi(e + d_j)^{w_j}`, whose left tail the
    many :math:`\Phi` factors cut steeply while the right tail stays the noise's own -- the
    skewed shape of a maximum, which the Gumbel (the law of maxima) has and a Gaussian lacks.
    On Brown probit the converged Gaussian's local bound is 0.050 nats below
    :math:`\log p(y\mid\psi)` per datapoint, the converged Gumbel's 0.010 [claim probit-family].
    Log-concave noise keeps :math:`L` jointly concave in :math:`(m, s)` (an expectation of
    :math:`f` at an affine function of them), so Newton converges as fast as for the Gaussian.

    Example:

    >>> import math, torch, pyro_ar as ar
    >>> from pyro_ar.infer.local_fit import gumbel_local
    >>> zero = torch.zeros(1, 0, dtype=torch.float64)
    >>> m, s = gumbel_local(ar.noise.NormalNoise(), zero, zero, refine_steps=50, tol=1e-12)
    >>> # no classes to beat: the Gumbel nearest N(0, 1) has its mean 0 and variance 1
    >>> abs(s.item() - math.sqrt(6) / math.pi) < 1e-9, abs(m.item() + 0.5772156649015329 * s.item()) < 1e-9
    (True, True)
    """
    return _location_scale_local(noise, d, w, gauss_gumbel, steps, refine_steps, num_nodes, tol)


def _location_scale_local(noise, d, w, rule, steps, refine_steps, num_nodes, tol):
    """The fit of :func:`gaussian_local` / :func:`gumbel_local` for the standard member's Gauss
    ``rule`` (``(num_nodes, like) -> (z, wz)``): ``(m, s)``, each of ``d``'s batch shape."""
    d, w, steps, tol = _check_local_args(noise, d, w, steps, tol)
    refine_steps = check_int("refine_steps", refine_steps, low=0)  # (0: the Laplace start itself)
    dd, wd, batch = _flat(d.detach(), w.detach())
    # the start: the Laplace point found as loosely as the refinement, its scale from f'' where
    # the last Newton step began (no further evaluation: the Newton step corrects both)
    m, h = _mode_search(noise, dd, wd, steps, tol)
    sd = (-h.clamp(max=-1e-6)).rsqrt()
    if num_nodes is None:
        num_nodes = 3 if refine_steps == 1 else 5
    z, wz = rule(num_nodes, m)

    def refine(m, sd, dd, wd):
        m_new, sd_new = _location_scale_step(noise, m, sd, dd, wd, z, wz)
        return m_new, sd_new, torch.maximum((m_new - m).abs(), (sd_new - sd).abs())

    m, sd = _newton_rows(refine, (m, sd), (dd, wd), refine_steps, tol)
    m, sd = m.reshape(batch), sd.reshape(batch)
    if not (d.requires_grad or w.requires_grad):
        return m, sd
    return _location_scale_step(noise, m, sd, d, w, z, wz)  # differentiable in d, w (implicit-function derivative)


def _location_scale_step(noise, m, sd, d, w, z, wz):
    """One damped Newton step on L(m, s) of :func:`gaussian_local` for the rule ``(z, wz)`` of
    the family's standard member (the fixed-point step where the quadrature Hessian is not
    negative definite)."""
    e = m.unsqueeze(-1) + sd.unsqueeze(-1) * z                        # (batch, nodes)
    g, h = local_derivatives(noise, e, d.unsqueeze(-2), w.unsqueeze(-2))
    wzz = wz * z
    g_m, g_s = g @ wz, g @ wzz + 1.0 / sd
    h_mm, h_ms = h @ wz, h @ wzz
    h_ss = h @ (wzz * z) - 1.0 / sd ** 2
    det = h_mm * h_ss - h_ms * h_ms
    newton = (h_mm < 0) & (h_ss < 0) & (det > 0)
    det = torch.where(newton, det, torch.ones_like(det))
    dm = -(h_ss * g_m - h_ms * g_s) / det
    ds = -(h_mm * g_s - h_ms * g_m) / det
    scale = torch.minimum(2.0 / dm.abs().clamp(min=2.0), 0.5 * sd / ds.clamp(max=-0.5 * sd).neg())
    h_fp = h_mm.clamp(max=-1e-6)                                      # the fixed-point step
    m_new = torch.where(newton, m + scale * dm, m - (g_m / h_fp).clamp(-2.0, 2.0))
    sd_new = torch.where(newton, sd + scale * ds, (-h_fp).rsqrt())
    return m_new, sd_new


def local_sampler(base, oversample: int = 1, label_head: bool = True):
    r"""The sampler of a conditional local guide's own class subsample T, from the model's ``base``.

    T is drawn independently of the model's subsample S (so the ELBO estimate stays a mean of
    bounds), with ``oversample`` times the base's negatives (same strategy) and, with
    ``label_head`` (default), stratified by :class:`~pyro_ar.negatives.LabelHeadNegatives`:
    the minibatch's distinct labels summed exactly (the most frequent ones, at most as many as the
    base's negatives, so T at most doubles), the base draw for the other classes.

    Why the head (issue 27). For softmax the guide is :math:`\mathrm{Gumbel}(\log\eta, 1)`,
    :math:`\eta = 1 + \hat S'_T`, and the model's bound term is :math:`-(1+\hat S_S)/\eta`, so the
    gradient of every datapoint's term is the exact one times
    :math:`c_n = (1+S)\,\mathbb{E}[1/(1+\hat S'_T)] \ge 1` (Jensen) with a per-draw ratio
    :math:`(1+\hat S_S)/(1+\hat S'_T)`. On a peaked softmax a small uniform T misses the few
    classes that dominate S in most draws: :math:`c_n` grows and the ratio becomes heavy-tailed,
    which reweights the fit towards badly fit datapoints (on the session model at 60 of 1,500
    items it drove the fit below the uniform distribution). The minibatch's labels contain the
    frequent classes, so the stratified T tracks S closely. (Fitting :math:`\eta` on S itself,
    common random numbers, bounds the ratio but biases the gradient.)

    Example:

    >>> from pyro_ar.infer.local_fit import local_sampler
    >>> from pyro_ar.negatives import SharedNegatives
    >>> local_sampler(SharedNegatives(10), oversample=2)
    LabelHeadNegatives(base=SharedNegatives(num_negatives=20), max_head=20)
    """
    import copy

    from ..negatives import LabelHeadNegatives

    if isinstance(oversample, bool) or not isinstance(oversample, int) or oversample < 1:
        raise ValueError(f"oversample must be an integer >= 1, got oversample={oversample!r}")
    if getattr(base, "uses_utility", False):  # (a screened draw: T needs no utilities of its own)
        from ..negatives import PerDatapointNegatives

        base = PerDatapointNegatives(base.num_negatives)
    if oversample > 1 and base.num_negatives is not None:
        base = copy.copy(base)
        base.num_negatives = base.num_negatives * oversample
    if not label_head or isinstance(base, LabelHeadNegatives):  # (already stratified)
        return base
    return LabelHeadNegatives(base, max_head=base.num_negatives)


def _gumbel_q(loc, scale):
    from ..distributions import FastGumbel

    return FastGumbel(loc, scale)


def _normal_q(loc, scale):
    import pyro.distributions as dist

    return dist.Normal(loc, scale)


#: the local fits of :func:`local_q` by name, each ``(fit, q)``: the fit
#: ``(noise, d, w, steps, refine_steps) -> (loc, scale)`` and q's family ``(loc, scale) -> q``
LOCAL_FITS = {
    "gumbel": (lambda noise, d, w, steps, refine_steps: gumbel_local(noise, d, w, steps, refine_steps=refine_steps),
               _gumbel_q),
    "gaussian": (lambda noise, d, w, steps, refine_steps: gaussian_local(noise, d, w, steps, refine_steps=refine_steps),
                 _normal_q),
    "laplace": (lambda noise, d, w, steps, refine_steps: laplace_local(noise, d, w, steps), _normal_q),
}
#: The default local fit for a noise without a closed form, the Gumbel, whose local bound is the
#: tightest with many classes (Brown probit, the guide's q, per datapoint 0.051 nats below
#: log p(y), the Gaussian's 0.104 [claim probit-family]).
DEFAULT_LOCAL_FIT = "gumbel"


def check_local_fit(fit) -> str:
    """``fit`` if it names a local fit (:data:`LOCAL_FITS`), else a ValueError naming it.

    Example:

    >>> from pyro_ar.infer.local_fit import check_local_fit
    >>> check_local_fit("gumbel")
    'gumbel'
    >>> check_local_fit("normal")
    Traceback (most recent call last):
    ...
    ValueError: fit must be one of ['gaussian', 'gumbel', 'laplace'], got fit='normal'
    """
    if not isinstance(fit, str) or fit not in LOCAL_FITS:
        raise ValueError(f"fit must be one of {sorted(LOCAL_FITS)}, got fit={fit!r}")
    return fit


def unit_gumbel_optimum(noise) -> bool:
    r"""Whether the local optimum of ``noise`` is :math:`\mathrm{Gumbel}(\log\eta, 1)` with
    :math:`\eta = 1 + \hat S` in closed form (:func:`local_q`'s first case; the noise's
    ``closed_form``): the question the guides ask (:class:`~pyro_ar.infer.GumbelLocalGuide` and its
    natural step, the amortized guide's family, the latent guide's exact sums) and
    :class:`~pyro_ar.infer.ClosedFormELBO` (the factor in closed form under that q). The one
    place of the inference layer that reads the flag.

    Example:

    >>> from pyro_ar.infer.local_fit import unit_gumbel_optimum
    >>> from pyro_ar.noise import get_noise
    >>> unit_gumbel_optimum(get_noise("gumbel")), unit_gumbel_optimum(get_noise("probit"))
    (True, False)
    """
    return bool(noise.closed_form)


def local_q(noise, d: Optional[torch.Tensor] = None, w: Optional[torch.Tensor] = None, *,
            log_s: Optional[torch.Tensor] = None, fit: str = DEFAULT_LOCAL_FIT, newton_steps: int = 8,
            refine_steps: int = 1):
    r"""``(distribution, infer)``: the local optimum :math:`q^*(e) \propto \phi(e)\prod_j\Phi(e + d_j)^{w_j}`
    of the A&R bound given the class terms :math:`d_j = \psi_y - \psi_{k_j}` with weights
    :math:`w_j \ge 0` (shapes ``batch + (s,)``). The one implementation behind every guide of
    the noise sites (:class:`~pyro_ar.infer.ConditionalLocalGuide`, the latent model's guide,
    :class:`~pyro_ar.infer.ClassSubsampledNormal`'s W-conditioned guide; the natural step of
    :class:`~pyro_ar.infer.GumbelLocalGuide` moves towards the same closed form).

    * Gumbel noise (``noise.closed_form``): exactly :math:`\mathrm{Gumbel}(\log(1 + \hat S), 1)`,
      :math:`\hat S = \sum_j w_j e^{-d_j}`
      (``pyro_ar.distributions.expected_factor.optimal_log_eta``); ``log_s``, the
      :math:`\log\hat S` computed elsewhere (e.g. over every class), replaces ``d`` and ``w``;
      the infer dict marks q a unit Gumbel for :class:`~pyro_ar.infer.ClosedFormELBO`;
    * any other noise: the local fit ``fit`` (:data:`LOCAL_FITS`): ``"gumbel"`` (default,
      :func:`gumbel_local`), ``"gaussian"`` (:func:`gaussian_local`) or ``"laplace"``
      (:func:`laplace_local`), with at most ``newton_steps`` Newton steps to the Laplace point and
      ``refine_steps`` from it.

    Example:

    >>> import torch
    >>> from pyro_ar.infer.local_fit import local_q
    >>> from pyro_ar.noise import get_noise
    >>> d, w = torch.tensor([[0.0, 1.0]]), torch.ones(1, 2)
    >>> q, _ = local_q(get_noise("gumbel"), d, w)       # log(1 + e^0 + e^-1)
    >>> round(q.loc.item(), 4), q.scale.item()
    (0.862, 1.0)
    >>> q, _ = local_q(get_noise("normal"), d, w, fit="laplace")
    >>> type(q).__name__
    'Normal'
    """
    from ..distributions.augmented import INFER_KEY, LocalStep
    from ..distributions.expected_factor import optimal_log_eta

    if unit_gumbel_optimum(noise):
        if log_s is None:
            log_s = _log_class_sum(d, w)
        log_eta = optimal_log_eta(log_s)
        return _gumbel_q(log_eta, torch.ones_like(log_eta)), {INFER_KEY: LocalStep(unit_gumbel=True)}
    local_fit, family = LOCAL_FITS[check_local_fit(fit)]
    return family(*local_fit(noise, d, w, newton_steps, refine_steps)), {}


def _log_class_sum(d: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    r""":math:`\log\sum_j w_j e^{-d_j}` over the last dim, :math:`-\infty` terms where
    :math:`w_j = 0`; the terms clamped to the lowest finite value, so that a row without any
    (log S of about the lowest float: :math:`\eta^* = 1`) passes zero gradients, not NaN."""
    w = w.to(d.dtype)
    log_w = torch.where(w > 0, w.clamp(min=torch.finfo(d.dtype).tiny).log(), torch.full_like(w, -math.inf))
    return (log_w - d).clamp(min=torch.finfo(d.dtype).min).logsumexp(-1)


def conditional_local_q(noise, utility, labels: torch.Tensor, sampler, fit: str = DEFAULT_LOCAL_FIT,
                        newton_steps: int = 8, no_grad: bool = False, refine_steps: int = 1):
    r"""``(distribution, infer)`` of the conditional local guide :math:`q(\varepsilon\mid\psi)`
    for given utilities and labels: :func:`local_q` of the class terms of a subsample drawn by
    ``sampler`` independently of the model's (for Gumbel noise with every class, of the exact
    :math:`\log S_y` from the log-normaliser, one per utility row). The refining fits take at
    most ``refine_steps`` Newton steps from the Laplace point (one by default, see
    :class:`~pyro_ar.infer.ConditionalLocalGuide`, then on 3 nodes of their rule, whose bound
    after the one step is about the 5 nodes' [claim probit-step]). ``no_grad``: the subsample
    sums are constants (the envelope gradient). Used by
    :class:`~pyro_ar.infer.ConditionalLocalGuide` and the latent model's guide.

    Example:

    >>> import torch
    >>> from pyro_ar.infer.local_fit import conditional_local_q
    >>> from pyro_ar.noise import get_noise
    >>> from pyro_ar.negatives import SharedNegatives
    >>> q, _ = conditional_local_q(get_noise("normal"), torch.zeros(4, 10), torch.zeros(4, dtype=torch.long),
    ...                            SharedNegatives(3))
    >>> type(q).__name__, q.batch_shape
    ('FastGumbel', torch.Size([4]))
    """
    import contextlib

    from ..distributions import AugmentedCategorical
    from ..utility import as_utility

    kw = dict(fit=fit, newton_steps=newton_steps, refine_steps=refine_steps)
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        utility = as_utility(utility)
        closed = unit_gumbel_optimum(noise)
        if closed and _all_classes(sampler, utility.num_classes):
            return local_q(noise, log_s=_exact_log_s(utility, labels), **kw)
        zero = torch.zeros((), dtype=utility.dtype, device=utility.device)
        factor = AugmentedCategorical(utility, zero, noise, sampler)
        if closed:
            return local_q(noise, log_s=factor.log_sum_exp_negatives(labels), **kw)
        d, w = factor.utility_differences(labels)
    return local_q(noise, d, w, **kw)


def _all_classes(sampler, num_classes: int) -> bool:
    """Whether ``sampler`` (a NegativeSampler, or None: all classes) sums over every class."""
    from ..negatives import NegativeSampler

    if sampler is None:
        return True
    return isinstance(sampler, NegativeSampler) and sampler.is_exact(num_classes)


def _exact_log_s(utility, labels: torch.Tensor) -> torch.Tensor:
    r""":math:`\log S_y = \log(e^{a} - 1)`, :math:`a = \log\sum_k e^{\psi_k} - \psi_y = \log(1 + S_y)`,
    the exact class sum of the Gumbel local optimum.

    The log-normaliser is taken over the utility's own batch shape and broadcast to the labels
    afterwards: where a utility is shared by several labels (a session's latent :math:`\omega_u`
    serves all of its items) the O(K) sum is done once per utility row, not once per label.
    (:math:`\log(e^a - 1) = a + \log(1 - e^{-a})`, stable for large a; :math:`a \le 0`, the label
    alone up to rounding, gives :math:`-\infty` with a zero gradient.)
    """
    log_z = utility.full().logsumexp(-1)
    psi_y = utility.gather(labels.unsqueeze(-1)).squeeze(-1)
    a = log_z - psi_y
    positive = a > 0
    a_safe = torch.where(positive, a, torch.ones_like(a))
    return torch.where(positive, a_safe + torch.log(-torch.expm1(-a_safe)), torch.full_like(a, -math.inf))

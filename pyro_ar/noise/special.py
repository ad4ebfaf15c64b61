r"""The special functions behind the noise families whose CDF torch lacks or computes poorly.

* Student-t (:class:`~pyro_ar.StudentTNoise`): the log density and the log CDF through the
  regularised incomplete beta function (its continued fraction, modified Lentz), with its
  gradient the density (``_StudentTLogCDF``);
* standard normal (:class:`~pyro_ar.noise.NormalNoise`): :func:`log_ndtr`, :math:`\log\Phi(x)` stable
  in both tails, and :func:`normal_mills_ratio`, the inverse Mills ratio
  :math:`r = \phi/\Phi` and :math:`x + r`, from which :math:`(\log\Phi)' = r` and
  :math:`(\log\Phi)'' = -r(x + r)` (the local fit's derivatives);
* Gumbel (:class:`~pyro_ar.noise.GumbelNoise`): :func:`softmax_log_prob`, :math:`\log\mathrm{softmax}(\psi)_y`,
  whose gradient :math:`\delta_{ky} - \mathrm{softmax}(\psi)_k` is computed in the B x K buffer
  of the forward pass's log-softmax (one in-place ``exp`` and one in-place scaling) instead of
  autograd's zero-filled B x K gradient of the gather plus a new B x K gradient of the
  log-softmax: the exact softmax step is then no slower than a plain ``F.cross_entropy``
  loop (``benchmarks/plain_loop.py``).

Only :mod:`pyro_ar.noise.families` uses them; they import torch alone.
"""

import math

import torch
from torch.autograd.function import once_differentiable

__all__ = ["log_ndtr", "normal_mills_ratio", "softmax_log_prob"]


# ---- the Student-t density and log CDF (the special functions behind StudentTNoise)
def _student_t_log_density(x, df):
    log_norm = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    return log_norm - (df + 1) / 2 * torch.log1p(x * x / df)


def _log_betainc_cf(a, b, z, max_iter=300, tol=1e-15):
    """log of the continued fraction of the regularised incomplete beta (modified Lentz),
    accurate for ``z < (a + 1) / (a + b + 2)``; float64 tensors."""
    tiny = 1e-300

    def fix(v):
        return torch.where(v.abs() < tiny, torch.full_like(v, tiny), v)

    c = torch.ones_like(z)
    d = 1 / fix(1 - (a + b) * z / (a + 1))
    h = d.clone()
    for m in range(1, max_iter + 1):
        aa = m * (b - m) * z / ((a - 1 + 2 * m) * (a + 2 * m))
        d = 1 / fix(1 + aa * d)
        c = fix(1 + aa / c)
        h = h * d * c
        aa = -(a + m) * (a + b + m) * z / ((a + 2 * m) * (a + 1 + 2 * m))
        d = 1 / fix(1 + aa * d)
        c = fix(1 + aa / c)
        delta = d * c
        h = h * delta
        if m % 8 == 0 and bool(((delta - 1).abs() < tol).all()):
            break
    return torch.log(h)


def _student_t_log_cdf_value(x, df):
    r""":math:`\log F_\nu(x)` in float64, from :math:`F_\nu(-t) = \frac12 I_{\nu/(\nu+t^2)}(\nu/2, 1/2)`."""
    t = x.abs()
    a, b = df / 2, 0.5
    # log(df + t^2) without overflow, then log z and log(1 - z)
    lden = torch.where(t > 1, 2 * torch.log(t.clamp(min=1)) + torch.log1p(df / t.clamp(min=1) ** 2),
                       torch.log(df + t * t))
    log_z = math.log(df) - lden
    log_1mz = 2 * torch.log(t) - lden
    direct = log_z.exp() < (a + 1) / (a + b + 2)  # the tail: I_z(a, b) by its continued fraction
    aa = torch.where(direct, torch.full_like(t, a), torch.full_like(t, b))
    bb = torch.where(direct, torch.full_like(t, b), torch.full_like(t, a))
    zz = torch.where(direct, log_z, log_1mz).exp()
    lbeta = math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)
    log_i = (torch.where(direct, a * log_z + b * log_1mz, b * log_1mz + a * log_z)
             - torch.log(aa) - lbeta + _log_betainc_cf(aa, bb, zz))
    # log I_z(a, b): direct, or log(1 - I_{1-z}(b, a)) near the centre
    log_i = torch.where(direct, log_i, torch.log1p(-log_i.exp().clamp(max=1.0)))
    lower = log_i - math.log(2.0)                               # log F(-t)
    upper = torch.log1p(-0.5 * log_i.exp())             # log F(t) = log(1 - F(-t))
    return torch.where(x < 0, lower, upper)


class _StudentTLogCDF(torch.autograd.Function):
    """log F_df(x), evaluated in float64; gradient phi/F (itself differentiable, for Newton)."""

    @staticmethod
    def forward(ctx, x, df):
        out = _student_t_log_cdf_value(x.detach().double(), df).to(x.dtype)
        ctx.df = df
        ctx.save_for_backward(x, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out = ctx.saved_tensors
        return grad * torch.exp(_student_t_log_density(x, ctx.df) - out), None


# ---- the standard normal log CDF and inverse Mills ratio (the special functions behind NormalNoise)
_SQRT_HALF = math.sqrt(0.5)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
#: below -_NDTR_TAIL the continued fraction; its depth per dtype (relative error of the ratio
#: at the switch, against mpmath: 6e-9 with 8 levels, 2e-16 with 24)
_NDTR_TAIL = 5.0
_NDTR_CF_TERMS = {torch.float64: 24}


def _ndtr_parts(x: torch.Tensor, with_log: bool):
    r"""``(log Phi(x), r, None)`` with ``with_log``, else ``(None, r, x + r)``, with
    :math:`r = \phi(x)/\Phi(x)`, see :func:`normal_mills_ratio` (each caller takes what it uses:
    :class:`_LogNdtr` log Phi and r, :class:`_MillsRatio` r and x + r).

    Not differentiable (the callers' autograd Functions give the derivatives). The formulas of
    :math:`x \ge -5` run on every element (``x`` clamped there), in place where possible (on CPU
    a fresh buffer per operation costs more than the arithmetic), with arithmetic rather than
    comparisons (on CPU a comparison's boolean output costs several times an arithmetic
    operation); the lower tail, rare, is then overwritten through the indices of its elements,
    looked for only when the minimum of ``x`` is below -5 or NaN (one reduction)."""
    with torch.no_grad():
        a = _NDTR_TAIL
        x = x.contiguous()  # (the tail is written through flat views of the outputs)
        xc = x.clamp(min=-a)
        log_cdf = x_plus_r = None
        if with_log:  # one erfc for both: u = Phi(-|x|), Phi(x) = u (x <= 0) or 1 - u (x > 0)
            # (arithmetic on the 0/1 mask sign(x)^+ = 1[x > 0]: torch.where is several times slower on CPU)
            upper = x.sign().clamp_(min=0.0)
            u = xc.abs().mul_(_SQRT_HALF).erfc_().mul_(0.5)                        # Phi(-|x|)
            cdf = (upper - u).abs_()                                               # Phi(x), x >= -a
            # log Phi: log Phi(x) for x <= 0, log1p(-Phi(-x)) above (where Phi(x) ~ 1)
            log_cdf = u.clamp(min=torch.finfo(x.dtype).tiny).log_().lerp_(u.neg_().log1p_(), upper)
            r = xc.square_().mul_(-0.5).exp_().mul_(_INV_SQRT_2PI).div_(cdf)      # phi / Phi
        else:  # r = phi / Phi = sqrt(2/pi) e^{-x^2/2} / erfc(-x/sqrt 2) (Phi's 1/2 in the constant)
            erfc = xc.mul(-_SQRT_HALF).erfc_()
            r = xc.square().mul_(-0.5).exp_().mul_(_SQRT_2_OVER_PI).div_(erfc)
            x_plus_r = xc.add_(r)
        if x.numel() and not bool(x.amin() >= -a):  # (a NaN minimum: look, as for a tail)
            _ndtr_lower_tail(x, r, x_plus_r, log_cdf)
    return log_cdf, r, x_plus_r


def _ndtr_lower_tail(x, r, x_plus_r, log_cdf):
    """Overwrite ``r`` and ``x_plus_r`` / ``log_cdf`` (those not None) where ``x < -5``: with
    t = -x, Laplace's continued fraction r = t + 1/(t + 2/(t + 3/(t + ...))), whose last level
    gives x + r = 1/(t + 2/(...)) without cancellation, and log Phi = log phi - log r."""
    tail = (x < -_NDTR_TAIL).view(-1).nonzero().squeeze(-1)
    t = x.view(-1).index_select(0, tail).neg_()
    acc = t.clone()
    for k in range(_NDTR_CF_TERMS.get(x.dtype, 8), 1, -1):
        acc.reciprocal_().mul_(k).add_(t)
    s_t = acc.reciprocal_()
    if x_plus_r is not None:
        x_plus_r.view(-1).index_copy_(0, tail, s_t)
    r_t = t.add(s_t)
    r.view(-1).index_copy_(0, tail, r_t)
    if log_cdf is not None:
        log_cdf.view(-1).index_copy_(0, tail, t.square_().mul_(-0.5).sub_(_LOG_SQRT_2PI).sub_(r_t.log_()))


class _MillsRatio(torch.autograd.Function):
    """(r, x + r) of :func:`normal_mills_ratio`; backward from r' = -r (x + r) (once)."""

    @staticmethod
    def forward(ctx, x):
        _, r, x_plus_r = _ndtr_parts(x, False)
        ctx.save_for_backward(r, x_plus_r)
        return r, x_plus_r

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_r, grad_xr):
        r, x_plus_r = ctx.saved_tensors
        dr = -r * x_plus_r
        if grad_r is None:
            return grad_xr * (1.0 + dr)
        if grad_xr is None:
            return grad_r * dr
        return (grad_r + grad_xr) * dr + grad_xr


def normal_mills_ratio(x: torch.Tensor):
    r"""The inverse Mills ratio :math:`r(x) = \phi(x)/\Phi(x)` of the standard normal and
    :math:`x + r(x)`, so that :math:`(\log\Phi)' = r` and :math:`(\log\Phi)'' = -r\,(x + r)`.

    For :math:`x \ge -5`: :math:`\Phi = \tfrac12\mathrm{erfc}(-x/\sqrt2)` and
    :math:`\phi = e^{-x^2/2}/\sqrt{2\pi}`; below, Laplace's continued fraction
    :math:`r = t + 1/(t + 2/(t + 3/(t + \dots)))`, :math:`t = -x` (8 levels in float32, 24 in
    float64: the relative error is largest at the switch and checked there), whose
    tail :math:`x + r = 1/(t + 2/(\dots))` keeps :math:`(\log\Phi)''` exact where
    :math:`r \approx -x`. Accuracy as ``torch.special.log_ndtr``'s (``tests/test_noise.py``);
    on CPU, in float32, faster than :math:`\sqrt{2/\pi}/\mathrm{erfcx}(-x/\sqrt2)`
    (torch does not vectorise ``erfcx``; see [claim probit-step]). Differentiable once
    (:math:`r' = -r\,(x + r)`).

    Example:

    >>> import torch
    >>> from pyro_ar.noise.special import normal_mills_ratio
    >>> r, xr = normal_mills_ratio(torch.tensor([0.0, -1000.0], dtype=torch.float64))
    >>> round(r[0].item(), 12)         # sqrt(2/pi)
    0.797884560803
    >>> round(r[1].item(), 9), round(1 / xr[1].item(), 9)   # t + 1/t - 2/t^3, t + 2/t - 6/t^3 (t = 1000)
    (1000.000999998, 1000.001999994)
    """
    if torch.is_grad_enabled() and x.requires_grad:
        return _MillsRatio.apply(x)
    return _ndtr_parts(x, False)[1:]


class _LogNdtr(torch.autograd.Function):
    """log Phi(x); backward grad * r(x): the forward's r, or r from :class:`_MillsRatio` when
    the backward itself builds a graph (so that second derivatives are exact)."""

    @staticmethod
    def forward(ctx, x):
        log_cdf, r, _ = _ndtr_parts(x, True)
        ctx.save_for_backward(x, r)
        return log_cdf

    @staticmethod
    def backward(ctx, grad):
        x, r = ctx.saved_tensors
        if torch.is_grad_enabled():  # create_graph: a differentiable r
            r = _MillsRatio.apply(x)[0]
        return grad * r


def log_ndtr(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\log\Phi(x)` of the standard normal, stable in both tails, in the dtype of ``x``:
    :math:`\log\Phi` for :math:`-5 \le x \le 0`, :math:`\log(1 - \Phi(-x))` (``log1p``) above,
    :math:`\log\phi(x) - \log r(x)` below (:func:`normal_mills_ratio`). Its gradient is
    :math:`r(x)` (exact far in the lower tail, where torch's float32 ``log_ndtr`` backward,
    :math:`\exp(\log\phi - \log\Phi)`, loses it to cancellation), differentiable once more.
    On CPU, in float32, faster than ``torch.special.log_ndtr`` (which torch does not
    vectorise; the log Phi part of Brown's probit step went from 2.7 to 1.5 ms,
    [claim probit-step]). Float64 goes to ``torch.special.log_ndtr`` itself: accurate
    and twice differentiable there, and faster than the 24 continued-fraction levels.

    Example:

    >>> import torch
    >>> from pyro_ar.noise.special import log_ndtr
    >>> x = torch.tensor([-40.0, 0.0, 10.0], dtype=torch.float64)
    >>> torch.allclose(log_ndtr(x), torch.special.log_ndtr(x), rtol=1e-13, atol=0.0)
    True
    """
    if x.dtype == torch.float64:
        return torch.special.log_ndtr(x)
    if torch.is_grad_enabled() and x.requires_grad:
        return _LogNdtr.apply(x)
    return _ndtr_parts(x, True)[0]


class _SoftmaxLogProb(torch.autograd.Function):
    """``log_softmax(logits)[..., label]``; backward turns the saved log-softmax into the
    gradient in place (so it supports one backward pass per forward)."""

    @staticmethod
    def forward(ctx, logits, labels):
        logp = torch.log_softmax(logits, -1)
        ctx.save_for_backward(logp, labels)
        ctx.used = False
        return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad):
        if ctx.used:
            raise RuntimeError("softmax_log_prob supports one backward pass per forward pass (its "
                               "B x K buffer becomes the gradient); recompute the log-probabilities "
                               "for a second pass")
        ctx.used = True
        logp, labels = ctx.saved_tensors
        g = grad.unsqueeze(-1)
        out = logp.exp_().mul_(-g)  # -g softmax(psi), in the log-softmax's buffer
        return out.scatter_add_(-1, labels.unsqueeze(-1), g), None


def softmax_log_prob(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    r""":math:`\log\mathrm{softmax}(\psi)_y` for ``logits`` of shape ``batch_shape + (K,)`` and
    int64 ``labels`` of shape ``batch_shape``, with the memory-lean backward of the module
    docstring when ``logits`` needs a gradient (one backward pass per call; no double
    backward). Without a gradient it is ``log_softmax`` and ``gather``.

    Example:

    >>> import torch
    >>> from pyro_ar.noise.special import softmax_log_prob
    >>> psi = torch.randn(3, 5, requires_grad=True)
    >>> y = torch.tensor([0, 4, 2])
    >>> lp = softmax_log_prob(psi, y)
    >>> torch.allclose(lp, psi.log_softmax(-1).gather(-1, y[:, None]).squeeze(-1))
    True
    >>> (g,) = torch.autograd.grad(lp.sum(), psi)
    >>> torch.allclose(g, torch.nn.functional.one_hot(y, 5) - psi.softmax(-1))
    True
    """
    if labels.shape != logits.shape[:-1]:
        raise ValueError(f"labels must have shape {tuple(logits.shape[:-1])}, got {tuple(labels.shape)}")
    if torch.is_grad_enabled() and logits.requires_grad:
        return _SoftmaxLogProb.apply(logits, labels)
    return logits.log_softmax(-1).gather(-1, labels.unsqueeze(-1)).squeeze(-1)

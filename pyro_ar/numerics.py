r"""Numerical primitives shared by the whole package (the ground layer: imports only torch).

* :func:`softplus` -- :math:`s(x) = \log(1 + e^x)` to full precision, as
  ``logaddexp(0, x)``: ``torch.nn.functional.softplus`` returns :math:`x` itself above its
  threshold (20 by default), an absolute error up to :math:`e^{-20} \approx 2\cdot10^{-9}`.
  Its gradient is :math:`\sigma(x)` everywhere.
* :func:`softplus_inverse` -- :math:`s^{-1}(y) = \log(e^y - 1) = y + \log(1 - e^{-y})`, stable
  for small and large :math:`y > 0`.
* :func:`log_sigmoid` -- :math:`\log\sigma(x) = -s(-x)`. Not ``F.logsigmoid``: in torch 2.13
  on CPU that op opens a thread pool at every call (~12 ms even for a handful of elements on
  a loaded 2-core machine, against ~20 us here).
* :func:`uniform_open` -- :math:`U(0, 1)` draws in the *open* interval
  :math:`[\text{tiny}, 1 - \text{eps}]`, so that :math:`\log u` and :math:`\log(1-u)` stay
  finite (inversion sampling); takes a ``torch.Generator``.
* :func:`check_finite`, :func:`check_nonnegative`, :func:`check_positive` -- validation
  raising ``ValueError`` that names the argument and shows the offending values
  (:func:`show`).
* :func:`check_float_tensor` -- a real floating torch tensor argument (not numpy, not an
  integer tensor) with at least some number of dimensions; ``ValueError`` naming it otherwise.
* :func:`check_sample_shape` -- a draw's ``sample_shape`` (non-negative integer sizes) as a
  ``torch.Size``; ``ValueError`` naming it otherwise.
* :func:`check_int` -- an integer argument (Python or numpy integer, not ``bool``) within
  bounds, returned as a Python ``int``; ``ValueError`` naming it otherwise.
* :func:`as_tensor` / :func:`as_tensors` -- numbers to tensors of a reference dtype/device.
"""

import math
import numbers
import operator
from typing import Optional, Sequence, Tuple, Union

import torch

__all__ = [
    "softplus",
    "softplus_inverse",
    "log_sigmoid",
    "uniform_open",
    "weighted_mean",
    "show",
    "check_finite",
    "first_position",
    "check_positive_number",
    "check_nonnegative",
    "check_positive",
    "check_int",
    "check_choice",
    "keyword_names",
    "reject_moved_keywords",
    "check_float",
    "check_float_tensor",
    "check_sample_shape",
    "as_tensor",
    "as_tensors",
]


def weighted_mean(values, weights=None) -> float:
    r"""The float64 mean :math:`\sum_i w_i v_i / \sum_i w_i` of ``values`` (a tensor or array,
    (n,)) under the non-negative ``weights`` (n,; None: the plain mean; all zero: 0, not NaN).

    Example:

    >>> from pyro_ar.numerics import weighted_mean
    >>> weighted_mean([2.0, 6.0]), weighted_mean([2.0, 6.0], [1.0, 3.0]), weighted_mean([2.0], [0.0])
    (4.0, 5.0, 0.0)
    """
    v = torch.as_tensor(values).double()
    if weights is None:
        return float(v.mean())
    w = torch.as_tensor(weights).to(v)
    return float((w * v).sum() / w.sum().clamp(min=1e-300))


def softplus(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\log(1 + e^x)` to full precision, gradient :math:`\sigma(x)`.

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import softplus
    >>> x = torch.tensor([-800.0, 0.0, 30.0], dtype=torch.float64)
    >>> softplus(x)[1].item() == torch.log(torch.tensor(2.0, dtype=torch.float64)).item()
    True
    >>> (softplus(x)[2] - 30.0).item() > 0   # F.softplus would return exactly 30
    True
    """
    return torch.logaddexp(torch.zeros((), dtype=x.dtype, device=x.device), x)


def softplus_inverse(y: torch.Tensor) -> torch.Tensor:
    r""":math:`\log(e^y - 1)` for :math:`y > 0`, the inverse of :func:`softplus`.

    Written as :math:`y + \log(-\mathrm{expm1}(-y))`: no overflow for large :math:`y`, no
    cancellation for small :math:`y`.

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import softplus, softplus_inverse
    >>> x = torch.tensor([-30.0, 0.5, 700.0], dtype=torch.float64)
    >>> torch.allclose(softplus_inverse(softplus(x)), x)
    True
    """
    return y + torch.log(-torch.expm1(-y))


def log_sigmoid(x: torch.Tensor) -> torch.Tensor:
    r""":math:`\log\sigma(x) = -\log(1 + e^{-x})`, stable in both tails (no ``F.logsigmoid``).

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import log_sigmoid
    >>> log_sigmoid(torch.tensor([0.0, -1000.0])).tolist()
    [-0.6931471824645996, -1000.0]
    """
    return -softplus(-x)


def uniform_open(shape: Union[int, Sequence[int], torch.Size], *, dtype: torch.dtype = torch.float32,
                 device: Optional[Union[str, torch.device]] = None,
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
    r"""Uniform(0, 1) draws clamped to :math:`[\text{tiny}, 1 - \text{eps}]` (logs stay finite).

    :param shape: output shape.
    :param generator: an optional ``torch.Generator`` (reproducible draws that leave the
        global RNG untouched).

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import uniform_open
    >>> g = torch.Generator().manual_seed(0)
    >>> u = uniform_open((1000,), dtype=torch.float64, generator=g)
    >>> bool((u > 0).all() and (u < 1).all())
    True
    """
    u = torch.rand(shape, dtype=dtype, device=device, generator=generator)
    finfo = torch.finfo(dtype)
    return u.clamp_(min=finfo.tiny, max=1.0 - finfo.eps)


def show(t: torch.Tensor, n: int = 5) -> list:
    """The first ``n`` values of ``t`` as a list (for error messages).

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import show
    >>> show(torch.arange(10.0), 3)
    [0.0, 1.0, 2.0]
    """
    return t.detach().reshape(-1)[:n].tolist()


def first_position(mask: torch.Tensor, name: str, rows: Optional[torch.Tensor] = None) -> str:
    """``"name[i, j]"``: where the first True entry of ``mask`` lies (for error messages);
    with ``rows``, its first index is mapped through them (a minibatch's rows in the data).

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import first_position
    >>> first_position(torch.tensor([[False, False], [False, True]]), "x")
    'x[1, 1]'
    >>> first_position(torch.tensor([False, True]), "y", rows=torch.tensor([7, 3]))
    'y[3]'
    """
    if mask.layout != torch.strided:
        mask = mask.to_dense()
    if mask.dim() == 0:
        return name
    pos = mask.nonzero()[0].tolist()
    if rows is not None:
        pos[0] = int(rows[pos[0]])
    return f"{name}[{', '.join(map(str, pos))}]"


def check_finite(t: torch.Tensor, name: str, rows: Optional[torch.Tensor] = None) -> None:
    """Raise ``ValueError`` naming ``name`` and the first bad position if ``t`` holds NaN or
    infinite values (a torch sparse matrix: its stored values; ``rows`` as in
    :func:`first_position`).

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import check_finite
    >>> check_finite(torch.tensor([0.0, float("nan")]), "eps")
    Traceback (most recent call last):
    ...
    ValueError: eps must be finite, got non-finite values [nan] (the first at eps[1])
    """
    if t.layout == torch.strided:
        if not (t.is_floating_point() or t.is_complex()):
            return  # (integers and booleans are finite)
        if t.numel() > 64 and bool(torch.isfinite(t.sum())):
            # the fast path (on CPU a sum costs far less than isfinite().all()): a NaN or an
            # infinity makes the sum non-finite; finite values whose sum overflows fall through
            return
    if t.layout in (torch.sparse_coo, torch.sparse_csr):
        t = t.to_sparse_coo().coalesce() if t.layout != torch.sparse_coo else t.coalesce()
        bad = ~torch.isfinite(t.values())
        if bad.any():
            i = int(bad.nonzero()[0, 0])
            where = f"{name}[{', '.join(str(int(v)) for v in t.indices()[:, i])}]"
            raise ValueError(f"{name} must be finite, got non-finite values {show(t.values()[bad])} "
                             f"(the first at {where})")
        return
    finite = torch.isfinite(t)
    if not finite.all():
        raise ValueError(f"{name} must be finite, got non-finite values {show(t[~finite])} "
                         f"(the first at {first_position(~finite, name, rows)})")


def check_nonnegative(t: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``t`` is finite and ``>= 0``.

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import check_nonnegative
    >>> check_nonnegative(torch.tensor([1.0, -2.0]), "logits_var")
    Traceback (most recent call last):
    ...
    ValueError: logits_var must be >= 0, got [-2.0]
    """
    check_finite(t, name)
    if (t < 0).any():
        raise ValueError(f"{name} must be >= 0, got {show(t[t < 0])}")


def check_positive(t: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` naming ``name`` unless ``t`` is finite and ``> 0``.

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import check_positive
    >>> check_positive(torch.tensor([0.0]), "scale")
    Traceback (most recent call last):
    ...
    ValueError: scale must be > 0, got [0.0]
    """
    check_finite(t, name)
    if (t <= 0).any():
        raise ValueError(f"{name} must be > 0, got {show(t[t <= 0])}")


def check_int(name: str, value: object, low: Optional[int] = None, high: Optional[int] = None,
              allow_none: bool = False, what: str = "") -> Optional[int]:
    """``value`` as a Python ``int`` if it is an integer in ``[low, high]``, else a named error.

    Python and numpy integers (and 0-d integer tensors) are accepted; ``bool``, floats (even
    integral ones such as ``2.0``), other types and values out of bounds raise ``ValueError``
    (as every argument check of the package does) naming the argument, the value and what
    is expected.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.numerics import check_int
    >>> check_int("num_negatives", np.int64(2), low=1)
    2
    >>> check_int("num_nodes", 0, low=5, high=4097)
    Traceback (most recent call last):
    ...
    ValueError: num_nodes must be an integer in [5, 4097], got num_nodes=0
    """
    if value is None and allow_none:
        return None
    if low is not None and high is not None:
        expected = f"an integer in [{low}, {high}]"
    elif low is not None:
        expected = f"an integer >= {low}"
    elif high is not None:
        expected = f"an integer <= {high}"
    else:
        expected = "an integer"
    expected += " or None" if allow_none else ""
    expected += what
    if isinstance(value, bool) or (isinstance(value, torch.Tensor) and value.dtype == torch.bool):
        raise ValueError(f"{name} must be {expected}, got {name}={value!r}")
    try:
        out = operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be {expected}, got {name}={value!r} "
                        f"({type(value).__name__})") from None
    if (low is not None and out < low) or (high is not None and out > high):
        raise ValueError(f"{name} must be {expected}, got {name}={value!r}")
    return int(out)


def check_float_tensor(name: str, value: object, min_dim: int = 0, what: str = "") -> torch.Tensor:
    """``value`` if it is a real floating torch tensor (float16/bfloat16/32/64) of at least
    ``min_dim`` dimensions, else a ``ValueError`` naming ``name``, what it got and what is
    expected (``what``: the expected shape in words). Integer tensors are refused rather than
    cast: the arithmetic they would go through (nodes, modes) truncates silently.

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import check_float_tensor
    >>> check_float_tensor("d", torch.zeros(2, 3), min_dim=1).shape
    torch.Size([2, 3])
    >>> check_float_tensor("d", torch.zeros(2, dtype=torch.long))
    Traceback (most recent call last):
    ...
    ValueError: d must be a floating torch tensor, got a torch.int64 tensor of shape (2,)
    """
    expected = f"a floating torch tensor{f' of at least {min_dim} dimensions' if min_dim > 1 else ' of at least 1 dimension' if min_dim else ''}{what}"
    if not isinstance(value, torch.Tensor):
        got = f"of shape {tuple(value.shape)}" if hasattr(value, "shape") else f"{value!r:.60}"
        raise ValueError(f"{name} must be {expected}, got a {type(value).__name__} {got}")
    if not value.is_floating_point() or value.dim() < min_dim:
        raise ValueError(f"{name} must be {expected}, got a {value.dtype} tensor of shape {tuple(value.shape)}")
    return value


def check_sample_shape(sample_shape: object, name: str = "sample_shape") -> torch.Size:
    """``sample_shape`` as a ``torch.Size`` if it is a sequence of integers >= 0 (or a
    ``torch.Size``), else a ``ValueError`` naming it (torch's own message for a negative size
    names neither the argument nor the call).

    Example:

    >>> from pyro_ar.numerics import check_sample_shape
    >>> check_sample_shape((2, 3))
    torch.Size([2, 3])
    >>> check_sample_shape((-2,))
    Traceback (most recent call last):
    ...
    ValueError: sample_shape must be a sequence of integers >= 0 (a torch.Size), got sample_shape=(-2,)
    """
    try:
        sizes = [operator.index(n) for n in sample_shape] if not isinstance(sample_shape, (str, bytes)) else None
    except TypeError:
        sizes = None
    if sizes is None or any(n < 0 for n in sizes) or any(isinstance(n, bool) for n in sample_shape):
        raise ValueError(f"{name} must be a sequence of integers >= 0 (a torch.Size), got {name}={sample_shape!r}")
    return torch.Size(sizes)


def check_positive_number(name: str, value: object, min_value: float = 0.0, inclusive: bool = False) -> float:
    """``value`` as a Python ``float`` if it is a finite real number > ``min_value`` (e.g. the
    smallest normal float, so that dividing by it cannot overflow to inf or NaN; ``>=`` with
    ``inclusive``), else a ``ValueError`` naming the argument and value (``bool`` and
    non-numbers rejected).

    Example:

    >>> from pyro_ar.numerics import check_positive_number
    >>> check_positive_number("lengthscale", 2)
    2.0
    >>> check_positive_number("lengthscale", -1.0)
    Traceback (most recent call last):
    ...
    ValueError: lengthscale must be a finite number > 0, got lengthscale=-1.0
    """
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) or (
        hasattr(value, "__float__") and not isinstance(value, (bool, str, torch.Tensor)))
    if ok:
        try:
            out = float(value)
        except (TypeError, ValueError, OverflowError):
            ok = False
    if not ok or not (min_value <= out if inclusive else min_value < out) or not out < float("inf"):
        raise ValueError(f"{name} must be a finite number {'>=' if inclusive else '>'} {min_value:g}, "
                         f"got {name}={value!r}")
    return out


def check_float(name, value, low=None, high=None, low_open=True, high_open=True):
    """``value`` as a float if it is a finite real number in the given (open or closed)
    bounds, else a ``ValueError`` naming ``name``.

    Example:

    >>> from pyro_ar.numerics import check_float
    >>> check_float("tol", 0.5, low=0.0, high=1.0)
    0.5
    >>> check_float("tol", 2, low=0.0, high=1.0)
    Traceback (most recent call last):
    ...
    ValueError: tol must be a finite number in (0.0, 1.0), got 2
    """
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)
    if ok and low is not None:
        ok = value > low if low_open else value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        lo = "" if low is None else ("(" if low_open else "[") + f"{low}, "
        hi = "" if high is None else f"{high}" + (")" if high_open else "]")
        rng = f"in {lo}{hi}" if low is not None and high is not None else (
            f"{'>' if low_open else '>='} {low}" if low is not None else f"< {high}")
        raise ValueError(f"{name} must be a finite number {rng}, got {value!r}")
    return float(value)


def keyword_names(fn) -> tuple:
    """The names ``fn`` takes by keyword (read from its code object: cheap enough for every call).

    Example:

    >>> from pyro_ar.numerics import keyword_names
    >>> keyword_names(lambda a, b=1, *args, c=2, **kw: None)
    ('a', 'b', 'c')
    """
    code = fn.__code__
    return code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]


def reject_moved_keywords(owner: str, kwargs, moved, accepted=()) -> None:
    """Raise ``TypeError`` for a keyword of ``moved`` (a former keyword -> where it went) that
    ``owner`` does not take (``accepted``), quoting where it went: what a model constructor, a
    distribution and :func:`~pyro_ar.sample_categorical` say for a keyword of their former
    signatures, instead of Python's bare "unexpected keyword".

    Example:

    >>> from pyro_ar.numerics import reject_moved_keywords
    >>> reject_moved_keywords("f", {"size": 3}, {"size": "give it as shape=(size,)"})
    Traceback (most recent call last):
    ...
    TypeError: f got size=3: give it as shape=(size,)
    """
    for name, value in kwargs.items():
        if name in moved and name not in accepted:
            raise TypeError(f"{owner} got {name}={value!r}: {moved[name]}")


def check_choice(name, value, choices):
    """``value`` if it is one of ``choices``, else a ``ValueError`` naming ``name``.

    Example:

    >>> from pyro_ar.numerics import check_choice
    >>> check_choice("weights", "map", ("mle", "map"))
    'map'
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def as_tensor(x: Union[float, torch.Tensor], like: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` (a tensor or a real number) as a floating tensor of ``like``'s dtype and device.

    Integer tensors are cast to ``like.dtype``; other tensors pass through.

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import as_tensor
    >>> as_tensor(2, torch.zeros((), dtype=torch.float64), "a")
    tensor(2., dtype=torch.float64)
    """
    if isinstance(x, torch.Tensor):
        return x if x.is_floating_point() else x.to(like.dtype)
    if isinstance(x, (int, float)) and not isinstance(x, bool):
        return torch.tensor(float(x), dtype=like.dtype, device=like.device)
    raise ValueError(f"{name} must be a tensor or a number, got {x!r}")


def as_tensors(loc: Union[float, torch.Tensor],
               scale: Union[float, torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(loc, scale)`` as tensors, numbers taking the other argument's dtype and device
    (the default dtype when both are numbers).

    Example:

    >>> import torch
    >>> from pyro_ar.numerics import as_tensors
    >>> as_tensors(0.0, torch.ones(2, dtype=torch.float64))[0].dtype
    torch.float64
    """
    if not isinstance(loc, torch.Tensor) and not isinstance(scale, torch.Tensor):
        loc = torch.as_tensor(loc, dtype=torch.get_default_dtype())
    if not isinstance(loc, torch.Tensor):
        loc = torch.as_tensor(loc, dtype=scale.dtype, device=scale.device)
    if not isinstance(scale, torch.Tensor):
        scale = torch.as_tensor(scale, dtype=loc.dtype, device=loc.device)
    return loc, scale

"""The estimator's checks of numbers and choices (integers: :func:`pyro_ar.numerics.check_int`)."""

import math
import numbers


def check_float(name, value, low=None, high=None, low_open=True, high_open=True):
    """``value`` as a float if it is a finite real number in the given (open or closed)
    bounds, else a ``ValueError`` naming ``name``."""
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


def check_choice(name, value, choices):
    """``value`` if it is one of ``choices``, else a ``ValueError`` naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value

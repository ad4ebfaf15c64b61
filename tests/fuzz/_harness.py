"""The invariant every fuzzed call must satisfy, and the counts reported by the suite.

A call either returns a value that the caller's check accepts (finite when the inputs were
finite), or raises a *named* error: ``ValueError``/``TypeError`` (for loaders also
``FileNotFoundError``) whose message names one of the arguments it was given. Anything
else -- an ``IndexError``/``ZeroDivisionError``/``RuntimeError``/``KeyError`` from inside
torch or Pyro, a NaN, a lost file -- fails the test and is counted.

``STATS`` is reported at the end of the run (tests/fuzz/conftest.py) and written to
``$PYRO_AR_FUZZ_STATS`` when set, so that a closing note can quote
"N inputs, 0 unnamed errors, 0 non-finite, 0 lost files".
"""

import collections
import math

import torch
from hypothesis import HealthCheck, settings

STATS = collections.Counter()

#: every fuzz test: reproducible (derandomized, no example database), no deadline (the
#: machine is shared), and sized so the whole suite takes well under 60 s
FUZZ = settings(derandomize=True, database=None, deadline=None, print_blob=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much,
                                       HealthCheck.function_scoped_fixture])

NAMED = (ValueError, TypeError)


class Unnamed(AssertionError):
    """A fuzzed call broke the invariant."""


def call(fn, names, *, kind="call", allowed=NAMED):
    """``(True, value)`` or ``(False, error)`` for a named error; raises :class:`Unnamed` otherwise.

    :param names: argument names (or file names) of which the message must contain one.
    """
    STATS["inputs"] += 1
    STATS["inputs:" + kind] += 1
    try:
        value = fn()
    except allowed as e:
        msg = str(e)
        if not any(n in msg for n in names):
            STATS["unnamed"] += 1
            raise Unnamed(f"{type(e).__name__} names none of {list(names)}: {msg!r}") from e
        STATS["named_errors"] += 1
        return False, e
    except Exception as e:  # noqa: BLE001
        STATS["unnamed"] += 1
        raise Unnamed(f"{type(e).__name__} from inside: {e!r}") from e
    STATS["values"] += 1
    return True, value


def finite(name, t, allow=None):
    """Fail (and count) unless tensor/number ``t`` is finite; ``allow``: mask of entries
    whose true value is out of the dtype's range (then -inf is the correctly rounded value)."""
    if isinstance(t, (int, float)):
        ok = math.isfinite(t)
    else:
        bad = ~torch.isfinite(t)
        if allow is not None:
            bad = bad & ~(allow & (t == -math.inf))
        ok = not bool(bad.any())
    if not ok:
        STATS["non_finite"] += 1
        raise Unnamed(f"{name} is not finite from finite inputs: {t}")


def all_finite(*ts):
    """Whether every tensor given is floating and finite (or not a float tensor)."""
    return all(not (isinstance(t, torch.Tensor) and t.is_floating_point()) or bool(torch.isfinite(t).all())
               for t in ts)


def lost_file():
    STATS["lost_files"] += 1


def summary():
    return (f"{STATS['inputs']} inputs ({STATS['values']} values, {STATS['named_errors']} named "
            f"errors, {STATS['failed_writes']} failed writes), {STATS['unnamed']} unnamed errors, "
            f"{STATS['non_finite']} non-finite, {STATS['lost_files']} lost files, "
            f"{STATS['silently_accepted']} bad inputs silently accepted")

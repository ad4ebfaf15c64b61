"""The optimizer's part of a checkpoint: read, checked and handed back.

:func:`optim_state` reads a Pyro optimizer's state (with the per-parameter states loaded
but not yet consumed), :func:`check_optim_values` and :func:`check_optim_state` refuse
hand-made states that would fail (or silently drop a state) at the first step, and
:func:`set_optim_state` gives a state to an optimizer, fresh or used.
"""

import math
from typing import Dict, Optional

import torch

import pyro
from pyro.optim import PyroOptim
from pyro.optim.optim import _load_state_dict

__all__ = ["optim_state", "set_optim_state", "check_optim_state", "check_optim_values"]


def optim_state(optim) -> Optional[Dict]:
    """The state of ``svi.optim`` (``get_state()``, with the per-parameter states loaded but
    not consumed by a step yet); None for an optimizer without ``get_state``.

    Example:

    >>> import torch, pyro
    >>> from pyro.optim import Adam
    >>> from pyro_ar.infer.optim_state import optim_state, set_optim_state
    >>> w = pyro.get_param_store().setdefault("w", torch.zeros(2)).unconstrained()
    >>> w.grad = torch.ones(2); optim = Adam({"lr": 0.1}); optim([w])
    >>> fresh = Adam({"lr": 0.1}); set_optim_state(fresh, optim_state(optim))
    >>> sorted(optim_state(fresh))         # waiting for the next step of w
    ['w']
    """
    if not hasattr(optim, "get_state"):
        return None
    state = dict(getattr(optim, "_state_waiting_to_be_consumed", {}))  # not stepped since a load
    state.update(optim.get_state())
    return state


def set_optim_state(optim, state) -> None:
    """Give ``state`` (:func:`optim_state`'s) to ``optim``, fresh or used (a PyroOptim's
    per-parameter optimizers are dropped first); None does nothing.

    Example:

    >>> from pyro.optim import Adam
    >>> from pyro_ar.infer.optim_state import set_optim_state
    >>> optim = Adam({"lr": 0.1}); set_optim_state(optim, {})
    >>> optim.optim_objs
    {}
    """
    if state is None:
        return
    if not hasattr(optim, "set_state"):
        raise TypeError(f"svi.optim ({type(optim).__name__}) has no set_state")
    if isinstance(optim, PyroOptim):  # forget optimizers of the parameters before the load
        optim.optim_objs.clear()
        optim.grad_clip.clear()
        optim._state_waiting_to_be_consumed = {}
    optim.set_state(state)


def check_optim_state(optim, state) -> None:
    """Each per-parameter state of a PyroOptim must name a parameter of the (restored) param
    store and load into an optimizer of that parameter, its row-wise tensors with as many
    rows: otherwise the first step would fail (a KeyError or a shape error) far from the file.

    Example:

    >>> from pyro.optim import Adam
    >>> from pyro_ar.infer.optim_state import check_optim_state
    >>> check_optim_state(Adam({"lr": 0.1}), {"nowhere": {}})
    Traceback (most recent call last):
    ...
    ValueError: the optimizer state names the parameter 'nowhere', which is not in the checkpoint's param store
    """
    if state is None or not isinstance(optim, PyroOptim):
        return
    if not isinstance(state, dict):
        raise ValueError(f"the optimizer state must be a dict of per-parameter states, got a "
                         f"{type(state).__name__}")
    store = pyro.get_param_store()
    for name, part in state.items():
        if name not in store:
            raise ValueError(f"the optimizer state names the parameter {name!r}, which is not in the "
                             f"checkpoint's param store")
        param = store[name].unconstrained()
        try:
            opt = optim._get_optim(param)
            _load_state_dict(opt, part)
        except Exception as e:  # noqa: BLE001  (a hand-made state: report what and where)
            raise ValueError(f"the optimizer state of parameter {name!r} does not load into "
                             f"{type(optim).__name__}'s optimizer: {type(e).__name__}: {e}") from e
        inner = getattr(opt, "optimizer", opt)
        for values in inner.state.values():
            for key, t in values.items():
                if torch.is_tensor(t) and t.dim() >= 1 and param.dim() >= 1 and t.shape[0] != param.shape[0]:
                    raise ValueError(f"the optimizer state {key!r} of parameter {name!r} has shape "
                                     f"{tuple(t.shape)}, the parameter {tuple(param.shape)}")


#: Python integers torch can take as a scalar (a larger one overflows inside the step)
_INT64 = 2 ** 63


def check_optim_values(name, state) -> None:
    """Per-parameter optimizer states hold tensors and finite numbers, and their ``params``
    ids cover the states' keys (else torch drops a state without a word).

    Example:

    >>> from pyro_ar.infer.optim_state import check_optim_values
    >>> check_optim_values("w", {"state": {}, "param_groups": [{"lr": float("nan"), "params": [0]}]})
    Traceback (most recent call last):
    ...
    ValueError: the optimizer settings of parameter 'w': lr=nan is not finite
    """
    if not (isinstance(state, dict) and isinstance(state.get("state"), dict)
            and isinstance(state.get("param_groups"), list)):
        inner = state.get("optimizer") if isinstance(state, dict) else None
        if isinstance(inner, dict) and "scheduler" in state:  # a scheduler's: check its optimizer
            return check_optim_values(name, inner)
        raise ValueError(f"the optimizer state of parameter {name!r} must be a dict with 'state' and "
                         f"'param_groups'")
    for group in state["param_groups"]:
        problem = _param_group_problem(group)
        if problem:
            raise ValueError(f"the optimizer settings of parameter {name!r}: {problem}")
    ids = [i for g in state["param_groups"] if isinstance(g, dict) for i in g.get("params", [None])]
    if any(isinstance(i, bool) or not isinstance(i, int) for i in ids) or not set(state["state"]) <= set(ids):
        raise ValueError(f"the optimizer state of parameter {name!r} has parameter ids {ids!r} that do "
                         f"not cover its states {sorted(map(repr, state['state']))}")
    for values in state["state"].values():
        for key, v in (values.items() if isinstance(values, dict) else [("(entry)", values)]):
            ok = all(x is None or (not x.is_floating_point() or bool(torch.isfinite(x).all()))
                     if isinstance(x, torch.Tensor) else isinstance(x, (int, float)) and not
                     isinstance(x, bool) and math.isfinite(x)
                     for x in (v if isinstance(v, (list, tuple)) else [v]))
            if key == "step" and not isinstance(v, torch.Tensor):
                ok = ok and isinstance(v, int) and 0 <= v < _INT64
            ok = ok and not any(isinstance(x, int) and abs(x) >= _INT64
                                for x in (v if isinstance(v, (list, tuple)) else [v]))
            if not ok:
                raise ValueError(f"the optimizer state {key!r} of parameter {name!r} is {v!r}: not a "
                                 f"tensor, a finite number or None")


def _param_group_problem(group) -> Optional[str]:
    """What is wrong with one torch optimizer's param group (the settings torch's
    optimizers share: lr, betas, eps, weight decay, momentum; numbers finite)."""
    if not isinstance(group, dict):
        return f"a param group is a {type(group).__name__}, not a dict"
    for key, v in group.items():
        values = v if isinstance(v, (list, tuple)) and key != "params" else [v]
        for x in values if key != "params" else []:
            if isinstance(x, float) and not math.isfinite(x):
                return f"{key}={v!r} is not finite"
            if isinstance(x, int) and not isinstance(x, bool) and abs(x) >= _INT64:
                return f"{key}={v!r} is out of range (beyond a 64-bit integer)"
    rules = {"lr": lambda x: x >= 0, "initial_lr": lambda x: x >= 0, "eps": lambda x: x >= 0,
             "weight_decay": lambda x: x >= 0, "momentum": lambda x: 0 <= x <= 1,
             "betas": lambda x: all(isinstance(b, (int, float)) and 0 <= b < 1 for b in x) and len(x) == 2}
    for key, ok in rules.items():
        if key in group:
            v = group[key]
            number = isinstance(v, (int, float)) and not isinstance(v, bool)
            try:
                good = ok(v) if key == "betas" else number and ok(v)
            except TypeError:
                good = False
            if not good:
                return f"{key}={v!r} is out of range"
    return None

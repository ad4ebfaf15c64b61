"""The estimator's Pyro param store states (``{"params": ..., "constraints": ...}``): the
global parameters of a fit, kept as ``param_state_``, and moved between devices."""

import torch

import pyro


def state_on(state, device=None, copy: bool = False):
    """``state`` with its tensors detached and on ``device`` (None: where they are). The
    tensors are shared when they already are there, unless ``copy`` (a state that training
    will change in place); the dicts are always new (``ParamStoreDict.scope`` writes into
    the state it is given)."""
    def moved(t):
        t = t.detach()
        if device is not None:
            return t.to(device, copy=copy)
        return t.clone() if copy else t
    return {"params": {n: moved(p) for n, p in state["params"].items()},
            "constraints": dict(state["constraints"])}


def global_state(model, guide):
    """The param store state of the global parameters (not the per-datapoint local ones):
    W, b for point weights, the AutoNormal part of the guide for ``"bayes"`` (detached, not
    copied: the fit's store is discarded after it)."""
    store = pyro.get_param_store()
    if model.weights == "bayes":
        names = [store.param_name(t) for t in guide[0].parameters()]
    else:
        names = [model.prefix + n for n in model.parameter_shapes()]
    state = store.get_state()
    return state_on({"params": {n: state["params"][n] for n in names if n},
                     "constraints": {n: state["constraints"][n] for n in names if n}})


def dummy_datapoint(D, device):
    """One labelled datapoint, to set up a guide's prototype trace or draw q(W, b)."""
    return torch.zeros(1, D, device=device), torch.zeros(1, dtype=torch.long, device=device)

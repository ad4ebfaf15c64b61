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


def mean_field_draws(state, shapes, num_samples: int, seed: int):
    r"""``num_samples`` draws of the sites ``shapes`` (name -> shape) from the mean-field Gaussian
    posterior :math:`q(\theta) = N(\mu, \mathrm{diag}\,\sigma^2)` an ``AutoNormal`` fitted to
    unconstrained sites (W, b, E) holds in the param ``state`` (its ``...locs.<site>`` and
    ``...scales.<site>``): :math:`\theta_s = \mu + \sigma z_s`, :math:`z_s \sim N(0, I)` from a
    generator seeded with ``seed`` (the same draws at every call). Returns ``{site: (S, *shape)}``
    in float64; a stored site of another shape raises ``ValueError``.

    Example:

    >>> import torch
    >>> from torch.distributions import constraints
    >>> from pyro_ar.infer.param_state import mean_field_draws
    >>> state = {"params": {"g.locs.w": torch.zeros(3), "g.scales.w": torch.ones(3)},
    ...          "constraints": {"g.locs.w": constraints.real, "g.scales.w": constraints.positive}}
    >>> mean_field_draws(state, {"w": (3,)}, 4, seed=0)["w"].shape
    torch.Size([4, 3])
    """
    from torch.distributions import transform_to

    params, cons = state["params"], state["constraints"]
    generator, draws = torch.Generator().manual_seed(int(seed)), {}
    for site, shape in shapes.items():
        loc_name = next((n for n in params if n.endswith(f"locs.{site}")), None)
        if loc_name is None:
            raise ValueError(f"the param state holds no posterior location of {site!r}")
        scale_name = loc_name[:-len(f"locs.{site}")] + f"scales.{site}"
        loc = params[loc_name].detach().double()
        scale = transform_to(cons[scale_name])(params[scale_name].detach()).double()
        if tuple(loc.shape) != tuple(shape) or scale.shape != loc.shape:
            raise ValueError(f"the param state holds {site!r} of shape {tuple(loc.shape)}, expected {tuple(shape)}")
        z = torch.randn((num_samples,) + tuple(shape), generator=generator, dtype=torch.float64)
        draws[site] = loc + scale * z.to(loc.device)
    return draws

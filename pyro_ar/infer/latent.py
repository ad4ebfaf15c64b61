r"""Inference for the latent models of :mod:`pyro_ar.models.latent`: their guide
(:class:`LatentGuide`) and KL annealing (:class:`LatentKLWarmup`).

The guide is :math:`q(\omega_u)\prod_t q(\varepsilon_{u,t}\mid\psi_u)`: the model's
posterior module gives :math:`q(\omega_u) = N(\mu_u, \mathrm{diag}\,\sigma_u^2)`, and for A&R
every observed item's noise gets the conditional local guide of
:func:`~pyro_ar.infer.local_fit.conditional_local_q`. :func:`pyro_ar.infer.default_guide` of a
:class:`~pyro_ar.models.CategoricalLatentModel` is a :class:`LatentGuide`.
"""

import torch

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine

from ..models.base import check_positive_int, take_rows
from ..models.latent import CategoricalLatentModel
from ..negatives import SharedNegatives, as_negative_sampler
from .local_fit import conditional_local_q, local_sampler, unit_gumbel_optimum

__all__ = ["LatentGuide", "LatentKLWarmup", "EXACT_COST_RATIO"]

#: With :class:`LatentGuide`'s default ``all_classes_upto`` and Gumbel noise, a site's guide sums
#: all K classes when that costs at most this many times the model's own subsampled class sum:
#: utility rows x K <= EXACT_COST_RATIO x items x s (see :meth:`LatentGuide.site_sampler`).
EXACT_COST_RATIO = 32


class LatentGuide:
    r"""Guide of a :class:`~pyro_ar.models.CategoricalLatentModel`: :math:`q(\omega_u)` from the
    model's posterior module (reparameterised), and for A&R the conditional local guide
    :math:`q(\varepsilon_{u,t}\mid\psi_u)` of every observed item (no per-item state), built
    from detached utilities at the drawn :math:`\omega_u` (the envelope-theorem gradient of
    :class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide`).

    :param model: the :class:`~pyro_ar.models.CategoricalLatentModel`.
    :param negatives: the guide's class subsample (default ``"model"``: the model's sampler, per
        site; else read by :func:`~pyro_ar.negatives.as_negative_sampler`: None, all classes; an
        int s, s per datapoint; a sampler).
    :param int all_classes_upto: sites over at most this many classes get the guide's class sum
        over all of them with ``negatives="model"`` (O(K) in the guide only; the model's bound
        still subsamples). An independent small draw there makes the estimate of the bound's
        term :math:`\hat S/(1+\hat S')` heavy-tailed whenever :math:`\hat S'` misses a
        dominant class, which can diverge a fit with unregularised weights. Default (None): 64,
        and for Gumbel noise also any site where the exact sum is cheap against the model's own
        (:meth:`site_sampler`, ``EXACT_COST_RATIO``). For Gumbel noise the exact local optimum is
        :math:`\log\eta = \log\sum_k e^{\psi_k} - \psi_y`, and a session's utilities do not
        depend on the position, so the sum costs one :math:`K`-row of utilities per session
        (:math:`O(UK)` utilities a step for U sessions, one matrix product), not one per item.
        With it the bound's term is
        :math:`(1+\hat S)/(1+S) = p(y\mid\omega) + \sum_j a_j\,p(k_j\mid\omega) \le 1 + \sum_j a_j`
        (as :math:`e^{\psi_k-\psi_y}/(1+S) = p(k\mid\omega)`): bounded by the
        model sampler's weights whatever the utilities (at most :math:`1 + K/\alpha` for
        :class:`~pyro_ar.negatives.ImportanceNegatives` with ``uniform_mix`` α).
        With an independent draw of the guide's instead, the long run of the session model on
        Brown sentences collapsed (issue 27, [claim session-longrun]).
    :param bool label_head: the guide's class subsample also holds the minibatch's distinct
        items, summed exactly (:func:`~pyro_ar.infer.local_fit.local_sampler`; default True):
        without them a small uniform draw misses the frequent items in most steps, and the fit
        at few negatives drifts away with training (issue 27).

    Example:

    >>> import torch, pyro.poutine as poutine
    >>> from pyro_ar.infer import LatentGuide
    >>> from pyro_ar.models import CategoricalLatentModel
    >>> from pyro_ar.likelihoods import AR
    >>> from pyro_ar.negatives import SharedNegatives
    >>> model = CategoricalLatentModel(50, 2, likelihood=AR(negatives=SharedNegatives(5)))
    >>> tr = poutine.trace(LatentGuide(model)).get_trace(torch.tensor([[1, 2, -1], [3, -1, -1]]))
    >>> tr.nodes["omega"]["value"].shape, tr.nodes["v_eps"]["value"].shape
    (torch.Size([2, 1, 2]), torch.Size([2, 3]))
    """

    def __init__(self, model: CategoricalLatentModel, negatives="model", all_classes_upto=None,
                 label_head: bool = True):
        self.model, self.label_head = model, bool(label_head)
        self._local_samplers = {}  # base sampler -> the guide's (stratified) sampler
        self.sampler = None if isinstance(negatives, str) and negatives == "model" else as_negative_sampler(negatives)
        # the cost rule of site_sampler: only by default, and only where the exact sum is closed-form
        self.exact_cost_ratio = EXACT_COST_RATIO if all_classes_upto is None and unit_gumbel_optimum(model.noise) else 0
        self.all_classes_upto = check_positive_int("all_classes_upto", 64 if all_classes_upto is None
                                                   else all_classes_upto)

    def site_sampler(self, group, num_classes: int, utility_rows: int = 0, num_items: int = 0):
        """The negative sampler of the local step of ``group``'s site over ``num_classes`` classes.

        All classes when ``num_classes <= all_classes_upto``; with the default and Gumbel noise,
        also when ``utility_rows * num_classes <= EXACT_COST_RATIO * num_items * s`` for the
        model's ``s`` negatives: the exact sum evaluates one K-row per utility row (a session),
        the model's bound s utilities per item, so the guide then costs at most that multiple of
        the model's class sum (the Brown sessions: 64 x 26,101 against 64 x 30 x 100; a latent GP
        on 3-word windows, one item per row, stays subsampled). Else the model's sampler,
        stratified by the minibatch's items (``label_head``)."""
        if self.sampler is not None:
            return self.sampler
        base = self.model.group_likelihood(group).sampler
        s = base.num_negatives
        cheap = self.exact_cost_ratio > 0 and (s is None or utility_rows * num_classes
                                               <= self.exact_cost_ratio * num_items * s)
        if num_classes <= self.all_classes_upto or cheap:
            return SharedNegatives(None)  # every class
        cached = self._local_samplers.get(id(base))
        if cached is None or cached[0] is not base:
            cached = self._local_samplers[id(base)] = (base, local_sampler(base, 1, self.label_head))
        return cached[1]

    def __call__(self, items: torch.Tensor):
        model = self.model
        N = len(items)
        with model.create_plates(items) as idx:
            v = take_rows(items, None if idx.shape[0] == N else idx)
            loc, scale, _ = model.posterior_params(idx, v)
            q = dist.Normal(loc.unsqueeze(-2), scale.unsqueeze(-2)).to_event(1)
            with poutine.scale(scale=model.latent_kl_weight):
                omega = pyro.sample(model.latent_site, q)
            if not model.likelihood.has_local_latent:
                return omega
            params = model.fitted_parameters(loc)
            for site, plate, vg, group in model.observation_groups(v):
                with pyro.plate(plate, vg.shape[-1], dim=-1), poutine.mask(mask=vg >= 0):
                    with torch.no_grad():
                        utility = model.minibatch_utility(omega.detach(), params, group, sample=False)
                        sampler = self.site_sampler(group, utility.num_classes, utility.batch_shape.numel(),
                                                    vg.numel())
                        fn, infer = conditional_local_q(model.noise, utility, vg.clamp(min=0), sampler)
                    pyro.sample(site + "_eps", fn, infer=infer)
        return omega


class LatentKLWarmup:
    r"""KL annealing of a latent model's per-datapoint latent (Bowman et al. 2016): after
    step t the loss is

    .. math::  -\mathbb{E}_q\log p(y\mid\omega) + \beta_t\,\mathrm{KL}(q(\omega)\Vert p(\omega)),
               \qquad \beta_t = \min\big(1, \max(t, 1)/T\big),

    set on ``model.latent_kl_weight`` (a ``poutine.scale`` of the latent site in model and
    guide), so from step T = ``num_steps`` on it is the ELBO again. Without it a model whose
    utilities start flat (the CLGP) can collapse its posterior to the prior before the
    utilities learn to use it. An object with ``step()``, ``get_state()`` and ``set_state()``:
    pass it as :func:`pyro_ar.infer.train`'s ``scheduler`` (its state is checkpointed).

    Example:

    >>> from pyro_ar.infer import LatentKLWarmup
    >>> from pyro_ar.models import CategoricalLatentModel
    >>> from pyro_ar.likelihoods import AR
    >>> from pyro_ar.negatives import SharedNegatives
    >>> model = CategoricalLatentModel(50, 2, likelihood=AR(negatives=SharedNegatives(5)))
    >>> warmup = LatentKLWarmup(model, num_steps=4)
    >>> weights = [model.latent_kl_weight]
    >>> for _ in range(5):
    ...     warmup.step()
    ...     weights.append(model.latent_kl_weight)
    >>> weights
    [0.25, 0.25, 0.5, 0.75, 1.0, 1.0]
    """

    def __init__(self, model: CategoricalLatentModel, num_steps: int):
        if not isinstance(model, CategoricalLatentModel):
            raise ValueError(f"model must be a CategoricalLatentModel (it has the latent to anneal), got "
                             f"{type(model).__name__}")
        self.model, self.num_steps = model, check_positive_int("num_steps", num_steps)
        self.set_state({"step": 0})

    def step(self) -> None:
        """One SVI step done: raise :math:`\\beta`."""
        self.set_state({"step": self.t + 1})

    def get_state(self) -> dict:
        return {"step": self.t}

    def set_state(self, state: dict) -> None:
        self.t = int(state["step"])
        self.model.latent_kl_weight = min(1.0, max(self.t, 1) / self.num_steps)

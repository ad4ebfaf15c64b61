r"""The data plates of the models: an O(B) subsample drawn only where nothing replays one.

``pyro.plate("data", N, subsample_size=B)`` draws its subsample with ``torch.randperm(N)``,
O(N) work per step, and a plate given an explicit ``subsample=`` has drawn it before Pyro's
handlers see the site. :class:`SubsamplePlate` is ``pyro.plate`` whose subsample site
carries an O(B) sampler (:func:`~pyro_ar.subsets.sample_without_replacement`, a uniform
random B-subset in random order) that runs only when no handler has set the site's value:
the guide draws it, and the model replayed on the guide's trace (``SVI``: ``poutine.replay``)
takes the guide's indices without drawing a second subsample it would throw away. Everything
else -- the site, its name, the frame, the scale :math:`N/B` -- is ``pyro.plate``'s.

:class:`WeightedPlate` adds per-datapoint weights to the sites' scales.
"""

from typing import Optional

import torch

import pyro
from pyro.poutine.runtime import apply_stack
from pyro.poutine import subsample_messenger

from ..subsets import sample_without_replacement

__all__ = ["SubsamplePlate", "WeightedPlate", "take_rows", "check_sample_weight"]


class _Subsample(subsample_messenger._Subsample):
    """Pyro's subsample distribution with the O(B) draw of a uniform random B-subset (the same
    class name: Pyro recognises subsample sites by it, e.g. ``prune_subsample_sites``)."""

    def sample(self, sample_shape=torch.Size()):
        if sample_shape:
            raise NotImplementedError
        return sample_without_replacement(self.size, self.subsample_size, device=self.device)


class SubsamplePlate(pyro.plate):
    """``pyro.plate`` whose subsample (``subsample_size < size``, no ``subsample=``) is drawn in
    O(B), and only when no handler (e.g. ``poutine.replay``) has set the site's value.

    Example:

    >>> import torch, pyro.poutine as poutine
    >>> from pyro_ar.models.plates import SubsamplePlate
    >>> def guide():
    ...     with SubsamplePlate("data", 10**9, subsample_size=4) as idx:   # no O(N) randperm
    ...         return idx
    >>> tr = poutine.trace(guide).get_trace()
    >>> replayed = poutine.replay(guide, trace=tr)()    # the model's plate: the guide's rows
    >>> replayed is tr.nodes["data"]["value"], replayed.shape
    (True, torch.Size([4]))
    """

    @staticmethod
    def _subsample(name, size=None, subsample_size=None, subsample=None, use_cuda=None, device=None):
        if size is None or subsample is not None or subsample_size is None or subsample_size >= size:
            return pyro.plate._subsample(name, size, subsample_size, subsample, use_cuda, device)
        msg = dict(type="sample", name=name, fn=_Subsample(size, subsample_size, use_cuda, device),
                   is_observed=False, args=(), kwargs={}, value=None, infer={}, scale=1.0, mask=None,
                   cond_indep_stack=(), done=False, stop=False, continuation=None)
        apply_stack(msg)
        subsample = msg["value"]
        if len(subsample) != subsample_size:  # (pyro.plate's own check of a replayed subsample)
            raise ValueError(f"subsample_size does not match len(subsample), {subsample_size} vs "
                             f"{len(subsample)}. Did you accidentally use different subsample_size in "
                             "the model and guide?")
        return size, subsample_size, subsample

    @property
    def subsample(self):
        """The subsample indices of this plate, or None when it keeps all ``size`` rows (none drawn)."""
        return None if self.subsample_size >= self.size else self._indices


class WeightedPlate(SubsamplePlate):
    r"""A data plate whose sites are weighted per datapoint: the ELBO becomes
    :math:`\sum_n w_n\,\mathrm{ELBO}_n`, estimated on the subsample as
    :math:`\frac{N}{B}\sum_{n\in\text{batch}} w_n\,\mathrm{ELBO}_n`.

    Model and guide sites inside it get the same weights (both open the plate through
    ``model.create_plates``), so the likelihood, the noise prior and q(eps) are weighted
    alike -- what ``sample_weight`` means in scikit-learn (a datapoint of weight 2 counts as
    two copies).

    Example:

    >>> import torch, pyro, pyro.distributions as dist, pyro.poutine as poutine
    >>> from pyro_ar.models.plates import WeightedPlate
    >>> def model():
    ...     with WeightedPlate("data", 3, weight=torch.tensor([1.0, 2.0, 0.5])):
    ...         pyro.sample("x", dist.Normal(0.0, 1.0), obs=torch.zeros(3))
    >>> poutine.trace(model).get_trace().nodes["x"]["scale"].tolist()
    [1.0, 2.0, 0.5]
    """

    def __init__(self, name, size, subsample=None, weight=None, dim=None, subsample_size=None, device=None):
        super().__init__(name, size, subsample=subsample, subsample_size=subsample_size, dim=dim, device=device)
        self.weight = weight

    def _process_message(self, msg):
        super()._process_message(msg)
        if self.weight is None:
            return
        w = self.weight.index_select(0, self.indices.to(self.weight.device))
        w = w.reshape(w.shape + (1,) * (-1 - self.dim))
        msg["scale"] = msg["scale"] * w


def take_rows(x, index: Optional[torch.Tensor]):
    """Rows ``index`` of ``x`` (a tensor, or any row-indexable stand-in such as the
    estimator's sparse rows); ``x`` itself when ``index`` is None.

    Example:

    >>> import torch
    >>> from pyro_ar.models.plates import take_rows
    >>> take_rows(torch.arange(5), torch.tensor([3, 1])).tolist()
    [3, 1]
    """
    if index is None:
        return x
    if isinstance(x, torch.Tensor):  # (a plate made without create_plates subsamples on the CPU)
        return x.index_select(0, index.to(x.device))
    return x[index]


def check_sample_weight(sample_weight, num_data: int):
    """Validate per-datapoint weights: a finite, non-negative tensor of shape (N,).

    Example:

    >>> import torch
    >>> from pyro_ar.models.plates import check_sample_weight
    >>> check_sample_weight(torch.ones(3), 3)
    >>> check_sample_weight(torch.tensor([1.0, -1.0]), 2)
    Traceback (most recent call last):
    ...
    ValueError: sample_weight must be finite and >= 0, got [-1.0]
    """
    if not isinstance(sample_weight, torch.Tensor) or sample_weight.shape != (num_data,):
        raise ValueError(f"sample_weight must be a tensor of shape ({num_data},), got "
                         f"{getattr(sample_weight, 'shape', sample_weight)!r}")
    bad = ~torch.isfinite(sample_weight) | (sample_weight < 0)
    if bad.any():
        raise ValueError(f"sample_weight must be finite and >= 0, got {sample_weight[bad][:5].tolist()}")

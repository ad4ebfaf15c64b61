r"""Stratified class samplers, built on a plain one: :class:`LabelHeadNegatives` (the
minibatch's labels summed exactly, another sampler's draw for the rest) and
:class:`ScreenedNegatives` (uniform candidates ranked by their current utilities, the top
summed, the others subsampled); see :mod:`pyro_ar.negatives`."""

from typing import Optional

import torch

from pyro.distributions.util import broadcast_shape

from ..numerics import check_int
from ..subsets import sample_without_replacement
from .samplers import NegativeSampler, Negatives, _drop_labels

__all__ = ["LabelHeadNegatives", "ScreenedNegatives"]


class LabelHeadNegatives(NegativeSampler):
    r"""Stratified class subsample: the minibatch's labels exactly, a base sampler for the rest.

    For labels :math:`y_1..y_B` the *head* :math:`H` is the set of their distinct values
    (the ``max_head`` most frequent when there are more) and

    .. math::  \hat S_{y_n} = \sum_{h\in H,\,h\ne y_n} g(h)
               + \sum_j a_j\,1[k_j\notin H]\, g(k_j),

    with :math:`(k_j, a_j)` the ``base`` sampler's draw. The base estimate is unbiased for
    :math:`\sum_{k\ne y} g(k)`, so restricted to :math:`k\notin H` it is unbiased for the
    tail, and :math:`\hat S` for the whole sum. Where a few frequent classes dominate the sum
    (a peaked softmax over Zipf-like labels), a uniform base misses them in most draws and its
    estimate is heavy-tailed; the minibatch's labels contain them with high probability, so the
    head removes most of the variance. H depends on the labels only, never on another
    sampler's draw, so the estimate is independent of the model's own class subsample (as a
    local guide's must be, see :class:`~pyro_ar.infer.ConditionalLocalGuide`).

    :param base: the tail's sampler (a :class:`NegativeSampler`, shared or per datapoint).
    :param max_head: at most this many head classes (the most frequent labels of the
        minibatch; None: all distinct labels).

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import LabelHeadNegatives, SharedNegatives
    >>> neg = LabelHeadNegatives(SharedNegatives(4))(torch.tensor([7, 7, 2]), 1000)
    >>> neg.index[:2].tolist(), neg.weight[:, :2].tolist()   # head {2, 7}: own label weighted 0
    ([7, 2], [[0.0, 1.0], [0.0, 1.0], [1.0, 0.0]])
    """

    strategy = "label_head"

    def __init__(self, base: NegativeSampler, max_head: Optional[int] = None) -> None:
        if not isinstance(base, NegativeSampler):
            raise ValueError(f"base must be a NegativeSampler, got base={base!r}")
        super().__init__(base.num_negatives)
        self.base = base
        self.max_head = check_int("max_head", max_head, low=1, allow_none=True)

    def is_exact(self, num_classes: int) -> bool:
        return self.base.is_exact(num_classes)

    def head(self, labels: torch.Tensor) -> torch.Tensor:
        """The head classes of ``labels``: distinct, the most frequent first."""
        values, counts = torch.unique(labels.reshape(-1), return_counts=True)
        order = counts.argsort(descending=True, stable=True)
        if self.max_head is not None:
            order = order[:self.max_head]
        return values[order]

    def _sample(self, labels, num_classes):
        head = self.head(labels)
        tail = self.base(labels, num_classes)
        dtype = tail.weight.dtype if tail.weight.is_floating_point() else torch.get_default_dtype()
        head_weight = _drop_labels(head, labels, torch.ones(head.shape, dtype=dtype, device=head.device),
                                   num_classes)
        # the tail's draws of head classes dropped (a shared draw: one (s, |H|) comparison)
        in_head = (tail.index.unsqueeze(-1) == head).any(-1) if tail.shared else torch.isin(tail.index, head)
        tail_weight = tail.weight.to(dtype) * (~in_head).to(dtype)
        tail_weight = tail_weight.expand(broadcast_shape(tail_weight.shape, labels.shape + (1,)))
        if tail.shared:
            index = torch.cat([head, tail.index])
        else:
            index = torch.cat([head.expand(labels.shape + head.shape), tail.index], -1)
        return Negatives(index, torch.cat([head_weight, tail_weight], -1), tail.shared)

    def __repr__(self):
        return f"{type(self).__name__}(base={self.base!r}, max_head={self.max_head})"


class ScreenedNegatives(NegativeSampler):
    r"""Per datapoint: a larger uniform candidate set, screened by the current utilities; its
    highest-utility classes summed, the rest subsampled.

    For a datapoint with label :math:`y`: :math:`M` candidates :math:`C` uniform without
    replacement from the :math:`K-1` other classes, their utilities :math:`\psi_c` computed
    without gradient (no noise term: one gather), the ``exact`` = :math:`r` highest kept
    (the *top* :math:`R \subset C`) and :math:`s - r` of the other :math:`M - r` uniformly
    without replacement (:math:`U`):

    .. math::  \hat S_y = \frac{K-1}{M}\Big(\sum_{c\in R} g(c)
               + \frac{M-r}{s-r}\sum_{c\in U} g(c)\Big).

    Given :math:`C`, :math:`R` is fixed and :math:`U` a uniform subsample of :math:`C\setminus R`,
    so the bracket is unbiased for :math:`\sum_{c\in C} g(c)`, and :math:`C` is uniform: the
    estimate is unbiased for :math:`\sum_{k\ne y} g(k)` for *every* function :math:`g` -- so its
    gradient is unbiased too (the selection depends on the parameters only through the detached
    utilities; the weights hold for any :math:`g`, hence for :math:`\nabla g`). Every noise's
    term :math:`\log\Phi(\varepsilon + \psi_y - \psi_k)` grows with :math:`\psi_k`, so the
    top holds the few classes that dominate the class sum (a peaked probit, whose terms fall
    off as :math:`e^{-d^2/2}`, has few), and the subsample only the small terms: the variance of
    a uniform draw of :math:`M` at the cost of :math:`s` terms and :math:`M` utilities (issue 27,
    ``benchmarks/probit_convergence.py``).

    The draw needs the utilities: a :class:`~pyro_ar.distributions.ClassSumLikelihood` passes
    them (``uses_utility``); called without ``utility=`` it raises.

    :param num_negatives: :math:`s`, the classes whose terms are evaluated per datapoint.
    :param int screen: :math:`M = ` ``screen`` :math:`\times s` candidates (at most :math:`K-1`).
    :param exact: :math:`r`, the top candidates kept (default :math:`\lfloor s/2\rfloor`;
        :math:`0 \le r < s`).

    Example:

    >>> import torch
    >>> from pyro_ar.negatives import ScreenedNegatives
    >>> psi = torch.arange(100.0).expand(2, 100)        # class k has utility k
    >>> neg = ScreenedNegatives(4, screen=5)(torch.tensor([3, 50]), 100, utility=psi)
    >>> neg.index.shape, [round(a, 2) for a in neg.weight.tolist()]   # 2 of 20 on top, 2 of 18
    (torch.Size([2, 4]), [4.95, 4.95, 44.55, 44.55])
    >>> bool((neg.index[:, :2] >= neg.index[:, 2:].max(-1, keepdim=True).values).all())
    True
    """

    strategy = "screened"
    #: the draw needs the current utilities (``ClassSumLikelihood.draw_negatives`` passes them)
    uses_utility = True

    def __init__(self, num_negatives: Optional[int] = None, screen: int = 4, exact: Optional[int] = None) -> None:
        super().__init__(num_negatives)
        self.screen = check_int("screen", screen, low=1)
        s = self.num_negatives
        if exact is None:
            exact = 0 if s is None else s // 2
        self.exact = check_int("exact", exact, low=0)
        if s is not None and self.exact >= s:
            raise ValueError(f"exact must be below num_negatives={s} (the rest is subsampled), got exact={exact}")

    def __call__(self, labels: torch.Tensor, num_classes: int, utility=None) -> Negatives:
        from ..utility import _validating, as_utility, check_index

        num_classes = check_int("num_classes", num_classes, low=1)
        if _validating():  # (one aminmax: labels out of range would draw from the wrong classes)
            check_index(labels, num_classes, "labels")
        if self.is_exact(num_classes):
            return super().__call__(labels, num_classes)
        if utility is None:
            raise ValueError("ScreenedNegatives ranks its candidates by the utilities: call it with "
                             "utility= (a ClassSumLikelihood does)")
        utility = as_utility(utility)
        _check_screen_utility(utility, labels, num_classes)
        s, r = self.num_negatives, self.exact
        m = min(self.screen * s, num_classes - 1)
        cand = sample_without_replacement(num_classes - 1, m, labels.shape, device=labels.device)
        cand = cand + (cand >= labels.unsqueeze(-1)).long()  # skip the label itself
        with torch.no_grad():
            psi = utility.gather(cand)
        if _validating() and psi.is_floating_point() and not bool(torch.isfinite(psi).all()):
            bad = ~torch.isfinite(psi)
            raise ValueError(f"utility must be finite, got non-finite values {psi[bad][:5].tolist()} at the "
                             f"screened candidates (classes {cand[bad][:5].tolist()})")
        order = psi.argsort(-1, descending=True)
        pick = sample_without_replacement(m - r, s - r, labels.shape, device=labels.device)
        chosen = torch.cat([order[..., :r], order[..., r:].gather(-1, pick)], -1)
        index = cand.gather(-1, chosen)
        dtype = psi.dtype if psi.is_floating_point() else torch.get_default_dtype()
        weight = torch.full((s,), (num_classes - 1) / m, dtype=dtype, device=labels.device)
        weight[r:] *= (m - r) / (s - r)
        return Negatives(index, weight, False)

    def __repr__(self):
        return f"{type(self).__name__}(num_negatives={self.num_negatives}, screen={self.screen}, exact={self.exact})"


def _check_screen_utility(utility, labels: torch.Tensor, num_classes: int) -> None:
    """The utilities ranking :class:`ScreenedNegatives`' candidates: over ``num_classes``
    classes, one row per label (a batch shape that ``labels.shape`` broadcasts to)."""
    if utility.num_classes != num_classes:
        raise ValueError(f"utility must have num_classes={num_classes} classes (its last dimension), got "
                         f"{utility.num_classes}")
    try:
        ok = torch.broadcast_shapes(utility.batch_shape, labels.shape) == labels.shape
    except RuntimeError:
        ok = False
    if not ok:
        raise ValueError(f"utility must have a batch shape that broadcasts to the labels' {tuple(labels.shape)}, "
                         f"got utility of batch shape {tuple(utility.batch_shape)}")

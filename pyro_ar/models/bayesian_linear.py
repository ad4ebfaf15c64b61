r"""Bayesian weights at large K: class-subsampled mean-field posteriors over the rows of W.

Bayesian weights are one concept, ``weights="bayes"``; this module is its class-subsampled
weight strategy (:class:`ClassSubsampledWeights`). :class:`BayesianLinearClassifier` is the
same model as ``LinearClassifier(D, K, weights="bayes")`` (same prior, likelihood and
sites: at the same W, b and noise the log joints are equal, see
``tests/models/test_bayes_weights.py``), whose steps sample only the rows of a class
subsample instead of all K rows, so a step costs :math:`O(|C| D)` whatever K;
:func:`~pyro_ar.infer.default_guide` gives it :class:`~pyro_ar.infer.ClassSubsampledNormal`.

The model (:class:`BayesianLinearClassifier`) puts a Gaussian prior on every row of the
weights and on the biases, :math:`w_k \sim N(0, s^2 I)`, :math:`b_k \sim N(0, s^2)`, and
the guide (:class:`ClassSubsampledNormal`) is mean-field Gaussian over those rows,
:math:`q(w_k) = N(\mu_k, \mathrm{diag}\,\sigma_k^2)`. The ELBO

.. math::

    \sum_n \mathbb{E}_q\Big[\log p(y_n, \varepsilon_n \mid W) - \log q(\varepsilon_n\mid W)\Big]
        - \sum_{k=1}^K \mathrm{KL}\big(q(w_k, b_k)\,\|\,p(w_k, b_k)\big)

is estimated at every step from three subsamples, none of them of size O(K):

* a minibatch of datapoints (the ``"data"`` plate, scale N/B);
* a shared uniform class subsample R (without replacement) of size
  ``max(num_negatives, num_kl_classes)``, whose first ``num_negatives`` classes are the
  negatives S of the A&R likelihood estimate (weight K/s) and whose first
  ``num_kl_classes`` classes are the set U on which the KL term is estimated (weight :math:`K/|U|`);
* an independent uniform set T (``num_eta_classes``) used only by the local guide.

Rows of W are sampled (reparameterised) only for the classes the step needs,
:math:`C = R \cup T \cup \{y_n: n \in \text{batch}\}`. In Pyro terms C is the
explicit ``subsample=`` of a ``pyro.plate("classes", K)``: the plate contributes the
scale :math:`K/|C|`, and a tensor ``poutine.scale`` (:math:`|C|/|U|` on U) with a ``poutine.mask``
(False off U: with validation on, scales must be > 0) makes the per-row weight of the KL
term :math:`(K/|U|)\,1[k\in U]`. The guide draws C (in ``model.create_plates``, :meth:`ClassSubsampledWeights.create_plates`,
which the guide calls through ``create_plates=``) and Pyro's replay hands the very same C
to the model, as it does for any subsample site. Rows needed only by the likelihood
(labels, T) are masked out of the KL term, so it stays an unbiased estimate.

**Likelihood.** With ``stratify=True`` (default) the sum over classes
:math:`\sum_{k\ne y}\log\Phi(\varepsilon + \psi_y - \psi_k)` is split into the classes of
the minibatch's labels L (summed exactly: their rows are sampled anyway, and L does not
depend on S) and the rest, estimated from S with weight :math:`(K/s)\,1[k\notin L]`; with
``stratify=False`` it is the paper's shared-negatives estimator, weight
:math:`(K/s)\,1[k \ne y]`. Both are unbiased for any :math:`\varepsilon` and W.

**Local guide conditioned on W.** For any :math:`q(\varepsilon_n)` that does not depend on
W, the best one is :math:`\mathrm{Gumbel}(\log\mathbb{E}_q[1 + S_n(W)], 1)` (the optimum of
:math:`\mathbb{E}_{q(W)}\mathbb{E}_{q(\varepsilon)}\log p(y,\varepsilon\mid W) + H[q(\varepsilon)]`
is :math:`\propto\exp\mathbb{E}_{q(W)}\log p(y,\varepsilon\mid W)`): the "textbook" bound
:math:`-\log\mathbb{E}_q[1+S]`, whose Jensen gap penalises the posterior variance of the
utilities and shrinks q(W). The closed-form local guide here therefore conditions on the
sampled rows: :math:`q(\varepsilon_n\mid W) = \mathrm{Gumbel}(\log\eta_n(W), 1)` with

.. math::

    \eta_n(W) = 1 + \sum_{k\in L\setminus y_n} e^{\psi_{nk} - \psi_{ny}}
        + \frac{K}{|T|}\sum_{k\in T\setminus L} e^{\psi_{nk} - \psi_{ny}},

i.e. the optimal :math:`\eta^* = 1 + S_n(W)` with the sum restricted to rows sampled
anyway (no O(N) state, no O(K) work). When L and T cover every class that matters,
:math:`\eta_n(W) = 1 + S_n(W)` and the bound is tight for every W: the A&R ELBO is then
the exact-likelihood ELBO in expectation. T must be independent of S (it is), or the
likelihood estimate would be biased. For other noises the conditional guide is the
Laplace approximation of the optimal :math:`q(\varepsilon_n\mid W)\propto\phi(\varepsilon)
\prod_{k}\Phi(\varepsilon+\psi_{ny}-\psi_{nk})^{a_k}` (damped Newton, implicit-function
gradients). Any :math:`q(\varepsilon\mid W)` gives a valid bound; this one is (nearly) tight.

The guide also composes with the W-independent local guides of :mod:`pyro_ar.infer`
(``local=None`` inside an ``AutoGuideList(model, create_plates=model.create_plates)``),
which reproduces the textbook recipe (see ``benchmarks/bayes_digits.py`` for both).

**No O(K) work per step.** The guide's parameters are stored unconstrained
(``weight_loc``, ``weight_scale_unconstrained`` of shape (K, D); ``bias_loc``,
``bias_scale_unconstrained`` of shape (K,)); only the rows of C are gathered (with sparse
gradients when ``sparse=True``) and transformed (softplus). With
:func:`pyro_ar.optim.lazy_adam` the optimizer touches only those rows. Class subsamples
are drawn by Floyd's algorithm (O(s^2)), not by a permutation of K.
"""

import contextlib
from typing import NamedTuple, Optional

import torch

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine

from ..distributions import AugmentedCategorical, UtilityCategorical
from ..distributions.augmented import INFER_KEY, NoiseSite
from ..negatives import Negatives
from ..subsets import sample_without_replacement
from ..likelihoods import AR, Exact
from ..utility import LinearUtility
from .base import CategoricalModel, WeightStrategy, check_positive_int

__all__ = ["BayesianLinearClassifier", "ClassSubsampledWeights", "ClassPlate", "StepStructure", "class_positions"]


class StepStructure(NamedTuple):
    """Local positions and weights of one training step, computed from the class subsample C.

    ``label_pos`` (B,): positions of the labels in C; ``neg_index`` (j,) and ``neg_weight``
    (B, j): the likelihood estimate's classes (positions in C) and weights; ``eta_index`` /
    ``eta_weight``: the W-conditioned local guide's conditioning set (None when not asked).

    Example:

    >>> import torch
    >>> from pyro_ar.models import BayesianLinearClassifier
    >>> from pyro_ar.likelihoods import AR
    >>> model = BayesianLinearClassifier(2, 50, likelihood=AR(negatives=4))
    >>> C = torch.tensor([7, 3, 9, 1, 20, 31])       # R = [7, 3, 9, 1], then the labels
    >>> st = model.step_structure(C, torch.tensor([20, 31]))
    >>> st.label_pos.tolist(), st.neg_weight.shape
    ([4, 5], torch.Size([2, 6]))
    """

    label_pos: torch.Tensor
    neg_index: torch.Tensor
    neg_weight: torch.Tensor
    eta_index: Optional[torch.Tensor] = None
    eta_weight: Optional[torch.Tensor] = None


class ClassPlate(pyro.plate):
    """The ``"classes"`` plate of :class:`BayesianLinearClassifier`: a ``pyro.plate`` that
    also carries the model that drew its subsample and the local guide's class set T.

    Example:

    >>> import torch
    >>> from pyro_ar.models import BayesianLinearClassifier
    >>> from pyro_ar.likelihoods import AR
    >>> model = BayesianLinearClassifier(2, 50, likelihood=AR(negatives=4), subsample_size=8)
    >>> data, classes = model.create_plates(torch.zeros(100, 2), torch.zeros(100, dtype=torch.long))
    >>> classes.model is model, classes.eta_classes.shape
    (True, torch.Size([4]))
    """

    def __init__(self, model, size, subsample=None, eta_classes=None):
        super().__init__("classes", size, subsample=subsample, dim=-1)
        self.model, self.eta_classes = model, eta_classes


def _check_count(name, value, K, allow_none=True, allow_zero=False):
    if value is None:
        if allow_none:
            return None
        raise ValueError(f"{name} must be an integer, got None")
    lo = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= K:
        raise ValueError(f"{name} must be an integer in [{lo}, num_classes={K}], got {name}={value!r}")
    return value


def class_positions(classes: torch.Tensor, query: torch.Tensor, what="classes") -> torch.Tensor:
    """Positions in ``classes`` (1-D, distinct) of the class ids in ``query`` (any shape).

    O((m + q) log m). :raises ValueError: if some query class is not in ``classes`` (which
    means the class plate's subsample does not match the model: see
    :meth:`BayesianLinearClassifier.create_plates`).

    Example:

    >>> import torch
    >>> from pyro_ar.models.bayesian_linear import class_positions
    >>> class_positions(torch.tensor([40, 7, 12]), torch.tensor([[12, 40]])).tolist()
    [[2, 0]]
    """
    sorted_c, order = classes.sort()
    flat = query.reshape(-1)
    p = torch.searchsorted(sorted_c, flat).clamp(max=classes.numel() - 1)
    found = sorted_c[p] == flat
    if not bool(found.all()):
        missing = flat[~found][:5].tolist()
        raise ValueError(
            f"guide/model plate mismatch: {what} {missing} are not in the 'classes' plate's "
            "subsample. Build the guide with create_plates=model.create_plates (e.g. "
            "AutoGuideList(model, create_plates=model.create_plates)) so that the guide and "
            "the model share the class subsample."
        )
    return order[p].reshape(query.shape)


def _outside_weight(pos, inside, value, dtype):
    """``value`` where ``pos`` is not in ``inside``, 0 where it is."""
    return (~torch.isin(pos, inside)).to(dtype) * value


def _pad_classes(C, m, K):
    """Pad the distinct classes C to exactly m distinct classes with unused extra classes.

    A fixed size keeps the sample sites' shapes the same at every step (``AutoGuideList``
    checks that its parts see the same shapes). Rejection sampling when K >> m (no O(K)
    work); a permutation of the complement otherwise (K < 4 m, i.e. K small).
    """
    need = m - C.numel()
    if need <= 0:
        return C
    if K >= 4 * m:
        fill = C.new_zeros(0)
        while fill.numel() < need:
            cand = torch.unique(torch.randint(0, K, (2 * need + 8,), device=C.device))
            cand = cand[~torch.isin(cand, torch.cat([C, fill]))]
            fill = torch.cat([fill, cand[torch.randperm(cand.numel(), device=C.device)]])
        return torch.cat([C, fill[:need]])
    free = torch.ones(K, dtype=torch.bool, device=C.device)
    free[C] = False
    rest = free.nonzero().squeeze(-1)
    return torch.cat([C, rest[torch.randperm(rest.numel(), device=C.device)[:need]]])


class ClassSubsampledWeights(WeightStrategy):
    r"""The weight strategy of :class:`BayesianLinearClassifier`: prior sample sites for the
    rows of W and b of a class subsample C only (the ``"classes"`` plate, beside the
    ``"data"`` plate), weighted so that the KL term and the likelihood's class sum stay
    unbiased (module docstring).

    Example:

    >>> from pyro_ar.models import BayesianLinearClassifier
    >>> from pyro_ar.likelihoods import AR
    >>> BayesianLinearClassifier(2, 50, AR(negatives=4)).weight_strategy
    ClassSubsampledWeights(prior_scale=1.0)
    """

    name = "bayes"

    @staticmethod
    def _no_sample_weight(sample_weight):
        if sample_weight is not None:
            raise ValueError("sample_weight is not supported with class-subsampled Bayesian weights "
                             "(BayesianLinearClassifier): got a sample_weight tensor")

    def create_plates(self, model, x: torch.Tensor, y: Optional[torch.Tensor] = None, sample_weight=None):
        """The ``"data"`` and ``"classes"`` plates of one step (``model.create_plates``).

        Draws the minibatch (via the data plate), then the class subsample
        ``C = [R, (T u labels) minus R, padding]`` as the class plate's explicit ``subsample=``
        (padded with unused classes to the fixed size ``min(K, |R| + |T| + B)``, so that every
        step's sites have the same shapes):
        R uniform without replacement (its first ``num_negatives`` entries are the
        negatives, its first ``num_kl_classes`` the KL subsample), T an independent uniform
        set for the local guide. When the guide calls this, both subsamples are recorded in
        its trace and replayed into the model. With ``y=None`` (prediction), or without
        class subsampling, both plates are full.
        """
        K = model.num_classes
        train = y is not None
        self._no_sample_weight(sample_weight)
        data = model.data_plate(x, y)
        if not (train and model.subsampled):
            classes = ClassPlate(model, K)
        else:
            device = x.device
            idx = data.indices
            labels = y[idx]
            s, u, t = model.num_negatives, model.num_kl_classes, model.num_eta_classes
            r = max(s, u)
            R = sample_without_replacement(K, r, device=device)
            R = R[torch.randperm(r, device=device)]  # uniform order: any prefix is a uniform subset
            T = sample_without_replacement(K, t, device=device) if t else R.new_zeros(0)
            extra = torch.unique(torch.cat([T, labels]))
            C = torch.cat([R, extra[~torch.isin(extra, R)]])
            C = _pad_classes(C, min(K, r + t + labels.shape[0]), K)
            classes = ClassPlate(model, K, subsample=C, eta_classes=T)
        return [data, classes]

    def step(self, model, x: torch.Tensor, y: Optional[torch.Tensor] = None, sample_weight=None):
        """The model step: the rows of C from the prior (KL-weighted), then the likelihood of
        the minibatch over C (module docstring); labels drawn over all K classes without ``y``."""
        self._no_sample_weight(sample_weight)
        model.check_inputs(x, y)
        data, classes = model.create_plates(x, y)
        with classes as C:
            C = classes.indices if C is None else C
            model._check_subsample(C, x, data.indices)
            W, b = model.sample_rows(C, x, y is not None)
        with data as idx:
            idx = data.indices if idx is None else idx
            xb = model.minibatch_features(x, idx)
            psi = LinearUtility(xb, W, b).full()  # (B, |C|): the classes of C only
            if y is None:
                return pyro.sample(model.site, UtilityCategorical(model._full_order(psi, C), model.noise))
            labels = y[idx]
            if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= model.num_classes):
                raise ValueError(f"y must hold labels in [0, {model.num_classes}), got values in "
                                 f"[{int(labels.min())}, {int(labels.max())}]")
            if not model.likelihood.has_local_latent:
                return pyro.sample(model.site, UtilityCategorical(model._full_order(psi, C), model.noise),
                                   obs=labels)
            st = model.step_structure(C, labels)
            zero = torch.zeros((), dtype=psi.dtype, device=psi.device)
            prior = model.noise.distribution(zero, torch.ones_like(zero)).expand([xb.shape[0]])
            eps = pyro.sample(model.eps_site, prior,
                              infer={INFER_KEY: NoiseSite(model.noise, model.site, model.num_classes)})
            neg = Negatives(st.neg_index, st.neg_weight.to(psi.dtype), True)
            d = AugmentedCategorical(psi, eps, model.noise, negatives=neg, eps_site=model.eps_site)
            return pyro.sample(model.site, d, obs=st.label_pos)


class BayesianLinearClassifier(CategoricalModel):
    r"""Linear classifier with Gaussian priors on the rows of W and on b, for large K.

    :math:`\psi_{nk} = x_n\cdot w_k + b_k`, :math:`w_k\sim N(0, s^2 I_D)`, :math:`b_k\sim N(0, s^2)`,
    :math:`y_n = \arg\max_k(\psi_{nk}+\varepsilon_{nk})`. The weight sites ``"weight"``
    (batch ``(|C|,)``, event (D,)) and ``"bias"`` (batch ``(|C|,)``) live in the plate
    ``"classes"`` of size K whose subsample C is drawn by :meth:`create_plates`;
    the likelihood sites (``"<site>_eps"``, ``"<site>"``) live in the plate ``"data"``.

    Example (softmax, 3 negatives, W-conditioned closed-form local guide)::

        model = BayesianLinearClassifier(D, K, AR(negatives=3), subsample_size=256)
        guide = ClassSubsampledNormal(model)
        svi = SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO())
        for step in range(5000):
            svi.step(x, y)

    :param int num_features: D.
    :param int num_classes: K.
    :param likelihood: ``"ar"`` (augmented, class-subsampled; Gumbel noise, every class) or
        ``"exact"`` (:class:`~pyro_ar.UtilityCategorical` over all K classes, O(K) per step: the
        reference the A&R posterior is compared with), or the objects
        :class:`~pyro_ar.likelihoods.AR` (its noise and its number of negatives s, the size of
        the shared uniform negative set -- the negatives are always shared and uniform here;
        None: all classes, no subsampling) and :class:`~pyro_ar.likelihoods.Exact` (its noise).
    :param num_kl_classes: :math:`|U|`, classes on which the KL term is estimated (default s).
    :param num_eta_classes: :math:`|T|`, extra uniform classes for the W-conditioned local guide
        (default s; 0: none).
    :param bool stratify: sum the classes of the minibatch's labels exactly (see module doc).
    :param float prior_scale: s of the prior, > 0.
    :param subsample_size: minibatch size (None: full batch).
    :param bool bias: include the biases b.
    :param str site: name of the label site.

    Example:

    >>> import pyro, pyro_ar as ar
    >>> from pyro_ar.models import BayesianLinearClassifier
    >>> data = ar.datasets.make_linear_teacher(1000, 6, 300, seed=0)
    >>> model = BayesianLinearClassifier(6, 300, ar.likelihoods.AR(negatives=8), subsample_size=64)
    >>> guide = ar.infer.ClassSubsampledNormal(model)
    >>> svi = pyro.infer.SVI(model, guide, ar.optim.lazy_adam({"lr": 0.05}), ar.infer.ClosedFormELBO())
    >>> losses = [svi.step(data.x, data.y) for _ in range(5)]
    >>> ar.infer.predictive_log_likelihood(guide, data.x[:50], data.y[:50], num_samples=4)["log_lik"] < 0
    True
    """

    #: the string shortcut's defaults (:meth:`~pyro_ar.models.base.CategoricalModel.likelihood_shortcuts`;
    #: the negatives are shared and uniform, the model's own step draws them)
    likelihood_defaults = {"noise": "gumbel", "num_negatives": None, "strategy": "shared", "proposal": None}

    def __init__(self, num_features: int, num_classes: int, likelihood="ar",
                 num_kl_classes: Optional[int] = None, num_eta_classes: Optional[int] = None,
                 stratify: bool = True, prior_scale: float = 1.0, subsample_size: Optional[int] = None,
                 bias: bool = True, site: str = "y"):
        lik = self.make_likelihood(likelihood, num_classes)
        if not isinstance(lik, (AR, Exact)):
            raise ValueError(f"likelihood must be 'ar', 'exact', an AR or an Exact likelihood, "
                             f"got likelihood={likelihood!r}")
        # the model's own step draws the shared negatives: the likelihood keeps only its noise
        super().__init__(num_classes, AR(lik.noise) if isinstance(lik, AR) else Exact(lik.noise),
                         weights=ClassSubsampledWeights(prior_scale), subsample_size=subsample_size, site=site)
        K = num_classes
        self.num_features = check_positive_int("num_features", num_features)
        self._num_negatives = _check_count("num_negatives", lik.num_negatives, K)
        if self.num_negatives is None:
            for name, v in (("num_kl_classes", num_kl_classes), ("num_eta_classes", num_eta_classes)):
                if v is not None:
                    raise ValueError(f"{name}={v!r} needs negatives (class subsampling, likelihood=AR(negatives=s)); "
                                     "with num_negatives=None every class is used")
            self.num_kl_classes = self.num_eta_classes = None
        else:
            self.num_kl_classes = _check_count(
                "num_kl_classes", self.num_negatives if num_kl_classes is None else num_kl_classes, K)
            self.num_eta_classes = _check_count(
                "num_eta_classes", self.num_negatives if num_eta_classes is None else num_eta_classes,
                K, allow_zero=True)
        self.stratify = bool(stratify)
        self.bias = bool(bias)
        self.eps_site = f"{site}_eps"

    num_negatives = property(lambda self: self._num_negatives)  # s of the shared negative set R

    # ------------------------------------------------------------------ plates
    @property
    def subsampled(self) -> bool:
        """Whether training steps subsample classes (A&R likelihood with negatives)."""
        return self.likelihood.has_local_latent and self.num_negatives is not None

    def check_inputs(self, x, y):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.num_features \
                or not x.is_floating_point():
            raise ValueError(f"x must be a real floating-point tensor of shape (N, {self.num_features}), "
                             f"got {(tuple(x.shape), x.dtype) if isinstance(x, torch.Tensor) else x!r}")
        if y is not None:
            if not isinstance(y, torch.Tensor) or y.shape != x.shape[:1]:
                raise ValueError(f"y must be a tensor of shape ({x.shape[0]},), got "
                                 f"{tuple(y.shape) if isinstance(y, torch.Tensor) else y!r}")

    # ------------------------------------------------------------------ structure of a step
    def _kl_weights(self, m, like):
        """(scale, mask) of the rows of C for the KL term: weight ``(K/|U|) 1[position < |U|]``."""
        u = self.num_kl_classes
        mask = torch.arange(m, device=like.device) < u
        scale = torch.where(mask, torch.full((), m / u, dtype=like.dtype, device=like.device),
                            torch.ones((), dtype=like.dtype, device=like.device))
        return scale, mask

    def _check_subsample(self, C, x, idx):
        K = self.num_classes
        if C.numel() and (int(C.min()) < 0 or int(C.max()) >= K):
            raise ValueError(f"guide/model plate mismatch: the 'classes' plate's subsample holds "
                             f"classes up to {int(C.max())} but the model has num_classes={K}")
        if idx.numel() and int(idx.max()) >= x.shape[0]:
            raise ValueError(f"guide/model plate mismatch: the 'data' plate's subsample holds "
                             f"index {int(idx.max())} but x has {x.shape[0]} rows")
        if self.subsampled and C.numel() < max(self.num_negatives, self.num_kl_classes):
            raise ValueError(
                f"guide/model plate mismatch: the 'classes' plate's subsample has {C.numel()} "
                f"classes, fewer than max(num_negatives, num_kl_classes)="
                f"{max(self.num_negatives, self.num_kl_classes)}; build the guide with "
                "create_plates=model.create_plates")

    def step_structure(self, C: torch.Tensor, labels: torch.Tensor, eta_classes=None) -> StepStructure:
        r"""The :class:`StepStructure` of one training step, from the class subsample C.

        Stratified (``stratify=True``): the classes L of the minibatch's labels are summed
        exactly (weight 1, 0 for the label itself) and the negatives S carry weight
        :math:`(K/s)1[k\notin L]`; otherwise weight :math:`(K/s)1[k\ne y]` on S. The eta set
        is L (exact) plus T with weight :math:`(K/|T|)1[k\notin L]`.
        """
        K, dtype = self.num_classes, torch.get_default_dtype()
        label_pos = class_positions(C, labels, "labels")
        if not self.subsampled:  # all classes, C = arange(K) in some order
            index = torch.arange(C.numel(), device=C.device)
            weight = (index != label_pos.unsqueeze(-1)).to(dtype)
            return StepStructure(label_pos, index, weight, index, weight)
        B, s = labels.shape[0], self.num_negatives
        S_pos = torch.arange(s, device=C.device)
        in_batch = torch.unique(label_pos)  # positions of L, the minibatch's label classes
        w_L = (in_batch != label_pos.unsqueeze(-1)).to(dtype)  # (B, l)
        if self.stratify:
            w_S = _outside_weight(S_pos, in_batch, K / s, dtype)
            neg_index, neg_weight = torch.cat([in_batch, S_pos]), torch.cat([w_L, w_S.expand(B, s)], -1)
        else:
            neg_index, neg_weight = S_pos, (S_pos != label_pos.unsqueeze(-1)).to(dtype) * (K / s)
        eta_index = eta_weight = None
        if eta_classes is not None:
            eta_index, eta_weight = in_batch, w_L
            if eta_classes.numel():
                T_pos, t = class_positions(C, eta_classes, "eta classes"), eta_classes.numel()
                w_T = _outside_weight(T_pos, in_batch, K / t, dtype)
                eta_index = torch.cat([in_batch, T_pos])
                eta_weight = torch.cat([w_L, w_T.expand(B, t)], -1)
        return StepStructure(label_pos, neg_index, neg_weight, eta_index, eta_weight)

    # ------------------------------------------------------------------ the rows of a draw
    def parameter_shapes(self):
        """The per-class rows a posterior draw holds, ``weight`` (K, D) and ``bias`` (K,): sampled
        on class subsamples during training (:class:`ClassSubsampledWeights`), given whole to
        :meth:`utility` ``(x, params)`` to evaluate a draw (e.g. from ``Predictive``)."""
        shapes = {"weight": (self.num_classes, self.num_features)}
        if self.bias:
            shapes["bias"] = (self.num_classes,)
        return shapes

    def minibatch_utility(self, x: torch.Tensor, params):
        r"""The linear utilities :math:`\psi = h(x) W^\top + b` of the rows ``x`` under given
        rows ``params`` (a posterior draw), :math:`h` the features of :meth:`minibatch_features`."""
        h = self.minibatch_features(x, torch.arange(len(x), device=x.device))
        return LinearUtility(h, params["weight"], params.get("bias"))

    # ------------------------------------------------------------------ the model
    def minibatch_features(self, x: torch.Tensor, idx: torch.Tensor, for_guide: bool = False) -> torch.Tensor:
        """The inputs of the linear layer for the minibatch rows ``idx`` (asked by the model,
        and by :class:`~pyro_ar.infer.ClassSubsampledNormal`'s local guide with
        ``for_guide=True``): ``x[idx]``. A subclass maps them, e.g. through a network body
        (:class:`~pyro_ar.models.BayesianNeuralClassifier`)."""
        return x[idx]

    def _prior(self, like):
        zero = torch.zeros((), dtype=like.dtype, device=like.device)
        return dist.Normal(zero, torch.full_like(zero, self.prior_scale))

    def sample_rows(self, C, like, train):
        """Sample the rows of C from the prior (model side), KL-weighted when subsampled."""
        m, D = C.numel(), self.num_features
        prior = self._prior(like)
        if train and self.subsampled:
            scale, mask = self._kl_weights(m, like)
            ctx_scale, ctx_mask = poutine.scale(scale=scale), poutine.mask(mask=mask)
        else:
            ctx_scale = ctx_mask = contextlib.nullcontext()
        with ctx_scale, ctx_mask:
            W = pyro.sample("weight", prior.expand([m, D]).to_event(1))
            b = pyro.sample("bias", prior.expand([m])) if self.bias else None
        return W, b

    def _full_order(self, psi, C):
        """Utilities of all K classes in class order (C is a permutation of range(K))."""
        if C.numel() != self.num_classes:
            raise ValueError(f"guide/model plate mismatch: prediction and the exact likelihood need "
                             f"the full 'classes' plate ({self.num_classes}), got {C.numel()} classes")
        if bool((C == torch.arange(C.numel(), device=C.device)).all()):
            return psi
        return psi.index_select(-1, C.argsort())

    def _repr_fields(self):
        return {"D": self.num_features, "K": self.num_classes, "noise": repr(self.noise.name),
                "likelihood": repr(type(self.likelihood).__name__), "num_negatives": self.num_negatives,
                "num_kl_classes": self.num_kl_classes, "num_eta_classes": self.num_eta_classes,
                "stratify": self.stratify, "prior_scale": self.prior_scale}

    def __repr__(self):
        fields = ", ".join(f"{k}={v}" for k, v in self._repr_fields().items())
        return f"{type(self).__name__}({fields})"



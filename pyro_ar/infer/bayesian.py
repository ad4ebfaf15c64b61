r"""Bayesian weights at large K: class-subsampled mean-field posteriors over the rows of W.

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
term :math:`(K/|U|)\,1[k\in U]`. The guide draws C (in :meth:`BayesianLinearClassifier.create_plates`,
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
import math
from typing import Optional

import torch
import torch.nn.functional as F

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
from pyro.infer.autoguide import AutoGuide
from pyro.nn import PyroParam

from ..distributions import AugmentedCategorical, UtilityCategorical
from ..negatives import Negatives, sample_without_replacement
from ..noise import GumbelNoise, get_noise

__all__ = [
    "BayesianLinearClassifier",
    "ClassSubsampledNormal",
    "class_positions",
    "predictive_log_likelihood",
    "predictive_probs",
    "predictive_top_k",
    "posterior_summary",
    "fit",
]

_SOFTPLUS_INV = lambda s: math.log(math.expm1(s)) if s < 30 else s  # noqa: E731


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
    >>> from pyro_ar.infer.bayesian import class_positions
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


class BayesianLinearClassifier:
    r"""Linear classifier with Gaussian priors on the rows of W and on b, for large K.

    :math:`\psi_{nk} = x_n\cdot w_k + b_k`, :math:`w_k\sim N(0, s^2 I_D)`, :math:`b_k\sim N(0, s^2)`,
    :math:`y_n = \arg\max_k(\psi_{nk}+\varepsilon_{nk})`. The weight sites ``"weight"``
    (batch ``(|C|,)``, event (D,)) and ``"bias"`` (batch ``(|C|,)``) live in the plate
    ``"classes"`` of size K whose subsample C is drawn by :meth:`create_plates`;
    the likelihood sites (``"<site>_eps"``, ``"<site>"``) live in the plate ``"data"``.

    Example (softmax, 3 negatives, W-conditioned closed-form local guide)::

        model = BayesianLinearClassifier(D, K, num_negatives=3, subsample_size=256)
        guide = ClassSubsampledNormal(model)
        svi = SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO())
        for step in range(5000):
            svi.step(x, y)

    :param int num_features: D.
    :param int num_classes: K.
    :param noise: ``"gumbel"`` (softmax), ``"normal"``, ``"logistic"`` or a :class:`~pyro_ar.Noise`.
    :param str likelihood: ``"ar"`` (augmented, class-subsampled) or ``"exact"``
        (:class:`~pyro_ar.UtilityCategorical` over all K classes, O(K) per step: the
        reference the A&R posterior is compared with).
    :param num_negatives: s, size of the shared uniform negative set (None: all classes,
        no subsampling).
    :param num_kl_classes: :math:`|U|`, classes on which the KL term is estimated (default s).
    :param num_eta_classes: :math:`|T|`, extra uniform classes for the W-conditioned local guide
        (default s; 0: none).
    :param bool stratify: sum the classes of the minibatch's labels exactly (see module doc).
    :param float prior_scale: s of the prior, > 0.
    :param subsample_size: minibatch size (None: full batch).
    :param bool bias: include the biases b.
    :param str site: name of the label site.

    Example:

    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import BayesianLinearClassifier, ClassSubsampledNormal, ClosedFormELBO
    >>> from pyro_ar.infer import predictive_log_likelihood
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(1000, 6, 300, seed=0)
    >>> model = BayesianLinearClassifier(6, 300, num_negatives=8, subsample_size=64)
    >>> guide = ClassSubsampledNormal(model)
    >>> svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    >>> losses = [svi.step(data.x, data.y) for _ in range(5)]
    >>> predictive_log_likelihood(guide, data.x[:50], data.y[:50], num_samples=4)["log_lik"] < 0
    True
    """

    def __init__(self, num_features: int, num_classes: int, noise="gumbel", likelihood="ar",
                 num_negatives: Optional[int] = None, num_kl_classes: Optional[int] = None,
                 num_eta_classes: Optional[int] = None, stratify: bool = True,
                 prior_scale: float = 1.0, subsample_size: Optional[int] = None,
                 bias: bool = True, site: str = "y"):
        if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 2:
            raise ValueError(f"num_classes must be an integer >= 2, got num_classes={num_classes!r}")
        if isinstance(num_features, bool) or not isinstance(num_features, int) or num_features < 1:
            raise ValueError(f"num_features must be a positive integer, got num_features={num_features!r}")
        if not (isinstance(prior_scale, (int, float)) and math.isfinite(prior_scale) and prior_scale > 0):
            raise ValueError(f"prior_scale must be a finite number > 0, got prior_scale={prior_scale!r}")
        if likelihood not in ("ar", "exact"):
            raise ValueError(f"likelihood must be 'ar' or 'exact', got likelihood={likelihood!r}")
        if subsample_size is not None and (isinstance(subsample_size, bool)
                                           or not isinstance(subsample_size, int) or subsample_size < 1):
            raise ValueError(f"subsample_size must be a positive integer or None, got subsample_size={subsample_size!r}")
        K = num_classes
        self.num_features, self.num_classes = num_features, K
        self.noise = get_noise(noise)
        self.likelihood = likelihood
        self.num_negatives = _check_count("num_negatives", num_negatives, K)
        if self.num_negatives is None:
            for name, v in (("num_kl_classes", num_kl_classes), ("num_eta_classes", num_eta_classes)):
                if v is not None:
                    raise ValueError(f"{name}={v!r} needs num_negatives (class subsampling); "
                                     "with num_negatives=None every class is used")
            self.num_kl_classes = self.num_eta_classes = None
        else:
            self.num_kl_classes = _check_count(
                "num_kl_classes", self.num_negatives if num_kl_classes is None else num_kl_classes, K)
            self.num_eta_classes = _check_count(
                "num_eta_classes", self.num_negatives if num_eta_classes is None else num_eta_classes,
                K, allow_zero=True)
        self.stratify = bool(stratify)
        self.prior_scale = float(prior_scale)
        self.subsample_size = subsample_size
        self.bias = bool(bias)
        self.site = site
        self.eps_site = f"{site}_eps"

    # ------------------------------------------------------------------ plates
    @property
    def subsampled(self) -> bool:
        """Whether training steps subsample classes (A&R likelihood with negatives)."""
        return self.likelihood == "ar" and self.num_negatives is not None

    def _check_data(self, x, y):
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"x must be a tensor of shape (N, {self.num_features}), got "
                             f"{tuple(x.shape) if isinstance(x, torch.Tensor) else x!r}")
        if y is not None:
            if not isinstance(y, torch.Tensor) or y.shape != x.shape[:1]:
                raise ValueError(f"y must be a tensor of shape ({x.shape[0]},), got "
                                 f"{tuple(y.shape) if isinstance(y, torch.Tensor) else y!r}")

    def create_plates(self, x: torch.Tensor, y: Optional[torch.Tensor] = None):
        """The ``"data"`` and ``"classes"`` plates of one step (pass as ``create_plates=``).

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
        N, K = x.shape[0], self.num_classes
        train = y is not None
        data = pyro.plate("data", N, subsample_size=self.subsample_size if train else None, dim=-1)
        if not (train and self.subsampled):
            classes = pyro.plate("classes", K, dim=-1)
            classes._ar_eta_classes = None
        else:
            device = x.device
            idx = data.indices
            labels = y[idx]
            s, u, t = self.num_negatives, self.num_kl_classes, self.num_eta_classes
            r = max(s, u)
            R = sample_without_replacement(K, r, device=device)
            R = R[torch.randperm(r, device=device)]  # uniform order: any prefix is a uniform subset
            T = sample_without_replacement(K, t, device=device) if t else R.new_zeros(0)
            extra = torch.unique(torch.cat([T, labels]))
            C = torch.cat([R, extra[~torch.isin(extra, R)]])
            C = _pad_classes(C, min(K, r + t + labels.shape[0]), K)
            classes = pyro.plate("classes", K, subsample=C, dim=-1)
            classes._ar_eta_classes = T
        classes._ar_model = self
        return [data, classes]

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

    def step_structure(self, C: torch.Tensor, labels: torch.Tensor, eta_classes=None):
        """Local positions and weights of one training step, from the class subsample C.

        :returns: dict with ``label_pos`` (B,), ``neg_index`` (j,) and ``neg_weight``
            (B, j) of the likelihood estimate, and ``eta_index`` / ``eta_weight`` of the
            local guide's conditioning set (when ``eta_classes`` is given).
        """
        K, dtype = self.num_classes, torch.get_default_dtype()
        label_pos = class_positions(C, labels, "labels")
        out = {"label_pos": label_pos}
        if not self.subsampled:  # all classes, C = arange(K) in some order
            index = torch.arange(C.numel(), device=C.device)
            out["neg_index"] = index
            out["neg_weight"] = (index != label_pos.unsqueeze(-1)).to(dtype)
            out["eta_index"], out["eta_weight"] = out["neg_index"], out["neg_weight"]
            return out
        s = self.num_negatives
        S_pos = torch.arange(s, device=C.device)
        in_batch = torch.unique(label_pos)  # positions of L, the minibatch's label classes
        if self.stratify:
            s_in_L = torch.isin(S_pos, in_batch)
            w_S = torch.where(s_in_L, torch.zeros((), dtype=dtype), torch.full((), K / s, dtype=dtype))
            w_L = (in_batch != label_pos.unsqueeze(-1)).to(dtype)  # (B, l)
            out["neg_index"] = torch.cat([in_batch, S_pos])
            out["neg_weight"] = torch.cat([w_L, w_S.expand(labels.shape[0], s)], -1)
        else:
            out["neg_index"] = S_pos
            out["neg_weight"] = (S_pos != label_pos.unsqueeze(-1)).to(dtype) * (K / s)
        if eta_classes is not None:
            w_L = (in_batch != label_pos.unsqueeze(-1)).to(dtype)
            if eta_classes.numel():
                T_pos = class_positions(C, eta_classes, "eta classes")
                t = eta_classes.numel()
                w_T = torch.where(torch.isin(T_pos, in_batch), torch.zeros((), dtype=dtype),
                                  torch.full((), K / t, dtype=dtype))
                out["eta_index"] = torch.cat([in_batch, T_pos])
                out["eta_weight"] = torch.cat([w_L, w_T.expand(labels.shape[0], t)], -1)
            else:
                out["eta_index"], out["eta_weight"] = in_batch, w_L
        return out

    # ------------------------------------------------------------------ the model
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

    def __call__(self, x: torch.Tensor, y: Optional[torch.Tensor] = None):
        self._check_data(x, y)
        data, classes = self.create_plates(x, y)
        with classes as C:
            C = classes.indices if C is None else C
            self._check_subsample(C, x, data.indices)
            W, b = self.sample_rows(C, x, y is not None)
        with data as idx:
            idx = data.indices if idx is None else idx
            xb = x[idx]
            psi = xb @ W.T
            if b is not None:
                psi = psi + b
            if y is None:
                return pyro.sample(self.site, UtilityCategorical(self._full_order(psi, C), self.noise))
            labels = y[idx]
            if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_classes):
                raise ValueError(f"y must hold labels in [0, {self.num_classes}), got values in "
                                 f"[{int(labels.min())}, {int(labels.max())}]")
            if self.likelihood == "exact":
                return pyro.sample(self.site, UtilityCategorical(self._full_order(psi, C), self.noise),
                                   obs=labels)
            st = self.step_structure(C, labels)
            zero = torch.zeros((), dtype=x.dtype, device=x.device)
            prior = self.noise.distribution(zero, torch.ones_like(zero)).expand([xb.shape[0]])
            eps = pyro.sample(self.eps_site, prior,
                              infer={"ar_noise": self.noise, "ar_label_site": self.site,
                                     "ar_num_classes": self.num_classes})
            neg = Negatives(st["neg_index"], st["neg_weight"].to(psi.dtype), True)
            d = AugmentedCategorical(psi, eps, self.noise, negatives=neg, eps_site=self.eps_site)
            return pyro.sample(self.site, d, obs=st["label_pos"])

    def _full_order(self, psi, C):
        """Utilities of all K classes in class order (C is a permutation of range(K))."""
        if C.numel() != self.num_classes:
            raise ValueError(f"guide/model plate mismatch: prediction and the exact likelihood need "
                             f"the full 'classes' plate ({self.num_classes}), got {C.numel()} classes")
        if bool((C == torch.arange(C.numel(), device=C.device)).all()):
            return psi
        return psi.index_select(-1, C.argsort())

    def __repr__(self):
        return (f"BayesianLinearClassifier(D={self.num_features}, K={self.num_classes}, noise="
                f"{self.noise.name!r}, likelihood={self.likelihood!r}, num_negatives="
                f"{self.num_negatives}, num_kl_classes={self.num_kl_classes}, num_eta_classes="
                f"{self.num_eta_classes}, stratify={self.stratify}, prior_scale={self.prior_scale})")


class ClassSubsampledNormal(AutoGuide):
    r"""Mean-field Gaussian guide over the rows of W and b, touching only the step's rows.

    :math:`q(w_k) = N(\mu_k, \mathrm{diag}(\sigma_k^2))`, :math:`q(b_k) = N(m_k, \tau_k^2)`,
    :math:`\sigma = \mathrm{softplus}(u)`, all stored unconstrained as (K, D) / (K,)
    parameters and gathered for the class plate's subsample only.

    :param model: a :class:`BayesianLinearClassifier`.
    :param local: ``"conditional"`` (default): also guide the noise site with
        :math:`q(\varepsilon_n\mid W)` (Gumbel(log eta_n(W), 1) for softmax, a Laplace
        approximation otherwise; see the module doc); ``None``: leave it to another local
        guide in an ``AutoGuideList(model, create_plates=model.create_plates)``.
    :param float init_scale: initial :math:`\sigma` (> 0). Rows are updated only when their
        class is in a step's subsample, so with many rare classes the initial scale matters:
        small values leave data-poor rows too narrow, the prior's scale leaves data-rich rows
        too wide for longer; a value of the order of half the prior scale is a good start
        (see ``tutorials/04_bayesian_weights.py``, part B).
    :param float init_loc_scale: initial :math:`\mu \sim N(0, \text{init\_loc\_scale}^2)` (0: zeros).
    :param bool sparse: sparse gradients for the row gathers (use :func:`pyro_ar.optim.lazy_adam`).
    :param int newton_steps: Newton iterations of the Laplace local guide (non-Gumbel noise).
    :param create_plates: defaults to ``model.create_plates``.
    :param str name: prefix of the parameter names (default ``"ClassSubsampledNormal"``).

    Example:

    >>> import torch
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import BayesianLinearClassifier, ClassSubsampledNormal, ClosedFormELBO
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(2000, 8, 10_000, seed=0)
    >>> model = BayesianLinearClassifier(8, 10_000, num_negatives=32, subsample_size=128)
    >>> guide = ClassSubsampledNormal(model)
    >>> loss = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO()).step(data.x, data.y)
    >>> lo, hi = guide.credible_interval(torch.tensor([0, 1]), level=0.9)   # rows of W
    >>> lo.shape
    torch.Size([2, 8])
    """

    def __init__(self, model, local: Optional[str] = "conditional", init_scale: float = 0.1,
                 init_loc_scale: float = 0.0, sparse: bool = True, newton_steps: int = 8,
                 create_plates=None, name: Optional[str] = None):
        if not isinstance(model, BayesianLinearClassifier):
            raise ValueError(f"ClassSubsampledNormal needs a BayesianLinearClassifier model, got model={model!r}")
        if local not in ("conditional", None):
            raise ValueError(f"local must be 'conditional' or None, got local={local!r}")
        if not (isinstance(init_scale, (int, float)) and init_scale > 0):
            raise ValueError(f"init_scale must be > 0, got init_scale={init_scale!r}")
        if not init_loc_scale >= 0:
            raise ValueError(f"init_loc_scale must be >= 0, got init_loc_scale={init_loc_scale!r}")
        self.local = local if model.likelihood == "ar" else None
        self.init_scale, self.init_loc_scale = float(init_scale), float(init_loc_scale)
        self.sparse, self.newton_steps = sparse, int(newton_steps)
        self._ar_model = model
        super().__init__(model, create_plates=create_plates)
        if name is not None:  # prefix of the parameter names (several guides in one param store)
            self._pyro_name = name

    @property
    def ar_model(self) -> BayesianLinearClassifier:
        return self._ar_model

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        model = self._ar_model
        K, D = model.num_classes, model.num_features
        tr = self.prototype_trace
        if "weight" not in tr.nodes:
            raise ValueError("guide/model mismatch: the model has no 'weight' site")
        frames = [f.name for f in tr.nodes["weight"]["cond_indep_stack"]]
        if frames != ["classes"]:
            raise ValueError(f"guide/model plate mismatch: the 'weight' site must be in the plate "
                             f"'classes' only, got plates {frames}")
        like = tr.nodes["weight"]["value"]
        kw = dict(dtype=like.dtype, device=like.device)
        u0 = _SOFTPLUS_INV(self.init_scale)
        g = torch.Generator(device="cpu").manual_seed(0)

        def init_loc(shape):
            if self.init_loc_scale == 0:
                return torch.zeros(shape, **kw)
            return (self.init_loc_scale * torch.randn(shape, generator=g)).to(**kw)
        self.weight_loc = PyroParam(init_loc((K, D)))
        self.weight_scale_unconstrained = PyroParam(torch.full((K, D), u0, **kw))
        if model.bias:
            self.bias_loc = PyroParam(torch.zeros(K, **kw))
            self.bias_scale_unconstrained = PyroParam(torch.full((K,), u0, **kw))

    def _ar_plates(self, *args, **kwargs):
        if self.master is None and self.create_plates is None:
            self.create_plates = self._ar_model.create_plates
        plates = self._create_plates(*args, **kwargs)
        classes = plates.get("classes")
        if classes is None or getattr(classes, "_ar_model", None) is not self._ar_model:
            raise ValueError(
                "guide/model plate mismatch: the 'classes' plate was not created by "
                "model.create_plates, so the guide's class subsample would differ from the "
                "model's; pass create_plates=model.create_plates to the master guide "
                "(e.g. AutoGuideList(model, create_plates=model.create_plates))")
        return plates

    # ---------------------------------------------------------------- rows
    def _rows(self, C):
        emb = lambda p: F.embedding(C, p, sparse=self.sparse)  # noqa: E731
        loc = emb(self.weight_loc)
        scale = F.softplus(emb(self.weight_scale_unconstrained))
        bloc = bscale = None
        if self._ar_model.bias:
            gat = lambda p: torch.gather(p, 0, C, sparse_grad=self.sparse)  # noqa: E731
            bloc = gat(self.bias_loc)
            bscale = F.softplus(gat(self.bias_scale_unconstrained))
        return loc, scale, bloc, bscale

    def forward(self, x, y=None):
        model = self._ar_model
        if self.prototype_trace is None:
            self._setup_prototype(x, y)
        plates = self._ar_plates(x, y)
        data, classes = plates["data"], plates["classes"]
        train = y is not None
        C = classes.indices
        self.last_classes = C  # the step's class subsample (for inspection)
        loc, scale, bloc, bscale = self._rows(C)
        if train and model.subsampled:
            kl_scale, kl_mask = model._kl_weights(C.numel(), loc)
            ctx_scale, ctx_mask = poutine.scale(scale=kl_scale), poutine.mask(mask=kl_mask)
        else:
            ctx_scale = ctx_mask = contextlib.nullcontext()
        result = {}
        with classes, ctx_scale, ctx_mask:
            W = pyro.sample("weight", self._row_distribution(loc, scale, C).to_event(1))
            result["weight"] = W
            b = None
            if model.bias:
                b = pyro.sample("bias", self._row_distribution(bloc, bscale, C))
                result["bias"] = b
        if train and self.local == "conditional":
            with data:
                idx = data.indices
                result[model.eps_site] = self._local(x[idx], y[idx], C, W, b, classes._ar_eta_classes)
        return result

    # ---------------------------------------------------------------- local guide
    def _local(self, xb, labels, C, W, b, T):
        model = self._ar_model
        st = model.step_structure(C, labels, eta_classes=T if model.subsampled else None)
        cols = torch.cat([st["label_pos"].new_zeros(0), st["eta_index"]])
        Wy = W.index_select(0, st["label_pos"])                           # (B, D)
        psi_y = (xb * Wy).sum(-1)
        psi_e = xb @ W.index_select(0, cols).T                            # (B, j)
        if b is not None:
            psi_y = psi_y + b.index_select(0, st["label_pos"])
            psi_e = psi_e + b.index_select(0, cols)
        d = psi_y.unsqueeze(-1) - psi_e                                   # psi_y - psi_k
        w = st["eta_weight"].to(d.dtype)
        if isinstance(model.noise, GumbelNoise):
            # log eta = log(1 + sum_j w_j exp(-d_j)), the leading 0 keeps logsumexp finite
            logw = torch.where(w > 0, w.clamp(min=1e-300).log(), torch.full_like(w, -math.inf))
            terms = torch.cat([torch.zeros_like(psi_y).unsqueeze(-1), logw - d], -1)
            log_eta = torch.logsumexp(terms, -1)
            return pyro.sample(model.eps_site, self._local_distribution("gumbel", log_eta, None))
        loc, sd = _laplace_local(model.noise, d, w, self.newton_steps)
        return pyro.sample(model.eps_site, self._local_distribution("normal", loc, sd))

    def _row_distribution(self, loc, scale, classes):
        """q of the gathered rows (override to control the draws, e.g. common random numbers)."""
        return dist.Normal(loc, scale)

    def _local_distribution(self, family, loc, scale):
        """q(eps | W): ``Gumbel(loc, 1)`` or ``Normal(loc, scale)`` (override to control the draws)."""
        if family == "gumbel":
            return dist.Gumbel(loc, torch.ones_like(loc))
        return dist.Normal(loc, scale)

    # ---------------------------------------------------------------- posterior access
    @torch.no_grad()
    def loc_and_scale(self, classes: Optional[torch.Tensor] = None):
        r"""(:math:`\mu`, :math:`\sigma`, :math:`m`, :math:`\tau`) for the given classes (default all)."""
        if classes is None:
            classes = torch.arange(self._ar_model.num_classes, device=self.weight_loc.device)
        loc, scale, bloc, bscale = self._rows(classes)
        return loc, scale, bloc, bscale

    @torch.no_grad()
    def sample_weights(self, num_samples: int, classes: Optional[torch.Tensor] = None,
                       generator: Optional[torch.Generator] = None):
        """Posterior draws of the rows of ``classes`` (default all): ``(S, m, D)``, ``(S, m)``."""
        loc, scale, bloc, bscale = self.loc_and_scale(classes)
        z = torch.randn((num_samples,) + loc.shape, generator=generator, dtype=loc.dtype).to(loc.device)
        W = loc + scale * z
        b = None
        if bloc is not None:
            zb = torch.randn((num_samples,) + bloc.shape, generator=generator, dtype=loc.dtype).to(loc.device)
            b = bloc + bscale * zb
        return W, b

    @torch.no_grad()
    def credible_interval(self, classes, features=None, level: float = 0.9):
        """Central credible intervals of chosen weights: ``(lower, upper)``.

        :param classes: 1-D class ids (rows).
        :param features: 1-D feature ids (columns; default all). Use
            ``features="bias"`` for the biases of ``classes``.
        """
        if not 0 < level < 1:
            raise ValueError(f"level must lie in (0, 1), got level={level!r}")
        classes = torch.as_tensor(classes, device=self.weight_loc.device).reshape(-1)
        loc, scale, bloc, bscale = self.loc_and_scale(classes)
        if isinstance(features, str) and features == "bias":
            loc, scale = bloc, bscale
        elif features is not None:
            f = torch.as_tensor(features, device=loc.device).reshape(-1)
            loc, scale = loc[:, f], scale[:, f]
        z = dist.Normal(0.0, 1.0).icdf(torch.tensor(0.5 + level / 2)).item()
        return loc - z * scale, loc + z * scale

    def median(self, *args, **kwargs):
        loc, _, bloc, _ = self.loc_and_scale()
        out = {"weight": loc}
        if bloc is not None:
            out["bias"] = bloc
        return out

    def quantiles(self, quantiles, *args, **kwargs):
        loc, scale, bloc, bscale = self.loc_and_scale()
        q = torch.as_tensor(quantiles, dtype=loc.dtype, device=loc.device)
        z = dist.Normal(torch.zeros((), dtype=loc.dtype), 1.0).icdf(q)
        out = {"weight": loc + z.reshape((-1, 1, 1)) * scale}
        if bloc is not None:
            out["bias"] = bloc + z.reshape((-1, 1)) * bscale
        return out


def _laplace_local(noise, d, w, steps):
    r"""Laplace approximation N(mode, -1/f'') of :math:`f(e)=\log\phi(e)+\sum_j w_j\log\Phi(e+d_j)`.

    Damped Newton on detached inputs, then one differentiable Newton step from the
    converged mode (its derivative w.r.t. d is the implicit-function derivative).
    """
    def derivs(e, dd, create_graph):
        with torch.enable_grad():
            e = e if e.requires_grad else e.detach().requires_grad_(True)
            f = noise.log_density(e) + (w * noise.log_cdf(e.unsqueeze(-1) + dd)).sum(-1)
            g, = torch.autograd.grad(f.sum(), e, create_graph=True)
            h, = torch.autograd.grad(g.sum(), e, create_graph=create_graph)
        return g, h

    dd = d.detach()
    e = torch.zeros_like(dd[..., 0])
    for _ in range(steps):
        g, h = derivs(e, dd, False)
        step = (-g / h.clamp(max=-1e-6)).clamp(-2.0, 2.0)
        e = (e + step).detach()
    # differentiable final step: e* = e0 - g(e0, d)/h(e0, d), sd = (-h(e*, d))^-1/2
    e0 = e.detach().requires_grad_(True)
    with torch.enable_grad():
        f = noise.log_density(e0) + (w * noise.log_cdf(e0.unsqueeze(-1) + d)).sum(-1)
        g, = torch.autograd.grad(f.sum(), e0, create_graph=True)
        h, = torch.autograd.grad(g.sum(), e0, create_graph=True)
    h = h.clamp(max=-1e-6)
    mode = e0.detach() - g / h
    return mode, (-h).rsqrt()


# ====================================================================== posterior predictive
def _weight_draws(posterior, num_samples, classes=None, generator=None):
    """(W (S, K, D), b (S, K) or None) from a guide or a dict of samples."""
    if isinstance(posterior, ClassSubsampledNormal):
        return posterior.sample_weights(num_samples, classes, generator)
    if isinstance(posterior, dict):
        W, b = posterior["weight"], posterior.get("bias")
        if W.dim() == 4:  # Predictive may keep a singleton dim
            W = W.squeeze(1)
        if b is not None and b.dim() == 3:
            b = b.squeeze(1)
        if classes is not None:
            W = W[:, classes]
            b = None if b is None else b[:, classes]
        return W.detach(), None if b is None else b.detach()
    raise ValueError("posterior must be a ClassSubsampledNormal guide or a dict of samples with "
                     f"'weight' (S, K, D) and optional 'bias' (S, K), got {type(posterior).__name__}")


@torch.no_grad()
def predictive_log_likelihood(posterior, x, y, noise="gumbel", num_samples: int = 100,
                              chunk_size: int = 256, generator=None, return_pointwise=False):
    r"""Posterior predictive log-likelihood :math:`\frac1N\sum_n\log\frac1S\sum_s p(y_n\mid W_s)`.

    Each :math:`p(y\mid W_s)` is exact (log-softmax) for Gumbel noise and by quadrature
    otherwise; the average over draws is taken in probability space (log-mean-exp).

    :param posterior: a fitted :class:`ClassSubsampledNormal` or a dict of samples (e.g. from
        ``pyro.infer.Predictive(model, guide=guide, num_samples=S, return_sites=["weight", "bias"])``,
        or from ``MCMC.get_samples()``).
    :returns: dict with ``"log_lik"`` (mean) and ``"pointwise"`` if asked.

    Example:

    >>> import torch
    >>> from pyro_ar.infer import predictive_log_likelihood
    >>> draws = {"weight": torch.zeros(10, 4, 3), "bias": torch.zeros(10, 4)}   # 10 posterior draws
    >>> x, y = torch.randn(5, 3), torch.tensor([0, 1, 2, 3, 0])
    >>> round(predictive_log_likelihood(draws, x, y)["log_lik"], 4)   # log(1/4)
    -1.3863
    """
    W, b = _weight_draws(posterior, num_samples, generator=generator)
    S = W.shape[0]
    parts = []
    for start in range(0, x.shape[0], chunk_size):
        xb, yb = x[start:start + chunk_size], y[start:start + chunk_size]
        psi = torch.einsum("nd,skd->snk", xb.to(W.dtype), W)
        if b is not None:
            psi = psi + b.unsqueeze(1)
        lp = UtilityCategorical(psi, noise).log_prob(yb)        # (S, n)
        parts.append(torch.logsumexp(lp, 0) - math.log(S))
    lp = torch.cat(parts)
    out = {"log_lik": lp.mean().item()}
    if return_pointwise:
        out["pointwise"] = lp
    return out


@torch.no_grad()
def predictive_probs(posterior, x, noise="gumbel", num_samples: int = 100, generator=None):
    r"""Predictive class probabilities :math:`\frac1S\sum_s p(k\mid x, W_s)` and their sd over draws.

    O(S N K D): for moderate K or few points. :returns: ``(mean (N, K), sd (N, K))``.

    Example:

    >>> import torch
    >>> from pyro_ar.infer import predictive_probs
    >>> draws = {"weight": torch.randn(20, 4, 2), "bias": torch.zeros(20, 4)}
    >>> mean, sd = predictive_probs(draws, torch.randn(3, 2))
    >>> mean.shape, torch.allclose(mean.sum(-1), torch.ones(3, dtype=mean.dtype))
    (torch.Size([3, 4]), True)
    """
    W, b = _weight_draws(posterior, num_samples, generator=generator)
    mean = torch.zeros(x.shape[0], W.shape[1], dtype=W.dtype, device=W.device)
    sq = torch.zeros_like(mean)
    for s in range(W.shape[0]):
        psi = x.to(W.dtype) @ W[s].T
        if b is not None:
            psi = psi + b[s]
        p = UtilityCategorical(psi, noise).probs
        mean += p
        sq += p * p
    S = W.shape[0]
    mean /= S
    sd = (sq / S - mean ** 2).clamp(min=0).sqrt()
    return mean, sd


@torch.no_grad()
def predictive_top_k(posterior, x, k: int = 5, noise="gumbel", num_samples: int = 100,
                     level: float = 0.9, generator=None):
    r"""Top-k classes by predictive probability, with their uncertainty over posterior draws.

    For each draw s the full distribution :math:`p(\cdot\mid x, W_s)` over the K classes is
    computed (O(K D) per point and draw, one draw at a time, so memory is O(N K));
    the classes are ranked by the predictive mean probability.

    :returns: dict with ``classes`` (N, k), ``mean`` (N, k) predictive probability, ``sd``
        (N, k) its standard deviation over draws, ``lower`` / ``upper`` (N, k) the
        ``level`` central interval of p(k | x, W) over draws.

    Example:

    >>> import torch
    >>> from pyro_ar.infer import predictive_top_k
    >>> draws = {"weight": torch.zeros(20, 6, 2), "bias": torch.arange(6.0).expand(20, 6)}
    >>> predictive_top_k(draws, torch.zeros(1, 2), k=3)["classes"].tolist()
    [[5, 4, 3]]
    """
    if isinstance(posterior, ClassSubsampledNormal):
        K = posterior.ar_model.num_classes

        def draws():
            for _ in range(num_samples):
                yield posterior.sample_weights(1, generator=generator)
    else:
        Wall, ball = _weight_draws(posterior, None)
        K, num_samples = Wall.shape[1], Wall.shape[0]

        def draws():
            for s in range(num_samples):
                yield Wall[s:s + 1], None if ball is None else ball[s:s + 1]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= K:
        raise ValueError(f"k must be an integer in [1, num_classes={K}], got k={k!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got level={level!r}")
    probs, mean = [], None
    for W, b in draws():
        psi = x.to(W.dtype) @ W[0].T
        if b is not None:
            psi = psi + b[0]
        p = UtilityCategorical(psi, noise).probs
        mean = p.clone() if mean is None else mean + p
        probs.append(p)
    mean = mean / num_samples
    top = mean.topk(k, -1)
    chosen = torch.stack([p.gather(-1, top.indices) for p in probs])  # (S, N, k)
    q = torch.tensor([0.5 - level / 2, 0.5 + level / 2], dtype=chosen.dtype)
    lo, hi = torch.quantile(chosen, q, dim=0)
    return {"classes": top.indices, "mean": top.values, "sd": chosen.std(0), "lower": lo, "upper": hi}


def posterior_summary(posterior, num_samples=None):
    """(mean, sd) of W and b: from a :class:`ClassSubsampledNormal` (exact, all K) or a dict of
    samples (sample moments). Returns a dict with ``weight_mean``, ``weight_sd``,
    ``bias_mean``, ``bias_sd``.

    Example:

    >>> import torch
    >>> from pyro_ar.infer import posterior_summary
    >>> s = posterior_summary({"weight": torch.randn(100, 3, 2), "bias": torch.randn(100, 3)})
    >>> s["weight_mean"].shape, s["bias_sd"].shape
    (torch.Size([3, 2]), torch.Size([3]))
    """
    if isinstance(posterior, ClassSubsampledNormal):
        loc, scale, bloc, bscale = posterior.loc_and_scale()
        return {"weight_mean": loc, "weight_sd": scale, "bias_mean": bloc, "bias_sd": bscale}
    W, b = _weight_draws(posterior, num_samples)
    out = {"weight_mean": W.mean(0), "weight_sd": W.std(0)}
    out["bias_mean"] = None if b is None else b.mean(0)
    out["bias_sd"] = None if b is None else b.std(0)
    return out


def fit(svi, *args, num_steps: int = 1000, scheduler=None, average_fraction: float = 0.0,
        summary_fn=None, callback=None, **kwargs):
    r"""Run ``svi.step(*args, **kwargs)`` and return the losses and an iterate-averaged posterior.

    :param scheduler: a ``pyro.optim.PyroLRScheduler`` (e.g. the one inside ``svi``) whose
        ``step()`` is called after every SVI step.
    :param float average_fraction: average the posterior summary (``summary_fn()``, a dict
        of tensors such as :func:`posterior_summary` returns) over the last fraction of
        the steps (Polyak averaging; reduces the noise of the final estimate). The
        summary is O(K D) per step: use it for evaluation-size problems.
    :param callback: ``callback(step, loss)`` after every step.
    :returns: dict with ``losses`` (list) and ``average`` (dict of averaged tensors, or None).

    Example:

    >>> import torch
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import BayesianLinearClassifier, ClassSubsampledNormal, ClosedFormELBO
    >>> from pyro_ar.infer.bayesian import fit
    >>> from pyro_ar.infer import posterior_summary
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(500, 4, 20, seed=0)
    >>> model = BayesianLinearClassifier(4, 20, num_negatives=5, subsample_size=50)
    >>> guide = ClassSubsampledNormal(model)
    >>> svi = SVI(model, guide, lazy_adam({"lr": 0.05}), ClosedFormELBO())
    >>> out = fit(svi, data.x, data.y, num_steps=20, average_fraction=0.5,
    ...           summary_fn=lambda: posterior_summary(guide))
    >>> out["average"]["weight_mean"].shape
    torch.Size([20, 4])
    """
    if not 0.0 <= average_fraction <= 1.0:
        raise ValueError(f"average_fraction must lie in [0, 1], got average_fraction={average_fraction!r}")
    start = num_steps - int(round(average_fraction * num_steps))
    losses, acc, n = [], None, 0
    for step in range(num_steps):
        losses.append(svi.step(*args, **kwargs))
        if scheduler is not None:
            scheduler.step()
        if callback is not None:
            callback(step, losses[-1])
        if average_fraction > 0 and step >= start:
            with torch.no_grad():
                snap = summary_fn()
                if acc is None:
                    acc = {k: None if v is None else v.detach().clone() for k, v in snap.items()}
                else:
                    for k, v in snap.items():
                        if v is not None:
                            acc[k] += v.detach()
            n += 1
    avg = None if acc is None else {k: None if v is None else v / n for k, v in acc.items()}
    return {"losses": losses, "average": avg}

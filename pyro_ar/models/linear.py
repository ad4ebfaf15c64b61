r"""A linear classifier :math:`\psi_n = W x_n + b` with any likelihood of :mod:`pyro_ar.likelihoods`.

Fitted by stock ``pyro.infer.SVI``; the weights are maximum-likelihood parameters
(``weights="mle"``), MAP parameters under :math:`w_k\sim N(0, s^2 I)`, :math:`b_k\sim N(0,s^2)`
(``"map"``, the log-prior estimated on a class subsample, O(subsample) per step) or latent
variables for an AutoGuide (``"bayes"``: every row of W, b sampled, O(K D) per step; for
large K, :class:`~pyro_ar.models.BayesianLinearClassifier` is the same model with the
class-subsampled weight strategy, :math:`O(|C| D)` per step -- see "Bayesian weights: which
route" in ``docs/choosing.rst``). The utilities of a minibatch are lazy
(:class:`~pyro_ar.utility.LinearUtility`: only the rows of W the likelihood asks for are
gathered, with sparse gradients when ``sparse=True``) or dense (one matrix product, the
cheaper choice when K is small).

Sparse inputs: ``x`` may be a torch sparse (COO) matrix (or any row-indexable object whose
rows are torch sparse batches, such as the estimator's): the utilities of a minibatch then
come from its non-zeros only, O(nnz(x_batch) x (1 + s)) per step, and with ``sparse=True``
the gradient of W is sparse in classes *and* features
(:func:`~pyro_ar.utility.gather_entries`, updated entry by entry by
:class:`~pyro_ar.optim.LazyAdam`).

Low rank (``rank=r``): :math:`W = V E^\top` with an input embedding E (D x r, parameter
``"embedding"``) and output weights V (K x r, parameter ``"weight"``),

.. math::  \psi_n = V (E^\top x_n) + b,

O((D + K) r) parameters instead of O(K D); a step gathers the rows of E at the minibatch's
non-zero features (:func:`~pyro_ar.utility.embed_inputs`) and the rows of V the likelihood
asks for, so only those rows (and their optimizer state) change.

Priors (``weights="map"`` / ``"bayes"``, :meth:`LinearClassifier.prior_scales`): ``prior_scale``
s is the prior standard deviation of an entry of W whatever the rank. Full rank:
:math:`W_{kj}\sim N(0, s^2)`. Low rank: V and E get :math:`N(0, s_f^2)` with

.. math::  s_f = \sqrt{s}\; r^{-1/4}, \qquad
           \operatorname{Var}(W_{kj}) = \operatorname{Var}\Big(\sum_{i=1}^r V_{ki} E_{ji}\Big)
           = r s_f^4 = s^2

(the same factor scale s on V and E would give W entries the prior standard deviation
:math:`\sqrt{r} s^2`: far too weak a prior for s > r^{-1/2}, far too strong below; the
MAP penalty :math:`(\|V\|^2 + \|E\|^2)/(2 s_f^2)` is :math:`\sqrt{r}\,\|W\|_*/s` at
its balanced optimum). E's log-prior is estimated on a uniform subsample F of its D rows,
:math:`(D/|F|)\sum_{j\in F}\log N(e_j; 0, s_f^2 I)`, V's and b's on a class subsample U;
with a rank both have max(B, s) rows (O(B r) per step, the order of the step itself): with
only s rows (e.g. 20 of 10^4) a row's prior gradient comes once in hundreds of steps, a
rare large kick that Adam's per-coordinate normalisation turns into a step of about the
learning rate -- in effect no prior at all, whatever s (measured on the Brown bag of
words, ``benchmarks/sparse.py``). The bias:
:math:`b_k\sim N(\beta_k, s^2)` with :math:`\beta` = ``init.bias`` (0 by default), so a
model started at the unigram (log class frequencies) is shrunk towards it, not towards
uniform classes.

Weights on a pattern (``weight_pattern=``, a :class:`~pyro_ar.weight_pattern.WeightPattern`): W is
non-zero only at the pattern's (class, feature) entries, e.g. the features seen with each
class in training (:meth:`~pyro_ar.weight_pattern.WeightPattern.from_cooccurrence`); the parameter
``"weight"`` holds those nnz entries (:class:`~pyro_ar.weight_pattern.PatternLinearUtility`), a
full-rank model at the memory of its data -- the estimator's choice for sparse inputs with many
classes and few rows per class, where a K x D W does not fit and a low rank cannot memorise
which words go with which class. ``init.weight`` (nnz,) is then W's starting point and its
prior mean, :math:`W_e \sim N(\mathrm{loc}_e, s^2)`, its log-prior estimated on a uniform
subsample of ``num_prior_entries`` entries, :math:`(\mathrm{nnz}/|U|)\sum_{e\in U}\log N`.
"""

from typing import Dict, Optional

import torch

import pyro
import pyro.distributions as dist

from ..likelihoods import Likelihood
from ..negatives import DEFAULT_NUM_NEGATIVES
from ..numerics import check_finite
from ..subsets import sample_without_replacement
from ..utility import DenseUtility, LinearUtility, gather_entries
from ..weight_pattern import PatternLinearUtility, WeightPattern
from .base import CategoricalModel, check_positive_int
from .weights import Init, check_init, get_weights

__all__ = ["LinearClassifier", "resolve_defaults"]


def resolve_defaults(num_classes, likelihood, num_negatives, weights, sparse):
    """``(num_negatives, sparse)`` with the defaults resolved so that the default model's step
    costs the same whatever K: ``num_negatives="auto"`` is all K - 1 other classes while
    K - 1 <= ``pyro_ar.negatives.DEFAULT_NUM_NEGATIVES`` (an exact class sum, as cheap),
    that many uniform negatives above; ``sparse=None`` is True when a step subsamples
    classes (row-sparse gradients: use :func:`pyro_ar.optim.lazy_adam`) and the weights
    are point estimates, False otherwise (dense gradients: any optimizer).

    Example:

    >>> from pyro_ar.models.linear import resolve_defaults
    >>> resolve_defaults(10, "ar", "auto", "mle", None), resolve_defaults(10**5, "ar", "auto", "mle", None)
    ((None, False), (20, True))
    """
    if isinstance(num_negatives, str):
        if num_negatives != "auto":
            raise ValueError(f"num_negatives must be an int >= 1, None (all classes) or 'auto', got "
                             f"num_negatives={num_negatives!r}")
        K = check_positive_int("num_classes", num_classes, low=2)
        num_negatives = None if K - 1 <= DEFAULT_NUM_NEGATIVES else DEFAULT_NUM_NEGATIVES
    if sparse not in (None, True, False):
        raise ValueError(f"sparse must be True, False or None (automatic), got sparse={sparse!r}")
    if sparse is None:
        if isinstance(likelihood, Likelihood):
            subsampled = likelihood.num_negatives is not None
        else:
            subsampled = likelihood != "exact" and num_negatives is not None
        sparse = subsampled and weights not in ("bayes",)
    return num_negatives, bool(sparse)


def _sparse_layout(x) -> bool:
    """Whether x is a torch sparse matrix or rows whose batches are (the estimator's)."""
    return getattr(x, "layout", None) in (torch.sparse_coo, torch.sparse_csr)


class LinearClassifier(CategoricalModel):
    r"""Pyro model of a linear classifier with a (subsampled) categorical likelihood.

    :param int num_features: D.
    :param int num_classes: K.
    :param likelihood: a :class:`~pyro_ar.likelihoods.Likelihood` object, which carries its
        noise and negatives (e.g. ``AR("normal", negatives=20)``), or a name (``"ar"``,
        ``"exact"``, ``"ove"``, ``"sampled"``, ``"bouchard"``): that likelihood with Gumbel
        noise and ``"auto"`` negatives -- all classes up to K = 21, else 20 uniform ones per
        datapoint, so the default model's step does not grow with K (:func:`resolve_defaults`).
    :param weights: ``"mle"``, ``"map"``, ``"bayes"`` or a weight strategy
        (:class:`~pyro_ar.models.weights.MAP` carries ``prior_scale``, ``num_prior_classes``
        -- with a rank and subsampled negatives default max(``subsample_size``, negatives),
        see the module docstring --, ``penalize_bias``: False leaves b out of the MAP log-prior,
        as scikit-learn leaves the intercept out of its L2 penalty; ``"bayes"`` keeps b's
        prior either way -- and ``num_prior_entries``: with a pattern, the entries of W in one
        step's log-prior estimate, default 4096).
    :param sparse: row-sparse gradients of the per-class parameters (use
        :func:`pyro_ar.optim.lazy_adam`); None (default): when the step subsamples classes
        and the weights are point estimates (:func:`resolve_defaults`).
    :param init: an :class:`~pyro_ar.models.weights.Init`: ``scale`` (W initialised
        N(0, scale^2), default 0.1, the authors'), ``bias_scale`` (b initialised
        N(0, bias_scale^2), default 0.001), ``bias`` (None, or a (K,) tensor added to that
        initial b, e.g. the centred log class frequencies -- the model then starts at the
        unigram model; it is also the mean of b's prior), ``weight`` (with a pattern: None,
        W starts N(0, scale^2) with prior mean 0, or an (nnz,) tensor, W's starting point and
        prior mean).
    :param str utility: ``"lazy"`` (gathers only the rows asked for, O(B s D) per step) or
        ``"dense"`` (all K utilities of the minibatch, O(B K D)).
    :param rank: None (a full K x D weight matrix) or r: the low-rank model
        :math:`W = V E^\top` (see the module docstring), O((D + K) r) parameters.
    :param weight_pattern: None, or a :class:`~pyro_ar.weight_pattern.WeightPattern` over (K, D):
        W lives on its entries only (see the module docstring; full rank, ``"mle"``/``"map"``).

    The remaining arguments (``subsample_size``, ``prefix``, ``site``) are those of :class:`~pyro_ar.models.base.CategoricalModel`.

    Example:

    >>> import pyro, pyro_ar as ar
    >>> from pyro_ar.likelihoods import AR
    >>> data = ar.datasets.make_linear_teacher(2000, 8, 500, seed=0)
    >>> model = ar.LinearClassifier(8, 500, likelihood=AR(negatives=ar.SharedNegatives(16)),
    ...                             subsample_size=128, sparse=True)
    >>> svi = pyro.infer.SVI(model, ar.infer.default_guide(model), ar.optim.lazy_adam({"lr": 0.05}),
    ...                      ar.infer.default_elbo())
    >>> losses = [svi.step(data.x, data.y) for _ in range(10)]
    >>> model.utility(data.x[:3]).full().shape
    torch.Size([3, 500])
    >>> low = ar.LinearClassifier(8, 500, rank=4)         # W = V E^T: (8 + 500) x 4 numbers
    >>> low.parameter_shapes()
    {'weight': (500, 4), 'bias': (500,), 'embedding': (8, 4)}
    """

    #: the string shortcut's defaults (:meth:`~pyro_ar.models.base.CategoricalModel.likelihood_shortcuts`)
    likelihood_defaults = {"noise": "gumbel", "num_negatives": "auto", "strategy": "per_datapoint",
                           "proposal": None}

    def __init__(self, num_features: int, num_classes: int, likelihood="ar", weights="mle",
                 subsample_size: Optional[int] = None, sparse: Optional[bool] = None,
                 init: Optional[Init] = None, prefix: str = "", site: str = "y", utility: str = "lazy",
                 rank: Optional[int] = None, weight_pattern: Optional[WeightPattern] = None):
        self.num_features = check_positive_int("num_features", num_features)
        self.rank = check_positive_int("rank", rank, allow_none=True)
        init = check_init(init, type(self).__name__, self.init_fields)
        negatives = None if isinstance(likelihood, Likelihood) \
            else self.likelihood_shortcuts(likelihood, num_classes).get("num_negatives")
        name = get_weights(weights, self.weight_choices).name
        _, sparse = resolve_defaults(num_classes, likelihood, negatives, name, sparse)
        super().__init__(num_classes, likelihood, weights=weights, subsample_size=subsample_size,
                         sparse=sparse, prefix=prefix, site=site)
        if utility not in ("lazy", "dense"):
            raise ValueError(f"utility must be 'lazy' or 'dense', got utility={utility!r}")
        self.utility_mode = utility
        self.init_scale = 0.1 if init.scale is None else init.scale
        self.bias_init_scale = 1e-3 if init.bias_scale is None else init.bias_scale
        bias_init = init.bias
        if bias_init is not None and (not isinstance(bias_init, torch.Tensor)
                                      or bias_init.shape != (self.num_classes,)):
            raise ValueError(f"init.bias must be a tensor of shape ({self.num_classes},), got "
                             f"{getattr(bias_init, 'shape', bias_init)!r}")
        self.bias_init = bias_init
        self._check_pattern(weight_pattern, init.weight, self.weights, utility)
        self.weight_pattern, self.weight_loc = weight_pattern, init.weight
        if rank is not None and self.num_prior_classes is None and self.num_negatives is not None \
                and self.subsample_size is not None:  # the prior on B rows: see prior_scales
            self.num_prior_classes = max(self.subsample_size, self.num_negatives)

    #: the fields of ``init=`` this model reads
    init_fields = ("scale", "bias_scale", "bias", "weight")

    @classmethod
    def resolve_shortcuts(cls, likelihood, num_classes, values):
        """``num_negatives="auto"`` resolved for K (:func:`resolve_defaults`)."""
        values = dict(values)
        values["num_negatives"], _ = resolve_defaults(num_classes, likelihood, values["num_negatives"],
                                                      "mle", False)
        return values

    def _check_pattern(self, pattern, loc, weights, utility):
        if pattern is None:
            if loc is not None:
                raise ValueError("init.weight needs a weight_pattern (it holds the pattern's entries)")
            return
        if not isinstance(pattern, WeightPattern) or (pattern.num_classes, pattern.num_features) \
                != (self.num_classes, self.num_features):
            raise ValueError(f"weight_pattern must be a WeightPattern over ({self.num_classes}, "
                             f"{self.num_features}), got {pattern!r}")
        if self.rank is not None or weights == "bayes" or utility != "lazy":
            raise ValueError(f"weight_pattern needs rank=None, weights 'mle' or 'map' and utility='lazy', "
                             f"got rank={self.rank!r}, weights={weights!r}, utility={utility!r}")
        if loc is not None and (not isinstance(loc, torch.Tensor) or loc.shape != (len(pattern),)):
            raise ValueError(f"init.weight must be a tensor of shape ({len(pattern)},), got "
                             f"{getattr(loc, 'shape', loc)!r}")
        if loc is not None:
            check_finite(loc, "init.weight")

    def parameter_shapes(self):
        K, D, r = self.num_classes, self.num_features, self.rank
        if self.weight_pattern is not None:
            return {"weight": (len(self.weight_pattern),), "bias": (K,)}
        if r is None:
            return {"weight": (K, D), "bias": (K,)}
        return {"weight": (K, r), "bias": (K,), "embedding": (D, r)}

    def init_parameter(self, name, shape, like):
        if name == "weight" and self.weight_loc is not None:
            return self.weight_loc.to(like).clone()
        scale = {"weight": self.init_scale, "bias": self.bias_init_scale}.get(name)
        if scale is None:  # the embedding: h = E^T x of order 1 for standardised x
            scale = self.rank ** -0.5
        value = scale * torch.randn(shape, dtype=like.dtype, device=like.device)
        if name == "bias" and self.bias_init is not None:
            value += self.bias_init.to(value)
        return value

    def check_inputs(self, x, y):
        if not hasattr(x, "shape") or len(x.shape) != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"x must have shape (N, {self.num_features}) (a tensor, a torch sparse "
                             f"matrix or sparse rows), got x of shape {tuple(getattr(x, 'shape', ()))}")
        dtype = getattr(x, "dtype", None)
        if not (isinstance(dtype, torch.dtype) and dtype.is_floating_point):
            raise ValueError(f"x must hold real floating-point numbers, got x of dtype {dtype}")
        if y is not None and (not isinstance(y, torch.Tensor) or tuple(y.shape) != (x.shape[0],)):
            raise ValueError(f"y must be a tensor of shape ({x.shape[0]},), got y of shape "
                             f"{tuple(y.shape) if isinstance(y, torch.Tensor) else type(y).__name__}")
        # full rank with sparse inputs: W's gradients are entry-sparse, so the prior's row
        # gathers must be too (torch cannot add row- and entry-sparse gradients)
        self._entry_grads = self.rank is None and self.sparse and _sparse_layout(x)

    def _gather_rows(self, p, rows):
        if p.dim() == 2 and getattr(self, "_entry_grads", False):
            cols = torch.arange(p.shape[1], device=p.device)
            return gather_entries(p, rows.unsqueeze(-1).expand(-1, p.shape[1]), cols.expand(len(rows), -1))
        return super()._gather_rows(p, rows)

    def prior_scales(self) -> Dict[str, float]:
        r"""The prior standard deviation of each parameter's entries (module docstring):
        s for W and b; :math:`s_f = \sqrt{s}\,r^{-1/4}` for V and E with a rank, so that
        an entry of :math:`W = V E^\top` has the prior variance :math:`r s_f^4 = s^2`.

        Example:

        >>> from pyro_ar.models import LinearClassifier
        >>> from pyro_ar.models.weights import MAP
        >>> LinearClassifier(8, 500, rank=16, weights=MAP(prior_scale=0.25)).prior_scales()
        {'weight': 0.25, 'bias': 0.25, 'embedding': 0.25}
        >>> LinearClassifier(8, 500, weights=MAP(prior_scale=0.25)).prior_scales()
        {'weight': 0.25, 'bias': 0.25}
        """
        s = self.prior_scale
        if self.rank is None:
            return {"weight": s, "bias": s}
        factor = s ** 0.5 * self.rank ** -0.25
        return {"weight": factor, "bias": s, "embedding": factor}

    def _prior(self, name: str, like: torch.Tensor, rows=None):
        """The Normal prior of a parameter's entries (of its ``rows`` for the bias; of its
        entries ``rows`` for a pattern's weight)."""
        loc = like.new_zeros(())
        if name == "weight" and self.weight_loc is not None:
            loc = (self.weight_loc if rows is None else self.weight_loc.index_select(
                0, rows.to(self.weight_loc.device))).to(like)
        if name == "bias" and self.bias_init is not None:
            # select the rows before converting: no O(K) copy (or transfer) per step
            loc = self.bias_init if rows is None else self.bias_init.index_select(0, rows.to(self.bias_init.device))
            loc = loc.to(like)
        # the scale as a tensor made on the device (a Python float would be copied there from
        # the host at every step)
        return dist.Normal(loc, loc.new_full((), self.prior_scales()[name]))

    def parameters(self, like: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
        """As the base class; ``weights="bayes"`` samples each parameter from its own prior
        (:meth:`prior_scales`, the bias around ``bias_init``)."""
        if self.weights != "bayes":
            return super().parameters(like)
        like = torch.zeros(()) if like is None else like
        return {n: pyro.sample(self.prefix + n, self._prior(n, like).expand(shape).to_event(len(shape)))
                for n, shape in self.parameter_shapes().items()}

    def log_prior_estimate(self, params):
        r"""Unbiased estimate of :math:`\sum\log N` over the entries of every parameter under
        its prior (:meth:`prior_scales`): W (or V) and b on one uniform class subsample U,
        :math:`(K/|U|)\sum_{k\in U}`, E on a uniform subsample F of its D rows,
        :math:`(D/|F|)\sum_{j\in F}`, each of ``num_prior_classes`` rows (None: exact)."""
        b = params["bias"]
        total = b.new_zeros(())
        if self.weight_pattern is not None:  # W's entries on a uniform entry subsample
            params = dict(params)
            w = params.pop("weight")
            n = len(w)
            size = min(n, self.num_prior_entries)
            rows = None if size >= n else torch.randint(n, (size,), device=w.device)
            we = w if rows is None else torch.gather(w, 0, rows, sparse_grad=self.sparse)
            if n:  # (an empty pattern: no entries, a log prior of 0)
                total = total + (n / size) * self._prior("weight", b, rows).log_prob(we).sum()
        m = self.num_prior_classes or self.num_negatives
        class_params = ("weight", "bias") if self.penalize_bias else ("weight",)
        for names, n in ((class_params, self.num_classes), (("embedding",), self.num_features)):
            names = [name for name in names if name in params]
            size = n if m is None else min(n, m)
            rows = None if size >= n else sample_without_replacement(n, size, device=b.device)
            for name in names:
                p = params[name] if rows is None else self._gather_rows(params[name], rows)
                total = total + (n / size) * self._prior(name, b, rows).log_prob(p).sum()
        return total

    def minibatch_utility(self, x, params):
        if not isinstance(x, torch.Tensor):  # row-indexable inputs (e.g. the estimator's), all rows
            x = x[torch.arange(len(x))]
        psi = self._linear_utility(x, params, self.sparse)
        if self.utility_mode == "dense" and self.weight_pattern is None:
            return DenseUtility(psi.full())
        return psi

    def _linear_utility(self, x, params, sparse: bool) -> LinearUtility:
        """The lazy utilities of ``x`` under ``params``: W on the pattern, low rank
        (:math:`h = xE`, then the output layer V) or dense."""
        W, b = params["weight"], params["bias"]
        if self.weight_pattern is not None:
            return PatternLinearUtility(x, self.weight_pattern, W, b, sparse=sparse)
        if self.rank is not None:
            return LinearUtility.low_rank(x, W, params["embedding"], b, sparse=sparse)
        return LinearUtility(x, W, b, sparse=sparse)

    def weight_and_bias(self, like: torch.Tensor):
        r"""``(W, b)`` as the model sees them (params, or prior samples for ``"bayes"``;
        with a rank, W is the product :math:`V E^\top`, K x D)."""
        params = self.parameters(like)
        if self.weight_pattern is not None:  # a torch sparse K x D matrix
            return self.weight_pattern.to(params["weight"].device).sparse(params["weight"]), params["bias"]
        W = params["weight"] if self.rank is None else params["weight"] @ params["embedding"].T
        return W, params["bias"]

    def utility(self, x, params: Optional[Dict[str, torch.Tensor]] = None):
        """Lazy utilities of new data under the fitted (or given) parameters ``params``
        (name -> tensor, as :meth:`parameter_shapes`; detached here), for evaluation."""
        params = self.fitted_parameters() if params is None else params
        needed = ["weight", "bias"] + ([] if self.rank is None else ["embedding"])
        missing = [n for n in needed if n not in params]
        if missing:
            raise ValueError(f"params must hold the parameters {needed} of the utilities, missing {missing}")
        return self._linear_utility(x, {n: params[n].detach() for n in needed}, sparse=False)

    def _repr_fields(self):
        fields = {"D": self.num_features, "K": self.num_classes}
        if self.weight_pattern is not None:
            fields["pattern_nnz"] = len(self.weight_pattern)
        return fields if self.rank is None else {**fields, "rank": self.rank}

r"""A neural network body followed by a lazy output layer over K classes.

.. math::  h_n = g_\phi(x_n) \in \mathbb{R}^F, \qquad
           \psi_{nk} = w_k \cdot h_n + b_k, \qquad y_n \sim \text{likelihood}(\psi_n),

where :math:`g_\phi` is any ``torch.nn.Module`` (or :class:`~pyro.nn.PyroModule`) mapping a
minibatch of inputs to feature vectors, and :math:`(W, b)` the K-row output layer.
:class:`NeuralClassifier` is a :class:`~pyro_ar.models.LinearClassifier` on the body's
features: the output layer is a :class:`~pyro_ar.utility.LinearUtility`, so an A&R step
computes the body on the B inputs (O(B cost(g))) and only the rows of W of the labels and
the negatives (O(B s F) instead of O(B K F)); with ``sparse=True`` the gradient of W and b
is row-sparse (use :func:`pyro_ar.optim.lazy_adam`, which also updates the body's dense
parameters). The body's parameters :math:`\phi` are registered in Pyro's param store
(``pyro.module``, names ``"<prefix>body$$$<parameter>"``) on every model call, so the same
SVI step (or :func:`pyro_ar.infer.train`) trains body and output layer jointly. A
``PyroModule`` body registers its own parameters (an unnamed one is named ``"<prefix>body"``,
so its sites read ``"<prefix>body.<parameter>"``); its ``PyroSample`` priors, if any, need a
guide of their own (e.g. an ``AutoNormal`` in an ``AutoGuideList``).

The output layer is maximum likelihood (``weights="mle"``), MAP under
:math:`w_k\sim N(0, s^2 I)` (``"map"``, prior estimated on a class subsample), Bayesian
(``"bayes"``: sample sites for an AutoGuide, O(K F) per step -- for moderate K; at large K
:class:`~pyro_ar.models.BayesianNeuralClassifier` is the same model with the
class-subsampled weight strategy: a step samples only the output rows it touches), or,
a different tool, a variational output layer for the analytic bounds on Gaussian
utilities (``"gaussian"``, seeds/002): a mean-field posterior
:math:`q(w_{kf}) = N(\mu_{kf}, \sigma_{kf}^2)` (params ``weight``, ``bias`` -- the means --
and ``weight_scale_unconstrained``, ``bias_scale_unconstrained``, with :math:`\sigma =
\mathrm{softplus}(\cdot)` applied to the gathered rows only) whose utilities
are Gaussian, :math:`\psi_{nk}\sim N(h_n\cdot\mu_k + \mu_{b_k}, h_n^2\cdot\sigma_k^2 +
\sigma_{b_k}^2)` (:class:`~pyro_ar.likelihoods.GaussianUtility`, both lazy), for a likelihood
that takes them (:class:`~pyro_ar.likelihoods.JaakkolaJordan`,
:class:`~pyro_ar.likelihoods.GaussianBouchard`: no Monte Carlo;
:class:`~pyro_ar.likelihoods.LocalReparameterization`), and the model adds
:math:`-\mathrm{KL}(q\,\|\,p)` as a factor (estimated as :math:`(K/|U|)\sum_{k\in U}\mathrm{KL}_k`
on a uniform class subsample U): the model's log-joint is then the ELBO itself, maximised
with the empty guide (:func:`~pyro_ar.infer.default_guide`) by plain SGD. Every
likelihood of :mod:`pyro_ar.likelihoods` works (AR with any noise, Exact, OVE, Sampled,
Bouchard). For A&R with non-Gumbel noise the default local guide
(:class:`~pyro_ar.infer.local_guides.ConditionalLocalGuide`) refits q from the current
utilities, which runs the body a second time (without gradient) per step.

:class:`NetworkBody` holds what every model with a body shares (registration, checked
features, evaluation in eval mode); :class:`~pyro_ar.models.BayesianNeuralClassifier` is
the other one.
"""

from typing import Optional

import torch

import pyro
from pyro.nn import PyroModule

from ..likelihoods import GaussianUtility
from ..subsets import sample_without_replacement
from ..numerics import softplus, softplus_inverse
from ..utility import LinearUtility, LinearWeights
from .base import check_positive_int
from .linear import LinearClassifier
from .weights import Init, check_init

__all__ = ["NeuralClassifier", "NetworkBody"]


class NetworkBody:
    """What every model with a network body shares (:class:`NeuralClassifier`,
    :class:`~pyro_ar.models.BayesianNeuralClassifier`): the body's registration in Pyro's
    param store, its checked features, its evaluation in eval mode, and inputs that may be
    of any dtype (parameters take the body's dtype and device).

    Example:

    >>> import torch
    >>> from pyro_ar.models import NeuralClassifier
    >>> from pyro_ar.models.neural import NetworkBody
    >>> model = NeuralClassifier(torch.nn.Linear(3, 4), 4, 10)
    >>> isinstance(model, NetworkBody), model.eval_features(torch.zeros(5, 3)).shape
    (True, torch.Size([5, 4]))
    """

    def _init_body(self, body: torch.nn.Module, prefix: str, eval_batch_size: int):
        if not isinstance(body, torch.nn.Module):
            raise ValueError(f"body must be a torch.nn.Module mapping inputs to (N, num_features) "
                             f"features, got body={body!r}")
        if isinstance(body, PyroModule) and not body._pyro_name:
            # an unnamed root PyroModule's sites ("weight", ...) would clash with the output
            # layer's: name it "<prefix>body" (its parameters become "<prefix>body.weight", ...)
            body._pyro_set_supermodule(prefix + "body", body._pyro_context)
        self.body, self.body_name = body, prefix + "body"
        self.eval_batch_size = check_positive_int("eval_batch_size", eval_batch_size)

    def register_body(self) -> torch.nn.Module:
        """Register the body's parameters in Pyro's param store (a ``PyroModule`` does it
        itself when called); values already in the store (e.g. from a checkpoint) are
        loaded into the body."""
        if not isinstance(self.body, PyroModule):
            pyro.module(self.body_name, self.body, update_module_params=True)
        return self.body

    def features(self, x) -> torch.Tensor:
        """The body's features of the inputs ``x``, checked to be ``(N, num_features)``; an
        error of the body on ``x`` (a wrong dtype or width) is re-raised as a ValueError
        naming x's shape and dtype (the body's own error chained)."""
        try:
            h = self.body(x)
        except (RuntimeError, IndexError, TypeError) as e:
            raise ValueError(f"body could not map x of shape {tuple(x.shape)} and dtype {x.dtype} "
                             f"(check x's width and dtype against the body's): "
                             f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e
        if not isinstance(h, torch.Tensor) or h.dim() != 2 or h.shape != (len(x), self.num_features):
            raise ValueError(f"body must map x with {len(x)} rows to features of shape "
                             f"({len(x)}, {self.num_features}), got "
                             f"{tuple(h.shape) if isinstance(h, torch.Tensor) else h!r}")
        return h

    def eval_features(self, x) -> torch.Tensor:
        """The features of new inputs for evaluation: the body in eval mode, without
        gradient, ``eval_batch_size`` rows at a time."""
        was_training = self.body.training
        self.body.eval()
        try:
            with torch.no_grad():
                return torch.cat([self.features(x[i:i + self.eval_batch_size])  # (0 rows: one empty chunk)
                                  for i in range(0, max(len(x), 1), self.eval_batch_size)])
        finally:
            self.body.train(was_training)

    def check_inputs(self, x, y):
        if not isinstance(x, torch.Tensor) or x.dim() < 1:
            raise ValueError(f"x must be a tensor with one row per datapoint, got x={x!r}")
        if y is not None and (not isinstance(y, torch.Tensor) or tuple(y.shape) != (x.shape[0],)):
            raise ValueError(f"y must have shape ({x.shape[0]},), got y of shape "
                             f"{tuple(y.shape) if isinstance(y, torch.Tensor) else y!r}")

    def _like(self, x) -> torch.Tensor:
        """Parameters take the dtype and device of the body (inputs may be integer tokens)."""
        p = next(self.body.parameters(), None)
        if p is not None:
            return torch.zeros((), dtype=p.dtype, device=p.device)
        return super()._like(x)


class NeuralClassifier(NetworkBody, LinearClassifier):
    r"""Pyro model of a network body with a lazy K-class output layer (see the module docstring).

    :param body: a ``torch.nn.Module`` mapping inputs ``x`` (a tensor with N rows) to
        features of shape ``(N, num_features)``.
    :param int num_features: F, the body's output width.
    :param int num_classes: K.
    :param weights: as :class:`~pyro_ar.models.LinearClassifier`'s, or ``"gaussian"`` /
        :class:`~pyro_ar.models.weights.GaussianWeights` (a mean-field Gaussian output layer, for
        a likelihood of Gaussian utilities).
    :param init: an :class:`~pyro_ar.models.weights.Init`: ``scale`` (output weights
        initialised N(0, scale^2), default :math:`1/\sqrt F`), ``bias_scale`` and ``bias``
        (None, or a (K,) tensor added to the initial biases, e.g. the log class frequencies,
        so that the model starts at the unigram model).
    :param int eval_batch_size: rows per body call in :meth:`utility` (evaluation).

    The remaining arguments are those of :class:`~pyro_ar.models.LinearClassifier`
    (``likelihood``, ``subsample_size``, ``sparse``, ``utility``, ...); the string shortcut's
    defaults are LinearClassifier's (:attr:`~pyro_ar.models.linear.LinearClassifier.likelihood_defaults`:
    ``num_negatives="auto"``).

    Example:

    >>> import torch, pyro, pyro_ar as ar
    >>> from pyro_ar.models import NeuralClassifier
    >>> data = ar.datasets.make_linear_teacher(500, 8, 1000, seed=0)
    >>> body = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU())
    >>> model = NeuralClassifier(body, 32, 1000, ar.likelihoods.AR(negatives=10), subsample_size=64, sparse=True)
    >>> svi = pyro.infer.SVI(model, ar.infer.default_guide(model), ar.optim.lazy_adam({"lr": 0.01}),
    ...                      ar.infer.default_elbo())
    >>> before = body[0].weight.detach().clone()
    >>> losses = [svi.step(data.x, data.y) for _ in range(3)]
    >>> bool((body[0].weight != before).any())       # the body is trained by the same step
    True
    >>> model.utility(data.x[:2]).full().shape
    torch.Size([2, 1000])
    """

    input_names = ("x", "y")
    _GAUSSIAN_SCALES = {"weight": "weight_scale_unconstrained", "bias": "bias_scale_unconstrained"}

    def __init__(self, body: torch.nn.Module, num_features: int, num_classes: int, likelihood="ar",
                 weights="mle", subsample_size: Optional[int] = None, sparse: Optional[bool] = None,
                 init: Optional[Init] = None, prefix: str = "", site: str = "y", utility: str = "lazy",
                 eval_batch_size: int = 4096):
        self._init_body(body, prefix, eval_batch_size)
        num_features = check_positive_int("num_features", num_features)
        init = check_init(init, type(self).__name__, self.init_fields)
        if init.scale is None:
            init = init._replace(scale=num_features ** -0.5)
        super().__init__(num_features, num_classes, likelihood=likelihood, weights=weights,
                         subsample_size=subsample_size, sparse=sparse, init=init, prefix=prefix,
                         site=site, utility=utility)
        if self.weights == "gaussian" and not getattr(self.likelihood, "gaussian_utilities", False):
            raise ValueError(f"weights='gaussian' needs a likelihood of Gaussian utilities "
                             f"(JaakkolaJordan, GaussianBouchard, LocalReparameterization), got "
                             f"likelihood={self.likelihood!r}")

    weight_choices = ("mle", "map", "bayes", "gaussian")
    init_fields = ("scale", "bias_scale", "bias")

    # ---- what the base asks for ---------------------------------------------------------
    def parameter_shapes(self):
        shapes = super().parameter_shapes()
        if self.weights == "gaussian":
            shapes.update({s: shapes[n] for n, s in self._GAUSSIAN_SCALES.items()})
        return shapes

    def init_parameter(self, name, shape, like):
        if name in self._GAUSSIAN_SCALES.values():  # posterior sds start at a tenth of the prior's
            sd = torch.full(shape, 0.1 * self.prior_scale, dtype=like.dtype, device=like.device)
            return softplus_inverse(sd)
        return super().init_parameter(name, shape, like)

    def parameters(self, like: Optional[torch.Tensor] = None):
        self.register_body()
        if self.weights != "gaussian":
            return super().parameters(like)
        like = torch.zeros(()) if like is None else like
        params = {n: self.param(n, s, like) for n, s in self.parameter_shapes().items()}
        pyro.factor(self.prefix + "weight_kl", -self.kl_estimate(params))
        return params

    def kl_estimate(self, params) -> torch.Tensor:
        r"""Unbiased estimate of :math:`\mathrm{KL}(q\,\|\,p)` of the Gaussian output layer,
        :math:`\sum_{kf}\log(s/\sigma_{kf}) + (\sigma_{kf}^2+\mu_{kf}^2)/(2s^2) - 1/2` (biases
        alike), from a uniform subsample of ``num_prior_classes`` (default: the negatives') rows."""
        K = self.num_classes
        U = self.num_prior_classes or self.num_negatives or K
        rows = None if U >= K else sample_without_replacement(K, U, device=params["weight"].device)
        total = 0.0
        for n, s in self._GAUSSIAN_SCALES.items():
            mu, raw = params[n], params[s]
            if rows is not None:
                mu, raw = self._gather_rows(mu, rows), self._gather_rows(raw, rows)
            var, prior_var = softplus(raw) ** 2, self.prior_scale ** 2
            total = total + 0.5 * (torch.log(prior_var / var) + (var + mu * mu) / prior_var - 1).sum()
        return total if rows is None else (K / U) * total

    def minibatch_utility(self, x, params):
        h = self.features(x)
        if self.weights != "gaussian":
            return super().minibatch_utility(h, params)
        mean = LinearUtility(h, params["weight"], params["bias"], sparse=self.sparse)
        scales = [params[s] for s in self._GAUSSIAN_SCALES.values()]
        # v_nk = h_n^2 . softplus(rho_k)^2 + softplus(rho_b_k)^2, transforming the gathered rows only
        var = LinearUtility.of(h * h, LinearWeights(*scales, sparse=self.sparse, transform=_softplus_squared))
        return GaussianUtility(mean, var)

    def utility(self, x, params=None):
        """Lazy utilities of new inputs under the fitted (or given) output layer ``params``
        (``{"weight", "bias"}``): the body runs in eval mode without gradient,
        ``eval_batch_size`` rows at a time."""
        h = self.eval_features(x)
        if params is None:
            params = self.fitted_parameters(self._like(x))
        return super().utility(h, {n: params[n] for n in ("weight", "bias")})

    def _repr_fields(self):
        return {"body": type(self.body).__name__, "F": self.num_features, "K": self.num_classes}


def _softplus_squared(rho: torch.Tensor) -> torch.Tensor:
    r""":math:`\mathrm{softplus}(\rho)^2`: a variance from an unconstrained posterior scale."""
    return softplus(rho) ** 2

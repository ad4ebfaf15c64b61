r"""A linear classifier :math:`\psi_n = W x_n + b` with any likelihood of :mod:`pyro_ar.likelihoods`.

Fitted by stock ``pyro.infer.SVI``; the weights are maximum-likelihood parameters
(``weights="mle"``), MAP parameters under :math:`w_k\sim N(0, s^2 I)`, :math:`b_k\sim N(0,s^2)`
(``"map"``, the log-prior estimated on a class subsample, O(subsample) per step) or latent
variables for an AutoGuide (``"bayes"``, O(K D) per step; for large K use
:class:`~pyro_ar.models.BayesianLinearClassifier`). The utilities of a minibatch are lazy
(:class:`~pyro_ar.utility.LinearUtility`: only the rows of W the likelihood asks for are
gathered, with sparse gradients when ``sparse=True``) or dense (one matrix product, the
cheaper choice when K is small).
"""

from typing import Optional

import torch

from ..likelihoods import Bouchard
from ..negatives import get_negative_sampler
from ..utility import DenseUtility, LinearUtility
from .base import CategoricalModel, check_positive_int

__all__ = ["LinearClassifier"]


class LinearClassifier(CategoricalModel):
    r"""Pyro model of a linear classifier with a (subsampled) categorical likelihood.

    :param int num_features: D.
    :param int num_classes: K.
    :param likelihood: a :class:`~pyro_ar.likelihoods.Likelihood` object, or a name
        (``"ar"``, ``"exact"``, ``"ove"``, ``"botev"``, ``"bouchard"``) combined with
        ``noise``, ``num_negatives``, ``strategy`` and ``proposal`` (the string shortcut).
    :param float init_scale: W initialised N(0, init_scale^2) (the authors: 0.1).
    :param float bias_init_scale: b initialised N(0, bias_init_scale^2) (the authors: 0.001).
    :param str utility: ``"lazy"`` (gathers only the rows asked for, O(B s D) per step) or
        ``"dense"`` (all K utilities of the minibatch, O(B K D)).
    :param bouchard_a: ``"local"`` or ``"optimal"`` (string shortcut ``likelihood="bouchard"``).

    The remaining arguments (``weights``, ``prior_scale``, ``subsample_size``, ``sparse``,
    ``prefix``, ``site``) are those of :class:`~pyro_ar.models.base.CategoricalModel`.

    Example:

    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.likelihoods import AR
    >>> from pyro_ar.models import LinearClassifier
    >>> from pyro_ar.negatives import SharedNegatives
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(2000, 8, 500, seed=0)
    >>> model = LinearClassifier(8, 500, likelihood=AR(negatives=SharedNegatives(16)),
    ...                          subsample_size=128, sparse=True)
    >>> svi = SVI(model, model.default_guide(), lazy_adam({"lr": 0.05}), model.default_elbo())
    >>> losses = [svi.step(data.x, data.y) for _ in range(10)]
    >>> model.utility(data.x[:3]).full().shape
    torch.Size([3, 500])
    """

    def __init__(self, num_features: int, num_classes: int, noise="gumbel", likelihood="ar",
                 num_negatives: Optional[int] = None, strategy="per_datapoint", proposal=None,
                 weights="mle", prior_scale: float = 1.0, subsample_size: Optional[int] = None,
                 sparse: bool = False, init_scale: float = 0.1, bias_init_scale: float = 1e-3,
                 prefix: str = "", site: str = "y", utility: str = "lazy",
                 bouchard_a: str = "local"):
        self.num_features = check_positive_int("num_features", num_features)
        if bouchard_a not in ("local", "optimal"):
            raise ValueError(f"bouchard_a must be 'local' or 'optimal', got bouchard_a={bouchard_a!r}")
        if likelihood == "bouchard":  # the string shortcut's extra options
            likelihood = Bouchard(bouchard_a, get_negative_sampler(strategy, num_negatives, proposal),
                                  sparse=sparse)
        super().__init__(num_classes, likelihood, noise=noise, num_negatives=num_negatives,
                         strategy=strategy, proposal=proposal, weights=weights,
                         prior_scale=prior_scale, subsample_size=subsample_size, sparse=sparse,
                         prefix=prefix, site=site)
        if utility not in ("lazy", "dense"):
            raise ValueError(f"utility must be 'lazy' or 'dense', got utility={utility!r}")
        self.utility_mode = utility
        self.init_scale, self.bias_init_scale = init_scale, bias_init_scale

    def parameter_shapes(self):
        K, D = self.num_classes, self.num_features
        return {"weight": (K, D), "bias": (K,)}

    def init_parameter(self, name, shape, like):
        scale = self.init_scale if name == "weight" else self.bias_init_scale
        return scale * torch.randn(shape, dtype=like.dtype, device=like.device)

    def check_inputs(self, x, y):
        if x.dim() != 2 or x.shape[1] != self.num_features:
            raise ValueError(f"x must have shape (N, {self.num_features}), got x of shape {tuple(x.shape)}")
        if y is not None and tuple(y.shape) != (x.shape[0],):
            raise ValueError(f"y must have shape ({x.shape[0]},), got y of shape {tuple(y.shape)}")

    def minibatch_utility(self, x, params):
        W, b = params["weight"], params["bias"]
        if self.utility_mode == "dense":
            return DenseUtility(torch.nn.functional.linear(x, W, b))
        return LinearUtility(x, W, b, sparse=self.sparse)

    def weight_and_bias(self, like: torch.Tensor):
        """``(W, b)`` as the model sees them (params, or prior samples for ``"bayes"``)."""
        params = self.parameters(like)
        return params["weight"], params["bias"]

    def utility(self, x, weight=None, bias=None):
        """Lazy utilities of new data under the fitted (or given) weights (for evaluation)."""
        fitted = {} if weight is not None and bias is not None else self.fitted_parameters()
        W = fitted["weight"] if weight is None else weight
        b = fitted["bias"] if bias is None else bias
        return LinearUtility(x, W.detach(), b.detach())

    def _repr_fields(self):
        return {"D": self.num_features, "K": self.num_classes}

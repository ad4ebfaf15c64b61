r"""A network body with a class-subsampled Bayesian output layer, for large K.

.. math::  h_n = g_\phi(x_n), \qquad \psi_{nk} = w_k\cdot h_n + b_k, \qquad
           w_k\sim N(0, s^2 I_F),\ b_k\sim N(0, s^2), \qquad
           y_n = \arg\max_k(\psi_{nk} + \varepsilon_{nk}),

with the mean-field posterior :math:`q(w_k) = N(\mu_k, \mathrm{diag}\,\sigma_k^2)` over the
K output rows. :class:`BayesianNeuralClassifier` is the
:class:`~pyro_ar.models.BayesianLinearClassifier` of the body's features (the same class
plate, step structure, KL weights and A&R likelihood: see that module for the estimator),
trained with the same guide, :class:`~pyro_ar.infer.ClassSubsampledNormal` (its
W-conditioned closed-form local guide reads the same features). A step samples and updates only the rows of the class subsample
:math:`C = R\cup T\cup\{y_n\}` (negatives, local-guide classes, labels), so its cost is
:math:`O(B\,\mathrm{cost}(g) + |C| F)` whatever K; the body :math:`\phi` is a point
estimate trained by the same SVI step (registered in the param store as ``"body$$$..."``).

The body runs **once** per step: the guide asks for the minibatch's features for its local
q (``minibatch_features(x, idx, for_guide=True)``), and the model of the same step takes
those (matched by the minibatch's inputs; the model computes them itself when it runs
without the guide, e.g. for prediction). Posterior predictive log-likelihoods:
:func:`pyro_ar.infer.predictive_log_likelihood` of :meth:`eval_features`.
"""

from typing import Optional

import torch

from .bayesian_linear import BayesianLinearClassifier
from .neural import NetworkBody

__all__ = ["BayesianNeuralClassifier"]


class BayesianNeuralClassifier(NetworkBody, BayesianLinearClassifier):
    r"""A network body followed by a class-subsampled Bayesian K-class output layer.

    :param body: a ``torch.nn.Module`` mapping inputs ``x`` (a tensor with N rows, any
        dtype) to features ``(N, num_features)``.
    :param int num_features: F, the body's output width.
    :param int num_classes: K.
    :param int eval_batch_size: rows per body call in :meth:`eval_features`.

    The other arguments (``likelihood``, ``num_kl_classes``,
    ``num_eta_classes``, ``stratify``, ``prior_scale``, ``subsample_size``, ``bias``,
    ``site``) are those of :class:`~pyro_ar.models.BayesianLinearClassifier` (its string
    shortcut's defaults too,
    :attr:`~pyro_ar.models.bayesian_linear.BayesianLinearClassifier.likelihood_defaults`). Train with
    :func:`~pyro_ar.infer.default_guide` (a :class:`~pyro_ar.infer.ClassSubsampledNormal`),
    :class:`~pyro_ar.infer.ClosedFormELBO` and :func:`~pyro_ar.optim.lazy_adam`.

    Example:

    >>> import torch
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import ClosedFormELBO, default_guide, predictive_log_likelihood
    >>> from pyro_ar.likelihoods import AR
    >>> from pyro_ar.models import BayesianNeuralClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(500, 8, 5000, seed=0)
    >>> body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh())
    >>> model = BayesianNeuralClassifier(body, 16, 5000, AR(negatives=32), subsample_size=64)
    >>> guide = default_guide(model)
    >>> svi = SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO())
    >>> losses = [svi.step(data.x, data.y) for _ in range(3)]
    >>> guide.last_classes.numel() <= 32 + 32 + 64      # rows touched by the last step
    True
    >>> h = model.eval_features(data.x[:20])            # the body's features, then the posterior
    >>> predictive_log_likelihood(guide, h, data.y[:20], num_samples=4)["log_lik"] < 0
    True
    """

    def __init__(self, body: torch.nn.Module, num_features: int, num_classes: int, likelihood="ar",
                 num_kl_classes: Optional[int] = None, num_eta_classes: Optional[int] = None,
                 stratify: bool = True, prior_scale: float = 1.0,
                 subsample_size: Optional[int] = None, bias: bool = True, site: str = "y",
                 eval_batch_size: int = 4096):
        self._init_body(body, "", eval_batch_size)
        super().__init__(num_features, num_classes, likelihood=likelihood, num_kl_classes=num_kl_classes,
                         num_eta_classes=num_eta_classes, stratify=stratify,
                         prior_scale=prior_scale, subsample_size=subsample_size, bias=bias, site=site)
        self._step_features = None  # (inputs, features) computed by the guide for this step

    def minibatch_features(self, x: torch.Tensor, idx: torch.Tensor, for_guide: bool = False) -> torch.Tensor:
        """The body's features of the minibatch rows ``idx``: computed (and kept) when the
        guide asks, taken by the model of the same step (see the module docstring)."""
        xb = x[idx]
        if for_guide:
            self.register_body()
            self._step_features = (xb, self.features(xb))
            return self._step_features[1]
        kept, self._step_features = self._step_features, None
        if kept is not None and kept[0].shape == xb.shape and torch.equal(kept[0], xb):
            return kept[1]
        return self.features(xb)

    def sample_rows(self, C, like, train):
        """The model's rows of C (the body registered first: its parameters belong to the step)."""
        self.register_body()
        return super().sample_rows(C, self._like(like), train)

    def _repr_fields(self):
        return {"body": type(self.body).__name__, **super()._repr_fields()}


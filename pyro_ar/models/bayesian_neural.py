r"""A network body with a class-subsampled Bayesian output layer, for large K.

.. math::  h_n = g_\phi(x_n), \qquad \psi_{nk} = w_k\cdot h_n + b_k, \qquad
           w_k\sim N(0, s^2 I_F),\ b_k\sim N(0, s^2), \qquad
           y_n = \arg\max_k(\psi_{nk} + \varepsilon_{nk}),

with the mean-field posterior :math:`q(w_k) = N(\mu_k, \mathrm{diag}\,\sigma_k^2)` over the
K output rows. :class:`BayesianNeuralClassifier` is the
:class:`~pyro_ar.models.BayesianLinearClassifier` of the body's features (the same class
plate, step structure, KL weights and A&R likelihood: see that module for the estimator),
and :class:`NeuralClassSubsampledNormal` the matching
:class:`~pyro_ar.infer.ClassSubsampledNormal` (its W-conditioned closed-form local guide
reads the same features). A step samples and updates only the rows of the class subsample
:math:`C = R\cup T\cup\{y_n\}` (negatives, local-guide classes, labels), so its cost is
:math:`O(B\,\mathrm{cost}(g) + |C| F)` whatever K; the body :math:`\phi` is a point
estimate trained by the same SVI step (registered in the param store as ``"body$$$..."``).

The body runs **once** per step: the guide computes the minibatch's features for its local
q and hands them to the model (matched by the minibatch's inputs; the model recomputes
them when it runs without the guide, e.g. for prediction).
"""

from typing import Dict, Optional

import torch

from ..infer.posterior import ClassSubsampledNormal, predictive_log_likelihood
from .bayesian_linear import BayesianLinearClassifier
from .neural import NetworkBody

__all__ = ["BayesianNeuralClassifier", "NeuralClassSubsampledNormal"]


class BayesianNeuralClassifier(NetworkBody, BayesianLinearClassifier):
    r"""A network body followed by a class-subsampled Bayesian K-class output layer.

    :param body: a ``torch.nn.Module`` mapping inputs ``x`` (a tensor with N rows, any
        dtype) to features ``(N, num_features)``.
    :param int num_features: F, the body's output width.
    :param int num_classes: K.
    :param int eval_batch_size: rows per body call in :meth:`eval_features`.

    The other arguments (``noise``, ``likelihood``, ``num_negatives``, ``num_kl_classes``,
    ``num_eta_classes``, ``stratify``, ``prior_scale``, ``subsample_size``, ``bias``,
    ``site``) are those of :class:`~pyro_ar.models.BayesianLinearClassifier`. Train with
    :meth:`default_guide` (a :class:`NeuralClassSubsampledNormal`),
    :class:`~pyro_ar.infer.ClosedFormELBO` and :func:`~pyro_ar.optim.lazy_adam`.

    Example:

    >>> import torch
    >>> from pyro.infer import SVI
    >>> from pyro_ar.datasets import make_linear_teacher
    >>> from pyro_ar.infer import ClosedFormELBO
    >>> from pyro_ar.models import BayesianNeuralClassifier
    >>> from pyro_ar.optim import lazy_adam
    >>> data = make_linear_teacher(500, 8, 5000, seed=0)
    >>> body = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh())
    >>> model = BayesianNeuralClassifier(body, 16, 5000, num_negatives=32, subsample_size=64)
    >>> guide = model.default_guide()
    >>> svi = SVI(model, guide, lazy_adam({"lr": 0.01}), ClosedFormELBO())
    >>> losses = [svi.step(data.x, data.y) for _ in range(3)]
    >>> guide.last_classes.numel() <= 32 + 32 + 64      # rows touched by the last step
    True
    >>> model.predictive_log_likelihood(guide, data.x[:20], data.y[:20], num_samples=4)["log_lik"] < 0
    True
    """

    def __init__(self, body: torch.nn.Module, num_features: int, num_classes: int, noise="gumbel",
                 likelihood="ar", num_negatives: Optional[int] = None,
                 num_kl_classes: Optional[int] = None, num_eta_classes: Optional[int] = None,
                 stratify: bool = True, prior_scale: float = 1.0,
                 subsample_size: Optional[int] = None, bias: bool = True, site: str = "y",
                 eval_batch_size: int = 4096):
        self._init_body(body, "", eval_batch_size)
        super().__init__(num_features, num_classes, noise=noise, likelihood=likelihood,
                         num_negatives=num_negatives, num_kl_classes=num_kl_classes,
                         num_eta_classes=num_eta_classes, stratify=stratify,
                         prior_scale=prior_scale, subsample_size=subsample_size, bias=bias, site=site)
        self._step_features = None  # (inputs, features) computed by the guide for this step

    def step_features(self, xb: torch.Tensor) -> torch.Tensor:
        """The body's features of the minibatch inputs ``xb``, computed by the guide and kept
        for the model of the same step (which takes them with :meth:`minibatch_features`)."""
        self.register_body()
        h = self.features(xb)
        self._step_features = (xb, h)
        return h

    def minibatch_features(self, x: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        xb = x[idx]
        kept, self._step_features = self._step_features, None
        if kept is not None and kept[0].shape == xb.shape and torch.equal(kept[0], xb):
            return kept[1]
        return self.features(xb)

    def __call__(self, x: torch.Tensor, y: Optional[torch.Tensor] = None):
        self.register_body()
        return super().__call__(x, y)

    def sample_rows(self, C, like, train):
        return super().sample_rows(C, self._like(like), train)

    def default_guide(self, **kwargs) -> "NeuralClassSubsampledNormal":
        """A :class:`NeuralClassSubsampledNormal` of this model (``kwargs`` go to it)."""
        return NeuralClassSubsampledNormal(self, **kwargs)

    def predictive_log_likelihood(self, guide: ClassSubsampledNormal, x: torch.Tensor,
                                  y: torch.Tensor, **kwargs) -> Dict:
        """:func:`pyro_ar.infer.predictive_log_likelihood` of the inputs ``x`` (through the
        body, :meth:`eval_features`) under the guide's posterior over the output layer."""
        self.check_inputs(x, y)
        return predictive_log_likelihood(guide, self.eval_features(x), y, self.noise, **kwargs)

    def _repr_fields(self):
        return {"body": type(self.body).__name__, **super()._repr_fields()}


class NeuralClassSubsampledNormal(ClassSubsampledNormal):
    r""":class:`~pyro_ar.infer.ClassSubsampledNormal` for a :class:`BayesianNeuralClassifier`:
    the same mean-field rows, and the W-conditioned local guide :math:`q(\varepsilon_n\mid W)`
    computed from the body's features of the minibatch (shared with the model's step).

    Example:

    >>> import torch
    >>> from pyro_ar.models import BayesianNeuralClassifier
    >>> model = BayesianNeuralClassifier(torch.nn.Linear(3, 4), 4, 100, num_negatives=8)
    >>> type(model.default_guide()).__name__
    'NeuralClassSubsampledNormal'
    """

    def __init__(self, model: BayesianNeuralClassifier, **kwargs):
        if not isinstance(model, BayesianNeuralClassifier):
            raise ValueError(f"NeuralClassSubsampledNormal needs a BayesianNeuralClassifier model, "
                             f"got model={model!r}")
        super().__init__(model, **kwargs)

    def _local(self, xb, labels, C, W, b, T):
        return super()._local(self.ar_model.step_features(xb), labels, C, W, b, T)

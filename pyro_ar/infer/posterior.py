r"""Class-subsampled posteriors over the rows of W and b, and their posterior predictive.

:class:`ClassSubsampledNormal` is the mean-field Gaussian guide
:math:`q(w_k) = N(\mu_k, \mathrm{diag}\,\sigma_k^2)`, :math:`q(b_k) = N(m_k, \tau_k^2)` of
:class:`~pyro_ar.models.BayesianLinearClassifier` (the model's docstring derives the
class-subsampled ELBO). Per step only the rows of the class plate's subsample C are gathered
(sparse gradients) and transformed (softplus), so no step does O(K) work. With
``local="conditional"`` it also guides the noise sites with the W-conditioned
:math:`q(\varepsilon_n\mid W) = \mathrm{Gumbel}(\log\eta_n(W), 1)`,

.. math::
    \eta_n(W) = 1 + \sum_{k\in L\setminus y_n} e^{\psi_{nk} - \psi_{ny}}
        + \frac{K}{|T|}\sum_{k\in T\setminus L} e^{\psi_{nk} - \psi_{ny}},

(for other noises a local fit of the optimal :math:`q(\varepsilon_n\mid W)`, the Laplace
approximation by default; both from :func:`~pyro_ar.infer.local_fit.local_q`).

The posterior predictive averages over draws :math:`W_s \sim q`:
:math:`p(y\mid x) \approx \frac1S\sum_s p(y\mid x, W_s)`.
"""

import contextlib
import math
from typing import Callable, Dict, Optional, Sequence, Tuple, Union

import torch
import torch.nn.functional as F

import pyro
import pyro.distributions as dist
import pyro.poutine as poutine
from pyro.infer.autoguide import AutoGuide
from pyro.nn import PyroParam

from ..evaluation import linear_source, log_likelihood, predict_proba
from ..models.bayesian_linear import BayesianLinearClassifier, ClassPlate, ClassSubsampledWeights
from ..noise import Noise
from ..utility import LinearUtility
from .local_fit import check_local_fit, local_q

__all__ = [
    "ClassSubsampledNormal",
    "predictive_log_likelihood",
    "predictive_probs",
    "predictive_top_k",
    "posterior_summary",
]

_SOFTPLUS_INV = lambda s: math.log(math.expm1(s)) if s < 30 else s  # noqa: E731


class ClassSubsampledNormal(AutoGuide):
    r"""Mean-field Gaussian guide over the rows of W and b, touching only the step's rows.

    :math:`q(w_k) = N(\mu_k, \mathrm{diag}(\sigma_k^2))`, :math:`q(b_k) = N(m_k, \tau_k^2)`,
    :math:`\sigma = \mathrm{softplus}(u)`, all stored unconstrained as (K, D) / (K,)
    parameters and gathered for the class plate's subsample only.

    :param model: a model with the class-subsampled weight strategy
        (:class:`~pyro_ar.models.bayesian_linear.ClassSubsampledWeights`): a
        :class:`BayesianLinearClassifier` or :class:`~pyro_ar.models.BayesianNeuralClassifier`.
    :param local: ``"conditional"`` (default): also guide the noise site with
        :math:`q(\varepsilon_n\mid W)` (Gumbel(log eta_n(W), 1) for softmax, the local fit
        ``fit`` otherwise; see the module doc); ``None``: leave it to another local
        guide in an ``AutoGuideList(model, create_plates=model.create_plates)``.
    :param float init_scale: initial :math:`\sigma` (> 0). Rows are updated only when their
        class is in a step's subsample, so with many rare classes the initial scale matters:
        small values leave data-poor rows too narrow, the prior's scale leaves data-rich rows
        too wide for longer; a value of the order of half the prior scale is a good start
        (see ``tutorials/04_bayesian_weights.py``, part B).
    :param float init_loc_scale: initial :math:`\mu \sim N(0, \text{init\_loc\_scale}^2)` (0: zeros).
    :param bool sparse: sparse gradients for the row gathers (use :func:`pyro_ar.optim.lazy_adam`).
    :param str fit: the local fit of a noise without a closed form
        (:data:`~pyro_ar.infer.local_fit.LOCAL_FITS`): ``"laplace"`` (default, a Normal q),
        ``"gumbel"`` or ``"gaussian"`` (:func:`~pyro_ar.infer.local_fit.local_q`).
    :param int newton_steps: Newton iterations to the Laplace point (non-Gumbel noise).
    :param int refine_steps: Newton steps of ``fit="gumbel"`` / ``"gaussian"`` from it.
    :param create_plates: defaults to ``model.create_plates``.
    :param str name: prefix of the parameter names (default ``"ClassSubsampledNormal"``).

    Example:

    >>> import torch, pyro, pyro_ar as ar
    >>> from pyro_ar.models import BayesianLinearClassifier
    >>> model = BayesianLinearClassifier(8, 10_000, likelihood=ar.likelihoods.AR(negatives=32), subsample_size=128)
    >>> guide = ar.infer.ClassSubsampledNormal(model)
    >>> data = ar.datasets.make_linear_teacher(2000, 8, 10_000, seed=0)
    >>> optim, elbo = ar.optim.lazy_adam({"lr": 0.05}), ar.infer.ClosedFormELBO()
    >>> loss = pyro.infer.SVI(model, guide, optim, elbo).step(data.x, data.y)   # one step
    >>> lo, hi = guide.credible_interval(torch.tensor([0, 1]), level=0.9)   # rows of W
    >>> lo.shape
    torch.Size([2, 8])
    """

    def __init__(self, model: BayesianLinearClassifier, local: Optional[str] = "conditional",
                 init_scale: float = 0.1, init_loc_scale: float = 0.0, sparse: bool = True,
                 newton_steps: int = 8, create_plates: Optional[Callable] = None,
                 name: Optional[str] = None, fit: str = "laplace", refine_steps: int = 1) -> None:
        if not isinstance(getattr(model, "weight_strategy", None), ClassSubsampledWeights):
            raise ValueError(f"ClassSubsampledNormal needs a model with the class-subsampled weight "
                             f"strategy (ClassSubsampledWeights: a BayesianLinearClassifier or "
                             f"BayesianNeuralClassifier), got model={model!r}")
        if local not in ("conditional", None):
            raise ValueError(f"local must be 'conditional' or None, got local={local!r}")
        if not (isinstance(init_scale, (int, float)) and init_scale > 0):
            raise ValueError(f"init_scale must be > 0, got init_scale={init_scale!r}")
        if not init_loc_scale >= 0:
            raise ValueError(f"init_loc_scale must be >= 0, got init_loc_scale={init_loc_scale!r}")
        self.local = local if model.likelihood.has_local_latent else None
        self.init_scale, self.init_loc_scale = float(init_scale), float(init_loc_scale)
        self.sparse, self.newton_steps = sparse, int(newton_steps)
        self.fit, self.refine_steps = check_local_fit(fit), int(refine_steps)
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
        if not isinstance(classes, ClassPlate) or classes.model is not self._ar_model:
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

    def forward(self, x: torch.Tensor, y: Optional[torch.Tensor] = None) -> Dict[str, torch.Tensor]:
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
                xb = model.minibatch_features(x, idx, for_guide=True)
                result[model.eps_site] = self._local(xb, y[idx], C, W, b, classes.eta_classes)
        return result

    # ---------------------------------------------------------------- local guide
    def _local(self, xb, labels, C, W, b, T):
        r"""q(eps | W): :func:`~pyro_ar.infer.local_fit.local_q` of the class terms
        :math:`d_j = \psi_y - \psi_{k_j}` with the step's eta weights (exactly
        ``Gumbel(log eta_n(W), 1)`` for Gumbel noise, else the local fit ``fit``)."""
        model = self._ar_model
        st = model.step_structure(C, labels, eta_classes=T if model.subsampled else None)
        # the label's utility (B, 1) and the eta classes' (B, j), from the rows of C drawn
        psi_y, psi_e = LinearUtility(xb, W, b).gather_label_and_shared(st.label_pos, st.eta_index)
        d = psi_y - psi_e                                                 # psi_y - psi_k
        q, infer = local_q(model.noise, d, st.eta_weight.to(d.dtype), fit=self.fit,
                           newton_steps=self.newton_steps, refine_steps=self.refine_steps)
        return pyro.sample(model.eps_site, self._local_distribution(q), infer=infer)

    def _row_distribution(self, loc, scale, classes):
        """q of the gathered rows (override to control the draws, e.g. common random numbers)."""
        return dist.Normal(loc, scale)

    def _local_distribution(self, q):
        """q(eps | W) as :func:`~pyro_ar.infer.local_fit.local_q` gives it (override to control
        the draws)."""
        return q

    # ---------------------------------------------------------------- posterior access
    @torch.no_grad()
    def loc_and_scale(self, classes: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, ...]:
        r"""(:math:`\mu`, :math:`\sigma`, :math:`m`, :math:`\tau`) for the given classes (default all)."""
        if classes is None:
            classes = torch.arange(self._ar_model.num_classes, device=self.weight_loc.device)
        loc, scale, bloc, bscale = self._rows(classes)
        return loc, scale, bloc, bscale

    @torch.no_grad()
    def sample_weights(self, num_samples: int, classes: Optional[torch.Tensor] = None,
                       generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
        """Posterior draws of the rows of ``classes`` (default all): ``(S, m, D)``, ``(S, m)``."""
        loc, scale, bloc, bscale = self.loc_and_scale(classes)
        # drawn where the generator lives (without one: on the parameters' device, no transfer)
        at = dict(generator=generator, dtype=loc.dtype, device=loc.device if generator is None else generator.device)
        W = loc + scale * torch.randn((num_samples,) + loc.shape, **at).to(loc.device)
        b = None
        if bloc is not None:
            b = bloc + bscale * torch.randn((num_samples,) + bloc.shape, **at).to(loc.device)
        return W, b

    @torch.no_grad()
    def credible_interval(self, classes: torch.Tensor, features: Optional[torch.Tensor] = None,
                          level: float = 0.9) -> Tuple[torch.Tensor, torch.Tensor]:
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

    def median(self, *args, **kwargs) -> Dict[str, torch.Tensor]:
        loc, _, bloc, _ = self.loc_and_scale()
        out = {"weight": loc}
        if bloc is not None:
            out["bias"] = bloc
        return out

    def quantiles(self, quantiles: Sequence[float], *args, **kwargs) -> Dict[str, torch.Tensor]:
        loc, scale, bloc, bscale = self.loc_and_scale()
        q = torch.as_tensor(quantiles, dtype=loc.dtype, device=loc.device)
        z = dist.Normal(torch.zeros((), dtype=loc.dtype), 1.0).icdf(q)
        out = {"weight": loc + z.reshape((-1, 1, 1)) * scale}
        if bloc is not None:
            out["bias"] = bloc + z.reshape((-1, 1)) * bscale
        return out


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


def _draw_probs(x, W, b, noise):
    """``p(. | x, W_s)`` (N, K), float64, for each draw s of ``W`` (S, K, D), one at a time."""
    for s in range(W.shape[0]):
        yield predict_proba(linear_source(x, W[s], None if b is None else b[s]), noise)


#: a fitted posterior over (W, b): the guide, or a dict of draws ``{"weight": (S, K, D), "bias": (S, K)}``
Posterior = Union[ClassSubsampledNormal, Dict[str, torch.Tensor]]


@torch.no_grad()
def predictive_log_likelihood(posterior: Posterior, x: torch.Tensor, y: torch.Tensor,
                              noise: Union[str, Noise] = "gumbel", num_samples: int = 100,
                              chunk_size: int = 256, generator: Optional[torch.Generator] = None,
                              return_pointwise: bool = False) -> Dict:
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
    lp = log_likelihood(linear_source(x, W, b), y, noise, chunk_size=chunk_size, reduce="none")
    out = {"log_lik": lp.mean().item()}
    if return_pointwise:
        out["pointwise"] = lp
    return out


@torch.no_grad()
def predictive_probs(posterior: Posterior, x: torch.Tensor, noise: Union[str, Noise] = "gumbel",
                     num_samples: int = 100,
                     generator: Optional[torch.Generator] = None) -> Tuple[torch.Tensor, torch.Tensor]:
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
    mean = sq = 0.0
    for p in _draw_probs(x, W, b, noise):  # one draw at a time: O(N K) memory
        mean, sq = mean + p, sq + p * p
    S = W.shape[0]
    mean = mean / S
    return mean, (sq / S - mean ** 2).clamp(min=0).sqrt()


@torch.no_grad()
def predictive_top_k(posterior: Posterior, x: torch.Tensor, k: int = 5, noise: Union[str, Noise] = "gumbel",
                     num_samples: int = 100, level: float = 0.9,
                     generator: Optional[torch.Generator] = None) -> Dict[str, torch.Tensor]:
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
    probs = [p for W, b in draws() for p in _draw_probs(x, W, b, noise)]
    mean = sum(probs) / num_samples
    top = mean.topk(k, -1)
    chosen = torch.stack([p.gather(-1, top.indices) for p in probs])  # (S, N, k)
    q = torch.tensor([0.5 - level / 2, 0.5 + level / 2], dtype=chosen.dtype, device=chosen.device)
    lo, hi = torch.quantile(chosen, q, dim=0)
    return {"classes": top.indices, "mean": top.values, "sd": chosen.std(0), "lower": lo, "upper": hi}


def posterior_summary(posterior: Posterior, num_samples: Optional[int] = None) -> Dict[str, torch.Tensor]:
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




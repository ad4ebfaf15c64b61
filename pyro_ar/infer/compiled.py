r"""A trace-free ``SVI.step`` for the library's own A&R softmax model and guide (issue 37).

``SVI.step`` with :class:`~pyro_ar.infer.ClosedFormELBO` builds two traces per step (the
guide's, then the model's replayed on it), runs every site through Pyro's handler stack and
sums the ELBO over the trace nodes. For one pairing the sites and their terms are known in
advance: a :class:`~pyro_ar.models.LinearClassifier`, :class:`~pyro_ar.models.BigramLanguageModel`
or :class:`~pyro_ar.models.NeuralClassifier` (its body a plain ``torch.nn.Module``, registered
through ``pyro.module`` as the traced step does) with per-class point weights
(``weights="mle"``, no ``sample_weight``) and the A&R softmax likelihood, guided by its own
:class:`~pyro_ar.infer.GumbelLocalGuide` (natural eta step) on the model's data plate. There
the step's loss is

.. math::

    -\mathrm{ELBO} = \frac{N}{B}\sum_{n\in\text{batch}}\Big[\mathrm{KL}\big(\mathrm{Gumbel}(\log\eta_n, 1)
        \,\|\,\mathrm{Gumbel}(0, 1)\big) + \hat S_{y_n}/\eta_n\Big],

and :func:`compiled_loss_and_grads` computes it by calling the same pieces the traced step
calls, in the same order and with the same class subsample -- the model's checks, its
parameters (through ``pyro.param``, so ``SVI`` still collects them for the optimizer and the
param store's current values are read at every step), its minibatch utility, the guide's
:math:`q(\varepsilon)` and natural step, :class:`~pyro_ar.distributions.GumbelExpectedFactor`
and the registered Gumbel--Gumbel KL -- without the traces, and without the traced step's
draw of the noise :math:`\varepsilon \sim q` (the bound integrates it out; the traced step
reads only its shape). Given the same data and class subsamples, the loss, the gradients and
the eta step are those of the traced step (``tests/infer/test_compiled.py`` checks them equal).

Anything else takes the traced path: another model or guide (a user's), a subclass of the
model or guide classes, other likelihoods or weights, ``sample_weight``, several particles,
Pyro validation on (the traced path checks shapes and the model/guide match), the guide's
first call (it sets itself up from a traced model run), or any Pyro handler around the step
other than ``SVI``'s own parameter capture (``poutine.scale``, ``condition``, a user's
trace...). Nothing is cached between steps: each call re-reads the
model, the guide and the param store.
"""

import torch

from pyro.infer.util import is_validation_enabled, torch_item
from pyro.nn import PyroModule
from pyro.poutine.runtime import _PYRO_STACK
from pyro.poutine.trace_messenger import TraceMessenger
from pyro.util import warn_if_nan

from ..distributions import AugmentedCategorical, FastGumbel, GumbelExpectedFactor
from ..distributions.augmented import INFER_KEY, _noise_prior
from ..distributions.expected_factor import optimal_log_eta
from ..likelihoods import AR
from ..models.base import PerClassWeights, take_rows
from ..models.bigram import BigramLanguageModel
from ..models.linear import LinearClassifier
from ..models.neural import NeuralClassifier
from ..subsets import sample_without_replacement
from .local_fit import unit_gumbel_optimum
from .local_guides import GumbelLocalGuide

__all__ = ["compiled_loss_and_grads"]

#: the model classes whose step the compiled path reproduces (exactly these: a subclass may
#: emit other sites); a NeuralClassifier only with a plain ``torch.nn.Module`` body (a
#: ``PyroModule`` body may hold priors, sample sites of its own)
_MODELS = (LinearClassifier, BigramLanguageModel, NeuralClassifier)


def _plain_body(model) -> bool:
    """The model has no network body, or one that emits no Pyro sites of its own."""
    body = getattr(model, "body", None)
    return body is None or not any(isinstance(m, PyroModule) for m in body.modules())


def _only_param_capture() -> bool:
    """No Pyro handler is active but ``SVI.step``'s ``poutine.trace(param_only=True)``."""
    return all(type(m) is TraceMessenger and m.param_only for m in _PYRO_STACK)


def _site(elbo, model, guide, args, kwargs):
    """(noise site name, its guide record) when the compiled step applies, else None."""
    if len(args) == 3 and args[2] is None:  # (sample_weight=None, positional)
        args = args[:2]
    if any(v is not None or k != "sample_weight" for k, v in kwargs.items()) or len(args) != 2 \
            or not isinstance(args[0], torch.Tensor) or not isinstance(args[1], torch.Tensor):
        return None
    if elbo.num_particles != 1 or is_validation_enabled() or not _only_param_capture():
        return None
    if not (type(model) in _MODELS and isinstance(model.weight_strategy, PerClassWeights) and model.weights == "mle"
            and type(model.likelihood) is AR and unit_gumbel_optimum(model.likelihood.noise)
            and _plain_body(model)):
        return None
    if not (type(guide) is GumbelLocalGuide and guide.local_step == "natural"
            and guide.prototype_trace is not None and guide.model is model
            and guide.create_plates == model.create_plates):
        return None
    name = model.site + "_eps"
    info = guide._sites.get(name)
    if len(guide._sites) != 1 or info is None or info["plate"] != "data" or info["num_data"] != len(args[0]):
        return None
    return name, info


def _data_rows(model, x, y):
    """The data plate's rows and scale (``CategoricalModel.data_plate`` without the plate):
    the B indices the guide's plate would draw (None: every row), after the same checks."""
    model.check_call(x, y)
    N, B = len(x), model.batch_size(x, y)
    rows = None if B is None or B >= N else sample_without_replacement(N, B, device=x.device)
    model.check_minibatch(x, y, rows)
    return rows, 1.0 if rows is None else N / B


def compiled_loss_and_grads(elbo, model, guide, args, kwargs):
    """``elbo.loss_and_grads(model, guide, *args, **kwargs)`` without traces when the pairing
    is the library's (see the module docstring): the loss (a float) after the backward pass and
    the natural eta step; None when it does not apply (the caller takes the traced path).

    Example:

    >>> import pyro, pyro_ar as ar
    >>> from pyro_ar.infer import ClosedFormELBO, default_guide
    >>> from pyro_ar.infer.compiled import compiled_loss_and_grads
    >>> data = ar.datasets.make_linear_teacher(200, 3, 20, seed=0)
    >>> model = ar.LinearClassifier(3, 20, likelihood=ar.likelihoods.AR(negatives=4), subsample_size=16, sparse=True)
    >>> guide, elbo = default_guide(model), ClosedFormELBO()
    >>> with pyro.validation_enabled(False):
    ...     first = compiled_loss_and_grads(elbo, model, guide, (data.x, data.y), {})  # guide not set up
    ...     svi = pyro.infer.SVI(model, guide, ar.optim.lazy_adam({"lr": 0.01}), elbo)
    ...     losses = [svi.step(data.x, data.y) for _ in range(3)]   # traced once, then compiled
    ...     again = compiled_loss_and_grads(elbo, model, guide, (data.x, data.y), {})
    >>> first is None, isinstance(again, float)
    (True, True)
    """
    found = _site(elbo, model, guide, args, kwargs)
    if found is None:
        return None
    name, info = found
    x, y = args[:2]
    N = len(x)
    # the guide: the data plate's rows and q(eps) for them; eps itself is integrated out in
    # closed form (the traced step draws it and reads only its shape: here q's location
    # stands in, no draw)
    rows, scale = _data_rows(model, x, y)
    idx = torch.arange(N, device=x.device) if rows is None else rows
    with guide._pyro_context:  # (as guide(...) does: its PyroParams read through pyro.param)
        q, infer = guide._site_distribution(name, info, idx.to(info["device"]), x, y)
    record = infer[INFER_KEY]
    eps = q.loc
    # the model: its parameters (pyro.param: SVI collects them), utility and likelihood
    params = model.parameters(model._like(x))
    psi = model.minibatch_utility(take_rows(x, rows), params)
    nz = model.likelihood.noise
    prior = _noise_prior(nz, psi.dtype, psi.device, psi.batch_shape)
    base = AugmentedCategorical(psi, eps, nz, model.likelihood.sampler, eps_site=name)
    local_first = record.local_first
    factor = GumbelExpectedFactor(base, q.loc.expand(base.batch_shape), record.natural_step if local_first else None)
    log_factor = factor.log_prob(take_rows(y, rows)) * scale
    if local_first:  # q(eps) at the updated eta, for the KL too
        q = FastGumbel(factor.updated_log_eta.reshape(q.batch_shape), 1.0)
    else:
        record.natural_step(optimal_log_eta(factor.last_log_s))  # eta~ = 1 + S_hat, in log space
    kl = torch.distributions.kl_divergence(q, prior) * scale
    elbo_value = (0 - kl.sum()) + log_factor.sum()
    loss = -torch_item(elbo_value)
    surrogate = -elbo_value
    if surrogate.requires_grad:
        surrogate.backward(retain_graph=elbo.retain_graph)
    warn_if_nan(loss, "loss")
    return loss

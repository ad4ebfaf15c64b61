r"""Optimizers whose steps touch only the rows a sparse gradient names.

With :class:`~pyro_ar.utility.LinearUtility` (``sparse=True``) and the local guides of
:mod:`pyro_ar.infer`, gradients of a K x D weight matrix or of per-datapoint local
parameters are sparse: only the rows used in the step are non-zero. The optimizers here
update exactly those rows ("lazy" updates) and keep per-row step counts, so a step costs
O(rows used), whatever K or N. Dense gradients get the usual dense update, so one
optimizer serves every parameter of a model.

* :class:`LazyAdam` -- Adam (Kingma & Ba, 2015) with per-row bias correction.
* :class:`ADVIStepSize` -- the adaptive step-size sequence of Kucukelbir et al. (2017,
  eqs. 10-11) used by the A&R authors:
  :math:`G \leftarrow \alpha g^2 + (1-\alpha) G` (:math:`G = g^2` at a row's first step),
  :math:`\theta \leftarrow \theta + \eta\, \lambda^{\lfloor t/T\rfloor} t^{-1/2}\, g / (1 + \sqrt{G})`
  (here a descent step on the loss), with the decay :math:`\lambda = 0.9` every
  :math:`T = 2000` steps of the optimizer.

Entry-sparse gradients. A gradient that is sparse in *every* dimension of a parameter
(a COO tensor whose ``sparse_dim()`` equals the parameter's ``dim()`` >= 2, e.g. that of
:class:`~pyro_ar.utility.LinearUtility` with a sparse input: only the (class, feature)
entries used) is applied entry by entry: the parameter, its moments and a per-entry step
count ``entry_step`` (int32, created at the parameter's first such gradient from its per-row
counts) are viewed flat, each entry a "row" of the same update, so a step costs
O(entries used) and leaves every other entry -- value and state -- untouched. Memory: the
optimizer state of such a parameter is three tensors of its shape (Adam: two moments and
the step counts). Row-sparse and dense gradients of that parameter keep working (their
rows' entries all step).

Use them in Pyro through :class:`pyro.optim.PyroOptim` (helpers :func:`lazy_adam`,
:func:`advi_step_size`); per-parameter options (e.g. a separate local step size) come
from Pyro's callable ``optim_args``.
"""

import torch
import torch.optim.optimizer as _torch_optimizer
from torch.optim import Optimizer

from pyro.optim import PyroOptim

__all__ = ["LazyAdam", "ADVIStepSize", "lazy_adam", "advi_step_size"]


def _rows_and_values(grad):
    """(row indices, gradient rows) of a sparse gradient, duplicates summed."""
    grad = grad.coalesce()
    return grad.indices()[0], grad.values()


def _row_view(t):
    """View a tensor as rows: 0-d -> (1,), 1-d -> (n,), else (n, ...)."""
    return t.reshape(1) if t.dim() == 0 else t


def _is_entry_sparse(p, grad) -> bool:
    """A gradient sparse in every dimension of a parameter of >= 2 dimensions."""
    return grad.is_sparse and p.dim() >= 2 and grad.sparse_dim() == p.dim()


def _entry_state(p, state):
    """Switch a parameter's state to per-entry step counts (from its per-row ones)."""
    if "entry_step" not in state:
        counts = state.pop("row_step").to(torch.int32)
        state["entry_step"] = counts.reshape((-1,) + (1,) * (p.dim() - 1)).expand(p.shape).clone()


def _flat_view(p, grad, state):
    """(param, rows, grad rows, state) as flat views: every entry a row (entry mode)."""
    flat = {k: (v.reshape(-1) if isinstance(v, torch.Tensor) else v) for k, v in state.items()}
    flat["row_step"] = flat.pop("entry_step")
    if grad.is_sparse:
        grad = grad.coalesce()
        idx, vals = grad.indices(), grad.values()
        # flat index of each sparse entry (or row) start; the strides as Python ints (a tensor
        # of them would be a host-to-device copy at every step)
        starts = sum(idx[i] * s for i, s in enumerate(p.stride()[:grad.sparse_dim()]))
        if grad.sparse_dim() < p.dim():  # row-sparse: every entry of the rows present
            width = vals[0].numel() if len(vals) else 1
            starts = (starts.unsqueeze(-1) + torch.arange(width, device=p.device)).reshape(-1)
        return p.view(-1), starts, vals.reshape(-1), flat
    return p.view(-1), None, grad.reshape(-1), flat


class _LazyOptimizer(Optimizer):
    """Shared row bookkeeping: per-row step counts, dense or sparse gradients."""

    def _row_update(self, p, rows, grad_rows, state, group, shared):
        raise NotImplementedError

    def _init_state(self, p, state):
        raise NotImplementedError

    def add_param_group(self, param_group):
        """torch's ``Optimizer.add_param_group`` without its ``torch._disable_dynamo`` wrapper,
        whose first call imports ``torch._dynamo`` (about 1.6 CPU s, once per process, in the
        first fit of a fresh process): these optimizers are never compiled."""
        plain = getattr(Optimizer.add_param_group, "__wrapped__", Optimizer.add_param_group)
        return plain(self, param_group)

    def load_state_dict(self, state_dict):
        """Load a :meth:`state_dict`, keeping the step counts ``row_step`` int64 (``entry_step`` int32).

        ``torch.optim.Optimizer.load_state_dict`` casts every state tensor except ``step``
        to the parameter's dtype; a float ``row_step`` breaks the next sparse step
        (``index_add_`` with int64 ones) and would round counts above 2^24 in float32.
        """
        super().load_state_dict(state_dict)
        saved_ids = [i for group in state_dict["param_groups"] for i in group["params"]]
        params = [p for group in self.param_groups for p in group["params"]]
        for i, p in zip(saved_ids, params):
            saved = state_dict["state"].get(i, {})
            for name, dtype in (("row_step", torch.long), ("entry_step", torch.int32)):
                if saved.get(name) is not None:
                    self.state[p][name] = saved[name].to(device=p.device, dtype=dtype, copy=True)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        self._update()
        return loss

    def _has_step_hooks(self) -> bool:
        """Whether stepping through :meth:`step` (torch's wrapper) would run any hook."""
        return bool(self._optimizer_step_pre_hooks or self._optimizer_step_post_hooks
                    or _torch_optimizer._global_optimizer_pre_hooks
                    or _torch_optimizer._global_optimizer_post_hooks)

    def _update(self, shared=None):
        """The update of every parameter with a gradient (call under ``torch.no_grad``).

        ``shared``: a :class:`_SharedRows` of the pass, for the parameters of several
        optimizers updated together (one is made for this optimizer's parameters otherwise).
        """
        shared = _SharedRows() if shared is None else shared
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    n = 1 if p.dim() == 0 else p.shape[0]
                    state["row_step"] = torch.zeros(n, dtype=torch.long, device=p.device)
                    state["step"] = 0
                    self._init_state(p, state)
                state["step"] += 1
                if _is_entry_sparse(p, p.grad):
                    _entry_state(p, state)
                if "entry_step" in state:  # entry mode: every entry a row of a flat view
                    flat_p, rows, g, flat_state = _flat_view(p, p.grad, state)
                    self._row_update(flat_p, rows, g, flat_state, group, shared)
                    continue
                if p.grad.is_sparse:
                    rows, g = _rows_and_values(p.grad)
                else:
                    rows, g = None, _row_view(p.grad)
                self._row_update(_row_view(p), rows, g, state, group, shared)


class _SharedRows:
    r"""What the parameters of one optimizer pass share when their sparse gradients name the
    same rows with the same step counts (e.g. a weight matrix and its bias gathered at the
    same classes): the per-row Adam bias corrections, computed once for all of them.

    An entry is keyed by the row indices and the step counts after the update (compared by
    value, O(rows)), the dtype and the hyperparameters; a hit returns the stored
    ``(-lr / (1 - beta1^t), 1 / sqrt(1 - beta2^t))`` per row. On a GPU nothing is shared
    (a comparison by value would stop the host until the device catches up).
    """

    def __init__(self):
        self._entries = []

    def corrections(self, rows, t, dtype, lr, b1, b2):
        for r, tt, key, value in (self._entries if rows.device.type == "cpu" else ()):
            if key == (dtype, lr, b1, b2) and r.shape == rows.shape and torch.equal(r, rows) \
                    and torch.equal(tt, t):
                return value
        tf = t.to(dtype)
        value = (torch.pow(b1, tf).sub_(1).reciprocal_().mul_(lr),   # -lr / (1 - b1^t)
                 torch.pow(b2, tf).neg_().add_(1).rsqrt_())          # 1 / sqrt(1 - b2^t)
        self._entries.append((rows, t, (dtype, lr, b1, b2), value))
        return value


class LazyAdam(_LazyOptimizer):
    r"""Adam whose sparse-gradient steps update only the rows present (lazy Adam).

    For each row r with gradient g_r at its t_r-th update:
    :math:`m_r \leftarrow \beta_1 m_r + (1-\beta_1) g_r`,
    :math:`v_r \leftarrow \beta_2 v_r + (1-\beta_2) g_r^2`,
    :math:`\theta_r \leftarrow \theta_r - lr\, \hat m_r / (\sqrt{\hat v_r} + \epsilon)` with
    bias corrections :math:`1-\beta^{t_r}`. Rows absent from a sparse gradient are not
    touched (their moments do not decay), which is what makes a step O(rows used).
    Dense gradients update every row, as Adam does.

    Example:

    >>> import torch
    >>> from pyro_ar.optim import LazyAdam
    >>> W = torch.zeros(1000, 4, requires_grad=True)
    >>> opt = LazyAdam([W], lr=0.1)
    >>> torch.nn.functional.embedding(torch.tensor([3, 7]), W, sparse=True).sum().backward()
    >>> opt.step()
    >>> W.detach().abs().sum(-1).nonzero().flatten().tolist()   # only the two rows moved
    [3, 7]
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if not (0 <= betas[0] < 1 and 0 <= betas[1] < 1):
            raise ValueError(f"betas must lie in [0, 1), got {betas!r}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps))

    def _init_state(self, p, state):
        state["exp_avg"] = _row_view(torch.zeros_like(p))
        state["exp_avg_sq"] = _row_view(torch.zeros_like(p))

    def _row_update(self, p, rows, g, state, group, shared):
        b1, b2 = group["betas"]
        m_all, v_all, t_all = state["exp_avg"], state["exp_avg_sq"], state["row_step"]
        shape = (-1,) + (1,) * (g.dim() - 1)
        if rows is None:
            t_all += 1
            m, v, t = m_all, v_all, t_all
            m.mul_(b1).add_(g, alpha=1 - b1)
            v.mul_(b2).addcmul_(g, g, value=1 - b2)
            bc1 = (1 - b1 ** t.to(g.dtype)).reshape(shape)
            bc2 = (1 - b2 ** t.to(g.dtype)).reshape(shape)
            update = (m / bc1) / ((v / bc2).sqrt() + group["eps"])
            p.sub_(update * group["lr"])
            return
        # Sparse: rows are unique (coalesced). The moments are read with index_select and
        # moved by their increments with index_add_ (m += (1 - b1)(g - m), torch's lerp form
        # of Adam's average; v += (1 - b2)(g^2 - v)): both much faster than advanced indexing
        # for a few rows of a large tensor, and index_add_ faster than index_copy_. The
        # arithmetic runs in place on the gathered copies (few temporaries of rows x D).
        t_all.index_add_(0, rows, torch.ones_like(rows, dtype=t_all.dtype))
        step, inv_sqrt_bc2 = shared.corrections(rows, t_all.index_select(0, rows), g.dtype, group["lr"], b1, b2)
        m = m_all.index_select(0, rows)
        dm = torch.sub(g, m).mul_(1 - b1)
        m_all.index_add_(0, rows, dm)
        m.add_(dm)
        v = v_all.index_select(0, rows)
        dv = torch.mul(g, g).sub_(v).mul_(1 - b2)
        v_all.index_add_(0, rows, dv)
        v.add_(dv)
        # update = (m / bc1) / (sqrt(v) / sqrt(bc2) + eps), with m and v overwritten
        denom = v.sqrt_().mul_(inv_sqrt_bc2.reshape(shape)).add_(group["eps"])
        p.index_add_(0, rows, m.div_(denom).mul_(step.reshape(shape)))


class ADVIStepSize(_LazyOptimizer):
    r"""Kucukelbir et al. (2017) adaptive step size, row-wise and lazy (the A&R authors' schedule).

    :math:`G_r \leftarrow \alpha g_r^2 + (1-\alpha) G_r` (:math:`G_r = g_r^2` at the row's first
    step), :math:`\theta_r \leftarrow \theta_r - lr\cdot\lambda^{\lfloor s/T\rfloor}\, t_r^{-1/2}\,
    g_r / (1 + \sqrt{G_r})`, with :math:`t_r` the row's step count and :math:`s` the
    optimizer's step count.

    :param lr: base step size (the authors use 0.02).
    :param alpha: weight of the new squared gradient (0.1).
    :param decay: multiplicative decay :math:`\lambda` of lr (0.9) every ``decay_every`` steps (2000).

    Example:

    >>> import torch
    >>> from pyro_ar.optim import ADVIStepSize
    >>> b = torch.zeros(10, requires_grad=True)
    >>> opt = ADVIStepSize([b], lr=0.02)
    >>> (b - 1).pow(2).sum().backward()
    >>> opt.step()
    >>> round(b[0].item(), 4)     # first step: 0.02 * g / (1 + |g|), g = -2
    0.0133
    """

    def __init__(self, params, lr=0.02, alpha=0.1, decay=0.9, decay_every=2000):
        if not lr > 0:
            raise ValueError(f"lr must be > 0, got {lr!r}")
        if not 0 < alpha <= 1:
            raise ValueError(f"alpha must lie in (0, 1], got {alpha!r}")
        super().__init__(params, dict(lr=lr, alpha=alpha, decay=decay, decay_every=decay_every))

    def _init_state(self, p, state):
        state["G"] = _row_view(torch.zeros_like(p))

    def _row_update(self, p, rows, g, state, group, shared):
        G_all, t_all = state["G"], state["row_step"]
        if rows is None:
            t_all += 1
            G, t = G_all, t_all
        else:
            t_all.index_add_(0, rows, torch.ones_like(rows, dtype=t_all.dtype))
            G, t = G_all.index_select(0, rows), t_all.index_select(0, rows)
        shape = (-1,) + (1,) * (g.dim() - 1)
        first = (t == 1).reshape(shape)
        G = torch.where(first, g * g, group["alpha"] * g * g + (1 - group["alpha"]) * G)
        lr = group["lr"] * group["decay"] ** (state["step"] // group["decay_every"])
        update = t.to(g.dtype).rsqrt().reshape(shape) * g / (1 + G.sqrt())
        if rows is None:
            G_all.copy_(G)
            p.sub_(update * lr)
        else:
            G_all.index_copy_(0, rows, G)
            p.index_add_(0, rows, update, alpha=-lr)


class _LazyPyroOptim(PyroOptim):
    """:class:`~pyro.optim.PyroOptim` for the lazy optimizers, with less work per step.

    Same per-parameter optimizers, options, state and ``get_state``/``set_state`` as
    ``PyroOptim``, and the same updates; it only skips work whose result is known:

    * a parameter without a gradient is skipped before an optimizer is created or stepped
      (a lazy step ignores it anyway: no state, no update), e.g. the eta of
      :class:`~pyro_ar.infer.GumbelLocalGuide` with its natural step, which
      ``SVI.step`` passes every step;
    * the optimizers are updated directly, in one ``torch.no_grad`` block, instead of
      through torch's per-optimizer ``step`` wrapper (profiler record, hook loops), unless
      an optimizer step hook is registered;
    * the gradients it consumed are released (set to None, as ``Optimizer.zero_grad``
      does), so that the next backward writes them instead of adding to the zero tensors
      ``SVI.step``'s ``zero_grads`` would otherwise leave (the same values).
    """

    def __call__(self, params, *args, **kwargs):
        if args or kwargs:  # a closure: the stock path
            return super().__call__(params, *args, **kwargs)
        known, stepped = self.optim_objs, []
        for p in params:
            if p.grad is None:
                continue
            if p not in known:  # first step: created (and stepped) by PyroOptim
                super().__call__([p])
            elif self.grad_clip[p] is not None or known[p]._has_step_hooks():
                super().__call__([p])
            else:
                stepped.append(p)
        if stepped:  # one pass: parameters on the same rows share their bias corrections
            shared = _SharedRows()
            with torch.no_grad():
                for p in stepped:
                    known[p]._update(shared)
        for p in params:
            p.grad = None


def lazy_adam(optim_args) -> PyroOptim:
    """:class:`LazyAdam` wrapped for Pyro. ``optim_args``: a dict, or a callable
    ``param_name -> dict`` for per-parameter options (e.g. a local step size).

    A :class:`~pyro.optim.PyroOptim` (one optimizer per parameter, the same state format)
    that skips parameters without a gradient, updates without torch's per-step wrapper
    unless a step hook is registered, and releases the gradients it consumed.

    Example:

    >>> from pyro_ar.optim import lazy_adam
    >>> optim = lazy_adam(lambda name: {"lr": 0.1 if "Local" in name else 0.01})
    >>> from pyro.optim import PyroOptim
    >>> isinstance(optim, PyroOptim)   # with less work per step, see _LazyPyroOptim
    True
    """
    return _LazyPyroOptim(LazyAdam, optim_args)


def advi_step_size(optim_args) -> PyroOptim:
    """:class:`ADVIStepSize` wrapped for Pyro (see :func:`lazy_adam`).

    Example:

    >>> from pyro_ar.optim import advi_step_size
    >>> optim = advi_step_size({"lr": 0.02, "decay": 0.9, "decay_every": 2000})
    """
    return _LazyPyroOptim(ADVIStepSize, optim_args)

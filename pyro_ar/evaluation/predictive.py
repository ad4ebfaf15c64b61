r"""The one evaluation path: predictive log-likelihood, class probabilities, accuracy, top-k.

Every function reads the utilities from a *source* and walks the datapoints in chunks
(:func:`iter_chunks`), so that at most ``chunk_size x K`` utilities (per posterior draw) are
ever held. A source is one of

* a tensor of shape ``(R, K)`` or a :class:`~pyro_ar.utility.Utility` with ``batch_shape
  (R,)`` -- a point estimate :math:`\psi` (a :class:`~pyro_ar.utility.LinearUtility` is
  evaluated chunk by chunk, never as a whole ``R x K`` matrix);
* a callable ``f(ids)`` of a ``LongTensor`` of row ids returning ``(B, K)`` utilities (a point
  estimate) or ``(S, B, K)`` utilities under ``S`` posterior draws
  :math:`\psi^{(1)},\dots,\psi^{(S)}` -- e.g. :func:`linear_source`. It must return the same
  draws on every call (hold them, or re-seed the sampler on each call).

The predictive probability of class :math:`k` at row :math:`r` is the average over draws,

.. math::

    \log p(k\mid r) = \operatorname{logsumexp}_{s} \log p(k\mid\psi^{(s)}_r) - \log S,
    \qquad \log p(k\mid\psi) = \begin{cases}
        \psi_k - \operatorname{logsumexp}_{k'}\psi_{k'} & \text{Gumbel noise (softmax)}\\
        \log\int\phi(e)\prod_{k'\ne k}\Phi(e+\psi_k-\psi_{k'})\,de & \text{otherwise}
    \end{cases}

(the noise's :meth:`~pyro_ar.noise.Noise.log_marginal`; the integral by quadrature: O(K) per
label, O(K^2) per row for all classes), computed and accumulated in float64 whatever the
dtype of the source.

**Shared rows.** With ``rows=`` (a ``LongTensor`` of length N), datapoint ``n`` uses the
utilities of row ``rows[n]``, and each *distinct* row is computed once: for the bigram model
(the same utilities for the same previous word), :math:`U\times K` utilities for :math:`U`
distinct previous words instead of :math:`N\times K`.

**Ranking.** With iid noise :math:`p(k\mid\psi)` increases with :math:`\psi_k`: a point estimate
ranks classes by utility (for every noise), posterior draws by the predictive probability.

Bad input -- labels of the wrong count, dtype or range, empty input, ``k`` outside
``[1, K]``, non-finite utilities -- raises a ``ValueError`` naming the argument and value.
"""

import math
import numbers
import re
from typing import Callable, Dict, Iterator, Optional, Sequence, Tuple, Union

import torch

from ..noise import Noise, get_noise
from ..utility import DenseUtility, LinearUtility, LinearWeights, Utility, embed_inputs
from ..weight_pattern import PatternWeights

__all__ = ["Chunk", "UtilitySource", "linear_source", "iter_chunks", "log_likelihood", "predict_log_proba",
           "predict_proba", "accuracy", "top_k_accuracy", "top_k", "evaluate"]

#: utilities (rows x classes x draws) held at once when ``chunk_size`` is not given
CHUNK_ELEMENTS = 1 << 22
_DEFAULT_CALLABLE_CHUNK = 256
_REDUCTIONS = ("mean", "sum", "none")
#: what the functions below evaluate (see the module doc), and a noise argument
Source = Union[torch.Tensor, Utility, "UtilitySource", Callable[[torch.Tensor], torch.Tensor]]
NoiseArg = Union[str, Noise]


# ============================================================================ sources
class UtilitySource:
    r"""Utilities computed on demand: ``fn(ids)`` returns ``(B, K)`` or ``(S, B, K)``.

    A plain callable is a source too; this wrapper also records the number of rows R and
    of classes K when known (so that a bad ``labels`` or ``k`` is caught before any work).

    :param fn: ``fn(ids: LongTensor (B,)) -> Tensor (B, K) or (S, B, K)``.
    :param int num_rows: R (ids lie in ``[0, R)``), or None.
    :param int num_classes: K, or None.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import UtilitySource, log_likelihood
    >>> table = torch.zeros(4, 10)
    >>> src = UtilitySource(lambda ids: table[ids], num_rows=4, num_classes=10)
    >>> round(log_likelihood(src, torch.tensor([0, 1, 2, 3])), 4)   # log(1/10)
    -2.3026
    """

    def __init__(self, fn: Callable[[torch.Tensor], torch.Tensor], num_rows: Optional[int] = None,
                 num_classes: Optional[int] = None):
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {fn!r}")
        self.fn, self.num_rows, self.num_classes = fn, num_rows, num_classes

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        return self.fn(ids)

    def __repr__(self):
        return f"UtilitySource(num_rows={self.num_rows}, num_classes={self.num_classes})"


def linear_source(x, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                  embedding: Optional[torch.Tensor] = None) -> UtilitySource:
    r"""Linear utilities :math:`\psi^{(s)}_{rk} = x_r\cdot w^{(s)}_k + b^{(s)}_k`, in float64;
    with an ``embedding`` E (a low rank, :math:`W = V E^\top`),
    :math:`\psi^{(s)}_r = (x_r E^{(s)}) V^{(s)\top} + b^{(s)}` (W is never formed). Each chunk
    is the :meth:`~pyro_ar.utility.LinearUtility.full` of a
    :class:`~pyro_ar.utility.LinearUtility` of its rows (the one linear-utility computation).

    :param x: ``(R, D)`` features (or embeddings: with ``rows=`` the previous-word ids): a tensor,
        or an object with a ``shape`` whose ``x[ids]`` is a dense or torch-sparse tensor of those rows.
    :param weight: ``(K, D)`` point weights (dense, or torch-sparse: on a pattern) or ``(S, K, D)``
        draws; with ``embedding`` E (``(D, r)`` / ``(S, D, r)``), V: ``(K, r)`` / ``(S, K, r)``.
    :param bias: ``(K,)`` / ``(S, K)`` or None.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import linear_source
    >>> src = linear_source(torch.randn(5, 3), torch.randn(7, 4, 3))   # 7 draws, K = 4
    >>> src(torch.tensor([0, 4])).shape, src.num_rows, src.num_classes
    (torch.Size([7, 2, 4]), 5, 4)
    """
    args = {"x": x, "weight": weight, "bias": bias, "embedding": embedding}
    D = weight.shape[-1] if embedding is None else embedding.shape[-2]
    bad_embedding = embedding is not None and (embedding.dim() != weight.dim() or weight.is_sparse)
    if weight.dim() not in (2, 3) or len(x.shape) != 2 or x.shape[-1] != D or bad_embedding or (
            bias is not None and bias.shape != weight.shape[:-1]):
        raise ValueError(f"weight must be (K, D) or (S, K, D) (V (K, r) / (S, K, r) with an embedding E (D, r) / "
                         f"(S, D, r)), x (R, D), bias (K,) / (S, K) or None; got the shapes "
                         f"{ {n: tuple(t.shape) for n, t in args.items() if t is not None} }")
    W, b, E = (None if t is None else t.detach().to(torch.float64) for t in (weight, bias, embedding))
    if W.is_sparse:  # (K, D) on a pattern: never a dense K x D
        draws = [(PatternWeights.from_sparse(W, b), None)]
    elif W.dim() == 2:
        draws = [(LinearWeights(W, b), E)]
    else:
        draws = [(LinearWeights(W[s], None if b is None else b[s]), None if E is None else E[s])
                 for s in range(W.shape[0])]
    fn = _linear_fn(x, draws, W.device)
    return UtilitySource(fn if W.dim() == 3 else (lambda ids: fn(ids)[0]), x.shape[0], weight.shape[-2])


def _linear_fn(x, draws, device):
    """``ids -> (S, B, K)`` float64 utilities of the rows ``ids`` of ``x`` under each draw's
    ``(layout, embedding or None)``: a :class:`~pyro_ar.utility.LinearUtility` per draw."""
    def fn(ids):
        xb = x.index_select(0, ids.to(x.device)) if isinstance(x, torch.Tensor) else x[ids]
        xb = xb.detach().to(device=device, dtype=torch.float64)
        out = None
        for s, (w, e) in enumerate(draws):
            psi = LinearUtility.of(xb if e is None else embed_inputs(xb, e, False), w).full()
            if len(draws) == 1:
                return psi.unsqueeze(0)
            out = psi.new_empty((len(draws),) + psi.shape) if out is None else out
            out[s] = psi
        return out

    return fn


def _point_fn(u: Utility):
    """``ids -> (B, K)`` float64 utilities of a Utility with batch_shape (R,)."""
    if isinstance(u, DenseUtility):
        return lambda ids: u.logits.detach().index_select(0, ids.to(u.device)).to(torch.float64)
    if isinstance(u, LinearUtility):  # any layout, chunk by chunk
        fn = _linear_fn(u.x, [(u.weights.map(lambda t: t.detach().to(torch.float64)), None)], u.device)
        return lambda ids: fn(ids)[0]
    cache = {}

    def fn(ids):  # any other Utility: all utilities once
        if "full" not in cache:
            cache["full"] = u.full().detach()
        return cache["full"].index_select(0, ids.to(cache["full"].device)).to(torch.float64)

    return fn


def _as_source(source) -> UtilitySource:
    if isinstance(source, torch.Tensor):
        source = DenseUtility(source) if source.is_floating_point() else source
        if not isinstance(source, Utility):
            raise ValueError(f"utility must be a floating point tensor, got dtype={source.dtype}")
    if isinstance(source, Utility):
        if len(source.batch_shape) != 1:
            raise ValueError("utility must have one batch dimension of datapoints (shape (N, K)), "
                             f"got batch_shape={tuple(source.batch_shape)}")
        return UtilitySource(_point_fn(source), source.batch_shape[0], source.num_classes)
    if isinstance(source, UtilitySource):  # a copy: the counts found are recorded on it
        return UtilitySource(source.fn, source.num_rows, source.num_classes)
    if callable(source):
        return UtilitySource(source)
    raise ValueError("utility must be a tensor (N, K), a pyro_ar Utility or a callable "
                     f"ids -> (B, K) / (S, B, K), got {type(source).__name__}")


def _call(src: UtilitySource, ids: torch.Tensor) -> torch.Tensor:
    """``(S, B, K)`` float64 utilities of rows ``ids``, checked."""
    psi = src(ids)
    if not isinstance(psi, torch.Tensor) or psi.dim() not in (2, 3) or psi.shape[-2] != ids.shape[0]:
        got = tuple(psi.shape) if isinstance(psi, torch.Tensor) else type(psi).__name__
        raise ValueError(f"utility source must return (B={ids.shape[0]}, K) or (S, B, K), got {got}")
    psi = psi.detach().to(torch.float64)
    psi = psi.unsqueeze(0) if psi.dim() == 2 else psi
    if src.num_classes is not None and psi.shape[-1] != src.num_classes:
        raise ValueError(f"utility source returned K={psi.shape[-1]} classes, expected {src.num_classes}")
    if psi.shape[-1] < 1 or psi.shape[0] < 1:
        raise ValueError(f"utility must have at least one class and one draw, got shape {tuple(psi.shape)}")
    bad = None if bool(torch.isfinite(psi.sum())) else ~torch.isfinite(psi)  # (a finite sum: all finite)
    if bad is not None and bad.any():
        s, b, k = (int(i) for i in bad.nonzero()[0])
        raise ValueError(f"utility must be finite, got {psi[s, b, k].item()} at row {int(ids[b])}, "
                         f"class {k}" + (f", draw {s}" if psi.shape[0] > 1 else ""))
    src.num_classes = psi.shape[-1]
    return psi


# ============================================================================ checks
def _check_int_tensor(name, t, device=None):
    if not isinstance(t, torch.Tensor):
        try:
            t = torch.as_tensor(t)
        except (TypeError, ValueError, RuntimeError):
            raise ValueError(f"{name} must be a 1-D integer tensor, got {type(t).__name__}") from None
    if t.dtype == torch.bool or t.is_floating_point() or t.is_complex():
        raise ValueError(f"{name} must be an integer tensor, got dtype={t.dtype}")
    if t.dim() != 1:
        raise ValueError(f"{name} must be 1-D, got shape {tuple(t.shape)}")
    if t.numel() == 0:
        raise ValueError(f"{name} is empty: nothing to evaluate")
    if int(t.min()) < 0:
        pos = int(t.argmin())
        raise ValueError(f"{name} must be >= 0, got {int(t[pos])} at position {pos}")
    return t.long() if device is None else t.long().to(device)


def _check_labels_range(labels, K):
    if int(labels.max()) >= K:
        pos = int(labels.argmax())
        raise ValueError(f"labels must lie in [0, K={K}), got {int(labels[pos])} at position {pos}")


def _check_k(k, K):
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1 or (K is not None and k > K):
        bound = "1" if K is None else f"[1, K={K}]"
        raise ValueError("k must be an integer " + ("in " if K else ">= ") + f"{bound}, got k={k!r}")
    return int(k)


def _check_chunk_size(chunk_size):
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral)
                                   or chunk_size < 1):
        raise ValueError(f"chunk_size must be a positive integer or None, got chunk_size={chunk_size!r}")


def _prepare(source, labels, rows, num_rows):
    """(source, labels or None, rows or None, N) with the counts checked against each other."""
    src = _as_source(source)
    if rows is not None:
        rows = _check_int_tensor("rows", rows)
        if src.num_rows is not None and int(rows.max()) >= src.num_rows:
            pos = int(rows.argmax())
            raise ValueError(f"rows must lie in [0, {src.num_rows}) (the utility's rows), got "
                             f"{int(rows[pos])} at position {pos}")
        n, what = rows.shape[0], "rows has {} entries"
    elif src.num_rows is not None:
        n, what = src.num_rows, "the utility has {} rows"
        if n == 0:
            raise ValueError("utility has 0 rows: nothing to evaluate")
    elif num_rows is not None or labels is None:
        if isinstance(num_rows, bool) or not isinstance(num_rows, numbers.Integral) or num_rows < 1:
            raise ValueError(f"num_rows must be a positive integer for a callable source without rows=, "
                             f"got num_rows={num_rows!r}")
        n, what = int(num_rows), "num_rows is {}"
    else:
        n, what = None, None
    if labels is not None:
        labels = _check_int_tensor("labels", labels)
        if n is not None and labels.shape[0] != n:
            raise ValueError(f"labels has {labels.shape[0]} entries but {what.format(n)}: one label per datapoint")
        n = labels.shape[0]
        if src.num_classes is not None:
            _check_labels_range(labels, src.num_classes)
    if src.num_rows is None and rows is None:
        src.num_rows = n
    return src, labels, rows, n


# ============================================================================ chunks
class Chunk:
    r"""One chunk of the evaluation pass.

    Attributes: ``index`` -- the datapoints of the chunk (``(B,)`` positions in ``labels``);
    ``ids`` -- the distinct rows computed (``(R_c,)``); ``row`` -- ``(B,)`` each datapoint's
    position in ``ids``; ``utility`` -- ``(S, R_c, K)`` float64 utilities (S = 1 for a point
    estimate). The normalised log-probabilities are computed on first use and cached.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import iter_chunks
    >>> c = next(iter_chunks(torch.zeros(5, 4), chunk_size=2))
    >>> c.index.tolist(), c.log_probs().exp().sum(-1).tolist()
    ([0, 1], [1.0, 1.0])
    """

    def __init__(self, index, ids, row, utility, noise):
        self.index, self.ids, self.utility, self.noise = index, ids, utility, noise
        self.row = row.to(utility.device)
        self._per_draw = self._mixed = None

    @property
    def num_draws(self) -> int:
        return self.utility.shape[0]

    def draw_log_probs(self) -> torch.Tensor:
        """``(S, R_c, K)``: :math:`\\log p(k\\mid\\psi^{(s)}_r)` for every draw, row and class."""
        if self._per_draw is None:
            self._per_draw = self.noise.log_marginal_all(self.utility)
        return self._per_draw

    def log_probs(self) -> torch.Tensor:
        """``(R_c, K)``: the predictive :math:`\\log\\frac1S\\sum_s p(k\\mid\\psi^{(s)}_r)`."""
        if self._mixed is None:
            self._mixed = _mix(self.draw_log_probs())
        return self._mixed

    def label_log_prob(self, labels: torch.Tensor) -> torch.Tensor:
        """``(B,)``: predictive log-probability of each datapoint's label (``labels`` of the chunk)."""
        if self._mixed is not None:  # (every class already at hand)
            return self.log_probs()[self.row, labels]
        # the noise's own route to the labels of shared rows (Gumbel: one log-softmax per row)
        return _mix(self.noise.log_marginal_rows(self.utility, self.row, labels))

    def scores(self) -> torch.Tensor:
        """``(R_c, K)`` scores ranking the classes like the predictive probability."""
        return self.utility[0] if self.num_draws == 1 else self.log_probs()


def _mix(lp):
    """log of the mean over the first (draws) dimension of exp(lp)."""
    return lp[0] if lp.shape[0] == 1 else torch.logsumexp(lp, 0) - math.log(lp.shape[0])


def _chunk_rows(src, chunk_size, num_draws=1):
    if chunk_size is not None:
        return int(chunk_size)
    if src.num_classes is None:
        return _DEFAULT_CALLABLE_CHUNK
    return max(1, min(4096, CHUNK_ELEMENTS // (src.num_classes * num_draws)))


def iter_chunks(source: Source, noise: NoiseArg = "gumbel", *, rows: Optional[torch.Tensor] = None,
                num_rows: Optional[int] = None, chunk_size: Optional[int] = None) -> Iterator[Chunk]:
    """Walk the datapoints in chunks of at most ``chunk_size`` computed rows: yields :class:`Chunk`.

    Without ``rows`` datapoint n is row n (``num_rows`` datapoints for a plain callable);
    with ``rows`` the distinct rows are computed once each, chunk by chunk, and every
    datapoint appears in exactly one chunk (in ``chunk.index``). The loop is over chunks
    only. ``chunk_size=None`` keeps about 4 million utilities per chunk.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import iter_chunks
    >>> rows = torch.tensor([2, 0, 2, 2])          # datapoints 0, 2, 3 share row 2
    >>> [(c.ids.tolist(), c.index.tolist()) for c in iter_chunks(torch.randn(3, 5), rows=rows)]
    [([0, 2], [1, 0, 2, 3])]
    """
    src, _, rows, n = _prepare(source, None, rows, num_rows)
    yield from _iter(src, get_noise(noise), rows, n, chunk_size)


def _iter(src, noise, rows, n, chunk_size):
    _check_chunk_size(chunk_size)
    size = _chunk_rows(src, chunk_size)
    if rows is None:
        for start in range(0, n, size):
            ids = torch.arange(start, min(n, start + size))
            yield Chunk(ids, ids, ids - start, _call(src, ids), noise)
        return
    uniq, inv = torch.unique(rows, return_inverse=True)
    order = torch.argsort(inv, stable=True)
    bounds = [0] + torch.bincount(inv, minlength=uniq.shape[0]).cumsum(0).tolist()
    for a in range(0, uniq.shape[0], size):
        b = min(uniq.shape[0], a + size)
        index = order[bounds[a]:bounds[b]]
        ids = uniq[a:b]
        yield Chunk(index, ids, inv[index] - a, _call(src, ids), noise)


# ============================================================================ one pass
_TOP = re.compile(r"top(\d+)")


def _parse_metrics(metrics):
    if isinstance(metrics, str) or not isinstance(metrics, Sequence) or not metrics:
        raise ValueError(f"metrics must be a non-empty list of names, got metrics={metrics!r}")
    out = {}
    for name in metrics:
        m = _TOP.fullmatch(name) if isinstance(name, str) else None
        if name in ("log_lik", "log_lik_floored", "accuracy"):
            out[name] = 1 if name == "accuracy" else None
        elif m is not None:
            out[name] = int(m.group(1))
        else:
            raise ValueError(f"metrics: unknown metric {name!r}; use 'log_lik', 'log_lik_floored', "
                             "'accuracy' or 'top<k>' (e.g. 'top5')")
    return out


def _pass(source, labels, noise, metrics, *, rows, chunk_size, floor):
    """One chunked pass: {name: per-datapoint float64 values (N,)} for the parsed metrics."""
    src, labels, rows, n = _prepare(source, labels, rows, None)
    ks = {name: k for name, k in metrics.items() if k is not None}
    for k in ks.values():
        _check_k(k, src.num_classes)
    out, checked = {}, src.num_classes is not None
    for chunk in _iter(src, get_noise(noise), rows, n, chunk_size):
        if not checked:
            _check_labels_range(labels, src.num_classes)
            for k in ks.values():
                _check_k(k, src.num_classes)
            checked = True
        y = labels[chunk.index].to(chunk.utility.device)
        if not out:
            out = {name: torch.empty(n, dtype=torch.float64, device=y.device) for name in metrics}
        index = chunk.index.to(y.device)
        if "log_lik" in metrics or "log_lik_floored" in metrics:
            lp = chunk.label_log_prob(y)
            for name in ("log_lik", "log_lik_floored"):
                if name in metrics:
                    out[name][index] = lp if name == "log_lik" else lp.clamp(min=floor)
        if ks:
            top = chunk.scores().topk(max(ks.values()), -1).indices[chunk.row]      # (B, kmax)
            hit_at = (top == y.unsqueeze(-1)).to(torch.float64).cumsum(-1)          # (B, kmax)
            for name, k in ks.items():
                out[name][index] = hit_at[:, k - 1]
    return out


def _reduce(values, reduce):
    if reduce == "none":
        return values
    return (values.mean() if reduce == "mean" else values.sum()).item()


def _check_reduce(reduce):
    if reduce not in _REDUCTIONS:
        raise ValueError(f"reduce must be one of {_REDUCTIONS}, got reduce={reduce!r}")


@torch.no_grad()
def evaluate(source: Source, labels: torch.Tensor, metrics: Sequence[str] = ("log_lik", "accuracy", "top5"),
             noise: NoiseArg = "gumbel", *, rows: Optional[torch.Tensor] = None,
             chunk_size: Optional[int] = None, floor: float = -26.0, reduce: str = "mean") -> Dict:
    r"""Several metrics in ONE chunked pass (each chunk's probabilities computed once).

    Metric names: ``"log_lik"`` (:math:`\log p(y_n\mid x_n)`), ``"log_lik_floored"``
    (:math:`\max(\log p(y_n\mid x_n), \text{floor})`, the A&R authors' reporting, which
    limits the weight of a few hopeless test points), ``"accuracy"`` and ``"top<k>"``
    (label among the k most probable classes).

    :returns: ``{name: mean}`` (``reduce="mean"``), sums, or per-datapoint float64 tensors
        (``reduce="none"``).

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import evaluate
    >>> psi = torch.tensor([[3.0, 2.0, 1.0], [0.0, 1.0, 5.0]])
    >>> out = evaluate(psi, torch.tensor([1, 2]), ("log_lik", "accuracy", "top2"))
    >>> sorted(out), out["accuracy"], out["top2"]
    (['accuracy', 'log_lik', 'top2'], 0.5, 1.0)
    """
    _check_reduce(reduce)
    values = _pass(source, labels, noise, _parse_metrics(metrics), rows=rows, chunk_size=chunk_size,
                   floor=floor)
    return {name: _reduce(v, reduce) for name, v in values.items()}


@torch.no_grad()
def log_likelihood(source: Source, labels: torch.Tensor, noise: NoiseArg = "gumbel", *,
                   chunk_size: Optional[int] = None, floor: Optional[float] = None, reduce: str = "mean",
                   rows: Optional[torch.Tensor] = None) -> Union[float, torch.Tensor]:
    r"""Predictive log-likelihood :math:`\frac1N\sum_n\log p(y_n\mid x_n)` (see the module doc).

    :param floor: if given, each datapoint's value is floored at it first.
    :param str reduce: ``"mean"`` (float), ``"sum"`` (float) or ``"none"`` (float64 tensor (N,)).

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import log_likelihood
    >>> round(log_likelihood(torch.zeros(4, 10), torch.tensor([0, 1, 2, 3])), 4)   # log(1/10)
    -2.3026
    >>> log_likelihood(torch.tensor([[0.0, 40.0]]), torch.tensor([0]), floor=-26.0)
    -26.0
    """
    _check_reduce(reduce)
    name = "log_lik" if floor is None else "log_lik_floored"
    floor = -math.inf if floor is None else float(floor)
    values = _pass(source, labels, noise, {name: None}, rows=rows, chunk_size=chunk_size, floor=floor)
    return _reduce(values[name], reduce)


@torch.no_grad()
def accuracy(source: Source, labels: torch.Tensor, noise: NoiseArg = "gumbel", *,
             chunk_size: Optional[int] = None, rows: Optional[torch.Tensor] = None) -> float:
    """Top-1 accuracy: fraction of datapoints whose label is the most probable class.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import accuracy
    >>> accuracy(torch.eye(3), torch.tensor([0, 1, 0]))
    0.6666666666666666
    """
    return top_k_accuracy(source, labels, 1, noise, chunk_size=chunk_size, rows=rows)


@torch.no_grad()
def top_k_accuracy(source: Source, labels: torch.Tensor, k: int = 5, noise: NoiseArg = "gumbel", *,
                   chunk_size: Optional[int] = None, rows: Optional[torch.Tensor] = None) -> float:
    """Fraction of datapoints whose label is among the ``k`` most probable classes (1 <= k <= K).

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import top_k_accuracy
    >>> top_k_accuracy(torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([1]), k=2)
    1.0
    """
    name = f"top{_check_k(k, None)}"
    values = _pass(source, labels, noise, {name: k}, rows=rows, chunk_size=chunk_size, floor=None)
    return _reduce(values[name], "mean")


@torch.no_grad()
def predict_log_proba(source: Source, noise: NoiseArg = "gumbel", *, chunk_size: Optional[int] = None,
                      rows: Optional[torch.Tensor] = None,
                      num_rows: Optional[int] = None) -> torch.Tensor:
    r"""``(N, K)`` float64 predictive log-probabilities :math:`\log p(k\mid x_n)` (O(N K) memory).

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import predict_log_proba
    >>> predict_log_proba(torch.zeros(1, 4)).exp().tolist()
    [[0.25, 0.25, 0.25, 0.25]]
    """
    src, _, rows, n = _prepare(source, None, rows, num_rows)
    out = None
    for chunk in _iter(src, get_noise(noise), rows, n, chunk_size):
        lp = chunk.log_probs()
        if out is None:
            out = torch.empty(n, lp.shape[-1], dtype=torch.float64, device=lp.device)
        out[chunk.index.to(lp.device)] = lp[chunk.row]
    return out


def predict_proba(source: Source, noise: NoiseArg = "gumbel", *, chunk_size: Optional[int] = None,
                  rows: Optional[torch.Tensor] = None,
                  num_rows: Optional[int] = None) -> torch.Tensor:
    """``(N, K)`` float64 predictive probabilities, :func:`predict_log_proba` exponentiated.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import predict_proba
    >>> predict_proba(torch.tensor([[0.0, 0.0]]), "normal").round(decimals=12).tolist()   # probit
    [[0.5, 0.5]]
    """
    return predict_log_proba(source, noise, chunk_size=chunk_size, rows=rows, num_rows=num_rows).exp()


@torch.no_grad()
def top_k(source: Source, k: int = 5, noise: NoiseArg = "gumbel", *, chunk_size: Optional[int] = None,
          rows: Optional[torch.Tensor] = None,
          num_rows: Optional[int] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` most probable classes of each datapoint and their predictive probabilities.

    :returns: ``(classes (N, k) int64, probs (N, k) float64)``, by decreasing probability.

    Example:

    >>> import torch
    >>> from pyro_ar.evaluation import top_k
    >>> classes, probs = top_k(torch.tensor([[0.0, 2.0, 1.0]]), k=2)
    >>> classes.tolist(), round(probs.sum().item(), 4)
    ([[1, 2]], 0.91)
    """
    src, _, rows, n = _prepare(source, None, rows, num_rows)
    k = _check_k(k, src.num_classes)
    classes = probs = None
    for chunk in _iter(src, get_noise(noise), rows, n, chunk_size):
        _check_k(k, src.num_classes)
        top = chunk.log_probs().topk(k, -1)
        if classes is None:
            classes = torch.empty(n, k, dtype=torch.long, device=top.indices.device)
            probs = torch.empty(n, k, dtype=torch.float64, device=top.indices.device)
        index = chunk.index.to(classes.device)
        classes[index], probs[index] = top.indices[chunk.row], top.values[chunk.row].exp()
    return classes, probs

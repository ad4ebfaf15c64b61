r"""Mean utilities :math:`\psi`: dense, or lazily computed for the classes asked for.

The augmented likelihood only ever needs :math:`\psi` at the observed class and a
subsample of other classes. A :class:`Utility` exposes exactly that:

* :meth:`Utility.gather` -- :math:`\psi_{n, idx_{n,j}}` for a per-datapoint index;
* :meth:`Utility.gather_shared` -- :math:`\psi_{n, idx_j}` for one index shared by the
  whole batch (for a linear utility, a single matrix product);
* :meth:`Utility.full` -- all K utilities (O(K); for exact baselines and evaluation).

:class:`LinearUtility` (:math:`\psi_{nk} = x_n \cdot w_k + b_k`) never materialises the
B x K matrix unless :meth:`full` is called, and with ``sparse=True`` its gradients with
respect to ``weight`` and ``bias`` are sparse, touching only the rows gathered. It is the one
place where a linear utility is computed: its weights are a layout (:class:`LinearWeights`,
dense; :class:`~pyro_ar.weight_pattern.PatternWeights`, on a pattern; the low-rank
:meth:`LinearUtility.low_rank`) that owns how the classes asked for are read, and training,
:mod:`pyro_ar.evaluation` (chunk by chunk) and the class-sharded model all go through it.

Sparse inputs. When ``x`` is a torch sparse (COO or CSR) batch with non-zeros
:math:`(n_e, j_e, v_e)_{e=1..E}`, the utilities are computed from the non-zeros only,

.. math::  \psi_{n k} = b_k + \sum_{e:\, n_e = n} v_e\, W_{k j_e},

by gathering the single entries :math:`W_{k j_e}` for the classes asked of row
:math:`n_e` (:func:`gather_entries`): O(E m) work for m classes per row (labels and
per-datapoint or shared negatives alike), never a row of D floats, and with
``sparse=True`` a gradient of ``weight`` that is sparse in both dimensions (a COO tensor
of W's shape holding only the (class, feature) entries used), which
:class:`pyro_ar.optim.LazyAdam` updates entry by entry. :func:`embed_inputs` computes
:math:`h = x E` from the non-zeros (O(E r), row-sparse gradient of E): the input embedding
of the low-rank model :math:`W = V E^\top`, whose output layer is a :class:`LinearUtility`
of h.
"""

from typing import Optional

import torch
import torch.nn.functional as F

from pyro.distributions.util import broadcast_shape

__all__ = ["Utility", "DenseUtility", "LinearWeights", "LinearUtility", "as_utility", "check_index",
           "gather_entries", "embed_inputs", "is_sparse_tensor"]


def check_index(index, num_classes: int, name: str = "index") -> None:
    """Class indices must be an integer tensor in ``[0, num_classes)`` (named ``ValueError``).

    Run by the gathers of :class:`DenseUtility` and :class:`LinearUtility` while Pyro's
    validation is on (one ``aminmax`` reduction); the distributions pass indices that are
    valid by construction (checked labels, sampled classes).

    Example:

    >>> import torch
    >>> from pyro_ar.utility import check_index
    >>> check_index(torch.tensor([0, 7]), 5)
    Traceback (most recent call last):
    ...
    ValueError: index must lie in [0, 5), got values in [0, 7]
    """
    if not isinstance(index, torch.Tensor) or index.is_floating_point() or index.is_complex() \
            or index.dtype == torch.bool:
        raise ValueError(f"{name} must be an integer tensor of class indices, got "
                         f"{getattr(index, 'dtype', type(index).__name__)}")
    if index.numel():
        lo, hi = (int(v) for v in torch.aminmax(index))
        if lo < 0 or hi >= num_classes:
            raise ValueError(f"{name} must lie in [0, {num_classes}), got values in [{lo}, {hi}]")


def _validating() -> bool:
    return torch.distributions.Distribution._validate_args


class Utility:
    """Interface of mean utilities over ``num_classes`` classes with a ``batch_shape``.

    Example:

    >>> import torch, pyro_ar as ar
    >>> u = ar.LinearUtility(torch.randn(3, 4), torch.randn(50, 4))   # any Utility subclass
    >>> u.num_classes, u.batch_shape, u.full().shape
    (50, torch.Size([3]), torch.Size([3, 50]))
    """

    num_classes: int
    batch_shape: torch.Size
    #: name of the tensor attribute whose dtype and device the utilities have
    _reference = None

    @property
    def dtype(self):
        return getattr(self, self._reference).dtype

    @property
    def device(self):
        return getattr(self, self._reference).device

    def gather(self, index: torch.Tensor) -> torch.Tensor:
        """Utilities at per-element class indices.

        :param index: integer tensor whose shape broadcasts as ``batch_shape + (m,)``.
        :returns: tensor of shape ``broadcast(batch_shape, index.shape[:-1]) + (m,)``.
        """
        raise NotImplementedError

    def gather_shared(self, index: torch.Tensor) -> torch.Tensor:
        """Utilities at one set of classes shared by the whole batch.

        :param index: 1-D integer tensor of length m.
        :returns: tensor of shape ``batch_shape + (m,)``.
        """
        raise NotImplementedError

    def gather_label_and_shared(self, labels: torch.Tensor, index: torch.Tensor):
        """``(gather(labels.unsqueeze(-1)), gather_shared(index))`` in one go.

        The likelihood needs both the observed class's utility and the shared negatives';
        a subclass may fetch both sets of rows at once (:class:`LinearUtility` does: one
        gather, one sparse gradient).

        :param labels: integer tensor broadcastable with ``batch_shape``.
        :param index: 1-D integer tensor of length m.
        :returns: tensors of shapes ``broadcast(batch_shape, labels.shape) + (1,)`` and
            ``batch_shape + (m,)``.
        """
        return self.gather(labels.unsqueeze(-1)), self.gather_shared(index)

    def full(self) -> torch.Tensor:
        """All utilities, shape ``batch_shape + (num_classes,)`` (O(K) work)."""
        raise NotImplementedError

    def expand(self, batch_shape) -> "Utility":
        raise NotImplementedError


class DenseUtility(Utility):
    """Utilities given as a dense tensor of shape ``batch_shape + (K,)`` (logits).

    Example:

    >>> import torch, pyro_ar as ar
    >>> psi = ar.utility.DenseUtility(torch.arange(6.0).reshape(2, 3))
    >>> psi.gather(torch.tensor([[2], [0]])).tolist()
    [[2.0], [3.0]]
    """

    def __init__(self, logits: torch.Tensor):
        if not isinstance(logits, torch.Tensor) or logits.dim() < 1:
            raise ValueError(
                "utility must be a tensor of shape batch_shape + (num_classes,), got "
                f"{logits if not isinstance(logits, torch.Tensor) else tuple(logits.shape)!r}"
            )
        if not logits.is_floating_point():
            raise ValueError(f"utility must be a floating point tensor, got dtype={logits.dtype}")
        self.logits = logits
        self.num_classes = logits.shape[-1]
        self.batch_shape = logits.shape[:-1]

    _reference = "logits"

    def gather(self, index):
        if _validating():
            check_index(index, self.num_classes)
        shape = broadcast_shape(self.batch_shape, index.shape[:-1])
        logits = self.logits.expand(shape + (self.num_classes,))
        return torch.gather(logits, -1, index.expand(shape + index.shape[-1:]))

    def gather_shared(self, index):
        if _validating():
            check_index(index, self.num_classes)
        return self.logits.index_select(-1, index)

    def full(self):
        return self.logits

    def expand(self, batch_shape):
        return DenseUtility(self.logits.expand(torch.Size(batch_shape) + (self.num_classes,)))

    def __repr__(self):
        return f"DenseUtility(batch_shape={tuple(self.batch_shape)}, num_classes={self.num_classes})"


def _check_same_kind(x, weight, bias):
    """x, weight and bias must share one floating dtype and one device (named ValueError)."""
    if not weight.is_floating_point():
        raise ValueError(f"weight must be a floating point tensor, got dtype={weight.dtype}")
    for name, t in (("x", x), ("bias", bias)):
        if t is None:
            continue
        if t.dtype != weight.dtype:
            raise ValueError(
                f"{name} must have the dtype of weight ({weight.dtype}), got {name}.dtype={t.dtype}; "
                f"cast one of them, e.g. {name}.to(weight.dtype)"
            )
        if t.device != weight.device:
            raise ValueError(
                f"{name} must be on the device of weight ({weight.device}), got "
                f"{name}.device={t.device}; move one of them, e.g. {name}.to(weight.device)"
            )


_SPARSE_LAYOUTS = (torch.sparse_coo, torch.sparse_csr)


def is_sparse_tensor(x) -> bool:
    """Whether ``x`` is a torch sparse COO or CSR tensor (the sparse inputs of this module).

    Example:

    >>> import torch
    >>> from pyro_ar.utility import is_sparse_tensor
    >>> is_sparse_tensor(torch.eye(3).to_sparse()), is_sparse_tensor(torch.eye(3))
    (True, False)
    """
    return isinstance(x, torch.Tensor) and x.layout in _SPARSE_LAYOUTS


def _nonzeros(x):
    """(rows, cols, values) of a 2-D sparse COO / CSR tensor, duplicates summed."""
    if x.layout == torch.sparse_csr:
        crow = x.crow_indices()
        rows = torch.repeat_interleave(torch.arange(len(crow) - 1, device=x.device), crow.diff())
        return rows, x.col_indices(), x.values()
    x = x.coalesce()
    return x.indices()[0], x.indices()[1], x.values()


class _EntryGather(torch.autograd.Function):
    """``weight[rows, cols]`` whose gradient is a COO tensor of the entries used."""

    @staticmethod
    def forward(ctx, weight, rows, cols):
        ctx.save_for_backward(rows, cols)
        ctx.shape = weight.shape
        flat = (rows * weight.shape[1] + cols).reshape(-1)
        return weight.reshape(-1).index_select(0, flat).reshape(rows.shape)

    @staticmethod
    def backward(ctx, grad):
        rows, cols = ctx.saved_tensors
        index = torch.stack([rows.reshape(-1), cols.reshape(-1)])
        g = torch.sparse_coo_tensor(index, grad.reshape(-1), ctx.shape, check_invariants=False)
        return g, None, None


def gather_entries(weight: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor,
                   sparse: bool = True) -> torch.Tensor:
    """Single entries ``weight[rows, cols]`` of a 2-D tensor (``rows``, ``cols`` of one shape).

    With ``sparse`` the gradient of ``weight`` is a sparse COO tensor of its shape holding
    only the entries gathered (sparse in both dimensions; duplicates are summed when it is
    coalesced): a step costs O(entries), not O(rows x D). Otherwise a dense gradient.

    Example:

    >>> import torch
    >>> from pyro_ar.utility import gather_entries
    >>> W = torch.arange(12.0).reshape(3, 4).requires_grad_()
    >>> gather_entries(W, torch.tensor([2, 0]), torch.tensor([1, 3])).sum().backward()
    >>> W.grad.coalesce().indices().tolist()          # (class, feature) pairs
    [[0, 2], [3, 1]]
    """
    if sparse:
        return _EntryGather.apply(weight, rows, cols)
    return weight[rows, cols]


def embed_inputs(x, embedding: torch.Tensor, sparse: bool = True) -> torch.Tensor:
    r"""The input embedding :math:`h = x E` of a batch ``x`` (B, D) with ``embedding`` E (D, r).

    For a torch sparse ``x`` (COO or CSR) only the rows of E at the non-zero features are
    gathered (O(nnz r); with ``sparse`` a row-sparse gradient of E); a dense ``x`` is one
    matrix product.

    Example:

    >>> import torch
    >>> from pyro_ar.utility import embed_inputs
    >>> x, E = torch.tensor([[0.0, 2.0, 0.0], [1.0, 0.0, 1.0]]), torch.randn(3, 2)
    >>> torch.allclose(embed_inputs(x.to_sparse(), E), x @ E)
    True
    """
    if not is_sparse_tensor(x):
        return x @ embedding
    if x.dim() != 2 or x.shape[1] != embedding.shape[0]:
        raise ValueError(f"x must have shape (B, {embedding.shape[0]}) matching the embedding "
                         f"{tuple(embedding.shape)}, got x.shape={tuple(x.shape)}")
    rows, cols, vals = _nonzeros(x)
    e = F.embedding(cols, embedding, sparse=sparse) * vals.unsqueeze(-1)
    return e.new_zeros((x.shape[0], embedding.shape[1])).index_add(0, rows, e)


class LinearWeights:
    r"""The class side of a linear utility :math:`\psi_{nk} = x_n \cdot t(w_k) + t(b_k)`:
    dense weights ``weight`` (K, D) and ``bias`` (K,) or None -- one *layout* of W, owning
    how its classes are read for a batch of inputs.

    * :meth:`rows` -- :math:`t(w_k), t(b_k)` at class indices (a dense x multiplies them);
    * :meth:`entries` -- single entries :math:`t(W_{kj})` (a sparse x, from its non-zeros);
    * :meth:`product` -- :math:`x\,t(W)^\top + t(b)` over all K classes (O(K)).

    The gathers touch the classes asked for only (O(m D) or O(m nnz) for m classes, never
    O(K)); with ``sparse`` their gradients are sparse. ``transform`` t (elementwise; None is
    the identity) is applied to the gathered values only, e.g. :math:`t(w) = w^2` for the
    variance of a linear utility under a diagonal Gaussian. Other layouts subclass this one
    (:class:`~pyro_ar.weight_pattern.PatternWeights`: W on a pattern of entries);
    :class:`LinearUtility` multiplies any layout with its inputs.

    Example:

    >>> import torch
    >>> from pyro_ar.utility import LinearWeights
    >>> lw = LinearWeights(torch.arange(6.0).reshape(3, 2), torch.zeros(3))
    >>> lw.rows(torch.tensor([2]))[0].tolist(), lw.product(torch.ones(1, 2)).tolist()
    ([[4.0, 5.0]], [[1.0, 5.0, 9.0]])
    """

    #: whether :meth:`rows` exists (else a dense x is read through its non-zeros too)
    has_rows = True

    def __init__(self, weight: torch.Tensor, bias: Optional[torch.Tensor] = None, sparse: bool = False,
                 transform=None):
        for name, t in (("weight", weight), ("bias", bias)):
            if not (isinstance(t, torch.Tensor) or (name == "bias" and t is None)):
                raise ValueError(f"{name} must be a tensor, got {name}={t!r}")
        if weight.dim() != 2:
            raise ValueError(f"weight must have shape (num_classes, D), got {tuple(weight.shape)}")
        if bias is not None and bias.shape != weight.shape[:1]:
            raise ValueError(
                f"bias must have shape (num_classes,)=({weight.shape[0]},), got {tuple(bias.shape)}"
            )
        _check_same_kind(None, weight, bias)
        self.weight, self.bias, self.sparse, self.transform = weight, bias, bool(sparse), transform
        self.num_classes, self.num_features = weight.shape

    def _t(self, t):
        return t if self.transform is None or t is None else self.transform(t)

    def rows(self, index: torch.Tensor):
        """``(t(weight[index]), t(bias[index]) or None)``, shapes ``index.shape + (D,)``, ``index.shape``."""
        return self._t(F.embedding(index, self.weight, sparse=self.sparse)), self.bias_at(index)

    def bias_at(self, index: torch.Tensor) -> Optional[torch.Tensor]:
        """``t(bias[index])`` (sparse-gradient gather when ``sparse``), or None."""
        if self.bias is None:
            return None
        if index.dim() == 1:  # (no reshape: one autograd node less)
            return self._t(torch.gather(self.bias, 0, index, sparse_grad=self.sparse))
        flat = index.reshape(-1)
        return self._t(torch.gather(self.bias, 0, flat, sparse_grad=self.sparse).reshape(index.shape))

    def entries(self, classes: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """``t(weight[classes, cols])`` (one shape), a COO gradient with ``sparse`` (:func:`gather_entries`)."""
        return self._t(gather_entries(self.weight, classes, cols, self.sparse))

    def product(self, x) -> torch.Tensor:
        r""":math:`x\,t(W)^\top + t(b)`, shape ``x.shape[:-1] + (K,)``: one fused matrix product
        for a dense x, torch's sparse-dense product for a sparse one."""
        W, b = self._t(self.weight), self._t(self.bias)
        if not is_sparse_tensor(x):
            return F.linear(x, W, b)
        psi = x @ W.T
        return psi if b is None else psi + b

    def map(self, fn) -> "LinearWeights":
        """The same layout with ``fn`` applied to its float tensors (e.g. detach and cast)."""
        return LinearWeights(fn(self.weight), None if self.bias is None else fn(self.bias), self.sparse,
                             self.transform)

    def __repr__(self):
        return f"LinearWeights(K={self.num_classes}, D={self.num_features}, sparse={self.sparse})"


class LinearUtility(Utility):
    r"""Lazy linear utilities :math:`\psi_{nk} = x_n \cdot w_k + b_k`.

    :param x: features, shape ``batch_shape + (D,)``.
    :param weight: class weights, shape ``(K, D)``.
    :param bias: class biases, shape ``(K,)``, or None.
    :param bool sparse: gather rows with ``F.embedding(..., sparse=True)`` so that the
        gradients of ``weight`` and ``bias`` are sparse (only the gathered rows). Use an
        optimizer that accepts sparse gradients (e.g. ``pyro.optim.SparseAdam``, or
        :class:`pyro_ar.optim` ones).

    ``x``, ``weight`` and ``bias`` must share one floating dtype and one device (a
    ``ValueError`` naming the argument otherwise: no silent promotion).

    ``x`` may be a 2-D torch sparse (COO or CSR) batch: the utilities then come from its
    non-zeros only (see the module docstring), O(nnz(x) m) for m classes per row, and with
    ``sparse=True`` the gradient of ``weight`` is sparse in both dimensions.

    This is the one computation of "rows of x times gathered rows of W plus b": the
    weights are a layout (:class:`LinearWeights`; :meth:`of` takes any, e.g. a
    :class:`~pyro_ar.weight_pattern.PatternWeights`), :meth:`low_rank` builds the low-rank
    :math:`W = V E^\top` one, and the training likelihoods, :mod:`pyro_ar.evaluation` and the
    class-sharded model all read utilities through it.

    Example:

    >>> import torch, pyro_ar as ar
    >>> x, W, b = torch.randn(4, 8), torch.randn(1000, 8), torch.zeros(1000)
    >>> psi = ar.LinearUtility(x, W, b)             # never forms the 4 x 1000 matrix
    >>> psi.gather_shared(torch.tensor([3, 7])).shape  # utilities of two classes for all rows
    torch.Size([4, 2])
    >>> torch.allclose(psi.gather_shared(torch.tensor([3])), x @ W[3:4].T)
    True
    """

    _reference = "weight"

    def __init__(self, x: torch.Tensor, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                 sparse: bool = False):
        self._set(x, LinearWeights(weight, bias, sparse))

    @classmethod
    def of(cls, x, weights: LinearWeights) -> "LinearUtility":
        """The utilities of inputs ``x`` (``batch_shape + (D,)``) under a weight layout."""
        if not isinstance(weights, LinearWeights):
            raise ValueError(f"weights must be a LinearWeights layout, got {type(weights).__name__}")
        u = cls.__new__(cls)
        u._set(x, weights)
        return u

    @classmethod
    def low_rank(cls, x, weight: torch.Tensor, embedding: torch.Tensor, bias: Optional[torch.Tensor] = None,
                 sparse: bool = False) -> "LinearUtility":
        r"""Utilities of a low-rank :math:`W = V E^\top`: :math:`\psi_n = (x_n E) V^\top + b`,
        the input embedding :math:`h = xE` by :func:`embed_inputs` (O(nnz r) for a sparse x),
        then the lazy output layer of ``weight`` V (K, r). W is never formed.

        Example:

        >>> import torch, pyro_ar as ar
        >>> x, V, E = torch.randn(2, 5), torch.randn(9, 3), torch.randn(5, 3)
        >>> torch.allclose(ar.LinearUtility.low_rank(x, V, E).full(), x @ (V @ E.T).T, atol=1e-5)
        True
        """
        return cls(embed_inputs(x, embedding, sparse), weight, bias, sparse)

    def _set(self, x, weights: LinearWeights):
        if not all(hasattr(x, a) for a in ("dim", "shape", "dtype", "device")):
            raise ValueError(f"x must be a tensor of shape batch_shape + (D,), got x={x!r}")
        D = weights.num_features
        if x.dim() < 1 or x.shape[-1] != D:
            raise ValueError(f"x must have shape batch_shape + (D,) with D={D} matching the weights "
                             f"{weights!r}, got x.shape={tuple(x.shape)}")
        if (is_sparse_tensor(x) or not weights.has_rows) and x.dim() != 2:
            what = "a sparse x" if is_sparse_tensor(x) else f"x of {weights!r}"
            raise ValueError(f"{what} must be 2-D (B, D), got x.shape={tuple(x.shape)}")
        _check_same_kind(x, weights.weight, None)  # (the layout checked its bias)
        self.x, self.weights = x, weights
        self.num_classes, self.batch_shape = weights.num_classes, x.shape[:-1]
        self._through_nonzeros = is_sparse_tensor(x) or not weights.has_rows
        self._nonzeros = None

    weight = property(lambda self: self.weights.weight, doc="the layout's weight tensor")
    bias = property(lambda self: self.weights.bias, doc="the layout's bias (K,), or None")
    sparse = property(lambda self: self.weights.sparse, doc="whether the gathers' gradients are sparse")

    def with_inputs(self, x) -> "LinearUtility":
        """The utilities of other inputs ``x`` under the same weights (no copy of them)."""
        return type(self).of(x, self.weights)

    def rows(self, index):
        """``(weight[index], bias[index])`` -- sparse-gradient gathers when ``sparse``."""
        if _validating():
            check_index(index, self.num_classes)
        return self.weights.rows(index)

    @property
    def _nz(self):
        """(rows, cols, values) of x's non-zeros, computed on first use."""
        if self._nonzeros is None:
            self._nonzeros = _nonzeros(self.x if is_sparse_tensor(self.x) else self.x.to_sparse())
        return self._nonzeros

    def _nonzero_psi(self, index):
        r"""Utilities at classes ``index`` (B, m) from x's non-zeros only:
        :math:`\psi_{nj} = b_{k} + \sum_{e: n_e = n} v_e W_{k j_e}`, k = index[n, j]."""
        if _validating():
            check_index(index, self.num_classes)
        rows, cols, vals = self._nz
        classes = index.index_select(0, rows)  # (nnz, m): the classes asked of each non-zero
        w = self.weights.entries(classes, cols.unsqueeze(-1).expand_as(classes))
        psi = w.new_zeros(index.shape).index_add(0, rows, w * vals.unsqueeze(-1))
        b = self.weights.bias_at(index)
        return psi if b is None else psi + b

    def _row_index(self, index):
        """A class index broadcast to (B, m) for the non-zeros path (named error otherwise)."""
        shape = broadcast_shape(self.batch_shape, index.shape[:-1])
        if shape != self.batch_shape:
            raise ValueError(f"with a sparse x of batch shape {tuple(self.batch_shape)} the class "
                             f"index must broadcast to it, got index.shape={tuple(index.shape)}")
        return index.expand(shape + index.shape[-1:])

    def gather(self, index):
        if self._through_nonzeros:
            return self._nonzero_psi(self._row_index(index))
        w, b = self.rows(index)  # index.shape + (D,)
        psi = (w @ self.x.unsqueeze(-1)).squeeze(-1)  # batched (m, D) @ (D, 1)
        return psi if b is None else psi + b

    def gather_shared(self, index):
        if self._through_nonzeros:
            return self._nonzero_psi(index.expand(self.batch_shape + index.shape))
        w, b = self.rows(index)  # (m, D)
        psi = self.x @ w.T
        return psi if b is None else psi + b

    def gather_label_and_shared(self, labels, index):
        if self._through_nonzeros:  # one entry gather, one sparse gradient
            labels = self._row_index(labels.unsqueeze(-1))
            psi = self._nonzero_psi(torch.cat([labels, index.expand(self.batch_shape + index.shape)], -1))
            return psi[..., :1], psi[..., 1:]
        n = labels.numel()
        w, b = self.rows(torch.cat([labels.reshape(-1), index]))  # one gather, one sparse grad
        shape = broadcast_shape(self.batch_shape, labels.shape)
        # (no reshape or expand to the shape a tensor has: each would be one more autograd node)
        w_y = w[:n] if labels.dim() == 1 else w[:n].reshape(labels.shape + w.shape[-1:])
        psi_y = (self.x * w_y).sum(-1, keepdim=True)
        if psi_y.shape[:-1] != shape:
            psi_y = psi_y.expand(shape + (1,))
        psi_neg = self.x @ w[n:].T
        if b is not None:
            psi_y = psi_y + b[:n].reshape(labels.shape + (1,))
            psi_neg = psi_neg + b[n:]
        return psi_y, psi_neg

    def full(self):
        return self.weights.product(self.x)

    def expand(self, batch_shape):
        if self._through_nonzeros:
            if torch.Size(batch_shape) != self.batch_shape:
                raise ValueError(f"a {type(self).__name__} of a sparse x (or of {self.weights!r}) cannot "
                                 f"be expanded from {tuple(self.batch_shape)} to {tuple(batch_shape)}")
            return self
        if torch.Size(batch_shape) == self.batch_shape:  # (immutable: itself)
            return self
        return self.with_inputs(self.x.expand(torch.Size(batch_shape) + self.x.shape[-1:]))

    def __repr__(self):
        return (f"{type(self).__name__}(batch_shape={tuple(self.batch_shape)}, num_classes="
                f"{self.num_classes}, weights={self.weights!r}"
                f"{', sparse x' if is_sparse_tensor(self.x) else ''})")


def as_utility(utility) -> Utility:
    """Wrap a tensor of logits as a :class:`DenseUtility`; pass a :class:`Utility` through.

    Example:

    >>> import torch, pyro_ar as ar
    >>> type(ar.utility.as_utility(torch.zeros(2, 5))).__name__
    'DenseUtility'
    """
    if isinstance(utility, Utility):
        return utility
    if isinstance(utility, torch.Tensor):
        return DenseUtility(utility)
    raise ValueError(
        f"utility must be a tensor of shape batch_shape + (K,) or a pyro_ar Utility, got {utility!r}"
    )

r"""Weights on a pattern: a K x D matrix W that may be non-zero only at some (class, feature)
entries, and the lazy linear utilities of such a W.

For sparse inputs with many classes and few rows per class a full K x D W does not fit, and
a low rank :math:`W = V E^\top` cannot remember which features go with which class. Keeping
W on the entries seen in training (:meth:`WeightPattern.from_cooccurrence`) is full rank at
the memory of the data; its layout :class:`PatternWeights` lets
:class:`~pyro_ar.utility.LinearUtility` (:class:`PatternLinearUtility`) compute
:math:`\psi_{nk} = b_k + \sum_j x_{nj} W_{kj}` for the classes a likelihood asks for by
looking each non-zero's entry up (a hash table: O(1) expected), with sparse gradients of the entries found.
"""

import warnings
from typing import Optional

import numpy as np
import torch

try:  # scipy is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

from .numerics import check_int
from .utility import LinearUtility, LinearWeights, _check_same_kind, _validating, check_index, is_sparse_tensor

__all__ = ["WeightPattern", "PatternWeights", "PatternLinearUtility"]


#: the hash of the flat keys: :math:`h = (a \cdot (k \bmod p)) \bmod p` with the prime
#: :math:`p = 2^{31} - 1` (products below :math:`2^{62}`: no int64 overflow), scaled to M slots
_HASH_PRIME, _HASH_MULTIPLIER = 2**31 - 1, 1_103_515_245


def _slot(keys: torch.Tensor, num_slots: int) -> torch.Tensor:
    """The home slot in [0, ``num_slots``) of each flat key (:data:`_HASH_PRIME`)."""
    h = torch.remainder(keys, _HASH_PRIME).mul_(_HASH_MULTIPLIER).remainder_(_HASH_PRIME)
    return h.mul_(num_slots).div_(_HASH_PRIME, rounding_mode="floor")


class WeightPattern:
    r"""The (class, feature) entries where a K x D weight matrix may be non-zero.

    Stored as the sorted flat keys :math:`k D + j` (int64); the entry of any (class, feature)
    pair is found in an open-addressing hash table of the keys (:meth:`lookup`, O(1) expected;
    built at the first lookup, 12 bytes per slot at 4 to 8 slots per entry), so a row's
    utility never touches the other entries. :meth:`from_cooccurrence` builds the pattern of a training
    set: the features seen with each class,

    .. math::  \mathcal{P} = \{(k, j) : \exists n,\ y_n = k,\ x_{nj} \ne 0\},

    which for sparse inputs with few rows per class is a tiny part of K x D (WordNet's reverse
    dictionary: 7.7e5 of 7.2e8 entries).

    :param keys: int64 tensor of distinct flat keys :math:`k D + j` (sorted here).
    :param int num_classes: K.
    :param int num_features: D.

    Example:

    >>> import torch
    >>> from pyro_ar.weight_pattern import WeightPattern
    >>> pattern = WeightPattern(torch.tensor([5, 0, 3]), num_classes=2, num_features=3)
    >>> pos, hit = pattern.lookup(torch.tensor([1, 1]), torch.tensor([2, 1]))   # (1, 2), (1, 1)
    >>> hit.tolist(), pattern.keys[pos[hit]].tolist()
    ([True, False], [5])
    """

    def __init__(self, keys: torch.Tensor, num_classes: int, num_features: int):
        num_classes = check_int("num_classes", num_classes, low=1)
        num_features = check_int("num_features", num_features, low=1)
        if num_classes * num_features >= 2**63:
            raise ValueError(f"num_classes * num_features must be below 2**63 (the flat keys k D + j are int64), "
                             f"got num_classes={num_classes}, num_features={num_features}")
        if not isinstance(keys, torch.Tensor) or keys.dim() != 1 or keys.dtype != torch.int64:
            raise ValueError(f"keys must be a 1-D int64 tensor, got {getattr(keys, 'dtype', keys)!r}")
        if bool((keys[1:] < keys[:-1]).any()):  # (keys already sorted -- a fitted pattern's -- are kept)
            keys = keys.sort().values
        if len(keys) and (keys[0] < 0 or keys[-1] >= num_classes * num_features
                          or bool((keys[1:] == keys[:-1]).any())):
            raise ValueError(f"keys must be distinct flat indices in [0, {num_classes * num_features})")
        self.keys, self.num_classes, self.num_features = keys, num_classes, num_features
        self._columns = self._table = None

    @classmethod
    def from_cooccurrence(cls, rows, cols, labels, num_classes: int, num_features: int):
        """The pattern of the (label of row, feature) pairs of a data set's non-zeros
        (``rows``, ``cols``: the non-zeros' coordinates; ``labels``: each row's class)."""
        num_classes = check_int("num_classes", num_classes, low=1)
        num_features = check_int("num_features", num_features, low=1)
        check_index(labels, num_classes, "labels")
        check_index(cols, num_features, "cols")
        check_index(rows, len(labels), "rows")
        if rows.shape != cols.shape or rows.dim() != 1:
            raise ValueError(f"rows and cols must be 1-D of one length (the non-zeros' coordinates), got shapes "
                             f"{tuple(rows.shape)} and {tuple(cols.shape)}")
        keys = labels.long()[rows.long()] * num_features + cols.long()
        return cls(torch.unique(keys), num_classes, num_features)

    def __len__(self):
        return len(self.keys)

    def to(self, device) -> "WeightPattern":
        return WeightPattern(self.keys.to(device), self.num_classes, self.num_features) \
            if self.keys.device != torch.device(device) else self

    def lookup(self, classes: torch.Tensor, cols: torch.Tensor):
        """``(position, hit)`` of the entries (classes, cols) (shapes that broadcast): ``hit``
        says whether the entry is in the pattern, ``position`` where (0 when not), read from
        the pattern's hash table (built at the first lookup, at most 1/4 full). While Pyro's
        validation is on, classes outside ``[0, K)`` and cols outside ``[0, D)`` (whose flat
        key would alias another entry's) raise ``ValueError``."""
        if _validating():
            check_index(classes, self.num_classes, "classes")
            check_index(cols, self.num_features, "cols")
            if classes.shape != cols.shape:
                try:
                    torch.broadcast_shapes(classes.shape, cols.shape)
                except RuntimeError:
                    raise ValueError(f"classes and cols must have shapes that broadcast, got {tuple(classes.shape)} "
                                     f"and {tuple(cols.shape)}") from None
        key = classes * self.num_features + cols
        if not len(self.keys):  # an empty pattern: no entry is found
            return torch.zeros_like(key), torch.zeros_like(key, dtype=torch.bool)
        if len(self.keys) >= 2**30:  # (hash products would pass 2^63: binary search)
            pos = torch.searchsorted(self.keys, key).clamp_(max=len(self.keys) - 1)
            return pos, self.keys[pos] == key
        table_key, table_pos, num_slots = self._hash_table()
        shape, key = key.shape, key.reshape(-1)
        slot = _slot(key, num_slots)
        found_key = table_key[slot]  # the home slots of all the keys, then the few that probe on
        hit, pos = found_key == key, table_pos[slot].long()
        active = (~hit & (found_key >= 0)).nonzero().squeeze(1)
        slot = slot[active]
        while len(active):  # linear probing: stop at the key or at an empty slot (-1)
            slot = slot + 1
            found_key = table_key[slot]
            found = found_key == key[active]
            rows = active[found]
            hit[rows], pos[rows] = True, table_pos[slot[found]].long()
            go_on = (~found & (found_key >= 0)).nonzero().squeeze(1)
            active, slot = active[go_on], slot[go_on]
        return pos.masked_fill_(~hit, 0).reshape(shape), hit.reshape(shape)

    def _hash_table(self):
        r"""The keys in an open-addressing table (built once and kept): ``(table keys (-1: empty),
        their positions in keys, number of home slots M)``, M the power of 2 at least 4 nnz
        (load at most 1/4: a search probes about 1.2 slots, against 20 steps of a binary search
        of 10^6 keys; 50 MB for GCIDE's 950k entries). A key's home slot is :func:`_slot`;
        linear probing, laid out without wrapping: with the keys sorted by home slot :math:`h_i`, key i sits at
        :math:`s_i = \max(h_i, s_{i-1} + 1) = i + \max_{i' \le i}(h_{i'} - i')` (a cumulative
        max), so every slot from a key's home to its own is taken and a search from the home
        slot meets the key before any empty slot; the table ends with an empty slot."""
        if self._table is None:
            n, device = len(self.keys), self.keys.device
            num_slots = 1 << ((2 * n - 1).bit_length() + 1)
            home = _slot(self.keys, num_slots)
            order = torch.argsort(home, stable=True)
            i = torch.arange(n, device=device)
            place = torch.cummax(home[order] - i, 0).values + i
            size = max(num_slots, int(place[-1]) + 1) + 1
            table_key = torch.full((size,), -1, dtype=torch.int64, device=device)
            table_pos = torch.zeros(size, dtype=torch.int32 if n < 2**31 else torch.int64, device=device)
            table_key[place], table_pos[place] = self.keys[order], order.to(table_pos.dtype)
            self._table = (table_key, table_pos, num_slots)
        return self._table

    def coordinates(self):
        """(classes, features) of the pattern's entries, in the order of ``keys``."""
        return self.keys // self.num_features, self.keys % self.num_features

    def columns(self):
        """The pattern by feature (the CSR layout of :math:`W^\top`), built once and kept:
        ``(starts (D + 1,), classes, positions)``; the entries of feature j are
        ``starts[j]:starts[j + 1]``, of class ``classes[i]`` and at ``positions[i]`` in ``keys``."""
        if self._columns is None:
            k, j = self.coordinates()
            order = torch.argsort(j * self.num_classes + k)
            starts = torch.zeros(self.num_features + 1, dtype=torch.int64, device=self.keys.device)
            starts[1:] = torch.bincount(j, minlength=self.num_features).cumsum(0)
            self._columns = (starts, k[order], order)
        return self._columns

    def _check_values(self, values) -> None:
        if not isinstance(values, torch.Tensor) or values.shape != (len(self),):
            raise ValueError(f"values must be a tensor of shape ({len(self)},) (one per entry of the pattern), got "
                             f"{tuple(values.shape) if isinstance(values, torch.Tensor) else values!r}")

    def dense(self, values: torch.Tensor) -> torch.Tensor:
        """The K x D matrix with ``values`` at the pattern (O(K D): for small problems and tests)."""
        self._check_values(values)
        W = values.new_zeros(self.num_classes * self.num_features)
        return W.index_put((self.keys.to(values.device),), values).reshape(self.num_classes, self.num_features)

    def sparse(self, values: torch.Tensor) -> torch.Tensor:
        """The K x D torch sparse (COO, coalesced) matrix with ``values`` at the pattern."""
        self._check_values(values)
        k, j = self.to(values.device).coordinates()
        return torch.sparse_coo_tensor(torch.stack([k, j]), values, (self.num_classes, self.num_features),
                                       is_coalesced=True, check_invariants=False)

    def __repr__(self):
        return f"WeightPattern(K={self.num_classes}, D={self.num_features}, nnz={len(self)})"


class PatternWeights(LinearWeights):
    r"""The layout of a W that is non-zero only on a :class:`WeightPattern`: ``weight`` holds
    the pattern's entries (nnz,), ``bias`` (K,) or None.

    A class's utility at a row is read entry by entry from the row's non-zeros
    (:meth:`entries`: each looks its :math:`W_{kj}` up in the pattern's hash table, zero
    off the pattern; with ``sparse`` a gradient only at the entries found), so
    :class:`~pyro_ar.utility.LinearUtility` reads even a dense x through its non-zeros;
    :meth:`product` multiplies by the torch-sparse K x D matrix, never a dense one.

    Example:

    >>> import torch
    >>> from pyro_ar.weight_pattern import PatternWeights, WeightPattern
    >>> pattern = WeightPattern(torch.tensor([0, 4, 5]), num_classes=2, num_features=3)
    >>> pw = PatternWeights(pattern, torch.tensor([1.0, 2.0, 3.0]))   # W = [[1, 0, 0], [0, 2, 3]]
    >>> pw.entries(torch.tensor([1, 1, 0]), torch.tensor([2, 0, 0])).tolist()
    [3.0, 0.0, 1.0]
    """

    has_rows = False

    def __init__(self, pattern: WeightPattern, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                 sparse: bool = False):
        if not isinstance(pattern, WeightPattern):
            raise ValueError(f"pattern must be a WeightPattern, got {pattern!r}")
        if not isinstance(weight, torch.Tensor) or weight.shape != (len(pattern),):
            raise ValueError(f"weight must be a tensor of shape ({len(pattern)},) (the pattern's "
                             f"entries), got {getattr(weight, 'shape', weight)!r}")
        if bias is not None and (not isinstance(bias, torch.Tensor) or bias.shape != (pattern.num_classes,)):
            raise ValueError(f"bias must have shape ({pattern.num_classes},), got {getattr(bias, 'shape', bias)!r}")
        _check_same_kind(None, weight, bias)
        self.pattern, self.weight, self.bias = pattern.to(weight.device), weight, bias
        self.sparse, self.transform = bool(sparse), None
        self._transposed = None  # (weight's version, W^T as scipy CSR) of _compiled_product
        self.num_classes, self.num_features = pattern.num_classes, pattern.num_features

    @classmethod
    def from_sparse(cls, W: torch.Tensor, bias: Optional[torch.Tensor] = None) -> "PatternWeights":
        """The layout of a torch-sparse (COO) K x D matrix: its stored entries are the pattern."""
        if not isinstance(W, torch.Tensor) or W.layout != torch.sparse_coo or W.dim() != 2 or W.dense_dim():
            got = f"{W.layout} of shape {tuple(W.shape)}" if isinstance(W, torch.Tensor) else repr(W)
            raise ValueError(f"W must be a 2-D torch sparse COO tensor (K x D, scalar entries), got {got} "
                             "(a dense K x D matrix: W.to_sparse())")
        W = W.coalesce()
        K, D = W.shape
        k, j = W.indices()
        return cls(WeightPattern(k * D + j, K, D), W.values(), bias)

    def rows(self, index):
        raise NotImplementedError("PatternWeights has no dense rows: read x through its non-zeros (entries)")

    def entries(self, classes, cols):
        """:math:`W_{kj}` at the (classes, cols) pairs, 0 off the pattern. With ``sparse`` the
        gradient holds the entries found only: a pair off the pattern is no entry of W, so a
        lazy optimizer (:class:`~pyro_ar.optim.LazyAdam`) leaves every entry it did not use
        untouched -- no zero-gradient step (moment decay, step count) at an entry unrelated
        to the pair -- and the gradient to sum is that much shorter (most of
        the negatives' pairs miss: 84 % on WordNet's reverse dictionary)."""
        pos, hit = self.pattern.lookup(classes, cols)
        if not len(self.pattern):  # (W is all zeros: no entry to gather)
            return self.weight.new_zeros(pos.shape)
        if not self.sparse:
            return torch.gather(self.weight, 0, pos.reshape(-1)).reshape(pos.shape) * hit
        found = hit.reshape(-1).nonzero().squeeze(1)
        w = torch.gather(self.weight, 0, pos.reshape(-1)[found], sparse_grad=True)
        return self.weight.new_zeros(pos.numel()).index_put((found,), w).reshape(pos.shape)

    def product(self, x):
        r"""The (B, K) utilities :math:`\psi_{nk} = b_k + \sum_j x_{nj} W_{kj}` of all classes.

        A sparse x is read through its non-zeros: each :math:`x_{nj}` adds
        :math:`x_{nj} W_{kj}` for the classes k of feature j's entries
        (:meth:`WeightPattern.columns`), O(sum of those column lengths), never a dense
        B x D or K x D matrix nor a transposed copy of W per call."""
        if not is_sparse_tensor(x):
            psi = torch.sparse.mm(self.pattern.sparse(self.weight), x.T).T
            return psi if self.bias is None else psi + self.bias
        if self._compiled_product_applies(x):
            psi = self._compiled_product(x)
            return psi if self.bias is None else psi + self.bias
        with warnings.catch_warnings():  # torch's note that its sparse CSR support is beta
            warnings.simplefilter("ignore", UserWarning)
            x = x.to_sparse_coo().coalesce()
        (n, j), v = x.indices(), x.values()
        starts, classes, positions = self.pattern.columns()
        first, count = starts[j], starts[j + 1] - starts[j]
        which = torch.repeat_interleave(torch.arange(len(v), device=v.device), count)
        entry = torch.arange(len(which), device=v.device) - (count.cumsum(0) - count)[which] + first[which]
        K = self.num_classes
        flat = (n[which] * K + classes[entry]).to(v.device)
        psi = self.weight.new_zeros(x.shape[0] * K).index_add(0, flat, v[which].to(self.weight.dtype)
                                                               * self.weight[positions[entry]])
        psi = psi.reshape(x.shape[0], K)
        return psi if self.bias is None else psi + self.bias

    def _compiled_product(self, x) -> torch.Tensor:
        r"""The (B, K) :math:`x W^\top` of a sparse x as one compiled sparse-sparse product
        (scipy: x as CSR times :math:`W^\top` as the D x K CSR of
        :meth:`WeightPattern.columns`, densified): the same sums as the gather-and-add of
        :meth:`product`, several times less CPU where a few common features reach most classes
        (the WordNet synsets: a word such as "of" in half of the 123k classes' patterns).
        No autograd: for predictions and held-out scores."""
        npdtype = np.float64 if self.weight.dtype == torch.float64 else np.float32
        version = (self.weight._version, self.weight.data_ptr())
        if self._transposed is None or self._transposed[0] != version:  # (kept across a pass's chunks)
            starts, classes, positions = self.pattern.columns()
            WT = sp.csr_matrix((self.weight.detach()[positions].numpy().astype(npdtype, copy=False),
                                classes.numpy(), starts.numpy()), shape=(self.num_features, self.num_classes))
            self._transposed = (version, WT)
        WT = self._transposed[1]
        with warnings.catch_warnings():  # torch's note that its sparse CSR support is beta
            warnings.simplefilter("ignore", UserWarning)
            xc = x.to_sparse_csr()
        X = sp.csr_matrix((xc.values().numpy().astype(npdtype, copy=False), xc.col_indices().numpy(),
                           xc.crow_indices().numpy()), shape=tuple(x.shape))
        return torch.from_numpy((X @ WT).toarray())

    def _compiled_product_applies(self, x) -> bool:
        """Whether :meth:`product` may take :meth:`_compiled_product`: scipy present, CPU
        tensors of float32/64, a 2-D x, and no gradient asked for the weights."""
        needs_grad = torch.is_grad_enabled() and (self.weight.requires_grad or (
            self.bias is not None and self.bias.requires_grad))
        return (sp is not None and not needs_grad and x.dim() == 2 and x.device.type == "cpu"
                and self.weight.device.type == "cpu" and self.weight.dtype in (torch.float32, torch.float64)
                and len(self.pattern) > 0)

    def map(self, fn) -> "PatternWeights":
        return PatternWeights(self.pattern, fn(self.weight), None if self.bias is None else fn(self.bias),
                              self.sparse)

    def __repr__(self):
        return (f"PatternWeights(K={self.num_classes}, D={self.num_features}, nnz(W)={len(self.pattern)}, "
                f"sparse={self.sparse})")


class PatternLinearUtility(LinearUtility):
    r"""Linear utilities :math:`\psi_{nk} = b_k + \sum_{j} x_{nj} W_{kj}` with W non-zero only
    on a :class:`WeightPattern`: :class:`~pyro_ar.utility.LinearUtility` of the
    :class:`PatternWeights` layout (``weight`` holds the pattern's entries (nnz,)).

    For a sparse x the utilities of m classes per row cost O(nnz(x) m) (expected): each
    non-zero :math:`x_{nj}` looks its entry :math:`W_{kj}` up (zero off the pattern), with a
    gradient only at the entries found (sparse, for :class:`pyro_ar.optim.LazyAdam`). A dense
    x is used through its non-zeros likewise.

    Example:

    >>> import torch
    >>> from pyro_ar.weight_pattern import PatternLinearUtility, WeightPattern
    >>> pattern = WeightPattern(torch.tensor([0, 4, 5]), num_classes=2, num_features=3)
    >>> w, b, x = torch.tensor([1.0, 2.0, 3.0]), torch.zeros(2), torch.tensor([[1.0, 1.0, 1.0]])
    >>> psi = PatternLinearUtility(x.to_sparse(), pattern, w, b)
    >>> psi.full().tolist()                      # W = [[1, 0, 0], [0, 2, 3]]
    [[1.0, 5.0]]
    """

    def __init__(self, x, pattern: WeightPattern, weight: torch.Tensor, bias: Optional[torch.Tensor] = None,
                 sparse: bool = False):
        self._set(x, PatternWeights(pattern, weight, bias, sparse))

    @property
    def pattern(self) -> WeightPattern:
        return self.weights.pattern

r"""Synthetic problems with known ground truth (seeded, pure torch).

* :func:`make_toy` -- covariate-free draws :math:`y_n \sim \mathrm{Categorical}(p)`,
  :math:`p_k = u_k / \sum_{k'} u_{k'}`, :math:`u_k \sim \mathrm{Uniform}(0, 1)` (the A&R
  paper's section 4.1);
* :func:`make_linear_teacher` -- :math:`y_n = \arg\max_k (x_n\cdot w_k + b_k +
  \varepsilon_{nk})` with Gumbel (softmax), Normal (probit) or Logistic noise, in row chunks
  so that K can reach 10^6;
* :func:`make_sparse_teacher` -- sparse bag-of-features inputs (controllable D and
  non-zeros per row, Zipf feature frequencies) labelled by a low-rank teacher
  :math:`y_n = \arg\max_k (x_n E v_k / \sqrt{m} + b_k + \varepsilon_{nk})` with Zipf class
  biases :math:`b_k = -a \log(k + 1)`: a learnable problem at any D and K.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Union

import torch

from ..noise import GumbelNoise, Noise, get_noise
from ..numerics import check_int

__all__ = ["ToyData", "TeacherData", "SparseTeacherData", "make_toy", "make_linear_teacher",
           "make_sparse_teacher"]


class ToyData(NamedTuple):
    """Output of :func:`make_toy`: ``y`` (int64, ``(N,)``) and ``probs`` (``(K,)``, sums to 1).

    Example:

    >>> from pyro_ar.datasets import make_toy
    >>> y, probs = make_toy(num_classes=10, num_samples=5, seed=0)
    >>> y.shape, probs.shape
    (torch.Size([5]), torch.Size([10]))
    """

    y: torch.Tensor
    probs: torch.Tensor


class TeacherData(NamedTuple):
    """Output of :func:`make_linear_teacher`: ``x`` (N, D), ``y`` (N,), ``W`` (K, D), ``b`` (K,).

    Example:

    >>> from pyro_ar.datasets import make_linear_teacher
    >>> x, y, W, b = make_linear_teacher(8, 2, 3, seed=0)
    >>> x.shape, y.shape, W.shape, b.shape
    (torch.Size([8, 2]), torch.Size([8]), torch.Size([3, 2]), torch.Size([3]))
    """

    x: torch.Tensor
    y: torch.Tensor
    W: torch.Tensor
    b: torch.Tensor


def _generator(seed: Optional[int], generator: Optional[torch.Generator]) -> torch.Generator:
    if generator is not None:
        return generator
    return torch.Generator().manual_seed(0 if seed is None else int(seed))


def _check_sizes(**sizes):
    """``name=(value, low)``: each value an integer >= low, or a ValueError naming it (check_int)."""
    for name, (value, low) in sizes.items():
        check_int(name, value, low=low)


def _teacher_labels(features: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                    draw: Callable[[tuple], torch.Tensor], max_chunk_elements: int) -> torch.Tensor:
    r"""The labels :math:`y_n = \arg\max_k(f_n\cdot w_k + b_k + \varepsilon_{nk})` of a linear
    teacher on features ``f`` (N, r), weights ``w`` (K, r) and biases ``b`` (K,), with the
    noise ``draw(shape)`` of each chunk of at most ``max_chunk_elements // K`` rows (at least 1):
    the N x K utilities are never held at once. Returns int64 (N,)."""
    N, K = features.shape[0], weight.shape[0]
    y = torch.empty(N, dtype=torch.int64)
    rows = max(1, int(max_chunk_elements) // K)
    for start in range(0, N, rows):
        stop = min(start + rows, N)
        eps = draw((stop - start, K))
        # eps <- f W^T + b + eps, in place (addmm_ with beta=1 adds to eps)
        y[start:stop] = eps.add_(bias).addmm_(features[start:stop], weight.t()).argmax(-1)
    return y


def make_toy(
    num_classes: int = 10_000,
    num_samples: int = 200_000,
    seed: Optional[int] = 0,
    generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
) -> ToyData:
    """The covariate-free toy problem of the A&R paper (section 4.1).

    Draws u_k ~ Uniform(0, 1) for k = 1..K, sets p_k = u_k / sum_k' u_k', and draws
    ``num_samples`` iid labels y_n ~ Categorical(p) (probabilities computed in float64).

    Args:
        num_classes: K.
        num_samples: N.
        seed: seed of a fresh CPU ``torch.Generator`` (ignored when ``generator`` is given).
        generator: a ``torch.Generator`` to draw from instead.
        dtype: dtype of the returned probabilities.

    Returns:
        :class:`ToyData` ``(y, probs)``: ``y`` int64 ``(N,)`` in 0..K-1, ``probs`` ``(K,)``
        the true class probabilities (sum to 1).

    Example:

    >>> from pyro_ar.datasets import make_toy
    >>> toy = make_toy(num_classes=100, num_samples=1000, seed=0)
    >>> toy.y.shape, round(toy.probs.sum().item(), 6)
    (torch.Size([1000]), 1.0)
    """
    _check_sizes(num_classes=(num_classes, 1), num_samples=(num_samples, 0))
    g = _generator(seed, generator)
    u = torch.rand(num_classes, generator=g, dtype=torch.float64)
    p = u / u.sum()
    if num_samples:
        y = torch.multinomial(p, num_samples, replacement=True, generator=g)
    else:
        y = torch.zeros(0, dtype=torch.int64)
    return ToyData(y=y.to(torch.int64), probs=p.to(dtype))


def make_linear_teacher(
    num_samples: int,
    num_features: int,
    num_classes: int,
    noise: Union[str, Noise, Callable[..., torch.Tensor]] = "gumbel",
    weight_scale: float = 1.0,
    seed: Optional[int] = 0,
    generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
    max_chunk_elements: int = 1 << 22,
) -> TeacherData:
    """Labels from a random linear "teacher": y = argmax_k (x . w_k + b_k + eps_k).

    x_n ~ N(0, I / D) (rows of ``x``), W ~ N(0, weight_scale^2) elementwise (K x D),
    b ~ N(0, 1) (K), and eps iid per datapoint and class:

    * a :class:`~pyro_ar.noise.Noise` or its name (:func:`~pyro_ar.noise.get_noise`), drawn
      with its ``sample``: ``"gumbel"`` -> labels follow softmax(x W^T + b) exactly;
      ``"normal"`` -> multinomial probit; ``"logistic"`` -> multinomial logistic; ...
    * or a callable ``noise(shape, generator=..., dtype=...)`` returning iid draws.

    The N x K utilities are never held at once: rows are processed in chunks of at most
    ``max_chunk_elements // K`` rows (at least 1), so K = 10^6 with N of a few thousand
    needs only the K x D weights plus one chunk. Random numbers are drawn in the order
    x, W, b, then the noise chunk by chunk, so the output depends on the seed and on the
    chunk size (both fixed by the arguments).

    Args:
        num_samples: N.
        num_features: D.
        num_classes: K.
        noise: the noise family (see above).
        weight_scale: standard deviation sigma_w of the teacher weights.
        seed: seed of a fresh CPU ``torch.Generator`` (ignored when ``generator`` is given).
        generator: a ``torch.Generator`` to draw from instead.
        dtype: floating dtype of x, W, b and of the utility computation.
        max_chunk_elements: the largest number of utilities held at once.

    Returns:
        :class:`TeacherData` ``(x, y, W, b)``: ``x`` ``(N, D)``, ``y`` int64 ``(N,)``,
        ``W`` ``(K, D)``, ``b`` ``(K,)``.

    Example:

    >>> from pyro_ar.datasets import make_linear_teacher
    >>> data = make_linear_teacher(200, 5, 30, "normal", seed=0)
    >>> data.x.shape, data.W.shape, int(data.y.max()) < 30
    (torch.Size([200, 5]), torch.Size([30, 5]), True)
    """
    _check_sizes(num_samples=(num_samples, 0), num_features=(num_features, 1), num_classes=(num_classes, 1),
                 max_chunk_elements=(max_chunk_elements, 1))
    if isinstance(noise, (str, Noise)):
        family = get_noise(noise)

        def draw(shape):
            return family.sample(shape, dtype=dtype, generator=g)

    elif callable(noise):

        def draw(shape):
            return noise(shape, generator=g, dtype=dtype)

    else:
        raise TypeError(f"make_linear_teacher: noise must be a name or a callable, got {type(noise).__name__}")

    g = _generator(seed, generator)
    x = torch.randn(num_samples, num_features, generator=g, dtype=dtype) / math.sqrt(num_features)
    W = torch.randn(num_classes, num_features, generator=g, dtype=dtype) * weight_scale
    b = torch.randn(num_classes, generator=g, dtype=dtype)
    return TeacherData(x=x, y=_teacher_labels(x, W, b, draw, max_chunk_elements), W=W, b=b)


class SparseTeacherData(NamedTuple):
    """Output of :func:`make_sparse_teacher`: ``x`` (a coalesced torch sparse COO (N, D)
    matrix), ``y`` (N,), and the teacher: ``embedding`` E (D, r), ``weight`` V (K, r), ``b`` (K,).

    Example:

    >>> from pyro_ar.datasets import make_sparse_teacher
    >>> data = make_sparse_teacher(6, 50, 20, nnz_per_row=3, rank=2, seed=0)
    >>> data.x.layout, data.x.shape, data.weight.shape
    (torch.sparse_coo, torch.Size([6, 50]), torch.Size([20, 2]))
    """

    x: torch.Tensor
    y: torch.Tensor
    embedding: torch.Tensor
    weight: torch.Tensor
    b: torch.Tensor


def make_sparse_teacher(
    num_samples: int,
    num_features: int,
    num_classes: int,
    nnz_per_row: int = 10,
    rank: int = 16,
    weight_scale: float = 3.0,
    feature_power: float = 1.0,
    class_power: float = 1.0,
    seed: Optional[int] = 0,
    generator: Optional[torch.Generator] = None,
    dtype: torch.dtype = torch.float32,
    max_chunk_elements: int = 1 << 22,
) -> SparseTeacherData:
    r"""Sparse inputs labelled by a low-rank softmax teacher (a learnable problem at any D, K).

    * Each row draws ``nnz_per_row`` = m features with replacement from the Zipf law
      :math:`p_j \propto (j + 1)^{-\text{feature\_power}}` (0: uniform); the value of a
      feature is its count, so a row has at most m non-zeros (bags of words).
    * Teacher: E ~ N(0, 1) (D x r), V ~ N(0, weight_scale^2 / r) (K x r),
      :math:`b_k = -\text{class\_power}\cdot\log(k + 1)` (Zipf class frequencies), and
      :math:`y_n = \arg\max_k(x_n E v_k/\sqrt{m} + b_k + \varepsilon_{nk})`, Gumbel
      :math:`\varepsilon`, so :math:`p(y\mid x)` is the softmax of those utilities (their
      x-dependent part has standard deviation about ``weight_scale``).

    The N x K utilities are computed in row chunks of at most ``max_chunk_elements // K``
    rows; memory is O(nnz + (D + K) r + chunk).

    Args:
        num_samples: N.
        num_features: D.
        num_classes: K.
        nnz_per_row: m, feature draws per row.
        rank: r of the teacher.
        weight_scale: scale of the x-dependent utilities.
        feature_power: Zipf exponent of the feature frequencies.
        class_power: Zipf exponent a of the class biases.
        seed: seed of a fresh CPU ``torch.Generator`` (ignored when ``generator`` is given).
        generator: a ``torch.Generator`` to draw from instead.
        dtype: floating dtype of x and of the teacher.
        max_chunk_elements: the largest number of utilities held at once.

    Returns:
        :class:`SparseTeacherData` ``(x, y, embedding, weight, b)``.

    Example:

    >>> from pyro_ar.datasets import make_sparse_teacher
    >>> data = make_sparse_teacher(1000, 10_000, 500, nnz_per_row=10, seed=0)
    >>> data.x.shape, data.x._nnz() <= 10 * 1000, int(data.y.max()) < 500
    (torch.Size([1000, 10000]), True, True)
    """
    _check_sizes(num_samples=(num_samples, 0), num_features=(num_features, 1), num_classes=(num_classes, 1),
                 nnz_per_row=(nnz_per_row, 1), rank=(rank, 1), max_chunk_elements=(max_chunk_elements, 1))
    if not (feature_power >= 0 and class_power >= 0 and weight_scale >= 0):
        raise ValueError(f"make_sparse_teacher: feature_power, class_power and weight_scale must be "
                         f">= 0, got {feature_power!r}, {class_power!r}, {weight_scale!r}")
    g = _generator(seed, generator)
    N, D, K, m = num_samples, num_features, num_classes, nnz_per_row
    p = torch.arange(1, D + 1, dtype=torch.float64).pow(-float(feature_power))
    cols = torch.multinomial(p, N * m, replacement=True, generator=g) if N else torch.zeros(0, dtype=torch.long)
    rows = torch.arange(N).repeat_interleave(m)
    x = torch.sparse_coo_tensor(torch.stack([rows, cols]), torch.ones(N * m, dtype=dtype), (N, D),
                                check_invariants=False).coalesce()
    E = torch.randn(D, rank, generator=g, dtype=dtype)
    V = torch.randn(K, rank, generator=g, dtype=dtype) * (weight_scale / math.sqrt(rank))
    b = -float(class_power) * torch.arange(1, K + 1, dtype=dtype).log()
    h = torch.zeros(N, rank, dtype=dtype).index_add_(0, x.indices()[0], E[x.indices()[1]] * x.values()[:, None])
    h /= math.sqrt(m)
    gumbel = GumbelNoise()
    y = _teacher_labels(h, V, b, lambda shape: gumbel.sample(shape, dtype=dtype, generator=g), max_chunk_elements)
    return SparseTeacherData(x=x, y=y, embedding=E, weight=V, b=b)

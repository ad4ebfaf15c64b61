r"""How a linear classifier is laid out and trained for a data shape (the rule ``ARClassifier``
applies), chosen from the data's shape and labels: sparse or dense inputs, full rank, low rank or W on the training class-feature pattern, and the negatives
(:func:`choose_path`; the thresholds are the module's constants), with the starting point
of the pattern path (:func:`pattern_and_centroids`)."""

from typing import NamedTuple, Optional

import numpy as np
import torch

from .weight_pattern import WeightPattern

try:  # scipy is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

__all__ = ["TrainingPath", "choose_path", "effective_classes", "pattern_and_centroids"]

#: A full-rank W is kept while its training memory -- W, the two Adam moments and the
#: per-entry step counts, 16 bytes per entry -- stays below this; above, the low rank W = V E^T.
FULL_RANK_MAX_BYTES = 1 << 31
#: The rank chosen when ``rank="auto"`` goes low rank (dense inputs).
AUTO_RANK = 128
#: Sparse inputs whose full-rank W does not fit: W on the training class-feature pattern,
#: started at (and shrunk towards) the class centroids of the tf-idf rows times this
#: temperature, with this prior scale around them when ``prior_scale="auto"`` (measured on
#: the WordNet reverse dictionary, ``benchmarks/peers.py``; see ``docs/choosing.rst``).
PATTERN_INIT_TEMPERATURE = 15.0
PATTERN_PRIOR_SCALE = 0.3
PATTERN_MAX_EPOCHS = 8
#: Sparse input takes the sparse path when at most this fraction of its entries are non-zero
#: (and it has at least ``SPARSE_MIN_FEATURES`` features); denser input is densified.
SPARSE_MAX_DENSITY = 0.1
SPARSE_MIN_FEATURES = 128
#: ``strategy="auto"`` uses per-datapoint negatives unless a step would then gather more than
#: this many numbers (batch x (1 + s) x the width of a class's gathered weights): shared ones.
GATHER_MAX_ELEMENTS = 1 << 24
#: ``strategy="auto"`` draws importance negatives (training class frequencies^0.75) when the
#: labels are skewed: their effective number of classes, exp(entropy of the class
#: frequencies), is below this fraction of K (uniform negatives then rarely hit the classes
#: that carry the normaliser; measured on the Brown bag of words, ``benchmarks/sparse.py``).
SKEWED_LABELS_FRACTION = 0.5


class TrainingPath(NamedTuple):
    """How the estimator trains (chosen by :func:`choose_path`): ``sparse_inputs`` (utilities
    from the non-zeros of a scipy.sparse X), ``rank`` (None: full-rank W) and ``strategy``
    (of the negatives).

    Example:

    >>> from pyro_ar.training_path import TrainingPath
    >>> TrainingPath(True, 128, "per_datapoint").describe()
    'sparse inputs, low rank 128, per_datapoint negatives'
    """

    sparse_inputs: bool
    rank: Optional[int]
    strategy: str
    weight_pattern: bool = False

    @property
    def one_scale(self) -> bool:
        """Whether standardisation divides every feature by one number (the rms row norm):
        sparse inputs under a low rank, where per-feature scales blow rare features up and the
        low rank cannot absorb them (Brown's next word from a bag of the previous words: test
        log-lik -5.51, against -6.59 with per-feature scales, ``python -m benchmarks.sparse
        --part estimator``); with full rank every feature gets its own scale (Bibtex with all
        its labels as CSR: P@1 0.638 against 0.590 with one scale, ``python -m benchmarks.peers
        --dataset bibtex_ml``). The weight pattern weights features by idf instead."""
        return self.sparse_inputs and self.rank is not None

    def describe(self) -> str:
        weights = ("full rank on the training class-feature pattern" if self.weight_pattern else
                   "full rank" if self.rank is None else f"low rank {self.rank}")
        return (f"{'sparse' if self.sparse_inputs else 'dense'} inputs, {weights}, "
                f"{self.strategy} negatives")


def choose_path(num_rows: int, num_features: int, num_classes: int, nnz: Optional[int] = None,
                strategy: str = "auto", rank="auto", batch_size: int = 256,
                num_negatives: Optional[int] = 20, class_counts=None) -> TrainingPath:
    r"""The training path for N x D inputs with ``nnz`` non-zeros (None: a dense array) and
    K classes: the rule ``ARClassifier.fit`` applies.

    * sparse inputs: sparse X with at least ``SPARSE_MIN_FEATURES`` features and a
      density of at most ``SPARSE_MAX_DENSITY`` (a step then costs O(nnz x (1 + s)),
      not O(B (1 + s) D)); otherwise dense rows;
    * ``rank="auto"``: full rank while :math:`16 K D` bytes (W, two Adam moments, the step
      counts) stay below ``FULL_RANK_MAX_BYTES``; above, sparse inputs whose labels are
      not skewed (a few rows for every class, the extreme-classification regime) get W on the
      training class-feature pattern (``weight_pattern``: full rank, nnz entries, at most the
      data's non-zeros), the others ``AUTO_RANK`` (at most min(K, D)): with Zipfian
      labels (Brown's next word from a bag of the previous words) the low rank shares what it
      learns from the frequent classes and wins (test log-lik -5.47 against -6.06,
      ``python -m benchmarks.sparse --part estimator``); an int or None is kept;
    * ``strategy="auto"``: importance negatives (shared draws from the class
      frequencies^0.75) when the labels are skewed -- ``class_counts`` given and
      :math:`\exp H(\hat p) <` ``SKEWED_LABELS_FRACTION`` K, :math:`\hat p` the class
      frequencies --; otherwise per-datapoint negatives unless a step would gather
      :math:`B (1 + s) w` > ``GATHER_MAX_ELEMENTS`` numbers, w the width of a class's
      gathered weights (r with a rank, the non-zeros per row on the sparse path, D
      otherwise): then shared negatives (B + s rows).

    Example:

    >>> from pyro_ar.training_path import choose_path
    >>> choose_path(75_000, 27_000, 27_000, nnz=750_000).describe()   # WordNet's reverse dictionary
    'sparse inputs, full rank on the training class-feature pattern, per_datapoint negatives'
    >>> choose_path(10_000, 27_000, 20).describe()                    # dense and wide
    'dense inputs, full rank, shared negatives'
    """
    N, D, K = num_rows, num_features, num_classes
    sparse_inputs = nnz is not None and D >= SPARSE_MIN_FEATURES and nnz <= SPARSE_MAX_DENSITY * N * D
    skewed = class_counts is not None and effective_classes(class_counts) < SKEWED_LABELS_FRACTION * K
    pattern = rank == "auto" and sparse_inputs and 16 * K * D > FULL_RANK_MAX_BYTES and not skewed
    if rank == "auto":
        rank = None if pattern or 16 * K * D <= FULL_RANK_MAX_BYTES else min(AUTO_RANK, K, D)
    if strategy == "auto":
        s = K - 1 if num_negatives is None else min(num_negatives, K - 1)
        width = rank if rank is not None else (nnz / max(N, 1) if sparse_inputs else D)
        strategy = "shared" if min(batch_size, N) * (1 + s) * width > GATHER_MAX_ELEMENTS \
            else "per_datapoint"
        if s < K - 1 and skewed:
            strategy = "importance"
    return TrainingPath(bool(sparse_inputs), rank, strategy, bool(pattern))


def effective_classes(class_counts) -> float:
    """exp(entropy) of the class frequencies: K for balanced labels, 1 for a single class.

    Example:

    >>> from pyro_ar.training_path import effective_classes
    >>> round(effective_classes([5, 5, 5, 5]), 6), round(effective_classes([1, 0, 0]), 6)
    (4.0, 1.0)
    """
    p = np.asarray(class_counts, dtype=np.float64)
    p = p[p > 0] / p.sum()
    return float(np.exp(-(p * np.log(p)).sum()))


def pattern_and_centroids(X, codes, K: int, temperature: float = PATTERN_INIT_TEMPERATURE,
                          power: float = 1.0, root: float = 1.0, weights=None):
    r"""The training class-feature pattern of a sparse ``X`` with labels ``codes``
    (:class:`~pyro_ar.weight_pattern.WeightPattern`) and, on it, the scaled class centroids
    :math:`T\, c_k / \lVert c_k\rVert^\gamma`, :math:`c_{kj} = (\sum_{n: y_n = k} x_{nj})^q`,
    gamma = ``power``, q = ``root`` (q < 1 saturates a feature repeated in a class's rows; X
    non-negative where q != 1) (float32, in the pattern's order): the nearest-centroid (cosine,
    for gamma = q = 1) scorer as a starting point and prior mean for W; with ``weights`` (one per
    row, non-negative) each row counts ``weights[n]`` times in the sums, a row of weight 0 not at
    all (nor its features in the pattern). O(nnz(X)).

    Example:

    >>> import numpy as np, scipy.sparse as sp
    >>> from pyro_ar.training_path import pattern_and_centroids
    >>> X = sp.csr_matrix(np.array([[3.0, 0, 4], [0, 1, 0]]))
    >>> pattern, loc = pattern_and_centroids(X, np.array([1, 0]), 2, temperature=10.0)
    >>> pattern.keys.tolist(), loc.tolist()     # class 0: feature 1; class 1: features 0 and 2
    ([1, 3, 5], [10.0, 6.0, 8.0])
    """
    N, D = X.shape
    Y = sp.csr_matrix((np.ones(N) if weights is None else np.asarray(weights, dtype=np.float64),
                       (codes, np.arange(N))), shape=(K, N))
    C = sp.csr_matrix(Y @ X)
    C.sum_duplicates()
    C.eliminate_zeros()
    C.sort_indices()
    if root != 1.0:
        C.data = C.data ** root
    rows = np.repeat(np.arange(K), np.diff(C.indptr))
    norms = np.sqrt(np.asarray(C.multiply(C).sum(axis=1))).reshape(-1)
    keys = torch.as_tensor(rows.astype(np.int64) * D + C.indices.astype(np.int64))
    loc = torch.as_tensor(temperature * C.data / norms[rows] ** power, dtype=torch.float32)
    return WeightPattern(keys, K, D), loc

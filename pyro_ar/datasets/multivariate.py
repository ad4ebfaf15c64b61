r"""Multivariate categorical data for :class:`~pyro_ar.models.CategoricalLatentGP`: imputation sets.

A data set of N datapoints with D categorical variables (variable d over :math:`K_d`
categories) is an (N, D) int64 tensor, -1 for a missing entry. A
:class:`CategoricalData` holds training datapoints and test datapoints split by
:func:`hide_entries` into their observed entries and the hidden target entries (the test of
the CLGP paper, seeds/003: hide one variable of every test datapoint, predict it from the
others, report the perplexity :math:`\exp(-\text{mean log-likelihood per entry})`).

* :func:`load_brown_windows` -- windows of ``width`` consecutive tokens of the Brown corpus
  (sentences padded with the boundary token), every position a variable over the
  vocabulary of :func:`~pyro_ar.datasets.load_brown` (K = 26,101);
* :func:`load_breast_cancer_wisconsin` -- the paper's own small medical set (its table 2): the
  Wisconsin breast cancer (original) data, 683 complete biopsies, 9 attributes of values
  1-10 and the diagnosis (embedded in the package, ``pyro_ar/data/breast_cancer_wisconsin``);
* :func:`load_breast_cancer_categorical` -- scikit-learn's Wisconsin *diagnostic* breast
  cancer data (569 patients), its 30 measurements cut at their deciles into 10 ordered
  categories, plus the diagnosis (2): a wider set of the same kind;
* :func:`make_xor_relations` -- the paper's XOR relations: triplets :math:`(a, b, a\oplus b)`,
  which a linear latent model cannot fit.
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch

__all__ = ["CategoricalData", "hide_entries", "sentence_windows", "load_brown_windows",
           "load_breast_cancer_categorical", "load_breast_cancer_wisconsin", "make_xor_relations"]


@dataclass
class CategoricalData:
    """Training datapoints and test datapoints with hidden entries, (N, D) int64, -1 = missing.

    Attributes:
        train: (N, D) training datapoints.
        test_observed: (V, D) test datapoints with their target entries set to -1.
        test_target: (V, D) the hidden entries (-1 elsewhere).
        cardinalities: :math:`K_1..K_D`.
        variable_names: D names.
        category_names: per variable, its category names (or None).
        info: provenance and parameters.

    Example:

    >>> from pyro_ar.datasets import make_xor_relations
    >>> d = make_xor_relations()
    >>> d.train.shape, d.cardinalities, (d.test_target >= 0).sum(1).tolist()
    (torch.Size([100, 3]), [2, 2, 2], [1, 1, 1, 1])
    """

    train: torch.Tensor
    test_observed: torch.Tensor
    test_target: torch.Tensor
    cardinalities: List[int]
    variable_names: List[str]
    category_names: Optional[List[Optional[List[str]]]] = None
    info: dict = field(default_factory=dict)


def hide_entries(x: torch.Tensor, num_hidden: int = 1, columns: Optional[Sequence[int]] = None,
                 seed: int = 0):
    """Split every row of ``x`` (N, D) into ``(observed, target)``: ``num_hidden`` of its
    observed entries (among ``columns``, default all), chosen uniformly at random, move to
    ``target``; everything else stays in ``observed``. Rows with fewer than ``num_hidden + 1``
    observed entries (in ``columns``: ``num_hidden``) are dropped.

    Example:

    >>> import torch
    >>> from pyro_ar.datasets import hide_entries
    >>> obs, tgt = hide_entries(torch.tensor([[1, 2, 3], [4, -1, 6]]), seed=0)
    >>> ((obs >= 0) ^ (tgt >= 0)).sum(1).tolist(), (tgt >= 0).sum(1).tolist()   # entries split, one hidden
    ([3, 2], [1, 1])
    """
    if isinstance(num_hidden, bool) or not isinstance(num_hidden, int) or num_hidden < 1:
        raise ValueError(f"num_hidden must be a positive int, got num_hidden={num_hidden!r}")
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.is_floating_point():
        raise ValueError(f"x must be a 2-D integer tensor (N, D), got {getattr(x, 'shape', type(x).__name__)}")
    allowed = torch.zeros(x.shape[1], dtype=torch.bool)
    allowed[list(range(x.shape[1])) if columns is None else list(columns)] = True
    candidate = (x >= 0) & allowed
    keep = (candidate.sum(1) >= num_hidden) & ((x >= 0).sum(1) > num_hidden)
    x, candidate = x[keep], candidate[keep]
    g = torch.Generator().manual_seed(seed)
    keys = torch.rand(x.shape, generator=g).masked_fill(~candidate, -1.0)
    hidden = torch.zeros_like(candidate).scatter(1, keys.topk(num_hidden, 1).indices, True)
    return x.masked_fill(hidden, -1), x.masked_fill(~hidden, -1)


def _split(x: np.ndarray, test_fraction: float, seed: int):
    perm = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(test_fraction * len(x)))
    return torch.as_tensor(x[perm[n_test:]]), torch.as_tensor(x[perm[:n_test]])


def load_breast_cancer_categorical(num_bins: int = 10, test_fraction: float = 0.25,
                                   seed: int = 0) -> CategoricalData:
    """The Wisconsin diagnostic breast cancer data (``sklearn.datasets.load_breast_cancer``,
    569 x 30 measurements and the diagnosis) as 31 categorical variables: each measurement
    cut at its ``num_bins``-quantiles (over all 569 patients: an unsupervised recoding) into
    ``num_bins`` ordered categories, the diagnosis (malignant / benign) as the last variable.
    A random ``test_fraction`` of the patients (the paper: a quarter) are test datapoints with
    one random variable hidden (:func:`hide_entries`, seed ``seed``).

    Example:

    >>> from pyro_ar.datasets import load_breast_cancer_categorical
    >>> d = load_breast_cancer_categorical()
    >>> d.train.shape, d.test_observed.shape, d.cardinalities[-2:]
    (torch.Size([427, 31]), torch.Size([142, 31]), [10, 2])
    """
    from sklearn.datasets import load_breast_cancer

    if isinstance(num_bins, bool) or not isinstance(num_bins, int) or num_bins < 2:
        raise ValueError(f"num_bins must be an int >= 2, got num_bins={num_bins!r}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got test_fraction={test_fraction!r}")
    raw = load_breast_cancer()
    edges = np.quantile(raw.data, np.linspace(0, 1, num_bins + 1)[1:-1], axis=0)     # (bins - 1, 30)
    cats = (raw.data[:, None, :] > edges[None]).sum(1)                               # 0 .. bins - 1
    x = np.concatenate([cats, raw.target[:, None]], 1).astype(np.int64)
    train, test = _split(x, test_fraction, seed)
    observed, target = hide_entries(test, seed=seed)
    names = [str(n) for n in raw.feature_names] + ["diagnosis"]
    return CategoricalData(train, observed, target, [num_bins] * 30 + [2], names,
                           [None] * 30 + [[str(n) for n in raw.target_names]],
                           {"name": "breast-cancer-wdbc-categorical", "num_bins": num_bins,
                            "test_fraction": test_fraction, "seed": seed})


WISCONSIN_ATTRIBUTES = ("clump_thickness", "cell_size_uniformity", "cell_shape_uniformity",
                        "marginal_adhesion", "epithelial_cell_size", "bare_nuclei", "bland_chromatin",
                        "normal_nucleoli", "mitoses")


def load_breast_cancer_wisconsin(test_fraction: float = 0.25, seed: int = 0) -> CategoricalData:
    """The Wisconsin breast cancer (original) data of the CLGP paper's table 2 (seeds/003):
    the 683 complete biopsies (of 699; 16 lack "bare nuclei"), 9 cytological attributes with
    values 1-10 (categories 0-9) and the diagnosis (0 benign, 1 malignant) as the last of
    10 variables. As in the paper, a random ``test_fraction`` of the patients (a quarter)
    are test datapoints with one random variable hidden (:func:`hide_entries`, seed ``seed``;
    the patients are split with the same seed). Reads the embedded copy, checksum-verified
    (``pyro_ar/data/breast_cancer_wisconsin/README.md`` has its provenance).

    Example:

    >>> from pyro_ar.datasets import load_breast_cancer_wisconsin
    >>> d = load_breast_cancer_wisconsin()
    >>> d.train.shape, d.test_observed.shape, d.cardinalities
    (torch.Size([512, 10]), torch.Size([171, 10]), [10, 10, 10, 10, 10, 10, 10, 10, 10, 2])
    """
    from ._common import EMBEDDED_DATA_DIR, verify_checksums

    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must lie in (0, 1), got test_fraction={test_fraction!r}")
    folder = EMBEDDED_DATA_DIR / "breast_cancer_wisconsin"
    name = "breast-cancer-wisconsin.data"
    verify_checksums(folder, [name])
    rows = [line.split(",") for line in (folder / name).read_text().split()]
    complete = np.array([r[1:] for r in rows if "?" not in r], dtype=np.int64)     # (683, 10)
    x = np.concatenate([complete[:, :9] - 1, (complete[:, 9:] == 4)], 1).astype(np.int64)
    train, test = _split(x, test_fraction, seed)
    observed, target = hide_entries(test, seed=seed)
    return CategoricalData(train, observed, target, [10] * 9 + [2], list(WISCONSIN_ATTRIBUTES) + ["diagnosis"],
                           [None] * 9 + [["benign", "malignant"]],
                           {"name": "breast-cancer-wisconsin-original", "num_patients": len(x),
                            "test_fraction": test_fraction, "seed": seed})


def make_xor_relations(num_copies: int = 25, seed: int = 0) -> CategoricalData:
    r"""The XOR relations of the CLGP paper (after Paccanaro & Hinton 2001): ``num_copies``
    copies of each triplet :math:`(a, b, a\oplus b)`, :math:`a, b\in\{0,1\}`, as training
    data; the four test datapoints are the four :math:`(a, b, ?)` with the third value to impute.

    Example:

    >>> from pyro_ar.datasets import make_xor_relations
    >>> make_xor_relations(num_copies=1).test_target[:, 2].tolist()
    [0, 1, 1, 0]
    """
    if isinstance(num_copies, bool) or not isinstance(num_copies, int) or num_copies < 1:
        raise ValueError(f"num_copies must be a positive int, got num_copies={num_copies!r}")
    triplets = torch.tensor([[0, 0, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]])
    train = triplets.repeat(num_copies, 1)
    train = train[torch.randperm(len(train), generator=torch.Generator().manual_seed(seed))]
    target = torch.full_like(triplets, -1)
    target[:, 2] = triplets[:, 2]
    observed = triplets.masked_fill(target >= 0, -1)
    return CategoricalData(train, observed, target, [2, 2, 2], ["a", "b", "a xor b"], None,
                           {"name": "xor-relations", "num_copies": num_copies, "seed": seed})


def sentence_windows(sentences: Sequence[Sequence[int]], width: int, boundary: int) -> torch.Tensor:
    """All windows of ``width`` consecutive ids of the sentences, each padded with ``boundary``
    at both ends (a sentence of n ids gives n + 3 - width windows), as an int64 (N, width) tensor.

    Example:

    >>> from pyro_ar.datasets.multivariate import sentence_windows
    >>> sentence_windows([[5, 6], [7]], 3, boundary=1).tolist()
    [[1, 5, 6], [5, 6, 1], [1, 7, 1]]
    """
    out = [np.lib.stride_tricks.sliding_window_view(np.array([boundary, *s, boundary], dtype=np.int64), width)
           for s in sentences if len(s) + 2 >= width]
    return torch.as_tensor(np.concatenate(out)) if out else torch.zeros(0, width, dtype=torch.int64)


def load_brown_windows(width: int = 3, num_train: Optional[int] = None, num_test: Optional[int] = None,
                       path=None, min_count: int = 2, seed: int = 0) -> CategoricalData:
    """Windows of ``width`` consecutive tokens of the Brown corpus as datapoints of ``width``
    categorical variables over the vocabulary of :func:`~pyro_ar.datasets.load_brown` (same
    document split, ``min_count`` and ids: K = 26,101 with the defaults; id 1, the boundary,
    pads every sentence at both ends, so a sentence of n words gives n + 3 - width windows).
    Training windows come from the training documents, test windows from the test documents;
    ``num_train`` / ``num_test`` keep seeded random subsets; one random position of every
    test window is hidden (:func:`hide_entries`).

    Example:

    >>> from pyro_ar.datasets import load_brown_windows
    >>> d = load_brown_windows(num_train=1000, num_test=100)    # doctest: +SKIP
    >>> d.cardinalities, d.train.shape                            # doctest: +SKIP
    ([26101, 26101, 26101], torch.Size([1000, 3]))
    """
    from .text import BROWN_ARCHIVE, _brown_documents, load_brown

    if isinstance(width, bool) or not isinstance(width, int) or width < 2:
        raise ValueError(f"width must be an int >= 2, got width={width!r}")
    brown = load_brown(path, min_count=min_count, seed=seed)
    vocab = brown.class_names
    index = {w: i for i, w in enumerate(vocab)}
    boundary = brown.info["boundary_id"]
    docs = _brown_documents(Path(brown.info["folder"]) / BROWN_ARCHIVE)
    rng = np.random.default_rng(seed)

    def windows(names, limit):
        x = sentence_windows([[index.get(w, 0) for w in s] for d in names for s in docs[d]], width, boundary)
        if limit is not None and limit < len(x):
            x = x[torch.as_tensor(np.sort(rng.choice(len(x), limit, replace=False)))]
        return x

    train = windows(brown.info["train_docs"], num_train)
    observed, target = hide_entries(windows(brown.info["test_docs"], num_test), seed=seed)
    return CategoricalData(train, observed, target, [len(vocab)] * width,
                           [f"w[t+{j}]" for j in range(width)], [vocab] * width,
                           {"name": f"brown-windows-{width}", "min_count": min_count, "seed": seed})

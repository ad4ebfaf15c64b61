r"""scikit-learn's 8 x 8 digits as a :class:`~pyro_ar.datasets.Dataset`: :func:`load_digits`.

With ``standardize``, every pixel :math:`j` becomes :math:`(x_j - m_j)/s_j` with the
*training* mean :math:`m_j` and population standard deviation :math:`s_j` (1 where 0).
"""

from __future__ import annotations

from typing import Tuple, Union

import numpy as np
import torch

from ._common import Dataset

__all__ = ["load_digits"]


def load_digits(
    test_size: Union[int, float] = 397,
    seed: int = 0,
    standardize: bool = True,
) -> Dataset:
    """scikit-learn's 8 x 8 handwritten digits (1,797 images, K = 10, D = 64).

    Provenance: :func:`sklearn.datasets.load_digits` (the UCI optical recognition of
    handwritten digits test set; ships with scikit-learn, no download).

    Preprocessing: a random split by ``torch.randperm`` seeded with ``seed`` (not
    stratified); the default ``test_size=397`` leaves 1,400 training images. With
    ``standardize`` every pixel is centred and scaled by the *training* mean and
    (population) standard deviation; pixels constant in the training set get standard
    deviation 1 (so they become 0 - mean, i.e. constant). No bias column is added.

    Args:
        test_size: number of test images (int) or their fraction (float in (0, 1)).
        seed: seed of the split.
        standardize: standardise the features (else raw pixel values 0..16).

    Returns:
        :class:`Dataset` with ``x_*`` float32 ``(N, 64)``, ``y_*`` int64 in 0..9;
        ``info`` keys ``name``, ``source``, ``preprocessing``, ``mean`` / ``std`` (float32
        ``(64,)``, the training statistics used, or ``None``), ``train_index`` /
        ``test_index`` (int64 rows of the scikit-learn arrays).

    Example:

    >>> from pyro_ar.datasets import load_digits
    >>> d = load_digits()
    >>> d.num_classes, d.x_train.shape[1]
    (10, 64)
    """
    x, y = _sklearn_digits()
    n_test = _num_test(test_size, x.shape[0])
    perm = torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(int(seed)))
    test_idx, train_idx = perm[:n_test].sort().values, perm[n_test:].sort().values
    x_train, x_test = x[train_idx], x[test_idx]
    mean = std = None
    if standardize:
        mean, std = _train_statistics(x_train)
        x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    info = {"name": "digits", "source": "sklearn.datasets.load_digits (UCI optical digits, 8x8)",
            "preprocessing": "seeded random split; " + (
                "standardised by train mean/std (std 0 -> 1)" if standardize else "raw 0..16"),
            "mean": mean, "std": std, "train_index": train_idx, "test_index": test_idx, "seed": seed}
    return Dataset(x_train=x_train.contiguous(), y_train=y[train_idx], x_test=x_test.contiguous(),
                   y_test=y[test_idx], num_classes=10, class_names=[str(i) for i in range(10)], info=info)


def _sklearn_digits() -> Tuple[torch.Tensor, torch.Tensor]:
    """The 1,797 images (float32 ``(1797, 64)``, pixel values 0..16) and their digits (int64)."""
    try:
        from sklearn.datasets import load_digits as _sk_load_digits
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_digits needs scikit-learn: pip install scikit-learn "
            "(or pip install 'pyro-ar[data]')"
        ) from e
    bunch = _sk_load_digits()
    return (torch.as_tensor(np.asarray(bunch.data, dtype=np.float32)),
            torch.as_tensor(np.asarray(bunch.target, dtype=np.int64)))


def _num_test(test_size: Union[int, float], n: int) -> int:
    """The number of test rows: ``test_size`` itself (int) or ``round(test_size * n)`` (float
    in (0, 1)); ``ValueError`` unless both splits are non-empty."""
    if isinstance(test_size, float):
        if not 0.0 < test_size < 1.0:
            raise ValueError(f"load_digits: a float test_size must be in (0, 1), got {test_size}")
        n_test = int(round(test_size * n))
    else:
        n_test = int(test_size)
    if not 0 < n_test < n:
        raise ValueError(f"load_digits: test_size must leave both splits non-empty (n = {n}), got {test_size}")
    return n_test


def _train_statistics(x_train: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    r"""Per-pixel training mean :math:`m_j` and population standard deviation :math:`s_j`
    (1 where it is 0, so that a constant pixel becomes the constant :math:`x_j - m_j`)."""
    std = x_train.std(0, unbiased=False)
    return x_train.mean(0), torch.where(std > 0, std, torch.ones_like(std))

r"""The estimator's features as tensors: for training (:func:`training_features`: one tensor,
or :class:`SparseRows`, densified or kept sparse minibatch by minibatch) and for prediction
(:func:`feature_rows`: rows fetched chunk by chunk, in float64)."""

import numpy as np
import torch

try:  # scipy is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

from ._training_path import SPARSE_MAX_DENSITY, SPARSE_MIN_FEATURES

#: Sparse training matrices with at most this many entries (rows x features) are
#: densified once; larger ones are densified minibatch by minibatch.
DENSIFY_MAX_ELEMENTS = 1 << 24


class SparseRows:
    """A CSR matrix seen by :class:`~pyro_ar.models.LinearClassifier` as an (N, D) tensor.

    ``rows[idx]`` densifies only the rows ``idx`` (the data plate's subsample), so a large
    sparse design matrix is never densified as a whole; with ``sparse=True`` it returns
    them as a torch sparse COO batch instead (never densified: the sparse path); with
    ``sparse="auto"`` a batch stays sparse when it is as sparse and wide as the sparse path's
    inputs (:func:`~pyro_ar.estimator._training_path.choose_path`), else it is densified.

    Example:

    >>> import scipy.sparse as sp, torch
    >>> from pyro_ar.estimator._features import SparseRows
    >>> rows = SparseRows(sp.eye(5, format="csr"), torch.float32, "cpu", sparse=True)
    >>> rows[torch.tensor([3, 0])].to_dense().tolist()[0]
    [0.0, 0.0, 0.0, 1.0, 0.0]
    """

    def __init__(self, X, dtype, device, sparse=False):
        self.X = X.tocsr()
        self.shape = torch.Size(self.X.shape)
        self.dtype, self.device, self.sparse = dtype, device, sparse
        self.layout = torch.sparse_coo if sparse is True else torch.strided

    def dim(self):
        return 2

    def __len__(self):
        return self.shape[0]

    def _keeps_sparse(self, batch) -> bool:
        if self.sparse != "auto":
            return bool(self.sparse)
        n, d = batch.shape
        return d >= SPARSE_MIN_FEATURES and batch.nnz <= SPARSE_MAX_DENSITY * n * d

    def __getitem__(self, idx):
        rows = idx.detach().cpu().numpy() if torch.is_tensor(idx) else idx
        batch = self.X[rows]
        if not self._keeps_sparse(batch):
            return torch.tensor(batch.toarray(), dtype=self.dtype, device=self.device)
        nz = np.stack([np.repeat(np.arange(batch.shape[0]), np.diff(batch.indptr)), batch.indices])
        return torch.sparse_coo_tensor(torch.as_tensor(nz, dtype=torch.long), torch.as_tensor(batch.data),
                                       batch.shape, is_coalesced=bool(batch.has_canonical_format),
                                       check_invariants=False).to(device=self.device, dtype=self.dtype)


def training_features(X, dtype, device, sparse_inputs: bool = False):
    """The training features as the model takes them: a tensor, or :class:`SparseRows`
    (densified minibatch by minibatch, or sparse batches with ``sparse_inputs``)."""
    if sp.issparse(X):
        if sparse_inputs:
            return SparseRows(X, dtype, device, sparse=True)
        if X.shape[0] * X.shape[1] > DENSIFY_MAX_ELEMENTS:
            return SparseRows(X, dtype, device)
        X = X.toarray()
    return torch.tensor(np.asarray(X), dtype=dtype, device=device)


def feature_rows(X, device):
    """The rows of ``X`` for :func:`~pyro_ar.evaluation.linear_source`, fetched chunk by chunk:
    a dense array as a CPU tensor sharing its memory, a scipy.sparse matrix as
    :class:`SparseRows` (float64 on ``device``; a chunk stays sparse when it is as sparse and
    wide as the sparse path's inputs, else it is densified)."""
    if sp is not None and sp.issparse(X):
        return SparseRows(X, torch.float64, device, sparse="auto")
    return torch.as_tensor(np.asarray(X))

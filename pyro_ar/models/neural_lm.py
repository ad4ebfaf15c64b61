r"""A feed-forward neural language model body (Bengio et al. 2003) for :class:`~pyro_ar.models.NeuralClassifier`.

The next word :math:`w_t` is predicted from the :math:`n` previous ones through their
concatenated embeddings and one hidden layer,

.. math::  h_t = \tanh\big(A\,[e_{w_{t-n}}; \dots; e_{w_{t-1}}] + a\big) \in \mathbb{R}^F,
           \qquad \psi_{tk} = v_k\cdot h_t + c_k,

:class:`NGramBody` is :math:`g_\phi` (input embeddings :math:`e`, a V x E table with
row-sparse gradients by default, and :math:`A, a`); the K-row output layer :math:`(v, c)`
is :class:`~pyro_ar.models.NeuralClassifier`'s lazy one, so an A&R or sampled-softmax step
costs :math:`O(B(nE F + sF))` whatever the vocabulary size, and touches only the input
embeddings of the minibatch's context words and the output rows of its labels and
negatives. :func:`context_windows` turns the bigram pairs of :func:`pyro_ar.datasets.load_brown`
(or :func:`~pyro_ar.datasets.load_text_corpus`) into the n-word contexts.
"""

import torch

from .base import check_positive_int

__all__ = ["NGramBody", "context_windows"]


def context_windows(x: torch.Tensor, y: torch.Tensor, context_size: int,
                    pad_id: int = 1) -> torch.Tensor:
    r"""The ``context_size`` previous words of every target ``y[i]``, from bigram pairs.

    ``x`` / ``y`` are the (previous word, next word) pairs of one split as the text loaders
    return them: consecutive pairs of one token stream, ``y[i - 1] == x[i]`` (a document's
    stream ``<s> s_1 <s> s_2 .. <s>`` and the next document's both meet at ``<s>``). The
    stream is rebuilt as ``[x[0], y[0], y[1], ..]`` and row i of the result is
    :math:`(w_{i+1-n}, \dots, w_i)` (oldest first, its last column is ``x[i]``), padded with
    ``pad_id`` (the boundary ``<s>``, id 1) before the first token. Contexts run across
    sentence boundaries (the ``<s>`` tokens are in them), as in a continuous-stream LM.

    :raises ValueError: if the pairs are not consecutive pairs of one stream.

    Example:

    >>> import torch
    >>> from pyro_ar.models.neural_lm import context_windows
    >>> stream = torch.tensor([1, 5, 6, 7, 1, 8])            # <s> w w w <s> w
    >>> context_windows(stream[:-1], stream[1:], 3).tolist()
    [[1, 1, 1], [1, 1, 5], [1, 5, 6], [5, 6, 7], [6, 7, 1]]
    """
    n = check_positive_int("context_size", context_size)
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)) or x.dim() != 1 \
            or x.shape != y.shape:
        raise ValueError(f"x and y must be 1-D tensors of the same length, got shapes "
                         f"{tuple(getattr(x, 'shape', ()))} and {tuple(getattr(y, 'shape', ()))}")
    if x.numel() > 1 and not bool((y[:-1] == x[1:]).all()):
        bad = int((y[:-1] != x[1:]).nonzero()[0])
        raise ValueError(f"x and y must be consecutive pairs of one token stream (y[i-1] == x[i]); "
                         f"y[{bad}] = {int(y[bad])} but x[{bad + 1}] = {int(x[bad + 1])}")
    pad = torch.full((n - 1,), pad_id, dtype=x.dtype, device=x.device)
    stream = torch.cat([pad, x[:1], y[:-1]])           # stream[i + n - 1] == x[i]
    return stream.unfold(0, n, 1)


class NGramBody(torch.nn.Module):
    r"""The body :math:`h = \tanh(A\,[e_{u_1}; \dots; e_{u_n}] + a)` of a feed-forward LM.

    :param int num_words: V, size of the input vocabulary.
    :param int context_size: n, previous words per input row.
    :param int embedding_dim: E.
    :param int num_features: F, the output width (the output layer's input).
    :param bool sparse: row-sparse gradients for the embedding table (use
        :func:`pyro_ar.optim.lazy_adam`, which then touches only the minibatch's words).

    Inputs are int64 ``(N, context_size)`` word ids (:func:`context_windows`).

    Example:

    >>> import torch
    >>> from pyro_ar.models import NeuralClassifier
    >>> from pyro_ar.models.neural_lm import NGramBody
    >>> body = NGramBody(1000, 3, 16, 32)
    >>> body(torch.tensor([[1, 5, 7], [9, 9, 2]])).shape
    torch.Size([2, 32])
    >>> from pyro_ar.likelihoods import AR
    >>> model = NeuralClassifier(body, 32, 1000, likelihood=AR(negatives=20), subsample_size=64, sparse=True)
    """

    def __init__(self, num_words: int, context_size: int, embedding_dim: int, num_features: int,
                 sparse: bool = True):
        super().__init__()
        self.num_words = check_positive_int("num_words", num_words)
        self.context_size = check_positive_int("context_size", context_size)
        embedding_dim = check_positive_int("embedding_dim", embedding_dim)
        self.num_features = check_positive_int("num_features", num_features)
        self.embedding = torch.nn.Embedding(num_words, embedding_dim, sparse=sparse)
        torch.nn.init.normal_(self.embedding.weight, std=embedding_dim ** -0.5)
        self.hidden = torch.nn.Linear(context_size * embedding_dim, num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.context_size:
            raise ValueError(f"x must hold {self.context_size} word ids per row, got x of shape "
                             f"{tuple(x.shape)}")
        return torch.tanh(self.hidden(self.embedding(x).flatten(1)))

    def extra_repr(self) -> str:
        return (f"num_words={self.num_words}, context_size={self.context_size}, "
                f"embedding_dim={self.embedding.embedding_dim}, num_features={self.num_features}")


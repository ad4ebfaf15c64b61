r"""Sessions of items for :class:`~pyro_ar.models.CategoricalLatentModel`: padded tensors.

A session is a list of item ids; a set of U sessions is a (U, T) int64 tensor padded with
-1 (:func:`pad_sessions`). A :class:`SessionData` holds training sessions and held-out
sessions split into their observed items and held-out items (the test: predict the held-out
items of a held-out session from its observed ones).

* :func:`make_recogym_sessions` -- the organic sessions of the RecoGym simulator (Rohde et
  al. 2018, ``reco-gym-v1``), re-implemented: product embeddings
  :math:`\Gamma\in\mathbb{R}^{P\times K}`, :math:`\Gamma_{pk}\sim N(0,1)`, offsets
  :math:`\mu_p\sim N(0, 3^2)`, a user latent :math:`\omega_0\sim N(0, I_K)` drifting by
  :math:`N(0, 0.1^2 I)` at every organic view, views
  :math:`v_t\sim\mathrm{softmax}(\Gamma\omega_t+\mu)`; the number of views comes from
  RecoGym's Markov chain over (organic, bandit, leave) with its default transition
  probabilities (organic: to bandit 0.25, leave 0.01; bandit: to organic 0.05, leave 0.01).
* :func:`load_brown_sessions` -- the sentences (or documents) of the Brown corpus as sessions
  of word ids over the vocabulary of :func:`~pyro_ar.datasets.load_brown` (K = 26,101).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Sequence

import numpy as np
import torch

from .text import BROWN_ARCHIVE, _brown_documents, load_brown

__all__ = ["SessionData", "pad_sessions", "split_sessions", "make_recogym_sessions", "load_brown_sessions"]


def pad_sessions(sessions: Sequence[Sequence[int]], max_items: Optional[int] = None) -> torch.Tensor:
    """A (U, T) int64 tensor of the sessions' item ids padded with -1 (T the longest
    session, or ``max_items``: longer sessions keep their first ``max_items`` items).

    Example:

    >>> from pyro_ar.datasets import pad_sessions
    >>> pad_sessions([[3, 1], [2], [4, 5, 6]], max_items=2).tolist()
    [[3, 1], [2, -1], [4, 5]]
    """
    if max_items is not None and (isinstance(max_items, bool) or not isinstance(max_items, int) or max_items < 1):
        raise ValueError(f"max_items must be a positive int or None, got max_items={max_items!r}")
    lengths = [min(len(s), max_items or len(s)) for s in sessions]
    T = max(lengths, default=0)
    out = torch.full((len(sessions), max(T, 1)), -1, dtype=torch.int64)
    for i, (s, n) in enumerate(zip(sessions, lengths)):
        if n:
            out[i, :n] = torch.as_tensor(list(s[:n]), dtype=torch.int64)
    return out


def split_sessions(items: torch.Tensor, heldout_fraction: float = 0.5, seed: int = 0):
    """Split every session's items at random into ``(observed, heldout)`` padded tensors:
    ``round(heldout_fraction * T_u)`` held out, at least one item on each side (sessions
    with fewer than two items are dropped).

    Example:

    >>> import torch
    >>> from pyro_ar.datasets import split_sessions
    >>> obs, held = split_sessions(torch.tensor([[1, 2, 3, 4], [5, 6, -1, -1], [7, -1, -1, -1]]))
    >>> (obs >= 0).sum(1).tolist(), (held >= 0).sum(1).tolist()   # the 1-item session is dropped
    ([2, 1], [2, 1])
    """
    if not 0 < heldout_fraction < 1:
        raise ValueError(f"heldout_fraction must lie in (0, 1), got heldout_fraction={heldout_fraction!r}")
    rng = np.random.default_rng(seed)
    observed, heldout = [], []
    for row in items.tolist():
        s = [v for v in row if v >= 0]
        if len(s) < 2:
            continue
        perm = rng.permutation(len(s))
        n = min(max(int(round(heldout_fraction * len(s))), 1), len(s) - 1)
        held = set(perm[:n].tolist())
        observed.append([v for i, v in enumerate(s) if i not in held])
        heldout.append([v for i, v in enumerate(s) if i in held])
    return pad_sessions(observed), pad_sessions(heldout)


@dataclass
class SessionData:
    """Training sessions and held-out sessions (observed / held-out items), padded with -1.

    Attributes:
        train: (U, T) training sessions.
        test_observed, test_heldout: (V, T1), (V, T2): the two parts of the held-out sessions.
        num_items: P.
        item_counts: int64 (P,) training counts of the items.
        item_names: the P names (or None).
        info: provenance and generator parameters.

    Example:

    >>> from pyro_ar.datasets import make_recogym_sessions
    >>> d = make_recogym_sessions(num_products=50, num_train=10, num_test=5, seed=0)
    >>> d.num_items, d.train.shape[0], d.test_observed.shape[0] == d.test_heldout.shape[0]
    (50, 10, True)
    """

    train: torch.Tensor
    test_observed: torch.Tensor
    test_heldout: torch.Tensor
    num_items: int
    item_counts: torch.Tensor
    item_names: Optional[List[str]] = None
    info: dict = field(default_factory=dict)


def _counts(items: torch.Tensor, num_items: int) -> torch.Tensor:
    return torch.bincount(items[items >= 0], minlength=num_items)


def _recogym_lengths(rng, num_users: int, p_ob=0.25, p_leave=0.01, p_bo=0.05) -> np.ndarray:
    """Organic views per user under RecoGym's (organic, bandit, leave) Markov chain."""
    state = np.zeros(num_users, dtype=np.int64)  # 0 organic, 1 bandit, 2 left; users start organic
    views = np.zeros(num_users, dtype=np.int64)
    while (state < 2).any():
        views += state == 0
        r = rng.random(num_users)
        organic_next = np.where(r < p_leave, 2, np.where(r < p_leave + p_ob, 1, 0))
        bandit_next = np.where(r < p_leave, 2, np.where(r < p_leave + p_bo, 0, 1))
        state = np.where(state == 0, organic_next, np.where(state == 1, bandit_next, 2))
    return views


def make_recogym_sessions(num_products: int = 1000, num_train: int = 200, num_test: int = 1000,
                          latent_dim: int = 5, sigma_mu: float = 3.0, sigma_drift: float = 0.1,
                          heldout_fraction: float = 0.2, max_items: Optional[int] = 200,
                          seed: int = 0) -> SessionData:
    r"""RecoGym-style organic sessions (module docstring), without the ``recogym`` package.

    Users with no organic view are redrawn (test users: fewer than two); the test sessions are split by
    :func:`split_sessions` (``heldout_fraction`` of each session's views held out).

    Example:

    >>> from pyro_ar.datasets import make_recogym_sessions
    >>> d = make_recogym_sessions(num_products=100, num_train=20, num_test=10, seed=1)
    >>> int(d.train.max()) < 100, d.info["name"]
    (True, 'recogym-simulated')
    """
    rng = np.random.default_rng(seed)
    Gamma = rng.normal(0.0, 1.0, (num_products, latent_dim))
    mu = rng.normal(0.0, sigma_mu, num_products)
    lengths = _recogym_lengths(rng, 3 * (num_train + num_test))
    lengths = np.concatenate([lengths[lengths > 0][:num_train], lengths[lengths > 1][-num_test:]])
    sessions = []
    for n in lengths.tolist():
        n = min(n, max_items or n)
        omega = rng.normal(0.0, 1.0, latent_dim) + np.cumsum(rng.normal(0.0, sigma_drift, (n, latent_dim)), 0)
        logits = omega @ Gamma.T + mu
        cdf = np.cumsum(np.exp(logits - logits.max(-1, keepdims=True)), -1)
        u = rng.random((n, 1)) * cdf[:, -1:]
        sessions.append(np.minimum((cdf < u).sum(-1), num_products - 1).tolist())  # inverse CDF
    train = pad_sessions(sessions[:num_train])
    observed, heldout = split_sessions(pad_sessions(sessions[num_train:]), heldout_fraction, seed)
    info = dict(name="recogym-simulated", latent_dim=latent_dim, sigma_mu=sigma_mu,
                sigma_drift=sigma_drift, heldout_fraction=heldout_fraction, seed=seed,
                mean_length=float(np.mean(lengths)))
    return SessionData(train, observed, heldout, num_products, _counts(train, num_products), None, info)


def load_brown_sessions(unit: str = "sentence", max_items: int = 50, min_items: int = 2,
                        heldout_fraction: float = 0.5, num_train: Optional[int] = None,
                        num_test: Optional[int] = None, path=None, seed: int = 0) -> SessionData:
    """The Brown corpus's sentences (``unit="sentence"``) or documents (``"document"``) as
    sessions of word ids over the vocabulary of :func:`~pyro_ar.datasets.load_brown` (same
    document split and vocabulary: K = 26,101 with the defaults). Training sessions come
    from the training documents, held-out sessions from the test documents, split by
    :func:`split_sessions`; ``num_train`` / ``num_test`` keep a seeded random subset.

    Example:

    >>> from pyro_ar.datasets import load_brown_sessions
    >>> d = load_brown_sessions(num_train=100, num_test=20)    # doctest: +SKIP
    >>> d.num_items                                            # doctest: +SKIP
    26101
    """
    if unit not in ("sentence", "document"):
        raise ValueError(f"unit must be 'sentence' or 'document', got unit={unit!r}")
    brown = load_brown(path, seed=seed)
    vocab = brown.class_names
    index = {w: i for i, w in enumerate(vocab)}
    docs = _brown_documents(Path(brown.info["folder"]) / BROWN_ARCHIVE)
    rng = np.random.default_rng(seed)

    def sessions(names, limit):
        out = []
        for d in names:
            units = docs[d] if unit == "sentence" else [[w for s in docs[d] for w in s]]
            out.extend([index.get(w, 0) for w in s] for s in units if len(s) >= min_items)
        if limit is not None and limit < len(out):
            out = [out[i] for i in sorted(rng.choice(len(out), limit, replace=False).tolist())]
        return pad_sessions(out, max_items)

    train = sessions(brown.info["train_docs"], num_train)
    observed, heldout = split_sessions(sessions(brown.info["test_docs"], num_test), heldout_fraction, seed)
    info = dict(name=f"brown-{unit}s", max_items=max_items, min_items=min_items,
                heldout_fraction=heldout_fraction, seed=seed)
    return SessionData(train, observed, heldout, len(vocab), _counts(train, len(vocab)), vocab, info)

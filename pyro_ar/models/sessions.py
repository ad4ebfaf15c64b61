r"""Ranking metrics of held-out session items: Recall@k, TDCG@k and the held-out
log-likelihood under a noise's marginal (:func:`session_metrics`), for
:meth:`CategoricalLatentModel.evaluate_sessions <pyro_ar.models.CategoricalLatentModel.evaluate_sessions>`
and for baselines that score items (``benchmarks/session_model.py``)."""

import torch

from ..noise import get_noise

__all__ = ["session_metrics"]


def session_metrics(score_fn, observed: torch.Tensor, heldout: torch.Tensor, k: int = 5,
                    chunk_size: int = 256, noise="gumbel") -> dict:
    r"""Recall@k, TDCG@k and the held-out log-likelihood of held-out sessions.

    ``score_fn(observed_rows) -> (n, P)`` scores items from the observed (padded) items of n
    sessions; the held-out items :math:`H_u` (distinct, padded ``heldout``) are the targets.
    With the top-k items :math:`i_1..i_k` of each session (Liang et al. 2018, the seed's
    reference): :math:`\mathrm{Recall@k} = \sum_r 1[i_r\in H_u]/\min(k, |H_u|)` and the
    truncated discounted cumulative gain :math:`\mathrm{TDCG@k} = \sum_{r\le k}
    1[i_r\in H_u]/\log_2(r+1)`, both averaged over sessions; ``log_lik`` is the mean over
    held-out items of :math:`\log p(i\mid\text{scores})` under ``noise``
    (:meth:`~pyro_ar.noise.Noise.log_marginal_rows`: for the default Gumbel noise the
    log-softmax, the predictive log-probability when the scores are log-probabilities or
    utilities of a softmax model; the model's own noise when they are its utilities).

    Example:

    >>> import torch
    >>> from pyro_ar.models.sessions import session_metrics
    >>> scores = lambda obs: torch.arange(10.0).expand(len(obs), 10)     # always ranks 9, 8, 7, ...
    >>> m = session_metrics(scores, torch.tensor([[0], [1]]), torch.tensor([[9, 2], [3, -1]]), k=2)
    >>> m["recall"], m["tdcg"]                     # session 1: 1 of 2 found at rank 1; session 2: none
    (0.25, 0.5)
    """
    noise = get_noise(noise)
    recall = tdcg = ll = 0.0
    num_items = 0
    discount = 1.0 / torch.log2(torch.arange(2, k + 2, dtype=torch.float64, device=heldout.device))
    for start in range(0, len(observed), chunk_size):
        held = heldout[start:start + chunk_size]
        with torch.no_grad():
            scores = score_fn(observed[start:start + chunk_size]).double()
        top = scores.topk(k, -1).indices                                  # (n, k)
        mask = held >= 0
        hit = ((top.unsqueeze(-1) == held.unsqueeze(-2)) & mask.unsqueeze(-2)).any(-1).double()
        distinct = _distinct_per_row(held)
        recall += float((hit.sum(-1) / distinct.clamp(max=k)).sum())
        tdcg += float((hit * discount).sum())
        rows = torch.arange(len(held), device=held.device).unsqueeze(-1).expand_as(held)[mask]
        ll += float(noise.log_marginal_rows(scores, rows, held[mask]).sum())
        num_items += int(mask.sum())
    n = len(observed)
    return {"recall": recall / n, "tdcg": tdcg / n, "log_lik": ll / max(num_items, 1)}


def _distinct_per_row(held: torch.Tensor) -> torch.Tensor:
    """The number of distinct non-negative entries of each row of ``held`` (float64, on its
    device): sorted, an entry counts when it differs from its left neighbour."""
    s = held.sort(-1).values
    new = torch.ones_like(s, dtype=torch.bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    return (new & (s >= 0)).sum(-1).double()

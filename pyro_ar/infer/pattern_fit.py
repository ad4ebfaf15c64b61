r"""The schedule of the weight-pattern path (sparse inputs, many classes, a few rows each): a
step count set by a held-out split, and the fit moved back onto the centroids of all the rows.

The path's W starts at the scaled class centroids :math:`\mathrm{loc}` of the rows it trains
on (:func:`~pyro_ar.training_path.pattern_and_centroids`): an untrained scorer
that is already good (the tf-idf nearest centroid). Training may only add to it, so:

* the fit holds out ``validation_fraction`` of the rows (:func:`pattern_schedule`: always on
  this path, whatever ``early_stopping``), scores their log-likelihood at the start and
  :data:`PATTERN_EVALS_PER_EPOCH` times per epoch, stops after :data:`PATTERN_PATIENCE`
  scores without an improvement of ``PATTERN_MIN_DELTA`` and keeps the best weights --
  the starting point included, so the model returned is never worse on the held-out rows than the centroids it starts
  from; the number of steps is the validation's, at most ``PATTERN_MAX_EPOCHS`` epochs;
* the centroids of the training split miss the held-out rows, so at the end the fit is
  moved onto the centroids of all the rows (:func:`recentre`): with :math:`W^*` the kept
  weights on the split's pattern :math:`P_{tr}` and :math:`\mathrm{loc}_{tr}` its centroids,

  .. math::  W = \mathrm{loc}_{all} + (W^* - \mathrm{loc}_{tr}) \text{ on } P_{tr},
             \qquad W = \mathrm{loc}_{all} \text{ on } P_{all} \setminus P_{tr}

  (what the training learned is the residual :math:`W^* - \mathrm{loc}_{tr}` and the bias;
  the held-out rows then count in the centroids as in the untrained scorer's).

Before any SVI step, the shape of the starting scorer is chosen on the held-out rows
(``choose_centroid_scorer``): three numbers shared by all the classes -- where the data is
rich, unlike a class's weights at a few rows each --, the exponent p of the idf weights of
the rows, :math:`x \propto \mathrm{idf}^p \odot x_{binary}`, the root q of the class sums
and the power gamma of the centroids' norms,
:math:`c_k = s_k^q / \lVert s_k^q\rVert^\gamma` (:math:`s_k` the sum of the class's rows,
:math:`s_k^q` entrywise: q < 1 saturates a word repeated across a class's rows; gamma < 1
favours the classes with more rows, which the test rows also favour); then a bias weight and
the temperature T of :math:`\mathrm{loc} = T c_k` that maximises the held-out
log-likelihood of the untrained scorer. On WordNet's reverse dictionary this choice
(p = 1.5, q = 1, gamma = 0.8) and on GCIDE's (p = 1.5, q = 0.5, gamma = 0.4) gives the
fit's gain over the plain tf-idf cosine; the SVI steps after it add little there
(``benchmarks/dictionary_training.py``).
"""

from functools import partial
from typing import NamedTuple

import numpy as np
import torch

from ..noise import get_noise
from ..numerics import weighted_mean

try:  # scipy is an optional dependency of pyro_ar (extras "data" / "test")
    import scipy.sparse as sp
except ImportError:  # pragma: no cover
    sp = None

# (the estimator's plumbing -- choose_start, recentre_fit, ... -- is private)
__all__ = ["CENTROID_POWERS", "CENTROID_ROOTS", "CentroidStart", "IDF_POWERS", "PATTERN_EVALS_PER_EPOCH", "PATTERN_MIN_DELTA",
           "PATTERN_PATIENCE", "calibrate_temperature", "cap_held_out", "centroid_shape", "max_held_out", "pattern_schedule",
           "recentre", "reweight_rows"]

#: the shared shape of the starting scorer, chosen on the held-out rows
#: (``choose_centroid_scorer``): the exponent p of the rows' idf weights and the power
#: gamma of the centroids' norms
IDF_POWERS = (1.0, 1.5, 2.0)
#: the weight beta of the classes' log training counts in the start's bias,
#: :math:`b_k = \beta \log(1 + n_k)` (chosen on the held-out rows after the shape)
BIAS_WEIGHTS = (0.0, 0.25, 0.5, 1.0)
CENTROID_POWERS = (1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4)
#: the root q of the class sums in the centroids, :math:`c_{kj} = s_{kj}^q`: q < 1 saturates a
#: feature repeated in a class's rows, as BM25's term-frequency saturation does (chosen after
#: p, at the chosen p; the first is the plain sums; GCIDE's glosses prefer q = 0.5, WordNet's
#: q = 1: ``benchmarks/dictionary_start_ceiling.py``)
CENTROID_ROOTS = (1.0, 0.5)
#: held-out rows of the weight-pattern path at most (:func:`cap_held_out`: the others train;
#: each held-out score costs O(rows x K); 2000 gave the same test numbers on WordNet and GCIDE
#: at 1.5 and 1.25 times the CPU, ``benchmarks/dictionary_training.py``)
MAX_HELD_OUT = 1000
#: ... and at most this many utilities (held-out rows x K) per score: with K = 123k classes
#: (the WordNet synsets) 406 rows, whose scores cost as much as 1000 rows at K = 50k
HELD_OUT_UTILITIES = 50_000_000
#: held-out rows that calibrate the starting scorer's temperature (one number: a few hundred
#: rows place it), at most :data:`CALIBRATION_UTILITIES` / K of them
MAX_CALIBRATION_ROWS = 1000
CALIBRATION_UTILITIES = 25_000_000
#: held-out scores per epoch on the weight-pattern path (and one at the start)
PATTERN_EVALS_PER_EPOCH = 4
#: scores without an improvement of at least PATTERN_MIN_DELTA nats per held-out datapoint
#: before the weight-pattern path stops (an improvement below it is not worth a quarter epoch
#: and one more score: the WordNet synsets' first 40 steps gain 4e-4; on GCIDE's reverse
#: dictionary, steps gaining 5e-3 to 1e-2 nats a score lowered test top-1 from the start's
#: +0.0127 over the tf-idf centroid to +0.0056 with random_state 7, ``benchmarks/dictionary_training.py``)
PATTERN_PATIENCE = 1
PATTERN_MIN_DELTA = 1e-2


class PatternSchedule(NamedTuple):
    """How a fit evaluates its held-out rows: every ``eval_every`` steps, at the start or not,
    stopping after ``patience`` scores without an improvement of at least ``min_delta``."""

    eval_every: int
    eval_at_start: bool
    patience: int
    min_delta: float


def pattern_schedule(weight_pattern: bool, steps_per_epoch: int, patience: int, tol: float = 1e-4) -> PatternSchedule:
    """The evaluation schedule of a fit: the weight-pattern path's (:data:`PATTERN_EVALS_PER_EPOCH`
    scores per epoch, the start scored, :data:`PATTERN_PATIENCE`, improvements of at least
    ``PATTERN_MIN_DELTA`` or ``tol``), else once per epoch with the estimator's
    ``patience`` (``n_iter_no_change``) and ``tol``.

    Example:

    >>> from pyro_ar.infer.pattern_fit import pattern_schedule
    >>> pattern_schedule(True, 66, 5)
    PatternSchedule(eval_every=16, eval_at_start=True, patience=1, min_delta=0.01)
    >>> pattern_schedule(False, 66, 5)
    PatternSchedule(eval_every=66, eval_at_start=False, patience=5, min_delta=0.0001)
    """
    if not weight_pattern:
        return PatternSchedule(steps_per_epoch, False, patience, tol)
    return PatternSchedule(max(1, steps_per_epoch // PATTERN_EVALS_PER_EPOCH), True, PATTERN_PATIENCE,
                           max(tol, PATTERN_MIN_DELTA))


def recentre(state: dict, name: str, train_pattern, train_loc: torch.Tensor, pattern, loc: torch.Tensor) -> dict:
    r"""The param state ``state`` with its weights ``state["params"][name]`` (on
    ``train_pattern``, started at ``train_loc``) moved onto ``pattern`` (a superset of the
    entries) around ``loc``: :math:`\mathrm{loc} + (W - \mathrm{loc}_{tr})` on the training
    pattern's entries, ``loc`` on the others (the module docstring). O(nnz log nnz).

    Example:

    >>> import torch
    >>> from pyro_ar.weight_pattern import WeightPattern
    >>> from pyro_ar.infer.pattern_fit import recentre
    >>> small, big = WeightPattern(torch.tensor([0, 3]), 2, 2), WeightPattern(torch.tensor([0, 1, 3]), 2, 2)
    >>> state = {"params": {"weight": torch.tensor([1.5, 2.0])}, "constraints": {}}
    >>> recentre(state, "weight", small, torch.tensor([1.0, 2.0]), big, torch.tensor([3.0, 4.0, 5.0]))["params"]["weight"].tolist()
    [3.5, 4.0, 5.0]
    """
    W = state["params"][name]
    k, j = train_pattern.coordinates()
    pos, hit = pattern.to(W.device).lookup(k.to(W.device), j.to(W.device))
    if not bool(hit.all()):
        raise ValueError("pattern must contain every entry of train_pattern (the pattern of all the "
                         "rows holds the training split's)")
    new = loc.to(W).clone()
    new[pos] += (W.detach() - train_loc.to(W)).to(new)
    params = dict(state["params"])
    params[name] = new
    return {**state, "params": params}



def reweight_rows(X, weight: np.ndarray):
    """The rows of the scipy CSR ``X`` times ``weight`` (per feature), L2-normalised (CSR).

    Example:

    >>> import numpy as np, scipy.sparse as sp
    >>> from pyro_ar.infer.pattern_fit import reweight_rows
    >>> reweight_rows(sp.csr_matrix([[1.0, 1.0]]), np.array([3.0, 4.0])).toarray().round(6).tolist()
    [[0.6, 0.8]]
    """
    Z = sp.csr_matrix(X.multiply(weight[None, :]), dtype=X.dtype)
    norms = np.sqrt(np.asarray(Z.multiply(Z).sum(axis=1))).reshape(-1)
    return sp.csr_matrix(sp.diags(1.0 / np.where(norms > 0, norms, 1.0)) @ Z, dtype=X.dtype)


def _class_sums(X, codes, K, rows, root=1.0, weights=None):
    """The (K, D) sums :math:`s_k` of the rows ``rows`` of X by class (each times its weight in
    ``weights``, per datapoint; None: 1), entries to the power ``root`` (scipy CSR; X and the
    weights non-negative)."""
    w = np.ones(len(rows)) if weights is None else np.asarray(weights, dtype=np.float64)[rows]
    Y = sp.csr_matrix((w, (codes[rows], np.arange(len(rows)))), shape=(K, len(rows)))
    S = sp.csr_matrix(Y @ X[rows])
    S.eliminate_zeros()  # (the features of rows of weight 0 only)
    if root != 1.0:
        S.data = S.data ** root
    return S


def _heldout_hits(X, codes, K, train_idx, rows, powers, groups=None, chunk=500, root=1.0, weights=None):
    r"""For each centroid power: the mean over the held-out ``rows`` of (top-1 hit + top-10 hit) / 2
    of the scorer :math:`x \cdot s_k / \lVert s_k\rVert^\gamma`, :math:`s_k` the sums of the
    training rows ``train_idx`` (entries to the power ``root``; a class without training rows
    scores 0); with ``weights`` (per datapoint) the sums and the mean weighted; with ``groups``
    (label sets: the row of each (row, label) pair) each held-out row's product once for all
    its pairs.

    The rows and sums are non-negative, so a class outranks the label (score > the label's)
    only where the sparse product :math:`u_k = x \cdot s_k` is non-zero, and only where
    :math:`u_k > \min_\gamma u_y n_y^{-\gamma} \cdot \min_\gamma m^\gamma` (m the smallest
    norm :math:`n_k` of a class with rows): the ranks are counted on those entries of the
    product, never on a dense rows x K array. A label scoring 0 is outranked by each of its
    row's non-zeros, whatever gamma."""
    ST = _class_sums(X, codes, K, train_idx, root, weights).T.tocsr().astype(np.float32)
    norms = np.sqrt(np.asarray(ST.multiply(ST).sum(axis=0), dtype=np.float64)).reshape(-1)
    row_weight = np.ones(len(rows)) if weights is None else np.asarray(weights, dtype=np.float64)[rows]
    floor = min(float(norms[norms > 0].min(initial=1.0)) ** g for g in powers)
    scales = [(np.where(norms > 0, norms, 1.0) ** -g).astype(np.float32) for g in powers]
    log_norms = np.log(np.where(norms > 0, norms, 1.0))
    _, first, inverse = np.unique(rows if groups is None else groups[rows], return_index=True, return_inverse=True)
    order = np.argsort(inverse.reshape(-1), kind="stable")  # the held-out pairs by their row
    sorted_rows = inverse.reshape(-1)[order]
    hits = np.zeros(len(powers))
    for a in range(0, len(first), chunk):
        b = min(len(first), a + chunk)
        pairs = order[np.searchsorted(sorted_rows, a):np.searchsorted(sorted_rows, b)]
        r, c = sorted_rows[np.searchsorted(sorted_rows, a):np.searchsorted(sorted_rows, b)] - a, codes[rows[pairs]]
        U = sp.csr_matrix(X[rows[first[a:b]]].astype(np.float32) @ ST)
        counts, w = np.diff(U.indptr), row_weight[pairs]
        label_u = np.asarray(U[r, c], dtype=np.float32).reshape(-1)
        missed = label_u == 0
        hits += 0.5 * w[missed] @ ((counts[r[missed]] < 10) + (counts[r[missed]] < 1).astype(np.float64))
        threshold = floor * np.minimum.reduce([label_u * scale[c] for scale in scales])
        threshold[missed] = np.inf
        row_threshold = np.full(b - a, np.inf, dtype=np.float32)
        np.minimum.at(row_threshold, r, threshold)
        pos = np.flatnonzero(U.data > np.repeat(row_threshold, counts))  # the entries that may outrank
        entry_row = np.repeat(np.arange(b - a, dtype=np.int64), counts)[pos]
        if groups is None:  # one pair per row, pair i at row i (r = 0, 1, ...)
            pair, k, u = entry_row, U.indices[pos], U.data[pos]
        else:  # each kept entry once per pair of its row (the pairs of a row are consecutive in r)
            per = np.bincount(r, minlength=b - a)[entry_row]
            e = np.repeat(np.arange(len(pos)), per)
            pair = np.arange(len(e)) - np.repeat(np.cumsum(per) - per, per) + np.searchsorted(r, entry_row)[e]
            k, u = U.indices[pos][e], U.data[pos][e]
        # u_k / n_k^g > u_y / n_y^g  <=>  log(u_k / u_y) > g log(n_k / n_y): the gathers once for
        # all the powers (a class without rows scores 0, as its utility does: norm 1 there)
        with np.errstate(divide="ignore"):  # (a missed label: log 0, every entry outranks it)
            gap = np.log(u.astype(np.float64)) - np.log(label_u.astype(np.float64))[pair]
        spread = log_norms[k] - log_norms[c][pair]
        for g, power in enumerate(powers):
            rank = np.bincount(pair[gap > power * spread], minlength=len(pairs))[~missed]
            hits[g] += 0.5 * w[~missed] @ ((rank < 1) + (rank < 10).astype(np.float64))
    return hits / max(row_weight.sum(), 1e-300)


def choose_centroid_scorer(X, codes, K: int, train_idx, val_idx, feature_scale, groups=None, weights=None):
    r"""``(X', p, gamma, q, temperature, beta, scores, bias scores)``: the starting
    scorer's shape chosen on the held-out rows ``val_idx`` by the most held-out (top-1 +
    top-10) hits / 2 of the centroid scorer :math:`x \cdot s_k^q / \lVert s_k^q\rVert^\gamma`
    of the training rows ``train_idx``, coordinate-wise: the idf exponent p in
    :data:`IDF_POWERS` with the centroid power gamma in :data:`CENTROID_POWERS` at q = 1, then
    the root q in :data:`CENTROID_ROOTS` with gamma at that p (ties: the earlier, p = 1, q = 1
    and gamma = 1 first) --, then its bias weight beta and temperature (:func:`choose_bias`).
    ``X`` holds the tf-idf rows of the estimator's scaling (``feature_scale`` = 1 / idf), X'
    the rows of :math:`\mathrm{idf}^p` (the feature scale ``feature_scale ** p``); ``scores`` maps each
    (p, q, gamma) scored to its held-out hits. With ``weights`` (per datapoint: a weight of 2 counts
    as two copies) the class sums, counts, hits and log-likelihoods weighted. One sparse product
    per (p, q) scored, O(|rows| x K) for each gamma."""
    scores, best, rows_of = {}, None, {}

    def score(p, q):
        nonlocal best
        if p not in rows_of:
            rows_of[p] = X if p == 1.0 else reweight_rows(X, np.asarray(feature_scale, dtype=np.float64) ** (1.0 - p))
        hits = _heldout_hits(rows_of[p], codes, K, train_idx, val_idx, CENTROID_POWERS, groups, root=q, weights=weights)
        for power, h in zip(CENTROID_POWERS, hits):
            scores[(p, q, power)] = float(h)
            if best is None or h > best[0]:
                best = (h, p, q, power, rows_of[p])

    for p in IDF_POWERS:
        score(p, CENTROID_ROOTS[0])
    for q in CENTROID_ROOTS[1:]:
        score(best[1], q)
    _, p, q, power, Xp = best
    rows = val_idx[:max(100, min(MAX_CALIBRATION_ROWS, CALIBRATION_UTILITIES // K))]
    ST = _class_sums(Xp, codes, K, train_idx, q, weights).T.tocsr()
    norms = np.sqrt(np.asarray(ST.multiply(ST).sum(axis=0))).reshape(-1)
    U = (Xp[rows] @ ST).toarray().astype(np.float32) / np.where(norms > 0, norms, 1.0).astype(np.float32) ** power
    w = None if weights is None else np.asarray(weights, dtype=np.float64)
    counts = np.bincount(codes[train_idx], None if w is None else w[train_idx], minlength=K)
    beta, temperature, bias_scores = choose_bias(
        torch.as_tensor(U), torch.as_tensor(codes[rows]), torch.as_tensor(np.log1p(counts)).float(),
        None if w is None else torch.as_tensor(w[rows]))
    return Xp, p, power, q, temperature, beta, scores, bias_scores


def choose_bias(U: torch.Tensor, y: torch.Tensor, log_counts: torch.Tensor, weights=None) -> tuple:
    r"""``(beta, T, scores)``: the bias weight of :data:`BIAS_WEIGHTS` whose scorer
    :math:`T U + \beta \log(1 + n_k)` has the most held-out (top-1 + top-10) hits / 2 (ties: the
    smaller; ``scores``: beta -> hits), each with its temperature T
    (:func:`calibrate_temperature`, Newton's method started at the previous beta's T: the
    same optimum to its 0.1 % tolerance, in fewer softmaxes of the rows x K scores). Dense: U holds the (rows, K) centroid scores of the
    held-out rows, y their labels (a bias lets a class outrank the label without sharing a
    feature with the row), ``weights`` theirs (None: 1; the hits and the temperature's
    log-likelihood weighted). O(rows x K) per Newton step.

    Example:

    >>> import torch
    >>> from pyro_ar.infer.pattern_fit import choose_bias
    >>> U = torch.tensor([[1.0, 0.9], [1.0, 0.9], [0.9, 1.0]])      # the label is class 1 each time
    >>> beta, T, scores = choose_bias(U, torch.tensor([1, 1, 1]), torch.tensor([0.0, 1.0]))
    >>> beta, scores[0.0], scores[beta]        # a bias towards the more frequent class 1 wins
    (0.25, 0.6666666666666666, 1.0)
    """
    best, rows, scores, T = None, torch.arange(len(y)), {}, None
    mean = partial(weighted_mean, weights=weights)
    for beta in BIAS_WEIGHTS:
        bias = beta * log_counts
        T = calibrate_temperature(U, y, bias=bias, weights=weights, **({} if T is None else {"start": T}))
        sc = torch.mul(U, T).add_(bias)
        rank = (sc > sc[rows, y][:, None]).sum(1)
        hits = 0.5 * (mean(rank < 1) + mean(rank < 10))
        scores[beta] = hits
        if best is None or hits > best[0]:
            best = (hits, beta, T)
    return best[1], best[2], scores


def calibrate_temperature(U: torch.Tensor, y: torch.Tensor, start: float = 15.0, steps: int = 40,
                          bias=None, weights=None) -> float:
    r"""The temperature T > 0 that maximises the mean log-likelihood of the labels ``y`` under
    the softmax of T U + b (U: (n, K) scores, b: the (K,) ``bias``, 0 if None; the means below
    weighted by the rows' ``weights``, if given),
    :math:`f(T) = \overline{T u_y + b_y - \log\sum_k e^{T u_k + b_k}}`, a concave function of T,
    by Newton's method, :math:`f'(T) = \overline{u_y - E_{p_T}[u]}`,
    :math:`f''(T) = -\overline{\mathrm{Var}_{p_T}[u]}`, safeguarded: a step after which f does not
    increase is halved until it does (where the softmax is peaked, f'' is nearly 0 and the plain
    Newton step overshoots the maximum by orders of magnitude; where f'' rounds to 0, T is doubled
    or halved in the direction of f'); T kept in [1, 1000]; until a step moves T by less than 0.1 %.

    Example:

    >>> import torch
    >>> from pyro_ar.infer.pattern_fit import calibrate_temperature
    >>> U = torch.tensor([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])   # right 3 times in 4
    >>> round(calibrate_temperature(U, torch.tensor([0, 0, 0, 0])), 3)        # sigmoid(T) = 3/4
    1.099
    """
    rows, mean = torch.arange(len(y)), partial(weighted_mean, weights=weights)
    label_u, p = U[rows, y], torch.empty_like(U)
    label_b = 0.0 if bias is None else mean(bias[y])
    T, best = float(start), None  # best: (f, T) of the last accepted point
    for _ in range(steps):
        torch.mul(U, T, out=p)  # z = T U + b, then p = softmax(z), in place on one (n, K) buffer
        if bias is not None:
            p.add_(bias)
        top = p.amax(1)
        total = p.sub_(top[:, None]).exp_().sum(1)
        f = T * mean(label_u) + label_b - mean(top + total.log())
        if best is not None and not f > best[0]:  # overshot: halve the step back from the accepted T
            T = 0.5 * (T + best[1])
            if abs(T - best[1]) < 1e-3 * best[1]:
                return best[1]
            continue
        best = (f, T)
        p.div_(total[:, None]).mul_(U)  # p U
        expected = p.sum(1)
        var = p.mul_(U).sum(1) - expected ** 2
        grad, curv = mean(label_u - expected), mean(var)
        if curv > 0:
            step = grad / curv
        elif grad != 0:  # a one-hot softmax: f'' rounds to 0, so double or halve T (safeguarded)
            step = T if grad > 0 else -0.5 * T
        else:
            return T
        T, old = min(max(T + step, 1.0), 1000.0), T
        if abs(T - old) < 1e-3 * old:
            return T
    return best[1]


def max_held_out(num_classes: int) -> int:
    """Held-out rows kept for ``num_classes`` classes: ``MAX_HELD_OUT``, fewer (not under
    200) where rows x K would pass ``HELD_OUT_UTILITIES``.

    >>> from pyro_ar.infer.pattern_fit import max_held_out
    >>> max_held_out(26_793), max_held_out(122_929)
    (1000, 406)
    """
    return int(max(200, min(MAX_HELD_OUT, HELD_OUT_UTILITIES // max(int(num_classes), 1))))


def cap_held_out(train_idx: np.ndarray, val_idx: np.ndarray, rng, groups=None, num_classes: int = 0) -> tuple:
    """``(train, held out)``: at most ``MAX_HELD_OUT`` of the held-out rows ``val_idx``
    (:func:`max_held_out` of ``num_classes``; drawn uniformly by ``rng``) stay held out, the
    others join the training rows (sorted); with ``groups`` (label sets: the row of each
    (row, label) pair) whole rows are kept or returned, at most that many of them.

    Example:

    >>> import numpy as np
    >>> from pyro_ar.infer.pattern_fit import cap_held_out
    >>> train, held = cap_held_out(np.arange(9000), np.arange(9000, 12000), np.random.RandomState(0))
    >>> len(train), len(held)
    (11000, 1000)
    """
    cap = max_held_out(num_classes)
    if groups is not None:
        rows = np.unique(groups[val_idx])
        if len(rows) <= cap:
            return train_idx, val_idx
        held = np.isin(groups[val_idx], rng.choice(rows, cap, replace=False))
        return np.sort(np.concatenate([train_idx, val_idx[~held]])), val_idx[held]
    if len(val_idx) <= cap:
        return train_idx, val_idx
    perm = rng.permutation(val_idx)
    return np.sort(np.concatenate([train_idx, perm[cap:]])), np.sort(perm[:cap])


class CentroidStart(NamedTuple):
    """The starting scorer of a fit on the weight-pattern path, chosen on its held-out rows
    (the estimator's ``centroid_start_``): the chosen idf power p (``idf_power``: the
    estimator's feature scale is 1 / idf^p), the centroid power gamma (``power``), the root q of the class sums
    (``root``), the temperature T, the bias weight beta (``bias``), and the held-out hits of
    each (p, q, gamma) scored (``scorer_scores``) and of each beta (``bias_scores``).

    Example (a fit's is ``ARClassifier(...).fit(X, y).centroid_start_``):

    >>> from pyro_ar.infer.pattern_fit import CentroidStart, centroid_shape
    >>> start = CentroidStart(idf_power=1.5, power=0.8, root=0.5, temperature=12.0, bias=0.25, scorer_scores={},
    ...                       bias_scores={})
    >>> centroid_shape(start)                  # what pattern_and_centroids builds the start from
    {'power': 0.8, 'temperature': 12.0, 'root': 0.5}
    """

    idf_power: float
    power: float
    root: float
    temperature: float
    bias: float
    scorer_scores: dict
    bias_scores: dict


def centroid_shape(start=None) -> dict:
    """The shape ``{"power": gamma, "temperature": T, "root": q}`` of the starting scorer
    ``start`` (a :class:`CentroidStart`) for :func:`~pyro_ar.training_path.pattern_and_centroids`;
    before any choice (None) the plain centroids: 1, ``PATTERN_INIT_TEMPERATURE`` and 1.

    >>> from pyro_ar.infer.pattern_fit import centroid_shape
    >>> centroid_shape()["power"], centroid_shape()["root"]       # the plain centroids
    (1.0, 1.0)
    """
    from ..training_path import PATTERN_INIT_TEMPERATURE

    if start is None:
        return {"power": 1.0, "temperature": PATTERN_INIT_TEMPERATURE, "root": 1.0}
    return {"power": start.power, "temperature": start.temperature, "root": start.root}


def choose_start(data, train_idx, val_idx, rng, feature_scale=None, standardize=True):
    """``(train, held out, data, start)`` of a fresh fit on the weight-pattern path: the
    held-out rows capped (:func:`cap_held_out`) and, with ``standardize``, the starting scorer
    chosen on them from the rows ``data.X`` of the idf scale ``feature_scale``
    (``choose_centroid_scorer``; ``start``: a :class:`CentroidStart`, None without
    ``standardize``; ``data.X`` becomes the rows of the chosen idf power, whose feature scale is
    ``feature_scale ** start.idf_power``)."""
    train_idx, val_idx = cap_held_out(train_idx, val_idx, rng, data.groups, data.K)
    if not standardize:
        return train_idx, val_idx, data, None
    X, *chosen = choose_centroid_scorer(data.X, data.codes, data.K, train_idx, val_idx, feature_scale, data.groups,
                                        data.weights)
    return train_idx, val_idx, data._replace(X=X), CentroidStart(*chosen)


def recentre_fit(state: dict, data, name: str, train_pattern, train_loc, shape: dict, beta=None,
                 train_codes=None, train_weights=None) -> tuple:
    r"""``(state, pattern, loc)``: :func:`recentre` of a fit on the training split (its weight
    pattern ``train_pattern`` started at ``train_loc``) onto the pattern and centroids of all the
    rows of ``data`` (:func:`~pyro_ar.training_path.pattern_and_centroids` of ``shape``,
    :func:`centroid_shape`): the weights ``name`` of the param ``state`` move onto them; with a
    bias weight ``beta`` the bias ``name[:-6] + "bias"`` moves likewise, by
    :math:`\beta (\log(1 + n_k) - \log(1 + n^{tr}_k))` (``train_codes``: the split's labels,
    ``train_weights`` theirs; the counts and the centroids weighted by ``data.weights``)."""
    from ..training_path import pattern_and_centroids

    pattern, loc = pattern_and_centroids(data.X, data.codes, data.K, **shape, weights=data.weights)
    state = recentre(state, name, train_pattern, train_loc, pattern, loc)
    if beta and train_codes is not None:
        bias_name = name[:-len("weight")] + "bias"
        b = state["params"][bias_name]
        shift = beta * (np.log1p(np.bincount(data.codes, data.weights, minlength=data.K))
                        - np.log1p(np.bincount(train_codes, train_weights, minlength=data.K)))
        state = {**state, "params": {**state["params"], bias_name: b.detach() + torch.as_tensor(shift).to(b)}}
    return state, pattern, loc


def pattern_heldout_log_lik(X, pattern, labels, rows=None, dense_share: float = 1 / 64, noise="gumbel"):
    r"""``score(weight, bias) -> (B,)`` float64 :math:`\log p(y \mid \psi_r)` (``noise``'s
    :meth:`~pyro_ar.noise.Noise.log_marginal_rows`; Gumbel: :math:`\log \mathrm{softmax}(\psi_r)_{y}`) of the
    held-out ``labels`` (numpy, B) at their rows ``rows`` (B; None: row i for label i) of the
    scipy ``X``, :math:`\psi_{rk} = b_k + u_{rk}`, :math:`u = X W^\top`, W on ``pattern``
    (``weight``: its entries, ``bias``: (K,)); the Gumbel (softmax) held-out score of the
    weight-pattern path, equal (to float64 rounding) to
    :func:`~pyro_ar.evaluation.log_likelihood` of the utilities of
    :func:`~pyro_ar.estimator._model.utility_source`.

    Built once per fit (not once per score): X as CSR and the layout of :math:`W^\top` (the
    pattern's :meth:`~pyro_ar.weight_pattern.WeightPattern.columns`). The product is nearly
    dense where a few common features reach most classes (GCIDE's glosses: 84 % of the held-out
    rows x K), so it is split by feature: the features of X whose pattern column holds more
    than ``dense_share`` K classes as dense rows of :math:`W^\top` (X's columns of them times
    a dense F x K block: a streamed product, no sparse accumulator), the others as the sparse
    product, added into the same dense (rows, K) array; then one log-sum-exp per row. Each
    score gathers the weights into both parts: O(nnz(X) x column lengths + rows x K).

    Example:

    >>> import numpy as np, scipy.sparse as sp, torch
    >>> from pyro_ar.weight_pattern import WeightPattern
    >>> from pyro_ar.infer.pattern_fit import pattern_heldout_log_lik
    >>> pattern = WeightPattern(torch.tensor([0, 4, 5]), num_classes=2, num_features=3)  # W = [[w0, 0, 0], [0, w1, w2]]
    >>> score = pattern_heldout_log_lik(sp.csr_matrix([[1.0, 0.0, 1.0]]), pattern, np.array([1]))
    >>> psi = torch.tensor([1.0 + 0.5, 2.0 + 3.0])             # b + X W^T with w = (1, 2, 3), b = (0.5, 2)
    >>> bool(np.isclose(score(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 2.0]))[0], float(psi.log_softmax(0)[1])))
    True
    """
    X = sp.csr_matrix(X, dtype=np.float64)
    starts, classes, positions = (t.cpu().numpy() for t in pattern.columns())
    K, D = pattern.num_classes, pattern.num_features
    labels = np.array(labels, dtype=np.int64)
    rows = np.arange(len(labels)) if rows is None else np.array(rows, dtype=np.int64)
    nz, rows_t, labels_t = get_noise(noise), torch.from_numpy(rows), torch.from_numpy(labels)
    length = np.diff(starts)
    dense = np.flatnonzero((length > dense_share * K) & (np.bincount(X.indices, minlength=D) > 0))
    X_dense, X_sparse = sp.csr_matrix(X[:, dense]), X.copy()
    X_sparse.data[np.isin(X_sparse.indices, dense)] = 0.0
    X_sparse.eliminate_zeros()
    count = length[dense]  # the dense features' entries, feature by feature
    entry = np.repeat(starts[dense] - (np.cumsum(count) - count), count) + np.arange(count.sum())
    flat = np.repeat(np.arange(len(dense)) * K, count) + classes[entry]
    dense_positions = positions[entry]

    def score(weight, bias):
        w = weight.detach().cpu().double().numpy()
        b = bias.detach().cpu().double().numpy()
        block = np.zeros(len(dense) * K)
        block[flat] = w[dense_positions]
        U = np.asarray(X_dense @ block.reshape(len(dense), K)) if len(dense) else np.zeros((X.shape[0], K))
        S = sp.csr_matrix(X_sparse @ sp.csr_matrix((w[positions], classes, starts), shape=(D, K)))
        U[np.repeat(np.arange(S.shape[0]), np.diff(S.indptr)), S.indices] += S.data
        U += b
        return nz.log_marginal_rows(torch.from_numpy(U), rows_t, labels_t).numpy()
    return score


def pattern_validation_score(X, model, labels, rows=None, sample_weight=None, noise="gumbel"):
    """``score() -> {"val_log_lik": v}`` of a weight-pattern fit with point weights: ``v`` the
    mean (``sample_weight``-weighted) of :func:`pattern_heldout_log_lik` of the held-out
    ``labels`` under ``model``'s fitted weight and bias (the layout built once, here)."""
    per_row = pattern_heldout_log_lik(X, model.weight_pattern, labels, rows, noise=noise)
    w = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)

    def score():
        fitted = model.fitted_parameters()
        lp = per_row(fitted["weight"], fitted["bias"])
        return {"val_log_lik": weighted_mean(lp, w)}
    return score

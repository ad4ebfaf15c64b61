"""How far can the weight-pattern path's *start* go on the reverse dictionaries? (issue 36,
item 4: a diagnostic, not a method.) The centroid scorer family that ``ARClassifier()`` chooses
its start from (:mod:`pyro_ar.infer.pattern_fit`),

    score_k(x) = x . s_k^q / |s_k^q|^gamma + r log(1 + n_k),

rows x of idf weights idf^p (L2-normalised), s_k the class sums of the training rows, n_k their
numbers, s_k^q their entries to the power q, r = beta / T, scored on the **test** rows for
every (p, q, gamma, r) of a grid (by default the estimator's p, q and gamma): the best
cell is an oracle (chosen on the test rows themselves), an upper bound of what any held-out
choice within the family reaches. With ``--rank R`` the cell ``--cell p,gamma,r`` is also scored
with a shared low-rank term added, lam (x V)(c_k V)^T, V the top-R right singular vectors of the
training rows (LSI; lam in ``LAMBDAS``): what a shared low-rank part could add over exact word
matches. Two extensions of the family (session 46), each a flag: ``--weightings idf,icf``
also weights the features by their inverse *class* frequency, icf_j = 1 + log((1 + K) / (1 +
cf_j)), cf_j the number of classes whose training rows hold feature j (a gloss repeated for
each of a synset's lemmas counts once per class, where idf counts it once per row), instead of
the estimator's idf; ``--query-offsets 0,0.5`` also weights the test rows by the power p + a
(the class sums keep p). Differences of top-1 / top-10 against the plain tf-idf centroid
(p = 1, gamma = 1, r = 0) with paired SEs over the test rows, in percentage points.
``--heldout-draws N`` then asks which (p, q, gamma) of the idf grid a held-out choice picks
(``pattern_fit._heldout_hits``, (top-1 + top-10) hits / 2 at r = 0, as ``ARClassifier()``
scores the shape) on 1,000 training rows held out from the class sums, drawn N times two ways:
uniformly, as the estimator draws them, and like the test rows (one random row of each class
with at least three, the reverse dictionaries' test protocol); each pick with its test row
above. ``--quick``: the rows of ``QUICK_CLASSES`` random classes
(``benchmarks.peers_data.subset_classes``, seed 0).

    python -m benchmarks.dictionary_start_ceiling [--dataset wordnet|gcide|synthetic] [--rank R]
        [--cell 2,0.6,0.01] [--powers 1,1.5,...] [--gammas 1,0.8,...] [--weightings idf[,icf]]
        [--query-offsets 0[,0.5]] [--heldout-draws N] [--out DIR]
"""

import json
import os

import numpy as np
import torch

from benchmarks import harness
from benchmarks.peers_data import QUICK_CLASSES, load, subset_classes
from pyro_ar.infer.pattern_fit import CENTROID_POWERS, CENTROID_ROOTS, IDF_POWERS

# the grid ARClassifier() chooses from (--powers / --gammas score others)
POWERS, GAMMAS, ROOTS = IDF_POWERS, CENTROID_POWERS, CENTROID_ROOTS
RATIOS = (0.0, 0.01, 0.03)
LAMBDAS = (0.1, 0.2, 0.3, 0.5, 0.8)


def class_centroids(Xp, y, K, gamma, root=1.0):
    """The (K, D) class sums of the training rows, entries to the power ``root``, over their norms
    ** gamma (CSR float32)."""
    import scipy.sparse as sp
    from pyro_ar.infer.pattern_fit import _class_sums

    S = _class_sums(Xp, y, K, np.arange(Xp.shape[0]), root)
    n = np.sqrt(np.asarray(S.multiply(S).sum(1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / np.where(n > 0, n, 1.0) ** gamma) @ S).astype(np.float32)


def inverse_class_frequency(X, y, K):
    """icf_j = 1 + log((1 + K) / (1 + cf_j)), cf_j the number of classes with a training row
    holding feature j."""
    import scipy.sparse as sp

    holds = sp.csr_matrix((np.ones(len(y)), (y, np.arange(len(y)))), shape=(K, len(y))) @ (X != 0)
    cf = np.asarray((holds > 0).sum(0)).ravel()
    return 1.0 + np.log((1.0 + K) / (1.0 + cf))


def heldout_picks(X1, scale, d, powers, gammas, draws, size=1000):
    """For each of ``draws`` seeds and each way of drawing ``size`` held-out training rows (fewer
    where the data have fewer classes of >= 3 rows, or rows / 5)
    (``uniform``; ``like_test``: one random row of each class with >= 3 rows), the (p, q, gamma)
    cell of the idf grid with the most held-out hits (pattern_fit._heldout_hits; the other rows
    make the class sums)."""
    from pyro_ar.infer.pattern_fit import _heldout_hits, reweight_rows

    counts, picks = np.bincount(d.y, minlength=d.K), []
    size = min(size, int((counts >= 3).sum()), len(d.y) // 5)  # (fewer on --quick's classes)
    for seed, mode in ((s, m) for s in range(draws) for m in ("uniform", "like_test")):
        rng = np.random.RandomState(seed)
        if mode == "uniform":
            val = rng.choice(len(d.y), size, replace=False)
        else:
            perm = rng.permutation(len(d.y))
            first = perm[np.unique(d.y[perm], return_index=True)[1]]
            val = rng.choice(first[counts[d.y[first]] >= 3], size, replace=False)
        val, train = np.sort(val), np.setdiff1d(np.arange(len(d.y)), val)
        scores = {}
        for power in powers:
            Xp = reweight_rows(X1, scale ** (1.0 - power))
            for root in ROOTS:
                hits = _heldout_hits(Xp, d.y, d.K, train, val, tuple(gammas), root=root)
                scores.update({f"p={power:g},q={root:g},gamma={g:g}": float(h) for g, h in zip(gammas, hits)})
        best = max(scores, key=scores.get)
        picks.append({"seed": seed, "heldout": mode, "pick": best, "hits": scores[best], "scores": scores})
        print(json.dumps({k: v for k, v in picks[-1].items() if k != "scores"}), flush=True)
    return picks


def test_ranks(Xt, yt, C, bias, low_rank=None, chunk=1000):
    """Rank of the label (0 = first) of each test row under x C^T + bias (+ A_n B^T)."""
    out = []
    for i in range(0, Xt.shape[0], chunk):
        U = (Xt[i:i + chunk] @ C.T).toarray() + bias
        if low_rank is not None:
            U += low_rank[0][i:i + chunk] @ low_rank[1].T
        true = U[np.arange(U.shape[0]), yt[i:i + chunk]]
        out.append((U > true[:, None]).sum(1))
    return np.concatenate(out)


def cell(name, ranks, base):
    r = {"cell": name}
    for k in (1, 10):
        dif = (ranks < k).astype(float) - (base < k)
        r[f"top{k}"] = 100 * float((ranks < k).mean())
        r[f"d_top{k}"], r[f"se_top{k}"] = 100 * float(dif.mean()), 100 * float(dif.std(ddof=1) / np.sqrt(len(dif)))
    print(json.dumps(r), flush=True)
    return r


def main():
    p = harness.parser(__doc__)
    p.add_argument("--dataset", default="wordnet", choices=("wordnet", "gcide", "synthetic"))
    p.add_argument("--data-dir", default=None)
    p.add_argument("--rank", type=int, default=0)
    p.add_argument("--cell", default="2,0.6,0.01", help="p,gamma,r of the low-rank runs")
    p.add_argument("--powers", default=",".join(f"{v:g}" for v in POWERS), help="idf powers p scored")
    p.add_argument("--gammas", default=",".join(f"{v:g}" for v in GAMMAS), help="centroid-norm powers scored")
    p.add_argument("--weightings", default="idf", help="feature weightings scored: idf and/or icf")
    p.add_argument("--query-offsets", default="0", help="offsets a of the test rows' power p + a")
    p.add_argument("--heldout-draws", type=int, default=0, help="held-out draws of each kind to pick a cell on")
    args = p.parse_args()
    unknown = set(args.weightings.split(",")) - {"idf", "icf"}
    if unknown:
        p.error(f"--weightings: unknown {sorted(unknown)}; choose from idf, icf")
    env = harness.start(args)
    from scipy.sparse.linalg import svds
    from pyro_ar.features import apply_scaler, fit_scaler
    from pyro_ar.infer.pattern_fit import reweight_rows

    d = load(args.dataset, args.data_dir)
    if args.quick:
        d = subset_classes(d, QUICK_CLASSES)
    _, scale = fit_scaler(d.X, sparse_inputs=True, idf=True)
    zero = np.zeros(d.X.shape[1])
    X1, Xt1 = apply_scaler(d.X, zero, scale, True), apply_scaler(d.Xt, zero, scale, True)
    log_counts = np.log1p(np.bincount(d.y, minlength=d.K))
    base = test_ranks(Xt1, d.yt, class_centroids(X1, d.y, d.K, 1.0), 0.0)
    rows, want = [], tuple(float(v) for v in args.cell.split(","))
    weightings = {"idf": np.ones(d.X.shape[1]), "icf": scale * inverse_class_frequency(X1, d.y, d.K)}
    offsets = [float(a) for a in args.query_offsets.split(",")]
    for (wname, extra), power in ((w, pw) for w in weightings.items() if w[0] in args.weightings.split(",")
                                  for pw in (float(v) for v in args.powers.split(","))):
        w = extra ** power * scale ** (1.0 - power)  # (X1 holds idf rows: idf^(1-p) w'^p gives w'^p)
        Xp = reweight_rows(X1, w).astype(np.float32)
        queries = {a: reweight_rows(Xt1, extra ** (power + a) * scale ** (1.0 - power - a)).astype(np.float32)
                   for a in offsets}
        tag = "" if wname == "idf" else f"{wname},"
        for root, gamma in ((q, float(g)) for q in ROOTS for g in args.gammas.split(",")):
            C = class_centroids(Xp, d.y, d.K, gamma, root)
            for a, Xtp in queries.items():
                for ratio in RATIOS:
                    rows.append(cell(f"{tag}p={power:g},{f'a={a:g},' if a else ''}q={root:g},gamma={gamma:g},"
                                     f"r={ratio:g}", test_ranks(Xtp, d.yt, C, ratio * log_counts), base))
            Xtp = queries[offsets[0]]
            if args.rank and root == 1.0 and (wname, power, gamma) == ("idf",) + want[:2]:
                V = svds(Xp.astype(np.float64), k=min(args.rank, min(Xp.shape) - 1), random_state=args.seed)[2].T.astype(np.float32)
                A, B = np.asarray(Xtp @ V), np.asarray(C @ V)
                for lam in LAMBDAS:
                    rows.append(cell(f"p={power:g},gamma={gamma:g},r={want[2]:g},lsi{args.rank}x{lam:g}",
                                     test_ranks(Xtp, d.yt, C, want[2] * log_counts, (lam * A, B)), base))
    best = max(rows, key=lambda r: r["d_top1"])
    print("oracle best top-1:", json.dumps(best))
    cols = [("cell", "cell", "s"), ("top-1 %", "top1", ".2f"), ("top-10 %", "top10", ".2f")]
    cols += [(f"{h} top-{k}", f"{h}_top{k}", "+.2f") for k in (1, 10) for h in ("d", "se")]
    print(harness.table(rows, cols))
    picks = heldout_picks(X1, scale, d, [float(v) for v in args.powers.split(",")],
                          [float(g) for g in args.gammas.split(",")], args.heldout_draws)
    by_cell = {r["cell"]: r for r in rows}
    for pick in picks:  # the picked cell's test row at r = 0.01 and 0.03, and the oracle's (flat, for claims)
        for tag, ratio in (("r1", "0.01"), ("r3", "0.03")):
            test = by_cell.get(f"{pick['pick']},r={ratio}", {})
            pick.update({f"test_{k}_{tag}": test.get(k) for k in ("d_top1", "se_top1", "d_top10")})
        pick.update(oracle_cell=best["cell"], oracle_d_top1=best["d_top1"], oracle_se_top1=best["se_top1"])
    if picks:
        print(harness.table(picks, [("draw", "seed", "d"), ("held out", "heldout", "s"), ("pick", "pick", "s"),
                                    ("test d top-1 (r=0.01)", "test_d_top1_r1", "+.2f"),
                                    ("test d top-1 (r=0.03)", "test_d_top1_r3", "+.2f")]))
    harness.save(args, f"dictionary_start_ceiling_{args.dataset}", {"rows": rows, "oracle_best_top1": best,
                                                                    "heldout_picks": picks, "environment_start": env})


if __name__ == "__main__":
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

"""Does ``ARClassifier`` training beat its own starting point? (issue 36, item 4.) The reverse
dictionaries (:func:`pyro_ar.datasets.load_wordnet_reverse_dictionary`, ``--dataset gcide``),
the tf-idf nearest centroid (no training: the weight-pattern path's start) against
``ARClassifier()`` and its variants, in one process, one thread, interleaved.

For each method: the test mean log-likelihood, top-1/5/10 accuracy, train CPU s
(``time.process_time`` of ``fit``), SVI steps, and the paired differences of top-1 and
top-10 against the centroid with their standard errors -- paired over the test rows: the
mean and the SE of the mean of the per-row difference of hits. A hit is counted the same way
for every method, ties broken at random in expectation: with g classes scoring above the label
and e others scoring the same, the label is in the top k with probability
clip((k - g) / (e + 1), 0, 1). (Ties are common here: a WordNet gloss is the row of each lemma
of its synset, so synonyms have identical centroids. Before, the centroid broke them by
position and the estimator counted them as hits, which favoured the estimator.) ``--classes N`` keeps N random classes (``benchmarks.peers_data.subset_classes``,
seed 0) for quick ablations; ``--quick`` is ``--classes 300``. A subset is small enough for
a full-rank W, so there the estimator is made to take the weight-pattern path of the full
sets (``FULL_RANK_MAX_BYTES`` lowered to 64 KiB for the run).

    python -m benchmarks.dictionary_training [--dataset wordnet|gcide] [--classes N] [--quick]
        [--variants '{"name": {kwargs}}'] [--no-default] [--out DIR]

Prints one table and writes ``dictionary_training_<dataset>[_<classes>].json`` to ``--out``.
"""

import json
import os

import numpy as np
import torch

from benchmarks import harness
from benchmarks.peers import fit_centroid
from benchmarks.peers_data import QUICK_CLASSES, featurize, load, subset_classes

KS = (1, 5, 10)


def ranks_of_estimator(clf, Xt, yt, chunk=1000):
    """``((classes above the label, classes tied with it), log p(y | x))`` per test row."""
    above, ties, lls = [], [], []
    for i in range(0, Xt.shape[0], chunk):
        lp = clf.predict_log_proba(Xt[i:i + chunk])
        true = lp[np.arange(lp.shape[0]), yt[i:i + chunk]]
        above.append((lp > true[:, None]).sum(1))
        ties.append((lp == true[:, None]).sum(1) - 1)
        lls.append(true)
    return (np.concatenate(above), np.concatenate(ties)), np.concatenate(lls)


def ranks_of_centroid(model, d, chunk=1000):
    """``(classes above the label, classes tied with it)`` per test row under the cosine to the
    tf-idf centroids ``model`` (D, K)."""
    Xt, above, ties = featurize(d, "tfidf").Xt, [], []
    for i in range(0, Xt.shape[0], chunk):
        scores = (Xt[i:i + chunk] @ model).toarray()
        true = scores[np.arange(scores.shape[0]), d.yt[i:i + chunk]]
        above.append((scores > true[:, None]).sum(1))
        ties.append((scores == true[:, None]).sum(1) - 1)
    return np.concatenate(above), np.concatenate(ties)


def hits(ranks, k):
    """P(label in the top k) per row, ties broken at random: clip((k - above) / (ties + 1), 0, 1)."""
    above, ties = ranks
    return np.clip((k - above) / (ties + 1.0), 0.0, 1.0)


def paired(ranks, base, k):
    """Mean and SE of the per-row difference of top-k hits (``ranks`` minus ``base``)."""
    dif = hits(ranks, k) - hits(base, k)
    return float(dif.mean()), float(dif.std(ddof=1) / np.sqrt(len(dif)))


def row(name, ranks, ll, cpu, base, steps=None):
    r = {"method": name, "log_lik": None if ll is None else float(np.mean(ll)), "cpu_s": cpu, "steps": steps,
         "tied_rows": float(np.mean(ranks[1] > 0))}
    for k in KS:
        r[f"top{k}"] = float(np.mean(hits(ranks, k)))
    for k in (1, 10):
        r[f"d_top{k}"], r[f"se_top{k}"] = paired(ranks, base, k)
    return r


def main():
    p = harness.parser(__doc__)
    p.add_argument("--dataset", default="wordnet", choices=("wordnet", "gcide"))
    p.add_argument("--data-dir", default=None)
    p.add_argument("--classes", type=int, default=None)
    p.add_argument("--variants", default="{}", help="JSON: name -> ARClassifier kwargs")
    p.add_argument("--no-default", action="store_true", help="leave out ARClassifier()")
    args = p.parse_args()
    env = harness.start(args)
    from pyro_ar import ARClassifier
    from pyro_ar.estimator import params_from_plain

    d = load(args.dataset, args.data_dir)
    classes = QUICK_CLASSES if args.quick and args.classes is None else args.classes
    if classes:
        d = subset_classes(d, classes)
        from pyro_ar import training_path as _training_path
        _training_path.FULL_RANK_MAX_BYTES = 1 << 16  # the full sets' path
    dt = featurize(d, "tfidf")  # (the rows are made before the timed fit, as in benchmarks.peers)
    t = harness.timer().start()
    cmodel = fit_centroid(dt, {})
    ccpu = t.cpu
    base = ranks_of_centroid(cmodel, d)
    rows = [row("centroid_tfidf", base, None, ccpu, base)]
    variants = {} if args.no_default else {"default": {}}
    variants.update(json.loads(args.variants))
    for name, kwargs in variants.items():
        clf = ARClassifier(**params_from_plain({"random_state": args.seed, **kwargs}))
        t = harness.timer().start()
        clf.fit(d.X, d.y)
        cpu = t.cpu
        ranks, ll = ranks_of_estimator(clf, d.Xt, d.yt)
        rows.append(row(name, ranks, ll, cpu, base, clf.n_steps_))
        rows[-1].update(kwargs=kwargs, best_validation_score=clf.best_validation_score_,
                        validation_scores=clf.validation_scores_)
        start = getattr(clf, "centroid_start_", None)  # the weight-pattern path's start
        if start is not None:
            rows[-1]["centroid_scorer"] = {f"p={p:g},q={q:g},gamma={g:g}": v
                                           for (p, q, g), v in start.scorer_scores.items()}
            rows[-1]["start"] = {"p": start.idf_power, "gamma": start.power, "q": start.root, "beta": start.bias,
                                 "temperature": start.temperature}
        print(json.dumps(rows[-1]), flush=True)
    cols = [("method", "method", "s"), ("CPU s", "cpu_s", ".1f"), ("steps", "steps", "d"), ("log-lik", "log_lik", ".3f")]
    cols += [(f"top-{k}", f"top{k}", ".4f") for k in KS]
    cols += [(f"{h} vs centroid", f"{h}_top{k}", "+.4f") for k in (1, 10) for h in ("d", "se")]
    print(harness.table(rows, cols))
    name = f"dictionary_training_{args.dataset}" + (f"_{classes}" if classes else "")
    harness.save(args, name, {"rows": rows, "num_classes": int(d.K), "test_rows": int(len(d.yt)), "environment_start": env})


if __name__ == "__main__":
    torch.set_num_threads(1)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()

"""The command line against the Python API on the WordNet reverse dictionary (issue 39, item 6).

The data set of :func:`pyro_ar.datasets.load_wordnet_reverse_dictionary` is written to files
as PECOS reads them (``X_train.npz``, ``Y_train.npz``: scipy CSR features and one-label-per-row
indicators; ``Y_test_sets.npz``: the test rows' label sets, ``info["test_label_sets"]``), and
with ``--text`` also in the XMC repository's text format (``train.txt``, ``test.txt``). Then

* the command line, each step its own process: ``python -m pyro_ar fit`` on the files,
  ``predict -k 10`` to ``P.npz``, ``evaluate`` against the held-out word (accuracy, top-5,
  top-10), against the label sets (P@1, P@5, nDCG@5, PSP@5 with ``--train-labels``), and with
  the model (the test log-likelihood);
* the Python API in this process: ``ARClassifier(random_state=SEED).fit(X, y)`` on the same
  arrays, ``score``, ``predict_top_k``, ``log_likelihood``, and P@k from its definition.

Both on one torch thread (the subprocesses get ``OMP_NUM_THREADS=1``), so the fits run the same
floating-point operations: the script reports whether the top-10 labels are identical, the
largest difference of their probabilities and of every metric, and the CPU seconds of each
path (the command line's: the children's user + system time, interpreter start-up included)::

    python -m benchmarks.cli_wordnet [--data-dir DIR] [--text] [--quick] [--out DIR]

``--quick``: the first 8,000 training rows and the first 1,000 test rows of their classes.
"""

import json
import resource
import subprocess
from pathlib import Path

import numpy as np

from benchmarks import harness

ROOT = harness.ROOT


def write_files(d, folder: Path, quick: bool, text: bool):
    """The data set's files in ``folder``; returns the in-memory arrays the API fits on."""
    import scipy.sparse as sp

    from pyro_ar.datasets import to_scipy_csr

    n_train = 8000 if quick else d.num_train
    X, y = to_scipy_csr(d.x_train)[:n_train], d.y_train.numpy()[:n_train]
    keep = np.flatnonzero(np.isin(d.y_test.numpy(), y))[:1000 if quick else None]  # (all when not quick)
    Xt, yt = to_scipy_csr(d.x_test)[keep], d.y_test.numpy()[keep]
    K = d.num_classes
    sets = [d.info["test_label_sets"][i] for i in keep]

    def indicator(rows, labels, n):
        return sp.csr_matrix((np.ones(len(labels), np.float32), (rows, labels)), shape=(n, K))

    sp.save_npz(folder / "X_train.npz", X), sp.save_npz(folder / "X_test.npz", Xt)
    sp.save_npz(folder / "Y_train.npz", indicator(np.arange(len(y)), y, len(y)))
    sp.save_npz(folder / "Y_test.npz", indicator(np.arange(len(yt)), yt, len(yt)))
    sizes = [len(s) for s in sets]
    sp.save_npz(folder / "Y_test_sets.npz", indicator(np.repeat(np.arange(len(sets)), sizes),
                                                      np.concatenate(sets), len(sets)))
    if text:
        from sklearn.datasets import dump_svmlight_file

        for name, (a, b) in {"train": (X, y), "test": (Xt, yt)}.items():
            path = folder / f"{name}.txt"
            dump_svmlight_file(a, indicator(np.arange(len(b)), b, len(b)), str(path), zero_based=True, multilabel=True)
            body = path.read_bytes()
            path.write_bytes(f"{a.shape[0]} {a.shape[1]} {K}\n".encode() + body)  # the XMC header
    return X, y, Xt, yt, sets


def cli(*args):
    """Run ``python -m pyro_ar *args`` on one thread; ``(stdout, CPU seconds)``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(harness.module_command("pyro_ar", *args), capture_output=True, text=True,
                         env=harness.worker_env(str(ROOT), OMP_NUM_THREADS="1"), cwd=ROOT)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode:
        raise SystemExit(f"pyro-ar {args[0]} failed ({out.returncode}):\n{out.stderr}")
    return out.stdout, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def run_cli(folder: Path, seed: int, source: str):
    """fit / predict / evaluate on the ``npz`` or ``text`` files; ``(metrics, top-10 file, CPU s)``."""
    x, xt = ((folder / "X_train.npz", folder / "X_test.npz") if source == "npz"
             else (folder / "train.txt", folder / "test.txt"))
    y = ["-y", folder / "Y_train.npz"] if source == "npz" else []
    model, scores = folder / f"model_{source}.pt", folder / f"P_{source}.npz"
    cpu = {}
    _, cpu["fit"] = cli("fit", "-x", x, *y, "-m", model, "--random-state", seed, "-q")
    _, cpu["predict"] = cli("predict", "-x", xt, "-m", model, "-o", scores, "-k", 10, "-q")
    one, t1 = cli("evaluate", "-y", folder / "Y_test.npz", "-p", scores, "-k", 1, 5, 10, "--json")
    sets, t2 = cli("evaluate", "-y", folder / "Y_test_sets.npz", "-p", scores, "-k", 1, 5, "--json",
                   "--train-labels", folder / "Y_train.npz")
    ll, t3 = cli("evaluate", "-y", folder / "Y_test.npz", "-m", model, "-x", xt, "-k", 1, "--json", "-q")
    cpu["evaluate"] = t1 + t2 + t3
    metrics = {**json.loads(one), **{f"sets {k}": v for k, v in json.loads(sets).items()},
               "log_lik": json.loads(ll)["log_lik"]}
    return metrics, scores, cpu


def run_api(X, y, Xt, yt, sets, seed: int):
    """The Python API on the same arrays; ``(metrics, top-10 labels, their probabilities, CPU s)``."""
    from pyro_ar import ARClassifier

    with harness.timer() as fit:
        est = ARClassifier(random_state=seed).fit(X, y)
    with harness.timer() as rest:
        top, probs = est.predict_top_k(Xt, 10, return_proba=True)
        hits = top == yt[:, None]
        in_set = np.array([[c in s for c in row] for row, s in zip(top.tolist(), map(set, sets))])  # (not hot)
        metrics = {"accuracy": est.score(Xt, yt), "top5": hits[:, :5].any(1).mean(), "top10": hits.any(1).mean(),
                   "sets P@1": in_set[:, 0].mean(), "sets P@5": in_set[:, :5].mean(),
                   "log_lik": est.log_likelihood(Xt, yt)}
    return {k: float(v) for k, v in metrics.items()}, top, probs, {"fit": fit.cpu, "predict + evaluate": rest.cpu}


def main():
    p = harness.parser(__doc__, quick_help="8,000 training and 1,000 test rows")
    p.add_argument("--data-dir", default=None, help="the folder holding wordnet/ (default: the data root)")
    p.add_argument("--text", action="store_true", help="also fit from the XMC text files")
    args = p.parse_args()
    harness.start(args)
    from pyro_ar.cli import read_scores
    from pyro_ar.datasets import default_data_dir, load_wordnet_reverse_dictionary

    d = load_wordnet_reverse_dictionary(Path(args.data_dir or default_data_dir()) / "wordnet")
    folder = Path(args.out) / ("cli_wordnet_files_quick" if args.quick else "cli_wordnet_files")
    folder.mkdir(parents=True, exist_ok=True)
    X, y, Xt, yt, sets = write_files(d, folder, args.quick, args.text)
    api, top, probs, api_cpu = run_api(X, y, Xt, yt, sets, args.seed)
    rows = [dict(path="Python API", **api, cpu=api_cpu)]
    for source in ("npz", "text") if args.text else ("npz",):
        metrics, scores, cpu = run_cli(folder, args.seed, source)
        ranked, p_cli = read_scores(scores)
        rows.append(dict(path=f"command line ({source})", **metrics, cpu=cpu,
                         same_top10=bool(np.array_equal(ranked, top)),
                         max_prob_diff=float(np.abs(p_cli - probs).max()),
                         max_metric_diff=max(abs(metrics[k] - api[k]) for k in api)))
    for r in rows:
        r["cpu_s"] = sum(r["cpu"].values())
    cols = [("path", "path", ""), ("accuracy", "accuracy", ".4f"), ("top-5", "top5", ".4f"),
            ("top-10", "top10", ".4f"), ("P@1 (sets)", "sets P@1", ".4f"), ("P@5 (sets)", "sets P@5", ".4f"),
            ("log-lik", "log_lik", ".6f"), ("CPU s", "cpu_s", ".1f"), ("same top-10", "same_top10", ""),
            ("max |dp|", "max_prob_diff", ".1e"), ("max |d metric|", "max_metric_diff", ".1e")]
    print(f"WordNet reverse dictionary: K = {d.num_classes:,}, D = {X.shape[1]:,}, {X.shape[0]:,} / "
          f"{Xt.shape[0]:,} rows, seed {args.seed}")
    print(harness.table(rows, cols))
    harness.save(args, "cli_wordnet", {"data": {"K": d.num_classes, "D": X.shape[1], "train": X.shape[0],
                                                "test": Xt.shape[0]}, "rows": rows})


if __name__ == "__main__":
    main()

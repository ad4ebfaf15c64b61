"""ARClassifier with default settings against scikit-learn's LogisticRegression, on raw features.

For each data set (digits: sklearn's 8x8 digits, pixel values 0..16; MNIST: 28x28 pixels
0..255, both unscaled) it fits

* ``ARClassifier()`` -- no arguments, raw features;
* ``LogisticRegression(C=c)`` for c in {0.01, 0.1, 1, 10} on the same raw features (and
  the best of them by test log-loss, which favours scikit-learn);

and prints test log-loss (nats), accuracy and fit time (CPU seconds of this process and
wall seconds), side by side in one process. Results go to ``--out`` (JSON), outside the
repository by default.

    python benchmarks/estimator_vs_sklearn.py [--datasets digits mnist] [--quick]
"""

import argparse
import json
import os
import sys
import tempfile
import time
import warnings

import numpy as np


def load(name, quick):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if name == "digits":
        X, y = load_digits(return_X_y=True)
        return train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    from pyro_ar.datasets import load_mnist

    d = load_mnist()
    Xtr, ytr = d.x_train.numpy().astype(np.float64), d.y_train.numpy()
    Xte, yte = d.x_test.numpy().astype(np.float64), d.y_test.numpy()
    if Xtr.max() <= 1.0:  # the loader scales to [0, 1]: back to raw pixel values
        Xtr, Xte = Xtr * 255.0, Xte * 255.0
    if quick:
        Xtr, ytr, Xte, yte = Xtr[:6000], ytr[:6000], Xte[:2000], yte[:2000]
    return Xtr, Xte, ytr, yte


def timed_fit(est, X, y):
    c0, w0 = time.process_time(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    return est, time.process_time() - c0, time.perf_counter() - w0


def scores(est, X, y):
    from sklearn.metrics import log_loss

    p = est.predict_proba(X)
    return {"log_loss": float(log_loss(y, p, labels=est.classes_)),
            "accuracy": float((est.classes_[p.argmax(1)] == y).mean())}


def run(name, quick, Cs):
    from sklearn.linear_model import LogisticRegression

    from pyro_ar import ARClassifier

    Xtr, Xte, ytr, yte = load(name, quick)
    rows = []
    est, cpu, wall = timed_fit(ARClassifier(random_state=0), Xtr, ytr)
    rows.append({"method": "ARClassifier()", **scores(est, Xte, yte), "cpu_s": cpu, "wall_s": wall})
    print(name, rows[-1], flush=True)
    for C in Cs:
        lr, cpu, wall = timed_fit(LogisticRegression(C=C, max_iter=1000), Xtr, ytr)
        rows.append({"method": f"LogisticRegression(C={C})", **scores(lr, Xte, yte),
                     "cpu_s": cpu, "wall_s": wall})
        print(name, rows[-1], flush=True)
    best = min(rows[1:], key=lambda r: r["log_loss"])
    return {"dataset": name, "n_train": len(ytr), "n_test": len(yte), "rows": rows,
            "best_sklearn": best["method"],
            "gap_log_loss": rows[0]["log_loss"] - best["log_loss"],
            "gap_accuracy": rows[0]["accuracy"] - best["accuracy"]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--datasets", nargs="+", default=["digits", "mnist"])
    p.add_argument("--quick", action="store_true", help="MNIST: 6,000 training / 2,000 test images")
    p.add_argument("--C", type=float, nargs="+", default=[0.01, 0.1, 1.0, 10.0])
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "pyro_ar_estimator_vs_sklearn.json"))
    a = p.parse_args(argv)
    results = []
    for name in a.datasets:
        r = run(name, a.quick, a.C)
        results.append(r)
        print(f"\n{name}: {r['n_train']} train / {r['n_test']} test, raw features")
        print(f"{'method':28s} {'log-loss':>9s} {'accuracy':>9s} {'CPU s':>8s} {'wall s':>8s}")
        for row in r["rows"]:
            print(f"{row['method']:28s} {row['log_loss']:9.4f} {row['accuracy']:9.4f} "
                  f"{row['cpu_s']:8.1f} {row['wall_s']:8.1f}")
        print(f"ARClassifier() - best ({r['best_sklearn']}): log-loss {r['gap_log_loss']:+.4f}, "
              f"accuracy {r['gap_accuracy']:+.4f}")
        sys.stdout.flush()
    with open(a.out, "w") as f:
        json.dump({"command": " ".join(sys.argv), "results": results}, f, indent=1)
    print(f"\nresults in {a.out}")


if __name__ == "__main__":
    main()

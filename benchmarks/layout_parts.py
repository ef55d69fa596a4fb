"""CPU time of the split-sum and staged kernels inside one small explain (issue 31 item 3).

Wraps ``treeimp.measures.formulas.leaf_split_sums`` (the split-sum kernel),
``LeafStats.split_sums`` (the kernel with its output's allocation and the arrays handed
on) and ``treeimp.backends.numba.staged_block_stats`` (the staged kernel) with timers
of the calling thread's CPU time, runs ``reps`` explains on one thread after three
untimed ones and prints the medians per call (ms) and of the explain's process CPU time.
``xgb``: small_call.py's model and rows (300 depth-6 XGBoost trees, 3,000 rows,
methods mdi_oob and ufi); ``rfr`` / ``rfc``: a 50-tree depth-10 random forest regressor /
3-class classifier on 20,000 rows of 50 features, 3,000 held out, methods mdi_oob, ufi
and mdi_oob_centered. Run main and a branch alternately in fresh processes.

Usage: PYTHONPATH=CHECKOUT python benchmarks/layout_parts.py xgb|rfr|rfc [reps]
"""

import json
import os
import sys
import time

import numpy as np

import treeimp
import treeimp.backends.numba as backend
from treeimp.measures import formulas


def _model(kind):
    rng = np.random.default_rng(2)
    if kind == "xgb":
        import xgboost as xgb
        n, F, R = 100_000, 50, 3000
        X = rng.normal(size=(n + R, F)).astype(np.float32)
        signal = X[:, :5] @ np.array([1, -1, 0.5, 0.5, 0.25]) + np.sin(X[:, 5])
        y = (signal + rng.logistic(size=len(X)) > 0).astype(np.int32)
        model = xgb.XGBClassifier(n_estimators=300, max_depth=6, learning_rate=0.1, n_jobs=1,
                                  tree_method="hist").fit(X[:n], y[:n])
        return model, X[n:], y[n:], ("mdi_oob", "ufi")
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
    n, F, R = 20_000, 50, 3000
    X = rng.normal(size=(n + R, F))
    signal = X[:, :5] @ np.array([1, -1, 0.5, 0.5, 0.25]) + np.sin(X[:, 5])
    if kind == "rfr":
        y = signal + rng.normal(size=len(X))
        cls = RandomForestRegressor
    else:
        y = np.digitize(signal + rng.normal(size=len(X)), [-0.5, 0.5])
        cls = RandomForestClassifier
    model = cls(n_estimators=50, max_depth=10, random_state=0, n_jobs=1).fit(X[:n], y[:n])
    return model, X[n:], y[n:], ("mdi_oob", "ufi", "mdi_oob_centered")


def _timed(fn, times):
    def call(*args, **kwargs):
        t = time.thread_time()
        out = fn(*args, **kwargs)
        times.append(time.thread_time() - t)
        return out
    return call


def main(kind="xgb", reps=40):
    model, X, y, methods = _model(kind)
    times = {"kernel": [], "split_sums": [], "staged": []}
    formulas.leaf_split_sums = _timed(formulas.leaf_split_sums, times["kernel"])
    formulas.LeafStats.split_sums = _timed(formulas.LeafStats.split_sums, times["split_sums"])
    backend.staged_block_stats = _timed(backend.staged_block_stats, times["staged"])

    def call():
        return treeimp.explain(model, X, y, methods=methods, n_jobs=1, random_state=0)

    for _ in range(3):
        call()
    for v in times.values():
        v.clear()
    total = []
    for _ in range(reps):
        t = time.process_time()
        call()
        total.append(time.process_time() - t)
    out = {k: round(1e3 * float(np.median(v)), 3) for k, v in times.items() if v}
    out["explain"] = round(1e3 * float(np.median(total)), 3)
    out["load"] = round(os.getloadavg()[0], 2)
    print(kind, json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "xgb",
         int(sys.argv[2]) if len(sys.argv) > 2 else 40)

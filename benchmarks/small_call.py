"""One small explain against XGBoost's predict, in CPU and wall time (issue 31 item 3).

A 300-round depth-6 XGBClassifier (hist) trained on 100,000 rows of 50 float32
features; on 3,000 held-out rows, ``treeimp.explain(model, X, y, methods=("mdi_oob",
"ufi"))`` (the model parsed in every call) against ``booster.inplace_predict(X,
predict_type="margin")``. Every timed call follows an untimed call of the same
function (so that it does not run while the other's thread pools still spin); medians
of ``--repeats`` rounds of CPU time (``time.process_time``: all threads of the process)
and wall time. On a shared machine compare the CPU times: the wall times follow the
load. Prints one JSON line (``--kind regression``: an XGBRegressor instead).

Usage: PYTHONPATH=. python benchmarks/small_call.py [--threads 1] [--repeats 15]
       [--kind binary|regression] [--rows 3000] [--rounds 300]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--kind", choices=("binary", "regression"), default="binary")
    p.add_argument("--rows", type=int, default=3000, help="held-out rows")
    p.add_argument("--rounds", type=int, default=300)
    args = p.parse_args(argv)

    import xgboost as xgb

    import treeimp

    rng = np.random.default_rng(2)
    n, F = 100_000, 50
    X = rng.normal(size=(n + args.rows, F)).astype(np.float32)
    signal = X[:, :5] @ np.array([1, -1, 0.5, 0.5, 0.25]) + np.sin(X[:, 5])
    if args.kind == "binary":
        y = (signal + rng.logistic(size=len(X)) > 0).astype(np.int32)
        cls = xgb.XGBClassifier
    else:
        y = signal + rng.normal(size=len(X))
        cls = xgb.XGBRegressor
    model = cls(n_estimators=args.rounds, max_depth=6, learning_rate=0.1,
                n_jobs=args.threads, tree_method="hist").fit(X[:n], y[:n])
    Xv, yv = X[n:], y[n:]
    booster = model.get_booster()
    calls = {
        "predict": lambda: booster.inplace_predict(Xv, predict_type="margin"),
        "explain": lambda: treeimp.explain(model, Xv, yv, methods=("mdi_oob", "ufi"),
                                           n_jobs=args.threads, random_state=0),
    }
    for call in calls.values():  # numba's kernels loaded, XGBoost's caches made
        call()
    times = {name: ([], []) for name in calls}
    for _ in range(args.repeats):
        for name, call in calls.items():
            call()
            cpu, wall = time.process_time(), time.perf_counter()
            call()
            times[name][0].append(time.process_time() - cpu)
            times[name][1].append(time.perf_counter() - wall)
    med = {name: (float(np.median(c)), float(np.median(w))) for name, (c, w) in times.items()}
    out = {"python": sys.version.split()[0], "xgboost": xgb.__version__,
           "load": os.getloadavg()[0], "threads": args.threads, "kind": args.kind,
           **{f"{k}_cpu_ms": round(1e3 * v[0], 2) for k, v in med.items()},
           **{f"{k}_wall_ms": round(1e3 * v[1], 2) for k, v in med.items()},
           "ratio_cpu": round(med["explain"][0] / med["predict"][0], 2),
           "ratio_wall": round(med["explain"][1] / med["predict"][1], 2)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

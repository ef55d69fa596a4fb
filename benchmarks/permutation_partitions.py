"""How close permutations within dask partitions come to scikit-learn's global ones.

``treeimp.permutation_importance`` on a dask collection permutes each partition's rows
on its own (``treeimp/dask/permutation.py``); in memory it shuffles every column over
all rows, as scikit-learn does. On held-out rows that fit in memory this runs both on the
same rows, single-threaded on the synchronous scheduler, and reports per model and
scoring, over the features:

* ``|diff| / std``: the difference of the two mean importances relative to the
  in-memory importance's standard deviation over repeats;
* ``|z|``: that difference over its standard error, sqrt((s_mem^2 + s_dask^2) /
  repeats): about |N(0, 1)| (median 0.67) when the schemes estimate the same thing;
* ``sum dask / sum mem``: the total importance of the dask scheme relative to the
  global one.

Two layouts of the same rows: ``random`` (rows in random order, equal partitions) and
``sorted by x0`` (rows sorted by the most important feature first, so each partition
holds one stratum of it: the case the docstring warns about).

    python benchmarks/permutation_partitions.py            # 20,000 rows, 8 partitions
    python benchmarks/permutation_partitions.py --small    # a quick run
"""

from __future__ import annotations

import argparse
import time

import numpy as np


def _data(n, F, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    f = 1.2 * X[:, 0] - X[:, 1] + 0.8 * X[:, 2] * X[:, 3] + 0.5 * np.sin(2 * X[:, 4])
    return X, f + rng.normal(scale=0.5, size=n), (f + rng.logistic(size=n) > 0).astype(int)


def _models(args):
    import xgboost as xgb
    from sklearn.ensemble import RandomForestRegressor

    X, y_reg, y_bin = _data(args.train_rows, args.features, 0)
    return [
        ("XGBoost binary", "neg_log_loss",
         xgb.XGBClassifier(n_estimators=args.trees, max_depth=4, n_jobs=1).fit(X, y_bin),
         "binary"),
        ("RandomForest regression", "r2",
         RandomForestRegressor(n_estimators=args.trees // 4, max_depth=10, n_jobs=1,
                               random_state=0).fit(X, y_reg), "regression"),
    ]


def compare(model, scoring, X, y, args):
    import dask
    import dask.array as da

    import treeimp

    t = time.perf_counter()
    mem = treeimp.permutation_importance(model, X, y, scoring=scoring,
                                         n_repeats=args.repeats, random_state=0, n_jobs=1)
    mem_seconds = time.perf_counter() - t
    chunk = -(-len(X) // args.partitions)
    with dask.config.set(scheduler="sync"):
        t = time.perf_counter()
        dsk = treeimp.permutation_importance(
            model, da.from_array(X, chunks=(chunk, X.shape[1])),
            da.from_array(y, chunks=chunk), scoring=scoring, n_repeats=args.repeats,
            random_state=0, n_jobs=1)
        seconds = time.perf_counter() - t
    diff = dsk.importances_mean - mem.importances_mean
    ratio = np.abs(diff) / mem.importances_std
    z = np.abs(diff) / np.sqrt((mem.importances_std ** 2 + dsk.importances_std ** 2)
                               / args.repeats)
    return dict(ratio=ratio, z=z, total=dsk.importances_mean.sum() / mem.importances_mean.sum(),
                seconds=seconds, mem_seconds=mem_seconds, mem=mem.importances_mean,
                dask=dsk.importances_mean)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20000, help="held-out rows")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--train-rows", type=int, default=5000)
    parser.add_argument("--small", action="store_true", help="tiny sizes (a smoke run)")
    args = parser.parse_args(argv)
    if args.small:
        args.rows, args.repeats, args.trees, args.train_rows = 2000, 5, 20, 1000
    X, y_reg, y_bin = _data(args.rows, args.features, 1)
    order = np.argsort(X[:, 0], kind="stable")
    print(f"{args.rows} held-out rows x {args.features} features, {args.partitions} "
          f"partitions, {args.repeats} repeats")
    print("| model | scoring | rows | median |diff|/std | max |diff|/std | median |z| | "
          "max |z| | sum dask / sum mem | in memory (s) | dask (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for name, scoring, model, kind in _models(args):
        y = y_bin if kind == "binary" else y_reg
        for layout, rows in (("random", slice(None)), ("sorted by x0", order)):
            r = compare(model, scoring, X[rows], y[rows], args)
            results.append((name, layout, r))
            print(f"| {name} | {scoring} | {layout} | {np.median(r['ratio']):.2f} | "
                  f"{r['ratio'].max():.2f} | {np.median(r['z']):.2f} | {r['z'].max():.2f} | "
                  f"{r['total']:.3f} | {r['mem_seconds']:.1f} | {r['seconds']:.1f} |")
    for name, layout, r in results:
        print(f"{name}, {layout}: in memory {np.round(r['mem'], 4).tolist()}, "
              f"dask {np.round(r['dask'], 4).tolist()}")
    return results


if __name__ == "__main__":
    main()

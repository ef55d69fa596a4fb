"""Explaining held-out rows in a Spark DataFrame: rows per second of the Spark explain,
of the in-memory explain on the same rows, and of xgboost.spark's per-row SHAP
(``pred_contrib_col``) on the same rows.

A ``local[N]`` session (``--master``) holds ``--rows`` held-out rows x ``--features``
float features as one vector column plus the label and an id column, cached and
counted before any timing. An XGBoost model is trained with ``xgboost.spark``'s
``SparkXGBRegressor`` (``--rounds`` rounds, depth ``--depth``) on ``--train-rows``
rows of the same design, and explained three ways on the held-out rows:

* ``treeimp.explain(spark_model, sdf, id_col="id")`` (``mdi_oob``, ``ufi``): one Spark
  job, statistics reduced on the executors;
* ``treeimp.explain(booster, X, y)`` on the same rows as numpy arrays, ``n_jobs`` the
  session's cores;
* ``spark_model.setPredContribCol(...)`` then ``transform`` (every row's SHAP values
  from XGBoost, summed per feature in Spark so that every row is computed).

Each timing is the best of ``--repeats`` runs after one warm-up run (numba's kernels
and the executors' Python workers loaded). Prints a table and writes JSON.

    python benchmarks/spark_scale.py --rows 200000 --master "local[2]"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import treeimp  # noqa: E402

METHODS = ("mdi_oob", "ufi")


def design(n, p, seed):
    """y depends on the first 5 features, the rest noise."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    y = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3] + np.sin(X[:, 4]) \
        + 0.5 * rng.standard_normal(n)
    return X, y


def spark_frame(spark, X, y, partitions):
    """A cached DataFrame: features (vector), label, id = row position."""
    import pandas as pd
    from pyspark.ml.feature import VectorAssembler

    names = [f"f{j}" for j in range(X.shape[1])]
    pdf = pd.DataFrame(X, columns=names)
    pdf["label"] = y
    pdf["id"] = np.arange(len(y))
    sdf = spark.createDataFrame(pdf)
    sdf = VectorAssembler(inputCols=names, outputCol="features").transform(sdf)
    sdf = sdf.select("id", "label", "features").repartition(partitions, "id").cache()
    sdf.count()
    return sdf


def best_of(fn, repeats):
    fn()  # warm-up: kernels and Python workers loaded
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--train-rows", type=int, default=20_000)
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        p for p in (os.path.abspath(root), os.environ.get("PYTHONPATH", "")) if p)
    import pyspark
    import xgboost
    from pyspark.ml.functions import vector_to_array
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    from xgboost.spark import SparkXGBRegressor

    spark = (SparkSession.builder.master(args.master).appName("treeimp-spark-scale")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(args.partitions))
             .config("spark.sql.execution.arrow.pyspark.enabled", "true")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cores = spark.sparkContext.defaultParallelism

    Xt, yt = design(args.train_rows, args.features, 0)
    X, y = design(args.rows, args.features, 1)
    train = spark_frame(spark, Xt, yt, 1)
    model = SparkXGBRegressor(features_col="features", label_col="label",
                              n_estimators=args.rounds, max_depth=args.depth,
                              num_workers=1).fit(train)
    booster = model.get_booster()
    sdf = spark_frame(spark, X, y, args.partitions)

    def on_spark():
        return treeimp.explain(model, sdf, id_col="id", methods=METHODS, random_state=0)

    def in_memory():
        return treeimp.explain(booster, X, y, methods=METHODS, random_state=0,
                               n_jobs=cores)

    contrib = model.copy({model.getParam("pred_contrib_col"): "contrib"})

    def xgb_shap():
        # the contributions (a vector per row) summed per feature: every row computed
        values = contrib.transform(sdf).select(vector_to_array("contrib").alias("c"))
        out = values.select(F.posexplode("c").alias("j", "v"))
        return out.groupBy("j").agg(F.sum(F.abs("v"))).collect()

    runs = []
    for what, fn in (("treeimp.explain on Spark", on_spark),
                     ("treeimp.explain in memory", in_memory),
                     ("xgboost.spark pred_contrib_col (per-row SHAP)", xgb_shap)):
        seconds, out = best_of(fn, args.repeats)
        runs.append({"what": what, "seconds": seconds, "rows/s": args.rows / seconds})
        if what == "treeimp.explain on Spark":
            spark_res = out
        if what == "treeimp.explain in memory":
            np.testing.assert_allclose(spark_res.table.to_numpy(), out.table.to_numpy(),
                                       rtol=1e-8)
    load = os.getloadavg()
    result = {"rows": args.rows, "features": args.features, "rounds": args.rounds,
              "depth": args.depth, "master": args.master, "cores": cores,
              "partitions": args.partitions, "load average (1, 5, 15 min)": load,
              "versions": {"treeimp": treeimp.__version__, "pyspark": pyspark.__version__,
                           "xgboost": xgboost.__version__,
                           "python": sys.version.split()[0]},
              "runs": runs}
    base = runs[0]["seconds"]
    print(f"{args.rows} rows x {args.features} features, XGBoost {args.rounds} rounds depth "
          f"{args.depth}, {args.master} ({args.partitions} partitions), load "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for r in runs:
        print(f"  {r['what']:<48} {r['seconds']:8.2f} s {r['rows/s']:12,.0f} rows/s "
              f"(time / Spark explain: {r['seconds'] / base:.2f})")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
    spark.stop()


if __name__ == "__main__":
    main()

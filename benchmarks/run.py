"""treeimp against its peers, on the same data, in one process, as ratios.

For each model (XGBoost, LightGBM, scikit-learn RandomForest) the library's own
raw-margin prediction is the unit; every other time is reported as a multiple of it:

- ``explain``: treeimp.explain with mdi_oob + ufi (held-out rows for boosting,
  oob=True on the training rows for the forest, whose unit is predict_proba on them);
- ``predict_raw``: TreeEnsemble.predict_raw on the same rows;
- ``lib_treeshap``: the library's own TreeSHAP (pred_contribs / pred_contrib) on a
  subset, extrapolated linearly to all rows (labelled);
- ``shap``: shap.TreeExplainer global importance on a subset, extrapolated (if shap is
  installed);
- permutation importance, scikit-learn's vs treeimp's, on a subset of rows (both on
  the same subset, same n_repeats and seed).

Also measured: numba compile time on first use (fresh process, empty cache), start-up
overhead of the first explain call in a fresh process with a warm cache, and the peak
memory of explain (fresh process). Output: a Markdown table on stdout and a JSON file.

Usage: python benchmarks/run.py [--rows 100000] [--features 50] [--threads 2]
       [--repeats 3] [--small] [--out benchmarks/results]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000, help="training and held-out rows")
    p.add_argument("--forest-rows", type=int, default=50_000, help="forest training rows")
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--rounds", type=int, default=500, help="boosting rounds")
    p.add_argument("--forest-trees", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3, help="timed repetitions (median)")
    p.add_argument("--shap-rows", type=int, default=1000, help="rows for SHAP timings")
    p.add_argument("--perm-rows", type=int, default=5000, help="rows for permutation imp.")
    p.add_argument("--perm-repeats", type=int, default=5)
    p.add_argument("--models", default="xgboost,lightgbm,forest")
    p.add_argument("--small", action="store_true", help="tiny sizes (CI smoke run)")
    p.add_argument("--no-subprocess", action="store_true",
                   help="skip the fresh-process compile/start-up/memory measurements")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    if args.small:
        args.rows, args.forest_rows, args.features, args.rounds = 2000, 2000, 10, 20
        args.forest_trees, args.repeats, args.shap_rows, args.perm_rows = 10, 1, 200, 300
        args.perm_repeats = 2
    return args


def make_data(n, F, kind, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(np.float32)
    f = X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] - 0.5 * X[:, 4] ** 2
    if kind == "binary":
        return X, (f + rng.logistic(size=n) > 0).astype(np.int32)
    return X, (f + rng.normal(scale=0.5, size=n)).astype(np.float32)


def timed(fn, repeats):
    """Median wall time of ``repeats`` calls (after one untimed warm-up call)."""
    fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def fit_model(name, args, kind):
    n = args.forest_rows if name == "forest" else args.rows
    X, y = make_data(2 * n, args.features, kind, seed=1)
    Xt, yt, Xv, yv = X[:n], y[:n], X[n:], y[n:]
    t = args.threads
    if name == "xgboost":
        import xgboost as xgb

        cls = xgb.XGBClassifier if kind == "binary" else xgb.XGBRegressor
        model = cls(n_estimators=args.rounds, max_depth=6, learning_rate=0.1, n_jobs=t,
                    tree_method="hist").fit(Xt, yt)
    elif name == "lightgbm":
        import lightgbm as lgb

        cls = lgb.LGBMClassifier if kind == "binary" else lgb.LGBMRegressor
        model = cls(n_estimators=args.rounds, num_leaves=63, learning_rate=0.1, n_jobs=t,
                    verbose=-1).fit(Xt, yt)
    else:
        from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

        cls = RandomForestClassifier if kind == "binary" else RandomForestRegressor
        model = cls(n_estimators=args.forest_trees, min_samples_leaf=5, n_jobs=t,
                    random_state=0).fit(Xt, yt)
    return model, Xt, yt, Xv, yv


def library_predict(name, model, X):
    if name == "xgboost":
        booster = model.get_booster()
        # inplace_predict takes the array itself: no DMatrix, no prediction cache
        return lambda: booster.inplace_predict(X.copy(), predict_type="margin")
    if name == "lightgbm":
        return lambda: model.booster_.predict(X, raw_score=True)
    if hasattr(model, "predict_proba"):
        return lambda: model.predict_proba(X)
    return lambda: model.predict(X)


def library_treeshap(name, model, X):
    if name == "xgboost":
        import xgboost as xgb

        booster = model.get_booster()
        return lambda: booster.predict(xgb.DMatrix(X), pred_contribs=True)
    if name == "lightgbm":
        return lambda: model.booster_.predict(X, pred_contrib=True)
    return None


def bench_model(name, kind, args, rows_out):
    from sklearn.inspection import permutation_importance as sk_perm

    import treeimp

    model, Xt, yt, Xv, yv = fit_model(name, args, kind)
    forest = name == "forest"
    X_eval, y_eval = (Xt, yt) if forest else (Xv, yv)
    n_eval = len(X_eval)
    ens = treeimp.parse(model)
    unit = timed(library_predict(name, model, X_eval), args.repeats)
    res = {"model": name, "task": kind, "rows": n_eval, "trees": ens.n_trees,
           "nodes": ens.n_nodes, "library_predict_s": unit}

    def explain():
        return treeimp.explain(model, X_eval, y_eval, oob=forest,
                               methods=("mdi_oob", "ufi"), n_jobs=args.threads,
                               random_state=0)

    res["explain_s"] = timed(explain, args.repeats)
    res["predict_raw_s"] = timed(lambda: ens.predict_raw(X_eval, n_jobs=args.threads),
                                 args.repeats)
    sub = X_eval[: args.shap_rows]
    shap_fn = library_treeshap(name, model, sub)
    if shap_fn is not None:
        res["lib_treeshap_s_extrapolated"] = timed(shap_fn, 1) * n_eval / len(sub)
    try:
        import shap

        explainer = shap.TreeExplainer(model)
        res["shap_s_extrapolated"] = timed(
            lambda: np.abs(explainer.shap_values(sub, check_additivity=False)).mean(0), 1
        ) * n_eval / len(sub)
    except ImportError:
        res["shap_s_extrapolated"] = None
    except Exception as exc:  # shap breaks on some model versions: report, don't fail
        res["shap_s_extrapolated"] = None
        res["shap_error"] = f"{type(exc).__name__}: {exc}"[:200]
    # permutation importance on a subset (scikit-learn's is far too slow on all rows)
    Xp, yp = Xv[: args.perm_rows], yv[: args.perm_rows]
    scoring = "neg_log_loss" if kind == "binary" else "neg_mean_squared_error"
    t0 = time.perf_counter()
    ref = sk_perm(model, Xp, yp, scoring=scoring, n_repeats=args.perm_repeats,
                  random_state=0, n_jobs=1)
    res["sklearn_permutation_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = treeimp.permutation_importance(model, Xp, yp, scoring=scoring,
                                          n_repeats=args.perm_repeats, random_state=0,
                                          n_jobs=args.threads)
    res["treeimp_permutation_s"] = time.perf_counter() - t0
    res["permutation_max_abs_diff"] = float(np.max(np.abs(ours.importances
                                                          - ref.importances)))
    res["permutation_rows"] = len(Xp)
    rows_out.append(res)
    return res


FRESH = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np, treeimp
t_import = time.perf_counter() - t0
from sklearn.ensemble import RandomForestClassifier
rng = np.random.default_rng(0)
X = rng.normal(size=(200, 5)); y = (X[:, 0] > 0).astype(int)
rf = RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)
t0 = time.perf_counter(); treeimp.explain(rf, X, y, oob=True, random_state=0)
t_first = time.perf_counter() - t0
t0 = time.perf_counter(); treeimp.explain(rf, X, y, oob=True, random_state=0)
t_second = time.perf_counter() - t0
print(json.dumps({"import_s": t_import, "first_s": t_first, "second_s": t_second}))
"""

MEMORY = r"""
import json, resource, sys
import numpy as np, treeimp
from sklearn.ensemble import RandomForestRegressor
n, F = int(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
Xs = rng.normal(size=(2000, F)).astype(np.float32); ys = Xs[:, 0] + rng.normal(size=2000)
rf = RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0).fit(Xs, ys)
treeimp.explain(rf, Xs[:100], ys[:100])  # compile / load kernels before measuring
# filled in slices: a float64 temporary of the whole input would set the peak before
# explain runs and hide what explain adds
X = np.empty((n, F), np.float32)
for i in range(0, n, 100_000):
    X[i:i + 100_000] = rng.standard_normal(size=(min(100_000, n - i), F), dtype=np.float32)
y = X[:, 0].astype(np.float64)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
treeimp.explain(rf, X, y, methods=("mdi_oob", "ufi"))
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"input_mb": X.nbytes / 2**20, "rss_before_mb": before / 1024,
                  "peak_growth_mb": (after - before) / 1024}))
"""


def fresh_process(code, *extra, env=None):
    out = subprocess.run([sys.executable, "-c", code, *map(str, extra)], check=True,
                         capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def startup_times():
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        cold = fresh_process(FRESH, env=env)  # empty cache: compiles
        warm = fresh_process(FRESH, env=env)  # cache written by the run above
    return {"cold_first_call_s": cold["first_s"], "warm_first_call_s": warm["first_s"],
            "warm_second_call_s": warm["second_s"], "import_s": warm["import_s"],
            "warm_overhead_s": warm["first_s"] - warm["second_s"]}


def ratio(a, b):
    return None if a is None or not b else a / b


def markdown(results, startup, memory, args):
    lines = [f"# treeimp benchmark ({platform.processor() or platform.machine()}, "
             f"{args.threads} threads)", "",
             "Times are medians; every ratio is a multiple of the library's own raw "
             "predict on the same rows (forest: predict_proba on the training rows).", "",
             "| model | task | rows | trees | predict (s) | explain | predict_raw | "
             "lib TreeSHAP* | shap* | perm. sklearn / treeimp (rows) | perm. max diff |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        u = r["library_predict_s"]

        def fmt(key, r=r, u=u):
            v = ratio(r.get(key), u)
            return "n/a" if v is None else f"{v:.2f}x"
        perm = r["sklearn_permutation_s"] / r["treeimp_permutation_s"]
        lines.append(
            f"| {r['model']} | {r['task']} | {r['rows']} | {r['trees']} | {u:.3f} | "
            f"{fmt('explain_s')} | {fmt('predict_raw_s')} | "
            f"{fmt('lib_treeshap_s_extrapolated')} | {fmt('shap_s_extrapolated')} | "
            f"{perm:.1f}x faster ({r['permutation_rows']}) | "
            f"{r['permutation_max_abs_diff']:.1e} |")
    lines += ["", "*TreeSHAP timings run on a subset and are extrapolated linearly to all "
              "rows."]
    if startup:
        lines += ["", f"Start-up: first explain in a fresh process with an empty numba "
                  f"cache {startup['cold_first_call_s']:.2f} s (compilation); with a warm "
                  f"cache {startup['warm_first_call_s']:.2f} s, of which "
                  f"{startup['warm_overhead_s']:.2f} s is cache loading; import "
                  f"{startup['import_s']:.2f} s."]
    if memory:
        lines += ["", "Memory: explain on {rows} rows x {F} float32 features "
                  "(input {input_mb:.0f} MB) grew peak RSS by {peak_growth_mb:.0f} MB."
                  .format(**memory)]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    results = []
    for name in args.models.split(","):
        for kind in ("binary", "regression"):
            r = bench_model(name, kind, args, results)
            print(f"{name:9s} {kind:10s} predict {r['library_predict_s']:.3f}s  explain "
                  f"{r['explain_s'] / r['library_predict_s']:.2f}x  predict_raw "
                  f"{r['predict_raw_s'] / r['library_predict_s']:.2f}x", file=sys.stderr)
    startup = memory = None
    if not args.no_subprocess:
        startup = startup_times()
        mem_rows = 20_000 if args.small else 2_000_000
        memory = fresh_process(MEMORY, mem_rows, args.features)
        memory.update(rows=mem_rows, F=args.features)
    table = markdown(results, startup, memory, args)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps(
        {"args": vars(args), "results": results, "startup": startup, "memory": memory},
        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

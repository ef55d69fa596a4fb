"""treeimp against its peers, on the same data, in one process, as ratios.

For each model (XGBoost, LightGBM, scikit-learn RandomForest) the library's own
raw-margin prediction is the unit; every other time is reported as a multiple of it:

- ``explain``: treeimp.explain with mdi_oob + ufi (held-out rows for boosting,
  oob=True on the training rows for the forest, whose unit is predict_proba on them),
  given the model (it is parsed in every call) and given the model parsed once
  (a ``treeimp.Explainer`` made outside the timing, which keeps its statistics buffer
  between calls; shap's TreeExplainer, below, also converts the model once, outside
  its timing); ``parse``: treeimp.parse alone;
- ``predict_raw``: TreeEnsemble.predict_raw on the same rows;
- ``lib_treeshap``: the library's own TreeSHAP (pred_contribs / pred_contrib) on a
  subset, extrapolated linearly to all rows (labelled);
- ``shap``: shap.TreeExplainer global importance on a subset, extrapolated (if shap is
  installed: pip install ".[bench]");
- ``treeimp TreeSHAP``: treeimp.contributions (the same exact TreeSHAP values) of the
  parsed model on the same subset and threads, extrapolated;
- permutation importance, scikit-learn's and treeimp's, on a subset of held-out rows
  (same subset, n_repeats, seed and scoring), each as a multiple of the library's
  predict on that subset, and the speed-up;
- small data (XGBoost): one explain of the model on --small-data-rows held-out rows,
  parse included, as a multiple of predict on them, and treeimp.parse against
  xgboost's Booster.load_model of the same model saved as UBJSON.

Every timing is the median of --repeats calls after an untimed warm-up call, so numba's
compilation is not in them; the library's predict, both explains, parse and predict_raw are
timed in the same rounds (one call of each per round). Measured separately, each in a
new process (bounded by --subprocess-timeout): for a forest explain, an XGBoost explain
(held-out, the staged kernel), the TreeSHAP contributions of both models and an XGBoost
permutation_importance, ``import treeimp`` and the first call with an empty numba cache
(compilation; --compile-for) and the first and second call with a warm cache (start-up
overhead); and the growth of peak memory when explaining
--memory-rows rows of float32 features with a forest and with an XGBoost binary model.
Output: a Markdown table on stdout and in OUT/results.md, all numbers in
OUT/results.json.

Usage: python benchmarks/run.py [--rows 100000] [--features 50] [--threads 2]
       [--repeats 5] [--small] [--no-subprocess] [--startup-only] [--memory-rows 2000000]
       [--compile-for forest_explain,xgboost_explain,...] [--out DIR]
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
    p.add_argument("--repeats", type=int, default=5, help="timed repetitions (median)")
    p.add_argument("--shap-rows", type=int, default=1000, help="rows for SHAP timings")
    p.add_argument("--forest-shap-rows", type=int, default=20,
                   help="rows for shap.TreeExplainer on the forest (exact TreeSHAP on "
                        "deep trees costs seconds per row)")
    p.add_argument("--perm-rows", type=int, default=5000, help="rows for permutation imp.")
    p.add_argument("--perm-repeats", type=int, default=5)
    p.add_argument("--models", default="xgboost,lightgbm,forest")
    p.add_argument("--small-data-rows", type=int, default=3000,
                   help="held-out rows of the small-data XGBoost row")
    p.add_argument("--small-data-trees", type=int, default=300,
                   help="boosting rounds of the small-data XGBoost row")
    p.add_argument("--small-data-only", action="store_true",
                   help="only the small-data XGBoost rows (no main table, no fresh process)")
    p.add_argument("--startup-only", action="store_true",
                   help="only the fresh-process start-up table (import, first call with an "
                        "empty and with a warm numba cache)")
    p.add_argument("--small", action="store_true", help="tiny sizes (CI smoke run)")
    p.add_argument("--no-subprocess", action="store_true",
                   help="skip the fresh-process compile/start-up/memory measurements")
    p.add_argument("--memory-rows", type=int, default=None,
                   help="rows for the fresh-process memory measurement (default 2,000,000; "
                        "--small: 20,000)")
    p.add_argument("--compile-for", default=",".join(WORKLOADS),
                   help="start-up workloads whose compilation from an empty numba cache is "
                        "measured (comma-separated, or 'none'); compiling every kernel takes "
                        "over a minute, so the CI smoke run measures forest_explain only")
    p.add_argument("--subprocess-timeout", type=float, default=1800,
                   help="seconds before a fresh-process measurement is abandoned")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    if args.small:
        args.rows, args.forest_rows, args.features, args.rounds = 2000, 2000, 10, 20
        args.forest_trees, args.repeats, args.shap_rows, args.perm_rows = 10, 1, 200, 300
        args.forest_shap_rows = 50
        args.perm_repeats = 2
        args.small_data_rows, args.small_data_trees = 500, 20
    if args.memory_rows is None:
        args.memory_rows = 20_000 if args.small else 2_000_000
    unknown = set(args.compile_for.split(",")) - set(WORKLOADS) - {"none"}
    if unknown:
        p.error(f"--compile-for: unknown workload(s) {sorted(unknown)}; "
                f"choose from {list(WORKLOADS)} or none")
    return args


def make_data(n, F, kind, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(np.float32)
    f = X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] - 0.5 * X[:, 4] ** 2
    if kind == "binary":
        return X, (f + rng.logistic(size=n) > 0).astype(np.int32)
    return X, (f + rng.normal(scale=0.5, size=n)).astype(np.float32)


def timed(fn, repeats, warmup=None):
    """Median wall time of ``repeats`` calls of ``fn``, after one untimed ``warmup()``
    call (default: ``fn`` itself) that compiles or loads whatever the first call needs."""
    (warmup or fn)()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def timed_together(fns, repeats, lead_in=False):
    """Median wall time of each of ``fns`` (name -> function) over ``repeats`` rounds,
    each round calling every function once in turn, after one untimed call of each.
    Interleaving keeps a ratio of two of them honest on a shared machine, where a slow
    spell would otherwise fall on one side only. ``lead_in``: every timed call follows
    an untimed call of the same function, so that it does not run while the thread
    pools of the other function's call (numba's and the library's OpenMP workers spin
    for a while after a parallel loop) still compete for the cores: calls of a few
    milliseconds measure each other otherwise."""
    for fn in fns.values():
        fn()
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            if lead_in:
                fn()
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    return {k: float(np.median(v)) for k, v in times.items()}


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

    def explain(what):
        return lambda: treeimp.explain(what, X_eval, y_eval, oob=forest,
                                       methods=("mdi_oob", "ufi"), n_jobs=args.threads,
                                       random_state=0)

    # the library's predict (the unit of the ratios) timed in the same rounds; explain
    # of the model (parsing it first, every call) and of the model parsed once: a
    # treeimp.Explainer made outside the timing (as shap.TreeExplainer below converts the
    # model once), which also keeps its statistics buffer between calls
    ex = treeimp.Explainer(model, n_jobs=args.threads)
    fns = {"predict": library_predict(name, model, X_eval), "explain": explain(model),
           "parse": lambda: treeimp.parse(model),  # inside explain(model)
           "predict_raw": lambda: ens.predict_raw(X_eval, n_jobs=args.threads),
           "explain_parsed": lambda: ex.explain(X_eval, y_eval, oob=forest,
                                                methods=("mdi_oob", "ufi"), random_state=0)}
    t = timed_together(fns, args.repeats)
    res = {"model": name, "task": kind, "rows": n_eval, "trees": ens.n_trees,
           "nodes": ens.n_nodes, "library_predict_s": t["predict"],
           "explain_s": t["explain"], "explain_parsed_s": t.get("explain_parsed"),
           "parse_s": t["parse"], "predict_raw_s": t["predict_raw"]}
    sub = X_eval[: args.forest_shap_rows if forest else args.shap_rows]
    res["shap_rows"] = len(sub)
    shap_fn = library_treeshap(name, model, sub)
    res["treeimp_treeshap_s_extrapolated"] = timed(
        lambda: treeimp.contributions(ens, sub, n_jobs=args.threads), 1) * n_eval / len(sub)
    if shap_fn is not None:
        res["lib_treeshap_s_extrapolated"] = timed(shap_fn, 1) * n_eval / len(sub)
    else:
        res["lib_treeshap_s_extrapolated"] = None
        res["lib_treeshap_note"] = "none in the library"
    try:
        import shap

        explainer = shap.TreeExplainer(model)
        res["shap_s_extrapolated"] = timed(
            lambda: np.abs(explainer.shap_values(sub, check_additivity=False)).mean(0), 1
        ) * n_eval / len(sub)
    except ImportError:  # optional: pip install ".[bench]"
        res["shap_s_extrapolated"] = None
        res["shap_note"] = "not installed"
    except Exception as exc:  # shap breaks on some model versions: report, don't fail
        res["shap_s_extrapolated"] = None
        res["shap_note"] = "error"
        res["shap_error"] = f"{type(exc).__name__}: {exc}"[:200]
    # permutation importance on a subset (scikit-learn's is far too slow on all rows),
    # both warmed up first (treeimp's first call compiles or loads its kernels), medians
    # over --repeats, and the library's predict timed on the same subset as their unit
    Xp, yp = Xv[: args.perm_rows], yv[: args.perm_rows]
    scoring = "neg_log_loss" if kind == "binary" else "neg_mean_squared_error"
    perm_kw = dict(scoring=scoring, n_repeats=args.perm_repeats, random_state=0)
    out = {}

    def sklearn_perm(n=None):
        out["sklearn"] = sk_perm(model, Xp[:n], yp[:n], n_jobs=1, **perm_kw)

    def treeimp_perm():
        out["treeimp"] = treeimp.permutation_importance(model, Xp, yp, n_jobs=args.threads,
                                                        **perm_kw)

    # the two and the library's predict timed in the same rounds (interleaved, as
    # explain and predict above: a slow spell on the shared machine hits all three)
    t = timed_together({"sklearn": sklearn_perm, "treeimp": treeimp_perm,
                        "predict": library_predict(name, model, Xp)}, args.repeats)
    res["sklearn_permutation_s"] = t["sklearn"]
    res["treeimp_permutation_s"] = t["treeimp"]
    res["permutation_predict_s"] = t["predict"]
    res["permutation_max_abs_diff"] = float(np.max(np.abs(
        out["treeimp"].importances - out["sklearn"].importances)))
    res["permutation_rows"] = len(Xp)
    rows_out.append(res)
    return res


def bench_small_data(kind, args):
    """XGBoost on few held-out rows (--small-data-rows, --small-data-trees rounds, depth
    6), where parsing weighs most: one ``treeimp.explain(model, ...)`` call, parse
    included, as a multiple of the library's predict on those rows; and
    ``treeimp.parse`` against XGBoost's own ``Booster.load_model`` of the same model
    saved as UBJSON (``save_raw("ubj")``), timed in rounds of their own."""
    import xgboost as xgb

    import treeimp

    n = args.rows
    X, y = make_data(n + args.small_data_rows, args.features, kind, seed=2)
    cls = xgb.XGBClassifier if kind == "binary" else xgb.XGBRegressor
    model = cls(n_estimators=args.small_data_trees, max_depth=6, learning_rate=0.1,
                n_jobs=args.threads, tree_method="hist").fit(X[:n], y[:n])
    Xv, yv = X[n:], y[n:]
    raw = model.get_booster().save_raw("ubj")
    path = Path(tempfile.mkdtemp()) / "small_data.ubj"
    path.write_bytes(bytes(raw))

    def load_model():
        xgb.Booster().load_model(raw)

    repeats = max(args.repeats, 5)
    t = timed_together({
        "predict": library_predict("xgboost", model, Xv),
        "explain": lambda: treeimp.explain(model, Xv, yv, methods=("mdi_oob", "ufi"),
                                           n_jobs=args.threads, random_state=0),
    }, repeats, lead_in=True)
    # parse and load_model in rounds of their own, each timed call after an untimed one
    # of its own (right after a parallel explain or predict, the thread pools' spinning
    # workers slow whatever runs next)
    t.update(timed_together({"parse": lambda: treeimp.parse(model),
                             "parse_file": lambda: treeimp.parse(path),
                             "load_model": load_model}, repeats, lead_in=True))
    return {"model": "xgboost", "task": kind, "rows": len(Xv),
            "trees": treeimp.parse(model).n_trees, "library_predict_s": t["predict"],
            "explain_s": t["explain"], "parse_s": t["parse"],
            "parse_file_s": t["parse_file"], "load_model_s": t["load_model"]}


# Fresh-process measurements. Each child prints one JSON line; the parent bounds it with
# --subprocess-timeout and records an error instead of failing the whole run. The data
# have the dtypes of the in-process runs (float32 X, int32 binary y), so numba compiles
# (or loads from its cache) the same specialisations.
STARTUP = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np, treeimp
t_import = time.perf_counter() - t0
workload, threads = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)
X = rng.normal(size=(2000, 10)).astype(np.float32)
y = (X[:, 0] + rng.logistic(size=2000) > 0).astype(np.int32)
Xt, yt, Xv, yv = X[:1000], y[:1000], X[1000:], y[1000:]
if workload.startswith("forest"):
    from sklearn.ensemble import RandomForestClassifier
    model = RandomForestClassifier(n_estimators=10, min_samples_leaf=5, random_state=0,
                                   n_jobs=threads).fit(Xt, yt)
    if workload == "forest_explain":
        def call():
            treeimp.explain(model, Xt, yt, oob=True, methods=("mdi_oob", "ufi"),
                            n_jobs=threads, random_state=0)
    else:  # TreeSHAP values of held-out rows
        def call():
            treeimp.contributions(model, Xv, n_jobs=threads)
else:
    import xgboost as xgb
    model = xgb.XGBClassifier(n_estimators=20, max_depth=6, n_jobs=threads,
                              tree_method="hist").fit(Xt, yt)
    if workload == "xgboost_explain":  # held-out rows: the staged boosting kernel
        def call():
            treeimp.explain(model, Xv, yv, methods=("mdi_oob", "ufi"), n_jobs=threads,
                            random_state=0)
    elif workload == "xgboost_contributions":
        def call():
            treeimp.contributions(model, Xv, n_jobs=threads)
    else:
        def call():
            treeimp.permutation_importance(model, Xv, yv, scoring="neg_log_loss",
                                           n_repeats=2, random_state=0, n_jobs=threads)
c0, t0 = time.process_time(), time.perf_counter(); call()
first, first_cpu = time.perf_counter() - t0, time.process_time() - c0
t0 = time.perf_counter(); call(); second = time.perf_counter() - t0
print(json.dumps({"import_s": t_import, "first_s": first, "first_cpu_s": first_cpu,
                  "second_s": second}))
"""

MEMORY = r"""
import json, resource, sys, tracemalloc
import numpy as np, treeimp
model_name, n, F, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
m = 2000 if model_name == "forest" else 20_000
Xs = rng.normal(size=(m, F)).astype(np.float32)
if model_name == "forest":
    from sklearn.ensemble import RandomForestRegressor
    ys = (Xs[:, 0] + rng.normal(size=m)).astype(np.float32)
    model = RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0,
                                  n_jobs=threads).fit(Xs, ys)
else:
    import xgboost as xgb
    ys = (Xs[:, 0] + rng.logistic(size=m) > 0).astype(np.int32)
    model = xgb.XGBClassifier(n_estimators=50, max_depth=6, n_jobs=threads,
                              tree_method="hist").fit(Xs, ys)
def explain(X, y):
    treeimp.explain(model, X, y, methods=("mdi_oob", "ufi"), n_jobs=threads, random_state=0)
explain(Xs[:100], ys[:100])  # compile / load kernels before measuring
# filled in slices: a float64 temporary of the whole input would set the peak before
# explain runs and hide what explain adds
X = np.empty((n, F), np.float32)
for i in range(0, n, 100_000):
    X[i:i + 100_000] = rng.standard_normal(size=(min(100_000, n - i), F), dtype=np.float32)
y = X[:, 0].astype(np.float32) if model_name == "forest" else (X[:, 0] > 0).astype(np.int32)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
explain(X, y)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
# the peak RSS can hide what explain adds (a temporary freed before it ran may have set
# it): tracemalloc's peak counts every numpy allocation made during the call
tracemalloc.start()
explain(X, y)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"input_mb": X.nbytes / 2**20, "rss_before_mb": before / 1024,
                  "peak_growth_mb": (after - before) / 1024,
                  "traced_peak_mb": traced / 2**20}))
"""

WORKLOADS = {  # fresh-process start-up workload -> the in-process model that warms it
    "forest_explain": "forest",
    "xgboost_explain": "xgboost",
    "forest_contributions": "forest",
    "xgboost_contributions": "xgboost",
    "permutation": "xgboost",
}
MEMORY_MODELS = {
    "forest": "RandomForestRegressor, 20 trees, depth 8",
    "xgboost": "XGBClassifier, 50 rounds, depth 6",
}


def library_versions():
    """Python's and the libraries' versions, as one sentence."""
    from importlib.metadata import PackageNotFoundError, version

    parts = [f"Python {platform.python_version()}"]
    for name in ("numba", "numpy", "xgboost", "scikit-learn"):
        try:
            parts.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return "Versions: " + ", ".join(parts) + "."


def fresh_process(code, *extra, env=None, timeout=None):
    """Run ``code`` in a new interpreter; its last stdout line parsed as JSON, or
    ``{"error": ...}`` when it fails or exceeds ``timeout`` seconds."""
    try:
        out = subprocess.run([sys.executable, "-c", code, *map(str, extra)], check=True,
                             capture_output=True, text=True, env=env, timeout=timeout)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"error": f"exit {exc.returncode}: {tail[0][:200]}"}


def startup_times(args, warmed_models):
    """Per workload: compilation with an empty numba cache (``--compile-for``), then the
    first and second call in a fresh process with a warm cache."""
    compile_for = set() if args.compile_for == "none" else set(args.compile_for.split(","))
    out = {}
    for workload, model in WORKLOADS.items():
        rec = {}
        call = (STARTUP, workload, args.threads)
        if workload in compile_for:
            with tempfile.TemporaryDirectory() as cache:
                env = dict(os.environ, NUMBA_CACHE_DIR=cache)
                cold = fresh_process(*call, env=env, timeout=args.subprocess_timeout)
                # the cache written by the run above
                warm = fresh_process(*call, env=env, timeout=args.subprocess_timeout)
            if "error" in cold:
                rec["error"] = cold["error"]
            else:
                rec["cold_first_call_s"] = cold["first_s"]
                # compilation runs on one thread: its CPU time hardly depends on the load
                # of a shared machine, which stretches the wall time
                rec["cold_first_call_cpu_s"] = cold["first_cpu_s"]
                rec["compile_s"] = cold["first_s"] - cold["second_s"]
                rec["cold_import_s"] = cold["import_s"]
        else:
            rec["cold_first_call_s"] = rec["compile_s"] = rec["cold_first_call_cpu_s"] = None
            rec["compile_note"] = "not measured (--compile-for)"
            # the default cache, filled by the in-process runs of this model or else by
            # one unmeasured run
            if model not in warmed_models:
                fresh_process(*call, timeout=args.subprocess_timeout)
            warm = fresh_process(*call, timeout=args.subprocess_timeout)
        if "error" in warm:
            rec["error"] = warm["error"]
        else:
            rec.update(warm_first_call_s=warm["first_s"], warm_second_call_s=warm["second_s"],
                       warm_overhead_s=warm["first_s"] - warm["second_s"],
                       import_s=warm["import_s"])
        out[workload] = rec
    return out


def memory_growth(args):
    """Peak-RSS growth of explain on --memory-rows x --features float32, per model."""
    out = {}
    for model in MEMORY_MODELS:
        rec = fresh_process(MEMORY, model, args.memory_rows, args.features, args.threads,
                            timeout=args.subprocess_timeout)
        rec.update(rows=args.memory_rows, features=args.features,
                   model_desc=MEMORY_MODELS[model])
        out[model] = rec
    return out


def ratio(a, b):
    return None if a is None or not b else a / b


def _cell(value, fmt, note=None):
    return (note or "n/a") if value is None else format(value, fmt)


MAIN_COLUMNS = ("model", "task", "rows", "trees", "predict (s)", "explain",
                "explain, Explainer", "parse", "predict_raw",
                "treeimp TreeSHAP*", "lib TreeSHAP*", "shap*", "perm. rows", "perm. predict (s)",
                "perm. sklearn", "perm. treeimp", "perm. speed-up", "perm. max diff")
STARTUP_COLUMNS = ("fresh process", "empty cache: import (s)", "empty cache: first call (s)",
                   "first call, CPU (s)", "compile (s)", "warm cache: import (s)",
                   "warm cache: first call (s)", "second call (s)", "warm overhead (s)")
SMALL_DATA_COLUMNS = ("small data", "task", "held-out rows", "trees", "predict (s)",
                      "explain (parse included)", "parse (ms)", "load_model (ms)",
                      "parse / load_model", "parse of the file (ms)",
                      "parse of the file / load_model")
MEMORY_COLUMNS = ("explain, fresh process", "model", "rows x features", "input (MB)",
                  "peak RSS growth (MB)", "allocated during explain (MB)",
                  "allocated / input")


def _error_row(columns, *lead, error):
    """A table row of ``lead`` cells, then "error: ..." in every remaining column."""
    return (*lead, *[f"error: {error}"] * (len(columns) - len(lead)))


def _table(columns, rows):
    return (["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
            + ["| " + " | ".join(map(str, r)) + " |" for r in rows])


def markdown(results, startup, memory, args, small_data=()):
    lines = [f"# treeimp benchmark ({platform.processor() or platform.machine()}, "
             f"{args.threads} threads)", "",
             "Times are medians of --repeats runs after a warm-up. Ratios are multiples "
             "of the library's own raw predict on the same rows (forest: predict_proba; "
             "explain and predict_raw on the evaluation rows, permutation importance on "
             "its subset of held-out rows).", ""]
    rows = []
    for r in results:
        u, pu = r["library_predict_s"], r["permutation_predict_s"]

        def x(key, unit, note=None, r=r):
            v = ratio(r.get(key), unit)
            return (r.get(note) or "n/a") if v is None else f"{v:.2f}x"
        rows.append((r["model"], r["task"], r["rows"], r["trees"], f"{u:.3f}",
                     x("explain_s", u), x("explain_parsed_s", u, "explain_parsed_note"),
                     x("parse_s", u),
                     x("predict_raw_s", u),
                     x("treeimp_treeshap_s_extrapolated", u),
                     x("lib_treeshap_s_extrapolated", u, "lib_treeshap_note"),
                     x("shap_s_extrapolated", u, "shap_note"),
                     r["permutation_rows"], f"{pu:.4f}",
                     x("sklearn_permutation_s", pu), x("treeimp_permutation_s", pu),
                     f"{r['sklearn_permutation_s'] / r['treeimp_permutation_s']:.1f}x",
                     f"{r['permutation_max_abs_diff']:.1e}"))
    if results:  # none with --small-data-only
        lines += _table(MAIN_COLUMNS, rows)
        lines += ["", "*TreeSHAP timings run on --shap-rows rows (forest: "
                  "--forest-shap-rows) and are extrapolated linearly to all rows."]
    if small_data:
        rows = [(r["model"], r["task"], r["rows"], r["trees"],
                 f"{r['library_predict_s']:.4f}",
                 f"{r['explain_s'] / r['library_predict_s']:.2f}x",
                 f"{1e3 * r['parse_s']:.1f}", f"{1e3 * r['load_model_s']:.1f}",
                 f"{r['parse_s'] / r['load_model_s']:.2f}x",
                 f"{1e3 * r['parse_file_s']:.1f}",
                 f"{r['parse_file_s'] / r['load_model_s']:.2f}x") for r in small_data]
        lines += ["", "Small data (XGBoost, depth 6): one treeimp.explain(model, ...) call, "
                  "parse included, as a multiple of the library's predict on the same "
                  "held-out rows; treeimp.parse against xgboost's Booster.load_model of "
                  "the model saved as UBJSON (save_raw('ubj')), timed together in rounds of "
                  "their own: parse of the live model (which asks XGBoost for those bytes "
                  "with save_raw first) and of the saved file.", ""]
        lines += _table(SMALL_DATA_COLUMNS, rows)
    if startup:
        rows = []
        for name, s in startup.items():
            if "warm_first_call_s" not in s:
                rows.append(_error_row(STARTUP_COLUMNS, name, error=s.get("error")))
                continue
            note = "not measured" if s.get("compile_note") else s.get("error")
            rows.append((name, _cell(s.get("cold_import_s"), ".3f", note),
                         _cell(s.get("cold_first_call_s"), ".2f", note),
                         _cell(s.get("cold_first_call_cpu_s"), ".2f", note),
                         _cell(s.get("compile_s"), ".2f", note), f"{s['import_s']:.3f}",
                         f"{s['warm_first_call_s']:.2f}", f"{s['warm_second_call_s']:.2f}",
                         f"{s['warm_overhead_s']:.2f}"))
        lines += ["", "Start-up, each in a new process (workloads: forest explain oob=True, "
                  "XGBoost explain held-out, contributions (TreeSHAP) of held-out rows of "
                  "both models, XGBoost permutation_importance; 1,000 rows): import "
                  "treeimp (with numpy), the first call with an empty numba cache (wall and "
                  "CPU time; compile = first - second call there) and with the cache warm "
                  "(overhead = first - second call). " + library_versions(), ""]
        lines += _table(STARTUP_COLUMNS, rows)
    if memory:
        rows = []
        for name, m in memory.items():
            if "error" in m:
                rows.append(_error_row(MEMORY_COLUMNS, name, m["model_desc"],
                                       f"{m['rows']} x {m['features']}", error=m["error"]))
                continue
            rows.append((name, m["model_desc"], f"{m['rows']} x {m['features']}",
                         f"{m['input_mb']:.1f}", f"{m['peak_growth_mb']:.1f}",
                         f"{m['traced_peak_mb']:.1f}",
                         f"{m['traced_peak_mb'] / m['input_mb']:.2f}"))
        lines += ["", "Memory: growth of peak RSS during explain (mdi_oob + ufi, held-out "
                  "rows), the float32 input already allocated, and the peak of what "
                  "explain allocates (tracemalloc: numpy arrays; the kernels' own "
                  "buffers are per node, not per row).", ""]
        lines += _table(MEMORY_COLUMNS, rows)
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import numba

    numba.set_num_threads(min(args.threads, numba.config.NUMBA_NUM_THREADS))
    results = []
    for name in [] if args.small_data_only or args.startup_only else args.models.split(","):
        for kind in ("binary", "regression"):
            r = bench_model(name, kind, args, results)
            parsed = ratio(r["explain_parsed_s"], r["library_predict_s"])
            print(f"{name:9s} {kind:10s} predict {r['library_predict_s']:.3f}s  explain "
                  f"{r['explain_s'] / r['library_predict_s']:.2f}x  Explainer "
                  f"{'n/a' if parsed is None else f'{parsed:.2f}x'}  predict_raw "
                  f"{r['predict_raw_s'] / r['library_predict_s']:.2f}x", file=sys.stderr)
    small_data = []
    if ("xgboost" in args.models.split(",") or args.small_data_only) and not args.startup_only:
        for kind in ("binary", "regression"):
            r = bench_small_data(kind, args)
            small_data.append(r)
            print(f"small data {kind:10s} explain {r['explain_s'] / r['library_predict_s']:.2f}x"
                  f" predict  parse {1e3 * r['parse_s']:.1f} ms  load_model "
                  f"{1e3 * r['load_model_s']:.1f} ms", file=sys.stderr)
    startup = memory = None
    if args.startup_only:
        startup = startup_times(args, warmed_models=set())
    elif not (args.no_subprocess or args.small_data_only):
        startup = startup_times(args, warmed_models=set(args.models.split(",")))
        memory = memory_growth(args)
    table = markdown(results, startup, memory, args, small_data)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps(
        {"args": vars(args), "results": results, "small_data": small_data,
         "startup": startup, "memory": memory, "versions": library_versions()},
        indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Memory of explain beyond its input, for numpy arrays and for the DataFrames users pass.

For every input kind (below) and model, in a new process: the model is fitted on 20,000
rows, explain runs once on 100 rows of the same kind (numba's kernels compiled or loaded
before measuring), then the input of --rows x --features is built in slices (so that no
temporary of the whole input sets the peak), explain runs once (peak RSS growth:
ru_maxrss after minus before) and once more under tracemalloc (its peak: every numpy
and Python allocation made during the call). Both are reported as MB and as a share of
the input's own size: ``nbytes`` of a numpy array, ``memory_usage(deep=True)`` of a
pandas DataFrame, ``estimated_size()`` of a polars one.

Input kinds: ``numpy`` (float32 array), ``pandas_f32`` (float32 columns), ``pandas_f64``
(float64 columns), ``pandas_mixed`` (half float32, half int32 columns), ``pandas_cat``
(a quarter of the columns 'category' with 10 integer labels, the model fitted with
``enable_categorical``; the rest float32), ``polars_f32`` (float32 columns, read through
narwhals). Models: ``xgb_binary`` (XGBClassifier), ``xgb_regression`` (XGBRegressor),
both --rounds rounds of depth 6 (hist), and ``forest`` (RandomForestRegressor, 20 trees,
depth 8, held-out rows).

Usage: PYTHONPATH=. python benchmarks/memory_frames.py [--rows 1000000] [--features 32]
       [--threads 2] [--rounds 200] [--kinds numpy,pandas_f32,...]
       [--models xgb_binary,xgb_regression,forest] [--repeats 1]
Prints one Markdown row per run (and, with --json, the numbers as JSON lines).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

KINDS = ("numpy", "pandas_f32", "pandas_f64", "pandas_mixed", "pandas_cat", "polars_f32")
MODELS = ("xgb_binary", "xgb_regression", "forest")

CHILD = r"""
import json, resource, sys, tracemalloc
import numpy as np, treeimp
kind, model_name = sys.argv[1], sys.argv[2]
n, F, threads, rounds = (int(a) for a in sys.argv[3:7])
n_cat = F // 4 if kind == "pandas_cat" else 0
names = [f"f{j}" for j in range(F)]


def column(rng, j, rows):
    col = rng.standard_normal(size=rows, dtype=np.float32)
    if j < n_cat:  # the categorical columns hold 10 integer labels
        col = np.floor(np.abs(col) * 4) % 10
    return col


def table(cols):
    # one column made at a time: no temporary beside the input but one column
    rows = len(cols[0])
    if kind == "numpy":
        X = np.empty((rows, F), np.float32)
        for j in range(F):
            X[:, j] = cols[j]
            cols[j] = None
        return X
    if kind == "polars_f32":
        import polars as pl
        return pl.DataFrame({c: cols[j] for j, c in enumerate(names)})
    import pandas as pd
    out = {}
    for j, c in enumerate(names):
        col = cols[j]
        if kind == "pandas_f64":
            col = col.astype(np.float64)
        elif kind == "pandas_mixed" and j % 2:
            col = (col * 1000).astype(np.int32)
        elif j < n_cat:
            col = pd.Categorical.from_codes(col.astype(np.int8), categories=list(range(10)))
        out[c] = col
        cols[j] = None
    return pd.DataFrame(out, copy=False)


def target(last):
    if model_name == "xgb_binary":
        return (last + rng.logistic(size=len(last)) > 0).astype(np.int32)
    return last + rng.normal(size=len(last)).astype(np.float32)


def size(T):
    if kind == "numpy":
        return T.nbytes
    if kind == "polars_f32":
        return T.estimated_size()
    return int(T.memory_usage(deep=True, index=False).sum())


rng = np.random.default_rng(0)
m = 20_000
cols = [column(rng, j, m) for j in range(F)]
ys = target(cols[-1])
Ts = table(cols)
if model_name == "forest":
    from sklearn.ensemble import RandomForestRegressor
    model = RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0,
                                  n_jobs=threads).fit(Ts, ys)
else:
    import xgboost as xgb
    kw = dict(n_estimators=rounds, max_depth=6, n_jobs=threads, tree_method="hist",
              enable_categorical=bool(n_cat))
    cls = xgb.XGBClassifier if model_name == "xgb_binary" else xgb.XGBRegressor
    model = cls(**kw).fit(Ts, ys)


def explain(T, y):
    treeimp.explain(model, T, y, n_jobs=threads, random_state=0)


explain(table([column(rng, j, 100) for j in range(F)]), ys[:100])  # kernels loaded first
del Ts
cols = [column(rng, j, n) for j in range(F)]
y = target(cols[-1])
T = table(cols)
del cols
input_bytes = size(T)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
explain(T, y)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
explain(T, y)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
print(json.dumps({"kind": kind, "model": model_name, "input_mb": input_bytes / 2**20,
                  "rss_growth_mb": (after - before) / 1024, "traced_mb": traced / 2**20}))
"""


def run(kind, model, args):
    """One measurement in a new interpreter: its JSON line, or {"error": ...}."""
    cmd = [sys.executable, "-c", CHILD, kind, model, str(args.rows), str(args.features),
           str(args.threads), str(args.rounds)]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True,
                             timeout=args.timeout)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except subprocess.CalledProcessError as exc:
        tail = (exc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        return {"kind": kind, "model": model, "error": tail[0][:300]}
    except subprocess.TimeoutExpired:
        return {"kind": kind, "model": model, "error": f"timed out after {args.timeout} s"}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--features", type=int, default=32)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--kinds", default="numpy,pandas_f32")
    p.add_argument("--models", default="xgb_binary")
    p.add_argument("--repeats", type=int, default=1)
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    kinds, models = args.kinds.split(","), args.models.split(",")
    for name in (*kinds, *models):
        if name not in KINDS + MODELS:
            p.error(f"unknown input kind or model {name!r}; known: {KINDS + MODELS}")
    print("| input | model | input (MB) | traced peak (MB) | / input | peak RSS growth (MB) |")
    print("|---|---|---|---|---|---|")
    for _ in range(args.repeats):
        for model in models:
            for kind in kinds:
                rec = run(kind, model, args)
                if args.json:
                    print(json.dumps(rec), file=sys.stderr)
                if "error" in rec:
                    print(f"| {kind} | {model} | error: {rec['error']} | | | |")
                    continue
                share = rec["traced_mb"] / rec["input_mb"]
                print(f"| {kind} | {model} | {rec['input_mb']:.1f} | {rec['traced_mb']:.1f} "
                      f"| {share:.0%} | {rec['rss_growth_mb']:.1f} |", flush=True)


if __name__ == "__main__":
    main()

"""treeimp's TreeSHAP against its peers, on the same rows, in one process, as rows/s.

For each binary model -- XGBoost (--xgb-rounds rounds, depth 6), LightGBM (--lgb-rounds
rounds, 63 leaves), a scikit-learn RandomForest classifier and, as "forest_regressor",
a RandomForest regressor (--forest-trees deep trees each, min_samples_leaf=5; FastTreeSHAP
reads only the regressor) on --features float32 features -- and each thread count of
--threads, treeimp's path-dependent TreeSHAP, ``treeimp.contributions(ens, X,
n_jobs=T)`` of the model parsed once outside the timing (as shap's TreeExplainer is
built once outside its timing), is timed against:

- the library's own TreeSHAP: XGBoost ``Booster.predict(DMatrix, pred_contribs=True)``
  (nthread=T), LightGBM ``Booster.predict(pred_contrib=True, num_threads=T)``;
- shap's ``TreeExplainer(model).shap_values`` (single-threaded whatever T is);
- FastTreeSHAP (``fasttreeshap`` or the ``fasttreeshap-fixed`` package) with
  algorithm "v2" and "auto", n_jobs=T;
- woodelf's ``WoodelfExplainer(model).shap_values`` (XGBoost only).

SHAP interaction values (``treeimp.interactions``) on --interaction-rows rows (default
0: none; --interactions-only: nothing else), as "<model> interactions": against
XGBoost's ``pred_interactions`` and shap's ``shap_interaction_values`` (which takes
seconds per row on the LightGBM model and the forests).

A peer that does not import is reported as "not installed", one that raises as
"error: <message>", and the run goes on. Every function is called once untimed (numba
compilation, explainer caches), then --repeats rounds each call treeimp and every peer
in turn, so that a slow spell of the shared machine falls on all of them; the median
time gives rows/s. Each peer's values are compared with treeimp's on the timed rows
(feature columns; max abs diff in the table); a peer differing by more than 1e-4
relative to the largest treeimp value is flagged. Versions of every library are
printed and written with the results. Output: a Markdown table on stdout and
OUT/peers.json.

Usage: python benchmarks/peers.py [--rows 1000] [--forest-rows 100] [--threads 1,2]
       [--interaction-rows 0] [--interactions-only]
       [--repeats 3] [--models xgboost,lightgbm,forest,forest_regressor]
       [--small] [--out DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.metadata
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import _table, fit_model, timed_together  # noqa: E402

# agreement required of a peer's values: max abs diff / max |treeimp value|
REL_TOL = 1e-4


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1000, help="explained rows (boosting)")
    p.add_argument("--forest-rows", type=int, default=100, help="explained rows (forests)")
    p.add_argument("--train-rows", type=int, default=10_000, help="training rows")
    p.add_argument("--features", type=int, default=50)
    p.add_argument("--xgb-rounds", type=int, default=500)
    p.add_argument("--lgb-rounds", type=int, default=500)
    p.add_argument("--forest-trees", type=int, default=100)
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--repeats", type=int, default=3, help="timed rounds (median)")
    p.add_argument("--models", default="xgboost,lightgbm,forest,forest_regressor")
    p.add_argument("--interaction-rows", type=int, default=0,
                   help="rows for SHAP interaction values (0: none)")
    p.add_argument("--interactions-only", action="store_true",
                   help="time only the SHAP interaction values")
    p.add_argument("--small", action="store_true", help="tiny sizes (smoke run)")
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args(argv)
    if args.small:
        args.rows, args.forest_rows, args.train_rows, args.features = 50, 20, 500, 10
        args.xgb_rounds, args.lgb_rounds, args.forest_trees, args.repeats = 10, 10, 5, 1
        args.interaction_rows = 10
    args.thread_counts = [int(t) for t in args.threads.split(",")]
    return args


def _import_first(*names):
    """The first of the modules ``names`` that imports; ImportError if none does."""
    errors = []
    for name in names:
        try:
            return importlib.import_module(name)
        except ImportError as exc:
            errors.append(f"{name}: {exc}")
    raise ImportError("; ".join(errors))


def _version(module, *dists):
    v = getattr(module, "__version__", None)
    for d in dists:
        if v is not None:
            break
        try:
            v = importlib.metadata.version(d)
        except importlib.metadata.PackageNotFoundError:
            pass
    return v or "unknown"


def versions():
    """Version of Python, treeimp (and its git commit) and every library, installed or
    not ("not installed")."""
    out = {"python": platform.python_version()}
    libs = {"treeimp": ("treeimp",), "numpy": ("numpy",), "numba": ("numba",),
            "xgboost": ("xgboost",), "lightgbm": ("lightgbm",), "scikit-learn": ("sklearn",),
            "shap": ("shap",), "fasttreeshap": ("fasttreeshap", "fasttreeshap_fixed"),
            "woodelf": ("woodelf",)}
    for lib, mods in libs.items():
        try:
            mod = _import_first(*mods)
        except ImportError:
            out[lib] = "not installed"
            continue
        out[lib] = _version(mod, lib, "fasttreeshap-fixed", "woodelf-explainer")
    try:
        commit = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    out["treeimp_commit"] = commit or "unknown"
    return out


def _feature_values(values, n_features):
    """(rows, features) log-odds / class-1 contributions from a peer's output: drops a
    bias column, takes the positive class of a per-class list or trailing class axis."""
    if isinstance(values, list):
        values = values[-1]
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 3:
        values = values[..., -1]
    return values[:, :n_features]


def peers(name, model, X, threads, interactions=False):
    """name -> (function returning the peer's values on X) for T threads, or a string
    saying why the peer is absent: TreeSHAP, or with ``interactions`` SHAP interaction
    values (XGBoost's ``pred_interactions``, shap's ``shap_interaction_values``)."""
    out = {}
    what = "pred_interactions" if interactions else "pred_contribs"
    if name == "xgboost":
        import xgboost as xgb

        booster = model.get_booster()

        def xgb_values():
            booster.set_param({"nthread": threads})
            return booster.predict(xgb.DMatrix(X, nthread=threads), **{what: True})
        out[f"xgboost {xgb.__version__} {what}"] = xgb_values
    elif name == "lightgbm" and not interactions:
        out["lightgbm pred_contrib"] = lambda: model.booster_.predict(
            X, pred_contrib=True, num_threads=threads)
    try:
        import shap

        ex = shap.TreeExplainer(model)
        out["shap"] = ((lambda: ex.shap_interaction_values(X)) if interactions
                       else (lambda: ex.shap_values(X, check_additivity=False)))
    except ImportError:
        out["shap"] = "not installed"
    except Exception as exc:  # a peer that breaks is reported, the run goes on
        out["shap"] = _error(exc)
    if interactions:
        return out
    for algorithm in ("v2", "auto"):
        key = f"fasttreeshap {algorithm}"
        try:
            fts = _import_first("fasttreeshap", "fasttreeshap_fixed")
            fex = fts.TreeExplainer(model, algorithm=algorithm, n_jobs=threads)
            out[key] = lambda fex=fex: fex.shap_values(X, check_additivity=False)
        except ImportError:
            out[key] = "not installed"
        except Exception as exc:
            out[key] = _error(exc)
    if name == "xgboost":
        try:
            import pandas as pd
            from woodelf import WoodelfExplainer

            wex = WoodelfExplainer(model)
            # woodelf takes a DataFrame only; made once, outside the timing
            frame = pd.DataFrame(X, columns=model.get_booster().feature_names)

            def woodelf_values():
                # woodelf prints its own timings on stdout, where the table goes
                with contextlib.redirect_stdout(sys.stderr):
                    return wex.shap_values(frame)
            out["woodelf"] = woodelf_values
        except ImportError:
            out["woodelf"] = "not installed"
        except Exception as exc:
            out["woodelf"] = _error(exc)
    return out


def _error(exc):
    lines = str(exc).strip().splitlines()
    return f"error: {type(exc).__name__}: {lines[0] if lines else ''}"[:160]


def bench(name, args, records):
    import treeimp

    a = argparse.Namespace(rows=args.train_rows, forest_rows=args.train_rows,
                           features=args.features, threads=max(args.thread_counts),
                           rounds=args.xgb_rounds if name == "xgboost" else args.lgb_rounds,
                           forest_trees=args.forest_trees)
    forest = name.startswith("forest")
    kind = "regression" if name == "forest_regressor" else "binary"
    model, _, _, Xv, _ = fit_model("forest" if forest else name, a, kind)
    X = np.ascontiguousarray(Xv[: args.forest_rows if forest else args.rows])
    ens = treeimp.parse(model)
    for T in ([] if args.interactions_only else args.thread_counts):
        bench_threads(name, model, ens, X, T, args.repeats, records)
    if args.interaction_rows > 0:
        Xi = np.ascontiguousarray(Xv[:args.interaction_rows])
        for T in args.thread_counts:
            bench_threads(name, model, ens, Xi, T, args.repeats, records, interactions=True)


def _interaction_values(values, n_features):
    """A peer's interaction values as (rows, F, F), the last output of a classifier's."""
    if isinstance(values, list):
        values = values[-1]
    v = np.asarray(values, dtype=np.float64)
    if v.ndim == 4:  # (rows, F, F, outputs)
        v = v[..., -1]
    return v[:, :n_features, :n_features]


def bench_threads(name, model, ens, X, T, repeats, records, interactions=False):
    """Time treeimp and every peer of ``name`` at ``T`` threads on ``X`` (interleaved
    rounds) and append one record per library to ``records``: TreeSHAP, or SHAP
    interaction values (the model is then named "<name> interactions")."""
    import treeimp

    F = X.shape[1]
    got = {}

    def keep(key, fn):
        def call():
            got[key] = fn()
        return call

    ours_fn = treeimp.interactions if interactions else treeimp.contributions
    fns = {"treeimp": keep("treeimp", lambda: ours_fn(ens, X, n_jobs=T))}
    absent = {}
    found = peers(name, model, X, T, interactions)
    values_of = _interaction_values if interactions else _feature_values
    for key, fn in found.items():
        if isinstance(fn, str):
            absent[key] = fn
            continue
        # a peer that fails on its first (warm-up) call is reported and left out
        try:
            got[key] = fn()
            fns[key] = keep(key, fn)
        except Exception as exc:
            absent[key] = _error(exc)
    t = timed_together(fns, repeats)
    ours = np.asarray(got["treeimp"].values, dtype=np.float64)
    ours = ours[..., -1] if ours.ndim == (4 if interactions else 3) else ours
    ours = ours[:, :F, :F] if interactions else ours[:, :F]
    scale = max(float(np.max(np.abs(ours))), 1e-12)
    if interactions:
        name = f"{name} interactions"
    base = {"model": name, "threads": T, "rows": len(X), "trees": ens.n_trees,
            "nodes": ens.n_nodes}
    tr = len(X) / t["treeimp"]
    records.append({**base, "library": "treeimp", "seconds": t["treeimp"],
                    "rows_per_s": tr, "ratio": 1.0, "max_abs_diff": 0.0, "note": None})
    for key in [k for k in fns if k != "treeimp"]:
        theirs = values_of(got[key], F)
        if theirs.shape != ours.shape:
            diff, note = None, f"values of shape {theirs.shape}, treeimp {ours.shape}"
        else:
            diff = float(np.max(np.abs(theirs - ours)))
            note = ("values differ beyond 1e-4 relative" if diff > REL_TOL * scale
                    else None)
        records.append({**base, "library": key, "seconds": t[key],
                        "rows_per_s": len(X) / t[key], "ratio": len(X) / t[key] / tr,
                        "max_abs_diff": diff, "note": note})
    for key, why in absent.items():
        records.append({**base, "library": key, "seconds": None, "rows_per_s": None,
                        "ratio": None, "max_abs_diff": None, "note": why})
    print(f"{name} {T} thread(s), rows/s: " + ", ".join(
        f"{r['library']} {r['rows_per_s']:.0f}" for r in records
        if r["model"] == name and r["threads"] == T and r["rows_per_s"] is not None),
        file=sys.stderr)


COLUMNS = ("model", "threads", "rows", "library", "rows/s", "peer / treeimp",
           "max abs diff", "note")


def markdown(records, vers, args):
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# TreeSHAP against its peers ({when}, {platform.machine()})", "",
             "Versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), "",
             f"XGBoost {args.xgb_rounds} rounds depth 6, LightGBM {args.lgb_rounds} rounds "
             f"63 leaves, RandomForest {args.forest_trees} trees (min_samples_leaf=5), "
             f"binary (forest_regressor: regression), {args.features} float32 features, "
             f"{args.train_rows} training rows. "
             f"rows/s from the median of {args.repeats} interleaved rounds after a warm-up; "
             "peer / treeimp is the peer's rows/s over treeimp's (above 1: the peer is "
             "faster); max abs diff against treeimp's values on the same rows.", ""]
    rows = []
    for r in records:
        rows.append((r["model"], r["threads"], r["rows"], r["library"],
                     "" if r["rows_per_s"] is None else f"{r['rows_per_s']:.0f}",
                     "" if r["ratio"] is None else f"{r['ratio']:.2f}",
                     "" if r["max_abs_diff"] is None else f"{r['max_abs_diff']:.1e}",
                     r.get("note") or ""))
    return "\n".join(lines + _table(COLUMNS, rows))


def main(argv=None):
    args = parse_args(argv)
    import numba

    numba.set_num_threads(min(max(args.thread_counts), numba.config.NUMBA_NUM_THREADS))
    vers = versions()
    print("versions: " + ", ".join(f"{k} {v}" for k, v in vers.items()), file=sys.stderr)
    records = []
    t0 = time.perf_counter()
    for name in args.models.split(","):
        bench(name, args, records)
    wall = time.perf_counter() - t0
    table = markdown(records, vers, args) + f"\n\nWhole run (training included): {wall:.1f} s."

    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args_out = {k: v for k, v in vars(args).items()}
    (out / "peers.json").write_text(json.dumps(
        {"args": args_out, "versions": vers, "wall_s": wall, "results": records}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())

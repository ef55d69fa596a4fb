"""Calibration of treeimp's p-values on null designs: the number of row blocks and the
variance factors of out-of-bag and cross-fitted evaluation.

Every feature is noise (y independent of X): 4 continuous, 4 binary, 4 categorical with
20 levels (integer codes) and one row ID. For each design (regression with a skewed,
non-zero-mean target; binary classification with 30% positives), size and repetition,
one model of each setting is fitted and explained with several n_blocks (and Strobl et
al.'s null case, fully grown forests, the design on which out-of-bag errors need the
largest factor):

- forest OOB: RandomForest on all rows, ``explain(oob=True)``;
- forest held-out: RandomForest on half the rows, explained on the other half;
- boosting held-out: XGBoost on half the rows, explained on the other half;
- boosting cross-fitted: ``cross_explain`` of XGBoost with 5 folds.

The z-scores are recorded without the variance factors (value / jackknife error), so
that any factor f can be judged afterwards: z / f, p from t with the result's degrees of
freedom. Targets: the fraction of noise features with p < 0.05 in [0.03, 0.06] and the
z-scores' standard deviation in [0.85, 1.15].

    python benchmarks/calibration.py            # the study in benchmarks/README.md
    python benchmarks/calibration.py --quick    # a few repetitions, small sizes
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import treeimp  # noqa: E402
from treeimp.measures.defaults import CROSSFIT_VARIANCE_FACTOR, OOB_VARIANCE_FACTOR  # noqa: E402

METHODS = ("mdi_oob", "mdi_oob_centered", "ufi")
NOISE_KINDS = ("continuous", "binary", "categorical20", "row_id")


def null_design(n, target, rng):
    """X (n, 13) of pure noise columns, the column kinds, and y independent of X.
    ``target`` "strobl": Strobl et al.'s null case instead (X1 N(0,1), X2..X5 with 2, 4,
    10, 20 levels, y balanced binary), for fully grown forests."""
    if target == "strobl":
        X = np.column_stack([rng.normal(size=n)] + [rng.integers(0, k, n).astype(float)
                                                     for k in (2, 4, 10, 20)])
        return X, ["continuous", "binary", "categorical4", "categorical10",
                   "categorical20"], rng.integers(0, 2, n)
    cols, kinds = [], []
    for _ in range(4):
        cols.append(rng.normal(size=n))
        kinds.append("continuous")
    for _ in range(4):
        cols.append(rng.integers(0, 2, n).astype(float))
        kinds.append("binary")
    for _ in range(4):
        cols.append(rng.integers(0, 20, n).astype(float))
        kinds.append("categorical20")
    cols.append(rng.permutation(n).astype(float))
    kinds.append("row_id")
    X = np.column_stack(cols)
    if target == "regression":
        y = 20.0 + 3.0 * rng.exponential(size=n)
    else:
        y = (rng.random(n) < 0.3).astype(int)
    return X, kinds, y


# the forests' size and leaf size (--forest-trees, --forest-leaf): None keeps the
# defaults below
FOREST_OVERRIDES = {}


def _forest(target, seed):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestRegressor if target == "regression" else RandomForestClassifier
    # Strobl's design: fully grown trees, as in the paper
    kw = {"n_estimators": 100, "min_samples_leaf": 1 if target == "strobl" else 5}
    kw.update(FOREST_OVERRIDES)
    return cls(max_features="sqrt", random_state=seed, n_jobs=1, **kw)


def _boosting(target, seed):
    import xgboost as xgb

    cls = xgb.XGBRegressor if target == "regression" else xgb.XGBClassifier
    return cls(n_estimators=100, max_depth=4, learning_rate=0.1, subsample=0.8,
               random_state=seed, n_jobs=1)


def _raw_z(res, factor):
    """(value / jackknife error without the variance factor) per method, and dof."""
    return {m: (res.table[m] / (res.stderr[m] / factor)).to_numpy() for m in METHODS}, res.dof


SETTINGS = ("forest OOB", "forest held-out", "boosting held-out", "boosting cross-fitted")


def one_run(n, target, seed, block_counts, settings=SETTINGS):
    """Rows (setting, n_blocks, method, kind, z_raw, dof) of one data set."""
    rng = np.random.default_rng(seed)
    X, kinds, y = null_design(n, target, rng)
    half = n // 2
    out = []

    def record(setting, res, factor, B):
        z, dof = _raw_z(res, factor)
        for m in METHODS:
            for kind, v in zip(kinds, z[m]):
                out.append((setting, B, m, kind, v, dof))

    if "forest OOB" in settings:
        rf = _forest(target, seed).fit(X, y)
        for B in block_counts:
            record("forest OOB", treeimp.explain(rf, X, y, oob=True, methods=METHODS,
                                                  n_blocks=B, random_state=seed, n_jobs=1),
                   OOB_VARIANCE_FACTOR, B)
    for setting, make in (("forest held-out", _forest), ("boosting held-out", _boosting)):
        if setting not in settings:
            continue
        half_model = make(target, seed).fit(X[:half], y[:half])
        for B in block_counts:
            record(setting, treeimp.explain(half_model, X[half:], y[half:], methods=METHODS,
                                            n_blocks=B, random_state=seed, n_jobs=1), 1.0, B)
    # cross-fitting refits the folds for every block count: the first and the third only
    for B in (block_counts[::2][:2] if "boosting cross-fitted" in settings else ()):
        record("boosting cross-fitted",
               treeimp.cross_explain(_boosting(target, seed), X, y, cv=5, methods=METHODS,
                                     n_blocks=B, random_state=seed, n_jobs=1),
               CROSSFIT_VARIANCE_FACTOR, B)
    return out


def summarise(df, factors):
    """Fraction p < 0.05 and sd of z per (setting, n_blocks, method) for the factors
    ``factors`` (setting -> list of candidate variance factors)."""
    rows = []
    # each noise z about the mean of its cell (size, target, noise kind): boosting's noise
    # importances have a negative mean that differs by cell, which inflates the pooled sd
    # without saying anything about the size of the standard errors
    cells = [c for c in ("n", "target", "kind") if c in df]
    for (setting, B, m), g in df.groupby(["setting", "n_blocks", "method"]):
        cell_mean = (g.groupby(cells)["z_raw"].transform("mean").to_numpy() if cells
                     else g["z_raw"].mean())
        n_cells = g.groupby(cells).ngroups if cells else 1
        for f in factors.get(setting, [1.0]):
            z = g["z_raw"].to_numpy() / f
            dof = g["dof"].to_numpy()
            p = stats.t.sf(z, dof)
            zc = (g["z_raw"].to_numpy() - cell_mean) / f
            rows.append({"setting": setting, "n_blocks": B, "method": m, "factor": round(f, 3),
                         "n_noise": len(z), "frac_p_lt_05": np.mean(p < 0.05),
                         "z_mean": z.mean(), "z_sd": z.std(ddof=1),
                         "z_sd_in_cell": np.sqrt(np.sum(zc**2) / max(len(zc) - n_cells, 1)),
                         "frac_in_cell_p_lt_05": np.mean(stats.t.sf(zc, dof) < 0.05)})
    return pd.DataFrame(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--sizes", default=None, help="comma-separated row counts")
    ap.add_argument("--blocks", default="10,20,30,50")
    ap.add_argument("--targets", default="regression,binary,strobl")
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="comma-separated subset of: " + ", ".join(SETTINGS))
    ap.add_argument("--forest-trees", type=int, default=None,
                    help="trees of every forest (default 100)")
    ap.add_argument("--forest-leaf", type=int, default=None,
                    help="min_samples_leaf of every forest, Strobl's included (default 5, "
                         "Strobl's 1)")
    ap.add_argument("--out", default=None, help="CSV of the raw z-scores")
    args = ap.parse_args(argv)
    FOREST_OVERRIDES.clear()
    if args.forest_trees is not None:
        FOREST_OVERRIDES["n_estimators"] = args.forest_trees
    if args.forest_leaf is not None:
        FOREST_OVERRIDES["min_samples_leaf"] = args.forest_leaf
    settings = args.settings.split(",")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        ap.error(f"unknown settings {unknown}; choose from {list(SETTINGS)}")
    sizes = [int(s) for s in (args.sizes or ("300,1000" if args.quick
                                              else "300,1000,5000")).split(",")]
    reps = args.reps or (2 if args.quick else 6)
    blocks = [int(b) for b in args.blocks.split(",")]
    t0 = time.perf_counter()
    rows = []
    for n in sizes:
        for target in args.targets.split(","):
            for r in range(reps if n < 5000 else max(1, reps // 2)):
                rows += [(n, target, *row) for row in one_run(n, target, 1000 * n + r, blocks,
                                                                  settings)]
            print(f"n={n} {target}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                  flush=True)
    df = pd.DataFrame(rows, columns=["n", "target", "setting", "n_blocks", "method", "kind",
                                     "z_raw", "dof"])
    if args.out:
        df.to_csv(args.out, index=False)
    candidates = [1.0, np.sqrt(1.25), np.sqrt(1.5), np.sqrt(1.6), np.sqrt(2.0)]
    factors = {"forest OOB": candidates, "boosting cross-fitted": candidates}
    summary = summarise(df, factors)
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        adopted = {"forest OOB": OOB_VARIANCE_FACTOR,
                   "boosting cross-fitted": CROSSFIT_VARIANCE_FACTOR}
        sub = df[(df["method"] == "mdi_oob_centered") & (df["n_blocks"] == blocks[0])]
        sub = sub.assign(z_raw=sub["z_raw"] / sub["setting"].map(adopted).fillna(1.0),
                         setting=sub["setting"] + " / " + sub["kind"])
        by_kind = summarise(sub, {})
        print(f"\nmdi_oob_centered by noise kind, n_blocks={blocks[0]}, the library's "
              "variance factors:")
        print(by_kind.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()

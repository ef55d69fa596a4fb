"""Bitwise equivalence of explain results between two checkouts of treeimp.

Run once per checkout in a fresh process (``PYTHONPATH`` = the checkout) with ``--save
FILE.npz``, then ``--compare A.npz B.npz``. The explains cover XGBoost binary, regression
and 3 classes, LightGBM, scikit-learn GradientBoostingRegressor, random forest
classifier and regressor out of bag, each with mdi_oob/ufi and with mdi_oob_centered
added, at 20 and 5 blocks and one and two threads; every table, standard error,
across-trees error, per-tree and block value, per-class table, p- and q-value is saved.
(Written for the split-sum output layout, benchmarks/README.md, issue 31 item 3.)
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def _models():
    import lightgbm as lgb
    import xgboost as xgb
    from sklearn.ensemble import (
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )
    rng = np.random.default_rng(7)
    n, F = 1600, 8
    X = rng.normal(size=(n, F)).astype(np.float32)
    X[rng.random(size=X.shape) < 0.03] = np.nan  # some missing values for the boosters
    Xf = np.nan_to_num(X)
    lin = X[:, 0] - 0.7 * X[:, 1] + 0.4 * np.sin(3 * np.nan_to_num(X[:, 2]))
    lin = np.nan_to_num(lin)
    yb = (lin + rng.logistic(size=n) > 0).astype(int)
    yr = lin + rng.normal(size=n)
    y3 = np.digitize(lin + rng.normal(size=n), [-0.6, 0.6])
    tr, te = slice(0, 1000), slice(1000, None)
    out = {}
    xc = dict(n_estimators=40, max_depth=4, learning_rate=0.2, n_jobs=1, random_state=0)
    out["xgb_binary"] = (xgb.XGBClassifier(**xc).fit(X[tr], yb[tr]), X[te], yb[te], False)
    out["xgb_regression"] = (xgb.XGBRegressor(**xc).fit(X[tr], yr[tr]), X[te], yr[te], False)
    out["xgb_3class"] = (xgb.XGBClassifier(**xc).fit(X[tr], y3[tr]), X[te], y3[te], False)
    out["lgbm_regression"] = (lgb.LGBMRegressor(n_estimators=40, num_leaves=15, verbose=-1,
                                                n_jobs=1, random_state=0).fit(X[tr], yr[tr]),
                              X[te], yr[te], False)
    out["lgbm_binary"] = (lgb.LGBMClassifier(n_estimators=30, num_leaves=15, verbose=-1,
                                             n_jobs=1, random_state=0).fit(X[tr], yb[tr]),
                          X[te], yb[te], False)
    out["sk_gbr"] = (GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0)
                     .fit(Xf[tr], yr[tr]), Xf[te], yr[te], False)
    out["rf_classifier_oob"] = (RandomForestClassifier(n_estimators=30, max_depth=8,
                                                       random_state=0).fit(Xf[tr], y3[tr]),
                                Xf[tr], y3[tr], True)
    out["rf_regressor_oob"] = (RandomForestRegressor(n_estimators=30, max_depth=8,
                                                     random_state=0).fit(Xf[tr], yr[tr]),
                               Xf[tr], yr[tr], True)
    out["rf_regressor_deep_heldout"] = (RandomForestRegressor(n_estimators=20,
                                                              random_state=1)
                                        .fit(Xf[tr], yr[tr]), Xf[te], yr[te], False)
    return out


def _frame(prefix, df, store):
    store[prefix + "/values"] = df.to_numpy(dtype=float)
    store[prefix + "/index"] = np.array([str(i) for i in df.index])
    store[prefix + "/columns"] = np.array([str(c) for c in df.columns])


def save(path):
    import treeimp
    store = {}
    methods_sets = {"plain": ("mdi_oob", "ufi"),
                    "centered": ("mdi_oob", "ufi", "mdi_oob_centered")}
    for name, (model, X, y, oob) in _models().items():
        for mname, methods in methods_sets.items():
            for n_blocks, n_jobs in ((20, 1), (5, 2)):
                r = treeimp.explain(model, X, y, oob=oob, methods=methods, n_blocks=n_blocks,
                                    n_jobs=n_jobs, random_state=0)
                key = f"{name}/{mname}/{n_blocks}/{n_jobs}"
                for attr in ("table", "stderr", "stderr_trees", "pvalues", "qvalues"):
                    _frame(f"{key}/{attr}", getattr(r, attr), store)
                for attr in ("per_tree", "block_values"):
                    for m, v in getattr(r, attr).items():
                        store[f"{key}/{attr}/{m}"] = np.asarray(v, dtype=float)
                for m, df in r.table_by_class.items():
                    _frame(f"{key}/by_class/{m}", df, store)
    np.savez(path, **store)
    print(f"saved {len(store)} arrays to {path}")


def compare(a_path, b_path):
    a, b = np.load(a_path), np.load(b_path)
    bad = sorted(set(a.files) ^ set(b.files))
    for k in sorted(set(a.files) & set(b.files)):
        x, y = a[k], b[k]
        if x.dtype.kind == "f":
            same = x.shape == y.shape and np.array_equal(x.view(np.uint64), y.view(np.uint64))
        else:
            same = np.array_equal(x, y)
        if not same:
            bad.append(k)
    print(f"{len(a.files)} arrays; {len(bad)} differ" + ("" if not bad else ":"))
    for k in bad:
        print("  ", k)
    return 1 if bad else 0


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--save")
    p.add_argument("--compare", nargs=2)
    args = p.parse_args()
    if args.save:
        save(args.save)
    if args.compare:
        sys.exit(compare(*args.compare))

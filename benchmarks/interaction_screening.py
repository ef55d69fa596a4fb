"""Screening interactions: held-out interaction importance against in-bag interaction
importance, on a design with one true interaction among noise features.

Design (fixed seeds): 10 features, x0, x1, x2, x3 standard normal, y = 3 + 0.5 x0 x1 +
0.5 x2 + 0.5 x3 + N(0, 1) (regression) or y = 1{0.5 x0 x1 + 0.5 x2 + N(0, 1) > 0} (binary);
noise: x4, x5 standard normal, x6 binary, x7 with 30 categories (integer codes), x8
uniform (every value distinct, like an id) and x9 with 200 categories. The true pair
is x0 x x1; every other pair is null (y has no other interaction), among them the 15
pairs of two noise features.

Per repetition (new data): a random forest (100 fully grown trees, scikit-learn's
defaults, oob=True on its training rows) and XGBoost (300 rounds, depth 4, eta 0.05,
explained on a held-out set of the same size), each measured by

- held-out interaction importance, centred and uncentred (``interaction_importance``);
- its in-bag version: the same on the training rows (``oob=False``, X_train, y_train);
- mean |Phi_jk| on the training rows (``interactions``), what users compute today.

Reported per model and measure over the repetitions: the mean and worst rank of the
true pair, the number of null pairs (all 44 others: y has no other interaction) ranked
above it (mean), the best rank of a pair with a high-cardinality noise feature (x8 or
x9; median), the fraction of null pairs and of the 15 noise-noise pairs with p < 0.05
(the error rate; 0.05 or below is calibrated), the power (true pair p < 0.05) and how
often ``select()`` keeps the true pair (q < 0.05).

    python benchmarks/interaction_screening.py             # the table in benchmarks/README.md
    python benchmarks/interaction_screening.py --reps 2    # a quick look
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import treeimp  # noqa: E402

F = 10
SIGNAL = (0, 1, 2, 3)
TRUE_PAIR = "x0 x x1"


def design(n, rng, binary):
    X = np.empty((n, F))
    X[:, :6] = rng.normal(size=(n, 6))
    X[:, 6] = rng.integers(0, 2, n)
    X[:, 7] = rng.integers(0, 30, n)
    X[:, 8] = rng.uniform(size=n)
    X[:, 9] = rng.integers(0, 200, n)
    f = 0.5 * X[:, 0] * X[:, 1] + 0.5 * X[:, 2]
    if binary:
        return X, (f + rng.normal(size=n) > 0).astype(int)
    return X, 3.0 + f + 0.5 * X[:, 3] + rng.normal(size=n)


def pair_kinds():
    """{label: "true" | "noise" | "mixed" | "signal"} for the pairs j < k: the true pair,
    two noise features, one of x0..x3 with a noise feature, two of x0..x3 (y has no
    interaction but x0 x x1: every other pair is null)."""
    out = {}
    for j in range(F):
        for k in range(j + 1, F):
            n_signal = (j in SIGNAL) + (k in SIGNAL)
            out[f"x{j} x x{k}"] = ("true" if (j, k) == (0, 1) else
                                   ("noise", "mixed", "signal")[n_signal])
    return out


def mean_abs_phi(model, X):
    """Mean |Phi_jk| over the rows (in-bag interaction importance as users compute it),
    per pair j < k; a classifier's second class."""
    v = treeimp.interactions(model, X).values
    if v.ndim == 4:
        v = v[..., -1]
    m = np.abs(v).mean(axis=0)
    j, k = np.triu_indices(F, 1)
    return pd.Series(m[j, k], index=[f"x{a} x x{b}" for a, b in zip(j, k)])


def one_rep(seed, n, binary, n_jobs):
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    rng = np.random.default_rng(seed)
    X, y = design(n, rng, binary)
    X_val, y_val = design(n, rng, binary)
    Forest = RandomForestClassifier if binary else RandomForestRegressor
    rf = Forest(n_estimators=100, random_state=seed,
                n_jobs=n_jobs).fit(X, y)
    Boost = xgb.XGBClassifier if binary else xgb.XGBRegressor
    bst = Boost(n_estimators=300, max_depth=4, learning_rate=0.05, n_jobs=n_jobs,
                random_state=seed).fit(X, y)
    rows = []
    for name, model, held in (("forest (oob)", rf, dict(X=X, y=y, oob=True)),
                              ("XGBoost (held-out)", bst, dict(X=X_val, y=y_val))):
        for measure, kw in (("held-out, centred", dict(held, centered=True)),
                            ("held-out, uncentred", dict(held, centered=False)),
                            ("in-bag, centred", dict(X=X, y=y, centered=True)),
                            ("in-bag, uncentred", dict(X=X, y=y, centered=False))):
            res = treeimp.interaction_importance(model, random_state=seed, n_jobs=n_jobs,
                                                 **kw)
            m = res.methods[0]
            rows.append(dict(model=name, measure=measure, value=res.table[m],
                             p=res.pvalues[m], selected=res.select()))
        rows.append(dict(model=name, measure="in-bag mean |Phi|",
                         value=mean_abs_phi(model, X), p=None, selected=None))
    return rows


def summarise(reps):
    kinds = pd.Series(pair_kinds())
    null = kinds.index[kinds != "true"]
    noise = kinds.index[kinds == "noise"]
    wide = [p for p in null if "x8" in p.split(" x ") or "x9" in p.split(" x ")]
    out = []
    by = {}
    for rows in reps:
        for r in rows:
            by.setdefault((r["model"], r["measure"]), []).append(r)
    for (model, measure), rs in by.items():
        ranks, above, best_wide, fp, fp_noise, power, sel = [], [], [], [], [], [], []
        for r in rs:
            order = list(r["value"].sort_values(ascending=False, kind="stable").index)
            rank = order.index(TRUE_PAIR) + 1
            ranks.append(rank)
            above.append(sum(order.index(p) + 1 < rank for p in null))
            best_wide.append(min(order.index(p) + 1 for p in wide))
            if r["p"] is not None:
                fp.append(float((r["p"][null] < 0.05).mean()))
                fp_noise.append(float((r["p"][noise] < 0.05).mean()))
                power.append(float(r["p"][TRUE_PAIR] < 0.05))
                sel.append(float(TRUE_PAIR in r["selected"]))
        out.append({"model": model, "measure": measure,
                    "true rank mean": np.mean(ranks), "true rank worst": max(ranks),
                    "null pairs above true": np.mean(above),
                    "best x8/x9 pair rank": np.median(best_wide),
                    "null p<0.05": np.mean(fp) if fp else np.nan,
                    "noise-noise p<0.05": np.mean(fp_noise) if fp else np.nan,
                    "power p<0.05": np.mean(power) if power else np.nan,
                    "selected q<0.05": np.mean(sel) if sel else np.nan})
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--n", type=int, default=1000, help="training rows (and held-out rows)")
    ap.add_argument("--n-jobs", type=int, default=2)
    ap.add_argument("--binary", action="store_true", help="the binary outcome")
    args = ap.parse_args(argv)
    t0 = time.time()
    reps = [one_rep(1000 + r, args.n, args.binary, args.n_jobs) for r in range(args.reps)]
    table = summarise(reps)
    import sklearn
    import xgboost
    print(f"# {'binary' if args.binary else 'regression'} design, n = {args.n}, "
          f"{args.reps} repetitions, {F * (F - 1) // 2} pairs (1 true, 15 noise-noise); treeimp "
          f"{treeimp.__version__}, scikit-learn {sklearn.__version__}, xgboost "
          f"{xgboost.__version__}, numpy {np.__version__}; {time.time() - t0:.0f} s")
    with pd.option_context("display.width", 200, "display.max_columns", 20):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    return table


if __name__ == "__main__":
    main()

"""Levers of forest screening power on Li et al.'s design (benchmarks/screening.py's data
sets): the forest's size and leaf size, the number of row blocks and the p-value
reference (t with n_blocks - 1 degrees of freedom, the library's, or the normal).

For each data set and forest, one out-of-bag ``explain`` per block count; for each
measure and reference: the mean z-score of the 5 relevant features, the spread and the
fraction p < 0.05 of the 45 noise features' z-scores, and the power, false selections
and false discovery proportion of Benjamini-Hochberg at q < 0.05.

    python benchmarks/screening_levers.py --reps 10   # the table in benchmarks/README.md
    python benchmarks/screening_levers.py --quick     # smoke run
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from screening import DESIGNS, li_classification  # noqa: E402

import treeimp  # noqa: E402
from treeimp.results.importances import bh_qvalues  # noqa: E402

MEASURES = ("mdi_oob_centered", "ufi")
FORESTS = ((100, 3), (100, 10), (200, 10), (300, 10))  # (trees, min_samples_leaf)
BLOCKS = (20, 30, 50, 100)
ALPHA = 0.05


def one_data_set(rep, n, forests, blocks):
    """Rows of one data set (the screening study's seed for Li et al.'s design)."""
    from sklearn.ensemble import RandomForestClassifier

    seed = 100 * list(DESIGNS).index("Li et al. classification") + rep
    X, y, relevant, _ = li_classification(n, np.random.default_rng(seed))
    rel = np.zeros(X.shape[1], bool)
    rel[relevant] = True
    rows = []
    for trees, leaf in forests:
        t = time.perf_counter()
        rf = RandomForestClassifier(n_estimators=trees, min_samples_leaf=leaf,
                                    max_features="sqrt", random_state=seed, n_jobs=1)
        rf.fit(X, y)
        fit_s = time.perf_counter() - t
        for B in blocks:
            t = time.perf_counter()
            res = treeimp.explain(rf, X, y, oob=True, methods=MEASURES, n_blocks=B,
                                  random_state=seed, n_jobs=1)
            explain_s = time.perf_counter() - t
            for m in MEASURES:
                z = (res.table[m] / res.stderr[m]).to_numpy()
                for ref in ("t", "normal"):
                    p = stats.t.sf(z, res.dof) if ref == "t" else stats.norm.sf(z)
                    kept = bh_qvalues(p) < ALPHA
                    false = int(np.sum(kept & ~rel))
                    rows.append({"rep": rep, "forest": f"{trees} trees, leaf {leaf}",
                                 "n_blocks": B, "measure": m, "reference": ref,
                                 "z_rel": z[rel].mean(), "z_noise_sd": z[~rel].std(ddof=1),
                                 "noise_p05": np.mean(p[~rel] < 0.05),
                                 "power": kept[rel].mean(), "false": false,
                                 "fdp": false / max(int(kept.sum()), 1),
                                 "fit_s": fit_s, "explain_s": explain_s})
    return rows


def summarise(df):
    cols = ["z_rel", "z_noise_sd", "noise_p05", "power", "false", "fdp", "fit_s",
            "explain_s"]
    return (df.groupby(["measure", "forest", "n_blocks", "reference"], sort=False)[cols]
            .mean().reset_index())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small data set")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", default=None, help="CSV of every data set")
    args = ap.parse_args(argv)
    n, forests, blocks, reps = ((500, ((20, 3), (20, 10)), (10, 20), 1) if args.quick else
                                (2000, FORESTS, BLOCKS, args.reps))
    t0 = time.perf_counter()
    rows = []
    for rep in range(reps):
        rows += one_data_set(rep, n, forests, blocks)
        print(f"data set {rep}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    table = summarise(df)
    with pd.option_context("display.width", 160, "display.max_rows", 500):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    return table


if __name__ == "__main__":
    main()

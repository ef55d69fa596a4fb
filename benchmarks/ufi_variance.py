"""Is ufi's jackknife standard error right on a heavy-tailed target? A Monte-Carlo truth
for the fixed-model part of the variance (issue 32).

One XGBoost regressor (the screening study's booster: 100 rounds, depth 3, learning rate
0.05, subsample 0.8) is fitted on 800 rows of a null design and held fixed; ``--sets``
independent held-out sets of ``--rows`` rows are drawn from the same design and each is
explained (``treeimp.explain``, 20 row blocks). Per noise feature, the spread of the
importance over the held-out sets is the true standard error of the fixed model's
statistic, which the delete-a-block jackknife estimates on each set. Reported, pooled
over the 20 features: the mean jackknife variance over the Monte-Carlo variance, and the
standard deviation of (value - its Monte-Carlo mean) / reported standard error.

With ``--second-order`` the same held-out sets are also split into 20 blocks of their
own and the statistic is recomputed with every block and every pair of blocks left out
(211 evaluations per set): d_ij = T - T_(i) - T_(j) + T_(ij) is the interaction of
blocks i and j, and sum_{i<j} d_ij^2 estimates the second-order part that a jackknife
counts twice (Efron & Stein 1981: the jackknife variance's expectation counts the k-th
order terms of a statistic's ANOVA decomposition k times). The corrected variance
V_jack - sum d_ij^2 is reported beside the jackknife's.

Designs: "skewed" (benchmarks/screening.py ``skewed_null``: 20 normal features, y =
exp(0.3 sum of five unobserved normals + 0.6 eps) + 1000) and "gauss" (20 normal
features, y = 1000 + 1.7 eps, the skewed target's sd).

    python benchmarks/ufi_variance.py --design skewed --sets 300
    python benchmarks/ufi_variance.py --design skewed --sets 100 --second-order
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from screening import boosting, skewed_null  # noqa: E402

import treeimp  # noqa: E402

N_BLOCKS = 20


def gauss_null(n, rng):
    """20 normal features, y = 1000 + 1.7 eps independent of them."""
    X = rng.normal(size=(n, 20))
    return X, 1000.0 + 1.7 * rng.normal(size=n), np.array([], dtype=int), "regression"


DESIGNS = {"skewed": skewed_null, "gauss": gauss_null}


def held_out_sets(design, method, sets, rows, seed, second_order):
    """One row per (held-out set, feature): value, reported stderr and, with
    ``second_order``, the sum of the squared block interactions."""
    make = DESIGNS[design]
    X, y, _, task = make(800, np.random.default_rng(seed))
    model = boosting(task, seed, 100).fit(X, y)
    out = []
    for s in range(sets):
        Xh, yh, _, _ = make(rows, np.random.default_rng(10_000 + s))
        res = treeimp.explain(model, Xh, yh, methods=[method], random_state=s, n_jobs=1)
        value, se = res.table[method].to_numpy(), res.stderr[method].to_numpy()
        part = {"set": s, "feature": np.arange(len(value)), "value": value, "se": se}
        if second_order:
            part["interaction"] = interactions(model, Xh, yh, method, value, s)
        out.append(pd.DataFrame(part))
    return pd.concat(out, ignore_index=True)


def interactions(model, X, y, method, total, seed):
    """sum_{i<j} (T - T_(i) - T_(j) + T_(ij))^2 over N_BLOCKS random row blocks."""
    def value(keep):
        return treeimp.explain(model, X[keep], y[keep], methods=[method], n_blocks=5,
                               random_state=0, n_jobs=1).table[method].to_numpy()

    block = np.random.default_rng(seed).permutation(len(y)) % N_BLOCKS
    one = [value(block != i) for i in range(N_BLOCKS)]
    acc = np.zeros_like(total)
    for i, j in itertools.combinations(range(N_BLOCKS), 2):
        acc += (total - one[i] - one[j] + value((block != i) & (block != j))) ** 2
    return acc


def summary(df, design, method):
    """One line: jackknife / Monte-Carlo variance and the centred z sd (and corrected)."""
    g = df.groupby("feature")
    mc_var = g["value"].var()
    used = mc_var > 0
    centred = df["value"] - g["value"].transform("mean")
    line = {"design": design, "measure": method, "sets": df["set"].nunique(),
            "var ratio": (g["se"].apply(lambda s: np.mean(s**2))[used].sum()
                          / mc_var[used].sum()),
            "z sd": np.nanstd(centred / df["se"], ddof=1)}
    if "interaction" in df:
        corrected = df["se"] ** 2 - df["interaction"]
        line["corrected var ratio"] = (corrected.groupby(df["feature"]).mean()[used].sum()
                                       / mc_var[used].sum())
        line["share corrected <= 0"] = float(np.mean(corrected <= 0))
        ok = corrected > 0
        line["corrected z sd"] = np.std(centred[ok] / np.sqrt(corrected[ok]), ddof=1)
    return line


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--design", choices=sorted(DESIGNS), default="skewed")
    ap.add_argument("--method", default="ufi")
    ap.add_argument("--sets", type=int, default=300)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--second-order", action="store_true")
    ap.add_argument("--out", default=None, help="CSV of every (set, feature) row")
    args = ap.parse_args(argv)
    df = held_out_sets(args.design, args.method, args.sets, args.rows, args.seed,
                       args.second_order)
    if args.out:
        df.to_csv(args.out, index=False)
    line = summary(df, args.design, args.method)
    print(" | ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}"
                     for k, v in line.items()))
    print(f"treeimp {treeimp.__version__}")


if __name__ == "__main__":
    main()

"""Candidate tests for the forest's out-of-bag screening (issue 32), judged afterwards on
the per-feature tables that benchmarks/oob_factor.py writes (``--out``; the factor set to
1 at collection, each feature's value, raw standard error, t degrees of freedom, share of
the screening forest's splits and number of its trees that split on it).

A rule maps one data set's features to scores z (one-sided p from t(dof)) and then to a
selection (q < 0.05). Rules, combined with "+":

- ``f:F``: z = value / (sqrt(F) se), today's default at F = 1.6;
- ``share:A``: z = value / (f_k se) with f_k^2 = 1 + A sqrt(s_k), s_k the feature's share
  of all splits of the screening forest;
- ``semodel:F``: a pooled standard error instead of the feature's own, se_k^2 replaced
  by a + b s_k fitted over the data set's features (least squares), floored at the
  smallest positive se^2 of the data set; then z = value / (sqrt(F) pooled se);
- ``shift:C``: C added to z (a null centre other than 0);
- ``cshift:C:S``: C max(0, 1 - s_k / S) added to z (a centre that fades to 0 for the
  features the forest splits on most);
- ``emp:K``: with at least K features of positive se, Efron's empirical null: z =
  (value / se - m) / s, m the median and s the interquartile range / 1.349 of the data
  set's value / se (the other parts are then ignored);
- ``storey``: Benjamini-Hochberg with Storey's estimate of the share of null features,
  pi0 = min(1, (#{p > 1/2} + 1) / (m / 2)), q-values multiplied by pi0 (adaptive BH);
  plain BH otherwise.

Per design and rule: power, FDR (the correlated design's also counting x3..x9 as
relevant), the share of runs with a false selection, and over the noise features the
fraction with p < 0.05, z mean and z sd (issue 32's calibration band: [0.03, 0.06] and
[0.9, 1.1]).

    python benchmarks/oob_null_rules.py main.csv --rules f:1.6,share:2,share:2+storey
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from oob_factor import ALPHA, selection_outcome  # noqa: E402


def bh(p, storey=False):
    """Benjamini-Hochberg q-values of ``p`` (adaptive with Storey's pi0 if ``storey``)."""
    m = len(p)
    order = np.argsort(p)
    q = np.empty(m)
    q[order] = np.minimum.accumulate((p[order] * m / np.arange(1, m + 1))[::-1])[::-1]
    if storey:
        q = q * min(1.0, (np.sum(p > 0.5) + 1) / (m * 0.5))
    return np.minimum(q, 1.0)


def scores(rule, h):
    """z of one data set (rows of one seed) under ``rule``; NaN where se is 0."""
    value, se, share = (h[c].to_numpy() for c in ("value", "se", "share"))
    scale, shift, pooled, empirical = np.ones(len(value)), 0.0, se, 0
    for part in rule.split("+"):
        name, _, arg = part.partition(":")
        if name == "f":
            scale = np.full(len(value), np.sqrt(float(arg)))
        elif name == "share":
            scale = np.sqrt(1.0 + float(arg) * np.sqrt(share))
        elif name == "semodel":
            ok = se > 0
            b, a = np.polyfit(share[ok], se[ok] ** 2, 1)
            floor = np.min(se[ok] ** 2)
            pooled = np.where(ok, np.sqrt(np.maximum(a + b * share, floor)), 0.0)
            scale = np.full(len(value), np.sqrt(float(arg)))
        elif name == "shift":
            shift = float(arg)
        elif name == "cshift":  # C * max(0, 1 - s / S): the centre fades with the share
            c, top = (float(x) for x in arg.split(":"))
            shift = c * np.maximum(0.0, 1.0 - share / top)
        elif name == "emp":
            empirical = int(arg)
        elif name != "storey":
            raise ValueError(f"unknown rule part {part!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, value / (scale * pooled) + shift, np.nan)
    used = z[~np.isnan(z)]
    if empirical and len(used) >= empirical:
        # Efron's empirical null from the bulk of the data set's own scores: the median
        # and the interquartile range's normal-equivalent sd of the raw z (no factor)
        raw = np.where(se > 0, value / np.where(se > 0, se, 1.0), np.nan)
        r = raw[~np.isnan(raw)]
        q1, med, q3 = np.quantile(r, [0.25, 0.5, 0.75])
        z = (raw - med) / ((q3 - q1) / 1.349)
    return z


def judge(df, rules):
    out = []
    for (design, method), g in df.groupby(["design", "method"], sort=False):
        for rule in rules:
            runs = []
            for _, h in g.groupby("seed"):
                z = scores(rule, h)
                p = np.where(np.isnan(z), 1.0, stats.t.sf(z, h["dof"].iloc[0]))
                runs.append((z, p, bh(p, "storey" in rule.split("+")) < ALPHA, h))
            outcome = selection_outcome(runs)
            del outcome["noise z"]
            out.append({"design": design, "method": method, "rule": rule,
                        "runs": g["seed"].nunique()} | outcome)
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="+", help="CSVs written by oob_factor.py --out")
    ap.add_argument("--rules", default="f:1.6,share:2,f:1.6+storey,share:2+storey")
    ap.add_argument("--wide", action="store_true",
                    help="one row per design, a 'power / FDR; p<.05 / z sd' cell per rule")
    args = ap.parse_args(argv)
    df = pd.concat([pd.read_csv(f) for f in args.tables], ignore_index=True)
    table = judge(df, args.rules.split(","))
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    pd.set_option("display.max_colwidth", 40)
    if not args.wide:
        print(table.round(3).to_string(index=False))
        return
    cell = table.apply(lambda r: (f"{r['power']:.2f} / {r['FDR']:.2f}; "
                                  f"{r['noise p<.05']:.3f} / {r['z sd']:.2f}")
                       .replace("nan", "-"), axis=1)
    wide = table.assign(cell=cell).pivot(index="design", columns="rule", values="cell")
    rules = args.rules.split(",")
    print("| design | " + " | ".join(rules) + " |")
    print("|---" * (len(rules) + 1) + "|")
    for design, row in wide[rules].iterrows():
        print(f"| {design} | " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()

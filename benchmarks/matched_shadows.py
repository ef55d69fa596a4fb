"""Matched shadow centres for the forest's out-of-bag screening (issue 32): each real
feature k gets its null centre from shadows that share its marginal distribution
(row-permuted copies of column k, fitted with the forest), so that under the null k and
its copies are exchangeable and the centre follows the use a null feature of that kind
would have, not the real feature's own use.

Collection (``--out``): ``ImportanceSelector`` with the screening forest (RandomForest,
100 trees, ``max_features="sqrt"``, ``min_samples_leaf=10``, out of bag, its default
measure, 50 row blocks) is fitted once per data set and number of copies c (``--copies``):
c = 0 with ``null="t"`` (today's default), c >= 1 with ``null="shadow"`` and
``n_shadows = c x n_features`` (c whole copies of X appended, as the selector's
``_with_shadows`` does). ``OOB_VARIANCE_FACTOR`` is patched to 1 in this process; every
column's (real and shadow) value, raw standard error, t degrees of freedom and share of
the screening forest's splits are kept (one row per column: ``copy`` -1 for a real
column, else the copy's index; ``source`` the real column it copies), with the fit's CPU
seconds (``time.process_time``, the whole ``fit``, including the refit of the returned
estimator on the real columns that the shadow null needs).

Rules, judged afterwards per data set (``--summarise``; z_k = value / se, z_{k,c} the
same for k's copies, F the squared variance factor):

- ``t:F``: today's test, p = P(T > z_k / sqrt(F)) (c = 0 fits: the default at F = 1.6);
- ``pooled:F``: the existing shadow null on the same fits (z / sqrt(F) less the mean of
  all shadows' z / sqrt(F), variance 1 + s^2 / S);
- ``matched:F``: (a) d_k = (z_k - mean_c z_{k,c}) / sqrt(F), p = P(T > d_k / sqrt(1 +
  1/c)) (the variance of d under exchangeability); ``matchedw``: the same with the null
  spread estimated from the copies' within-feature variance pooled over the features
  (c >= 2), d_k / (s_w sqrt(1 + 1/c));
- ``smooth:U`` (b): a centre m(u) = a + b u least-squares fitted over all shadows' raw z
  against a usage covariate u of the shadow (``U`` = ``logshare``: log of its split share;
  ``logse``: log of its standard error), evaluated at k's own copies (mean of m over
  them, not at k's own usage); z_k standardised by the shadows' residual sd s: p =
  P(T > (z_k - m_k) / (s sqrt(1 + h_k))), h_k the fitted centre's relative variance;
- ``smoothf:U:F`` (c): the same on z / sqrt(F) with the t reference's unit spread:
  p = P(T > (z_k / sqrt(F) - m_k) / sqrt(1 + h_k s^2)).

A real feature the forest never used has p = 1; a copy never used has no z (left out;
if all of k's copies are unused, its centre is that of all used shadows). Then
Benjamini-Hochberg q < 0.05. Per design, copies and rule: power, FDR (the correlated
design's weak features counted false, and "FDR all-rel." counting them relevant), share
of runs with a false selection, the noise features' p < 0.05 fraction, z mean and sd
(the score the p-value is from), CPU seconds per fit.

    python benchmarks/matched_shadows.py --designs 0,1,2,3,4,5,6,7,8,9 \
        --nulls "rare null,skewed null,strobl null" --copies 0,1,2,5 --reps 10 --out ms.csv
    python benchmarks/matched_shadows.py --designs 5,8 --copies 5 --scale-mtry --out mt.csv
    python benchmarks/matched_shadows.py --summarise ms.csv mt.csv --wide \
        --columns "t:1.6,smooth:logshare c=5,smooth:logshare c=5 mtry/"

``--scale-mtry``: the widened forest draws the fraction 1 / sqrt(p) of its columns per
split (as many real candidates as without shadows; columns "... mtry/"). The wide summary
ends with each column's misses of issue 32's criteria (FDR <= 0.05 on every design, the
correlated one by its all-relevant count; the pure and skewed nulls' p < .05 in [0.03,
0.06] and z sd in [0.9, 1.1]; power not below ``t:1.6``'s).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import screening  # noqa: E402
from oob_factor import ALPHA, NULLS, recording, selection_outcome  # noqa: E402

import treeimp  # noqa: E402
import treeimp.explainer as explainer_module  # noqa: E402
import treeimp.selector as selector_module  # noqa: E402
from treeimp.measures.shadow_null import MIN_USED_SHADOWS  # noqa: E402
from treeimp.results.importances import bh_qvalues  # noqa: E402

RULES = ("t:1.6,pooled:1.6,matched:1.6,matched:1,matchedw,smooth:logshare,smooth:logse,"
         "smoothf:logshare:1.6,smoothf:logse:1.6")


def fit_one(X, y, task, seed, copies, leaf, scale_mtry=False):
    """One selector fit; a row per column of the (widened) matrix. ``scale_mtry``: the
    forest draws the fraction 1 / sqrt(p) of the widened matrix's columns at each split
    (int(sqrt(p)) real columns in expectation, as without shadows) instead of sqrt of the
    widened width."""
    p = X.shape[1]
    rf = screening.forest(task, seed, 100).set_params(min_samples_leaf=leaf)
    if scale_mtry:
        rf.set_params(max_features=1.0 / np.sqrt(p))
    kept = {}
    original = selector_module._shadow_referenced

    def keep(res, method, n_real):  # the widened result, before the shadows are dropped
        kept["res"] = res
        return original(res, method, n_real)

    kw = {"null": "t"} if copies == 0 else {"null": "shadow", "n_shadows": copies * p}
    sel = treeimp.ImportanceSelector(rf, random_state=seed, **kw)
    screened = []
    selector_module._shadow_referenced = keep
    t = time.process_time()
    try:
        with warnings.catch_warnings(), recording(screened):
            warnings.simplefilter("ignore", UserWarning)  # "kept no feature", few shadows
            sel.fit(X, y)
    finally:
        selector_module._shadow_referenced = original
    seconds = time.process_time() - t
    res, m = kept.get("res", sel.importances_), sel.method_
    width = len(res.table)
    counts = np.zeros(width)
    for tree in screened[0].estimators_:
        used = tree.tree_.feature[tree.tree_.feature >= 0]
        counts += np.bincount(used, minlength=width)
    col = np.arange(width)
    # the selector's own p-values of the real columns (the factor patched to 1), for the
    # check in judge: the t null at c = 0, the pooled shadow null at c >= 1
    p_sel = np.full(width, np.nan)
    p_sel[:p] = sel.importances_.pvalues[m].to_numpy()
    return pd.DataFrame({
        "column": col, "source": col % p, "copy": col // p - 1, "method": m,
        "value": res.table[m].to_numpy(), "se": res.stderr[m].to_numpy(),
        "dof": res.dof, "share": counts / counts.sum(), "cpu": seconds, "p_sel": p_sel,
        "used_copies": copies})


def collect(args):
    explainer_module.OOB_VARIANCE_FACTOR = 1.0
    # a first, untimed fit: numba's compilation is not counted in any fit's CPU seconds
    X, y, _, task = screening.pure_null(200, np.random.default_rng(0))
    fit_one(X, y, task, 0, 1, args.leaf)
    names = list(screening.DESIGNS)
    jobs = [(names[d], *screening.DESIGNS[names[d]], d)
            for d in (int(x) for x in args.designs.split(",") if x)]
    jobs += [(name, *NULLS[name]) for name in (x for x in args.nulls.split(",") if x)]
    first = True
    for copies in (int(c) for c in args.copies.split(",")):
        for name, make, n, d in jobs:
            for r in range(args.first_rep, args.first_rep + args.reps):
                seed = 100 * d + r
                X, y, relevant, task = make(n, np.random.default_rng(seed))
                rows = fit_one(X, y, task, seed, copies, args.leaf, args.scale_mtry)
                weak = screening.WEAKLY_RELEVANT.get(name, np.array([], dtype=int))
                src = rows["source"].to_numpy()
                rows.insert(0, "design", name)
                rows.insert(1, "seed", seed)
                rows.insert(2, "copies", copies)
                rows["mtry"] = "scaled" if args.scale_mtry else "sqrt"
                rows["relevant"] = np.isin(src, relevant)
                rows["weak"] = np.isin(src, weak)
                rows.to_csv(args.out, mode="w" if first else "a", header=first, index=False)
                first = False
                print(name, copies, seed, round(rows["cpu"].iloc[0], 2), flush=True)


def raw_z(value, se):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, value / np.where(se > 0, se, 1.0), np.nan)


def smooth_centre(zs, us, groups, n_real):
    """Least-squares line z = a + b u over the shadows with finite z and u; the centre of
    each real feature (mean of the line over its own copies' u; where none is finite, the
    line's mean over all shadows), the relative variance h of that centre and the
    residual sd."""
    ok = np.isfinite(zs) & np.isfinite(us)
    A = np.column_stack([np.ones(ok.sum()), us[ok]])
    coef, *_ = np.linalg.lstsq(A, zs[ok], rcond=None)
    resid = zs[ok] - A @ coef
    s = np.sqrt(resid @ resid / max(ok.sum() - 2, 1))
    cov = np.linalg.pinv(A.T @ A)
    centre, h = np.empty(n_real), np.empty(n_real)
    for k in range(n_real):
        mine = ok & (groups == k)
        a = (np.column_stack([np.ones(mine.sum()), us[mine]]).mean(axis=0) if mine.any()
             else A.mean(axis=0))
        centre[k] = a @ coef
        h[k] = a @ cov @ a
    return centre, h, s


def scores(rule, h):
    """(z the p-value is from, p) of one data set's real features under ``rule``."""
    real = h[h["copy"] < 0]
    sh = h[h["copy"] >= 0]
    dof = h["dof"].iloc[0]
    z = raw_z(real["value"].to_numpy(), real["se"].to_numpy())
    name, _, arg = rule.partition(":")
    if name == "t":
        d = z / np.sqrt(float(arg))
    else:
        if sh.empty:
            raise ValueError(f"rule {rule!r} needs shadow columns")
        zs = raw_z(sh["value"].to_numpy(), sh["se"].to_numpy())
        src = sh["source"].to_numpy()
        c = int(sh["copy"].max()) + 1
        fin = np.isfinite(zs)
        if name == "pooled":
            f = np.sqrt(float(arg))
            m, s = np.mean(zs[fin] / f), np.std(zs[fin] / f, ddof=1)
            d = (z / f - m) / np.sqrt(1 + s**2 / fin.sum())
        elif name in ("matched", "matchedw"):
            centre = np.array([np.mean(zs[fin & (src == k)]) if (fin & (src == k)).any()
                               else np.mean(zs[fin]) for k in range(len(z))])
            if name == "matched":
                d = (z - centre) / np.sqrt(float(arg)) / np.sqrt(1 + 1 / c)
            else:
                if c < 2:
                    return None
                dev = zs - centre[src]
                counts = np.bincount(src[fin], minlength=len(z))
                s_w = np.sqrt(np.sum(dev[fin] ** 2) / max(np.sum(np.maximum(counts - 1, 0)),
                                                          1))
                d = (z - centre) / (s_w * np.sqrt(1 + 1 / c))
        elif name in ("smooth", "smoothf"):
            cov_name, _, f = arg.partition(":")
            f = np.sqrt(float(f)) if f else 1.0
            with np.errstate(divide="ignore"):
                u = (np.log(sh["share"].to_numpy()) if cov_name == "logshare"
                     else np.log(sh["se"].to_numpy()))
            u = np.where(np.isfinite(u), u, np.nan)
            centre, hk, s = smooth_centre(zs / f, u, src, len(z))
            if name == "smooth":
                d = (z - centre) / (s * np.sqrt(1 + hk))
            else:
                d = (z / f - centre) / np.sqrt(1 + hk * s**2)
        else:
            raise ValueError(f"unknown rule {rule!r}")
    p = np.where(np.isnan(d), 1.0, stats.t.sf(d, dof))
    return d, p, real


def check_selector(df):
    """With the selector's own p-values in the table (``p_sel``): the rule t:1 (c = 0)
    or pooled:1 (c >= 1) recomputes them; an AssertionError names the first data set
    where it does not (fits whose shadows were too few fell back to the t null: left
    out)."""
    for (design, mtry, copies, seed), h in df.groupby(["design", "mtry", "copies", "seed"]):
        real = h[h["copy"] < 0]
        if "p_sel" not in h or real["p_sel"].isna().all():
            continue
        zs = raw_z(h.loc[h["copy"] >= 0, "value"].to_numpy(),
                   h.loc[h["copy"] >= 0, "se"].to_numpy())
        if copies > 0 and np.isfinite(zs).sum() < MIN_USED_SHADOWS:
            continue
        _, p, _ = scores("t:1" if copies == 0 else "pooled:1", h)
        if not np.allclose(p, real["p_sel"].to_numpy(), atol=1e-9):
            raise AssertionError(f"recomputed p-values differ: {design} {mtry} c={copies} "
                                 f"seed {seed}")


def judge(df, rules):
    check_selector(df)
    out = []
    for (design, mtry, copies), g in df.groupby(["design", "mtry", "copies"], sort=False):
        for rule in rules:
            if (copies == 0) != rule.startswith("t:"):
                continue
            runs = []
            for _, h in g.groupby("seed"):
                got = scores(rule, h)
                if got is None:
                    break
                d, p, real = got
                runs.append((d, p, bh_qvalues(p) < ALPHA, real))
            if not runs or len(runs) < g["seed"].nunique():
                continue
            outcome = selection_outcome(runs)
            del outcome["noise z"]
            out.append({"design": design, "mtry": mtry, "copies": copies, "rule": rule,
                        "runs": g["seed"].nunique()} | outcome
                       | {"CPU s": g.groupby("seed")["cpu"].first().mean()})
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--designs", default="", help="screening.py design positions, e.g. 0,4,5")
    ap.add_argument("--nulls", default="", help="comma list of: " + ", ".join(NULLS))
    ap.add_argument("--copies", default="0,1,2,5", help="shadow copies per fit (0: t null)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--first-rep", type=int, default=0)
    ap.add_argument("--leaf", type=int, default=10)
    ap.add_argument("--scale-mtry", action="store_true",
                    help="max_features = 1/sqrt(p) of the widened matrix (see fit_one)")
    ap.add_argument("--out", default=None, help="CSV written row by row (one per column)")
    ap.add_argument("--summarise", default=None, nargs="+", help="CSVs written by --out")
    ap.add_argument("--rules", default=RULES)
    ap.add_argument("--columns", default=None,
                    help="with --wide: only these columns, e.g. 't:1.6,smooth:logshare c=5'")
    ap.add_argument("--wide", action="store_true",
                    help="one row per design, a 'power / FDR; p<.05 / z sd' cell per rule")
    args = ap.parse_args(argv)
    if not args.summarise:
        if not args.out:
            ap.error("--out is needed to collect")
        collect(args)
        return
    df = pd.concat([pd.read_csv(f) for f in args.summarise], ignore_index=True)
    if "mtry" not in df:
        df["mtry"] = "sqrt"
    df["mtry"] = df["mtry"].fillna("sqrt")
    # the t null's fits (c = 0) have no shadows: the same under either mtry
    df = df[~((df["copies"] == 0) & (df["mtry"] != "sqrt"))]
    table = judge(df, args.rules.split(","))
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    if not args.wide:
        print(table.round(3).to_string(index=False))
        return
    table["col"] = (table["rule"] + " c=" + table["copies"].astype(str)
                    + np.where(table["mtry"] == "scaled", " mtry/", ""))
    table["col"] = table["col"].where(table["copies"] > 0, table["rule"])
    cell = table.apply(lambda r: (f"{r['power']:.2f} / {r['FDR']:.2f}"
                                  + (f" ({r['FDR all-rel.']:.2f})"
                                     if r["FDR all-rel."] != r["FDR"] else "")
                                  + f"; {r['noise p<.05']:.3f} / {r['z sd']:.2f}")
                       .replace("nan", "-"), axis=1)
    wide = table.assign(cell=cell).pivot(index="design", columns="col", values="cell")
    wide = wide.reindex(list(dict.fromkeys(table["design"])))
    cols = list(dict.fromkeys(table["col"]))
    if args.columns:
        cols = [c for c in args.columns.split(",") if c in cols]
        table = table[table["col"].isin(cols)]
    print("| design | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for design, row in wide[cols].iterrows():
        print(f"| {design} | " + " | ".join(row.fillna("")) + " |")
    cpu = table.pivot_table(index="design", columns=["mtry", "copies"], values="CPU s",
                            aggfunc="first")
    print(cpu.round(2).to_string())
    for _, r in verdict(table).iterrows():
        print(f"{r['rule']}: {r['fails']} misses{': ' + r['which'] if r['fails'] else ''}")


def verdict(table):
    """Per rule column: the study's criteria. FDR <= 0.05 on every design (the all-relevant
    count on the correlated design), the pure and skewed nulls' noise p < .05 in [0.03,
    0.06] and z sd in [0.9, 1.1], power not below today's (``t:1.6``) on any design."""
    base = table[table["rule"] == "t:1.6"].set_index("design")["power"]
    out = []
    for col, g in table.groupby("col", sort=False):
        fails = []
        for _, r in g.iterrows():
            fdr = r["FDR all-rel."] if r["design"] == "correlated + row ID" else r["FDR"]
            if fdr > 0.05 + 1e-9:
                fails.append(f"FDR {r['design']} {fdr:.2f}")
            if r["design"] in ("pure null", "skewed null") and not (
                    0.03 - 1e-9 <= r["noise p<.05"] <= 0.06 + 1e-9
                    and 0.9 - 1e-9 <= r["z sd"] <= 1.1 + 1e-9):
                fails.append(f"band {r['design']} {r['noise p<.05']:.3f}/{r['z sd']:.2f}")
            if r["design"] in base and r["power"] < base[r["design"]] - 1e-9:
                fails.append(f"power {r['design']} {r['power']:.2f}<{base[r['design']]:.2f}")
        out.append({"rule": col, "fails": len(fails), "which": "; ".join(fails)})
    return pd.DataFrame(out)


if __name__ == "__main__":
    main()

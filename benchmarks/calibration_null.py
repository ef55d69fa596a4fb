"""Calibration of the default screening on three null designs of the screening study
(issue 32): how far the noise features' p-values are from uniform.

Designs (benchmarks/screening.py, with that study's seeds, 100 x design position +
repetition):

- "pure null": 20 noise features of mixed kinds (continuous, binary, 20 levels, a row
  ID), y independent with 30% positives, n = 800;
- "rare null": the rare-positive design's 30 normal features (the same X as
  ``rare_positives`` for the same seed), y independent of them with 4% positives,
  n = 2,000;
- "skewed regression null": the skewed design's 20 normal features, y drawn as there
  (exp(0.3 sum of five normals + 0.6 eps) + 1000) from five unobserved normal variables,
  so independent of every feature, n = 1,000 (regressors for it).

Settings, each the default screening of its model kind (``ImportanceSelector``):

- forest out of bag: the screening forest (RandomForest, 100 trees, ``max_features=
  "sqrt"``, ``min_samples_leaf=10``), ``explain(oob=True)``;
- boosting cross-fitted: XGBoost (100 rounds, depth 3, learning rate 0.05, subsample
  0.8), ``cross_explain`` with 5 folds.

Each with ``mdi_oob_centered`` (the default screening measure of both on classification)
and ``ufi``. Per design, setting and measure, pooled over repetitions and noise
features: the fraction with p < 0.05 and p < 0.01, the mean and standard deviation of
z = importance / standard error (the library's, with its variance factor), and the
share of repetitions in which Benjamini-Hochberg at q < 0.05 kept any feature (FWER).
Targets (issue 32): fraction p < 0.05 in [0.03, 0.06], z sd in [0.9, 1.1].

With ``--selector`` the settings are ``ImportanceSelector`` itself (the same forest and
booster; the booster cross-fitted with ``cv=5``), its default measure, with ``null="t"``
(the t reference) and ``null="shadow"`` (the shadow-feature fit), whose shadows give
two rows: "null=shadow-centred" (the library's: z - m, m the shadows' mean z-score, t
reference) and "null=shadow" (the pooled normal null first measured: (z - m) / (s sqrt(1
+ 1/S)), t(S - 1)); z is the score the p-value is computed from ((z - m) / sqrt(1 +
s^2 / S) for the library's shadow null, m, s and S the shadows' mean, sd and count).

``--n-blocks N`` sets the selector's ``n_blocks`` (default: its own), and
``--forest-class-weight W`` its forest's ``class_weight``. ``--selector-methods
m1,m2`` runs only the cross-fitted XGBoost selector with its default null, once per
named measure (``--selector-null t``: with the t null; ``default``: the model's default
measure).

    python benchmarks/calibration_null.py --reps 10   # the table in benchmarks/README.md
    python benchmarks/calibration_null.py --selector --reps 10   # the selector's nulls
    python benchmarks/calibration_null.py --quick     # one small repetition
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

from screening import (  # noqa: E402
    DESIGNS,
    add_selector_options,
    boosting,
    pure_null,
    rare_null,
    shadow_centred_pvalues,
    shadow_scaled_pvalues,
    skewed_null,
)

import treeimp  # noqa: E402
from treeimp.results.importances import bh_qvalues  # noqa: E402

MEASURES = ("mdi_oob_centered", "ufi")
ALPHA = 0.05
# (name, generator, n, the screening study's design whose seeds it uses)
NULL_DESIGNS = (("pure null", pure_null, 800, "pure null"),
                ("rare null (4%)", rare_null, 2000, "rare positives (4%)"),
                ("skewed regression null", skewed_null, 1000, "skewed y far from 0"))


def screening_forest(seed, trees=100, leaf=10, task="classification"):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    return cls(n_estimators=trees, max_features="sqrt", min_samples_leaf=leaf,
               random_state=seed, n_jobs=1)


def one_data_set(name, make, n, seed, cfg):
    """Rows (one per noise feature, setting and measure) of one null data set."""
    X, y, _, task = make(n, np.random.default_rng(seed))
    rows = []
    t = time.perf_counter()
    rf = screening_forest(seed, cfg["trees"], task=task).fit(X, y)
    res = treeimp.explain(rf, X, y, oob=True, methods=MEASURES, random_state=seed, n_jobs=1)
    rows += _rows(res, name, seed, "forest OOB (screening forest)",
                  time.perf_counter() - t)
    t = time.perf_counter()
    res = treeimp.cross_explain(boosting(task, seed, cfg["rounds"]), X, y, cv=5,
                                methods=MEASURES, random_state=seed, n_jobs=1)
    rows += _rows(res, name, seed, "XGB cross-fitted", time.perf_counter() - t)
    return rows


def selector_data_set(name, make, n, seed, cfg):
    """Rows of one null data set for ``ImportanceSelector`` with each null."""
    import warnings

    from treeimp.measures.shadow_null import shadow_null, zscores

    X, y, _, task = make(n, np.random.default_rng(seed))
    rows = []
    if cfg.get("selector_methods"):
        return selector_methods_data_set(name, X, y, task, seed, cfg)
    rf = screening_forest(seed, cfg["trees"], task=task)
    if cfg.get("forest_class_weight") and task == "classification":
        rf.set_params(class_weight=cfg["forest_class_weight"])
    for setting, est in (("selector, forest OOB", rf),
                         ("selector, XGB cross-fitted",
                          boosting(task, seed, cfg["rounds"]))):
        for null in ("t", "shadow"):
            t = time.process_time()
            sel = treeimp.ImportanceSelector(est, null=null, random_state=seed,
                                             n_blocks=cfg["n_blocks"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
                sel.fit(X, y)
            seconds = time.process_time() - t
            res, m = sel.importances_, sel.method_
            value, se = res.table[m].to_numpy(), res.stderr[m].to_numpy()
            z = zscores(value, se)
            if null == "t":
                variants = [(f"{m} null=t", z, res.pvalues[m].to_numpy())]
            else:  # both forms of the shadow null (screening.py) from the same fit
                zs = sel.shadow_zscores_
                mean, sd, count = shadow_null(zs)
                variants = [(f"{m} null=shadow", (z - mean) / (sd * np.sqrt(1 + 1 / count)),
                             shadow_scaled_pvalues(value, se, zs)),
                            (f"{m} null=shadow-centred",
                             (z - mean) / np.sqrt(1 + sd**2 / count),
                             shadow_centred_pvalues(value, se, zs, res.dof))]
            for label, zz, pp in variants:
                any_kept = bool((bh_qvalues(pp) < ALPHA).any())
                for j in range(len(zz)):
                    rows.append({"design": name, "seed": seed, "setting": setting,
                                 "measure": label, "feature": j, "z": zz[j], "p": pp[j],
                                 "dof": res.dof, "any_kept": any_kept, "seconds": seconds})
    return rows


def selector_methods_data_set(name, X, y, task, seed, cfg):
    """Rows of one null data set for the cross-fitted XGBoost ``ImportanceSelector`` with
    its default null (or ``cfg["selector_null"]``), once per measure of
    ``cfg["selector_methods"]``; z is the score the p-value is computed from (z - m under
    the shadow null)."""
    import warnings

    from treeimp.measures.shadow_null import zscores

    rows = []
    for m in cfg["selector_methods"]:
        t = time.process_time()
        sel = treeimp.ImportanceSelector(boosting(task, seed, cfg["rounds"]),
                                         method=None if m == "default" else m,
                                         random_state=seed, n_blocks=cfg["n_blocks"],
                                         null=cfg.get("selector_null"),
                                         cv=cfg.get("selector_cv") or 5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
            sel.fit(X, y)
        seconds = time.process_time() - t
        res, m = sel.importances_, sel.method_
        z = zscores(res.table[m].to_numpy(), res.stderr[m].to_numpy())
        if sel.shadow_null_ is not None:  # the score shadow_pvalues refers to t
            mean, sd, count = sel.shadow_null_
            z = (z - mean) / np.sqrt(1 + sd**2 / count)
        p = res.pvalues[m].to_numpy()
        any_kept = bool((bh_qvalues(p) < ALPHA).any())
        for j in range(len(z)):
            rows.append({"design": name, "seed": seed, "setting": "selector, XGB cross-fitted",
                         "measure": f"{m} null={sel.null_}", "feature": j, "z": z[j],
                         "p": p[j], "dof": res.dof, "any_kept": any_kept,
                         "seconds": seconds})
    return rows


def _rows(res, design, seed, setting, seconds):
    rows = []
    for m in MEASURES:
        z = (res.table[m] / res.stderr[m]).to_numpy()
        p = res.pvalues[m].to_numpy()
        any_kept = bool((res.qvalues[m].to_numpy() < ALPHA).any())
        for j in range(len(z)):
            rows.append({"design": design, "seed": seed, "setting": setting, "measure": m,
                         "feature": j, "z": z[j], "p": p[j], "dof": res.dof,
                         "any_kept": any_kept, "seconds": seconds})
    return rows


def centred(df):
    """The rows of ``df`` with issue 32's candidate applied (screening.centred_pvalues):
    each data set's z-scores less their median over its features, p from t with the
    result's degrees of freedom, BH recomputed; measures labelled "[median-centred]"."""
    parts = []
    for _, g in df.groupby(["design", "seed", "setting", "measure"], sort=False):
        g = g.copy()
        z = g["z"].to_numpy()
        finite = np.isfinite(z)
        g["z"] = z - (np.median(z[finite]) if finite.any() else 0.0)
        p = stats.t.sf(g["z"].to_numpy(), g["dof"].to_numpy())
        g["p"] = np.where(np.isnan(z), 1.0, p)  # a never-used feature (0 / 0) keeps p = 1
        g["any_kept"] = bool((bh_qvalues(g["p"].to_numpy()) < ALPHA).any())
        g["measure"] = g["measure"] + " [median-centred]"
        parts.append(g)
    return pd.concat(parts, ignore_index=True)


def summarise(df, centre=False):
    if centre:
        df = pd.concat([df, centred(df)], ignore_index=True)
    g = df.groupby(["design", "setting", "measure"], sort=False)
    out = g.agg(reps=("seed", "nunique"), noise=("z", "size"),
                p05=("p", lambda p: np.mean(p < 0.05)), p01=("p", lambda p: np.mean(p < 0.01)),
                z_mean=("z", lambda z: np.nanmean(z[np.isfinite(z)])),
                z_sd=("z", lambda z: np.std(z[np.isfinite(z)], ddof=1)),
                seconds=("seconds", "mean"))
    fwer = (df.groupby(["design", "setting", "measure", "seed"], sort=False)["any_kept"]
            .first().groupby(["design", "setting", "measure"], sort=False).mean())
    out["FWER"] = fwer
    return out.reset_index()


def to_markdown(table):
    cols = ["design", "setting", "measure", "reps", "noise", "p05", "p01", "z_mean", "z_sd",
            "FWER", "seconds"]
    head = ("| design | setting | measure | reps | noise z | p < .05 | p < .01 | z mean | "
            "z sd | FWER (BH .05) | s per fit |")
    lines = [head, "|" + "|".join("---" for _ in cols) + "|"]
    for _, r in table.iterrows():
        lines.append(f"| {r.design} | {r.setting} | {r.measure} | {r.reps} | {r.noise} | "
                     f"{r.p05:.3f} | {r.p01:.3f} | {r.z_mean:.2f} | {r.z_sd:.2f} | "
                     f"{r.FWER:.2f} | {r.seconds:.2f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small repetition")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--first-rep", type=int, default=0)
    ap.add_argument("--designs", default=None,
                    help=f"comma-separated null design numbers (0-{len(NULL_DESIGNS) - 1})")
    ap.add_argument("--centre-null", action="store_true",
                    help="also summarise the median-centred z-scores (issue 32's candidate, "
                         "screening.centred_pvalues)")
    ap.add_argument("--selector", action="store_true",
                    help="ImportanceSelector with null='t' and null='shadow' instead of "
                         "explain / cross_explain with both measures")
    add_selector_options(ap)
    ap.add_argument("--selector-cv", type=int, default=None,
                    help="with --selector-methods: the selector's cv (default 5)")
    ap.add_argument("--out", default=None, help="CSV of every noise z-score")
    ap.add_argument("--summarise", default=None,
                    help="comma-separated CSVs written by --out: print their table only")
    args = ap.parse_args(argv)
    if args.summarise:
        df = pd.concat([pd.read_csv(f) for f in args.summarise.split(",")],
                       ignore_index=True)
        table = summarise(df, args.centre_null)
        print(to_markdown(table))
        return table
    cfg = ({"reps": 1, "scale": 0.25, "trees": 30, "rounds": 20} if args.quick else
           {"reps": args.reps, "scale": 1.0, "trees": 100, "rounds": 100})
    cfg["n_blocks"] = args.n_blocks
    cfg["forest_class_weight"] = args.forest_class_weight
    cfg["selector_methods"] = (args.selector_methods.split(",") if args.selector_methods
                               else None)
    cfg["selector_null"] = args.selector_null
    cfg["selector_cv"] = args.selector_cv
    designs = NULL_DESIGNS
    if args.designs:
        designs = [NULL_DESIGNS[int(i)] for i in args.designs.split(",")]
    rows = []
    t0 = time.perf_counter()
    for name, make, n, seeds_of in designs:
        d = list(DESIGNS).index(seeds_of)
        n = max(200, int(n * cfg["scale"]))
        for r in range(args.first_rep, args.first_rep + cfg["reps"]):
            one = selector_data_set if args.selector else one_data_set
            rows += one(name, make, n, 100 * d + r, cfg)
            print(f"{name} rep {r}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                  flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    table = summarise(df, args.centre_null)
    print(to_markdown(table))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, treeimp {treeimp.__version__}")
    return table


if __name__ == "__main__":
    main()

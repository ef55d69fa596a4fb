"""The forest's out-of-bag variance factor under the selector's default screening (issue
32): what each factor would give on the screening study's designs and its null designs.

``ImportanceSelector`` with the screening forest (RandomForest, ``max_features="sqrt"``,
100 trees, ``min_samples_leaf=10`` unless ``--trees`` / ``--leaf``), its default measure
and t null, is fitted once per data set with ``OOB_VARIANCE_FACTOR`` set to 1 (the
module-level name ``treeimp.explainer`` reads at each call, patched in this process only).
Every feature's value, standard error without the factor and the t degrees of freedom
are kept, so that the selection under any factor f is computed afterwards exactly as the
selector computes it: z = value / (f se), one-sided p from t(dof), Benjamini-Hochberg
q < 0.05 (a standard error of 0 gives p = 1). With f = 1 the recomputed p-values are
checked against the selector's own; with f = sqrt(1.6) the selections are those of the
library's default.

Designs: those of benchmarks/screening.py (``--designs``, positions as there, seeds 100 x
position + repetition) and the null designs (``--nulls``): "rare null" and "skewed null"
as in benchmarks/calibration_null.py (the seeds of the rare-positive and skewed designs),
"strobl null" (Strobl et al.'s design with y permuted, Strobl's seeds).

Per design and factor: power, FDR (the correlated design's also counting x3..x9 as
relevant, screening.py's all-relevant count), the share of runs with any false selection,
and over the noise features the fraction with p < 0.05 and the z-scores' mean and
standard deviation ("sd x factor": the z sd without factor, i.e. the factor that would
give z sd 1). A factor "share:A" is the per-feature candidate f_k^2 = 1 + A sqrt(s_k), s_k
the feature's share of all splits of the screening forest (the first model the selector
explains: on the rare-positive designs the class-balanced clone, not the returned forest);
the table (``--out``) also holds the number of its trees that split on the feature
("in_trees"). benchmarks/oob_null_rules.py judges other tests on the same tables.
``--share-bins`` prints the noise z sd without factor by the feature's share of the
forest's splits (quartiles within each design).

    python benchmarks/oob_factor.py --designs 0,1,2,3,4,5,6,7,8,9 \
        --nulls "rare null,skewed null,strobl null" --reps 10 --out raw.csv
    python benchmarks/oob_factor.py --summarise raw.csv --factors 1.6,1.4,1.2,1
"""

from __future__ import annotations

import argparse
import contextlib
import math
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

import treeimp  # noqa: E402
import treeimp.explainer as explainer_module  # noqa: E402
import treeimp.selector as selector_module  # noqa: E402
from treeimp.results.importances import bh_qvalues  # noqa: E402

ALPHA = 0.05


def strobl_null(n, rng):
    """Strobl et al.'s power design with y permuted: every feature is noise."""
    X, y, _, task = screening.strobl_power(n, rng)
    return X, rng.permutation(y), np.array([], dtype=int), task


# name: (generator, n, the screening design whose seeds it uses)
NULLS = {
    "rare null": (screening.rare_null, 2000, 6),
    "skewed null": (screening.skewed_null, 1000, 9),
    "strobl null": (strobl_null, 500, 0),
}


@contextlib.contextmanager
def recording(models):
    """Within the block, every model the selector hands to ``Explainer`` is appended to
    ``models`` (``treeimp.selector.Explainer`` patched in this process only)."""
    original = selector_module.Explainer

    def explainer(model, *a, **k):
        models.append(model)
        return original(model, *a, **k)

    selector_module.Explainer = explainer
    try:
        yield models
    finally:
        selector_module.Explainer = original


def collect(args):
    """One selector fit per data set with the factor set to 1; a row per feature."""
    explainer_module.OOB_VARIANCE_FACTOR = 1.0
    names = list(screening.DESIGNS)
    jobs = [(names[d], *screening.DESIGNS[names[d]], d)
            for d in (int(x) for x in args.designs.split(",") if x)]
    jobs += [(name, *NULLS[name]) for name in (x for x in args.nulls.split(",") if x)]
    rows = []
    for name, make, n, d in jobs:
        for r in range(args.first_rep, args.first_rep + args.reps):
            seed = 100 * d + r
            X, y, relevant, task = make(n, np.random.default_rng(seed))
            rf = screening.forest(task, seed, args.trees).set_params(
                min_samples_leaf=args.leaf)
            t = time.process_time()
            sel = treeimp.ImportanceSelector(rf, null="t", random_state=seed,
                                             n_blocks=args.blocks)
            screened = []
            with warnings.catch_warnings(), recording(screened):
                warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
                sel.fit(X, y)
            seconds = time.process_time() - t
            res, m = sel.importances_, sel.method_
            # each feature's share of the splits of the screening forest (the first model
            # the selector explains: the class-balanced clone where it screens with one),
            # and the number of its trees that split on the feature
            counts = np.zeros(X.shape[1])
            in_trees = np.zeros(X.shape[1])
            for tree in screened[0].estimators_:
                used = tree.tree_.feature[tree.tree_.feature >= 0]
                counts += np.bincount(used, minlength=X.shape[1])
                in_trees += np.bincount(np.unique(used), minlength=X.shape[1])
            weak = screening.WEAKLY_RELEVANT.get(name, np.array([], dtype=int))
            rows.append(pd.DataFrame({
                "design": name, "seed": seed, "feature": np.arange(X.shape[1]),
                "relevant": np.isin(np.arange(X.shape[1]), relevant),
                "weak": np.isin(np.arange(X.shape[1]), weak), "method": m,
                "value": res.table[m].to_numpy(), "se": res.stderr[m].to_numpy(),
                "p1": res.pvalues[m].to_numpy(), "dof": res.dof, "cpu": seconds,
                "share": counts / counts.sum(), "in_trees": in_trees,
                "trees": args.trees, "leaf": args.leaf,
                "blocks": sel.n_blocks_}))
            print(name, seed, m, round(seconds, 2), flush=True)
    return pd.concat(rows, ignore_index=True)


def squared_factor(spec, share):
    """f^2 per feature: a number, or "share:A" for 1 + A sqrt(the feature's split share)."""
    if spec.startswith("share:"):
        return 1.0 + float(spec.split(":")[1]) * np.sqrt(share)
    return np.full(len(share), float(spec))


def selection_outcome(runs):
    """The selections of ``runs``, one (z, p, kept, h) per data set (``h`` its rows of
    the per-feature table, with the "relevant" and "weak" columns): mean power, FDR
    (weak and noise features counted false), "FDR all-rel." (noise only), the share of
    runs with a false selection, and over the noise features' scores the fraction of
    p < .05, the z-scores' mean and sd and their count."""
    zs, ps, power, fdr, fdr_all, any_false = [], [], [], [], [], []
    for z, p, kept, h in runs:
        rel, weak = h["relevant"].to_numpy(), h["weak"].to_numpy()
        noise = ~rel & ~weak
        zs.append(z[noise])
        ps.append(p[noise])
        if rel.any():
            power.append(kept[rel].mean())
        k = kept.sum()
        fdr.append((kept & ~rel).sum() / k if k else 0.0)
        fdr_all.append((kept & noise).sum() / k if k else 0.0)
        any_false.append(bool((kept & ~rel).any()))
    z = np.concatenate(zs)
    z = z[~np.isnan(z)]
    p = np.concatenate(ps)
    return {"power": np.mean(power) if power else np.nan, "FDR": np.mean(fdr),
            "FDR all-rel.": np.mean(fdr_all), "runs with a false": np.mean(any_false),
            "noise p<.05": np.mean(p < 0.05), "z mean": z.mean(), "z sd": z.std(ddof=1),
            "noise z": len(z)}


def judge(df, factors):
    """The selector's outcome under each variance factor (f^2 specs in ``factors``)."""
    out = []
    keys = ["design", "method", "trees", "leaf", "blocks"]
    for key, g in df.groupby(keys, sort=False):
        for spec in factors:
            runs = []
            for _, h in g.groupby("seed"):
                value, se = h["value"].to_numpy(), h["se"].to_numpy()
                f = np.sqrt(squared_factor(spec, h["share"].to_numpy()))
                with np.errstate(divide="ignore", invalid="ignore"):
                    z = np.where(se > 0, value / (f * se), np.nan)
                p = np.where(np.isnan(z), 1.0, stats.t.sf(z, h["dof"].iloc[0]))
                if spec in ("1", "1.0") and not np.allclose(p, h["p1"].to_numpy(), atol=1e-9):
                    raise AssertionError(f"recomputed p-values differ: {key}")
                runs.append((z, p, bh_qvalues(p) < ALPHA, h))
            outcome = selection_outcome(runs)
            out.append(dict(zip(keys, key)) | {"factor": f"sqrt({spec})"} | outcome | {
                "sd x factor": outcome["z sd"] * (math.sqrt(float(spec)) if ":" not in spec
                                                  else np.nan), "CPU s": g["cpu"].mean()})
    return pd.DataFrame(out)


def share_bins(df):
    """Noise z sd without factor by the feature's share of the splits (quartiles)."""
    out = []
    for key, g in df.groupby(["design", "trees", "leaf", "blocks"], sort=False):
        g = g[~g["relevant"] & ~g["weak"] & (g["se"] > 0)]
        q = pd.qcut(g["share"].rank(method="first"), 4, labels=False)
        z = g["value"] / g["se"]
        row = dict(zip(["design", "trees", "leaf", "blocks"], key))
        for b in range(4):
            row[f"q{b + 1} share"] = g["share"][q == b].mean()
            row[f"q{b + 1} z sd"] = z[q == b].std(ddof=1)
        out.append(row)
    return pd.DataFrame(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--designs", default="", help="screening.py design positions, e.g. 0,4,5")
    ap.add_argument("--nulls", default="", help="comma list of: " + ", ".join(NULLS))
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--first-rep", type=int, default=0)
    ap.add_argument("--trees", type=int, default=100)
    ap.add_argument("--leaf", type=int, default=10)
    ap.add_argument("--blocks", type=int, default=None, help="n_blocks (default: selector's)")
    ap.add_argument("--out", default=None, help="CSV of every feature's value and error")
    ap.add_argument("--summarise", default=None, nargs="+", help="CSVs written by --out")
    ap.add_argument("--factors", default="1.6,1.4,1.3,1.2,1",
                    help="squared variance factors to judge; share:A for the per-feature "
                         "1 + A sqrt(split share)")
    ap.add_argument("--share-bins", action="store_true")
    args = ap.parse_args(argv)
    if args.summarise:
        df = pd.concat([pd.read_csv(f) for f in args.summarise], ignore_index=True)
    else:
        df = collect(args)
        if args.out:
            df.to_csv(args.out, index=False)
    pd.set_option("display.width", 250)
    pd.set_option("display.max_rows", 1000)
    table = judge(df, args.factors.split(","))
    print(table.round(3).to_string(index=False))
    if args.share_bins:
        print(share_bins(df).round(3).to_string(index=False))


if __name__ == "__main__":
    main()

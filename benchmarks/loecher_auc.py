"""Loecher's SHAP ranking AUCs on Li et al.'s classification design, with treeimp.

Loecher (2023, "Debiasing SHAP scores in random forests", AStA 108:427-440), Table 1,
reports the AUC of ranking the 5 relevant features of Li et al.'s design (paper 000,
section 4: 50 discrete features, feature j with j + 1 values, P(y = 1) =
logistic(2/5 sum_S x_j / j - 1)) above the 45 noise features: 0.66 for SHAP, 0.73 for
SHAP-oob, 0.89 for shrunk SHAP and 0.10 for MDI. This script computes the same
quantities with treeimp on scikit-learn forests, in the settings of his published code
and in the settings of treeimp's earlier measurement (README, 0.45 / 0.70 / 0.72), and
switches the settings and definitions one at a time between the two.

What his published code does (markusloecher/shrunk_SHAP, commit 4412f01 "AUC done",
2023-06-17, and markusloecher/rfVarImpOOB, CIS_paper/; read, not copied):

- SHAP, SHAP-oob and MDI were imported from his earlier paper (paper 002, CD-MAKE 2022;
  its Table 1, reproduced in his CMStats 2023 slides, has SHAP 0.66, SHAP_in 0.56 and
  SHAP_oob 0.73: "SHAP" is the ordinary TreeSHAP of the training rows over ALL trees,
  not the in-bag part). Paper 002: "In all random forest simulations, we choose mtry=2,
  ntrees=100"; its MDI / MDA companion code (CIS_paper/AUC_simulations.R) uses
  randomForest with n = 1000, ntree = 100, mtry = 3, node size 1, 100 repetitions.
- Shrunk SHAP (0.89) is the "fit two forests" variant of his slides, not the out-of-bag
  one: n = 2000 rows split into halves A and B, one ranger classification forest per half
  (500 trees, mtry = 3, min.node.size 1, bootstrap), phi_in = B's forest's TreeSHAP of
  B's rows (all its trees), phi_out = A's forest's TreeSHAP of B's rows, beta_k = the
  no-intercept least-squares slope of phi_out on phi_in over B's rows, score = mean_i
  |beta_k phi_in,ik|; 100 repetitions.
- Every AUC is pooled: one ROC over the 100 x 50 (score, relevant) pairs of all
  repetitions (R package AUC), not a mean of per-repetition AUCs. His saved scores
  (data/AUCsims_2023-06-17.rda) give 0.879 pooled and 0.877 as the mean per repetition.

Measures, all from ``treeimp.contributions`` / ``treeimp.explain`` (class 1; for a binary
forest |phi| is the same for both classes):

- SHAP (all trees): mean_i |phi_ik|, phi the forest's TreeSHAP of its training rows;
- SHAP in-bag: mean_i |phi^in_ik| (``values_in``: the trees row i was grown on);
- SHAP out-of-bag: mean_i |phi^oob_ik| (``values`` with ``oob=True``);
- shap_oob (supervised): treeimp's measure, per tree the mean over out-of-bag rows of
  y_i . phi_{t,k}(x_i);
- shrunk, one forest: ``Contributions.shrunk()``, beta from phi^oob on phi^in;
- shrunk, two forests: Loecher's sample split, the slope and score computed by the same
  ``Contributions.shrunk()`` with phi_out in place of phi^oob and phi_in of phi^in;
- MDI, MDI-oob: ``explain(methods=("mdi", "mdi_oob"))``.

    python benchmarks/loecher_auc.py              # the table of benchmarks/README.md
    python benchmarks/loecher_auc.py --reps 2     # smoke run
    python benchmarks/loecher_auc.py --screening sqrt,half-sqrt --reps 3
                                  # the screening forest's max_features on screening.py's designs
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
from sklearn.metrics import roc_auc_score

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import screening  # noqa: E402
from screening import li_classification  # noqa: E402

import treeimp  # noqa: E402
from treeimp.attributions.contributions import Contributions  # noqa: E402

# Loecher's Table 1 (AStA 2023); SHAP_in from paper 002's table (his slides)
LOECHER = {"SHAP (all trees)": 0.66, "SHAP in-bag": 0.56, "SHAP out-of-bag": 0.73,
           "shrunk, two forests": 0.89, "MDI": 0.10}

# forest settings: rows per forest, trees, max_features (mtry), min_samples_leaf, and
# which analyses run ("one": one forest on n rows, out of bag; "two": Loecher's two
# forests on 2n rows)
SETTINGS = {
    "treeimp README": dict(n=1000, trees=100, mtry="sqrt", leaf=1, runs=("one", "two")),
    "paper 002 (mtry 2)": dict(n=1000, trees=100, mtry=2, leaf=1, runs=("one",)),
    "CIS code (mtry 3)": dict(n=1000, trees=100, mtry=3, leaf=1, runs=("one", "two")),
    "AStA code (mtry 3, 500 trees)": dict(n=1000, trees=500, mtry=3, leaf=1, runs=("two",)),
    "screening forest (leaf 10)": dict(n=1000, trees=100, mtry="sqrt", leaf=10,
                                       runs=("one",)),
    "screening forest, mtry 3": dict(n=1000, trees=100, mtry=3, leaf=10, runs=("one",)),
    # not in the default run (--settings 6,7,...): the two-forest split on the one-forest
    # runs' 1,000 rows, one forest with the AStA code's trees, paper 002 with larger leaves
    "README, two forests on 1000 rows": dict(n=500, trees=100, mtry="sqrt", leaf=1,
                                             runs=("two",)),
    "AStA trees, one forest": dict(n=1000, trees=500, mtry=3, leaf=1, runs=("one",)),
    "paper 002, leaf 5": dict(n=1000, trees=100, mtry=2, leaf=5, runs=("one",)),
    # one forest out of bag on the 2,000 rows the two-forest runs split
    "README, one forest on 2000 rows": dict(n=2000, trees=100, mtry="sqrt", leaf=1,
                                            runs=("one",)),
    "AStA, one forest on 2000 rows": dict(n=2000, trees=500, mtry=3, leaf=1, runs=("one",)),
}
DEFAULT_SETTINGS = 6  # the first six run by default (under 10 minutes on 2 cores)
ONE_FOREST = ("SHAP (all trees)", "SHAP in-bag", "SHAP out-of-bag",
              "shap_oob (supervised)", "shrunk, one forest", "MDI", "MDI-oob")


def _forest(seed, trees, mtry, leaf):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=trees, max_features=mtry,
                                  min_samples_leaf=leaf, random_state=seed, n_jobs=1)


def one_forest_scores(X, y, seed, trees, mtry, leaf):
    """{measure: score per feature} of one forest grown on all rows (X, y)."""
    rf = _forest(seed, trees, mtry, leaf).fit(X, y)
    c = treeimp.contributions(rf, X, oob=True, n_jobs=1)
    oob, inb = c.values[:, :, 1], c.values_in[:, :, 1]
    # the forest's prediction is the plain mean over its trees, so a row's all-tree
    # contribution is the tree-count weighted mean of its out-of-bag and in-bag means
    k = c.n_oob_trees[:, None] / trees
    every = k * np.nan_to_num(oob) + (1 - k) * np.nan_to_num(inb)
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi", "mdi_oob", "shap_oob"),
                          random_state=seed, n_jobs=1)
    return {"SHAP (all trees)": np.abs(every).mean(axis=0),
            "SHAP in-bag": np.nanmean(np.abs(inb), axis=0),
            "SHAP out-of-bag": np.nanmean(np.abs(oob), axis=0),
            "shap_oob (supervised)": res.table["shap_oob"].to_numpy(),
            "shrunk, one forest": c.shrunk().importance().to_numpy()[:, 1],
            "MDI": res.table["mdi"].to_numpy(),
            "MDI-oob": res.table["mdi_oob"].to_numpy()}


def two_forest_scores(X, y, seed, trees, mtry, leaf):
    """Loecher's sample-split shrunk SHAP: forests on halves A and B, phi_in = B's forest
    on B's rows, phi_out = A's forest on B's rows; mean_i |beta_k phi_in,ik|."""
    half = len(y) // 2
    a, b = slice(0, half), slice(half, None)
    rf_a = _forest(seed, trees, mtry, leaf).fit(X[a], y[a])
    rf_b = _forest(seed + 10_000, trees, mtry, leaf).fit(X[b], y[b])
    phi_in = treeimp.contributions(rf_b, X[b], n_jobs=1)
    phi_out = treeimp.contributions(rf_a, X[b], n_jobs=1)
    split = Contributions(phi_out.values, phi_out.base_values, phi_in.feature_names, X[b],
                          values_in=phi_in.values, base_values_in=phi_in.base_values,
                          output_names=phi_in.output_names)
    return {"shrunk, two forests": split.shrunk().importance().to_numpy()[:, 1]}


def aucs(scores, relevant):
    """(mean of the per-repetition AUCs, its standard error, the pooled AUC) of lists of
    score vectors and relevance masks, one per repetition."""
    per = np.array([roc_auc_score(r, s) for s, r in zip(scores, relevant)])
    pooled = roc_auc_score(np.concatenate(relevant), np.concatenate(scores))
    se = per.std(ddof=1) / np.sqrt(len(per)) if len(per) > 1 else np.nan
    return per.mean(), se, pooled


def run(setting, reps, first_seed=0, two_forests=False):
    """{measure: (mean AUC, se, pooled AUC)} and the seconds per repetition."""
    cfg = SETTINGS[setting]
    scores, relevant = {}, []
    t0 = time.perf_counter()
    for r in range(reps):
        seed = first_seed + r
        n = 2 * cfg["n"] if two_forests else cfg["n"]
        X, y, S, _ = li_classification(n, np.random.default_rng(seed))
        rel = np.zeros(X.shape[1], bool)
        rel[S] = True
        relevant.append(rel)
        if two_forests:
            got = two_forest_scores(X, y, seed, cfg["trees"], cfg["mtry"], cfg["leaf"])
        else:
            got = one_forest_scores(X, y, seed, cfg["trees"], cfg["mtry"], cfg["leaf"])
        for m, s in got.items():
            scores.setdefault(m, []).append(s)
    sec = (time.perf_counter() - t0) / reps
    return {m: aucs(s, relevant) for m, s in scores.items()}, sec


def _max_features(spec, p):
    """"sqrt", "log2", an int (mtry), a fraction ("0.33") or "half-sqrt" (round(sqrt(p) /
    2), at least 1)."""
    if spec == "half-sqrt":
        return max(1, int(round(np.sqrt(p) / 2)))
    if spec.isdigit():
        return int(spec)
    return float(spec) if spec[0].isdigit() else spec


def screening_check(reps, specs, trees=100, leaf=10):
    """The screening forest (``min_samples_leaf=10``, 100 trees, out of bag) on the designs
    of benchmarks/screening.py with each max_features in ``specs``: power, FDR and ranking
    AUC of treeimp's measures at BH q < 0.05, seeds as screening.py's (100 * design + rep).
    """
    import pandas as pd

    rows = []
    for d, (name, (make, n)) in enumerate(screening.DESIGNS.items()):
        for r in range(reps):
            seed = 100 * d + r
            X, y, relevant, task = make(n, np.random.default_rng(seed))
            for spec in specs:
                mf = _max_features(spec, X.shape[1])
                t = time.perf_counter()
                rf = screening.forest(task, seed, trees).set_params(
                    min_samples_leaf=leaf, max_features=mf).fit(X, y)
                res = treeimp.explain(rf, X, y, oob=True, methods=screening.TREEIMP_MEASURES,
                                      random_state=seed, n_jobs=1)
                sec = time.perf_counter() - t
                for m in screening.TREEIMP_MEASURES:
                    kept, pv, sc, _ = screening._from_result(res, m, sec)
                    rows.append({"design": f"{name} (n={n})", "rep": r,
                                 "method": f"{m}, max_features={spec} ({mf})", "seconds": sec,
                                 **screening.score(kept, pv, sc, relevant, X.shape[1],
                                                   screening.WEAKLY_RELEVANT.get(name))})
        print(f"{name} done", file=sys.stderr, flush=True)
    table = screening.summarise(pd.DataFrame(rows))
    print(screening.to_markdown(table))
    return table


def _versions():
    import numba
    import sklearn

    return (f"Python {sys.version.split()[0]}, scikit-learn {sklearn.__version__}, "
            f"numpy {np.__version__}, numba {numba.__version__}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=10, help="repetitions per setting")
    ap.add_argument("--two-forest-reps", type=int, default=None,
                    help="repetitions of the two-forest runs (default: --reps)")
    ap.add_argument("--settings", default=None,
                    help=f"comma-separated setting numbers (0-{len(SETTINGS) - 1})")
    ap.add_argument("--screening", default=None,
                    help="comma-separated max_features values (sqrt, log2, half-sqrt or an "
                         "int): run the screening forest on benchmarks/screening.py's designs "
                         "with each instead")
    args = ap.parse_args(argv)
    if args.screening:
        print(_versions())
        print(f"screening forest (100 trees, min_samples_leaf 10, out of bag), "
              f"{args.reps} repetitions per design\n")
        return screening_check(args.reps, args.screening.split(","))
    names = list(SETTINGS)[:DEFAULT_SETTINGS]
    if args.settings:
        names = [list(SETTINGS)[int(i)] for i in args.settings.split(",")]
    reps2 = args.two_forest_reps or args.reps
    print(_versions())
    print(f"Li et al. classification design; AUC = mean of {args.reps} per-repetition AUCs "
          f"(+- standard error) / pooled over repetitions (Loecher's definition); seeds "
          f"0..{args.reps - 1}\n")
    head = "| measure | Loecher | " + " | ".join(names) + " |"
    print(head)
    print("|---" * (len(names) + 2) + "|")
    table, secs = {}, {}
    t0 = time.perf_counter()
    for name in names:
        table[name], secs[name] = {}, 0.0
        if "one" in SETTINGS[name]["runs"]:
            res, sec = run(name, args.reps)
            table[name].update(res)
            secs[name] += sec
        if "two" in SETTINGS[name]["runs"]:
            res, sec = run(name, reps2, two_forests=True)
            table[name].update(res)
            secs[name] += sec
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    for m in ONE_FOREST + ("shrunk, two forests",):
        cells = []
        for name in names:
            if m not in table[name]:
                cells.append("")
                continue
            mean, se, pooled = table[name][m]
            cells.append(f"{mean:.2f} +- {se:.2f} / {pooled:.2f}")
        ref = f"{LOECHER[m]:.2f}" if m in LOECHER else ""
        print(f"| {m} | {ref} | " + " | ".join(cells) + " |")
    print("\nsettings (rows per forest, trees, max_features, min_samples_leaf; the "
          "two-forest runs use twice the rows, split in halves):")
    for name in names:
        cfg = SETTINGS[name]
        print(f"  {name}: n={cfg['n']}, trees={cfg['trees']}, max_features={cfg['mtry']}, "
              f"min_samples_leaf={cfg['leaf']}; {secs[name]:.1f} s per repetition")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    return table


if __name__ == "__main__":
    main()

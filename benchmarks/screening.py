"""Screening study: which features does each method keep at a false discovery rate of
0.05, and at what cost?

Methods (every one sees the same data set in each repetition):

- treeimp, forest out of bag: RandomForest on all rows, ``explain(oob=True)``, each
  out-of-sample measure, Benjamini-Hochberg q < 0.05; the study's forest (100 trees,
  min_samples_leaf 3) and screening forests with min_samples_leaf 10 (100 and 300 trees);
- treeimp, boosting held-out: XGBoost on 60% of the rows, explained on the other 40%;
- treeimp, boosting cross-fitted: ``cross_explain`` of XGBoost, 5 folds;
- Boruta (the ``boruta`` package; a RandomForest of depth 5, as its documentation
  advises): the confirmed features;
- permutation importance (scikit-learn) of a RandomForest fitted on 60% of the rows, on
  the held-out 40%, 10 repeats: z = mean / (sd / sqrt(10)), one-sided normal p-value,
  Benjamini-Hochberg q < 0.05 (what users do with its mean and sd);
- in-sample MDI (``feature_importances_``) and mean |SHAP| (shap's TreeExplainer on the
  forest, 100 training rows): ranking AUC only, they have no test.

Designs (``DESIGNS``): Strobl et al.'s power case, Li et al.'s simulated classification,
Zhou & Hooker's regression, Friedman #1 with 45 noise features, correlated features with
a row ID, a pure null; and (issue 32) rare positives (4%), many weak effects, a wide
design (300 features, 5 relevant) and a skewed target far from zero. Reported per design
and method: power (share of the relevant features kept), mean false selections, FDR
(mean over repetitions of false / kept), the family-wise error (share of repetitions
with any false selection; on the null design this is the FWER proper), the share of
noise features with p < 0.05, the ranking AUC (relevant above noise) and the time per
repetition (fit + importances, one thread). Where a design has features that do not
enter the outcome's formula but are associated with it (``WEAKLY_RELEVANT``: the
correlated design's x3..x9), a second FDR, "FDR all-rel.", counts as false only the
features that are not relevant even in Boruta's all-relevant sense (Kohavi & John's weak
relevance).

    python benchmarks/screening.py            # full study (benchmarks/README.md)
    python benchmarks/screening.py --quick    # CI smoke mode, under a minute

``--selector`` runs ``ImportanceSelector`` itself instead of treeimp's study settings:
the screening forest (100 trees, ``min_samples_leaf=10``, out of bag) and XGBoost
cross-fitted (``cv=5``), each with its default measure and ``null="t"`` (the t
reference; the selector's default for forests) and ``null="shadow"`` (its default for
cross-fitted boosting; the shadow-feature fit), whose shadows' z-scores give
two rows: "null=shadow-centred" (the library's shadow null: z less the shadows' mean,
t reference) and "null=shadow" (a pooled normal null with the shadows' mean and spread,
``shadow_scaled_pvalues``, measured first and not adopted); Boruta beside; times are
CPU seconds (``time.process_time``, one thread), which the machine's load does not
inflate. ``--boruta-cache FILE.json`` keeps Boruta's result per design and repetition
(it is deterministic given the seed): runs found in the file are not repeated.
``benchmarks/screening_boruta.json`` holds the 26 runs measured on 2026-11-28 (10 of
Strobl's design, 1-3 of the nine others; CPU seconds under a load average of 10-25).
With ``--selector`` one untimed selector fit per task comes first (``warm_up``), so that
no design's first timed fit includes loading numba's compiled kernels.
``--selector-methods m1,m2`` runs only the cross-fitted XGBoost selector, once per named
measure, with its default null or ``--selector-null``, and ``--n-shadows``.
``--n-blocks N`` sets the selector's ``n_blocks`` (default: its own, 50 out of bag and 20
per fold cross-fitted); ``--forest-class-weight W`` fits the selector's forest
classifier with ``class_weight=W`` (its default measure is then ``ufi``).
``--forest-only`` runs only the selector's forest out of bag with the t null (its
default), ``--forest-trees`` and ``--forest-leaf`` set that forest's size and
``min_samples_leaf`` (100 and 10 otherwise), ``--balance-classes true|false`` the
selector's ``balance_classes`` (default: its own rule, class-balanced screening of forest
classifiers whose smallest class is below ``RARE_CLASS_SHARE``; a balanced screening is
labelled "ufi, balanced"). ``--positive-share S`` moves the intercept of the rare-positive
and Li et al.'s designs so that about S of the rows are positive (their seeds unchanged).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd
from scipy import stats

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import treeimp  # noqa: E402
from treeimp.results.importances import bh_qvalues  # noqa: E402

TREEIMP_MEASURES = ("mdi_oob", "mdi_oob_centered", "ufi")
ALPHA = 0.05


# ------------------------------------------------------------------------ designs
def strobl_power(n, rng):
    """Strobl et al. (2007) power case: X1 N(0,1); X2..X5 categorical with 2, 4, 10, 20
    levels; P(y = 1) = 0.35 or 0.65 by X2. Relevant: X2."""
    X = np.column_stack([rng.normal(size=n)] + [rng.integers(0, k, n).astype(float)
                                                 for k in (2, 4, 10, 20)])
    y = (rng.random(n) < np.where(X[:, 1] == 1, 0.65, 0.35)).astype(int)
    return X, y, np.array([1]), "classification"


def li_classification(n, rng, intercept=-1.0):
    """Li et al. (2019), section 4: 50 discrete features, feature j with j + 1 values
    0..j; 5 relevant chosen among the first ten; P(y = 1) = logistic(2/5 sum_S x_j / j - 1)
    (``intercept`` instead of -1 with ``--positive-share``)."""
    X = np.column_stack([rng.integers(0, j + 1, n).astype(float) for j in range(1, 51)])
    S = np.sort(rng.choice(10, 5, replace=False))
    eta = 0.4 * np.sum(X[:, S] / (S + 1), axis=1) + intercept
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return X, y, S, "classification"


def zhou_hooker(n, rng):
    """Zhou & Hooker (2020), section 5.1 regression: X_i uniform on 0..i (i = 1..10),
    y = X_1 + 5 eps. Relevant: X_1 (binary)."""
    X = np.column_stack([rng.integers(0, i + 1, n).astype(float) for i in range(1, 11)])
    y = X[:, 0] + 5.0 * rng.normal(size=n)
    return X, y, np.array([0]), "regression"


def friedman_noise(n, rng):
    """Friedman #1 (5 relevant uniform features) plus 45 uniform noise features, noise sd
    1, and the target shifted by 50 (a price-like target far from zero)."""
    X = rng.random((n, 50))
    y = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4] + rng.normal(size=n) + 50.0)
    return X, y, np.arange(5), "regression"


def correlated_row_id(n, rng):
    """10 Gaussian features with pairwise correlation 0.3, y = x0 + x1 - x2 + eps (sd 1.5),
    binary outcome by a logistic link; plus a row ID. Relevant: x0, x1, x2."""
    cov = np.full((10, 10), 0.3) + 0.7 * np.eye(10)
    Z = rng.multivariate_normal(np.zeros(10), cov, size=n)
    eta = Z[:, 0] + Z[:, 1] - Z[:, 2]
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    X = np.column_stack([Z, rng.permutation(n).astype(float)])
    return X, y, np.arange(3), "classification"


def pure_null(n, rng):
    """20 noise features (continuous, binary, 20 levels, a row ID), y independent with
    30% positives."""
    X = np.column_stack([rng.normal(size=(n, 7)), rng.integers(0, 2, (n, 6)),
                         rng.integers(0, 20, (n, 6)), rng.permutation(n)[:, None]]
                        ).astype(float)
    y = (rng.random(n) < 0.3).astype(int)
    return X, y, np.array([], dtype=int), "classification"


def rare_positives(n, rng, intercept=-3.95):
    """30 standard normal features, 5 relevant (x0..x4) of moderate effect (log odds 0.6
    per standard deviation), P(y = 1) = logistic(-3.95 + 0.6 sum x0..x4): about 4%
    positives (issue 32's example of where Boruta kept more true features;
    ``intercept`` instead of -3.95 with ``--positive-share``)."""
    X = rng.normal(size=(n, 30))
    eta = intercept + 0.6 * X[:, :5].sum(axis=1)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return X, y, np.arange(5), "classification"


def rare_null(n, rng):
    """The null twin of :func:`rare_positives` (for benchmarks/calibration_null.py): the
    same 30 normal features, y independent of them with 4% positives."""
    X = rng.normal(size=(n, 30))
    y = (rng.random(n) < 0.04).astype(int)
    return X, y, np.array([], dtype=int), "classification"


def skewed_null(n, rng):
    """The null twin of :func:`skewed_far` (for benchmarks/calibration_null.py): 20
    standard normal features, y drawn as in skewed_far from five other, unobserved
    normal variables, so independent of every feature (far from zero, right-skewed)."""
    X = rng.normal(size=(n, 20))
    hidden = rng.normal(size=(n, 5))
    y = np.exp(0.3 * hidden.sum(axis=1) + 0.6 * rng.normal(size=n)) + 1000.0
    return X, y, np.array([], dtype=int), "regression"


def many_weak(n, rng):
    """60 standard normal features, 15 relevant (x0..x14) with a small coefficient each:
    y = 0.3 sum x0..x14 + eps (sd 1), each relevant feature explaining about 4% of var y."""
    X = rng.normal(size=(n, 60))
    y = 0.3 * X[:, :15].sum(axis=1) + rng.normal(size=n)
    return X, y, np.arange(15), "regression"


def wide(n, rng):
    """300 standard normal features, 5 relevant (x0..x4): P(y = 1) = logistic(0.6 sum
    x0..x4), balanced classes; hundreds of features and few relevant."""
    X = rng.normal(size=(n, 300))
    eta = 0.6 * X[:, :5].sum(axis=1)
    y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    return X, y, np.arange(5), "classification"


def skewed_far(n, rng):
    """20 standard normal features, 5 relevant (x0..x4): y = exp(0.3 sum x0..x4 + 0.6
    eps) + 1000, a target far from zero with a right-skewed (log-normal) spread
    (skewness about 4.7; mean 1001.5, sd 1.7)."""
    X = rng.normal(size=(n, 20))
    y = np.exp(0.3 * X[:, :5].sum(axis=1) + 0.6 * rng.normal(size=n)) + 1000.0
    return X, y, np.arange(5), "regression"


def intercept_for_share(make, share):
    """The ``intercept`` of ``make`` (rare_positives or li_classification) that gives about
    ``share`` positives: the linear predictor without intercept drawn for 100 data sets of
    2,000 rows (seeds 0..99; Li et al.'s relevant set drawn in each), the intercept solved
    so that the mean of logistic(intercept + predictor) is ``share``."""
    from scipy.optimize import brentq

    base = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        if make is rare_positives:
            base.append(0.6 * rng.normal(size=(2000, 5)).sum(axis=1))
        elif make is li_classification:
            X = np.column_stack([rng.integers(0, j + 1, 2000) for j in range(1, 11)])
            S = np.sort(rng.choice(10, 5, replace=False))
            base.append(0.4 * np.sum(X[:, S] / (S + 1), axis=1))
        else:
            raise ValueError("--positive-share applies to the rare-positive and Li et al.'s "
                             "designs only")
    base = np.concatenate(base)
    return brentq(lambda a: np.mean(1.0 / (1.0 + np.exp(-(a + base)))) - share, -20.0, 20.0)


# designs whose features are all-relevant in Boruta's sense (Kohavi & John's weak
# relevance: y depends on the feature given some subset of the others, here already
# marginally) beyond the ones the outcome is computed from: a second FDR counts only
# features outside this set as false
WEAKLY_RELEVANT = {
    # x3..x9 are correlated 0.3 with each of x0, x1, x2: cov(x_j, x0 + x1 - x2) = 0.3,
    # so each is marginally associated with y; the row ID is independent of y
    "correlated + row ID": np.arange(10),
}

DESIGNS = {
    "Strobl power": (strobl_power, 500),
    "Li et al. classification": (li_classification, 2000),
    "Zhou & Hooker regression": (zhou_hooker, 1000),
    "Friedman #1 + 45 noise, y+50": (friedman_noise, 800),
    "correlated + row ID": (correlated_row_id, 800),
    "pure null": (pure_null, 800),
    # appended after the first six so that their seeds (100 x position + repetition)
    # stay the same
    "rare positives (4%)": (rare_positives, 2000),
    "many weak effects": (many_weak, 1000),
    "wide (300 features)": (wide, 1000),
    "skewed y far from 0": (skewed_far, 1000),
}


# ------------------------------------------------------------------------ models
def forest(task, seed, n_estimators=200):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    return cls(n_estimators=n_estimators, max_features="sqrt", min_samples_leaf=3,
               random_state=seed, n_jobs=1)


def boosting(task, seed, n_estimators=200):
    import xgboost as xgb

    cls = xgb.XGBClassifier if task == "classification" else xgb.XGBRegressor
    return cls(n_estimators=n_estimators, max_depth=3, learning_rate=0.05, subsample=0.8,
               random_state=seed, n_jobs=1)


# ------------------------------------------------------------------------ methods
def _held_out_split(n, seed):
    idx = np.random.default_rng(seed).permutation(n)
    cut = int(0.6 * n)
    return idx[:cut], idx[cut:]


def run_forest(X, y, task, seed, n_trees, label="", min_samples_leaf=3, centre=False):
    """treeimp's forest out of bag: ({method name: result}, the fitted forest)."""
    t = time.perf_counter()
    rf = forest(task, seed, n_trees).set_params(min_samples_leaf=min_samples_leaf).fit(X, y)
    res = treeimp.explain(rf, X, y, oob=True, methods=TREEIMP_MEASURES, random_state=seed,
                          n_jobs=1)
    dt = time.perf_counter() - t
    return _results(f"treeimp forest OOB{label}", res, dt, centre), rf


def run_treeimp(X, y, task, seed, cfg):
    """{method name: (kept mask, p-values, scores, seconds)} for treeimp's settings."""
    centre = cfg.get("centre_null", False)
    out, rf = run_forest(X, y, task, seed, cfg["trees"], centre=centre)
    # screening forests: larger leaves and more trees (each row is out of bag in about
    # 37% of them), both lowering the spread of the per-tree importances
    for trees, leaf in cfg["screen_forests"]:
        more, _ = run_forest(X, y, task, seed, trees, f" ({trees} trees, leaf {leaf})", leaf,
                             centre)
        out.update(more)
    train, test = _held_out_split(len(y), seed)
    t = time.perf_counter()
    gb = boosting(task, seed, cfg["rounds"]).fit(X[train], y[train])
    res = treeimp.explain(gb, X[test], y[test], methods=TREEIMP_MEASURES, random_state=seed,
                          n_jobs=1)
    dt = time.perf_counter() - t
    out.update(_results("treeimp XGB held-out", res, dt, centre))
    t = time.perf_counter()
    res = treeimp.cross_explain(boosting(task, seed, cfg["rounds"]), X, y, cv=5,
                                methods=TREEIMP_MEASURES, random_state=seed, n_jobs=1)
    dt = time.perf_counter() - t
    out.update(_results("treeimp XGB cross-fitted", res, dt, centre))
    return out, rf


def _results(label, res, seconds, centre=False):
    """{method name: (kept mask, p-values, scores, seconds)} of one treeimp result; with
    ``centre`` also each measure's median-centred variant (:func:`centred_pvalues`)."""
    out = {}
    for m in TREEIMP_MEASURES:
        q = res.qvalues[m].to_numpy()
        out[f"{label} {m}"] = (q < ALPHA, res.pvalues[m].to_numpy(), res.table[m].to_numpy(),
                               seconds)
        if centre:
            p = centred_pvalues(res.table[m].to_numpy(), res.stderr[m].to_numpy(), res.dof)
            out[f"{label} {m} [median-centred]"] = (bh_qvalues(p) < ALPHA, p,
                                                     res.table[m].to_numpy(), seconds)
    return out


def centred_pvalues(value, stderr, dof):
    """Issue 32's candidate "null centre learned from the data" (an experiment of this
    script, not the library's test): z = value / stderr as the library computes it, less
    the median z over the data set's features, p from t with ``dof`` degrees of freedom.
    The noise features' z-scores centre below zero (benchmarks/calibration_null.py);
    when most features are noise the median estimates that centre. A feature with value
    and stderr 0 (never used) keeps p = 1."""
    value = np.asarray(value, float)
    stderr = np.asarray(stderr, float)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(stderr > 0, value / stderr,
                     np.where(value > 0, np.inf, np.where(value < 0, -np.inf, 0.0)))
    finite = np.isfinite(z)
    shift = np.median(z[finite]) if finite.any() else 0.0
    p = stats.t.sf(z - shift, dof)
    return np.where((stderr == 0) & (value == 0), 1.0, p)


def run_boruta(X, y, task, seed, cfg):
    from boruta import BorutaPy
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    t = time.perf_counter()
    rf = cls(max_depth=5, n_jobs=1, random_state=seed)
    sel = BorutaPy(rf, n_estimators=cfg["boruta_trees"], max_iter=cfg["boruta_iter"],
                   random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sel.fit(X, y)
    dt = time.perf_counter() - t
    return (np.asarray(sel.support_, bool), None, -np.asarray(sel.ranking_, float), dt)


def run_selectors(X, y, task, seed, cfg):
    """``ImportanceSelector`` with each null, forest out of bag and XGBoost cross-fitted:
    {label: (kept mask, p-values, scores, CPU seconds)}."""
    out = {}
    if cfg.get("selector_methods"):
        return xgb_selector_methods(X, y, task, seed, cfg)
    rf = forest(task, seed, cfg.get("forest_trees") or 100).set_params(
        min_samples_leaf=cfg.get("forest_leaf") or 10)
    if task == "classification" and cfg.get("forest_class_weight"):
        rf.set_params(class_weight=cfg["forest_class_weight"])
    settings = [("screening forest OOB", rf)]
    if not cfg.get("forest_only"):
        settings.append(("XGB cross-fitted", boosting(task, seed, cfg["rounds"])))
    for label, est in settings:
        for null in ("t",) if cfg.get("forest_only") else ("t", "shadow"):
            t = time.process_time()
            sel = treeimp.ImportanceSelector(est, null=null, random_state=seed,
                                             n_blocks=cfg["n_blocks"],
                                             balance_classes=cfg.get("balance_classes"))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
                sel.fit(X, y)
            dt = time.process_time() - t
            res, m = sel.importances_, sel.method_
            value, se = res.table[m].to_numpy(), res.stderr[m].to_numpy()
            if null == "t":
                if sel.screening_class_weight_ is not None:
                    m_label = f"{m}, balanced"
                else:
                    m_label = m
                out[f"selector {label} {m_label} null=t"] = (
                    sel.support_.copy(), res.pvalues[m].to_numpy(), value, dt)
                continue
            # both forms of the shadow null from the same fit, computed here so that the
            # labels mean the same whatever the library's null="shadow" is: the pooled
            # normal null (mean and spread of the shadows) and the library's shift
            p = shadow_scaled_pvalues(value, se, sel.shadow_zscores_)
            out[f"selector {label} {m} null=shadow"] = (bh_qvalues(p) < ALPHA, p, value, dt)
            p = shadow_centred_pvalues(value, se, sel.shadow_zscores_, res.dof)
            out[f"selector {label} {m} null=shadow-centred"] = (
                bh_qvalues(p) < ALPHA, p, value, dt)
    return out


def warm_up(cfg):
    """One untimed fit of the cross-fitted XGBoost selector per task on a small data set
    (seed 0), so that no design's first timed fit includes loading or compiling numba's
    kernels."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    for task, y in (("classification", (X[:, 0] + rng.normal(size=300) > 0).astype(int)),
                    ("regression", X[:, 0] + rng.normal(size=300))):
        sel = treeimp.ImportanceSelector(boosting(task, 0, cfg["rounds"]), random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            sel.fit(X, y)


def xgb_selector_methods(X, y, task, seed, cfg):
    """The cross-fitted XGBoost ``ImportanceSelector`` with its default null (the shadow
    null) or ``cfg["selector_null"]``, once per measure of ``cfg["selector_methods"]``:
    {label: (kept mask, p-values, scores, CPU seconds)}."""
    out = {}
    for m in cfg["selector_methods"]:
        t = time.process_time()
        sel = treeimp.ImportanceSelector(boosting(task, seed, cfg["rounds"]),
                                         method=None if m == "default" else m,
                                         random_state=seed, n_blocks=cfg["n_blocks"],
                                         n_shadows=cfg.get("n_shadows"),
                                         null=cfg.get("selector_null"),
                                         cv=cfg.get("selector_cv") or 5)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
            sel.fit(X, y)
        dt = time.process_time() - t
        res = sel.importances_
        m = sel.method_
        folds = f", cv={cfg['selector_cv']}" if cfg.get("selector_cv") else ""
        out[f"selector XGB cross-fitted{folds} {m} null={sel.null_}"] = (
            sel.support_.copy(), res.pvalues[m].to_numpy(), res.table[m].to_numpy(), dt)
    return out


def shadow_scaled_pvalues(value, stderr, z_shadow):
    """The first form of the shadow null measured (not the library's): with the used
    shadows' z-scores' mean m, sd s and count S, p = P(T > (z - m) / (s sqrt(1 + 1/S))),
    T ~ t(S - 1), the prediction p-value of a normal null pooled over all shadows. A
    never-used feature keeps p = 1."""
    from treeimp.measures.shadow_null import shadow_null, zscores

    z = zscores(value, stderr)
    m, s, count = shadow_null(z_shadow)
    p = stats.t.sf((z - m) / (s * np.sqrt(1.0 + 1.0 / count)), count - 1)
    return np.where(np.isnan(z), 1.0, p)


def shadow_centred_pvalues(value, stderr, z_shadow, dof):
    """The library's shadow null (``treeimp.measures.shadow_null.shadow_pvalues``) from
    value, stderr and the shadows' z-scores: z less the shadows' mean z, t with ``dof``."""
    from treeimp.measures.shadow_null import shadow_pvalues, zscores

    return shadow_pvalues(zscores(value, stderr), z_shadow, dof)[0]


def cached_boruta(X, y, task, seed, cfg, cache, key):
    """run_boruta, or its result stored under ``key`` in ``cache`` (a dict saved as
    JSON: kept features, ranking, CPU seconds)."""
    if key not in cache:
        t = time.process_time()
        kept, _, score, _ = run_boruta(X, y, task, seed, cfg)
        cache[key] = {"kept": np.flatnonzero(kept).tolist(), "score": score.tolist(),
                      "cpu_seconds": time.process_time() - t}
    hit = cache[key]
    kept = np.zeros(X.shape[1], bool)
    kept[hit["kept"]] = True
    return kept, None, np.asarray(hit["score"], float), hit["cpu_seconds"]


def run_permutation(X, y, task, seed, cfg):
    from sklearn.inspection import permutation_importance

    train, test = _held_out_split(len(y), seed)
    t = time.perf_counter()
    rf = forest(task, seed, cfg["trees"]).fit(X[train], y[train])
    r = permutation_importance(rf, X[test], y[test], n_repeats=10, random_state=seed,
                               n_jobs=1)
    dt = time.perf_counter() - t
    se = r.importances_std / np.sqrt(10)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(se > 0, r.importances_mean / se,
                     np.where(r.importances_mean > 0, np.inf, 0.0))
    p = stats.norm.sf(z)
    return (bh_qvalues(p) < ALPHA, p, r.importances_mean, dt)


def run_rankers(X, y, rf, seed, cfg):
    """In-sample MDI and mean |SHAP| of the out-of-bag forest: scores and seconds."""
    out = {"in-sample MDI (forest)": (None, None, rf.feature_importances_, 0.0)}
    if cfg["shap"]:
        import shap

        rows = np.random.default_rng(seed).choice(len(y), min(100, len(y)), replace=False)
        t = time.perf_counter()
        sv = shap.TreeExplainer(rf).shap_values(X[rows], check_additivity=False)
        sv = np.asarray(sv)
        # classifiers: (rows, features, classes) or a list per class
        if sv.ndim == 3:
            sv = sv[..., -1] if sv.shape[1] == X.shape[1] else sv[-1]
        out["mean |SHAP| (forest)"] = (None, None, np.abs(sv).mean(axis=0),
                                       time.perf_counter() - t)
    return out


# ------------------------------------------------------------------------ scoring
def _auc(scores, relevant):
    """Probability that a relevant feature scores above a noise one (ties count 1/2)."""
    F = len(scores)
    rel = np.zeros(F, bool)
    rel[relevant] = True
    if rel.all() or not rel.any():
        return np.nan
    s = np.nan_to_num(np.asarray(scores, float), nan=-np.inf)
    a, b = s[rel][:, None], s[~rel][None, :]
    return float(np.mean((a > b) + 0.5 * (a == b)))


def score(kept, p, scores, relevant, F, weak=None):
    """Rates of one method on one data set; ``weak``: the all-relevant features (false
    selections outside them give the second FDR, "FDR all-rel."), if the design has
    more than ``relevant``."""
    rel = np.zeros(F, bool)
    rel[relevant] = True
    row = {"auc": _auc(scores, relevant)}
    if kept is not None:
        false = int(np.sum(kept & ~rel))
        row.update(power=float(np.mean(kept[rel])) if rel.any() else np.nan,
                   false=false, fdp=false / max(int(kept.sum()), 1), any_false=float(false > 0))
        if weak is not None:
            all_rel = np.zeros(F, bool)
            all_rel[weak] = True
            row["fdp_weak"] = int(np.sum(kept & ~all_rel)) / max(int(kept.sum()), 1)
    if p is not None:
        row["noise_p05"] = float(np.mean(p[~rel] < 0.05))
    return row


def add_selector_options(ap):
    """The ``--selector`` options this study shares with benchmarks/calibration_null.py:
    the selector's n_blocks, the forest's class_weight, measures run one by one on the
    cross-fitted booster and its null."""
    ap.add_argument("--n-blocks", type=int, default=None,
                    help="with --selector: the selector's n_blocks (default None: its own, "
                         "50 out of bag, 20 per fold cross-fitted)")
    ap.add_argument("--forest-class-weight", default=None,
                    help="with --selector: the forest classifier's class_weight (e.g. "
                         "balanced_subsample; its default screening measure is then ufi)")
    ap.add_argument("--selector-methods", default=None,
                    help="with --selector: comma-separated measures; run only the "
                         "cross-fitted XGBoost selector, its default null, once per measure")
    ap.add_argument("--selector-null", default=None, choices=("t", "shadow"),
                    help="with --selector-methods: the selector's null (default: its own)")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one small repetition per design")
    ap.add_argument("--reps", type=int, default=None)
    ap.add_argument("--designs", default=None,
                    help=f"comma-separated design numbers (0-{len(DESIGNS) - 1})")
    ap.add_argument("--first-rep", type=int, default=0,
                    help="first repetition (seeds 100 * design + rep), to run a study in "
                         "parts")
    ap.add_argument("--only-forest-trees", type=int, default=None,
                    help="run only treeimp's forest out of bag, with this many trees "
                         "(rows labelled with the count, to add to a study's CSVs)")
    ap.add_argument("--centre-null", action="store_true",
                    help="also report each treeimp measure with median-centred z-scores "
                         "(centred_pvalues; an experiment of issue 32, not the library's "
                         "test)")
    ap.add_argument("--selector", action="store_true",
                    help="ImportanceSelector with null='t' and null='shadow', and Boruta "
                         "(CPU seconds)")
    ap.add_argument("--boruta-cache", default=None,
                    help="JSON file of Boruta's results by design and repetition (read, "
                         "and written with the new runs)")
    ap.add_argument("--no-boruta", action="store_true", help="with --selector: skip Boruta")
    add_selector_options(ap)
    ap.add_argument("--forest-only", action="store_true",
                    help="with --selector: only the forest out of bag, its default null")
    ap.add_argument("--forest-trees", type=int, default=None,
                    help="with --selector: the selector's forest's n_estimators (default 100)")
    ap.add_argument("--forest-leaf", type=int, default=None,
                    help="with --selector: the selector's forest's min_samples_leaf "
                         "(default 10)")
    ap.add_argument("--balance-classes", default=None, choices=("true", "false"),
                    help="with --selector: the selector's balance_classes (default None: "
                         "its own rule, class-balanced below RARE_CLASS_SHARE)")
    ap.add_argument("--positive-share", type=float, default=None,
                    help="the rare-positive and Li et al.'s designs with the intercept that "
                         "gives about this share of positives (intercept_for_share)")
    ap.add_argument("--selector-cv", type=int, default=None,
                    help="with --selector-methods: the selector's cv (default 5); "
                         "--selector-methods default runs the model's default measure")
    ap.add_argument("--n-shadows", type=int, default=None,
                    help="with --selector-methods: the selector's n_shadows")
    ap.add_argument("--out", default=None, help="CSV of every repetition")
    ap.add_argument("--summarise", default=None,
                    help="comma-separated CSVs written by --out: print their table only")
    args = ap.parse_args(argv)
    if args.summarise:
        df = pd.concat([pd.read_csv(f) for f in args.summarise.split(",")],
                       ignore_index=True)
        table = summarise(df)
        print(to_markdown(table))
        print(f"\n{df.groupby('design')['rep'].nunique().to_dict()} repetitions per design")
        return table
    cfg = ({"reps": 1, "scale": 0.25, "trees": 20, "rounds": 20, "boruta_iter": 5,
            "boruta_trees": 20, "shap": False, "screen_forests": [(40, 10)]} if args.quick else
           {"reps": 3, "scale": 1.0, "trees": 100, "rounds": 100, "boruta_iter": 50,
            "boruta_trees": "auto", "shap": True, "screen_forests": [(100, 10), (300, 10)]})
    if args.reps:
        cfg["reps"] = args.reps
    cfg["centre_null"] = args.centre_null
    cfg["n_blocks"] = args.n_blocks
    cfg["forest_class_weight"] = args.forest_class_weight
    cfg["forest_only"] = args.forest_only
    cfg["forest_trees"] = args.forest_trees
    cfg["forest_leaf"] = args.forest_leaf
    cfg["balance_classes"] = (None if args.balance_classes is None
                              else args.balance_classes == "true")
    cfg["selector_methods"] = (args.selector_methods.split(",") if args.selector_methods
                               else None)
    cfg["n_shadows"] = args.n_shadows
    cfg["selector_cv"] = args.selector_cv
    cfg["selector_null"] = args.selector_null
    names = list(DESIGNS)
    if args.designs:
        names = [names[int(i)] for i in args.designs.split(",")]
    cache = {}
    if args.boruta_cache and os.path.exists(args.boruta_cache):
        with open(args.boruta_cache) as f:
            cache = json.load(f)
    rows = []
    if args.selector:
        warm_up(cfg)
    t0 = time.perf_counter()
    for name in names:
        d = list(DESIGNS).index(name)  # seeds follow the design, not the selection
        make, n = DESIGNS[name]
        n = max(150, int(n * cfg["scale"]))
        label = name
        if args.positive_share is not None:
            a = intercept_for_share(make, args.positive_share)
            make = functools.partial(make, intercept=a)
            label = f"{name}, {args.positive_share:.0%} positives (intercept {a:.2f})"
        for r in range(args.first_rep, args.first_rep + cfg["reps"]):
            seed = 100 * d + r
            X, y, relevant, task = make(n, np.random.default_rng(seed))
            if args.selector:
                results = run_selectors(X, y, task, seed, cfg)
                if not args.no_boruta:
                    results["Boruta (RF depth 5)"] = cached_boruta(
                        X, y, task, seed, cfg, cache, f"{label} | n={n} | rep {r}")
                    if args.boruta_cache:
                        with open(args.boruta_cache, "w") as f:
                            json.dump(cache, f, indent=0)
            elif args.only_forest_trees:
                results, _ = run_forest(X, y, task, seed, args.only_forest_trees,
                                        f" ({args.only_forest_trees} trees)")
            else:
                results, rf = run_treeimp(X, y, task, seed, cfg)
                results["Boruta (RF depth 5)"] = run_boruta(X, y, task, seed, cfg)
                results["permutation (RF, held-out, z-test + BH)"] = run_permutation(
                    X, y, task, seed, cfg)
                results.update(run_rankers(X, y, rf, seed, cfg))
            for method, (kept, p, sc, sec) in results.items():
                rows.append({"design": f"{label} (n={n})", "rep": r, "method": method,
                             "seconds": sec,
                             **score(kept, p, sc, relevant, X.shape[1],
                                     WEAKLY_RELEVANT.get(name))})
        print(f"{name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    df = pd.DataFrame(rows)
    if args.out:
        df.to_csv(args.out, index=False)
    table = summarise(df)
    print(to_markdown(table))
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, {cfg['reps']} repetitions per design"
          f"{' (quick mode)' if args.quick else ''}")
    return table


def summarise(df):
    cols = ["power", "false", "fdp", "fdp_weak", "any_false", "noise_p05", "auc", "seconds"]
    for c in cols:
        if c not in df:
            df[c] = np.nan
    g = df.groupby(["design", "method"], sort=False)[cols].mean()
    return g.rename(columns={"false": "false sel.", "fdp": "FDR", "fdp_weak": "FDR all-rel.",
                             "any_false": "FWER",
                             "noise_p05": "noise p<.05"}).reset_index()


def to_markdown(table):
    head = "| " + " | ".join(table.columns) + " |"
    sep = "|" + "|".join("---" for _ in table.columns) + "|"
    lines = [head, sep]
    for _, row in table.iterrows():
        cells = []
        for c in table.columns:
            v = row[c]
            if isinstance(v, str):
                cells.append(v)
            elif pd.isna(v):
                cells.append("")
            elif c == "seconds":
                cells.append(f"{v:.2f}")
            else:
                cells.append(f"{v:.2f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()

"""Bias removed and p-values calibrated: Strobl's null design with random forests.

Paper 001 section 2.2 (after Strobl et al. 2007): X1 ~ N(0, 1), X2..X5 categorical with
2, 4, 10, 20 equally likely levels (coded 0..k-1), y independent of everything. Fixed
seeds, small repetitions; the thresholds are the issue's, the numbers behind them are
recorded in the closing note.
"""

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp

N_REPS = 20
FEATURES = ["cont", "cat2", "cat4", "cat10", "cat20"]


def strobl_null(n, rng, regression=False):
    X = np.column_stack([rng.normal(size=n)] + [rng.integers(0, k, n) for k in (2, 4, 10, 20)])
    y = rng.normal(size=n) if regression else rng.integers(0, 2, n)
    return X.astype(float), y


@pytest.fixture(scope="module", params=["classification", "regression"])
def null_runs(request):
    regression = request.param == "regression"
    rng = np.random.default_rng(2024)
    values = {m: [] for m in ("mdi", "mdi_oob", "ufi")}
    z = {m: [] for m in ("mdi_oob", "ufi")}
    p = {m: [] for m in ("mdi_oob", "ufi")}
    for rep in range(N_REPS):
        X, y = strobl_null(500, rng, regression)
        model = (RandomForestRegressor if regression else RandomForestClassifier)(
            n_estimators=60, random_state=rep, n_jobs=1)  # fully grown trees
        model.fit(X, y)
        res = treeimp.explain(model, X, y, oob=True, random_state=rep,
                              feature_names=FEATURES)
        for m in values:
            values[m].append(res.table[m].to_numpy())
        for m in z:
            z[m].append((res.table[m] / res.stderr[m]).to_numpy())
            p[m].append(res.pvalues[m].to_numpy())
    return ({m: np.array(v) for m, v in values.items()}, {m: np.array(v) for m, v in z.items()},
            {m: np.array(v) for m, v in p.items()})


def test_mdi_prefers_continuous_and_many_levels(null_runs):
    values, _, _ = null_runs
    mdi = values["mdi"].mean(0)
    assert mdi[0] > 3 * mdi[1]  # continuous far above binary
    assert mdi[4] > 3 * mdi[1]  # 20 levels far above binary


@pytest.mark.parametrize("method", ["mdi_oob", "ufi"])
def test_out_of_bag_mean_is_zero_on_noise(null_runs, method):
    values, _, _ = null_runs
    v = values[method]
    mean = v.mean(0)
    se = v.std(0, ddof=1) / np.sqrt(len(v))
    assert np.all(np.abs(mean) <= 3 * se), (mean, se)


@pytest.mark.parametrize("method", ["mdi_oob", "ufi"])
def test_block_z_scores_are_calibrated(null_runs, method):
    _, z, p = null_runs
    zz = z[method].ravel()
    zz = zz[np.isfinite(zz)]
    assert abs(zz.mean()) <= 0.3, zz.mean()
    # Measured (these seeds, 2026-11-28): sd 1.08 / 1.06 (classification mdi_oob / ufi),
    # 1.10 / 1.11 (regression); ufi 0.92 / 0.94 before its replicates' node ratios were
    # expanded about the total (issue 32), and 1.46 (classification) with the plain
    # expansion, which the upper bound 1.3 caught. Earlier, without the out-of-bag
    # inflation of the block errors, 1.52 / 1.43 / 1.39 / 1.17.
    assert 0.7 <= zz.std(ddof=1) <= 1.3, zz.std(ddof=1)
    # one-sided p-values are not anti-conservative on noise
    # not significantly more than 5% below 0.05 (a binomial test at the 1% level: with
    # 100 p-values, 6 or 7 below 0.05 is sampling noise, not anti-conservatism)
    pp = np.asarray(p[method]).ravel()
    pp = pp[np.isfinite(pp)]
    assert binom.sf(np.sum(pp < 0.05) - 1, pp.size, 0.05) > 0.01, np.mean(pp < 0.05)


def test_held_out_forest_is_calibrated_without_inflation():
    """Held-out rows never trained a tree: plain jackknife errors are calibrated."""
    rng = np.random.default_rng(11)
    z = []
    for rep in range(N_REPS):
        X, y = strobl_null(600, rng)
        rf = RandomForestClassifier(n_estimators=40, random_state=rep, n_jobs=1)
        rf.fit(X[:300], y[:300])
        res = treeimp.explain(rf, X[300:], y[300:], random_state=rep)
        z.append((res.table["mdi_oob"] / res.stderr["mdi_oob"]).to_numpy())
    z = np.ravel(z)
    assert abs(z.mean()) <= 0.3 and 0.7 <= z.std(ddof=1) <= 1.5, (z.mean(), z.std(ddof=1))

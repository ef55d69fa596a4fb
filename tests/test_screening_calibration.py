"""ImportanceSelector's screening defaults (issue 32): the shadow-feature null (the
default for cross-fitted boosting) and its fallback, the row blocks, noise p-values on
null designs for both model kinds (forest out of bag, boosting cross-fitted), and power
on rare positives (the default booster, a class-balanced forest). Small, seeded data
sets; the truth is the design (which features enter y), never the code's own output."""

import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.ensemble import RandomForestClassifier

from treeimp import ImportanceSelector
from treeimp.measures.shadow_null import shadow_pvalues, zscores

xgb = pytest.importorskip("xgboost")


def forest(seed):
    return RandomForestClassifier(n_estimators=60, min_samples_leaf=10, random_state=seed,
                                  n_jobs=1)


def booster(seed):
    return xgb.XGBClassifier(n_estimators=40, max_depth=3, learning_rate=0.1, subsample=0.8,
                             random_state=seed, n_jobs=1)


def mixed_null(seed):
    """60 noise features (continuous, binary, 10 levels), y independent, 30% positives."""
    rng = np.random.default_rng(seed)
    n = 400
    X = np.column_stack([rng.normal(size=(n, 30)), rng.integers(0, 2, (n, 15)),
                         rng.integers(0, 10, (n, 15))]).astype(float)
    return X, (rng.random(n) < 0.3).astype(int)


def rare_null(seed):
    """60 normal noise features, y independent with 8% positives."""
    rng = np.random.default_rng(seed)
    n = 600
    return rng.normal(size=(n, 60)), (rng.random(n) < 0.08).astype(int)


def noise_pvalues(make, model, seeds, null):
    """The selector's p-values and standardised z-scores of every (noise) feature,
    pooled over data sets."""
    ps, zs = [], []
    for seed in seeds:
        X, y = make(seed)
        sel = ImportanceSelector(model(seed), null=null, random_state=seed)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
            sel.fit(X, y)
        res, m = sel.importances_, sel.method_
        z = zscores(res.table[m].to_numpy(), res.stderr[m].to_numpy())
        if sel.null_ == "shadow":  # the score the p-value is computed from
            z = z - sel.shadow_null_[0]
        ps.append(res.pvalues[m].to_numpy())
        zs.append(z[np.isfinite(z)])
    return np.concatenate(ps), np.concatenate(zs)


@pytest.mark.parametrize("make", [mixed_null, rare_null])
def test_shadow_null_recentres_cross_fitted_boosting(make):
    # the boosting default (cross-fitted, mdi_oob_centered): the t reference alone puts
    # the noise z-scores' centre at -0.3 to -0.5 here and its fraction of noise p < 0.05
    # at 0.004-0.025; the shadows' centre moves it to about 0, keeps the spread in
    # [0.85, 1.1] and the fraction at most 0.06 (issue 32's band is [0.03, 0.06]; these
    # small designs give 0.021-0.037 by XGBoost version, the study's rare null 0.023)
    # (the default null for cross-fitted boosting)
    p_t, z_t = noise_pvalues(make, booster, range(4), "t")
    p, z = noise_pvalues(make, booster, range(4), None)
    assert p.size == 240
    assert np.mean(z_t) < -0.2
    assert abs(np.mean(z)) < 0.2, np.mean(z)
    assert 0.85 <= np.std(z, ddof=1) <= 1.1, np.std(z, ddof=1)
    assert np.mean(p_t < 0.05) < np.mean(p < 0.05) <= 0.06, (np.mean(p_t < 0.05),
                                                              np.mean(p < 0.05))


def test_shadow_null_centres_the_forest_noise_scores():
    # forest out of bag: the shadows move the noise centre from below 0 to 0 and keep
    # the fraction p < 0.05 at most 0.06 (the band's lower end is not reached: these
    # small forests' noise z-scores are narrower than N(0, 1), sd 0.86)
    p_t, z_t = noise_pvalues(mixed_null, forest, range(4), "t")
    p, z = noise_pvalues(mixed_null, forest, range(4), "shadow")
    assert np.mean(z_t) < -0.1
    assert abs(np.mean(z)) < 0.1, np.mean(z)
    assert np.mean(p < 0.05) <= 0.06


def test_shadow_pvalues_uniform_for_exchangeable_normal_scores():
    # a feature's z-score and 200 shadows' drawn from one N(mu, 1): z less the shadows'
    # mean is N(0, 1 + 1/200) whatever mu, so p (t with 500 degrees of freedom) is
    # uniform up to that small excess spread
    rng = np.random.default_rng(0)
    p = np.concatenate([shadow_pvalues(rng.normal(mu, 1, 1), rng.normal(mu, 1, 200), 500)[0]
                        for mu in rng.uniform(-1, 1, 4000)])
    for a in (0.01, 0.05, 0.2, 0.5):
        assert abs(np.mean(p < a) - a) < 3 * np.sqrt(a * (1 - a) / p.size) + 1e-3, a


def test_shadow_pvalues_uniform_with_few_shadows():
    # five shadows: the centre's own error widens z - m to N(0, 1 + 1/5), and P(z - m >
    # t quantile) would be 0.065 at 0.05; scaled by sqrt(1 + s^2 / S), p stays uniform
    # (up to s being estimated)
    rng = np.random.default_rng(1)
    p = np.concatenate([shadow_pvalues(rng.normal(mu, 1, 1), rng.normal(mu, 1, 5), 500)[0]
                        for mu in rng.uniform(-1, 1, 20000)])
    for a in (0.01, 0.05, 0.2):
        assert abs(np.mean(p < a) - a) < 3 * np.sqrt(a * (1 - a) / p.size) + 1e-3, a


def test_unused_features_get_p_one_and_are_left_out_of_the_null():
    z = zscores([0.0, 0.2, -0.1, 0.0], [0.0, 0.1, 0.1, 0.05])
    assert np.isnan(z[0]) and z[3] == 0.0
    p, (m, s, count) = shadow_pvalues(z[:2], np.array([np.nan, -1.5, -0.5, 0.5]), 19)
    assert count == 3 and m == -0.5 and s == 1.0
    # z = 0.2 / 0.1 = 2 less the shadows' mean -0.5, over sqrt(1 + s^2 / S) with s = 1
    # and S = 3 used shadows: t(19) at 2.5 / sqrt(4 / 3)
    assert p[0] == 1.0
    assert p[1] == pytest.approx(stats.t.sf(2.5 / np.sqrt(4 / 3), 19), rel=1e-12)


def test_too_few_used_shadows_is_a_value_error():
    with pytest.raises(ValueError, match="only 2 of 4 shadow features"):
        shadow_pvalues(np.array([1.0]), np.array([np.nan, 0.5, np.nan, 1.0]), 19)


def rare_positives(seed):
    """20 normal features, x0..x3 relevant (log odds 0.8 per sd each), about 4% positives."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(1200, 20))
    eta = -4.2 + 0.8 * X[:, :4].sum(axis=1)
    return X, (rng.random(1200) < 1 / (1 + np.exp(-eta))).astype(int)


def test_default_null_keeps_most_rare_positive_features():
    # cross-fitted XGBoost: the t reference keeps under one of the four relevant
    # features on average (its noise z-scores centre below 0); the shadow null most of
    # them (more than half), with at most one noise feature per data set on average
    # (null=None: the default, the shadow null for cross-fitted boosting)
    kept = {"t": [], None: []}
    noise = {"t": [], None: []}
    for seed in range(4):
        X, y = rare_positives(seed)
        assert 0.025 < y.mean() < 0.06
        for null in kept:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                s = ImportanceSelector(booster(seed), null=null, random_state=seed).fit(X, y)
            kept[null].append(s.support_[:4].sum())
            noise[null].append(s.support_[4:].sum())
    assert np.mean(kept[None]) > 2.0, kept
    assert np.mean(noise[None]) <= 1.0, noise
    assert np.mean(kept[None]) > np.mean(kept["t"]) + 1.0, kept


def test_shadow_selector_frames_sparse_and_returned_estimator():
    pd = pytest.importorskip("pandas")
    sparse = pytest.importorskip("scipy.sparse")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] + 0.3 * rng.normal(size=200) > 0).astype(int)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    for data in (X, frame, sparse.csr_matrix(X)):
        sel = ImportanceSelector(forest(0).set_params(n_estimators=20), null="shadow",
                                 n_shadows=40, random_state=0)
        sel.fit(data, y)
        # 10 copies of 4 columns; the returned estimator and the result see the real ones
        assert sel.shadow_zscores_.shape == (40,)
        assert sel.estimator_.n_features_in_ == 4
        assert sel.importances_.feature_names == (["a", "b", "c", "d"] if data is frame
                                                  else ["x0", "x1", "x2", "x3"])
        assert sel.support_[0] and sel.transform(data).shape[0] == 200
        assert sel.importances_.qvalues[sel.method_].iloc[0] < 0.05
    assert ImportanceSelector(forest(0), random_state=0).fit(X, y).shadow_null_ is None


def test_shadow_copies_are_row_permutations_of_all_columns():
    # each copy: every real column with one row order of its own (the dependence among
    # the columns kept, the link to the rows broken), for arrays, frames and CSR alike
    pd = pytest.importorskip("pandas")
    sparse = pytest.importorskip("scipy.sparse")
    from treeimp.selector import _with_shadows

    X = np.random.default_rng(1).normal(size=(50, 3))
    names = ["a", "b", "c"]
    for data in (X, pd.DataFrame(X, columns=names), sparse.csr_matrix(X)):
        work, wnames = _with_shadows(data, names, 2, 7)
        dense = work.to_numpy() if hasattr(work, "to_numpy") else (
            work.toarray() if sparse.issparse(work) else work)
        assert dense.shape == (50, 9)
        assert wnames == names + [f"shadow{k}_{n}" for k in range(2) for n in names]
        np.testing.assert_array_equal(dense[:, :3], X)
        perms = []
        for k in range(2):
            copy = dense[:, 3 + 3 * k:6 + 3 * k]
            # the row of X each shadow row came from, found by its first column's value
            perm = np.argsort(X[:, 0])[np.searchsorted(np.sort(X[:, 0]), copy[:, 0])]
            np.testing.assert_array_equal(copy, X[perm])
            assert sorted(perm) == list(range(50)) and not np.array_equal(perm, np.arange(50))
            perms.append(perm)
        assert not np.array_equal(perms[0], perms[1])


@pytest.mark.parametrize("kwargs, match", [
    ({"null": "perm"}, "null must be one of"),
    ({"null": "shadow", "n_shadows": 2}, "n_shadows must be None or an integer >= 3"),
    ({"null": "shadow", "n_shadows": 10.0}, "n_shadows must be"),
    ({"null": "shadow", "groups": {"g": [0, 1]}}, "groups are tested with null='t' only"),
])
def test_shadow_parameters_checked(kwargs, match):
    X = np.random.default_rng(0).normal(size=(60, 3))
    y = np.arange(60) % 2
    with pytest.raises(ValueError, match=match):
        ImportanceSelector(forest(0), **kwargs).fit(X, y)


def test_shadow_name_clash_is_a_value_error():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame(np.random.default_rng(0).normal(size=(60, 2)),
                     columns=["a", "shadow0_a"])
    with pytest.raises(ValueError, match="named 'shadow0_a', the name of a shadow"):
        ImportanceSelector(forest(0), null="shadow").fit(X, np.arange(60) % 2)


def test_default_null_is_shadow_for_cross_fitted_boosting_only():
    # the default (null=None): the shadow null for cross-fitted boosting, the t null
    # for forests out of bag and for boosting with groups (groups need the t null)
    X, y = rare_positives(0)
    X, y = X[:400], y[:400] | (X[:400, 0] > 1.5)
    boost = ImportanceSelector(booster(0), random_state=0).fit(X, y)
    assert boost.null_ == "shadow" and boost.shadow_null_[2] >= 3
    explicit = ImportanceSelector(booster(0), null="shadow", random_state=0).fit(X, y)
    np.testing.assert_array_equal(boost.importances_.pvalues.to_numpy(),
                                  explicit.importances_.pvalues.to_numpy())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
        rf = ImportanceSelector(forest(0), random_state=0).fit(X, y)
    assert rf.null_ == "t" and rf.shadow_null_ is None
    grouped = ImportanceSelector(booster(0), groups={"g": [0, 1]}, random_state=0).fit(X, y)
    assert grouped.null_ == "t" and grouped.shadow_null_ is None


@pytest.mark.parametrize("null", [None, "shadow"])
def test_too_few_used_shadows_falls_back_to_the_t_null(null):
    # 30 rows, 3 features, 5 shallow trees: the booster splits on x0 only and uses no
    # shadow; the selector warns and gives exactly what null="t" gives
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3))
    y = (X[:, 0] > 0).astype(int)
    model = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1, random_state=0)
    with pytest.warns(UserWarning, match=r"only 0 of 102 shadow features .* fewer than 3"):
        sel = ImportanceSelector(model, null=null, n_blocks=2, random_state=0).fit(X, y)
    ref = ImportanceSelector(model, null="t", n_blocks=2, random_state=0).fit(X, y)
    assert sel.null_ == "t" and sel.shadow_null_ is None and sel.shadow_zscores_ is None
    np.testing.assert_array_equal(sel.support_, ref.support_)
    pd_testing = pytest.importorskip("pandas").testing
    pd_testing.assert_frame_equal(sel.importances_.pvalues, ref.importances_.pvalues)
    assert sel.estimator_.n_features_in_ == 3


def test_default_row_blocks_by_setting():
    # n_blocks=None: 50 blocks out of bag (t(49)), 20 with fewer than 50 rows; 20 per
    # fold cross-fitted (t(99) over 5 folds)
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
    rf = ImportanceSelector(forest(0).set_params(n_estimators=30), random_state=0).fit(X, y)
    assert rf.n_blocks_ == 50 and rf.importances_.dof == 49
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
        small = ImportanceSelector(forest(0).set_params(n_estimators=30, min_samples_leaf=2),
                                   random_state=0).fit(X[:40], y[:40])
    assert small.n_blocks_ == 20 and small.importances_.dof == 19
    xg = ImportanceSelector(booster(0), random_state=0).fit(X, y)
    assert xg.n_blocks_ == 20 and xg.importances_.dof == 99
    assert ImportanceSelector(forest(0), n_blocks=7, random_state=0).fit(X, y).n_blocks_ == 7


def test_class_balanced_forest_keeps_most_rare_positive_features():
    # forest out of bag on 4% positives: fitted with class_weight="balanced_subsample"
    # (screened with ufi, unbiased for class-weighted forests) it keeps most of the four
    # relevant features and more than the unweighted forest, with at most one noise
    # feature per data set on average (balance_classes=False: the forests as given)
    kept = {None: [], "balanced_subsample": []}
    noise = {None: [], "balanced_subsample": []}
    for seed in range(4):
        X, y = rare_positives(seed)
        for cw in kept:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
                s = ImportanceSelector(forest(seed).set_params(class_weight=cw),
                                       balance_classes=False, random_state=seed).fit(X, y)
            assert s.method_ == ("ufi" if cw else "mdi_oob_centered")
            kept[cw].append(s.support_[:4].sum())
            noise[cw].append(s.support_[4:].sum())
    assert np.mean(kept["balanced_subsample"]) > 2.0, kept
    assert np.mean(noise["balanced_subsample"]) <= 1.0, noise
    assert np.mean(kept["balanced_subsample"]) > np.mean(kept[None]) + 1.0, kept


def test_default_forest_keeps_most_rare_positive_features():
    # forest out of bag on 4% positives with the selector's defaults: the screening fit
    # is class-balanced (balance_classes=None, the smallest class below RARE_CLASS_SHARE)
    # and keeps most of the four relevant features, more than the unweighted forest
    # (balance_classes=False), with at most one noise feature per data set on average
    kept = {None: [], False: []}
    noise = {None: [], False: []}
    for seed in range(4):
        X, y = rare_positives(seed)
        for balance in kept:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
                s = ImportanceSelector(forest(seed), balance_classes=balance,
                                       random_state=seed).fit(X, y)
            assert s.screening_class_weight_ == (None if balance is False
                                                 else "balanced_subsample")
            assert s.method_ == ("mdi_oob_centered" if balance is False else "ufi")
            kept[balance].append(s.support_[:4].sum())
            noise[balance].append(s.support_[4:].sum())
    assert np.mean(kept[None]) > 2.0, kept
    assert np.mean(noise[None]) <= 1.0, noise
    assert np.mean(kept[None]) > np.mean(kept[False]) + 1.0, kept


def test_balanced_screening_returns_the_callers_estimator():
    # the class-balanced screening fit changes the test, not the returned model:
    # estimator_ is the caller's forest (class_weight None) fitted on all rows, and
    # predicts what that forest fitted directly predicts
    X, y = rare_positives(1)
    s = ImportanceSelector(forest(1), random_state=1).fit(X, y)
    assert s.screening_class_weight_ == "balanced_subsample"
    assert s.estimator_.get_params()["class_weight"] is None
    direct = forest(1).fit(X, y)
    np.testing.assert_array_equal(s.estimator_.predict_proba(X), direct.predict_proba(X))


def test_balanced_classes_leave_the_default_screening_unchanged():
    # 30% positives are above RARE_CLASS_SHARE: balance_classes=None gives exactly the
    # unweighted screening (balance_classes=False); True balances whatever the shares;
    # a class_weight the caller set is used as it is; boosting is never re-weighted
    rng = np.random.default_rng(3)
    X = rng.normal(size=(500, 6))
    y = (X[:, 0] + rng.normal(size=500) > 0.5).astype(int)
    assert 0.2 < y.mean() < 0.4
    auto = ImportanceSelector(forest(3), random_state=3).fit(X, y)
    off = ImportanceSelector(forest(3), balance_classes=False, random_state=3).fit(X, y)
    assert auto.screening_class_weight_ is None and auto.method_ == "mdi_oob_centered"
    np.testing.assert_array_equal(auto.importances_.pvalues.to_numpy(),
                                  off.importances_.pvalues.to_numpy())
    on = ImportanceSelector(forest(3), balance_classes=True, random_state=3).fit(X, y)
    assert on.screening_class_weight_ == "balanced_subsample" and on.method_ == "ufi"
    own = ImportanceSelector(forest(3).set_params(class_weight={0: 1.0, 1: 3.0}),
                             balance_classes=True, random_state=3).fit(X, y)
    assert own.screening_class_weight_ is None
    assert own.estimator_.get_params()["class_weight"] == {0: 1.0, 1: 3.0}
    Xr, yr = rare_positives(0)
    Xr, yr = Xr[:400], yr[:400] | (Xr[:400, 0] > 1.5)
    boost = ImportanceSelector(booster(0), balance_classes=True, random_state=0).fit(Xr, yr)
    assert boost.screening_class_weight_ is None


@pytest.mark.parametrize("value", ["auto", 1, 0.5])
def test_balance_classes_checked(value):
    X, y = rare_positives(0)
    with pytest.raises(ValueError, match="balance_classes must be None, True or False"):
        ImportanceSelector(forest(0), balance_classes=value).fit(X[:100], y[:100])

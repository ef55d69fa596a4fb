"""ImportanceSelector: scikit-learn estimator checks, screening on a synthetic task with
known informative, ID and noise columns (out-of-bag and held-out paths), pipelines,
grid search, clone, DataFrames, the no-feature warning and parameter errors."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from treeimp import ImportanceSelector

N_INFORMATIVE, N_NOISE = 6, 10
ID_COLUMN = N_INFORMATIVE


def _task(n=1500, seed=0, regression=False, scale=3.0):
    """Columns 0-5 drive y, column 6 is a row ID (unique per row, no signal), 7-16 noise."""
    rng = np.random.default_rng(seed)
    informative = rng.normal(size=(n, N_INFORMATIVE))
    row_id = rng.permutation(n).astype(float)[:, None]
    noise = rng.normal(size=(n, N_NOISE))
    X = np.hstack([informative, row_id, noise])
    signal = informative @ (scale * np.array([1.5, -1.5, 1.2, -1.2, 1.0, 1.0]))
    if regression:
        return X, signal + rng.normal(scale=1.0, size=n)
    return X, (signal + rng.logistic(size=n) > 0).astype(int)


def _check_screening(sel):
    """All informative columns kept; the ID column and every noise column dropped.

    Exact with the fixed seeds used here. Measured over data seeds 0-9 (same models):
    the forest tests never kept a noise column (0 of 30 runs); the boosting tests kept
    one in 2 of 20 runs (and missed an informative one in 3), which FDR control at 0.05
    allows, so a boosting failure after a library upgrade may be bad luck of the draw
    rather than a bug: rerun with other seeds before suspecting the selector."""
    kept = set(sel.get_support(indices=True).tolist())
    assert set(range(N_INFORMATIVE)) <= kept, sel.importances_
    assert kept == set(range(N_INFORMATIVE)), sel.importances_  # no ID, no noise column


def _small_forest(**kw):
    return RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0, n_jobs=1, **kw)


# ----------------------------------------------------------- scikit-learn estimator checks
# Checks that cannot pass for this estimator, each with the reason:
EXPECTED_FAILED = {
    # Zero weights versus dropped rows: the random train/validation split and the
    # bootstrap draws differ when rows are removed, so the selection differs. (The
    # scikit-learn forests and gradient boosting fail this check for the same reason.)
    "check_sample_weight_equivalence_on_dense_data":
        "random row split / bootstrap is not weight-aware",
    "check_sample_weight_equivalence_on_sparse_data":
        "random row split / bootstrap is not weight-aware",
}


@parametrize_with_checks(
    [ImportanceSelector(_small_forest(), n_blocks=2, random_state=0),
     ImportanceSelector(_small_forest(), oob=False, n_blocks=2, validation_fraction=0.5,
                        random_state=0),
     # cross-fitted boosting: the shadow null by default, the t null where the checks'
     # tiny data sets leave too few shadows used
     ImportanceSelector(GradientBoostingClassifier(n_estimators=5, max_depth=2,
                                                   random_state=0), n_blocks=2,
                        random_state=0)],
    expected_failed_checks=lambda est: EXPECTED_FAILED,
)
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        # the checks' tiny data sets leave no feature significant
        warnings.filterwarnings("ignore", message="ImportanceSelector kept no feature")
        warnings.filterwarnings("ignore", message="No features were selected")
        warnings.filterwarnings("ignore", message="ImportanceSelector: only")
        check(estimator)


# ----------------------------------------------------------------------- screening
@pytest.fixture(scope="module")
def task():
    return _task()


def test_screening_random_forest_oob(task):
    X, y = task
    rf = RandomForestClassifier(n_estimators=40, min_samples_leaf=3, random_state=0,
                                n_jobs=1)
    sel = ImportanceSelector(rf, random_state=0).fit(X, y)
    # out-of-bag path: the forest saw every row
    assert sel.estimator_.estimators_[0].tree_.weighted_n_node_samples[0] == len(X)
    assert sel.importances_.n_rows == len(X)
    _check_screening(sel)
    # the q-values the support comes from are the Importances' own
    assert sel.method_ == "mdi_oob_centered"  # the forest default
    q = sel.importances_.qvalues[sel.method_].to_numpy()
    np.testing.assert_array_equal(sel.support_, q < 0.05)
    assert sel.transform(X).shape == (len(X), int(sel.support_.sum()))


def test_screening_forest_regressor_ufi():
    X, y = _task(n=1000, regression=True)
    rf = RandomForestRegressor(n_estimators=30, min_samples_leaf=5, random_state=0, n_jobs=1)
    sel = ImportanceSelector(rf, method="ufi", random_state=0).fit(X, y)
    _check_screening(sel)


def test_held_out_path_forest(task):
    X, y = task
    rf = RandomForestClassifier(n_estimators=30, min_samples_leaf=3, random_state=0,
                                n_jobs=1)
    sel = ImportanceSelector(rf, oob=False, cv=None, validation_fraction=0.3,
                             random_state=0)
    sel.fit(X, y)
    n_val = int(np.ceil(0.3 * len(X)))
    assert sel.importances_.n_rows == n_val
    assert sel.estimator_.estimators_[0].tree_.weighted_n_node_samples[0] == len(X) - n_val
    _check_screening(sel)


# Boosting importances on held-out rows are noisier than out-of-bag forest importances
# (their jackknife standard errors are calibrated: they match the spread over independent
# validation sets), so these two hold out 40% of the rows rather than the default 25%.
def test_screening_gradient_boosting_held_out(task):
    X, y = task
    gb = GradientBoostingClassifier(n_estimators=60, max_depth=3, random_state=0)
    sel = ImportanceSelector(gb, cv=None, validation_fraction=0.4, random_state=0).fit(X, y)
    assert sel.importances_.kind == "boosting"
    assert sel.importances_.n_rows == 600
    _check_screening(sel)


def test_screening_xgboost_held_out(task):
    xgb = pytest.importorskip("xgboost")
    X, y = task
    model = xgb.XGBClassifier(n_estimators=40, max_depth=3, learning_rate=0.1, n_jobs=1,
                              random_state=0)
    sel = ImportanceSelector(model, method="ufi", cv=None, validation_fraction=0.4,
                             random_state=0).fit(X, y)
    assert sel.importances_.kind == "boosting"
    assert sel.importances_.n_rows == 600
    _check_screening(sel)


def test_cross_fitted_path_evaluates_every_row():
    X, y = _task(n=600)
    gb = GradientBoostingClassifier(n_estimators=20, max_depth=2, random_state=0)
    sel = ImportanceSelector(gb, cv=3, random_state=0).fit(X, y)
    assert sel.importances_.n_rows == 600  # every row, each by a model that did not see it
    assert sel.importances_.dof == 3 * sel.n_blocks_ - 1  # one jackknife over all blocks
    assert sel.method_ == "mdi_oob_centered" and sel.importances_.kind == "boosting"
    # estimator_ is a clone fitted on all rows
    assert sel.estimator_.train_score_.shape == (20,)
    np.testing.assert_array_equal(
        sel.estimator_.predict(X),
        clone(gb).fit(X, y).predict(X))
    assert set(range(3)) <= set(sel.get_support(indices=True).tolist())


def test_stratified_split_keeps_class_shares():
    X, y = _task(n=400)
    y = np.where(np.arange(400) < 40, 2, y)  # a rare third class, 10% of the rows
    # ExtraTrees without bootstrap has no out-of-bag rows: held-out path by default
    et = ExtraTreesClassifier(n_estimators=10, random_state=0, n_jobs=1)
    sel = ImportanceSelector(et, cv=None, validation_fraction=0.25, n_blocks=5,
                             random_state=0).fit(X, y)
    assert sel.importances_.n_rows == 100
    # every tree saw the same 300 training rows, 30 of them (10%) from the rare class
    root = sel.estimator_.estimators_[0].tree_
    assert root.weighted_n_node_samples[0] == 300
    counts = root.value[0, 0] / root.value[0, 0].sum() * 300
    np.testing.assert_allclose(counts[2], 30.0)
    np.testing.assert_allclose(counts, np.bincount(y) * 0.75, atol=1.0)


# ----------------------------------------------------------- scikit-learn integration
def test_pipeline_cross_val_and_grid_search():
    X, y = _task(n=600, seed=1)
    rf = RandomForestClassifier(n_estimators=15, min_samples_leaf=3, random_state=0,
                                n_jobs=1)
    pipe = Pipeline([("select", ImportanceSelector(rf, random_state=0)),
                     ("model", LogisticRegression())])
    scores = cross_val_score(pipe, X, y, cv=3, error_score="raise")
    assert scores.shape == (3,) and np.all(scores > 0.7)
    grid = GridSearchCV(pipe, {"select__alpha": [0.05, 0.2]}, cv=2, error_score="raise")
    grid.fit(X, y)
    assert grid.best_params_["select__alpha"] in (0.05, 0.2)
    assert set(grid.cv_results_["param_select__alpha"]) == {0.05, 0.2}
    assert grid.best_estimator_.named_steps["select"].alpha == grid.best_params_[
        "select__alpha"]


def test_clone_round_trip(task):
    X, y = task
    sel = ImportanceSelector(_small_forest(), method="ufi", alpha=0.1,
                             validation_fraction=0.4, oob=False, n_blocks=4, random_state=3)
    sel.fit(X[:300], y[:300])
    twin = clone(sel)
    assert not hasattr(twin, "support_") and not hasattr(twin, "estimator_")
    p, q = sel.get_params(deep=False), twin.get_params(deep=False)
    est_p, est_q = p.pop("estimator"), q.pop("estimator")
    assert p == q
    assert est_p is not est_q and est_p.get_params() == est_q.get_params()
    np.testing.assert_array_equal(twin.fit(X[:300], y[:300]).support_, sel.support_)


def test_dataframe_names_and_pandas_output(task):
    X, y = task
    cols = ([f"signal_{j}" for j in range(N_INFORMATIVE)] + ["row_id"]
            + [f"noise_{j}" for j in range(N_NOISE)])
    df = pd.DataFrame(X, columns=cols)
    rf = RandomForestClassifier(n_estimators=30, min_samples_leaf=3, random_state=0,
                                n_jobs=1)
    sel = ImportanceSelector(rf, random_state=0).set_output(transform="pandas").fit(df, y)
    np.testing.assert_array_equal(sel.feature_names_in_, cols)
    assert list(sel.importances_.table.index) == cols
    out = sel.get_feature_names_out()
    assert set(out) >= {f"signal_{j}" for j in range(N_INFORMATIVE)}
    assert "row_id" not in out
    Xt = sel.transform(df)
    assert isinstance(Xt, pd.DataFrame) and list(Xt.columns) == list(out)
    with pytest.raises(ValueError, match="feature names"):
        sel.transform(df.rename(columns={"row_id": "other"}))


def test_dataframe_with_categories_and_nan_reaches_the_model():
    rng = np.random.default_rng(0)
    n = 1500
    df = pd.DataFrame(rng.normal(size=(n, 4)), columns=["a0", "a1", "a2", "a3"])
    df["code"] = pd.Categorical(rng.choice(list("pqrstu"), n))
    df.loc[rng.random(n) < 0.1, "a0"] = np.nan
    logit = (3 * np.nan_to_num(df["a0"]) + 2 * df["a1"]
             + 3 * df["code"].isin(["p", "q", "r"]).astype(float) - 1.5)
    y = (logit + rng.logistic(size=n) > 0).astype(int)
    hgb = HistGradientBoostingClassifier(max_iter=40, categorical_features="from_dtype",
                                         random_state=0)
    sel = ImportanceSelector(hgb, validation_fraction=0.4, random_state=0).fit(df, y)
    # cross-fitted boosting: the shadow null (its category shadows stay categories) keeps
    # the three informative columns; at FDR 0.05 it may keep a noise column by chance
    # (here a3: z = 1.65 less the shadows' centre -0.40, p = 0.022, fourth of five)
    assert sel.null_ == "shadow"
    kept = list(sel.get_feature_names_out())
    assert {"a0", "a1", "code"} <= set(kept) and len(kept) <= 4, kept
    t_null = ImportanceSelector(hgb, null="t", random_state=0).fit(df, y)
    assert list(t_null.get_feature_names_out()) == ["a0", "a1", "code"]
    # the category column reached the model as a category (not as numbers)
    assert sel.estimator_.is_categorical_.tolist() == [False] * 4 + [True]


def test_no_feature_selected_warns_and_keeps_none():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 5))
    y = rng.integers(0, 2, 400)
    rf = RandomForestClassifier(n_estimators=20, min_samples_leaf=5, random_state=0,
                                n_jobs=1)
    with pytest.warns(UserWarning, match="kept no feature"):
        sel = ImportanceSelector(rf, alpha=0.01, random_state=0).fit(X, y)
    assert not sel.support_.any()
    with pytest.warns(UserWarning, match="No features were selected"):
        assert sel.transform(X).shape == (400, 0)


def test_sample_weight_reaches_fit_and_evaluation(task):
    X, y = task
    w = np.where(np.arange(len(X)) % 2 == 0, 1.0, 3.0)
    # no bootstrap: the root's training weight is the training rows' total weight
    et = ExtraTreesClassifier(n_estimators=5, max_depth=4, random_state=0, n_jobs=1)
    sel = ImportanceSelector(et, cv=None, random_state=0).fit(X, y, sample_weight=w)
    ref = ImportanceSelector(et, cv=None, random_state=0).fit(X, y)
    root = sel.estimator_.estimators_[0].tree_
    assert root.weighted_n_node_samples[0] > 1.5 * 1125
    assert ref.estimator_.estimators_[0].tree_.weighted_n_node_samples[0] == 1125
    assert not np.allclose(sel.importances_.table.to_numpy(),
                           ref.importances_.table.to_numpy())
    with pytest.raises(ValueError, match=r"sample_weight has shape \(3,\)"):
        ImportanceSelector(et).fit(X, y, sample_weight=[1.0, 2.0, 3.0])


@pytest.mark.parametrize("params, match", [
    ({"method": "mdi"}, "no p-values"),
    ({"method": "gain"}, r"method must be one of \['mdi_oob', 'mdi_oob_centered', 'ufi'"),
    ({"alpha": 0.0}, r"alpha must be a number in \(0, 1\)"),
    ({"alpha": 1.5}, r"alpha must be a number in \(0, 1\)"),
    ({"validation_fraction": 1.0}, r"validation_fraction must be a number in \(0, 1\)"),
    ({"oob": "yes"}, "oob must be None, True or False"),
    ({"n_blocks": 1}, "n_blocks must be None or an integer >= 2"),
    ({"n_blocks": 500}, "n_blocks=500 is more than the 300 rows"),
    ({"oob": False, "cv": None, "n_blocks": 100},
     "holds out 75 rows, fewer than n_blocks=100"),
    ({"oob": False, "n_blocks": 100}, "a fold holds out 60 rows, fewer than n_blocks=100"),
    ({"cv": 1}, "cv must be None, an integer >= 2 or a splitter"),
])
def test_bad_params(params, match):
    X, y = _task(n=300)
    with pytest.raises(ValueError, match=match):
        ImportanceSelector(_small_forest(), **params).fit(X, y)


def test_oob_true_needs_bagged_forest():
    X, y = _task(n=200)
    for est in (ExtraTreesClassifier(n_estimators=5), GradientBoostingClassifier()):
        with pytest.raises(ValueError, match="oob=True needs a bagged forest"):
            ImportanceSelector(est, oob=True).fit(X, y)
    with pytest.raises(TypeError, match="must be an unfitted tree ensemble"):
        ImportanceSelector(None).fit(X, y)

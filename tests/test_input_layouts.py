"""Input layouts: predict_raw and apply are the same for every way of holding the same
numbers, and equal the library's own prediction on that very layout.

Layouts: float64 and float32, C and Fortran order, strided views (every other row,
every other column of a wider array), integer arrays (int64, int32, uint8) and pandas
DataFrames of float32 / float64 / int columns. One model per library: scikit-learn
RandomForest and HistGradientBoosting, XGBoost, LightGBM (the boosting models with a
categorical column of small integer codes). The evaluation rows hold values that are
exact in float32 (so every float layout holds the same numbers), NaN, and values at the
models' thresholds; the integer rows are integers.
"""

import functools
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestClassifier
from threadpoolctl import threadpool_limits

import treeimp

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

P = 5
CAT = 3  # column of small integer codes, categorical for the boosting models

pytestmark = pytest.mark.filterwarnings("ignore:X has feature names",
                                        "ignore:X does not have valid feature names")


@pytest.fixture(autouse=True)
def _one_openmp_thread():
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def _train_data(n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(scale=3.0, size=(n, P))
    X[:, CAT] = rng.integers(0, 6, n)
    X[rng.random((n, P)) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    f = Z[:, 0] + 0.3 * Z[:, 1] ** 2 - Z[:, 2] * (Z[:, 4] > 0) + 4.0 * np.isin(X[:, CAT], [1, 4])
    return X, f + rng.normal(scale=0.3, size=n)


def _float_rows(ens, n=240, seed=1):
    """Rows exact in float32: thresholds (rounded to float32), NaN, zeros, codes."""
    rng = np.random.default_rng(seed)
    X = np.round(rng.normal(scale=3.0, size=(n, P)) * 64) / 64
    split = (ens.left >= 0) & ~ens.is_categorical
    for j in range(P):
        thr = ens.threshold[split & (ens.feature == j)]
        thr = thr[np.isfinite(thr)].astype(np.float32).astype(np.float64)
        if thr.size:
            pick = rng.random(n) < 0.4
            X[pick, j] = rng.choice(thr, pick.sum())
    X[:, CAT] = rng.integers(0, 8, n)
    X[rng.random((n, P)) < 0.06] = np.nan
    X[rng.random((n, P)) < 0.04] = 0.0
    assert np.array_equal(X.astype(np.float32).astype(np.float64), X, equal_nan=True)
    return X


def _int_rows(n=240, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 9, size=(n, P))
    X[:, CAT] = rng.integers(0, 8, n)
    return X


def _float_layouts(X):
    wide = np.full((2 * X.shape[0], 2 * P), 7.0)
    wide[::2, ::2] = X
    wide32 = wide.astype(np.float32)
    return {
        "float64": np.ascontiguousarray(X),
        "float32": X.astype(np.float32),
        "float64-F": np.asfortranarray(X),
        "float32-F": np.asfortranarray(X.astype(np.float32)),
        "float64-strided": wide[::2, ::2],
        "float32-strided": wide32[::2, ::2],
        "float64-rows": np.repeat(X, 2, axis=0)[::2],
        "float32-frame": pd.DataFrame(X.astype(np.float32)),
        "float64-frame": pd.DataFrame(X),
    }


def _int_layouts(X):
    return {
        "int64": X.astype(np.int64),
        "int32": X.astype(np.int32),
        "uint8": X.astype(np.uint8),
        "int64-F": np.asfortranarray(X.astype(np.int64)),
        "int64-strided": np.repeat(np.repeat(X, 2, axis=0), 2, axis=1)[::2, ::2],
        "int-frame": pd.DataFrame(X.astype(np.int64)),
    }


# ------------------------------------------------------------------ models + truth
@functools.cache
def _models():
    X, f = _train_data()
    rf = RandomForestClassifier(n_estimators=10, max_depth=8, random_state=0).fit(
        X, np.digitize(f, [-1.0, 1.5]))
    hgb = HistGradientBoostingRegressor(max_iter=15, max_leaf_nodes=8, early_stopping=False,
                                        categorical_features=[CAT], random_state=0).fit(X, f)
    types = ["q"] * P
    types[CAT] = "c"
    booster = xgb.train({"max_depth": 4, "eta": 0.3, "max_cat_to_onehot": 1, "seed": 0},
                        xgb.DMatrix(X, f, missing=np.nan, feature_types=types,
                                    enable_categorical=True), 10)
    lgbm = lgb.train({"objective": "regression", "num_leaves": 9, "min_data_per_group": 5,
                      "cat_smooth": 1.0, "verbose": -1, "num_threads": 1, "seed": 0},
                     lgb.Dataset(X, f, categorical_feature=[CAT]), num_boost_round=10)
    return {"rf": rf, "hgb": hgb, "xgboost": booster, "lightgbm": lgbm}


def _xgb_matrix(X):
    types = ["q"] * P
    types[CAT] = "c"
    return xgb.DMatrix(X, missing=np.nan, feature_types=types, enable_categorical=True)


def _lightgbm_leaf_numbers(ens, nodes):
    """treeimp node ids (within each tree) -> LightGBM leaf numbers (see apply)."""
    n_leaves = np.diff(ens.tree_offsets) // 2 + 1  # 2L - 1 nodes per tree
    return nodes - (n_leaves - 1)[None, :]


def _library(name, model, X):
    """(margin, leaves or None) as the library computes them on this very layout."""
    if name == "rf":
        return model.predict_proba(X), model.apply(X)
    if name == "hgb":
        return model._raw_predict(X), None
    if name == "xgboost":
        margin = model.predict(_xgb_matrix(X), output_margin=True)
        leaves = model.predict(_xgb_matrix(X), pred_leaf=True)
        return margin.reshape(len(margin), -1), leaves.reshape(len(margin), -1)
    margin = model.predict(X, raw_score=True)
    return margin.reshape(len(margin), -1), model.predict(X, pred_leaf=True)


def _check_against_library(name, ens, X, margin, leaves):
    theirs, their_leaves = _library(name, _models()[name], X)
    theirs = np.asarray(theirs, dtype=np.float64).reshape(margin.shape)
    rtol = 1e-5 if name == "xgboost" else 1e-9  # XGBoost sums in float32
    np.testing.assert_allclose(margin, theirs, rtol=rtol,
                               atol=rtol * max(1.0, np.abs(theirs).max()))
    if their_leaves is None:
        return
    if name == "lightgbm":
        leaves = _lightgbm_leaf_numbers(ens, leaves)
    np.testing.assert_array_equal(leaves, np.asarray(their_leaves).reshape(leaves.shape))


@pytest.mark.parametrize("name", ["rf", "hgb", "xgboost", "lightgbm"])
@pytest.mark.parametrize("kind", ["float", "int"])
def test_layouts_route_alike_and_match_the_library(name, kind):
    ens = treeimp.parse(_models()[name])
    assert ens.is_categorical.any() == (name != "rf")
    if kind == "float":
        layouts = _float_layouts(_float_rows(ens))
    else:
        layouts = _int_layouts(_int_rows())
    reference = None
    for label, X in layouts.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            margin, leaves = ens.predict_raw(X), ens.apply(X)
        if reference is None:
            reference = (label, margin, leaves)
        else:
            ref_label, ref_margin, ref_leaves = reference
            np.testing.assert_array_equal(margin, ref_margin,
                                          err_msg=f"{label} vs {ref_label} margin")
            np.testing.assert_array_equal(leaves, ref_leaves,
                                          err_msg=f"{label} vs {ref_label} leaves")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            _check_against_library(name, ens, X, margin, leaves)


def test_layout_views_are_not_copied_or_modified():
    """A strided float view is routed in place: no copy of X, and X is left unchanged."""
    ens = treeimp.parse(_models()["rf"])
    X = _float_rows(ens)
    wide = np.full((2 * X.shape[0], 2 * P), 7.0)
    wide[::2, ::2] = X
    view = wide[::2, ::2]
    before = wide.copy()
    from treeimp.inputs.rows import RowSource

    (start, chunk), = list(RowSource(view, ens).chunks())
    assert start == 0 and chunk is view
    ens.predict_raw(view)
    np.testing.assert_array_equal(wide, before)

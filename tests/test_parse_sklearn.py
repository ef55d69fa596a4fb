"""scikit-learn parsers: raw margins and leaves equal scikit-learn's own on edge-case rows.

Every comparison is against the library's own prediction (predict_proba / predict /
decision_function / _raw_predict / apply) on rows with values exactly at the split
thresholds and one float32 ulp either side, zeros, huge values and NaN where the model
accepts them; unseen, negative and missing categories for HistGradientBoosting.
"""

import functools

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression
from sklearn.tree import (
    DecisionTreeClassifier,
    DecisionTreeRegressor,
    ExtraTreeClassifier,
    ExtraTreeRegressor,
)
from threadpoolctl import threadpool_limits

from tests.edge_rows import threshold_rows
from treeimp.parsers import parse
from treeimp.parsers.sklearn_forest import parse_sklearn_forest
from treeimp.parsers.sklearn_gb import parse_sklearn_gb
from treeimp.parsers.sklearn_hgb import parse_sklearn_hgb

N_TREES = 12

# sklearn's own finiteness check sums rows holding +-3e38 and overflows
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered in reduce")


@pytest.fixture(autouse=True)
def _one_openmp_thread():
    """HistGradientBoosting's OpenMP threads spin for seconds on a busy 2-core machine."""
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


def _data(task, n=300, p=5, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, 3] = np.round(X[:, 3] * 2)  # ties: thresholds between repeated values
    f = X[:, 0] + 0.8 * X[:, 1] ** 2 - 0.6 * X[:, 2] * (X[:, 3] > 0)
    if nan:
        X[rng.random((n, p)) < 0.1] = np.nan
        f = f + 0.7 * np.isnan(X[:, 0])
    if task == "regression":
        y = f + rng.normal(scale=0.5, size=n)
    elif task == "positive":
        y = rng.gamma(2.0, np.exp(f / 3) / 2.0)
    elif task == "count":
        y = rng.poisson(np.exp(f / 3)).astype(float)
    elif task == "binary":
        y = np.where(f + rng.logistic(size=n) > 0.8, "yes", "no")
    elif task == "multiclass":
        y = np.digitize(f + rng.normal(scale=0.5, size=n), [0.3, 1.3])
    else:
        raise ValueError(task)
    return X, y


def _rows(ens, X, *, seed, nan, inf=False):
    """threshold_rows minus what scikit-learn refuses (inf everywhere, NaN where no NaN)."""
    rng = np.random.default_rng(seed)
    R = threshold_rows(ens, np.nan_to_num(X), rng=rng, n_rows=300, nonfinite=inf, huge=True)
    if not inf:  # a NaN-only split has threshold inf and threshold_rows copies it
        R[np.isinf(R)] = np.finfo(np.float32).max
    if nan:
        R[rng.random(R.shape) < 0.08] = np.nan
    return R


def _close(ours, theirs):
    theirs = np.asarray(theirs, dtype=np.float64).reshape(ours.shape)
    scale = max(1.0, float(np.max(np.abs(theirs))))
    np.testing.assert_allclose(ours, theirs, rtol=1e-6, atol=1e-6 * scale)


# ------------------------------------------------------------------ trees and forests
FOREST_MODELS = [
    (DecisionTreeClassifier, dict(max_depth=8)),
    (ExtraTreeClassifier, dict(max_depth=8)),
    (RandomForestClassifier, dict(n_estimators=N_TREES, max_depth=8)),
    (ExtraTreesClassifier, dict(n_estimators=N_TREES, max_depth=8)),
    (DecisionTreeRegressor, dict(max_depth=8)),
    (ExtraTreeRegressor, dict(max_depth=8)),
    (RandomForestRegressor, dict(n_estimators=N_TREES, max_depth=8)),
    (ExtraTreesRegressor, dict(n_estimators=N_TREES, max_depth=8)),
]


def _allow_nan(model):
    # scikit-learn >= 1.6 has __sklearn_tags__; 1.4/1.5 the dict of _get_tags()
    if hasattr(model, "__sklearn_tags__"):
        return bool(model.__sklearn_tags__().input_tags.allow_nan)
    return bool(model._get_tags()["allow_nan"])


def _forest_cases():
    for cls, kw in FOREST_MODELS:
        tasks = ("binary", "multiclass") if cls.__name__.endswith("Classifier") else (
            "regression",)
        for task in tasks:
            for nan in (False, True):
                yield pytest.param(cls, kw, task, nan, id=f"{cls.__name__}-{task}-nan{nan}")


@pytest.mark.parametrize("cls, kw, task, train_nan", list(_forest_cases()))
def test_forest_predict_and_apply(cls, kw, task, train_nan):
    model = cls(random_state=0, **kw)
    if train_nan and not _allow_nan(model):
        pytest.skip(f"{cls.__name__} does not accept NaN")
    X, y = _data(task, nan=train_nan)
    model.fit(X, y)
    ens = parse(model)
    assert ens.kind == "forest" and ens.library == "sklearn" and ens.gain_kind == "impurity"
    assert ens.n_trees == (N_TREES if "estimators_" in dir(model) else 1)
    R = _rows(ens, X, seed=1, nan=_allow_nan(model))
    if hasattr(model, "predict_proba"):
        expected = model.predict_proba(R)
        assert ens.n_outputs == len(model.classes_) == expected.shape[1]
        np.testing.assert_array_equal(ens.classes, model.classes_)
        assert ens.objective.name == "class_probability"
    else:
        expected = model.predict(R)
        assert ens.objective.name == "squared_error"
    _close(ens.predict_raw(R), expected)
    leaves = model.apply(R)
    np.testing.assert_array_equal(ens.apply(R), leaves.reshape(len(R), -1))


def test_forest_nan_goes_where_sklearn_sends_it():
    """Trained without NaN: every NaN row follows missing_go_to_left exactly as sklearn."""
    X, y = _data("multiclass")
    rf = RandomForestClassifier(n_estimators=N_TREES, random_state=0).fit(X, y)
    ens = parse(rf)
    for j in range(X.shape[1]):
        R = X[:50].copy()
        R[:, j] = np.nan
        np.testing.assert_array_equal(ens.apply(R), rf.apply(R))
        _close(ens.predict_raw(R), rf.predict_proba(R))


def test_forest_values_and_weights_match_sklearn_nodes():
    """Recomputed internal values are sklearn's weighted class fractions; weights and
    impurities are read as stored."""
    X, y = _data("multiclass", nan=True)
    rf = RandomForestClassifier(n_estimators=N_TREES, max_depth=6, random_state=0).fit(X, y)
    ens = parse(rf)
    for t, est in enumerate(rf.estimators_):
        o0, o1 = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        tree = est.tree_
        np.testing.assert_allclose(ens.value[o0:o1], tree.value[:, 0, :], rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_array_equal(ens.weight[o0:o1], tree.weighted_n_node_samples)
        np.testing.assert_array_equal(ens.impurity[o0:o1], tree.impurity)
        np.testing.assert_array_equal(ens.missing_left[o0:o1], tree.missing_go_to_left)


def test_forest_path_contributions_sum_to_leaf_value():
    X, y = _data("multiclass")
    rf = RandomForestClassifier(n_estimators=N_TREES, max_depth=6, random_state=0).fit(X, y)
    ens = parse(rf)
    R = X[:40]
    leaves = ens.apply(R)
    for t in range(ens.n_trees):
        o = ens.tree_offsets[t]
        paths = rf.estimators_[t].decision_path(R.astype(np.float32)).toarray().astype(bool)
        for i in range(len(R)):
            nodes = np.flatnonzero(paths[i]) + o  # sklearn ids increase along a path
            total = ens.value[nodes[0]].copy()
            for parent, child in zip(nodes[:-1], nodes[1:], strict=True):
                assert child in (ens.left[parent], ens.right[parent])
                total += ens.value[child] - ens.value[parent]
            assert nodes[-1] == leaves[i, t] + o
            np.testing.assert_allclose(total, ens.value[nodes[-1]], rtol=0, atol=1e-12)


def _mdi_from_ensemble(ens, tree_weights=None):
    """sklearn's feature_importances_ rebuilt from the normal form's impurity and weight."""
    per_tree = np.zeros((ens.n_trees, ens.n_features))
    for t in range(ens.n_trees):
        o0, o1 = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        W, imp = ens.weight, ens.impurity
        for m in range(o0, o1):
            l, r = ens.left[m], ens.right[m]
            if l < 0:
                continue
            per_tree[t, ens.feature[m]] += W[m] * imp[m] - W[l] * imp[l] - W[r] * imp[r]
        per_tree[t] /= W[o0]
    return per_tree


@pytest.mark.parametrize("cls", [RandomForestClassifier, ExtraTreesRegressor,
                                 DecisionTreeClassifier])
def test_forest_impurity_and_weight_rebuild_feature_importances(cls):
    task = "multiclass" if cls.__name__.endswith("Classifier") else "regression"
    X, y = _data(task)
    kw = {} if cls is DecisionTreeClassifier else {"n_estimators": N_TREES}
    model = cls(random_state=0, max_depth=6, **kw).fit(X, y)
    ens = parse(model)
    per_tree = _mdi_from_ensemble(ens)
    keep = np.diff(ens.tree_offsets) > 1  # sklearn skips single-node trees
    per_tree = per_tree[keep] / per_tree[keep].sum(axis=1, keepdims=True)
    mdi = per_tree.mean(axis=0)
    np.testing.assert_allclose(mdi / mdi.sum(), model.feature_importances_, rtol=1e-9,
                               atol=1e-12)


def test_forest_dataframe_names():
    X, y = _data("binary")
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    rf = RandomForestClassifier(n_estimators=N_TREES, random_state=0).fit(df, y)
    ens = parse(rf)
    assert ens.feature_names == list(df.columns)
    _close(ens.predict_raw(df), rf.predict_proba(df))
    with pytest.raises(ValueError, match="feature names"):
        ens.predict_raw(df.rename(columns={"f2": "other"}))


def test_forest_without_names_has_none():
    X, y = _data("regression")
    ens = parse(RandomForestRegressor(n_estimators=3, random_state=0).fit(X, y))
    assert ens.feature_names is None and ens.classes is None


@pytest.mark.parametrize("cls", [RandomForestClassifier, DecisionTreeClassifier])
def test_multi_output_classification_concatenates_targets(cls):
    X, y = _data("regression")
    model = cls(random_state=0, max_depth=3).fit(X, np.c_[y > 0, y > 1])
    ens = parse(model)
    assert list(ens.classes) == ["y0=False", "y0=True", "y1=False", "y1=True"]
    np.testing.assert_allclose(ens.predict_raw(X), np.hstack(model.predict_proba(X)),
                               rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("cls", [RandomForestRegressor, DecisionTreeRegressor])
def test_multi_output_regression_one_output_per_target(cls):
    X, y = _data("regression")
    model = cls(random_state=0, max_depth=3).fit(X, np.c_[y, -y])
    ens = parse(model)
    assert ens.n_outputs == 2
    np.testing.assert_allclose(ens.predict_raw(X), model.predict(X), rtol=1e-12)


@pytest.mark.parametrize("model", [RandomForestClassifier(), DecisionTreeRegressor(),
                                   GradientBoostingClassifier(),
                                   HistGradientBoostingRegressor()],
                         ids=lambda m: type(m).__name__)
def test_unfitted_model_rejected(model):
    with pytest.raises(NotFittedError, match=type(model).__name__):
        parse(model)


def test_unknown_object_rejected():
    with pytest.raises(TypeError, match="RandomForestClassifier.*HistGradientBoosting"
                       "|HistGradientBoosting.*RandomForestClassifier"):
        parse(object())


def test_direct_parsers_match_dispatch():
    X, y = _data("binary")
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    gb = GradientBoostingClassifier(n_estimators=3).fit(X, y)
    hgb = HistGradientBoostingClassifier(max_iter=3).fit(X, y)
    for parser, model in ((parse_sklearn_forest, rf), (parse_sklearn_gb, gb),
                          (parse_sklearn_hgb, hgb)):
        np.testing.assert_array_equal(parser(model).predict_raw(X), parse(model).predict_raw(X))


# ------------------------------------------------------------------ GradientBoosting
GB_CASES = [
    (GradientBoostingRegressor, "regression", dict(loss="squared_error")),
    (GradientBoostingRegressor, "regression", dict(loss="absolute_error")),
    (GradientBoostingRegressor, "regression", dict(loss="huber", alpha=0.8)),
    (GradientBoostingRegressor, "regression", dict(loss="quantile", alpha=0.3)),
    (GradientBoostingRegressor, "regression", dict(init="zero", subsample=0.7)),
    (GradientBoostingRegressor, "regression",
     dict(init=DummyRegressor(strategy="quantile", quantile=0.2))),
    (GradientBoostingClassifier, "binary", dict(loss="log_loss")),
    (GradientBoostingClassifier, "binary", dict(loss="exponential")),
    (GradientBoostingClassifier, "binary", dict(init="zero")),
    (GradientBoostingClassifier, "multiclass", dict(loss="log_loss")),
    (GradientBoostingClassifier, "multiclass",
     dict(init=DummyClassifier(strategy="most_frequent"), subsample=0.8)),
]
GB_OBJECTIVES = {"squared_error": "squared_error", "absolute_error": "absolute_error",
                 "huber": "huber_quantile", "quantile": "quantile",
                 "exponential": "exponential"}


@pytest.mark.parametrize("cls, task, kw", GB_CASES,
                         ids=[f"{c.__name__}-{t}-{sorted(k.items())}" for c, t, k in GB_CASES])
def test_gb_predict_and_apply(cls, task, kw):
    X, y = _data(task)
    model = cls(n_estimators=15, max_depth=3, learning_rate=0.2, random_state=0, **kw)
    model.fit(X, y)
    ens = parse(model)
    K = model.estimators_.shape[1]
    assert ens.kind == "boosting" and ens.n_trees == 15 * K and ens.n_outputs == K
    np.testing.assert_array_equal(ens.tree_learning_rate, 0.2)
    np.testing.assert_array_equal(ens.tree_stage, np.repeat(np.arange(15), K))
    np.testing.assert_array_equal(ens.tree_output, np.tile(np.arange(K), 15))
    loss = model.loss
    if loss == "log_loss":
        assert ens.objective.name == ("logistic" if K == 1 else "softmax")
    else:
        assert ens.objective.name == GB_OBJECTIVES[loss]
    R = _rows(ens, X, seed=2, nan=False)
    raw = model.decision_function(R) if task != "regression" else model.predict(R)
    _close(ens.predict_raw(R), raw)
    np.testing.assert_array_equal(ens.apply(R).reshape(len(R), 15, K),
                                  model.apply(R).reshape(len(R), 15, K))


def test_gb_leaves_are_shrunk_tree_values():
    X, y = _data("regression")
    gb = GradientBoostingRegressor(n_estimators=5, learning_rate=0.3, max_depth=2).fit(X, y)
    ens = parse(gb)
    for t, est in enumerate(gb.estimators_[:, 0]):
        o0, o1 = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        leaf = ens.left[o0:o1] < 0
        np.testing.assert_array_equal(ens.value[o0:o1, 0][leaf],
                                      0.3 * est.tree_.value[:, 0, 0][leaf])
        np.testing.assert_array_equal(ens.weight[o0:o1], est.tree_.weighted_n_node_samples)


def test_gb_early_stopping():
    X, y = _data("multiclass")
    gb = GradientBoostingClassifier(n_estimators=200, n_iter_no_change=2,
                                    validation_fraction=0.3, random_state=0).fit(X, y)
    assert gb.n_estimators_ < 200
    ens = parse(gb)
    assert ens.n_trees == gb.n_estimators_ * 3
    R = _rows(ens, X, seed=3, nan=False)
    _close(ens.predict_raw(R), gb.decision_function(R))


def test_gb_impurity_rebuilds_feature_importances():
    X, y = _data("multiclass")
    gb = GradientBoostingClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    ens = parse(gb)
    per_tree = _mdi_from_ensemble(ens)  # sklearn: per stage, sum of its K trees
    per_stage = per_tree.reshape(10, 3, -1).sum(axis=1)
    mdi = per_stage.mean(axis=0)
    np.testing.assert_allclose(mdi / mdi.sum(), gb.feature_importances_, rtol=1e-9)


@pytest.mark.parametrize("init", [LinearRegression(), DummyClassifier(strategy="stratified")],
                         ids=["LinearRegression", "stratified"])
def test_gb_row_dependent_init_rejected(init):
    X, y = _data("binary")
    if isinstance(init, LinearRegression):
        gb = GradientBoostingRegressor(n_estimators=3, init=init).fit(X, X[:, 0])
    else:
        gb = GradientBoostingClassifier(n_estimators=3, init=init).fit(X, y)
    with pytest.raises(ValueError, match="depends on the row"):
        parse(gb)


def test_gb_dataframe_names():
    X, y = _data("regression")
    df = pd.DataFrame(X, columns=list("abcde"))
    gb = GradientBoostingRegressor(n_estimators=10, random_state=0).fit(df, y)
    ens = parse(gb)
    assert ens.feature_names == list("abcde")
    _close(ens.predict_raw(df), gb.predict(df))
    with pytest.raises(ValueError, match="different order"):
        ens.predict_raw(df[list("edcba")])


# ------------------------------------------------------------------ HistGradientBoosting
HGB_CASES = [
    (HistGradientBoostingRegressor, "regression", dict(loss="squared_error")),
    (HistGradientBoostingRegressor, "regression", dict(loss="absolute_error")),
    (HistGradientBoostingRegressor, "regression", dict(loss="quantile", quantile=0.7)),
    (HistGradientBoostingRegressor, "positive", dict(loss="gamma")),
    (HistGradientBoostingRegressor, "count", dict(loss="poisson")),
    (HistGradientBoostingClassifier, "binary", dict()),
    (HistGradientBoostingClassifier, "multiclass", dict()),
]
HGB_OBJECTIVES = {"squared_error": ("squared_error", "identity"),
                  "absolute_error": ("absolute_error", "identity"),
                  "quantile": ("quantile", "identity"), "gamma": ("gamma", "exp"),
                  "poisson": ("poisson", "exp")}


# the default since scikit-learn 1.6; 1.4 and 1.5 (default None) need it spelled out
FROM_DTYPE = {"categorical_features": "from_dtype"}


def _hgb(cls, kw, **more):
    return cls(max_iter=12, max_leaf_nodes=8, learning_rate=0.3, early_stopping=False,
               random_state=0, **{**kw, **more})


@pytest.mark.parametrize("cls, task, kw", HGB_CASES,
                         ids=[f"{c.__name__}-{t}-{sorted(k.items())}" for c, t, k in HGB_CASES])
def test_hgb_numeric_with_nan(cls, task, kw):
    X, y = _data(task, nan=True)
    model = _hgb(cls, kw).fit(X, y)
    ens = parse(model)
    K = model.n_trees_per_iteration_
    assert ens.n_trees == 12 * K and ens.gain_kind == "gain" and not ens.round_float32
    np.testing.assert_array_equal(ens.base_score, model._baseline_prediction.ravel())
    if cls is HistGradientBoostingRegressor:
        assert (ens.objective.name, ens.objective.link) == HGB_OBJECTIVES[model.loss]
    else:
        assert ens.objective.name == ("logistic" if K == 1 else "softmax")
    R = _rows(ens, X, seed=4, nan=True, inf=True)  # HGB accepts +-inf on numeric columns
    _close(ens.predict_raw(R), model._raw_predict(R))
    public = model.decision_function(R) if task in ("binary", "multiclass") else None
    if public is not None:
        _close(ens.predict_raw(R), public)


def test_hgb_weight_gain_and_shrunk_leaves():
    X, y = _data("regression", nan=True)
    model = _hgb(HistGradientBoostingRegressor, {}).fit(X, y)
    ens = parse(model)
    for t, (pred,) in enumerate(model._predictors):
        o0, o1 = ens.tree_offsets[t], ens.tree_offsets[t + 1]
        nodes = pred.nodes
        leaf = nodes["is_leaf"].astype(bool)
        np.testing.assert_array_equal(ens.weight[o0:o1], nodes["count"])
        np.testing.assert_array_equal(ens.gain[o0:o1][~leaf], nodes["gain"][~leaf])
        assert np.all(np.isnan(ens.gain[o0:o1][leaf]))
        np.testing.assert_array_equal(ens.value[o0:o1, 0][leaf], nodes["value"][leaf])
    np.testing.assert_array_equal(ens.tree_learning_rate, 0.3)


def test_hgb_early_stopping():
    X, y = _data("binary", n=600, nan=True)
    model = HistGradientBoostingClassifier(max_iter=300, early_stopping=True,
                                           n_iter_no_change=2, validation_fraction=0.3,
                                           random_state=0).fit(X, y)
    assert model.n_iter_ < 300
    ens = parse(model)
    assert ens.n_trees == model.n_iter_
    R = _rows(ens, X, seed=5, nan=True, inf=True)
    _close(ens.predict_raw(R), model._raw_predict(R))


def _categorical_numpy(n=400, seed=0, nan=True):
    """Columns: 0 numeric, 1 categorical {0, 2, 3, 5, 9, 200}, 2 numeric,
    3 categorical {1, 4, 7, 1000}."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = rng.choice([0, 2, 3, 5, 9, 200], size=n)
    X[:, 3] = rng.choice([1, 4, 7, 1000], size=n)
    if nan:
        X[rng.random((n, 4)) < 0.08] = np.nan
    f = (X[:, 0] + 1.2 * np.isin(X[:, 1], [2, 9]) - 0.8 * np.isin(X[:, 1], [200, 5])
         + 0.7 * (X[:, 3] == 1000) + 0.5 * X[:, 2] + 0.6 * np.isnan(X[:, 1]))
    return X, np.nan_to_num(f) + rng.normal(scale=0.3, size=n)


CAT_CODES = [0, 2, 3, 5, 9, 200, 1, 4, 7, 1000, 6, 255, 256, 1e9, -1, -5, np.nan, -0.0, 2.7, 0.5,
             5.25]  # fractional codes are unknown categories in scikit-learn


def _with_categories(R, cols, rng):
    R = R.copy()
    for j in cols:
        R[:, j] = rng.choice(CAT_CODES, size=len(R))
    return R


@pytest.mark.parametrize("cls, task", [(HistGradientBoostingRegressor, "regression"),
                                       (HistGradientBoostingClassifier, "multiclass")])
def test_hgb_categorical_numpy(cls, task):
    X, f = _categorical_numpy()
    y = f if task == "regression" else np.digitize(f, [0.0, 1.0])
    model = _hgb(cls, {}, categorical_features=[1, 3]).fit(X, y)
    ens = parse(model)
    assert ens.is_categorical.any()
    assert {int(ens.feature[m]) for m in np.flatnonzero(ens.is_categorical)} <= {1, 3}
    assert ens.feature_categories[0] is None and ens.feature_categories[3][-1] == 1000
    rng = np.random.default_rng(6)
    R = _with_categories(_rows(ens, X, seed=6, nan=True), [1, 3], rng)
    R[rng.random(len(R)) < 0.1, 0] = np.inf  # inf is accepted on numeric columns only
    _close(ens.predict_raw(R), model._raw_predict(R))


def _categorical_frame(n=400, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "x": rng.normal(size=n),
        "color": pd.Categorical(rng.choice(["red", "green", "blue", "teal", None], size=n)),
        "z": rng.normal(size=n),
        "grade": pd.Categorical(rng.choice([10, 20, 5, 40], size=n)),
    })
    f = (df.x + 1.5 * (df.color == "green") - (df.color == "teal") + 0.8 * (df.grade == 20)
         + 0.4 * df.color.isna() + 0.5 * df.z)
    return df, f.to_numpy() + rng.normal(scale=0.3, size=n)


@pytest.mark.parametrize("cls", [HistGradientBoostingRegressor, HistGradientBoostingClassifier])
def test_hgb_categorical_from_dtype(cls):
    df, f = _categorical_frame()
    y = f if cls is HistGradientBoostingRegressor else (f > 0.5).astype(int)
    model = _hgb(cls, FROM_DTYPE).fit(df, y)
    assert list(model.is_categorical_) == [False, True, False, True]
    ens = parse(model)
    assert ens.feature_names == ["x", "color", "z", "grade"]
    assert ens.feature_categories[1] == ["blue", "green", "red", "teal"]
    assert {int(ens.feature[m]) for m in np.flatnonzero(ens.is_categorical)} <= {1, 3}
    _close(ens.predict_raw(df), model._raw_predict(df))
    # unseen labels, missing values, a different category order and unseen numbers
    rng = np.random.default_rng(7)
    test = df.copy()
    test["color"] = pd.Categorical(rng.choice(["teal", "pink", "green", None, "red"], size=len(df)),
                                   categories=["teal", "red", "pink", "green"])
    test["grade"] = pd.Categorical(rng.choice([40, 7, 20, 5, 10], size=len(df)))
    test.loc[::7, "x"] = np.nan
    _close(ens.predict_raw(test), model._raw_predict(test))
    with pytest.raises(ValueError, match="feature names"):
        ens.predict_raw(test.rename(columns={"z": "zz"}))


def test_hgb_integer_categories_route_numbers_and_labels_alike():
    """Integer categories are their own codes: a numeric column routes as its labels."""
    df, f = _categorical_frame()
    model = _hgb(HistGradientBoostingRegressor, FROM_DTYPE).fit(df, f)
    ens = parse(model)
    assert ens.feature_categories[3] == list(range(41))  # label k has code k
    rng = np.random.default_rng(8)
    numbers = df.assign(grade=rng.choice([5.0, 10.0, 20.0, 40.0, 7.0, 15.0, 300.0, -1.0,
                                          np.nan], size=len(df)))
    _close(ens.predict_raw(numbers), model._raw_predict(numbers))
    labels = numbers.assign(grade=pd.Categorical(numbers["grade"]))
    _close(ens.predict_raw(labels), model._raw_predict(labels))


# ------------------------------------------------------------------ hypothesis rows
@functools.cache
def _hypothesis_forest():
    X, y = _data("multiclass", nan=True)
    rf = RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0).fit(X, y)
    return rf, parse(rf)


@functools.cache
def _hypothesis_hgb():
    X, f = _categorical_numpy()
    model = _hgb(HistGradientBoostingRegressor, {}, categorical_features=[1, 3]).fit(X, f)
    return model, parse(model)


def _near_thresholds(ens):
    exact = ens.threshold[(ens.left >= 0) & ~ens.is_categorical]
    thr = exact.astype(np.float32)
    vals = np.concatenate([thr, np.nextafter(thr, np.float32(np.inf)),
                           np.nextafter(thr, np.float32(-np.inf))])
    if not ens.round_float32:  # compared in float64 (HGB): the exact threshold +-1 ulp
        vals = np.concatenate([vals, exact, np.nextafter(exact, np.inf),
                               np.nextafter(exact, -np.inf)])
    return sorted({float(v) for v in vals if np.isfinite(v)})


def _float_cells(ens, allow_inf):
    return st.one_of(
        st.sampled_from(_near_thresholds(ens)),
        st.floats(width=32, allow_nan=True, allow_infinity=allow_inf),
        st.sampled_from([0.0, -0.0, np.nan]),
    )


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_hypothesis_rows_forest(data):
    rf, ens = _hypothesis_forest()
    cell = _float_cells(ens, allow_inf=False)
    rows = data.draw(st.lists(st.lists(cell, min_size=5, max_size=5), min_size=1, max_size=20))
    R = np.array(rows, dtype=np.float64)
    np.testing.assert_array_equal(ens.apply(R), rf.apply(R))
    _close(ens.predict_raw(R), rf.predict_proba(R))


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_hypothesis_rows_hgb(data):
    model, ens = _hypothesis_hgb()
    num = _float_cells(ens, allow_inf=True)
    cat = st.sampled_from(CAT_CODES)
    row = st.tuples(num, cat, num, cat)
    R = np.array(data.draw(st.lists(row, min_size=1, max_size=20)), dtype=np.float64)
    _close(ens.predict_raw(R), model._raw_predict(R))


# ------------------------------------------------------------------ 'category' columns
def _category_value_frame(n=300, seed=0):
    """Column "a" is a pandas category column of numbers (categories deliberately not in
    value order, so codes and values disagree), "b" and "c" numeric."""
    rng = np.random.default_rng(seed)
    a = rng.choice([10, 20, 5, 40, 0.5], size=n)
    df = pd.DataFrame({"a": pd.Categorical(a, categories=[40, 5, 0.5, 20, 10]),
                       "b": rng.normal(size=n), "c": rng.normal(size=n)})
    f = 0.05 * a + df.b - 0.5 * df.c
    return df, f.to_numpy() + rng.normal(scale=0.2, size=n)


def _category_value_tests(df, rng, nan):
    """Unseen labels, other category orders and (where the model accepts it) missing."""
    test = df.copy()
    labels = [10, 20, 5, 40, 0.5, 7, 15, 1000, -3]
    values = rng.choice(labels, size=len(df)).astype(float)
    if nan:
        values[rng.random(len(df)) < 0.1] = np.nan
    test["a"] = pd.Categorical(values, categories=sorted(labels, reverse=True))
    return test


SKLEARN_VALUE_MODELS = [
    (RandomForestRegressor, dict(n_estimators=N_TREES, random_state=0), "predict"),
    (RandomForestClassifier, dict(n_estimators=N_TREES, random_state=0), "predict_proba"),
    (DecisionTreeRegressor, dict(random_state=0), "predict"),
    (ExtraTreesClassifier, dict(n_estimators=N_TREES, random_state=0), "predict_proba"),
    (GradientBoostingRegressor, dict(n_estimators=20, random_state=0), "predict"),
    (GradientBoostingClassifier, dict(n_estimators=20, random_state=0), "decision_function"),
    (HistGradientBoostingRegressor, dict(max_iter=12, categorical_features=None), "_raw_predict"),
    (HistGradientBoostingClassifier, dict(max_iter=12, categorical_features=None),
     "decision_function"),
]


@pytest.mark.parametrize("cls, kw, method", SKLEARN_VALUE_MODELS,
                         ids=[c.__name__ for c, _, _ in SKLEARN_VALUE_MODELS])
def test_category_column_on_numeric_feature_is_read_by_value(cls, kw, method):
    """scikit-learn reads a 'category' column of a numeric feature by its label values
    (np.asarray of the column), not its codes: so must treeimp."""
    df, f = _category_value_frame()
    y = f if cls.__name__.endswith("Regressor") else np.digitize(f, [0.5, 1.5])
    model = cls(**kw).fit(df, y)
    ens = parse(model)
    assert not ens.category_as_code.any()
    _close(ens.predict_raw(df), getattr(model, method)(df))
    test = _category_value_tests(df, np.random.default_rng(1), nan=_allow_nan(model))
    _close(ens.predict_raw(test), getattr(model, method)(test))
    if hasattr(model, "apply") and not cls.__name__.startswith("Hist"):
        leaves = model.apply(test)
        np.testing.assert_array_equal(ens.apply(test), leaves.reshape(len(test), -1))
    # the same values as a plain numeric column route the same way
    numeric = test.assign(a=np.asarray(test["a"], dtype=np.float64))
    np.testing.assert_array_equal(ens.predict_raw(numeric), ens.predict_raw(test))


def test_hgb_category_column_on_a_numeric_feature_next_to_categorical_ones():
    """HGB with a categorical feature "k" and a numeric feature "a" given as a
    'category' column: "a" is read by value, "k" by label."""
    df, f = _category_value_frame()
    rng = np.random.default_rng(2)
    df["k"] = pd.Categorical(rng.choice(["p", "q", "r"], size=len(df)))
    f = f + 1.0 * (df.k == "q").to_numpy()
    model = _hgb(HistGradientBoostingRegressor, {}, categorical_features=["k"]).fit(df, f)
    ens = parse(model)
    assert list(ens.category_as_code) == [False, False, False, True]
    test = _category_value_tests(df, rng, nan=True)
    _close(ens.predict_raw(test), model._raw_predict(test))


def test_category_labels_that_are_text_on_a_numeric_feature():
    """Text labels that parse as numbers are read as those numbers (as scikit-learn
    does); other text fails in both, and unused text categories are harmless."""
    df, f = _category_value_frame()
    rf = RandomForestRegressor(n_estimators=N_TREES, random_state=0).fit(df, f)
    ens = parse(rf)
    text = df.assign(a=pd.Categorical(df["a"].astype(float).astype(str),
                                      categories=["40.0", "5.0", "0.5", "20.0", "10.0", "x"]))
    _close(ens.predict_raw(text), rf.predict(text))
    bad = text.assign(a=text["a"].cat.rename_categories({"5.0": "five"}))
    with pytest.raises(ValueError, match="could not convert"):
        rf.predict(bad)
    with pytest.raises(ValueError, match=r"column 'a'.*label 'five'.*not a number"):
        ens.predict_raw(bad)


# ------------------------------------------------------------------ HGB value tables
ODD_CATEGORIES = {"negative": [-1, 3, 7], "fractional": [0.5, 1.5, 2.5],
                  "large": [0, 70000, 3], "mixed": [-2.5, 0, 1e9, 17]}


def _odd_category_data(cats, n=400, seed=0):
    """Column 0 categorical with the given values, 1 numeric, 2 categorical {1, 4, 9}."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    pos = rng.integers(0, len(cats), size=n)
    X[:, 0] = np.asarray(cats, dtype=float)[pos]
    X[:, 2] = rng.choice([1, 4, 9], size=n)
    X[rng.random(n) < 0.08, 0] = np.nan
    f = (np.array([0.0, 1.5, -1.0, 0.7])[pos] + X[:, 1] + 0.5 * (X[:, 2] == 4)
         + 0.6 * np.isnan(X[:, 0]))
    return X, f + rng.normal(scale=0.2, size=n)


def _odd_category_rows(cats, X, rng, n=300):
    R = X[rng.integers(0, len(X), n)].copy()
    probes = list(cats) + [np.nan, -0.0, 0.0, 0.5, 1.0, 2.0, 3.0000001, -5.0, 1e12, 65536.0,
                           70000.5, np.nextafter(float(cats[-1]), np.inf), 255.0, 256.0]
    R[:, 0] = rng.choice(np.asarray(probes, dtype=float), size=n)
    return R


@pytest.mark.parametrize("name", list(ODD_CATEGORIES))
@pytest.mark.parametrize("cls", [HistGradientBoostingRegressor, HistGradientBoostingClassifier])
def test_hgb_negative_fractional_and_large_categories(name, cls):
    """Category values that cannot be their own codes go through an exact value -> code
    table: numpy rows, numeric DataFrame columns and 'category' columns all route as
    scikit-learn does (values it does not know are unknown categories)."""
    cats = ODD_CATEGORIES[name]
    X, f = _odd_category_data(cats)
    y = f if cls is HistGradientBoostingRegressor else np.digitize(f, [0.0, 1.0])
    model = _hgb(cls, {}, categorical_features=[0, 2]).fit(X, y)
    ens = parse(model)
    assert ens.is_categorical[ens.feature == 0].any()
    np.testing.assert_array_equal(np.sort(ens.category_values[0]), np.sort(cats))
    assert ens.category_values[2] is None  # small integers are their own codes
    R = _odd_category_rows(cats, X, np.random.default_rng(3))
    expected = model._raw_predict(R)
    _close(ens.predict_raw(R), expected)
    _close(ens.predict_raw(R.astype(np.float32)), model._raw_predict(R.astype(np.float32)))
    _close(ens.predict_raw(np.asfortranarray(R)), expected)
    frame = pd.DataFrame(R, columns=["c", "x", "k"])
    _close(ens.predict_raw(frame), expected)
    labels = frame.assign(c=pd.Categorical(frame["c"]))
    _close(ens.predict_raw(labels), expected)
    # the caller's array is not rewritten by the value -> code conversion
    before = R.copy()
    ens.apply(R)
    np.testing.assert_array_equal(R, before)


def test_hgb_text_categories_reject_numbers_as_sklearn_does():
    df, f = _categorical_frame()
    model = _hgb(HistGradientBoostingRegressor, FROM_DTYPE).fit(df, f)
    ens = parse(model)
    numbers = df.assign(color=np.arange(len(df)) % 4.0)
    with pytest.raises(TypeError):
        model._raw_predict(numbers)
    with pytest.raises(TypeError, match=r"column 'color' holds numbers.*text \('blue'"):
        ens.predict_raw(numbers)
    with pytest.raises(TypeError, match="column 1 holds numbers"):
        ens.predict_raw(numbers.to_numpy(dtype=np.float64))

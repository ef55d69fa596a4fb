"""Models users have beyond the basic ones: multi-output regression forests, Bagging of
decision trees, LightGBM random forests and HistGradientBoosting on string categories
(XGBoost vector-leaf models: tests/test_xgb_vector_leaf.py)."""

import numpy as np
import pytest
from sklearn.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import treeimp


def _saabas_mdi_oob(trees, X, Y, features=None, oob_rows=None):
    """Li et al.'s MDI-oob by brute force: per tree, the mean over its evaluation rows of
    y_i . (Saabas contribution of each feature to the tree's output vector), then the
    mean over trees. ``features``: each tree's original column of its local feature;
    ``oob_rows``: each tree's evaluation rows (default: all)."""
    F = X.shape[1]
    per_tree = []
    for t, tree in enumerate(trees):
        tr = tree.tree_
        cols = np.arange(F) if features is None else np.asarray(features[t])
        rows = np.arange(X.shape[0]) if oob_rows is None else oob_rows[t]
        v = tr.value.reshape(tr.node_count, -1)
        if hasattr(tree, "classes_") and np.ndim(Y) == 2:  # fractions of tree's classes
            full = np.zeros((tr.node_count, Y.shape[1]))
            full[:, np.asarray(tree.classes_, dtype=int)] = v
            v = full
        path = tree.decision_path(X[np.ix_(rows, cols)]).tocsr()
        imp = np.zeros(F)
        for k, i in enumerate(rows):
            nodes = path.indices[path.indptr[k]:path.indptr[k + 1]]
            for p, c in zip(nodes[:-1], nodes[1:]):
                imp[cols[tr.feature[p]]] += Y[i] @ (v[c] - v[p])
        per_tree.append(imp / len(rows))
    return np.mean(per_tree, axis=0)


def test_multi_output_regression_forest():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    Y = np.c_[X[:, 0] + 0.1 * rng.normal(size=300), X[:, 1] - X[:, 0]]
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X[:200],
                                                                               Y[:200])
    ens = treeimp.parse(rf)
    np.testing.assert_allclose(ens.predict_raw(X), rf.predict(X), rtol=1e-12, atol=1e-12)
    res = treeimp.explain(rf, X[200:], Y[200:], methods=("mdi", "mdi_oob"), random_state=0)
    pt = res.per_tree["mdi"]  # scikit-learn: each tree's importances normalised, averaged
    np.testing.assert_allclose((pt / pt.sum(axis=1, keepdims=True)).mean(axis=0),
                               rf.feature_importances_, rtol=1e-10)
    np.testing.assert_allclose(res.table["mdi_oob"],
                               _saabas_mdi_oob(rf.estimators_, X[200:], Y[200:]),
                               rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match=r"\['shap_oob'\] not defined for a regression "
                                         r"forest with 2 targets"):
        treeimp.explain(rf, X[200:], Y[200:], methods=("mdi_oob", "shap_oob"))
    with pytest.raises(ValueError, match=r"must have shape \(n_rows, 2\)"):
        treeimp.explain(rf, X[200:], Y[200:, 0], methods=("mdi_oob",))


def test_multi_output_regression_permutation_matches_sklearn():
    from sklearn.inspection import permutation_importance

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    Y = np.c_[X[:, 0] + 0.1 * rng.normal(size=300), X[:, 1] - X[:, 0]]
    rf = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X[:200],
                                                                               Y[:200])
    for scoring in (None, "neg_mean_squared_error"):
        ours = treeimp.permutation_importance(rf, X[200:], Y[200:], n_repeats=3,
                                              random_state=1, scoring=scoring)
        ref = permutation_importance(rf, X[200:], Y[200:], n_repeats=3, random_state=1,
                                     scoring=scoring)
        np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("classifier", [True, False])
def test_bagging_of_trees(classifier):
    from sklearn.inspection import permutation_importance

    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 5))
    if classifier:
        y = np.digitize(X[:, 0] + 0.5 * X[:, 3], [-0.7, 0.7])  # 3 classes
        Y = np.eye(3)[y]
        model = BaggingClassifier(DecisionTreeClassifier(max_depth=4), n_estimators=8,
                                  max_samples=12, max_features=3, random_state=0)
    else:
        y = X[:, 0] + 0.5 * X[:, 3] + 0.1 * rng.normal(size=240)
        Y = y[:, None]
        model = BaggingRegressor(DecisionTreeRegressor(max_depth=4), n_estimators=8,
                                 max_features=3, bootstrap_features=True, random_state=0)
    model.fit(X, y)
    ens = treeimp.parse(model)
    want = model.predict_proba(X) if classifier else model.predict(X)[:, None]
    np.testing.assert_allclose(ens.predict_raw(X), want, rtol=1e-12, atol=1e-14)
    # out of bag: each tree on the rows it did not draw, its local features remapped
    res = treeimp.explain(model, X, y, oob=True, methods=("mdi_oob",), random_state=0)
    oob = [np.setdiff1d(np.arange(len(y)), s) for s in model.estimators_samples_]
    np.testing.assert_allclose(res.table["mdi_oob"],
                               _saabas_mdi_oob(model.estimators_, X, Y,
                                               model.estimators_features_, oob),
                               rtol=1e-9, atol=1e-12)
    ours = treeimp.permutation_importance(model, X, y, n_repeats=2, random_state=0)
    ref = permutation_importance(model, X, y, n_repeats=2, random_state=0)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-12, atol=1e-14)


def test_bagging_of_other_estimators_is_refused():
    from sklearn.linear_model import LinearRegression

    X = np.random.default_rng(0).normal(size=(50, 3))
    bag = BaggingRegressor(LinearRegression(), n_estimators=2, random_state=0).fit(X, X[:, 0])
    with pytest.raises(TypeError, match="Bagging of scikit-learn decision trees only"):
        treeimp.explain(bag, X, X[:, 0])


@pytest.mark.parametrize("kind", ["regression", "binary"])
def test_lightgbm_random_forest(kind):
    lgb = pytest.importorskip("lightgbm")
    from sklearn.inspection import permutation_importance

    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = 2 * np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1])
    if kind == "binary":
        y = (signal + 0.5 * rng.normal(size=900) > 0.3).astype(int)
        model = lgb.LGBMClassifier(boosting_type="rf", n_estimators=15, bagging_freq=1,
                                   bagging_fraction=0.6, verbose=-1)
        init = np.log(y[:600].mean() / (1 - y[:600].mean()))
        predicted = lambda m, Z: m.predict_proba(Z)[:, 1]  # noqa: E731
        link = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
        scoring = "neg_log_loss"
    else:
        y = signal + 0.5 * rng.normal(size=900)
        model = lgb.LGBMRegressor(boosting_type="rf", n_estimators=15, bagging_freq=1,
                                  bagging_fraction=0.6, feature_fraction=0.8, verbose=-1)
        init = y[:600].mean()
        predicted = lambda m, Z: m.predict(Z)  # noqa: E731
        link = lambda z: z  # noqa: E731
        scoring = None
    model.fit(X[:600], y[:600])
    ens = treeimp.parse(model)
    margin = ens.predict_raw(X)[:, 0]
    # LightGBM's raw_score of an rf model is the SUM of its trees; predict averages them
    np.testing.assert_allclose(margin * 15, model.predict(X, raw_score=True), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_allclose(link(margin), predicted(model, X), rtol=1e-12, atol=1e-14)
    # every tree is one stage at the initial margin (not written to the file: estimated)
    assert np.all(ens.tree_stage == 0)
    assert abs(ens.base_score[0] - init) < 0.05
    res = treeimp.explain(model, X[600:], y[600:], random_state=0)
    assert res.ranking("mdi_oob")[:2] == ["x0", "x1"]
    assert res.pvalues["mdi_oob"]["x0"] < 0.01
    ours = treeimp.permutation_importance(model, X[600:], y[600:], n_repeats=2,
                                          random_state=0, scoring=scoring)
    ref = permutation_importance(model, X[600:], y[600:], n_repeats=2, random_state=0,
                                 scoring=scoring)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype", [object, "str"])
def test_hist_gradient_boosting_on_text_columns(dtype):
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.inspection import permutation_importance

    rng = np.random.default_rng(0)
    n = 600
    df = pd.DataFrame({"c": rng.choice(["a", "b", "c", "d"], n), "x": rng.normal(size=n),
                       "noise": rng.normal(size=n)}).astype({"c": dtype})
    y = 2.0 * (df.c == "a") + df.x + 0.1 * rng.normal(size=n)
    model = HistGradientBoostingRegressor(max_iter=8, categorical_features=["c"],
                                          random_state=0).fit(df[:400], y[:400])
    test = df[400:].copy()
    test.iloc[:5, 0] = "unseen"
    test.iloc[5, 0] = None
    with pytest.warns(UserWarning, match=r"5 rows have labels the model never saw"):
        margin = treeimp.parse(model).predict_raw(test)[:, 0]
    np.testing.assert_allclose(margin, model.predict(test), rtol=1e-12, atol=1e-12)
    with pytest.warns(UserWarning, match="never saw"):
        res = treeimp.explain(model, test, y[400:], random_state=0)
    assert res.ranking("mdi_oob")[:2] == ["x", "c"] or res.ranking("mdi_oob")[:2] == ["c", "x"]
    with pytest.warns(UserWarning, match="never saw"):
        ours = treeimp.permutation_importance(model, test, y[400:], n_repeats=2,
                                              random_state=0)
    ref = permutation_importance(model, test, y[400:], n_repeats=2, random_state=0)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-12, atol=1e-14)

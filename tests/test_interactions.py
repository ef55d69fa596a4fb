"""treeimp.interactions: SHAP interaction values against XGBoost's pred_interactions,
shap's shap_interaction_values, a brute-force Shapley-interaction sum over feature
subsets, and scikit-learn's out-of-bag predictions; rows sum to the contributions."""

from itertools import combinations
from math import factorial

import numpy as np
import pandas as pd
import pytest

import treeimp

N = 240


def _data(seed=0, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 5))
    X[:, 4] = rng.integers(0, 6, N)  # a categorical column for the models that take one
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * (X[:, 4] % 2) + rng.normal(scale=0.5, size=N)
    if nan:
        X[rng.random(X.shape) < 0.05] = np.nan
    return X, y


def _rel_err(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def _check_sums(model, X, phi, **kw):
    """Rows of the matrices sum to the contributions; all of it to the prediction."""
    c = treeimp.contributions(model, X, **kw)
    np.testing.assert_allclose(phi.values.sum(axis=2), c.values, rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.base_values, c.base_values, rtol=0, atol=1e-12)
    np.testing.assert_allclose(phi.values, np.swapaxes(phi.values, 1, 2), rtol=0, atol=1e-9)


@pytest.mark.parametrize("task", ["regression", "multiclass"])
def test_xgboost_equals_pred_interactions(task):
    xgb = pytest.importorskip("xgboost")
    X, y = _data()
    df = pd.DataFrame(X[:, :4], columns=[f"f{j}" for j in range(4)])
    codes = np.where(np.isnan(X[:, 4]), -1, X[:, 4]).astype(int)
    df["cat"] = pd.Categorical.from_codes(codes, categories=list(range(6)))
    kw = dict(n_estimators=12, max_depth=4, enable_categorical=True, tree_method="hist")
    if task == "regression":
        model = xgb.XGBRegressor(**kw).fit(df, y)
    else:
        model = xgb.XGBClassifier(**kw).fit(df, (y > -0.5).astype(int) + (y > 0.8))
    phi = treeimp.interactions(model, df)
    ref = model.get_booster().predict(xgb.DMatrix(df, enable_categorical=True),
                                      pred_interactions=True)
    F = df.shape[1]
    if task == "regression":
        ref = ref[:, :F, :F]
    else:  # (n, K, F + 1, F + 1) -> (n, F, F, K)
        ref = ref[:, :, :F, :F].transpose(0, 2, 3, 1)
    assert _rel_err(phi.values, ref) < 1e-5  # XGBoost sums in float32
    _check_sums(model, df, phi)


def test_lightgbm_and_forests_equal_shap():
    shap = pytest.importorskip("shap")
    lgb = pytest.importorskip("lightgbm")
    from sklearn.ensemble import ExtraTreesRegressor, RandomForestClassifier

    X, y = _data()
    models = [
        lgb.LGBMRegressor(n_estimators=10, num_leaves=8, verbose=-1).fit(X, y),
        RandomForestClassifier(n_estimators=6, max_depth=6, random_state=0).fit(
            np.nan_to_num(X), (y > 0).astype(int)),
        ExtraTreesRegressor(n_estimators=5, max_depth=7, random_state=0).fit(
            np.nan_to_num(X), y),
    ]
    for model in models:
        rows = X[:40] if model.__module__.startswith("lightgbm") else np.nan_to_num(X[:40])
        phi = treeimp.interactions(model, rows)
        ref = np.asarray(shap.TreeExplainer(model).shap_interaction_values(rows))
        if ref.ndim == 4 and ref.shape[0] != len(rows):  # older shap: a list per class
            ref = ref.transpose(1, 2, 3, 0)
        assert _rel_err(phi.values, ref) < 1e-9, type(model).__name__
        _check_sums(model, rows, phi)


def _brute_force_interactions(ens, X):
    """Shapley interaction values by enumerating feature subsets: v(S) is the tree's
    cover-weighted expectation following the row at splits on S; for i != j,
    phi_ij = sum_{S without i, j} |S|! (F - |S| - 2)! / (2 (F - 1)!) (v(S+i+j) - v(S+i)
    - v(S+j) + v(S)), and phi_ii is the row's TreeSHAP value minus the others."""
    from treeimp.attributions.contributions import shap_cover
    from treeimp.kernels.route import feature_value, step
    from treeimp.model.routing import routing_flags

    r = ens.routing_arrays()
    nodes = (r.left, r.right, r.threshold, r.flags)
    cats = (r.cat_offset, r.cat_count, r.cat_codes, r.cat_left)
    strict, round32 = routing_flags(ens, X)
    cover = shap_cover(ens)
    F = ens.n_features

    def expect(node, row, S):
        if ens.left[node] < 0:
            return ens.value[node, 0]
        f = ens.feature[node]
        if f in S:
            x = feature_value(X, row, f, round32)
            return expect(step(x, node, *nodes, *cats, strict), row, S)
        lc, rc = ens.left[node], ens.right[node]
        return (cover[lc] * expect(lc, row, S) + cover[rc] * expect(rc, row, S)) / cover[node]

    out = np.zeros((X.shape[0], F, F))
    for row in range(X.shape[0]):
        for t in range(ens.n_trees):
            root, s = ens.tree_offsets[t], ens.tree_scale[t]
            v = {S: expect(root, row, set(S)) for size in range(F + 1)
                 for S in combinations(range(F), size)}
            for i in range(F):
                for j in range(F):
                    if i == j:
                        continue
                    rest = [k for k in range(F) if k not in (i, j)]
                    for size in range(F - 1):
                        w = factorial(size) * factorial(F - size - 2) / (2 * factorial(F - 1))
                        for S in combinations(rest, size):
                            sij, si, sj = (tuple(sorted(S + e)) for e in ((i, j), (i,), (j,)))
                            out[row, i, j] += s * w * (v[sij] - v[si] - v[sj] + v[S])
                # the main effect: TreeSHAP phi_i minus the interactions
                for size in range(F):
                    w = factorial(size) * factorial(F - size - 1) / factorial(F)
                    for S in combinations([k for k in range(F) if k != i], size):
                        out[row, i, i] += s * w * (v[tuple(sorted(S + (i,)))] - v[S])
        out[row][np.diag_indices(F)] -= out[row].sum(axis=1) - np.diag(out[row])
    return out


def test_categorical_splits_and_missing_values_equal_brute_force():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = _data()
    model = HistGradientBoostingRegressor(max_iter=4, max_leaf_nodes=6,
                                          categorical_features=[4], random_state=0).fit(X, y)
    phi = treeimp.interactions(model, X[:12])
    assert np.isnan(X[:12]).any()
    assert _rel_err(phi.values, _brute_force_interactions(treeimp.parse(model), X[:12])) < 1e-9
    _check_sums(model, X[:12], phi)


def test_deep_tree_with_repeated_features_equals_brute_force():
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 5))
    y = X.sum(axis=1) + X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2])
    model = DecisionTreeRegressor(max_depth=9, min_samples_leaf=5, random_state=0).fit(X, y)
    phi = treeimp.interactions(model, X[:5])
    assert _rel_err(phi.values, _brute_force_interactions(treeimp.parse(model), X[:5])) < 1e-9


def test_out_of_bag_adds_up_to_the_oob_prediction():
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(nan=False)
    rf = RandomForestRegressor(n_estimators=15, max_depth=6, oob_score=True,
                               random_state=0).fit(X, y)
    phi = treeimp.interactions(rf, X, oob=True)
    c = treeimp.contributions(rf, X, oob=True)
    ok = phi.n_oob_trees > 0
    assert ok.mean() > 0.9
    np.testing.assert_allclose(phi.values[ok].sum(axis=(1, 2)) + phi.base_values[ok],
                               rf.oob_prediction_[ok], rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.values[ok].sum(axis=2), c.values[ok], rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.values_in.sum(axis=2), c.values_in, rtol=0, atol=1e-9)
    assert np.isnan(phi.values[~ok]).all()
    # the in-bag matrices are those of the other trees: together the in-sample ones
    both = treeimp.interactions(rf, X).values
    n_in = rf.n_estimators - phi.n_oob_trees
    mix = (np.nan_to_num(phi.values) * phi.n_oob_trees[:, None, None]
           + phi.values_in * n_in[:, None, None]) / rf.n_estimators
    np.testing.assert_allclose(mix, both, rtol=0, atol=1e-9)


def test_explainer_and_pipeline():
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data(nan=False)
    pipe = make_pipeline(StandardScaler(), RandomForestRegressor(
        n_estimators=5, max_depth=5, random_state=0)).fit(X, y)
    phi = treeimp.Explainer(pipe).interactions(X[:20])
    direct = treeimp.interactions(pipe[-1], pipe[0].transform(X[:20]))
    np.testing.assert_array_equal(phi.values, direct.values)
    assert phi.feature_names == list(pipe[0].get_feature_names_out())
    assert "20 rows, 5 x 5 features" in repr(phi)


def test_bad_input_is_rejected():
    xgb = pytest.importorskip("xgboost")
    X, y = _data()
    model = xgb.XGBRegressor(n_estimators=3, max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="oob=True is for bagged forests"):
        treeimp.interactions(model, X, oob=True)
    with pytest.raises(ValueError, match="features"):
        treeimp.interactions(model, X[:, :3])


def test_catboost_equals_its_shap_interaction_values():
    cb = pytest.importorskip("catboost")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    model = cb.CatBoostRegressor(iterations=15, depth=4, verbose=0, random_seed=0).fit(
        X, X[:, 0] * X[:, 1] + X[:, 2])
    phi = treeimp.interactions(model, X[:30])
    ref = model.get_feature_importance(cb.Pool(X[:30]), type="ShapInteractionValues")
    assert _rel_err(phi.values, ref[:, :4, :4]) < 1e-12
    # categorical features: CatBoost credits a combination of them as one player; its
    # interaction values for such models are refused, with a reason
    df = pd.DataFrame({"x0": rng.normal(size=400), "c1": rng.choice(list("abcdefgh"), 400),
                       "c2": rng.choice(list("pqrstu"), 400)})
    code = df.c1.map({k: i for i, k in enumerate("abcdefgh")}) * 6 + df.c2.map(
        {k: i for i, k in enumerate("pqrstu")})
    y = np.sin(1.7 * code) * 3 + df.x0 + 0.3 * rng.normal(size=400)
    model = cb.CatBoostRegressor(iterations=15, depth=4, verbose=0, random_seed=0,
                                 thread_count=1, one_hot_max_size=3, max_ctr_complexity=3,
                                 cat_features=[1, 2]).fit(df, y)
    with pytest.raises(ValueError, match="combinations of categorical features"):
        treeimp.interactions(model, df.iloc[:10])


def test_groups_are_sums_of_member_pairs():
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    X, y = _data(nan=False)
    rf = RandomForestRegressor(n_estimators=8, max_depth=6, oob_score=True,
                               random_state=0).fit(X, y)
    groups = {"ab": [0, 1], "ce": [2, 4]}  # column 3 stays alone
    full = treeimp.interactions(rf, X, oob=True)
    got = treeimp.interactions(rf, X, oob=True, groups=groups)
    assert got.feature_names == ["ab", "ce", "x3"] and got.data is None
    members = [[0, 1], [2, 4], [3]]
    for a, ma in enumerate(members):
        for b, mb in enumerate(members):
            np.testing.assert_allclose(got.values[:, a, b],
                                       full.values[:, ma][:, :, mb].sum(axis=(1, 2)),
                                       rtol=0, atol=1e-12)
            np.testing.assert_allclose(got.values_in[:, a, b],
                                       full.values_in[:, ma][:, :, mb].sum(axis=(1, 2)),
                                       rtol=0, atol=1e-12)
    c = treeimp.contributions(rf, X, oob=True, groups=groups)
    ok = got.n_oob_trees > 0
    np.testing.assert_allclose(got.values[ok].sum(axis=2), c.values[ok], rtol=0, atol=1e-9)
    # a Pipeline's one-hot columns grouped back into the input column they came from
    df = pd.DataFrame({"num": X[:, 0], "cat": np.where(X[:, 4] > 2, "a", "b")})
    pipe = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(), ["cat"])],
                                           remainder="passthrough"),
                         RandomForestRegressor(n_estimators=5, max_depth=5,
                                               random_state=0)).fit(df, y)
    phi = treeimp.interactions(pipe, df.iloc[:30], groups="input")
    assert sorted(phi.feature_names) == ["cat", "num"]
    c = treeimp.contributions(pipe, df.iloc[:30], groups="input")
    assert c.feature_names == phi.feature_names
    np.testing.assert_allclose(phi.values.sum(axis=2), c.values, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match="not a Pipeline"):
        treeimp.interactions(rf, X[:5], groups="input")

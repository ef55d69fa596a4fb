"""Per-row contributions (TreeSHAP, Saabas), in-bag and out of bag, and SHAP-oob.

Independent truths: shap's TreeExplainer (tree_path_dependent), XGBoost pred_contribs
(also approx_contribs for Saabas), LightGBM pred_contrib, each model's own predictions
(additivity), scikit-learn's oob_prediction_ / oob_decision_function_, and brute-force
per-tree loops over shap / XGBoost for SHAP-oob.
"""

import tracemalloc

import numpy as np
import pandas as pd
import pytest

import treeimp

shap = pytest.importorskip("shap")

N = 240


def _data(seed=0, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 5))
    X[:, 4] = rng.integers(0, 6, N)  # a categorical column for the models that take one
    f = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * (X[:, 4] % 2)
    y = f + rng.normal(scale=0.5, size=N)
    if nan:
        X[rng.random(X.shape) < 0.05] = np.nan
    return X, y


def _targets(y, task):
    if task == "regression":
        return y
    if task == "binary":
        return (y > 0).astype(int)
    return (y > -0.5).astype(int) + (y > 0.8)


def _frame(X):
    df = pd.DataFrame(X[:, :4], columns=[f"f{j}" for j in range(4)])
    codes = np.where(np.isnan(X[:, 4]), -1, X[:, 4]).astype(int)
    df["cat"] = pd.Categorical.from_codes(codes, categories=list(range(6)))
    return df


def _rel_err(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / np.max(np.abs(b)))


def _shap_values(model, X):
    sv = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
    return np.asarray(sv.shap_values(X, check_additivity=False))


def _library_contribs(contribs, n_outputs, n_features):
    """(values (n, F[, K]), base (n[, K])) from pred_contribs / pred_contrib output."""
    c = np.asarray(contribs).reshape(len(contribs), n_outputs, n_features + 1)
    values, base = c[:, :, :-1].transpose(0, 2, 1), c[:, :, -1]
    if n_outputs == 1:
        return values[:, :, 0], base[:, 0]
    return values, base


def _margin64(ens, X):
    """base score + the scaled leaf values of every tree, summed in float64 (the libraries
    round some sums to float32; the contributions add up to the exact sum)."""
    leaves = ens.apply(X)
    raw = np.tile(ens.base_score, (len(leaves), 1))
    for t in range(ens.n_trees):
        c, v = ens.tree_output[t], ens.value[ens.tree_offsets[t] + leaves[:, t]]
        raw[:, c:c + v.shape[1]] += ens.tree_scale[t] * v
    return raw


def _check_additive(model, X, c):
    raw = _margin64(treeimp.parse(model), X)
    total = c.base_values + c.values.sum(axis=1)
    np.testing.assert_allclose(total, raw[:, 0] if raw.shape[1] == 1 else raw,
                               rtol=0, atol=1e-9 * max(1.0, np.abs(raw).max()))


TASKS = ("regression", "binary", "multiclass")


@pytest.mark.parametrize("task", TASKS)
def test_sklearn_models_equal_shap(task):
    from sklearn.ensemble import (
        GradientBoostingClassifier,
        GradientBoostingRegressor,
        RandomForestClassifier,
        RandomForestRegressor,
    )

    X, y = _data()
    y = _targets(y, task)
    Xf = np.nan_to_num(X)  # GradientBoosting takes no NaN
    reg = task == "regression"
    rf = (RandomForestRegressor if reg else RandomForestClassifier)(
        n_estimators=8, max_depth=9, random_state=0).fit(X, y)
    gb = (GradientBoostingRegressor if reg else GradientBoostingClassifier)(
        n_estimators=8, max_depth=4, random_state=0).fit(Xf, y)
    for model, rows in ((rf, X), (gb, Xf)):
        c = treeimp.contributions(model, rows)
        _check_additive(model, rows, c)
        if model is gb and task == "multiclass":
            continue  # shap supports binary GradientBoostingClassifier only
        assert _rel_err(c.values, _shap_values(model, rows)) < 1e-6


@pytest.mark.parametrize("task", TASKS)
def test_xgboost_equals_pred_contribs_and_shap(task):
    xgb = pytest.importorskip("xgboost")
    X, y = _data()
    y = _targets(y, task)
    df = _frame(X)
    kw = dict(n_estimators=12, max_depth=4, enable_categorical=True, tree_method="hist")
    model = (xgb.XGBRegressor(**kw) if task == "regression" else xgb.XGBClassifier(**kw))
    model.fit(df, y)
    c = treeimp.contributions(model, df)
    K = 3 if task == "multiclass" else 1
    booster = model.get_booster()
    dm = xgb.DMatrix(df, enable_categorical=True)
    values, base = _library_contribs(booster.predict(dm, pred_contribs=True), K, 5)
    # XGBoost accumulates in float32: relative to the largest value, 1e-6
    assert _rel_err(c.values, values) < 1e-6
    assert _rel_err(c.base_values, base) < 1e-6
    _check_additive(model, df, c)
    saabas = treeimp.contributions(model, df, method="saabas")
    approx, _ = _library_contribs(booster.predict(dm, pred_contribs=True,
                                                  approx_contribs=True), K, 5)
    assert _rel_err(saabas.values, approx) < 1e-6
    _check_additive(model, df, saabas)


@pytest.mark.parametrize("task", TASKS)
def test_lightgbm_equals_pred_contrib_and_shap(task):
    lgb = pytest.importorskip("lightgbm")
    X, y = _data()
    y = _targets(y, task)
    df = _frame(X)
    kw = dict(n_estimators=12, num_leaves=11, min_child_samples=5, verbose=-1)
    model = (lgb.LGBMRegressor(**kw) if task == "regression" else lgb.LGBMClassifier(**kw))
    model.fit(df, y)
    c = treeimp.contributions(model, df)
    K = 3 if task == "multiclass" else 1
    values, base = _library_contribs(model.booster_.predict(df, pred_contrib=True), K, 5)
    assert _rel_err(c.values, values) < 1e-6
    assert _rel_err(c.base_values, base) < 1e-6
    assert _rel_err(c.values, _shap_values(model, df)) < 1e-6
    _check_additive(model, df, c)


def _brute_force_shap(ens, X):
    """Path-dependent SHAP by enumerating every feature subset S: v(S) is the tree's
    cover-weighted expectation that follows the row at splits on features in S and both
    children (weighted by cover) elsewhere; phi_k = sum_S |S|!(F-|S|-1)!/F! (v(S+k) - v(S)).
    The child a row takes is ``route.step`` (the routing every parser test checks)."""
    from itertools import combinations
    from math import factorial

    from treeimp.attributions.contributions import shap_cover
    from treeimp.kernels.route import feature_value, step
    from treeimp.model.routing import routing_flags

    r = ens.routing_arrays()
    nodes = (r.left, r.right, r.threshold, r.flags)
    c_off, c_cnt, c_codes, c_left = r.cat_offset, r.cat_count, r.cat_codes, r.cat_left
    strict, round32 = routing_flags(ens, X)
    cover = shap_cover(ens)
    F = ens.n_features

    def expect(node, row, S):
        if ens.left[node] < 0:
            return ens.value[node, 0]
        f = ens.feature[node]
        if f in S:
            x = feature_value(X, row, f, round32)
            return expect(step(x, node, *nodes, c_off, c_cnt, c_codes, c_left, strict), row, S)
        lc, rc = ens.left[node], ens.right[node]
        return (cover[lc] * expect(lc, row, S) + cover[rc] * expect(rc, row, S)) / cover[node]

    out = np.zeros((X.shape[0], F))
    for row in range(X.shape[0]):
        for t in range(ens.n_trees):
            root, s = ens.tree_offsets[t], ens.tree_scale[t]
            for size in range(F):
                w = factorial(size) * factorial(F - size - 1) / factorial(F)
                for S in combinations(range(F), size):
                    base = expect(root, row, set(S))
                    for k in set(range(F)) - set(S):
                        out[row, k] += s * w * (expect(root, row, set(S) | {k}) - base)
    return out


def test_hist_gradient_boosting_categorical_equals_brute_force():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = _data()
    model = HistGradientBoostingRegressor(max_iter=4, max_leaf_nodes=6,
                                          categorical_features=[4], random_state=0).fit(X, y)
    c = treeimp.contributions(model, X)
    _check_additive(model, X, c)
    rows = X[:25]
    assert _rel_err(c.values[:25], _brute_force_shap(treeimp.parse(model), rows)) < 1e-9
    # numeric-only HistGradientBoosting: shap's TreeExplainer reads it too
    numeric = HistGradientBoostingRegressor(max_iter=10, max_leaf_nodes=8,
                                            random_state=0).fit(X, y)
    c = treeimp.contributions(numeric, X)
    assert _rel_err(c.values, _shap_values(numeric, X)) < 1e-6


@pytest.mark.parametrize("n_features", [4, 5, 8])
def test_deep_trees_with_repeated_features_equal_brute_force(n_features):
    """Paths of every number of distinct features, odd and even (the quadrature size is
    set by the most distinct features on a path), many splitting on a feature again:
    the batched kernel's values equal the subset enumeration to rounding."""
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(n_features)
    X = rng.normal(size=(600, n_features))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, -1] + X.sum(axis=1) + 0.3 * rng.normal(size=600)
    model = DecisionTreeRegressor(max_depth=11, min_samples_leaf=4, random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    assert ens.path_features.max() == n_features  # paths use every feature
    c = treeimp.contributions(model, X[:7])
    assert _rel_err(c.values, _brute_force_shap(ens, X[:7])) < 1e-10


def test_rows_explained_together_equal_rows_explained_alone():
    """A row's values do not depend on the rows sharing its batch (rows whose product
    is zero below a split, NaN rows, batch ends): 75 rows at once equal one by one."""
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data()
    rf = RandomForestRegressor(n_estimators=6, max_depth=8, random_state=0).fit(X, y)
    together = treeimp.contributions(rf, X[:75]).values
    alone = np.concatenate([treeimp.contributions(rf, X[i:i + 1]).values for i in range(75)])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-12)


@pytest.mark.parametrize("task", ("regression", "multiclass"))
def test_out_of_bag_adds_up_to_the_oob_prediction(task):
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    X, y = _data(1, nan=False)
    y = _targets(y, task)
    cls = RandomForestRegressor if task == "regression" else RandomForestClassifier
    rf = cls(n_estimators=15, oob_score=True, random_state=0).fit(X, y)
    oob_pred = rf.oob_prediction_ if task == "regression" else rf.oob_decision_function_
    for method in ("shap", "saabas"):
        c = treeimp.contributions(rf, X, y, oob=True, method=method)
        assert c.oob and c.values.shape == c.values_in.shape
        ok = c.n_oob_trees > 0
        total = c.base_values + c.values.sum(axis=1)
        np.testing.assert_allclose(total[ok], oob_pred[ok], rtol=0, atol=1e-9)
        assert np.all(np.isnan(total[~ok]))
        # phi^in adds up to the mean of the in-bag trees' predictions
        ens = treeimp.parse(rf)
        leaves = ens.apply(X)
        inbag = np.array([np.bincount(s, minlength=N) > 0 for s in rf.estimators_samples_])
        leaf_values = np.stack([ens.value[ens.tree_offsets[t] + leaves[:, t]]
                                for t in range(ens.n_trees)])  # (trees, rows, outputs)
        mean_in = (leaf_values * inbag[:, :, None]).sum(0) / inbag.sum(0)[:, None]
        total_in = c.base_values_in + c.values_in.sum(axis=1)
        np.testing.assert_allclose(total_in, mean_in[:, 0] if task == "regression"
                                   else mean_in, rtol=0, atol=1e-9)
        # per-tree SHAP averaged over the out-of-bag trees, tree by tree (brute force)
        if method == "shap":
            brute = np.zeros(c.values.shape)
            for t, est in enumerate(rf.estimators_):
                sv = _shap_values(est, X)
                brute[~inbag[t]] += sv[~inbag[t]]
            brute /= np.where(ok, c.n_oob_trees, 1).reshape((-1,) + (1,) * (brute.ndim - 1))
            np.testing.assert_allclose(c.values[ok], brute[ok], rtol=0, atol=1e-12)


def test_saabas_oob_equals_mdi_oob():
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data(2)
    yc = _targets(y, "multiclass")
    rf = RandomForestClassifier(n_estimators=10, random_state=0).fit(X, yc)
    r = treeimp.explain(rf, X, yc, oob=True, methods=("mdi_oob", "saabas_oob", "shap_oob"),
                        random_state=0)
    np.testing.assert_allclose(r.table.saabas_oob, r.table.mdi_oob, rtol=0, atol=1e-10)
    np.testing.assert_allclose(r.stderr.saabas_oob, r.stderr.mdi_oob, rtol=0, atol=1e-10)
    for obj, target in (("reg:squarederror", y), ("binary:logistic", _targets(y, "binary"))):
        model = xgb.XGBModel(objective=obj, n_estimators=15, max_depth=4).fit(
            X[:120], target[:120])
        r = treeimp.explain(model, X[120:], target[120:],
                            methods=("mdi_oob", "saabas_oob"), random_state=0)
        np.testing.assert_allclose(r.table.saabas_oob, r.table.mdi_oob, rtol=0, atol=1e-10)
        np.testing.assert_allclose(r.stderr.saabas_oob, r.stderr.mdi_oob, rtol=0,
                                   atol=1e-10)
        assert np.all(np.isfinite(r.pvalues.saabas_oob))


def test_shap_oob_equals_a_per_tree_loop_forest():
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data(3)
    yc = _targets(y, "binary")
    rf = RandomForestClassifier(n_estimators=6, random_state=0).fit(X, yc)
    r = treeimp.explain(rf, X, yc, oob=True, methods=("shap_oob",), random_state=0)
    Z = np.eye(2)[yc]
    per_tree = []
    for est, rows in zip(rf.estimators_, rf.estimators_samples_):
        oob = np.bincount(rows, minlength=N) == 0
        sv = _shap_values(est, X[oob])  # (rows, features, classes)
        per_tree.append(np.einsum("rfc,rc->f", sv, Z[oob]) / oob.sum())
    np.testing.assert_allclose(r.per_tree["shap_oob"], per_tree, rtol=0, atol=1e-12)
    np.testing.assert_allclose(r.table.shap_oob, np.mean(per_tree, axis=0), rtol=0,
                               atol=1e-12)


def test_shap_oob_equals_a_per_tree_loop_xgboost():
    xgb = pytest.importorskip("xgboost")
    X, y = _data(4)
    yb = _targets(y, "binary")
    model = xgb.XGBClassifier(n_estimators=8, max_depth=3).fit(X[:120], yb[:120])
    Xv, yv = X[120:], yb[120:]
    r = treeimp.explain(model, Xv, yv, methods=("shap_oob",), random_state=0)
    booster = model.get_booster()
    dm = xgb.DMatrix(Xv)
    expected = []
    for t in range(8):
        margin = booster.predict(dm, output_margin=True, iteration_range=(0, t)) if t else \
            np.full(len(yv), treeimp.parse(model).base_score[0])
        g = 1.0 / (1.0 + np.exp(-margin)) - yv  # logistic gradient at the margin before t
        phi = booster[t:t + 1].predict(dm, pred_contribs=True)[:, :-1]
        expected.append(np.mean(-g[:, None] * phi, axis=0))
    # XGBoost's contributions and margins are float32
    np.testing.assert_allclose(r.per_tree["shap_oob"], expected, rtol=0, atol=2e-6)


def test_offsets_xgboost():
    """base_margin: contributions put each row's offset into base_values as XGBoost's
    pred_contribs does, and shap_oob takes the gradients at margins that start at the
    offset (per-tree loop with XGBoost's own offset margins)."""
    xgb = pytest.importorskip("xgboost")
    X, y = _data(5)
    yb = _targets(y, "binary")
    off = np.random.default_rng(5).normal(size=len(yb))
    model = xgb.XGBClassifier(n_estimators=6, max_depth=3)
    model.fit(X[:120], yb[:120], base_margin=off[:120])
    Xv, yv, ov = X[120:], yb[120:], off[120:]
    booster = model.get_booster()
    dm = xgb.DMatrix(Xv, base_margin=ov)
    c = treeimp.contributions(model, Xv, base_margin=ov)
    values, base = _library_contribs(booster.predict(dm, pred_contribs=True), 1, 5)
    assert _rel_err(c.values, values) < 1e-6
    np.testing.assert_allclose(c.base_values, base, rtol=1e-6, atol=1e-6)
    r = treeimp.explain(model, Xv, yv, methods=("shap_oob",), random_state=0,
                        base_margin=ov)
    expected = []
    for t in range(6):
        margin = booster.predict(dm, output_margin=True, iteration_range=(0, t)) if t else ov
        g = 1.0 / (1.0 + np.exp(-margin)) - yv
        phi = booster[t:t + 1].predict(xgb.DMatrix(Xv), pred_contribs=True)[:, :-1]
        expected.append(np.mean(-g[:, None] * phi, axis=0))
    np.testing.assert_allclose(r.per_tree["shap_oob"], expected, rtol=0, atol=2e-6)
    plain = treeimp.explain(model, Xv, yv, methods=("shap_oob",), random_state=0)
    assert np.abs(plain.per_tree["shap_oob"] - r.per_tree["shap_oob"]).max() > 1e-3


def test_shrunk_is_a_slope_through_the_origin_and_api():
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(5, nan=False)
    rf = RandomForestRegressor(n_estimators=12, random_state=0).fit(X, y)
    c = treeimp.contributions(rf, X, y, oob=True)
    s = c.shrunk()
    ok = c.n_oob_trees > 0
    for k in range(5):
        a, b = c.values_in[ok, k], c.values[ok, k]
        beta = np.linalg.lstsq(a[:, None], b, rcond=None)[0][0]  # no intercept column
        assert s.betas[k] == pytest.approx(beta, rel=1e-10)
        np.testing.assert_allclose(s.values[:, k], s.betas[k] * c.values_in[:, k])
    imp = s.importance()
    assert list(imp.index) == c.feature_names
    np.testing.assert_allclose(imp, np.nanmean(np.abs(s.values), axis=0))
    np.testing.assert_allclose(c.importance("in"), np.nanmean(np.abs(c.values_in), axis=0))
    e = c.to_shap()
    assert isinstance(e, shap.Explanation) and e.values.shape == c.values.shape
    pytest.importorskip("matplotlib")
    fig = c.plot(features=["x0", 3])
    assert len(fig.axes) == 3
    with pytest.raises(ValueError, match="unknown feature 'nope'"):
        c.plot(features=["nope"])


def test_bad_input_is_rejected():
    import xgboost as xgb
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(6, nan=False)
    rf = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="method must be one of"):
        treeimp.contributions(rf, X, method="lime")
    with pytest.raises(ValueError, match="X has 4 columns but the model"):
        treeimp.contributions(rf, X[:, :4])
    with pytest.raises(ValueError, match="X has 240 rows but y has 3"):
        treeimp.contributions(rf, X, y[:3])
    with pytest.raises(ValueError, match="shrunk\\(\\) needs out-of-bag"):
        treeimp.contributions(rf, X).shrunk()
    model = xgb.XGBRegressor(n_estimators=3).fit(X, y)
    with pytest.raises(ValueError, match="oob=True is for bagged forests"):
        treeimp.contributions(model, X, oob=True)
    with pytest.raises(ValueError, match="oob=True is for bagged forests"):
        treeimp.explain(model, X, y, oob=True, methods=("shap_oob",))


def test_memory_is_the_output_plus_a_chunk():
    from sklearn.ensemble import RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 10))
    rf = RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0).fit(
        X, X[:, 0])
    X_big = rng.normal(size=(200_000, 10))
    treeimp.contributions(rf, X_big[:100])  # compile / load the kernels first
    tracemalloc.start()
    c = treeimp.contributions(rf, X_big)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    output = c.values.nbytes + c.base_values.nbytes
    assert peak < output + 4_000_000, (peak, output)


def test_shap_oob_groups_are_member_sums():
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(6)
    rf = RandomForestRegressor(n_estimators=6, random_state=0).fit(X, y)
    kw = dict(oob=True, methods=("shap_oob", "mdi_oob"), random_state=0)
    single = treeimp.explain(rf, X, y, **kw)
    grouped = treeimp.explain(rf, X, y, groups={"g": [0, 2]}, **kw)
    for m in ("shap_oob", "mdi_oob"):
        np.testing.assert_allclose(grouped.per_tree[m][:, 0],
                                   single.per_tree[m][:, [0, 2]].sum(axis=1), atol=1e-12)
        np.testing.assert_allclose(grouped.block_values[m][:, 0],
                                   single.block_values[m][:, [0, 2]].sum(axis=1), atol=1e-12)


def test_groups_sum_contributions():
    """A group's contribution is the sum of its members' (in and out of bag), so every
    row still adds up; the other columns are unchanged."""
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data(7)
    yc = _targets(y, "multiclass")
    rf = RandomForestClassifier(n_estimators=6, random_state=0).fit(X, yc)
    plain = treeimp.contributions(rf, X, oob=True)
    grouped = treeimp.contributions(rf, X, oob=True, groups={"ab": [0, "x1"]})
    assert grouped.feature_names == ["ab", "x2", "x3", "x4"] and grouped.data is None
    np.testing.assert_allclose(grouped.values[:, 0], plain.values[:, :2].sum(axis=1),
                               atol=1e-12)
    np.testing.assert_allclose(grouped.values_in[:, 1:], plain.values_in[:, 2:], atol=1e-12)
    ok = ~np.isnan(grouped.values).any(axis=(1, 2))
    np.testing.assert_allclose((grouped.base_values + grouped.values.sum(axis=1))[ok],
                               (plain.base_values + plain.values.sum(axis=1))[ok], atol=1e-12)

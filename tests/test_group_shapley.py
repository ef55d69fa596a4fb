"""group_shapley=True: the Shapley (interaction) values of the game whose players are
groups of columns, against a brute-force sum over subsets of groups of the
path-dependent value function, evaluated on the libraries' own dumps of the trees
(LightGBM's dump_model, scikit-learn's tree_ arrays, XGBoost's JSON dump), and against
the libraries' predictions (efficiency)."""

import json
from itertools import combinations
from math import factorial

import numpy as np
import pytest

import treeimp

N = 300


def _data(seed=0):
    """Numeric columns with NaN (x0..x3) and a categorical one (x4, codes 0..5); the
    target has interactions inside and across the groups used below."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 5))
    X[:, 4] = rng.integers(0, 6, N)
    y = (X[:, 0] * X[:, 1] + (X[:, 2] + 2.0) * (X[:, 4] % 3 == 1) + (X[:, 3] > 0) * X[:, 0]
         + rng.normal(scale=0.3, size=N))
    X[:, :4][rng.random((N, 4)) < 0.1] = np.nan
    return X, y


GROUPS = {"a": [0, 1], "c": [2, 4]}  # x3 stays a player of its own
MEMBERS = [[0, 1], [2, 4], [3]]  # the players in the result's order (by first column)


# ------------------------------------------------------------- trees from library dumps
# a tree: nodes {id: ("leaf", value, cover) or ("split", column, goes_left(x), left,
# right, cover)}, and its root id


def _lightgbm_trees(model):
    trees = []
    for info in model.booster_.dump_model()["tree_info"]:
        nodes = {}
        trees.append((nodes, _lightgbm_node(info["tree_structure"], nodes)))
    return trees


def _lightgbm_node(d, nodes):
    key = id(d)
    if "leaf_value" in d:
        nodes[key] = ("leaf", float(d["leaf_value"]), float(d["leaf_count"]))
        return key
    nodes[key] = ("split", int(d["split_feature"]), _lightgbm_rule(d),
                  _lightgbm_node(d["left_child"], nodes),
                  _lightgbm_node(d["right_child"], nodes), float(d["internal_count"]))
    return key


def _lightgbm_rule(d):
    """LightGBM's decision at a split (its tree.h): categorical, NaN and negative codes
    go right, else the code's membership; numeric, missing values (NaN, or zero for
    missing type Zero) take the default side, NaN is 0 for missing type None."""
    kind, default_left = d["missing_type"], bool(d["default_left"])
    if d["decision_type"] == "==":
        cats = {int(c) for c in str(d["threshold"]).split("||")}
        return lambda x: not (np.isnan(x) or x < 0) and int(x) in cats
    thr = float(d["threshold"])

    def rule(x):
        if np.isnan(x):
            if kind == "NaN":
                return default_left
            x = 0.0
        if kind == "Zero" and abs(x) <= 1e-35:
            return default_left
        return x <= thr

    return rule


def _sklearn_trees(model):
    estimators = getattr(model, "estimators_", [model])
    trees = []
    for est in estimators:
        t = est.tree_
        nodes = {}
        for k in range(t.node_count):
            cover = float(t.weighted_n_node_samples[k])
            if t.children_left[k] < 0:
                nodes[k] = ("leaf", float(t.value[k].ravel()[0]), cover)
                continue
            thr, nan_left = float(t.threshold[k]), bool(t.missing_go_to_left[k])
            nodes[k] = ("split", int(t.feature[k]),
                        lambda x, thr=thr, nan_left=nan_left: (nan_left if np.isnan(x)
                                                               else x <= thr),
                        int(t.children_left[k]), int(t.children_right[k]), cover)
        trees.append((nodes, 0))
    return trees


def _xgboost_trees(model):
    trees = []
    for text in model.get_booster().get_dump(dump_format="json", with_stats=True):
        nodes = {}
        trees.append((nodes, _xgboost_node(json.loads(text), nodes)))
    return trees


def _xgboost_node(d, nodes):
    """XGBoost's decision: x < split_condition (both float32) goes to "yes", NaN to
    "missing"."""
    k = d["nodeid"]
    if "leaf" in d:
        nodes[k] = ("leaf", float(d["leaf"]), float(d["cover"]))
        return k
    thr, nan_yes = np.float32(d["split_condition"]), d["missing"] == d["yes"]
    kids = {c["nodeid"]: c for c in d["children"]}
    nodes[k] = ("split", int(d["split"][1:]),
                lambda x: nan_yes if np.isnan(x) else bool(np.float32(x) < thr),
                _xgboost_node(kids[d["yes"]], nodes), _xgboost_node(kids[d["no"]], nodes),
                float(d["cover"]))
    return k


# ------------------------------------------------------------ the grouped game, by brute force
def _expect(nodes, node, x, cols):
    """E[f(x) | x_cols]: the row's side at splits on ``cols``, both sides weighted by
    cover elsewhere (the path-dependent value function of TreeSHAP)."""
    n = nodes[node]
    if n[0] == "leaf":
        return n[1]
    _, col, goes_left, left, right, _ = n
    if col in cols:
        return _expect(nodes, left if goes_left(x[col]) else right, x, cols)
    return sum(nodes[c][-1] * _expect(nodes, c, x, cols) for c in (left, right)) / n[-1]


def _game(trees, x, members, scale):
    """v(S) for every subset S (a sorted tuple) of the players (groups of columns)."""
    G = len(members)
    v = {}
    for size in range(G + 1):
        for S in combinations(range(G), size):
            cols = {j for g in S for j in members[g]}
            v[S] = scale * sum(_expect(nodes, root, x, cols) for nodes, root in trees)
    return v


def _shapley(v, G):
    phi = np.zeros(G)
    for i in range(G):
        rest = [k for k in range(G) if k != i]
        for size in range(G):
            w = factorial(size) * factorial(G - size - 1) / factorial(G)
            for S in combinations(rest, size):
                phi[i] += w * (v[tuple(sorted(S + (i,)))] - v[S])
    return phi


def _shapley_interactions(v, G):
    """Lundberg et al. (2020): for i != j, sum over S without i, j of |S|! (G - |S| - 2)!
    / (2 (G - 1)!) (v(S+i+j) - v(S+i) - v(S+j) + v(S)); the diagonal phi_i minus the
    row's others."""
    out = np.zeros((G, G))
    for i in range(G):
        for j in range(G):
            if i == j:
                continue
            rest = [k for k in range(G) if k not in (i, j)]
            for size in range(G - 1):
                w = factorial(size) * factorial(G - size - 2) / (2 * factorial(G - 1))
                for S in combinations(rest, size):
                    sij, si, sj = (tuple(sorted(S + e)) for e in ((i, j), (i,), (j,)))
                    out[i, j] += w * (v[sij] - v[si] - v[sj] + v[S])
    phi = _shapley(v, G)
    out[np.diag_indices(G)] = phi - out.sum(axis=1)
    return out


def _brute_force(trees, X, members, scale=1.0):
    phi = np.zeros((len(X), len(members)))
    inter = np.zeros((len(X), len(members), len(members)))
    for r, x in enumerate(X):
        v = _game(trees, x, members, scale)
        phi[r] = _shapley(v, len(members))
        inter[r] = _shapley_interactions(v, len(members))
    return phi, inter


def _lightgbm(X, y, **kw):
    import lightgbm as lgb

    params = dict(n_estimators=4, num_leaves=10, max_depth=4, min_child_samples=5,
                  min_data_per_group=5, cat_smooth=1.0, learning_rate=0.5, verbose=-1,
                  random_state=0)
    params.update(kw)
    return lgb.LGBMRegressor(**params).fit(X, y, categorical_feature=[4])


# ------------------------------------------------------------------------------ tests
def test_lightgbm_categorical_and_missing_equal_brute_force():
    X, y = _data()
    model = _lightgbm(X, y)
    trees = _lightgbm_trees(model)
    dumped = json.dumps(model.booster_.dump_model())
    assert '"decision_type": "=="' in dumped and '"missing_type": "NaN"' in dumped
    rows = X[:25]
    assert np.isnan(rows).any()
    c = treeimp.contributions(model, rows, groups=GROUPS, group_shapley=True)
    phi = treeimp.interactions(model, rows, groups=GROUPS, group_shapley=True)
    want_phi, want_inter = _brute_force(trees, rows, MEMBERS)
    assert c.feature_names == phi.feature_names == ["a", "c", "x3"]
    assert c.data is None and phi.data is None
    np.testing.assert_allclose(c.values, want_phi, rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.values, want_inter, rtol=0, atol=1e-9)
    raw = model.predict(rows, raw_score=True)
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1), raw, rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.values.sum(axis=2), c.values, rtol=0, atol=1e-9)


def test_sklearn_tree_with_missing_values_equals_brute_force():
    from sklearn.tree import DecisionTreeRegressor

    X, y = _data(1)
    model = DecisionTreeRegressor(max_depth=4, min_samples_leaf=5, random_state=0).fit(X, y)
    rows = X[:30]
    assert np.isnan(rows).any() and model.tree_.missing_go_to_left.any()
    groups = {"a": ["x0", "x1"], "c": ["x2", 4]}
    c = treeimp.contributions(model, rows, groups=groups, group_shapley=True)
    phi = treeimp.interactions(model, rows, groups=groups, group_shapley=True)
    assert c.feature_names == ["a", "c", "x3"]
    want_phi, want_inter = _brute_force(_sklearn_trees(model), rows, MEMBERS)
    np.testing.assert_allclose(c.values, want_phi, rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.values, want_inter, rtol=0, atol=1e-9)
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1), model.predict(rows),
                               rtol=0, atol=1e-9)


def test_xgboost_equals_brute_force_to_float32():
    import xgboost as xgb

    X, y = _data(2)
    X = X[:, :4]  # numeric columns with missing values
    model = xgb.XGBRegressor(n_estimators=4, max_depth=4, learning_rate=0.5,
                             base_score=0.0).fit(X, y)
    rows = X[:20]
    groups = {"a": [0, 1], "b": [2, 3]}
    members = [[0, 1], [2, 3]]
    c = treeimp.contributions(model, rows, groups=groups, group_shapley=True)
    phi = treeimp.interactions(model, rows, groups=groups, group_shapley=True)
    want_phi, want_inter = _brute_force(_xgboost_trees(model), rows, members)
    scale = np.abs(want_phi).max()
    assert np.abs(c.values - want_phi).max() < 1e-6 * scale  # XGBoost's float32 covers
    assert np.abs(phi.values - want_inter).max() < 1e-6 * scale
    margin = model.predict(rows, output_margin=True)
    assert np.abs(c.base_values + c.values.sum(axis=1) - margin).max() < 1e-5 * scale


def test_deep_tree_with_many_columns_of_a_group_on_a_path_equals_brute_force():
    """The quadrature size comes from the most distinct groups on a path (here at most
    3, against up to 6 distinct columns): still exact."""
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(8)
    X = rng.normal(size=(600, 6))
    y = X[:, 0] * X[:, 3] + np.sin(2 * X[:, 1]) * X[:, 4] + X[:, 2] * X[:, 5] + X.sum(axis=1)
    model = DecisionTreeRegressor(max_depth=9, min_samples_leaf=4, random_state=0).fit(X, y)
    groups = {"a": [0, 1, 2], "b": [3, 4]}
    rows = X[:6]
    c = treeimp.contributions(model, rows, groups=groups, group_shapley=True)
    phi = treeimp.interactions(model, rows, groups=groups, group_shapley=True)
    want_phi, want_inter = _brute_force(_sklearn_trees(model), rows, [[0, 1, 2], [3, 4], [5]])
    np.testing.assert_allclose(c.values, want_phi, rtol=0, atol=1e-9)
    np.testing.assert_allclose(phi.values, want_inter, rtol=0, atol=1e-9)


def test_catboost_combinations_inside_a_group_and_across_groups():
    cb = pytest.importorskip("catboost")
    import pandas as pd

    rng = np.random.default_rng(9)
    n = 400
    df = pd.DataFrame({"x0": rng.normal(size=n), "c1": rng.choice(list("abcdefgh"), n),
                       "c2": rng.choice(list("pqrstu"), n)})
    code = df.c1.map({k: i for i, k in enumerate("abcdefgh")}) * 6 + df.c2.map(
        {k: i for i, k in enumerate("pqrstu")})
    y = np.sin(1.7 * code) * 3 + df.x0 + 0.3 * rng.normal(size=n)
    model = cb.CatBoostRegressor(iterations=10, depth=4, verbose=0, random_seed=0,
                                 thread_count=1, one_hot_max_size=3, max_ctr_complexity=3,
                                 cat_features=[1, 2]).fit(df, y)
    rows = df.iloc[:20]
    # the model splits on combinations of c1 and c2 (plain interactions refuse it)
    with pytest.raises(ValueError, match="combinations of categorical features"):
        treeimp.interactions(model, rows)
    groups = {"cats": ["c1", "c2"]}
    c = treeimp.contributions(model, rows, groups=groups, group_shapley=True)
    assert c.feature_names == ["x0", "cats"]
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1), model.predict(rows),
                               rtol=0, atol=1e-9)
    phi = treeimp.interactions(model, rows, groups=groups, group_shapley=True)
    np.testing.assert_allclose(phi.values.sum(axis=2), c.values, rtol=0, atol=1e-9)
    with pytest.raises(ValueError, match=r"combination of the columns \[1, 2\].*'xc', 'c2'"):
        treeimp.contributions(model, rows, groups={"xc": ["x0", "c1"]}, group_shapley=True)


def test_forest_out_of_bag_equals_brute_force_over_out_of_bag_trees():
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(3)
    X, y = X[:80], y[:80]
    rf = RandomForestRegressor(n_estimators=6, max_depth=4, min_samples_leaf=3,
                               oob_score=True, random_state=0).fit(X, y)
    c = treeimp.contributions(rf, X, oob=True, groups=GROUPS, group_shapley=True)
    phi = treeimp.interactions(rf, X, oob=True, groups=GROUPS, group_shapley=True)
    trees = _sklearn_trees(rf)
    rows = range(0, 80, 8)
    for r in rows:
        oob = [t for t, s in enumerate(rf.estimators_samples_) if r not in set(s)]
        inb = [t for t in range(len(trees)) if t not in oob]
        for sel, got_phi, got_inter in ((oob, c.values, phi.values),
                                        (inb, c.values_in, phi.values_in)):
            if not sel:
                assert np.isnan(got_phi[r]).all()
                continue
            w_phi, w_inter = _brute_force([trees[t] for t in sel], X[r:r + 1], MEMBERS,
                                          scale=1.0 / len(sel))
            np.testing.assert_allclose(got_phi[r], w_phi[0], rtol=0, atol=1e-9)
            np.testing.assert_allclose(got_inter[r], w_inter[0], rtol=0, atol=1e-9)
    ok = c.n_oob_trees > 0
    np.testing.assert_allclose((c.base_values + c.values.sum(axis=1))[ok],
                               rf.oob_prediction_[ok], rtol=0, atol=1e-9)


def test_group_values_differ_from_member_sums_where_members_interact():
    from sklearn.tree import DecisionTreeRegressor

    # a three-way interaction: the group {x0, x1} gets 2/3 of its Harsanyi dividend
    # as a sum of members, 1/2 as one player
    rng = np.random.default_rng(4)
    X = rng.choice([-1.0, 1.0], size=(4000, 3))
    y = X[:, 0] * X[:, 1] * X[:, 2]
    model = DecisionTreeRegressor(max_depth=3).fit(X, y)
    rows = np.array([[1.0, 1.0, 1.0], [1.0, -1.0, -1.0], [-1.0, 1.0, 1.0]])
    groups = {"ab": [0, 1]}
    grouped = treeimp.contributions(model, rows, groups=groups, group_shapley=True).values
    summed = treeimp.contributions(model, rows, groups=groups).values
    want, _ = _brute_force(_sklearn_trees(model), rows, [[0, 1], [2]])
    np.testing.assert_allclose(grouped, want, rtol=0, atol=1e-9)
    # the pure three-way term f(x) = x0 x1 x2 (about 1 at every row): 2/3 against 1/2
    np.testing.assert_allclose(np.abs(summed[:, 0]), 2 / 3, atol=0.05)
    np.testing.assert_allclose(np.abs(grouped[:, 0]), 1 / 2, atol=0.05)
    np.testing.assert_allclose(grouped.sum(axis=1), summed.sum(axis=1), rtol=0, atol=1e-9)


def test_group_values_equal_member_sums_when_no_path_mixes_groups():
    import xgboost as xgb

    X, y = _data(5)
    X = X[:, :4]
    kw = dict(n_estimators=6, max_depth=4, learning_rate=0.5)
    # interaction constraints: every path splits on columns of one group only
    model = xgb.XGBRegressor(interaction_constraints="[[0, 1], [2, 3]]", **kw).fit(X, y)
    groups = {"a": [0, 1], "b": [2, 3]}
    rows = X[:50]
    grouped = treeimp.contributions(model, rows, groups=groups, group_shapley=True)
    summed = treeimp.contributions(model, rows, groups=groups)
    np.testing.assert_allclose(grouped.values, summed.values, rtol=0, atol=1e-9)
    pairs = treeimp.interactions(model, rows, groups=groups, group_shapley=True)
    np.testing.assert_allclose(pairs.values[:, 0, 1], 0.0, rtol=0, atol=1e-9)
    # without the constraints, paths mix the groups and the values differ
    free = xgb.XGBRegressor(**kw).fit(X, y)
    g2 = treeimp.contributions(free, rows, groups=groups, group_shapley=True).values
    s2 = treeimp.contributions(free, rows, groups=groups).values
    assert np.abs(g2 - s2).max() > 1e-3 * np.abs(s2).max()


def test_explainer_multiclass_and_pipeline_input_groups():
    import lightgbm as lgb
    import pandas as pd
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder
    from sklearn.tree import DecisionTreeClassifier

    X, y = _data(6)
    cls = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3]))
    model = lgb.LGBMClassifier(n_estimators=3, num_leaves=6, verbose=-1,
                               random_state=0).fit(X, cls)
    ex = treeimp.Explainer(model)
    c = ex.contributions(X[:10], groups=GROUPS, group_shapley=True)
    assert c.values.shape == (10, 3, 3)
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1),
                               model.predict(X[:10], raw_score=True), rtol=0, atol=1e-9)
    phi = ex.interactions(X[:10], groups=GROUPS, group_shapley=True)
    np.testing.assert_allclose(phi.values.sum(axis=2), c.values, rtol=0, atol=1e-9)

    df = pd.DataFrame({"u": X[:, 0], "v": X[:, 1], "k": X[:, 4].astype(int).astype(str)})
    df = df.fillna(0.0)
    pipe = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(), ["k"])],
                                           remainder="passthrough"),
                         DecisionTreeClassifier(max_depth=4, random_state=0)).fit(df, cls)
    c = treeimp.contributions(pipe, df.iloc[:15], groups="input", group_shapley=True)
    assert sorted(c.feature_names) == ["k", "u", "v"]
    proba = pipe.predict_proba(df.iloc[:15])
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1), proba, rtol=0, atol=1e-9)


def test_bad_input_is_rejected():
    from sklearn.tree import DecisionTreeRegressor

    X, y = _data(7)
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="group_shapley=True .* give the groups"):
        treeimp.contributions(model, X[:5], group_shapley=True)
    with pytest.raises(ValueError, match="give the groups"):
        treeimp.interactions(model, X[:5], group_shapley=True)
    with pytest.raises(ValueError, match="method='shap'.*Saabas"):
        treeimp.contributions(model, X[:5], method="saabas", groups=GROUPS,
                              group_shapley=True)
    with pytest.raises(TypeError, match="group_shapley must be True or False"):
        treeimp.contributions(model, X[:5], groups=GROUPS, group_shapley="yes")
    with pytest.raises(ValueError, match="'x1' is in groups 'a' and 'b'"):
        treeimp.contributions(model, X[:5], groups={"a": [0, 1], "b": [1, 2]},
                              group_shapley=True)
    with pytest.raises(ValueError, match="groups='input'.*not a Pipeline"):
        treeimp.interactions(model, X[:5], groups="input", group_shapley=True)

"""XGBoost vector-leaf trees (``multi_strategy="multi_output_tree"``): one tree adds a
leaf vector to every output. Checked against XGBoost itself (output margins, leaf ids,
``pred_contribs`` where XGBoost computes it, total gain, scikit-learn's permutation
importance on the model) and against brute force computed here from the model's JSON
(Shapley values by subset enumeration, MDI-oob as held-out -g times Saabas
contributions, the held-out Newton gain)."""

import itertools
import json
import math

import numpy as np
import pytest

import treeimp

xgb = pytest.importorskip("xgboost")

N_ROUNDS = 6


def _design(kind, n=500, seed=0):
    """x0 carries the signal, x1 a little, x2 and x3 are noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    if kind == "regression":
        Y = np.c_[X[:, 0] + 0.3 * X[:, 1], -2 * X[:, 0]] + 0.3 * rng.normal(size=(n, 2))
        return X, Y
    return X, np.digitize(X[:, 0] + 0.3 * X[:, 1] + 0.3 * rng.normal(size=n), [-0.5, 0.5])


def _model(kind, X, y):
    params = dict(n_estimators=N_ROUNDS, max_depth=3, learning_rate=0.5, tree_method="hist",
                  multi_strategy="multi_output_tree", random_state=0)
    model = (xgb.XGBRegressor if kind == "regression" else xgb.XGBClassifier)(**params)
    return model.fit(X, y)


@pytest.fixture(scope="module", params=["regression", "multiclass"])
def case(request):
    kind = request.param
    X, y = _design(kind)
    model = _model(kind, X[:250], y[:250])
    return kind, model, X[250:], y[250:]


def _doc(model):
    return json.loads(model.get_booster().save_raw("json"))


def _trees(doc):
    """Per tree (left, right, feature, threshold, leaf vectors per node, cover), the
    internal node vectors the cover-weighted means of their children's (measures.md)."""
    out = []
    for t in doc["learner"]["gradient_booster"]["model"]["trees"]:
        k = int(t["tree_param"]["size_leaf_vector"])
        left, right = np.array(t["left_children"]), np.array(t["right_children"])
        cover = np.array(t["sum_hessian"], dtype=np.float64)
        leaf_w = np.array(t["leaf_weights"], dtype=np.float32).reshape(-1, k)
        value = np.zeros((len(left), k))
        _fill_values(0, left, right, cover, leaf_w, value)
        out.append((left, right, np.array(t["split_indices"]),
                    np.array(t["split_conditions"], dtype=np.float32), value, cover))
    return out


def _fill_values(m, left, right, cover, leaf_w, value):
    """value[m] for node m and below: a leaf's vector (its right entry is its row of
    leaf_w), an internal node's the cover-weighted mean of its children's."""
    if left[m] < 0:
        value[m] = leaf_w[right[m]]
        return
    for c in (left[m], right[m]):
        _fill_values(c, left, right, cover, leaf_w, value)
    value[m] = (cover[left[m]] * value[left[m]] + cover[right[m]] * value[right[m]]) / cover[m]


def _path(tree, x):
    """Nodes from the root to x's leaf (XGBoost: float32 x < threshold goes left)."""
    left, right, feature, threshold = tree[:4]
    m, path = 0, [0]
    while left[m] >= 0:
        m = left[m] if np.float32(x[feature[m]]) < threshold[m] else right[m]
        path.append(m)
    return path


def _base_margin(doc):
    text = doc["learner"]["learner_model_param"]["base_score"]
    return np.array([float(v) for v in text.strip("[]").split(",")])


def _neg_grad_hess(kind, margin, y):
    """XGBoost's -g and h: squared error per target; softmax with h = 2 p (1 - p)."""
    if kind == "regression":
        return y - margin, np.ones_like(margin)
    p = np.exp(margin - margin.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return np.eye(margin.shape[1])[y] - p, 2 * p * (1 - p)


def _margins_before_each_tree(kind, model, X):
    doc = _doc(model)
    booster = model.get_booster()
    base = np.broadcast_to(_base_margin(doc), (len(X), model.n_classes_ if kind != "regression"
                                               else 2))
    return [base] + [booster.predict(xgb.DMatrix(X), output_margin=True,
                                     iteration_range=(0, t)) for t in range(1, N_ROUNDS)]


# ---------------------------------------------------------------- prediction and routing
def test_predict_raw_apply_and_rounds_equal_xgboost(case):
    _, model, X, _ = case
    booster = model.get_booster()
    ens = treeimp.parse(model)
    assert ens.value_dim == ens.n_outputs > 1 and ens.n_trees == N_ROUNDS
    margin = booster.predict(xgb.DMatrix(X), output_margin=True)
    np.testing.assert_allclose(ens.predict_raw(X), margin, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ens.apply(X), booster.predict(xgb.DMatrix(X),
                                                                pred_leaf=True))
    part = treeimp.parse(model, iteration_range=(1, 4))
    np.testing.assert_allclose(part.predict_raw(X), booster.predict(
        xgb.DMatrix(X), output_margin=True, iteration_range=(1, 4)), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_saved_files_load_and_explain_as_the_live_model(case, fmt, tmp_path):
    kind, model, X, y = case
    path = tmp_path / f"model.{fmt}"
    model.get_booster().save_model(path)
    ens = treeimp.load(path)
    assert ens.value_dim == ens.n_outputs
    np.testing.assert_allclose(ens.predict_raw(X), model.predict(X, output_margin=True),
                               rtol=1e-6, atol=1e-6)
    # the file does not state eta, which ufi reads: derived from the node weights, exactly
    # for squared error (every target has the same hessian); a softmax vector-leaf tree
    # stores only the hessian summed over classes, which does not identify it
    methods = ("mdi", "mdi_oob", "naive_oob") + (("ufi",) if kind == "regression" else ())
    live = treeimp.explain(model, X, y, methods=methods, random_state=0)
    if kind == "regression":
        saved = treeimp.explain(ens, X, y, methods=methods, random_state=0)
    else:
        with pytest.warns(UserWarning, match="learning rate of this XGBoost model file "
                                             "cannot be recovered"):
            saved = treeimp.explain(ens, X, y, methods=methods + ("ufi",), random_state=0)
    np.testing.assert_allclose(saved.table[list(methods)].to_numpy(),
                               live.table[list(methods)].to_numpy(), rtol=1e-5, atol=1e-9)


# ---------------------------------------------------------------- contributions
def _shapley_brute_force(trees, x, n_features):
    """Path-dependent Shapley values of the sum of the trees by enumerating subsets: the
    value of S is the tree's output with features in S at x and the others integrated
    with the node covers as weights."""
    K = trees[0][4].shape[1]

    def expect(tree, m, S):
        left, right, feature, threshold, value, cover = tree
        if left[m] < 0:
            return value[m]
        if feature[m] in S:
            nxt = left[m] if np.float32(x[feature[m]]) < threshold[m] else right[m]
            return expect(tree, nxt, S)
        return (cover[left[m]] * expect(tree, left[m], S)
                + cover[right[m]] * expect(tree, right[m], S)) / cover[m]

    def v(S):
        return sum(expect(tree, 0, S) for tree in trees)

    phi = np.zeros((n_features, K))
    F = n_features
    for j in range(F):
        others = [f for f in range(F) if f != j]
        for size in range(F):
            weight = math.factorial(size) * math.factorial(F - size - 1) / math.factorial(F)
            for S in itertools.combinations(others, size):
                phi[j] += weight * (v(set(S) | {j}) - v(set(S)))
    return phi


def test_contributions_equal_brute_force_shapley_and_pred_contribs(case):
    _, model, X, _ = case
    rows = X[:8]
    got = treeimp.contributions(model, rows)
    trees = _trees(_doc(model))
    for i, x in enumerate(rows):
        np.testing.assert_allclose(got.values[i], _shapley_brute_force(trees, x, 4),
                                   rtol=1e-6, atol=1e-6)
    margin = model.predict(rows, output_margin=True)
    np.testing.assert_allclose(got.base_values + got.values.sum(axis=1), margin, rtol=1e-6,
                               atol=1e-5)
    try:
        ref = model.get_booster().predict(xgb.DMatrix(rows), pred_contribs=True)
    except xgb.core.XGBoostError as exc:  # XGBoost < 3.4: not implemented for vector leaves
        assert "not yet implemented" in str(exc)
        return
    np.testing.assert_allclose(got.values, ref[:, :, :-1].transpose(0, 2, 1), rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(got.base_values, ref[:, :, -1], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- explain
def test_measures_equal_brute_force_and_rank_the_signal_first(case):
    """mdi_oob: mean over held-out rows of sum over trees and outputs of -g times the
    Saabas contribution; naive_oob: the held-out Newton gain summed over outputs (a split
    counts when both children have held-out rows); mdi: XGBoost's total gain."""
    kind, model, X, y = case
    methods = ("mdi", "mdi_oob", "mdi_oob_centered", "ufi", "naive_oob")
    res = treeimp.explain(model, X, y, methods=methods, random_state=0)
    trees = _trees(_doc(model))
    n, F = len(X), X.shape[1]
    mdi_oob, naive = np.zeros(F), np.zeros(F)
    for tree, margin in zip(trees, _margins_before_each_tree(kind, model, X)):
        z, h = _neg_grad_hess(kind, margin, y)
        left, right, feature, _, value, _ = tree
        G, H = {}, {}
        for i in range(n):
            path = _path(tree, X[i])
            for m, c in zip(path[:-1], path[1:]):
                mdi_oob[feature[m]] += z[i] @ (value[c] - value[m]) / n
            for m in path:
                G[m] = G.get(m, 0.0) - z[i]
                H[m] = H.get(m, 0.0) + h[i]
        for m in np.flatnonzero(left >= 0):
            lc, rc = left[m], right[m]
            if lc in G and rc in G:
                gain = G[lc] ** 2 / H[lc] + G[rc] ** 2 / H[rc] - G[m] ** 2 / H[m]
                naive[feature[m]] += 0.5 * gain.sum() / n
    table = res.table
    np.testing.assert_allclose(table["mdi_oob"].to_numpy(), mdi_oob, rtol=1e-5,
                               atol=1e-7 * np.abs(mdi_oob).max())
    np.testing.assert_allclose(table["naive_oob"].to_numpy(), naive, rtol=1e-5,
                               atol=1e-7 * np.abs(naive).max())
    gain = model.get_booster().get_score(importance_type="total_gain")
    np.testing.assert_allclose(table["mdi"].to_numpy(),
                               [gain.get(f"f{j}", 0.0) for j in range(F)], rtol=1e-4)
    assert np.isfinite(table.to_numpy()).all()
    assert np.isfinite(res.stderr[list(methods[1:])].to_numpy()).all()  # mdi: in-sample
    for method in methods:
        assert res.ranking(method)[0] == "x0", method


def test_permutation_importance_equals_scikit_learn_and_ranks_the_signal_first(case):
    from sklearn.inspection import permutation_importance

    _, model, X, y = case
    ours = treeimp.permutation_importance(model, X, y, n_repeats=3, random_state=0)
    ref = permutation_importance(model, X, y, n_repeats=3, random_state=0)
    # XGBoost predicts in float32, treeimp in float64
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-4, atol=1e-6)
    assert np.argmax(ours.importances_mean) == 0


def test_permutation_objective_score_is_the_loss_summed_over_targets():
    """scoring="objective" on two targets: minus the mean over rows of the half squared
    errors summed over targets (scikit-learn with that scorer, same permutations)."""
    from sklearn.inspection import permutation_importance

    X, Y = _design("regression")
    model = _model("regression", X[:250], Y[:250])
    Xv, Yv = X[250:], Y[250:]

    def half_squared_error(estimator, X, Y):
        return -np.mean(0.5 * ((Y - estimator.predict(X)) ** 2).sum(axis=1))

    ours = treeimp.permutation_importance(model, Xv, Yv, scoring="objective", n_repeats=2,
                                          random_state=0)
    ref = permutation_importance(model, Xv, Yv, scoring=half_squared_error, n_repeats=2,
                                 random_state=0)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-4, atol=1e-6)


def test_one_output_per_tree_on_several_targets_is_explained_per_target():
    """The default multi_strategy on two targets (one tree per target and round): the
    same brute-force MDI-oob, each tree against its own target's gradient."""
    X, Y = _design("regression")
    model = xgb.XGBRegressor(n_estimators=4, max_depth=2, learning_rate=0.5,
                             random_state=0).fit(X[:250], Y[:250])
    Xv, Yv = X[250:], Y[250:]
    res = treeimp.explain(model, Xv, Yv, methods=("mdi_oob", "ufi"), random_state=0)
    booster = model.get_booster()
    doc = _doc(model)
    expected = np.zeros(4)
    for t, jt in enumerate(doc["learner"]["gradient_booster"]["model"]["trees"]):
        out = doc["learner"]["gradient_booster"]["model"]["tree_info"][t]
        margin = (np.broadcast_to(_base_margin(doc), (len(Xv), 2)) if t < 2 else
                  booster.predict(xgb.DMatrix(Xv), output_margin=True,
                                  iteration_range=(0, t // 2)))
        z = Yv[:, out] - margin[:, out]
        left, right = np.array(jt["left_children"]), np.array(jt["right_children"])
        cover = np.array(jt["sum_hessian"], dtype=np.float64)
        value = np.array(jt["split_conditions"], dtype=np.float32).astype(np.float64)
        for m in reversed(range(len(left))):  # children are numbered after parents
            if left[m] >= 0:
                value[m] = (cover[left[m]] * value[left[m]]
                            + cover[right[m]] * value[right[m]]) / cover[m]
        tree = (left, right, np.array(jt["split_indices"]),
                np.array(jt["split_conditions"], dtype=np.float32))
        for i, x in enumerate(Xv):
            path = _path(tree, x)
            for m, c in zip(path[:-1], path[1:]):
                expected[tree[2][m]] += z[i] * (value[c] - value[m]) / len(Xv)
    np.testing.assert_allclose(res.table["mdi_oob"].to_numpy(), expected, rtol=1e-5,
                               atol=1e-7 * np.abs(expected).max())
    assert res.ranking("ufi")[0] == "x0"


def test_per_row_measures_and_multi_label_models_are_refused_clearly(case):
    kind, model, X, y = case
    if kind == "regression":
        with pytest.raises(ValueError, match="not defined for a regression boosting model "
                                             "with 2 targets"):
            treeimp.explain(model, X, y, methods=("shap_oob",))
        with pytest.raises(ValueError, match=r"y must have shape \(n_rows, 2\)"):
            treeimp.explain(model, X, y[:, 0])
    X01 = np.c_[X[:, 0] > 0, X[:, 1] > 0].astype(int)
    labels = xgb.XGBClassifier(n_estimators=2, tree_method="hist").fit(X, X01)
    with pytest.raises(ValueError, match="2 logistic outputs .*multi-label"):
        treeimp.explain(labels, X, X01)

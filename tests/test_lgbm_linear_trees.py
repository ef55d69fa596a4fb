"""LightGBM linear trees (``linear_tree=True``): parsing, raw margins, exact TreeSHAP of
the linear leaves, the leaf-model importance and the refusal of damaged linear lines.

Truths: LightGBM's own ``predict(raw_score=True)``; for contributions a brute-force
Shapley computation over all subsets of features on the trees of ``dump_model()`` (not
treeimp's parse), with the value function of docs/methods.md."""

import itertools
import math
import re

import numpy as np
import pytest

import treeimp
from treeimp.parsers import parse
from treeimp.parsers.lgbm import parse_lightgbm_text

lgb = pytest.importorskip("lightgbm")

KZ = float(np.float32(1e-35))  # LightGBM's kZeroThreshold
CAT = 4  # the categorical column of _data


def _data(n, seed, *, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, CAT] = rng.integers(0, 4, n)
    X[rng.random((n, 5)) < nan] = np.nan
    Z = np.nan_to_num(X)
    y = (3 * Z[:, 0] + (Z[:, 1] > 0) + 0.8 * Z[:, 2] * (X[:, CAT] == 1)
         + rng.normal(scale=0.2, size=n))
    return X, y


def _model(n_estimators=6, num_leaves=5, seed=0, categorical=False, **kw):
    X, y = _data(400, seed)
    m = lgb.LGBMRegressor(n_estimators=n_estimators, num_leaves=num_leaves, linear_tree=True,
                          min_child_samples=10, verbose=-1, random_state=seed, **kw)
    m.fit(X, y, categorical_feature=[CAT] if categorical else "auto")
    return m


# ------------------------------------------------------------------ predictions
@pytest.mark.parametrize("categorical", [False, True])
def test_predict_raw_equals_lightgbm(categorical):
    m = _model(categorical=categorical)
    X, _ = _data(300, 1, nan=0.25)  # held-out rows, a quarter of the values NaN
    X[:20, 0] = 1e-36  # read as 0.0 by LightGBM's predictor
    want = m.predict(X, raw_score=True)
    ens = parse(m)
    assert ens.linear_leaves is not None
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], want, rtol=1e-12, atol=1e-12)
    # the same from the Booster and from the text, and the linear terms matter
    booster_ens = parse(m.booster_)
    text_ens = parse_lightgbm_text(m.booster_.model_to_string())
    for e in (booster_ens, text_ens):
        np.testing.assert_allclose(e.predict_raw(X)[:, 0], want, rtol=1e-12, atol=1e-12)
    import dataclasses
    constant = dataclasses.replace(ens, linear_leaves=None)
    assert np.abs(constant.predict_raw(X)[:, 0] - want).max() > 0.1


def test_iteration_range_and_pickle_keep_the_linear_leaves():
    import pickle

    m = _model(n_estimators=6)
    X, _ = _data(200, 8, nan=0.2)
    ens = parse(m)
    first = ens.rounds(0, 3)
    np.testing.assert_allclose(first.predict_raw(X)[:, 0],
                               m.predict(X, raw_score=True, num_iteration=3), rtol=1e-12,
                               atol=1e-12)
    later = ens.rounds(2, 6)  # LightGBM leaves the init score (in tree 0) out
    np.testing.assert_allclose(later.predict_raw(X)[:, 0],
                               m.predict(X, raw_score=True, start_iteration=2,
                                         num_iteration=4), rtol=1e-12, atol=1e-12)
    again = pickle.loads(pickle.dumps(ens))
    assert again.fingerprint == ens.fingerprint
    assert not again.linear_leaves.coef.flags.writeable
    np.testing.assert_array_equal(again.predict_raw(X), ens.predict_raw(X))


def test_predict_raw_from_file_binary(tmp_path):
    X, y = _data(400, 3)
    m = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, linear_tree=True, verbose=-1,
                           min_child_samples=10).fit(X, (y > 1).astype(int))
    path = tmp_path / "model.txt"
    m.booster_.save_model(path)
    Xt, _ = _data(200, 4, nan=0.2)
    ens = treeimp.load(str(path))
    np.testing.assert_allclose(ens.predict_raw(Xt)[:, 0], m.predict(Xt, raw_score=True),
                               rtol=1e-12, atol=1e-12)


def test_multiclass_predict_and_contributions_add_up():
    X, y = _data(600, 10)
    labels = np.digitize(y, [0.0, 1.5])
    m = lgb.LGBMClassifier(n_estimators=4, num_leaves=5, linear_tree=True, verbose=-1,
                           min_child_samples=10).fit(X[:400], labels[:400])
    want = m.predict(X[400:], raw_score=True)
    got = parse(m).predict_raw(X[400:])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    res = treeimp.contributions(m, X[400:])
    np.testing.assert_allclose(res.base_values + res.values.sum(axis=1), want, rtol=1e-10,
                               atol=1e-10)


# ------------------------------------------------------------------ brute-force SHAP
def _decide(node, x):
    """LightGBM's decision at a dump_model() node: True for the left child."""
    v = x[node["split_feature"]]
    if node["decision_type"] == "==":
        if np.isnan(v) or int(v) < 0:
            return False
        return int(v) in {int(c) for c in str(node["threshold"]).split("||")}
    missing = node["missing_type"]
    if np.isnan(v) and missing != "NaN":
        v = 0.0
    if (missing == "Zero" and abs(v) <= KZ) or (missing == "NaN" and np.isnan(v)):
        return node["default_left"]
    return v <= node["threshold"]


def _count(node):
    return node["internal_count"] if "split_index" in node else node["leaf_count"]


def _leaf(node, x, S):
    """The value function at a leaf: the linear model when all its features are known
    (in S) and none is NaN, else the leaf's fallback (leaf_value); a leaf without
    features is its constant."""
    feats = node.get("leaf_features", [])
    if not feats:
        return node["leaf_const"]
    if all(j in S for j in feats) and not any(np.isnan(x[j]) for j in feats):
        return node["leaf_const"] + sum(c * x[j] for c, j in zip(node["leaf_coeff"], feats))
    return node["leaf_value"]


def _value(node, x, S):
    """Path-dependent expectation (TreeSHAP's value function, covers = counts)."""
    if "split_index" not in node:
        return _leaf(node, x, S)
    a, b = node["left_child"], node["right_child"]
    if node["split_feature"] in S:
        return _value(a if _decide(node, x) else b, x, S)
    ca, cb = _count(a), _count(b)
    return (ca * _value(a, x, S) + cb * _value(b, x, S)) / (ca + cb)


def _brute_shap(trees, x, n_features):
    x = np.where(np.abs(x) <= KZ, 0.0, x)
    phi = np.zeros(n_features)
    base = 0.0
    for tree in trees:
        base += _value(tree, x, set())
        for j in range(n_features):
            others = [k for k in range(n_features) if k != j]
            for r in range(n_features):
                for S in itertools.combinations(others, r):
                    w = (math.factorial(r) * math.factorial(n_features - r - 1)
                         / math.factorial(n_features))
                    phi[j] += w * (_value(tree, x, set(S) | {j}) - _value(tree, x, set(S)))
    return phi, base


@pytest.mark.parametrize("categorical", [False, True])
def test_contributions_equal_brute_force_shapley(categorical):
    m = _model(n_estimators=3, num_leaves=6, categorical=categorical)
    trees = [t["tree_structure"] for t in m.booster_.dump_model()["tree_info"]]
    assert any(t.get("leaf_features") for tr in trees for t in _leaves(tr))
    X, _ = _data(25, 5, nan=0.2)
    res = treeimp.contributions(m, X)
    want = m.predict(X, raw_score=True)
    np.testing.assert_allclose(res.base_values + res.values.sum(axis=1), want, rtol=1e-10,
                               atol=1e-10)
    for i in range(X.shape[0]):
        phi, base = _brute_shap(trees, X[i], X.shape[1])
        np.testing.assert_allclose(res.values[i], phi, rtol=1e-9, atol=1e-10)
        np.testing.assert_allclose(res.base_values[i], base, rtol=1e-10, atol=1e-10)


def _leaves(node):
    if "split_index" not in node:
        return [node]
    return _leaves(node["left_child"]) + _leaves(node["right_child"])


def test_lightgbm_refuses_its_own_contributions_for_linear_trees():
    # what treeimp's exact values replace (LightGBM's predictor: "not implemented")
    m = _model(n_estimators=2)
    X, _ = _data(5, 6)
    with pytest.raises(Exception, match="linear trees"):
        m.predict(X, pred_contrib=True)


def test_other_computations_refused_clearly():
    m = _model(n_estimators=3)
    X, y = _data(100, 7)
    with pytest.raises(ValueError, match="linear leaf models"):
        treeimp.contributions(m, X, method="saabas")
    with pytest.raises(ValueError, match="linear leaf models"):
        treeimp.interactions(m, X[:5])
    with pytest.raises(ValueError, match="linear leaf models"):
        treeimp.explain(m, X, y, methods=("saabas_oob",))
    with pytest.raises(ValueError, match="linear leaf models"):
        treeimp.interaction_importance(m, X, y)
    # a linear-tree ranker: predictions and permutation importance, no staged measures
    labels = np.clip(np.round(np.nan_to_num(X[:, 0]) + 1), 0, 3).astype(int)
    ranker = lgb.LGBMRanker(n_estimators=3, num_leaves=4, linear_tree=True, verbose=-1,
                            min_child_samples=5).fit(X, labels, group=[20] * 5)
    with pytest.raises(ValueError, match="learning-to-rank model is not available for "
                                         "models with linear leaf models"):
        treeimp.explain(ranker, X, labels, group=[20] * 5)
    with pytest.raises(ValueError, match="linear leaf models"):
        treeimp.contributions(m, X, groups={"a": [0, 1]}, group_shapley=True)


# ------------------------------------------------------------------ permutation importance
@pytest.mark.parametrize("task", ["regression", "binary"])
def test_permutation_importance_equals_sklearn_on_lightgbm_predict(task):
    # truth: scikit-learn's permutation_importance, which calls LightGBM's own predict
    # (linear leaves applied) on every permuted copy, with the same seed
    from sklearn.inspection import permutation_importance

    X, y = _data(500, 11, nan=0.1)
    if task == "binary":
        y = (y > 1).astype(int)
        m = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, linear_tree=True, verbose=-1,
                               min_child_samples=10).fit(X[:250], y[:250])
        scorings = ["roc_auc", "neg_log_loss", "accuracy"]
    else:
        m = _model(n_estimators=5)
        scorings = ["r2", "neg_mean_squared_error"]
    Xv, yv = X[250:], y[250:]
    w = np.random.default_rng(3).uniform(0.5, 2.0, size=len(yv))
    got = treeimp.permutation_importance(m, Xv, yv, scoring=scorings, n_repeats=3,
                                         random_state=4, sample_weight=w)
    want = permutation_importance(m, Xv, yv, scoring=scorings, n_repeats=3, random_state=4,
                                  sample_weight=w)
    for s in scorings:
        np.testing.assert_allclose(got[s].importances, want[s].importances, rtol=1e-9,
                                   atol=1e-9)
    # the linear terms matter: a feature of the leaf models (x0) moves the score
    assert np.abs(want[scorings[0]].importances[0]).max() > 0.01


# ------------------------------------------------------------------ staged statistics
def _lgb_grad_hess(kind, margin, y):
    """g, h of LightGBM's l2 / binary / multiclass losses (numpy, independent of treeimp)."""
    if kind == "regression":
        return margin - y[:, None], np.ones_like(margin)
    if kind == "binary":
        p = 1.0 / (1.0 + np.exp(-margin))
        return p - y[:, None], p * (1.0 - p)
    e = np.exp(margin - margin.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    K = margin.shape[1]
    return p - np.eye(K)[y.astype(int)], K / (K - 1.0) * p * (1.0 - p)


def _fit_kind(kind):
    X, y = _data(600, 12, nan=0.1)
    if kind == "binary":
        y = (y > 1).astype(int)
    elif kind == "multiclass":
        y = np.digitize(y, [0.0, 1.5])
    est = lgb.LGBMRegressor if kind == "regression" else lgb.LGBMClassifier
    m = est(n_estimators=5, num_leaves=5, linear_tree=True, verbose=-1,
            min_child_samples=10).fit(X[:300], y[:300])
    return m, X[300:], y[300:]


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
def test_staged_statistics_equal_brute_force_on_lightgbm_margins(kind):
    # truth: every round's margin from LightGBM's own predict(raw_score=True,
    # num_iteration=k) (linear leaves included), g and h of its loss there, each row's
    # leaf from pred_leaf=True, and the per-leaf, per-block sums n', S', H', R' by hand
    from treeimp.inputs.rows import RowSource
    from treeimp.stats.drivers import staged_pass

    m, Xv, yv = _fit_kind(kind)
    ens = parse(m)
    n, K, B = len(yv), ens.n_outputs, 3
    w = np.random.default_rng(5).uniform(0.5, 2.0, size=n)
    block = np.random.default_rng(6).integers(0, B, n)
    st, margin = staged_pass(ens, RowSource(Xv, ens), yv, w, block, B, propagate=False)
    rounds = m.n_estimators
    leaf = m.predict(Xv, pred_leaf=True).reshape(n, -1)  # (n, rounds * K), tree order
    want = np.zeros_like(st)
    for k in range(rounds):
        before = (np.broadcast_to(ens.base_score, (n, K)) if k == 0
                  else m.predict(Xv, raw_score=True, num_iteration=k).reshape(n, K))
        g, h = _lgb_grad_hess(kind, before, yv)
        for c in range(K):
            t = k * K + c
            n_nodes = ens.tree_offsets[t + 1] - ens.tree_offsets[t]
            node = ens.tree_offsets[t] + leaf[:, t] + (n_nodes - 1) // 2  # apply docstring
            for d, term in enumerate((w, -w * g[:, c], w * h[:, c],
                                      w * g[:, c] ** 2 / h[:, c])):
                np.add.at(want[d], (node, block), term)
    np.testing.assert_allclose(st, want, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(margin, m.predict(Xv, raw_score=True).reshape(n, K),
                               rtol=1e-12, atol=1e-12)
    # the constant-leaf margins would give other gradients
    import dataclasses
    constant = dataclasses.replace(ens, linear_leaves=None)
    st0, _ = staged_pass(constant, RowSource(Xv, ens), yv, w, block, B, propagate=False)
    assert np.abs(st0[1] - want[1]).max() > 1e-3 * np.abs(want[1]).max()


# ------------------------------------------------------------------ damaged text
def _text():
    return _model(n_estimators=3, num_leaves=4).booster_.model_to_string()


def _edit_tree_line(text, key, tree, new_value):
    blocks = text.split("\nTree=")
    pattern = re.compile(rf"^{key}=.*$", re.M)
    assert pattern.search(blocks[tree + 1])
    blocks[tree + 1] = pattern.sub(f"{key}={new_value}", blocks[tree + 1], count=1)
    out = "\nTree=".join(blocks)
    return re.sub(r"^tree_sizes=.*\n", "", out, flags=re.M)  # sizes no longer match


@pytest.mark.parametrize(("key", "value", "message"), [
    ("num_features", "1 1", r"tree 1: num_features has 2 values, expected 4"),
    ("num_features", "1 1 1 -1", r"tree 1: num_features gives leaf 3 -1 features"),
    ("num_features", "1 1 1 99", r"tree 1: num_features gives leaf 3 99 features"),
    ("num_features", "2 2 2 2", r"tree 1: leaf_features has \d+ values, expected 8"),
    ("leaf_features", "0 0 0 7", r"tree 1: leaf_features has feature 7, outside"),
    ("leaf_features", "0 0 0 x", r"tree 1: leaf_features has a value that is not an integer"),
    ("leaf_coeff", "0.1 0.2", r"tree 1: leaf_coeff has 2 values, expected"),
    ("leaf_const", "0.1 0.2 0.3", r"tree 1: leaf_const has 3 values, expected 4"),
    ("is_linear", "2", r"tree 1: is_linear=2, must be 0 or 1"),
])
def test_damaged_linear_lines_rejected(key, value, message):
    text = _text()
    # tree 1 of this model: 4 leaves, one feature each (checked, so the edits mean what
    # the messages say)
    assert re.search(r"Tree=1\n(?:.*\n)*?num_features=1 1 1 1\n", text)
    bad = _edit_tree_line(text, key, 1, value)
    with pytest.raises(ValueError, match=message):
        parse_lightgbm_text(bad)


def test_missing_linear_key_rejected():
    text = _text()
    blocks = text.split("\nTree=")
    blocks[2] = re.sub(r"^leaf_coeff=.*\n", "", blocks[2], flags=re.M)
    bad = re.sub(r"^tree_sizes=.*\n", "", "\nTree=".join(blocks), flags=re.M)
    with pytest.raises(ValueError, match=r"tree 1 is linear \(is_linear=1\) but has no key "
                                         r"'leaf_coeff'"):
        parse_lightgbm_text(bad)


# ------------------------------------------------------------------ importance
def _linear_design(seed, n=2000):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))  # x0 linear, x1 a step, x2..x4 noise
    y = 3 * X[:, 0] + 2 * (X[:, 1] > 0) + rng.normal(scale=0.5, size=n)
    return X, y


def test_leaf_model_importance_of_a_linear_feature():
    X, y = _linear_design(0)
    m = lgb.LGBMRegressor(n_estimators=40, num_leaves=4, linear_tree=True, verbose=-1,
                          min_child_samples=20, random_state=0).fit(X[:1000], y[:1000])
    t = treeimp.linear_leaf_importance(m, X[1000:], y[1000:])
    lm = t["leaf_models"]
    assert lm["x0"] > 0.5  # the slope of x0 within the leaves lowers held-out loss
    assert abs(lm["x1"]) < 0.02 * lm["x0"]  # a step has no slope worth anything
    noise = t.loc[["x2", "x3", "x4"]]
    assert np.abs(noise.to_numpy()).max() < 0.005 * t["total"]["x0"]


def test_components_add_up_to_the_first_order_decrease():
    # truth: LightGBM's own per-iteration outputs f_t and the squared-error gradient at
    # the margin before each iteration, -(1/n) sum_i sum_t g_it f_t(x_i)
    X, y = _linear_design(1, n=800)
    m = lgb.LGBMRegressor(n_estimators=8, num_leaves=5, linear_tree=True, verbose=-1,
                          min_child_samples=10).fit(X[:400], y[:400])
    Xt, yt = X[400:], y[400:]
    Xt[::7, 0] = np.nan  # rows whose leaf models fall back to leaf_value
    w = np.random.default_rng(2).uniform(0.5, 2.0, size=400)
    per_iter = np.stack([m.predict(Xt, raw_score=True, start_iteration=t, num_iteration=1)
                         for t in range(8)], axis=1)
    init = parse(m).base_score[0]
    per_iter[:, 0] -= init  # the init score LightGBM keeps inside the first tree
    margin = init + np.concatenate([np.zeros((400, 1)), np.cumsum(per_iter, axis=1)[:, :-1]],
                                   axis=1)
    truth = np.sum(w[:, None] * (yt[:, None] - margin) * per_iter) / w.sum()
    t = treeimp.linear_leaf_importance(m, Xt, yt, sample_weight=w)
    got = t["total"].sum() + t.attrs["leaf_level"] + t.attrs["root"]
    np.testing.assert_allclose(got, truth, rtol=1e-9)
    assert t["leaf_models"].abs().sum() > 0.01 * abs(truth)


def test_splits_component_is_mdi_oob_on_a_constant_model():
    X, y = _linear_design(3, n=800)
    m = lgb.LGBMRegressor(n_estimators=10, num_leaves=6, verbose=-1).fit(X[:400], y[:400])
    t = treeimp.linear_leaf_importance(m, X[400:], y[400:])
    imp = treeimp.explain(m, X[400:], y[400:], methods=("mdi_oob",))
    np.testing.assert_allclose(t["splits"].to_numpy(), imp.table["mdi_oob"].to_numpy(),
                               rtol=1e-9, atol=1e-12)
    assert not t["leaf_models"].any()


def test_random_damage_to_linear_lines_fails_cleanly():
    # every mutation of a linear line gives a ValueError or a model that predicts
    text = _text()
    rng = np.random.default_rng(11)
    X, _ = _data(20, 12)
    words = ["-1", "0", "1", "3", "4", "5", "2147483648", "9223372036854775807",
             "99999999999999999999", "nan", "inf", "-inf", "1e308", "x", ""]
    for _ in range(60):
        key = ["num_features", "leaf_features", "leaf_coeff", "leaf_const", "is_linear"][
            rng.integers(5)]
        tree = int(rng.integers(3))
        line = re.search(rf"^{key}=(.*)$", text.split("\nTree=")[tree + 1], re.M).group(1)
        tokens = line.split() or [""]
        tokens[int(rng.integers(len(tokens)))] = words[int(rng.integers(len(words)))]
        bad = _edit_tree_line(text, key, tree, " ".join(tokens))
        try:
            ens = parse_lightgbm_text(bad)
        except ValueError:
            continue
        assert np.isfinite(ens.predict_raw(np.nan_to_num(X))).all() or key in (
            "leaf_coeff", "leaf_const")


# ------------------------------------------------------------------ explain
def _dump_paths(tree, x):
    """(leaf dict, [(split feature, v_child - v_node)] on x's path) of a dump_model()
    tree, routed by _decide."""
    node, steps = tree, []
    while "split_index" in node:
        child = node["left_child"] if _decide(node, x) else node["right_child"]
        v = child["leaf_value"] if "leaf_index" in child else child["internal_value"]
        steps.append((node["split_feature"], v - node["internal_value"]))
        node = child
    return node, steps


def _full_internal_values(node):
    """Set every split's value to the hessian-weighted mean of its leaves' constants
    (the node values of the normal form; the text prints internal_value with 6 digits,
    and a linear tree's root as 0)."""
    if "split_index" not in node:
        return
    leaves = _leaves(node)
    node["internal_value"] = (sum(u["leaf_weight"] * u["leaf_value"] for u in leaves)
                              / sum(u["leaf_weight"] for u in leaves))
    _full_internal_values(node["left_child"])
    _full_internal_values(node["right_child"])


def _brute_force_explain(m, kind, Xv, yv, w, rows):
    """(mdi_oob, leaf_models) per feature on the evaluation rows ``rows``, from
    LightGBM's own margins (predict(raw_score=True, num_iteration=k)), the loss's
    gradients there and the trees and leaf models of dump_model()."""
    trees = [t["tree_structure"] for t in m.booster_.dump_model()["tree_info"]]
    for t in trees:
        _full_internal_values(t)
    X, y, wr = Xv[rows], yv[rows], w[rows]
    n, F = X.shape
    K = 1 if kind != "multiclass" else len(m.classes_)
    base = parse(m).base_score
    splits, leaf_models = np.zeros(F), np.zeros(F)
    for k in range(m.n_estimators):
        before = (np.broadcast_to(base, (n, K)) if k == 0
                  else m.predict(X, raw_score=True, num_iteration=k).reshape(n, K))
        g, _ = _lgb_grad_hess(kind, before, y)
        for c in range(K):
            tree = trees[k * K + c]
            wz = -wr * g[:, c]
            users = {}  # leaf index -> rows using its linear model
            for i in range(n):
                leaf, steps = _dump_paths(tree, X[i])
                for f, d in steps:
                    splits[f] += wz[i] * d
                feats = leaf.get("leaf_features", [])
                if feats and not np.isnan(X[i, feats]).any():
                    users.setdefault(leaf["leaf_index"], (leaf, []))[1].append(i)
            for leaf, idx in users.values():
                idx = np.array(idx)
                mean = np.average(X[np.ix_(idx, leaf["leaf_features"])], axis=0,
                                  weights=wr[idx])
                for f, b, mu in zip(leaf["leaf_features"], leaf["leaf_coeff"], mean):
                    leaf_models[f] += b * np.sum(wz[idx] * (X[idx, f] - mu))
    return splits / wr.sum(), leaf_models / wr.sum()


@pytest.mark.parametrize("kind", ["regression", "binary"])
def test_explain_equals_brute_force_with_jackknife(kind):
    from treeimp.stats.blocks import block_key, row_blocks

    m, Xv, yv = _fit_kind(kind)
    Xv, yv = Xv[:150], yv[:150]  # the brute force walks every row in Python
    n, B = len(yv), 4
    w = np.random.default_rng(7).uniform(0.5, 2.0, size=n)
    imp = treeimp.explain(m, Xv, yv, sample_weight=w, n_blocks=B, random_state=3,
                          methods=("mdi_oob", "leaf_models"))
    block = row_blocks(range(n), block_key(3), B)
    everything = np.arange(n)
    want = _brute_force_explain(m, kind, Xv, yv, w, everything)
    loo = [_brute_force_explain(m, kind, Xv, yv, w, everything[block != b])
           for b in range(B)]
    for c, name in enumerate(("mdi_oob", "leaf_models")):
        np.testing.assert_allclose(imp.table[name].to_numpy(), want[c], rtol=1e-7,
                                   atol=1e-10)
        reps = np.array([r[c] for r in loo])
        se = np.sqrt((B - 1) / B * ((reps - reps.mean(axis=0)) ** 2).sum(axis=0))
        np.testing.assert_allclose(imp.stderr[name].to_numpy(), se, rtol=1e-6, atol=1e-10)
    assert np.abs(want[1]).max() > 1e-4  # the leaf models do take part
    # treeimp.linear_leaf_importance reports the same two numbers
    t = treeimp.linear_leaf_importance(m, Xv, yv, sample_weight=w)
    np.testing.assert_allclose(t["splits"], imp.table["mdi_oob"], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(t["leaf_models"], imp.table["leaf_models"], rtol=1e-9,
                               atol=1e-12)


def test_accumulate_in_chunks_equals_one_call_and_defaults_show_leaf_models():
    m, Xv, yv = _fit_kind("regression")
    ex = treeimp.Explainer(m)
    one = ex.explain(Xv, yv, n_blocks=5, random_state=1)
    assert "leaf_models" in one.table.columns  # the default measures show both shares
    a = ex.accumulate(Xv[:100], yv[:100], rows=range(0, 100), n_blocks=5, random_state=1,
                      methods=one.table.columns)
    b = ex.accumulate(Xv[100:], yv[100:], rows=range(100, len(yv)), n_blocks=5,
                      random_state=1, methods=one.table.columns)
    two = ex.finalize(a + b)
    # without methods=, the default measures (leaf_models among them) are accumulated
    plain = ex.finalize(ex.accumulate(Xv, yv, n_blocks=5, random_state=1))
    np.testing.assert_allclose(plain.table.to_numpy(), one.table.to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(two.table.to_numpy(), one.table.to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(two.stderr.to_numpy(), one.stderr.to_numpy(), rtol=1e-7,
                               equal_nan=True)
    with pytest.raises(ValueError, match="leaves are constants"):
        treeimp.explain(lgb.LGBMRegressor(n_estimators=2, verbose=-1).fit(Xv, yv), Xv, yv,
                        methods=("leaf_models",))


def test_simulated_design_splits_and_leaf_models():
    # y = 3 x0 + 2 step(x1) + noise, x2 a noise feature of 1000 levels, x3 noise.
    # LightGBM finds its splits with constant-leaf gains, so it splits on x0 and x1;
    # the slope of x0 lives in the leaf models, the step of x1 in the splits alone
    rng = np.random.default_rng(0)
    n = 3000
    X = np.c_[rng.normal(size=n), rng.normal(size=n), rng.integers(0, 1000, n),
              rng.normal(size=n)]
    y = 3 * X[:, 0] + 2 * (X[:, 1] > 0) + rng.normal(size=n)
    m = lgb.LGBMRegressor(n_estimators=50, num_leaves=4, linear_tree=True, verbose=-1,
                          min_child_samples=20, random_state=0).fit(X[:1500], y[:1500])
    imp = treeimp.explain(m, X[1500:], y[1500:], random_state=0)
    t, p = imp.table, imp.pvalues
    assert t["mdi"]["x2"] > 0  # in-sample gain credits the noise
    assert t["leaf_models"].idxmax() == "x0" and p["leaf_models"]["x0"] < 1e-6
    assert p["mdi_oob"]["x1"] < 1e-6 and p["leaf_models"]["x1"] > 0.05
    # x1's share comes through the splits; x0 has a share through its leaf models too
    assert abs(t["leaf_models"]["x1"]) < 0.02 * t["mdi_oob"]["x1"]
    assert t["leaf_models"]["x0"] > 0.1 * t["mdi_oob"]["x0"]
    for name in ("mdi_oob", "ufi", "leaf_models"):
        assert (p[name][["x2", "x3"]] > 0.01).all(), name
    assert set(imp.select()) == {"x0", "x1"}


def test_cli_explains_a_saved_linear_tree_model_in_batches(tmp_path, capsys):
    import pandas as pd

    from treeimp.cli.inputs import CSV_OPTIONS
    from treeimp.cli.main import main

    m, Xv, yv = _fit_kind("regression")
    m.booster_.save_model(tmp_path / "m.txt")
    frame = pd.DataFrame(Xv, columns=[f"x{j}" for j in range(Xv.shape[1])])
    frame.assign(y=yv).to_csv(tmp_path / "d.csv", index=False)
    out = tmp_path / "imp.csv"
    assert main(["explain", str(tmp_path / "m.txt"), str(tmp_path / "d.csv"), "--target", "y",
                 "--format", "csv", "--seed", "0", "--batch-rows", "70",
                 "--columns-by-position", "--output", str(out)]) == 0
    got = pd.read_csv(out, **CSV_OPTIONS)
    want = treeimp.explain(m, frame, yv, random_state=0).to_frame()
    assert "leaf_models" in set(want["method"])
    pd.testing.assert_frame_equal(got, want, check_exact=False, rtol=1e-9)


def test_dask_partitions_and_cross_explain():
    da = pytest.importorskip("dask.array")
    m, Xv, yv = _fit_kind("regression")
    one = treeimp.explain(m, Xv, yv, random_state=1)
    parts = treeimp.explain(m, da.from_array(Xv, chunks=(70, Xv.shape[1])),
                            da.from_array(yv, chunks=70), random_state=1)
    np.testing.assert_allclose(parts.table.to_numpy(), one.table.to_numpy(), rtol=1e-9)
    np.testing.assert_allclose(parts.stderr.to_numpy(), one.stderr.to_numpy(), rtol=1e-7,
                               equal_nan=True)
    X, y = _linear_design(4, n=600)
    est = lgb.LGBMRegressor(n_estimators=8, num_leaves=4, linear_tree=True, verbose=-1)
    cf = treeimp.cross_explain(est, X, y, cv=2, random_state=0)
    assert cf.table["leaf_models"].idxmax() == "x0"


def test_shap_oob_equals_brute_force_shapley_on_lightgbm_margins():
    # truth: per tree, brute-force Shapley values over all subsets of the 5 features on
    # the dump_model() tree (linear leaves, path-dependent value function) times -g at
    # LightGBM's own margin before the tree's round; the weighted mean over rows, summed
    # over trees; jackknife over the same row blocks
    from treeimp.stats.blocks import block_key, row_blocks

    m = _model(n_estimators=3, num_leaves=4)
    X, y = _data(40, 13, nan=0.1)
    n, F, B = len(y), X.shape[1], 4
    w = np.random.default_rng(8).uniform(0.5, 2.0, size=n)
    imp = treeimp.explain(m, X, y, sample_weight=w, methods=("shap_oob",), n_blocks=B,
                          random_state=2)
    trees = [t["tree_structure"] for t in m.booster_.dump_model()["tree_info"]]
    base = parse(m).base_score
    per_row = np.zeros((n, F))  # sum over trees of w z phi_t
    for k, tree in enumerate(trees):
        before = (np.full(n, base[0]) if k == 0
                  else m.predict(X, raw_score=True, num_iteration=k))
        z = y - before
        for i in range(n):
            per_row[i] += w[i] * z[i] * _brute_shap([tree], X[i], F)[0]
    want = per_row.sum(axis=0) / w.sum()
    np.testing.assert_allclose(imp.table["shap_oob"].to_numpy(), want, rtol=1e-8, atol=1e-10)
    block = row_blocks(range(n), block_key(2), B)
    reps = np.array([per_row[block != b].sum(axis=0) / w[block != b].sum()
                     for b in range(B)])
    se = np.sqrt((B - 1) / B * ((reps - reps.mean(axis=0)) ** 2).sum(axis=0))
    np.testing.assert_allclose(imp.stderr["shap_oob"].to_numpy(), se, rtol=1e-6, atol=1e-10)


def test_staged_margins_start_at_the_rows_offsets():
    # LightGBM's init_score: every margin is the offset plus predict(raw_score=True)
    from treeimp.inputs.rows import RowSource
    from treeimp.stats.drivers import staged_pass

    m, Xv, yv = _fit_kind("regression")
    ens = parse(m)
    n = len(yv)
    offset = np.random.default_rng(9).normal(size=n)
    st, margin = staged_pass(ens, RowSource(Xv, ens), yv, np.ones(1), np.zeros(n, np.int32),
                             1, propagate=False, base_margin=offset[:, None])
    np.testing.assert_allclose(margin[:, 0], offset + m.predict(Xv, raw_score=True),
                               rtol=1e-12, atol=1e-12)
    leaf = m.predict(Xv, pred_leaf=True)
    want = np.zeros(ens.n_nodes)
    for k in range(m.n_estimators):
        before = offset + (ens.base_score[0] if k == 0
                           else m.predict(Xv, raw_score=True, num_iteration=k))
        node = ens.tree_offsets[k] + leaf[:, k] + (ens.tree_offsets[k + 1]
                                                   - ens.tree_offsets[k] - 1) // 2
        np.add.at(want, node, yv - before)
    np.testing.assert_allclose(st[1, :, 0], want, rtol=1e-9, atol=1e-11)

"""treeimp's TreeSHAP / Saabas contributions of CatBoost models against CatBoost's own.

References: CatBoost's ``get_feature_importance(type="ShapValues")`` (path-dependent
TreeSHAP over the leaf weights; ``shap_calc_type="Approximate"`` is Saabas) for
symmetric trees, numeric, one-hot and target-statistic (CTR) splits, with NaN and
held-out rows. shap's TreeExplainer gives CatBoost models to that same CatBoost call, so
it is compared once, not as a second reference. For non-symmetric trees (Depthwise,
Lossguide) CatBoost's ShapValues do not add up to its own predictions (catboost 1.2.10),
so the reference there is the exact Shapley value of the path-dependent conditional
expectations, enumerated over every subset of features on the trees read from the
model's JSON file.
"""

import itertools
import json
import math
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import treeimp

catboost = pytest.importorskip("catboost")

ATOL = 1e-6
COMMON = dict(random_seed=0, verbose=0, allow_writing_files=False, thread_count=1)


def _numeric(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random(X.shape) < 0.1] = np.nan
    z = np.nan_to_num(X)
    y = 2 * z[:, 0] + z[:, 1] * z[:, 2] + 0.5 * rng.normal(size=n)
    return X, y


def _categorical(n=400, seed=1):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"x0": rng.normal(size=n), "c1": rng.choice(list("abcdefgh"), n),
                       "c2": rng.choice(list("pqrstu"), n), "c3": rng.choice(list("xyz"), n)})
    df.loc[rng.random(n) < 0.1, "x0"] = np.nan
    code = (df.c1.map({k: i for i, k in enumerate("abcdefgh")}) * 6
            + df.c2.map({k: i for i, k in enumerate("pqrstu")}))
    y = np.sin(1.7 * code) * 3 + df.x0.fillna(0) + (df.c3 == "x") + 0.3 * rng.normal(size=n)
    return df, y.to_numpy()


def _catboost_shap(model, X, cat_features=None, calc_type="Regular"):
    """CatBoost's ShapValues as (values (n, F[, K]), base (n[, K])), treeimp's layout."""
    out = model.get_feature_importance(data=catboost.Pool(X, cat_features=cat_features),
                                       type="ShapValues", shap_calc_type=calc_type)
    if out.ndim == 3:  # (n, K, F + 1)
        out = out.transpose(0, 2, 1)
    return out[:, :-1], out[:, -1]


def _check(model, X, cat_features=None, method="shap"):
    ref, ref_base = _catboost_shap(model, X, cat_features,
                                   "Regular" if method == "shap" else "Approximate")
    c = treeimp.contributions(model, X, method=method)
    np.testing.assert_allclose(c.values, ref, rtol=0, atol=ATOL)
    np.testing.assert_allclose(c.base_values, ref_base, rtol=0, atol=ATOL)
    return c


def test_symmetric_numeric_equals_catboost_and_shap():
    """Symmetric trees on numeric features, NaN in every column, training and held-out
    rows; shap's TreeExplainer gives the same values (it asks CatBoost)."""
    X, y = _numeric()
    model = catboost.CatBoostRegressor(iterations=8, depth=4, **COMMON)
    model.fit(X[:200], y[:200])
    c = _check(model, X)
    shap = pytest.importorskip("shap")
    explainer = shap.TreeExplainer(model)
    np.testing.assert_allclose(explainer.shap_values(X), c.values, rtol=0, atol=ATOL)
    np.testing.assert_allclose(explainer.expected_value, c.base_values[0], rtol=0, atol=ATOL)


@pytest.mark.parametrize("loss", ["Logloss", "MultiClass"])
def test_symmetric_classifiers_equal_catboost(loss):
    X, y = _numeric(seed=2)
    z = np.nan_to_num(X)
    target = (z[:, 0] > 0).astype(int) + (loss == "MultiClass") * (z[:, 1] > 0.5)
    model = catboost.CatBoostClassifier(iterations=6, depth=4, **COMMON,
                                        loss_function=loss).fit(X[:200], target[:200])
    c = _check(model, X)
    assert c.values.shape == ((300, 4) if loss == "Logloss" else (300, 4, 3))


def test_one_hot_categories_equal_catboost():
    """One-hot splits only (every category count under one_hot_max_size), categories
    unseen in training and NaN in the numeric column among the explained rows."""
    df, y = _categorical()
    model = catboost.CatBoostRegressor(iterations=8, depth=4, **COMMON,
                                       one_hot_max_size=10, cat_features=[1, 2, 3])
    model.fit(df.iloc[:300], y[:300])
    X = df.copy()
    X.loc[X.index[-5:], "c1"] = "unseen"
    _check(model, X, cat_features=[1, 2, 3])


def test_ctr_splits_and_combinations_equal_catboost(tmp_path):
    """Target-statistic splits, also on combinations of two categorical features: CatBoost
    treats a combination as a feature of its own and shares its value equally among
    the combined columns."""
    df, y = _categorical()
    model = catboost.CatBoostRegressor(iterations=15, depth=4, **COMMON,
                                       one_hot_max_size=3, max_ctr_complexity=3,
                                       cat_features=[1, 2, 3])
    model.fit(df.iloc[:300], y[:300])
    path = tmp_path / "m.json"
    model.save_model(str(path), format="json")
    doc = json.loads(path.read_text())
    used = {(s.get("split_index"), s.get("border")) for t in doc["oblivious_trees"]
            for s in t["splits"] if s["split_type"] == "OnlineCtr"}
    sizes = {len(c["elements"]) for c in doc["features_info"]["ctrs"]}
    assert used and max(sizes) >= 2, "the model should split on a combination's statistic"
    _check(model, df, cat_features=[1, 2, 3])


@pytest.mark.parametrize("method", ["shap", "saabas"])
def test_ctr_model_without_combinations_equals_catboost(method):
    df, y = _categorical(seed=3)
    model = catboost.CatBoostRegressor(iterations=10, depth=4, **COMMON,
                                       one_hot_max_size=2, max_ctr_complexity=1,
                                       cat_features=[1, 2, 3])
    model.fit(df.iloc[:300], y[:300])
    _check(model, df, cat_features=[1, 2, 3], method=method)


def test_saabas_equals_catboost_approximate_shap_values():
    """method="saabas" is CatBoost's shap_calc_type="Approximate" (v_child - v_node along
    the row's path, in CatBoost's order of the splits)."""
    X, y = _numeric(seed=4)
    model = catboost.CatBoostRegressor(iterations=8, depth=4, **COMMON)
    model.fit(X[:200], y[:200])
    _check(model, X, method="saabas")


# ------------------------------------------------------------------ non-symmetric trees
def _json_trees(model, tmp_path):
    path = tmp_path / "model.json"
    model.save_model(str(path), format="json")
    doc = json.loads(path.read_text())
    floats = {f["feature_index"]: f for f in doc["features_info"]["float_features"]}
    return doc, floats


def _tree_shap_brute(tree, x, floats, dim):
    """Exact path-dependent TreeSHAP of one JSON tree for row x (output ``dim``): Shapley
    values of v(S) = E[f | x_S], the expectation following x at splits on features in S
    and the children's training weights elsewhere."""

    def weight(nd):
        return nd["weight"] if "split" not in nd else weight(nd["left"]) + weight(nd["right"])

    def right(nd):
        f = floats[nd["split"]["float_feature_index"]]
        xv = x[f["flat_feature_index"]]
        if np.isnan(xv):
            return f.get("nan_value_treatment") == "AsTrue"
        return bool(np.float32(xv) > np.float32(nd["split"]["border"]))

    def value(nd, S):
        if "split" not in nd:
            return np.atleast_1d(nd["value"])[dim]
        f = floats[nd["split"]["float_feature_index"]]["flat_feature_index"]
        if f in S:
            return value(nd["right"] if right(nd) else nd["left"], S)
        wl, wr = weight(nd["left"]), weight(nd["right"])
        if wl + wr == 0:
            return 0.0
        return (wl * value(nd["left"], S) + wr * value(nd["right"], S)) / (wl + wr)

    def features(nd):
        if "split" not in nd:
            return set()
        f = floats[nd["split"]["float_feature_index"]]["flat_feature_index"]
        return {f} | features(nd["left"]) | features(nd["right"])

    players = sorted(features(tree))
    phi = {}
    for p in players:
        others = [q for q in players if q != p]
        total = 0.0
        for k in range(len(others) + 1):
            for S in itertools.combinations(others, k):
                w = (math.factorial(k) * math.factorial(len(players) - k - 1)
                     / math.factorial(len(players)))
                total += w * (value(tree, set(S) | {p}) - value(tree, set(S)))
        phi[p] = total
    return phi, value(tree, set())


@pytest.mark.parametrize("grow_policy,loss", [("Depthwise", "RMSE"), ("Lossguide", "RMSE"),
                                              ("Depthwise", "MultiClass")])
def test_nonsymmetric_trees_equal_exact_tree_shap(grow_policy, loss, tmp_path):
    X, y = _numeric(seed=5)
    if loss == "MultiClass":
        z = np.nan_to_num(X)
        y = (z[:, 0] > 0).astype(int) + (z[:, 1] > 0.5)
        model = catboost.CatBoostClassifier(loss_function=loss, grow_policy=grow_policy,
                                            iterations=4, depth=4, **COMMON)
    else:
        model = catboost.CatBoostRegressor(grow_policy=grow_policy, iterations=4, depth=4,
                                           **COMMON,
                                           **({"max_leaves": 10}
                                              if grow_policy == "Lossguide" else {}))
    model.fit(X[:200], y[:200])
    rows = np.r_[0:10, 290:300]
    c = treeimp.contributions(model, X[rows])
    doc, floats = _json_trees(model, tmp_path)
    scale, bias = doc["scale_and_bias"]
    K = len(bias)
    values = np.zeros((rows.size, X.shape[1], K))
    base = np.tile(np.asarray(bias, float), (rows.size, 1))
    for i, r in enumerate(rows):
        for tree in doc["trees"]:
            for k in range(K):
                phi, expected = _tree_shap_brute(tree, X[r], floats, k)
                base[i, k] += scale * expected
                for f, v in phi.items():
                    values[i, f, k] += scale * v
    np.testing.assert_allclose(c.values.reshape(values.shape), values, rtol=0, atol=ATOL)
    np.testing.assert_allclose(c.base_values.reshape(base.shape), base, rtol=0, atol=ATOL)
    margin = model.predict(X[rows], prediction_type="RawFormulaVal")
    np.testing.assert_allclose(base + values.sum(1), np.reshape(margin, base.shape),
                               rtol=0, atol=1e-9)


def test_nonsymmetric_ctr_model_names_what_treeshap_lacks():
    """CatBoost tells only the leaf a row reaches in a non-symmetric tree, not its outcome
    at the target-statistic splits off its path, which TreeSHAP reads: a clear
    ValueError; Saabas, which walks only the path, adds up to CatBoost's prediction."""
    df, y = _categorical(seed=6)
    model = catboost.CatBoostRegressor(iterations=5, depth=4, **COMMON,
                                       grow_policy="Depthwise", one_hot_max_size=2,
                                       cat_features=[1, 2, 3])
    model.fit(df.iloc[:300], y[:300])
    with pytest.raises(ValueError, match="every split's outcome"):
        treeimp.contributions(model, df.iloc[:20])
    s = treeimp.contributions(model, df.iloc[:20], method="saabas")
    np.testing.assert_allclose(s.base_values + s.values.sum(1), model.predict(df.iloc[:20]),
                               rtol=0, atol=1e-9)


# ------------------------------------------------------------------ SHAP-oob, live model
def test_shap_oob_of_ctr_model_uses_catboosts_per_tree_shap_values():
    """shap_oob of a regression model is sum_t mean_i (y_i - margin before t) phi_t(x_i);
    phi_t from CatBoost's ShapValues of the model shrunk to tree t."""
    df, y = _categorical(seed=7)
    model = catboost.CatBoostRegressor(iterations=6, depth=3, **COMMON,
                                       one_hot_max_size=2, max_ctr_complexity=1,
                                       cat_features=[1, 2, 3])
    model.fit(df.iloc[:300], y[:300])
    Xe, ye = df.iloc[300:], y[300:]
    res = treeimp.explain(model, Xe, ye, methods=("shap_oob",), random_state=0)
    expected = np.zeros(df.shape[1])
    for t in range(model.tree_count_):
        margin = model.predict(Xe, prediction_type="RawFormulaVal", ntree_end=t) if t else (
            np.full(len(Xe), model.get_scale_and_bias()[1]))
        one = model.copy()
        one.shrink(ntree_start=t, ntree_end=t + 1)
        phi, _ = _catboost_shap(one, Xe, cat_features=[1, 2, 3])
        expected += ((ye - margin)[:, None] * phi).mean(axis=0)
    np.testing.assert_allclose(res.table["shap_oob"].to_numpy(), expected, rtol=1e-8,
                               atol=1e-12)


_AFTER_TREEIMP = textwrap.dedent("""
    import numpy as np, pandas as pd, catboost, treeimp
    rng = np.random.default_rng(0)
    n = 300
    df = pd.DataFrame({"x": rng.normal(size=n), "a": rng.choice(list("abcdefgh"), n),
                       "b": rng.choice(list("pqrstu"), n)})
    y = df.x + df.a.map(dict(zip("abcdefgh", range(8)))) + rng.normal(size=n)
    model = catboost.CatBoostRegressor(iterations=30, depth=4, random_seed=0, verbose=0,
                                       allow_writing_files=False, one_hot_max_size=2,
                                       cat_features=[1, 2])
    model.fit(df, y)
    for _ in range(3):
        treeimp.contributions(model, df)
    model.get_feature_importance(data=catboost.Pool(df, cat_features=[1, 2]),
                                 type="ShapValues")
    print("ok")
""")


def test_catboost_shap_values_run_after_treeimp_used_the_model():
    """treeimp reads a CTR model through save_model and calc_leaf_indexes and writes
    only its own arrays: CatBoost's own ShapValues on the same object afterwards exits
    normally (the contribution kernels once wrote past their output, indexing it by
    routing column, and the process aborted)."""
    import os

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.run([sys.executable, "-c", _AFTER_TREEIMP], capture_output=True,
                          text=True, timeout=600, env=env)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert proc.stdout.strip() == "ok"

"""LightGBM parser: raw margins and leaves equal LightGBM's own on edge-case rows."""

import json
import os
import re
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.edge_rows import threshold_rows
from treeimp.model.ensemble import NAN_AS_ZERO, NAN_MISSING, NAN_ZERO_MISSING
from treeimp.parsers import parse
from treeimp.parsers.lgbm import parse_lightgbm_text

lgb = pytest.importorskip("lightgbm")

KZ = float(np.float32(1e-35))  # LightGBM's kZeroThreshold
N_ROUNDS = 12
CAT_SMALL, CAT_BIG = 4, 5  # categorical columns: 12 and 40 levels (two bitset words)


def _data(objective, missing, n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    X[:, CAT_SMALL] = rng.integers(0, 12, n)
    X[:, CAT_BIG] = rng.integers(0, 40, n)
    if missing == "zero":  # many exact zeros
        X[rng.random(n) < 0.25, 0] = 0.0
        X[rng.random(n) < 0.25, 1] = 0.0
    if missing in ("nan", "none"):
        for j in (0, 2, CAT_SMALL):
            X[rng.random(n) < 0.1, j] = np.nan
    Z = np.nan_to_num(X)
    f = (Z[:, 0] + 0.7 * Z[:, 1] ** 2 - 0.5 * Z[:, 2] * (Z[:, 3] > 0)
         + 0.8 * np.isin(X[:, CAT_SMALL], [1, 4, 7, 9]) + 0.6 * np.isin(X[:, CAT_BIG],
                                                                         [3, 33, 35, 38])
         + 0.5 * (X[:, 0] == 0) + 0.4 * np.isnan(X[:, 0]))
    if objective in ("regression", "regression_l1", "quantile"):
        y = f + rng.normal(scale=0.4, size=n)
    elif objective == "huber":
        y = f + rng.standard_t(2, size=n)
    elif objective == "binary":
        y = (f + rng.logistic(size=n) > 1.0).astype(int)
    elif objective in ("multiclass", "multiclassova"):
        y = np.digitize(f + rng.normal(scale=0.4, size=n), [0.5, 1.5])
    elif objective in ("poisson", "tweedie"):
        y = rng.poisson(np.exp(f / 2))
    elif objective == "gamma":
        y = rng.gamma(2.0, np.exp(f / 2) / 2.0)
    elif objective == "cross_entropy":
        y = 1 / (1 + np.exp(-(f - 1 + rng.normal(scale=0.5, size=n))))
    else:
        y = f
    return X, y


OBJECTIVES = {
    "regression": ({}, "squared_error"),
    "regression_l1": ({}, "absolute_error"),
    "huber": ({"alpha": 1.3}, "huber"),
    "quantile": ({"alpha": 0.3}, "quantile"),
    "binary": ({"sigmoid": 0.7, "scale_pos_weight": 2.0}, "logistic"),
    "multiclass": ({"num_class": 3}, "softmax"),
    "multiclassova": ({"num_class": 3, "sigmoid": 1.5}, "ova_logistic"),
    "poisson": ({"poisson_max_delta_step": 0.4}, "poisson"),
    "gamma": ({}, "gamma"),
    "tweedie": ({"tweedie_variance_power": 1.3}, "tweedie"),
    "cross_entropy": ({}, "cross_entropy"),
}
MISSING = {"nan": {}, "none": {"use_missing": False}, "zero": {"zero_as_missing": True}}


def _train(objective, missing, *, seed=0, rounds=N_ROUNDS, **extra):
    X, y = _data(objective, missing, seed=seed)
    params = dict(objective=objective, num_leaves=11, min_data_in_leaf=4,
                  min_data_per_group=4, cat_smooth=1.0, max_cat_to_onehot=3,
                  learning_rate=0.2, verbose=-1, seed=seed, deterministic=True,
                  num_threads=1, **OBJECTIVES.get(objective, ({}, ""))[0], **MISSING[missing])
    params.update(extra)
    ds = lgb.Dataset(X, y, categorical_feature=[CAT_SMALL, CAT_BIG], free_raw_data=False)
    return lgb.train(params, ds, num_boost_round=rounds), X, y


def _fit(rounds, X, y, dataset=None, **params):
    params = {"verbose": -1, "num_threads": 1, **params}
    return lgb.train(params, lgb.Dataset(X, y, **(dataset or {})), num_boost_round=rounds)


def _edge_rows(ens, X, seed=0, n_rows=300):
    """threshold_rows plus unseen / negative / huge category codes and near-zero values."""
    rng = np.random.default_rng(seed)
    R = threshold_rows(ens, X, rng=rng, n_rows=n_rows)
    n = len(R)
    cat_values = np.array([-1.0, -7.0, 12.0, 40.0, 63.0, 1e6, 2.0**31, np.nan, 0.0, 2.7])
    for j in (CAT_SMALL, CAT_BIG):
        pick = rng.random(n) < 0.3
        R[pick, j] = rng.choice(cat_values, size=pick.sum())
    tiny = np.array([1e-36, -1e-36, KZ, -KZ, np.nextafter(KZ, 1), np.nextafter(-KZ, -1), -0.0])
    for j in (0, 1, 2):
        pick = rng.random(n) < 0.15
        R[pick, j] = rng.choice(tiny, size=pick.sum())
    return R


def _raw(booster, X):
    return booster.predict(X, raw_score=True).reshape(len(X), -1)


def _assert_margin(ens, booster, X):
    ours, theirs = ens.predict_raw(X), _raw(booster, X)
    np.testing.assert_allclose(ours, theirs, rtol=1e-9, atol=1e-9 * np.abs(theirs).max())


def _leaf_numbers(ens):
    """Our local leaf node index -> LightGBM's leaf number k: leaves of each tree in
    node order are LightGBM's leaves 0, 1, ... in the order its leaf arrays list them."""
    seen = np.cumsum(ens.is_leaf)  # leaves up to and including each node
    before = np.concatenate([[0], seen])[ens.tree_offsets[:-1]]  # leaves of earlier trees
    return seen - 1 - np.repeat(before, np.diff(ens.tree_offsets))  # global node -> k


def _assert_leaves(ens, booster, X):
    nodes = ens.apply(X) + ens.tree_offsets[:-1][None, :]
    ours = _leaf_numbers(ens)[nodes]
    theirs = booster.predict(X, pred_leaf=True).reshape(len(X), -1)
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("missing", list(MISSING))
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_margin_and_leaves_equal_lightgbm(objective, missing):
    booster, X, _ = _train(objective, missing)
    ens = parse(booster)
    assert ens.objective.name == OBJECTIVES[objective][1]
    assert ens.n_outputs == booster.num_model_per_iteration()
    R = _edge_rows(ens, X)
    _assert_margin(ens, booster, R)
    _assert_leaves(ens, booster, R)
    # LightGBM missing type of numeric splits on the features that had NaN / zeros
    split = (ens.left >= 0) & ~ens.is_categorical & np.isin(ens.feature, [0, 2])
    expected = {"nan": NAN_MISSING, "none": NAN_AS_ZERO, "zero": NAN_ZERO_MISSING}[missing]
    assert split.any() and set(np.unique(ens.nan_mode[split])) == {expected}
    assert ens.is_categorical.any()


def test_objective_parameters():
    expected = {
        "huber": {"delta": 1.3},
        "quantile": {"alpha": 0.3},
        "binary": {"sigmoid": 0.7, "pos_weight": 2.0},
        "multiclass": {"n_classes": 3, "hess_factor": 1.5},
        "multiclassova": {"sigmoid": 1.5, "n_classes": 3},
        "poisson": {"max_delta_step": 0.4},
        "tweedie": {"variance_power": 1.3},
    }
    links = {"binary": "sigmoid", "multiclass": "softmax", "poisson": "exp", "gamma": "exp",
             "cross_entropy": "sigmoid", "regression": "identity"}
    for objective in OBJECTIVES:
        booster, _, _ = _train(objective, "nan", rounds=2)
        obj = parse(booster).objective
        assert obj.params == expected.get(objective, {}), objective
        if objective in links:
            assert obj.link == links[objective]


def test_poisson_default_max_delta_step():
    X, y = _data("poisson", "nan")
    b = _fit(2, X, y, objective="poisson", num_leaves=5)
    assert parse(b).objective.params == {"max_delta_step": 0.7}


@pytest.mark.parametrize("K", [3, 4])
def test_multiclass_hessian_factor_from_lightgbm_hessian_sums(K):
    """LightGBM records the hessian sum of every node (internal_weight). At the first
    iteration every row has the init margin log(p_k), so the root of class k's tree
    holds n * f * p_k (1 - p_k): this measures LightGBM's softmax hessian factor f."""
    rng = np.random.default_rng(K)
    n = 600
    X = rng.normal(size=(n, 3))
    y = rng.integers(0, K, n)
    b = _fit(1, X, y, objective="multiclass", num_class=K, num_leaves=4)
    ens = parse(b)
    p = np.bincount(y, minlength=K) / n
    root_weight = ens.weight[ens.tree_offsets[:K]]
    f = root_weight / (n * p * (1 - p))
    np.testing.assert_allclose(f, ens.objective.params["hess_factor"], rtol=1e-5)


def test_binary_sigmoid_from_lightgbm_hessian_sums():
    """Binary hessian at the init margin is s^2 p (1 - p) per row (s = sigmoid)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(500, 3))
    y = (rng.random(500) < 0.3).astype(int)
    b = _fit(1, X, y, objective="binary", sigmoid=0.7, num_leaves=4)
    ens = parse(b)
    s, p = ens.objective.params["sigmoid"], y.mean()
    np.testing.assert_allclose(ens.weight[0], 500 * s**2 * p * (1 - p), rtol=1e-5)
    # and the init score is the margin whose probability is the label mean
    np.testing.assert_allclose(1 / (1 + np.exp(-s * ens.base_score[0])), p, rtol=1e-6)


@pytest.mark.parametrize("objective", ["regression", "binary", "multiclass", "poisson",
                                       "gamma", "tweedie", "cross_entropy", "quantile",
                                       "regression_l1"])
def test_init_score_moved_out_of_first_trees(objective):
    """Oracle for LightGBM's starting score: the same training with learning_rate
    1e-300, whose first trees are the init score plus nothing."""
    extra = {"scale_pos_weight": 1.0} if objective == "binary" else {}
    booster, X, y = _train(objective, "nan", rounds=3, **extra)
    ens = parse(booster)
    oracle = _fit(1, X, y, objective=objective, learning_rate=1e-300, num_leaves=4,
                  **{**OBJECTIVES[objective][0], **extra})
    init = _raw(oracle, X[:1])[0]
    # near-exact: the text prints the root value with 6 significant digits
    np.testing.assert_allclose(ens.base_score, init, rtol=5e-6)
    np.testing.assert_allclose(ens.tree_learning_rate, 0.2)
    # the first trees are now on the scale of the others
    k = ens.n_outputs
    first = np.abs(ens.value[ens.tree_offsets[0]:ens.tree_offsets[k]]).max()
    later = np.abs(ens.value[ens.tree_offsets[k]:ens.tree_offsets[2 * k]]).max()
    assert first < 3 * later + 1e-12


def test_no_boost_from_average_keeps_zero_base():
    booster, X, _ = _train("binary", "nan", rounds=4, boost_from_average=False)
    ens = parse(booster)
    assert np.all(ens.base_score == 0.0)
    np.testing.assert_allclose(ens.tree_learning_rate, 0.2)
    _assert_margin(ens, booster, _edge_rows(ens, X))


def test_learning_rate_one_dart_and_goss():
    for extra in ({"learning_rate": 1.0}, {"boosting": "dart", "drop_rate": 0.5,
                                           "skip_drop": 0.0},
                  {"data_sample_strategy": "goss"}):
        booster, X, y = _train("regression", "nan", rounds=8, **extra)
        ens = parse(booster)
        R = _edge_rows(ens, X)
        _assert_margin(ens, booster, R)
        _assert_leaves(ens, booster, R)
        # init score (mean of the float32 labels) out of tree 0, also when DART rescaled
        # tree 0 (by c = its shrinkage) after adding it
        c = booster.dump_model()["tree_info"][0]["shrinkage"]
        lr = extra.get("learning_rate", 0.2)
        np.testing.assert_allclose(ens.base_score, c * y.astype(np.float32).mean(),
                                   rtol=5e-6)
        np.testing.assert_allclose(ens.tree_learning_rate[0], c * lr, rtol=1e-5)


def test_gain_sums_to_lightgbm_gain_importance():
    for objective in ("regression", "multiclass"):
        booster, _, _ = _train(objective, "nan")
        ens = parse(booster)
        assert ens.gain_kind == "gain"
        assert np.all(np.isnan(ens.gain[ens.is_leaf]))
        ours = np.bincount(ens.feature[~ens.is_leaf], weights=ens.gain[~ens.is_leaf],
                           minlength=ens.n_features)
        # the text prints split_gain with 6 significant digits
        np.testing.assert_allclose(ours, booster.feature_importance("gain"), rtol=1e-5)


def test_weights_are_hessian_sums():
    booster, _, _ = _train("binary", "nan", rounds=3)
    ens = parse(booster)
    tree = booster.dump_model()["tree_info"][1]["tree_structure"]
    want = tree["internal_weight"]
    if want == 0:  # LightGBM < 4.6 saves the root's weight as 0: the sum of its children's
        want = sum(child.get("internal_weight", child.get("leaf_weight"))
                   for child in (tree["left_child"], tree["right_child"]))
    assert want > 0
    assert ens.weight[ens.tree_offsets[1]] == pytest.approx(want, rel=1e-5)


def test_stump_model():
    rng = np.random.default_rng(0)
    X = np.ones((50, 3))
    y = rng.normal(size=50)
    b = _fit(3, X, y, objective="regression")
    ens = parse(b)
    assert ens.n_nodes == ens.n_trees == 1
    R = np.r_[X[:3], [[np.nan, 0, 1e30]]]
    _assert_margin(ens, b, R)
    _assert_leaves(ens, b, R)
    np.testing.assert_allclose(ens.base_score, y.mean(), rtol=1e-6)  # float32 labels


def test_sklearn_wrappers_classes_and_names():
    X, y = _data("multiclass", "nan")
    labels = np.array(["lo", "mid", "hi"])[y]
    clf = lgb.LGBMClassifier(n_estimators=5, num_leaves=7, verbose=-1, n_jobs=1).fit(X, labels)
    ens = parse(clf)
    assert list(ens.classes) == list(clf.classes_)
    assert ens.feature_names is None  # LightGBM's Column_0 ... defaults
    _assert_margin(ens, clf.booster_, X)
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    reg = lgb.LGBMRegressor(n_estimators=5, num_leaves=7, verbose=-1, n_jobs=1).fit(df, y)
    ens = parse(reg)
    assert ens.feature_names == list(df.columns)
    assert ens.classes is None
    np.testing.assert_allclose(ens.predict_raw(df)[:, 0], reg.predict(df, raw_score=True),
                               rtol=1e-12)


def test_pandas_categorical_labels():
    """Category labels map through pandas_categorical, also for an ordered categorical
    (a numeric feature of codes) and an evaluation frame with other / unseen levels."""
    rng = np.random.default_rng(3)
    n = 600
    colors = np.array(["red", "green", "blue", "grey", "teal"])
    sizes = ["S", "M", "L", "XL"]
    df = pd.DataFrame({
        "x": rng.normal(size=n),
        "color": pd.Categorical(rng.choice(colors, n)),
        "size": pd.Categorical(rng.choice(sizes, n), categories=sizes, ordered=True),
        "k": rng.integers(0, 3, n).astype(float),
        "shape": pd.Categorical(rng.choice(["o", "x", "+"], n)),
    })
    y = (df.x + (df.color == "teal") * 2 + df["size"].cat.codes * 0.7
         + (df["shape"] == "x") + rng.normal(scale=0.3, size=n))
    m = lgb.LGBMRegressor(n_estimators=15, num_leaves=7, min_child_samples=5,
                          min_data_per_group=5, cat_smooth=1, verbose=-1, n_jobs=1).fit(df, y)
    ens = parse(m)
    assert ens.feature_categories[1] == sorted(colors.tolist())
    assert ens.feature_categories[2] == sizes
    assert ens.feature_categories[4] == ["+", "o", "x"]
    assert ens.feature_categories[0] is None
    # 'k' (integer codes 0..2, numeric in every frame) could also be the ordered column:
    # it gets the same labels, which a numeric column never reads
    assert ens.feature_categories[3] in (None, sizes)
    ev = df.iloc[:200].copy()
    ev["color"] = pd.Categorical(ev["color"].astype(str).where(np.arange(200) % 7 > 0,
                                                               "purple"))
    ev["shape"] = ev["shape"].cat.reorder_categories(["x", "o", "+"])
    ev.loc[ev.index[:10], "x"] = np.nan
    ours = ens.predict_raw(ev)[:, 0]
    np.testing.assert_allclose(ours, m.predict(ev, raw_score=True), rtol=1e-12)


_LOADER = """
import json, pickle, sys
sys.modules["lightgbm"] = None  # any import of lightgbm or xgboost now fails
sys.modules["xgboost"] = None
import numpy as np
import treeimp
for model, rows, out in json.loads(sys.argv[1]):
    with open(rows, "rb") as fh:
        X = pickle.load(fh)
    ens = treeimp.load(model)
    np.savez(out, margin=ens.predict_raw(X), apply=ens.apply(X),
             offsets=ens.tree_offsets, is_leaf=ens.is_leaf)
for lib in ("lightgbm", "xgboost"):
    assert sys.modules[lib] is None, lib
"""


def _saved_categorical_model():
    """A model trained on a DataFrame with two pandas category columns, and an
    evaluation frame with unseen labels, another category order and missing values."""
    rng = np.random.default_rng(4)
    n = 500
    colors = ["red", "green", "blue", "grey", "teal"]
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "color": pd.Categorical(rng.choice(colors, n)),
                       "k": rng.normal(size=n),
                       "shape": pd.Categorical(rng.choice(["o", "x", "+"], n))})
    y = df.x + 2 * (df.color == "teal") - (df.color == "red") + 1.5 * (df["shape"] == "x")
    booster = _fit(8, df, y + rng.normal(scale=0.3, size=n), objective="regression",
                   num_leaves=7, min_data_per_group=5, cat_smooth=1, max_cat_to_onehot=2)
    ev = df.iloc[:200].copy()
    ev["color"] = pd.Categorical(ev["color"].astype(str).where(np.arange(200) % 7 > 0,
                                                               "purple"))
    ev["shape"] = ev["shape"].cat.reorder_categories(["x", "o", "+"])
    ev.loc[ev.index[::9], "shape"] = np.nan
    ev.loc[ev.index[:10], "x"] = np.nan
    return booster, ev


def test_saved_file_loads_without_lightgbm_or_xgboost(tmp_path):
    """treeimp.load on saved .txt files in a process where importing lightgbm and xgboost
    fails: margins equal raw_score=True and leaves equal pred_leaf=True."""
    import pickle

    cases = [("regression", "nan"), ("multiclass", "zero"), ("binary", "none"),
             ("tweedie", "nan"), ("multiclassova", "nan"), ("cross_entropy", "zero")]
    models = []
    for objective, missing in cases:
        booster, X, _ = _train(objective, missing, rounds=6)
        models.append((booster, _edge_rows(parse(booster), X, n_rows=150)))
    models.append(_saved_categorical_model())
    jobs = []
    for i, (booster, R) in enumerate(models):
        path, rows, out = (str(tmp_path / f"m{i}.txt"), str(tmp_path / f"X{i}.pkl"),
                           str(tmp_path / f"out{i}.npz"))
        booster.save_model(path)
        with open(rows, "wb") as fh:
            pickle.dump(R, fh)
        jobs.append((path, rows, out))
    proc = subprocess.run([sys.executable, "-c", _LOADER, json.dumps(jobs)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": ""})
    assert proc.returncode == 0, proc.stderr[-2000:]
    for (booster, R), (_, _, out) in zip(models, jobs, strict=True):
        got = np.load(out)
        expected = _raw(booster, R)
        np.testing.assert_allclose(got["margin"], expected, rtol=1e-9,
                                   atol=1e-9 * np.abs(expected).max())
        seen = np.cumsum(got["is_leaf"])  # LightGBM leaf k is the k-th leaf node of a tree
        before = np.concatenate([[0], seen])[got["offsets"][:-1]]
        leaf_k = seen - 1 - np.repeat(before, np.diff(got["offsets"]))
        ours = leaf_k[got["apply"] + got["offsets"][:-1][None, :]]
        np.testing.assert_array_equal(ours, booster.predict(R, pred_leaf=True).reshape(
            len(R), -1))


def test_text_and_object_give_same_ensemble(tmp_path):
    booster, X, _ = _train("multiclassova", "nan", rounds=4)
    path = tmp_path / "m.txt"
    booster.save_model(str(path))
    a, b = parse(booster), parse_lightgbm_text(path.read_text())
    for field in ("left", "right", "feature", "threshold", "value", "weight", "gain",
                  "base_score", "category_codes", "tree_learning_rate"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))


# ------------------------------------------------------------------ hypothesis rows
_HYP_MODELS = {}


def _hyp_model(kind):
    if kind not in _HYP_MODELS:
        objective, missing = kind
        booster, X, _ = _train(objective, missing, rounds=8)
        ens = parse(booster)
        split = (ens.left >= 0) & ~ens.is_categorical
        _HYP_MODELS[kind] = booster, ens, np.unique(ens.threshold[split])
    return _HYP_MODELS[kind]


def _float32_step(t_step):
    t, step = t_step
    t32 = np.float32(t)
    return float(t32 if step == 0 else np.nextafter(t32, np.float32(step * np.inf)))


_SPECIAL = [0.0, -0.0, np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-36, -1e-36, KZ, -KZ,
            2.0**31, 1e300, -0.5, -0.999, -1.0, np.nextafter(-1.0, 0.0)]  # (-1, 0): code 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from([("regression", "nan"), ("multiclass", "zero"),
                             ("binary", "none")]),
       data=st.data())
def test_hypothesis_rows(kind, data):
    booster, ens, thresholds = _hyp_model(kind)
    cell = st.one_of(
        st.floats(allow_nan=True, allow_infinity=True, width=64),
        st.sampled_from(_SPECIAL),
        st.tuples(st.sampled_from(thresholds.tolist()), st.sampled_from([-1, 0, 1])).map(
            _float32_step),
        st.sampled_from(thresholds.tolist()),
        st.integers(-3, 45).map(float),
    )
    rows = data.draw(st.lists(st.lists(cell, min_size=6, max_size=6), min_size=1,
                              max_size=8))
    X = np.array(rows, dtype=np.float64)
    _assert_margin(ens, booster, X)
    _assert_leaves(ens, booster, X)


def test_categorical_value_between_minus_one_and_zero_is_code_zero():
    rng = np.random.default_rng(0)
    X = np.c_[rng.integers(0, 4, 400).astype(float), rng.normal(size=400)]
    y = (X[:, 0] == 0) * 3.0 + rng.normal(scale=0.1, size=400)
    b = _fit(3, X, y, objective="regression", min_data_per_group=5, cat_smooth=1,
             num_leaves=4, dataset=dict(categorical_feature=[0]))
    R = np.array([[-0.5, 0.0], [-1e-36, 0.0], [-0.999, 0.0]])
    _assert_margin(parse(b), b, R)


# ------------------------------------------------------------------ bad input
@pytest.fixture(scope="module")
def model_text():
    X, _ = _data("multiclass", "nan", n=300)
    y = np.digitize(2 * np.isin(X[:, CAT_SMALL], [1, 4, 7, 9]) + np.nan_to_num(X[:, 0]),
                    [0.5, 1.5])
    df = pd.DataFrame(X, columns=list("abcdef"))
    df["e"] = pd.Categorical(X[:, CAT_SMALL])
    b = _fit(2, df, y, objective="multiclass", num_class=3, num_leaves=5,
             min_data_per_group=5, cat_smooth=1)
    return b.model_to_string()


def test_model_text_fixture_parses(model_text):
    ens = parse_lightgbm_text(model_text)
    assert ens.n_trees == 6 and ens.is_categorical.any()
    assert ens.feature_categories[CAT_SMALL] is not None


@settings(max_examples=80, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(frac=st.floats(0.0, 1.0, exclude_max=True))
def test_truncated_text_raises(model_text, frac):
    end = model_text.index("end of trees") + len("end of trees")
    cut = int(frac * end)
    with pytest.raises(ValueError):
        parse_lightgbm_text(model_text[:cut])


@settings(max_examples=150, deadline=None, suppress_health_check=[
    HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(flips=st.lists(st.tuples(st.floats(0.0, 1.0, exclude_max=True),
                                st.integers(0, 255)), min_size=1, max_size=4),
       cut=st.none() | st.floats(0.0, 1.0))
def test_corrupted_text_raises_value_error_or_parses(model_text, flips, cut):
    data = bytearray(model_text.encode())
    for pos, byte in flips:
        data[int(pos * len(data))] = byte
    text = data.decode("latin-1")
    if cut is not None:
        text = text[:int(cut * len(text))]
    t0 = time.perf_counter()
    try:
        parse_lightgbm_text(text)
    except ValueError:
        pass
    assert time.perf_counter() - t0 < 5.0


@pytest.mark.parametrize("key", ["leaf_weight", "threshold", "num_leaves", "shrinkage",
                                 "cat_threshold"])
def test_missing_tree_key_is_named(model_text, key):
    blocks = model_text.split("Tree=")
    k = next(i for i, b in enumerate(blocks[1:], 1) if "cat_threshold=" in b)
    blocks[k] = re.sub(rf"(?m)^{key}=.*\n", "", blocks[k])
    with pytest.raises(ValueError, match=rf"tree {k - 1}.*{key}"):
        parse_lightgbm_text("Tree=".join(blocks))


def test_inconsistent_lengths_and_header(model_text):
    bad = re.sub(r"(?m)^(threshold=\S+) \S+", r"\1", model_text, count=1)
    with pytest.raises(ValueError, match="tree 0: threshold has"):
        parse_lightgbm_text(bad)
    bad = re.sub(r"(?m)^max_feature_idx=.*\n", "", model_text)
    with pytest.raises(ValueError, match="max_feature_idx"):
        parse_lightgbm_text(bad)
    bad = re.sub(r"(?m)^left_child=(-?\d+)", "left_child=99", model_text, count=1)
    with pytest.raises(ValueError, match="left_child"):
        parse_lightgbm_text(bad)
    with pytest.raises(ValueError, match="first line"):
        parse_lightgbm_text('{"learner": {}}')


def test_unsupported_models_raise():
    X, y = _data("regression", "nan", n=200)
    # linear trees, rankers, mape, fair and cross_entropy_lambda are read (their own tests)

    def custom(preds, data):
        return preds - data.get_label(), np.ones_like(preds)

    b = _fit(2, X, y, objective=custom, num_leaves=4)
    with pytest.raises(ValueError, match="custom"):
        parse(b)
    unbalanced = _fit(2, X, (y > 1).astype(int), objective="binary", is_unbalance=True,
                      num_leaves=4)
    with pytest.raises(ValueError, match="is_unbalance"):
        parse(unbalanced)
    sq = _fit(2, X, np.abs(y), objective="regression", reg_sqrt=True, num_leaves=4)
    with pytest.raises(ValueError, match="sqrt"):
        parse(sq)


def test_unfitted_sklearn_model():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted"):
        parse(lgb.LGBMClassifier())


def test_live_model_text_is_model_to_string(monkeypatch):
    """A live model's text is serialised once (LightGBM's SaveModelToString into a
    large buffer, else save_model into a temporary file): it must be the text
    model_to_string gives (pandas categories and best_iteration included), also when
    the first buffer is too short, when no buffer can be allocated, and where no
    temporary file can be written."""
    from treeimp.parsers import lgbm

    rng = np.random.default_rng(3)
    X = pd.DataFrame({"a": rng.normal(size=400),
                      "c": pd.Categorical(rng.choice(["x", "y", "z"], size=400))})
    y = X["a"].to_numpy() + (X["c"] == "y").to_numpy() + rng.normal(size=400)
    booster = lgb.LGBMRegressor(n_estimators=20, num_leaves=7, verbose=-1,
                                n_jobs=1).fit(X, y).booster_
    booster.best_iteration = 5  # as early stopping sets it: the text keeps all 20
    want = booster.model_to_string(num_iteration=-1).encode("utf-8")
    assert b"pandas_categorical:[[" in want
    assert lgbm._model_bytes(booster) == want

    monkeypatch.setattr(lgbm, "_TEXT_BUFFER", 100)  # serialised a second time
    monkeypatch.setattr(lgbm, "_TEXT_PER_TREE", 5)
    assert len(want) > 200
    assert lgbm._model_bytes(booster) == want

    monkeypatch.setattr(lgbm, "_TEXT_PER_TREE", 1 << 56)  # no buffer: save_model's file
    with pytest.raises(MemoryError):
        np.empty(booster.num_trees() << 56, dtype=np.uint8)
    assert lgbm._model_bytes(booster) == want

    def no_temporary_folder(*args, **kwargs):
        raise OSError("read-only file system")

    monkeypatch.setattr(lgbm.tempfile, "TemporaryDirectory", no_temporary_folder)
    assert lgbm._model_bytes(booster) == want


def test_live_model_text_of_an_unknown_major_release(monkeypatch):
    """LightGBM's C serialisation is called directly only for the 3.x / 4.x releases
    whose signature is known; another major release goes through save_model (the same
    text), never a ctypes call with the wrong arguments."""
    from treeimp.parsers import lgbm

    rng = np.random.default_rng(4)
    X = rng.normal(size=(300, 3))
    booster = lgb.LGBMRegressor(n_estimators=5, num_leaves=5, verbose=-1,
                                n_jobs=1).fit(X, X[:, 0]).booster_
    want = booster.model_to_string(num_iteration=-1).encode("utf-8")
    calls = []
    monkeypatch.setattr(lgb, "__version__", "5.0.0")
    monkeypatch.setattr(lgbm, "_saved_text", lambda b: calls.append(b) or want)
    assert lgbm._model_bytes(booster) == want
    assert calls == [booster]

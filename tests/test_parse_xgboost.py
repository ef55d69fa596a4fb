"""XGBoost parser: raw margins and leaves equal XGBoost's own on edge-case rows.

Every check compares with xgboost itself (``predict(output_margin=True)``,
``pred_leaf=True``, ``get_score``, ``save_config``), never with stored outputs of
treeimp. XGBoost sums in float32, hence rtol 1e-5 and an atol scaled by the margin.
XGBoost refuses +-inf in a DMatrix, so edge rows carry +-3e38 instead.
"""

import json
import re
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeimp
from tests.edge_rows import threshold_rows
from treeimp.parsers.xgb import SUPPORTED_OBJECTIVES, parse_xgboost_json

xgb = pytest.importorskip("xgboost")

N_ROUNDS = 12

# objective -> (extra params, expected canonical objective)
OBJECTIVES = {
    "reg:squarederror": ({}, ("squared_error", {})),
    # XGBoost >= 3.4 fits absolute error with a smoothed surrogate (test_xgb_levels.py)
    "reg:absoluteerror": ({}, ("smoothed_absolute_error" if tuple(
        int(v) for v in xgb.__version__.split(".")[:2]) >= (3, 4) else "absolute_error", {})),
    # eval_metric: xgboost 2.0.0's default metric for it fails during training ("Object of
    # type Null can not be indexed by string"); the metric does not change the model
    "reg:pseudohubererror": ({"huber_slope": 0.5, "min_child_weight": 0, "eval_metric": "mphe"},
                             ("pseudo_huber", {"slope": 0.5})),
    "reg:logistic": ({}, ("logistic", {"sigmoid": 1.0, "pos_weight": 1.0})),
    "binary:logistic": ({"scale_pos_weight": 2.0},
                        ("logistic", {"sigmoid": 1.0, "pos_weight": 2.0})),
    "binary:logitraw": ({}, ("logistic", {"sigmoid": 1.0, "pos_weight": 1.0})),
    "multi:softprob": ({"num_class": 3}, ("softmax", {"n_classes": 3, "hess_factor": 2.0})),
    "multi:softmax": ({"num_class": 3}, ("softmax", {"n_classes": 3, "hess_factor": 2.0})),
    "count:poisson": ({"max_delta_step": 0.5}, ("poisson", {"max_delta_step": 0.5})),
    "reg:gamma": ({}, ("gamma", {})),
    "reg:tweedie": ({"tweedie_variance_power": 1.3}, ("tweedie", {"variance_power": 1.3})),
}


def _data(objective, n=400, p=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random((n, p)) < 0.06] = np.nan
    X[rng.random(n) < 0.1, 1] = 0.0
    Z = np.nan_to_num(X)
    f = Z[:, 0] + 0.6 * Z[:, 1] ** 2 - 0.5 * Z[:, 2] * (Z[:, 3] > 0) + 0.4 * np.isnan(X[:, 0])
    if objective in ("binary:logistic", "binary:logitraw"):
        y = (f + rng.logistic(size=n) > 0.5).astype(float)
    elif objective == "reg:logistic":
        y = 1.0 / (1.0 + np.exp(-f + rng.normal(scale=0.5, size=n)))
    elif objective.startswith("multi:"):
        y = np.digitize(f + rng.normal(scale=0.5, size=n), [0.0, 1.0])
    elif objective in ("count:poisson", "reg:tweedie"):
        y = rng.poisson(np.exp(f / 2)).astype(float)
    elif objective == "reg:gamma":
        y = rng.gamma(2.0, np.exp(f / 2) / 2.0)
    elif objective == "reg:pseudohubererror":
        y = 0.3 * f + rng.normal(scale=0.2, size=n)
    else:
        y = f + rng.normal(scale=0.5, size=n)
    return X, y


def _train(objective, *, rounds=N_ROUNDS, seed=0, **params):
    X, y = _data(objective, seed=seed)
    extra, _ = OBJECTIVES.get(objective, ({}, None))
    p = {"objective": objective, "max_depth": 3, "eta": 0.3, "seed": seed, **extra, **params}
    return xgb.train(p, xgb.DMatrix(X, y, missing=np.nan), rounds), X


def _margin(booster, X, **kw):
    out = booster.predict(xgb.DMatrix(X, missing=np.nan, **kw), output_margin=True)
    return np.asarray(out, dtype=np.float64).reshape(len(X), -1)


def _leaves(booster, X, **kw):
    out = booster.predict(xgb.DMatrix(X, missing=np.nan, **kw), pred_leaf=True)
    return np.asarray(out).reshape(len(X), -1).astype(np.int64)


def _assert_margin(got, want):
    atol = 1e-5 * max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)


def _edge_rows(ens, X, seed=0):
    rows = threshold_rows(ens, X, rng=np.random.default_rng(seed), n_rows=300)
    rows[np.isposinf(rows)] = 3e38  # XGBoost rejects inf in a DMatrix
    rows[np.isneginf(rows)] = -3e38
    return np.vstack([X, rows])


def _doc(booster):
    return json.loads(bytes(booster.save_raw("json")))


def _stores_labels(booster):
    """Whether XGBoost stored the training category labels in the model (``cats``,
    xgboost >= 3.1); 2.x predicts a pandas category column by its own codes."""
    cats = _doc(booster)["learner"]["gradient_booster"]["model"].get("cats") or {}
    return len(cats.get("enc", [])) > 0


def _config_eta(booster):
    cfg = json.loads(booster.save_config())["learner"]["gradient_booster"]
    if cfg["name"] == "dart":
        cfg = cfg["gbtree"]
    return float(cfg["tree_train_param"]["eta"])


# ----------------------------------------------------------------------- objectives
@pytest.mark.parametrize("objective", sorted(OBJECTIVES))
def test_objective_margin_leaves_and_params(objective):
    booster, X = _train(objective)
    ens = treeimp.parse(booster)
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))
    np.testing.assert_array_equal(ens.apply(rows), _leaves(booster, rows))
    name, params = OBJECTIVES[objective][1]
    assert ens.objective.name == name
    assert ens.objective.source == objective
    assert ens.objective.params.keys() == params.keys()
    for k, v in params.items():
        assert ens.objective.params[k] == pytest.approx(v, rel=1e-6)
    assert ens.library == "xgboost" and ens.kind == "boosting" and ens.gain_kind == "gain"
    assert ens.comparison == "<" and ens.round_float32
    n_out = 3 if objective.startswith("multi:") else 1
    assert ens.n_outputs == n_out and ens.n_trees == N_ROUNDS * n_out
    np.testing.assert_array_equal(ens.tree_stage, np.repeat(np.arange(N_ROUNDS), n_out))
    np.testing.assert_allclose(ens.tree_learning_rate, _config_eta(booster))


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic",
                                       "multi:softprob", "count:poisson", "reg:gamma",
                                       "reg:tweedie", "reg:logistic"])
def test_base_score_is_the_margin_of_a_one_tree_model(objective):
    """With one tree, margin - leaf value is the base margin XGBoost starts from."""
    booster, X = _train(objective, rounds=1)
    ens = treeimp.parse(booster)
    leaves = _leaves(booster, X)
    values = ens.value[ens.tree_offsets[:-1][None, :] + leaves, 0]
    base = _margin(booster, X) - values  # one tree per output
    np.testing.assert_allclose(np.broadcast_to(ens.base_score, base.shape), base,
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("objective,base_score", [("binary:logistic", 0.8),
                                                  ("reg:squarederror", 5.0),
                                                  ("count:poisson", 2.5),
                                                  ("reg:tweedie", 0.4)])
def test_explicit_base_score(objective, base_score):
    booster, X = _train(objective, base_score=base_score)
    ens = treeimp.parse(booster)
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))


def test_base_score_string_forms():
    """3.x stores '[4.05E-1]' (one value per output), 2.x a plain '4.05E-1'."""
    booster, _ = _train("binary:logistic", rounds=2)
    doc = _doc(booster)
    stored = doc["learner"]["learner_model_param"]["base_score"]
    bracketed = stored.startswith("[")
    assert bracketed == stored.endswith("]")
    value = stored[1:-1] if bracketed else stored
    other = json.loads(json.dumps(doc))  # the other version's form of the same value
    other["learner"]["learner_model_param"]["base_score"] = value if bracketed else f"[{value}]"
    np.testing.assert_array_equal(parse_xgboost_json(other).base_score,
                                  parse_xgboost_json(doc).base_score)
    p = float(value)
    assert parse_xgboost_json(doc).base_score[0] == pytest.approx(np.log(p / (1 - p)),
                                                                  rel=1e-6)


# ----------------------------------------------------------------------- wrappers
def test_sklearn_wrappers():
    X, y = _data("binary:logistic")
    clf = xgb.XGBClassifier(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    ens = treeimp.parse(clf)
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(clf.get_booster(), rows))
    np.testing.assert_array_equal(ens.classes, clf.classes_)

    X3, y3 = _data("multi:softprob")
    clf3 = xgb.XGBClassifier(n_estimators=8, max_depth=3, random_state=0).fit(X3, y3)
    ens3 = treeimp.parse(clf3)
    assert ens3.objective.name == "softmax" and ens3.n_outputs == 3
    rows = _edge_rows(ens3, X3)
    _assert_margin(ens3.predict_raw(rows), _margin(clf3.get_booster(), rows))
    np.testing.assert_array_equal(ens3.apply(rows), _leaves(clf3.get_booster(), rows))

    Xr, yr = _data("reg:squarederror")
    reg = xgb.XGBRegressor(n_estimators=10, max_depth=4, learning_rate=0.1,
                           random_state=0).fit(pd.DataFrame(Xr, columns=list("abcde")), yr)
    ens_r = treeimp.parse(reg)
    assert ens_r.feature_names == list("abcde") and ens_r.classes is None
    np.testing.assert_allclose(ens_r.tree_learning_rate, 0.1, rtol=1e-6)
    rows = _edge_rows(ens_r, Xr)
    _assert_margin(ens_r.predict_raw(rows),
                   _margin(reg.get_booster(), rows, feature_names=list("abcde")))
    # numpy input: XGBoost's auto names are not kept
    assert treeimp.parse(clf).feature_names is None


def test_unfitted_wrapper_is_a_clear_error():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError, match="not fitted"):
        treeimp.parse(xgb.XGBClassifier())
    with pytest.raises(ValueError, match="not fitted"):  # NotFittedError is a ValueError
        treeimp.parse(xgb.XGBRegressor())


# ----------------------------------------------------------------------- structure
@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob"])
def test_num_parallel_tree(objective):
    booster, X = _train(objective, rounds=4, num_parallel_tree=3, subsample=0.7,
                        colsample_bynode=0.8)
    ens = treeimp.parse(booster)
    n_out = ens.n_outputs
    assert ens.n_trees == 4 * 3 * n_out
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))
    np.testing.assert_array_equal(ens.apply(rows), _leaves(booster, rows))
    np.testing.assert_array_equal(ens.tree_stage, np.repeat(np.arange(4), 3 * n_out))
    # XGBoost shrinks each tree of a round by eta / num_parallel_tree
    np.testing.assert_allclose(ens.tree_learning_rate, 0.3 / 3, rtol=1e-6)
    file_ens = parse_xgboost_json(_doc(booster))
    np.testing.assert_allclose(file_ens.tree_learning_rate, 0.3 / 3, rtol=1e-5)


def test_dart_weights_scale_the_trees():
    booster, X = _train("reg:squarederror", rounds=20, booster="dart", rate_drop=0.5,
                        skip_drop=0.0)
    gb = _doc(booster)["learner"]["gradient_booster"]  # 3.4: inside the gbtree's model
    weights = np.asarray(gb["weight_drop"] if "weight_drop" in gb else gb["model"]["weight_drop"])
    assert np.any(weights != 1.0)  # the test needs dropped (re-weighted) trees
    ens = treeimp.parse(booster)
    np.testing.assert_allclose(ens.tree_scale, weights, rtol=1e-7)
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))
    np.testing.assert_allclose(ens.tree_learning_rate, 0.3, rtol=1e-6)


def test_vector_leaf_trees():
    X, _ = _data("reg:squarederror")
    Z = np.nan_to_num(X)
    Y = np.c_[Z[:, 0] + Z[:, 1], Z[:, 2] * Z[:, 3], -Z[:, 0]]
    booster = xgb.train({"multi_strategy": "multi_output_tree", "tree_method": "hist",
                         "max_depth": 3, "num_target": 3, "eta": 0.2},
                        xgb.DMatrix(X, Y, missing=np.nan), 6)
    if "sum_hessian" not in _doc(booster)["learner"]["gradient_booster"]["model"]["trees"][0]:
        # xgboost 2.x saves vector-leaf trees without node hessians and gains
        with pytest.raises(ValueError, match=f"no key 'sum_hessian' .version "
                                             f"{re.escape(xgb.__version__)}"):
            treeimp.parse(booster)
        pytest.skip(f"xgboost {xgb.__version__} saves multi_output_tree trees without "
                    "sum_hessian / loss_changes: rejected with a clear error")
    ens = treeimp.parse(booster)
    assert ens.value_dim == 3 and ens.n_outputs == 3 and ens.n_trees == 6
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))
    np.testing.assert_array_equal(ens.apply(rows), _leaves(booster, rows))
    np.testing.assert_allclose(parse_xgboost_json(_doc(booster)).tree_learning_rate, 0.2,
                               rtol=1e-5)


def test_multi_target_one_tree_per_output():
    X, _ = _data("reg:squarederror")
    Z = np.nan_to_num(X)
    Y = np.c_[Z[:, 0] + Z[:, 1], Z[:, 2] * Z[:, 3]]
    booster = xgb.train({"max_depth": 3, "num_target": 2}, xgb.DMatrix(X, Y, missing=np.nan), 5)
    ens = treeimp.parse(booster)
    assert ens.n_outputs == 2 and ens.value_dim == 1
    np.testing.assert_array_equal(ens.tree_output, np.tile([0, 1], 5))
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))


def test_pruned_nodes_are_dropped():
    """exact + gamma keeps pruned nodes in the arrays, unreachable: they are removed and
    the remaining nodes keep their order."""
    booster, X = _train("reg:squarederror", rounds=5, max_depth=6, gamma=3.0,
                        tree_method="exact", min_child_weight=0)
    doc = _doc(booster)
    jtrees = doc["learner"]["gradient_booster"]["model"]["trees"]
    assert any(int(t["tree_param"]["num_deleted"]) > 0 for t in jtrees)
    ens = treeimp.parse(booster)
    rows = _edge_rows(ens, X)
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))
    leaves = _leaves(booster, rows)
    for t, jt in enumerate(jtrees):
        left, right = np.asarray(jt["left_children"]), np.asarray(jt["right_children"])
        reach, stack = [], [0]
        while stack:
            node = stack.pop()
            reach.append(node)
            if left[node] >= 0:
                stack += [int(left[node]), int(right[node])]
        new_id = np.full(left.size, -1)
        new_id[np.sort(reach)] = np.arange(len(reach))
        np.testing.assert_array_equal(ens.apply(rows)[:, t], new_id[leaves[:, t]])


def test_gain_totals_equal_xgboost_total_gain():
    booster, X = _train("binary:logistic", rounds=15, max_depth=4)
    ens = treeimp.parse(booster)
    split = ens.left >= 0
    assert np.all(np.isnan(ens.gain[~split]))
    totals = np.bincount(ens.feature[split], ens.gain[split], minlength=ens.n_features)
    score = booster.get_score(importance_type="total_gain")
    want = np.array([score.get(f"f{j}", 0.0) for j in range(ens.n_features)])
    np.testing.assert_allclose(totals, want, rtol=1e-5)
    cover = booster.get_score(importance_type="total_cover")
    want_w = np.array([cover.get(f"f{j}", 0.0) for j in range(ens.n_features)])
    np.testing.assert_allclose(np.bincount(ens.feature[split], ens.weight[split],
                                           minlength=ens.n_features), want_w, rtol=1e-5)


# ----------------------------------------------------------------------- categories
LABELS = ["u", "v", "w", "x", "y", "z", "a", "b"]


def _cat_frame(n=600, seed=0):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "num": rng.normal(size=n),
        "letter": pd.Categorical(rng.choice(LABELS, n), categories=LABELS),
        "size": pd.Categorical(rng.choice([10, 20, 30], n), categories=[10, 20, 30]),
        "other": rng.normal(size=n),
    })
    df.loc[rng.random(n) < 0.1, "letter"] = np.nan
    df.loc[rng.random(n) < 0.05, "num"] = np.nan
    y = (np.nan_to_num(df["num"]) + 1.5 * df["letter"].isin(["x", "z", "u", "b"])
         + 1.0 * df["letter"].isna() + 0.7 * (df["size"] == 20) - 0.8 * (df["letter"] == "v")
         + rng.normal(scale=0.5, size=n) > 0.8).astype(int)
    return df, y


@pytest.fixture(scope="module", params=[1, 100], ids=["partition", "onehot"])
def cat_model(request):
    df, y = _cat_frame()
    clf = xgb.XGBClassifier(n_estimators=10, max_depth=3, enable_categorical=True,
                            max_cat_to_onehot=request.param, random_state=0).fit(df, y)
    return clf, df


def test_categorical_frame(cat_model):
    clf, df = cat_model
    ens = treeimp.parse(clf)
    assert ens.is_categorical.any()
    if _stores_labels(clf.get_booster()):
        assert ens.feature_categories == [None, LABELS, [10, 20, 30], None]
    else:  # xgboost 2.x: no labels stored, a frame is read by its own codes
        assert ens.feature_categories is None
    _assert_margin(ens.predict_raw(df), _margin(clf.get_booster(), df, enable_categorical=True))
    # another category order, missing values and labels absent from the frame: XGBoost
    # (>= 3.1) re-codes by label, and so does treeimp through feature_categories; 2.x
    # uses the frame's codes, and so does treeimp without stored labels
    test = pd.DataFrame({
        "num": np.linspace(-2, 2, 10),
        "letter": pd.Categorical(["z", "b", None, "u", "v", "b", "y", "x", "a", "w"],
                                 categories=["z", "x", "w", "v", "u", "b", "a", "y"]),
        "size": pd.Categorical([30, 20, 10, 10, 20, 30, 10, 20, None, 30],
                               categories=[30, 20, 10]),
        "other": np.zeros(10),
    })
    _assert_margin(ens.predict_raw(test),
                   _margin(clf.get_booster(), test, enable_categorical=True))


def test_categorical_unseen_label_is_missing(cat_model):
    """XGBoost 3.2 refuses most labels it was not trained on ('Found a category not in
    the training set'; some unseen labels are silently given code 0, see the parser
    notes); treeimp routes an unseen label like a missing value."""
    clf, _ = cat_model
    ens = treeimp.parse(clf)

    def frame(letters, cats):
        return pd.DataFrame({"num": [0.3, -0.4], "letter": pd.Categorical(letters,
                                                                          categories=cats),
                             "size": pd.Categorical([20, 10], categories=[10, 20, 30]),
                             "other": [0.0, 1.0]})

    unseen = frame(["zz", "u"], ["u", "zz"])
    if not _stores_labels(clf.get_booster()):  # xgboost 2.x: the frame's codes, both
        _assert_margin(ens.predict_raw(unseen),
                       _margin(clf.get_booster(), unseen, enable_categorical=True))
        return
    with pytest.raises(xgb.core.XGBoostError, match="not in the training set"):
        _margin(clf.get_booster(), unseen, enable_categorical=True)
    as_missing = frame([None, "u"], ["u"])
    _assert_margin(ens.predict_raw(unseen),
                   _margin(clf.get_booster(), as_missing, enable_categorical=True))


def _coded(ens, codes_letter, codes_size):
    n = len(codes_letter)
    return np.c_[np.linspace(-1, 1, n), codes_letter, codes_size, np.zeros(n)]


CAT_TYPES = {"feature_types": ["float", "c", "c", "float"],
             "feature_names": ["num", "letter", "size", "other"], "enable_categorical": True}


def test_categorical_codes_unseen_and_beyond_training(cat_model):
    clf, _ = cat_model
    ens = treeimp.parse(clf)
    letter = np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 30, 1000, 2.0**24, 3e9, 3.7, np.nan])
    size = np.array([0, 1, 2, 3, 2, 1, 0, np.nan, 5, 7, 1, 2, 0, 1, 2.9, 0])
    X = _coded(ens, letter, size)
    _assert_margin(ens.predict_raw(X), _margin(clf.get_booster(), X, **CAT_TYPES))
    np.testing.assert_array_equal(ens.apply(X), _leaves(clf.get_booster(), X, **CAT_TYPES))


def test_categorical_negative_codes(cat_model):
    clf, _ = cat_model
    ens = treeimp.parse(clf)
    assert not ens.missing_left[ens.is_categorical].all()  # some NaN go right
    letter = np.array([-1, -2, -0.5, -1e-9, -3e38, -1, -7, -1.0])
    size = np.array([-1, 0, -2, 1, -1, -3e38, 2, -0.1])
    X = _coded(ens, letter, size)
    _assert_margin(ens.predict_raw(X), _margin(clf.get_booster(), X, **CAT_TYPES))


def test_categorical_numpy_input_has_no_stored_labels():
    rng = np.random.default_rng(3)
    X = np.c_[rng.normal(size=500), rng.integers(0, 6, 500)].astype(float)
    X[rng.random(500) < 0.1, 1] = np.nan
    y = X[:, 0] + np.isin(X[:, 1], [1, 4]) * 2.0
    booster = xgb.train({"max_depth": 3, "max_cat_to_onehot": 1},
                        xgb.DMatrix(X, y, feature_types=["q", "c"], enable_categorical=True),
                        5)
    ens = treeimp.parse(booster)
    assert ens.feature_categories is None and ens.is_categorical.any()
    kw = {"feature_types": ["q", "c"], "enable_categorical": True}
    probe = np.c_[np.zeros(12), [0, 1, 2, 3, 4, 5, 6, 9, 100, np.nan, 2.5, 4.99]]
    _assert_margin(ens.predict_raw(probe), _margin(booster, probe, **kw))


def test_non_ascii_labels_stored_wrongly_are_not_used():
    """XGBoost 3.2 cuts non-ASCII labels when it stores them (offsets count characters,
    values keep that many bytes): they are dropped with a warning, and a frame in the
    training category order still predicts like XGBoost."""
    rng = np.random.default_rng(0)
    labels = ["x", "zé", "ü", "b"]
    df = pd.DataFrame({"a": rng.normal(size=400),
                       "c": pd.Categorical(rng.choice(labels, 400), categories=labels)})
    y = df["c"].isin(["zé", "b"]) * 1.0 + 0.1 * df["a"]
    reg = xgb.XGBRegressor(n_estimators=3, max_depth=2, enable_categorical=True,
                           max_cat_to_onehot=1).fit(df, y)
    version = tuple(int(v) for v in xgb.__version__.split(".")[:2])
    if version > (3, 2):
        pytest.skip("the storage bug may be fixed after xgboost 3.2")
    if _stores_labels(reg.get_booster()):
        with pytest.warns(UserWarning, match="non-ASCII"):
            ens = treeimp.parse(reg)
        assert ens.feature_categories[1] is None
    else:  # xgboost 2.x stores no labels at all: nothing to warn about
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ens = treeimp.parse(reg)
        assert ens.feature_categories is None
    test = pd.DataFrame({"a": np.zeros(4), "c": pd.Categorical(labels, categories=labels)})
    _assert_margin(ens.predict_raw(test),
                   _margin(reg.get_booster(), test, enable_categorical=True))


def test_xgboost_2_document_form():
    """XGBoost 2.x documents: plain base_score, no 'cats', maybe no iteration_indptr."""
    booster, X = _train("multi:softprob", rounds=4, num_parallel_tree=2, base_score=0.2)
    doc = _doc(booster)
    old = json.loads(json.dumps(doc))
    old["version"] = [2, 1, 4]
    model = old["learner"]["gradient_booster"]["model"]
    model.pop("cats", None)  # absent in documents of xgboost 2.x itself
    model.pop("iteration_indptr", None)
    param = old["learner"]["learner_model_param"]
    margins = np.atleast_1d(json.loads(param["base_score"]))  # 2.x itself: plain already
    assert len(set(margins)) == 1, "the 2.x form has one base_score for every class"
    param["base_score"] = f"{margins[0]:.8E}"
    got, want = parse_xgboost_json(old), treeimp.parse(booster)
    np.testing.assert_array_equal(got.tree_stage, want.tree_stage)
    rows = _edge_rows(want, X)
    _assert_margin(got.predict_raw(rows), _margin(booster, rows))


# ----------------------------------------------------------------------- hypothesis rows
_HYPO = {}


def _hypo_model():
    if not _HYPO:
        booster, X = _train("binary:logistic", rounds=10, max_depth=4)
        _HYPO["booster"], _HYPO["ens"] = booster, treeimp.parse(booster)
    return _HYPO["booster"], _HYPO["ens"]


@st.composite
def _rows_strategy(draw):
    _, ens = _hypo_model()
    thr = np.unique(np.float32(ens.threshold[ens.left >= 0]))
    cell = st.one_of(
        st.sampled_from(thr.tolist()).flatmap(lambda t: st.sampled_from([
            float(t), float(np.nextafter(np.float32(t), np.float32(np.inf))),
            float(np.nextafter(np.float32(t), np.float32(-np.inf)))])),
        st.sampled_from([np.nan, 0.0, -0.0, 3e38, -3e38, 1e-40, -1e-40]),
        st.floats(min_value=-3e38, max_value=3e38, allow_nan=False, width=64),
    )
    n = draw(st.integers(1, 20))
    return np.array([[draw(cell) for _ in range(ens.n_features)] for _ in range(n)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_rows_strategy())
def test_hypothesis_rows(rows):
    booster, ens = _hypo_model()
    _assert_margin(ens.predict_raw(rows), _margin(booster, rows))
    np.testing.assert_array_equal(ens.apply(rows), _leaves(booster, rows))


# ----------------------------------------------------------------------- learning rate
@pytest.mark.parametrize("lam", [0.0, 1.0, 5.0])
@pytest.mark.parametrize("eta", [0.05, 0.3, 1.0])
@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "count:poisson"])
def test_learning_rate_recovered_from_a_file(objective, eta, lam):
    booster, _ = _train(objective, rounds=6, eta=eta, reg_lambda=lam)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ens = parse_xgboost_json(_doc(booster))
    np.testing.assert_allclose(ens.tree_learning_rate, _config_eta(booster), rtol=1e-5)


@pytest.mark.parametrize("params", [
    {"reg_alpha": 0.5, "eta": 0.2},
    {"reg_alpha": 2.0, "reg_lambda": 0.0, "eta": 0.1},
    {"max_delta_step": 0.3, "eta": 0.5},
    {"monotone_constraints": "(0,0,0,0,1)", "eta": 0.2},
])
def test_learning_rate_with_l1_and_clipping(params):
    booster, _ = _train("binary:logistic", rounds=10, max_depth=4, **params)
    ens = parse_xgboost_json(_doc(booster))
    np.testing.assert_allclose(ens.tree_learning_rate, params["eta"], rtol=1e-5)


def test_learning_rate_under_a_binding_monotone_constraint_is_never_silently_wrong():
    """A monotone constraint on the feature every tree splits on first clips most node
    weights to their bounds, which breaks the identity the rate is recovered from (on
    XGBoost 3.4.1 all but 6 of 52 usable nodes). The file's rate is then either
    recovered exactly or, with a warning, XGBoost's default; the live Booster states
    its configured rate."""
    booster, _ = _train("binary:logistic", rounds=10, max_depth=4,
                        monotone_constraints="(1,0,0,0,0)", eta=0.2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rates = parse_xgboost_json(_doc(booster)).tree_learning_rate
    said = [str(w.message) for w in caught if "cannot be recovered" in str(w.message)]
    if said:
        np.testing.assert_array_equal(rates, 0.3)
    else:
        np.testing.assert_allclose(rates, 0.2, rtol=1e-5)
    np.testing.assert_allclose(treeimp.parse(booster).tree_learning_rate, 0.2, rtol=1e-6)


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic"])
def test_shrinkage_rows_vectorised_equal_tree_by_tree(objective):
    """The one-pass _rows (single-output trees) gives the per-tree loop's rows, in the
    same order (the learning-rate search draws rows at random)."""
    from treeimp.parsers.xgb import _read_tree, _shrinkage_input
    from treeimp.parsers.xgb_shrinkage import _rows_per_tree, _rows_single_output

    booster, _ = _train(objective, rounds=12, max_depth=4, reg_lambda=2.0)
    doc = _doc(booster)
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    raw = [_read_tree(jt, i, xgb.__version__) for i, jt in enumerate(trees)]
    for adaptive in (False, True):
        inp = _shrinkage_input(raw, adaptive)
        want = _rows_per_tree(inp)
        assert want.shape[0] > 20
        np.testing.assert_array_equal(_rows_single_output(inp), want)


def test_learning_rate_schedule():
    X, y = _data("reg:squarederror")
    rates = [0.3 * 0.8**i for i in range(8)]
    booster = xgb.train({"max_depth": 3}, xgb.DMatrix(X, y, missing=np.nan), 8,
                        callbacks=[xgb.callback.LearningRateScheduler(rates)])
    # the callback sets eta after each round: tree i is shrunk by rates[i - 1]
    want = np.float32([0.3] + rates[:-1])
    for ens in (parse_xgboost_json(_doc(booster)), treeimp.parse(booster)):
        np.testing.assert_allclose(ens.tree_learning_rate, want, rtol=1e-5)


def test_unidentifiable_learning_rate_warns():
    booster, _ = _train("reg:squarederror", rounds=3, max_depth=0, max_leaves=1)
    doc = _doc(booster)
    if any(len(t["left_children"]) > 1 for t in doc["learner"]["gradient_booster"]["model"]
           ["trees"]):
        pytest.skip("xgboost grew splits")
    with pytest.warns(UserWarning, match="learning rate"):  # when first read
        ens = parse_xgboost_json(doc)
        np.testing.assert_allclose(ens.tree_learning_rate, 0.3)


# ----------------------------------------------------------------------- errors
@pytest.mark.parametrize("objective", ["binary:hinge"])
def test_unsupported_objective(objective):
    X, y = _data("count:poisson")
    booster = xgb.train({"objective": objective, "max_depth": 2},
                        xgb.DMatrix(X, (y > np.median(y)).astype(float), missing=np.nan), 2)
    with pytest.raises(ValueError, match=objective) as info:
        treeimp.parse(booster)
    for name in SUPPORTED_OBJECTIVES:
        assert name in str(info.value)


def test_gblinear_is_rejected():
    X, y = _data("reg:squarederror")
    booster = xgb.train({"booster": "gblinear"}, xgb.DMatrix(np.nan_to_num(X), y), 2)
    with pytest.raises(ValueError, match="gblinear"):
        treeimp.parse(booster)


def test_missing_keys_are_named():
    booster, _ = _train("reg:squarederror", rounds=2)
    doc = _doc(booster)
    del doc["learner"]["gradient_booster"]["model"]["trees"][1]["sum_hessian"]
    with pytest.raises(ValueError, match=f"sum_hessian.*{re.escape(xgb.__version__)}"):
        parse_xgboost_json(doc)
    doc = _doc(booster)
    del doc["learner"]["learner_model_param"]["base_score"]
    with pytest.raises(ValueError, match="base_score"):
        parse_xgboost_json(doc)


@pytest.mark.parametrize("ext", ["json", "ubj"])
def test_truncated_and_damaged_files(tmp_path, ext):
    booster, _ = _train("binary:logistic", rounds=3)
    good = tmp_path / f"m.{ext}"
    booster.save_model(str(good))
    data = good.read_bytes()
    for cut in (1, 10, len(data) // 3, len(data) // 2, len(data) - 1):
        bad = tmp_path / f"cut{cut}.{ext}"
        bad.write_bytes(data[:cut])
        with pytest.raises(ValueError, match=str(bad.name)):
            treeimp.load(bad)
    empty = tmp_path / f"empty.{ext}"
    empty.write_bytes(b"")
    with pytest.raises(ValueError, match="empty"):
        treeimp.load(empty)


def test_file_errors(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        treeimp.load(tmp_path / "nope.json")
    other = tmp_path / "model.bin"
    other.write_bytes(b"\x00\x01binary stuff")
    with pytest.raises(ValueError, match="unknown extension"):
        treeimp.load(other)
    with pytest.raises(ValueError, match="directory"):
        treeimp.load(tmp_path)
    legacy = tmp_path / "legacy.json"
    legacy.write_bytes(b"binf\x00\x00")
    with pytest.raises(ValueError, match="legacy"):
        treeimp.load(legacy)


# ----------------------------------------------------------------------- saved files
_SAVED = {
    "squarederror": ("reg:squarederror", {}),
    "absoluteerror": ("reg:absoluteerror", {}),
    "logistic": ("binary:logistic", {"reg_lambda": 0.0}),
    "logitraw": ("binary:logitraw", {}),
    "softprob": ("multi:softprob", {"reg_lambda": 5.0}),
    "poisson": ("count:poisson", {}),
    "gamma": ("reg:gamma", {}),
    "tweedie": ("reg:tweedie", {"eta": 0.1}),
    "npt3": ("multi:softprob", {"num_parallel_tree": 3, "subsample": 0.7}),
    "dart": ("reg:squarederror", {"booster": "dart", "rate_drop": 0.5}),
}

_LOADER = textwrap.dedent("""
    import json, sys, warnings
    sys.modules["xgboost"] = None  # any import of xgboost now fails
    import numpy as np
    import treeimp
    out = {}
    for stem in sys.argv[2:]:
        rows = np.load(stem + ".rows.npy")
        for ext in ("json", "ubj"):
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                ens = treeimp.load(stem + "." + ext)
            np.save(stem + "." + ext + ".pred.npy", ens.predict_raw(rows))
            np.save(stem + "." + ext + ".leaf.npy", ens.apply(rows))
            out[stem + "." + ext] = {"eta": ens.tree_learning_rate.tolist(),
                                     "categories": ens.feature_categories,
                                     "names": ens.feature_names}
    assert sys.modules["xgboost"] is None
    with open(sys.argv[1], "w") as fh:
        json.dump(out, fh)
""")


@pytest.fixture(scope="module")
def saved_models(tmp_path_factory):
    d = tmp_path_factory.mktemp("xgb_files")
    models = {}
    for stem, (objective, params) in _SAVED.items():
        booster, X = _train(objective, rounds=8, **params)
        models[stem] = (booster, X, None)
    clf, df = None, None
    df, y = _cat_frame()
    clf = xgb.XGBClassifier(n_estimators=6, max_depth=3, enable_categorical=True,
                            max_cat_to_onehot=1, random_state=0).fit(df, y)
    codes = np.c_[df["num"], df["letter"].cat.codes.replace(-1, np.nan),
                  df["size"].cat.codes, df["other"]].astype(float)
    codes = np.vstack([codes, _coded(None, np.arange(12.0), np.arange(12.0) % 4)])
    models["categorical"] = (clf.get_booster(), codes, CAT_TYPES)
    stems = []
    for stem, (booster, X, kw) in models.items():
        path = str(d / stem)
        booster.save_model(path + ".json")
        booster.save_model(path + ".ubj")
        if kw is None:
            rows = _edge_rows(treeimp.parse(booster), X)
        else:
            rows = X
        np.save(path + ".rows.npy", rows)
        stems.append(path)
    report = d / "report.json"
    proc = subprocess.run([sys.executable, "-c", _LOADER, str(report), *stems],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return d, models, json.loads(report.read_text())


@pytest.mark.parametrize("stem", sorted([*_SAVED, "categorical"]))
def test_saved_file_loads_without_xgboost(saved_models, stem):
    d, models, report = saved_models
    booster, _, kw = models[stem]
    path = str(d / stem)
    rows = np.load(path + ".rows.npy")
    want = _margin(booster, rows, **(kw or {}))
    leaves = _leaves(booster, rows, **(kw or {}))
    live = treeimp.parse(booster)
    for ext in ("json", "ubj"):
        _assert_margin(np.load(f"{path}.{ext}.pred.npy"), want)
        np.testing.assert_array_equal(np.load(f"{path}.{ext}.leaf.npy"), leaves)
        info = report[f"{path}.{ext}"]
        np.testing.assert_allclose(info["eta"], live.tree_learning_rate, rtol=1e-5)
        assert info["categories"] == live.feature_categories
        assert info["names"] == live.feature_names
    if stem == "categorical" and _stores_labels(booster):
        assert report[f"{path}.ubj"]["categories"] == [None, LABELS, [10, 20, 30], None]


# ----------------------------------------------------------------------- corrupt sizes
def _peak_bytes(fn):
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("key, value", [("num_feature", "99999999999999999999"),
                                        ("num_feature", "-3"), ("num_feature", "0"),
                                        ("num_feature", "many"),
                                        ("num_class", "99999999999999"),
                                        ("num_target", "-1")])
def test_corrupt_model_sizes_are_clear_errors(tmp_path, key, value):
    booster, _ = _train("reg:squarederror", rounds=2)
    doc = _doc(booster)
    doc["learner"]["learner_model_param"][key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"learner_model_param.{key}"):
        peak = _peak_bytes(lambda: treeimp.load(path))
        pytest.fail(f"no error; peak memory {peak}")


def test_huge_num_feature_without_feature_types_allocates_nothing_per_feature(tmp_path):
    """A (corrupt or unusual) num_feature up to 2**31 - 1 parses without per-feature
    lists, and input of the wrong width is then a clear error."""
    booster, X = _train("reg:squarederror", rounds=3)
    doc = _doc(booster)
    assert not doc["learner"].get("feature_types")
    doc["learner"]["learner_model_param"]["num_feature"] = str(2**31 - 1)
    path = tmp_path / "wide.json"
    path.write_text(json.dumps(doc))
    holder = {}
    peak = _peak_bytes(lambda: holder.setdefault("ens", treeimp.load(path)))
    assert peak < 20e6, f"parsing allocated {peak / 1e6:.0f} MB"
    ens = holder["ens"]
    assert ens.n_features == 2**31 - 1
    with pytest.raises(ValueError, match="5 columns but the model was trained on 2147483647"):
        ens.predict_raw(X)
    doc["learner"]["learner_model_param"]["num_feature"] = str(2**31)
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"num_feature is 2147483648; expected 1\.\.2147483647"):
        treeimp.load(path)


def test_unfitted_booster_is_a_clear_error():
    with pytest.raises(ValueError, match="Booster is empty \\(unfitted\\)") as info:
        treeimp.parse(xgb.Booster())
    assert type(info.value) is ValueError  # not xgboost's own XGBoostError
    assert "Stack trace" not in str(info.value)

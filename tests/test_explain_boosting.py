"""explain() on boosting models: staged gradients checked against independent oracles."""

import json

import numpy as np
import pytest

import treeimp
from treeimp._input import RowSource
from treeimp.boosting import staged_pass

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def _data(n=400, F=5, seed=0, kind="regression"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    f = X[:, 0] + 0.5 * X[:, 1] ** 2 - X[:, 2] * (X[:, 3] > 0)
    if kind == "regression":
        return X, f + rng.normal(scale=0.5, size=n)
    if kind == "binary":
        return X, (f + rng.logistic(size=n) > 0.5).astype(int)
    return X, np.digitize(f + rng.normal(scale=0.5, size=n), [-0.5, 0.7])


def _base_margin(booster, dmatrix_rows, n_outputs):
    """The margin before the first tree: XGBoost's own prediction of one round minus
    the same prediction with a zero base margin (works on any objective's link)."""
    n = dmatrix_rows.shape[0]
    full = booster.predict(xgb.DMatrix(dmatrix_rows), output_margin=True,
                           iteration_range=(0, 1))
    zero = booster.predict(xgb.DMatrix(dmatrix_rows, base_margin=np.zeros((n, n_outputs))),
                           output_margin=True, iteration_range=(0, 1))
    return (full - zero).reshape(n, n_outputs)


def _neg_gradient(objective, margin, y):
    """-g of XGBoost's objectives as its documentation defines them, (n, K)."""
    if objective == "reg:squarederror":
        return y[:, None] - margin
    if objective == "binary:logistic":
        return y[:, None] - 1 / (1 + np.exp(-margin))
    if objective == "count:poisson":
        return y[:, None] - np.exp(margin)
    if objective == "multi:softprob":
        p = np.exp(margin - margin.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        return np.eye(margin.shape[1])[y.astype(int)] - p
    raise AssertionError(objective)


ORACLE = [
    ("squared", "reg:squarederror", "regression", {}),
    ("logistic", "binary:logistic", "binary", {}),
    ("dart", "reg:squarederror", "regression",
     {"booster": "dart", "rate_drop": 0.3, "skip_drop": 0.0}),
    ("dart logistic", "binary:logistic", "binary",
     {"booster": "dart", "rate_drop": 0.5, "skip_drop": 0.0, "normalize_type": "forest"}),
    ("softprob", "multi:softprob", "multi", {}),
    ("softprob parallel", "multi:softprob", "multi",
     {"num_parallel_tree": 2, "subsample": 0.7}),
    ("poisson", "count:poisson", "count", {}),
]


@pytest.mark.parametrize("name,objective,kind,extra", ORACLE, ids=[o[0] for o in ORACLE])
def test_mdi_oob_equals_xgboost_saabas_times_gradient(name, objective, kind, extra):
    """Oracle: per-round Saabas contributions from XGBoost itself (approx_contribs per
    iteration_range, differenced round by round) times -g at the margin before each
    round, summed over outputs and averaged over rows. DART: XGBoost applies each
    tree's weight_drop in both, so this pins the scaling of the tree values."""
    X, y = _data(kind="regression" if kind == "count" else kind)
    if kind == "count":
        y = np.random.default_rng(1).poisson(np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1]))
    Xt, yt, Xv, yv = X[:250], y[:250], X[250:], y[250:]
    model = xgb.XGBRegressor if kind in ("regression", "count") else xgb.XGBClassifier
    rounds = 15
    m = model(n_estimators=rounds, max_depth=3, learning_rate=0.3, objective=objective,
              reg_lambda=1.0, random_state=0, **extra).fit(Xt, yt)
    booster = m.get_booster()
    dv = xgb.DMatrix(Xv)
    F, n = X.shape[1], len(yv)
    K = 3 if kind == "multi" else 1
    margin = _base_margin(booster, Xv, K)
    expected = np.zeros(F)
    prev = np.zeros((n, K, F))
    for t in range(rounds):
        contrib = booster.predict(dv, pred_contribs=True, approx_contribs=True,
                                  iteration_range=(0, t + 1)).reshape(n, K, F + 1)[:, :, :F]
        expected += np.einsum("ik,ikf->f", _neg_gradient(objective, margin, yv),
                              contrib - prev) / n
        prev = contrib
        margin = booster.predict(dv, output_margin=True,
                                 iteration_range=(0, t + 1)).reshape(n, K)
    np.testing.assert_allclose(margin.reshape(n, K),
                               booster.predict(dv, output_margin=True).reshape(n, K),
                               rtol=1e-6)
    res = treeimp.explain(m, Xv, yv, methods=("mdi_oob",), random_state=0)
    if extra.get("booster") == "dart":
        assert np.ptp(treeimp.parse(m).tree_scale) > 0.1  # the weights matter here
    np.testing.assert_allclose(res.table["mdi_oob"].to_numpy(), expected, rtol=1e-5,
                               atol=1e-6 * np.abs(expected).max())


MODELS = [
    ("xgb squared", lambda: xgb.XGBRegressor(n_estimators=12, max_depth=3), "regression"),
    ("xgb logistic", lambda: xgb.XGBClassifier(n_estimators=12, max_depth=3), "binary"),
    ("xgb softprob", lambda: xgb.XGBClassifier(n_estimators=8, max_depth=3), "multi"),
    ("xgb parallel", lambda: xgb.XGBRegressor(n_estimators=5, max_depth=3,
                                              num_parallel_tree=3, subsample=0.7),
     "regression"),
    ("lgb l2", lambda: lgb.LGBMRegressor(n_estimators=12, num_leaves=7, verbose=-1),
     "regression"),
    ("lgb binary", lambda: lgb.LGBMClassifier(n_estimators=12, num_leaves=7, verbose=-1),
     "binary"),
    ("lgb multiclass", lambda: lgb.LGBMClassifier(n_estimators=8, num_leaves=7, verbose=-1),
     "multi"),
]


@pytest.mark.parametrize("name,make,kind", MODELS, ids=[m[0] for m in MODELS])
def test_staged_margin_equals_library_raw_margin(name, make, kind):
    X, y = _data(kind=kind)
    model = make().fit(X[:250], y[:250])
    ens = treeimp.parse(model)
    rows = RowSource(X[250:], ens)
    n = rows.n_rows
    block = np.arange(n, dtype=np.int32) % 3
    y_eval = y[250:] if kind == "regression" else model.classes_[y[250:]]
    _, margin = staged_pass(ens, rows, y_eval, np.ones(n), block, 3)
    if name.startswith("xgb"):
        raw = model.get_booster().predict(xgb.DMatrix(X[250:]), output_margin=True)
    else:
        raw = model.booster_.predict(X[250:], raw_score=True)
    raw = raw.reshape(n, -1)
    np.testing.assert_allclose(margin, raw, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name,make,kind", MODELS, ids=[m[0] for m in MODELS])
def test_every_boosting_model_explains_and_ranks_signal_above_noise(name, make, kind):
    """End to end on each library and objective family: finite values and standard
    errors, and the pure-noise feature x4 is not among the top two."""
    X, y = _data(kind=kind)
    model = make().fit(X[:250], y[:250])
    res = treeimp.explain(model, X[250:], y[250:], methods=("mdi_oob",), random_state=0)
    assert np.isfinite(res.table["mdi_oob"]).all()
    assert np.isfinite(res.stderr["mdi_oob"]).all()
    # informative features dominate the noise feature 4
    top = res.ranking("mdi_oob")[:2]
    assert "x4" not in top


def test_ufi_one_tree_squared_error_equals_forest_formula_on_residuals():
    """lambda = 0, learning rate 1, one tree: boosting UFI == Zhou-Hooker regression UFI
    applied to the residuals y - base (brute force over the tree's nodes)."""
    X, y = _data(n=600, kind="regression")
    Xt, yt, Xv, yv = X[:300], y[:300], X[300:], y[300:]
    m = xgb.XGBRegressor(n_estimators=1, max_depth=3, learning_rate=1.0, reg_lambda=0.0,
                         min_child_weight=1, base_score=0.3).fit(Xt, yt)
    ens = treeimp.parse(m)
    res = treeimp.explain(m, Xv, yv, methods=("ufi",), random_state=0)
    # brute force: leaves of train and held-out rows via XGBoost's own pred_leaf
    booster = m.get_booster()
    tree = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"][
        "trees"][0]
    left, right = tree["left_children"], tree["right_children"]
    feat = tree["split_indices"]
    leaf_t = booster.predict(xgb.DMatrix(Xt), pred_leaf=True).astype(int).ravel()
    leaf_v = booster.predict(xgb.DMatrix(Xv), pred_leaf=True).astype(int).ravel()

    def members(node, leaves):
        if left[node] < 0:
            return leaves == node
        return members(left[node], leaves) | members(right[node], leaves)

    rt, rv = yt - 0.3, yv - 0.3  # residuals at the base score
    expected = np.zeros(X.shape[1])
    n_nodes = len(left)
    mt = {j: members(j, leaf_t) for j in range(n_nodes)}
    mv = {j: members(j, leaf_v) for j in range(n_nodes)}

    def H(j):  # in-sample variance + held-out MSE about the in-sample mean
        mu = rt[mt[j]].mean()
        return rt[mt[j]].var() + np.mean((rv[mv[j]] - mu) ** 2)

    for j in range(n_nodes):
        lc, rc = left[j], right[j]
        if lc < 0 or mv[lc].sum() == 0 or mv[rc].sum() == 0:
            continue
        w = {k: mt[k].sum() / len(rt) for k in (j, lc, rc)}
        expected[feat[j]] += w[j] * H(j) - w[lc] * H(lc) - w[rc] * H(rc)
    assert ens.n_trees == 1
    np.testing.assert_allclose(res.table["ufi"].to_numpy(), expected, rtol=1e-5, atol=1e-8)

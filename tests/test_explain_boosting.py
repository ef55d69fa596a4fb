"""explain() on boosting models: staged gradients checked against independent oracles."""

import json

import numpy as np
import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
)

import treeimp
from treeimp.inputs.rows import RowSource
from treeimp.stats.drivers import staged_pass

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


def _targets(kind, X, y):
    """Regression-style targets for count and positive objectives."""
    rng = np.random.default_rng(7)
    mean = np.exp(0.4 * X[:, 0] - 0.3 * X[:, 1] ** 2)
    if kind == "count":
        return rng.poisson(mean).astype(float)
    if kind == "positive":
        return rng.gamma(2.0, mean / 2.0)
    return y


MARGIN_MODELS = MODELS + [
    ("xgb softprob parallel", lambda: xgb.XGBClassifier(n_estimators=5, max_depth=3,
                                                       num_parallel_tree=2, subsample=0.7),
     "multi"),
    ("xgb poisson", lambda: xgb.XGBRegressor(n_estimators=10, max_depth=3,
                                             objective="count:poisson"), "count"),
    ("xgb gamma", lambda: xgb.XGBRegressor(n_estimators=10, max_depth=3,
                                           objective="reg:gamma"), "positive"),
    ("xgb tweedie", lambda: xgb.XGBRegressor(n_estimators=10, max_depth=3,
                                             objective="reg:tweedie",
                                             tweedie_variance_power=1.3), "count"),
    ("lgb poisson", lambda: lgb.LGBMRegressor(objective="poisson", n_estimators=10,
                                              num_leaves=7, verbose=-1), "count"),
    ("lgb gamma", lambda: lgb.LGBMRegressor(objective="gamma", n_estimators=10, num_leaves=7,
                                            verbose=-1), "positive"),
    ("lgb tweedie", lambda: lgb.LGBMRegressor(objective="tweedie", tweedie_variance_power=1.4,
                                              n_estimators=10, num_leaves=7, verbose=-1),
     "count"),
    ("sk gb regression", lambda: GradientBoostingRegressor(n_estimators=10, max_depth=3,
                                                           random_state=0), "regression"),
    ("sk gb binary", lambda: GradientBoostingClassifier(n_estimators=10, max_depth=3,
                                                        random_state=0), "binary"),
    ("sk gb multiclass", lambda: GradientBoostingClassifier(n_estimators=6, max_depth=3,
                                                            random_state=0), "multi"),
    ("sk hgb multiclass", lambda: HistGradientBoostingClassifier(max_iter=8, max_depth=3,
                                                                 early_stopping=False),
     "multi"),
    ("sk hgb poisson", lambda: HistGradientBoostingRegressor(loss="poisson", max_iter=10,
                                                             max_depth=3,
                                                             early_stopping=False), "count"),
]


def _library_raw_margin(name, model, X):
    n = X.shape[0]
    if name.startswith("xgb"):
        raw = model.get_booster().predict(xgb.DMatrix(X), output_margin=True)
    elif name.startswith("lgb"):
        raw = model.booster_.predict(X, raw_score=True)
    elif name == "sk hgb poisson":
        raw = np.log(model.predict(X))  # the log link: predict = exp(raw)
    elif hasattr(model, "decision_function"):
        raw = model.decision_function(X)
    else:
        raw = model.predict(X)  # identity link
    return np.asarray(raw, dtype=float).reshape(n, -1)


@pytest.mark.parametrize("name,make,kind", MARGIN_MODELS, ids=[m[0] for m in MARGIN_MODELS])
def test_staged_margin_equals_library_raw_margin(name, make, kind):
    X, y = _data(kind="regression" if kind in ("count", "positive") else kind)
    y = _targets(kind, X, y)
    model = make().fit(X[:250], y[:250])
    ens = treeimp.parse(model)
    rows = RowSource(X[250:], ens)
    n = rows.n_rows
    block = np.arange(n, dtype=np.int32) % 3
    y_eval = model.classes_[y[250:]] if kind in ("binary", "multi") else y[250:]
    _, margin = staged_pass(ens, rows, y_eval, np.ones(n), block, 3)
    raw = _library_raw_margin(name, model, X[250:])
    assert margin.shape == raw.shape
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


@pytest.mark.parametrize("name,make,kind", MODELS, ids=[m[0] for m in MODELS])
def test_mdi_is_the_library_total_gain(name, make, kind):
    """explain's "mdi" column is what the library reports: XGBoost
    get_score("total_gain"), LightGBM feature_importance("gain")."""
    X, y = _data(kind=kind)
    model = make().fit(X[:250], y[:250])
    res = treeimp.explain(model, X[250:], y[250:], methods=("mdi", "mdi_oob"))
    F = X.shape[1]
    if name.startswith("xgb"):
        score = model.get_booster().get_score(importance_type="total_gain")
        expected = np.array([score.get(f"f{j}", 0.0) for j in range(F)])
    else:
        expected = model.booster_.feature_importance("gain")
    assert np.all(expected[:4] > 0)
    np.testing.assert_allclose(res.table["mdi"].to_numpy(), expected, rtol=1e-5)
    assert res.stderr["mdi"].isna().all() and res.pvalues["mdi"].isna().all()


# ------------------------------------------------------------------ brute force by tree
def _tree_structures(lib, model):
    """Per tree: (internal nodes [(node, feature, left, right)], membership(X) -> dict
    node -> bool row mask), read from the library's own dumps and leaf predictions."""
    out = []
    if lib == "sklearn":
        for est in model.estimators_[:, 0]:
            t = est.tree_
            internal = [(m, t.feature[m], t.children_left[m], t.children_right[m])
                        for m in range(t.node_count) if t.children_left[m] >= 0]
            out.append((internal, lambda X, est=est: dict(enumerate(
                est.decision_path(X.astype(np.float32)).toarray().astype(bool).T))))
        return out
    if lib == "xgboost":
        booster = model.get_booster()
        trees = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"][
            "model"]["trees"]
        nodes = [(t["left_children"], t["right_children"], t["split_indices"]) for t in trees]

        def leaves(X):
            return booster.predict(xgb.DMatrix(X), pred_leaf=True).astype(int).reshape(
                len(X), -1)
    else:
        booster = model.booster_
        nodes = []
        for info in booster.dump_model()["tree_info"]:
            left, right, feat, leaf_ids = [], [], [], []

            def visit(d, left=left, right=right, feat=feat, leaf_ids=leaf_ids):
                i = len(left)
                for a in (left, right, feat, leaf_ids):
                    a.append(-1)
                if "leaf_index" in d or "split_feature" not in d:
                    leaf_ids[i] = d.get("leaf_index", 0)
                    return i
                feat[i] = d["split_feature"]
                left[i] = visit(d["left_child"])
                right[i] = visit(d["right_child"])
                return i

            visit(info["tree_structure"])
            nodes.append((left, right, feat, leaf_ids))

        def leaves(X):
            return booster.predict(X, pred_leaf=True).astype(int).reshape(len(X), -1)
    for t, spec in enumerate(nodes):
        left, right, feat = spec[:3]
        leaf_id = spec[3] if lib == "lightgbm" else list(range(len(left)))

        def membership(X, t=t, left=left, right=right, leaf_id=leaf_id):
            lv = leaves(X)[:, t]
            masks = {}

            def fill(j):
                if left[j] < 0:
                    masks[j] = lv == leaf_id[j]
                else:
                    masks[j] = fill(left[j]) | fill(right[j])
                return masks[j]

            fill(0)
            return masks

        internal = [(m, feat[m], left[m], right[m]) for m in range(len(left)) if left[m] >= 0]
        out.append((internal, membership))
    return out


def _margins_before_each_tree(lib, model, X, y_train_mean):
    """Margin before every tree (one output), from the library's staged predictions."""
    n_trees = {"xgboost": lambda: model.get_booster().num_boosted_rounds(),
               "lightgbm": lambda: model.booster_.num_trees(),
               "sklearn": lambda: model.n_estimators_}[lib]()
    if lib == "xgboost":
        booster = model.get_booster()
        first = _base_margin(booster, X, 1)[:, 0]
        later = [booster.predict(xgb.DMatrix(X), output_margin=True, iteration_range=(0, t))
                 for t in range(1, n_trees)]
    elif lib == "lightgbm":
        first = np.full(len(X), y_train_mean)  # boost_from_average: the label mean
        later = [model.booster_.predict(X, raw_score=True, num_iteration=t)
                 for t in range(1, n_trees)]
    else:
        first = model.init_.predict(X).ravel()
        later = [np.asarray(m).ravel() for m in model.staged_predict(X)][:-1]
    return [first] + later


UFI_BOOSTERS = [
    ("xgboost", lambda: xgb.XGBRegressor(n_estimators=6, max_depth=3, learning_rate=0.3,
                                         reg_lambda=0.0, min_child_weight=1)),
    ("lightgbm", lambda: lgb.LGBMRegressor(n_estimators=6, num_leaves=8, learning_rate=0.3,
                                           reg_lambda=0.0, min_child_samples=10,
                                           verbose=-1)),
    ("sklearn", lambda: GradientBoostingRegressor(n_estimators=6, max_depth=3,
                                                  learning_rate=0.3, random_state=0)),
]


@pytest.mark.parametrize("lib,make", UFI_BOOSTERS, ids=[u[0] for u in UFI_BOOSTERS])
def test_ufi_squared_error_equals_forest_formula_on_residuals_tree_by_tree(lib, make):
    """Squared error, lambda = 0, learning rate 0.3, several trees: boosting UFI is the
    sum over trees of Zhou-Hooker's regression UFI of tree t on the residuals at the
    margin before t (training rows in-sample, held-out rows held out). The node mean of
    the training residuals is value / learning_rate: this pins mu."""
    X, y = _data(n=700, kind="regression")
    Xt, yt, Xv, yv = X[:400], y[:400], X[400:], y[400:]
    model = make().fit(Xt, yt)
    res = treeimp.explain(model, Xv, yv, methods=("ufi",), random_state=0)
    structures = _tree_structures(lib, model)
    mt = _margins_before_each_tree(lib, model, Xt, yt.mean())
    mv = _margins_before_each_tree(lib, model, Xv, yt.mean())
    assert len(structures) == len(mt) == 6
    expected = np.zeros(X.shape[1])
    for (internal, membership), m_t, m_v in zip(structures, mt, mv):
        rt, rv = yt - m_t, yv - m_v
        in_t, in_v = membership(Xt), membership(Xv)

        def H(j, rt=rt, rv=rv, in_t=in_t, in_v=in_v):
            mu = rt[in_t[j]].mean()
            return rt[in_t[j]].var() + np.mean((rv[in_v[j]] - mu) ** 2)

        for m, f, lc, rc in internal:
            if not (in_v[lc].any() and in_v[rc].any()):
                continue
            w = {k: in_t[k].mean() for k in (m, lc, rc)}
            expected[f] += w[m] * H(m) - w[lc] * H(lc) - w[rc] * H(rc)
    np.testing.assert_allclose(res.table["ufi"].to_numpy(), expected, rtol=1e-5,
                               atol=1e-7 * np.abs(expected).max())


@pytest.mark.parametrize("lib", ["xgboost", "lightgbm"])
def test_naive_oob_is_the_held_out_newton_gain(lib):
    """Boosting naive_oob: the second-order loss decrease of each split computed from the
    held-out rows alone, (G_l^2/H_l + G_r^2/H_r - G_m^2/H_m) / (2 n'), g and h the
    logistic gradient and hessian at the margin before the tree; splits with a child
    that no held-out row reaches contribute 0."""
    X, y = _data(n=500, kind="binary")
    Xt, yt, Xv, yv = X[:300], y[:300], X[300:], y[300:]
    if lib == "xgboost":
        model = xgb.XGBClassifier(n_estimators=6, max_depth=4, learning_rate=0.3)
    else:
        model = lgb.LGBMClassifier(n_estimators=6, num_leaves=31, learning_rate=0.3,
                                   min_child_samples=2, min_child_weight=1e-5, verbose=-1)
    model.fit(Xt, yt)
    res = treeimp.explain(model, Xv, yv, methods=("naive_oob",), random_state=0)
    if lib == "xgboost":
        margins = _margins_before_each_tree(lib, model, Xv, None)
    else:  # binary LightGBM starts from the log-odds of the training labels
        p0 = yt.mean()
        margins = [np.full(len(yv), np.log(p0 / (1 - p0)))] + [
            model.booster_.predict(Xv, raw_score=True, num_iteration=t) for t in range(1, 6)]
    expected = np.zeros(X.shape[1])
    skipped = 0
    for (internal, membership), m in zip(_tree_structures(lib, model), margins):
        p = 1 / (1 + np.exp(-m))
        g, h = p - yv, p * (1 - p)
        inside = membership(Xv)
        G = {j: g[mask].sum() for j, mask in inside.items()}
        Hs = {j: h[mask].sum() for j, mask in inside.items()}
        for node, f, lc, rc in internal:
            if not (inside[lc].any() and inside[rc].any()):
                skipped += 1
                continue
            expected[f] += 0.5 * (G[lc] ** 2 / Hs[lc] + G[rc] ** 2 / Hs[rc]
                                  - G[node] ** 2 / Hs[node]) / len(yv)
    assert skipped > 0  # the skip rule is exercised
    np.testing.assert_allclose(res.table["naive_oob"].to_numpy(), expected, rtol=1e-5,
                               atol=1e-7 * np.abs(expected).max())


def test_dart_weights_scale_mdi_oob_but_not_the_fit_ufi_reads():
    """The documented DART choice: mdi_oob sees each tree as it enters the margin
    (weight_drop * value), ufi the tree's own fit value / learning_rate. On the same
    held-out statistics, doubling every weight doubles mdi_oob and leaves ufi alone."""
    import dataclasses

    from treeimp.measures.formulas import NodeSums as NodeStats
    from treeimp.measures.formulas import mdi_oob, ufi
    from treeimp.stats.drivers import staged_pass

    X, y = _data(kind="regression")
    m = xgb.XGBRegressor(booster="dart", n_estimators=10, max_depth=3, rate_drop=0.3,
                         skip_drop=0.0, random_state=0).fit(X[:250], y[:250])
    ens = treeimp.parse(m)
    n = 150
    arr, _ = staged_pass(ens, RowSource(X[250:], ens), y[250:], np.ones(n),
                         np.zeros(n, np.int32), 1, keep_margin=False)
    stats = NodeStats.from_array(arr, boosting=True)
    doubled = dataclasses.replace(ens, tree_scale=2.0 * ens.tree_scale)
    np.testing.assert_allclose(mdi_oob(doubled, stats), 2.0 * mdi_oob(ens, stats),
                               rtol=1e-12)
    np.testing.assert_allclose(ufi(doubled, stats, classification=False),
                               ufi(ens, stats, classification=False), rtol=1e-12)

"""Gradients, hessians, links and losses against the libraries' own definitions.

XGBoost and LightGBM: one boosting round with the built-in objective and one with a
custom objective returning our g, h (times the sample weights) must grow the same tree
(structure, thresholds, split gains, hessian sums, node values) from the same margin.
For objectives whose leaves the library re-fits afterwards (absolute error, quantile)
leaf values are left out; split gains still depend on every gradient. Ties (margin ==
label) are provoked on purpose where the libraries' sign conventions differ.
scikit-learn: the ``sklearn._loss`` objects' ``gradient_hessian`` at random margins, and
the leaves GradientBoosting / HistGradientBoosting grow from them.
"""

import json

import numpy as np
import pytest

from treeimp import Objective
from treeimp.model.losses import (
    SUPPORTED,
    check_target,
    default_link,
    grad_hess,
    grad_hess_array,
    link,
    loss,
    loss_spec,
)

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

N = 300
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 4))
W = RNG.uniform(0.5, 2.0, N)
Y_REG = 3 * X[:, 0] + RNG.normal(size=N)
Y_BIN = (X[:, 0] + RNG.normal(size=N) > 0.3).astype(float)
Y_CLS = np.digitize(X[:, 0] + 0.5 * RNG.normal(size=N), [-0.5, 0.5]).astype(float)
Y_CNT = RNG.poisson(np.exp(0.5 * X[:, 0])).astype(float)
Y_POS = RNG.gamma(2.0, np.exp(0.5 * X[:, 0]))
Y_FRAC = RNG.uniform(0, 1, N)
Y_INT = np.round(3 * X[:, 0] + RNG.normal(size=N))  # many exact ties with a margin of 1.0


def obj_(name, **params):
    """An Objective with its canonical link."""
    return Objective(name, params, link=default_link(name))


def custom_gh(objective, y, w):
    """(margin (n, K)) -> weighted g, h, as a library's custom objective returns them."""
    yt = check_target(objective, y)

    def gh(margin):
        g, h = grad_hess_array(objective, margin, yt)
        return g * w[:, None], h * w[:, None]

    return gh


def close(a, b, what, rtol=2e-5, atol=1e-7):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape, f"{what}: shapes {a.shape} vs {b.shape}"
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=what)


# --------------------------------------------------------------------------- XGBoost
def xgb_last_round(booster):
    model = json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]
    ptr = model["iteration_indptr"]
    return model["trees"][ptr[-2]:ptr[-1]]


def xgb_same_round(obj, params, y, objective, *, w=W, rounds=2, refit_leaves=False):
    y = np.asarray(y, np.float32).astype(np.float64)  # XGBoost keeps labels in float32
    p = {"objective": obj, "tree_method": "exact", "max_depth": 3, "eta": 0.5,
         "nthread": 1, **params}
    d = xgb.DMatrix(X, y, weight=w)
    start = xgb.train(p, d, rounds) if rounds else None
    builtin = xgb.train(p, d, 1, xgb_model=start)
    gh = custom_gh(objective, y, np.ones(N) if w is None else w)

    def obj_fn(predt, _):
        g, h = gh(predt.astype(np.float64).reshape(N, -1))
        return g.reshape(predt.shape), h.reshape(predt.shape)

    ours = xgb.train(p, d, 1, xgb_model=start.copy() if start else None, obj=obj_fn)
    a_trees, b_trees = xgb_last_round(builtin), xgb_last_round(ours)
    assert len(a_trees) == len(b_trees)
    for a, b in zip(a_trees, b_trees):
        assert a["left_children"] == b["left_children"], f"{obj}: tree structure differs"
        assert a["split_indices"] == b["split_indices"], f"{obj}: split features differ"
        leaf = np.array(a["left_children"]) < 0
        keep = ~leaf if refit_leaves else np.ones_like(leaf)
        for key in ("split_conditions", "base_weights"):
            close(np.array(a[key])[keep], np.array(b[key])[keep], f"{obj} {key}")
        close(a["loss_changes"], b["loss_changes"], f"{obj} gain", rtol=1e-4, atol=1e-5)
        close(a["sum_hessian"], b["sum_hessian"], f"{obj} sum_hessian")


XGB_CASES = [
    ("reg:squarederror", {}, Y_REG, obj_("squared_error")),
    ("reg:logistic", {}, Y_FRAC * Y_BIN, obj_("logistic", sigmoid=1.0, pos_weight=1.0)),
    ("binary:logistic", {"scale_pos_weight": 3.0}, Y_BIN,
     obj_("logistic", sigmoid=1.0, pos_weight=3.0)),
    ("binary:logitraw", {}, Y_BIN, obj_("logistic", sigmoid=1.0, pos_weight=1.0)),
    ("multi:softprob", {"num_class": 3}, Y_CLS, obj_("softmax", n_classes=3, hess_factor=2.0)),
    ("multi:softmax", {"num_class": 3}, Y_CLS, obj_("softmax", n_classes=3, hess_factor=2.0)),
    ("count:poisson", {}, Y_CNT, obj_("poisson", max_delta_step=0.7)),
    ("count:poisson", {"max_delta_step": 0.3}, Y_CNT, obj_("poisson", max_delta_step=0.3)),
    ("reg:gamma", {}, Y_POS, obj_("gamma")),
    ("reg:tweedie", {"tweedie_variance_power": 1.3}, Y_CNT, obj_("tweedie", variance_power=1.3)),
    ("reg:pseudohubererror", {"huber_slope": 2.0}, Y_REG, obj_("pseudo_huber", slope=2.0)),
    ("reg:pseudohubererror", {}, Y_REG, obj_("pseudo_huber", slope=1.0)),
]


@pytest.mark.parametrize("obj,params,y,objective", XGB_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(XGB_CASES)])
def test_xgboost_tree_identical_with_our_gradients(obj, params, y, objective):
    xgb_same_round(obj, params, y, objective)


@pytest.mark.skipif(tuple(int(v) for v in xgb.__version__.split(".")[:2]) >= (3, 4),
                    reason="XGBoost >= 3.4 fits these with a smoothed surrogate (see "
                    "tests/test_xgb_smoothed.py)")
@pytest.mark.parametrize("obj,params,objective", [
    ("reg:absoluteerror", {}, obj_("absolute_error")),
    ("reg:quantileerror", {"quantile_alpha": 0.3}, obj_("quantile", alpha=0.3)),
])
def test_xgboost_refit_objectives_with_ties(obj, params, objective):
    # base_score 1.0 equals 1 in 8 labels exactly: the gradient at a tie decides the splits
    assert np.sum(Y_INT == 1.0) > 20
    p = {"base_score": 1.0, **params}
    xgb_same_round(obj, p, Y_INT, objective, w=None, rounds=0, refit_leaves=True)
    xgb_same_round(obj, params, Y_REG, objective, refit_leaves=True)
    wrong = Objective(objective.name, {**objective.params, "tie_gradient": -0.3})
    with pytest.raises(AssertionError):
        xgb_same_round(obj, p, Y_INT, wrong, w=None, rounds=0, refit_leaves=True)


# --------------------------------------------------------------------------- LightGBM
LGB_BASE = {"num_leaves": 8, "learning_rate": 0.5, "min_data_in_leaf": 5, "verbose": -1,
            "num_threads": 1, "deterministic": True, "force_row_wise": True,
            "min_sum_hessian_in_leaf": 1e-12}


def lgb_nodes(node, out):
    if "split_index" in node:
        for key in ("split_feature", "threshold", "split_gain", "internal_value",
                    "internal_weight"):
            out.setdefault(key, []).append(node[key])
        lgb_nodes(node["left_child"], out)
        lgb_nodes(node["right_child"], out)
    else:
        for key in ("leaf_value", "leaf_weight"):
            out.setdefault(key, []).append(node.get(key, np.nan))
    return out


def lgb_same_round(obj, params, y, objective, *, w=W, lr=0.5, refit_leaves=False):
    K = int(params.get("num_class", 1))
    p = {"objective": obj, **LGB_BASE, "learning_rate": lr, **params}
    start = lgb.train(p, lgb.Dataset(X, y, weight=w), 2)
    m0 = start.predict(X, raw_score=True)
    # continue from m0 without boost_from_average in both runs
    p1 = {**p, "boost_from_average": False}
    builtin = lgb.train(p1, lgb.Dataset(X, y, weight=w, init_score=m0), 1)
    gh = custom_gh(objective, y, np.ones(N) if w is None else w)

    def obj_fn(preds, _):
        g, h = gh(np.asarray(preds, np.float64).reshape(N, -1))
        return (g, h) if K > 1 else (g[:, 0], h[:, 0])

    ours = lgb.train({**p1, "objective": obj_fn}, lgb.Dataset(X, y, weight=w, init_score=m0), 1)
    a_trees, b_trees = builtin.dump_model()["tree_info"], ours.dump_model()["tree_info"]
    assert len(a_trees) == len(b_trees) == K
    for ta, tb in zip(a_trees, b_trees):
        a, b = lgb_nodes(ta["tree_structure"], {}), lgb_nodes(tb["tree_structure"], {})
        assert a.get("split_feature") == b.get("split_feature"), f"{obj}: structure differs"
        assert len(a["leaf_value"]) == len(b["leaf_value"]), f"{obj}: structure differs"
        for key in a:
            if key == "split_feature" or (refit_leaves and key == "leaf_value"):
                continue
            tol = {"rtol": 1e-4, "atol": 1e-5} if key == "split_gain" else {}
            close(a[key], b[key], f"{obj} {key}", **tol)


N_POS, N_NEG = Y_BIN.sum(), N - Y_BIN.sum()
LGB_CASES = [
    ("regression", {}, Y_REG, obj_("squared_error")),
    ("huber", {"alpha": 1.5}, Y_REG, obj_("huber", delta=1.5)),
    ("binary", {"sigmoid": 0.7, "scale_pos_weight": 2.5}, Y_BIN,
     obj_("logistic", sigmoid=0.7, pos_weight=2.5)),
    # is_unbalance weights the smaller class by the count ratio
    ("binary", {"is_unbalance": True}, Y_BIN,
     obj_("logistic", sigmoid=1.0, pos_weight=N_NEG / N_POS)),
    ("binary", {"is_unbalance": True}, 1 - Y_BIN,
     obj_("logistic", sigmoid=1.0, pos_weight=1.0, neg_weight=N_NEG / N_POS)),
    ("multiclass", {"num_class": 3}, Y_CLS, obj_("softmax", n_classes=3, hess_factor=1.5)),
    ("multiclass", {"num_class": 4}, np.minimum(Y_CNT, 3),
     obj_("softmax", n_classes=4, hess_factor=4 / 3)),
    ("multiclassova", {"num_class": 3, "sigmoid": 0.8}, Y_CLS,
     obj_("ova_logistic", n_classes=3, sigmoid=0.8)),
    ("poisson", {}, Y_CNT, obj_("poisson", max_delta_step=0.7)),
    ("poisson", {"poisson_max_delta_step": 0.2}, Y_CNT, obj_("poisson", max_delta_step=0.2)),
    ("gamma", {}, Y_POS, obj_("gamma")),
    ("tweedie", {"tweedie_variance_power": 1.3}, Y_CNT, obj_("tweedie", variance_power=1.3)),
    ("cross_entropy", {}, Y_FRAC, obj_("cross_entropy")),
]


@pytest.mark.parametrize("obj,params,y,objective", LGB_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(LGB_CASES)])
def test_lightgbm_tree_identical_with_our_gradients(obj, params, y, objective):
    assert N_POS < N_NEG
    lgb_same_round(obj, params, y, objective)


@pytest.mark.parametrize("obj,params,objective", [
    ("regression_l1", {}, obj_("absolute_error")),
    ("quantile", {"alpha": 0.3}, obj_("quantile", alpha=0.3)),
])
def test_lightgbm_refit_objectives_with_ties(obj, params, objective):
    # learning rate 1: refitted leaves are residual quantiles, so many margins hit labels
    start = lgb.train({"objective": obj, **LGB_BASE, "learning_rate": 1.0, **params},
                      lgb.Dataset(X, Y_INT), 2)
    assert np.sum(start.predict(X, raw_score=True) == Y_INT) > 20
    lgb_same_round(obj, params, Y_INT, objective, w=None, lr=1.0, refit_leaves=True)
    lgb_same_round(obj, params, Y_REG, objective, refit_leaves=True)
    wrong = Objective(objective.name, {**objective.params, "tie_gradient": -0.3})
    with pytest.raises(AssertionError):
        lgb_same_round(obj, params, Y_INT, wrong, w=None, lr=1.0, refit_leaves=True)


@pytest.mark.parametrize("library,obj,params,y,wrong", [
    ("xgboost", "multi:softprob", {"num_class": 3}, Y_CLS,
     obj_("softmax", n_classes=3, hess_factor=1.0)),
    ("xgboost", "count:poisson", {}, Y_CNT, obj_("poisson", max_delta_step=0.0)),
    ("xgboost", "binary:logistic", {"scale_pos_weight": 3.0}, Y_BIN,
     obj_("logistic", sigmoid=1.0, pos_weight=1.0)),
    ("lightgbm", "multiclass", {"num_class": 3}, Y_CLS,
     obj_("softmax", n_classes=3, hess_factor=1.0)),
    ("lightgbm", "binary", {"sigmoid": 0.7}, Y_BIN, obj_("logistic", sigmoid=1.0, pos_weight=1.0)),
    ("lightgbm", "poisson", {}, Y_CNT, obj_("poisson", max_delta_step=0.0)),
])
def test_tree_comparison_detects_a_wrong_constant(library, obj, params, y, wrong):
    same_round = xgb_same_round if library == "xgboost" else lgb_same_round
    with pytest.raises(AssertionError):
        same_round(obj, params, y, wrong)


# --------------------------------------------------------------------------- scikit-learn
def sk_cases():
    from sklearn._loss import loss as L

    return [
        (L.HalfSquaredError(), obj_("squared_error"), Y_REG),
        (L.AbsoluteError(), obj_("absolute_error", tie_gradient=-1.0), Y_INT),
        (L.PinballLoss(quantile=0.3), obj_("quantile", alpha=0.3, tie_gradient=-0.3), Y_INT),
        (L.HalfPoissonLoss(), obj_("poisson", max_delta_step=0.0), Y_CNT),
        (L.HalfGammaLoss(), obj_("gamma"), Y_POS),
        (L.HalfTweedieLoss(power=1.3), obj_("tweedie", variance_power=1.3), Y_CNT),
        (L.HalfTweedieLoss(power=1.0), obj_("tweedie", variance_power=1.0), Y_CNT),
        (L.HalfBinomialLoss(), obj_("logistic", sigmoid=1.0, pos_weight=1.0), Y_BIN),
        (L.HalfBinomialLoss(), obj_("cross_entropy"), Y_FRAC),
        (L.ExponentialLoss(), obj_("exponential"), Y_BIN),
        (L.HalfMultinomialLoss(n_classes=3), obj_("softmax", n_classes=3, hess_factor=1.0), Y_CLS),
    ]


@pytest.mark.parametrize("i", range(11))
def test_sklearn_loss_gradient_hessian_and_loss(i):
    sk, objective, y = sk_cases()[i]
    K = int(objective.params.get("n_classes", 1))
    rng = np.random.default_rng(i)
    m = rng.normal(scale=1.5, size=(N, K))
    if objective.name in ("absolute_error", "quantile"):
        m[::3, 0] = y[::3]  # exact ties
    raw = np.ascontiguousarray(m if K > 1 else m[:, 0])
    g_sk, h_sk = sk.gradient_hessian(y_true=y, raw_prediction=raw)
    g, h = grad_hess_array(objective, m, check_target(objective, y))
    close(g, np.reshape(g_sk, g.shape), "gradient", rtol=1e-12, atol=1e-12)
    close(h, np.reshape(h_sk, h.shape), "hessian", rtol=1e-12, atol=1e-12)
    # loss: sklearn's loss plus its constant (zero at the optimum) where it has one
    want = sk.loss(y_true=y, raw_prediction=raw) + sk.constant_to_optimal_zero(y_true=y)
    if objective.name in ("logistic", "cross_entropy", "softmax", "exponential"):
        want = sk.loss(y_true=y, raw_prediction=raw)
    close(loss(objective, m, check_target(objective, y)), want, "loss", rtol=1e-10,
          atol=1e-10)
    # link: sklearn's inverse link (predict_proba for classifiers)
    pred = sk.predict_proba(raw) if hasattr(sk, "predict_proba") else sk.link.inverse(raw)
    ours = link(objective, m)
    if pred.ndim == 2 and K == 1:
        pred = pred[:, 1]
    close(ours.reshape(pred.shape), pred, "link", rtol=1e-12, atol=1e-15)


def leaf_newton_steps(leaf, g, h):
    """-sum g / sum h over the rows of every leaf, per row."""
    steps = np.empty(len(leaf))
    for lf in np.unique(leaf):
        rows = leaf == lf
        steps[rows] = -g[rows].sum() / h[rows].sum()
    return steps


@pytest.mark.parametrize("kind", ["binomial", "exponential", "multinomial"])
def test_sklearn_gradient_boosting_leaves_are_newton_steps(kind):
    from sklearn.ensemble import GradientBoostingClassifier

    y = Y_CLS if kind == "multinomial" else Y_BIN
    K = 3 if kind == "multinomial" else 1
    gb = GradientBoostingClassifier(
        loss="exponential" if kind == "exponential" else "log_loss", init="zero",
        n_estimators=1, max_depth=2, learning_rate=0.5, random_state=0).fit(X, y)
    # the multinomial line search multiplies the Newton step by (K-1)/K: hess_factor K/(K-1)
    objective = {"binomial": obj_("logistic", sigmoid=1.0, pos_weight=1.0),
                 "exponential": obj_("exponential"),
                 "multinomial": obj_("softmax", n_classes=3, hess_factor=3 / 2)}[kind]
    g, h = grad_hess_array(objective, np.zeros((N, K)), check_target(objective, y))
    for k in range(K):
        leaf = gb.estimators_[0, k].apply(X.astype(np.float32))
        close(gb.estimators_[0, k].tree_.value[leaf, 0, 0],
              leaf_newton_steps(leaf, g[:, k], h[:, k]), f"{kind} class {k} leaves", rtol=1e-9)
    # the link turns the margin into predict_proba
    proba = gb.predict_proba(X)
    pred = link(objective, gb.decision_function(X).reshape(N, K))
    close(pred if K > 1 else pred[:, 0], proba if K > 1 else proba[:, 1], "link")


@pytest.mark.parametrize("loss_name,objective,y", [
    ("squared_error", obj_("squared_error"), Y_REG),
    ("poisson", obj_("poisson", max_delta_step=0.0), Y_CNT),
    ("gamma", obj_("gamma"), Y_POS),
    ("log_loss", obj_("logistic", sigmoid=1.0, pos_weight=1.0), Y_BIN),
    ("log_loss", obj_("softmax", n_classes=3, hess_factor=1.0), Y_CLS),
])
def test_sklearn_hist_gradient_boosting_leaves_are_newton_steps(loss_name, objective, y):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

    cls = HistGradientBoostingClassifier if loss_name == "log_loss" else \
        HistGradientBoostingRegressor
    lr = 0.5
    est = cls(loss=loss_name, max_iter=1, max_depth=2, learning_rate=lr, early_stopping=False,
              l2_regularization=0.0, min_samples_leaf=5).fit(X, y)
    K = int(objective.params.get("n_classes", 1))
    base = np.asarray(est._baseline_prediction, float).reshape(1, -1)  # fitted attribute
    if loss_name == "log_loss":
        raw = est.decision_function(X).reshape(N, K)
    else:
        raw = est._loss.link.link(est.predict(X)).reshape(N, 1)
        close(link(objective, raw)[:, 0], est.predict(X), "link")
    margin = np.repeat(base, N, axis=0)
    g, h = grad_hess_array(objective, margin, check_target(objective, y))
    for k in range(K):
        tree_value = raw[:, k] - base[0, k]
        for v in np.unique(np.round(tree_value, 9)):
            rows = np.round(tree_value, 9) == v
            close(tree_value[rows][0], -lr * g[rows, k].sum() / h[rows, k].sum(),
                  f"HGB {loss_name} leaf", rtol=1e-5)


# --------------------------------------------------------------------------- links
XGB_LINKS = [
    ("reg:squarederror", {}, Y_REG, obj_("squared_error")),
    ("binary:logistic", {}, Y_BIN, obj_("logistic", sigmoid=1.0, pos_weight=1.0)),
    ("binary:logitraw", {}, Y_BIN,
     Objective("logistic", {"sigmoid": 1.0, "pos_weight": 1.0}, link="identity")),
    ("multi:softprob", {"num_class": 3}, Y_CLS, obj_("softmax", n_classes=3, hess_factor=2.0)),
    ("count:poisson", {}, Y_CNT, obj_("poisson", max_delta_step=0.7)),
    ("reg:gamma", {}, Y_POS, obj_("gamma")),
    ("reg:tweedie", {}, Y_CNT, obj_("tweedie", variance_power=1.5)),
]


@pytest.mark.parametrize("obj,params,y,objective", XGB_LINKS, ids=[c[0] for c in XGB_LINKS])
def test_link_matches_xgboost_predict(obj, params, y, objective):
    d = xgb.DMatrix(X, y)
    b = xgb.train({"objective": obj, "max_depth": 3, "nthread": 1, **params}, d, 3)
    margin = b.predict(d, output_margin=True).astype(np.float64).reshape(N, -1)
    close(link(objective, margin), b.predict(d).reshape(N, -1), obj, rtol=1e-5, atol=1e-7)


LGB_LINKS = [
    ("regression", {}, Y_REG, obj_("squared_error")),
    ("binary", {"sigmoid": 0.7}, Y_BIN, obj_("logistic", sigmoid=0.7, pos_weight=1.0)),
    ("multiclass", {"num_class": 3}, Y_CLS, obj_("softmax", n_classes=3, hess_factor=1.5)),
    ("multiclassova", {"num_class": 3, "sigmoid": 0.8}, Y_CLS,
     obj_("ova_logistic", n_classes=3, sigmoid=0.8)),
    ("poisson", {}, Y_CNT, obj_("poisson", max_delta_step=0.7)),
    ("gamma", {}, Y_POS, obj_("gamma")),
    ("tweedie", {}, Y_CNT, obj_("tweedie", variance_power=1.5)),
    ("cross_entropy", {}, Y_FRAC, obj_("cross_entropy")),
]


@pytest.mark.parametrize("obj,params,y,objective", LGB_LINKS, ids=[c[0] for c in LGB_LINKS])
def test_link_matches_lightgbm_predict(obj, params, y, objective):
    b = lgb.train({"objective": obj, **LGB_BASE, **params}, lgb.Dataset(X, y), 3)
    margin = b.predict(X, raw_score=True).reshape(N, -1)
    close(link(objective, margin), b.predict(X).reshape(N, -1), obj, rtol=1e-12, atol=1e-15)


# --------------------------------------------------------------------------- eval metrics
def test_loss_matches_library_metrics():
    """Mean loss == the library's evaluation metric (up to the documented y-only term)."""
    from scipy.special import gammaln

    def xgb_metric(obj, params, y, metric, objective):
        d = xgb.DMatrix(X, y)
        b = xgb.train({"objective": obj, "max_depth": 2, "nthread": 1, "eval_metric": metric,
                       **params}, d, 2)
        value = float(b.eval(d).split(":")[-1])
        m = b.predict(d, output_margin=True).astype(np.float64).reshape(N, -1)
        return value, loss(objective, m, check_target(objective, y)), y

    v, ours, _ = xgb_metric("binary:logistic", {}, Y_BIN, "logloss",
                            obj_("logistic", sigmoid=1.0, pos_weight=1.0))
    assert ours.mean() == pytest.approx(v, rel=1e-5)
    v, ours, _ = xgb_metric("multi:softprob", {"num_class": 3}, Y_CLS, "mlogloss",
                            obj_("softmax", n_classes=3, hess_factor=2.0))
    assert ours.mean() == pytest.approx(v, rel=1e-5)
    v, ours, _ = xgb_metric("reg:absoluteerror", {}, Y_REG, "mae", obj_("absolute_error"))
    assert ours.mean() == pytest.approx(v, rel=1e-5)
    v, ours, _ = xgb_metric("reg:squarederror", {}, Y_REG, "rmse", obj_("squared_error"))
    assert np.sqrt(2 * ours.mean()) == pytest.approx(v, rel=1e-5)
    v, ours, _ = xgb_metric("reg:pseudohubererror", {"huber_slope": 2.0}, Y_REG, "mphe",
                            obj_("pseudo_huber", slope=2.0))
    assert ours.mean() == pytest.approx(v, rel=1e-5)
    v, ours, y = xgb_metric("count:poisson", {}, Y_CNT, "poisson-nloglik",
                            obj_("poisson", max_delta_step=0.7))
    ylogy = np.where(y > 0, y * np.log(np.maximum(y, 1)), 0.0)
    assert (ours + gammaln(y + 1) - ylogy + y).mean() == pytest.approx(v, rel=1e-5)

    b = lgb.train({"objective": "binary", "sigmoid": 0.7, **LGB_BASE,
                   "metric": "binary_logloss"}, lgb.Dataset(X, Y_BIN), 2)
    m = b.predict(X, raw_score=True)[:, None]
    want = -np.mean(Y_BIN * np.log(b.predict(X)) + (1 - Y_BIN) * np.log(1 - b.predict(X)))
    got = loss(obj_("logistic", sigmoid=0.7, pos_weight=1.0), m, Y_BIN).mean()
    assert got == pytest.approx(want, rel=1e-10)


# --------------------------------------------------------------------------- internals
ALL = [
    obj_("squared_error"), obj_("absolute_error"), obj_("pseudo_huber", slope=0.7),
    obj_("huber", delta=0.8), obj_("quantile", alpha=0.2),
    obj_("logistic", sigmoid=0.7, pos_weight=2.0, neg_weight=1.5), obj_("cross_entropy"),
    obj_("softmax", n_classes=3, hess_factor=2.0), obj_("ova_logistic", n_classes=3, sigmoid=1.3,
                                                  pos_weight=2.0),
    obj_("poisson", max_delta_step=0.7), obj_("gamma"), obj_("tweedie", variance_power=1.4),
    obj_("tweedie", variance_power=1.0), obj_("exponential"),
    obj_("huber", delta=0.8, outer_hessian=0.0), obj_("expectile", alpha=0.3),
    obj_("log_cosh"), obj_("quantiles", alphas=(0.2, 0.7)),
    obj_("expectile_stack", alphas=(0.1, 0.5, 0.8)),
]
Y_FOR = {"expectile": Y_REG, "log_cosh": Y_REG, "quantiles": Y_REG, "expectile_stack": Y_REG,
         "squared_error": Y_REG, "absolute_error": Y_REG, "pseudo_huber": Y_REG,
         "huber": Y_REG, "quantile": Y_REG, "logistic": Y_BIN, "cross_entropy": Y_FRAC,
         "softmax": Y_CLS, "ova_logistic": Y_CLS, "poisson": Y_CNT, "gamma": Y_POS,
         "tweedie": Y_CNT, "exponential": Y_BIN}


def _outputs(objective):
    return int(objective.params.get("n_classes", len(objective.params.get("alphas", [0]))))


def test_every_supported_objective_is_covered():
    # tested in tests/test_survival_losses.py and tests/test_survival_cox.py
    elsewhere = {"squared_log_error", "fair", "mape", "cross_entropy_lambda", "aft", "cox"}
    assert {o.name for o in ALL} | elsewhere == set(SUPPORTED)


@pytest.mark.parametrize("objective", ALL, ids=[repr(o) for o in ALL])
def test_gradient_is_derivative_of_loss(objective):
    K = _outputs(objective)
    y = check_target(objective, Y_FOR[objective.name])
    m = np.random.default_rng(1).normal(size=(N, K))
    g, _ = grad_hess_array(objective, m, y)
    eps = 1e-6
    for k in range(K):
        up, dn = m.copy(), m.copy()
        up[:, k] += eps
        dn[:, k] -= eps
        fd = (loss(objective, up, y) - loss(objective, dn, y)) / (2 * eps)
        close(g[:, k], fd, f"{objective.name} column {k}", rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("objective", ALL, ids=[repr(o) for o in ALL])
def test_single_column_matches_row(objective):
    K = _outputs(objective)
    y = check_target(objective, Y_FOR[objective.name])
    m = np.random.default_rng(2).normal(size=(N, K))
    g, h = grad_hess_array(objective, m, y)
    code, params = loss_spec(objective, n_outputs=K)
    for i in range(0, N, 37):
        for k in range(K):
            assert grad_hess(code, params, m[i], k, y[i]) == pytest.approx((g[i, k], h[i, k]),
                                                                           rel=1e-12)


def test_hessian_is_derivative_of_gradient_without_library_factors():
    # with the library factors at their neutral values h == dg/dm (absolute/quantile: 1)
    for objective in [obj_("squared_error"), obj_("pseudo_huber", slope=0.7), obj_("gamma"),
                      obj_("logistic", sigmoid=0.7, pos_weight=2.0), obj_("cross_entropy"),
                      obj_("poisson", max_delta_step=0.0), obj_("tweedie", variance_power=1.4),
                      obj_("exponential"), obj_("softmax", n_classes=3, hess_factor=1.0),
                      obj_("expectile", alpha=0.3), obj_("log_cosh"),
                      obj_("huber", delta=0.8, outer_hessian=0.0),
                      obj_("expectile_stack", alphas=(0.3,))]:
        K = _outputs(objective)
        y = check_target(objective, Y_FOR[objective.name])
        m = np.random.default_rng(3).normal(size=(N, K))
        _, h = grad_hess_array(objective, m, y)
        for k in range(K):
            up, dn = m.copy(), m.copy()
            up[:, k] += 1e-6
            dn[:, k] -= 1e-6
            fd = (grad_hess_array(objective, up, y)[0][:, k]
                  - grad_hess_array(objective, dn, y)[0][:, k]) / 2e-6
            close(h[:, k], fd, objective.name, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize("objective,y,match", [
    (obj_("poisson", max_delta_step=0.7), [1.0, -1.0, 2.0, -3.0], "2 of 4 values negative"),
    (obj_("tweedie", variance_power=1.5), [1.0, -1.0], "1 of 2 values negative"),
    (obj_("gamma"), [1.0, 0.0, 2.0, -1.0], "2 of 4 values <= 0"),
    (obj_("cross_entropy"), [0.5, 1.5, -0.1], r"2 of 3 values outside \[0, 1\]"),
    (obj_("logistic", sigmoid=1.0, pos_weight=1.0), [0, 1, 2], r"outside \[0, 1\]"),
    (obj_("softmax", n_classes=3, hess_factor=2.0), [0, 1.5, 2], "1 of 3 values not integer"),
    (obj_("softmax", n_classes=3, hess_factor=2.0), [0, 3, 2, -1], "2 of 4 values outside"),
    (obj_("squared_error"), [1.0, np.nan, np.inf], "2 of 3 values NaN or inf"),
])
def test_check_target_errors(objective, y, match):
    with pytest.raises(ValueError, match=match):
        check_target(objective, np.asarray(y, dtype=float))


def test_check_target_classes():
    soft = obj_("softmax", n_classes=3, hess_factor=2.0)
    y = check_target(soft, np.array(["b", "c", "a", "b"]), classes=["a", "b", "c"])
    assert y.dtype == np.float64 and y.tolist() == [1, 2, 0, 1]
    with pytest.raises(ValueError, match="never saw"):
        check_target(soft, ["a", "d"], classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="needs 3 classes"):
        check_target(soft, ["a"], classes=["a", "b"])
    binary = obj_("logistic", sigmoid=1.0, pos_weight=1.0)
    assert check_target(binary, [-1, 1, 1], classes=[-1, 1]).tolist() == [0, 1, 1]
    with pytest.raises(TypeError, match="numeric"):
        check_target(binary, ["x", "y"])
    # regression objectives ignore classes, pandas input works
    pd = pytest.importorskip("pandas")
    assert check_target("squared_error", pd.Series([1.5, 2.0]), classes=None).tolist() == \
        [1.5, 2.0]


def test_objective_errors():
    with pytest.raises(ValueError, match="huber_quantile.*supported objectives: squared_error"):
        loss_spec(Objective("huber_quantile", {"alpha": 0.9}))
    with pytest.raises(ValueError, match="class_probability"):
        loss_spec(Objective("class_probability", {}, link="proba"))
    with pytest.raises(ValueError, match="'rank:pairwise'"):
        check_target("rank:pairwise", [1.0])
    with pytest.raises(ValueError, match="needs parameter 'hess_factor'"):
        loss_spec(obj_("softmax", n_classes=3))
    with pytest.raises(ValueError, match="unknown parameters"):
        loss_spec(obj_("poisson", max_delta_step=0.7, max_delta=1.0))
    with pytest.raises(ValueError, match="alpha must be in"):
        loss_spec(obj_("quantile", alpha=1.0))
    with pytest.raises(ValueError, match="needs 3 model outputs"):
        loss_spec(obj_("softmax", n_classes=3, hess_factor=2.0), n_outputs=1)
    with pytest.raises(ValueError, match="needs 1 model outputs"):
        loss_spec(obj_("logistic", sigmoid=1.0, pos_weight=1.0), n_outputs=2)
    # a regression objective on several targets (XGBoost num_target): one output each
    assert loss_spec("gamma", n_outputs=2)[0] == loss_spec("gamma")[0]
    with pytest.raises(ValueError, match="unknown link"):
        link(Objective("squared_error", {}, link="probit"), np.zeros(3))
    # forests' probabilities pass through
    assert link(Objective("class_probability", {}, link="proba"), np.eye(2)).tolist() == \
        [[1, 0], [0, 1]]


def test_several_regression_targets_loss_and_targets():
    """A regression objective on K targets: y has one column per target, the loss is the
    sum over targets of the one-target loss, and a classification objective refuses
    several targets."""
    rng = np.random.default_rng(0)
    M, Y = rng.normal(size=(6, 3)), rng.gamma(2.0, size=(6, 3))
    got = loss("gamma", M, check_target("gamma", Y, n_targets=3))
    expected = sum(loss("gamma", M[:, k], Y[:, k]) for k in range(3))
    np.testing.assert_allclose(got, expected, rtol=1e-15)
    with pytest.raises(ValueError, match="<= 0"):
        check_target("gamma", -Y, n_targets=3)
    with pytest.raises(ValueError, match=r"must have shape \(n_rows, 3\), got \(6,\)"):
        check_target("gamma", Y[:, 0], n_targets=3)
    with pytest.raises(ValueError, match="one target per row, not 2"):
        check_target(obj_("logistic", sigmoid=1.0, pos_weight=1.0), Y[:, :2], n_targets=2)
    with pytest.raises(ValueError, match="one output per target"):
        loss("gamma", M, Y[:, :2])


def test_sigmoid_link_equals_the_two_branch_formula_bitwise():
    """The sigmoid link, computed without masks, is bit for bit 1 / (1 + e^-z) for
    z >= 0 and e^z / (1 + e^z) below, each branch evaluated on its own rows, including
    -0.0, huge margins (0 and 1 exactly), subnormal and infinite ones."""
    rng = np.random.default_rng(3)
    z = np.concatenate([rng.normal(scale=4.0, size=20_000),
                        [0.0, -0.0, 1e-310, -1e-310, 36.0, -36.0, 745.0, -745.0, 800.0,
                         -800.0, np.inf, -np.inf]])
    expected = np.empty_like(z)
    pos = z >= 0
    expected[pos] = 1.0 / (1.0 + np.exp(-z[pos]))
    expected[~pos] = np.exp(z[~pos]) / (1.0 + np.exp(z[~pos]))
    got = link(obj_("logistic", sigmoid=1.0), z)
    assert got.tobytes() == expected.tobytes()
    assert got[-2] == 1.0 and got[-1] == 0.0

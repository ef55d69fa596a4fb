"""Survival and further regression objectives against the libraries' built-in ones.

As in ``tests/test_losses.py``: one boosting round with the built-in objective and one
with a custom objective returning treeimp's g, h must grow the same tree from the same
margin (XGBoost reg:squaredlogerror and survival:aft with its three distributions;
LightGBM fair, mape (leaves refitted: values left out) and cross_entropy_lambda), and
the link must turn the library's raw margin into its prediction. A wrong constant must
make the comparison fail.
"""


import numpy as np
import pytest

from tests.test_losses import (
    LGB_BASE,
    Y_FRAC,
    Y_POS,
    Y_REG,
    N,
    W,
    X,
    close,
    lgb_same_round,
    obj_,
    xgb_last_round,
    xgb_same_round,
)
from treeimp import Objective
from treeimp.model.losses import check_target, grad_hess_array, link, loss

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

RNG = np.random.default_rng(7)
T = np.exp(0.5 * X[:, 0] + 0.3 * RNG.normal(size=N)).astype(np.float32).astype(np.float64)
# exact times, right-censored, interval-censored and left-censored rows
KIND = RNG.integers(0, 4, N)
LOWER = np.where(KIND == 3, 0.0, np.where(KIND == 1, 0.7 * T, T))
UPPER = np.where(KIND == 1, np.inf, np.where(KIND == 2, 1.6 * T, np.where(KIND == 3, T, T)))
LOWER = np.where(KIND == 2, 0.5 * T, LOWER)
Y_AFT = np.column_stack([LOWER, UPPER]).astype(np.float32).astype(np.float64)


def aft_same_round(params, objective, *, w=W, rounds=2):
    """xgb_same_round for survival:aft (labels as bounds)."""
    p = {"objective": "survival:aft", "tree_method": "exact", "max_depth": 3, "eta": 0.5,
         "nthread": 1, **params}
    d = xgb.DMatrix(X, weight=w)
    d.set_float_info("label_lower_bound", Y_AFT[:, 0])
    d.set_float_info("label_upper_bound", Y_AFT[:, 1])
    start = xgb.train(p, d, rounds)
    builtin = xgb.train(p, d, 1, xgb_model=start)
    yt = check_target(objective, Y_AFT, n_targets=2)

    def obj_fn(predt, _):
        g, h = grad_hess_array(objective, predt.astype(np.float64).reshape(N, 1), yt)
        return (g[:, 0] * w).astype(np.float32), (h[:, 0] * w).astype(np.float32)

    ours = xgb.train(p, d, 1, xgb_model=start.copy(), obj=obj_fn)
    for a, b in zip(xgb_last_round(builtin), xgb_last_round(ours)):
        assert a["left_children"] == b["left_children"], "survival:aft: structure differs"
        assert a["split_indices"] == b["split_indices"], "survival:aft: split features differ"
        for key in ("split_conditions", "base_weights", "sum_hessian"):
            close(a[key], b[key], f"survival:aft {key}", rtol=1e-4, atol=1e-6)
        close(a["loss_changes"], b["loss_changes"], "survival:aft gain", rtol=1e-3, atol=1e-4)
    return builtin, d


AFT_CASES = [("normal", 1.0), ("normal", 0.6), ("logistic", 1.0), ("logistic", 1.3),
             ("extreme", 1.0), ("extreme", 0.8)]


@pytest.mark.parametrize("dist,sigma", AFT_CASES)
def test_xgboost_aft_tree_identical_with_our_gradients(dist, sigma):
    objective = obj_("aft", distribution=["normal", "logistic", "extreme"].index(dist),
                     sigma=sigma)
    params = {"aft_loss_distribution": dist, "aft_loss_distribution_scale": sigma}
    booster, d = aft_same_round(params, objective)
    # the link and the margin: predict is exp(margin); treeimp's normal form predicts the
    # library's margin
    from treeimp.parsers.xgb import parse_xgboost

    ens = parse_xgboost(booster)
    # XGBoost stores the scale as a float32
    assert ens.objective.name == "aft" and ens.objective.params == {
        "distribution": float(objective.params["distribution"]),
        "sigma": float(np.float32(sigma))}
    margin = booster.predict(d, output_margin=True).astype(np.float64)
    close(ens.predict_raw(X)[:, 0], margin, "aft margin", rtol=1e-6, atol=1e-6)
    close(link(ens.objective, margin), booster.predict(d), "aft link", rtol=1e-6)
    # the loss is XGBoost's aft-nloglik (its mean over rows, unweighted here); XGBoost's
    # metric evaluates at scale 1 whatever aft_loss_distribution_scale is (xgboost 3.2)
    if sigma == 1.0:
        d.set_weight(np.ones(N))
        metric = float(booster.eval(d).split(":")[-1])
        close(np.mean(loss(ens.objective, margin, Y_AFT)), metric, "aft-nloglik", rtol=1e-5)


@pytest.mark.parametrize("wrong", [{"sigma": 0.9}, {"distribution": 1}])
def test_aft_comparison_detects_a_wrong_constant(wrong):
    objective = obj_("aft", **{"distribution": 0, "sigma": 1.0, **wrong})
    with pytest.raises(AssertionError):
        aft_same_round({"aft_loss_distribution": "normal"}, objective)


def test_xgboost_squared_log_error():
    objective = obj_("squared_log_error")
    xgb_same_round("reg:squaredlogerror", {}, Y_POS, objective)
    # margins below -1 + 1e-6 are floored and the hessian at 1e-6, as XGBoost does
    g, h = grad_hess_array(objective, [-3.0, 40.0], [0.5, 0.0], col=0)
    p = -1.0 + float(np.float32(1e-6))
    close(g, [(np.log1p(p) - np.log1p(0.5)) / (p + 1), np.log1p(40.0) / 41.0], "sle g")
    assert h[1] == pytest.approx(float(np.float32(1e-6)))
    with pytest.raises(AssertionError):
        xgb_same_round("reg:squaredlogerror", {}, Y_POS, obj_("gamma"))


def test_lightgbm_fair_mape_xentlambda():
    lgb_same_round("fair", {"fair_c": 0.7}, Y_REG, obj_("fair", c=0.7))
    lgb_same_round("fair", {}, Y_REG, obj_("fair", c=1.0))
    y_mape = Y_REG / 2.0  # |y| < 1 and > 1: LightGBM's weights 1 / max(1, |y|)
    assert np.mean(np.abs(y_mape) < 1) > 0.1
    lgb_same_round("mape", {}, y_mape, obj_("mape"), refit_leaves=True)
    lgb_same_round("cross_entropy_lambda", {}, Y_FRAC, obj_("cross_entropy_lambda"), w=None)
    with pytest.raises(AssertionError):
        lgb_same_round("fair", {"fair_c": 0.7}, Y_REG, obj_("fair", c=1.0))
    with pytest.raises(AssertionError):
        lgb_same_round("mape", {}, y_mape, obj_("absolute_error"), refit_leaves=True)


@pytest.mark.parametrize("obj,params,y,name", [
    ("fair", {"fair_c": 0.5}, Y_REG, "fair"),
    ("mape", {}, Y_REG / 2.0, "mape"),
    ("cross_entropy_lambda", {}, Y_FRAC, "cross_entropy_lambda"),
])
def test_lightgbm_parse_link_and_margin(obj, params, y, name):
    from treeimp.parsers.lgbm import parse_lightgbm

    b = lgb.train({"objective": obj, **LGB_BASE, **params}, lgb.Dataset(X, y), 3)
    ens = parse_lightgbm(b)
    assert ens.objective.name == name
    margin = b.predict(X, raw_score=True)
    close(ens.predict_raw(X)[:, 0], margin, f"{obj} margin", rtol=1e-12, atol=1e-12)
    close(link(ens.objective, margin), b.predict(X), f"{obj} link", rtol=1e-12, atol=1e-15)


def test_xgboost_parse_squared_log_error():
    from treeimp.parsers.xgb import parse_xgboost

    d = xgb.DMatrix(X, Y_POS)
    b = xgb.train({"objective": "reg:squaredlogerror", "max_depth": 3, "nthread": 1}, d, 3)
    ens = parse_xgboost(b)
    assert ens.objective.name == "squared_log_error"
    close(ens.predict_raw(X)[:, 0], b.predict(d, output_margin=True), "sle margin",
          rtol=1e-6, atol=1e-6)


def test_bad_survival_and_regression_labels_are_rejected():
    aft = Objective("aft", {"distribution": 0, "sigma": 1.0})
    good = np.array([[1.0, 1.0], [2.0, np.inf], [0.0, 3.0], [1.0, 2.0]])
    assert check_target(aft, good).shape == (4, 2)
    for bad, what in [([[-1.0, 2.0]], "negative lower"), ([[3.0, 2.0]], "lower bound >"),
                      ([[np.nan, 2.0]], "NaN"), ([[0.0, 0.0]], "upper bound <= 0"),
                      ([[np.inf, np.inf]], "infinite lower"), ([[1.0, np.nan]], "NaN")]:
        with pytest.raises(ValueError, match=what):
            check_target(aft, np.array(bad))
    with pytest.raises(ValueError, match=r"shape \(n_rows, 2\)"):
        check_target(aft, np.ones(4))
    with pytest.raises(ValueError, match="<= -1"):
        check_target(obj_("squared_log_error"), [0.5, -1.0])
    with pytest.raises(ValueError, match="outside"):
        check_target(obj_("cross_entropy_lambda"), [0.5, 1.5])
    with pytest.raises(ValueError, match="c must be > 0"):
        check_target(Objective("fair", {"c": 0.0}), [1.0])
    with pytest.raises(ValueError, match="sigma must be > 0"):
        check_target(Objective("aft", {"distribution": 0, "sigma": -1.0}), good)
    with pytest.raises(ValueError, match="distribution must be"):
        check_target(Objective("aft", {"distribution": 3, "sigma": 1.0}), good)


DERIV_CASES = [
    (obj_("squared_log_error"), Y_POS, (-0.9, 3.0)),
    (obj_("fair", c=0.7), Y_REG, (-5.0, 5.0)),
    (obj_("mape"), Y_REG / 2.0, (-5.0, 5.0)),
    (obj_("cross_entropy_lambda"), Y_FRAC, (-4.0, 4.0)),
    *[(obj_("aft", distribution=k, sigma=s), Y_AFT, (-1.5, 1.5))
      for k, s in ((0, 1.0), (1, 0.7), (2, 1.3))],
]


@pytest.mark.parametrize("objective,y,span", DERIV_CASES,
                         ids=[repr(c[0]) for c in DERIV_CASES])
def test_gradient_and_hessian_are_derivatives(objective, y, span):
    """g = d loss / dm everywhere (no clipping in range), h = dg / dm (mape: 1, its
    gradient is piecewise constant; squared_log_error away from its hessian floor)."""
    yt = check_target(objective, y, n_targets=2 if objective.name == "aft" else 1)
    m = np.random.default_rng(1).uniform(*span, size=(N, 1))
    g, h = grad_hess_array(objective, m, yt)
    eps = 1e-6
    fd = (loss(objective, m + eps, yt) - loss(objective, m - eps, yt)) / (2 * eps)
    keep = np.abs(g[:, 0]) < 15.0
    if objective.name == "mape":
        keep &= np.abs(m[:, 0] - yt) > 1e-4
    close(g[keep, 0], fd[keep], f"{objective.name} g", rtol=1e-5, atol=1e-6)
    if objective.name == "mape":
        assert np.all(h == 1.0)
        return
    fd_h = (grad_hess_array(objective, m + eps, yt)[0] - grad_hess_array(objective, m - eps,
                                                                          yt)[0]) / (2 * eps)
    keep &= (h[:, 0] > 1e-6 + 1e-9) & (h[:, 0] < 15.0)
    assert keep.mean() > 0.5
    close(h[keep, 0], fd_h[keep, 0], f"{objective.name} h", rtol=1e-4, atol=1e-6)


def censored_design(rng, n):
    """Survival times driven by x0 alone, right-censored by independent exponential
    times; noise: a binary, a 4-level and a continuous (high-cardinality) feature."""
    x0 = rng.normal(size=n)
    X_ = np.column_stack([x0, rng.integers(0, 2, n), rng.integers(0, 4, n), rng.normal(size=n)])
    t = np.exp(0.8 * x0 + 0.5 * rng.normal(size=n))
    c = rng.exponential(2.0, n)
    return X_, np.column_stack([np.minimum(t, c), np.where(t <= c, t, np.inf)])


def test_aft_held_out_importance_on_a_censored_design():
    import treeimp

    rng = np.random.default_rng(0)
    Xt, Yt = censored_design(rng, 1000)
    Xv, Yv = censored_design(rng, 1000)
    assert 0.2 < np.mean(np.isinf(Yv[:, 1])) < 0.6  # censored share
    d = xgb.DMatrix(Xt)
    d.set_float_info("label_lower_bound", Yt[:, 0])
    d.set_float_info("label_upper_bound", Yt[:, 1])
    b = xgb.train({"objective": "survival:aft", "aft_loss_distribution": "logistic",
                   "max_depth": 6, "eta": 0.3, "min_child_weight": 0, "nthread": 1}, d, 40)
    gain = b.get_score(importance_type="total_gain")
    # in-sample gain ranks the continuous noise second, above the other noise
    assert sorted(gain, key=gain.get, reverse=True)[:2] == ["f0", "f3"]
    res = treeimp.explain(b, Xv, Yv, methods=["mdi_oob"], random_state=0)
    assert res.ranking("mdi_oob")[0] == "x0"
    assert res.select("mdi_oob", alpha=0.05) == ["x0"]
    assert (res.pvalues["mdi_oob"].drop("x0") > 0.05).all()
    with pytest.raises(ValueError, match=r"shape \(n_rows, 2\)"):
        treeimp.explain(b, Xv, Yv[:, 0], methods=["mdi_oob"])
    swapped = np.column_stack([Yv[:, 0] + 1.0, Yv[:, 0]])
    with pytest.raises(ValueError, match="lower bound > upper bound"):
        treeimp.explain(b, Xv, swapped, methods=["mdi_oob"])
    with pytest.raises(ValueError, match="not defined for objective 'aft'"):
        treeimp.explain(b, Xv, Yv, methods=["shap_oob"])

"""XGBoost's quantile, expectile and absolute-error objectives, per version.

* ``reg:expectileerror`` (XGBoost >= 3.3, one output per ``expectile_alpha``,
  non-crossing): "expectile_stack".
* ``reg:quantileerror`` (one output per ``quantile_alpha``) and ``reg:absoluteerror``:
  sign gradients with refitted leaves before 3.4 ("quantile" / "quantiles" /
  "absolute_error"); since 3.4 a smoothed surrogate scaled by all training residuals
  ("smoothed_quantile" / "smoothed_absolute_error": their gradients are checked in
  ``tests/test_xgb_smoothed.py``; refused where the rows come in chunks).

Truths: XGBoost's own margins, ``pred_contribs`` and predictions, and for the gradients
one boosting round grown by XGBoost's built-in objective against one grown from the
g, h of the objective treeimp parsed from the model (same structure, split gains,
hessian sums, node values; leaf values too where XGBoost does not refit them).
"""

import json
import warnings

import numpy as np
import pytest

import treeimp
from treeimp.model.losses import check_target, grad_hess_array, link

xgb = pytest.importorskip("xgboost")
VERSION = tuple(int(x) for x in xgb.__version__.split(".")[:2])
needs_expectile = pytest.mark.skipif(VERSION < (3, 3), reason="reg:expectileerror is new "
                                     f"in XGBoost 3.3 (installed {xgb.__version__})")
SMOOTHED = VERSION >= (3, 4)

N = 300
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 4))
W = RNG.uniform(0.5, 2.0, N)
Y = (3 * X[:, 0] + RNG.normal(size=N)).astype(np.float32).astype(np.float64)
Y_INT = np.round(Y)  # ties with integer margins

CASES = [
    ("reg:quantileerror", {"quantile_alpha": 0.3}),
    ("reg:quantileerror", {"quantile_alpha": [0.1, 0.5, 0.9]}),
    ("reg:absoluteerror", {}),
    pytest.param("reg:expectileerror", {"expectile_alpha": 0.3}, marks=needs_expectile),
    pytest.param("reg:expectileerror", {"expectile_alpha": [0.2, 0.5, 0.8]},
                 marks=needs_expectile),
]
IDS = ["quantile", "quantiles", "absolute", "expectile", "expectiles"]


def _params(obj, extra):
    return {"objective": obj, "tree_method": "exact", "max_depth": 3, "eta": 0.5,
            "nthread": 1, "seed": 0, **extra}


def _trees(booster):
    return json.loads(booster.save_raw("json"))["learner"]["gradient_booster"]["model"]["trees"]


def _close(a, b, what, rtol=2e-5, atol=1e-6):
    np.testing.assert_allclose(np.asarray(a, float), np.asarray(b, float), rtol=rtol,
                               atol=atol, err_msg=what)


def _same_round(obj, extra, y, w, rounds, objective=None):
    """One round by XGBoost's objective and one from the g, h of ``objective`` (default:
    the one parsed from the model)."""
    p = _params(obj, extra)
    d = xgb.DMatrix(X, y, weight=w)
    start = xgb.train(p, d, rounds)
    if objective is None:
        objective = treeimp.parse(start if rounds else xgb.train(p, d, 1)).objective
    builtin = xgb.train(p, d, 1, xgb_model=start)
    yt = check_target(objective, y)
    wt = np.ones(N) if w is None else w

    def custom(predt, _):
        g, h = grad_hess_array(objective, predt.astype(np.float64).reshape(N, -1), yt)
        return (g * wt[:, None]).reshape(predt.shape), (h * wt[:, None]).reshape(predt.shape)

    ours = xgb.train(p, d, 1, xgb_model=start.copy(), obj=custom)
    refit = objective.name in ("quantile", "quantiles", "absolute_error")
    n_new = len(_trees(builtin)) - len(_trees(start))
    for a, b in zip(_trees(builtin)[-n_new:], _trees(ours)[-n_new:]):
        assert a["left_children"] == b["left_children"], f"{obj}: structure differs"
        assert a["split_indices"] == b["split_indices"], f"{obj}: split features differ"
        leaf = np.array(a["left_children"]) < 0
        keep = ~leaf if refit else np.ones_like(leaf)
        for key in ("split_conditions", "base_weights"):
            _close(np.array(a[key])[keep], np.array(b[key])[keep], f"{obj} {key}")
        _close(a["loss_changes"], b["loss_changes"], f"{obj} gain", rtol=1e-4, atol=1e-4)
        _close(a["sum_hessian"], b["sum_hessian"], f"{obj} sum_hessian")
    return objective


@pytest.mark.parametrize("obj,extra", CASES, ids=IDS)
def test_gradients_are_xgboosts(obj, extra):
    if SMOOTHED and obj != "reg:expectileerror":
        objective = treeimp.parse(xgb.train(_params(obj, extra), xgb.DMatrix(X, Y), 1))
        assert objective.objective.name.startswith("smoothed_")
        pytest.skip("XGBoost >= 3.4: smoothed gradients (tests/test_xgb_smoothed.py)")
    objective = _same_round(obj, extra, Y, W, rounds=2)
    # a margin equal to the label: the gradient's sign convention at a tie decides splits
    ties = {"base_score": 1.0} if obj != "reg:expectileerror" else {}
    _same_round(obj, {**extra, **ties}, Y_INT, None, rounds=0 if ties else 2)
    if obj == "reg:expectileerror":
        assert objective.name == "expectile_stack"
    else:
        levels = np.atleast_1d(extra.get("quantile_alpha", [0.5]))
        want = ("absolute_error" if obj == "reg:absoluteerror"
                else "quantile" if levels.size == 1 else "quantiles")
        assert objective.name == want


@needs_expectile
def test_wrong_expectile_factor_is_detected():
    """The round comparison can fail: CatBoost's expectile (g = 2 a d) grows other trees."""
    from treeimp import Objective

    p = _params("reg:expectileerror", {"expectile_alpha": 0.3, "lambda": 5.0})
    d = xgb.DMatrix(X, Y)
    a = xgb.train(p, d, 1)
    wrong = Objective("expectile", {"alpha": 0.3})

    def custom(predt, _):
        g, h = grad_hess_array(wrong, predt.astype(np.float64), Y)
        return g[:, 0], h[:, 0]

    b = xgb.train(p, d, 1, obj=custom)
    va, vb = np.array(_trees(a)[0]["base_weights"]), np.array(_trees(b)[0]["base_weights"])
    assert va.shape != vb.shape or not np.allclose(va, vb, rtol=1e-4)


def _model(obj, extra, rounds=8):
    Xd = np.c_[X, RNG.normal(size=(N, 2))]
    p = {**_params(obj, extra), "tree_method": "hist", "eta": 0.3}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xgb.train(p, xgb.DMatrix(Xd[:200], Y[:200]), rounds), Xd[200:], Y[200:]


@pytest.mark.parametrize("obj,extra", CASES, ids=IDS)
def test_margin_prediction_and_contributions(obj, extra):
    booster, Xv, _ = _model(obj, extra)
    ens = treeimp.parse(booster)
    dm = xgb.DMatrix(Xv)
    margin = booster.predict(dm, output_margin=True).reshape(len(Xv), -1)
    assert ens.n_outputs == margin.shape[1]
    raw = ens.predict_raw(Xv)
    _close(raw, margin, "margin", rtol=1e-6, atol=1e-6 * max(1, np.abs(margin).max()))
    # the predictions: expectiles non-crossing, quantiles sorted per row since 3.4
    pred = booster.predict(dm).reshape(len(Xv), -1)
    _close(link(ens.objective, raw), pred, "prediction", rtol=1e-5, atol=1e-5)
    got = treeimp.contributions(booster, Xv)
    want = booster.predict(dm, pred_contribs=True)
    want = want.reshape(len(Xv), ens.n_outputs, -1).transpose(0, 2, 1)  # (n, F + 1, K)
    values = np.asarray(got.values).reshape(len(Xv), -1, ens.n_outputs)
    _close(values, want[:, :-1], "contributions", rtol=1e-5, atol=1e-5)
    _close(np.asarray(got.base_values).reshape(len(Xv), -1), want[:, -1], "base",
           rtol=1e-5, atol=1e-5)


def test_crossing_quantile_predictions():
    """XGBoost >= 3.4 sorts each row's predicted quantiles, older versions do not; rows
    whose margins cross tell them apart."""
    rng = np.random.default_rng(1)
    Xs, ys = rng.normal(size=(60, 3)), rng.normal(size=60)
    booster = xgb.train({"objective": "reg:quantileerror", "quantile_alpha": [0.45, 0.5, 0.55],
                         "max_depth": 4, "eta": 1.0, "min_child_weight": 0, "lambda": 0},
                        xgb.DMatrix(Xs, ys), 10)
    rows = 2 * rng.normal(size=(300, 3))
    ens = treeimp.parse(booster)
    raw = ens.predict_raw(rows)
    assert np.any(np.diff(raw, axis=1) < 0)
    _close(link(ens.objective, raw), booster.predict(xgb.DMatrix(rows)), "prediction",
           rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("obj,extra", CASES, ids=IDS)
def test_explain_finite_and_informative_feature_first(obj, extra):
    booster, Xv, yv = _model(obj, extra)
    res = treeimp.explain(booster, Xv, yv, methods=("mdi_oob", "ufi"), random_state=0)
    for method in ("mdi_oob", "ufi"):
        assert np.isfinite(res.table[method]).all()
        assert res.ranking(method)[0] == res.feature_names[0]


@pytest.mark.skipif(not SMOOTHED, reason="XGBoost < 3.4 fits sign gradients")
@pytest.mark.parametrize("obj,extra,sign", [
    ("reg:absoluteerror", {}, ("absolute_error", {})),
    ("reg:quantileerror", {"quantile_alpha": 0.3}, ("quantile", {"alpha": 0.3})),
])
def test_sign_gradients_no_longer_grow_xgboosts_trees(obj, extra, sign):
    """Why XGBoost >= 3.4's absolute error / quantile models are refused: the sign
    gradients (treeimp's until now, XGBoost's before 3.4) grow other trees."""
    from treeimp import Objective

    with pytest.raises(AssertionError):
        _same_round(obj, extra, Y, W, rounds=2, objective=Objective(*sign))


@pytest.mark.skipif(not SMOOTHED, reason="XGBoost < 3.4 fits sign gradients")
@pytest.mark.parametrize("obj,extra", CASES[:3], ids=IDS[:3])
def test_smoothed_objectives_refused_on_chunks(obj, extra):
    """Every round's gradient scale is a statistic of all the evaluation rows: refused
    where they come in chunks (an iterable, Explainer.accumulate, Dask), computed in one
    call on in-memory rows."""
    booster, Xv, yv = _model(obj, extra)
    why = "a statistic of all the evaluation rows at once"
    with pytest.raises(ValueError, match=why):
        treeimp.explain(booster, iter([(Xv[:50], yv[:50]), (Xv[50:], yv[50:])]),
                        methods=("mdi_oob",))
    ex = treeimp.Explainer(booster)
    with pytest.raises(ValueError, match=why):
        ex.accumulate(Xv[:50], yv[:50], random_state=0)
    da = pytest.importorskip("dask.array")
    with pytest.raises(ValueError, match=why):
        ex.explain(da.from_array(Xv, chunks=50), da.from_array(yv, chunks=50),
                   methods=("mdi_oob",))
    res = ex.explain(Xv, yv, methods=("mdi_oob",), random_state=0)
    assert np.isfinite(res.table["mdi_oob"]).all()

"""CatBoost's survival losses Cox and SurvivalAft: derivatives checked against CatBoost.

A tree grown with leaf_estimation_method Newton, one leaf-estimation iteration and no
bootstrap has leaf values lr (-sum g) / (sum h + l2_leaf_reg) over the training rows in
the leaf at that round's margins (Gradient: lr (-sum g) / (rows + l2_leaf_reg); unit
weights, so CatBoost's l2 scaling by the mean weight is 1; lr is the float32 CatBoost
keeps). treeimp's staged pass on the training rows gives S = -sum g and H = sum h of
every leaf: both formulas must reproduce every leaf of every tree. Each check is shown
able to fail: Cox with XGBoost's Breslow ties, SurvivalAft with the exact log of the
times in place of CatBoost's FastLogf.

The installed CatBoost decides what is checked (CI's oldest leg runs 1.2): up to 1.2.3
Cox ties are refused (an unstable sort) and the untied leaves are checked, SurvivalAft
Normal takes the erfc approximation; 1.2.5's Cox is refused (parsers/catboost.py).
"""

import numpy as np
import pytest

from treeimp.inputs.rows import RowSource
from treeimp.kernels.cox import cox_grad_hess_table, cox_sequential_grad_hess_table
from treeimp.kernels.gradients import fast_logf as fast_logf_kernel
from treeimp.model.ensemble import Objective
from treeimp.model.losses import check_target, fast_logf, grad_hess_array
from treeimp.stats.drivers import staged_pass

catboost = pytest.importorskip("catboost")
CB = tuple(int(p) for p in catboost.__version__.split(".")[:3])
OLD = CB < (1, 2, 5)  # Cox ties refused, SurvivalAft Normal's erfc approximation

N = 300
RNG = np.random.default_rng(0)
X = RNG.normal(size=(N, 3))
TIME = np.exp(-0.7 * X[:, 0] + 0.4 * RNG.normal(size=N)) * 4.0
KIND = RNG.integers(0, 4, N)  # 0 observed, 1 right-, 2 left-, 3 interval-censored
# Cox: integer times (many ties, events and censored rows at one time); negative: censored
Y_COX = np.where(KIND == 1, -1.0, 1.0) * np.ceil(TIME)
# the same times with a quarter float32 step added on even rows: one float32 each, so
# CatBoost (float32 labels, stable sort) keeps the tied rows in row order
_STEP = np.nextafter(np.abs(Y_COX).astype(np.float32), np.float32(np.inf)) - np.abs(Y_COX)
Y_COX_NEAR = Y_COX + np.sign(Y_COX) * np.where(np.arange(N) % 2 == 0, 0.25 * _STEP, 0.0)
# SurvivalAft: CatBoost's [lower, upper] with -1 for an unbounded end
Y_AFT = np.column_stack([np.select([KIND == 2, KIND == 3], [-1.0, 0.7 * TIME], TIME),
                         np.select([KIND == 1, KIND == 3], [-1.0, 1.5 * TIME], TIME)])
# bounds a quarter of a float32 step apart: one float32, so CatBoost reads an observed
# time, not an interval
TIED = np.flatnonzero(KIND == 0)[::8]
_T32 = Y_AFT[TIED, 0].astype(np.float32)
Y_AFT[TIED, 0] = _T32
Y_AFT[TIED, 1] = _T32 + 0.25 * (np.nextafter(_T32, np.float32(np.inf)).astype(np.float64)
                                - _T32)
LR, L2 = 0.7, 1.0


def one_leaf_fit(loss_function, y, method="Newton", rounds=3):
    return catboost.CatBoostRegressor(
        loss_function=loss_function, iterations=rounds, depth=2, learning_rate=LR,
        l2_leaf_reg=L2, leaf_estimation_method=method, leaf_estimation_iterations=1,
        bootstrap_type="No", random_strength=0, thread_count=1, verbose=0).fit(X, y)


def leaf_sums(model, y):
    import treeimp

    ens = treeimp.parse(model)
    stats, margin = staged_pass(ens, RowSource(X, ens), y, np.ones(1),
                                np.zeros(N, np.int64), 1)
    leaf = ens.left < 0
    return ens, stats[0, leaf, 0], stats[1, leaf, 0], stats[2, leaf, 0], \
        ens.value[leaf, 0], margin


def newton(S, H, C, method):
    return np.float32(LR) * S / ((H if method == "Newton" else C) + L2)


# CatBoost's arithmetic of Cox and SurvivalAft, as the objectives' flags (the parser's
# choice, written out here as the loss docs of model/losses.py state it)
COX_FLAGS = {"float32_times": 1.0, "sequential_ties": 1.0, "weights_ignored": 1.0}
AFT_FLAGS = {"fast_log": 1.0, "minus_one_open": 1.0, "weights_ignored": 1.0}


def aft_params(d, scale):
    old_normal = {"erfc_approx": 1.0} if OLD and d == 0 else {}
    return {"distribution": d, "sigma": scale, **AFT_FLAGS, **old_normal}


@pytest.mark.parametrize("method", ["Newton", "Gradient"])
def test_cox_leaves_are_steps_of_our_risk_set_gradients(method):
    assert len(np.unique(np.abs(Y_COX))) < 40 and 0.15 < np.mean(Y_COX < 0) < 0.4
    model = one_leaf_fit("Cox", Y_COX, method)
    if CB == (1, 2, 5):  # the opposite sign: refused
        import treeimp

        assert treeimp.parse(model).objective.name == "catboost:Cox@1.2.5"
        with pytest.raises(ValueError, match="CatBoost 1.2.5, whose Cox derivatives"):
            leaf_sums(model, Y_COX)
        return
    if OLD:
        old_cox_checks(model, method)
        return
    ens, C, S, H, value, margin = leaf_sums(model, Y_COX)
    assert ens.objective.name == "cox" and ens.objective.params == COX_FLAGS
    assert (C > 0).sum() >= 9
    np.testing.assert_allclose(newton(S, H, C, method), value, rtol=1e-9, atol=1e-12)
    # predict_raw is CatBoost's RawFormulaVal (no bias for Cox), also its default predict
    raw = model.predict(X, prediction_type="RawFormulaVal")
    np.testing.assert_allclose(margin[:, 0], raw, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], model.predict(X), rtol=1e-12,
                               atol=1e-12)
    # the check can fail: XGBoost's Breslow ties (tied events share one risk set) differ
    values = model.get_leaf_values()
    assert np.max(np.abs(table_leaves(model, cox_grad_hess_table, method) - values)) > 1e-3
    # times that differ only below float32 precision tie as in CatBoost
    near = one_leaf_fit("Cox", Y_COX_NEAR, method)
    np.testing.assert_array_equal(near.get_leaf_values(), values)
    _, _, S, H, _, _ = leaf_sums(near, Y_COX_NEAR)
    np.testing.assert_allclose(newton(S, H, C, method), value, rtol=1e-9, atol=1e-12)
    assert np.max(np.abs(table_leaves(model, cox_sequential_grad_hess_table, method)
                         - values)) < 1e-9


def old_cox_checks(model, method):
    """CatBoost <= 1.2.3: tied event times are refused, as neither XGBoost's nor the
    sequential tie rule in treeimp's row order gives the leaves (its unstable sort puts
    tied rows in another order); without ties the leaves are treeimp's steps."""
    import treeimp

    ens = treeimp.parse(model)
    assert ens.objective.params == {**COX_FLAGS, "unstable_ties": 1.0}
    with pytest.raises(ValueError, match="1.2.3 or older.* share an event time"):
        leaf_sums(model, Y_COX)
    values = model.get_leaf_values()
    for kernel in (cox_grad_hess_table, cox_sequential_grad_hess_table):
        assert np.max(np.abs(table_leaves(model, kernel, method) - values)) > 1e-3
    untied = np.sign(Y_COX) * TIME
    assert len(np.unique(untied.astype(np.float32))) == N
    model = one_leaf_fit("Cox", untied, method)
    ens, C, S, H, value, margin = leaf_sums(model, untied)
    assert (C > 0).sum() >= 9
    np.testing.assert_allclose(newton(S, H, C, method), value, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(margin[:, 0], model.predict(X, prediction_type="RawFormulaVal"),
                               rtol=1e-12, atol=1e-12)
    # the check can fail: g of the opposite sign (CatBoost 1.2.5's leaves)
    assert np.max(np.abs(newton(-S, H, C, method) - value)) > 1e-3


def table_leaves(model, table_kernel, method, rounds=3, labels=Y_COX):
    """Every tree's leaf values from a Cox g, h table at CatBoost's own margins and leaves."""
    leaves = model.calc_leaf_indexes(X)
    margins = np.array([np.zeros(N), *model.staged_predict(X, prediction_type="RawFormulaVal")])
    y = labels.astype(np.float32).astype(np.float64)
    table = np.empty((N, 2 * rounds))
    table_kernel(y, np.argsort(np.abs(y), kind="stable"), np.ascontiguousarray(margins[:rounds]),
                 table)
    out = []
    for t in range(rounds):
        G = np.bincount(leaves[:, t], table[:, 2 * t], 4)
        H = np.bincount(leaves[:, t], table[:, 2 * t + 1], 4)
        C = np.bincount(leaves[:, t], minlength=4)
        out.append(newton(-G, H, C, method))
    return np.concatenate(out)


@pytest.mark.parametrize("dist, scale", [("Normal", 1.3), ("Logistic", 0.6), ("Extreme", 1.0)])
def test_survival_aft_leaves_are_newton_steps_of_our_gradients(dist, scale):
    model = one_leaf_fit(f"SurvivalAft:dist={dist};scale={scale}", Y_AFT)
    ens, C, S, H, value, margin = leaf_sums(model, Y_AFT)
    d = ["Normal", "Logistic", "Extreme"].index(dist)
    assert ens.objective.params == aft_params(d, scale)
    assert (C > 0).sum() >= 9
    np.testing.assert_allclose(newton(S, H, C, "Newton"), value, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(margin[:, 0], model.predict(X, prediction_type="RawFormulaVal"),
                               rtol=1e-12, atol=1e-12)
    # the check can fail: the exact log of the times (XGBoost's arithmetic) is off by
    # CatBoost's FastLogf error, ~1e-5 in log t
    yt = check_target(ens.objective, Y_AFT)
    assert len(TIED) > 10 and (Y_AFT[TIED, 0] != Y_AFT[TIED, 1]).all()
    assert (yt[TIED, 0] == yt[TIED, 1]).all()
    exact = Objective("aft", {"distribution": d, "sigma": scale})
    leaves = model.calc_leaf_indexes(X)
    margins = [np.zeros(N), *list(model.staged_predict(X, prediction_type="RawFormulaVal"))]
    worst = 0.0
    for t in range(3):
        g, h = grad_hess_array(exact, margins[t], yt, col=0)
        G = np.bincount(leaves[:, t], g, 4)
        Hs = np.bincount(leaves[:, t], h, 4)
        v = model.get_leaf_values()[4 * t:4 * t + 4]
        seen = np.bincount(leaves[:, t], minlength=4) > 0
        worst = max(worst, np.max(np.abs(-np.float32(LR) * G / (Hs + L2) - v)[seen]))
    assert worst > 1e-7


def test_fast_logf_is_catboosts_approximation():
    t = np.concatenate([np.geomspace(1e-30, 1e30, 997), [1.0, 2.0, 0.5, 3.7],
                        [1e-40, 1.17e-38, 1.1754943508222875e-38, 3.4e38]])
    ours = fast_logf(t)
    # numba's frexp route and numpy's bit route agree bit for bit
    assert all(fast_logf_kernel(v) == o for v, o in zip(t, ours))
    err = np.abs(ours - np.log(t.astype(np.float32)))[:-4]  # subnormals: far off
    assert 1e-6 < err.max() < 2e-4  # an approximation, not the log


def test_default_survival_aft_and_labels(tmp_path):
    import treeimp

    model = catboost.CatBoostRegressor(loss_function="SurvivalAft", iterations=2, depth=2,
                                       verbose=0, thread_count=1).fit(X, Y_AFT)
    ens = treeimp.parse(model)
    assert ens.objective.params == aft_params(0, 1.0)
    # the saved JSON model reads the same loss (CatBoost writes no params by default)
    model.save_model(str(tmp_path / "aft.json"), format="json")
    from_file = treeimp.parse(str(tmp_path / "aft.json"))
    assert from_file.objective == ens.objective
    np.testing.assert_array_equal(from_file.predict_raw(X), ens.predict_raw(X))
    yt = check_target(ens.objective, Y_AFT)
    assert np.isinf(yt[KIND == 1, 1]).all() and (yt[KIND == 2, 0] == 0).all()
    for bad, match in (([np.inf, -1.0], "infinite"), ([1e39, -1.0], "infinite"),
                       ([0.0, 2.0], "lower bound <= 0"),
                       ([-2.0, 2.0], "lower bound <= 0"), ([2.0, 0.0], "upper bound <= 0"),
                       ([-1.0, -1.0], "both bounds -1"), ([3.0, 2.0], "lower bound > upper")):
        y = Y_AFT.copy()
        y[5] = bad
        with pytest.raises(ValueError, match=match):
            treeimp.explain(model, X, y, methods=["mdi_oob"])
    with pytest.raises(ValueError, match="shape"):
        treeimp.explain(model, X, Y_AFT[:, 0], methods=["mdi_oob"])
    # CatBoost's derivatives of these losses drop the sample weight: weights are refused
    with pytest.raises(ValueError, match="ignore the sample weight"):
        treeimp.explain(model, X, Y_AFT, methods=["mdi_oob"], sample_weight=np.full(N, 2.0))
    cox = one_leaf_fit("Cox", Y_COX, rounds=2)
    with pytest.raises(ValueError, match="CatBoost 1.2.5" if CB == (1, 2, 5)
                       else "ignore the sample weight"):
        treeimp.explain(cox, X, Y_COX, methods=["mdi_oob"], sample_weight=np.full(N, 2.0))


def _design(rng, n):
    x0 = rng.normal(size=n)
    X_ = np.column_stack([x0, rng.integers(0, 2, n), rng.integers(0, 500, n),
                          rng.normal(size=n)]).astype(np.float64)
    t = np.exp(-0.8 * x0 + 0.5 * rng.normal(size=n))
    c = rng.exponential(2.0, n)
    return X_, np.minimum(t, c), t <= c


@pytest.mark.parametrize("loss", ["Cox", "SurvivalAft:dist=Logistic"])
def test_held_out_importance_on_a_censored_design(loss):
    import treeimp

    rng = np.random.default_rng(1)

    def label(time, event):
        if loss == "Cox":
            return np.where(event, time, -time)
        return np.column_stack([time, np.where(event, time, -1.0)])

    Xt, tt, et = _design(rng, 1000)
    Xv, tv, ev = _design(rng, 1000)
    model = catboost.CatBoostRegressor(loss_function=loss, iterations=150, depth=6,
                                       learning_rate=0.2, random_seed=0, thread_count=1,
                                       verbose=0).fit(Xt, label(tt, et))
    if loss == "Cox" and CB == (1, 2, 5):
        with pytest.raises(ValueError, match="CatBoost 1.2.5"):
            treeimp.explain(model, Xv, label(tv, ev), methods=["mdi_oob"])
        return
    # in-sample PredictionValuesChange gives the noise a large share
    pvc = model.get_feature_importance()
    assert pvc[0] == pvc.max() and pvc[1:].sum() > 30.0
    res = treeimp.explain(model, Xv, label(tv, ev),
                          methods=["mdi_oob", "mdi_oob_centered", "ufi", "naive_oob"],
                          random_state=0)
    assert res.ranking("mdi_oob")[0] == "x0"
    assert res.select("mdi_oob", alpha=0.05) == ["x0"]
    # permutation importance scores survival models by Harrell's C by default
    pi = treeimp.permutation_importance(model, Xv, label(tv, ev), n_repeats=2, random_state=0)
    assert np.argmax(pi["importances_mean"]) == 0 and pi["importances_mean"][0] > 0.2
    with pytest.raises(ValueError, match="not defined for objective"):
        treeimp.explain(model, Xv, label(tv, ev), methods=["shap_oob"])


# model_info.catboost_version_info as the package-index wheels write it (abridged)
_INFO = {(1, 2): "Arc info:\n    Branch: unknown-vcs-branch\n    Commit: " + "0" * 40
         + "\n    Author: <UNKNOWN>\n    Summary: No VCS\n",
         (1, 2, 3): "Git info:\n    Commit: ad980dac979d2d8b4d633dffab06cb2e7303c126\n"
         "    Branch: heads/master\n    Summary: Manually unroll the loop\n",
         (1, 2, 5): "Git info:\n    Commit: 2605fe627ed4271aa8a87ff3564fb68de5f116f0\n"
         "    Branch: heads/master\n    Summary: CatBoost release 1.2.5. 73c7da0\n",
         (1, 2, 6): "Git info:\n    Commit: e4324310de22a670cbfb1c635d00302bab316767\n"
         "    Branch: tags/v1.2.6\n    Summary: CatBoost Release 1.2.6. a5378e9\n",
         None: "Git info:\n    Commit: " + "1" * 40 + "\n    Branch: heads/master\n"}


def test_the_release_that_saved_the_model_picks_the_derivatives(tmp_path):
    import json

    from treeimp.parsers.catboost import parse_catboost_json, saved_version

    docs, models = {}, {}
    for loss, y in (("Cox", np.sign(Y_COX) * TIME), ("SurvivalAft", Y_AFT),
                    ("SurvivalAft:dist=Logistic", Y_AFT)):
        models[loss] = one_leaf_fit(loss, y, rounds=1)
        models[loss].save_model(str(tmp_path / "m.json"), format="json")
        docs[loss] = json.loads((tmp_path / "m.json").read_text())
    # the installed release reads as itself (its model objects and files alike)
    assert saved_version(docs["Cox"]) == CB
    expect = {(1, 2): ("cox", {**COX_FLAGS, "unstable_ties": 1.0},
                       {"erfc_approx": 1.0}),
              (1, 2, 3): ("cox", {**COX_FLAGS, "unstable_ties": 1.0},
                          {"erfc_approx": 1.0}),
              (1, 2, 5): ("catboost:Cox@1.2.5", {}, {}),
              (1, 2, 6): ("cox", COX_FLAGS, {}),
              None: ("catboost:Cox@unknown", {}, None)}
    logistic = {"distribution": 1, "sigma": 1.0, **AFT_FLAGS}
    for version, (cox_name, cox_params, normal_extra) in expect.items():
        parsed = {}
        for loss, doc in docs.items():
            doc = json.loads(json.dumps(doc))
            doc["model_info"]["catboost_version_info"] = _INFO[version]
            assert saved_version(doc) == version
            parsed[loss] = parse_catboost_json(doc).objective
        assert (parsed["Cox"].name, parsed["Cox"].params) == (cox_name, cox_params)
        normal = parsed["SurvivalAft"]
        if normal_extra is None:
            assert normal.name == "catboost:SurvivalAft@unknown"
        else:
            assert normal.params == {"distribution": 0, "sigma": 1.0, **AFT_FLAGS,
                                     **normal_extra}
        assert parsed["SurvivalAft:dist=Logistic"].params == logistic
    # no version info at all: not known
    doc = json.loads(json.dumps(docs["Cox"]))
    del doc["model_info"]["catboost_version_info"]
    assert saved_version(doc) is None
    # refused objectives: prediction works, held-out measures name the reason
    ens = parse_catboost_json(doc)
    assert ens.objective.name == "catboost:Cox@unknown"
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], models["Cox"].predict(X),
                               rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="names no CatBoost release.*Cox"):
        staged_pass(ens, RowSource(X, ens), np.sign(Y_COX) * TIME, np.ones(1),
                    np.zeros(N, np.int64), 1)


def test_erfc_approximation_is_close_to_erfc():
    from math import erfc

    from treeimp.kernels.gradients import erfc_approx

    x = np.linspace(-6.0, 6.0, 2001)
    ours = np.array([erfc_approx(v) for v in x])
    exact = np.array([erfc(v) for v in x])
    rel = np.abs(ours - exact) / exact
    assert rel.max() < 1.2e-7 and rel.max() > 1e-9  # the fit's error bound, not erfc


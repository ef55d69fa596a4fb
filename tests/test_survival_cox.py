"""XGBoost survival:cox: gradients over risk sets, checked against XGBoost's own.

Every tree of a Cox model grown with reg_lambda 0 has leaf values eta (-sum g / sum h)
over the training rows in the leaf at that round's margins.
treeimp's staged pass on the training rows (the pre-pass over the risk sets of all
rows, then the staged kernel) must give those sums: S' / H' of every leaf of every
tree equals its value. Times with many ties, events and censored rows mixed at one
time, so that XGBoost's tie order (by |y|, then row order) matters.
"""

import numpy as np
import pytest

from treeimp.inputs.rows import RowSource
from treeimp.kernels.cox import cox_grad_hess_table
from treeimp.stats.drivers import staged_pass

xgb = pytest.importorskip("xgboost")

N = 400
RNG = np.random.default_rng(3)
X = RNG.normal(size=(N, 4))
TIME = np.ceil(np.exp(-0.7 * X[:, 0] + 0.4 * RNG.normal(size=N)) * 4.0)  # ties
EVENT = RNG.uniform(size=N) < 0.65
Y_COX = np.where(EVENT, TIME, -TIME)
ETA = 0.3


def cox_model(rounds, y=Y_COX, **params):
    p = {"objective": "survival:cox", "eta": ETA, "reg_lambda": 0.0, "min_child_weight": 1.0,
         "max_depth": 2, "nthread": 1, "tree_method": "exact", **params}
    return xgb.train(p, xgb.DMatrix(X, y), rounds)


def leaf_values_and_sums(booster, y):
    import treeimp

    ens = treeimp.parse(booster)
    stats, margin = staged_pass(ens, RowSource(X, ens), y, np.ones(1), np.zeros(N, np.int64), 1)
    leaf = ens.left < 0
    S, H = stats[1, leaf, 0], stats[2, leaf, 0]
    value = ens.value[leaf, 0] * ens.tree_scale[ens.node_tree[leaf]] / ETA
    return ens, value, S, H, margin


def test_cox_leaves_are_newton_steps_of_our_risk_set_gradients():
    assert len(np.unique(TIME)) < 40 and 0.2 < np.mean(Y_COX < 0) < 0.5
    booster = cox_model(4)
    ens, value, S, H, margin = leaf_values_and_sums(booster, Y_COX)
    reached = H > 0
    assert reached.sum() >= 12
    np.testing.assert_allclose(S[reached] / H[reached], value[reached], rtol=2e-4, atol=2e-5)
    # the margin and the prediction (hazard ratio exp(margin)) are XGBoost's
    d = xgb.DMatrix(X)
    np.testing.assert_allclose(margin[:, 0], booster.predict(d, output_margin=True),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(np.exp(margin[:, 0]), booster.predict(d), rtol=1e-6)
    # the check can fail: without Breslow's tie handling (ties broken by row order
    # instead, as if the times were all distinct) the leaves disagree
    jitter = np.where(Y_COX > 0, 1.0, -1.0) * (np.abs(Y_COX) + np.arange(N) * 1e-6)
    _, _, S2, H2, _ = leaf_values_and_sums(booster, jitter)
    assert not np.allclose(S2[reached] / H2[reached], value[reached], rtol=2e-4, atol=2e-5)


def test_cox_table_matches_a_brute_force_risk_set_sum():
    """The table against the definition written out: r_i = sum over events j met no
    later than i (by |y|, then row) of 1 / sum_{|y_k| >= |y_j|} e_k, s_i likewise with
    the squared sum; g = e_i r_i - event_i, h = e_i r_i - e_i^2 s_i."""
    rng = np.random.default_rng(5)
    n = 60
    y = np.where(rng.uniform(size=n) < 0.6, 1.0, -1.0) * rng.integers(1, 8, n)
    m = rng.normal(size=(2, n))
    order = np.argsort(np.abs(y), kind="stable")
    out = np.empty((n, 4))
    cox_grad_hess_table(y, order.astype(np.int64), m, out)
    pos = np.empty(n, int)
    pos[order] = np.arange(n)
    for st in range(2):
        e = np.exp(m[st])
        for i in range(n):
            events = [j for j in range(n) if y[j] > 0 and pos[j] <= pos[i]]
            risk = [e[np.abs(y) >= abs(y[j])].sum() for j in events]
            r = sum(1.0 / s for s in risk)
            s2 = sum(1.0 / s ** 2 for s in risk)
            assert out[i, 2 * st] == pytest.approx(e[i] * r - (y[i] > 0), rel=1e-10, abs=1e-12)
            assert out[i, 2 * st + 1] == pytest.approx(e[i] * r - e[i] ** 2 * s2, rel=1e-10,
                                                       abs=1e-12)


def test_cox_held_out_importance_and_errors():
    import treeimp

    rng = np.random.default_rng(0)

    def design(n):
        x0 = rng.normal(size=n)
        X_ = np.column_stack([x0, rng.integers(0, 2, n), rng.integers(0, 4, n),
                              rng.normal(size=n)])
        t = np.exp(-0.8 * x0 + 0.5 * rng.normal(size=n))
        c = rng.exponential(2.0, n)
        return X_, np.where(t <= c, t, -c)

    Xt, yt = design(1000)
    Xv, yv = design(1000)
    b = xgb.train({"objective": "survival:cox", "max_depth": 6, "eta": 0.3,
                   "min_child_weight": 0, "nthread": 1}, xgb.DMatrix(Xt, yt), 40)
    gain = b.get_score(importance_type="total_gain")
    assert sorted(gain, key=gain.get, reverse=True)[:2] == ["f0", "f3"]
    res = treeimp.explain(b, Xv, yv, methods=["mdi_oob"], random_state=0)
    assert res.ranking("mdi_oob")[0] == "x0"
    assert res.select("mdi_oob", alpha=0.05) == ["x0"]
    with pytest.raises(ValueError, match="NaN"):
        treeimp.explain(b, Xv, np.where(np.arange(1000) == 3, np.nan, yv), methods=["mdi_oob"])
    with pytest.raises(ValueError, match="not defined for objective 'cox'"):
        treeimp.explain(b, Xv, yv, methods=["shap_oob"])
    with pytest.raises(ValueError, match="no per-row gradient"):
        treeimp.interaction_importance(b, Xv[:200], yv[:200])
    # risk sets span all rows: chunks of rows are refused, not explained per chunk
    with pytest.raises(ValueError, match="risk set of all the evaluation rows"):
        treeimp.explain(b, [(Xv[:500], yv[:500]), (Xv[500:], yv[500:])],
                        methods=["mdi_oob"])
    with pytest.raises(ValueError, match="risk set of all the evaluation rows"):
        treeimp.Explainer(b).accumulate(Xv[:500], yv[:500])

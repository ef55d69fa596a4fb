"""Harrell's concordance index and permutation importance of survival models."""

import numpy as np
import pytest

from treeimp.measures.concordance import concordance_index

xgb = pytest.importorskip("xgboost")


def brute_force_c(time, event, risk):
    """Harrell's C written out over all ordered pairs: i must have an event and a
    shorter time than j, or the same time while j is censored; concordant if i's risk
    is higher, one half for equal risks."""
    num = den = 0.0
    n = len(time)
    for i in range(n):
        if not event[i]:
            continue
        for j in range(n):
            if i == j:
                continue
            if time[i] < time[j] or (time[i] == time[j] and not event[j]):
                den += 1
                num += 1.0 if risk[i] > risk[j] else (0.5 if risk[i] == risk[j] else 0.0)
    return num / den


@pytest.mark.parametrize("seed", range(6))
def test_concordance_matches_brute_force_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 80
    time = rng.integers(1, 12, n).astype(float)  # tied times
    event = rng.uniform(size=n) < 0.6
    risk = np.round(rng.normal(size=n) - 0.2 * time, 1)  # tied risks
    assert concordance_index(time, event, risk) == pytest.approx(
        brute_force_c(time, event, risk), rel=1e-12)


def test_concordance_edges_and_errors():
    assert concordance_index([1, 2, 3], [True, True, False], [3, 2, 1]) == 1.0
    assert concordance_index([1, 2, 3], [True, True, False], [1, 2, 3]) == 0.0
    assert concordance_index([1, 2, 3], [True, True, False], [1, 1, 1]) == 0.5
    assert np.isnan(concordance_index([1, 2], [False, False], [1, 2]))
    with pytest.raises(ValueError, match="NaN"):
        concordance_index([1, np.nan], [True, True], [1, 2])
    with pytest.raises(ValueError, match="1-D of one length"):
        concordance_index([1, 2], [True], [1, 2])


def _design(rng, n):
    x0 = rng.normal(size=n)
    X = np.column_stack([x0, rng.normal(size=n), rng.integers(0, 3, n)])
    t = np.exp(0.8 * x0 + 0.5 * rng.normal(size=n))
    c = rng.exponential(2.0, n)
    return X, np.minimum(t, c), t <= c


@pytest.mark.parametrize("objective", ["survival:cox", "survival:aft"])
def test_permutation_importance_with_concordance(objective):
    import treeimp

    rng = np.random.default_rng(1)
    X, time, event = _design(rng, 600)
    Xv, tv, ev = _design(rng, 400)
    if objective == "survival:cox":
        y, yv = np.where(event, time, -time), np.where(ev, tv, -tv)
        d = xgb.DMatrix(X, y)
    else:
        y = np.column_stack([time, np.where(event, time, np.inf)])
        yv = np.column_stack([tv, np.where(ev, tv, np.inf)])
        d = xgb.DMatrix(X)
        d.set_float_info("label_lower_bound", y[:, 0])
        d.set_float_info("label_upper_bound", y[:, 1])
    b = xgb.train({"objective": objective, "max_depth": 3, "eta": 0.3, "nthread": 1}, d, 20)
    pred = b.predict(xgb.DMatrix(Xv))
    risk = pred if objective == "survival:cox" else -pred
    res = treeimp.permutation_importance(b, Xv, yv, n_repeats=3, random_state=0)
    res2 = treeimp.permutation_importance(b, Xv, yv, scoring="concordance_index",
                                          n_repeats=3, random_state=0)
    np.testing.assert_array_equal(res.importances, res2.importances)
    assert res.importances_mean[0] > 0.1 and np.abs(res.importances_mean[1:]).max() < 0.03
    # the baseline score: C of the library's own predictions; a permuted column's score
    # re-computed by brute force from the library's predictions on the permuted rows
    base = brute_force_c(tv, ev, risk)
    perm = np.random.RandomState(np.random.RandomState(0).randint(2**31)).permutation(400)
    Xp = Xv.copy()
    Xp[:, 0] = Xv[perm, 0]
    p2 = b.predict(xgb.DMatrix(Xp))
    drop = base - brute_force_c(tv, ev, p2 if objective == "survival:cox" else -p2)
    assert res.importances[0, 0] == pytest.approx(drop, abs=1e-6)
    with pytest.raises(ValueError, match="not defined for survival model"):
        treeimp.permutation_importance(b, Xv, yv, scoring="r2")
    with pytest.raises(ValueError, match="no sample_weight"):
        treeimp.permutation_importance(b, Xv, yv, sample_weight=np.ones(400))


def test_concordance_needs_a_survival_model_and_right_censored_labels():
    import treeimp

    rng = np.random.default_rng(2)
    X = rng.normal(size=(100, 2))
    b = xgb.train({"objective": "reg:squarederror", "nthread": 1}, xgb.DMatrix(X, X[:, 0]), 2)
    with pytest.raises(ValueError, match="needs a survival model"):
        treeimp.permutation_importance(b, X, X[:, 0], scoring="concordance_index")
    d = xgb.DMatrix(X)
    d.set_float_info("label_lower_bound", np.ones(100))
    d.set_float_info("label_upper_bound", np.full(100, 2.0))
    aft = xgb.train({"objective": "survival:aft", "nthread": 1}, d, 2)
    with pytest.raises(ValueError, match="interval- or left-censored"):
        treeimp.permutation_importance(aft, X, np.column_stack([np.ones(100),
                                                                np.full(100, 2.0)]))

"""treeimp.permutation_importance equals scikit-learn's on the same permutations."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.inspection import permutation_importance as sk_permutation_importance

import treeimp

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")


def _data(kind, n=300, F=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    f = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3]
    if kind == "regression":
        return X, f + rng.normal(scale=0.3, size=n)
    if kind == "binary":
        return X, (f + rng.logistic(size=n) > 0).astype(int)
    return X, np.digitize(f + rng.normal(scale=0.3, size=n), [-0.7, 0.7])


CASES = [
    ("rf binary", lambda: RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0),
     "binary", ["accuracy", "neg_log_loss", "roc_auc"]),
    ("rf regression", lambda: RandomForestRegressor(n_estimators=15, max_depth=6,
                                                    random_state=0),
     "regression", [None, "r2", "neg_mean_squared_error"]),
    ("xgb binary", lambda: xgb.XGBClassifier(n_estimators=15, max_depth=3), "binary",
     [None, "neg_log_loss", "roc_auc"]),
    ("xgb multiclass", lambda: xgb.XGBClassifier(n_estimators=10, max_depth=3), "multi",
     ["accuracy", "neg_log_loss"]),
    ("xgb regression", lambda: xgb.XGBRegressor(n_estimators=15, max_depth=3), "regression",
     ["r2", "neg_mean_squared_error"]),
    ("lgb binary", lambda: lgb.LGBMClassifier(n_estimators=15, num_leaves=7, verbose=-1),
     "binary", ["accuracy", "neg_log_loss", "roc_auc"]),
    ("lgb regression", lambda: lgb.LGBMRegressor(n_estimators=15, num_leaves=7, verbose=-1),
     "regression", [None, "r2", "neg_mean_squared_error"]),
]


@pytest.mark.parametrize("name,make,kind,scorings", CASES, ids=[c[0] for c in CASES])
def test_equals_sklearn(name, make, kind, scorings):
    X, y = _data(kind)
    model = make().fit(X[:200], y[:200])
    Xv, yv = X[200:], y[200:]
    # XGBoost predicts in float32 (its predict_proba is float32), treeimp in float64:
    # continuous scores agree to float32 rounding; scikit-learn and LightGBM to 1e-9
    tol = dict(rtol=1e-4, atol=1e-6) if name.startswith("xgb") else dict(rtol=1e-9,
                                                                         atol=1e-12)
    for scoring in scorings:
        ours = treeimp.permutation_importance(model, Xv, yv, scoring=scoring, n_repeats=4,
                                              random_state=3)
        ref = sk_permutation_importance(model, Xv, yv, scoring=scoring, n_repeats=4,
                                        random_state=3)
        np.testing.assert_allclose(ours.importances, ref.importances, **tol,
                                   err_msg=str(scoring))
        np.testing.assert_allclose(ours.importances_mean, ref.importances_mean, **tol)


def test_sample_weight_and_dataframe_match_sklearn():
    pd = pytest.importorskip("pandas")
    X, y = _data("binary")
    df = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    model = RandomForestClassifier(n_estimators=10, random_state=0).fit(df[:200], y[:200])
    w = np.random.default_rng(1).uniform(0.1, 2.0, 100)
    ours = treeimp.permutation_importance(model, df[200:], y[200:], sample_weight=w,
                                          n_repeats=3, random_state=np.random.RandomState(7))
    ref = sk_permutation_importance(model, df[200:], y[200:], sample_weight=w, n_repeats=3,
                                    random_state=np.random.RandomState(7))
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-9, atol=1e-12)


def test_objective_scoring_is_negative_mean_own_loss():
    X, y = _data("binary")
    model = xgb.XGBClassifier(n_estimators=10, max_depth=3).fit(X[:200], y[:200])
    ours = treeimp.permutation_importance(model, X[200:], y[200:], scoring="objective",
                                          n_repeats=2, random_state=0)
    ref = sk_permutation_importance(model, X[200:], y[200:], scoring="neg_log_loss",
                                    n_repeats=2, random_state=0)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-5, atol=1e-7)


def test_bad_input():
    X, y = _data("regression")
    model = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="scoring"):
        treeimp.permutation_importance(model, X, y, scoring="f1_macro")
    with pytest.raises(ValueError, match="classifier"):
        treeimp.permutation_importance(model, X, y, scoring="accuracy")
    with pytest.raises(ValueError, match="n_repeats"):
        treeimp.permutation_importance(model, X, y, n_repeats=0)
    with pytest.raises(ValueError, match="rows"):
        treeimp.permutation_importance(model, X, y[:-1])

"""The default screening measure depends on the model's kind and task (and, for boosting
regression, on whether its objective's hessian is bounded away from zero); the same
choice is made by ImportanceSelector, Importances.select(), cross_explain's result and
the command line; and with it, cross-fitted regression boosting keeps Friedman's five
true features and few noise ones."""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

import treeimp
from treeimp.cli.main import main
from treeimp.measures.screening import default_screening_method, model_task

RNG = np.random.default_rng(0)
X_SMALL = RNG.normal(size=(300, 4))
Y_REG = X_SMALL[:, 0] + 0.5 * RNG.normal(size=300)
Y_CLS = (X_SMALL[:, 0] + RNG.logistic(size=300) > 0).astype(int)
Y_COUNT = RNG.poisson(np.exp(0.5 * X_SMALL[:, 0])).astype(float)


def _models():
    """(name, unfitted model, target, expected task, expected default measure)."""
    out = [
        ("rf regression", RandomForestRegressor(n_estimators=5, random_state=0), Y_REG,
         "regression", "mdi_oob_centered"),
        ("rf classification", RandomForestClassifier(n_estimators=5, random_state=0), Y_CLS,
         "classification", "mdi_oob_centered"),
        ("sklearn GB regression", GradientBoostingRegressor(n_estimators=5, random_state=0),
         Y_REG, "regression", "ufi"),
        ("sklearn GB classification",
         GradientBoostingClassifier(n_estimators=5, random_state=0), Y_CLS,
         "classification", "mdi_oob_centered"),
        ("HGB poisson", HistGradientBoostingRegressor(loss="poisson", max_iter=5),
         Y_COUNT, "regression", "mdi_oob_centered"),
    ]
    try:
        import xgboost as xgb
    except ImportError:  # pragma: no cover - xgboost is a test dependency
        return out
    return out + [
        ("xgb regression", xgb.XGBRegressor(n_estimators=5, n_jobs=1), Y_REG,
         "regression", "ufi"),
        ("xgb classification", xgb.XGBClassifier(n_estimators=5, n_jobs=1), Y_CLS,
         "classification", "mdi_oob_centered"),
        ("xgb poisson", xgb.XGBRegressor(n_estimators=5, n_jobs=1,
                                         objective="count:poisson"), Y_COUNT,
         "regression", "mdi_oob_centered"),
        # XGBoost >= 3.4 fits absolute error with a smoothed surrogate whose hessian
        # S / hypot(S, r) approaches 0 for large residuals (losses.py)
        ("xgb absolute error", xgb.XGBRegressor(n_estimators=5, n_jobs=1,
                                                objective="reg:absoluteerror"), Y_REG,
         "regression", "mdi_oob_centered" if tuple(
             int(v) for v in xgb.__version__.split(".")[:2]) >= (3, 4) else "ufi"),
    ]


@pytest.mark.parametrize("name, model, y, task, expected", _models(),
                         ids=[m[0] for m in _models()])
def test_default_by_kind_task_and_objective(name, model, y, task, expected):
    model.fit(X_SMALL, y)
    res = treeimp.explain(model, X_SMALL, y, methods=("mdi_oob_centered", "ufi"),
                          n_blocks=5, random_state=0)
    assert res.task == task
    assert model_task(treeimp.Explainer(model).ensemble) == task
    assert default_screening_method(res.kind, res.task, res.objective) == expected
    # select() without a method tests the default: the same list as naming it
    assert res.select(alpha=0.2) == res.select(expected, alpha=0.2)


@pytest.mark.parametrize("model, y, expected", [
    (GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0), Y_REG, "ufi"),
    (GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0), Y_CLS,
     "mdi_oob_centered"),
    (RandomForestRegressor(n_estimators=10, random_state=0), Y_REG, "mdi_oob_centered"),
])
def test_selector_and_cross_explain_use_the_default(model, y, expected):
    sel = treeimp.ImportanceSelector(model, cv=3, n_blocks=5, random_state=0).fit(X_SMALL, y)
    assert sel.method_ == expected
    np.testing.assert_array_equal(sel.support_,
                                  sel.importances_.qvalues[expected].to_numpy() < 0.05)
    if sel.importances_.kind == "boosting":  # cross-fitted: the folds' task and objective
        res = treeimp.cross_explain(model, X_SMALL, y, cv=3, n_blocks=5, random_state=0,
                                    methods=("mdi_oob_centered", "ufi"))
        assert res.task == sel.importances_.task
        assert res.select() == res.select(expected)


def test_cli_select_uses_the_boosting_regression_default(tmp_path, capsys):
    gb = GradientBoostingRegressor(n_estimators=20, max_depth=2, random_state=0)
    gb.fit(X_SMALL[:200], Y_REG[:200])
    (tmp_path / "gb.pkl").write_bytes(pickle.dumps(gb))
    frame = pd.DataFrame(X_SMALL[200:], columns=[f"x{j}" for j in range(4)])
    frame["y"] = Y_REG[200:]
    frame.to_csv(tmp_path / "data.csv", index=False)
    code = main(["explain", str(tmp_path / "gb.pkl"), str(tmp_path / "data.csv"),
                 "--target", "y", "--seed", "0", "--select", "0.05", "--trust-pickle",
                 "--columns-by-position"])
    out = capsys.readouterr().out
    assert code == 0
    assert "kept at false discovery rate 0.05 by ufi: x0" in out


@pytest.mark.parametrize("args, error, match", [
    (("tree", "regression"), ValueError, "kind must be one of"),
    (("boosting", "ranking"), ValueError, "task must be one of .*got 'ranking'"),
    (("boosting", "regression", 3), TypeError, "objective must be None or an objective "
                                               "name .*got int"),
])
def test_bad_input(args, error, match):
    with pytest.raises(error, match=match):
        default_screening_method(*args)


def test_unknown_objective_keeps_the_task_default():
    assert default_screening_method("boosting", "regression") == "ufi"
    assert default_screening_method("boosting", "regression", "squared_error") == "ufi"
    assert default_screening_method("boosting", "regression", "tweedie") == "mdi_oob_centered"
    assert default_screening_method("forest", "regression", "squared_error") == \
        "mdi_oob_centered"


def test_cross_fitted_regression_boosting_keeps_friedman_features():
    """Friedman #1 plus 15 uniform noise features, y + 50, n = 600: XGBoost cross-fitted
    with the default measure (ufi) keeps the five true features in each of two data sets
    and at most one noise feature in all."""
    xgb = pytest.importorskip("xgboost")
    kept_true, kept_noise = [], 0
    for seed in (0, 1):
        rng = np.random.default_rng(seed)
        X = rng.random((600, 20))
        y = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2
             + 10 * X[:, 3] + 5 * X[:, 4] + rng.normal(size=600) + 50.0)
        model = xgb.XGBRegressor(n_estimators=60, max_depth=3, learning_rate=0.1,
                                 n_jobs=1, random_state=seed)
        sel = treeimp.ImportanceSelector(model, random_state=seed).fit(X, y)
        assert sel.method_ == "ufi"
        kept = sel.get_support(indices=True)
        kept_true.append(int(np.sum(kept < 5)))
        kept_noise += int(np.sum(kept >= 5))
    assert kept_true == [5, 5]
    assert kept_noise <= 1


def test_selector_computes_only_the_default_of_the_fitted_model():
    """Only the fitted model's default is computed: another candidate need not be
    defined for it (ufi is refused for an absolute-error forest, whose nodes hold
    medians), and the selection must not fail on it."""
    model = RandomForestRegressor(n_estimators=20, criterion="absolute_error",
                                  random_state=0)
    sel = treeimp.ImportanceSelector(model, n_blocks=5, random_state=0).fit(X_SMALL, Y_REG)
    assert sel.method_ == "mdi_oob_centered"
    assert sel.importances_.methods == ["mdi_oob_centered"]
    assert sel.support_[0]  # the one informative feature
    with pytest.raises(ValueError, match="absolute_error"):
        treeimp.ImportanceSelector(model, method="ufi", n_blocks=5).fit(X_SMALL, Y_REG)

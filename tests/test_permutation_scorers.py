"""``treeimp.permutation_importance(scoring=..., max_samples=...)`` against
``sklearn.inspection.permutation_importance`` on the same models, rows and random_state.

treeimp draws the same permutations as scikit-learn by design (one seed from
random_state, a fresh RandomState(seed) per column whose shuffles compound over the
repeats; with max_samples the same rows drawn first), so the check is the strongest
one: the raw score drops (``importances``, n_features x n_repeats) are equal, bit for
bit, for every scorer name scikit-learn has, and where scikit-learn refuses a scorer
for a model treeimp refuses it too. The paths differ: treeimp's own scorings come from
margins, other scorers from a stand-in estimator (checked against the model's own
methods) or from the model itself (``treeimp/permutation/scorers.py``); each path is
exercised below.
"""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
)
from sklearn.inspection import permutation_importance as sk_permutation_importance
from sklearn.metrics import fbeta_score, get_scorer, get_scorer_names, make_scorer

import treeimp
from treeimp.permutation import importance as permutation_module

KW = {"n_repeats": 2, "random_state": 0}


@pytest.fixture(scope="module")
def models():
    Xb, yb = make_classification(n_samples=120, n_features=4, n_informative=2,
                                 random_state=0)
    Xm, ym = make_classification(n_samples=150, n_features=5, n_informative=3,
                                 n_redundant=0, n_classes=3, random_state=0)
    Xr, yr = make_regression(n_samples=120, n_features=4, random_state=0)
    yr = yr - yr.min() + 1.0  # positive: the log, Poisson and gamma scorers apply
    return {
        # binary: has decision_function; multiclass: predict_proba only
        "binary": (GradientBoostingClassifier(n_estimators=5, max_depth=2,
                                              random_state=0).fit(Xb, yb), Xb, yb),
        "multiclass": (RandomForestClassifier(n_estimators=5, max_depth=3,
                                              random_state=0).fit(Xm, ym), Xm, ym),
        "regression": (GradientBoostingRegressor(n_estimators=5, max_depth=2,
                                                 random_state=0).fit(Xr, yr), Xr, yr),
    }


def _both(model, X, y, **kw):
    """(scikit-learn's result or its exception, treeimp's result or its exception)."""
    out = []
    # scikit-learn's scorers raise AttributeError for a response method the model
    # lacks; treeimp reports every refusal as ValueError or TypeError
    for fn, extra, errors in ((sk_permutation_importance, {},
                               (ValueError, TypeError, AttributeError)),
                              (treeimp.permutation_importance, {"n_jobs": 1},
                               (ValueError, TypeError))):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # undefined-metric warnings of tiny data
            try:
                out.append(fn(model, X, y, **kw, **extra))
            except errors as exc:
                out.append(exc)
    return out


def _assert_equal(sk, ours):
    if "importances" not in sk:  # several scorers: {name: Bunch} (a Bunch is a dict too)
        assert "importances" not in ours and list(ours) == list(sk)
        for key in sk:
            _assert_equal(sk[key], ours[key])
        return
    np.testing.assert_array_equal(ours.importances, sk.importances)
    np.testing.assert_array_equal(ours.importances_mean, sk.importances_mean)


@pytest.mark.parametrize("task", ["binary", "multiclass", "regression"])
@pytest.mark.parametrize("name", get_scorer_names())
def test_every_scorer_name_gives_scikit_learns_values(models, task, name):
    model, X, y = models[task]
    sk, ours = _both(model, X, y, scoring=name, **KW)
    if isinstance(sk, Exception):
        # scikit-learn refuses this scorer for this model: so does treeimp
        assert isinstance(ours, Exception), (name, task, sk)
        return
    assert not isinstance(ours, Exception), ours
    _assert_equal(sk, ours)


def _kinds(monkeypatch):
    """Record how each scorer of the next calls is computed."""
    seen = []
    original = permutation_module._Plan.baseline

    def baseline(self, margin):
        out = original(self, margin)
        seen.append(dict(self.kinds))
        return out
    monkeypatch.setattr(permutation_module._Plan, "baseline", baseline)
    return seen


def test_each_path_is_taken(models, monkeypatch):
    seen = _kinds(monkeypatch)
    model, X, y = models["binary"]
    sk, ours = _both(model, X, y, scoring=["accuracy", "f1", "neg_brier_score"], **KW)
    _assert_equal(sk, ours)
    # accuracy from margins; f1 through the stand-in (predict matches bit for bit);
    # the Brier score reads predict_proba, which GradientBoosting computes 1 ulp away
    # from 1 - expit: called on the model
    assert seen[-1] == {"accuracy": "margin", "f1": "stand_in",
                        "neg_brier_score": "model"}
    # no fitted estimator (a TreeEnsemble): the stand-in, unchecked, equals the model's
    # predict here
    sk = sk_permutation_importance(model, X, y, scoring="f1", **KW)
    ours = treeimp.permutation_importance(treeimp.parse(model), X, y, scoring="f1",
                                          n_jobs=1, **KW)
    assert seen[-1] == {None: "stand_in"}
    _assert_equal(sk, ours)


def test_scorer_objects_callables_and_dicts(models):
    model, X, y = models["multiclass"]
    f2 = make_scorer(fbeta_score, beta=2, average="macro")

    def spread(estimator, X, y):  # a plain callable: it reads the estimator itself
        return float(np.std(estimator.predict_proba(X)[:, 0]))

    def two(estimator, X, y):  # a callable returning several scores
        p = estimator.predict(X)
        return {"hits": float(np.mean(p == y)), "zeros": float(np.mean(p == 0))}

    for scoring in (f2, get_scorer("balanced_accuracy"), spread, two,
                    {"f2": f2, "ll": "neg_log_loss", "own": spread},
                    ("top_k_accuracy", "roc_auc_ovr")):
        sk, ours = _both(model, X, y, scoring=scoring, **KW)
        assert not isinstance(sk, Exception) and not isinstance(ours, Exception), ours
        _assert_equal(sk, ours)


@pytest.mark.parametrize("max_samples", [0.5, 37, 120])
def test_max_samples_draws_scikit_learns_rows(models, max_samples):
    model, X, y = models["regression"]
    w = np.random.default_rng(0).uniform(0.5, 2.0, size=len(y))
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(X.shape[1])])
    for data in (X, frame):
        model.fit(data, y)
        sk, ours = _both(model, data, y, scoring=["r2", "neg_median_absolute_error"],
                         max_samples=max_samples, sample_weight=w, **KW)
        _assert_equal(sk, ours)
    model.fit(X, y)


def test_xgboost_float32_probabilities_are_read_from_the_model(models, monkeypatch):
    xgb = pytest.importorskip("xgboost")
    seen = _kinds(monkeypatch)
    model, X, y = models["binary"]
    booster = xgb.XGBClassifier(n_estimators=5, max_depth=2, n_jobs=1).fit(X, y)
    # XGBoost's predict_proba is float32, the stand-in's float64: average_precision is
    # called on the model itself; its labels match, so matthews_corrcoef uses the
    # stand-in; both equal scikit-learn's exactly
    sk, ours = _both(booster, X, y, scoring=["average_precision", "matthews_corrcoef"],
                     max_samples=60, **KW)
    _assert_equal(sk, ours)
    assert seen[-1] == {"average_precision": "model", "matthews_corrcoef": "stand_in"}


@pytest.mark.parametrize("scoring, error, match", [
    (5, TypeError, "scoring must be"),
    ("no_such_scorer", ValueError, "not a scorer name"),
    (["f1", "f1"], ValueError, "unique"),
    ([], ValueError, "scorer names"),
    ({}, ValueError, "empty dict"),
    ({"a": 3}, ValueError, r"scoring\['a'\]"),
])
def test_bad_scoring_is_refused(models, scoring, error, match):
    model, X, y = models["binary"]
    with pytest.raises(error, match=match):
        treeimp.permutation_importance(model, X, y, scoring=scoring, **KW)


@pytest.mark.parametrize("max_samples, error, match", [
    (0, ValueError, r"\[1, 120\]"), (121, ValueError, r"\[1, 120\]"),
    (1.5, ValueError, r"\(0, 1\]"), (0.0, ValueError, r"\(0, 1\]"),
    ("all", TypeError, "max_samples"), (True, TypeError, "max_samples"),
])
def test_bad_max_samples_is_refused(models, max_samples, error, match):
    model, X, y = models["binary"]
    with pytest.raises(error, match=match):
        treeimp.permutation_importance(model, X, y, max_samples=max_samples, **KW)

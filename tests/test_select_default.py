"""``explain(...).select()`` screens with the default screening measure of the model's
kind and task, which explain computes by default; select() never falls back to another
measure: naming one that was not computed, or a result without the default, is an error."""

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.utils import check_random_state

import treeimp
from treeimp.measures.screening import default_screening_method


def _far_from_zero():
    # Friedman #1 with the target far from zero: uncentred mdi_oob's noise terms are
    # multiplied by the large mean of y and swamp the true features
    X, y = make_friedman1(n_samples=600, n_features=8, noise=1.0, random_state=0)
    return X, 1000.0 * y + 1e4


def test_explain_select_equals_the_selectors_choice_far_from_zero():
    X, y = _far_from_zero()
    rf = RandomForestRegressor(n_estimators=60, min_samples_leaf=5, max_features=0.5,
                               random_state=0)
    sel = treeimp.ImportanceSelector(rf, random_state=1).fit(X, y)
    # the row blocks the selector drew (its second seed from random_state=1)
    block_seed = int(check_random_state(1).randint(np.iinfo(np.int32).max, size=2)[1])
    res = treeimp.explain(sel.estimator_, X, y, oob=True, random_state=block_seed)
    assert "mdi_oob_centered" in res.methods
    kept = res.select()
    # the selector's choice: its measure on its own importances
    assert sel.method_ == "mdi_oob_centered"
    assert kept == sel.importances_.select("mdi_oob_centered")
    assert set(kept) == set(np.asarray(sel.get_feature_names_out()))
    assert {f"x{j}" for j in range(5)} <= set(kept)


def test_default_methods_hold_each_kinds_screening_measure():
    X, y = _far_from_zero()
    yc = (y > np.median(y)).astype(int)
    for model, target, screen in (
            (GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0), y,
             "ufi"),
            (GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0), yc,
             "mdi_oob_centered")):
        model.fit(X[:400], target[:400])
        res = treeimp.explain(model, X[400:], target[400:], n_blocks=5, random_state=0)
        assert default_screening_method(res.kind, res.task, res.objective) == screen
        assert screen in res.methods
        assert res.select() == res.select(screen)


def test_select_without_the_default_measure_is_an_error():
    X, y = _far_from_zero()
    rf = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi", "mdi_oob", "ufi"),
                          n_blocks=5, random_state=0)
    with pytest.raises(ValueError, match="mdi_oob_centered.*not computed"):
        res.select()
    with pytest.raises(ValueError, match="'naive_oob' was not computed"):
        res.select("naive_oob")
    assert isinstance(res.select("mdi_oob"), list)  # a named, computed measure still works


def test_select_on_a_result_without_a_task_names_the_problem():
    X, y = _far_from_zero()
    rf = RandomForestRegressor(n_estimators=5, random_state=0).fit(X, y)
    res = treeimp.explain(rf, X, y, oob=True, n_blocks=5, random_state=0)
    del res.task  # as results pickled before the task was recorded
    with pytest.raises(ValueError, match="does not record the model's task"):
        res.select()

"""Every read of scikit-learn's private state (``treeimp/parsers/sklearn_private.py``)
against the installed scikit-learn, and each fallback forced (the private name made
unreadable to treeimp) with its warning and a result still equal to the public truth."""

import inspect
import warnings

import numpy as np
import pytest
import sklearn
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)

import treeimp
from treeimp.parsers import sklearn_private as private
from treeimp.parsers.sklearn_inbag import _bits_from_samples, sklearn_inbag_bits

VERSION = sklearn.__version__


def _xy(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(0, 0.1, n)


@pytest.fixture(scope="module")
def forest():
    X, y = _xy()
    return RandomForestRegressor(n_estimators=5, max_depth=3, random_state=4).fit(X, y), X


def _packed_public(model, n):
    """In-bag bits from scikit-learn's public estimators_samples_, packed here."""
    bits = np.zeros((len(model.estimators_), (n + 7) // 8), np.uint8)
    for t, rows in enumerate(model.estimators_samples_):
        for r in np.asarray(rows):
            bits[t, r >> 3] |= np.uint8(1 << (r & 7))
    return bits


def test_forest_private_state_matches_installed_sklearn(forest):
    model, X = forest
    assert private.is_forest(model) and not private.overrides_samples(model)
    assert private.n_training_rows(model) == len(X)
    assert private.bootstrap_draws(model) == len(X)  # max_samples=None
    assert private.bootstrap_weighted(model) is False
    seed = model.estimators_[2].random_state
    rows = private.generated_sample_indices(model, seed)
    np.testing.assert_array_equal(np.sort(rows), np.sort(model.estimators_samples_[2]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fast path takes no fallback
        got = sklearn_inbag_bits(model, len(X))
    np.testing.assert_array_equal(got, _packed_public(model, len(X)))


def test_pre_1_9_forest_without_sample_weight_takes_the_fast_path(forest, monkeypatch):
    # scikit-learn < 1.9 keeps no _sample_weight and its generator takes no sample_weight:
    # the regenerated rows are used without a warning and equal the public ones
    model, X = forest
    want = _packed_public(model, len(X))  # before the generator below replaces sklearn's
    want_rows = np.sort(model.estimators_samples_[1])
    monkeypatch.setattr(private, "SAMPLE_WEIGHT", "_absent_before_1_9")
    monkeypatch.setattr(private, "_version_tuple", lambda: (1, 8))
    from sklearn.ensemble import _forest

    real = _forest._generate_sample_indices
    params = inspect.signature(real).parameters
    weight = {"sample_weight": None} if "sample_weight" in params else {}

    def three_arguments(random_state, n_samples, n_samples_bootstrap):  # as before 1.9
        return real(random_state, n_samples, n_samples_bootstrap, **weight)

    monkeypatch.setattr(_forest, "_generate_sample_indices", three_arguments)
    seed = model.estimators_[1].random_state
    np.testing.assert_array_equal(np.sort(private.generated_sample_indices(model, seed)),
                                  want_rows)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = sklearn_inbag_bits(model, len(X))
    np.testing.assert_array_equal(got, want)


def test_missing_generator_warns_and_uses_public_rows(forest, monkeypatch):
    model, X = forest
    want = _packed_public(model, len(X))
    monkeypatch.setattr(private, "GENERATOR", "_generate_sample_indices_renamed")
    with pytest.warns(UserWarning, match=f"scikit-learn {VERSION}.*_generate_sample_indices"
                                         ".*estimators_samples_"):
        got = sklearn_inbag_bits(model, len(X))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", ["N_BOOTSTRAP", "SAMPLE_WEIGHT"])
def test_missing_bootstrap_state_warns_and_uses_public_rows(forest, monkeypatch, name):
    model, X = forest
    if name == "SAMPLE_WEIGHT" and private._version_tuple() < (1, 9):
        pytest.skip(f"scikit-learn {VERSION} has no _sample_weight (new in 1.9): its "
                    "absence is the normal case, tested by test_pre_1_9_forest_*")
    want = _packed_public(model, len(X))
    monkeypatch.setattr(private, name, "_renamed_in_a_later_version")
    with pytest.warns(UserWarning, match=f"scikit-learn {VERSION}.*_renamed_in_a_later_version"
                                         ".*public estimators_samples_"):
        got = sklearn_inbag_bits(model, len(X))
    np.testing.assert_array_equal(got, want)


def test_missing_training_row_count_warns_and_skips_the_check(forest, monkeypatch):
    model, X = forest
    want = _packed_public(model, len(X))
    monkeypatch.setattr(private, "N_SAMPLES", "_renamed_in_a_later_version")
    with pytest.warns(UserWarning, match=f"scikit-learn {VERSION}.*without checking"):
        got = sklearn_inbag_bits(model, len(X))
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(_bits_from_samples(model, len(X)), want)


@pytest.mark.parametrize("cls", [GradientBoostingRegressor, GradientBoostingClassifier])
def test_gb_init_margin_and_its_public_fallback(cls, monkeypatch):
    X, y = _xy(150, seed=1)
    if cls is GradientBoostingClassifier:
        y = np.digitize(y, np.quantile(y, [0.33, 0.66]))  # three classes
    model = cls(n_estimators=4, max_depth=2, random_state=0).fit(X, y)
    row = np.zeros((1, X.shape[1]), np.float32)
    np.testing.assert_array_equal(private.gb_init_margin(model, row),
                                  model._raw_predict_init(row))
    ens = treeimp.parse(model)
    monkeypatch.setattr(private, "GB_INIT", "_raw_predict_init_renamed")
    with pytest.warns(UserWarning, match=f"scikit-learn {VERSION}.*_raw_predict_init_renamed"
                                         ".*staged predictions"):
        fallback = treeimp.parse(model)
    np.testing.assert_allclose(fallback.base_score, ens.base_score, rtol=1e-12, atol=1e-14)
    raw = (model.decision_function(X) if cls is GradientBoostingClassifier
           else model.predict(X)).reshape(len(X), -1)
    np.testing.assert_allclose(fallback.predict_raw(X), raw, rtol=1e-10, atol=1e-12)


def test_hgb_without_private_trees_is_a_clear_error(monkeypatch):
    X, y = _xy(100, seed=2)
    model = HistGradientBoostingRegressor(max_iter=3, max_depth=2).fit(X, y)
    assert private.hgb_predictors(model) is model._predictors
    monkeypatch.delattr(model, "_predictors")
    with pytest.raises(ValueError, match=f"has no _predictors \\(scikit-learn {VERSION}\\)"
                                         ".*no public way"):
        treeimp.parse(model)


@pytest.mark.parametrize("kind", ["poisson", "multiclass", "dataframe"])
def test_hgb_baseline_and_its_public_fallback(kind, monkeypatch):
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _xy(150, seed=5)
    if kind == "poisson":
        model = HistGradientBoostingRegressor(loss="poisson", max_iter=3, max_depth=2)
        model.fit(X, np.exp(y / 3))
    elif kind == "multiclass":
        model = HistGradientBoostingClassifier(max_iter=3, max_depth=2)
        model.fit(X, np.digitize(y, np.quantile(y, [0.33, 0.66])))
    else:
        X = pd.DataFrame(X, columns=["a", "b", "c", "d"])
        model = HistGradientBoostingRegressor(max_iter=3, max_depth=2).fit(X, y)
    ens = treeimp.parse(model)
    np.testing.assert_array_equal(private.hgb_baseline_prediction(model),
                                  model._baseline_prediction)
    np.testing.assert_array_equal(ens.base_score, model._baseline_prediction.ravel())
    monkeypatch.setattr(private, "HGB_BASELINE", "_baseline_prediction_renamed")
    with pytest.warns(UserWarning, match=f"scikit-learn {VERSION}.*_baseline_prediction_"
                                         "renamed.*public decision_function / predict"):
        fallback = treeimp.parse(model)
    np.testing.assert_allclose(fallback.base_score, ens.base_score, rtol=1e-12, atol=1e-12)


def test_hgb_categorical_without_baseline_is_a_clear_error(monkeypatch):
    X, y = _xy(150, seed=6)
    X[:, 3] = np.arange(150) % 4
    model = HistGradientBoostingRegressor(max_iter=3, max_depth=2,
                                          categorical_features=[3]).fit(X, y)
    monkeypatch.setattr(private, "HGB_BASELINE", "_baseline_prediction_renamed")
    with pytest.warns(UserWarning, match="_baseline_prediction_renamed"):
        with pytest.raises(ValueError, match="has no _baseline_prediction_renamed .*"
                                             "categorical features"):
            treeimp.parse(model)

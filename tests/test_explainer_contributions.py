"""Explainer.contributions: the contributions of the model the Explainer parsed once
(no second parse, the forest's in-bag rows read once), equal to treeimp.contributions,
adding up to the library's own margin, and for a Pipeline those of its last step on the
transformed rows."""

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder

import treeimp
import treeimp.explainer
from treeimp.attributions.contributions import ContributionModel


def _data(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n)
    return X, y


def _same(a, b):
    """Bitwise equal contributions (NaN where the other has NaN)."""
    for name in ("values", "base_values", "values_in", "base_values_in", "n_oob_trees"):
        x, z = getattr(a, name), getattr(b, name)
        assert (x is None) == (z is None), name
        if x is not None:
            np.testing.assert_array_equal(x, z, err_msg=name, strict=True)
    assert a.feature_names == b.feature_names
    assert a.output_names == b.output_names


@pytest.mark.parametrize("method", ["shap", "saabas"])
def test_xgboost_equals_contributions_and_adds_up_to_the_margin(method):
    X, y = _data()
    model = xgb.XGBRegressor(n_estimators=8, max_depth=3).fit(X[:150], y[:150])
    ex = treeimp.Explainer(model)
    got = ex.contributions(X[150:], method=method)
    _same(got, treeimp.contributions(model, X[150:], method=method))
    _same(got, ex.contributions(X[150:], method=method))  # the kept tables: same values
    # the library's own margin, and its own contributions
    margin = model.predict(X[150:], output_margin=True)
    np.testing.assert_allclose(got.base_values + got.values.sum(axis=1), margin,
                               rtol=0, atol=1e-5)
    ref = model.get_booster().predict(xgb.DMatrix(X[150:]), pred_contribs=True,
                                      approx_contribs=method == "saabas")
    np.testing.assert_allclose(got.values, ref[:, :-1], rtol=0, atol=1e-5)
    np.testing.assert_allclose(got.base_values, ref[:, -1], rtol=0, atol=1e-5)


@pytest.mark.filterwarnings("ignore:Some inputs do not have OOB scores")
def test_oob_forest_equals_contributions_and_the_oob_prediction(monkeypatch):
    X, y = _data(seed=1)
    rf = RandomForestRegressor(n_estimators=25, max_depth=5, oob_score=True,
                               random_state=0).fit(X, y)
    calls = []
    real = treeimp.explainer.inbag_bits
    monkeypatch.setattr(treeimp.explainer, "inbag_bits",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    ex = treeimp.Explainer(rf)
    got = ex.contributions(X, y, oob=True)
    again = ex.contributions(X, oob=True, method="saabas")
    assert len(calls) == 1  # the in-bag rows are read once per Explainer
    monkeypatch.setattr(treeimp.explainer, "inbag_bits", real)
    _same(got, treeimp.contributions(rf, X, y, oob=True))
    _same(again, treeimp.contributions(rf, X, oob=True, method="saabas"))
    # base + phi^oob is scikit-learn's out-of-bag prediction (rows out of bag somewhere)
    seen = got.n_oob_trees > 0
    assert seen.sum() > 190 and np.isnan(got.base_values[~seen]).all()
    for c in (got, again):
        np.testing.assert_allclose((c.base_values + c.values.sum(axis=1))[seen],
                                   rf.oob_prediction_[seen], rtol=0, atol=1e-9)
    # and base_in + phi^in is the mean prediction of the trees each row trained
    inbag = ~np.isnan(got.base_values_in)
    per_tree = np.stack([t.predict(X) for t in rf.estimators_])
    counts = np.zeros((len(rf.estimators_), len(X)))
    for t, rows in enumerate(rf.estimators_samples_):
        counts[t] = np.bincount(rows, minlength=len(X)) > 0
    mean_in = (per_tree * counts).sum(0) / np.maximum(counts.sum(0), 1)
    np.testing.assert_allclose((got.base_values_in + got.values_in.sum(axis=1))[inbag],
                               mean_in[inbag], rtol=0, atol=1e-9)


def test_the_model_is_parsed_once(monkeypatch):
    X, y = _data(seed=2)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3).fit(X, y)
    parses, built = [], []
    real_parse = treeimp.explainer.parse
    monkeypatch.setattr(treeimp.explainer, "parse",
                        lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    monkeypatch.setattr(treeimp.explainer, "ContributionModel",
                        lambda *a: built.append(a[1]) or ContributionModel(*a))
    ex = treeimp.Explainer(model)
    a = ex.contributions(X[:50])
    b = ex.contributions(X[50:100])
    ex.contributions(X[:50], method="saabas")
    ex.explain(X[100:], y[100:], random_state=0)
    assert len(parses) == 1
    assert built == ["shap", "saabas"]  # the kernels' tables, once per method
    np.testing.assert_array_equal(np.r_[a.values, b.values],
                                  ex.contributions(X[:100]).values, strict=True)


def test_pipeline_equals_its_last_step_on_the_transformed_rows():
    rng = np.random.default_rng(3)
    n = 240
    df = pd.DataFrame({"a": rng.normal(size=n), "c": rng.choice(list("pqrs"), n),
                       "b": rng.normal(size=n)})
    y = (df.a + (df.c == "q") + 0.5 * rng.normal(size=n) > 0.5).astype(int).to_numpy()
    ct = ColumnTransformer([("oh", OneHotEncoder(sparse_output=True), ["c"])],
                           remainder="passthrough", sparse_threshold=1.0)
    pipe = make_pipeline(ct, RandomForestClassifier(n_estimators=10, max_depth=4,
                                                    random_state=0)).fit(df[:160], y[:160])
    X = df[160:]
    got = treeimp.Explainer(pipe).contributions(X)
    Xt = pipe[:-1].transform(X).toarray()
    direct = treeimp.contributions(pipe[-1], Xt)
    names = [str(f) for f in pipe[:-1].get_feature_names_out()]
    assert got.feature_names == names
    np.testing.assert_array_equal(got.values, direct.values, strict=True)
    np.testing.assert_array_equal(got.base_values, direct.base_values, strict=True)
    np.testing.assert_array_equal(np.asarray(got.data), Xt)  # what the last step saw
    _same(got, treeimp.contributions(pipe, X))
    # the forest's class probabilities, as scikit-learn predicts them
    np.testing.assert_allclose(got.base_values + got.values.sum(axis=1),
                               pipe.predict_proba(X), rtol=0, atol=1e-12)
    # groups="input": the one-hot columns of c summed into c
    grouped = treeimp.contributions(pipe, X, groups="input")
    assert grouped.feature_names == ["c", "a", "b"]
    members = {"c": [j for j, f in enumerate(names) if f.startswith("oh__c_")],
               "a": [names.index("remainder__a")], "b": [names.index("remainder__b")]}
    assert len(members["c"]) == 4
    for g, name in enumerate(grouped.feature_names):
        np.testing.assert_allclose(grouped.values[:, g], got.values[:, members[name]].sum(1),
                                   rtol=0, atol=1e-15)


def test_multi_label_models_have_contributions_but_no_importances():
    """Importances are not defined for multi-label boosting; contributions are (they add
    up to XGBoost's margins): the Explainer refuses the first, not the second."""
    X, _ = _data(seed=4)
    labels = np.c_[X[:, 0] > 0, X[:, 1] > 0].astype(int)
    model = xgb.XGBClassifier(n_estimators=3, max_depth=3, tree_method="hist").fit(X, labels)
    ex = treeimp.Explainer(model)
    c = ex.contributions(X[:40])
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1),
                               model.predict(X[:40], output_margin=True), rtol=0, atol=1e-5)
    for call in (lambda: ex.explain(X, labels),
                 lambda: ex.accumulate(X, labels),
                 lambda: ex.permutation_importance(X, labels)):
        with pytest.raises(ValueError, match="2 logistic outputs .*multi-label"):
            call()

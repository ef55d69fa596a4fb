"""DataFrame column names are matched to a model's features as its own library matches
them at predict time: LightGBM stores names with every space replaced by "_" (and
refuses JSON's special characters at fit), XGBoost compares the names and their order
exactly, CatBoost maps columns by name when every feature's name is among them. treeimp
accepts the frame the model was fit on, explains what the library's predict computes
on it, and refuses what the library refuses."""

import json

import numpy as np
import pandas as pd
import pytest

import treeimp

RNG = np.random.default_rng(5)
N = 300
# spaces, unicode, punctuation, a tab and a non-breaking space
NAMES = ["mean radius", "größe (cm)", "émoji 😀 x", "dot.name-1", "tab\tname", "nb\u00a0sp",
         "q<2", "plain"]


def _frame(names):
    X = pd.DataFrame(RNG.normal(size=(N, len(names))), columns=names)
    y = X.iloc[:, 0] + 0.5 * X.iloc[:, 1] - X.iloc[:, 2] * (X.iloc[:, 3] > 0)
    return X, (y + 0.3 * RNG.normal(size=N)).to_numpy()


def _same_margin(model, X, expected):
    ex = treeimp.Explainer(model)
    np.testing.assert_allclose(ex.predict_raw(X)[:, 0], expected, rtol=1e-6, atol=1e-6)
    res = ex.explain(X, Y_HOLD, methods=("mdi_oob",), n_blocks=5, random_state=0)
    assert list(res.table.index) == [str(c) for c in X.columns]


X_FIT, Y_FIT = _frame(NAMES)
Y_HOLD = Y_FIT


def test_lightgbm_names_with_spaces_as_lightgbm_stores_them():
    lgb = pytest.importorskip("lightgbm")
    model = lgb.LGBMRegressor(n_estimators=10, num_leaves=7, verbose=-1).fit(X_FIT, Y_FIT)
    stored = model.booster_.feature_name()
    assert stored[0] == "mean_radius" and stored[4] == "tab\tname"  # only " " replaced
    _same_margin(model, X_FIT, model.predict(X_FIT, raw_score=True))
    # the stored names themselves are the same features
    _same_margin(model, X_FIT.set_axis(stored, axis=1), model.predict(X_FIT, raw_score=True))
    with pytest.raises(ValueError, match="different order"):
        treeimp.explain(model, X_FIT[NAMES[::-1]], Y_FIT, methods=("mdi_oob",), n_blocks=5)


def test_xgboost_names_exactly_as_xgboost_compares_them():
    xgb = pytest.importorskip("xgboost")
    model = xgb.XGBRegressor(n_estimators=10, max_depth=3, n_jobs=1)
    names = [n for n in NAMES if "<" not in n]  # XGBoost refuses [, ] and < at fit
    X = X_FIT[names]
    model.fit(X, Y_FIT)
    _same_margin(model, X, model.predict(X, output_margin=True))
    swapped = X[names[::-1]]
    with pytest.raises(ValueError, match="feature_names mismatch"):
        model.predict(swapped)
    with pytest.raises(ValueError, match="different order"):
        treeimp.explain(model, swapped, Y_FIT, methods=("mdi_oob",), n_blocks=5)
    spaced = X.set_axis([n.replace(" ", "_") for n in names], axis=1)
    with pytest.raises(ValueError, match="feature_names mismatch"):
        model.predict(spaced)
    with pytest.raises(ValueError, match="do not match the model's feature names"):
        treeimp.explain(model, spaced, Y_FIT, methods=("mdi_oob",), n_blocks=5)


def test_catboost_maps_columns_by_name_as_catboost_does():
    cb = pytest.importorskip("catboost")
    model = cb.CatBoostRegressor(iterations=10, depth=3, verbose=0, thread_count=1,
                                 allow_writing_files=False)
    model.fit(X_FIT, Y_FIT)
    assert model.feature_names_ == NAMES  # stored as given
    _same_margin(model, X_FIT, model.predict(X_FIT, prediction_type="RawFormulaVal"))
    # CatBoost takes the columns by name: another order predicts the same
    swapped = X_FIT[NAMES[::-1]]
    np.testing.assert_allclose(model.predict(swapped), model.predict(X_FIT))
    ex = treeimp.Explainer(model)
    np.testing.assert_allclose(ex.predict_raw(swapped)[:, 0],
                               model.predict(X_FIT, prediction_type="RawFormulaVal"),
                               rtol=1e-6, atol=1e-6)
    res = ex.explain(swapped, Y_FIT, methods=("mdi_oob",), n_blocks=5, random_state=0)
    same = ex.explain(X_FIT, Y_FIT, methods=("mdi_oob",), n_blocks=5, random_state=0)
    pd.testing.assert_series_equal(res.table["mdi_oob"].loc[NAMES],
                                   same.table["mdi_oob"].loc[NAMES])
    # other columns beside the model's: CatBoost reads the model's by name, so does treeimp
    wider = swapped.assign(extra=np.arange(len(swapped), dtype=float))[
        ["extra", *NAMES[::-1]]]
    np.testing.assert_allclose(model.predict(wider), model.predict(X_FIT))
    np.testing.assert_allclose(ex.predict_raw(wider)[:, 0],
                               model.predict(X_FIT, prediction_type="RawFormulaVal"),
                               rtol=1e-6, atol=1e-6)
    wide = ex.explain(wider, Y_FIT, methods=("mdi_oob",), n_blocks=5, random_state=0)
    pd.testing.assert_series_equal(wide.table["mdi_oob"].loc[NAMES],
                                   same.table["mdi_oob"].loc[NAMES])
    # a name CatBoost does not find: it refuses, so does treeimp
    renamed = X_FIT.set_axis(["zz"] + NAMES[1:], axis=1)
    with pytest.raises(Exception, match="should be|must be"):
        model.predict(renamed)
    with pytest.raises(ValueError, match="do not match the model's feature names"):
        treeimp.explain(model, renamed, Y_FIT, methods=("mdi_oob",), n_blocks=5)


def test_command_line_reads_the_lightgbm_training_table(tmp_path, capsys):
    lgb = pytest.importorskip("lightgbm")
    from treeimp.cli.main import main

    names = [n for n in NAMES if "\t" not in n]  # a tab would split the CSV's header
    X = X_FIT[names]
    model = lgb.LGBMRegressor(n_estimators=10, num_leaves=7, verbose=-1).fit(X, Y_FIT)
    model.booster_.save_model(tmp_path / "model.txt")
    X.assign(target=Y_FIT).to_csv(tmp_path / "data.csv", index=False)
    code = main(["explain", str(tmp_path / "model.txt"), str(tmp_path / "data.csv"),
                 "--target", "target", "--format", "json", "--seed", "0",
                 "--methods", "mdi_oob"])
    out = capsys.readouterr().out
    assert code == 0
    cli = pd.DataFrame(json.loads(out)).set_index("feature")["importance"]
    api = treeimp.explain(str(tmp_path / "model.txt"), X, Y_FIT, methods=("mdi_oob",),
                          random_state=0).table["mdi_oob"]
    np.testing.assert_allclose(cli.loc[api.index].to_numpy(), api.to_numpy(), rtol=1e-9)

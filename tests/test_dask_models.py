"""Models trained with Dask (xgboost.dask, lightgbm.dask) are parsed as they are."""
# ruff: noqa: F811  (the dask_client fixture is imported, then named as an argument)

import numpy as np
import pytest

pytest.importorskip("distributed")
xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

import dask.array as da  # noqa: E402
import xgboost.dask as xgb_dask  # noqa: E402

import treeimp  # noqa: E402
from tests.dask_fixtures import assert_same_ensemble, dask_client  # noqa: E402, F401


def _data(n=600, seed=0, classes=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5)).astype(np.float32)
    X[rng.random(size=X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2
    y = (signal + rng.normal(size=n) > 0.5).astype(np.float64) if classes else \
        signal + 0.3 * rng.normal(size=n)
    return X, y


def _dask(X, y, chunks=150):
    return da.from_array(X, chunks=(chunks, -1)), da.from_array(y, chunks=chunks)


def test_dask_xgb_regressor_with_early_stopping(dask_client):
    X, y = _data()
    Xv, yv = _data(300, seed=1)
    model = xgb_dask.DaskXGBRegressor(n_estimators=60, max_depth=3, learning_rate=0.5,
                                      early_stopping_rounds=3, tree_method="hist")
    model.client = dask_client
    model.fit(*_dask(X, y), eval_set=[_dask(Xv, yv)], verbose=False)
    best = model.best_iteration
    booster = model.get_booster()
    assert best + 1 < booster.num_boosted_rounds()  # early stopping left rounds behind
    ens = treeimp.parse(model)
    assert ens.n_rounds == best + 1
    assert_same_ensemble(ens, treeimp.parse(booster, iteration_range=(0, best + 1)))
    expected = model.predict(da.from_array(Xv, chunks=(100, -1)), output_margin=True)
    np.testing.assert_allclose(ens.predict_raw(Xv)[:, 0], expected.compute(),
                               rtol=1e-5, atol=1e-5)


def test_dask_xgb_classifier(dask_client):
    X, y = _data(classes=True)
    model = xgb_dask.DaskXGBClassifier(n_estimators=15, max_depth=3, tree_method="hist")
    model.client = dask_client
    model.fit(*_dask(X, y))
    ens = treeimp.parse(model)
    # a Booster stores no class labels: the rest is the same
    assert_same_ensemble(ens, treeimp.parse(model.get_booster()), skip=("classes",))
    np.testing.assert_array_equal(ens.classes, [0, 1])
    expected = model.predict(da.from_array(X, chunks=(100, -1)), output_margin=True)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], expected.compute(),
                               rtol=1e-5, atol=1e-5)


def test_xgboost_dask_train_output(dask_client):
    X, y = _data()
    dtrain = xgb_dask.DaskDMatrix(dask_client, *_dask(X, y))
    output = xgb_dask.train(dask_client, {"max_depth": 3, "eta": 0.2}, dtrain,
                            num_boost_round=12, evals=[(dtrain, "train")],
                            verbose_eval=False)
    assert set(output) == {"booster", "history"}
    ens = treeimp.parse(output)
    assert ens.n_rounds == 12
    assert_same_ensemble(ens, treeimp.parse(output["booster"]))
    expected = xgb_dask.predict(dask_client, output, da.from_array(X, chunks=(100, -1)),
                                output_margin=True)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], expected.compute(),
                               rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match=r"xgboost.dask.train.*\['booster', 'hist'\]"):
        treeimp.parse({"booster": output["booster"], "hist": {}})
    with pytest.raises(TypeError, match="a dict with the keys"):
        treeimp.parse({"booster": "model.json", "history": {}})


@pytest.mark.parametrize("cls", ["DaskLGBMRegressor", "DaskLGBMClassifier"])
def test_dask_lightgbm(dask_client, cls):
    X, y = _data(classes=cls.endswith("Classifier"))
    model = getattr(lgb, cls)(n_estimators=12, num_leaves=7, min_child_samples=10,
                              verbose=-1, client=dask_client)
    model.fit(*_dask(X, y, chunks=300))
    ens = treeimp.parse(model)
    assert ens.n_trees == 12
    assert_same_ensemble(ens, treeimp.parse(model.to_local()))
    assert_same_ensemble(ens, treeimp.parse(model.booster_), skip=("classes",))
    expected = model.predict(da.from_array(X, chunks=(100, -1)), raw_score=True)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], expected.compute(),
                               rtol=1e-9, atol=1e-9)

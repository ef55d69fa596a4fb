"""A DataFrame is read one converted chunk of rows at a time; an all-float32 pandas
DataFrame in float32 chunks (half the memory of float64 ones). Its importances must be
bitwise those of the same values as a float32 numpy array, which the kernels read as
they are (no conversion), over several chunks of rows."""

import numpy as np
import pandas as pd
import pytest

import treeimp
from treeimp.stats import drivers

N_FEATURES = 6


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES)).astype(np.float32)
    X[rng.random(size=X.shape) < 0.05] = np.nan  # missing values take the default side
    return X


def _model(name):
    X = np.nan_to_num(_data(600, 0))
    y_bin = (X[:, 0] + X[:, 1] > 0).astype(int)
    if name == "xgboost_binary":
        import xgboost as xgb
        return xgb.XGBClassifier(n_estimators=8, max_depth=3).fit(X, y_bin)
    if name == "xgboost_regression":
        import xgboost as xgb
        return xgb.XGBRegressor(n_estimators=8, max_depth=3).fit(X, X[:, 0] - X[:, 2])
    if name == "xgboost_3_classes":
        import xgboost as xgb
        return xgb.XGBClassifier(n_estimators=5, max_depth=3).fit(X, y_bin + (X[:, 3] > 0))
    if name == "lightgbm":
        import lightgbm as lgb
        return lgb.LGBMRegressor(n_estimators=8, num_leaves=7, verbose=-1).fit(
            X, X[:, 0] - X[:, 2])
    from sklearn.ensemble import RandomForestClassifier
    return RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(X, y_bin)


def _target(name, X):
    X = np.nan_to_num(X)
    if name in ("xgboost_regression", "lightgbm"):
        return X[:, 0] - X[:, 2]
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    return y + (X[:, 3] > 0) if name == "xgboost_3_classes" else y


@pytest.mark.parametrize("name", ["xgboost_binary", "xgboost_regression",
                                  "xgboost_3_classes", "lightgbm", "forest_oob"])
def test_float32_frame_matches_the_array_bitwise(name, monkeypatch):
    monkeypatch.setattr(drivers, "CHUNK_ROWS", 97)  # several chunks, the last one short
    model = _model(name)
    X = _data(700, 1)
    y = _target(name, X)
    if name == "forest_oob":
        X, y = np.nan_to_num(_data(600, 0)), _target(name, _data(600, 0))
    cols = [f"f{j}" for j in range(N_FEATURES)]
    frame = pd.DataFrame(X, columns=cols)
    mixed = frame.astype({"f2": np.float64})  # one float64 column: float64 chunks
    oob = name == "forest_oob"
    kw = dict(methods=("mdi_oob", "ufi"), random_state=3, oob=oob)
    want = treeimp.explain(model, X, y, **kw)
    for table in (frame, mixed):
        got = treeimp.explain(model, table, y, **kw)
        assert got.table.to_numpy().tobytes() == want.table.to_numpy().tobytes()
        assert got.stderr.to_numpy().tobytes() == want.stderr.to_numpy().tobytes()

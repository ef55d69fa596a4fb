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


def _xgb_sentinel():
    import xgboost as xgb
    X = np.nan_to_num(_data(600, 0))
    return xgb.XGBClassifier(n_estimators=8, max_depth=3, missing=-999.0).fit(
        X, (X[:, 0] + X[:, 1] > 0).astype(int))


@pytest.mark.parametrize("name", ["xgboost_binary", "xgboost_regression", "lightgbm",
                                  "forest", "xgboost_sentinel"])
@pytest.mark.parametrize("kind", ["float64", "mixed_int", "polars"])
def test_other_frames_match_the_float64_array_bitwise(name, kind, monkeypatch):
    """float64 and integer columns (pandas, polars): the importances of the same values
    as a float64 numpy array, bitwise, over several chunks of rows (float32 chunks for a
    model that rounds its input to float32, float64 ones for LightGBM)."""
    from treeimp.inputs import rows as rows_module

    monkeypatch.setattr(drivers, "CHUNK_ROWS", 97)
    monkeypatch.setattr(rows_module, "CHUNK_ROWS", 89)
    if name == "xgboost_sentinel":
        model, target = _xgb_sentinel(), "xgboost_binary"
    elif name == "forest":  # held-out rows
        model, target = _model("forest_oob"), "forest_oob"
    else:
        model, target = _model(name), name
    X = _data(700, 1).astype(np.float64)
    if name == "xgboost_sentinel":
        X[::7, 2] = -999.0  # the sentinel routes as missing
    y = _target(target, X)
    cols = [f"f{j}" for j in range(N_FEATURES)]
    if kind == "mixed_int":  # integer columns beside float64 ones, as a float64 array
        X[:, 1::2] = np.round(np.nan_to_num(X[:, 1::2]) * 1000)
        frame = pd.DataFrame({c: X[:, j].astype(np.int32) if j % 2 else X[:, j]
                              for j, c in enumerate(cols)})
    elif kind == "polars":
        pl = pytest.importorskip("polars")
        frame = pl.DataFrame({c: X[:, j] for j, c in enumerate(cols)})
    else:
        frame = pd.DataFrame(X, columns=cols)
    kw = dict(methods=("mdi_oob", "ufi"), random_state=3)
    want = treeimp.explain(model, X, y, **kw)
    got = treeimp.explain(model, frame, y, **kw)
    assert got.table.to_numpy().tobytes() == want.table.to_numpy().tobytes()
    assert got.stderr.to_numpy().tobytes() == want.stderr.to_numpy().tobytes()


@pytest.mark.parametrize("name", ["xgboost_binary", "lightgbm", "forest_oob"])
def test_explain_converts_one_bounded_chunk_at_a_time(name, monkeypatch):
    """Every pass of explain over a float64 DataFrame asks for chunks of at most the
    drivers' row count and drops each converted chunk before the next one is made
    (counted through RowSource._frame_chunk with a small chunk size)."""
    import weakref

    from treeimp.inputs import rows as rows_module

    monkeypatch.setattr(drivers, "CHUNK_ROWS", 97)
    monkeypatch.setattr(rows_module, "CHUNK_ROWS", 89)
    made, alive = [], []
    convert = rows_module.RowSource._frame_chunk

    def counting(self, start, stop):
        alive.append(sum(ref() is not None for ref in made))
        chunk = convert(self, start, stop)
        made.append(weakref.ref(chunk))
        assert stop - start <= 97
        return chunk

    monkeypatch.setattr(rows_module.RowSource, "_frame_chunk", counting)
    model = _model(name)
    X = np.nan_to_num(_data(600, 0)) if name == "forest_oob" else _data(700, 1)
    frame = pd.DataFrame(X.astype(np.float64), columns=[f"f{j}" for j in range(N_FEATURES)])
    treeimp.explain(model, frame, _target(name, X), methods=("mdi_oob", "ufi"),
                    random_state=3, oob=name == "forest_oob")
    assert len(made) >= 7  # several chunks per pass
    assert max(alive) == 0, f"converted chunks alive when the next was made: {alive}"

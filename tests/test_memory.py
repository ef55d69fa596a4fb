"""Memory of explain grows by a few bytes per evaluation row, never by a copy of X.

tracemalloc sees every numpy allocation (Python side); the kernels' own buffers are
O(nodes) and do not depend on the row count. The bound checked here, 40 bytes per row,
is well under the 80 bytes per row of the float32 input (20 features): per row explain
keeps the block id (4 bytes), the target as float64 (8; classes one-hot for forests,
8 per class) and, while validating, the class index (8).
"""

import tracemalloc

import numpy as np
import pytest

import treeimp

N_ROWS = 300_000
N_FEATURES = 20
BYTES_PER_ROW = 40


def _models():
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, N_FEATURES)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    return {
        "xgboost_binary": xgb.XGBClassifier(n_estimators=10, max_depth=3).fit(X, y),
        "xgboost_3_classes": xgb.XGBClassifier(n_estimators=10, max_depth=3).fit(
            X, y + (X[:, 1] > 0)),
        "forest_classifier": RandomForestClassifier(n_estimators=5, max_depth=5,
                                                    random_state=0).fit(X, y),
        "forest_regressor": RandomForestRegressor(n_estimators=5, max_depth=5,
                                                  random_state=0).fit(X, X[:, 0]),
    }


@pytest.fixture(scope="module")
def models():
    return _models()


def traced_explain(model, X, y):
    """(result, peak bytes traced) of ``explain(model, X, y)`` with mdi_oob and ufi, after
    an explain of its first 100 rows (kernels compiled / loaded before measuring)."""
    treeimp.explain(model, X[:100], y[:100])
    tracemalloc.start()
    try:
        res = treeimp.explain(model, X, y, methods=("mdi_oob", "ufi"), random_state=0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return res, peak


@pytest.mark.parametrize("name", ["xgboost_binary", "xgboost_3_classes", "forest_classifier",
                                  "forest_regressor"])
def test_explain_memory_is_a_few_bytes_per_row(models, name):
    model = models[name]
    rng = np.random.default_rng(1)
    X = rng.standard_normal(size=(N_ROWS, N_FEATURES), dtype=np.float32)
    if name == "forest_regressor":
        y = X[:, 0].astype(np.float64)
    elif name == "xgboost_3_classes":
        y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    else:
        y = (X[:, 0] > 0).astype(int)
    res, peak = traced_explain(model, X, y)
    assert np.isfinite(res.table.to_numpy()).all()
    per_row = peak / N_ROWS
    assert per_row <= BYTES_PER_ROW, (
        f"explain allocated {peak / 2**20:.1f} MB at its peak, {per_row:.1f} bytes per row "
        f"(input: {X.nbytes / N_ROWS:.0f} bytes per row)")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_explain_of_a_frame_holds_one_small_float32_chunk(models, dtype):
    """A pandas DataFrame is converted one chunk of rows at a time: at most one chunk of
    65,536 rows, float32 for a model that rounds its input to float32 (XGBoost) whatever
    the columns' dtype, is alive beside the per-row arrays (a float32 chunk of 262,144
    rows was half of the peak, a float64 one made while the previous one was still
    referenced twice this bound)."""
    import pandas as pd

    model = models["xgboost_binary"]
    rng = np.random.default_rng(2)
    X = rng.standard_normal(size=(N_ROWS, N_FEATURES), dtype=np.float32)
    frame = pd.DataFrame(X.astype(dtype), columns=[f"f{j}" for j in range(N_FEATURES)],
                         copy=False)
    y = (X[:, 0] > 0).astype(int)
    _, peak = traced_explain(model, frame, y)
    chunk = 65536 * N_FEATURES * 4
    bound = N_ROWS * BYTES_PER_ROW + chunk
    assert peak <= bound, (f"explain of a {np.dtype(dtype)} DataFrame allocated "
                           f"{peak / 2**20:.1f} MB at its peak, over {bound / 2**20:.1f} MB "
                           f"(one float32 chunk of 65,536 rows: {chunk / 2**20:.1f} MB)")


# per row during a boosting model's explain: the block id (1 byte); besides, the
# temporaries of one chunk of rows (hashing 65,536 row positions to blocks: about 2 MB).
# No Python list of the labels, no class positions or float64 target of every row
BOOSTING_BYTES_PER_ROW = 2
BOOSTING_FIXED_BYTES = 3 * 2**20


@pytest.mark.parametrize("frame", [False, True])
def test_boosting_explain_keeps_no_target_of_every_row(models, frame):
    """The labels are matched to the classes without Python lists of the rows, and the
    staged pass converts each chunk's targets: a numpy input (routed as it is) and a
    DataFrame with 'category' columns (coded chunk by chunk) stay within a few bytes per
    row beside one converted chunk."""
    import pandas as pd
    import xgboost as xgb

    rng = np.random.default_rng(3)
    X = rng.standard_normal(size=(N_ROWS, N_FEATURES), dtype=np.float32)
    y = (X[:, 0] > 0).astype(np.int32)
    if frame:
        cols = {f"f{j}": X[:, j] for j in range(N_FEATURES)}
        for j in range(4):  # four 'category' columns of 10 labels
            cols[f"f{j}"] = pd.Categorical.from_codes(
                (np.abs(X[:, j]) * 4).astype(np.int8) % 10, categories=list(range(10)))
        data = pd.DataFrame(cols, copy=False)
        model = xgb.XGBClassifier(n_estimators=10, max_depth=3, enable_categorical=True,
                                  tree_method="hist").fit(data.iloc[:2000], y[:2000])
    else:
        data = X
        model = models["xgboost_binary"]
    _, peak = traced_explain(model, data, y)
    chunk = 65536 * N_FEATURES * 4 if frame else 0
    bound = N_ROWS * BOOSTING_BYTES_PER_ROW + BOOSTING_FIXED_BYTES + chunk
    assert peak <= bound, (f"explain allocated {peak / 2**20:.1f} MB at its peak, over "
                           f"{bound / 2**20:.1f} MB ({BOOSTING_BYTES_PER_ROW} bytes per row"
                           f" + {(BOOSTING_FIXED_BYTES + chunk) / 2**20:.1f} MB)")

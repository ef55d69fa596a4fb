"""Importances and permutation importance of Spark DataFrames equal the in-memory
results on the same rows (identities = in-memory positions), whatever the partitioning;
models trained with xgboost.spark are explained from their Spark model object, as their
own transform predicts. One local[2] session for the module (tests/spark_fixtures.py);
each call below is one small Spark job."""

# ruff: noqa: F811  (the spark fixture is imported, then named as an argument)

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor
from sklearn.metrics import accuracy_score
from sklearn.utils import check_random_state

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

import treeimp  # noqa: E402
from tests.spark_fixtures import spark  # noqa: E402, F401

F = 4
NAMES = [f"f{j}" for j in range(F)]
SEED = 3


def _data(n=600, seed=0, classes=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    s = X[:, 0] - X[:, 1] + 0.6 * X[:, 2] * X[:, 3] + rng.normal(scale=0.4, size=n)
    return X, ((s > 0).astype(int) if classes else s)


def _frame(spark, X, y, *, w=None, margin=None, vector=False):
    """A Spark DataFrame of the rows with an id column 0 .. n-1 (their positions)."""
    pdf = pd.DataFrame(X, columns=NAMES)
    pdf["label"] = y.astype(float)
    pdf["id"] = np.arange(len(X))
    if w is not None:
        pdf["w"] = w
    if margin is not None:
        pdf["m"] = margin
    sdf = spark.createDataFrame(pdf)
    if vector:
        from pyspark.ml.feature import VectorAssembler

        sdf = VectorAssembler(inputCols=NAMES, outputCol="features").transform(sdf)
        sdf = sdf.drop(*NAMES)
    return sdf


def assert_same_result(res, mem, rtol=1e-10):
    assert res.n_rows == mem.n_rows
    assert list(res.table.index) == list(mem.table.index)
    assert list(res.table.columns) == list(mem.table.columns)
    for attr in ("table", "stderr", "stderr_trees", "pvalues"):
        a, b = getattr(res, attr).to_numpy(), getattr(mem, attr).to_numpy()
        scale = np.nanmax(np.abs(b)) if np.isfinite(b).any() else 1.0
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12 * scale, err_msg=attr)


@pytest.fixture(scope="module")
def forest():
    X, y = _data()
    rf = RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0)
    return rf.fit(X[:300], y[:300]), X[300:], y[300:]


def test_forest_equals_in_memory_for_every_partitioning(spark, forest):
    """Held-out rows of a forest in 1, 3 and 7 hash partitions of the id: the rows reach
    the executors in another order and grouping each time, the result is the in-memory
    one (blocks keyed by the id column)."""
    rf, X, y = forest
    mem = treeimp.explain(rf, pd.DataFrame(X, columns=NAMES), y, random_state=SEED)
    sdf = _frame(spark, X, y)
    for k in (1, 3, 7):
        got = treeimp.explain(rf, sdf.repartition(k, "id"), label_col="label",
                              feature_cols=NAMES, id_col="id", random_state=SEED)
        assert_same_result(got, mem)
    assert np.abs(mem.table["mdi_oob"]).max() > 0.1  # the features matter


def test_vector_column_with_weights_and_explainer(spark, forest):
    """A VectorUDT features column and a weight column, through an Explainer."""
    rf, X, y = forest
    w = np.random.default_rng(1).uniform(0.2, 2.0, size=len(X))
    mem = treeimp.explain(rf, X, y, sample_weight=w, random_state=SEED,
                          methods=("mdi_oob", "ufi", "shap_oob"))
    sdf = _frame(spark, X, y, w=w, vector=True).repartition(3)
    got = treeimp.Explainer(rf).explain(sdf, label_col="label", features_col="features",
                                        id_col="id", weight_col="w", random_state=SEED,
                                        methods=("mdi_oob", "ufi", "shap_oob"))
    assert_same_result(got, mem)


def test_without_identity_the_importances_are_the_same(spark, forest):
    """monotonically_increasing_id changes the blocks (the standard errors), not the
    importances, which are sums over all rows."""
    rf, X, y = forest
    mem = treeimp.explain(rf, pd.DataFrame(X, columns=NAMES), y, random_state=SEED)
    got = treeimp.explain(rf, _frame(spark, X, y).repartition(2), label_col="label",
                          feature_cols=NAMES, random_state=SEED)
    np.testing.assert_allclose(got.table.to_numpy(), mem.table.to_numpy(), rtol=1e-10)
    assert got.n_rows == mem.n_rows
    # in-sample MDI reads the model alone: one row read for the names, the rows counted
    mdi = treeimp.explain(rf, _frame(spark, X, y), feature_cols=NAMES, methods=("mdi",))
    np.testing.assert_allclose(mdi.table["mdi"], mem.table["mdi"], rtol=1e-12)
    assert list(mdi.table.index) == NAMES and mdi.n_rows == len(X)


def test_out_of_bag_rows_of_a_forest(spark):
    """oob=True: the forest's training rows, id_col their training positions."""
    X, y = _data(n=300, seed=12)
    rf = RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0).fit(X, y)
    mem = treeimp.explain(rf, pd.DataFrame(X, columns=NAMES), y, oob=True, random_state=SEED)
    got = treeimp.explain(rf, _frame(spark, X, y).repartition(3, "id"), oob=True,
                          label_col="label", feature_cols=NAMES, id_col="id",
                          random_state=SEED)
    assert_same_result(got, mem)


def test_xgboost_with_offsets_and_lightgbm(spark, tmp_path):
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(seed=2, classes=True)
    margin = np.random.default_rng(4).normal(scale=0.3, size=300)
    clf = xgb.XGBClassifier(n_estimators=12, max_depth=3, learning_rate=0.3,
                            random_state=0).fit(X[:300], y[:300])
    mem = treeimp.explain(clf, X[300:], y[300:], base_margin=margin, random_state=SEED)
    sdf = _frame(spark, X[300:], y[300:], margin=margin, vector=True).repartition(3, "id")
    got = treeimp.explain(clf, sdf, label_col="label", features_col="features",
                          id_col="id", base_margin_col="m", random_state=SEED)
    assert_same_result(got, mem, rtol=1e-9)

    Xr, yr = _data(seed=5)
    reg = lgb.LGBMRegressor(n_estimators=10, num_leaves=7, verbose=-1)
    reg.fit(pd.DataFrame(Xr[:300], columns=NAMES), yr[:300])
    mem = treeimp.explain(reg, pd.DataFrame(Xr[300:], columns=NAMES), yr[300:],
                          random_state=SEED)
    # the LightGBM text model, as SynapseML's saveNativeModel / getNativeModel give it
    path = tmp_path / "native_model.txt"
    path.write_text(reg.booster_.model_to_string())
    got = treeimp.explain(str(path), _frame(spark, Xr[300:], yr[300:]).repartition(7, "id"),
                          label_col="label", id_col="id", random_state=SEED)
    assert_same_result(got, mem, rtol=1e-9)


def test_spark_trained_xgboost_explained_from_its_spark_model(spark):
    """SparkXGBRegressor with missing=0.0: treeimp predicts what its transform
    predicts (zeros routed as missing), and explains it as the booster with that
    missing value in memory."""
    pytest.importorskip("xgboost")
    from xgboost.spark import SparkXGBRegressor

    X, y = _data(n=400, seed=6)
    X[np.random.default_rng(7).random(size=X.shape) < 0.1] = 0.0
    train = _frame(spark, X[:200], y[:200], vector=True)
    model = SparkXGBRegressor(features_col="features", label_col="label", n_estimators=6,
                              max_depth=3, missing=0.0, num_workers=1).fit(train)
    held = _frame(spark, X[200:], y[200:], vector=True)
    pred = model.transform(held).select("id", "prediction").toPandas().sort_values("id")
    ens = treeimp.parse(model)
    np.testing.assert_allclose(ens.predict_raw(X[200:])[:, 0], pred["prediction"],
                               rtol=1e-5, atol=1e-5)
    mem = treeimp.explain(model.get_booster(), X[200:], y[200:], missing=0.0,
                          random_state=SEED)
    # the features, label columns and missing value come from the Spark model
    got = treeimp.explain(model, held.repartition(3), id_col="id", random_state=SEED)
    assert_same_result(got, mem, rtol=1e-9)


def _brute_force_permutation(predict, X, y, members, random_state, n_repeats):
    """Accuracy drops of the documented scheme without treeimp: each partition's rows
    (ids sorted) permuted by default_rng([seed, repeat, column, smallest id])."""
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max + 1)
    base = accuracy_score(y, predict(X))
    out = np.empty((X.shape[1], n_repeats))
    for j in range(X.shape[1]):
        for r in range(n_repeats):
            Xp = X.copy()
            for ids in members:
                ids = np.sort(ids)
                perm = np.random.default_rng([seed, r, j, int(ids[0])]).permutation(len(ids))
                Xp[ids, j] = X[ids[perm], j]
            out[j, r] = accuracy_score(y, predict(Xp))
    return base - out


def test_permutation_importance_equals_the_scheme_brute_force(spark):
    from pyspark.sql import functions as sf

    X, y = _data(n=500, seed=8, classes=True)
    rf = RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0)
    rf.fit(X[:200], y[:200])
    Xh, yh = X[200:], y[200:]
    sdf = _frame(spark, Xh, yh).repartition(3, "id")
    parts = sdf.select(sf.spark_partition_id().alias("p"), "id").toPandas()
    members = [g["id"].to_numpy() for _, g in parts.groupby("p")]
    assert len(members) == 3
    got = treeimp.permutation_importance(rf, sdf, label_col="label", feature_cols=NAMES,
                                         id_col="id", n_repeats=3, random_state=9)
    want = _brute_force_permutation(rf.predict, Xh, yh, members, 9, 3)
    np.testing.assert_allclose(got.importances, want, rtol=1e-10, atol=1e-12)
    assert np.abs(want).max() > 0.02


def test_bad_input_is_refused(spark, forest):
    rf, X, y = forest
    sdf = _frame(spark, X[:30], y[:30])
    with pytest.raises(ValueError, match="not both"):
        treeimp.explain(rf, sdf, label_col="label", features_col="f0", feature_cols=NAMES)
    with pytest.raises(ValueError, match="'nope' is not a column"):
        treeimp.explain(rf, sdf, label_col="nope", feature_cols=NAMES)
    with pytest.raises(TypeError, match="label_col="):
        treeimp.explain(rf, sdf, y[:30], feature_cols=NAMES)
    with pytest.raises(ValueError, match="needs id_col"):
        treeimp.explain(rf, sdf, label_col="label", feature_cols=NAMES, oob=True)
    with pytest.raises(ValueError, match="integer type"):
        treeimp.explain(rf, sdf, label_col="label", feature_cols=NAMES, id_col="f0")
    with pytest.raises(TypeError, match="name columns of a Spark DataFrame"):
        treeimp.explain(rf, X, y, label_col="label")
    with pytest.raises(ValueError, match="label_col is required"):
        treeimp.explain(rf, sdf, feature_cols=NAMES)
    with pytest.raises(ValueError, match="trained on 4 features"):
        treeimp.explain(rf, sdf, label_col="label", feature_cols=NAMES[:3])
    with pytest.raises(ValueError, match="has 0 rows"):
        treeimp.explain(rf, sdf.limit(0), label_col="label", feature_cols=NAMES)
    # rows sharing an identity are refused where they meet (one job)
    from pyspark.sql import functions as sf

    dup = sdf.withColumn("id", sf.col("id") % 10)
    with pytest.raises(ValueError, match="repeated values|overlap"):
        treeimp.explain(rf, dup.coalesce(1), label_col="label", feature_cols=NAMES,
                        id_col="id")

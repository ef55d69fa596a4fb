"""The model as it is deployed (issue 16, items 1-5): the trees its own predict uses,
XGBoost's missing sentinel, sparse input, polars / pyarrow tables, per-row offsets.

Every case is checked against the library's own raw margin on the same input, and
permutation importance against scikit-learn's on the same model and rows."""

import warnings

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
from sklearn.inspection import permutation_importance as sk_permutation_importance

import treeimp
from treeimp.inputs import rows as _input
from treeimp.inputs.rows import RowSource
from treeimp.stats.drivers import staged_pass

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

XGB_TOL = dict(rtol=1e-4, atol=1e-6)  # XGBoost sums in float32, treeimp in float64


class Predictor(RegressorMixin, BaseEstimator):
    """A fitted regressor whose predict is a given function of X (what a deployed
    model computes: a Booster, an iteration range, an offset)."""

    def __init__(self, fn=None):
        self.fn = fn

    def fit(self, X, y):
        return self

    def predict(self, X):
        return self.fn(X)

    def __sklearn_is_fitted__(self):
        return True


def _regression(n=400, F=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    y = X[:, 0] - X[:, 1] + 0.5 * X[:, 2] * X[:, 3] + rng.normal(scale=0.3, size=n)
    return X, y


def _assert_pi_equal(ours_model, ref_model, X, y, X_ref=None, tol=XGB_TOL, **kw):
    ours = treeimp.permutation_importance(ours_model, X, y, n_repeats=3, random_state=4,
                                          scoring="r2", **kw)
    ref = sk_permutation_importance(ref_model, X if X_ref is None else X_ref, y,
                                    n_repeats=3, random_state=4, scoring="r2")
    np.testing.assert_allclose(ours.importances, ref.importances, **tol)
    assert np.abs(ref.importances).max() > 0.01  # the comparison is not trivial


# ---------------------------------------------------------------- 1. which trees
@pytest.fixture(scope="module")
def early_stopped():
    X, y = _regression(600)
    m = xgb.XGBRegressor(n_estimators=60, max_depth=3, learning_rate=0.6,
                         early_stopping_rounds=3)
    m.fit(X[:300], y[:300], eval_set=[(X[300:450], y[300:450])], verbose=False)
    assert m.best_iteration + 1 < m.get_booster().num_boosted_rounds()  # really stopped
    return m, X[450:], y[450:]


def test_early_stopped_wrapper_uses_best_iteration(early_stopped):
    m, X, y = early_stopped
    ens = treeimp.parse(m)
    assert ens.n_rounds == m.best_iteration + 1
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], m.predict(X, output_margin=True),
                               **XGB_TOL)
    all_trees = treeimp.parse(m, iteration_range=(0, 0))
    assert all_trees.n_rounds == m.get_booster().num_boosted_rounds()
    # the trees after best_iteration change the margin: using them would be wrong
    assert np.abs(all_trees.predict_raw(X) - ens.predict_raw(X)).max() > 0.01
    _assert_pi_equal(m, m, X, y)
    # explain's staged final margin is the wrapper's margin
    rows = RowSource(X, ens)
    _, margin = staged_pass(ens, rows, y, np.ones(1), np.arange(len(y)) % 2, 2)
    np.testing.assert_allclose(margin[:, 0], m.predict(X, output_margin=True), **XGB_TOL)


def test_booster_uses_all_trees_and_iteration_range(early_stopped):
    m, X, y = early_stopped
    booster = m.get_booster()
    ens = treeimp.parse(booster)
    margin = booster.predict(xgb.DMatrix(X), output_margin=True)
    assert ens.n_rounds == booster.num_boosted_rounds()
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], margin, **XGB_TOL)
    _assert_pi_equal(booster, Predictor(lambda Z: booster.predict(xgb.DMatrix(Z))), X, y)
    # a range not starting at 0: base score + trees 2..4, as XGBoost predicts it
    part = treeimp.parse(booster, iteration_range=(2, 5))
    ref = booster.predict(xgb.DMatrix(X), output_margin=True, iteration_range=(2, 5))
    np.testing.assert_allclose(part.predict_raw(X)[:, 0], ref, **XGB_TOL)
    np.testing.assert_array_equal(part.apply(X), ens.apply(X)[:, 2:5])
    _, staged = staged_pass(part, RowSource(X, part), y, np.ones(1), np.zeros(len(y),
                                                                              np.int32), 1)
    np.testing.assert_allclose(staged[:, 0], ref, **XGB_TOL)
    _assert_pi_equal(
        booster, Predictor(lambda Z: booster.predict(xgb.DMatrix(Z), iteration_range=(2, 5))),
        X, y, iteration_range=(2, 5))
    res = treeimp.explain(booster, X, y, iteration_range=(2, 5), random_state=0)
    np.testing.assert_array_equal(res.table.to_numpy(), treeimp.explain(
        part, X, y, random_state=0).table.to_numpy())
    for bad in [(3, 2), (0, 99), (-1, 2)]:
        with pytest.raises(ValueError, match="iteration_range"):
            treeimp.parse(booster, iteration_range=bad)
    with pytest.raises(TypeError, match="pair of integers"):
        treeimp.parse(booster, iteration_range=5)
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y > 0)
    with pytest.raises(ValueError, match="forest"):
        treeimp.parse(forest, iteration_range=(0, 2))


def test_file_with_best_iteration_warns_and_reads_all_trees(early_stopped, tmp_path):
    m, X, y = early_stopped
    booster = m.get_booster()
    path = str(tmp_path / "m.json")
    booster.save_model(path)
    with pytest.warns(UserWarning, match=rf"best_iteration={m.best_iteration}.*"
                                         r"iteration_range=\(0, "):
        ens = treeimp.load(path)
    loaded = xgb.Booster(model_file=path)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0],
                               loaded.predict(xgb.DMatrix(X), output_margin=True), **XGB_TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        best = treeimp.load(path, iteration_range=(0, m.best_iteration + 1))
        np.testing.assert_allclose(best.predict_raw(X)[:, 0],
                                   m.predict(X, output_margin=True), **XGB_TOL)
        _assert_pi_equal(path, m, X, y, iteration_range=(0, m.best_iteration + 1))


def test_lightgbm_best_iteration():
    X, y = _regression(600)
    # keep_training_booster: the booster keeps the rounds after best_iteration (the
    # scikit-learn wrapper reloads itself with the best rounds only)
    m = lgb.train({"num_leaves": 7, "learning_rate": 0.5, "verbose": -1},
                  lgb.Dataset(X[:300], y[:300]), num_boost_round=200,
                  valid_sets=[lgb.Dataset(X[300:450], y[300:450])],
                  callbacks=[lgb.early_stopping(3, verbose=False)],
                  keep_training_booster=True)
    assert 0 < m.best_iteration < m.current_iteration()
    ens = treeimp.parse(m)
    assert ens.n_rounds == m.best_iteration
    Xv, yv = X[450:], y[450:]
    np.testing.assert_allclose(ens.predict_raw(Xv)[:, 0], m.predict(Xv, raw_score=True),
                               rtol=1e-12, atol=1e-12)
    ref = m.predict(Xv, raw_score=True, start_iteration=1, num_iteration=3)
    np.testing.assert_allclose(treeimp.parse(m, iteration_range=(1, 4)).predict_raw(Xv)[:, 0],
                               ref, rtol=1e-12, atol=1e-12)
    _assert_pi_equal(m, Predictor(m.predict), Xv, yv, tol=dict(rtol=1e-9, atol=1e-12))


# ---------------------------------------------------------------- 2. missing sentinel
@pytest.fixture(scope="module")
def sentinel_model():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(700, 4))
    gone = rng.random(X.shape) < 0.25
    X[gone] = -999.0
    y = np.where(gone[:, 0], 3.0, X[:, 0]) - X[:, 1] * (~gone[:, 1]) + rng.normal(
        scale=0.2, size=700)
    m = xgb.XGBRegressor(n_estimators=15, max_depth=3, missing=-999.0).fit(X[:400], y[:400])
    return m, X[400:], y[400:]


def test_wrapper_missing_is_honoured(sentinel_model):
    m, X, y = sentinel_model
    ens = treeimp.parse(m)
    assert ens.missing_value == -999.0
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], m.predict(X, output_margin=True),
                               **XGB_TOL)
    # -999 read as a number would route differently
    plain = treeimp.parse(m.get_booster())
    assert np.abs(plain.predict_raw(X) - ens.predict_raw(X)).max() > 0.1
    # XGBoost compares in float32: -999.00001 is missing too, -999.001 is not
    Z = X.copy()
    Z[:, 0] = np.where(Z[:, 0] == -999.0, -999.00001, Z[:, 0])
    Z[:5, 1] = -999.001
    np.testing.assert_allclose(ens.predict_raw(Z)[:, 0], m.predict(Z, output_margin=True),
                               **XGB_TOL)
    _assert_pi_equal(m, m, X, y)
    Xc = X.copy()
    treeimp.explain(m, Xc, y, random_state=0)
    np.testing.assert_array_equal(Xc, X)  # X is never written into


def test_booster_and_file_missing_keyword(sentinel_model, tmp_path):
    m, X, y = sentinel_model
    booster = m.get_booster()
    ref = booster.predict(xgb.DMatrix(X, missing=-999.0), output_margin=True)
    ens = treeimp.parse(booster, missing=-999)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], ref, **XGB_TOL)
    np.testing.assert_allclose(ens.predict_raw(X.astype(np.float32))[:, 0], ref, **XGB_TOL)
    path = str(tmp_path / "m.ubj")
    booster.save_model(path)
    from_file = treeimp.load(path, missing=-999.0)
    np.testing.assert_allclose(from_file.predict_raw(X)[:, 0], ref, **XGB_TOL)
    deployed = Predictor(lambda Z: booster.predict(xgb.DMatrix(Z, missing=-999.0)))
    _assert_pi_equal(path, deployed, X, y, missing=-999.0)
    a = treeimp.explain(booster, X, y, missing=-999.0, random_state=0).table
    b = treeimp.explain(m, X, y, random_state=0).table
    pd.testing.assert_frame_equal(a, b)
    with pytest.raises(ValueError, match="sentinel"):
        treeimp.parse(lgb.LGBMRegressor(n_estimators=2, verbose=-1).fit(X, y), missing=-1)
    with pytest.raises(TypeError, match="missing must be a number"):
        treeimp.parse(booster, missing="NA")


# ---------------------------------------------------------------- 3. sparse input
def _sparse_data(seed=2, n=500, F=6):
    """CSR with explicit zeros (stored) and absent entries, and its target."""
    rng = np.random.default_rng(seed)
    S = sp.random(n, F, density=0.5, format="csr", random_state=seed,
                  data_rvs=lambda k: rng.normal(size=k))
    S.data[rng.random(S.data.size) < 0.2] = 0.0  # explicit zeros stay stored
    assert S.nnz > np.count_nonzero(S.data) > 0
    D = S.toarray()
    y = D[:, 0] - 2 * D[:, 1] + (D[:, 2] > 0) + rng.normal(scale=0.2, size=n)
    return S, y


def _densified_nan(S):
    """S with absent entries NaN and stored entries (explicit zeros too) as they are."""
    D = np.full(S.shape, np.nan)
    C = S.tocoo()
    D[C.row, C.col] = C.data
    return D


SPARSE_MODELS = [
    ("xgboost", lambda: xgb.XGBRegressor(n_estimators=12, max_depth=3), XGB_TOL),
    ("lightgbm", lambda: lgb.LGBMRegressor(n_estimators=12, num_leaves=7, verbose=-1,
                                           min_child_samples=5),
     dict(rtol=1e-9, atol=1e-12)),
    ("sklearn", lambda: GradientBoostingRegressor(n_estimators=12, max_depth=3,
                                                  random_state=0),
     dict(rtol=1e-9, atol=1e-12)),
]


@pytest.mark.parametrize("name,make,tol", SPARSE_MODELS, ids=[c[0] for c in SPARSE_MODELS])
def test_sparse_equals_library(name, make, tol, monkeypatch):
    S, y = _sparse_data()
    model = make().fit(S[:300], y[:300])
    Sv, yv = S[300:], y[300:]
    ens = treeimp.parse(model)
    ref = (model.predict(Sv, output_margin=True) if name == "xgboost" else
           model.predict(Sv, raw_score=True) if name == "lightgbm" else model.predict(Sv))
    monkeypatch.setattr(_input, "SPARSE_CHUNK_VALUES", 6 * 37)  # several chunks of 37 rows
    sizes = [c.shape[0] for _, c in RowSource(Sv, ens).chunks(split=True)]
    assert max(sizes) == 37 and sum(sizes) == Sv.shape[0]  # never all rows made dense
    for fmt in (Sv, Sv.tocsc(), sp.csr_array(Sv), sp.csc_array(Sv), Sv.tocoo()):
        np.testing.assert_allclose(ens.predict_raw(fmt)[:, 0], ref, **tol)
    # what the library reads an absent entry as: XGBoost missing, the others zero
    dense = _densified_nan(Sv) if name == "xgboost" else Sv.toarray()
    np.testing.assert_array_equal(ens.apply(Sv), ens.apply(dense))
    if name == "xgboost":  # absent is not zero here: the test can tell them apart
        assert np.abs(ens.predict_raw(Sv.toarray())[:, 0] - ref).max() > 0.01
    a = treeimp.explain(model, Sv, yv, random_state=0).table
    b = treeimp.explain(model, dense, yv, random_state=0).table
    pd.testing.assert_frame_equal(a, b)
    # scikit-learn's permutation_importance refuses sparse X ("must be an array-like");
    # the reference is the model on the dense equivalent, which it predicts the same
    np.testing.assert_allclose(model.predict(dense), model.predict(Sv), **tol)
    _assert_pi_equal(model, model, Sv, yv, X_ref=dense, tol=tol)


def test_sparse_forest_apply_and_errors():
    S, y = _sparse_data(seed=3)
    rf = RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0).fit(S, y > 0)
    ens = treeimp.parse(rf)
    np.testing.assert_array_equal(ens.apply(S.tocsc()), rf.apply(S))
    np.testing.assert_allclose(ens.predict_raw(S), rf.predict_proba(S), rtol=1e-12)
    with pytest.raises(ValueError, match="columns"):
        ens.predict_raw(S[:, :4])
    with pytest.raises(TypeError, match="numeric"):
        ens.predict_raw(sp.csr_matrix(np.ones((3, 6), dtype=np.complex128)))


# ---------------------------------------------------------------- 4. any DataFrame
@pytest.fixture(scope="module")
def named_model():
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(4)
    n = 500
    df = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n),
                       "c": pd.Categorical(rng.choice(["x", "y", "z"], n)),
                       "d": rng.integers(0, 5, n)})
    y = df.a - (df.c == "y") * 2 + 0.3 * df.d + rng.normal(scale=0.2, size=n)
    m = xgb.XGBRegressor(n_estimators=10, max_depth=3, enable_categorical=True,
                         tree_method="hist").fit(df[:300], y[:300])
    return m, df[300:].reset_index(drop=True), y[300:].to_numpy(), pl


def test_polars_and_arrow_by_name(named_model):
    import pyarrow as pa

    m, df, y, pl = named_model
    ens = treeimp.parse(m)
    ref = m.predict(df, output_margin=True)
    pdf = pl.from_pandas(df)
    assert pdf.schema["c"] == pl.Categorical
    np.testing.assert_allclose(ens.predict_raw(pdf)[:, 0], ref, **XGB_TOL)
    enum = pdf.with_columns(pl.col("c").cast(pl.String).cast(pl.Enum(["z", "y", "x"])))
    np.testing.assert_allclose(ens.predict_raw(enum)[:, 0], ref, **XGB_TOL)
    # chunk by chunk (a slice of a polars column may list other categories)
    whole = np.concatenate([c for _, c in RowSource(df, ens).chunks()])
    for frame in (pdf, enum, pdf[::-1][::-1]):
        parts = np.concatenate([c for _, c in RowSource(frame, ens).chunks(chunk_rows=7)])
        np.testing.assert_array_equal(parts, whole)
    table = pa.Table.from_pandas(df)
    np.testing.assert_allclose(ens.predict_raw(table)[:, 0], ref, **XGB_TOL)
    pd.testing.assert_frame_equal(treeimp.explain(m, pdf, y, random_state=0).table,
                                  treeimp.explain(m, df, y, random_state=0).table)
    ours = treeimp.permutation_importance(m, pdf, y, n_repeats=3, random_state=1)
    theirs = sk_permutation_importance(m, df, y, n_repeats=3, random_state=1)
    np.testing.assert_allclose(ours.importances, theirs.importances, **XGB_TOL)
    # reordered columns: the same error as for pandas, never read by position
    for frame in (pdf.select(["b", "a", "c", "d"]), table.select(["b", "a", "c", "d"]),
                  df[["b", "a", "c", "d"]]):
        with pytest.raises(ValueError, match="different order"):
            treeimp.explain(m, frame, y)
    with pytest.raises(ValueError, match="do not match"):
        ens.predict_raw(pdf.rename({"a": "q"}))
    with pytest.raises(TypeError, match="dtype"):
        ens.predict_raw(pdf.with_columns(pl.col("c").cast(pl.String)))
    with pytest.raises(TypeError, match="collect"):
        ens.predict_raw(pdf.lazy())


def test_polars_categories_on_lightgbm():
    pl = pytest.importorskip("polars")
    rng = np.random.default_rng(8)
    n = 400
    df = pd.DataFrame({"c": pd.Categorical(rng.choice(["u", "v", "w", "z"], n)),
                       "v": rng.normal(size=n)})
    y = (df.c == "w") * 2.0 + df.v + rng.normal(scale=0.3, size=n)
    m = lgb.LGBMRegressor(n_estimators=8, num_leaves=5, verbose=-1,
                          min_data_per_group=5, cat_smooth=1).fit(df, y)
    frame = pl.from_pandas(df).with_columns(
        pl.col("c").cast(pl.String).cast(pl.Enum(["z", "w", "v", "u"])))  # other order
    np.testing.assert_allclose(treeimp.parse(m).predict_raw(frame)[:, 0],
                               m.predict(df, raw_score=True), rtol=1e-12)


def test_polars_numeric_with_nulls_on_a_nameless_model():
    pl = pytest.importorskip("polars")
    X, y = _regression(300, F=4)
    X[::7, 1] = np.nan
    m = lgb.LGBMRegressor(n_estimators=8, num_leaves=7, verbose=-1).fit(X, y)
    frame = pl.DataFrame({"p": X[:, 0], "q": pl.Series(X[:, 1]).fill_nan(None),
                          "r": X[:, 2], "s": (X[:, 3] > 0)})
    X[:, 3] = X[:, 3] > 0
    assert frame["q"].null_count() > 0
    np.testing.assert_allclose(treeimp.parse(m).predict_raw(frame)[:, 0],
                               m.predict(X, raw_score=True), rtol=1e-12)


# ---------------------------------------------------------------- 5. offsets
def _exposure_data(seed=5, n=700):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    exposure = rng.uniform(0.2, 3.0, n)
    y = rng.poisson(exposure * np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1]))
    return X, y.astype(float), np.log(exposure)


def test_xgboost_poisson_base_margin():
    X, y, off = _exposure_data()
    m = xgb.XGBRegressor(objective="count:poisson", n_estimators=15, max_depth=3)
    m.fit(X[:400], y[:400], base_margin=off[:400])
    Xv, yv, ov = X[400:], y[400:], off[400:]
    ens = treeimp.parse(m)
    ref = m.predict(Xv, output_margin=True, base_margin=ov)  # base_margin replaces base score
    np.testing.assert_allclose(ens.predict_raw(Xv, base_margin=ov)[:, 0], ref, **XGB_TOL)
    np.testing.assert_allclose(ens.predict_raw(Xv, base_margin=ov[:, None])[:, 0], ref,
                               **XGB_TOL)
    _, staged = staged_pass(ens, RowSource(Xv, ens), yv, np.ones(1),
                            np.arange(len(yv), dtype=np.int32) % 3, 3,
                            base_margin=ov[:, None])
    np.testing.assert_allclose(staged[:, 0], ref, **XGB_TOL)
    deployed = Predictor(lambda Z: m.predict(Z, base_margin=ov))
    _assert_pi_equal(m, deployed, Xv, yv, base_margin=ov)
    with_offset = treeimp.explain(m, Xv, yv, base_margin=ov, random_state=0).table
    without = treeimp.explain(m, Xv, yv, random_state=0).table
    assert not np.allclose(with_offset.mdi_oob, without.mdi_oob)
    with pytest.raises(ValueError, match="base_margin has shape"):
        treeimp.explain(m, Xv, yv, base_margin=ov[:-1])
    with pytest.raises(ValueError, match="finite"):
        ens.predict_raw(Xv, base_margin=np.full(len(ov), np.nan))


def test_lightgbm_poisson_init_score():
    X, y, off = _exposure_data(seed=6)
    m = lgb.LGBMRegressor(objective="poisson", n_estimators=15, num_leaves=7, verbose=-1)
    m.fit(X[:400], y[:400], init_score=off[:400])
    Xv, yv, ov = X[400:], y[400:], off[400:]
    ens = treeimp.parse(m)
    ref = m.predict(Xv, raw_score=True) + ov  # LightGBM: init_score + raw score
    tol = dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(ens.predict_raw(Xv, base_margin=ov)[:, 0], ref, **tol)
    _, staged = staged_pass(ens, RowSource(Xv, ens), yv, np.ones(1),
                            np.zeros(len(yv), np.int32), 1, base_margin=ov[:, None])
    np.testing.assert_allclose(staged[:, 0], ref, **tol)
    deployed = Predictor(lambda Z: np.exp(m.predict(Z, raw_score=True) + ov))
    _assert_pi_equal(m, deployed, Xv, yv, base_margin=ov, tol=dict(rtol=1e-9, atol=1e-12))
    forest = RandomForestClassifier(n_estimators=2).fit(Xv, yv > 1)
    with pytest.raises(ValueError, match="forest"):
        treeimp.explain(forest, Xv, yv > 1, base_margin=ov)


# ---------------------------------------------------------------- the command line
def test_cli_nameless_model_needs_columns_by_position(tmp_path, capsys):
    from treeimp.cli.main import main

    X, y = _regression(400)
    booster = xgb.train({"max_depth": 3}, xgb.DMatrix(X[:250], y[:250]), 8)  # no names
    model = str(tmp_path / "m.json")
    booster.save_model(model)
    cols = [f"f{j}" for j in range(X.shape[1])]
    frame = pd.DataFrame(X[250:], columns=cols).assign(y=y[250:])
    ordered, reordered = str(tmp_path / "o.csv"), str(tmp_path / "r.csv")
    frame.to_csv(ordered, index=False)
    frame[cols[::-1] + ["y"]].to_csv(reordered, index=False)
    code = main(["explain", model, reordered, "--target", "y"])
    err = capsys.readouterr().err
    assert code == 2 and "--columns-by-position" in err and "no feature names" in err
    code = main(["explain", model, ordered, "--target", "y", "--columns-by-position",
                 "--format", "csv", "--seed", "0"])
    out = capsys.readouterr().out
    assert code == 0
    got = pd.read_csv(__import__("io").StringIO(out)).pivot(index="feature", columns="method",
                                                             values="importance")
    # the file's learning rate is derived from its node weights: the file is the reference
    ref = treeimp.explain(treeimp.load(model), X[250:], y[250:], random_state=0).table
    np.testing.assert_allclose(got.loc[ref.index.str.replace("x", "f"), ref.columns]
                               .to_numpy(), ref.to_numpy(), rtol=1e-12)


def test_cli_best_iteration_warning_and_iteration_range(early_stopped, tmp_path, capsys):
    from treeimp.cli.main import main

    m, X, y = early_stopped
    model = str(tmp_path / "m.json")
    m.get_booster().save_model(model)  # stores best_iteration (no feature names)
    data = str(tmp_path / "d.csv")
    pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])]).assign(y=y).to_csv(
        data, index=False)
    pos = "--columns-by-position"
    assert main(["explain", model, data, "--target", "y", "--format", "json", pos]) == 0
    assert "best_iteration" in capsys.readouterr().err
    best = f"0,{m.best_iteration + 1}"
    assert main(["explain", model, data, "--target", "y", "--format", "json", "--seed", "0",
                 "--iteration-range", best, pos]) == 0
    captured = capsys.readouterr()
    assert "best_iteration" not in captured.err
    ref = treeimp.explain(model, X, y, random_state=0,
                          iteration_range=(0, m.best_iteration + 1))
    import json

    got = {(r["feature"], r["method"]): r["importance"] for r in json.loads(captured.out)}
    for f, row in ref.table.rename(index=lambda s: s.replace("x", "f")).iterrows():
        for method, value in row.items():
            np.testing.assert_allclose(got[(f, method)], value, rtol=1e-9)
    assert main(["explain", model, data, "--target", "y", "--iteration-range", "5", pos]) == 2
    assert "--iteration-range" in capsys.readouterr().err


def test_cli_pickled_early_stopped_wrapper(early_stopped, tmp_path, capsys):
    """A pickled early-stopped wrapper through the CLI is explained with the rounds its
    predict uses (best_iteration + 1), as the API explains the object."""
    import json
    import pickle

    from treeimp.cli.main import main

    m, X, y = early_stopped
    model = tmp_path / "m.pkl"
    model.write_bytes(pickle.dumps(m))
    data = str(tmp_path / "d.csv")
    pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])]).assign(y=y).to_csv(
        data, index=False)
    assert main(["explain", str(model), data, "--target", "y", "--format", "json", "--seed",
                 "0", "--trust-pickle", "--columns-by-position"]) == 0
    got = {(r["feature"], r["method"]): r["importance"]
           for r in json.loads(capsys.readouterr().out)}
    ref = treeimp.explain(m, X, y, random_state=0)
    every = treeimp.explain(m, X, y, random_state=0, iteration_range=(0, 0))
    for f, row in ref.table.iterrows():
        for method, value in row.items():
            np.testing.assert_allclose(got[(f, method)], value, rtol=1e-9)
    assert not np.allclose(ref.table["mdi_oob"], every.table["mdi_oob"], rtol=1e-3)


def test_cli_missing_sentinel(sentinel_model, tmp_path, capsys):
    import json

    from treeimp.cli.main import main

    m, X, y = sentinel_model
    model = str(tmp_path / "m.ubj")
    m.get_booster().save_model(model)
    data = str(tmp_path / "d.csv")
    pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])]).assign(y=y).to_csv(
        data, index=False)
    assert main(["explain", model, data, "--target", "y", "--format", "json", "--seed", "0",
                 "--columns-by-position", "--missing", "-999"]) == 0
    got = {(r["feature"], r["method"]): r["importance"]
           for r in json.loads(capsys.readouterr().out)}
    ref = treeimp.explain(model, X, y, missing=-999, random_state=0).table
    for f, row in ref.rename(index=lambda s: s.replace("x", "f")).iterrows():
        for method, value in row.items():
            np.testing.assert_allclose(got[(f, method)], value, rtol=1e-9, atol=1e-12)
    # and the sentinel matters: without it the numbers differ
    plain = treeimp.explain(model, X, y, random_state=0).table
    assert not np.allclose(plain.mdi_oob, ref.mdi_oob)


def test_multiclass_offsets_and_rounds():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(450, 4))
    y = np.digitize(X[:, 0] + rng.normal(scale=0.5, size=450), [-0.5, 0.5])
    B = rng.normal(scale=0.5, size=(450, 3))
    m = xgb.XGBClassifier(n_estimators=8, max_depth=3).fit(X[:300], y[:300],
                                                           base_margin=B[:300])
    Xv, yv, Bv = X[300:], y[300:], B[300:]
    ens = treeimp.parse(m)
    ref = m.predict(Xv, output_margin=True, base_margin=Bv)
    np.testing.assert_allclose(ens.predict_raw(Xv, base_margin=Bv), ref, **XGB_TOL)
    part = ens.rounds(3, 0)  # stop 0: to the last round
    booster = m.get_booster()
    np.testing.assert_allclose(
        part.predict_raw(Xv, base_margin=Bv),
        booster.predict(xgb.DMatrix(Xv, base_margin=Bv), output_margin=True,
                        iteration_range=(3, 8)), **XGB_TOL)
    _, staged = staged_pass(part, RowSource(Xv, part), yv, np.ones(1),
                            np.zeros(len(yv), np.int32), 1, base_margin=Bv)
    np.testing.assert_allclose(staged, part.predict_raw(Xv, base_margin=Bv), rtol=1e-12)
    with pytest.raises(ValueError, match=r"\(150, 3\)"):
        ens.predict_raw(Xv, base_margin=Bv[:, 0])
    lg = lgb.LGBMClassifier(n_estimators=6, num_leaves=5, verbose=-1).fit(
        X[:300], y[:300], init_score=B[:300])
    np.testing.assert_allclose(treeimp.parse(lg).predict_raw(Xv, base_margin=Bv),
                               lg.predict(Xv, raw_score=True) + Bv, rtol=1e-12, atol=1e-12)
    ours = treeimp.permutation_importance(lg, Xv, yv, scoring="neg_log_loss", n_repeats=2,
                                          random_state=0, base_margin=Bv)

    class Offset(Predictor):
        classes_ = np.arange(3)
        _estimator_type = "classifier"

        def predict_proba(self, Z):
            from scipy.special import softmax

            return softmax(lg.predict(Z, raw_score=True) + Bv, axis=1)

    theirs = sk_permutation_importance(Offset(), Xv, yv, scoring="neg_log_loss", n_repeats=2,
                                       random_state=0)
    np.testing.assert_allclose(ours.importances, theirs.importances, rtol=1e-9, atol=1e-12)


def test_selector_honours_the_wrappers_missing():
    rng = np.random.default_rng(9)
    n = 1500
    X = rng.normal(size=(n, 4))
    gone = rng.random(n) < 0.3
    X[gone, 0] = -999.0
    y = np.where(gone, 2.0, X[:, 0]) + rng.normal(scale=0.3, size=n)
    sel = treeimp.ImportanceSelector(
        xgb.XGBRegressor(n_estimators=20, max_depth=3, missing=-999.0), random_state=0)
    sel.fit(X, y)
    assert sel.estimator_.missing == -999.0
    assert sel.get_support(indices=True).tolist() == [0]


def test_selector_on_sparse_input_equals_the_dense_equivalent():
    """ImportanceSelector accepts CSR / CSC X. LightGBM reads an absent entry as 0, so the
    same selector on the dense array with zeros must select the same columns with the
    same importances; transform keeps X sparse."""
    S, y = _sparse_data(seed=4, n=900)

    def selector():
        return treeimp.ImportanceSelector(
            lgb.LGBMRegressor(n_estimators=20, num_leaves=7, min_child_samples=5,
                              verbose=-1, n_jobs=1), cv=3, random_state=0)

    sparse = selector().fit(S, y)
    dense = selector().fit(S.toarray(), y)
    pd.testing.assert_frame_equal(sparse.importances_.table, dense.importances_.table,
                                  rtol=1e-9, atol=1e-12)
    assert sparse.support_.tolist() == dense.support_.tolist()
    assert sparse.support_[:2].all()
    out = sparse.transform(S.tocsc())
    assert sp.issparse(out) and out.shape == (S.shape[0], int(sparse.support_.sum()))
    np.testing.assert_array_equal(out.toarray(), S.toarray()[:, sparse.support_])

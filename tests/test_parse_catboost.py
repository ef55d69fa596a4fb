"""CatBoost parser: predict_raw / apply against CatBoost's own raw prediction and
calc_leaf_indexes, on rows with NaN, borders and one float32 ulp either side, +-inf,
huge values and unseen categories; CTR models routed by CatBoost's leaf indices;
model files; in-sample mdi against CatBoost's PredictionValuesChange."""

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import treeimp
from treeimp.parsers.catboost import catboost_leaf_ids
from treeimp.parsers.catboost_hash import cat_feature_hash, city_hash64

catboost = pytest.importorskip("catboost")

N = 300
COMMON = dict(iterations=5, depth=3, random_seed=0, verbose=0, allow_writing_files=False,
              thread_count=1)


def _data(seed=0, n=N):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({"x0": rng.normal(size=n), "x1": rng.normal(size=n),
                      "s": rng.choice(["red", "green", "blue", "cyan"], size=n),
                      "k": rng.integers(0, 3, size=n)})
    X.loc[rng.random(n) < 0.15, "x0"] = np.nan
    y = (np.nan_to_num(X["x0"].to_numpy(), nan=1.5) + 0.5 * X["x1"] + (X["s"] == "red")
         + 0.7 * (X["k"] == 2) + rng.normal(size=n) * 0.1)
    return X, y.to_numpy()


def _fit(kind, *, cat=True, seed=0, **params):
    X, y = _data(seed)
    if not cat:
        X = X[["x0", "x1"]]
    cats = [c for c in ("s", "k") if c in X.columns]
    if kind == "regression":
        cls, target = catboost.CatBoostRegressor, y
    elif kind == "binary":
        cls, target = catboost.CatBoostClassifier, (y > 1).astype(int)
    else:
        cls, target = catboost.CatBoostClassifier, np.digitize(y, [0.5, 1.5])
        params.setdefault("loss_function", "MultiClass")
    params.setdefault("one_hot_max_size", 4)
    model = cls(**COMMON, **params, cat_features=cats).fit(X, target)
    return model, X, target


def _edge_rows(model, X, rng, n_rows=200):
    """Rows of X with numeric cells replaced by borders and their float32 neighbours,
    NaN, +-inf, huge values, and categories replaced by unseen ones."""
    rows = X.iloc[rng.integers(0, len(X), n_rows)].reset_index(drop=True).copy()
    borders = model.get_borders()
    numeric = [j for j, c in enumerate(X.columns) if c in ("x0", "x1")]
    specials = [np.nan, np.inf, -np.inf, 3e38, -3e38, 1e300, -1e300, 0.0]
    for i in range(n_rows):
        for j in numeric:
            u = rng.random()
            b = borders.get(j, [])
            if u < 0.5 and len(b):
                f = np.float32(b[rng.integers(len(b))])
                options = [f, np.nextafter(f, np.float32(np.inf)),
                           np.nextafter(f, np.float32(-np.inf))]
                rows.iat[i, j] = float(options[rng.integers(3)])
            elif u < 0.75:
                rows.iat[i, j] = specials[rng.integers(len(specials))]
        if "s" in rows.columns and rng.random() < 0.2:
            rows.at[i, "s"] = "never-seen"
        if "k" in rows.columns and rng.random() < 0.2:
            rows.at[i, "k"] = 99
    return rows


def _leaf_numbers(ens, nodes):
    """apply()'s local nodes -> CatBoost's leaf index, one column per CatBoost tree."""
    ids = catboost_leaf_ids(ens)
    cols = np.arange(0, ens.n_trees, ens.n_outputs)
    return ids[ens.tree_offsets[cols] + nodes[:, cols]]


def _check(model, rows, ens=None):
    ens = treeimp.parse(model) if ens is None else ens
    raw = np.asarray(model.predict(rows, prediction_type="RawFormulaVal"), np.float64)
    np.testing.assert_allclose(ens.predict_raw(rows), raw.reshape(len(rows), -1),
                               rtol=1e-12, atol=1e-12)
    nodes = ens.apply(rows)
    np.testing.assert_array_equal(_leaf_numbers(ens, nodes), model.calc_leaf_indexes(rows))
    return ens, nodes


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
@pytest.mark.parametrize("cat", [False, True])
def test_predict_and_apply_match_catboost_on_edge_rows(kind, cat):
    model, X, _ = _fit(kind, cat=cat, nan_mode="Max" if kind == "binary" else "Min")
    ens, nodes = _check(model, _edge_rows(model, X, np.random.default_rng(1)))
    assert ens.library == "catboost" and ens.leaf_router is None
    # symmetric trees: CatBoost's leaf L is node 2^D - 1 + L
    np.testing.assert_array_equal(nodes[:, ::ens.n_outputs] - 7, model.calc_leaf_indexes(
        _edge_rows(model, X, np.random.default_rng(1))))
    assert ens.n_outputs == (3 if kind == "multiclass" else 1)
    if cat:
        assert ens.hashed_features == (2, 3)


@pytest.mark.parametrize("nan_mode", ["Min", "Max", "Forbidden"])
def test_nan_modes(nan_mode):
    X, y = _data(2)
    X = X[["x0", "x1"]]
    if nan_mode == "Forbidden":
        X = X.fillna(0.3)
    model = catboost.CatBoostRegressor(**COMMON, nan_mode=nan_mode).fit(X, y)
    rows = _edge_rows(model, X, np.random.default_rng(3))
    _check(model, rows)


@pytest.mark.parametrize("policy", ["Depthwise", "Lossguide"])
@pytest.mark.parametrize("kind", ["regression", "multiclass"])
def test_non_symmetric_trees(policy, kind):
    extra = {"max_leaves": 6} if policy == "Lossguide" else {}
    model, X, _ = _fit(kind, cat=False, grow_policy=policy, **extra)
    _check(model, _edge_rows(model, X, np.random.default_rng(4)))
    mdi = treeimp.explain(model, X, methods=("mdi",)).table["mdi"].to_numpy()
    np.testing.assert_allclose(100 * mdi / mdi.sum(), model.get_feature_importance(),
                               rtol=1e-9)


def test_numpy_rows_with_raw_categories():
    """Integer categories in a float array, and strings in an object array."""
    X, y = _data(8)
    Xk = X[["x0", "x1", "k"]]
    model = catboost.CatBoostClassifier(**COMMON, one_hot_max_size=4, cat_features=[2]).fit(
        Xk, (X["x0"].fillna(0) + X["k"] > 1).astype(int))
    arr = Xk.to_numpy(np.float64)
    arr[::9, 2] = 42  # unseen
    ens = treeimp.parse(model)
    raw = model.predict(pd.DataFrame({"x0": arr[:, 0], "x1": arr[:, 1],
                                      "k": arr[:, 2].astype(int)}),
                        prediction_type="RawFormulaVal")
    np.testing.assert_allclose(ens.predict_raw(arr)[:, 0], raw, rtol=1e-12, atol=1e-12)

    model, X, _ = _fit("binary")
    obj = X.to_numpy(dtype=object)
    obj[::7, 2] = "unseen"
    raw = model.predict(pd.DataFrame(obj, columns=X.columns).astype(
        {"x0": float, "x1": float}), prediction_type="RawFormulaVal")
    np.testing.assert_allclose(treeimp.parse(model).predict_raw(obj)[:, 0], raw,
                               rtol=1e-12, atol=1e-12)
    obj[0, 1] = "text"
    with pytest.raises(TypeError, match="column 1 holds values that are not numbers"):
        treeimp.parse(model).predict_raw(obj)


def test_pandas_category_columns_route_by_label():
    model, X, _ = _fit("binary")
    Xc = X.astype({"s": "category"})
    rows = Xc.copy()
    rows["s"] = pd.Categorical(np.where(np.arange(N) % 5 == 0, "new", X["s"]))
    ens = treeimp.parse(model)
    raw = model.predict(rows.astype({"s": str}), prediction_type="RawFormulaVal")
    np.testing.assert_allclose(ens.predict_raw(rows)[:, 0], raw, rtol=1e-12, atol=1e-12)


def test_mdi_is_catboost_prediction_values_change():
    for kind in ("regression", "binary", "multiclass"):
        model, X, _ = _fit(kind)
        mdi = treeimp.explain(model, X, methods=("mdi",)).table["mdi"].to_numpy()
        np.testing.assert_allclose(100 * mdi / mdi.sum(), model.get_feature_importance(),
                                   rtol=1e-9)


def test_file_equals_object(tmp_path):
    for kind in ("regression", "binary", "multiclass"):
        model, X, _ = _fit(kind)
        path = tmp_path / f"{kind}.json"
        model.save_model(str(path), format="json")
        a, b = treeimp.parse(model), treeimp.load(path)
        np.testing.assert_array_equal(a.predict_raw(X), b.predict_raw(X))
        np.testing.assert_array_equal(a.apply(X), b.apply(X))
        assert a.objective.name == b.objective.name


def test_scale_and_bias():
    X, y = _data(5)
    X = X[["x0", "x1"]]
    model = catboost.CatBoostRegressor(**COMMON).fit(X, y + 10.0)
    model.set_scale_and_bias(0.5, 3.0)
    ens, _ = _check(model, X)
    assert ens.tree_scale[0] == 0.5


def test_hash_matches_catboost_hash_map(tmp_path):
    """CityHash 1.0 of strings of every length 0..150 against the hash -> value map
    CatBoost writes into a JSON model saved with its training pool."""
    rng = np.random.default_rng(7)
    alphabet = list("abcdefghijklmnopqrstuvwxyzABC0123456789 _-äé€")
    vals = list(dict.fromkeys("".join(rng.choice(alphabet, size=L)) for L in range(151)))
    X = pd.DataFrame({"c": vals, "x": rng.normal(size=len(vals))})
    y = rng.normal(size=len(vals))
    model = catboost.CatBoostRegressor(iterations=1, depth=1, verbose=0,
                                       allow_writing_files=False,
                                       cat_features=[0]).fit(X, y)
    path = tmp_path / "m.json"
    model.save_model(str(path), format="json", pool=catboost.Pool(X, y, cat_features=[0]))
    table = {e["hash"]: e["value"] for e in
             json.loads(path.read_text())["features_info"]["cat_features_hash"]}
    assert len(table) == len(vals)
    for v in vals:
        assert table[cat_feature_hash(v) & 0xFFFFFFFF] == v
    assert city_hash64(b"") == 0x9AE16A3B2F90404F  # k2: the empty string's hash


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(
    st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32),
              st.floats(-3.0, 3.0)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["red", "green", "blue", "cyan", "other", ""]),
    st.integers(-5, 5)), min_size=1, max_size=20))
def test_hypothesis_rows(rows):
    model = _HYPO_MODEL
    X = pd.DataFrame(rows, columns=["x0", "x1", "s", "k"])
    raw = np.asarray(model.predict(X, prediction_type="RawFormulaVal"), np.float64)
    ens = _HYPO_ENS
    np.testing.assert_allclose(ens.predict_raw(X), raw.reshape(len(X), -1), rtol=1e-12,
                               atol=1e-12)
    np.testing.assert_array_equal(_leaf_numbers(ens, ens.apply(X)),
                                  model.calc_leaf_indexes(X))


_HYPO_MODEL = _fit("multiclass")[0]
_HYPO_ENS = treeimp.parse(_HYPO_MODEL)


# ---------------------------------------------------------------- CTR models
def _ctr_model(**params):
    X, y = _data(6)
    model = catboost.CatBoostRegressor(**COMMON, one_hot_max_size=1, **params).fit(
        X, y, cat_features=["s", "k"])
    return model, X, y


@pytest.mark.parametrize("policy", ["SymmetricTree", "Depthwise"])
def test_ctr_model_routed_by_catboost_leaf_indices(tmp_path, policy):
    model, X, y = _ctr_model(grow_policy=policy)
    ens = treeimp.parse(model)
    assert ens.leaf_router is not None
    assert "calc_leaf_indexes" in ens.model_name and "calc_leaf_indexes" in repr(ens)
    rows = X.copy()
    rows.loc[::4, "s"] = "unseen"
    _check(model, rows, ens)
    res = treeimp.explain(model, rows, y, random_state=0)
    assert "calc_leaf_indexes" in repr(res)
    assert res.table.loc["s", "mdi_oob"] > 0
    # the same model as a file: a clear error naming the features
    path = tmp_path / "ctr.json"
    model.save_model(str(path), format="json")
    with pytest.raises(ValueError, match=r"target-statistic \(CTR\).*\['s'|\['k'"):
        treeimp.load(path)


def test_ctr_permutation_importance_equals_sklearn():
    from sklearn.inspection import permutation_importance

    model, X, y = _ctr_model()
    ours = treeimp.permutation_importance(model, X, y, n_repeats=2, random_state=0,
                                          scoring="r2")
    ref = permutation_importance(model, X, y, n_repeats=2, random_state=0, scoring="r2")
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-10, atol=1e-12)


def test_ctr_permutation_groups_and_offsets():
    """Leaf-routed models take groups (columns permuted jointly) and base_margin (the
    model predicting with that baseline), as the compiled path: checked against
    scikit-learn on a wrapper that predicts through CatBoost with the baseline and
    merges the group's columns into one column of tuples."""
    from sklearn.base import BaseEstimator, RegressorMixin
    from sklearn.inspection import permutation_importance

    model, X, y = _ctr_model()
    offset = np.random.default_rng(3).normal(size=len(y)).astype(np.float32)
    names = list(X.columns)
    group = ["s", names[0] if names[0] != "s" else names[1]]

    class Grouped(RegressorMixin, BaseEstimator):
        """One input column per group (the group's columns as a tuple), so that
        scikit-learn permutes them jointly."""

        def fit(self, Z, t):
            return self

        def predict(self, Z):
            frame = pd.DataFrame({c: [row[k] for row in Z.iloc[:, 0]]
                                  for k, c in enumerate(group)})
            for c in Z.columns[1:]:
                frame[c] = Z[c].to_numpy()
            return model.predict(catboost.Pool(frame[names], cat_features=["s", "k"],
                                               baseline=offset.astype(np.float64)))

        def __sklearn_is_fitted__(self):
            return True

    packed = pd.DataFrame({"g": list(zip(*(X[c] for c in group)))})
    for c in names:
        if c not in group:
            packed[c] = X[c].to_numpy()
    kw = dict(n_repeats=2, random_state=0, scoring="r2")
    ours = treeimp.permutation_importance(model, X, y, groups={"g": group},
                                          base_margin=offset.astype(np.float64), **kw)
    ref = permutation_importance(Grouped(), packed, y, **kw)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-10, atol=1e-12)
    plain = treeimp.permutation_importance(model, X, y, groups={"g": group}, **kw)
    assert np.abs(plain.importances - ours.importances).max() > 1e-6


# ---------------------------------------------------------------- damaged files
def test_corrupt_and_truncated_files(tmp_path):
    model, X, _ = _fit("binary")
    path = tmp_path / "m.json"
    model.save_model(str(path), format="json")
    text = path.read_text()
    for i, cut in enumerate([len(text) // 3, len(text) - 5, 40]):
        bad = tmp_path / f"cut{i}.json"
        bad.write_text(text[:cut])
        with pytest.raises(ValueError, match="CatBoost JSON model file"):
            treeimp.load(bad)
    doc = json.loads(text)
    damages = {
        "no_trees": lambda d: d.pop("oblivious_trees"),
        "leaf_values": lambda d: d["oblivious_trees"][0]["leaf_values"].pop(),
        "split_type": lambda d: d["oblivious_trees"][0]["splits"][0].update(
            split_type="Mystery"),
        "feature": lambda d: d["oblivious_trees"][0]["splits"][0].update(
            float_feature_index=77, cat_feature_index=77),
        "borders": lambda d: d["oblivious_trees"][1]["splits"][0].update(border="x"),
        "scale": lambda d: d.update(scale_and_bias=[1.0]),
        "leaf_nan": lambda d: d["oblivious_trees"][0].update(
            leaf_values=["a"] * len(d["oblivious_trees"][0]["leaf_values"])),
        "features": lambda d: d.update(features_info=[]),
    }
    for name, damage in damages.items():
        d = json.loads(text)
        damage(d)
        bad = tmp_path / f"{name}.json"
        bad.write_text(json.dumps(d))
        with pytest.raises(ValueError, match="CatBoost JSON model file"):
            treeimp.load(bad)
    del doc


@pytest.mark.parametrize("kind,scoring", [("binary", "neg_log_loss"), ("multiclass", None),
                                          ("regression", "r2")])
def test_permutation_importance_equals_sklearn(kind, scoring):
    from sklearn.inspection import permutation_importance

    model, X, y = _fit(kind)
    ours = treeimp.permutation_importance(model, X, y, n_repeats=3, random_state=0,
                                          scoring=scoring)
    ref = permutation_importance(model, X, y, n_repeats=3, random_state=0,
                                 scoring=scoring)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-9, atol=1e-12)


def test_boolean_categories_and_missing_values():
    """CatBoost hashes booleans as "1" / "0"; a missing category (which CatBoost refuses)
    is routed as an unseen one."""
    rng = np.random.default_rng(11)
    X = pd.DataFrame({"b": rng.random(N) < 0.5, "x": rng.normal(size=N),
                      "s": rng.choice(["p", "q", "r"], N)})
    y = X["b"] * 1.0 + (X["s"] == "q") + rng.normal(size=N) * 0.1
    model = catboost.CatBoostRegressor(**COMMON, one_hot_max_size=4,
                                       cat_features=["b", "s"]).fit(X, y)
    ens = treeimp.parse(model)
    _check(model, X, ens)
    rows = X.astype({"s": object}).copy()
    rows.loc[::3, "s"] = None
    # a categorical column no split reads still takes raw categories
    assert set(ens.hashed_features) == {0, 2}
    unseen = rows.fillna({"s": "never-seen"})
    np.testing.assert_allclose(ens.predict_raw(rows)[:, 0],
                               model.predict(unseen, prediction_type="RawFormulaVal"),
                               rtol=1e-12, atol=1e-12)


def test_best_model_trees_are_the_trees_predict_uses():
    """With an eval set, CatBoost's use_best_model shrinks the model to its best
    iteration; the parsed model has exactly the trees CatBoost's predict uses."""
    X, y = _data(12)
    X = X[["x0", "x1"]]
    model = catboost.CatBoostRegressor(iterations=200, depth=4, learning_rate=0.8,
                                       random_seed=0, verbose=0, allow_writing_files=False,
                                       thread_count=1).fit(X[:150], y[:150],
                                                           eval_set=(X[150:], y[150:]))
    assert model.tree_count_ == model.get_best_iteration() + 1 < 200
    ens, _ = _check(model, X)
    assert ens.n_trees == model.tree_count_


def test_multiclass_ctr_model_routes_and_pickles():
    import pickle

    X, y = _data(6)
    yc = np.digitize(y, [0.5, 1.5])
    model = catboost.CatBoostClassifier(**COMMON, one_hot_max_size=1,
                                        loss_function="MultiClass").fit(
        X, yc, cat_features=["s", "k"])
    ens = treeimp.parse(model)
    assert ens.leaf_router is not None and ens.n_trees == 3 * model.tree_count_
    _check(model, X, ens)
    copy = pickle.loads(pickle.dumps(ens))  # e.g. scattered to Dask workers
    np.testing.assert_array_equal(copy.predict_raw(X), ens.predict_raw(X))
    res = treeimp.explain(model, X, yc, random_state=0)
    assert np.all(np.isfinite(res.table.to_numpy()))

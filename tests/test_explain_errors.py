"""explain() rejects bad input with a clear ValueError/TypeError naming the problem."""

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import (
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

import treeimp

xgb = pytest.importorskip("xgboost")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = (X[:, 0] > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def rf(data):
    X, y = data
    return RandomForestClassifier(n_estimators=5, random_state=0).fit(X, y)


def test_oob_without_bootstrap(data):
    X, y = data
    model = RandomForestClassifier(n_estimators=3, bootstrap=False).fit(X, y)
    with pytest.raises(ValueError, match="bootstrap=False"):
        treeimp.explain(model, X, y, oob=True)


def test_oob_on_boosting_says_to_pass_held_out_rows(data):
    X, y = data
    for model in (GradientBoostingRegressor(n_estimators=3).fit(X, y),
                  xgb.XGBClassifier(n_estimators=3).fit(X, y)):
        with pytest.raises(ValueError, match="held-out"):
            treeimp.explain(model, X, y, oob=True)


def test_oob_needs_the_training_rows(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="fit on 200 rows but X has 150"):
        treeimp.explain(rf, X[:150], y[:150], oob=True)


def test_oob_needs_the_model_object(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="fitted forest object"):
        treeimp.explain(treeimp.parse(rf), X, y, oob=True)


def test_in_bag_rows_that_cannot_be_recovered(data, monkeypatch):
    X, y = data
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)

    def broken(self):
        raise AttributeError("'_n_samples_bootstrap' is gone")

    monkeypatch.setattr(type(model), "estimators_samples_", property(broken))
    with pytest.raises(ValueError, match="cannot recover the in-bag rows"):
        treeimp.explain(model, X, y, oob=True)


@pytest.mark.parametrize("row", [-1, 200, 10**9])
def test_in_bag_rows_outside_the_training_rows(data, monkeypatch, row):
    """A forest reporting an in-bag row outside X (wrong rows passed, or a corrupt
    model) is refused, naming the tree and the row."""
    X, y = data
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y)
    samples = [np.asarray(s) for s in model.estimators_samples_]
    samples[1] = np.concatenate([samples[1][:5], [row], samples[1][5:]])
    monkeypatch.setattr(type(model), "estimators_samples_", property(lambda self: samples))
    with pytest.raises(ValueError, match=f"tree 1 of the RandomForestClassifier drew row {row} "
                                         "but X has 200 rows"):
        treeimp.explain(model, X, y, oob=True)


def test_in_bag_bits_equal_the_forest_samples(data):
    """Bit r of tree t is set exactly when estimators_samples_[t] contains r."""
    from treeimp.parsers import inbag_bits

    X, y = data
    model = RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y)
    bits = inbag_bits(model, len(X))
    got = np.unpackbits(bits, axis=1, bitorder="little", count=len(X)).astype(bool)
    for t, idx in enumerate(model.estimators_samples_):
        want = np.zeros(len(X), bool)
        want[idx] = True
        np.testing.assert_array_equal(got[t], want)


def test_length_mismatch(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="X has 200 rows but y has 199"):
        treeimp.explain(rf, X, y[:-1])


def test_labels_the_model_never_saw(rf, data):
    X, y = data
    with pytest.raises(ValueError, match=r"never saw: \[7\]"):
        treeimp.explain(rf, X, np.where(np.arange(200) == 3, 7, y))


def test_nan_or_inf_in_y(data):
    X, y = data
    reg = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, X[:, 0])
    bad = X[:, 0].copy()
    bad[5] = np.nan
    with pytest.raises(ValueError, match="NaN or inf"):
        treeimp.explain(reg, X, bad)
    bad[5] = np.inf
    with pytest.raises(ValueError, match="NaN or inf"):
        treeimp.explain(reg, X, bad)


@pytest.mark.parametrize("w,msg", [(-np.ones(200), "negative"), (np.zeros(200), "zero"),
                                   (np.ones(10), "shape"), (np.full(200, np.nan), "NaN")])
def test_bad_sample_weight(rf, data, w, msg):
    X, y = data
    with pytest.raises(ValueError, match=msg):
        treeimp.explain(rf, X, y, sample_weight=w)


def test_unknown_method_lists_valid_ones(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="valid methods: .*mdi_oob"):
        treeimp.explain(rf, X, y, methods=("mdi", "shap"))
    booster = xgb.XGBRegressor(n_estimators=3).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="forests only"):
        treeimp.explain(booster, X, X[:, 0], methods=("pg2",))


def test_pg_oob_needs_parameters(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="alpha and lam"):
        treeimp.explain(rf, X, y, methods=("pg_oob",))
    res = treeimp.explain(rf, X, y, methods=("pg_oob", "pg2"), alpha=0.5, lam=1.0)
    np.testing.assert_allclose(res.table["pg_oob"], res.table["pg2"])


def test_n_blocks(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="n_blocks must be >= 2"):
        treeimp.explain(rf, X, y, n_blocks=1)
    with pytest.raises(ValueError, match="more than the 20 evaluation rows"):
        treeimp.explain(rf, X[:20], y[:20], n_blocks=50)
    with pytest.raises(TypeError, match="n_blocks must be an integer"):
        treeimp.explain(rf, X, y, n_blocks=2.5)


def test_x_shape_and_columns(rf, data):
    X, y = data
    with pytest.raises(ValueError, match="X has 3 columns but the model was trained on 4"):
        treeimp.explain(rf, X[:, :3], y)
    with pytest.raises(ValueError, match="0 rows"):
        treeimp.explain(rf, X[:0], y[:0])
    with pytest.raises(TypeError, match="only numeric"):
        treeimp.explain(rf, pd.DataFrame({"a": ["x"] * 200, "b": 1.0, "c": 1.0, "d": 1.0}), y)
    with pytest.raises(ValueError, match="2-D"):
        treeimp.explain(rf, X[:, 0], y)


def test_boosting_targets(data):
    X, y = data
    booster = xgb.XGBClassifier(n_estimators=3).fit(X, y)
    with pytest.raises(ValueError, match="y is required"):
        treeimp.explain(booster, X)
    with pytest.raises(ValueError, match="never saw"):
        treeimp.explain(booster, X, y + 2)
    counts = np.random.default_rng(1).poisson(2.0, 200)
    poisson = xgb.XGBRegressor(n_estimators=3, objective="count:poisson").fit(X, counts)
    with pytest.raises(ValueError, match="negative"):
        treeimp.explain(poisson, X, counts - 5)


def test_unsupported_model_lists_supported():
    with pytest.raises(TypeError, match="supported models: .*RandomForestClassifier"):
        treeimp.explain(object(), np.zeros((3, 2)), np.zeros(3))


def test_missing_labels_for_a_classifier(data):
    """NaN in y (float labels) or None / NaN among string labels: named as missing."""
    X, y = data
    bad = y.astype(float)
    bad[7] = np.nan
    for model in (RandomForestClassifier(n_estimators=3, random_state=0).fit(X, y),
                  xgb.XGBClassifier(n_estimators=3).fit(X, y)):
        with pytest.raises(ValueError, match="NaN or inf"):
            treeimp.explain(model, X, bad)
    labels = np.array(["no", "yes"], dtype=object)[y]
    rf = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, labels.astype(str))
    for missing in (None, np.nan):
        bad = labels.copy()
        bad[9] = missing
        with pytest.raises(ValueError, match="1 missing labels.*row 9"):
            treeimp.explain(rf, X, bad)


def test_booster_with_fewer_columns(data):
    X, y = data
    lgb = pytest.importorskip("lightgbm")
    for model in (xgb.XGBClassifier(n_estimators=3).fit(X, y),
                  lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y)):
        with pytest.raises(ValueError, match="X has 3 columns but the model was trained on 4"):
            treeimp.explain(model, X[:, :3], y)


@pytest.mark.parametrize("objective,y_fit,y_bad,match", [
    ("gamma", np.exp, lambda y: np.where(np.arange(len(y)) == 4, 0.0, y), r"<= 0.*row 4"),
    ("poisson", np.exp, lambda y: y - 10.0, "negative"),
    ("tweedie", np.exp, lambda y: -y, "negative"),
    ("cross_entropy", lambda x: 1 / (1 + np.exp(-x)), lambda y: y + 1.0, r"outside \[0, 1\]"),
    ("regression", lambda x: x, lambda y: np.array(["a"] * len(y)), "must be numeric"),
])
def test_lightgbm_y_of_the_wrong_type(data, objective, y_fit, y_bad, match):
    lgb = pytest.importorskip("lightgbm")
    X, _ = data
    y = y_fit(X[:, 0])
    model = lgb.LGBMRegressor(objective=objective, n_estimators=3, verbose=-1).fit(X, y)
    with pytest.raises((ValueError, TypeError), match=match):
        treeimp.explain(model, X, y_bad(y))


def test_lightgbm_classifier_labels(data):
    lgb = pytest.importorskip("lightgbm")
    X, y = data
    model = lgb.LGBMClassifier(n_estimators=3, verbose=-1).fit(X, y)
    with pytest.raises(ValueError, match=r"never saw: \[0.5\]"):
        treeimp.explain(model, X, y * 0.5)


def test_sklearn_huber_loss_is_rejected_by_name(data):
    """scikit-learn's Huber re-estimates its delta every stage and does not store it."""
    X, _ = data
    model = GradientBoostingRegressor(loss="huber", n_estimators=3).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="huber.*does not store it"):
        treeimp.explain(model, X, X[:, 0])


def test_mdi_alone_needs_no_y_and_routes_no_rows(rf, data, monkeypatch):
    """methods=("mdi",) reads the model alone: no y, no kernel; X's width is still
    checked and its columns name the features; stderr and p-values are NaN."""
    from treeimp.explainer import Explainer

    X, y = data
    lgb = pytest.importorskip("lightgbm")
    booster = lgb.LGBMRegressor(n_estimators=5, verbose=-1).fit(X, X[:, 0] + X[:, 1])
    full = {m: treeimp.explain(m, X, t, methods=("mdi", "mdi_oob"))
            for m, t in ((rf, y), (booster, X[:, 0] + X[:, 1]))}

    def no_routing(*args, **kwargs):
        raise AssertionError("rows were routed for mdi alone")

    monkeypatch.setattr(Explainer, "_accumulate", no_routing)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    for model, ref in full.items():
        res = treeimp.explain(model, frame[:3], methods=("mdi",))
        assert res.methods == ["mdi"] and res.feature_names == ["a", "b", "c", "d"]
        np.testing.assert_allclose(res.table["mdi"].to_numpy(), ref.table["mdi"].to_numpy())
        np.testing.assert_allclose(res.per_tree["mdi"], ref.per_tree["mdi"])
        assert res.stderr["mdi"].isna().all() and res.pvalues["mdi"].isna().all()
        assert res.qvalues["mdi"].isna().all()
        with pytest.raises(ValueError, match="X has 3 columns but the model was trained on 4"):
            treeimp.explain(model, X[:, :3], methods="mdi")
        with pytest.raises(ValueError, match="X has 200 rows but y has 5"):
            treeimp.explain(model, X, y[:5], methods="mdi")
        with pytest.raises(ValueError, match="n_blocks must be >= 2"):
            treeimp.explain(model, X, methods="mdi", n_blocks=1)
    with pytest.raises(ValueError, match="y is required"):
        treeimp.explain(rf, X, methods=("mdi", "ufi"))

"""XGBoost's learning rate is resolved only when a measure reads it
(``treeimp/parsers/xgb_eta.py``): parsing never runs the recovery, and ufi /
mdi_oob_centered, which read it, give what they gave with the rate computed at parse."""

import dataclasses
import json
import pickle

import numpy as np
import pytest
import xgboost as xgb

import treeimp
from treeimp.parsers import xgb_eta, xgb_shrinkage
from treeimp.parsers.files import load  # treeimp.load

METHODS = ("ufi", "mdi_oob_centered")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(0, 0.5, 400) > 0).astype(float)
    booster = xgb.train({"objective": "binary:logistic", "eta": 0.15, "lambda": 2.0,
                         "max_depth": 3, "nthread": 1}, xgb.DMatrix(X[:250], y[:250]), 8)
    path = tmp_path_factory.mktemp("eta") / "model.json"
    booster.save_model(str(path))
    return booster, path, X[250:], y[250:]


def _refuse(*args, **kwargs):
    raise AssertionError("the learning-rate recovery ran")


def test_parse_does_not_run_the_recovery(trained, monkeypatch):
    booster, path, X, _ = trained
    monkeypatch.setattr(xgb_eta, "derive_learning_rate", _refuse)
    monkeypatch.setattr(xgb_eta, "constant_rate_fits", _refuse)
    for ens in (treeimp.parse(booster), load(path), treeimp.parse(booster).rounds(2, 6)):
        ens.predict_raw(X)
        treeimp.explain(ens, X, np.zeros(len(X)), methods=("mdi_oob",))  # needs no rate
        assert "tree_learning_rate" not in vars(ens)
        with pytest.raises(AssertionError, match="recovery ran"):
            _ = ens.tree_learning_rate


def test_resolved_rates_against_the_configuration(trained):
    booster, path, _, _ = trained
    config = json.loads(booster.save_config())
    eta = float(config["learner"]["gradient_booster"]["tree_train_param"]["learning_rate"])
    np.testing.assert_allclose(treeimp.parse(booster).tree_learning_rate, eta)
    np.testing.assert_allclose(load(path).tree_learning_rate, eta, rtol=1e-5)
    np.testing.assert_allclose(load(path).rounds(3, 7).tree_learning_rate, eta, rtol=1e-5)
    # a Booster loaded from the file reports XGBoost's default configuration (eta 0.3)
    loaded = xgb.Booster()
    loaded.load_model(str(path))
    stated = json.loads(loaded.save_config())["learner"]["gradient_booster"]
    assert float(stated["tree_train_param"]["eta"]) == pytest.approx(0.3)
    with pytest.warns(UserWarning, match="states eta=0.3.*node weights show eta=0.15"):
        np.testing.assert_allclose(treeimp.parse(loaded).tree_learning_rate, eta, rtol=1e-5)


def test_measures_equal_the_eagerly_recovered_rate(trained):
    """On a model file (no configuration), ufi and mdi_oob_centered with the lazily
    resolved rate equal those with the rate recovered directly by xgb_shrinkage, as the
    parser computed it before."""
    _, path, X, y = trained
    lazy = load(path)
    rate, info = xgb_shrinkage.derive_learning_rate(
        xgb_eta.shrinkage_input(_trees(path), adaptive_leaves=False))
    assert not info["schedule"]
    eager = dataclasses.replace(lazy, tree_learning_rate_source=rate)
    got = treeimp.explain(lazy, X, y, methods=METHODS, random_state=0)
    want = treeimp.explain(eager, X, y, methods=METHODS, random_state=0)
    for m in METHODS:
        np.testing.assert_array_equal(got.table[m].to_numpy(), want.table[m].to_numpy())
        np.testing.assert_array_equal(got.per_tree[m], want.per_tree[m])
    np.testing.assert_array_equal(lazy.tree_learning_rate, rate)


def _trees(path):
    """The model file's trees read one by one (the parser's per-tree reader)."""
    from treeimp.parsers.xgb import _read_tree

    with open(path) as f:
        trees = json.load(f)["learner"]["gradient_booster"]["model"]["trees"]
    return [_read_tree(jt, i, xgb.__version__) for i, jt in enumerate(trees)]


def test_lazy_rates_pickle(trained):
    _, path, _, _ = trained
    ens = load(path)
    back = pickle.loads(pickle.dumps(ens.rounds(1, 5)))
    np.testing.assert_array_equal(back.tree_learning_rate, load(path).tree_learning_rate[1:5])


def test_threads_resolve_the_rate_once(trained, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    _, path, _, _ = trained
    calls = []
    derive = xgb_eta.derive_learning_rate

    def counted(trees):
        calls.append(1)
        return derive(trees)

    monkeypatch.setattr(xgb_eta, "derive_learning_rate", counted)
    ens = load(path)
    parts = [ens.rounds(0, 4), ens.rounds(4, 8), ens]
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda e: e.tree_learning_rate, parts * 4))
    assert len(calls) == 1
    np.testing.assert_array_equal(np.concatenate(got[:2]), got[2])


@pytest.mark.parametrize("params", [
    {"objective": "binary:logistic", "eta": 0.15, "lambda": 2.0, "alpha": 0.5},
    {"objective": "count:poisson", "eta": 0.2, "max_delta_step": 0.01},  # clipped nodes
])
def test_recovery_of_concatenated_trees_equals_tree_by_tree(params):
    """The recovery reads the trees gathered all at once (xgb_flat) as they come; it
    gives what it gives on the same trees one by one, bitwise."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 5))
    y = rng.poisson(np.exp(0.5 * X[:, 0])).astype(float) if "poisson" in params[
        "objective"] else (X[:, 0] + rng.normal(0, 0.5, 400) > 0).astype(float)
    booster = xgb.train({"max_depth": 3, "nthread": 1, **params}, xgb.DMatrix(X, y), 8)
    trees = treeimp.parse(booster).tree_learning_rate_source.trees
    assert isinstance(trees, xgb_shrinkage.ConcatenatedTrees)
    cut = np.cumsum(trees.sizes)[:-1]
    one_by_one = list(zip(*(np.split(a, cut) for a in (trees.left, trees.right,
                                                        trees.steps[:, None], trees.hess))))
    got = xgb_shrinkage.derive_learning_rate(trees)
    want = xgb_shrinkage.derive_learning_rate(one_by_one)
    assert got is not None and want is not None
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1].keys() == want[1].keys()
    np.testing.assert_array_equal(list(got[1].values()), list(want[1].values()))
    np.testing.assert_allclose(got[0], params["eta"], rtol=1e-5)

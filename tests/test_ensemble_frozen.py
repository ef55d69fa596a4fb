"""TreeEnsemble as a frozen dataclass: declared fields, read-only arrays, derived
structures as cached properties, identity equality, pickling, and the fingerprint."""

import dataclasses
import pickle

import numpy as np
import pytest
import xgboost as xgb
from sklearn.ensemble import RandomForestClassifier

import treeimp
from treeimp.measures import formulas as measures
from treeimp.model.ensemble import Routing, Tree, TreeEnsemble


def _xy(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)


@pytest.fixture(scope="module")
def boosters():
    X, y = _xy()
    params = {"objective": "binary:logistic", "max_depth": 3, "eta": 0.2, "nthread": 1}
    a = xgb.train(params, xgb.DMatrix(X, y), 6)
    b = xgb.train({**params, "max_depth": 2}, xgb.DMatrix(X, y), 6)
    return a, b, X


def test_fields_are_declared_and_frozen(boosters):
    ens = treeimp.parse(boosters[0])
    names = {f.name for f in dataclasses.fields(TreeEnsemble)}
    assert {"left", "value", "tree_offsets", "base_score", "missing_value", "objective",
            "tree_learning_rate_source", "leaf_router", "target_classes"} <= names
    with pytest.raises(dataclasses.FrozenInstanceError):
        ens.base_score = np.zeros(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ens._records = None  # nothing attaches state from outside
    for f in dataclasses.fields(ens):
        v = getattr(ens, f.name)
        if isinstance(v, np.ndarray):
            assert not v.flags.writeable, f.name
    with pytest.raises(ValueError, match="read-only"):
        ens.value[0, 0] = 1.0


def test_parse_leaves_the_models_arrays_writeable():
    X, y = _xy(80)
    model = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    assert model.classes_.flags.writeable
    assert treeimp.parse(model).fingerprint == ens.fingerprint
    relabelled = dataclasses.replace(ens, classes=np.array(["no", "yes"]))
    assert relabelled.fingerprint != ens.fingerprint


def test_derived_structures_are_cached_properties(boosters):
    ens = treeimp.parse(boosters[0])
    for name in ("node_tree", "postorder", "routing", "splits", "path_features",
                 "tree_learning_rate", "fingerprint"):
        assert getattr(ens, name) is getattr(ens, name), name
    assert isinstance(ens.routing, Routing)
    assert ens.routing_arrays() is ens.routing  # the tuple the kernels splat, same order
    *fields, plain, depth, min_depth = ens.routing_arrays()[:8]
    cats = ens.routing_arrays()[8:]
    assert all(a.shape == (ens.n_nodes,) for a in fields)
    assert plain.shape == depth.shape == min_depth.shape == (ens.n_trees,)
    assert all(a is b for a, b in zip(cats, (ens.category_offset, ens.category_count,
                                             ens.category_codes, ens.category_left)))
    assert measures._splits(ens) is ens.splits
    np.testing.assert_array_equal(ens.node_tree,
                                  np.repeat(np.arange(ens.n_trees), np.diff(ens.tree_offsets)))
    # post-order: every node after its children, tree by tree
    pos = np.empty(ens.n_nodes, np.int64)
    pos[ens.postorder] = np.arange(ens.n_nodes)
    inner = np.flatnonzero(ens.left >= 0)
    assert np.all(pos[ens.left[inner]] < pos[inner]) and np.all(pos[ens.right[inner]] < pos[inner])


def test_equality_is_identity_and_pickle_round_trips(boosters):
    ens = treeimp.parse(boosters[0])
    again = treeimp.parse(boosters[0])
    assert ens == ens and ens != again and len({ens, again}) == 2  # no elementwise __eq__
    X = boosters[2]
    want = ens.predict_raw(X)  # builds the routing cache
    blob = pickle.dumps(ens)
    assert b"routing" not in blob and b"postorder" not in blob  # caches are left out
    back = pickle.loads(blob)
    assert isinstance(back, TreeEnsemble) and "routing" not in vars(back)
    np.testing.assert_array_equal(back.predict_raw(X), want)
    assert back.fingerprint == ens.fingerprint
    np.testing.assert_array_equal(back.tree_learning_rate, ens.tree_learning_rate)
    assert not back.value.flags.writeable


def test_fingerprint(boosters, tmp_path):
    a, b, _ = boosters
    ens = treeimp.parse(a)
    fp = ens.fingerprint
    assert isinstance(fp, str) and len(fp) == 32
    assert treeimp.parse(a).fingerprint == fp  # a re-parse of the same model
    path = tmp_path / "a.ubj"
    a.save_model(str(path))
    assert treeimp.load(path).fingerprint == fp  # the same model from its file
    assert treeimp.parse(b).fingerprint != fp  # another model
    assert ens.rounds(0, 3).fingerprint != fp
    assert ens.rounds(0, 3).fingerprint != ens.rounds(1, 4).fingerprint
    assert ens.rounds(1, 4).fingerprint == ens.rounds(1, 4).fingerprint
    assert ens.with_missing_value(-999.0).fingerprint != fp
    assert ens.with_missing_value(np.nan).fingerprint == fp


def test_fingerprint_is_a_stable_value():
    """A fixed value for a fixed model: it depends on no object id, no hash seed and no
    process (the value was computed once under two PYTHONHASHSEEDs)."""
    t = Tree(left=np.array([1, -1, -1]), right=np.array([2, -1, -1]),
             feature=np.array([0, -1, -1]), threshold=np.array([0.5, 0, 0]),
             value=np.array([[0.0], [1.0], [2.0]]), weight=np.array([2.0, 1, 1]))
    e = TreeEnsemble.from_trees([t], kind="boosting", n_features=1, n_outputs=1,
                                comparison="<", round_float32=False)
    assert e.fingerprint == "40a8df0bd3da172de747fc2ff000e2de"
    other = TreeEnsemble.from_trees([dataclasses.replace(t, threshold=np.array([0.25, 0, 0]))],
                                    kind="boosting", n_features=1, n_outputs=1,
                                    comparison="<", round_float32=False)
    assert other.fingerprint != e.fingerprint


def test_with_missing_value_and_rounds_are_replaced_copies(boosters):
    ens = treeimp.parse(boosters[0])
    X = boosters[2].copy()
    ens.predict_raw(X)
    out = ens.with_missing_value(0.0)
    assert out.missing_value == 0.0 and np.isnan(ens.missing_value)
    assert out.routing is ens.routing and out.left is ens.left  # trees shared
    X[:5, 0] = 0.0
    Xn = X.copy()
    Xn[:5, 0] = np.nan
    np.testing.assert_array_equal(out.predict_raw(X), ens.predict_raw(Xn))
    part = ens.rounds(2, 5)
    assert part.n_trees == 3 and part.cover.shape == (part.n_nodes,)
    np.testing.assert_array_equal(part.tree_learning_rate, ens.tree_learning_rate[2:5])
    np.testing.assert_allclose(
        part.predict_raw(X), boosters[0].predict(xgb.DMatrix(X), output_margin=True,
                                                 iteration_range=(2, 5))[:, None],
        rtol=1e-5, atol=1e-5)

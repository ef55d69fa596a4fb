"""A CatBoost JSON split names its threshold twice (``split_index``, which CatBoost
predicts with, and ``border`` / ``value`` / the feature index, which treeimp reads):
a file where they disagree loads in CatBoost with predictions other than treeimp's, so
treeimp refuses it, naming both fields."""

import json

import numpy as np
import pandas as pd
import pytest

import treeimp

catboost = pytest.importorskip("catboost")


def _saved(tmp_path, model, name="m.json"):
    path = tmp_path / name
    model.save_model(str(path), format="json")
    return path, json.loads(path.read_text())


def _margin(path, X):
    m = catboost.CatBoost()
    m.load_model(str(path), format="json")
    return m.predict(X, prediction_type="RawFormulaVal")


@pytest.fixture(scope="module")
def numeric():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = X[:, 0] + 0.5 * X[:, 1] + rng.normal(size=200) * 0.1
    model = catboost.CatBoostRegressor(iterations=5, depth=3, random_seed=0, verbose=0,
                                       allow_writing_files=False, thread_count=1)
    return model.fit(X, y), X


def _first_split(doc):
    return doc["oblivious_trees"][0]["splits"][0]


def test_border_that_disagrees_with_split_index_is_refused(tmp_path, numeric):
    model, X = numeric
    path, doc = _saved(tmp_path, model)
    assert np.allclose(treeimp.load(path).predict_raw(X)[:, 0], _margin(path, X))
    split = _first_split(doc)
    f = split["float_feature_index"]
    borders = doc["features_info"]["float_features"][f]["borders"]
    other = borders[-1] if borders[-1] != split["border"] else borders[0]
    split["border"] = other
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    # CatBoost still loads the file and predicts with the split_index border: the same
    # margins as before the edit, which treeimp's border would change
    assert np.allclose(_margin(edited, X), _margin(path, X))
    with pytest.raises(ValueError, match=r"tree 0 node at depth 0: border .* split_index"):
        treeimp.load(edited)


def test_feature_index_that_disagrees_with_split_index_is_refused(tmp_path, numeric):
    model, X = numeric
    path, doc = _saved(tmp_path, model)
    split = _first_split(doc)
    split["float_feature_index"] = (split["float_feature_index"] + 1) % 3
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert np.allclose(_margin(edited, X), _margin(path, X))
    with pytest.raises(ValueError, match="float_feature_index is .* but split_index"):
        treeimp.load(edited)


def test_split_index_out_of_range_is_refused(tmp_path, numeric):
    model, _ = numeric
    _, doc = _saved(tmp_path, model)
    _first_split(doc)["split_index"] = 10**6
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="split_index 1000000"):
        treeimp.load(edited)


def test_unsorted_borders_are_refused(tmp_path, numeric):
    model, _ = numeric
    _, doc = _saved(tmp_path, model)
    borders = doc["features_info"]["float_features"][0]["borders"]
    assert len(borders) >= 2
    borders[0], borders[1] = borders[1], borders[0]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="not strictly increasing"):
        treeimp.load(edited)


def test_one_hot_value_that_disagrees_with_split_index_is_refused(tmp_path):
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"x": rng.normal(size=300), "c": rng.choice(["a", "b", "c"], 300)})
    y = (X["c"] == "b") * 2.0 + 0.1 * X["x"] + rng.normal(size=300) * 0.1
    model = catboost.CatBoostRegressor(iterations=4, depth=2, random_seed=0, verbose=0,
                                       one_hot_max_size=4, cat_features=["c"],
                                       allow_writing_files=False, thread_count=1).fit(X, y)
    path, doc = _saved(tmp_path, model)
    values = doc["features_info"]["categorical_features"][0]["values"]
    found = [(t, d) for t, tree in enumerate(doc["oblivious_trees"])
             for d, s in enumerate(tree["splits"]) if s["split_type"] == "OneHotFeature"]
    assert found
    t, d = found[0]
    split = doc["oblivious_trees"][t]["splits"][d]
    split["value"] = next(v for v in values if v != split["value"])
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert np.allclose(_margin(edited, X), _margin(path, X))
    with pytest.raises(ValueError, match=rf"tree {t} node at depth {d}: value .* split_index"):
        treeimp.load(edited)


def test_depthwise_border_is_checked_per_node(tmp_path, numeric):
    _, X = numeric
    y = X[:, 0] - X[:, 2]
    model = catboost.CatBoostRegressor(iterations=3, depth=3, grow_policy="Depthwise",
                                       random_seed=0, verbose=0, allow_writing_files=False,
                                       thread_count=1).fit(X, y)
    path, doc = _saved(tmp_path, model)
    split = doc["trees"][1]["left"]["split"]  # preorder node 1 of tree 1
    borders = doc["features_info"]["float_features"][split["float_feature_index"]]["borders"]
    split["border"] = next(b for b in borders if b != split["border"])
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert np.allclose(_margin(edited, X), _margin(path, X))
    with pytest.raises(ValueError, match="tree 1 node 1: border"):
        treeimp.load(edited)


def test_split_without_split_index_is_refused(tmp_path, numeric):
    # CatBoost predicts something else than the border says without it
    model, X = numeric
    path, doc = _saved(tmp_path, model)
    split = doc["oblivious_trees"][1]["splits"][2]
    del split["split_index"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    assert not np.allclose(_margin(edited, X), _margin(path, X))
    with pytest.raises(ValueError, match="tree 1 node at depth 2: the split has no split_index"):
        treeimp.load(edited)


@pytest.mark.parametrize("where", ["scale", "leaf"])
def test_integers_past_2_53_where_catboost_reads_floats_are_refused(tmp_path, numeric, where):
    # CatBoost's JSON reader reads 2**53 + 1 as 0 where it expects a float
    model, X = numeric
    path, doc = _saved(tmp_path, model)
    if where == "scale":
        doc["scale_and_bias"][0] = 2**53 + 1
        name = "scale_and_bias scale"
    else:
        doc["oblivious_trees"][0]["leaf_values"][3] = 2**53 + 1
        name = r"tree 0 leaf_values\[3\]"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    theirs = _margin(edited, X)
    assert np.all(np.abs(theirs) < 1e6)  # CatBoost did not use 2**53 + 1
    with pytest.raises(ValueError, match=rf"{name} is the integer 9007199254740993"):
        treeimp.load(edited)


def test_boolean_leaf_value_is_refused(tmp_path):
    # CatBoost reads a leaf value `true` as 0, numpy as 1
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 2))
    model = catboost.CatBoostRegressor(iterations=2, depth=2, grow_policy="Depthwise",
                                       random_seed=0, verbose=0, allow_writing_files=False,
                                       thread_count=1).fit(X, X[:, 0])
    path, doc = _saved(tmp_path, model)
    node = doc["trees"][0]
    while "split" in node:
        node = node["left"]
    node["value"] = True
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    m = catboost.CatBoost()
    m.load_model(str(edited), format="json")
    node["value"] = 0.0
    zero = tmp_path / "zero.json"
    zero.write_text(json.dumps(doc))
    assert np.allclose(_margin(edited, X), _margin(zero, X))
    with pytest.raises(ValueError, match=r"tree 0 node \d+ value\[0\] is 'True', not a number"):
        treeimp.load(edited)


@pytest.mark.parametrize("edit,message", [
    (lambda d: d["trees"][0]["left"].update(left="leaf"), "node 2 must be an object, got str"),
    (lambda d: d["model_info"]["params"]["boosting_options"].update(learning_rate=[0.1]),
     "learning_rate is '\\[0.1\\]', not a number"),
    (lambda d: d["features_info"]["float_features"].append(1.5),
     "float_features must be a list of objects"),
    (lambda d: d["trees"][0].pop("right"), "tree 0 node 0 has a split without 'right'"),
    (lambda d: d["model_info"]["params"].setdefault("data_processing_options", {}).update(
        class_weights=1.5), "class_weights is '1.5', not a list of numbers"),
])
def test_damaged_structure_is_named(tmp_path, edit, message):
    # these raised AttributeError / TypeError inside the parser (reported as such)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 2))
    model = catboost.CatBoostRegressor(iterations=2, depth=3, grow_policy="Depthwise",
                                       random_seed=0, verbose=0, allow_writing_files=False,
                                       thread_count=1).fit(X, X[:, 0] + X[:, 1])
    _, doc = _saved(tmp_path, model)
    assert "split" in doc["trees"][0]["left"]
    edit(doc)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=message):
        treeimp.load(edited)


def test_symmetric_tree_without_leaf_values_is_named(tmp_path, numeric):
    model, _ = numeric
    _, doc = _saved(tmp_path, model)
    doc["oblivious_trees"][0]["leaf_values"] = None
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="tree 0 leaf_values must be a list, got NoneType"):
        treeimp.load(edited)


def test_scalar_bias_is_refused(tmp_path, numeric):
    # CatBoost reads scale_and_bias [1, b] (b not in a list) with bias 0
    model, X = numeric
    path, doc = _saved(tmp_path, model)
    bias = doc["scale_and_bias"][1][0]
    doc["scale_and_bias"][1] = bias - 1.0
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    np.testing.assert_allclose(_margin(edited, X), _margin(path, X) - bias, atol=1e-9)
    with pytest.raises(ValueError, match=r"scale_and_bias must be \[scale, \[bias, ...\]\]"):
        treeimp.load(edited)

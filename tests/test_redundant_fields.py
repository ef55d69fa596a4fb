"""Fields of XGBoost, LightGBM and CatBoost files that another field implies must agree.

Each test edits one field of a small saved model and checks what the library makes of
the edited file (it refuses it, or predicts differently from what the other field
says), then that treeimp.load refuses it with a ValueError naming both fields.
"""

import copy
import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import treeimp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.fuzz.mutate import ubjson  # noqa: E402

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 4))
Y = X[:, 0] + 0.5 * X[:, 1] + RNG.normal(size=200) * 0.1


@pytest.fixture(scope="module")
def xgb_doc():
    booster = xgb.train({"max_depth": 3, "nthread": 1}, xgb.DMatrix(X, Y), 4)
    return json.loads(booster.save_raw("json"))


def _xgb_files(tmp_path, doc):
    """The document as .json and as .ubj (the .ubj goes through the all-trees
    reader)."""
    j = tmp_path / "m.json"
    j.write_text(json.dumps(doc))
    u = tmp_path / "m.ubj"
    u.write_bytes(ubjson(doc))
    return j, u


def _xgb_refuses(path):
    with pytest.raises(xgb.core.XGBoostError):
        xgb.Booster(model_file=str(path))


def test_unedited_files_load(tmp_path, xgb_doc):
    for path in _xgb_files(tmp_path, xgb_doc):
        ens = treeimp.load(path)
        ref = xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X), output_margin=True)
        np.testing.assert_allclose(ens.predict_raw(X)[:, 0], ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("value", ["3", "300"])
def test_xgboost_num_nodes_must_match_the_arrays(tmp_path, xgb_doc, value):
    doc = copy.deepcopy(xgb_doc)
    doc["learner"]["gradient_booster"]["model"]["trees"][2]["tree_param"]["num_nodes"] = value
    for path in _xgb_files(tmp_path, doc):
        _xgb_refuses(path)
        with pytest.raises(ValueError, match=rf"tree 2: tree_param.num_nodes is {value} but "
                                             r"left_children has \d+"):
            treeimp.load(path)


@pytest.mark.parametrize("value", ["2", "9"])
def test_xgboost_num_trees_must_match_the_trees(tmp_path, xgb_doc, value):
    doc = copy.deepcopy(xgb_doc)
    doc["learner"]["gradient_booster"]["model"]["gbtree_model_param"]["num_trees"] = value
    for path in _xgb_files(tmp_path, doc):
        _xgb_refuses(path)
        with pytest.raises(ValueError, match=rf"num_trees is {value} but the model has 4 "
                                             "trees"):
            treeimp.load(path)


@pytest.mark.parametrize("value", [0, 9, -1])
def test_xgboost_tree_id_must_be_its_position(tmp_path, xgb_doc, value):
    # XGBoost places a tree by its id: a repeated id crashes xgboost 3.2 (not run here),
    # one past the trees is refused
    doc = copy.deepcopy(xgb_doc)
    doc["learner"]["gradient_booster"]["model"]["trees"][1]["id"] = value
    for path in _xgb_files(tmp_path, doc):
        with pytest.raises(ValueError, match=rf"tree 1 has id {value}"):
            treeimp.load(path)


@pytest.fixture(scope="module")
def lgbm_text():
    booster = lgb.train({"num_leaves": 5, "verbose": -1, "num_threads": 1},
                        lgb.Dataset(X, Y), 3)
    return booster.model_to_string()


def test_lightgbm_tree_sizes_must_match_the_blocks(tmp_path, lgbm_text):
    good = tmp_path / "good.txt"
    good.write_text(lgbm_text)
    sizes = [int(s) for s in re.search(r"tree_sizes=([\d ]+)", lgbm_text).group(1).split()]
    # 0 for tree 0 and tree 0's size added to tree 1's: LightGBM reads tree 0 twice
    edited = tmp_path / "edited.txt"
    edited.write_text(lgbm_text.replace(
        "tree_sizes=" + " ".join(map(str, sizes)),
        "tree_sizes=" + " ".join(map(str, [0, sizes[0] + sizes[1]] + sizes[2:]))))
    theirs = lgb.Booster(model_file=str(edited)).predict(X, raw_score=True)
    assert not np.allclose(theirs, lgb.Booster(model_file=str(good)).predict(X, raw_score=True))
    np.testing.assert_allclose(treeimp.load(good).predict_raw(X)[:, 0],
                               lgb.Booster(model_file=str(good)).predict(X, raw_score=True),
                               rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="tree_sizes gives tree 0 0 bytes but its Tree= block "
                                         f"has {sizes[0]}"):
        treeimp.load(edited)


def test_catboost_flat_feature_indices_must_be_0_to_n(tmp_path):
    catboost = pytest.importorskip("catboost")
    model = catboost.CatBoostRegressor(iterations=2, depth=2, random_seed=0, verbose=0,
                                       allow_writing_files=False, thread_count=1).fit(X, Y)
    path = tmp_path / "m.json"
    model.save_model(str(path), format="json")
    doc = json.loads(path.read_text())
    doc["features_info"]["float_features"][2]["flat_feature_index"] = 10_000_000
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"flat_feature_index .* 10000000.* 0\.\.3"):
        treeimp.load(path)


def test_lightgbm_num_class_must_match_trees_per_iteration(tmp_path, lgbm_text):
    edited = tmp_path / "edited.txt"
    edited.write_text(lgbm_text.replace("num_class=1\n", "num_class=3\n"))
    theirs = lgb.Booster(model_file=str(edited)).predict(X, raw_score=True)
    assert theirs.shape == (len(X), 3)  # LightGBM predicts 3 outputs from 1-output trees
    with pytest.raises(ValueError, match="num_class=3 disagrees with num_tree_per_iteration=1"):
        treeimp.load(edited)

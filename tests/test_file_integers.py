"""Integers read from model files are checked without overflow before use.

A length, count or offset near 2**63 must be refused like any other value that does not
fit the file: ``after + length > n`` wraps around in int64 (numba) and let such a value
through to out-of-bounds reads (a segfault). The damaged files are built here from a
small model; the loads run in a subprocess so that a crash fails the test instead of
killing the test run.
"""

import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import treeimp

xgb = pytest.importorskip("xgboost")

ROOT = Path(__file__).resolve().parents[1]
BIG = 2**63 - 1


def _booster():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = X[:, 0] + rng.normal(size=200)
    return xgb.train({"max_depth": 3}, xgb.DMatrix(X, y), 4)


def _damaged_ubj():
    """name -> bytes of XGBoost UBJSON files whose one length field is near 2**63."""
    raw = bytes(_booster().save_raw("ubj"))
    out = {}
    i = raw.find(b"SL")  # a string value with an int64 length
    assert i > 0
    out["string_length"] = raw[:i + 2] + struct.pack(">q", BIG) + raw[i + 10:]
    i = raw.find(b"L\x00\x00\x00\x00\x00\x00\x00\x0dleft_children")  # an object key
    assert i > 0
    out["key_length"] = raw[:i + 1] + struct.pack(">q", BIG) + raw[i + 9:]
    i = raw.find(b"[$l#L")  # a typed int32 array: count * 4 wraps to a small number
    assert i > 0
    out["typed_count"] = raw[:i + 5] + struct.pack(">q", 2**62 + 1) + raw[i + 13:]
    out["container_count"] = b"{#L" + struct.pack(">q", BIG) + raw[1:]  # a counted object
    return out


def test_7kb_model_with_a_huge_string_length_is_a_clear_value_error(tmp_path):
    files = _damaged_ubj()
    for name, data in files.items():
        (tmp_path / f"{name}.ubj").write_bytes(data)
    assert 4000 < len(files["string_length"]) < 10000
    code = (
        "import sys, treeimp\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        treeimp.load(path)\n"
        "    except ValueError as exc:\n"
        "        print('ValueError', path, str(exc).replace(chr(10), ' '))\n"
        "    else:\n"
        "        print('loaded', path)\n")
    paths = [str(tmp_path / f"{name}.ubj") for name in files]
    got = subprocess.run([sys.executable, "-c", code, *paths], capture_output=True, text=True,
                         timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert got.returncode == 0, (got.returncode, got.stderr[-2000:])
    lines = got.stdout.splitlines()
    assert len(lines) == len(files), got.stdout
    for line in lines:
        assert line.startswith("ValueError"), line
        assert "UBJSON" in line and "offset" in line, line


def test_index_values_refuses_lengths_past_the_end():
    from treeimp.kernels.ubjson_index import index_values
    from treeimp.parsers.ubjson import MAX_DEPTH

    for data in _damaged_ubj().values():
        status = index_values(np.frombuffer(data, np.uint8), MAX_DEPTH)[0]
        assert status != 0



@pytest.mark.parametrize("key,value,message", [
    ("left_children", 1.5, r"tree 1: 'left_children' must hold integers, but entry 0 is 1.5"),
    ("right_children", {}, r"tree 1: 'right_children' must be an array of numbers, but entry 0"),
    ("split_indices", 1e30, r"tree 1: 'split_indices' must hold integers, but entry 0 is 1e\+30"),
    ("sum_hessian", None, r"tree 1: 'sum_hessian' must be an array of numbers, but entry 0"),
])
def test_xgboost_node_arrays_hold_numbers_of_their_kind(tmp_path, key, value, message):
    # a float where XGBoost stores an integer was truncated (1.5 -> 1) and loaded
    doc = json.loads(_booster().save_raw("json"))
    doc["learner"]["gradient_booster"]["model"]["trees"][1][key][0] = value
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(xgb.core.XGBoostError):
        xgb.Booster(model_file=str(path))
    with pytest.raises(ValueError, match=message):
        treeimp.load(path)


@pytest.mark.parametrize("value", [None, 3, {"0": {}}])
def test_xgboost_trees_must_be_a_list(tmp_path, value):
    doc = json.loads(_booster().save_raw("json"))
    doc["learner"]["gradient_booster"]["model"]["trees"] = value
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="model.trees must be a list of trees, got"):
        treeimp.load(path)


@pytest.mark.parametrize("base_score", ["1e-300", "0", "1e-7", "0.99999", "0.999999", "1",
                                        "0.37"])
def test_xgboost_logistic_base_score_margin_as_xgboost_computes_it(tmp_path, base_score):
    # XGBoost clips the probability to [1e-6, 1 - 1e-6] and takes the logit in float32
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 4))
    b = xgb.train({"max_depth": 2, "objective": "binary:logistic", "nthread": 1},
                  xgb.DMatrix(X, X[:, 0] > 0), 2)
    doc = json.loads(b.save_raw("json"))
    doc["learner"]["learner_model_param"]["base_score"] = f"[{base_score}]"
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    ref = xgb.Booster(model_file=str(path)).predict(xgb.DMatrix(X), output_margin=True)
    got = treeimp.load(path).predict_raw(X)[:, 0]
    np.testing.assert_allclose(got, ref, rtol=2e-6, atol=2e-6)


def test_xgboost_num_parallel_tree_must_be_an_integer(tmp_path):
    doc = json.loads(_booster().save_raw("json"))
    doc["learner"]["gradient_booster"]["model"]["gbtree_model_param"]["num_parallel_tree"] = {}
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match="num_parallel_tree is '{}', not an integer"):
        treeimp.load(path)


@pytest.mark.parametrize("code", [2**32, -1])
def test_xgboost_category_codes_fit_int32(tmp_path, code):
    # XGBoost stores the codes as int32: 2**32 became code 0 there, never-matching here
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=200),
                       "c": pd.Categorical(rng.integers(0, 4, 200))})
    b = xgb.train({"max_depth": 2, "max_cat_to_onehot": 1, "nthread": 1},
                  xgb.DMatrix(df, df["c"].cat.codes == 2, enable_categorical=True), 3)
    doc = json.loads(b.save_raw("json"))
    trees = doc["learner"]["gradient_booster"]["model"]["trees"]
    t = next(t for t, tree in enumerate(trees) if tree["categories"])
    trees[t]["categories"][0] = code
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=f"tree {t}: categories holds the code {code}, outside"):
        treeimp.load(path)


def test_xgboost_objective_name_that_is_not_a_string(tmp_path):
    doc = json.loads(_booster().save_raw("json"))
    doc["learner"]["objective"]["name"] = ["reg:squarederror"]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=r"XGBoost objective \['reg:squarederror'\] is not "
                                         "supported"):
        treeimp.load(path)

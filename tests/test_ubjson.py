"""UBJSON reader: XGBoost's .ubj documents equal its .json ones; corrupt input fails fast.

Expected values of the hand-built documents come from the UBJSON specification
(draft 12, big-endian), not from the reader.
"""

import json
import struct
import time
import warnings

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import treeimp
from treeimp.parsers.ubjson import read_ubjson

xgb = pytest.importorskip("xgboost")


def _plain(obj):
    """Document with numpy arrays turned into lists and floats rounded to float32."""
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, np.ndarray)):
        return [_plain(v) for v in obj]
    if isinstance(obj, (float, np.floating)):
        return float(np.float32(obj))
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    return obj


def _models():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    X[rng.random((300, 4)) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + rng.normal(size=300)
    yield "regression", xgb.train({"max_depth": 3}, xgb.DMatrix(X, y), 5)
    yield "multiclass", xgb.train({"max_depth": 3, "objective": "multi:softprob",
                                   "num_class": 3}, xgb.DMatrix(X, np.digitize(y, [-1, 1])), 3)
    yield "dart", xgb.train({"booster": "dart", "max_depth": 2, "rate_drop": 0.5},
                            xgb.DMatrix(X, y), 6)
    Y = np.c_[y, -y]
    yield "vector_leaf", xgb.train({"multi_strategy": "multi_output_tree", "max_depth": 2,
                                    "num_target": 2}, xgb.DMatrix(X, Y), 3)
    df = pd.DataFrame({"a": X[:, 0], "s": pd.Categorical(rng.choice(["x", "yy", "é"], 300)),
                       "n": pd.Categorical(rng.choice([3, 7, 11], 300))})
    clf = xgb.XGBClassifier(n_estimators=3, max_depth=2, enable_categorical=True)
    yield "categorical", clf.fit(df, (y > 0).astype(int)).get_booster()


@pytest.mark.parametrize("name,booster", list(_models()), ids=lambda v: v
                         if isinstance(v, str) else "")
def test_xgboost_ubj_equals_json(name, booster):
    ubj = read_ubjson(bytes(booster.save_raw("ubj")))
    doc = json.loads(bytes(booster.save_raw("json")))
    assert _plain(ubj) == _plain(doc)
    # big typed arrays come back as numpy arrays of the right type
    tree = ubj["learner"]["gradient_booster"]
    tree = (tree["gbtree"] if tree["name"] == "dart" else tree)["model"]["trees"][0]
    assert isinstance(tree["split_conditions"], np.ndarray)
    assert tree["split_conditions"].dtype == np.float32
    assert tree["left_children"].dtype == np.int32


def _key(s):
    b = s.encode()
    return b"U" + bytes([len(b)]) + b


def test_every_marker():
    doc = (b"{" + _key("i") + b"i\xff" + _key("U") + b"U\xff" + _key("I") + b"I\x01\x00"
           + _key("l") + b"l\xff\xff\xff\xfe" + _key("L") + b"L" + struct.pack(">q", -2**40)
           + _key("d") + b"d" + struct.pack(">f", 1.5) + _key("D") + b"D"
           + struct.pack(">d", -0.1) + _key("S") + b"SU\x03h\xc3\xa9" + _key("C") + b"Cx"
           + _key("H") + b"HU\x0512345" + _key("Hf") + b"HU\x041.25" + _key("T") + b"T"
           + _key("F") + b"F" + _key("Z") + b"Z" + _key("noop") + b"NNi\x05"
           + _key("arr") + b"[i\x01NSU\x01a[]{}]"
           + _key("counted") + b"[#U\x02i\x07T"
           + _key("typed") + b"[$I#U\x03\x00\x01\xff\xff\x7f\xff"
           + _key("typed_f64") + b"[$D#i\x01" + struct.pack(">d", 2.5)
           + _key("typed_obj") + b"{$U#U\x02" + b"U\x01a\x01" + b"U\x01b\x02"
           + _key("typed_str") + b"[$S#U\x02U\x01pU\x00"
           + b"}")
    got = read_ubjson(doc)
    arrays = {k: got.pop(k) for k in ("typed", "typed_f64")}
    assert got == {"i": -1, "U": 255, "I": 256, "l": -2, "L": -2**40, "d": 1.5, "D": -0.1,
                   "S": "hé", "C": "x", "H": 12345, "Hf": 1.25, "T": True, "F": False,
                   "Z": None, "noop": 5, "arr": [1, "a", [], {}], "counted": [7, True],
                   "typed_obj": {"a": 1, "b": 2}, "typed_str": ["p", ""]}
    np.testing.assert_array_equal(arrays["typed"], np.array([1, -1, 32767], np.int16))
    assert arrays["typed"].dtype == np.int16 and arrays["typed"].dtype.isnative
    np.testing.assert_array_equal(arrays["typed_f64"], [2.5])


def test_string_lengths_with_every_integer_marker():
    """XGBoost writes string lengths (keys too) as int64 'L'; every integer marker reads
    the same string, as a value and as a key, before a typed array member and not."""
    for marker, size in ((b"i", ">b"), (b"U", ">B"), (b"I", ">h"), (b"l", ">i"),
                         (b"L", ">q")):
        key = marker + struct.pack(size, 3) + b"k\xc3\xa9"
        doc = (b"{" + key + b"S" + marker + struct.pack(size, 2) + b"hi"
               + marker + struct.pack(size, 1) + b"a" + b"[$U#U\x02\x07\x08"
               + marker + struct.pack(size, 1) + b"b" + b"[U\x09]}")
        got = read_ubjson(doc)
        assert list(got) == ["ké", "a", "b"] and got["ké"] == "hi" and got["b"] == [9]
        np.testing.assert_array_equal(got["a"], np.array([7, 8], np.uint8))
        # counted objects and no-ops between members (not inside one) read the same
        counted = b"{#U\x03" + doc[1:-1]
        assert list(read_ubjson(counted)) == ["ké", "a", "b"]
        spaced = doc[:1] + b"N" + doc[1:-1] + b"NN}"
        np.testing.assert_array_equal(read_ubjson(spaced)["a"], np.array([7, 8], np.uint8))


@pytest.mark.parametrize("data,match", [
    (b"", "truncated"),
    (b"i", "truncated"),
    (b"{U\x01a", "truncated"),
    (b"[i\x01", "truncated"),
    (b"SU\x05abc", "truncated"),
    (b"X", "marker"),
    (b"{i\x01ai\x01", "truncated"),
    (b"{SU\x01aT}", "integer"),          # keys carry no 'S' marker
    (b"i\x01i\x02", "unexpected bytes"),
    (b"[$d]", "count"),
    (b"[$Q#U\x01\x00", "type marker"),
    (b"[#i\xff", "negative"),
    (b"[$d#L" + struct.pack(">q", 2**62), "count"),
    (b"[$Z#L" + struct.pack(">q", 2**40), "count"),
    (b"[#L" + struct.pack(">q", 2**40) + b"T", "count"),
    (b"SU\x02\xc3\x28", "UTF-8"),
    (b"SL" + struct.pack(">q", -1), "negative"),         # string lengths of any integer
    (b"SL" + struct.pack(">q", 5) + b"ab", "truncated"),  # marker (XGBoost: 'L')
    (b"Si\xfeab", "negative"),
    (b"SI\x00\x02\xc3\x28", "UTF-8"),
    (b"{L" + struct.pack(">q", 2**40) + b"a", "truncated"),
    # members read inline (integer-length key, typed array) fall back and report
    (b"{U\x02\xc3\x28[$U#U\x01\x07}", "UTF-8"),             # bad key before a typed array
    (b"{U\x01a[$U#U\x05\x07}", "count 5 needs"),              # array count beyond the end
    (b"{U\x01a[$d#L" + struct.pack(">q", -1) + b"}", "negative"),
    (b"{U\x01a[$U#U\x01\x07", "truncated"),                   # no '}' after the members
    (b"{U\x01a[$U#U\x01\x07X}", "integer"),                   # a key must follow
    (b"{#U\x01U\x01a[$U#U\x01\x07U\x01b[$U#U\x01\x08}", "unexpected bytes"),  # count 1
    (b"A", "marker"),
    (b"C\x80", "ASCII"),
    (b"HU\x03abc", "not a number"),
    (b"[" * 10000, "deeper"),
    (b"}", "marker"),
])
def test_corrupt_input_raises_value_error(data, match):
    with pytest.raises(ValueError, match=match):
        read_ubjson(data)


def test_str_is_refused():
    with pytest.raises(TypeError):
        read_ubjson("{}")


@pytest.fixture(scope="module")
def model_bytes():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    booster = xgb.train({"max_depth": 2}, xgb.DMatrix(X, X[:, 0]), 3)
    return bytes(booster.save_raw("ubj"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_truncated_and_corrupted_model(model_bytes, data):
    raw = bytearray(model_bytes)
    cut = data.draw(st.integers(0, len(raw)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1), st.integers(0, 255)),
                               max_size=4))
    for pos, val in flips:
        raw[pos] = val
    blob = bytes(raw[:cut]) if cut < len(raw) else bytes(raw)
    start = time.perf_counter()
    try:
        read_ubjson(blob)
    except ValueError:
        pass
    assert time.perf_counter() - start < 2.0
    if cut < len(raw):
        with pytest.raises(ValueError):
            read_ubjson(bytes(raw[:cut]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_load_damaged_model_files(model_bytes, tmp_path_factory, data):
    """A damaged .ubj or .json model file gives a ValueError or a valid ensemble."""
    ext = data.draw(st.sampled_from(["ubj", "json"]))
    if ext == "json":
        doc = read_ubjson(model_bytes)
        raw = bytearray(json.dumps(_plain(doc)).encode())
    else:
        raw = bytearray(model_bytes)
    for pos, val in data.draw(st.lists(st.tuples(st.integers(0, len(raw) - 1),
                                                 st.integers(0, 255)), max_size=3)):
        raw[pos] = val
    cut = data.draw(st.integers(1, len(raw)))
    path = tmp_path_factory.mktemp("fuzz") / f"m.{ext}"
    path.write_bytes(bytes(raw[:cut]))
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. a learning rate that cannot be recovered
        try:
            ens = treeimp.load(path)
        except ValueError as exc:
            assert str(path) in str(exc)
        else:
            assert ens.n_trees >= 1
    assert time.perf_counter() - start < 5.0


def test_typed_containers_of_every_element_type():
    """Typed containers whose elements carry no marker of their own (the walk reads
    them with the container's type): containers, chars, constants, high-precision
    numbers and typed objects of numbers. Expected values from the UBJSON spec."""
    doc = (b"{" + _key("arrays") + b"[$[#U\x02" + b"$U#U\x02\x01\x02" + b"#U\x01i\xff"
           + _key("objects") + b"[${#U\x02" + b"#U\x01U\x01aT" + b"$i#U\x01U\x01b\xfe"
           + _key("chars") + b"[$C#U\x02ab"
           + _key("nulls") + b"[$Z#U\x03"
           + _key("true") + b"{$T#U\x02U\x01xU\x01y"
           + _key("high") + b"[$H#U\x02U\x0212U\x030.5"
           + _key("doubles") + b"{$D#U\x01U\x01z" + struct.pack(">d", -1.25)
           + b"}")
    got = read_ubjson(doc)
    first, second = got.pop("arrays")
    np.testing.assert_array_equal(first, np.array([1, 2], np.uint8))
    assert second == [-1]
    assert got == {"objects": [{"a": True}, {"b": -2}], "chars": ["a", "b"],
                   "nulls": [None, None, None], "true": {"x": True, "y": True},
                   "high": [12, 0.5], "doubles": {"z": -1.25}}


def test_truncated_typed_elements_raise():
    for data in (b"[$S#U\x02U\x01a", b"[$[#U\x02#U\x00", b"{$i#U\x01U\x01a",
                 b"[$C#U\x02a"):
        with pytest.raises(ValueError, match="truncated|count"):
            read_ubjson(data)


def test_row_end_is_the_row_after_the_last_descendant():
    """The walk's row_end, which the XGBoost reader uses to skip the trees, against the
    parent column: the rows below a value are exactly those whose parent chain reaches
    it."""
    from treeimp.kernels.ubjson_index import index_document

    rng = np.random.default_rng(1)
    X = rng.normal(size=(100, 3))
    booster = xgb.train({"max_depth": 2}, xgb.DMatrix(X, X[:, 0]), 2)
    for data in (bytes(booster.save_raw("ubj")), b"[[[i\x01]{U\x01a[]}]Z]"):
        err, marker, *_, parent, _, _, _, row_end = index_document(
            np.frombuffer(data, np.uint8), 256)
        assert err[0] == 0
        for r in range(marker.size):
            below = r + 1
            while below < marker.size:
                p = parent[below]
                while p > r:
                    p = parent[p]
                if p != r:
                    break
                below += 1
            assert row_end[r] == below


@pytest.mark.parametrize("data", [
    b"{U\x02\xc3\x28X",                  # a bad key, then a bad marker
    b"[SU\x01\xffX",                     # a bad string, then a bad marker
    b"[SU\x01\xff[$d#U\x09\x00]",        # a bad string, then a count past the end
    b"{U\x01aSU\x01\xffU\x01b",          # a bad string, then truncation
])
def test_the_first_problem_in_the_document_is_reported(data):
    """String contents are checked where they are decoded, after the walk; a problem in
    a string before the place where the walk stopped is still the one reported."""
    with pytest.raises(ValueError, match="UTF-8"):
        read_ubjson(data)


def test_typed_null_arrays_cannot_outgrow_the_document():
    """Elements of a typed array of Z / T / F take no bytes, so each such array's count
    fits in the bytes left; many short headers could still ask for a number of values
    quadratic in the document's size. They may hold one element per byte in all."""
    header = b"[$Z#I" + struct.pack(">h", 4000)
    doc = b"[" + header * 1000 + b"]" + b"N" * 4000
    with pytest.raises(ValueError, match="more than the document's"):
        read_ubjson(doc)
    ok = b"[" + header + b"T" * 4000 + b"]"  # one array within the document's size
    assert read_ubjson(ok) == [[None] * 4000] + [True] * 4000

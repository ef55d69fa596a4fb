"""LightGBM text laid out otherwise than LightGBM writes it (line ends, blank lines,
unknown keys, damage) is read line by line instead of by the one-pass block scanner
(parsers/lgbm_text.py, kernels/text_blocks.py): the same model must give the same
ensemble and LightGBM's own predictions, and damage the same ValueError."""

import re

import numpy as np
import pytest

from treeimp.parsers import lgbm, lgbm_text
from treeimp.parsers.lgbm import parse_lightgbm_text

lgb = pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4))
    X[:, 3] = rng.integers(0, 40, 400)
    X[rng.random(400) < 0.1, 0] = np.nan
    y = np.digitize(X[:, 0] + np.isin(X[:, 3], [3, 7, 33]) + 0.3 * rng.normal(size=400),
                    [0.0, 1.0])
    booster = lgb.train({"objective": "multiclass", "num_class": 3, "num_leaves": 5,
                         "verbose": -1, "num_threads": 1, "min_data_per_group": 5,
                         "cat_smooth": 1},
                        lgb.Dataset(X, y, categorical_feature=[3]), num_boost_round=4)
    text = booster.model_to_string(num_iteration=-1)
    assert "cat_threshold=" in text and text.count("Tree=") == 12
    return booster, text, X


def _arrays(ens):
    return {name: getattr(ens, name).tobytes() for name in (
        "tree_offsets", "left", "right", "feature", "threshold", "missing_left", "nan_mode",
        "is_categorical", "category_codes", "category_left", "value", "weight", "cover",
        "gain", "base_score", "tree_learning_rate")}


def _line_by_line(text):
    """The ensemble of the line-by-line reader alone."""
    return lgbm._parse_model(lgbm_text.scan_model_text(text), lambda: text, None)


def _no_sizes(text):
    return re.sub(r"tree_sizes=[^\n]*\n", "", text)


LAYOUTS = {
    "crlf": lambda t: _no_sizes(t).replace("\n", "\r\n"),
    "unknown key": lambda t: _no_sizes(t).replace("Tree=3\n", "Tree=3\nfuture_key=1 2\n"),
    "no blank lines": lambda t: _no_sizes(t).replace("\n\nTree=", "\nTree="),
    "more blank lines": lambda t: _no_sizes(t).replace("\n\nTree=", "\n\n\n\nTree="),
    "spaces around values": lambda t: _no_sizes(t).replace("\nthreshold=", "\nthreshold= "),
    "tabs": lambda t: _no_sizes(t).replace("\nleaf_value=", "\nleaf_value=\t"),
    "a feature named Tree": lambda t: re.sub(r"feature_importances:\n[^\n=]*=",
                                             "feature_importances:\nTree=", t),
    "no final line feed": lambda t: t[:t.index("end of trees") + len("end of trees")],
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_layouts_read_the_same_model(model, layout):
    booster, text, X = model
    want = _arrays(parse_lightgbm_text(text))
    variant = LAYOUTS[layout](text)
    assert variant != text
    ens = parse_lightgbm_text(variant)
    assert _arrays(ens) == want
    assert _arrays(_line_by_line(variant)) == want
    np.testing.assert_allclose(ens.predict_raw(X), booster.predict(X, raw_score=True),
                               rtol=1e-12, atol=1e-12)


DAMAGE = {
    "a key twice": (lambda t: _no_sizes(t).replace("Tree=2\nnum_leaves=",
                                                   "Tree=2\nshrinkage=1\nnum_leaves="),
                    "key 'shrinkage' appears twice in tree 2"),
    "a label out of order": (lambda t: _no_sizes(t).replace("Tree=1\n", "Tree=01\n"),
                             "block 'Tree=01' found where Tree=1 was expected"),
    "a line without a key": (lambda t: _no_sizes(t).replace("Tree=2\n", "Tree=2\n=3\n"),
                             "line '=3' in tree 2 has no key"),
    "no end of trees": (lambda t: t.replace("end of trees\n", ""),
                        "unexpected line 'feature_importances:' after tree 11"),
    "truncated": (lambda t: t[:t.index("Tree=5")], "'end of trees' is missing"),
    "more trees than tree_sizes": (
        lambda t: t.replace("end of trees", "".join(
            f"Tree={i}\nnum_leaves=1\nleaf_value=0\nshrinkage=1\n\n" for i in (12, 13, 14))
            + "end of trees"),
        "tree_sizes lists 12 trees but the text has 15"),
    "a tree_sizes entry off": (
        lambda t: re.sub(r"tree_sizes=(\d+) (\d+) ",
                         lambda m: f"tree_sizes={int(m[1]) + 1} {int(m[2]) - 1} ", t),
        "tree_sizes gives tree 0"),
    "a bad integer": (lambda t: _no_sizes(t).replace("\nleft_child=", "\nleft_child=x", 1),
                      "tree 0: left_child has a value that is not an integer"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_names_the_problem(model, damage):
    _, text, _ = model
    change, message = DAMAGE[damage]
    variant = change(text)
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_lightgbm_text(variant)
    with pytest.raises(ValueError, match=re.escape(message)):
        _line_by_line(variant)


def test_file_bytes_as_text(model, tmp_path):
    """treeimp.load reads an ASCII file's bytes without decoding them, a file with a
    byte order mark or non-ASCII characters as text: the same ensemble."""
    import treeimp

    _, text, _ = model
    want = _arrays(parse_lightgbm_text(text))
    for name, content in (("plain", text.encode()), ("bom", b"\xef\xbb\xbf" + text.encode()),
                          ("utf8", text.replace("end of parameters",
                                                "end of parameters\n\u00e9").encode())):
        path = tmp_path / f"{name}.txt"
        path.write_bytes(content)
        assert _arrays(treeimp.load(path)) == want


@pytest.fixture
def two_threads(monkeypatch):
    """The numbers read on two threads however short the text."""
    import numba

    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("numba has one thread")
    monkeypatch.setattr(lgbm, "_THREAD_BYTES", 0)
    previous = numba.get_num_threads()
    numba.set_num_threads(2)
    yield
    numba.set_num_threads(previous)


def test_two_threads_read_the_same_model(model, two_threads):
    booster, text, X = model
    ens = parse_lightgbm_text(text)
    np.testing.assert_allclose(ens.predict_raw(X), booster.predict(X, raw_score=True),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(ens.weight[ens.tree_offsets[:-1]],
                                  [t["tree_structure"].get("internal_weight",
                                                           t["tree_structure"].get(
                                                               "leaf_weight"))
                                   for t in booster.dump_model()["tree_info"]])


@pytest.mark.parametrize("threads", [False, True])
def test_the_first_damaged_key_is_named(model, request, threads):
    """Damage in several keys: the error of the key read first one by one (split keys,
    then leaf keys), whichever thread reads which."""
    if threads:
        request.getfixturevalue("two_threads")
    _, text, _ = model
    text = _no_sizes(text)
    at = text.index("Tree=1\n")
    damaged = text[:at] + text[at:].replace("\nleaf_value=", "\nleaf_value=x", 1)
    damaged = damaged.replace("\ninternal_count=", "\ninternal_count=1 ", 1)
    with pytest.raises(ValueError, match=r"tree 0: internal_count has 5 values, expected 4"):
        parse_lightgbm_text(damaged)
    damaged = damaged.replace("\ninternal_count=1 ", "\ninternal_count=", 1)
    with pytest.raises(ValueError, match=r"tree 1: leaf_value has a value that is not a nu"):
        parse_lightgbm_text(damaged)

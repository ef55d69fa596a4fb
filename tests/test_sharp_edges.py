"""Input a new user hands treeimp by mistake: each case is a clear TypeError/ValueError
naming the problem (or the right behaviour), never a hang, a guess or an internal
exception's text."""

import gzip
import json
import os
import re
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp

FIXTURES = Path(__file__).parent / "fixtures"
XGB_JSON = FIXTURES / "xgboost-3.2.0" / "binary.json"
LGBM_TXT = FIXTURES / "lightgbm-4.7.0" / "binary.txt"


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = (X[:, 0] > 0).astype(int)
    return RandomForestClassifier(n_estimators=4, random_state=0).fit(X, y), X, y


def _load_in_thread(path, timeout=10):
    """treeimp.load(path) in a thread: the exception it raised, or 'hung'."""
    out = {}

    def run():
        try:
            treeimp.load(path)
            out["result"] = "loaded"
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out["result"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(timeout)
    return out.get("result", "hung")


def test_load_refuses_a_fifo_without_reading(tmp_path):
    fifo = tmp_path / "model.json"
    os.mkfifo(fifo)
    got = _load_in_thread(str(fifo))
    if got == "hung":  # unblock the reader before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
    assert isinstance(got, ValueError) and "FIFO" in str(got), got


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_load_refuses_a_device():
    with pytest.raises(ValueError, match="character device, not a regular file"):
        treeimp.load("/dev/zero")


def _xgb_doc():
    return json.loads(XGB_JSON.read_text())


@pytest.mark.parametrize("key,value", [("default_left", 2), ("default_left", -1),
                                       ("split_type", 3)])
def test_xgboost_flags_outside_0_1_are_an_error(tmp_path, key, value):
    doc = _xgb_doc()
    doc["learner"]["gradient_booster"]["model"]["trees"][1][key][0] = value
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError, match=rf"tree 1: '{key}' must be 0 or 1, but node 0 "
                                         rf"has {value}"):
        treeimp.load(path)


def test_gzip_model_says_so(tmp_path):
    path = tmp_path / "m.json"
    path.write_bytes(gzip.compress(XGB_JSON.read_bytes()))
    with pytest.raises(ValueError, match="gzip-compressed; decompress it first"):
        treeimp.load(path)


def test_lightgbm_file_with_byte_order_mark_loads(tmp_path):
    path = tmp_path / "m.txt"
    path.write_bytes(b"\xef\xbb\xbf" + LGBM_TXT.read_bytes())
    X = np.random.default_rng(0).normal(size=(50, 4))
    np.testing.assert_array_equal(treeimp.load(path).predict_raw(X),
                                  treeimp.load(LGBM_TXT).predict_raw(X))


def test_deeply_nested_json_is_a_clean_error(tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"learner": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ValueError) as info:
        treeimp.load(path)
    text = str(info.value)
    assert "nested too deeply" in text
    assert "recursion" not in text.lower() and "Error" not in text


def test_integer_past_int64_is_a_clean_error(tmp_path):
    doc = _xgb_doc()
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["left_children"][1] = 10**30
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as info:
        treeimp.load(path)
    text = str(info.value)
    assert "outside the int64 range" in text
    assert "Python int" not in text and "C long" not in text and "Error" not in text


def test_methods_none_means_the_defaults_and_other_types_are_refused(forest):
    rf, X, y = forest
    res = treeimp.explain(rf, X, y, methods=None, random_state=0)
    named = treeimp.explain(rf, X, y, random_state=0,
                            methods=("mdi", "mdi_oob", "mdi_oob_centered", "ufi"))
    assert sorted(res.table.columns) == sorted(named.table.columns)
    pd.testing.assert_frame_equal(res.table[named.table.columns], named.table)
    with pytest.raises(TypeError, match="methods must be a method name or a sequence"):
        treeimp.explain(rf, X, y, methods=5)


@pytest.mark.parametrize("alpha", ["0.05", None])
def test_select_alpha_not_a_number(forest, alpha):
    rf, X, y = forest
    res = treeimp.explain(rf, X, y, random_state=0)
    with pytest.raises(TypeError, match="alpha must be a number in"):
        res.select("mdi_oob", alpha=alpha)


@pytest.mark.parametrize("oob", ["yes", 1, None])
def test_oob_must_be_boolean(forest, oob):
    rf, X, y = forest
    with pytest.raises(TypeError, match="oob must be True or False"):
        treeimp.explain(rf, X, y, oob=oob)


def test_lam_infinite(forest):
    rf, X, y = forest
    with pytest.raises(ValueError, match="finite lam >= 0"):
        treeimp.explain(rf, X, y, methods=("pg_oob",), alpha=0.5, lam=np.inf)
    with pytest.raises(TypeError, match="lam must be a number"):
        treeimp.explain(rf, X, y, methods=("pg_oob",), alpha=0.5, lam="1")


def test_duplicated_column_names(forest):
    rf, X, y = forest
    df = pd.DataFrame(X, columns=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"duplicated column names \['a'\]"):
        treeimp.explain(rf, df, y)
    with pytest.raises(ValueError, match=r"duplicated column names \['a'\]"):
        treeimp.permutation_importance(rf, df, y)


@pytest.mark.parametrize("dtype", ["boolean", "string", object])
def test_pd_na_labels(forest, dtype):
    rf, X, y = forest
    labels = pd.Series(y.astype(bool) if dtype == "boolean" else y).astype(dtype)
    labels[3] = pd.NA
    fit_y = {"boolean": y.astype(bool), "string": y.astype(str), object: y}[dtype]
    model = RandomForestClassifier(n_estimators=3, random_state=0).fit(X, fit_y)
    # (before: "labels the model never saw: [<NA>]")
    with pytest.raises(ValueError, match=r"1 missing values \(pd.NA; first at row 3\)"):
        treeimp.explain(model, X, labels)
    reg = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, X[:, 0])
    target = pd.Series(X[:, 0], dtype=object)
    target[5] = pd.NA
    with pytest.raises(ValueError, match=r"pd.NA; first at row 5"):  # (before: "numeric")
        treeimp.explain(reg, X, target)


def test_sample_weight_sum_overflows(forest):
    rf, X, y = forest
    w = np.full(len(y), 1e308)
    with pytest.raises(ValueError, match="sample_weight sums to infinity"):
        treeimp.explain(rf, X, y, sample_weight=w)
    with pytest.raises(ValueError, match="sample_weight sums to infinity"):
        treeimp.permutation_importance(rf, X, y, sample_weight=w)


def test_python_api_warns_about_unseen_categories():
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"c": pd.Categorical(rng.choice(["a", "b", "c"], 300)),
                       "x": rng.normal(size=300)})
    y = (df.c == "a").astype(int) + rng.normal(size=300) * 0.1
    model = lgb.LGBMRegressor(n_estimators=5, verbose=-1).fit(df, y)
    test = df.iloc[:50].copy()
    test["c"] = pd.Categorical(np.where(np.arange(50) < 7, "zz", test.c.astype(str)))
    with pytest.warns(UserWarning, match=r"column 'c': 7 rows have labels the model never "
                                         r"saw \(\['zz'\]\); they are routed as missing"):
        treeimp.explain(model, test, y[:50], random_state=0)


def test_cli_checks_output_paths_before_computing(tmp_path, monkeypatch, capsys, forest):
    import pickle

    import treeimp.api
    from treeimp.cli.main import main

    rf, X, y = forest
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    pd.DataFrame(X, columns=["x0", "x1", "x2"]).assign(y=y).to_csv(tmp_path / "d.csv",
                                                                    index=False)

    def no_work(*args, **kwargs):
        raise AssertionError("explain ran before the output path was checked")

    monkeypatch.setattr(treeimp.api, "explain", no_work)
    for option in ("--output", "--plot"):
        code = main(["explain", str(tmp_path / "rf.pkl"), str(tmp_path / "d.csv"),
                     "--target", "y", "--trust-pickle", option,
                     str(tmp_path / "missing" / "out")])
        err = capsys.readouterr().err
        assert code == 2 and f"{option} " in err and "does not exist" in err, err


def test_repr_uses_one_number_format_per_column():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 6)) * np.array([1, 1, 1, 1, 1, 1])
    y = X[:, 0] + 0.2 * X[:, 1] + 0.01 * X[:, 2] + rng.normal(size=400)
    rf = RandomForestRegressor(n_estimators=10, random_state=0).fit(X[:200], y[:200])
    res = treeimp.explain(rf, X[200:], y[200:], random_state=0)
    text = repr(res).splitlines()
    headings = re.split(r"\s{2,}", text[1].strip())
    lines = [ln for ln in text[3:] if ln.split()[0] in res.feature_names]
    assert len(lines) == len(res.feature_names)
    for m in res.methods:
        k = headings.index(m) if m in headings else headings.index(m + "*")
        cells = [re.split(r"\s{2,}", ln.strip())[1 + k] for ln in lines]
        decimals = {len(num.split(".")[1]) if "." in num else 0
                    for cell in cells for num in re.findall(r"-?\d+\.?\d*", cell)}
        assert len(decimals) == 1, (m, cells)


def test_ubjson_integer_past_int64_is_a_clean_error(tmp_path):
    # a UBJSON object {"a": H"1e30-digit integer"}
    digits = b"1" + b"0" * 30
    doc = b"{i\x01aHi" + bytes([len(digits)]) + digits + b"}"
    path = tmp_path / "m.ubj"
    path.write_bytes(doc)
    with pytest.raises(ValueError) as info:
        treeimp.load(path)
    assert "outside the int64 range" in str(info.value)
    assert "C long" not in str(info.value)

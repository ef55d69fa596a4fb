"""The command line goes the library's way: its result on a file equals
``treeimp.explain`` on the same table read by pandas, it parses the model once (also
under --oob and for a Pipeline), and it asks the parsed model what it declares instead
of testing library names."""

import ast
import contextlib
import json
import pickle
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

import treeimp
import treeimp.explainer
import treeimp.parsers
from treeimp.cli.main import main

CLI = Path(treeimp.__file__).parent / "cli"
LIBRARIES = {"xgboost", "lightgbm", "catboost", "sklearn"}


def _table(n=400, seed=0):
    rng = np.random.default_rng(seed)
    labels = np.array(["a", "b", "c", "d"])
    t = labels[rng.integers(0, 4, n)]
    x = rng.normal(size=n)
    y = (2 * np.isin(t, ["b", "d"]) + x + rng.normal(scale=0.5, size=n) > 1).astype(int)
    return pd.DataFrame({"x": x, "t": t}), y


def _cli(capsys, argv):
    code = main(argv)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def _records(res):
    return json.loads(res.to_json())


def _same(cli, api, rtol=0.0):
    assert [(r["feature"], r["method"]) for r in cli] == \
        [(r["feature"], r["method"]) for r in api]
    for key in ("importance", "stderr", "pvalue", "qvalue"):
        a = np.array([np.nan if r[key] is None else r[key] for r in cli], dtype=float)
        b = np.array([np.nan if r[key] is None else r[key] for r in api], dtype=float)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0, err_msg=key)


@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
def test_cli_equals_explain_on_the_table_read_by_pandas(tmp_path, capsys, library):
    """A categorical LightGBM model file (no stored labels: codes are the sorted labels)
    and an XGBoost one (stored labels, here with one the model never saw), a CSV read in
    batches of 64 rows: the command line's numbers are those of ``treeimp.explain`` on
    the file read by pandas with the text column as 'category'."""
    X, y = _table()
    train = X.iloc[:200].assign(t=pd.Categorical(X["t"].iloc[:200]))
    if library == "lightgbm":
        lgb = pytest.importorskip("lightgbm")
        # trained on the codes of the sorted labels: the file stores no labels
        codes = train.assign(t=train["t"].cat.codes)
        model = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, min_child_samples=5,
                                   min_data_per_group=5, cat_smooth=1, verbose=-1)
        model.fit(codes, y[:200], categorical_feature=["t"])
        path = tmp_path / "model.txt"
        model.booster_.save_model(path)
    else:
        xgb = pytest.importorskip("xgboost")
        model = xgb.XGBClassifier(n_estimators=5, max_depth=3, enable_categorical=True,
                                  max_cat_to_onehot=1, random_state=0).fit(train, y[:200])
        path = tmp_path / "model.json"
        model.save_model(path)
    held = X.iloc[200:].assign(y=y[200:])
    if library == "xgboost":
        held.loc[held.index[:3], "t"] = "e"  # never seen in training
    data = tmp_path / "data.csv"
    held.to_csv(data, index=False)
    cli = _cli(capsys, ["explain", str(path), str(data), "--target", "y", "--format",
                        "json", "--seed", "0", "--batch-rows", "64"])
    if library == "lightgbm":
        ens = treeimp.parse(str(path))
        assert ens.feature_categories is None and ens.is_categorical.any()
    read = pd.read_csv(data, dtype={"t": "category"})
    with pytest.warns(UserWarning) if library == "xgboost" else contextlib.nullcontext():
        api = treeimp.explain(str(path), read[["x", "t"]], read["y"], random_state=0)
    # batches of 64 rows add each block's sums in another order than one pass: the last
    # bits may differ
    _same(cli, _records(api), rtol=1e-12)


@pytest.mark.parametrize("pipeline", [False, True])
def test_cli_parses_the_model_once(tmp_path, capsys, monkeypatch, pipeline):
    """--oob on a pickled forest, and a pickled Pipeline: one parse of the model for the
    whole command (it used to be parsed again to explain it)."""
    X, y = _table()
    X = X.assign(t=X["t"].map({"a": 0, "b": 1, "c": 2, "d": 3}).astype(float))
    rf = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0)
    model = Pipeline([("scale", StandardScaler()), ("rf", rf)]) if pipeline else rf
    model.fit(X, y)
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(model))
    data = tmp_path / "data.csv"
    X.assign(y=y).to_csv(data, index=False)
    calls = []
    original = treeimp.parsers.parse

    def counted(*args, **kwargs):
        calls.append(type(args[0]).__name__)
        return original(*args, **kwargs)

    monkeypatch.setattr(treeimp.parsers, "parse", counted)
    monkeypatch.setattr(treeimp.explainer, "parse", counted)
    argv = ["explain", str(path), str(data), "--target", "y", "--format", "json",
            "--seed", "0", "--trust-pickle", "--methods", "mdi_oob,ufi"]
    cli = _cli(capsys, argv + ([] if pipeline else ["--oob"]))
    assert calls == ["RandomForestClassifier"]
    monkeypatch.setattr(treeimp.explainer, "parse", original)
    api = treeimp.explain(model, X, y, oob=not pipeline, methods=("mdi_oob", "ufi"),
                          random_state=0)
    _same(cli, _records(api))


def _library_tests(tree):
    """Comparisons in ``tree`` that test a library's name (``ens.library == ...``, a
    name among ``LIBRARIES``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        for part in ast.walk(node):
            if (isinstance(part, ast.Attribute) and part.attr == "library") or (
                    isinstance(part, ast.Constant) and part.value in LIBRARIES):
                found.append(node.lineno)
                break
    return found


def test_cli_never_branches_on_a_library_name():
    """What to do with a column is what the parsed model declares (its fields), never
    which library made it."""
    found = {p.name: _library_tests(ast.parse(p.read_text())) for p in CLI.glob("*.py")}
    assert {name: lines for name, lines in found.items() if lines} == {}

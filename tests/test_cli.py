"""`treeimp explain` / `treeimp demo`: round trips against the Python API, and errors.

A model saved by its library plus a CSV of held-out rows must give, through the command
line, exactly the numbers ``treeimp.explain`` gives on the fitted model object and the
in-memory data with the same seed. Every bad input must end in one line
``treeimp: error: ...`` on stderr and exit status 2, never a traceback.
"""

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

import treeimp
from treeimp.cli.inputs import CSV_OPTIONS
from treeimp.cli.main import main as _main

ROOT = Path(__file__).resolve().parent.parent


def _frame(n=500, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(5)})
    X["row_id"] = rng.permutation(n).astype(float)
    X.loc[rng.random(n) < 0.05, "x1"] = np.nan
    f = X["x0"] + 0.5 * X["x1"].fillna(0) ** 2 - X["x2"] * (X["x3"] > 0)
    return X, f.to_numpy(), rng


def _api_records(model, X, y, **kw):
    return json.loads(treeimp.explain(model, X, y, random_state=0, **kw).to_json())


def main(argv):
    """The command line, with --trust-pickle for the pickles these tests write
    themselves (the flag's own tests call ``treeimp.cli.main.main`` directly)."""
    pickled = any(str(a).endswith((".pkl", ".pickle", ".joblib")) for a in argv)
    return _main([*argv, "--trust-pickle"] if pickled and argv[:1] == ["explain"] else argv)


def _cli_records(capsys, args, warnings=None):
    code = main(args)
    captured = capsys.readouterr()
    assert code == 0, captured.err
    if warnings is not None:
        warnings.append(captured.err)
    return json.loads(captured.out)


def _assert_same(cli, api, rtol=0.0):
    assert [(r["feature"], r["method"]) for r in cli] == [(r["feature"], r["method"])
                                                          for r in api]
    for key in ("importance", "stderr", "pvalue", "qvalue"):
        a = np.array([np.nan if r[key] is None else r[key] for r in cli], dtype=float)
        b = np.array([np.nan if r[key] is None else r[key] for r in api], dtype=float)
        if rtol:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol * np.nanmax(np.abs(b)),
                                       err_msg=key)
        else:
            np.testing.assert_array_equal(a, b, err_msg=key)
    assert np.isfinite([r["importance"] for r in cli]).all()


def _write_csv(path, X, y, target="y"):
    X.assign(**{target: y}).to_csv(path, index=False)
    return str(path)


# ----------------------------------------------------------------------- round trips
@pytest.mark.parametrize("fmt", ["json", "ubj"])
def test_xgboost_file_matches_api(tmp_path, capsys, fmt):
    xgb = pytest.importorskip("xgboost")
    X, f, rng = _frame()
    y = (f + rng.logistic(size=len(f)) > 0.3).astype(int)
    model = xgb.XGBClassifier(n_estimators=12, max_depth=3, learning_rate=0.3,
                              random_state=0).fit(X[:300], y[:300])
    path = tmp_path / f"model.{fmt}"
    model.save_model(path)
    csv = _write_csv(tmp_path / "data.csv", X[300:], y[300:])
    cli = _cli_records(capsys, ["explain", str(path), csv, "--target", "y", "--format",
                                "json", "--seed", "0"])
    # the Python API on the same file: the same numbers
    _assert_same(cli, _api_records(str(path), X[300:], y[300:]))
    # on the fitted object: the file does not store the learning rate, which the file
    # parser recovers from float32 node weights, so shrinkage-dependent measures (ufi)
    # agree to float32 precision only
    _assert_same(cli, _api_records(model, X[300:], y[300:]), rtol=1e-6)


def test_lightgbm_text_file_with_categories_matches_api(tmp_path, capsys):
    lgb = pytest.importorskip("lightgbm")
    X, f, rng = _frame()
    levels = ["red", "green", "blue", "cyan"]
    X["colour"] = pd.Categorical(rng.choice(levels, len(X)), categories=levels)
    y = f + (X["colour"] == "blue") + rng.normal(scale=0.3, size=len(f))
    model = lgb.LGBMRegressor(n_estimators=12, num_leaves=8, min_child_samples=10,
                              verbose=-1, random_state=0).fit(X[:300], y[:300])
    assert model.booster_.dump_model()["pandas_categorical"]  # the file stores the levels
    path = tmp_path / "model.txt"
    model.booster_.save_model(path)
    # the CSV holds the labels as text; a held-out set also in another column order
    data = X[300:].assign(y=y[300:])[["y", "colour"] + [f"x{j}" for j in range(5)]
                                     + ["row_id"]]
    data["colour"] = data["colour"].astype(str)
    data.to_csv(tmp_path / "data.csv", index=False)
    cli = _cli_records(capsys, ["explain", str(path), str(tmp_path / "data.csv"), "--target",
                                "y", "--format", "json", "--seed", "0"])
    _assert_same(cli, _api_records(model, X[300:], y[300:]))


def test_xgboost_categories_and_multiclass_from_a_file(tmp_path, capsys):
    """XGBoost 3 stores the training categories in the file: text in the CSV is mapped by
    label (here with a label order unlike training's and an unseen label)."""
    xgb = pytest.importorskip("xgboost")
    X, f, rng = _frame()
    levels = ["red", "green", "blue", "cyan"]
    X["colour"] = pd.Categorical(rng.choice(levels, len(X)), categories=levels)
    y = np.digitize(f + 1.5 * (X["colour"] == "blue") + rng.normal(scale=0.3, size=len(f)),
                    [-0.3, 0.8])
    model = xgb.XGBClassifier(n_estimators=6, max_depth=3, enable_categorical=True,
                              max_cat_to_onehot=1, random_state=0).fit(X[:300], y[:300])
    path = tmp_path / "model.json"
    model.save_model(path)
    data = X[300:].assign(y=y[300:])
    data["colour"] = data["colour"].astype(str)
    data.loc[data.index[:5], "colour"] = "magenta"  # never seen in training
    data.to_csv(tmp_path / "data.csv", index=False)
    err = []
    cli = _cli_records(capsys, ["explain", str(path), str(tmp_path / "data.csv"), "--target",
                                "y", "--format", "json", "--seed", "0"], err)
    assert "'colour': 5 rows have labels the model never saw (['magenta'])" in err[0]
    Xv = X[300:].copy()
    Xv["colour"] = pd.Categorical(data["colour"], categories=["magenta", *sorted(levels)])
    _assert_same(cli, _api_records(str(path), Xv, y[300:]))
    # xgboost itself routes the unseen label as missing, as the CLI does
    Xv["colour"] = Xv["colour"].cat.set_categories(levels)  # magenta -> NaN
    ens = treeimp.parsers.parse(str(path))  # the file parser, as the CLI uses it
    np.testing.assert_allclose(ens.predict_raw(Xv), model.predict(Xv, output_margin=True),
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("suffix", [".pkl", ".joblib"])
def test_pickled_forest_matches_api(tmp_path, capsys, suffix):
    X, f, rng = _frame()
    y = np.where(f > 0.2, "high", "low")  # string classes, mapped through classes_
    rf = RandomForestClassifier(n_estimators=15, min_samples_leaf=3,
                                random_state=0).fit(X[:300].fillna(0), y[:300])
    path = tmp_path / f"forest{suffix}"
    if suffix == ".pkl":
        path.write_bytes(pickle.dumps(rf))
    else:
        import joblib

        joblib.dump(rf, path)
    Xv = X[300:].fillna(0)
    csv = _write_csv(tmp_path / "data.csv", Xv, y[300:], target="label")
    cli = _cli_records(capsys, ["explain", str(path), csv, "--target", "label", "--format",
                                "json", "--seed", "0", "--methods", "mdi_oob,ufi,naive_oob"])
    _assert_same(cli, _api_records(rf, Xv, y[300:], methods=("mdi_oob", "ufi", "naive_oob")))


def test_pickled_hist_gradient_boosting_with_categories(tmp_path, capsys):
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, f, rng = _frame()
    X["shape"] = pd.Categorical(rng.choice(["disc", "star", "ring"], len(X)))
    y = f + 2.0 * (X["shape"] == "star") + rng.normal(scale=0.3, size=len(f))
    hgb = HistGradientBoostingRegressor(max_iter=10, categorical_features="from_dtype",
                                        random_state=0).fit(X[:300], y[:300])
    (tmp_path / "hgb.pkl").write_bytes(pickle.dumps(hgb))
    data = X[300:].assign(y=y[300:])
    data["shape"] = data["shape"].astype(str)
    data.to_csv(tmp_path / "data.csv", index=False)
    cli = _cli_records(capsys, ["explain", str(tmp_path / "hgb.pkl"), str(tmp_path / "data.csv"),
                                "--target", "y", "--format", "json", "--seed", "0"])
    _assert_same(cli, _api_records(hgb, X[300:], y[300:]))


def test_pickled_forest_oob_and_csv_output(tmp_path, capsys):
    X, f, rng = _frame()
    X = X.fillna(0)
    rf = RandomForestRegressor(n_estimators=10, max_depth=6, random_state=0).fit(X, f)
    (tmp_path / "rf.pickle").write_bytes(pickle.dumps(rf))
    csv = _write_csv(tmp_path / "train.csv", X, f)
    out = tmp_path / "imp.csv"
    assert main(["explain", str(tmp_path / "rf.pickle"), csv, "--target", "y", "--oob",
                 "--format", "csv", "--seed", "0", "--output", str(out)]) == 0
    assert capsys.readouterr().out == ""
    got = pd.read_csv(out, **CSV_OPTIONS)
    want = treeimp.explain(rf, X, f, oob=True, random_state=0).to_frame()
    pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_parquet_and_table_and_plot(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    pytest.importorskip("matplotlib")
    X, f, _ = _frame()
    X = X.fillna(0)
    rf = RandomForestRegressor(n_estimators=8, max_depth=5, random_state=0).fit(X[:300],
                                                                                  f[:300])
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    X[300:].assign(y=f[300:]).to_parquet(tmp_path / "data.parquet")
    png = tmp_path / "imp.png"
    code = main(["explain", str(tmp_path / "rf.pkl"), str(tmp_path / "data.parquet"),
                 "--target", "y", "--seed", "0", "--plot", str(png)])
    out = capsys.readouterr().out
    assert code == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    res = treeimp.explain(rf, X[300:], f[300:], random_state=0)
    lines = out.splitlines()
    # the forest's screening measure first (marked) with its q-value, the other
    # out-of-sample measures, the in-sample mdi last
    heading = next(ln for ln in lines if "mdi_oob" in ln and "±" not in ln).split()
    assert heading == ["mdi_oob_centered*", "q", "mdi_oob", "ufi", "mdi"]
    # one line per feature, in the order of the screening measure
    body = [ln.split()[0] for ln in lines if ln.split() and ln.split()[0] in res.table.index]
    assert body == res.ranking("mdi_oob_centered")
    row = next(ln for ln in lines if ln.startswith("x0 ")).split()
    assert row[2] == "±" and row[6] == "±"
    for at, m in ((1, "mdi_oob_centered"), (5, "mdi_oob")):
        v, s = res.table.loc["x0", m], res.stderr.loc["x0", m]
        assert float(row[at]) == pytest.approx(v, abs=s / 10)
        assert float(row[at + 2]) == pytest.approx(s, rel=0.05)
    q = res.qvalues.loc["x0", "mdi_oob_centered"]
    assert row[4] == "<0.001" if q < 0.001 else float(row[4]) == pytest.approx(q, abs=5e-4)
    # a legend line per column, after the table
    legend = lines[lines.index(next(ln for ln in lines if ln.startswith("* "))):]
    assert [ln.split()[0] for ln in legend[1:6]] == heading


def test_runs_are_reproducible_without_a_seed(tmp_path, capsys):
    """Without --seed the row blocks come from a fixed seed (0): two runs print the same
    table, equal to the Python API's with random_state=0; --seed changes them."""
    X, f, _ = _frame(n=300)
    rf = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X[:150],
                                                                                 f[:150])
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    data = _write_csv(tmp_path / "d.csv", X[150:], f[150:])
    argv = ["explain", str(tmp_path / "rf.pkl"), data, "--target", "y"]
    outs = []
    for extra in ([], [], ["--format", "json"], ["--format", "json", "--seed", "1"]):
        assert main(argv + extra) == 0
        outs.append(capsys.readouterr().out)
    assert outs[0] == outs[1] and "mdi_oob" in outs[0]
    api = treeimp.explain(rf, X[150:], f[150:], random_state=0)
    _assert_same(json.loads(outs[2]), json.loads(api.to_json()))
    assert outs[3] != outs[2]


@pytest.mark.parametrize("value, stderr, text", [
    (0.19803, 0.02314, "0.198 ± 0.023"), (0.000316, 0.00151, "0.0003 ± 0.0015"),
    (-0.02983, 0.00299, "-0.0298 ± 0.0030"), (1234.56, 56.7, "1235 ± 57"),
    (0.0, 0.0, "0 ± 0"), (2.5e-7, 1.1e-7, "2.5e-07 ± 1.1e-07"), (0.25684, np.nan, "0.2568"),
])
def test_value_format(value, stderr, text):
    from treeimp.cli.main import _format_value

    assert _format_value(value, stderr) == text


def test_parquet_without_pyarrow_is_a_clear_error(tmp_path, capsys, monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "pyarrow" else find_spec(name, *a))
    X, f, _ = _frame(n=50)
    rf = RandomForestRegressor(n_estimators=2, max_depth=2).fit(X.fillna(0), f)
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    (tmp_path / "data.parquet").write_bytes(b"PAR1")
    assert main(["explain", str(tmp_path / "rf.pkl"), str(tmp_path / "data.parquet"),
                 "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "needs pyarrow: pip install pyarrow" in err


def test_text_column_matched_by_name_order_and_drop(tmp_path, capsys):
    X, f, _ = _frame()
    X = X.fillna(0)
    rf = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X[:300],
                                                                                 f[:300])
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    data = X[300:].assign(y=f[300:], comment="text")[::-1].iloc[:, ::-1]
    data.to_csv(tmp_path / "data.csv", index=False)
    cli = _cli_records(capsys, ["explain", str(tmp_path / "rf.pkl"), str(tmp_path / "data.csv"),
                                "--target", "y", "--drop", "comment", "--format", "json",
                                "--seed", "0"])
    _assert_same(cli, _api_records(rf, X[300:][::-1], f[300:][::-1]))


# ----------------------------------------------------------------------- errors
@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A pickled forest, an XGBoost classifier file and matching CSVs."""
    d = tmp_path_factory.mktemp("cli")
    X, f, rng = _frame(n=200)
    X = X.fillna(0)
    rf = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X, f)
    (d / "rf.pkl").write_bytes(pickle.dumps(rf))
    _write_csv(d / "data.csv", X, f)
    X.drop(columns="x3").assign(y=f).to_csv(d / "missing_col.csv", index=False)
    X.assign(y=f, extra=1.0).to_csv(d / "extra_col.csv", index=False)
    X.assign(y=f, x4=X["x4"].map(lambda v: f"level{v:.0f}")).to_csv(d / "text.csv",
                                                                     index=False)
    (d / "corrupt.json").write_text('{"learner": {"gradient_booster": ')
    (d / "corrupt.txt").write_text("tree\nversion=v4\nnot a model\n")
    (d / "corrupt.pkl").write_bytes(b"\x80\x04not a pickle")
    (d / "dict.pkl").write_bytes(pickle.dumps({"not": "a model"}))
    (d / "bad.csv").write_bytes(b"\xff\xfe\x00garbage\n\x00\x01")
    (d / "model.bin").write_bytes(b"\x00")
    (d / "data.xlsx").write_bytes(b"\x00")
    try:
        import xgboost as xgb

        yc = (f > 0).astype(int)
        m = xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, yc)
        m.save_model(d / "xgb.json")
        X.assign(y=np.where(yc == 1, "yes", "no")).to_csv(d / "string_labels.csv",
                                                          index=False)
        X.assign(y=yc * 2).to_csv(d / "label_two.csv", index=False)
        X.assign(y=yc).to_csv(d / "xgb_data.csv", index=False)
    except ImportError:
        pass
    return {p.name: str(p) for p in d.iterdir()}


ERROR_CASES = {
    "model does not exist": (["nope.json", "data.csv"], "does not exist"),
    "data does not exist": (["rf.pkl", "nope.csv"], "does not exist"),
    "model is a folder": ([".", "data.csv"], "not a file"),
    "corrupt xgboost json": (["corrupt.json", "data.csv"], "corrupt.json"),
    "corrupt lightgbm text": (["corrupt.txt", "data.csv"], ""),
    "corrupt pickle": (["corrupt.pkl", "data.csv"], "cannot unpickle"),
    "pickle of an unsupported object": (["dict.pkl", "data.csv"], "cannot explain a"),
    "unsupported model suffix": (["model.bin", "data.csv"], "unsupported suffix"),
    "unsupported data suffix": (["rf.pkl", "data.xlsx"], "unsupported suffix"),
    "unreadable csv": (["rf.pkl", "bad.csv"], ""),
    "missing target column": (["rf.pkl", "data.csv", "--target", "label"],
                              "no target column 'label'"),
    "missing feature column": (["rf.pkl", "missing_col.csv"], "['x3']"),
    "unexpected column": (["rf.pkl", "extra_col.csv"], "['extra']"),
    "text column without categories": (["rf.pkl", "text.csv"], "'x4' holds text"),
    "bad method": (["rf.pkl", "data.csv", "--methods", "mdi,shap"], "'shap'"),
    "too many blocks": (["rf.pkl", "data.csv", "--n-blocks", "100000"], "n_blocks"),
    "oob on a model file": (["xgb.json", "xgb_data.csv", "--oob"], "oob"),
    "string labels for a model file": (["xgb.json", "string_labels.csv"], "0..1"),
    "label out of range for a model file": (["xgb.json", "label_two.csv"], "0..1"),
}


def _args(saved, files, extra):
    resolved = [saved.get(a, a) for a in files]
    trust = ["--trust-pickle"] if resolved[0].endswith((".pkl", ".pickle")) else []
    return ["explain", *resolved, *(["--target", "y"] if "--target" not in extra else []),
            *extra, *trust]


@pytest.mark.parametrize("case", list(ERROR_CASES))
def test_errors_are_one_line_with_status_2(saved, capsys, case):
    argv, expected = ERROR_CASES[case]
    if argv[0] == "xgb.json" and "xgb.json" not in saved:
        pytest.skip("xgboost not installed")
    code = main(_args(saved, argv[:2], argv[2:]))
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("treeimp: error: ") and err.endswith("\n")
    assert err.count("\n") == 1, err
    assert expected in err


@pytest.mark.parametrize("case", ["model does not exist", "corrupt pickle",
                                  "missing target column", "missing feature column"])
def test_errors_in_a_subprocess(saved, case):
    argv, expected = ERROR_CASES[case]
    proc = subprocess.run([sys.executable, "-m", "treeimp", *_args(saved, argv[:2], argv[2:])],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("treeimp: error: ")
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert expected in proc.stderr


def test_explain_in_a_subprocess_prints_the_table(saved):
    proc = subprocess.run([sys.executable, "-m", "treeimp", "explain", saved["rf.pkl"],
                           saved["data.csv"], "--target", "y", "--seed", "1",
                           "--trust-pickle"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "mdi_oob_centered*" in proc.stdout and "q-value" in proc.stdout
    assert all(name in proc.stdout for name in ["x0", "x4", "row_id"])


def test_text_labels_warn_for_uncategorised_lightgbm_categories(tmp_path, capsys):
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(3)
    n = 400
    codes = rng.integers(0, 4, n)
    X = np.column_stack([codes, rng.normal(size=n)]).astype(float)
    y = (codes == 2) * 2.0 + X[:, 1] + rng.normal(scale=0.3, size=n)
    booster = lgb.train({"objective": "regression", "num_leaves": 4, "verbose": -1,
                         "min_data_per_group": 5, "cat_smooth": 1},
                        lgb.Dataset(X, y, categorical_feature=[0]), num_boost_round=5)
    booster.save_model(tmp_path / "m.txt")
    labels = np.array(["a", "b", "c", "d"])[codes]
    pd.DataFrame({"c": labels, "v": X[:, 1], "y": y}).to_csv(tmp_path / "d.csv", index=False)
    err = []
    cli = _cli_records(capsys, ["explain", str(tmp_path / "m.txt"), str(tmp_path / "d.csv"),
                                "--target", "y", "--format", "json", "--seed", "0",
                                "--columns-by-position"], err)
    # sorted labels a < b < c < d are the training codes 0..3 here
    api = treeimp.explain(booster, X, y, feature_names=["c", "v"], random_state=0)
    _assert_same(cli, json.loads(api.to_json()))
    assert err[0].startswith("treeimp: warning: column 'c' holds text")


@pytest.mark.parametrize("argv, expected", [
    (["explain", "m.json", "d.csv"], "the following arguments are required: --target"),
    (["explain"], "MODEL, DATA, --target"),
    ([], "arguments are required: command"),
    (["explain", "m.json", "d.csv", "--target", "y", "--format", "xml"], "--format"),
    (["demo", "--trees", "many"], "--trees"),
])
def test_usage_errors_are_one_line_with_status_2(capsys, argv, expected):
    """argparse's own errors (a missing --target) end like every other error, not in
    argparse's multi-line usage text."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("treeimp: error: ") and captured.err.count("\n") == 1
    assert expected in captured.err and "--help" in captured.err


def test_missing_target_option_in_a_subprocess(saved):
    proc = subprocess.run([sys.executable, "-m", "treeimp", "explain", saved["rf.pkl"],
                           saved["data.csv"]], capture_output=True, text=True, cwd=ROOT,
                          timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("treeimp: error: ") and proc.stderr.count("\n") == 1
    assert "--target" in proc.stderr and "usage:" not in proc.stderr


# ----------------------------------------------------------------------- demo
def test_demo_prints_the_table():
    proc = subprocess.run([sys.executable, "-m", "treeimp", "demo", "--trees", "20"],
                          capture_output=True, text=True, cwd=ROOT, timeout=180,
                          env={**os.environ, "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr
    assert "mdi_oob" in proc.stdout and "row_id" in proc.stdout
    assert "What moved" in proc.stdout and "noise_100_levels" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_demo_noise_columns_drop_from_mdi_to_mdi_oob():
    """The demo's point, on the numbers it computes (default trees and seed): in-sample
    MDI ranks every noise column above real features, out of bag each one falls in rank
    and is not above zero by more than a standard error."""
    from treeimp.cli.demo import NOISE, demo_importances, rank_moves

    moves = rank_moves(demo_importances())
    assert list(moves.index) == list(NOISE)
    assert (moves["real below (mdi)"] >= 5).all(), moves  # visibly overrated by MDI
    assert (moves["mdi_oob rank"] > moves["mdi rank"]).all(), moves
    assert (moves["real below (mdi_oob)"] < moves["real below (mdi)"]).all(), moves
    assert (moves["mdi_oob"] < moves["mdi_oob se"]).all(), moves
    assert (moves["ufi"] < moves["ufi se"]).all(), moves


def test_catboost_json_file_with_text_categories_matches_api(tmp_path, capsys):
    catboost = pytest.importorskip("catboost")
    X, f, rng = _frame()
    X["colour"] = rng.choice(["red", "green", "blue", "cyan"], len(X))
    y = f + (X["colour"] == "blue") + rng.normal(scale=0.3, size=len(f))
    model = catboost.CatBoostRegressor(iterations=12, depth=3, one_hot_max_size=4,
                                       cat_features=["colour"], verbose=0, random_seed=0,
                                       allow_writing_files=False).fit(X[:300], y[:300])
    path = tmp_path / "model.json"
    model.save_model(str(path), format="json")
    csv = _write_csv(tmp_path / "data.csv", X[300:], y[300:])
    cli = _cli_records(capsys, ["explain", str(path), csv, "--target", "y", "--format",
                                "json", "--seed", "0"])
    _assert_same(cli, _api_records(model, X[300:], y[300:]))


def test_select_lists_the_default_screening_measure_kept_features(tmp_path, capsys):
    X, f, _ = _frame()
    X = X.fillna(0)
    rf = RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0).fit(X[:300],
                                                                                   f[:300])
    (tmp_path / "rf.pkl").write_bytes(pickle.dumps(rf))
    csv = _write_csv(tmp_path / "data.csv", X[300:], f[300:], target="y")
    code = main(["explain", str(tmp_path / "rf.pkl"), csv, "--target", "y", "--seed", "0",
                 "--select", "0.05"])
    out = capsys.readouterr().out
    assert code == 0
    res = treeimp.explain(rf, X[300:], f[300:], random_state=0,
                          methods=("mdi", "mdi_oob", "ufi", "mdi_oob_centered"))
    kept = res.select("mdi_oob_centered", 0.05)
    assert "x0" in kept and "row_id" not in kept
    assert f"kept at false discovery rate 0.05 by mdi_oob_centered: {', '.join(kept)}" in out
    assert main(["explain", str(tmp_path / "rf.pkl"), csv, "--target", "y",
                 "--select", "1.5"]) == 2
    assert "--select needs a false discovery rate in (0, 1), got 1.5" in capsys.readouterr().err

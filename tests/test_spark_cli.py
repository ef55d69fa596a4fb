"""`treeimp explain MODEL DATA --target y --spark [MASTER]` on a Parquet dataset read by
Spark: with --id-column holding the rows' positions, the in-memory result."""
# ruff: noqa: F811  (the spark fixture is imported, then named as an argument)

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")
xgb = pytest.importorskip("xgboost")

import treeimp  # noqa: E402
from tests.spark_fixtures import spark  # noqa: E402, F401
from treeimp.cli.main import main  # noqa: E402


def _dataset(tmp_path, n=600, n_files=3):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(4)})
    X.loc[rng.random(n) < 0.05, "x1"] = np.nan
    y = ((X["x0"] + 0.5 * X["x1"].fillna(0) ** 2 + rng.normal(size=n)) > 0.5).astype(int)
    folder = tmp_path / "data"
    folder.mkdir()
    for i, rows in enumerate(np.array_split(np.arange(n), n_files)):
        X.iloc[rows].assign(y=y.iloc[rows], row=rows).to_parquet(
            folder / f"part{i}.parquet", index=False)
    return X, y, str(folder)


def test_parquet_dataset_on_spark_equals_in_memory(tmp_path, capsys, spark):
    X, y, folder = _dataset(tmp_path)
    model = xgb.XGBClassifier(n_estimators=8, max_depth=3, n_jobs=1).fit(X, y)
    path = str(tmp_path / "model.json")
    model.save_model(path)
    code = main(["explain", path, folder, "--target", "y", "--seed", "0", "--format",
                 "json", "--spark", "local[2]", "--id-column", "row"])
    out = capsys.readouterr()
    assert code == 0, out.err
    cli = json.loads(out.out)
    api = json.loads(treeimp.explain(treeimp.load(path), X, y, random_state=0).to_json())
    assert [(r["feature"], r["method"]) for r in cli] == \
        [(r["feature"], r["method"]) for r in api]
    for key in ("importance", "stderr", "pvalue"):
        a = np.array([np.nan if r[key] is None else r[key] for r in cli], dtype=float)
        b = np.array([np.nan if r[key] is None else r[key] for r in api], dtype=float)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-13 * np.nanmax(np.abs(b)),
                                   err_msg=key)


def test_spark_option_errors(tmp_path, capsys, spark):
    X, y, folder = _dataset(tmp_path)
    model = xgb.XGBClassifier(n_estimators=2, max_depth=2).fit(X, y)
    path = str(tmp_path / "model.json")
    model.save_model(path)
    base = ["explain", path, folder, "--target", "y"]
    assert main(base + ["--spark", "--scheduler", "threads"]) == 2
    assert "--spark and --scheduler cannot be combined" in capsys.readouterr().err
    assert main(base + ["--id-column", "row"]) == 2
    assert "--id-column names the row identities of --spark" in capsys.readouterr().err
    assert main(base + ["--spark", "--id-column", "nope", "--drop", "row"]) == 2
    assert "--id-column 'nope' is not a column" in capsys.readouterr().err
    assert main(["explain", path, str(tmp_path / "none*.parquet"), "--target", "y",
                 "--spark"]) == 2
    assert "matches no file or directory" in capsys.readouterr().err

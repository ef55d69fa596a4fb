"""`treeimp explain MODEL 'data/*.parquet' --target y --scheduler ...` on a Parquet
dataset read with dask.dataframe.read_parquet: the same result as in memory."""
# ruff: noqa: F811  (the dask_client fixture is imported, then named as an argument)

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")
xgb = pytest.importorskip("xgboost")

import dask  # noqa: E402

import treeimp  # noqa: E402
from tests.dask_fixtures import dask_client  # noqa: E402, F401
from treeimp.cli.main import main  # noqa: E402


def _dataset(tmp_path, n=900, n_files=3, classes=False):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(4)})
    X.loc[rng.random(n) < 0.05, "x1"] = np.nan
    s = X["x0"] + 0.5 * X["x1"].fillna(0) ** 2 + rng.normal(size=n)
    y = (s > 0.5).astype(int) if classes else s
    folder = tmp_path / "data"
    folder.mkdir()
    cuts = np.array_split(np.arange(n), n_files)
    for i, rows in enumerate(cuts):  # uneven files, read in name order
        X.iloc[rows].assign(y=y.iloc[rows]).to_parquet(folder / f"part{i}.parquet",
                                                       index=False)
    return X, y, str(folder / "*.parquet")


def _records(capsys, args):
    code = main(args)
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def _assert_close(cli, api):
    assert [(r["feature"], r["method"]) for r in cli] == \
        [(r["feature"], r["method"]) for r in api]
    for key in ("importance", "stderr", "pvalue", "qvalue"):
        a = np.array([np.nan if r[key] is None else r[key] for r in cli], dtype=float)
        b = np.array([np.nan if r[key] is None else r[key] for r in api], dtype=float)
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-13 * np.nanmax(np.abs(b)),
                                   err_msg=key)


@pytest.mark.parametrize("scheduler", ["synchronous", "threads", "processes", "cluster"])
def test_parquet_dataset_on_dask_equals_in_memory(tmp_path, capsys, dask_client,
                                                  scheduler):
    X, y, pattern = _dataset(tmp_path, classes=True)
    model = xgb.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1).fit(X, y)
    path = str(tmp_path / "model.json")
    model.save_model(path)
    address = dask_client.scheduler.address if scheduler == "cluster" else scheduler
    cli = _records(capsys, ["explain", path, pattern, "--target", "y", "--seed", "0",
                            "--format", "json", "--scheduler", address])
    api = json.loads(treeimp.explain(treeimp.load(path), X, y, random_state=0).to_json())
    _assert_close(cli, api)
    # the table output names the rows read from the dataset
    assert main(["explain", path, str(tmp_path / "data"), "--target", "y", "--seed", "0",
                 "--scheduler", "synchronous"]) == 0
    assert "900 held-out rows" in capsys.readouterr().out


def test_scheduler_errors(tmp_path, capsys):
    X, y, pattern = _dataset(tmp_path)
    model = xgb.XGBRegressor(n_estimators=3, max_depth=2).fit(X, y)
    path = str(tmp_path / "model.json")
    model.save_model(path)
    base = ["explain", path, pattern, "--target", "y"]
    assert main(base + ["--scheduler", "fast"]) == 2
    assert "--scheduler 'fast' is neither a scheduler address" in capsys.readouterr().err
    assert main(["explain", path, str(tmp_path / "none*.parquet"), "--target", "y",
                 "--scheduler", "threads"]) == 2
    assert "matches no file or directory" in capsys.readouterr().err
    assert main(base + ["--target", "nope", "--scheduler", "threads"]) == 2
    assert "has no target column 'nope'" in capsys.readouterr().err
    with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
        assert main(base + ["--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "cannot connect to the dask scheduler 'tcp://127.0.0.1:1'" in \
        capsys.readouterr().err


def test_class_labels_checked_in_partitions(tmp_path, capsys):
    X, y, pattern = _dataset(tmp_path, classes=True)
    model = xgb.XGBClassifier(n_estimators=3, max_depth=2).fit(X, y)
    path = str(tmp_path / "model.json")
    model.save_model(path)
    df = pd.read_parquet(tmp_path / "data" / "part2.parquet")
    df.loc[df.index[3], "y"] = 2  # not a class index of a binary model
    df.to_parquet(tmp_path / "data" / "part2.parquet", index=False)
    assert main(["explain", path, pattern, "--target", "y", "--scheduler",
                 "synchronous"]) == 2
    assert "target column must hold the class indices 0..1" in capsys.readouterr().err

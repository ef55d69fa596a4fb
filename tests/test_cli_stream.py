"""`treeimp explain MODEL DATA` reads DATA in batches: a CSV file and a folder of Parquet
files several times larger than the memory the run may allocate give the importances of
the in-memory call, and a progress bar counts rows."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("pyarrow")
xgb = pytest.importorskip("xgboost")

import treeimp  # noqa: E402
from treeimp.cli.main import main  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _rows(n, seed):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({f"x{j}": rng.normal(size=n) for j in range(5)})
    logit = X["x0"] - X["x1"] * X["x2"] + 0.3 * rng.logistic(size=n)
    return X, (logit > 0).astype(int)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("stream")
    X, y = _rows(2000, 0)
    xgb.XGBClassifier(n_estimators=20, max_depth=3, n_jobs=1).fit(X, y).save_model(
        d / "m.json")
    return d / "m.json"


def _write(folder, X, y, parts):
    """The rows as one CSV file and as a folder of ``parts`` Parquet files."""
    data = X.assign(y=y)
    csv = folder / "rows.csv"
    data.to_csv(csv, index=False, float_format="%.17g")
    pq = folder / "rows"
    pq.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(data)), parts)):
        data.iloc[part].to_parquet(pq / f"part-{i:03d}.parquet", index=False,
                                   row_group_size=2_000)
    return csv, pq


def _assert_close(cli, api, rtol=1e-10):
    assert [(r["feature"], r["method"]) for r in cli] == [(r["feature"], r["method"])
                                                          for r in api]
    for key in ("importance", "stderr", "pvalue"):
        a = np.array([r[key] for r in cli], dtype=float)
        b = np.array([r[key] for r in api], dtype=float)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-15, err_msg=key)


# A fresh interpreter: one small run first (imports, numba's compiled kernels), then
# the peak of Python / numpy allocations (tracemalloc) and of pyarrow's pool over the
# large run, which writes its importances as JSON.
_RUN = r"""
import sys, tracemalloc
import pyarrow as pa
from treeimp.cli.main import main
model, small, data, out = sys.argv[1:5]
common = ["--target", "y", "--seed", "0", "--format", "json", "--batch-rows", "2000",
          "--n-jobs", "1"]
assert main(["explain", model, small, *common, "--output", out]) == 0
before = pa.default_memory_pool().max_memory()
tracemalloc.start()
assert main(["explain", model, data, *common, "--output", out]) == 0
print(tracemalloc.get_traced_memory()[1], pa.default_memory_pool().max_memory(), before)
"""


def test_csv_and_parquet_folder_stream_with_the_in_memory_result(model_file, tmp_path):
    """250,000 rows (10 MB of features in memory, more as CSV text) in batches of
    2,000: the run allocates at most 2.5 MB at its peak (tracemalloc; pyarrow's pool
    too), and its importances, standard errors and p-values equal those of
    ``treeimp.explain`` on the whole table in memory."""
    n = 250_000
    X, y = _rows(n, 1)
    csv, folder = _write(tmp_path, X, y, parts=6)
    bound = 2_500_000
    assert X.memory_usage(index=False).sum() >= 4 * bound
    small = tmp_path / "small.csv"
    X[:500].assign(y=y[:500]).to_csv(small, index=False)
    ens = treeimp.parse(str(model_file))
    # the command line's default methods are explain's
    api = json.loads(treeimp.explain(ens, X, y, random_state=0).to_json())
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for data in (csv, folder):
        out = tmp_path / "out.json"
        run = subprocess.run([sys.executable, "-c", _RUN, str(model_file), str(small),
                              str(data), str(out)], env=env, capture_output=True,
                             text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-3000:]
        traced, arrow_peak, arrow_before = map(int, run.stdout.split())
        assert traced < bound, (data.name, traced)
        assert arrow_peak < max(bound, arrow_before), (data.name, arrow_peak)
        _assert_close(json.loads(out.read_text()), api)


def test_progress_bar_counts_rows(model_file, tmp_path, capsys):
    pytest.importorskip("tqdm")
    X, y = _rows(900, 2)
    csv, folder = _write(tmp_path, X, y, parts=3)
    # the Parquet files state their rows: the bar has a total; a CSV file's has none
    for data, total in ((folder, "/900"), (csv, "it")):
        assert main(["explain", str(model_file), str(data), "--target", "y", "--seed", "0",
                     "--format", "json", "--batch-rows", "100", "--progress"]) == 0
        captured = capsys.readouterr()
        assert "rows: " in captured.err and total in captured.err
        _assert_close(json.loads(captured.out), json.loads(treeimp.explain(
            treeimp.parse(str(model_file)), X, y, random_state=0).to_json()))


def test_glob_and_batch_rows_errors(model_file, tmp_path, capsys):
    X, y = _rows(300, 3)
    _, folder = _write(tmp_path, X, y, parts=3)
    args = ["explain", str(model_file), str(folder / "part-*.parquet"), "--target", "y",
            "--seed", "0", "--format", "json", "--batch-rows", "64"]
    assert main(args) == 0
    _assert_close(json.loads(capsys.readouterr().out), json.loads(treeimp.explain(
        treeimp.parse(str(model_file)), X, y, random_state=0).to_json()))
    assert main(args[:-1] + ["0"]) == 2
    assert "--batch-rows must be >= 1" in capsys.readouterr().err
    assert main(["explain", str(model_file), str(tmp_path / "nothing-*.parquet"),
                 "--target", "y"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches no file" in err

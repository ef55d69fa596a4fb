"""benchmarks/dask_scale.py runs end to end at tiny sizes (no timings asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("distributed")
pytest.importorskip("xgboost")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "dask_scale.py"


def test_dask_scale_small_run(tmp_path):
    out = tmp_path / "rows.json"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--rows", "4000", "--features", "8", "--workers", "1",
         "--rounds", "5", "--depth", "3", "--trees", "3", "--train-rows", "500",
         "--chunk-rows", "1000", "--in-memory-max", "4000", "--memory-limit", "1GiB",
         "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(out.read_text())
    where = [(r["model"], r["where"]) for r in result["runs"]]
    assert ("xgboost", "dask 1 worker") in where and ("forest", "dask 1 worker") in where
    assert ("forest", "in memory, 2 threads") in where
    for r in result["runs"]:
        assert r["wall (s)"] > 0 and r["rows"] == 4000
        if r["where"].startswith("dask"):
            assert r["worker peak RSS (MB)"] >= r["worker RSS at start (MB)"] > 0
    assert set(result["sizes"]) == {"xgboost", "forest"}
    assert "| model | where |" in run.stdout

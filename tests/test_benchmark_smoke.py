"""The benchmark script runs end to end at tiny sizes, so it cannot rot (no timings
are asserted: machines are shared and noisy)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"


def test_benchmark_small_run(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--small", "--no-subprocess",
                          "--threads", "1", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "results.json").read_text())
    results = report["results"]
    assert {(r["model"], r["task"]) for r in results} == {
        (m, t) for m in ("xgboost", "lightgbm", "forest") for t in ("binary", "regression")}
    for r in results:
        assert r["explain_s"] > 0 and r["library_predict_s"] > 0
        # treeimp's permutation importance reproduces scikit-learn's (float32 for XGBoost)
        assert r["permutation_max_abs_diff"] < 1e-5, r
    table = (tmp_path / "results.md").read_text()
    assert "| xgboost | binary |" in table and "explain" in table

"""benchmarks/peers.py runs end to end at tiny sizes with the peers the test environment
has (no timings asserted: the machine is shared and noisy)."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "peers.py"


def test_peers_small_run(tmp_path):
    out = subprocess.run([sys.executable, str(SCRIPT), "--small", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "peers.json").read_text())
    records = report["results"]
    ours = [r for r in records if r["library"] == "treeimp"]
    # one treeimp row per model and thread count, each with a finite speed
    models = ("xgboost", "lightgbm", "forest", "forest_regressor")
    models += tuple(f"{m} interactions" for m in models)
    assert sorted((r["model"], r["threads"]) for r in ours) == sorted(
        (m, t) for m in models for t in (1, 2))
    assert all(math.isfinite(r["rows_per_s"]) and r["rows_per_s"] > 0 for r in ours)
    libs = {(r["model"], r["library"]) for r in records}
    # the libraries' own TreeSHAP is always there, and agrees with treeimp's
    for model, lib in (("xgboost", "pred_contribs"), ("lightgbm", "pred_contrib"),
                       ("xgboost interactions", "pred_interactions")):
        mine = [r for r in records if r["model"] == model and r["library"].endswith(lib)]
        assert len(mine) == 2, libs
        for r in mine:
            assert math.isfinite(r["rows_per_s"]) and r["note"] is None, r
            assert r["max_abs_diff"] < 1e-4, r
    for r in records:  # every peer is timed or says why not
        assert (r["rows_per_s"] is not None and math.isfinite(r["rows_per_s"])) or r["note"]
    versions = report["versions"]
    for lib in ("python", "treeimp", "numpy", "xgboost", "lightgbm", "scikit-learn",
                "shap", "fasttreeshap", "woodelf"):
        assert versions[lib], lib
    import xgboost

    assert versions["xgboost"] == xgboost.__version__
    assert f"xgboost {xgboost.__version__}" in out.stdout  # versions printed in the table
    assert "| model | threads | rows | library | rows/s |" in out.stdout

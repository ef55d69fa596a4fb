"""The scripts in examples/ run end to end in their small (CI) mode."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _env():
    # the venv's python and its `treeimp` entry point first on PATH (for the shell script)
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHON": sys.executable,
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", "")}


def _run(cmd, timeout=240):
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=_env(),
                          timeout=timeout)
    assert proc.returncode == 0, f"{cmd}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert "Traceback" not in proc.stderr
    return proc.stdout


def test_forest_breast_cancer(tmp_path):
    pytest.importorskip("matplotlib")
    out = _run([sys.executable, str(EXAMPLES / "forest_breast_cancer.py"), "--small",
                "--out", str(tmp_path)])
    assert "row_id" in out
    png = tmp_path / "forest_mdi_vs_oob.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "forest_importances.csv").stat().st_size > 0


def test_boosting_screening(tmp_path):
    pytest.importorskip("xgboost")
    pytest.importorskip("lightgbm")
    out = _run([sys.executable, str(EXAMPLES / "boosting_screening.py"), "--small",
                "--out", str(tmp_path)])
    assert "XGBoost" in out and "LightGBM" in out
    assert (tmp_path / "boosting_screening.csv").stat().st_size > 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_audit_saved_model(tmp_path):
    pytest.importorskip("xgboost")
    out = _run(["bash", str(EXAMPLES / "audit_saved_model.sh"), "--small", "--out",
                str(tmp_path)])
    # the table: the classifier's screening measure first and marked, the row ID listed
    assert "mdi_oob_centered*" in out and "row_id" in out
    records = json.loads((tmp_path / "importances.json").read_text())
    # the command line's defaults: explain's, with the classifier's screening measure
    assert {r["method"] for r in records} == {"mdi", "mdi_oob", "mdi_oob_centered", "ufi"}
    assert {r["feature"] for r in records} >= {"row_id", "signal_0"}

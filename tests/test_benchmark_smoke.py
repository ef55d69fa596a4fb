"""The benchmark script runs end to end at tiny sizes, fresh-process measurements
included, so it cannot rot (no timings are asserted: machines are shared and noisy)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "run.py"

MAIN_COLUMNS = ["model", "task", "rows", "trees", "predict (s)", "explain",
                "explain, Explainer", "parse", "predict_raw",
                "treeimp TreeSHAP*", "lib TreeSHAP*", "shap*", "perm. rows",
                "perm. predict (s)",
                "perm. sklearn", "perm. treeimp", "perm. speed-up", "perm. max diff"]
STARTUP_COLUMNS = ["fresh process", "empty cache: import (s)", "empty cache: first call (s)",
                   "first call, CPU (s)", "compile (s)", "warm cache: import (s)",
                   "warm cache: first call (s)", "second call (s)", "warm overhead (s)"]
SMALL_DATA_COLUMNS = ["small data", "task", "held-out rows", "trees", "predict (s)",
                      "explain (parse included)", "parse (ms)", "load_model (ms)",
                      "parse / load_model", "parse of the file (ms)",
                      "parse of the file / load_model"]
MEMORY_COLUMNS = ["explain, fresh process", "model", "rows x features", "input (MB)",
                  "peak RSS growth (MB)", "allocated during explain (MB)",
                  "allocated / input"]


def _header_cells(table, first):
    """The cells of the Markdown header row whose first cell is ``first``."""
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == first:
            return cells
    raise AssertionError(f"no table starting with {first!r} in:\n{table}")


def _has_shap():
    return importlib.util.find_spec("shap") is not None


def test_benchmark_small_run(tmp_path):
    # tiny sizes; compilation from an empty cache measured for the forest only (all
    # kernels take over a minute), the warm-cache start-up and memory for every workload
    out = subprocess.run([sys.executable, str(SCRIPT), "--small", "--threads", "1",
                          "--compile-for", "forest_explain", "--subprocess-timeout", "300",
                          "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    report = json.loads((tmp_path / "results.json").read_text())
    results = report["results"]
    assert {(r["model"], r["task"]) for r in results} == {
        (m, t) for m in ("xgboost", "lightgbm", "forest") for t in ("binary", "regression")}
    for r in results:
        if r["model"] != "forest":  # (oob=True needs the forest object, not a parsed one)
            assert r["explain_parsed_s"] > 0, r
        for key in ("library_predict_s", "explain_s", "parse_s", "predict_raw_s",
                    "permutation_predict_s", "sklearn_permutation_s",
                    "treeimp_permutation_s"):
            assert r[key] > 0, (key, r)
        # treeimp's permutation importance reproduces scikit-learn's (float32 for XGBoost)
        assert r["permutation_max_abs_diff"] < 1e-5, r
        if _has_shap():
            assert r["shap_s_extrapolated"] is not None or r["shap_note"] == "error", r
        else:
            assert r["shap_s_extrapolated"] is None and r["shap_note"] == "not installed"

    small = report["small_data"]
    assert [(r["task"], r["rows"], r["trees"]) for r in small] == [
        ("binary", 500, 20), ("regression", 500, 20)]
    for r in small:
        for key in ("library_predict_s", "explain_s", "parse_s", "parse_file_s",
                    "load_model_s"):
            assert r[key] > 0, (key, r)

    startup = report["startup"]
    assert set(startup) == {"forest_explain", "xgboost_explain", "forest_contributions",
                            "xgboost_contributions", "permutation"}
    for name, s in startup.items():
        assert "error" not in s, (name, s)
        for key in ("import_s", "warm_first_call_s", "warm_second_call_s",
                    "warm_overhead_s"):
            assert s[key] > 0 or key == "warm_overhead_s", (name, key, s)
    assert startup["forest_explain"]["compile_s"] is not None
    assert startup["forest_explain"]["cold_import_s"] > 0
    assert startup["forest_explain"]["cold_first_call_cpu_s"] > 0
    assert startup["xgboost_explain"]["compile_s"] is None
    assert "--compile-for" in startup["xgboost_explain"]["compile_note"]

    memory = report["memory"]
    assert set(memory) == {"forest", "xgboost"}
    for name, m in memory.items():
        assert "error" not in m, (name, m)
        assert m["rows"] == 20_000 and m["input_mb"] > 0 and "peak_growth_mb" in m
        assert m["traced_peak_mb"] > 0, m

    table = (tmp_path / "results.md").read_text()
    assert _header_cells(table, "model") == MAIN_COLUMNS
    assert _header_cells(table, "fresh process") == STARTUP_COLUMNS
    assert _header_cells(table, "small data") == SMALL_DATA_COLUMNS
    assert _header_cells(table, "explain, fresh process") == MEMORY_COLUMNS
    assert "| xgboost | binary |" in table and "| permutation |" in table
    assert "not measured" in table  # compile of the workloads left out
    assert "Versions: Python" in table and "numba" in report["versions"]
    assert ("not installed" in table) != _has_shap()


def test_markdown_names_missing_shap():
    """Without shap the reason is written, not a bare n/a (unit test of the formatter)."""
    spec = importlib.util.spec_from_file_location("treeimp_benchmark_run", SCRIPT)
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    r = {"model": "forest", "task": "binary", "rows": 10, "trees": 2,
         "library_predict_s": 0.1, "explain_s": 0.2, "explain_parsed_s": 0.15,
         "parse_s": 0.05, "predict_raw_s": 0.1, "treeimp_treeshap_s_extrapolated": 0.3,
         "lib_treeshap_s_extrapolated": None, "lib_treeshap_note": "none in the library",
         "shap_s_extrapolated": None, "shap_note": "not installed",
         "permutation_rows": 5, "permutation_predict_s": 0.01,
         "sklearn_permutation_s": 1.0, "treeimp_permutation_s": 0.1,
         "permutation_max_abs_diff": 0.0}
    table = run.markdown([r], None, None, run.parse_args(["--small"]))
    row = [c.strip() for c in table.splitlines()[-3].strip("|").split("|")]
    assert row[:12] == ["forest", "binary", "10", "2", "0.100", "2.00x", "1.50x", "0.50x",
                        "1.00x", "3.00x", "none in the library", "not installed"]
    assert row[14:17] == ["100.00x", "10.00x", "10.0x"]


def test_markdown_error_rows_fill_every_column():
    """A failed fresh-process measurement is reported in a row as wide as its table."""
    spec = importlib.util.spec_from_file_location("treeimp_benchmark_run", SCRIPT)
    run = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run)
    table = run.markdown([], {"forest_explain": {"error": "timed out"}},
                         {"forest": {"error": "exit 1", "model_desc": "RF", "rows": 5,
                                     "features": 2}},
                         run.parse_args(["--small"]))
    rows = [line for line in table.splitlines() if "error: " in line]
    assert [len(r.strip("|").split("|")) for r in rows] == [len(STARTUP_COLUMNS),
                                                              len(MEMORY_COLUMNS)]

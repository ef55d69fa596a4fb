"""benchmarks/screening.py runs end to end in --quick mode (so it cannot rot) and its
table has every design and method with rates in [0, 1]; no timings are asserted."""

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("xgboost")
pytest.importorskip("boruta")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "screening.py"


def test_quick_screening_study_runs(capsys):
    spec = importlib.util.spec_from_file_location("screening_study", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = mod.main(["--quick", "--designs", "0,5"])
    out = capsys.readouterr().out
    assert "| design | method | power |" in out
    designs = set(table["design"])
    assert len(designs) == 2 and any(d.startswith("pure null") for d in designs)
    methods = set(table["method"])
    assert {"Boruta (RF depth 5)", "permutation (RF, held-out, z-test + BH)",
            "treeimp forest OOB mdi_oob_centered", "treeimp XGB cross-fitted ufi",
            "in-sample MDI (forest)"} <= methods
    for col in ("power", "FDR", "FWER", "noise p<.05", "auc"):
        v = table[col].dropna()
        assert ((v >= 0) & (v <= 1)).all(), col


def test_quick_screening_levers_runs(capsys):
    """benchmarks/screening_levers.py --quick: every forest, block count and reference,
    rates in [0, 1]."""
    path = SCRIPT.parent / "screening_levers.py"
    spec = importlib.util.spec_from_file_location("screening_levers", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = mod.main(["--quick"])
    assert len(table) == 2 * 2 * 2 * 2  # measures x forests x block counts x references
    assert set(table["reference"]) == {"t", "normal"}
    for col in ("power", "fdp", "noise_p05"):
        assert ((table[col] >= 0) & (table[col] <= 1)).all(), col

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


def test_new_designs_have_the_stated_shape_and_rates():
    """Issue 32's designs: feature counts, relevant sets and the stated outcome rates
    (rare positives 3-5%, the null twin 4% with the same X, the skewed target far from 0
    and right-skewed), from large samples of the generators alone (no model fit)."""
    import numpy as np
    from scipy import stats

    spec = importlib.util.spec_from_file_location("screening_study", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    expect = {"rare positives (4%)": (30, 5), "many weak effects": (60, 15),
              "wide (300 features)": (300, 5), "skewed y far from 0": (20, 5)}
    for name, (F, k) in expect.items():
        make, _ = mod.DESIGNS[name]
        X, y, relevant, _ = make(400, np.random.default_rng(0))
        assert X.shape == (400, F) and len(y) == 400, name
        assert list(relevant) == list(range(k)), name
    # the first six designs keep their positions (their seeds are 100 x position + rep)
    assert list(mod.DESIGNS)[:6] == ["Strobl power", "Li et al. classification",
                                     "Zhou & Hooker regression",
                                     "Friedman #1 + 45 noise, y+50", "correlated + row ID",
                                     "pure null"]
    X, y, _, _ = mod.rare_positives(20000, np.random.default_rng(1))
    assert 0.03 <= y.mean() <= 0.05
    # the relevant features matter: positives have higher x0..x4 than negatives
    assert (X[y == 1, :5].mean(axis=0) > X[y == 0, :5].mean(axis=0) + 0.3).all()
    X0, y0, rel0, _ = mod.rare_null(20000, np.random.default_rng(1))
    assert np.array_equal(X0, X) and len(rel0) == 0 and 0.035 <= y0.mean() <= 0.045
    X, y, _, _ = mod.skewed_far(20000, np.random.default_rng(2))
    assert y.min() > 1000 and stats.skew(y) > 2
    # its null twin: the same marginal shape, y independent of every feature
    X0, y0, rel0, task = mod.skewed_null(20000, np.random.default_rng(2))
    assert X0.shape == (20000, 20) and len(rel0) == 0 and task == "regression"
    assert y0.min() > 1000 and stats.skew(y0) > 2
    assert abs(np.mean(y0) - np.mean(y)) < 0.1
    assert max(abs(stats.spearmanr(X0[:, j], y0)[0]) for j in range(20)) < 0.03


def test_quick_calibration_null_runs(capsys):
    """benchmarks/calibration_null.py --quick --centre-null: the three null designs, both
    settings and measures, with and without centring; rates in [0, 1]; the centred
    z-scores of each data set have median 0 and their p-values are t's upper tail."""
    import numpy as np
    from scipy import stats

    path = SCRIPT.parent / "calibration_null.py"
    spec = importlib.util.spec_from_file_location("calibration_null", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    table = mod.main(["--quick", "--centre-null"])
    assert len(table) == 3 * 2 * 2 * 2  # designs x settings x measures x centring
    for col in ("p05", "p01", "FWER"):
        assert ((table[col] >= 0) & (table[col] <= 1)).all(), col
    df = mod.pd.DataFrame({"design": "d", "seed": 0, "setting": "s", "measure": "m",
                           "z": [-2.0, -1.0, -0.5, 0.5, 3.0], "dof": 19, "any_kept": False})
    c = mod.centred(df)
    assert np.median(c["z"]) == 0.0
    np.testing.assert_allclose(c["z"], df["z"] + 0.5)
    np.testing.assert_allclose(c["p"], stats.t.sf(df["z"] + 0.5, 19))
    assert (c["measure"] == "m [median-centred]").all()

"""benchmarks/rare_boosting_weights.py rebuilds ImportanceSelector's default cross-fitted
screening step by step: unweighted, it must give the selector's own importances and
p-values (otherwise its weighted rows would not measure the selector's procedure)."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("xgboost")

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "rare_boosting_weights.py"


def _script():
    spec = importlib.util.spec_from_file_location("rare_boosting_weights", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_unweighted_rebuild_is_the_selectors_default():
    import warnings

    from treeimp import ImportanceSelector

    mod = _script()
    seed = 601
    X, y, _, _ = mod.DESIGNS["rare positives (4%)"][0](600, np.random.default_rng(seed))
    kept, p, value = mod.screen(X, y, seed, "none", "mdi_oob_centered")
    sel = ImportanceSelector(mod.boosting("classification", seed, 100), random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # "kept no feature"
        sel.fit(X, y)
    assert sel.method_ == "mdi_oob_centered" and sel.null_ == "shadow"
    res = sel.importances_
    np.testing.assert_allclose(value, res.table["mdi_oob_centered"].to_numpy(), rtol=1e-12)
    np.testing.assert_allclose(p, res.pvalues["mdi_oob_centered"].to_numpy(), rtol=1e-12)
    np.testing.assert_array_equal(kept, sel.support_)


def test_balanced_weights_equalise_the_class_totals():
    mod = _script()
    y = np.array([0] * 95 + [1] * 5)
    for kind, total in (("balanced", 50.0), ("sqrt-balanced", None)):
        w = mod.row_weights(kind, y)
        if total is not None:  # n / (k n_class) per row: each class totals n / k
            assert np.isclose(w[y == 0].sum(), total) and np.isclose(w[y == 1].sum(), total)
        else:
            np.testing.assert_allclose(w**2, mod.row_weights("balanced", y))
    assert mod.row_weights("none", y) is None

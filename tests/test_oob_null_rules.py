"""benchmarks/oob_factor.py's per-feature table and benchmarks/oob_null_rules.py's
recomputed tests (issue 32): the recomputation reproduces the selector's own p-values and
selection, the split shares come from the screening forest, and the Benjamini-Hochberg
variants agree with the library's and with Storey's definition. Tiny forests."""

import importlib.util
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from sklearn.ensemble import RandomForestClassifier

import treeimp.explainer as explainer_module
from treeimp import ImportanceSelector
from treeimp.results.importances import bh_qvalues

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


def _load(name):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"{name}_under_test", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bh_matches_the_library_and_storey_scales_it():
    rules = _load("oob_null_rules")
    rng = np.random.default_rng(0)
    p = np.concatenate([rng.uniform(size=30), rng.uniform(0, 1e-3, size=30)])
    np.testing.assert_allclose(rules.bh(p), bh_qvalues(p), rtol=0, atol=1e-12)
    # Storey's pi0 = (#{p > 1/2} + 1) / (m / 2), capped at 1
    pi0 = min(1.0, (np.sum(p > 0.5) + 1) / (len(p) / 2))
    assert pi0 < 1
    np.testing.assert_allclose(rules.bh(p, storey=True), pi0 * bh_qvalues(p), atol=1e-12)
    # no p above 1/2: pi0 is 1 / (m / 2), every q-value scaled by it
    small = np.linspace(1e-4, 0.4, 20)
    np.testing.assert_allclose(rules.bh(small, storey=True), bh_qvalues(small) / 10)


def test_recomputed_selection_is_the_selectors(monkeypatch):
    """One seeded Strobl data set with a 20-tree forest: the table written with the factor
    patched to 1 gives, under rule "f:1", the selector's own p-values of that run and,
    under "f:1.6", the p-values and kept features of an unpatched selector run."""
    factor = _load("oob_factor")
    rules = _load("oob_null_rules")
    screening = sys.modules["screening"]
    # collect() sets the module-level factor to 1; restore it afterwards
    default = explainer_module.OOB_VARIANCE_FACTOR
    monkeypatch.setattr(explainer_module, "OOB_VARIANCE_FACTOR", default)
    args = factor.main.__globals__["argparse"].Namespace(
        designs="0", nulls="", reps=1, first_rep=0, trees=20, leaf=10, blocks=None)
    table = factor.collect(args)
    monkeypatch.setattr(explainer_module, "OOB_VARIANCE_FACTOR", default)

    shares = table["share"].to_numpy()
    assert np.isclose(shares.sum(), 1.0)
    assert ((table["in_trees"] >= 0) & (table["in_trees"] <= 20)).all()
    assert ((table["in_trees"] > 0) == (table["share"] > 0)).all()

    z1 = rules.scores("f:1", table)
    p1 = np.where(np.isnan(z1), 1.0, stats.t.sf(z1, table["dof"].iloc[0]))
    np.testing.assert_allclose(p1, table["p1"].to_numpy(), atol=1e-9)

    X, y, _, task = screening.strobl_power(500, np.random.default_rng(0))
    rf = screening.forest(task, 0, 20).set_params(min_samples_leaf=10)
    sel = ImportanceSelector(rf, null="t", random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sel.fit(X, y)
    z = rules.scores("f:1.6", table)
    p = np.where(np.isnan(z), 1.0, stats.t.sf(z, table["dof"].iloc[0]))
    np.testing.assert_allclose(p, sel.importances_.pvalues[sel.method_].to_numpy(),
                               atol=1e-9)
    np.testing.assert_array_equal(rules.bh(p) < 0.05, sel.support_)


@pytest.mark.parametrize("rule", ["share:2", "share:2+shift:0.2", "share:2+cshift:0.25:0.15"])
def test_rules_are_monotone_in_the_value(rule):
    """For a fixed standard error and share, a larger value never gets a smaller z."""
    rules = _load("oob_null_rules")
    n = 12
    h = pd.DataFrame({"value": np.linspace(-1, 1, n), "se": np.full(n, 0.3),
                      "share": np.full(n, 1 / n)})
    z = rules.scores(rule, h)
    assert np.all(np.diff(z) > 0)


def test_shares_come_from_the_class_balanced_screening_forest():
    """With a rare class the selector screens with a class-balanced clone and returns the
    caller's forest; the recorded first model (the one oob_factor.py reads the split
    shares from) is the clone, not ``estimator_``."""
    factor = _load("oob_factor")
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 6))
    y = (rng.random(600) < 0.03 + 0.1 * (X[:, 0] > 1)).astype(int)
    assert np.mean(y) < 0.1
    rf = RandomForestClassifier(n_estimators=15, min_samples_leaf=10, random_state=3,
                                n_jobs=1)
    models = []
    sel = ImportanceSelector(rf, random_state=3)
    with warnings.catch_warnings(), factor.recording(models):
        warnings.simplefilter("ignore", UserWarning)
        sel.fit(X, y)
    assert models[0].get_params()["class_weight"] == "balanced_subsample"
    assert sel.estimator_.get_params()["class_weight"] is None
    assert models[0] is not sel.estimator_

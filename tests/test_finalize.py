"""results/finalize.py: the sums over trees and the across-trees error against loops
and numpy's nan-functions, and what a result keeps."""

import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import treeimp
from treeimp.results.finalize import _label_index, _nansum_trees, _tree_stderr


def _loop_nansum(v):
    """Sum over axis 1 from 0.0, tree by tree, skipping NaN (0.0 where every tree is)."""
    B, T, F = v.shape
    out = np.zeros((B, F))
    for b in range(B):
        for f in range(F):
            acc = 0.0
            for t in range(T):
                if not np.isnan(v[b, t, f]):
                    acc += v[b, t, f]
            out[b, f] = acc
    return out


def _values(nan=False, infinite=False):
    rng = np.random.default_rng(3)
    v = rng.normal(size=(4, 7, 5)) * 10.0 ** rng.integers(-8, 8, size=(4, 7, 5))
    if nan:
        v[0, 2, 1] = v[3, :, 4] = v[1, 6, 0] = np.nan
    if infinite:  # inf - inf: NaN sums although no value is NaN
        v[2, 1, 3], v[2, 4, 3] = np.inf, -np.inf
    return v


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning")  # inf - inf
@pytest.mark.parametrize("nan, infinite", [(False, False), (True, False), (False, True),
                                           (True, True)])
def test_nansum_trees_is_the_loop_bit_for_bit(nan, infinite):
    v = _values(nan, infinite)
    got = _nansum_trees(v)
    np.testing.assert_array_equal(got, _loop_nansum(v))
    assert got.dtype == np.float64 and got.shape == (4, 5)


@pytest.mark.parametrize("forest", [False, True])
@pytest.mark.parametrize("nan", [False, True])
def test_tree_stderr_is_the_nanmean_form(forest, nan):
    pt = _values(nan)[1] / 1e6
    T = np.sum(~np.isnan(pt), axis=0)
    want = np.sqrt(np.maximum(np.nanmean(pt**2, axis=0) - np.nanmean(pt, axis=0) ** 2, 0)
                   / T)
    if not forest:
        want = want * T
    np.testing.assert_allclose(_tree_stderr(pt, forest), want, rtol=1e-10, atol=0)


def test_result_per_tree_owns_its_values():
    """per_tree holds the last block's values, not a view of every block's (or of the
    split sums' buffer), which would keep those alive with the result."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 4)).astype(np.float32)
    y = (X[:, 0] + rng.logistic(size=400) > 0).astype(int)
    model = xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1).fit(X[:300], y[:300])
    res = treeimp.explain(model, X[300:], y[300:], methods=("mdi_oob", "ufi"),
                          n_blocks=4, n_jobs=1, random_state=0)
    for m in ("mdi_oob", "ufi"):
        pt = res.per_tree[m]
        assert pt.flags.owndata and pt.shape == (5, 4)
        # the table is the sum over trees of the per-tree values (boosting)
        np.testing.assert_allclose(res.table[m].to_numpy(), pt.sum(axis=0), rtol=1e-12,
                                   atol=1e-15)


@pytest.mark.parametrize("nan", [False, True])
def test_nansum_trees_warns_of_inf_minus_inf_once(nan):
    with pytest.warns(RuntimeWarning, match="invalid value") as record:
        _nansum_trees(_values(nan, infinite=True))
    assert len(record) == 1


def test_result_indexes_are_pandas_own_and_each_results_own():
    """The tables' index and columns equal pandas' Index of the names (dtype and name
    too); renaming one result's index leaves another result's alone."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 3)).astype(np.float32)
    y = X[:, 0] + rng.normal(size=300)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=2, n_jobs=1).fit(X[:200], y[:200])
    names = ["a", "b", "c"]
    a, b = (treeimp.explain(model, X[200:], y[200:], methods=("mdi_oob", "ufi"), n_blocks=3,
                            feature_names=names, n_jobs=1, random_state=0) for _ in range(2))
    for res in (a, b):
        for frame in (res.table, res.stderr, res.stderr_trees, res.pvalues, res.qvalues):
            pd.testing.assert_index_equal(frame.index, pd.Index(names, name="feature"),
                                          exact=True)
            pd.testing.assert_index_equal(frame.columns, pd.Index(["mdi_oob", "ufi"]),
                                          exact=True)
    a.table.index.name = "renamed"
    assert b.table.index.name == "feature"
    assert list(b.to_frame()["feature"]) == names * 2


@pytest.mark.parametrize("labels", [["a", "b", "a"], [f"f{i}" for i in range(5000)],
                                    [1, 2, 3], ["a", 1], [], [np.str_("a"), "b"]])
def test_label_index_is_pandas_index(labels):
    for name in ("feature", None):
        got = _label_index(labels, name)
        pd.testing.assert_index_equal(got, pd.Index(labels, name=name), exact=True)
        assert _label_index(labels, name) is not got

"""The staged pass's walk of shallow plain trees as full binary trees
(``kernels/full_trees.py``) reaches the leaves ``route.step`` reaches, node by node,
and the staged statistics and margins are bitwise those of the walk over the routing
arrays."""

import numpy as np
import pytest

from tests.test_route_plain import _plain_nodes, _rows, step_leaves
from treeimp.kernels import full_trees, route


def _layout(offsets, depth, left, right, feature, threshold, flags, strict, n_features):
    plain = np.ones(offsets.size - 1, np.bool_)
    return full_trees.full_tree_layout(offsets, depth, plain, left, right, feature,
                                       threshold, flags, strict, n_features)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("strict", [False, True])
def test_full_walk_routes_as_step(seed, strict):
    rng = np.random.default_rng(seed)
    offsets, depth, (left, right, feature, threshold, flags) = _plain_nodes(rng, strict)
    F = int(feature.max()) + 1
    X = _rows(rng, 150, F)
    # infinities and values beyond float32 compare as they are
    X[rng.random(X.shape) < 0.03] = np.inf
    X[rng.random(X.shape) < 0.03] = -np.inf
    X[rng.random(X.shape) < 0.02] = 1e300
    X[rng.random(X.shape) < 0.02] = -1e300
    slot_start, column, cut, leaf, nan_left = _layout(offsets, depth, left, right, feature,
                                                      threshold, flags, strict, F)
    assert slot_start[-1] > 0  # every tree laid out
    internal = (flags & route.LEAF) == 0
    # the NaN-left columns are those of the features some node sends NaN left on
    want_left = np.unique(feature[internal & ((flags & route.NAN_LEFT) != 0)])
    np.testing.assert_array_equal(nan_left, want_left)
    n = X.shape[0]
    rows = np.arange(n)
    with np.errstate(over="ignore"):  # 1e300 becomes inf in float32
        X32 = X.astype(np.float32)
    for X_ in (X, X32):
        for round32 in (False, True):
            xg = np.empty((n, F + nan_left.size), X_.dtype)
            full_trees.copy_group(X_, rows, n, round32, nan_left, xg)
            for t in range(offsets.size - 1):
                got = np.empty(n, np.int64)
                full_trees.walk_full(xg, n, slot_start[t], depth[t], column, cut, leaf,
                                     np.empty(n, np.int64), got)
                want = step_leaves(X_, offsets[t], (left, right, feature, threshold, flags),
                                   strict, round32)
                np.testing.assert_array_equal(got, want)


def test_layout_only_when_every_tree_qualifies():
    rng = np.random.default_rng(1)
    offsets, depth, (left, right, feature, threshold, flags) = _plain_nodes(rng, True)
    F = int(feature.max()) + 1
    args = (left, right, feature, threshold, flags, True, F)
    assert _layout(offsets, depth, *args)[0][-1] > 0
    # a tree that is not plain, one too deep, a threshold that is not finite: none
    plain = np.ones(offsets.size - 1, np.bool_)
    plain[-1] = False
    assert full_trees.full_tree_layout(offsets, depth, plain, *args)[0][-1] == 0
    deep = depth.copy()
    deep[0] = full_trees.MAX_DEPTH + 1
    assert _layout(offsets, deep, *args)[0][-1] == 0
    for bad in (np.inf, -np.inf, np.nan):
        thr = threshold.copy()
        thr[np.flatnonzero((flags & route.LEAF) == 0)[-1]] = bad
        assert _layout(offsets, depth, left, right, feature, thr, flags, True, F)[0][-1] == 0


def _empty_layout(*args):
    n_trees = args[0].shape[0] - 1
    return (np.zeros(n_trees + 1, np.int64), np.zeros(0, np.int64), np.zeros(0),
            np.zeros(0, np.int64), np.zeros(0, np.int64))


@pytest.mark.parametrize("kind", ["binary", "regression", "multiclass"])
def test_staged_sums_equal_without_full_trees(monkeypatch, kind):
    """Staged leaf sums and margins of XGBoost models on rows with NaN (nodes sending
    NaN both ways), with weights, on one and two threads: bitwise those of the walk over
    the routing arrays."""
    import xgboost as xgb

    import treeimp
    from treeimp.backends import numba as nb
    from treeimp.inputs.rows import RowSource
    from treeimp.stats.drivers import staged_leaf_sums

    rng = np.random.default_rng(5)
    X = rng.normal(size=(1500, 6))
    X[rng.random(X.shape) < 0.15] = np.nan
    signal = np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) + np.isnan(X[:, 2])
    if kind == "binary":
        y = (signal + rng.logistic(size=len(X)) > 0).astype(int)
        model = xgb.XGBClassifier(n_estimators=12, max_depth=4, n_jobs=1)
    elif kind == "multiclass":
        y = np.digitize(signal + rng.normal(size=len(X)), [-0.5, 0.5])
        model = xgb.XGBClassifier(n_estimators=6, max_depth=3, n_jobs=1)
    else:
        y = signal + rng.normal(size=len(X))
        model = xgb.XGBRegressor(n_estimators=12, max_depth=5, n_jobs=1)
    model.fit(X[:1000], y[:1000])
    ens = treeimp.parse(model)
    Xv, yv = X[1000:], y[1000:]
    w = rng.uniform(0.5, 2.0, len(Xv))
    block = rng.integers(0, 7, len(Xv))
    routing = ens.routing
    strict = ens.comparison == "<"
    layout = full_trees.full_tree_layout(ens.tree_offsets, routing.depth, routing.plain,
                                         routing.left, routing.right, routing.feature,
                                         routing.threshold, routing.flags, strict,
                                         Xv.shape[1])
    assert layout[0][-1] > 0 and layout[4].size > 0  # laid out, NaN-left columns read
    for Xe in (Xv, Xv.astype(np.float32)):
        for n_jobs in (1, 2):
            got = staged_leaf_sums(ens, RowSource(Xe, ens), yv, w, block, 7, n_jobs=n_jobs)
            with monkeypatch.context() as m:
                m.setattr(nb, "full_tree_layout", _empty_layout)
                want = staged_leaf_sums(ens, RowSource(Xe, ens), yv, w, block, 7,
                                        n_jobs=n_jobs)
            np.testing.assert_array_equal(got[0], want[0])
            np.testing.assert_array_equal(got[1], want[1])

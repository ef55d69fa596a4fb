"""The vectorised level of plain trees (``route.plain_level``, taken by ``descend`` when a
tree is plain) sends every row where ``route.step`` sends it, and trees are flagged plain
exactly when none of their nodes needs more than a comparison."""

import numpy as np
import pytest

from tests.test_parse_speed_equivalence import _forest
from tests.test_structure_serial import _concatenated
from treeimp.kernels import route, structure
from treeimp.model.ensemble import NAN_AS_ZERO, NAN_MISSING, NAN_ZERO_MISSING


def _plain_nodes(rng, strict):
    """Random trees of numeric splits (NaN by a missing direction or read as zero), their
    routing arrays and, per tree, root and depth."""
    trees = _forest(rng, int(rng.integers(2, 8)), corrupt=False)
    offsets, lc, rc, feature = _concatenated(trees)
    start = np.repeat(offsets[:-1], np.diff(offsets))
    gl = np.where(lc >= 0, lc + start, -1)
    gr = np.where(rc >= 0, rc + start, -1)
    n = offsets[-1]
    # thresholds on a coarse grid (rows hit them exactly), some at 0 and at -0.5 / 0.5
    threshold = rng.integers(-4, 5, n) / 4.0
    mode = np.where(rng.random(n) < 0.4, NAN_AS_ZERO, NAN_MISSING).astype(np.uint8)
    out = (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
           np.empty(n), np.empty(n, route.FLAGS_DTYPE))
    structure.fill_node_arrays(gl, gr, np.maximum(feature, 0), threshold,
                               rng.random(n) < 0.5, mode, np.zeros(n, np.bool_),
                               np.zeros(n, np.bool_), strict, *out)
    depth, _ = structure.tree_depths_serial(offsets, gl, gr)
    return offsets, depth, out


def _rows(rng, n_rows, n_features):
    X = rng.integers(-5, 6, (n_rows, n_features)) / 4.0 + rng.choice(
        [0.0, 1e-9, -1e-9], (n_rows, n_features))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[rng.random(X.shape) < 0.1] = 0.0
    X[rng.random(X.shape) < 0.05] = -0.0
    return X


def step_leaves(X, root, arrays, strict, round32):
    """Each row's leaf, reached from node ``root`` by ``route.step`` node by node
    (``arrays``: left, right, feature, threshold, flags as ``_plain_nodes`` gives them)."""
    left, right, feature, threshold, flags = arrays
    empty_i, empty_b = np.zeros(0, np.int64), np.zeros(0, np.bool_)
    want = np.empty(X.shape[0], np.int64)
    for i in range(X.shape[0]):
        node = root
        while not flags[node] & route.LEAF:
            x = route.feature_value(X, i, feature[node], round32)
            node = route.step(x, node, left, right, threshold, flags, empty_i, empty_i,
                              empty_i, empty_b, strict)
        want[i] = node
    return want


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("strict", [False, True])
def test_plain_level_routes_as_step(seed, strict):
    rng = np.random.default_rng(seed)
    offsets, depth, (left, right, feature, threshold, flags) = _plain_nodes(rng, strict)
    X = _rows(rng, 150, int(feature.max()) + 1)
    empty_i, empty_b = np.zeros(0, np.int64), np.zeros(0, np.bool_)
    rows = np.arange(X.shape[0])
    for X_ in (X, X.astype(np.float32)):
        for round32 in (False, True):
            for t in range(offsets.size - 1):
                got = np.full(X.shape[0], offsets[t], np.int64)
                route.descend(X_, rows, X.shape[0], depth[t], depth[t], True, left, right,
                              feature, threshold, flags, empty_i, empty_i, empty_i,
                              empty_b, strict, round32, got)
                want = step_leaves(X_, offsets[t], (left, right, feature, threshold, flags),
                                   strict, round32)
                np.testing.assert_array_equal(got, want)
    # the NaN-as-zero nodes really send NaN where 0.0 goes, both ways occur
    zero = (flags & route.NAN_AS_ZERO) != 0
    nan_left = (flags & route.NAN_LEFT) != 0
    cmp = (0.0 < threshold) if strict else (0.0 <= threshold)
    assert np.array_equal(nan_left[zero], cmp[zero]) and len(set(cmp[zero])) == 2


def test_trees_are_plain_unless_a_node_is_categorical_or_zero_missing():
    import dataclasses

    import treeimp
    from treeimp.model.ensemble import _node_arrays, _plain_trees

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 4))
    X[:, 3] = rng.integers(0, 5, 300)
    y = X[:, 0] + 2 * (X[:, 3] == 2) + 0.1 * rng.normal(size=300)
    from sklearn.ensemble import HistGradientBoostingRegressor

    # stumps: each tree splits on one feature, some on the categorical one
    model = HistGradientBoostingRegressor(max_iter=30, max_leaf_nodes=2,
                                          categorical_features=[3], random_state=0).fit(X, y)
    ens = treeimp.parse(model)
    plain = ens.routing.plain
    cat_trees = np.unique(ens.node_tree[ens.is_categorical])
    assert 0 < cat_trees.size < ens.n_trees  # both kinds of tree occur
    want = np.ones(ens.n_trees, np.bool_)
    want[cat_trees] = False
    np.testing.assert_array_equal(plain, want)
    # a zero-as-missing node makes its tree not plain
    mode = ens.nan_mode.copy()
    split = np.flatnonzero((ens.left >= 0) & ~ens.is_categorical)[0]
    mode[split] = NAN_ZERO_MISSING
    other = dataclasses.replace(ens, nan_mode=mode)
    flags = _node_arrays(other)[-1]
    got = _plain_trees(other, flags)
    want[ens.node_tree[split]] = False
    np.testing.assert_array_equal(got, want)
    # and the model still predicts as the library does on rows with NaN
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.2] = np.nan
    np.testing.assert_allclose(ens.predict_raw(Xn)[:, 0], model.predict(Xn), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("strict", [False, True])
def test_walk_plain_equals_walk_batch(seed, strict):
    """The staged kernel's walk for ensembles without a NOT_PLAIN node reaches the leaves
    ``walk_batch`` reaches (rows with NaN, ties at thresholds, float32 and float64)."""
    rng = np.random.default_rng(seed)
    offsets, depth, (left, right, feature, threshold, flags) = _plain_nodes(rng, strict)
    X = _rows(rng, 150, int(feature.max()) + 1)
    empty_i, empty_b = np.zeros(0, np.int64), np.zeros(0, np.bool_)
    rows = rng.permutation(X.shape[0])
    m = X.shape[0] - 7
    for X_ in (X, X.astype(np.float32)):
        for round32 in (False, True):
            for t in range(offsets.size - 1):
                for min_depth in (0, depth[t]):
                    got = np.full(X.shape[0], -5, np.int64)
                    want = got.copy()
                    route.walk_plain(X_, rows, m, offsets[t], depth[t], min_depth, left,
                                     right, feature, threshold, flags, strict, round32, got)
                    route.walk_batch(X_, rows, m, offsets[t], depth[t], min_depth, True,
                                     left, right, feature, threshold, flags, empty_i,
                                     empty_i, empty_i, empty_b, strict, round32, want)
                    np.testing.assert_array_equal(got, want)
                    assert np.all(flags[got[:m]] & route.LEAF)

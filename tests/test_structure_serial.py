"""The one-thread structural passes (used below ``ensemble.SERIAL_NODES`` nodes) against
their parallel forms and plain per-tree code, on random valid and corrupt trees."""

import numpy as np
import pytest

from tests.test_parse_speed_equivalence import N_FEATURES, _forest
from treeimp.kernels import structure


def _concatenated(trees):
    offsets = np.concatenate([[0], np.cumsum([t[0].size for t in trees])]).astype(np.int64)
    return offsets, *(np.concatenate([t[j] for t in trees]) for j in range(3))


@pytest.mark.parametrize("seed", range(12))
def test_serial_passes_equal_parallel_passes(seed):
    rng = np.random.default_rng(seed)
    trees = _forest(rng, int(rng.integers(1, 12)), corrupt=seed % 2 == 1)
    offsets, left, right, feature = _concatenated(trees)
    got = structure.check_trees_serial(offsets, left, right, feature, N_FEATURES)
    want = structure.check_trees(offsets, left, right, feature, N_FEATURES)
    problem = want[0]
    assert np.array_equal(got[0], problem) and np.array_equal(got[1], want[1])
    ok = np.repeat(problem == 0, np.diff(offsets))
    for g, w in zip(got[2:], want[2:]):
        assert g.dtype == w.dtype and np.array_equal(g[ok], w[ok])
    # per tree: children_partitions is children_partition tree by tree
    parts = structure.children_partitions(offsets, left, right)
    assert parts.tolist() == [structure.children_partition(lc, rc) for lc, rc, _ in trees]
    if np.any(problem):
        return
    gl, gr = got[2], got[3]
    order = structure.postorder_serial(offsets, gl, gr)
    assert np.array_equal(order, structure.postorder(offsets, gl, gr))
    for t in range(len(trees)):  # children before parents, each node once, per tree
        nodes = order[offsets[t]:offsets[t + 1]]
        assert sorted(nodes.tolist()) == list(range(offsets[t], offsets[t + 1]))
        pos = np.empty(offsets[-1], np.int64)
        pos[nodes] = np.arange(nodes.size)
        split = nodes[gl[nodes] >= 0]
        assert np.all(pos[gl[split]] < pos[split]) and np.all(pos[gr[split]] < pos[split])
    weight = rng.uniform(0, 2, offsets[-1])
    weight[rng.random(weight.size) < 0.1] = 0.0
    value = rng.normal(size=(offsets[-1], 2))
    a, b = value.copy(), value.copy()
    structure.fill_internal_values_serial(order, offsets, gl, gr, weight, a)
    structure.fill_internal_values(order, offsets, gl, gr, weight, b)
    assert np.array_equal(a, b)
    # the three passes of a small ensemble's build in one kernel: the same order, values
    # and (against the parallel kernel) depths
    c = value.copy()
    got = structure.order_values_depths_serial(offsets, gl, gr, weight, c)
    assert np.array_equal(got[0], order) and np.array_equal(c, b)
    depths = structure.tree_depths(offsets, gl, gr)
    assert all(np.array_equal(g, w) for g, w in zip(got[1:], depths))
    threshold = np.where(gl >= 0, rng.normal(size=gl.size), 0.0)
    is_cat = np.zeros(gl.size, bool)
    # clean, a NaN threshold, a non-finite leaf value, a NaN threshold of a categorical
    # split (not checked), both problems (the leaf value is reported)
    for case, want in enumerate((0, 2, 1, 0, 1)):
        th, val, cat = threshold.copy(), a.copy(), is_cat.copy()
        split = np.flatnonzero(gl >= 0)
        if not split.size and case in (1, 3):
            continue
        if case in (1, 3, 4) and split.size:
            th[split[0]] = np.nan
            cat[split[0]] = case == 3
        if case in (2, 4):
            val[np.flatnonzero(gl < 0)[-1], 1] = np.inf
        assert structure.check_values_thresholds(gl, val, th, cat) == want


@pytest.mark.parametrize("seed", range(6))
def test_serial_routing_structures_equal_parallel_ones(seed):
    """tree_depths on one thread (TreeEnsemble.routing below SERIAL_NODES) against its
    parallel form and a plain recursion; fill_node_arrays (numpy) node by node against
    the flag bits of kernels/route.py."""
    from treeimp.kernels import route

    rng = np.random.default_rng(100 + seed)
    trees = _forest(rng, int(rng.integers(1, 12)), corrupt=False)
    offsets, left, right, feature = _concatenated(trees)
    gl = np.where(left >= 0, left + np.repeat(offsets[:-1], np.diff(offsets)), -1)
    gr = np.where(right >= 0, right + np.repeat(offsets[:-1], np.diff(offsets)), -1)
    got = structure.tree_depths_serial(offsets, gl, gr)
    want = structure.tree_depths(offsets, gl, gr)
    assert all(np.array_equal(g, w) for g, w in zip(got, want))

    def depths(node, d):
        if gl[node] < 0:
            return [d]
        return depths(gl[node], d + 1) + depths(gr[node], d + 1)

    for t in range(len(trees)):
        leaf_depths = depths(offsets[t], 0)
        assert (got[0][t], got[1][t]) == (max(leaf_depths), min(leaf_depths))
    n = offsets[-1]
    args = (gl, gr, feature, rng.normal(size=n), rng.random(n) < 0.5,
            rng.integers(0, 5, n).astype(np.uint8), rng.random(n) < 0.2, rng.random(n) < 0.5)
    def arrays():
        return (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                np.empty(n), np.empty(n, route.FLAGS_DTYPE))

    bits = {"missing_left": route.MISSING_LEFT, "nan_as_zero": route.NAN_AS_ZERO,
            "zero_missing": route.NAN_ZERO_MISSING, "cat": route.CATEGORICAL,
            "exact": route.CATEGORY_EXACT, "negative": route.CATEGORY_NEGATIVE_UNLISTED,
            "default_left": route.CATEGORY_DEFAULT_LEFT, "leaf": route.LEAF,
            "nan_left": route.NAN_LEFT}
    from treeimp.kernels import nan_modes

    for strict in (False, True):
        a = arrays()
        structure.fill_node_arrays(*args, strict, *a)
        assert np.any(a[-1] != 0)
        # node by node, the flags as kernels/route.py defines them
        th, miss, mode, cat, cat_left = args[3:]
        for i in range(n):
            leaf = gl[i] < 0
            assert (a[0][i], a[1][i]) == ((i, i) if leaf else (gl[i], gr[i]))
            assert a[2][i] == max(feature[i], 0) and a[3][i] == th[i]
            zero = mode[i] == nan_modes.NAN_AS_ZERO
            on = {"missing_left": miss[i], "nan_as_zero": zero,
                  "zero_missing": mode[i] == nan_modes.NAN_ZERO_MISSING, "cat": cat[i],
                  "exact": cat[i] and mode[i] == nan_modes.NAN_CAT_EXACT,
                  "negative": cat[i] and mode[i] == nan_modes.NAN_CAT_NEGATIVE_UNLISTED,
                  "default_left": cat_left[i], "leaf": leaf,
                  "nan_left": ((0.0 < th[i]) if strict else (0.0 <= th[i])) if zero
                  else miss[i]}
            assert a[4][i] == sum(bits[k] for k, v in on.items() if v), (i, on)


@pytest.mark.parametrize("seed", range(4))
def test_split_arrays_equal_a_plain_loop(seed):
    """split_arrays (numpy) against a loop over trees and nodes."""
    rng = np.random.default_rng(200 + seed)
    trees = _forest(rng, int(rng.integers(1, 12)), corrupt=False)
    trees.insert(int(rng.integers(0, len(trees) + 1)), (np.full(1, -1), np.full(1, -1),
                                                         np.zeros(1, np.int64)))
    offsets, left, right, feature = _concatenated(trees)
    start = np.repeat(offsets[:-1], np.diff(offsets))
    gl = np.where(left >= 0, left + start, -1).astype(np.int32)
    gr = np.where(right >= 0, right + start, -1).astype(np.int32)
    got = structure.split_arrays(offsets, gl, gr, feature.astype(np.int32), N_FEATURES)
    want = [[], [], [], [], [], [], []]
    for t in range(len(trees)):
        want[6].append(len(want[0]))
        for i in range(offsets[t], offsets[t + 1]):
            if gl[i] >= 0:
                for k, v in enumerate((i, gl[i], gr[i], t, offsets[t],
                                       t * N_FEATURES + feature[i])):
                    want[k].append(v)
    want[6].append(len(want[0]))
    for g, w in zip(got, want):
        assert g.dtype == np.int64 and g.tolist() == w

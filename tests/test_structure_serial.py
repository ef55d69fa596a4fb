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
    threshold = np.where(gl >= 0, rng.normal(size=gl.size), 0.0)
    is_cat = np.zeros(gl.size, bool)
    for case in range(3):  # clean, a NaN threshold, a non-finite leaf value
        th, val = threshold.copy(), a.copy()
        if case == 1 and np.any(gl >= 0):
            th[np.flatnonzero(gl >= 0)[0]] = np.nan
        if case == 2:
            val[np.flatnonzero(gl < 0)[-1], 1] = np.inf
        assert (structure.check_values_thresholds_serial(gl, val, th, is_cat)
                == structure.check_values_thresholds(gl, val, th, is_cat))


@pytest.mark.parametrize("seed", range(6))
def test_serial_routing_structures_equal_parallel_ones(seed):
    """tree_depths and fill_node_arrays on one thread (TreeEnsemble.routing below
    SERIAL_NODES) against their parallel forms and, for depths, a plain recursion."""
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
            rng.integers(0, 3, n).astype(np.uint8), rng.random(n) < 0.2, rng.random(n) < 0.5)
    def arrays():
        return (np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64),
                np.empty(n), np.empty(n, route.FLAGS_DTYPE))

    for strict in (False, True):
        a, b = arrays(), arrays()
        structure.fill_node_arrays_serial(*args, strict, *a)
        structure.fill_node_arrays(*args, strict, *b)
        assert all(x.tobytes() == y.tobytes() for x, y in zip(a, b))
        assert np.any(a[-1] != 0)

"""The numpy structure passes of a first parse (``structure.ordered_trees``,
``structure.order_values_depths``) against the numba kernels they stand in for
(``check_trees_serial``, ``order_values_depths_serial``), and the XGBoost reader's one
compiled pass (``structure.ordered_values_depths``) against both, on random trees
numbered breadth-first, depth-first and at random, valid and corrupt."""

import numpy as np
import pytest

from tests.test_parse_speed_equivalence import N_FEATURES, _corrupt, _random_tree
from treeimp.kernels import structure


def _renumbered(rng, left, right, feature, how):
    """The same tree with its nodes numbered breadth-first or depth-first (pre-order:
    children after parents) from the root 0, or as given ("random")."""
    if how == "random":
        return left, right, feature
    seq, pending = [], [0]
    while pending:
        node = pending.pop(0) if how == "bfs" else pending.pop()
        seq.append(node)
        if left[node] >= 0:
            pending += [left[node], right[node]] if how == "bfs" else [right[node], left[node]]
    new = np.empty(left.size, np.int64)
    new[seq] = np.arange(left.size)
    seq = np.array(seq)
    remap = np.where(left[seq] >= 0, 1, 0)
    out_left = np.where(remap == 1, new[np.maximum(left[seq], 0)], -1)
    out_right = np.where(remap == 1, new[np.maximum(right[seq], 0)], -1)
    return out_left, out_right, feature[seq]


def _ensemble(seed, how, corrupt):
    rng = np.random.default_rng(seed)
    trees = []
    for _ in range(int(rng.integers(1, 12))):
        tree = _renumbered(rng, *_random_tree(rng, int(rng.integers(0, 8))), how)
        trees.append(_corrupt(rng, *tree) if corrupt and rng.random() < 0.4 else tree)
    offsets = np.concatenate([[0], np.cumsum([t[0].size for t in trees])]).astype(np.int64)
    return rng, offsets, *(np.concatenate([t[j] for t in trees]) for j in range(3))


@pytest.mark.parametrize("how", ["bfs", "dfs", "random"])
@pytest.mark.parametrize("seed", range(40))
def test_ordered_trees_equals_check_trees(seed, how):
    corrupt = seed % 2 == 1
    rng, offsets, left, right, feature = _ensemble(seed, how, corrupt)
    problem, _, *want = structure.check_trees_serial(offsets, left, right, feature,
                                                     N_FEATURES)
    got = structure.ordered_trees(offsets, left, right, feature, N_FEATURES)
    if np.any(problem):
        assert got is None
        return
    sizes = np.diff(offsets)
    local = np.arange(offsets[-1]) - np.repeat(offsets[:-1], sizes)
    ordered = np.all((left < 0) | ((left > local) & (right > local)))
    if not ordered:  # numbered otherwise: left to the kernel
        assert got is None
        return
    assert got is not None
    for g, w in zip(got, want):
        assert g.dtype == w.dtype == np.int32 and np.array_equal(g, w)
    # the build's passes: the same post-order, values (bit for bit) and depths
    gl, gr = got[0], got[1]
    weight = rng.uniform(0, 2, offsets[-1])
    weight[rng.random(weight.size) < 0.2] = 0.0
    value = rng.normal(size=(offsets[-1], 3))
    a, b = value.copy(), value.copy()
    expected = structure.order_values_depths_serial(offsets, gl, gr, weight, a)
    result = structure.order_values_depths(offsets, gl, gr, weight, b)
    for r, e in zip(result, expected):
        assert r.dtype == e.dtype and np.array_equal(r, e)
    assert np.array_equal(a, b)


def test_corrupt_ordered_trees_are_refused():
    """Each structural problem of ``_corrupt`` in a breadth-first tree: None (the kernel
    then reports it)."""
    rng = np.random.default_rng(5)
    seen = set()
    for _ in range(400):
        tree = _renumbered(rng, *_random_tree(rng, 4), "bfs")
        bad = _corrupt(rng, *tree)
        offsets = np.array([0, bad[0].size], np.int64)
        problem = structure.check_trees_serial(offsets, *bad, N_FEATURES)[0][0]
        if problem:
            seen.add(int(problem))
            assert structure.ordered_trees(offsets, *bad, N_FEATURES) is None
    assert seen == {1, 2, 3, 4, 5}


@pytest.mark.parametrize("route", ["compiled", "numpy"])
@pytest.mark.parametrize("how", ["bfs", "dfs", "random"])
@pytest.mark.parametrize("seed", range(40))
def test_ordered_values_depths_equals_the_separate_passes(seed, how, route, monkeypatch):
    """The parser's one compiled pass (``ordered_values_depths``; and its numpy route,
    which ensembles below ``NUMPY_PASS_NODES`` nodes take) on the same random
    ensembles: refused exactly where ``ordered_trees`` refuses, else its normal form,
    and the post-order, values (bit for bit) and depths of the stack-walking kernel
    ``order_values_depths_serial``; float32 leaf values and weights, as XGBoost's."""
    monkeypatch.setattr(structure, "NUMPY_PASS_NODES", 0 if route == "compiled" else 1 << 60)
    corrupt = seed % 2 == 1
    rng, offsets, left, right, feature = _ensemble(seed, how, corrupt)
    n = int(offsets[-1])
    leaf_value = rng.normal(size=n).astype(np.float32)
    weight = rng.uniform(0, 2, n).astype(np.float32)
    weight[rng.random(n) < 0.2] = 0.0
    ok, *got = structure.ordered_values_depths(offsets, left, right, feature, leaf_value,
                                               weight, N_FEATURES)
    want = structure.ordered_trees(offsets, left, right, feature, N_FEATURES)
    assert ok == (want is not None)
    if not ok:
        return
    for g, w in zip(got[:3], want):
        assert g.dtype == w.dtype == np.int32 and np.array_equal(g, w)
    value = np.where(want[0] < 0, leaf_value.astype(np.float64), 0.0)[:, None]
    order, deepest, shallowest = structure.order_values_depths_serial(
        offsets, want[0], want[1], weight.astype(np.float64), value)
    assert got[3].dtype == np.float64 and np.array_equal(got[3], value[:, 0])
    assert got[4].dtype == np.float64 and np.array_equal(got[4], weight)
    for g, w in zip(got[5:], (order, deepest, shallowest)):
        assert g.dtype == np.int64 and np.array_equal(g, w)

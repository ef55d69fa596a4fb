"""The bulk passes behind ``treeimp.parse`` against straightforward per-tree references.

``TreeEnsemble.from_trees`` gathers each field over all trees and checks the structure
of all trees in one numba pass (``kernels.structure.check_trees``), and the XGBoost
reader asks ``children_partition`` whether a tree kept pruned nodes. Here they meet
plain per-tree code on random input, valid and invalid: the same arrays, and
the same first problem (the lowest tree first; within a tree, field shapes of left,
right and feature, then the structure, then the other fields' shapes, then the
categories), with the same message.
"""

import re

import numpy as np
import pytest

from treeimp.kernels.structure import (
    check_node_fields,
    check_trees,
    children_partition,
    count_reachable,
)
from treeimp.model.ensemble import Tree, TreeEnsemble

N_FEATURES = 4


# ---------------------------------------------------------------- random trees
def _random_tree(rng, n_splits):
    """Local child arrays of a random binary tree, nodes numbered in random order
    (root 0), features at splits in [0, N_FEATURES)."""
    n = 2 * n_splits + 1
    order = np.concatenate([[0], 1 + rng.permutation(n - 1)])
    left = np.full(n, -1, np.int64)
    right = np.full(n, -1, np.int64)
    leaves, k = [0], 1
    for _ in range(n_splits):
        node = leaves.pop(rng.integers(len(leaves)))
        left[order[node]], right[order[node]] = order[k], order[k + 1]
        leaves += [k, k + 1]
        k += 2
    feature = np.where(left >= 0, rng.integers(0, N_FEATURES, n), -2)
    return left, right, feature


def _corrupt(rng, left, right, feature):
    """One random structural problem (or none) put into copies of the arrays."""
    left, right, feature = left.copy(), right.copy(), feature.copy()
    splits = np.flatnonzero(left >= 0)
    kind = rng.integers(7)
    if splits.size == 0 or kind == 0:
        return left, right, feature
    i = rng.choice(splits)
    if kind == 1:  # exactly one child
        right[i] = -1
    elif kind == 2:  # child index out of range
        right[i] = left.size + rng.integers(3)
    elif kind == 3:  # feature out of range
        feature[i] = rng.choice([-1, N_FEATURES, N_FEATURES + 7])
    elif kind == 4:  # cycle: a child points back to the root or to itself
        left[i] = rng.choice([0, i])
    elif kind == 5:  # shared child
        right[i] = left[rng.choice(splits)]
    else:  # a subtree cut off: the split becomes a leaf, its children unreachable
        left[i] = right[i] = -1
    return left, right, feature


def _forest(rng, n_trees, corrupt):
    trees = []
    for _ in range(n_trees):
        arrays = _random_tree(rng, int(rng.integers(0, 6)))
        trees.append(_corrupt(rng, *arrays) if corrupt and rng.random() < 0.3 else arrays)
    return trees


@pytest.mark.parametrize("seed", range(30))
def test_check_trees_equals_the_per_tree_checks(seed):
    rng = np.random.default_rng(seed)
    trees = _forest(rng, int(rng.integers(1, 12)), corrupt=seed % 3 != 0)
    sizes = [t[0].size for t in trees]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    problem, bad, left, right, feature = check_trees(
        offsets, *(np.concatenate([t[j] for t in trees]) for j in range(3)), N_FEATURES)
    for t, (lc, rc, ft) in enumerate(trees):
        expected = check_node_fields(lc, rc, ft, N_FEATURES)
        if expected[0] == 0:
            count, twice = count_reachable(lc, rc)
            if twice >= 0:
                expected = (4, twice)
            elif count != lc.size:
                expected = (5, lc.size - count)
        assert (problem[t], bad[t]) == expected
        if expected[0] == 0:
            sl = slice(offsets[t], offsets[t + 1])
            leaf = lc < 0
            np.testing.assert_array_equal(left[sl], np.where(leaf, -1, lc + offsets[t]))
            np.testing.assert_array_equal(right[sl], np.where(leaf, -1, rc + offsets[t]))
            np.testing.assert_array_equal(feature[sl], np.where(leaf, -1, ft))
    assert left.dtype == right.dtype == feature.dtype == np.int32


@pytest.mark.parametrize("seed", range(30))
def test_children_partition_equals_sorted_children(seed):
    rng = np.random.default_rng(seed)
    for lc, rc, _ in _forest(rng, 10, corrupt=True):
        split = lc >= 0
        children = np.concatenate([lc[split], rc[split]])
        expected = (children.size == lc.size - 1
                    and np.array_equal(np.sort(children), np.arange(1, lc.size)))
        assert children_partition(lc, rc) == expected


# ---------------------------------------------------------------- from_trees
def _valid_tree(rng):
    left, right, feature = _random_tree(rng, int(rng.integers(1, 6)))
    n = left.size
    fields = dict(left=left, right=right, feature=feature,
                  threshold=rng.normal(size=n), value=rng.normal(size=(n, 1)),
                  weight=rng.random(n) + 0.5)
    # optional fields present or not, in various dtypes (from_trees casts them)
    if rng.random() < 0.5:
        fields["missing_left"] = rng.integers(0, 2, n).astype(rng.choice([np.uint8, bool]))
    if rng.random() < 0.5:
        fields["nan_mode"] = rng.integers(0, 2, n)
    if rng.random() < 0.5:
        fields["impurity"] = rng.random(n).astype(np.float32)
    if rng.random() < 0.5:
        fields["gain"] = rng.random(n)
    splits = np.flatnonzero(left >= 0)
    if rng.random() < 0.3:
        node = int(rng.choice(splits))
        fields["categories"] = {node: (rng.choice(20, 3, replace=False), rng.random() < 0.5,
                                       rng.random() < 0.5)}
    return fields


def _inject(rng, fields, kind, left):
    """A problem of one kind from_trees reports, in a copy of the fields (``left``: the
    tree's valid children, to place category problems)."""
    fields = dict(fields)
    n = left.size
    if kind == 0:  # structure
        fields["left"], fields["right"], fields["feature"] = _corrupt(
            rng, fields["left"], fields["right"], fields["feature"])
    elif kind in (1, 2):  # a field of the wrong shape (left keeps its length: it sizes
        # the tree)
        name = str(rng.choice(["left", "right", "feature"] if kind == 1 else
                              ["threshold", "missing_left", "nan_mode", "weight", "impurity",
                               "gain"]))
        shapes = [(n, 2)] if name == "left" else [(n + 1,), (n, 2), (n - 1,)]
        fields[name] = np.zeros(shapes[rng.integers(len(shapes))])
    elif kind == 3:  # categories on a leaf
        leaf = int(np.flatnonzero(left < 0)[0])
        fields["categories"] = {leaf: ([1], True, False)}
    else:  # repeated or negative category codes
        split = int(np.flatnonzero(left >= 0)[0])
        fields["categories"] = {split: (rng.choice([[2, 2], [-1, 3]]), True, False)}
    return fields


def _first_problem(trees):
    """The message a tree-by-tree validation reports first (None when all are valid)."""
    def shape(name, a, n):
        a = np.asarray(a)
        if a.shape != (n,):
            return f"tree field {name!r} has shape {a.shape}, expected ({n},)"
        return None

    for t, f in enumerate(trees):
        n = len(f["left"])
        for name in ("left", "right", "feature"):
            if shape(name, f[name], n):
                return shape(name, f[name], n)
        lc, rc, ft = (np.asarray(f[k], dtype=np.int64) for k in ("left", "right", "feature"))
        code, bad = check_node_fields(lc, rc, ft, N_FEATURES)
        if code == 0:
            count, twice = count_reachable(lc, rc)
            code, bad = (4, twice) if twice >= 0 else (5, n - count) if count != n else (0, 0)
        if code:
            return {1: f"tree {t} node {bad} has exactly one child",
                    2: f"tree {t} has a child index >= its {n} nodes",
                    3: f"tree {t} splits on feature {bad} but the model has {N_FEATURES} "
                       "features",
                    4: f"tree {t} is not a tree: node {bad} is reached twice (cycle or "
                       "shared child)",
                    5: f"tree {t} has {bad} nodes that the root never reaches"}[code]
        for name in ("threshold", "missing_left", "nan_mode", "weight", "impurity", "gain"):
            if f.get(name) is not None and shape(name, f[name], n):
                return shape(name, f[name], n)
        for node, (codes, _, _) in sorted(f.get("categories", {}).items()):
            if lc[node] < 0:
                return f"tree {t}: categorical split on a non-split node {node}"
            codes = np.sort(np.asarray(codes))
            if codes[0] < 0 or np.any(np.diff(codes) == 0):
                return f"tree {t} node {node}: category codes must be distinct and >= 0"
    return None


def _build(trees):
    return TreeEnsemble.from_trees([Tree(**f) for f in trees], kind="boosting",
                                   n_features=N_FEATURES, n_outputs=1, comparison="<=",
                                   round_float32=False)


@pytest.mark.parametrize("seed", range(150))
def test_from_trees_reports_the_first_problem_tree_by_tree(seed):
    rng = np.random.default_rng(seed)
    trees = [_valid_tree(rng) for _ in range(int(rng.integers(1, 8)))]
    for t in rng.choice(len(trees), min(len(trees), int(rng.integers(1, 4))), replace=False):
        # one or two problems in a tree (a structural one before a shape: shapes of left,
        # right and feature stop the structure check)
        valid_left = trees[t]["left"]
        for kind in np.sort(rng.choice(5, int(rng.integers(1, 3)), replace=False)):
            trees[t] = _inject(rng, trees[t], kind, valid_left)
    expected = _first_problem(trees)
    if expected is None:
        _build(trees)
    else:
        with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
            _build(trees)


def _small(**over):
    """A valid 5-node tree: 0 -> (1, 2), 1 -> (3, 4)."""
    fields = dict(left=np.array([1, 3, -1, -1, -1]), right=np.array([2, 4, -1, -1, -1]),
                  feature=np.array([0, 2, -1, -1, -1]), threshold=np.zeros(5),
                  value=np.ones((5, 1)), weight=np.ones(5))
    fields.update(over)
    return fields


ONE_CHILD = dict(right=np.array([2, -1, -1, -1, -1]))
LEAF_CATEGORIES = dict(categories={3: ([1], True, False)})
ORDER_CASES = {  # several problems: the one a tree-by-tree pass meets first is reported
    "structure before threshold": ([_small(**ONE_CHILD, threshold=np.zeros(4))],
                                   "tree 0 node 1 has exactly one child"),
    "structure before gain": ([_small(**ONE_CHILD, gain=np.zeros(4))],
                              "tree 0 node 1 has exactly one child"),
    "right's shape before the structure": (
        [_small(**{**ONE_CHILD, "right": np.zeros((5, 2))})], "tree field 'right'"),
    "feature's shape before the structure": (
        [_small(**ONE_CHILD, feature=np.zeros(4))], "tree field 'feature'"),
    "threshold before categories": ([_small(**LEAF_CATEGORIES, threshold=np.zeros(6))],
                                    "tree field 'threshold'"),
    "weight before impurity": ([_small(weight=np.zeros(3), impurity=np.zeros(2))],
                               "tree field 'weight'"),
    "categories before a later tree's shape": (
        [_small(**LEAF_CATEGORIES), _small(left=np.zeros((5, 2)))],
        "tree 0: categorical split on a non-split node 3"),
    "a later field before a later tree's structure": (
        [_small(nan_mode=np.zeros(6)), _small(**ONE_CHILD)], "tree field 'nan_mode'"),
    "structure before a later tree's left": (
        [_small(), _small(**ONE_CHILD), _small(left=np.zeros((5, 2)))],
        "tree 1 node 1 has exactly one child"),
}


@pytest.mark.parametrize("case", list(ORDER_CASES))
def test_from_trees_order_of_problems_within_and_across_trees(case):
    trees, message = ORDER_CASES[case]
    expected = _first_problem(trees)
    assert message in expected
    with pytest.raises(ValueError, match=f"^{re.escape(expected)}$"):
        _build(trees)


@pytest.mark.parametrize("seed", range(20))
def test_from_trees_arrays_equal_tree_by_tree_concatenation(seed):
    rng = np.random.default_rng(seed)
    trees = [_valid_tree(rng) for _ in range(int(rng.integers(1, 8)))]
    ens = _build(trees)
    o = np.concatenate([[0], np.cumsum([f["left"].size for f in trees])])
    leaf = np.concatenate([f["left"] < 0 for f in trees])
    shift = np.repeat(o[:-1], [f["left"].size for f in trees])

    def field(name, dtype, fill):
        return np.concatenate([np.full(f["left"].size, fill) if f.get(name) is None
                               else np.asarray(f[name]).astype(dtype) for f in trees])

    expected = {
        "left": np.where(leaf, -1, field("left", np.int64, 0) + shift).astype(np.int32),
        "right": np.where(leaf, -1, field("right", np.int64, 0) + shift).astype(np.int32),
        "feature": np.where(leaf, -1, field("feature", np.int64, 0)).astype(np.int32),
        "threshold": field("threshold", np.float64, 0),
        "missing_left": field("missing_left", bool, False).astype(bool),
        "nan_mode": field("nan_mode", np.uint8, 0).astype(np.uint8),
        "weight": field("weight", np.float64, 0),
        "impurity": field("impurity", np.float64, np.nan),
        "gain": field("gain", np.float64, np.nan),
    }
    for name, want in expected.items():
        got = getattr(ens, name)
        assert got.dtype == want.dtype, name
        np.testing.assert_array_equal(got, want, err_msg=name)
    np.testing.assert_array_equal(ens.value[leaf],
                                  np.concatenate([f["value"] for f in trees])[leaf])
    cat_nodes = [o[t] + node for t, f in enumerate(trees) for node in f.get("categories", {})]
    np.testing.assert_array_equal(np.flatnonzero(ens.is_categorical), sorted(cat_nodes))

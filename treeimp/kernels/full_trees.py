"""Shallow plain trees laid out as full binary trees, for the staged pass's walk.

A tree of depth d becomes 2^d slots in heap order: internal slot i has its children at
2i + 1 (left) and 2i + 2 (right), and the 2^d slots of the last level map to the tree's
leaves (a leaf above the last level fills every last-level slot below it, and the slots
under it route anywhere). A row then walks exactly d levels reading, per level, the
slot's column and cut and its own value: no child arrays, flags or early-exit test
(``route.walk_plain`` reads six arrays per level).

The walk compares ``x >= cut`` (goes right) in every node. That is the node's own
comparison for every number x: ``x < t`` goes left (``strict``) is ``x >= t`` goes
right; ``x <= t`` goes left is ``x >= nextafter(t, +inf)`` goes right. NaN goes the
node's NAN_LEFT way because the rows are copied group by group with NaN replaced
(``copy_group``): columns 0 .. F - 1 hold the row with NaN as +inf (goes right at
every finite cut), columns F + j hold feature ``nan_left[j]`` with NaN as -inf (goes
left at every finite cut); a node that sends NaN left reads its feature's second
column. Every other value, infinities included, is compared as it is, so a tree
qualifies only with finite thresholds (and plain, depth at most ``MAX_DEPTH``); a
model routed in float32 has its values rounded in the copy.
"""


import numpy as np
from numba import njit

from .route import LEAF, NAN_LEFT

MAX_DEPTH = 8  # deeper trees keep route.walk_plain (2^d slots of 24 bytes per tree)


@njit(cache=True)
def full_tree_layout(tree_offsets, depth, plain, left, right, feature, threshold, flags,
                     strict, n_features):
    """(slot_start (n_trees + 1,), column, cut, leaf, nan_left) of every tree as a full
    tree (module docstring), or slot_start all zero and column, cut, leaf empty unless
    every tree qualifies (plain, depth <= MAX_DEPTH, finite thresholds): tree t's slots are
    slot_start[t]:slot_start[t + 1]; column (int64) and cut (float64) of its internal
    slots, leaf (int64) the global leaf node of each last-level slot (at the same
    offsets); nan_left the features that some node reading NaN as left splits on, in
    ascending order (their NaN-as-minus-infinity columns follow the F others)."""
    n_trees = tree_offsets.shape[0] - 1
    # np.empty and zeroing loops, not np.zeros: each numba library function is one more
    # compilation for every argument type and caller's flags (np.empty of these types is
    # compiled for the document parser already)
    slot_start = np.empty(n_trees + 1, np.int64)
    slot_start[0] = 0
    # feature -> its NaN-left column (n_features + j), or -1
    second = np.empty(n_features, np.int64)
    second[:] = -1
    ok = True
    for t in range(n_trees):
        ok &= plain[t] and depth[t] <= MAX_DEPTH
        for node in range(tree_offsets[t], tree_offsets[t + 1]):
            if not flags[node] & LEAF:
                ok &= abs(threshold[node]) < np.inf  # finite (NaN fails too)
                if flags[node] & NAN_LEFT:
                    second[feature[node]] = 0
        slot_start[t + 1] = slot_start[t] + (1 << min(depth[t], MAX_DEPTH))
    n_left = 0
    for f in range(n_features):
        if second[f] == 0:
            second[f] = n_features + n_left
            n_left += 1
    nan_left = np.empty(n_left, np.int64)
    for f in range(n_features):
        if second[f] >= 0:
            nan_left[second[f] - n_features] = f
    n_slots = slot_start[n_trees] if ok else 0
    if not ok:
        slot_start[:] = 0
    column = np.empty(n_slots, np.int64)
    cut = np.empty(n_slots)
    leaf = np.empty(n_slots, np.int64)
    for i in range(n_slots):
        column[i] = 0
        cut[i] = 0.0
        leaf[i] = 0
    # heap order puts every slot after its parent: each slot's node sends its children
    # (a leaf itself, both ways) to slots 2i + 1 and 2i + 2
    node_at = np.empty(2 << MAX_DEPTH, np.int64)
    for t in range(n_trees if ok else 0):
        base = slot_start[t]
        inner = (1 << depth[t]) - 1
        node_at[0] = tree_offsets[t]
        for i in range(inner):
            node = node_at[i]
            lo, hi = node, node
            if not flags[node] & LEAF:
                f = feature[node]
                column[base + i] = second[f] if flags[node] & NAN_LEFT else f
                t_ = threshold[node]
                cut[base + i] = t_ if strict else np.nextafter(t_, np.inf)
                lo, hi = left[node], right[node]
            node_at[2 * i + 1] = lo
            node_at[2 * i + 2] = hi
        for j in range(inner + 1):
            leaf[base + j] = node_at[inner + j]
    return slot_start, column, cut, leaf, nan_left


@njit(cache=True, inline="always")
def copy_group(X, rows, ng, round32, nan_left, xg):
    """xg[r] := row rows[r] of X for r < ng, as the full-tree walk reads it: F columns
    with NaN as +inf, then the ``nan_left`` features with NaN as -inf; values rounded to
    float32 first when ``round32``."""
    F = X.shape[1]
    for r in range(ng):
        i = np.uint64(rows[r])
        for f in range(F):
            v = X[i, f]
            if round32:
                v = np.float64(np.float32(v))
            xg[r, f] = v if v == v else np.inf
        for j in range(nan_left.shape[0]):
            v = X[i, np.uint64(nan_left[j])]
            if round32:
                v = np.float64(np.float32(v))
            xg[r, F + j] = v if v == v else -np.inf


@njit(cache=True, inline="always")
def walk_full(xg, m, base, d, column, cut, leaf, at, out):
    """out[k] := the global leaf that row k of ``xg`` (``copy_group``) reaches, k < m, in
    the full tree of depth d whose slots start at ``base``; ``at`` (>= m) scratch. Level
    by level over the rows: their steps are independent."""
    if d == 0:
        for k in range(m):
            out[k] = leaf[np.uint64(base)]
        return
    # the first level: every row at the root
    c0, t0 = np.uint64(column[np.uint64(base)]), cut[np.uint64(base)]
    for k in range(m):
        at[k] = 1 + np.int64(np.float64(xg[np.uint64(k), c0]) >= t0)
    for _ in range(d - 1):
        for k in range(m):
            i = np.uint64(base + at[k])
            x = np.float64(xg[np.uint64(k), np.uint64(column[i])])
            at[k] = 2 * at[k] + 1 + np.int64(x >= cut[i])
    first_leaf = base - (1 << d) + 1
    for k in range(m):
        out[k] = leaf[np.uint64(first_leaf + at[k])]

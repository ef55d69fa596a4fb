"""Permutation importance kernels: re-route only the rows a permuted column can move.

Every row is routed once (leaf matrix ``L``, rows x trees). Per tree the rows are then
sorted by the pre-order (DFS) position of their leaf, so the rows reaching any node form
one contiguous range ``[start, end)`` of that tree's row order. A node splitting on
feature j with no ancestor splitting on j (a *topmost* j-node) is reached by the same
rows whatever column j holds: the path down to it never reads j. Under a permutation of
column j, only the rows in the ranges of the topmost j-nodes can change leaf.

Below a topmost j-node, a row leaves its old path only at a j-node (the other nodes
read columns that did not change). So for each leaf under a topmost j-node, its rows'
new values of column j are tested against the j-nodes on the leaf's path (usually one
or two: the chain ``jabove``/``same_up``); a row that stays on the path keeps its leaf,
a row that leaves it at a j-node is walked on from the child it goes to (in batches,
``route.descend``). Only the rows
whose leaf changed in some tree get a new margin, the full ordered sum over all trees
with the arithmetic of prediction (``route.leaf_term``), every other row keeps the
baseline margin: the result is bitwise the margin of a full re-prediction of the
permuted matrix.

Use through :class:`LeafIndex`: ``begin(j)``, then ``permuted_margin`` once per
permutation of column j, then ``finish()``, which puts the original leaves back in ``L``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .route import apply_chunk, descend, feature_value, leaf_term, step


@njit(cache=True)
def tree_layout(tree_offsets, left, right, feature, postorder):
    """Per node (global index): pre-order position, subtree size, subtree height and
    shallowest-leaf depth (levels below the node), parent (-1 at a root) and the nearest
    proper ancestor splitting on the same feature (-1 if none: a topmost split on its
    feature; leaves: -1). Also the pre-order itself: every tree's nodes, parents before
    children, left subtree first, tree by tree (a tree's nodes occupy the positions
    tree_offsets[t]:tree_offsets[t + 1])."""
    n = left.shape[0]
    size = np.ones(n, np.int64)
    height = np.zeros(n, np.int64)
    low = np.zeros(n, np.int64)
    parent = np.full(n, -1, np.int64)
    for idx in range(n):
        node = postorder[idx]
        lc = left[node]
        if lc < 0:
            continue
        rc = right[node]
        parent[lc] = node
        parent[rc] = node
        size[node] = 1 + size[lc] + size[rc]
        height[node] = 1 + max(height[lc], height[rc])
        low[node] = 1 + min(low[lc], low[rc])
    preorder = np.empty(n, np.int64)
    pre_pos = np.empty(n, np.int64)
    stack = np.empty(n + 1, np.int64)
    k = 0
    for t in range(tree_offsets.shape[0] - 1):
        stack[0] = tree_offsets[t]
        top = 1
        while top > 0:
            top -= 1
            node = stack[top]
            preorder[k] = node
            pre_pos[node] = k
            k += 1
            if left[node] >= 0:
                stack[top] = right[node]
                stack[top + 1] = left[node]
                top += 2
    same_up = np.full(n, -1, np.int64)
    for node in range(n):
        if left[node] < 0:
            continue
        f = feature[node]
        up = parent[node]
        while up >= 0 and feature[up] != f:
            up = parent[up]
        same_up[node] = up
    return preorder, pre_pos, size, height, low, parent, same_up


@njit(cache=True, parallel=True)
def sort_rows_by_leaf(L, tree_offsets, pre_pos, size, order, start, end):
    """order[t] := the rows sorted by the pre-order position of their leaf in tree t
    (ascending row index within a leaf); start/end[node] := the range of order[t] of the
    rows reaching the node. L holds leaves as node indices local to their tree."""
    n = L.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    for t in prange(n_trees):
        off = tree_offsets[t]
        nt = tree_offsets[t + 1] - off
        first = np.zeros(nt + 1, np.int64)  # first[p] = rows whose leaf is before p
        for i in range(n):
            first[pre_pos[off + L[i, t]] - off + 1] += 1
        for p in range(nt):
            first[p + 1] += first[p]
        for node in range(off, off + nt):
            p = pre_pos[node] - off
            start[node] = first[p]
            end[node] = first[p + size[node]]
        for i in range(n):
            p = pre_pos[off + L[i, t]] - off
            order[t, first[p]] = i
            first[p] += 1


@njit(cache=True, parallel=True)
def mark_paths(j, tops, preorder, pre_pos, size, parent, feature, jabove):
    """jabove[node] := the deepest proper ancestor of the node that splits on feature j,
    for every node strictly below a topmost j-node of ``tops``."""
    for k in prange(tops.shape[0]):
        p0 = pre_pos[tops[k]]
        for p in range(p0 + 1, p0 + size[tops[k]]):
            node = preorder[p]
            up = parent[node]
            jabove[node] = up if feature[up] == j else jabove[up]


@njit(cache=True)
def rows_margin(out, i0, i1, i2, i3, L, base, tree_offsets, tree_output, scale, divisor,
                value):
    """out[i] := base + the ordered sum over all trees of scale * the leaf value of row
    i (leaves from L), divided by ``divisor`` when it is not 1, for rows i0..i3 (may
    repeat): the arithmetic of ``predict_ensemble`` (kernels/api.py; add_trees_chunk
    with sign = 1). One output at a time, four rows at once: the four sums stay in
    registers and their additions overlap."""
    vdim = value.shape[1]
    for c in range(out.shape[1]):
        a0 = a1 = a2 = a3 = base[c]
        for t in range(L.shape[1]):
            jv = c - tree_output[t]
            if 0 <= jv < vdim:
                s = scale[t]
                off = tree_offsets[t]
                a0 += leaf_term(s, value, off + L[i0, t], jv)
                a1 += leaf_term(s, value, off + L[i1, t], jv)
                a2 += leaf_term(s, value, off + L[i2, t], jv)
                a3 += leaf_term(s, value, off + L[i3, t], jv)
        if divisor != 1.0:
            a0 /= divisor
            a1 /= divisor
            a2 /= divisor
            a3 /= divisor
        out[i0, c] = a0
        out[i1, c] = a1
        out[i2, c] = a2
        out[i3, c] = a3


EXITS = 64  # rows that left their path, walked on together


@njit(cache=True, inline="always")
def _walk_exits(X, rows, cur, where, m, t, off, L, order, changed, height, low, nodes,
                cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """Walk the m rows on from the nodes ``cur`` they went to, record their new leaves
    in L and mark them (negative entries of the row order, at positions ``where``)."""
    h = 0
    lo = height[cur[0]]
    for q in range(m):
        h = max(h, height[cur[q]])
        lo = min(lo, low[cur[q]])
    descend(X, rows, m, h, lo, nodes, cat_offset, cat_count, cat_codes, cat_left, strict,
            round32, cur)
    for q in range(m):
        r = rows[q]
        L[r, t] = cur[q] - off
        order[t, where[q]] = -1 - r
        changed[r] = 1


@njit(cache=True, inline="always")
def _back_on_leaf(back, back_leaf, b, t, off, L, order):
    """Unmark the b rows at positions ``back`` of the row order, back on their
    original leaves ``back_leaf``."""
    for q in range(b):
        r = -1 - order[t, back[q]]
        order[t, back[q]] = r
        L[r, t] = back_leaf[q] - off


@njit(cache=True, parallel=True)
def permuted_margin(X, j, tops, top_tree, margin, out, changed, L, order, start, end,
                    preorder, pre_pos, size, height, low, jabove, same_up, base,
                    tree_offsets, tree_output, scale, divisor, value, nodes, depth,
                    min_depth, cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """out := the margin of X, whose column j differs from the rows' original values,
    given ``margin``, the margin of the original rows. ``tops`` are the topmost j-nodes
    (with their trees ``top_tree``), ``jabove`` as ``mark_paths`` leaves it for j.
    order, start, end describe the original leaves. L is left holding the leaves of X
    and the entries of ``order`` of the rows whose leaf changed are marked (-1 - row);
    the next call for the same j, or ``restore_leaves``, undoes both. ``changed`` (zeros,
    one byte per row) is scratch and left zeroed. Returns the number of rows whose
    margin was recomputed."""
    n = X.shape[0]
    xj = np.empty(n)
    for i in prange(n):
        xj[i] = feature_value(X, i, j, round32)
    # 1. the rows under each topmost j-node, leaf by leaf. Topmost nodes of one tree
    #    have disjoint row ranges, so the tasks write disjoint entries of L and order;
    #    ``changed`` may be set to 1 by several tasks at once (all store the same byte).
    for k in prange(tops.shape[0]):
        top = tops[k]
        t = top_tree[k]
        off = tree_offsets[t]
        chain = np.empty(depth[t], np.int64)  # the j-nodes on a leaf's path, bottom up
        on_path = np.empty(depth[t], np.int64)  # and the child the path takes
        rows = np.empty(EXITS, np.int64)
        cur = np.empty(EXITS, np.int64)
        where = np.empty(EXITS, np.int64)
        back = np.empty(EXITS, np.int64)  # rows back on their leaf: where, leaf
        back_leaf = np.empty(EXITS, np.int64)
        m = 0
        b = 0
        p0 = pre_pos[top]
        for p in range(p0 + 1, p0 + size[top]):
            leaf = preorder[p]
            if size[leaf] != 1 or start[leaf] == end[leaf]:
                continue
            c = 0
            v = jabove[leaf]
            while v >= 0:
                chain[c] = v
                rc = nodes[v].right
                on_path[c] = nodes[v].left if pre_pos[leaf] < pre_pos[rc] else rc
                c += 1
                v = same_up[v]
            # whether a row leaves its path is unpredictable: the loop appends to the
            # buffers with selects rather than branches
            for pos in range(start[leaf], end[leaf]):
                entry = order[t, pos]
                r = entry ^ (entry >> 31)  # a marked entry holds -1 - row
                x = xj[r]
                # the highest j-node of the path that sends x the other way
                exit_to = -1
                for q in range(c):
                    go = step(x, chain[q], nodes, cat_offset, cat_count, cat_codes,
                              cat_left, strict)
                    exit_to = go if go != on_path[q] else exit_to
                rows[m] = r
                cur[m] = exit_to
                where[m] = pos
                m += exit_to >= 0
                back[b] = pos
                back_leaf[b] = leaf
                b += (entry < 0) & (exit_to < 0)  # left its leaf in the previous call
                if m == EXITS:
                    _walk_exits(X, rows, cur, where, m, t, off, L, order, changed, height,
                                low, nodes, cat_offset, cat_count, cat_codes, cat_left,
                                strict, round32)
                    m = 0
                if b == EXITS:
                    _back_on_leaf(back, back_leaf, b, t, off, L, order)
                    b = 0
        if m > 0:
            _walk_exits(X, rows, cur, where, m, t, off, L, order, changed, height, low,
                        nodes, cat_offset, cat_count, cat_codes, cat_left, strict, round32)
        _back_on_leaf(back, back_leaf, b, t, off, L, order)
    # 2. rows that reached a different leaf somewhere: full ordered sum; others: as before
    moved = np.empty(n, np.int64)
    n_moved = 0
    for i in range(n):
        if changed[i]:
            changed[i] = 0
            moved[n_moved] = i
            n_moved += 1
    out[:] = margin
    for g in prange((n_moved + 3) // 4):
        k = 4 * g
        last = n_moved - 1
        rows_margin(out, moved[k], moved[min(k + 1, last)], moved[min(k + 2, last)],
                    moved[min(k + 3, last)], L, base, tree_offsets, tree_output, scale,
                    divisor, value)
    return n_moved


@njit(cache=True, parallel=True)
def restore_leaves(tops, top_tree, L, order, start, end, preorder, pre_pos, size,
                   tree_offsets):
    """Undo what ``permuted_margin`` left in L and order for the rows under ``tops``."""
    for k in prange(tops.shape[0]):
        top = tops[k]
        t = top_tree[k]
        off = tree_offsets[t]
        p0 = pre_pos[top]
        for p in range(p0 + 1, p0 + size[top]):
            leaf = preorder[p]
            if size[leaf] == 1:
                for pos in range(start[leaf], end[leaf]):
                    r = order[t, pos]
                    if r < 0:
                        order[t, pos] = -1 - r
                        L[-1 - r, t] = leaf - off


class LeafIndex:
    """The rows of X routed once and sorted by leaf, for permuted margins.

    Memory: 8 bytes per (row, tree) pair, the leaf matrix ``L`` (int32, rows x trees) and
    the leaf-sorted row order (int32, trees x rows), e.g. 20 MB for 5,000 rows and 500
    trees; plus a few int64 arrays over the nodes of the ensemble.

    ``X`` is the float array the permutations will be written into (C order); ``scale``
    and ``divisor`` those of ``predict_ensemble`` (``kernels.api._forest_scale``).
    """

    def __init__(self, ens, X, scale, divisor, strict, round32):
        self.ens = ens
        self.scale = np.ascontiguousarray(scale, dtype=np.float64)
        self.divisor = float(divisor)
        self.strict = bool(strict)
        self.round32 = bool(round32)
        self.routing = ens.routing_arrays()
        (self.preorder, self.pre_pos, self.size, self.height, self.low, self.parent,
         self.same_up) = tree_layout(ens.tree_offsets, ens.left, ens.right, ens.feature,
                                     ens.postorder)
        n = X.shape[0]
        self.L = np.empty((n, ens.n_trees), np.int32)
        apply_chunk(X, self.L, ens.tree_offsets, *self.routing, self.strict, self.round32)
        self.order = np.empty((ens.n_trees, n), np.int32)
        self.start = np.empty(ens.n_nodes, np.int64)
        self.end = np.empty(ens.n_nodes, np.int64)
        sort_rows_by_leaf(self.L, ens.tree_offsets, self.pre_pos, self.size, self.order,
                          self.start, self.end)
        # topmost nodes grouped by feature (then by node index: tree order); nodes that
        # no row reaches are left out, they move nothing
        split = ens.left >= 0
        tops = np.flatnonzero(split & (self.same_up < 0) & (self.end > self.start))
        tops = tops[np.argsort(ens.feature[tops], kind="stable")]
        self.tops = tops.astype(np.int64)
        self.top_tree = ens.node_tree[self.tops].astype(np.int64)
        self.top_ptr = np.searchsorted(ens.feature[self.tops], np.arange(ens.n_features + 1))
        self.jabove = np.full(ens.n_nodes, -1, np.int64)
        self.changed = np.zeros(n, np.uint8)
        self.feature = None

    def n_tops(self, j):
        """How many topmost nodes (that rows reach) split on feature j."""
        return int(self.top_ptr[j + 1] - self.top_ptr[j])

    def _tops(self, j):
        a, b = self.top_ptr[j], self.top_ptr[j + 1]
        return self.tops[a:b], self.top_tree[a:b]

    def begin(self, j):
        """Prepare permutations of column j."""
        if self.feature is not None:
            self.finish()
        tops, _ = self._tops(j)
        mark_paths(j, tops, self.preorder, self.pre_pos, self.size, self.parent,
                   self.ens.feature, self.jabove)
        self.feature = j

    def permuted_margin(self, X, margin, out):
        """out := margin of X, where X differs from the indexed rows in column j only
        (the column of ``begin(j)``; ``margin``: the margin of the indexed rows). Returns
        the number of rows whose margin was recomputed."""
        ens, j = self.ens, self.feature
        if j is None:
            raise RuntimeError("call begin(j) first")
        tops, top_tree = self._tops(j)
        return permuted_margin(
            X, j, tops, top_tree, margin, out, self.changed, self.L, self.order,
            self.start, self.end, self.preorder, self.pre_pos, self.size, self.height,
            self.low, self.jabove, self.same_up, ens.base_score, ens.tree_offsets,
            ens.tree_output, self.scale, self.divisor, ens.value, *self.routing,
            self.strict, self.round32)

    def finish(self):
        """Put the original leaves back in L."""
        if self.feature is None:
            return
        tops, top_tree = self._tops(self.feature)
        restore_leaves(tops, top_tree, self.L, self.order, self.start, self.end,
                       self.preorder, self.pre_pos, self.size, self.ens.tree_offsets)
        self.feature = None

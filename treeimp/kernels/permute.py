"""Permutation importance kernels: re-route only the rows a permuted column can move.

Every row is routed once (leaf matrix ``L``, rows x trees, each leaf as its rank among
its tree's leaves in pre-order). Per tree the rows are then sorted by that rank, so the
rows reaching any node form one contiguous range of that tree's row order (the ranges
``lstart:lend`` of its leaves, side by side). A node splitting on feature j with no
ancestor splitting on j (a *topmost* j-node) is reached by the same rows whatever
column j holds: the path down to it never reads j. Under a permutation of column j,
only the rows in the ranges of the topmost j-nodes can change leaf.

Below a topmost j-node, a row leaves its old path only at a j-node (the other nodes
read columns that did not change). So for each leaf under a topmost j-node, its rows'
new values of column j are tested against the j-nodes on the leaf's path (usually one
or two: the chain ``jabove``/``same_up``); a row that stays on the path keeps its leaf,
a row that leaves it at a j-node is walked on from the child it goes to (in batches,
``route.descend``). The numerical j-nodes of a path keep exactly the values of one
interval on it, so every row is first compared with that interval (two comparisons);
only the rows outside it (and NaN, and every row below a categorical or
zero-as-missing j-split) are tested node by node (``route.step``).

Only the rows whose leaf changed in some tree get a new margin, the full ordered sum
over all trees of the terms prediction adds (``route.leaf_term``, tabulated per leaf;
eight rows at a time, each its own chain of additions), every other row keeps the
baseline margin: the result is bitwise the margin of a full re-prediction of the
permuted matrix. When no float64 sum of the terms can round (``exact_sums``: XGBoost's
float32 leaf values), a moved row's margin is instead its baseline margin plus the
changes of the terms of the trees where its leaf changed, gathered per thread while the
rows are walked: the same bits, without the sum over every tree (XGBoost's permutation
kernel took 17% less time on the 500-tree benchmark models).

Use through :class:`treeimp.permutation.leaf_index.LeafIndex`: ``begin(j)``, then
``permuted_margin`` once per permutation of column j, then ``finish()``, which puts the
original leaves back in ``L``.
"""

from __future__ import annotations

import numpy as np
from numba import get_thread_id, njit, prange

from .route import CATEGORICAL, NAN_ZERO_MISSING, descend, feature_value, leaf_term, step


@njit(cache=True)
def tree_layout(tree_offsets, left, right, feature, postorder):
    """Per node (global index): pre-order position, subtree size, subtree height and
    shallowest-leaf depth (levels below the node), parent (-1 at a root), the nearest
    proper ancestor splitting on the same feature (-1 if none: a topmost split on its
    feature; leaves: -1), and the leaves of its subtree: the rank of the first one
    among its tree's leaves in pre-order (a leaf: its own rank) and how many there are.
    Also the pre-order (every tree's nodes, parents before children, left subtree
    first, tree by tree), ``leaf_off`` (leaf ranks of tree t are slots
    leaf_off[t]:leaf_off[t + 1]) and ``leaf_node`` (the node in each slot)."""
    n = left.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    size = np.ones(n, np.int64)
    height = np.zeros(n, np.int64)
    low = np.zeros(n, np.int64)
    n_leaves = np.ones(n, np.int64)
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
        n_leaves[node] = n_leaves[lc] + n_leaves[rc]
    leaf_off = np.zeros(n_trees + 1, np.int64)
    for t in range(n_trees):
        leaf_off[t + 1] = leaf_off[t] + n_leaves[tree_offsets[t]]
    leaf_node = np.empty(leaf_off[n_trees], np.int64)
    first_leaf = np.empty(n, np.int64)
    preorder = np.empty(n, np.int64)
    pre_pos = np.empty(n, np.int64)
    stack = np.empty(n + 1, np.int64)
    k = 0
    for t in range(n_trees):
        stack[0] = tree_offsets[t]
        top = 1
        rank = 0
        while top > 0:
            top -= 1
            node = stack[top]
            preorder[k] = node
            pre_pos[node] = k
            k += 1
            first_leaf[node] = rank  # the next leaf visited is the subtree's first
            if left[node] >= 0:
                stack[top] = right[node]
                stack[top + 1] = left[node]
                top += 2
            else:
                leaf_node[leaf_off[t] + rank] = node
                rank += 1
    same_up = np.full(n, -1, np.int64)
    for node in range(n):
        if left[node] < 0:
            continue
        f = feature[node]
        up = parent[node]
        while up >= 0 and feature[up] != f:
            up = parent[up]
        same_up[node] = up
    return (preorder, pre_pos, size, height, low, parent, same_up, first_leaf, n_leaves,
            leaf_off, leaf_node)


@njit(cache=True, parallel=True)
def leaf_ranks(local, roots, first_leaf, L):
    """L[i, t] := rank of leaf ``local[i, t]`` (node index within tree t)."""
    for i in prange(local.shape[0]):
        for t in range(local.shape[1]):
            L[i, t] = first_leaf[roots[t] + local[i, t]]


@njit(cache=True, parallel=True)
def sort_rows_by_leaf(L, leaf_off, order, lstart, lend):
    """order[t] := the rows sorted by their leaf's rank in tree t (L: leaf ranks;
    ascending row index within a leaf); lstart/lend[slot] := the range of order[t] of
    the rows reaching the leaf in that slot (leaf_off[t] + rank)."""
    n = L.shape[0]
    n_trees = leaf_off.shape[0] - 1
    for t in prange(n_trees):
        g0 = leaf_off[t]
        nl = leaf_off[t + 1] - g0
        first = np.zeros(nl + 1, np.int64)  # first[q] = rows whose leaf ranks below q
        for i in range(n):
            first[L[i, t] + 1] += 1
        for q in range(nl):
            first[q + 1] += first[q]
        for q in range(nl):
            lstart[g0 + q] = first[q]
            lend[g0 + q] = first[q + 1]
        for i in range(n):
            q = L[i, t]
            order[t, first[q]] = i
            first[q] += 1


@njit(cache=True, parallel=True)
def leaf_terms(leaf_node, leaf_off, scale, value):
    """terms[slot, j] := leaf_term(scale of the tree, value, leaf in the slot, j): the
    products prediction adds, computed once."""
    terms = np.empty((leaf_node.shape[0], value.shape[1]))
    for t in prange(leaf_off.shape[0] - 1):
        for g in range(leaf_off[t], leaf_off[t + 1]):
            for j in range(value.shape[1]):
                terms[g, j] = leaf_term(scale[t], value, leaf_node[g], j)
    return terms


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
def rows_margin(out, i0, i1, i2, i3, L, base, leaf_off, tree_output, terms, divisor):
    """out[i] := base + the ordered sum over all trees of the term of row i's leaf
    (scale * leaf value, ``leaf_terms``; leaf ranks from L), divided by ``divisor`` when
    it is not 1, for rows i0..i3 (may repeat): the arithmetic of ``predict_ensemble``
    (routing.py; add_trees_chunk with sign = 1). One output at a time, four rows at
    once: the sums stay in registers."""
    vdim = terms.shape[1]
    for c in range(out.shape[1]):
        a0 = a1 = a2 = a3 = base[c]
        for t in range(L.shape[1]):
            jv = c - tree_output[t]
            if 0 <= jv < vdim:
                g = leaf_off[t]
                a0 += terms[g + L[i0, t], jv]
                a1 += terms[g + L[i1, t], jv]
                a2 += terms[g + L[i2, t], jv]
                a3 += terms[g + L[i3, t], jv]
        if divisor != 1.0:
            a0 /= divisor
            a1 /= divisor
            a2 /= divisor
            a3 /= divisor
        out[i0, c] = a0
        out[i1, c] = a1
        out[i2, c] = a2
        out[i3, c] = a3


@njit(cache=True)
def rows_margin1(out, rows, k, last, L, base, leaf_off, terms1, divisor):
    """``rows_margin`` for a single-output model (``terms1``: the one term of each
    slot, contiguous), for the eight
    rows rows[k], ..., rows[k + 7] (the last one, rows[last], repeated past the end).
    Each row's sum is a chain of dependent additions: eight interleaved chains keep
    the adder busy (one row at a time waits on each addition's latency)."""
    i0 = rows[k]
    i1 = rows[min(k + 1, last)]
    i2 = rows[min(k + 2, last)]
    i3 = rows[min(k + 3, last)]
    i4 = rows[min(k + 4, last)]
    i5 = rows[min(k + 5, last)]
    i6 = rows[min(k + 6, last)]
    i7 = rows[min(k + 7, last)]
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = base[0]
    for t in range(L.shape[1]):
        g = leaf_off[t]
        a0 += terms1[g + L[i0, t]]
        a1 += terms1[g + L[i1, t]]
        a2 += terms1[g + L[i2, t]]
        a3 += terms1[g + L[i3, t]]
        a4 += terms1[g + L[i4, t]]
        a5 += terms1[g + L[i5, t]]
        a6 += terms1[g + L[i6, t]]
        a7 += terms1[g + L[i7, t]]
    if divisor != 1.0:
        a0 /= divisor
        a1 /= divisor
        a2 /= divisor
        a3 /= divisor
        a4 /= divisor
        a5 /= divisor
        a6 /= divisor
        a7 /= divisor
    out[i0, 0] = a0
    out[i1, 0] = a1
    out[i2, 0] = a2
    out[i3, 0] = a3
    out[i4, 0] = a4
    out[i5, 0] = a5
    out[i6, 0] = a6
    out[i7, 0] = a7


EXITS = 64  # rows that left their path, walked on together


@njit(cache=True, inline="always")
def _walk_exits(X, rows, cur, where, old, m, t, L, order, changed, deltas, add_deltas,
                leaf_off, tree_output, terms, height, low, first_leaf, plain, left, right,
                feature, threshold, flags, cat_offset, cat_count, cat_codes, cat_left,
                strict, round32):
    """Walk the m rows on from the nodes ``cur`` they went to, record their new leaves
    in L and mark them (negative entries of the row order, at positions ``where``).
    ``add_deltas``: also add each row's change of tree t's term (new leaf's minus its
    original leaf's, rank ``old``) to the calling thread's ``deltas``."""
    h = 0
    lo = height[cur[0]]
    for q in range(m):
        h = max(h, height[cur[q]])
        lo = min(lo, low[cur[q]])
    descend(X, rows, m, h, lo, plain[t], left, right, feature, threshold, flags, cat_offset,
            cat_count, cat_codes, cat_left, strict, round32, cur)
    tid = get_thread_id() if add_deltas else 0
    for q in range(m):
        r = rows[q]
        new = first_leaf[cur[q]]
        L[r, t] = new
        order[t, where[q]] = -1 - r
        changed[r] = 1
        if add_deltas:
            g = leaf_off[t]
            col = tree_output[t]
            for jv in range(terms.shape[1]):
                deltas[tid, r, col + jv] += terms[g + new, jv] - terms[g + old[q], jv]


@njit(cache=True, inline="always")
def _back_on_leaf(back, back_rank, b, t, L, order):
    """Unmark the b rows at positions ``back`` of the row order, back on their
    original leaves (ranks ``back_rank``)."""
    for q in range(b):
        r = -1 - order[t, back[q]]
        order[t, back[q]] = r
        L[r, t] = back_rank[q]


@njit(cache=True, inline="always")
def _resolve(xj, rows, cur, where, old, m0, m, chain, on_path, c, rank, back, back_rank, b,
             t, L, order, left, right, threshold, flags, cat_offset, cat_count, cat_codes,
             cat_left, strict):
    """Test the candidates rows[m0:m] of one leaf (rank ``rank``; j-nodes ``chain``, the
    path's children ``on_path``) node by node: keep in rows/cur/where/old those that
    leave the path (cur: the child of the highest j-node that sends them the other way,
    old: the leaf's rank), move those that stay and are marked to ``back``. Returns the
    new m and b."""
    k = m0
    for q in range(m0, m):
        r = rows[q]
        x = xj[r]
        exit_to = -1
        for e in range(c):
            go = step(x, chain[e], left, right, threshold, flags, cat_offset, cat_count,
                      cat_codes, cat_left, strict)
            exit_to = go if go != on_path[e] else exit_to
        if exit_to >= 0:
            rows[k] = r
            cur[k] = exit_to
            where[k] = where[q]
            old[k] = rank
            k += 1
        elif order[t, where[q]] < 0:
            back[b] = where[q]
            back_rank[b] = rank
            b += 1
            if b == back.shape[0]:
                _back_on_leaf(back, back_rank, b, t, L, order)
                b = 0
    return k, b


@njit(cache=True, parallel=True)
def permuted_margin(X, column, margin, out, changed, deltas, add_deltas, leaves, layout, sums,
                    routing, strict, round32):
    """out := the margin of X, whose column j differs from the rows' original values,
    given ``margin``, the margin of the original rows. ``column``
    (kernel_inputs.ColumnTops): j, the topmost j-nodes ``tops`` (with their trees
    ``top_tree``); parallel task k takes tops[task_start[k]:task_start[k + 1]]
    (``LeafIndex._tasks``); ``jabove`` as ``mark_paths`` leaves it for j.
    ``leaves`` (kernel_inputs.RowLeaves): order, lstart, lend describe the original
    leaves; ``layout`` (kernel_inputs.LeafLayout), ``sums`` (kernel_inputs.MarginTerms),
    ``routing`` (kernel_inputs.Routing): unpacked here, the inlined helpers take arrays
    (a named tuple passed into an inlined helper slows the walks down). L is left
    holding the leaves of X and the entries of ``order`` of the rows whose leaf changed
    are marked (-1 - row); the next call for the same j, or ``restore_leaves``, undoes
    both. ``changed`` (zeros, one byte per row) is scratch and left zeroed.
    ``add_deltas`` (only when every sum of the margins is exact, ``exact_sums``; divisor
    1): a moved row's margin is its original margin plus the changes of its trees'
    terms, gathered per thread in ``deltas`` (zeros, threads x rows x outputs; left
    zeroed), instead of the full sum over every tree again: bitwise the same number.
    Returns the number of rows whose margin was recomputed."""
    j, tops, top_tree = column.j, column.tops, column.top_tree
    task_start, jabove = column.task_start, column.jabove
    L, order, lstart, lend = leaves.L, leaves.order, leaves.lstart, leaves.lend
    leaf_off, leaf_node, first_leaf = layout.leaf_off, layout.leaf_node, layout.first_leaf
    n_leaves, pre_pos, height = layout.n_leaves, layout.pre_pos, layout.height
    low, same_up = layout.low, layout.same_up
    base, tree_output, terms = sums.base, sums.tree_output, sums.terms
    terms1, divisor = sums.terms1, sums.divisor
    (left, right, feature, threshold, flags, plain, depth, _, cat_offset, cat_count,
     cat_codes, cat_left) = routing
    n = X.shape[0]
    xj = np.empty(n)
    for i in prange(n):
        xj[i] = feature_value(X, i, j, round32)
    # 1. the rows under each topmost j-node, leaf by leaf. Topmost nodes of one tree
    #    have disjoint row ranges, so the tasks write disjoint entries of L and order;
    #    ``changed`` may be set to 1 by several tasks at once (all store the same byte).
    n_tasks = task_start.shape[0] - 1
    deepest = depth.max()
    for task in prange(n_tasks):
        # scratch allocated once per task
        chain = np.empty(deepest, np.int64)  # the j-nodes on a leaf's path, bottom up
        on_path = np.empty(deepest, np.int64)  # and the child the path takes
        rows = np.empty(EXITS, np.int64)
        cur = np.empty(EXITS, np.int64)
        where = np.empty(EXITS, np.int64)
        old = np.empty(EXITS, np.int64)  # the original leaf rank of an exit
        back = np.empty(EXITS, np.int64)  # rows back on their leaf: where, leaf rank
        back_rank = np.empty(EXITS, np.int64)
        for k in range(task_start[task], task_start[task + 1]):
            top = tops[k]
            t = top_tree[k]
            m = 0
            m0 = 0  # rows[m0:m]: candidates of the current leaf, not yet tested
            b = 0
            g0 = leaf_off[t] + first_leaf[top]
            for g in range(g0, g0 + n_leaves[top]):
                if lstart[g] == lend[g]:
                    continue
                leaf = leaf_node[g]
                # the j-nodes of the path (bottom up), the child the path takes at each,
                # and the values that stay on the path at every one of them: lo..hi,
                # (x >= lo and x < hi with strict splits, x > lo and x <= hi otherwise);
                # any other value (NaN, a categorical or zero-as-missing split) is tested
                # node by node
                c = 0
                lo = -np.inf
                hi = np.inf
                v = jabove[leaf]
                while v >= 0:
                    chain[c] = v
                    goes_left = pre_pos[leaf] < pre_pos[right[v]]
                    on_path[c] = left[v] if goes_left else right[v]
                    if flags[v] & (CATEGORICAL | NAN_ZERO_MISSING):
                        lo = np.inf
                        hi = -np.inf
                    elif goes_left:
                        hi = min(hi, threshold[v])
                    else:
                        lo = max(lo, threshold[v])
                    c += 1
                    v = same_up[v]
                rank = g - leaf_off[t]
                # whether a row is a candidate is unpredictable: the loop appends to the
                # buffers with selects rather than branches
                for pos in range(lstart[g], lend[g]):
                    entry = order[t, pos]
                    r = entry ^ (entry >> 31)  # a marked entry holds -1 - row
                    x = xj[r]
                    stays = ((x >= lo) & (x < hi)) if strict else ((x > lo) & (x <= hi))
                    rows[m] = r
                    where[m] = pos
                    m += not stays
                    back[b] = pos
                    back_rank[b] = rank
                    b += (entry < 0) & stays  # left its leaf in the last call
                    if b == EXITS:
                        _back_on_leaf(back, back_rank, b, t, L, order)
                        b = 0
                    if m == EXITS:
                        m, b = _resolve(xj, rows, cur, where, old, m0, m, chain, on_path, c,
                                        rank, back, back_rank, b, t, L, order, left, right,
                                        threshold, flags, cat_offset, cat_count, cat_codes,
                                        cat_left, strict)
                        if m == EXITS:
                            _walk_exits(X, rows, cur, where, old, m, t, L, order, changed,
                                        deltas, add_deltas, leaf_off, tree_output, terms,
                                        height, low, first_leaf, plain, left, right,
                                        feature, threshold, flags, cat_offset, cat_count,
                                        cat_codes, cat_left, strict, round32)
                            m = 0
                        m0 = m
                m, b = _resolve(xj, rows, cur, where, old, m0, m, chain, on_path, c, rank,
                                back, back_rank, b, t, L, order, left, right, threshold,
                                flags, cat_offset, cat_count, cat_codes, cat_left, strict)
                m0 = m
            if m > 0:
                _walk_exits(X, rows, cur, where, old, m, t, L, order, changed, deltas,
                            add_deltas, leaf_off, tree_output, terms, height, low,
                            first_leaf, plain, left, right, feature, threshold, flags,
                            cat_offset, cat_count, cat_codes, cat_left, strict, round32)
            _back_on_leaf(back, back_rank, b, t, L, order)
    # 2. rows that reached a different leaf somewhere: full ordered sum (or the changes
    #    added to the original margin); others: as before
    moved = np.empty(n, np.int64)
    n_moved = 0
    for i in range(n):
        if changed[i]:
            changed[i] = 0
            moved[n_moved] = i
            n_moved += 1
    out[:] = margin
    if add_deltas:  # exact sums: the original margin plus the changes, in any order
        for q in prange(n_moved):
            i = moved[q]
            for c in range(out.shape[1]):
                a = margin[i, c]
                for tid in range(deltas.shape[0]):
                    a += deltas[tid, i, c]
                    deltas[tid, i, c] = 0.0
                out[i, c] = a
    elif out.shape[1] == 1:
        for g in prange((n_moved + 7) // 8):
            rows_margin1(out, moved, 8 * g, n_moved - 1, L, base, leaf_off, terms1,
                         divisor)
    else:
        for g in prange((n_moved + 3) // 4):
            k = 4 * g
            last = n_moved - 1
            rows_margin(out, moved[k], moved[min(k + 1, last)], moved[min(k + 2, last)],
                        moved[min(k + 3, last)], L, base, leaf_off, tree_output, terms,
                        divisor)
    return n_moved


@njit(cache=True, parallel=True)
def all_margins(out, L, sums):
    """out := the margin of every row, from its leaves L (the arithmetic of
    ``predict_ensemble``, as ``permuted_margin`` recomputes a row); ``sums``:
    kernel_inputs.MarginTerms."""
    base, leaf_off, tree_output = sums.base, sums.leaf_off, sums.tree_output
    terms, terms1, divisor = sums.terms, sums.terms1, sums.divisor
    n = L.shape[0]
    if out.shape[1] == 1:
        rows = np.arange(n)
        for g in prange((n + 7) // 8):
            rows_margin1(out, rows, 8 * g, n - 1, L, base, leaf_off, terms1, divisor)
    else:
        for g in prange((n + 3) // 4):
            k = 4 * g
            rows_margin(out, k, min(k + 1, n - 1), min(k + 2, n - 1), min(k + 3, n - 1), L,
                        base, leaf_off, tree_output, terms, divisor)


@njit(cache=True, parallel=True)
def restore_leaves(column, leaves, layout):
    """Undo what ``permuted_margin`` left in L and order for the rows under the topmost
    nodes of ``column`` (kernel_inputs.ColumnTops; ``leaves``: RowLeaves, ``layout``:
    LeafLayout)."""
    tops, top_tree = column.tops, column.top_tree
    L, order, lstart, lend = leaves.L, leaves.order, leaves.lstart, leaves.lend
    leaf_off, first_leaf, n_leaves = layout.leaf_off, layout.first_leaf, layout.n_leaves
    for k in prange(tops.shape[0]):
        t = top_tree[k]
        g0 = leaf_off[t] + first_leaf[tops[k]]
        for g in range(g0, g0 + n_leaves[tops[k]]):
            for pos in range(lstart[g], lend[g]):
                r = order[t, pos]
                if r < 0:
                    order[t, pos] = -1 - r
                    L[-1 - r, t] = g - leaf_off[t]

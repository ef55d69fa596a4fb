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

Use through :class:`LeafIndex`: ``begin(j)``, then ``permuted_margin`` once per
permutation of column j, then ``finish()``, which puts the original leaves back in ``L``.
"""

from __future__ import annotations

import numpy as np
from numba import get_num_threads, get_thread_id, njit, prange

from .route import (
    CATEGORICAL,
    NAN_ZERO_MISSING,
    apply_chunk,
    descend,
    feature_value,
    leaf_term,
    step,
)


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
                leaf_off, tree_output, terms, height, low, first_leaf, nodes, cat_offset,
                cat_count, cat_codes, cat_left, strict, round32):
    """Walk the m rows on from the nodes ``cur`` they went to, record their new leaves
    in L and mark them (negative entries of the row order, at positions ``where``).
    ``add_deltas``: also add each row's change of tree t's term (new leaf's minus its
    original leaf's, rank ``old``) to the calling thread's ``deltas``."""
    h = 0
    lo = height[cur[0]]
    for q in range(m):
        h = max(h, height[cur[q]])
        lo = min(lo, low[cur[q]])
    descend(X, rows, m, h, lo, nodes, cat_offset, cat_count, cat_codes, cat_left, strict,
            round32, cur)
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
             t, L, order, nodes, cat_offset, cat_count, cat_codes, cat_left, strict):
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
            go = step(x, chain[e], nodes, cat_offset, cat_count, cat_codes, cat_left,
                      strict)
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
def permuted_margin(X, j, tops, top_tree, task_start, margin, out, changed, deltas, add_deltas,
                    L, order, lstart, lend, leaf_off, leaf_node, first_leaf, n_leaves,
                    pre_pos, height, low, jabove, same_up, base, tree_output, terms, terms1,
                    divisor, nodes, depth, min_depth, cat_offset, cat_count, cat_codes,
                    cat_left, strict, round32):
    """out := the margin of X, whose column j differs from the rows' original values,
    given ``margin``, the margin of the original rows. ``tops`` are the topmost j-nodes
    (with their trees ``top_tree``); parallel task k takes
    tops[task_start[k]:task_start[k + 1]] (``LeafIndex._tasks``); ``jabove`` as
    ``mark_paths`` leaves it for j.
    order, lstart, lend describe the original leaves. L is left holding the leaves of X
    and the entries of ``order`` of the rows whose leaf changed are marked (-1 - row);
    the next call for the same j, or ``restore_leaves``, undoes both. ``changed`` (zeros,
    one byte per row) is scratch and left zeroed. ``add_deltas`` (only when every sum of
    the margins is exact, ``exact_sums``; divisor 1): a moved row's margin is its
    original margin plus the changes of its trees' terms, gathered per thread in
    ``deltas`` (zeros, threads x rows x outputs; left zeroed), instead of the full sum
    over every tree again: bitwise the same number. Returns the number of rows whose
    margin was recomputed."""
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
                    nd = nodes[v]
                    goes_left = pre_pos[leaf] < pre_pos[nd.right]
                    on_path[c] = nd.left if goes_left else nd.right
                    if nd.flags & (CATEGORICAL | NAN_ZERO_MISSING):
                        lo = np.inf
                        hi = -np.inf
                    elif goes_left:
                        hi = min(hi, nd.threshold)
                    else:
                        lo = max(lo, nd.threshold)
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
                                        rank, back, back_rank, b, t, L, order, nodes,
                                        cat_offset, cat_count, cat_codes, cat_left, strict)
                        if m == EXITS:
                            _walk_exits(X, rows, cur, where, old, m, t, L, order, changed,
                                        deltas, add_deltas, leaf_off, tree_output, terms,
                                        height, low, first_leaf, nodes, cat_offset,
                                        cat_count, cat_codes, cat_left, strict, round32)
                            m = 0
                        m0 = m
                m, b = _resolve(xj, rows, cur, where, old, m0, m, chain, on_path, c, rank,
                                back, back_rank, b, t, L, order, nodes, cat_offset,
                                cat_count, cat_codes, cat_left, strict)
                m0 = m
            if m > 0:
                _walk_exits(X, rows, cur, where, old, m, t, L, order, changed, deltas,
                            add_deltas, leaf_off, tree_output, terms, height, low,
                            first_leaf, nodes, cat_offset, cat_count, cat_codes, cat_left,
                            strict, round32)
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
def all_margins(out, L, base, leaf_off, tree_output, terms, terms1, divisor):
    """out := the margin of every row, from its leaves L (the arithmetic of
    ``predict_ensemble``, as ``permuted_margin`` recomputes a row)."""
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
def restore_leaves(tops, top_tree, L, order, lstart, lend, leaf_off, first_leaf,
                   n_leaves):
    """Undo what ``permuted_margin`` left in L and order for the rows under ``tops``."""
    for k in prange(tops.shape[0]):
        t = top_tree[k]
        g0 = leaf_off[t] + first_leaf[tops[k]]
        for g in range(g0, g0 + n_leaves[tops[k]]):
            for pos in range(lstart[g], lend[g]):
                r = order[t, pos]
                if r < 0:
                    order[t, pos] = -1 - r
                    L[-1 - r, t] = g - leaf_off[t]


def exact_sums(base, terms, leaf_off):
    """Whether float64 adds every margin up exactly, whatever the order.

    Let 2^q be the lowest set bit over all leaf terms and the base (each is an integer
    multiple of 2^q) and S = |base| + the sum over trees of the tree's largest |term|.
    A margin's partial sums (in any order, old and new leaves mixed) are at most S in
    magnitude, and the changes ``permuted_margin`` gathers (new minus old terms, summed
    per thread) at most 2 S. If 2 S < 2^(q + 53), every one of them is an integer
    multiple of 2^q below 2^53 times it: representable, so no addition rounds. XGBoost's
    leaf values are float32 numbers of a few binary orders of magnitude and pass (the
    500-tree benchmark models: q = -43 and -45, S about 80); float64 leaf values (scikit-learn,
    LightGBM) use all 53 bits and fail."""
    values = np.concatenate([np.ravel(terms), np.ravel(base)])
    values = np.abs(values[values != 0.0])
    if values.size == 0:
        return True
    if not np.all(np.isfinite(values)):
        return False
    mantissa, exponent = np.frexp(values)  # values = mantissa * 2**exponent
    integer = (mantissa * 2.0**53).astype(np.int64)  # exact: 53 bits
    lowest = np.log2((integer & -integer).astype(np.float64)).astype(np.int64)
    q = int((exponent.astype(np.int64) - 53 + lowest).min())
    per_tree = np.maximum.reduceat(np.abs(terms).max(axis=1), leaf_off[:-1])
    bound = np.abs(base).max(initial=0.0) + per_tree.sum()
    # (1 + 1e-9): room for the rounding of the bound itself
    return bool(bound * (1.0 + 1e-9) < 2.0 ** (q + 52))


class LeafIndex:
    """The rows of X routed once and sorted by leaf, for permuted margins.

    Memory: at most 8 bytes per (row, tree) pair: the leaf-sorted row order (int32,
    trees x rows) and the leaf matrix ``L`` (rows x trees) of each row's leaf rank
    within its tree, uint8 when no tree has more than 256 leaves, uint16 up to 65,536,
    else int32 (5 bytes per pair for 500 XGBoost trees of depth 6, 12.5 MB for 5,000
    rows); plus a few int64 arrays over the nodes of the ensemble, and with exact sums
    (``add_deltas``) 8 bytes per row, output and thread for the gathered changes.

    ``X`` is the float array the permutations will be written into (C order); ``scale``
    and ``divisor`` those of ``predict_ensemble`` (``routing._forest_scale``).
    """

    def __init__(self, ens, X, scale, divisor, strict, round32, *, leaf_dtype=None):
        self.ens = ens
        self.divisor = float(divisor)
        self.strict = bool(strict)
        self.round32 = bool(round32)
        self.routing = ens.routing_arrays()
        (self.preorder, self.pre_pos, self.size, self.height, self.low, self.parent,
         self.same_up, self.first_leaf, self.n_leaves, self.leaf_off,
         self.leaf_node) = tree_layout(ens.tree_offsets, ens.left, ens.right, ens.feature,
                                       ens.postorder)
        self.terms = leaf_terms(self.leaf_node, self.leaf_off,
                                np.ascontiguousarray(scale, dtype=np.float64), ens.value)
        self.terms1 = np.ascontiguousarray(self.terms[:, 0])  # single output: contiguous
        n, T = X.shape[0], ens.n_trees
        most = int(np.diff(self.leaf_off).max())
        dtype = np.uint8 if most <= 2**8 else np.uint16 if most <= 2**16 else np.int32
        dtype = dtype if leaf_dtype is None else leaf_dtype  # (tests: a wider one)
        self.L = np.empty((n, T), dtype)
        roots = ens.tree_offsets[:-1]
        block = max(1, 2**22 // T)  # rows routed at a time (16 MB of node indices)
        for r0 in range(0, n, block):
            local = np.empty((min(n, r0 + block) - r0, T), np.int32)
            apply_chunk(X[r0:r0 + block], local, ens.tree_offsets, *self.routing,
                        self.strict, self.round32)
            leaf_ranks(local, roots, self.first_leaf, self.L[r0:r0 + block])
        self.order = np.empty((T, n), np.int32)
        self.lstart = np.empty(self.leaf_node.shape[0], np.int64)
        self.lend = np.empty(self.leaf_node.shape[0], np.int64)
        sort_rows_by_leaf(self.L, self.leaf_off, self.order, self.lstart, self.lend)
        # topmost nodes grouped by feature (then by node index: tree order); nodes that
        # no row reaches are left out, they move nothing
        tree = ens.node_tree
        first = self.leaf_off[tree] + self.first_leaf
        reached = self.lend[first + self.n_leaves - 1] > self.lstart[first]
        tops = np.flatnonzero((ens.left >= 0) & (self.same_up < 0) & reached)
        tops = tops[np.argsort(ens.feature[tops], kind="stable")]
        self.tops = tops.astype(np.int64)
        self.top_tree = tree[self.tops].astype(np.int64)
        self.top_ptr = np.searchsorted(ens.feature[self.tops], np.arange(ens.n_features + 1))
        self.jabove = np.full(ens.n_nodes, -1, np.int64)
        self.changed = np.zeros(n, np.uint8)
        # exact sums (no divisor): a moved row's margin is its original margin plus the
        # changes of its terms, gathered per thread (see permuted_margin)
        self.add_deltas = self.divisor == 1.0 and exact_sums(ens.base_score, self.terms,
                                                             self.leaf_off)
        self.deltas = np.zeros((0, n, ens.n_outputs))
        self.feature = None

    def margin(self):
        """The raw margin of the indexed rows (n_rows, n_outputs), bitwise
        ``predict_ensemble``'s (the leaves of L, each tree's term added in tree order)."""
        out = np.empty((self.L.shape[0], self.ens.n_outputs))
        all_margins(out, self.L, self.ens.base_score, self.leaf_off, self.ens.tree_output,
                    self.terms, self.terms1, self.divisor)
        return out

    def leaves(self):
        """The leaf matrix as ``TreeEnsemble.apply`` gives it (node index in its tree)."""
        slots = self.L.astype(np.int64) + self.leaf_off[:-1]
        return (self.leaf_node[slots] - self.ens.tree_offsets[:-1]).astype(np.int32)

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
        self.task_start = self._tasks(j)

    def _tasks(self, j):
        """Bounds of 16 tasks per thread over the topmost j-nodes, of about equal rows
        under them: numba gives each thread an equal run of consecutive tasks."""
        tops, top_tree = self._tops(j)
        g0 = self.leaf_off[top_tree] + self.first_leaf[tops]
        rows = self.lend[g0 + self.n_leaves[tops] - 1] - self.lstart[g0]
        # + 1: a top costs something; cum then strictly increases, so the bounds rise
        # from 0 (cum[0] = 0) to tops.size (the last target is cum[-1] itself)
        cum = np.concatenate([[0], np.cumsum(rows + 1)])
        n_tasks = max(1, min(tops.size, 16 * get_num_threads()))
        bounds = np.searchsorted(cum, np.linspace(0, cum[-1], n_tasks + 1), side="left")
        return bounds.astype(np.int64)

    def permuted_margin(self, X, margin, out):
        """out := margin of X, where X differs from the indexed rows in column j only
        (the column of ``begin(j)``; ``margin``: the margin of the indexed rows). Returns
        the number of rows whose margin was recomputed."""
        ens, j = self.ens, self.feature
        if j is None:
            raise RuntimeError("call begin(j) first")
        tops, top_tree = self._tops(j)
        threads = get_num_threads()
        if self.add_deltas and self.deltas.shape[0] < threads:
            self.deltas = np.zeros((threads, self.L.shape[0], ens.n_outputs))
        return permuted_margin(
            X, j, tops, top_tree, self.task_start, margin, out, self.changed, self.deltas,
            self.add_deltas, self.L, self.order, self.lstart, self.lend, self.leaf_off,
            self.leaf_node, self.first_leaf, self.n_leaves, self.pre_pos, self.height, self.low,
            self.jabove, self.same_up, ens.base_score, ens.tree_output, self.terms,
            self.terms1, self.divisor, *self.routing, self.strict, self.round32)

    def finish(self):
        """Put the original leaves back in L."""
        if self.feature is None:
            return
        tops, top_tree = self._tops(self.feature)
        restore_leaves(tops, top_tree, self.L, self.order, self.lstart, self.lend,
                       self.leaf_off, self.first_leaf, self.n_leaves)
        self.feature = None

"""Per-node statistics of evaluation rows, for the forest targets (y or one-hot y).

The kernels accumulate at the leaves only, in ``stats`` (n_leaves, n_blocks, 2 + C): per
leaf slot (``TreeEnsemble.leaf_slots``) and row block the weighted row count n', the
weighted squared norm Q' = sum w |z|^2 and the weighted target sums S' = sum w z. For
one-hot class targets (``one_hot``) the last axis is C, the class sums S' alone: each
row adds its weight to its own class only, n' is the sum of the class sums and Q' = n'
(no class formula reads Q'). A row's update is one run of neighbouring cells. Trees
run in parallel and each tree owns its leaf slots, so no two threads ever write the
same cell and no per-thread buffers are needed.

Internal nodes are sums of their leaves: ``propagate_up`` fills them in the node
planes (2 + C, n_nodes, n_blocks) that ``drivers.node_planes`` lays the leaf sums out
in, and for standard errors turns the blocks into leave-one-block-out replicates with
the total in one spare last block (``kernels.formulas.leaf_split_sums`` does the same
tree by tree without building those planes).
"""

import numpy as np
from numba import njit, prange

from .route import BATCH, walk_batch, walk_plain

# rows streamed past every tree at a time: their data stays in cache while a tree's
# nodes are read once per chunk (100 deep trees, 50k rows: 4096 -> 16384 rows took the
# out-of-bag pass from 1.6x to 1.4x predict_proba)
ROW_CHUNK = 16384


@njit(cache=True, nogil=True)
def forest_leaf_stats(X, row0, rows_in, inbag_bits, use_inbag, one_hot, stats,
                      tree_offsets, tree_output, routing, strict, round32, slot, t0, t1,
                      plain_walk, batch_walk):
    """Accumulate rows ``row0 .. row0 + len(X)`` of the call into the leaves they reach
    in trees t0 .. t1 - 1 (``stats`` (n_leaves, n_blocks, D), ``slot`` (n_nodes,) every
    leaf's slot).

    ``rows_in`` (kernel_inputs.RowInputs): target Z, weights w, block and global
    position pos, indexed by the call's row number r = row0 + i (``w`` may hold a
    single weight that applies to every row). With ``use_inbag``, bit ``p`` of
    ``inbag_bits[t]`` (little bit order) marks the row at global position ``p`` as
    in-bag for tree ``t``: such rows are skipped (out-of-bag evaluation). The caller
    runs ranges of trees in parallel threads (the kernel releases the GIL); each tree
    owns its leaf slots. ``plain_walk``, ``batch_walk``: one True, the other None:
    ``route.walk_plain`` when no tree has a node in ``route.NOT_PLAIN``, else
    ``route.walk_batch``; numba drops the code under ``if <argument> is not None`` for
    a None argument before typing it (a bool argument's branches would be compiled), so
    that the kernel is compiled with one walk.
    """
    Z, w, block, pos = rows_in.target, rows_in.w, rows_in.block, rows_in.pos
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    s0 = 0 if one_hot else 2  # the first S' term
    C = stats.shape[2] - s0
    last_w = w.shape[0] - 1
    rows = np.empty(BATCH, np.int64)
    leaves = np.empty(BATCH, np.int64)
    n = X.shape[0]
    # the loops over chunks and trees in this function, not around a call of a per-tree
    # function: numba compiles a called function once more into its caller
    for c0 in range(0, n, ROW_CHUNK):
        c1 = min(n, c0 + ROW_CHUNK)
        for t in range(t0, t1):
            root = tree_offsets[t]
            col = tree_output[t]
            m = 0
            for i in range(c0, c1 + 1):
                if i < c1:
                    r = row0 + i
                    if use_inbag:
                        p = pos[r]
                        if (inbag_bits[t, p >> 3] >> (p & 7)) & 1:
                            continue
                    if w[min(r, last_w)] == 0.0:
                        continue
                    rows[m] = i
                    m += 1
                    if m < BATCH:
                        continue
                if m == 0:
                    continue
                if plain_walk is not None:
                    walk_plain(X, rows, m, root, depth[t], min_depth[t], left, right,
                               feature, threshold, flags, strict, round32, leaves)
                if batch_walk is not None:
                    walk_batch(X, rows, m, root, depth[t], min_depth[t], plain[t], left,
                               right, feature, threshold, flags, cat_offset, cat_count,
                               cat_codes, cat_left, strict, round32, leaves)
                for q in range(m):
                    # unsigned indices: no negative-index wraparound arithmetic
                    r = row0 + rows[q]
                    wi = w[min(r, last_w)]
                    r = np.uint64(r)
                    at = np.uint64(slot[np.uint64(leaves[q])])
                    b = np.uint64(block[r])
                    if one_hot:  # a single nonzero z: one update per row and tree
                        for j in range(C):
                            z = Z[r, col + j]
                            if z != 0.0:
                                stats[at, b, j] += wi * z
                        continue
                    sq = 0.0
                    for j in range(C):
                        z = Z[r, col + j]
                        stats[at, b, s0 + j] += wi * z
                        sq += z * z
                    stats[at, b, 0] += wi
                    stats[at, b, 1] += wi * sq
                m = 0


@njit(cache=True, parallel=True)
def propagate_up(order, tree_offsets, left, right, stats, with_total):
    """stats[internal] := stats[left child] + stats[right child], children first.

    ``order`` is the post-order tree by tree, so tree t's nodes are its entries
    tree_offsets[t]:tree_offsets[t + 1]; trees run in parallel.

    ``with_total``: ``stats`` has one block more than the rows were assigned to (the
    last, B, left at zero by the accumulation). Each tree then also moves to the
    leave-one-block-out form while its statistics are in cache: stats[j, node, B] :=
    the sum over blocks b < B, and stats[j, node, b] := that sum minus block b's (the
    jackknife replicates), so one pass of a formula over all B + 1 blocks gives the
    replicates and the full-data value together."""
    n_sum = stats.shape[2] - 1 if with_total else stats.shape[2]
    for t in prange(tree_offsets.shape[0] - 1):
        for k in range(tree_offsets[t], tree_offsets[t + 1]):
            node = order[k]
            lc = left[node]
            if lc < 0:
                continue
            rc = right[node]
            for j in range(stats.shape[0]):
                for b in range(n_sum):
                    stats[j, node, b] = stats[j, lc, b] + stats[j, rc, b]
        if not with_total:
            continue
        for j in range(stats.shape[0]):
            plane = stats[j]
            for node in range(tree_offsets[t], tree_offsets[t + 1]):
                total_and_complement(plane, node, n_sum)


@njit(cache=True, inline="always")
def total_and_complement(plane, i, B):
    """plane[i, B] := t = the sum over b < B of plane[i, b]; plane[i, b] := t - plane[i, b]."""
    t = 0.0
    for b in range(B):
        t += plane[i, b]
    for b in range(B):
        plane[i, b] = t - plane[i, b]
    plane[i, B] = t

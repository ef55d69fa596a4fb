"""How many in-bag rows of X reach every node of a bagged forest, to compare with the
number of distinct in-bag rows each node held at fit time (scikit-learn's
``tree_.n_node_samples``): equal counts at every node are what the training rows in the
training order give, so a wrong order or wrong rows show up as a node that disagrees.
"""

import numpy as np
from numba import njit, prange

from .forest_stats import ROW_CHUNK
from .route import BATCH, walk_batch


@njit(cache=True, parallel=True)
def inbag_leaf_counts(X, row0, inbag_bits, tree_offsets, routing, strict, round32, counts):
    """counts[leaf] += 1 for every row ``row0 + i`` (row i of X, at that position of the
    training set) that is in-bag for the leaf's tree (bit ``row0 + i`` of
    ``inbag_bits[t]``, little bit order): each in-bag row once, however often it was
    drawn. Trees run in parallel; each tree owns its leaves' cells."""
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    for c0 in range(0, n, ROW_CHUNK):
        c1 = min(n, c0 + ROW_CHUNK)
        for t in prange(n_trees):
            root = tree_offsets[t]
            rows = np.empty(BATCH, np.int64)
            leaves = np.empty(BATCH, np.int64)
            m = 0
            for i in range(c0, c1 + 1):
                if i < c1:
                    p = row0 + i
                    if not (inbag_bits[t, p >> 3] >> (p & 7)) & 1:
                        continue
                    rows[m] = i
                    m += 1
                    if m < BATCH:
                        continue
                if m == 0:
                    continue
                walk_batch(X, rows, m, root, depth[t], min_depth[t], plain[t], left, right,
                           feature, threshold, flags, cat_offset, cat_count, cat_codes,
                           cat_left, strict, round32, leaves)
                for q in range(m):
                    counts[np.uint64(leaves[q])] += 1
                m = 0


@njit(cache=True, parallel=True)
def first_count_mismatch(order, tree_offsets, left, right, counts, expected, out):
    """Sum the leaf ``counts`` up every tree (``order``: post-order, tree by tree; ``left``,
    ``right``: children, negative at leaves), in place, and set out[t] to the first node
    of tree t (in node order, local to the tree) whose count differs from ``expected``;
    -1 when every node agrees, -2 when the root already differs (the tree's in-bag rows
    are not the distinct rows its nodes counted, e.g. rows of zero sample weight, which
    scikit-learn leaves out of its trees, or rows drawn several times and passed as
    copies: such a tree cannot be checked)."""
    for t in prange(tree_offsets.shape[0] - 1):
        for k in range(tree_offsets[t], tree_offsets[t + 1]):
            node = order[k]
            lc = left[node]
            if lc < 0:
                continue
            counts[node] = counts[lc] + counts[right[node]]
        root = tree_offsets[t]
        out[t] = -1
        if counts[root] != expected[root]:
            out[t] = -2
            continue
        for node in range(root, tree_offsets[t + 1]):
            if counts[node] != expected[node]:
                out[t] = node - root
                break

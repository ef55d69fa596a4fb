"""Routing: push rows down trees of the normal form (see treeimp/ensemble.py).

``find_leaf`` is the single place that knows how a node sends a row left or right;
every other kernel (prediction, node statistics, staged gradients) calls it.
"""

import numpy as np
from numba import njit, prange

# LightGBM's kZeroThreshold (a float32 constant compared in float64)
ZERO_THRESHOLD = float(np.float32(1e-35))
_MAX_CODE = 2.0**31


# bits of a node record's ``flags``
MISSING_LEFT = 1
NAN_AS_ZERO = 2
NAN_ZERO_MISSING = 4
CATEGORICAL = 8
CATEGORY_DEFAULT_LEFT = 16
CATEGORY_EXACT = 32  # a non-integer value is an unlisted code
CATEGORY_NEGATIVE_UNLISTED = 64  # a negative value is an unlisted code (not missing)

NODE_DTYPE = np.dtype([("left", np.int32), ("right", np.int32), ("feature", np.int32),
                       ("flags", np.uint8), ("threshold", np.float64)], align=True)


@njit(cache=True, inline="always")
def find_leaf(X, i, node, nodes, cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """Global index of the leaf that row ``i`` of ``X`` reaches from ``node``.

    ``nodes`` is the ensemble's record array (one 24-byte record per node, so a visit
    touches one cache line); categorical splits look their codes up in the flat arrays.
    """
    while nodes[node].left >= 0:
        nd = nodes[node]
        x = np.float64(X[i, nd.feature])
        if round32:
            x = np.float64(np.float32(x))
        flags = nd.flags
        go_left = False
        if flags & CATEGORICAL:
            # the code is int(x); with NAN_AS_ZERO (LightGBM) x in (-1, 0) truncates to
            # code 0, otherwise any x < 0 is negative: missing (HistGradientBoosting) or,
            # with CATEGORY_NEGATIVE_UNLISTED (XGBoost), an unlisted code
            negative = x <= -1.0 if flags & NAN_AS_ZERO else x < 0.0
            if x != x or (negative and not flags & CATEGORY_NEGATIVE_UNLISTED):
                go_left = (flags & MISSING_LEFT) != 0
            elif negative:
                go_left = (flags & CATEGORY_DEFAULT_LEFT) != 0
            else:
                go_left = (flags & CATEGORY_DEFAULT_LEFT) != 0
                if x < _MAX_CODE and not (flags & CATEGORY_EXACT and x != np.floor(x)):
                    code = np.int64(x)
                    lo = cat_offset[node]
                    hi = lo + cat_count[node]
                    while lo < hi:
                        mid = (lo + hi) >> 1
                        c = cat_codes[mid]
                        if c == code:
                            go_left = cat_left[mid]
                            break
                        elif c < code:
                            lo = mid + 1
                        else:
                            hi = mid
        else:
            missing = False
            if x != x:
                if flags & NAN_AS_ZERO:
                    x = 0.0
                else:
                    missing = True
            elif flags & NAN_ZERO_MISSING and -ZERO_THRESHOLD <= x <= ZERO_THRESHOLD:
                missing = True
            if missing:
                go_left = (flags & MISSING_LEFT) != 0
            elif strict:
                go_left = x < nd.threshold
            else:
                go_left = x <= nd.threshold
        node = nd.left if go_left else nd.right
    return node


ROW_BLOCK = 512


@njit(cache=True, parallel=True)
def predict_chunk(X, out, tree_offsets, tree_output, tree_scale, value,
                  nodes, cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """out[i, :] += sum over trees of scale * leaf value (rows in parallel blocks)."""
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    vdim = value.shape[1]
    n_blocks = (n + ROW_BLOCK - 1) // ROW_BLOCK
    for b in prange(n_blocks):
        r0 = b * ROW_BLOCK
        r1 = min(n, r0 + ROW_BLOCK)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            s = tree_scale[t]
            for i in range(r0, r1):
                leaf = find_leaf(X, i, root, nodes, cat_offset, cat_count, cat_codes,
                                 cat_left, strict, round32)
                for j in range(vdim):
                    out[i, col + j] += s * value[leaf, j]


@njit(cache=True, parallel=True)
def apply_chunk(X, out, tree_offsets,
                nodes, cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """out[i, t] = leaf reached by row i in tree t, as a node index local to the tree."""
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_blocks = (n + ROW_BLOCK - 1) // ROW_BLOCK
    for b in prange(n_blocks):
        r0 = b * ROW_BLOCK
        r1 = min(n, r0 + ROW_BLOCK)
        for t in range(n_trees):
            root = tree_offsets[t]
            for i in range(r0, r1):
                leaf = find_leaf(X, i, root, nodes, cat_offset, cat_count, cat_codes,
                                 cat_left, strict, round32)
                out[i, t] = leaf - root


@njit(cache=True, parallel=True)
def predict_trees_chunk(X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                        nodes, cat_offset, cat_count, cat_codes, cat_left, strict,
                        round32):
    """out[i, :] += sign * (sum over the listed trees of scale * leaf value)."""
    n = X.shape[0]
    vdim = value.shape[1]
    n_blocks = (n + ROW_BLOCK - 1) // ROW_BLOCK
    for b in prange(n_blocks):
        r0 = b * ROW_BLOCK
        r1 = min(n, r0 + ROW_BLOCK)
        for k in range(trees.shape[0]):
            t = trees[k]
            root = tree_offsets[t]
            col = tree_output[t]
            s = sign * tree_scale[t]
            for i in range(r0, r1):
                leaf = find_leaf(X, i, root, nodes, cat_offset, cat_count, cat_codes,
                                 cat_left, strict, round32)
                for j in range(vdim):
                    out[i, col + j] += s * value[leaf, j]

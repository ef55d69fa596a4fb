"""Routing: push rows down trees of the normal form (see treeimp/ensemble.py).

``find_leaf`` is the single place that knows how a node sends a row left or right;
every other kernel (prediction, node statistics, staged gradients) calls it.
"""

import numpy as np
from numba import njit, prange

# LightGBM's kZeroThreshold (a float32 constant compared in float64)
ZERO_THRESHOLD = float(np.float32(1e-35))
_MAX_CODE = 2.0**31


@njit(cache=True, inline="always")
def find_leaf(X, i, node, left, right, feature, threshold, missing_left, nan_mode,
              is_cat, cat_offset, cat_count, cat_default_left, cat_codes, cat_left,
              strict, round32):
    """Global index of the leaf that row ``i`` of ``X`` reaches from ``node``."""
    while left[node] >= 0:
        x = np.float64(X[i, feature[node]])
        if round32:
            x = np.float64(np.float32(x))
        go_left = False
        if is_cat[node]:
            if x != x or x < 0.0:
                go_left = missing_left[node]
            elif x >= _MAX_CODE:
                go_left = cat_default_left[node]
            else:
                code = np.int64(x)
                lo = cat_offset[node]
                hi = lo + cat_count[node]
                go_left = cat_default_left[node]
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
            mode = nan_mode[node]
            missing = False
            if x != x:
                if mode == 1:
                    x = 0.0
                else:
                    missing = True
            if mode == 2 and -ZERO_THRESHOLD <= x <= ZERO_THRESHOLD:
                missing = True
            if missing:
                go_left = missing_left[node]
            elif strict:
                go_left = x < threshold[node]
            else:
                go_left = x <= threshold[node]
        node = left[node] if go_left else right[node]
    return node


ROW_BLOCK = 256


@njit(cache=True, parallel=True)
def predict_chunk(X, out, tree_offsets, tree_output, tree_scale, value,
                  left, right, feature, threshold, missing_left, nan_mode,
                  is_cat, cat_offset, cat_count, cat_default_left, cat_codes, cat_left,
                  strict, round32):
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
                leaf = find_leaf(X, i, root, left, right, feature, threshold, missing_left,
                                 nan_mode, is_cat, cat_offset, cat_count, cat_default_left,
                                 cat_codes, cat_left, strict, round32)
                for j in range(vdim):
                    out[i, col + j] += s * value[leaf, j]


@njit(cache=True, parallel=True)
def apply_chunk(X, out, tree_offsets,
                left, right, feature, threshold, missing_left, nan_mode,
                is_cat, cat_offset, cat_count, cat_default_left, cat_codes, cat_left,
                strict, round32):
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
                leaf = find_leaf(X, i, root, left, right, feature, threshold, missing_left,
                                 nan_mode, is_cat, cat_offset, cat_count, cat_default_left,
                                 cat_codes, cat_left, strict, round32)
                out[i, t] = leaf - root


@njit(cache=True, parallel=True)
def predict_trees_chunk(X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                        left, right, feature, threshold, missing_left, nan_mode,
                        is_cat, cat_offset, cat_count, cat_default_left, cat_codes, cat_left,
                        strict, round32):
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
                leaf = find_leaf(X, i, root, left, right, feature, threshold, missing_left,
                                 nan_mode, is_cat, cat_offset, cat_count, cat_default_left,
                                 cat_codes, cat_left, strict, round32)
                for j in range(vdim):
                    out[i, col + j] += s * value[leaf, j]

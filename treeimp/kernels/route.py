"""Routing: push rows down trees of the normal form (see treeimp/model/ensemble.py).

``step`` is the single place that knows how a node sends a row left or right;
``walk_batch`` moves a batch of rows down one tree with it (``descend``: from any nodes),
and every other kernel (prediction, node statistics, staged gradients, permutation)
calls ``walk_batch`` or ``descend``. In a plain tree (numeric splits whose NaN goes one
fixed way: most XGBoost, LightGBM and scikit-learn trees) ``plain_level`` takes
``step``'s place: the same comparison, written so that it compiles to vector code
(tests/test_route_plain.py holds the two equal node by node).

The nodes are arrays, one per field (``TreeEnsemble.routing``): left, right, feature
(int64), threshold (float64), flags (uint16 bits below). The vectorised level reads each
field with one gather; a record per node, or int32 fields, kept the compiler from it.
The kernels take the routing arrays grouped (kernel_inputs.Routing) and unpack them
before their loops: these inlined helpers take the arrays: passing the named tuple into
them slowed the walks down (commit message).

Leaves are self-loops (left = right = the leaf itself, feature 0), so a batch
walks level by level with no per-row exit test: every row of the batch advances one
level, the rows' steps are independent (the CPU overlaps their memory loads), and a
row that reached its leaf stays there. From the tree's shallowest leaf on, the batch
stops as soon as every row sits at a leaf.
"""

import numpy as np
from numba import njit, prange

# LightGBM's kZeroThreshold (a float32 constant compared in float64)
ZERO_THRESHOLD = float(np.float32(1e-35))
_MAX_CODE = 2.0**31


# bits of a node's ``flags`` (uint16)
MISSING_LEFT = 1
NAN_AS_ZERO = 2
NAN_ZERO_MISSING = 4
CATEGORICAL = 8
CATEGORY_DEFAULT_LEFT = 16
CATEGORY_EXACT = 32  # a non-integer value is an unlisted code
CATEGORY_NEGATIVE_UNLISTED = 64  # a negative value is an unlisted code (not missing)
LEAF = 128
NAN_LEFT = 256  # a numeric node sends NaN left (MISSING_LEFT, or NaN read as 0.0 < / <= t)
# nodes a plain tree has none of: their routing is more than one comparison and NaN's
# fixed direction
NOT_PLAIN = CATEGORICAL | NAN_ZERO_MISSING
FLAGS_DTYPE = np.uint16


@njit(cache=True, inline="always")
def step(x, node, left, right, threshold, flags, cat_offset, cat_count, cat_codes,
         cat_left, strict):
    """The child of ``node`` that value ``x`` goes to (a leaf returns itself)."""
    f = flags[node]
    go_left = False
    if f & CATEGORICAL:
        # the code is int(x); with NAN_AS_ZERO (LightGBM) x in (-1, 0) truncates to
        # code 0, otherwise any x < 0 is negative: missing (HistGradientBoosting) or,
        # with CATEGORY_NEGATIVE_UNLISTED (XGBoost), an unlisted code
        negative = x <= -1.0 if f & NAN_AS_ZERO else x < 0.0
        if x != x or (negative and not f & CATEGORY_NEGATIVE_UNLISTED):
            go_left = (f & MISSING_LEFT) != 0
        elif negative:
            go_left = (f & CATEGORY_DEFAULT_LEFT) != 0
        else:
            go_left = (f & CATEGORY_DEFAULT_LEFT) != 0
            if x < _MAX_CODE and not (f & CATEGORY_EXACT and x != np.floor(x)):
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
            if f & NAN_AS_ZERO:
                x = 0.0
            else:
                missing = True
        elif f & NAN_ZERO_MISSING and -ZERO_THRESHOLD <= x <= ZERO_THRESHOLD:
            missing = True
        if missing:
            go_left = (f & MISSING_LEFT) != 0
        elif strict:
            go_left = x < threshold[node]
        else:
            go_left = x <= threshold[node]
    return left[node] if go_left else right[node]


@njit(cache=True, inline="always")
def feature_value(X, row, feature, round32):
    """The value a node splitting on ``feature`` compares for ``row`` of X (float64,
    rounded to float32 first when the model routes in float32)."""
    # unsigned indices: numba skips its negative-index wraparound arithmetic
    x = np.float64(X[np.uint64(row), np.uint64(feature)])
    if round32:
        x = np.float64(np.float32(x))
    return x


# called, not inlined: compiled once for all its callers, where an inlined copy was
# compiled again in each (a call per tree and batch costs nothing measurable)
@njit(cache=True)
def walk_batch(X, rows, m, root, depth, min_depth, plain, left, right, feature, threshold,
               flags, cat_offset, cat_count, cat_codes, cat_left, strict, round32, out):
    """out[k] := global leaf index reached by row ``rows[k]`` of X, for k < m, in a tree
    of ``depth`` levels (``plain``: the tree has no node in NOT_PLAIN)."""
    for k in range(m):
        out[k] = root
    descend(X, rows, m, depth, min_depth, plain, left, right, feature, threshold, flags,
            cat_offset, cat_count, cat_codes, cat_left, strict, round32, out)


# the walk of an ensemble without a NOT_PLAIN node anywhere: ``walk_batch`` with
# ``plain`` True for every tree, compiled without ``step`` (its categorical and
# zero-as-missing branches), for kernels whose caller chose it in Python
@njit(cache=True)
def walk_plain(X, rows, m, root, depth, min_depth, left, right, feature, threshold, flags,
               strict, round32, out):
    """``walk_batch`` for a plain tree (no node in NOT_PLAIN): every step is
    ``plain_level``'s comparison."""
    for k in range(m):
        out[k] = root
    for level in range(depth):
        plain_level(X, rows, m, left, right, feature, threshold, flags, strict, round32,
                    out)
        if level + 1 >= min_depth and level + 1 < depth and at_leaves(m, flags, out):
            break


@njit(cache=True, inline="always")
def at_leaves(m, flags, out):
    """Whether every row out[k], k < m, sits at a leaf."""
    for k in range(m):
        if not flags[np.uint64(out[k])] & LEAF:
            return False
    return True


@njit(cache=True, inline="always")
def descend(X, rows, m, depth, min_depth, plain, left, right, feature, threshold, flags,
            cat_offset, cat_count, cat_codes, cat_left, strict, round32, out):
    """Move row ``rows[k]`` of X on from node out[k] to the leaf below it, for k < m:
    ``depth`` levels at most, and from level ``min_depth`` on, stop as soon as every
    row sits at a leaf. ``plain``: no node below is in NOT_PLAIN, so every step is one
    comparison (``plain_level``)."""
    for level in range(depth):
        if plain:
            plain_level(X, rows, m, left, right, feature, threshold, flags, strict,
                        round32, out)
        else:
            for k in range(m):
                node = np.uint64(out[k])
                x = feature_value(X, rows[k], feature[node], round32)
                out[k] = step(x, node, left, right, threshold, flags, cat_offset,
                              cat_count, cat_codes, cat_left, strict)
        if level + 1 >= min_depth and level + 1 < depth and at_leaves(m, flags, out):
            break


@njit(cache=True, inline="always")
def plain_level(X, rows, m, left, right, feature, threshold, flags, strict, round32, out):
    """One level of ``descend`` where every node is numeric without zero-as-missing:
    ``step`` reduced to a comparison, NaN taking the node's NAN_LEFT direction. Written
    without branches (the child is picked arithmetically, the comparison hoisted out
    of the row loop), so that the compiler turns the row loop into vector gathers."""
    if strict:
        for k in range(m):
            node = np.uint64(out[k])
            x = feature_value(X, rows[k], feature[node], round32)
            go_left = x < threshold[node]
            if x != x:
                go_left = (flags[node] & NAN_LEFT) != 0
            out[k] = right[node] + (left[node] - right[node]) * np.int64(go_left)
    else:
        for k in range(m):
            node = np.uint64(out[k])
            x = feature_value(X, rows[k], feature[node], round32)
            go_left = x <= threshold[node]
            if x != x:
                go_left = (flags[node] & NAN_LEFT) != 0
            out[k] = right[node] + (left[node] - right[node]) * np.int64(go_left)


@njit(cache=True, inline="always")
def leaf_term(s, value, leaf, j):
    """Tree term of output j of a margin: ``s`` (the tree's scale) times its leaf value.

    Every margin is base + these terms added one tree after the other in tree order
    (``add_trees_chunk``; ``kernels/permute.py`` recomputes single rows the same way),
    so rows that reach the same leaves get bitwise equal margins whichever kernel
    computed them."""
    return s * value[np.uint64(leaf), j]


ROW_BLOCK = 512  # rows per parallel task of small trees (routing.row_block)
BATCH = 64  # rows walking a tree together


@njit(cache=True, parallel=True)
def add_trees_chunk(X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                    routing, strict, round32, row_block=ROW_BLOCK):
    """out[i, :] += sign * (sum over the listed trees, in order, of scale * leaf value),
    rows in parallel blocks of ``row_block`` rows (each block passes one tree after the
    other). ``routing``: kernel_inputs.Routing."""
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n = X.shape[0]
    vdim = value.shape[1]
    n_blocks = (n + row_block - 1) // row_block
    for b in prange(n_blocks):
        r0 = b * row_block
        r1 = min(n, r0 + row_block)
        rows = np.arange(r0, r1)
        leaves = np.empty(BATCH, np.int64)
        for k in range(trees.shape[0]):
            t = trees[k]
            col = tree_output[t]
            s = sign * tree_scale[t]
            for g0 in range(0, r1 - r0, BATCH):
                m = min(BATCH, r1 - r0 - g0)
                walk_batch(X, rows[g0:], m, tree_offsets[t], depth[t], min_depth[t],
                           plain[t], left, right, feature, threshold, flags, cat_offset,
                           cat_count, cat_codes, cat_left, strict, round32, leaves)
                for q in range(m):
                    for j in range(vdim):
                        out[r0 + g0 + q, col + j] += leaf_term(s, value, leaves[q], j)


@njit(cache=True, parallel=True)
def apply_chunk(X, out, tree_offsets, routing, strict, round32, row_block=ROW_BLOCK):
    """out[i, t] = leaf reached by row i in tree t, as a node index local to the tree
    (rows in parallel blocks of ``row_block``); ``routing``: kernel_inputs.Routing."""
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_blocks = (n + row_block - 1) // row_block
    for b in prange(n_blocks):
        r0 = b * row_block
        r1 = min(n, r0 + row_block)
        rows = np.arange(r0, r1)
        leaves = np.empty(BATCH, np.int64)
        for t in range(n_trees):
            root = tree_offsets[t]
            for g0 in range(0, r1 - r0, BATCH):
                m = min(BATCH, r1 - r0 - g0)
                walk_batch(X, rows[g0:], m, root, depth[t], min_depth[t], plain[t], left,
                           right, feature, threshold, flags, cat_offset, cat_count,
                           cat_codes, cat_left, strict, round32, leaves)
                for q in range(m):
                    out[r0 + g0 + q, t] = leaves[q] - root

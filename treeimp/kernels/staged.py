"""Staged node statistics for boosting: held-out gradients, stage by stage.

Rows travel in groups of ``GROUP`` that carry their running margin (base score + earlier
trees). At the start of every boosting stage (round), the gradient and hessian of the
model's own loss are computed for every row of the group and every output at the
current margin (a tight loop per objective), together with the four per-row statistic
terms; every tree of the stage then routes the whole group in one walk (the tree
stays in cache for the whole group), adds each row's terms at its leaf, and adds
the leaf value to the margin.

Binary logistic loss: each row also carries e = exp(-s m), and a tree multiplies it by
its leaf's factor exp(-s * leaf term) (``boosting._logistic_leaf_factor``), so the
gradients need no exp per row and round (one was a fifth of the staged pass; the
product drifts by at most ~1e-16 relative per tree, ~1e-14 over 500 rounds).

Layout of ``stats`` (n_leaves, n_blocks, 4): per leaf slot (``TreeEnsemble.leaf_slots``)
and row block the terms n' = sum w, S' = sum w (-g), H' = sum w h,
R' = sum w g^2 / h (internal nodes are sums of their leaves, formed when finalising).
No boosting formula reads sum w g^2, so it is not accumulated.
Threads own whole row blocks (the statistic blocks used for standard errors): a thread
takes a run of consecutive blocks, whose rows travel in groups that may span several
blocks. Into cells of ``stats`` known to be zero (the first chunk of rows) each row's
terms are added straight into its block's cells, in row order: the sums a buffer
started at zero would hold. Otherwise (later chunks) a run is one block, whose rows
are added into a local (n_leaves, 4) buffer, zeroed here, which is then added into the
block's cells (one run of 4 per leaf): a chunk's sums are formed from zero either way.
"""


import math

import numpy as np
from numba import njit

from .full_trees import copy_group, walk_full
from .gradients import (
    LOGISTIC,
    SQUARED_ERROR,
    grad_hess_row,
    grad_hess_targets,
    label_columns,
    set_stage_params,
    target_columns,
)
from .prefetch import prefetch_write
from .route import walk_batch, walk_plain

BATCH = 64  # rows walked together by the TreeSHAP and scale passes
GROUP = 512  # rows that pass every tree of a stage together (a tree stays in cache)
COPY_ROW_BYTES = 4096  # rows up to this size are copied group by group (see below)
N_TERMS = 4  # statistics per row and node: n', S', H', R' (the planes of ``stats``)
_E_MIN, _E_MAX = 1e-300, 1e300  # range in which exp(-s m) is updated by products


@njit(cache=True, inline="always")
def _put(terms, r, wi, gi, hi):
    """Row r's four terms into ``terms`` (N_TERMS, GROUP): one output's."""
    terms[0, r] = wi
    terms[1, r] = -wi * gi
    terms[2, r] = wi * hi
    terms[3, r] = wi * gi * gi / hi if hi > 0.0 else 0.0


# error_model="numpy": no zero-division test per division, which keeps these loops
# branch-free (every division here has a nonzero divisor or is guarded by hi > 0)
@njit(cache=True, error_model="numpy")
def stage_terms(code, params, margin, n, y, w, g, h, terms, e):
    """terms[k, :, r] := (w, -w g, w h, w g^2 / h) of rows r < n at their margins
    (``terms``: (K, N_TERMS, GROUP)); rows of weight 0 get zeros. ``y``: each row's
    target, or for a regression objective on K targets (``gradients.target_columns``) its K
    targets side by side. The common objectives run as tight loops. ``e``: logistic with
    one output: e[r] = exp(-s margin[r]) kept up to date by the caller (``leaf_factor``);
    a value that left [1e-300, 1e300] is recomputed."""
    K = margin.shape[1]
    if tight_objective(code, K):
        tight_stage_terms(code, params, margin, n, y, w, terms, e)
        return
    several = target_columns(code, K) > 1
    for r in range(n):
        wi = w[r]
        if wi == 0.0:
            for k in range(K):
                _put(terms[k], r, 0.0, 0.0, 0.0)
            continue
        if several:
            grad_hess_targets(code, params, margin, r, y, g, h)
        else:
            grad_hess_row(code, params, margin, r, y[r], g, h)
        for k in range(K):
            _put(terms[k], r, wi, g[r, k], h[r, k])


@njit(cache=True, inline="always")
def tight_objective(code, K):
    """Whether ``tight_stage_terms`` computes the terms of objective ``code`` on K
    outputs: binary logistic loss or squared error, one output."""
    return K == 1 and (code == LOGISTIC or code == SQUARED_ERROR)


@njit(cache=True, error_model="numpy")
def tight_stage_terms(code, params, margin, n, y, w, terms, e):
    """``stage_terms`` of the objectives with loops of their own (``tight_objective``).
    ``staged_block_stats`` calls the two loops directly (compiled with the one it runs:
    its ``logistic`` and ``squared`` arguments), not through this function."""
    if code == LOGISTIC:
        _logistic_stage_terms(params, margin, n, y, w, terms, e)
        return
    _squared_error_terms(n, margin, y, w, terms[0])


@njit(cache=True, error_model="numpy")
def _logistic_stage_terms(params, margin, n, y, w, terms, e):
    """``tight_stage_terms`` of binary logistic loss: e refreshed where it left its
    range, then the terms."""
    inside = True
    for r in range(n):  # a branch-free test first: it vectorises
        inside &= (e[r] >= _E_MIN) & (e[r] <= _E_MAX)
    if not inside:
        for r in range(n):
            if not _E_MIN <= e[r] <= _E_MAX:  # over- or underflow ahead: start afresh
                e[r] = math.exp(-params[0] * margin[r, 0])
    _logistic_terms(params[0], params[1], params[2], n, y, w, e, terms[0])


@njit(cache=True, error_model="numpy")
def _squared_error_terms(n, margin, y, w, t):
    """``stage_terms`` of squared error (one output) into t (N_TERMS, GROUP), in a
    loop of its own as ``_logistic_terms``."""
    for r in range(n):
        wi = w[r]
        gi = margin[r, 0] - y[r] if wi != 0.0 else 0.0
        _put(t, r, wi, gi, 1.0 if wi != 0.0 else 0.0)


@njit(cache=True)
def start_group(rows, ng, row0, y, w, base_score, row_start, s, use_e, margin, e, yg, wg):
    """Load a group of ``ng`` rows (local indices ``rows``, global ``row0 + rows[r]``)
    before the first tree: margin = the row's ``row_start`` (base score + offset), or
    ``base_score`` when ``row_start`` has no rows; e = exp(-s margin) for the logistic
    recurrence (``use_e``); yg, wg the rows' targets and weights (``w`` of length 1:
    one weight for all rows). ``y`` and ``yg`` hold Ky targets per row side by side,
    Ky = len(yg) / len(margin) (several for a regression objective on several
    targets)."""
    K = base_score.shape[0]
    Ky = yg.shape[0] // margin.shape[0]
    last_w = w.shape[0] - 1
    use_start = row_start.shape[0] > 0
    e0 = math.exp(-s * base_score[0]) if use_e else 0.0
    for r in range(ng):
        i = row0 + rows[r]
        if use_start:
            for k in range(K):
                margin[r, k] = row_start[i, k]
            e[r] = math.exp(-s * margin[r, 0]) if use_e else 0.0
        else:
            for k in range(K):
                margin[r, k] = base_score[k]
            e[r] = e0
        for k in range(Ky):
            yg[r * Ky + k] = y[i * Ky + k]
        wg[r] = w[min(i, last_w)]


@njit(cache=True, error_model="numpy")
def _logistic_terms(s, pos_weight, neg_weight, n, y, w, e, t):
    """``stage_terms`` of binary logistic loss (the arithmetic of
    gradients._scalar_grad_hess) into t (N_TERMS, GROUP). A loop of its own over 2-D ``t``:
    it compiles to vector instructions, which the same arithmetic inlined in
    ``stage_terms`` does not."""
    for r in range(n):
        p = 1.0 / (1.0 + e[r])
        yr = y[r]
        c = pos_weight if yr == 1.0 else (neg_weight if yr == 0.0 else 1.0)
        gi = c * s * (p - yr)
        hi = c * s * s * p * (1.0 - p)
        wi = w[r]
        if wi == 0.0:
            gi = 0.0
            hi = 0.0
        _put(t, r, wi, gi, hi)


@njit(cache=True, nogil=True)
def staged_block_stats(X, row0, order, block_start, b_lo, b_hi, rows_in, loss, trees,
                       routing, full, strict, round32, slot, stats, margin_out, fresh,
                       general, logistic, squared, full_walk, plain_walk, batch_walk):
    """Accumulate the staged statistics of the statistic blocks b_lo .. b_hi - 1 (the
    local rows of block b into X: ``order[block_start[b]:block_start[b + 1]]``, called
    row ``row0 + order[i]``): each row's terms added into stats[:, b] of its block b, in
    row order (and the final margins into ``margin_out``). The groups of rows that walk
    the trees together span blocks: short blocks cost no walk of their own.

    The caller runs runs of blocks of a chunk in parallel threads (the kernel releases
    the GIL): a run's cells of ``stats`` and its rows of ``margin_out`` are its own.
    ``fresh``: the run's cells of ``stats`` are all zero, the terms are added into them
    directly; else the run must be one block (b_hi = b_lo + 1), whose terms are summed
    in a local buffer first and then added into its cells.
    ``rows_in`` (kernel_inputs.RowInputs): the targets y (row-major, K per row for a
    regression objective on K targets: ``gradients.target_columns``), weights w (one weight for
    every row, or one per row) and ``row_start``, indexed by the call's row number
    r = row0 + i: ``row_start`` (n, K) each row's margin before the first tree (base
    score + offset, ``base_margin``), or a (0, K) array: ``loss.base_score`` for every
    row. ``loss`` (kernel_inputs.Loss), ``trees`` (kernel_inputs.StagedTrees: its
    ``stage_start`` (n_stages + 1) delimits the trees of every stage), ``routing``
    (kernel_inputs.Routing). ``full``: the trees as full trees
    (``full_trees.full_tree_layout``, for these ``strict`` and X's width; read only with
    ``full_walk``). ``slot`` (n_nodes,): every leaf's slot in ``stats``
    (n_leaves, n_blocks, N_TERMS) (``TreeEnsemble.leaf_slots``). ``margin_out`` (len(X), K)
    receives each row's final margin (local rows); pass a (0, K) array to skip that.
    Smoothed objectives read round st's scales from ``loss.params``
    (``losses.smoothed_spec``). ``general``, ``logistic``, ``squared``: one of them True,
    the others None: binary logistic loss or squared error on one output (their loops,
    ``tight_objective``), or any objective (``stage_terms``). numba drops the code under
    ``if <argument> is not None`` for a None argument before typing it (a bool
    argument's branches would be compiled), so that the kernel is compiled for the one
    form. ``full_walk``, ``plain_walk``, ``batch_walk``: the walk, the same way (one
    True, the others None): ``full_trees.walk_full`` when every tree has a full-tree
    layout in ``full`` and rows are copied group by group (X.shape[1] * X.itemsize <=
    COPY_ROW_BYTES); else ``route.walk_plain`` when no tree has a node in
    ``route.NOT_PLAIN`` (``routing.plain`` all True), ``route.walk_batch`` otherwise.
    """
    y, w, row_start = rows_in.target, rows_in.w, rows_in.row_start
    loss_code, loss_params, base_score = loss.code, loss.params, loss.base_score
    tree_offsets, tree_output, tree_scale = trees.tree_offsets, trees.tree_output, trees.tree_scale
    value, leaf_factor, stage_start = trees.value, trees.leaf_factor, trees.stage_start
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    K = base_score.shape[0]
    n_stages = stage_start.shape[0] - 1
    n_trees = tree_offsets.shape[0] - 1
    keep_margin = margin_out.shape[0] == X.shape[0]
    # a group's rows (scattered over X: blocks are random rows) are copied together
    # once, so that every tree walks a small contiguous array that stays in cache;
    # not for wide rows, of which the trees read a small part
    copy_rows = X.shape[1] * X.itemsize <= COPY_ROW_BYTES
    slot_start, column, cut, full_leaf, nan_left = full
    s_lo, s_hi = block_start[b_lo], block_start[b_hi]
    # the sums: ``stats`` itself, or the one block's local buffer (in cache, zeroed);
    # every row's block in the group, relative to ``b0``
    # np.empty and zeroing loops, not np.zeros / np.arange: each numba library function is
    # compiled once more for every caller's flags (this kernel releases the GIL)
    acc = stats if fresh else np.empty((stats.shape[0], 1, N_TERMS))
    if not fresh:
        for z0 in range(acc.shape[0]):
            for z2 in range(N_TERMS):
                acc[z0, 0, z2] = 0.0
    b0 = 0 if fresh else b_lo
    blk = np.empty(GROUP, np.int64)
    b = b_lo
    margin = np.empty((GROUP, K))
    leaves = np.empty(GROUP, np.int64)
    g = np.empty((GROUP, K))
    h = np.empty((GROUP, K))
    # a row's four statistics for output k, fixed for the stage:
    # (w, -w g, w h, w g^2 / h); zero for rows of weight 0
    terms = np.empty((K, N_TERMS, GROUP))
    for z0 in range(K):
        for z1 in range(N_TERMS):
            for z2 in range(GROUP):
                terms[z0, z1, z2] = 0.0
    yg = np.empty(GROUP * label_columns(loss_code, loss_params, K))
    wg = np.empty(GROUP)
    e = np.empty(GROUP)  # logistic: exp(-s margin), updated tree by tree
    # smoothed objectives: the current round's scales are set in this copy
    params = loss_params.copy()
    use_e = leaf_factor.shape[0] > 0
    xg = np.empty((GROUP if copy_rows else 0,
                   X.shape[1] + (nan_left.shape[0] if full_walk is not None else 0)), X.dtype)
    group_rows = np.empty(GROUP, np.int64)
    for z0 in range(GROUP):
        group_rows[z0] = z0
    heap = np.empty(GROUP, np.int64)  # the full-tree walk's slots
    for s0 in range(s_lo, s_hi, GROUP):
        s1 = s_hi if s_hi < s0 + GROUP else s0 + GROUP  # min() compiles once more here
        ng = s1 - s0
        rows = order[s0:s1]
        for q in range(ng):  # the rows are sorted by block; empty blocks are skipped
            while block_start[b + 1] <= s0 + q:
                b += 1
            blk[q] = b - b0
        start_group(rows, ng, row0, y, w, base_score, row_start, loss_params[0], use_e,
                    margin, e, yg, wg)
        if full_walk is not None:
            copy_group(X, rows, ng, round32, nan_left, xg)
        elif copy_rows:
            for r in range(ng):
                for f in range(X.shape[1]):
                    xg[r, f] = X[rows[r], f]
        # the trees walk the copy or X itself: one walk_batch in the loop below (two
        # inlined copies of the walk made the kernel slow to compile)
        src = xg if copy_rows else X
        src_rows = group_rows if copy_rows else rows
        for st in range(n_stages):
            if general is not None:  # the two tight objectives have no per-round params
                set_stage_params(loss_code, params, loss_params, st)
            if logistic is not None:
                _logistic_stage_terms(params, margin, ng, yg, wg, terms, e)
            if squared is not None:
                _squared_error_terms(ng, margin, yg, wg, terms[0])
            if general is not None:
                stage_terms(loss_code, params, margin, ng, yg, wg, g, h, terms, e)
            for t in range(stage_start[st], stage_start[st + 1]):
                col = tree_output[t]
                sc = tree_scale[t]
                # the cells of the next tree's leaves in this group's blocks are
                # fetched while this tree is walked (a large ``stats`` is mostly out of
                # cache; two 32-byte cells per cache line)
                if t + 1 < n_trees:
                    for node in range(tree_offsets[t + 1], tree_offsets[t + 2]):
                        if slot[node] >= 0:
                            for bb in range(blk[0], blk[ng - 1] + 1, 2):
                                prefetch_write(acc, slot[node], bb)
                            prefetch_write(acc, slot[node], blk[ng - 1])
                # the whole group in one walk: every call of walk_batch adds and
                # removes a reference to each of its dozen arrays (atomic
                # operations on arrays shared by all threads), once per tree and group
                # this way, not per tree and batch of 64 rows
                if full_walk is not None:
                    walk_full(xg, ng, slot_start[t], depth[t], column, cut, full_leaf, heap,
                              leaves)
                if plain_walk is not None:
                    walk_plain(src, src_rows, ng, tree_offsets[t], depth[t], min_depth[t],
                               left, right, feature, threshold, flags, strict, round32,
                               leaves)
                if batch_walk is not None:
                    walk_batch(src, src_rows, ng, tree_offsets[t], depth[t], min_depth[t],
                               plain[t], left, right, feature, threshold, flags,
                               cat_offset, cat_count, cat_codes, cat_left, strict, round32,
                               leaves)
                # the margin updates (with e's, one loop), then the statistics, in
                # loops of their own (short loops the compiler vectorises)
                if use_e:
                    for q in range(ng):
                        leaf = np.uint64(leaves[q])  # unsigned: no wraparound
                        margin[q, col] += sc * value[leaf, 0]
                        e[q] *= leaf_factor[leaf]
                else:
                    for q in range(ng):
                        leaf = np.uint64(leaves[q])  # unsigned: no wraparound
                        margin[q, col] += sc * value[leaf, 0]
                for q in range(ng):
                    at = np.uint64(slot[np.uint64(leaves[q])])
                    bq = np.uint64(blk[q])
                    for d in range(N_TERMS):
                        acc[at, bq, d] += terms[col, d, q]
        if keep_margin:
            for r in range(ng):
                i = rows[r]
                for k in range(K):
                    margin_out[i, k] = margin[r, k]
    if not fresh:
        for i in range(acc.shape[0]):
            if acc[i, 0, 0] != 0.0 or acc[i, 0, 2] != 0.0:
                for d in range(N_TERMS):
                    stats[i, b_lo, d] += acc[i, 0, d]

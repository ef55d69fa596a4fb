"""Block sums of the held-out interaction importance (target x SHAP interaction values).

For every tree t and evaluation row i, the pair mode of ``treeshap.tree_shap_batch``
adds ``proj_i . Phi_{t,jk}(x_i)`` (the row's projection times the tree's path-dependent
SHAP interaction value of players j != k, once at (j, k) and once at (k, j)) to a
matrix chosen per row. Here the projection is the row's weighted (centred) target, and
the matrix is the row's block: the sums of one tree over one block's rows.

The measure's leave-one-block-out replicates are ratios of such sums (per tree: the sum
over the rows outside block b over their weight), which do not add up over chunks of
rows. They are linear in the sums once the denominators are known, so the caller
computes every tree's evaluation weight per block first (``oob_block_weight``), passes
``coef[t, b] = 1 / (n'_t - n'_tb)`` (b < n_blocks) and ``coef[t, n_blocks] = 1 / n'_t``
(0 where the weight is 0), and the forest kernel folds each tree's block sums into the
replicates right after the tree: memory per thread is two sets of n_blocks + 1 matrices
of players x players, whatever the number of trees. Boosted models evaluate every tree
on the same rows, so their denominators are the blocks' weights for every tree and the
kernel keeps one matrix per block, summed over trees.
"""

import numpy as np
from numba import njit, prange

from .route import walk_batch
from .staged import BATCH, GROUP, N_TERMS, stage_terms, start_group
from .treeshap import BATCH_ROWS, new_batch_scratch, tree_shap_batch


@njit(cache=True, parallel=True)
def oob_block_weight(inbag_bits, use_inbag, pos, block, w, n_blocks, out):
    """out[b, t] += the weight of the rows of block b that evaluate tree t (out of bag
    with ``use_inbag``: global position ``pos[i]`` not in ``inbag_bits[t]``; else every
    row). ``block[i]``: row i's block; ``w``: per-row weights, or one for every row."""
    n = block.shape[0]
    last_w = w.shape[0] - 1
    for t in prange(out.shape[1]):
        for i in range(n):
            wi = w[min(i, last_w)]
            if wi == 0.0:
                continue
            if use_inbag:
                p = pos[i]
                if (inbag_bits[t, p >> 3] >> (p & 7)) & 1:
                    continue
            out[block[i], t] += wi


@njit(cache=True, inline="always")
def _fold_tree(D, T, coef_t, F, n_blocks, R):
    """R[b, j, k] += coef_t[b] x (the pair sums of the rows outside block b) and
    R[n_blocks, j, k] += coef_t[n_blocks] x (those of every row), j < k, from one tree's
    per-block sums D (n_blocks * F, F, 1) that hold each pair's half at (j, k) and at
    (k, j); ``T`` (F, F) scratch for the all-blocks sum."""
    for j in range(F):
        for k in range(j + 1, F):
            s = 0.0
            for b in range(n_blocks):
                s += D[b * F + j, k, 0] + D[b * F + k, j, 0]
            T[j, k] = s
    for b in range(n_blocks + 1):
        c = coef_t[b]
        if c == 0.0:
            continue
        for j in range(F):
            for k in range(j + 1, F):
                if b < n_blocks:
                    R[b, j, k] += c * (T[j, k] - D[b * F + j, k, 0] - D[b * F + k, j, 0])
                else:
                    R[b, j, k] += c * T[j, k]


@njit(cache=True, parallel=True)
def forest_pair_sums(X, row0, rows_in, block, inbag_bits, use_inbag, centre, coef, tables,
                     tree_offsets, tree_output, routing, strict, round32, out,
                     batch=BATCH_ROWS):
    """Held-out interaction importance of a forest, folded per tree:
    out[q, b, j, k] (j < k) += coef[t, b] x sum over the rows i of tree t's evaluation
    rows outside block b (b = n_blocks: all of them) of 2 w_i (z_i - c_t) . Phi_{t,jk}(x_i),
    summed over the trees t = q, q + Q, ... that worker q (of Q = out.shape[0]) takes.
    ``rows_in`` (kernel_inputs.RowInputs): ``Z`` (rows, n_outputs), ``w`` (one weight for
    all, or one per row) and ``pos`` (global positions, for ``inbag_bits``) indexed by
    the call's row number row0 + i; ``block[i]`` local row i's block; ``centre`` (n_trees,
    value_dim) c_t (zeros: no centring); ``coef`` (n_trees, n_blocks + 1). ``tables``:
    kernel_inputs.ShapTables (TreeSHAP, crediting model features), ``routing``:
    kernel_inputs.Routing."""
    Z, w, pos = rows_in.target, rows_in.w, rows_in.pos
    n = X.shape[0]
    n_workers = out.shape[0]
    n_blocks = out.shape[1] - 1
    F = out.shape[2]
    n_trees = tree_offsets.shape[0] - 1
    last_w = w.shape[0] - 1
    vdim = tables.value.shape[1]
    for q in prange(n_workers):
        scratch = new_batch_scratch(tables.max_depth, 1, F, batch)
        proj = np.empty((batch, vdim))
        rows = np.empty(batch, np.int64)
        dest = np.zeros(batch, np.int64)
        pdest = np.empty(batch, np.int64)
        phi = np.zeros((1, F, 1))  # the main effects the kernel also adds: not read
        D = np.empty((n_blocks * F, F, 1))
        T = np.zeros((F, F))
        for t in range(q, n_trees, n_workers):
            D[:] = 0.0
            root = tree_offsets[t]
            col = tree_output[t]
            nf = tables.path_features[t]
            nr = 0
            for i in range(n):
                r = row0 + i
                if use_inbag:
                    p = pos[r]
                    if (inbag_bits[t, p >> 3] >> (p & 7)) & 1:
                        continue
                wi = w[min(r, last_w)]
                if wi == 0.0:
                    continue
                rows[nr] = i
                pdest[nr] = block[i] * F
                for j in range(vdim):
                    proj[nr, j] = wi * (Z[r, col + j] - centre[t, j])
                nr += 1
                if nr == batch:
                    tree_shap_batch(X, rows, nr, root, nf, routing, tables.feature,
                                    tables.cover, tables.value, strict, round32, 0, 1.0,
                                    proj, dest, phi, scratch, tables.gl_nodes,
                                    tables.gl_weights, D, pdest)
                    nr = 0
            if nr > 0:
                tree_shap_batch(X, rows, nr, root, nf, routing, tables.feature,
                                tables.cover, tables.value, strict, round32, 0, 1.0, proj,
                                dest, phi, scratch, tables.gl_nodes, tables.gl_weights, D,
                                pdest)
            _fold_tree(D, T, coef[t], F, n_blocks, out[q])


@njit(cache=True, parallel=True)
def staged_pair_sums(X, row0, order, block_start, rows_in, loss, trees, tables, centre,
                     out, routing, strict, round32, batch=BATCH_ROWS):
    """Held-out interaction importance of a boosted model: out[b, j, k, 0] += sum over
    trees t and the rows i of block b of w_i (-g_i - mu_t h_i) Phi_{t,jk}(x_i) (j != k,
    each pair's half at (j, k) and at (k, j)), g and h the gradient and hessian of the
    model's loss at the margin before tree t's stage (``kernels/staged.py``), Phi of the
    tree's values as they enter the margin (times its scale), mu_t = ``centre[t]`` (zeros:
    no centring). ``order[block_start[b]:block_start[b + 1]]``: the local rows of block b;
    ``rows_in``, ``loss`` and ``trees`` as ``treeshap.staged_block_sums`` reads them.
    Rows travel in groups carrying their margin; threads own whole blocks."""
    y, w, row_start = rows_in.target, rows_in.w, rows_in.row_start
    loss_code, loss_params, base_score = loss.code, loss.params, loss.base_score
    tree_offsets, tree_output, tree_scale = trees.tree_offsets, trees.tree_output, trees.tree_scale
    leaf_factor, stage_start = trees.leaf_factor, trees.stage_start
    value = tables.value
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n_blocks = block_start.shape[0] - 1
    F = out.shape[1]
    K = base_score.shape[0]
    n_stages = stage_start.shape[0] - 1
    for b in prange(n_blocks):
        scratch = new_batch_scratch(tables.max_depth, 1, F, batch)
        margin = np.empty((GROUP, K))
        leaves = np.empty(BATCH, np.int64)
        g = np.empty((GROUP, K))
        h = np.empty((GROUP, K))
        terms = np.zeros((K, N_TERMS, GROUP))
        yg = np.empty(GROUP)
        wg = np.empty(GROUP)
        e = np.empty(GROUP)
        use_e = leaf_factor.shape[0] > 0
        proj = np.empty((batch, 1))
        rows_b = np.empty(batch, np.int64)
        dest = np.zeros(batch, np.int64)
        pdest = np.zeros(batch, np.int64)
        phi = np.zeros((1, F, 1))  # the main effects the kernel also adds: not read
        pair_out = out[b]
        for s0 in range(block_start[b], block_start[b + 1], GROUP):
            s1 = min(block_start[b + 1], s0 + GROUP)
            ng = s1 - s0
            rows = order[s0:s1]
            start_group(rows, ng, row0, y, w, base_score, row_start, loss_params[0], use_e,
                        margin, e, yg, wg)
            for st in range(n_stages):
                stage_terms(loss_code, loss_params, margin, ng, yg, wg, g, h, terms, e)
                for t in range(stage_start[st], stage_start[st + 1]):
                    col = tree_output[t]
                    sc = tree_scale[t]
                    root = tree_offsets[t]
                    mu = centre[t]
                    nr = 0
                    for r in range(ng):
                        if terms[col, 0, r] == 0.0:
                            continue
                        rows_b[nr] = rows[r]
                        proj[nr, 0] = terms[col, 1, r] - mu * terms[col, 2, r]
                        nr += 1
                        if nr == batch:
                            tree_shap_batch(X, rows_b, nr, root, tables.path_features[t],
                                            routing, tables.feature, tables.cover, value,
                                            strict, round32, 0, sc, proj, dest, phi, scratch,
                                            tables.gl_nodes, tables.gl_weights, pair_out,
                                            pdest)
                            nr = 0
                    if nr > 0:
                        tree_shap_batch(X, rows_b, nr, root, tables.path_features[t],
                                        routing, tables.feature, tables.cover, value, strict,
                                        round32, 0, sc, proj, dest, phi, scratch,
                                        tables.gl_nodes, tables.gl_weights, pair_out, pdest)
                    for q0 in range(0, ng, BATCH):
                        m = min(BATCH, ng - q0)
                        walk_batch(X, rows[q0:], m, root, depth[t], min_depth[t],
                                   plain[t], left, right, feature, threshold, flags,
                                   cat_offset, cat_count, cat_codes, cat_left, strict,
                                   round32, leaves)
                        for q in range(m):
                            leaf = np.uint64(leaves[q])
                            margin[q0 + q, col] += sc * value[leaf, 0]
                        if use_e:
                            for q in range(m):
                                e[q0 + q] *= leaf_factor[np.uint64(leaves[q])]

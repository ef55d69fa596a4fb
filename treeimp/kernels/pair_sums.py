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
on the same rows, so their denominators are the blocks' weights for every tree: one
matrix per block, summed over trees, kept by the pair mode of
``treeshap.staged_block_sums`` (the staged pass of SHAP-oob).
"""

import numpy as np
from numba import njit, prange

from .treeshap import BATCH_ROWS, new_batch_scratch, oob_weight, tree_shap_batch


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
                wi = oob_weight(inbag_bits, use_inbag, pos, r, t, w, last_w)
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

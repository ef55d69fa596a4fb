"""Staged node statistics for boosting: held-out gradients, stage by stage.

Rows travel in small batches that carry their running margin (base score + earlier
trees). At the start of every boosting stage (round), the gradient and hessian of the
model's own loss are computed for every output at the current margin (one pass of
exponentials per row and stage); every tree of the stage then routes the batch and adds
its leaf's statistics, and the leaf values are added to the margin.

Layout of ``stats`` (5, n_nodes, n_blocks): planes n' = sum w, Q' = sum w g^2,
S' = sum w (-g), H' = sum w h, R' = sum w g^2 / h, at leaves (``propagate_up`` fills
internal nodes).
Threads own whole row blocks (the statistic blocks used for standard errors), so every
thread writes only its own block's cells.
"""

import numpy as np
from numba import njit, prange

from ..losses import grad_hess_row
from .route import walk_batch

BATCH = 64


@njit(cache=True, parallel=True)
def staged_leaf_stats(X, row0, order, block_start, y, w, base_score, stage_start,
                      loss_code, loss_params, stats, margin_out,
                      tree_offsets, tree_output, tree_scale, value,
                      nodes, depth, min_depth, cat_offset, cat_count, cat_codes, cat_left,
                      strict, round32):
    """Accumulate staged statistics of rows ``row0 + order[...]`` (local indices into X).

    ``order[block_start[b]:block_start[b + 1]]`` are the local rows of statistic block
    b. ``stage_start`` (n_stages + 1) delimits the trees of every stage. ``margin_out``
    receives each row's final margin (local rows).
    """
    n_blocks = block_start.shape[0] - 1
    K = base_score.shape[0]
    n_stages = stage_start.shape[0] - 1
    n_nodes = stats.shape[1]
    for b in prange(n_blocks):
        # the thread owning block b accumulates into a contiguous local buffer (one cache
        # line per update instead of five planes) and adds it to the planes at the end
        local = np.zeros((n_nodes, 5))
        margin = np.empty((BATCH, K))
        leaves = np.empty(BATCH, np.int64)
        g = np.empty((BATCH, K))
        h = np.empty((BATCH, K))
        for s0 in range(block_start[b], block_start[b + 1], BATCH):
            s1 = min(block_start[b + 1], s0 + BATCH)
            nb = s1 - s0
            for r in range(nb):
                for k in range(K):
                    margin[r, k] = base_score[k]
            for st in range(n_stages):
                for r in range(nb):
                    i = order[s0 + r]
                    grad_hess_row(loss_code, loss_params, margin, r, y[row0 + i], g, h)
                for t in range(stage_start[st], stage_start[st + 1]):
                    col = tree_output[t]
                    sc = tree_scale[t]
                    walk_batch(X, order[s0:s1], nb, tree_offsets[t], depth[t], min_depth[t],
                               nodes, cat_offset, cat_count, cat_codes, cat_left, strict,
                               round32, leaves)
                    for r in range(nb):
                        leaf = leaves[r]
                        wi = w[row0 + order[s0 + r]]
                        if wi != 0.0:
                            gi = g[r, col]
                            hi = h[r, col]
                            local[leaf, 0] += wi
                            local[leaf, 1] += wi * gi * gi
                            local[leaf, 2] -= wi * gi
                            local[leaf, 3] += wi * hi
                            if hi > 0.0:
                                local[leaf, 4] += wi * gi * gi / hi
                        margin[r, col] += sc * value[leaf, 0]
            for r in range(nb):
                i = order[s0 + r]
                for k in range(K):
                    margin_out[i, k] = margin[r, k]
        for node in range(n_nodes):
            if local[node, 0] != 0.0 or local[node, 3] != 0.0:
                for d in range(5):
                    stats[d, node, b] += local[node, d]

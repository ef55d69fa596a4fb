"""Per-round residual statistics of XGBoost >= 3.4's smoothed objectives.

XGBoost's ``reg:absoluteerror`` / ``reg:quantileerror`` scale every round's gradients by
S = (sum w sqrt|m - y| / sum w)^2 per output, over all rows at their margins before the
round (``losses.smoothed_spec``). This pre-pass routes the rows stage by stage as the
staged kernel does (kernels/staged.py) and adds w sqrt|m - y| of every row, round and
output. Rows are split into ``n_parts`` contiguous parts (fixed by the caller, not by the
thread count, so the sums do not depend on it); each part adds into its own plane of
``out``, which the caller sums.
"""

import math

import numpy as np
from numba import njit, prange

from .gradients import target_columns
from .route import walk_batch
from .staged import BATCH, GROUP, start_group


@njit(cache=True, parallel=True)
def staged_root_residual_sums(X, row0, rows_in, loss, trees, routing, strict, round32, out):
    """out[p, st, k] += sum of w sqrt|m_k - y_k| over the rows of part p (local rows
    of X, part p of ``out.shape[0]`` equal contiguous parts) at their margins m before
    stage st (``trees.stage_start``). ``rows_in``, ``loss``, ``trees``, ``routing`` as
    in ``staged.staged_block_stats``; ``y_k`` is the row's target k for a model on
    several targets (``gradients.target_columns``), else its one target."""
    y, w, row_start = rows_in.target, rows_in.w, rows_in.row_start
    base_score = loss.base_score
    tree_offsets, tree_output, tree_scale = trees.tree_offsets, trees.tree_output, trees.tree_scale
    value, stage_start = trees.value, trees.stage_start
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n = X.shape[0]
    K = base_score.shape[0]
    Ky = target_columns(loss.code, K)
    n_parts = out.shape[0]
    n_stages = stage_start.shape[0] - 1
    per = (n + n_parts - 1) // n_parts
    for p in prange(n_parts):
        margin = np.empty((GROUP, K))
        leaves = np.empty(BATCH, np.int64)
        yg = np.empty(GROUP * Ky)
        wg = np.empty(GROUP)
        e = np.empty(GROUP)
        rows = np.arange(GROUP)
        for s0 in range(p * per, min(n, (p + 1) * per), GROUP):
            ng = min(n, (p + 1) * per, s0 + GROUP) - s0
            for r in range(ng):
                rows[r] = s0 + r
            start_group(rows, ng, row0, y, w, base_score, row_start, 0.0, False, margin, e,
                        yg, wg)
            for st in range(n_stages):
                for r in range(ng):
                    for k in range(K):
                        yk = yg[r * Ky + k] if Ky == K else yg[r * Ky]
                        out[p, st, k] += wg[r] * math.sqrt(abs(margin[r, k] - yk))
                for t in range(stage_start[st], stage_start[st + 1]):
                    col = tree_output[t]
                    sc = tree_scale[t]
                    for q0 in range(0, ng, BATCH):
                        m = min(BATCH, ng - q0)
                        walk_batch(X, rows[q0:], m, tree_offsets[t], depth[t], min_depth[t],
                                   plain[t], left, right, feature, threshold, flags,
                                   cat_offset, cat_count, cat_codes, cat_left, strict,
                                   round32, leaves)
                        for q in range(m):
                            margin[q0 + q, col] += sc * value[np.uint64(leaves[q]), 0]

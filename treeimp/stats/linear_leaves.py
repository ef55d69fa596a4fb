"""Linear leaf models (LightGBM ``linear_tree=True``) in the staged pass: every row's g, h
of every round, before the pass.

The staged kernel forms each row's margin from the trees' constant leaf values; a
linear leaf outputs ``const + b . x`` instead (its constant fallback only when one of its
features is NaN), so the kernel's own margins, and the gradients at them, would be
wrong. :func:`linear_leaf_targets` routes a chunk of evaluation rows through every tree
(``apply``), forms every tree's true output per row (constant fallback plus the linear
gain, ``kernels/linear_leaves.add_linear_gains``), the margin before every round
(base score or offset plus the earlier trees' outputs), and the g, h of the model's own
loss there; the staged kernel reads them as the rows' targets (``gradients.PRECOMPUTED``,
as for survival:cox) and only routes the rows to add them into their leaves. Each row's
gradients depend on the row alone, so this runs chunk by chunk: per chunk row, 16 bytes
per round and output for g, h plus 20 bytes per tree for the leaves, the tree outputs
and the negative gradients of the leaf-model sums (:func:`linear_chunk_rows` keeps a
chunk near ``CHUNK_BYTES``).

The same pass adds the held-out sums of the leaf-model importance
(``measures/linear_leaves.leaf_model_values``), per statistic block, from the same
leaves and gradients (:func:`add_leaf_model_sums`): per linear term 2 values and per
node 2 values, per block (:func:`leaf_model_shapes`).
"""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..kernels.gradients import PRECOMPUTED, target_columns
from ..kernels.linear_leaves import add_linear_gains, leaf_model_block_sums, staged_gradients
from ..model.routing import routing_flags, row_block

# the pre-pass arrays of one chunk of rows stay near this size
CHUNK_BYTES = 1 << 27


def linear_chunk_rows(ens, n_stages, most):
    """Rows per chunk of the staged pass of a linear-leaf model: at most ``most``, at
    least 512, the pre-pass arrays (16 bytes per round and output, 12 per tree) near
    ``CHUNK_BYTES``."""
    per_row = 16 * ens.n_outputs * n_stages + 20 * ens.n_trees
    return int(min(most, max(512, CHUNK_BYTES // per_row)))


def linear_leaf_targets(ens, chunk, y, row_start, stage_start, code, params):
    """(code, params, targets, final margin, leaves) of a chunk for the staged kernel.

    ``y``: the chunk's targets, row-major (``target_columns(code, K)`` per row, as
    ``losses.check_target`` gives them); ``row_start`` (n, K) the chunk's margins before
    the first tree, or (0, K): the base score; ``stage_start`` (n_stages + 1,) the first
    tree of every round; ``code``, ``params`` the model's loss (``losses.loss_spec``).
    Returns ``PRECOMPUTED``, [0 (the round, set by the kernel), n_stages], targets
    (n * 2 K * n_stages,) row-major (round by round, output by output: g then h), and
    the chunk's final margins (n, K) with the linear leaves, and the leaf of every row
    and tree (n, T) (local, as ``apply``). Call inside ``numba_threads``.
    """
    n, K, T = chunk.shape[0], ens.n_outputs, ens.n_trees
    n_stages = len(stage_start) - 1
    scale = np.ascontiguousarray(ens.tree_scale, dtype=np.float64)
    leaves = np.empty((n, T), dtype=np.int32)
    strict, round32 = routing_flags(ens, chunk)
    get_backend().apply(chunk, leaves, ens.tree_offsets, ens.routing, strict, round32,
                        row_block(ens, n))
    # every tree's output per row: its constant fallback, plus its linear gain
    out = scale * ens.value[ens.tree_offsets[:-1][None, :] + leaves, 0]
    lin = ens.linear_leaves
    add_linear_gains(chunk, leaves, ens.tree_offsets, np.arange(T, dtype=np.int32), scale,
                     ens.value, lin.offset, lin.count, lin.const, lin.feature, lin.coef, out)
    start = (ens.base_score[None, :] if row_start.shape[0] == 0 else row_start)
    table = np.empty((n, n_stages, K, 2))
    margin = np.empty((n, K))
    staged_gradients(out, np.ascontiguousarray(stage_start, dtype=np.int64),
                     ens.tree_output, np.ascontiguousarray(start, dtype=np.float64), code,
                     params, np.ascontiguousarray(y, dtype=np.float64),
                     target_columns(code, K) > 1, table, margin)
    return PRECOMPUTED, np.array([0.0, float(n_stages)]), table.ravel(), margin, leaves


def leaf_model_shapes(ens, n_blocks):
    """Shapes of the leaf-model block sums: per block and linear term (sum w z x,
    sum w x), per block and node (sum w, sum w z) over the rows that use the node's
    leaf model."""
    return ((n_blocks, ens.linear_leaves.coef.shape[0], 2), (n_blocks, ens.n_nodes, 2))


def add_leaf_model_sums(ens, chunk, leaves, targets, stage_start, w, block, out):
    """Add a chunk's leaf-model block sums into ``out`` = (term sums, node sums) of
    :func:`leaf_model_shapes`: ``targets`` the chunk's g, h of ``linear_leaf_targets``,
    ``w`` the chunk's weights (or one for all), ``block`` its rows' statistic blocks.
    Call inside ``numba_threads``."""
    n, K = chunk.shape[0], ens.n_outputs
    n_stages = len(stage_start) - 1
    stage_of = np.repeat(np.arange(n_stages), np.diff(stage_start))
    g = targets.reshape(n, n_stages, K, 2)[:, :, :, 0]
    z = -np.ascontiguousarray(g[:, stage_of, ens.tree_output])  # (n, T)
    lin = ens.linear_leaves
    leaf_model_block_sums(chunk, leaves, ens.tree_offsets, z, np.ascontiguousarray(w),
                          np.ascontiguousarray(block), lin.offset, lin.count, lin.feature,
                          out[0], out[1])

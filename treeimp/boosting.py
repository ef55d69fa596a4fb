"""Held-out node statistics of boosting models from staged gradients (measures.md,
"The per-tree target"): tree t is evaluated against -g, the negative gradient of the
model's own loss at the margin before t's stage."""

from __future__ import annotations

import numpy as np

from .kernels.api import fill_internal_stats, routing_flags
from .kernels.staged import N_TERMS, staged_leaf_stats
from .kernels.threads import numba_threads
from .losses import LOGISTIC, check_target, loss_spec
from .measures import NodeStats


def stage_starts(ens):
    """(n_stages + 1,) index of the first tree of every stage."""
    change = np.flatnonzero(np.diff(ens.tree_stage) != 0) + 1
    return np.concatenate([[0], change, [ens.n_trees]]).astype(np.int64)


# rows per kernel call: the per-call sort of rows by block stays small, and the
# per-block buffers (4 x n_nodes) are flushed rarely enough not to matter
CHUNK_ROWS = 1 << 18


def staged_pass(ens, rows, y, w, block, n_blocks, *, n_jobs=None, bar=None,
                keep_margin=True, leave_one_out=False, out=None, base_margin=None):
    """Run the staged kernel: (stats (4, n_nodes, n_blocks), final margin (n, n_outputs),
    or None without ``keep_margin``). ``w``: one weight per row, or one for all.
    ``leave_one_out``: stats has n_blocks + 1 blocks, the leave-one-block-out
    statistics and last the total (see ``kernels.node_stats.propagate_up``). ``out``:
    a zero-filled float64 array of shape ``stats_shape`` to fill instead of a new one.
    ``base_margin``: per-row offsets ((n, n_outputs), ``offsets.check_base_margin``):
    every row's held-out margin starts at ``ens.start_margin(base_margin)`` (base score
    + offset; XGBoost: the offset), so the gradients are the deployed model's."""
    if ens.value_dim != 1:
        raise ValueError(f"this model's trees have {ens.value_dim} values per leaf (vector-"
                         "leaf trees); held-out gradient importances need one value per leaf")
    code, params = loss_spec(ens.objective, n_outputs=ens.n_outputs)
    y_t = np.ascontiguousarray(check_target(ens.objective, y, ens.classes), dtype=np.float64)
    shape = stats_shape(ens, n_blocks, leave_one_out)
    if out is not None and out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, the statistics need {shape}")
    stats = np.zeros(shape) if out is None else out
    margin = np.empty((rows.n_rows if keep_margin else 0, ens.n_outputs))
    starts = stage_starts(ens)
    row_start = (np.zeros((0, ens.n_outputs)) if base_margin is None
                 else ens.start_margin(base_margin))
    leaf_factor = _logistic_leaf_factor(ens, code, params)
    # dynamic: the statistic blocks are few, long and equal; a thread slowed by another
    # process leaves its remaining blocks to the other (see numba_threads)
    with numba_threads(n_jobs, dynamic=True):
        for start, chunk in rows.chunks(CHUNK_ROWS, split=True):
            stop = start + chunk.shape[0]
            strict, round32 = routing_flags(ens, chunk)
            local_block = block[start:stop]
            order = np.argsort(local_block, kind="stable").astype(np.int64)
            bounds = np.searchsorted(local_block[order], np.arange(n_blocks + 1))
            staged_leaf_stats(chunk, start, order, bounds.astype(np.int64), y_t, w,
                              ens.base_score, row_start, starts, code, params, stats,
                              margin[start:stop] if keep_margin else margin,
                              ens.tree_offsets, ens.tree_output,
                              ens.tree_scale, ens.value, leaf_factor,
                              *ens.routing_arrays(), strict, round32)
            if bar is not None:
                bar.update(chunk.shape[0])
    with numba_threads(n_jobs):  # many short iterations: equal shares up front
        stats = fill_internal_stats(ens, stats, leave_one_out)
    return stats, (margin if keep_margin else None)


def stats_shape(ens, n_blocks, leave_one_out):
    """Shape of the staged statistics."""
    return (N_TERMS, ens.n_nodes, n_blocks + bool(leave_one_out))


def _logistic_leaf_factor(ens, code, params):
    """Binary logistic loss: exp(-s * scale * value) per node, the factor by which a row
    reaching that leaf changes exp(-s m). The staged kernel keeps exp(-s m) of every row
    up to date with one product per tree instead of one exp per round (relative error
    grows by at most ~1e-16 per tree); other losses: an empty array."""
    if code != LOGISTIC or ens.n_outputs != 1:
        return np.empty(0)
    scaled = ens.tree_scale[ens.node_tree] * ens.value[:, 0]
    return np.exp(-params[0] * scaled)


def boosting_node_stats(ens, rows, y, w, block, n_blocks, *, leave_one_out=False,
                        n_jobs=None, bar=None, out=None, base_margin=None):
    """(NodeStats of the held-out rows, False: not class targets); with
    ``leave_one_out``, n_blocks + 1 blocks: the leave-one-block-out statistics, then the
    total (``NodeStats.blocks`` takes either part)."""
    stats, _ = staged_pass(ens, rows, y, w, block, n_blocks, n_jobs=n_jobs, bar=bar,
                           keep_margin=False, leave_one_out=leave_one_out, out=out,
                           base_margin=base_margin)
    return NodeStats.from_array(stats, boosting=True), False

"""Python glue between a TreeEnsemble, the row source and the routing kernels."""

import numba
import numpy as np

from .._input import RowSource
from .route import BATCH, ROW_BLOCK, add_trees_chunk, apply_chunk
from .threads import numba_threads

# trees with more nodes than this (deep forests) are routed in large row blocks
LARGE_TREE_NODES = 1024
MAX_ROW_BLOCK = 16384


def row_block(ens, n_rows):
    """Rows per parallel task of the routing kernels (call inside ``numba_threads``).

    A task passes its rows through every tree in turn. Small trees (boosting) stay in
    cache across tasks, so small tasks (512 rows) are best; a deep forest (hundreds of
    KB per tree) is read from memory once per task, so its tasks are as large as
    possible (up to 16,384 rows) while every thread still gets about four.
    """
    if ens.n_nodes <= LARGE_TREE_NODES * ens.n_trees:
        return ROW_BLOCK
    per_task = -(-n_rows // (4 * numba.get_num_threads()))
    per_task = -(-per_task // BATCH) * BATCH
    return int(min(MAX_ROW_BLOCK, max(ROW_BLOCK, per_task)))


def routing_flags(ens, X):
    """(strict, round32) for the kernels: rounding x to float32 is skipped when X already
    is float32, where it changes nothing."""
    return ens.comparison == "<", bool(ens.round_float32 and X.dtype != np.float32)


def predict_ensemble(ens, X, *, n_jobs=None, base_margin=None):
    """Raw margin. An averaged forest sums its trees in order and divides once, as
    scikit-learn does, so equal predictions are bitwise equal (ties stay ties).
    ``base_margin``: per-row offsets (``offsets.py``, ``TreeEnsemble.start_margin``)."""
    from ..offsets import check_base_margin

    rows = X if isinstance(X, RowSource) else RowSource(X, ens)
    offset = check_base_margin(base_margin, rows.n_rows, ens)
    out = np.empty((rows.n_rows, ens.n_outputs))
    out[:] = ens.base_score if offset is None else ens.start_margin(offset)
    scale, divisor = _forest_scale(ens)
    all_trees = np.arange(ens.n_trees)
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            strict, round32 = routing_flags(ens, chunk)
            add_trees_chunk(chunk, out[start:start + chunk.shape[0]], all_trees, 1.0,
                            ens.tree_offsets, ens.tree_output, scale, ens.value,
                            *ens.routing_arrays(), strict, round32,
                            row_block(ens, chunk.shape[0]))
    if divisor != 1.0:
        out /= divisor
    return out


def _forest_scale(ens):
    """(per-tree scale for the kernel, final divisor): an averaging forest is summed
    with unit scales and divided by its tree count."""
    T = ens.n_trees
    if ens.kind == "forest" and np.all(ens.tree_scale == 1.0 / T) and not ens.base_score.any():
        return np.ones(T), float(T)
    return ens.tree_scale, 1.0


def apply_ensemble(ens, X, *, n_jobs=None):
    rows = X if isinstance(X, RowSource) else RowSource(X, ens)
    out = np.empty((rows.n_rows, ens.n_trees), dtype=np.int32)
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            strict, round32 = routing_flags(ens, chunk)
            apply_chunk(chunk, out[start:start + chunk.shape[0]], ens.tree_offsets,
                        *ens.routing_arrays(), strict, round32,
                        row_block(ens, chunk.shape[0]))
    return out


def forest_node_stats(ens, rows, Z, w, block, n_blocks, *, inbag_bits=None, one_hot=False,
                      leave_one_out=False, n_jobs=None, bar=None, out=None):
    """Node statistics (2 + value_dim, n_nodes, n_blocks) of the forest targets ``Z``
    ((value_dim, ...), the class sums alone, for one-hot rows of ``Z``: ``one_hot=True``,
    see node_stats.py).

    ``inbag_bits`` (packed, one row per tree) restricts each tree to its out-of-bag rows.
    ``leave_one_out``: n_blocks + 1 blocks instead, blocks b < n_blocks the
    leave-one-block-out statistics and the last the total, see ``propagate_up``.
    ``out``: a zero-filled float64 array of the statistics' shape to fill instead of a
    new one (``forest_stats_shape``; see ``kernels/scratch.py``).
    """
    from .node_stats import empty_inbag, forest_leaf_stats

    one_hot = bool(one_hot)
    if one_hot and ens.value_dim != ens.n_outputs:
        raise ValueError(f"one_hot statistics need trees that score every class (value_dim "
                         f"{ens.value_dim} == n_outputs {ens.n_outputs}): the class sums "
                         "of a node then add up to its row count")
    shape = forest_stats_shape(ens, n_blocks, one_hot, leave_one_out)
    if out is not None and out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, the statistics need {shape}")
    stats = np.zeros(shape) if out is None else out
    use_inbag = inbag_bits is not None
    bits = inbag_bits if use_inbag else empty_inbag()
    Z = np.ascontiguousarray(Z, dtype=np.float64)
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks(split=bar is not None and bar.enabled):
            strict, round32 = routing_flags(ens, chunk)
            forest_leaf_stats(chunk, start, Z, w, block, bits, use_inbag, one_hot, stats,
                              ens.tree_offsets, ens.tree_output, *ens.routing_arrays(),
                              strict, round32)
            if bar is not None:
                bar.update(chunk.shape[0])
        return fill_internal_stats(ens, stats, leave_one_out)


def forest_stats_shape(ens, n_blocks, one_hot, leave_one_out):
    """Shape of ``forest_node_stats``'s statistics."""
    return ((0 if one_hot else 2) + ens.value_dim, ens.n_nodes,
            n_blocks + bool(leave_one_out))


def fill_internal_stats(ens, stats, leave_one_out):
    """Sum leaf statistics up the trees, in place, and return them; ``leave_one_out``:
    ``stats`` has a last, spare block, which receives the total, and the blocks before
    it become leave-one-block-out statistics (see ``propagate_up``)."""
    from .node_stats import propagate_up

    propagate_up(ens.postorder, ens.tree_offsets, ens.left, ens.right, stats,
                 bool(leave_one_out))
    return stats

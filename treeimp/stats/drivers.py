"""The two accumulation drivers: evaluation rows -> per-node, per-block statistics.

Forests (``forest_node_stats``): every tree against the rows' own target (y, or one-hot
classes), optionally on each tree's out-of-bag rows only. Boosting (``staged_pass``):
tree t against -g, the negative gradient of the model's own loss at the held-out margin
before t's stage (measures.md, "The per-tree target"). Both add rows into the leaves
they reach (``forest_leaf_sums``, ``staged_leaf_sums``: per row block and leaf slot,
what :meth:`treeimp.Explainer.accumulate` keeps; they add up across chunks of rows).
``forest_node_stats`` and ``staged_pass`` lay them out by node (``node_planes``) and
``fill_internal_stats`` sums them up the trees (and forms the leave-one-block-out
replicates).
"""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..inputs.targets import RISK_SETS, n_target_columns
from ..inputs.threads import numba_threads
from ..kernels.forest_stats import propagate_up
from ..kernels.gradients import PRECOMPUTED
from ..kernels.staged import N_TERMS
from ..model.kernel_inputs import Loss, RowInputs, StagedTrees
from ..model.losses import (
    LOGISTIC,
    SMOOTHED,
    check_target,
    check_weights,
    loss_spec,
    smoothed_spec,
)
from ..model.ranking import is_ranking
from ..model.routing import routing_flags
from .cox import cox_targets
from .linear_leaves import add_leaf_model_sums, linear_chunk_rows, linear_leaf_targets
from .ranking import ranking_leaf_sums

# rows per staged kernel call, whatever the input: a converted chunk of a DataFrame (one
# alive at a time) stays a small part of the input, and the per-block buffers (4 x
# n_leaves) are still flushed rarely enough not to matter. The kernel flushes them once
# per call, so the sums depend on this number: a numpy array and the same rows as a
# DataFrame are chunked alike (bitwise equal results)
CHUNK_ROWS = 1 << 16


# ------------------------------------------------------------------------ forests
def forest_leaf_sums(ens, rows, Z, w, block, n_blocks, *, inbag_bits=None, positions=None,
                     one_hot=False, n_jobs=None, bar=None, out=None):
    """Leaf sums (n_leaves, n_blocks, 2 + value_dim) of the forest targets ``Z``
    ((n, value_dim); the class sums alone for one-hot rows of ``Z``: ``one_hot=True``,
    see kernels/forest_stats.py): what :meth:`treeimp.Explainer.accumulate` keeps.

    ``inbag_bits`` (packed, one row per tree) restricts each tree to its out-of-bag rows;
    ``positions`` (n,) are the rows' global positions that index it (default 0 .. n-1).
    ``out``: a zero-filled float64 array of ``forest_leaf_shape`` to add into instead of
    a new one.
    """
    ens.refuse_linear_leaves("held-out node statistics of a forest")
    one_hot = bool(one_hot)
    if one_hot and ens.value_dim != ens.n_outputs:
        raise ValueError(f"one_hot statistics need trees that score every class (value_dim "
                         f"{ens.value_dim} == n_outputs {ens.n_outputs}): the class sums "
                         "of a node then add up to its row count")
    stats = _out(out, forest_leaf_shape(ens, n_blocks, one_hot))
    use_inbag = inbag_bits is not None
    bits = inbag_bits if use_inbag else empty_inbag()
    pos = (np.zeros(0, np.int64) if not use_inbag  # read only for in-bag bits
           else np.arange(rows.n_rows, dtype=np.int64) if positions is None
           else np.ascontiguousarray(positions, dtype=np.int64))
    rows_in = RowInputs(np.ascontiguousarray(Z, dtype=np.float64), w,
                        np.ascontiguousarray(block, dtype=np.int32), pos,
                        np.zeros((0, 1)))
    routing = ens.routing_arrays()
    backend = get_backend()
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks(split=bar is not None and bar.enabled):
            strict, round32 = routing_flags(ens, chunk)
            backend.forest_leaf_stats(chunk, start, rows_in, bits, use_inbag, one_hot, stats,
                                      ens.tree_offsets, ens.tree_output, routing, strict,
                                      round32, ens.leaf_slots.slot)
            if bar is not None:
                bar.update(chunk.shape[0])
            del chunk  # a converted chunk is freed before the next one is made
    return stats


def forest_node_stats(ens, rows, Z, w, block, n_blocks, *, inbag_bits=None, positions=None,
                      one_hot=False, leave_one_out=False, propagate=True, n_jobs=None,
                      bar=None):
    """Node statistics (2 + value_dim, n_nodes, n_blocks) of the forest targets: the
    leaf sums of :func:`forest_leaf_sums` (same arguments) laid out by node
    (:func:`node_planes`). ``leave_one_out``: n_blocks + 1 blocks instead, blocks
    b < n_blocks the leave-one-block-out statistics and the last the total, see
    ``propagate_up``. ``propagate=False``: leaf sums only (internal nodes stay zero; a
    spare last block with ``leave_one_out`` stays zero)."""
    leaves = forest_leaf_sums(ens, rows, Z, w, block, n_blocks, inbag_bits=inbag_bits,
                              positions=positions, one_hot=one_hot, n_jobs=n_jobs, bar=bar)
    with numba_threads(n_jobs):
        return node_planes(ens, leaves, leave_one_out, propagate)


def forest_leaf_shape(ens, n_blocks, one_hot):
    """Shape of ``forest_leaf_sums``'s statistics."""
    return (ens.leaf_slots.node.shape[0], n_blocks, (0 if one_hot else 2) + ens.value_dim)


def node_planes(ens, leaves, leave_one_out, propagate):
    """Leaf sums (n_leaves, n_blocks, D) laid out by node, one plane per term: (D, n_nodes,
    n_blocks + leave_one_out), internal nodes zero or (``propagate``) the sums of their
    leaves; ``leave_one_out``: a last block more, spare or (``propagate``) the total,
    the blocks before it leave-one-block-out sums (see ``fill_internal_stats``)."""
    _, B, D = leaves.shape
    planes = np.zeros((D, ens.n_nodes, B + bool(leave_one_out)))
    planes[:, ens.leaf_slots.node, :B] = leaves.transpose(2, 0, 1)
    if propagate:
        fill_internal_stats(ens, planes, leave_one_out)
    return planes


def fill_internal_stats(ens, stats, leave_one_out):
    """Sum leaf statistics up the trees, in place, and return them; ``leave_one_out``:
    ``stats`` has a last, spare block, which receives the total, and the blocks before
    it become leave-one-block-out statistics (see ``propagate_up``)."""
    propagate_up(ens.postorder, ens.tree_offsets, ens.left, ens.right, stats,
                 bool(leave_one_out))
    return stats


def _out(out, shape):
    """``out`` after checking its shape, or a new zero-filled array of ``shape``."""
    if out is None:
        return np.zeros(shape)
    if out.shape != shape:
        raise ValueError(f"out has shape {out.shape}, the statistics need {shape}")
    return out


# ------------------------------------------------------------------------ boosting
def stage_starts(ens):
    """(n_stages + 1,) index of the first tree of every stage."""
    change = np.flatnonzero(np.diff(ens.tree_stage) != 0) + 1
    return np.concatenate([[0], change, [ens.n_trees]]).astype(np.int64)


def staged_leaf_sums(ens, rows, y, w, block, n_blocks, *, n_jobs=None, bar=None,
                     keep_margin=True, out=None, base_margin=None, query=None,
                     leaf_models=None):
    """Run the staged kernel: (leaf sums (n_leaves, n_blocks, 4) of the terms n', S',
    H', R' (kernels/staged.py), final margin (n, n_outputs), or None without
    ``keep_margin``). ``w``: one weight per row, or one for all. ``out``: a zero-filled
    float64 array of ``staged_leaf_shape`` to add into instead of a new one.
    ``base_margin``: per-row offsets ((n, n_outputs), ``offsets.check_base_margin``):
    every row's held-out margin starts at ``ens.start_margin(base_margin)`` (base score +
    offset; XGBoost: the offset), so the gradients are the deployed model's. ``y``: one
    target per row, or (n, n_outputs) for a regression objective on several targets.
    Vector-leaf trees are split into one tree per output first
    (``vector_leaves.per_output_trees``). A learning-to-rank model needs ``query``, the
    bounds of its rows' queries (``ranking.query_bounds``): its gradients are computed
    query by query (stats/ranking.py). A model with linear leaf models (LightGBM
    ``linear_tree=True``) has its g, h computed chunk by chunk before the kernel, at the
    true margins (stats/linear_leaves.py; its chunks are smaller: 16 bytes per row,
    round and output); ``leaf_models``: None, or the arrays of
    ``linear_leaves.leaf_model_shapes`` into which the same pass adds the leaf-model
    block sums."""
    linear = ens.linear_leaves is not None
    if leaf_models is not None and not linear:
        raise ValueError("leaf-model sums need a model with linear leaf models")
    if is_ranking(ens.objective):
        ens.refuse_linear_leaves("held-out node statistics of a learning-to-rank model")
        if query is None:
            raise ValueError(f"objective {ens.objective.source or ens.objective.name!r} ranks "
                             "the rows of each query: pass the queries (qid= or group=)")
        return ranking_leaf_sums(ens, rows, y, w, block, n_blocks, query, n_jobs=n_jobs,
                                 bar=bar, keep_margin=keep_margin, out=out,
                                 base_margin=base_margin)
    if ens.value_dim != 1:
        raise ValueError(f"this model's trees have {ens.value_dim} values per leaf (vector-"
                         "leaf trees): split them with vector_leaves.per_output_trees first")
    check_weights(ens.objective, w)
    smoothed = ens.objective.name in SMOOTHED
    risk_sets = ens.objective.name in RISK_SETS  # survival:cox: g, h from cox_targets
    if linear and (risk_sets or smoothed):
        ens.refuse_linear_leaves(f"held-out node statistics of objective "
                                 f"{ens.objective.name!r}")
    code, params = (smoothed_spec(ens.objective, ens.n_outputs,
                                  np.zeros((len(stage_starts(ens)) - 1, ens.n_outputs)))
                    if smoothed else (None, None) if risk_sets
                    else loss_spec(ens.objective, n_outputs=ens.n_outputs))
    y = np.asarray(y.to_numpy() if hasattr(y, "to_numpy") else y)
    by_chunk = not smoothed and not risk_sets
    # the smoothed and risk-set objectives read every row's target before the pass; the
    # others' are checked here chunk by chunk and converted again, chunk by chunk, in the
    # pass (row0 0, the chunk's own targets, weights and offsets): no float64 target of
    # every row beside the pass
    # by chunk: ``checked`` the converted targets of all rows when the check saw them in
    # one piece, which the pass then reads instead of converting them again
    checked = _checked_targets(ens, y) if by_chunk else None
    y_t = np.zeros(0) if by_chunk else _staged_targets(ens, y)
    stats = _out(out, staged_leaf_shape(ens, n_blocks))
    margin = np.empty((rows.n_rows if keep_margin else 0, ens.n_outputs))
    row_start = (np.zeros((0, ens.n_outputs)) if base_margin is None
                 else ens.start_margin(base_margin))
    block = np.asarray(block)
    if risk_sets:  # every row's g, h of every round, over all the rows
        code, params, y_t = cox_targets(ens, rows, y_t, row_start, stage_starts(ens),
                                        CHUNK_ROWS, n_jobs)
    rows_in = RowInputs(y_t, w, np.zeros(0, np.int32), np.zeros(0, np.int64), row_start)
    loss = Loss(code, params, ens.base_score)
    trees = staged_trees(ens, PRECOMPUTED if linear else code, params)
    routing = ens.routing_arrays()
    if smoothed:  # the scale of every round, from all the rows, before the pass
        scales = smoothed_scales(ens, rows, rows_in, loss, trees, routing, n_jobs)
        code, params = smoothed_spec(ens.objective, ens.n_outputs, scales)
        loss = Loss(code, params, ens.base_score)
    slot = ens.leaf_slots.slot
    backend = get_backend()
    chunk_rows = (linear_chunk_rows(ens, len(trees.stage_start) - 1, CHUNK_ROWS) if linear
                  else CHUNK_ROWS)
    # the statistic blocks are few, long and equal: a thread slowed by another process
    # should leave its remaining blocks to the other (the numba backend's Python threads
    # take blocks one at a time; dynamic=True does the same for a backend's prange loops)
    with numba_threads(n_jobs, dynamic=True):
        for start, chunk in rows.chunks(chunk_rows, split=True):
            stop = start + chunk.shape[0]
            strict, round32 = routing_flags(ens, chunk)
            order, bounds = rows_by_block(block[start:stop], n_blocks)
            row0, chunk_in = ((0, _chunk_inputs(ens, y, w, row_start, start, stop,
                                                checked))
                              if by_chunk else (start, rows_in))
            if linear:  # the chunk's g, h at its true margins (by_chunk: rows from 0)
                _linear_chunk_stats(ens, chunk, start, order, bounds, chunk_in, loss, trees,
                                    routing, slot, stats, margin, keep_margin,
                                    block[start:stop], leaf_models)
            else:
                # the first chunk adds into zeroed statistics (``out`` is zero-filled)
                backend.staged_leaf_stats(chunk, row0, order, bounds, chunk_in, loss, trees,
                                          routing, strict, round32, slot, stats,
                                          margin[start:stop] if keep_margin else margin,
                                          start == 0)
            del chunk_in
            if bar is not None:
                bar.update(chunk.shape[0])
            del chunk  # a converted chunk is freed before the next one is made
    return stats, (margin if keep_margin else None)


def _linear_chunk_stats(ens, chunk, start, order, bounds, chunk_in, loss, trees, routing,
                        slot, stats, margin, keep_margin, block, leaf_models):
    """The staged kernel on one chunk of a linear-leaf model: the chunk's g, h of every
    round from ``linear_leaf_targets`` as its targets (its rows numbered from 0), its
    final margins (linear terms included) into ``margin`` from row ``start`` on, its
    leaf-model block sums into ``leaf_models`` (unless None). ``chunk_in``: the chunk's
    own targets, weights and start margins (``_chunk_inputs``)."""
    stop = start + chunk.shape[0]
    code, params, targets, final, leaves = linear_leaf_targets(
        ens, chunk, chunk_in.target, chunk_in.row_start, trees.stage_start, loss.code,
        loss.params)
    w = chunk_in.w
    chunk_in = RowInputs(targets, w, chunk_in.block, chunk_in.pos,
                         np.zeros((0, ens.n_outputs)))
    strict, round32 = routing_flags(ens, chunk)
    get_backend().staged_leaf_stats(chunk, 0, order, bounds, chunk_in,
                                    Loss(code, params, loss.base_score), trees, routing,
                                    strict, round32, slot, stats,
                                    np.zeros((0, ens.n_outputs)), start == 0)
    if keep_margin:
        margin[start:stop] = final
    if leaf_models is not None:
        add_leaf_model_sums(ens, chunk, leaves, targets, trees.stage_start, w, block,
                            leaf_models)


def _staged_targets(ens, y):
    """The targets as the staged kernel reads them: float64, row-major (a row's targets
    side by side), checked against the objective (``losses.check_target``)."""
    return np.ascontiguousarray(check_target(ens.objective, y, ens.classes,
                                             n_target_columns(ens)), dtype=np.float64).ravel()


def _checked_targets(ens, y):
    """Check every row's target (``_staged_targets``) a chunk of rows at a time, keeping
    none; the converted targets of all rows when they are one chunk, else None. A chunk
    that fails is reported by the check of all rows, so that the error counts and names
    them all, as before."""
    try:
        if y.ndim == 0 or y.shape[0] == 0:
            raise ValueError("checked whole")
        if y.shape[0] <= CHUNK_ROWS:
            return _staged_targets(ens, y)
        for start in range(0, y.shape[0], CHUNK_ROWS):
            _staged_targets(ens, y[start:start + CHUNK_ROWS])
    except Exception as exc:  # noqa: BLE001 - the whole check raises its own error
        _staged_targets(ens, y)
        raise exc
    return None


def _chunk_inputs(ens, y, w, row_start, start, stop, checked=None):
    """kernel_inputs.RowInputs of the rows start .. stop - 1 alone (the kernel's row0 0):
    their targets (converted as for all rows, so the same values; ``checked``, the
    converted targets of all rows or None, when they are all the rows), weights and
    start margins."""
    whole = checked is not None and start == 0 and stop == y.shape[0]
    return RowInputs(checked if whole else _staged_targets(ens, y[start:stop]),
                     w if w.shape[0] == 1 else w[start:stop], np.zeros(0, np.int32),
                     np.zeros(0, np.int64),
                     row_start if row_start.shape[0] == 0 else row_start[start:stop])


# row parts of the smoothed-scale pre-pass: fixed, so that its sums do not depend on
# the thread count
SCALE_PARTS = 16


def smoothed_scales(ens, rows, rows_in, loss, trees, routing, n_jobs=None):
    """(n_stages, n_outputs) scales S of XGBoost >= 3.4's smoothed objectives over all of
    ``rows`` at their staged margins: (sum w sqrt|m - y| / sum w)^2 per round and output,
    0 where |sum w| < 1e-6 (XGBoost's CloseTo), as XGBoost computes them over its
    training rows (``losses.smoothed_spec``)."""
    n_stages = len(trees.stage_start) - 1
    sums = np.zeros((SCALE_PARTS, n_stages, ens.n_outputs))
    backend = get_backend()
    with numba_threads(n_jobs, dynamic=True):
        for start, chunk in rows.chunks(CHUNK_ROWS, split=True):
            strict, round32 = routing_flags(ens, chunk)
            backend.staged_scale_sums(chunk, start, rows_in, loss, trees, routing, strict,
                                      round32, sums)
            del chunk  # a converted chunk is freed before the next one is made
    w = rows_in.w
    total_w = float(w[0]) * rows.n_rows if w.shape[0] == 1 else float(np.sum(w))
    if abs(total_w) < 1e-6:
        return np.zeros((n_stages, ens.n_outputs))
    return (sums.sum(axis=0) / total_w) ** 2


def staged_pass(ens, rows, y, w, block, n_blocks, *, n_jobs=None, bar=None,
                keep_margin=True, leave_one_out=False, propagate=True, base_margin=None):
    """(stats (4, n_nodes, n_blocks), final margin (n, n_outputs) or None without
    ``keep_margin``): the leaf sums of :func:`staged_leaf_sums` (same arguments) laid
    out by node (:func:`node_planes`). ``leave_one_out``: stats has n_blocks + 1 blocks,
    the leave-one-block-out statistics and last the total (see
    ``kernels.node_stats.propagate_up``). ``propagate=False``: leaf sums only."""
    leaves, margin = staged_leaf_sums(ens, rows, y, w, block, n_blocks, n_jobs=n_jobs,
                                      bar=bar, keep_margin=keep_margin,
                                      base_margin=base_margin)
    with numba_threads(n_jobs):  # many short iterations: equal shares up front
        return node_planes(ens, leaves, leave_one_out, propagate), margin


def rows_by_block(local_block, n_blocks):
    """(order, bounds): the chunk's local rows sorted by block (stable), and where each
    block's run starts (n_blocks + 1), for kernels whose threads own whole blocks."""
    order = np.argsort(local_block, kind="stable").astype(np.int64, copy=False)
    bounds = np.searchsorted(local_block[order], np.arange(n_blocks + 1)).astype(np.int64)
    return order, bounds


def staged_trees(ens, code, params):
    """The per-tree arrays of the staged kernels (kernel_inputs.StagedTrees)."""
    return StagedTrees(ens.tree_offsets, ens.tree_output,
                       np.ascontiguousarray(ens.tree_scale, dtype=np.float64), ens.value,
                       _logistic_leaf_factor(ens, code, params), stage_starts(ens))


def staged_leaf_shape(ens, n_blocks):
    """Shape of ``staged_leaf_sums``'s statistics."""
    return (ens.leaf_slots.node.shape[0], n_blocks, N_TERMS)


def _logistic_leaf_factor(ens, code, params):
    """Binary logistic loss: exp(-s * scale * value) per node, the factor by which a row
    reaching that leaf changes exp(-s m). The staged kernel keeps exp(-s m) of every row
    up to date with one product per tree instead of one exp per round (relative error
    grows by at most ~1e-16 per tree); other losses: an empty array. Only leaves are
    read: internal nodes get 1 (their exp is not taken), and the values are scaled only
    when some tree's scale is not 1 (XGBoost DART)."""
    if code != LOGISTIC or ens.n_outputs != 1:
        return np.empty(0)
    leaves = ens.leaf_slots.node
    scaled = ens.value[leaves, 0]
    if np.any(ens.tree_scale != 1.0):
        scaled = ens.tree_scale[ens.node_tree[leaves]] * scaled
    out = np.ones(ens.n_nodes)
    out[leaves] = np.exp(-params[0] * scaled)
    return out


def empty_inbag():
    """The in-bag bits argument of a kernel that evaluates every row (not read)."""
    return np.zeros((1, 1), np.uint8)

"""The staged statistics of learning-to-rank models: held-out gradients query by query.

A row's gradient under a ranking objective depends on the margins of its whole query
(model/ranking.py), so the rows are taken in batches of whole queries: every row of a
chunk is routed through every tree once (its leaf per tree), queries that end within the
rows routed so far are processed (margins before every stage, then g and h per row and
stage, then each row's terms added into its leaves: kernels/ranking_stats.py), and the
rows of a query that continues into the next chunk wait for it. Memory: the routed rows
(rows x trees node ids) and their margins, g, h (rows x stages), a chunk plus the
largest query at a time.
"""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..inputs.threads import numba_threads
from ..kernels.ranking_gradients import ranking_grad_hess
from ..kernels.ranking_stats import add_stage_terms, stage_margins
from ..kernels.staged import N_TERMS
from ..model.offsets import check_base_margin
from ..model.ranking import check_query_weights, check_ranking_labels, ranking_spec
from ..model.routing import routing_flags, row_block

# bytes of per-row arrays (node ids, margins, g, h) a batch of routed rows may take
BATCH_BYTES = 1 << 26
MAX_CHUNK_ROWS = 1 << 16


def ranking_leaf_sums(ens, rows, y, w, block, n_blocks, bounds, *, n_jobs=None, bar=None,
                      keep_margin=True, out=None, base_margin=None):
    """``drivers.staged_leaf_sums`` for a ranking model (same arguments and results)
    whose rows form the queries ``bounds`` (``ranking.query_bounds``)."""
    n_leaves = ens.leaf_slots.node.shape[0]
    stats = np.zeros((n_leaves, n_blocks, N_TERMS)) if out is None else out
    if stats.shape != (n_leaves, n_blocks, N_TERMS):
        raise ValueError(f"out has shape {stats.shape}, the statistics need "
                         f"{(n_leaves, n_blocks, N_TERMS)}")
    y = check_ranking_labels(ens.objective, y)
    if y.shape[0] != rows.n_rows:
        raise ValueError(f"y has {y.shape[0]} labels for {rows.n_rows} rows")
    block = np.ascontiguousarray(block, dtype=np.int64)
    w = np.ascontiguousarray(w, dtype=np.float64)
    check_query_weights(ens.objective, w, bounds)
    margin = np.empty((rows.n_rows, 1)) if keep_margin else None
    slot = ens.leaf_slots.slot
    stages = _tree_stages(ens)
    with numba_threads(n_jobs):
        for r0, r1, nodes, g, h, m in _query_batches(ens, rows, y, w, bounds, base_margin):
            add_stage_terms(nodes, stages, slot, block[r0:r1],
                            w if w.shape[0] == 1 else w[r0:r1], g, h, stats)
            if keep_margin:
                margin[r0:r1, 0] = m[:, -1]
            if bar is not None:
                bar.update(r1 - r0)
    return stats, margin


def ranking_gradients(ens, rows, y, bounds, base_margin=None, n_jobs=None, w=None):
    """(margins (n, n_stages + 1), g (n, n_stages), h (n, n_stages)): every row's margin
    before every stage (and its final margin) and its gradient and hessian there (per
    row, not multiplied by its weight ``w``; None: 1)."""
    y = check_ranking_labels(ens.objective, y)
    w = np.ones(1) if w is None else np.ascontiguousarray(w, dtype=np.float64)
    base_margin = check_base_margin(base_margin, rows.n_rows, ens)
    n_stages = _tree_stages(ens)[-1] + 1 if ens.n_trees else 0
    M = np.empty((rows.n_rows, n_stages + 1))
    G = np.empty((rows.n_rows, n_stages))
    H = np.empty((rows.n_rows, n_stages))
    with numba_threads(n_jobs):
        for r0, r1, _, g, h, m in _query_batches(ens, rows, y, w, bounds, base_margin):
            M[r0:r1], G[r0:r1], H[r0:r1] = m, g, h
    return M, G, H


def _tree_stages(ens):
    """Every tree's stage, 0 .. n_stages - 1, increasing."""
    ts = np.asarray(ens.tree_stage)
    change = np.concatenate([[0], (np.diff(ts) != 0).astype(np.int64)])
    return np.cumsum(change).astype(np.int64)


def _query_batches(ens, rows, y, w, bounds, base_margin):
    """Yield (r0, r1, nodes, g, h, margins) for batches of whole queries, rows r0:r1."""
    T = ens.n_trees
    stages = _tree_stages(ens)
    n_stages = int(stages[-1]) + 1 if T else 0
    per_row = 8 * T + 8 * (3 * n_stages + 1)
    chunk_rows = int(max(1, min(MAX_CHUNK_ROWS, BATCH_BYTES // per_row)))
    code, params, gain, table = ranking_spec(ens.objective)
    start = (np.full(rows.n_rows, float(ens.base_score[0])) if base_margin is None
             else np.ascontiguousarray(ens.start_margin(base_margin)[:, 0]))
    offsets = ens.tree_offsets[:-1].astype(np.int64)
    scale = np.ascontiguousarray(ens.tree_scale, dtype=np.float64)
    value = np.ascontiguousarray(ens.value, dtype=np.float64)
    backend = get_backend()
    pending = np.empty((0, T), np.int64)
    p0 = 0  # the first pending row
    q = 0  # the first query not yet processed
    n_q = bounds.shape[0] - 1
    for c0, chunk in rows.chunks(chunk_rows, split=True):
        local = np.empty((chunk.shape[0], T), np.int32)
        strict, round32 = routing_flags(ens, chunk)
        backend.apply(chunk, local, ens.tree_offsets, ens.routing, strict, round32,
                      row_block(ens, chunk.shape[0]))
        del chunk  # a converted chunk is freed before the next one is made
        pending = np.concatenate([pending, local.astype(np.int64) + offsets])
        end = c0 + local.shape[0]
        q_end = int(np.searchsorted(bounds, end, side="right")) - 1  # queries done by end
        if q_end <= q:
            continue
        r1 = int(bounds[q_end])
        nodes = np.ascontiguousarray(pending[:r1 - p0])
        m = np.empty((r1 - p0, n_stages + 1))
        stage_margins(nodes, scale, value, stages, start[p0:r1], m)
        g = np.empty((r1 - p0, n_stages))
        h = np.empty((r1 - p0, n_stages))
        ranking_grad_hess(code, params, gain, table, bounds[q:q_end + 1] - p0,
                          np.ascontiguousarray(m[:, :n_stages]), y[p0:r1],
                          w if w.shape[0] == 1 else w[p0:r1], g, h)
        yield p0, r1, nodes, g, h, m
        pending = pending[r1 - p0:]
        p0, q = r1, q_end
    if q != n_q:
        raise ValueError(f"queries end at row {int(bounds[-1])} but there are "
                         f"{rows.n_rows} rows")

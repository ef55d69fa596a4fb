"""The default backend: the numba CPU kernels of ``treeimp/kernels/``, called with the
arguments the operations receive (``backends.Backend`` describes them). The statistics
kernels are serial and release the GIL: their blocks or ranges of trees run in Python
threads (``backends.threads``)."""

from __future__ import annotations

import numpy as np

from ..kernels.forest_stats import forest_leaf_stats
from ..kernels.full_trees import full_tree_layout
from ..kernels.gradients import LOGISTIC
from ..kernels.inbag_counts import inbag_leaf_counts
from ..kernels.route import add_trees_chunk, apply_chunk
from ..kernels.staged import COPY_ROW_BYTES, staged_block_stats, tight_objective
from ..kernels.staged_scale import staged_root_residual_sums
from .threads import run_tasks, task_ranges, thread_count


class NumbaBackend:
    """Routing and accumulation on the CPU, in parallel over numba's threads (the
    count the glue sets with ``inputs.threads.numba_threads``)."""

    def add_trees(self, X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                  routing, strict, round32, row_block):
        add_trees_chunk(X, out, trees, sign, tree_offsets, tree_output, tree_scale, value,
                        routing, strict, round32, row_block)

    def apply(self, X, out, tree_offsets, routing, strict, round32, row_block):
        apply_chunk(X, out, tree_offsets, routing, strict, round32, row_block)

    def forest_leaf_stats(self, X, row0, rows_in, inbag_bits, use_inbag, one_hot, stats,
                          tree_offsets, tree_output, routing, strict, round32, slot):
        ranges = task_ranges(tree_offsets.shape[0] - 1, thread_count())
        # (plain_walk, batch_walk): route.walk_plain when no tree has a node in
        # route.NOT_PLAIN, else walk_batch; the kernel is compiled with that walk alone
        walks = (True, None) if routing.plain.all() else (None, True)

        def trees(i):
            forest_leaf_stats(X, row0, rows_in, inbag_bits, use_inbag, one_hot, stats,
                              tree_offsets, tree_output, routing, strict, round32, slot,
                              ranges[i], ranges[i + 1], *walks)

        run_tasks(trees, len(ranges) - 1)

    def staged_leaf_stats(self, X, row0, order, block_start, rows_in, loss, trees, routing,
                          strict, round32, slot, stats, margin_out, fresh=False):
        # tasks of consecutive statistic blocks (a run's cells of ``stats`` are its
        # own). Into zeroed cells (``fresh``): one run on one thread; on several, about
        # four runs per thread of equal rows, so that a thread slowed by another process
        # leaves its remaining runs to the others. Otherwise one task per block with
        # rows (the kernel sums such a block in a buffer of its own).
        if fresh:
            cuts = _block_runs(block_start, thread_count())
            runs = list(zip(cuts[:-1], cuts[1:]))
        else:
            runs = [(b, b + 1) for b in range(block_start.shape[0] - 1)
                    if block_start[b + 1] > block_start[b]]
        # (general, logistic, squared): the one form of the objective's terms the kernel
        # is compiled for (True), the others None
        tight = tight_objective.py_func(loss.code, loss.base_score.shape[0])
        logistic = True if tight and loss.code == LOGISTIC else None
        squared = True if tight and loss.code != LOGISTIC else None
        general = None if tight else True
        # the walk (full_walk, plain_walk, batch_walk), one True and the kernel compiled
        # with that walk alone: every tree as a full binary tree; else no tree has a
        # categorical or zero-as-missing node (route.walk_plain); else route.walk_batch
        plain = bool(routing.plain.all())
        full = (full_tree_layout(trees.tree_offsets, routing.depth, routing.plain,
                                 routing.left, routing.right, routing.feature,
                                 routing.threshold, routing.flags, strict, X.shape[1])
                if plain and X.shape[1] * X.itemsize <= COPY_ROW_BYTES
                else _NO_LAYOUT)
        full_walk = True if full[0][-1] > 0 else None
        walks = (full_walk, True if plain and full_walk is None else None,
                 None if plain else True)

        def blocks(i):
            staged_block_stats(X, row0, order, block_start, runs[i][0], runs[i][1], rows_in,
                               loss, trees, routing, full, strict, round32, slot, stats,
                               margin_out, fresh, general, logistic, squared, *walks)

        run_tasks(blocks, len(runs))

    def staged_scale_sums(self, X, row0, rows_in, loss, trees, routing, strict, round32,
                          out):
        staged_root_residual_sums(X, row0, rows_in, loss, trees, routing, strict, round32,
                                  out)

    def inbag_counts(self, X, row0, inbag_bits, tree_offsets, routing, strict, round32,
                     counts):
        inbag_leaf_counts(X, row0, inbag_bits, tree_offsets, routing, strict, round32,
                          counts)


# ``full_trees.full_tree_layout``'s answer when no tree is laid out (its array types)
_NO_LAYOUT = (np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64),
              np.zeros(0, np.int64))


def _block_runs(block_start, n_threads):
    """Bounds (n_runs + 1) of runs of consecutive blocks of about equal rows: all the
    blocks in one run on one thread, about four runs per thread otherwise (never more
    runs than blocks; blocks without rows fall into the runs around them)."""
    n_blocks = block_start.shape[0] - 1
    n_runs = 1 if n_threads <= 1 else min(n_blocks, 4 * n_threads)
    if n_runs <= 1:
        return [0, n_blocks]
    rows = int(block_start[-1] - block_start[0])
    # the first block whose rows start at or after each run's share of the rows
    targets = block_start[0] + (rows * np.arange(1, n_runs)) // n_runs
    cuts = np.searchsorted(block_start[1:], targets, side="right") + 1
    return sorted({0, n_blocks, *(int(c) for c in cuts if 0 < c < n_blocks)})

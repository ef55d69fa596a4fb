"""survival:cox (XGBoost) and Cox (CatBoost) in the staged pass: every row's g, h of
every round, before the pass.

XGBoost's Cox gradient of a row sums over its risk set (the rows whose time is at
least its own) at the same round. The staged kernel sees one group of rows at a time,
so :func:`cox_targets` first routes all evaluation rows round by round (the margins
the staged kernel will reach, with the same arithmetic), computes the gradients of
every row and round over the risk sets of the evaluation rows
(``kernels/cox.py``), and hands them to the kernel as the rows' targets (2 values per
row and round: 16 bytes per row and round, plus 8 for the margins while they are
computed).
"""

from __future__ import annotations

import numpy as np

from ..backends import get_backend
from ..inputs.threads import numba_threads
from ..kernels.cox import cox_grad_hess_table, cox_sequential_grad_hess_table
from ..kernels.gradients import COX
from ..model.routing import routing_flags, row_block


def cox_targets(ens, rows, labels, row_start, stage_start, chunk_rows, n_jobs=None):
    """(code, params, targets) of survival:cox for the staged kernel: targets (n * 2 *
    n_stages,) row-major, each row's g, h at every round over all ``rows`` (risk sets of
    these rows, XGBoost's tie order: by |label|, then row order; objective params
    ``float32_times`` 1: times rounded to float32, ``sequential_ties`` 1: each event's
    risk set the rows at or after it in that order, CatBoost's, kernels/cox.py); params [0
    (the round, set by the kernel), n_stages]. ``labels`` (n,) XGBoost's (negative: censored);
    ``row_start`` (n, 1) the rows' margins before the first tree, or (0, 1): the base
    score; ``stage_start`` (n_stages + 1,) the first tree of every round."""
    labels = np.ascontiguousarray(labels, dtype=np.float64)
    flags = ens.objective.params
    if flags.get("float32_times", 0.0) == 1.0:  # CatBoost's float32 targets: times that
        labels = labels.astype(np.float32).astype(np.float64)  # round alike tie
    if flags.get("unstable_ties", 0.0) == 1.0:
        check_no_tied_events(labels)
    n = rows.n_rows
    n_stages = len(stage_start) - 1
    margins = np.empty((n_stages, n))
    current = np.empty((n, 1))
    current[:] = ens.base_score if row_start.shape[0] == 0 else row_start
    backend = get_backend()
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks(chunk_rows, split=True):
            stop = start + chunk.shape[0]
            strict, round32 = routing_flags(ens, chunk)
            block = row_block(ens, chunk.shape[0])
            m = current[start:stop]
            for st in range(n_stages):
                margins[st, start:stop] = m[:, 0]
                trees = np.arange(stage_start[st], stage_start[st + 1])
                backend.add_trees(chunk, m, trees, 1.0, ens.tree_offsets, ens.tree_output,
                                  np.ascontiguousarray(ens.tree_scale, dtype=np.float64),
                                  ens.value, ens.routing, strict, round32, block)
            del chunk  # a converted chunk is freed before the next one is made
        order = np.argsort(np.abs(labels), kind="stable").astype(np.int64)
        table = np.empty((n, 2 * n_stages))
        if flags.get("sequential_ties", 0.0) == 1.0:
            cox_sequential_grad_hess_table(labels, order, margins, table)
        else:
            cox_grad_hess_table(labels, order, margins, table)
    return COX, np.array([0.0, float(n_stages)]), table.ravel()


def check_no_tied_events(labels):
    """Refuse Cox labels with an event time shared by two rows (CatBoost <= 1.2.3).

    Those releases sort the rows by time with an unstable sort and give tied events one
    risk set in sort order (XGBoost's rule): the derivatives of rows that share an event
    time depend on an order of tied rows that the sort leaves to the implementation, which
    treeimp cannot reproduce. Without such ties every order, and the sequential rule of
    CatBoost >= 1.2.6, give the same derivatives."""
    times, group, counts = np.unique(np.abs(labels), return_inverse=True, return_counts=True)
    events = np.bincount(group.ravel(), weights=labels > 0.0, minlength=len(times))
    tied = (counts >= 2) & (events >= 1)
    if tied.any():
        raise ValueError(
            f"this Cox model was saved by CatBoost 1.2.3 or older, which orders tied times "
            f"by an unstable sort that treeimp cannot reproduce, and {int(counts[tied].sum())} "
            f"evaluation rows share an event time with another row ({int(tied.sum())} "
            f"times, the first {times[tied][0]:g}); their derivatives depend on that order. "
            "Evaluate on rows without tied event times, or refit with CatBoost >= 1.2.6")


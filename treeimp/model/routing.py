"""Python glue between a TreeEnsemble, the row source and the routing operations of the
active backend (``backends``)."""

import numba
import numpy as np

from ..backends import get_backend
from ..inputs.rows import RowSource
from ..inputs.threads import numba_threads
from ..kernels.linear_leaves import add_linear_gains
from ..kernels.route import BATCH, ROW_BLOCK
from .offsets import check_base_margin

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

    rows = X if isinstance(X, RowSource) else RowSource(X, ens)
    offset = check_base_margin(base_margin, rows.n_rows, ens)
    out = np.empty((rows.n_rows, ens.n_outputs))
    out[:] = ens.base_score if offset is None else ens.start_margin(offset)
    scale, divisor = _forest_scale(ens)
    all_trees = np.arange(ens.n_trees)
    backend = get_backend()
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            strict, round32 = routing_flags(ens, chunk)
            backend.add_trees(chunk, out[start:start + chunk.shape[0]], all_trees, 1.0,
                              ens.tree_offsets, ens.tree_output, scale, ens.value,
                              ens.routing, strict, round32,
                              row_block(ens, chunk.shape[0]))
            if ens.linear_leaves is not None:
                add_linear_terms(ens, chunk, out[start:start + chunk.shape[0]], scale)
            del chunk  # a converted chunk is freed before the next one is made
    if divisor != 1.0:
        out /= divisor
    return out


def add_linear_terms(ens, chunk, out, scale):
    """Add the linear leaf models' gains over their constant fallbacks (``const + b . x
    - value``, 0 for a row with a NaN among the leaf's features; ensemble docstring) to
    ``out``, the chunk's margins (call inside ``numba_threads``)."""
    leaves = np.empty((chunk.shape[0], ens.n_trees), dtype=np.int32)
    strict, round32 = routing_flags(ens, chunk)
    get_backend().apply(chunk, leaves, ens.tree_offsets, ens.routing, strict, round32,
                        row_block(ens, chunk.shape[0]))
    lin = ens.linear_leaves
    add_linear_gains(chunk, leaves, ens.tree_offsets, ens.tree_output,
                     np.ascontiguousarray(scale, dtype=np.float64), ens.value, lin.offset,
                     lin.count, lin.const, lin.feature, lin.coef, out)


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
    backend = get_backend()
    with numba_threads(n_jobs):
        for start, chunk in rows.chunks():
            strict, round32 = routing_flags(ens, chunk)
            backend.apply(chunk, out[start:start + chunk.shape[0]], ens.tree_offsets,
                          ens.routing, strict, round32, row_block(ens, chunk.shape[0]))
            del chunk  # a converted chunk is freed before the next one is made
    return out

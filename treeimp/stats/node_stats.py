"""Node statistics that add up: what :meth:`treeimp.Explainer.accumulate` returns.

Every measure is a formula of per-node sums over evaluation rows (measures.md): the
weighted row count, target sums, and for boosting the gradient and hessian sums. Sums of
two sets of rows are the sums of their statistics, so held-out data can be read in
chunks, by several processes or on a cluster, and the statistics added before the
importances are computed once (:meth:`treeimp.Explainer.finalize`).

A :class:`NodeStats` holds those sums at the leaves only (internal nodes are sums of
their leaves, formed when finalising), per row block (each row's block is fixed by its
global position, :mod:`treeimp.stats.blocks`), the weight of every block, the number of rows
seen, the global positions of those rows, and the settings that must agree for two of
them to be added: the model's fingerprint, in or out of bag, the number of blocks and the
block key, the target layout and the per-row measures accumulated.

The positions are kept as sorted runs ``[start, stop)`` of consecutive positions (one run
for a chunk given as a range, as streamed chunks and dask partitions are), merged when
statistics are added: adding statistics whose rows overlap (``s + s``, two chunks given
the same positions) would count those rows twice, and is refused, exactly.
"""

from __future__ import annotations

import numpy as np

# the layout of pickled NodeStats: 3 = leaf slots x blocks x terms and the runs of row
# positions seen (format 2: the same sums without the positions; format 1, unmarked, kept
# node planes)
STATE_FORMAT = 3

# target layouts of the statistic terms (kernels/forest_stats.py, kernels/staged.py)
REGRESSION = "regression"  # n', Q', S'_1..C
ONE_HOT = "one_hot"        # class sums S'_1..C (n' is their sum)
BOOSTING = "boosting"      # n', S' = sum of -g, H', R'


class NodeStats:
    """Per-leaf, per-block sums of one set of evaluation rows (see the module docstring).

    Add them with ``a + b`` or ``sum([...])``; pickle them to move them between
    processes (only the cells that received rows are stored). Attributes: ``n_rows`` (rows
    accumulated), ``rows`` (k, 2) int64 the sorted runs ``[start, stop)`` of their global
    positions, ``n_blocks``, ``block_weight`` (n_blocks,) the evaluation weight of every
    block, ``settings`` (what must agree to add), ``layout``. Statistics whose rows overlap
    do not add (ValueError naming the rows).
    """

    def __init__(self, array, *, layout, n_rows, rows, block_weight, settings, extra=None,
                 names=None, input_groups=None):
        # (n_leaves, n_blocks, n_terms): the sums at every leaf slot
        # (TreeEnsemble.leaf_slots) of every row block
        self._array = array
        self.layout = layout
        self.n_rows = int(n_rows)
        self.rows = _read_only(rows)
        self.block_weight = block_weight
        self.settings = dict(settings)
        # per-row measures: method -> (sums (n_blocks, n_trees, n_features), row weight
        # (n_blocks, n_trees)), see treeimp/attributions/shap_oob.py
        self.extra = dict(extra or {})
        self.names = names
        self.input_groups = input_groups

    @property
    def n_blocks(self) -> int:
        return self._array.shape[1]

    @property
    def leaf_sums(self) -> np.ndarray:
        """The sums (n_leaves, n_blocks, n_terms) at every leaf slot
        (``TreeEnsemble.leaf_slots``) of every row block, as accumulated: what the
        measures read. Treat as read-only (``a + b`` makes new statistics)."""
        return self._array

    @property
    def planes(self) -> np.ndarray:
        """The sums (n_planes, n_leaves, n_blocks), by leaf slot
        (``TreeEnsemble.leaf_slots``; a read-only view)."""
        v = self._array.transpose(2, 0, 1)
        v.flags.writeable = False
        return v

    def __add__(self, other):
        if isinstance(other, (int, float)) and other == 0:
            return self
        if not isinstance(other, NodeStats):
            return NotImplemented
        _check_same(self, other)
        rows = union_of_runs(self.rows, other.rows)
        extra = {m: (a + other.extra[m][0], b + other.extra[m][1])
                 for m, (a, b) in self.extra.items()}
        return NodeStats(self._array + other._array, layout=self.layout,
                         n_rows=self.n_rows + other.n_rows, rows=rows,
                         block_weight=self.block_weight + other.block_weight,
                         settings=self.settings, extra=extra,
                         names=self.names if self.names is not None else other.names,
                         input_groups=self.input_groups)

    __radd__ = __add__  # sum() starts from 0

    def __getstate__(self):
        # only the (leaf, block) cells that received rows, or the leaves that received
        # rows in some block with all their blocks, whichever is smaller: out of bag or
        # with few rows most cells of a chunk are empty
        L, B, D = self._array.shape
        cells = self._array.reshape(L * B, D)
        hit = np.flatnonzero(cells.any(axis=1))
        used = np.flatnonzero(self._array.any(axis=(1, 2)))
        state = {k: v for k, v in self.__dict__.items() if k != "_array"}
        state["_format"] = STATE_FORMAT
        state["_shape"] = self._array.shape
        if hit.size * (D * 8 + 8) < used.size * (B * D * 8 + 8):
            state["_cells"] = hit.astype(np.int64)
            state["_values"] = np.ascontiguousarray(cells[hit])
        else:
            state["_used"] = used.astype(np.int64)
            state["_values"] = np.ascontiguousarray(self._array[used])
        return state

    def __setstate__(self, state):
        fmt = state.get("_format")
        if fmt is None:
            raise ValueError("these NodeStats were pickled by an earlier treeimp, whose "
                             "statistics had another layout (node planes); accumulate the "
                             "rows again with this version")
        if fmt == 2:
            raise ValueError("these NodeStats were pickled by an earlier treeimp (format 2), "
                             "which did not record the positions of the rows accumulated, "
                             "so statistics of overlapping rows could not be refused; "
                             "accumulate the rows again with this version")
        if fmt != STATE_FORMAT:
            raise ValueError(f"these NodeStats were pickled in format {fmt!r}; this treeimp "
                             f"reads format {STATE_FORMAT}")
        del state["_format"]
        shape, values = _pickled_shape(state.pop("_shape")), state.pop("_values")
        cells, used = state.pop("_cells", None), state.pop("_used", None)
        self.__dict__.update(state)
        self.rows = _read_only(check_runs(np.asarray(state.get("rows")), self.n_rows))
        self._array = np.zeros(shape)
        L, B, D = shape
        if cells is not None:
            _check_index(cells, L * B, "cells")
            _check_values(values, (len(cells), D))
            self._array.reshape(L * B, D)[cells] = values
        else:
            _check_index(used, L, "leaves")
            _check_values(values, (len(used), B, D))
            self._array[used] = values

    def __repr__(self) -> str:
        where = "out of bag" if self.settings["oob"] else "held out"
        return (f"NodeStats({self.layout}, {self.n_rows} rows in {len(self.rows)} runs of "
                f"positions, {self.n_blocks} blocks, "
                f"{self._array.shape[0]} leaves, {where}"
                + (f", per-row measures {sorted(self.extra)}" if self.extra else "") + ")")


_SETTING_NAMES = {
    "model": "the model (its trees, values or settings differ)",
    "oob": "oob (out of bag vs held-out rows)",
    "n_blocks": "n_blocks",
    "block_key": "random_state (the row blocks' key; pass the same int random_state to "
                 "every chunk)",
    "layout": "the target layout",
    "extra": "the per-row measures accumulated (methods=)",
}


def _check_same(a, b):
    for key, what in _SETTING_NAMES.items():
        va, vb = a.settings.get(key), b.settings.get(key)
        if va != vb:
            shown = "" if key in ("model", "block_key") else f": {va!r} vs {vb!r}"
            raise ValueError(f"cannot add node statistics accumulated with different "
                             f"{what}{shown}")
    if a._array.shape != b._array.shape:
        raise ValueError(f"cannot add node statistics of shapes {a._array.shape} and "
                         f"{b._array.shape}")


_NO_RUNS = np.zeros((0, 2), np.int64)


def runs_of(positions) -> np.ndarray:
    """The sorted runs ``[start, stop)`` (k, 2) int64 of consecutive global row positions
    (a range, or an array of distinct non-negative ints in any order)."""
    if isinstance(positions, range):
        if len(positions) == 0:
            return _NO_RUNS
        return np.array([[positions.start, positions.stop]], np.int64)
    pos = np.sort(np.asarray(positions, dtype=np.int64))
    if pos.size == 0:
        return _NO_RUNS
    twice = np.flatnonzero(pos[1:] == pos[:-1])
    if twice.size:
        raise ValueError(f"rows: position {int(pos[twice[0]])} appears more than once; every "
                         "row of a chunk needs its own global position")
    breaks = np.flatnonzero(pos[1:] != pos[:-1] + 1)
    starts = np.concatenate([pos[:1], pos[breaks + 1]])
    stops = np.concatenate([pos[breaks] + 1, pos[-1:] + 1])
    return np.column_stack([starts, stops])


def union_of_runs(a, b) -> np.ndarray:
    """The runs of positions of two sets of rows, merged; ValueError if they overlap."""
    if len(a) == 0:
        return b
    if len(b) == 0:
        return a
    both = np.concatenate([a, b])
    both = both[np.argsort(both[:, 0], kind="stable")]
    # each input is disjoint: a run that starts before every earlier run has ended overlaps
    reach = np.maximum.accumulate(both[:, 1])
    clash = np.flatnonzero(both[1:, 0] < reach[:-1])
    if clash.size:
        i = int(clash[0])
        lo, hi = int(both[i + 1, 0]), int(min(both[i + 1, 1], reach[i]))
        raise ValueError(f"cannot add node statistics whose rows overlap: rows {lo} .. "
                         f"{hi - 1} are in both, and would be counted twice; give every "
                         "chunk its own global positions (rows=range(start, start + "
                         "len(X))) and add each chunk's statistics once")
    # runs that touch become one
    new = np.concatenate([[True], both[1:, 0] != both[:-1, 1]])
    last = np.concatenate([new[1:], [True]])
    return np.column_stack([both[new, 0], both[last, 1]])


def check_runs(runs, n_rows) -> np.ndarray:
    """Runs of positions read back (a pickle): sorted, disjoint, covering n_rows rows."""
    if runs.ndim != 2 or runs.shape[1] != 2 or runs.dtype.kind not in "iu":
        raise ValueError(f"the pickled row positions must be (k, 2) integer runs, got "
                         f"dtype {runs.dtype} and shape {runs.shape}")
    runs = runs.astype(np.int64)
    if runs.size and (runs[0, 0] < 0 or np.any(runs[:, 1] <= runs[:, 0])
                      or np.any(runs[1:, 0] <= runs[:-1, 1])):
        raise ValueError("the pickled row positions are not sorted, disjoint, non-empty "
                         "runs of non-negative positions")
    covered = int((runs[:, 1] - runs[:, 0]).sum())
    if covered != n_rows:
        raise ValueError(f"the pickled statistics count {n_rows} rows but their positions "
                         f"cover {covered}")
    return runs


def _read_only(a):
    a = np.asarray(a, dtype=np.int64).reshape(-1, 2)
    a.flags.writeable = False
    return a


def _pickled_shape(shape):
    if (not isinstance(shape, tuple) or len(shape) != 3
            or not all(isinstance(v, int) and v >= 0 for v in shape)):
        raise ValueError(f"the pickled statistics' shape must be 3 non-negative ints, got "
                         f"{shape!r}")
    return shape


def _check_index(index, bound, what):
    index = np.asarray(index)
    if index.ndim != 1 or index.dtype.kind not in "iu" or (
            index.size and (index.min() < 0 or index.max() >= bound)):
        raise ValueError(f"the pickled statistics' {what} must be ints in 0 .. {bound - 1}")


def _check_values(values, shape):
    if not isinstance(values, np.ndarray) or values.shape != shape:
        raise ValueError(f"the pickled statistics' values must have shape {shape}, got "
                         f"{getattr(values, 'shape', type(values).__name__)}")

"""Node statistics that add up: what :meth:`treeimp.Explainer.accumulate` returns.

Every measure is a formula of per-node sums over evaluation rows (measures.md): the
weighted row count, target sums, and for boosting the gradient and hessian sums. Sums of
two sets of rows are the sums of their statistics, so held-out data can be read in
chunks, by several processes or on a cluster, and the statistics added before the
importances are computed once (:meth:`treeimp.Explainer.finalize`).

A :class:`NodeStats` holds those sums at the leaves only (internal nodes are sums of
their leaves, formed when finalising), per row block (each row's block is fixed by its
global position, :mod:`treeimp.blocks`), the weight of every block, the number of rows
seen, and the settings that must agree for two of them to be added: the model's
fingerprint, in or out of bag, the number of blocks and the block key, the target
layout and the per-row measures accumulated.
"""

from __future__ import annotations

import numpy as np

# the layout of pickled NodeStats: 2 = leaf slots x blocks x terms (format 1, unmarked,
# kept node planes)
STATE_FORMAT = 2

# target layouts of the statistic terms (kernels/node_stats.py, kernels/staged.py)
REGRESSION = "regression"  # n', Q', S'_1..C
ONE_HOT = "one_hot"        # class sums S'_1..C (n' is their sum)
BOOSTING = "boosting"      # n', S' = sum of -g, H', R'


class NodeStats:
    """Per-leaf, per-block sums of one set of evaluation rows (see the module docstring).

    Add them with ``a + b`` or ``sum([...])``; pickle them to move them between
    processes (only the cells that received rows are stored). Attributes: ``n_rows`` (rows
    accumulated), ``n_blocks``, ``block_weight`` (n_blocks,) the evaluation weight of
    every block, ``settings`` (what must agree to add), ``layout``.
    """

    def __init__(self, array, *, layout, n_rows, block_weight, settings, extra=None,
                 names=None, input_groups=None):
        # (n_leaves, n_blocks, n_terms): the sums at every leaf slot
        # (TreeEnsemble.leaf_slots) of every row block
        self._array = array
        self.layout = layout
        self.n_rows = int(n_rows)
        self.block_weight = block_weight
        self.settings = dict(settings)
        # per-row measures: method -> (sums (n_blocks, n_trees, n_features), row weight
        # (n_blocks, n_trees)), see treeimp/shap_oob.py
        self.extra = dict(extra or {})
        self.names = names
        self.input_groups = input_groups

    @property
    def n_blocks(self) -> int:
        return self._array.shape[1]

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
        extra = {m: (a + other.extra[m][0], b + other.extra[m][1])
                 for m, (a, b) in self.extra.items()}
        return NodeStats(self._array + other._array, layout=self.layout,
                         n_rows=self.n_rows + other.n_rows,
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
        if state.get("_format") != STATE_FORMAT:
            raise ValueError("these NodeStats were pickled by an earlier treeimp, whose "
                             "statistics had another layout (node planes); accumulate the "
                             "rows again with this version")
        del state["_format"]
        shape, values = state.pop("_shape"), state.pop("_values")
        cells, used = state.pop("_cells", None), state.pop("_used", None)
        self.__dict__.update(state)
        self._array = np.zeros(shape)
        if cells is not None:
            self._array.reshape(shape[0] * shape[1], shape[2])[cells] = values
        else:
            self._array[used] = values

    def __repr__(self) -> str:
        where = "out of bag" if self.settings["oob"] else "held out"
        return (f"NodeStats({self.layout}, {self.n_rows} rows, {self.n_blocks} blocks, "
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

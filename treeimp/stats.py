"""Node statistics that add up: what :meth:`treeimp.Explainer.accumulate` returns.

Every measure is a formula of per-node sums over evaluation rows (measures.md): the
weighted row count, target sums, and for boosting the gradient and hessian sums. Sums of
two sets of rows are the sums of their statistics, so held-out data can be read in
chunks, by several processes or on a cluster, and the statistics added before the
importances are computed once (:meth:`treeimp.Explainer.finalize`).

A :class:`NodeStats` holds those sums at the leaves (internal nodes are filled when
finalising), per row block (each row's block is fixed by its global position,
:mod:`treeimp.blocks`), the weight of every block, the number of rows seen, and the
settings that must agree for two of them to be added: the model's fingerprint, in or
out of bag, the number of blocks and the block key, the target layout and the per-row
measures accumulated.
"""

from __future__ import annotations

import numpy as np

# target layouts of the statistic planes (kernels/node_stats.py, kernels/staged.py)
REGRESSION = "regression"  # n', Q', S'_1..C
ONE_HOT = "one_hot"        # class sums S'_1..C (n' is their sum)
BOOSTING = "boosting"      # n', S' = sum of -g, H', R'


class NodeStats:
    """Per-leaf, per-block sums of one set of evaluation rows (see the module docstring).

    Add them with ``a + b`` or ``sum([...])``; pickle them to move them between
    processes (only nodes that received rows are stored). Attributes: ``n_rows`` (rows
    accumulated), ``n_blocks``, ``block_weight`` (n_blocks,) the evaluation weight of
    every block, ``settings`` (what must agree to add), ``layout``.
    """

    def __init__(self, array, *, layout, n_rows, block_weight, settings, extra=None,
                 names=None, input_groups=None):
        # (n_planes, n_nodes, n_blocks + 1): the last block is spare (zero) so that
        # finalising can turn the blocks into leave-one-block-out sums in place
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
        return self._array.shape[2] - 1

    @property
    def planes(self) -> np.ndarray:
        """The sums (n_planes, n_nodes, n_blocks), leaves only (a read-only view)."""
        v = self._array[:, :, :-1]
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
        # only nodes that received rows (leaves reached): internal nodes are zero until
        # finalising, and out of bag or with few rows most leaves of a chunk are empty
        used = np.flatnonzero(self._array.any(axis=(0, 2)))
        state = {k: v for k, v in self.__dict__.items() if k != "_array"}
        state["_shape"] = self._array.shape
        state["_used"] = used.astype(np.int64)
        state["_values"] = np.ascontiguousarray(self._array[:, used, :-1])
        return state

    def __setstate__(self, state):
        shape, used, values = state.pop("_shape"), state.pop("_used"), state.pop("_values")
        self.__dict__.update(state)
        self._array = np.zeros(shape)
        self._array[:, used, :-1] = values

    def __repr__(self) -> str:
        where = "out of bag" if self.settings["oob"] else "held out"
        return (f"NodeStats({self.layout}, {self.n_rows} rows, {self.n_blocks} blocks, "
                f"{self._array.shape[1]} nodes, {where}"
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

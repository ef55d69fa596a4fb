"""Routing by the source library's own leaf indices, for splits treeimp cannot evaluate.

Some splits need state that only the library has: CatBoost's target-statistic (CTR)
splits compare a statistic computed from its hashed counter tables. For such a model the
parser attaches a :class:`LeafRouter` to the ensemble. The input layer
(``treeimp/inputs/rows.py``) then hands every chunk of the user's rows to ``route``, which
asks the library for each row's leaf in each of its trees and returns one number per row
and routing column; the routing kernels walk the normal-form trees on those numbers with
the router's per-node ``column`` and ``threshold`` instead of the model's own features
and thresholds. The kernels stay as they are (they never learn that a router exists),
and every node keeps its model ``feature``, so importances are credited to the model's
features as usual.

How a parser encodes leaves as numbers (its choice; the kernels only compare): number
the leaves of a tree 0, 1, ... from left to right; every node's leaves then form one
contiguous range, and a node sends a row left exactly when the row's leaf number is
below the first leaf of its right subtree, i.e. ``number <= first_right - 0.5``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LeafRouter:
    """``route(X_chunk) -> (n_rows, n_columns)`` float64 numbers the nodes compare.

    ``column`` (per node of the ensemble, int) is the routing column a split node reads,
    ``threshold`` (per node, float) the value at or below which the row goes left;
    ``description`` says which path routes, e.g. "leaf indices from CatBoost's
    calc_leaf_indexes" (shown in results).

    ``shap_feature`` (per node, int, or None: the model's ``feature``) is the column a
    node's TreeSHAP contribution is credited to, as the library's own SHAP credits it,
    or ``n_features + g``: the g-th entry of ``shap_groups`` (tuples of columns), one
    player of its own in TreeSHAP whose value is then shared equally among its columns
    (CatBoost: a target statistic of a combination of categorical features).

    ``split_router`` (a LeafRouter over the same nodes, or None) gives every split node
    the row's own outcome, also at the nodes off the row's path, which TreeSHAP reads
    (routing by the row's leaf decides only the nodes on its path). None where the
    library tells only the row's leaf (CatBoost's non-symmetric trees): TreeSHAP cannot
    be computed then."""

    route: Callable
    column: np.ndarray
    threshold: np.ndarray
    n_columns: int
    description: str
    shap_feature: np.ndarray | None = None
    shap_groups: tuple = ()
    split_router: LeafRouter | None = None

    def check(self, n_nodes):
        """ValueError unless ``column`` and ``threshold`` have one entry per node and
        every column is in range."""
        col = np.asarray(self.column)
        thr = np.asarray(self.threshold)
        if col.shape != (n_nodes,) or thr.shape != (n_nodes,):
            raise ValueError(f"leaf router has {col.shape} columns and {thr.shape} "
                             f"thresholds for {n_nodes} nodes")
        if col.size and (col.min() < 0 or col.max() >= self.n_columns):
            raise ValueError(f"leaf router columns must be in 0..{self.n_columns - 1}")
        if self.shap_feature is not None and np.shape(self.shap_feature) != (n_nodes,):
            raise ValueError(f"leaf router has {np.shape(self.shap_feature)} SHAP features "
                             f"for {n_nodes} nodes")

    def numbers(self, X):
        """The routing numbers of rows X (a chunk of the user's input), validated."""
        out = np.ascontiguousarray(self.route(X), dtype=np.float64)
        if out.ndim != 2 or out.shape[1] != self.n_columns:
            raise ValueError(f"the leaf router returned shape {out.shape}, expected "
                             f"(n_rows, {self.n_columns})")
        return out

"""Permutation importance on the compiled normal form: the rows of X routed once and
sorted by leaf (:class:`LeafIndex`), and the test of whether float64 sums of a model's
leaf values can round (``exact_sums``). The kernels are in ``kernels/permute.py``."""

from __future__ import annotations

import numpy as np
from numba import get_num_threads

from ..backends import get_backend
from ..kernels.permute import (
    all_margins,
    leaf_ranks,
    leaf_terms,
    mark_paths,
    permuted_margin,
    restore_leaves,
    sort_rows_by_leaf,
    tree_layout,
)
from ..kernels.route import ROW_BLOCK
from ..model.kernel_inputs import ColumnTops, LeafLayout, MarginTerms, RowLeaves


def exact_sums(base, terms, leaf_off):
    """Whether float64 adds every margin up exactly, whatever the order.

    Let 2^q be the lowest set bit over all leaf terms and the base (each is an integer
    multiple of 2^q) and S = |base| + the sum over trees of the tree's largest |term|.
    A margin's partial sums (in any order, old and new leaves mixed) are at most S in
    magnitude, and the changes ``permuted_margin`` gathers (new minus old terms, summed
    per thread) at most 2 S. If 2 S < 2^(q + 53), every one of them is an integer
    multiple of 2^q below 2^53 times it: representable, so no addition rounds. XGBoost's
    leaf values are float32 numbers of a few binary orders of magnitude and pass (the
    500-tree benchmark models: q = -43 and -45, S about 80); float64 leaf values (scikit-learn,
    LightGBM) use all 53 bits and fail."""
    values = np.concatenate([np.ravel(terms), np.ravel(base)])
    values = np.abs(values[values != 0.0])
    if values.size == 0:
        return True
    if not np.all(np.isfinite(values)):
        return False
    mantissa, exponent = np.frexp(values)  # values = mantissa * 2**exponent
    integer = (mantissa * 2.0**53).astype(np.int64)  # exact: 53 bits
    lowest = np.log2((integer & -integer).astype(np.float64)).astype(np.int64)
    q = int((exponent.astype(np.int64) - 53 + lowest).min())
    per_tree = np.maximum.reduceat(np.abs(terms).max(axis=1), leaf_off[:-1])
    bound = np.abs(base).max(initial=0.0) + per_tree.sum()
    # (1 + 1e-9): room for the rounding of the bound itself
    return bool(bound * (1.0 + 1e-9) < 2.0 ** (q + 52))


class LeafIndex:
    """The rows of X routed once and sorted by leaf, for permuted margins.

    Memory: at most 8 bytes per (row, tree) pair: the leaf-sorted row order (int32,
    trees x rows) and the leaf matrix ``L`` (rows x trees) of each row's leaf rank
    within its tree, uint8 when no tree has more than 256 leaves, uint16 up to 65,536,
    else int32 (5 bytes per pair for 500 XGBoost trees of depth 6, 12.5 MB for 5,000
    rows); plus a few int64 arrays over the nodes of the ensemble, and with exact sums
    (``add_deltas``) 8 bytes per row, output and thread for the gathered changes.

    ``X`` is the float array the permutations will be written into (C order); ``scale``
    and ``divisor`` those of ``predict_ensemble`` (``routing._forest_scale``).
    """

    def __init__(self, ens, X, scale, divisor, strict, round32, *, leaf_dtype=None):
        self.ens = ens
        self.divisor = float(divisor)
        self.strict = bool(strict)
        self.round32 = bool(round32)
        self.routing = ens.routing
        (self.preorder, self.pre_pos, self.size, self.height, self.low, self.parent,
         self.same_up, self.first_leaf, self.n_leaves, self.leaf_off,
         self.leaf_node) = tree_layout(ens.tree_offsets, ens.left, ens.right, ens.feature,
                                       ens.postorder)
        self.terms = leaf_terms(self.leaf_node, self.leaf_off,
                                np.ascontiguousarray(scale, dtype=np.float64), ens.value)
        self.terms1 = np.ascontiguousarray(self.terms[:, 0])  # single output: contiguous
        n, T = X.shape[0], ens.n_trees
        most = int(np.diff(self.leaf_off).max())
        dtype = np.uint8 if most <= 2**8 else np.uint16 if most <= 2**16 else np.int32
        dtype = dtype if leaf_dtype is None else leaf_dtype  # (tests: a wider one)
        self.L = np.empty((n, T), dtype)
        roots = ens.tree_offsets[:-1]
        block = max(1, 2**22 // T)  # rows routed at a time (16 MB of node indices)
        backend = get_backend()
        for r0 in range(0, n, block):
            local = np.empty((min(n, r0 + block) - r0, T), np.int32)
            backend.apply(X[r0:r0 + block], local, ens.tree_offsets, self.routing,
                          self.strict, self.round32, ROW_BLOCK)
            leaf_ranks(local, roots, self.first_leaf, self.L[r0:r0 + block])
        self.order = np.empty((T, n), np.int32)
        self.lstart = np.empty(self.leaf_node.shape[0], np.int64)
        self.lend = np.empty(self.leaf_node.shape[0], np.int64)
        sort_rows_by_leaf(self.L, self.leaf_off, self.order, self.lstart, self.lend)
        # the kernels' grouped inputs (the same arrays)
        self.row_leaves = RowLeaves(self.L, self.order, self.lstart, self.lend)
        self.layout = LeafLayout(self.leaf_off, self.leaf_node, self.first_leaf,
                                 self.n_leaves, self.pre_pos, self.height, self.low,
                                 self.same_up)
        self.sums = MarginTerms(ens.base_score, self.leaf_off, ens.tree_output, self.terms,
                                self.terms1, self.divisor)
        # topmost nodes grouped by feature (then by node index: tree order); nodes that
        # no row reaches are left out, they move nothing
        tree = ens.node_tree
        first = self.leaf_off[tree] + self.first_leaf
        reached = self.lend[first + self.n_leaves - 1] > self.lstart[first]
        tops = np.flatnonzero((ens.left >= 0) & (self.same_up < 0) & reached)
        tops = tops[np.argsort(ens.feature[tops], kind="stable")]
        self.tops = tops.astype(np.int64)
        self.top_tree = tree[self.tops].astype(np.int64)
        self.top_ptr = np.searchsorted(ens.feature[self.tops], np.arange(ens.n_features + 1))
        self.jabove = np.full(ens.n_nodes, -1, np.int64)
        self.changed = np.zeros(n, np.uint8)
        # exact sums (no divisor): a moved row's margin is its original margin plus the
        # changes of its terms, gathered per thread (see permuted_margin)
        self.add_deltas = self.divisor == 1.0 and exact_sums(ens.base_score, self.terms,
                                                             self.leaf_off)
        self.deltas = np.zeros((0, n, ens.n_outputs))
        self.feature = None

    def margin(self):
        """The raw margin of the indexed rows (n_rows, n_outputs), bitwise
        ``predict_ensemble``'s (the leaves of L, each tree's term added in tree order)."""
        out = np.empty((self.L.shape[0], self.ens.n_outputs))
        all_margins(out, self.L, self.sums)
        return out

    def leaves(self):
        """The leaf matrix as ``TreeEnsemble.apply`` gives it (node index in its tree)."""
        slots = self.L.astype(np.int64) + self.leaf_off[:-1]
        return (self.leaf_node[slots] - self.ens.tree_offsets[:-1]).astype(np.int32)

    def n_tops(self, j):
        """How many topmost nodes (that rows reach) split on feature j."""
        return int(self.top_ptr[j + 1] - self.top_ptr[j])

    def _tops(self, j):
        a, b = self.top_ptr[j], self.top_ptr[j + 1]
        return self.tops[a:b], self.top_tree[a:b]

    def _column(self, j):
        """The kernels' ColumnTops of column j (after ``begin(j)``)."""
        tops, top_tree = self._tops(j)
        return ColumnTops(j, tops, top_tree, self.task_start, self.jabove)

    def begin(self, j):
        """Prepare permutations of column j."""
        if self.feature is not None:
            self.finish()
        tops, _ = self._tops(j)
        mark_paths(j, tops, self.preorder, self.pre_pos, self.size, self.parent,
                   self.ens.feature, self.jabove)
        self.feature = j
        self.task_start = self._tasks(j)

    def _tasks(self, j):
        """Bounds of 16 tasks per thread over the topmost j-nodes, of about equal rows
        under them: numba gives each thread an equal run of consecutive tasks."""
        tops, top_tree = self._tops(j)
        g0 = self.leaf_off[top_tree] + self.first_leaf[tops]
        rows = self.lend[g0 + self.n_leaves[tops] - 1] - self.lstart[g0]
        # + 1: a top costs something; cum then strictly increases, so the bounds rise
        # from 0 (cum[0] = 0) to tops.size (the last target is cum[-1] itself)
        cum = np.concatenate([[0], np.cumsum(rows + 1)])
        n_tasks = max(1, min(tops.size, 16 * get_num_threads()))
        bounds = np.searchsorted(cum, np.linspace(0, cum[-1], n_tasks + 1), side="left")
        return bounds.astype(np.int64)

    def permuted_margin(self, X, margin, out):
        """out := margin of X, where X differs from the indexed rows in column j only
        (the column of ``begin(j)``; ``margin``: the margin of the indexed rows). Returns
        the number of rows whose margin was recomputed."""
        ens, j = self.ens, self.feature
        if j is None:
            raise RuntimeError("call begin(j) first")
        threads = get_num_threads()
        if self.add_deltas and self.deltas.shape[0] < threads:
            self.deltas = np.zeros((threads, self.L.shape[0], ens.n_outputs))
        return permuted_margin(X, self._column(j), margin, out, self.changed, self.deltas,
                               self.add_deltas, self.row_leaves, self.layout, self.sums,
                               self.routing, self.strict, self.round32)

    def finish(self):
        """Put the original leaves back in L."""
        if self.feature is None:
            return
        restore_leaves(self._column(self.feature), self.row_leaves, self.layout)
        self.feature = None

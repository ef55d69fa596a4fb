"""Grouped kernel inputs: named tuples of arrays that numba compiles (and caches) as one
argument each, instead of long positional argument lists."""

from __future__ import annotations

from collections import namedtuple

# how rows find their leaves (kernels/route.py walk_batch), TreeEnsemble.routing: the
# nodes as one array per field (left, right, feature: int64, leaves are self-loops with
# feature 0; threshold: float64; flags: uint16 bits of kernels/route.py), per tree
# whether it is plain (no node in route.NOT_PLAIN), its depth and shallowest leaf depth in
# edges, the flat category arrays
Routing = namedtuple("Routing", ["left", "right", "feature", "threshold", "flags", "plain",
                                 "depth", "min_depth", "cat_offset", "cat_count",
                                 "cat_codes", "cat_left"])

# where accumulated statistics keep each leaf (TreeEnsemble.leaf_slots): per node its slot,
# -1 for internal nodes; per slot its node; per tree its first slot (n_trees + 1). Slots
# follow the nodes' order, so every tree's leaves are one run of slots
LeafSlots = namedtuple("LeafSlots", ["slot", "node", "tree_start"])

# the rows of one accumulate call (indexed by the call's row number r = row0 + i): the
# targets (forests: Z (n, C); boosting: y (n,), or (n * K,) row-major for a regression
# objective on K targets), weights (one, or one per row), each
# row's statistic block, its global position (for in-bag bits), its starting margin
# (boosting with offsets; (0, K) otherwise)
RowInputs = namedtuple("RowInputs", ["target", "w", "block", "pos", "row_start"])

# per-tree arrays of a boosted model for the staged kernels: tree offsets and outputs,
# scales, node values, the logistic leaf factors (empty for other losses), the first tree
# of every stage
StagedTrees = namedtuple("StagedTrees", ["tree_offsets", "tree_output", "tree_scale",
                                         "value", "leaf_factor", "stage_start"])

# the loss of a boosted model: its code and parameters (losses.py) and base score
Loss = namedtuple("Loss", ["code", "params", "base_score"])

# the internal nodes of an ensemble for the formula kernels (kernels/fused_measures.py), split
# by split in tree order (TreeEnsemble.splits): each split's node, its children, its
# output key tree * n_features + feature; each tree's first split and first node
SplitIndex = namedtuple("SplitIndex", ["node", "left", "right", "key", "tree_splits",
                                       "tree_offsets"])

# what a formula kernel reads besides the evaluation statistics: in-sample weight
# fractions per node, node values (n_nodes, C), one extra number per split or per tree
# and output (the measure's in-sample decrease, or mdi_oob_centered's centres)
SplitTerms = namedtuple("SplitTerms", ["w", "v", "extra"])

# several fused measures evaluated in one pass over the trees (kernels/fused_measures.py
# leaf_split_sums): each measure's kind, the rows of ``w`` and ``v`` it reads (w: in-sample
# weight fractions per node, v: node values (n_nodes, C); measures reading the same array
# share a row), and its slice extra[extra_start[j]:extra_start[j + 1]] of the per-split or
# per-tree numbers (SplitTerms.extra) laid end to end
FusedMeasures = namedtuple("FusedMeasures", ["kind", "w_of", "v_of", "extra_start", "w", "v",
                                             "extra"])

# the evaluation statistics (measures.formulas.NodeSums planes, (n_nodes, B) and S (C, n_nodes,
# B)): n', Q', S', H', R' (planes a layout lacks are filled by another of the same shape
# and not read) and whether n' is the sum of the class planes S' (one-hot class targets)
HeldOut = namedtuple("HeldOut", ["n", "Q", "S", "H", "R", "n_from_s"])

# what the contribution kernels (kernels/treeshap.py) read besides the routing: whether
# they compute TreeSHAP (else Saabas), the deepest tree's depth (scratch sizes), the
# Gauss-Legendre nodes and weights (row M: the M-point rule on [0, 1]), the node covers
# (internal nodes: sums of their children's), the node values (float64), per tree the
# most distinct players on a root-to-leaf path, and per node the player (int64 column of
# the kernels' output) its split's contribution is credited to (contributions.kernel_inputs)
ShapTables = namedtuple("ShapTables", ["use_shap", "max_depth", "gl_nodes", "gl_weights",
                                       "cover", "value", "path_features", "feature"])

# permutation kernels (kernels/permute.py, leaf_index.LeafIndex): the indexed rows' leaves
# (L: each row's leaf rank per tree; per tree the rows sorted by leaf, ``order``, and
# each leaf slot's range lstart:lend of it), rewritten by permuted_margin and
# restore_leaves
RowLeaves = namedtuple("RowLeaves", ["L", "order", "lstart", "lend"])

# the trees' layout (kernels/permute.tree_layout): leaf slots of each tree, the node in
# each slot, per node its first leaf slot, leaf count, pre-order position, height,
# shallowest-leaf depth below it and nearest ancestor on the same feature
LeafLayout = namedtuple("LeafLayout", ["leaf_off", "leaf_node", "first_leaf", "n_leaves",
                                       "pre_pos", "height", "low", "same_up"])

# what a margin adds up (permute.rows_margin): base score, leaf slots of each tree, each
# tree's first output, each slot's terms (and the first output's, contiguous), the
# final divisor (averaged forests; 1 otherwise)
MarginTerms = namedtuple("MarginTerms", ["base", "leaf_off", "tree_output", "terms",
                                         "terms1", "divisor"])

# the column being permuted: its index, its topmost nodes (that rows reach) and their
# trees, the bounds of the parallel tasks over them, and per node the nearest ancestor
# splitting on it (permute.mark_paths)
ColumnTops = namedtuple("ColumnTops", ["j", "tops", "top_tree", "task_start", "jabove"])

# linear leaf models (LightGBM linear_tree), TreeEnsemble.linear_leaves: per node the
# first of its terms in ``feature``/``coef`` (int64), its number of terms (int32; 0 at
# internal nodes and constant leaves) and the model's constant (float64, NaN without
# terms); per term the feature (int64) and its coefficient (float64)
LinearLeaves = namedtuple("LinearLeaves", ["offset", "count", "const", "feature", "coef"])

"""Boosted vector-leaf trees as one scalar tree per output, for the node statistics.

A vector-leaf tree (XGBoost ``multi_strategy="multi_output_tree"``) routes a row once
and adds a leaf vector to all K outputs. The normal form keeps it as one tree with
``value_dim == K`` (so ``apply``, ``predict_raw`` and TreeSHAP see the library's own
trees). The held-out gradient measures need, per node, the sums of every output's own
gradient terms (n', S'_k, H'_k, R'_k): z_i is the vector of negative gradients, and
each measure is the sum over outputs of its single-output form, as for a multi-output
forest. :func:`per_output_trees` gives exactly that by splitting every vector-leaf
tree into K trees of the same structure, tree k feeding output k with column k of the
leaf vectors, all in the tree's boosting round; the staged kernel then evaluates copy
k against output k's gradient, and every measure of the vector tree is the sum over its
K copies. The split gain the library stores once per split (``mdi``) is kept on the
first copy (0 on the others), so that its sum over trees is still the library's total
gain. The node cover is the library's hessian summed over outputs; every copy keeps it
as its weight (ufi's in-sample fractions W_m / W_root: each output's own fractions under
squared error, where all outputs have the same hessian; an approximation under
softmax).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..model.ensemble import BOOSTING, TreeEnsemble


class RepeatedRates:
    """Per-tree learning rates of a lazily resolved source, each repeated ``k`` times in
    a row (picklable): the rates of the per-output copies of :func:`per_output_trees`."""

    def __init__(self, source, k):
        self.source, self.k = source, int(k)

    def __call__(self):
        return np.repeat(np.asarray(self.source(), np.float64), self.k)


def has_vector_leaves(ens) -> bool:
    """Whether ``ens`` is a boosted model whose trees feed several outputs at once."""
    return ens.kind == BOOSTING and ens.value_dim > 1


def per_output_trees(ens: TreeEnsemble) -> TreeEnsemble:
    """``ens`` with every vector-leaf tree (``value_dim`` K > 1) replaced by K trees of
    the same structure, tree t's copy k (tree ``t * K + k``) feeding output
    ``tree_output[t] + k`` with column k of the node values, in tree t's boosting round
    and with its scale and learning rate; the split gains stay on copy 0 (module
    docstring). The raw prediction is unchanged. Other ensembles are returned as
    they are."""
    if not has_vector_leaves(ens):
        return ens
    if ens.leaf_router is not None:
        raise ValueError("a vector-leaf model routed by the library's leaf indices cannot "
                         "be split into one tree per output")
    K = ens.value_dim
    old = ens.tree_offsets
    sizes = np.diff(old)
    new_sizes = np.repeat(sizes, K)
    new = np.zeros(new_sizes.size + 1, np.int64)
    np.cumsum(new_sizes, out=new[1:])
    # per new node: its copy (tree t, output k) and the node of the original it copies
    new_tree = np.repeat(np.arange(new_sizes.size), new_sizes)
    old_tree = new_tree // K
    copy = new_tree % K
    shift = new[new_tree] - old[old_tree]  # new index minus old index, per node
    src = np.arange(new[-1], dtype=np.int64) - shift
    out = {}
    for name in ("left", "right"):
        a = getattr(ens, name)[src]
        out[name] = np.where(a >= 0, a + shift, -1).astype(a.dtype)
    for name in ("feature", "threshold", "missing_left", "nan_mode", "is_categorical",
                 "category_count", "category_default_left", "weight", "cover",
                 "impurity"):
        out[name] = getattr(ens, name)[src]
    out["gain"] = np.where(copy == 0, ens.gain[src], 0.0)
    out["value"] = np.ascontiguousarray(ens.value[src, copy][:, None])
    # every copy lists its own category codes, in node order as the normal form keeps them
    count = out["category_count"].astype(np.int64)
    start = np.zeros(count.size, np.int64)
    np.cumsum(count[:-1], out=start[1:])
    out["category_offset"] = np.where(out["is_categorical"], start, 0).astype(
        ens.category_offset.dtype)
    first = np.repeat(ens.category_offset[src], count)
    within = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(start, count)
    out["category_codes"] = ens.category_codes[first + within]
    out["category_left"] = ens.category_left[first + within]
    rates = ens.tree_learning_rate_source
    if callable(rates) and "tree_learning_rate" not in ens.__dict__:
        rates = RepeatedRates(rates, K)  # still lazy
    else:
        rates = np.repeat(ens.tree_learning_rate, K)
    return dataclasses.replace(
        ens, value_dim=1, tree_offsets=new,
        tree_output=(np.repeat(ens.tree_output, K) + np.tile(np.arange(K), ens.n_trees)
                     ).astype(np.int32),
        tree_scale=np.repeat(ens.tree_scale, K), tree_stage=np.repeat(ens.tree_stage, K),
        tree_learning_rate_source=rates, **out)

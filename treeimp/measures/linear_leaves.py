"""Held-out importance of a boosted model with linear leaf models (LightGBM
``linear_tree=True``): each feature's share of the first-order decrease of the held-out
loss through the trees' splits and through the leaves' linear models.

Tree t (scale s_t) gives row i ``s_t (v_root + sum over its path of (v_child - v_parent) +
D_l(x_i))``: the splits' Saabas terms on the constant fallbacks (node values of the normal
form) and the linear gain ``D_l(x) = c_l + b_l . x - u_l`` of its leaf l (0 when one of
the leaf's features is NaN for the row; ``TreeEnsemble`` docstring). With ``z_i = -g_i``,
the negative gradient of the model's own loss at the row's margin before the tree's
boosting round (all earlier trees WITH their linear terms), weights w_i and ``n' = sum
w_i``, the held-out first-order decrease of the mean loss is the sum of

- ``splits_k = (1/n') sum_t sum_i w_i z_i s_t sum_{path nodes m split on k} (v_child -
  v_m)``: mdi_oob (Li et al. 2019) of the splits, on the model's true margins;
- ``leaf_models_k = (1/n') sum_t sum_l sum_{i in A_l} w_i z_i s_t b_lk (x_ik - m_lk)``:
  A_l the evaluation rows in leaf l whose leaf features are all known, ``m_lk`` their
  w-weighted mean of feature k;
- ``leaf_level = (1/n') sum_t sum_l (sum_{i in A_l} w_i z_i) s_t (c_l + b_l . m_l -
  u_l)``: the part of the linear models that moves the leaf's level, no feature's;
- the roots' ``(1/n') sum_t s_t v_root sum_i w_i z_i``, no feature's.

``leaf_models_k`` is, per leaf, the Shapley value of feature k in the game "held-out
gradient-weighted decrease of the loss with the features outside the coalition held at
their held-out leaf means": that game is additive, so its Shapley values are these terms
exactly, and they add up with ``leaf_level`` to the leaf models' whole decrease. A feature
with a zero coefficient, or whose held-out covariance with the gradient in the leaf is
zero, gets nothing (docs/methods.md).

:func:`linear_leaf_importance_parsed` computes the components over all rows at once;
:func:`leaf_model_values` forms ``leaf_models`` per tree and leave-one-block-out replicate
from the block sums of the staged pass, for ``explain``'s ``leaf_models`` with standard
errors (the same numbers, tests/test_lgbm_linear_trees.py).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..inputs.rows import RowSource
from ..inputs.targets import check_sample_weight
from ..inputs.threads import numba_threads
from ..kernels.linear_leaves import add_linear_gains
from ..model.ensemble import BOOSTING
from ..model.losses import check_target, grad_hess_array
from ..model.routing import apply_ensemble

_ZERO = float(np.float32(1e-35))  # LightGBM's kZeroThreshold


def linear_leaf_importance_parsed(ens, X, y, *, sample_weight=None, feature_names=None,
                                  n_jobs=None) -> pd.DataFrame:
    """The held-out importances of the module docstring for a parsed boosted model.

    Returns
    -------
    DataFrame
        Indexed by feature, columns ``splits``, ``leaf_models`` and ``total`` (their
        sum); ``attrs``: ``leaf_level``, ``root`` (the components that are no
        feature's) and ``n_rows``. Memory: one float per row and tree.
    """
    if ens.kind != BOOSTING:
        raise ValueError("linear_leaf_importance is for boosted models (LightGBM "
                         "linear_tree=True); a forest's trees are averaged")
    if ens.value_dim != 1:
        raise ValueError("linear_leaf_importance reads one value per leaf; this model's "
                         f"trees have {ens.value_dim}")
    rows = RowSource(X, ens)
    n, F, T = rows.n_rows, ens.n_features, ens.n_trees
    if n == 0:
        raise ValueError("X has no rows")
    y = check_target(ens.objective, y, classes=ens.classes)
    if y.ndim != 1 or y.shape[0] != n:
        raise ValueError(f"y must have one value per row of X ({n}), got shape {y.shape}")
    w = check_sample_weight(sample_weight, n)
    names = (list(feature_names) if feature_names is not None
             else rows.feature_names or ens.feature_names
             or [f"x{j}" for j in range(F)])
    Xd = np.empty((n, F))
    for start, chunk in rows.chunks():
        Xd[start:start + chunk.shape[0]] = chunk
    leaves = apply_ensemble(ens, Xd, n_jobs=n_jobs)
    scale = np.ascontiguousarray(ens.tree_scale, dtype=np.float64)
    tree_of = np.arange(T)
    node = ens.tree_offsets[:-1][None, :] + leaves  # global leaf node per row and tree
    # every tree's output per row: its constant fallback plus its linear gain
    out = scale * ens.value[node, 0]
    lin = ens.linear_leaves
    if lin is not None:
        with numba_threads(n_jobs):
            add_linear_gains(Xd, leaves, ens.tree_offsets, tree_of.astype(np.int32), scale,
                             ens.value, lin.offset, lin.count, lin.const, lin.feature,
                             lin.coef, out)
    # z = -g at each round's starting margin (earlier rounds, linear terms included)
    z = np.empty((n, T))
    margin = np.broadcast_to(ens.base_score, (n, ens.n_outputs)).copy()
    stage = ens.tree_stage
    first = np.flatnonzero(np.r_[True, np.diff(stage) != 0, True])
    for a, b in zip(first[:-1], first[1:]):
        g, _ = grad_hess_array(ens.objective, margin, y)
        for t in range(a, b):
            z[:, t] = -g[:, ens.tree_output[t]]
            margin[:, ens.tree_output[t]] += out[:, t]
    wz = w[:, None] * z
    n_w = float(w.sum())
    splits = _split_terms(ens, node, wz) / n_w
    leaf_models, level = ((np.zeros(F), 0.0) if lin is None
                          else _leaf_terms(ens, Xd, node, w, wz, scale))
    roots = ens.tree_offsets[:-1]
    root = float(np.dot(scale * ens.value[roots, 0], wz.sum(axis=0)))
    table = pd.DataFrame({"splits": splits, "leaf_models": leaf_models / n_w},
                         index=pd.Index([str(s) for s in names], name="feature"))
    table["total"] = table["splits"] + table["leaf_models"]
    table.attrs.update(leaf_level=level / n_w, root=root / n_w, n_rows=n)
    return table


def _split_terms(ens, node, wz):
    """Per feature, sum over trees and rows of w z s_t times the Saabas terms of the
    row's path (from the per-leaf sums of w z)."""
    F = ens.n_features
    leaf_sum = np.bincount(node.ravel(), weights=wz.ravel(), minlength=ens.n_nodes)
    # every node's sum of w z: its leaves' (post-order: children before parents)
    node_sum = leaf_sum.copy()
    left, right = ens.left, ens.right
    for m in ens.postorder:
        if left[m] >= 0:
            node_sum[m] = node_sum[left[m]] + node_sum[right[m]]
    inner = np.flatnonzero(left >= 0)
    s = ens.tree_scale[ens.node_tree[inner]]
    v = ens.value[:, 0]
    term = s * ((v[left[inner]] - v[inner]) * node_sum[left[inner]]
                + (v[right[inner]] - v[inner]) * node_sum[right[inner]])
    return np.bincount(ens.feature[inner], weights=term, minlength=F)


def _leaf_terms(ens, Xd, node, w, wz, scale):
    """(per feature the leaf models' terms, the level term), both summed over trees
    and rows, not yet divided by n'. Per tree, every (row, term of its leaf) pair at
    once: the per-leaf sums over the rows A_l and per-term sums give the means m_lk and
    the terms ``b_lk (sum w z x_k - m_lk sum w z)``."""
    lin = ens.linear_leaves
    F = ens.n_features
    per_feature = np.zeros(F)
    level = 0.0
    X0 = np.where(np.abs(Xd) <= _ZERO, 0.0, Xd)  # read as LightGBM's predictor reads it
    v = ens.value[:, 0]
    owner = np.repeat(np.arange(ens.n_nodes), lin.count)  # the leaf of every term
    has = lin.count > 0
    n_terms = lin.coef.shape[0]
    for t in np.flatnonzero(np.add.reduceat(lin.count, ens.tree_offsets[:-1]) > 0):
        leaf = node[:, t]
        k = lin.count[leaf].astype(np.int64)
        row = np.repeat(np.arange(leaf.shape[0]), k)  # one pair per row and term
        first = np.repeat(lin.offset[leaf] - np.cumsum(k) + k, k)
        term = first + np.arange(row.shape[0])
        x = X0[row, lin.feature[term]]
        known = np.bincount(row, weights=np.isnan(x), minlength=leaf.shape[0]) == 0
        known &= k > 0
        keep = known[row]
        row, term, x = row[keep], term[keep], x[keep]
        # per leaf, over its rows A_l: sum w and sum w z; per term: sum w x, sum w z x
        w_leaf = np.bincount(leaf[known], weights=w[known], minlength=ens.n_nodes)
        wz_leaf = np.bincount(leaf[known], weights=wz[known, t], minlength=ens.n_nodes)
        wx = np.bincount(term, weights=w[row] * x, minlength=n_terms)
        wzx = np.bincount(term, weights=wz[row, t] * x, minlength=n_terms)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(w_leaf[owner] > 0, wx / w_leaf[owner], 0.0)
        per_feature += np.bincount(lin.feature, weights=scale[t] * lin.coef
                                   * (wzx - mean * wz_leaf[owner]), minlength=F)
        fitted = np.bincount(owner, weights=lin.coef * mean, minlength=ens.n_nodes)
        level += scale[t] * float(np.dot(wz_leaf[has],
                                         lin.const[has] + fitted[has] - v[has]))
    return per_feature, level


def leaf_model_values(ens, term_sums, node_sums, block_weight):
    """(n_blocks + 1, n_trees, n_features): ``leaf_models_k`` of the module docstring per
    tree, on every leave-one-block-out replicate and last on all evaluation rows (the
    layout of ``measures.compute``, for the jackknife of ``results.finalize.assemble``).

    ``term_sums`` (B, n_terms, 2): per block and linear term, sum w z x and sum w x over
    the rows that use the term's leaf model; ``node_sums`` (B, n_nodes, 2): per block and
    leaf, sum w and sum w z over those rows (``stats/linear_leaves.add_leaf_model_sums``,
    filled by the staged pass, z = -g at the true margins); ``block_weight`` (B,) the
    blocks' sum of weights. Each replicate recomputes the leaf means m_lk from its own
    rows: the replicates are the statistic's, not a linearisation's. NaN for a replicate
    without weight."""
    lin = ens.linear_leaves
    B = term_sums.shape[0]
    T, F = ens.n_trees, ens.n_features
    owner = np.repeat(np.arange(ens.n_nodes), lin.count)  # the leaf of every term
    tree = ens.node_tree[owner]
    at = tree * F + lin.feature  # (tree, feature) cell of every term
    coef = ens.tree_scale[tree] * lin.coef
    t_total, n_total = term_sums.sum(axis=0), node_sums.sum(axis=0)
    w_total = float(np.sum(block_weight))
    out = np.empty((B + 1, T, F))
    for b in range(B + 1):
        ts = t_total if b == B else t_total - term_sums[b]
        ns = n_total if b == B else n_total - node_sums[b]
        n_w = w_total if b == B else w_total - float(block_weight[b])
        w_leaf, wz_leaf = ns[owner, 0], ns[owner, 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.where(w_leaf > 0, ts[:, 1] / w_leaf, 0.0)
        term = coef * (ts[:, 0] - mean * wz_leaf)
        cells = np.bincount(at, weights=term, minlength=T * F).reshape(T, F)
        out[b] = cells / n_w if n_w > 0 else np.nan
    return out

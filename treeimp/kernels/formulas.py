"""Fused per-split sums for the default measures (mdi_oob, forest ufi).

The formulas in :mod:`treeimp.measures` read like the papers; on a forest of deep trees
(a million nodes, ten jackknife replicates) their numpy form spends most of its time
materialising (n_splits, B) temporaries. These kernels evaluate the same per-split terms
in one pass and add them straight into ``out[b, tree * n_features + feature, c]``.

Threads own whole trees (splits are stored tree by tree, and a tree's keys are its own),
so no two threads write the same output cell and no per-thread buffers are needed.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

MDI_OOB = 0          # (v_l - v_m).S'_l + (v_r - v_m).S'_r, per class c
UFI_CLASSIFICATION = 1  # w_l v_lc p'_lc + w_r v_rc p'_rc - w_m v_mc p'_mc, both children seen
UFI_REGRESSION = 2   # w-weighted decrease of the held-out MSE + in-sample decrease
UFI_BOOSTING = 3     # w-weighted decrease of the held-out Newton impurity + in-sample decrease


@njit(cache=True, parallel=True)
def split_sums(kind, node, left, right, key, tree_splits, w, v, extra, n, Q, S, H, R,
               n_from_s, out):
    """Accumulate per-split terms of measure ``kind`` into out (B, n_keys, C).

    node/left/right/key: (n_splits,) split node, its children, tree * F + feature;
    tree_splits: (n_trees + 1,) split offsets per tree; w: (n_nodes,) in-sample weight
    fractions; v: (n_nodes, C) node values (MDI_OOB on a boosted model: as the tree
    adds them to the margin, i.e. times its DART weight; UFI_BOOSTING: the unshrunk node
    estimates mu); extra: (n_splits,) in-sample decrease (UFI_REGRESSION, UFI_BOOSTING);
    n, Q, H, R: (n_nodes, B); S: (C, n_nodes, B) evaluation statistics (H, R: boosting);
    ``n_from_s``: n' is not stored (one-hot class targets) but the sum over c of S[c]
    (``n`` is then not read).
    """
    B = n.shape[1]
    C = S.shape[0]
    # mdi_oob and ufi in separate loop nests, unsigned node indices
    # (no wraparound arithmetic): the block loop is then a straight run over B values
    if kind == MDI_OOB:
        for t in prange(tree_splits.size - 1):
            for s in range(tree_splits[t], tree_splits[t + 1]):
                m, l, r, k = _split(node, left, right, key, s)
                for c in range(C):
                    dl = v[l, c] - v[m, c]
                    dr = v[r, c] - v[m, c]
                    for b in range(B):
                        out[b, k, c] += dl * S[c, l, b] + dr * S[c, r, b]
    else:  # the ufi forms share the skip rule
        for t in prange(tree_splits.size - 1):
            for s in range(tree_splits[t], tree_splits[t + 1]):
                m, l, r, k = _split(node, left, right, key, s)
                for b in range(B):
                    nl = _count(n, S, l, b, n_from_s)
                    nr = _count(n, S, r, b, n_from_s)
                    if nl <= 0.0 or nr <= 0.0:  # skip rule: a child without rows
                        continue
                    if kind == UFI_BOOSTING:
                        if H[l, b] <= 0.0 or H[r, b] <= 0.0:  # no Newton impurity
                            continue
                        out[b, k, 0] += ((w[m] * _held_newton(S, H, R, v, m, b)
                                          - w[l] * _held_newton(S, H, R, v, l, b)
                                          - w[r] * _held_newton(S, H, R, v, r, b))
                                         + extra[s])
                        continue
                    nm = _count(n, S, m, b, n_from_s)
                    if kind == UFI_CLASSIFICATION:
                        # held-out class shares p' = S' / n' (one division per node)
                        fl = w[l] / nl
                        fr = w[r] / nr
                        fm = w[m] / nm
                        for c in range(C):
                            out[b, k, c] += (fl * v[l, c] * S[c, l, b]
                                             + fr * v[r, c] * S[c, r, b]
                                             - fm * v[m, c] * S[c, m, b])
                    else:
                        out[b, k, 0] += (
                            w[m] * _held_mse(Q[m, b], S[0, m, b], nm, v[m, 0])
                            - w[l] * _held_mse(Q[l, b], S[0, l, b], nl, v[l, 0])
                            - w[r] * _held_mse(Q[r, b], S[0, r, b], nr, v[r, 0])
                            + extra[s])
    return out


@njit(cache=True, inline="always")
def _split(node, left, right, key, s):
    """Split s: its node, children and output key, as unsigned indices."""
    return np.uint64(node[s]), np.uint64(left[s]), np.uint64(right[s]), np.uint64(key[s])


@njit(cache=True, inline="always")
def _count(n, S, node, b, from_s):
    """n' of ``node`` in block b: stored, or the sum of the class planes (0 + S[0] + ...,
    the order of numpy's S.sum(axis=0), so both give the same number)."""
    if not from_s:
        return n[node, b]
    c = 0.0
    for j in range(S.shape[0]):
        c += S[j, node, b]
    return c


@njit(cache=True, inline="always")
def _held_newton(S, H, R, mu, node, b):
    """Held-out Newton impurity (R' + 2 mu G' + mu^2 H') / H' with G' = -S' (0 when
    H' = 0): the weighted mean of h (-g/h - mu)^2 over the node's rows."""
    h = H[node, b]
    if h <= 0.0:
        return 0.0
    m = mu[node, 0]
    return (R[node, b] + 2.0 * m * -S[0, node, b] + m * m * h) / h


@njit(cache=True)
def _held_mse(q, s, cnt, value):
    """Mean of (y - value)^2 over a node's evaluation rows from its sums."""
    return (q - 2.0 * value * s + value * value * cnt) / cnt

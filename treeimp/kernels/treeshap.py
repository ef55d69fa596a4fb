"""Per-row contributions of single trees: path-dependent TreeSHAP and Saabas.

TreeSHAP is the exact path-dependent algorithm of Lundberg et al. (2020, Algorithm 2),
the one shap's TreeExplainer (``feature_perturbation="tree_path_dependent"``), XGBoost's
``pred_contribs`` and LightGBM's ``pred_contrib`` compute: the recursion over every node
(the child the row goes to is "hot", the other "cold") keeps the path of unique
features with their zero fractions (cover ratios) and one fractions (1 on the row's
side, 0 off it), and each leaf adds its value times the unwound path weights. It costs
O(leaves x depth^2) per row and tree. Here the recursion is a loop over an explicit stack
of pending children; each level of the tree owns one slot of the path buffer, so a
child copies its parent's path from the slot above and the parent's slot stays intact
for the sibling that is visited later. The child a row goes to is decided by
``route.step``, so categorical splits, missing values and NaN modes route exactly as
the normal form routes them.

Saabas contributions walk the row's own path: a split on feature k adds
``v_child - v_node`` to k.

A kernel writes ``scale * contribution`` of one tree for one row into ``out[feature,
col + j]`` (j over the tree's values), or with a projection ``proj`` (len value_dim)
the scalar ``scale * proj . contribution`` into ``out[feature, 0]``.
"""

import numpy as np
from numba import njit, prange

from .route import LEAF, feature_value, step, walk_batch
from .staged import BATCH, GROUP, N_TERMS, stage_terms


def scratch_shape(max_depth):
    """(path slots, stack entries) for trees of depth <= ``max_depth``."""
    return max_depth + 2, 2 * max_depth + 4


@njit(cache=True)
def new_scratch(max_depth):
    """One thread's TreeSHAP buffers: path features (slot, position), path fractions
    (3, slot, position: zero fraction, one fraction, path weight), stack of pending nodes
    (entry, 4: node, level, unique depth, parent feature) and their fractions, and the
    reciprocals 1 / k."""
    L = max_depth + 2
    S = 2 * max_depth + 4
    recip = np.zeros(L + 2)  # 1 / k: the inner loops multiply instead of dividing
    for k in range(1, L + 2):
        recip[k] = 1.0 / k
    return (np.empty((L, L), np.int64), np.empty((3, L, L)), np.empty((S, 4), np.int64),
            np.empty((S, 2)), recip)


@njit(cache=True, inline="always")
def _extend(pf, pv, s, ud, zero, one, feat, recip):
    """Add an element (feature ``feat``, fractions ``zero``, ``one``) at position ``ud``
    of path slot ``s`` and update the path weights (Lundberg's EXTEND)."""
    pf[s, ud] = feat
    pv[0, s, ud] = zero
    pv[1, s, ud] = one
    pw = pv[2, s]
    pw[ud] = 1.0 if ud == 0 else 0.0
    inv = recip[ud + 1]
    a = one * inv
    b = zero * inv
    for i in range(ud - 1, -1, -1):
        w = pw[i]
        pw[i + 1] += a * w * (i + 1)
        pw[i] = b * w * (ud - i)


@njit(cache=True, inline="always")
def _unwind(pf, pv, s, ud, k, recip):
    """Remove element k from the path of slot ``s`` (length ud + 1; Lundberg's UNWIND).
    One fractions are 0 or 1 (path-dependent TreeSHAP)."""
    one = pv[1, s, k]
    zero = pv[0, s, k]
    pw = pv[2, s]
    nxt = pw[ud]
    u1 = ud + 1.0
    if one != 0.0:
        c = zero * recip[ud + 1]
        for i in range(ud - 1, -1, -1):
            tmp = pw[i]
            pw[i] = nxt * u1 * recip[i + 1]
            nxt = tmp - pw[i] * c * (ud - i)
    else:
        c = u1 / zero
        for i in range(ud - 1, -1, -1):
            pw[i] = pw[i] * c * recip[ud - i]
    for i in range(k, ud):
        pf[s, i] = pf[s, i + 1]
        pv[0, s, i] = pv[0, s, i + 1]
        pv[1, s, i] = pv[1, s, i + 1]


@njit(cache=True, inline="always")
def _unwound_sum(pv, s, ud, k, recip):
    """Sum of the path weights with element k unwound, without changing the path (one
    fractions are 0 or 1)."""
    one = pv[1, s, k]
    zero = pv[0, s, k]
    pw = pv[2, s]
    nxt = pw[ud]
    total = 0.0
    u1 = ud + 1.0
    if one != 0.0:
        c = zero * recip[ud + 1]
        for i in range(ud - 1, -1, -1):
            tmp = nxt * recip[i + 1]
            total += tmp
            nxt = pw[i] - tmp * u1 * c * (ud - i)
        return total * u1
    if zero != 0.0:
        for i in range(ud - 1, -1, -1):
            total += pw[i] * recip[ud - i]
        return total * u1 / zero
    return total


@njit(cache=True)
def tree_shap(X, row, root, nodes, cover, value, cat_offset, cat_count, cat_codes, cat_left,
              strict, round32, col, scale, proj, out, scratch):
    """Add ``scale`` x the path-dependent TreeSHAP values of the tree at ``root`` for row
    ``row`` of X to ``out`` (see the module docstring for ``col`` and ``proj``)."""
    pf, pv, sk, sf, recip = scratch
    vdim = value.shape[1]
    project = proj.shape[0] > 0
    sk[0, 0] = root
    sk[0, 1] = 0
    sk[0, 2] = 0
    sk[0, 3] = -1
    sf[0, 0] = 1.0
    sf[0, 1] = 1.0
    top = 1
    while top > 0:
        top -= 1
        node = sk[top, 0]
        s = sk[top, 1]
        ud = sk[top, 2]
        if s > 0:  # the parent's path (after its unwind) is in the slot above
            for i in range(ud):
                pf[s, i] = pf[s - 1, i]
                pv[0, s, i] = pv[0, s - 1, i]
                pv[1, s, i] = pv[1, s - 1, i]
                pv[2, s, i] = pv[2, s - 1, i]
        _extend(pf, pv, s, ud, sf[top, 0], sf[top, 1], sk[top, 3], recip)
        nd = nodes[np.uint64(node)]
        if nd.flags & LEAF:
            for i in range(1, ud + 1):
                w = _unwound_sum(pv, s, ud, i, recip) * (pv[1, s, i] - pv[0, s, i]) * scale
                f = np.uint64(pf[s, i])
                if project:
                    acc = 0.0
                    for j in range(vdim):
                        acc += proj[j] * value[np.uint64(node), j]
                    out[f, 0] += w * acc
                else:
                    for j in range(vdim):
                        out[f, col + j] += w * value[np.uint64(node), j]
            continue
        feat = nd.feature
        x = feature_value(X, row, feat, round32)
        hot = step(x, node, nodes, cat_offset, cat_count, cat_codes, cat_left, strict)
        cold = nd.right if hot == nd.left else nd.left
        c = cover[np.uint64(node)]
        inv = 1.0 / c if c > 0.0 else 0.0
        iz = 1.0
        io = 1.0
        for k in range(ud + 1):
            if pf[s, k] == feat:
                iz = pv[0, s, k]
                io = pv[1, s, k]
                _unwind(pf, pv, s, ud, k, recip)
                ud -= 1
                break
        zc = cover[np.uint64(cold)] * inv * iz
        if zc != 0.0:  # a child with zero cover and zero one fraction adds nothing
            sk[top, 0] = cold
            sk[top, 1] = s + 1
            sk[top, 2] = ud + 1
            sk[top, 3] = feat
            sf[top, 0] = zc
            sf[top, 1] = 0.0
            top += 1
        sk[top, 0] = hot
        sk[top, 1] = s + 1
        sk[top, 2] = ud + 1
        sk[top, 3] = feat
        sf[top, 0] = cover[np.uint64(hot)] * inv * iz
        sf[top, 1] = io
        top += 1


@njit(cache=True)
def saabas(X, row, root, nodes, value, cat_offset, cat_count, cat_codes, cat_left, strict,
           round32, col, scale, proj, out):
    """Add ``scale`` x the Saabas contributions (v_child - v_node of every split on the
    row's path, to the split's feature) of the tree at ``root`` to ``out``."""
    vdim = value.shape[1]
    project = proj.shape[0] > 0
    node = root
    while not nodes[np.uint64(node)].flags & LEAF:
        nd = nodes[np.uint64(node)]
        x = feature_value(X, row, nd.feature, round32)
        child = step(x, node, nodes, cat_offset, cat_count, cat_codes, cat_left, strict)
        f = np.uint64(nd.feature)
        if project:
            acc = 0.0
            for j in range(vdim):
                acc += proj[j] * (value[np.uint64(child), j] - value[np.uint64(node), j])
            out[f, 0] += scale * acc
        else:
            for j in range(vdim):
                out[f, col + j] += scale * (value[np.uint64(child), j]
                                            - value[np.uint64(node), j])
        node = child


@njit(cache=True, inline="always")
def _tree_contribution(use_shap, X, row, root, nodes, cover, value, cat_offset, cat_count,
                       cat_codes, cat_left, strict, round32, col, scale, proj, out, scratch):
    if use_shap:
        tree_shap(X, row, root, nodes, cover, value, cat_offset, cat_count, cat_codes,
                  cat_left, strict, round32, col, scale, proj, out, scratch)
    else:
        saabas(X, row, root, nodes, value, cat_offset, cat_count, cat_codes, cat_left,
               strict, round32, col, scale, proj, out)


ROWS_PER_TASK = 256  # rows a task passes through every tree (a tree stays in cache)


@njit(cache=True, parallel=True)
def contributions_chunk(X, out, use_shap, max_depth, tree_offsets, tree_output, tree_scale,
                        cover, value, nodes, cat_offset, cat_count, cat_codes, cat_left,
                        strict, round32):
    """out[i, k, :] += sum over trees of scale x contribution of feature k for row i
    (``out`` (n_rows, n_features, n_outputs), zeroed by the caller); rows in parallel
    tasks, each passing its rows through one tree after the other."""
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_tasks = (n + ROWS_PER_TASK - 1) // ROWS_PER_TASK
    no_proj = np.empty(0)
    for task in prange(n_tasks):
        scratch = new_scratch(max_depth)
        r0 = task * ROWS_PER_TASK
        r1 = min(n, r0 + ROWS_PER_TASK)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            s = tree_scale[t]
            for i in range(r0, r1):
                _tree_contribution(use_shap, X, i, root, nodes, cover, value, cat_offset,
                                   cat_count, cat_codes, cat_left, strict, round32, col, s,
                                   no_proj, out[i], scratch)


@njit(cache=True, parallel=True)
def oob_contributions_chunk(X, row0, inbag_bits, out_oob, out_in, n_oob, use_shap, max_depth,
                            tree_offsets, tree_output, cover, value, nodes, cat_offset,
                            cat_count, cat_codes, cat_left, strict, round32):
    """Forests out of bag: out_oob[i] += the (unscaled) contributions of the trees for
    which global row ``row0 + i`` is out of bag, out_in[i] += those of the trees it is
    in-bag for, n_oob[i] += the number of out-of-bag trees (all zeroed by the caller)."""
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_tasks = (n + ROWS_PER_TASK - 1) // ROWS_PER_TASK
    no_proj = np.empty(0)
    for task in prange(n_tasks):
        scratch = new_scratch(max_depth)
        r0 = task * ROWS_PER_TASK
        r1 = min(n, r0 + ROWS_PER_TASK)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            for i in range(r0, r1):
                r = row0 + i
                if (inbag_bits[t, r >> 3] >> (r & 7)) & 1:
                    dest = out_in[i]
                else:
                    dest = out_oob[i]
                    n_oob[i] += 1
                _tree_contribution(use_shap, X, i, root, nodes, cover, value, cat_offset,
                                   cat_count, cat_codes, cat_left, strict, round32, col, 1.0,
                                   no_proj, dest, scratch)


@njit(cache=True, parallel=True)
def forest_block_sums(X, row0, order, block_start, Z, w, inbag_bits, use_inbag, use_shap,
                      max_depth, acc, n_eval, tree_offsets, tree_output, cover, value, nodes,
                      cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """SHAP-oob sums of a forest: acc[b, t, k, 0] += w_i z_i . phi_{t,k}(x_i) and
    n_eval[b, t] += w_i over the rows i of block b that evaluate tree t (its out-of-bag
    rows with ``use_inbag``). ``order[block_start[b]:block_start[b + 1]]``: the local rows
    of block b; ``Z`` (rows, n_outputs) and ``w`` indexed by global row (``w`` may hold
    one weight for all). Each thread owns whole blocks."""
    n_blocks = block_start.shape[0] - 1
    n_trees = tree_offsets.shape[0] - 1
    last_w = w.shape[0] - 1
    vdim = value.shape[1]
    for b in prange(n_blocks):
        scratch = new_scratch(max_depth)
        proj = np.empty(vdim)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            dest = acc[b, t]
            for q in range(block_start[b], block_start[b + 1]):
                i = order[q]
                r = row0 + i
                if use_inbag and (inbag_bits[t, r >> 3] >> (r & 7)) & 1:
                    continue
                wi = w[min(r, last_w)]
                if wi == 0.0:
                    continue
                n_eval[b, t] += wi
                for j in range(vdim):
                    proj[j] = wi * Z[r, col + j]
                _tree_contribution(use_shap, X, i, root, nodes, cover, value, cat_offset,
                                   cat_count, cat_codes, cat_left, strict, round32, 0, 1.0,
                                   proj, dest, scratch)


@njit(cache=True, parallel=True)
def staged_block_sums(X, row0, order, block_start, y, w, base_score, stage_start, loss_code,
                      loss_params, leaf_factor, use_shap, max_depth, acc, n_eval,
                      tree_offsets, tree_output, tree_scale, cover, value, nodes, depth,
                      min_depth, cat_offset, cat_count, cat_codes, cat_left, strict, round32):
    """SHAP-oob sums of a boosted model on held-out rows: acc[b, t, k, 0] += w_i (-g_i) .
    phi_{t,k}(x_i) with g the gradient of the model's loss at the margin before tree t's
    stage (as the staged node statistics, ``kernels/staged.py``, which computes the
    per-row terms), phi of the tree's values as they enter the margin (times its scale),
    and n_eval[b, t] += w_i. Rows travel in groups carrying their margin; threads own
    whole blocks."""
    n_blocks = block_start.shape[0] - 1
    K = base_score.shape[0]
    n_stages = stage_start.shape[0] - 1
    last_w = w.shape[0] - 1
    for b in prange(n_blocks):
        scratch = new_scratch(max_depth)
        margin = np.empty((GROUP, K))
        leaves = np.empty(BATCH, np.int64)
        g = np.empty((GROUP, K))
        h = np.empty((GROUP, K))
        terms = np.zeros((K, N_TERMS, GROUP))
        yg = np.empty(GROUP)
        wg = np.empty(GROUP)
        e = np.empty(GROUP)
        use_e = leaf_factor.shape[0] > 0
        e0 = np.exp(-loss_params[0] * base_score[0]) if use_e else 0.0
        proj = np.empty(1)
        for s0 in range(block_start[b], block_start[b + 1], GROUP):
            s1 = min(block_start[b + 1], s0 + GROUP)
            ng = s1 - s0
            rows = order[s0:s1]
            for r in range(ng):
                for k in range(K):
                    margin[r, k] = base_score[k]
                e[r] = e0
                yg[r] = y[row0 + rows[r]]
                wg[r] = w[min(row0 + rows[r], last_w)]
            for st in range(n_stages):
                stage_terms(loss_code, loss_params, margin, ng, yg, wg, g, h, terms, e)
                for t in range(stage_start[st], stage_start[st + 1]):
                    col = tree_output[t]
                    sc = tree_scale[t]
                    root = tree_offsets[t]
                    dest = acc[b, t]
                    for r in range(ng):
                        if terms[col, 0, r] == 0.0:
                            continue
                        n_eval[b, t] += terms[col, 0, r]
                        proj[0] = terms[col, 1, r]
                        _tree_contribution(use_shap, X, rows[r], root, nodes, cover, value,
                                           cat_offset, cat_count, cat_codes, cat_left,
                                           strict, round32, 0, sc, proj, dest, scratch)
                    for q0 in range(0, ng, BATCH):
                        m = min(BATCH, ng - q0)
                        walk_batch(X, rows[q0:], m, root, depth[t], min_depth[t], nodes,
                                   cat_offset, cat_count, cat_codes, cat_left, strict,
                                   round32, leaves)
                        for q in range(m):
                            leaf = np.uint64(leaves[q])
                            margin[q0 + q, col] += sc * value[leaf, 0]
                        if use_e:
                            for q in range(m):
                                e[q0 + q] *= leaf_factor[np.uint64(leaves[q])]


@njit(cache=True, parallel=True)
def expected_values(tree_offsets, order, left, right, cover, value):
    """Per node: the cover-weighted mean of the leaf values below it (what TreeSHAP's
    base value is built from), (n_nodes, value_dim); ``order`` the post-order."""
    out = value.copy()
    for t in prange(tree_offsets.shape[0] - 1):
        for idx in range(tree_offsets[t], tree_offsets[t + 1]):
            node = order[idx]
            lc = left[node]
            if lc < 0:
                continue
            rc = right[node]
            wl = cover[lc]
            wr = cover[rc]
            for j in range(value.shape[1]):
                if wl + wr > 0:
                    out[node, j] = (wl * out[lc, j] + wr * out[rc, j]) / (wl + wr)
                else:
                    out[node, j] = 0.5 * (out[lc, j] + out[rc, j])
    return out


"""Per-row contributions of single trees: path-dependent TreeSHAP and Saabas.

TreeSHAP values are exactly those of Lundberg et al. (2020, Algorithm 2), which shap's
TreeExplainer (``feature_perturbation="tree_path_dependent"``), XGBoost's
``pred_contribs`` and LightGBM's ``pred_contrib`` compute, but the algorithm is the
O(nodes x depth) one of Linear TreeSHAP (Yu et al., NeurIPS 2022) instead of
Algorithm 2's O(leaves x depth^2): every leaf's Shapley weights are a Beta integral
of a polynomial in t, integrated exactly by Gauss-Legendre quadrature, and the
per-leaf polynomials are summed bottom-up (see ``linear_tree_shap``). The child a row
goes to at each split is decided by ``route.step``, so categorical splits, missing
values and NaN modes route exactly as the normal form routes them.

Saabas contributions walk the row's own path: a split on feature k adds
``v_child - v_node`` to k.

A node's value is read from X at its routing feature (``routing.feature``), and its
contribution is credited to ``credit[node]`` (``ShapTables.feature``): the model's
feature, which differs from the routing feature where rows are routed by a library's
leaf indices, or a player of its own (CatBoost's combinations of categorical features).
The ``out`` rows (and the per-player scratch) have one entry per credited player.

A kernel adds ``scale * contribution`` of one tree for one row into ``out[feature,
col + j]`` (j over the tree's values), or with a projection ``proj`` (len value_dim)
the scalar ``scale * proj . contribution`` into ``out[feature, 0]``. Rows run in
parallel tasks (or, for the importance sums, threads own whole row blocks); every task
has its own scratch buffers and writes only its own rows' (blocks') cells.
"""

import numpy as np
from numba import njit, prange

from .route import LEAF, feature_value, step, walk_batch
from .staged import BATCH, GROUP, N_TERMS, stage_terms, start_group
from .structure import _fill_tree


@njit(cache=True)
def saabas(X, row, root, routing, credit, value, strict, round32, col, scale, proj, out):
    """Add ``scale`` x the Saabas contributions (v_child - v_node of every split on the
    row's path, to ``credit`` of the split) of the tree at ``root`` to ``out``.
    ``routing``: kernel_inputs.Routing."""
    left, right, feature, threshold, flags = (routing.left, routing.right, routing.feature,
                                              routing.threshold, routing.flags)
    cat_offset, cat_count = routing.cat_offset, routing.cat_count
    cat_codes, cat_left = routing.cat_codes, routing.cat_left
    vdim = value.shape[1]
    project = proj.shape[0] > 0
    node = root
    while not flags[np.uint64(node)] & LEAF:
        x = feature_value(X, row, feature[np.uint64(node)], round32)
        child = step(x, node, left, right, threshold, flags, cat_offset, cat_count,
                     cat_codes, cat_left, strict)
        f = np.uint64(credit[np.uint64(node)])
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
def _tree_contribution(tables, routing, X, row, t, root, strict, round32, col, scale, proj,
                       out, scratch):
    """Tree t's contribution for one row (TreeSHAP or Saabas, by ``tables.use_shap``)."""
    if tables.use_shap:
        linear_tree_shap(X, row, root, tables.path_features[t], routing, tables.feature,
                         tables.cover, tables.value, strict, round32, col, scale, proj, out,
                         scratch, tables.gl_nodes, tables.gl_weights)
    else:
        saabas(X, row, root, routing, tables.feature, tables.value, strict, round32, col,
               scale, proj, out)


ROWS_PER_TASK = 256  # rows a task passes through every tree (a tree stays in cache)


@njit(cache=True, parallel=True)
def contributions_chunk(X, out, tables, tree_offsets, tree_output, tree_scale, routing,
                        strict, round32, rows_per_task=ROWS_PER_TASK):
    """out[i, k, :] += sum over trees of scale x contribution of feature k for row i
    (``out`` (n_rows, n_features, n_outputs), zeroed by the caller); rows in parallel
    tasks, each passing its rows through one tree after the other. ``tables``:
    kernel_inputs.ShapTables, ``routing``: kernel_inputs.Routing."""
    max_depth, value = tables.max_depth, tables.value
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_tasks = (n + rows_per_task - 1) // rows_per_task
    no_proj = np.empty(0)
    vdim = value.shape[1]
    for task in prange(n_tasks):
        scratch = new_linear_scratch(max_depth, vdim, out.shape[1])
        r0 = task * rows_per_task
        r1 = min(n, r0 + rows_per_task)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            s = tree_scale[t]
            for i in range(r0, r1):
                _tree_contribution(tables, routing, X, i, t, root, strict, round32, col, s,
                                   no_proj, out[i], scratch)


@njit(cache=True, parallel=True)
def oob_contributions_chunk(X, row0, inbag_bits, out_oob, out_in, n_oob, tables,
                            tree_offsets, tree_output, routing, strict, round32,
                            rows_per_task=ROWS_PER_TASK):
    """Forests out of bag: out_oob[i] += the (unscaled) contributions of the trees for
    which global row ``row0 + i`` is out of bag, out_in[i] += those of the trees it is
    in-bag for, n_oob[i] += the number of out-of-bag trees (all zeroed by the caller).
    ``tables``: kernel_inputs.ShapTables, ``routing``: kernel_inputs.Routing."""
    max_depth, value = tables.max_depth, tables.value
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_tasks = (n + rows_per_task - 1) // rows_per_task
    no_proj = np.empty(0)
    vdim = value.shape[1]
    for task in prange(n_tasks):
        scratch = new_linear_scratch(max_depth, vdim, out_oob.shape[1])
        r0 = task * rows_per_task
        r1 = min(n, r0 + rows_per_task)
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
                _tree_contribution(tables, routing, X, i, t, root, strict, round32, col, 1.0,
                                   no_proj, dest, scratch)


@njit(cache=True, parallel=True)
def forest_block_sums(X, row0, order, block_start, rows_in, inbag_bits, use_inbag, tables,
                      acc, n_eval, tree_offsets, tree_output, routing, strict, round32):
    """SHAP-oob sums of a forest: acc[b, t, k, 0] += w_i z_i . phi_{t,k}(x_i) and
    n_eval[b, t] += w_i over the rows i of block b that evaluate tree t (its out-of-bag
    rows with ``use_inbag``). ``order[block_start[b]:block_start[b + 1]]``: the local rows
    of block b; ``rows_in`` (kernel_inputs.RowInputs): ``Z`` (rows, n_outputs), ``w``
    (which may hold one weight for all) and ``pos`` (each row's global position, which
    indexes ``inbag_bits``) indexed by the call's row number row0 + i. ``tables``:
    kernel_inputs.ShapTables, ``routing``: kernel_inputs.Routing. Each thread owns whole
    blocks."""
    Z, w, pos = rows_in.target, rows_in.w, rows_in.pos
    max_depth, value = tables.max_depth, tables.value
    n_blocks = block_start.shape[0] - 1
    n_trees = tree_offsets.shape[0] - 1
    last_w = w.shape[0] - 1
    vdim = value.shape[1]
    for b in prange(n_blocks):
        scratch = new_linear_scratch(max_depth, 1, acc.shape[2])
        proj = np.empty(vdim)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            dest = acc[b, t]
            for q in range(block_start[b], block_start[b + 1]):
                i = order[q]
                r = row0 + i
                if use_inbag:
                    p = pos[r]
                    if (inbag_bits[t, p >> 3] >> (p & 7)) & 1:
                        continue
                wi = w[min(r, last_w)]
                if wi == 0.0:
                    continue
                n_eval[b, t] += wi
                for j in range(vdim):
                    proj[j] = wi * Z[r, col + j]
                _tree_contribution(tables, routing, X, i, t, root, strict, round32, 0, 1.0,
                                   proj, dest, scratch)


@njit(cache=True, parallel=True)
def staged_block_sums(X, row0, order, block_start, rows_in, loss, trees, tables, acc, n_eval,
                      routing, strict, round32):
    """SHAP-oob sums of a boosted model on held-out rows: acc[b, t, k, 0] += w_i (-g_i) .
    phi_{t,k}(x_i) with g the gradient of the model's loss at the margin before tree t's
    stage (as the staged node statistics, ``kernels/staged.py``, which computes the
    per-row terms), phi of the tree's values as they enter the margin (times its scale),
    and n_eval[b, t] += w_i. Rows travel in groups carrying their margin; threads own
    whole blocks. ``rows_in``, ``loss`` and ``trees`` as ``staged_leaf_stats`` reads
    them: ``rows_in.row_start`` (n_rows, K), indexed by the global row, each row's margin
    before the first tree (base score + offset), or a (0, K) array: ``loss.base_score``
    for every row. The margins add ``tables.value`` (the node values, as before)."""
    y, w, row_start = rows_in.target, rows_in.w, rows_in.row_start
    loss_code, loss_params, base_score = loss.code, loss.params, loss.base_score
    tree_offsets, tree_output, tree_scale = trees.tree_offsets, trees.tree_output, trees.tree_scale
    leaf_factor, stage_start = trees.leaf_factor, trees.stage_start
    max_depth, value = tables.max_depth, tables.value
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n_blocks = block_start.shape[0] - 1
    K = base_score.shape[0]
    n_stages = stage_start.shape[0] - 1
    for b in prange(n_blocks):
        scratch = new_linear_scratch(max_depth, 1, acc.shape[2])
        margin = np.empty((GROUP, K))
        leaves = np.empty(BATCH, np.int64)
        g = np.empty((GROUP, K))
        h = np.empty((GROUP, K))
        terms = np.zeros((K, N_TERMS, GROUP))
        yg = np.empty(GROUP)
        wg = np.empty(GROUP)
        e = np.empty(GROUP)
        use_e = leaf_factor.shape[0] > 0
        proj = np.empty(1)
        for s0 in range(block_start[b], block_start[b + 1], GROUP):
            s1 = min(block_start[b + 1], s0 + GROUP)
            ng = s1 - s0
            rows = order[s0:s1]
            start_group(rows, ng, row0, y, w, base_score, row_start, loss_params[0], use_e,
                        margin, e, yg, wg)
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
                        _tree_contribution(tables, routing, X, rows[r], t, root, strict,
                                           round32, 0, sc, proj, dest, scratch)
                    for q0 in range(0, ng, BATCH):
                        m = min(BATCH, ng - q0)
                        walk_batch(X, rows[q0:], m, root, depth[t], min_depth[t],
                                   plain[t], left, right, feature, threshold, flags,
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
        # the normal form's internal values are the same recursion with weights
        _fill_tree(t, order, tree_offsets, left, right, cover, out)
    return out



@njit(cache=True)
def new_linear_scratch(max_depth, vdim, n_players):
    """One thread's buffers for ``linear_tree_shap``: per tree level the product P and
    the summary H at the quadrature nodes, the edge factors' reciprocals, the node, its
    state and hot child, the edge (player, Z, O, previous Z, previous O); per credited
    player the running (Z, O) of the current path."""
    L = max_depth + 2
    M = max_depth // 2 + 1
    cum = np.ones((n_players, 2))
    return (np.empty((L, M)), np.zeros((L, vdim, M)), np.empty((L, M)), np.empty((L, M)),
            np.empty((L, 3), np.int64), np.empty((L, 4)), np.empty(L, np.int64), cum)


@njit(cache=True)
def linear_tree_shap(X, row, root, n_path_features, routing, credit, cover, value, strict,
                     round32, col, scale, proj, out, scratch, gl_nodes, gl_weights):
    """Add ``scale`` x the path-dependent TreeSHAP values of the tree at ``root`` for row
    ``row`` of X to ``out`` (see the module docstring for ``col`` and ``proj``), in
    O(nodes x depth) instead of Algorithm 2's O(leaves x depth^2). ``routing``:
    kernel_inputs.Routing; ``credit``: per node the player its split is (the features
    below).

    For a leaf v whose path has unique features with zero fractions Z_j (products of
    cover ratios) and one fractions O_j (0 or 1), the path-dependent SHAP value of
    feature i is v (O_i - Z_i) integral_0^1 prod_{j != i} (Z_j + t (O_j - Z_j)) dt (the
    Shapley weights are Beta integrals). The integrand is a polynomial of degree < depth,
    integrated exactly by an M-point Gauss-Legendre rule, M = n_path_features // 2 + 1
    (``n_path_features``: the tree's most distinct credited players on a path). Summing
    over leaves, as Linear TreeSHAP (Yu et al. 2022) does: H_n(t) = sum over the leaves v
    below node n of v prod_j p_j(t) is built bottom-up, and the edge into n that splits
    on i adds (O_i - Z_i) sum_m w_m H_n(t_m) / p_i(t_m). A leaf whose path splits on i
    again deeper would be counted by both edges: the deeper edge subtracts what the
    edge above adds for the leaves below it (the same quadrature sum, so it cancels
    exactly), and each leaf keeps the term of its deepest edge on i."""
    Pm, H, inv_new, inv_old, ints, edge, hot_of, cum = scratch
    left, right, feature, threshold, flags = (routing.left, routing.right, routing.feature,
                                              routing.threshold, routing.flags)
    cat_offset, cat_count = routing.cat_offset, routing.cat_count
    cat_codes, cat_left = routing.cat_codes, routing.cat_left
    M = n_path_features // 2 + 1
    tq = gl_nodes[M]
    wq = gl_weights[M]
    project = proj.shape[0] > 0
    vdim = value.shape[1]
    hd = 1 if project else vdim
    for m in range(M):
        Pm[0, m] = 1.0
    for j in range(hd):
        for m in range(M):
            H[0, j, m] = 0.0
    ints[0, 0] = root
    ints[0, 1] = 0  # children started
    lvl = 0
    while True:
        node = ints[lvl, 0]
        un = np.uint64(node)
        finished = False
        if flags[un] & LEAF:
            if project:
                v = 0.0
                for j in range(vdim):
                    v += proj[j] * value[np.uint64(node), j]
                for m in range(M):
                    H[lvl, 0, m] = v * Pm[lvl, m]
            else:
                for j in range(vdim):
                    v = value[np.uint64(node), j]
                    for m in range(M):
                        H[lvl, j, m] = v * Pm[lvl, m]
            finished = True
        elif ints[lvl, 1] < 2:
            if ints[lvl, 1] == 0:
                x = feature_value(X, row, feature[un], round32)
                hot_of[lvl] = step(x, node, left, right, threshold, flags, cat_offset,
                                   cat_count, cat_codes, cat_left, strict)
            child = left[un] if ints[lvl, 1] == 0 else right[un]
            ints[lvl, 1] += 1
            f = credit[un]
            c = cover[np.uint64(node)]
            z_e = cover[np.uint64(child)] / c if c > 0.0 else 0.0
            zp = cum[f, 0]
            op = cum[f, 1]
            z = zp * z_e
            o = op if child == hot_of[lvl] else 0.0
            if z == 0.0 and o == 0.0:
                continue  # every leaf below has a zero product: nothing to add
            cum[f, 0] = z
            cum[f, 1] = o
            nl = lvl + 1
            ints[nl, 0] = child
            ints[nl, 1] = 0
            ints[nl, 2] = f
            edge[nl, 0] = z
            edge[nl, 1] = o
            edge[nl, 2] = zp
            edge[nl, 3] = op
            for m in range(M):
                pn = z + tq[m] * (o - z)
                po = zp + tq[m] * (op - zp)
                inv_new[nl, m] = 1.0 / pn
                inv_old[nl, m] = 1.0 / po
                Pm[nl, m] = Pm[lvl, m] * pn * inv_old[nl, m]
            for j in range(hd):
                for m in range(M):
                    H[nl, j, m] = 0.0
            lvl = nl
            continue
        else:
            finished = True
        if finished:
            if lvl == 0:
                break
            f = ints[lvl, 2]
            d_new = edge[lvl, 1] - edge[lvl, 0]
            d_old = edge[lvl, 3] - edge[lvl, 2]
            fu = np.uint64(f)
            for j in range(hd):
                acc = 0.0
                for m in range(M):
                    h = wq[m] * H[lvl, j, m]
                    acc += h * (d_new * inv_new[lvl, m] - d_old * inv_old[lvl, m])
                    H[lvl - 1, j, m] += H[lvl, j, m]
                if project:
                    out[fu, 0] += scale * acc
                else:
                    out[fu, col + j] += scale * acc
            cum[f, 0] = edge[lvl, 2]
            cum[f, 1] = edge[lvl, 3]
            lvl -= 1


@njit(cache=True, parallel=True)
def summed_cover(tree_offsets, order, left, right, cover):
    """Leaf covers as given, every internal node's the sum of its children's (bottom up,
    ``order`` the post-order): the cover ratios of a split then add up to 1 exactly, so
    contributions add up to the prediction exactly even where a library stores rounded
    node covers (XGBoost's float32 sum_hessian)."""
    out = cover.copy()
    for t in prange(tree_offsets.shape[0] - 1):
        for idx in range(tree_offsets[t], tree_offsets[t + 1]):
            node = order[idx]
            if left[node] >= 0:
                out[node] = out[left[node]] + out[right[node]]
    return out


@njit(cache=True, parallel=True)
def path_features(tree_offsets, left, right, feature, n_features):
    """Per tree: the largest number of distinct features on a root-to-leaf path (the
    degree bound that sets ``linear_tree_shap``'s quadrature size; at most the depth)."""
    n_trees = tree_offsets.shape[0] - 1
    out = np.zeros(n_trees, np.int64)
    for t in prange(n_trees):
        root = tree_offsets[t]
        count = np.zeros(n_features, np.int64)
        size = 2 * (tree_offsets[t + 1] - root) + 2
        stack = np.empty(size, np.int64)  # node, or ~node when leaving it
        stack[0] = root
        top = 1
        distinct = 0
        best = 0
        while top > 0:
            top -= 1
            item = stack[top]
            if item < 0:  # leaving internal node ~item: its feature leaves the path
                f = feature[~item]
                count[f] -= 1
                if count[f] == 0:
                    distinct -= 1
                continue
            if left[item] < 0:
                best = max(best, distinct)
                continue
            f = feature[item]
            if count[f] == 0:
                distinct += 1
            count[f] += 1
            stack[top] = ~item
            stack[top + 1] = right[item]
            stack[top + 2] = left[item]
            top += 3
        out[t] = best
    return out

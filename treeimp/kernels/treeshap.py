"""Per-row contributions of single trees: path-dependent TreeSHAP and Saabas.

TreeSHAP values are exactly those of Lundberg et al. (2020, Algorithm 2), which shap's
TreeExplainer (``feature_perturbation="tree_path_dependent"``), XGBoost's
``pred_contribs`` and LightGBM's ``pred_contrib`` compute, but the algorithm is the
O(nodes x depth) one of Linear TreeSHAP (Yu et al., NeurIPS 2022) instead of
Algorithm 2's O(leaves x depth^2): every leaf's Shapley weights are a Beta integral
of a polynomial in t, integrated exactly by Gauss-Legendre quadrature, and the
per-leaf polynomials are summed bottom-up (see ``tree_shap_batch``). A batch of rows
walks each tree together: what does not depend on the row (cover ratios, quadrature
factors) is computed once per edge and batch, and the per-row arithmetic runs across
the batch's rows as vector code. The child a row goes to at each split is decided by
``route.step``, so categorical splits, missing values and NaN modes route exactly as
the normal form routes them.

Saabas contributions walk the row's own path: a split on feature k adds
``v_child - v_node`` to k.

A node's value is read from X at its routing feature (``routing.feature``), and its
contribution is credited to ``credit[node]`` (``ShapTables.feature``): the model's
feature, which differs from the routing feature where rows are routed by a library's
leaf indices, or a player of its own (CatBoost's combinations of categorical features).
The ``out`` rows (and the per-player scratch) have one entry per credited player.

A kernel adds ``scale * contribution`` of one tree for row r into ``out[dest[r],
feature, col + j]`` (j over the tree's values), or with a projection ``proj[r]`` (len
value_dim) the scalar ``scale * proj[r] . contribution`` into ``out[dest[r], feature,
0]``. Rows run in parallel tasks (or, for the importance sums, threads own whole row
blocks); every task has its own scratch buffers and writes only its own rows' (blocks')
cells.
"""

import numpy as np
from numba import njit, prange

from .route import LEAF, NAN_LEFT, NOT_PLAIN, feature_value, step, walk_batch
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


BATCH_ROWS = 32  # rows that pass one tree together in the TreeSHAP kernel (vector width)


@njit(cache=True)
def new_batch_scratch(max_depth, hd, n_players, batch):
    """One thread's buffers for ``tree_shap_batch`` (``hd``: values per row, 1 with a
    projection). Per tree level: the path product P and the leaf sum H at the
    quadrature nodes for every row of the batch, whether each row goes left (1.0 or
    0.0), its one fraction O on the level's edge and the one before it on the same
    player; the edge's node, children started and player, its zero fractions (Z,
    previous Z), per state of (O, previous O) the factors of P and the coefficients of
    H, and per O the reciprocal of p. Per credited player: the current Z, and every
    row's current O. Per batch row: the coefficients' sum; per quadrature node and row
    its terms, and per player the last edge finish that took it, the count of finishes
    last (interactions); an empty pair output (calls without interactions)."""
    L = max_depth + 2
    M = max_depth // 2 + 1
    return (np.empty((L, M, batch)), np.zeros((L, hd, M, batch)),
            np.empty((L, batch)), np.empty((L, batch)), np.empty((L, batch)),
            np.empty((L, 3), np.int64), np.empty((L, 2)), np.empty((L, 3, M)),
            np.empty((L, 3, M)), np.empty((L, 2, M)), np.ones(n_players),
            np.ones((n_players, batch)), np.empty((hd, batch)), np.empty((hd, M, batch)),
            np.zeros(n_players + 1, np.int64), np.zeros((0, 0, 0)))


@njit(cache=True, inline="always")
def _hot_left(X, rows, nr, node, left, right, feature, threshold, flags, cat_offset,
              cat_count, cat_codes, cat_left, strict, round32, out):
    """out[r] := 1.0 if row ``rows[r]`` of X goes left at internal ``node``, else 0.0. A
    numeric node without zero-as-missing is one comparison (NaN takes its NAN_LEFT
    side), written without branches as ``route.plain_level`` is; the others ``step``."""
    un = np.uint64(node)
    fi = feature[un]
    fl = flags[un]
    if fl & NOT_PLAIN:
        target = left[un]
        for r in range(nr):
            x = feature_value(X, rows[r], fi, round32)
            child = step(x, node, left, right, threshold, flags, cat_offset, cat_count,
                         cat_codes, cat_left, strict)
            out[r] = 1.0 if child == target else 0.0
        return
    _plain_hot_left(X, rows, nr, node, feature, threshold, flags, strict, round32, out)


@njit(cache=True, inline="always")
def _plain_hot_left(X, rows, nr, node, feature, threshold, flags, strict, round32, out):
    """``_hot_left`` at a node not in NOT_PLAIN: one comparison, NaN to its NAN_LEFT
    side."""
    un = np.uint64(node)
    fi = feature[un]
    thr = threshold[un]
    nan_left = 1.0 if flags[un] & NAN_LEFT else 0.0
    for r in range(nr):
        x = feature_value(X, rows[r], fi, round32)
        g = 1.0 if (x < thr if strict else x <= thr) else 0.0
        out[r] = nan_left if x != x else g


@njit(cache=True, inline="always")
def _edge_tables(fac, cf, inv, z, zp, tq, wq, M):
    """The factors of P and the coefficients of H on an edge whose player's zero
    fraction goes from zp to z, for each state of the one fractions (O, previous O):
    0: (0, 0), 1: (0, 1), 2: (1, 1) (a row's O can only fall to 0 on a path); and
    inv[O, m] = 1 / p(t_m) after the edge. A state whose row has a zero product below
    (p = 0) gets zeros: its rows add nothing."""
    for m in range(M):
        t = tq[m]
        pn0 = z * (1.0 - t)
        pn1 = z + t * (1.0 - z)
        po0 = zp * (1.0 - t)
        po1 = zp + t * (1.0 - zp)
        inv_o1 = 1.0 / po1
        inv_n1 = 1.0 / pn1
        fac[2, m] = pn1 * inv_o1
        cf[2, m] = wq[m] * ((1.0 - z) * inv_n1 - (1.0 - zp) * inv_o1)
        inv[1, m] = inv_n1
        inv[0, m] = 0.0
        if pn0 > 0.0:
            inv_n0 = 1.0 / pn0
            inv[0, m] = inv_n0
            fac[1, m] = pn0 * inv_o1
            cf[1, m] = wq[m] * (-z * inv_n0 - (1.0 - zp) * inv_o1)
            if po0 > 0.0:
                inv_o0 = 1.0 / po0
                fac[0, m] = pn0 * inv_o0
                cf[0, m] = wq[m] * (-z * inv_n0 + zp * inv_o0)
            else:
                fac[0, m] = 0.0
                cf[0, m] = 0.0
        else:
            fac[0, m] = fac[1, m] = 0.0
            cf[0, m] = cf[1, m] = 0.0


@njit(cache=True)
def tree_shap_batch(X, rows, nr, root, n_path_features, routing, credit, cover, value,
                    strict, round32, col, scale, proj, dest, out, scratch, gl_nodes,
                    gl_weights, pair_out, pair_dest, not_plain=True):
    """Add ``scale`` x the path-dependent TreeSHAP values of the tree at ``root`` for
    the rows ``rows[:nr]`` of X (at most the scratch's batch) to ``out`` (n_dest,
    n_players, n_cols): row r's value of player k and output j to ``out[dest[r], k,
    col + j]``, or with a projection ``proj`` ((batch, value_dim); empty: none) the
    scalar ``proj[r] . values`` to ``out[dest[r], k, 0]``. ``routing``:
    kernel_inputs.Routing; ``credit``: per node the player its split is.

    For a leaf v whose path has unique players with zero fractions Z_j (products of
    cover ratios) and one fractions O_j (0 or 1), the path-dependent SHAP value of
    player i is v (O_i - Z_i) integral_0^1 prod_{j != i} (Z_j + t (O_j - Z_j)) dt (the
    Shapley weights are Beta integrals). The integrand is a polynomial of degree d - 1
    for a path of d distinct players, integrated exactly by an M-point Gauss-Legendre
    rule (exact to degree 2M - 1), M = ceil(n_path_features / 2) (``n_path_features``:
    the tree's most distinct credited players on a path). Summing over leaves, as
    Linear TreeSHAP (Yu et al. 2022) does: H_n(t) = sum over the leaves v below node n
    of v prod_j p_j(t) is built bottom-up, and the edge into n that splits on i adds
    (O_i - Z_i) sum_m w_m H_n(t_m) / p_i(t_m). A leaf whose path splits on i again
    deeper would be counted by both edges: the deeper edge subtracts what the edge above
    adds for the leaves below it (the same quadrature sum, so it cancels exactly), and
    each leaf keeps the term of its deepest edge on i.

    With ``pair_out`` (non-empty; (n_dest * n_players, n_players, n_cols), written at
    rows ``pair_dest[r] + k``) the kernel also adds the SHAP interaction values of
    players i != j (Lundberg et al. 2020): for a leaf, v (O_i - Z_i) (O_j - Z_j) / 2
    integral_0^1 prod_{k != i, j} p_k(t) dt, the same Beta integral one degree lower.
    When an edge on i finishes, for every other player j on the path above (at its
    deepest edge there), the edge's quadrature terms of H_n (those it adds to phi_i,
    and the ones it takes back from i's edge above) are divided by p_j(t_m) and
    weighted by (O_j - Z_j) / 2, into (i, j) and (j, i): each leaf's pair is counted
    once, at the deeper of its two edges, with its deepest state of both. The main
    effects (the diagonal) are left to the caller.

    The batch walks the whole tree once, depth first. Everything but the one fractions
    is the same for every row (Z, the quadrature nodes), and O and previous O take only
    three states, so each edge's factors and coefficients are computed once for the
    batch and every row selects its state: the per-row work is multiply-adds over
    (quadrature node, row), which vectorise across rows."""
    (Pm, H, hot, O_edge, O_prev, ints, zs, fac, cf, inv, Zcur, Ocur, acc, hk, seen,
     _) = scratch
    left, right, feature, threshold, flags = (routing.left, routing.right, routing.feature,
                                              routing.threshold, routing.flags)
    cat_offset, cat_count = routing.cat_offset, routing.cat_count
    cat_codes, cat_left = routing.cat_codes, routing.cat_left
    M = max(1, (n_path_features + 1) // 2)
    tq = gl_nodes[M]
    wq = gl_weights[M]
    project = proj.shape[0] > 0
    pairs = pair_out.shape[0] > 0
    vdim = value.shape[1]
    hd = 1 if project else vdim
    for m in range(M):
        for r in range(nr):
            Pm[0, m, r] = 1.0
    for j in range(hd):
        for m in range(M):
            for r in range(nr):
                H[0, j, m, r] = 0.0
    ints[0, 0] = root
    ints[0, 1] = 0  # children started
    lvl = 0
    n_marks = seen.shape[0] - 1
    finishes = seen[n_marks]  # edge finishes so far, over calls (marks in ``seen``)
    while True:
        node = ints[lvl, 0]
        un = np.uint64(node)
        finished = False
        if flags[un] & LEAF:
            if project:
                for r in range(nr):
                    v = 0.0
                    for j in range(vdim):
                        v += proj[r, j] * value[un, j]
                    for m in range(M):
                        H[lvl, 0, m, r] = v * Pm[lvl, m, r]
            else:
                for j in range(vdim):
                    v = value[un, j]
                    for m in range(M):
                        for r in range(nr):
                            H[lvl, j, m, r] = v * Pm[lvl, m, r]
            finished = True
        elif ints[lvl, 1] < 2:
            go_left = ints[lvl, 1] == 0
            if go_left:
                if not_plain is None:  # no node of the tree needs route.step
                    _plain_hot_left(X, rows, nr, node, feature, threshold, flags, strict,
                                    round32, hot[lvl])
                else:
                    _hot_left(X, rows, nr, node, left, right, feature, threshold, flags,
                              cat_offset, cat_count, cat_codes, cat_left, strict, round32,
                              hot[lvl])
            child = left[un] if go_left else right[un]
            ints[lvl, 1] += 1
            f = credit[un]
            c = cover[un]
            z_e = cover[np.uint64(child)] / c if c > 0.0 else 0.0
            zp = Zcur[f]
            z = zp * z_e
            nl = lvl + 1
            alive = z != 0.0
            # the rows for which the child is hot: hot[lvl] (1.0 or 0.0) going left
            side = 0.0 if go_left else 1.0
            n_hot = 0.0
            for r in range(nr):
                op = Ocur[f, r]
                o = op * abs(hot[lvl, r] - side)
                O_prev[nl, r] = op
                O_edge[nl, r] = o
                n_hot += o
            alive |= n_hot != 0.0
            if not alive:
                continue  # every leaf below has a zero product for every row
            Zcur[f] = z
            for r in range(nr):
                Ocur[f, r] = O_edge[nl, r]
            ints[nl, 0] = child
            ints[nl, 1] = 0
            ints[nl, 2] = f
            zs[nl, 0] = z
            zs[nl, 1] = zp
            _edge_tables(fac[nl], cf[nl], inv[nl], z, zp, tq, wq, M)
            for m in range(M):
                f0 = fac[nl, 0, m]
                f1 = fac[nl, 1, m]
                f2 = fac[nl, 2, m]
                for r in range(nr):
                    k = f2 if O_edge[nl, r] != 0.0 else (f1 if O_prev[nl, r] != 0.0 else f0)
                    Pm[nl, m, r] = Pm[lvl, m, r] * k
            for j in range(hd):
                for m in range(M):
                    for r in range(nr):
                        H[nl, j, m, r] = 0.0
            lvl = nl
            continue
        else:
            finished = True
        if finished:
            if lvl == 0:
                break
            f = ints[lvl, 2]
            for j in range(hd):
                for r in range(nr):
                    acc[j, r] = 0.0
                for m in range(M):
                    c0 = cf[lvl, 0, m]
                    c1 = cf[lvl, 1, m]
                    c2 = cf[lvl, 2, m]
                    for r in range(nr):
                        h = H[lvl, j, m, r]
                        k = c2 if O_edge[lvl, r] != 0.0 else (c1 if O_prev[lvl, r] != 0.0
                                                             else c0)
                        acc[j, r] += h * k
                        H[lvl - 1, j, m, r] += h
                    if pairs:  # the terms themselves, for the pairs below
                        for r in range(nr):
                            k = c2 if O_edge[lvl, r] != 0.0 else (c1 if O_prev[lvl, r] != 0.0
                                                                 else c0)
                            hk[j, m, r] = H[lvl, j, m, r] * k
            fu = np.uint64(f)
            for r in range(nr):
                d = np.uint64(dest[r])
                for j in range(hd):
                    out[d, fu, col + j] += scale * acc[j, r]
            if pairs:
                finishes += 1
                seen[f] = finishes
                for lj in range(lvl - 1, 0, -1):
                    g = ints[lj, 2]
                    if seen[g] == finishes:
                        continue  # f itself, or g's deeper edge was taken
                    seen[g] = finishes
                    _add_pair(hk, O_edge[lj], zs[lj, 0], inv[lj], nr, hd, M, f, g, col,
                              0.5 * scale, pair_dest, pair_out, acc)
            Zcur[f] = zs[lvl, 1]
            for r in range(nr):
                Ocur[f, r] = O_prev[lvl, r]
            lvl -= 1
    seen[n_marks] = finishes


@njit(cache=True, inline="always")
def _add_pair(hk, O_j, Z_j, inv_j, nr, hd, M, i, j, col, half, pair_dest, pair_out, acc):
    """Add half x (O_j - Z_j) sum_m hk[., m, r] / p_j(t_m) (an edge's quadrature terms
    for player i, divided by player j's factor, ``inv_j[O, m]`` its reciprocal) to the
    interaction of i and j, both ways, of every row r of the batch."""
    for k in range(hd):
        for r in range(nr):
            acc[k, r] = 0.0
        for m in range(M):
            a0 = inv_j[0, m]
            a1 = inv_j[1, m]
            for r in range(nr):
                acc[k, r] += hk[k, m, r] * (a1 if O_j[r] != 0.0 else a0)
    for r in range(nr):
        w = half * (O_j[r] - Z_j)
        base = pair_dest[r]
        for k in range(hd):
            q = w * acc[k, r]
            pair_out[np.uint64(base + i), np.uint64(j), col + k] += q
            pair_out[np.uint64(base + j), np.uint64(i), col + k] += q


@njit(cache=True)
def _tree_batch(tables, routing, X, rows, nr, t, root, strict, round32, col, scale, proj,
                dest, out, scratch):
    """Tree t's contributions for the rows ``rows[:nr]`` (TreeSHAP or Saabas, by
    ``tables.use_shap``), added to ``out[dest[r]]`` as ``tree_shap_batch`` adds them."""
    if tables.use_shap:
        no_pairs = scratch[-1]
        tree_shap_batch(X, rows, nr, root, tables.path_features[t], routing, tables.feature,
                        tables.cover, tables.value, strict, round32, col, scale, proj, dest,
                        out, scratch, tables.gl_nodes, tables.gl_weights, no_pairs, dest)
    else:
        no_proj = np.empty(0)
        for r in range(nr):
            p = proj[r] if proj.shape[0] > 0 else no_proj
            saabas(X, rows[r], root, routing, tables.feature, tables.value, strict, round32,
                   col, scale, p, out[np.uint64(dest[r])])


ROWS_PER_TASK = BATCH_ROWS  # rows a task passes through every tree, together


@njit(cache=True, nogil=True)
def contributions_chunk(X, out, tables, tree_offsets, tree_output, tree_scale, routing,
                        strict, round32, rows_per_task, task0, task1, not_plain=True):
    """out[i, k, :] += sum over trees of scale x TreeSHAP contribution of feature k for
    the rows i of tasks task0 .. task1 - 1 (``out`` (n_rows, n_features, n_outputs),
    zeroed by the caller); task q holds the rows q * rows_per_task .. (q + 1) *
    rows_per_task - 1 (at most ROWS_PER_TASK), which pass through one tree after the
    other, together. The caller runs ranges of tasks in parallel threads (the kernel
    releases the GIL; a task writes only its own rows). ``tables``:
    kernel_inputs.ShapTables, ``routing``: kernel_inputs.Routing. Saabas
    contributions: ``saabas_chunk`` (a kernel of its own, so that TreeSHAP calls do not
    compile Saabas and the other way round). ``not_plain``: None when no tree has a node
    in ``route.NOT_PLAIN`` (``routing.plain`` all True): the kernel is then compiled
    without ``route.step`` (numba drops the branch for a None argument); else True."""
    no_proj = np.empty((0, 0))
    for task in range(task0, task1):
        # fresh scratch per task, as when every task ran on its own
        scratch = new_batch_scratch(tables.max_depth, tables.value.shape[1], out.shape[1],
                                    rows_per_task)
        no_pairs = scratch[-1]
        rows = _task_rows(X.shape[0], rows_per_task, task)
        for t in range(tree_offsets.shape[0] - 1):
            tree_shap_batch(X, rows, rows.shape[0], tree_offsets[t], tables.path_features[t],
                            routing, tables.feature, tables.cover, tables.value, strict,
                            round32, tree_output[t], tree_scale[t], no_proj, rows, out,
                            scratch, tables.gl_nodes, tables.gl_weights, no_pairs, rows,
                            not_plain)


@njit(cache=True, nogil=True)
def saabas_chunk(X, out, tables, tree_offsets, tree_output, tree_scale, routing, strict,
                 round32, rows_per_task, task0, task1):
    """``contributions_chunk`` with Saabas contributions instead of TreeSHAP."""
    no_proj = np.empty(0)
    for task in range(task0, task1):
        rows = _task_rows(X.shape[0], rows_per_task, task)
        for t in range(tree_offsets.shape[0] - 1):
            for r in rows:
                saabas(X, r, tree_offsets[t], routing, tables.feature, tables.value, strict,
                       round32, tree_output[t], tree_scale[t], no_proj, out[np.uint64(r)])


@njit(cache=True, inline="always")
def _task_rows(n, rows_per_task, task):
    """The rows of task ``task`` of ``contributions_chunk``: rows_per_task rows from
    task * rows_per_task, fewer at the end of X."""
    r0 = task * rows_per_task
    return np.arange(r0, min(n, r0 + rows_per_task))


@njit(cache=True, inline="always")
def _split_by_bag(inbag_bits, use_bits, t, row0, r0, r1, rows_oob, rows_in, n_oob):
    """(n_o, n_i): the local rows r0..r1-1 for which tree t is out of bag (global row
    row0 + i not in ``inbag_bits[t]``) into ``rows_oob[:n_o]``, counted in n_oob, the
    others into ``rows_in[:n_i]``; without ``use_bits`` every row is out of bag (not
    counted)."""
    n_o = 0
    n_i = 0
    for i in range(r0, r1):
        r = row0 + i
        if use_bits and (inbag_bits[t, r >> 3] >> (r & 7)) & 1:
            rows_in[n_i] = i
            n_i += 1
        else:
            rows_oob[n_o] = i
            n_o += 1
            if use_bits:
                n_oob[i] += 1
    return n_o, n_i


@njit(cache=True, parallel=True)
def oob_contributions_chunk(X, row0, inbag_bits, out_oob, out_in, n_oob, tables,
                            tree_offsets, tree_output, routing, strict, round32,
                            rows_per_task=ROWS_PER_TASK):
    """Forests out of bag: out_oob[i] += the (unscaled) contributions of the trees for
    which global row ``row0 + i`` is out of bag, out_in[i] += those of the trees it is
    in-bag for, n_oob[i] += the number of out-of-bag trees (all zeroed by the caller).
    ``tables``: kernel_inputs.ShapTables, ``routing``: kernel_inputs.Routing."""
    n = X.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    n_tasks = (n + rows_per_task - 1) // rows_per_task
    no_proj = np.empty((0, 0))
    vdim = tables.value.shape[1]
    for task in prange(n_tasks):
        scratch = new_batch_scratch(tables.max_depth, vdim, out_oob.shape[1], rows_per_task)
        rows_oob = np.empty(rows_per_task, np.int64)
        rows_in = np.empty(rows_per_task, np.int64)
        r0 = task * rows_per_task
        r1 = min(n, r0 + rows_per_task)
        for t in range(n_trees):
            n_o, n_i = _split_by_bag(inbag_bits, True, t, row0, r0, r1, rows_oob, rows_in,
                                     n_oob)
            for rows, nr, out in ((rows_oob, n_o, out_oob), (rows_in, n_i, out_in)):
                if nr > 0:
                    _tree_batch(tables, routing, X, rows, nr, t, tree_offsets[t], strict,
                                round32, tree_output[t], 1.0, no_proj, rows, out, scratch)


@njit(cache=True, parallel=True)
def interactions_chunk(X, row0, inbag_bits, use_bits, phi, phi_in, inter, inter_in, n_oob,
                       tables, tree_offsets, tree_output, tree_scale, routing, strict,
                       round32, rows_per_task=ROWS_PER_TASK):
    """SHAP interaction values: phi[i] += the contributions of row i (as
    ``contributions_chunk``) and inter[i * P + j, k] += the interaction value of players
    j and k (j != k), scaled, summed over the trees (``tree_shap_batch``'s pairs);
    ``inter`` is the (n_rows, P, P, n_outputs) array seen as (n_rows * P, P,
    n_outputs), P the credited players, and the diagonal is left for the caller (phi
    minus the row's other entries). With ``use_bits`` (forests out of bag), the trees
    for which global row row0 + i is in-bag (``inbag_bits``) add to ``phi_in`` and
    ``inter_in`` instead, unscaled, and n_oob[i] counts the others; without, every tree
    adds to ``phi`` and ``inter``. ``tables``: kernel_inputs.ShapTables (TreeSHAP),
    ``routing``: kernel_inputs.Routing."""
    n = X.shape[0]
    P = phi.shape[1]
    n_trees = tree_offsets.shape[0] - 1
    n_tasks = (n + rows_per_task - 1) // rows_per_task
    no_proj = np.empty((0, 0))
    vdim = tables.value.shape[1]
    for task in prange(n_tasks):
        scratch = new_batch_scratch(tables.max_depth, vdim, P, rows_per_task)
        rows_oob = np.empty(rows_per_task, np.int64)
        rows_in = np.empty(rows_per_task, np.int64)
        base_oob = np.empty(rows_per_task, np.int64)
        base_in = np.empty(rows_per_task, np.int64)
        r0 = task * rows_per_task
        r1 = min(n, r0 + rows_per_task)
        for t in range(n_trees):
            n_o, n_i = _split_by_bag(inbag_bits, use_bits, t, row0, r0, r1, rows_oob,
                                     rows_in, n_oob)
            for r in range(n_o):
                base_oob[r] = rows_oob[r] * P
            for r in range(n_i):
                base_in[r] = rows_in[r] * P
            s = 1.0 if use_bits else tree_scale[t]
            for rows, nr, out, out_int, base in ((rows_oob, n_o, phi, inter, base_oob),
                                                 (rows_in, n_i, phi_in, inter_in, base_in)):
                if nr > 0:
                    tree_shap_batch(X, rows, nr, tree_offsets[t], tables.path_features[t],
                                    routing, tables.feature, tables.cover, tables.value,
                                    strict, round32, tree_output[t], s, no_proj, rows, out,
                                    scratch, tables.gl_nodes, tables.gl_weights, out_int,
                                    base)


@njit(cache=True, inline="always")
def oob_weight(inbag_bits, use_inbag, pos, r, t, w, last_w):
    """Row r's weight for tree t: 0 where ``use_inbag`` and the row (at position
    ``pos[r]`` of the packed bits) is in tree t's bag, else ``w[r]`` (``w`` one weight
    for all rows when ``last_w`` is 0)."""
    if use_inbag:
        p = pos[r]
        if (inbag_bits[t, p >> 3] >> (p & 7)) & 1:
            return 0.0
    return w[min(r, last_w)]


@njit(cache=True, parallel=True)
def forest_block_sums(X, row0, order, block_start, rows_in, inbag_bits, use_inbag, tables,
                      acc, n_eval, tree_offsets, tree_output, routing, strict, round32,
                      batch=BATCH_ROWS):
    """SHAP-oob sums of a forest: acc[b, t, k, 0] += w_i z_i . phi_{t,k}(x_i) and
    n_eval[b, t] += w_i over the rows i of block b that evaluate tree t (its out-of-bag
    rows with ``use_inbag``). ``order[block_start[b]:block_start[b + 1]]``: the local rows
    of block b; ``rows_in`` (kernel_inputs.RowInputs): ``Z`` (rows, n_outputs), ``w``
    (which may hold one weight for all) and ``pos`` (each row's global position, which
    indexes ``inbag_bits``) indexed by the call's row number row0 + i. ``tables``:
    kernel_inputs.ShapTables, ``routing``: kernel_inputs.Routing. Each thread owns whole
    blocks; a tree's evaluating rows go through it in batches of ``batch``."""
    Z, w, pos = rows_in.target, rows_in.w, rows_in.pos
    n_blocks = block_start.shape[0] - 1
    n_trees = tree_offsets.shape[0] - 1
    last_w = w.shape[0] - 1
    vdim = tables.value.shape[1]
    for b in prange(n_blocks):
        scratch = new_batch_scratch(tables.max_depth, 1, acc.shape[2], batch)
        proj = np.empty((batch, vdim))
        rows = np.empty(batch, np.int64)
        dest = np.empty(batch, np.int64)
        for t in range(n_trees):
            root = tree_offsets[t]
            col = tree_output[t]
            dest[:] = t
            nr = 0
            for q in range(block_start[b], block_start[b + 1]):
                i = order[q]
                r = row0 + i
                wi = oob_weight(inbag_bits, use_inbag, pos, r, t, w, last_w)
                if wi == 0.0:
                    continue
                n_eval[b, t] += wi
                rows[nr] = i
                for j in range(vdim):
                    proj[nr, j] = wi * Z[r, col + j]
                nr += 1
                if nr == batch:
                    _tree_batch(tables, routing, X, rows, nr, t, root, strict, round32, 0,
                                1.0, proj, dest, acc[b], scratch)
                    nr = 0
            if nr > 0:
                _tree_batch(tables, routing, X, rows, nr, t, root, strict, round32, 0, 1.0,
                            proj, dest, acc[b], scratch)


@njit(cache=True, inline="always")
def _staged_batch(pair, tables, routing, X, rows, nr, t, root, strict, round32, scale, proj,
                  dest, out, scratch, pair_out, pair_dest):
    """One batch of ``staged_block_sums``: TreeSHAP or Saabas values into ``out``, or in
    pair mode interaction values into ``pair_out`` (main effects into ``out``)."""
    if pair:
        tree_shap_batch(X, rows, nr, root, tables.path_features[t], routing, tables.feature,
                        tables.cover, tables.value, strict, round32, 0, scale, proj, dest,
                        out, scratch, tables.gl_nodes, tables.gl_weights, pair_out,
                        pair_dest)
    else:
        _tree_batch(tables, routing, X, rows, nr, t, root, strict, round32, 0, scale, proj,
                    dest, out, scratch)


@njit(cache=True, parallel=True)
def staged_block_sums(X, row0, order, block_start, rows_in, loss, trees, tables, acc, n_eval,
                      centre, pair_out, routing, strict, round32, batch=BATCH_ROWS):
    """SHAP-oob sums of a boosted model on held-out rows: acc[b, t, k, 0] += w_i (-g_i) .
    phi_{t,k}(x_i) with g the gradient of the model's loss at the margin before tree t's
    stage (as the staged node statistics, ``kernels/staged.py``, which computes the
    per-row terms), phi of the tree's values as they enter the margin (times its scale),
    and n_eval[b, t] += w_i. Rows travel in groups carrying their margin; threads own
    whole blocks. ``rows_in``, ``loss`` and ``trees`` as ``staged_leaf_stats`` reads
    them: ``rows_in.row_start`` (n_rows, K), indexed by the global row, each row's margin
    before the first tree (base score + offset), or a (0, K) array: ``loss.base_score``
    for every row. The margins add ``tables.value`` (the node values, as before).

    Pair mode (``pair_out`` (n_blocks, P, P, 1), not (n_blocks, 0, 0, 1)): the held-out
    interaction importance's sums instead, pair_out[b, j, k, 0] += w_i (-g_i - mu_t h_i)
    Phi_{t,jk}(x_i) (j != k, each pair's half at (j, k) and at (k, j); mu_t =
    ``centre[t]``, read only here), the main effects going to ``acc[b, 0]``, which the
    caller does not read (``acc`` (n_blocks, 1, P, 1)); ``n_eval`` as above."""
    y, w, row_start = rows_in.target, rows_in.w, rows_in.row_start
    loss_code, loss_params, base_score = loss.code, loss.params, loss.base_score
    tree_offsets, tree_output, tree_scale = trees.tree_offsets, trees.tree_output, trees.tree_scale
    leaf_factor, stage_start = trees.leaf_factor, trees.stage_start
    value = tables.value
    (left, right, feature, threshold, flags, plain, depth, min_depth, cat_offset,
     cat_count, cat_codes, cat_left) = routing
    n_blocks = block_start.shape[0] - 1
    K = base_score.shape[0]
    n_stages = stage_start.shape[0] - 1
    pair = pair_out.shape[1] > 0
    for b in prange(n_blocks):
        scratch = new_batch_scratch(tables.max_depth, 1, acc.shape[2], batch)
        margin = np.empty((GROUP, K))
        leaves = np.empty(BATCH, np.int64)
        g = np.empty((GROUP, K))
        h = np.empty((GROUP, K))
        terms = np.zeros((K, N_TERMS, GROUP))
        yg = np.empty(GROUP)
        wg = np.empty(GROUP)
        e = np.empty(GROUP)
        use_e = leaf_factor.shape[0] > 0
        proj = np.empty((batch, 1))
        rows_b = np.empty(batch, np.int64)
        dest = np.empty(batch, np.int64)
        pdest = np.zeros(batch, np.int64)
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
                    dest[:] = 0 if pair else t
                    nr = 0
                    for r in range(ng):
                        if terms[col, 0, r] == 0.0:
                            continue
                        n_eval[b, t] += terms[col, 0, r]
                        rows_b[nr] = rows[r]
                        proj[nr, 0] = (terms[col, 1, r] - centre[t] * terms[col, 2, r] if pair
                                       else terms[col, 1, r])
                        nr += 1
                        if nr == batch:
                            _staged_batch(pair, tables, routing, X, rows_b, nr, t, root,
                                          strict, round32, sc, proj, dest, acc[b], scratch,
                                          pair_out[b], pdest)
                            nr = 0
                    if nr > 0:
                        _staged_batch(pair, tables, routing, X, rows_b, nr, t, root, strict,
                                      round32, sc, proj, dest, acc[b], scratch, pair_out[b],
                                      pdest)
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


@njit(cache=True)
def expected_values(tree_offsets, order, left, right, cover, value):
    """Per node: the cover-weighted mean of the leaf values below it (what TreeSHAP's
    base value is built from), (n_nodes, value_dim); ``order`` the post-order."""
    out = value.copy()
    for t in range(tree_offsets.shape[0] - 1):
        # the normal form's internal values are the same recursion with weights
        _fill_tree(t, order, tree_offsets, left, right, cover, out)
    return out


@njit(cache=True)
def summed_cover(tree_offsets, order, left, right, cover):
    """Leaf covers as given, every internal node's the sum of its children's (bottom up,
    ``order`` the post-order): the cover ratios of a split then add up to 1 exactly, so
    contributions add up to the prediction exactly even where a library stores rounded
    node covers (XGBoost's float32 sum_hessian)."""
    out = cover.copy()
    for t in range(tree_offsets.shape[0] - 1):
        for idx in range(tree_offsets[t], tree_offsets[t + 1]):
            node = order[idx]
            if left[node] >= 0:
                out[node] = out[left[node]] + out[right[node]]
    return out


@njit(cache=True)
def path_features(tree_offsets, left, right, feature, n_features):
    """Per tree: the largest number of distinct features on a root-to-leaf path (the
    degree bound that sets ``tree_shap_batch``'s quadrature size; at most the depth)."""
    n_trees = tree_offsets.shape[0] - 1
    out = np.zeros(n_trees, np.int64)
    count = np.zeros(n_features, np.int64)  # back to zeros after each tree's walk
    for t in range(n_trees):
        root = tree_offsets[t]
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

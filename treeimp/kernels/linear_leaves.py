"""Linear leaf models (LightGBM ``linear_tree=True``): their terms added to predictions,
and the Shapley values of those terms under TreeSHAP's path-dependent value function.

A linear leaf l (``TreeEnsemble.linear_leaves``) outputs ``const_l + sum_j b_lj x_j``
when none of its features is NaN for the row, else its constant fallback ``u_l`` (the
node ``value``). The fallback part is what the constant-leaf kernels already compute;
these kernels add the rest, the leaf's linear GAIN ``D_l(x) = const_l + b_l . x - u_l``
(0 for a row with a NaN among the leaf's features). An input ``|x| <= ZERO_THRESHOLD``
is read as 0.0, as LightGBM's predictor does before any tree.
"""

import numpy as np
from numba import njit, prange

from .gradients import grad_hess_row, grad_hess_targets
from .route import ZERO_THRESHOLD, step

ROWS_PER_TASK = 256  # rows of a task of ``staged_gradients`` (its buffers made once)


@njit(cache=True, inline="always")
def linear_gain(X, row, leaf, value, offset, count, const, feature, coef):
    """``D_l(x)`` of ``leaf`` for ``row`` of X (0.0 when one of its features is NaN)."""
    s = const[leaf]
    for k in range(offset[leaf], offset[leaf] + count[leaf]):
        x = np.float64(X[row, feature[k]])
        if x != x:
            return 0.0
        if -ZERO_THRESHOLD <= x <= ZERO_THRESHOLD:
            x = 0.0
        s += coef[k] * x
    return s - value[leaf, 0]


@njit(cache=True, parallel=True)
def add_linear_gains(X, leaves, tree_offsets, tree_output, tree_scale, value, offset, count,
                     const, feature, coef, out):
    """``out[i, output(t)] += scale_t * D_l(x_i)`` for every row i and tree t, l the
    leaf ``leaves[i, t]`` (local to tree t, as ``apply`` gives it)."""
    n, T = leaves.shape
    for i in prange(n):
        for t in range(T):
            leaf = tree_offsets[t] + leaves[i, t]
            if count[leaf] > 0:
                out[i, tree_output[t]] += tree_scale[t] * linear_gain(
                    X, i, leaf, value, offset, count, const, feature, coef)


@njit(cache=True)
def prunable_splits(left, parent, split_feature, offset, count, feature):
    """Per node, whether its split feature is a linear feature of every leaf with terms
    below it (LightGBM's leaves take the numeric split features of their path): then
    the leaves on the side a row does not take have a zero game for that row
    (``linear_leaf_shap``) and are skipped."""
    out = left >= 0
    for leaf in range(left.shape[0]):
        if count[leaf] == 0:
            continue
        node = parent[leaf]
        while node >= 0:
            q = split_feature[node]
            found = False
            for k in range(offset[leaf], offset[leaf] + count[leaf]):
                if feature[k] == q:
                    found = True
                    break
            if not found:
                out[node] = False
            node = parent[node]
    return out


@njit(cache=True)
def _player_slot(player, o, z, m, q):
    """(slot of feature q among the m players of a leaf's game, new m): a new player q
    is added with o = z = 1 (no split on it seen yet)."""
    a = 0
    while a < m and player[a] != q:
        a += 1
    if a == m:
        player[m] = q
        o[m] = 1.0
        z[m] = 1.0
        m += 1
    return a, m


@njit(cache=True, parallel=True)
def linear_leaf_shap(X, out, trees, tree_offsets, tree_output, tree_scale, parent, prunable,
                     cover, value, routing, strict, offset, count, const, feature, coef):
    """Add to ``out`` (n_rows, n_features, n_outputs) the Shapley values of the linear
    gains of the leaves of ``trees`` (int64 tree indices).

    Game of leaf l in tree t (docs/methods.md): ``h(S) = D_l(x) prod_q F_q(S)``, over the
    players q on l's path and among l's linear features: a split feature q on the path
    contributes ``o_q`` (1 when x goes toward l at all of q's splits on the path, else
    0) when q is in S, else ``z_q`` (the product of its cover fractions), TreeSHAP's
    path-dependent factor; a linear feature contributes ``o_q`` when present and 0 when
    absent (the model's own rule: an unknown feature of the leaf model gives the
    fallback, a linear gain of 0). The Shapley value of player i is
    ``D (o_i - z_i) sum_k c_k k! (n - 1 - k)! / n!``, ``c_k`` the coefficient of
    ``s^k`` in ``prod_{q != i} (z_q + o_q s)``. The leaves are reached from the root,
    skipping the side a row does not take at a ``prunable`` node (``prunable_splits``:
    their games are zero).
    """
    left, right, split_feature = routing.left, routing.right, routing.feature
    threshold, flags = routing.threshold, routing.flags
    cat_offset, cat_count = routing.cat_offset, routing.cat_count
    cat_codes, cat_left = routing.cat_codes, routing.cat_left
    n = X.shape[0]
    max_players = 0
    for t in trees:
        width = 0
        for node in range(tree_offsets[t], tree_offsets[t + 1]):
            width = max(width, count[node])
        max_players = max(max_players, width + (tree_offsets[t + 1] - tree_offsets[t]))
    max_nodes = 0
    for t in trees:
        max_nodes = max(max_nodes, tree_offsets[t + 1] - tree_offsets[t])
    for i in prange(n):
        player = np.empty(max_players, np.int64)
        o = np.empty(max_players)
        z = np.empty(max_players)
        poly = np.empty(max_players + 1)
        stack = np.empty(max_nodes, np.int64)
        for t in trees:
            stack[0] = tree_offsets[t]
            top = 1
            while top > 0:
                top -= 1
                leaf = stack[top]
                if left[leaf] != leaf:  # a split (leaves are self-loops in routing)
                    taken = step(np.float64(X[i, split_feature[leaf]]), leaf, left, right,
                                 threshold, flags, cat_offset, cat_count, cat_codes,
                                 cat_left, strict)
                    if taken == left[leaf] or not prunable[leaf]:
                        stack[top] = left[leaf]
                        top += 1
                    if taken == right[leaf] or not prunable[leaf]:
                        stack[top] = right[leaf]
                        top += 1
                    continue
                if count[leaf] == 0:
                    continue
                d = linear_gain(X, i, leaf, value, offset, count, const, feature, coef)
                if d == 0.0:
                    continue
                m = 0
                child = leaf
                node = parent[leaf]
                while node >= 0:  # the path, leaf to root: TreeSHAP's factors per feature
                    q = split_feature[node]
                    x = np.float64(X[i, q])
                    toward = step(x, node, left, right, threshold, flags, cat_offset,
                                  cat_count, cat_codes, cat_left, strict) == child
                    frac = cover[child] / cover[node] if cover[node] > 0 else 0.0
                    a, m = _player_slot(player, o, z, m, q)
                    if not toward:
                        o[a] = 0.0
                    z[a] *= frac
                    child = node
                    node = parent[node]
                dead = False
                for k in range(offset[leaf], offset[leaf] + count[leaf]):
                    q = feature[k]
                    a, m = _player_slot(player, o, z, m, q)
                    z[a] = 0.0
                    if o[a] == 0.0:  # then h(S) = 0 for every S
                        dead = True
                if dead:
                    continue
                s = tree_scale[t] * d
                c = tree_output[t]
                for a in range(m):
                    if o[a] == z[a]:
                        continue
                    # prod over the other players of (z_q + o_q s)
                    poly[0] = 1.0
                    deg = 0
                    for b in range(m):
                        if b == a:
                            continue
                        poly[deg + 1] = 0.0
                        for k in range(deg + 1, 0, -1):
                            poly[k] = poly[k] * z[b] + poly[k - 1] * o[b]
                        poly[0] *= z[b]
                        deg += 1
                    # sum_k poly_k k! (m - 1 - k)! / m!
                    total = 0.0
                    w = 1.0 / m  # k = 0: (m - 1)! / m!
                    for k in range(deg + 1):
                        total += poly[k] * w
                        w *= (k + 1) / (m - 1 - k) if k + 1 <= m - 1 else 0.0
                    out[i, player[a], c] += s * (o[a] - z[a]) * total


@njit(cache=True, parallel=True)
def leaf_model_block_sums(X, leaves, tree_offsets, z, w, block, offset, count, feature,
                          term_sums, leaf_sums):
    """Add the held-out sums of the leaf-model importance, per statistic block.

    For every row i and tree t whose leaf l (``tree_offsets[t] + leaves[i, t]``) has a
    linear model with all of its features known for the row (the rows A_l that use it):
    ``leaf_sums[b, l] += (w_i, w_i z_it)`` and, for every term k of l,
    ``term_sums[b, k] += (w_i z_it x_ik, w_i x_ik)``, b = ``block[i]``. ``z`` (n, T):
    each row's negative gradient at tree t's round and output; ``w`` one weight per row,
    or one for all. Trees run in parallel: a tree's leaves and terms are its own.
    """
    n, T = leaves.shape
    last_w = w.shape[0] - 1
    for t in prange(T):
        for i in range(n):
            leaf = tree_offsets[t] + leaves[i, t]
            c = count[leaf]
            if c == 0:
                continue
            known = True
            for k in range(offset[leaf], offset[leaf] + c):
                x = np.float64(X[i, feature[k]])
                if x != x:
                    known = False
                    break
            if not known:
                continue
            wi = w[min(i, last_w)]
            wz = wi * z[i, t]
            b = block[i]
            leaf_sums[b, leaf, 0] += wi
            leaf_sums[b, leaf, 1] += wz
            for k in range(offset[leaf], offset[leaf] + c):
                x = np.float64(X[i, feature[k]])
                if -ZERO_THRESHOLD <= x <= ZERO_THRESHOLD:
                    x = 0.0
                term_sums[b, k, 0] += wz * x
                term_sums[b, k, 1] += wi * x


@njit(cache=True, parallel=True)
def staged_gradients(out, stage_start, tree_output, start, code, params, y, several, table,
                     final):
    """Every row's g, h of every round at its true margins: ``table[i, st, k]`` := (g, h)
    of output k of row i at its margin before round st (``start[i]``, or ``start[0]``
    for every row when ``start`` has one row, plus the outputs ``out[i, t]`` of the
    trees of the earlier rounds, added tree by tree; round st's trees are
    ``stage_start[st] .. stage_start[st + 1] - 1``). ``y``: the rows' targets
    row-major, ``len(y) // n`` per row; ``several``: read them with
    ``grad_hess_targets`` (regression on several targets, interval labels), else one
    per row with ``grad_hess_row``. ``final[i]`` := row i's margin after every tree."""
    n, T = out.shape
    K = table.shape[2]
    n_stages = stage_start.shape[0] - 1
    Ky = y.shape[0] // n if n > 0 else 1
    one_start = start.shape[0] == 1
    for task in prange((n + ROWS_PER_TASK - 1) // ROWS_PER_TASK):
        m = np.empty((1, K))
        g = np.empty((1, K))
        h = np.empty((1, K))
        for i in range(task * ROWS_PER_TASK, min(n, (task + 1) * ROWS_PER_TASK)):
            s = 0 if one_start else i
            for k in range(K):
                m[0, k] = start[s, k]
            yi = y[i * Ky:(i + 1) * Ky]
            for st in range(n_stages):
                if several:
                    grad_hess_targets(code, params, m, 0, yi, g, h)
                else:
                    grad_hess_row(code, params, m, 0, yi[0], g, h)
                for k in range(K):
                    table[i, st, k, 0] = g[0, k]
                    table[i, st, k, 1] = h[0, k]
                for t in range(stage_start[st], stage_start[st + 1]):
                    m[0, tree_output[t]] += out[i, t]
            for k in range(K):
                final[i, k] = m[0, k]

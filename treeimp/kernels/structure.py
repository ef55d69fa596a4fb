"""Structural passes over the normal form: tree checks and bottom-up value filling."""

import numpy as np
from numba import njit, prange

from . import route
from .nan_modes import NAN_AS_ZERO, NAN_CAT_EXACT, NAN_CAT_NEGATIVE_UNLISTED, NAN_ZERO_MISSING

# ensembles of fewer nodes take ``ordered_values_depths``' numpy route (two plain numpy
# passes, nothing to compile on a first call; well under a millisecond at this size)
NUMPY_PASS_NODES = 1 << 14


@njit(cache=True)
def count_reachable(left, right):
    """Walk one tree (local child indices) from node 0.

    Returns (n_reached, first node reached twice or -1). A node reached twice means a
    cycle or a shared child; n_reached < len(left) means unreachable nodes.
    """
    n = left.shape[0]
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n + 1, np.int64)
    top = 0
    stack[0] = 0
    top = 1
    count = 0
    while top > 0:
        top -= 1
        node = stack[top]
        if seen[node]:
            return count, node
        seen[node] = True
        count += 1
        if left[node] >= 0:
            if top + 2 > n + 1:
                return count, node
            stack[top] = right[node]
            stack[top + 1] = left[node]
            top += 2
    return count, -1


def children_partition(left, right):
    """Whether the children of one tree's split nodes (local indices, leaves have
    left < 0) are exactly its nodes 1..n-1, each once: every node but the root has one
    parent (a cycle among the nodes passes too; :func:`count_reachable` finds those).
    Plain numpy, like :func:`children_partitions`: nothing to compile on a first call."""
    n = np.int64(left.shape[0])
    return bool(children_partitions(np.array([0, n], np.int64), left, right)[0])


def children_partitions(tree_offsets, left, right):
    """:func:`children_partition` of every tree (concatenated arrays, local child
    indices), as a bool per tree (vectorised over all nodes at once)."""
    tree_offsets = np.asarray(tree_offsets, np.int64)
    n_trees = tree_offsets.shape[0] - 1
    sizes = np.diff(tree_offsets)
    n = int(tree_offsets[-1])
    node_tree = np.repeat(np.arange(n_trees, dtype=np.int64), sizes)
    split = np.flatnonzero(np.asarray(left[:n]) >= 0)
    tree = np.concatenate([node_tree[split], node_tree[split]])
    child = np.concatenate([left[split], right[split]]).astype(np.int64)
    bad = np.zeros(n_trees, np.bool_)
    out_of_range = (child < 1) | (child >= sizes[tree])
    bad[tree[out_of_range]] = True
    # a node that is the child of two splits (global index counted twice)
    in_range = ~out_of_range
    glob = child[in_range] + tree_offsets[tree[in_range]]
    twice = np.flatnonzero(np.bincount(glob, minlength=n) > 1)
    bad[node_tree[twice]] = True
    n_children = 2 * np.bincount(node_tree[split], minlength=n_trees)
    return ~bad & (n_children == sizes - 1)


@njit(cache=True)
def check_node_fields(left, right, feature, n_features):
    """First problem in one tree's local node arrays, in the order they are reported:
    (1, node) a node with exactly one child, (2, node) a child index >= the tree's
    node count, (3, feature) a split on a feature outside [0, n_features); (0, -1) none.
    A negative child index marks a leaf."""
    n = left.shape[0]
    for i in range(n):
        if (left[i] < 0) != (right[i] < 0):
            return 1, i
    for i in range(n):
        if left[i] >= 0 and (left[i] >= n or right[i] >= n):
            return 2, i
    for i in range(n):
        if left[i] >= 0 and (feature[i] < 0 or feature[i] >= n_features):
            return 3, feature[i]
    return 0, -1


@njit(cache=True, parallel=True)
def check_trees(tree_offsets, left, right, feature, n_features):
    """Check every tree's node arrays and convert them to the normal form, in one pass.

    ``left``/``right``/``feature`` (int64) are the parsers' per-tree arrays concatenated:
    tree t is ``tree_offsets[t]:tree_offsets[t + 1]`` and its child indices are LOCAL,
    a negative one marking a leaf. Trees are checked in parallel, each writing only its
    own range (:func:`check_trees_serial`: the same, one thread).

    Returns ``(problem, detail, left, right, feature)``: ``problem[t]`` is the first
    problem of tree t in the order they are reported, 1-3 with ``detail`` as in
    :func:`check_node_fields`, 4 when node ``detail`` is reached twice from the root
    (:func:`count_reachable`), 5 when ``detail`` nodes are never reached, 0 for none;
    the arrays are the int32 normal form (GLOBAL child indices, -1 everywhere at
    leaves), meaningful only for trees without a problem.
    """
    n_trees = tree_offsets.shape[0] - 1
    problem = np.zeros(n_trees, np.int64)
    detail = np.full(n_trees, -1, np.int64)
    out_left = np.empty(left.shape[0], np.int32)
    out_right = np.empty(left.shape[0], np.int32)
    out_feature = np.empty(left.shape[0], np.int32)
    # np.int64(t) here and in the parallel kernels below: the loop index is unsigned in
    # numba's parallel version of a loop and signed where numba types it first and in
    # the serial twin; a signed index keeps one compiled helper for all of them
    for t in prange(n_trees):
        _check_tree(np.int64(t), tree_offsets, left, right, feature, n_features, problem, detail,
                    out_left, out_right, out_feature)
    return problem, detail, out_left, out_right, out_feature


@njit(cache=True)
def check_trees_serial(tree_offsets, left, right, feature, n_features):
    """:func:`check_trees` on one thread (small models: no thread-pool launch)."""
    n_trees = tree_offsets.shape[0] - 1
    problem = np.zeros(n_trees, np.int64)
    detail = np.full(n_trees, -1, np.int64)
    out_left = np.empty(left.shape[0], np.int32)
    out_right = np.empty(left.shape[0], np.int32)
    out_feature = np.empty(left.shape[0], np.int32)
    for t in range(n_trees):
        _check_tree(t, tree_offsets, left, right, feature, n_features, problem, detail,
                    out_left, out_right, out_feature)
    return problem, detail, out_left, out_right, out_feature


@njit(cache=True)
def _check_tree(t, tree_offsets, left, right, feature, n_features, problem, detail,
                out_left, out_right, out_feature):
    """check_trees of tree t (writes its range of the outputs)."""
    lo = tree_offsets[t]
    hi = tree_offsets[t + 1]
    p, bad = check_node_fields(left[lo:hi], right[lo:hi], feature[lo:hi], n_features)
    if p == 0:
        count, twice = count_reachable(left[lo:hi], right[lo:hi])
        if twice >= 0:
            p, bad = 4, twice
        elif count != hi - lo:
            p, bad = 5, hi - lo - count
    problem[t] = p
    detail[t] = bad
    for i in range(lo, hi):
        if left[i] < 0:
            out_left[i] = -1
            out_right[i] = -1
            out_feature[i] = -1
        else:
            out_left[i] = left[i] + lo
            out_right[i] = right[i] + lo
            out_feature[i] = feature[i]


def ordered_trees(tree_offsets, left, right, feature, n_features):
    """:func:`check_trees`'s normal form ``(left, right, feature)`` (int32, GLOBAL child
    indices, -1 everywhere at leaves) when every tree passes its checks and every child's
    local index is larger than its parent's (breadth- or depth-first numbering), else
    None (then :func:`check_trees` finds the problem, or converts other orders).

    Plain numpy, vectorised over all nodes: nothing to compile on a first call. In such
    trees every node but the root having exactly one parent is enough: following parents
    from any node strictly lowers its index down to the root, so there is no cycle and no
    unreachable node (:func:`count_reachable`'s checks)."""
    tree_offsets = np.asarray(tree_offsets, np.int64)
    n = int(tree_offsets[-1])
    n_trees = tree_offsets.shape[0] - 1
    if n == 0:
        return None
    sizes = np.diff(tree_offsets)
    left = np.asarray(left[:n])
    right = np.asarray(right[:n])
    split = left >= 0
    if not np.array_equal(split, right >= 0):
        return None
    s = np.flatnonzero(split)
    lo = np.repeat(tree_offsets[:-1], sizes)[s]
    hi = np.repeat(tree_offsets[1:], sizes)[s]
    gl = left[s] + lo
    gr = right[s] + lo
    fs = feature[s]
    # children after their parent and inside its tree, features in range
    if not (np.all(gl > s) and np.all(gr > s) and np.all(gl < hi) and np.all(gr < hi)
            and np.all(fs >= 0) and np.all(fs < n_features)):
        return None
    # n - n_trees children, none twice: every node but the roots (which no child can be)
    # is a child exactly once
    if 2 * s.shape[0] != n - n_trees:
        return None
    hit = np.zeros(n, np.bool_)
    hit[gl] = True
    hit[gr] = True
    if np.count_nonzero(hit) != n - n_trees:
        return None
    out_left = np.full(n, -1, np.int32)
    out_right = np.full(n, -1, np.int32)
    out_feature = np.full(n, -1, np.int32)
    out_left[s] = gl
    out_right[s] = gr
    out_feature[s] = fs
    return out_left, out_right, out_feature


def order_values_depths(tree_offsets, left, right, weight, value):
    """:func:`order_values_depths_serial` in plain numpy, for trees whose children come
    after their parents (what :func:`ordered_trees` accepts): ``(order, deepest,
    shallowest)``, ``value`` filled in place. The same post-order (left subtree, right
    subtree, node), the same values bit for bit (each internal node's value is the same
    arithmetic on its children's, level by level from the deepest), the same depths.

    Vectorised over the nodes of one depth level at a time (a tree walk numpy cannot do
    in fewer passes): nothing to compile on a first call."""
    tree_offsets = np.asarray(tree_offsets, np.int64)
    n = int(tree_offsets[-1])
    n_trees = tree_offsets.shape[0] - 1
    # the internal nodes of every depth level with their children, top down
    levels = []
    frontier = tree_offsets[:-1]
    depth = np.empty(n, np.int64)
    d = 0
    while frontier.shape[0]:
        depth[frontier] = d
        lc = left[frontier]
        inner = frontier[lc >= 0]
        lc = left[inner].astype(np.int64)
        rc = right[inner].astype(np.int64)
        levels.append((inner, lc, rc))
        frontier = np.concatenate([lc, rc])
        d += 1
    # subtree sizes and values bottom up, each subtree's first post-order position top down
    size = np.ones(n, np.int64)
    one = value.shape[1] == 1
    v = value[:, 0] if one else value
    for inner, lc, rc in reversed(levels):
        size[inner] = 1 + size[lc] + size[rc]
        wl, wr = weight[lc], weight[rc]
        if not one:
            wl, wr = wl[:, None], wr[:, None]
        vl, vr = v[lc], v[rc]
        total = wl + wr
        pos = total > 0
        if pos.all():
            v[inner] = (wl * vl + wr * vr) / total
        else:
            mean = (wl * vl + wr * vr) / np.where(pos, total, 1.0)
            v[inner] = np.where(pos, mean, 0.5 * (vl + vr))
    start = np.empty(n, np.int64)
    start[tree_offsets[:-1]] = tree_offsets[:-1]
    for inner, lc, rc in levels:
        first = start[inner]
        start[lc] = first
        start[rc] = first + size[lc]
    order = np.empty(n, np.int64)
    order[start + size - 1] = np.arange(n, dtype=np.int64)
    if n_trees == 0:
        return order, np.zeros(0, np.int64), np.zeros(0, np.int64)
    leaf = left < 0
    starts = tree_offsets[:-1]
    deepest = np.maximum.reduceat(np.where(leaf, depth, 0), starts)
    shallowest = np.minimum.reduceat(np.where(leaf, depth, np.iinfo(np.int64).max), starts)
    return order, deepest, shallowest


def ordered_values_depths(tree_offsets, left, right, feature, leaf_value, weight,
                          n_features):
    """:func:`ordered_trees` and :func:`order_values_depths` in one kernel, for a parser
    that has the trees' node arrays at hand (``left``/``right``/``feature`` as stored,
    LOCAL child indices, a negative one marking a leaf; ``leaf_value`` read at leaves,
    ``weight`` the node weights; one output per node).

    Returns ``(ok, left, right, feature, value, weight, order, deepest, shallowest)``:
    ok False exactly where :func:`ordered_trees` gives None (then the rest is not
    meaningful); the normal form as it gives it (int32, GLOBAL child indices, -1
    everywhere at leaves); ``value`` (float64) the leaf values and every internal node's
    value from its children's, the same arithmetic as :func:`order_values_depths` (and
    ``_fill_tree``), ``weight`` as float64, and the post-order and depths it returns.

    In such trees a node's children come after it, so one pass from each tree's last
    node up meets children before parents (subtree sizes, values) and passes from its
    root down meet parents first (depths, then each subtree's first post-order place);
    child indices are compared locally, where no sum can wrap around. The outputs are
    allocated here and filled by one compiled call (allocating and returning them
    there would compile twice as much). Below ``NUMPY_PASS_NODES`` nodes the same results
    come from :func:`ordered_trees` and :func:`order_values_depths` (plain numpy)."""
    tree_offsets = np.asarray(tree_offsets, np.int64)
    n_trees = tree_offsets.shape[0] - 1
    n = int(tree_offsets[-1])
    if n < NUMPY_PASS_NODES:
        return _numpy_ordered_values_depths(tree_offsets, left, right, feature, leaf_value,
                                            weight, n_features)
    out = (np.empty(n, np.int32), np.empty(n, np.int32), np.empty(n, np.int32),
           np.empty(n, np.float64), np.empty(n, np.float64), np.empty(n, np.int64),
           np.empty(n_trees, np.int64), np.empty(n_trees, np.int64))
    work = np.zeros(n, np.bool_), np.empty(n, np.int64), np.empty(n, np.int64)
    ok = n > 0 and _ordered_values_depths(tree_offsets, left, right, feature, leaf_value,
                                          weight, n_features, *out, *work)
    return (ok, *out)


def _numpy_ordered_values_depths(tree_offsets, left, right, feature, leaf_value, weight,
                                 n_features):
    """:func:`ordered_values_depths` by the two numpy passes (new arrays, as there)."""
    got = ordered_trees(tree_offsets, left, right, feature, n_features)
    if got is None:
        return (False, *(np.empty(0, np.int32),) * 3, np.empty(0), np.empty(0),
                *(np.empty(0, np.int64),) * 3)
    out_left, out_right, out_feature = got
    value = np.where(out_left < 0, np.asarray(leaf_value, np.float64), 0.0)[:, None]
    weight64 = np.array(weight, np.float64)
    order, deepest, shallowest = order_values_depths(tree_offsets, out_left, out_right,
                                                     weight64, value)
    return (True, out_left, out_right, out_feature, value[:, 0], weight64, order, deepest,
            shallowest)


@njit(cache=True)
def _ordered_values_depths(tree_offsets, left, right, feature, leaf_value, weight,
                           n_features, out_left, out_right, out_feature, value, weight64,
                           order, deepest, shallowest, hit, size, place):
    """:func:`ordered_values_depths` into the given arrays (``hit`` all False, ``size``
    and ``place`` work space); whether the trees passed.

    Arrays are indexed with unsigned integers (``u``: node ``i``, ``ul``/``ur``: its
    children; all checked or made >= 0 here): numba adds no negative-index branch to
    such an access."""
    n_trees = tree_offsets.shape[0] - 1
    n = tree_offsets[n_trees]
    n_children = 0  # hit: nodes already the child of a split
    ok = True
    for t in range(n_trees):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        for i in range(lo, hi):
            u = np.uint64(i)
            lc = np.int64(left[u])
            rc = np.int64(right[u])
            if (lc < 0) != (rc < 0):
                ok = False
                break
            if lc < 0:
                out_left[u] = -1
                out_right[u] = -1
                out_feature[u] = -1
                continue
            f = np.int64(feature[u])
            if (lc <= i - lo or rc <= i - lo or lc >= hi - lo or rc >= hi - lo
                    or f < 0 or f >= n_features):
                ok = False
                break
            gl = lc + lo
            gr = rc + lo
            ul = np.uint64(gl)
            ur = np.uint64(gr)
            if hit[ul] or hit[ur] or gl == gr:
                ok = False
                break
            hit[ul] = True
            hit[ur] = True
            n_children += 2
            out_left[u] = gl
            out_right[u] = gr
            out_feature[u] = f
        if not ok:
            break
    # n - n_trees children, none twice: every node but the roots is a child exactly once
    if not ok or n_children != n - n_trees:
        return False
    # place: a node's depth, then its subtree's first post-order place
    for t in range(n_trees):
        lo = tree_offsets[t]
        hi = tree_offsets[t + 1]
        for i in range(hi - 1, lo - 1, -1):
            u = np.uint64(i)
            weight64[u] = weight[u]
            gl = out_left[u]
            if gl < 0:
                size[u] = 1
                value[u] = leaf_value[u]
                continue
            ul = np.uint64(gl)
            ur = np.uint64(out_right[u])
            size[u] = 1 + size[ul] + size[ur]
            wl = weight64[ul]
            wr = weight64[ur]
            if wl + wr > 0:
                value[u] = (wl * value[ul] + wr * value[ur]) / (wl + wr)
            else:
                value[u] = 0.5 * (value[ul] + value[ur])
        place[lo] = 0
        deep = 0
        shallow = n
        for i in range(lo, hi):
            u = np.uint64(i)
            d = place[u]
            gl = out_left[u]
            if gl < 0:
                deep = max(deep, d)
                shallow = min(shallow, d)
            else:
                place[np.uint64(gl)] = d + 1
                place[np.uint64(out_right[u])] = d + 1
        deepest[t] = deep
        shallowest[t] = shallow
        place[lo] = lo
        for i in range(lo, hi):
            u = np.uint64(i)
            p = place[u]
            order[np.uint64(p + size[u] - 1)] = i
            gl = out_left[u]
            if gl >= 0:
                ul = np.uint64(gl)
                place[ul] = p
                place[np.uint64(out_right[u])] = p + size[ul]
    return True


def check_values_thresholds(left, value, threshold, is_categorical):
    """1 if some leaf value is not finite, else 2 if some numeric split has a NaN
    threshold, else 0 (global node arrays, leaves have left < 0; ``value`` has one row
    per node). Plain numpy (vectorised): nothing to compile on a first call."""
    # all values finite and no NaN threshold anywhere: the usual case, two passes
    # without masks
    if np.all(np.isfinite(value)) and not np.any(np.isnan(threshold)):
        return 0
    leaf = left < 0
    if not np.all(np.isfinite(value[leaf])):
        return 1
    numeric = ~leaf & np.logical_not(is_categorical)
    return 2 if np.any(np.isnan(threshold[numeric])) else 0


# The passes below run trees in parallel: every tree reads and writes only its own
# node range tree_offsets[t]:tree_offsets[t + 1] (children indices are global).
@njit(cache=True, parallel=True)
def postorder(tree_offsets, left, right):
    """Global node indices of every tree, children before parents (tree t's nodes fill
    out[tree_offsets[t]:tree_offsets[t + 1]])."""
    n = left.shape[0]
    out = np.empty(n, np.int64)
    expanded = np.zeros(n, np.bool_)
    for t in prange(tree_offsets.shape[0] - 1):
        _postorder_tree(np.int64(t), tree_offsets, left, right, out, expanded)
    return out


@njit(cache=True)
def postorder_serial(tree_offsets, left, right):
    """:func:`postorder` on one thread."""
    n = left.shape[0]
    out = np.empty(n, np.int64)
    expanded = np.zeros(n, np.bool_)
    for t in range(tree_offsets.shape[0] - 1):
        _postorder_tree(t, tree_offsets, left, right, out, expanded)
    return out


@njit(cache=True)
def _postorder_tree(t, tree_offsets, left, right, out, expanded):
    k = tree_offsets[t]
    stack = np.empty(tree_offsets[t + 1] - tree_offsets[t] + 1, np.int64)
    stack[0] = tree_offsets[t]
    top = 1
    while top > 0:
        node = stack[top - 1]
        if left[node] < 0 or expanded[node]:
            top -= 1
            out[k] = node
            k += 1
        else:
            expanded[node] = True
            stack[top] = right[node]
            stack[top + 1] = left[node]
            top += 2


@njit(cache=True)
def order_values_depths_serial(tree_offsets, left, right, weight, value):
    """:func:`postorder_serial`, :func:`fill_internal_values_serial` (``value`` filled in
    place) and :func:`tree_depths_serial` in one call, tree by tree: ``(order,
    deepest, shallowest)``. What building a small ensemble needs, compiled as one
    kernel instead of three."""
    n = left.shape[0]
    n_trees = tree_offsets.shape[0] - 1
    out = np.empty(n, np.int64)
    expanded = np.zeros(n, np.bool_)
    deepest = np.zeros(n_trees, np.int64)
    shallowest = np.zeros(n_trees, np.int64)
    node_depth = np.zeros(n, np.int64)
    for t in range(n_trees):
        _postorder_tree(t, tree_offsets, left, right, out, expanded)
        _fill_tree(t, out, tree_offsets, left, right, weight, value)
        _tree_depth(t, tree_offsets, left, right, node_depth, deepest, shallowest)
    return out, deepest, shallowest


@njit(cache=True, parallel=True)
def fill_internal_values(order, tree_offsets, left, right, weight, value):
    """value[internal] := weight-weighted mean of the children's values (in place);
    ``order``: the post-order of ``postorder``."""
    for t in prange(tree_offsets.shape[0] - 1):
        _fill_tree(np.int64(t), order, tree_offsets, left, right, weight, value)


@njit(cache=True)
def fill_internal_values_serial(order, tree_offsets, left, right, weight, value):
    """:func:`fill_internal_values` on one thread."""
    for t in range(tree_offsets.shape[0] - 1):
        _fill_tree(t, order, tree_offsets, left, right, weight, value)


@njit(cache=True)
def _fill_tree(t, order, tree_offsets, left, right, weight, value):
    for idx in range(tree_offsets[t], tree_offsets[t + 1]):
        node = order[idx]
        lc = left[node]
        if lc < 0:
            continue
        rc = right[node]
        wl = weight[lc]
        wr = weight[rc]
        for j in range(value.shape[1]):
            if wl + wr > 0:
                value[node, j] = (wl * value[lc, j] + wr * value[rc, j]) / (wl + wr)
            else:
                value[node, j] = 0.5 * (value[lc, j] + value[rc, j])


@njit(cache=True, parallel=True)
def tree_depths(tree_offsets, left, right):
    """Per tree: (depth = longest root-to-leaf path, shallowest leaf depth), in edges
    (trees in parallel; :func:`tree_depths_serial`: the same, one thread)."""
    n_trees = tree_offsets.shape[0] - 1
    deepest = np.zeros(n_trees, np.int64)
    shallowest = np.zeros(n_trees, np.int64)
    node_depth = np.zeros(left.shape[0], np.int64)
    for t in prange(n_trees):
        _tree_depth(t, tree_offsets, left, right, node_depth, deepest, shallowest)
    return deepest, shallowest


@njit(cache=True)
def tree_depths_serial(tree_offsets, left, right):
    """:func:`tree_depths` on one thread (small ensembles: no thread-pool launch)."""
    n_trees = tree_offsets.shape[0] - 1
    deepest = np.zeros(n_trees, np.int64)
    shallowest = np.zeros(n_trees, np.int64)
    node_depth = np.zeros(left.shape[0], np.int64)
    for t in range(n_trees):
        _tree_depth(t, tree_offsets, left, right, node_depth, deepest, shallowest)
    return deepest, shallowest


@njit(cache=True, inline="always")
def _tree_depth(t, tree_offsets, left, right, node_depth, deepest, shallowest):
    """Tree t's deepest and shallowest leaf depth, by a depth-first walk."""
    stack = np.empty(tree_offsets[t + 1] - tree_offsets[t] + 1, np.int64)
    top = 1
    stack[0] = tree_offsets[t]
    node_depth[tree_offsets[t]] = 0
    lo = np.iinfo(np.int64).max
    hi = 0
    while top > 0:
        top -= 1
        node = stack[top]
        d = node_depth[node]
        if left[node] < 0:
            lo = min(lo, d)
            hi = max(hi, d)
        else:
            node_depth[left[node]] = d + 1
            node_depth[right[node]] = d + 1
            stack[top] = left[node]
            stack[top + 1] = right[node]
            top += 2
    deepest[t] = hi
    shallowest[t] = lo


def fill_node_arrays(left, right, feature, threshold, missing_left, nan_mode, is_cat,
                     cat_default_left, strict, o_left, o_right, o_feature, o_threshold,
                     o_flags):
    """The routing's node arrays (``o_``: left, right, feature, threshold, flags) of
    kernel_inputs.Routing from the normal form's per-node fields, written into the given
    arrays: leaves become self-loops with feature 0, and the flag bits of
    kernels/route.py are set (``strict``: splits compare x < t, which decides where a
    NaN read as zero goes). Plain numpy (vectorised over the nodes): nothing to compile
    on a first call."""
    leaf = left < 0
    leaves = np.flatnonzero(leaf)
    np.copyto(o_left, left)
    o_left[leaves] = leaves
    np.copyto(o_right, right)
    o_right[leaves] = leaves
    np.maximum(feature, 0, out=o_feature, casting="unsafe")
    np.copyto(o_threshold, threshold)
    miss = np.asarray(missing_left, np.bool_)
    zero = nan_mode == NAN_AS_ZERO
    cat = np.asarray(is_cat, np.bool_)
    # the flags as sums of distinct bits (bool times a bit), in place in o_flags; the
    # terms of a field that is zero at every node (no zero-as-missing, no categorical
    # split: most models) are skipped
    bit = o_flags.dtype.type
    if zero.any():
        zero_left = np.less(0.0, threshold) if strict else np.less_equal(0.0, threshold)
        np.multiply(miss, bit(route.MISSING_LEFT), out=o_flags)
        o_flags += zero * bit(route.NAN_AS_ZERO)
        o_flags += np.where(zero, zero_left, miss) * bit(route.NAN_LEFT)
    else:  # NaN goes the missing way: both bits from missing_left at once
        np.multiply(miss, bit(route.MISSING_LEFT | route.NAN_LEFT), out=o_flags)
    zero_missing = nan_mode == NAN_ZERO_MISSING
    if zero_missing.any():
        o_flags += zero_missing * bit(route.NAN_ZERO_MISSING)
    if cat.any():
        o_flags += cat * bit(route.CATEGORICAL)
        o_flags += (cat & (nan_mode == NAN_CAT_EXACT)) * bit(route.CATEGORY_EXACT)
        o_flags += ((cat & (nan_mode == NAN_CAT_NEGATIVE_UNLISTED))
                    * bit(route.CATEGORY_NEGATIVE_UNLISTED))
    default_left = np.asarray(cat_default_left, np.bool_)
    if default_left.any():
        o_flags += default_left * bit(route.CATEGORY_DEFAULT_LEFT)
    o_flags += leaf * bit(route.LEAF)


def split_arrays(tree_offsets, left, right, feature, n_features, node_tree=None):
    """The internal nodes (splits) of an ensemble in node order: their node, children,
    tree, tree root and key tree * n_features + feature (int64), and each tree's split
    offsets (n_trees + 1). Splits come tree by tree because nodes do. ``node_tree``: the
    tree of every node (int64) when the caller has it. Plain numpy (vectorised): nothing
    to compile on a first call."""
    tree_offsets = np.asarray(tree_offsets, np.int64)
    n_trees = tree_offsets.shape[0] - 1
    node = np.flatnonzero(left >= 0).astype(np.int64)
    if node_tree is None:
        node_tree = np.repeat(np.arange(n_trees, dtype=np.int64), np.diff(tree_offsets))
    tree = node_tree[node]
    root = tree_offsets[tree]
    key = tree * np.int64(n_features) + feature[node].astype(np.int64)
    tree_splits = np.searchsorted(node, tree_offsets).astype(np.int64)
    return (node, left[node].astype(np.int64), right[node].astype(np.int64), tree, root, key,
            tree_splits)

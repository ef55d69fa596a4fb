"""Structural passes over the normal form: tree checks and bottom-up value filling."""

import numpy as np
from numba import njit


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


@njit(cache=True)
def postorder(tree_offsets, left, right):
    """Global node indices of every tree, children before parents."""
    n = left.shape[0]
    out = np.empty(n, np.int64)
    k = 0
    stack = np.empty(n, np.int64)
    expanded = np.zeros(n, np.bool_)
    for t in range(tree_offsets.shape[0] - 1):
        top = 0
        stack[top] = tree_offsets[t]
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
    return out


@njit(cache=True)
def fill_internal_values(order, left, right, weight, value):
    """value[internal] := weight-weighted mean of the children's values (in place)."""
    for idx in range(order.shape[0]):
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


@njit(cache=True)
def tree_depths(tree_offsets, left, right):
    """Per tree: (depth = longest root-to-leaf path, shallowest leaf depth), in edges."""
    n_trees = tree_offsets.shape[0] - 1
    deepest = np.zeros(n_trees, np.int64)
    shallowest = np.zeros(n_trees, np.int64)
    node_depth = np.zeros(left.shape[0], np.int64)
    stack = np.empty(left.shape[0] + 1, np.int64)
    for t in range(n_trees):
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
    return deepest, shallowest

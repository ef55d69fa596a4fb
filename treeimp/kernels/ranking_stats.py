"""Staged statistics of learning-to-rank models from precomputed gradients.

A ranking objective's gradient of a row depends on the margins of its whole query
(kernels/ranking_gradients.py), so the staged pass of kernels/staged.py, which computes
each row's gradient alone, does not apply. Instead, for a batch of whole queries: the leaf
of every row in every tree (``nodes``, global node ids, from the routing kernels) gives
every row's margin before every stage (:func:`stage_margins`), the gradient kernel turns
them into g and h per row and stage, and :func:`add_stage_terms` adds each row's four
terms (w, -w g, w h, w g^2 / h) of stage st into the leaves it reaches in the trees of
that stage: the layout of kernels/staged.py's ``stats`` (n_leaves, n_blocks, 4).
"""

from numba import njit, prange


@njit(cache=True, parallel=True)
def stage_margins(nodes, tree_scale, value, tree_stage, start, out):
    """out[i, st] := row i's margin before stage st (start[i] plus the scaled leaf
    values of the trees of earlier stages), out[i, n_stages] its final margin
    (``out``: (n_rows, n_stages + 1); ``tree_stage``: every tree's stage, increasing)."""
    n, T = nodes.shape
    n_stages = out.shape[1] - 1
    for i in prange(n):
        m = start[i]
        st = 0
        out[i, 0] = m
        for t in range(T):
            while tree_stage[t] > st:  # the trees of stage st are done
                st += 1
                out[i, st] = m
            m += tree_scale[t] * value[nodes[i, t], 0]
        while st < n_stages:
            st += 1
            out[i, st] = m


@njit(cache=True)
def add_stage_terms(nodes, tree_stage, slot, block, w, g, h, stats):
    """stats[slot of row i's leaf in tree t, block[i]] += (w, -w g, w h, w g^2 / h) of
    row i at stage tree_stage[t] (g, h: (n_rows, n_stages)); ``w`` one weight per row or
    one for all; rows of weight 0 add nothing."""
    n, T = nodes.shape
    last_w = w.shape[0] - 1
    for i in range(n):
        wi = w[min(i, last_w)]
        if wi == 0.0:
            continue
        b = block[i]
        for t in range(T):
            st = tree_stage[t]
            gi = g[i, st]
            hi = h[i, st]
            at = slot[nodes[i, t]]
            stats[at, b, 0] += wi
            stats[at, b, 1] -= wi * gi
            stats[at, b, 2] += wi * hi
            if hi > 0.0:
                stats[at, b, 3] += wi * gi * gi / hi

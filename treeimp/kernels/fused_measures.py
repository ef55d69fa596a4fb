"""Fused per-split sums of mdi_oob, mdi_oob_centered and ufi (forests and boosting).

The formulas in :mod:`treeimp.measures.formulas` read like the papers (their numpy forms
``mdi_oob_parts``, ``mdi_oob_centered_parts``, ``ufi_parts``, which tests/test_formulas.py
checks these kernels against); on a forest of deep trees (a million nodes, ten jackknife
replicates) those spend most of their time materialising (n_splits, B) temporaries. These
kernels evaluate the same per-split terms in one pass and add them straight into
``out[tree * n_features + feature, b, c]`` (the blocks of one key side by side: the block
loop is innermost). Their inputs come grouped (:mod:`treeimp.model.kernel_inputs`: SplitIndex,
SplitTerms, HeldOut). ``split_sums`` reads statistics already summed up the trees;
``leaf_split_sums`` starts from the accumulated leaf sums and evaluates several measures
in one pass; both run ``tree_terms`` on every tree.

Threads own whole trees (splits are stored tree by tree, and a tree's keys are its own),
so no two threads write the same output cell and no per-thread buffers are needed.

The kernels use numba's numpy error model: no zero-division test per division (every
divisor here is a row count or hessian sum already tested to be positive).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .forest_stats import total_and_complement
from .prefetch import prefetch_write

MDI_OOB = 0          # (v_l - v_m).S'_l + (v_r - v_m).S'_r, per class c
UFI_CLASSIFICATION = 1  # w_l v_lc p'_lc + w_r v_rc p'_rc - w_m v_mc p'_mc, both children seen
UFI_REGRESSION = 2   # w-weighted decrease of the held-out MSE (|y - v|^2 summed over
                     # outputs) + in-sample decrease
UFI_BOOSTING = 3     # w-weighted decrease of the held-out Newton impurity + in-sample decrease
MDI_OOB_CENTERED = 4  # (v_l - v_m).(S'_l - c_t N'_l) + (v_r - v_m).(S'_r - c_t N'_r), per c
# added to a ufi kind: the last block is the total and the others its leave-one-block-out
# replicates. A node ratio r = A' / N' (held-out impurity, class share) of a node whose
# total holds k > 1 rows (its evaluation weight n') is replaced in each replicate b by its
# first-order expansion about the total's, scaled by sqrt(k / (k - 1)):
# r + sqrt(k / (k - 1)) (A'_b - r N'_b) / N'. For a node mean whose k rows fall in k
# different blocks the jackknife variance is then s^2 / k, unbiased; the exact ratios give
# s^2 / (k - 1) (an overstatement of k / (k - 1): 2 at k = 2), the plain expansion
# s^2 (k - 1) / k^2. Nodes with one row keep the exact replicate (the expansion has no
# spread to scale there), and the skip rule stays each block's own; the total is unchanged.
# (benchmarks/README.md, "Issue 32: calibration of the screening p-values")
LINEARISED = 8

# plane layouts of accumulated statistics (stats/node_stats.py: REGRESSION, ONE_HOT,
# BOOSTING)
LAYOUT_REGRESSION = 0  # n', Q', S'_1..C
LAYOUT_ONE_HOT = 1     # S'_1..C (n' is their sum)
LAYOUT_BOOSTING = 2    # n', S', H', R'


@njit(cache=True, parallel=True, error_model="numpy")
def split_sums(kind, splits, terms, held, out, boosting, forests):
    """Accumulate per-split terms of measure ``kind`` into out (n_keys, B, C).

    splits (kernel_inputs.SplitIndex): node/left/right/key (n_splits,) the split node,
    its children, tree * F + feature; tree_splits (n_trees + 1,) split offsets per tree,
    tree_offsets its nodes'. terms (kernel_inputs.SplitTerms): w (n_nodes,) in-sample
    weight fractions; v (n_nodes, C) node values (MDI_OOB on a boosted model: as the tree
    adds them to the margin, i.e. times its DART weight; UFI_BOOSTING: the unshrunk node
    estimates mu); extra: (n_splits,) in-sample decrease (UFI_REGRESSION, UFI_BOOSTING),
    or (MDI_OOB_CENTERED) (n_trees * C,) the centres c_t tree by tree. held
    (kernel_inputs.HeldOut): n, Q, H, R (n_nodes, B); S (C, n_nodes, B) evaluation
    statistics (H, R: boosting; MDI_OOB_CENTERED reads its weights N' from H: the
    hessian sums for boosting, the counts n' otherwise); ``n_from_s``: n' is not stored
    (one-hot class targets) but the sum over c of S[c] (``n`` and, for
    MDI_OOB_CENTERED, ``H`` are then not read). UFI_REGRESSION and UFI_BOOSTING, whose
    terms are one number (summed over outputs), write column c = 0 of out.
    ``boosting``, ``forests``: the statistics' family (see ``tree_terms``).
    """
    node, left, right, key, tree_splits, tree_offsets = splits
    w, v, extra = terms
    n, Q, S, H, R, n_from_s = held
    for t in prange(tree_splits.size - 1):
        tree_terms(kind, node, left, right, key, tree_splits, tree_offsets, t, 0, w, v,
                   extra, n, Q, S, H, R, n_from_s, out, boosting, forests)
    return out


# called, not inlined: one compilation for split_sums and leaf_split_sums
@njit(cache=True, error_model="numpy")
def tree_terms(kind, node, left, right, key, tree_splits, tree_offsets, t, off, w, v, extra,
               n, Q, S, H, R, n_from_s, out, boosting, forests):
    """Tree t's part of ``split_sums``: its split terms of ``kind`` added into out.

    The evaluation statistics n .. R are indexed by node - ``off``: the ensemble's own
    planes (off = 0) or a copy of tree t's nodes alone (off = its first node,
    ``leaf_split_sums``); w, v and extra by the global node or split. Unsigned node
    indices (no wraparound arithmetic), and mdi_oob and ufi in separate loop nests: the
    block loop is then a straight run over B values.

    ``boosting`` True and ``forests`` None: boosting statistics, whose ufi form is
    UFI_BOOSTING; ``boosting`` None and ``forests`` True: a forest's (UFI_REGRESSION,
    UFI_CLASSIFICATION). numba drops the code under ``if <argument> is not None`` for a
    None argument before typing it (only None is resolved there: a bool argument's
    branches are compiled and left to LLVM), so that an ensemble's first call compiles
    the ufi forms of its own family only. The callers pass the family of the statistics'
    layout, which also decides the ufi kind (``measures.formulas._ufi_request``)."""
    B = S.shape[2]
    C = S.shape[0]
    uo = np.uint64(off)
    if kind == MDI_OOB:
        for s in range(tree_splits[t], tree_splits[t + 1]):
            m, l, r, k = _split(node, left, right, key, s)
            for c in range(C):
                dl = v[l, c] - v[m, c]
                dr = v[r, c] - v[m, c]
                for b in range(B):
                    out[k, b, c] += dl * S[c, l - uo, b] + dr * S[c, r - uo, b]
        return
    if kind == MDI_OOB_CENTERED:
        for s in range(tree_splits[t], tree_splits[t + 1]):
            m, l, r, k = _split(node, left, right, key, s)
            il, ir = l - uo, r - uo
            for c in range(C):
                centre = extra[t * C + c]
                dl = v[l, c] - v[m, c]
                dr = v[r, c] - v[m, c]
                for b in range(B):
                    nl = _count(H, S, il, b, n_from_s)
                    nr = _count(H, S, ir, b, n_from_s)
                    out[k, b, c] += (dl * (S[c, il, b] - centre * nl)
                                     + dr * (S[c, ir, b] - centre * nr))
        return
    # the ufi forms: n' of the tree's nodes first (stored: a view; one-hot: summed over
    # the class planes in storage order, _tree_counts)
    lin = kind >= LINEARISED
    if lin:
        kind -= LINEARISED
    last = B - 1  # the total, when linearised
    base = tree_offsets[t]
    ub = np.uint64(base)  # unsigned like the split's node indices
    lo, hi = base - off, tree_offsets[t + 1] - off
    cnt = _tree_counts(n, S, lo, hi, n_from_s) if n_from_s else n[lo:hi]
    # the per-node held-out impurity of the regression forms (the tree is in cache)
    imp = np.empty((cnt.shape[0] if kind != UFI_CLASSIFICATION else 0, B))
    if boosting is not None:  # UFI_BOOSTING: a node's blocks in one loop without
        for i in range(imp.shape[0]):  # branches (vectors)
            jl = base - off + i
            _held_newton(S[0, jl], H[jl], R[jl], v[base + i, 0], imp[i])
    if forests is not None:
        for i in range(imp.shape[0] if kind == UFI_REGRESSION else 0):
            j = np.uint64(base + i)
            jl = np.uint64(base - off + i)
            for b in range(B):
                imp[i, b] = (_held_mse(Q, S, v, j, jl, b, cnt[i, b])
                             if cnt[i, b] > 0.0 else 0.0)
    for i in range(imp.shape[0] if lin else 0):
        jl = np.uint64(base - off + i)
        kt = cnt[i, last]
        if kt > 1.0:  # the replicates' ratios to first order about the total's
            den = kt if kind == UFI_REGRESSION else H[jl, last]
            rt = imp[i, last]
            scale = np.sqrt(kt / (kt - 1.0)) / den if den > 0.0 else 0.0
            for b in range(last):
                d = cnt[i, b] if kind == UFI_REGRESSION else H[jl, b]
                imp[i, b] = rt + scale * d * (imp[i, b] - rt)
    # the expanded class shares' factors per node: 1 / k and sqrt(k / (k - 1)) / k, k the
    # total's n' (0 where k <= 1: the exact share)
    n_lin = cnt.shape[0] if lin and kind == UFI_CLASSIFICATION else 0
    # np.empty and zeros set in the loop: np.zeros would be one more compilation of numba's
    # np.zeros, np.empty and zero fill for this kernel's flags
    inv = np.empty(n_lin)
    scl = np.empty(n_lin)
    if forests is not None:
        for i in range(n_lin):
            kt = cnt[i, last]
            inv[i] = 0.0
            scl[i] = 0.0
            if kt > 1.0:
                inv[i] = 1.0 / kt
                scl[i] = np.sqrt(kt / (kt - 1.0)) / kt
    for s in range(tree_splits[t], tree_splits[t + 1]):
        m, l, r, k = _split(node, left, right, key, s)
        im, il, ir = m - ub, l - ub, r - ub
        if boosting is not None:  # UFI_BOOSTING
            # the skip rule (a child without rows or without H' > 0) as a select of
            # +0.0, which changes no sum (out starts at +0.0 and so is never -0.0): a
            # loop without branches (the forests' forms keep theirs: their deep trees'
            # blocks are predicted well, and the selects measured slower there)
            hl = H[l - uo]
            hr = H[r - uo]
            wm, wl, wr, e = w[m], w[l], w[r], extra[s]
            for b in range(B):
                skip = ((cnt[il, b] <= 0.0) | (cnt[ir, b] <= 0.0) | (hl[b] <= 0.0)
                        | (hr[b] <= 0.0))
                term = wm * imp[im, b] - wl * imp[il, b] - wr * imp[ir, b] + e
                out[k, b, 0] += 0.0 if skip else term
            continue
        if forests is None:
            continue
        for b in range(B):
            nl = cnt[il, b]
            nr = cnt[ir, b]
            if nl <= 0.0 or nr <= 0.0:  # skip rule: a child without rows
                continue
            if kind == UFI_REGRESSION:
                out[k, b, 0] += (w[m] * imp[im, b] - w[l] * imp[il, b]
                                 - w[r] * imp[ir, b] + extra[s])
            elif lin and b < last:
                _add_ufi_class_linearised(out, k, b, last, w, v, S, m, l, r, uo, cnt, im,
                                          il, ir, inv, scl)
            else:
                _add_ufi_class(out, k, b, w, v, S, m, l, r, uo, nl, nr, cnt[im, b])


@njit(cache=True, nogil=True, error_model="numpy")
def leaf_split_sums(measures, splits, order, left, right, slots, leaves, layout, out, roots,
                    t0, t1, boosting, forests):
    """``split_sums`` of several measures straight from leaf sums, tree by tree, for the
    trees t0 .. t1 - 1 (the caller runs ranges of trees in parallel threads: the kernel
    releases the GIL, and a tree's cells of ``out`` and ``roots`` are its own).

    ``leaves`` (n_leaves, B, D): the statistics as accumulated, per leaf slot (``slots``:
    kernel_inputs.LeafSlots) and row block, the D terms by ``layout``
    (LAYOUT_REGRESSION n', Q', S'..; LAYOUT_ONE_HOT the class sums S'; LAYOUT_BOOSTING
    n', S', H', R'). Each tree's leaves are copied once into a small node-indexed
    buffer (D, nodes, B + 1), summed up the tree (``order``: the post-order tree by
    tree, ``left``, ``right`` the children, -1 at leaves) and turned into
    leave-one-block-out replicates with the total last (as ``node_stats.propagate_up``
    does on the node planes), and every measure j of ``measures``
    (kernel_inputs.FusedMeasures) adds that tree's terms into out[j] (B + 1, n_keys, C)
    while the tree is in cache: ``leaves`` is read once and never written.
    MDI_OOB_CENTERED reads its weights N' from H' for boosting and n' otherwise.
    ``roots`` (n_trees, B + 1) receives n' at every tree's root, block by block.
    The cache lines of the next tree's cells of ``out`` (B + 1 lines a split, a whole
    (n_keys, C) plane apart; those of its first 64 splits) are asked for (a prefetch
    hint) before a tree is worked on, so that they arrive while it is.
    """
    kinds, w_of, v_of, extra_start, ws, vs, extras = measures
    node, lefts, rights, key, tree_splits, tree_offsets = splits
    slot_node, tree_start = slots.node, slots.tree_start
    B = leaves.shape[1]
    D = leaves.shape[2]
    from_s = layout == LAYOUT_ONE_HOT
    # the loop over trees in this function, not around a call of a per-tree function:
    # numba compiles a called function once more into its caller
    for t in range(t0, t1):
        if t + 1 < t1:  # the next tree's output cells, asked for while this tree is done
            s0 = tree_splits[t + 1]
            for j in range(kinds.shape[0]):
                oj = out[j]
                # at most 64 splits: a deep tree's many splits reuse few keys
                s_end = tree_splits[t + 2]  # not min(): one more compilation for these flags
                for s in range(s0, s_end if s_end < s0 + 64 else s0 + 64):
                    for b in range(oj.shape[0]):
                        prefetch_write(oj, b, key[s])
        base = tree_offsets[t]
        loc = np.empty((D, tree_offsets[t + 1] - base, B + 1))
        _tree_sums(leaves, slot_node, tree_start[t], tree_start[t + 1], order, left, right,
                   base, loc)
        for d in range(D):
            for i in range(loc.shape[1]):
                total_and_complement(loc[d], i, B)
        n, Q, S, H, R = _planes(loc, layout)
        for b in range(B + 1):
            roots[t, b] = _count(n, S, 0, b, from_s)
        for j in range(kinds.shape[0]):
            kind = kinds[j]
            extra = extras[extra_start[j]:extra_start[j + 1]]
            weights = n if kind == MDI_OOB_CENTERED and layout != LAYOUT_BOOSTING else H
            # out[j] (B + 1, n_keys, C) seen as (n_keys, B + 1, C): the view of
            # np.transpose(out[j], (1, 0, 2)), made with as_strided, which compiles in a
            # fraction of np.transpose's time
            oj = out[j]
            view = np.lib.stride_tricks.as_strided(
                oj, (oj.shape[1], oj.shape[0], oj.shape[2]),
                (oj.strides[1], oj.strides[0], oj.strides[2]))
            tree_terms(kind, node, lefts, rights, key, tree_splits, tree_offsets, t, base,
                       ws[w_of[j]], vs[v_of[j]], extra, n, Q, S, weights, R, from_s, view,
                       boosting, forests)


@njit(cache=True, parallel=True)
def leaf_root_counts(order, tree_offsets, left, right, slots, leaves, layout, roots):
    """roots (n_trees, B + 1) := n' at every tree's root from leaf sums (``leaves``,
    ``slots`` and ``order``, ``left``, ``right`` as in ``leaf_split_sums``), added up the
    tree in the same order and turned into leave-one-block-out replicates with the total
    last before the class planes are summed, so equal to the root counts that function
    gives."""
    slot_node, tree_start = slots.node, slots.tree_start
    B = leaves.shape[1]
    from_s = layout == LAYOUT_ONE_HOT
    P = leaves.shape[2] if from_s else 1  # one-hot: the class planes, summed at the root
    for t in prange(tree_offsets.shape[0] - 1):
        base = tree_offsets[t]
        cnt = np.empty((P, tree_offsets[t + 1] - base, B + 1))
        _tree_sums(leaves, slot_node, tree_start[t], tree_start[t + 1], order, left, right,
                   base, cnt)
        top = np.empty((P, 1, B + 1))  # the root's planes, then their replicates
        for p in range(P):
            for b in range(B):
                top[p, 0, b] = cnt[p, 0, b]
            total_and_complement(top[p], 0, B)
        for b in range(B + 1):
            roots[t, b] = _count(top[0], top, 0, b, from_s)


@njit(cache=True, inline="always")
def _tree_sums(leaves, slot_node, s0, s1, order, left, right, base, loc):
    """One tree's node sums, block by block: loc[d, node - base, b] := leaves[s, b, d] at
    the tree's leaf slots s0 .. s1 - 1 (one run of the leaf sums), then every internal
    node the sum of its children, in the tree's post-order (its entries of ``order``
    are base .. base + nodes - 1), for the first loc.shape[0] terms d and the B blocks
    of ``leaves`` (a spare last block of loc is left alone)."""
    for d in range(loc.shape[0]):  # term by term: the writes run along a node's blocks
        for s in range(s0, s1):
            i = slot_node[s] - base
            for b in range(leaves.shape[1]):
                loc[d, i, b] = leaves[s, b, d]
    for k in range(base, base + loc.shape[1]):
        nd = order[k]
        lc = left[nd]
        if lc < 0:
            continue
        i, il, ir = nd - base, lc - base, right[nd] - base
        for d in range(loc.shape[0]):
            for b in range(leaves.shape[1]):
                loc[d, i, b] = loc[d, il, b] + loc[d, ir, b]


@njit(cache=True, inline="always")
def _planes(loc, layout):
    """The planes (n, Q, S, H, R) of one tree's statistics ``loc`` by ``layout`` (those a
    layout lacks are filled by n' and not read; one-hot: n' is not stored, S[0] stands
    in)."""
    if layout == LAYOUT_BOOSTING:
        return loc[0], loc[0], loc[1:2], loc[2], loc[3]
    if layout == LAYOUT_REGRESSION:
        return loc[0], loc[1], loc[2:], loc[0], loc[0]
    return loc[0], loc[0], loc[:], loc[0], loc[0]


@njit(cache=True, inline="always")
def _tree_counts(n, S, start, stop, from_s):
    """n' of nodes start..stop-1 (one tree) in every block, (stop - start, B), read in
    storage order: one stream through the tree's statistics, which the split loops,
    jumping to right children, then find in cache."""
    cnt = np.empty((stop - start, S.shape[2]))
    for i in range(cnt.shape[0]):
        j = np.uint64(start + i)
        for b in range(cnt.shape[1]):
            cnt[i, b] = _count(n, S, j, b, from_s)
    return cnt


@njit(cache=True, inline="always")
def _add_ufi_class(out, k, b, w, v, S, m, l, r, uo, nl, nr, nm):
    """out[k, b, c] += w_l v_lc p'_lc + w_r v_rc p'_rc - w_m v_mc p'_mc, with the held-out
    class shares p' = S' / n' (one division per node); S indexed by node - ``uo``."""
    fl = w[l] / nl
    fr = w[r] / nr
    fm = w[m] / nm
    for c in range(S.shape[0]):
        out[k, b, c] += (fl * v[l, c] * S[c, l - uo, b]
                         + fr * v[r, c] * S[c, r - uo, b]
                         - fm * v[m, c] * S[c, m - uo, b])


@njit(cache=True, inline="always")
def _add_ufi_class_linearised(out, k, b, last, w, v, S, m, l, r, uo, cnt, im, il, ir, inv,
                              scl):
    """``_add_ufi_class`` for a replicate b (the total in block ``last``), each node's class
    shares p'_b = S'_b / n'_b replaced, where the total's n' is k > 1, by
    p' + sqrt(k / (k - 1)) (S'_b - p' n'_b) / k with p' = S' / k (see LINEARISED; ``inv``
    = 1 / k and ``scl`` = sqrt(k / (k - 1)) / k per node of the tree, 0 where k <= 1);
    the exact share where k <= 1 (block b saw rows in both children, hence in the
    parent)."""
    for j, i in ((l, il), (r, ir), (m, im)):
        nb = cnt[i, b]
        f = w[j] if j != m else -w[j]
        if inv[i] > 0.0:
            for c in range(S.shape[0]):
                pt = S[c, j - uo, last] * inv[i]
                out[k, b, c] += f * v[j, c] * (pt + scl[i] * (S[c, j - uo, b] - pt * nb))
        else:
            fb = f / nb
            for c in range(S.shape[0]):
                out[k, b, c] += fb * v[j, c] * S[c, j - uo, b]


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


@njit(cache=True, inline="always", error_model="numpy")
def _held_newton(S, H, R, mu, out):
    """out[b] := the held-out Newton impurity (R' + 2 mu G' + mu^2 H') / H' with
    G' = -S' (0 when H' <= 0) of one node in every block b: the weighted mean of
    h (-g/h - mu)^2 over the node's rows (S, H, R: the node's rows of statistics, mu its
    estimate). The quotient is formed in every block and kept where H' > 0 (numpy's
    error model: no zero test), so that the loop has no branch and runs on vectors."""
    a = 2.0 * mu
    mm = mu * mu
    for b in range(out.shape[0]):
        h = H[b]
        q = (R[b] + a * -S[b] + mm * h) / h
        out[b] = 0.0 if h <= 0.0 else q


@njit(cache=True, inline="always", error_model="numpy")
def _held_mse(Q, S, v, node, held, b, cnt):
    """Mean of |y - v|^2 over a node's evaluation rows from its sums,
    (Q' - 2 v.S' + |v|^2 n') / n', summed over the outputs of a multi-output target (v at
    ``node``, the statistics at ``held``)."""
    vs = 0.0
    vv = 0.0
    for c in range(S.shape[0]):
        vs += v[node, c] * S[c, held, b]
        vv += v[node, c] * v[node, c]
    return (Q[held, b] - 2.0 * vs + vv * cnt) / cnt

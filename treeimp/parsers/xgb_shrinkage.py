"""Recover XGBoost's learning rate (eta) from a saved model, which does not store it.

A model file (``save_model``) keeps no training parameters, but it keeps two versions of
every node's Newton step: in ``base_weights`` internal nodes store the UNshrunk weight
and leaves ``eta`` times their weight (for reg:absoluteerror the leaves XGBoost applies,
``split_conditions``, are then refitted to residual quantiles, but ``base_weights``
keeps the Newton step, so the identity below still holds there). With
``num_parallel_tree > 1`` XGBoost shrinks by ``eta / num_parallel_tree`` and that is
what is recovered. With ``T(G) = sign(G) max(|G| - alpha, 0)``
XGBoost's weight is ``w = -T(G) / (H + lambda)``, and a split node ``p`` with two leaf
children ``l``, ``r`` satisfies ``G_p = G_l + G_r`` (and ``H_p = H_l + H_r``). Writing
``v = eta w`` for the stored leaf values and ``s = sign(.)`` this gives, for every such
node (``v_l, v_r, w_p`` non-zero)::

    eta w_p (H_p + lambda) + eta alpha (s_p - s_l - s_r) = v_l (H_l + lambda) + v_r (H_r + lambda)

which is linear in ``(eta, eta lambda, lambda, eta alpha)``. The four unknowns are
solved by least squares over all such nodes of the model, then refined with the
constraint ``eta lambda = eta * lambda`` by alternating exact solves, and rows that do
not fit (leaves clipped by ``max_delta_step`` -- count:poisson clips at 0.7 by default --
or by monotone constraints) are trimmed. The reported eta per tree is the median over
its nodes. ``alpha`` (L1) is therefore handled exactly, not approximated; nodes whose
L1-thresholded gradient is 0 carry no information and are skipped.

Vector-leaf trees (``multi_strategy="multi_output_tree"``) store one hessian sum for all
targets; the identity is applied per target with ``H / n_targets`` (exact for squared
error, where every target has the same hessian) and the trimming keeps what fits.

A learning-rate schedule (``xgboost.callback.LearningRateScheduler``, which changes
eta after each round, so tree ``i`` uses the value set after round ``i - 1``) shows as
trees that disagree on eta: then eta is fitted per tree with one shared lambda (alpha
taken as 0), lambda chosen by a 1-D search on the median residual.

When ``max_delta_step`` clips most nodes (so that too few rows fit), eta is the ratio
of the clipped leaf value to the clipped internal weight, both repeated exactly.

When the identity cannot be established (too few usable nodes: e.g. every tree is a
single leaf, as happens with reg:pseudohubererror when the hessians are below
``min_child_weight``), :func:`derive_learning_rate` returns ``None`` and the caller
decides.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..kernels.shrinkage import constant_rate_counts

# a node fits the identity when its relative residual is below this (values are float32)
_FIT_TOL = 2e-5
_MIN_ROWS = 4
_LQS_ROWS = 2000
_LQS_DRAWS = 400
_SEARCH_TREES = 2000


class ConcatenatedTrees(NamedTuple):
    """Trees of one output each, their arrays concatenated: tree t has ``sizes[t]``
    nodes, ``left``/``right`` local child indices (< 0 at leaves), ``steps`` the node
    weights (n_nodes,) and ``hess`` the sums of hessians, as in the per-tree form."""

    sizes: np.ndarray
    left: np.ndarray
    right: np.ndarray
    steps: np.ndarray
    hess: np.ndarray


def _rows(trees):
    """Coefficients (C, D, B, A, S, row scale, tree) of the identity for every usable
    node (a split whose children are both leaves), tree by tree, output by output."""
    if isinstance(trees, ConcatenatedTrees):
        return _rows_concatenated(*trees)
    widths = {np.shape(bw)[1] for _, _, bw, _ in trees}
    if len(widths) == 1 and widths == {1}:
        return _rows_single_output(trees)
    return _rows_per_tree(trees)


def _rows_single_output(trees):
    """_rows for trees of one output each, all trees in one vectorised pass (the same
    rows in the same order as the per-tree loop)."""
    return _rows_concatenated(
        np.array([len(left) for left, _, _, _ in trees], dtype=np.int64),
        np.concatenate([np.asarray(left) for left, _, _, _ in trees]),
        np.concatenate([np.asarray(right) for _, right, _, _ in trees]),
        np.concatenate([np.asarray(b, dtype=np.float64)[:, 0] for _, _, b, _ in trees]),
        np.concatenate([np.asarray(x, dtype=np.float64) for _, _, _, x in trees]))


def _rows_concatenated(sizes, left, right, steps, hess):
    """_rows of :class:`ConcatenatedTrees`."""
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    shift = np.repeat(offsets, sizes)
    left = np.asarray(left).astype(np.int64, copy=False)
    right = np.asarray(right).astype(np.int64, copy=False)
    bw = np.asarray(steps, dtype=np.float64)
    h = np.asarray(hess, dtype=np.float64)
    tree = np.repeat(np.arange(len(sizes)), sizes)
    p = np.flatnonzero(left >= 0)
    lc, rc = left[p] + shift[p], right[p] + shift[p]
    both = (left[lc] < 0) & (left[rc] < 0)
    p, lc, rc = p[both], lc[both], rc[both]
    wp, vl, vr = bw[p], bw[lc], bw[rc]
    hp, hl, hr = h[p], h[lc], h[rc]
    ok = (wp != 0) & (vl != 0) & (vr != 0) & np.isfinite(wp + vl + vr + hp + hl + hr)
    if not np.any(ok):
        return np.zeros((0, 7))
    wp, vl, vr, hp, hl, hr, t = (a[ok] for a in (wp, vl, vr, hp, hl, hr, tree[p]))
    return _coefficients(wp, vl, vr, hp, hl, hr, t.astype(np.float64))


def _coefficients(wp, vl, vr, hp, hl, hr, t):
    return np.column_stack([
        wp * hp,                                   # C (times eta)
        wp,                                        # D (times eta lambda)
        vl + vr,                                   # B (times lambda, right side)
        vl * hl + vr * hr,                         # A (right side)
        np.sign(wp) - np.sign(vl) - np.sign(vr),   # S (times eta alpha)
        np.abs(vl) * (hl + 1.0) + np.abs(vr) * (hr + 1.0),  # row scale
        t,
    ])


def _rows_per_tree(trees):
    """_rows tree by tree (trees with several outputs, or of different widths)."""
    parts = []
    for t, (left, right, base_weight, hess) in enumerate(trees):
        left = np.asarray(left)
        right = np.asarray(right)
        p = np.flatnonzero(left >= 0)
        if p.size == 0:
            continue
        lc, rc = left[p], right[p]
        both = (left[lc] < 0) & (left[rc] < 0)
        p, lc, rc = p[both], lc[both], rc[both]
        bw = np.asarray(base_weight, dtype=np.float64)
        k_dim = bw.shape[1]
        h = np.asarray(hess, dtype=np.float64) / k_dim
        for k in range(k_dim):
            wp, vl, vr = bw[p, k], bw[lc, k], bw[rc, k]
            hp, hl, hr = h[p], h[lc], h[rc]
            ok = (wp != 0) & (vl != 0) & (vr != 0) & np.isfinite(wp + vl + vr + hp + hl + hr)
            if not np.any(ok):
                continue
            wp, vl, vr, hp, hl, hr = (a[ok] for a in (wp, vl, vr, hp, hl, hr))
            parts.append(_coefficients(wp, vl, vr, hp, hl, hr,
                                       np.full(wp.size, t, dtype=np.float64)))
    if not parts:
        return np.zeros((0, 7))
    return np.concatenate(parts)


def _residual(R, eta, lam, alpha):
    C, D, B, A, S, scale = (R[:, i] for i in range(6))
    return (eta * (C + lam * D + alpha * S) - (A + lam * B)) / scale


def _eta_given(R, lam, alpha):
    """Least-squares eta for fixed (lambda, alpha), rows weighted by their scale."""
    C, D, B, A, S, scale = (R[:, i] for i in range(6))
    x = (C + lam * D + alpha * S) / scale
    y = (A + lam * B) / scale
    den = float(np.dot(x, x))
    return float(np.dot(x, y)) / den if den > 0 else np.nan


def _lam_alpha_given(R, eta, fit_alpha):
    C, D, B, A, S, scale = (R[:, i] for i in range(6))
    cols = [(eta * D - B) / scale]
    if fit_alpha:
        cols.append(eta * S / scale)
    M = np.column_stack(cols)
    y = (A - eta * C) / scale
    sol, *_ = np.linalg.lstsq(M, y, rcond=None)
    lam = max(float(sol[0]), 0.0)
    alpha = max(float(sol[1]), 0.0) if fit_alpha else 0.0
    return lam, alpha


def _fit(R, fit_alpha):
    """(eta, lambda, alpha) from rows R, or None when the rows cannot identify them."""
    C, D, B, A, S, scale = (R[:, i] for i in range(6))
    cols = [C / scale, D / scale, -B / scale] + ([S / scale] if fit_alpha else [])
    M = np.column_stack(cols)
    if M.shape[0] < M.shape[1]:
        return None
    norms = np.linalg.norm(M, axis=0)
    if np.any(norms == 0):
        return None
    sol, _, rank, sv = np.linalg.lstsq(M / norms, A / scale, rcond=None)
    if rank < M.shape[1] or sv[-1] < 1e-9 * sv[0]:
        return None
    sol = sol / norms
    eta = float(sol[0])
    if not eta > 0:
        return None
    lam = max(float(sol[2]), 0.0)
    alpha = max(float(sol[3]) / eta, 0.0) if fit_alpha else 0.0
    for _ in range(30):  # enforce eta*lambda = eta * lambda
        eta = _eta_given(R, lam, alpha)
        if not eta > 0:
            return None
        lam, alpha = _lam_alpha_given(R, eta, fit_alpha)
    return _eta_given(R, lam, alpha), lam, alpha


def _linear(R, fit_alpha):
    C, D, B, A, S, scale = (R[:, i] for i in range(6))
    cols = [C / scale, D / scale, -B / scale] + ([S / scale] if fit_alpha else [])
    return np.column_stack(cols), A / scale


def _initial_inliers(R, fit_alpha):
    """Least-quantile-of-squares start: the exact fit through a few rows that most
    other rows agree with (robust to clipped leaves, up to ~60% of the rows).

    The draws are taken one by one from one seeded generator, then every draw's
    condition number, exact solve and residuals are computed on the stacked (draws, m, m)
    systems at once; LAPACK and BLAS see the same matrices as draw by draw, so the scores,
    the chosen fit and the inliers are those of the sequential loop."""
    M, y = _linear(R, fit_alpha)
    n, m = M.shape
    if n <= m:  # an exact fit through every row would check nothing
        return None
    rng = np.random.default_rng(0)
    sample = np.arange(n) if n <= _LQS_ROWS else rng.choice(n, _LQS_ROWS, replace=False)
    Ms, ys = M[sample], y[sample]
    q = max(m + 1, int(0.4 * len(sample)))
    idx = np.stack([rng.choice(len(sample), m, replace=False) for _ in range(_LQS_DRAWS)])
    subs = Ms[idx]
    usable = ~(np.linalg.cond(subs) > 1e10)  # a NaN condition number is not skipped
    if not np.any(usable):
        return None
    subs, idx = subs[usable], idx[usable]
    x = np.linalg.solve(subs, ys[idx][:, :, None])  # (draws, m, 1)
    residuals = (Ms[None] @ x)[:, :, 0]  # one matrix-vector product per draw
    residuals -= ys
    np.abs(residuals, out=residuals)
    scores = np.partition(residuals, q - 1, axis=1)[:, q - 1]
    scores[~(scores < np.inf)] = np.inf  # a NaN score never becomes the best
    best = int(np.argmin(scores))  # the first of equal scores, as a strict "<" keeps it
    best_score = scores[best]
    if not best_score < np.inf:
        return None
    best_x = x[best, :, 0]
    return np.abs(M @ best_x - y) <= max(_FIT_TOL, 3.0 * best_score)


def _robust_fit(R, fit_alpha):
    keep = _initial_inliers(R, fit_alpha)
    result = None
    for _ in range(20):
        if keep is None or keep.sum() < _MIN_ROWS:
            return None
        result = _fit(R[keep], fit_alpha)
        if result is None:
            return None
        new_keep = np.abs(_residual(R, *result)) <= _FIT_TOL
        if np.array_equal(new_keep, keep):
            break
        keep = new_keep
    fits = np.abs(_residual(R, *result)) <= _FIT_TOL
    if fits.sum() < max(_MIN_ROWS, 0.3 * R.shape[0]):
        return None
    return result, fits


def derive_learning_rate(trees):
    """Per-tree learning rate of an XGBoost tree model, from its stored node weights.

    Parameters
    ----------
    trees : ConcatenatedTrees or list of (left, right, steps, sum_hessian)
        Per tree: child arrays (-1 at leaves), node weights (n_nodes, k) -- internal
        nodes their unshrunk ``base_weights``, leaves their shrunk Newton step -- and
        the hessian sums (n_nodes,); trees of one output each may come concatenated.

    Returns
    -------
    (eta, info) or None
        ``eta``: float array (n_trees,); ``info``: dict with ``lambda``, ``alpha``,
        ``n_nodes_used``, ``n_nodes_rejected``. None when the identity described in the
        module docstring does not hold on enough nodes to identify eta.
    """
    R = _rows(trees)
    n_trees = len(trees.sizes) if isinstance(trees, ConcatenatedTrees) else len(trees)
    if R.shape[0] < _MIN_ROWS:
        return _clip_ratio(trees, n_trees)
    fit = _robust_fit(R, fit_alpha=False)
    if fit is None or not np.all(fit[1]):
        with_alpha = _robust_fit(R, fit_alpha=True)
        if with_alpha is not None and (fit is None or with_alpha[1].sum() > fit[1].sum()):
            fit = with_alpha
    n_fit = 0 if fit is None else int(fit[1].sum())
    if n_fit < 0.7 * R.shape[0]:  # clipped leaves alone rarely reject this many
        schedule = _schedule_fit(R, n_trees)
        if schedule is not None and schedule[2].sum() > n_fit + max(2, 0.1 * R.shape[0]):
            eta, lam, fits = schedule
            return eta, {"lambda": lam, "alpha": 0.0, "n_nodes_used": int(fits.sum()),
                         "n_nodes_rejected": int((~fits).sum()), "schedule": True}
    if fit is None:
        return _clip_ratio(trees, n_trees)
    (_, lam, alpha), fits = fit
    C, D, B, A, S, _ = (R[:, i] for i in range(6))
    node_eta = (A + lam * B) / (C + lam * D + alpha * S)
    info = {"lambda": lam, "alpha": alpha, "n_nodes_used": int(fits.sum()),
            "n_nodes_rejected": int((~fits).sum()), "schedule": False}
    return np.full(n_trees, float(np.median(node_eta[fits]))), info


def constant_rate_fits(trees, eta, lam, alpha):
    """Whether one known (eta, lambda, alpha) fits the identity on the nodes
    :func:`derive_learning_rate` would accept as a constant-rate model: at least
    ``_MIN_ROWS`` usable nodes, 70% of them within ``_FIT_TOL`` (below that share it
    looks for a schedule), and every tree with a usable node fitting on one at least
    (a schedule changes eta from tree to tree). Same ``trees`` as there."""
    if isinstance(trees, ConcatenatedTrees):  # one pass, no coefficient table
        sizes, left, right, steps, hess = (np.ascontiguousarray(a, dtype=d) for a, d in zip(
            trees, (np.int64, np.int64, np.int64, np.float64, np.float64)))
        n_rows, n_fit, every_tree = constant_rate_counts(
            sizes, left, right, steps, hess, float(eta), float(lam), float(alpha), _FIT_TOL)
        return n_rows >= _MIN_ROWS and not n_fit / n_rows < 0.7 and bool(every_tree)
    R = _rows(trees)
    if R.shape[0] < _MIN_ROWS:
        return False
    fits = np.abs(_residual(R, eta, lam, alpha)) <= _FIT_TOL
    if fits.mean() < 0.7:
        return False
    t = R[:, 6].astype(np.int64)
    has_rows = np.bincount(t) > 0
    has_fit = np.bincount(t, fits.astype(np.float64), minlength=has_rows.size) > 0
    return bool(np.all(has_fit[has_rows]))


def _per_tree_eta(R, lam, n_trees, rows=None):
    """Least-squares eta of every tree for a given lambda (alpha = 0)."""
    C, D, B, A, _, scale = (R[:, i] for i in range(6))
    t = R[:, 6].astype(np.int64)
    x = (C + lam * D) / scale
    y = (A + lam * B) / scale
    w = np.ones_like(x) if rows is None else rows.astype(np.float64)
    den = np.bincount(t, w * x * x, minlength=n_trees)
    num = np.bincount(t, w * x * y, minlength=n_trees)
    with np.errstate(invalid="ignore", divide="ignore"):
        eta = num / den
    return eta, np.abs(eta[t] * x - y)


def _schedule_fit(R, n_trees):
    """eta per tree (a learning-rate schedule), one lambda, alpha = 0.

    lambda minimises the median residual over a log grid, then a golden-section
    refinement; eta per tree is its least-squares value on the rows that fit.
    """
    t = R[:, 6].astype(np.int64)
    rows_per_tree = np.bincount(t, minlength=n_trees)
    if R.shape[0] - np.count_nonzero(rows_per_tree) < _MIN_ROWS:
        return None  # one row per tree identifies eta only for a known lambda

    Rs = R
    if n_trees > _SEARCH_TREES:  # the lambda search looks at a sample of whole trees
        chosen = np.random.default_rng(0).choice(n_trees, _SEARCH_TREES, replace=False)
        Rs = R[np.isin(t, chosen)]

    def score(log_lam):
        return float(np.median(_per_tree_eta(Rs, np.expm1(log_lam), n_trees)[1]))

    grid = np.log1p(np.r_[0.0, np.logspace(-3, 4, 141)])
    scores = [score(g) for g in grid]
    k = int(np.argmin(scores))
    lo, hi = grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]
    golden = (np.sqrt(5.0) - 1.0) / 2.0
    for _ in range(60):
        a, b = hi - golden * (hi - lo), lo + golden * (hi - lo)
        if score(a) < score(b):
            hi = b
        else:
            lo = a
    lam = float(np.expm1(0.5 * (lo + hi)))
    fits = _per_tree_eta(R, lam, n_trees)[1] <= _FIT_TOL
    for _ in range(5):
        eta, res = _per_tree_eta(R, lam, n_trees, rows=fits)
        new_fits = res <= _FIT_TOL
        if np.array_equal(new_fits, fits):
            break
        fits = new_fits
    if fits.sum() < max(_MIN_ROWS, 0.3 * R.shape[0]):
        return None
    known = np.flatnonzero(np.bincount(t, fits.astype(np.float64), minlength=n_trees) > 0)
    eta = np.interp(np.arange(n_trees), known, eta[known])  # trees without a fitting node
    return eta, lam, fits


def _clip_ratio(trees, n_trees):
    """eta = (largest |leaf value|) / (largest |internal weight|) when both are clipped.

    With ``max_delta_step`` every clipped weight is exactly +-max_delta_step: internal
    nodes store it unshrunk, leaves as eta * max_delta_step. When most nodes are clipped
    the identity has too few rows left, but the repeated extreme values give eta.
    """
    if isinstance(trees, ConcatenatedTrees):
        trees = [(trees.left, None, trees.steps, None)]  # all nodes as one
    internal, leaves = [], []
    for left, _, steps, _ in trees:
        left = np.asarray(left)
        steps = np.abs(np.asarray(steps, dtype=np.float32))
        internal.append(steps[left >= 0].ravel())
        leaves.append(steps[left < 0].ravel())
    internal = np.concatenate(internal) if internal else np.zeros(0, np.float32)
    leaves = np.concatenate(leaves) if leaves else np.zeros(0, np.float32)
    if internal.size == 0 or leaves.size == 0:
        return None
    top_int, top_leaf = internal.max(), leaves.max()
    if not (top_int > 0 and top_leaf > 0):
        return None
    if np.count_nonzero(internal == top_int) < 2 or np.count_nonzero(leaves == top_leaf) < 2:
        return None  # no repeated extreme: nothing was clipped
    eta = float(top_leaf) / float(top_int)
    info = {"lambda": np.nan, "alpha": np.nan, "n_nodes_used": 0, "n_nodes_rejected": 0,
            "schedule": False, "clipped_at": float(top_int)}
    return np.full(n_trees, eta), info

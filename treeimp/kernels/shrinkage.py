"""The learning-rate identity of XGBoost's node weights, checked in one pass
(``parsers/xgb_shrinkage.constant_rate_fits``): the same rows, coefficients and residuals
as its numpy form (``_rows_concatenated``, ``_coefficients``, ``_residual``), without
building the (rows, 7) coefficient table."""

import numpy as np
from numba import njit


@njit(cache=True)
def constant_rate_counts(sizes, left, right, steps, hess, eta, lam, alpha, tol):
    """(usable nodes, nodes whose relative residual is within ``tol``, whether every
    tree with a usable node has one within ``tol``) for one (eta, lambda, alpha).

    The trees' arrays are concatenated (tree t has ``sizes[t]`` nodes, children indexed
    within the tree, -1 at leaves); ``steps`` the node weights of the identity and
    ``hess`` the hessian sums. A usable node is a split whose children are both leaves,
    with non-zero weights on all three and finite weights and hessians."""
    n_rows = 0
    n_fit = 0
    every_tree = True
    start = 0
    for t in range(sizes.shape[0]):
        rows_t = 0
        fit_t = 0
        for i in range(start, start + sizes[t]):
            if left[i] < 0:
                continue
            lc = left[i] + start
            rc = right[i] + start
            if left[lc] >= 0 or left[rc] >= 0:
                continue
            wp, vl, vr = steps[i], steps[lc], steps[rc]
            hp, hl, hr = hess[i], hess[lc], hess[rc]
            if wp == 0.0 or vl == 0.0 or vr == 0.0 or not np.isfinite(
                    wp + vl + vr + hp + hl + hr):
                continue
            C = wp * hp
            D = wp
            B = vl + vr
            A = vl * hl + vr * hr
            S = np.sign(wp) - np.sign(vl) - np.sign(vr)
            scale = np.abs(vl) * (hl + 1.0) + np.abs(vr) * (hr + 1.0)
            residual = (eta * (C + lam * D + alpha * S) - (A + lam * B)) / scale
            rows_t += 1
            if np.abs(residual) <= tol:
                fit_t += 1
        n_rows += rows_t
        n_fit += fit_t
        if rows_t > 0 and fit_t == 0:
            every_tree = False
        start += sizes[t]
    return n_rows, n_fit, every_tree

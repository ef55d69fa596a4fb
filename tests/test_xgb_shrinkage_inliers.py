"""xgb_shrinkage._initial_inliers solves its least-quantile-of-squares draws stacked; it
must keep exactly the rows that the plain draw-by-draw loop below keeps."""

import numpy as np
import pytest

from treeimp.parsers import xgb_shrinkage


def _reference_inliers(R, fit_alpha):
    """The least-quantile-of-squares start written as the obvious loop: one draw at a
    time, skip ill-conditioned draws, keep the first draw with the smallest quantile."""
    M, y = xgb_shrinkage._linear(R, fit_alpha)
    n, m = M.shape
    if n <= m:
        return None
    rng = np.random.default_rng(0)
    rows = xgb_shrinkage._LQS_ROWS
    sample = np.arange(n) if n <= rows else rng.choice(n, rows, replace=False)
    Ms, ys = M[sample], y[sample]
    q = max(m + 1, int(0.4 * len(sample)))
    best_score, best_x = np.inf, None
    for _ in range(xgb_shrinkage._LQS_DRAWS):
        idx = rng.choice(len(sample), m, replace=False)
        if np.linalg.cond(Ms[idx]) > 1e10:
            continue
        x = np.linalg.solve(Ms[idx], ys[idx])
        score = np.sort(np.abs(Ms @ x - ys))[q - 1]
        if score < best_score:
            best_score, best_x = score, x
    if best_x is None:
        return None
    return np.abs(M @ best_x - y) <= max(xgb_shrinkage._FIT_TOL, 3.0 * best_score)


def _identity_rows(rng, n, eta, lam, alpha, outliers, repeats):
    """Rows of the identity for random nodes with known (eta, lambda, alpha); a share of
    them made not to fit (clipped leaves) and some repeated (singular draws)."""
    hl, hr = rng.uniform(0.5, 50, n), rng.uniform(0.5, 50, n)
    gl, gr = rng.normal(0, 10, n), rng.normal(0, 10, n)

    def thresh(g):
        return np.sign(g) * np.maximum(np.abs(g) - alpha, 0.0)

    wp = -thresh(gl + gr) / (hl + hr + lam)
    vl = -eta * thresh(gl) / (hl + lam)
    vr = -eta * thresh(gr) / (hr + lam)
    bad = rng.random(n) < outliers
    vl[bad] = np.sign(vl[bad]) * 0.07  # clipped by max_delta_step
    ok = (wp != 0) & (vl != 0) & (vr != 0)
    take = np.flatnonzero(ok)
    take = np.concatenate([take, rng.choice(take, int(repeats * take.size))])
    args = (a[take].astype(np.float32).astype(np.float64)
            for a in (wp, vl, vr, hl + hr, hl, hr))
    return xgb_shrinkage._coefficients(*args, np.zeros(take.size))


@pytest.mark.parametrize("fit_alpha", [False, True])
@pytest.mark.parametrize("n", [5, 60, 700, 2600])
def test_stacked_draws_keep_the_rows_the_loop_keeps(n, fit_alpha):
    rng = np.random.default_rng(n + fit_alpha)
    for case in range(4):
        R = _identity_rows(rng, n, eta=rng.uniform(0.01, 0.5), lam=rng.uniform(0, 5),
                           alpha=rng.uniform(0, 2) * (case % 2), outliers=0.15 * case,
                           repeats=0.5 * (case == 3))
        want = _reference_inliers(R, fit_alpha)
        got = xgb_shrinkage._initial_inliers(R, fit_alpha)
        if want is None:
            assert got is None
            continue
        assert want.sum() >= 0.3 * R.shape[0]  # the reference found the fitting rows
        np.testing.assert_array_equal(got, want)


def test_all_draws_singular_gives_no_start():
    R = np.tile(_identity_rows(np.random.default_rng(1), 1, 0.1, 1.0, 0.0, 0.0, 0.0), (30, 1))
    assert _reference_inliers(R, False) is None
    assert xgb_shrinkage._initial_inliers(R, False) is None

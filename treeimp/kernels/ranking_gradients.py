"""Gradients and hessians of the learning-to-rank objectives, query by query.

A row's gradient depends on the margins of every row of its query, so these kernels take
whole queries (``bounds``: the first row of every query, and the end) and the margins of
their rows before every stage (``margins``: (n_rows, n_stages)), and fill g and h of every
row and stage. The formulas, and which library each parameter reproduces, are documented
in ``treeimp/model/ranking.py``, which builds the integer code and the float64 parameter
vector read here.
"""

import math

import numpy as np
from numba import njit, prange

# objective codes (model/ranking.py)
XGB_NDCG = 0
XGB_PAIRWISE = 1
XGB_MAP = 2
LGBM_LAMBDARANK = 3
QUERY_RMSE = 4
LGBM_XENDCG = 5
PAIR_LOGIT = 6
YETI_RANK = 7

# XGBoost: params = (mean pair method, pairs per sample / truncation, normalization,
# score normalization, exp gain)
# LightGBM: params = (sigmoid, norm, truncation level, table min input, table factor)
# CatBoost PairLogit: params = (max_pairs per query, 0 for all)
# CatBoost YetiRank: params = (decay, number of outer nodes); label_gain, table = the
# Gauss-Legendre nodes and weights, outer (on [0, 1]) then inner (on [0, 1/2])
_YETI_CONST = 0.15  # CatBoost's pair weight factor of YetiRank's classic mode
_EXP_MAX = 700.0
_EPS64 = 1e-16


@njit(cache=True, inline="always")
def _xgb_sigmoid(d):
    """XGBoost's float Sigmoid of the float32 score difference d."""
    x = min(-d, np.float32(88.7))
    denom = np.float32(math.exp(x)) + np.float32(1.0)
    return float(np.float32(np.float32(1.0) / denom))


@njit(cache=True)
def _xgb_delta(code, params, y, rank, a, b, inv_idcg, n_rel, acc, disc):
    """|change of the metric| when the rows at ranks a (higher label) and b swap."""
    if code == XGB_PAIRWISE:
        return 1.0
    ya = y[rank[a]]
    yb = y[rank[b]]
    if code == XGB_NDCG:
        if params[4] != 0.0:
            ga = float((1 << int(ya)) - 1)
            gb = float((1 << int(yb)) - 1)
        else:
            ga = float(np.float32(ya))
            gb = float(np.float32(yb))
        da = disc[a]
        db = disc[b]
        return abs((ga * da + gb * db - (gb * da + ga * db)) * inv_idcg)
    # XGB_MAP: the earlier rank first
    hi, lo, y_hi, y_lo = a, b, ya, yb
    if hi > lo:
        hi, lo, y_hi, y_lo = b, a, yb, ya
    r_h = hi + 1.0
    r_l = lo + 1.0
    total = n_rel[n_rel.shape[0] - 1]
    m = n_rel[lo]
    n = n_rel[hi]
    if y_hi < y_lo:
        d = (m / r_l - (n + 1.0) / r_h - (acc[lo - 1] - acc[hi])) / total
    else:
        d = (n / r_h - m / r_l + (acc[lo - 1] - acc[hi])) / total
    return abs(d)


@njit(cache=True)
def _xgb_pair(code, params, s, y, rank, i, j, weight, inv_idcg, n_rel, acc, disc, best_worst,
              g, h):
    """Add XGBoost's LambdaGrad of the pair at ranks i, j (times ``weight``) into g, h;
    return the pair's -2 lambda (for the normalisation)."""
    if y[rank[i]] == y[rank[j]]:
        return 0.0
    a, b = i, j
    if y[rank[a]] < y[rank[b]]:
        a, b = j, i
    ia = rank[a]
    ib = rank[b]
    d = np.float32(s[ia] - s[ib])
    dm = _xgb_delta(code, params, y, rank, a, b, inv_idcg, n_rel, acc, disc)
    if params[3] != 0.0 and best_worst:
        dm /= abs(float(d)) + 0.01
    sig = _xgb_sigmoid(d)
    lam = float(np.float32((sig - 1.0) * dm))
    hes = float(np.float32(max(sig * (1.0 - sig), _EPS64) * dm * 2.0))
    g[ia] += weight * lam
    h[ia] += weight * hes
    g[ib] -= weight * lam
    h[ib] += weight * hes
    return -2.0 * lam


@njit(cache=True)
def xgb_query(code, params, s, y, g, h):
    """g, h (zeroed here) of one query of an XGBoost LambdaMART objective at the float32
    scores s. The ``mean`` pair method samples its pairs at random: the expected
    gradient (each sample's draws spread evenly over the rows of another label)."""
    n = s.shape[0]
    g[:] = 0.0
    h[:] = 0.0
    if n == 0:
        return
    rank = np.argsort(-s, kind="mergesort")  # stable, descending, as XGBoost's ArgSort
    mean = params[0] != 0.0
    k = int(params[1])
    best_worst = s[rank[0]] != s[rank[n - 1]]
    inv_idcg = 0.0
    n_rel = np.zeros(n)
    acc = np.zeros(n)
    disc = np.empty(n)  # 1 / log2(2 + rank)
    for i in range(n):
        disc[i] = 1.0 / np.log2(i + 2.0)
    if code == XGB_NDCG:
        ys = np.sort(y)[::-1]
        top = n if mean else min(n, k)
        idcg = 0.0
        for i in range(top):
            gain = float((1 << int(ys[i])) - 1) if params[4] != 0.0 else float(ys[i])
            idcg += gain * disc[i]
        inv_idcg = 0.0 if idcg == 0.0 else 1.0 / idcg
    elif code == XGB_MAP:
        n_rel[0] = y[rank[0]]
        acc[0] = y[rank[0]]
        for i in range(1, n):
            n_rel[i] = n_rel[i - 1] + y[rank[i]]
            acc[i] = acc[i - 1] + y[rank[i]] / (i + 1.0)
    sum_lambda = 0.0
    if not mean:
        for i in range(min(n, k)):
            for j in range(i + 1, n):
                sum_lambda += _xgb_pair(code, params, s, y, rank, i, j, 1.0, inv_idcg, n_rel,
                                        acc, disc, best_worst, g, h)
        if params[2] != 0.0 and sum_lambda > 0.0:
            norm = np.log2(1.0 + sum_lambda) / sum_lambda
            for i in range(n):
                g[i] *= norm
                h[i] *= norm
        return
    # mean: row a draws k partners uniformly among the n_diff(a) rows of another label;
    # the pair (a, b) is drawn k / n_diff(a) + k / n_diff(b) times on average
    n_diff = np.zeros(n)
    for a in range(n):
        for b in range(n):
            if y[rank[a]] != y[rank[b]]:
                n_diff[a] += 1.0
    scale = 1.0 if params[2] != 0.0 else float(k)  # normalisation: divided by k
    for a in range(n):
        for b in range(a + 1, n):
            if y[rank[a]] != y[rank[b]]:
                weight = scale * (1.0 / n_diff[a] + 1.0 / n_diff[b])
                _xgb_pair(code, params, s, y, rank, a, b, weight, inv_idcg, n_rel, acc, disc,
                          best_worst, g, h)


@njit(cache=True)
def lgbm_query(params, label_gain, table, s, y, g, h):
    """g, h (zeroed here) of one query of LightGBM's lambdarank at the scores s, with
    LightGBM's sigmoid table (``table``) and float constants."""
    n = s.shape[0]
    g[:] = 0.0
    h[:] = 0.0
    if n == 0:
        return
    sigma = params[0]
    norm = params[1] != 0.0
    trunc = int(params[2])
    t_min = params[3]
    t_factor = params[4]
    disc = np.empty(n)  # 1 / log2(2 + rank)
    for i in range(n):
        disc[i] = 1.0 / np.log2(2.0 + i)
    # max DCG at the truncation level, from the label counts
    ys = np.sort(y)[::-1]
    max_dcg = 0.0
    for i in range(min(trunc, n)):
        max_dcg += label_gain[int(ys[i])] * disc[i]
    inv = 1.0 / max_dcg if max_dcg > 0.0 else 0.0
    rank = np.argsort(-s, kind="mergesort")
    best_worst = s[rank[0]] != s[rank[n - 1]]
    nb = table.shape[0]
    t_max = -t_min
    sum_l = 0.0
    for i in range(min(n - 1, trunc)):
        for j in range(i + 1, n):
            if y[rank[i]] == y[rank[j]]:
                continue
            hr, lr = i, j
            if y[rank[i]] < y[rank[j]]:
                hr, lr = j, i
            hi = rank[hr]
            lo = rank[lr]
            ds = s[hi] - s[lo]
            gap = label_gain[int(y[hi])] - label_gain[int(y[lo])]
            pd = abs(disc[hr] - disc[lr])
            delta = gap * pd * inv
            if norm and best_worst:
                delta /= float(np.float32(0.01)) + abs(ds)
            if ds <= t_min:
                p = table[0]
            elif ds >= t_max:
                p = table[nb - 1]
            else:
                p = table[int((ds - t_min) * t_factor)]
            ph = p * (1.0 - p)
            p *= -sigma * delta
            ph *= sigma * sigma * delta
            g[lo] -= p
            h[lo] += ph
            g[hi] += p
            h[hi] += ph
            sum_l -= 2.0 * p
    if norm and sum_l > 0.0:
        f = np.log2(1.0 + sum_l) / sum_l
        for i in range(n):
            g[i] *= f
            h[i] *= f


@njit(cache=True)
def query_rmse_query(s, y, w, g, h):
    """CatBoost's QueryRMSE on one query: g = -(y - s - c), h = 1, c the weighted mean of
    y - s over the query (0 when its weights sum to 0)."""
    sw = 0.0
    sr = 0.0
    last_w = w.shape[0] - 1
    for i in range(s.shape[0]):
        wi = w[min(i, last_w)]
        sw += wi
        sr += wi * (y[i] - s[i])
    c = sr / sw if sw != 0.0 else 0.0
    for i in range(s.shape[0]):
        g[i] = -(y[i] - s[i] - c)
        h[i] = 1.0


@njit(cache=True)
def pair_logit_query(params, s, y, g, h):
    """g, h (zeroed here) of one query of CatBoost's PairLogit at the scores s: every pair
    of rows of different labels, the higher label the winner; with p = 1 / (1 + exp(s_win -
    s_lose)) the winner gets g -= p, the loser g += p, both h += p (1 - p) (CatBoost's der1
    and der2, negated). ``params[0]`` > 0 (max_pairs) keeps that many of the query's pairs
    drawn at random: every pair is kept with probability min(1, max_pairs / n_pairs), by
    which the expected gradient scales."""
    n = s.shape[0]
    g[:] = 0.0
    h[:] = 0.0
    n_pairs = 0
    for i in range(n):
        for j in range(i + 1, n):
            if y[i] != y[j]:
                n_pairs += 1
    if n_pairs == 0:
        return
    keep = 1.0
    if params[0] > 0.0 and params[0] < n_pairs:
        keep = params[0] / n_pairs
    for i in range(n):
        for j in range(i + 1, n):
            if y[i] == y[j]:
                continue
            win, lose = (i, j) if y[i] > y[j] else (j, i)
            d = s[win] - s[lose]
            # p = sigmoid(-d), written so that exp never overflows
            if d >= 0.0:
                e = math.exp(-d)
                p = e / (1.0 + e)
            else:
                p = 1.0 / (1.0 + math.exp(d))
            g[win] -= keep * p
            g[lose] += keep * p
            ph = keep * p * (1.0 - p)
            h[win] += ph
            h[lose] += ph


@njit(cache=True, inline="always")
def _sigmoid(x):
    return 1.0 / (1.0 + math.exp(min(-x, _EXP_MAX)))


@njit(cache=True)
def yeti_adjacency(s, decay, xo, wo, xi, wi):
    """acc[a, b] := E[decay^(rows above a) 1{b right below a}] when every score is
    s + a standard logistic noise (the log of CatBoost's exp(s) u / (1 - u)):
    int f_a(z) int_{z' < z} f_b(z') prod_{i != a, b} (decay P(x_i > z) + P(x_i < z'))
    dz' dz (the rows above a each count decay, none lies between). Outer variable
    u = sigmoid(z - s_a) on (0, 1) (nodes xo, weights wo), inner v = sigmoid(z' - z) on
    (0, 1/2) (xi, wi), both Gauss-Legendre."""
    n = s.shape[0]
    acc = np.zeros((n, n))
    above = np.empty(n)
    fac = np.empty(n)
    fb = np.empty(n)
    for a in range(n):
        for k in range(xo.shape[0]):
            u = xo[k]
            z = s[a] + math.log(u / (1.0 - u))
            for i in range(n):
                above[i] = decay * _sigmoid(s[i] - z)
            for m in range(xi.shape[0]):
                v = xi[m]
                zp = z + math.log(v / (1.0 - v))
                full = 1.0
                for i in range(n):
                    below = _sigmoid(zp - s[i])
                    fac[i] = above[i] + below
                    fb[i] = below * (1.0 - below)
                    if i != a:
                        full *= fac[i]
                base = wo[k] * wi[m] / (v * (1.0 - v))
                for b in range(n):
                    if b != a and fac[b] > 0.0:
                        acc[a, b] += base * fb[b] * full / fac[b]
    return acc


@njit(cache=True)
def yeti_rank_query(params, nodes, weights, s, y, g, h):
    """g, h (zeroed here) of one query of CatBoost's YetiRank (classic weights, logistic
    noise) at scores s, its random pair weights replaced by their expectation: CatBoost
    sorts the noisy scores and gives the rows at positions j, j + 1 the pair weight
    0.15 decay^j |y_a - y_b| (the higher label the winner); the gradient is PairLogit's
    on those weights, linear in them, so this is its expectation."""
    n = s.shape[0]
    g[:] = 0.0
    h[:] = 0.0
    if n < 2:
        return
    n_out = int(params[1])
    acc = yeti_adjacency(s, params[0], nodes[:n_out], weights[:n_out], nodes[n_out:],
                         weights[n_out:])
    for i in range(n):
        for j in range(i + 1, n):
            if y[i] == y[j]:
                continue
            win, lose = (i, j) if y[i] > y[j] else (j, i)
            pw = _YETI_CONST * (y[win] - y[lose]) * (acc[i, j] + acc[j, i])
            p = _sigmoid(s[lose] - s[win])
            g[win] -= pw * p
            g[lose] += pw * p
            ph = pw * p * (1.0 - p)
            h[win] += ph
            h[lose] += ph


@njit(cache=True)
def xendcg_expected_shares(y, nodes, weights):
    """E[a_i], a_i = (2^y_i - u_i) / sum_j (2^y_j - u_j), u_j iid uniform on [0, 1):
    the expected targets of LightGBM's rank_xendcg. With c_j = 2^y_j, C = sum c_j and
    g(t) = (1 - e^-t) / t (the Laplace transform of a unit-width uniform, shifted),
    E[a_i] = (c_i - 1) A + B, A = int_0^inf e^(-t (C - n)) g(t)^n dt and
    B = (1 - (C - n) A) / n (the E[a_i] sum to 1). A by Gauss-Legendre (``nodes``,
    ``weights`` on [0, 1]) after t = T x / (1 - x), T = 1 / (C - n / 2) the scale of 1/S."""
    n = y.shape[0]
    c = np.empty(n)
    C = 0.0
    for i in range(n):
        c[i] = 2.0 ** y[i]
        C += c[i]
    T = 1.0 / (C - 0.5 * n)
    A = 0.0
    for k in range(nodes.shape[0]):
        x = nodes[k]
        t = T * x / (1.0 - x)
        gt = 1.0 - 0.5 * t + t * t / 6.0 if t < 1e-4 else -math.expm1(-t) / t
        A += weights[k] * T / ((1.0 - x) * (1.0 - x)) * math.exp(-t * (C - n)
                                                                 + n * math.log(gt))
    B = (1.0 - (C - n) * A) / n
    out = np.empty(n)
    for i in range(n):
        out[i] = (c[i] - 1.0) * A + B
    return out


@njit(cache=True)
def xendcg_query(s, a, g, h):
    """g, h of one query of LightGBM's rank_xendcg at scores s, its random targets
    replaced by their expectations ``a`` (``xendcg_expected_shares``): the gradient is
    affine in them, so this is its expectation."""
    n = s.shape[0]
    if n <= 1:
        g[:] = 0.0
        h[:] = 0.0
        return
    top = s[0]
    for i in range(n):
        top = max(top, s[i])
    rho = np.empty(n)
    total = 0.0
    for i in range(n):
        rho[i] = math.exp(s[i] - top)
        total += rho[i]
    for i in range(n):
        rho[i] /= total
    p = np.empty(n)
    sum1 = 0.0
    for i in range(n):
        term = -a[i] + rho[i]
        g[i] = term
        p[i] = term / (1.0 - rho[i])
        sum1 += p[i]
    sum2 = 0.0
    for i in range(n):
        term = rho[i] * (sum1 - p[i])
        g[i] += term
        p[i] = term / (1.0 - rho[i])
        sum2 += p[i]
    for i in range(n):
        g[i] += rho[i] * (sum2 - p[i])
        h[i] = rho[i] * (1.0 - rho[i])


@njit(cache=True, parallel=True)
def ranking_grad_hess(code, params, label_gain, table, bounds, margins, y, w, g, h):
    """g, h (n_rows, n_stages) := the gradient and hessian of every row at its margin
    before every stage (``margins``, (n_rows, n_stages)), query by query (the rows
    bounds[q]:bounds[q + 1]); per row, not multiplied by its weight (the caller does
    that). ``w``: one weight per row, or one for all (read by QueryRMSE's query mean).
    ``label_gain``, ``table``: LightGBM lambdarank's label gains and sigmoid table;
    rank_xendcg: the Gauss-Legendre nodes and weights of ``xendcg_expected_shares``."""
    n_q = bounds.shape[0] - 1
    n_stages = margins.shape[1]
    for q in prange(n_q):
        a = bounds[q]
        b = bounds[q + 1]
        m = b - a
        gq = np.empty(m)
        hq = np.empty(m)
        yq = y[a:b].copy()
        wq = w[a:b].copy() if w.shape[0] > 1 else w.copy()
        shares = (xendcg_expected_shares(yq, label_gain, table) if code == LGBM_XENDCG
                  else np.zeros(0))
        for st in range(n_stages):
            if code == LGBM_XENDCG:
                xendcg_query(margins[a:b, st].copy(), shares, gq, hq)
            elif code == QUERY_RMSE:
                query_rmse_query(margins[a:b, st].copy(), yq, wq, gq, hq)
            elif code == PAIR_LOGIT:
                pair_logit_query(params, margins[a:b, st].copy(), yq, gq, hq)
            elif code == YETI_RANK:
                yeti_rank_query(params, label_gain, table, margins[a:b, st].copy(), yq,
                                gq, hq)
            elif code == LGBM_LAMBDARANK:
                lgbm_query(params, label_gain, table, margins[a:b, st].copy(), yq, gq, hq)
            else:
                s32 = margins[a:b, st].astype(np.float32)
                xgb_query(code, params, s32, yq, gq, hq)
            for i in range(m):
                g[a + i, st] = gq[i]
                h[a + i, st] = hq[i]

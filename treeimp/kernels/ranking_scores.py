"""Per-query ranking metrics of permutation importance: NDCG as scikit-learn's
``ndcg_score`` (linear gain, 1 / log2(2 + rank) discount, tied scores share the average
gain of their positions) and average precision as scikit-learn's
``average_precision_score`` (tied scores form one threshold)."""


import numpy as np
from numba import njit, prange


@njit(cache=True)
def _dcg(order, s, y, k, tie_average):
    """DCG@k (k <= 0: all positions) of the rows in ``order`` (sorted by s, descending);
    with ``tie_average`` every run of equal scores gets its mean gain at each of its
    positions."""
    n = order.shape[0]
    top = n if k <= 0 else min(k, n)
    total = 0.0
    a = 0
    while a < top:
        b = a + 1
        if tie_average:
            while b < n and s[order[b]] == s[order[a]]:
                b += 1
        gain = 0.0
        for i in range(a, b):
            gain += y[order[i]]
        gain /= b - a
        for i in range(a, min(b, top)):
            total += gain / np.log2(i + 2.0)
        a = b
    return total


@njit(cache=True, parallel=True)
def ndcg_per_query(s, y, bounds, k, out):
    """out[q] := NDCG@k of query q (rows bounds[q]:bounds[q + 1]) at scores s; 0 when
    its ideal DCG is 0 (no relevant row), as scikit-learn."""
    for q in prange(bounds.shape[0] - 1):
        a = bounds[q]
        b = bounds[q + 1]
        sq = s[a:b].copy()
        yq = y[a:b].copy()
        ideal = _dcg(np.argsort(-yq, kind="mergesort"), yq, yq, k, False)
        out[q] = 0.0 if ideal == 0.0 else _dcg(np.argsort(-sq, kind="mergesort"), sq, yq,
                                               k, True) / ideal


@njit(cache=True, parallel=True)
def average_precision_per_query(s, y, bounds, out):
    """out[q] := average precision of query q (relevant: y > 0) at scores s, each run of
    equal scores one threshold; NaN for a query without relevant rows."""
    for q in prange(bounds.shape[0] - 1):
        a = bounds[q]
        b = bounds[q + 1]
        sq = s[a:b].copy()
        n_pos = 0
        for i in range(a, b):
            n_pos += y[i] > 0
        if n_pos == 0:
            out[q] = np.nan
            continue
        order = np.argsort(-sq, kind="mergesort")
        m = b - a
        tp = 0
        seen = 0
        ap = 0.0
        i = 0
        while i < m:
            j = i + 1
            while j < m and sq[order[j]] == sq[order[i]]:
                j += 1
            hits = 0
            for r in range(i, j):
                hits += y[a + order[r]] > 0
            tp += hits
            seen += j - i
            ap += hits / n_pos * (tp / seen)
            i = j
        out[q] = ap

"""Ranking scorers of permutation importance for learning-to-rank models: the mean over
queries of a per-query metric (kernels/ranking_scores.py).

``"ndcg"`` / ``"ndcg@k"``: scikit-learn's ``ndcg_score`` of each query (linear gain, tied
scores averaged; 0 for a query without relevant rows), averaged over the queries;
``"map"``: scikit-learn's ``average_precision_score`` of each query (relevant: label > 0),
averaged over the queries that have a relevant row. Weighted: each query weighs its
first row's weight (per-row weights; XGBoost's one weight per query is repeated over the
query's rows before, ``model.ranking.query_sample_weight``).
"""

from __future__ import annotations

import re

import numpy as np

from ..kernels.ranking_scores import average_precision_per_query, ndcg_per_query

RANKING_SCORINGS = ("ndcg", "ndcg@k", "map")
DEFAULT_RANKING_SCORING = "ndcg"


def bind_ranking_scorer(scoring, y, sample_weight, bounds, margin):
    """(score(margin) -> float, score of ``margin``) for a ranking model's rows in the
    queries ``bounds``."""
    scoring = DEFAULT_RANKING_SCORING if scoring is None else scoring
    k = _parse(scoring)
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).reshape(-1))
    n_q = bounds.shape[0] - 1
    w = (np.ones(n_q) if sample_weight is None
         else np.asarray(sample_weight, dtype=np.float64)[bounds[:-1]])
    out = np.empty(n_q)

    if scoring == "map":
        keep = np.array([np.any(y[a:b] > 0) for a, b in zip(bounds[:-1], bounds[1:])],
                        dtype=bool)
        if not keep.any():
            raise ValueError("scoring='map' needs a query with a relevant row (label > 0); "
                             "none has one")

        def score(m):
            average_precision_per_query(_scores(m), y, bounds, out)
            return float(np.average(out[keep], weights=w[keep]))
    else:
        def score(m):
            ndcg_per_query(_scores(m), y, bounds, k, out)
            return float(np.average(out, weights=w))
    return score, score(margin)


def check_ranking_scoring(scoring):
    """A ranking scoring name, checked (None: the default)."""
    _parse(DEFAULT_RANKING_SCORING if scoring is None else scoring)


def _parse(scoring):
    """k of "ndcg@k" (0: all positions; "map" too)."""
    if isinstance(scoring, str):
        if scoring in ("ndcg", "map"):
            return 0
        match = re.fullmatch(r"ndcg@([0-9]+)", scoring)
        if match and int(match.group(1)) >= 1:
            return int(match.group(1))
    raise ValueError(f"scoring for a learning-to-rank model must be None (ndcg), 'ndcg', "
                     f"'ndcg@k' (k >= 1) or 'map', got {scoring!r}")


def _scores(margin):
    return np.ascontiguousarray(np.asarray(margin, dtype=np.float64)[:, 0])

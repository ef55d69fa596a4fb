"""Learning-to-rank objectives: their canonical names, parameters, the checks of query
ids and relevance labels, and the kernel codes of kernels/ranking_gradients.py.

A ranking objective's gradient of a row depends on the margins of every row of its query.
treeimp computes them as the library does on its training rows, here on the held-out
queries (g: the gradient of the loss to minimise, h >= 0):

XGBoost ``rank:ndcg``, ``rank:pairwise``, ``rank:map`` (canonical ``rank_ndcg``,
``rank_pairwise``, ``rank_map``; XGBoost >= 2.0's LambdaMART, parameters from the model's
``lambdarank_param``)
    Rows sorted by their float32 score, descending (stable). Pairs: with
    ``lambdarank_pair_method="topk"`` every pair (i, j) of ranks i < min(n, k), j > i of
    different labels (k = ``lambdarank_num_pair_per_sample``, default 32); with "mean"
    XGBoost draws k partners of another label per row at random: treeimp uses the
    expected gradient, each pair weighted by k / n_diff(i) + k / n_diff(j) (n_diff: the
    rows of another label), which the normalisation then divides by k. A pair's
    ``|delta|``: 1 (pairwise), the change of NDCG when the two swap (gain 2^y - 1 with
    ``ndcg_exp_gain``, else y; discount 1 / log2(2 + rank); over the ideal DCG at k for
    topk, at the whole query for mean) or of average precision (map, binary labels);
    divided by |s_i - s_j| + 0.01 (``lambdarank_score_normalization``) unless all scores
    of the query are equal. With sigma = sigmoid(s_hi - s_lo) (float32), the higher
    label's row gets lambda = (sigma - 1) |delta| and the other -lambda, both the hessian
    2 max(sigma (1 - sigma), 1e-16) |delta|. ``lambdarank_normalization``: topk scales
    the query by log2(1 + L) / L, L = the sum of -2 lambda over its pairs (> 0).
    Position debiasing (``lambdarank_unbiased``, off by default) updates its factors
    every round from all training rows and is refused. XGBoost weighs whole queries:
    ``sample_weight`` holds one weight per query (or one per row, the same within each
    query; ``query_sample_weight``), and treeimp multiplies each row's terms by its
    query's weight. XGBoost also scales the query weights to mean 1 (n_queries / their
    sum) before it multiplies; that common factor cancels in its leaf values
    -G / H with ``reg_lambda=0`` but not with lambda > 0, and treeimp leaves it out.
LightGBM ``lambdarank`` (canonical ``lambdarank``)
    Rows sorted by score (stable); every pair of ranks i < min(n - 1,
    ``lambdarank_truncation_level``), j > i of different labels; |delta NDCG| from
    ``label_gain`` (default 2^y - 1) and |1/log2(2 + i) - 1/log2(2 + j)| over the max
    DCG at the truncation level, divided by 0.01 + |s_hi - s_lo| (``lambdarank_norm``,
    unless all scores are equal); p = 1 / (1 + exp(sigmoid (s_hi - s_lo))) read from
    LightGBM's table of 2^20 values on [-50 / sigmoid / 2, 50 / sigmoid / 2]; the higher
    label's row gets -sigmoid p |delta|, the other +, both sigmoid^2 p (1 - p) |delta|;
    ``lambdarank_norm``: times log2(1 + L) / L. Position-bias factors (training data
    with ``position``) are not stored in the model and are not used.

LightGBM ``rank_xendcg`` (canonical ``rank_xendcg``)
    rho = softmax of the query's scores; LightGBM draws targets phi_i = 2^y_i - u_i with
    u_i uniform on [0, 1) per row and round (``objective_seed``) and takes
    a_i = phi_i / sum_j phi_j; the gradient (a_i against rho_i with its two correction
    terms) is affine in a, so treeimp uses its expectation exactly: a replaced by E[a_i]
    = (c_i - 1) A + B, c = 2^y, A = int_0^inf exp(-t (sum c - n)) ((1 - e^-t) / t)^n dt
    (160-point Gauss-Legendre), B = (1 - (sum c - n) A) / n; h = rho (1 - rho).
CatBoost ``QueryRMSE`` (canonical ``query_rmse``)
    g = -(y - s - c), h = 1, c the weighted mean of y - s over the row's query (CatBoost's
    der1 and der2, negated); per-row weights.

CatBoost ``PairLogit`` and ``PairLogitPairwise`` (canonical ``pair_logit``)
    Every pair of rows of a query with different labels (CatBoost generates them so when
    the data has no explicit pairs), the higher label the winner, weighted by the
    query's weight (its first row's); p = 1 / (1 + exp(s_win - s_lose)): the winner
    gets g -= p, the loser g += p, both h += p (1 - p) (CatBoost's der1 and der2,
    negated). ``max_pairs`` keeps a random subset of each query's pairs (drawn once):
    the expected gradient, every pair kept with probability min(1, max_pairs / pairs).
    CatBoost's leaves: Newton -G / (H + l2 mean w); Gradient -G / (P + l2 mean w), P
    the sum of the leaf rows' pair weights (not their count); PairLogitPairwise a linear
    system of the pair weights between leaves; then every tree shifted to mean 0 over
    the training rows (tests/test_catboost_pairwise.py).

CatBoost ``YetiRank`` and ``YetiRankPairwise`` (canonical ``yeti_rank``; mode Classic,
noise Gumbel, the defaults)
    Every round CatBoost sorts each query by exp(s) u / (1 - u), u uniform (s plus a
    standard logistic noise), ten times, and gives the rows at positions j, j + 1 the
    pair weight 0.15 decay^j |y_a - y_b| (the higher label the winner; averaged over the
    permutations, times the query weight); the derivatives are PairLogit's on those
    weights, linear in them. treeimp uses the expected weights: for rows a, b,
    E[decay^(rows above a) 1{b right below a}] = int f_a(z) int_{z' < z} f_b(z')
    prod_{i != a, b} (decay P(x_i > z) + P(x_i < z')) dz' dz (the rows above a count
    decay each, none lies between), by Gauss-Legendre in u = sigmoid(z - s_a) and
    v = sigmoid(z' - z) (32 x 32 points; relative error of the weights 1e-4 to 6e-4 for
    scores of standard deviation 0.5 to 5 within a query, 1.4% at 10). Cost 2 n^2 x 32^2
    per query of n rows and round. Leaves as PairLogit's (YetiRank: Newton by default;
    YetiRankPairwise: the pairwise system on the drawn weights).

Not supported (a ValueError names them, ``CATBOOST_REFUSED``): YetiRank with another
mode or noise, and CatBoost's other ranking losses; they parse, predict and take queries for
permutation importance. XGBoost's position debiasing; LightGBM's position-bias factors.
"""

from __future__ import annotations

import numpy as np

from ..inputs.targets import check_sample_weight
from ..kernels.ranking_gradients import (
    LGBM_LAMBDARANK,
    LGBM_XENDCG,
    PAIR_LOGIT,
    QUERY_RMSE,
    XGB_MAP,
    XGB_NDCG,
    XGB_PAIRWISE,
    YETI_RANK,
)

# canonical name -> kernel code
_CODES = {"rank_ndcg": XGB_NDCG, "rank_pairwise": XGB_PAIRWISE, "rank_map": XGB_MAP,
          "lambdarank": LGBM_LAMBDARANK, "query_rmse": QUERY_RMSE,
          "rank_xendcg": LGBM_XENDCG, "pair_logit": PAIR_LOGIT,
          "yeti_rank": YETI_RANK}
RANKING = tuple(_CODES)
# XGBoost's rankers: one weight per query (query_sample_weight)
XGB_RANKING = ("rank_ndcg", "rank_pairwise", "rank_map")
# CatBoost's ranking losses without a treeimp gradient (parsed as "catboost:<name>"): they
# take queries (prediction, permutation importance), held-out node statistics refuse them
CATBOOST_REFUSED = {
    "catboost:QuerySoftMax": "its gradient is not implemented in treeimp",
    "catboost:QueryCrossEntropy": "its gradient is not implemented in treeimp",
    "catboost:LambdaMart": "its gradient is not implemented in treeimp",
    "catboost:StochasticFilter": "its gradient is random and not implemented in treeimp",
    "catboost:StochasticRank": "its gradient is random and not implemented in treeimp",
    "catboost:GroupQuantile": "its gradient is not implemented in treeimp",
}
# XGBoost's lambdarank_num_pair_per_sample when not set, and its defaults then
XGB_NOT_SET = 4294967295
XGB_DEFAULT_K = {"topk": 32, "mean": 1}
XGB_MAX_LABEL = 31  # 2^y - 1 in 32 bits
# LightGBM's sigmoid table (rank_objective.hpp)
LGBM_SIGMOID_BINS = 1024 * 1024
LGBM_SIGMOID_MIN = -50.0
# Gauss-Legendre points of rank_xendcg's expected targets (kernels/ranking_gradients.py)
XENDCG_NODES = 160
# Gauss-Legendre points of YetiRank's expected pair weights (outer, inner)
YETI_NODES = 32


def is_ranking(objective) -> bool:
    """Whether ``objective`` (an Objective) is a learning-to-rank objective."""
    return getattr(objective, "name", None) in _CODES


def takes_queries(objective) -> bool:
    """Whether the model's rows come in queries: a learning-to-rank objective, or one of
    CatBoost's ranking losses whose gradient treeimp does not compute (``CATBOOST_REFUSED``:
    prediction and permutation importance only)."""
    return is_ranking(objective) or getattr(objective, "name", None) in CATBOOST_REFUSED


def ranking_spec(objective):
    """(code, params, label_gain, table) of a ranking objective for
    ``kernels.ranking_gradients.ranking_grad_hess``."""
    p = objective.params
    code = _CODES[objective.name]
    if code == QUERY_RMSE:
        return code, np.zeros(1), np.zeros(1), np.zeros(1)
    if code == PAIR_LOGIT:
        return code, np.array([float(p.get("max_pairs", 0))]), np.zeros(1), np.zeros(1)
    if code == YETI_RANK:
        if p["mode"] != "Classic" or p["noise"] != "Gumbel":
            raise ValueError(f"CatBoost {objective.source} is not supported: treeimp "
                             "computes YetiRank's expected pair weights for mode=Classic "
                             f"and noise=Gumbel (the defaults), got mode={p['mode']} and "
                             f"noise={p['noise']}")
        x, wts = np.polynomial.legendre.leggauss(YETI_NODES)
        nodes = np.concatenate([(x + 1.0) / 2.0, (x + 1.0) / 4.0])
        weights = np.concatenate([wts / 2.0, wts / 4.0])
        return code, np.array([float(p["decay"]), float(YETI_NODES)]), nodes, weights
    if code == LGBM_XENDCG:
        x, wts = np.polynomial.legendre.leggauss(XENDCG_NODES)
        return code, np.zeros(1), (x + 1.0) / 2.0, wts / 2.0
    if code == LGBM_LAMBDARANK:
        sigma = float(p["sigmoid"])
        t_min = LGBM_SIGMOID_MIN / sigma / 2.0
        factor = LGBM_SIGMOID_BINS / (-t_min - t_min)
        score = np.arange(LGBM_SIGMOID_BINS) / factor + t_min
        table = 1.0 / (1.0 + np.exp(score * sigma))
        params = np.array([sigma, float(p["norm"]), float(p["truncation_level"]), t_min,
                           factor])
        return code, params, np.asarray(p["label_gain"], dtype=np.float64), table
    params = np.array([float(p["pair_method"] == "mean"), float(p["num_pair"]),
                       float(p["normalization"]), float(p["score_normalization"]),
                       float(p["exp_gain"])])
    return code, params, np.zeros(1), np.zeros(1)


def xgboost_ranking_params(lp, name):
    """The Objective params of XGBoost's ``lambdarank_param`` (strings, as saved)."""
    def flag(key, default):
        value = str(lp.get(key, default)).strip().lower()
        if value not in ("0", "1", "true", "false"):
            raise ValueError(f"XGBoost {name} lambdarank_param {key}={value!r} is not a flag")
        return value in ("1", "true")

    if flag("lambdarank_unbiased", "0"):
        raise ValueError(f"XGBoost {name} with lambdarank_unbiased=True is not supported: its "
                         "position-bias factors are updated every round from all training "
                         "rows, and the model keeps only the last ones")
    method = str(lp.get("lambdarank_pair_method", "topk"))
    if method not in XGB_DEFAULT_K:
        raise ValueError(f"XGBoost {name} lambdarank_pair_method {method!r} is not one of "
                         f"{list(XGB_DEFAULT_K)}")
    try:
        k = int(lp.get("lambdarank_num_pair_per_sample", XGB_NOT_SET))
    except (TypeError, ValueError):
        raise ValueError(f"XGBoost {name} lambdarank_num_pair_per_sample "
                         f"{lp.get('lambdarank_num_pair_per_sample')!r} is not an integer") \
            from None
    if k == XGB_NOT_SET:
        k = XGB_DEFAULT_K[method]
    if not 1 <= k < XGB_NOT_SET:
        raise ValueError(f"XGBoost {name} lambdarank_num_pair_per_sample {k} must be >= 1")
    return {"pair_method": method, "num_pair": k,
            "normalization": flag("lambdarank_normalization", "1"),
            "score_normalization": flag("lambdarank_score_normalization", "1"),
            "exp_gain": flag("ndcg_exp_gain", "1")}


def lightgbm_ranking_params(sigmoid, norm, truncation_level, label_gain):
    """The Objective params of LightGBM's lambdarank (label_gain: () for the default
    2^i - 1, i < 31)."""
    if not sigmoid > 0:
        raise ValueError(f"LightGBM lambdarank sigmoid {sigmoid} must be > 0")
    if truncation_level < 1 or truncation_level != int(truncation_level):
        raise ValueError(f"LightGBM lambdarank_truncation_level {truncation_level} must be "
                         "a positive integer")
    gain = tuple(float(g) for g in label_gain) or tuple(float((1 << i) - 1)
                                                        for i in range(31))
    return {"sigmoid": float(sigmoid), "norm": bool(norm),
            "truncation_level": int(truncation_level), "label_gain": gain}


def query_bounds(n_rows, qid=None, group=None):
    """(n_queries + 1,) int64: the first row of every query and n_rows, from per-row
    query ids ``qid`` (XGBoost's; every query's rows contiguous) or query sizes
    ``group`` (LightGBM's; in row order). Exactly one of the two."""
    if (qid is None) == (group is None):
        raise ValueError("a ranking model needs the queries of the rows: pass exactly one "
                         "of qid (a query id per row) or group (the query sizes, in row "
                         f"order); got {'both' if qid is not None else 'neither'}")
    if qid is not None:
        q = np.asarray(qid)
        if q.ndim != 1 or q.shape[0] != n_rows:
            raise ValueError(f"qid must have one query id per row ({n_rows}), got shape "
                             f"{q.shape}")
        if n_rows == 0:
            return np.zeros(1, np.int64)
        if q.dtype.kind == "f" and not np.all(np.isfinite(q)):
            raise ValueError("qid has NaN or infinite values")
        change = np.flatnonzero(q[1:] != q[:-1]) + 1
        starts = np.concatenate([[0], change])
        if np.unique(q[starts]).shape[0] != starts.shape[0]:
            seen = {}
            for s in starts:
                if q[s] in seen:
                    raise ValueError(f"qid must keep the rows of each query together (as "
                                     f"XGBoost requires): query {q[s].item()!r} has rows at "
                                     f"{seen[q[s]]} and again from row {s}; sort the rows "
                                     "by qid (stable) first")
                seen[q[s]] = s
        return np.concatenate([starts, [n_rows]]).astype(np.int64)
    g = np.asarray(group)
    if g.ndim != 1:
        raise ValueError(f"group must be a 1-D array of query sizes, got shape {g.shape}")
    if g.size and (g.dtype.kind not in "iu" and not (g.dtype.kind == "f"
                                                     and np.all(g == np.round(g)))):
        raise ValueError(f"group must hold integer query sizes, got dtype {g.dtype}")
    g = g.astype(np.int64)
    if np.any(g < 1):
        bad = int(np.flatnonzero(g < 1)[0])
        raise ValueError(f"group sizes must be >= 1: query {bad} has size {int(g[bad])}")
    if int(g.sum()) != n_rows:
        raise ValueError(f"group sizes sum to {int(g.sum())} rows but there are {n_rows} "
                         "rows")
    return np.concatenate([[0], np.cumsum(g)]).astype(np.int64)


def check_query_input(objective, n_rows, qid, group):
    """The query bounds of a ranking model's rows (None for other models); a ranking
    model without queries, or queries for another model, are refused."""
    if not takes_queries(objective):
        if qid is not None or group is not None:
            raise ValueError(f"qid / group are for learning-to-rank models; this model's "
                             f"objective is {getattr(objective, 'name', None)!r}")
        return None
    return query_bounds(n_rows, qid, group)


def check_ranking_labels(objective, y):
    """Float64 relevance labels checked for the objective: integers in [0, 31]
    (XGBoost's NDCG with exp gain), 0 / 1 (map), integers below len(label_gain)
    (LightGBM), finite (pairwise)."""
    y = np.asarray(y, dtype=np.float64)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"a ranking model needs one relevance label per row, got shape "
                         f"{y.shape}")
    if not np.all(np.isfinite(y)):
        raise ValueError("relevance labels have NaN or infinite values")
    name, p = objective.name, objective.params
    integer = np.all(y == np.round(y))
    if name == "rank_map" and not np.all((y == 0) | (y == 1)):
        raise ValueError(f"XGBoost rank:map needs binary relevance labels (0 or 1), got "
                         f"values in [{y.min()}, {y.max()}]")
    if name == "rank_ndcg" and p["exp_gain"] and not (integer and y.min(initial=0) >= 0
                                                       and y.max(initial=0) <= XGB_MAX_LABEL):
        raise ValueError(f"XGBoost rank:ndcg with ndcg_exp_gain needs integer labels in "
                         f"[0, {XGB_MAX_LABEL}], got values in [{y.min()}, {y.max()}]")
    if name == "rank_xendcg" and not (integer and y.min(initial=0) >= 0
                                      and y.max(initial=0) <= XGB_MAX_LABEL):
        raise ValueError(f"LightGBM rank_xendcg needs integer labels in [0, {XGB_MAX_LABEL}], "
                         f"got values in [{y.min()}, {y.max()}]")
    if name == "lambdarank":
        n_gain = len(p["label_gain"])
        if not (integer and y.min(initial=0) >= 0 and y.max(initial=0) < n_gain):
            raise ValueError(f"LightGBM lambdarank needs integer labels in [0, {n_gain - 1}] "
                             f"(label_gain has {n_gain} values), got values in "
                             f"[{y.min()}, {y.max()}]")
    return np.ascontiguousarray(y)


def query_sample_weight(objective, sample_weight, bounds):
    """The per-row weights of a ranker's rows in the queries ``bounds`` (None: no weights
    or no queries, returned as given).

    XGBoost's rankers weigh whole queries, one weight per query (XGBoost refuses one
    weight per row): ``sample_weight`` of n_queries values, in the order of the queries,
    is repeated over each query's rows; one weight per row is also taken, and must then
    be the same on every row of its query. When every query has one row the two readings
    agree. Other rankers' weights are per row (LightGBM's, CatBoost's) and pass as given.
    """
    if (sample_weight is None or bounds is None
            or getattr(objective, "name", None) not in XGB_RANKING):
        return sample_weight
    w = np.asarray(sample_weight, dtype=np.float64)
    n_rows, n_queries = int(bounds[-1]), bounds.shape[0] - 1
    if w.ndim == 1 and w.shape[0] == n_queries:
        w = np.repeat(w, np.diff(bounds))
    elif w.ndim != 1 or w.shape[0] != n_rows:
        raise ValueError(f"XGBoost {objective.source or objective.name} weighs whole "
                         f"queries: sample_weight needs one weight per query ({n_queries}) "
                         f"or one per row ({n_rows}), got shape {w.shape}")
    w = check_sample_weight(w, n_rows)
    check_query_weights(objective, w, bounds)
    return w


def check_query_weights(objective, w, bounds):
    """XGBoost's rankers, and CatBoost's PairLogit and YetiRank, weigh a whole query (a
    pair by its query's weight, the weight of the query's first row): treeimp multiplies
    each row's terms by its own weight, which is the same only when every row carries
    its query's weight. Other weights are refused."""
    name = getattr(objective, "name", None)
    if name not in ("pair_logit", "yeti_rank") + XGB_RANKING:
        return
    w = np.asarray(w, dtype=np.float64)
    if w.ndim != 1 or w.shape[0] <= 1 or bounds.shape[0] < 2:
        return
    first = np.repeat(w[bounds[:-1]], np.diff(bounds))
    if not np.array_equal(first, w):
        row = int(np.flatnonzero(first != w)[0])
        q = int(np.searchsorted(bounds, row, side="right")) - 1
        library = "XGBoost" if name in XGB_RANKING else "CatBoost"
        how = ("pass one weight per query, or give every row its query's weight"
               if name in XGB_RANKING else "give every row its query's weight")
        raise ValueError(f"{library} {objective.source or objective.name} weighs whole "
                         f"queries (a pair by its query's weight): {how}; query {q} has "
                         f"weight {w[bounds[q]]} on its first row and {w[row]} on row "
                         f"{row}")


def query_blocks(block, bounds):
    """Every row's statistic block := its query's first row's block, so that a query's
    rows (whose gradients depend on one another) fall into one block."""
    sizes = np.diff(bounds)
    return np.repeat(np.asarray(block)[bounds[:-1]], sizes).astype(np.asarray(block).dtype)

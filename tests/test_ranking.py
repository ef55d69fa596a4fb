"""Learning-to-rank models: XGBoost rank:ndcg / rank:pairwise / rank:map and LightGBM
lambdarank.

The held-out gradients treeimp computes query by query are checked against the library's
own: a boosted tree's leaf value is -eta sum g / (sum h + lambda) over the training rows
that reach it, at their margins before its round (reg_lambda = 0, min_child_weight = 0),
so treeimp's g and h on the training rows, summed per leaf of the last tree, must give
back the library's leaf values (after several rounds, so that the rows are sorted by
unequal scores).
"""

import numpy as np
import pytest

import treeimp
from treeimp.inputs.rows import RowSource
from treeimp.model.ranking import query_bounds
from treeimp.stats.ranking import ranking_gradients

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")

ETA = 0.5


def _queries(n_queries, seed, n_features=4):
    """Rows in queries of 3 to 24 rows; label 0..4 driven by feature 0."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 25, size=n_queries)
    n = int(sizes.sum())
    X = rng.normal(size=(n, n_features))
    y = np.clip(np.round(X[:, 0] + rng.normal(size=n)) + 2, 0, 4).astype(int)
    return X, y, sizes


def _leaf_identity_error(model, X, y, sizes):
    """Largest relative gap between the last tree's leaf values and -eta G / H of
    treeimp's gradients summed over the training rows of each leaf."""
    ens = treeimp.parse(model)
    M, G, H = ranking_gradients(ens, RowSource(X, ens), y,
                                query_bounds(len(y), group=sizes))
    leaves = ens.apply(X)
    t, st = ens.n_trees - 1, G.shape[1] - 1
    worst = 0.0
    for leaf in np.unique(leaves[:, t]):
        sel = leaves[:, t] == leaf
        value = ens.value[ens.tree_offsets[t] + leaf, 0] * ens.tree_scale[t]
        ours = -ETA * G[sel, st].sum() / H[sel, st].sum()
        worst = max(worst, abs(value - ours) / max(abs(value), 1e-6))
    # the margins treeimp reached are the library's (final column: after every tree)
    np.testing.assert_allclose(M[:, -1], ens.predict_raw(X)[:, 0], rtol=0, atol=1e-12)
    return worst


XGB_CASES = [
    ("rank:ndcg", {}),
    ("rank:pairwise", {}),
    ("rank:map", {}),
    ("rank:ndcg", {"lambdarank_num_pair_per_sample": 5}),
    ("rank:ndcg", {"ndcg_exp_gain": False, "lambdarank_score_normalization": False}),
    ("rank:pairwise", {"lambdarank_normalization": False}),
]


@pytest.mark.parametrize("objective, extra", XGB_CASES)
def test_xgboost_gradients_give_the_leaf_values(objective, extra):
    X, y, sizes = _queries(30, 1)
    if objective == "rank:map":
        y = (y > 2).astype(int)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    model = xgb.XGBRanker(n_estimators=3, objective=objective, max_depth=2,
                          learning_rate=ETA, reg_lambda=0, min_child_weight=0, n_jobs=1,
                          **extra).fit(X, y, qid=qid)
    ens = treeimp.parse(model)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], model.predict(X, output_margin=True),
                               rtol=0, atol=1e-5)
    # XGBoost keeps its scores and gradients in float32
    assert _leaf_identity_error(model, X, y, sizes) < 1e-5


@pytest.mark.parametrize("extra", [{}, {"lambdarank_truncation_level": 5},
                                   {"lambdarank_norm": False}, {"sigmoid": 2.0},
                                   {"label_gain": [0, 1, 3, 4, 10]}])
def test_lightgbm_gradients_give_the_leaf_values(extra):
    X, y, sizes = _queries(30, 2)
    model = lgb.LGBMRanker(n_estimators=3, learning_rate=ETA, num_leaves=4, reg_lambda=0,
                           min_child_samples=1, min_child_weight=0, verbose=-1, n_jobs=1,
                           **extra).fit(X, y, group=sizes)
    ens = treeimp.parse(model)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], model.predict(X, raw_score=True),
                               rtol=0, atol=1e-12)
    # LightGBM adds the pairs' lambdas in float32
    assert _leaf_identity_error(model, X, y, sizes) < 1e-4


def test_xgboost_mean_pairs_use_the_expected_gradient():
    """``lambdarank_pair_method="mean"`` samples pairs at random: treeimp uses the
    expected gradient under XGBoost's draws (each row draws k partners uniformly among
    the rows of another label). Checked twice: against a Monte Carlo run of that
    sampler (written out here), and against the library, with every query repeated 200
    times so that its leaf values (-eta G / H of a one-split tree) average many draws.
    XGBoost seeds a generator per query with (round seed + query number), so the draws
    of neighbouring queries overlap and the library's average keeps a few percent of
    bias: that comparison is loose."""
    X, y, sizes = _queries(8, 3)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    kw = dict(n_estimators=1, objective="rank:ndcg", lambdarank_pair_method="mean",
              lambdarank_num_pair_per_sample=2, max_depth=1, learning_rate=ETA,
              reg_lambda=0, min_child_weight=0, n_jobs=1)
    Xb = (X[:, :1] > 0).astype(float)
    ens = treeimp.parse(xgb.XGBRanker(**kw).fit(Xb, y, qid=qid))
    _, G, H = ranking_gradients(ens, RowSource(Xb, ens), y, query_bounds(len(y), group=sizes))
    # Monte Carlo of the sampler on the first query at round 0 (all scores equal)
    yq = y[:sizes[0]].astype(float)
    mc_g, mc_h = _sampled_pairs(yq, k=2, repeats=4000, rng=np.random.default_rng(0))
    np.testing.assert_allclose(G[:sizes[0], 0], mc_g, atol=0.02 * np.abs(mc_g).max())
    np.testing.assert_allclose(H[:sizes[0], 0], mc_h, atol=0.02 * np.abs(mc_h).max())
    copies = 200
    Xr = np.tile(Xb, (copies, 1))
    yr, sr = np.tile(y, copies), np.tile(sizes, copies)
    m = xgb.XGBRanker(**kw).fit(Xr, yr, qid=np.repeat(np.arange(len(sr)), sr))
    ens = treeimp.parse(m)
    assert ens.n_nodes == 3
    leaves = ens.predict_raw(np.array([[0.0], [1.0]]))[:, 0] - ens.base_score[0]
    _, G, H = ranking_gradients(ens, RowSource(Xr, ens), yr, query_bounds(len(yr), group=sr))
    expected = np.array([-ETA * G[Xr[:, 0] == v, 0].sum() / H[Xr[:, 0] == v, 0].sum()
                         for v in (0, 1)])
    np.testing.assert_allclose(leaves, expected, rtol=0.1)


def _sampled_pairs(y, k, repeats, rng):
    """Average g, h of XGBoost's "mean" pair sampling (NDCG, exp gain, all scores
    equal, normalised by 1 / k) over ``repeats`` independent runs."""
    n = len(y)
    disc = 1.0 / np.log2(np.arange(n) + 2.0)
    inv_idcg = 1.0 / np.sum((2.0 ** np.sort(y)[::-1] - 1) * disc)
    order = np.argsort(-y, kind="stable")  # rows by label, descending
    g, h = np.zeros(n), np.zeros(n)
    for _ in range(repeats):
        i = 0
        while i < n:
            j = i + 1
            while j < n and y[order[j]] == y[order[i]]:
                j += 1
            n_other = n - (j - i)
            for _ in range(k if n_other else 0):
                for p in range(i, j):
                    r = rng.integers(0, n_other)
                    r = r if r < i else r - i + j
                    a, b = order[p], order[r]
                    if y[a] < y[b]:
                        a, b = b, a
                    gain_a, gain_b = 2.0 ** y[a] - 1, 2.0 ** y[b] - 1
                    delta = abs((gain_a - gain_b) * (disc[a] - disc[b])) * inv_idcg
                    g[a] -= 0.5 * delta
                    g[b] += 0.5 * delta
                    h[a] += 0.5 * delta
                    h[b] += 0.5 * delta
            i = j
    return g / (repeats * k), h / (repeats * k)

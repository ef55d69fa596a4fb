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
from tests.ranking_designs import held_out_false_positives, query_design
from treeimp.inputs.rows import RowSource
from treeimp.model.ranking import query_bounds, query_sample_weight
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


def _leaf_identity_error(model, X, y, sizes, w=None, lam=0.0):
    """Largest gap between the last tree's leaf values and -eta G / (H + lam) of
    treeimp's gradients (times the row weights ``w``) summed over the training rows of
    each leaf, relative to the tree's largest leaf value (the library sums float32
    gradients: a leaf near 0 is off by the float32 rounding of its terms, not by a
    fraction of itself)."""
    ens = treeimp.parse(model)
    M, G, H = ranking_gradients(ens, RowSource(X, ens), y,
                                query_bounds(len(y), group=sizes))
    w = np.ones(len(y)) if w is None else w
    leaves = ens.apply(X)
    t, st = ens.n_trees - 1, G.shape[1] - 1
    gaps, values = [], []
    for leaf in np.unique(leaves[:, t]):
        sel = leaves[:, t] == leaf
        values.append(ens.value[ens.tree_offsets[t] + leaf, 0] * ens.tree_scale[t])
        gaps.append(abs(values[-1] + ETA * (w[sel] * G[sel, st]).sum()
                        / ((w[sel] * H[sel, st]).sum() + lam)))
    worst = max(gaps) / max(np.abs(values))
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


@pytest.mark.parametrize("objective", ["rank:ndcg", "rank:pairwise"])
def test_xgboost_query_weights_give_the_leaf_values(objective):
    """XGBRanker takes one weight per query: treeimp repeats it over the query's rows,
    and its weighted G / H give back XGBoost's leaf values. XGBoost scales the query
    weights to mean 1 first: the factor cancels with reg_lambda=0, not with lambda = 1
    (there the leaves are reproduced only with the scaled weights)."""
    X, y, sizes = _queries(30, 7)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    wq = np.random.default_rng(3).uniform(0.2, 5.0, size=len(sizes))
    scale = len(wq) / wq.sum()
    for lam in (0.0, 1.0):
        model = xgb.XGBRanker(n_estimators=3, objective=objective, max_depth=2,
                              learning_rate=ETA, reg_lambda=lam, min_child_weight=0,
                              n_jobs=1).fit(X, y, qid=qid, sample_weight=wq)
        w = query_sample_weight(treeimp.parse(model).objective, wq,
                                query_bounds(len(y), qid=qid))
        np.testing.assert_array_equal(w, np.repeat(wq, sizes))
        assert _leaf_identity_error(model, X, y, sizes, w * scale, lam) < 1e-5
        unscaled = _leaf_identity_error(model, X, y, sizes, w, lam)
        assert unscaled < 1e-5 if lam == 0 else unscaled > 1e-2
        # the weights matter: unweighted gradients miss the leaves
        assert _leaf_identity_error(model, X, y, sizes, None, lam) > 1e-2


def test_xgboost_rankers_take_one_weight_per_query():
    """explain, Explainer.explain and permutation_importance take XGBoost's one weight per
    query: the same results as every row given its query's weight, not the unweighted
    ones; per-row weights that vary within a query are refused (XGBoost refuses per-row
    weights), and LightGBM's rankers keep LightGBM's one weight per row."""
    model, X, y, sizes = _ranking_fixture()
    Xv, yv, sv = query_design(30, 12)
    qid = np.repeat(np.arange(len(sv)), sv)
    wq = np.random.default_rng(4).uniform(0.2, 5.0, size=len(sv))
    per_row = np.repeat(wq, sv)
    kw = {"qid": qid, "random_state": 0, "methods": ["mdi_oob", "ufi"]}
    by_query, by_row, plain, again = (
        np.column_stack([r.table.to_numpy(), r.stderr.to_numpy()]) for r in (
            treeimp.explain(model, Xv, yv, sample_weight=wq, **kw),
            treeimp.explain(model, Xv, yv, sample_weight=per_row, **kw),
            treeimp.explain(model, Xv, yv, **kw),
            treeimp.Explainer(model).explain(Xv, yv, sample_weight=wq, **kw)))
    np.testing.assert_array_equal(by_query, by_row)
    np.testing.assert_array_equal(again, by_row)
    assert not np.allclose(by_query, plain)
    pi = {name: treeimp.permutation_importance(model, Xv, yv, qid=qid, sample_weight=w,
                                               n_repeats=2, random_state=1).importances
          for name, w in (("query", wq), ("row", per_row), ("none", None))}
    np.testing.assert_array_equal(pi["query"], pi["row"])
    assert not np.allclose(pi["query"], pi["none"])
    bad = per_row.copy()
    bad[sv[0] + 1] += 1.0  # the second row of query 1
    with pytest.raises(ValueError, match=f"query 1 has weight {per_row[sv[0]]} on its first "
                                         f"row and {bad[sv[0] + 1]} on row {sv[0] + 1}"):
        treeimp.explain(model, Xv, yv, sample_weight=bad, **kw)
    with pytest.raises(ValueError, match="query 1 has weight"):
        treeimp.permutation_importance(model, Xv, yv, qid=qid, sample_weight=bad)
    with pytest.raises(ValueError, match=f"one weight per query \\({len(sv)}\\) or one "
                                         f"per row \\({len(yv)}\\), got shape "
                                         f"\\({len(sv) + 1},\\)"):
        treeimp.explain(model, Xv, yv, sample_weight=np.ones(len(sv) + 1), **kw)
    ranker = lgb.LGBMRanker(n_estimators=3, num_leaves=4, verbose=-1, n_jobs=1).fit(
        X, y, group=sizes)
    with pytest.raises(ValueError, match=f"sample_weight has shape \\({len(sv)},\\) but X "
                                         f"has {len(yv)} rows"):
        treeimp.explain(ranker, Xv, yv, group=sv, sample_weight=wq)


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


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_held_out_measure_finds_the_signal_and_not_the_high_cardinality_noise(library):
    """In-sample gain ranks the high-cardinality noise x4 above the binary noise;
    held-out mdi_oob ranks x0 first and finds the noise features insignificant at about
    the nominal rate (over 4 designs: 16 noise features, 5% each)."""
    false_positives = 0
    for seed in range(4):
        X, y, sizes = query_design(150, seed)
        Xv, yv, sv = query_design(150, 100 + seed)
        if library == "xgboost":
            model = xgb.XGBRanker(n_estimators=30, max_depth=4, learning_rate=0.3, n_jobs=1,
                                  random_state=seed)
            model.fit(X, y, qid=np.repeat(np.arange(len(sizes)), sizes))
            queries = {"qid": np.repeat(np.arange(len(sv)), sv)}
        else:
            model = lgb.LGBMRanker(n_estimators=30, num_leaves=15, learning_rate=0.3,
                                   verbose=-1, n_jobs=1, random_state=seed)
            model.fit(X, y, group=sizes)
            queries = {"group": sv}
        res = treeimp.explain(model, Xv, yv, methods=["mdi", "mdi_oob"], random_state=0,
                              **queries)
        assert res.ranking("mdi")[:2] == ["x0", "x4"]
        false_positives += held_out_false_positives(res)
    assert false_positives <= 3


def _xgb_ranker(X, y, sizes, **kw):
    return xgb.XGBRanker(n_estimators=3, max_depth=2, n_jobs=1, **kw).fit(
        X, y, qid=np.repeat(np.arange(len(sizes)), sizes))


def test_bad_query_inputs_are_refused_with_the_numbers():
    X, y, sizes = _queries(10, 4)
    ranker = _xgb_ranker(X, y, sizes)
    n = len(y)
    with pytest.raises(ValueError, match="exactly one of qid .* got neither"):
        treeimp.explain(ranker, X, y)
    qid = np.repeat(np.arange(len(sizes)), sizes)
    with pytest.raises(ValueError, match="got both"):
        treeimp.explain(ranker, X, y, qid=qid, group=sizes)
    with pytest.raises(ValueError, match=f"group sizes sum to {n - 1} rows but there are {n}"):
        treeimp.explain(ranker, X, y, group=np.append(sizes[:-1], sizes[-1] - 1))
    with pytest.raises(ValueError, match="group sizes must be >= 1: query 1 has size 0"):
        treeimp.explain(ranker, X, y, group=np.array([n, 0]))
    with pytest.raises(ValueError, match=f"one query id per row \\({n}\\)"):
        treeimp.explain(ranker, X, y, qid=qid[:-1])
    split = qid.copy()
    split[:2] = qid[-1]  # the last query's id also on rows 0 and 1
    with pytest.raises(ValueError, match=f"query {qid[-1]} has rows at 0 and again from row"):
        treeimp.explain(ranker, X, y, qid=split)
    with pytest.raises(ValueError, match="integer labels in \\[0, 31\\]"):
        treeimp.explain(ranker, X, y + 0.5, qid=qid)
    regressor = xgb.XGBRegressor(n_estimators=2, n_jobs=1).fit(X, y)
    with pytest.raises(ValueError, match="qid / group are for learning-to-rank models"):
        treeimp.explain(regressor, X, y, qid=qid)
    with pytest.raises(ValueError, match="not from an iterable of \\(X, y\\) chunks"):
        treeimp.explain(ranker, [(X, y)])
    with pytest.raises(ValueError, match="not defined for a learning-to-rank model"):
        treeimp.explain(ranker, X, y, qid=qid, methods=["shap_oob"])
    with pytest.raises(ValueError, match="interaction_importance is not defined for a "
                                         "learning-to-rank model"):
        treeimp.interaction_importance(ranker, X, y)
    mapper = _xgb_ranker(X, (y > 2).astype(int), sizes, objective="rank:map")
    with pytest.raises(ValueError, match="binary relevance labels"):
        treeimp.explain(mapper, X, y, qid=qid)


def test_unsupported_ranking_variants_are_refused():
    X, y, sizes = _queries(10, 5)
    with pytest.raises(ValueError, match="lambdarank_unbiased=True is not supported"):
        treeimp.parse(_xgb_ranker(X, y, sizes, lambdarank_unbiased=True))


def test_lightgbm_labels_beyond_label_gain_are_refused():
    X, y, sizes = _queries(10, 6)
    model = lgb.LGBMRanker(n_estimators=2, verbose=-1, n_jobs=1,
                           label_gain=[0, 1, 3, 7, 15]).fit(X, y, group=sizes)
    with pytest.raises(ValueError, match="integer labels in \\[0, 4\\] \\(label_gain has 5"):
        treeimp.explain(model, X, y + 1, group=sizes)


def test_contributions_of_a_ranker_add_up_to_its_margin():
    X, y, sizes = _queries(10, 7)
    for model in (_xgb_ranker(X, y, sizes),
                  lgb.LGBMRanker(n_estimators=3, verbose=-1, n_jobs=1).fit(X, y, group=sizes)):
        c = treeimp.contributions(model, X)
        values = np.asarray(c.values)
        total = values.sum(axis=1) + np.asarray(c.base_values).reshape(-1)
        margin = (model.predict(X, output_margin=True) if isinstance(model, xgb.XGBRanker)
                  else model.predict(X, raw_score=True))
        np.testing.assert_allclose(total, margin, rtol=0, atol=1e-5)


def _ranking_fixture():
    X, y, sizes = query_design(40, 11)
    model = xgb.XGBRanker(n_estimators=10, max_depth=3, n_jobs=1).fit(
        X, y, qid=np.repeat(np.arange(len(sizes)), sizes))
    return model, X, y, sizes


def _brute_force(model, X, y, sizes, j, seed, n_repeats, within, metric):
    """Permutation importance with scikit-learn's metrics, query by query, and
    permutations drawn as treeimp documents them (one seed from random_state, a fresh
    RandomState(seed) per column, shuffles compounding over the repeats as
    scikit-learn's; within queries: a permutation of all rows stably sorted by query)."""
    from sklearn.metrics import average_precision_score, ndcg_score

    bounds = np.concatenate([[0], np.cumsum(sizes)])

    def score(margin):
        parts = []
        for a, b in zip(bounds[:-1], bounds[1:]):
            if metric == "map":
                if np.any(y[a:b] > 0):
                    parts.append(average_precision_score(y[a:b] > 0, margin[a:b]))
            else:
                k = None if metric == "ndcg" else int(metric.split("@")[1])
                parts.append(ndcg_score(y[None, a:b], margin[None, a:b], k=k))
        return np.mean(parts)

    base = score(model.predict(X, output_margin=True))
    seed = np.random.RandomState(seed).randint(np.iinfo(np.int32).max + 1)
    rng = np.random.RandomState(seed)
    query_of = np.repeat(np.arange(len(sizes)), sizes)
    Xp = X.copy()
    idx = np.arange(len(y))
    drops = []
    for _ in range(n_repeats):
        if within:
            perm = rng.permutation(len(y))
            idx = idx[perm[np.argsort(query_of[perm], kind="stable")]]
        else:
            rng.shuffle(idx)
        Xp[:, j] = Xp[idx, j]  # as scikit-learn: the permuted column permuted again
        drops.append(base - score(model.predict(Xp, output_margin=True)))
    return base, np.array(drops)


@pytest.mark.parametrize("scoring, within", [("ndcg", True), ("ndcg@3", False),
                                             ("map", True)])
def test_permutation_importance_scores_queries_as_scikit_learn(scoring, within):
    model, X, y, sizes = _ranking_fixture()
    if scoring == "map":
        y = (y > 2).astype(int)
    res = treeimp.permutation_importance(model, X, y, group=sizes, scoring=scoring,
                                         n_repeats=3, random_state=5, within_queries=within)
    for j in (0, 4):
        _, drops = _brute_force(model, X, y, sizes, j, 5, 3, within, scoring)
        np.testing.assert_allclose(res.importances[j], drops, rtol=0, atol=1e-9)
    assert res.importances_mean[0] > 0.05
    assert res.importances_mean.argmax() == 0


def test_permutation_importance_of_rankers_refuses_bad_scoring_and_queries():
    model, X, y, sizes = _ranking_fixture()
    with pytest.raises(ValueError, match="'ndcg@k' \\(k >= 1\\) or 'map', got 'r2'"):
        treeimp.permutation_importance(model, X, y, group=sizes, scoring="r2")
    with pytest.raises(ValueError, match="got neither"):
        treeimp.permutation_importance(model, X, y)
    with pytest.raises(ValueError, match="qid / group are for learning-to-rank models"):
        treeimp.permutation_importance(xgb.XGBRegressor(n_estimators=2).fit(X, y), X, y,
                                       group=sizes)


def test_command_line_reads_the_query_column(tmp_path, capsys):
    import pandas as pd

    from treeimp.cli.inputs import CSV_OPTIONS
    from treeimp.cli.main import main

    model, X, y, sizes = _ranking_fixture()
    model.save_model(tmp_path / "ranker.json")
    qid = np.repeat(np.arange(len(sizes)), sizes)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame.insert(0, "query", qid)
    frame["y"] = y
    frame.to_csv(tmp_path / "rows.csv", index=False)
    out = tmp_path / "imp.csv"
    argv = ["explain", str(tmp_path / "ranker.json"), str(tmp_path / "rows.csv"), "--target",
            "y", "--format", "csv", "--seed", "0", "--methods", "mdi_oob",
            "--columns-by-position"]
    assert main([*argv, "--qid", "query", "--output", str(out)]) == 0
    got = pd.read_csv(out, **CSV_OPTIONS)
    want = treeimp.explain(model, X, y, qid=qid, methods=["mdi_oob"], random_state=0)
    assert list(got["feature"]) == list(frame.columns[1:-1])  # named by the file's columns
    pd.testing.assert_frame_equal(got.drop(columns="feature"),
                                  want.to_frame().drop(columns="feature"), check_exact=True)
    assert main(argv) == 2
    assert "--qid COL" in capsys.readouterr().err
    assert main([*argv, "--qid", "nope"]) == 2
    assert "--qid column 'nope' is not in the data file" in capsys.readouterr().err


def test_catboost_query_rmse_gradients_equal_catboost_leaf_sums():
    """CatBoost's QueryRMSE, one tree on a baseline (learning rate 1, no L2, Gradient and
    Newton leaves: sum w der1 / sum w, der2 = -w): the leaves give CatBoost's sums of
    der1, which must equal treeimp's -g (h = 1); the model predicts as CatBoost."""
    catboost = pytest.importorskip("catboost")
    rng = np.random.default_rng(8)
    X, y, sizes = _queries(30, 8, n_features=2)
    n = len(y)
    base = (0.5 * rng.normal(size=n)).astype(np.float32).astype(np.float64)
    w = rng.uniform(0.5, 2.0, n).astype(np.float32).astype(np.float64)
    gid = np.repeat(np.arange(len(sizes)), sizes)
    for method in ("Gradient", "Newton"):
        model = catboost.CatBoost(dict(
            loss_function="QueryRMSE", iterations=1, depth=1, learning_rate=1.0,
            l2_leaf_reg=0, leaf_estimation_method=method, leaf_estimation_iterations=1,
            boost_from_average=False, random_strength=0, bootstrap_type="No", verbose=0,
            allow_writing_files=False, thread_count=1)).fit(
            catboost.Pool(X, y, group_id=gid, baseline=base, weight=w))
        ens = treeimp.parse(model)
        assert ens.objective.name == "query_rmse"
        _, G, H = ranking_gradients(ens, RowSource(X, ens), y, query_bounds(n, group=sizes),
                                    base_margin=base, w=w)
        leaf = model.calc_leaf_indexes(X)[:, 0]
        values = np.asarray(model.get_leaf_values())
        assert np.all(H == 1.0)
        for L in range(2):
            s = leaf == L
            np.testing.assert_allclose(values[L], (w[s] * -G[s, 0]).sum() / w[s].sum(),
                                       rtol=1e-6)
    fitted = catboost.CatBoostRanker(loss_function="QueryRMSE", iterations=5, depth=3,
                                     verbose=0, allow_writing_files=False,
                                     thread_count=1).fit(X, y, group_id=gid)
    np.testing.assert_allclose(treeimp.parse(fitted).predict_raw(X)[:, 0],
                               fitted.predict(X),
                               rtol=0, atol=1e-9)
    res = treeimp.explain(fitted, X, y, group=sizes, methods=["mdi_oob"], random_state=0)
    assert res.ranking("mdi_oob")[0] == "x0"


def test_in_sample_mdi_of_a_ranker_needs_no_queries():
    X, y, sizes = _queries(10, 9)
    ranker = _xgb_ranker(X, y, sizes)
    res = treeimp.explain(ranker, X, methods=["mdi"])
    gain = ranker.get_booster().get_score(importance_type="total_gain")
    np.testing.assert_allclose(res.table["mdi"].to_numpy(),
                               [gain.get(f"f{j}", 0.0) for j in range(X.shape[1])], rtol=1e-6)


def test_lightgbm_xendcg_uses_the_expected_gradient():
    """rank_xendcg draws its targets 2^y - u at random per row and round (a generator
    per query): with every query repeated 150 times the library's leaf values
    (-eta G / H, H = sum rho (1 - rho) fixed) average many draws and approach treeimp's
    expected gradient (gap 0.6% of the largest leaf; 3.4% with one copy)."""
    X, y, sizes = _queries(6, 10)
    copies = 150
    Xr, yr, sr = np.tile(X, (copies, 1)), np.tile(y, copies), np.tile(sizes, copies)
    model = lgb.LGBMRanker(objective="rank_xendcg", n_estimators=2, learning_rate=ETA,
                           num_leaves=4, reg_lambda=0, min_child_samples=1,
                           min_child_weight=0, verbose=-1, n_jobs=1).fit(Xr, yr, group=sr)
    ens = treeimp.parse(model)
    assert ens.objective.name == "rank_xendcg"
    np.testing.assert_allclose(ens.predict_raw(Xr)[:, 0], model.predict(Xr, raw_score=True),
                               rtol=0, atol=1e-12)
    assert _leaf_identity_error(model, Xr, yr, sr) < 0.015


def test_xendcg_expected_shares_match_a_fine_grid():
    from treeimp.kernels.ranking_gradients import xendcg_expected_shares
    from treeimp.model.ensemble import Objective
    from treeimp.model.ranking import ranking_spec

    _, _, nodes, weights = ranking_spec(Objective("rank_xendcg", {}))
    m = 2000
    u = (np.arange(m) + 0.5) / m
    u1, u2 = np.meshgrid(u, u)
    for y in ([1.0, 0.0], [0.0, 0.0], [3.0, 1.0]):
        share = xendcg_expected_shares(np.array(y), nodes, weights)
        phi1, phi2 = 2.0 ** y[0] - u1, 2.0 ** y[1] - u2
        np.testing.assert_allclose(share[0], (phi1 / (phi1 + phi2)).mean(), rtol=1e-7)
        assert abs(share.sum() - 1.0) < 1e-12


def test_within_query_permutation_is_refused_for_library_routed_rankers():
    """A CatBoost ranker with target-statistic splits is re-predicted through CatBoost,
    which permutes among all rows: asking for within-query permutations says so."""
    catboost = pytest.importorskip("catboost")
    import pandas as pd

    rng = np.random.default_rng(0)
    n, sizes = 600, [10] * 60
    cats = np.array([f"k{i}" for i in range(40)])
    effect = rng.normal(size=40) * 2
    ci = rng.integers(0, 40, n)
    X = pd.DataFrame({"a": rng.normal(size=n), "c": cats[ci]})
    y = np.clip(np.round(0.3 * X["a"] + effect[ci] + 0.3 * rng.normal(size=n)), 0, 3)
    model = catboost.CatBoostRanker(
        loss_function="QueryRMSE", iterations=5, depth=2, verbose=0, thread_count=1,
        allow_writing_files=False, cat_features=["c"], one_hot_max_size=1).fit(
        X, y, group_id=np.repeat(np.arange(60), 10))
    assert treeimp.parse(model).leaf_router is not None
    with pytest.raises(ValueError, match="pass within_queries=False"):
        treeimp.permutation_importance(model, X, y, group=sizes, n_repeats=2)
    res = treeimp.permutation_importance(model, X, y, group=sizes, n_repeats=2,
                                         within_queries=False, random_state=0)
    assert res.importances_mean[1] > 0

"""CatBoost's pairwise ranking losses: PairLogit, PairLogitPairwise, YetiRank and
YetiRankPairwise (held-out gradients query by query; YetiRank's random pair weights
replaced by their expectation).

The truth is CatBoost's own leaf values. With no bootstrap, no random strength and no
average boosting, a tree of round t is fitted to the derivatives at the margins before
round t (the training rows' leaves of the model's own trees); CatBoost then shifts the
tree's leaf values so that their mean over the training rows is 0 (PairLogit only ranks
within queries):
- PairLogit, Newton leaves: lr * (-G / (H + l2 * mean w) - c);
- PairLogit, Gradient leaves: lr * (-G / (P + l2 * mean w) - c), P the sum over the
  leaf's rows of the weights of the pairs each row is in (this, not the row count, is
  the divisor: the "unexplained constant" of a one-tree model is count / P with the
  shift);
- PairLogitPairwise (and YetiRankPairwise): the leaves solve a linear system of the pair
  weights between leaves (a pair's weight moves from the diagonal to the off-diagonal
  when its rows fall in two leaves), regularised by l2 and ``bayesian_matrix_reg``
  (0.1), the last leaf held at 0, then shifted (written out below as CatBoost's
  pairwise leaf estimation does it).
G and H are treeimp's gradient and hessian summed over the leaf's training rows.
YetiRank's pairs are random: its checks average many copies of each query.
"""

import numpy as np
import pytest

import treeimp
from tests.ranking_designs import held_out_false_positives, query_design
from treeimp.inputs.rows import RowSource
from treeimp.model.ranking import query_bounds
from treeimp.stats.ranking import ranking_gradients

catboost = pytest.importorskip("catboost")

ROUNDS = 4
DEPTH = 2
LEAVES = 1 << DEPTH


def _queries(n_queries, seed, n_features=3):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(3, 12, size=n_queries)
    n = int(sizes.sum())
    X = rng.normal(size=(n, n_features))
    y = np.clip(np.round(X[:, 0] + rng.normal(size=n)) + 2, 0, 4)
    return X, y, sizes


def _fit(X, y, sizes, loss, weight=None, **kw):
    params = dict(loss_function=loss, iterations=ROUNDS, depth=DEPTH, learning_rate=0.5,
                  random_strength=0, bootstrap_type="No", verbose=0,
                  allow_writing_files=False, thread_count=1, random_seed=0)
    params.update(kw)
    gid = np.repeat(np.arange(len(sizes)), sizes)
    return catboost.CatBoost(params).fit(catboost.Pool(X, y, group_id=gid, weight=weight))


def _pair_weight_sums(y, sizes, w):
    """Every row's sum of the weights of its pairs (rows of another label in its query)."""
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    out = np.zeros(len(y))
    for a, b in zip(bounds[:-1], bounds[1:]):
        for i in range(a, b):
            out[i] = w[a] * np.sum(y[a:b] != y[i])
    return out


@pytest.mark.parametrize("method, weighted", [("Newton", False), ("Gradient", False),
                                              ("Newton", True)])
def test_pair_logit_gradients_give_catboost_leaf_values(method, weighted):
    X, y, sizes = _queries(30, 1)
    n, lr, l2 = len(y), 0.5, 2.0
    rng = np.random.default_rng(2)
    # CatBoost weighs a pair by its query's weight: every row gets its query's weight
    w = (np.repeat(rng.uniform(0.5, 2.0, len(sizes)), sizes).astype(np.float32)
         .astype(np.float64) if weighted else np.ones(n))
    model = _fit(X, y, sizes, "PairLogit", weight=w if weighted else None,
                 leaf_estimation_method=method, l2_leaf_reg=l2)
    ens = treeimp.parse(model)
    assert ens.objective.name == "pair_logit"
    M, G, H = ranking_gradients(ens, RowSource(X, ens), y, query_bounds(n, group=sizes))
    np.testing.assert_allclose(M[:, -1], model.predict(X, prediction_type="RawFormulaVal"),
                               rtol=0, atol=1e-12)
    leaves = model.calc_leaf_indexes(X)
    values = np.asarray(model.get_leaf_values()).reshape(ROUNDS, LEAVES)
    P = _pair_weight_sums(y, sizes, w)
    for t in range(ROUNDS):
        raw, mass = np.zeros(LEAVES), np.zeros(LEAVES)
        for leaf in range(LEAVES):
            s = leaves[:, t] == leaf
            if s.any():
                denom = (w[s] * H[s, t]).sum() if method == "Newton" else P[s].sum()
                raw[leaf] = -(w[s] * G[s, t]).sum() / (denom + l2 * w.mean())
                mass[leaf] = w[s].sum()
        want = lr * (raw - (raw * mass).sum() / mass.sum())
        np.testing.assert_allclose(values[t][mass > 0], want[mass > 0], rtol=0,
                                   atol=1e-7 * np.abs(values[t]).max())


def _pairwise_leaf_values(M, d, count, l2, prior_reg=0.1):
    """CatBoost's pairwise-scoring leaf values: (M + regularisation) x = d over all leaves
    but the last (held at 0), then x minus its row-count-weighted mean."""
    L = len(d)
    A = M - prior_reg / L
    A[np.diag_indices(L)] = np.diag(M) + prior_reg * (1 - 1 / L) + l2
    x = np.append(np.linalg.solve(A[:-1, :-1], d[:-1]), 0.0)
    return x - (x * count).sum() / count.sum()


def test_pair_logit_pairwise_gradients_give_catboost_leaf_values():
    X, y, sizes = _queries(30, 3)
    n, lr, l2 = len(y), 0.5, 3.0
    model = _fit(X, y, sizes, "PairLogitPairwise", l2_leaf_reg=l2)
    ens = treeimp.parse(model)
    assert ens.objective.name == "pair_logit"
    M, G, _ = ranking_gradients(ens, RowSource(X, ens), y, query_bounds(n, group=sizes))
    np.testing.assert_allclose(M[:, -1], model.predict(X, prediction_type="RawFormulaVal"),
                               rtol=0, atol=1e-12)
    leaves = model.calc_leaf_indexes(X)
    values = np.asarray(model.get_leaf_values()).reshape(ROUNDS, LEAVES)
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    for t in range(ROUNDS):
        leaf = leaves[:, t]
        pair_matrix = np.zeros((LEAVES, LEAVES))
        for a, b in zip(bounds[:-1], bounds[1:]):
            for i in range(a, b):
                for j in range(i + 1, b):
                    if y[i] != y[j] and leaf[i] != leaf[j]:
                        pair_matrix[leaf[i], leaf[j]] -= 1
                        pair_matrix[leaf[j], leaf[i]] -= 1
                        pair_matrix[leaf[i], leaf[i]] += 1
                        pair_matrix[leaf[j], leaf[j]] += 1
        d = np.array([-G[leaf == L, t].sum() for L in range(LEAVES)])
        count = np.bincount(leaf, minlength=LEAVES)
        want = lr * _pairwise_leaf_values(pair_matrix, d, count, l2)
        # CatBoost stores 0 in a leaf no training row reaches
        np.testing.assert_allclose(values[t][count > 0], want[count > 0], rtol=0,
                                   atol=1e-9 * np.abs(values[t]).max())


def test_pair_logit_max_pairs_uses_the_expected_gradient():
    """``max_pairs`` keeps a random subset of each query's pairs (drawn once): treeimp uses
    the expected gradient, every pair kept with probability max_pairs / n_pairs. With every
    query repeated 300 times the library's one-split leaf values average many draws."""
    X, y, sizes = _queries(6, 4, n_features=1)
    X = (X > 0).astype(float)
    copies = 300
    Xr, yr, sr = np.tile(X, (copies, 1)), np.tile(y, copies), np.tile(sizes, copies)
    n = len(yr)
    model = _fit(Xr, yr, sr, "PairLogit:max_pairs=3", iterations=1, depth=1,
                 learning_rate=1.0, l2_leaf_reg=0, leaf_estimation_method="Gradient")
    ens = treeimp.parse(model)
    assert ens.objective.params["max_pairs"] == 3
    _, G, _ = ranking_gradients(ens, RowSource(Xr, ens), yr, query_bounds(n, group=sr))
    leaf = model.calc_leaf_indexes(Xr)[:, 0]
    values = np.asarray(model.get_leaf_values())
    # the expected pair count of a row: its pairs times the share kept
    P = _pair_weight_sums(yr, sr, np.ones(n))
    query = np.repeat(np.arange(len(sr)), sr)
    n_pairs = np.bincount(query, weights=P) / 2  # of every query
    P *= np.minimum(1.0, 3 / np.maximum(n_pairs, 1))[query]
    raw = np.array([-G[leaf == L, 0].sum() / P[leaf == L].sum() for L in range(2)])
    count = np.bincount(leaf, minlength=2)
    want = raw - (raw * count).sum() / count.sum()
    np.testing.assert_allclose(values, want, rtol=0.03)
    # and all pairs kept is another gradient: the comparison can fail
    full = _fit(Xr, yr, sr, "PairLogit", iterations=1, depth=1, learning_rate=1.0,
                l2_leaf_reg=0, leaf_estimation_method="Gradient")
    _, G_all, _ = ranking_gradients(treeimp.parse(full), RowSource(Xr, ens), yr,
                                    query_bounds(n, group=sr))
    assert np.abs(G_all - G).max() > 0.1


def held_out_runs(loss, n_queries, iterations, seeds):
    """For each seed: a CatBoostRanker with ``loss`` fitted on ``query_design(n_queries,
    seed)`` and its explain (mdi, mdi_oob) on the held-out queries of seed 100 + seed."""
    for seed in seeds:
        X, y, sizes = query_design(n_queries, seed)
        Xv, yv, sv = query_design(n_queries, 100 + seed)
        model = catboost.CatBoostRanker(loss_function=loss, iterations=iterations, depth=4,
                                        learning_rate=0.3, verbose=0, thread_count=1,
                                        allow_writing_files=False, random_seed=seed)
        model.fit(X, y, group_id=np.repeat(np.arange(len(sizes)), sizes))
        yield treeimp.explain(model, Xv, yv, group=sv, methods=["mdi", "mdi_oob"],
                              random_state=0)


@pytest.mark.parametrize("loss", ["PairLogit", "PairLogitPairwise"])
def test_held_out_measure_finds_the_signal_and_not_the_high_cardinality_noise(loss):
    """In-sample gain ranks the high-cardinality noise x4 second; held-out mdi_oob ranks
    x0 first and finds the noise insignificant at about the nominal rate (4 designs, 16
    noise features, 5% each)."""
    false_positives = 0
    for res in held_out_runs(loss, 150, 30, range(4)):
        assert res.ranking("mdi")[:2] == ["x0", "x4"]
        false_positives += held_out_false_positives(res)
    assert false_positives <= 3


@pytest.mark.parametrize("loss", ["YetiRank", "YetiRankPairwise"])
def test_yeti_rank_held_out_measure_finds_the_signal(loss):
    """YetiRank (expected pair weights): held-out mdi_oob ranks x0 first, in-sample mdi
    credits the noise, held-out mdi_oob finds it insignificant (2 designs, 8 noise
    features, 5% each; smaller than above: the expected weights cost a double integral
    per pair and round)."""
    false_positives = 0
    for res in held_out_runs(loss, 80, 10, range(2)):
        assert res.table.loc["x4", "mdi"] > 0
        false_positives += held_out_false_positives(res)
    assert false_positives <= 2


def test_all_held_out_measures_and_permutation_importance_run_per_query():
    X, y, sizes = query_design(40, 5)
    model = catboost.CatBoostRanker(loss_function="PairLogit", iterations=10, depth=3,
                                    verbose=0, thread_count=1, allow_writing_files=False,
                                    random_seed=0).fit(
        X, y, group_id=np.repeat(np.arange(len(sizes)), sizes))
    methods = ["mdi_oob", "mdi_oob_centered", "ufi", "naive_oob"]
    res = treeimp.explain(model, X, y, group=sizes, methods=methods, random_state=0)
    for m in methods:
        assert res.ranking(m)[0] == "x0"
    perm = treeimp.permutation_importance(model, X, y, group=sizes, scoring="ndcg",
                                          n_repeats=3, random_state=0)
    assert perm.importances_mean.argmax() == 0


def test_pair_logit_weights_within_a_query_must_agree():
    X, y, sizes = query_design(10, 6)
    model = catboost.CatBoostRanker(loss_function="PairLogit", iterations=3, depth=2,
                                    verbose=0, thread_count=1, allow_writing_files=False).fit(
        X, y, group_id=np.repeat(np.arange(len(sizes)), sizes))
    w = np.ones(len(y))
    w[sizes[0] + 1] = 2.0  # the second row of query 1
    with pytest.raises(ValueError, match=f"query 1 has weight 1.0 on its first row and 2.0 "
                                         f"on row {sizes[0] + 1}"):
        treeimp.explain(model, X, y, group=sizes, sample_weight=w, methods=["mdi_oob"])


def _yeti_monte_carlo(s, y, decay, repeats, rng):
    """CatBoost's YetiRank pair weights (classic mode) averaged over ``repeats`` draws:
    the scores plus logistic noise (exp(s) u / (1 - u)), sorted descending, the rows at
    positions j, j + 1 giving their winner-loser pair 0.15 decay^j |y_a - y_b|; and the
    standard error of each average."""
    n = len(s)
    u = rng.uniform(size=(repeats, n))
    order = np.argsort(-(s + np.log(u / (1 - u))), axis=1)
    W = np.zeros((repeats, n, n))
    draw = np.arange(repeats)
    for j in range(n - 1):
        a, b = order[:, j], order[:, j + 1]
        win = np.where(y[a] > y[b], a, b)
        lose = np.where(y[a] > y[b], b, a)
        W[draw, win, lose] += 0.15 * decay ** j * np.abs(y[a] - y[b])
    return W.mean(axis=0), W.std(axis=0) / np.sqrt(repeats)


def test_yeti_rank_expected_pair_weights_match_a_monte_carlo_of_the_sampler():
    from treeimp.kernels.ranking_gradients import yeti_adjacency
    from treeimp.model.ensemble import Objective
    from treeimp.model.ranking import ranking_spec

    rng = np.random.default_rng(9)
    for n, spread, decay in ((4, 0.5, 0.85), (6, 3.0, 0.6)):
        s = rng.normal(size=n) * spread
        y = rng.permutation(np.arange(n) % 3).astype(float)
        _, params, nodes, weights = ranking_spec(Objective(
            "yeti_rank", {"decay": decay, "mode": "Classic", "noise": "Gumbel"}))
        k = int(params[1])
        acc = yeti_adjacency(s, decay, nodes[:k], weights[:k], nodes[k:], weights[k:])
        want, se = _yeti_monte_carlo(s, y, decay, 400_000, rng)
        got = np.zeros((n, n))
        for i in range(n):
            for j in range(n):
                if y[i] > y[j]:
                    got[i, j] = 0.15 * (y[i] - y[j]) * (acc[i, j] + acc[j, i])
        assert np.all(np.abs(got - want) <= 5 * se + 1e-12)
        assert np.abs(got - want).max() < 2e-3 * want.max()


def _yeti_copies():
    """Six queries repeated 300 times, a binary feature and a baseline of unequal scores."""
    rng = np.random.default_rng(5)
    sizes = rng.integers(4, 9, size=6)
    n0 = int(sizes.sum())
    X = (rng.normal(size=(n0, 1)) > 0).astype(float)
    y = rng.integers(0, 4, size=n0).astype(float)
    base = rng.normal(size=n0) * 0.8
    copies = 300
    return (np.tile(X, (copies, 1)), np.tile(y, copies), np.tile(sizes, copies),
            np.tile(base, copies))


def _one_split(loss, X, y, sizes, base, l2=None):
    params = dict(loss_function=loss, iterations=1, depth=1, learning_rate=1.0,
                  random_strength=0, bootstrap_type="No", verbose=0,
                  allow_writing_files=False, thread_count=1, random_seed=0)
    if l2 is not None:
        params["l2_leaf_reg"] = l2
    gid = np.repeat(np.arange(len(sizes)), sizes)
    return catboost.CatBoost(params).fit(catboost.Pool(X, y, group_id=gid, baseline=base))


@pytest.mark.parametrize("loss", ["YetiRank", "YetiRank:decay=0.6"])
def test_yeti_rank_expected_gradient_approaches_catboost_leaf_values(loss):
    """YetiRank draws its pairs anew every round (ten noisy permutations of each query):
    with every query repeated 300 times and a baseline of unequal scores, a one-split
    model's leaf values (-G / H, shifted) average many draws and approach treeimp's
    expected gradient (gap 0.3%; the other decay's expected weights are 6% off, the
    expectation at equal scores, ignoring the baseline, 20%)."""
    Xr, yr, sr, br = _yeti_copies()
    model = _one_split(loss, Xr, yr, sr, br)
    ens = treeimp.parse(model)
    assert ens.objective.name == "yeti_rank"
    bounds = query_bounds(len(yr), group=sr)
    _, G, H = ranking_gradients(ens, RowSource(Xr, ens), yr, bounds, base_margin=br)
    leaf = model.calc_leaf_indexes(Xr)[:, 0]
    values = np.asarray(model.get_leaf_values())
    raw = np.array([-G[leaf == L, 0].sum() / H[leaf == L, 0].sum() for L in range(2)])
    count = np.bincount(leaf, minlength=2)
    np.testing.assert_allclose(values, raw - (raw * count).sum() / count.sum(), rtol=0.01)


def test_yeti_rank_pairwise_expected_weights_give_its_pairwise_leaf_values():
    """YetiRankPairwise: the same random pairs, leaves by the pairwise system (two leaves:
    d / (cross-leaf pair weight + l2 + bayesian_matrix_reg / 2), shifted) on the expected
    weights and gradient: within 0.2% of the library's averaged draws."""
    from treeimp.kernels.ranking_gradients import yeti_adjacency
    from treeimp.model.ranking import ranking_spec

    Xr, yr, sr, br = _yeti_copies()
    l2 = 2.0
    model = _one_split("YetiRankPairwise", Xr, yr, sr, br, l2=l2)
    ens = treeimp.parse(model)
    assert ens.objective.name == "yeti_rank"
    bounds = query_bounds(len(yr), group=sr)
    _, G, _ = ranking_gradients(ens, RowSource(Xr, ens), yr, bounds, base_margin=br)
    leaf = model.calc_leaf_indexes(Xr)[:, 0]
    _, params, nodes, weights = ranking_spec(ens.objective)
    k = int(params[1])
    cross = 0.0  # expected weight of the pairs whose rows fall in the two leaves
    for a, b in zip(bounds[:-1], bounds[1:]):
        acc = yeti_adjacency(br[a:b], params[0], nodes[:k], weights[:k], nodes[k:],
                             weights[k:])
        for i in range(b - a):
            for j in range(b - a):
                if yr[a + i] > yr[a + j] and leaf[a + i] != leaf[a + j]:
                    cross += 0.15 * (yr[a + i] - yr[a + j]) * (acc[i, j] + acc[j, i])
    x = np.array([-G[leaf == 0, 0].sum() / (cross + l2 + 0.1 / 2), 0.0])
    count = np.bincount(leaf, minlength=2)
    np.testing.assert_allclose(model.get_leaf_values(), x - (x * count).sum() / count.sum(),
                               rtol=0.01)


@pytest.mark.parametrize("loss", ["YetiRank:mode=DCG", "QuerySoftMax"])
def test_unsupported_catboost_ranking_losses_are_refused_and_permuted_as_rankers(loss):
    X, y, sizes = query_design(20, 7)
    model = catboost.CatBoostRanker(loss_function=loss, iterations=5, depth=3, verbose=0,
                                    thread_count=1, allow_writing_files=False,
                                    random_seed=0).fit(
        X, y, group_id=np.repeat(np.arange(len(sizes)), sizes))
    ens = treeimp.parse(model)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0], model.predict(X), rtol=0,
                               atol=1e-9)
    why = {"YetiRank:mode=DCG": "YetiRank:mode=DCG is not supported: treeimp computes "
                                "YetiRank's expected pair weights for mode=Classic",
           "QuerySoftMax": "'catboost:QuerySoftMax' has no gradient in treeimp \\(its "
                           "gradient is not"}[loss]
    with pytest.raises(ValueError, match=why):
        treeimp.explain(model, X, y, group=sizes, methods=["mdi_oob"])
    perm = treeimp.permutation_importance(model, X, y, group=sizes, scoring="ndcg@5",
                                          n_repeats=2, random_state=0)
    assert perm.importances_mean.shape == (X.shape[1],)

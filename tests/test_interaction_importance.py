"""Held-out interaction importance (treeimp.interaction_importance) against brute force
from the libraries' own per-tree SHAP interaction values."""

import numpy as np
import pytest

import treeimp
from treeimp.results.finalize import jackknife_stderr
from treeimp.stats.blocks import block_key, row_blocks

shap = pytest.importorskip("shap")
xgb = pytest.importorskip("xgboost")
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # noqa: E402

N_BLOCKS = 5


def _design(n, seed, F=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    X[:, F - 1] = rng.integers(0, 50, size=n)  # many distinct values, noise
    y = 2.0 + X[:, 0] * X[:, 1] + 0.3 * X[:, 2] + 0.3 * rng.normal(size=n)
    return X, y


def _pairs(F):
    return np.triu_indices(F, 1)


def _labels(F):
    j, k = _pairs(F)
    return [f"x{a} x x{b}" for a, b in zip(j, k)]


def _forest_truth(rf, X, Z, block, *, oob, centered, w=None):
    """Per tree t: the mean over its evaluation rows (out of bag, or all) of
    (z_i - c_t) . 2 Phi_t,jk(x_i) (shap's per-tree interaction values, one-hot targets
    for a classifier), the leave-one-block-out replicates and all rows; forest: mean over
    trees. Also the main parts mean z . Phi_t,jj and the per-tree weights."""
    n, F = X.shape
    w = np.ones(n) if w is None else w
    j, k = _pairs(F)
    reps = np.zeros((N_BLOCKS + 1, len(j)))
    counts = np.zeros(N_BLOCKS + 1)
    main = np.zeros(F)
    for est, inbag in zip(rf.estimators_, rf.estimators_samples_):
        phi = np.asarray(shap.TreeExplainer(est).shap_interaction_values(X))
        if phi.ndim == 3:
            phi = phi[..., None]
        elif isinstance(rf, RandomForestClassifier) and phi.shape[1] != F:  # (C, n, F, F)
            phi = np.moveaxis(phi, 0, -1)
        root = est.tree_.value[0, 0] / est.tree_.value[0, 0].sum() \
            if isinstance(rf, RandomForestClassifier) else est.tree_.value[0, 0]
        c = root if centered else np.zeros_like(root)
        ev = np.ones(n, bool)
        if oob:
            ev[np.unique(inbag)] = False
        term = np.einsum("nc,njkc->njk", Z - c, phi)  # (n, F, F)
        pair = 2.0 * term[:, j, k]
        main += np.einsum("nc,njjc->nj", Z, phi)[ev].mean(axis=0)
        for b in range(N_BLOCKS + 1):
            rows = ev & (block != b) if b < N_BLOCKS else ev
            if rows.any():
                reps[b] += w[rows] @ pair[rows] / w[rows].sum()
                counts[b] += 1
    return reps / counts[:, None], main / len(rf.estimators_)


def _check(res, reps, F, *, oob, method):
    labels = _labels(F)
    got = res.table[method].reindex(labels).to_numpy()
    np.testing.assert_allclose(got, reps[-1], rtol=1e-9, atol=1e-12)
    bv = res.block_values[method]
    order = [list(res.table.index).index(lab) for lab in labels]
    np.testing.assert_allclose(bv[:, order], reps[:-1], rtol=1e-9, atol=1e-12)
    factor = np.sqrt(1.6) if oob else 1.0
    np.testing.assert_allclose(res.stderr[method].reindex(labels).to_numpy(),
                               factor * jackknife_stderr(reps[:-1]), rtol=1e-7, atol=1e-14)


@pytest.mark.parametrize("oob,centered", [(True, True), (True, False), (False, True)])
def test_forest_regression_equals_shap_per_tree(oob, centered):
    X, y = _design(160, 1)
    rf = RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0).fit(X, y)
    if not oob:  # held-out rows
        X, y = _design(120, 2)
    block = row_blocks(range(len(y)), block_key(3), N_BLOCKS)
    res = treeimp.interaction_importance(rf, X, y, oob=oob, centered=centered,
                                         n_blocks=N_BLOCKS, random_state=3)
    reps, _ = _forest_truth(rf, X, y[:, None], block, oob=oob, centered=centered)
    method = "interaction_oob_centered" if centered else "interaction_oob"
    assert list(res.table.columns) == [method]
    _check(res, reps, X.shape[1], oob=oob, method=method)
    # most important first
    assert np.all(np.diff(res.table[method].to_numpy()) <= 0)


def test_forest_sample_weight_held_out():
    X, y = _design(160, 13)
    rf = RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0).fit(X, y)
    X, y = _design(100, 14)
    w = np.random.default_rng(0).uniform(0, 3, size=len(y))
    w[:7] = 0.0
    block = row_blocks(range(len(y)), block_key(1), N_BLOCKS)
    res = treeimp.interaction_importance(rf, X, y, sample_weight=w, n_blocks=N_BLOCKS,
                                         random_state=1)
    reps, _ = _forest_truth(rf, X, y[:, None], block, oob=False, centered=True, w=w)
    _check(res, reps, X.shape[1], oob=False, method="interaction_oob_centered")


def test_forest_classifier_one_hot():
    X, y = _design(150, 4)
    yc = (y > np.median(y)).astype(int) + (X[:, 2] > 1)  # three classes
    rf = RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(X, yc)
    block = row_blocks(range(len(yc)), block_key(5), N_BLOCKS)
    res = treeimp.interaction_importance(rf, X, yc, oob=True, n_blocks=N_BLOCKS,
                                         random_state=5)
    Z = np.eye(3)[yc]
    reps, _ = _forest_truth(rf, X, Z, block, oob=True, centered=True)
    _check(res, reps, X.shape[1], oob=True, method="interaction_oob_centered")


def test_pairs_and_main_effects_add_up_to_shap_oob():
    """Per row, phi_j = Phi_jj + sum_{k != j} Phi_jk, so with the same (uncentred)
    target: shap_oob_j = mean z Phi_jj + (1/2) sum_{k != j} pair_jk (the pair value
    counts Phi_jk twice)."""
    X, y = _design(160, 6)
    rf = RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0).fit(X, y)
    F = X.shape[1]
    res = treeimp.interaction_importance(rf, X, y, oob=True, centered=False,
                                         n_blocks=N_BLOCKS, random_state=0)
    block = row_blocks(range(len(y)), block_key(0), N_BLOCKS)
    _, main = _forest_truth(rf, X, y[:, None], block, oob=True, centered=False)
    shap_oob = treeimp.explain(rf, X, y, oob=True, methods=("shap_oob",), n_blocks=N_BLOCKS,
                               random_state=0).table["shap_oob"].to_numpy()
    pair = np.zeros((F, F))
    j, k = _pairs(F)
    pair[j, k] = res.table["interaction_oob"].reindex(_labels(F)).to_numpy()
    pair = pair + pair.T
    np.testing.assert_allclose(main + 0.5 * pair.sum(axis=1), shap_oob, rtol=1e-9,
                               atol=1e-12)


def test_centred_value_ignores_a_constant_added_to_y():
    X, y = _design(160, 7)
    y = np.round(4 * y)  # integer targets: the shifted forest grows the same trees exactly
    rf = RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0).fit(X, y)
    rf2 = RandomForestRegressor(n_estimators=8, max_depth=4, random_state=0).fit(X, y + 64)
    for a_, b_ in zip(rf.estimators_, rf2.estimators_):
        np.testing.assert_array_equal(a_.tree_.feature, b_.tree_.feature)
        np.testing.assert_array_equal(a_.tree_.threshold, b_.tree_.threshold)
    a = treeimp.interaction_importance(rf, X, y, oob=True, random_state=0, n_blocks=N_BLOCKS)
    b = treeimp.interaction_importance(rf2, X, y + 64, oob=True, random_state=0,
                                       n_blocks=N_BLOCKS)
    m = "interaction_oob_centered"
    np.testing.assert_allclose(a.table[m], b.table[m].reindex(a.table.index), atol=1e-9)
    u = treeimp.interaction_importance(rf2, X, y + 64, oob=True, centered=False,
                                       random_state=0, n_blocks=N_BLOCKS)
    assert not np.allclose(u.table["interaction_oob"].reindex(a.table.index), a.table[m],
                           atol=1e-3)


def _boosting_truth(bst, X, y, block, centered, X_train, y_train, base):
    """Per tree: mean over rows of (-g - mu_t h) 2 Phi_t,jk, g = margin - y before the tree
    (squared error, h = 1), Phi from XGBoost's pred_interactions of the one-tree slice,
    mu_t the mean training residual before the tree (the root's -G/H, lambda = 0);
    boosting: sum over trees."""
    F = X.shape[1]
    j, k = _pairs(F)
    n_trees = bst.num_boosted_rounds()
    d, d_train = xgb.DMatrix(X), xgb.DMatrix(X_train)
    reps = np.zeros((N_BLOCKS + 1, len(j)))
    for t in range(n_trees):
        if t == 0:
            margin = np.full(len(y), base)
            margin_tr = np.full(len(y_train), base)
        else:
            margin = bst.predict(d, output_margin=True, iteration_range=(0, t))
            margin_tr = bst.predict(d_train, output_margin=True, iteration_range=(0, t))
        mu = (y_train - margin_tr).mean() if centered else 0.0
        z = (y - margin) - mu
        phi = bst[t:t + 1].predict(d, pred_interactions=True)[:, :F, :F].astype(np.float64)
        pair = 2.0 * z[:, None] * phi[:, j, k]
        for b in range(N_BLOCKS + 1):
            rows = block != b if b < N_BLOCKS else np.ones(len(y), bool)
            reps[b] += pair[rows].mean(axis=0)
    return reps


@pytest.mark.parametrize("centered", [False, True])
def test_boosting_staged_gradients(centered):
    X_tr, y_tr = _design(300, 8)
    X, y = _design(150, 9)
    bst = xgb.train({"max_depth": 3, "eta": 0.3, "lambda": 0.0, "base_score": 0.5,
                     "objective": "reg:squarederror"}, xgb.DMatrix(X_tr, label=y_tr),
                    num_boost_round=6)
    block = row_blocks(range(len(y)), block_key(2), N_BLOCKS)
    res = treeimp.interaction_importance(bst, X, y, centered=centered, n_blocks=N_BLOCKS,
                                         random_state=2)
    reps = _boosting_truth(bst, X, y, block, centered, X_tr, y_tr, 0.5)
    method = "interaction_oob_centered" if centered else "interaction_oob"
    labels = _labels(X.shape[1])
    # XGBoost's interaction values are float32
    np.testing.assert_allclose(res.table[method].reindex(labels).to_numpy(), reps[-1],
                               rtol=2e-5, atol=2e-6)
    order = [list(res.table.index).index(lab) for lab in labels]
    np.testing.assert_allclose(res.block_values[method][:, order], reps[:-1], rtol=2e-5,
                               atol=2e-6)


def test_true_pair_first_noise_pair_not_significant():
    rng = np.random.default_rng(11)
    n, F = 600, 6
    X = rng.normal(size=(n, F))
    X[:, 5] = rng.uniform(size=n)  # continuous noise, every value distinct
    y = X[:, 0] * X[:, 1] + 0.5 * rng.normal(size=n)
    rf = RandomForestRegressor(n_estimators=40, min_samples_leaf=3, random_state=0,
                               max_features=0.5).fit(X, y)
    res = treeimp.interaction_importance(rf, X, y, oob=True, random_state=0)
    assert res.ranking()[0] == "x0 x x1"
    assert res.select() == ["x0 x x1"]
    assert "15 pairs" in repr(res)
    p = res.pvalues["interaction_oob_centered"]
    assert p["x0 x x1"] < 1e-3
    assert p["x2 x x5"] > 0.05
    # the same forest in-bag: every training row, the in-sample bias makes noise pairs
    # look important
    inbag = treeimp.interaction_importance(rf, X, y, random_state=0)
    assert inbag.table.loc["x2 x x5"].iloc[0] > 5 * max(res.table.loc["x2 x x5"].iloc[0],
                                                         1e-4)


def test_bad_input():
    X, y = _design(100, 12)
    rf = RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="y"):
        treeimp.interaction_importance(rf, X, y[:-1], n_blocks=N_BLOCKS)
    with pytest.raises(TypeError, match="centered"):
        treeimp.interaction_importance(rf, X, y, centered="yes", n_blocks=N_BLOCKS)
    with pytest.raises(ValueError, match="n_blocks"):
        treeimp.interaction_importance(rf, X[:3], y[:3], n_blocks=5)
    bst = xgb.train({"max_depth": 2}, xgb.DMatrix(X, label=y), num_boost_round=2)
    with pytest.raises(ValueError, match="oob=True is for bagged forests"):
        treeimp.interaction_importance(bst, X, y, oob=True, n_blocks=N_BLOCKS)
    Y = np.column_stack([y, -y])
    vec = xgb.train({"max_depth": 2, "multi_strategy": "multi_output_tree",
                     "tree_method": "hist"}, xgb.DMatrix(X, label=Y), num_boost_round=2)
    with pytest.raises(ValueError, match="vector-leaf"):
        treeimp.interaction_importance(vec, X, Y, n_blocks=N_BLOCKS)
    multi = RandomForestRegressor(n_estimators=3, max_depth=2, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="one target"):
        treeimp.interaction_importance(multi, X, Y, n_blocks=N_BLOCKS)


def test_boosting_multiclass_softmax():
    """Each round's K trees: z = one-hot(y)_c - softmax(margin before the round)_c for
    class c's tree, Phi from the round's slice of pred_interactions (uncentred)."""
    X_tr, y0 = _design(240, 15)
    X, y1 = _design(120, 16)
    cut = np.quantile(y0, [1 / 3, 2 / 3])
    y_tr, y = np.digitize(y0, cut), np.digitize(y1, cut)
    K, F = 3, X.shape[1]
    bst = xgb.train({"max_depth": 3, "eta": 0.3, "objective": "multi:softprob",
                     "num_class": K, "base_score": 0.5}, xgb.DMatrix(X_tr, label=y_tr),
                    num_boost_round=4)
    res = treeimp.interaction_importance(bst, X, y, centered=False, n_blocks=N_BLOCKS,
                                         random_state=4)
    d = xgb.DMatrix(X)
    j, k = _pairs(F)
    total = np.zeros(len(j))
    onehot = np.eye(K)[y]
    for r in range(bst.num_boosted_rounds()):
        margin = (np.full((len(y), K), 0.5) if r == 0
                  else bst.predict(d, output_margin=True, iteration_range=(0, r)))
        p = np.exp(margin - margin.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        phi = bst[r:r + 1].predict(d, pred_interactions=True)[:, :, :F, :F]
        for c in range(K):
            z = onehot[:, c] - p[:, c]
            total += (2.0 * z[:, None] * phi[:, c][:, j, k].astype(np.float64)).mean(axis=0)
    np.testing.assert_allclose(res.table["interaction_oob"].reindex(_labels(F)).to_numpy(),
                               total, rtol=2e-5, atol=2e-6)

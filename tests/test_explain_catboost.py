"""CatBoost objectives and held-out explanations.

Derivatives: CatBoost's own der1 / der2 are read from one-tree models grown on a
baseline with learning rate 1 and no L2: with leaf_estimation_method="Gradient" a leaf is
sum w der1 / sum w, with "Newton" sum w der1 / -sum w der2 (checked on catboost 1.2.10),
so the leaves give CatBoost's sums of both, which must equal treeimp's -g and -h.
"""

import json

import numpy as np
import pytest

import treeimp
from treeimp.inputs.rows import RowSource
from treeimp.model.losses import check_target, grad_hess_array
from treeimp.stats.drivers import staged_pass

catboost = pytest.importorskip("catboost")

N = 400
OBJECTIVES = [  # (CatBoost loss, target kind, Newton allowed)
    ("RMSE", "real", True), ("MAE", "tie", False), ("Quantile:alpha=0.3", "tie", False),
    ("Huber:delta=0.5", "real", True), ("Expectile:alpha=0.3", "real", True),
    ("LogCosh", "real", True), ("Logloss", "binary", True),
    ("Logloss+class_weights", "binary", True), ("CrossEntropy", "prob", True),
    ("MultiClass", "class", False), ("MultiClassOneVsAll", "class", True),
    ("Poisson", "count", True), ("Tweedie:variance_power=1.5", "count", True),
]


def _problem(kind, rng):
    X = rng.normal(size=(N, 2))
    base = 0.5 * rng.normal(size=N)
    if kind == "real":
        y = rng.normal(size=N)
    elif kind == "tie":  # rows at, within 5e-7 of, and 3e-6 from their baseline
        y = np.round(rng.normal(size=N), 1) + 1.0
        base = y.copy()
        base[::2] += rng.normal(size=N)[::2]
        base[1::8] += 5e-7  # CatBoost's delta (1e-6): der1 is 0 here
        base[3::8] -= 3e-6  # and not here
    elif kind == "binary":
        y = rng.integers(0, 2, N).astype(float)
    elif kind == "prob":
        y = rng.uniform(size=N)
    elif kind == "class":
        y = rng.integers(0, 3, N)
        base = 0.5 * rng.normal(size=(N, 3))
    else:
        y = rng.poisson(1.5, N).astype(float)
    # a Pool keeps baselines and labels as float32
    return X, np.asarray(y).astype(np.float32).astype(y.dtype), base.astype(np.float32).astype(
        np.float64)


def _one_tree(loss, X, y, w, base, method):
    pool = catboost.Pool(X, y, weight=w, baseline=base)
    extra = {}
    if loss.endswith("+class_weights"):  # the negative class weighs 0.5, the positive 3
        loss, extra = loss.split("+")[0], {"class_weights": [0.5, 3.0]}
    model = catboost.CatBoost(dict(
        **extra, loss_function=loss, iterations=1, depth=1, learning_rate=1.0, l2_leaf_reg=0,
        leaf_estimation_method=method, leaf_estimation_iterations=1,
        boost_from_average=False, random_strength=0, bootstrap_type="No", verbose=0,
        allow_writing_files=False, thread_count=1)).fit(pool)
    leaf = model.calc_leaf_indexes(X)[:, 0]
    values = np.asarray(model.get_leaf_values()).reshape(2, -1)
    return model, leaf, values


@pytest.mark.parametrize("loss,kind,newton", OBJECTIVES, ids=[o[0] for o in OBJECTIVES])
def test_gradients_and_hessians_equal_catboost_leaf_sums(loss, kind, newton):
    rng = np.random.default_rng(1)
    X, y, base = _problem(kind, rng)
    w = rng.uniform(0.5, 2.0, N).astype(np.float32).astype(np.float64)
    model, leaf, grad_leaves = _one_tree(loss, X, y, w, base, "Gradient")
    ens = treeimp.parse(model)
    target = check_target(ens.objective, y, ens.classes)
    g, h = grad_hess_array(ens.objective, base.reshape(N, -1), target)
    sw = w  # the weights CatBoost's leaf sums use
    if "class_weights" in loss:  # CatBoost scales the row weights by them
        assert ens.objective.params["pos_weight"] == 3.0
        sw = w * np.where(y == 1, 3.0, 0.5)
        g, h = g / np.where(y == 1, 3.0, 0.5)[:, None], h / np.where(y == 1, 3.0, 0.5)[:, None]
    for L in range(2):
        s = leaf == L
        # CatBoost sums some of these in float32: 1e-6 (a wrong factor, sign or tie
        # gradient is off by far more)
        np.testing.assert_allclose(grad_leaves[L], (sw[s, None] * -g[s]).sum(0) / sw[s].sum(),
                                   rtol=1e-6, atol=1e-12)
    if newton:
        _, leaf, newton_leaves = _one_tree(loss, X, y, w, base, "Newton")
        for L in range(2):
            s = leaf == L
            np.testing.assert_allclose(newton_leaves[L], (sw[s, None] * -g[s]).sum(0)
                                       / (sw[s, None] * h[s]).sum(0), rtol=1e-6)


def test_multiclass_hessian_is_the_diagonal_of_catboosts():
    """MultiClass's Newton step inverts the full K x K hessian; treeimp's h is its
    diagonal p (1 - p), the second difference of CatBoost's own MultiClass metric."""
    from catboost.utils import eval_metric

    rng = np.random.default_rng(2)
    _, y, base = _problem("class", rng)
    ens = treeimp.parse(_one_tree("MultiClass", rng.normal(size=(N, 2)), y, np.ones(N),
                                  base, "Gradient")[0])
    g, h = grad_hess_array(ens.objective, base[:5], y[:5])
    eps = 1e-4
    for i in range(5):
        for k in range(3):
            def loss(delta, i=i, k=k):
                m = base[i].copy()
                m[k] += delta
                return eval_metric([float(y[i])], [list(m)], "MultiClass")[0]
            second = (loss(eps) - 2 * loss(0.0) + loss(-eps)) / eps**2
            first = (loss(eps) - loss(-eps)) / (2 * eps)
            assert second == pytest.approx(h[i, k], rel=1e-4)
            assert first == pytest.approx(g[i, k], rel=1e-6, abs=1e-9)


def test_unsupported_objective_is_named():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(100, 2))
    y = np.exp(rng.normal(size=100))
    model = catboost.CatBoostRegressor(iterations=3, depth=2, verbose=0, loss_function="MAPE",
                                       allow_writing_files=False).fit(X, y)
    ens = treeimp.parse(model)
    np.testing.assert_allclose(ens.predict_raw(X)[:, 0],
                               model.predict(X, prediction_type="RawFormulaVal"), rtol=1e-12)
    with pytest.raises(ValueError, match="catboost:MAPE"):
        treeimp.explain(model, X, y)


# ------------------------------------------------------------------ staged margins
def _model(kind, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(600, 4))
    X[::9, 1] = np.nan
    f = X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) + 0.1 * rng.normal(size=600)
    common = dict(iterations=8, depth=3, random_seed=0, verbose=0, allow_writing_files=False,
                  thread_count=1)
    if kind == "regression":
        return catboost.CatBoostRegressor(**common).fit(X[:300], f[:300]), X, f
    if kind == "poisson":
        y = rng.poisson(np.exp(0.3 * f))
        return catboost.CatBoostRegressor(**common, loss_function="Poisson").fit(
            X[:300], y[:300]), X, y
    if kind == "binary":
        y = (f > 0).astype(int)
        return catboost.CatBoostClassifier(**common).fit(X[:300], y[:300]), X, y
    y = np.digitize(f, [-0.5, 0.5])
    return catboost.CatBoostClassifier(**common, loss_function="MultiClass").fit(
        X[:300], y[:300]), X, y


@pytest.mark.parametrize("kind", ["regression", "poisson", "binary", "multiclass"])
def test_staged_margin_after_the_last_tree_is_catboosts_raw_prediction(kind):
    model, X, y = _model(kind)
    ens = treeimp.parse(model)
    rows = RowSource(X[300:], ens)
    block = np.arange(300, dtype=np.int32) % 3
    _, margin = staged_pass(ens, rows, y[300:], np.ones(300), block, 3)
    raw = np.asarray(model.predict(X[300:], prediction_type="RawFormulaVal"))
    np.testing.assert_allclose(margin, raw.reshape(300, -1), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind", ["regression", "binary", "multiclass"])
def test_mdi_oob_equals_brute_force_over_catboost_trees(kind, tmp_path):
    """Per CatBoost tree: node means from its leaf values and weights, rows' nodes from
    calc_leaf_indexes, der1 from CatBoost's formulas at the margin of the trees before
    (CatBoost's own predict with ntree_end), summed as Li et al.'s eq. 14."""
    model, X, y = _model(kind, seed=1)
    Xe, ye = X[300:], y[300:]
    res = treeimp.explain(model, Xe, ye, methods=("mdi_oob",), random_state=0)
    path = tmp_path / "m.json"
    model.save_model(str(path), format="json")
    doc = json.loads(path.read_text())
    scale, bias = doc["scale_and_bias"]
    leaves = model.calc_leaf_indexes(Xe)
    total = np.zeros(X.shape[1])
    for t, tree in enumerate(doc["oblivious_trees"]):
        margin = (np.tile(np.asarray(bias, float), (300, 1)) if t == 0 else
                  np.asarray(model.predict(Xe, prediction_type="RawFormulaVal",
                                           ntree_end=t)).reshape(300, -1))
        if kind == "regression":
            der1 = (ye - margin[:, 0])[:, None]
        elif kind == "binary":
            der1 = (ye - 1 / (1 + np.exp(-margin[:, 0])))[:, None]
        else:
            p = np.exp(margin - margin.max(1, keepdims=True))
            der1 = np.eye(3)[ye] - p / p.sum(1, keepdims=True)
        D = len(tree["splits"])
        K = der1.shape[1]
        v = scale * np.asarray(tree["leaf_values"]).reshape(1 << D, K)
        w = np.asarray(tree["leaf_weights"], float)
        L = leaves[:, t]

        def node(d, q, D=D, v=v, w=w):
            """(value, weight) of the node at depth d over the leaves whose high d bits
            are q (CatBoost's order: the last split at the root, as its ShapValues walks
            a tree, shap_values.cpp): the weight-mean of its children (their plain mean
            when both are empty)."""
            if d == D:
                return v[q], w[q]
            (v0, w0), (v1, w1) = node(d + 1, 2 * q), node(d + 1, 2 * q + 1)
            return ((w0 * v0 + w1 * v1) / (w0 + w1) if w0 + w1 > 0 else (v0 + v1) / 2,
                    w0 + w1)

        for d in range(D):
            f = tree["splits"][D - 1 - d]["float_feature_index"]
            for q in range(1 << d):
                vm = node(d, q)[0]
                for child in (2 * q, 2 * q + 1):
                    rows = L >> (D - d - 1) == child
                    total[f] += np.sum((node(d + 1, child)[0] - vm) * der1[rows].sum(0)) / 300
    np.testing.assert_allclose(res.table["mdi_oob"].to_numpy(), total, rtol=1e-8, atol=1e-12)


# ------------------------------------------------------------------ Zhou & Hooker
def _zhou_hooker(n, rng, regression):
    X = np.column_stack([rng.integers(0, i + 1, n) for i in range(1, 11)]).astype(float)
    if regression:
        return X, X[:, 0] + 5 * rng.normal(size=n)
    return X, (rng.random(n) < np.where(X[:, 0] == 1, 0.55, 0.45)).astype(int)


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_zhou_hooker_informative_feature_ranks_first_held_out(task):
    """CatBoost, 100 rounds of depth 3, learning rate 0.1, held-out set as large as the
    training set: mdi_oob ranks the informative binary X_1 first on average (mean rank
    <= 1.5) while CatBoost's in-sample PredictionValuesChange does not (mean rank >= 3;
    measured: 1.2 / 7.0 regression, 1.0 / 4.2 classification)."""
    rng = np.random.default_rng(0)
    ranks = {"mdi": [], "mdi_oob": []}
    cls = catboost.CatBoostRegressor if task == "regression" else catboost.CatBoostClassifier
    for rep in range(5):
        X, y = _zhou_hooker(2000, rng, task == "regression")
        model = cls(iterations=100, depth=3, learning_rate=0.1, random_seed=rep, verbose=0,
                    allow_writing_files=False, thread_count=1).fit(X[:1000], y[:1000])
        res = treeimp.explain(model, X[1000:], y[1000:], methods=("mdi", "mdi_oob"),
                              random_state=rep)
        for m in ranks:
            v = res.table[m].to_numpy()
            ranks[m].append(1 + np.sum(v[1:] > v[0]))
    assert np.mean(ranks["mdi_oob"]) <= 1.5, ranks
    assert np.mean(ranks["mdi"]) >= 3, ranks


def test_staged_margin_with_one_hot_categories_in_a_dataframe():
    import pandas as pd

    rng = np.random.default_rng(9)
    n = 600
    X = pd.DataFrame({"x": rng.normal(size=n), "s": rng.choice(["a", "b", "c"], n),
                      "k": rng.integers(0, 3, n)})
    y = ((X["x"] + (X["s"] == "b") - (X["k"] == 2)) > 0).astype(int).to_numpy()
    model = catboost.CatBoostClassifier(iterations=8, depth=3, one_hot_max_size=4,
                                        cat_features=["s", "k"], verbose=0, random_seed=0,
                                        allow_writing_files=False, thread_count=1).fit(
        X[:300], y[:300])
    Xe = X[300:].reset_index(drop=True)
    Xe.loc[::10, "s"] = "unseen"
    ens = treeimp.parse(model)
    _, margin = staged_pass(ens, RowSource(Xe, ens), y[300:], np.ones(300),
                            np.arange(300, dtype=np.int32) % 3, 3)
    np.testing.assert_allclose(margin[:, 0], model.predict(Xe, prediction_type="RawFormulaVal"),
                               rtol=1e-10, atol=1e-12)
    res = treeimp.explain(model, Xe, y[300:], random_state=0)
    assert res.table["mdi_oob"].idxmax() in ("x", "s", "k")
    assert np.all(np.isfinite(res.table.to_numpy()))


def test_baseline_and_iteration_range_follow_catboost():
    """base_margin is CatBoost's baseline (added to the raw prediction) and
    iteration_range its ntree_start / ntree_end: predict_raw and the staged final margin
    equal CatBoost's RawFormulaVal of the same Pool and tree range, and permutation
    importance with the offset equals a brute force through CatBoost."""
    rng = np.random.default_rng(11)
    X = rng.normal(size=(600, 3))
    exposure = rng.uniform(0.5, 2.0, 600)
    y = rng.poisson(exposure * np.exp(0.5 * X[:, 0] - 0.3 * X[:, 1])).astype(float)
    base = np.log(exposure).astype(np.float32).astype(np.float64)  # a Pool keeps float32
    model = catboost.CatBoostRegressor(loss_function="Poisson", iterations=30, depth=3,
                                       learning_rate=0.2, verbose=0, random_seed=0,
                                       allow_writing_files=False)
    model.fit(catboost.Pool(X[:400], y[:400], baseline=base[:400]))
    Xv, yv, bv = X[400:], y[400:], base[400:]
    raw = model.predict(catboost.Pool(Xv, baseline=bv), prediction_type="RawFormulaVal")
    ens = treeimp.parse(model)
    np.testing.assert_allclose(ens.predict_raw(Xv, base_margin=bv)[:, 0], raw, rtol=1e-12,
                               atol=1e-12)
    assert np.abs(raw - model.predict(Xv, prediction_type="RawFormulaVal")).max() > 0.1
    _, margin = staged_pass(ens, RowSource(Xv, ens), yv, np.ones(1),
                            np.arange(len(yv)) % 2, 2, base_margin=bv[:, None])
    np.testing.assert_allclose(margin[:, 0], raw, rtol=1e-12, atol=1e-12)
    part = treeimp.parse(model, iteration_range=(5, 20))
    ref = model.predict(Xv, prediction_type="RawFormulaVal", ntree_start=5, ntree_end=20)
    np.testing.assert_allclose(part.predict_raw(Xv)[:, 0], ref, rtol=1e-12, atol=1e-12)
    # permutation importance with the offset: scikit-learn's, of CatBoost's own
    # prediction with that baseline
    from sklearn.base import BaseEstimator, RegressorMixin
    from sklearn.inspection import permutation_importance

    class Deployed(RegressorMixin, BaseEstimator):
        def fit(self, X, y):
            return self

        def predict(self, Z):
            return np.exp(model.predict(catboost.Pool(Z, baseline=bv),
                                        prediction_type="RawFormulaVal"))

        def __sklearn_is_fitted__(self):
            return True

    kw = dict(n_repeats=2, random_state=3, scoring="neg_mean_squared_error")
    ours = treeimp.permutation_importance(model, Xv, yv, base_margin=bv, **kw)
    ref = permutation_importance(Deployed(), Xv, yv, **kw)
    np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-9, atol=1e-12)
    without = treeimp.permutation_importance(model, Xv, yv, **kw)
    assert np.abs(without.importances - ours.importances).max() > 0.05

"""mdi_oob_centered: equal to a brute-force per-tree computation (forests out of bag,
gradient boosting held out), invariant to adding a constant to y, per-class parts that
sum to it, and a zero noise mean on null designs where mdi_oob's is not."""

import numpy as np
import pytest
from sklearn.ensemble import (
    GradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

import treeimp


def _saabas(tree, X, value):
    """(n_rows, n_features, C) Saabas contributions sum over path splits on k of
    value[child] - value[node], walked by hand from the tree arrays."""
    left, right, feat, thr = (tree.children_left, tree.children_right, tree.feature,
                              tree.threshold)
    out = np.zeros((X.shape[0], X.shape[1], value.shape[1]))
    for i, x in enumerate(X.astype(np.float32)):
        node = 0
        while left[node] >= 0:
            child = left[node] if x[feat[node]] <= thr[node] else right[node]
            out[i, feat[node]] += value[child] - value[node]
            node = child
    return out


def _brute_force_forest(rf, X, Z):
    """Mean over trees of the mean over the tree's out-of-bag rows of
    (z_i - c_t) . f_k(x_i), c_t the tree's root value (in-bag mean / class shares)."""
    n = X.shape[0]
    per_tree = []
    for est, inbag in zip(rf.estimators_, rf.estimators_samples_):
        oob = np.setdiff1d(np.arange(n), inbag)
        value = est.tree_.value[:, 0, :Z.shape[1]].astype(float)
        f = _saabas(est.tree_, X[oob], value)
        per_tree.append(np.einsum("ikc,ic->k", f, Z[oob] - value[0]) / len(oob))
    return np.mean(per_tree, axis=0)


def test_forest_regression_equals_brute_force():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    y = 30 + X[:, 0] + rng.exponential(size=200)
    rf = RandomForestRegressor(n_estimators=8, min_samples_leaf=3, random_state=0).fit(X, y)
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi_oob_centered",), random_state=0)
    expected = _brute_force_forest(rf, X, y[:, None])
    np.testing.assert_allclose(res.table["mdi_oob_centered"], expected, rtol=1e-10,
                               atol=1e-12)


def test_forest_classification_equals_brute_force_and_parts_sum():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(240, 4))
    y = np.where(X[:, 0] > 0.8, 2, (rng.random(240) < 0.2).astype(int))
    rf = RandomForestClassifier(n_estimators=8, min_samples_leaf=3, random_state=0).fit(X, y)
    for methods in (("mdi_oob_centered",), ("mdi_oob", "mdi_oob_centered", "ufi")):
        res = treeimp.explain(rf, X, y, oob=True, methods=methods, random_state=0)
        Z = np.eye(3)[y]
        np.testing.assert_allclose(res.table["mdi_oob_centered"],
                                   _brute_force_forest(rf, X, Z), rtol=1e-10, atol=1e-12)
        parts = res.table_by_class["mdi_oob_centered"]
        np.testing.assert_allclose(parts.sum(axis=1), res.table["mdi_oob_centered"],
                                   rtol=1e-10, atol=1e-14)


def test_gradient_boosting_equals_brute_force():
    """Squared error: -g = y - margin before the tree, h = 1; the centre is the tree's
    unshrunk root value (its training rows' mean residual)."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 4))
    y = 10 + X[:, 0] - X[:, 1] + rng.normal(size=300)
    Xt, yt, Xv, yv = X[:200], y[:200], X[200:], y[200:]
    gb = GradientBoostingRegressor(n_estimators=6, max_depth=2, learning_rate=0.5,
                                   subsample=0.7, random_state=0).fit(Xt, yt)
    margin = np.full(len(yv), gb.init_.constant_[0, 0] if hasattr(gb.init_, "constant_")
                     else np.mean(yt))
    expected = np.zeros(X.shape[1])
    for est in gb.estimators_[:, 0]:
        value = est.tree_.value[:, 0, :1].astype(float)
        f = _saabas(est.tree_, Xv, gb.learning_rate * value)
        expected += np.einsum("ik,i->k", f[..., 0], (yv - margin) - value[0, 0]) / len(yv)
        margin = margin + gb.learning_rate * est.predict(Xv)
    res = treeimp.explain(gb, Xv, yv, methods=("mdi_oob", "mdi_oob_centered"),
                          random_state=0)
    np.testing.assert_allclose(res.table["mdi_oob_centered"], expected, rtol=1e-8,
                               atol=1e-12)
    assert not np.allclose(res.table["mdi_oob"], expected)  # subsampled: roots are not 0


def test_invariant_to_adding_a_constant_to_y():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = np.round(2 * X[:, 0] + rng.normal(size=300))  # integers: the same trees for y + 50
    kw = dict(n_estimators=20, min_samples_leaf=5, random_state=0)
    a = RandomForestRegressor(**kw).fit(X, y)
    b = RandomForestRegressor(**kw).fit(X, y + 50)
    for ta, tb in zip(a.estimators_, b.estimators_):
        np.testing.assert_array_equal(ta.tree_.threshold, tb.tree_.threshold)
    methods = ("mdi_oob", "mdi_oob_centered")
    ra = treeimp.explain(a, X, y, oob=True, methods=methods, random_state=0)
    rb = treeimp.explain(b, X, y + 50, oob=True, methods=methods, random_state=0)
    for frame in ("table", "stderr", "pvalues"):
        np.testing.assert_allclose(getattr(rb, frame)["mdi_oob_centered"],
                                   getattr(ra, frame)["mdi_oob_centered"], rtol=1e-9,
                                   atol=1e-12)
    # Li et al.'s formula moves with the constant
    assert np.max(np.abs(rb.table["mdi_oob"] - ra.table["mdi_oob"])) > 0.1


def _noise_means(make, reps=30):
    """Per repetition, the mean over 8 pure-noise features of each measure."""
    methods = ("mdi_oob", "mdi_oob_centered")
    out = {m: [] for m in methods}
    for rep in range(reps):
        rng = np.random.default_rng(rep)
        X = rng.normal(size=(300, 8))
        model, y = make(rng, rep)
        model.fit(X, y)
        res = treeimp.explain(model, X, y, oob=True, methods=methods, random_state=rep,
                              n_jobs=1)
        for m in methods:
            out[m].append(res.table[m].mean())
    return {m: np.mean(v) / (np.std(v, ddof=1) / np.sqrt(reps)) for m, v in out.items()}


@pytest.mark.parametrize("design", ["skewed target, mean 20", "imbalanced classes 15%"])
def test_noise_mean_zero_where_mdi_oob_is_biased(design):
    """Null designs (y independent of X): over 30 data sets the centred measure's mean on
    noise features is within 3 standard errors of 0, mdi_oob's is not (t here: skewed
    target 4.4 vs -0.5; imbalanced classes -4.2 vs -1.5). With a symmetric target
    mdi_oob has mean 0 too (reflecting y about its mean flips every contribution), so the
    designs are the ones where E[y] != 0 meets a skewed y."""
    if design.startswith("skewed"):
        def make(rng, rep):
            return (RandomForestRegressor(n_estimators=25, min_samples_leaf=5,
                                          max_features=0.5, random_state=rep, n_jobs=1),
                    20 + 3 * rng.exponential(size=300))
    else:
        def make(rng, rep):
            return (RandomForestClassifier(n_estimators=25, min_samples_leaf=5,
                                           random_state=rep, n_jobs=1),
                    (rng.random(300) < 0.15).astype(int))
    t = _noise_means(make)
    assert abs(t["mdi_oob_centered"]) < 3, t
    assert abs(t["mdi_oob"]) > 3, t


@pytest.mark.parametrize("kind", ["regression", "multiclass", "multiclass one-hot",
                                  "boosting"])
def test_fused_kernel_equals_the_numpy_form(kind):
    """kernels/fused_measures.py's MDI_OOB_CENTERED sums equal mdi_oob's fused sums minus the
    numpy centring term, split by split summed per tree, feature and class."""
    from tests.test_formulas import _forest, _stats
    from treeimp.inputs.rows import RowSource
    from treeimp.measures import formulas as measures
    from treeimp.measures.formulas import MDI_OOB
    from treeimp.measures.formulas import NodeSums as NodeStats
    from treeimp.stats.drivers import staged_pass

    if kind == "boosting":
        rng = np.random.default_rng(0)
        X = rng.normal(size=(300, 4))
        y = 5 + X[:, 0] + rng.normal(size=300)
        gb = GradientBoostingRegressor(n_estimators=8, max_depth=3, subsample=0.6,
                                       random_state=0).fit(X[:200], y[:200])
        ens = treeimp.parse(gb)
        block = (np.arange(100) % 4).astype(np.int32)
        arr, _ = staged_pass(ens, RowSource(X[200:], ens), y[200:], np.ones(1), block, 4,
                             keep_margin=False)
        st = NodeStats.from_array(arr, boosting=True)
    else:
        ens, X, y = _forest(kind.split()[0])
        arr, _ = _stats(ens, X, y)
        st = NodeStats.from_array(arr)
        if kind.endswith("one-hot"):
            st = NodeStats(n=None, S=st.S, Q=None)
    sp = measures._splits(ens)
    fused = measures._fused_centered(ens, sp, st)
    numpy_form = measures._fused(MDI_OOB, ens, sp, st) - measures.centring_parts(ens, st)
    scale = np.abs(numpy_form).max()
    assert scale > 0
    np.testing.assert_allclose(fused, numpy_form, rtol=1e-10, atol=1e-12 * scale)
    # and the centring is not a no-op here
    assert np.abs(measures.centring_parts(ens, st)).max() > 1e-6 * scale

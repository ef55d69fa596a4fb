"""explain() on forests against a slow, obvious implementation of measures.md.

The brute force below reads scikit-learn's own tree arrays and decision paths (not our
parser), walks every out-of-bag row, and computes each measure node by node.
"""

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)

import treeimp
from treeimp.measures.defaults import OOB_VARIANCE_FACTOR


def _oob_rows(rf, n):
    out = []
    for idx in rf.estimators_samples_:
        mask = np.ones(n, bool)
        mask[idx] = False
        out.append(np.flatnonzero(mask))
    return out


def _node_values(tree, classification):
    v = tree.value[:, 0, :] if classification else tree.value[:, 0, :1]
    return np.asarray(v, dtype=float)


def brute_force(rf, X, y, w=None, classification=True):
    """Per-tree (n_trees, n_features) mdi_oob, ufi, naive_oob, pg(a, lam) by hand."""
    n, F = X.shape
    w = np.ones(n) if w is None else w
    if classification:
        classes = list(rf.classes_)
        Z = np.zeros((n, len(classes)))
        Z[np.arange(n), [classes.index(v) for v in y]] = 1.0
    else:
        Z = y[:, None].astype(float)
    res = {k: np.zeros((len(rf.estimators_), F)) for k in
           ("mdi_oob", "ufi", "naive_oob", "pg1", "pg2", "pg3")}
    for t, (est, oob) in enumerate(zip(rf.estimators_, _oob_rows(rf, n))):
        tree = est.tree_
        v = _node_values(tree, classification)
        left, right, feat = tree.children_left, tree.children_right, tree.feature
        W, I = tree.weighted_n_node_samples, tree.impurity
        Xo = X[oob].astype(np.float32)
        paths = est.decision_path(Xo).toarray().astype(bool)
        # mdi_oob: walk each OOB row's path, Saabas contributions times its target
        total_w = w[oob].sum()
        for r, i in enumerate(oob):
            nodes = np.flatnonzero(paths[r])
            for m in nodes:
                if left[m] < 0:
                    continue
                child = left[m] if paths[r, left[m]] else right[m]
                res["mdi_oob"][t, feat[m]] += w[i] * (v[child] - v[m]) @ Z[i]
        res["mdi_oob"][t] /= total_w
        # node-by-node measures
        n_held = np.array([w[oob][paths[:, m]].sum() for m in range(tree.node_count)])
        S = np.array([(w[oob][paths[:, m], None] * Z[oob][paths[:, m]]).sum(0)
                      for m in range(tree.node_count)])
        sq = np.array([(w[oob][paths[:, m]] * (Z[oob][paths[:, m]] ** 2).sum(1)).sum()
                       for m in range(tree.node_count)])
        frac = W / W[0]
        for m in range(tree.node_count):
            lc, rc = left[m], right[m]
            if lc < 0 or n_held[lc] == 0 or n_held[rc] == 0:
                continue
            k = feat[m]
            p_held = {j: S[j] / n_held[j] for j in (m, lc, rc)}
            if classification:
                H = {j: 1 - v[j] @ p_held[j] for j in (m, lc, rc)}
            else:
                H = {j: I[j] + (sq[j] - 2 * v[j, 0] * S[j, 0] + v[j, 0] ** 2 * n_held[j])
                     / n_held[j] for j in (m, lc, rc)}
            res["ufi"][t, k] += frac[m] * H[m] - frac[lc] * H[lc] - frac[rc] * H[rc]
            held_imp = {j: (1 - p_held[j] @ p_held[j]) if classification
                        else sq[j] / n_held[j] - p_held[j] @ p_held[j] for j in (m, lc, rc)}
            res["naive_oob"][t, k] += (n_held[m] * held_imp[m] - n_held[lc] * held_imp[lc]
                                       - n_held[rc] * held_imp[rc]) / n_held[0]
            for name, (a, lam) in {"pg1": (1, 1), "pg2": (0.5, 1), "pg3": (0.5, 0.5)}.items():
                ins = {j: (1 - v[j] @ v[j]) if classification else I[j] for j in (m, lc, rc)}
                pg = {j: a * held_imp[j] + (1 - a) * ins[j]
                      + lam / 2 * np.sum((p_held[j] - v[j]) ** 2) for j in (m, lc, rc)}
                res[name][t, k] += frac[m] * pg[m] - frac[lc] * pg[lc] - frac[rc] * pg[rc]
    return res


METHODS = ("mdi", "mdi_oob", "ufi", "naive_oob", "pg1", "pg2", "pg3")


def _fit_cases():
    Xc, yc = make_classification(n_samples=160, n_features=5, n_informative=3,
                                 n_redundant=0, random_state=0)
    Xm, ym = make_classification(n_samples=160, n_features=5, n_informative=3, n_classes=3,
                                 n_redundant=0, n_clusters_per_class=1, random_state=1)
    Xr, yr = make_regression(n_samples=160, n_features=5, noise=5.0, random_state=2)
    sw = np.random.default_rng(3).uniform(0.2, 3.0, 160)
    kw = dict(n_estimators=6, max_depth=5, random_state=0)
    return [
        ("binary", RandomForestClassifier(**kw).fit(Xc, yc), Xc, yc, True),
        ("multiclass", RandomForestClassifier(**kw).fit(Xm, ym), Xm, ym, True),
        ("string labels", RandomForestClassifier(**kw).fit(Xm, np.array(["a", "b", "c"])[ym]),
         Xm, np.array(["a", "b", "c"])[ym], True),
        ("regression", RandomForestRegressor(**kw).fit(Xr, yr), Xr, yr, False),
        ("max_samples", RandomForestClassifier(max_samples=0.5, **kw).fit(Xc, yc), Xc, yc,
         True),
        ("fit weights", RandomForestRegressor(**kw).fit(Xr, yr, sample_weight=sw), Xr, yr,
         False),
        ("fit weights classifier", RandomForestClassifier(**kw).fit(Xm, ym, sample_weight=sw),
         Xm, ym, True),
        ("extra trees", ExtraTreesClassifier(bootstrap=True, **kw).fit(Xm, ym), Xm, ym, True),
        ("extra regression", ExtraTreesRegressor(bootstrap=True, **kw).fit(Xr, yr), Xr, yr,
         False),
    ]


CASES = _fit_cases()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_oob_measures_equal_brute_force(case):
    _, rf, X, y, classification = case
    res = treeimp.explain(rf, X, y, oob=True, methods=METHODS, random_state=0)
    ref = brute_force(rf, X, y, classification=classification)
    for m, expected in ref.items():
        np.testing.assert_allclose(res.per_tree[m], expected, rtol=1e-10, atol=1e-12,
                                   err_msg=m)
        np.testing.assert_allclose(res.table[m].to_numpy(), expected.mean(0), rtol=1e-10,
                                   atol=1e-12, err_msg=m)


@pytest.mark.parametrize("case", [CASES[1], CASES[3]], ids=["multiclass", "regression"])
def test_evaluation_weights_enter_every_measure(case):
    _, rf, X, y, classification = case
    w = np.random.default_rng(5).uniform(0.0, 2.0, len(y))
    res = treeimp.explain(rf, X, y, oob=True, methods=METHODS, sample_weight=w)
    ref = brute_force(rf, X, y, w=w, classification=classification)
    unweighted = brute_force(rf, X, y, classification=classification)
    for m in ("mdi_oob", "ufi", "naive_oob", "pg1", "pg2", "pg3"):
        assert not np.allclose(ref[m], unweighted[m])  # the weights matter
        np.testing.assert_allclose(res.per_tree[m], ref[m], rtol=1e-10, atol=1e-12)


def test_regression_mdi_oob_is_decrease_of_cross_impurity():
    """Regression form of the identity: H_x(m) = -v_m p'_m, p'_m the held-out mean,
    decrease weighted n'_m / n'_0 (measures.md)."""
    _, rf, X, y, _ = CASES[3]
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi_oob",))
    expected = np.zeros((len(rf.estimators_), X.shape[1]))
    for t, (est, oob) in enumerate(zip(rf.estimators_, _oob_rows(rf, len(y)))):
        tree = est.tree_
        paths = est.decision_path(X[oob].astype(np.float32)).toarray().astype(bool)
        n_held = paths.sum(0).astype(float)
        p_held = np.divide(paths.T.astype(float) @ y[oob], n_held, out=np.zeros(len(n_held)),
                           where=n_held > 0)
        Hx = -tree.value[:, 0, 0] * p_held
        for m in np.flatnonzero(tree.children_left >= 0):
            lc, rc = tree.children_left[m], tree.children_right[m]
            expected[t, tree.feature[m]] += (n_held[m] * Hx[m] - n_held[lc] * Hx[lc]
                                             - n_held[rc] * Hx[rc]) / n_held[0]
    np.testing.assert_allclose(res.per_tree["mdi_oob"], expected, rtol=1e-10, atol=1e-10)


def test_mdi_oob_is_oob_weighted_decrease_of_cross_impurity():
    """Li et al.: MDI-oob equals the decrease of H_x(m) = 1 - p_m.p'_m weighted n'_m/n'_0."""
    _, rf, X, y, _ = CASES[1]
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi_oob",))
    Z = np.eye(3)[y]
    expected = np.zeros((len(rf.estimators_), X.shape[1]))
    for t, (est, oob) in enumerate(zip(rf.estimators_, _oob_rows(rf, len(y)))):
        tree = est.tree_
        paths = est.decision_path(X[oob].astype(np.float32)).toarray().astype(bool)
        n_held = paths.sum(0).astype(float)
        S = paths.T.astype(float) @ Z[oob]
        v = tree.value[:, 0, :]
        Hx = 1 - np.einsum("nc,nc->n", v, S / np.maximum(n_held, 1)[:, None])
        for m in np.flatnonzero(tree.children_left >= 0):
            lc, rc = tree.children_left[m], tree.children_right[m]
            expected[t, tree.feature[m]] += (n_held[m] * Hx[m] - n_held[lc] * Hx[lc]
                                             - n_held[rc] * Hx[rc]) / n_held[0]
    np.testing.assert_allclose(res.per_tree["mdi_oob"], expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("case", CASES[:2], ids=["binary", "multiclass"])
def test_pg2_equals_ufi_for_classification(case):
    _, rf, X, y, _ = case
    res = treeimp.explain(rf, X, y, oob=True, methods=("ufi", "pg2"))
    np.testing.assert_allclose(res.per_tree["pg2"], res.per_tree["ufi"], rtol=1e-12,
                               atol=1e-14)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_mdi_normalised_reproduces_sklearn_feature_importances(case):
    _, rf, X, y, _ = case
    pt = treeimp.explain(rf, X, y, oob=True, methods=("mdi",)).per_tree["mdi"]
    sums = pt.sum(1, keepdims=True)
    normed = pt[sums[:, 0] > 0] / sums[sums[:, 0] > 0]
    fi = normed.mean(0)
    np.testing.assert_allclose(fi / fi.sum(), rf.feature_importances_, rtol=1e-10, atol=1e-12)


def test_held_out_rows_use_every_tree():
    """Without oob, every tree is evaluated on every row given: equal to brute force with
    an 'in-bag' set that is empty."""
    _, rf, X, y, _ = CASES[0]
    res = treeimp.explain(rf, X[:80], y[:80], methods=("mdi_oob",))
    v0 = rf.estimators_[0].tree_.value[:, 0, :]
    paths = rf.estimators_[0].decision_path(X[:80].astype(np.float32)).toarray()
    Z = np.eye(2)[y[:80]]
    expected = np.zeros(X.shape[1])
    for r in range(80):
        for m in np.flatnonzero(paths[r]):
            lc = rf.estimators_[0].tree_.children_left[m]
            if lc < 0:
                continue
            child = lc if paths[r, lc] else rf.estimators_[0].tree_.children_right[m]
            expected[rf.estimators_[0].tree_.feature[m]] += (v0[child] - v0[m]) @ Z[r] / 80
    np.testing.assert_allclose(res.per_tree["mdi_oob"][0], expected, rtol=1e-10, atol=1e-12)


def test_block_standard_errors_are_a_delete_a_block_jackknife():
    """Block value b is the measure on every row except block b's: recompute one by
    explaining with those rows' weights set to zero. ufi's replicates expand each node's
    ratio about the total's to first order (scaled by sqrt(k / (k - 1)); docs/methods.rst,
    tests/test_ufi_stderr.py): its block value is that of the deletion to first order,
    not exactly."""
    _, rf, X, y, _ = CASES[1]
    res = treeimp.explain(rf, X, y, oob=True, n_blocks=5, random_state=1)
    held = treeimp.explain(rf, X, y, n_blocks=5, random_state=1)
    from treeimp.stats.blocks import block_key, row_blocks

    block = row_blocks(np.arange(len(y)), block_key(1), 5)  # each row's block
    for m in ("mdi_oob", "ufi"):
        bv = res.block_values[m]
        assert bv.shape == (5, X.shape[1])
        w = (block != 2).astype(float)
        drop2 = treeimp.explain(rf, X, y, oob=True, methods=(m,), sample_weight=w)
        if m == "ufi":
            exact = drop2.table[m].to_numpy()
            assert not np.allclose(bv[2], exact, rtol=1e-6)  # the expansion, not the ratio
            np.testing.assert_allclose(bv[2], exact, rtol=0.1, atol=1e-3 * np.abs(exact).max())
        else:
            np.testing.assert_allclose(bv[2], drop2.table[m], rtol=1e-10, atol=1e-14)
        jack = np.sqrt(4 / 5 * ((bv - bv.mean(0)) ** 2).sum(0))
        np.testing.assert_allclose(res.stderr[m], OOB_VARIANCE_FACTOR * jack)  # OOB factor
        hv = held.block_values[m]
        np.testing.assert_allclose(held.stderr[m], np.sqrt(4 / 5 * ((hv - hv.mean(0)) ** 2)
                                                           .sum(0)))
    assert res.stderr["mdi"].isna().all()
    pt = res.per_tree["ufi"]
    np.testing.assert_allclose(res.stderr_trees["ufi"],
                               np.sqrt((np.mean(pt**2, 0) - np.mean(pt, 0) ** 2) / len(pt)))


def test_table_by_class_sums_to_table_and_matches_brute_force():
    _, rf, X, y, _ = CASES[1]
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi_oob", "ufi"))
    for m in ("mdi_oob", "ufi"):
        by = res.table_by_class[m]
        assert list(by.columns) == list(rf.classes_)
        np.testing.assert_allclose(by.sum(axis=1), res.table[m], rtol=1e-9, atol=1e-12)
    # brute force for class 0 of mdi_oob: Saabas contributions to class 0 times 1{y = 0}
    expected = np.zeros(X.shape[1])
    for est, oob in zip(rf.estimators_, _oob_rows(rf, len(y))):
        t = est.tree_
        paths = est.decision_path(X[oob].astype(np.float32)).toarray().astype(bool)
        v = t.value[:, 0, 0]
        per = np.zeros(X.shape[1])
        for r, i in enumerate(oob):
            for m in np.flatnonzero(paths[r] & (t.children_left >= 0)):
                child = t.children_left[m] if paths[r, t.children_left[m]] \
                    else t.children_right[m]
                per[t.feature[m]] += (v[child] - v[m]) * (y[i] == 0)
        expected += per / len(oob)
    np.testing.assert_allclose(res.table_by_class["mdi_oob"][0], expected / len(rf.estimators_),
                               rtol=1e-10, atol=1e-12)


@pytest.mark.filterwarnings("ignore:Value `\"friedman_mse\"`:FutureWarning")
@pytest.mark.parametrize("criterion", ["squared_error", "friedman_mse", "poisson"])
def test_regression_criteria_use_the_in_sample_variance(criterion):
    """ufi and penalized Gini read the in-sample VARIANCE about node means. friedman_mse
    stores the variance; poisson stores half the deviance (its node values are still
    means): the brute force computes the variance from the training rows themselves."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(500, 4))
    y = rng.poisson(np.exp(0.6 * X[:, 0] - 0.4 * X[:, 1])).astype(float)
    Xt, yt, Xv, yv = X[:250], y[:250], X[250:], y[250:]
    rf = RandomForestRegressor(n_estimators=4, max_depth=5, max_features=2, bootstrap=False,
                               criterion=criterion, random_state=0).fit(Xt, yt)
    res = treeimp.explain(rf, Xv, yv, methods=("ufi", "pg1", "pg3", "naive_oob"))
    expected = {m: np.zeros((4, X.shape[1])) for m in ("ufi", "pg1", "pg3")}
    for t, est in enumerate(rf.estimators_):
        tree = est.tree_
        pt = est.decision_path(Xt.astype(np.float32)).toarray().astype(bool)
        pv = est.decision_path(Xv.astype(np.float32)).toarray().astype(bool)
        for m in np.flatnonzero(tree.children_left >= 0):
            kids = (m, tree.children_left[m], tree.children_right[m])
            if not (pv[:, kids[1]].any() and pv[:, kids[2]].any()):
                continue
            mean = {j: yt[pt[:, j]].mean() for j in kids}
            var = {j: yt[pt[:, j]].var() for j in kids}
            held_mean = {j: yv[pv[:, j]].mean() for j in kids}
            held_var = {j: yv[pv[:, j]].var() for j in kids}
            held_mse = {j: np.mean((yv[pv[:, j]] - mean[j]) ** 2) for j in kids}
            frac = {j: pt[:, j].mean() for j in kids}

            def decrease(H, kids=kids, frac=frac):
                return frac[kids[0]] * H[kids[0]] - sum(frac[j] * H[j] for j in kids[1:])

            f = tree.feature[m]
            expected["ufi"][t, f] += decrease({j: var[j] + held_mse[j] for j in kids})
            for name, (a, lam) in {"pg1": (1.0, 1.0), "pg3": (0.5, 0.5)}.items():
                expected[name][t, f] += decrease(
                    {j: a * held_var[j] + (1 - a) * var[j]
                     + lam / 2 * (held_mean[j] - mean[j]) ** 2 for j in kids})
    if criterion == "poisson":  # the stored impurity is not the variance here
        root = rf.estimators_[0].tree_
        assert not np.isclose(root.impurity[0], yt.var())
    for m, exp in expected.items():
        np.testing.assert_allclose(res.per_tree[m], exp, rtol=1e-9, atol=1e-10, err_msg=m)


def test_absolute_error_forest_rejects_ufi_and_penalized_gini():
    """criterion="absolute_error": node values are medians and impurities absolute
    deviations, so the variance-based ufi / pg forms are undefined; mdi_oob and
    naive_oob use neither and still work."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = X[:, 0] + rng.normal(size=120)
    rf = RandomForestRegressor(n_estimators=3, max_depth=3, criterion="absolute_error",
                               random_state=0).fit(X, y)
    for method in ("ufi", "pg1", "pg2", "pg3"):
        with pytest.raises(ValueError, match=f"'{method}' needs the in-sample variance.*"
                                             "absolute_error.*'mdi_oob' or 'naive_oob'"):
            treeimp.explain(rf, X, y, oob=True, methods=("mdi_oob", method))
    with pytest.raises(ValueError, match="'pg_oob' needs the in-sample variance"):
        treeimp.explain(rf, X, y, methods=("pg_oob",), alpha=0.5, lam=1.0)
    res = treeimp.explain(rf, X, y, oob=True, methods=("mdi", "mdi_oob", "naive_oob"))
    assert np.isfinite(res.table.to_numpy()).all()
    ref = brute_force(rf, X, y, classification=False)
    np.testing.assert_allclose(res.per_tree["naive_oob"], ref["naive_oob"], rtol=1e-10,
                               atol=1e-12)
    # mdi_oob: internal node values are the W-weighted means of their children
    # (measures.md), not sklearn's stored internal medians; the leaves are the model's
    expected = np.zeros((3, X.shape[1]))
    for t, (est, oob) in enumerate(zip(rf.estimators_, _oob_rows(rf, len(y)))):
        tree = est.tree_
        v = tree.value[:, 0, 0].copy()
        W = tree.weighted_n_node_samples
        for m in range(tree.node_count - 1, -1, -1):  # children come after parents
            lc, rc = tree.children_left[m], tree.children_right[m]
            if lc >= 0:
                v[m] = (W[lc] * v[lc] + W[rc] * v[rc]) / W[m]
        assert not np.allclose(v, tree.value[:, 0, 0])  # medians differ from those means
        paths = est.decision_path(X[oob].astype(np.float32)).toarray().astype(bool)
        for r, i in enumerate(oob):
            for m in np.flatnonzero(paths[r] & (tree.children_left >= 0)):
                child = tree.children_left[m] if paths[r, tree.children_left[m]] \
                    else tree.children_right[m]
                expected[t, tree.feature[m]] += (v[child] - v[m]) * y[i] / len(oob)
    np.testing.assert_allclose(res.per_tree["mdi_oob"], expected, rtol=1e-10, atol=1e-12)

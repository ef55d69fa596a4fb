"""Multi-output scikit-learn forests (regression: the target vector; classification: the
concatenated one-hot vectors of the targets): the measures against a brute-force
computation per tree from scikit-learn's own tree arrays and in-bag rows, the normal form
and permutation importance against scikit-learn."""

import numpy as np
import pytest
from sklearn.ensemble import (
    ExtraTreesClassifier,
    RandomForestClassifier,
    RandomForestRegressor,
)

import treeimp


def _node_rows(tree, X):
    """(n_rows, n_nodes) indicator of the nodes each row passes through."""
    return tree.decision_path(X).toarray().astype(bool)


def _held_node_stats(path, y, v):
    """Per node, over its evaluation rows: mean |y - mean|^2, mean |y - v_m|^2 and
    |mean - v_m|^2 (0 for nodes without rows)."""
    var, mse, gap = (np.zeros(v.shape[0]) for _ in range(3))
    for m in range(v.shape[0]):
        rows = y[path[:, m]]
        if len(rows):
            var[m] = ((rows - rows.mean(axis=0)) ** 2).sum(axis=1).mean()
            mse[m] = ((rows - v[m]) ** 2).sum(axis=1).mean()
            gap[m] = ((rows.mean(axis=0) - v[m]) ** 2).sum()
    return var, mse, gap


def _brute_force_regression(rf, X, Y, method):
    """Per-tree values (n_trees, n_features) of ``method`` on the OOB rows of each tree,
    from sklearn's tree_ arrays: y_i the target vector, I_m the in-sample variance summed
    over outputs (K x tree_.impurity, which holds the mean over outputs)."""
    Y = Y.reshape(len(Y), -1)
    n, K = Y.shape
    out = np.zeros((len(rf.estimators_), X.shape[1]))
    alpha, lam = {"pg1": (1.0, 1.0), "pg2": (0.5, 1.0), "pg3": (0.5, 0.5)}.get(method,
                                                                               (0, 0))
    for t, (est, inbag) in enumerate(zip(rf.estimators_, rf.estimators_samples_)):
        tr = est.tree_
        oob = np.setdiff1d(np.arange(n), inbag)
        path = _node_rows(est, X[oob])
        y = Y[oob]
        v = tr.value[:, :, 0]
        W = tr.weighted_n_node_samples
        w = W / W[0]
        imp = K * tr.impurity
        cnt = path.sum(axis=0)

        var, mse, gap = _held_node_stats(path, y, v)
        for m in range(tr.node_count):
            l, r = tr.children_left[m], tr.children_right[m]
            if l < 0:
                continue
            k = tr.feature[m]
            if method in ("mdi_oob", "mdi_oob_centered"):  # y_i . Saabas contribution
                centre = v[0] if method == "mdi_oob_centered" else 0.0
                for c in (l, r):
                    rows = path[:, c]
                    out[t, k] += ((y[rows] - centre) @ (v[c] - v[m])).sum() / len(oob)
                continue
            if cnt[l] == 0 or cnt[r] == 0:  # skip rule: a child without evaluation rows
                continue
            if method == "naive_oob":
                out[t, k] += (cnt[m] * var[m] - cnt[l] * var[l] - cnt[r] * var[r]) / len(oob)
                continue
            if method == "ufi":
                node = imp + mse
            else:  # penalized Gini, regression form
                node = alpha * var + (1 - alpha) * imp + 0.5 * lam * gap
            out[t, k] += w[m] * node[m] - w[l] * node[l] - w[r] * node[r]
    return out


REGRESSION_METHODS = ("mdi_oob", "mdi_oob_centered", "ufi", "naive_oob", "pg1", "pg2", "pg3")


def _regression_data(n_outputs):
    rng = np.random.default_rng(3)
    X = rng.normal(size=(160, 4))
    # outputs on different scales and means, so that a wrong factor K or a missing
    # centring shows
    Y = np.c_[X[:, 0] + 0.3 * rng.normal(size=160),
              5.0 + 3.0 * (X[:, 1] - X[:, 0]) + rng.normal(size=160),
              -2.0 + X[:, 2] ** 2][:, :n_outputs]
    return X, (Y[:, 0] if n_outputs == 1 else Y)


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_regression_measures_match_brute_force(n_outputs):
    X, Y = _regression_data(n_outputs)
    rf = RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0).fit(X, Y)
    res = treeimp.explain(rf, X, Y, oob=True, methods=REGRESSION_METHODS, random_state=0)
    for method in REGRESSION_METHODS:
        np.testing.assert_allclose(res.per_tree[method],
                                   _brute_force_regression(rf, X, Y, method),
                                   rtol=1e-9, atol=1e-10, err_msg=method)


def test_single_output_as_one_column_matches_1d():
    """y of shape (n, 1) fits a single-output forest: the same values as 1-D y."""
    X, y = _regression_data(1)
    rf = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, y)
    a = treeimp.explain(rf, X, y, oob=True, methods=REGRESSION_METHODS, random_state=0)
    b = treeimp.explain(rf, X, y[:, None], oob=True, methods=REGRESSION_METHODS,
                        random_state=0)
    for method in REGRESSION_METHODS:
        np.testing.assert_array_equal(a.per_tree[method], b.per_tree[method])


# ------------------------------------------------------------ multi-output classification
def _class_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 3))
    # target 0: two classes (labels 3, 7), target 1: three classes
    Y = np.c_[np.where(X[:, 0] > 0, 7, 3), (X[:, 1] > 0).astype(int) + (X[:, 2] > 0)]
    return X, Y


def _one_hot_vectors(rf, Y):
    """Each target's one-hot vector over its classes (classes_[j]), side by side."""
    return np.hstack([(Y[:, [j]] == np.asarray(c)[None, :]).astype(float)
                      for j, c in enumerate(rf.classes_)])


def _brute_force_classification(rf, X, Y, method):
    """Per-tree values (n_trees, n_features) on each tree's OOB rows: mdi_oob and
    mdi_oob_centered as z_i . Saabas contributions (z_i the concatenated one-hot
    vectors), ufi and naive_oob as the sums over targets of their Gini forms."""
    Z = _one_hot_vectors(rf, Y)
    sizes = [len(c) for c in rf.classes_]
    bounds = np.cumsum([0] + sizes)
    n = len(Y)
    out = np.zeros((len(rf.estimators_), X.shape[1]))
    for t, (est, inbag) in enumerate(zip(rf.estimators_, rf.estimators_samples_)):
        tr = est.tree_
        oob = np.setdiff1d(np.arange(n), inbag)
        path = _node_rows(est, X[oob])
        z = Z[oob]
        v = np.hstack([tr.value[:, j, :k] for j, k in enumerate(sizes)])
        w = tr.weighted_n_node_samples / tr.weighted_n_node_samples[0]
        cnt = path.sum(axis=0)
        # held-out class shares p'_m per node, and per-target Gini sums
        p_held = np.array([z[path[:, m]].mean(axis=0) if cnt[m] else np.zeros(Z.shape[1])
                           for m in range(tr.node_count)])
        gini_held = np.zeros(tr.node_count)  # sum_j 1 - |p'_j|^2
        ufi_node = np.zeros(tr.node_count)  # sum_j 1 - v_j . p'_j
        for a, b in zip(bounds[:-1], bounds[1:]):
            gini_held += 1.0 - (p_held[:, a:b] ** 2).sum(axis=1)
            ufi_node += 1.0 - (v[:, a:b] * p_held[:, a:b]).sum(axis=1)
        for m in range(tr.node_count):
            l, r = tr.children_left[m], tr.children_right[m]
            if l < 0:
                continue
            k = tr.feature[m]
            if method in ("mdi_oob", "mdi_oob_centered"):
                centre = v[0] if method == "mdi_oob_centered" else 0.0
                for c in (l, r):
                    out[t, k] += ((z[path[:, c]] - centre) @ (v[c] - v[m])).sum() / len(oob)
                continue
            if cnt[l] == 0 or cnt[r] == 0:
                continue
            if method == "ufi":
                out[t, k] += w[m] * ufi_node[m] - w[l] * ufi_node[l] - w[r] * ufi_node[r]
            else:  # naive_oob
                out[t, k] += (cnt[m] * gini_held[m] - cnt[l] * gini_held[l]
                              - cnt[r] * gini_held[r]) / len(oob)
    return out


CLASS_METHODS = ("mdi", "mdi_oob", "mdi_oob_centered", "ufi", "naive_oob")


@pytest.mark.parametrize("forest", [RandomForestClassifier, ExtraTreesClassifier])
def test_classification_forest_normal_form_and_mdi(forest):
    X, Y = _class_data()
    rf = forest(n_estimators=4, max_depth=4, random_state=0).fit(X[:100], Y[:100])
    ens = treeimp.parse(rf)
    assert list(ens.classes) == ["y0=3", "y0=7", "y1=0", "y1=1", "y1=2"]
    np.testing.assert_allclose(ens.predict_raw(X), np.hstack(rf.predict_proba(X)),
                               rtol=1e-12, atol=1e-15)
    # per-row contributions: one column per (target, class), summing to the probabilities
    c = treeimp.contributions(rf, X[100:], method="saabas")
    assert c.output_names == list(ens.classes)
    np.testing.assert_allclose(np.asarray(c.values).sum(axis=1) + np.asarray(c.base_values),
                               np.hstack(rf.predict_proba(X[100:])), atol=1e-12)
    res = treeimp.explain(rf, X[100:], Y[100:], methods=CLASS_METHODS, random_state=0)
    pt = res.per_tree["mdi"]
    np.testing.assert_allclose((pt / pt.sum(axis=1, keepdims=True)).mean(axis=0),
                               rf.feature_importances_, rtol=1e-10)
    for m in ("mdi_oob", "ufi"):  # per-class parts sum to the measure
        np.testing.assert_allclose(res.table_by_class[m].sum(axis=1), res.table[m],
                                   rtol=1e-10, atol=1e-12)
        assert list(res.table_by_class[m].columns) == list(ens.classes)


def test_classification_forest_measures_match_brute_force():
    X, Y = _class_data()
    rf = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, Y)
    res = treeimp.explain(rf, X, Y, oob=True, methods=CLASS_METHODS, random_state=0)
    for method in CLASS_METHODS[1:]:
        np.testing.assert_allclose(res.per_tree[method],
                                   _brute_force_classification(rf, X, Y, method),
                                   rtol=1e-9, atol=1e-12, err_msg=method)


def test_classification_forest_refusals():
    X, Y = _class_data()
    rf = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match=r"\['pg1'\] not defined for a classification "
                                         r"forest with 2 targets"):
        treeimp.explain(rf, X, Y, methods=("mdi_oob", "pg1"))
    with pytest.raises(ValueError, match=r"must have shape \(n_rows, 2\)"):
        treeimp.explain(rf, X, Y[:, 0])
    with pytest.raises(ValueError, match=r"y\[:, 0\] has labels the model never saw: \[5\]"):
        treeimp.explain(rf, X, np.c_[np.full(len(Y), 5), Y[:, 1]])


def test_classification_permutation_matches_sklearn():
    """scikit-learn scores a multi-output classifier by subset accuracy when every target
    is 0/1 (multilabel-indicator) and refuses otherwise (accuracy_score:
    "multiclass-multioutput is not supported"): treeimp does the same."""
    from sklearn.inspection import permutation_importance

    X, Y = _class_data()
    # two 0/1 targets (scikit-learn's multilabel-indicator; labels 3/7 would not be)
    Yb = np.c_[X[:, 0] > 0, X[:, 1] > 0].astype(int)
    rf = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X[:100],
                                                                                Yb[:100])
    w = np.random.default_rng(1).uniform(0.5, 2.0, size=50)
    for scoring, sw in ((None, None), ("accuracy", w)):
        ours = treeimp.permutation_importance(rf, X[100:], Yb[100:], n_repeats=3,
                                              random_state=1, scoring=scoring,
                                              sample_weight=sw)
        ref = permutation_importance(rf, X[100:], Yb[100:], n_repeats=3, random_state=1,
                                     scoring=scoring, sample_weight=sw)
        np.testing.assert_allclose(ours.importances, ref.importances, rtol=1e-12,
                                   atol=1e-14)
    assert ref.importances_mean[0] > 0.1  # the test can fail: the model uses x0
    rf3 = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, Y)
    with pytest.raises(ValueError, match="multiclass-multioutput is not supported"):
        permutation_importance(rf3, X, Y, n_repeats=2, random_state=0)
    with pytest.raises(ValueError, match="multiclass-multioutput is not supported"):
        treeimp.permutation_importance(rf3, X, Y, n_repeats=2, random_state=0)
    with pytest.raises(ValueError, match="scoring='neg_log_loss' is not supported for a "
                                         "classification forest with 2 targets"):
        treeimp.permutation_importance(rf, X, Yb, scoring="neg_log_loss")

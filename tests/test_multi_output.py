"""Multi-output scikit-learn forests: every forest measure on the target vector, against
a brute-force computation per tree from scikit-learn's own tree arrays and in-bag rows."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

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

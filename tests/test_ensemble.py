"""TreeEnsemble: every validation error names its problem, and node values decompose
along paths.

The path property: for every root-to-leaf path, root value + sum of (child - parent)
equals the leaf value, and internal values are the training-weight means of their
children. It is checked against the library itself: the margin rebuilt from those path
sums for each row's leaves equals the library's own raw margin (GradientBoosting,
HistGradientBoosting, XGBoost with and without num_parallel_tree, LightGBM).
"""

import functools

import numpy as np
import pytest
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
)
from threadpoolctl import threadpool_limits

import treeimp
from treeimp.model.ensemble import MAX_FEATURES, Tree, TreeEnsemble


@pytest.fixture(autouse=True)
def _one_openmp_thread():
    with threadpool_limits(limits=1, user_api="openmp"):
        yield


# ------------------------------------------------------------------ validation
def _tree(**over):
    """A valid 5-node tree: 0 -> (1, 2), 1 -> (3, 4); features < 3."""
    fields = dict(
        left=np.array([1, 3, -1, -1, -1]),
        right=np.array([2, 4, -1, -1, -1]),
        feature=np.array([0, 2, -1, -1, -1]),
        threshold=np.array([0.5, -1.0, 0.0, 0.0, 0.0]),
        value=np.array([[0.0], [0.0], [1.0], [2.0], [3.0]]),
        weight=np.array([10.0, 6.0, 4.0, 3.0, 3.0]),
    )
    fields.update(over)
    return Tree(**fields)


def _build(trees=None, **kw):
    args = dict(kind="boosting", n_features=3, n_outputs=1, comparison="<=",
                round_float32=False)
    args.update(kw)
    return TreeEnsemble.from_trees([_tree()] if trees is None else trees, **args)


def test_valid_tree_builds():
    ens = _build()
    assert ens.n_nodes == 5 and ens.n_trees == 1
    np.testing.assert_allclose(ens.value[:, 0], [1.9, 2.5, 1.0, 2.0, 3.0])
    np.testing.assert_array_equal(ens.predict_raw(np.array([[0.0, 0.0, -2.0],
                                                            [0.0, 0.0, 0.0],
                                                            [1.0, 0.0, 0.0]])),
                                  [[2.0], [3.0], [1.0]])


BAD_TREES = {
    "cycle": (dict(left=np.array([1, 0, -1, -1, -1])), r"node 0 is reached twice \(cycle"),
    "self-loop": (dict(left=np.array([1, 1, -1, -1, -1])), r"node 1 is reached twice"),
    "shared child": (dict(left=np.array([1, 3, -1, -1, -1]), right=np.array([2, 3, -1, -1, -1])),
                     r"node 3 is reached twice \(cycle or shared child\)"),
    "child out of range": (dict(right=np.array([2, 9, -1, -1, -1])),
                           r"tree 0 has a child index >= its 5 nodes"),
    "one child": (dict(right=np.array([2, -1, -1, -1, -1])),
                  r"tree 0 node 1 has exactly one child"),
    "unreachable": (dict(left=np.array([2, -1, -1, -1, -1]), right=np.array([1, -1, -1, -1, -1])),
                    r"tree 0 has 2 nodes that the root never reaches"),
    "feature too large": (dict(feature=np.array([0, 3, -1, -1, -1])),
                          r"tree 0 splits on feature 3 but the model has 3 features"),
    "negative feature": (dict(feature=np.array([-1, 2, -1, -1, -1])),
                         r"splits on feature -1 but the model has 3 features"),
    "threshold shape": (dict(threshold=np.zeros(4)),
                        r"tree field 'threshold' has shape \(4,\), expected \(5,\)"),
    "weight shape": (dict(weight=np.ones((5, 2))),
                     r"tree field 'weight' has shape \(5, 2\), expected \(5,\)"),
    "NaN threshold": (dict(threshold=np.array([np.nan, 0.0, 0.0, 0.0, 0.0])),
                      r"numeric split with a NaN threshold"),
    "infinite leaf": (dict(value=np.array([[0.0], [0.0], [np.inf], [2.0], [3.0]])),
                      r"leaf whose value is not finite"),
    "NaN leaf": (dict(value=np.array([[0.0], [0.0], [1.0], [np.nan], [3.0]])),
                 r"leaf whose value is not finite"),
    "negative weight": (dict(weight=np.array([10.0, 6.0, -4.0, 3.0, 3.0])),
                        r"node training weights must be finite and >= 0"),
    "NaN weight": (dict(weight=np.array([10.0, np.nan, 4.0, 3.0, 3.0])),
                   r"node training weights must be finite and >= 0"),
    "categories on a leaf": (dict(categories={3: ([1, 2], True, False)}),
                             r"tree 0: categorical split on a non-split node 3"),
    "negative category": (dict(categories={1: ([-1, 2], True, False)}),
                          r"tree 0 node 1: category codes must be distinct and >= 0"),
    "repeated category": (dict(categories={1: ([2, 2], True, False)}),
                          r"category codes must be distinct"),
    "output out of range": (dict(output=1), r"tree 0 writes outputs 1..1 but the model has 1 "
                                            "outputs"),
    "empty tree": (dict(left=np.zeros(0), right=np.zeros(0), feature=np.zeros(0),
                        threshold=np.zeros(0), value=np.zeros((0, 1)), weight=np.zeros(0)),
                   r"tree 0 has no nodes"),
}


@pytest.mark.parametrize("problem", list(BAD_TREES))
def test_bad_tree_is_named(problem):
    over, message = BAD_TREES[problem]
    with pytest.raises(ValueError, match=message):
        _build([_tree(**over)])


def test_problem_in_a_later_tree_names_that_tree():
    with pytest.raises(ValueError, match="tree 1 node 1 has exactly one child"):
        _build([_tree(), _tree(right=np.array([2, -1, -1, -1, -1]))])


BAD_ENSEMBLES = {
    "kind": (dict(kind="bagging"), r"kind must be 'forest' or 'boosting', got 'bagging'"),
    "comparison": (dict(comparison=">"), r"comparison must be '<' or '<=', got '>'"),
    "gain kind": (dict(gain_kind="split"), r"gain_kind must be 'impurity' or 'gain'"),
    "impurity kind": (dict(impurity_kind="gini"),
                      r"impurity_kind must be one of \('variance', 'other', 'median'\), "
                      r"got 'gini'"),
    "no features": (dict(n_features=0), r"n_features and n_outputs must be >= 1, got 0 and 1"),
    "no outputs": (dict(n_outputs=0), r"n_features and n_outputs must be >= 1, got 3 and 0"),
    "too many features": (dict(n_features=MAX_FEATURES + 1),
                          r"n_features is 2147483648; feature indices are int32"),
    "no trees": (dict(trees=[]), r"the model has no trees"),
    "base score size": (dict(base_score=[1.0, 2.0]),
                        r"base_score has 2 values but the model has 1 outputs"),
    "base score NaN": (dict(base_score=[np.nan]), r"base_score must be finite"),
    "names": (dict(feature_names=["a", "b"]), r"2 feature names for 3 features"),
    "category lists": (dict(feature_categories=[None]), r"1 category lists for 3 features"),
    "category flags": (dict(category_as_code=[True, False]),
                       r"category_as_code has shape \(2,\); expected one flag for each of 3"),
    "category values count": (dict(category_values=[None]),
                              r"1 category value tables for 3 features"),
    "category values repeated": (dict(category_values=[None, [1.0, 1.0], None]),
                                 r"category value table of feature 1 must be a 1-D array of "
                                 "distinct finite numbers"),
    "category values NaN": (dict(category_values=[[np.nan], None, None]),
                            r"category value table of feature 0"),
    "value width": (dict(trees=[_tree(), _tree(value=np.ones((5, 2)))], n_outputs=2),
                    r"tree 1 has 2 values per node but tree 0 has 1"),
    "stage order": (dict(trees=[Tree(**{**_tree().__dict__, "stage": 1}),
                                Tree(**{**_tree().__dict__, "stage": 0})]),
                    r"tree 1 has stage 0 after a tree of stage 1"),
}


@pytest.mark.parametrize("problem", list(BAD_ENSEMBLES))
def test_bad_ensemble_is_named(problem):
    kw, message = BAD_ENSEMBLES[problem]
    with pytest.raises(ValueError, match=message):
        _build(**kw)


# ------------------------------------------------------------------ path property
def _data(n=400, p=5, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    if nan:
        X[rng.random((n, p)) < 0.05] = np.nan
    Z = np.nan_to_num(X)
    f = Z[:, 0] + 0.7 * Z[:, 1] ** 2 - 0.5 * Z[:, 2] * (Z[:, 3] > 0)
    return X, f + rng.normal(scale=0.3, size=n)


@functools.cache
def _models():
    import lightgbm as lgb
    import xgboost as xgb

    X, f = _data()
    Xn, fn = _data(nan=True)
    classes = np.digitize(f, [0.3, 1.3])
    out = {
        "gb-regression": (GradientBoostingRegressor(n_estimators=15, max_depth=3,
                                                    random_state=0).fit(X, f), X),
        "gb-multiclass": (GradientBoostingClassifier(n_estimators=10, max_depth=3,
                                                     random_state=0).fit(X, classes), X),
        "hgb-binary": (HistGradientBoostingClassifier(max_iter=15, max_leaf_nodes=8,
                                                      early_stopping=False, random_state=0)
                       .fit(Xn, fn > 0.8), Xn),
    }
    for name, params in {
        "xgboost-regression": {"objective": "reg:squarederror"},
        "xgboost-parallel-softprob": {"objective": "multi:softprob", "num_class": 3,
                                      "num_parallel_tree": 3, "subsample": 0.7},
    }.items():
        y = classes if "softprob" in name else fn
        booster = xgb.train({"max_depth": 3, "eta": 0.3, "seed": 0, **params},
                            xgb.DMatrix(Xn, y, missing=np.nan), 8)
        out[name] = (booster, Xn)
    lgb_params = {"lightgbm-regression": {"objective": "regression"},
                  "lightgbm-multiclass": {"objective": "multiclass", "num_class": 3}}
    for name, params in lgb_params.items():
        y = classes if "multiclass" in name else fn
        booster = lgb.train({"num_leaves": 9, "verbose": -1, "num_threads": 1, "seed": 0,
                             **params}, lgb.Dataset(Xn, y), num_boost_round=8)
        out[name] = (booster, Xn)
    return out


def _library_margin(name, model, X):
    import xgboost as xgb

    if name.startswith("gb-") or name.startswith("hgb"):
        m = model.decision_function(X) if hasattr(model, "classes_") else model.predict(X)
    elif name.startswith("xgboost"):
        m = model.predict(xgb.DMatrix(X, missing=np.nan), output_margin=True)
    else:
        m = model.predict(X, raw_score=True)
    return np.asarray(m, dtype=np.float64).reshape(len(X), -1)


def _path_sums(ens):
    """Per node: root value + sum of (child - parent) along the path from the root, and
    whether every internal node is the weight mean of its children."""
    total = np.full_like(ens.value, np.nan)
    for t in range(ens.n_trees):
        root = int(ens.tree_offsets[t])
        total[root] = ens.value[root]
        stack = [root]
        while stack:
            node = stack.pop()
            for child in (ens.left[node], ens.right[node]):
                if child >= 0:
                    total[child] = total[node] + (ens.value[child] - ens.value[node])
                    stack.append(int(child))
    return total


@pytest.mark.parametrize("name", ["gb-regression", "gb-multiclass", "hgb-binary",
                                  "xgboost-regression", "xgboost-parallel-softprob",
                                  "lightgbm-regression", "lightgbm-multiclass"])
def test_path_contributions_sum_to_leaf_values_and_the_library_margin(name):
    model, X = _models()[name]
    ens = treeimp.parse(model)
    if "parallel" in name:
        assert ens.n_trees == 8 * 3 * 3
    total = _path_sums(ens)
    assert not np.isnan(total).any()  # every node reached from its root
    leaf = ens.is_leaf
    scale = max(1.0, float(np.abs(ens.value).max()))
    np.testing.assert_allclose(total[leaf], ens.value[leaf], rtol=0, atol=1e-12 * scale)
    internal = np.flatnonzero(~leaf)
    wl, wr = ens.weight[ens.left[internal]], ens.weight[ens.right[internal]]
    positive = wl + wr > 0
    mean = ((wl[:, None] * ens.value[ens.left[internal]] + wr[:, None]
             * ens.value[ens.right[internal]]) / np.where(positive, wl + wr, 1.0)[:, None])
    np.testing.assert_allclose(ens.value[internal][positive], mean[positive], rtol=1e-12,
                               atol=1e-12 * scale)
    # the margin rebuilt from path sums at each row's leaves is the library's
    nodes = ens.apply(X) + ens.tree_offsets[:-1][None, :]
    margin = np.tile(ens.base_score, (len(X), 1))
    for t in range(ens.n_trees):
        col = int(ens.tree_output[t])
        margin[:, col:col + ens.value_dim] += ens.tree_scale[t] * total[nodes[:, t]]
    theirs = _library_margin(name, model, X)
    rtol = 1e-5 if name.startswith("xgboost") else 1e-9
    np.testing.assert_allclose(margin, theirs, rtol=rtol,
                               atol=rtol * max(1.0, np.abs(theirs).max()))

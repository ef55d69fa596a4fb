"""``oob=True`` tells in-bag from out-of-bag rows by position, so X, y must be the
training rows in the training order. Routing the in-bag rows of X must reach every node
as often as scikit-learn counted distinct rows there at fit time (``n_node_samples``):
shuffled, re-sorted or other rows are refused, the training rows are accepted however
the forest was fitted (weights, max_samples, class weights, ExtraTrees, Bagging)."""

import numpy as np
import pytest
from sklearn.ensemble import (
    BaggingClassifier,
    BaggingRegressor,
    ExtraTreesRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import treeimp

RNG = np.random.default_rng(3)
N = 300
X = RNG.normal(size=(N, 6))
Y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.3 * RNG.normal(size=N)
YC = (Y > np.median(Y)).astype(int)
W = RNG.uniform(0.5, 2.0, size=N)
W[::7] = 0.0  # rows of zero weight: scikit-learn draws them for no tree
X_NAN = X.copy()
X_NAN[RNG.random(size=X.shape) < 0.05] = np.nan
REFUSED = "training rows in the training order"


def _fits():
    """(name, fitted model, X, y, fit weights)."""
    kw = dict(n_estimators=12, random_state=0)
    return [
        ("rf", RandomForestRegressor(**kw).fit(X, Y), X, Y, None),
        ("rf weighted", RandomForestRegressor(**kw).fit(X, Y, sample_weight=W), X, Y, W),
        ("rf max_samples", RandomForestRegressor(max_samples=0.4, **kw).fit(X, Y), X, Y,
         None),
        ("rf nan", RandomForestRegressor(**kw).fit(X_NAN, Y), X_NAN, Y, None),
        ("rf balanced_subsample", RandomForestClassifier(
            class_weight="balanced_subsample", min_samples_leaf=3, **kw).fit(X, YC), X, YC,
         None),
        ("extra trees", ExtraTreesRegressor(bootstrap=True, max_samples=0.7, **kw)
         .fit(X, Y, sample_weight=W), X, Y, W),
        ("bagging max_features", BaggingRegressor(
            DecisionTreeRegressor(), max_features=3, max_samples=0.7, **kw).fit(X, Y),
         X, Y, None),
        ("bagging weighted", BaggingClassifier(
            DecisionTreeClassifier(max_depth=4), max_features=0.5, **kw)
         .fit(X, YC, sample_weight=W), X, YC, W),
        ("bagging no bootstrap", BaggingRegressor(
            DecisionTreeRegressor(), bootstrap=False, max_samples=0.6, **kw).fit(X, Y),
         X, Y, None),
    ]


FITS = _fits()
IDS = [f[0] for f in FITS]


@pytest.mark.parametrize("name, model, Xf, yf, w", FITS, ids=IDS)
def test_training_rows_are_accepted(name, model, Xf, yf, w):
    # the property the check rests on, from scikit-learn alone: the distinct in-bag rows
    # of each tree reach its nodes as often as n_node_samples says
    for est, rows, cols in zip(model.estimators_, model.estimators_samples_,
                               getattr(model, "estimators_features_",
                                       [np.arange(X.shape[1])] * len(model.estimators_))):
        rows = np.unique(rows)
        path = est.decision_path(Xf[rows][:, cols])
        np.testing.assert_array_equal(np.asarray(path.sum(axis=0)).ravel(),
                                      est.tree_.n_node_samples)
    res = treeimp.explain(model, Xf, yf, oob=True, methods=("mdi_oob",), n_blocks=5,
                          random_state=0)
    assert np.isfinite(res.table["mdi_oob"]).all()
    # evaluation weights other than the fit's (zeros included) change nothing
    ev = np.where(np.arange(N) % 5 == 0, 0.0, 1.0)
    treeimp.explain(model, Xf, yf, oob=True, methods=("mdi_oob",), n_blocks=5,
                    sample_weight=ev, random_state=0)


@pytest.mark.parametrize("name, model, Xf, yf, w", FITS, ids=IDS)
def test_shuffled_sorted_and_other_rows_are_refused(name, model, Xf, yf, w):
    perm = np.random.default_rng(1).permutation(N)
    by_x0 = np.argsort(Xf[:, 0])
    other = np.random.default_rng(7).normal(size=Xf.shape)
    for rows, target in ((Xf[perm], yf[perm]), (Xf[by_x0], yf[by_x0]), (other, yf)):
        with pytest.raises(ValueError, match=REFUSED):
            treeimp.explain(model, rows, target, oob=True, methods=("mdi_oob",),
                            n_blocks=5, random_state=0)


def test_two_swapped_rows_name_the_tree_and_node():
    rf = RandomForestRegressor(n_estimators=30, random_state=0).fit(X, Y)
    # two rows far apart in x0 swapped: some tree has one in bag and not the other
    a, b = int(np.argmin(X[:, 0])), int(np.argmax(X[:, 0]))
    order = np.arange(N)
    order[[a, b]] = order[[b, a]]
    with pytest.raises(ValueError, match=r"Tree \d+'s node \d+ held \d+ distinct in-bag "
                                         r"rows at fit time, but \d+ of the rows"):
        treeimp.explain(rf, X[order], Y[order], oob=True, methods=("mdi_oob",), n_blocks=5)


def test_contributions_out_of_bag_refuse_shuffled_rows():
    rf = RandomForestRegressor(n_estimators=40, oob_score=True, random_state=0).fit(X, Y)
    c = treeimp.contributions(rf, X, oob=True)
    # the training rows: phi^oob adds up to scikit-learn's out-of-bag prediction
    np.testing.assert_allclose(c.base_values + c.values.sum(axis=1), rf.oob_prediction_,
                               atol=1e-9)
    perm = np.random.default_rng(2).permutation(N)
    with pytest.raises(ValueError, match=REFUSED):
        treeimp.contributions(rf, X[perm], oob=True)

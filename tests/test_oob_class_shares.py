"""Out-of-bag rows of a forest whose bootstrap was drawn in proportion to the sample
weights (scikit-learn >= 1.9 with class_weight="balanced"): a rare, heavily weighted
class is then almost never out of bag, and explain(oob=True) warns. The truth is
scikit-learn's own record of the draws (``estimators_samples_``)."""

import warnings

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import treeimp
from treeimp.parsers.sklearn_inbag import sklearn_inbag_bits
from treeimp.stats.inbag_check import SHARE_RATIO, oob_class_shares


def rare_design(seed=0, n=1500):
    """Two informative features, four noise features, about 4% positives."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    p = 1 / (1 + np.exp(-(-4.0 + X[:, 0] + X[:, 1])))
    return X, (rng.random(n) < p).astype(int)


def sklearn_shares(rf, y):
    """Each class's out-of-bag share of its rows per tree, from scikit-learn's draws."""
    n = len(y)
    out = np.zeros(2)
    for idx in rf.estimators_samples_:
        oob = np.ones(n, bool)
        oob[np.asarray(idx)] = False
        out += [oob[y == c].mean() for c in (0, 1)]
    return out / len(rf.estimators_samples_)


def fitted(class_weight):
    X, y = rare_design()
    rf = RandomForestClassifier(n_estimators=20, min_samples_leaf=5, class_weight=class_weight,
                                random_state=0, n_jobs=1).fit(X, y)
    return X, y, rf


@pytest.mark.parametrize("class_weight", [None, "balanced", {0: 1, 1: 10},
                                          "balanced_subsample"])
def test_warns_exactly_when_the_draws_leave_a_class_out(class_weight):
    X, y, rf = fitted(class_weight)
    truth = sklearn_shares(rf, y)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        treeimp.explain(rf, X, y, oob=True, methods=["mdi_oob"], random_state=0)
    said = [w for w in caught if "out of bag per tree" in str(w.message)]
    expect = truth.min() < SHARE_RATIO * truth.max()
    assert bool(said) == expect, (truth, [str(w.message) for w in said])
    if class_weight in (None, "balanced_subsample"):  # drawn without the class weights
        assert not said and truth.min() > 0.3
    if said:
        assert "class 1" in str(said[0].message)
        assert "balanced_subsample" in str(said[0].message)


def test_shares_equal_scikit_learns_draws():
    X, y, rf = fitted({0: 1, 1: 10})
    bits = sklearn_inbag_bits(rf, len(y))
    ours = oob_class_shares(bits, np.arange(len(y)), y, 2)
    np.testing.assert_allclose(ours, sklearn_shares(rf, y), rtol=1e-12)
    # positions select the rows: the shares of a subset of the rows, as scikit-learn's
    pos = np.arange(0, len(y), 3)
    sub = oob_class_shares(bits, pos, y[pos], 2)
    want = np.zeros(2)
    for idx in rf.estimators_samples_:
        oob = np.ones(len(y), bool)
        oob[np.asarray(idx)] = False
        want += [oob[pos][y[pos] == c].mean() for c in (0, 1)]
    np.testing.assert_allclose(sub, want / len(rf.estimators_), rtol=1e-12)
    # a class without rows among them: NaN, not a division warning
    three = oob_class_shares(bits, np.arange(len(y)), y, 3)
    assert np.isnan(three[2]) and np.all(np.isfinite(three[:2]))

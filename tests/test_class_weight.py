"""Forest classifiers fitted with scikit-learn's ``class_weight``: their node values are
class-weighted shares, and out of bag ``mdi_oob`` / ``mdi_oob_centered`` give pure-noise
features large positive z-scores; the default screening measure of such forests is
``ufi`` (``measures/screening.py``), which keeps the noise out."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import treeimp
from treeimp.selector import ImportanceSelector


def _rare_positives(n=1200, seed=0):
    """Two informative features, six noise features, about 5% positives."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    p = 1 / (1 + np.exp(-(-3.5 + X[:, 0] + X[:, 1])))
    return X, (rng.random(n) < p).astype(int)


@pytest.fixture(scope="module")
def balanced():
    X, y = _rare_positives()
    # balanced_subsample weights the rows after the draw; "balanced" makes scikit-learn
    # >= 1.9 draw in proportion to the weights, leaving the positives nearly never out of
    # bag (tests/test_oob_class_shares.py)
    rf = RandomForestClassifier(n_estimators=60, class_weight="balanced_subsample",
                                min_samples_leaf=5, random_state=0, n_jobs=1).fit(X, y)
    return X, y, rf, treeimp.explain(rf, X, y, oob=True, random_state=0)


def test_class_weighted_forest_screens_with_ufi(balanced):
    X, y, rf, res = balanced
    assert res.screening == "ufi"
    assert "ufi" in res.methods
    kept = res.select()
    noise = {f"x{j}" for j in range(2, 8)}
    assert len(noise & set(kept)) <= 1
    assert {"x0", "x1"} <= set(kept)
    # the selector agrees with the result
    sel = ImportanceSelector(rf, oob=True, random_state=0).fit(X, y)
    assert sel.method_ == "ufi"


def test_the_bias_the_default_avoids(balanced):
    # why: out of bag, the class-weighted node values give the noise features large
    # positive mdi_oob_centered z-scores (the unweighted forest's stay near 0)
    X, y, rf, _ = balanced
    res = treeimp.explain(rf, X, y, oob=True, random_state=0,
                          methods=["mdi_oob_centered", "ufi"])
    noise = [f"x{j}" for j in range(2, 8)]
    z = (res.table / res.stderr).loc[noise]
    assert z["mdi_oob_centered"].mean() > 3
    assert z["ufi"].abs().max() < 3
    plain = RandomForestClassifier(n_estimators=60, min_samples_leaf=5, random_state=0,
                                   n_jobs=1).fit(X, y)
    res_plain = treeimp.explain(plain, X, y, oob=True, random_state=0)
    assert res_plain.screening is None  # the forest default: mdi_oob_centered
    assert "mdi_oob_centered" in res_plain.methods
    z_plain = (res_plain.table / res_plain.stderr).loc[noise, "mdi_oob_centered"]
    assert z_plain.mean() < 2

"""cross_explain: every row evaluated once by a model that did not see it, the folds
combined into one estimate (checked against the folds' own explain results), its
standard error one jackknife over all folds' row blocks (checked against a brute-force
delete-a-block jackknife of a per-row mean), screening on Zhou & Hooker's design, and
input errors."""

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
from sklearn.model_selection import KFold

import treeimp
from treeimp.crossfit import CROSSFIT_VARIANCE_FACTOR, combine_folds
from treeimp.results.importances import Importances


def test_combination_equals_the_folds_explained_by_hand():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = X[:, 0] + rng.normal(size=300)
    gb = GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0)
    cv = KFold(3, shuffle=True, random_state=1)
    res = treeimp.cross_explain(gb, X, y, cv=cv, methods=("mdi_oob", "ufi"), n_blocks=5,
                                random_state=0)
    seeds = np.random.default_rng(0).integers(np.iinfo(np.int32).max, size=3)
    table, reps = 0.0, {"mdi_oob": [], "ufi": []}
    folds = []
    for (train, test), seed in zip(cv.split(X), seeds):
        m = GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0)
        m.fit(X[train], y[train])
        r = treeimp.explain(m, X[test], y[test], methods=("mdi_oob", "ufi"), n_blocks=5,
                            random_state=int(seed))
        table = table + len(test) / 300 * r.table
        folds.append((len(test) / 300, r))
    np.testing.assert_allclose(res.table, table, rtol=1e-12)
    # replicate (f, b): fold f's block b left out, its share of the fold's weight (the
    # block's row count over the fold's) taken from all rows
    for meth in reps:
        for share, r in folds:
            others = table[meth].to_numpy() - share * r.table[meth].to_numpy()
            gone = share * (r.block_weight / r.block_weight.sum())[:, None]
            assert r.block_weight.sum() == r.n_rows  # unweighted: row counts
            reps[meth].append((others + (share - gone) * r.block_values[meth])
                              / (1 - gone))
        rep = np.concatenate(reps[meth])
        jack = np.sqrt(14 / 15 * ((rep - rep.mean(axis=0)) ** 2).sum(axis=0))
        np.testing.assert_allclose(res.stderr[meth], CROSSFIT_VARIANCE_FACTOR * jack,
                                   rtol=1e-10)
    assert res.dof == 3 * 5 - 1 and res.n_rows == 300
    assert res.per_tree["ufi"].shape == (30, 4)
    assert res.block_values["ufi"].shape == (15, 4)


def _fold_result(terms, blocks, n_blocks):
    """An Importances of a per-row mean: ``terms`` (rows, features) of one fold, its
    value the mean and its leave-one-block-out values the means without each block."""
    loo = np.array([terms[blocks != b].mean(axis=0) for b in range(n_blocks)])
    names = [f"x{j}" for j in range(terms.shape[1])]
    frame = lambda v: pd.DataFrame({"mdi_oob": v}, index=names)  # noqa: E731
    return Importances(table=frame(terms.mean(axis=0)), stderr=frame(np.ones(terms.shape[1])),
                       stderr_trees=frame(np.ones(terms.shape[1])),
                       per_tree={"mdi_oob": terms.mean(axis=0)[None]},
                       block_values={"mdi_oob": loo}, n_blocks=n_blocks, kind="boosting",
                       n_rows=len(terms))


def test_pooled_jackknife_equals_brute_force_over_all_rows():
    """For a per-row mean with the folds' models fixed, the combined error is the
    delete-a-block jackknife of the mean over all rows, every (fold, block) left out in
    turn; folds of different sizes and means (a between-fold spread the error must
    include)."""
    rng = np.random.default_rng(4)
    sizes, B = (60, 80, 100), 4
    terms = [rng.normal(loc=mu, size=(k, 3)) for k, mu in zip(sizes, (-1.0, 0.0, 2.0))]
    blocks = [rng.permutation(np.arange(k) % B) for k in sizes]
    parts = [_fold_result(t, b, B) for t, b in zip(terms, blocks)]
    n = sum(sizes)
    res = combine_folds(parts, np.array(sizes) / n, n_rows=n, factor=1.0)
    all_terms = np.concatenate(terms)
    np.testing.assert_allclose(res.table["mdi_oob"], all_terms.mean(axis=0), rtol=1e-12)
    keep = np.ones((len(sizes) * B, n), bool)
    start = np.cumsum((0,) + sizes)
    for f, b in enumerate(blocks):
        for j in range(B):
            keep[f * B + j, start[f]:start[f + 1]] = b != j
    loo = np.array([all_terms[k].mean(axis=0) for k in keep])
    np.testing.assert_allclose(res.block_values["mdi_oob"], loo, rtol=1e-12)
    nb = len(loo)
    jack = np.sqrt((nb - 1) / nb * ((loo - loo.mean(axis=0)) ** 2).sum(axis=0))
    np.testing.assert_allclose(res.stderr["mdi_oob"], jack, rtol=1e-12)
    assert res.dof == nb - 1
    # the within-fold (stratified) error misses the folds' different means
    within = np.sqrt(sum((k / n) ** 2 * (B - 1) / B
                         * ((r.block_values["mdi_oob"] - r.block_values["mdi_oob"].mean(0))
                            ** 2).sum(0) for k, r in zip(sizes, parts)))
    assert np.all(jack > 1.1 * within), (jack, within)
    res_default = combine_folds(parts, np.array(sizes) / n, n_rows=n)
    np.testing.assert_allclose(res_default.stderr["mdi_oob"], CROSSFIT_VARIANCE_FACTOR * jack)


def test_groups_are_member_sums_in_every_fold():
    """A group's cross-fitted value is the sum of its members' (the combination is
    linear), and its error the folds' jackknife errors of the group sums."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 4))
    y = X[:, 0] + X[:, 1] + rng.normal(size=240)
    gb = GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0)
    kw = dict(cv=KFold(3, shuffle=True, random_state=2), methods=("mdi_oob",), n_blocks=4,
              random_state=0)
    single = treeimp.cross_explain(gb, X, y, **kw)
    grouped = treeimp.cross_explain(gb, X, y, groups={"ab": [0, 1]}, **kw)
    assert list(grouped.table.index) == ["ab", "x2", "x3"]
    assert grouped.groups["ab"] == ["x0", "x1"]
    np.testing.assert_allclose(grouped.table.loc["ab", "mdi_oob"],
                               single.table.loc[["x0", "x1"], "mdi_oob"].sum(), rtol=1e-12)
    loo = single.block_values["mdi_oob"][:, :2].sum(axis=1)
    np.testing.assert_allclose(grouped.block_values["mdi_oob"][:, 0], loo, rtol=1e-12)
    # the group error is not the root-sum-of-squares of its members' errors
    rss = np.hypot(*single.stderr.loc[["x0", "x1"], "mdi_oob"])
    assert not np.isclose(grouped.stderr.loc["ab", "mdi_oob"], rss, rtol=1e-6)


def _zhou_hooker(n, rng):
    """Zhou & Hooker (2020) 5.1, regression: X_i uniform on 0..i, y = X_1 + 5 eps."""
    X = np.column_stack([rng.integers(0, i + 1, n).astype(float) for i in range(1, 11)])
    return X, X[:, 0] + 5.0 * rng.normal(size=n)


def test_cross_fitted_screening_on_zhou_hooker_design():
    """Boosting, 5 folds, the default screening measure of boosting regression (ufi): the
    informative binary X_1 kept in every repetition, at most 5% of the 9 noise features
    kept on average. The design is hard on purpose (X_1 explains 1% of the variance of
    y): at n = 5,000 X_1's cross-fitted z-score was 2.2-4.1 (kept in 3 of 4 runs); at
    n = 10,000 it is 4.1-6.0."""
    xgb = pytest.importorskip("xgboost")
    kept_signal, kept_noise = [], []
    for rep in range(3):
        X, y = _zhou_hooker(10_000, np.random.default_rng(rep))
        model = xgb.XGBRegressor(n_estimators=40, max_depth=2, learning_rate=0.1,
                                 n_jobs=1, random_state=rep)
        sel = treeimp.ImportanceSelector(model, random_state=rep).fit(X, y)
        assert sel.method_ == "ufi"
        assert sel.importances_.n_rows == 10_000  # cross-fitted: every row evaluated
        kept_signal.append(sel.support_[0])
        kept_noise.append(sel.support_[1:].mean())
    assert all(kept_signal), kept_signal
    assert np.mean(kept_noise) <= 0.05, kept_noise


def test_classifier_folds_are_stratified_and_weights_reach_fit():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    y = np.where(np.arange(200) < 20, 1, 0)
    rf = RandomForestClassifier(n_estimators=5, random_state=0)
    res = treeimp.cross_explain(rf, X, y, cv=4, n_blocks=5, random_state=0)
    assert res.n_rows == 200 and res.dof == 4 * 5 - 1
    w = np.where(np.arange(200) % 2 == 0, 1.0, 0.0)
    res_w = treeimp.cross_explain(rf, X, y, cv=4, n_blocks=5, random_state=0,
                                  sample_weight=w)
    assert not np.allclose(res.table["mdi_oob"], res_w.table["mdi_oob"])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"cv": 1}, ValueError, "cv must be >= 2 folds, got 1"),
    ({"cv": "five"}, TypeError, "cv must be an integer >= 2 or a splitter"),
    ({"cv": 50, "n_blocks": 10}, ValueError, "a fold holds out 2 rows, fewer than n_blocks=10"),
    ({"cv": KFold(2).split(np.zeros((100, 1)))}, TypeError, "cv must be an integer"),
])
def test_bad_input(kwargs, error, match):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(100, 3)), rng.normal(size=100)
    with pytest.raises(error, match=match):
        treeimp.cross_explain(GradientBoostingRegressor(n_estimators=3), X, y, **kwargs)


def test_splitter_that_skips_rows_is_rejected():
    class Half:
        def split(self, X, y):
            idx = np.arange(len(y))
            yield idx[50:], idx[:25]
            yield idx[:50], idx[50:]

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(100, 3)), rng.normal(size=100)
    with pytest.raises(ValueError, match="25 rows never held out"):
        treeimp.cross_explain(GradientBoostingRegressor(n_estimators=3), X, y, cv=Half(),
                              n_blocks=5)

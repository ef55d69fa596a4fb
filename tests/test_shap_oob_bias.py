"""SHAP computed on the rows a tree was grown on carries MDI's in-bag bias; out of bag
it does not (Loecher 2023, paper 002). Small, seeded versions of two designs
(``tests/shap_designs.py``); the figures they give are in docs/user_guide/rows_oob.rst
and docs/studies.rst."""

import numpy as np

import treeimp
from tests.shap_designs import li_classification, ranking_auc, strobl_null


def _forest(X, y, seed, n_trees=60):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=n_trees, random_state=seed).fit(X, y)


def test_strobl_null_design_bias_removed_out_of_bag():
    """X1 continuous, X2 binary, X3..X5 with 4/10/20 levels, y independent; deep forest."""
    imp_in, shap_oob, betas = [], [], []
    for rep in range(6):
        X, y = strobl_null(120, rep)
        rf = _forest(X, y, rep)
        c = treeimp.contributions(rf, X, oob=True)
        imp_in.append(c.importance("in").to_numpy()[:, 1])
        r = treeimp.explain(rf, X, y, oob=True, methods=("shap_oob",), random_state=rep)
        shap_oob.append(r.table.shap_oob.to_numpy())
        betas.append(c.shrunk().betas[:, 1])
    imp_in, shap_oob, betas = map(np.array, (imp_in, shap_oob, betas))
    # in-bag: the continuous and the 20-level noise look far more important than binary
    m = imp_in.mean(axis=0)
    assert m[0] > 2 * m[1] and m[4] > 2 * m[1], m
    # out of bag: every noise feature's mean over repetitions within 3 standard errors of 0
    se = shap_oob.std(axis=0, ddof=1) / np.sqrt(len(shap_oob))
    assert np.all(np.abs(shap_oob.mean(axis=0)) < 3 * se), (shap_oob.mean(axis=0), se)
    # shrinkage: phi^oob follows phi^in only weakly for noise (a slope well below 1)
    assert np.all(np.abs(betas.mean(axis=0)) < 0.5), betas.mean(axis=0)


def test_li_design_ranking_aucs():
    """Feature j takes j + 1 values, 5 relevant among the first ten (paper 000, section 5);
    ranking AUC of relevant above noise features."""
    aucs = []
    for rep in range(2):
        X, y, relevant = li_classification(300, rep)
        rf = _forest(X, y, rep, n_trees=50)
        c = treeimp.contributions(rf, X, oob=True)
        r = treeimp.explain(rf, X, y, oob=True, methods=("mdi", "mdi_oob", "shap_oob"),
                            random_state=rep)
        aucs.append([ranking_auc(c.importance("in").to_numpy()[:, 1], relevant),
                     ranking_auc(r.table.shap_oob, relevant),
                     ranking_auc(c.shrunk().importance().to_numpy()[:, 1], relevant),
                     ranking_auc(r.table.mdi, relevant),
                     ranking_auc(r.table.mdi_oob, relevant)])
    shap_in, shap_oob, shrunk, mdi, mdi_oob = np.mean(aucs, axis=0)
    # in-bag measures prefer the many-valued noise features; out-of-bag ones do not
    assert mdi < 0.5 and shap_in < 0.5
    assert shap_oob > shap_in + 0.1 and mdi_oob > mdi + 0.2
    assert shap_oob > 0.5 and mdi_oob > 0.5
    assert shrunk > shap_in

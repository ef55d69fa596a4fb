"""Permutation importance of a model routed by its library's leaf indices (a
``LeafRouter``, e.g. CatBoost with target-statistic splits), or with linear leaf models
(LightGBM ``linear_tree=True``, whose every leaf output may read the permuted column).

Such a model's routing numbers come from the library, which reads the user's raw
columns, so a permuted column must go through the library again: every column and
repeat routes all rows anew, exactly as scikit-learn's ``permutation_importance``
predicts on each permuted copy of X (same seed, same shuffles compounding over the
repeats, the same column assignment for DataFrames), and scores the margins with the
same scorer as the compiled path.
"""

from __future__ import annotations

import numpy as np

from ..inputs.rows import RowSource


def rerouted_permutation_scores(ens, X, cols, score, n_repeats, rng, subset=None,
                                shuffle=None):
    """{key: (n_repeats,) scores} for ``permutation_importance``: ``cols`` the columns
    permuted jointly (one without groups), ``score`` the bound scorers of a margin
    ({key: score}); scikit-learn's permutations (``rng``'s shuffles compounding over
    the repeats, of the rows ``subset`` only when given, scored on those rows in its
    order). ``shuffle(rng, idx)``: how the row order is permuted in place (default
    ``rng.shuffle``; a ranker's permutes within queries)."""
    frame = hasattr(X, "iloc")
    if subset is not None:
        X = X.iloc[subset] if frame else np.asarray(X)[subset]
    n = X.shape[0]
    idx = np.arange(n)
    Xp = X.copy() if frame else np.array(X, copy=True)
    out = {}
    for r in range(n_repeats):
        if shuffle is None:
            rng.shuffle(idx)
        else:
            shuffle(rng, idx)
        permute_columns(Xp, cols, idx, frame)
        for key, value in score(ens.predict_raw(RowSource(Xp, ens))).items():
            out.setdefault(key, np.empty(n_repeats))[r] = value
    return out


def permute_columns(Xp, cols, idx, frame):
    """Xp's columns ``cols`` := their rows ``idx`` in place, as scikit-learn's
    permutation_importance assigns them (a DataFrame column by position, keeping the
    index)."""
    if frame:
        for j in cols:
            col = Xp.iloc[idx, j]
            col.index = Xp.index
            Xp[Xp.columns[j]] = col
    else:
        Xp[:, cols] = Xp[np.ix_(idx, cols)]

"""Permutation importance of a model routed by its library's leaf indices (a
``LeafRouter``, e.g. CatBoost with target-statistic splits).

Such a model's routing numbers come from the library, which reads the user's raw
columns, so a permuted column must go through the library again: every column and
repeat routes all rows anew, exactly as scikit-learn's ``permutation_importance``
predicts on each permuted copy of X (same seed, same shuffles compounding over the
repeats, the same column assignment for DataFrames), and scores the margins with the
same scorer as the compiled path.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from ..inputs.rows import RowSource
from ..stats.progress import progress_bar


def rerouted_permutation_scores(ens, X, columns, score, n_repeats, seed, progress):
    """Scores (len(columns), n_repeats) for ``permutation_importance``: ``columns`` the
    column lists permuted jointly (one column each without groups), ``score`` the bound
    scorer of a margin; scikit-learn's permutations (a fresh ``RandomState(seed)`` per
    column list, shuffles compounding over repeats)."""
    frame = hasattr(X, "iloc")
    n = X.shape[0]
    scores = np.empty((len(columns), n_repeats))
    bar = progress_bar(progress, total=len(columns),
                       work=n * ens.n_trees * n_repeats, desc="permutation_importance")
    for g, cols in enumerate(columns):
        bar.update(1)
        rng = check_random_state(seed)
        idx = np.arange(n)
        Xp = X.copy() if frame else np.array(X, copy=True)
        for r in range(n_repeats):
            rng.shuffle(idx)
            if frame:
                for j in cols:
                    col = Xp.iloc[idx, j]
                    col.index = Xp.index
                    Xp[Xp.columns[j]] = col
            else:
                Xp[:, cols] = Xp[np.ix_(idx, cols)]
            scores[g, r] = score(ens.predict_raw(RowSource(Xp, ens)))
    bar.close()
    return scores

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

from ._input import RowSource
from .progress import progress_bar
from .scoring import bind_scorer


def rerouted_permutation_scores(ens, X, rows, y, w, scoring, n_repeats, seed, progress):
    """(scores (n_features, n_repeats), baseline score) for ``permutation_importance``."""
    margin = ens.predict_raw(rows)
    score, baseline = bind_scorer(ens, scoring, y, w, margin)
    frame = hasattr(X, "iloc")
    n = rows.n_rows
    scores = np.empty((ens.n_features, n_repeats))
    bar = progress_bar(progress, total=ens.n_features,
                       work=n * ens.n_trees * n_repeats, desc="permutation_importance")
    for j in range(ens.n_features):
        bar.update(1)
        rng = check_random_state(seed)
        idx = np.arange(n)
        Xp = X.copy() if frame else np.array(X, copy=True)
        for r in range(n_repeats):
            rng.shuffle(idx)
            if frame:
                col = Xp.iloc[idx, j]
                col.index = Xp.index
                Xp[Xp.columns[j]] = col
            else:
                Xp[:, j] = Xp[idx, j]
            scores[j, r] = score(ens.predict_raw(RowSource(Xp, ens)))
    bar.close()
    return scores, baseline

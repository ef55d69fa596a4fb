"""Permutation importance on the compiled normal form.

Same permutations and scores as ``sklearn.inspection.permutation_importance`` (one seed
drawn from ``random_state``; for every column a fresh ``RandomState(seed)`` whose
shuffles compound over the repeats), on the compiled normal form. Every row is routed
once and, per tree, sorted by leaf (at most 8 bytes per row and tree). A permuted
column j can only move the rows under the topmost nodes that split on j; their new
values are tested against the j-nodes of their leaf's path, and only the rows that
leave it are walked on, from there (``treeimp/kernels/permute.py``). Only the rows that
reach a different leaf get a new margin, summed over all trees in the order prediction
uses (an averaged forest: then divided, as scikit-learn does), or, where no float64 sum
of the leaf values can round (XGBoost), the baseline margin plus the changes of their
terms. The permuted margins are bitwise those of a full re-prediction: rows reaching
the same leaves get equal margins, so ties (which decide roc_auc) stay ties, and forest
probabilities are scikit-learn's.
Scores: ``scoring.bind_scorer`` (scikit-learn's metrics, target-only work done once).
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..inputs.groups import resolve_groups
from ..inputs.rows import RowSource, check_unique_columns, feature_names_of
from ..inputs.targets import as_target, check_sample_weight, n_target_columns
from ..inputs.threads import numba_threads
from ..measures.ranking_scoring import bind_ranking_scorer, check_ranking_scoring
from ..measures.scoring import bind_scorer, make_scorer
from ..model.offsets import check_base_margin
from ..model.ranking import check_query_input, check_ranking_labels
from ..model.routing import _forest_scale, predict_ensemble, routing_flags
from ..stats.progress import progress_bar
from .leaf_index import LeafIndex
from .routed import rerouted_permutation_scores


def permutation_importance_parsed(ens, X, y, feature_names, input_groups, *, scoring=None,
                                  n_repeats=5, random_state=None, n_jobs=None,
                                  sample_weight=None, progress=None, groups=None,
                                  base_margin=None, qid=None, group=None,
                                  within_queries=True):
    """:func:`permutation_importance` of a parsed ensemble on X as its last step sees it
    (``feature_names``, ``input_groups``: from a Pipeline's steps, or None). A
    learning-to-rank model's rows form the queries ``qid`` / ``group``: scored with a
    ranking scorer (measures/ranking_scoring.py), a column permuted among the rows of
    each query (``within_queries``) or among all rows."""
    check_unique_columns(X)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)) \
            or n_repeats < 1:
        raise ValueError(f"n_repeats must be a positive integer, got {n_repeats!r}")
    rows = RowSource(X, ens)
    n = rows.n_rows
    y = as_target(y, n, n_target_columns(ens))
    w = None if sample_weight is None else check_sample_weight(sample_weight, n)
    offset = check_base_margin(base_margin, n, ens)
    query = check_query_input(ens.objective, n, qid, group)
    if not isinstance(within_queries, (bool, np.bool_)):
        raise TypeError(f"within_queries must be True or False, got {within_queries!r}")
    # a bad scoring (or bad labels) fails before any routing
    if query is not None:
        check_ranking_scoring(scoring)
        y = check_ranking_labels(ens.objective, y)
    else:
        make_scorer(ens, scoring)
    shuffle = _query_shuffle(query) if query is not None and within_queries else _shuffle
    names = feature_names_of(feature_names, rows, ens)
    grp = resolve_groups(groups, names, input_groups)
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max + 1)
    columns = ([[j] for j in range(ens.n_features)] if grp is None
               else [list(m) for m in grp.members])
    if ens.leaf_router is not None and shuffle is not _shuffle:
        raise ValueError("within_queries=True is not available for a model routed by its "
                         "library's leaf indices (CatBoost with target-statistic splits): "
                         "pass within_queries=False (columns permuted among all rows)")
    if ens.leaf_router is not None:  # rows routed by the library
        with numba_threads(n_jobs):
            score, baseline = _bind(ens, scoring, y, w, ens.predict_raw(rows), offset,
                                    query)
            scores = rerouted_permutation_scores(ens, X, columns, score, n_repeats, seed,
                                                 progress)
        return importance_bunch(baseline - scores, grp, names)

    Xw = _working_copy(rows)
    strict, round32 = routing_flags(ens, Xw)
    with numba_threads(n_jobs):
        # rows routed once and sorted by leaf: at most 8 bytes per (row, tree) pair
        index = LeafIndex(ens, Xw, *_forest_scale(ens), strict, round32)
        margin = index.margin()  # bitwise predict_ensemble(ens, Xw)
    score, baseline = _bind(ens, scoring, y, w, margin, offset, query)
    scores = np.empty((len(columns), n_repeats))
    perm_margin = np.empty_like(margin)
    bar = progress_bar(progress, total=len(columns),
                       work=n * ens.n_trees * n_repeats, desc="permutation_importance")
    for g, cols in enumerate(columns):
        bar.update(1)
        if len(cols) > 1:
            scores[g] = _joint_scores(ens, Xw, cols, seed, n_repeats, score, baseline,
                                      n_jobs, index, shuffle)
            continue
        j = cols[0]
        if index.n_tops(j) == 0:  # no row meets a split on column j: nothing changes
            scores[g] = baseline
            continue
        rng = check_random_state(seed)
        idx = np.arange(n)
        original = Xw[:, j].copy()
        with numba_threads(n_jobs):
            index.begin(j)
        for r in range(n_repeats):
            shuffle(rng, idx)
            Xw[:, j] = Xw[idx, j]
            with numba_threads(n_jobs):
                index.permuted_margin(Xw, margin, perm_margin)
            scores[g, r] = score(perm_margin)
        with numba_threads(n_jobs):
            index.finish()
        Xw[:, j] = original
    bar.close()
    return importance_bunch(baseline - scores, grp, names)


def importance_bunch(importances, grp, names):
    """scikit-learn's Bunch (importances_mean, importances_std, importances) of the
    (columns, n_repeats) score drops; with feature groups, their names and members."""
    out = Bunch(importances_mean=importances.mean(axis=1),
                importances_std=importances.std(axis=1), importances=importances)
    if grp is not None:
        out.group_names = list(grp.names)
        out.groups = grp.member_names(names)
    return out


def _bind(ens, scoring, y, w, margin, offset, query=None):
    """(score(trees' margin) -> float, score of ``margin``): with per-row offsets the
    trees' margins start at the offset instead of the base score; a ranking model's
    (``query``: its bounds) with a ranking scorer."""
    def bind(m):
        if query is not None:
            return bind_ranking_scorer(scoring, y, w, query, m)
        return bind_scorer(ens, scoring, y, w, m)

    if offset is None:
        return bind(margin)
    shift = ens.start_margin(offset) - ens.base_score
    offset_score, baseline = bind(margin + shift)
    return (lambda m: offset_score(m + shift)), baseline


def _shuffle(rng, idx):
    """scikit-learn's permutation of all rows (compounding over the repeats)."""
    rng.shuffle(idx)


def _query_shuffle(bounds):
    """A shuffle that permutes ``idx`` within each query (rows bounds[q]:bounds[q + 1]):
    a random permutation of all rows, then stably sorted by query."""
    query_of = np.repeat(np.arange(bounds.shape[0] - 1), np.diff(bounds))

    def shuffle(rng, idx):
        perm = rng.permutation(idx.shape[0])
        idx[:] = idx[perm[np.argsort(query_of[perm], kind="stable")]]
    return shuffle


def _joint_scores(ens, Xw, cols, seed, n_repeats, score, baseline, n_jobs, index,
                  shuffle=_shuffle):
    """Scores with the columns ``cols`` permuted jointly: the permutations of
    scikit-learn's loop (a fresh ``RandomState(seed)`` per group, shuffles compounding
    over repeats) applied to all member columns at once. Only the rows that meet a
    split on a member column can move, but several columns move together, so the
    permuted rows are re-predicted in full (bitwise ``index.margin()``'s sums)."""
    out = np.empty(n_repeats)
    if all(index.n_tops(j) == 0 for j in cols):  # no split on any member
        out[:] = baseline
        return out
    rng = check_random_state(seed)
    idx = np.arange(Xw.shape[0])
    original = Xw[:, cols].copy()
    for r in range(n_repeats):
        shuffle(rng, idx)
        Xw[:, cols] = Xw[np.ix_(idx, cols)]
        out[r] = score(predict_ensemble(ens, Xw, n_jobs=n_jobs))
    Xw[:, cols] = original
    return out


def _working_copy(rows):
    """One writable float copy of X (as scikit-learn's X.copy())."""
    chunks = [chunk for _, chunk in rows.chunks()]
    if len(chunks) == 1:
        return np.array(chunks[0], order="C", copy=True)
    return np.ascontiguousarray(np.concatenate(chunks))

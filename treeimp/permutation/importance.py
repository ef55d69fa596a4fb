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

from ..api import _feature_names
from ..dask.collections import is_dask_collection
from ..dask.permutation import dask_permutation_importance
from ..inputs.checks import check_explainable, check_unique_columns
from ..inputs.groups import resolve_groups
from ..inputs.pipeline import unwrap
from ..inputs.rows import RowSource
from ..inputs.targets import as_target, check_sample_weight, n_target_columns
from ..inputs.threads import numba_threads
from ..measures.scoring import bind_scorer, make_scorer
from ..model.offsets import check_base_margin
from ..model.routing import _forest_scale, predict_ensemble, routing_flags
from ..parsers import parse
from ..stats.progress import progress_bar
from .leaf_index import LeafIndex


def permutation_importance(model, X, y, *, scoring=None, n_repeats=5, random_state=None,
                           n_jobs=None, sample_weight=None, progress=None, groups=None,
                           iteration_range=None, missing=None, base_margin=None):
    """Permutation importance (mean decrease in score), scikit-learn compatible.

    Parameters
    ----------
    model : fitted scikit-learn / XGBoost / LightGBM / CatBoost model, TreeEnsemble or file
        With the trees its default predict uses (see :func:`treeimp.parse`); or a fitted
        scikit-learn Pipeline ending in one: its columns are then those the last step
        sees (X transformed by the steps before it).
    X : array-like, scipy.sparse matrix or DataFrame (n_rows, n_features)
        As in :func:`treeimp.explain`. Permuting needs one dense float copy of X (as
        scikit-learn's ``X.copy()``); a sparse X is made dense for it, its absent
        entries read as the model's library reads them (XGBoost: missing; LightGBM,
        scikit-learn: 0).
        A dask array or DataFrame (``pip install "treeimp[dask]"``; y, sample_weight
        and base_margin then dask collections partitioned as X, or in-memory arrays):
        each partition permutes its own rows with a seeded generator and returns score
        sums, added up on the cluster (``treeimp/permutation_dask.py`` explains and
        measures the scheme; roc_auc is refused).
    y : array-like (n_rows,)
    scoring : None or str
        None (accuracy for classifiers, r2 for regressors, as ``model.score``),
        "accuracy", "neg_log_loss", "roc_auc", "r2", "neg_mean_squared_error", or
        "objective" (negative mean of the model's own training loss).
    n_repeats : int, default 5
    random_state : int, RandomState or None
        As in scikit-learn: with the same value, the same permutations.
    n_jobs : int or None
        Threads for routing (on dask: per partition task, None meaning 1).
    sample_weight : array-like (n_rows,), optional
        Weights for the score.
    progress : None, True or False
        A tqdm bar over the features (None: only on a terminal, for long runs); not
        shown for dask input (watch dask's dashboard).
    groups : dict or "input", optional
        As in :func:`treeimp.explain`: each group's columns are permuted jointly (the
        same permutation of rows for every member column); one row per group.
    iteration_range, missing, base_margin
        As in :func:`treeimp.explain`: the boosting rounds used, XGBoost's missing-value
        sentinel, per-row margin offsets (scores are those of the model predicting with
        that offset).

    Returns
    -------
    Bunch with ``importances_mean``, ``importances_std`` (n_features,) and
    ``importances`` (n_features, n_repeats); with ``groups``, one row per group and
    ``group_names`` and ``groups`` ({name: member features}).

    Notes
    -----
    Unlike :func:`treeimp.explain`, whose memory does not grow with the number of trees,
    this keeps every row's leaf in every tree, sorted by leaf: 5 to 8 bytes per (row,
    tree) pair (5 for trees of up to 256 leaves: 125 MB for 50,000 rows and 500 trees).
    Pass a subset of rows for very large inputs. Models routed by their library's leaf
    indices (CatBoost with target-statistic splits) are re-predicted through the library
    for every permuted copy of X, as scikit-learn does (``treeimp/permutation_routed.py``).

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> import treeimp
    >>> X, y = make_regression(n_samples=200, n_features=4, random_state=0)
    >>> rf = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    >>> r = treeimp.permutation_importance(rf, X, y, n_repeats=3, random_state=0)
    >>> r.importances.shape
    (4, 3)
    """
    if any(is_dask_collection(v) for v in (X, y, sample_weight, base_margin)):  # partitions
        return dask_permutation_importance(
            model, X, y, scoring=scoring, n_repeats=n_repeats, random_state=random_state,
            n_jobs=n_jobs, sample_weight=sample_weight, groups=groups,
            iteration_range=iteration_range, missing=missing, base_margin=base_margin)
    u = unwrap(model, X, need_input_groups=isinstance(groups, str) and groups == "input")
    check_unique_columns(u.X)
    ens = parse(u.model, iteration_range=iteration_range, missing=missing)
    check_explainable(ens)
    return permutation_importance_parsed(
        ens, u.X, y, u.feature_names, u.input_groups, scoring=scoring, n_repeats=n_repeats,
        random_state=random_state, n_jobs=n_jobs, sample_weight=sample_weight,
        progress=progress, groups=groups, base_margin=base_margin)


def permutation_importance_parsed(ens, X, y, feature_names, input_groups, *, scoring=None,
                                  n_repeats=5, random_state=None, n_jobs=None,
                                  sample_weight=None, progress=None, groups=None,
                                  base_margin=None):
    """:func:`permutation_importance` of a parsed ensemble on X as its last step sees it
    (``feature_names``, ``input_groups``: from a Pipeline's steps, or None)."""
    check_unique_columns(X)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)) \
            or n_repeats < 1:
        raise ValueError(f"n_repeats must be a positive integer, got {n_repeats!r}")
    rows = RowSource(X, ens)
    n = rows.n_rows
    y = as_target(y, n, n_target_columns(ens))
    w = None if sample_weight is None else check_sample_weight(sample_weight, n)
    offset = check_base_margin(base_margin, n, ens)
    make_scorer(ens, scoring)  # a bad scoring fails before any routing
    names = _feature_names(feature_names, rows, ens)
    grp = resolve_groups(groups, names, input_groups)
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max + 1)
    columns = ([[j] for j in range(ens.n_features)] if grp is None
               else [list(m) for m in grp.members])
    if ens.leaf_router is not None:  # rows routed by the library
        from .routed import rerouted_permutation_scores

        with numba_threads(n_jobs):
            score, baseline = _bind(ens, scoring, y, w, ens.predict_raw(rows), offset)
            scores = rerouted_permutation_scores(ens, X, columns, score, n_repeats, seed,
                                                 progress)
        return importance_bunch(baseline - scores, grp, names)

    Xw = _working_copy(rows)
    strict, round32 = routing_flags(ens, Xw)
    with numba_threads(n_jobs):
        # rows routed once and sorted by leaf: at most 8 bytes per (row, tree) pair
        index = LeafIndex(ens, Xw, *_forest_scale(ens), strict, round32)
        margin = index.margin()  # bitwise predict_ensemble(ens, Xw)
    score, baseline = _bind(ens, scoring, y, w, margin, offset)
    scores = np.empty((len(columns), n_repeats))
    perm_margin = np.empty_like(margin)
    bar = progress_bar(progress, total=len(columns),
                       work=n * ens.n_trees * n_repeats, desc="permutation_importance")
    for g, cols in enumerate(columns):
        bar.update(1)
        if len(cols) > 1:
            scores[g] = _joint_scores(ens, Xw, cols, seed, n_repeats, score, baseline,
                                      n_jobs, index)
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
            rng.shuffle(idx)
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


def _bind(ens, scoring, y, w, margin, offset):
    """(score(trees' margin) -> float, score of ``margin``): with per-row offsets the
    trees' margins start at the offset instead of the base score."""
    if offset is None:
        return bind_scorer(ens, scoring, y, w, margin)
    shift = ens.start_margin(offset) - ens.base_score
    offset_score, baseline = bind_scorer(ens, scoring, y, w, margin + shift)
    return (lambda m: offset_score(m + shift)), baseline


def _joint_scores(ens, Xw, cols, seed, n_repeats, score, baseline, n_jobs, index):
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
        rng.shuffle(idx)
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

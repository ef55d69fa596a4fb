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
Scores: ``scoring.bind_scorer`` (scikit-learn's metrics, target-only work done once) for
treeimp's own scorings; any other scikit-learn scorer through a stand-in estimator or the
model itself (``scorers.py``). ``max_samples``: scikit-learn's rows, drawn per column
from the column's ``RandomState(seed)`` before its shuffles, which then move only those
rows; their permuted margins are scored in the order drawn. A model with linear leaf models
(LightGBM ``linear_tree=True``) is re-predicted in full for every repeat
(``routed.py``), linear terms included. A learning-to-rank model's
rows form queries (``qid`` / ``group``): scored with a ranking scorer
(``measures/ranking_scoring.py``), a column permuted among the rows of each query
(``within_queries``) or among all rows.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import Bunch, _safe_indexing, check_random_state
from sklearn.utils.random import sample_without_replacement

from ..inputs.groups import resolve_groups
from ..inputs.rows import RowSource, check_unique_columns, feature_names_of
from ..inputs.targets import as_target, check_sample_weight, n_target_columns
from ..inputs.threads import numba_threads
from ..measures.ranking_scoring import bind_ranking_scorer, check_ranking_scoring
from ..measures.scoring import SCORINGS, bind_scorer, make_scorer
from ..model.offsets import check_base_margin
from ..model.ranking import check_query_input, check_ranking_labels, query_sample_weight
from ..model.routing import _forest_scale, predict_ensemble, routing_flags
from ..stats.progress import progress_bar
from .leaf_index import LeafIndex
from .routed import permute_columns, rerouted_permutation_scores
from .scorers import (
    Responses,
    check_max_samples,
    is_margin_scoring,
    response_methods,
    scorer_object,
    scoring_names,
    stand_in,
    stand_in_matches,
    uses_responses_only,
)


def permutation_importance_parsed(ens, X, y, feature_names, input_groups, *, scoring=None,
                                  n_repeats=5, random_state=None, n_jobs=None,
                                  sample_weight=None, progress=None, groups=None,
                                  base_margin=None, max_samples=1.0, estimator=None,
                                  qid=None, group=None, within_queries=True):
    """:func:`permutation_importance` of a parsed ensemble on X as its last step sees it
    (``feature_names``, ``input_groups``: from a Pipeline's steps, or None).
    ``estimator``: the fitted scikit-learn estimator the ensemble was parsed from (a
    Pipeline's last step), which scorers that cannot be computed from margins are called
    on (``treeimp/permutation/scorers.py``); None for a TreeEnsemble, a file or a Booster.
    Returns a Bunch, or {scorer name: Bunch} for several scorers."""
    check_unique_columns(X)
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)) \
            or n_repeats < 1:
        raise ValueError(f"n_repeats must be a positive integer, got {n_repeats!r}")
    rows = RowSource(X, ens)
    n = rows.n_rows
    query = check_query_input(ens.objective, n, qid, group)
    if not isinstance(within_queries, (bool, np.bool_)):
        raise TypeError(f"within_queries must be True or False, got {within_queries!r}")
    n_scored = check_max_samples(max_samples, n)
    if query is not None and n_scored != n:
        raise ValueError(f"max_samples={max_samples!r} would split the queries of a "
                         "learning-to-rank model; leave it at 1.0")
    y_in = y
    y = as_target(y, n, n_target_columns(ens))
    # XGBoost rankers: one weight per query, repeated over its rows
    sample_weight = query_sample_weight(ens.objective, sample_weight, query)
    w = None if sample_weight is None else check_sample_weight(sample_weight, n)
    offset = check_base_margin(base_margin, n, ens)
    # a bad scoring (or bad labels) fails before any routing
    if query is not None:
        check_ranking_scoring(scoring)
        y = check_ranking_labels(ens.objective, y)
        keys, specs = None, {None: scoring}
    else:
        keys, specs = scoring_names(scoring)
        for spec in specs.values():
            if is_margin_scoring(spec, ens):
                make_scorer(ens, spec)
    shuffle = _query_shuffle(query) if query is not None and within_queries else _shuffle
    # linear leaf models: a permuted column changes the output of every leaf whose model
    # reads it, not only of the rows that change leaves, so every repeat re-predicts
    reroute = ens.leaf_router is not None or ens.linear_leaves is not None
    if ens.leaf_router is not None and shuffle is not _shuffle:
        raise ValueError("within_queries=True is not available for a model routed by its "
                         "library's leaf indices (CatBoost with target-statistic splits): "
                         "pass within_queries=False (columns permuted among all rows)")
    names = feature_names_of(feature_names, rows, ens)
    grp = resolve_groups(groups, names, input_groups)
    seed = check_random_state(random_state).randint(np.iinfo(np.int32).max + 1)
    columns = ([[j] for j in range(ens.n_features)] if grp is None
               else [list(m) for m in grp.members])
    plan = _Plan(ens, specs, y, y_in, w, sample_weight, offset, estimator, X, query)
    with numba_threads(n_jobs):
        if reroute:  # rows routed by the library, or linear leaves: full predictions
            margin = ens.predict_raw(rows)
            index = Xw = None
        else:
            Xw = _working_copy(rows)
            strict, round32 = routing_flags(ens, Xw)
            # rows routed once and sorted by leaf: at most 8 bytes per (row, tree) pair
            index = LeafIndex(ens, Xw, *_forest_scale(ens), strict, round32)
            margin = index.margin()  # bitwise predict_ensemble(ens, Xw)
    baseline = plan.baseline(margin)
    scores = {}
    bar = progress_bar(progress, total=len(columns),
                       work=n * ens.n_trees * n_repeats, desc="permutation_importance")
    for g, cols in enumerate(columns):
        bar.update(1)
        rng = check_random_state(seed)
        subset = (None if n_scored == n
                  else sample_without_replacement(n, n_scored, random_state=rng))
        if plan.on_margins:
            score = plan.margin_scores(subset, margin)
            with numba_threads(n_jobs):
                if index is None:
                    got = rerouted_permutation_scores(ens, X, cols, score, n_repeats, rng,
                                                      subset, shuffle)
                else:
                    got = _compiled_scores(ens, index, Xw, margin, cols, score, n_repeats,
                                           rng, subset, n_jobs, shuffle)
            for key, values in got.items():
                scores.setdefault(key, np.empty((len(columns), n_repeats)))[g] = values
        if plan.on_model:
            # the same permutations again, of the caller's X, for the model's methods
            rng = check_random_state(seed)
            if subset is not None:
                sample_without_replacement(n, n_scored, random_state=rng)
            got = plan.model_scores(cols, n_repeats, rng, subset)
            for key, values in got.items():
                scores.setdefault(key, np.empty((len(columns), n_repeats)))[g] = values
    bar.close()
    if keys is None and list(baseline) == [None]:
        return importance_bunch(baseline[None] - scores[None], grp, names)
    return {key: importance_bunch(baseline[key] - scores[key], grp, names)
            for key in baseline}


def _compiled_scores(ens, index, Xw, margin, cols, score, n_repeats, rng, subset, n_jobs,
                     shuffle):
    """{key: (n_repeats,) scores} with the columns ``cols`` of Xw permuted as
    scikit-learn permutes them (``rng``'s shuffles compounding over the repeats, of the
    rows ``subset`` only when given, scored on those rows in its order; ``shuffle``:
    :func:`_shuffle` or a ranker's :func:`_query_shuffle`)."""
    out = {}
    if all(index.n_tops(j) == 0 for j in cols):  # no row meets a split on any member
        same = score(margin if subset is None else margin[subset])
        return {key: np.full(n_repeats, value) for key, value in same.items()}
    at = np.arange(Xw.shape[0]) if subset is None else np.asarray(subset)
    idx = np.arange(at.size)
    original = Xw[:, cols].copy()
    joint = len(cols) > 1
    perm_margin = np.empty_like(margin)
    if not joint:
        index.begin(cols[0])
    for r in range(n_repeats):
        shuffle(rng, idx)
        if subset is None and not joint:
            Xw[:, cols[0]] = Xw[idx, cols[0]]
        else:
            Xw[np.ix_(at, cols)] = Xw[np.ix_(at[idx], cols)]
        if joint:
            # several columns move together: the permuted rows re-predicted in full
            # (bitwise ``index.margin()``'s sums)
            perm_margin = predict_ensemble(ens, Xw, n_jobs=n_jobs)
        else:
            index.permuted_margin(Xw, margin, perm_margin)
        for key, value in score(perm_margin if subset is None
                                else perm_margin[subset]).items():
            out.setdefault(key, np.empty(n_repeats))[r] = value
    if not joint:
        index.finish()
    Xw[:, cols] = original
    return out


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


class _Plan:
    """How each scorer of ``specs`` ({key: spec}) scores: from margins (treeimp's
    scorings; scikit-learn scorer objects through the stand-in estimator where it
    matches the model), or on the model with the permuted X (``scorers.py``)."""

    def __init__(self, ens, specs, y, y_in, w, w_in, offset, estimator, X, query=None):
        self.ens, self.specs, self.y, self.w, self.offset = ens, specs, y, w, offset
        self.query = query  # a ranker's query bounds: its one scorer, on margins
        self.y_in, self.w_in, self.estimator, self.X = y_in, w_in, estimator, X
        self.responses = Responses(ens, estimator)
        self.kinds = {}
        self._bound = {}  # the margin scorers of all rows, bound once

    def baseline(self, margin):
        """{key: score of the unpermuted rows}; decides each scorer's kind."""
        ens, out = self.ens, {}
        self.shift = (0.0 if self.offset is None
                      else ens.start_margin(self.offset) - ens.base_score)
        checked = {}  # response method -> whether the stand-in's equals the model's
        for key, spec in self.specs.items():
            if self.query is not None or is_margin_scoring(spec, ens):
                self.kinds[key] = "margin"
                self._bound[key], out[key] = _bind(ens, spec, self.y, self.w, margin,
                                                   self.offset, self.query)
                continue
            scorer = scorer_object(spec)
            if not self.responses.usable and self.estimator is None:
                raise ValueError(f"scoring {_name(key, spec)} is not computed from the "
                                 "margins of a classification forest with several targets; "
                                 "pass the fitted forest (not a TreeEnsemble) or use "
                                 "scoring=None or 'accuracy'")
            matches = False
            if self.responses.usable and self.estimator is not None \
                    and uses_responses_only(scorer):
                methods = response_methods(scorer, self.estimator, self.responses)
                matches = stand_in_matches(self.responses, self.estimator, self.X,
                                           margin + self.shift, methods, checked)
            self.kinds[key] = "stand_in" if self.estimator is None or matches else "model"
            if self.kinds[key] == "model" and self.offset is not None:
                raise ValueError(f"scoring {_name(key, spec)} is computed by the model's own "
                                 "methods, which take no base_margin; drop base_margin or "
                                 "use one of the scorings computed from margins "
                                 f"{list(SCORINGS)}")
            try:
                if self.kinds[key] == "stand_in":
                    value = self._stand_in_score(scorer, margin, None)
                else:
                    value = _weighted(scorer, self.estimator, self.X, self.y_in, self.w_in)
            except (AttributeError, ValueError) as exc:
                # scikit-learn's refusal (a regressor has no predict_proba, a classifier
                # metric given continuous predictions), named for the caller
                what = "classifier" if self.responses.classifier else "regressor"
                raise ValueError(f"scoring {_name(key, spec)} cannot score this {what}: "
                                 f"{_one_line(exc)}") from None
            self.specs[key] = scorer
            out.update(_as_scores(key, value))
        return out

    @property
    def on_margins(self):
        return any(kind != "model" for kind in self.kinds.values())

    @property
    def on_model(self):
        return any(kind == "model" for kind in self.kinds.values())

    def _stand_in_score(self, scorer, margin, subset):
        y = self.y_in if subset is None else _safe_indexing(self.y_in, subset)
        w = (self.w_in if subset is None or self.w_in is None
             else _safe_indexing(self.w_in, subset))
        shift = self.shift if subset is None or np.ndim(self.shift) == 0 \
            else self.shift[subset]
        m = margin + shift
        return _weighted(scorer, stand_in(self.responses, m), m, y, w)

    def margin_scores(self, subset, margin):
        """score(margin of the rows ``subset``, or of all) -> {key: score} of every
        scorer computed from margins (``margin``: the unpermuted rows', on which
        ``bind_scorer`` checks its prepared form)."""
        bound = self._bound if subset is None else {}
        for key, spec in self.specs.items():
            if self.kinds[key] == "margin" and key not in bound:
                if subset is None:
                    y, w, off, m = self.y, self.w, self.offset, margin
                else:
                    y, m = self.y[subset], margin[subset]
                    w = None if self.w is None else self.w[subset]
                    off = None if self.offset is None else self.offset[subset]
                bound[key] = _bind(self.ens, spec, y, w, m, off)[0]

        def score(margin):
            out = {}
            for key, spec in self.specs.items():
                if self.kinds[key] == "margin":
                    out[key] = bound[key](margin)
                elif self.kinds[key] == "stand_in":
                    out.update(_as_scores(key, self._stand_in_score(spec, margin, subset)))
            return out
        return score

    def model_scores(self, cols, n_repeats, rng, subset):
        """{key: (n_repeats,) scores} of the scorers called on the model: scikit-learn's
        loop over a copy of X (the rows ``subset`` when given)."""
        X = self.X if subset is None else _safe_indexing(self.X, subset)
        y = self.y_in if subset is None else _safe_indexing(self.y_in, subset)
        w = (self.w_in if subset is None or self.w_in is None
             else _safe_indexing(self.w_in, subset))
        frame = hasattr(X, "iloc")
        Xp = X.copy() if frame or subset is None else X
        Xp = Xp if frame else np.array(Xp, copy=True)
        idx = np.arange(Xp.shape[0])
        out = {}
        for r in range(n_repeats):
            rng.shuffle(idx)
            permute_columns(Xp, cols, idx, frame)
            for key, scorer in self.specs.items():
                if self.kinds[key] == "model":
                    value = _weighted(scorer, self.estimator, Xp, y, w)
                    for k, v in _as_scores(key, value).items():
                        out.setdefault(k, np.empty(n_repeats))[r] = v
        return out


def _weighted(scorer, estimator, X, y, w):
    """scikit-learn's call of a scorer: sample_weight passed only when given."""
    return scorer(estimator, X, y) if w is None else scorer(estimator, X, y, sample_weight=w)


def _as_scores(key, value):
    """{key: float} of one scorer's value; a scorer returning a dict (a multi-metric
    callable) gives its own keys."""
    if isinstance(value, dict):
        return {k: float(v) for k, v in value.items()}
    return {key: float(value)}


def _one_line(exc):
    return " ".join(str(exc).split()) or type(exc).__name__


def _name(key, spec):
    return repr(key) if key is not None else repr(spec)


def _working_copy(rows):
    """One writable float copy of X (as scikit-learn's X.copy())."""
    chunks = [chunk for _, chunk in rows.chunks()]
    if len(chunks) == 1:
        return np.array(chunks[0], order="C", copy=True)
    return np.ascontiguousarray(np.concatenate(chunks))

"""Permutation importance of held-out rows in a dask array or dask DataFrame.

In memory, ``permutation_importance`` shuffles each column over all rows, exactly as
scikit-learn does. A global shuffle of a column held in many partitions on many
machines is itself a shuffle job (every partition sends rows to every other), repeated
for every column and repeat: that data movement, not the re-prediction, would dominate.
Here each partition permutes its own rows instead, and sends back only sums:

* the permutation of partition p for repeat r and column list g (a feature, or a group
  of features permuted jointly) is
  ``np.random.default_rng([seed, r, g, start_p]).permutation(n_p)``, with ``start_p``
  the global position of the partition's first row, ``n_p`` its row count and
  ``seed = check_random_state(random_state).randint(2**31)`` (one draw on the client,
  as scikit-learn's): no state passes between tasks, so the result does not depend on
  which worker runs a partition, in which order partitions finish, or on retries.
  Repeats are independent draws (scikit-learn's shuffles compound over repeats; either
  way each repeat is a uniformly random permutation);
* every partition returns additive statistics of its rows for the baseline and every
  permuted (column list, repeat): for accuracy the weight of correct rows, for
  neg_log_loss and "objective" the weighted loss sums, for neg_mean_squared_error and r2
  the weighted squared-error sums, and for r2 the targets' weight, weighted mean and sum
  of squared deviations (merged with Chan's pairwise formula, so the total sum of
  squares is that of the global mean without cancellation). Sums are combined in a tree
  reduction (``split_every`` from dask's config, default 8) and turned into scores on
  the client: the scores of the permuted sets, over all rows, with the same formulas as
  scikit-learn's metrics;
* roc_auc is not a sum over rows (it ranks every row against every other) and is
  refused on dask.

A within-partition permutation breaks the link between a feature and the target as a
global one does, but keeps each partition's own distribution of the feature. Measured
on data that fits (``benchmarks/permutation_partitions.py``: 20,000 held-out rows, 8
features, 8 equal partitions, 30 repeats; XGBoost binary with neg_log_loss and a random
forest regressor with r2): with the rows in random order, the two schemes' mean
importances differ by 0.08 and 0.18 of the importances' standard deviation over repeats
(median over features; at most 0.38), by 0.29 and 0.72 standard errors of the
difference (at most 1.5: what two independent estimates of the same value give), and
their totals by 0.2 % and 0.0 %. With the rows sorted by the most important feature,
each partition holds one stratum of it and its importance nearly vanishes (0.275 to
0.009, 0.80 to 0.04) while the other features' do not move: when partitions differ
systematically (sorted by time, by region, by the target), shuffle the rows across
partitions first (e.g. ``X.shuffle(on=...)`` for a DataFrame) or the importance of
whatever the partitions are sorted by is lost.
"""

from __future__ import annotations

import uuid

import numpy as np
from sklearn.utils import Bunch, check_random_state

from ..inputs.groups import resolve_groups
from ..inputs.pipeline import is_pipeline
from ..inputs.rows import (
    RowSource,
    _check_names,
    _check_width,
    check_unique_columns,
    feature_names_of,
)
from ..inputs.targets import as_target, class_indices, n_target_columns
from ..inputs.threads import numba_threads, resolve_n_jobs
from ..measures.registry import check_explainable
from ..measures.scoring import (
    class_probabilities,
    default_scoring,
    is_classifier,
    make_scorer,
    model_classes,
    regression_prediction,
)
from ..model.losses import check_target, loss
from ..model.offsets import check_base_margin
from ..model.routing import _forest_scale, predict_ensemble, routing_flags
from ..parsers import parse
from ..permutation.importance import importance_bunch
from ..permutation.leaf_index import LeafIndex
from .collections import is_dask_collection, require_dask
from .explain import tree_sum

# scorings that are sums over rows, computable from partition statistics
ADDITIVE_SCORINGS = ("accuracy", "neg_log_loss", "r2", "neg_mean_squared_error",
                     "objective")
DEFAULT_SPLIT_EVERY = 8
# memory of one leaf index (rows x trees, up to 8 bytes each) within a partition task:
# larger partitions are re-predicted in blocks of rows, each block drawing its slice of
# every permutation anew (a permutation of the whole partition per block and permuted set)
LEAF_INDEX_BYTES = 512 * 2**20
BATCH_ROWS = 1024  # fewest rows per leaf index


def partition_permutation(seed, repeat, column, start, n_rows):
    """The permutation of a partition's rows: ``seed`` the client's draw from
    ``random_state``, ``repeat`` and ``column`` (the column list's position) the
    permuted set, ``start`` the global position of the partition's first row."""
    return np.random.default_rng([seed, repeat, column, start]).permutation(n_rows)


def _import_dask():
    return require_dask("permutation importance of dask collections needs dask",
                        modules=("dask", "dask.array"))


def dask_permutation_importance(model, X, y, *, scoring=None, n_repeats=5,
                                random_state=None, n_jobs=None, sample_weight=None,
                                groups=None, iteration_range=None, missing=None,
                                base_margin=None):
    """``permutation_importance`` of a dask array or DataFrame (see the module docstring
    for the scheme). ``n_jobs``: numba threads per partition task (None: 1, dask runs
    one task per worker thread). Returns the same Bunch as the in-memory function."""
    dask = _import_dask()
    if not is_dask_collection(X):
        given = [name for name, v in (("y", y), ("sample_weight", sample_weight),
                                      ("base_margin", base_margin)) if is_dask_collection(v)]
        verb = "is a dask collection" if len(given) == 1 else "are dask collections"
        raise TypeError(f"{', '.join(given)} {verb} but X is a {type(X).__name__}: pass X "
                        "as a dask array or DataFrame partitioned like them, or compute "
                        "them")
    if is_pipeline(model):
        raise TypeError("a Pipeline on dask input: its earlier steps would have to "
                        "transform every partition. Pass its last step and X transformed "
                        "by the others, e.g. X.map_partitions(pipe[:-1].transform)")
    ens = parse(model, iteration_range=iteration_range, missing=missing)
    check_explainable(ens)
    ens.refuse_linear_leaves("permutation_importance on dask collections (in memory: "
                             "treeimp.permutation_importance)")
    scoring = partition_scoring(ens, scoring, n_repeats, n_jobs, "dask collections",
                                "compute X to memory")
    names = _check_columns(X, ens, ens.leaf_router is None)
    grp = resolve_groups(groups, names)
    columns = ([[j] for j in range(ens.n_features)] if grp is None
               else [list(m) for m in grp.members])
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max + 1))
    parts, lengths = _x_partitions(dask, X)
    n = int(sum(lengths))
    if n == 0:
        raise ValueError(f"X has 0 rows (in {len(lengths)} partitions); at least one row is "
                         "needed")
    ys = _aligned(y, "y", lengths)
    ws = _aligned(sample_weight, "sample_weight", lengths)
    bs = _aligned(base_margin, "base_margin", lengths)
    plan = _Plan(scoring=scoring, seed=seed, n_repeats=int(n_repeats), columns=columns,
                 n_jobs=1 if n_jobs is None else n_jobs,
                 n_targets=n_target_columns(ens), n_outputs=_n_scored_outputs(ens))
    model_ref = _send_model(dask, ens)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    task = dask.delayed(_partition_sums, pure=False)
    sums = [task(model_ref, plan, p, int(starts[p]), int(lengths[p]), parts[p], ys[p], ws[p],
                 bs[p]) for p in range(len(lengths))]
    total, = dask.compute(_tree_sum(dask, sums))
    if total.n_rows != n:  # every row exactly once, whatever retries happened
        raise RuntimeError(f"partition statistics cover {total.n_rows} rows, X has {n}")
    scores = total.scores(plan)
    baseline = scores[0]

    return importance_bunch(baseline - scores[1:].reshape(len(columns), plan.n_repeats),
                            grp, names)


class _Plan:
    """What every partition task needs besides the model and its rows (small)."""

    def __init__(self, *, scoring, seed, n_repeats, columns, n_jobs, n_targets, n_outputs):
        self.scoring = scoring
        self.seed = seed
        self.n_repeats = n_repeats
        self.columns = columns
        self.n_jobs = n_jobs
        self.n_targets = n_targets
        self.n_outputs = n_outputs  # columns of the squared-error sums (1 unless r2/mse
        # of a multi-output regression forest)

    @property
    def n_slots(self):
        return 1 + len(self.columns) * self.n_repeats


def _n_scored_outputs(ens):
    return n_target_columns(ens) if not is_classifier(ens) else 1


# ------------------------------------------------------------------ client-side input
def partition_scoring(ens, scoring, n_repeats, n_jobs, where, hint=""):
    """The scoring of a partition-local permutation importance on ``where`` ("dask
    collections", "Spark DataFrames"), checked before any partition runs: n_repeats and
    n_jobs valid, the scoring (None: the model's default) a sum over rows, and not a
    classification forest on several targets. ``hint``: what the caller can do instead."""
    if isinstance(n_repeats, bool) or not isinstance(n_repeats, (int, np.integer)) \
            or n_repeats < 1:
        raise ValueError(f"n_repeats must be a positive integer, got {n_repeats!r}")
    resolve_n_jobs(n_jobs)  # a bad n_jobs fails here, not on every worker
    make_scorer(ens, scoring)  # a bad scoring fails with the in-memory message
    scoring = scoring or default_scoring(ens)
    if scoring not in ADDITIVE_SCORINGS:
        raise ValueError(f"scoring={scoring!r} is not a sum over rows and cannot be "
                         f"combined from partitions; on {where} use one of "
                         f"{list(ADDITIVE_SCORINGS)}" + (f" (or {hint})" if hint else ""))
    if ens.target_classes is not None:
        raise ValueError(f"a classification forest with {len(ens.target_classes)} targets "
                         f"is not supported on {where}" + (f"; {hint}" if hint else ""))
    return scoring


def _check_columns(X, ens, coded):
    """Feature names of X, after the checks RowSource makes on a table (width, names,
    duplicates) that can be made without reading rows. ``coded``: treeimp numbers the
    categories (every model but those routed by their library, which read the labels):
    categorical columns must then have known categories, or each partition would
    number its own."""
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D (rows x features), got {X.ndim} dimensions")
    columns = getattr(X, "columns", None)
    if columns is None:  # a dask array
        _check_width(X.shape[1], ens.n_features, "X")
        return feature_names_of(None, Bunch(feature_names=None), ens)
    check_unique_columns(X)
    raw = list(columns)
    _check_width(len(raw), ens.n_features, "X")
    _check_names(raw, ens, "X")
    unknown = [str(c) for c, dtype in X.dtypes.items()
               if coded and str(dtype) == "category" and not X[c].cat.known]
    if unknown:
        raise ValueError(f"X's categorical columns {unknown[:10]} have unknown categories, "
                         "so each partition would number its own; call X.categorize() "
                         "(or X.astype with a CategoricalDtype) first")
    return [str(c) for c in raw]


def _x_partitions(dask, X):
    """(one delayed block of rows per partition, row counts). A dask array with unknown
    chunk sizes, and a DataFrame (whose divisions never give row counts), are counted
    first: one pass over X that computes only lengths."""
    if hasattr(X, "columns"):
        lengths = [int(v) for v in X.map_partitions(len).compute()]
        return list(X.to_delayed()), lengths
    if any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    X = X.rechunk({1: -1})
    return list(X.to_delayed()[:, 0]), [int(c) for c in X.chunks[0]]


def _aligned(v, what, lengths):
    """One piece of ``v`` per partition of X (None when ``v`` is None): dask collections
    must have X's partitions (their row counts are compared here when known, else in
    the partition's task); an in-memory array is cut at X's partition boundaries."""
    P = len(lengths)
    if v is None:
        return [None] * P
    if not is_dask_collection(v):
        arr = np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v)
        if arr.ndim == 0 or arr.shape[0] != sum(lengths):
            raise ValueError(f"X has {sum(lengths)} rows but {what} has "
                             f"{0 if arr.ndim == 0 else arr.shape[0]}")
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        return [arr[bounds[p]:bounds[p + 1]] for p in range(P)]
    if hasattr(v, "divisions"):  # dask Series or DataFrame
        if v.npartitions != P:
            raise ValueError(f"{what} has {v.npartitions} partitions but X has {P}: "
                             f"{what} must be partitioned as X (e.g. columns of the same "
                             "dask DataFrame)")
        return list(v.to_delayed())
    if v.ndim not in (1, 2):
        raise ValueError(f"{what} must be 1-D or 2-D, got {v.ndim} dimensions")
    if len(v.chunks[0]) != P:
        raise ValueError(f"{what} has {len(v.chunks[0])} row chunks but X has {P} "
                         f"partitions: {what} must be chunked as X's rows {tuple(lengths)}")
    if not any(np.isnan(c) for c in v.chunks[0]):
        for p, (a, b) in enumerate(zip(v.chunks[0], lengths)):
            if a != b:
                raise ValueError(f"{what}'s partition {p} has {a} rows but X's has {b}: "
                                 f"{what} must be chunked as X's rows {tuple(lengths)}, "
                                 f"got {tuple(int(c) for c in v.chunks[0])}")
    if v.ndim == 2:
        return list(v.rechunk({1: -1}).to_delayed()[:, 0])
    return list(v.to_delayed())


def _send_model(dask, ens):
    """The parsed model as one graph input: scattered to every worker once when a
    distributed Client is the active scheduler, else one key of the graph."""
    client = _active_client(dask)
    if client is not None:
        return client.scatter(ens, broadcast=True, hash=False)
    return dask.delayed(ens, name=f"treeimp-ensemble-{uuid.uuid4().hex}")


def _active_client(dask):
    """The distributed Client ``dask.compute`` will use, or None."""
    try:
        from distributed import Client
    except ImportError:
        return None
    scheduler = dask.base.get_scheduler()
    client = getattr(scheduler, "__self__", scheduler)
    return client if isinstance(client, Client) else None


def _tree_sum(dask, parts):
    """Sum of delayed partition statistics in a tree of fan-in ``split_every``."""
    split_every = dask.config.get("split_every", None) or DEFAULT_SPLIT_EVERY
    if isinstance(split_every, dict) or int(split_every) < 2:
        raise ValueError(f"dask's split_every must be an integer >= 2 for "
                         f"permutation_importance, got {split_every!r}")

    return tree_sum(parts, int(split_every))


# ------------------------------------------------------------------ on the workers
def _partition_sums(ens, plan, p, start, n_rows, X, y, w, offset):
    """Score statistics of partition ``p`` (rows start .. start + n_rows - 1 of X)."""
    n = int(X.shape[0])
    where = f"partition {p} (rows {start} to {start + n_rows - 1})"
    if n != n_rows:
        raise ValueError(f"X's {where} has {n} rows, but {n_rows} were counted")
    for what, v in (("y", y), ("sample_weight", w), ("base_margin", offset)):
        if v is not None and np.shape(v)[0] != n:
            raise ValueError(f"{what} has {np.shape(v)[0]} rows in X's {where} of {n} "
                             f"rows: {what} must be partitioned as X")
    if n == 0:
        return ScoreSums.zeros(plan)
    rows = RowSource(X, ens)
    y = as_target(y, n, plan.n_targets)
    w = _partition_weights(w, n, where)
    offset = check_base_margin(offset, n, ens)
    shift = np.zeros((n, 1)) if offset is None else ens.start_margin(offset) - ens.base_score
    sums = np.zeros((plan.n_slots, plan.n_outputs))
    with numba_threads(plan.n_jobs):
        if ens.leaf_router is not None:
            statistic = _statistic(ens, plan, y, w)
            _rerouted_sums(ens, plan, start, X, lambda m: statistic(m + shift), sums)
        else:
            Xp = _working_copy(rows)
            step = _block_rows(ens)
            for a in range(0, n, step):  # the leaf index of at most `step` rows at a time
                b = min(n, a + step)
                _block_sums(ens, plan, start, Xp, a, b, _statistic(ens, plan, y[a:b], w[a:b]),
                            shift[a:b], sums)
    return ScoreSums(n, float(w.sum()), _target_moments(plan, y, w), sums)


def _block_rows(ens):
    """Rows per leaf index (``LeafIndex`` keeps up to 8 bytes per row and tree): a
    partition of any size is re-predicted in blocks of rows within LEAF_INDEX_BYTES."""
    return max(BATCH_ROWS, LEAF_INDEX_BYTES // (8 * max(1, ens.n_trees)))


def _block_sums(ens, plan, start, Xp, a, b, statistic, shift, sums):
    """Add to ``sums`` the statistics of rows a .. b - 1 of the partition ``Xp`` (its
    float rows), for the baseline and every permuted set: a permuted row takes the
    value of the row the partition's permutation maps it to, wherever that row lies."""
    Xw = np.array(Xp[a:b], order="C", copy=True)
    strict, round32 = routing_flags(ens, Xw)
    R, n = plan.n_repeats, Xp.shape[0]
    index = LeafIndex(ens, Xw, *_forest_scale(ens), strict, round32)
    margin = index.margin()  # bitwise predict_ensemble(ens, Xw)
    base = statistic(margin + shift)
    sums[0] += base
    perm_margin = np.empty_like(margin)
    for g, cols in enumerate(plan.columns):
        slots = slice(1 + g * R, 1 + (g + 1) * R)
        if all(index.n_tops(j) == 0 for j in cols):  # no split moves a row
            sums[slots] += base
            continue
        original = Xw[:, cols].copy()
        if len(cols) == 1:
            index.begin(cols[0])
        for r in range(R):
            source = partition_permutation(plan.seed, r, g, start, n)[a:b]
            Xw[:, cols] = Xp[np.ix_(source, cols)]
            if len(cols) == 1:
                index.permuted_margin(Xw, margin, perm_margin)
            else:
                perm_margin = predict_ensemble(ens, Xw, n_jobs=plan.n_jobs)
            sums[1 + g * R + r] += statistic(perm_margin + shift)
        index.finish()
        Xw[:, cols] = original


def _rerouted_sums(ens, plan, start, X, statistic, sums):
    """Fill ``sums`` for a model routed by its library's leaf indices: every permuted
    copy of the partition's rows goes through the library again, as in memory
    (``permutation/routed.py``), the columns of a DataFrame keeping their dtypes."""
    frame = hasattr(X, "iloc")
    X = X if frame else np.asarray(X)
    n, R = X.shape[0], plan.n_repeats
    sums[0] = statistic(ens.predict_raw(RowSource(X, ens)))
    for g, cols in enumerate(plan.columns):
        for r in range(R):
            perm = partition_permutation(plan.seed, r, g, start, n)
            Xp = X.copy()
            for j in cols:
                if frame:
                    col = X.iloc[perm, j]
                    col.index = Xp.index
                    Xp[Xp.columns[j]] = col
                else:
                    Xp[:, j] = X[perm, j]
            sums[1 + g * R + r] = statistic(ens.predict_raw(RowSource(Xp, ens)))


def _working_copy(rows):
    chunks = [chunk for _, chunk in rows.chunks()]
    return np.ascontiguousarray(np.concatenate(chunks) if len(chunks) > 1 else
                                np.array(chunks[0], copy=True))


def _partition_weights(w, n, where):
    if w is None:
        return np.ones(n)
    w = np.asarray(w.to_numpy() if hasattr(w, "to_numpy") else w, dtype=np.float64)
    if w.ndim != 1:
        raise ValueError(f"sample_weight must be 1-D, got shape {w.shape} in {where}")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"sample_weight contains NaN or inf in {where}")
    if np.any(w < 0):
        raise ValueError(f"sample_weight has {int((w < 0).sum())} negative values in {where}")
    return w


def _statistic(ens, plan, y, w):
    """margin -> sums (n_outputs,) over the rows of ``y`` of their score terms, whose
    totals give the score (see ``ScoreSums``)."""
    scoring = plan.scoring
    if scoring == "accuracy":
        classes = model_classes(ens)
        y = np.asarray(y)

        def statistic(m):
            labels = classes[np.argmax(class_probabilities(ens, m), axis=1)]
            return [np.sum(w * (labels == y))]
    elif scoring == "neg_log_loss":
        true = class_indices(y, model_classes(ens))
        rows = np.arange(len(true))
        eps = np.finfo(np.float64).eps

        def statistic(m):
            p = np.clip(class_probabilities(ens, m)[rows, true], eps, 1 - eps)
            return [np.sum(w * -np.log(p))]
    elif scoring == "objective":
        y_t = check_target(ens.objective, y, ens.classes, n_target_columns(ens))

        def statistic(m):
            return [np.sum(w * loss(ens.objective, m, y_t))]
    else:  # squared errors per output (r2, neg_mean_squared_error)
        y_true = np.asarray(y, dtype=np.float64).reshape(len(y), -1)

        def statistic(m):
            pred = regression_prediction(ens, m).reshape(len(y_true), -1)
            return np.sum(w[:, None] * (y_true - pred) ** 2, axis=0)
    return statistic


def _target_moments(plan, y, w):
    """Per output the targets' weight, weighted mean and weighted sum of squared
    deviations (r2 and mean squared error), else None."""
    if plan.scoring not in ("r2", "neg_mean_squared_error"):
        return None
    y_true = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    W = w.sum()
    mean = (np.sum(w[:, None] * y_true, axis=0) / W if W > 0
            else np.zeros(y_true.shape[1]))
    m2 = np.sum(w[:, None] * (y_true - mean) ** 2, axis=0)
    return np.stack([np.full(y_true.shape[1], W), mean, m2])


class ScoreSums:
    """Additive statistics of a set of rows for the baseline and every permuted set.

    ``n_rows``, ``weight`` (sum of weights), ``sums`` (n_slots, n_outputs): per slot
    (0 baseline, 1 + g * n_repeats + r) the sum over rows of weight x (1 if correct) for
    accuracy, weight x log loss (neg_log_loss), weight x the model's loss (objective),
    weight x squared error per output (neg_mean_squared_error, r2); ``target`` (r2 and
    mean squared error, else None): per output the targets' weight, weighted mean and
    weighted sum of squared deviations from it, merged with Chan et al.'s formula.
    """

    def __init__(self, n_rows, weight, target, sums):
        self.n_rows = n_rows
        self.weight = weight
        self.target = target
        self.sums = sums

    @classmethod
    def zeros(cls, plan):
        target = (np.zeros((3, plan.n_outputs))
                  if plan.scoring in ("r2", "neg_mean_squared_error") else None)
        return cls(0, 0.0, target, np.zeros((plan.n_slots, plan.n_outputs)))

    def __add__(self, other):
        if self.sums.shape != other.sums.shape:
            raise ValueError(f"statistics of {self.sums.shape} and {other.sums.shape} "
                             "score slots cannot be added")
        return ScoreSums(self.n_rows + other.n_rows, self.weight + other.weight,
                         _merge_moments(self.target, other.target), self.sums + other.sums)

    def scores(self, plan):
        """Score of every slot over all rows (greater is better), as scikit-learn's
        metric of the concatenated predictions gives it."""
        W = self.weight
        if not W > 0:
            raise ValueError(f"sample_weight sums to {W} over all {self.n_rows} rows of X; "
                             "at least one row needs a positive weight")
        s = self.sums
        if plan.scoring == "accuracy":
            return s[:, 0] / W
        if plan.scoring in ("neg_log_loss", "objective"):
            return -s[:, 0] / W
        if plan.scoring == "neg_mean_squared_error":
            return -np.mean(s / W, axis=1)
        # r2 per output as scikit-learn's r2_score, then the uniform average
        denominator = self.target[2]
        out = np.ones_like(s)
        valid = (denominator != 0) & (s != 0)
        out[valid] = 1 - (s / denominator)[valid]
        out[(s != 0) & (denominator == 0)] = 0.0
        return np.mean(out, axis=1)


def _merge_moments(a, b):
    """(weight, mean, squared deviations) of two row sets, per output (Chan et al.)."""
    if a is None or b is None:
        return None
    wa, wb = a[0], b[0]
    w = wa + wb
    safe = np.where(w > 0, w, 1.0)
    delta = b[1] - a[1]
    mean = np.where(w > 0, a[1] + delta * wb / safe, 0.0)
    m2 = a[2] + b[2] + np.where(w > 0, delta ** 2 * wa * wb / safe, 0.0)
    return np.stack([w, mean, m2])

"""Importances of held-out rows in a Spark DataFrame, computed where they lie.

The Explainer (the parsed model) is broadcast once; ``DataFrame.mapInArrow`` runs
``Explainer.accumulate`` on each partition's Arrow batches (a few batches at a time)
and yields the partition's statistics as one binary row; ``RDD.treeReduce`` adds them
on the executors and the driver finalises the sum. A row's jackknife block is a hash of
its identity (the ``id_col`` value, or the id Spark assigns), never of where it lies,
so with an identity column the result is that of the in-memory call whose rows are at
those positions, whatever the partitioning and the order in which partitions run.
"""

from __future__ import annotations

import copy
import functools
import numbers

import numpy as np

from ..inputs.pipeline import is_pipeline
from ..inputs.threads import resolve_n_jobs
from ..measures import registry
from ..measures.defaults import DEFAULT_N_BLOCKS
from ..measures.registry import check_targets
from ..measures.screening import resolve_methods
from ..stats.blocks import BlockKey, block_key, check_n_blocks
from .frames import (
    batch_arrays,
    check_identities,
    classic_session,
    evaluation_columns,
    require_spark,
)
from .reduce import STATS_SCHEMA, guarded, pack, tree_reduce

# feature values (8 bytes each) gathered from a partition's Arrow batches before one
# accumulate: few calls per partition, each with a bounded copy of the rows
CHUNK_BYTES = 64 * 2**20


def explain_spark(explainer, sdf, *, label_col=None, features_col=None, feature_cols=None,
                  id_col=None, weight_col=None, base_margin_col=None, oob=False,
                  methods=None, groups=None, n_blocks=DEFAULT_N_BLOCKS, random_state=None,
                  alpha=None, lam=None, depth=2):
    """:meth:`treeimp.Explainer.explain` of rows held in a Spark DataFrame.

    ``treeimp.explain`` and ``Explainer.explain`` call this when X is a
    ``pyspark.sql.DataFrame``; ``oob``, ``methods``, ``groups``, ``n_blocks``,
    ``random_state``, ``alpha`` and ``lam`` mean what they mean there.

    Parameters
    ----------
    explainer : treeimp.Explainer
    sdf : pyspark.sql.DataFrame
        A DataFrame of a classic Spark session (not Spark Connect). Its executors need
        treeimp, numpy, numba and pyarrow installed, as the driver has them.
    label_col : str, optional
        The targets (y). Default: a Spark ML model's ``labelCol`` when ``sdf`` has it.
    features_col : str, optional
        One column holding every row's features: a ``pyspark.ml.linalg`` vector (dense
        or sparse: a sparse vector's absent entries are 0.0, as ``vector_to_array`` and
        xgboost.spark's default read them) or an array of numbers, in the model's
        feature order.
    feature_cols : list of str, optional
        Plain numeric columns, matched to the model's feature names as a table's
        columns are. Neither given: a Spark ML model's ``features_cols`` /
        ``featuresCol`` parameter (xgboost.spark), else the model's feature names.
    id_col : str, optional
        A column of non-negative integer row identities, unique over the DataFrame: a
        row's jackknife block (and, with ``oob=True``, its position in the training
        set) is that identity, so the result does not depend on the partitioning and
        equals the in-memory result of the same rows at positions ``id``. None: an
        identity is added with ``monotonically_increasing_id()``, which encodes the
        partition number and the row's place within it. The importances are then still
        the same, but their standard errors and p-values (through the row blocks)
        depend on how the DataFrame is partitioned at this call: repartitioning, a
        different number of input files or a changed upstream plan gives other blocks.
        Name an identity column for results reproducible across partitionings.
    weight_col : str, optional
        Sample weights of the rows.
    base_margin_col : str, optional
        Per-row offsets of a boosting model (a number, or an array of numbers per
        output; see ``base_margin`` of :func:`treeimp.explain`).
    oob : bool
        Out-of-bag rows of a bagged forest: ``id_col`` (required then) gives each
        row's position in the training set.
    depth : int, default 2
        Levels of ``RDD.treeReduce`` adding the partitions' statistics on the executors
        (each statistics array is ``explainer.accumulate``'s size, independent of the
        partition's rows).

    Returns
    -------
    Importances

    Notes
    -----
    The kernels of each Spark task run on ``spark.task.cpus`` threads (at most the
    Explainer's own ``n_jobs`` when set): Spark runs one task per core. One Spark job
    computes the statistics; a call with only "mdi" reads one row and counts the rows
    instead. No progress bar is shown (Spark's own UI follows the tasks).
    """
    require_spark("X is a Spark DataFrame")
    session = classic_session(sdf, "treeimp.explain")
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
        raise ValueError(f"depth must be an int >= 1, got {depth!r}")
    if not isinstance(oob, (bool, np.bool_)):
        raise TypeError(f"oob must be True or False, got {oob!r}")
    if oob and id_col is None:
        raise ValueError("oob=True on a Spark DataFrame needs id_col: the column holding "
                         "each row's position in the forest's training set")
    if is_pipeline(explainer.model):
        raise TypeError("a Pipeline on a Spark DataFrame: its earlier steps would have to "
                        "transform every partition. Explain its last step on the DataFrame "
                        "transformed by the others")
    methods = resolve_methods(methods, explainer.ensemble, alpha, lam)
    check_targets(methods, explainer.ensemble)
    cols = evaluation_columns(sdf, explainer.ensemble, explainer.model, label_col=label_col,
                              features_col=features_col, feature_cols=feature_cols,
                              id_col=id_col, weight_col=weight_col,
                              base_margin_col=base_margin_col)
    frame = cols.project(sdf)
    if not any(registry.needs_rows(m) for m in methods):
        return _mdi_only(explainer, frame, cols, methods, groups, n_blocks)
    if cols.label is None:
        raise ValueError("label_col is required: importances are measured against the "
                         "evaluation rows' targets (only methods=('mdi',) reads no rows)")
    check_n_blocks(n_blocks, None)
    key = BlockKey(block_key(random_state))
    # per-row measures (contributions) are accumulated only when named
    extra = tuple(registry.row_sum_methods(methods))
    worker = _for_executors(explainer, _task_threads(session, explainer.n_jobs), oob)
    shared = session.sparkContext.broadcast(worker)
    try:
        partition = functools.partial(_partition_stats, shared, cols, bool(oob), n_blocks,
                                      key, extra)
        stats = frame.mapInArrow(guarded(partition), STATS_SCHEMA)
        total = tree_reduce(stats, depth, "treeimp.explain")
    finally:
        shared.unpersist(blocking=False)
    check_n_blocks(n_blocks, total.n_rows)
    return explainer.finalize(total, methods, alpha=alpha, lam=lam, groups=groups)


def _partition_stats(shared, cols, oob, n_blocks, key, extra, batches):
    """The statistics of one partition's batches, as one binary row (on an executor)."""
    ex = shared.value
    total, pending, size = None, [], 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        size += batch.num_rows * batch.num_columns * 8
        if size >= CHUNK_BYTES:
            total = _add(total, _accumulate(ex, pending, cols, oob, n_blocks, key, extra))
            pending, size = [], 0
    if pending:
        total = _add(total, _accumulate(ex, pending, cols, oob, n_blocks, key, extra))
    if total is not None:
        yield pack(total)


def _accumulate(ex, batches, cols, oob, n_blocks, key, extra):
    import pyarrow as pa

    batch = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    X, y, w, b, ids = batch_arrays(batch, cols)
    check_identities(ids)
    return ex.accumulate(X, y, rows=ids, oob=oob, sample_weight=w, base_margin=b,
                         n_blocks=n_blocks, random_state=key, methods=extra or None,
                         progress=False)


def _add(total, stats):
    return stats if total is None else total + stats


def _mdi_only(explainer, frame, cols, methods, groups, n_blocks):
    """Measures of the model alone (in-sample MDI): one row is read, to check the
    columns and name the features as in memory, and the rows are counted."""
    head = frame.limit(1).toArrow()
    if head.num_rows == 0:
        raise ValueError("treeimp.explain: the Spark DataFrame has 0 rows; at least one row "
                         "is needed")
    X, y, w, b, _ = batch_arrays(head.combine_chunks().to_batches()[0], cols)
    res = explainer.explain(X, y, methods=methods, groups=groups, n_blocks=n_blocks,
                            sample_weight=w, base_margin=b)
    res.n_rows = frame.count()  # the rows given, as in memory (none were routed)
    return res


def _task_threads(session, n_jobs):
    """Kernel threads per Spark task: its ``spark.task.cpus``, at most ``n_jobs``."""
    conf = session.sparkContext.getConf()
    cpus = max(1, int(conf.get("spark.task.cpus", "1")))
    if n_jobs is None:
        return cpus
    return min(cpus, resolve_n_jobs(n_jobs))


def _for_executors(explainer, n_jobs, oob):
    """The Explainer as the executors use it: a copy running its kernels on ``n_jobs``
    threads, holding the parsed model in place of the model object (a Spark ML model
    does not pickle; a forest read out of bag, whose in-bag rows it holds, is kept).
    The caller's Explainer is not changed."""
    clone = copy.copy(explainer)
    clone.n_jobs = n_jobs
    if not oob:
        clone.model = clone._final = explainer._parsed
    return clone

"""Permutation importance of held-out rows in a Spark DataFrame.

The scheme is Dask's (``treeimp/dask/permutation.py`` explains and measures it): each
partition permutes its own rows and sends back additive score statistics, added on the
executors (``RDD.treeReduce``) and turned into scores on the driver. A partition's rows
are first put in the order of their identities (``id_col``, or the id Spark assigns) and
its permutation for repeat r and column list g is
``np.random.default_rng([seed, r, g, start]).permutation(n)``, ``start`` the smallest
identity in the partition: the permutations follow the rows' identities, not the order
in which Spark delivers them. A DataFrame whose partitions hold the identities
``start .. start + n - 1`` therefore gives exactly the result of a dask collection of
the same rows in partitions of those lengths.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np
from sklearn.utils import Bunch, check_random_state

# the partition-local scheme and its score sums are Dask's, unchanged
from ..dask.permutation import (  # noqa: I001
    _n_scored_outputs,
    _partition_sums,
    _Plan,
    partition_scoring,
)
from ..inputs.groups import resolve_groups
from ..inputs.pipeline import is_pipeline
from ..inputs.rows import _check_names, feature_names_of
from ..inputs.targets import n_target_columns
from ..measures.registry import check_explainable
from ..parsers import parse
from ..permutation.importance import importance_bunch
from .frames import (
    batch_arrays,
    check_identities,
    classic_session,
    evaluation_columns,
    require_spark,
)
from .reduce import STATS_SCHEMA, guarded, pack, tree_reduce


def spark_permutation_importance(model, sdf, *, label_col=None, features_col=None,
                                 feature_cols=None, id_col=None, weight_col=None,
                                 base_margin_col=None, scoring=None, n_repeats=5,
                                 random_state=None, n_jobs=None, groups=None,
                                 iteration_range=None, missing=None, spark_model=None,
                                 depth=2):
    """``permutation_importance`` of the rows of a Spark DataFrame (see the module
    docstring for the scheme).

    The columns are named as for :func:`treeimp.spark.explain.explain_spark` (the
    label column is required). ``n_jobs``: kernel threads per Spark task (None: 1).
    ``spark_model``: the model object as given (a Spark ML model's column parameters
    are the defaults). ``depth``: levels of the tree reduction. Returns the same Bunch
    as the in-memory function; one Spark job.
    """
    require_spark("X is a Spark DataFrame")
    session = classic_session(sdf, "treeimp.permutation_importance")
    if is_pipeline(model):
        raise TypeError("a Pipeline on a Spark DataFrame: its earlier steps would have to "
                        "transform every partition. Pass its last step and the DataFrame "
                        "transformed by the others")
    if isinstance(depth, bool) or not isinstance(depth, numbers.Integral) or depth < 1:
        raise ValueError(f"depth must be an int >= 1, got {depth!r}")
    ens = parse(model, iteration_range=iteration_range, missing=missing)
    check_explainable(ens)
    ens.refuse_linear_leaves("permutation_importance on Spark DataFrames (in memory: "
                             "treeimp.permutation_importance)")
    scoring = partition_scoring(ens, scoring, n_repeats, n_jobs, "Spark DataFrames")
    cols = evaluation_columns(sdf, ens, spark_model if spark_model is not None else model,
                              label_col=label_col, features_col=features_col,
                              feature_cols=feature_cols, id_col=id_col,
                              weight_col=weight_col, base_margin_col=base_margin_col)
    if cols.label is None:
        raise ValueError("label_col is required: permutation importance scores the model's "
                         "predictions against the targets")
    if cols.features is not None:
        _check_names(list(cols.features), ens, "X")
        names = list(cols.features)
    else:
        names = feature_names_of(None, Bunch(feature_names=None), ens)
    grp = resolve_groups(groups, names)
    columns = ([[j] for j in range(ens.n_features)] if grp is None
               else [list(m) for m in grp.members])
    seed = int(check_random_state(random_state).randint(np.iinfo(np.int32).max + 1))
    plan = _Plan(scoring=scoring, seed=seed, n_repeats=int(n_repeats), columns=columns,
                 n_jobs=1 if n_jobs is None else n_jobs,
                 n_targets=n_target_columns(ens), n_outputs=_n_scored_outputs(ens))
    shared = session.sparkContext.broadcast(ens)
    try:
        partition = functools.partial(_spark_partition_sums, shared, plan, cols)
        sums = cols.project(sdf).mapInArrow(guarded(partition), STATS_SCHEMA)
        total = tree_reduce(sums, depth, "treeimp.permutation_importance")
    finally:
        shared.unpersist(blocking=False)
    scores = total.scores(plan)
    return importance_bunch(scores[0] - scores[1:].reshape(len(columns), plan.n_repeats),
                            grp, names)


def _spark_partition_sums(shared, plan, cols, batches):
    """Score statistics of one partition, its rows in the order of their identities
    (on an executor)."""
    import pyarrow as pa

    batches = [b for b in batches if b.num_rows]
    if not batches:
        return
    batch = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    X, y, w, b, ids = batch_arrays(batch, cols)
    check_identities(ids)
    order = np.argsort(ids, kind="stable")
    X = X[order] if isinstance(X, np.ndarray) else X.take(order).to_pandas()

    def take(v):
        return None if v is None else v[order]

    start, n = int(ids[order[0]]), len(ids)
    yield pack(_partition_sums(shared.value, plan, 0, start, n, X, take(y), take(w),
                               take(b)))

"""The rows of DATA for ``treeimp explain``, opened in one of three ways and explained by
the command's one :class:`treeimp.Explainer`:

* :class:`Batches` (the default): ``(X, y)`` batches of ``--batch-rows`` rows, each one's
  node statistics accumulated and added up, then finalised;
* :class:`WholeTable` (``--oob``): the table read whole, since a forest's out-of-bag
  rows are checked against its whole training set;
* :class:`DaskTable` (``--scheduler``): a Parquet dataset read by dask, explained where
  its partitions lie;
* :class:`SparkTable` (``--spark``): a Parquet dataset read by Spark, explained on its
  executors;
* :class:`QueryTable` (``--qid``, learning-to-rank models): the table read whole, its
  query-id column taken out and passed as ``qid`` (a row's gradient depends on its whole
  query).

Each encodes its columns with :func:`treeimp.inputs.categories.file_categories` (a
Pipeline's columns are left to its own steps) and checks class labels with
:func:`treeimp.cli.inputs.check_class_labels`.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd

from ..inputs.categories import file_categories
from ..inputs.pipeline import is_pipeline
from ..model.ranking import is_ranking
from ..stats.progress import progress_bar
from .dask_data import check_partition_labels, encode_partitions, read_parquet_dataset, scheduler
from .inputs import (
    StreamedRows,
    check_class_labels,
    model_features,
    split_pipeline_target,
    split_target,
)
from .spark_data import read_parquet_spark, spark_session
from .table_batches import open_table


def open_rows(args, model, ens, drop, warn):
    """The rows of ``args.data`` for ``model`` (parsed as ``ens``), as ``args`` asks."""
    source = f"data file {args.data!r}"
    if args.spark is not None:
        return SparkTable(args, model, ens, drop, source, warn)
    if args.id_column is not None:
        raise ValueError("--id-column names the row identities of --spark; without --spark "
                         "a row's identity is its position in DATA (use --drop to ignore "
                         "an ID column)")
    ranking = is_ranking(getattr(ens, "objective", None))
    qid = getattr(args, "qid", None)
    if ranking and qid is None:
        raise ValueError(f"the model's objective {ens.objective.source or ens.objective.name!r} "
                         "ranks the rows of each query: name the query-id column with --qid "
                         "COL")
    if qid is not None:
        if not ranking:
            raise ValueError("--qid is for learning-to-rank models (XGBoost rank:*, LightGBM "
                             "lambdarank); this model's objective is "
                             f"{getattr(getattr(ens, 'objective', None), 'name', None)!r}")
        if args.scheduler is not None or args.oob or args.spark is not None:
            raise ValueError("--qid cannot be combined with --scheduler, --spark or --oob")
        return QueryTable(args, model, ens, drop, source, warn)
    if args.scheduler is not None:
        return DaskTable(args, model, ens, drop, source, warn)
    if args.oob:
        return WholeTable(args, model, ens, drop, source, warn)
    return Batches(args, model, ens, drop, source, warn)


class WholeTable:
    """The whole table at once: (X, y), X encoded, y checked."""

    def __init__(self, args, model, ens, drop, source, warn):
        self.args = args
        df = self._read(args)
        if is_pipeline(model):  # its own steps read the input columns
            X, y = split_pipeline_target(df, args.target, model, drop=drop, source=source)
        else:
            X, y = split_target(df, args.target, ens, drop=drop, source=source,
                                by_position=args.columns_by_position)
            X = self._encode(X, ens, warn)
        self.X, self.y = X, self._labels(y, ens, source)

    def _read(self, args):
        return pd.concat(list(open_table(args.data, batch_size=args.batch_rows).frames()))

    def _encode(self, X, ens, warn):
        return file_categories(X, ens, warn)

    def _labels(self, y, ens, source):
        return check_class_labels(y, ens, source)

    def _running(self):
        return contextlib.nullcontext()

    def importances(self, ex, methods):
        """The explainer's importances of these rows."""
        args = self.args
        with self._running():
            return ex.explain(self.X, self.y, oob=args.oob, methods=methods,
                              n_blocks=args.n_blocks, random_state=args.seed)


class QueryTable(WholeTable):
    """The whole table at once, its ``--qid`` column taken out as the rows' query ids."""

    def _read(self, args):
        df = super()._read(args)
        if args.qid not in df.columns:
            raise ValueError(f"--qid column {args.qid!r} is not in the data file (columns: "
                             f"{', '.join(map(str, list(df.columns)[:20]))})")
        if args.qid == args.target:
            raise ValueError(f"--qid and --target name the same column {args.qid!r}")
        self.qid = df.pop(args.qid).to_numpy()
        return df

    def importances(self, ex, methods):
        args = self.args
        return ex.explain(self.X, self.y, methods=methods, n_blocks=args.n_blocks,
                          random_state=args.seed, qid=self.qid)


class DaskTable(WholeTable):
    """A Parquet dataset read lazily by dask: encoded and checked partition by
    partition, explained on ``--scheduler``."""

    def _read(self, args):
        return read_parquet_dataset(args.data)

    def _encode(self, X, ens, warn):
        return encode_partitions(X, ens, warn)

    def _labels(self, y, ens, source):
        return check_partition_labels(y, ens, source)

    def _running(self):
        return scheduler(self.args.scheduler)


class SparkTable:
    """A Parquet dataset read by Spark on ``--spark`` (a master URL; ``local[*]`` by
    default): its columns checked on the driver from the schema, its rows explained on
    the executors. Each row's jackknife block is its ``--id-column`` value, else the id
    Spark assigns (``monotonically_increasing_id``: the importances are those of the
    whole table, their standard errors depend on how Spark splits the files)."""

    def __init__(self, args, model, ens, drop, source, warn):
        for option, given in (("--scheduler", args.scheduler is not None),
                              ("--oob", args.oob)):
            if given:
                raise ValueError(f"--spark and {option} cannot be combined")
        if is_pipeline(model):
            raise ValueError("--spark explains a tree model on the columns of DATA; a "
                             "Pipeline's steps would have to transform every partition "
                             "(explain its last step on transformed data)")
        self.args, self.ens, self.drop, self.source = args, ens, drop, source

    def importances(self, ex, methods):
        args = self.args
        drop = list(self.drop) + ([args.id_column] if args.id_column else [])
        with spark_session(args.spark) as session:
            sdf = read_parquet_spark(session, args.data)
            if args.id_column is not None and args.id_column not in sdf.columns:
                raise ValueError(f"--id-column {args.id_column!r} is not a column of "
                                 f"{self.source}")
            features = model_features(sdf.columns, args.target, self.ens, drop=drop,
                                      source=self.source,
                                      by_position=args.columns_by_position)
            return ex.explain(sdf, label_col=args.target, feature_cols=features,
                              id_col=args.id_column, methods=methods,
                              n_blocks=args.n_blocks, random_state=args.seed)


class Batches:
    """``(X, y)`` batches of ``--batch-rows`` rows (:class:`StreamedRows`)."""

    def __init__(self, args, model, ens, drop, source, warn):
        self.args = args
        self.rows = StreamedRows(open_table(args.data, batch_size=args.batch_rows), ens,
                                 args.target, drop=drop, source=source,
                                 by_position=args.columns_by_position,
                                 pipeline=model if is_pipeline(model) else None, warn=warn)

    def importances(self, ex, methods):
        """Node statistics accumulated batch by batch (each at its rows' positions in
        the table), added up and finalised: the importances of the whole table."""
        args, n = self.args, self.rows.n_rows
        bar = progress_bar(True if args.progress else None, total=n,
                           work=(n or np.inf) * ex.ensemble.n_trees, desc="rows")
        with contextlib.closing(bar):
            total = sum_stats(ex.accumulate(X, y, rows=rows, n_blocks=args.n_blocks,
                                            random_state=args.seed, methods=methods,
                                            progress=False)
                              for X, y, rows in _positioned(self.rows, bar))
        return ex.finalize(total, methods)


def _positioned(batches, bar):
    """``(X, y, rows)``: each batch with its rows' positions in the table, its rows
    added to the progress bar as it is handed on."""
    start = 0
    for X, y in batches:
        yield X, y, range(start, start + len(X))
        start += len(X)
        bar.update(len(X))


def sum_stats(stats):
    """The sum of node statistics, added one at a time as they come."""
    total = None
    for s in stats:
        total = s if total is None else total + s
    return total

"""What ``treeimp explain --spark`` adds: a Parquet dataset read with Spark's
``spark.read.parquet`` and the session the explain runs on.

The table checks of the in-memory command line are reused on the dataset's schema
(column names matched to the model's features by :func:`treeimp.cli.inputs.model_features`);
the rows are read and explained on the executors (``treeimp.spark.explain``).
"""

from __future__ import annotations

import contextlib
import os
import sys

from ..spark.frames import SPARK_EXTRA, require_spark
from .dask_data import _check_local_files, _stated_rows

LOCAL_MASTER = "local[*]"


@contextlib.contextmanager
def spark_session(master):
    """A SparkSession on ``master`` (``local[*]``, ``local[N]``, ``spark://host:7077``,
    ``yarn``, ...) for the ``with`` block: an active session is used as it is; one
    started here runs the executors' Python on this interpreter and is stopped after."""
    _require("--spark")
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        session = (SparkSession.builder.master(master).appName("treeimp explain")
                   .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    except Exception as exc:  # a bad master URL or no Java: one line, not a Java trace
        detail = " ".join(str(exc).split())[:500] or type(exc).__name__
        raise ValueError(f"cannot start a Spark session on --spark {master!r}: {detail} "
                         "(Spark needs Java 17 or 21 on PATH or JAVA_HOME)") from None
    try:
        yield session
    finally:
        session.stop()


def read_parquet_spark(session, path):
    """A Spark DataFrame of the Parquet dataset ``path`` (a file, a directory of files
    or a glob pattern); its files are checked first as ``--scheduler`` checks them."""
    matches = _check_local_files(path)
    if _stated_rows(matches) == 0:
        raise ValueError(f"Parquet dataset {path!r} has no rows")
    try:
        sdf = session.read.parquet(path)
    except Exception as exc:  # Spark's AnalysisException and the like
        detail = " ".join(str(exc).split())[:500] or type(exc).__name__
        raise ValueError(f"cannot read the Parquet dataset {path!r} with Spark: "
                         f"{detail}") from None
    dup = sorted({c for c in sdf.columns if sdf.columns.count(c) > 1})
    if dup:
        raise ValueError(f"Parquet dataset {path!r} has duplicated column names {dup[:10]}")
    return sdf


def _require(what):
    try:
        require_spark(what)
    except ImportError as exc:  # the command line reports ValueErrors in one line
        raise ValueError(f"{what} needs pyspark and pyarrow: {SPARK_EXTRA}") from exc

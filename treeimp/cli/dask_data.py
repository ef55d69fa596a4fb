"""What ``treeimp explain --scheduler`` adds: a Parquet dataset read lazily with
``dask.dataframe.read_parquet``, and the scheduler the explain runs on.

The table checks of the in-memory command line (``treeimp/cli/inputs.py``) are reused:
column names and dtypes are checked on the client from the dataset's schema; category
encoding and the class-label check run partition by partition on the workers.
"""

from __future__ import annotations

import contextlib
import glob
import os
import stat

from ..dask.collections import DASK_EXTRA, require_dask
from ..inputs.categories import file_categories
from ..inputs.files import kind_of, stat_path
from .inputs import check_class_labels
from .table_batches import check_parquet_folder

LOCAL_SCHEDULERS = ("processes", "threads", "synchronous")


def read_parquet_dataset(path):
    """A dask DataFrame of the Parquet dataset ``path``: a file, a directory of files or
    a glob pattern (``'data/*.parquet'``)."""
    _require("--scheduler")
    import dask.dataframe as dd

    matches = _check_local_files(path)
    try:
        df = dd.read_parquet(path)
    except (OSError, ValueError, TypeError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot read the Parquet dataset {path!r} with "
                         f"dask.dataframe.read_parquet: {detail}") from None
    if _stated_rows(matches) == 0:
        raise ValueError(f"Parquet dataset {path!r} has no rows")
    df.columns = [str(c) for c in df.columns]
    dup = sorted({c for c in df.columns if list(df.columns).count(c) > 1})
    if dup:
        raise ValueError(f"Parquet dataset {path!r} has duplicated column names {dup[:10]}")
    return df


def _check_local_files(path):
    """The dataset's files are regular files (symlinks followed): a FIFO or a device
    named .parquet would hang the read, a symlink loop is named as one."""

    if os.path.lexists(path):
        matches = [path]
    else:
        matches = sorted(glob.glob(path))
        if not matches:
            raise ValueError(f"data {path!r} matches no file or directory (--scheduler reads "
                             "a Parquet dataset: a .parquet file, a directory of them or a "
                             "glob such as 'data/*.parquet')")
    for f in matches:
        st = stat_path(f, "data")
        if stat.S_ISDIR(st.st_mode):
            check_parquet_folder(f)
        elif not stat.S_ISREG(st.st_mode):
            raise ValueError(f"data {f!r} is {kind_of(st.st_mode)}, not a regular file")
    return matches


def _stated_rows(matches):
    """The rows the Parquet footers of ``matches`` (files, folders) state, or None when
    pyarrow cannot tell (then dask's own read decides)."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    try:
        return sum(ds.dataset(m, format="parquet").count_rows() for m in matches)
    except (pa.ArrowException, OSError, ValueError):
        return None


def encode_partitions(X, ens, warn):
    """:func:`treeimp.inputs.categories.file_categories` on every partition of dask ``X``.

    The columns and dtypes are checked once on the client, on the (empty) schema of X,
    so a text column the model cannot read is refused before any data are read and the
    warnings about label codes are given once. Warnings about labels a partition holds
    that the model never saw are not shown (the partitions are read on the workers;
    those rows are routed as missing, as in memory).
    """
    meta = file_categories(X._meta, ens, warn)
    if list(meta.dtypes) == list(X.dtypes):
        return X
    return X.map_partitions(file_categories, ens, _quiet, meta=meta)


def check_partition_labels(y, ens, source):
    """:func:`treeimp.cli.inputs.check_class_labels` on every partition of dask ``y``
    (a dtype that cannot hold class indices is refused at once, from the schema)."""

    meta = check_class_labels(y._meta, ens, source)
    if meta is y._meta:  # the model stores its labels, or is no classifier
        return y
    return y.map_partitions(check_class_labels, ens, source, meta=meta)


@contextlib.contextmanager
def scheduler(spec):
    """Run the ``with`` block on ``spec``: a distributed scheduler's address (a
    ``distributed.Client`` is connected, and closed afterwards) or one of dask's local
    schedulers ``processes``, ``threads``, ``synchronous``."""
    _require("--scheduler")
    import dask

    if spec in LOCAL_SCHEDULERS:
        with dask.config.set(scheduler=spec):
            yield None
        return
    if "://" not in spec and ":" not in spec:
        raise ValueError(f"--scheduler {spec!r} is neither a scheduler address (e.g. "
                         f"tcp://host:8786) nor one of {', '.join(LOCAL_SCHEDULERS)}")
    _require("--scheduler ADDRESS", modules=("distributed",))
    from distributed import Client

    try:
        # the connect timeout is dask's distributed.comm.timeouts.connect (30 s)
        client = Client(spec, set_as_default=True)
    except (OSError, TimeoutError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ValueError(f"cannot connect to the dask scheduler {spec!r}: {detail}") from None
    try:
        yield client
    finally:
        client.close()


def _require(what, modules=("dask", "dask.dataframe")):
    try:
        require_dask(what, modules=modules)
    except ImportError as exc:  # the command line reports ValueErrors in one line
        raise ValueError(f"{what} needs dask: {DASK_EXTRA}") from exc


def _quiet(message):
    """Warnings raised inside partitions: already given once from the schema."""

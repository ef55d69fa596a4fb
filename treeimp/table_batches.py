"""A table file read in batches of rows, so that memory stays flat in the file's size.

:func:`open_table` takes a CSV file (``.csv``, optionally compressed; read with pandas'
``read_csv(chunksize=...)``), a Parquet file, a folder of Parquet files or a glob
pattern of them (read file by file with pyarrow's ``ParquetFile.iter_batches``, row
group by row group, only the columns asked for; hive-style ``key=value`` folder names
are not read as columns). The :class:`TableBatches` it returns gives the column
names, the row count where the file states it (Parquet metadata; None for CSV, which
would have to be read to count), and the batches as DataFrames whose columns are the
ones asked for, in that order, and whose index is each row's position in the whole
table. Concatenated, the batches equal what pandas reads from the whole file
(``pd.read_csv`` with the same options, ``pd.read_parquet``), with one exception of
CSV's per-chunk type inference: a column whose values parse as numbers in one chunk
and hold text in another is numeric in the first chunk's frame (see
:meth:`TableBatches.text_labels` for reading such columns as text throughout).
"""

from __future__ import annotations

import glob
import importlib.util
import os
from pathlib import Path

import pandas as pd

# rows per batch: a few MB per numeric column at most
DEFAULT_BATCH_ROWS = 65_536

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz")
PARQUET_SUFFIXES = (".parquet", ".pq")

# Floats must come back bit for bit: pandas < 3.1 needs the round-trip converter for that
# (3.1 uses it always and deprecates the option).
CSV_OPTIONS = ({} if tuple(int(p) for p in pd.__version__.split(".")[:2]) >= (3, 1)
               else {"float_precision": "round_trip"})

_GLOB_CHARS = ("*", "?", "[")


def table_suffix(path) -> str:
    """The suffix that decides how ``path`` is read (``.csv.gz`` counts as one)."""
    name = Path(path).name.lower()
    for s in CSV_SUFFIXES + PARQUET_SUFFIXES:
        if name.endswith(s):
            return s
    return Path(path).suffix.lower()


def open_table(path, *, batch_size=DEFAULT_BATCH_ROWS) -> TableBatches:
    """A CSV file, Parquet file, folder of Parquet files or glob pattern of Parquet
    files, to be read in batches of ``batch_size`` rows.

    Raises ValueError naming the path when it does not exist, matches no file, has a
    suffix other than CSV / Parquet, cannot be read, or has no rows or duplicated
    column names.
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
    text = os.fspath(path)
    if any(c in text for c in _GLOB_CHARS) and not os.path.exists(text):
        files = sorted(f for f in glob.glob(text, recursive=True) if os.path.isfile(f))
        if not files:
            raise ValueError(f"data pattern {text!r} matches no file")
        bad = [f for f in files if table_suffix(f) not in PARQUET_SUFFIXES]
        if bad:
            raise ValueError(f"data pattern {text!r} matches files that are not Parquet "
                             f"(.parquet, .pq): {bad[:5]}; a pattern may name Parquet files "
                             "only")
        return _ParquetTable(text, files, batch_size)
    p = Path(text)
    if not p.exists():
        raise ValueError(f"data file {text!r} does not exist")
    if p.is_dir():
        return _ParquetTable(text, text, batch_size)
    suffix = table_suffix(p)
    if suffix in CSV_SUFFIXES:
        return _CsvTable(text, batch_size)
    if suffix in PARQUET_SUFFIXES:
        return _ParquetTable(text, text, batch_size)
    raise ValueError(f"data file {text!r} has the unsupported suffix {suffix!r}; expected "
                     ".csv (optionally .gz/.bz2/.zip/.xz), .parquet, a folder of Parquet "
                     "files or a glob pattern of them")


class TableBatches:
    """A table read in batches (made by :func:`open_table`).

    Attributes
    ----------
    path : str
    columns : list of str
        The table's column names, in the file's order.
    n_rows : int or None
        The number of rows when the file states it (Parquet), else None.
    batch_size : int
    kind : str
        "csv" or "parquet".
    """

    path: str
    columns: list
    n_rows: int | None
    batch_size: int

    def frames(self, columns=None, *, text=()):
        """The batches: DataFrames of ``columns`` (default all) in that order, indexed
        by row position in the table. ``text``: CSV columns read as text (their raw
        strings) in every batch, whatever they look like."""
        columns = self._check_columns(self.columns if columns is None else columns)
        start = 0
        for df in self._read(columns, list(text)):
            df.index = pd.RangeIndex(start, start + len(df))
            start += len(df)
            yield df
        if start == 0:
            raise ValueError(f"data file {self.path!r} has no rows")

    def batches(self, features, target, weight=None, *, text=()):
        """``(X, y)`` per batch, or ``(X, y, w)`` with a ``weight`` column: X the
        ``features`` columns in that order, y and w Series."""
        names = list(features)
        extra = [target] + ([] if weight is None else [weight])
        clash = [c for c in extra if c in names]
        if clash:
            raise ValueError(f"{clash} named both as a feature and as the target / weight")
        for df in self.frames(names + extra, text=text):
            X, y = df[names], df[target]
            yield (X, y) if weight is None else (X, y, df[weight])

    def text_candidates(self, columns):
        """Those of ``columns`` that may hold text: a Parquet string or dictionary column
        (by the schema), a CSV column read as text in the first batch."""
        columns = self._check_columns(columns)
        if self.kind == "csv":
            first = next(self._read(columns, []), None)
            if first is None:
                return []
            return [c for c in columns if not (pd.api.types.is_numeric_dtype(first[c].dtype)
                                               or pd.api.types.is_bool_dtype(first[c].dtype))]
        import pyarrow as pa

        def texty(t):
            return (pa.types.is_dictionary(t) or pa.types.is_string(t)
                    or pa.types.is_large_string(t))

        return [c for c in columns if texty(self._schema.field(c).type)]

    def text_labels(self, columns):
        """One pass over ``columns``: ``(text, labels)`` where ``text`` lists those that
        hold text or categories anywhere in the table (a CSV column with a value that is
        not a number, a Parquet string or dictionary column) and ``labels`` maps each of
        them to its categories as pandas gives them when reading the whole table: a text
        column's sorted distinct values, a Parquet dictionary column's values in the
        order pyarrow unifies the dictionaries of its parts. Memory: the distinct values
        only."""
        columns = self._check_columns(columns)
        seen = {c: {} for c in columns}  # dict: an insertion-ordered set
        numeric = {c: True for c in columns}
        for df in self._read(columns, columns if self.kind == "csv" else []):
            for c in columns:
                col = df[c]
                if isinstance(col.dtype, pd.CategoricalDtype):
                    seen[c].update(dict.fromkeys(col.cat.categories))
                    numeric[c] = False
                    continue
                values = col.dropna()
                if not len(values):
                    continue
                if pd.api.types.is_string_dtype(col.dtype) or col.dtype == object:
                    if numeric[c] and self.kind == "csv":
                        numeric[c] = bool(pd.to_numeric(values, errors="coerce").notna().all())
                    else:
                        numeric[c] = False
                    seen[c].update(dict.fromkeys(values.unique()))
        text = [c for c in columns if not numeric[c]]
        labels = {}
        for c in text:
            values = list(seen[c])
            labels[c] = (pd.Index(values) if self.is_dictionary(c)
                         else pd.Series(values, dtype=object).astype("category")
                         .cat.categories)
        return text, labels

    # ---------------------------------------------------------------- internals
    kind = "parquet"

    def is_dictionary(self, column):
        """Whether ``column`` is a Parquet dictionary ('category') column."""
        return False

    def _check_columns(self, columns):
        columns = [str(c) for c in columns]
        missing = [c for c in columns if c not in self.columns]
        if missing:
            raise ValueError(f"data file {self.path!r} has no column(s) {missing[:10]}; its "
                             f"columns are {self.columns[:20]}")
        return columns


class _CsvTable(TableBatches):
    kind = "csv"

    def __init__(self, path, batch_size):
        self.path, self.batch_size, self.n_rows = path, batch_size, None
        try:
            header = pd.read_csv(path, nrows=0, **CSV_OPTIONS)
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise _unreadable(path, exc) from None
        self.columns = [str(c) for c in header.columns]
        _check_unique(path, self.columns)

    def _read(self, columns, text):
        wanted = set(columns)
        try:
            reader = pd.read_csv(self.path, usecols=lambda c: str(c) in wanted,
                                 chunksize=self.batch_size,
                                 dtype={c: object for c in text} or None, **CSV_OPTIONS)
            with reader:
                for df in reader:
                    df.columns = [str(c) for c in df.columns]
                    yield df[columns]
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as exc:
            raise _unreadable(self.path, exc) from None


class _ParquetTable(TableBatches):
    def __init__(self, path, source, batch_size):
        if importlib.util.find_spec("pyarrow") is None:
            raise ValueError(f"reading the Parquet data {path!r} needs pyarrow: pip install "
                             "pyarrow (or save the data as CSV)")
        import pyarrow as pa
        import pyarrow.dataset as ds

        self.path, self.batch_size = path, batch_size
        self._errors = (pa.ArrowException, OSError, ValueError)
        try:
            # the files (a folder's in the order pandas.read_parquet reads them) and the
            # schema; the rows of each file from its metadata
            dataset = ds.dataset(source, format="parquet", partitioning=None)
            self._files = list(dataset.files)
            self._schema = dataset.schema
            self.n_rows = int(dataset.count_rows())
        except self._errors as exc:
            raise _unreadable(path, exc) from None
        if not self._files:
            raise ValueError(f"data folder {path!r} holds no Parquet file")
        self.columns = [str(c) for c in self._schema.names]
        _check_unique(path, self.columns)

    def is_dictionary(self, column):
        import pyarrow as pa

        return pa.types.is_dictionary(self._schema.field(column).type)

    def _read(self, columns, text):
        import pyarrow.parquet as pq

        try:
            for f in self._files:
                # file by file, row group by row group: pyarrow's dataset scanner and a
                # pre-buffered file read whole files' columns at once
                reader = pq.ParquetFile(f, pre_buffer=False)
                for batch in reader.iter_batches(batch_size=self.batch_size,
                                                 columns=columns):
                    if batch.num_rows:
                        yield batch.to_pandas()
        except self._errors as exc:
            raise _unreadable(self.path, exc) from None


def _check_unique(path, columns):
    dup = sorted({c for c in columns if columns.count(c) > 1})
    if dup:
        raise ValueError(f"data file {path!r} has duplicated column names {dup[:10]}")


def _unreadable(path, exc):
    detail = " ".join(str(exc).split()) or type(exc).__name__
    return ValueError(f"cannot read data file {path!r}: {detail}")

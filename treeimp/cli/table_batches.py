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

Only regular files are read (symlinks followed; a device such as /dev/zero, a FIFO or a
socket would never end or block), and a CSV line longer than :data:`MAX_LINE_BYTES`
(after decompression) stops the read: a file with no line breaks cannot take memory in
its size. A row with more fields than the header is an error naming its line (as
pandas' whole-file read), and so is a table without rows.
"""

from __future__ import annotations

import bz2
import contextlib
import glob
import gzip
import importlib.util
import io
import lzma
import os
import re
import stat
import zipfile
from pathlib import Path

import pandas as pd

from ..inputs.files import kind_of, open_regular, require_regular, stat_path

# rows per batch: a few MB per numeric column at most
DEFAULT_BATCH_ROWS = 65_536

CSV_SUFFIXES = (".csv", ".csv.gz", ".csv.bz2", ".csv.zip", ".csv.xz")
PARQUET_SUFFIXES = (".parquet", ".pq")

# Floats must come back bit for bit: pandas < 3.1 needs the round-trip converter for that
# (3.1 uses it always and deprecates the option).
CSV_OPTIONS = ({} if tuple(int(p) for p in pd.__version__.split(".")[:2]) >= (3, 1)
               else {"float_precision": "round_trip"})

_GLOB_CHARS = ("*", "?", "[")

# The longest CSV line read, in bytes after decompression (a line break inside a quoted
# field counts as a break): 64 MiB is a million numeric columns of 60 characters. A
# file without line breaks (zeros, a binary file named .csv, a decompression bomb)
# fails after this much instead of being held in memory whole.
MAX_LINE_BYTES = 64 << 20

# pandas' message for a row with more fields than the header
_EXTRA_FIELDS = re.compile(r"Expected (\d+) fields in line (\d+), saw (\d+)")


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
    if any(c in text for c in _GLOB_CHARS) and not os.path.lexists(text):
        return _ParquetTable(text, glob_parquet_files(text), batch_size)
    st = stat_path(text, "data file")
    if stat.S_ISDIR(st.st_mode):
        check_parquet_folder(text)
        return _ParquetTable(text, text, batch_size)
    suffix = table_suffix(text)
    if suffix in CSV_SUFFIXES + PARQUET_SUFFIXES and not stat.S_ISREG(st.st_mode):
        raise ValueError(f"data file {text!r} is {kind_of(st.st_mode)}, not a regular file; "
                         "save the rows to a file and pass its path")
    if suffix in CSV_SUFFIXES:
        return _CsvTable(text, batch_size)
    if suffix in PARQUET_SUFFIXES:
        return _ParquetTable(text, text, batch_size)
    raise ValueError(f"data file {text!r} has the unsupported suffix {suffix!r}; expected "
                     ".csv (optionally .gz/.bz2/.zip/.xz), .parquet, a folder of Parquet "
                     "files or a glob pattern of them")


def glob_parquet_files(pattern):
    """The files a glob pattern matches (sorted; folders it matches are passed over),
    each a regular Parquet file, else a ValueError naming the first that is not."""
    matches = sorted(glob.glob(pattern, recursive=True))
    files = []
    for f in matches:
        st = stat_path(f, f"data pattern {pattern!r} matches")
        if stat.S_ISDIR(st.st_mode):
            continue
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"data pattern {pattern!r} matches {f!r}, which is "
                             f"{kind_of(st.st_mode)}, not a regular file")
        files.append(f)
    if not files:
        raise ValueError(f"data pattern {pattern!r} matches no file")
    bad = [f for f in files if table_suffix(f) not in PARQUET_SUFFIXES]
    if bad:
        raise ValueError(f"data pattern {pattern!r} matches files that are not Parquet "
                         f"(.parquet, .pq): {bad[:5]}; a pattern may name Parquet files "
                         "only")
    return files


def check_parquet_folder(folder):
    """Every entry of ``folder`` that pyarrow's dataset discovery reads (names not
    starting with '.' or '_', in sub-folders too, symlinks followed) is a regular file
    or a folder; a FIFO or device in it would hang the read, a symlink loop recurse."""
    def walk(path, seen):
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            if entry.name.startswith((".", "_")):
                continue
            st = stat_path(entry.path, "data folder entry")
            if stat.S_ISDIR(st.st_mode):
                key = (st.st_dev, st.st_ino)
                if key in seen:
                    raise ValueError(f"data folder entry {entry.path!r} is a symlink loop "
                                     "(a link to a folder that holds it)")
                walk(entry.path, seen | {key})
            elif not stat.S_ISREG(st.st_mode):
                raise ValueError(f"data folder entry {entry.path!r} is "
                                 f"{kind_of(st.st_mode)}, not a regular file")

    top = os.stat(folder)
    walk(folder, frozenset({(top.st_dev, top.st_ino)}))


class _LineBound(io.RawIOBase):
    """A binary stream that passes ``raw`` on and raises ValueError once the open line
    (the bytes since the last line break) grows past ``limit`` bytes, naming the line's
    number (1-based, counted in line feeds)."""

    def __init__(self, raw, limit, name):
        self._raw, self._limit, self._name = raw, limit, name
        self._breaks = 0  # line feeds passed on
        self._open_line = 0  # bytes since the last line break

    def readable(self):
        return True

    def readinto(self, buffer):
        n = self._raw.readinto(buffer)
        if not n:
            return n
        chunk = bytes(memoryview(buffer)[:n])
        last = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        self._open_line = self._open_line + n if last < 0 else n - last - 1
        self._breaks += chunk.count(b"\n")
        if self._open_line > self._limit:
            raise _LineTooLong(f"data file {self._name!r}: line {self._breaks + 1} is longer "
                               f"than {self._limit} bytes (no line break); not a CSV table")
        return n


class _LineTooLong(ValueError):
    """A CSV line past MAX_LINE_BYTES (reported as it is, not as a parse error)."""


@contextlib.contextmanager
def open_csv(path):
    """``path`` (a regular file, symlinks followed) opened for ``pd.read_csv`` as a
    binary stream, decompressed by its suffix (.gz, .bz2, .xz, .zip holding one file)
    and bounded to lines of :data:`MAX_LINE_BYTES`."""
    fh = open_regular(path, "data file", "save the rows to a file and pass its path")
    with contextlib.ExitStack() as stack:
        stack.enter_context(fh)
        suffix = table_suffix(path)
        try:
            if suffix == ".csv.gz":
                raw = stack.enter_context(gzip.GzipFile(fileobj=fh, mode="rb"))
            elif suffix == ".csv.bz2":
                raw = stack.enter_context(bz2.BZ2File(fh))
            elif suffix == ".csv.xz":
                raw = stack.enter_context(lzma.LZMAFile(fh))
            elif suffix == ".csv.zip":
                archive = stack.enter_context(zipfile.ZipFile(fh))
                names = [n for n in archive.namelist() if not n.endswith("/")]
                if len(names) != 1:
                    raise ValueError(f"the zip archive holds {len(names)} files "
                                     f"{names[:5]}; it must hold one CSV file")
                raw = stack.enter_context(archive.open(names[0]))
            else:
                raw = fh
        except (OSError, EOFError, lzma.LZMAError, zipfile.BadZipFile) as exc:
            raise _unreadable(path, exc) from None
        yield io.BufferedReader(_LineBound(raw, MAX_LINE_BYTES, path), 1 << 18)


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
        # the header and the first row: a table without rows is refused here, before
        # anything is asked of its columns
        with contextlib.closing(self._chunks(1, None)) as chunks:
            first = next(chunks, None)
        if first is None or first.shape[0] == 0:
            raise ValueError(f"data file {path!r} has no rows (only a header)")
        self.columns = [str(c) for c in first.columns]
        _check_unique(path, self.columns)

    def _read(self, columns, text):
        # every column is read (not usecols): with usecols pandas passes over the
        # fields a row has beyond the header, where the whole-file read refuses the row
        for df in self._chunks(self.batch_size, {c: object for c in text} or None):
            df.columns = [str(c) for c in df.columns]
            if len(df):
                yield df[columns]

    def _chunks(self, rows, dtype):
        try:
            with open_csv(self.path) as fh, pd.read_csv(fh, chunksize=rows, dtype=dtype,
                                                        **CSV_OPTIONS) as reader:
                for df in reader:
                    if not isinstance(df.index, pd.RangeIndex):
                        # pandas makes an index of the first fields when a row has
                        # more fields than the header
                        extra = df.index.nlevels
                        raise ValueError(
                            f"data file {self.path!r}: the first row (the line after the "
                            f"header) has {len(df.columns) + extra} fields but the header names "
                            f"{len(df.columns)} columns {_head(df.columns)}; every row "
                            "needs one field per column")
                    yield df
        except _LineTooLong:
            raise
        except pd.errors.EmptyDataError:
            raise ValueError(f"data file {self.path!r} is empty (no header, no rows)") \
                from None
        except (ValueError, UnicodeDecodeError, pd.errors.ParserError, OSError, EOFError,
                lzma.LZMAError) as exc:
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
        if self.n_rows == 0:
            raise ValueError(f"data {path!r} has no rows ({len(self._files)} Parquet "
                             f"file{'s' if len(self._files) > 1 else ''} without rows)")
        self.columns = [str(c) for c in self._schema.names]
        _check_unique(path, self.columns)

    def is_dictionary(self, column):
        import pyarrow as pa

        return pa.types.is_dictionary(self._schema.field(column).type)

    def _read(self, columns, text):
        import pyarrow.parquet as pq

        try:
            for f in self._files:
                require_regular(f, "data file")  # checked when the table was opened
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
    extra = _EXTRA_FIELDS.search(detail)
    if extra:
        want, line, saw = extra.groups()
        return ValueError(f"data file {path!r}: line {line} has {saw} fields but the header "
                          f"names {want} columns; every row needs one field per column")
    return ValueError(f"cannot read data file {path!r}: {detail}")


def _head(columns, n=10):
    columns = [str(c) for c in columns]
    return str(columns[:n])[:-1] + (", ...]" if len(columns) > n else "]")

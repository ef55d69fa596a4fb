"""X, y, sample_weight and base_margin given as dask collections, split into aligned
partitions, each with the global position of its first row.

A row's jackknife block depends on its global position (see ``Explainer.accumulate``'s
``rows=``), so every partition must know where it starts in the whole set: dask arrays
know it from their chunks; dask DataFrames (and arrays with unknown chunk sizes) do not,
and their partition lengths are computed first, in one pass before the explain pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .collections import is_dask_collection, require_dask

_COMPANIONS = ("y", "sample_weight", "base_margin")


@dataclass(frozen=True)
class Partitions:
    """Aligned partitions of the evaluation rows.

    ``X`` holds one ``dask.delayed`` object per partition, each whole rows (all columns
    of X in one chunk). ``y``, ``sample_weight`` and ``base_margin`` hold one object per
    partition too (a ``Delayed`` of a dask collection's partition, or the slice of an
    in-memory array, pandas Series or DataFrame), or are None when not given.
    ``starts[i]`` is the global position of partition i's first row, ``lengths[i]`` its
    number of rows (partitions may be empty).
    """

    X: tuple
    y: tuple | None
    sample_weight: tuple | None
    base_margin: tuple | None
    starts: np.ndarray
    lengths: np.ndarray

    @property
    def n_partitions(self) -> int:
        return len(self.X)

    @property
    def n_rows(self) -> int:
        return int(self.lengths.sum())

    def rows(self, i) -> range:
        """Global row positions of partition ``i``."""
        start = int(self.starts[i])
        return range(start, start + int(self.lengths[i]))


def split_partitions(X, y=None, *, sample_weight=None, base_margin=None) -> Partitions:
    """Split dask ``X`` and the per-row inputs that go with it into aligned partitions.

    Parameters
    ----------
    X : dask.array.Array (n_rows, n_features) or dask.dataframe.DataFrame
        A dask array is rechunked to whole rows (one chunk along the columns; its row
        chunks are kept).
    y, sample_weight, base_margin : dask collection, array-like or None
        A dask array, DataFrame or Series must have X's partitions: the same number,
        and the same number of rows in each (rows are paired by position within a
        partition; two dask DataFrames with known but different divisions are refused).
        An in-memory array, Series or DataFrame of ``n_rows`` rows is sliced at the
        partition boundaries (each slice travels with its partition's task).

    Returns
    -------
    Partitions

    Raises
    ------
    TypeError
        X is not a dask array or DataFrame.
    ValueError
        X is not two-dimensional; a companion has another number of partitions, another
        number of rows in some partition, other divisions, or (in memory) another
        number of rows than X.
    ImportError
        dask (or dask.array / dask.dataframe) cannot be imported; the message names the
        extra to install.

    Notes
    -----
    Partition lengths of dask DataFrames and Series, whatever their divisions (known
    divisions bound the index, not the number of rows), and of dask arrays with unknown
    chunk sizes (``nan`` in ``.chunks``, e.g. from ``DataFrame.to_dask_array()``) are
    not known before the data are read: they are computed first, on the active
    scheduler, before the explain pass (one ``dask.compute`` of ``map_partitions(len)``
    for all the DataFrames and Series, ``compute_chunk_sizes()`` for such arrays). Pass
    dask arrays with known chunks to skip that pass.
    """
    kind = _kind(X, "X")
    require_dask(f"X is a dask {kind}",
                 modules=("dask", "dask.array" if kind == "array" else "dask.dataframe"))
    import dask

    X = _whole_rows(X, "X", kind)
    x_parts = _parts(X, kind)
    collections = {"X": (X, kind, x_parts)}
    given = {"y": y, "sample_weight": sample_weight, "base_margin": base_margin}
    for name, value in given.items():
        if value is None or not is_dask_collection(value):
            continue
        vkind = _kind(value, name)
        value = _whole_rows(value, name, vkind)
        parts = _parts(value, vkind)
        if len(parts) != len(x_parts):
            raise ValueError(
                f"{name} has {len(parts)} partitions but X has {len(x_parts)}: rows are "
                f"paired partition by partition, so {name} needs X's partitions (take both "
                f"from one dask DataFrame, or {name}.rechunk(X.chunks[0]) for dask arrays "
                "with known chunk sizes)")
        _check_divisions(X, value, name)
        collections[name] = (value, vkind, parts)

    lengths = {name: _known_lengths(coll, vkind)
               for name, (coll, vkind, parts) in collections.items()}
    frames = [name for name, n in lengths.items() if n is None
              and collections[name][1] != "array"]
    if frames:  # one pass for every DataFrame and Series (a shared source is read once)
        counted = dask.compute(*[collections[name][0].map_partitions(len) for name in frames])
        for name, n in zip(frames, counted):
            lengths[name] = np.asarray(n, dtype=np.int64).reshape(-1)
    for name, n in lengths.items():
        if n is None:  # a dask array with unknown chunk sizes
            coll, vkind, _ = collections[name]
            lengths[name] = _known_lengths(coll.compute_chunk_sizes(), vkind)
    x_len = lengths["X"]
    for name in collections:
        if name != "X":
            _check_lengths(name, lengths[name], x_len)
    starts = np.zeros(len(x_len), dtype=np.int64)
    np.cumsum(x_len[:-1], out=starts[1:])
    n_rows = int(x_len.sum())

    out = {}
    for name, value in given.items():
        if value is None:
            out[name] = None
        elif name in collections:
            out[name] = tuple(collections[name][2])
        else:
            out[name] = tuple(_slices(value, name, starts, x_len, n_rows, len(x_parts)))
    return Partitions(X=tuple(x_parts), starts=starts, lengths=x_len, **out)


def _kind(x, name):
    """'array', 'DataFrame' or 'Series' for a dask collection; TypeError otherwise."""
    cls = type(x).__name__
    if is_dask_collection(x):
        module = type(x).__module__
        if module.startswith("dask.array") and cls == "Array":
            return "array"
        if cls in ("DataFrame", "Series"):
            return cls
        raise TypeError(f"{name} is a dask {cls}; only dask arrays, DataFrames and Series "
                        "hold rows treeimp can explain")
    raise TypeError(f"{name} is a {type(x).__module__}.{cls}, not a dask array or "
                    "DataFrame")


def _whole_rows(x, name, kind):
    """A dask array with every column in one chunk (row chunks unchanged); X must be
    two-dimensional."""
    if name == "X" and (kind == "Series" or (kind == "array" and x.ndim != 2)):
        shape = "a dask Series" if kind == "Series" else f"a dask array of shape {x.shape}"
        raise ValueError(f"X must be two-dimensional (rows x features); got {shape} "
                         "(a single feature: X.reshape(-1, 1) or series.to_frame())")
    if kind == "array":
        if x.ndim not in (1, 2):
            raise ValueError(f"{name} must have one or two dimensions; got a dask array of "
                             f"shape {x.shape}")
        if x.ndim == 2 and len(x.chunks[1]) > 1:
            x = x.rechunk({1: -1})
    return x


def _parts(x, kind):
    """One Delayed per row partition."""
    if kind == "array":
        return list(np.asarray(x.to_delayed(), dtype=object).reshape(-1))
    return list(x.to_delayed())


def _known_lengths(x, kind):
    """Rows per partition when known without reading data (dask arrays with known chunk
    sizes), else None."""
    if kind == "array":
        sizes = np.asarray(x.chunks[0], dtype=np.float64)
        if not np.isnan(sizes).any():
            return sizes.astype(np.int64)
    return None


def _check_divisions(X, value, name):
    known = (getattr(X, "known_divisions", False) and getattr(value, "known_divisions", False))
    if known and tuple(X.divisions) != tuple(value.divisions):
        raise ValueError(f"{name} and X are dask DataFrames with different divisions "
                         f"({_short(value.divisions)} and {_short(X.divisions)}): their "
                         "rows would be paired by position within mismatched partitions; "
                         f"take both from one DataFrame or repartition {name} to X's "
                         "divisions")


def _check_lengths(name, got, expected):
    if len(got) != len(expected) or not np.array_equal(got, expected):
        if len(got) == len(expected):
            i = int(np.flatnonzero(got != expected)[0])
            where = f"{name}'s partition {i} has {got[i]} rows but X's has {expected[i]}"
        else:
            where = f"{name} has {len(got)} partitions but X has {len(expected)}"
        raise ValueError(f"{where} (rows per partition: X {_short(expected)}, {name} "
                         f"{_short(got)}); rows are paired partition by partition, so "
                         f"{name} needs X's partitions (take both from one dask DataFrame, "
                         "or rechunk to X's chunks)")


def _slices(value, name, starts, lengths, n_rows, n_parts):
    """An in-memory companion cut at X's partition boundaries."""
    if hasattr(value, "iloc"):
        total, take = len(value), lambda a, b: value.iloc[a:b]
    else:
        arr = np.asarray(value)
        if arr.ndim == 0:
            raise ValueError(f"{name} must have one value per row of X; got a scalar")
        total, take = arr.shape[0], lambda a, b: arr[a:b]
    if total != n_rows:
        raise ValueError(f"{name} has {total} rows but X (a dask collection of {n_parts} "
                         f"partitions) has {n_rows}")
    return [take(int(a), int(a + n)) for a, n in zip(starts, lengths)]


def _short(values, limit=8):
    values = list(values)
    text = ", ".join(str(v) for v in values[:limit])
    return f"[{text}{', ...' if len(values) > limit else ''}]"

"""Partition results of a Spark job moved as binary rows and added in a tree reduction.

Every partition yields at most one binary row: its statistics pickled (``NodeStats``
pickle only the leaf-block cells that received rows), or a :class:`PartitionError`
when its rows were refused (a ValueError or TypeError: the driver raises it as such,
with the message, instead of a Java stack trace). ``RDD.treeReduce`` adds them on the
executors, ``depth`` levels deep, and the driver unpickles the total.
"""

from __future__ import annotations

import pickle

STATS_SCHEMA = "stats binary"


class PartitionError:
    """A ValueError or TypeError raised on an executor, carried to the driver."""

    def __init__(self, exc):
        self.kind = "TypeError" if isinstance(exc, TypeError) else "ValueError"
        self.message = str(exc)

    def raise_it(self):
        cls = TypeError if self.kind == "TypeError" else ValueError
        raise cls(self.message)


def pack(value):
    """One Arrow batch of one binary row holding ``value`` pickled."""
    import pyarrow as pa

    return pa.RecordBatch.from_pydict(
        {"stats": pa.array([pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)],
                           type=pa.binary())})


def guarded(partition):
    """Wrap a generator function of Arrow batches so that a ValueError or TypeError of
    the rows is sent to the driver as a :class:`PartitionError`."""
    def run(batches):
        try:
            yield from partition(batches)
        except (ValueError, TypeError) as exc:
            yield pack(PartitionError(exc))
    return run


def _add(a, b):
    """Sum of two pickled partition results (a PartitionError wins)."""
    x, y = pickle.loads(a), pickle.loads(b)
    if isinstance(x, PartitionError):
        return a
    if isinstance(y, PartitionError):
        return b
    try:
        total = x + y
    except (ValueError, TypeError) as exc:  # e.g. rows of one identity in two partitions
        total = PartitionError(exc)
    return pickle.dumps(total, protocol=pickle.HIGHEST_PROTOCOL)


def _payload(row):
    return bytes(row[0])


def tree_reduce(results, depth, what):
    """The sum of the partitions' pickled results (a DataFrame of ``STATS_SCHEMA``),
    added on the executors in a tree of ``depth`` levels; ValueError when no partition
    held a row, a partition's error raised as it was raised there."""
    rdd = results.rdd.map(_payload)
    try:
        total = rdd.treeReduce(_add, depth=depth)
    except ValueError as exc:
        if "empty" not in str(exc).lower():
            raise
        raise ValueError(f"{what}: the Spark DataFrame has 0 rows; at least one row is "
                         "needed") from None
    total = pickle.loads(total)
    if isinstance(total, PartitionError):
        total.raise_it()
    return total

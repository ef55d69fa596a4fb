"""One key's numbers of many LightGBM trees, read at once.

The key's value in every tree is a span of one byte buffer (the model text itself, see
``lgbm_text.scan_model_bytes``, or the values of a dict per tree joined one per line);
``kernels.decimal_text.read_numbers`` reads all spans and checks each tree's count; the
few decimal tokens it leaves (``inf``, ``nan``, more than 19 digits, large exponents)
are converted with Python's ``float``. The numbers are those ``np.array(value.split(),
dtype)`` gives for the tree's value; a wrong count or a token that is not a number
raises the ValueError naming the tree and the key.
"""

from __future__ import annotations

import numpy as np

from ..kernels.decimal_text import STATUS_COUNT, STATUS_OK, read_numbers


def span_numbers(buf, starts, ends, trees, key, counts, dtype):
    """The numbers in ``buf[starts[j]:ends[j]]`` (``buf`` uint8) for every j,
    concatenated in that order; span j is the value of ``key`` in tree ``trees[j]`` (for
    messages) and must hold ``counts[j]`` numbers. ``dtype`` int (int64) or float
    (float64)."""
    integers = dtype is int
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    floats = np.empty(0 if integers else total)
    ints = np.empty(total if integers else 0, dtype=np.int64)
    deferred = np.empty((0 if integers else total, 3), dtype=np.int64)
    status, j, n_deferred, _ = read_numbers(buf, starts, ends, counts, integers, floats,
                                            ints, deferred)
    if status == STATUS_COUNT:
        value = buf[starts[j]:ends[j]].tobytes().decode("utf-8", errors="replace")
        raise ValueError(f"LightGBM tree {trees[j]}: {key} has {len(value.split())} "
                         f"values, expected {int(counts[j])}")
    if status != STATUS_OK:
        _not_a_number(trees[j], key, integers)
    if integers:
        return ints
    if n_deferred:
        ends_out = np.cumsum(counts)
        for at, start, stop in deferred[:n_deferred].tolist():
            try:
                floats[at] = float(buf[start:stop].tobytes())
            except ValueError:
                _not_a_number(trees[int(np.searchsorted(ends_out, at, side="right"))], key,
                              integers)
    return floats


def tree_numbers(blocks, key, trees, counts, dtype):
    """The numbers of ``key`` of the tree blocks ``trees`` (their positions in
    ``blocks``, dicts of key -> value string), concatenated in that order; tree
    ``trees[j]`` must hold ``counts[j]`` of them. ``dtype`` int (int64) or float
    (float64). The blocks must have the key."""
    values = [blocks[t][key] for t in trees]
    data = "\n".join(values).encode("utf-8", errors="replace")
    if len(data) == sum(map(len, values)) + max(len(values) - 1, 0):
        lengths = np.fromiter(map(len, values), np.int64, len(values))
    else:  # non-ASCII values: their lengths in bytes
        lengths = np.fromiter((len(v.encode("utf-8", errors="replace")) for v in values),
                              np.int64, len(values))
    starts = np.zeros(len(values), np.int64)
    np.cumsum(lengths[:-1] + 1, out=starts[1:])
    return span_numbers(np.frombuffer(data, dtype=np.uint8), starts, starts + lengths,
                        trees, key, counts, dtype)


def _not_a_number(t, key, integers):
    raise ValueError(f"LightGBM tree {t}: {key} has a value that is not "
                     f"{'an integer' if integers else 'a number'}")

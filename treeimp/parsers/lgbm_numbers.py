"""One key's numbers of many LightGBM tree blocks, read at once.

The value strings of the key in every tree are joined one per line and read by
``kernels.decimal_text.read_numbers``, which checks each tree's count; the few
decimal tokens it leaves (``inf``, ``nan``, more than 19 digits, large exponents) are
converted with Python's ``float``. The numbers are those ``np.array(text.split(),
dtype)`` gives for the tree's text; a wrong count or a token that is not a number raises
the ValueError naming the tree and the key.
"""

from __future__ import annotations

import numpy as np

from ..kernels.decimal_text import STATUS_COUNT, STATUS_OK, read_numbers


def tree_numbers(blocks, key, trees, counts, dtype):
    """The numbers of ``key`` of the tree blocks ``trees`` (their positions in
    ``blocks``, the dicts of ``lgbm_text.scan_model_text``), concatenated in that order;
    tree ``trees[j]`` must hold ``counts[j]`` of them. ``dtype`` int (int64) or float
    (float64). The blocks must have the key."""
    integers = dtype is int
    text = "\n".join([blocks[t][key] for t in trees])
    data = text.encode("utf-8", errors="replace")
    buf = np.frombuffer(data, dtype=np.uint8)
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    floats = np.empty(0 if integers else total)
    ints = np.empty(total if integers else 0, dtype=np.int64)
    deferred = np.empty((0 if integers else total, 3), dtype=np.int64)
    status, line, n_deferred, _ = read_numbers(buf, counts, integers, floats, ints, deferred)
    if status == STATUS_COUNT:
        t = trees[line]
        raise ValueError(f"LightGBM tree {t}: {key} has {len(blocks[t][key].split())} "
                         f"values, expected {int(counts[line])}")
    if status != STATUS_OK:
        _not_a_number(trees[line], key, integers)
    if integers:
        return ints
    if n_deferred:
        ends = np.cumsum(counts)
        for at, start, stop in deferred[:n_deferred].tolist():
            try:
                floats[at] = float(data[start:stop])
            except ValueError:
                _not_a_number(trees[int(np.searchsorted(ends, at, side="right"))], key,
                              integers)
    return floats


def _not_a_number(t, key, integers):
    raise ValueError(f"LightGBM tree {t}: {key} has a value that is not "
                     f"{'an integer' if integers else 'a number'}")

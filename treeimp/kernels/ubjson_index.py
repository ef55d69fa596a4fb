"""One pass over a UBJSON document that locates every value without decoding it.

:func:`index_values` walks the bytes once and returns a table with one row per value
(containers, strings, numbers, constants): its marker, where its payload starts, its
element count or length, its parent container and, inside an object, where its key
is. Strongly typed numeric arrays (``[$<type>#<count>``, most of an XGBoost model) are
one row each, their payload skipped by its size. The XGBoost parser then gathers the
per-tree arrays of all trees at once from this table (``parsers/xgb_flat.py``) instead
of building a Python object per tree.

The walk accepts only what it can index exactly: any unknown marker, truncation,
count that does not fit, typed container that is not a numeric array, nesting deeper
than ``max_depth`` or trailing bytes stops it with a nonzero status, and the caller
then reads the document with the strict reader (``parsers/ubjson.py``), which reports
the problem.
"""

import numpy as np
from numba import njit

# value markers
_Z, _T, _F, _N = 90, 84, 70, 78
_INT8, _UINT8, _INT16, _INT32, _INT64 = 105, 85, 73, 108, 76  # i U I l L
_FLOAT32, _FLOAT64 = 100, 68  # d D
_STR, _HIGH, _CHAR = 83, 72, 67  # S H C
_ARRAY_OPEN, _ARRAY_CLOSE, _OBJECT_OPEN, _OBJECT_CLOSE = 91, 93, 123, 125
_TYPE, _COUNT = 36, 35  # $ #


@njit(cache=True)
def number_size(m):
    """Payload size in bytes of a numeric marker, 0 for anything else."""
    if m == _INT8 or m == _UINT8:
        return 1
    if m == _INT16:
        return 2
    if m == _INT32 or m == _FLOAT32:
        return 4
    if m == _INT64 or m == _FLOAT64:
        return 8
    return 0


@njit(cache=True)
def _integer(data, pos, m):
    """The big-endian integer of marker ``m`` at ``pos`` (bounds checked by the
    caller)."""
    size = number_size(m)
    v = np.int64(0)
    for k in range(size):
        v = (v << 8) | np.int64(data[pos + k])
    if m == _INT8 and v >= 128:
        v -= 256
    elif m == _INT16 and v >= 32768:
        v -= 65536
    elif m == _INT32 and v >= 2147483648:
        v -= 4294967296
    return v


@njit(cache=True)
def _length(data, pos):
    """(length, position after it) of an integer-marked length at ``pos``; length -1
    when it is not one, is truncated or negative."""
    n = data.shape[0]
    if pos >= n:
        return -1, pos
    m = data[pos]
    if m != _INT8 and m != _UINT8 and m != _INT16 and m != _INT32 and m != _INT64:
        return -1, pos
    size = number_size(m)
    if pos + 1 + size > n:
        return -1, pos
    v = _integer(data, pos + 1, m)
    if v < 0:
        return -1, pos
    return v, pos + 1 + size


@njit(cache=True)
def index_values(data, max_depth):
    """Table of every value of the UBJSON document ``data`` (uint8 array).

    Returns ``(status, marker, elem, start, count, parent, key_start, key_len, end)``:
    ``status`` 0 when the whole document was indexed, else the byte offset + 1 where
    the walk stopped. Per value, in document order (row 0 is the root): ``marker``
    its marker byte; ``elem`` a typed numeric array's element marker (0 otherwise);
    ``start`` its payload offset (a string's first byte, a typed array's first
    element, a number's first byte); ``count`` a string's byte length, a typed
    array's element count or a container's number of members; ``parent`` the row of
    its container (-1 for the root); ``key_start``/``key_len`` its key's bytes inside
    an object (-1 / 0 elsewhere); ``end`` the offset just after the value.
    """
    n = data.shape[0]
    cap = 64 + n // 256  # grown by doubling when a document has more values
    marker = np.zeros(cap, np.uint8)
    elem = np.zeros(cap, np.uint8)
    start = np.zeros(cap, np.int64)
    count = np.zeros(cap, np.int64)
    parent = np.zeros(cap, np.int64)
    key_start = np.zeros(cap, np.int64)
    key_len = np.zeros(cap, np.int64)
    end = np.zeros(cap, np.int64)
    stack_row = np.zeros(max_depth + 1, np.int64)
    stack_left = np.zeros(max_depth + 1, np.int64)  # members still to read, -1: until close
    depth = 0
    rows = 0
    pos = 0
    while True:
        ks = -1
        kl = 0
        if depth > 0:
            c = stack_row[depth - 1]
            is_object = marker[c] == _OBJECT_OPEN
            if stack_left[depth - 1] < 0:
                while pos < n and data[pos] == _N:
                    pos += 1
                if pos >= n:
                    return pos + 1, marker, elem, start, count, parent, key_start, key_len, end
                if data[pos] == (_OBJECT_CLOSE if is_object else _ARRAY_CLOSE):
                    pos += 1
                    end[c] = pos
                    depth -= 1
                    continue
            elif stack_left[depth - 1] == 0:
                end[c] = pos
                depth -= 1
                continue
            else:
                stack_left[depth - 1] -= 1
            if is_object:
                kl, after = _length(data, pos)
                if kl < 0 or after + kl > n:
                    return pos + 1, marker, elem, start, count, parent, key_start, key_len, end
                ks = after
                pos = after + kl
            while pos < n and data[pos] == _N:
                pos += 1
            count[c] += 1
        elif rows > 0:
            break
        else:
            while pos < n and data[pos] == _N:
                pos += 1
        if pos >= n:
            return pos + 1, marker, elem, start, count, parent, key_start, key_len, end
        if rows == cap:  # grow the table
            cap *= 2
            marker = _grow_u8(marker, cap)
            elem = _grow_u8(elem, cap)
            start = _grow_i64(start, cap)
            count = _grow_i64(count, cap)
            parent = _grow_i64(parent, cap)
            key_start = _grow_i64(key_start, cap)
            key_len = _grow_i64(key_len, cap)
            end = _grow_i64(end, cap)
        r = rows
        rows += 1
        m = data[pos]
        marker[r] = m
        elem[r] = 0
        parent[r] = stack_row[depth - 1] if depth > 0 else -1
        key_start[r] = ks
        key_len[r] = kl
        count[r] = 0
        at = pos
        pos += 1
        size = number_size(m)
        if size > 0:
            if pos + size > n:
                return at + 1, marker, elem, start, count, parent, key_start, key_len, end
            start[r] = pos
            pos += size
        elif m == _Z or m == _T or m == _F:
            start[r] = pos
        elif m == _STR or m == _HIGH:
            length, after = _length(data, pos)
            if length < 0 or after + length > n:
                return at + 1, marker, elem, start, count, parent, key_start, key_len, end
            start[r] = after
            count[r] = length
            pos = after + length
        elif m == _CHAR:
            if pos + 1 > n:
                return at + 1, marker, elem, start, count, parent, key_start, key_len, end
            start[r] = pos
            pos += 1
        elif m == _ARRAY_OPEN or m == _OBJECT_OPEN:
            if depth >= max_depth:
                return at + 1, marker, elem, start, count, parent, key_start, key_len, end
            if pos < n and data[pos] == _TYPE:
                t = data[pos + 1] if pos + 1 < n else 0
                size = number_size(t)
                if m != _ARRAY_OPEN or size == 0 or pos + 2 >= n or data[pos + 2] != _COUNT:
                    return at + 1, marker, elem, start, count, parent, key_start, key_len, end
                length, after = _length(data, pos + 3)
                if length < 0 or after + length * size > n:
                    return at + 1, marker, elem, start, count, parent, key_start, key_len, end
                elem[r] = t
                start[r] = after
                count[r] = length
                pos = after + length * size
                end[r] = pos
                continue
            start[r] = at  # a container: its marker's offset
            stack_row[depth] = r
            stack_left[depth] = -1
            if pos < n and data[pos] == _COUNT:
                length, after = _length(data, pos + 1)
                if length < 0 or length > n - after:
                    return at + 1, marker, elem, start, count, parent, key_start, key_len, end
                stack_left[depth] = length
                pos = after
            depth += 1
            continue
        else:
            return at + 1, marker, elem, start, count, parent, key_start, key_len, end
        end[r] = pos
    while pos < n and data[pos] == _N:
        pos += 1
    status = 0 if pos == n else pos + 1
    return (status, marker[:rows], elem[:rows], start[:rows], count[:rows], parent[:rows],
            key_start[:rows], key_len[:rows], end[:rows])


@njit(cache=True)
def _grow_u8(a, cap):
    out = np.zeros(cap, np.uint8)
    out[:a.shape[0]] = a
    return out


@njit(cache=True)
def _grow_i64(a, cap):
    out = np.zeros(cap, np.int64)
    out[:a.shape[0]] = a
    return out


@njit(cache=True)
def gather_bytes(data, start, count, itemsize):
    """The typed arrays whose ``count[i]`` elements of ``itemsize`` bytes start at
    ``start[i]``, their bytes concatenated as they are (big-endian)."""
    total = 0
    for i in range(start.shape[0]):
        total += count[i]
    out = np.empty(total * itemsize, np.uint8)
    o = 0
    for i in range(start.shape[0]):
        nbytes = count[i] * itemsize
        out[o:o + nbytes] = data[start[i]:start[i] + nbytes]
        o += nbytes
    return out


@njit(cache=True)
def key_ids(data, rows, key_start, key_len, keys, key_offsets):
    """Per row of ``rows``: the index of its key among ``keys`` (the wanted keys'
    bytes concatenated, key j being ``keys[key_offsets[j]:key_offsets[j + 1]]``), -1
    when it is none of them."""
    out = np.full(rows.shape[0], -1, np.int64)
    for i in range(rows.shape[0]):
        r = rows[i]
        n = key_len[r]
        for j in range(key_offsets.shape[0] - 1):
            lo = key_offsets[j]
            if key_offsets[j + 1] - lo != n:
                continue
            same = True
            for b in range(n):
                if data[key_start[r] + b] != keys[lo + b]:
                    same = False
                    break
            if same:
                out[i] = j
                break
    return out

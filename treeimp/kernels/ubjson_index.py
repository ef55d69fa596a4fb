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
the problem. A length or count read from the document is compared with the bytes
left (``length > n - after``), never added to an offset first: ``after + length``
wraps around in int64 for a length near 2**63 and would pass the check.
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
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
    cap = 64 + data.shape[0] // 256
    while True:
        got = _walk(data, max_depth, cap)
        if got[0] != -1:
            return got
        cap *= 4  # more values than the table's rows (at most one per byte)


@njit(cache=True)
def _walk(data, max_depth, cap):
    """:func:`index_values` into a table of ``cap`` rows; status -1 when the document
    has more values than that."""
    n = data.shape[0]
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
                if kl < 0 or kl > n - after:
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
        if rows == cap:
            return -1, marker, elem, start, count, parent, key_start, key_len, end
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
            if length < 0 or length > n - after:
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
                if length < 0 or length > (n - after) // size:
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
def gather_numbers(data, start, count, itemsize):
    """The typed arrays at ``start[t, j]`` (``count[t, j]`` elements of ``itemsize[j]``
    bytes: 1, 2, 4 or 8) gathered field by field, field j's arrays of every t in turn,
    into one array per element size whose elements hold the bytes as they are
    (big-endian): the caller swaps them to the host's order.

    Returns ``(u8, u16, u32, u64, at)``: field j's elements are
    ``u<8 * itemsize[j]>[at[j]:at[j] + count[:, j].sum()]``. One call for all per-node
    fields of all trees."""
    n_rows, n_fields = start.shape
    totals = np.zeros(9, np.int64)
    at = np.zeros(n_fields, np.int64)
    for j in range(n_fields):
        at[j] = totals[itemsize[j]]
        for t in range(n_rows):
            totals[itemsize[j]] += count[t, j]
    u8 = np.empty(totals[1], np.uint8)
    u16 = np.empty(totals[2], np.uint16)
    u32 = np.empty(totals[4], np.uint32)
    u64 = np.empty(totals[8], np.uint64)
    b16, b32, b64 = u16.view(np.uint8), u32.view(np.uint8), u64.view(np.uint8)
    for j in range(n_fields):
        k = itemsize[j]
        out = u8 if k == 1 else b16 if k == 2 else b32 if k == 4 else b64
        o = at[j] * k
        for t in range(n_rows):
            nbytes = count[t, j] * k
            out[o:o + nbytes] = data[start[t, j]:start[t, j] + nbytes]
            o += nbytes
    return u8, u16, u32, u64, at


@njit(cache=True)
def integers_at(data, marker, start, rows):
    """The integers (markers i U I l L) at ``rows`` of the table as int64; ok False
    when a row holds anything else."""
    out = np.empty(rows.shape[0], np.int64)
    for i in range(rows.shape[0]):
        m = marker[rows[i]]
        if m != _INT8 and m != _UINT8 and m != _INT16 and m != _INT32 and m != _INT64:
            return False, out
        out[i] = _integer(data, start[rows[i]], m)
    return True, out


@njit(cache=True, inline="always")
def _same_bytes(data, start, keys, lo, n):
    """Whether data[start:start + n] equals keys[lo:lo + n]."""
    for b in range(n):
        if data[start + b] != keys[lo + b]:
            return False
    return True


@njit(cache=True)
def member_rows(data, parent, key_start, key_len, containers, keys, key_offsets):
    """Per object of ``containers`` (rows, ascending) and per wanted key (``keys`` the
    keys' bytes concatenated, key j being ``keys[key_offsets[j]:key_offsets[j + 1]]``):
    the row of its member with that key, -1 when it has none. ``(ok, rows)``; ok False
    when an object holds a wanted key twice."""
    n_keys = key_offsets.shape[0] - 1
    found = np.full((containers.shape[0], n_keys), -1, np.int64)
    if containers.shape[0] == 0:
        return True, found
    # the wanted keys by length: a member is compared only with keys of its key's length
    longest = 0
    for j in range(n_keys):
        longest = max(longest, key_offsets[j + 1] - key_offsets[j])
    by_len = np.zeros(longest + 2, np.int64)  # keys of length L: order[by_len[L]:by_len[L+1]]
    for j in range(n_keys):
        by_len[key_offsets[j + 1] - key_offsets[j] + 1] += 1
    for L in range(longest + 1):
        by_len[L + 1] += by_len[L]
    order = np.empty(n_keys, np.int64)
    filled = by_len.copy()
    for j in range(n_keys):
        L = key_offsets[j + 1] - key_offsets[j]
        order[filled[L]] = j
        filled[L] += 1
    slot = np.full(parent.shape[0], -1, np.int64)
    for i in range(containers.shape[0]):
        slot[containers[i]] = i
    for r in range(containers[0] + 1, parent.shape[0]):
        p = parent[r]
        if p < 0 or slot[p] < 0:
            continue
        n = key_len[r]
        if n > longest:
            continue
        for q in range(by_len[n], by_len[n + 1]):
            j = order[q]
            if _same_bytes(data, key_start[r], keys, key_offsets[j], n):
                if found[slot[p], j] >= 0:
                    return False, found
                found[slot[p], j] = r
                break
    return True, found


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
            if key_offsets[j + 1] - lo == n and _same_bytes(data, key_start[r], keys, lo, n):
                out[i] = j
                break
    return out

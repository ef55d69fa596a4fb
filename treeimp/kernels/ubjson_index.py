"""One pass over a UBJSON document that locates every value without decoding it.

This walk is treeimp's one reader of the UBJSON grammar (draft 12, as XGBoost writes
its ``.ubj`` models): :func:`index_document` returns a table with one row per value
(containers, strings, numbers, constants): its marker, where its payload starts, its
element count or length, its parent container, inside an object where its key is, and
the row after its last descendant. Strongly typed numeric arrays (``[$<type>#<count>``,
most of an XGBoost model) are one row each, their payload skipped by its size; the
elements of other typed containers (``[$S#..``, ``{$U#..``, ...) carry no marker of
their own and are rows with their container's type as marker. ``parsers/ubjson.py``
builds Python values from the table (``read_ubjson``); the XGBoost parser gathers the
per-tree arrays of all trees at once from it (``parsers/xgb_flat.py``).

The walk is strict: an unknown marker, truncation, a length or count that is not a
non-negative integer or does not fit in the bytes left, a typed container without a
count or with an invalid type, nesting deeper than ``max_depth`` and trailing bytes
stop it with an error code, the byte offset and the numbers that ``parsers/ubjson.py``
puts into its message (``ERROR_*`` below). A count is checked against the bytes left
before anything is allocated, so corrupt input fails quickly. A length or count read
from the document is compared with the bytes left (``length > n - after``), never added
to an offset first: ``after + length`` wraps around in int64 for a length near 2**63
and would pass the check. String contents (UTF-8), char values and high-precision
numbers are checked where they are decoded.
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

# error codes of the walk (err[0]); err[1] is the byte offset, err[2:5] as listed
# (err[5:7]: the key being read)
ERROR_NONE = 0
ERROR_TRUNCATED = 1  # bytes needed, bytes left
ERROR_MARKER = 2  # the unknown or unexpected marker
ERROR_NOT_INTEGER = 3  # the marker found, WHAT_*: a length or count must be an integer
ERROR_NEGATIVE = 4  # the value, WHAT_*
ERROR_TOO_DEEP = 5  # the nesting limit
ERROR_TYPE_MARKER = 6  # the invalid type marker after '$'
ERROR_NO_COUNT = 7  # a typed container ('$') without a count ('#')
ERROR_COUNT_TOO_LARGE = 8  # the count, bytes per element at least, bytes left
ERROR_TRAILING = 9  # bytes after the document
ERROR_EMPTY_ELEMENTS = 10  # the elements of no bytes in all so far, the document's bytes
WHAT_STRING_LENGTH = 0
WHAT_CONTAINER_COUNT = 1


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
def _fail(err, code, offset, a, b, c):
    """Record error ``code`` at byte ``offset`` with its numbers in ``err``."""
    err[0] = code
    err[1] = offset
    err[2] = a
    err[3] = b
    err[4] = c


# a call, not inlined: its three inlined copies in _walk cost more to compile than one
# compilation of its own; ``what`` is passed as an int64 (np.int64(WHAT_*)), as a
# literal constant it would compile once per value
@njit(cache=True)
def _length(data, pos, what, err):
    """(length, position after it) of an integer-marked length or count at ``pos``;
    length -1 (and ``err`` filled, ``what`` naming it) when there is none, it is
    truncated or negative."""
    n = data.shape[0]
    if pos >= n:
        _fail(err, ERROR_TRUNCATED, pos, 1, 0, 0)
        return -1, pos
    m = data[pos]
    if m != _INT8 and m != _UINT8 and m != _INT16 and m != _INT32 and m != _INT64:
        _fail(err, ERROR_NOT_INTEGER, pos, m, what, 0)
        return -1, pos
    size = number_size(m)
    if pos + 1 + size > n:
        _fail(err, ERROR_TRUNCATED, pos + 1, size, n - pos - 1, 0)
        return -1, pos
    v = _integer(data, pos + 1, m)
    if v < 0:
        _fail(err, ERROR_NEGATIVE, pos, v, what, 0)
        return -1, pos
    return v, pos + 1 + size


@njit(cache=True, inline="always")
def _skip_noop(data, pos):
    """The first position from ``pos`` on that is not a no-op marker 'N'."""
    while pos < data.shape[0] and data[pos] == _N:
        pos += 1
    return pos


@njit(cache=True, inline="always")
def _container_type(t):
    """Whether ``t`` may follow '$' (the type of a typed container's elements)."""
    return (number_size(t) > 0 or t == _Z or t == _T or t == _F or t == _STR or t == _CHAR
            or t == _HIGH or t == _ARRAY_OPEN or t == _OBJECT_OPEN)


def index_document(data, max_depth):
    """Table of every value of the UBJSON document ``data`` (uint8 array).

    Returns ``(err, marker, elem, start, count, parent, key_start, key_len, end,
    row_end)``: ``err`` (int64, 7) the error code (``ERROR_NONE``: the whole document
    was indexed), the byte offset it refers to, up to three numbers for its message and
    the start and length of the key read last (-1, 0: none).
    Per value, in document order (row 0 is the root): ``marker`` its marker byte (for an
    element of a typed container: the container's type); ``elem`` a typed numeric
    array's element marker (0 otherwise); ``start`` its payload offset (a string's
    first byte, a typed array's first element, a number's first byte, a container's
    marker); ``count`` a string's byte length, a typed array's element count or a
    container's number of members; ``parent`` the row of its container (-1 for the
    root); ``key_start``/``key_len`` its key's bytes inside an object (-1 / 0
    elsewhere); ``end`` the offset just after the value; ``row_end`` the row after its
    last descendant (its own row + 1 for anything but a container). After an error the
    table holds the values before the problem (their ``end`` and ``row_end`` unset
    where a container is still open), so that the caller can report a problem in their
    strings first, as it comes first in the document. Plain Python around the compiled
    walk (one kernel less to compile on a first call).
    """
    # one row per 32 bytes: XGBoost's models have a value per 33 (stumps) to 160-200
    # (depth 6) bytes; one row per 256 bytes made all of them walk twice
    cap = 64 + data.shape[0] // 32
    while True:
        got = _walk(data, max_depth, cap)
        if got[0][0] != -1:
            return got
        cap *= 4  # more values than the table's rows (at most one per byte)


def index_values(data, max_depth):
    """:func:`index_document` without the error details and ``row_end``: ``(status,
    marker, elem, start, count, parent, key_start, key_len, end)``, ``status`` 0 when
    the whole document was indexed, else the byte offset of the problem + 1."""
    err, marker, elem, start, count, parent, key_start, key_len, end, _ = index_document(
        data, max_depth)
    status = 0 if err[0] == ERROR_NONE else int(err[1]) + 1
    return status, marker, elem, start, count, parent, key_start, key_len, end


@njit(cache=True)
def _walk(data, max_depth, cap):
    """:func:`index_document` into a table of ``cap`` rows; error code -1 when the
    document has more values than that. The table is allocated uninitialised (every
    field of a row is set when the row is read; zeroing a large table that the walk
    fills only in part cost more than the walk)."""
    n = data.shape[0]
    # np.empty and zeroing loops, not np.zeros / np.full: each numba library function
    # brings one more compilation for every argument type and caller
    err = np.empty(7, np.int64)
    for i in range(7):
        err[i] = 0
    marker = np.empty(cap, np.uint8)
    elem = np.empty(cap, np.uint8)
    start = np.empty(cap, np.int64)
    count = np.empty(cap, np.int64)
    parent = np.empty(cap, np.int64)
    key_start = np.empty(cap, np.int64)
    key_len = np.empty(cap, np.int64)
    end = np.empty(cap, np.int64)
    row_end = np.empty(cap, np.int64)
    stack_row = np.empty(max_depth + 1, np.int64)
    stack_left = np.empty(max_depth + 1, np.int64)  # members still to read, -1: until close
    stack_type = np.empty(max_depth + 1, np.uint8)  # the members' type, 0: each has a marker
    for i in range(max_depth + 1):
        stack_row[i] = 0
        stack_left[i] = 0
        stack_type[i] = 0
    depth = 0
    rows = 0
    complete = 0  # rows whose fields are all set (an error may stop the last one early)
    # elements that take no bytes (typed arrays of Z, T or F): at most one per byte of
    # the document in all, else a few bytes of headers could ask for any number of rows
    empty_elements = 0
    pos = 0
    string_length = np.int64(WHAT_STRING_LENGTH)
    container_count = np.int64(WHAT_CONTAINER_COUNT)
    while True:
        complete = rows
        ks = -1
        kl = 0
        typ = 0
        if depth > 0:
            c = stack_row[depth - 1]
            is_object = marker[c] == _OBJECT_OPEN
            typ = stack_type[depth - 1]
            if stack_left[depth - 1] < 0:  # uncounted (never typed)
                pos = _skip_noop(data, pos)
                if pos >= n:
                    _fail(err, ERROR_TRUNCATED, pos, 1, 0, 0)
                    break
                if data[pos] == (_OBJECT_CLOSE if is_object else _ARRAY_CLOSE):
                    pos += 1
                    end[c] = pos
                    row_end[c] = rows
                    depth -= 1
                    continue
            elif stack_left[depth - 1] == 0:
                end[c] = pos
                row_end[c] = rows
                depth -= 1
                continue
            else:
                stack_left[depth - 1] -= 1
            if is_object:
                kl, after = _length(data, pos, string_length, err)
                if kl < 0:
                    break
                if kl > n - after:
                    _fail(err, ERROR_TRUNCATED, after, kl, n - after, 0)
                    break
                ks = after
                pos = after + kl
            if typ == 0:
                pos = _skip_noop(data, pos)
            count[c] += 1
        elif rows > 0:
            break
        at = pos
        if typ == 0:
            if pos >= n:
                _fail(err, ERROR_TRUNCATED, pos, 1, 0, 0)
                break
            m = data[pos]
            pos += 1
        else:
            m = typ
        if rows == cap:
            err[0] = -1
            break
        r = rows
        rows += 1
        marker[r] = m
        elem[r] = 0
        parent[r] = stack_row[depth - 1] if depth > 0 else -1
        key_start[r] = ks
        key_len[r] = kl
        count[r] = 0
        row_end[r] = rows
        size = number_size(m)
        if size > 0:
            if pos + size > n:
                _fail(err, ERROR_TRUNCATED, pos, size, n - pos, 0)
                break
            start[r] = pos
            pos += size
        elif m == _Z or m == _T or m == _F:
            start[r] = pos
        elif m == _STR or m == _HIGH:
            length, after = _length(data, pos, string_length, err)
            if length < 0:
                break
            if length > n - after:
                _fail(err, ERROR_TRUNCATED, after, length, n - after, 0)
                break
            start[r] = after
            count[r] = length
            pos = after + length
        elif m == _CHAR:
            if pos + 1 > n:
                _fail(err, ERROR_TRUNCATED, pos, 1, 0, 0)
                break
            start[r] = pos
            pos += 1
        elif m == _ARRAY_OPEN or m == _OBJECT_OPEN:
            if depth >= max_depth:
                _fail(err, ERROR_TOO_DEEP, pos, max_depth, 0, 0)
                break
            t = 0
            if pos < n and data[pos] == _TYPE:
                if pos + 1 >= n:
                    _fail(err, ERROR_TRUNCATED, pos + 1, 1, 0, 0)
                    break
                t = data[pos + 1]
                if not _container_type(t):
                    _fail(err, ERROR_TYPE_MARKER, pos + 1, t, 0, 0)
                    break
                if pos + 2 >= n or data[pos + 2] != _COUNT:
                    _fail(err, ERROR_NO_COUNT, pos + 2, 0, 0, 0)
                    break
                pos += 2
            left_members = -1
            if pos < n and data[pos] == _COUNT:
                length, after = _length(data, pos + 1, container_count, err)
                if length < 0:
                    break
                size = max(number_size(t), 1)  # every element needs at least one byte
                if length > (n - after) // size:
                    _fail(err, ERROR_COUNT_TOO_LARGE, after, length, size, n - after)
                    break
                if m == _ARRAY_OPEN and (t == _Z or t == _T or t == _F):
                    empty_elements += length
                    if empty_elements > n:
                        _fail(err, ERROR_EMPTY_ELEMENTS, after, empty_elements, n, 0)
                        break
                if m == _ARRAY_OPEN and number_size(t) > 0:  # a typed numeric array
                    elem[r] = t
                    start[r] = after
                    count[r] = length
                    pos = after + length * size
                    end[r] = pos
                    continue
                left_members = length
                pos = after
            start[r] = at
            stack_row[depth] = r
            stack_left[depth] = left_members
            stack_type[depth] = t
            depth += 1
            continue
        else:
            _fail(err, ERROR_MARKER, at, m, 0, 0)
            break
        end[r] = pos
    if err[0] == ERROR_NONE:
        pos = _skip_noop(data, pos)
        if pos != n:
            _fail(err, ERROR_TRAILING, pos, n - pos, 0, 0)
    else:
        rows = complete
        err[5] = ks  # the key of the member being read, if any (-1)
        err[6] = kl
    return (err, marker[:rows], elem[:rows], start[:rows], count[:rows], parent[:rows],
            key_start[:rows], key_len[:rows], end[:rows], row_end[:rows])


def gather_numbers(data, start, count, itemsize):
    """The typed arrays at ``start[t, j]`` (``count[t, j]`` big-endian elements of
    ``itemsize[j]`` bytes: 1, 2, 4 or 8) gathered field by field, field j's arrays of
    every t in turn, into one array of unsigned integers per element size, each element
    read from its bytes most significant first (so in the host's order on any host):
    the caller views them as the field's type (views in numba would compile one more
    function per size).

    Returns ``(u1, u2, u4, u8, at)``: field j's elements are elements
    ``at[j]:at[j] + count[:, j].sum()`` of ``u<itemsize[j]>`` (uint8, uint16, uint32,
    uint64). One call for all per-node fields of all trees; the outputs are allocated
    here (plain numpy) and filled by one compiled call (:func:`_gather_words`)."""
    itemsize = np.asarray(itemsize, np.int64)
    per_field = np.asarray(count, np.int64).sum(axis=0)
    at = np.zeros(itemsize.shape[0], np.int64)
    words = []
    for size, dtype in ((1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64)):
        fields = np.flatnonzero(itemsize == size)
        ends = np.cumsum(per_field[fields])
        at[fields] = ends - per_field[fields]  # fields of one size in turn
        words.append(np.empty(int(ends[-1]) if ends.size else 0, dtype))
    _gather_words(data, start, count, itemsize, at, *words)
    return (*words, at)


@njit(cache=True)
def _gather_words(data, start, count, itemsize, at, u1, u2, u4, u8):
    """:func:`gather_numbers` into the given arrays (field j from element ``at[j]``)."""
    n_rows, n_fields = start.shape
    for j in range(n_fields):
        k = itemsize[j]
        o = at[j]
        for t in range(n_rows):
            # element loops, not slice assignments: numba's slice assignment brings its
            # shape-mismatch error messages (string formatting) to compile. The byte
            # positions unsigned (the index found them in the document): numba then
            # adds no negative-index branch to each byte's read, and LLVM may combine
            # the reads of a word's bytes
            s = np.uint64(start[t, j])
            n = count[t, j]
            if k == 1:
                for q in range(n):
                    u1[o + q] = data[s + np.uint64(q)]
            elif k == 2:
                for q in range(n):
                    u2[o + q] = _word(data, s + np.uint64(2 * q), 2)
            elif k == 4:
                for q in range(n):
                    u4[o + q] = _word(data, s + np.uint64(4 * q), 4)
            else:
                for q in range(n):
                    u8[o + q] = _word(data, s + np.uint64(8 * q), 8)
            o += n


@njit(cache=True, inline="always")
def _word(data, s, k):
    """The unsigned integer of the ``k`` bytes at ``s``, most significant first."""
    v = np.uint64(0)
    for q in range(k):
        v = (v << np.uint64(8)) | np.uint64(data[s + np.uint64(q)])
    return v


# integer markers and their (size, numpy big-endian type) for integers_at
_INTEGER_TYPES = ((_INT8, ">i1"), (_UINT8, ">u1"), (_INT16, ">i2"), (_INT32, ">i4"),
                  (_INT64, ">i8"))


def integers_at(data, marker, start, rows):
    """The integers (markers i U I l L) at ``rows`` of the table as int64; ok False
    when a row holds anything else. Plain numpy (the bytes gathered per integer size):
    nothing to compile on a first call."""
    rows = np.asarray(rows, np.int64)
    m = marker[rows]
    out = np.empty(rows.shape[0], np.int64)
    done = np.zeros(rows.shape[0], np.bool_)
    present = np.bincount(m, minlength=256)  # most lists use one or two markers
    for code, kind in _INTEGER_TYPES:
        if present[code] == 0:
            continue
        at = np.flatnonzero(m == code)
        t = np.dtype(kind)
        pos = start[rows[at]][:, None] + np.arange(t.itemsize)
        out[at] = np.ascontiguousarray(data[pos]).view(t)[:, 0]
        done[at] = True
    return bool(np.all(done)), out


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
    # np.empty and filling loops, not np.full: see _walk
    found = np.empty((containers.shape[0], n_keys), np.int64)
    for i in range(containers.shape[0]):
        for j in range(n_keys):
            found[i, j] = -1
    if containers.shape[0] == 0:
        return True, found
    # the wanted keys by length: a member is compared only with keys of its key's length
    longest = 0
    for j in range(n_keys):
        longest = max(longest, key_offsets[j + 1] - key_offsets[j])
    by_len = np.empty(longest + 2, np.int64)  # keys of length L: order[by_len[L]:by_len[L+1]]
    for L in range(longest + 2):
        by_len[L] = 0
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
    slot = np.empty(parent.shape[0], np.int64)
    for r in range(parent.shape[0]):
        slot[r] = -1
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


def key_ids(data, rows, key_start, key_len, keys, key_offsets):
    """Per row of ``rows``: the index of its key among ``keys`` (the wanted keys'
    bytes concatenated, key j being ``keys[key_offsets[j]:key_offsets[j + 1]]``), -1
    when it is none of them (the first matching key). Plain numpy (each wanted key's
    bytes compared with those of the rows of its length at once): nothing to compile
    on a first call."""
    rows = np.asarray(rows, np.int64)
    out = np.full(rows.shape[0], -1, np.int64)
    for j in range(key_offsets.shape[0] - 2, -1, -1):  # the first match wins
        lo, hi = key_offsets[j], key_offsets[j + 1]
        at = np.flatnonzero(key_len[rows] == hi - lo)
        if at.size == 0:
            continue
        pos = key_start[rows[at]][:, None] + np.arange(hi - lo)
        same = np.all(data[pos] == keys[lo:hi], axis=1)
        out[at[same]] = j
    return out

"""A small, strict reader for Universal Binary JSON (UBJSON), as XGBoost writes it.

XGBoost's ``.ubj`` model files (``Booster.save_model("m.ubj")``, ``save_raw("ubj")``)
hold the same document as its ``.json`` files, in UBJSON draft 12: big-endian numbers,
length-prefixed strings, and strongly typed, counted arrays (``[$d#L<n>`` followed by
``n`` float32 values) for the large per-node arrays. This module reads that format
without xgboost, in two steps: one numba pass (``kernels/ubjson_index.py``) walks the
grammar and tables every value's place (:func:`index_ubjson`), then :func:`decode`
builds the Python values from that table. The XGBoost parser uses the same table to
gather all trees' arrays at once (``xgb_flat.py``) and decodes only the rest.

Strict means: unknown markers, truncated input, counts larger than the bytes that are
left, invalid UTF-8, non-string object keys and trailing bytes all raise ``ValueError``
naming the byte offset. The work is linear in the input size, a count is checked
against the remaining bytes before anything is allocated, and nesting depth is bounded,
so corrupt input fails quickly.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from ..kernels import ubjson_index as walk

MAX_DEPTH = 256
SKIPPED = object()  # what decode returns for a container it was told to skip

# marker (a byte value) -> bound unpack_from of its big-endian struct format
_UNPACK = {ord(m): struct.Struct(fmt).unpack_from
           for m, fmt in (("i", ">b"), ("U", ">B"), ("I", ">h"), ("l", ">i"), ("L", ">q"),
                          ("d", ">f"), ("D", ">d"))}
# typed-array element marker (a byte value) -> (big-endian dtype, native dtype)
_ARRAY_DTYPES = {ord(m): (np.dtype(dt), np.dtype(dt).newbyteorder("="))
                 for m, dt in (("i", ">i1"), ("U", ">u1"), ("I", ">i2"), ("l", ">i4"),
                               ("L", ">i8"), ("d", ">f4"), ("D", ">f8"))}
_CONSTANTS = {ord("Z"): None, ord("T"): True, ord("F"): False}
_ARRAY, _OBJECT, _STRING, _CHAR, _HIGH = (ord(m) for m in "[{SCH")
_WHAT = {walk.WHAT_STRING_LENGTH: "string length", walk.WHAT_CONTAINER_COUNT: "container count"}


@dataclass
class UbjsonIndex:
    """A document's bytes and the value table of ``kernels.ubjson_index.index_document``
    (one row per value; field meanings there)."""

    data: bytes  # or a bytearray
    buf: np.ndarray  # the same bytes as uint8
    err: np.ndarray
    marker: np.ndarray
    elem: np.ndarray
    start: np.ndarray
    count: np.ndarray
    parent: np.ndarray
    key_start: np.ndarray
    key_len: np.ndarray
    end: np.ndarray
    row_end: np.ndarray

    @property
    def ok(self) -> bool:
        """Whether the whole document was indexed (else :meth:`error` says why)."""
        return int(self.err[0]) == walk.ERROR_NONE

    def error(self) -> ValueError:
        """The ValueError describing the document's first problem: one in the strings
        before the place where the walk stopped (their contents are checked where they
        are decoded), else why the walk stopped."""
        try:
            _check_strings(self)
        except ValueError as exc:
            return exc
        code, at, a, b, c = (int(v) for v in self.err[:5])
        if code == walk.ERROR_TRUNCATED:
            what = f"truncated input: need {a} bytes, {b} left"
        elif code == walk.ERROR_MARKER:
            what = f"unknown or unexpected marker {bytes([a])!r}"
        elif code == walk.ERROR_NOT_INTEGER:
            what = f"{_WHAT[b]} must be an integer, found marker {bytes([a])!r}"
        elif code == walk.ERROR_NEGATIVE:
            what = f"negative {_WHAT[b]} {a}"
        elif code == walk.ERROR_TOO_DEEP:
            what = f"containers nested deeper than {a}"
        elif code == walk.ERROR_TYPE_MARKER:
            what = f"invalid container type marker {bytes([a])!r}"
        elif code == walk.ERROR_NO_COUNT:
            what = "a typed container ('$') must give a count ('#')"
        elif code == walk.ERROR_COUNT_TOO_LARGE:
            what = (f"container count {a} needs at least {a * b} bytes but only {c} are "
                    "left")
        elif code == walk.ERROR_EMPTY_ELEMENTS:
            what = (f"typed arrays of null / true / false hold {a} elements in all, more "
                    f"than the document's {b} bytes")
        elif code == walk.ERROR_TRAILING:
            return ValueError(f"UBJSON: {a} unexpected bytes after the document at offset "
                              f"{at}")
        else:
            what = f"unreadable document (walk status {code})"
        return _error(what, at, len(self.buf))


def _error(what, at, size):
    return ValueError(f"UBJSON: {what} at offset {at} (document is {size} bytes)")


def index_ubjson(data) -> UbjsonIndex:
    """The value table of one UBJSON document (``data``: bytes, a bytearray or a
    memoryview of bytes, read in place); check :attr:`UbjsonIndex.ok` before using it."""
    buf = np.frombuffer(data, np.uint8)
    return UbjsonIndex(data, buf, *walk.index_document(buf, MAX_DEPTH))


def read_ubjson(data: bytes) -> object:
    """Decode one UBJSON document.

    Parameters
    ----------
    data : bytes-like
        The whole document (a single top-level value, no trailing bytes).

    Returns
    -------
    object
        ``dict`` / ``list`` / ``str`` / ``int`` / ``float`` / ``bool`` / ``None``.
        Strongly typed numeric arrays (``[$<type>#<count>``) are returned as 1-D numpy
        arrays in native byte order (int8 ... int64, float32, float64), which is what
        keeps large XGBoost models fast to read.

    Raises
    ------
    ValueError
        On any malformed, truncated or unsupported input.

    Examples
    --------
    >>> read_ubjson(b"{U\\x01aSU\\x02hi}")
    {'a': 'hi'}
    >>> read_ubjson(b"[$U#U\\x03\\x01\\x02\\x03")
    array([1, 2, 3], dtype=uint8)
    """
    if isinstance(data, str):
        raise TypeError("read_ubjson needs bytes, got str")
    index = index_ubjson(bytes(data))
    if not index.ok:
        raise index.error()
    return decode(index)


def decode(index: UbjsonIndex, skip=()) -> object:
    """The Python value of an indexed document (``index.ok``); the containers at the
    rows ``skip`` are not decoded, :data:`SKIPPED` stands in their place.

    Raises ValueError for invalid UTF-8 in a string or key, a char that is not ASCII and
    a high-precision number that is not one or lies outside the int64 range.
    """
    data, size = index.data, len(index.buf)
    rows = np.arange(index.marker.size)
    if len(skip):
        keep = np.ones(rows.size, np.bool_)
        for r in skip:
            keep[r + 1:index.row_end[r]] = False  # the skipped container's descendants
        rows = rows[keep]
    skip = set(skip)
    # one Python list per field, of the rows to decode only
    marker, elem, start, count, parent, key_start, key_len = (
        a[rows].tolist() for a in (index.marker, index.elem, index.start, index.count,
                                   index.parent, index.key_start, index.key_len))
    built = [None] * index.marker.size  # the Python container of each container row
    root = None
    for i, r in enumerate(rows.tolist()):
        m = marker[i]
        if key_start[i] >= 0:  # a member of an object: its key comes first
            key = _text(data, key_start[i], key_len[i], size)
        if r in skip:
            value = SKIPPED
        elif elem[i]:
            big, native = _ARRAY_DTYPES[elem[i]]
            value = np.frombuffer(data, dtype=big, count=count[i], offset=start[i]).astype(
                native)
        elif m == _OBJECT:
            value = built[r] = {}
        elif m == _ARRAY:
            value = built[r] = []
        elif m in _UNPACK:
            value = _UNPACK[m](data, start[i])[0]
        elif m == _STRING:
            value = _text(data, start[i], count[i], size)
        elif m in _CONSTANTS:
            value = _CONSTANTS[m]
        elif m == _CHAR:
            c = data[start[i]]
            if c > 127:
                raise _error(f"char value {c} is not ASCII", start[i], size)
            value = chr(c)
        else:  # _HIGH
            value = _high_precision(_text(data, start[i], count[i], size), start[i], size)
        p = parent[i]
        if p < 0:
            root = value
        elif key_start[i] >= 0:
            built[p][key] = value
        else:
            built[p].append(value)
    return root


def _check_strings(index):
    """Raise the ValueError that :func:`decode` raises first on the rows of ``index``
    (keys, strings, chars, high-precision numbers), if any, without building values."""
    data, size = index.data, len(index.buf)
    for m, s, n, ks, kl in zip(index.marker.tolist(), index.start.tolist(),
                               index.count.tolist(), index.key_start.tolist(),
                               index.key_len.tolist()):
        if ks >= 0:
            _text(data, ks, kl, size)
        if m == _STRING:
            _text(data, s, n, size)
        elif m == _HIGH:
            _high_precision(_text(data, s, n, size), s, size)
        elif m == _CHAR and data[s] > 127:
            raise _error(f"char value {data[s]} is not ASCII", s, size)
    ks, kl = int(index.err[5]), int(index.err[6])
    if ks >= 0:  # the key of the member whose value stopped the walk
        _text(data, ks, kl, size)


def _text(data, at, n, size):
    try:
        return str(data[at:at + n], "utf-8")  # bytes, a bytearray or a memoryview
    except UnicodeDecodeError as exc:
        raise _error(f"invalid UTF-8 in a string ({exc.reason})", at, size) from None


def _high_precision(text, at, size):
    try:
        value = int(text)
    except ValueError:
        pass
    else:
        if not -(2**63) <= value < 2**63:
            raise _error(f"high-precision integer of {len(text)} digits is outside the "
                         "int64 range", at, size)
        return value
    try:
        return float(text)
    except ValueError:
        raise _error(f"high-precision number {text[:40]!r} is not a number", at,
                     size) from None

"""A small, strict reader for Universal Binary JSON (UBJSON), as XGBoost writes it.

XGBoost's ``.ubj`` model files (``Booster.save_model("m.ubj")``, ``save_raw("ubj")``)
hold the same document as its ``.json`` files, in UBJSON draft 12: big-endian numbers,
length-prefixed strings, and strongly typed, counted arrays (``[$d#L<n>`` followed by
``n`` float32 values) for the large per-node arrays. This module reads that format
without xgboost.

Strict means: unknown markers, truncated input, counts larger than the bytes that are
left, invalid UTF-8, non-string object keys and trailing bytes all raise ``ValueError``
naming the byte offset. The work is linear in the input size, a count is checked
against the remaining bytes before anything is allocated, and nesting depth is bounded,
so corrupt input fails quickly.
"""

from __future__ import annotations

import struct

import numpy as np

MAX_DEPTH = 256
SKIPPED = object()  # what read_ubjson returns for a container it was told to skip

# marker -> (struct format, size, numpy big-endian dtype)
_NUMBERS = {
    b"i": (">b", 1, ">i1"),
    b"U": (">B", 1, ">u1"),
    b"I": (">h", 2, ">i2"),
    b"l": (">i", 4, ">i4"),
    b"L": (">q", 8, ">i8"),
    b"d": (">f", 4, ">f4"),
    b"D": (">d", 8, ">f8"),
}
_INTEGERS = (b"i", b"U", b"I", b"l", b"L")
# marker -> (bound unpack_from of its struct format, size): one per number read
_UNPACK = {m: (struct.Struct(fmt).unpack_from, size) for m, (fmt, size, _) in _NUMBERS.items()}
_CONSTANTS = {b"Z": None, b"T": True, b"F": False}
# typed-array type code (a byte value) -> (big-endian dtype, native dtype)
_ARRAY_DTYPES = {m[0]: (np.dtype(dt), np.dtype(dt).newbyteorder("="))
                 for m, (_, _, dt) in _NUMBERS.items()}
# count marker (a byte value) -> (unpack_from, size): the integer markers
_COUNTS = {m[0]: _UNPACK[m] for m in _INTEGERS}


def read_ubjson(data: bytes, *, skip=None) -> object:
    """Decode one UBJSON document.

    Parameters
    ----------
    data : bytes-like
        The whole document (a single top-level value, no trailing bytes).
    skip : dict, optional
        ``{offset of an array's or object's marker: offset just after it}``: those
        containers are not decoded; :data:`SKIPPED` stands in their place (the XGBoost
        reader gathers its trees from the bytes directly).

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
    reader = _Reader(bytes(data))
    reader.skip = skip
    value = reader.value(reader.marker(), 0)
    reader.skip_noop()
    if reader.pos != len(reader.data):
        raise ValueError(f"UBJSON: {len(reader.data) - reader.pos} unexpected bytes after the "
                         f"document at offset {reader.pos}")
    return value


class _Reader:
    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0
        self.skip = None

    # ------------------------------------------------------------ primitives
    def fail(self, what, at=None):
        raise ValueError(f"UBJSON: {what} at offset {self.pos if at is None else at} "
                         f"(document is {len(self.data)} bytes)")

    def take(self, n):
        start = self.pos
        end = start + n
        if n < 0 or end > len(self.data):
            self.fail(f"truncated input: need {n} bytes, {len(self.data) - start} left")
        self.pos = end
        return start

    def marker(self):
        start = self.take(1)
        return self.data[start:start + 1]

    def skip_noop(self):
        while self.data[self.pos:self.pos + 1] == b"N":
            self.pos += 1

    def number(self, m):
        unpack, size = _UNPACK[m]
        return unpack(self.data, self.take(size))[0]

    def count(self, what):
        at = self.pos
        m = self.marker()
        if m not in _INTEGERS:
            self.fail(f"{what} must be an integer, found marker {m!r}", at)
        n = self.number(m)
        if n < 0:
            self.fail(f"negative {what} {n}", at)
        return n

    def string_body(self):
        """A string after its 'S' marker (or an object key): a length with an integer
        marker (XGBoost writes int64 'L') and all bytes present is read inline, anything
        else through :meth:`count` and :meth:`take`, which report problems."""
        data, pos = self.data, self.pos
        count = _COUNTS.get(data[pos]) if pos < len(data) else None
        if count is not None and pos + 1 + count[1] <= len(data):
            start = pos + 1 + count[1]
            end = start + count[0](data, pos + 1)[0]
            if start <= end <= len(data):
                self.pos = end
                try:
                    return data[start:end].decode("utf-8")
                except UnicodeDecodeError as exc:
                    self.fail(f"invalid UTF-8 in a string ({exc.reason})", start)
        n = self.count("string length")
        start = self.take(n)
        try:
            return self.data[start:start + n].decode("utf-8")
        except UnicodeDecodeError as exc:
            self.fail(f"invalid UTF-8 in a string ({exc.reason})", start)

    # ------------------------------------------------------------ values
    def value(self, m, depth):
        if m == b"[" or m == b"{":
            if self.skip and self.pos - 1 in self.skip:
                self.pos = self.skip[self.pos - 1]
                return SKIPPED
            if depth >= MAX_DEPTH:
                self.fail(f"containers nested deeper than {MAX_DEPTH}")
            return self.array(depth + 1) if m == b"[" else self.object(depth + 1)
        if m in _NUMBERS:
            return self.number(m)
        if m in _CONSTANTS:
            return _CONSTANTS[m]
        if m == b"S":
            return self.string_body()
        if m == b"C":
            start = self.take(1)
            c = self.data[start]
            if c > 127:
                self.fail(f"char value {c} is not ASCII", start)
            return chr(c)
        if m == b"H":
            return self.high_precision()
        self.fail(f"unknown or unexpected marker {m!r}", self.pos - 1)

    def high_precision(self):
        at = self.pos
        text = self.string_body()
        try:
            value = int(text)
        except ValueError:
            pass
        else:
            if not -(2**63) <= value < 2**63:
                self.fail(f"high-precision integer of {len(text)} digits is outside the "
                          "int64 range", at)
            return value
        try:
            return float(text)
        except ValueError:
            self.fail(f"high-precision number {text[:40]!r} is not a number", at)

    def container_header(self):
        """Optional ``$type`` and ``#count`` after '[' or '{'."""
        typ = None
        n = None
        nxt = self.data[self.pos:self.pos + 1]
        if nxt == b"$":
            self.pos += 1
            at = self.pos
            typ = self.marker()
            if typ not in _NUMBERS and typ not in _CONSTANTS and typ not in (b"S", b"C", b"H",
                                                                            b"[", b"{"):
                self.fail(f"invalid container type marker {typ!r}", at)
            if self.data[self.pos:self.pos + 1] != b"#":
                self.fail("a typed container ('$') must give a count ('#')")
        if self.data[self.pos:self.pos + 1] == b"#":
            self.pos += 1
            n = self.count("container count")
            left = len(self.data) - self.pos
            per_item = _NUMBERS[typ][1] if typ in _NUMBERS else 1
            # every element needs at least one byte (numbers: their size), so a count
            # that does not fit in what is left is corrupt: refuse before allocating
            if n * per_item > left:
                self.fail(f"container count {n} needs at least {n * per_item} bytes but only "
                          f"{left} are left")
        return typ, n

    def typed_numbers(self):
        """A strongly typed numeric array ``$<type>#<count><values>`` at the current
        position (after '['), read in one go (``_typed_array``): most of an XGBoost
        document. None, the position unchanged, for anything else or any problem, which
        :meth:`array` then reads or reports through :meth:`container_header`."""
        got = _typed_array(self.data, self.pos)
        if got is None:
            return None
        arr, self.pos = got
        return arr

    def array(self, depth):
        arr = self.typed_numbers()
        if arr is not None:
            return arr
        typ, n = self.container_header()
        if typ in _NUMBERS:
            _, size, dtype = _NUMBERS[typ]
            start = self.take(n * size)
            arr = np.frombuffer(self.data, dtype=dtype, count=n, offset=start)
            return arr.astype(arr.dtype.newbyteorder("="))
        out = []
        if n is not None:
            for _ in range(n):
                if typ is None:
                    self.skip_noop()
                    out.append(self.value(self.marker(), depth))
                else:
                    out.append(self.value(typ, depth))
            return out
        while True:
            self.skip_noop()
            m = self.marker()
            if m == b"]":
                return out
            out.append(self.value(m, depth))

    def object(self, depth):
        typ, n = self.container_header()
        data = self.data
        size = len(data)
        out = {}
        i = 0
        while True:
            pos = self.pos
            if n is None:
                if pos < size and data[pos] == 125:  # '}'
                    self.pos = pos + 1
                    return out
            elif i == n:
                return out
            if typ is None:
                # inline, as most members of XGBoost's trees are: a key with an integer
                # length marker and a typed numeric array; anything else, or any
                # problem, is read (and reported) piece by piece below. Inline rather
                # than a function: this loop runs once per member of every tree.
                count = _COUNTS.get(data[pos]) if pos < size else None
                if count is not None and pos + 1 + count[1] <= size:
                    start = pos + 1 + count[1]
                    end = start + count[0](data, pos + 1)[0]
                    if start <= end < size and data[end] == 91:  # '['
                        got = _typed_array(data, end + 1)
                        if got is not None:
                            try:
                                key = data[start:end].decode("utf-8")
                            except UnicodeDecodeError:
                                got = None
                        if got is not None:
                            out[key], self.pos = got
                            i += 1
                            continue
            if n is None:  # no-ops may stand before a key or the end
                self.skip_noop()
                if self.data[self.pos:self.pos + 1] == b"}":
                    self.pos += 1
                    return out
            key = self.string_body()
            if typ is None:
                self.skip_noop()
                out[key] = self.value(self.marker(), depth)
            else:
                out[key] = self.value(typ, depth)
            i += 1


def _typed_array(data, pos):
    """(1-D native-order numpy array, end position) of the strongly typed numeric array
    ``$<type>#<count><values>`` at ``pos`` of ``data`` (just after its '['), or None for
    anything else or any problem (including a count larger than the bytes left)."""
    size = len(data)
    if pos + 3 >= size or data[pos] != 36 or data[pos + 2] != 35:  # '$', '#'
        return None
    dtypes = _ARRAY_DTYPES.get(data[pos + 1])
    count = _COUNTS.get(data[pos + 3])
    if dtypes is None or count is None or pos + 4 + count[1] > size:
        return None
    n = count[0](data, pos + 4)[0]
    start = pos + 4 + count[1]
    big, native = dtypes
    end = start + n * big.itemsize
    if n < 0 or end > size:
        return None
    return np.frombuffer(data, dtype=big, count=n, offset=start).astype(native), end

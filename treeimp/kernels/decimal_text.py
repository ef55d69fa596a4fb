"""Numbers written as decimal text, read in one pass (LightGBM's model text).

``read_numbers`` reads spans of whitespace-separated numbers (one span per tree: a key's
value) from ASCII bytes and checks every span's count against the count it must have. Integers
([+-]digits, within int64) are exact. A decimal number becomes the double nearest to it
(ties to even), the value Python's ``float`` gives:

* Clinger's fast path: a significand M < 2**53 and a power of ten 10**k with |k| <= 22
  are both exact doubles, and one IEEE multiplication or division rounds their exact
  product or quotient correctly.
* M up to 2**64 with 10**-k (1 <= k <= 22): the quotient c = float(M) / 10**k is within
  one step of the nearest double; it is checked, and moved by one step where needed,
  with exact integer arithmetic (c = m * 2**-s): the nearest double is the one whose
  half-way points (2 m +- 1) * 2**-(s + 1) enclose M / 10**k, that is
  |D| = |M * 2**(s + 1 - k) - 2 m * 5**k| < 5**k; |D| < 2**55, so D is computed
  modulo 2**64.

Every other token made of letters, digits, signs, ``.`` and ``_`` (more than 19
significant digits, larger exponents, ``inf``, ``nan``, an exact tie, ...) is left to
the caller, which converts it with Python's ``float`` (its position is returned); any
other byte is an error. ``read_numbers`` releases the GIL: the caller may read several
keys on threads of its own.
"""

import numpy as np
from numba import njit

STATUS_OK = 0
STATUS_COUNT = 1  # a line holds another number of tokens than it must
STATUS_TOKEN = 2  # a token that is not a number of the kind asked for

# 5**k and 10**k (exact doubles) for k = 0..22: module constants, which the compiled
# code holds (array arguments to the per-token helpers would cost a reference count
# each call)
_POW5 = np.array([5 ** k for k in range(23)], dtype=np.uint64)
_POW10 = np.array([float(10 ** k) for k in range(23)])
_INT64_MAX = np.uint64(9223372036854775807)
_MANTISSA = np.uint64((1 << 52) - 1)
_HIDDEN_BIT = np.uint64(1 << 52)


@njit(cache=True)
def _is_space(c):
    """The ASCII characters Python's ``str.split()`` splits at."""
    return c == 32 or (9 <= c <= 13) or (28 <= c <= 31)


@njit(cache=True)
def _token_char(c):
    """Letters, digits, + - . _ : what a token left to Python may hold."""
    return ((48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 43 or c == 45
            or c == 46 or c == 95)


@njit(cache=True)
def _checked_quotient(M, k):
    """The double nearest to M / 10**k (M < 2**64, 1 <= k <= 22), or NaN when this
    path cannot decide (the caller then converts the token in Python)."""
    c = np.float64(M) / _POW10[k]
    for _ in range(3):
        if not (c > 0.0 and c < 4503599627370496.0):  # c < 2**52: s >= 1 below
            return np.nan
        # c = m * 2**-s with 2**52 <= m < 2**53, from its bits (c is normal: c >= 2**53 /
        # 10**22)
        bits = np.float64(c).view(np.uint64)
        s = 1075 - np.int64(bits >> np.uint64(52))
        m = (bits & _MANTISSA) | _HIDDEN_BIT
        if m == np.uint64(1) << np.uint64(52):
            return np.nan  # a power of two: the step below is half the step above
        shift = s + 1 - k  # 2 M 2**s / 2**k against (2 m +- 1) 5**k
        if shift < 0 or shift > 126 or (shift > 63 and M >> np.uint64(127 - shift)):
            return np.nan  # M * 2**shift needs more than 127 bits
        # D = M 2**shift - 2 m 5**k: c is the nearest double when |D| < 5**k. float(M)
        # and the division each round by at most 2**-53 relative, so the first c is
        # within 2 steps (2**-s) of M / 10**k and each step below moves it closer:
        # |D| = 2 5**k |M / 10**k - c| 2**s < 5 * 5**22 < 2**55, and D modulo 2**64
        # (uint64 arithmetic wraps), read as an int64, is D itself
        low = M << np.uint64(shift) if shift < 64 else np.uint64(0)
        d = np.int64(low - np.uint64(2) * m * _POW5[k])
        up = d >= 0
        f = np.int64(_POW5[k])
        dist = d if up else -d
        if dist == f:
            return np.nan  # a tie: left to Python
        if dist < f:
            return c
        c = np.nextafter(c, np.inf) if up else np.nextafter(c, -np.inf)
    return np.nan


@njit(cache=True)
def _nearest(M, exp10):
    """The double nearest to M * 10**exp10 (M > 0), or NaN when it is left to Python."""
    if M < np.uint64(1) << np.uint64(53) and -22 <= exp10 <= 22:
        x = np.float64(M)
        return x * _POW10[exp10] if exp10 >= 0 else x / _POW10[-exp10]
    if -22 <= exp10 < 0:
        return _checked_quotient(M, -exp10)
    return np.nan


@njit(cache=True, nogil=True)
def read_numbers(buf, starts, ends, counts, integers, floats, ints, deferred):
    """Read the spans ``buf[starts[j]:ends[j]]`` (uint8) into ``floats`` (float64) or,
    ``integers`` True, ``ints`` (int64), in order; span j must hold ``counts[j]``
    tokens. ``deferred`` (len(floats), 3): (position in ``floats``, token start, token
    end) of the tokens left to Python, the first of the returned count.

    Returns (status, span, n_deferred, token count or byte offset): STATUS_OK; or
    STATUS_COUNT with the span and the number of tokens it holds (counted to its end,
    or to ``counts[span] + 1``); or STATUS_TOKEN with the span and the bad token's
    start in ``buf``. Nothing is written beyond sum(counts) values.
    """
    out = 0
    n_def = 0
    for j in range(counts.shape[0]):
        want = counts[j]
        pos = starts[j]
        n = ends[j]
        got = 0
        while True:
            while pos < n and _is_space(buf[pos]):
                pos += 1
            if pos >= n:
                break
            if got == want:  # one token too many: the line's count is wrong
                return STATUS_COUNT, j, n_def, got + 1
            # one pass over the token: [+-] digits [. digits] [e|E [+-] digits]; any
            # other token character makes it a token for Python (a bad integer)
            a = pos
            neg = False
            c = buf[pos]
            if c == 43 or c == 45:  # + -
                neg = c == 45
                pos += 1
            M = np.uint64(0)
            n_sig = 0
            n_digits = 0
            exp10 = 0
            plain = True  # the grammar above, read here
            # leading zeros, the digits before the dot, [for a decimal: the dot, (zeros
            # when no digit came before them), the digits]; M accumulates every digit
            # after the leading zeros (wrapping past 19 digits, which are then left to
            # Python, or for an integer an error), so a digit costs one comparison and one
            # multiply-add
            while pos < n and buf[pos] == 48:
                pos += 1
                n_digits += 1
            at = pos
            while pos < n and 48 <= buf[pos] <= 57:
                M = M * np.uint64(10) + np.uint64(buf[pos] - 48)
                pos += 1
            n_sig = pos - at
            if not integers and pos < n and buf[pos] == 46:  # .
                pos += 1
                at = pos
                if n_sig == 0:
                    while pos < n and buf[pos] == 48:
                        pos += 1
                    n_digits += pos - at
                sig_at = pos
                while pos < n and 48 <= buf[pos] <= 57:
                    M = M * np.uint64(10) + np.uint64(buf[pos] - 48)
                    pos += 1
                n_sig += pos - sig_at
                exp10 = -(pos - at)
            n_digits += n_sig
            # more digits than a uint64 holds, or for an integer more than an int64 (M
            # < 10**19 < 2**64 is exact at 19 digits)
            if n_sig > 19 or (integers and n_sig == 19
                              and M > _INT64_MAX + np.uint64(neg)):
                plain = False
            if n_digits == 0:
                plain = False
            if pos < n and (buf[pos] == 101 or buf[pos] == 69) and plain and not integers:
                pos += 1
                eneg = False
                if pos < n and (buf[pos] == 43 or buf[pos] == 45):
                    eneg = buf[pos] == 45
                    pos += 1
                e = 0
                n_e = 0
                while pos < n and 48 <= buf[pos] <= 57:
                    if e < 100000:
                        e = e * 10 + (buf[pos] - 48)
                    n_e += 1
                    pos += 1
                if n_e == 0 or e >= 100000:
                    plain = False
                exp10 += -e if eneg else e
            while pos < n and not _is_space(buf[pos]):
                if not _token_char(buf[pos]):
                    return STATUS_TOKEN, j, n_def, pos
                plain = False  # characters after the number
                pos += 1
            if integers:
                if not plain:
                    return STATUS_TOKEN, j, n_def, a
                if neg:
                    ints[out] = -np.int64(M - np.uint64(1)) - 1 if M else 0
                else:
                    ints[out] = np.int64(M)
            else:
                x = np.nan
                if plain:
                    x = 0.0 if n_sig == 0 else _nearest(M, exp10)
                if np.isnan(x):
                    deferred[n_def, 0] = out
                    deferred[n_def, 1] = a
                    deferred[n_def, 2] = pos
                    n_def += 1
                    x = 0.0
                floats[out] = -x if neg else x
            out += 1
            got += 1
        if got != want:
            return STATUS_COUNT, j, n_def, got
    return STATUS_OK, -1, n_def, 0

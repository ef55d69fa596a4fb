"""CatBoost's hash of a categorical value: ``CityHash64(str(value)) & 0xffffffff``.

CatBoost never stores the category values of a one-hot split, only this hash of the
value's text (``CalcCatFeatureHash`` in CatBoost's sources, CityHash version 1.0, whose
results differ from later CityHash releases). A value reaches a one-hot split through its
hash, so treeimp computes the same hash from the value the user passes: strings as
their UTF-8 bytes, integers as their decimal text (CatBoost's own conversion).

Pure Python on 64-bit integers masked after every operation; it runs once per DISTINCT
value of a column (``hash_values`` caches them), never per row.
"""

from __future__ import annotations

import numbers

import numpy as np

_M = 0xFFFFFFFFFFFFFFFF
_K0 = 0xC3A5C85C97CB3127
_K1 = 0xB492B66FBE98F273
_K2 = 0x9AE16A3B2F90404F
_K3 = 0xC949D7C7509E6557
_KMUL = 0x9DDFEA08EB382D69


def _fetch64(s, i):
    return int.from_bytes(s[i:i + 8], "little")


def _fetch32(s, i):
    return int.from_bytes(s[i:i + 4], "little")


def _rotate(v, shift):
    return v if shift == 0 else ((v >> shift) | (v << (64 - shift))) & _M


def _shift_mix(v):
    return v ^ (v >> 47)


def _hash16(u, v):
    a = ((u ^ v) * _KMUL) & _M
    a ^= a >> 47
    b = ((v ^ a) * _KMUL) & _M
    b ^= b >> 47
    return (b * _KMUL) & _M


def _len0to16(s):
    n = len(s)
    if n > 8:
        a = _fetch64(s, 0)
        b = _fetch64(s, n - 8)
        return _hash16(a, _rotate((b + n) & _M, n)) ^ b
    if n >= 4:
        a = _fetch32(s, 0)
        return _hash16((n + (a << 3)) & _M, _fetch32(s, n - 4))
    if n > 0:
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * _K2) ^ (z * _K3)) & _M) * _K2) & _M
    return _K2


def _len17to32(s):
    n = len(s)
    a = (_fetch64(s, 0) * _K1) & _M
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * _K2) & _M
    d = (_fetch64(s, n - 16) * _K0) & _M
    return _hash16((_rotate((a - b) & _M, 43) + _rotate(c, 30) + d) & _M,
                   (a + _rotate(b ^ _K3, 20) - c + n) & _M)


def _weak32(w, x, y, z, a, b):
    a = (a + w) & _M
    b = _rotate((b + a + z) & _M, 21)
    c = a
    a = (a + x + y) & _M
    b = (b + _rotate(a, 44)) & _M
    return (a + z) & _M, (b + c) & _M


def _weak32_at(s, i, a, b):
    return _weak32(_fetch64(s, i), _fetch64(s, i + 8), _fetch64(s, i + 16),
                   _fetch64(s, i + 24), a, b)


def _len33to64(s):
    n = len(s)
    z = _fetch64(s, 24)
    a = (_fetch64(s, 0) + (n + _fetch64(s, n - 16)) * _K0) & _M
    b = _rotate((a + z) & _M, 52)
    c = _rotate(a, 37)
    a = (a + _fetch64(s, 8)) & _M
    c = (c + _rotate(a, 7)) & _M
    a = (a + _fetch64(s, 16)) & _M
    vf = (a + z) & _M
    vs = (b + _rotate(a, 31) + c) & _M
    a = (_fetch64(s, 16) + _fetch64(s, n - 32)) & _M
    z = _fetch64(s, n - 8)
    b = _rotate((a + z) & _M, 52)
    c = _rotate(a, 37)
    a = (a + _fetch64(s, n - 24)) & _M
    c = (c + _rotate(a, 7)) & _M
    a = (a + _fetch64(s, n - 16)) & _M
    wf = (a + z) & _M
    ws = (b + _rotate(a, 31) + c) & _M
    r = _shift_mix(((vf + ws) * _K2 + (wf + vs) * _K0) & _M)
    return (_shift_mix((r * _K0 + vs) & _M) * _K2) & _M


def city_hash64(s: bytes) -> int:
    """CityHash64 (version 1.0) of a byte string, as an unsigned 64-bit integer."""
    n = len(s)
    if n <= 16:
        return _len0to16(s)
    if n <= 32:
        return _len17to32(s)
    if n <= 64:
        return _len33to64(s)
    x = _fetch64(s, 0)
    y = _fetch64(s, n - 16) ^ _K1
    z = _fetch64(s, n - 56) ^ _K0
    v = _weak32_at(s, n - 64, n, y)
    w = _weak32_at(s, n - 32, (n * _K1) & _M, _K0)
    z = (z + _shift_mix(v[1]) * _K1) & _M
    x = (_rotate((z + x) & _M, 39) * _K1) & _M
    y = (_rotate(y, 33) * _K1) & _M
    pos, left = 0, (n - 1) & ~63
    while True:
        x = (_rotate((x + y + v[0] + _fetch64(s, pos + 16)) & _M, 37) * _K1) & _M
        y = (_rotate((y + v[1] + _fetch64(s, pos + 48)) & _M, 42) * _K1) & _M
        x ^= w[1]
        y ^= v[0]
        z = _rotate(z ^ w[0], 33)
        v = _weak32_at(s, pos, (v[1] * _K1) & _M, (x + w[0]) & _M)
        w = _weak32_at(s, pos + 32, (z + w[1]) & _M, y)
        z, x = x, z
        pos += 64
        left -= 64
        if left == 0:
            break
    return _hash16((_hash16(v[0], w[0]) + _shift_mix(y) * _K1 + z) & _M,
                   (_hash16(v[1], w[1]) + x) & _M)


def value_text(value):
    """The text CatBoost hashes for a categorical value, or None for a missing value
    (None, NaN, pandas NA: CatBoost refuses those; treeimp routes them as an unseen
    category). Integers (also integer-valued floats, as a float column of integer codes
    holds them) are written in decimal, booleans as 1 / 0 (checked against catboost
    1.2.10); strings as they are; bytes as UTF-8 text.
    Other values raise a TypeError naming them (CatBoost accepts only integers and
    strings as categorical values)."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return None
    if isinstance(value, (bytes, np.bytes_)):
        return bytes(value).decode("utf-8")
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):  # CatBoost reads booleans as 0 / 1
        return "1" if value else "0"
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        if v != v:
            return None
        if v == int(v) if np.isfinite(v) else False:
            return str(int(v))
    raise TypeError(f"categorical value {value!r} ({type(value).__name__}) is neither an "
                    "integer nor a string; CatBoost hashes the text of integer and string "
                    "categories only")


def cat_feature_hash(value):
    """CatBoost's hash of a categorical value as a signed 32-bit integer (the form
    CatBoost's JSON model files store), or None for a missing value."""
    text = value_text(value)
    return None if text is None else _hash_text(text)


def _hash_text(text):
    h = city_hash64(text.encode("utf-8")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def hash_values(values):
    """Float64 array of ``cat_feature_hash`` of every entry of a 1-D array (NaN where
    missing); each distinct text is hashed once."""
    arr = np.asarray(values, dtype=object).ravel()
    out = np.empty(arr.shape[0], np.float64)
    cache = {}
    for i, v in enumerate(arr):
        text = value_text(v)
        if text is None:
            out[i] = np.nan
            continue
        h = cache.get(text)
        if h is None:
            h = cache[text] = _hash_text(text)
        out[i] = h
    return out

"""numpy's legacy ``RandomState`` stream (MT19937 and bounded ``randint``) in numba.

scikit-learn draws each tree's bootstrap rows with ``RandomState(seed).randint(0, n, m)``;
regenerating those draws here, in parallel over trees and without index arrays, is much
faster than asking scikit-learn for them (``estimators_samples_``). Only the pieces that
draw needs are here: integer seeding, the twist, the tempered 32-bit outputs a block of
``N`` at a time, and the mask of numpy's masked-rejection ``randint``
(``inbag_bits.bootstrap_bits`` applies the rejection). Each reproduces numpy's
legacy stream exactly; the tests compose them into numpy's one-draw-at-a-time
``randint`` and compare values and generator state.

State is a uint32 array ``key`` of ``N`` words plus a position ``pos`` in it (``N``: the
next draw twists first). Arithmetic runs in uint64 with every operand an explicit uint64
(numba types uint64 mixed with int64 as float64) and is reduced modulo 2**32 where
numpy's uint32 arithmetic wraps.
"""

import numpy as np
from numba import njit

N = 624  # words of state
_M = 397  # twist offset
_MASK32 = np.uint64(0xFFFFFFFF)
_UPPER = np.uint64(0x80000000)
_LOWER = np.uint64(0x7FFFFFFF)
_MATRIX_A = np.uint64(0x9908B0DF)
_SEED_MULT = np.uint64(1812433253)
_ONE = np.uint64(1)


@njit(cache=True)
def mt19937_seed(key, seed):
    """Fill ``key`` (uint32, length ``N``) as ``RandomState(seed)`` does for an integer
    seed in [0, 2**32); returns the position ``N`` (the first draw twists)."""
    s = np.uint64(seed) & _MASK32
    key[0] = s
    for i in range(1, N):
        s = (_SEED_MULT * (s ^ (s >> np.uint64(30))) + np.uint64(i)) & _MASK32
        key[i] = s
    return N


@njit(cache=True)
def mt19937_twist(key):
    """Regenerate all ``N`` words of ``key`` in place (the standard MT19937 recurrence).

    Split in three branch-free loops (by where word ``i + M`` lies) so that they vectorise;
    from ``i = N - M`` on the recurrence reads words regenerated earlier in this pass.
    """
    for i in range(N - _M):
        key[i] = _twist_word(key[i], key[i + 1], key[i + _M])
    for i in range(N - _M, N - 1):
        key[i] = _twist_word(key[i], key[i + 1], key[i + _M - N])
    key[N - 1] = _twist_word(key[N - 1], key[0], key[_M - 1])


@njit(cache=True, inline="always")
def _twist_word(ki, ki1, kim):
    """The new word i from words i, i + 1 and i + M (mod N)."""
    y = (np.uint64(ki) & _UPPER) | (np.uint64(ki1) & _LOWER)
    return np.uint64(kim) ^ (y >> _ONE) ^ ((np.uint64(0) - (y & _ONE)) & _MATRIX_A)


@njit(cache=True, inline="always")
def mt19937_temper(word):
    """The 32-bit output (as uint64) of state word ``word``."""
    y = np.uint64(word)
    y ^= y >> np.uint64(11)
    y ^= (y << np.uint64(7)) & np.uint64(0x9D2C5680)
    y ^= (y << np.uint64(15)) & np.uint64(0xEFC60000)
    y ^= y >> np.uint64(18)
    return y


@njit(cache=True, inline="always")
def mt19937_block(key, out, mask):
    """Twist ``key`` and write its ``N`` outputs, ANDed with ``mask``, to ``out`` (uint32,
    length ``N``): the next ``N`` draws from position ``N``, in one vectorisable pass."""
    mt19937_twist(key)
    for j in range(N):
        out[j] = np.uint32(mt19937_temper(key[j]) & mask)


@njit(cache=True)
def range_mask(rng):
    """The smallest 2**k - 1 >= ``rng`` (a uint64 below 2**32), as uint64."""
    mask = np.uint64(rng)
    mask |= mask >> np.uint64(1)
    mask |= mask >> np.uint64(2)
    mask |= mask >> np.uint64(4)
    mask |= mask >> np.uint64(8)
    mask |= mask >> np.uint64(16)
    return mask

"""Row blocks for standard errors, fixed by each row's global position.

Every evaluation row belongs to one of ``n_blocks`` random blocks; the delete-a-block
jackknife over them gives every measure's standard error. A row's block is a hash of
its global row position and a 64-bit key drawn from ``random_state`` (SplitMix64's
finaliser, then a multiply-shift onto 0 .. n_blocks - 1), so it does not depend on how
the rows are split into chunks, on which process sees them, or in which order: one call,
seven chunks or a thousand dask partitions give every row the same block.

Block sizes are therefore multinomial (n / n_blocks +- sqrt(n / n_blocks)) rather than
equal. For the jackknife of a mean over rows this changes the variance estimate only at
second order (its relative effect is about 2 / n), see tests/test_blocks.py.
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


class BlockKey(int):
    """A block key already drawn (``block_key`` passes it through unchanged)."""


def block_key(random_state) -> int:
    """A 64-bit key from ``random_state``: an int (the same int, the same blocks), a numpy
    Generator or RandomState (a key drawn from it), or None (a fresh random key)."""
    if isinstance(random_state, BlockKey):
        return int(random_state)
    if random_state is None:
        return int(np.random.SeedSequence().generate_state(1, np.uint64)[0])
    if isinstance(random_state, bool):
        raise TypeError(f"random_state must be None, an int or a numpy Generator, got "
                        f"{random_state!r}")
    if isinstance(random_state, numbers.Integral):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return _int_key(int(random_state))
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**64, dtype=np.uint64))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**63, dtype=np.int64)) * 2 + 1
    raise TypeError(f"random_state must be None, an int or a numpy Generator, got "
                    f"{type(random_state).__name__}")


@functools.lru_cache(maxsize=64)
def _int_key(seed: int) -> int:
    """The key of a non-negative int ``random_state`` (a pure function of it, kept for the
    last few seeds: an explain with the same int every call derives it once)."""
    return int(np.random.SeedSequence(seed).generate_state(1, np.uint64)[0])


# positions hashed at a time: the temporaries stay small (a few bytes per row in all)
_HASH_CHUNK = 1 << 16


def row_blocks(positions, key: int, n_blocks: int, dtype=np.int32) -> np.ndarray:
    """Block (0 .. n_blocks - 1, of ``dtype``: int32, or :func:`block_dtype`) of every row
    at the given global positions (an array of ints, or a range: no array of positions is
    then made)."""
    n = len(positions)
    out = np.empty(n, dtype)
    for a in range(0, n, _HASH_CHUNK):
        b = min(n, a + _HASH_CHUNK)
        part = positions[a:b]
        pos = (np.arange(part.start, part.stop, dtype=np.uint64) if isinstance(part, range)
               else np.asarray(part).astype(np.uint64))
        out[a:b] = _hash_blocks(pos, key, n_blocks)
    return out


def block_dtype(n_blocks: int):
    """The smallest integer type of block ids 0 .. n_blocks - 1: uint8 for the default 20
    blocks, a quarter of int32's bytes per row (the ids are only sorted and counted where
    no kernel reads them)."""
    return np.uint8 if n_blocks <= 256 else np.uint16 if n_blocks <= 65536 else np.int32


def _hash_blocks(pos, key, n_blocks):
    with np.errstate(over="ignore"):
        z = (pos + np.uint64(1)) * _GAMMA + np.uint64(key)
        z ^= z >> np.uint64(30)
        z *= _M1
        z ^= z >> np.uint64(27)
        z *= _M2
        z ^= z >> np.uint64(31)
        # the top 32 bits times n_blocks, shifted down: a map onto 0 .. n_blocks - 1
        # whose bias is below n_blocks / 2**32
        z >>= np.uint64(32)
        z *= np.uint64(n_blocks)
        z >>= np.uint64(32)
        return z


def check_positions(rows, n_rows):
    """Global row positions of a chunk: a range for ``rows`` None (0 .. n_rows - 1) or a
    range, else an int64 array of the given integer positions."""
    if rows is None:
        return range(n_rows)
    if isinstance(rows, range):
        if rows.step != 1 or rows.start < 0:
            raise ValueError(f"rows must be a range of consecutive non-negative positions "
                             f"(step 1), got {rows!r}")
        if len(rows) != n_rows:
            raise ValueError(f"rows has {len(rows)} positions but the chunk has {n_rows} "
                             "rows")
        return rows
    arr = np.asarray(rows)
    if arr.ndim != 1 or arr.dtype.kind not in "iu":
        raise TypeError(f"rows must be None, a range or a 1-D array of integer positions, "
                        f"got {type(rows).__name__} of dtype {getattr(arr, 'dtype', None)} "
                        f"and shape {arr.shape}")
    if arr.shape[0] != n_rows:
        raise ValueError(f"rows has {arr.shape[0]} positions but the chunk has {n_rows} rows")
    if arr.size and arr.min() < 0:
        raise ValueError(f"rows must be non-negative positions, got {int(arr.min())}")
    return arr.astype(np.int64, copy=False)


def check_n_blocks(n_blocks, n_rows):
    """``n_blocks`` as an int in 2 .. n_rows (n_rows: the evaluation rows, None when
    not known yet)."""
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, numbers.Integral):
        raise TypeError(f"n_blocks must be an integer, got {n_blocks!r}")
    if n_blocks < 2:
        raise ValueError(f"n_blocks must be >= 2 (standard errors need 2 blocks), got {n_blocks}")
    if n_rows is not None and n_blocks > n_rows:
        raise ValueError(f"n_blocks={n_blocks} is more than the {n_rows} evaluation rows")
    return int(n_blocks)

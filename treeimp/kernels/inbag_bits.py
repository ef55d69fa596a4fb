"""In-bag bit matrices of bagged forests: rows to bits, and scikit-learn's bootstrap
regenerated from each tree's seed (``mt19937``), in parallel over trees.

A tree's in-bag rows are one row of a uint8 matrix (n_trees, ceil(n_rows / 8)), bit r of
it (little bit order) set when row r was drawn. ``treeimp/parsers/sklearn_inbag.py``
decides when the regenerated bootstrap applies and checks it against scikit-learn.
"""

import numpy as np
from numba import njit, prange

from .mt19937 import N, mt19937_block, mt19937_seed, range_mask


@njit(cache=True)
def set_bits(idx, n_rows, out):
    """Set bit idx[i] of ``out`` (little bit order) for every i; returns the first i with
    idx[i] outside [0, n_rows) (nothing set from there on), or -1."""
    for i in range(idx.shape[0]):
        r = idx[i]
        if r < 0 or r >= n_rows:
            return i
        out[r >> 3] |= np.uint8(1 << (r & 7))
    return -1


@njit(cache=True, parallel=True)
def bootstrap_bits(seeds, n_rows, n_draws, bits):
    """Set in ``bits[t]`` (little bit order) the rows that
    ``RandomState(seeds[t]).randint(0, n_rows, n_draws)`` draws, for every tree ``t`` in
    parallel (each tree owns its row of ``bits``). Needs 1 <= n_rows <= 2**31 - 1.

    numpy's masked rejection (keep a masked 32-bit output if it is <= n_rows - 1) runs
    over whole blocks of ``N``
    outputs and branch-free: a rejected output sets no bit and counts no draw.
    """
    rng = np.uint64(n_rows - 1)
    mask = range_mask(rng)
    top = np.uint32(rng)
    for t in prange(seeds.shape[0]):
        row = bits[t]
        if n_rows == 1:  # numpy draws nothing for a single-value range
            row[0] = 1
            continue
        key = np.empty(N, np.uint32)
        block = np.empty(N, np.uint32)
        mt19937_seed(key, seeds[t])
        drawn = 0
        while drawn < n_draws:
            mt19937_block(key, block, mask)
            for j in range(N):
                v = block[j]
                ok = np.int64(v <= top)
                r = np.int64(min(v, top))
                row[r >> 3] |= np.uint8(ok << (r & 7))
                drawn += ok
                if drawn == n_draws:
                    break

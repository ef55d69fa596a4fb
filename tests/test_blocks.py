"""Row blocks for the standard errors: random, reproducible, equal-sized."""

import numpy as np
import pytest

from treeimp.api import _assign_blocks


@pytest.mark.parametrize("n,n_blocks", [(10, 10), (11, 10), (1003, 7), (50_000, 10)])
def test_blocks_are_equal_sized_and_cover_every_id(n, n_blocks):
    block = _assign_blocks(n, n_blocks, 0)
    assert block.shape == (n,) and block.dtype == np.int32
    sizes = np.bincount(block, minlength=n_blocks)
    assert sizes.size == n_blocks
    assert sizes.max() - sizes.min() <= 1


def test_blocks_are_random_and_seeded():
    a, b, c = (_assign_blocks(10_000, 10, s) for s in (0, 0, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # not the sorted pattern 0..9, 0..9, ...: about 1/10 of neighbours share a block
    share = np.mean(a[1:] == a[:-1])
    assert 0.07 < share < 0.13

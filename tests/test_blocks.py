"""Row blocks for the standard errors: random, reproducible, fixed by row position."""

import numpy as np
import pytest

from treeimp.stats.blocks import BlockKey, block_key, check_positions, row_blocks


@pytest.mark.parametrize("n,n_blocks", [(1003, 7), (50_000, 10), (50_000, 20)])
def test_blocks_cover_every_id_with_multinomial_sizes(n, n_blocks):
    block = row_blocks(np.arange(n), block_key(0), n_blocks)
    assert block.shape == (n,) and block.dtype == np.int32
    assert block.min() >= 0 and block.max() < n_blocks
    sizes = np.bincount(block, minlength=n_blocks)
    # independent uniform draws: each size ~ Binomial(n, 1 / n_blocks); a chi-square
    # test of uniformity at the 1e-4 level
    expected = n / n_blocks
    chi2 = np.sum((sizes - expected) ** 2 / expected)
    from scipy.stats import chi2 as chi2_dist

    assert chi2_dist.sf(chi2, n_blocks - 1) > 1e-4


def test_blocks_are_random_seeded_and_independent_of_chunking():
    pos = np.arange(10_000)
    a, b, c = (row_blocks(pos, block_key(s), 10) for s in (0, 0, 1))
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    # not a pattern: about 1/10 of neighbours share a block
    share = np.mean(a[1:] == a[:-1])
    assert 0.07 < share < 0.13
    # a row's block depends on its position alone: any subset, in any order
    rng = np.random.default_rng(0)
    some = rng.permutation(pos)[:777]
    np.testing.assert_array_equal(row_blocks(some, block_key(0), 10), a[some])
    # a drawn key passes through unchanged; generators give a key
    assert block_key(BlockKey(12345)) == 12345
    assert block_key(np.random.default_rng(3)) == block_key(np.random.default_rng(3))


def test_bad_random_state_and_positions_are_refused():
    for bad in (True, -1):
        with pytest.raises((TypeError, ValueError), match="random_state"):
            block_key(bad)
    with pytest.raises(TypeError, match="random_state"):
        block_key("seed")
    with pytest.raises(ValueError, match="rows has 3 positions but the chunk has 4 rows"):
        check_positions(range(3), 4)
    with pytest.raises(ValueError, match="non-negative"):
        check_positions(np.array([-1, 2]), 2)
    with pytest.raises(TypeError, match="integer positions"):
        check_positions(np.array([0.5, 1.0]), 2)
    np.testing.assert_array_equal(check_positions(range(5, 8), 3), [5, 6, 7])


def test_jackknife_of_a_mean_with_multinomial_blocks_is_unbiased():
    """The delete-a-block jackknife of a mean over rows with hash-assigned (unequal)
    blocks estimates the mean's variance: over repetitions, the average squared
    standard error matches the true variance sigma^2 / n within a few percent."""
    from treeimp.results.finalize import jackknife_stderr

    rng = np.random.default_rng(1)
    n, B, reps = 300, 20, 2000
    var = []
    for r in range(reps):
        x = rng.normal(size=n)
        block = row_blocks(np.arange(n), block_key(r), B)
        sums = np.bincount(block, weights=x, minlength=B)
        counts = np.bincount(block, minlength=B)
        loo = (x.sum() - sums) / (n - counts)
        var.append(jackknife_stderr(loo[:, None])[0] ** 2)
    ratio = np.mean(var) / (1.0 / n)
    assert 0.93 < ratio < 1.07, ratio

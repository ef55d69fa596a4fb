"""LightGBM's numbers read from text in one pass (kernels/decimal_text.py through
parsers/lgbm_numbers.py) must be exactly Python's float() / int() of every token, and a
count or token that is wrong must raise a ValueError naming the tree and the key."""

import numpy as np
import pytest

from treeimp.parsers.lgbm_numbers import tree_numbers


def _read(lines, dtype, key="k"):
    blocks = [{key: line} for line in lines]
    counts = [len(line.split()) for line in lines]
    return tree_numbers(blocks, key, list(range(len(lines))), counts, dtype)


def _tokens(seed):
    rng = np.random.default_rng(seed)
    v = rng.standard_normal(20_000) * 10.0 ** rng.integers(-12, 12, 20_000)
    toks = [f"{x:.17g}" for x in v] + [f"{x:.16g}" for x in v[:4000]]
    toks += [f"{x:.6g}" for x in v[:4000]] + [repr(float(x)) for x in v[:4000]]
    # significands of 15 to 19 digits against every power of ten the kernel reads
    toks += [f"{rng.integers(1, 2**63)}e-{rng.integers(1, 23)}" for _ in range(3000)]
    toks += [f"{rng.integers(1, 2**53)}e{rng.integers(-22, 23)}" for _ in range(3000)]
    toks += [f"0.{rng.integers(0, 10**17):017d}" for _ in range(3000)]
    # ties, powers of two, signs, zeros, specials, long and tiny numbers
    toks += ["9007199254740993", "9007199254740995", "0.5", "1", "-0", "-0.0", "+0.0",
             "0.125", "4503599627370496.5", "1e22", "1e-22", "1e23", "-.5", "5.", "+3",
             "inf", "-inf", "nan", "Infinity", "1e400", "1e-400", "2.5e-324",
             "123456789012345678901234", "0.000000000000000000000000001",
             "2.2250738585072014e-308", "4.9406564584124654e-324", "1E5", "1e+05",
             "0.30000000000000004", "0.1", "0.2", "1_0"]
    return toks


@pytest.mark.parametrize("seed", [0, 1])
def test_floats_are_pythons_floats(seed):
    toks = _tokens(seed)
    rng = np.random.default_rng(seed)
    # lines of random lengths, some with several spaces or tabs between the numbers
    cuts = np.sort(rng.choice(np.arange(1, len(toks)), size=300, replace=False))
    lines = ["  \t".join(part) if i % 7 == 0 else " ".join(part)
             for i, part in enumerate(np.split(np.array(toks, dtype=object), cuts))]
    got = _read(lines, float)
    want = np.array([float(t) for t in toks])
    same = (got.view(np.int64) == want.view(np.int64)) | (np.isnan(got) & np.isnan(want))
    assert same.all(), [toks[i] for i in np.flatnonzero(~same)[:5]]


def test_integers_are_pythons_ints():
    rng = np.random.default_rng(2)
    vals = rng.integers(-2**63, 2**63 - 1, size=5000, endpoint=True).tolist()
    vals += [0, -1, 1, 2**63 - 1, -2**63, 7, -7]
    toks = [str(v) for v in vals] + ["+5", "-0", "007"]
    got = _read([" ".join(toks[i:i + 50]) for i in range(0, len(toks), 50)], int)
    assert got.dtype == np.int64
    assert got.tolist() == [int(t) for t in toks]


@pytest.mark.parametrize("token", ["9223372036854775808", "-9223372036854775809",
                                   "1.0", "1e3", "x", "-", "+", "0x10", "1-2"])
def test_bad_integers_name_the_tree(token):
    with pytest.raises(ValueError, match=r"tree 1: k has a value that is not an integer"):
        _read(["1 2", f"3 {token}"], int)


@pytest.mark.parametrize("token", ["abc", "1.2.3", "--1", "1e", "1e+", "e5", "1#", "1\xe9",
                                   ".", "1,5"])
def test_bad_floats_name_the_tree(token):
    with pytest.raises(ValueError, match=r"tree 2: k has a value that is not a number"):
        _read(["1 2", "3 4", f"5 {token}"], float)


def test_counts_are_checked_per_tree():
    blocks = [{"k": "1 2 3"}, {"k": "4 5"}, {"k": "6"}]
    # the total agrees but trees 0 and 1 do not: tree 0 is named
    with pytest.raises(ValueError, match=r"tree 0: k has 3 values, expected 2"):
        tree_numbers(blocks, "k", [0, 1, 2], [2, 3, 1], float)
    with pytest.raises(ValueError, match=r"tree 2: k has 1 values, expected 2"):
        tree_numbers(blocks, "k", [0, 1, 2], [3, 2, 2], int)
    assert tree_numbers(blocks, "k", [2, 0], [1, 3], int).tolist() == [6, 1, 2, 3]

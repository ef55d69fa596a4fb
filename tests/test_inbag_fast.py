"""The regenerated bootstrap (``treeimp.kernels.mt19937`` and the numba in-bag path of
``sklearn_inbag_bits``) equals numpy's ``RandomState`` draws and scikit-learn's own
``estimators_samples_``, and falls back to the latter whenever it may not apply."""

import numpy as np
import pytest
import sklearn
import sklearn.ensemble._forest as sk_forest
from numba import njit
from sklearn.ensemble import ExtraTreesClassifier, RandomForestClassifier, RandomForestRegressor

from treeimp.kernels.mt19937 import (
    N,
    mt19937_block,
    mt19937_seed,
    mt19937_temper,
    mt19937_twist,
    range_mask,
)
from treeimp.parsers.sklearn_inbag import _regenerated_bits, bootstrap_bits, sklearn_inbag_bits

# scikit-learn draws the bootstrap in proportion to sample weights from 1.9 on
SKLEARN = tuple(int(p) for p in sklearn.__version__.split(".")[:2])
SEEDS = [0, 1, 5, 42, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1, 1_234_567_890, 3_987_654_321]
RANGES = [1, 2, 3, 7, 8, 9, 1000, 49999, 65536, 65537, 2**20 + 3, 2**31 - 1]
SIZES = [1, 623, 624, 625, 2500]


# numpy's one-draw-at-a-time legacy randint, composed from the module's pieces (the
# library itself draws whole blocks: bootstrap_bits)
@njit
def mt19937_next32(key, pos):
    """The next 32-bit output (as uint64) and the new position."""
    if pos >= N:
        mt19937_twist(key)
        pos = 0
    return mt19937_temper(key[pos]), pos + 1


@njit
def bounded32(key, pos, rng, mask):
    """A uniform value in [0, ``rng``] for 1 <= ``rng`` <= 2**32 - 1 by numpy's masked rejection
    (``mask = range_mask(rng)``: keep the low bits of a 32-bit output until they are
    <= ``rng``); returns (value as uint64, new position)."""
    while True:
        v, pos = mt19937_next32(key, pos)
        v &= mask
        if v <= rng:
            return v, pos


@njit
def legacy_randint(key, pos, low, high, out):
    """Fill the int64 array ``out`` as ``RandomState.randint(low, high, out.size)`` does
    (default int64 dtype; dtype=np.int32 draws the same stream) from state (``key``,
    ``pos``); returns the new position.

    Needs 1 <= high - low <= 2**32. A single-value range draws nothing, like numpy.
    """
    if high - low < 1 or high - low > 2**32:
        raise ValueError("legacy_randint needs 1 <= high - low <= 2**32")
    rng = np.uint64(high - 1 - low)
    if rng == np.uint64(0):
        out[:] = low
        return pos
    mask = range_mask(rng)
    for i in range(out.size):
        v, pos = bounded32(key, pos, rng, mask)
        out[i] = low + np.int64(v)
    return pos


def _seeded(seed):
    key = np.empty(N, np.uint32)
    return key, mt19937_seed(key, seed)


def _packed(rows_per_tree, n_rows):
    """Bits from index arrays via bincount + packbits (independent of the code tested)."""
    return np.stack([np.packbits(np.bincount(np.asarray(r), minlength=n_rows) > 0,
                                 bitorder="little") for r in rows_per_tree])


@pytest.mark.parametrize("seed", SEEDS)
def test_seeding_equals_numpy_state(seed):
    key, pos = _seeded(seed)
    _, np_key, np_pos, *_ = np.random.RandomState(seed).get_state()
    np.testing.assert_array_equal(key, np_key)
    assert pos == np_pos


@pytest.mark.parametrize("seed", SEEDS)
def test_raw_outputs_equal_numpy(seed):
    """A full 32-bit range is numpy's raw output stream, one draw per output."""
    want = np.random.RandomState(seed).randint(0, 2**32, 2 * N + 5)
    key, pos = _seeded(seed)
    got = []
    for _ in range(want.size):
        v, pos = mt19937_next32(key, pos)
        got.append(int(v))
    np.testing.assert_array_equal(got, want)
    key, _ = _seeded(seed)
    block = np.empty(N, np.uint32)
    for b in range(2):
        mt19937_block(key, block, range_mask(np.uint64(2**32 - 1)))
        np.testing.assert_array_equal(block, want[b * N:(b + 1) * N])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("n", RANGES)
def test_randint_equals_numpy(seed, n):
    """Same values and the same generator state afterwards (so the same draws consumed),
    over consecutive calls."""
    rs = np.random.RandomState(seed)
    key, pos = _seeded(seed)
    for size in SIZES:
        want = rs.randint(0, n, size)
        got = np.empty(size, np.int64)
        pos = legacy_randint(key, pos, 0, n, got)
        np.testing.assert_array_equal(got, want)
        _, np_key, np_pos, *_ = rs.get_state()
        assert pos == np_pos
        np.testing.assert_array_equal(key, np_key)


def test_randint_with_offset_and_single_value_range():
    rs = np.random.RandomState(11)
    key, pos = _seeded(11)
    for low, high, size in [(-5, 100, 50), (7, 8, 30), (3, 3 + 2**32, 40), (10**12, 10**12 + 9, 9)]:
        got = np.empty(size, np.int64)
        pos = legacy_randint(key, pos, low, high, got)
        np.testing.assert_array_equal(got, rs.randint(low, high, size))
        assert pos == rs.get_state()[2]
    with pytest.raises(ValueError):
        legacy_randint(key, pos, 5, 5, np.empty(1, np.int64))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 1000, 65536, 65537, 2**20 + 3])
@pytest.mark.parametrize("n_draws", [1, 624, 625, 1500])
def test_bootstrap_kernel_equals_numpy(n, n_draws):
    seeds = np.array([0, 3, 2**31 + 7, 2**32 - 1], np.uint32)
    bits = np.zeros((seeds.size, (n + 7) // 8), np.uint8)
    bootstrap_bits(seeds, n, n_draws, bits)
    want = _packed([np.random.RandomState(int(s)).randint(0, n, n_draws) for s in seeds], n)
    np.testing.assert_array_equal(bits, want)


def _xy(n_rows=203, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, 3))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n_rows) > 0).astype(int)


def _public_bits(model, n_rows):
    return _packed(model.estimators_samples_, n_rows)


@pytest.mark.parametrize("cls", [RandomForestClassifier, RandomForestRegressor,
                                 ExtraTreesClassifier])
@pytest.mark.parametrize("max_samples", [None, 77, 0.6])
@pytest.mark.parametrize("random_state", [0, 9, None])
def test_forest_bits_equal_estimators_samples(cls, max_samples, random_state):
    X, y = _xy()
    model = cls(n_estimators=6, max_depth=2, bootstrap=True, max_samples=max_samples,
                random_state=random_state).fit(X, y)
    assert _regenerated_bits(model, len(X)) is not None  # the fast path applies
    np.testing.assert_array_equal(sklearn_inbag_bits(model, len(X)),
                                  _public_bits(model, len(X)))


def test_single_training_row():
    model = RandomForestRegressor(n_estimators=3, random_state=0).fit(np.ones((1, 2)), [1.0])
    assert _regenerated_bits(model, 1) is not None
    np.testing.assert_array_equal(sklearn_inbag_bits(model, 1), _public_bits(model, 1))


def test_large_tree_seeds():
    """Tree seeds above 2**31 (sklearn draws them below) still follow numpy's seeding."""
    X, y = _xy()
    model = RandomForestClassifier(n_estimators=3, max_depth=2, random_state=0).fit(X, y)
    for tree, seed in zip(model.estimators_, [2**31, np.uint32(2**32 - 1), np.int64(2**32 - 2)]):
        tree.random_state = seed
    assert _regenerated_bits(model, len(X)) is not None
    np.testing.assert_array_equal(sklearn_inbag_bits(model, len(X)),
                                  _public_bits(model, len(X)))


@pytest.mark.parametrize("kind", ["sample_weight", "class_weight"])
def test_weighted_bootstrap_uses_public_path(kind, monkeypatch):
    X, y = _xy()
    w = np.random.default_rng(1).uniform(0.1, 3.0, len(X))
    if kind == "sample_weight":
        model = RandomForestClassifier(n_estimators=5, max_depth=2, random_state=0)
        model.fit(X, y, sample_weight=w)
    else:
        model = RandomForestClassifier(n_estimators=5, max_depth=2, random_state=0,
                                       class_weight="balanced").fit(X, y)
    np.testing.assert_array_equal(sklearn_inbag_bits(model, len(X)),
                                  _public_bits(model, len(X)))
    if SKLEARN < (1, 9):  # weights scale the counts of an unweighted draw: the fast path
        assert _regenerated_bits(model, len(X)) is not None
        return
    calls = []
    monkeypatch.setattr(sk_forest, "_generate_sample_indices",
                        lambda *args: calls.append(args) or np.zeros(1, np.int32))
    assert _regenerated_bits(model, len(X)) is None
    assert not calls  # refused up front, not only by the check of tree 0


@pytest.fixture
def forest():
    X, y = _xy(157)
    return RandomForestClassifier(n_estimators=6, max_depth=2, random_state=3).fit(X, y), 157


def test_checked_fast_path_calls_the_generator_once(forest, monkeypatch):
    """With scikit-learn's generator unchanged, only tree 0 is drawn by it (the rest come
    from the numba kernel); the public path would draw all six."""
    model, n = forest
    want = _public_bits(model, n)
    original = sk_forest._generate_sample_indices
    calls = []

    def counted(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(sk_forest, "_generate_sample_indices", counted)
    got = sklearn_inbag_bits(model, n)
    assert len(calls) == 1 and calls[0][0] == model.estimators_[0].random_state
    np.testing.assert_array_equal(got, want)


def test_changed_generator_falls_back_to_public_path(forest, monkeypatch):
    """If scikit-learn's generator no longer matches the regenerated draws, the result is
    whatever ``estimators_samples_`` reports (here: the changed generator's rows)."""
    model, n = forest
    unchanged = _public_bits(model, n)
    original = sk_forest._generate_sample_indices

    def shifted(random_state, n_samples, n_samples_bootstrap, *sample_weight):  # < 1.9: none
        rows = original(random_state, n_samples, n_samples_bootstrap, *sample_weight)
        return ((rows + 1) % n_samples).astype(np.int32)

    monkeypatch.setattr(sk_forest, "_generate_sample_indices", shifted)
    want = _public_bits(model, n)
    assert not np.array_equal(want, unchanged)
    assert _regenerated_bits(model, n) is None
    np.testing.assert_array_equal(sklearn_inbag_bits(model, n), want)


def test_generator_without_sample_weight(forest, monkeypatch):
    """scikit-learn < 1.9 draws with ``_generate_sample_indices(seed, n, n_bootstrap)`` and
    ``randint(..., dtype=np.int32)``: the check of tree 0 still passes."""
    model, n = forest
    want = _public_bits(model, n)
    calls = []

    def old_generator(random_state, n_samples, n_samples_bootstrap):
        calls.append(random_state)
        return np.random.RandomState(random_state).randint(0, n_samples, n_samples_bootstrap,
                                                           dtype=np.int32)

    monkeypatch.setattr(sk_forest, "_generate_sample_indices", old_generator)
    np.testing.assert_array_equal(sklearn_inbag_bits(model, n), want)
    assert calls == [model.estimators_[0].random_state]


def test_failing_generator_falls_back_to_public_path(forest, monkeypatch):
    model, n = forest

    def broken(*args):
        raise RuntimeError("generator changed")

    monkeypatch.setattr(sk_forest, "_generate_sample_indices", broken)
    assert _regenerated_bits(model, n) is None
    with pytest.raises(ValueError, match="cannot recover the in-bag rows.*generator changed"):
        sklearn_inbag_bits(model, n)


def test_overridden_estimators_samples_is_asked(forest, monkeypatch):
    model, n = forest
    rows = [np.arange(t, n, 5) for t in range(len(model.estimators_))]
    monkeypatch.setattr(type(model), "estimators_samples_", property(lambda self: rows))
    np.testing.assert_array_equal(sklearn_inbag_bits(model, n), _packed(rows, n))
